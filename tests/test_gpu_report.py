"""The GPU report (simrl.bench.gpu_report, scripts/gpu_report.py): its reading of ptxas's report
and of PTX, its launch recorder (checked against Warp's own log of the launches it runs), and
(slow) the whole report on the quadruped."""

import ast
import contextlib
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import warp as wp

import simrl
from simrl.bench import gpu_report
from simrl.bench.launches import Launch, LaunchRecorder, make_sim
from simrl.bench.ptxas import find_ptxas, kernel_numbers, parse_ptxas, ptx_calls, ptx_entries
from simrl.sim import grad

ROOT = Path(__file__).resolve().parents[1]

PENDULUM = """
<mujoco model="pendulum">
  <option timestep="0.01" integrator="Euler"/>
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <motor joint="hinge" gear="2" ctrlrange="-1 1" ctrllimited="true"/>
  </actuator>
</mujoco>
"""

# ptxas 13.5 (V13.5.37) -v -arch=sm_90 on the PTX that Warp 1.19 built for simrl's engine module
# (float32), as printed (the entries of the rk4 kernels left out)
PTXAS_SIM = """\
ptxas info    : 154 bytes gmem
ptxas info    : Compiling entry function 'build__locals__euler_d9602a49_cuda_kernel_forward' for 'sm_90'
ptxas info    : Function properties for build__locals__euler_d9602a49_cuda_kernel_forward
    32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 48 registers, used 0 barriers, 32 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 166.321 ms
ptxas info    : Compiling entry function 'build__locals__forward_b5e921f9_cuda_kernel_forward' for 'sm_90'
ptxas info    : Function properties for build__locals__forward_b5e921f9_cuda_kernel_forward
    2632 bytes stack frame, 1868 bytes spill stores, 1788 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 2632 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 11597.934 ms
"""

# the same ptxas on mujoco_warp 4.0.0's tiled Cholesky kernel (block 64): barriers, its own smem
CHOLESKY = "_update_gradient_cholesky__locals__kernel_899c794f_cuda_kernel_forward"
PTXAS_TILED = f"""\
ptxas info    : 26485 bytes gmem
ptxas info    : Compiling entry function '{CHOLESKY}' for 'sm_90'
ptxas info    : Function properties for {CHOLESKY}
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 38 registers, used 1 barriers, 288 bytes smem
ptxas info    : Compile time = 362.337 ms
"""

# simrl's differentiable-step module: the adjoint of the constraint kernel calls collision
# functions that were not inlined; ptxas reports their spills apart, after the entry
BOX_BOX = ("_ZN63_INTERNAL_00000000_32_wp_simrl_grad_float32_d1eac86_cu_b52b643c24build__locals__box_box_0EN2wp5vec_"
           "tILj3EfEENS0_5mat_tILj3ELj3EfEES2_S2_S4_S2_fNS0_7array_tIfEENS5_IS2_EENS5_IS4_EEii")
CLIP = ("_ZN63_INTERNAL_00000000_32_wp_simrl_grad_float32_d1eac86_cu_b52b643c32build__locals__clip_half_plane_0EN2wp5"
        "vec_tILj12EfEES2_S2_iiffRS2_S3_S3_Ri")
