"""The command-line scripts and tools: exit codes, messages, and the benchmark's record format
(simrl.bench, by import where a test needs its functions)."""

import ast
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import readme

from simrl.bench import lines
from tasks.config import shac_tasks

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_train_names_an_unknown_task():
    result = run("scripts/train.py", "task=no_such_task")
    assert result.returncode != 0
    assert "Could not find 'task/no_such_task'" in result.stderr
    assert "cartpole" in result.stderr  # the available tasks are listed


def test_train_and_play_name_a_misspelt_key_before_hydra_does():
    """simrl's own message, not Hydra's "use +num_env=64" (which validate would refuse next)."""
    for script in ("scripts/train.py", "scripts/play.py"):
        result = run(script, "task=cartpole", "num_env=64")
        assert result.returncode == 1, script
        assert "unknown key num_env; did you mean 'num_envs'?" in result.stderr, script
        assert "Could not override" not in result.stderr and "+num_env" not in result.stderr, script


@pytest.mark.parametrize("script", ["train", "play"])
def test_a_python_without_the_environment_is_told_which_to_use(script):
    # python -S: no site-packages, as with a system Python that lacks hydra, torch, ...
    result = subprocess.run([sys.executable, "-S", f"scripts/{script}.py", "task=cartpole"], cwd=ROOT,
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("simrl: No module named 'hydra' in ")
    assert f"run .venv/bin/python scripts/{script}.py" in result.stderr and "source .venv/bin/activate" in result.stderr
    assert "Traceback" not in result.stderr


def test_train_rejects_zero_envs(tmp_path):
    result = run("scripts/train.py", "task=cartpole", "num_envs=0", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert "num_envs must be a positive integer" in result.stderr + result.stdout


def test_train_writes_a_run_directory(tmp_path):
    run_dir = tmp_path / "run"
    result = run("scripts/train.py", "task=cartpole", "num_envs=32", "max_iterations=2",
                 f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "it     1/2" in result.stdout and "steps/s" in result.stdout
    names = {p.name for p in run_dir.iterdir()}
    assert {"config.yaml", "learning_curve.json", "learning_curve.png"} <= names
    assert any(n.startswith("model_") for n in names)
    assert any(n.startswith("events.out.tfevents") for n in names)
    # every file is documented in the README's table of the run directory, and nothing more
    entries, documented = readme.listing(run_dir), readme.documented_files("### The run directory")
    assert readme.undocumented(entries, documented) == [] and readme.missing(documented, entries) == []
    # train.log keeps what the run printed, from its first line to its last
    log = (run_dir / "train.log").read_text()
    assert log.startswith(f"simrl: task cartpole, ppo, 32 envs on cpu, 2 iterations, run dir {run_dir}\n")
    assert "it     1/2" in log and "it     2/2" in log
    assert log.splitlines()[-1] == result.stdout.splitlines()[-1] and log.splitlines()[-1].startswith("simrl: done in")


def test_train_log_records_the_error_that_ended_the_run(tmp_path):
    run_dir = tmp_path / "run"
    result = run("scripts/train.py", "task=cartpole", f"resume={tmp_path / 'missing.pt'}", f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    message = f"simrl: resume={tmp_path / 'missing.pt'}: no such checkpoint file or run directory"
    assert message in result.stderr
    assert (run_dir / "train.log").read_text().splitlines()[-1] == message


def test_train_refuses_more_worlds_than_memory_holds(tmp_path):
    """num_envs whose simulation data cannot fit anywhere (the quadruped's 100 million worlds,
    about 4 TiB) ends the run with simrl's message, before anything is allocated."""
    run_dir = tmp_path / "run"
    result = run("scripts/train.py", "task=quadruped", "num_envs=100000000", f"hydra.run.dir={run_dir}")
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("simrl: task quadruped: 100,000,000 worlds of this model need ")
    assert "KiB per world" in last and last.endswith("worlds fits; run fewer with num_envs=")
    assert (run_dir / "train.log").read_text().splitlines()[-1] == last


def test_gpu_check_runs_dry_on_the_cpu(tmp_path):
    """scripts/gpu_check.sh runs only on a lent GPU, rarely and against the clock: GPU_CHECK_DRY=1
    runs each of its commands on the CPU at the smallest sizes, so that a flag or a script that
    changed fails here, not there. Every part passes and leaves what the GPU run records."""
    out = tmp_path / "out"
    env = {**os.environ, "GPU_CHECK_DRY": "1", "OUT": str(out), "PYTHON": sys.executable}
    result = subprocess.run(["bash", "scripts/gpu_check.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=900)
    assert result.returncode == 0 and "all parts passed" in result.stdout, result.stdout[-3000:]
    records = json.loads((out / "bench_quadruped.json").read_text())
    assert {(r["engine"], r["device"]) for r in records} >= {("simrl-fused", "cpu"), ("simrl-wide", "cpu"),
                                                             ("mujoco", "cpu")}
    for s in ("wide", "fused"):
        assert json.loads((out / f"grad_{s}.json").read_text())
    rough = json.loads((out / "bench_rough.json").read_text())
    assert {(r["engine"], r["device"], r["num_worlds"]) for r in rough} >= {("simrl", "cpu", 8)}  # one schedule
    for run_dir in ("ppo", "ppo_sync_free_false", "ppo_sync_free_true"):
        assert (out / run_dir / "train.log").read_text().splitlines()[-1].startswith("simrl: done in")
    assert (out / "bench.md").read_text().count("|---|") >= 3


def test_benchmark_records(tmp_path):
    # in folders that do not exist yet (the benchmark makes them before it measures)
    out = tmp_path / "json" / "bench.json"
    md = tmp_path / "md" / "bench.md"
    png = tmp_path / "png" / "bench.png"
    # --threads 1,2: both thread counts even where the test runs pinned to one core
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--smooth", "--worlds", "1,8",
                 "--threads", "1,2", "--seconds", "0.05", "--out", str(out), "--markdown", str(md), "--png", str(png))
    assert result.returncode == 0, result.stderr
    records = json.loads(out.read_text())
    engines = {(r["engine"], r["num_worlds"], r["threads"]) for r in records}
    # an engine uses at most one thread per world: at 1 world, 2 threads would be 1 again
    expected = {("mujoco", 1, 1), ("simrl", 1, 1), ("mujoco", 8, 1), ("mujoco", 8, 2), ("simrl", 8, 1),
                ("simrl", 8, 2)}
    if importlib.util.find_spec("mujoco_warp") is None:
        assert "mujoco_warp is not installed" in result.stdout
    else:  # measured (Warp's CPU kernels run on one thread), or the reason it failed on this device recorded
        expected |= {("mujoco_warp", 1, 1), ("mujoco_warp", 8, 1)}
    assert engines == expected
    for r in records:
        assert {"engine", "model", "device", "num_worlds", "mode", "steps_per_second", "threads"} <= r.keys()
        assert r["model"] == "inverted_pendulum" and r["mode"] == "forward" and r["horizon"] == 100
        if r["engine"] == "mujoco_warp" and r["steps_per_second"] is None:
            assert r["error"]
            continue
        assert r["steps_per_second"] > 0
        assert r["nan_free_worlds"] == r["num_worlds"]
    # every ratio divides by MuJoCo (mujoco.rollout) at the same world count and thread count
    mujoco = {(r["num_worlds"], r["threads"]): r["steps_per_second"] for r in records if r["engine"] == "mujoco"}
    table = md.read_text()
    for r in records:
        if r["steps_per_second"] is None:
            continue
        assert r["vs_mujoco_threads"] == r["threads"]
        assert r["vs_mujoco"] == pytest.approx(r["steps_per_second"] / mujoco[(r["num_worlds"], r["threads"])])
        row = (f"| {r['engine']} | cpu | {r['dtype']} | {r['threads']} | {r['num_worlds']} | "
               f"{r['steps_per_second']:,.0f} | {r['vs_mujoco']:.2f}x |")
        assert row in table, row
    simrl = {(r["num_worlds"], r["threads"]): r for r in records if r["engine"] == "simrl"}
    assert simrl[(8, 2)]["vs_mujoco"] != simrl[(8, 1)]["vs_mujoco"]  # two divisors, not one
    assert "| vs mujoco, same threads |" in table
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # memory: the Sim's arrays per world; the model's share shrinks as worlds are added
    assert 2 * 4 * 2 < simrl[(8, 1)]["state_bytes_per_world"] < simrl[(1, 1)]["state_bytes_per_world"]
    # and every engine's simulation data per world, side by side (mujoco_warp's where put_data ran)
    assert "| engine | worlds | data KiB/world | contacts per world | constraint rows per world |" in table
    for r in records:
        if r["engine"] == "simrl":
            assert r["data_bytes_per_world"] < r["state_bytes_per_world"]
        if "data_bytes_per_world" in r:
            assert f"| {r['engine']} | {r['num_worlds']} | {r['data_bytes_per_world'] / 1024:,.1f} |" in table
    assert simrl[(8, 1)]["resident_mib"] > 0 and simrl[(1, 1)]["cuda_graph"] is False


def test_benchmark_cores_pins_the_run(tmp_path):
    """--cores 1: every thread of the run on one core (recorded per record from each thread's
    affinity), and every CPU engine measured at 1 thread only."""
    import os

    out = tmp_path / "bench.json"
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--smooth", "--worlds", "8", "--cores", "1",
                 "--engines", "simrl,mujoco", "--schedule", "fused,wide", "--seconds", "0.05", "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = json.loads(out.read_text())
    first_core = min(os.sched_getaffinity(0))
    assert sorted(r["engine"] for r in records) == ["mujoco", "simrl-fused", "simrl-wide"]
    for r in records:
        assert r["threads"] == 1 and r["vs_mujoco_threads"] == 1
        assert r["cpus"] == [first_core]
    assert f"run on core(s) {first_core}" in result.stdout or len(os.sched_getaffinity(0)) == 1
    refused = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--cores", "999", "--worlds", "1")
    assert refused.returncode != 0 and "--cores 999: this process may use" in refused.stderr


def test_benchmark_simrl_data_per_world():
    """simrl's "data KiB/world": one world's Data, data_bytes_per_world summed, which the Data of
    three worlds holds three times over; the table prints it beside the slots and rows that size it."""
    import warp as wp

    from simrl import Sim
    from simrl.bench.engines import simrl_data_memory
    from simrl.bench.models import resolve_model
    from simrl.bench.records import data_table
    from simrl.sim.data import data_bytes_per_world

    _, mjm = resolve_model("quadruped")
    sim = Sim.from_model(mjm, num_worlds=3, device="cpu")
    memory = simrl_data_memory(sim)
    assert memory["data_bytes_per_world"] == sum(data_bytes_per_world(sim.model).values())
    held = sum(a.capacity for a in (getattr(sim.data, n) for n in sim.data._cls.vars) if isinstance(a, wp.array))
    assert 3 * memory["data_bytes_per_world"] == held
    assert memory["contact_slots"] == sim.model.struct.nconmax > 0
    record = {"engine": "simrl", "num_worlds": 3, **memory}
    assert (f"| simrl | 3 | {held / 3 / 1024:,.1f} | {memory['contact_slots']:,} slots | "
            f"{memory['constraint_rows']:,} |") in data_table([record])
    assert data_table([{"engine": "mujoco", "num_worlds": 3}]) == ""  # MuJoCo has no per-world figure


def test_benchmark_mujoco_warp_data_per_world():
    """MuJoCo Warp's "data KiB/world": every array of put_data at its default budgets, over its
    worlds (the contact arrays are shared by all worlds: naconmax = nconmax x nworld)."""
    mjw = pytest.importorskip("mujoco_warp")
    from simrl.bench.engines import mujoco_warp_memory
    from simrl.bench.models import resolve_model
    from simrl.bench.records import data_table

    _, mjm = resolve_model("quadruped")
    one, four = (mujoco_warp_memory(mjw, mjm, n) for n in (1, 4))
    # put_data's defaults for a model without a height field: the first of 16, 24, 32, 48, 64, ...
    # at least 45 contacts and 53 rows
    assert (four["nconmax"], four["naconmax"], four["njmax"]) == (48, 4 * 48, 64)
    assert four["data_bytes_per_world"] == pytest.approx(one["data_bytes_per_world"], rel=1e-3)
    if mjw.__version__ == "4.0.0":  # the figure quoted in issue #50 (put_data at 64 worlds)
        assert four["data_bytes_per_world"] / 1024 == pytest.approx(31.8, abs=0.05)
    table = data_table([{"engine": "mujoco_warp", "num_worlds": 4, **four}])
    assert (f"| mujoco_warp | 4 | {four['data_bytes_per_world'] / 1024:,.1f} | nconmax 48 (naconmax 192 for all "
            "worlds) | njmax 64 |") in table


def test_benchmark_model_of_a_task():
    """--model task:NAME measures the model the task builds (the quadruped on its terrain grid:
    the task's own geoms and height field), and names an unknown task with the list."""
    import mujoco

    from simrl.bench.models import resolve_model

    name, mjm = resolve_model("task:quadruped_rough")
    _, flat = resolve_model("quadruped")
    assert name == "quadruped_rough" and mjm.nhfield >= 1 and mjm.ngeom > flat.ngeom + 100
    assert mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_BODY, "trunk") >= 0
    with pytest.raises(SystemExit, match="no task 'no_such_task' \\(tasks: .*quadruped_rough"):
        resolve_model("task:no_such_task")


def test_benchmark_solver_note_when_one_engine_takes_no_iteration():
    """At rest MuJoCo's warm start can meet the tolerance with no iteration: the note says so
    instead of dividing by zero (it printed 1000000000.0x)."""
    import mujoco

    from simrl.bench.speed import solver_note

    mjm = mujoco.MjModel.from_xml_string(PGS_BOXES.replace('solver="PGS" ', ""))
    stats = {"simrl": {"solver_niter_mean": 1.0}, "mujoco": {"solver_niter_mean": 0.0}}
    note = solver_note("same", 64, stats, "simrl", mjm)
    assert note.startswith("Solver iterations differ by more than 2x (one takes none) (64 worlds)"), note
    assert "takes 0.0 per step" in note and "simrl's Newton 1.0" in note
    stats["mujoco"]["solver_niter_mean"] = 4.0
    assert solver_note("same", 64, stats, "simrl", mjm).startswith("Solver iterations differ by 4.0x")


PGS_BOXES = """<mujoco>
  <option solver="PGS" timestep="0.005"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0.5 0 0.1"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>"""


def test_benchmark_gives_the_ratio_at_matched_solver_work(tmp_path):
    """MuJoCo's PGS takes many more iterations per step than simrl's Newton: the benchmark also
    measures MuJoCo with Newton (same tolerance and cap) and gives that ratio, saying why."""
    model, out = tmp_path / "boxes.xml", tmp_path / "bench.json"
    model.write_text(PGS_BOXES)
    result = run("scripts/benchmark.py", "--model", str(model), "--worlds", "4", "--threads", "1",
                 "--engines", "simrl,mujoco", "--horizon", "20", "--seconds", "0.05", "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = {r["engine"]: r for r in json.loads(out.read_text())}
    assert set(records) == {"mujoco", "mujoco_newton", "simrl"}
    assert records["mujoco"]["solver"] == "PGS" and records["mujoco_newton"]["solver"] == "NEWTON"
    pgs, newton, simrl = (records[e]["solver_niter_mean"] for e in ("mujoco", "mujoco_newton", "simrl"))
    assert pgs > 2 * simrl and newton <= 2 * simrl
    assert records["simrl"]["vs_mujoco_newton"] == pytest.approx(
        records["simrl"]["steps_per_second"] / records["mujoco_newton"]["steps_per_second"])
    assert "| vs mujoco Newton, same threads |" in result.stdout
    assert f"MuJoCo's PGS takes {pgs:.1f} per step" in result.stdout and "unequal solver work" in result.stdout


FALLING_BOX = """<mujoco>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.6"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
  </worldbody>
</mujoco>"""


def test_benchmark_settle_starts_every_engine_on_the_floor(tmp_path):
    """--settle S: the start state is the keyframe after S seconds of mj_step (the box that
    starts in the air rests on the floor, with its contacts), the same as stepping MuJoCo by
    hand; the run says so, and every record carries it."""
    import mujoco
    import numpy as np

    from simrl.bench.models import initial_state

    mjm = mujoco.MjModel.from_xml_string(FALLING_BOX)
    assert initial_state(mjm).qpos[2] == pytest.approx(0.6)  # no settling by default
    settled = initial_state(mjm, settle=1.0)
    by_hand = mujoco.MjData(mjm)
    for _ in range(round(1.0 / mjm.opt.timestep)):
        mujoco.mj_step(mjm, by_hand)
    np.testing.assert_array_equal(settled.qpos, by_hand.qpos)
    np.testing.assert_array_equal(settled.qvel, by_hand.qvel)
    assert settled.time == 0.0 and abs(settled.qpos[2] - 0.1) < 2e-3
    mujoco.mj_forward(mjm, settled)
    assert settled.ncon == 4
    model, out = tmp_path / "box.xml", tmp_path / "bench.json"
    model.write_text(FALLING_BOX)
    result = run("scripts/benchmark.py", "--model", str(model), "--worlds", "2", "--threads", "1", "--engines",
                 "simrl,mujoco", "--horizon", "5", "--seconds", "0.05", "--settle", "1", "--out", str(out))
    assert result.returncode == 0, result.stderr
    assert "start: qpos0, settled for 1 s (--settle)" in result.stdout
    records = json.loads(out.read_text())
    assert {r["engine"] for r in records} == {"simrl", "mujoco"}
    assert all(r["settle_seconds"] == 1.0 for r in records)
    assert all(r["contacts_per_world"] == 4.0 for r in records)
    refused = run("scripts/benchmark.py", "--model", str(model), "--worlds", "1", "--settle", "-1")
    assert refused.returncode != 0 and "--settle -1.0: give a number of seconds >= 0" in refused.stderr


def test_every_module_of_simrl_bench_imports():
    import importlib
    import pkgutil

    import simrl.bench

    names = [m.name for m in pkgutil.iter_modules(simrl.bench.__path__)]
    assert {"benchmark", "engines", "gpu_report", "instructions", "lines", "step_worlds"} <= set(names)
    for name in names:
        importlib.import_module(f"simrl.bench.{name}")


def test_the_counted_mujoco_child_loads_neither_simrl_nor_warp(tmp_path):
    """simrl/bench/step_worlds.py runs by its path, so that MuJoCo's child imports no simrl, Warp
    or torch (each would add seconds under valgrind to every counted run), and steps the worlds
    it is given: the same final state as mj_step by hand."""
    import mujoco
    import numpy as np

    from simrl.bench.instructions import STEP_WORLDS
    from simrl.bench.models import resolve_model, start_arrays

    _, mjm = resolve_model("inverted_pendulum")
    mujoco.mj_saveModel(mjm, str(tmp_path / "model.mjb"), None)
    arrays = start_arrays(mjm, 2)
    np.savez(tmp_path / "start.npz", **arrays)
    probe = ("import runpy, sys\n"
             f"sys.argv = [{str(STEP_WORLDS)!r}, 'mujoco', {str(tmp_path / 'model.mjb')!r}, "
             f"{str(tmp_path / 'start.npz')!r}, '3']\n"
             "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\nexcept SystemExit:\n    pass\n"
             "print(sorted(m for m in ('simrl', 'warp', 'torch') if m in sys.modules))")
    result = run("-c", probe)
    assert result.returncode == 0, result.stderr[-2000:]
    stepped, loaded = result.stdout.strip().splitlines()
    assert loaded == "[]"
    qpos = []
    for w in range(2):
        mjd = mujoco.MjData(mjm)
        mujoco.mj_setState(mjm, mjd, arrays["state"][w], mujoco.mjtState.mjSTATE_FULLPHYSICS)
        mjd.ctrl[:] = arrays["ctrl"][w]
        for _ in range(1 + 3):
            mujoco.mj_step(mjm, mjd)
        qpos.append(mjd.qpos.copy())
    assert stepped == f"finite worlds 2/2, qpos sum {float(np.sum(qpos)):.6f}"


def test_per_line_profiles_one_world_count():
    refused = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--per-line", "--worlds", "2,4")
    assert refused.returncode != 0 and "--per-line profiles one world count and one schedule" in refused.stderr


valgrind = pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")


@valgrind
def test_benchmark_counts_instructions_of_mj_step(tmp_path):
    """--count-instructions under callgrind: mj_step's instructions per world-step from two child
    runs (1 + 4 steps and 1 step), the difference over worlds x steps."""
    out = tmp_path / "count.json"
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--worlds", "2", "--count-instructions",
                 "--steps", "4", "--counter", "callgrind", "--engines", "mujoco", "--out", str(out))
    assert result.returncode == 0, result.stderr
    [r] = json.loads(out.read_text())
    assert r["engine"] == "mujoco" and r["counter"] == "callgrind" and r["threads"] == 1
    baseline, counted = r["instructions"]
    assert r["instructions_per_world_step"] == (counted - baseline) / (2 * 4)
    # a two-dof pendulum's RK4 step: thousands of instructions, not the millions of an import
    assert 2_000 < r["instructions_per_world_step"] < 200_000
    assert baseline < 10_000_000  # the imports were not counted
    assert r["vs_mujoco"] == 1.0 and r["final_state"].startswith("finite worlds 2/2")


@pytest.mark.slow
@valgrind
def test_benchmark_counts_instructions_of_both_engines(tmp_path):
    """Both schedules of simrl and mj_step, from the same states: the same final state, and the
    ratio is mj_step's instructions over the engine's."""
    out = tmp_path / "count.json"
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--worlds", "2", "--count-instructions",
                 "--steps", "3", "--counter", "callgrind", "--schedule", "fused,wide", "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = {r["engine"]: r for r in json.loads(out.read_text())}
    # mujoco_warp (a default engine) is not counted: its data per world alone, from put_data
    memory = records.pop("mujoco_warp", None)
    assert (memory is None) == (importlib.util.find_spec("mujoco_warp") is None)
    assert memory is None or (memory["mode"] == "memory" and memory["data_bytes_per_world"] > 0)
    assert set(records) == {"simrl-fused", "simrl-wide", "mujoco"}
    states = {r["final_state"] for r in records.values()}
    assert len(states) == 1, states  # float32 and float64 agree to the printed digits here
    for r in records.values():
        assert r["vs_mujoco"] == pytest.approx(records["mujoco"]["instructions_per_world_step"]
                                               / r["instructions_per_world_step"])
    assert records["simrl-fused"]["cpu_target"] == "x86-64-v3"
    # the wide schedule launches a kernel per pass: more instructions than the fused one
    assert (records["simrl-wide"]["instructions_per_world_step"]
            > records["simrl-fused"]["instructions_per_world_step"])


@pytest.mark.slow
@valgrind
def test_benchmark_counts_the_differentiable_steps_instructions(tmp_path):
    """--grad H --count-instructions: three counted children from the same states, H plain
    steps, the chain of diff_step and the chain with its backward, each after an uncounted
    rollout; the chain ends where the plain steps do (the printed checksum), the backward adds
    instructions, and the ratio is the rollout's count over the plain steps'."""
    out = tmp_path / "count.json"
    result = run("scripts/benchmark.py", "--model", "quadruped", "--worlds", "2", "--grad", "2",
                 "--count-instructions", "--counter", "callgrind", "--out", str(out))
    assert result.returncode == 0, result.stderr
    (row,) = json.loads(out.read_text())
    counts, states = row["instructions"], row["final_states"]
    assert states["plain"] == states["forward"] == states["rollout"], states
    assert 0 < counts["forward"] < counts["rollout"] and counts["plain"] > 0
    assert row["rollout_over_step"] == pytest.approx(counts["rollout"] / counts["plain"])
    assert row["backward_per_world_step"] == pytest.approx((counts["rollout"] - counts["forward"]) / 4)
    assert row["cpu_target"] == "x86-64-v3" and "(forward + backward) / Sim.step" in result.stdout


@pytest.mark.slow
@valgrind
def test_benchmark_counts_instructions_at_matched_solver_work(tmp_path):
    """--count-instructions where MuJoCo's PGS iterates far more than simrl's Newton: mj_step is
    counted with Newton too, and the table gives that ratio with the reason."""
    model, out = tmp_path / "boxes.xml", tmp_path / "count.json"
    model.write_text(PGS_BOXES)
    result = run("scripts/benchmark.py", "--model", str(model), "--worlds", "2", "--count-instructions",
                 "--steps", "3", "--counter", "callgrind", "--out", str(out))
    assert result.returncode == 0, result.stderr
    records = {r["engine"]: r for r in json.loads(out.read_text()) if r["mode"] != "memory"}  # not mujoco_warp's
    assert set(records) == {"simrl", "mujoco", "mujoco_newton"}
    simrl, newton = records["simrl"], records["mujoco_newton"]
    assert records["mujoco"]["solver_niter_mean"] > 2 * simrl["solver_niter_mean"] >= newton["solver_niter_mean"]
    assert simrl["vs_mujoco_newton"] == pytest.approx(newton["instructions_per_world_step"]
                                                      / simrl["instructions_per_world_step"])
    assert "| vs mj_step with Newton |" in result.stdout and "unequal solver work" in result.stdout


@pytest.mark.slow
@valgrind
def test_benchmark_counts_instructions_per_stage(tmp_path):
    """--per-stage: simrl's wide-schedule kernels from two world counts (the launches' Python
    overhead cancels) and MuJoCo's stage functions inclusive of their callees."""
    out = tmp_path / "count.json"
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--worlds", "2", "--count-instructions",
                 "--steps", "3", "--counter", "callgrind", "--schedule", "wide", "--per-stage", "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    records = {r["engine"]: r for r in json.loads(out.read_text()) if r["mode"] != "memory"}  # not mujoco_warp's
    assert set(records) == {"simrl", "mujoco", "simrl-wide-stages"}
    stages = dict(records["simrl-wide-stages"]["per_stage"])
    assert {"kinematics_body", "crb_dof", "solve"} <= set(stages) and min(stages.values()) > 0
    total = records["simrl-wide-stages"]["kernel_instructions_per_world_step"]
    assert total == pytest.approx(sum(stages.values()))
    # the kernels' own work (thousands of instructions for a two-dof RK4 step) is a part of the
    # wide step's count, which adds each launch's Python overhead (millions at two worlds)
    assert 1_000 < total < 0.1 * records["simrl"]["instructions_per_world_step"]
    mujoco_stages = dict(records["mujoco"]["per_stage"])
    assert mujoco_stages["mj_step"] == pytest.approx(records["mujoco"]["instructions_per_world_step"], rel=0.05)
    assert 0 < mujoco_stages["mj_fwdPosition"] < mujoco_stages["mj_step"]
    assert result.stdout.count("| stage | instructions per world-step | share |") == 2  # both tables printed


def test_render_terrain_draws_the_grid_with_a_robot_per_patch(tmp_path):
    """tools/render_terrain.py: a PNG of the asked size, not one flat colour, whose printed
    columns are the eight types in the task's order."""
    out = tmp_path / "terrain.png"
    result = run("tools/render_terrain.py", "--all-types", "--out", str(out), "--width", "320", "--height", "180")
    if result.returncode != 0 and "gl" in result.stderr.lower() and "render" not in result.stdout:
        pytest.skip(f"no OpenGL backend for MuJoCo's renderer here: {result.stderr.strip().splitlines()[-1]}")
    assert result.returncode == 0, result.stderr[-2000:]
    import numpy as np
    from PIL import Image

    image = np.asarray(Image.open(out))
    assert image.shape == (180, 320, 3) and image.reshape(-1, 3).std(axis=0).min() > 5.0
    assert ("5 rows x 8 columns of 4.0 m patches (columns: flat, pyramid_stairs, pyramid_stairs_inv, "
            "discrete_obstacles, stepping_stones, random_rough, pyramid_slope, pyramid_slope_inv)") in result.stdout


def test_compare_algos_places_evaluations_at_their_iterations(tmp_path):
    """tools/compare_algos.py --metric: each run's play.py evaluations (play_<iteration>/) at the
    env steps and seconds of that iteration in its learning curve; a run reaches the level at
    its first evaluation at or below it with at most the fall rate given; MuJoCo's evaluations
    (another backend) are left out; a run that never reaches it says so."""
    def write_run(name, steps_per_iteration, seconds_per_iteration, evaluations):
        run_dir = tmp_path / name
        run_dir.mkdir()
        curve = [{"iteration": i, "env_steps": (i + 1) * steps_per_iteration,
                  "seconds": (i + 1) * seconds_per_iteration, "mean_return": float(i), "mean_episode_length": 100.0}
                 for i in range(10)]
        (run_dir / "learning_curve.json").write_text(json.dumps(curve))
        for iteration, error, falls, backend in evaluations:
            (run_dir / f"play_{iteration}{'_mujoco' if backend == 'mujoco' else ''}").mkdir()
            (run_dir / f"play_{iteration}{'_mujoco' if backend == 'mujoco' else ''}" / "metrics.json").write_text(
                json.dumps({"lin_vel_tracking_error": error, "fall_rate": falls, "backend": backend}))
        return str(run_dir)

    # a: at or below 0.1 at iteration 5, but with 10% falls; then at 7 with 2% (MuJoCo's 0.05 at 3 ignored)
    a = write_run("a", 100, 2.0, [(3, 0.3, 0.0, "warp"), (3, 0.05, 0.0, "mujoco"), (5, 0.1, 0.1, "warp"),
                                  (7, 0.08, 0.02, "warp")])
    b = write_run("b", 1000, 1.0, [(2, 0.5, 0.0, "warp"), (9, 0.2, 0.0, "warp")])  # never reaches 0.1
    out = run("tools/compare_algos.py", "--metric", "lin_vel_tracking_error", "--level", "0.1", "--max-fall-rate",
              "0.05", "--out", str(tmp_path / "cmp.png"), f"A={a}", f"B={b}")
    assert out.returncode == 0, out.stderr[-2000:]
    assert f"| A | {a} | 0.080 (0.02) | 0.080 (0.02) | 800 | 16 |" in out.stdout
    assert f"| B | {b} | 0.200 (0.00) | 0.200 (0.00) | not reached | - |" in out.stdout
    assert "| A | 800 | 16 |" in out.stdout and "| B | not reached | - |" in out.stdout
    assert (tmp_path / "cmp.png").stat().st_size > 0
    missing = run("tools/compare_algos.py", "--metric", "lin_vel_tracking_error", "--out", str(tmp_path / "x.png"),
                  f"A={a}")
    assert missing.returncode != 0 and "--metric needs --level" in missing.stderr


def test_curriculum_ceiling_by_closed_form():
    """tools/curriculum_ceiling.py on commands with closed-form paths: told 0.3 m/s straight
    ahead for 20 s a robot walks 6 m, beyond half a 4 m patch, so every world moves up each
    episode (with heading commands too: the yaw-rate range [0, 0] clips every turn); told 0.05 m/s it
    walks 1 m, neither up (< 2 m) nor down (not below half of 1 m), and the level stays at its
    start's mean, 0.5."""
    fast = run("tools/curriculum_ceiling.py", "--lin-vel-x", "0.3", "0.3", "--lin-vel-y", "0", "0",
               "--ang-vel-yaw", "0", "0", "--worlds", "200", "--episodes", "3")
    assert fast.returncode == 0, fast.stderr[-2000:]
    rows = {line[:28].strip(): line[28:].split() for line in fast.stdout.splitlines()[2:]}
    assert rows["drawn yaw rates"] == ["1.00", "0.00", "6.00", "m", rows["drawn yaw rates"][4]]
    assert float(rows["drawn yaw rates"][4]) > 2.0  # three steps up from rows 0-1 (random past the top)
    assert rows["heading commands"][:4] == rows["drawn yaw rates"][:4]
    slow = run("tools/curriculum_ceiling.py", "--lin-vel-x", "0.05", "0.05", "--lin-vel-y", "0", "0",
               "--ang-vel-yaw", "0", "0", "--worlds", "2000", "--episodes", "2")
    rows = {line[:28].strip(): line[28:].split() for line in slow.stdout.splitlines()[2:]}
    assert rows["drawn yaw rates"][:3] == ["0.00", "0.00", "1.00"]
    assert abs(float(rows["drawn yaw rates"][4]) - 0.5) < 0.05


def test_script_help_says_what_the_scripts_do():
    """Docstrings that went stale: benchmark.py's --help said mj_step was measured once (it is
    measured beside every world count), train.py's listed cartpole as a SHAC task (refused)."""
    help_text = run("scripts/benchmark.py", "--help").stdout
    assert "measured once" not in help_text
    assert "measured again beside every world count" in " ".join(help_text.split())
    doc = " ".join(ast.get_docstring(ast.parse((ROOT / "scripts" / "train.py").read_text())).split())
    listed = re.search(r"a `shac` section: ([\w, ]+)\)", doc).group(1).split(", ")
    assert sorted(listed) == shac_tasks() == ["ant", "cartpole_swingup", "quadruped"]


def test_benchmark_training_throughput(tmp_path):
    """--train: PPO iterations on this engine and on MuJoCo (sim.backend=mujoco) in one run."""
    out = tmp_path / "train.json"
    result = run("scripts/benchmark.py", "--model", "cartpole", "--train", "1", "--worlds", "8",
                 "--engines", "simrl,mujoco", "--out", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    records = json.loads(out.read_text())
    assert [r["engine"] for r in records] == ["simrl", "mujoco"]
    # physics threads: simrl's default (one below 64 worlds per thread), MuJoCo's Python loop
    assert [r["threads"] for r in records] == [1, 1]
    for r in records:
        assert r["mode"] == "train" and r["env_steps"] == 1 * 24 * 8 and r["steps_per_second"] > 0
        assert 0 < r["collect_fraction"] < 1
    assert "vs mujoco backend" in result.stdout
    refused = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--train", "1", "--worlds", "8")
    assert refused.returncode != 0 and "--train needs a task name" in refused.stderr


# An ellipsoid on a box with libccd (nativeccd disabled): simrl refuses the pair, not the model without contacts.
LIBCCD_SCENE = """<mujoco><option><flag nativeccd="disable"/></option><worldbody>
  <geom type="box" size="1 1 .1"/><body pos="0 0 .3"><freejoint/><geom type="ellipsoid" size=".1 .08 .06"/></body>
  </worldbody></mujoco>"""


@pytest.mark.parametrize("model", ["no_such_robot", "libccd"])
def test_benchmark_refuses_with_a_reason(model, tmp_path):
    if model == "libccd":  # a convex pair with libccd: not supported with contacts
        model = tmp_path / "libccd.xml"
        model.write_text(LIBCCD_SCENE)
    result = run("scripts/benchmark.py", "--model", str(model), "--worlds", "1", "--seconds", "0.01", "--engines",
                 "simrl")
    assert result.returncode != 0
    assert "no such file" in result.stderr or "--smooth" in result.stderr


def test_profile_lines_reads_callgrind_costs_per_instruction(tmp_path):
    """A callgrind file with --dump-instr=yes: absolute, relative and repeated positions, and a
    call's inclusive cost (the line after `calls=`) left out of the caller's self cost."""
    text = """positions: instr line
events: Ir
fn=(1) caller
0x1000 10 5
+4 11 2
* * 3
+2 +1 7
cfn=(2) callee
calls=1 0x2000 20
+3 12 1000
-9 * 1
fn=(2)
0x2000 20 4
"""
    path = tmp_path / "callgrind.out"
    path.write_text(text)
    costs = lines.self_costs(str(path))
    # 0x1000: 5 + 1 (back at -9 from 0x1009); 0x1004: 2 + 3; 0x1006: 7; the call's 1000 is not self cost
    assert dict(costs) == {0x1000: 6, 0x1004: 5, 0x1006: 7, 0x2000: 4}


def test_profile_lines_maps_generated_cpp_to_python_lines(tmp_path):
    """Warp's generated C++: each function's `// file.py:N` header and the `<L n>` comments give
    the Python function and line of every C++ line."""
    cpp = tmp_path / "module.cpp"
    cpp.write_text("""// /src/simrl/sim/factor_m.py:44
static void build__locals__factor_ld_0(
    wp::int32 var_w)
{
    // k = m.nv - 1                                                     <L 52>
    var_0 = 1;
    // while k >= 0:                                                    <L 53>
    var_1 = 2;
}
// /src/simrl/sim/solver.py:754
static CUDA_CALLABLE void build__locals__solve_0(
    // x = 1                                                            <L 760>
    var_2 = 3;
""")
    table = lines.python_lines(str(cpp))
    assert table[6] == ("factor_m.py:44", "factor_ld", 52)
    assert table[8] == ("factor_m.py:44", "factor_ld", 53)
    assert table[13] == ("solver.py:754", "solve", 760)


@pytest.mark.slow
@valgrind
def test_profile_lines_attributes_the_fused_step(tmp_path):
    """benchmark.py --per-line on a small model: the self counts of the lines add up to the
    kernels' count, the step kernel includes every function inlined into it, and the stages the
    step must run (the solver, the mass matrix factorization) are found by name."""
    out = tmp_path / "lines.json"
    result = run("scripts/benchmark.py", "--per-line", "--model", "inverted_pendulum", "--worlds", "2", "--steps", "3",
                 "--out", str(out))
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(out.read_text())
    in_kernels = report["per_world_step_in_kernels"]
    assert 0 < in_kernels < report["per_world_step_total"]
    assert sum(line["self"] for line in report["lines"]) == pytest.approx(in_kernels)
    functions = {f["function"]: f["inclusive"] for f in report["functions"]}
    assert max(functions.values()) <= in_kernels * (1 + 1e-9)
    assert {"solve", "factor_ld", "fwd_acceleration"} <= set(functions)
    assert "per line, self, per world-step" in result.stdout


def test_run_scalars_averages_what_a_run_logged(tmp_path):
    """tools/run_scalars.py against a log written here: the mean of the last N iterations and of
    windows is the arithmetic mean of the written values; a rewritten iteration (a resumed run)
    counts once, with its last value; an unknown tag is refused naming the ones there are."""
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(log_dir=str(tmp_path))
    for it in range(10, 30):  # a run resumed at iteration 10
        writer.add_scalar("Curriculum/terrain_level", it / 10, it)
    writer.add_scalar("Curriculum/terrain_level", 5.0, 29)  # rewritten by a later write
    writer.close()
    result = run("tools/run_scalars.py", str(tmp_path), "Curriculum/terrain_level", "--last", "5", "--window", "10")
    assert result.returncode == 0, result.stderr[-2000:]
    out = result.stdout
    expected_last = (2.5 + 2.6 + 2.7 + 2.8 + 5.0) / 5
    assert f"mean over iterations 25-29 (last 5): {expected_last:.4g}" in out
    assert f"iterations 10-19: {sum(i / 10 for i in range(10, 20)) / 10:.4g}" in out
    refused = run("tools/run_scalars.py", str(tmp_path), "Train/nothing")
    assert refused.returncode != 0
    assert re.search("no scalar 'Train/nothing'.*Curriculum/terrain_level", refused.stderr), refused.stderr[-2000:]


def test_model_corpus_counts_what_loads_and_matches(tmp_path):
    """tools/model_corpus.py over four files: one MuJoCo does not compile (out of the count), one
    simrl refuses (an actuator's user activation dynamics, named), one that matches (the
    wrapping tendons) and one that does not (three iterations of MuJoCo's PGS solver, which
    simrl solves by Newton: documented, tests/test_mjcf_features.py), so 1 of 3."""
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "wrap.xml").write_text((ROOT / "tests" / "data" / "tendon_wrap.xml").read_text())
    (corpus / "broken.xml").write_text("<mujoco><worldbody><geom type='mesh' mesh='none'/></worldbody></mujoco>")
    (corpus / "user.xml").write_text("""<mujoco><worldbody><geom type="plane" size="1 1 .1"/>
      <body name="b" pos="0 0 .5"><joint name="j" type="hinge"/><geom size=".1"/></body></worldbody>
      <actuator><general joint="j" dyntype="user"/></actuator></mujoco>""")
    (corpus / "pgs.xml").write_text("""<mujoco><option solver="PGS" iterations="3"/><worldbody>
      <geom type="plane" size="1 1 .1"/>
      <body pos="0 0 .049" euler="5 3 0"><freejoint/><geom type="box" size=".05 .05 .05"/></body>
      </worldbody></mujoco>""")
    out = tmp_path / "rows.json"
    result = run("tools/model_corpus.py", str(corpus), "--json", str(out))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "MuJoCo compiles 3 of 4; simrl loads 2 and matches 1: 1/3 = 33.3%" in result.stdout, result.stdout
    rows = {Path(r["model"]).name: r for r in json.loads(out.read_text())}
    assert [rows[n]["status"] for n in ("broken.xml", "user.xml", "wrap.xml", "pgs.xml")] == [
        "mujoco refuses", "refused", "match", "mismatch"]
    assert "dyntype='user'" in rows["user.xml"]["reason"]
    assert rows["wrap.xml"]["qacc"] < 1e-12 and rows["wrap.xml"]["qpos"] < 1e-12
