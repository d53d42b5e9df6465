"""The benchmark's modes, chosen from its parsed command line (scripts/benchmark.py): steps/s
of every engine (simrl.bench.speed), instructions per world-step (simrl.bench.instructions),
instructions per source line (simrl.bench.lines), the differentiable step (simrl.bench.grad)
and training throughput (simrl.bench.training)."""

import math

import mujoco

from simrl.bench.host import pin_cores
from simrl.bench.models import resolve_model
from simrl.bench.records import make_output_folders

#: the engines of the timed benchmark
ENGINES = ("simrl", "mujoco", "mujoco_warp")
SCHEDULES = ("auto", "fused", "wide")
#: world counts when --worlds is not given, and for --per-line
DEFAULT_WORLDS, DEFAULT_LINE_WORLDS = "1,64,1024", "16"


def run(args):
    """Check the command line's values, then run the mode it asks for; returns what the mode
    returns (the records, or an exit status). A SystemExit names a refused value."""
    make_output_folders(args.out, args.markdown, args.png)
    if args.cores is not None:
        pin_cores(args.cores)
    worlds = [int(w) for w in (args.worlds or (DEFAULT_LINE_WORLDS if args.per_line else DEFAULT_WORLDS)).split(",")]
    if args.train:
        from simrl.bench.training import train_benchmark

        return train_benchmark(args.model, worlds, args)
    name, mjm = resolve_model(args.model)
    if args.grad:
        if "," in args.schedule:
            raise SystemExit("--grad measures one schedule at a time: pass --schedule fused or --schedule wide")
        from simrl.bench.grad import grad_benchmark

        return grad_benchmark(name, mjm, worlds, args)
    if args.smooth:
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    engines = args.engines.split(",")
    schedules = args.schedule.split(",")
    if not set(schedules) <= set(SCHEDULES):
        raise SystemExit(f"--schedule {args.schedule}: choose from auto, fused, wide (comma-separated)")
    if "mujoco_rollout" in engines:
        raise SystemExit("--engines mujoco_rollout: the engine is now `mujoco` (mujoco.rollout at each thread count)")
    unknown = set(engines) - set(ENGINES)
    if unknown:
        raise SystemExit(f"unknown engine(s) {sorted(unknown)}; choose from simrl, mujoco, mujoco_warp")
    if args.horizon < 1:
        raise SystemExit(f"--horizon {args.horizon}: give at least 1 step")
    if args.settle < 0.0 or not math.isfinite(args.settle):
        raise SystemExit(f"--settle {args.settle}: give a number of seconds >= 0")
    if args.per_line:
        from simrl.bench.lines import line_profile

        if len(worlds) != 1 or len(schedules) != 1:
            raise SystemExit("--per-line profiles one world count and one schedule: give --worlds N and at most one "
                             "--schedule")
        schedule = "fused" if schedules[0] == "auto" else schedules[0]
        line_profile(name, mjm, worlds[0], args.steps, schedule, args.dtype, args.top, args.out, args.keep,
                     args.settle)
        return 0
    if args.count_instructions:
        from simrl.bench.instructions import count_benchmark

        return count_benchmark(name, mjm, worlds, engines, schedules, args)
    from simrl.bench.speed import forward_benchmark

    return forward_benchmark(name, mjm, worlds, engines, schedules, args)
