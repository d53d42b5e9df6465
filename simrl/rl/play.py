"""The evaluation of scripts/play.py: a trained policy (PPO or SHAC, as its checkpoint says) run
headless for one deterministic episode per world, its metrics written to metrics.json and the
policy exported as policy.onnx and policy.pt (TorchScript); with video=true, world 0's first
episode as video.mp4 (simrl.rl.video).

simrl.rl imports no environments: the caller passes an EnvFactory (simrl.rl.train) that builds
the task's environment (tasks.config.TaskEnvFactory).
"""

import json
import logging
from pathlib import Path

from omegaconf import DictConfig, OmegaConf

from simrl.errors import CheckpointError
from simrl.rl import export
from simrl.rl.config import ShacCfg, resolve_device, sim_options
from simrl.rl.train import EnvFactory


def watch(env, policy, cfg: DictConfig, checkpoint) -> None:
    """play.py viewer=web: the policy runs live in the browser viewer (simrl.viewer) until
    viewer_seconds have passed or Ctrl-C; nothing is evaluated or exported."""
    from simrl.viewer import ViewerError
    from simrl.viewer.live import command_info, open_viewer, reward_terms, run_live, side_by_side

    try:
        viewer = open_viewer(env, list(range(env.num_envs)), cfg, interactive=True,
                             command=command_info(env), side_by_side=side_by_side(env),
                             reward_terms=reward_terms(env), title=f"simrl play: {cfg.task.name}")
    except ViewerError as e:
        raise SystemExit(f"simrl: {e}") from None
    seconds = cfg.get("viewer_seconds")
    print(f"simrl: policy {checkpoint} running in {env.num_envs} worlds"
          f"{f' for {seconds:g} s' if seconds else ' until Ctrl-C'}", flush=True)
    try:
        result = run_live(env, policy, viewer, seconds=seconds)
    finally:
        viewer.close()
    print(f"simrl: viewer closed after {result['seconds']:.0f} s: {result['steps']} policy steps at "
          f"{result['real_time_factor']:.2f}x real time, {result['frames']} frames drawn", flush=True)


def play(cfg: DictConfig, run_dir: Path, env_factory: EnvFactory) -> None:
    """Evaluate and export as configured by `cfg` (the composed `play` config, validated:
    tasks.config.validate) into `run_dir`, the environment built by `env_factory`. A missing or
    unusable checkpoint raises SystemExit with a message naming it."""
    from simrl.rl.checkpoint import checkpoint_algo, resolve_resume
    from simrl.rl.evaluate import evaluate
    from simrl.rl.ppo import Runner, rsl_rl_config
    from simrl.rl.video import VideoRecorder, render_video

    if not cfg.checkpoint:
        raise SystemExit("simrl: checkpoint=... is required: a model_<iteration>.pt, a run directory (its last "
                         "checkpoint) or latest (the newest under runs/<task>/)")
    try:  # the same resolution as train.py's resume=
        checkpoint = resolve_resume(str(cfg.checkpoint), cfg.task.name, key="checkpoint")
    except CheckpointError as e:
        raise SystemExit(f"simrl: {e}") from None
    sim = sim_options(cfg)
    backend = sim["backend"]
    device = resolve_device(cfg.device, backend)
    viewer = cfg.get("viewer") == "web"
    # evaluation: one episode per world (100 by default); the viewer: the worlds it shows (4)
    num_envs = int(cfg.num_envs or 4) if viewer else int(cfg.num_episodes or cfg.num_envs or 100)
    task = cfg.task
    env = env_factory.make(num_envs=num_envs, device=device, seed=int(cfg.seed), **sim)
    try:
        algo = checkpoint_algo(checkpoint, map_location=device)  # the algorithm that trained it
        if algo == "shac":
            from simrl.rl.shac import ShacRunner

            if "shac" not in task:
                raise SystemExit(f"simrl: checkpoint {checkpoint} was trained with algo=shac, but task "
                                 f"{task.name} has no `shac` section describing its networks")
            shac = ShacCfg.from_dict(OmegaConf.to_container(task.shac, resolve=True))
            runner = ShacRunner(env, shac, log_dir=None, device=device, key_terms=[], task=task.name)
        else:
            runner = Runner(env_factory.vec_env(env), rsl_rl_config(OmegaConf.to_container(task.ppo, resolve=True)),
                            log_dir=None, device=device, key_terms=[], task=task.name)
        runner.load(str(checkpoint), map_location=device)
    except CheckpointError as e:
        raise SystemExit(f"simrl: {e}") from None
    policy = runner.get_inference_policy(device=device)
    if viewer:
        watch(env, policy, cfg, checkpoint)
        return
    recorder = VideoRecorder(max(1, round(cfg.video_length_s / env.step_dt))) if cfg.video else None
    metrics = evaluate(env, policy, num_episodes=num_envs, on_step=recorder)
    metrics.update({"task": task.name, "checkpoint": str(checkpoint), "algo": algo, "device": device,
                    "backend": backend})
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    for name in ("onnxscript", "onnx_ir", "torch.onnx"):  # exporter progress chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    runner.export_policy_to_onnx(str(run_dir), "policy.onnx")
    runner.export_policy_to_jit(str(run_dir), "policy.pt")
    # what a robot needs besides the network (simrl.rl.export): joints, gains, observation terms
    metadata = {"task": task.name, "algo": algo, "checkpoint": str(checkpoint), **env.policy_metadata()}
    export.write_metadata(run_dir, metadata)
    for key, value in metrics.items():
        print(f"{key:>26s}: {value}")
    if cfg.video:
        print(render_video(env.sim.mj_model, recorder.qpos, recorder.qvel, 1.0 / env.step_dt, run_dir / "video.mp4"))
    print(f"policy metadata ({', '.join(metadata)}): policy.onnx's metadata_props and policy.pt's "
          f"{export.JIT_METADATA_FILE} (docs/GUIDE.md, Exported policies)")
    print(f"wrote metrics.json, policy.onnx, policy.pt{', video.mp4' if cfg.video else ''} and play.log to {run_dir}")
