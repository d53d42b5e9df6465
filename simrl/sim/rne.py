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
            cvel = d.cvel[w, m.body_parentid[b]]
            for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
                da = m.jnt_dofadr[j]
                jtype = m.jnt_type[j]
                if jtype == JNT_FREE or jtype == JNT_BALL:
                    rot = da
                    if jtype == JNT_FREE:
                        # translational cdof are fixed in the world: zero derivative
                        tmp = vec6(scalar(0.0))
                        for k in range(3):
                            d.cdof_dot[w, da + k] = vec6(scalar(0.0))
                            tmp = tmp + d.cdof[w, da + k] * d.qvel[w, da + k]
                        cvel = cvel + tmp
                        rot = da + 3
                    # the three rotational cdof_dot use the velocity before this joint's rotation
                    tmp = vec6(scalar(0.0))
                    for k in range(3):
                        d.cdof_dot[w, rot + k] = f.motion_cross(cvel, d.cdof[w, rot + k])
                        tmp = tmp + d.cdof[w, rot + k] * d.qvel[w, rot + k]
                    cvel = cvel + tmp
                else:
                    d.cdof_dot[w, da] = f.motion_cross(cvel, d.cdof[w, da])
                    cvel = cvel + d.cdof[w, da] * d.qvel[w, da]
            d.cvel[w, b] = cvel

    @wp.func
    def rne(m: Model, d: Data, w: int):
        """qfrc_bias = Coriolis, centrifugal and gravity forces (the world accelerates at -g)."""
        g = m.gravity
        d.cacc[w, 0] = vec6(scalar(0.0), scalar(0.0), scalar(0.0), -g[0], -g[1], -g[2])
        for b in range(1, m.nbody):
            tmp = vec6(scalar(0.0))
            for i in range(m.body_dofadr[b], m.body_dofadr[b] + m.body_dofnum[b]):
                tmp = tmp + d.cdof_dot[w, i] * d.qvel[w, i]
            cacc = d.cacc[w, m.body_parentid[b]] + tmp
            d.cacc[w, b] = cacc
            cinert = d.cinert[w, b]
            cvel = d.cvel[w, b]
            d.cfrc_bias[w, b] = f.inert_mul(cinert, cacc) + f.force_cross(cvel, f.inert_mul(cinert, cvel))
        d.cfrc_bias[w, 0] = vec6(scalar(0.0))
        for i in range(m.nbody - 1):
            b = m.nbody - 1 - i
            p = m.body_parentid[b]
            if p > 0:
                d.cfrc_bias[w, p] = d.cfrc_bias[w, p] + d.cfrc_bias[w, b]
        for i in range(m.nv):
            d.qfrc_bias[w, i] = wp.dot(d.cdof[w, i], d.cfrc_bias[w, m.dof_bodyid[i]])

    return com_vel, rne
