"""Checkpoint files: safe loading with errors that name the file, finding the newest
checkpoint of a task (`resume=latest`), and the random-number-generator state that makes a
resumed run continue exactly.

Loading never unpickles arbitrary objects: `torch.load(..., weights_only=True)` accepts only
tensors and plain containers (dict, list, tuple, str, numbers), so a checkpoint cannot run code.
Everything simrl writes into a checkpoint is of those kinds.
"""

import contextlib
import os
import pickle
import random
import re
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import torch

from simrl.errors import CheckpointError

CHECKPOINT_PATTERN = re.compile(r"^model_(\d+)\.pt$")


def load_checkpoint(path, map_location=None) -> dict:
    """The dict stored in the checkpoint `path`, loaded with weights_only=True. Raises
    CheckpointError naming the file when it is missing, truncated or corrupt, not a dict, or
    holds objects that safe loading refuses."""
    path = str(path)
    if not os.path.isfile(path):
        raise CheckpointError(f"checkpoint {path}: no such file")
    try:
        loaded = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:
        lines = [line.strip() for line in str(e).splitlines() if line.strip()]
        unsafe = [line for line in lines if "GLOBAL" in line]
        if unsafe:  # an object that only unpickling arbitrary code could rebuild
            raise CheckpointError(
                f"checkpoint {path} holds objects other than tensors and plain containers; simrl loads "
                f"checkpoints with torch.load(weights_only=True) so that a file cannot run code, and refuses "
                f"this one ({unsafe[0]})") from e
        detail = next((line for line in lines if "WeightsUnpickler" not in line and "Weights only" not in line
                       and "documentation" not in line), lines[-1] if lines else "")
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated (could not unpickle: {detail}). Use an "
                              f"earlier checkpoint of the run (model_<iteration>.pt)") from e
    except (RuntimeError, EOFError, OSError, ValueError, zipfile.BadZipFile, KeyError, IndexError) as e:
        size = os.path.getsize(path)
        raise CheckpointError(f"checkpoint {path} is corrupt or truncated ({size} bytes; torch.load: "
                              f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}). Use an earlier "
                              f"checkpoint of the run (model_<iteration>.pt)") from e
    if not isinstance(loaded, dict) or "actor_state_dict" not in loaded:
        kind = type(loaded).__name__ if not isinstance(loaded, dict) else f"a dict with keys {sorted(loaded)[:6]}"
        raise CheckpointError(f"checkpoint {path} is not a training checkpoint (model_<iteration>.pt written by "
                              f"scripts/train.py): it holds {kind}")
    return loaded


def check_identity(path, meta: dict, mine: dict) -> None:
    """Raise CheckpointError unless the checkpoint's task, observation sizes and action size
    (`meta`, its "simrl" entry) are those of the policy about to load it (`mine`)."""
    if meta.get("task") and mine.get("task") and meta["task"] != mine["task"]:
        raise CheckpointError(f"checkpoint {path} was trained on task {meta['task']!r}, not {mine['task']!r}; "
                              f"pass task={meta['task']} or a checkpoint of task {mine['task']!r}")
    saved_obs = {k: list(v) for k, v in meta.get("obs_sizes", {}).items()}
    if saved_obs and saved_obs != mine["obs_sizes"]:
        raise CheckpointError(f"checkpoint {path} has observation sizes {saved_obs}, this task "
                              f"{mine['obs_sizes']}: it was written for another task or configuration")
    if "num_actions" in meta and int(meta["num_actions"]) != mine["num_actions"]:
        raise CheckpointError(f"checkpoint {path} has {meta['num_actions']} actions, this task "
                              f"{mine['num_actions']}: it was written for another task or configuration")


def checkpoint_algo(path, map_location=None) -> str:
    """The algorithm ("ppo" or "shac") that wrote a training checkpoint."""
    meta = load_checkpoint(path, map_location=map_location).get("simrl") or {}
    return str(meta.get("algo", "ppo"))


def checkpoint_iteration(path) -> int:
    match = CHECKPOINT_PATTERN.match(Path(path).name)
    return int(match.group(1)) if match else -1


def find_latest_checkpoint(task: str, root="runs", key: str = "resume") -> Path:
    """The most recently written `model_<iteration>.pt` anywhere under `<root>/<task>/` (the
    default run directories of scripts/train.py, relative to the current directory); ties go
    to the higher iteration. Temporary files of interrupted writes (`.tmp_*.pt`) are ignored.
    `key` is the configuration key that asked (`resume` or play.py's `checkpoint`), for errors."""
    base = Path(root) / task
    found = [p for p in base.rglob("model_*.pt") if CHECKPOINT_PATTERN.match(p.name) and p.is_file()] \
        if base.is_dir() else []
    if not found:
        raise CheckpointError(f"{key}=latest: no checkpoint (model_<iteration>.pt) of task {task!r} under "
                              f"{base.resolve()}; give {key}=<path of a checkpoint or run directory>")
    return max(found, key=lambda p: (p.stat().st_mtime_ns, checkpoint_iteration(p)))


def resolve_resume(resume: str, task: str, root="runs", key: str = "resume") -> Path:
    """The checkpoint that `resume=` (train.py) or `checkpoint=` (play.py, `key`) names: `latest`
    -> find_latest_checkpoint; a run directory -> its highest-iteration checkpoint; a file ->
    itself. Raises CheckpointError, naming `key`, when there is none."""
    if resume == "latest":
        return find_latest_checkpoint(task, root, key)
    path = Path(resume)
    if path.is_dir():
        found = [p for p in path.glob("model_*.pt") if CHECKPOINT_PATTERN.match(p.name)]
        if not found:
            raise CheckpointError(f"{key}={resume}: the directory holds no checkpoint (model_<iteration>.pt)")
        return max(found, key=checkpoint_iteration)
    if not path.is_file():
        raise CheckpointError(f"{key}={resume}: no such checkpoint file or run directory")
    return path


# ------------------------------------------------------------------------ random generators
def rng_state() -> dict:
    """State of every global generator a training iteration draws from: torch (CPU and every
    CUDA device in use), numpy's legacy global generator and Python's `random`, as tensors and
    plain containers (loadable with weights_only=True)."""
    np_state = np.random.get_state(legacy=False)
    state = {
        "torch": torch.get_rng_state(),
        "numpy": {"key": torch.from_numpy(np_state["state"]["key"].astype(np.int64)),
                  "pos": int(np_state["state"]["pos"]), "has_gauss": int(np_state["has_gauss"]),
                  "gauss": float(np_state["gauss"])},
        "python": random.getstate(),
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"].cpu())
    n = state["numpy"]
    np.random.set_state({"bit_generator": "MT19937",
                         "state": {"key": n["key"].cpu().numpy().astype(np.uint32), "pos": n["pos"]},
                         "has_gauss": n["has_gauss"], "gauss": n["gauss"]})
    version, internal, gauss = state["python"]
    random.setstate((version, tuple(internal), gauss))
    if "cuda" in state and torch.cuda.is_available():
        cuda = [s.cpu() for s in state["cuda"]][: torch.cuda.device_count()]
        torch.cuda.set_rng_state_all(cuda)


def atomic_torch_save(obj, path: str) -> None:
    """Write `obj` to a temporary file beside `path`, then rename: a crash mid-write leaves
    the previous file intact."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise
