#!/usr/bin/env python
"""Static GPU report of one physics step, made on a machine without a GPU.

    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90
    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90 --grad --out report.json
    python scripts/gpu_report.py --model quadruped --worlds 4096 --arch 90 --engine simrl,mujoco_warp

What a GPU step costs is decided by two things that can be read off without running it:

1. How the work is spread over threads. Every Warp launch of one step is recorded on the CPU
   (`warp.launch` and `warp.launch_tiled` patched for the duration of the step): its kernel, its
   launch dimensions, the block size a tiled launch asks for, whether it is an adjoint launch,
   and its wall time. Warp runs a CPU launch synchronously, each of its threads in turn on the
   calling thread, so a launch's CPU time is the work of all its threads together; its share of
   the step's summed launch time is its share of the step's work. The threads per world
   (launch dimensions, times the block size of a tiled launch, over the number of worlds) say
   how that work is spread on a GPU: work in launches with few threads per world leaves most
   of a GPU idle unless there are very many worlds, and runs each world's work serially.
   Target: >= 90 % of the work in launches with >= 8 threads per world.

2. What each kernel costs a GPU thread. Every Warp module that had a (non-empty) launch is
   compiled ahead of time to PTX for the GPU architecture (`--arch`, e.g. 90 for Hopper) with the
   block size it is launched with there (Warp's CUDA default, 256, unless the launch asks for
   one), and the PTX is assembled by ptxas -v, which reports per kernel the registers per thread,
   the stack frame, and the bytes spilled from registers to local memory. More than 128
   registers halves the threads an SM can keep resident (65536 registers per SM), and spills are
   memory traffic in the innermost code. Target: every kernel <= 128 registers, 0 spill bytes.

A kernel's CUDA entry is its mangled name (key and hash) + "_cuda_kernel_forward" (or
"_cuda_kernel_backward" for an adjoint launch); each is checked against the entries of the PTX.

Engines (`--engine`, comma-separated): simrl (`Sim.from_model`, one CPU thread; `--schedule`
passed through when the Sim takes one; "auto", the default, is what a Sim runs on CUDA: wide)
and mujoco_warp (MuJoCo Warp, `mjw.step`; the 'bench' extra; where it branches on the device,
its CPU path is the one recorded). `--grad`
reports one differentiable step instead (simrl.diff_step forward, then its backward from a
gradient seeded on qpos and qvel), forward and adjoint launches together.
Both engines start from the same state: the model's "home" keyframe when it has one (else qpos0)
stepped `--settle` times (default 200) by MuJoCo with the keyframe's controls, so that a robot
stands on its contacts as in training, then the same random controls; one step is taken first
to compile, and the next one is recorded.

ptxas: Warp writes PTX newer than many installed CUDA toolkits read; the one of pip's
nvidia-cuda-nvcc wheel is used (`pip install -e ".[gpu-tools]"`), or the one named by $PTXAS.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib.util
import inspect
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import mujoco
import numpy as np
import torch
import warp as wp

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmark import import_mujoco_warp, initial_state, machine, random_controls, resolve_model  # noqa: E402

import simrl  # noqa: E402

#: the targets: registers per thread, spill bytes per kernel, and how much of the step's work
#: runs in launches with at least WIDE_THREADS_PER_WORLD threads per world
MAX_REGISTERS = 128
MAX_SPILL_BYTES = 0
WIDE_THREADS_PER_WORLD = 8
MIN_WIDE_WORK_SHARE = 0.90

#: the block size of a CUDA launch that asks for none (warp.launch's documented default)
CUDA_DEFAULT_BLOCK_DIM = 256

ENGINES = ("simrl", "mujoco_warp")
SCHEDULES = ("auto", "fused", "wide")


# ------------------------------------------------------------------------------ launches
@dataclass
class Launch:
    """One kernel launch of the recorded step."""

    kernel: wp.Kernel  # the kernel that ran (for a generic kernel, its overload)
    dim: tuple[int, ...]  # launch dimensions as asked (a tiled launch's block is not in them)
    block_dim: int | None  # the block size asked for (None: the device's default)
    tiled: bool  # launched by wp.launch_tiled: `block_dim` threads work on each tile
    adjoint: bool  # the kernel's backward (adjoint=True)
    phase: str  # "forward" or "backward" (of --grad's differentiable step)
    seconds: float  # wall time of the launch on the CPU: the work of all its threads

    @property
    def threads(self) -> int:
        """Threads this launch runs on a GPU."""
        tile = self.gpu_block_dim if self.tiled else 1
        return math.prod(self.dim) * tile

    @property
    def gpu_block_dim(self) -> int:
        """The block size on a GPU, which the kernel is compiled for (its launch bounds)."""
        return self.block_dim if self.block_dim and self.block_dim > 0 else CUDA_DEFAULT_BLOCK_DIM


_LAUNCH_SIGNATURE = inspect.signature(wp.launch)


class LaunchRecorder:
    """Records every `wp.launch` / `wp.launch_tiled` made while it is entered.

    Both attributes of the `warp` module are replaced: simrl and mujoco_warp call them as
    `wp.launch(...)`, so they all pass through here. `wp.launch_tiled` forwards to Warp's own
    launch function, not to the `wp.launch` attribute, so a tiled launch is recorded once.
    `phase` labels the launches recorded from then on."""

    def __init__(self):
        self.launches: list[Launch] = []
        self.phase = "forward"
        self.deferred = 0  # record_cmd=True launches: they do not run in the step

    def __enter__(self):
        self._launch, self._launch_tiled = wp.launch, wp.launch_tiled
        wp.launch = self._recording(self._launch, tiled=False)
        wp.launch_tiled = self._recording(self._launch_tiled, tiled=True)
        return self

    def __exit__(self, *exc):
        wp.launch, wp.launch_tiled = self._launch, self._launch_tiled
        return False

    def _recording(self, launch, tiled: bool):
        def recorded(*args, **kwargs):
            bound = _LAUNCH_SIGNATURE.bind(*args, **kwargs)
            a = {**{k: p.default for k, p in _LAUNCH_SIGNATURE.parameters.items()}, **bound.arguments}
            start = time.perf_counter()
            result = launch(*args, **kwargs)
            seconds = time.perf_counter() - start
            if a["record_cmd"]:
                self.deferred += 1
                return result
            kernel = a["kernel"]
            if kernel.is_generic:  # the overload that was compiled for these arguments
                overload = kernel.get_overload(kernel.infer_argument_types([*a["inputs"], *a["outputs"]]))
                kernel = overload or kernel
            dim = (int(a["dim"]),) if isinstance(a["dim"], (int, np.integer)) else tuple(int(x) for x in a["dim"])
            block_dim = a["block_dim"]
            self.launches.append(Launch(kernel, dim, None if block_dim is None else int(block_dim), tiled,
                                        bool(a["adjoint"]), self.phase, seconds))
            return result

        return recorded


#: mj_step calls from the start state before the recorded step, so that a robot stands on its
#: contacts as it does in training (--settle)
SETTLE_STEPS = {"n": 200}


def settled_state(mjm: mujoco.MjModel) -> mujoco.MjData:
    """The 'home' keyframe (else qpos0), stepped SETTLE_STEPS times by MuJoCo with the keyframe's
    controls (else zero): the state every engine's recorded step starts from."""
    mjd = initial_state(mjm)
    for _ in range(SETTLE_STEPS["n"]):
        mujoco.mj_step(mjm, mjd)
    return mjd


def _start_state(mjm: mujoco.MjModel, num_worlds: int):
    """qpos, qvel [W, nq / nv] (`settled_state`) and random controls [W, nu]."""
    mjd = settled_state(mjm)
    return (np.tile(mjd.qpos, (num_worlds, 1)), np.tile(mjd.qvel, (num_worlds, 1)),
            random_controls(mjm, num_worlds))


def make_sim(mjm: mujoco.MjModel, num_worlds: int, schedule: str | None) -> tuple[simrl.Sim, str]:
    """The Sim on the CPU, one thread; returns it and the schedule it runs. `schedule` is passed
    through when `Sim.from_model` takes one; without that keyword the engine runs one schedule,
    fused, and asking for another one is an error."""
    kwargs = {}
    if "schedule" in inspect.signature(simrl.Sim.from_model).parameters:
        # "auto" (the default) is what a Sim chooses on CUDA, the device this report is about
        kwargs["schedule"] = "wide" if schedule in (None, "auto") else schedule
    elif schedule not in (None, "fused"):
        raise SystemExit(f"--schedule {schedule}: this simrl's Sim.from_model takes no schedule= keyword "
                         "(its engine runs the fused schedule only); leave --schedule out or pass fused")
    try:
        sim = simrl.Sim.from_model(mjm, num_worlds=num_worlds, device="cpu", cpu_threads=1, **kwargs)
    except simrl.UnsupportedFeatureError as e:
        raise SystemExit(f"simrl cannot simulate this model: {e}") from e
    if not kwargs:
        label = "fused (Sim.from_model has no schedule= keyword)"
    elif schedule in (None, "auto"):
        label = "auto (wide, as on a GPU)"
    else:
        label = kwargs["schedule"]
    qpos, qvel, ctrl = _start_state(mjm, num_worlds)
    sim.qpos, sim.qvel, sim.ctrl = qpos, qvel, ctrl
    return sim, label


def record_simrl(mjm: mujoco.MjModel, num_worlds: int, schedule: str | None, grad: bool) -> dict:
    """The launches of one simrl step (Sim.step(1)), or with `grad` of one simrl.diff_step and
    its backward, after one such step that compiles. Returns {"launches", "deferred", "schedule",
    "state"}."""
    sim, label = make_sim(mjm, num_worlds, schedule)
    if not grad:
        sim.step(1)  # compiles (or loads from Warp's cache) what the step launches
        with LaunchRecorder() as recorder:
            sim.step(1)
        contacts = sim.contact.active.sum(dim=1).double()
        niter = sim.solver_niter.double()
        state = {"contacts_per_world": float(contacts.mean()), "solver_niter_mean": float(niter.mean()),
                 "solver_niter_max": int(niter.max())}
        return {"launches": recorder.launches, "deferred": recorder.deferred, "schedule": label, "state": state}

    qpos0, qvel0 = sim.qpos.clone(), sim.qvel.clone()

    def diff_step(recorder=None):
        ctrl = sim.ctrl.clone().requires_grad_(True)
        qpos1, qvel1 = simrl.diff_step(sim, qpos0, qvel0, ctrl)
        if recorder is not None:
            recorder.phase = "backward"
        # seeds d loss / d qpos1 = d loss / d qvel1 = 1 and runs the tape backwards
        (qpos1.sum() + qvel1.sum()).backward()
        return ctrl.grad

    diff_step()  # compiles
    with LaunchRecorder() as recorder:
        grad_ctrl = diff_step(recorder)
    state = {"finite_gradient": bool(torch.isfinite(grad_ctrl).all())}
    return {"launches": recorder.launches, "deferred": recorder.deferred, "schedule": label, "state": state}


def record_mujoco_warp(mjw, mjm: mujoco.MjModel, num_worlds: int) -> dict:
    """The launches of one `mjw.step` on the CPU device, after one that compiles."""
    note = None
    if mjm.opt.solver != mujoco.mjtSolver.mjSOL_NEWTON:
        # mujoco_warp refuses PGS; simrl solves with Newton whatever the model says, and any
        # converging solver finds the same solution: both engines run Newton
        mjm = _with_newton(mjm)
        note = "solver switched to Newton for mujoco_warp (simrl always solves with Newton)"
    mjd = settled_state(mjm)
    with wp.ScopedDevice("cpu"):
        m = mjw.put_model(mjm)
        d = mjw.put_data(mjm, mjd, nworld=num_worlds)
        d.ctrl.assign(random_controls(mjm, num_worlds).astype(np.float32))
        mjw.step(m, d)  # compiles (or loads from Warp's cache) every kernel it launches
        with LaunchRecorder() as recorder:
            mjw.step(m, d)
    niter = d.solver_niter.numpy().astype(np.float64)
    state = {"contacts_per_world": float(d.nacon.numpy()[0]) / num_worlds, "solver_niter_mean": float(niter.mean()),
             "solver_niter_max": int(niter.max())}
    if note:
        state["note"] = note
    return {"launches": recorder.launches, "deferred": recorder.deferred, "state": state,
            "version": getattr(mjw, "__version__", "unknown")}


def _with_newton(mjm: mujoco.MjModel) -> mujoco.MjModel:
    """A copy of the model whose constraint solver is Newton."""
    import copy

    out = copy.deepcopy(mjm)
    out.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return out


# ------------------------------------------------------------------------------ ptxas
def find_ptxas() -> Path:
    """ptxas from $PTXAS, else from pip's nvidia-cuda-nvcc wheel (nvidia/cu13/bin/ptxas, or
    nvidia/cuda_nvcc/bin/ptxas in the CUDA 12 wheels), the newest one found."""
    if os.environ.get("PTXAS"):
        path = Path(os.environ["PTXAS"])
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SystemExit(f"PTXAS={path}: no such executable")
        return path
    spec = importlib.util.find_spec("nvidia")
    candidates = []
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += list(Path(root).glob("cu[0-9]*/bin/ptxas")) + list(Path(root).glob("cuda_nvcc/bin/ptxas"))
    if not candidates:
        raise SystemExit("ptxas not found: Warp's PTX needs a recent one; install pip's nvidia-cuda-nvcc with "
                         "`pip install -e \".[gpu-tools]\"` (or set PTXAS=/path/to/ptxas)")

    def version(path: Path) -> tuple[int, ...]:
        found = re.search(r"cu(\d+)", path.parent.parent.name)
        return (int(found.group(1)),) if found else (12,)

    return max(candidates, key=version)


def ptxas_version(ptxas: Path) -> str:
    out = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True).stdout
    found = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"{found.group(1)} ({found.group(2)})" if found else out.strip().splitlines()[-1]


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_CUMULATIVE_STACK = re.compile(r"(\d+) bytes cumulative stack size")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, dict]:
    """ptxas -v's report (its stderr) per function: {name: {"stack_frame_bytes",
    "spill_store_bytes", "spill_load_bytes"}}, and for entry functions (kernels) also "entry":
    True, "arch", "registers", "cumulative_stack_bytes" and "smem_bytes".

    ptxas prints, for each entry, "Compiling entry function 'NAME' for 'sm_XX'", then
    "Function properties for NAME" with its stack frame and spills, then "Used R registers, ...,
    S bytes cumulative stack size" (registers and stack of the kernel with everything it calls).
    The properties of functions that were not inlined ("Function properties for _ZN...") come
    in between entries: which entry calls them is in the PTX (`ptx_calls`), not here."""
    functions: dict[str, dict] = {}
    entry = properties = None
    for line in text.splitlines():
        if found := _ENTRY.search(line):
            entry, properties = found.group(1), None
            functions.setdefault(entry, {}).update(entry=True, arch=found.group(2))
        elif found := _PROPERTIES.search(line):
            properties = found.group(1)
        elif (found := _FRAME.search(line)) and properties is not None:
            stack, stores, loads = (int(x) for x in found.groups())
            functions.setdefault(properties, {}).update(stack_frame_bytes=stack, spill_store_bytes=stores,
                                                        spill_load_bytes=loads)
            properties = None
        elif (found := _USED.search(line)) and entry is not None:
            record = functions[entry]
            record["registers"] = int(found.group(1))
            cumulative = _CUMULATIVE_STACK.search(line)
            # ptxas leaves out a cumulative stack of 0 bytes
            record["cumulative_stack_bytes"] = int(cumulative.group(1)) if cumulative else 0
            smem = _SMEM.search(line)
            record["smem_bytes"] = int(smem.group(1)) if smem else 0
            entry = None
    return functions


# a function's declaration: ".visible .entry NAME(" or ".func (.param .b32 func_retval0) NAME("
_PTX_FUNCTION = re.compile(r"^[ \t]*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+"
                           r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", flags=re.MULTILINE)
_PTX_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")


def ptx_entries(ptx: str) -> list[str]:
    """Names of the entry functions (kernels) declared in PTX text."""
    return [m.group(2) for m in _PTX_FUNCTION.finditer(ptx) if m.group(1) == "entry"]


def ptx_calls(ptx: str) -> dict[str, set[str]]:
    """The functions each function of PTX text calls directly: {caller: {callee, ...}}. A
    function's text runs from its declaration to the next one."""
    heads = list(_PTX_FUNCTION.finditer(ptx))
    calls: dict[str, set[str]] = {}
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = ptx[head.end():after.start() if after else len(ptx)]
        calls.setdefault(head.group(2), set()).update(_PTX_CALL.findall(body))
    return calls


def kernel_numbers(entry: str, functions: dict[str, dict], calls: dict[str, set[str]]) -> dict:
    """ptxas's numbers of one kernel: its registers and cumulative stack (ptxas counts what it
    calls), its own stack frame, and its spills with those of every function it calls (each
    once), which run in the kernel as much as its own."""
    own = functions[entry]
    reached, todo = set(), list(calls.get(entry, ()))
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(calls.get(name, ()))
    stores = own.get("spill_store_bytes", 0) + sum(functions.get(f, {}).get("spill_store_bytes", 0) for f in reached)
    loads = own.get("spill_load_bytes", 0) + sum(functions.get(f, {}).get("spill_load_bytes", 0) for f in reached)
    return {"registers": own.get("registers"), "stack_frame_bytes": own.get("stack_frame_bytes"),
            "cumulative_stack_bytes": max(own.get("cumulative_stack_bytes", 0), own.get("stack_frame_bytes", 0)),
            "spill_store_bytes": stores, "spill_load_bytes": loads, "smem_bytes": own.get("smem_bytes"),
            "called_functions": sorted(reached)}


@dataclass
class CompiledModule:
    """One Warp module built for the GPU with one block size: its PTX's entries and ptxas's report."""

    name: str
    block_dim: int
    ptx: Path
    entries: list[str]  # the PTX's entry functions
    calls: dict[str, set[str]]  # the PTX's call graph
    functions: dict[str, dict]  # ptxas's report per function
    seconds: float
    error: str | None = None


def compile_module(module, block_dim: int, arch: int, build_dir: Path, ptxas: Path) -> CompiledModule:
    """PTX of `module` for sm_`arch` with launch bounds `block_dim` (wp.compile_aot_module), then
    ptxas -v on it. The module's block_dim option is set for the build and restored after."""
    start = time.perf_counter()
    saved = module.options["block_dim"]
    if saved != block_dim:
        wp.set_module_options({"block_dim": block_dim}, module=module)
    try:
        paths = wp.compile_aot_module(module, arch=arch, use_ptx=True, module_dir=build_dir)
    finally:
        if saved != block_dim:
            wp.set_module_options({"block_dim": saved}, module=module)
    ptx_path = Path(paths[-1])
    # Warp's PTX ends in a NUL byte, which ptxas rejects ("Unexpected EOF")
    text = ptx_path.read_bytes().replace(b"\0", b"").decode()
    clean = ptx_path.with_name(ptx_path.stem + ".clean.ptx")
    clean.write_text(text)
    target = re.search(r"^\s*\.target\s+(\w+)", text, flags=re.MULTILINE)
    gpu = target.group(1) if target else f"sm_{arch}"
    result = subprocess.run([str(ptxas), "-v", f"-arch={gpu}", str(clean), "-o", str(clean.with_suffix(".cubin"))],
                            capture_output=True, text=True)
    error = None
    if result.returncode != 0:
        error = f"ptxas failed ({result.returncode}): {result.stderr.strip()[-600:]}"
        if "Unsupported .version" in result.stderr:
            error += " -- this ptxas is older than the PTX; install pip's: pip install -e \".[gpu-tools]\""
    return CompiledModule(module.name, block_dim, clean, ptx_entries(text), ptx_calls(text),
                          parse_ptxas(result.stderr), time.perf_counter() - start, error)


def compile_launched(launches: list[Launch], arch: int, build_dir: Path, ptxas: Path, jobs: int,
                     log=print) -> dict[tuple[int, int], CompiledModule]:
    """Every (module, GPU block size) that a non-empty launch needs, built and assembled; the
    modules in parallel (`jobs`), the block sizes of one module one after another (each build
    sets the module's block_dim option). Keyed by (id(module), block_dim)."""
    needed: dict[int, tuple[object, list[int]]] = {}
    for launch in launches:
        if launch.threads == 0:
            continue  # Warp skips a launch with a zero dimension: nothing of it runs on a GPU
        module = launch.kernel.module
        _, sizes = needed.setdefault(id(module), (module, []))
        if launch.gpu_block_dim not in sizes:
            sizes.append(launch.gpu_block_dim)

    def build(module, sizes):
        built = []
        for block_dim in sizes:
            built.append(compile_module(module, block_dim, arch, build_dir, ptxas))
            log(f"  built {module.name} (block {block_dim}) in {built[-1].seconds:.1f} s")
        return module, built

    compiled = {}
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for module, built in pool.map(lambda item: build(*item), needed.values()):
            for c in built:
                compiled[(id(module), c.block_dim)] = c
    return compiled


def entry_of(kernel: wp.Kernel, adjoint: bool, compiled: CompiledModule) -> tuple[str | None, str]:
    """The CUDA entry of `kernel` (adjoint: its backward) in `compiled`, and how it was found:
    "exact" (kernel.get_mangled_name() + the entry suffix is in the PTX), "by key" (the PTX has
    exactly one entry of the kernel's key with some 8-digit hash), or "not found"."""
    suffix = "_cuda_kernel_backward" if adjoint else "_cuda_kernel_forward"
    name = kernel.get_mangled_name() + suffix
    if name in compiled.entries:
        return name, "exact"
    pattern = re.compile(re.escape(kernel.key) + r"_[0-9a-f]{8}" + re.escape(suffix) + "$")
    matches = [e for e in compiled.entries if pattern.match(e)]
    if len(matches) == 1:
        return matches[0], "by key"
    return None, "not found"


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
    passes = (forward.position(scalar, fine=grad) + forward.velocity(scalar, fine=grad)
              + forward.constraint_rows(scalar, grouped=not grad, detect=not grad) + forward.sensor_passes(scalar))
    return tuple(p for p in passes if p.over != schedule.WORLD)


def report_passes(names: list[str], grad: bool, arch: int, ptxas: Path, build_dir: Path) -> list[dict]:
    """Registers, stack and spills of the wide kernels of the named passes, built in a module
    of their own (seconds, where the whole step takes minutes): for working on one stage."""
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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model",
                        help="MJCF path, a robot in envs/assets (quadruped) or a gymnasium asset (ant, humanoid)")
    parser.add_argument("--passes",
                        help="comma-separated pass names (simrl/sim/forward.py): build only their wide kernels "
                             "(with --grad, the differentiable step's and their adjoints) and print registers, "
                             "stack and spills; no model, no step recorded, seconds instead of minutes")
    parser.add_argument("--worlds", type=int, default=4096, help="number of worlds (default 4096)")
    parser.add_argument("--arch", type=int, default=90, help="GPU architecture, e.g. 90 for sm_90 (H100, H200)")
    parser.add_argument("--schedule", choices=SCHEDULES,
                        help="simrl's kernel schedule, passed to Sim.from_model when it takes one (default auto: "
                             "wide, what a Sim runs on CUDA; fused is the CPU's)")
    parser.add_argument("--grad", action="store_true",
                        help="report one differentiable step (simrl.diff_step) and its backward instead")
    parser.add_argument("--engine", default="simrl", help="comma-separated, from simrl, mujoco_warp (default simrl)")
    parser.add_argument("--out", help="write the whole report as JSON to this file")
    parser.add_argument("--build-dir", help="keep the PTX, ptxas input and cubins here (default: a temporary "
                                            "directory, removed afterwards)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1,
                        help="modules compiled in parallel (default: the number of cores)")
    parser.add_argument("--settle", type=int, default=SETTLE_STEPS["n"],
                        help="MuJoCo steps from the keyframe before the recorded step (default 200)")
    args = parser.parse_args(argv)
    if args.out:  # made now: a report of minutes must not end unable to write what it measured
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    if args.passes:
        ptxas = find_ptxas()
        build_dir = Path(args.build_dir) if args.build_dir else Path(tempfile.mkdtemp(prefix="gpu_report_"))
        build_dir.mkdir(parents=True, exist_ok=True)
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
    if not args.model:
        parser.error("--model is required (unless --passes)")
    if args.settle < 0:
        parser.error("--settle must be >= 0")
    SETTLE_STEPS["n"] = args.settle

    engines = args.engine.split(",")
    unknown = [e for e in engines if e not in ENGINES]
    if unknown or not engines:
        raise SystemExit(f"--engine {args.engine!r}: unknown engine(s) {unknown}; choose from {', '.join(ENGINES)}")
    if args.worlds < 1:
        raise SystemExit(f"--worlds must be a positive integer, got {args.worlds}")
    if args.grad and "mujoco_warp" in engines:
        raise SystemExit("--grad: mujoco_warp has no differentiable step here (only simrl.diff_step is reported); "
                         "use --engine simrl with --grad")
    ptxas = find_ptxas()  # before minutes of work, so that a missing one fails at once
    mjw = None
    if "mujoco_warp" in engines:
        mjw, error = import_mujoco_warp()
        if mjw is None:
            raise SystemExit(f"--engine mujoco_warp: {error or 'mujoco_warp is not installed'} "
                             "(pip install -e \".[bench]\")")

    name, mjm = resolve_model(args.model)
    integrator = mujoco.mjtIntegrator(mjm.opt.integrator).name.removeprefix("mjINT_")
    mode = "one differentiable step (diff_step forward + backward)" if args.grad else "one step"
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, {integrator}; {args.worlds} worlds; {mode}; "
          f"sm_{args.arch}")
    print(f"machine: {machine()}; ptxas {ptxas_version(ptxas)} ({ptxas})")

    recorded = {}
    for engine in engines:
        start = time.perf_counter()
        if engine == "simrl":
            recorded[engine] = record_simrl(mjm, args.worlds, args.schedule, args.grad)
        else:
            recorded[engine] = record_mujoco_warp(mjw, mjm, args.worlds)
        print(f"{engine}: recorded {len(recorded[engine]['launches'])} launches "
              f"({time.perf_counter() - start:.1f} s, compile included)")
        if recorded[engine]["deferred"]:
            print(f"  ({recorded[engine]['deferred']} launches with record_cmd=True did not run and are not counted)")

    build_dir = Path(args.build_dir) if args.build_dir else Path(tempfile.mkdtemp(prefix="gpu_report_"))
    build_dir.mkdir(parents=True, exist_ok=True)
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
        command = "python scripts/gpu_report.py " + " ".join(sys.argv[1:] if argv is None else argv)
        mjw_version = recorded.get("mujoco_warp", {}).get("version")
        out = {"command": command, "date": datetime.datetime.now().isoformat(timespec="seconds"),
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


if __name__ == "__main__":
    sys.exit(main())
