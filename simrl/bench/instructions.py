"""Instructions per world-step (`--count-instructions`) instead of time: noise-free.

Every engine (each simrl schedule: Sim.step on one thread; mujoco: mj_step through
mujoco.rollout on one thread) runs in a child process (simrl/bench/step_worlds.py) from the same
start states under the same controls, twice: 1 + STEPS steps, and 1 step. Instructions per
world-step = (count(1 + STEPS) - count(1)) / (worlds x STEPS): the subtraction removes the
first step and whatever both runs share. The counter: `perf stat -e instructions:u` where
this machine's perf counts instructions (the child's whole process, imports included, which
the subtraction takes out again), else valgrind's callgrind, which counts only between two
client requests that the child makes around its steps (`--instr-atstart=no`, then
START/STOP_INSTRUMENTATION), so imports and kernel loading are neither counted nor slowed down.
Under valgrind simrl's kernels are built for x86-64-v3 (AVX2, FMA; MuJoCo's own build uses AVX)
instead of -march=native, since valgrind executes no AVX-512; the benchmark builds them in its
own process first, so that the child only loads them from Warp's cache. The table gives each
engine's instructions per world-step, the ratio to mj_step's, and the solver iterations of the
counted steps. Where the iterations differ by more than 2x and MuJoCo's solver is not Newton
(gymnasium's humanoid: PGS), mj_step is counted again with its solver set to Newton
(`mujoco_newton`), and the table adds the ratio to that count ("vs mj_step with Newton") with a
line that says why, as the timed benchmark does.

The simulation data per world of simrl and of MuJoCo Warp (simrl.bench.engines) follows in a
table of its own; MuJoCo Warp's instructions are not counted (its kernels run in Warp on the
CPU, not in mj_step's C), its data comes from put_data alone.

`--per-stage` (with `--count-instructions` and callgrind) also splits the counts by stage.
simrl: its wide schedule, every pass a kernel of its own (the per-element functions the fused
step calls in loops: the same arithmetic), stepped launch by launch with callgrind collecting
during each launch only and dumping one profile part per launch (step_worlds.py --by-launch);
a part holds the launch's Python overhead too, the same at any world count, so each kernel's
instructions per world-step come from two world counts, W and 2W: (count(2W) - count(W)) /
(W x steps). MuJoCo: every function of libmujoco over 1% of mj_step's count (mj_fwdPosition,
mj_collision, mj_crb, mj_factorM, the solver's, ...), each inclusive of what it calls, from
`callgrind_annotate --inclusive=yes` on the two counted runs (the difference again). Two more
tables, appended to --markdown too.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import mujoco
import numpy as np
import warp as wp

from simrl.bench.engines import import_mujoco_warp, mujoco_stats, mujoco_warp_memory, simrl_data_memory, simrl_runner
from simrl.bench.host import machine
from simrl.bench.models import integrator_name, solver_name, start_arrays, start_description, with_newton
from simrl.bench.records import data_table, write_results
from simrl.bench.speed import solver_mismatch, solver_note
from simrl.bench.step_worlds import PORTABLE_CPU_FLAGS

#: the child process, run by its path (see its docstring)
STEP_WORLDS = Path(__file__).resolve().with_name("step_worlds.py")


def child_command(*args: str) -> list[str]:
    """The command line of a step_worlds.py child with `args`."""
    return [sys.executable, str(STEP_WORLDS), *args]


def run_child(command: list[str]) -> subprocess.CompletedProcess:
    """Run a counted child (`command`: the counter's command line around child_command's), with one
    torch thread, the same string hashes in every run, and this process's simrl importable; a
    SystemExit with the end of its error output when it fails."""
    import simrl

    root = str(Path(simrl.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONHASHSEED": "0", "OMP_NUM_THREADS": "1", "PYTHONPATH": path}
    result = subprocess.run(command, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return result


def perf_count(text: str) -> int | None:
    """The instruction count in `perf stat -x,` output (count,unit,event,...), or None."""
    for line in text.splitlines():
        fields = line.split(",")
        if len(fields) > 2 and fields[2].startswith("instructions"):
            return int(fields[0]) if fields[0].isdigit() else None
    return None


def callgrind_count(path: Path) -> int:
    """Instructions in a callgrind output file: its `totals:` line (Ir; its `summary:` line stays 0
    when instrumentation was switched on by a client request)."""
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise SystemExit(f"{path}: no totals line in callgrind's output")


def instruction_counter(choice: str) -> str:
    """"perf" when `perf stat -e instructions:u` counts instructions here (and choice allows),
    else "callgrind" when valgrind runs; a SystemExit that says what is missing otherwise."""
    if choice in ("auto", "perf") and shutil.which("perf"):
        try:
            probe = subprocess.run(["perf", "stat", "-x,", "-e", "instructions:u", "true"],
                                   capture_output=True, text=True, timeout=60)
            if probe.returncode == 0 and perf_count(probe.stderr) is not None:
                return "perf"
        except (OSError, subprocess.TimeoutExpired):
            pass
    if choice == "perf":
        raise SystemExit("--counter perf: `perf stat -e instructions:u` does not count instructions on this machine "
                         "(no perf, or no hardware counter: a virtual machine often has none); try --counter callgrind")
    if shutil.which("valgrind") is None:
        raise SystemExit("--count-instructions needs valgrind (its callgrind tool) or perf with a hardware "
                         "instruction counter; neither works here")
    return "callgrind"


def count_child(counter: str, child_args: list[str], out: Path) -> tuple[int, str]:
    """Run step_worlds.py with child_args under the counter; (instructions, its output)."""
    child = child_command(*child_args)
    if counter == "perf":
        command = ["perf", "stat", "-x,", "-e", "instructions:u", "-o", str(out), "--", *child]
    else:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                   *child, "--callgrind"]
    result = run_child(command)
    count = perf_count(out.read_text()) if counter == "perf" else callgrind_count(out)
    if count is None:
        raise SystemExit(f"{out}: no instruction count in perf's output:\n{out.read_text()}")
    return count, result.stdout.strip().splitlines()[-1]


def count_benchmark(name, mjm, worlds, engines, schedules, args) -> list[dict]:
    """Instructions per world-step of simrl (each schedule, one thread) and mj_step (mujoco.rollout,
    one thread), from the same start states under the same controls (see the module's docstring).
    `args`: the parsed command line of scripts/benchmark.py."""
    if args.steps < 1:
        raise SystemExit(f"--steps {args.steps}: count at least 1 step")
    if args.device != "cpu":
        raise SystemExit("--count-instructions counts CPU instructions: use --device cpu")
    counter = instruction_counter(args.counter)
    if args.per_stage and counter != "callgrind":
        raise SystemExit("--per-stage attributes instructions with callgrind: add --counter callgrind")
    if args.per_stage and shutil.which("callgrind_annotate") is None:
        raise SystemExit("--per-stage needs callgrind_annotate (valgrind's tools), which is not on PATH")
    mjw = None
    if "mujoco_warp" in engines:
        mjw, import_error = import_mujoco_warp()
        if mjw is None:
            print("--count-instructions: mujoco_warp " + (f"fails to import ({import_error})" if import_error
                                                           else "is not installed") + ": leaving it out")
        else:
            print("--count-instructions counts simrl and mujoco; mujoco_warp: its data per world only (put_data)")
    schedules = [("fused" if s == "auto" else s) for s in dict.fromkeys(schedules)]
    portable = counter == "callgrind" and "simrl" in engines
    if portable:
        wp.config.cpu_compiler_flags = PORTABLE_CPU_FLAGS
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu} timestep={mjm.opt.timestep} "
          f"integrator={integrator_name(mjm)} solver={solver_name(mjm)} (MuJoCo; simrl: Newton)"
          f"{' (contacts and constraints disabled)' if args.smooth else ''}")
    print(f"machine: {machine()}\n{start_description(mjm, args.settle)}\ncounter: {counter}; {args.steps} steps "
          "counted after the first, one thread"
          + ("; simrl's kernels built for x86-64-v3 (valgrind runs no AVX-512)" if portable else ""))
    records = []
    with tempfile.TemporaryDirectory(prefix="simrl-count-") as tmp:
        tmp = Path(tmp)
        model_path = tmp / "model.mjb"
        mujoco.mj_saveModel(mjm, str(model_path), None)
        for w in worlds:
            arrays = start_arrays(mjm, w, args.settle)
            start_path = tmp / f"start_{w}.npz"
            np.savez(start_path, **arrays)
            jobs = []
            if "simrl" in engines:
                for schedule in schedules:
                    key = "simrl" if len(schedules) == 1 else f"simrl-{schedule}"
                    # built here first: the kernels compiled (or loaded) outside the counter, and the
                    # solver iterations of the counted steps
                    run, _ = simrl_runner(mjm, w, "cpu", args.dtype, schedule, 1, 1 + args.steps, args.settle)
                    stats = {**run.stats(skip=1), **simrl_data_memory(run.sim)}
                    child = ["simrl", str(model_path), str(start_path), "--schedule", schedule, "--dtype",
                             args.dtype, *(["--portable-cpu"] if portable else [])]
                    jobs.append((key, args.dtype, child, stats))
            if "mujoco" in engines:
                stats = mujoco_stats(mjm, arrays, 1 + args.steps, skip=1)
                jobs.append(("mujoco", "float64", ["mujoco", str(model_path), str(start_path)], stats))
                # where the solvers' iterations differ by more than 2x, MuJoCo with its solver set to
                # Newton too: the count at matched method and accuracy (as the timed benchmark does)
                simrl_stats = next((job[3] for job in jobs if job[0].startswith("simrl")), None)
                if simrl_stats is not None and solver_mismatch(simrl_stats, stats, mjm) == "newton":
                    newton = with_newton(mjm)
                    newton_path = tmp / "model_newton.mjb"
                    mujoco.mj_saveModel(newton, str(newton_path), None)
                    jobs.append(("mujoco_newton", "float64", ["mujoco", str(newton_path), str(start_path)],
                                 mujoco_stats(newton, arrays, 1 + args.steps, skip=1)))
            for key, dtype, child, stats in jobs:
                start = time.perf_counter()
                counts, outputs = [], []
                for steps in (0, args.steps):
                    count, output = count_child(counter, [*child[:3], str(steps), *child[3:]],
                                                tmp / f"{key}_{w}_{steps}.out")
                    counts.append(count)
                    outputs.append(output)
                per_step = (counts[1] - counts[0]) / (w * args.steps)
                rec = {"engine": key, "model": name, "mode": "instructions", "num_worlds": w, "steps": args.steps,
                       "counter": counter, "threads": 1, "device": "cpu", "dtype": dtype,
                       "settle_seconds": args.settle,
                       "instructions": counts, "instructions_per_world_step": per_step,
                       "final_state": outputs[1], "count_seconds": time.perf_counter() - start,
                       **({"cpu_target": "x86-64-v3"} if portable and key.startswith("simrl") else {}), **stats}
                if args.per_stage and key == "mujoco":
                    rec["per_stage"] = mujoco_stage_counts([tmp / f"{key}_{w}_{n}.out" for n in (0, args.steps)],
                                                           w * args.steps)
                records.append(rec)
                print(f"  {key:12s} worlds={w:5d}  {per_step:12,.0f} instructions per world-step  "
                      f"({rec['count_seconds']:.0f} s; {outputs[1]})")
            if mjw is not None:
                memory = mujoco_warp_memory(mjw, mjm, w, "cpu", args.settle)
                records.append({"engine": "mujoco_warp", "model": name, "mode": "memory", "num_worlds": w,
                                "device": "cpu", "dtype": "float32", "settle_seconds": args.settle,
                                "version": getattr(mjw, "__version__", "unknown"), **memory})
                print(f"  {'mujoco_warp':12s} worlds={w:5d}  {memory['data_bytes_per_world'] / 1024:,.1f} KiB of data "
                      f"per world (nconmax {memory['nconmax']}, njmax {memory['njmax']})")
            if args.per_stage and "simrl" in engines:
                records.append(simrl_stage_counts(name, mjm, w, args, portable, tmp, model_path))
    counted_records = [r for r in records if r["mode"] == "instructions"]
    add_count_ratios(counted_records)
    written = counted_records + [r for r in records if r["mode"] == "memory"]
    tables = [count_table(counted_records, mjm), data_table(written)]
    write_results(args, written, "\n\n".join(t for t in tables if t), f"Instructions per world-step: {name}, {counter}")
    for r in records:
        if "per_stage" in r:
            write_results(args, records, stage_table(r),
                          f"Instructions per stage: {name}, {r['engine']}, {r['num_worlds']} worlds "
                          + ("(simrl's wide schedule: each pass's kernel, worlds 2W minus W)" if r["engine"] != "mujoco"
                             else "(mj_step's stage functions, each with its callees)"))
    return records


def add_count_ratios(records: list[dict]) -> None:
    """Each counted record's `vs_mujoco`: mj_step's instructions per world-step over its own at
    the same world count; `vs_mujoco_newton` likewise against mujoco_newton where that was counted."""
    for r in records:
        for engine, key in (("mujoco", "vs_mujoco"), ("mujoco_newton", "vs_mujoco_newton")):
            base = next((b for b in records if b["engine"] == engine and b["num_worlds"] == r["num_worlds"]), None)
            if base is not None:
                r[key] = base["instructions_per_world_step"] / r["instructions_per_world_step"]


def count_table(records: list[dict], mjm) -> str:
    """The markdown table of the counted records with their ratios (add_count_ratios), and the
    solver note where the solvers' iterations differ by more than 2x."""
    newton = any(r["engine"] == "mujoco_newton" for r in records)
    lines = ["| engine | dtype | worlds | steps counted | instructions per world-step | vs mj_step (its instructions "
             "/ these) | " + ("vs mj_step with Newton | " if newton else "")
             + "solver iters mean/max | contacts/world |",
             "|---|---|---:|---:|---:|---:|" + ("---:|" if newton else "") + "---:|---:|"]
    for r in records:
        ratio = f"{r['vs_mujoco']:.2f}x" if "vs_mujoco" in r else "-"
        ratio_newton = (f"{r['vs_mujoco_newton']:.2f}x | " if "vs_mujoco_newton" in r else "- | ") if newton else ""
        lines.append(f"| {r['engine']} | {r['dtype']} | {r['num_worlds']} | {r['steps']} | "
                     f"{r['instructions_per_world_step']:,.0f} | {ratio} | {ratio_newton}{r['solver_niter_mean']:.2f}/"
                     f"{r['solver_niter_max']} | {r['contacts_per_world']:.1f} |")
    for w in sorted({r["num_worlds"] for r in records}):
        simrl_rec = next((r for r in records if r["engine"].startswith("simrl") and r["num_worlds"] == w), None)
        mujoco_rec = next((r for r in records if r["engine"] == "mujoco" and r["num_worlds"] == w), None)
        if simrl_rec is not None and mujoco_rec is not None:
            matched = solver_mismatch(simrl_rec, mujoco_rec, mjm)
            if matched:
                stats = {"simrl": simrl_rec, "mujoco": mujoco_rec,
                         **({"mujoco_newton": next(r for r in records if r["engine"] == "mujoco_newton"
                                                   and r["num_worlds"] == w)} if matched == "newton" else {})}
                lines.append("\n" + solver_note(matched, w, stats, "simrl", mjm).replace(
                    "'vs mujoco'", "'vs mj_step'").replace("'vs mujoco Newton'", "'vs mj_step with Newton'"))
    return "\n".join(lines)


def stage_table(record: dict) -> str:
    """The markdown table of a record's per-stage counts, with each stage's share: of the kernels'
    sum for simrl, of mj_step's count for MuJoCo (whose stages nest)."""
    stages = record["per_stage"]
    total = sum(count for _, count in stages) if record["engine"] != "mujoco" else \
        record["instructions_per_world_step"]
    rows = [f"| {stage} | {count:,.0f} | {100 * count / total:.1f}% |" for stage, count in stages]
    return "\n".join(["| stage | instructions per world-step | share |", "|---|---:|---:|", *rows])


def annotate_inclusive(path: Path) -> dict[str, int]:
    """Instructions of every function in a callgrind output file with its callees'
    (`callgrind_annotate --inclusive=yes`), by function name."""
    out = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(path)],
                         capture_output=True, text=True, check=True).stdout
    counts = {}
    for line in out.splitlines():
        # "1,234,567 (12.34%)  file.c:function [library]"
        match = re.match(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?\S*?:(\S+)", line)
        if match:
            counts[match.group(2)] = counts.get(match.group(2), 0) + int(match.group(1).replace(",", ""))
    return counts


def mujoco_stage_counts(paths: list[Path], world_steps: int) -> list[tuple[str, float]]:
    """(MuJoCo function, instructions per world-step with its callees') of the functions of
    libmujoco (mj_* and mju_*) over 1% of mj_step's: the 0-step and the N-step runs' inclusive
    counts subtracted, largest first (mj_step, mj_forwardSkip, mj_fwdPosition, mj_collision, ...:
    the shares overlap)."""
    def mujoco_functions(path):
        counts = {}
        for function, count in annotate_inclusive(path).items():
            function = function.split(".llvm.")[0]  # LTO's local copies
            if function.startswith(("mj_", "mju_", "mjc_")):
                counts[function] = counts.get(function, 0) + count
        return counts

    before, after = (mujoco_functions(p) for p in paths)
    per_step = {f: (n - before.get(f, 0)) / world_steps for f, n in after.items()}
    step = per_step.get("mj_step", 0.0)
    return sorted(((f, n) for f, n in per_step.items() if n >= 0.01 * step), key=lambda kv: -kv[1])


def launch_parts(prefix: Path) -> dict[str, int]:
    """Instructions per kernel name, summed over the profile parts step_worlds.py --by-launch
    dumped (`<prefix>.<n>`, each with "desc: Trigger: Client Request: <kernel>" and its totals)."""
    counts = {}
    for part in prefix.parent.glob(prefix.name + ".*"):
        name = total = None
        for line in part.read_text().splitlines():
            if line.startswith("desc: Trigger: Client Request: "):
                name = line.removeprefix("desc: Trigger: Client Request: ").strip()
            elif line.startswith("totals:"):
                total = int(line.split()[1])
        if name is not None and total is not None:
            counts[name] = counts.get(name, 0) + total
    return counts


def simrl_stage_counts(name, mjm, w, args, portable, tmp: Path, model_path: Path) -> dict:
    """Instructions per world-step of each kernel of simrl's wide schedule (see --per-stage)."""
    start = time.perf_counter()
    simrl_runner(mjm, 2 * w, "cpu", args.dtype, "wide", 1, 2, args.settle)  # compiled outside the count
    counts = []
    for worlds in (w, 2 * w):
        start_path = tmp / f"start_{worlds}_stages.npz"
        np.savez(start_path, **start_arrays(mjm, worlds, args.settle))
        prefix = tmp / f"stages_{worlds}.out"
        child = child_command("simrl", str(model_path), str(start_path), str(args.steps), "--by-launch", "--dtype",
                              args.dtype, *(["--portable-cpu"] if portable else []))
        run_child(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--collect-atstart=no",
                   f"--callgrind-out-file={prefix}", *child])
        counts.append(launch_parts(prefix))
    stages = sorted(((k, (counts[1][k] - counts[0].get(k, 0)) / (w * args.steps)) for k in counts[1]),
                    key=lambda kv: -kv[1])
    total = sum(v for _, v in stages)
    print(f"  simrl-wide per stage (worlds {2 * w} minus {w}): {total:,.0f} instructions per world-step in its "
          f"kernels ({time.perf_counter() - start:.0f} s)")
    return {"engine": "simrl-wide-stages", "model": name, "mode": "per_stage", "num_worlds": w,
            "steps": args.steps, "dtype": args.dtype, "per_stage": stages, "kernel_instructions_per_world_step": total}
