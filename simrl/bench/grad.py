"""The differentiable step's cost (`--grad H`): simrl.diff_step chained for H steps, then
backward through all of them, against the plain step (Sim.step, one thread) at each world
count: forward and backward seconds, backward / forward, and the memory the rollout keeps per
world per step (the buffers the tape holds for backward, with their gradients). With
`--profile` it times every kernel (and adjoint) of one differentiable rollout and its backward,
and the memsets of the step buffers ("profile_seconds" in the records). `--cpu-time` times this
process's CPU time (time.process_time) instead of the wall clock: on a machine shared with other
busy processes the wall clock also counts their time slices (one thread: the Warp launches and
torch run on this process's thread).
"""

import time

import mujoco
import numpy as np
import torch
import warp as wp

from simrl import Sim
from simrl.bench.host import machine
from simrl.bench.models import initial_state, random_controls
from simrl.bench.records import write_results


def grad_benchmark(name, mjm, worlds, args) -> int:
    """Forward and backward time of an H-step differentiable rollout (simrl.diff_step).
    `args`: the parsed command line of scripts/benchmark.py."""
    from simrl import diff_step

    H = args.grad
    clock = time.process_time if getattr(args, "cpu_time", False) else time.perf_counter
    if mjm.opt.integrator != mujoco.mjtIntegrator.mjINT_EULER:
        print("diff_step differentiates Euler steps: switching the model to the Euler integrator")
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, {H}-step rollouts, {args.dtype}, "
          f"timed by time.{clock.__name__}")
    print(f"machine: {machine()}")
    start = initial_state(mjm)
    rows = []
    for W in worlds:
        sim = Sim.from_model(mjm, num_worlds=W, device=args.device, dtype=args.dtype, cpu_threads=1,
                             schedule=args.schedule)
        dtype = sim.qpos.dtype
        qpos0 = torch.tensor(np.tile(start.qpos, (W, 1)), dtype=dtype, device=sim.qpos.device)
        qvel0 = torch.zeros(W, mjm.nv, dtype=dtype, device=sim.qpos.device)
        ctrls = torch.tensor(random_controls(mjm, H * W).reshape(H, W, mjm.nu), dtype=dtype,
                             device=sim.qpos.device, requires_grad=True)

        def rollout(sim=sim, qpos0=qpos0, qvel0=qvel0, ctrls=ctrls):
            qpos, qvel = qpos0, qvel0
            for t in range(H):
                qpos, qvel = diff_step(sim, qpos, qvel, ctrls[t])
            return qpos, qvel

        def plain(sim=sim, qpos0=qpos0, qvel0=qvel0, ctrls=ctrls):
            sim.qpos, sim.qvel = qpos0, qvel0
            for t in range(H):
                sim.ctrl = ctrls[t].detach()
                sim.step()

        compile_start = clock()
        qpos, qvel = rollout()  # compiles the kernels
        (qpos.sum() + qvel.sum()).backward()
        plain()
        wp.synchronize()
        compile_seconds = clock() - compile_start
        fwd, bwd, step = [], [], []
        memory = 0
        for _ in range(args.repeats):
            t0 = clock()
            plain()
            wp.synchronize()
            t1 = clock()
            qpos, qvel = rollout()
            wp.synchronize()
            t2 = clock()
            memory = rollout_bytes(qpos.grad_fn)
            (qpos.sum() + qvel.sum()).backward()
            wp.synchronize()
            t3 = clock()
            step.append(t1 - t0), fwd.append(t2 - t1), bwd.append(t3 - t2)
        profile = None
        if args.profile:
            profile = profile_rollout(rollout, clock)
            print(profile_text(profile, W))
        row = {"engine": "simrl", "mode": "grad", "model": name, "num_worlds": W, "horizon": H,
               "dtype": args.dtype, "clock": clock.__name__, "step_seconds": min(step), "forward_seconds": min(fwd),
               "backward_seconds": min(bwd), "backward_over_forward": min(bwd) / min(fwd),
               "forward_over_step": min(fwd) / min(step), "bytes_per_world_step": memory / (W * H),
               "compile_seconds": compile_seconds, **({"profile_seconds": profile} if profile else {})}
        rows.append(row)
        print(f"  worlds={W:5d}  Sim.step {row['step_seconds']:.3f} s  diff forward {row['forward_seconds']:.3f} s  "
              f"backward {row['backward_seconds']:.3f} s  backward/forward {row['backward_over_forward']:.2f}  "
              f"forward/Sim.step {row['forward_over_step']:.2f}  "
              f"memory {row['bytes_per_world_step'] / 1024:.1f} KiB per world per step")
    table = ("| worlds | H | Sim.step (s) | diff_step forward (s) | backward (s) | backward / forward | "
             "forward / Sim.step | memory per world per step |\n|---|---|---|---|---|---|---|---|\n")
    for r in rows:
        table += (f"| {r['num_worlds']} | {r['horizon']} | {r['step_seconds']:.3f} | {r['forward_seconds']:.3f} | "
                  f"{r['backward_seconds']:.3f} | {r['backward_over_forward']:.2f} | {r['forward_over_step']:.2f} | "
                  f"{r['bytes_per_world_step'] / 1024:.1f} KiB |\n")
    for r in rows:
        if "profile_seconds" in r:
            table += "\n" + profile_text(r["profile_seconds"], r["num_worlds"])
    write_results(args, rows, table, f"Gradients: {name}, {args.dtype}")
    return 0


