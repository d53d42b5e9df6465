"""Passive forces: joint springs and dof dampers (mj_passive / mj_springdamper,
engine_passive.c). Fluid forces, gravity compensation and polynomial springs are refused
when the model is loaded."""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, JNT_FREE, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f = T.f

    @wp.func
    def passive(m: Model, d: Data, w: int):
        for i in range(m.nv):
            d.qfrc_spring[w, i] = scalar(0.0)
            d.qfrc_damper[w, i] = scalar(0.0)

        if m.enable_spring:
            ws = w % m.jnt_stiffness.shape[0]
            wq = w % m.qpos_spring.shape[0]
            for j in range(m.njnt):
                k = m.jnt_stiffness[ws, j]
                if k == scalar(0.0):
                    continue
                padr = m.jnt_qposadr[j]
                dadr = m.jnt_dofadr[j]
                jtype = m.jnt_type[j]
                if jtype == JNT_FREE or jtype == JNT_BALL:
                    if jtype == JNT_FREE:
                        # linear spring on the position, world frame
                        for c in range(3):
                            d.qfrc_spring[w, dadr + c] = -k * (d.qpos[w, padr + c] - m.qpos_spring[wq, padr + c])
                        padr = padr + 3
                        dadr = dadr + 3
                    # rotational spring on the orientation difference, local frame
                    q = f.quat_normalize(f.quat_from_qpos(d.qpos, w, padr))
                    dif = f.sub_quat(q, f.quat_from_qpos(m.qpos_spring, wq, padr))
                    for c in range(3):
                        d.qfrc_spring[w, dadr + c] = -k * dif[c]
                else:
                    d.qfrc_spring[w, dadr] = -k * (d.qpos[w, padr] - m.qpos_spring[wq, padr])

        if m.enable_damper:
            wd = w % m.dof_damping.shape[0]
            for i in range(m.nv):
                d.qfrc_damper[w, i] = -m.dof_damping[wd, i] * d.qvel[w, i]

        for i in range(m.nv):
            d.qfrc_passive[w, i] = d.qfrc_spring[w, i] + d.qfrc_damper[w, i]

    return passive
