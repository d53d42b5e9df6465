"""Velocity tracking for legged robots on rough terrain (envs/terrain.py), with a terrain
curriculum and a height scan (`RoughTerrainEnv`, on any robot of envs.legged; envs.quadruped_rough
and envs.humanoid_rough put the project's quadruped and humanoid on it), as legged_gym's
rough-terrain tasks (`legged_robot.py`: _update_terrain_curriculum, _get_heights) and Isaac Lab's
velocity tasks (`terrain_levels_vel`, the height_scanner RayCaster) do.

- Terrain: a grid of patches, rows = difficulty, columns = types (`terrain=`, `task.terrain.*`);
  it is part of the MJCF, so the MuJoCo backend runs the same scene.
- Spawn: each world has a terrain column (type, fixed: worlds are spread evenly over the columns)
  and a row (level); a reset puts its base at the centre of its patch (the free joint's x, y, z =
  the home keyframe's plus the patch centre and its surface height), with a random yaw.
- Curriculum (`terrain.curriculum`: the rows are levels): worlds start on rows
  0..max_init_level, and the curriculum term `terrain_levels` (envs/mdp/curriculum.py, listed in
  `curriculum`; by default when terrain.curriculum is on) moves them when an episode ends: up a
  row when a world walked farther than half a patch from its spawn point, down a row when it
  walked less than half of what its command asked (|cmd_xy| x episode length x 0.5) and did not
  move up; past the top row to a random row. The mean row is logged as
  `Curriculum/terrain_level`. Without terrain.curriculum rows are drawn uniformly once.
- Height scan: `HeightScan` rays under the base (Isaac Lab's 1.6 x 1.0 m grid at 0.1 m, 187
  rays), base z - hit z - 0.5 clipped to [-1, 1], appended to the critic's observations and with
  `height_scan_in_policy` to the policy's (with uniform noise 0.1 x obs_noise, legged_gym's
  height_measurements noise).
- The trunk-height termination measures the base above the terrain surface under it.
- Command curriculum (the curriculum term `command_vel`, legged_gym's update_command_curriculum):
  at the end of each episode length of steps, when the worlds that ended their episode earned
  more than 80% of the maximum lin-vel tracking reward, the lin_vel_x range widens by 0.5 m/s on
  each side, up to +-max_lin_vel_x; logged as `Curriculum/max_lin_vel_x`.
"""

import math
import warnings

import torch

from envs import terms
from envs.height_scan import HeightScan
from envs.legged import LeggedEnv
from envs.mdp import curriculum as curriculum_terms
from envs.mdp import observations as obs
from envs.terrain import TerrainCfg, terrain_model


def edge_warning(cfg: TerrainCfg, lin_vel_x, lin_vel_y, episode_length_s: float) -> str | None:
    """The warning for a terrain whose edge a world can walk off within one episode, or None.
    Beyond the level border the ground is the floor plane, `pit_depth` below; a world spawned on
    an outer patch is half a patch plus the border from that edge, and walks at most the top
    speed of the command ranges `lin_vel_x`, `lin_vel_y` ([lo, hi], m/s) x `episode_length_s`.
    legged_gym's border is 25 m, Isaac Lab's 20 m; with 3 m, 27 of the 45 falls of a trained
    quadruped in 100 evaluation episodes were off the edge (docs/RESULTS.md, quadruped_rough)."""
    top_speed = math.hypot(max(abs(float(v)) for v in lin_vel_x), max(abs(float(v)) for v in lin_vel_y))
    reach = top_speed * episode_length_s
    margin = cfg.patch_size / 2 + cfg.border
    if cfg.border > 0 and margin >= reach:
        return None
    return (f"terrain.border={cfg.border:g} m: a world on an outer patch is {margin:g} m from the terrain's edge "
            f"and can walk {reach:.1f} m in an episode ({top_speed:.2f} m/s x {episode_length_s:g} s); past the "
            f"edge it drops {cfg.pit_depth:g} m to the floor plane and the episode ends as a fall. Set "
            f"terrain.border >= {math.ceil(reach - cfg.patch_size / 2):d} to keep every world on level ground.")


