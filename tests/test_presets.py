"""Robot presets (envs/presets.py, `task.robot.preset=NAME`): the section of a Menagerie robot on
MJCF of the project's own with Menagerie's names (tests/data), the gains of the published motor
data, the user's keys over the preset's, and errors naming the preset and the missing names."""

import math

import numpy as np
import pytest
import torch

import envs
import tasks
from envs import presets
from envs.robot import RobotCfg
from simrl.errors import ConfigError
from tasks.config import validate

DATA = "tests/data"
W = 2 * math.pi * 10  # mjlab's servo natural frequency (rad/s)


#: the pose term's std (rad; standing, walking, running) of each joint by its name without side and
#: suffix: mjlab's G1 velocity task (config/g1/env_cfgs.py); for H1 the G1 joint of the same role
#: (its ankle pitches, its torso turns about the vertical as G1's waist yaw)
G1_POSE_STD = {
    "hip_pitch": (0.05, 0.3, 0.5), "hip_roll": (0.05, 0.15, 0.2), "hip_yaw": (0.05, 0.15, 0.2),
    "knee": (0.05, 0.35, 0.6), "ankle_pitch": (0.05, 0.25, 0.35), "ankle_roll": (0.05, 0.1, 0.15),
    "waist_yaw": (0.05, 0.2, 0.3), "waist_roll": (0.05, 0.08, 0.08), "waist_pitch": (0.05, 0.1, 0.2),
    "shoulder_pitch": (0.05, 0.15, 0.5), "shoulder_roll": (0.05, 0.15, 0.2), "shoulder_yaw": (0.05, 0.1, 0.15),
    "elbow": (0.05, 0.15, 0.35), "wrist_roll": (0.05, 0.3, 0.3), "wrist_pitch": (0.05, 0.3, 0.3),
    "wrist_yaw": (0.05, 0.3, 0.3)}
H1_POSE_STD = {**{k: G1_POSE_STD[k] for k in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "shoulder_pitch",
                                              "shoulder_roll", "shoulder_yaw", "elbow")},
               "ankle": G1_POSE_STD["ankle_pitch"], "torso": G1_POSE_STD["waist_yaw"]}


def _role(joint: str) -> str:
    """A Menagerie G1 or H1 joint's name without its side and `_joint` suffix."""
    return joint.removeprefix("left_").removeprefix("right_").removesuffix("_joint")


def _task_env(overrides: list[str], num_envs: int = 2):
    """The env scripts/train.py builds from the Hydra configuration with `overrides`, validated."""
    from hydra import compose, initialize

    from tasks.config import env_kwargs, register

    register("train")
    with initialize(version_base=None):
        cfg = compose("train", overrides=overrides)
    validate(cfg)
    return envs.make(cfg.task.name, num_envs=num_envs, device="cpu", seed=0, **env_kwargs(cfg.task))


def _joint_names(env, columns) -> list[str]:
    """The names of the joints at `columns` of qpos[7:]."""
    m = env.sim.mj_model
    by_column = {int(m.jnt_qposadr[j]) - 7: m.joint(j).name for j in range(m.njnt)}
    return [by_column[int(c)] for c in columns]


def _gains(env) -> dict[str, tuple[float, float, float]]:
    """{joint: (kp, kv, force limit)} of the compiled model's actuators."""
    m = env.sim.mj_model
    return {m.joint(int(m.actuator_trnid[a, 0])).name: (m.actuator_gainprm[a, 0], -m.actuator_biasprm[a, 2],
                                                         m.actuator_forcerange[a, 1]) for a in range(m.nu)}


