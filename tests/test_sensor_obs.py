"""The quadruped's policy reads its IMU (envs/quadruped.py, `observation_source`).

References: MuJoCo's own sensordata (`mj_forward` on the same state) and the state-derived
values of `task_reference.mujoco_reference` (`mj_objectVelocity` of the trunk, its rotation
matrix). Checked: the policy's base velocities and gravity are the sensors of the state the last
physics step started from (one physics step old, as after `mj_step`), the first observation of
an episode describes the reset state, a reset leaves the other worlds bit for bit alone,
`observation_source="state"` reads the current state and changes nothing else, the MuJoCo
backend gives the same observations, a MJCF without the sensors is refused by name, and the
env's state carries the sensors.
"""

import mujoco
import numpy as np
import pytest
import torch
from task_reference import mujoco_reference

import envs
from envs import ASSETS_DIR
from envs.quadruped import DEFAULT_RANDOMIZATION, QuadrupedEnv

#: the policy's first nine columns (2 v_base, 0.25 w_base, projected gravity) and their scales
IMU = slice(0, 9)
SCALE = np.repeat([2.0, 0.25, 1.0], 3)
#: float32 engine against float64 MuJoCo on the same state (measured: 4e-7)
TOL = dict(rtol=1e-5, atol=1e-5)


@pytest.fixture(scope="module")
def mjm():
    return mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))


def imu_reference(mjm, qpos, qvel):
    """MuJoCo's IMU on each state (mj_forward): [velocimeter, gyro, world -z rotated into the
    frame of the framequat] x SCALE, [n, 9]."""
    mjd = mujoco.MjData(mjm)
    out = []
    for q, v in zip(np.asarray(qpos, np.float64), np.asarray(qvel, np.float64), strict=True):
        mjd.qpos[:], mjd.qvel[:] = q, v
        mujoco.mj_forward(mjm, mjd)
        inverse, gravity = np.zeros(4), np.zeros(3)
        mujoco.mju_negQuat(inverse, mjd.sensor("imu_quat").data)
        mujoco.mju_rotVecQuat(gravity, np.array([0.0, 0.0, -1.0]), inverse)
        out.append(np.concatenate([mjd.sensor("imu_linvel").data, mjd.sensor("imu_gyro").data, gravity]))
    return np.stack(out) * SCALE


def state_reference(mjm, qpos, qvel):
    """The same quantities from the state: the trunk's velocity in its own frame and R' (0, 0, -1)."""
    ref = mujoco_reference(mjm, np.asarray(qpos, np.float64), np.asarray(qvel, np.float64))
    return np.stack([np.concatenate([r["lin"], r["ang"], r["R"].T @ [0, 0, -1]]) for r in ref]) * SCALE


NO_PUSH = {"friction": DEFAULT_RANDOMIZATION["friction"]}  # the default randomization without pushes


def quad_env(num_envs, **kwargs):
    """A quadruped env that never terminates (episodes end by time-out only) and whose
    physics steps record the state they start from in `env.substep_starts`."""
    kwargs = {"device": "cpu", "seed": 0, "obs_noise": 0.0, "randomization": NO_PUSH, **kwargs}
    env = envs.make("quadruped", num_envs=num_envs, **kwargs)
    env._terminated = lambda: torch.zeros(num_envs, dtype=torch.bool)
    env.substep_starts = []
    step = env.sim.step

    def recording_step(n=1):
        env.substep_starts.append((env.sim.qpos.numpy().copy(), env.sim.qvel.numpy().copy()))
        step(n)

    env.sim.step = recording_step
    return env


def actions(t, n):
    return torch.randn(n, 12, generator=torch.Generator().manual_seed(t)) * 0.5


def test_the_policy_reads_the_sensors_of_the_state_the_last_physics_step_started_from(mjm):
    n = 6
    env = quad_env(n)
    env.reset()
    worst = 0.0
    for t in range(4):
        obs, *_ = env.step(actions(t, n))
        qpos, qvel = env.substep_starts[-1]  # the last of the 4 physics steps started here
        sensed = obs["policy"][:, IMU].numpy()
        expected = imu_reference(mjm, qpos, qvel)
        np.testing.assert_allclose(sensed, expected, **TOL, err_msg=f"step {t}")
        # the IMU site is the trunk's frame: the sensors are the state's values of that state
        np.testing.assert_allclose(expected, state_reference(mjm, qpos, qvel), rtol=1e-9, atol=1e-12)
        current = state_reference(mjm, env.sim.qpos.numpy(), env.sim.qvel.numpy())
        np.testing.assert_allclose(obs["critic"][:, IMU].numpy(), current, **TOL)  # privileged: the current state
        worst = max(worst, float(np.abs(sensed - current).max()))
    assert worst > 1e-2, worst  # one physics step (5 ms) of lag is visible