CONSTRAINT = "build__locals__constraint_981ae3f9_cuda_kernel"
PTXAS_GRAD = f"""\
ptxas info    : 154 bytes gmem
ptxas info    : Compiling entry function '{CONSTRAINT}_backward' for 'sm_90'
ptxas info    : Function properties for {CONSTRAINT}_backward
    12968 bytes stack frame, 11110 bytes spill stores, 13514 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 12968 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 65320.398 ms
ptxas info    : Function properties for {BOX_BOX}
    0 bytes stack frame, 876 bytes spill stores, 736 bytes spill loads
ptxas info    : Function properties for {CLIP}
    0 bytes stack frame, 144 bytes spill stores, 140 bytes spill loads
ptxas info    : Compiling entry function '{CONSTRAINT}_forward' for 'sm_90'
ptxas info    : Function properties for {CONSTRAINT}_forward
    2320 bytes stack frame, 1468 bytes spill stores, 1472 bytes spill loads
ptxas info    : Used 255 registers, used 0 barriers, 2320 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 4046.994 ms
"""
# the PTX of that module, cut down to its declarations and the call sites of the functions above
# (trailing spaces of the call lines left out)
PTX_GRAD = f"""\
.version 9.4
.target sm_90
.address_size 64

.func  (.param .b32 func_retval0) {BOX_BOX}(
\t.param .align 4 .b8 {BOX_BOX}_param_0[12],
\t.param .b32 {BOX_BOX}_param_11
)
{{
\tret;
}}
.func {CLIP}(
\t.param .align 4 .b8 {CLIP}_param_0[48]
)
{{
\tret;
}}
.visible .entry {CONSTRAINT}_forward(
\t.param .align 8 .b8 {CONSTRAINT}_forward_param_0[24]
)
{{
\tret;
}}
.visible .entry {CONSTRAINT}_backward(
\t.param .align 8 .b8 {CONSTRAINT}_backward_param_0[24]
)
{{
\t{{ // callseq 2, 0
\t.param .b32 retval0;
\tcall.uni (retval0),
\t{BOX_BOX},
\t(
\tparam0
\t);
\t}} // callseq 2
\t{{ // callseq 6, 0
\tcall.uni
\t{CLIP},
\t(
\tparam0
\t);
\t}} // callseq 6
\tret;
}}
"""


def test_parse_ptxas_reads_every_entry():
    report = parse_ptxas(PTXAS_SIM)
    assert set(report) == {"build__locals__euler_d9602a49_cuda_kernel_forward",
                           "build__locals__forward_b5e921f9_cuda_kernel_forward"}
    forward = report["build__locals__forward_b5e921f9_cuda_kernel_forward"]
    assert forward == {"entry": True, "arch": "sm_90", "registers": 255, "stack_frame_bytes": 2632,
                       "spill_store_bytes": 1868, "spill_load_bytes": 1788, "cumulative_stack_bytes": 2632,
                       "smem_bytes": 1024}
    euler = report["build__locals__euler_d9602a49_cuda_kernel_forward"]
    assert (euler["registers"], euler["stack_frame_bytes"], euler["spill_store_bytes"]) == (48, 32, 0)
    tiled = parse_ptxas(PTXAS_TILED)[CHOLESKY]
    # no "cumulative stack size" on the line: ptxas leaves out zero
    assert (tiled["registers"], tiled["smem_bytes"], tiled["cumulative_stack_bytes"]) == (38, 288, 0)


def test_spills_of_called_functions_count_for_the_kernel_that_calls_them():
    functions = parse_ptxas(PTXAS_GRAD)
    assert "entry" not in functions[BOX_BOX] and functions[BOX_BOX]["spill_store_bytes"] == 876
    assert ptx_entries(PTX_GRAD) == [f"{CONSTRAINT}_forward", f"{CONSTRAINT}_backward"]
    calls = ptx_calls(PTX_GRAD)
    assert calls[f"{CONSTRAINT}_backward"] == {BOX_BOX, CLIP} and calls[f"{CONSTRAINT}_forward"] == set()
    backward = kernel_numbers(f"{CONSTRAINT}_backward", functions, calls)
    assert backward["registers"] == 255 and backward["cumulative_stack_bytes"] == 12968
    assert backward["spill_store_bytes"] == 11110 + 876 + 144
    assert backward["spill_load_bytes"] == 13514 + 736 + 140
    forward = kernel_numbers(f"{CONSTRAINT}_forward", functions, calls)
    assert (forward["spill_store_bytes"], forward["spill_load_bytes"]) == (1468, 1472)


def test_short_names():
    assert gpu_report.short_name("build__locals__forward") == "forward"
    assert gpu_report.short_name("_tile_cholesky_factorize_block__locals__kernel") == "tile_cholesky_factorize_block"
    assert gpu_report.short_name("mul_m_kernel__locals___mul_m") == "mul_m"
    assert gpu_report.short_name("_kinematics_branch") == "kinematics_branch"