def test_go1_preset_stands_on_menagerie_names_with_mjlab_gains():
    env = envs.make("quadruped", num_envs=2, device="cpu", seed=0,
                    robot={"preset": "go1", "mjcf": f"{DATA}/go1_bare.xml"})
    m = env.sim.mj_model
    gains = _gains(env)
    hip, knee = 0.000111842 * 6 ** 2, 0.000111842 * 9 ** 2  # Unitree's rotor inertia x gear ratio^2
    np.testing.assert_allclose(gains["FR_thigh_joint"], (hip * W ** 2, 4 * hip * W, 23.7), rtol=1e-12)
    np.testing.assert_allclose(gains["RL_calf_joint"], (knee * W ** 2, 4 * knee * W, 35.55), rtol=1e-12)
    assert gains["FR_thigh_joint"][0] == pytest.approx(15.895, abs=1e-3)  # mjlab's Go1 hip stiffness
    assert m.dof_armature[m.joint("RL_calf_joint").dofadr[0]] == pytest.approx(knee)
    np.testing.assert_allclose(env.robot.qpos0[:10], [0, 0, 0.27, 1, 0, 0, 0, 0, 0.9, -1.8])  # Menagerie's home
    # the IMU sensors on Menagerie's `imu` site; the policy reads them (observation_source sensors)
    assert {m.sensor(i).name for i in range(m.nsensor)} == {"imu_linvel", "imu_gyro", "imu_quat"}
    assert m.sensor("imu_gyro").objid[0] == m.site("imu").id
    assert [[m.geom(g).name for g in foot] for foot in env.robot.feet] == [["FR"], ["FL"], ["RR"], ["RL"]]
    assert {m.geom(g).bodyid[0] for g in env.robot.undesired_geoms} == {m.body(f"{leg}_thigh").id
                                                                       for leg in ("FR", "FL", "RR", "RL")}
    env.reset()
    for _ in range(50):  # 1 s on the preset's servos, zero actions: it stands
        _, _, terminated, _, _ = env.step(torch.zeros(2, 12))
        assert not terminated.any()
    assert (env.sim.qpos[:, 2] > 0.2).all()


def test_go2_preset_names_its_base_and_knee_motor():
    env = envs.make("quadruped", num_envs=1, device="cpu", robot={"preset": "go2", "mjcf": f"{DATA}/go2_bare.xml"})
    knee = 0.000111842 * (6.33 * 1.92) ** 2
    np.testing.assert_allclose(_gains(env)["FL_calf_joint"], (knee * W ** 2, 4 * knee * W, 45.43), rtol=1e-12)
    assert env.robot_cfg.base_body == "base" and env.sim.mj_model.body(env.robot.base_body).name == "base"


@pytest.mark.parametrize("preset,joints", [("g1", 29), ("h1", 19)])
def test_humanoid_presets_load_menagerie_names(preset, joints):
    robot = {"preset": preset, "mjcf": f"{DATA}/{preset}_names.xml"}
    env = envs.make("humanoid", num_envs=1, device="cpu", robot=robot)
    m = env.sim.mj_model
    assert m.nu == joints and env.num_feet == 2
    gains = _gains(env)
    if preset == "g1":  # mjlab's G1: 7520-22 at the knee, two 5020s at the ankle
        np.testing.assert_allclose(gains["left_knee_joint"], (0.025101925 * W ** 2, 4 * 0.025101925 * W, 139.0))
        np.testing.assert_allclose(gains["right_ankle_roll_joint"][2], 50.0)
        assert env.robot.qpos0[2] == 0.76 and env.robot.qpos0[m.joint("left_knee_joint").qposadr[0]] == 0.669
    else:  # Isaac Lab's H1 gains, Unitree's torques
        np.testing.assert_allclose(gains["left_knee"], (200.0, 5.0, 300.0))
        np.testing.assert_allclose(gains["right_ankle"], (20.0, 4.0, 40.0))
        assert env.robot.qpos0[2] == 1.05 and env.robot.qpos0[m.joint("left_ankle").qposadr[0]] == -0.52
    # the IMU on a site added at the pelvis's origin
    assert m.site(m.sensor("imu_gyro").objid[0]).name == "pelvis_imu"
    assert m.site("pelvis_imu").bodyid[0] == m.body("pelvis").id
    env.reset()
    env.step(torch.zeros(1, joints))


