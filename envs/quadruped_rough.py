"""The project's quadruped on rough terrain (`task=quadruped_rough`): envs.rough's terrain grid,
curriculum and height scan with envs.quadruped's robot section and terms."""

from envs.quadruped import QuadrupedEnv
from envs.rough import RoughTerrainEnv


class QuadrupedRoughEnv(RoughTerrainEnv, QuadrupedEnv):
    """The quadruped on the terrain grid; observation groups "policy" (48, + the scan with
    height_scan_in_policy) and "critic" (53 + the scan)."""