def test_a_share_is_never_rounded_across_the_target():
    assert gpu_report._share(0.924) == "92.4%"
    assert gpu_report._share(0.8996) == "89.96%"  # "90.0%" beside "NOT met" would read as a mistake
    assert gpu_report._share(0.89996) == "89.996%"
    assert gpu_report._share(0.9) == "90.0%"
    assert gpu_report._share(0.8949) == "89.5%"


class _LaunchLog:
    """A Warp logger that keeps the launches Warp reports with wp.config.print_launches (one
    "kernel: KEY dim: DIM inputs: ..." line per launch, printed by Warp's own launch function)."""

    def __init__(self):
        self.launches = []

    def info(self, message):
        found = re.match(r"kernel: (\S+) dim: (.*?) inputs:", message)
        if found:
            dim = ast.literal_eval(found.group(2))
            self.launches.append((found.group(1), (dim,) if isinstance(dim, int) else tuple(dim)))

    def debug(self, message):
        pass

    def warning(self, message, category=None, stacklevel=1):
        pass

    def error(self, message):
        pass


@contextlib.contextmanager
def warp_launch_log():
    log, saved = _LaunchLog(), (wp.get_logger(), wp.config.print_launches)
    wp.set_logger(log)
    wp.config.print_launches = True
    try:
        yield log.launches
    finally:
        wp.set_logger(saved[0])
        wp.config.print_launches = saved[1]


def as_logged(launch):
    """A recorded launch as Warp logs it: a tiled launch gets the trailing block dimension,
    resolved to 1 on the CPU."""
    return launch.kernel.key, launch.dim + ((1,) if launch.tiled else ())


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
def test_recorder_sees_every_launch_of_a_step(integrator):
    mjm = simrl.compile_mjcf(PENDULUM.replace('integrator="Euler"', f'integrator="{integrator}"'))
    W = 5
    sim = simrl.Sim.from_model(mjm, num_worlds=W, device="cpu", cpu_threads=1)
    sim.step(1)
    with warp_launch_log() as logged, LaunchRecorder() as recorder:
        sim.step(1)
    assert logged
    assert [as_logged(lc) for lc in recorder.launches] == logged
    assert all(lc.dim == (W,) and lc.threads == W and not lc.adjoint and not lc.tiled for lc in recorder.launches)
    assert all(lc.seconds > 0 for lc in recorder.launches)
    # the patch is gone afterwards
    assert wp.launch is recorder._launch and wp.launch_tiled is recorder._launch_tiled


@wp.kernel
def _count_lanes(count: wp.array(dtype=wp.float32)):
    i, _lane = wp.tid()
    wp.atomic_add(count, i, 1.0)


