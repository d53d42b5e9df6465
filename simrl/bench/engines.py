"""The engines a benchmark compares, each built once per world count and stepped from the
shared start states (simrl.bench.models) by a callable that a timer can call repeatedly.

Engines:
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

Simulation data per world (`data_bytes_per_world` in the records, "data KiB/world" in a table
of the timed and the counted modes): simrl's, the bytes of one world's Data
(simrl.sim.data.data_bytes_per_world, summed), sized by its contact slots and constraint rows,
fixed when the model loads; MuJoCo Warp's, the bytes of every array of
`mujoco_warp.put_data(mjm, mjd, nworld=W)` at put_data's default budgets (contacts per world
`nconmax`, shared by all worlds as `naconmax` = nconmax x W, and constraint rows per world
`njmax`), over W. MuJoCo has no such figure: mujoco.rollout keeps one MjData per thread, not
per world, with a preallocated arena of its own.

A runner is a pair (run, info): `run()` steps the engine and returns the steps it took (a
world-step count is that times the worlds), `run.stats()` the solver iterations and contacts
of the timed steps in the first STATS_WORLDS worlds, and `info()` the record's fields.
"""

import dataclasses
import time

import mujoco
import numpy as np
import torch
import warp as wp

from simrl import Sim
from simrl.bench.host import resident_mib
from simrl.bench.models import STATE_SPEC, initial_state, solver_name, start_arrays
from simrl.sim.data import data_bytes_per_world

#: the solver iterations and contacts of the timed steps are read in the first STATS_WORLDS worlds
STATS_WORLDS = 64


def iteration_stats(niter: np.ndarray, ncon: np.ndarray) -> dict:
    """Mean and max solver iterations per step, and contacts per world, of [steps, worlds] arrays."""
    return {"solver_niter_mean": float(niter.mean()), "solver_niter_max": int(niter.max()),
            "contacts_per_world": float(ncon.mean())}


def state_bytes(sim) -> int:
    """Bytes of the simulation's Warp arrays: every Data buffer and every Model array."""
    total = 0
    for struct in (sim.data, sim.model.struct):
        for name in struct._cls.vars:
            value = getattr(struct, name)
            if isinstance(value, wp.array):
                total += value.capacity
    return total


def simrl_data_memory(sim) -> dict:
    """simrl's simulation data per world: `data_bytes_per_world`, the bytes of one world's Data
    (W worlds hold W times it), and the contact slots and constraint rows that size it."""
    return {"data_bytes_per_world": sum(data_bytes_per_world(sim.model).values()),
            "contact_slots": sim.model.struct.nconmax, "constraint_rows": sim.model.struct.nefc}


def simrl_runner(mjm, num_worlds, device, dtype, schedule="auto", threads=None, horizon=100, settle=0.0):
    """Build the Sim; return a callable that steps it `horizon` steps from the start states, and
    a callable that summarizes it. `threads`: its cpu_threads on the CPU (ignored on CUDA)."""
    start = time.perf_counter()
    rss_before = resident_mib()
    free_before = wp.get_device(device).free_memory if str(device).startswith("cuda") else None
    cpu = wp.get_device(device).is_cpu
    sim = Sim.from_model(mjm, num_worlds=num_worlds, device=device, dtype=dtype, schedule=schedule,
                         cpu_threads=threads if cpu else None)
    setup = time.perf_counter() - start
    memory = {"state_bytes_per_world": state_bytes(sim) / num_worlds, **simrl_data_memory(sim)}
    if free_before is not None:  # what the device lost to the Sim (its arrays and Warp's pools)
        memory["device_bytes_per_world"] = (free_before - sim.device.free_memory) / num_worlds
    else:  # what the process grew by building it (the arrays, first-touched)
        memory["resident_mib_growth"] = resident_mib() - rss_before
    arrays = start_arrays(mjm, num_worlds, settle)
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