@pytest.mark.parametrize("preset,expected", [("g1", G1_POSE_STD), ("h1", H1_POSE_STD)])
def test_the_humanoid_task_runs_a_humanoid_preset_with_its_pose_stds(preset, expected):
    """task=humanoid task.robot.preset=g1 (h1) as scripts/train.py builds it: the task's pose term
    takes each joint's std from the preset (mjlab's G1 values by joint), and its reward on the
    state after a few steps is exp(-mean(((q - default) / std of the command's regime)^2)) dt."""
    env = _task_env(["task=humanoid", f"task.robot.preset={preset}", f"task.robot.mjcf={DATA}/{preset}_names.xml"])
    assert "pose" in env.reward_terms
    pose = env.reward_terms["pose"].func
    joints = _joint_names(env, pose.columns)
    assert len(joints) == {"g1": 29, "h1": 19}[preset]
    np.testing.assert_allclose(pose.std.numpy(), np.array([expected[_role(j)] for j in joints]).T, rtol=1e-6)
    env.reset()
    generator = torch.Generator().manual_seed(0)
    for _ in range(5):
        _, reward, _, _, _ = env.step(0.3 * torch.randn(2, env.num_actions, generator=generator))
        assert torch.isfinite(reward).all()
    env.commands[:] = torch.tensor([[0.0, 0.0, 0.0], [1.0, 0.0, 0.8]])  # standing; running (1.8 >= 1.5)
    q = env.sim.qpos.double().numpy()[:, 7:]
    default = env.default_joint_pos.double().numpy()
    std = np.array([[expected[_role(j)][regime] for j in joints] for regime in (0, 2)])
    columns = pose.columns.numpy()
    want = np.exp(-(((q[:, columns] - default[columns]) / std) ** 2).mean(axis=1)) * env.step_dt
    assert not np.allclose(want, env.step_dt)  # the steps moved the joints
    np.testing.assert_allclose(env.reward_terms["pose"](env).numpy(), want, rtol=1e-5)


