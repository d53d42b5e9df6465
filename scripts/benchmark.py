#!/usr/bin/env python
"""Headless speed benchmark: simrl against MuJoCo on the same model, in the same run.

    python scripts/benchmark.py --model quadruped --worlds 1,64,1024
    python scripts/benchmark.py --model quadruped --worlds 1024 --cores 1
    python scripts/benchmark.py --model quadruped --worlds 64 --count-instructions --steps 20
    python scripts/benchmark.py --model path/to/robot.xml --out bench.json --markdown docs/BENCHMARKS.md
    python scripts/benchmark.py --model task:quadruped_rough --worlds 8 --count-instructions

Physics steps per second = worlds x steps / seconds, compile time excluded and reported on
its own. Every ratio is taken at equal threads: simrl on N threads (`Sim(cpu_threads=N)`)
against MuJoCo on N threads, for N = 1 and N = every core this process may use (`--threads`
chooses others; `--cores N` first pins the whole run, every thread of it, to N cores with
os.sched_setaffinity and measures N threads only). Each record carries its engine's thread
count (`threads` in the JSON, a column of the table) and the ratio (`vs_mujoco`, with the
MuJoCo thread count it divides by in `vs_mujoco_threads`). Engines measured:
  simrl        this engine, all worlds in one batch (Warp; --schedule fused or wide; on the CPU
               its worlds split over N threads, each stepping its block with the schedule's
               launches; on CUDA Sim.step captures the steps once as a CUDA graph and replays
               them, the capture time reported as capture_seconds)
  mujoco       mj_step in C over all worlds: mujoco.rollout with N threads (one MjData each);
               the "vs mujoco" ratio of every engine divides by its figure at the same world
               count and thread count (on CUDA, where threads do not apply, by the one with the
               most threads)
  mujoco_warp  MuJoCo Warp (pip install mujoco-warp, the 'bench' extra), all worlds in one
               batch (nworld) on the same --device as simrl (on the CPU Warp runs each kernel
               on one thread, so it is measured at 1 thread; on CUDA one step is captured as a
               CUDA graph, as mujoco-warp's own benchmark does). Skipped, with a message, when
               it is not installed; when it fails on the device, the reason is recorded (table
               and JSON) instead of a rate
Every engine runs the same compiled model: same timestep, integrator, solver iterations and
tolerance. `--smooth` disables contacts and constraints in all of them.

Same states, same controls: every timed call starts all worlds from the same state (the
model's 'home' keyframe, else qpos0, zero warm start) under the same constant random controls
(one per world) and steps them `--horizon` steps, in every engine. MuJoCo's figure is
measured again beside every world count, in the same rounds as the others. Solver iterations
(mean/max per step) and contacts per world are those of the same steps, in the first 64
worlds. Where simrl's and MuJoCo's mean iterations differ by more than 2x (gymnasium's
humanoid: MuJoCo's PGS against simrl's Newton), the steps/s ratio compares unequal solver
work, so MuJoCo is also measured with its solver set to Newton (`mujoco_newton`, same
tolerance and iteration cap: the same optimality stop as simrl's) and the table gives that
ratio too ("vs mujoco Newton"), with a line that says why; where both already run Newton the
line says so and nothing more is measured.

`--count-instructions` measures instructions per world-step instead of time, noise-free:
every engine (each simrl schedule: Sim.step on one thread; mujoco: mj_step through
mujoco.rollout on one thread) runs in a child process (scripts/step_worlds.py) from the same
start states under the same controls, twice: 1 + STEPS steps, and 1 step. Instructions per
world-step = (count(1 + STEPS) - count(1)) / (worlds x STEPS): the subtraction removes the
first step and whatever both runs share. The counter: `perf stat -e instructions:u` where
this machine's perf counts instructions (the child's whole process, imports included, which
the subtraction takes out again), else valgrind's callgrind, about 50x slower, which counts
only between two client requests that the child makes around its steps (`--instr-atstart=no`,
then START/STOP_INSTRUMENTATION), so imports and kernel loading are neither counted nor
slowed down. Under valgrind simrl's kernels are built for x86-64-v3 (AVX2, FMA; MuJoCo's own
build uses AVX) instead of -march=native, since valgrind executes no AVX-512; the benchmark
builds them in its own process first, so that the child only loads them from Warp's cache.
`--steps` (default 10) and small world counts keep a valgrind run to a minute or two; the
table gives each engine's instructions per world-step, the ratio to mj_step's, and the solver
iterations of the counted steps. Where the iterations differ by more than 2x and MuJoCo's solver
is not Newton (gymnasium's humanoid: PGS), mj_step is counted again with its solver set to
Newton (`mujoco_newton`), and the table adds the ratio to that count ("vs mj_step with Newton")
with a line that says why, as the timed benchmark does.

`--settle S` starts every engine from the keyframe (or qpos0) after S simulated seconds of
mj_step at mid-range controls: the ant and gymnasium's humanoid start in the air, and their
first steps have no contacts; `--settle 2` puts them on the floor with theirs.

`--per-stage` (with `--count-instructions` and callgrind) also splits the counts by stage.
simrl: its wide schedule, every pass a kernel of its own (the per-element functions the fused
step calls in loops: the same arithmetic), stepped launch by launch with callgrind collecting
during each launch only and dumping one profile part per launch (step_worlds.py --by-launch);
a part holds the launch's Python overhead too, the same at any world count, so each kernel's
instructions per world-step come from two world counts, W and 2W: (count(2W) - count(W)) /
(W x steps). MuJoCo: every function of libmujoco over 1% of mj_step's count (mj_fwdPosition,
mj_collision, mj_crb, mj_factorM, the solver's, ...), each inclusive of what it calls, from
`callgrind_annotate --inclusive=yes` on the two counted runs (the difference again). Two more tables, appended to
--markdown too.

`--png PATH` draws steps/s against the world count, one line per engine, on log-log axes.

`--grad H` measures the differentiable step instead (simrl.diff_step chained for H steps, then
backward through all of them) against the plain step (Sim.step, one thread) at each world
count: forward and backward seconds, backward / forward, and the memory the rollout keeps
per world per step (the buffers the tape holds for backward, with their gradients).

`--train N` measures end-to-end training instead: environment steps per second of N PPO
iterations (rollout and update, rsl-rl-lib) of the task named by --model, on this engine and,
in the same run, on the same environment stepped by MuJoCo itself (sim.backend=mujoco).

`--profile` also times each pass of simrl's step on its own (the wide schedule's launches, which
compute the same bits as the fused one) at every world count and prints a table of
microseconds per world per pass (appended to --markdown too, added to the simrl records
under "profile"). With `--grad` it times instead every kernel (and adjoint) of one
differentiable rollout and its backward, and the memsets of the step buffers
("profile_seconds" in the records).
"""

import argparse
import datetime
import json
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
import torch
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simrl import Sim, UnsupportedFeatureError, compile_mjcf  # noqa: E402
from simrl.sim.data import data_struct  # noqa: E402


def resolve_model(spec: str) -> tuple[str, mujoco.MjModel]:
    """A path to an MJCF file, a robot shipped in envs/assets ('quadruped'), the name of a
    model shipped with gymnasium (e.g. 'ant'), or `task:NAME`: the model a task builds from its
    task file (e.g. 'task:quadruped_rough', the quadruped on the terrain grid)."""
    if spec.startswith("task:"):
        from omegaconf import OmegaConf

        import envs
        import tasks
        from tasks.config import env_kwargs

        name = spec.removeprefix("task:")
        if name not in tasks.available():
            raise SystemExit(f"--model {spec!r}: no task {name!r} (tasks: {', '.join(tasks.available())})")
        kwargs = env_kwargs(OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml"))
        return name, envs.make(name, num_envs=1, device="cpu", **kwargs).sim.mj_model
    if Path(spec).is_file():
        return Path(spec).stem, compile_mjcf(spec)
    from envs import ASSETS_DIR

    if (ASSETS_DIR / f"{spec}.xml").is_file():
        return spec, compile_mjcf(ASSETS_DIR / f"{spec}.xml")
    import gymnasium

    path = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{spec}.xml"
    if path.is_file():
        return spec, compile_mjcf(path)
    raise SystemExit(f"--model {spec!r}: no such file, and not a model in envs/assets or gymnasium's assets")


def random_controls(mjm: mujoco.MjModel, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    lo = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1.0)
    return rng.uniform(lo, hi, (n, mjm.nu))


# simulated seconds the start state is settled for (--settle): 0 starts at the keyframe itself
SETTLE_SECONDS = 0.0


def initial_state(mjm: mujoco.MjModel) -> mujoco.MjData:
    """Every engine starts from the model's 'home' keyframe when it has one, else from qpos0;
    with --settle S, from that state after S simulated seconds of `mj_step` with the controls at
    the middle of their ranges (zero where unlimited), so that a robot that starts in the air
    (the ant, gymnasium's humanoid) stands or lies on the floor with its contacts made. Time,
    warm start and activations are reset, so every engine starts from the same qpos and qvel."""
    mjd = mujoco.MjData(mjm)
    if mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0:
        mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)
    if SETTLE_SECONDS > 0.0:
        mjd.ctrl[:] = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange.mean(axis=1), 0.0)
        for _ in range(int(round(SETTLE_SECONDS / mjm.opt.timestep))):
            mujoco.mj_step(mjm, mjd)
        if not np.all(np.isfinite(mjd.qpos)) or not np.all(np.isfinite(mjd.qvel)):
            raise SystemExit(f"--settle {SETTLE_SECONDS}: the model's state is not finite after settling")
        qpos, qvel = mjd.qpos.copy(), mjd.qvel.copy()
        mujoco.mj_resetData(mjm, mjd)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    return mjd


