"""The Model and Data structs reach the CPU build's functions by reference (simrl.sim.by_reference).

Results do not depend on it (every parity suite runs through it); these tests check that it takes
effect: with a Warp whose generated headers changed form, the step would silently go back to
copying 13 KB per function call.
"""

import os
import re

import warp as wp

from simrl.sim.by_reference import _by_reference, _kernel_by_reference
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.sim import Sim
from simrl.sim.types import kernel_module
from tests.models import SLIDE_HINGE

HEADER = r"^\s+{name}(?P<ref>& __restrict__)? var_\w+[,)]$"


def test_only_the_headers_of_registered_structs_change():
    model = model_struct(wp.float64).native_name
    source = (f"static void f_0(\n    {model} var_m,\n    wp::int32 var_w)\n{{\n"
              f"    {model} var_3;\n    var_3 = var_m;\n}}\n"
              f"static void adj_f_0(\n    {model} var_m,\n    wp::int32 var_w,\n    {model} & adj_m,\n"
              f"    wp::int32 & adj_w)\n{{\n}}\n"
              "static void g_0(\n    Other_1234 var_s)\n{\n}\n")
    out = _by_reference(source)
    assert out.count(f"    {model}& __restrict__ var_m,") == 2  # forward and adjoint
    assert f"    {model} var_3;" in out  # a local of the type is untouched
    assert f"    {model} & adj_m," in out  # adjoint arguments already are references
    assert "    Other_1234 var_s)" in out  # a struct that is not registered


def test_kernels_bind_the_launch_arguments_by_reference():
    model = model_struct(wp.float64).native_name
    source = (f"    {model} var_m = _wp_args->m;\n    wp::int32 var_n = _wp_args->n;\n"
              f"    {model} adj_m = _wp_adj_args->m;\n")
    out = _kernel_by_reference(source)
    assert f"    {model}& var_m = _wp_args->m;" in out
    assert "    wp::int32 var_n = _wp_args->n;" in out
    assert f"    {model} adj_m = _wp_adj_args->m;" in out  # a backward kernel accumulates into its own


def test_the_engine_module_takes_model_and_data_by_reference():
    sim = Sim.from_mjcf(SLIDE_HINGE, num_worlds=2, device="cpu", dtype="float64", schedule="fused")
    sim.step()
    module = kernel_module(wp.float64)
    # the library the step ran (the module's hash grows with the kernels built into it)
    hashes = [e.module_hash.hex()[:7] for e in module.execs.values()]
    assert hashes, "the step loaded no library of the engine's module"
    path = os.path.join(wp.config.kernel_cache_dir, f"wp_{module.name}_{hashes[-1]}")
    sources = [os.path.join(path, f) for f in os.listdir(path) if f.endswith(".cpp")]
    assert sources, f"no generated C++ in {path}"
    text = open(sources[0]).read()
    for struct in (model_struct(wp.float64), data_struct(wp.float64)):
        headers = [m.group("ref") for m in re.finditer(HEADER.format(name=struct.native_name), text, re.MULTILINE)]
        assert headers, f"no function takes {struct.native_name}: the header form of Warp's C++ changed"
        by_value = headers.count(None)
        assert by_value == 0, f"{by_value} of {len(headers)} functions take {struct.native_name} by value"
        # what makes a reference safe: no function assigns a field of the engine's structs
        assigned = re.findall(r"^\s*var_[md]\.\w+ = .*$", text, re.MULTILINE)
        assert not assigned, f"a kernel function assigns a field of m or d: {assigned[:3]}"
        bound = re.findall(rf"^\s+{struct.native_name}(&?) var_\w+ = _wp_args->", text, re.MULTILINE)
        assert bound and all(bound), f"a kernel copies its {struct.native_name} argument ({bound})"
