"""The training run of scripts/train.py: a composed and validated `train` configuration (its
keys: tasks.config.TrainCfg) trained into a run directory, on one process or under torchrun.

simrl.rl imports no environments: the caller passes an `EnvFactory` that builds the task's
environment (tasks.config.TaskEnvFactory).
"""

import contextlib
import io
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Protocol

from omegaconf import DictConfig, OmegaConf

from simrl.errors import CheckpointError, ConfigError
from simrl.rl.config import RUN_TASK_FILE, PpoCfg, ShacCfg, resolve_device, sim_options
from simrl.rl.runlog import mean_text, tee_output


class EnvFactory(Protocol):
    """What a run needs from the environments' side."""

    def make(self, num_envs: int, device: str, seed: int, backend: str, njmax: int | None = None,
             strict: bool = False, nconmax: int | None = None):
        """The task's batched environment (envs.base.BatchedEnv's interface); `backend`, `njmax`,
        `nconmax` and `strict` come from the run's `sim` section (sim_options)."""

    def vec_env(self, env, cfg: dict | None = None):
        """`env` as rsl-rl's VecEnv; `cfg`, the run's resolved configuration, is kept on it."""


def plot_curve(curve: list[dict], path: Path, title: str) -> None:
    """learning_curve.png: mean episode return against environment steps and wall-clock seconds."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    steps = [c["env_steps"] for c in curve]
    seconds = [c["seconds"] for c in curve]
    returns = [c["mean_return"] for c in curve]
    axes[0].plot(steps, returns)
    axes[0].set_xlabel("environment steps")
    axes[1].plot(seconds, returns)
    axes[1].set_xlabel("wall-clock seconds")
    for ax in axes:
        ax.set_ylabel("mean episode return")
        ax.grid(alpha=0.3)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def train(cfg: DictConfig, run_dir: Path, env_factory: EnvFactory, runs_root: str | Path = "runs") -> int:
    """Train as configured by `cfg` (the composed `train` config, validated:
    tasks.config.validate) into `run_dir`, the environment built by `env_factory`. Returns the
    exit status: 0 when done, 130 when stopped by Ctrl-C (after saving a checkpoint).
    Unusable checkpoints, devices and environments raise SystemExit with a message naming the
    problem."""
    try:
        return _train(cfg, Path(run_dir), env_factory, runs_root)
    except KeyboardInterrupt:
        print(f"simrl: interrupted; no checkpoint saved for the current iteration (earlier ones, if any, are in "
              f"{run_dir})", file=sys.stderr, flush=True)
        return 130


def _train(cfg: DictConfig, run_dir: Path, env_factory: EnvFactory, runs_root) -> int:
    from simrl.rl import distributed

    sim = sim_options(cfg)
    backend = sim["backend"]
    try:
        dist = distributed.from_environment()
        device = distributed.rank_device(resolve_device(cfg.device, backend), dist)
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
    distributed.init(dist, device, float(cfg.dist_timeout_s))
    # rank 0 keeps what the run prints in its run directory (the other ranks print little)
    logged = tee_output(Path(run_dir) / "train.log") if dist.is_main else contextlib.nullcontext()
    with logged:
        try:
            return _train_rank(cfg, run_dir, env_factory, runs_root, dist, device, sim)
        except MemoryError as e:  # e.g. a differentiable rollout that outgrew the memory (simrl.sim.grad)
            raise SystemExit(f"simrl: {e} (checkpoints saved so far, if any, are in {run_dir})") from None
        except Exception as e:
            if not (dist.enabled and distributed.is_collective_error(e)):
                raise
            first_line = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            print(f"simrl: rank {dist.rank} of {dist.world_size} lost contact with another rank ({first_line}); a "
                  f"rank waits at most dist_timeout_s={cfg.dist_timeout_s} s for the others. torchrun's report names "
                  f"the rank that failed.", file=sys.stderr, flush=True)
            return 1
        finally:
            distributed.shutdown()


def _training_view(cfg: DictConfig, env, runner):
    """train.py viewer=web: the first viewer_worlds worlds shown in the browser while training
    runs (simrl.viewer.live.TrainingView); its cost ends each progress line."""
    from simrl.viewer import ViewerError
    from simrl.viewer.live import TrainingView, print_address, reward_terms, shown_worlds, side_by_side, viewer_address

    worlds = shown_worlds(env.num_envs, int(cfg.get("viewer_worlds", 4)))
    host, port = viewer_address(cfg)
    try:
        view = TrainingView(env, worlds, {"host": host, "port": port, "title": f"simrl train: {cfg.task.name}",
                                          "side_by_side": side_by_side(env), "reward_terms": reward_terms(env)},
                            seconds=cfg.get("viewer_seconds"))
    except ViewerError as e:
        raise SystemExit(f"simrl: {e}") from None
    print_address(host, port)
    env.step_observers.append(view)
    runner.progress_notes.append(view.progress_note)
    return view


def _train_rank(cfg: DictConfig, run_dir: Path, env_factory: EnvFactory, runs_root, dist, device: str,
                sim: dict) -> int:
    import torch

    from simrl.rl import distributed
    from simrl.rl.checkpoint import resolve_resume
    from simrl.rl.ppo import Runner, rsl_rl_config

    main_rank = dist.is_main
    run_dir = Path(distributed.broadcast_object(str(run_dir)))  # rank 0's directory: the one that is written
    seed = int(cfg.seed) + dist.rank
    task = cfg.task
    algo = str(cfg.algo)
    # SHAC's section may set its own world count and iteration budget (it needs far fewer worlds)
    defaults = task.shac if algo == "shac" else task
    num_envs_cpu = defaults.get("num_envs") or task.num_envs
    num_envs_gpu = defaults.get("num_envs_gpu") or task.num_envs_gpu
    num_envs = int(cfg.num_envs if cfg.num_envs is not None else (
        num_envs_gpu if device.startswith("cuda") else num_envs_cpu))
    iterations = int(cfg.max_iterations if cfg.max_iterations is not None else (
        defaults.get("max_iterations") or task.max_iterations))
    if cfg.resume and cfg.get("init_policy"):
        raise SystemExit("simrl: resume= continues a run and init_policy= starts a new one from another run's "
                         "policy: give one of them")
    if cfg.get("init_policy") and algo != "ppo":
        raise SystemExit(f"simrl: init_policy= starts a PPO run from a PPO checkpoint; algo={algo} has its own "
                         f"policy format")
    resume, init_policy, problem = None, None, None
    if main_rank:  # rank 0 resolves them (e.g. `latest`); every rank loads that file
        try:
            if cfg.resume:
                resume = resolve_resume(str(cfg.resume), task.name, runs_root)
            if cfg.get("init_policy") == "latest":
                problem = ("init_policy=latest would pick this task's own newest run; give the checkpoint or run "
                           "directory of the run whose policy starts this one")
            elif cfg.get("init_policy"):
                init_policy = resolve_resume(str(cfg.init_policy), task.name, runs_root, key="init_policy")
        except CheckpointError as e:
            problem = str(e)
    resume, init_policy, problem = distributed.broadcast_object((resume, init_policy, problem))
    if problem:
        raise SystemExit(f"simrl: {problem}")
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.update({"num_envs": num_envs, "device": device, "max_iterations": iterations,
                     "resume": str(resume) if resume else None,
                     "init_policy": str(init_policy) if init_policy else None, "world_size": dist.world_size})
    if main_rank:
        run_dir.mkdir(parents=True, exist_ok=True)
        (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))
        # the task as run, a task file of its own: resume= and play.py's checkpoint= read it
        (run_dir / RUN_TASK_FILE).write_text(OmegaConf.to_yaml(OmegaConf.create(resolved["task"])))
        ranks = f" per rank x {dist.world_size} ranks" if dist.enabled else ""
        print(f"simrl: task {task.name}, {algo}, {num_envs} envs on {device}{ranks}, {iterations} iterations, "
              f"run dir {run_dir}", flush=True)
    if dist.enabled:
        print(f"simrl: rank {dist.rank} of {dist.world_size} (local rank {dist.local_rank}), pid {os.getpid()}, "
              f"device {device}, seed {seed}", flush=True)
    try:
        env = env_factory.make(num_envs=num_envs, device=device, seed=seed, **sim)
    except ValueError as e:  # MJCFError, UnsupportedFeatureError, bad reward terms, ...
        raise SystemExit(f"simrl: task {task.name}: {type(e).__name__}: {e}") from None
    except MemoryError as e:  # simrl.sim.data.check_memory: the worlds would not fit
        raise SystemExit(f"simrl: task {task.name}: {e}; run fewer with num_envs=") from None
    torch.manual_seed(seed)
    key_terms = [f"Episode_Reward/{k}" for k in env.reward_weights]
    if algo == "shac":
        from simrl.rl.shac import ShacRunner

        try:
            runner = ShacRunner(env, ShacCfg.from_dict(OmegaConf.to_container(task.shac, resolve=True)),
                                log_dir=str(run_dir) if main_rank else None, device=device, key_terms=key_terms,
                                task=task.name, max_iterations=iterations)
        except ValueError as e:
            raise SystemExit(f"simrl: {e}") from None
    else:
        ppo = PpoCfg.from_dict(OmegaConf.to_container(task.ppo, resolve=True))
        sync_free = ppo.sync_free
        if sync_free == "auto":
            sync_free = str(device).startswith("cuda")
        if sync_free:  # the rollout without host synchronisation (envs/base.py, docs/GUIDE.md)
            try:
                env.set_sync_free()
            except ValueError as e:
                raise SystemExit(f"simrl: task.ppo.sync_free: {e}") from None
        train_cfg = rsl_rl_config(ppo)
        train_cfg["seed"] = seed
        quiet = contextlib.nullcontext() if main_rank else contextlib.redirect_stdout(io.StringIO())
        with quiet:  # rsl-rl prints the networks: once is enough
            runner = Runner(env_factory.vec_env(env, cfg=resolved), train_cfg,
                            log_dir=str(run_dir) if main_rank else None, device=device, key_terms=key_terms,
                            task=task.name)
        cuda_graph = ppo.cuda_graph
        if cuda_graph == "auto":
            cuda_graph = str(device).startswith("cuda") and env.sync_free
        if cuda_graph:  # each environment step one CUDA graph (envs/rsl_rl.py CapturedStep)
            try:
                runner.env.capture_steps()
            except ValueError as e:
                raise SystemExit(f"simrl: task.ppo.cuda_graph: {e}") from None
    if resume:
        # every rank loads the policy and optimizer; rank 0 also its environments and random
        # generators (the checkpoint holds rank 0's); the other ranks' worlds start afresh
        try:
            runner.load(str(resume), map_location=device, restore_training_state=main_rank)
        except CheckpointError as e:
            raise SystemExit(f"simrl: {e}") from None
        if main_rank:
            print(f"simrl: resumed from {resume} at iteration {runner.current_learning_iteration}")
            for note in runner.resume_notes:
                print(f"simrl: note: {note}")

    if init_policy:
        try:
            source = runner.load_policy(str(init_policy), map_location=device)
        except CheckpointError as e:
            raise SystemExit(f"simrl: {e}") from None
        if main_rank:
            done = source.get("completed_iterations")
            print(f"simrl: policy initialised from {init_policy} (task {source.get('task', '?')}"
                  f"{f', {done} iterations' if done is not None else ''}); the critic and optimizer start afresh",
                  flush=True)

    def on_sigint(signum, frame):
        if runner.stop_requested:  # a second Ctrl-C: quit now
            raise KeyboardInterrupt
        runner.request_stop()
        # printed from another thread: the handler can interrupt the main thread inside a write to
        # the same stream, and a write from the handler itself would then fail as reentrant
        # ("RuntimeError: reentrant call inside <_io.BufferedWriter>"); the thread waits for it
        message = ("\nsimrl: Ctrl-C: saving a checkpoint at the end of this iteration "
                   "(Ctrl-C again to quit without saving)")
        threading.Thread(target=print, args=(message,), kwargs={"flush": True}, daemon=True).start()

    in_main_thread = threading.current_thread() is threading.main_thread()
    view = _training_view(cfg, env, runner) if main_rank and cfg.get("viewer") == "web" else None
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main_thread else None
    start, completed_before = time.time(), runner.completed_iterations
    try:
        runner.learn(num_learning_iterations=iterations)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
        if view is not None:
            env.step_observers.remove(view)
            view.close()
    curve = runner.curve
    if not main_rank:
        return 130 if runner.stopped_early else 0
    (run_dir / "learning_curve.json").write_text(json.dumps(curve))
    if curve:
        plot_curve(curve, run_dir / "learning_curve.png", f"{task.name}: {algo.upper()}, {num_envs} envs on {device}")
    if runner.stopped_early:
        remaining = iterations - (runner.completed_iterations - completed_before)
        print(f"simrl: interrupted after iteration {runner.completed_iterations}; checkpoint saved to "
              f"{runner.last_checkpoint}\nsimrl: continue with: python scripts/train.py task={task.name} "
              f"resume={runner.last_checkpoint} max_iterations={remaining}", flush=True)
        return 130
    if curve:
        last = curve[-1]
        print(f"simrl: done in {time.time() - start:.0f} s: mean return {mean_text(last['mean_return'], 0, 2)}, "
              f"mean episode length {mean_text(last['mean_episode_length'], 0, 1)}; results in {run_dir}")
    return 0