def start_description(mjm: mujoco.MjModel) -> str:
    """Where every engine starts, for the printed header."""
    key = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0
    where = "the 'home' keyframe" if key else "qpos0"
    settled = f", settled for {SETTLE_SECONDS:g} s (--settle)" if SETTLE_SECONDS > 0.0 else ""
    return f"start: {where}{settled}"


def timed(run_chunk, min_seconds: float) -> tuple[int, float]:
    """Call run_chunk() (returns steps done) until min_seconds have passed."""
    steps, start = 0, time.perf_counter()
    while True:
        steps += run_chunk()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return steps, elapsed


def resident_mib() -> float:
    """This process's resident memory (MiB), from /proc (Linux), else the peak from getrusage."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def state_bytes(sim) -> int:
    """Bytes of the simulation's Warp arrays: every Data buffer and every Model array."""
    total = 0
    for struct in (sim.data, sim.model.struct):
        for name in struct._cls.vars:
            value = getattr(struct, name)
            if isinstance(value, wp.array):
                total += value.capacity
    return total


# the solver iterations and contacts of the timed steps are read in the first STATS_WORLDS worlds
STATS_WORLDS = 64
STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def start_arrays(mjm: mujoco.MjModel, num_worlds: int) -> dict:
    """The start of every world in every engine: `qpos [W, nq]`, `qvel [W, nv]`, `ctrl [W, nu]`
    (constant random controls, one row per world) and `state [W, nstate]` (MuJoCo's
    mjSTATE_FULLPHYSICS of the same start)."""
    mjd = initial_state(mjm)
    state = np.zeros(mujoco.mj_stateSize(mjm, STATE_SPEC))
    mujoco.mj_getState(mjm, mjd, state, STATE_SPEC)
    return {"qpos": np.tile(mjd.qpos, (num_worlds, 1)), "qvel": np.tile(mjd.qvel, (num_worlds, 1)),
            "ctrl": random_controls(mjm, num_worlds), "state": np.tile(state, (num_worlds, 1))}


def iteration_stats(niter: np.ndarray, ncon: np.ndarray) -> dict:
    """Mean and max solver iterations per step, and contacts per world, of [steps, worlds] arrays."""
    return {"solver_niter_mean": float(niter.mean()), "solver_niter_max": int(niter.max()),
            "contacts_per_world": float(ncon.mean())}


def simrl_runner(mjm, num_worlds, device, dtype, schedule="auto", threads=None, horizon=100):
    """Build the Sim; return a callable that steps it `horizon` steps from the start states, and
    a callable that summarizes it. `threads`: its cpu_threads on the CPU (ignored on CUDA)."""
    start = time.perf_counter()
    rss_before = resident_mib()
    free_before = wp.get_device(device).free_memory if str(device).startswith("cuda") else None
    cpu = wp.get_device(device).is_cpu
    sim = Sim.from_model(mjm, num_worlds=num_worlds, device=device, dtype=dtype, schedule=schedule,
                         cpu_threads=threads if cpu else None)
    setup = time.perf_counter() - start
    memory = {"state_bytes_per_world": state_bytes(sim) / num_worlds}
    if free_before is not None:  # what the device lost to the Sim (its arrays and Warp's pools)
        memory["device_bytes_per_world"] = (free_before - sim.device.free_memory) / num_worlds
    else:  # what the process grew by building it (the arrays, first-touched)
        memory["resident_mib_growth"] = resident_mib() - rss_before
    arrays = start_arrays(mjm, num_worlds)
    qpos0 = wp.array(arrays["qpos"], dtype=sim.data.qpos.dtype, device=sim.device)
    qvel0 = wp.array(arrays["qvel"], dtype=sim.data.qvel.dtype, device=sim.device)
    sim.ctrl = torch.as_tensor(arrays["ctrl"], dtype=sim.torch_dtype, device=sim.qpos.device)

    def restart():
        # Warp copies, on Warp's stream: ordered with the steps (and a CUDA graph's replay)
        wp.copy(sim.data.qpos, qpos0)
        wp.copy(sim.data.qvel, qvel0)
        sim.data.qacc_warmstart.zero_()

    restart()
    sim.step(1)  # warm-up
    capture_seconds = None
    if sim.use_graphs:
        # Sim.step(horizon) records the horizon's launches as a graph at its first call and
        # replays it from then on (a CUDA graph on CUDA)
        start = time.perf_counter()
        restart()
        sim.step(horizon)
        wp.synchronize_device(sim.device)
        capture_seconds = time.perf_counter() - start

    def run():
        restart()
        sim.step(horizon)
        wp.synchronize_device(sim.device)
        return horizon

    run.sim = sim

    def stats(skip=0):
        """Solver iterations and contacts of the timed steps (after the first `skip`), in the
        first STATS_WORLDS worlds."""
        k = min(num_worlds, STATS_WORLDS)
        restart()
        niter, ncon = [], []
        for _ in range(horizon):
            sim.step(1)
            niter.append(sim.solver_niter[:k].cpu().numpy().copy())
            ncon.append((sim.view("contact_active")[:k] != 0).sum(dim=1).cpu().numpy())
        return iteration_stats(np.stack(niter)[skip:], np.stack(ncon)[skip:])

    run.stats = stats

    def info():
        finite = torch.isfinite(sim.qpos).all(dim=1) & torch.isfinite(sim.qvel).all(dim=1)
        return {"compile_seconds": sim.compile_time, "setup_seconds": setup, "cuda_graph": sim.use_graphs,
                "schedule": sim.schedule, "threads": sim.cpu_threads if sim.device.is_cpu else None,
                **memory, "resident_mib": resident_mib(),
                **({"capture_seconds": capture_seconds} if capture_seconds is not None else {}),
                "nan_free_worlds": int(finite.sum()), "dtype": dtype, "device": sim.device.alias}

    return run, info


def mujoco_stats(mjm, arrays: dict, horizon: int, skip: int = 0) -> dict:
    """Solver iterations and contacts of mj_step over the timed steps (the same start states
    and controls; after the first `skip`), in the first STATS_WORLDS worlds."""
    k = min(len(arrays["ctrl"]), STATS_WORLDS)
    niter, ncon = np.zeros((horizon, k)), np.zeros((horizon, k))
    for w in range(k):
        mjd = mujoco.MjData(mjm)
        mujoco.mj_setState(mjm, mjd, arrays["state"][w], STATE_SPEC)
        mjd.ctrl[:] = arrays["ctrl"][w]
        for t in range(horizon):
            mujoco.mj_step(mjm, mjd)
            niter[t, w], ncon[t, w] = mjd.solver_niter[0], mjd.ncon
    return iteration_stats(niter[skip:], ncon[skip:])


def mujoco_runner(mjm, num_worlds, nthread, horizon=100):
    """A callable that steps num_worlds copies of mjm `horizon` steps from the start states with
    mujoco.rollout (a C loop over mj_step) on nthread threads (at most one per world), and a
    callable that summarizes it."""
    from mujoco import rollout

    threads = max(1, min(nthread, num_worlds))
    datas = [mujoco.MjData(mjm) for _ in range(threads)]
    pool = rollout.Rollout(nthread=threads if threads > 1 else 0)  # 0: the calling thread
    arrays = start_arrays(mjm, num_worlds)
    control = np.repeat(arrays["ctrl"][:, None, :], horizon, axis=1)
    warmstart = np.zeros((num_worlds, mjm.nv))
    out = {}

    def run():
        state, _ = pool.rollout(mjm, datas if threads > 1 else datas[0], arrays["state"], control,
                                initial_warmstart=warmstart)
        out["state"] = state[:, -1]
        return horizon

    run()  # warm-up
    run.stats = lambda skip=0: mujoco_stats(mjm, arrays, horizon, skip)

    def info():
        return {"nan_free_worlds": int(np.all(np.isfinite(out["state"]), axis=1).sum()),
                "dtype": "float64", "device": "cpu", "threads": threads,
                "solver": mujoco.mjtSolver(mjm.opt.solver).name.removeprefix("mjSOL_")}

    return run, info


