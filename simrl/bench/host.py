"""The machine a benchmark runs on: its description for the records, the cores the run may use
and pins itself to, and the memory it holds."""

import os
import platform
from pathlib import Path

import mujoco
import torch
import warp as wp


def machine() -> str:
    """CPU, cores (and the ones this run is pinned to), GPU, and the versions that decide speed."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = ""
    if wp.is_cuda_available():
        gpu = ", GPU " + wp.get_device("cuda:0").name
    allowed = sorted(os.sched_getaffinity(0))
    pinned = f", run on core(s) {','.join(map(str, allowed))}" if len(allowed) < (os.cpu_count() or 1) else ""
    return f"{cpu}, {os.cpu_count()} cores{pinned}{gpu}; Python {platform.python_version()}, " \
           f"warp {wp.__version__}, mujoco {mujoco.__version__}, torch {torch.__version__}"


def pin_cores(n: int) -> list[int]:
    """Pin this process to the first n of the cores it may use: every thread it has now (torch's,
    Warp's, ...) and so every thread it starts later (simrl's and mujoco.rollout's pools
    inherit their creator's affinity). Returns the cores."""
    allowed = sorted(os.sched_getaffinity(0))
    if not 1 <= n <= len(allowed):
        raise SystemExit(f"--cores {n}: this process may use {len(allowed)} core(s) "
                         f"({', '.join(map(str, allowed))}); choose 1 to {len(allowed)}")
    cores = set(allowed[:n])
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cores)
        except ProcessLookupError:  # a thread that ended meanwhile
            pass
    return sorted(cores)


def thread_cpus() -> list[int]:
    """Every core that some thread of this process may run on (after --cores: the pinned ones)."""
    cpus = set()
    for tid in os.listdir("/proc/self/task"):
        try:
            cpus |= os.sched_getaffinity(int(tid))
        except ProcessLookupError:
            pass
    return sorted(cpus)


def thread_counts(cores: int | None, threads: str | None) -> list[int]:
    """The thread counts at which the CPU engines are measured: `cores` N (--cores) -> [N];
    `threads` (--threads, comma-separated); else 1 and every core this process may use."""
    if cores:
        return [cores]
    if threads:
        try:
            counts = sorted({int(t) for t in threads.split(",")})
        except ValueError:
            counts = [0]
        if counts[0] < 1:
            raise SystemExit(f"--threads {threads}: give positive integers, comma-separated (e.g. 1,2)")
        return counts
    return sorted({1, len(os.sched_getaffinity(0))})


def resident_mib() -> float:
    """This process's resident memory (MiB), from /proc (Linux), else the peak from getrusage."""
    try:
        with open("/proc/self/status") as f:
            return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:")) / 1024
    except (OSError, StopIteration):
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
