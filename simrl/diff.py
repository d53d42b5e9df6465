"""Gradients through the simulator, for PyTorch.

    qpos1, qvel1 = simrl.diff_step(sim, qpos0, qvel0, ctrl, params={"body_mass": mass})
    loss = qpos1[:, 0].square().sum()
    loss.backward()          # fills qpos0.grad, qvel0.grad, ctrl.grad, mass.grad

A model with actuator activations (`sim.na > 0`: dyntype integrator, filter, filterexact) has
them as state too: `qpos1, qvel1, act1 = simrl.diff_step(sim, qpos0, qvel0, ctrl, act0=act0)`.

`diff_step` is a `torch.autograd.Function`: the physics step runs on a `wp.Tape` with fresh
buffers (simrl.sim.grad); its backward seeds the outputs' gradients, runs the tape backwards
and hands the input gradients to torch. Chaining calls builds a rollout whose memory grows
linearly with its length and is released when backward has run (or the graph is dropped);
after backward, up to simrl.sim.grad.POOL_BYTES (4 GiB) of step buffers (and each call's small
arrays: its copies of the inputs, its outputs) are kept and reused by the next rollout of the
same model and batch size, as allocating them costs more than a small step. The steps'
gradients share one set of buffers, zeroed by each step's backward (a step's gradients are
needed only while its own backward runs).
The `Sim`'s own state is neither read nor changed, except `qfrc_applied`, the mocap bodies'
poses (`mocap_pos`, `mocap_quat`), which equality constraints act (`eq_active`) and the time
(`time`, which the clock sensor reads), which are used as constants (no gradients with respect
to them are provided).
"""

from __future__ import annotations

import numpy as np
import torch
import warp as wp

from simrl.sim import grad
from simrl.sim.model import copy_struct

#: model parameters that `diff_step` can differentiate, with their shape after [W, ...]
PARAMS = {
    "body_mass": lambda m: (m.nbody,),
    "actuator_gain": lambda m: (m.nu,),
    "geom_friction": lambda m: (m.mjm.ngeom, 3),
}


def _check_tensor(name: str, value, shape: tuple, dtype: torch.dtype, device: torch.device,
                  check_finite: bool = True) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.device != device:
        raise ValueError(f"{name} must be on the simulation's device {device}, got a tensor on {value.device}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if tuple(value.shape) != shape:
        raise ValueError(f"{name} must have shape {shape}, got {tuple(value.shape)}")
    # the sum first: one reduction, finite unless a value is not (or the sum overflows: then the
    # elementwise check decides): a fifth of the elementwise check's cost at 1024 worlds
    if check_finite and not torch.isfinite(value.sum()) and not torch.isfinite(value).all():
        raise ValueError(f"{name} contains NaN or infinite values")
    return value.to(dtype)


def _wp_array(value: torch.Tensor, dtype) -> wp.array:
    """A fresh Warp array with a gradient buffer, holding a copy of `value` (whose last axis
    holds the components when dtype is a vector type)."""
    shape = tuple(value.shape[:-1]) if wp.types.type_is_vector(dtype) else tuple(value.shape)
    array = wp.zeros(shape, dtype=dtype, device=wp.device_from_torch(value.device), requires_grad=True)
    wp.to_torch(array, requires_grad=False).copy_(value.detach())
    return array


class _DiffStep(torch.autograd.Function):
    @staticmethod
    def forward(ctx, sim, substeps, sensors, names, qpos0, qvel0, ctrl, act0, *values):
        model = sim.model
        dtype = model.dtype
        # the step's own copies of its inputs and of the Sim's constants it reads, in small arrays
        # from the step buffers' pool (the Rollout gives them back after the backward)
        pooled = {}

        def copy(value, with_grad=False):
            if isinstance(value, wp.array):
                array = grad.pool_array(model, pooled, value.shape, value.dtype)
                wp.copy(array, value)
            else:
                array = grad.pool_array(model, pooled, tuple(value.shape), dtype, with_grad)
                grad.pool_torch(pooled, array).copy_(value.detach())
            return array

        inputs = [copy(t, True) for t in (qpos0, qvel0, ctrl, act0)]
        tape = wp.Tape()
        m = _model_with_params(sim, dict(zip(names, values, strict=True)), tape, ctx)
        applied = copy(sim.data.qfrc_applied)
        mocap = (copy(sim.data.mocap_pos), copy(sim.data.mocap_quat)) if model.struct.nmocap else None
        eq_active = copy(sim.data.eq_active) if model.mjm.neq else None
        rollout = grad.Rollout(model, m, *inputs[:3], applied, substeps, tape, sim.schedule, mocap, act0=inputs[3],
                               sensors=sensors, eq_active=eq_active, time0=copy(sim.time), pooled=pooled)
        ctx.rollout, ctx.inputs = rollout, inputs
        # the budgets' overflow of these steps, where the Sim reports its own steps' (sim.overflow)
        wp.copy(sim.data.overflow, rollout.overflow)
        wp.copy(sim.data.overflow_need, rollout.overflow_need)
        sim._count_steps(substeps, stacklevel=6)  # warnings name the line that called diff_step
        outputs = [rollout.qpos1, rollout.qvel1, rollout.act1]
        out = [grad.pool_torch(pooled, a).clone() for a in outputs]
        if sensors:
            out.append(wp.to_torch(rollout.sensordata, requires_grad=False)[:, :model.mjm.nsensordata].clone())
        return tuple(out)

    @staticmethod
    def backward(ctx, g_qpos, g_qvel, g_act, g_sensordata=None):
        rollout = ctx.rollout
        if rollout is None:
            raise RuntimeError("diff_step: backward through the same step twice is not supported "
                               "(its tape is released after the first backward)")
        for output, g in ((rollout.qpos1, g_qpos), (rollout.qvel1, g_qvel), (rollout.act1, g_act)):
            # act1 is act0's own array when the model has no activations (nothing to seed)
            if g is not None and output.size and output is not ctx.inputs[3]:
                grad.pool_torch(rollout.pooled, output, grad=True).copy_(g)
        if g_sensordata is not None and g_sensordata.numel():
            wp.to_torch(rollout.sensordata.grad, requires_grad=False)[:, :g_sensordata.shape[1]].copy_(g_sensordata)
        rollout.tape.backward()
        grads = [grad.pool_torch(rollout.pooled, a, grad=True).clone() for a in ctx.inputs]
        params = [wp.to_torch(a.grad, requires_grad=False).clone() for a in ctx.param_arrays]
        # release the tape; the step's buffers go back to the pool for the next rollout (which
        # zeroes their gradients: the tape's own zeroing of the gradients it saw is not needed,
        # the other arrays are dropped)
        if wp.config.verify_autograd_array_access:
            rollout.tape.reset()
        else:
            rollout.tape.launches, rollout.tape.scopes, rollout.tape.gradients = [], [], {}
        rollout.release()
        ctx.rollout = ctx.inputs = ctx.param_arrays = None
        return None, None, None, None, *grads, *params


def _model_with_params(sim, params: dict, tape: wp.Tape, ctx):
    """The model struct the step reads, with each requested parameter replaced by a per-world
    array that has a gradient buffer (ctx.param_arrays, in `params` order)."""
    model = sim.model
    base = model.struct
    ctx.param_arrays = []
    if not params:
        # the Sim's own struct, read as it is now (a copy of its hundred fields per call costs
        # more than a small step)
        return base
    m = copy_struct(base, model.dtype)
    kernels = grad.build(model.dtype, sim.schedule)
    for name, value in params.items():
        array = _wp_array(value, model.T.vec3 if name == "geom_friction" else model.dtype)
        ctx.param_arrays.append(array)
        if name == "body_mass":
            m.body_mass = array
        elif name == "actuator_gain":
            gainprm = wp.zeros(array.shape, dtype=model.T.vec3, device=model.device, requires_grad=True)
            with tape:
                wp.launch(kernels["gain_to_gainprm"], dim=array.shape, inputs=[array, base.actuator_gainprm, gainprm],
                          device=model.device)
            m.actuator_gainprm = gainprm
        elif name == "geom_friction":
            source = wp.array(np.asarray(model.contact_tables["friction_geoms"], dtype=np.int32).reshape(-1, 2),
                              dtype=wp.vec2i, device=model.device)
            friction = wp.zeros((array.shape[0], base.ncpair), dtype=model.T.vec5, device=model.device,
                                requires_grad=True)
            with tape:
                wp.launch(kernels["geom_friction_to_cpair"], dim=friction.shape,
                          inputs=[array, source, base.cpair_friction, friction], device=model.device)
            m.cpair_friction = friction
    return m


def diff_step(sim, qpos0: torch.Tensor, qvel0: torch.Tensor, ctrl: torch.Tensor, params: dict | None = None,
              *, act0: torch.Tensor | None = None, substeps: int = 1, sensors: bool = False,
              check_finite: bool = True) -> tuple[torch.Tensor, ...]:
    """One differentiable call of the simulator: `substeps` physics steps of the model's
    integrator (Euler, implicitfast or RK4), like `sim.step(substeps)`, from state (qpos0 [W, nq], qvel0
    [W, nv]) with controls ctrl [W, nu] held for all of them. Returns (qpos1, qvel1), which carry `grad_fn`.

    `act0` [W, na]: the actuator activations the step starts from (`sim.act`'s layout). A model
    with activations (sim.na > 0) needs it; with it, diff_step returns (qpos1, qvel1, act1) and
    act0 receives gradients like qpos0.

    `params` optionally maps model parameters to per-world tensors that replace the model's
    values for this call and receive gradients: "body_mass" [W, nbody], "actuator_gain"
    [W, nu] (the gain of fixed-gain actuators, gainprm[0]), "geom_friction" [W, ngeom, 3]
    (sliding, torsional, rolling; mixed into each contact pair as MuJoCo does). Tensors are converted to the
    simulation's precision; gradients come back in the caller's dtype.

    `sensors=True` appends `sensordata` [W, nsensordata] to the outputs: MuJoCo's sensors as
    `sim.sensordata` holds them after `sim.step(substeps)` from this state (those of the state the
    last substep started from, computed inside the step before integrating, as mj_step does),
    differentiable like the state: position and velocity sensors through the kinematics,
    acceleration, force, torque, touch and limit-force sensors also through the constraint
    solver's acceleration and forces, contact sensors through the contacts' positions, frames,
    distances and forces. The values equal `sim.sensordata`'s to rounding (the forces are
    recomputed from the solver's acceleration). Where a sensor is not smooth its gradient is
    that of the branch taken: which contacts exist and match, which limit row is active, a
    clamping cutoff, and the `found` count have zero gradient, as has a contact sensor's
    choice and order of contacts.

    The mocap bodies stay at the Sim's `mocap_pos` / `mocap_quat` (read when diff_step is
    called) for all substeps; gradients flow through contacts with them to qpos0, qvel0, ctrl
    and params, but not to the mocap poses themselves. The equality constraints that act are
    the Sim's `eq_active` (read when diff_step is called).

    Inputs with NaN or inf raise ValueError; with `check_finite=False` (batched environments,
    where one diverged world must not stop the others) they are not checked (one host
    synchronisation less) and such a world's outputs and gradients are non-finite.
    """
    from simrl.sim.sim import Sim

    if not isinstance(sim, Sim):
        raise TypeError(f"diff_step needs a simrl.Sim, got {type(sim).__name__}")
    if isinstance(substeps, bool) or not isinstance(substeps, int) or substeps < 1:
        raise ValueError(f"substeps must be a positive integer, got {substeps!r}")
    W = sim.num_worlds
    device = sim.qpos.device
    dtype = sim.qpos.dtype
    qpos0 = _check_tensor("qpos0", qpos0, (W, sim.nq), dtype, device, check_finite)
    qvel0 = _check_tensor("qvel0", qvel0, (W, sim.nv), dtype, device, check_finite)
    ctrl = _check_tensor("ctrl", ctrl, (W, sim.nu), dtype, device, check_finite)
    with_act = act0 is not None
    if with_act:
        act0 = _check_tensor("act0", act0, (W, sim.na), dtype, device, check_finite)
    elif sim.na:
        raise ValueError(f"the model has {sim.na} actuator activations (dyntype integrator, filter or filterexact): "
                         f"pass act0 [W, {sim.na}] (e.g. sim.act.clone()); diff_step then returns (qpos1, qvel1, act1)")
    else:
        act0 = torch.zeros((W, 0), dtype=dtype, device=device)
    params = dict(params or {})
    values = []
    for name, value in params.items():
        if name not in PARAMS:
            raise KeyError(f"diff_step cannot differentiate parameter {name!r}; supported: {', '.join(PARAMS)}")
        values.append(_check_tensor(f"params[{name!r}]", value, (W, *PARAMS[name](sim.model)), dtype, device))
    if not isinstance(sensors, bool):
        raise TypeError(f"sensors must be True or False, got {sensors!r}")
    if sensors and not sim.model.mjm.nsensordata:
        raise ValueError("diff_step(sensors=True): the model defines no sensors (its MJCF has no <sensor> section "
                         "entries)")
    out = _DiffStep.apply(sim, substeps, sensors, tuple(params), qpos0, qvel0, ctrl, act0, *values)
    state = out[:3] if with_act else out[:2]
    return (*state, out[3]) if sensors else state