def test_the_first_observation_of_an_episode_describes_the_reset_state(mjm):
    """Worlds 1-5 time out and reset inside step 3; world 0 was reset after step 1, so it runs on."""
    n = 6
    env = quad_env(n, episode_length_s=0.06)  # 3 steps
    obs = env.reset()
    reset_state = env.sim.qpos.numpy(), env.sim.qvel.numpy()
    np.testing.assert_allclose(obs["policy"][:, IMU].numpy(), imu_reference(mjm, *reset_state), **TOL)
    env.step(actions(0, n))
    env._reset(torch.tensor([0]))
    env.step(actions(1, n))
    obs, _, _, time_outs, _ = env.step(actions(2, n))
    assert time_outs.tolist() == [False] + [True] * 5
    sensed = obs["policy"][:, IMU].numpy()
    np.testing.assert_allclose(sensed[1:], imu_reference(mjm, env.sim.qpos.numpy()[1:], env.sim.qvel.numpy()[1:]),
                               **TOL)
    qpos, qvel = env.substep_starts[-1]
    np.testing.assert_allclose(sensed[:1], imu_reference(mjm, qpos[:1], qvel[:1]), **TOL)  # world 0: one step old
    # the reset worlds' solver warm start stays as the reset left it (mj_forward does not write it)
    assert torch.all(env.sim.view("qacc_warmstart")[1:] == 0)
    assert torch.any(env.sim.view("qacc_warmstart")[0] != 0)


@pytest.mark.parametrize("source", ["sensors", "state"])
def test_the_critics_foot_contacts_after_a_reset_describe_the_reset_state(source):
    """With either observation source, a world reset while its feet were in the air observes the
    contacts of its reset state (the home pose) at once; the world that was not reset still sees
    its own."""
    n = 2
    env = quad_env(n, observation_source=source)
    env.joint_pos_noise = 0.0  # reset to the home pose itself
    env.reset()
    env.sim.qpos[:, 2] += 0.5  # both lifted: no foot touches during the next step
    env.sim.qvel[:] = 0.0
    obs, *_ = env.step(torch.zeros(n, 12))
    feet = slice(-4, None)  # the critic's last four columns
    assert not obs["critic"][:, feet].any()
    env._reset(torch.tensor([0]))
    obs = env.observations()
    fresh = quad_env(n, observation_source=source)
    fresh.joint_pos_noise = 0.0
    at_home = fresh.reset()["critic"][0, feet]  # the home pose's contacts: the front feet touch
    assert at_home.any()
    assert torch.equal(obs["critic"][0, feet], at_home) and not obs["critic"][1, feet].any()


def test_a_reset_leaves_the_other_worlds_alone_bit_for_bit():
    """The forward pass after world 0's reset (a time-out in step 2 of b, not of a) changes
    nothing the other worlds observe or do, in that step and later; and the env's state carries
    the sensors: a copy made from it observes the same."""
    n = 4
    a, b = quad_env(n, obs_noise=1.0), quad_env(n, obs_noise=1.0)
    a.reset(), b.reset()
    for t in range(2):
        a.step(actions(t, n)), b.step(actions(t, n))
    b.episode_length_buf[0] = b.max_episode_length - 1
    others = slice(1, None)
    for t in range(2, 6):
        obs_a, reward_a, *_ = a.step(actions(t, n))
        obs_b, reward_b, _, time_outs, _ = b.step(actions(t, n))
        assert time_outs.tolist() == [t == 2, False, False, False]
        for key in ("policy", "critic"):
            assert torch.equal(obs_a[key][others], obs_b[key][others]), (t, key)
        assert torch.equal(reward_a[others], reward_b[others]), t
        assert torch.equal(a.sim.contact.dist[others], b.sim.contact.dist[others]), t  # what the critic reads
        assert torch.equal(a.sim.qpos[others], b.sim.qpos[others]) and torch.equal(a.sim.qvel[others],
                                                                                   b.sim.qvel[others])
    assert not torch.equal(a.sim.qpos[0], b.sim.qpos[0])  # world 0 did restart
    c = quad_env(n, obs_noise=1.0, seed=5)
    c.reset()
    c.step(actions(9, n))
    c.load_state_dict(a.state_dict())
    assert "sim.sensordata" in a.state_dict()["tensors"]
    assert torch.equal(c.observations()["policy"], a.observations()["policy"])


def test_observation_source_state_reads_the_current_state_and_changes_nothing_else(mjm):
    n = 4
    state, sensors = quad_env(n, observation_source="state"), quad_env(n)
    state.reset(), sensors.reset()
    for t in range(3):
        obs, reward, *_ = state.step(actions(t, n))
        obs_s, reward_s, *_ = sensors.step(actions(t, n))
        current = state_reference(mjm, state.sim.qpos.numpy(), state.sim.qvel.numpy())
        np.testing.assert_allclose(obs["policy"][:, IMU].numpy(), current, **TOL)
        assert torch.equal(obs["policy"], obs["critic"][:, :48])  # no noise: the privileged values
        # the same physics, rewards and critic; only the policy's first nine columns differ
        assert torch.equal(state.sim.qpos, sensors.sim.qpos) and torch.equal(reward, reward_s)
        assert torch.equal(obs["critic"], obs_s["critic"]) and torch.equal(obs["policy"][:, 9:], obs_s["policy"][:, 9:])
        assert not torch.allclose(obs["policy"][:, IMU], obs_s["policy"][:, IMU], atol=1e-3)


