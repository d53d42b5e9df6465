#!/usr/bin/env python
"""Step a batch of worlds with one engine and exit: the child process that
`benchmark.py --count-instructions` runs under an instruction counter (valgrind's callgrind or
`perf stat`), once with STEPS and once with 0 steps, so that the difference is the steps alone.

    python scripts/step_worlds.py ENGINE MODEL.mjb START.npz STEPS [--schedule fused] [--dtype float32]

ENGINE is `simrl` (Sim.step, one thread) or `mujoco` (mj_step through mujoco.rollout, one
thread). MODEL.mjb is the compiled model (mujoco.mj_saveModel), START.npz the start of every
world (`qpos [W, nq]`, `qvel [W, nv]`, `ctrl [W, nu]`, `state [W, nstate]`: MuJoCo's
mjSTATE_FULLPHYSICS), written by the benchmark. Both engines take one step first (the same in
the 0-step run, so that whatever the first step sets up is not counted), then STEPS steps,
all under constant controls. Only what the engine needs is imported: MuJoCo's child never
loads torch or Warp.

`--callgrind` (under `valgrind --tool=callgrind --instr-atstart=no`): the steps, and nothing
else, run with callgrind's instrumentation on, switched by the client requests
CALLGRIND_START_INSTRUMENTATION and CALLGRIND_STOP_INSTRUMENTATION (callgrind.h), which the
child makes itself through a few bytes of machine code (no compiler needed); so the imports
and the Sim's construction run uninstrumented, about 10x faster than under full callgrind.

`--portable-cpu` builds simrl's kernels for x86-64-v3 (AVX2 and FMA, the widest code valgrind
executes) instead of `-march=native`, which here would emit AVX-512; the benchmark compiles
them in its own process first, so that the child only loads them from Warp's kernel cache.
"""

import argparse
import contextlib
import ctypes
import mmap
import platform
import sys
from pathlib import Path

import mujoco
import numpy as np

# Warp's defaults with a fixed target CPU in place of -march=native (warp.config.cpu_compiler_flags)
PORTABLE_CPU_FLAGS = ("-target-cpu x86-64-v3 -mllvm=-inline-threshold=9000 "
                      "-mllvm=-inline-cold-callsite-threshold=3000 -mllvm=-slp-recursion-max-depth=4")


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


def counted(callgrind: bool):
    """A context in which callgrind counts (instrumentation on), or nothing when not asked."""
    if not callgrind:
        return contextlib.nullcontext()
    request = ValgrindRequests()
    if not request(RUNNING_ON_VALGRIND):
        raise SystemExit("--callgrind: not running under valgrind")

    @contextlib.contextmanager
    def instrumented():
        request(CALLGRIND_START_INSTRUMENTATION)
        try:
            yield
        finally:
            request(CALLGRIND_STOP_INSTRUMENTATION)

    return instrumented()


def step_simrl(mjm, start, steps: int, schedule: str, dtype: str, portable: bool, callgrind: bool) -> np.ndarray:
    import torch
    import warp as wp

    if portable:
        wp.config.cpu_compiler_flags = PORTABLE_CPU_FLAGS
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from simrl import Sim

    W = start["qpos"].shape[0]
    sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype=dtype, cpu_threads=1, schedule=schedule)
    for name in ("qpos", "qvel", "ctrl"):
        setattr(sim, name, torch.as_tensor(start[name], dtype=sim.torch_dtype))
    with counted(callgrind):
        sim.step(1 + steps)
    return sim.qpos.double().numpy()


def step_simrl_by_launch(mjm, start, steps: int, dtype: str, portable: bool) -> np.ndarray:
    """--by-launch: the wide schedule's step launch by launch (what Sim.step does on one thread),
    under `valgrind --tool=callgrind --instr-atstart=no --collect-atstart=no`: after a first
    uncounted step, callgrind collects during each launch only and dumps the count with the
    kernel's name (CALLGRIND_DUMP_STATS_AT), one profile part per launch. The launches are
    recorded commands (arguments packed once), yet a part still holds a little Python, the same
    at any world count: benchmark.py --per-stage runs two world counts and takes the difference."""
    import torch
    import warp as wp

    if portable:
        wp.config.cpu_compiler_flags = PORTABLE_CPU_FLAGS
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from simrl import Sim
    from simrl.sim import schedule as simrl_schedule

    W = start["qpos"].shape[0]
    sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype=dtype, cpu_threads=1, schedule="wide")
    for name in ("qpos", "qvel", "ctrl"):
        setattr(sim, name, torch.as_tensor(start[name], dtype=sim.torch_dtype))
    sim.step(1)
    request = ValgrindRequests()
    if not request(RUNNING_ON_VALGRIND):
        raise SystemExit("--by-launch: not running under valgrind")
    # every launch of a step recorded once (wp.launch(record_cmd=True): the arguments packed
    # here), so that a counted launch is little more than the kernel's own call
    m, d = sim.model.struct, sim.data
    commands = []
    for segment in sim._step_segments:
        for item in segment.launches(sim.model):
            command = simrl_schedule.launch(item, m, d, W, sim.device, record=True)
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


def step_mujoco(mjm, start, steps: int, callgrind: bool) -> np.ndarray:
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
    args = parser.parse_args(argv)
    mjm = mujoco.MjModel.from_binary_path(args.model)
    start = dict(np.load(args.start))
    if args.engine == "simrl":
        if args.by_launch:
            qpos = step_simrl_by_launch(mjm, start, args.steps, args.dtype, args.portable_cpu)
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
