"""Actuators and the start pose from the robot section (envs/robot.py: `robot.actuators`,
`robot.init_state`; issue 51 items 1 and 2).

References: the project's quadruped with its actuators and keyframe taken out of the MJCF and
given in the robot section instead must run the quadruped task bit for bit; on a robot file as
Menagerie and mjlab publish them (tests/data/go1_bare.xml: Go1's names, no actuators, no
keyframe) the actuators' forces are MuJoCo's own for the position servos (mj_forward of the
compiled model) and Isaac Lab's closed forms for pd and dc_motor, and the MuJoCo backend runs the
same actuators; init_state places the robot where it says. Every refusal names its problem.
"""

import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat

import envs
from envs import ASSETS_DIR
from simrl.errors import ConfigError
from tasks.config import validate

GO1 = Path(__file__).resolve().parent / "data" / "go1_bare.xml"
QUADRUPED_XML = (ASSETS_DIR / "quadruped.xml").read_text()
NO_PUSH = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True}}

#: Go1's standing pose (the project quadruped's home keyframe under Go1's joint names)
GO1_STAND = {"pos": [0.0, 0.0, 0.33], "joint_pos": {"F._thigh_joint": 0.8, "R._thigh_joint": 1.0,
                                                      ".*_calf_joint": -1.5}}


def go1(actuators, init_state=None, **section):
    """The robot section of tests/data/go1_bare.xml with `actuators` (groups) and `init_state`."""
    return {"mjcf": str(GO1), "base_body": "trunk", "keyframe": None, "foot_geoms": ["FR", "FL", "RR", "RL"],
            "termination_geoms": ["trunk", ".._hip"], "undesired_geoms": [".._thigh", ".._calf"],
            "actuators": actuators, "init_state": init_state or GO1_STAND, **section}


def make_go1(robot, num_envs=2, **kwargs):
    kwargs = {"observation_source": "state", "randomization": {}, "device": "cpu", "seed": 0, **kwargs}
    return envs.make("quadruped", num_envs=num_envs, robot=robot, **kwargs)


def bare_quadruped(tmp_path) -> Path:
    """quadruped.xml without its actuators, keyframe and joint armature."""
    text = re.sub(r"\s*<actuator>.*?</actuator>", "", QUADRUPED_XML, flags=re.S)
    text = re.sub(r"\s*<keyframe>.*?</keyframe>", "", text, flags=re.S)
    text = text.replace('armature="0.01" ', "")
    path = tmp_path / "bare.xml"
    path.write_text(text)
    assert mujoco.MjModel.from_xml_path(str(path)).nu == 0
    return path


def test_config_actuators_and_init_state_reproduce_the_mjcf_they_replace(tmp_path):
    """quadruped.xml's position servos (kp 30, kv 1, +-25 / +-35 N m, armature 0.01) and home
    keyframe, given as robot.actuators and robot.init_state on the MJCF without them: the same
    compiled actuators and default pose, and the quadruped task's observations, rewards and
    terminations over 10 steps of random actions, bit for bit."""
    robot = {"mjcf": str(bare_quadruped(tmp_path)), "keyframe": None,
             "actuators": [{"joints": [".*_hip_abduction", ".*_hip_flexion"], "type": "position", "stiffness": 30,
                            "damping": 1, "effort_limit": 25, "armature": 0.01},
                           {"joints": [".*_knee"], "stiffness": 30, "damping": 1, "effort_limit": 35,
                            "armature": 0.01}],
             "init_state": {"pos": [0, 0, 0.33], "rot": [1, 0, 0, 0],
                            "joint_pos": {"F._hip_flexion": 0.8, "R._hip_flexion": 1.0, ".*_knee": -1.5}}}
    ours = envs.make("quadruped", num_envs=3, device="cpu", seed=5, robot=robot)
    ref = envs.make("quadruped", num_envs=3, device="cpu", seed=5)
    a, b = ours.sim.mj_model, ref.sim.mj_model
    assert a.nu == b.nu == 12
    for field in ("actuator_trnid", "actuator_gainprm", "actuator_biasprm", "actuator_forcerange",
                  "actuator_forcelimited", "actuator_gear", "dof_armature", "dof_frictionloss"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field), err_msg=field)
    assert [a.actuator(i).name for i in range(a.nu)] == [b.actuator(i).name for i in range(b.nu)]
    np.testing.assert_array_equal(ours.robot.qpos0, ref.robot.qpos0)
    assert torch.equal(ours.default_targets, ref.default_targets)
    gen = torch.Generator().manual_seed(1)
    obs_a, obs_b = ours.reset(), ref.reset()
    assert torch.equal(obs_a["policy"], obs_b["policy"])
    for _ in range(10):
        actions = torch.rand(3, 12, generator=gen) * 2 - 1
        (obs_a, rew_a, term_a, out_a, _), (obs_b, rew_b, term_b, out_b, _) = ours.step(actions), ref.step(actions)
        assert torch.equal(obs_a["policy"], obs_b["policy"]) and torch.equal(obs_a["critic"], obs_b["critic"])
        assert torch.equal(rew_a, rew_b) and torch.equal(term_a, term_b) and torch.equal(out_a, out_b)
    assert torch.equal(ours.sim.qpos, ref.sim.qpos)


