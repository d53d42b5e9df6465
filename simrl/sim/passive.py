"""Passive forces: joint springs, dof dampers, the tendons' springs and dampers (simrl.sim.tendon)
and gravity compensation (mj_passive, mj_springdamper, mj_gravcomp, engine_passive.c). Fluid
forces and polynomial springs are refused when the model is loaded.

Elements: `spring_joint(m, d, w, j)` (the spring force on joint j's dofs), `dof(m, d, w, i)`
(the damper of dof i, its gravity compensation and the sum); `dof_adjoint`, the hand-written
adjoint of `dof` without its gravity compensation (`gravcomp_dof`, a pass of its own in the
differentiable step).
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

    def make_dof(gravcomp: bool):
        """`dof`, with its call of gravcomp_dof (`gravcomp`) or without: the differentiable step
        runs gravcomp_dof as a pass of its own, whose generated adjoint carries body_mass's
        gradient, before the hand-written reverse of the rest (`dof_adjoint`)."""
        @wp.func
        def dof(m: Model, d: Data, w: int, i: int):
            """qfrc_damper[i] and qfrc_passive[i] = spring + damper + gravcomp (unless the joint's
            actuatorgravcomp sends gravcomp to qfrc_actuator, simrl.sim.actuation).

            Model: body_gravcomp, body_mass, body_rootid, dof_damping, dof_gravcomp_adr, dof_gravcomp_body,
            dof_gravcomp_num, dof_jntid, dof_tendon, dof_tendon_adr, enable_damper, enable_gravcomp, gravity,
            jnt_actgravcomp. Data in: qvel, qfrc_spring, cdof, xipos, subtree_com, ten_J, ten_spring, ten_damper.
            Data out: qfrc_spring (the tendons' added), qfrc_damper, qfrc_gravcomp, qfrc_passive."""
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
            if wp.static(gravcomp):
                gravcomp_dof(m, d, w, i)
            passive = d.qfrc_spring[w, i] + d.qfrc_damper[w, i]
            if m.enable_gravcomp != 0 and m.jnt_actgravcomp[m.dof_jntid[i]] == 0:
                passive = passive + d.qfrc_gravcomp[w, i]
            d.qfrc_passive[w, i] = passive
        return dof

    @wp.func
    def dof_adjoint(m: Model, d: Data, adj: Data, w: int, i: int):
        """`dof` (without gravcomp_dof) of dof i backwards, with qfrc_passive's term of
        qfrc_smooth (simrl.sim.actuation.smooth_force_dof): the adjoint p of qfrc_passive[i] is
        adj qfrc_passive[i] + adj qfrc_smooth[i]; the spring's and the damper's are p plus their
        own, s and b; then qvel_bar[i] -= dof_damping b, ten_J_bar[t, i] += ten_spring s +
        ten_damper b, and (atomically: a tendon has several dofs) ten_spring_bar[t] += ten_J s,
        ten_damper_bar[t] += ten_J b; qfrc_spring's adjoint becomes s (the spring pass's), p goes
        to qfrc_gravcomp's where passive sums it.

        Model: dof_damping, dof_jntid, dof_tendon, dof_tendon_adr, enable_damper, enable_gravcomp,
        jnt_actgravcomp. Data in: ten_J, ten_spring, ten_damper. Adjoints in: qfrc_smooth, qfrc_passive,
        qfrc_damper, qfrc_spring. Adjoints out: qfrc_spring, qvel, ten_J (column i), ten_spring, ten_damper,
        qfrc_gravcomp."""
        p = adj.qfrc_passive[w, i] + adj.qfrc_smooth[w, i]
        s = adj.qfrc_spring[w, i] + p
        b = adj.qfrc_damper[w, i] + p
        span = m.dof_tendon_adr[i]
        for k in range(span[0], span[0] + span[1]):
            t = m.dof_tendon[k]
            jt = d.ten_J[w, t, i]
            adj.ten_J[w, t, i] = adj.ten_J[w, t, i] + (d.ten_spring[w, t] * s + d.ten_damper[w, t] * b)
            wp.atomic_add(adj.ten_spring, w, t, jt * s)
            wp.atomic_add(adj.ten_damper, w, t, jt * b)
        adj.qfrc_spring[w, i] = s
        if m.enable_damper and adj.qvel.shape[0] > 0:  # (an input without a gradient has no adjoint array)
            adj.qvel[w, i] = adj.qvel[w, i] - m.dof_damping[w % m.dof_damping.shape[0], i] * b
        if m.enable_gravcomp != 0 and m.jnt_actgravcomp[m.dof_jntid[i]] == 0:
            adj.qfrc_gravcomp[w, i] = adj.qfrc_gravcomp[w, i] + p

    return SimpleNamespace(spring_joint=make_spring_joint(True, True), spring_ball=make_spring_joint(True, False),
                           spring_other=make_spring_joint(False, True), dof=make_dof(True),
                           dof_without_gravcomp=make_dof(False), gravcomp_dof=gravcomp_dof, dof_adjoint=dof_adjoint)
