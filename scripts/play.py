#!/usr/bin/env python
"""Evaluate a trained policy headless and export it:
`python scripts/play.py task=NAME checkpoint=PATH [num_envs=.. num_episodes=.. device=.. seed=..
sim.backend=warp|mujoco]`. PATH is what train.py's `resume=` takes: a model_<iteration>.pt, a run
directory (its highest-iteration checkpoint) or `latest` (the most recently written checkpoint
under runs/<task>/). `sim.backend=mujoco` evaluates the policy in MuJoCo itself (CPU, one MjData
per world) instead of this engine: sim-to-sim; metrics.json records the backend.

Runs `num_episodes` evaluation episodes (one per world) with the deterministic policy, prints
the metrics and writes to the run directory (hydra.run.dir, default runs/<task>/play_<date>):
metrics.json (mean_return, mean_episode_length, fall_rate, and for locomotion
lin_vel_tracking_error in m/s, yaw_rate_tracking_error in rad/s and falls_by_cause: per failure
condition of envs.legged, the share of episodes that ended with it), policy.onnx and policy.pt
(TorchScript). `video=true` also writes video.mp4: world 0's first evaluation episode (at most
`video_length_s` seconds, default 10) rendered by MuJoCo at the policy rate (1 / step_dt fps),
640x480, a camera following the root body of a floating-base robot, a fixed view otherwise.

Video and OpenGL. MuJoCo chooses its OpenGL backend (MUJOCO_GL) once, when it is first
imported, and this process imports it long before the configuration is read; a backend that is
missing can also make that import fail. So the frames are rendered in a child process (this
script with `--render-video`, given the compiled model as an MJB file and the recorded qpos and
qvel), started once per candidate backend until one works: MUJOCO_GL as set by the user, else
on Linux egl (GPU or Mesa), then osmesa (software), then glfw if there is a display; elsewhere
the platform default. When none works, play.py says why and goes on (metrics.json and the
exported policies are written before). Encoding: PyAV (H.264, yuv420p).
"""

import importlib.util
import json
import os
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

try:
    import hydra  # noqa: E402
except ModuleNotFoundError as e:  # a Python without the project's packages, e.g. the system's
    raise SystemExit(f"simrl: {e} in {sys.executable}. Use the project's environment: `make train` creates "
                     f".venv; then run .venv/bin/python scripts/play.py ... (or `source .venv/bin/activate` "
                     f"first)") from None
from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig, OmegaConf  # noqa: E402

from simrl.errors import CheckpointError, ConfigError  # noqa: E402
from simrl.rl.config import resolve_device  # noqa: E402
from simrl.rl.runlog import tee_output  # noqa: E402
from tasks.config import check_overrides, env_kwargs, register, validate  # noqa: E402

register("play")


SCRIPT = Path(__file__).resolve()
VIDEO_SIZE = (640, 480)  # width, height
RENDER_FLAG = "--render-video"  # play.py run as the rendering child process (see the module docstring)


class VideoRecorder:
    """`evaluate` callback: world 0's qpos and qvel (host copies) at every policy step of its
    first episode, at most `max_frames` of them; each becomes one video frame."""

    def __init__(self, max_frames: int):
        self.max_frames = max_frames
        self.qpos: list = []
        self.qvel: list = []

    def __call__(self, env, running) -> None:
        if len(self.qpos) < self.max_frames and bool(running[0]):  # a host round trip per step, with video only
            self.qpos.append(env.sim.qpos[0].double().cpu().numpy())
            self.qvel.append(env.sim.qvel[0].double().cpu().numpy())


def gl_backends() -> list[str]:
    """MUJOCO_GL values to try, in order ("" leaves MuJoCo's platform default)."""
    if os.environ.get("MUJOCO_GL"):
        return [os.environ["MUJOCO_GL"]]
    if sys.platform.startswith("linux"):
        display = os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        return ["egl", "osmesa"] + (["glfw"] if display else [])
    return [""]  # macOS and Windows: MuJoCo's default works with the desktop's OpenGL