def mujoco_warp_runner(mjw, mjm, num_worlds, device, horizon=100):
    """MuJoCo Warp (module `mjw`) on `device`: all worlds in one batch (nworld), the same
    start states and controls as simrl, the same `horizon` steps from them (in chunks of about
    50 ms, back to the start states after the last). Returns the same pair as simrl_runner;
    raises MujocoWarpFailure naming the stage that failed."""
    stage = "device"
    try:
        dev = wp.get_device(device)
        with wp.ScopedDevice(dev):
            start = time.perf_counter()
            stage = "put_model"
            m = mjw.put_model(mjm)
            stage = "put_data"
            d = mjw.put_data(mjm, initial_state(mjm), nworld=num_worlds)
            arrays = start_arrays(mjm, num_worlds)
            d.ctrl.assign(arrays["ctrl"].astype(np.float32))
            qpos0 = wp.array(arrays["qpos"].astype(np.float32), device=dev)
            qvel0 = wp.array(arrays["qvel"].astype(np.float32), device=dev)
            wp.synchronize_device(dev)
            setup = time.perf_counter() - start

            stage = "first step (compile)"
            start = time.perf_counter()
            mjw.step(m, d)  # compiles (or loads from Warp's cache) every kernel it launches
            wp.synchronize_device(dev)
            compile_seconds = time.perf_counter() - start

            graph, graph_error = None, None
            if dev.is_cuda:
                try:
                    with wp.ScopedCapture(device=dev) as capture:
                        mjw.step(m, d)
                    graph = capture.graph
                except Exception as e:  # measured with plain launches instead, and said so
                    graph_error = f"{type(e).__name__}: {e}"

            def step():
                if graph is not None:
                    wp.capture_launch(graph)
                else:
                    mjw.step(m, d)

            stage = "warm-up step"
            start = time.perf_counter()
            step()
            wp.synchronize_device(dev)
            step_seconds = time.perf_counter() - start
    except Exception as e:
        raise MujocoWarpFailure(f"{stage}: {type(e).__name__}: {e}") from e
    # a chunk of about 50 ms (at most 4096 world-steps), at least one step, at most the horizon
    chunk = max(1, min(horizon, 4096 // num_worlds, int(0.05 / max(step_seconds, 1e-6))))
    position = [horizon]  # steps done since the start states

    def restart():
        wp.copy(d.qpos, qpos0)
        wp.copy(d.qvel, qvel0)
        d.qacc_warmstart.zero_()
        d.time.zero_()
        position[0] = 0

    def run():
        with wp.ScopedDevice(dev):
            if position[0] >= horizon:
                restart()
            n = min(chunk, horizon - position[0])
            for _ in range(n):
                step()
            wp.synchronize_device(dev)
        position[0] += n
        return n

    def stats():
        k = min(num_worlds, STATS_WORLDS)
        niter, ncon = [], []
        with wp.ScopedDevice(dev):
            restart()
            for _ in range(horizon):
                step()
                niter.append(d.solver_niter.numpy()[:k].copy())
                worldid = d.contact.worldid.numpy()[:int(d.nacon.numpy()[0])]
                ncon.append(np.bincount(worldid, minlength=num_worlds)[:k])
        position[0] = horizon
        return iteration_stats(np.stack(niter), np.stack(ncon))

    run.stats = stats

    def info():
        qpos, qvel = d.qpos.numpy(), d.qvel.numpy()
        finite = np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1)
        return {"compile_seconds": compile_seconds, "setup_seconds": setup,
                "nan_free_worlds": int(finite.sum()), "dtype": "float32", "device": dev.alias,
                "cuda_graph": graph is not None, "version": getattr(mjw, "__version__", "unknown"),
                **({"cuda_graph_error": graph_error} if graph_error else {}),
                "threads": 1 if dev.is_cpu else None}

    return run, info


class MujocoWarpFailure(RuntimeError):
    """mujoco_warp failed on this model or device; the message names the stage and the error."""


def import_mujoco_warp():
    """(module, None) when mujoco_warp imports; (None, None) when it is not installed;
    (None, reason) when it is installed but its import fails."""
    try:
        import mujoco_warp
    except ModuleNotFoundError as e:
        if e.name == "mujoco_warp":
            return None, None
        return None, f"import: {type(e).__name__}: {e}"
    except Exception as e:
        return None, f"import: {type(e).__name__}: {e}"
    return mujoco_warp, None


def measure(runners, num_worlds, seconds, repeats, failures=None):
    """Time every runner `repeats` times, in turn, so that all engines see the same machine
    load; return each one's median steps/s over the rounds. An engine named in `failures`
    (a dict) that raises is dropped, its error stored there under its name."""
    rates = {name: [] for name in runners}
    for _ in range(repeats):
        for name, (run, _) in runners.items():
            if failures is not None and name in failures:
                if failures[name] is not None:
                    continue
                try:
                    steps, elapsed = timed(run, seconds)
                except Exception as e:
                    failures[name] = f"timed steps: {type(e).__name__}: {e}"
                    continue
            else:
                steps, elapsed = timed(run, seconds)
            rates[name].append(num_worlds.get(name, 1) * steps / elapsed)
    failed = {name for name, error in (failures or {}).items() if error is not None}
    return {name: float(np.median(r)) for name, r in rates.items() if r and name not in failed}


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = ""
    if wp.is_cuda_available():
        gpu = ", GPU " + wp.get_device("cuda:0").name
    allowed = sorted(os.sched_getaffinity(0))
    pinned = f", run on core(s) {','.join(map(str, allowed))}" if len(allowed) < (os.cpu_count() or 1) else ""
    return f"{cpu}, {os.cpu_count()} cores{pinned}{gpu}; Python {platform.python_version()}, " \
           f"warp {wp.__version__}, mujoco {mujoco.__version__}, torch {torch.__version__}"


def pin_cores(n: int) -> list[int]:
    """Pin this process to the first n of the cores it may use: every thread it has now (torch's,
    Warp's, ...) and so every thread it starts later (simrl's and mujoco.rollout's pools
    inherit their creator's affinity). Returns the cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= n <= len(allowed):
        raise SystemExit(f"--cores {n}: this process may use {len(allowed)} core(s) "
                         f"({', '.join(map(str, allowed))}); choose 1 to {len(allowed)}")
    cores = set(allowed[:n])
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return sorted(cores)


def thread_cpus() -> list[int]:
    """Every core that some thread of this process may run on (after --cores: the pinned ones)."""
    cpus = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            cpus |= os.sched_getaffinity(int(tid))
        except ProcessLookupError:
            pass
    return sorted(cpus)


def thread_counts(args) -> list[int]:
    """The thread counts at which the CPU engines are measured: --cores N -> [N]; --threads;
    else 1 and every core this process may use."""
    if args.cores:
        return [args.cores]
    if args.threads:
        try:
            counts = sorted({int(t) for t in args.threads.split(",")})
        except ValueError:
            counts = [0]
        if counts[0] < 1:
            raise SystemExit(f"--threads {args.threads}: give positive integers, comma-separated (e.g. 1,2)")
        return counts
    return sorted({1, len(os.sched_getaffinity(0))})


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ant", help="MJCF path, gymnasium asset name or task:NAME (default: ant)")
    parser.add_argument("--worlds", default="1,64,1024", help="comma-separated world counts")
    parser.add_argument("--engines", default="simrl,mujoco,mujoco_warp",
                        help="comma-separated, from simrl, mujoco, mujoco_warp (default: all)")
    parser.add_argument("--device", default="cpu", help="device of the simrl engine: cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--schedule", default="auto",
                        help="simrl's schedule(s), comma-separated: auto (fused on the CPU, wide on CUDA), fused, "
                             "wide; with several, each is measured as its own engine (simrl-fused, simrl-wide)")
    parser.add_argument("--cores", type=int, metavar="N",
                        help="pin the whole run to the first N cores it may use (os.sched_setaffinity) and "
                             "measure every CPU engine at N threads")
    parser.add_argument("--threads", metavar="LIST",
                        help="comma-separated thread counts of the CPU engines (default: 1 and every core this "
                             "process may use; --cores N sets N)")
    parser.add_argument("--horizon", type=int, default=100,
                        help="steps from the start states per timed call, in every engine (default 100)")
    parser.add_argument("--settle", type=float, default=0.0, metavar="S",
                        help="start every engine from the keyframe (or qpos0) after S simulated seconds of "
                             "mj_step at mid-range controls, so that robots that start in the air have their "
                             "contacts (default 0: the keyframe itself)")
    parser.add_argument("--smooth", action="store_true",
                        help="disable contacts and constraints (in every engine)")
    parser.add_argument("--seconds", type=float, default=3.0,
                        help="timed seconds per engine and world count, split over the repeats")
    parser.add_argument("--repeats", type=int, default=3,
                        help="rounds in which the engines take turns; the median is reported")
    parser.add_argument("--out", help="write the records as JSON to this file")
    parser.add_argument("--markdown", help="append a dated table to this markdown file")
    parser.add_argument("--png", help="plot steps/s against the world count (log-log) to this PNG file")
    parser.add_argument("--profile", action="store_true",
                        help="also time every stage of simrl's forward pass on its own (per world count)")
    parser.add_argument("--count-instructions", action="store_true",
                        help="instructions per world-step instead of steps/s (perf or valgrind's callgrind, in "
                             "child processes; simrl and mj_step on one thread)")
    parser.add_argument("--steps", type=int, default=10,
                        help="with --count-instructions: steps counted per engine and world count (default 10)")
    parser.add_argument("--counter", default="auto", choices=["auto", "perf", "callgrind"],
                        help="with --count-instructions: the instruction counter (auto: perf where it counts "
                             "instructions here, else callgrind)")
    parser.add_argument("--per-stage", action="store_true",
                        help="with --count-instructions (callgrind): instructions per world-step of every pass of "
                             "simrl's wide schedule and of MuJoCo's stage functions")
    parser.add_argument("--train", type=int, metavar="N",
                        help="end-to-end training throughput: N PPO iterations of the task named by --model, "
                             "on this engine and on MuJoCo (sim.backend=mujoco, CPU) in the same run")
    parser.add_argument("--grad", type=int, metavar="H",
                        help="benchmark gradients: an H-step differentiable rollout and its backward")
    args = parser.parse_args(argv)
    # the outputs' folders made now: a run of minutes must not end unable to write what it measured
    for path in (args.out, args.markdown, args.png):
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)

    if args.cores is not None:
        pin_cores(args.cores)
    if args.train:
        return train_benchmark(args.model, [int(w) for w in args.worlds.split(",")], args)
    name, mjm = resolve_model(args.model)
    if args.grad:
        if "," in args.schedule:
            raise SystemExit("--grad measures one schedule at a time: pass --schedule fused or --schedule wide")
        return grad_benchmark(name, mjm, [int(w) for w in args.worlds.split(",")], args)
    if args.smooth:
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    worlds = [int(w) for w in args.worlds.split(",")]
    engines = args.engines.split(",")
    schedules = args.schedule.split(",")
    if not set(schedules) <= {"auto", "fused", "wide"}:
        raise SystemExit(f"--schedule {args.schedule}: choose from auto, fused, wide (comma-separated)")
    if "mujoco_rollout" in engines:
        raise SystemExit("--engines mujoco_rollout: the engine is now `mujoco` (mujoco.rollout at each thread count)")
    unknown = set(engines) - {"simrl", "mujoco", "mujoco_warp"}
    if unknown:
        raise SystemExit(f"unknown engine(s) {sorted(unknown)}; choose from simrl, mujoco, mujoco_warp")
    if args.horizon < 1:
        raise SystemExit(f"--horizon {args.horizon}: give at least 1 step")
    if args.settle < 0.0 or not math.isfinite(args.settle):
        raise SystemExit(f"--settle {args.settle}: give a number of seconds >= 0")
    global SETTLE_SECONDS
    SETTLE_SECONDS = args.settle
    if args.count_instructions:
        return count_benchmark(name, mjm, worlds, engines, schedules, args)
    return forward_benchmark(name, mjm, worlds, engines, schedules, args)


def forward_benchmark(name, mjm, worlds, engines, schedules, args) -> list[dict]:
    """Steps/s of every engine at every world count and thread count, ratios at equal threads."""
    mjw, mjw_import_error = None, None
    if "mujoco_warp" in engines:
        mjw, mjw_import_error = import_mujoco_warp()
        if mjw is None and mjw_import_error is None:
            print("mujoco_warp is not installed (pip install mujoco-warp, or the project's 'bench' extra): "
                  "skipping it")
            engines.remove("mujoco_warp")
    threads = thread_counts(args)
    cpu = wp.get_device(args.device).is_cpu
    integrator = mujoco.mjtIntegrator(mjm.opt.integrator).name.removeprefix("mjINT_")
    solver = mujoco.mjtSolver(mjm.opt.solver).name.removeprefix("mjSOL_")
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu} timestep={mjm.opt.timestep} "
          f"integrator={integrator} solver={solver} (MuJoCo; simrl: Newton) iterations={mjm.opt.iterations} "
          f"tolerance={mjm.opt.tolerance:g}{' (contacts and constraints disabled)' if args.smooth else ''}")
    print(f"machine: {machine()}\n{start_description(mjm)}\nthreads: {', '.join(map(str, threads))}; "
          f"{args.horizon} steps per timed call "
          "from the start states")
    newton = copy_model(mjm)
    newton.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    records, profiles, notes = [], [], []

    def record(engine, num_worlds, rate, info):
        rec = {"engine": engine, "model": name, "num_worlds": num_worlds, "mode": "forward",
               "steps_per_second": rate, "timestep": mjm.opt.timestep, "integrator": integrator,
               "measured_with_batch": num_worlds, "repeats": args.repeats, "horizon": args.horizon,
               "settle_seconds": SETTLE_SECONDS,
               "cpus": thread_cpus(), **info}
        records.append(rec)
        if rate is None:
            print(f"  {engine:15s} worlds={num_worlds:6d}  failed: {rec['error']}")
            return
        extra = f"  compile {rec['compile_seconds']:.1f} s" if "compile_seconds" in rec else ""
        threads_text = f"threads={rec['threads']}" if rec.get("threads") else "         "
        print(f"  {engine:15s} worlds={num_worlds:6d} {threads_text}  {rate:12,.0f} steps/s{extra}")

    for w in worlds:
        # thread counts that differ at this world count (an engine uses at most one thread per world)
        counts = sorted({min(t, w) for t in threads}) if cpu else [None]
        runners, worlds_of, stats = {}, {}, {}
        if "mujoco" in engines:
            for t in sorted({min(t, w) for t in threads}):
                runners[f"mujoco@{t}"], worlds_of[f"mujoco@{t}"] = mujoco_runner(mjm, w, t, args.horizon), w
        if "simrl" in engines:
            for schedule in schedules:
                key = "simrl" if len(schedules) == 1 else f"simrl-{schedule}"
                for t in counts:
                    try:
                        runners[f"{key}@{t}"] = simrl_runner(mjm, w, args.device, args.dtype, schedule, t,
                                                             args.horizon)
                    except UnsupportedFeatureError as e:
                        raise SystemExit(f"simrl cannot simulate this model: {e}\n(--smooth disables contacts and "
                                         "constraints in every engine)") from e
                    worlds_of[f"{key}@{t}"] = w
        failures = {}
        if "mujoco_warp" in engines:
            failures["mujoco_warp@1"] = mjw_import_error
            if mjw is not None:
                try:
                    runners["mujoco_warp@1"] = mujoco_warp_runner(mjw, mjm, w, args.device, args.horizon)
                    worlds_of["mujoco_warp@1"] = w
                except MujocoWarpFailure as e:
                    failures["mujoco_warp@1"] = str(e)
        # iterations of the same steps: once per engine (they do not depend on the thread count)
        for key, (run, _) in runners.items():
            engine = key.split("@")[0]
            if engine not in stats:
                try:
                    stats[engine] = run.stats()
                except Exception as e:  # mujoco_warp failing on the device
                    stats[engine] = {"stats_error": f"{type(e).__name__}: {e}"}
        simrl_keys = [k for k in stats if k.startswith("simrl")]
        matched = None
        if simrl_keys and "mujoco" in stats:
            matched = solver_mismatch(stats[simrl_keys[0]], stats["mujoco"], mjm)
        if matched == "newton":
            for t in sorted({min(t, w) for t in threads}):
                runners[f"mujoco_newton@{t}"] = mujoco_runner(newton, w, t, args.horizon)
                worlds_of[f"mujoco_newton@{t}"] = w
            stats["mujoco_newton"] = runners[f"mujoco_newton@{min(threads[0], w)}"][0].stats()
        if matched:
            notes.append(solver_note(matched, w, stats, simrl_keys[0], mjm))
        rates = measure(runners, worlds_of, args.seconds / args.repeats, args.repeats, failures)
        for key, rate in rates.items():
            engine = key.split("@")[0]
            record(engine, w, rate, {**runners[key][1](), **stats[engine]})
        simrl_key = next((k for k in rates if k.startswith("simrl")), None)
        if args.profile and simrl_key:
            per_world = profile_stages(runners[simrl_key][0].sim, args.repeats)
            next(r for r in reversed(records) if r["engine"] == simrl_key.split("@")[0]
                 )["profile_us_per_world"] = per_world
            profiles.append((w, per_world))
        for key, error in failures.items():
            if error is not None:
                record(key.split("@")[0], w, None, {"error": error, "device": args.device, "dtype": "float32",
                                                    "threads": None})
    add_ratios(records)
    # a world count's rows by thread count: each ratio beside the MuJoCo figure it divides by
    rank = {"mujoco": 0, "mujoco_newton": 2, "mujoco_warp": 3}
    records.sort(key=lambda r: (worlds.index(r["num_worlds"]), r.get("threads") or 0, rank.get(r["engine"], 1)))
    table = summary_table(records)
    notes_text = "".join(f"\n{note}\n" for note in dict.fromkeys(notes))
    print()
    print(table)
    print(notes_text)
    profile_text = ""
    for w, per_world in profiles:
        from simrl.sim.profile import profile_table

        profile_text += (f"\nsimrl step by pass, {w} worlds, {args.dtype}, {args.device} "
                         f"(us per world, the wide schedule's launches on one thread; median of "
                         f"{args.repeats} rounds):\n\n{profile_table(per_world)}\n")
    if profile_text:
        print(profile_text)
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=2))
        print(f"wrote {len(records)} records to {args.out}")
    if args.png:
        plot_rates(records, f"{name}{', smooth' if args.smooth else ''}: physics steps/s", args.png)
        print(f"wrote the plot to {args.png}")
    if args.markdown:
        command = "python scripts/benchmark.py " + " ".join(sys.argv[1:])
        with open(args.markdown, "a") as f:
            f.write(f"\n### {name}, {datetime.date.today().isoformat()}\n\n"
                    f"- machine: {machine()}\n- command: `{command}`\n"
                    f"- model: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, timestep {mjm.opt.timestep}, "
                    f"{integrator}, MuJoCo's solver {solver}"
                    f"{', contacts and constraints disabled' if args.smooth else ''}\n\n"
                    f"{table}\n{notes_text}{profile_text}")
        print(f"appended the table to {args.markdown}")
    return records


def copy_model(mjm: mujoco.MjModel) -> mujoco.MjModel:
    """An independent copy of a compiled model (options included)."""
    import copy

    return copy.deepcopy(mjm)


def solver_mismatch(simrl_stats: dict, mujoco_stats: dict, mjm) -> str | None:
    """None when simrl's and MuJoCo's mean solver iterations per step are within 2x of each
    other; else "newton" when MuJoCo's solver is not Newton (measure it with Newton too), or
    "same" when both already run Newton with the same tolerance and iteration cap."""
    a, b = simrl_stats.get("solver_niter_mean"), mujoco_stats.get("solver_niter_mean")
    if a is None or b is None or max(a, b) <= 2 * min(a, b):
        return None
    return "same" if mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON else "newton"


def solver_note(matched: str, worlds: int, stats: dict, simrl_key: str, mjm) -> str:
    """The line under the table that says why a ratio at matched accuracy is given (or is not)."""
    solver = mujoco.mjtSolver(mjm.opt.solver).name.removeprefix("mjSOL_")
    simrl_it, mujoco_it = stats[simrl_key]["solver_niter_mean"], stats["mujoco"]["solver_niter_mean"]
    low, high = sorted((simrl_it, mujoco_it))
    ratio = f"{high / low:.1f}x" if low > 0 else "more than 2x (one takes none)"
    head = (f"Solver iterations differ by {ratio} "
            f"({worlds} worlds): MuJoCo's {solver} takes {mujoco_it:.1f} per step to tolerance "
            f"{mjm.opt.tolerance:g} (at most {mjm.opt.iterations}) in float64, simrl's Newton {simrl_it:.1f}")
    if matched == "newton":
        return (head + f", so 'vs mujoco' compares unequal solver work. 'vs mujoco Newton' divides by MuJoCo with "
                f"its solver set to Newton (mujoco_newton: {stats['mujoco_newton']['solver_niter_mean']:.1f} "
                "iterations per step), the same method, tolerance and iteration cap as simrl's, whose answer "
                "both reach (the problem is strictly convex).")
    return (head + "; both run Newton with the same tolerance and iteration cap, so the settings already match: "
            "simrl's float32 iterations also stop when the cost cannot decrease by more than its rounding error, "
            "which float64 MuJoCo does not need.")


def add_ratios(records) -> None:
    """Each record's `vs_mujoco`: its steps/s over MuJoCo's (mujoco.rollout) at the same world count
    and thread count (`vs_mujoco_threads`); on CUDA (no threads) over MuJoCo's with the most
    threads. `vs_mujoco_newton` likewise against mujoco_newton where that was measured."""
    for base_engine, key in (("mujoco", "vs_mujoco"), ("mujoco_newton", "vs_mujoco_newton")):
        bases = {(r["num_worlds"], r["threads"]): r["steps_per_second"] for r in records
                 if r["engine"] == base_engine and r["steps_per_second"] is not None}
        for r in records:
            if r["steps_per_second"] is None:
                continue
            t = r.get("threads")
            if t is None:  # not a CPU engine: the best MuJoCo figure at this world count
                t = max((bt for bw, bt in bases if bw == r["num_worlds"]), default=None)
            if (r["num_worlds"], t) in bases:
                r[key] = r["steps_per_second"] / bases[(r["num_worlds"], t)]
                r[f"{key}_threads"] = t


def perf_count(text: str) -> int | None:
    """The instruction count in `perf stat -x,` output (count,unit,event,...), or None."""
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return int(fields[0]) if fields[0].isdigit() else None
    return None


def callgrind_count(path: Path) -> int:
    """Instructions in a callgrind output file: its `totals:` line (Ir; its `summary:` line stays 0
    when instrumentation was switched on by a client request)."""
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"{path}: no totals line in callgrind's output")


def instruction_counter(choice: str) -> str:
    """"perf" when `perf stat -e instructions:u` counts instructions here (and choice allows),
    else "callgrind" when valgrind runs; a SystemExit that says what is missing otherwise."""
    if choice in ("auto", "perf") and shutil.which("perf"):
        try:
            probe = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode == 0 and perf_count(probe.stderr) is not None:
                return "perf"
        except (OSError, subprocess.TimeoutExpired):
            pass
    if choice == "perf":
        raise SystemExit("--counter perf: `perf stat -e instructions:u` does not count instructions on this machine "
                         "(no perf, or no hardware counter: a virtual machine often has none); try --counter callgrind")
    if shutil.which("valgrind") is None:
        raise SystemExit("--count-instructions needs valgrind (its callgrind tool) or perf with a hardware "
                         "instruction counter; neither works here")
    return "callgrind"


def count_child(counter: str, child_args: list[str], out: Path) -> tuple[int, str]:
    """Run scripts/step_worlds.py with child_args under the counter; (instructions, its output)."""
    child = [sys.executable, str(Path(__file__).resolve().parent / "step_worlds.py"), *child_args]
    # one torch thread, and the same string hashes in every run
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
    if counter == "perf":
        command = ["perf", "stat", "-x,", "-e", "instructions:u", "-o", str(out), "--", *child]
    else:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                   *child, "--callgrind"]
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    count = perf_count(out.read_text()) if counter == "perf" else callgrind_count(out)
    if count is None:
        raise SystemExit(f"{out}: no instruction count in perf's output:\n{out.read_text()}")
    return count, result.stdout.strip().splitlines()[-1]


def count_benchmark(name, mjm, worlds, engines, schedules, args) -> list[dict]:
    """Instructions per world-step of simrl (each schedule, one thread) and mj_step (mujoco.rollout,
    one thread), from the same start states under the same controls (see the docstring)."""
    from step_worlds import PORTABLE_CPU_FLAGS

    if args.steps < 1:
        raise SystemExit(f"--steps {args.steps}: count at least 1 step")
    if args.device != "cpu":
        raise SystemExit("--count-instructions counts CPU instructions: use --device cpu")
    counter = instruction_counter(args.counter)
    if args.per_stage and counter != "callgrind":
        raise SystemExit("--per-stage attributes instructions with callgrind: add --counter callgrind")
    if args.per_stage and shutil.which("callgrind_annotate") is None:
        raise SystemExit("--per-stage needs callgrind_annotate (valgrind's tools), which is not on PATH")
    unknown = set(engines) - {"simrl", "mujoco"}
    if unknown:
        print(f"--count-instructions counts simrl and mujoco; leaving out {', '.join(sorted(unknown))}")
    schedules = [("fused" if s == "auto" else s) for s in dict.fromkeys(schedules)]
    portable = counter == "callgrind" and "simrl" in engines
    if portable:
        wp.config.cpu_compiler_flags = PORTABLE_CPU_FLAGS
    integrator = mujoco.mjtIntegrator(mjm.opt.integrator).name.removeprefix("mjINT_")
    solver = mujoco.mjtSolver(mjm.opt.solver).name.removeprefix("mjSOL_")
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu} timestep={mjm.opt.timestep} integrator={integrator} "
          f"solver={solver} (MuJoCo; simrl: Newton){' (contacts and constraints disabled)' if args.smooth else ''}")
    print(f"machine: {machine()}\n{start_description(mjm)}\ncounter: {counter}; {args.steps} steps counted "
          "after the first, one thread"
          + ("; simrl's kernels built for x86-64-v3 (valgrind runs no AVX-512)" if portable else ""))
    records = []
    with tempfile.TemporaryDirectory(prefix="simrl-count-") as tmp:
        tmp = Path(tmp)
        model_path = tmp / "model.mjb"
        mujoco.mj_saveModel(mjm, str(model_path), None)
        for w in worlds:
            arrays = start_arrays(mjm, w)
            start_path = tmp / f"start_{w}.npz"
            np.savez(start_path, **arrays)
            jobs = []
            if "simrl" in engines:
                for schedule in schedules:
                    key = "simrl" if len(schedules) == 1 else f"simrl-{schedule}"
                    # built here first: the kernels compiled (or loaded) outside the counter, and the
                    # solver iterations of the counted steps
                    run, _ = simrl_runner(mjm, w, "cpu", args.dtype, schedule, 1, 1 + args.steps)
                    stats = run.stats(skip=1)
                    child = ["simrl", str(model_path), str(start_path), "--schedule", schedule, "--dtype",
                             args.dtype, *(["--portable-cpu"] if portable else [])]
                    jobs.append((key, args.dtype, child, stats))
            if "mujoco" in engines:
                stats = mujoco_stats(mjm, arrays, 1 + args.steps, skip=1)
                jobs.append(("mujoco", "float64", ["mujoco", str(model_path), str(start_path)], stats))
                # where the solvers' iterations differ by more than 2x, MuJoCo with its solver set to
                # Newton too: the count at matched method and accuracy (as the timed benchmark does)
                simrl_stats = next((job[3] for job in jobs if job[0].startswith("simrl")), None)
                if simrl_stats is not None and solver_mismatch(simrl_stats, stats, mjm) == "newton":
                    newton = copy_model(mjm)
                    newton.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
                    newton_path = tmp / "model_newton.mjb"
                    mujoco.mj_saveModel(newton, str(newton_path), None)
                    jobs.append(("mujoco_newton", "float64", ["mujoco", str(newton_path), str(start_path)],
                                 mujoco_stats(newton, arrays, 1 + args.steps, skip=1)))
            for key, dtype, child, stats in jobs:
                start = time.perf_counter()
                counts, outputs = [], []
                for steps in (0, args.steps):
                    count, output = count_child(counter, [*child[:3], str(steps), *child[3:]],
                                                tmp / f"{key}_{w}_{steps}.out")
                    counts.append(count)
                    outputs.append(output)
                per_step = (counts[1] - counts[0]) / (w * args.steps)
                rec = {"engine": key, "model": name, "mode": "instructions", "num_worlds": w, "steps": args.steps,
                       "counter": counter, "threads": 1, "device": "cpu", "dtype": dtype,
                       "settle_seconds": SETTLE_SECONDS,
                       "instructions": counts, "instructions_per_world_step": per_step,
                       "final_state": outputs[1], "count_seconds": time.perf_counter() - start,
                       **({"cpu_target": "x86-64-v3"} if portable and key.startswith("simrl") else {}), **stats}
                if args.per_stage and key == "mujoco":
                    rec["per_stage"] = mujoco_stage_counts([tmp / f"{key}_{w}_{n}.out" for n in (0, args.steps)],
                                                           w * args.steps)
                records.append(rec)
                print(f"  {key:12s} worlds={w:5d}  {per_step:12,.0f} instructions per world-step  "
                      f"({rec['count_seconds']:.0f} s; {outputs[1]})")
            if args.per_stage and "simrl" in engines:
                records.append(simrl_stage_counts(name, mjm, w, args, portable, tmp, model_path))
    counted_records = [r for r in records if r["mode"] == "instructions"]
    newton = any(r["engine"] == "mujoco_newton" for r in counted_records)
    for r in counted_records:
        for engine, key in (("mujoco", "vs_mujoco"), ("mujoco_newton", "vs_mujoco_newton")):
            base = next((b for b in counted_records if b["engine"] == engine and b["num_worlds"] == r["num_worlds"]),
                        None)
            if base is not None:
                r[key] = base["instructions_per_world_step"] / r["instructions_per_world_step"]
    lines = ["| engine | dtype | worlds | steps counted | instructions per world-step | vs mj_step (its instructions "
             "/ these) | " + ("vs mj_step with Newton | " if newton else "")
             + "solver iters mean/max | contacts/world |",
             "|---|---|---:|---:|---:|---:|" + ("---:|" if newton else "") + "---:|---:|"]
    for r in counted_records:
        ratio = f"{r['vs_mujoco']:.2f}x" if "vs_mujoco" in r else "-"
        ratio_newton = (f"{r['vs_mujoco_newton']:.2f}x | " if "vs_mujoco_newton" in r else "- | ") if newton else ""
        lines.append(f"| {r['engine']} | {r['dtype']} | {r['num_worlds']} | {r['steps']} | "
                     f"{r['instructions_per_world_step']:,.0f} | {ratio} | {ratio_newton}{r['solver_niter_mean']:.2f}/"
                     f"{r['solver_niter_max']} | {r['contacts_per_world']:.1f} |")
    for w in sorted({r["num_worlds"] for r in counted_records}):
        simrl_rec = next((r for r in counted_records if r["engine"].startswith("simrl") and r["num_worlds"] == w), None)
        mujoco_rec = next((r for r in counted_records if r["engine"] == "mujoco" and r["num_worlds"] == w), None)
        if simrl_rec is not None and mujoco_rec is not None:
            matched = solver_mismatch(simrl_rec, mujoco_rec, mjm)
            if matched:
                stats = {"simrl": simrl_rec, "mujoco": mujoco_rec,
                         **({"mujoco_newton": next(r for r in counted_records if r["engine"] == "mujoco_newton"
                                                   and r["num_worlds"] == w)} if matched == "newton" else {})}
                lines.append("\n" + solver_note(matched, w, stats, "simrl", mjm).replace(
                    "'vs mujoco'", "'vs mj_step'").replace("'vs mujoco Newton'", "'vs mj_step with Newton'"))
    table = "\n".join(lines)
    title = f"Instructions per world-step: {name}, {counter}"
    write_results(args, counted_records, table, title)
    for r in records:
        if "per_stage" in r:
            total = sum(count for _, count in r["per_stage"]) if r["engine"] != "mujoco" else \
                r["instructions_per_world_step"]
            rows = [f"| {stage} | {count:,.0f} | {100 * count / total:.1f}% |" for stage, count in r["per_stage"]]
            what = ("simrl's wide schedule: each pass's kernel, worlds 2W minus W" if r["engine"] != "mujoco"
                    else "mj_step's stage functions, each with its callees")
            write_results(args, records, "\n".join(["| stage | instructions per world-step | share |",
                                                    "|---|---:|---:|", *rows]),
                          f"Instructions per stage: {name}, {r['engine']}, {r['num_worlds']} worlds ({what})")
    return records


def annotate_inclusive(path: Path) -> dict[str, int]:
    """Instructions of every function in a callgrind output file with its callees'
    (`callgrind_annotate --inclusive=yes`), by function name."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(path)],
                         capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in out.splitlines():
        # "1,234,567 (12.34%)  file.c:function [library]"
        match = re.match(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?\S*?:(\S+)", line)
        if match:
            counts[match.group(2)] = counts.get(match.group(2), 0) + int(match.group(1).replace(",", ""))
    return counts


def mujoco_stage_counts(paths: list[Path], world_steps: int) -> list[tuple[str, float]]:
    """(MuJoCo function, instructions per world-step with its callees') of the functions of
    libmujoco (mj_* and mju_*) over 1% of mj_step's: the 0-step and the N-step runs' inclusive
    counts subtracted, largest first (mj_step, mj_forwardSkip, mj_fwdPosition, mj_collision, ...:
    the shares overlap)."""
    def mujoco_functions(path):
        counts = {}
        for function, count in annotate_inclusive(path).items():
            function = function.split(".llvm.")[0]  # LTO's local copies
            if function.startswith(("mj_", "mju_", "mjc_")):
                counts[function] = counts.get(function, 0) + count
        return counts

    before, after = (mujoco_functions(p) for p in paths)
    per_step = {f: (n - before.get(f, 0)) / world_steps for f, n in after.items()}
    step = per_step.get("mj_step", 0.0)
    return sorted(((f, n) for f, n in per_step.items() if n >= 0.01 * step), key=lambda kv: -kv[1])


def launch_parts(prefix: Path) -> dict[str, int]:
    """Instructions per kernel name, summed over the profile parts step_worlds.py --by-launch
    dumped (`<prefix>.<n>`, each with "desc: Trigger: Client Request: <kernel>" and its totals)."""
    counts = {}
    for part in prefix.parent.glob(prefix.name + ".*"):
        name = total = None
        for line in part.read_text().splitlines():
            if line.startswith("desc: Trigger: Client Request: "):
                name = line.removeprefix("desc: Trigger: Client Request: ").strip()
            elif line.startswith("totals:"):
                total = int(line.split()[1])
        if name is not None and total is not None:
            counts[name] = counts.get(name, 0) + total
    return counts


def simrl_stage_counts(name, mjm, w, args, portable, tmp: Path, model_path: Path) -> dict:
    """Instructions per world-step of each kernel of simrl's wide schedule (see --per-stage)."""
    start = time.perf_counter()
    simrl_runner(mjm, 2 * w, "cpu", args.dtype, "wide", 1, 2)  # compiled outside the count
    counts = []
    for worlds in (w, 2 * w):
        start_path = tmp / f"start_{worlds}_stages.npz"
        np.savez(start_path, **start_arrays(mjm, worlds))
        prefix = tmp / f"stages_{worlds}.out"
        child = [sys.executable, str(Path(__file__).resolve().parent / "step_worlds.py"), "simrl", str(model_path),
                 str(start_path), str(args.steps), "--by-launch", "--dtype", args.dtype,
                 *(["--portable-cpu"] if portable else [])]
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                   f"--callgrind-out-file={prefix}", *child]
        env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1"}
        result = subprocess.run(command, capture_output=True, text=True, env=env)
        if result.returncode != 0:
            raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
        counts.append(launch_parts(prefix))
    stages = sorted(((k, (counts[1][k] - counts[0].get(k, 0)) / (w * args.steps)) for k in counts[1]),
                    key=lambda kv: -kv[1])
    total = sum(v for _, v in stages)
    print(f"  simrl-wide per stage (worlds {2 * w} minus {w}): {total:,.0f} instructions per world-step in its "
          f"kernels ({time.perf_counter() - start:.0f} s)")
    return {"engine": "simrl-wide-stages", "model": name, "mode": "per_stage", "num_worlds": w,
            "steps": args.steps, "dtype": args.dtype, "per_stage": stages, "kernel_instructions_per_world_step": total}


def train_benchmark(task_name: str, worlds: list[int], args) -> list[dict]:
    """End-to-end training throughput: environment steps per second of `--train N` PPO
    iterations (rollout plus update, after one warm-up iteration that compiles), for the task's
    environment on this engine ("simrl") and, in the same run, on MuJoCo itself ("mujoco":
    sim.backend=mujoco, one MjData per world stepped by mj_step; CPU only) with the same PPO."""
    import contextlib
    import io

    from omegaconf import OmegaConf

    import envs
    import tasks
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.ppo import Runner, rsl_rl_config
    from tasks.config import env_kwargs

    if task_name not in tasks.available():
        raise SystemExit(f"--train needs a task name for --model ({', '.join(tasks.available())}), "
                         f"got {task_name!r}")
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / f"{task_name}.yaml"), resolve=True)
    backends = [("simrl", "warp")] if "simrl" in args.engines.split(",") else []
    if "mujoco" in args.engines.split(",") and args.device == "cpu":
        backends.append(("mujoco", "mujoco"))
    print(f"task {task_name}: PPO, {args.train} timed iterations after one warm-up\nmachine: {machine()}")
    records = []
    for w in worlds:
        for engine, backend in backends:
            torch.manual_seed(0)
            env = envs.make(task_name, num_envs=w, device=args.device, seed=0, backend=backend, **env_kwargs(task))
            cfg = rsl_rl_config(task["ppo"])
            with contextlib.redirect_stdout(io.StringIO()):
                runner = Runner(RslRlVecEnv(env), cfg, log_dir=None, device=args.device, key_terms=[],
                                task=task_name)
                runner.learn(1)  # compiles, allocates
            times = []
            log = runner.logger.log

            def timed_log(log=log, times=times, **kw):
                times.append((kw["collect_time"], kw["learn_time"]))
                return log(**kw)

            runner.logger.log = timed_log
            start = time.perf_counter()
            with contextlib.redirect_stdout(io.StringIO()):
                runner.learn(args.train)
            seconds = time.perf_counter() - start
            steps = args.train * cfg["num_steps_per_env"] * w
            collect = sum(t[0] for t in times)
            rec = {"engine": engine, "model": task_name, "num_worlds": w, "mode": "train", "device": args.device,
                   "dtype": "float32" if backend == "warp" else "float64", "steps_per_second": steps / seconds,
                   "iterations": args.train, "env_steps": steps, "seconds": seconds,
                   "collect_fraction": collect / max(seconds, 1e-9), "decimation": env.decimation,
                   "torch_threads": torch.get_num_threads(), "threads": getattr(env.sim, "cpu_threads", 1),
                   "cpus": thread_cpus()}
            records.append(rec)
            print(f"  {engine:8s} worlds={w:6d} physics threads={rec['threads']}  "
                  f"{rec['steps_per_second']:10,.0f} env steps/s  "
                  f"(rollout {100 * rec['collect_fraction']:.0f}% of the time)")
    base = {r["num_worlds"]: r["steps_per_second"] for r in records if r["engine"] == "mujoco"}
    # the MuJoCo backend steps its worlds in one Python loop (one thread); simrl's Sim takes its
    # default threads (every core it may use, from 64 worlds per thread): --cores 1 for one each
    lines = ["| engine | device | physics threads | worlds | env steps/s (PPO, rollout + update) | vs mujoco backend "
             "| rollout share |", "|---|---|---:|---:|---:|---:|---:|"]
    for r in records:
        ratio = f"{r['steps_per_second'] / base[r['num_worlds']]:.2f}x" if r["num_worlds"] in base else "-"
        lines.append(f"| {r['engine']} | {r['device']} | {r['threads']} | {r['num_worlds']} | "
                     f"{r['steps_per_second']:,.0f} | {ratio} | {100 * r['collect_fraction']:.0f}% |")
    write_results(args, records, "\n".join(lines), f"Training throughput: {task_name}")
    return records