def mujoco_runner(mjm, num_worlds, nthread, horizon=100, settle=0.0):
    """A callable that steps num_worlds copies of mjm `horizon` steps from the start states with
    mujoco.rollout (a C loop over mj_step) on nthread threads (at most one per world), and a
    callable that summarizes it."""
    from mujoco import rollout

    threads = max(1, min(nthread, num_worlds))
    datas = [mujoco.MjData(mjm) for _ in range(threads)]
    pool = rollout.Rollout(nthread=threads if threads > 1 else 0)  # 0: the calling thread
    arrays = start_arrays(mjm, num_worlds, settle)
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
                "dtype": "float64", "device": "cpu", "threads": threads, "solver": solver_name(mjm)}

    return run, info


class MujocoWarpFailure(RuntimeError):
    """mujoco_warp failed on this model or device; the message names the stage and the error.
    `memory`: its data per world (mujoco_warp_data_memory) where put_data got that far, else {}."""

    def __init__(self, message: str, memory: dict | None = None):
        super().__init__(message)
        self.memory = memory or {}


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


def warp_arrays(data) -> list[wp.array]:
    """Every Warp array of a dataclass and of the dataclasses it holds (MuJoCo Warp's Data holds
    its Contact and its Constraint), each allocation once."""
    arrays, seen = [], set()

    def visit(obj):
        for field in dataclasses.fields(obj):
            value = getattr(obj, field.name)
            if isinstance(value, wp.array):
                key = value.ptr or id(value)  # empty arrays have no allocation
                if key not in seen:
                    seen.add(key)
                    arrays.append(value)
            elif dataclasses.is_dataclass(value):
                visit(value)

    visit(data)
    return arrays


def mujoco_warp_data_memory(d) -> dict:
    """MuJoCo Warp's simulation data per world, of a Data `d` from put_data: `data_bytes_per_world`,
    the bytes of all its arrays over its nworld (the contact arrays, naconmax entries, are shared
    by all worlds), and the budgets that size them: `nconmax` contacts per world (naconmax /
    nworld), `naconmax`, and `njmax` constraint rows per world."""
    total = sum(a.capacity for a in warp_arrays(d))
    return {"data_bytes_per_world": total / d.nworld, "nconmax": d.naconmax // d.nworld, "naconmax": d.naconmax,
            "njmax": d.njmax}


def mujoco_warp_memory(mjw, mjm, num_worlds, device="cpu", settle=0.0) -> dict:
    """MuJoCo Warp's data per world (mujoco_warp_data_memory) of `num_worlds` worlds at put_data's
    default budgets, from put_data alone: nothing is compiled or stepped."""
    with wp.ScopedDevice(wp.get_device(device)):
        return mujoco_warp_data_memory(mjw.put_data(mjm, initial_state(mjm, settle), nworld=num_worlds))


def mujoco_warp_runner(mjw, mjm, num_worlds, device, horizon=100, settle=0.0):
    """MuJoCo Warp (module `mjw`) on `device`: all worlds in one batch (nworld), the same
    start states and controls as simrl, the same `horizon` steps from them (in chunks of about
    50 ms, back to the start states after the last). Returns the same pair as simrl_runner;
    raises MujocoWarpFailure naming the stage that failed (with the data per world where
    put_data got that far). `run.memory`: the data per world (mujoco_warp_data_memory)."""
    stage, memory = "device", {}
    try:
        dev = wp.get_device(device)
        with wp.ScopedDevice(dev):
            start = time.perf_counter()
            stage = "put_model"
            m = mjw.put_model(mjm)
            stage = "put_data"
            d = mjw.put_data(mjm, initial_state(mjm, settle), nworld=num_worlds)
            memory = mujoco_warp_data_memory(d)
            arrays = start_arrays(mjm, num_worlds, settle)
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
        raise MujocoWarpFailure(f"{stage}: {type(e).__name__}: {e}", memory) from e
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

    run.memory = memory

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
                "cuda_graph": graph is not None, "version": getattr(mjw, "__version__", "unknown"), **memory,
                **({"cuda_graph_error": graph_error} if graph_error else {}),
                "threads": 1 if dev.is_cpu else None}

    return run, info


def timed(run_chunk, min_seconds: float) -> tuple[int, float]:
    """Call run_chunk() (returns steps done) until min_seconds have passed."""
    steps, start = 0, time.perf_counter()
    while True:
        steps += run_chunk()
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return steps, elapsed


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
