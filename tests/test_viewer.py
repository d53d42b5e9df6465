"""The browser viewer (simrl.viewer): the scene is MuJoCo's, the page draws the robot and shows
it move in headless Chromium, the page steers the shown worlds and nothing else, play.py and
train.py run it, and a port in use is an error naming it."""

import math
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from browser import INSTALL_HINT, Browser, chromium_path

import envs
from simrl.viewer import ViewerError, WebViewer, check_port
from simrl.viewer.live import command_info, reward_terms, run_live, snapshot
from simrl.viewer.scene import HostWorlds, drawn_geoms, geom_quat

ROOT = Path(__file__).resolve().parents[1]
#: the colour the test paints the robot: no other part of the page has it
MAGENTA = (1.0, 0.1, 0.9, 1.0)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def magenta_mask(image: np.ndarray) -> np.ndarray:
    """Pixels of the robot's colour, shaded by the lights: red and blue high, green low."""
    r, g, b = (image[..., k].astype(int) for k in range(3))
    return (r > 110) & (b > 100) & (g < 0.55 * np.minimum(r, b))


def test_scene_is_what_mujoco_draws():
    """Drawn geoms are MuJoCo's default-visible ones (groups 0-2, alpha > 0), with their
    material's colour; a world's geom poses are mj_forward's for the copied state."""
    xml = """<mujoco><asset><material name="red" rgba="1 0 0 1"/></asset><worldbody>
      <geom name="floor" type="plane" size="0 0 1"/>
      <body name="b" pos="0 0 1"><freejoint/>
        <geom name="box" type="box" size=".1 .2 .3" material="red"/>
        <geom name="hidden" type="sphere" size=".1" group="3"/>
        <geom name="clear" type="capsule" size=".05 .1" rgba="1 1 1 0"/>
        <geom name="ell" type="ellipsoid" size=".1 .2 .3" pos=".3 0 0"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    geoms = {g.name: g for g in drawn_geoms(m)}
    assert sorted(geoms) == ["box", "ell", "floor"]
    assert geoms["box"].color == (255, 0, 0) and geoms["box"].moving and not geoms["floor"].moving
    # the box's mesh spans its half-sizes, the ellipsoid's its radii
    np.testing.assert_allclose(np.abs(geoms["box"].vertices).max(axis=0), [0.1, 0.2, 0.3], atol=1e-6)
    np.testing.assert_allclose(np.abs(geoms["ell"].vertices).max(axis=0), [0.1, 0.2, 0.3], atol=1e-6)
    host = HostWorlds(m, 1)
    qpos = np.array([0.5, -0.2, 0.7, *np.array([math.cos(0.3), 0.0, math.sin(0.3), 0.0])])
    d = host.set(0, {"qpos": qpos, "qvel": np.zeros(6)})
    ref = mujoco.MjData(m)
    ref.qpos[:] = qpos
    mujoco.mj_forward(m, ref)
    box = mujoco.mj_name2id(m, mujoco.mjtObj.mjOBJ_GEOM, "box")
    np.testing.assert_allclose(d.geom_xpos[box], ref.geom_xpos[box])
    q = geom_quat(d, np.array([box]))[0]
    np.testing.assert_allclose(q, [math.cos(0.3), 0.0, math.sin(0.3), 0.0], atol=1e-12)


def test_height_fields_and_meshes_are_mujocos():
    """A height field's surface has MuJoCo's samples (x, y over the size, z = data * size[2]); a
    mesh geom's triangles are the compiled mesh's, in the geom frame."""
    xml = """<mujoco><asset>
      <hfield name="h" nrow="3" ncol="4" size="2 1 0.5 0.1" elevation="0 1 2 3  3 2 1 0  0 0 3 3"/>
      <mesh name="tet" vertex="0 0 0  1 0 0  0 1 0  0 0 1"/></asset><worldbody>
      <geom name="ground" type="hfield" hfield="h"/>
      <body pos="0 0 2"><freejoint/><geom name="m" type="mesh" mesh="tet"/></body></worldbody></mujoco>"""
    m = mujoco.MjModel.from_xml_string(xml)
    geoms = {g.name: g for g in drawn_geoms(m)}
    h = geoms["ground"].vertices.reshape(3, 4, 3)
    np.testing.assert_allclose(h[0, :, 0], np.linspace(-2, 2, 4), atol=1e-6)  # columns along x
    np.testing.assert_allclose(h[:, 0, 1], np.linspace(-1, 1, 3), atol=1e-6)  # rows along y
    # each sample's height is where MuJoCo's own ray meets the height field (mj_ray, from above)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    geomid = np.zeros(1, dtype=np.int32)
    for x, y, z in h.reshape(-1, 3) * [1 - 1e-6, 1 - 1e-6, 1]:  # just inside the edges
        dist = mujoco.mj_ray(m, d, np.array([x, y, 5.0]), np.array([0.0, 0.0, -1.0]), None, 1, 1, geomid)
        assert geomid[0] == 0 and abs((5.0 - dist) - z) < 1e-5, (x, y, z, 5.0 - dist)
    assert np.ptp(h[..., 2]) > 0.4  # a real relief, not a flat sheet
    assert len(geoms["ground"].faces) == 2 * 2 * 3
    mesh = geoms["m"]
    np.testing.assert_allclose(mesh.vertices, m.mesh_vert[m.mesh_vertadr[0]:m.mesh_vertadr[0] + m.mesh_vertnum[0]])
    np.testing.assert_array_equal(mesh.faces, m.mesh_face[:m.mesh_facenum[0]])


@pytest.mark.parametrize("script,overrides,message", [
    ("train", ["viewer=html"], "viewer must be web or null, got 'html'"),
    ("train", ["viewer=web", "viewer_port=70000"], "viewer_port must be a port number in [1, 65535], got 70000"),
    ("play", ["viewer=web", "viewer_seconds=0"], "viewer_seconds must be a number > 0 or null, got 0"),
    ("play", ["viewer=web", "video=true"], "viewer=web runs the policy live in a browser and video=true records"),
])
def test_viewer_keys_are_checked(script, overrides, message):
    from hydra import compose, initialize

    from simrl.errors import ConfigError
    from tasks.config import register, validate

    register(script)
    with initialize(version_base=None):
        cfg = compose(script, overrides=["task=cartpole", *overrides])
    with pytest.raises(ConfigError) as info:
        validate(cfg, script)
    assert message in str(info.value)


def test_port_in_use_is_an_error_naming_it():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        with pytest.raises(ViewerError, match=rf"port {port} on 127.0.0.1 is in use; choose another with viewer_port="):
            check_port("127.0.0.1", port)


@pytest.mark.skipif(chromium_path() is None, reason=INSTALL_HINT)
def test_browser_draws_the_robot_moving_and_steers_only_the_worlds(tmp_path):
    """Headless Chromium opens the page: the robot (painted magenta) is drawn, and between two
    screenshots its pixels move; the page's command reaches the shown worlds' commands and
    observations; the page offers no share tunnel."""
    env = envs.make("quadruped", num_envs=2, device="cpu", seed=0)
    m = env.sim.mj_model
    robot = [g.geom for g in drawn_geoms(m) if g.moving]
    m.geom_rgba[robot] = MAGENTA  # the viewer reads its colours from the model
    m.geom_matid[robot] = -1
    viewer = WebViewer(m, [0, 1], port=free_port(), command=command_info(env), reward_terms=reward_terms(env))
    from viser import _messages

    assert _messages.ShareUrlRequest not in viewer.server._websock_server._incoming_handlers
    viewer.controls.contact_forces = False  # red arrows: keep the image to the robot and the ground
    calls, seen = [0], {}

    def swing(obs):  # every joint target swinging by 1.5 rad: the legs move whatever the policy
        calls[0] += 1
        # the commands the policy acts on (a world that falls in env.step resamples its own
        # until the page's command is written again before the next action)
        seen["commands"] = env.commands.clone()
        return torch.full((env.num_envs, env.num_actions), 1.5 * math.sin(0.25 * calls[0]))

    result, stop = {}, threading.Event()
    runner = threading.Thread(target=lambda: result.update(run_live(env, swing, viewer, seconds=300.0, stop=stop)))
    runner.start()
    browser = Browser(width=1000, height=700)
    try:
        browser.open(viewer.url)
        masks = []
        deadline = time.monotonic() + 120.0  # software WebGL on a busy machine draws slowly
        while len(masks) < 2 and time.monotonic() < deadline:
            time.sleep(1.5 if masks else 3.0)
            image = browser.screenshot(tmp_path / f"viewer_{len(masks)}.png")
            mask = magenta_mask(image[:, :600])  # left of the control panel
            if mask.sum() > 150:
                masks.append(mask)
        # the page steers: the command reaches the shown worlds
        with viewer.controls.lock:
            viewer.controls.command[:] = (0.7, -0.3, 0.4)
            viewer.controls.override_command = True
        time.sleep(1.0)
        commands = seen["commands"]
    finally:
        stop.set()
        browser.close()
        runner.join()
        viewer.close()
    assert len(masks) == 2, f"the robot's colour was not drawn (screenshots in {tmp_path})"
    changed = (masks[0] ^ masks[1]).sum() / max((masks[0] | masks[1]).sum(), 1)
    assert changed > 0.2, f"the robot did not move between the screenshots ({changed:.2f} of its pixels changed)"
    np.testing.assert_allclose(commands.numpy(), [[0.7, -0.3, 0.4]] * 2, atol=1e-6)
    assert result["steps"] > 50 and result["frames"] > 10


def test_live_loop_pauses_steps_and_resets():
    """Paused, the loop advances only on Step; Reset starts every world's episode again."""
    env = envs.make("cartpole", num_envs=2, device="cpu", seed=0)
    viewer = WebViewer(env.sim.mj_model, [0, 1], port=free_port(), command=command_info(env))
    try:
        c = viewer.controls
        c.paused, c.steps_requested = True, 3
        result = run_live(env, lambda obs: torch.zeros(env.num_envs, env.num_actions), viewer, seconds=1.0)
        assert result["steps"] == 3 and int(env.episode_length_buf.max()) == 3
        c.reset_requested = True
        c.steps_requested = 1
        run_live(env, lambda obs: torch.zeros(env.num_envs, env.num_actions), viewer, seconds=0.5)
        assert env.episode_length_buf.tolist() == [1, 1]  # run_live resets at its start, then one step
        state = snapshot(env, torch.tensor([1]))
        np.testing.assert_allclose(state["qpos"][0], env.sim.qpos[1].numpy())
    finally:
        viewer.close()