class RoughTerrainEnv(LeggedEnv):
    """A LeggedEnv on the terrain grid of `terrain` (a TerrainCfg or a dict of its fields), with
    the height scan; observation groups: the flat task's "policy" (+ the scan with
    height_scan_in_policy) and "critic" (+ the scan). `curriculum` lists the curriculum terms
    (envs/terms.py; None: terrain_levels when terrain.curriculum is on). Combine it with a
    robot's env class: `class MyRoughEnv(RoughTerrainEnv, MyEnv)`, as envs.quadruped_rough does."""

    CURRICULUM_TERMS = curriculum_terms.TERMS

    def __init__(self, num_envs: int = 256, terrain: dict | TerrainCfg | None = None,
                 height_scan_size: tuple = (1.6, 1.0), height_scan_resolution: float = 0.1,
                 height_scan_in_policy: bool = False, curriculum: dict | None = None, **kwargs):
        self.terrain_cfg = terrain if isinstance(terrain, TerrainCfg) else TerrainCfg.from_dict(terrain)
        super().__init__(num_envs=num_envs, **kwargs)
        cfg, dev = self.terrain_cfg, self.device
        if curriculum is None:
            curriculum = {"terrain_levels": {}} if cfg.curriculum else {}
        #: the curriculum terms (envs/mdp/curriculum.py), run in order at each reset
        self.curriculum_terms = terms.build(self, "curriculum", curriculum)
        command_vel = self.curriculum_terms.get("command_vel")
        top = command_vel.func.max_lin_vel_x if command_vel is not None else None
        x_range = (-top, top) if top is not None else self.command_ranges[0].tolist()
        problem = edge_warning(cfg, x_range, self.command_ranges[1].tolist(), self.max_episode_length * self.step_dt)
        if problem:
            warnings.warn(problem, stacklevel=2)
        mjm = self.sim.mj_model
        self.terrain_geom_ids = [mjm.geom(self.robot_cfg.floor_geom).id] + self.terrain.geom_ids
        # one vertical ray under the base: the terrain's surface there (Terrain.height_at's heights,
        # from the geoms themselves; one Warp launch: 0.25 ms for 256 worlds, against 72 ms for
        # height_at in torch over every box; the two agree to 2e-7 m)
        self.ground_probe = HeightScan(mjm, self.terrain_geom_ids, dev, size=(0.0, 0.0))
        self.height_scanner = HeightScan(mjm, self.terrain_geom_ids, dev, size=height_scan_size,
                                         resolution=height_scan_resolution)
        self.height_scan_in_policy = height_scan_in_policy
        #: patch centres [rows, cols, 3] (legged_gym terrain_origins)
        self.terrain_origins = torch.as_tensor(self.terrain.origins, dtype=torch.float32, device=dev)
        # legged_gym: types spread evenly over the worlds, levels random up to max_init_level
        self.terrain_types = torch.div(torch.arange(num_envs, device=dev) * cfg.cols, num_envs,
                                       rounding_mode="floor")
        all_worlds = torch.arange(num_envs, device=dev)
        top = min(cfg.max_init_level, cfg.rows - 1) if cfg.curriculum else cfg.rows - 1
        self.terrain_levels = (self.rand_worlds(all_worlds, 1)[:, 0] * (top + 1)).long().clamp(max=top)
        #: where each world spawned this episode [num_envs, 3] (legged_gym env_origins)
        self.env_origins = self.terrain_origins[self.terrain_levels, self.terrain_types].clone()
        #: policy steps since the env was built (the command curriculum looks once per episode length)
        self._steps = 0

    def _build_model(self):
        mjm, self.terrain = terrain_model(self._model_spec(), self.terrain_cfg, floor=self.robot_cfg.floor_geom)
        return mjm

    def _ground_geoms(self, mjm):
        return [mjm.geom(self.robot_cfg.floor_geom).id] + self.terrain.geom_ids

    def base_height(self):
        q = self.sim.qpos.float()
        if not hasattr(self, "ground_probe"):  # during the constructor
            return q[:, 2] - self.terrain.height_at(q[:, 0], q[:, 1])
        return q[:, 2] - self.ground_probe.hit_z(q[:, 0:7])[:, 0]

    def ground_z(self, xy):
        pose = torch.zeros(*xy.shape[:-1], 7, dtype=torch.float32, device=self.device)
        pose[..., :2] = xy
        pose[..., 3] = 1.0
        return self.ground_probe.hit_z(pose.reshape(-1, 7))[:, 0].reshape(xy.shape[:-1])

    # ----------------------------------------------------------------------------- curriculum
    def _reset(self, env_ids):
        # the curriculum reads the distance walked before the reset moves the worlds back
        if hasattr(self, "terrain_levels"):  # not during the constructor
            for term in self.curriculum_terms.values():
                term(self, env_ids)
        super()._reset(env_ids)

    def _sync_free_problems(self) -> list[str]:
        problems = super()._sync_free_problems()
        if "command_vel" in self.curriculum_terms:
            problems.append("the command curriculum (curriculum term command_vel) decides on the host when to widen")
        return problems

    def _shared_state(self) -> dict:
        # the command curriculum's state: the velocity ranges it widened, and the step counter
        # that says when it next looks (a resumed run widens them as the uninterrupted one would)
        return {**super()._shared_state(), "command_ranges": self.command_ranges, "_steps": self._steps}

    def _reset_envs(self, env_ids):
        super()._reset_envs(env_ids)
        if not hasattr(self, "env_origins"):  # the first reset, from LeggedEnv.__init__'s callers
            return
        origin = self.env_origins[env_ids].to(self.sim.qpos.dtype)
        self.sim.qpos[env_ids, 0:3] = self.home_qpos[0:3].to(self.sim.qpos.dtype) + origin

    def step(self, actions):
        self._steps += 1
        obs_groups, reward, terminated, time_outs, extras = super().step(actions)
        extras["log"]["Curriculum/terrain_level"] = self.terrain_levels.float().mean()
        for term in self.curriculum_terms.values():
            if hasattr(term.func, "log"):
                extras["log"].update(term.func.log(self))
        return obs_groups, reward, terminated, time_outs, extras

    # ---------------------------------------------------------------------------- observations
    def height_scan(self) -> torch.Tensor:
        """Isaac Lab's height_scan [num_envs, num_rays] of the current base poses."""
        return obs.height_scan(self)

    def policy_observation_terms(self) -> list[dict]:
        """The flat task's terms, and the height scan after their stack with height_scan_in_policy."""
        terms = super().policy_observation_terms()
        if self.height_scan_in_policy:
            n = int(self.height_scanner.num_rays)
            terms.append({"name": "height_scan", "size": n, "scale": [1.0] * n,
                          "clip": [-1.0, 1.0], "delay": 0, "stacked": False,
                          "meaning": "base z - ground z - 0.5 (m) under each ray of envs.height_scan's grid"})
        return terms

    def _observations(self):
        groups = super()._observations()
        scan = obs.height_scan(self)
        groups["critic"] = torch.cat([groups["critic"], scan], dim=1)
        if self.height_scan_in_policy:
            noise = (self.rand(*scan.shape) * 2 - 1) * 0.1 * self.obs_noise
            groups["policy"] = torch.cat([groups["policy"], scan + noise], dim=1)
        return groups
