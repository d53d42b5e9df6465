"""Flat-ground velocity tracking for the project's quadruped (envs/assets/quadruped.xml): the
legged task of envs.legged (legged_gym / Isaac Lab style; its docstring describes commands,
observations, rewards and terminations) with the quadruped's robot section:

- feet: the four spherical foot geoms `FR_foot`, `FL_foot`, `RR_foot`, `RL_foot`;
- the trunk or a hip touching the ground ends the episode; thighs and calves touching it are
  undesired contacts;
- the `home` keyframe is the default pose; action scale 0.25 rad.

`task=quadruped robot.mjcf=PATH ...` (or `QuadrupedEnv(robot={...})`) runs the same task on another
quadruped: envs.robot and docs/GUIDE.md "Your own robot"."""

from envs import ASSETS_DIR
from envs.legged import (
    DEFAULT_POLICY_OBSERVATIONS,
    DEFAULT_RANDOMIZATION,
    DEFAULT_REWARDS,
    OBSERVATION_SOURCES,
    LeggedEnv,
    quat_rotate_inverse,
)
from envs.robot import RobotCfg

__all__ = ["DEFAULT_POLICY_OBSERVATIONS", "DEFAULT_RANDOMIZATION", "DEFAULT_REWARDS", "OBSERVATION_SOURCES",
           "QUADRUPED", "QuadrupedEnv", "quat_rotate_inverse"]

#: the robot section of the project's quadruped
QUADRUPED = RobotCfg(base_body="trunk", keyframe="home", foot_geoms=("FR_foot", "FL_foot", "RR_foot", "RL_foot"),
                     termination_geoms=("trunk", ".._hip"), undesired_geoms=(".._thigh", ".._calf"),
                     action_scale=0.25)


class QuadrupedEnv(LeggedEnv):
    """LeggedEnv on the project's quadruped; observation groups "policy" (48) and "critic" (53)."""

    MJCF = ASSETS_DIR / "quadruped.xml"
    ROBOT = QUADRUPED
