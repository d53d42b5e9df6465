#!/usr/bin/env python
"""Headless speed benchmark: simrl against MuJoCo on the same model, in the same run.

    python scripts/benchmark.py --model quadruped --worlds 1,64,1024
    python scripts/benchmark.py --model quadruped --worlds 1024 --cores 1
    python scripts/benchmark.py --model quadruped --worlds 64 --count-instructions --steps 20
    python scripts/benchmark.py --model path/to/robot.xml --out bench.json --markdown bench.md
    python scripts/benchmark.py --model task:quadruped_rough --worlds 8 --count-instructions
    python scripts/benchmark.py --model quadruped --worlds 16 --steps 10 --per-line

Modes: steps/s of every engine (the default), instructions per world-step (--count-instructions;
--per-stage splits them by stage), instructions per source line of simrl's step (--per-line),
the differentiable step (--grad H) and end-to-end PPO throughput (--train N). The code is the
package simrl.bench; what each mode measures, and how, follows.
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simrl.bench import benchmark, engines, grad, instructions, lines, speed, training  # noqa: E402


def parser() -> argparse.ArgumentParser:
    description = "\n".join([__doc__, *(m.__doc__ for m in (speed, engines, instructions, lines, grad, training))])
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.set_defaults(command="python scripts/benchmark.py " + " ".join(sys.argv[1:]))
    p.add_argument("--model", default="ant", help="MJCF path, gymnasium asset name or task:NAME (default: ant)")
    p.add_argument("--worlds", help=f"comma-separated world counts (default {benchmark.DEFAULT_WORLDS}; "
                                    f"--per-line: one, default {benchmark.DEFAULT_LINE_WORLDS})")
    p.add_argument("--engines", default="simrl,mujoco,mujoco_warp",
                   help="comma-separated, from simrl, mujoco, mujoco_warp (default: all)")
    p.add_argument("--device", default="cpu", help="device of the simrl engine: cpu, cuda, cuda:N")
    p.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    p.add_argument("--schedule", default="auto",
                   help="simrl's schedule(s), comma-separated: auto (fused on the CPU, wide on CUDA), fused, "
                        "wide; with several, each is measured as its own engine (simrl-fused, simrl-wide)")

    threads = p.add_argument_group("threads")
    threads.add_argument("--cores", type=int, metavar="N",
                         help="pin the whole run to the first N cores it may use (os.sched_setaffinity) and "
                              "measure every CPU engine at N threads")
    threads.add_argument("--threads", metavar="LIST",
                         help="comma-separated thread counts of the CPU engines (default: 1 and every core this "
                              "process may use; --cores N sets N)")

    timing = p.add_argument_group("steps and timing")
    timing.add_argument("--horizon", type=int, default=100,
                        help="steps from the start states per timed call, in every engine (default 100)")
    timing.add_argument("--settle", type=float, default=0.0, metavar="S",
                        help="start every engine from the keyframe (or qpos0) after S simulated seconds of "
                             "mj_step at mid-range controls, so that robots that start in the air have their "
                             "contacts (default 0: the keyframe itself)")
    timing.add_argument("--smooth", action="store_true", help="disable contacts and constraints (in every engine)")
    timing.add_argument("--seconds", type=float, default=3.0,
                        help="timed seconds per engine and world count, split over the repeats")
    timing.add_argument("--repeats", type=int, default=3,
                        help="rounds in which the engines take turns; the median is reported")
    timing.add_argument("--profile", action="store_true",
                        help="also time every stage of simrl's forward pass on its own (per world count)")

    output = p.add_argument_group("output")
    output.add_argument("--out", help="write the records as JSON to this file")
    output.add_argument("--markdown", help="append a dated table to this markdown file")
    output.add_argument("--png", help="plot steps/s against the world count (log-log) to this PNG file")

    count = p.add_argument_group("instruction counts")
    count.add_argument("--count-instructions", action="store_true",
                       help="instructions per world-step instead of steps/s (perf or valgrind's callgrind, in "
                            "child processes; simrl and mj_step on one thread)")
    count.add_argument("--steps", type=int, default=10,
                       help="with --count-instructions or --per-line: steps counted per engine and world count "
                            "(default 10)")
    count.add_argument("--counter", default="auto", choices=["auto", "perf", "callgrind"],
                       help="with --count-instructions: the instruction counter (auto: perf where it counts "
                            "instructions here, else callgrind)")
    count.add_argument("--per-stage", action="store_true",
                       help="with --count-instructions (callgrind): instructions per world-step of every pass of "
                            "simrl's wide schedule and of MuJoCo's stage functions")
    count.add_argument("--per-line", action="store_true",
                       help="instructions per world-step of every Python function and line of simrl's step "
                            "(callgrind; one world count, one schedule: fused unless --schedule wide) instead of "
                            "steps/s; --out writes the whole report as JSON")
    count.add_argument("--top", type=int, default=40, help="with --per-line: rows of each table (default 40)")
    count.add_argument("--keep", metavar="DIR",
                       help="with --per-line: keep the callgrind file, symbols and kernel cache in this directory")

    modes = p.add_argument_group("other modes")
    modes.add_argument("--train", type=int, metavar="N",
                       help="end-to-end training throughput: N PPO iterations of the task named by --model, "
                            "on this engine and on MuJoCo (sim.backend=mujoco, CPU) in the same run")
    modes.add_argument("--viewer", action="store_true",
                       help="with --train: also train with the browser viewer on (simrl+viewer: train.py's "
                            "viewer=web, 4 worlds shown, a page client receiving its updates), in the same run")
    modes.add_argument("--grad", type=int, metavar="H",
                       help="benchmark gradients: an H-step differentiable rollout and its backward")
    modes.add_argument("--cpu-time", action="store_true",
                       help="with --grad: time this process's CPU time instead of the wall clock (a machine "
                            "shared with other busy processes)")
    return p


if __name__ == "__main__":
    benchmark.run(parser().parse_args())