def _run(*args, **kwargs):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600, **kwargs)


def test_train_and_play_serve_the_viewer(tmp_path):
    """train.py viewer=web shows worlds while training, its cost on every progress line;
    play.py viewer=web serves the page at the printed URL for viewer_seconds; a port in use is
    an error that names it."""
    train_dir = tmp_path / "train"
    port = free_port()
    result = _run("scripts/train.py", "task=cartpole", "num_envs=32", "max_iterations=2", "viewer=web",
                  f"viewer_port={port}", f"hydra.run.dir={train_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"simrl: viewer at http://127.0.0.1:{port}" in result.stdout
    progress = [line for line in result.stdout.splitlines() if line.startswith("it ")]
    assert len(progress) == 2 and all(re.search(r"viewer: copy \d+\.\d% draw \d+% of a core", p) for p in progress)

    port = free_port()
    play = subprocess.Popen([sys.executable, "scripts/play.py", "task=cartpole", f"checkpoint={train_dir}",
                             "viewer=web", f"viewer_port={port}", "viewer_seconds=8",
                             f"hydra.run.dir={tmp_path / 'play'}"], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    lines = []
    for line in play.stdout:
        lines.append(line)
        if "running in 4 worlds for 8 s" in line:
            page = urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10).read().decode()
            assert "<html" in page.lower()
    play.wait(timeout=120)
    out = "".join(lines)
    assert play.returncode == 0, out[-2000:]
    assert f"simrl: viewer at http://127.0.0.1:{port}" in out
    assert re.search(r"viewer closed after \d+ s: \d+ policy steps", out)

    with socket.socket() as s:  # a port in use
        s.bind(("127.0.0.1", 0))
        s.listen()
        busy = s.getsockname()[1]
        result = _run("scripts/play.py", "task=cartpole", f"checkpoint={train_dir}", "viewer=web",
                      f"viewer_port={busy}", "viewer_seconds=1", f"hydra.run.dir={tmp_path / 'busy'}")
    assert result.returncode != 0
    assert f"port {busy} on 127.0.0.1 is in use; choose another with viewer_port=" in result.stdout + result.stderr
