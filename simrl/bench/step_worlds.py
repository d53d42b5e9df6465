"""Step a batch of worlds with one engine and exit: the child process that the instruction
counts (simrl.bench.instructions, simrl.bench.lines) run under a counter (valgrind's callgrind
or `perf stat`), once with STEPS and once with 0 steps, so that the difference is the steps alone.

    python simrl/bench/step_worlds.py ENGINE MODEL.mjb START.npz STEPS [--schedule fused] [--dtype float32]

ENGINE is `simrl` (Sim.step, one thread) or `mujoco` (mj_step through mujoco.rollout, one
thread). MODEL.mjb is the compiled model (mujoco.mj_saveModel), START.npz the start of every
world (`qpos [W, nq]`, `qvel [W, nv]`, `ctrl [W, nu]`, `state [W, nstate]`: MuJoCo's
mjSTATE_FULLPHYSICS), written by the benchmark. Both engines take one step first (the same in
the 0-step run, so that whatever the first step sets up is not counted), then STEPS steps,
all under constant controls. It is run by its path, not as `-m simrl.bench.step_worlds`, and
imports only what the engine needs: MuJoCo's child never loads simrl, torch or Warp (the parent
puts the simrl it runs on PYTHONPATH for simrl's child).

`--callgrind` (under `valgrind --tool=callgrind --instr-atstart=no`): the steps, and nothing
else, run with callgrind's instrumentation on, switched by the client requests
CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION (callgrind.h), which the
child makes itself through a few bytes of machine code (no compiler needed); so the imports
and the Sim's construction run uninstrumented.

`--portable-cpu` builds simrl's kernels for x86-64-v3 (AVX2 and FMA, the widest code valgrind
executes) instead of `-march=native`, which here would emit AVX-512; the benchmark compiles
them in its own process first, so that the child only loads them from Warp's kernel cache.

`--grad plain|forward|rollout` counts STEPS calls of simrl.diff_step (forward only, or with the
backward) or of Sim.step, after a whole uncounted rollout (benchmark.py --grad H
--count-instructions: simrl.bench.grad).

`--by-launch` and `--line-tables DIR` attribute simrl's count: to each launch of the wide
schedule (step_simrl_by_launch), or to the source lines of the kernels (step_simrl_with_symbols).
"""

import argparse
import contextlib
import ctypes
import json
import mmap
import platform
import subprocess
import sys
from pathlib import Path

import mujoco
import numpy as np

# Warp's defaults with a fixed target CPU in place of -march=native (warp.config.cpu_compiler_flags)
PORTABLE_CPU_FLAGS = ("-target-cpu x86-64-v3 -mllvm=-inline-threshold=9000 "
                      "-mllvm=-inline-cold-callsite-threshold=3000 -mllvm=-slp-recursion-max-depth=4")
# clang's flags for a line table in each kernel object (what addr2line reads), and no more debug info
LINE_TABLES = "-debug-info-kind=line-tables-only -dwarf-version=4"


# A Valgrind client request on x86-64 (valgrind.h, VALGRIND_DO_CLIENT_REQUEST_EXPR): rdi points
# to [request, arg1..arg5]; the four rotations of rdi (by 128 bits in all: no change) followed by
# `xchg rbx, rbx` are the sequence Valgrind recognizes, and it leaves its answer in rdx. Outside
# Valgrind the code does nothing and returns the default, 0.
_REQUEST_CODE = bytes([
    0x48, 0x89, 0xF8,        # mov rax, rdi
    0x31, 0xD2,              # xor edx, edx        (the default answer)
    0x48, 0xC1, 0xC7, 0x03,  # rol rdi, 3
    0x48, 0xC1, 0xC7, 0x0D,  # rol rdi, 13
    0x48, 0xC1, 0xC7, 0x3D,  # rol rdi, 61
    0x48, 0xC1, 0xC7, 0x33,  # rol rdi, 51
    0x48, 0x87, 0xDB,        # xchg rbx, rbx
    0x48, 0x89, 0xD0,        # mov rax, rdx
    0xC3,                    # ret
])
RUNNING_ON_VALGRIND = 0x1001
# callgrind.h: VG_USERREQ_TOOL_BASE('C', 'T') + 2 (TOGGLE_COLLECT) and + 3 (DUMP_STATS_AT, arg1: a string)
CALLGRIND_TOGGLE_COLLECT, CALLGRIND_DUMP_STATS_AT = 0x43540002, 0x43540003
# callgrind.h: VG_USERREQ_TOOL_BASE('C', 'T') + 4 and + 5
CALLGRIND_START_INSTRUMENTATION, CALLGRIND_STOP_INSTRUMENTATION = 0x43540004, 0x43540005


class ValgrindRequests:
    """Valgrind's client requests, from machine code in an executable page (x86-64 only)."""

    def __init__(self):
        if platform.machine() not in ("x86_64", "AMD64"):
            raise SystemExit(f"--callgrind: client requests are written for x86-64, not {platform.machine()}")
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
        self._page.write(_REQUEST_CODE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.POINTER(ctypes.c_uint64))(address)

    def __call__(self, request: int, arg1: int = 0) -> int:
        return self._call((ctypes.c_uint64 * 6)(request, arg1, 0, 0, 0, 0))


