"""Body velocities and the bias force C(q, qdot) + g(q) by recursive Newton-Euler
(mj_comVel and mj_rne with flg_acc = 0, engine_core_smooth.c)."""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, JNT_FREE, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec6 = T.f, T.vec6

    @wp.func
    def com_vel(m: Model, d: Data, w: int):
        """cvel (spatial velocity of each body in the CoM frame) and cdof_dot = cvel x cdof."""
        d.cvel[w, 0] = vec6(scalar(0.0))
        for b in range(1, m.nbody):
            parent_vel = d.cvel[w, m.body_parentid[b]]
            dofadr = m.body_dofadr[b]
            dofnum = m.body_dofnum[b]
            # dof_cvel[i]: the body's velocity with dofs up to i added (kept in memory so that no
            # local is carried across iterations: Warp's adjoints replay loop bodies)
            for i in range(dofadr, dofadr + dofnum):
                before = parent_vel
                if i > dofadr:
                    before = d.dof_cvel[w, i - 1]
                # cdof_dot uses the velocity before the dof's joint part: a ball's three dofs share
                # one, a free joint's rotation sees its translation, its translation has none
                jnt = m.dof_jntid[i]
                jtype = m.jnt_type[jnt]
                rel = i - m.jnt_dofadr[jnt]
                start = i
                if jtype == JNT_BALL:
                    start = i - rel
                elif jtype == JNT_FREE:
                    start = -1
                    if rel >= 3:
                        start = i - rel + 3
                cdof_dot = vec6(scalar(0.0))
                if start >= 0:
                    v = parent_vel
                    if start > dofadr:
                        v = d.dof_cvel[w, start - 1]
                    cdof_dot = f.motion_cross(v, d.cdof[w, i])
                d.cdof_dot[w, i] = cdof_dot
                d.dof_cvel[w, i] = before + d.cdof[w, i] * d.qvel[w, i]
            cvel = parent_vel
            if dofnum > 0:
                cvel = d.dof_cvel[w, dofadr + dofnum - 1]
            d.cvel[w, b] = cvel

    @wp.func
    def rne(m: Model, d: Data, w: int):
        """qfrc_bias = Coriolis, centrifugal and gravity forces (the world accelerates at -g)."""
        g = m.gravity
        d.cacc[w, 0] = vec6(scalar(0.0), scalar(0.0), scalar(0.0), -g[0], -g[1], -g[2])
        for b in range(1, m.nbody):
            d.cacc[w, b] = d.cacc[w, m.body_parentid[b]]
            for i in range(m.body_dofadr[b], m.body_dofadr[b] + m.body_dofnum[b]):
                d.cacc[w, b] += d.cdof_dot[w, i] * d.qvel[w, i]
            cacc = d.cacc[w, b]
            cinert = d.cinert[w, b]
            cvel = d.cvel[w, b]
            d.cfrc_bias[w, b] = f.inert_mul(cinert, cacc) + f.force_cross(cvel, f.inert_mul(cinert, cvel))
        d.cfrc_bias[w, 0] = vec6(scalar(0.0))
        for i in range(m.nbody - 1):
            b = m.nbody - 1 - i
            p = m.body_parentid[b]
            if p > 0:
                d.cfrc_bias[w, p] += d.cfrc_bias[w, b]
        for i in range(m.nv):
            d.qfrc_bias[w, i] = wp.dot(d.cdof[w, i], d.cfrc_bias[w, m.dof_bodyid[i]])

    return com_vel, rne