def render_video(mj_model, qpos: list, qvel: list, fps: float, path: Path) -> str:
    """Render the states (one frame each) of `mj_model` into an MP4 at `path`, `fps` frames per
    second, in a child process per OpenGL backend (see the module docstring). Returns a line
    saying what was written, or why nothing was."""
    import mujoco
    import numpy as np

    if importlib.util.find_spec("av") is None:
        return "no video: PyAV is not installed (pip install av)"
    if not qpos:
        return "no video: no state was recorded"
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        mujoco.mj_saveModel(mj_model, str(Path(workdir) / "model.mjb"), None)
        np.savez(Path(workdir) / "states.npz", qpos=np.stack(qpos), qvel=np.stack(qvel), fps=fps)
        for backend in gl_backends():
            child_env = {**os.environ, "MUJOCO_GL": backend} if backend else dict(os.environ)
            name = f"MUJOCO_GL={backend or '(default)'}"
            try:
                result = subprocess.run([sys.executable, str(SCRIPT), RENDER_FLAG, workdir, str(path)], env=child_env,
                                        capture_output=True, text=True, timeout=120 + 2 * len(qpos))
            except subprocess.TimeoutExpired:
                failures.append(f"{name}: timed out")
                continue
            if result.returncode == 0:
                return f"wrote {path.name}: {len(qpos)} frames at {fps:g} fps ({name})"
            lines = [line for line in result.stderr.splitlines() if line.strip()]
            failures.append(f"{name}: {lines[-1] if lines else f'exit status {result.returncode}'}")
            path.unlink(missing_ok=True)
    return ("no video: MuJoCo's renderer found no working OpenGL backend (" + "; ".join(failures) + "). "
            "Headless Linux needs EGL (a GPU driver, or Mesa's libegl1) or OSMesa (libosmesa6); "
            "MUJOCO_GL=egl|osmesa|glfw picks one")


def video_camera(model):
    """A camera following the root body of a floating-base robot (a free joint first), at 4.5
    times the robot's own extent (its geoms' reach from its centre of mass at qpos0; the model's
    `stat.extent` would take in a terrain grid tens of metres wide), or a fixed view of the whole
    model (e.g. the cart-pole and its rail)."""
    import mujoco

    camera = mujoco.MjvCamera()
    mujoco.mjv_defaultFreeCamera(model, camera)
    if model.njnt and model.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
        camera.type = mujoco.mjtCamera.mjCAMERA_TRACKING
        camera.trackbodyid = root = int(model.jnt_bodyid[0])
        camera.distance, camera.azimuth, camera.elevation = 4.5 * robot_extent(model, root), 135.0, -20.0
    else:
        camera.distance, camera.azimuth, camera.elevation = 4.0 * model.stat.extent, 90.0, -10.0
    return camera


def robot_extent(model, root: int) -> float:
    """The largest distance from body `root`'s subtree centre of mass to the far side of a geom
    of that subtree (centre distance + bounding radius), at qpos0."""
    import mujoco
    import numpy as np

    data = mujoco.MjData(model)
    mujoco.mj_kinematics(model, data)
    mujoco.mj_comPos(model, data)
    geoms = [g for g in range(model.ngeom) if model.body_rootid[model.geom_bodyid[g]] == root]
    reach = [np.linalg.norm(data.geom_xpos[g] - data.subtree_com[root]) + model.geom_rbound[g] for g in geoms]
    return float(max(reach, default=model.stat.extent))


def write_video(workdir: str, path: str) -> None:
    """The rendering child: one frame per state of workdir/states.npz, rendered from
    workdir/model.mjb with the MUJOCO_GL of this process, encoded to an MP4 at `path`."""
    import av
    import mujoco
    import numpy as np

    model = mujoco.MjModel.from_binary_path(str(Path(workdir) / "model.mjb"))
    states = np.load(Path(workdir) / "states.npz")
    width, height = VIDEO_SIZE
    model.vis.global_.offwidth = max(model.vis.global_.offwidth, width)  # the offscreen buffer must hold a frame
    model.vis.global_.offheight = max(model.vis.global_.offheight, height)
    renderer = mujoco.Renderer(model, height, width)  # fails here, before any file is written, without OpenGL
    data = mujoco.MjData(model)
    camera = video_camera(model)
    codec = "libx264" if "libx264" in av.codecs_available else "mpeg4"
    with av.open(path, "w") as container:
        stream = container.add_stream(codec, rate=Fraction(float(states["fps"])).limit_denominator(1000))
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for qpos, qvel in zip(states["qpos"], states["qvel"], strict=True):
            data.qpos[:], data.qvel[:] = qpos, qvel
            mujoco.mj_forward(model, data)
            renderer.update_scene(data, camera=camera)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(renderer.render(), format="rgb24")))
        container.mux(stream.encode())  # flush the encoder
    renderer.close()


