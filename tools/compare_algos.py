#!/usr/bin/env python
"""Compare learning curves of training runs (e.g. PPO and SHAC over several seeds) on one plot.

    python tools/compare_algos.py --title cartpole_swingup --out docs/shac_vs_ppo.png \\
        PPO=runs/cmp/ppo_s0,runs/cmp/ppo_s1,runs/cmp/ppo_s2 \\
        SHAC=runs/cmp/shac_s0,runs/cmp/shac_s1,runs/cmp/shac_s2

Each LABEL=DIR,DIR,... names the run directories of one algorithm (each holds the
learning_curve.json scripts/train.py writes). The PNG has two panels, mean episode return
against environment steps and against wall-clock seconds, one line per run and colour per
label. Printed (and written as markdown with --markdown): for each run, the best return it
reached, and the environment steps and seconds it needed to first reach `--fraction` (0.9) of
the best return any run reached (or `--level`, a return); per label, the median over its runs.

With `--metric NAME` the curves are those of a metric of scripts/play.py's evaluations instead
(lower is better: a tracking error), each run's evaluations in its directory's play_<iteration>/
(metrics.json of this engine; hydra.run.dir of play.py), placed at the environment steps and
seconds the run had reached at that iteration (learning_curve.json); `--level` is then required
and a run reaches it at its first evaluation at or below it, with `--max-fall-rate` also at most
that fall rate:

    python tools/compare_algos.py --metric lin_vel_tracking_error --level 0.087 --max-fall-rate 0.05 \
        --out docs/quadruped_shac_vs_ppo.png PPO=runs/q/ppo_s0,... SHAC=runs/q/shac_s0,...
"""

import argparse
import json
import math
import statistics
from pathlib import Path


def load_curve(run_dir: str) -> list[dict]:
    path = Path(run_dir) / "learning_curve.json"
    if not path.is_file():
        raise SystemExit(f"compare_algos: {path} does not exist (give run directories of scripts/train.py)")
    curve = [c for c in json.loads(path.read_text()) if math.isfinite(c["mean_return"])]
    if not curve:
        raise SystemExit(f"compare_algos: {path} has no finished episode yet")
    return curve


def load_evaluations(run_dir: str, metric: str, curve: list[dict]) -> list[dict]:
    """The run's play.py evaluations of this engine (play_<iteration>/metrics.json) as curve
    entries: env_steps and seconds at the checkpoint's iteration, `value` the metric, fall_rate."""
    at = {c["iteration"]: c for c in json.loads((Path(run_dir) / "learning_curve.json").read_text())}
    points = []
    for path in Path(run_dir).glob("play_*/metrics.json"):
        iteration = path.parent.name.removeprefix("play_")
        metrics = json.loads(path.read_text())
        if not iteration.isdigit() or metrics.get("backend", "warp") != "warp":
            continue
        if metric not in metrics:
            raise SystemExit(f"compare_algos: {path} has no {metric!r} (it has {', '.join(metrics)})")
        entry = at.get(int(iteration))
        if entry is None:
            raise SystemExit(f"compare_algos: {path}: iteration {iteration} is not in {run_dir}'s learning_curve.json")
        points.append({"iteration": int(iteration), "env_steps": entry["env_steps"], "seconds": entry["seconds"],
                       "value": float(metrics[metric]), "fall_rate": float(metrics.get("fall_rate", 0.0))})
    if not points:
        raise SystemExit(f"compare_algos: {run_dir} has no play_<iteration>/metrics.json of this engine (run "
                         f"scripts/play.py checkpoint=.../model_<iteration>.pt "
                         f"hydra.run.dir={run_dir}/play_<iteration>)")
    return sorted(points, key=lambda p: p["iteration"])


