"""The differentiable step's cost (`--grad H`): simrl.diff_step chained for H steps, then
backward through all of them, against the plain step (Sim.step, one thread) at each world
count: forward and backward seconds, backward / forward, and the memory the rollout keeps per
world per step (the buffers the tape holds for backward, with their gradients). With
`--profile` it times every kernel (and adjoint) of one differentiable rollout and its backward,
and the memsets of the step buffers ("profile_seconds" in the records). `--cpu-time` times this
process's CPU time (time.process_time) instead of the wall clock: on a machine shared with other
busy processes the wall clock also counts their time slices (one thread: the Warp launches and
torch run on this process's thread).

With `--count-instructions` it counts instructions instead of timing (noise-free, as the step's
count: simrl.bench.instructions): per world count, three children of simrl/bench/step_worlds.py
--grad under the counter, from the same start states and controls (held for all H steps), each
after an uncounted rollout and backward (kernels built, launches recorded, step buffers pooled):
H plain steps, the H-step chain of diff_step, the chain and its backward. The backward's count
is the difference of the last two; the ratio, forward + backward over the plain steps, is the
one issue 53 sets at 2.
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


def grad_count(name, mjm, worlds, args) -> int:
    """--grad H --count-instructions: instructions of H plain steps, of the H-step chain of
    diff_step and of its backward, per world-step (see the module's docstring)."""
    import tempfile
    from pathlib import Path

    from simrl.bench.instructions import count_child, instruction_counter
    from simrl.bench.models import start_arrays, start_description
    from simrl.bench.step_worlds import PORTABLE_CPU_FLAGS

    if args.device != "cpu":
        raise SystemExit("--count-instructions counts CPU instructions: use --device cpu")
    H = args.grad
    counter = instruction_counter(args.counter)
    portable = counter == "callgrind"
    if portable:
        wp.config.cpu_compiler_flags = PORTABLE_CPU_FLAGS
    print(f"model {name}: nq={mjm.nq} nv={mjm.nv} nu={mjm.nu}, {H}-step rollouts, {args.dtype}, instructions "
          f"counted by {counter}" + ("; kernels built for x86-64-v3 (valgrind runs no AVX-512)" if portable else ""))
    print(f"machine: {machine()}\n{start_description(mjm, args.settle)}")
    rows = []
    with tempfile.TemporaryDirectory(prefix="simrl-grad-count-") as tmp:
        tmp = Path(tmp)
        model_path = tmp / "model.mjb"
        mujoco.mj_saveModel(mjm, str(model_path), None)
        # the differentiable step's kernels and the engine's, built here (outside the counter)
        from simrl import diff_step

        sim = Sim.from_model(mjm, num_worlds=1, device="cpu", dtype=args.dtype, cpu_threads=1)
        qpos, qvel = diff_step(sim, sim.qpos.clone(), sim.qvel.clone(), sim.ctrl.clone().requires_grad_(True))
        (qpos.sum() + qvel.sum()).backward()
        sim.step()
        for W in worlds:
            start_path = tmp / f"start_{W}.npz"
            np.savez(start_path, **start_arrays(mjm, W, args.settle))
            counts, outputs = {}, {}
            t0 = time.perf_counter()
            for part in ("plain", "forward", "rollout"):
                child = ["simrl", str(model_path), str(start_path), str(H), "--dtype", args.dtype, "--grad", part,
                         *(["--portable-cpu"] if portable else [])]
                counts[part], outputs[part] = count_child(counter, child, tmp / f"{part}_{W}.out")
            per = W * H
            row = {"engine": "simrl", "mode": "grad_instructions", "model": name, "num_worlds": W, "horizon": H,
                   "dtype": args.dtype, "counter": counter, "instructions": counts,
                   "step_per_world_step": counts["plain"] / per, "forward_per_world_step": counts["forward"] / per,
                   "backward_per_world_step": (counts["rollout"] - counts["forward"]) / per,
                   "rollout_over_step": counts["rollout"] / counts["plain"], "final_states": outputs,
                   "count_seconds": time.perf_counter() - t0, **({"cpu_target": "x86-64-v3"} if portable else {})}
            rows.append(row)
            print(f"  worlds={W:5d}  instructions per world-step: Sim.step {row['step_per_world_step']:,.0f}, "
                  f"diff forward {row['forward_per_world_step']:,.0f}, backward {row['backward_per_world_step']:,.0f}; "
                  f"(forward + backward) / Sim.step {row['rollout_over_step']:.2f}  ({row['count_seconds']:.0f} s)")
    table = ("| worlds | H | Sim.step | diff_step forward | backward | (forward + backward) / Sim.step |\n"
             "|---|---|---:|---:|---:|---:|\n")
    for r in rows:
        table += (f"| {r['num_worlds']} | {r['horizon']} | {r['step_per_world_step']:,.0f} | "
                  f"{r['forward_per_world_step']:,.0f} | {r['backward_per_world_step']:,.0f} | "
                  f"**{r['rollout_over_step']:.2f}x** |\n")
    write_results(args, rows, "Instructions per world-step\n\n" + table, f"Gradients (instructions): {name}, "
                  f"{args.dtype}")
    return 0


def grad_benchmark(name, mjm, worlds, args) -> int:
    """Forward and backward time of an H-step differentiable rollout (simrl.diff_step).
    `args`: the parsed command line of scripts/benchmark.py."""
    from simrl import diff_step

    if mjm.opt.integrator != mujoco.mjtIntegrator.mjINT_EULER:
        print("diff_step differentiates Euler steps: switching the model to the Euler integrator")
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    if getattr(args, "count_instructions", False):
        return grad_count(name, mjm, worlds, args)
    H = args.grad
    clock = time.process_time if getattr(args, "cpu_time", False) else time.perf_counter
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
    """Bytes held by a chain of diff_step calls for its backward: the values of every step's
    buffers (Data and scratch), and their gradients, each slab once (the evaluations in the same
    place of a step share one: simrl.sim.grad._Pool), walking the autograd graph from `node`."""
    from simrl.sim.data import data_struct

    seen, total, stack, slabs = set(), 0, [node], {}
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
                        total += array.capacity
                        if array.grad is not None:
                            slab = getattr(array.grad, "_slab", array.grad)
                            slabs[id(slab)] = slab.capacity
                scratch = rollout.scratch[id(d)]
                total += scratch.values.capacity
                for name in scratch.FIELDS:
                    grad = getattr(scratch, name).grad
                    if grad is not None:
                        slabs[id(grad._slab)] = grad._slab.capacity
        stack.extend(f for f, _ in n.next_functions)
    return total + sum(slabs.values())
