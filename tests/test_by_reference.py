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
    assert f"    {model}& adj_m = _wp_adj_args->m;" in out  # and a backward kernel's adjoints of them


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


def _source_after_diff_step(module_name: str) -> str:
    """The generated C++ of the differentiable step's module `module_name` (float64), after one
    diff_step and its backward on a small model."""
    import torch

    from simrl import diff_step

    sim = Sim.from_mjcf(SLIDE_HINGE, num_worlds=2, device="cpu", dtype="float64", schedule="fused")
    qpos = torch.tensor(sim.qpos.numpy(), requires_grad=True)
    qvel = torch.zeros(2, sim.nv, dtype=torch.float64, requires_grad=True)
    ctrl = torch.zeros(2, sim.nu, dtype=torch.float64, requires_grad=True)
    qpos1, qvel1 = diff_step(sim, qpos, qvel, ctrl)
    (qpos1.sum() + qvel1.sum()).backward()
    module = kernel_module(wp.float64, name=module_name, backward=True)
    hashes = [e.module_hash.hex()[:7] for e in module.execs.values()]
    assert hashes, f"diff_step loaded no library of the module {module.name}"
    path = os.path.join(wp.config.kernel_cache_dir, f"wp_{module.name}_{hashes[-1]}")
    return "".join(open(os.path.join(path, f)).read() for f in os.listdir(path) if f.endswith(".cpp"))


def test_backward_kernels_bind_the_adjoint_structs_by_reference():
    """The differentiable step's kernels (over worlds x dofs, rows, ...) bind the adjoints of
    the Model and Data to the launch's block too: a copy per thread was 13 KB."""
    text = _source_after_diff_step("grad_step")
    for struct in (model_struct(wp.float64), data_struct(wp.float64)):
        bound = re.findall(rf"^\s+{struct.native_name}(&?) adj_\w+ = _wp_adj_args->", text, re.MULTILINE)
        assert bound, f"no backward kernel takes {struct.native_name}: the form of Warp's C++ changed"
        assert all(bound), f"{bound.count('')} of {len(bound)} backward kernels copy their adjoint {struct.native_name}"


def test_adjoints_replay_no_function_that_returns_nothing():
    """The differentiable step's backward kernels and adjoint functions skip the replay of every
    function that returns nothing (simrl.sim.no_replay): in the forward section of each, such a
    call is a comment. A Warp that stopped honouring skip_replay for user functions would make
    the backward pass slower again, not wrong (tests/test_grad.py checks the gradients)."""
    text = _source_after_diff_step("grad")
    # functions that return nothing: Warp's C++ declares them void without `& ret_` outputs
    headers = re.findall(r"^static (?:CUDA_CALLABLE )?void (\w+)\((.*?)\)\n\{", text, re.MULTILINE | re.DOTALL)
    void = {name for name, params in headers if not name.startswith(("adj_", "replay_")) and "& ret_" not in params}
    assert void, "no function that returns nothing in the module: the form of Warp's C++ changed"
    bodies = re.findall(r"^static (?:CUDA_CALLABLE )?void (adj_\w+|\w+_cpu_kernel_backward)\((.*?)\n}\n", text,
                        re.MULTILINE | re.DOTALL)
    assert any(name.endswith("_cpu_kernel_backward") for name, _ in bodies), "no backward kernel in the module"
    skipped = 0
    for name, body in bodies:
        if "// forward" not in body:
            continue
        forward = body.split("// forward", 1)[1].split("// reverse", 1)[0]
        replayed = [c for c in re.findall(r"^\s*(\w+)\(", forward, re.MULTILINE) if c in void]
        assert not replayed, f"{name} replays {replayed[:3]} before its adjoint"
        skipped += sum(c in void for c in re.findall(r"^\s*// (\w+)\(var_", forward, re.MULTILINE))
    assert skipped, "no skipped replay found: the form of Warp's C++ changed"


def test_adjoints_store_no_field_adjoints_of_the_structs():
    """The differentiable step's adjoints assign no field adjoint of the Model or Data
    (`adj_d.qvel = adj_7;`, simrl.sim.by_reference._without_field_adjoints): each was a store of
    an array descriptor into the launch's argument block, read by nothing."""
    text = _source_after_diff_step("grad")
    adjoints = re.findall(r"^static (?:CUDA_CALLABLE )?void (adj_\w+)\(", text, re.MULTILINE)
    assert adjoints, "no adjoint function in the module: the form of Warp's C++ changed"
    stored = re.findall(r"^\s*adj_[md]\.\w+ = adj_\d+;$", text, re.MULTILINE)
    assert not stored, f"{len(stored)} field adjoints stored, e.g. {stored[:2]}"
    # the calls still hand the struct adjoints on
    assert re.search(r"^\s*adj_\w+\(.*\badj_m, adj_d\b", text, re.MULTILINE)