def test_the_mujoco_backend_gives_the_same_sensor_observations(mjm):
    """Sim-to-sim: from the same state, MuJoCo itself (float64) and the engine (float32) give the
    policy the same observations, after a reset and after a step."""
    n = 3
    warp, mj = quad_env(n), quad_env(n, backend="mujoco")
    obs_w, obs_m = warp.reset(), mj.reset()
    np.testing.assert_allclose(obs_w["policy"].numpy(), obs_m["policy"].numpy(), **TOL)
    sensed = torch.cat([mj.sim.sensor("imu_linvel"), mj.sim.sensor("imu_gyro")], dim=1).numpy()
    np.testing.assert_allclose(sensed * SCALE[:6], imu_reference(mjm, mj.sim.qpos.numpy(), mj.sim.qvel.numpy())[:, :6],
                               rtol=1e-12, atol=1e-12)  # MuJoCo's own sensordata, of the reset state
    for t in range(3):
        for name in ("qpos", "qvel", "qacc_warmstart"):  # the same state (the engine's, in float64)
            mj.sim.view(name)[:] = warp.sim.view(name).double()
        obs_w, *_ = warp.step(actions(t, n))
        obs_m, *_ = mj.step(actions(t, n))
        # float32 and float64 trajectories part slightly over the 3 physics steps before the last
        # (measured: 9e-7)
        np.testing.assert_allclose(obs_w["policy"][:, IMU].numpy(), obs_m["policy"][:, IMU].numpy(), **TOL,
                                   err_msg=f"step {t}")
        qpos, qvel = mj.substep_starts[-1]
        np.testing.assert_allclose(obs_m["policy"][:, IMU].numpy(), imu_reference(mjm, qpos, qvel), rtol=1e-6,
                                   atol=1e-6)  # float32 observations of MuJoCo's float64 sensors


def test_the_mujoco_backend_has_the_engines_sensor_api(mjm):
    from simrl import Sim
    from simrl.mujoco_sim import MujocoSim

    rng = np.random.default_rng(0)
    ours, theirs = Sim.from_model(mjm, num_worlds=3, device="cpu", dtype="float64"), MujocoSim(mjm, num_worlds=3)
    qpos = np.tile(mjm.key("home").qpos, (3, 1))
    qpos[:, 3:7] = rng.normal(size=(3, 4))
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    qvel = rng.normal(size=(3, mjm.nv))
    for sim in (ours, theirs):
        sim.qpos[:], sim.qvel[:] = torch.as_tensor(qpos), torch.as_tensor(qvel)
        sim.forward()
    assert theirs.sensordata.shape == (3, mjm.nsensordata) == ours.sensordata.shape
    np.testing.assert_allclose(theirs.sensordata.numpy(), ours.sensordata.numpy(), rtol=1e-9, atol=1e-9)
    for name in ("imu_gyro", "imu_acc", "imu_quat", "imu_linvel"):
        np.testing.assert_array_equal(theirs.sensor(name).numpy(), theirs.sensordata.numpy()[:, mjm.sensor(name).adr[0]:
                                      mjm.sensor(name).adr[0] + mjm.sensor(name).dim[0]])
    np.testing.assert_allclose(theirs.sensor("imu_gyro").numpy(), qvel[:, 3:6], rtol=1e-12, atol=1e-12)
    with pytest.raises(KeyError, match="no sensor named 'gyro'.*imu_gyro"):
        theirs.sensor("gyro")


def _without(xml: str, old: str, new: str = "") -> str:
    assert old in xml
    return xml.replace(old, new)


def test_a_mjcf_without_the_imu_sensors_is_refused_by_name(tmp_path):
    xml = (ASSETS_DIR / "quadruped.xml").read_text()
    bare, renamed = tmp_path / "bare.xml", tmp_path / "renamed.xml"
    bare.write_text(_without(xml, xml[xml.index("<sensor>"):xml.index("</sensor>") + len("</sensor>")]))
    renamed.write_text(_without(xml, '<velocimeter name="imu_linvel" site="imu"/>',
                                '<framelinvel name="imu_linvel" objtype="site" objname="imu"/>'))

    class Bare(QuadrupedEnv):
        MJCF = bare

    class Renamed(QuadrupedEnv):
        MJCF = renamed

    with pytest.raises(ValueError, match=r"velocimeter sensor named 'imu_linvel', which .*bare.xml does not define "
                                         r"\(its sensors: none\).*task.env.observation_source=state"):
        Bare(num_envs=2, device="cpu")
    with pytest.raises(ValueError, match="sensor 'imu_linvel' of .*renamed.xml, which is a framelinvel, not a "
                                         "velocimeter"):
        Renamed(num_envs=2, device="cpu")
    with pytest.raises(ValueError, match="observation_source must be one of 'sensors', 'state', got 'imu'"):
        QuadrupedEnv(num_envs=2, device="cpu", observation_source="imu")
    assert Bare(num_envs=2, device="cpu", observation_source="state").reset()["policy"].shape == (2, 48)
