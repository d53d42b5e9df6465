"""Batched environments on top of `simrl.Sim`, and the robot MJCF assets they use.

The environments (observation groups, rewards, resets, the rsl-rl and gymnasium adapters)
arrive with the training work; until then this package holds the asset directory.
"""

from pathlib import Path

#: Directory of the robot MJCF files shipped with simrl.
ASSETS_DIR = Path(__file__).resolve().parent / "assets"