def pre_step(env, actions):
    """One environment step (decimation 1: one physics step) from the reset state; returns the
    state it started from (qpos, qvel as float64 numpy) and the joint targets it applied (the
    controls: default pose + 0.25 action, clipped to the joint range, computed in float32)."""
    env.reset()
    qpos, qvel = env.sim.qpos.double().numpy().copy(), env.sim.qvel.double().numpy().copy()
    mjm = env.sim.mj_model
    joints = mjm.actuator_trnid[:, 0]
    target = np.clip(env.robot.qpos0[mjm.jnt_qposadr[joints]] + 0.25 * actions.double().numpy(),
                     mjm.jnt_range[joints, 0], mjm.jnt_range[joints, 1])
    env.step(actions)
    ctrl = env.sim.ctrl.double().numpy()
    np.testing.assert_allclose(ctrl, target, rtol=0, atol=1e-6)
    return qpos, qvel, ctrl


def test_position_groups_are_mujocos_servos():
    """Position groups compile to MuJoCo position servos with the groups' gains, limits, armature
    and frictionloss; the forces simrl applies in a step are MuJoCo's actuator_force of the
    compiled model at that state (mj_forward) and the closed form kp (target - q) - kv qd clipped
    to the effort limit; MuJoCo itself (sim.backend=mujoco) runs the same trajectory."""
    groups = [{"joints": [".*_hip_joint"], "stiffness": 20, "damping": 0.5, "effort_limit": 3.0, "armature": 0.005},
              {"joints": [".*_thigh_joint", ".*_calf_joint"], "type": "position", "stiffness": 40, "damping": 1.0,
               "armature": 0.02, "frictionloss": 0.1}]
    env = make_go1(go1(groups), decimation=1, dtype="float64")
    mjm = env.sim.mj_model
    names = [mjm.actuator(a).name for a in range(mjm.nu)]
    assert names == [f"{leg}_{part}_joint" for leg in ("FR", "FL", "RR", "RL") for part in ("hip", "thigh", "calf")]
    hips = [a for a, n in enumerate(names) if n.endswith("_hip_joint")]
    legs = [a for a in range(mjm.nu) if a not in hips]
    dofs = mjm.jnt_dofadr[mjm.actuator_trnid[:, 0]]
    np.testing.assert_array_equal(mjm.actuator_gainprm[hips, 0], 20.0)
    np.testing.assert_array_equal(mjm.actuator_biasprm[legs, :3], [[0.0, -40.0, -1.0]] * len(legs))
    np.testing.assert_array_equal(mjm.actuator_forcerange[hips], [[-3.0, 3.0]] * 4)
    assert mjm.actuator_forcelimited[hips].all() and not mjm.actuator_forcelimited[legs].any()
    np.testing.assert_array_equal(mjm.dof_armature[dofs[hips]], 0.005)
    np.testing.assert_array_equal(mjm.dof_armature[dofs[legs]], 0.02)
    np.testing.assert_array_equal(mjm.dof_frictionloss[dofs[legs]], 0.1)
    np.testing.assert_array_equal(mjm.dof_frictionloss[dofs[hips]], 0.0)

    actions = torch.tensor([[1.0, -1.0, 0.5] * 4, [-1.0, 1.0, -0.5] * 4], dtype=torch.float32)
    qpos, qvel, target = pre_step(env, actions)
    ours = env.sim.view("actuator_force").double().numpy()
    for w in range(2):
        d = mujoco.MjData(mjm)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[w], qvel[w], target[w]
        mujoco.mj_forward(mjm, d)
        np.testing.assert_allclose(ours[w], d.actuator_force, rtol=1e-12, atol=1e-12)
        q, qd = qpos[w, mjm.jnt_qposadr[mjm.actuator_trnid[:, 0]]], qvel[w, dofs]
        kp, kv = np.where(np.isin(np.arange(12), hips), 20.0, 40.0), np.where(np.isin(np.arange(12), hips), 0.5, 1.0)
        closed = kp * (target[w] - q) - kv * qd
        closed[hips] = np.clip(closed[hips], -3.0, 3.0)
        np.testing.assert_allclose(ours[w], closed, rtol=1e-12, atol=1e-12)
    assert (np.abs(ours[:, hips]) == 3.0).any()  # the limit is reached

    mj = make_go1(go1(groups), decimation=1, dtype="float64", backend="mujoco")
    pre_step(mj, actions)  # the same history: the same reset draws next
    np.testing.assert_allclose(mj.sim.view("actuator_force").numpy(), ours, rtol=1e-12, atol=1e-12)
    gen = torch.Generator().manual_seed(2)
    env.reset(), mj.reset()
    for _ in range(20):
        actions = torch.rand(2, 12, generator=gen) * 2 - 1
        env.step(actions), mj.step(actions)
        np.testing.assert_allclose(env.sim.view("actuator_force").numpy(), mj.sim.view("actuator_force").numpy(),
                                   rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(env.sim.qpos.numpy(), mj.sim.qpos.numpy(), rtol=0, atol=1e-6)


def test_pd_and_dc_motor_groups_are_isaac_labs_explicit_models():
    """pd and dc_motor groups: the torques simrl applies are Isaac Lab's IdealPD and DCMotor
    closed forms of the state the step started from (envs/actuators.py), the compiled servos are
    switched off, and MuJoCo (sim.backend=mujoco) applies the same torques along the same
    trajectory."""
    groups = [{"joints": [".*_hip_joint", ".*_thigh_joint"], "type": "pd", "stiffness": 25, "damping": 0.6,
               "effort_limit": 4.0},
              {"joints": [".*_calf_joint"], "type": "dc_motor", "stiffness": 30, "damping": 0.8, "effort_limit": 9.0,
               "saturation_effort": 8.0, "velocity_limit": 0.5, "armature": 0.01}]
    env = make_go1(go1(groups), decimation=1, dtype="float64")
    mjm = env.sim.mj_model
    assert env.actuator_model.type == "dc_motor"
    assert not mjm.actuator_gainprm.any() and not mjm.actuator_biasprm.any()  # the servos add nothing
    calves = [a for a in range(mjm.nu) if mjm.actuator(a).name.endswith("_calf_joint")]
    dofs = mjm.jnt_dofadr[mjm.actuator_trnid[:, 0]]
    actions = torch.tensor([[1.0, -1.0, 1.0] * 4, [-1.0, 1.0, -1.0] * 4], dtype=torch.float32)
    qpos, qvel, target = pre_step(env, actions)
    q, qd = qpos[:, mjm.jnt_qposadr[mjm.actuator_trnid[:, 0]]], qvel[:, dofs]
    is_calf = np.isin(np.arange(12), calves)
    tau = np.where(is_calf, 30.0, 25.0) * (target - q) - np.where(is_calf, 0.8, 0.6) * qd
    expected = np.clip(tau, -4.0, 4.0)  # IdealPDActuator
    # DCMotor: the torque-speed curve, within +-effort_limit
    top = np.minimum(np.clip(8.0 * (1.0 - qd / 0.5), 0.0, None), 9.0)
    bottom = np.maximum(np.clip(8.0 * (-1.0 - qd / 0.5), None, 0.0), -9.0)
    expected[:, calves] = np.clip(tau, bottom, top)[:, calves]
    torque = env.actuator_model.torque.numpy()
    np.testing.assert_allclose(torque, expected, rtol=1e-12, atol=1e-12)
    assert (np.abs(np.clip(tau, -9.0, 9.0) - torque)[:, calves] > 0.5).any()  # the curve binds, not only the limit
    np.testing.assert_allclose(env.sim.qfrc_applied.numpy()[:, dofs], torque, rtol=0, atol=0)

    mj = make_go1(go1(groups), decimation=1, dtype="float64", backend="mujoco")
    pre_step(mj, actions)  # the same history: the same reset draws next
    np.testing.assert_allclose(mj.actuator_model.torque.numpy(), torque, rtol=1e-12, atol=1e-12)
    gen = torch.Generator().manual_seed(3)
    env.reset(), mj.reset()
    for _ in range(20):
        actions = torch.rand(2, 12, generator=gen) * 2 - 1
        env.step(actions), mj.step(actions)
        np.testing.assert_allclose(env.actuator_model.torque.numpy(), mj.actuator_model.torque.numpy(), rtol=1e-6,
                                   atol=1e-6)
    np.testing.assert_allclose(env.sim.qpos.numpy(), mj.sim.qpos.numpy(), rtol=0, atol=1e-6)


def test_init_state_places_the_robot():
    """init_state's base position and orientation (a random heading about z added at each reset,
    as for a keyframe), the joint positions its keys match, qpos0 for the joints no key matches,
    and its joint velocities (plus the reset's +-0.1 noise)."""
    rot = axis_angle_quat([1.0, 0.0, 0.0], 0.3)
    state = {"pos": [0.1, -0.2, 0.45], "rot": (rot * 2.0).tolist(),  # normalised
             "joint_pos": {"FR_thigh_joint": 0.7, "(FL|RR|RL)_thigh_joint": 1.1, ".*_calf_joint": -1.6},
             "joint_vel": {"FR_calf_joint": 2.0}}
    groups = [{"joints": [".*"], "stiffness": 30, "damping": 1}]
    env = make_go1(go1(groups, state), num_envs=4, joint_pos_noise=0.0)
    mjm = env.sim.mj_model
    home = np.zeros(mjm.nq)
    home[0:3], home[3:7] = state["pos"], rot
    for leg in ("FR", "FL", "RR", "RL"):
        home[mjm.jnt_qposadr[mjm.joint(f"{leg}_thigh_joint").id]] = 0.7 if leg == "FR" else 1.1
        home[mjm.jnt_qposadr[mjm.joint(f"{leg}_calf_joint").id]] = -1.6
    np.testing.assert_allclose(env.robot.qpos0, home, rtol=0, atol=1e-15)
    assert env.robot.key is None
    env.reset()
    qpos, qvel = env.sim.qpos.double().numpy(), env.sim.qvel.double().numpy()
    np.testing.assert_allclose(qpos[:, 7:], np.tile(home[7:], (4, 1)), rtol=0, atol=1e-6)
    np.testing.assert_allclose(qpos[:, 0:3], np.tile(home[0:3], (4, 1)), rtol=0, atol=1e-6)
    # the orientation: the heading about world z times rot, so gravity in the base frame is rot's
    down = np.zeros(3)
    mujoco.mju_rotVecQuat(down, np.array([0.0, 0.0, -1.0]), rot * np.array([1, -1, -1, -1]))
    for w in range(4):
        seen = np.zeros(3)
        mujoco.mju_rotVecQuat(seen, np.array([0.0, 0.0, -1.0]), qpos[w, 3:7] * np.array([1, -1, -1, -1]))
        np.testing.assert_allclose(seen, down, atol=1e-6)
    assert len({round(float(qpos[w, 6]), 4) for w in range(4)}) == 4  # the headings differ
    fr_calf = mjm.jnt_dofadr[mjm.joint("FR_calf_joint").id]
    assert (np.abs(qvel[:, fr_calf] - 2.0) <= 0.1).all()
    others = np.delete(qvel, fr_calf, axis=1)
    assert (np.abs(others) <= 0.1).all()


BALL = GO1.read_text().replace('<joint name="FR_hip_joint" class="hip"/>',
                               '<joint name="FR_hip_joint" type="ball"/>')


@pytest.mark.parametrize("section,message", [
    (go1([{"joints": ["FR_knee"], "stiffness": 30}]),
     r"robot.actuators\[0\]: no joint of .*go1_bare.xml is named 'FR_knee' \(a name or a regular expression\); its "
     r"hinge and slide joints: FR_hip_joint, FR_thigh_joint, FR_calf_joint, FL_hip_joint"),
    (go1([{"joints": [".*_joint"], "stiffness": 30}, {"joints": ["RL_calf_joint"], "type": "position",
                                                      "stiffness": 40}]),
     r"joint 'RL_calf_joint' of .*go1_bare.xml is matched by robot.actuators\[0\] \('.\*_joint'\) and by "
     r"robot.actuators\[1\] \('RL_calf_joint'\); a joint belongs to one of them"),
    ({"actuators": [{"joints": ["root"], "stiffness": 30}], "replace_actuators": True},
     r"robot.actuators\[0\]: joint 'root' of .*quadruped.xml \(matched by 'root'\) is a free joint, not a hinge or "
     r"slide; its hinge and slide joints: FR_hip_abduction, "),
    ("ball", r"robot.actuators\[0\]: joint 'FR_hip_joint' of .*ball.xml \(matched by '.\*'\) is a ball joint, not a "
             r"hinge or slide"),
    ({"actuators": [{"joints": [".*_knee"], "stiffness": 30}]},
     r"robot.actuators: .*quadruped.xml has actuators of its own \(FR_hip_abduction, FR_hip_flexion, .*RL_knee\) "
     r"and the robot section lists actuator groups; set robot.replace_actuators: true"),
    (go1([{"joints": [".*"], "stiffness": 30}], {"joint_pos": {"FR_knee": 0.3}}),
     r"robot.init_state.joint_pos: no joint of .*go1_bare.xml is named 'FR_knee' .*its hinge and slide joints: "
     r"FR_hip_joint"),
    (go1([{"joints": [".*"], "stiffness": 30}], {"joint_pos": {".*_calf_joint": -1.5, "FR_.*": 0.0}}),
     r"joint 'FR_calf_joint' of .*go1_bare.xml is matched by robot.init_state.joint_pos \('.\*_calf_joint'\) and "
     r"by robot.init_state.joint_pos \('FR_.\*'\)"),
    (go1([{"joints": [".*"], "stiffness": 30}], {"joint_vel": {"trunk": 1.0}}),
     r"robot.init_state.joint_vel: no joint of .*go1_bare.xml is named 'trunk'"),
    (go1([{"joints": [".*"], "stiffness": 30}], keyframe="home"),
     r"robot: give keyframe or init_state, not both \(keyframe='home'\); set keyframe: null"),
    (go1([{"joints": [".*_hip_joint"], "stiffness": 30}, {"joints": [".*_thigh_joint", ".*_calf_joint"],
                                                          "type": "pd", "stiffness": 30}]),
     r"robot.actuators: groups of type position .* and of types pd / dc_motor .* cannot be mixed"),
    (go1([{"joints": [".*"], "type": "dc_motor", "stiffness": 30, "saturation_effort": 20}]),
     r"robot.actuators\[0\].velocity_limit is required for type dc_motor"),
    (go1([{"joints": [".*"], "type": "pd", "stiffness": 30, "velocity_limit": 20}]),
     r"robot.actuators\[0\].velocity_limit belongs to type dc_motor, not pd"),
    (go1([{"joints": [".*"], "stiffness": 0}]), r"robot.actuators\[0\].stiffness: a number > 0, got 0"),
    (go1([{"joints": [".*"], "damping": 1}]), r"robot.actuators\[0\]: give stiffness"),
    (go1([{"joints": [".*"], "stiffness": 30, "kp": 3}]), r"robot.actuators\[0\]: unknown keys \['kp'\]; known: "
                                                          r"joints, type, stiffness"),
    (go1([{"joints": ["[FR"], "stiffness": 30}]), r"robot.actuators\[0\].joints: '\[FR' is not a valid regular"),
    (go1([{"joints": [".*"], "type": "servo", "stiffness": 30}]),
     r"robot.actuators\[0\].type: one of position, pd, dc_motor, got 'servo'"),
    (go1([{"joints": [".*"], "stiffness": 30}], {"rot": [0, 0, 0, 0]}), r"robot.init_state.rot: a unit quaternion"),
    (go1([{"joints": [".*"], "stiffness": 30}], {"height": 0.3}), r"robot.init_state: unknown keys \['height'\]"),
    (go1([]), r"robot: .*go1_bare.xml has no actuators: the policy's actions are actuator targets; give them in "
              r"robot.actuators"),
])
def test_the_robot_sections_actuators_and_init_state_are_checked(section, message, tmp_path):
    if section == "ball":
        path = tmp_path / "ball.xml"
        path.write_text(BALL)
        section = {**go1([{"joints": [".*"], "stiffness": 30}]), "mjcf": str(path)}
    with pytest.raises(ValueError, match=message):
        make_go1(section, num_envs=1)


def test_the_task_actuator_type_stays_mujoco_beside_groups():
    """With groups the type is theirs: task.env.actuator.type=pd besides them is refused; its
    delay still applies."""
    groups = [{"joints": [".*"], "type": "pd", "stiffness": 30, "damping": 1}]
    with pytest.raises(ValueError, match=r"task.env.actuator.type=pd: with robot.actuators each group sets its type"):
        make_go1(go1(groups), num_envs=1, actuator={"type": "pd", "kp": 10.0})
    env = make_go1(go1(groups), num_envs=1, actuator={"type": "mujoco", "delay": [1, 1]})
    assert env.actuator_model.type == "pd" and env.actuator_model.delay_range == (1, 1)


def test_the_sections_keys_are_validated_with_the_task():
    """tasks.config.validate refuses a bad actuator group or init_state before anything is built."""
    from omegaconf import OmegaConf

    import tasks

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped.yaml"))
    task["robot"]["actuators"] = [{"joints": [".*"], "type": "servo", "stiffness": 1}]
    with pytest.raises(ConfigError, match=r"task.robot: robot.actuators\[0\].type: one of position, pd, dc_motor"):
        validate({"task": task, "algo": "ppo", "seed": 0, "device": "cpu"})
    task["robot"]["actuators"] = [{"joints": [".*"], "stiffness": 1}]
    task["robot"]["init_state"] = {"pos": [0, 0, 0.3]}  # with the task's keyframe: home
    with pytest.raises(ConfigError, match=r"task.robot: robot: give keyframe or init_state, not both"):
        validate({"task": task, "algo": "ppo", "seed": 0, "device": "cpu"})
    task["robot"]["keyframe"] = None
    task["env"]["actuator"] = {"type": "pd"}
    with pytest.raises(ConfigError, match=r"task.env.actuator.type=pd: with task.robot.actuators each group sets"):
        validate({"task": task, "algo": "ppo", "seed": 0, "device": "cpu"})
    task["env"]["actuator"] = {"type": "mujoco"}
    task["robot"]["replace_actuators"] = True
    validate({"task": task, "algo": "ppo", "seed": 0, "device": "cpu"})
