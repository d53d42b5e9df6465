"""Passive forces: joint springs, dof dampers, the tendons' springs and dampers (simrl.sim.tendon)
and gravity compensation (mj_passive, mj_springdamper, mj_gravcomp, engine_passive.c). Fluid
forces and polynomial springs are refused when the model is loaded.

Elements: `spring_joint(m, d, w, j)` (the spring force on joint j's dofs), `dof(m, d, w, i)`
(the damper of dof i, its gravity compensation and the sum).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JointType, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, quat = T.f, T.vec3, T.quat

    @wp.func
    def rotational_spring(q: quat, ref: quat, k: scalar):
        """The torque -k subQuat(normalize(q), ref) of a ball joint's spring, or of a free joint's
        rotation (mj_springdamper: mju_normalize4, mju_subQuat), in the joint's local frame."""
        return -k * f.sub_quat(f.quat_normalize(q), ref)

    def make_spring_joint(balls: bool, others: bool):
        """`spring_joint` for the rotations of free and ball joints (`balls`), for hinges, slides
        and the free joints' positions (`others`), or all: the differentiable step launches the
        two apart (in one kernel their generated adjoint needs more registers than a GPU thread
        should use)."""
        @wp.func
        def spring_joint(m: Model, d: Data, w: int, j: int):
            """Every dof belongs to one joint and one part of it, so each element of qfrc_spring
            is written once.

            Model: enable_spring, jnt_dofadr, jnt_qposadr, jnt_stiffness, jnt_type, qpos_spring. Data in: qpos. Data
            out: qfrc_spring (of the joint's dofs)."""
            jtype = m.jnt_type[j]
            k = scalar(0.0)
            if m.enable_spring:
                k = m.jnt_stiffness[w % m.jnt_stiffness.shape[0], j]
            wq = w % m.qpos_spring.shape[0]
            padr = m.jnt_qposadr[j]
            dadr = m.jnt_dofadr[j]
            if jtype == JointType.FREE:
                if wp.static(others):
                    # linear spring on the position, world frame
                    for c in range(3):
                        frc = scalar(0.0)
                        if k != scalar(0.0):
                            frc = -k * (d.qpos[w, padr + c] - m.qpos_spring[wq, padr + c])
                        d.qfrc_spring[w, dadr + c] = frc
                padr = padr + 3
                dadr = dadr + 3
            if jtype == JointType.FREE or jtype == JointType.BALL:
                if wp.static(balls):
                    # rotational spring on the orientation difference, local frame
                    torque = vec3(scalar(0.0))
                    if k != scalar(0.0):
                        torque = rotational_spring(f.quat_from_qpos(d.qpos, w, padr),
                                                   f.quat_from_qpos(m.qpos_spring, wq, padr), k)
                    for c in range(3):
                        d.qfrc_spring[w, dadr + c] = torque[c]
            elif wp.static(others):
                frc = scalar(0.0)
                if k != scalar(0.0):
                    frc = -k * (d.qpos[w, padr] - m.qpos_spring[wq, padr])
                d.qfrc_spring[w, dadr] = frc
        return spring_joint

    @wp.func
    def gravcomp_dof(m: Model, d: Data, w: int, i: int):
        """qfrc_gravcomp[i] (mj_gravcomp): for each body b with body_gravcomp != 0 whose chain holds
        dof i, in ascending order, the force F = -gravity mass_b gravcomp_b at b's xipos through
        column i of its Jacobian (mj_applyFT): (cdof_lin + cdof_ang x (xipos - subtree_com of b's
        root)) . F. Gathered by the dof, so each element is written once, then added to."""
        d.qfrc_gravcomp[w, i] = scalar(0.0)
        if m.enable_gravcomp != 0:
            cdof = d.cdof[w, i]
            ang = vec3(cdof[0], cdof[1], cdof[2])
            lin = vec3(cdof[3], cdof[4], cdof[5])
            g = m.gravity[w % m.gravity.shape[0]]
            adr = m.dof_gravcomp_adr[i]
            for k in range(adr, adr + m.dof_gravcomp_num[i]):
                b = m.dof_gravcomp_body[k]
                scale = -(m.body_mass[w % m.body_mass.shape[0], b] * m.body_gravcomp[b])
                jacp = lin + wp.cross(ang, d.xipos[w, b] - d.subtree_com[w, m.body_rootid[b]])
                d.qfrc_gravcomp[w, i] += jacp[0] * (g[0] * scale) + jacp[1] * (g[1] * scale) + \
                    jacp[2] * (g[2] * scale)

    @wp.func
    def dof(m: Model, d: Data, w: int, i: int):
        """qfrc_damper[i] and qfrc_passive[i] = spring + damper + gravcomp (unless the joint's
        actuatorgravcomp sends gravcomp to qfrc_actuator, simrl.sim.actuation).

        Model: body_gravcomp, body_mass, body_rootid, dof_damping, dof_gravcomp_adr, dof_gravcomp_body,
        dof_gravcomp_num, dof_jntid, dof_tendon, dof_tendon_adr, enable_damper, enable_gravcomp, gravity,
        jnt_actgravcomp. Data in: qvel, qfrc_spring, cdof, xipos, subtree_com, ten_J, ten_spring, ten_damper. Data
        out: qfrc_spring (the tendons' added), qfrc_damper, qfrc_gravcomp, qfrc_passive."""
        damper = scalar(0.0)
        if m.enable_damper:
            damper = -m.dof_damping[w % m.dof_damping.shape[0], i] * d.qvel[w, i]
        d.qfrc_damper[w, i] = damper
        # the tendons through dof i, ascending: ten_J[t, i] times their spring and damper forces
        # (mj_springdamper)
        span = m.dof_tendon_adr[i]
        for k in range(span[0], span[0] + span[1]):
            t = m.dof_tendon[k]
            jt = d.ten_J[w, t, i]
            d.qfrc_spring[w, i] += jt * d.ten_spring[w, t]
            d.qfrc_damper[w, i] += jt * d.ten_damper[w, t]
        gravcomp_dof(m, d, w, i)
        passive = d.qfrc_spring[w, i] + d.qfrc_damper[w, i]
        if m.enable_gravcomp != 0 and m.jnt_actgravcomp[m.dof_jntid[i]] == 0:
            passive = passive + d.qfrc_gravcomp[w, i]
        d.qfrc_passive[w, i] = passive

    return SimpleNamespace(spring_joint=make_spring_joint(True, True), spring_ball=make_spring_joint(True, False),
                           spring_other=make_spring_joint(False, True), dof=dof)