def write_results(args, records, table: str, title: str) -> None:
    """Print the table; write the records (--out) and a dated section with the machine and the
    command (--markdown)."""
    print()
    print(table)
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=2))
    if args.markdown:
        with open(args.markdown, "a") as f:
            f.write(f"\n### {title}, {datetime.date.today().isoformat()}\n\n"
                    f"`python scripts/benchmark.py {' '.join(sys.argv[1:])}` on {machine()}\n\n{table}\n")
        print(f"appended the table to {args.markdown}")


def grad_benchmark(name, mjm, worlds, args) -> int:
    """Forward and backward time of an H-step differentiable rollout (simrl.diff_step)."""
    from simrl import diff_step

    H = args.grad
    if mjm.opt.integrator != mujoco.mjtIntegrator.mjINT_EULER:
        print("diff_step differentiates Euler steps: switching the model to the Euler integrator")
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, {H}-step rollouts, {args.dtype}")
    print(f"machine: {machine()}")
    start = initial_state(mjm)
    rows = []
    for W in worlds:
        sim = Sim.from_model(mjm, num_worlds=W, device=args.device, dtype=args.dtype, cpu_threads=1,
                             schedule=args.schedule)
        dtype = sim.qpos.dtype
        qpos0 = torch.tensor(np.tile(start.qpos, (W, 1)), dtype=dtype, device=sim.qpos.device)
        qvel0 = torch.zeros(W, mjm.nv, dtype=dtype, device=sim.qpos.device)
        ctrls = torch.tensor(random_controls(mjm, H * W).reshape(H, W, mjm.nu), dtype=dtype,
                             device=sim.qpos.device, requires_grad=True)

        def rollout(sim=sim, qpos0=qpos0, qvel0=qvel0, ctrls=ctrls):
            qpos, qvel = qpos0, qvel0
            for t in range(H):
                qpos, qvel = diff_step(sim, qpos, qvel, ctrls[t])
            return qpos, qvel

        def plain(sim=sim, qpos0=qpos0, qvel0=qvel0, ctrls=ctrls):
            sim.qpos, sim.qvel = qpos0, qvel0
            for t in range(H):
                sim.ctrl = ctrls[t].detach()
                sim.step()

        compile_start = time.perf_counter()
        qpos, qvel = rollout()  # compiles the kernels
        (qpos.sum() + qvel.sum()).backward()
        plain()
        wp.synchronize()
        compile_seconds = time.perf_counter() - compile_start
        fwd, bwd, step = [], [], []
        memory = 0
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            plain()
            wp.synchronize()
            t1 = time.perf_counter()
            qpos, qvel = rollout()
            wp.synchronize()
            t2 = time.perf_counter()
            memory = rollout_bytes(qpos.grad_fn)
            (qpos.sum() + qvel.sum()).backward()
            wp.synchronize()
            t3 = time.perf_counter()
            step.append(t1 - t0), fwd.append(t2 - t1), bwd.append(t3 - t2)
        profile = None
        if args.profile:
            profile = profile_rollout(rollout)
            print(profile_text(profile, W))
        row = {"engine": "simrl", "mode": "grad", "model": name, "num_worlds": W, "horizon": H,
               "dtype": args.dtype, "step_seconds": min(step), "forward_seconds": min(fwd),
               "backward_seconds": min(bwd), "backward_over_forward": min(bwd) / min(fwd),
               "forward_over_step": min(fwd) / min(step), "bytes_per_world_step": memory / (W * H),
               "compile_seconds": compile_seconds, **({"profile_seconds": profile} if profile else {})}
        rows.append(row)
        print(f"  worlds={W:5d}  Sim.step {row['step_seconds']:.3f} s  diff forward {row['forward_seconds']:.3f} s  "
              f"backward {row['backward_seconds']:.3f} s  backward/forward {row['backward_over_forward']:.2f}  "
              f"forward/Sim.step {row['forward_over_step']:.2f}  "
              f"memory {row['bytes_per_world_step'] / 1024:.1f} KiB per world per step")
    table = ("| worlds | H | Sim.step (s) | diff_step forward (s) | backward (s) | backward / forward | "
             "forward / Sim.step | memory per world per step |\n|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        table += (f"| {r['num_worlds']} | {r['horizon']} | {r['step_seconds']:.3f} | {r['forward_seconds']:.3f} | "
                  f"{r['backward_seconds']:.3f} | {r['backward_over_forward']:.2f} | {r['forward_over_step']:.2f} | "
                  f"{r['bytes_per_world_step'] / 1024:.1f} KiB |\n")
    for r in rows:
        if "profile_seconds" in r:
            table += "\n" + profile_text(r["profile_seconds"], r["num_worlds"])
    write_results(args, rows, table, f"Gradients: {name}, {args.dtype}")
    return 0