def valgrind_requests(option: str) -> ValgrindRequests:
    """The client requests, refused (naming `option`) outside valgrind."""
    request = ValgrindRequests()
    if not request(RUNNING_ON_VALGRIND):
        raise SystemExit(f"{option}: not running under valgrind")
    return request


def counted(callgrind: bool):
    """A context in which callgrind counts (instrumentation on), or nothing when not asked."""
    if not callgrind:
        return contextlib.nullcontext()
    request = valgrind_requests("--callgrind")

    @contextlib.contextmanager
    def instrumented():
        request(CALLGRIND_START_INSTRUMENTATION)
        try:
            yield
        finally:
            request(CALLGRIND_STOP_INSTRUMENTATION)

    return instrumented()


def simrl_at_start(mjm, start, schedule: str, dtype: str, compiler_flags: str | None):
    """The Sim of START's worlds on the CPU, one thread, its state and controls START's; its kernels
    built with `compiler_flags` (warp.config.cpu_compiler_flags) where given."""
    import torch
    import warp as wp

    if compiler_flags is not None:
        wp.config.cpu_compiler_flags = compiler_flags
    from simrl import Sim

    sim = Sim.from_model(mjm, num_worlds=start["qpos"].shape[0], device="cpu", dtype=dtype, cpu_threads=1,
                         schedule=schedule)
    for name in ("qpos", "qvel", "ctrl"):
        setattr(sim, name, torch.as_tensor(start[name], dtype=sim.torch_dtype))
    return sim


def step_simrl(mjm, start, steps: int, schedule: str, dtype: str, portable: bool, callgrind: bool) -> np.ndarray:
    """1 + steps simrl steps, counted when `callgrind`; the final qpos."""
    sim = simrl_at_start(mjm, start, schedule, dtype, PORTABLE_CPU_FLAGS if portable else None)
    with counted(callgrind):
        sim.step(1 + steps)
    return sim.qpos.double().numpy()


def grad_simrl(mjm, start, steps: int, dtype: str, portable: bool, callgrind: bool, part: str) -> np.ndarray:
    """--grad PART: START's worlds through `steps` calls of simrl.diff_step (its schedule on the
    CPU, fused), counted when `callgrind`: 'plain' Sim.step `steps` times, 'forward' the chain of
    diff_step calls, 'rollout' the chain and its backward. A whole rollout and its backward run
    uncounted first: they build the kernels, record the launches and fill the step buffers' pool,
    as in a training loop's later iterations. Returns the final qpos."""
    from simrl import diff_step

    sim = simrl_at_start(mjm, start, "auto", dtype, PORTABLE_CPU_FLAGS if portable else None)
    qpos0, qvel0, ctrl = sim.qpos.clone(), sim.qvel.clone(), sim.ctrl.clone()

    def rollout(backward: bool):
        qpos, qvel = qpos0, qvel0
        c = ctrl.clone().requires_grad_(True)
        for _ in range(steps):
            qpos, qvel = diff_step(sim, qpos, qvel, c)
        if backward:
            (qpos.sum() + qvel.sum()).backward()
        return qpos.detach()

    rollout(True)
    with counted(callgrind):
        if part == "plain":
            for _ in range(steps):
                sim.step()
            qpos = sim.qpos
        else:
            qpos = rollout(part == "rollout")
    return qpos.double().numpy()


def step_simrl_by_launch(mjm, start, steps: int, dtype: str, portable: bool) -> np.ndarray:
    """--by-launch: the wide schedule's step launch by launch (what Sim.step does on one thread),
    under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`: after a first
    uncounted step, callgrind collects during each launch only and dumps the count with the
    kernel's name (CALLGRIND_DUMP_STATS_AT), one profile part per launch. The launches are
    recorded commands (arguments packed once), yet a part still holds a little Python, the same
    at any world count: the per-stage count runs two world counts and takes the difference."""
    from simrl.sim import schedule as simrl_schedule

    sim = simrl_at_start(mjm, start, "wide", dtype, PORTABLE_CPU_FLAGS if portable else None)
    sim.step(1)
    request = valgrind_requests("--by-launch")
    # every launch of a step recorded once (wp.launch(record_cmd=True): the arguments packed
    # here), so that a counted launch is little more than the kernel's own call
    m, d = sim.model.struct, sim.data
    commands = []
    for segment in sim._step_segments:
        for item in segment.launches(sim.model):
            command = simrl_schedule.launch(item, m, d, sim.num_worlds, sim.device, record=True)
            # the kernel's name as a NUL-terminated buffer that stays alive for the requests
            commands.append((command, ctypes.create_string_buffer(item.kernel.key.encode())))
    import gc

    gc.disable()  # a collection would land in whichever launch's part allocates when it is due
    request(CALLGRIND_START_INSTRUMENTATION)
    for _ in range(steps):
        for command, name in commands:
            request(CALLGRIND_TOGGLE_COLLECT)
            command.launch()
            request(CALLGRIND_TOGGLE_COLLECT)
            request(CALLGRIND_DUMP_STATS_AT, ctypes.addressof(name))
    request(CALLGRIND_STOP_INSTRUMENTATION)
    return sim.qpos.double().numpy()


