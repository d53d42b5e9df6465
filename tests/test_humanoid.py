"""The project's humanoid (envs/assets/humanoid23.xml) and its tasks (envs/humanoid.py,
humanoid and humanoid_rough; issue 18 item 8).

The asset against the figures its header states (MuJoCo computes mass and geometry), simrl
against MuJoCo on it (float64 trajectories, with a negative control), and the humanoid's reward
terms and terminations by hand on constructed states.
"""

import math

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat

import envs
from envs import ASSETS_DIR
from envs.mdp import rewards as reward_terms
from simrl import Sim

PATH = ASSETS_DIR / "humanoid23.xml"
DT = 0.02
NO_PUSH = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True}}
LEG = ["hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch", "ankle_roll"]
ARM = ["shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow", "wrist_roll"]
JOINTS = ([f"left_{j}" for j in LEG] + [f"right_{j}" for j in LEG] + ["waist_yaw"]
          + [f"left_{j}" for j in ARM] + [f"right_{j}" for j in ARM])


@pytest.fixture(scope="module")
def mjm():
    return mujoco.MjModel.from_xml_path(str(PATH))


def home_data(mjm):
    d = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, d, mjm.key("home").id)
    mujoco.mj_forward(mjm, d)
    return d


def test_the_humanoid_has_the_stated_figures(mjm):
    """23 joints in the stated order, one position servo per joint in the same order with
    ctrlrange = joint range, 33.0 kg, 1.31 m tall at home with both soles on the floor."""
    assert mjm.nu == 23 and mjm.nq == 30 and mjm.nv == 29
    names = [mjm.joint(j).name for j in range(1, mjm.njnt)]
    assert names == JOINTS
    for a in range(mjm.nu):
        j = mjm.actuator_trnid[a, 0]
        assert mjm.actuator(a).name == names[a] and j == a + 1
        np.testing.assert_allclose(mjm.actuator_ctrlrange[a], mjm.jnt_range[j], rtol=0, atol=1e-12)  # inheritrange
        assert mjm.actuator_gainprm[a, 0] > 0 and mjm.actuator_biasprm[a, 1] == -mjm.actuator_gainprm[a, 0]  # a servo
    assert mjm.body_subtreemass[mjm.body("pelvis").id] == pytest.approx(33.02, abs=1e-9)
    assert 30.0 <= mjm.body_subtreemass[1] <= 40.0  # the G1 class
    d = home_data(mjm)
    head = d.geom_xpos[mjm.geom("head").id, 2] + mjm.geom_size[mjm.geom("head").id, 0]
    assert head == pytest.approx(1.313, abs=2e-3)
    for side in ("left", "right"):
        sole = d.site_xpos[mjm.site(f"{side}_foot_site").id, 2]
        assert abs(sole) < 5e-4, sole  # flat on the floor, 0.2 mm deep at most
        zaxis = d.geom_xmat[mjm.geom(f"{side}_foot").id].reshape(3, 3)[:, 2]
        assert zaxis[2] > 1 - 1e-6  # level
    touching = sorted({mjm.geom(int(g)).name for c in d.contact[:d.ncon] for g in (c.geom1, c.geom2)} - {"floor"})
    assert touching == ["left_foot", "right_foot"] and d.ncon == 8  # four corners each
    assert mjm.opt.integrator == mujoco.mjtIntegrator.mjINT_IMPLICITFAST


