"""The MuJoCo backend (`simrl.mujoco_sim.MujocoSim`, `sim.backend=mujoco`): MuJoCo's own
trajectories, agreement with the Warp engine, the contact slot layout, per-world friction,
environments and scripts on it, and its errors."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import GYM_ASSETS, axis_angle_quat, quat_mul, random_ctrl

import envs
from envs.base import BACKENDS, make_sim, per_world_param
from simrl import Sim, UnsupportedFeatureError
from simrl.mujoco_sim import MujocoSim

ROOT = Path(__file__).resolve().parents[1]
QUADRUPED = ROOT / "envs" / "assets" / "quadruped.xml"


def quadruped() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(QUADRUPED))


def quadruped_states(mjm: mujoco.MjModel, rng: np.random.Generator, n: int):
    """n states of the quadruped near the home pose, at different heights and orientations,
    with random joint offsets, velocities and controls."""
    home = mjm.key("home")
    qpos = np.tile(home.qpos, (n, 1))
    qpos[:, 2] += np.linspace(-0.01, 0.15, n)
    qpos[:, 7:] += rng.normal(0.0, 0.1, (n, mjm.nq - 7))
    for i in range(n):
        qpos[i, 3:7] = axis_angle_quat(rng.normal(size=3), rng.uniform(0.0, 0.3))
    qvel = rng.normal(0.0, 0.3, (n, mjm.nv))
    return qpos, qvel, random_ctrl(mjm, n, rng)


def reference(mjm, qpos, qvel, ctrl, steps, friction=None):
    """mj_step on fresh MjData, world by world (optionally with the model's geom friction set)."""
    out = []
    for q, v, u in zip(qpos, qvel, ctrl, strict=True):
        m = copy.copy(mjm)
        if friction is not None:
            m.geom_friction[:] = friction
        d = mujoco.MjData(m)
        d.qpos[:], d.qvel[:], d.ctrl[:] = q, v, u
        for _ in range(steps):
            mujoco.mj_step(m, d)
        out.append(np.concatenate([d.qpos, d.qvel]))
    return np.stack(out)


# ------------------------------------------------------------------------- (a) MuJoCo itself
@pytest.mark.parametrize("model", ["quadruped", "ant"])
def test_trajectories_are_mujocos_own(model, rng):
    mjm = quadruped() if model == "quadruped" else mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "ant.xml"))
    W, steps = 3, 60
    if model == "quadruped":
        qpos, qvel, ctrl = quadruped_states(mjm, rng, W)
    else:  # RK4
        qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.1, (W, mjm.nq))
        qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
        qvel, ctrl = rng.normal(0.0, 0.5, (W, mjm.nv)), random_ctrl(mjm, W, rng)
    sim = MujocoSim(mjm, W)
    sim.qpos, sim.qvel, sim.ctrl = qpos, qvel, ctrl
    sim.step(steps // 2)
    sim.step(steps - steps // 2)
    ours = np.concatenate([sim.qpos.numpy(), sim.qvel.numpy()], axis=1)
    ref = reference(mjm, qpos, qvel, ctrl, steps)
    assert np.isfinite(ref).all() and not np.allclose(ref[0], ref[1])
    np.testing.assert_array_equal(ours, ref)  # bit for bit


def test_writes_reset_and_nonfinite_worlds():
    mjm = quadruped()
    home = mjm.key("home")
    sim = MujocoSim(mjm, 3)
    sim.qpos[:] = torch.as_tensor(home.qpos)
    sim.ctrl[:] = torch.as_tensor(home.ctrl)
    sim.qvel[:, 0:2] += 0.5  # in-place writes reach MuJoCo
    sim.step(10)
    assert (sim.qpos[:, 0] > 0.02).all()
    sim.qvel[1, 7] = float("nan")
    sim.step(5)
    # the world is flagged and keeps its non-finite state (no automatic reset by MuJoCo)
    assert sim.nan_worlds.tolist() == [False, True, False]
    assert not torch.isfinite(sim.qvel[1]).all()
    assert torch.equal(sim.qpos[0], sim.qpos[2])
    sim.reset(torch.tensor([False, True, False]))
    assert not sim.nan_worlds.any()
    np.testing.assert_array_equal(sim.qpos[1].numpy(), mjm.qpos0)
    assert (sim.qvel[1] == 0).all() and (sim.ctrl[1] == 0).all()
    assert (sim.qpos[0, :2] != 0).any()  # other worlds untouched


def test_forward_of_some_worlds(rng):
    """forward(worlds=mask): mj_forward in the chosen worlds only; the others' outputs stay."""
    mjm = quadruped()
    qpos, qvel, ctrl = quadruped_states(mjm, rng, 4)
    sims = [MujocoSim(mjm, 4) for _ in range(2)]
    for sim in sims:
        sim.qpos[:], sim.qvel[:], sim.ctrl[:] = (torch.as_tensor(a) for a in (qpos, qvel, ctrl))
        sim.step(3)
        sim.qpos[:, 7:] += 0.05
    full, some = sims
    before = some.view("qacc").clone()
    mask = torch.tensor([False, True, True, False])
    full.forward()
    some.forward(worlds=mask)
    assert torch.equal(some.view("qacc")[mask], full.view("qacc")[mask])
    assert torch.equal(some.view("qacc")[~mask], before[~mask])
    assert not torch.equal(full.view("qacc")[~mask], before[~mask])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        some.forward(worlds=torch.ones(2, dtype=torch.bool))


# ----------------------------------------------------------------- (b) agreement with Warp
def test_warp_engine_and_mujoco_agree_on_a_quadruped_rollout(rng):
    mjm = quadruped()
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    W, steps = 3, 200  # 1 s: dropped, landing on its feet (measured: equal to ~1e-15 here, 1e-6 after 1.5 s)
    qpos, qvel, ctrl = quadruped_states(mjm, rng, W)
    qpos[:, 2] += 0.05
    sims = [Sim.from_model(mjm, W, device="cpu", dtype="float64"), MujocoSim(mjm, W)]
    for sim in sims:
        sim.qpos = torch.as_tensor(qpos)
        sim.qvel = torch.as_tensor(qvel)
        sim.ctrl = torch.as_tensor(ctrl)
        sim.step(steps)
    warp, mj = sims
    assert torch.isfinite(mj.qpos).all()
    assert mj.contact.active.any(dim=1).all(), "the robots should be on the ground"
    for w in range(W):  # the same (pair, slot of the pair) touching in both
        touching = []
        for c in (warp.contact, mj.contact):
            pair = c.pair[w].tolist()
            touching.append({(pair[s], int(s) - pair.index(pair[s]))
                             for s in np.flatnonzero((c.active[w] & (c.dist[w] < 0)).numpy())})
        assert touching[0] == touching[1] and touching[0], w
    np.testing.assert_allclose(warp.qpos.numpy(), mj.qpos.numpy(), atol=1e-9)
    np.testing.assert_allclose(warp.qvel.numpy(), mj.qvel.numpy(), atol=1e-7)
    np.testing.assert_allclose(warp.view("actuator_force").numpy(), mj.view("actuator_force").numpy(), atol=1e-7)


# ---------------------------------------------------------------- (c) contact slot layout
def test_contact_slots_are_the_warp_engines(rng):
    mjm = quadruped()
    home = mjm.key("home")
    # poses that put feet, calves, thighs, hips and the box trunk into the floor
    qpos = np.tile(home.qpos, (5, 1))
    rolls = [0.0, 0.0, np.pi / 2, np.pi, 0.4]
    heights = home.qpos[2] + np.array([-0.005, -0.03, 0.0, 0.0, -0.02])
    heights[2:4] = 0.09, 0.04  # on its side; upside down on the trunk
    for i, (roll, z) in enumerate(zip(rolls, heights, strict=True)):
        qpos[i, 3:7] = quat_mul(axis_angle_quat([0, 0, 1], rng.uniform(-np.pi, np.pi)),
                                axis_angle_quat([1, 0, 0], roll))
        qpos[i, 2] = z
    qpos[:, 7:] += rng.normal(0.0, 0.15, (5, 12))
    sims = [Sim.from_model(mjm, 5, device="cpu", dtype="float64"), MujocoSim(mjm, 5)]
    for sim in sims:
        sim.qpos = torch.as_tensor(qpos)
        sim.forward()
    (warp, mj) = (s.contact for s in sims)

    def touching(c, w):
        """{(pair, its k-th slot): (geoms, dist, pos, normal)} of world w's contacts with dist < 0."""
        pair = c.pair[w].tolist()
        out = {}
        for s in np.flatnonzero((c.active[w] & (c.dist[w] < 0)).numpy()):
            key = (pair[s], int(s) - pair.index(pair[s]))
            out[key] = (tuple(c.geom[w, s].tolist()), c.dist[w, s].item(), c.pos[w, s].numpy(),
                        c.frame[w, s, 0].numpy())
        return out

    names = set()
    for w in range(5):
        ours, theirs = touching(warp, w), touching(mj, w)
        assert ours.keys() == theirs.keys() and len(ours) > 1, w
        for key, (geom, dist, pos, normal) in theirs.items():
            assert ours[key][0] == geom
            assert abs(ours[key][1] - dist) < 1e-9
            np.testing.assert_allclose(ours[key][2], pos, atol=1e-9)
            np.testing.assert_allclose(ours[key][3], normal, atol=1e-9)
            names |= {mjm.geom(g).name for g in geom}
    assert {"floor", "trunk", "FR_foot"} <= names and any("calf" in n or "thigh" in n for n in names)


# -------------------------------------------------------------- (d) per-world friction
SLIDER = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.05"><freejoint/><geom type="box" size="0.1 0.1 0.05"/></body>
  </worldbody>
</mujoco>"""


def test_per_world_friction_takes_effect():
    mjm = mujoco.MjModel.from_xml_string(SLIDER)
    W, steps = 3, 200
    qpos = np.tile(mjm.qpos0, (W, 1))
    qvel = np.zeros((W, mjm.nv))
    qvel[:, 0] = 2.0
    sim = MujocoSim(mjm, W)
    friction = per_world_param(sim, "cpair_friction")  # envs.base dispatches to the backend
    assert friction.shape == (W, 1, 5)
    np.testing.assert_array_equal(friction[0].numpy(), [[1.0, 1.0, 0.005, 0.0001, 0.0001]])
    mus = [0.2, 1.0]
    for w, mu in enumerate(mus):  # world 2 keeps the model's friction
        friction[w, :, :2] = mu
    sim.qpos, sim.qvel = qpos, qvel
    sim.step(steps)
    slid = sim.qpos[:, 0].numpy()
    assert slid[0] > 2 * slid[1] > 0.1, f"slid {slid}"
    # each world equals MuJoCo run with that friction compiled into the model (bit for bit)
    for w, mu in enumerate([*mus, 1.0]):
        ref = reference(mjm, qpos[w:w + 1], qvel[w:w + 1], np.zeros((1, 0)), steps, friction=[mu, 0.005, 0.0001])
        np.testing.assert_array_equal(np.concatenate([sim.qpos[w], sim.qvel[w]]), ref[0])


# ------------------------------------------------------------- (e) environments, scripts
def test_quadruped_env_on_mujoco_steps_and_resets():
    env = envs.make("quadruped", num_envs=4, device="cpu", seed=0, episode_length_s=0.1, backend="mujoco")
    assert isinstance(env.sim, MujocoSim) and env.sim.qpos.dtype == torch.float64
    obs = env.reset()
    assert obs["policy"].dtype == torch.float32 and obs["policy"].shape == (4, 48)
    frictions = env.friction[:, 0, 0].clone()
    assert len(set(frictions.tolist())) == 4  # randomised per world, in MuJoCo's contacts
    timed_out = False
    for _ in range(8):  # 5 steps per episode: every world times out and is reset
        obs, reward, terminated, time_outs, extras = env.step(torch.zeros(4, 12))
        assert torch.isfinite(reward).all() and torch.isfinite(obs["critic"]).all()
        timed_out |= bool(time_outs.any())
    assert timed_out and not torch.equal(env.friction[:, 0, 0], frictions)
    state = env.state_dict()
    assert "model.cpair_friction" in state["tensors"]
    env.load_state_dict(state)


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.mark.slow  # 27 s cold
def test_train_and_play_with_the_mujoco_backend(tmp_path):
    train_dir, play_dir = tmp_path / "train", tmp_path / "play"
    result = run("scripts/train.py", "task=cartpole", "num_envs=8", "max_iterations=1", "sim.backend=mujoco",
                 f"hydra.run.dir={train_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    checkpoint = next(train_dir.glob("model_*.pt"))
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={checkpoint}", "num_envs=4", "sim.backend=mujoco",
                 f"hydra.run.dir={play_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((play_dir / "metrics.json").read_text())
    assert metrics["backend"] == "mujoco" and metrics["device"] == "cpu"
    assert 0 < metrics["mean_episode_length"] <= 250 and np.isfinite(metrics["mean_return"])


# ------------------------------------------------------------------------------- (f) errors
def test_errors_name_the_problem():
    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED))
    with pytest.raises(ValueError, match="CPU only.*cuda"):
        make_sim(mjm, 2, device="cuda", backend="mujoco")
    with pytest.raises(ValueError, match="unknown simulation backend 'physx'; available: warp, mujoco"):
        envs.make("cartpole", num_envs=2, device="cpu", backend="physx")
    assert BACKENDS == ("warp", "mujoco")
    sim = make_sim(mjm, 2, device="cpu", backend="mujoco")
    with pytest.raises(UnsupportedFeatureError, match="cannot give 'dof_invweight0' a value per world; "
                                                      "supported: cpair_friction, body_mass"):
        per_world_param(sim, "dof_invweight0")  # derived: set_const recomputes it
    with pytest.raises(AttributeError, match="efc_J"):
        sim.view("efc_J")
    with pytest.raises(AttributeError, match="Sim.efc_force"):
        sim.efc_force  # noqa: B018
    with pytest.raises(AttributeError, match="struct"):
        sim.model.struct  # noqa: B018
    with pytest.raises(TypeError, match="diff_step needs a simrl.Sim"):
        from simrl import diff_step
        diff_step(sim, sim.qpos, sim.qvel, sim.ctrl)
    ant = make_sim(mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "ant.xml")), 2, backend="mujoco")
    with pytest.raises(UnsupportedFeatureError, match="RK4"):
        per_world_param(ant, "cpair_friction")


def test_config_checks_the_backend():
    from hydra import compose, initialize

    from simrl.errors import ConfigError
    from simrl.rl.config import resolve_device
    from tasks.config import register, validate

    for script in ("play", "train"):  # the scripts' configs
        register(script)

    def check(*overrides, script="play"):
        with initialize(version_base=None):
            validate(compose(script, overrides=["task=cartpole", *overrides]), script)

    check("sim.backend=mujoco")
    check("sim.backend=warp")
    with pytest.raises(ConfigError, match="sim.backend must be one of 'warp', 'mujoco', got 'bullet'"):
        check("sim.backend=bullet")
    with pytest.raises(ConfigError, match="CPU only"):
        check("sim.backend=mujoco", "device=cuda:0")
    with pytest.raises(ConfigError, match="unknown key sim.backnd"):
        check("+sim.backnd=mujoco")
    with pytest.raises(ConfigError, match="task.env.backend: set the top-level key sim.backend=... instead"):
        check("+task.env.backend=mujoco")
    check("sim.backend=mujoco", script="train")
    with pytest.raises(ConfigError, match="algo=shac .* sim.backend=mujoco cannot"):
        check("sim.backend=mujoco", "algo=shac", script="train")
    assert resolve_device("auto", "mujoco") == "cpu"
