"""4th-order Runge-Kutta as MuJoCo 4.0 defines it (mj_RungeKutta with N = 4,
engine_forward.c; changelog 4.0.0 item "RK4 ... Runge-Kutta-Munthe-Kaas correction").

Tableau A = diag(1/2, 1/2, 1), B = (1/6, 1/3, 1/3, 1/6). Stage i starts from the step's
initial state X0: qvel_i = qvel_0 + h A_i qacc_{i-1}, and qpos_i = X0 moved on the manifold
(mj_integratePos) by h A_i k_{i-1}, where k is the stage's position derivative.

For hinge, slide and the linear part of free joints k = qvel. For the rotation of ball and
free joints the stages live on SO(3): the orientation of stage i is q0 * exp(theta_i) with
theta_i = h A_i k_{i-1}, and k_i is the body angular velocity w_i mapped through the inverse
differential of the exponential map (Munthe-Kaas; Iserles et al., "Lie-group methods",
Acta Numerica 2000, truncated after the second commutator as fourth order requires):

    k_i = w_i + 1/2 theta_i x w_i + 1/12 theta_i x (theta_i x w_i)

The step ends with qpos = X0 moved by h sum_i B_i k_i and qvel = qvel_0 + h sum_i B_i qacc_i.
The Sim runs

    forward(X0) -> rk4_begin -> forward -> rk4_stage -> forward -> rk4_stage -> forward -> rk4_end
"""

import functools

import warp as wp

from simrl.sim import integrate_pos
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, JNT_FREE, kernel_module, scalar_types

RK4_A = (0.5, 0.5, 1.0)
RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    vec3 = T.vec3
    integrate_pos_ = integrate_pos.build(scalar)
    check_finite = integrate_pos.build_check(scalar)

    @wp.func
    def stage_derivative(m: Model, d: Data, w: int, a: scalar):
        """rk_k <- k_i of the stage just evaluated; on entry rk_k holds k_{i-1}, and the stage
        was placed at theta_i = h a k_{i-1}."""
        h = m.timestep
        for j in range(m.njnt):
            da = m.jnt_dofadr[j]
            jtype = m.jnt_type[j]
            rot = int(-1)
            if jtype == JNT_FREE:
                for c in range(3):
                    d.rk_k[w, da + c] = d.qvel[w, da + c]
                rot = da + 3
            elif jtype == JNT_BALL:
                rot = da
            else:
                d.rk_k[w, da] = d.qvel[w, da]
            if rot >= 0:
                theta = vec3(d.rk_k[w, rot], d.rk_k[w, rot + 1], d.rk_k[w, rot + 2]) * a * h
                omega = vec3(d.qvel[w, rot], d.qvel[w, rot + 1], d.qvel[w, rot + 2])
                tw = wp.cross(theta, omega)
                k = omega + tw * scalar(0.5) + wp.cross(theta, tw) * (scalar(1.0) / scalar(12.0))
                for c in range(3):
                    d.rk_k[w, rot + c] = k[c]

    @wp.func
    def accumulate(m: Model, d: Data, w: int, b: scalar):
        for i in range(m.nv):
            d.rk_dqpos[w, i] = d.rk_dqpos[w, i] + d.rk_k[w, i] * b
            d.rk_dqvel[w, i] = d.rk_dqvel[w, i] + d.qacc[w, i] * b

    @wp.func
    def next_stage(m: Model, d: Data, w: int, a: scalar):
        """(qpos, qvel) = X0 advanced by h a (k, qacc) of the stage just evaluated."""
        h = m.timestep
        integrate_pos_(m, d.rk_qpos, d.qpos, d.rk_k, a * h, w)
        for i in range(m.nv):
            d.qvel[w, i] = d.rk_qvel[w, i] + (d.qacc[w, i] * a) * h

    @wp.kernel(module=kernel_module(scalar))
    def rk4_begin(m: Model, d: Data, a_next: scalar, b: scalar):
        """Save X0, start the B-weighted sums with stage 1 (k_1 = qvel), move to stage 2."""
        w = wp.tid()
        for i in range(m.nq):
            d.rk_qpos[w, i] = d.qpos[w, i]
        for i in range(m.nv):
            d.rk_qvel[w, i] = d.qvel[w, i]
            d.rk_k[w, i] = d.qvel[w, i]
            d.rk_dqpos[w, i] = scalar(0.0)
            d.rk_dqvel[w, i] = scalar(0.0)
        accumulate(m, d, w, b)
        next_stage(m, d, w, a_next)

    @wp.kernel(module=kernel_module(scalar))
    def rk4_stage(m: Model, d: Data, a: scalar, a_next: scalar, b: scalar):
        """Add the stage just evaluated (placed with A coefficient `a`), move to the next."""
        w = wp.tid()
        stage_derivative(m, d, w, a)
        accumulate(m, d, w, b)
        next_stage(m, d, w, a_next)

    @wp.kernel(module=kernel_module(scalar))
    def rk4_end(m: Model, d: Data, a: scalar, b: scalar):
        """Add the last stage, then advance X0 by h times the B-weighted sums (mj_advance)."""
        w = wp.tid()
        h = m.timestep
        stage_derivative(m, d, w, a)
        accumulate(m, d, w, b)
        for i in range(m.nv):
            d.qvel[w, i] = d.rk_qvel[w, i] + d.rk_dqvel[w, i] * h
        integrate_pos_(m, d.rk_qpos, d.qpos, d.rk_dqpos, h, w)
        check_finite(m, d, w)

    return rk4_begin, rk4_stage, rk4_end
