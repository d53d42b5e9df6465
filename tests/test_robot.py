"""A legged task on the user's own robot (envs/robot.py, `task.robot.*`, issue 18 item 7).

The reference for "any robot the section describes" is the project's quadruped itself under
other names: the same MJCF with every body, geom, joint, actuator, sensor and keyframe renamed
must give the quadruped task's observations, rewards and terminations bit for bit once its robot
section names them. Then each thing the section must check is refused with the candidates
listed, and a robot file without a floor gets one.
"""

import re

import mujoco
import numpy as np
import pytest
import torch

import envs
from envs import ASSETS_DIR
from envs.robot import RobotCfg
from simrl.errors import ConfigError
from tasks.config import validate

QUADRUPED_XML = (ASSETS_DIR / "quadruped.xml").read_text()
NO_PUSH = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True}}


def renamed_quadruped(tmp_path, floor=True):
    """quadruped.xml with its names changed (trunk -> base, FR_ -> fr_, home -> stand, imu_* ->
    body_*), written to tmp_path; without the floor when floor=False."""
    text = re.sub(r"\b(FR|FL|RR|RL)_", lambda m: m.group(1).lower() + "_", QUADRUPED_XML)
    text = text.replace('"trunk"', '"base"').replace('name="home"', 'name="stand"')
    text = text.replace('"imu_gyro"', '"body_gyro"').replace('"imu_quat"', '"body_quat"')
    text = text.replace('"imu_linvel"', '"body_linvel"')
    if not floor:
        text, n = re.subn(r'<geom name="floor"[^>]*/>', "", text)
        assert n == 1
    path = tmp_path / "my_robot.xml"
    path.write_text(text)
    return path


def my_robot_section(path):
    return {"mjcf": str(path), "base_body": "base", "keyframe": "stand", "foot_geoms": [".._foot"],
            "termination_geoms": ["base", ".._hip"], "undesired_geoms": [".._thigh", ".._calf"],
            "lin_vel_sensor": "body_linvel", "ang_vel_sensor": "body_gyro", "orientation_sensor": "body_quat"}


def rollout(env, steps=15, seed=3):
    gen = torch.Generator().manual_seed(seed)
    out = [env.reset()]
    for _ in range(steps):
        obs, reward, terminated, time_outs, _ = env.step(torch.rand(env.num_envs, env.num_actions, generator=gen) * 2
                                                         - 1)
        out.append((obs, reward, terminated, time_outs))
    return out


def test_a_renamed_quadruped_runs_the_quadruped_task_bit_for_bit(tmp_path):
    """Observations (with the IMU sensors under their new names and the feet's contacts),
    rewards and terminations over 15 steps of random actions equal the quadruped's."""
    kw = dict(num_envs=6, device="cpu", seed=0, randomization=NO_PUSH,
              terminations={"base_contact": {}, "base_height": {"min_height": 0.25}, "upside_down": {}})
    mine = envs.make("quadruped", robot=my_robot_section(renamed_quadruped(tmp_path)), **kw)
    ours = envs.make("quadruped", **kw)
    assert mine.robot.feet != [] and len(mine.foot_pairs) == 4
    assert mine.foot_pairs == ours.foot_pairs and mine.trunk_pairs == ours.trunk_pairs
    assert mine.undesired_pairs == ours.undesired_pairs
    a, b = rollout(mine), rollout(ours)
    for k, (x, y) in enumerate(zip(a[1:], b[1:], strict=True)):
        for group in ("policy", "critic"):
            assert torch.equal(x[0][group], y[0][group]), f"step {k}: {group}"
        for i in (1, 2, 3):
            assert torch.equal(x[i], y[i]), f"step {k}"


def test_a_robot_file_without_a_floor_gets_one(tmp_path):
    """A Menagerie robot file has no floor (its scene.xml adds one): the task adds a plane named
    floor_geom, and the feet land on it."""
    env = envs.make("quadruped", num_envs=2, device="cpu", seed=0, randomization=NO_PUSH,
                    robot=my_robot_section(renamed_quadruped(tmp_path, floor=False)))
    mjm = env.sim.mj_model
    floor = mjm.geom("floor")
    assert mjm.geom_type[floor.id] == mujoco.mjtGeom.mjGEOM_PLANE
    env.reset()
    for _ in range(25):
        env.step(torch.zeros(2, env.num_actions))
    feet = env.feet_contact()
    assert feet.all(), feet
    assert (env.sim.qpos[:, 2] > 0.2).all()


