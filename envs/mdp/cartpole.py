"""Reward and termination terms of the cart-pole tasks (envs.cartpole): torch functions of the
state and the action, so that a differentiable step (SHAC) carries their gradients. Per step,
not scaled by dt. `REWARDS` and `TERMINATIONS` are CartpoleEnv's registries."""

import torch


def alive(env) -> torch.Tensor:
    """1 per step."""
    return torch.ones(env.num_envs, device=env.device)


def upright(env) -> torch.Tensor:
    """(1 + cos angle) / 2: 1 with the pole up, 0 hanging down."""
    return (1.0 + torch.cos(env.qpos[:, 1].float())) * 0.5


def centered(env) -> torch.Tensor:
    """exp(-x^2): 1 with the cart in the middle of the rail."""
    return torch.exp(-env.qpos[:, 0].float() ** 2)


def effort(env) -> torch.Tensor:
    """The action squared (weight it negative)."""
    return env.actions[:, 0] ** 2


def cart_out_of_bounds(env, *, limit: float = 2.5) -> torch.Tensor:
    """The cart beyond +-limit (m) on the rail."""
    return env.sim.qpos[:, 0].abs() > limit


def pole_fallen(env, *, limit: float = 0.4) -> torch.Tensor:
    """The pole tilted beyond +-limit (rad) from upright."""
    return env.sim.qpos[:, 1].abs() > limit


REWARDS = {"alive": alive, "upright": upright, "centered": centered, "effort": effort}
TERMINATIONS = {"cart_out_of_bounds": cart_out_of_bounds, "pole_fallen": pole_fallen}
