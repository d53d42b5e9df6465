"""Task configurations: one `tasks/<name>.yaml` per task, selected with `task=<name>`."""

from pathlib import Path

TASKS_DIR = Path(__file__).resolve().parent


def available() -> list[str]:
    """Names of the tasks that have a configuration file, sorted."""
    return sorted(p.stem for p in TASKS_DIR.glob("*.yaml"))
