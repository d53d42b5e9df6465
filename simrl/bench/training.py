"""What the benchmark measures of a task rather than of a model: the model a task builds
(`--model task:NAME`) and end-to-end training throughput (`--train N`): environment steps per
second of N PPO iterations (rollout and update, rsl-rl-lib) of the task named by --model, on
this engine and, in the same run, on the same environment stepped by MuJoCo itself
(sim.backend=mujoco).

The one module of simrl.bench that reads the task files and builds environments (envs, tasks):
they measure the code above the engine, which the engine's own benchmarks do not import.
"""

import contextlib
import io
import time

import mujoco
import torch

from simrl.bench.host import machine, thread_cpus
from simrl.bench.records import write_results


def _task(name: str, refusal: str) -> dict:
    """The task file of `name` as a dict; a SystemExit that starts with `refusal` and lists the
    tasks when there is none."""
    from omegaconf import OmegaConf

    import tasks

    if name not in tasks.available():
        raise SystemExit(f"{refusal}: no task {name!r} (tasks: {', '.join(tasks.available())})")
    return OmegaConf.to_container(tasks.load(name), resolve=True)


def task_model(name: str, refusal: str = "task") -> mujoco.MjModel:
    """The MjModel the task `name` builds from its task file (its robot, and its terrain where it
    has one), for one world on the CPU."""
    import envs
    from tasks.config import env_kwargs

    task = _task(name, refusal)
    return envs.make(name, num_envs=1, device="cpu", **env_kwargs(task)).sim.mj_model


def _viewer(env, task_name: str):
    """train.py's viewer=web on `env` (4 worlds shown, on a free port), with a page client that
    receives every update in a process of its own (a browser's network side, without drawing:
    a browser runs on the user's machine)."""
    import socket
    import subprocess
    import sys

    import viser

    from simrl.viewer.live import TrainingView, reward_terms, shown_worlds, side_by_side

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    view = TrainingView(env, shown_worlds(env.num_envs, 4),
                        {"host": "127.0.0.1", "port": port, "title": task_name, "side_by_side": side_by_side(env),
                         "reward_terms": reward_terms(env)})
    client = ("from websockets.sync.client import connect\n"
              f"ws = connect('ws://127.0.0.1:{port}', subprotocols=['viser-v{viser.__version__}'], max_size=None)\n"
              "try:\n    while True:\n        ws.recv()\nexcept Exception:\n    pass\n")
    view.client = subprocess.Popen([sys.executable, "-c", client])
    env.step_observers.append(view)
    return view


def _close_viewer(view, env) -> None:
    env.step_observers.remove(view)
    with contextlib.redirect_stdout(io.StringIO()):
        view.close()
    view.client.wait(timeout=30)


def train_benchmark(task_name: str, worlds: list[int], args) -> list[dict]:
    """End-to-end training throughput: environment steps per second of `--train N` PPO
    iterations (rollout plus update, after one warm-up iteration that compiles), for the task's
    environment on this engine ("simrl") and, in the same run, on MuJoCo itself ("mujoco":
    sim.backend=mujoco, one MjData per world stepped by mj_step; CPU only) with the same PPO.
    `args`: the parsed command line of scripts/benchmark.py."""
    import tasks

    if task_name not in tasks.available():
        raise SystemExit(f"--train needs a task name for --model ({', '.join(tasks.available())}), "
                         f"got {task_name!r}")
    import envs
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.ppo import Runner, rsl_rl_config
    from tasks.config import env_kwargs

    task = _task(task_name, "--train")
    backends = [("simrl", "warp")] if "simrl" in args.engines.split(",") else []
    if "mujoco" in args.engines.split(",") and args.device == "cpu":
        backends.append(("mujoco", "mujoco"))
    if getattr(args, "viewer", False) and backends and backends[0][0] == "simrl":
        # train.py viewer=web beside the plain run: the same PPO, alternating, so that a busy
        # machine slows both alike
        backends = [backends[0], ("simrl+viewer", "warp"), *backends[1:]]
    print(f"task {task_name}: PPO, {args.train} timed iterations after one warm-up\nmachine: {machine()}")
    records = []
    for w in worlds:
        for engine, backend in backends:
            torch.manual_seed(0)
            env = envs.make(task_name, num_envs=w, device=args.device, seed=0, backend=backend, **env_kwargs(task))
            view = _viewer(env, task_name) if engine == "simrl+viewer" else None
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
            if view is not None:
                view_cost = view.cost()
                frames = view.frames
                _close_viewer(view, env)
            steps = args.train * cfg["num_steps_per_env"] * w
            collect = sum(t[0] for t in times)
            rec = {"engine": engine, "model": task_name, "num_worlds": w, "mode": "train", "device": args.device,
                   "dtype": "float32" if backend == "warp" else "float64", "steps_per_second": steps / seconds,
                   "iterations": args.train, "env_steps": steps, "seconds": seconds,
                   "collect_fraction": collect / max(seconds, 1e-9), "decimation": env.decimation,
                   "torch_threads": torch.get_num_threads(), "threads": getattr(env.sim, "cpu_threads", 1),
                   "cpus": thread_cpus()}
            if view is not None:
                rec.update({"viewer_copy_fraction": view_cost[0], "viewer_draw_core_fraction": view_cost[1],
                            "viewer_frames": frames})
            records.append(rec)
            print(f"  {engine:8s} worlds={w:6d} physics threads={rec['threads']}  "
                  f"{rec['steps_per_second']:10,.0f} env steps/s  "
                  f"(rollout {100 * rec['collect_fraction']:.0f}% of the time)")
    for r in records:
        if r["engine"] == "simrl+viewer":
            plain = next(p for p in records if p["engine"] == "simrl" and p["num_worlds"] == r["num_worlds"])
            print(f"  viewer at {r['num_worlds']} worlds: {r['steps_per_second'] / plain['steps_per_second']:.3f}x the "
                  f"plain run's env steps/s; copy {100 * r['viewer_copy_fraction']:.1f}% of the wall-clock time, "
                  f"drawing {100 * r['viewer_draw_core_fraction']:.0f}% of a core, {r['viewer_frames']} frames")
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