@pytest.mark.parametrize("preset", ["g1", "h1"])
def test_humanoid_presets_name_their_joints_in_the_humanoid_terms(preset):
    """Isaac Lab's G1 and H1 joint groups (velocity/config/{g1,h1}): joint_deviation of hips' yaw
    and roll, torso and arms; dof_acc and torques of hips and knees, on the preset's names."""
    listed = {name: {"weight": -1.0} for name in ("joint_deviation", "dof_acc", "torques")}
    env = _task_env(["task=humanoid", f"task.robot.preset={preset}", f"task.robot.mjcf={DATA}/{preset}_names.xml",
                     *(f"+task.env.rewards.{name}={{weight: -1.0}}" for name in listed)])
    sides = ("left", "right")
    if preset == "g1":
        deviation = [f"{s}_{j}_joint" for s in sides for j in ("hip_roll", "hip_yaw")] + [
            "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint"] + [
            f"{s}_{j}_joint" for s in sides for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow",
                                                      "wrist_roll", "wrist_pitch", "wrist_yaw")]
        legs = [f"{s}_{j}_joint" for s in sides for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee")]
    else:
        deviation = [f"{s}_{j}" for s in sides for j in ("hip_yaw", "hip_roll")] + ["torso"] + [
            f"{s}_{j}" for s in sides for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")]
        legs = [f"{s}_{j}" for s in sides for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee")]
    assert sorted(_joint_names(env, env.reward_terms["joint_deviation"].func.columns)) == sorted(deviation)
    assert sorted(_joint_names(env, env.reward_terms["dof_acc"].func.columns)) == sorted(legs)
    m = env.sim.mj_model
    torques = env.reward_terms["torques"].func.columns
    assert sorted(m.joint(int(m.actuator_trnid[a, 0])).name for a in torques.tolist()) == sorted(legs)
    env.reset()
    for _ in range(3):
        assert torch.isfinite(env.step(torch.zeros(2, env.num_actions))[1]).all()


@pytest.mark.parametrize("preset", ["go1", "go2"])
def test_the_quadruped_task_runs_the_go_presets(preset):
    """task=quadruped task.robot.preset=go1 (go2) as scripts/train.py builds it: the task's terms
    name no joints; 0.5 s on the preset's servos with zero actions ends no episode."""
    env = _task_env(["task=quadruped", f"task.robot.preset={preset}", f"task.robot.mjcf={DATA}/{preset}_bare.xml"])
    assert env.robot_cfg.preset == preset and env.num_actions == 12 and env.num_feet == 4
    env.reset()
    for _ in range(25):
        _, reward, terminated, _, _ = env.step(torch.zeros(2, 12))
        assert torch.isfinite(reward).all() and not terminated.any()


def test_the_users_pose_stds_override_a_presets_and_name_what_matches_nothing():
    robot = {"preset": "g1", "mjcf": f"{DATA}/g1_names.xml"}
    own = {"standing": {".*": 0.1}, "walking": {".*": 0.2}, "running": {".*": 0.4}}
    env = envs.make("humanoid", num_envs=1, device="cpu", robot=robot, rewards={"pose": {"weight": 1.0, "std": own}})
    np.testing.assert_allclose(env.reward_terms["pose"].func.std[:, 0].numpy(), [0.1, 0.2, 0.4])
    # the project's humanoid's table on G1's names: its patterns lack the `_joint` suffix
    from envs.humanoid import POSE_STD

    with pytest.raises(ValueError, match=r"rewards.pose.std.walking: no hinge or slide joint of .*g1_names.xml is "
                                         r"named '\.\*_hip_pitch' or '\.\*_hip_roll' or .*; its joints: "
                                         r"left_hip_pitch_joint, "):
        envs.make("humanoid", num_envs=1, device="cpu", robot=robot, rewards={"pose": {"weight": 1.0, "std": POSE_STD}})


def test_a_preset_refuses_a_file_without_its_names():
    with pytest.raises(ValueError, match=r"robot.preset=go1: .*quadruped.xml lacks names of Menagerie's "
                                         r"unitree_go1/go1.xml .*: joints FR_hip_joint, FR_thigh_joint, .*, "
                                         r"RL_calf_joint; geoms FR, FL, RR, RL \(point robot.mjcf"):
        envs.make("quadruped", num_envs=1, device="cpu", robot={"preset": "go1"})  # the project's own quadruped
    with pytest.raises(ValueError, match="robot.preset=h1: .*g1_names.xml lacks .*joints left_hip_yaw, "):
        envs.make("humanoid", num_envs=1, device="cpu", robot={"preset": "h1", "mjcf": f"{DATA}/g1_names.xml"})
    with pytest.raises(ValueError, match="robot.preset: no preset 'go3'; presets: go1, go2, g1, h1"):
        RobotCfg.from_dict({"preset": "go3"})


def test_the_users_keys_override_the_preset():
    task_robot = dict(tasks.load("quadruped").robot)  # the shipped section, as Hydra composes it
    cfg = RobotCfg.from_dict({**task_robot, "preset": "go1", "mjcf": "x.xml"}, envs.quadruped.QUADRUPED)
    assert cfg.foot_geoms == ("FR", "FL", "RR", "RL") and cfg.base_body == "trunk"  # the task's own lost
    assert cfg.termination_bodies == ("trunk", ".._hip") and cfg.init_state.pos == (0.0, 0.0, 0.27)
    own = {**task_robot, "preset": "go1", "mjcf": "x.xml", "foot_geoms": [], "foot_bodies": [".._calf"],
           "action_scale": 0.5,
           "actuators": [{"joints": [".*"], "stiffness": 40.0, "damping": 1.0}]}
    cfg = RobotCfg.from_dict(own, envs.quadruped.QUADRUPED)
    assert cfg.foot_bodies == (".._calf",) and cfg.foot_geoms == () and cfg.action_scale == 0.5
    assert [g.stiffness for g in cfg.actuators] == [40.0] and cfg.imu_site == "imu" and cfg.preset == "go1"
    cfg = RobotCfg.from_dict({"preset": "go1", "keyframe": "stand"})  # a keyframe of the user's: no init_state
    assert cfg.keyframe == "stand" and cfg.init_state is None
    # a key set to the task's own value is the task's, not the user's: the preset's holds
    assert RobotCfg.from_dict({"preset": "go1", "keyframe": "home"}).keyframe is None


def test_the_configuration_names_an_unknown_preset():
    from hydra import compose, initialize

    from tasks.config import register

    register("train")
    with initialize(version_base=None):
        good = compose("train", overrides=["task=humanoid", "task.robot.preset=g1", "task.robot.mjcf=g1.xml"])
        cfg = compose("train", overrides=["task=quadruped", "task.robot.preset=go3"])
    validate(good)
    with pytest.raises(ConfigError, match="task.robot.preset.*null or a preset of envs/presets.py: go1, go2, g1, h1"):
        validate(cfg)


def test_every_preset_names_a_menagerie_file_and_a_task():
    for name, preset in presets.PRESETS.items():
        assert preset.menagerie_file.startswith(f"unitree_{name}/{name}.xml")
        assert set(preset.tasks) <= set(tasks.available())
        RobotCfg.from_dict({"preset": name})  # its section is a valid robot section
