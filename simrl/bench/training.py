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