def step_simrl_with_symbols(mjm, start, steps: int, schedule: str, dtype: str, cache: str,
                            symbols: str) -> np.ndarray:
    """--line-tables CACHE: the kernels built with line tables (x86-64-v3 code, as the counts'; a
    private kernel cache CACHE), the JIT address and object file of every global symbol of their
    modules written to `symbols` as JSON (Warp's own lookup), one step uncounted, then `steps`
    steps under callgrind's instrumentation (none when `steps` is 0: the kernels are built)."""
    import warp as wp

    wp.config.kernel_cache_dir = cache
    sim = simrl_at_start(mjm, start, schedule, dtype, f"{PORTABLE_CPU_FLAGS} {LINE_TABLES}")
    import warp._src.context as warp_context

    sim.step(1)
    found = {}  # global symbol -> [JIT address, object file]
    for module in warp_context.user_modules.values():
        for ex in module.execs.values():
            if ex is None or (ex.device is not None and not ex.device.is_cpu) or not ex.binary_path:
                continue
            listing = subprocess.run(["nm", "--defined-only", ex.binary_path], capture_output=True, text=True,
                                     check=True).stdout
            for line in listing.splitlines():
                parts = line.split()
                if len(parts) == 3 and parts[1] == "T":
                    address = warp_context.runtime.llvm.wp_lookup(ex.handle.encode(), parts[2].encode())
                    if address:
                        found[parts[2]] = [address, ex.binary_path]
    Path(symbols).write_text(json.dumps(found))
    if steps > 0:
        with counted(True):
            sim.step(steps)
    return sim.qpos.double().numpy()


def step_mujoco(mjm, start, steps: int, callgrind: bool) -> np.ndarray:
    """1 + steps mj_step calls per world through mujoco.rollout, counted when `callgrind`; the final qpos."""
    from mujoco import rollout

    W = start["state"].shape[0]
    control = np.repeat(start["ctrl"][:, None, :], 1 + steps, axis=1)
    mjd, warmstart = mujoco.MjData(mjm), np.zeros((W, mjm.nv))
    state = np.empty((W, 1 + steps, start["state"].shape[1]))  # allocated outside the count
    with counted(callgrind):
        rollout.rollout(mjm, mjd, start["state"], control, initial_warmstart=warmstart, state=state)
    qpos_at = 1  # mjSTATE_FULLPHYSICS: time, qpos, qvel, act, ...
    return state[:, -1, qpos_at:qpos_at + mjm.nq]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("engine", choices=["simrl", "mujoco"])
    parser.add_argument("model", help="compiled model (.mjb)")
    parser.add_argument("start", help="start states and controls (.npz)")
    parser.add_argument("steps", type=int, help="steps after the first one")
    parser.add_argument("--schedule", default="fused", choices=["fused", "wide"])
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--portable-cpu", action="store_true",
                        help="build simrl's kernels for x86-64-v3 instead of the host's CPU")
    parser.add_argument("--callgrind", action="store_true",
                        help="running under valgrind --tool=callgrind --instr-atstart=no: instrument the steps only")
    parser.add_argument("--by-launch", action="store_true",
                        help="simrl, wide schedule, under callgrind: one profile part per launch (see "
                             "step_simrl_by_launch)")
    parser.add_argument("--line-tables", metavar="CACHE",
                        help="simrl: kernels with line tables in this kernel cache, their symbols written to "
                             "--symbols, the steps under callgrind (see step_simrl_with_symbols)")
    parser.add_argument("--symbols", help="with --line-tables: the JSON file of the kernels' symbols")
    parser.add_argument("--grad", choices=["plain", "forward", "rollout"],
                        help="simrl: STEPS calls of diff_step (forward, or rollout: with the backward) or of Sim.step "
                             "(plain), after an uncounted rollout (see grad_simrl)")
    args = parser.parse_args(argv)
    mjm = mujoco.MjModel.from_binary_path(args.model)
    start = dict(np.load(args.start))
    if args.engine == "simrl":
        if args.grad:
            qpos = grad_simrl(mjm, start, args.steps, args.dtype, args.portable_cpu, args.callgrind, args.grad)
        elif args.by_launch:
            qpos = step_simrl_by_launch(mjm, start, args.steps, args.dtype, args.portable_cpu)
        elif args.line_tables:
            qpos = step_simrl_with_symbols(mjm, start, args.steps, args.schedule, args.dtype, args.line_tables,
                                           args.symbols)
        else:
            qpos = step_simrl(mjm, start, args.steps, args.schedule, args.dtype, args.portable_cpu, args.callgrind)
    else:
        qpos = step_mujoco(mjm, start, args.steps, args.callgrind)
    # a checksum of the final state, so the steps cannot be optimised away and a run can be
    # checked against the other engine's
    print(f"finite worlds {int(np.isfinite(qpos).all(axis=1).sum())}/{qpos.shape[0]}, "
          f"qpos sum {float(np.nansum(qpos)):.6f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
