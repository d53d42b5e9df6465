"""A video of an evaluation episode (scripts/play.py video=true): world 0's states recorded at
every policy step, rendered by MuJoCo at the policy rate into an MP4 of 640x480, a camera
following the root body of a floating-base robot, a fixed view otherwise.

MuJoCo chooses its OpenGL backend (MUJOCO_GL) once, when it is first imported, and play.py
imports it long before its configuration is read; a backend that is missing can also make that
import fail. So the frames are rendered in a child process (`python -m simrl.rl.video WORKDIR
PATH`, given the compiled model as an MJB file and the recorded qpos and qvel), started once per
candidate backend until one works: MUJOCO_GL as set by the user, else on Linux egl (GPU or
Mesa), then osmesa (software), then glfw if there is a display; elsewhere the platform default.
Encoding: PyAV (H.264, yuv420p).
"""

import importlib.util
import os
import subprocess
import sys
import tempfile
from fractions import Fraction
from pathlib import Path

VIDEO_SIZE = (640, 480)  # width, height
#: the folder that holds the simrl package: the rendering child's working directory, so that
#: `python -m simrl.rl.video` finds this simrl whether it is installed or not
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


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
    path = Path(path).resolve()
    failures = []
    with tempfile.TemporaryDirectory() as workdir:
        mujoco.mj_saveModel(mj_model, str(Path(workdir) / "model.mjb"), None)
        np.savez(Path(workdir) / "states.npz", qpos=np.stack(qpos), qvel=np.stack(qvel), fps=fps)
        for backend in gl_backends():
            child_env = {**os.environ, "MUJOCO_GL": backend} if backend else dict(os.environ)
            name = f"MUJOCO_GL={backend or '(default)'}"
            try:
                result = subprocess.run([sys.executable, "-m", "simrl.rl.video", workdir, str(path)], env=child_env,
                                        cwd=_PACKAGE_ROOT, capture_output=True, text=True, timeout=120 + 2 * len(qpos))
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


if __name__ == "__main__":
    write_video(*sys.argv[1:3])
