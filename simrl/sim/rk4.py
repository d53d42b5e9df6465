"""4th-order Runge-Kutta as MuJoCo 4.0 defines it (mj_RungeKutta with N = 4,
engine_forward.c; changelog 4.0.0 item "RK4 ... Runge-Kutta-Munthe-Kaas correction").

Tableau A = diag(1/2, 1/2, 1), B = (1/6, 1/3, 1/3, 1/6). Stage i starts from the step's
initial state X0: qvel_i = qvel_0 + h A_i qacc_{i-1}, and qpos_i = X0 moved on the manifold
(mj_integratePos) by h A_i k_{i-1}, where k is the stage's position derivative.

For hinge, slide and the linear part of free joints k = qvel. For the rotation of ball and
free joints the stages live on SO(3): the orientation of stage i is q0 * exp(theta_i) with
theta_i = h A_i k_{i-1}, and k_i is the body angular velocity w_i mapped through the inverse
differential of the exponential map (Munthe-Kaas; Iserles et al., "Lie-group methods",
Acta Numerica 2000, eq. 3.12 summed in closed form on so(3)), with t = |theta_i|:

    k_i = w_i + 1/2 theta_i x w_i + c(t) theta_i x (theta_i x w_i),
    c(t) = (1 - (t/2) cot(t/2)) / t^2 = 1/12 + t^2/720 + t^4/30240 + ...

MuJoCo 4.0.1 applies the whole map, not the series cut after c = 1/12 (the least fourth order
needs): on a body spinning at 52 rad/s (tests/test_equality.py's model, RK4, step 31) the stage
orientations it places give k within 1e-13 of the closed form (the round-off of reading k back
from them) and 3.5e-9 from the cut series (tests/test_rk4.py).

The step ends with qpos = X0 moved by h sum_i B_i k_i and qvel = qvel_0 + h sum_i B_i qacc_i.

Activations are part of the state (mj_RungeKutta's X and F): stage i starts from
act_i = act_0 + h A_i act_dot_{i-1}, neither clamped nor integrated exactly, and the step ends
with mj_advance's mj_nextActivation from act_0 with the rate sum_i B_i act_dot_i (filterexact's
exact formula and the actrange clamp apply there only).

The Sim runs

    forward(X0) -> begin -> forward -> stage 1 -> forward -> stage 2 -> forward -> end

Every part of it acts on one joint's coordinates and dofs, or on one actuator's activation, so
each is an element `f(m, d, w, j)` over joints and `f(m, d, w, a)` over actuators; the
coefficients come from the model (Model.rk4_a, rk4_b: simrl.sim.types.RK4_A, RK4_B).
"""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import actuation, integrate_pos
from simrl.sim.data import data_struct
from simrl.sim.integrate_pos import jnt_nq, jnt_nv
from simrl.sim.model import model_struct
from simrl.sim.types import JointType, scalar_types


@functools.cache
def stage_funcs(scalar):
    """(stage_derivative, next_stage), elements over joints on explicit arrays: the Sim's RK4
    passes its Data buffers, the differentiable step (simrl.sim.grad) fresh buffers per stage."""
    T = scalar_types(scalar)
    Model = model_struct(scalar)
    vec3 = T.vec3
    integrate = integrate_pos.build(scalar)

    @wp.func
    def dexp_inv_coef(t2: scalar):
        """c(t) = (1 - (t/2) cot(t/2)) / t^2 of the inverse differential of exp on so(3), from
        t2 = t^2. Below t = 1/16 its series to t^4: the closed form cancels there (the error it
        adds to k is eps |w| either way, c t^2 bounding it), and at t = 0 it divides 0 by 0; the
        series' first left-out term, t^6 / 1209600, adds under 2e-16 |w| to k below 1/16."""
        if t2 < scalar(1.0) / scalar(256.0):
            return scalar(1.0) / scalar(12.0) + t2 * (scalar(1.0) / scalar(720.0) + t2 / scalar(30240.0))
        half = wp.sqrt(t2) * scalar(0.5)
        return (scalar(1.0) - half / wp.tan(half)) / t2

    @wp.func
    def stage_derivative(m: Model, k_prev: wp.array2d(dtype=scalar), qvel: wp.array2d(dtype=scalar),
                         k: wp.array2d(dtype=scalar), a: scalar, w: int, j: int):
        """Joint j's part of k <- k_i of the stage just evaluated (velocity qvel), placed at
        theta_i = h a k_{i-1} (k_prev). k may alias k_prev: the joint reads its entries before
        writing them.

        Model: jnt_dofadr, jnt_type, timestep. In: k_prev, qvel. Out: k."""
        h = m.timestep
        da = m.jnt_dofadr[j]
        jtype = m.jnt_type[j]
        rot = int(-1)
        if jtype == JointType.FREE:
            for c in range(3):
                k[w, da + c] = qvel[w, da + c]
            rot = da + 3
        elif jtype == JointType.BALL:
            rot = da
        else:
            k[w, da] = qvel[w, da]
        if rot >= 0:
            theta = vec3(k_prev[w, rot], k_prev[w, rot + 1], k_prev[w, rot + 2]) * a * h
            omega = vec3(qvel[w, rot], qvel[w, rot + 1], qvel[w, rot + 2])
            tw = wp.cross(theta, omega)
            kr = omega + tw * scalar(0.5) + wp.cross(theta, tw) * dexp_inv_coef(wp.dot(theta, theta))
            for c in range(3):
                k[w, rot + c] = kr[c]

    @wp.func
    def next_stage(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                   k: wp.array2d(dtype=scalar), qacc: wp.array2d(dtype=scalar), a: scalar,
                   qpos: wp.array2d(dtype=scalar), qvel: wp.array2d(dtype=scalar), w: int, j: int):
        """Joint j's part of (qpos, qvel) = X0 = (qpos0, qvel0) advanced by h a (k, qacc) of the
        stage just evaluated.

        Model: jnt_dofadr, jnt_qposadr, jnt_type, timestep. In: qpos0, qvel0, k, qacc. Out: qpos, qvel."""
        h = m.timestep
        integrate.joint(m, qpos0, qpos, k, a * h, w, j)
        dadr = m.jnt_dofadr[j]
        for c in range(jnt_nv(m.jnt_type[j])):
            i = dadr + c
            qvel[w, i] = qvel0[w, i] + (qacc[w, i] * a) * h

    return stage_derivative, next_stage