def profile_rollout(rollout) -> dict:
    """Seconds per kernel (and adjoint) of one differentiable rollout and its backward, and the
    memsets of the step buffers: every Warp launch timed on its own, synchronised (a CPU launch
    is synchronous anyway). Returns {"forward" | "backward": {name: seconds}}, each with the
    phase's total under "total" and what no launch or memset accounts for under "other"."""
    times = {"forward": {}, "backward": {}}
    phase = ["forward"]
    launch, zero = wp.launch, wp.array.zero_

    def timed_launch(kernel, *a, **kw):
        t = time.perf_counter()
        result = launch(kernel, *a, **kw)
        wp.synchronize()
        name = kernel.key.removeprefix("build__locals__") + (" (adjoint)" if kw.get("adjoint") else "")
        times[phase[0]][name] = times[phase[0]].get(name, 0.0) + time.perf_counter() - t
        return result

    def timed_zero(array):
        t = time.perf_counter()
        zero(array)
        wp.synchronize()
        times[phase[0]]["memset of step buffers"] = (times[phase[0]].get("memset of step buffers", 0.0)
                                                    + time.perf_counter() - t)

    wp.launch, wp.array.zero_ = timed_launch, timed_zero
    try:
        t0 = time.perf_counter()
        qpos, qvel = rollout()
        t1 = time.perf_counter()
        phase[0] = "backward"
        (qpos.sum() + qvel.sum()).backward()
        t2 = time.perf_counter()
    finally:
        wp.launch, wp.array.zero_ = launch, zero
    for key, total in (("forward", t1 - t0), ("backward", t2 - t1)):
        times[key]["other"] = total - sum(times[key].values())
        times[key]["total"] = total
    return times


