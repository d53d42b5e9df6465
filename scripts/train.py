#!/usr/bin/env python
"""Train a policy: `python scripts/train.py task=NAME [key=value ...]` (Hydra).

    python scripts/train.py                      # the default task: quadruped
    python scripts/train.py task=cartpole
    python scripts/train.py task=cartpole num_envs=512 seed=1 max_iterations=200
    python scripts/train.py task=cartpole task.env.episode_length_s=8 hydra.run.dir=runs/mine
    python scripts/train.py task=cartpole resume=runs/cartpole/<date>/model_99.pt
    python scripts/train.py task=cartpole resume=latest
    python scripts/train.py task=humanoid_rough init_policy=runs/humanoid/<date>/model_2499.pt

Top-level keys: task, num_envs (null: the task's default for the device), device (auto: cuda
if present, else cpu), seed, max_iterations (null: the task's), algo (ppo, or shac for the tasks
with a differentiable step and a `shac` section: cartpole_swingup, ant), resume (a checkpoint
path, a run directory, or `latest`: the most recently written model_<it>.pt under runs/<task>/
relative to the current directory), init_policy (a checkpoint or run directory of another
run whose policy starts this one: fine-tuning), sim.backend (warp: this engine; mujoco: MuJoCo itself, CPU
only and much slower), dist_timeout_s. Any task field is `task.<field>`. A misspelt top-level key
is named with the closest one (tasks.config.check_overrides), and the configuration is
checked before anything is built (tasks.config.validate): unknown keys, wrong types and
out-of-range values are errors that name the key. Each run writes to its directory
(hydra.run.dir): the resolved config.yaml, train.log (everything the run printed), TensorBoard
logs, checkpoints (model_<iteration>.pt, written atomically), learning_curve.json and
learning_curve.png (README, "Train" lists every file).

A resumed run restores the policy, optimizer, observation normalizers, iteration counter,
random generators and environment state, then trains max_iterations more iterations; on the
CPU it continues exactly as the uninterrupted run would have. Ctrl-C (SIGINT) finishes the
current iteration, saves a checkpoint, says where, and exits with status 130; a second Ctrl-C
quits at once without saving.

init_policy= starts a new run from another run's policy (fine-tuning: humanoid_rough from a
flat humanoid, whose policy observes the same terms): the actor's weights, observation
normalizer and action noise are loaded, the critic, optimizer and iteration count start afresh.

Several processes (torchrun; simrl.rl.distributed): the same command under
`torchrun --nproc_per_node=N scripts/train.py ...` trains with N ranks, each simulating its
own num_envs worlds on cuda:LOCAL_RANK (or the CPU) with seed + RANK; gradients are averaged
over the ranks every update, and only rank 0 writes the run directory. dist_timeout_s bounds
how long a rank waits for the others in a collective before the run fails.
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

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import hydra  # noqa: E402
except ModuleNotFoundError as e:  # a Python without the project's packages, e.g. the system's
    raise SystemExit(f"simrl: {e} in {sys.executable}. Use the project's environment: `make train` creates "
                     f".venv; then run .venv/bin/python scripts/train.py ... (or `source .venv/bin/activate` "
                     f"first)") from None
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simrl.errors import CheckpointError, ConfigError  # noqa: E402
from simrl.rl.config import resolve_device  # noqa: E402
from simrl.rl.runlog import mean_text, tee_output  # noqa: E402
from tasks.config import check_overrides, env_kwargs, register, validate  # noqa: E402

register("train")


def plot_curve(curve: list[dict], path: Path, title: str) -> None:
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


@hydra.main(version_base=None, config_name="train")
def main(cfg: DictConfig) -> None:
    status = train(cfg, Path(HydraConfig.get().runtime.output_dir))
    if status:
        sys.exit(status)


def train(cfg: DictConfig, run_dir: Path, runs_root: str | Path = "runs") -> int:
    """Train as configured by `cfg` (the composed `train` config) into `run_dir`. Returns the
    exit status: 0 when done, 130 when stopped by Ctrl-C (after saving a checkpoint). Bad
    configurations and unusable checkpoints raise SystemExit with a message naming the problem."""
    try:
        validate(cfg, "train")
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
    try:
        return _train(cfg, Path(run_dir), runs_root)
    except KeyboardInterrupt:
        print(f"simrl: interrupted; no checkpoint saved for the current iteration (earlier ones, if any, are in "
              f"{run_dir})", file=sys.stderr, flush=True)
        return 130


def _train(cfg: DictConfig, run_dir: Path, runs_root) -> int:
    from simrl.rl import distributed

    backend = str(OmegaConf.select(cfg, "sim.backend", default="warp"))
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
            return _train_rank(cfg, run_dir, runs_root, dist, device, backend)
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


def _train_rank(cfg: DictConfig, run_dir: Path, runs_root, dist, device: str, backend: str) -> int:
    import torch

    import envs
    from envs.rsl_rl import RslRlVecEnv
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
        ranks = f" per rank x {dist.world_size} ranks" if dist.enabled else ""
        print(f"simrl: task {task.name}, {algo}, {num_envs} envs on {device}{ranks}, {iterations} iterations, "
              f"run dir {run_dir}", flush=True)
    if dist.enabled:
        print(f"simrl: rank {dist.rank} of {dist.world_size} (local rank {dist.local_rank}), pid {os.getpid()}, "
              f"device {device}, seed {seed}", flush=True)
    try:
        env = envs.make(task.name, num_envs=num_envs, device=device, seed=seed, backend=backend,
                        **env_kwargs(task))
    except ValueError as e:  # MJCFError, UnsupportedFeatureError, bad reward terms, ...
        raise SystemExit(f"simrl: task {task.name}: {type(e).__name__}: {e}") from None
    except MemoryError as e:  # simrl.sim.data.check_memory: the worlds would not fit
        raise SystemExit(f"simrl: task {task.name}: {e}; run fewer with num_envs=") from None
    torch.manual_seed(seed)
    key_terms = [f"Episode_Reward/{k}" for k in env.reward_weights]
    if algo == "shac":
        from simrl.rl.shac import ShacRunner

        shac_cfg = {k: v for k, v in OmegaConf.to_container(task.shac, resolve=True).items()
                    if k not in ("num_envs", "num_envs_gpu", "max_iterations")}
        try:
            runner = ShacRunner(env, shac_cfg, log_dir=str(run_dir) if main_rank else None, device=device,
                                key_terms=key_terms, task=task.name, max_iterations=iterations)
        except ValueError as e:
            raise SystemExit(f"simrl: {e}") from None
    else:
        ppo_section = OmegaConf.to_container(task.ppo, resolve=True)
        sync_free = ppo_section.get("sync_free", False)
        if sync_free == "auto":
            sync_free = str(device).startswith("cuda")
        if sync_free:  # the rollout without host synchronisation (envs/base.py, docs/GUIDE.md)
            try:
                env.set_sync_free()
            except ValueError as e:
                raise SystemExit(f"simrl: task.ppo.sync_free: {e}") from None
        train_cfg = rsl_rl_config(ppo_section)
        train_cfg["seed"] = seed
        quiet = contextlib.nullcontext() if main_rank else contextlib.redirect_stdout(io.StringIO())
        with quiet:  # rsl-rl prints the networks: once is enough
            runner = Runner(RslRlVecEnv(env, cfg=resolved), train_cfg, log_dir=str(run_dir) if main_rank else None,
                            device=device, key_terms=key_terms, task=task.name)
        cuda_graph = ppo_section.get("cuda_graph", False)
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
    previous = signal.signal(signal.SIGINT, on_sigint) if in_main_thread else None
    start, completed_before = time.time(), runner.completed_iterations
    try:
        runner.learn(num_learning_iterations=iterations)
    finally:
        if in_main_thread:
            signal.signal(signal.SIGINT, previous)
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


def _hydra_args_for_rank(argv: list[str]) -> list[str]:
    """Under torchrun, every rank runs Hydra, and each would make its own time-stamped run
    directory. Ranks other than 0 get a throw-away one instead (removed at exit); they use
    rank 0's, which only rank 0 writes."""
    if int(os.environ.get("RANK", "0") or 0) == 0:
        return argv
    import atexit
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix=f"simrl_rank{os.environ['RANK']}_")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    keep = [a for a in argv[1:] if not a.lstrip("+").startswith(("hydra.run.dir=", "hydra.output_subdir="))]
    return [argv[0], *keep, f"hydra.run.dir={scratch}", "hydra.output_subdir=null"]


if __name__ == "__main__":
    try:
        check_overrides("train", sys.argv[1:])  # "did you mean num_envs", before Hydra's "use +num_env"
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
    sys.argv = _hydra_args_for_rank(sys.argv)
    main()
