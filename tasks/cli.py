"""What scripts/train.py and scripts/play.py share around Hydra. Importable with the standard
library alone, so that a Python without the project's packages (a system Python) is told which
one to use instead of a traceback."""

import contextlib
import sys


def require_hydra(script: str):
    """Hydra's package, or SystemExit naming the project's Python for scripts/<script>.py."""
    try:
        import hydra
    except ModuleNotFoundError as e:
        raise SystemExit(f"simrl: {e} in {sys.executable}. Use the project's environment: `make train` creates "
                         f".venv; then run .venv/bin/python scripts/{script}.py ... (or `source .venv/bin/activate` "
                         f"first)") from None
    return hydra


@contextlib.contextmanager
def config_errors_exit():
    """Within the block, a ConfigError ends the program with `simrl: <its message>` (status 1,
    no traceback)."""
    from simrl.errors import ConfigError

    try:
        yield
    except ConfigError as e:
        raise SystemExit(f"simrl: {e}") from None
