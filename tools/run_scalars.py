"""Scalars a training run logged to TensorBoard, summarised: the mean of a tag over the last N
iterations, or over windows of iterations (e.g. the terrain level a run ends at).

    python tools/run_scalars.py runs/quadruped_rough/<date> Curriculum/terrain_level --last 100
    python tools/run_scalars.py RUN_DIR Curriculum/terrain_level --window 100
    python tools/run_scalars.py RUN_DIR            # the tags the run logged

The run directory is train.py's (`hydra.run.dir`); a resumed run that wrote to the same directory
adds its events there, and its iterations go on from the checkpoint's.
"""

import argparse
import math
import sys
from pathlib import Path


def load(run_dir: str | Path, tag: str | None = None):
    """{tag: [(iteration, value)]} of the run's event files (one tag, or all of them), each
    sorted by iteration; a later write of an iteration replaces an earlier one."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise SystemExit(f"run_scalars: {run_dir} is not a directory")
    events = EventAccumulator(str(run_dir), size_guidance={"scalars": 0})
    events.Reload()
    tags = events.Tags()["scalars"]
    if not tags:
        raise SystemExit(f"run_scalars: no TensorBoard scalars in {run_dir}")
    if tag is not None and tag not in tags:
        raise SystemExit(f"run_scalars: {run_dir} has no scalar {tag!r}; it has: {', '.join(sorted(tags))}")
    out = {}
    for name in [tag] if tag is not None else tags:
        by_step = {e.step: e.value for e in events.Scalars(name)}
        out[name] = sorted(by_step.items())
    return out


def mean_of_last(points: list[tuple[int, float]], n: int) -> tuple[float, int, int]:
    """(mean, first iteration, last iteration) of the points of the last n iterations."""
    last = points[-1][0]
    chosen = [v for s, v in points if s > last - n]
    return sum(chosen) / len(chosen), last - n + 1, last


def windows(points: list[tuple[int, float]], size: int) -> list[tuple[int, int, float]]:
    """(first, last, mean) of consecutive windows of `size` iterations from the first logged one."""
    start = points[0][0]
    groups: dict[int, list[float]] = {}
    for s, v in points:
        groups.setdefault((s - start) // size, []).append(v)
    return [(start + k * size, start + (k + 1) * size - 1, sum(v) / len(v)) for k, v in sorted(groups.items())]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("tag", nargs="?", help="a scalar's tag, e.g. Curriculum/terrain_level (none: list them)")
    parser.add_argument("--last", type=int, default=100, help="iterations at the end to average (default 100)")
    parser.add_argument("--window", type=int, default=None, help="also print means over windows of this size")
    args = parser.parse_args(argv)
    if args.tag is None:
        print("\n".join(sorted(load(args.run_dir))))
        return 0
    if args.last < 1 or (args.window is not None and args.window < 1):
        raise SystemExit("run_scalars: --last and --window must be positive")
    points = load(args.run_dir, args.tag)[args.tag]
    if args.window:
        for first, last, mean in windows(points, args.window):
            print(f"{args.tag}  iterations {first}-{last}: {mean:.4g}")
    mean, first, last = mean_of_last(points, args.last)
    if math.isnan(mean):
        print(f"{args.tag}: the last {args.last} iterations logged NaN", file=sys.stderr)
    print(f"{args.tag}  mean over iterations {max(first, points[0][0])}-{last} (last {args.last}): {mean:.4g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
