"""Static GPU report of one physics step, made on a machine without a GPU.

What a GPU step costs is decided by two things that can be read off without running it:

1. How the work is spread over threads (simrl.bench.launches). The threads per world (launch
   dimensions, times the block size of a tiled launch, over the number of worlds) say how a
   step's work is spread on a GPU: work in launches with few threads per world leaves most of a
   GPU idle unless there are very many worlds, and runs each world's work serially.
   Target: >= 90 % of the work in launches with >= 8 threads per world.

2. What each kernel costs a GPU thread (simrl.bench.ptxas): registers per thread, stack and
   spills, from ptxas -v on the PTX Warp builds for the GPU. More than 128 registers halves the
   threads an SM can keep resident (65536 registers per SM), and spills are memory traffic in
   the innermost code. Target: every kernel <= 128 registers, 0 spill bytes.

Engines (`--engine`, comma-separated): simrl (`Sim.from_model`, one CPU thread; `--schedule`
passed through when the Sim takes one; "auto", the default, is what a Sim runs on CUDA: wide)
and mujoco_warp (MuJoCo Warp, `mjw.step`; the 'bench' extra; where it branches on the device,
its CPU path is the one recorded). `--grad` reports one differentiable step instead
(simrl.diff_step forward, then its backward from a gradient seeded on qpos and qvel), forward
and adjoint launches together.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import re
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import warp as wp

import simrl
from simrl.bench.engines import import_mujoco_warp
from simrl.bench.host import machine
from simrl.bench.launches import Launch, record_mujoco_warp, record_simrl
from simrl.bench.models import integrator_name, resolve_model
from simrl.bench.ptxas import compile_launched, compile_module, entry_of, find_ptxas, kernel_numbers, ptxas_version

#: the targets: registers per thread, spill bytes per kernel, and how much of the step's work
#: runs in launches with at least WIDE_THREADS_PER_WORLD threads per world
MAX_REGISTERS = 128
MAX_SPILL_BYTES = 0
WIDE_THREADS_PER_WORLD = 8
MIN_WIDE_WORK_SHARE = 0.90

ENGINES = ("simrl", "mujoco_warp")
SCHEDULES = ("auto", "fused", "wide")


# ------------------------------------------------------------------------------ report
def short_name(key: str) -> str:
    """A readable kernel name from its key: 'build__locals__forward' -> 'forward',
    '_tile_cholesky_solve__locals__kernel' -> 'tile_cholesky_solve'."""
    parts = [p for p in key.split("__locals__") if p]
    name = parts[-1]
    if name.strip("_") in ("kernel", "") and len(parts) > 1:
        name = parts[-2]
    return name.strip("_") or key


@dataclass
class KernelRow:
    """Launches of one kernel (forward or adjoint) in one step, with its GPU build's numbers."""

    name: str
    kernel: wp.Kernel
    adjoint: bool
    launches: list[Launch] = field(default_factory=list)
    entry: str | None = None
    entry_match: str | None = None
    stats: dict | None = None  # ptxas's numbers of the entry (kernel_numbers)
    error: str | None = None


def kernel_rows(launches: list[Launch], compiled: dict) -> list[KernelRow]:
    """Launches grouped by (kernel, adjoint), in the step's order of first appearance, each with
    its entry and ptxas numbers (from the build of its module for its GPU block size: the
    smallest, for a kernel launched with several)."""
    rows: dict[tuple[int, bool], KernelRow] = {}
    for launch in launches:
        row = rows.get((id(launch.kernel), launch.adjoint))
        if row is None:
            row = rows[(id(launch.kernel), launch.adjoint)] = KernelRow(
                short_name(launch.kernel.key) + (" (adjoint)" if launch.adjoint else ""), launch.kernel,
                launch.adjoint)
        row.launches.append(launch)
    seen: dict[str, int] = {}
    for row in rows.values():  # distinct kernels of the same name (closures) are numbered
        seen[row.name] = seen.get(row.name, 0) + 1
        if seen[row.name] > 1:
            row.name += f" [{seen[row.name]}]"
        running = [lc for lc in row.launches if lc.threads > 0]
        if not running:
            continue
        block_dims = sorted({lc.gpu_block_dim for lc in running})
        built = compiled.get((id(row.kernel.module), block_dims[0]))
        if built is None:
            continue
        row.entry, row.entry_match = entry_of(row.kernel, row.adjoint, built)
        row.error = built.error
        if row.entry is not None and "registers" in built.functions.get(row.entry, {}):
            row.stats = kernel_numbers(row.entry, built.functions, built.calls)
    return list(rows.values())