@wp.kernel
def _square(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def test_recorder_counts_a_tiled_launch_once_with_the_block_it_asks_for():
    count = wp.zeros(3, dtype=wp.float32, device="cpu")
    wp.launch_tiled(_count_lanes, dim=(3,), inputs=[count], block_dim=32, device="cpu")  # compiles
    count.zero_()
    with warp_launch_log() as logged, LaunchRecorder() as recorder:
        wp.launch_tiled(_count_lanes, dim=(3,), inputs=[count], block_dim=32, device="cpu")
    assert logged == [(_count_lanes.key, (3, 1))]  # on the CPU a tile runs one lane
    np.testing.assert_array_equal(count.numpy(), [1, 1, 1])
    (launch,) = recorder.launches
    assert (launch.dim, launch.block_dim, launch.tiled, launch.gpu_block_dim) == ((3,), 32, True, 32)
    assert launch.threads == 3 * 32  # on a GPU, 32 threads per tile


def test_recorder_marks_adjoint_launches():
    x = wp.array([1.0, 2.0, 3.0], dtype=wp.float32, device="cpu", requires_grad=True)
    y = wp.zeros(3, dtype=wp.float32, device="cpu", requires_grad=True)
    with warp_launch_log() as logged, LaunchRecorder() as recorder:
        tape = wp.Tape()
        with tape:
            wp.launch(_square, dim=3, inputs=[x, y], device="cpu")
        recorder.phase = "backward"
        tape.backward(grads={y: wp.ones(3, dtype=wp.float32, device="cpu")})
    np.testing.assert_allclose(x.grad.numpy(), [2.0, 4.0, 6.0])
    assert logged == [(_square.key, (3,)), (_square.key, (3,))]
    assert [(lc.adjoint, lc.phase) for lc in recorder.launches] == [(False, "forward"), (True, "backward")]


def test_recorder_sees_forward_and_adjoint_launches_of_diff_step():
    mjm = simrl.compile_mjcf(PENDULUM)
    W = 4
    sim = simrl.Sim.from_model(mjm, num_worlds=W, device="cpu", cpu_threads=1)
    qpos0, qvel0 = sim.qpos.clone(), torch.ones_like(sim.qvel)

    def step(recorder=None):
        ctrl = torch.full((W, 1), 0.5).requires_grad_(True)
        qpos1, qvel1 = simrl.diff_step(sim, qpos0, qvel0, ctrl)
        if recorder is not None:
            recorder.phase = "backward"
        (qpos1.sum() + qvel1.sum()).backward()
        return ctrl.grad

    step()  # compiles
    with warp_launch_log() as logged, LaunchRecorder() as recorder:
        grad_ctrl = step(recorder)
    assert torch.all(grad_ctrl != 0)
    assert [as_logged(lc) for lc in recorder.launches] == logged
    adjoint = [lc for lc in recorder.launches if lc.adjoint]
    forward = [lc for lc in recorder.launches if lc.phase == "forward"]
    assert adjoint and forward and not any(lc.adjoint for lc in forward)
    assert all(lc.phase == "backward" for lc in adjoint)
    # every adjoint is that of a kernel the forward pass launched, over the same threads, or, for
    # the fused schedule's smooth and velocity segments (run backwards a pass at a time), of a
    # pass of their wide twin (simrl.sim.grad's by_pass) but those with a hand-written reverse kernel
    # and those whose adjoint adds nothing (grad._inert: the controls' check, activation rates
    # without activations)
    kernels = grad.build(sim.model.dtype, sim.schedule)
    twins = {(id(item.kernel), (W, *item.dims)) for seg in kernels["by_pass"].values()
             for item in seg.launches(sim.model)
             if item.kernel.key not in kernels["reverse"] and not grad._inert(item, sim.model)}
    assert twins  # the CPU's fused schedule
    launched = {(id(lc.kernel), lc.dim) for lc in adjoint}
    assert launched <= {(id(lc.kernel), lc.dim) for lc in forward} | twins
    assert twins <= launched


def _launch(kernel, dim, seconds, block_dim=None, tiled=False):
    return Launch(kernel, dim, block_dim, tiled, False, "forward", seconds)


def test_report_aggregates_launches_and_shares_the_work():
    W = 10
    launches = [_launch(_square, (W, 16), 0.6), _launch(_square, (W, 16), 0.2),  # 16 threads per world
                _launch(_count_lanes, (W,), 0.1, block_dim=32, tiled=True),  # 32 per world on a GPU
                _launch(_square, (W,), 0.1),  # another shape of the first kernel: 1 per world
                _launch(_count_lanes, (0,), 0.0, block_dim=32, tiled=True)]  # empty
    record = gpu_report.report("test", launches, {}, W)
    rows = {k["name"]: k for k in record["kernels"]}
    assert list(rows) == ["square", "count_lanes"]  # order of first appearance
    assert rows["square"]["launches"] == 3 and rows["square"]["threads_per_world"] == [1, 16]
    assert rows["square"]["work_share"] == pytest.approx(0.9)
    assert rows["count_lanes"]["threads_per_world"] == [0, 32] and rows["count_lanes"]["gpu_block_dim"] == [32]
    summary = record["summary"]
    assert summary["launches"] == 5 and summary["empty_launches"] == 1
    assert summary["wide_work_share"] == pytest.approx(0.9)  # 0.6 + 0.2 + 0.1 of 1.0
    assert summary["work_target_met"] is True
    # no GPU build given: nothing measured, so the register target cannot be met
    assert summary["kernels_measured"] == 0 and summary["registers_target_met"] is False
    assert sum(k["work_share"] for k in record["kernels"]) == pytest.approx(1.0)
    assert len(record["launch_log"]) == 5 and record["launch_log"][2]["kernel"] == "count_lanes"


def _from_model_without_schedule(mj_model, num_worlds=1, device=None, dtype="float32", cpu_threads=None):
    return simrl.Sim(mj_model, num_worlds, device, dtype, cpu_threads)


def test_schedule_is_refused_when_the_sim_takes_none(monkeypatch):
    monkeypatch.setattr(simrl.Sim, "from_model", staticmethod(_from_model_without_schedule))
    mjm = simrl.compile_mjcf(PENDULUM)
    with pytest.raises(SystemExit, match="--schedule wide: this simrl's Sim.from_model takes no schedule="):
        make_sim(mjm, 2, "wide")
    sim, label = make_sim(mjm, 2, "fused")
    assert sim.num_worlds == 2 and label.startswith("fused")
    _, label = make_sim(mjm, 2, None)
    assert label.startswith("fused")


def test_schedule_is_passed_through_when_the_sim_takes_one(monkeypatch):
    asked = []

    def from_model(mj_model, num_worlds=1, device=None, dtype="float32", cpu_threads=None, schedule="auto"):
        asked.append(schedule)
        return _from_model_without_schedule(mj_model, num_worlds, device, dtype, cpu_threads)

    monkeypatch.setattr(simrl.Sim, "from_model", staticmethod(from_model))
    mjm = simrl.compile_mjcf(PENDULUM)
    # "auto" (the default) asks the Sim for what it runs on CUDA; the label says so
    assert make_sim(mjm, 2, None)[1] == "auto (wide, as on a GPU)"
    assert make_sim(mjm, 2, "fused")[1] == "fused"
    assert asked == ["wide", "fused"]


def test_missing_ptxas_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXAS", str(tmp_path / "no_ptxas"))
    with pytest.raises(SystemExit, match="no such executable"):
        find_ptxas()
    monkeypatch.setenv("PTXAS", sys.executable)
    assert find_ptxas() == Path(sys.executable)
    monkeypatch.delenv("PTXAS")
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SystemExit, match=re.escape('pip install -e ".[gpu-tools]"')):
        find_ptxas()


def test_grad_is_refused_for_mujoco_warp():
    with pytest.raises(SystemExit, match="mujoco_warp has no differentiable step"):
        gpu_report.engines_of("simrl,mujoco_warp", grad=True)
    with pytest.raises(SystemExit, match="unknown engine"):
        gpu_report.engines_of("mujoco", grad=False)
    assert gpu_report.engines_of("simrl,mujoco_warp", grad=False) == ["simrl", "mujoco_warp"]
    # the command line refuses before it looks for ptxas or builds anything
    result = subprocess.run([sys.executable, "scripts/gpu_report.py", "--model", "quadruped", "--grad", "--engine",
                             "simrl,mujoco_warp"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert result.returncode != 0 and "mujoco_warp has no differentiable step" in result.stderr


def _ptxas_or_skip() -> Path:
    try:
        return find_ptxas()
    except SystemExit as e:
        pytest.skip(f"no ptxas that reads Warp's PTX: {e}")


@pytest.mark.slow
def test_report_of_the_quadruped(tmp_path):
    ptxas = _ptxas_or_skip()
    out, build = tmp_path / "report.json", tmp_path / "build"
    result = subprocess.run([sys.executable, "scripts/gpu_report.py", "--model", "quadruped", "--worlds", "4096",
                             "--arch", "90", "--out", str(out), "--build-dir", str(build)],
                            cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["worlds"] == 4096 and report["arch"] == 90 and report["versions"]["warp"] == wp.__version__
    (record,) = report["engines"]
    kernels, summary = record["kernels"], record["summary"]
    assert summary["launches"] == len(record["launch_log"]) == sum(k["launches"] for k in kernels)
    assert sum(k["work_share"] for k in kernels) == pytest.approx(1.0)
    for k in kernels:
        if k["ran"]:
            assert k["registers"] is not None and k["entry_match"] == "exact", k
            assert 0 < k["registers"] <= 255 and k["spill_bytes"] >= 0
    assert summary["max_registers"] == max(k["registers"] for k in kernels if k["ran"])
    wide = sum(lc["seconds"] for lc in record["launch_log"]
               if np.prod(lc["dim"]) * ((lc["block_dim"] or 256) if lc["tiled"] else 1) >= 8 * 4096)
    assert summary["wide_work_share"] == pytest.approx(wide / sum(lc["seconds"] for lc in record["launch_log"]))

    # the main kernel's registers and spills, read again from ptxas run here on the report's PTX
    main = next((k for k in kernels if k["name"] == "forward"), max(kernels, key=lambda k: k["work_share"]))
    module = next(m for m in report["modules"] if m["name"] == main["module"])
    ptx = Path(module["ptx"])
    assert re.search(rf"\.entry\s+{main['entry']}\(", ptx.read_text())
    assert re.fullmatch(re.escape(main["key"]) + r"_[0-9a-f]{8}_cuda_kernel_forward", main["entry"])
    again = subprocess.run([str(ptxas), "-v", "-arch=sm_90", str(ptx), "-o", str(tmp_path / "again.cubin")],
                           capture_output=True, text=True, check=True).stderr
    block = again[again.index(f"Compiling entry function '{main['entry']}'"):]
    assert main["registers"] == int(re.search(r"Used (\d+) registers", block).group(1))
    stores, loads = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", block).groups()
    if not main["called_functions"]:
        assert main["spill_bytes"] == int(stores) + int(loads)


def test_passes_lists_the_step_and_the_differentiable_steps_passes(tmp_path):
    """--passes: a name that is not a pass of the step is refused with the list of those that
    are; the differentiable step has its finer passes (forward.py's `fine` and `grouped`)."""
    plain = [p.name for p in gpu_report.step_passes(False)]
    grad = [p.name for p in gpu_report.step_passes(True)]
    assert len(set(plain)) == len(plain) and len(set(grad)) == len(grad)
    finer = {"contact_jacobian", "com_pos_dof", "actuation_transmission", "tendon_limit_rows"}
    assert finer <= set(grad) and not finer & set(plain)
    with pytest.raises(SystemExit, match="contact_jacobian") as error:
        gpu_report.report_passes(["contact_rows", "no_such_pass"], True, 90, None, tmp_path)
    assert "no_such_pass" in str(error.value) and "solve" not in str(error.value)


@pytest.mark.slow
def test_passes_builds_one_pass_and_reads_ptxas(tmp_path):
    """--passes with --grad on two passes: their forward and adjoint kernels, each with ptxas's
    numbers, the adjoint needing more registers than its forward kernel."""
    _ptxas_or_skip()
    out = tmp_path / "passes.json"
    result = subprocess.run([sys.executable, "scripts/gpu_report.py", "--passes", "passive_spring,limit_rows",
                             "--grad", "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    rows = {r["kernel"]: r for r in json.loads(out.read_text())["kernels"]}
    assert set(rows) == {"passive_spring", "passive_spring (adjoint)", "limit_rows", "limit_rows (adjoint)"}
    for r in rows.values():
        assert 0 < r["registers"] <= 255 and f"| {r['kernel']} | {r['registers']} |" in result.stdout
    assert rows["limit_rows (adjoint)"]["registers"] > rows["limit_rows"]["registers"]


@pytest.mark.parametrize("scalar", [wp.float32, wp.float64])
def test_the_kernel_structs_stay_under_cudas_stack_limit(scalar):
    """A Model or Data struct above 8 KB is copied to every thread's stack by each kernel that
    passes it to a function (sm_90: 255 registers and KBs of spills in every stage; measured with
    a bare struct of 8,176 bytes, no stack, and of 8,400 bytes, 21,704 stack bytes). The static
    size is checked here, on any machine."""
    import ctypes

    from simrl.sim.data import data_struct
    from simrl.sim.model import STRUCT_LIMIT, model_struct

    for struct in (model_struct(scalar), data_struct(scalar)):
        size = ctypes.sizeof(struct.ctype)
        assert size < STRUCT_LIMIT, f"{struct.key}: {size} bytes; pack new tables into arrays of small structs"