@pytest.mark.parametrize("section, message", [
    ({"base_body": "torso"}, r"robot.base_body: .* has no body named 'torso'; its bodies: .*trunk, FR_hip"),
    ({"base_body": "FR_hip"}, r"body 'FR_hip' of .* has no free joint; bodies with one: trunk"),
    ({"keyframe": "stand"}, r"no keyframe named 'stand'; its keyframes: 'home'"),
    ({"foot_geoms": ["foot_.*"]}, r"robot.foot_geoms: no geom of the model is named 'foot_.\*' .*its geoms: floor, "
                                  r"trunk, FR_hip"),
    ({"foot_geoms": [".._foot"], "foot_bodies": ["FR_calf"]}, r"give foot_geoms or foot_bodies, not both"),
    ({"undesired_bodies": ["thigh"]}, r"robot.undesired_bodies: no body .* named 'thigh'"),
    ({"termination_geoms": ["[trunk"]}, r"robot.termination_geoms: '\[trunk' is not a valid regular expression"),
    ({"orientation_sensor": "imu_acc"}, r"sensor 'imu_acc' .* which is a accelerometer, not a framequat"),
    ({"lin_vel_sensor": "vel"}, r"velocimeter sensor named .vel., which .* does not define .*robot.lin_vel_sensor"),
    ({"floor_geom": "ground", "mjcf": None}, None),  # added: a plane named ground besides the floor
    ({"mjcf": "/no/such/robot.xml"}, r"robot.mjcf: MJCF file not found: /no/such/robot.xml"),
    ({"action_scale": [0.25, 0.5]}, r"robot.action_scale: one number or 12 \(one per actuator\), got 2"),
    ({"colour": "red"}, r"robot: unknown keys \['colour'\]"),
])
def test_the_robot_section_is_checked_against_the_model(section, message):
    if message is None:
        env = envs.make("quadruped", num_envs=1, device="cpu", robot=section)
        mjm = env.sim.mj_model
        ground = mjm.geom("ground")
        assert mjm.geom_type[ground.id] == mujoco.mjtGeom.mjGEOM_PLANE and mjm.geom_bodyid[ground.id] == 0
        assert mjm.ngeom == 19 and mjm.geom("floor").id == 0
        return
    with pytest.raises((ValueError, FileNotFoundError), match=message):
        envs.make("quadruped", num_envs=1, device="cpu", robot=section)


def test_motors_are_refused_with_the_default_actuator_model_and_run_with_pd(tmp_path):
    """A robot with <motor> actuators: its controls are torques, not joint targets; the default
    actuator model refuses it by name, `actuator: {type: pd, kp, kd}` runs it."""
    text = re.sub(r'<position name="(\w+)" joint="(\w+)" class="\w+"/>', r'<motor name="\1" joint="\2"/>',
                  QUADRUPED_XML)
    assert text.count("<motor") == 12
    path = tmp_path / "motors.xml"
    path.write_text(text)
    with pytest.raises(ValueError, match=r"actuator 'FR_hip_abduction' of .*motors.xml is not a position servo.*"
                                         r"task.env.actuator.type=pd"):
        envs.make("quadruped", num_envs=1, device="cpu", robot={"mjcf": str(path)})
    env = envs.make("quadruped", num_envs=2, device="cpu", robot={"mjcf": str(path)},
                    actuator={"type": "pd", "kp": 30.0, "kd": 1.0, "effort_limit": 25.0})
    env.reset()
    env.step(torch.zeros(2, 12))
    assert torch.isfinite(env.sim.qpos).all()


def test_the_robot_config_section_is_validated():
    """task.robot keys and types are checked before anything is built; a task without legs has
    no robot section."""
    from omegaconf import OmegaConf

    import tasks

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped.yaml"))
    cfg = {"task": task, "algo": "ppo", "seed": 0, "device": "cpu"}
    task["robot"]["feet"] = ["x"]
    task["robot"]["action_scale"] = -1
    task["robot"]["base_body"] = 3
    with pytest.raises(ConfigError) as e:
        validate(cfg)
    text = str(e.value)
    assert "unknown key task.robot.feet" in text
    assert "task.robot.action_scale must be a number > 0" in text
    assert "task.robot.base_body must be a string" in text
    cart = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole.yaml"))
    cart["robot"] = {"mjcf": "x.xml"}
    with pytest.raises(ConfigError, match="environment 'cartpole' has no robot section"):
        validate({"task": cart, "algo": "ppo", "seed": 0, "device": "cpu"})


def test_robot_cfg_merges_a_section_over_the_defaults():
    base = RobotCfg(foot_geoms=("a",), termination_geoms=("t",))
    cfg = RobotCfg.from_dict({"foot_bodies": "b"}, base)
    assert cfg.foot_bodies == ("b",) and cfg.foot_geoms == () and cfg.termination_geoms == ("t",)
    assert RobotCfg.from_dict(None, base) == base
    assert np.isclose(RobotCfg.from_dict({"action_scale": [1, 2]}).action_scale, (1.0, 2.0)).all()
