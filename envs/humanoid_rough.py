"""The project's humanoid on rough terrain (`task=humanoid_rough`): envs.rough's terrain grid,
curriculum and height scan with envs.humanoid's robot section and terms."""

from envs.humanoid import HumanoidEnv
from envs.rough import RoughTerrainEnv


class HumanoidRoughEnv(RoughTerrainEnv, HumanoidEnv):
    """The humanoid on the terrain grid; observation groups "policy" (81, + the scan with
    height_scan_in_policy) and "critic" (84 + the scan)."""
