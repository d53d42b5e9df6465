"""Observation terms of the legged tasks: the raw values [num_envs, n] the observation groups are
made of (Isaac Lab's `isaaclab.envs.mdp.observations`). The policy group's terms go through the
configured pipeline (envs.observations: scale, noise, clip, delay, history); the critic's are
the true state, scaled as legged_gym scales them (envs.legged).

Base quantities come from the state (the free joint's quaternion and velocities) or, for the
policy with observation_source "sensors", from the MJCF's IMU sensors (`imu_*`: sensordata, one
physics step old after a step, see envs.legged).
"""

import math

import torch


def base_lin_vel(env) -> torch.Tensor:
    """[num_envs, 3] the base's linear velocity in its own frame (m/s)."""
    return env.base_state()[0]


def base_ang_vel(env) -> torch.Tensor:
    """[num_envs, 3] the base's angular velocity in its own frame (rad/s)."""
    return env.base_state()[1]


def projected_gravity(env) -> torch.Tensor:
    """[num_envs, 3] gravity's direction in the base frame ((0, 0, -1) when level)."""
    return env.base_state()[2]


def imu_lin_vel(env) -> torch.Tensor:
    """[num_envs, 3] the velocimeter's reading (robot section: lin_vel_sensor)."""
    return env.imu()[0]


def imu_ang_vel(env) -> torch.Tensor:
    """[num_envs, 3] the gyro's reading (robot section: ang_vel_sensor)."""
    return env.imu()[1]


def imu_projected_gravity(env) -> torch.Tensor:
    """[num_envs, 3] world -z rotated into the frame of the IMU's framequat (robot section:
    orientation_sensor), as Isaac Lab and mjlab compute projected gravity."""
    return env.imu()[2]


def velocity_commands(env) -> torch.Tensor:
    """[num_envs, 3] the velocity command (vx, vy, yaw rate; envs/mdp/commands.py)."""
    return env.commands


def joint_pos_rel(env, *, encoder_bias: bool = False) -> torch.Tensor:
    """[num_envs, nq - 7] joint positions relative to the default pose; with `encoder_bias`,
    as the encoders read them (plus the env's encoder_bias of an encoder_bias event term)."""
    q = env.qpos.float()
    if encoder_bias and hasattr(env, "encoder_bias"):
        q = q + env.encoder_bias
    return q[:, 7:] - env.default_joint_pos


def joint_vel(env) -> torch.Tensor:
    """[num_envs, nv - 6] joint velocities."""
    return env.qvel.float()[:, 6:]


def last_action(env) -> torch.Tensor:
    """[num_envs, num_actions] the action of the last policy step, as applied."""
    return env.last_actions


def gait_clock(env) -> torch.Tensor:
    """[num_envs, 2] sin and cos of 2 pi x the first foot's gait phase (the others' phases are
    fixed offsets from it; envs.legged gait clock)."""
    angle = 2.0 * math.pi * env.gait_phase()[:, :1]
    return torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)


def friction(env) -> torch.Tensor:
    """[num_envs, 1] each world's sliding friction coefficient (envs.legged env_friction)."""
    return env.env_friction[:, None]


def feet_contact(env) -> torch.Tensor:
    """[num_envs, num_feet] 1 for each foot touching the ground."""
    return env.feet_contact().float()


def height_scan(env) -> torch.Tensor:
    """[num_envs, num_rays] Isaac Lab's height_scan: base z - hit z - 0.5 under a grid of rays,
    clipped to [-1, 1] (envs.height_scan, rough terrain)."""
    return env.height_scanner.heights(env.sim.qpos[:, 0:7])