def first_reaching(curve: list[dict], level: float) -> dict | None:
    return next((c for c in curve if c["mean_return"] >= level), None)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("runs", nargs="+", help="LABEL=DIR[,DIR...]")
    parser.add_argument("--out", required=True, help="PNG to write")
    parser.add_argument("--title", default="")
    parser.add_argument("--fraction", type=float, default=0.9)
    parser.add_argument("--level", type=float, help="an absolute return level instead of --fraction of the best")
    parser.add_argument("--markdown", help="also write the table to this markdown file")
    parser.add_argument("--metric", help="a metric of play.py's evaluations (play_<iteration>/metrics.json) in "
                                         "place of the training return; lower is better")
    parser.add_argument("--max-fall-rate", type=float, help="--metric: reaching the level also needs a fall rate at "
                                                            "most this")
    args = parser.parse_args()
    if args.metric:
        evaluation_main(args)
        return

    groups = parse_groups(args.runs, load_curve)
    best = max(c["mean_return"] for runs in groups.values() for _, curve in runs for c in curve)
    level = args.fraction * best if best > 0 else best / args.fraction
    if args.level is not None:
        level = args.level

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    head = (f"Level: {level:.1f} (given; the best return any run reached: {best:.1f})" if args.level is not None else
            f"Level: {args.fraction:.0%} of the best return any run reached ({best:.1f}) = {level:.1f}")
    lines = [head, "",
             "| algorithm | run | best return | env steps to level | seconds to level |", "|---|---|---:|---:|---:|"]
    summary = []
    for k, (label, runs) in enumerate(groups.items()):
        steps_needed, seconds_needed, budgets = [], [], []
        for j, (run_dir, curve) in enumerate(runs):
            kw = {"color": colors[k % len(colors)], "alpha": 0.85, "label": label if j == 0 else None}
            axes[0].plot([c["env_steps"] for c in curve], [c["mean_return"] for c in curve], **kw)
            axes[1].plot([c["seconds"] for c in curve], [c["mean_return"] for c in curve], **kw)
            hit = first_reaching(curve, level)
            run_best = max(c["mean_return"] for c in curve)
            budgets.append(curve[-1]["env_steps"])
            steps_needed.append(hit["env_steps"] if hit else math.inf)
            seconds_needed.append(hit["seconds"] if hit else math.inf)
            reached = f"{hit['env_steps']} | {hit['seconds']:.0f}" if hit else "not reached | -"
            lines.append(f"| {label} | {run_dir} | {run_best:.1f} | {reached} |")
        summary.append((label, statistics.median(steps_needed), statistics.median(seconds_needed), min(budgets)))
    lines += ["", "| algorithm | median env steps to level | median seconds to level |", "|---|---:|---:|"]
    lines += [f"| {label} | {s:.0f} | {t:.0f} |" if math.isfinite(s) else
              f"| {label} | not reached in {budget} | - |" for label, s, t, budget in summary]
    if len(summary) == 2:
        (a, sa, ta, ba), (b, sb, tb, bb) = summary
        if math.isfinite(sa) and math.isfinite(sb):
            lines.append(f"\nEnv steps {a}/{b}: {sa / sb:.2f}; wall-clock {a}/{b}: {ta / tb:.2f}")
        elif math.isfinite(sb):  # a never reached the level: its budget is a lower bound
            lines.append(f"\nEnv steps {a}/{b}: more than {ba / sb:.1f} ({a} did not reach the level in {ba} steps)")
        elif math.isfinite(sa):
            lines.append(f"\nEnv steps {b}/{a}: more than {bb / sa:.1f} ({b} did not reach the level in {bb} steps)")
    finish(fig, axes, args, level, "mean episode return", lines)


def finish(fig, axes, args, level: float, ylabel: str, lines: list[str]) -> None:
    """Label both panels (environment steps, log scale; seconds), mark `level`, write the PNG
    (args.out) and print the table `lines` (also to args.markdown)."""
    import matplotlib.ticker

    for ax, xlabel in zip(axes, ("environment steps", "wall-clock seconds"), strict=True):
        ax.axhline(level, color="gray", lw=0.8, ls="--")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
        ax.legend()
    axes[0].set_xscale("log")
    axes[0].xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # decades labelled only
    fig.suptitle(args.title)
    fig.tight_layout()
    fig.savefig(args.out, dpi=100)
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text + "\n")
    print(f"wrote {args.out}")


def parse_groups(specs: list[str], load) -> dict[str, list[tuple[str, list[dict]]]]:
    """LABEL=DIR[,DIR...] arguments as {label: [(dir, load(dir)), ...]}."""
    groups = {}
    for spec in specs:
        label, _, dirs = spec.partition("=")
        if not dirs:
            raise SystemExit(f"compare_algos: {spec!r} is not LABEL=DIR[,DIR...]")
        groups[label] = [(d, load(d)) for d in dirs.split(",") if d]
    return groups


def evaluation_main(args) -> None:
    """--metric: the runs' evaluations against environment steps and seconds."""
    if args.level is None:
        raise SystemExit("compare_algos: --metric needs --level (the value to reach, e.g. PPO's tracking error)")
    groups = parse_groups(args.runs, lambda d: load_evaluations(d, args.metric, load_curve(d)))

    def reaches(p):
        return p["value"] <= args.level and (args.max_fall_rate is None or p["fall_rate"] <= args.max_fall_rate)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    falls = f" and a fall rate at most {args.max_fall_rate:g}" if args.max_fall_rate is not None else ""
    lines = [f"Level: {args.metric} at most {args.level:g}{falls}", "",
             f"| algorithm | run | best {args.metric} (fall rate) | last (fall rate) | env steps to level | "
             f"seconds to level |", "|---|---|---:|---:|---:|---:|"]
    summary = []
    for k, (label, runs) in enumerate(groups.items()):
        steps_needed, seconds_needed = [], []
        for j, (run_dir, points) in enumerate(runs):
            kw = {"color": colors[k % len(colors)], "alpha": 0.85, "marker": "o", "label": label if j == 0 else None}
            axes[0].plot([p["env_steps"] for p in points], [p["value"] for p in points], **kw)
            axes[1].plot([p["seconds"] for p in points], [p["value"] for p in points], **kw)
            hit = next((p for p in points if reaches(p)), None)
            best = min(points, key=lambda p: p["value"])
            steps_needed.append(hit["env_steps"] if hit else math.inf)
            seconds_needed.append(hit["seconds"] if hit else math.inf)
            reached = f"{hit['env_steps']} | {hit['seconds']:.0f}" if hit else "not reached | -"
            lines.append(f"| {label} | {run_dir} | {best['value']:.3f} ({best['fall_rate']:.2f}) | "
                         f"{points[-1]['value']:.3f} ({points[-1]['fall_rate']:.2f}) | {reached} |")
        summary.append((label, statistics.median(steps_needed), statistics.median(seconds_needed)))
    lines += ["", "| algorithm | median env steps to level | median seconds to level |", "|---|---:|---:|"]
    lines += [f"| {label} | {s:.0f} | {t:.0f} |" if math.isfinite(s) else f"| {label} | not reached | - |"
              for label, s, t in summary]
    finish(fig, axes, args, args.level, args.metric, lines)


if __name__ == "__main__":
    main()
