"""Termination terms of the legged tasks: the failure conditions of a state, each [num_envs]
bool (Isaac Lab's termination manager; time-outs are the env's own, envs.base).

    terminations:
      base_contact: {}
      base_height: {min_height: 0.15}
      upside_down: {}

An episode fails when any listed term is true; the env keeps the last values by name in
`termination_causes` (simrl.rl.evaluate counts the falls by cause). `TERMS` is the registry
LeggedEnv uses.
"""

import torch


def base_contact(env) -> torch.Tensor:
    """A termination part of the robot (robot section: termination_geoms, termination_bodies)
    touches the ground (Isaac Lab's illegal_contact)."""
    return env.termination_contact()


def base_height(env, *, min_height: float = 0.15) -> torch.Tensor:
    """The base is below `min_height` (m) over the ground under it (Isaac Lab's
    root_height_below_minimum, measured from the terrain's surface on rough terrain)."""
    return env.base_height() < min_height


def upside_down(env) -> torch.Tensor:
    """The base's z axis points down: projected gravity's z > 0 (Isaac Lab's bad_orientation at
    90 degrees)."""
    _, _, gravity = env.base_state()
    return gravity[:, 2] > 0.0


#: the termination terms of the legged tasks, by the name a task file gives them
TERMS = {"base_contact": base_contact, "base_height": base_height, "upside_down": upside_down}