@hydra.main(version_base=None, config_name="play")
def main(cfg: DictConfig) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    with tee_output(run_dir / "play.log"):
        play(cfg, run_dir)


def play(cfg: DictConfig, run_dir: Path) -> None:
    """Evaluate and export as configured by `cfg` (the composed `play` config) into `run_dir`."""
    import torch

    import envs
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.checkpoint import checkpoint_algo, resolve_resume
    from simrl.rl.evaluate import evaluate
    from simrl.rl.ppo import Runner, rsl_rl_config

    try:
        validate(cfg, "play")
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
    if not cfg.checkpoint:
        raise SystemExit("simrl: checkpoint=... is required: a model_<iteration>.pt, a run directory (its last "
                         "checkpoint) or latest (the newest under runs/<task>/)")
    try:  # the same resolution as train.py's resume=
        checkpoint = resolve_resume(str(cfg.checkpoint), cfg.task.name, key="checkpoint")
    except CheckpointError as e:
        raise SystemExit(f"simrl: {e}") from None
    video_s = cfg.video_length_s
    if isinstance(video_s, bool) or not isinstance(video_s, (int, float)) or not 0 < video_s < float("inf"):
        raise SystemExit(f"simrl: invalid configuration:\n  video_length_s must be a number > 0, got {video_s!r}")
    backend = str(OmegaConf.select(cfg, "sim.backend", default="warp"))
    device = resolve_device(cfg.device, backend)
    num_envs = int(cfg.num_episodes or cfg.num_envs)
    task = cfg.task
    env = envs.make(task.name, num_envs=num_envs, device=device, seed=int(cfg.seed), backend=backend,
                    **env_kwargs(task))
    try:
        algo = checkpoint_algo(checkpoint, map_location=device)  # the algorithm that trained it
        if algo == "shac":
            from simrl.rl.shac import ShacRunner

            if "shac" not in task:
                raise SystemExit(f"simrl: checkpoint {checkpoint} was trained with algo=shac, but task "
                                 f"{task.name} has no `shac` section describing its networks")
            shac_cfg = {k: v for k, v in OmegaConf.to_container(task.shac, resolve=True).items()
                        if k not in ("num_envs", "num_envs_gpu", "max_iterations")}
            runner = ShacRunner(env, shac_cfg, log_dir=None, device=device, key_terms=[], task=task.name)
        else:
            runner = Runner(RslRlVecEnv(env), rsl_rl_config(OmegaConf.to_container(task.ppo, resolve=True)),
                            log_dir=None, device=device, key_terms=[], task=task.name)
        runner.load(str(checkpoint), map_location=device)
    except CheckpointError as e:
        raise SystemExit(f"simrl: {e}") from None
    policy = runner.get_inference_policy(device=device)
    recorder = VideoRecorder(max(1, round(cfg.video_length_s / env.step_dt))) if cfg.video else None
    metrics = evaluate(env, policy, num_episodes=num_envs, on_step=recorder)
    metrics.update({"task": task.name, "checkpoint": str(checkpoint), "algo": algo, "device": device,
                    "backend": backend})
    (run_dir / "metrics.json").write_text(json.dumps(metrics, indent=2))
    import logging

    for name in ("onnxscript", "onnx_ir", "torch.onnx"):  # exporter progress chatter
        logging.getLogger(name).setLevel(logging.WARNING)
    runner.export_policy_to_onnx(str(run_dir), "policy.onnx")
    runner.export_policy_to_jit(str(run_dir), "policy.pt")
    for key, value in metrics.items():
        print(f"{key:>26s}: {value}")
    if cfg.video:
        print(render_video(env.sim.mj_model, recorder.qpos, recorder.qvel, 1.0 / env.step_dt, run_dir / "video.mp4"))
    print(f"wrote metrics.json, policy.onnx, policy.pt{', video.mp4' if cfg.video else ''} and play.log to {run_dir}")
    del torch


if __name__ == "__main__":
    if sys.argv[1:2] == [RENDER_FLAG]:
        write_video(*sys.argv[2:4])
    else:
        try:
            check_overrides("play", sys.argv[1:])  # "did you mean num_envs", before Hydra's "use +num_env"
        except ConfigError as e:
            raise SystemExit(f"simrl: {e}") from None
        main()
