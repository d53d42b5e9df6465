"""Command terms of the legged tasks: what the policy is told to do (Isaac Lab's command
manager, `isaaclab.envs.mdp.commands`).

    commands:
      base_velocity: {resample_s: 10.0, lin_vel_x: [-1.0, 1.0], lin_vel_y: [-0.5, 0.5],
                      ang_vel_yaw: [-1.0, 1.0], heading_command: false}

The command lives in the env (`env.commands` [num_envs, 3]: vx, vy in m/s, yaw rate in rad/s,
base frame; `env.command_ranges` [3, 2], which a command curriculum widens; `env.heading_target`
with heading commands): the reward terms, observations and the curriculum read it there, and
the env's state_dict keeps it. `TERMS` is the registry LeggedEnv uses.
"""

import math

import torch


def heading_yaw_rate(target: torch.Tensor, heading: torch.Tensor, stiffness: float, lo, hi) -> torch.Tensor:
    """The heading controller's yaw-rate command (legged_gym, Isaac Lab): stiffness times the
    heading error wrapped to [-pi, pi], clipped to [lo, hi]."""
    error = torch.remainder(target - heading + math.pi, 2.0 * math.pi) - math.pi
    return torch.clamp(stiffness * error, lo, hi)


class base_velocity:  # noqa: N801 (a term's name, as the task file writes it)
    """legged_gym's commands, Isaac Lab's UniformVelocityCommand: (vx, vy, yaw rate) drawn
    uniformly in `lin_vel_x`, `lin_vel_y`, `ang_vel_yaw` ([lo, hi]) at each reset and every
    `resample_s` seconds of each world's own episode (rounded to policy steps, at least one),
    from the world's own random stream (envs.base rand_worlds).

    Heading commands (`heading_command`; legged_gym's `heading_command`, Isaac Lab's
    `heading_command`): each world draws a target heading in `heading_range` with its velocity
    command, and its yaw-rate command is heading_stiffness * (target - heading), wrapped to
    [-pi, pi] and clipped to the ang_vel_yaw range, recomputed from the state before every
    observation (`update`). The robot turns toward the target and then walks straight; a drawn
    yaw rate would walk it in circles (radius |v| / |yaw rate|), which holds back the terrain
    curriculum's distance rule (docs/RESULTS.md, quadruped_rough)."""

    def __init__(self, env, *, resample_s: float = 10.0, lin_vel_x: tuple = (-1.0, 1.0),
                 lin_vel_y: tuple = (-0.5, 0.5), ang_vel_yaw: tuple = (-1.0, 1.0), heading_command: bool = False,
                 heading_stiffness: float = 0.5, heading_range: tuple = (-math.pi, math.pi)):
        if not resample_s > 0.0:
            raise ValueError(f"commands.base_velocity.resample_s must be > 0 s, got {resample_s}")
        dev = env.device
        #: per-world commands [num_envs, 3]
        env.commands = torch.zeros(env.num_envs, 3, device=dev)
        #: [3, 2]: (lo, hi) of vx, vy and the yaw rate
        env.command_ranges = torch.tensor([lin_vel_x, lin_vel_y, ang_vel_yaw], dtype=torch.float32, device=dev)
        #: policy steps between two draws of a world's command
        self.resample_steps = max(1, int(round(resample_s / env.step_dt)))
        #: whether the yaw-rate command follows a target heading
        self.heading_command = bool(heading_command)
        if not self.heading_command:
            return
        if not heading_stiffness > 0.0:
            raise ValueError(f"commands.base_velocity.heading_stiffness must be > 0 (yaw-rate command per radian of "
                             f"heading error), got {heading_stiffness}")
        lo, hi = (float(x) for x in heading_range)
        if not -math.pi <= lo <= hi <= math.pi:
            raise ValueError(f"commands.base_velocity.heading_range must be [lo, hi] with -pi <= lo <= hi <= pi, got "
                             f"{list(heading_range)}")
        self.stiffness, self.heading_range = float(heading_stiffness), (lo, hi)
        #: each world's target heading (rad, world frame: the angle of the base's x axis about z)
        env.heading_target = torch.zeros(env.num_envs, device=dev)

    def resample(self, env, env_ids: torch.Tensor) -> None:
        """Draw the commands (and target headings) of the worlds env_ids."""
        lo, hi = env.command_ranges[:, 0], env.command_ranges[:, 1]
        env.commands[env_ids] = lo + (hi - lo) * env.rand_worlds(env_ids, 3)
        if self.heading_command:
            lo, hi = self.heading_range
            env.heading_target[env_ids] = lo + (hi - lo) * env.rand_worlds(env_ids, 1)[:, 0]

    def update(self, env) -> None:
        """Before observing: the heading controller's yaw-rate command of the current state (a
        function of the state: recomputing it for the same state changes nothing)."""
        if self.heading_command:
            lo, hi = env.command_ranges[2]
            env.commands[:, 2] = heading_yaw_rate(env.heading_target, env.base_heading(), self.stiffness, lo, hi)

    def step(self, env) -> None:
        """After a policy step: redraw the commands of the worlds whose episode reached a multiple
        of resample_s (each world on its own clock). Without host synchronisation (env.sync_free)
        every world draws and only those due keep their draw."""
        due = env.episode_length_buf % self.resample_steps == 0
        if env.sync_free:
            drawn = ("commands", "world_draws") + (("heading_target",) if self.heading_command else ())
            with env._rows_only(due, only=drawn) as every:
                self.resample(env, every)
        else:
            resample = due.nonzero(as_tuple=False).squeeze(-1)
            if resample.numel():
                self.resample(env, resample)


#: the command terms of the legged tasks, by the name a task file gives them
TERMS = {"base_velocity": base_velocity}