@functools.cache
def activation_funcs(scalar):
    """(next_stage_act, end_act), elements over actuators on explicit arrays (as stage_funcs)."""
    Model = model_struct(scalar)
    advance_activation = actuation.build(scalar).advance_activation

    @wp.func
    def next_stage_act(m: Model, act0: wp.array2d(dtype=scalar), act_dot: wp.array2d(dtype=scalar), a: scalar,
                       act: wp.array2d(dtype=scalar), w: int, u: int):
        """Actuator u's activation of the next stage: act0 + h a act_dot (mj_RungeKutta: no clamp).

        Model: actuator, timestep. In: act0, act_dot. Out: act."""
        adr = m.actuator[u].actadr
        if adr >= 0:
            act[w, adr] = act0[w, adr] + (act_dot[w, adr] * a) * m.timestep

    @wp.func
    def end_act(m: Model, act0: wp.array2d(dtype=scalar), dact: wp.array2d(dtype=scalar),
                act: wp.array2d(dtype=scalar), w: int, u: int):
        """Actuator u's activation at the step's end: act0 advanced by the B-weighted rate dact
        (mj_advance, mj_nextActivation).

        Model: actuator, enable_actuation, timestep. In: act0, dact. Out: act."""
        advance_activation(m, act0, dact, act, w, u)

    return next_stage_act, end_act


