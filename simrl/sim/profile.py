"""Per-stage timing of the forward pass, for `scripts/benchmark.py --profile`.

Each stage of `forward.stages` is launched as a kernel of its own, in a separate Warp module
(`simrl_profile_<dtype>`, compiled only when a profile is taken), and timed on the host
around the launch. On the CPU a launch returns when the kernel is done; on a GPU each launch
is followed by a synchronization. The stages in sequence compute exactly what the fused
`forward` kernel computes, so a profiled Sim steps the same trajectory, only slower (a
launch per stage and no cross-stage optimization by the compiler). The profile runs on one
thread even when the Sim splits its worlds over several (`cpu_threads`).
"""

import functools
import time

import warp as wp

from simrl.sim import forward
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import kernel_module


@functools.cache
def build(scalar):
    """[(stage name, kernel)] in forward-pass order; each kernel runs one stage in every world."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    module = kernel_module(scalar, "profile")
    s = forward.stages(scalar)
    kinematics_, com_pos_, crb_, factor_m_ = s["kinematics"], s["com_pos"], s["crb"], s["factor_m"]
    collision_, make_constraint_, com_vel_ = s["collision"], s["make_constraint"], s["com_vel"]
    passive_, reference_constraint_, rne_ = s["passive"], s["reference_constraint"], s["rne"]
    actuation_, fwd_acceleration_, solve_ = s["actuation"], s["fwd_acceleration"], s["solve"]

    @wp.kernel(module=module)
    def profile_kinematics(m: Model, d: Data):
        kinematics_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_com_pos(m: Model, d: Data):
        com_pos_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_crb(m: Model, d: Data):
        crb_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_factor_m(m: Model, d: Data):
        factor_m_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_collision(m: Model, d: Data):
        collision_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_make_constraint(m: Model, d: Data):
        make_constraint_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_com_vel(m: Model, d: Data):
        com_vel_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_passive(m: Model, d: Data):
        passive_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_reference_constraint(m: Model, d: Data):
        reference_constraint_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_rne(m: Model, d: Data):
        rne_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_actuation(m: Model, d: Data):
        actuation_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_fwd_acceleration(m: Model, d: Data):
        fwd_acceleration_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_solve(m: Model, d: Data):
        solve_(m, d, wp.tid())

    @wp.kernel(module=module)
    def profile_empty(m: Model, d: Data):
        pass

    kernels = [profile_kinematics, profile_com_pos, profile_crb, profile_factor_m, profile_collision,
               profile_make_constraint, profile_com_vel, profile_passive, profile_reference_constraint,
               profile_rne, profile_actuation, profile_fwd_acceleration, profile_solve]
    names = list(s)
    assert [k.func.__name__.removeprefix("profile_") for k in kernels] == names, "stage list out of date"
    return list(zip(names, kernels, strict=True)), profile_empty


class StageProfiler:
    """Replaces `sim`'s fused forward kernel by one launch per stage and times each one.

    `profile(steps)` steps the Sim `steps` times and returns {stage: microseconds per world
    per forward pass}, with "integrator" (per step) for the integrator kernels and the cost
    of an empty launch (the host overhead included in every figure) subtracted from each."""

    def __init__(self, sim):
        self.sim = sim
        scalar = sim.model.dtype
        self.stages, self.empty = build(scalar)
        wp.load_module(kernel_module(scalar, "profile"), device=sim.device)

    def _timed_launch(self, kernel, scalars=()):
        sim = self.sim
        start = time.perf_counter()
        wp.launch(kernel, dim=sim.num_worlds, inputs=[sim.model.struct, sim.data, *scalars], device=sim.device)
        if not sim.device.is_cpu:
            wp.synchronize_device(sim.device)
        return time.perf_counter() - start

    def profile(self, steps: int) -> dict:
        sim = self.sim
        seconds = {name: 0.0 for name, _ in self.stages}
        seconds["integrator"] = 0.0
        counts = {"forward": 0, "launches": 0}

        def launch(kernel, *scalars):
            if kernel is sim._forward:
                counts["forward"] += 1
                for name, stage in self.stages:
                    seconds[name] += self._timed_launch(stage)
                    counts["launches"] += 1
            else:
                seconds["integrator"] += self._timed_launch(kernel, scalars)
                counts["launches"] += 1

        original, blocks = sim._launch, sim._blocks
        sim._launch, sim._blocks = launch, None  # one thread, all worlds per launch
        try:
            sim.step(steps)
        finally:
            del sim._launch
            sim._blocks = blocks
        assert sim._launch == original
        # host-side cost of one launch, included in every timed launch
        overhead = min(self._timed_launch(self.empty) for _ in range(20))
        nforward = max(1, counts["forward"])
        integrator_launches = (counts["launches"] - counts["forward"] * len(self.stages)) / max(1, steps)
        per_world = {}
        for name, total in seconds.items():
            if name == "integrator":
                t = total / max(1, steps) - overhead * integrator_launches
            else:
                t = total / nforward - overhead
            per_world[name] = max(0.0, t) / sim.num_worlds * 1e6
        return per_world


def profile_table(per_world: dict, forwards_per_step: int) -> str:
    """Markdown table of `StageProfiler.profile`'s figures: us per world and share of a step."""
    step = sum(v * (1 if k == "integrator" else forwards_per_step) for k, v in per_world.items())
    forward_total = sum(v for k, v in per_world.items() if k != "integrator")
    lines = ["| stage | us per world | share of a step |", "|---|---:|---:|"]
    for name, v in per_world.items():
        n = 1 if name == "integrator" else forwards_per_step
        lines.append(f"| {name}{' (per step)' if name == 'integrator' else ''} | {v:.2f} | {100 * v * n / step:.1f}% |")
    lines.append(f"| forward pass (sum of stages) | {forward_total:.2f} | "
                 f"{100 * forward_total * forwards_per_step / step:.1f}% |")
    lines.append(f"| step ({forwards_per_step} forward + integrator) | {step:.2f} | 100.0% |")
    return "\n".join(lines)
