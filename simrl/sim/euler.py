"""Semi-implicit Euler and implicitfast (mj_EulerSkip, mj_implicitSkip and mj_advance,
engine_forward.c).

qvel += h * qacc, then qpos is integrated with the new qvel. When the model has dof damping
(and neither eulerdamp nor damper is disabled), Euler integrates the damping implicitly:
qacc = (M + h D)^-1 (qfrc_smooth + qfrc_constraint). The implicitfast integrator always
integrates qacc = (M - h qDeriv)^-1 (qfrc_smooth + qfrc_constraint), qDeriv the derivative of
qfrc_smooth with respect to qvel without RNE's part (mjd_smooth_vel with flg_bias = 0): the
actuators' (mjd_actuator_vel) minus the dof damping (mjd_passive_vel). The constraint forces
are those the solver found with M, as in MuJoCo. With joint transmissions on hinges and slides
qDeriv is diagonal, so M - h qDeriv keeps M's sparsity and the same L'DL factorization.

`damping(m, d, w, lane, nlanes)` (a world function, simrl.sim.types) computes the acceleration
to integrate, qacc_int (`qderiv_dof(m, d, w, i)` is qDeriv[i, i]); the element
`joint(m, d, w, j)` then advances joint j's velocity and position and checks them, and
`actuator(m, d, w, a)` advances actuator a's activation (mj_advance).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import actuation, factor_m, integrate_pos
from simrl.sim.data import data_struct
from simrl.sim.integrate_pos import jnt_nv
from simrl.sim.model import model_struct
from simrl.sim.types import block_sync, no_sync


@functools.cache
def build(scalar, lanes: bool = False):
    Model, Data = model_struct(scalar), data_struct(scalar)
    ld = factor_m.build(scalar, lanes)
    factor_ld, solve_ld = ld.factor_ld, ld.solve_ld
    integrate = integrate_pos.build(scalar)
    sync = block_sync if lanes else no_sync
    actuator_qderiv = actuation.build(scalar).qderiv_dof

    @wp.func
    def qderiv_dof(m: Model, d: Data, w: int, i: int):
        """qDeriv[i, i]: with implicitfast the actuators' derivative, then minus the dof damping
        (mjd_smooth_vel's order); for Euler only the damping (mj_EulerSkip)."""
        deriv = scalar(0.0)
        if m.implicitfast:
            deriv = actuator_qderiv(m, d, w, i)
        if m.enable_damper:
            deriv = deriv - m.dof_damping[w % m.dof_damping.shape[0], i]
        return deriv

    @wp.func
    def damping(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qacc_int: (M - h diag(qDeriv))^-1 (qfrc_smooth + qfrc_constraint), or qacc."""
        h = m.timestep
        if m.euler_damp or m.implicitfast:
            # qH = M - h qDeriv (Euler: M + h diag(damping)), factorized like M
            i = int(lane)
            while i < m.nv:
                d.qH[w, i, i] = d.qM[w, i, i] - h * qderiv_dof(m, d, w, i)
                j = m.dof_parentid[i]
                while j >= 0:
                    d.qH[w, i, j] = d.qM[w, i, j]
                    j = m.dof_parentid[j]
                d.qacc_int[w, i] = d.qfrc_smooth[w, i] + d.qfrc_constraint[w, i]
                i = i + nlanes
            sync()
            factor_ld(m, d.qH, w, lane, nlanes)
            solve_ld(m, d.qH, d.qacc_int, w, lane, nlanes)
        else:
            i = int(lane)
            while i < m.nv:
                d.qacc_int[w, i] = d.qacc[w, i]
                i = i + nlanes

    @wp.func
    def joint(m: Model, d: Data, w: int, j: int):
        h = m.timestep
        dadr = m.jnt_dofadr[j]
        for k in range(jnt_nv(m.jnt_type[j])):
            i = dadr + k
            d.qvel[w, i] = d.qvel[w, i] + d.qacc_int[w, i] * h
        integrate.joint(m, d.qpos, d.qpos, d.qvel, h, w, j)
        integrate.check_joint(m, d, w, j)

    advance_activation = actuation.build(scalar).advance_activation

    @wp.func
    def actuator(m: Model, d: Data, w: int, a: int):
        """Actuator a's activation advanced by its act_dot (mj_advance)."""
        advance_activation(m, d.act, d.act_dot, d.act, w, a)

    return SimpleNamespace(damping=damping, joint=joint, qderiv_dof=qderiv_dof, actuator=actuator)
