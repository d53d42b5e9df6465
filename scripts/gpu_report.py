#!/usr/bin/env python
"""Static GPU report of one physics step, made on a machine without a GPU.

    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90
    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90 --grad --out report.json
    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90 --engine simrl,mujoco_warp
    python scripts/gpu_report.py --passes passive_spring,limit_rows --grad

The code is the package simrl.bench (gpu_report, launches, ptxas); what it reads, and how,
follows.
"""

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simrl.bench import gpu_report, launches, ptxas  # noqa: E402


def parser() -> argparse.ArgumentParser:
    description = "\n".join([__doc__, gpu_report.__doc__, launches.__doc__, ptxas.__doc__])
    p = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", help="MJCF path, a robot in envs/assets (quadruped) or a gymnasium asset (ant, humanoid)")
    p.add_argument("--passes",
                   help="comma-separated pass names (simrl/sim/forward.py): build only their wide kernels "
                        "(with --grad, the differentiable step's and their adjoints) and print registers, "
                        "stack and spills; no model, no step recorded")
    p.add_argument("--worlds", type=int, default=4096, help="number of worlds (default 4096)")
    p.add_argument("--arch", type=int, default=90, help="GPU architecture, e.g. 90 for sm_90 (H100, H200)")
    p.add_argument("--schedule", choices=gpu_report.SCHEDULES,
                   help="simrl's kernel schedule, passed to Sim.from_model when it takes one (default auto: "
                        "wide, what a Sim runs on CUDA; fused is the CPU's)")
    p.add_argument("--grad", action="store_true",
                   help="report one differentiable step (simrl.diff_step) and its backward instead")
    p.add_argument("--engine", default="simrl", help="comma-separated, from simrl, mujoco_warp (default simrl)")
    p.add_argument("--out", help="write the whole report as JSON to this file")
    p.add_argument("--build-dir", help="keep the PTX, ptxas input and cubins here (default: a temporary "
                                       "directory, removed afterwards)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                   help="modules compiled in parallel (default: the number of cores)")
    p.add_argument("--settle", type=int, default=launches.SETTLE_STEPS,
                   help=f"MuJoCo steps from the keyframe before the recorded step (default {launches.SETTLE_STEPS})")
    return p


def main(argv=None) -> int:
    p = parser()
    args = p.parse_args(argv)
    args.command = "python scripts/gpu_report.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.out:  # made now: a report of minutes must not end unable to write what it measured
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.passes:
        return gpu_report.passes_report(args)
    if not args.model:
        p.error("--model is required (unless --passes)")
    if args.settle < 0:
        p.error("--settle must be >= 0")
    return gpu_report.step_report(args)


if __name__ == "__main__":
    sys.exit(main())