def report(engine: str, launches: list[Launch], compiled: dict, num_worlds: int) -> dict:
    """The JSON record of one engine's step: its kernels and its summary against the targets."""
    total = sum(lc.seconds for lc in launches) or 1e-30
    rows = kernel_rows(launches, compiled)
    kernels = []
    for row in rows:
        per_world = sorted({lc.threads / num_worlds for lc in row.launches})
        stats = row.stats or {}
        spill = (stats["spill_store_bytes"] + stats["spill_load_bytes"]) if "spill_store_bytes" in stats else None
        kernels.append({
            "name": row.name, "key": row.kernel.key, "module": row.kernel.module.name, "adjoint": row.adjoint,
            "phase": sorted({lc.phase for lc in row.launches}), "launches": len(row.launches),
            "dims": sorted({lc.dim for lc in row.launches}),
            "tiled": row.launches[0].tiled, "gpu_block_dim": sorted({lc.gpu_block_dim for lc in row.launches}),
            "threads_per_world": [per_world[0], per_world[-1]],
            "ran": any(lc.threads > 0 for lc in row.launches),
            "entry": row.entry, "entry_match": row.entry_match, "build_error": row.error,
            "registers": stats.get("registers"), "stack_frame_bytes": stats.get("stack_frame_bytes"),
            "cumulative_stack_bytes": stats.get("cumulative_stack_bytes"),
            "spill_store_bytes": stats.get("spill_store_bytes"), "spill_load_bytes": stats.get("spill_load_bytes"),
            "spill_bytes": spill, "smem_bytes": stats.get("smem_bytes"),
            "called_functions": stats.get("called_functions"),
            "seconds": sum(lc.seconds for lc in row.launches),
            "work_share": sum(lc.seconds for lc in row.launches) / total,
        })
    ran = [k for k in kernels if k["ran"]]
    measured = [k for k in ran if k["registers"] is not None]
    wide = sum(lc.seconds for lc in launches if lc.threads >= WIDE_THREADS_PER_WORLD * num_worlds) / total
    max_registers = max((k["registers"] for k in measured), default=None)
    spill_total = sum(k["spill_bytes"] or 0 for k in measured)
    complete = len(measured) == len(ran)
    summary = {
        "launches": len(launches), "empty_launches": sum(lc.threads == 0 for lc in launches),
        "kernels": len(kernels), "kernels_measured": len(measured), "kernels_ran": len(ran),
        "max_registers": max_registers,
        "max_registers_kernel": next((k["name"] for k in measured if k["registers"] == max_registers), None),
        "spill_bytes": spill_total,
        "kernels_over_registers": [k["name"] for k in measured if k["registers"] > MAX_REGISTERS],
        "kernels_spilling": [k["name"] for k in measured if (k["spill_bytes"] or 0) > MAX_SPILL_BYTES],
        "wide_work_share": wide, "step_launch_seconds": total,
        "entry_matches": {m: sum(k["entry_match"] == m for k in ran) for m in ("exact", "by key", "not found")},
    }
    summary["registers_target_met"] = (complete and not summary["kernels_over_registers"]
                                       and not summary["kernels_spilling"])
    summary["work_target_met"] = wide >= MIN_WIDE_WORK_SHARE
    names = {(id(r.kernel), r.adjoint): r.name for r in rows}
    log = [{"kernel": names[(id(lc.kernel), lc.adjoint)], "dim": list(lc.dim), "block_dim": lc.block_dim,
            "tiled": lc.tiled, "adjoint": lc.adjoint, "phase": lc.phase, "seconds": lc.seconds} for lc in launches]
    return {"engine": engine, "kernels": kernels, "summary": summary, "launch_log": log}


