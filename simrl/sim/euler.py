"""Semi-implicit Euler (mj_EulerSkip and mj_advance, engine_forward.c).

qvel += h * qacc, then qpos is integrated with the new qvel. When the model has dof damping
(and neither eulerdamp nor damper is disabled), the damping is integrated implicitly:
qacc = (M + h D)^-1 (qfrc_smooth + qfrc_constraint).
"""


import functools

import warp as wp

from simrl.sim import factor_m, integrate_pos
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import kernel_module


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    _, factor_ld, solve_ld = factor_m.build(scalar)
    integrate_pos_ = integrate_pos.build(scalar)
    check_finite = integrate_pos.build_check(scalar)

    @wp.kernel(module=kernel_module(scalar))
    def euler(m: Model, d: Data):
        w = wp.tid()
        h = m.timestep
        if m.euler_damp:
            # qH = M + h * diag(damping), factorized like M
            wd = w % m.dof_damping.shape[0]
            for i in range(m.nv):
                d.qH[w, i, i] = d.qM[w, i, i] + h * m.dof_damping[wd, i]
                j = m.dof_parentid[i]
                while j >= 0:
                    d.qH[w, i, j] = d.qM[w, i, j]
                    j = m.dof_parentid[j]
            factor_ld(m, d.qH, w)
            for i in range(m.nv):
                d.qacc_int[w, i] = d.qfrc_smooth[w, i] + d.qfrc_constraint[w, i]
            solve_ld(m, d.qH, d.qacc_int, w)
        else:
            for i in range(m.nv):
                d.qacc_int[w, i] = d.qacc[w, i]
        for i in range(m.nv):
            d.qvel[w, i] = d.qvel[w, i] + d.qacc_int[w, i] * h
        integrate_pos_(m, d.qpos, d.qpos, d.qvel, h, w)
        check_finite(m, d, w)

    return euler