def profile_rollout(rollout, clock=time.perf_counter) -> dict:
    """Seconds per kernel (and adjoint) of one differentiable rollout and its backward, and the
    memsets of the step buffers: every Warp launch timed on its own (by `clock`), synchronised (a
    CPU launch is synchronous anyway). Returns {"forward" | "backward": {name: seconds}}, each with the
    phase's total under "total" and what no launch or memset accounts for under "other"."""
    times = {"forward": {}, "backward": {}}
    phase = ["forward"]
    launch, zero = wp.launch, wp.array.zero_

    def timed_launch(kernel, *a, **kw):
        t = clock()
        result = launch(kernel, *a, **kw)
        wp.synchronize()
        name = kernel.key.removeprefix("build__locals__") + (" (adjoint)" if kw.get("adjoint") else "")
        times[phase[0]][name] = times[phase[0]].get(name, 0.0) + clock() - t
        return result

    def timed_zero(array):
        t = clock()
        zero(array)
        wp.synchronize()
        times[phase[0]]["memset of step buffers"] = (times[phase[0]].get("memset of step buffers", 0.0)
                                                    + clock() - t)

    wp.launch, wp.array.zero_ = timed_launch, timed_zero
    try:
        t0 = clock()
        qpos, qvel = rollout()
        t1 = clock()
        phase[0] = "backward"
        (qpos.sum() + qvel.sum()).backward()
        t2 = clock()
    finally:
        wp.launch, wp.array.zero_ = launch, zero
    for key, total in (("forward", t1 - t0), ("backward", t2 - t1)):
        times[key]["other"] = total - sum(times[key].values())
        times[key]["total"] = total
    return times


def profile_text(profile: dict, worlds: int) -> str:
    """Markdown table of profile_rollout's seconds per kernel, largest first, with each one's share."""
    lines = [f"Where the time goes, {worlds} worlds (one instrumented rollout):", "",
             "| phase | kernel | seconds | share |", "|---|---|---:|---:|"]
    for key in ("forward", "backward"):
        part = profile[key]
        for name, seconds in sorted(part.items(), key=lambda kv: -kv[1]):
            if name != "total":
                lines.append(f"| {key} | {name} | {seconds:.3f} | {100 * seconds / part['total']:.0f}% |")
    return "\n".join(lines) + "\n"


def rollout_bytes(node) -> int:
    """Bytes held by a chain of diff_step calls for its backward: every array (and gradient)
    of every step's buffers, walking the autograd graph from `node`."""
    from simrl.sim.data import data_struct

    seen, total, stack = set(), 0, [node]
    while stack:
        n = stack.pop()
        if n is None or id(n) in seen:
            continue
        seen.add(id(n))
        rollout = getattr(n, "rollout", None)
        if rollout is not None:
            for d in rollout.datas:
                for field in data_struct(rollout.model.dtype).vars:
                    array = getattr(d, field)
                    if isinstance(array, wp.array):
                        total += array.capacity * (2 if array.grad is not None else 1)
        stack.extend(f for f, _ in n.next_functions)
    return total
