"""simrl: batched, differentiable robot simulation in NVIDIA Warp that reproduces MuJoCo,
for reinforcement learning on one GPU."""

from simrl.diff import diff_step
from simrl.errors import CheckpointError, ConfigError, MJCFError, UnsupportedFeatureError
from simrl.sim.sim import Sim, compile_mjcf

__version__ = "0.1.0"
__all__ = ["Sim", "diff_step", "UnsupportedFeatureError", "MJCFError", "ConfigError", "CheckpointError", "compile_mjcf",
           "__version__"]
