"""Curriculum terms of the rough-terrain tasks (envs.rough): run for the worlds that reset,
before the reset moves them back, in the order listed (Isaac Lab's curriculum manager; legged_gym's
_update_terrain_curriculum and update_command_curriculum).

    curriculum:
      terrain_levels: {}                     # the terrain's rows as levels (terrain.curriculum: true)
      command_vel: {max_lin_vel_x: 2.0}      # widen lin_vel_x while tracking earns > 80%

`TERMS` is the registry RoughTerrainEnv uses.
"""

import torch


def update_terrain_levels(levels: torch.Tensor, distance: torch.Tensor, command_xy: torch.Tensor,
                          patch_size: float, episode_length_s: float, num_rows: int,
                          random_rows: torch.Tensor) -> torch.Tensor:
    """legged_gym's terrain curriculum rule (`_update_terrain_curriculum`, Isaac Lab
    `terrain_levels_vel`) for worlds whose episodes ended: level [n] (long), distance walked [n]
    (m), command [n, 2] (m/s), random_rows [n] (long, in 0..num_rows-1, taken where a world passes
    the top row). Returns the new levels."""
    move_up = distance > patch_size / 2
    move_down = (distance < command_xy.norm(dim=1) * episode_length_s * 0.5) & ~move_up
    levels = levels + move_up.long() - move_down.long()
    return torch.where(levels >= num_rows, random_rows, levels.clamp(min=0))


class terrain_levels:  # noqa: N801 (a term's name, as the task file writes it)
    """The terrain curriculum: when a world's episode ends it moves up a row when it walked
    farther than half a patch from its spawn point, down a row when it walked less than half of
    what its command asked (|cmd_xy| x episode length x 0.5) and did not move up; past the top
    row it goes to a random row (`update_terrain_levels`). Its next spawn point is the centre of
    its new patch. Needs the terrain's rows to be levels (terrain.curriculum: true)."""

    def __init__(self, env):
        if not env.terrain_cfg.curriculum:
            raise ValueError("the curriculum term terrain_levels moves worlds between the terrain's rows of "
                             "difficulty: it needs terrain.curriculum: true (or leave the term out)")

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        # the worlds whose episode ended (not the first reset) move; chosen with torch.where, not
        # by indexing with a mask, so that no host synchronisation is needed
        cfg = env.terrain_cfg
        ended = env.episode_length_buf[env_ids] > 0
        distance = (env.sim.qpos[env_ids, :2].float() - env.env_origins[env_ids, :2]).norm(dim=1)
        random_rows = (env.rand_worlds(env_ids, 1, mask=ended)[:, 0] * cfg.rows).long()
        random_rows = random_rows.clamp(max=cfg.rows - 1)
        old = env.terrain_levels[env_ids]
        levels = update_terrain_levels(old, distance, env.commands[env_ids, :2], cfg.patch_size,
                                       env.max_episode_length * env.step_dt, cfg.rows, random_rows)
        env.terrain_levels[env_ids] = torch.where(ended, levels, old)
        origins = env.terrain_origins[env.terrain_levels[env_ids], env.terrain_types[env_ids]]
        env.env_origins[env_ids] = torch.where(ended[:, None], origins, env.env_origins[env_ids])


class command_vel:  # noqa: N801
    """legged_gym's command curriculum (update_command_curriculum): once per episode length of
    steps, when the worlds that end their episode then earned more than 80% of the largest
    lin-vel tracking reward, the lin_vel_x range widens by 0.5 m/s on each side, up to
    +-max_lin_vel_x (m/s). It decides on the host (no sync_free)."""

    def __init__(self, env, *, max_lin_vel_x: float = 2.0):
        if not max_lin_vel_x > 0.0:
            raise ValueError(f"curriculum.command_vel.max_lin_vel_x must be > 0 m/s, got {max_lin_vel_x}")
        self.max_lin_vel_x = float(max_lin_vel_x)

    def __call__(self, env, env_ids: torch.Tensor) -> None:
        if env._steps % env.max_episode_length != 0 or "tracking_lin_vel" not in env.reward_weights:
            return
        ended = env_ids[env.episode_length_buf[env_ids] > 0]
        if ended.numel() == 0:
            return
        per_step = env.episode_sums["tracking_lin_vel"][ended].mean() / env.max_episode_length
        if per_step > 0.8 * env.reward_weights["tracking_lin_vel"] * env.step_dt:
            ranges = env.command_ranges
            lo = max(float(ranges[0, 0]) - 0.5, -self.max_lin_vel_x)
            hi = min(float(ranges[0, 1]) + 0.5, self.max_lin_vel_x)
            ranges[0, 0], ranges[0, 1] = min(lo, 0.0), max(hi, 0.0)

    def log(self, env) -> dict[str, torch.Tensor]:
        return {"Curriculum/max_lin_vel_x": env.command_ranges[0, 1].clone()}


#: the curriculum terms of the rough-terrain tasks, by the name a task file gives them
TERMS = {"terrain_levels": terrain_levels, "command_vel": command_vel}
