"""Hydra configuration shared by scripts/train.py and scripts/play.py: every tasks/*.yaml
becomes an option of the `task` group, so `task=NAME` selects it."""

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

import tasks

DEFAULT_TASK = "quadruped"


def register(config_name: str, keys: dict, run_dir: str) -> None:
    """Register the task group and the primary config `config_name` with top-level `keys`."""
    store = ConfigStore.instance()
    for name in tasks.available():
        store.store(group="task", name=name, node=OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml"))
    store.store(name=config_name, node={
        "defaults": ["_self_", {"task": DEFAULT_TASK}],
        **keys,
        "hydra": {"run": {"dir": run_dir}, "job": {"chdir": False}},
    })


def resolve_device(device: str) -> str:
    """`auto` -> cuda:0 when a GPU is present, else cpu."""
    import torch

    if device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    return device