@functools.cache
def build(scalar):
    """The Sim's RK4 steps as elements over joints, `begin`, `stage1`, `stage2`, `end`, and over
    actuators, `begin_actuator`, ... `end_actuator` (the activations, mj_RungeKutta)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    integrate = integrate_pos.build(scalar)
    stage_derivative, next_stage = stage_funcs(scalar)

    @wp.func
    def accumulate(m: Model, d: Data, w: int, j: int, b: scalar):
        dadr = m.jnt_dofadr[j]
        for c in range(jnt_nv(m.jnt_type[j])):
            i = dadr + c
            d.rk_dqpos[w, i] = d.rk_dqpos[w, i] + d.rk_k[w, i] * b
            d.rk_dqvel[w, i] = d.rk_dqvel[w, i] + d.qacc[w, i] * b

    @wp.func
    def begin(m: Model, d: Data, w: int, j: int):
        """Save X0, start the B-weighted sums with stage 1 (k_1 = qvel), move to stage 2.

        Model: jnt_dofadr, jnt_qposadr, jnt_type, rk4_a, rk4_b, timestep. Data in: qpos, qvel, qacc. Data out:
        rk_qpos, rk_qvel, rk_k, rk_dqpos, rk_dqvel, qpos, qvel (each of the joint's coordinates and dofs)."""
        padr = m.jnt_qposadr[j]
        for c in range(jnt_nq(m.jnt_type[j])):
            d.rk_qpos[w, padr + c] = d.qpos[w, padr + c]
        dadr = m.jnt_dofadr[j]
        for c in range(jnt_nv(m.jnt_type[j])):
            i = dadr + c
            d.rk_qvel[w, i] = d.qvel[w, i]
            d.rk_k[w, i] = d.qvel[w, i]
            d.rk_dqpos[w, i] = scalar(0.0)
            d.rk_dqvel[w, i] = scalar(0.0)
        accumulate(m, d, w, j, m.rk4_b[0])
        next_stage(m, d.rk_qpos, d.rk_qvel, d.rk_k, d.qacc, m.rk4_a[0], d.qpos, d.qvel, w, j)

    def make_stage(i):
        @wp.func
        def stage(m: Model, d: Data, w: int, j: int):
            """Add the stage just evaluated (placed with A coefficient a_{i-1}), move to the next.

            Model: jnt_dofadr, jnt_qposadr, jnt_type, rk4_a, rk4_b, timestep. Data in: qvel, qacc, rk_qpos, rk_qvel,
            rk_k, rk_dqpos, rk_dqvel. Data out: rk_k, rk_dqpos, rk_dqvel, qpos, qvel (each of the joint's
            coordinates and dofs)."""
            stage_derivative(m, d.rk_k, d.qvel, d.rk_k, m.rk4_a[i - 1], w, j)
            accumulate(m, d, w, j, m.rk4_b[i])
            next_stage(m, d.rk_qpos, d.rk_qvel, d.rk_k, d.qacc, m.rk4_a[i], d.qpos, d.qvel, w, j)

        return stage

    @wp.func
    def end(m: Model, d: Data, w: int, j: int):
        """Add the last stage, then advance X0 by h times the B-weighted sums, and keep the last
        stage's qacc as the next warm start (mj_advance).

        Model: jnt_dofadr, jnt_qposadr, jnt_type, rk4_a, rk4_b, timestep. Data in: qvel, qacc, rk_qpos, rk_qvel,
        rk_k, rk_dqpos, rk_dqvel. Data out: rk_k, rk_dqpos, rk_dqvel, qvel, qpos, qacc_warmstart (each of the
        joint's coordinates and dofs), nan_world (by atomic max)."""
        h = m.timestep
        stage_derivative(m, d.rk_k, d.qvel, d.rk_k, m.rk4_a[2], w, j)
        accumulate(m, d, w, j, m.rk4_b[3])
        dadr = m.jnt_dofadr[j]
        for c in range(jnt_nv(m.jnt_type[j])):
            i = dadr + c
            d.qvel[w, i] = d.rk_qvel[w, i] + d.rk_dqvel[w, i] * h
            # the next step's warm start: the last stage's qacc (mj_advance)
            d.qacc_warmstart[w, i] = d.qacc[w, i]
        integrate.joint(m, d.rk_qpos, d.qpos, d.rk_dqpos, h, w, j)
        integrate.check_joint(m, d, w, j)

    next_stage_act, end_act = activation_funcs(scalar)

    @wp.func
    def begin_actuator(m: Model, d: Data, w: int, u: int):
        """Save act_0, start the B-weighted sum of act_dot, move to stage 2.

        Model: actuator, rk4_a, rk4_b, timestep. Data in: act, act_dot. Data out: rk_act, rk_dact, act (the actuator's
        activation)."""
        adr = m.actuator[u].actadr
        if adr >= 0:
            d.rk_act[w, adr] = d.act[w, adr]
            d.rk_dact[w, adr] = scalar(0.0) + d.act_dot[w, adr] * m.rk4_b[0]
        next_stage_act(m, d.rk_act, d.act_dot, m.rk4_a[0], d.act, w, u)

    def make_stage_actuator(i):
        @wp.func
        def stage_actuator(m: Model, d: Data, w: int, u: int):
            """Add the stage's act_dot (weight B_i), move to the next stage (A coefficient a_i).

            Model: actuator, rk4_a, rk4_b, timestep. Data in: act_dot, rk_act, rk_dact. Data out: rk_dact, act (the
            actuator's activation)."""
            adr = m.actuator[u].actadr
            if adr >= 0:
                d.rk_dact[w, adr] = d.rk_dact[w, adr] + d.act_dot[w, adr] * m.rk4_b[i]
            next_stage_act(m, d.rk_act, d.act_dot, m.rk4_a[i], d.act, w, u)

        return stage_actuator

    @wp.func
    def end_actuator(m: Model, d: Data, w: int, u: int):
        """Add the last stage's act_dot, then advance act_0 by the B-weighted rate.

        Model: actuator, enable_actuation, rk4_b, timestep. Data in: act_dot, rk_act, rk_dact. Data out: rk_dact, act
        (the actuator's activation)."""
        adr = m.actuator[u].actadr
        if adr >= 0:
            d.rk_dact[w, adr] = d.rk_dact[w, adr] + d.act_dot[w, adr] * m.rk4_b[3]
        end_act(m, d.rk_act, d.rk_dact, d.act, w, u)

    return SimpleNamespace(begin=begin, stage1=make_stage(1), stage2=make_stage(2), end=end,
                           begin_actuator=begin_actuator, stage1_actuator=make_stage_actuator(1),
                           stage2_actuator=make_stage_actuator(2), end_actuator=end_actuator)
