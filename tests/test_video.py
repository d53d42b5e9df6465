"""scripts/play.py video=true: world 0's evaluation episode rendered by MuJoCo into an MP4 at the
policy rate (skipped only where MuJoCo finds no OpenGL backend)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
PROBE = "import mujoco; mujoco.Renderer(mujoco.MjModel.from_xml_string('<mujoco/>'), 8, 8).close()"


def opengl_backend() -> str | None:
    """The first MUJOCO_GL with which MuJoCo's renderer runs here, each tried in a fresh process
    (MuJoCo binds its backend at import), in the order play.py tries them."""
    candidates = [os.environ["MUJOCO_GL"]] if os.environ.get("MUJOCO_GL") else ["egl", "osmesa"]
    for backend in candidates:
        probe = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, "MUJOCO_GL": backend},
                               capture_output=True, timeout=120)
        if probe.returncode == 0:
            return backend
    return None


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # 40 s cold
def test_play_records_world_0_as_mp4(tmp_path):
    av = pytest.importorskip("av")
    if opengl_backend() is None:
        pytest.skip("MuJoCo's renderer has no OpenGL backend here (tried egl and osmesa)")
    train_dir, play_dir = tmp_path / "train", tmp_path / "play"
    result = run("scripts/train.py", "task=cartpole", "num_envs=8", "max_iterations=1", f"hydra.run.dir={train_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    # the pole may fall freely: every episode runs its full 50 steps (1 s at 50 Hz), longer than
    # the 0.6 s of video asked for, so the video has 30 frames
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={train_dir / 'model_0.pt'}", "num_envs=2",
                 "video=true", "video_length_s=0.6", "task.env.episode_length_s=1.0",
                 "task.env.terminations.pole_fallen.limit=100.0",
                 "task.env.terminations.cart_out_of_bounds.limit=100.0", f"hydra.run.dir={play_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "wrote video.mp4: 30 frames at 50 fps" in result.stdout, result.stdout[-2000:]
    assert json.loads((play_dir / "metrics.json").read_text())["mean_episode_length"] == 50

    video = play_dir / "video.mp4"
    assert video.stat().st_size > 0
    with av.open(str(video)) as container:
        stream = container.streams.video[0]
        assert (stream.width, stream.height) == (640, 480) and stream.average_rate == 50
        frames = [frame.to_ndarray(format="rgb24") for frame in container.decode(video=0)]
    assert len(frames) == 30
    for frame in frames:  # the cart and pole, grey on black: never a single colour
        assert np.ptp(frame) > 50
    assert np.abs(frames[-1].astype(int) - frames[0].astype(int)).max() > 50  # the pole moved


def test_video_length_must_be_positive(tmp_path):
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={Path(__file__)}", "video=true", "video_length_s=0",
                 f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0 and "video_length_s must be a number > 0, got 0" in result.stderr
