"""Body velocities and the bias force C(q, qdot) + g(q) by recursive Newton-Euler
(mj_comVel and mj_rne with flg_acc = 0, engine_core_smooth.c).

Elements: `com_vel_body` (a tree pass from the root: body velocities; `com_vel_from_root`, the
same for a body alone, summed along its path), `cdof_dot_dof` (the
dof axes' rate of change), `rne_body` (the body's bias acceleration, summed along its dof chain
from the root, and its own bias force), `rne_subtree_body` (from the leaves: each body gathers
its children's forces; `rne_subtree_alone`, the same sums for a body alone), `rne_dof` (the force projected on dof i).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.subtree import subtree_sum
from simrl.sim.types import JointType, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec6 = T.f, T.vec6

    @wp.func
    def com_vel_body(m: Model, d: Data, w: int, b: int):
        """cvel of body b (spatial velocity in the CoM frame) and dof_cvel, the body's velocity with
        its dofs up to i added (kept in memory so that no local is carried across iterations:
        Warp's adjoints replay loop bodies).

        Model: body_dofadr, body_dofnum, body_parentid. Data in: qvel, cdof; the parent's cvel. Data out: cvel,
        dof_cvel (of its dofs)."""
        if b == 0:
            d.cvel[w, 0] = vec6(scalar(0.0))
        else:
            parent_vel = d.cvel[w, m.body_parentid[b]]
            dofadr = m.body_dofadr[b]
            dofnum = m.body_dofnum[b]
            for i in range(dofadr, dofadr + dofnum):
                before = parent_vel
                if i > dofadr:
                    before = d.dof_cvel[w, i - 1]
                d.dof_cvel[w, i] = before + d.cdof[w, i] * d.qvel[w, i]
            cvel = parent_vel
            if dofnum > 0:
                cvel = d.dof_cvel[w, dofadr + dofnum - 1]
            d.cvel[w, b] = cvel

    @wp.func
    def com_vel_from_root(m: Model, d: Data, w: int, b: int):
        """com_vel_body's cvel and dof_cvel of body b, the velocity summed in registers over the
        dofs of its path from the world in order (the same sums in the same order: the same bits):
        the wide schedule's engine step runs all bodies in one launch, not a launch per tree
        level. The differentiable step keeps the levels (kinematics.body_from_root says why).

        Model: body_dofadr, body_dofnum, body_path, body_path_adr. Data in: qvel, cdof. Data out: cvel, dof_cvel (of
        its dofs)."""
        cvel = vec6(scalar(0.0))
        span = m.body_path_adr[b]
        for k in range(span[0] + 1, span[0] + span[1]):  # the world moves no dof
            a = m.body_path[k]
            dofadr = m.body_dofadr[a]
            for i in range(dofadr, dofadr + m.body_dofnum[a]):
                cvel = cvel + d.cdof[w, i] * d.qvel[w, i]
                if a == b:
                    d.dof_cvel[w, i] = cvel
        d.cvel[w, b] = cvel

    @wp.func
    def cdof_dot_dof(m: Model, d: Data, w: int, i: int):
        """cdof_dot = cvel x cdof of dof i, with the velocity before the dof's joint part: a ball's
        three dofs share one, a free joint's rotation sees its translation, its translation has
        none.

        Model: body_dofadr, body_parentid, dof_bodyid, dof_jntid, jnt_dofadr, jnt_type. Data in: cdof, cvel,
        dof_cvel. Data out: cdof_dot."""
        b = m.dof_bodyid[i]
        dofadr = m.body_dofadr[b]
        jnt = m.dof_jntid[i]
        jtype = m.jnt_type[jnt]
        rel = i - m.jnt_dofadr[jnt]
        start = i
        if jtype == JointType.BALL:
            start = i - rel
        elif jtype == JointType.FREE:
            start = -1
            if rel >= 3:
                start = i - rel + 3
        cdof_dot = vec6(scalar(0.0))
        if start >= 0:
            v = d.cvel[w, m.body_parentid[b]]
            if start > dofadr:
                v = d.dof_cvel[w, start - 1]
            cdof_dot = f.motion_cross(v, d.cdof[w, i])
        d.cdof_dot[w, i] = cdof_dot

    @wp.func
    def own_force(m: Model, d: Data, w: int, b: int):
        """Body b's own bias force I a + v x* I v (b > 0), from its cacc, cinert and cvel."""
        cinert = d.cinert[w, b]
        cvel = d.cvel[w, b]
        return f.inert_mul(cinert, d.cacc[w, b]) + f.force_cross(cvel, f.inert_mul(cinert, cvel))

    @wp.func
    def bias_write(m: Model, d: Data, w: int, b: int, total: vec6):
        d.cfrc_bias[w, b] = total

    @wp.func
    def rne_body(m: Model, d: Data, w: int, b: int):
        """Bias acceleration of body b (the world accelerates at -g, then the dofs from the root to
        the body add cdof_dot qvel, in that order) and its own bias force I a + v x* I v, before
        its children's are added.

        Model: body_dofend, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, gravity. Data in: qvel, cdof_dot,
        cinert, cvel. Data out: cacc, cfrc_bias."""
        g = m.gravity[w % m.gravity.shape[0]]
        d.cacc[w, b] = vec6(scalar(0.0), scalar(0.0), scalar(0.0), -g[0], -g[1], -g[2])
        if b == 0:
            d.cfrc_bias[w, 0] = vec6(scalar(0.0))
        else:
            dof = m.body_dofend[b]
            if dof >= 0:
                adr = m.dof_ancestor_adr[dof]
                num = m.dof_ancestor_num[dof]
                for k in range(num):
                    i = m.dof_ancestor[adr + num - 1 - k]  # the farthest ancestor first
                    d.cacc[w, b] += d.cdof_dot[w, i] * d.qvel[w, i]
                d.cacc[w, b] += d.cdof_dot[w, dof] * d.qvel[w, dof]
            d.cfrc_bias[w, b] = own_force(m, d, w, b)

    @wp.func
    def rne_subtree_body(m: Model, d: Data, w: int, b: int):
        """cfrc_bias of body b (b > 0) plus its children's, ascending (the world gets none).

        Model: body_child, body_child_adr, body_child_num. Data in: the children's cfrc_bias. Data out: cfrc_bias."""
        adr = m.body_child_adr[b]
        for k in range(adr, adr + m.body_child_num[b]):
            d.cfrc_bias[w, b] += d.cfrc_bias[w, m.body_child[k]]

    @wp.func
    def rne_dof(m: Model, d: Data, w: int, i: int):
        """qfrc_bias[i]: the subtree force of dof i's body along its motion axis, plus the spatial
        tendons' armature bias ten_J[t, i] ten_bias[t] (mj_tendonBias, after mj_rne).

        Model: dof_bodyid, dof_tendon, dof_tendon_adr, tendon_armature_bias. Data in: cdof, cfrc_bias, ten_J,
        ten_bias. Data out: qfrc_bias."""
        d.qfrc_bias[w, i] = wp.dot(d.cdof[w, i], d.cfrc_bias[w, m.dof_bodyid[i]])
        if m.tendon_armature_bias != 0:
            span = m.dof_tendon_adr[i]
            for k in range(span[0], span[0] + span[1]):
                t = m.dof_tendon[k]
                d.qfrc_bias[w, i] += d.ten_bias[w, t] * d.ten_J[w, t, i]

    return SimpleNamespace(com_vel_body=com_vel_body, com_vel_from_root=com_vel_from_root,
                           cdof_dot_dof=cdof_dot_dof, rne_body=rne_body,
                           rne_subtree_body=rne_subtree_body, rne_dof=rne_dof,
                           # rne_subtree_body's sums for a body alone (simrl.sim.subtree: the same
                           # bits), each body's own force computed again as rne_body computes it. Model:
                           # body_subtree. Data in: cacc, cinert, cvel. Data out: cfrc_bias
                           rne_subtree_alone=subtree_sum(scalar, vec6, own_force, bias_write))
