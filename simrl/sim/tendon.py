"""Tendons: length, Jacobian and velocity (mj_tendon, engine_core_smooth.c; ten_velocity of
mj_fwdVelocity, engine_forward.c) and the spring and damper along each tendon (mj_springdamper,
engine_passive.c).

A fixed tendon is a linear combination of joint positions, L = sum_k coef_k q_k, so its Jacobian
has the coefficients in the joints' dofs. A spatial tendon is a path through sites: its length is
the sum of the straight segments between consecutive sites, each divided by the divisor of the
pulley before it, and its Jacobian the sum over segments whose two sites move with different
bodies of dir' (J_site1 - J_site0) / divisor, dir the segment's unit direction (mj_jacDifPair's
point Jacobians of the two sites). Wrapping around spheres and cylinders is refused when the
model is loaded.

A tendon's armature adds armature ten_J' ten_J to M on M's sparsity (simrl.sim.crb, as
mj_tendonArmature: the coupling of dofs on different branches is dropped) and, for a spatial
tendon, the bias force armature (ten_Jdot qvel) ten_J' (mj_tendonBias; a fixed tendon's Jacobian
is constant).

Elements: `length(m, d, w, t)` (ten_length and ten_J of tendon t, after com_pos: it needs
site_xpos, cdof and subtree_com), `velocity(m, d, w, t)` (ten_velocity = ten_J qvel and the
tendon's spring and damper forces, ten_spring and ten_damper) and `bias(m, d, w, t)` (the
armature's bias along the tendon, ten_bias, after cdof_dot). The dofs gather what the tendons
give them: simrl.sim.passive (their springs and dampers), simrl.sim.crb (their armature),
simrl.sim.rne (their armature's bias), simrl.sim.actuation (their actuators).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import constraint
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    vec3 = T.vec3

    @wp.func
    def add_point_jacobian(m: Model, d: Data, w: int, t: int, body: int, point: vec3, direction: vec3,
                           scale: scalar):
        """ten_J[t] += scale direction' J(point on body): the point's translation Jacobian over the
        dofs of the chain that moves the body, cdof_lin + cdof_ang x (point - subtree_com of the
        root) (mj_jac)."""
        dof = m.body_dofend[body]
        if dof >= 0:
            offset = point - d.subtree_com[w, m.body_rootid[body]]
            adr = m.dof_ancestor_adr[dof]
            for k in range(m.dof_ancestor_num[dof] + 1):
                i = dof
                if k > 0:
                    i = m.dof_ancestor[adr + k - 1]
                cdof = d.cdof[w, i]
                jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(vec3(cdof[0], cdof[1], cdof[2]), offset)
                d.ten_J[w, t, i] += scale * wp.dot(jp, direction)

    @wp.func
    def length(m: Model, d: Data, w: int, t: int):
        """ten_length[t] and ten_J[t] (mj_tendon).

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, jnt_dofadr, jnt_qposadr,
        site_bodyid, tendon, tendon_colind, tendon_seg, wrap. Data in: qpos, site_xpos, cdof, subtree_com. Data out:
        ten_length, ten_J."""
        ten = m.tendon[t]
        for k in range(ten.nnz):
            d.ten_J[w, t, m.tendon_colind[t, k]] = scalar(0.0)
        d.ten_length[w, t] = scalar(0.0)
        if ten.fixed != 0:
            for k in range(ten.wrapadr, ten.wrapadr + ten.wrapnum):
                j = m.wrap[k].jnt
                coef = m.wrap[k].coef
                d.ten_length[w, t] += coef * d.qpos[w, m.jnt_qposadr[j]]
                d.ten_J[w, t, m.jnt_dofadr[j]] += coef
        else:
            for k in range(ten.segadr, ten.segadr + ten.segnum):
                seg = m.tendon_seg[k]
                s0 = seg.site0
                s1 = seg.site1
                p0 = d.site_xpos[w, s0]
                p1 = d.site_xpos[w, s1]
                inv = scalar(1.0) / seg.divisor
                dif = p1 - p0
                norm = wp.length(dif)
                d.ten_length[w, t] += norm * inv
                b0 = m.site_bodyid[s0]
                b1 = m.site_bodyid[s1]
                if b0 != b1:
                    # mju_normalize3: a segment shorter than mjMINVAL points along x
                    direction = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
                    if norm >= scalar(MINVAL):
                        direction = dif / norm
                    add_point_jacobian(m, d, w, t, b1, p1, direction, inv)
                    add_point_jacobian(m, d, w, t, b0, p0, direction, -inv)

    @wp.func
    def velocity(m: Model, d: Data, w: int, t: int):
        """ten_velocity[t] = ten_J[t] qvel; the spring force -k x, x the length's distance from the
        dead band [lengthspring], and the damper force -b v along the tendon (mj_springdamper).

        Model: enable_damper, enable_spring, tendon, tendon_colind. Data in: qvel, ten_J, ten_length. Data out:
        ten_velocity, ten_spring, ten_damper."""
        ten = m.tendon[t]
        d.ten_velocity[w, t] = scalar(0.0)
        for k in range(ten.nnz):
            i = m.tendon_colind[t, k]
            d.ten_velocity[w, t] += d.ten_J[w, t, i] * d.qvel[w, i]
        spring = scalar(0.0)
        if m.enable_spring != 0:
            ln = d.ten_length[w, t]
            band = ten.lengthspring
            x = scalar(0.0)
            if ln > band[1]:
                x = ln - band[1]
            elif ln < band[0]:
                x = ln - band[0]
            spring = -ten.stiffness * x
        damper = scalar(0.0)
        if m.enable_damper != 0:
            damper = -ten.damping * d.ten_velocity[w, t]
        d.ten_spring[w, t] = spring
        d.ten_damper[w, t] = damper

    jac_dot_v = constraint.build(scalar).jac_dot_v

    @wp.func
    def point_velocity(m: Model, d: Data, w: int, body: int, point: vec3):
        """The velocity of `point` moving with `body` (mj_objectVelocity's linear part): cvel
        moved from the root's subtree CoM to the point."""
        cv = d.cvel[w, body]
        offset = point - d.subtree_com[w, m.body_rootid[body]]
        return vec3(cv[3], cv[4], cv[5]) + wp.cross(vec3(cv[0], cv[1], cv[2]), offset)

    @wp.func
    def segment_jdot(m: Model, d: Data, w: int, seg_id: int):
        """ten_Jdot qvel of one straight segment (mj_tendonDot): with u the unit direction and L
        the length, d/dt (u' (J_1 - J_0)) qvel = u' (Jdot_1 - Jdot_0) qvel + (v_1 - v_0)' (v_1 - v_0
        - u u' (v_1 - v_0)) / L, divided by the pulley's divisor; 0 when both sites move with one
        body."""
        seg = m.tendon_seg[seg_id]
        b0 = m.site_bodyid[seg.site0]
        b1 = m.site_bodyid[seg.site1]
        out = scalar(0.0)
        if b0 != b1:
            p0 = d.site_xpos[w, seg.site0]
            p1 = d.site_xpos[w, seg.site1]
            dif = p1 - p0
            norm = wp.length(dif)
            # mju_normalize3: a segment shorter than mjMINVAL points along x and bends nothing
            direction = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
            inv_norm = scalar(0.0)
            if norm >= scalar(MINVAL):
                direction = dif / norm
                inv_norm = scalar(1.0) / norm
            rel = point_velocity(m, d, w, b1, p1) - point_velocity(m, d, w, b0, p0)
            bend = (rel - direction * wp.dot(direction, rel)) * inv_norm
            jdv1, jr1 = jac_dot_v(m, d, w, b1, p1)
            jdv0, jr0 = jac_dot_v(m, d, w, b0, p0)
            out = (wp.dot(jdv1 - jdv0, direction) + wp.dot(rel, bend)) / seg.divisor
        return out

    @wp.func
    def tendon_jdot(m: Model, d: Data, w: int, t: int):
        """ten_Jdot[t] qvel of a spatial tendon: the sum over its segments."""
        ten = m.tendon[t]
        out = scalar(0.0)
        for k in range(ten.segadr, ten.segadr + ten.segnum):
            out = out + segment_jdot(m, d, w, k)
        return out

    @wp.func
    def bias(m: Model, d: Data, w: int, t: int):
        """ten_bias[t] = armature ten_Jdot qvel, the force along tendon t that the dofs' bias
        forces gain through ten_J (mj_tendonBias); 0 for a fixed tendon or without armature.

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, dof_bodyid, dof_jntid,
        jnt_dofadr, jnt_type, site_bodyid, tendon, tendon_seg. Data in: qvel, site_xpos, subtree_com, cvel, cdof,
        cdof_dot. Data out: ten_bias."""
        ten = m.tendon[t]
        value = scalar(0.0)
        if ten.fixed == 0 and ten.armature != scalar(0.0):
            value = ten.armature * tendon_jdot(m, d, w, t)
        d.ten_bias[w, t] = value

    return SimpleNamespace(length=length, velocity=velocity, bias=bias)
