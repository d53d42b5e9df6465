"""Task configurations: one `tasks/<name>.yaml` per task, selected with `task=<name>`. A task
file names its environment (`name:`, an `envs.make` name) and gives its sections: env, terrain,
robot, ppo, shac and the world and iteration counts. tasks.config registers them with Hydra and
validates a configuration; tasks.cli holds what the command lines share.

This module needs the standard library only (scripts/train.py imports the package before it
knows whether the project's packages are installed)."""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent


def available() -> list[str]:
    """Names of the tasks that have a configuration file, sorted."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))


def load(name: str):
    """The task file `name` as an OmegaConf DictConfig."""
    from omegaconf import OmegaConf

    return OmegaConf.load(TASKS_DIR / f"{name}.yaml")
