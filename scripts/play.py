#!/usr/bin/env python
"""Evaluate a trained policy headless and export it:
`python scripts/play.py task=NAME checkpoint=PATH [num_envs=.. num_episodes=.. device=.. seed=..]`.

Runs `num_episodes` evaluation episodes (one per world) with the deterministic policy, prints
the metrics and writes to the run directory (hydra.run.dir, default runs/<task>/play_<date>):
metrics.json (mean_return, mean_episode_length, fall_rate, and for locomotion
lin_vel_tracking_error in m/s and yaw_rate_tracking_error in rad/s), policy.onnx and policy.pt
(TorchScript). `video=true` records an MP4 through MuJoCo's renderer when an OpenGL backend is
available and says so when none is.
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import hydra  # noqa: E402
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simrl.errors import CheckpointError, ConfigError  # noqa: E402
from simrl.rl.config import register, resolve_device, validate  # noqa: E402

register("play", {"checkpoint": None, "num_envs": 100, "num_episodes": None, "device": "auto", "seed": 1,
                  "video": False}, run_dir="runs/${task.name}/play_${now:%Y-%m-%d_%H-%M-%S}")


def render_video(task_name: str, path: Path) -> str:
    """Say whether a video can be recorded here; only the check exists so far."""
    import mujoco

    try:
        renderer = mujoco.Renderer(mujoco.MjModel.from_xml_string("<mujoco/>"), 64, 64)
        renderer.close()
    except Exception as e:  # no OpenGL context (EGL, OSMesa or a display)
        return f"no video: MuJoCo's renderer needs an OpenGL backend and none is available ({e})"
    return "no video: recording is not implemented yet"


@hydra.main(version_base=None, config_name="play")
def main(cfg: DictConfig) -> None:
    import torch

    import envs
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.evaluate import evaluate
    from simrl.rl.ppo import Runner, rsl_rl_config

    try:
        validate(cfg, "play")
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
    if not cfg.checkpoint or not Path(cfg.checkpoint).is_file():
        raise SystemExit(f"checkpoint={cfg.checkpoint}: give the path of a model_<iteration>.pt file")
    device = resolve_device(cfg.device)
    num_envs = int(cfg.num_episodes or cfg.num_envs)
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    task = cfg.task
    env = envs.make(task.name, num_envs=num_envs, device=device, seed=int(cfg.seed),
                    **OmegaConf.to_container(task.env, resolve=True))
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(OmegaConf.to_container(task.ppo, resolve=True)),
                    log_dir=None, device=device, key_terms=[], task=task.name)
    try:
        runner.load(cfg.checkpoint, map_location=device)
    except CheckpointError as e:
        raise SystemExit(f"simrl: {e}") from None
    policy = runner.get_inference_policy(device=device)
    metrics = evaluate(env, policy, num_episodes=num_envs)
    metrics.update({"task": task.name, "checkpoint": str(cfg.checkpoint), "device": device})
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    import logging

    for name in ("onnxscript", "onnx_ir", "torch.onnx"):  # exporter progress chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    runner.export_policy_to_onnx(str(run_dir), "policy.onnx")
    runner.export_policy_to_jit(str(run_dir), "policy.pt")
    for key, value in metrics.items():
        print(f"{key:>26s}: {value}")
    if cfg.video:
        print(render_video(task.name, run_dir / "video.mp4"))
    print(f"wrote metrics.json, policy.onnx and policy.pt to {run_dir}")
    del torch


if __name__ == "__main__":
    main()
