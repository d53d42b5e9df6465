"""Semi-implicit Euler (mj_EulerSkip and mj_advance, engine_forward.c).

qvel += h * qacc, then qpos is integrated with the new qvel. When the model has dof damping
(and neither eulerdamp nor damper is disabled), the damping is integrated implicitly:
qacc = (M + h D)^-1 (qfrc_smooth + qfrc_constraint).

`damping(m, d, w, lane, nlanes)` (a world function, simrl.sim.types) computes the acceleration
to integrate, qacc_int; the element `joint(m, d, w, j)` then advances joint j's velocity and
position and checks them.
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import factor_m, integrate_pos
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

    @wp.func
    def damping(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qacc_int: (M + h diag(damping))^-1 (qfrc_smooth + qfrc_constraint), or qacc."""
        h = m.timestep
        if m.euler_damp:
            # qH = M + h * diag(damping), factorized like M
            wd = w % m.dof_damping.shape[0]
            i = int(lane)
            while i < m.nv:
                d.qH[w, i, i] = d.qM[w, i, i] + h * m.dof_damping[wd, i]
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

    return SimpleNamespace(damping=damping, joint=joint)
