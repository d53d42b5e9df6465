#!/usr/bin/env python
"""Train a policy: `python scripts/train.py task=NAME [key=value ...]` (Hydra).

    python scripts/train.py                      # the default task: quadruped
    python scripts/train.py task=cartpole
    python scripts/train.py task=cartpole num_envs=512 seed=1 max_iterations=200
    python scripts/train.py task=cartpole task.env.episode_length_s=8 hydra.run.dir=runs/mine
    python scripts/train.py task=cartpole resume=runs/cartpole/<date>/model_99.pt

Top-level keys: task, num_envs (null: the task's default for the device), device (auto: cuda
if present, else cpu), seed, max_iterations (null: the task's), algo (ppo), resume (a
checkpoint path). Any task field is `task.<field>`. Unknown keys are errors. Each run writes
to its directory (hydra.run.dir): the resolved config.yaml, TensorBoard logs, checkpoints
(model_<iteration>.pt, written atomically), learning_curve.json and learning_curve.png.
"""

import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simrl.rl.config import register, resolve_device  # noqa: E402

register("train", {"num_envs": None, "device": "auto", "seed": 42, "max_iterations": None, "algo": "ppo",
                   "resume": None}, run_dir="runs/${task.name}/${now:%Y-%m-%d_%H-%M-%S}")


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
    import envs
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.ppo import Runner, rsl_rl_config

    if cfg.algo != "ppo":
        raise SystemExit(f"algo={cfg.algo!r} is not available; choose from: ppo")
    device = resolve_device(cfg.device)
    task = cfg.task
    num_envs = cfg.num_envs if cfg.num_envs is not None else (
        task.num_envs_gpu if device.startswith("cuda") else task.num_envs)
    if int(num_envs) < 1:
        raise SystemExit(f"num_envs must be a positive integer, got {num_envs}")
    iterations = int(cfg.max_iterations if cfg.max_iterations is not None else task.max_iterations)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    resolved = OmegaConf.to_container(cfg, resolve=True)
    resolved.update({"num_envs": int(num_envs), "device": device, "max_iterations": iterations})
    (run_dir / "config.yaml").write_text(OmegaConf.to_yaml(OmegaConf.create(resolved)))

    print(f"simrl: task {task.name}, {num_envs} envs on {device}, {iterations} iterations, run dir {run_dir}")
    env = envs.make(task.name, num_envs=int(num_envs), device=device, seed=int(cfg.seed),
                    **OmegaConf.to_container(task.env, resolve=True))
    vec_env = RslRlVecEnv(env, cfg=resolved)
    train_cfg = rsl_rl_config(OmegaConf.to_container(task.ppo, resolve=True))
    train_cfg["seed"] = int(cfg.seed)
    import torch

    torch.manual_seed(int(cfg.seed))
    key_terms = [f"Episode_Reward/{k}" for k in env.reward_weights]
    runner = Runner(vec_env, train_cfg, log_dir=str(run_dir), device=device, key_terms=key_terms)
    if cfg.resume:
        if not os.path.isfile(cfg.resume):
            raise SystemExit(f"resume={cfg.resume}: no such checkpoint file")
        runner.load(cfg.resume, map_location=device)
        print(f"resumed from {cfg.resume} at iteration {runner.current_learning_iteration}")
    start = time.time()
    runner.learn(num_learning_iterations=iterations)
    curve = runner.curve
    (run_dir / "learning_curve.json").write_text(json.dumps(curve))
    if curve:
        plot_curve(curve, run_dir / "learning_curve.png", f"{task.name}: PPO, {num_envs} envs on {device}")
        last = curve[-1]
        print(f"simrl: done in {time.time() - start:.0f} s: mean return {last['mean_return']:.2f}, "
              f"mean episode length {last['mean_episode_length']:.1f}; results in {run_dir}")


if __name__ == "__main__":
    main()
