"""Short training runs whose every number is recorded, so that moving code can be held to the
behaviour it had: PPO on cartpole, quadruped and quadruped_rough, and SHAC on cartpole_swingup,
on the CPU with fixed seeds. Each run goes through the command line users type
(`scripts/train.py`), in a process of its own, and yields what it learned and logged:

- `curve`: the learning curve's returns and episode lengths per iteration (learning_curve.json);
- `scalars`: every TensorBoard scalar per iteration but the wall-clock ones (losses, rewards by
  term, learning rate, noise);
- `weights`: the SHA-256 of each tensor of the last checkpoint (networks, optimizer, and the
  training state: the simulated worlds, observations and random generators) with the sum of
  its absolute values (to see how far apart two runs are when they differ), and its other
  numbers as they are (wall-clock times left out).

The process is pinned to one thread and to torch's and MKL's portable code paths
(`DETERMINISTIC_ENV`), so that the same code gives the same bits on another x86 machine.

    python tests/reference_runs.py            # record tests/data/reference_runs.json
    python tests/reference_runs.py --check    # run again and say what differs
"""

import argparse
import hashlib
import json
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cpu_vendor() -> str:
    """The CPU's vendor string (/proc/cpuinfo's vendor_id: GenuineIntel, AuthenticAMD), '' if unknown."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("vendor_id"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return ""


def record_path(vendor: str | None = None) -> Path:
    """The record of this machine's kind: torch's CPU kernels give other last bits on AMD's
    processors than on Intel's (the same code at 134012d: every optimizer moment ~1e-9 apart),
    so each vendor has its own file; Intel's (the CI's) is reference_runs.json."""
    vendor = cpu_vendor() if vendor is None else vendor
    name = "reference_runs.json" if vendor in ("GenuineIntel", "") else f"reference_runs.{vendor}.json"
    return ROOT / "tests" / "data" / name


RECORD = record_path()

#: one thread, and torch's and MKL's code paths that do not depend on the CPU's vector width
DETERMINISTIC_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "ATEN_CPU_CAPABILITY": "default",
                     "MKL_CBWR": "COMPATIBLE", "CUDA_VISIBLE_DEVICES": ""}

#: name -> command-line arguments of scripts/train.py; episodes short enough to end within the
#: run, so that resets, the curricula and every reward term's episode sum are part of it
CASES = {
    "cartpole_ppo": ["task=cartpole", "num_envs=16", "max_iterations=3", "seed=3"],
    "quadruped_ppo": ["task=quadruped", "num_envs=8", "max_iterations=2", "seed=5", "task.env.episode_length_s=0.3"],
    "quadruped_rough_ppo": ["task=quadruped_rough", "num_envs=8", "max_iterations=2", "seed=7",
                            "task.env.episode_length_s=0.3"],
    "cartpole_swingup_shac": ["task=cartpole_swingup", "algo=shac", "num_envs=8", "max_iterations=2", "seed=11",
                              "task.env.episode_length_s=0.3"],
}

#: the environment's saved state that is held to the record: the worlds, the reward terms'
#: episode sums and the generator (its other buffers are named as the environment's code names
#: them, and move with it)
_ENV_STATE = ("simrl.training.env.tensors.sim.", "simrl.training.env.tensors.episode_sums.",
              "simrl.training.env.generator")

#: generators that training leaves unseeded and never draws from (a checkpoint keeps them so that
#: a resumed run continues them)
_UNSEEDED = ("simrl.training.rng.python", "simrl.training.rng.numpy")

#: scalars and checkpoint entries that measure time, not learning
_TIMING = ("Perf/", "time", "fps", "seconds")


def _float(x: float):
    """A float as JSON can hold it exactly (repr round-trips; NaN and infinities as strings)."""
    return x if math.isfinite(x) else repr(x)


def _scalars(run_dir: Path) -> dict[str, list]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    return {tag: [[e.step, _float(e.value)] for e in events.Scalars(tag)]
            for tag in sorted(events.Tags()["scalars"]) if not any(t in tag for t in _TIMING)}


def _weights(checkpoint: Path) -> dict[str, list]:
    import torch

    saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
    out = {}

    def walk(prefix: str, value):
        if (prefix.startswith("simrl.training.env.") and not prefix.startswith(_ENV_STATE)) or \
                prefix.startswith(_UNSEEDED):
            return
        if isinstance(value, torch.Tensor):
            data = value.detach().contiguous().cpu()
            digest = hashlib.sha256(data.numpy().tobytes() if data.dtype != torch.bfloat16 else
                                    data.view(torch.int16).numpy().tobytes()).hexdigest()
            # math.fsum: exactly rounded, so the same in any process (torch's sum is not)
            out[prefix] = [digest, _float(math.fsum(abs(x) for x in data.double().flatten().tolist()))]
        elif isinstance(value, dict):
            for k in sorted(value, key=str):
                if not any(t in str(k) for t in _TIMING):
                    walk(f"{prefix}.{k}" if prefix else str(k), value[k])
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(f"{prefix}.{i}", v)
        elif isinstance(value, (bool, int, str)) or value is None:
            out[prefix] = value
        elif isinstance(value, float):
            out[prefix] = _float(value)
        else:
            out[prefix] = type(value).__name__

    walk("", saved)
    return out


def run(name: str, work: Path) -> dict:
    """Train case `name` in a fresh process under `work` and return its record."""
    run_dir = work / name
    env = {**os.environ, **DETERMINISTIC_ENV}
    result = subprocess.run([sys.executable, "scripts/train.py", *CASES[name], "device=cpu",
                             f"hydra.run.dir={run_dir}"], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=1200)
    if result.returncode != 0:
        raise RuntimeError(f"{name}: scripts/train.py exited with {result.returncode}:\n{result.stderr[-3000:]}")
    curve = json.loads((run_dir / "learning_curve.json").read_text())
    checkpoints = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1]))
    return {"args": CASES[name],
            "curve": [[c["iteration"], c["env_steps"], _float(c["mean_return"]), _float(c["mean_episode_length"])]
                      for c in curve],
            "scalars": _scalars(run_dir),
            "checkpoint": checkpoints[-1].name,
            "weights": _weights(checkpoints[-1])}


def differences(expected: dict, actual: dict, limit: int = 12) -> list[str]:
    """What differs between two records of one case, one line each (at most `limit`)."""
    lines = []
    for key in ("args", "curve", "checkpoint"):
        if expected[key] != actual[key]:
            lines.append(f"{key}: expected {expected[key]}, got {actual[key]}")
    for section in ("scalars", "weights"):
        a, b = expected[section], actual[section]
        for k in sorted(set(a) | set(b)):
            if a.get(k) != b.get(k):
                lines.append(f"{section}[{k}]: expected {a.get(k)}, got {b.get(k)}")
    return lines[:limit] + ([f"... and {len(lines) - limit} more"] if len(lines) > limit else [])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the record instead of writing it")
    ap.add_argument("cases", nargs="*", default=list(CASES), help="cases to run (default: all)")
    a = ap.parse_args()
    recorded = json.loads(RECORD.read_text()) if RECORD.exists() else {}
    with tempfile.TemporaryDirectory() as work:
        for name in a.cases:
            record = run(name, Path(work))
            if a.check:
                diff = differences(recorded[name], record)
                print(f"{name}: " + ("the same" if not diff else "DIFFERS\n  " + "\n  ".join(diff)), flush=True)
            else:
                recorded[name] = record
                print(f"{name}: recorded ({len(record['scalars'])} scalars, {len(record['weights'])} tensors)",
                      flush=True)
    if not a.check:
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(recorded, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
