#!/usr/bin/env python
"""Headless speed benchmark: simrl against MuJoCo on the same model, in the same run.

    python scripts/benchmark.py --model quadruped --worlds 1,64,1024
    python scripts/benchmark.py --model path/to/robot.xml --out bench.json --markdown docs/BENCHMARKS.md

Physics steps per second = worlds x steps / seconds, compile time excluded and reported on
its own. Engines measured:
  simrl           this engine, all worlds in one batch (Warp; --schedule fused or wide; on CUDA
                  Sim.step captures a chunk of steps once as a CUDA graph and replays it, the
                  capture time reported as capture_seconds)
  mujoco          mj_step in a C loop on one core (mujoco.rollout, one thread), one world: a
                  core steps worlds one after another, so its rate does not depend on the world
                  count; it is measured again beside every world count, in the same rounds as
                  the others, and the "vs mujoco" ratio divides by that figure
  mujoco_rollout  mujoco.rollout over all worlds with one thread per core
  mujoco_warp     MuJoCo Warp (pip install mujoco-warp, the 'bench' extra), all worlds in one
                  batch (nworld) on the same --device as simrl (on the CPU Warp runs each kernel
                  on one thread; on CUDA one step is captured as a CUDA graph, as mujoco-warp's
                  own benchmark does). Skipped, with a message, when it is not installed; when it
                  fails on the device, the reason is recorded (table and JSON) instead of a rate
Every engine runs the same compiled model: same timestep, integrator, solver iterations and
tolerance. `--smooth` disables contacts and constraints in all of them.

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
import os
import platform
import sys
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
    """A path to an MJCF file, a robot shipped in envs/assets ('quadruped'), or the name of a
    model shipped with gymnasium (e.g. 'ant')."""
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


def initial_state(mjm: mujoco.MjModel) -> mujoco.MjData:
    """Every engine starts from the model's 'home' keyframe when it has one, else from qpos0."""
    mjd = mujoco.MjData(mjm)
    if mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0:
        mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)
    return mjd


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


def simrl_runner(mjm, num_worlds, device, dtype, schedule="auto"):
    """Build the Sim; return a callable that steps it, and a callable that summarizes it."""
    start = time.perf_counter()
    rss_before = resident_mib()
    free_before = wp.get_device(device).free_memory if str(device).startswith("cuda") else None
    sim = Sim.from_model(mjm, num_worlds=num_worlds, device=device, dtype=dtype, schedule=schedule)
    setup = time.perf_counter() - start
    memory = {"state_bytes_per_world": state_bytes(sim) / num_worlds}
    if free_before is not None:  # what the device lost to the Sim (its arrays and Warp's pools)
        memory["device_bytes_per_world"] = (free_before - sim.device.free_memory) / num_worlds
    else:  # what the process grew by building it (the arrays, first-touched)
        memory["resident_mib_growth"] = resident_mib() - rss_before
    start_state = initial_state(mjm)
    sim.qpos = torch.as_tensor(np.tile(start_state.qpos, (num_worlds, 1)), dtype=sim.torch_dtype,
                               device=sim.qpos.device)
    sim.ctrl = torch.as_tensor(random_controls(mjm, num_worlds), dtype=sim.torch_dtype, device=sim.qpos.device)
    sim.step(1)  # warm-up
    chunk = max(1, 4096 // num_worlds)
    capture_seconds = None
    if sim.use_graphs:
        # Sim.step(chunk) records the chunk's launches as a graph at its first call and replays
        # it from then on (a CUDA graph on CUDA)
        start = time.perf_counter()
        sim.step(chunk)
        wp.synchronize_device(sim.device)
        capture_seconds = time.perf_counter() - start

    def run():
        sim.step(chunk)
        wp.synchronize_device(sim.device)
        return chunk

    run.sim = sim

    def info():
        finite = torch.isfinite(sim.qpos).all(dim=1) & torch.isfinite(sim.qvel).all(dim=1)
        # solver iterations and contacts over a few more steps (not timed)
        niter, ncon = [], []
        for _ in range(20):
            sim.step(1)
            niter.append(sim.solver_niter.clone())
            ncon.append(sim.contact.active.sum(dim=1))
        niter, ncon = torch.stack(niter).double(), torch.stack(ncon).double()
        return {"compile_seconds": sim.compile_time, "setup_seconds": setup, "cuda_graph": sim.use_graphs,
                "schedule": sim.schedule, "threads": sim.cpu_threads if sim.device.is_cpu else None,
                **memory, "resident_mib": resident_mib(),
                **({"capture_seconds": capture_seconds} if capture_seconds is not None else {}),
                "nan_free_worlds": int(finite.sum()), "dtype": dtype, "device": sim.device.alias,
                "solver_niter_mean": float(niter.mean()), "solver_niter_max": int(niter.max()),
                "contacts_per_world": float(ncon.mean())}

    return run, info


def _rollout_runner(mjm, num_worlds, nthread):
    """A callable that steps num_worlds copies of mjm with mujoco.rollout (a C loop over
    mj_step, nthread threads), and the final state of the last call."""
    from mujoco import rollout

    datas = [mujoco.MjData(mjm) for _ in range(nthread)]
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    state0 = np.zeros(mujoco.mj_stateSize(mjm, spec))
    mujoco.mj_getState(mjm, initial_state(mjm), state0, spec)
    initial = np.tile(state0, (num_worlds, 1))
    nstep = max(10, 2048 // num_worlds)
    control = np.repeat(random_controls(mjm, num_worlds)[:, None, :], nstep, axis=1)
    out = {}

    def run():
        state, _ = rollout.rollout(mjm, datas if nthread > 1 else datas[0], initial, control,
                                   persistent_pool=nthread > 1)
        out["state"] = state[:, -1]
        return nstep

    run()  # warm-up
    return run, out


def mujoco_runner(mjm, num_worlds, nthread):
    run, out = _rollout_runner(mjm, num_worlds, nthread)

    # solver iterations and contacts of mj_step under the same controls (not timed)
    mjd = initial_state(mjm)
    mjd.ctrl[:] = random_controls(mjm, 1)[0]
    niter, ncon = [], []
    for _ in range(200):
        mujoco.mj_step(mjm, mjd)
        niter.append(int(mjd.solver_niter[0]))
        ncon.append(mjd.ncon)

    def info():
        return {"nan_free_worlds": int(np.all(np.isfinite(out["state"]), axis=1).sum()),
                "dtype": "float64", "device": "cpu", "threads": nthread,
                "solver_niter_mean": float(np.mean(niter[-20:])), "solver_niter_max": int(np.max(niter[-20:])),
                "contacts_per_world": float(np.mean(ncon[-20:]))}

    return run, info


def mujoco_warp_runner(mjw, mjm, num_worlds, device):
    """MuJoCo Warp (module `mjw`) on `device`: all worlds in one batch (nworld), the same
    start state and controls as simrl. Returns the same pair as simrl_runner; raises
    MujocoWarpFailure naming the stage that failed."""
    stage = "device"
    try:
        dev = wp.get_device(device)
        with wp.ScopedDevice(dev):
            start = time.perf_counter()
            stage = "put_model"
            m = mjw.put_model(mjm)
            stage = "put_data"
            d = mjw.put_data(mjm, initial_state(mjm), nworld=num_worlds)
            d.ctrl.assign(random_controls(mjm, num_worlds).astype(np.float32))
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
    # a chunk of about 50 ms (at most 4096 world-steps, like simrl's), at least one step
    chunk = max(1, min(4096 // num_worlds, int(0.05 / max(step_seconds, 1e-6))))

    def run():
        with wp.ScopedDevice(dev):
            for _ in range(chunk):
                step()
            wp.synchronize_device(dev)
        return chunk

    def info():
        qpos, qvel = d.qpos.numpy(), d.qvel.numpy()
        finite = np.isfinite(qpos).all(axis=1) & np.isfinite(qvel).all(axis=1)
        # solver iterations and contacts over a few more steps (not timed)
        niter, ncon = [], []
        with wp.ScopedDevice(dev):
            for _ in range(max(1, min(20, int(1.0 / max(step_seconds, 1e-6))))):
                step()
                niter.append(d.solver_niter.numpy().copy())
                ncon.append(int(d.nacon.numpy()[0]) / num_worlds)
        niter = np.stack(niter)
        return {"compile_seconds": compile_seconds, "setup_seconds": setup,
                "nan_free_worlds": int(finite.sum()), "dtype": "float32", "device": dev.alias,
                "cuda_graph": graph is not None, "version": getattr(mjw, "__version__", "unknown"),
                **({"cuda_graph_error": graph_error} if graph_error else {}),
                **({"threads": 1} if dev.is_cpu else {}),
                "solver_niter_mean": float(niter.mean()), "solver_niter_max": int(niter.max()),
                "contacts_per_world": float(np.mean(ncon))}

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
    return f"{cpu}, {os.cpu_count()} cores{gpu}; Python {platform.python_version()}, " \
           f"warp {wp.__version__}, mujoco {mujoco.__version__}, torch {torch.__version__}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default="ant", help="MJCF path or gymnasium asset name (default: ant)")
    parser.add_argument("--worlds", default="1,64,1024", help="comma-separated world counts")
    parser.add_argument("--engines", default="simrl,mujoco,mujoco_rollout,mujoco_warp",
                        help="comma-separated, from simrl, mujoco, mujoco_rollout, mujoco_warp (default: all)")
    parser.add_argument("--device", default="cpu", help="device of the simrl engine: cpu, cuda, cuda:N")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--schedule", default="auto",
                        help="simrl's schedule(s), comma-separated: auto (fused on the CPU, wide on CUDA), fused, "
                             "wide; with several, each is measured as its own engine (simrl-fused, simrl-wide)")
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
    parser.add_argument("--train", type=int, metavar="N",
                        help="end-to-end training throughput: N PPO iterations of the task named by --model, "
                             "on this engine and on MuJoCo (sim.backend=mujoco, CPU) in the same run")
    parser.add_argument("--grad", type=int, metavar="H",
                        help="benchmark gradients: an H-step differentiable rollout and its backward")
    args = parser.parse_args(argv)

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
    unknown = set(engines) - {"simrl", "mujoco", "mujoco_rollout", "mujoco_warp"}
    if unknown:
        raise SystemExit(f"unknown engine(s) {sorted(unknown)}; choose from simrl, mujoco, mujoco_rollout, "
                         "mujoco_warp")
    mjw, mjw_import_error = None, None
    if "mujoco_warp" in engines:
        mjw, mjw_import_error = import_mujoco_warp()
        if mjw is None and mjw_import_error is None:
            print("mujoco_warp is not installed (pip install mujoco-warp, or the project's 'bench' extra): "
                  "skipping it")
            engines.remove("mujoco_warp")

    integrator = mujoco.mjtIntegrator(mjm.opt.integrator).name.removeprefix("mjINT_")
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu} timestep={mjm.opt.timestep} "
          f"integrator={integrator}{' (contacts and constraints disabled)' if args.smooth else ''}")
    print(f"machine: {machine()}")
    records = []
    profiles = []

    def record(engine, num_worlds, batch, rate, info):
        rec = {"engine": engine, "model": name, "num_worlds": num_worlds, "mode": "forward",
               "steps_per_second": rate, "timestep": mjm.opt.timestep, "integrator": integrator,
               "measured_with_batch": batch, "repeats": args.repeats, **info}
        records.append(rec)
        if rate is None:
            print(f"  {engine:15s} worlds={num_worlds:6d}  failed: {rec['error']}")
            return
        extra = f"  compile {rec['compile_seconds']:.1f} s" if "compile_seconds" in rec else ""
        print(f"  {engine:15s} worlds={num_worlds:6d}  {rate:12,.0f} steps/s{extra}")

    # one core processes worlds one after another, so its rate does not depend on their number:
    # mj_step on one core runs one world, again in every round, as the common reference
    reference = mujoco_runner(mjm, 1, nthread=1) if "mujoco" in engines else None
    for w in worlds:
        runners, counts = {}, {}
        if reference:
            runners["mujoco"], counts["mujoco"] = reference, 1
        if "simrl" in engines:
            for schedule in schedules:
                key = "simrl" if len(schedules) == 1 else f"simrl-{schedule}"
                try:
                    runners[key] = simrl_runner(mjm, w, args.device, args.dtype, schedule)
                except UnsupportedFeatureError as e:
                    raise SystemExit(f"simrl cannot simulate this model: {e}\n(--smooth disables contacts and "
                                     "constraints in every engine)") from e
                counts[key] = w
        if "mujoco_rollout" in engines:
            runners["mujoco_rollout"] = mujoco_runner(mjm, w, nthread=os.cpu_count() or 1)
            counts["mujoco_rollout"] = w
        failures = {}
        if "mujoco_warp" in engines:
            failures["mujoco_warp"] = mjw_import_error
            if mjw is not None:
                try:
                    runners["mujoco_warp"] = mujoco_warp_runner(mjw, mjm, w, args.device)
                    counts["mujoco_warp"] = w
                except MujocoWarpFailure as e:
                    failures["mujoco_warp"] = str(e)
        rates = measure(runners, counts, args.seconds / args.repeats, args.repeats, failures)
        for engine, rate in rates.items():
            record(engine, counts[engine], w, rate, runners[engine][1]())
        simrl_key = next((k for k in runners if k.startswith("simrl")), None)
        if args.profile and simrl_key:
            per_world = profile_stages(runners[simrl_key][0].sim, args.repeats)
            records[-len(rates) + list(rates).index(simrl_key)]["profile_us_per_world"] = per_world
            profiles.append((w, per_world))
        for engine, error in failures.items():
            if error is not None:
                record(engine, w, w, None, {"error": error, "device": args.device, "dtype": "float32"})

    table = summary_table(records)
    print()
    print(table)
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
        command = "python scripts/benchmark.py " + " ".join(sys.argv[1:] if argv is None else argv)
        with open(args.markdown, "a") as f:
            f.write(f"\n### {name}, {datetime.date.today().isoformat()}\n\n"
                    f"- machine: {machine()}\n- command: `{command}`\n"
                    f"- model: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, timestep {mjm.opt.timestep}, "
                    f"{integrator}{', contacts and constraints disabled' if args.smooth else ''}\n\n{table}\n"
                    f"{profile_text}")
        print(f"appended the table to {args.markdown}")
    return records


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
            env = envs.make(task_name, num_envs=w, device=args.device, seed=0, backend=backend, **task["env"])
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
                   "torch_threads": torch.get_num_threads()}
            records.append(rec)
            print(f"  {engine:8s} worlds={w:6d}  {rec['steps_per_second']:10,.0f} env steps/s  "
                  f"(rollout {100 * rec['collect_fraction']:.0f}% of the time)")
    base = {r["num_worlds"]: r["steps_per_second"] for r in records if r["engine"] == "mujoco"}
    lines = ["| engine | device | worlds | env steps/s (PPO, rollout + update) | vs mujoco backend | rollout share |",
             "|---|---|---:|---:|---:|---:|"]
    for r in records:
        ratio = f"{r['steps_per_second'] / base[r['num_worlds']]:.2f}x" if r["num_worlds"] in base else "-"
        lines.append(f"| {r['engine']} | {r['device']} | {r['num_worlds']} | {r['steps_per_second']:,.0f} | {ratio} "
                     f"| {100 * r['collect_fraction']:.0f}% |")
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
    """Steps/s against the world count, one line per engine (and device, dtype), log-log.
    `mujoco` (one world on one core) is drawn at the world count it was measured next to."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = {}
    for r in records:
        if r["steps_per_second"] is None:
            continue
        if r["engine"] == "mujoco":
            label = "mujoco (mj_step, 1 core)"
        elif r["engine"] == "mujoco_rollout":
            label = f"mujoco_rollout ({r.get('threads', '?')} threads)"
        else:
            label = f"{r['engine']} ({r['device']}, {r['dtype']})"
        lines.setdefault(label, []).append((r["measured_with_batch"], r["steps_per_second"]))
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
    """Markdown table: steps/s per engine and world count, with the ratio to mj_step on one core
    measured in the same rounds."""
    bases = {r["measured_with_batch"]: r["steps_per_second"] for r in records if r["engine"] == "mujoco"}
    lines = ["| engine | device | dtype | worlds | steps/s | vs mujoco (1 core) | compile s | NaN-free worlds "
             "| contacts/world | solver iters mean/max | KiB/world |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in records:
        if r["steps_per_second"] is None:
            lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {r['num_worlds']} | "
                         f"failed: {r['error'].replace('|', '/')} | - | - | - | - | - | - |")
            continue
        base = bases.get(r["measured_with_batch"])
        ratio = f"{r['steps_per_second'] / base:.2f}x" if base else "-"
        compile_s = f"{r['compile_seconds']:.1f}" if "compile_seconds" in r else "-"
        nan_free = f"{r['nan_free_worlds']}/{r['num_worlds']}" if "nan_free_worlds" in r else "-"
        contacts = f"{r['contacts_per_world']:.1f}" if "contacts_per_world" in r else "-"
        iters = f"{r['solver_niter_mean']:.1f}/{r['solver_niter_max']}" if "solver_niter_mean" in r else "-"
        per_world = r.get("device_bytes_per_world", r.get("state_bytes_per_world"))
        kib = f"{per_world / 1024:.1f}" if per_world is not None else "-"
        lines.append(f"| {r['engine']} | {r['device']} | {r['dtype']} | {r['num_worlds']} | "
                     f"{r['steps_per_second']:,.0f} | {ratio} | {compile_s} | {nan_free} | {contacts} | {iters} "
                     f"| {kib} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
