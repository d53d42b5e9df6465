"""Reward and termination terms of gymnasium's Ant-v5 (gymnasium/envs/mujoco/ant_v5.py; envs.ant):
per step, not scaled by dt. `REWARDS` and `TERMINATIONS` are AntEnv's registries."""

import torch


def forward(env) -> torch.Tensor:
    """(x_torso after - x_torso before) / dt: the torso's forward velocity over the step (m/s)."""
    return (env.qpos[:, 0].float() - env.x_before) / env.step_dt


def healthy(env) -> torch.Tensor:
    """1 while the torso height is in healthy_z_range and the state is finite (a step function of
    the height: its gradient is zero)."""
    return env.healthy().float()


def ctrl_cost(env) -> torch.Tensor:
    """sum(action^2) of the action as given (Ant-v5 does not clip it; weight it negative)."""
    return (env.actions.float() ** 2).sum(dim=1)


def unhealthy(env) -> torch.Tensor:
    """Ant-v5's termination: not healthy."""
    return ~env.healthy()


REWARDS = {"forward": forward, "healthy": healthy, "ctrl_cost": ctrl_cost}
TERMINATIONS = {"unhealthy": unhealthy}