def test_simrl_reproduces_mujoco_on_the_humanoid(mjm):
    """From home with random joint targets for 1.5 s (the feet slide and it stumbles), simrl's
    float64 qpos agrees with mj_step's to 1e-9 (measured 5.7e-14); MuJoCo with the knee servos
    10% stiffer is 0.22 away (negative control)."""
    rng = np.random.default_rng(0)
    steps = 300
    targets = mjm.key_ctrl[0] + rng.uniform(-0.3, 0.3, (steps // 25 + 1, mjm.nu))
    sim = Sim.from_model(mjm, num_worlds=2, device="cpu", dtype="float64")
    d = home_data(mjm)
    sim.qpos[:] = torch.as_tensor(d.qpos)
    sim.qvel[:] = 0.0
    stiff = mujoco.MjModel.from_xml_path(str(PATH))
    for k in (mjm.actuator("left_knee").id, mjm.actuator("right_knee").id):
        stiff.actuator_gainprm[k, 0] *= 1.1
        stiff.actuator_biasprm[k, 1] *= 1.1
    d_stiff = home_data(stiff)
    worst = worst_stiff = 0.0
    for i in range(steps):
        ctrl = np.clip(targets[i // 25], mjm.actuator_ctrlrange[:, 0], mjm.actuator_ctrlrange[:, 1])
        d.ctrl[:] = d_stiff.ctrl[:] = ctrl
        sim.ctrl[:] = torch.as_tensor(ctrl)
        mujoco.mj_step(mjm, d)
        mujoco.mj_step(stiff, d_stiff)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - d.qpos).max())
        worst_stiff = max(worst_stiff, np.abs(d_stiff.qpos - d.qpos).max())
    assert worst < 1e-9, worst
    assert worst_stiff > 1e3 * 1e-9, worst_stiff
    assert torch.equal(sim.qpos[0], sim.qpos[1])


def listing(*names, weight=-1.0):
    """A rewards section with the terms `names` at the humanoid's parameters (TERM_PARAMS)."""
    return {name: {"weight": weight} for name in names}


def humanoid_env(n, **kwargs):
    env = envs.make("humanoid", num_envs=n, device="cpu", seed=0, randomization=NO_PUSH, **kwargs)
    env.reset()
    return env


def set_state(env, qpos, qvel=None):
    env.sim.qpos[:] = torch.as_tensor(np.asarray(qpos), dtype=env.sim.qpos.dtype)
    env.sim.qvel[:] = 0.0 if qvel is None else torch.as_tensor(np.asarray(qvel), dtype=env.sim.qvel.dtype)
    env.sim.forward()
    env._base_cache = env._contact_cache = None


def test_humanoid_observations_and_feet():
    """Policy 81 = 9 + 3 + 23 + 23 + 23, critic 84 (+ friction and two feet); the feet are the
    two ankle-roll bodies' boxes, and at home both touch the floor."""
    env = humanoid_env(2)
    obs = env.observations()
    assert obs["policy"].shape == (2, 81) and obs["critic"].shape == (2, 84)
    mjm = env.sim.mj_model
    assert env.robot.feet == [[mjm.geom("left_foot").id], [mjm.geom("right_foot").id]]
    set_state(env, np.tile(mjm.key_qpos[0], (2, 1)))
    assert env.feet_contact().all()
    assert not env._terminated().any()


def test_humanoid_terminations_by_hand(mjm):
    """Pelvis, torso or head on the ground, the pelvis below 0.4 m, or upside down: terminated."""
    home = mjm.key_qpos[0].copy()
    low = home.copy()
    low[2] = 0.35  # crouched through the floor: below base_height's 0.4 m (feet deep in the floor too)
    lying = home.copy()
    lying[3:7] = axis_angle_quat([0, 1, 0], math.pi / 2)  # on its back... or front: torso on the ground
    lying[2] = 0.1
    upside = home.copy()
    upside[3:7] = axis_angle_quat([1, 0, 0], math.pi)
    upside[2] = 2.0
    states = np.stack([home, low, lying, upside])
    env = humanoid_env(4)
    set_state(env, states)
    np.testing.assert_array_equal(env._terminated().numpy(), [False, True, True, True])
    np.testing.assert_array_equal(reward_terms.termination(env).numpy(), [0.0, 1.0, 1.0, 1.0])


def test_joint_deviation_and_limit_terms_by_hand(mjm):
    """joint_deviation: sum |q - home| over hip yaw/roll, waist and arm joints (not the hip
    pitch, knees, ankles); dof_pos_limits: how far joints are beyond their ranges."""
    env = humanoid_env(3, rewards=listing("joint_deviation", "dof_pos_limits"))
    home = mjm.key_qpos[0].copy()
    q = np.tile(home, (3, 1))
    col = {name: mjm.joint(name).qposadr[0] for name in JOINTS}
    q[0, col["left_knee"]] += 0.5  # not a deviation joint
    q[1, col["left_hip_yaw"]] += 0.2
    q[1, col["right_elbow"]] -= 0.3
    q[1, col["waist_yaw"]] += 0.1
    q[2, col["left_ankle_roll"]] = 0.26 + 0.05  # beyond its range by 0.05
    q[2, col["right_knee"]] = -0.087 - 0.02  # by 0.02
    set_state(env, q)
    np.testing.assert_allclose(env.reward_terms["joint_deviation"](env).numpy(), np.array([0.0, 0.6, 0.0]) * DT,
                               atol=1e-7)
    np.testing.assert_allclose(env.reward_terms["dof_pos_limits"](env).numpy(), np.array([0.0, 0.0, 0.07]) * DT,
                               atol=1e-7)


def test_pose_and_upright_terms_by_hand(mjm):
    """pose (mjlab's variable_posture): exp(-mean over the 23 joints of ((q - home) / std)^2), the
    std of the world's command regime (|v_xy| + |yaw rate| below 0.05: standing, every joint
    0.05; from 1.5: running); upright: exp(-|gravity_xy in the pelvis frame|^2 / 0.2). Times dt."""
    from envs.humanoid import POSE_STD

    env = humanoid_env(4, rewards=listing("pose", "upright", weight=1.0))
    home = mjm.key_qpos[0].copy()
    q = np.tile(home, (4, 1))
    col = {name: mjm.joint(name).qposadr[0] for name in JOINTS}
    q[:, col["left_knee"]] += 0.2
    q[:, col["right_ankle_roll"]] -= 0.05
    q[:, col["waist_yaw"]] += 0.1
    q[1:, 3:7] = [axis_angle_quat([1, 0, 0], 0.3), axis_angle_quat([0, 1, 0], -0.5), axis_angle_quat([1, 1, 0], 0.2)]
    set_state(env, q)
    commands = np.array([[0.02, 0.0, 0.02], [0.5, 0.0, 0.0], [1.2, 0.0, 0.4], [0.0, 0.0, 0.0]])
    env.commands[:] = torch.as_tensor(commands, dtype=torch.float32)
    deviation = {"left_knee": 0.2, "right_ankle_roll": -0.05, "waist_yaw": 0.1}
    std = {"left_knee": (0.05, 0.35, 0.6), "right_ankle_roll": (0.05, 0.1, 0.15), "waist_yaw": (0.05, 0.2, 0.3)}
    assert POSE_STD["walking"][".*_knee"] == 0.35 and POSE_STD["running"]["waist_yaw"] == 0.3
    regimes = [0, 1, 2, 0]  # speeds 0.04, 0.5, 1.6, 0
    expected = [math.exp(-sum((deviation[j] / std[j][r]) ** 2 for j in deviation) / len(JOINTS)) * DT
                for r in regimes]
    np.testing.assert_allclose(env.reward_terms["pose"](env).numpy(), expected, rtol=1e-5)
    tilt = [0.0, math.sin(0.3) ** 2, math.sin(0.5) ** 2, math.sin(0.2) ** 2]  # |gravity_xy|^2 = sin^2(tilt)
    np.testing.assert_allclose(env.reward_terms["upright"](env).numpy(), np.exp(-np.array(tilt) / 0.2) * DT, rtol=1e-5)


def test_pose_term_names_the_joint_it_has_no_std_for_and_the_pattern_that_matches_none():
    std = {"standing": {".*": 0.1}, "walking": {".*_knee": 0.3}, "running": {".*": 0.5}}
    with pytest.raises(ValueError, match=r"rewards.pose.std.walking: joint 'left_hip_pitch' .* no pattern"):
        humanoid_env(1, rewards={"pose": {"weight": 1.0, "std": std}})
    std = {"standing": {".*": 0.1}, "walking": {".*_ankle": 0.2, ".*": 0.3}, "running": {".*": 0.5}}
    with pytest.raises(ValueError, match=r"rewards.pose.std.walking: no hinge or slide joint of .* is named "
                                         r"'\.\*_ankle' \(a name or a regular expression\); its joints: "
                                         r"left_hip_pitch, "):
        humanoid_env(1, rewards={"pose": {"weight": 1.0, "std": std}})
    with pytest.raises(ValueError, match="keys standing, walking, running"):
        humanoid_env(1, rewards={"pose": {"weight": 1.0, "std": {"walking": {".*": 0.3}}}})


def test_feet_slide_against_mj_object_velocity(mjm):
    """feet_slide: the horizontal speed of each foot body's centre of mass, summed over the feet
    in contact, against MuJoCo's mj_objectVelocity (world frame, at xipos) on the same moving
    state; a foot off the ground adds nothing."""
    env = humanoid_env(3, dtype="float64")
    rng = np.random.default_rng(3)
    q = np.tile(mjm.key_qpos[0], (3, 1))
    q[:, 7:] += rng.uniform(-0.2, 0.2, (3, mjm.nq - 7))
    v = rng.normal(0.0, 1.0, (3, mjm.nv))
    set_state(env, q, v)
    contact = torch.tensor([[True, True], [True, False], [False, False]])
    env.feet_contact = lambda: contact
    got = env.reward_terms["feet_slide"](env).numpy() / DT
    d = mujoco.MjData(mjm)
    expected = []
    for w in range(3):
        d.qpos[:], d.qvel[:] = q[w], v[w]
        mujoco.mj_forward(mjm, d)
        speed = []
        for side in ("left", "right"):
            res = np.zeros(6)
            mujoco.mj_objectVelocity(mjm, d, mujoco.mjtObj.mjOBJ_BODY, mjm.body(f"{side}_ankle_roll_link").id, res, 0)
            speed.append(np.linalg.norm(res[3:5]))
        expected.append(float(np.dot(speed, contact[w].numpy())))
    assert expected[1] > 0.1  # the state moves the feet
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)  # rewards are float32


def test_acc_and_torque_joints_restrict_their_terms(mjm):
    """dof_acc and torques over the task's joints only (hips and knees): a joint acceleration or
    torque of an arm changes nothing, one of a knee counts; a pattern that names no joint is an
    error that lists the model's joints."""
    env = humanoid_env(1, rewards=listing("dof_acc", "torques"))
    env._prestep_qvel = torch.zeros(1, mjm.nv)
    dof = {name: mjm.joint(name).dofadr[0] for name in JOINTS}
    env.sim.qvel[:] = 0.0
    env.sim.qvel[0, dof["right_elbow"]] = 1.0
    dof_acc, torques = env.reward_terms["dof_acc"], env.reward_terms["torques"]
    assert dof_acc(env).item() == 0.0
    env.sim.qvel[0, dof["left_knee"]] = 0.5
    np.testing.assert_allclose(dof_acc(env).item(), (0.5 / DT) ** 2 * DT, rtol=1e-6)
    torque = torch.zeros(1, mjm.nu)
    env.actuator_model.applied_torque = lambda: torque
    torque[0, mjm.actuator("left_shoulder_pitch").id] = 10.0
    assert torques(env).item() == 0.0
    torque[0, mjm.actuator("right_hip_roll").id] = 3.0
    np.testing.assert_allclose(torques(env).item(), 9.0 * DT, rtol=1e-6)
    with pytest.raises(ValueError, match=r"dof_acc.joints: no hinge or slide joint .* 'ankle'.*left_hip_pitch"):
        envs.make("humanoid", num_envs=1, device="cpu", rewards={"dof_acc": {"weight": -1.0, "joints": ["ankle"]}})


def test_biped_air_time_by_hand():
    """Isaac Lab's feet_air_time_positive_biped on a sequence of contacts: while exactly one foot
    is down, the shorter of the two feet's times in their modes, capped at 0.4 s; nothing when
    both or neither are down, or for a standing command."""
    env = humanoid_env(2, rewards=listing("feet_air_time_biped", weight=1.0))
    env.commands[:] = torch.tensor([[0.5, 0.0, 0.0], [0.05, 0.0, 0.3]])
    # contact sequence of (left, right): both down 3 steps, right lifted 30 steps, both down 2
    seq = [(True, True)] * 3 + [(True, False)] * 30 + [(True, True)] * 2
    air = np.zeros(2)
    down = np.zeros(2)
    last = np.zeros(2, bool)
    for k, contact in enumerate(seq):
        c = torch.tensor([contact, contact])
        env.feet_contact = lambda c=c: c  # the feet's contacts of this step
        got = env.reward_terms["feet_air_time_biped"](env).numpy()
        now = np.array(contact)
        air = np.where(now, 0.0, air + DT)
        down = np.where(now, np.where(last, down + DT, DT), 0.0)
        last = now
        in_mode = np.where(now, down, air)
        expected = min(in_mode.min(), 0.4) if now.sum() == 1 else 0.0
        np.testing.assert_allclose(got, [expected * DT, 0.0], atol=1e-7, err_msg=f"step {k}")
        if k == 3 + 19:  # 20 steps of single stance: the swing foot's 0.4 s reaches the cap
            assert got[0] == pytest.approx(0.4 * DT, abs=1e-7)


def test_the_humanoid_tasks_step_in_simrl_and_on_terrain():
    """humanoid and humanoid_rough from their task files: 5 steps of zero actions, finite, the
    rough one spawned on its patches with the height scan in the critic."""
    from omegaconf import OmegaConf

    import tasks
    from tasks.config import env_kwargs

    for name, critic in (("humanoid", 84), ("humanoid_rough", 84 + 187)):
        task = OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml")
        env = envs.make(name, num_envs=2, device="cpu", seed=0, **env_kwargs(task))
        obs = env.reset()
        assert obs["critic"].shape == (2, critic)
        for _ in range(5):
            obs, reward, terminated, time_outs, _ = env.step(torch.zeros(2, 23))
        assert torch.isfinite(reward).all() and torch.isfinite(obs["critic"]).all()
        assert not terminated.any()
