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

#: the humanoid task's rewards without its pose term, whose per-joint stds name the project's humanoid's joints
HUMANOID_REWARDS = {"tracking_lin_vel": {"weight": 2.0}, "upright": {"weight": 1.0}, "action_rate": {"weight": -0.1}}


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
    env = envs.make("humanoid", num_envs=1, device="cpu", robot=robot, rewards=HUMANOID_REWARDS)
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


def test_a_preset_refuses_a_file_without_its_names():
    with pytest.raises(ValueError, match=r"robot.preset=go1: .*quadruped.xml lacks names of Menagerie's "
                                         r"unitree_go1/go1.xml .*: joints FR_hip_joint, FR_thigh_joint, .*, "
                                         r"RL_calf_joint; geoms FR, FL, RR, RL \(point robot.mjcf"):
        envs.make("quadruped", num_envs=1, device="cpu", robot={"preset": "go1"})  # the project's own quadruped
    with pytest.raises(ValueError, match="robot.preset=h1: .*g1_names.xml lacks .*joints left_hip_yaw, "):
        envs.make("humanoid", num_envs=1, device="cpu", robot={"preset": "h1", "mjcf": f"{DATA}/g1_names.xml"},
                  rewards=HUMANOID_REWARDS)
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
