"""The Warp launches of one physics step, recorded on the CPU: what the GPU report reads for how
a step's work is spread over threads.

Every Warp launch of one step is recorded (`warp.launch` and `warp.launch_tiled` patched for the
duration of the step): its kernel, its launch dimensions, the block size a tiled launch asks
for, whether it is an adjoint launch, and its wall time. Warp runs a CPU launch synchronously,
each of its threads in turn on the calling thread, so a launch's CPU time is the work of all its
threads together; its share of the step's summed launch time is its share of the step's work.

Both engines start from the same state: the model's "home" keyframe when it has one (else
qpos0) stepped `settle` times (--settle, default 200) by MuJoCo with the keyframe's controls, so
that a robot stands on its contacts as in training, then the same random controls; one step is
taken first to compile, and the next one is recorded.
"""

from __future__ import annotations

import inspect
import math
import time
from dataclasses import dataclass

import mujoco
import numpy as np
import torch
import warp as wp

import simrl
from simrl.bench.models import initial_state, random_controls, with_newton

#: the block size of a CUDA launch that asks for none (warp.launch's documented default)
CUDA_DEFAULT_BLOCK_DIM = 256

#: mj_step calls from the start state before the recorded step (--settle)
SETTLE_STEPS = 200


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


def settled_state(mjm: mujoco.MjModel, settle: int = SETTLE_STEPS) -> mujoco.MjData:
    """The 'home' keyframe (else qpos0), stepped `settle` times by MuJoCo with the keyframe's
    controls (else zero): the state every engine's recorded step starts from."""
    mjd = initial_state(mjm)
    for _ in range(settle):
        mujoco.mj_step(mjm, mjd)
    return mjd


def make_sim(mjm: mujoco.MjModel, num_worlds: int, schedule: str | None,
             settle: int = SETTLE_STEPS) -> tuple[simrl.Sim, str]:
    """The Sim on the CPU, one thread, at the settled state with random controls; returns it and
    the schedule it runs. `schedule` is passed through when `Sim.from_model` takes one; without
    that keyword the engine runs one schedule, fused, and asking for another one is an error."""
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
    mjd = settled_state(mjm, settle)
    sim.qpos, sim.qvel = np.tile(mjd.qpos, (num_worlds, 1)), np.tile(mjd.qvel, (num_worlds, 1))
    sim.ctrl = random_controls(mjm, num_worlds)
    return sim, label


def record_simrl(mjm: mujoco.MjModel, num_worlds: int, schedule: str | None, grad: bool,
                 settle: int = SETTLE_STEPS) -> dict:
    """The launches of one simrl step (Sim.step(1)), or with `grad` of one simrl.diff_step and
    its backward, after one such step that compiles. Returns {"launches", "deferred", "schedule",
    "state"}."""
    sim, label = make_sim(mjm, num_worlds, schedule, settle)
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
        # a model with activations steps them too (diff_step's act0, act1)
        out = simrl.diff_step(sim, qpos0, qvel0, ctrl, act0=sim.act.clone() if sim.na else None)
        if recorder is not None:
            recorder.phase = "backward"
        # seeds d loss / d (qpos1, qvel1[, act1]) = 1 and runs the tape backwards
        sum(x.sum() for x in out).backward()
        return ctrl.grad

    diff_step()  # compiles
    with LaunchRecorder() as recorder:
        grad_ctrl = diff_step(recorder)
    state = {"finite_gradient": bool(torch.isfinite(grad_ctrl).all())}
    return {"launches": recorder.launches, "deferred": recorder.deferred, "schedule": label, "state": state}


def record_mujoco_warp(mjw, mjm: mujoco.MjModel, num_worlds: int, settle: int = SETTLE_STEPS) -> dict:
    """The launches of one `mjw.step` on the CPU device, after one that compiles."""
    note = None
    if mjm.opt.solver != mujoco.mjtSolver.mjSOL_NEWTON:
        # mujoco_warp refuses PGS; simrl solves with Newton whatever the model says, and any
        # converging solver finds the same solution: both engines run Newton
        mjm = with_newton(mjm)
        note = "solver switched to Newton for mujoco_warp (simrl always solves with Newton)"
    mjd = settled_state(mjm, settle)
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