def profile_text(profile: dict, worlds: int) -> str:
    lines = [f"Where the time goes, {worlds} worlds (one instrumented rollout):", "",
             "| phase | kernel | seconds | share |", "|---|---|---:|---:|"]
    for key in ("forward", "backward"):
        part = profile[key]
        for name, seconds in sorted(part.items(), key=lambda kv: -kv[1]):
            if name != "total":
                lines.append(f"| {key} | {name} | {seconds:.3f} | {100 * seconds / part['total']:.0f}% |")
    return "\n".join(lines) + "\n"


def rollout_bytes(node) -> int:
    """Bytes held by a chain of diff_step calls for its backward: every array (and gradient)
    of every step's buffers, walking the autograd graph from `node`."""
    seen, total, stack = set(), 0, [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        rollout = getattr(n, "rollout", None)
        if rollout is not None:
            for d in rollout.datas:
                for field in data_struct(rollout.model.dtype).vars:
                    array = getattr(d, field)
                    if isinstance(array, wp.array):
                        total += array.capacity * (2 if array.grad is not None else 1)
        stack.extend(f for f, _ in n.next_functions)
    return total


def profile_stages(sim, rounds: int) -> dict:
    """Median over `rounds` of simrl.sim.profile's per-stage times (us per world)."""
    from simrl.sim.profile import StageProfiler

    profiler = StageProfiler(sim)
    steps = max(2, 8192 // sim.num_worlds)
    profiler.profile(1)  # warm-up
    runs = [profiler.profile(steps) for _ in range(rounds)]
    return {name: float(np.median([r[name] for r in runs])) for name in runs[0]}


def plot_rates(records, title: str, path: str) -> None:
    """Steps/s against the world count, one line per engine (and device, dtype, thread count), log-log."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = {}
    for r in records:
        if r["steps_per_second"] is None:
            continue
        threads = f", {r['threads']} thread{'s' if r['threads'] > 1 else ''}" if r.get("threads") else ""
        label = f"{r['engine']} ({r['device']}, {r['dtype']}{threads})"
        lines.setdefault(label, []).append((r["num_worlds"], r["steps_per_second"]))
    failed = sorted({r["engine"] for r in records if r["steps_per_second"] is None})
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for label, points in lines.items():
        points.sort()
        ax.plot([x for x, _ in points], [y for _, y in points], marker="o", label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    worlds = sorted({x for points in lines.values() for x, _ in points})
    if worlds:
        ax.set_xticks(worlds, [str(w) for w in worlds])
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xlabel("worlds")
    ax.set_ylabel("physics steps / s (worlds x steps / s)")
    ax.set_title(title + (f"\n(failed, not drawn: {', '.join(failed)})" if failed else ""))
    ax.grid(True, which="both", alpha=0.3)
    if lines:
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def summary_table(records) -> str:
    """Markdown table: steps/s per engine, world count and thread count, with the ratio to MuJoCo
    (mujoco.rollout) at the same world count and thread count, measured in the same rounds; a
    "vs mujoco Newton" column where MuJoCo was also measured with its solver set to Newton."""
    newton = any("vs_mujoco_newton" in r for r in records)
    head = ("| engine | device | dtype | threads | worlds | steps/s | vs mujoco, same threads "
            + ("| vs mujoco Newton, same threads " if newton else "")
            + "| compile s | NaN-free worlds | contacts/world | solver iters mean/max | KiB/world |")
    lines = [head, "|---|---|---|---:|---:|---:|---:|" + ("---:|" if newton else "") + "---:|---:|---:|---:|---:|"]

    def ratio(r, key):
        if key not in r:
            return "-"
        text = f"{r[key]:.2f}x"
        return text if r.get("threads") is not None else f"{text} (vs {r[key + '_threads']} threads)"

    for r in records:
        threads = r.get("threads") if r.get("threads") is not None else "-"
        if r["steps_per_second"] is None:
            lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {threads} | {r['num_worlds']} | "
                         f"failed: {r['error'].replace('|', '/')} | - |" + (" - |" if newton else "")
                         + " - | - | - | - | - |")
            continue
        compile_s = f"{r['compile_seconds']:.1f}" if "compile_seconds" in r else "-"
        nan_free = f"{r['nan_free_worlds']}/{r['num_worlds']}" if "nan_free_worlds" in r else "-"
        contacts = f"{r['contacts_per_world']:.1f}" if "contacts_per_world" in r else "-"
        iters = f"{r['solver_niter_mean']:.1f}/{r['solver_niter_max']}" if "solver_niter_mean" in r else "-"
        per_world = r.get("device_bytes_per_world", r.get("state_bytes_per_world"))
        kib = f"{per_world / 1024:.1f}" if per_world is not None else "-"
        lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {threads} | {r['num_worlds']} | "
                     f"{r['steps_per_second']:,.0f} | {ratio(r, 'vs_mujoco')} | "
                     + (f"{ratio(r, 'vs_mujoco_newton')} | " if newton else "")
                     + f"{compile_s} | {nan_free} | {contacts} | {iters} | {kib} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