def _number(x) -> str:
    return "-" if x is None else f"{x:g}" if isinstance(x, float) else str(x)


def _threads(pair) -> str:
    lo, hi = (f"{x:.3g}" if x != int(x) else str(int(x)) for x in pair)
    return lo if lo == hi else f"{lo}-{hi}"


def kernel_table(record: dict) -> str:
    """One markdown row per launched kernel, in step order."""
    lines = ["| kernel | launches | threads/world | registers | stack B | spill B | smem B | work |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for k in record["kernels"]:
        name = k["name"] + (f" (tiled, block {k['gpu_block_dim'][0]})" if k["tiled"] else "")
        registers = _number(k["registers"]) if k["ran"] else "(empty)"
        lines.append(f"| {name} | {k['launches']} | {_threads(k['threads_per_world'])} | {registers} | "
                     f"{_number(k['cumulative_stack_bytes'])} | {_number(k['spill_bytes'])} | "
                     f"{_number(k['smem_bytes'])} | {100 * k['work_share']:.1f}% |")
    return "\n".join(lines)


def _share(x: float) -> str:
    """A share as a percentage to one decimal, or two where one would round across the target
    (89.96% is not 90.0%, and "not met" beside "90.0%" reads as a mistake)."""
    for digits in range(1, 5):
        text = f"{100 * x:.{digits}f}"
        if (x < MIN_WIDE_WORK_SHARE) == (float(text) < 100 * MIN_WIDE_WORK_SHARE):
            break
    return text + "%"


def summary_lines(record: dict) -> list[tuple[str, str]]:
    s = record["summary"]
    met = {True: "met", False: "NOT met"}
    over = ", ".join(s["kernels_over_registers"] + [k for k in s["kernels_spilling"]
                                                     if k not in s["kernels_over_registers"]])
    unmeasured = s["kernels_ran"] - s["kernels_measured"]
    matches = s["entry_matches"]
    return [
        ("launches per step", f"{s['launches']}" + (f" ({s['empty_launches']} empty: a zero dimension, "
                                                     "which Warp skips)" if s["empty_launches"] else "")),
        ("kernels", f"{s['kernels']}"),
        ("CPU time of the launches (one thread: the step's work)", f"{1e3 * s['step_launch_seconds']:.1f} ms"),
        ("CUDA entries found", f"{matches['exact']} by mangled name, {matches['by key']} by key, "
                               f"{matches['not found']} not found"),
        ("max registers", f"{_number(s['max_registers'])} ({s['max_registers_kernel']})"),
        ("total spill bytes", f"{s['spill_bytes']}"),
        (f"work in launches >= {WIDE_THREADS_PER_WORLD} threads/world", _share(s["wide_work_share"])),
        (f"target: <= {MAX_REGISTERS} registers, no spills",
         met[s["registers_target_met"]] + (f" ({over})" if over else "")
         + (f" ({unmeasured} kernels without ptxas numbers)" if unmeasured else "")),
        (f"target: >= {100 * MIN_WIDE_WORK_SHARE:.0f}% of the work in launches >= {WIDE_THREADS_PER_WORLD} "
         "threads/world", met[s["work_target_met"]]),
    ]


def print_report(record: dict, title: str) -> None:
    print(f"\n{title}\n")
    print(kernel_table(record))
    print()
    for label, value in summary_lines(record):
        print(f"- {label}: {value}")


def print_side_by_side(records: list[dict]) -> None:
    rows = [summary_lines(r) for r in records]
    print("\n| | " + " | ".join(r["engine"] for r in records) + " |")
    print("|---|" + "---|" * len(records))
    for i, (label, _) in enumerate(rows[0]):
        print(f"| {label} | " + " | ".join(r[i][1] for r in rows) + " |")


def step_passes(grad: bool) -> tuple:
    """The element passes of the step (with `grad`: of the differentiable step, its finer
    launches) in float32, by name; the per-world passes (solver, factorization) are left out, and
    so is the convex collision's search (convex_detect, never differentiated) from the
    differentiable step's: it is the plain step's."""
    from simrl.sim import forward, schedule

    scalar = wp.float32
    passes = (forward.position(scalar, fine=grad)
              + (forward.collision(scalar, grouped=False) + forward.rows(scalar, grouped=False) if grad
                 else forward.constraint_rows(scalar, lanes=True, detect=True))
              + forward.transmission_body(scalar) + forward.velocity(scalar, fine=grad) + forward.reference(scalar)
              + forward.sensor_passes(scalar, hfield=not grad))
    return tuple(p for p in passes if p.over != schedule.WORLD)


def report_passes(names: list[str], grad: bool, arch: int, ptxas: Path, build_dir: Path) -> list[dict]:
    """Registers, stack and spills of the wide kernels of the named passes, built in a module
    of their own, without a model or a recorded step: for working on one stage."""
    passes = {p.name: p for p in step_passes(grad)}
    unknown = [n for n in names if n not in passes]
    if unknown:
        raise SystemExit(f"--passes: unknown pass(es) {unknown}; the {'differentiable ' if grad else ''}step's "
                         f"element passes: {', '.join(passes)}")
    from simrl.sim import schedule

    tag = "report_" + ("grad_" if grad else "") + hashlib.sha1(",".join(sorted(names)).encode()).hexdigest()[:10]
    for n in names:
        schedule._wide_pass(passes[n], wp.float32, tag, grad)
    module = schedule.kernel_module(wp.float32, tag, grad)
    compiled = compile_module(module, 256, arch, build_dir, ptxas)
    if compiled.error:
        raise SystemExit(f"--passes: building failed: {compiled.error}")
    rows = []
    for entry in compiled.entries:
        numbers = kernel_numbers(entry, compiled.functions, compiled.calls)
        kernel = re.sub(r"_[0-9a-f]{8}_cuda_kernel_(forward|backward)$", "", entry)
        rows.append({"kernel": kernel + (" (adjoint)" if entry.endswith("_backward") else ""), **numbers})
    return rows


def _build_dir(keep: str | None) -> Path:
    """--build-dir, made, else a new temporary directory (removed by the caller)."""
    build_dir = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="gpu_report_"))
    build_dir.mkdir(parents=True, exist_ok=True)
    return build_dir


def passes_report(args) -> int:
    """--passes: print (and write to `args.out`) the registers, stack and spills of the named
    passes' wide kernels for sm_`args.arch`. `args`: the parsed command line of
    scripts/gpu_report.py."""
    ptxas = find_ptxas()
    build_dir = _build_dir(args.build_dir)
    try:
        rows = report_passes(args.passes.split(","), args.grad, args.arch, ptxas, build_dir)
    finally:
        if not args.build_dir:
            shutil.rmtree(build_dir, ignore_errors=True)
    print(f"sm_{args.arch}, {'differentiable step' if args.grad else 'step'}; ptxas {ptxas_version(ptxas)}")
    print("| kernel | registers | stack B | spill B |")
    print("|---|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: r["kernel"]):
        spill = r["spill_store_bytes"] + r["spill_load_bytes"]
        print(f"| {r['kernel']} | {r['registers']} | {r['cumulative_stack_bytes']} | {spill} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"arch": args.arch, "grad": args.grad, "kernels": rows}, indent=2,
                                             default=list))
    return 0


def engines_of(engine: str, grad: bool) -> list[str]:
    """The engines named by --engine (comma-separated); a SystemExit that names what is refused."""
    engines = engine.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not engines:
        raise SystemExit(f"--engine {engine!r}: unknown engine(s) {unknown}; choose from {', '.join(ENGINES)}")
    if grad and "mujoco_warp" in engines:
        raise SystemExit("--grad: mujoco_warp has no differentiable step here (only simrl.diff_step is reported); "
                         "use --engine simrl with --grad")
    return engines


def step_report(args) -> int:
    """Record one step of each engine of `args.engine` on `args.model` at `args.worlds` worlds,
    build the launched modules for sm_`args.arch`, print each engine's report (and the engines
    side by side) and write the whole report to `args.out`. `args`: the parsed command line of
    scripts/gpu_report.py, with `command`, the line as typed."""
    engines = engines_of(args.engine, args.grad)
    if args.worlds < 1:
        raise SystemExit(f"--worlds must be a positive integer, got {args.worlds}")
    ptxas = find_ptxas()  # before minutes of work, so that a missing one fails at once
    mjw = None
    if "mujoco_warp" in engines:
        mjw, error = import_mujoco_warp()
        if mjw is None:
            raise SystemExit(f"--engine mujoco_warp: {error or 'mujoco_warp is not installed'} "
                             "(pip install -e \".[bench]\")")

    name, mjm = resolve_model(args.model)
    integrator = integrator_name(mjm)
    mode = "one differentiable step (diff_step forward + backward)" if args.grad else "one step"
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, {integrator}; {args.worlds} worlds; {mode}; "
          f"sm_{args.arch}")
    print(f"machine: {machine()}; ptxas {ptxas_version(ptxas)} ({ptxas})")

    recorded = {}
    for engine in engines:
        start = time.perf_counter()
        if engine == "simrl":
            recorded[engine] = record_simrl(mjm, args.worlds, args.schedule, args.grad, args.settle)
        else:
            recorded[engine] = record_mujoco_warp(mjw, mjm, args.worlds, args.settle)
        print(f"{engine}: recorded {len(recorded[engine]['launches'])} launches "
              f"({time.perf_counter() - start:.1f} s, compile included)")
        if recorded[engine]["deferred"]:
            print(f"  ({recorded[engine]['deferred']} launches with record_cmd=True did not run and are not counted)")

    build_dir = _build_dir(args.build_dir)
    try:
        start = time.perf_counter()
        launches = [lc for r in recorded.values() for lc in r["launches"]]
        print(f"building the launched modules for sm_{args.arch} ({args.jobs} at a time):")
        compiled = compile_launched(launches, args.arch, build_dir, ptxas, args.jobs)
        print(f"built in {time.perf_counter() - start:.1f} s")
    finally:
        if not args.build_dir:
            shutil.rmtree(build_dir, ignore_errors=True)
    for c in compiled.values():
        if c.error:
            print(f"warning: {c.name}: {c.error}", file=sys.stderr)

    records = []
    for engine, r in recorded.items():
        record = report(engine, r["launches"], compiled, args.worlds)
        record["state"] = r["state"]
        if engine == "simrl":
            record["schedule"] = r["schedule"]
        else:
            record["version"] = r["version"]
        records.append(record)
        state = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in r["state"].items())
        schedule = f", schedule {r['schedule']}" if engine == "simrl" else ""
        print_report(record, f"{engine}{schedule}: {name}, {args.worlds} worlds, {mode}, sm_{args.arch} "
                             f"(state: {state})")
    if len(records) > 1:
        print_side_by_side(records)

    if args.out:
        mjw_version = recorded.get("mujoco_warp", {}).get("version")
        out = {"command": args.command, "date": datetime.datetime.now().isoformat(timespec="seconds"),
               "machine": machine(), "versions": {"warp": wp.__version__, "mujoco": mujoco.__version__,
                                                  "simrl": simrl.__version__, "mujoco_warp": mjw_version,
                                                  "ptxas": ptxas_version(ptxas)},
               "model": {"name": name, "nq": mjm.nq, "nv": mjm.nv, "nu": mjm.nu, "integrator": integrator},
               "worlds": args.worlds, "arch": args.arch, "grad": args.grad,
               "targets": {"max_registers": MAX_REGISTERS, "max_spill_bytes": MAX_SPILL_BYTES,
                           "wide_threads_per_world": WIDE_THREADS_PER_WORLD,
                           "min_wide_work_share": MIN_WIDE_WORK_SHARE},
               "modules": [{"name": c.name, "block_dim": c.block_dim, "seconds": c.seconds, "entries": len(c.entries),
                            "error": c.error, "ptx": str(c.ptx) if args.build_dir else None}
                           for c in compiled.values()],
               "engines": records}
        Path(args.out).write_text(json.dumps(out, indent=2, default=list))
        print(f"\nwrote {args.out}")
    return 0
