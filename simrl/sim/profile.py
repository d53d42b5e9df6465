"""Per-pass timing of the step, for `scripts/benchmark.py --profile`.

The profiler steps the Sim's own worlds with the wide schedule (simrl.sim.schedule), whose
launch per pass over (worlds x elements) makes every stage its own kernel, and times each
launch on the host: on the CPU a launch returns when its kernel is done, so its time is the
work of all its threads; on a GPU each launch is followed by a synchronization. The two
schedules compute the same bits on the CPU, so a profiled Sim steps the same trajectory, only
slower (a launch per pass). The profile runs on one thread even when the Sim splits its worlds
over several (`cpu_threads`).
"""

import functools
import time

import warp as wp

from simrl.sim import forward, schedule
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import EULER_LIKE, kernel_module


class StageProfiler:
    """`profile(steps)` steps the Sim `steps` times and returns {pass: microseconds per world per
    step}, the cost of an empty launch (the host overhead included in every figure) subtracted
    from each launch."""

    def __init__(self, sim):
        self.sim = sim
        scalar = sim.model.dtype
        convex = sim.model.struct.ndetect > 0
        # both defined for every model, as Sim does (forward._module: the modules' fixed sets)
        f = forward.forward_segment(scalar, "wide", convex=convex)
        euler_step = forward.euler_segment(scalar, "wide", convex=convex)
        if sim.model.integrator in EULER_LIKE:
            self.segments = (euler_step,)
        else:
            begin, stage1, stage2, end = forward.rk4_segments(scalar, "wide")
            self.segments = (f, begin, f, stage1, f, stage2, f, end)
        for seg in self.segments:
            for module in seg.modules:
                wp.load_module(module, device=sim.device)
        self._empty = _empty_kernel(scalar)
        wp.load_module(self._empty.module, device=sim.device)

    def _timed(self, item) -> float:
        sim = self.sim
        start = time.perf_counter()
        schedule.launch(item, sim.model.struct, sim.data, sim.num_worlds, sim.device)
        if not sim.device.is_cpu:
            wp.synchronize_device(sim.device)
        return time.perf_counter() - start

    def profile(self, steps: int) -> dict:
        sim = self.sim
        seconds, launches = {}, {}
        for _ in range(steps):
            for seg in self.segments:
                for item in seg.launches(sim.model):
                    name = item.kernel.key
                    seconds[name] = seconds.get(name, 0.0) + self._timed(item)
                    launches[name] = launches.get(name, 0) + 1
        overhead = min(self._timed(schedule.Launch(self._empty)) for _ in range(20))
        steps = max(1, steps)
        return {name: max(0.0, (t - overhead * launches[name]) / steps) / sim.num_worlds * 1e6
                for name, t in seconds.items()}


@functools.cache
def _empty_kernel(scalar):
    """A kernel that does nothing, with the engine's arguments: the host cost of a launch."""
    Model, Data = model_struct(scalar), data_struct(scalar)

    @wp.kernel(module=kernel_module(scalar, "profile"))
    def profile_empty(m: Model, d: Data):
        pass

    return profile_empty


def profile_table(per_world: dict) -> str:
    """Markdown table of `StageProfiler.profile`'s figures: us per world per step and share."""
    step = sum(per_world.values()) or 1.0
    lines = ["| pass (wide schedule's kernel) | us per world per step | share of a step |", "|---|---:|---:|"]
    for name, v in per_world.items():
        lines.append(f"| {name} | {v:.3f} | {100 * v / step:.1f}% |")
    lines.append(f"| step | {step:.3f} | 100.0% |")
    return "\n".join(lines)
