"""Body velocities and the bias force C(q, qdot) + g(q) by recursive Newton-Euler
(mj_comVel and mj_rne with flg_acc = 0, engine_core_smooth.c).

Elements: `com_vel_body` (a tree pass from the root: body velocities; `com_vel_from_root`, the
same for a body alone, summed along its path), `cdof_dot_dof` (the
dof axes' rate of change), `rne_body` (the body's bias acceleration, summed along its dof chain
from the root, and its own bias force), `rne_subtree_body` (from the leaves: each body gathers
its children's forces; `rne_subtree_alone`, the same sums for a body alone), `rne_dof` (the force projected on dof i).

Their hand-written adjoints, which the differentiable step runs in place of the generated ones
(simrl.sim.grad's `reverse`): `com_vel_adjoint` (from the leaves: com_vel_body's, cdof_dot_dof's
and rne_body's sums along the tree), `rne_body_adjoint` (a body's own force),
`rne_subtree_adjoint` (from the root), `rne_dof_adjoint`; the spatial algebra's adjoints
`motion_cross_adjoint`, `force_cross_adjoint`, `inert_mul_adjoint`.
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
    f, vec3, vec6, vec10 = T.f, T.vec3, T.vec6, T.vec10

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
    def cdof_dot_start(m: Model, i: int):
        """The dof whose velocity before it (dof_cvel[start - 1], or the parent body's cvel at the
        body's first dof) cdof_dot of dof i crosses: i for a hinge or slide, a ball's first dof,
        a free joint's first rotational dof; -1 for a free joint's translation (none)."""
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
        return start

    @wp.func
    def cdof_dot_dof(m: Model, d: Data, w: int, i: int):
        """cdof_dot = cvel x cdof of dof i, with the velocity before the dof's joint part: a ball's
        three dofs share one, a free joint's rotation sees its translation, its translation has
        none (cdof_dot_start).

        Model: body_dofadr, body_parentid, dof_bodyid, dof_jntid, jnt_dofadr, jnt_type. Data in: cdof, cvel,
        dof_cvel. Data out: cdof_dot."""
        b = m.dof_bodyid[i]
        dofadr = m.body_dofadr[b]
        start = cdof_dot_start(m, i)
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

    # ---------------------------------------------------------------------------------------
    # Hand-written adjoints (the differentiable step runs the velocity segment's rne passes
    # backwards with these instead of Warp's generated adjoints, simrl.sim.grad's `reverse`):
    # they read the forward's stored outputs instead of replaying it, and gather every sum over
    # several elements in the element that owns it (no atomics)

    @wp.func
    def motion_cross_adjoint(v: vec6, u: vec6, g: vec6):
        """The adjoints (v_bar, u_bar) of motion_cross(v, u) for the product's adjoint g. With
        v = [w; v_l], u = [u_a; u_l], g = [g_a; g_l], the product is [w x u_a; w x u_l + v_l x u_a]
        (mju_crossMotion), and a . (p x q) = p . (q x a) = q . (a x p) gives
            w_bar = u_a x g_a + u_l x g_l,  v_l_bar = u_a x g_l,
            u_a_bar = g_a x w + g_l x v_l,  u_l_bar = g_l x w."""
        w_ = vec3(v[0], v[1], v[2])
        vl = vec3(v[3], v[4], v[5])
        ua = vec3(u[0], u[1], u[2])
        ul = vec3(u[3], u[4], u[5])
        ga = vec3(g[0], g[1], g[2])
        gl = vec3(g[3], g[4], g[5])
        wb = wp.cross(ua, ga) + wp.cross(ul, gl)
        vlb = wp.cross(ua, gl)
        uab = wp.cross(ga, w_) + wp.cross(gl, vl)
        ulb = wp.cross(gl, w_)
        return (vec6(wb[0], wb[1], wb[2], vlb[0], vlb[1], vlb[2]),
                vec6(uab[0], uab[1], uab[2], ulb[0], ulb[1], ulb[2]))

    @wp.func
    def force_cross_adjoint(v: vec6, fr: vec6, g: vec6):
        """The adjoints (v_bar, f_bar) of force_cross(v, f) for the product's adjoint g. With
        v = [w; v_l], f = [f_t; f_f], g = [g_t; g_f], the product is [w x f_t + v_l x f_f; w x f_f]
        (mju_crossForce), and as in motion_cross_adjoint
            w_bar = f_t x g_t + f_f x g_f,  v_l_bar = f_f x g_t,
            f_t_bar = g_t x w,  f_f_bar = g_t x v_l + g_f x w."""
        w_ = vec3(v[0], v[1], v[2])
        vl = vec3(v[3], v[4], v[5])
        ft = vec3(fr[0], fr[1], fr[2])
        ff = vec3(fr[3], fr[4], fr[5])
        gt = vec3(g[0], g[1], g[2])
        gf = vec3(g[3], g[4], g[5])
        wb = wp.cross(ft, gt) + wp.cross(ff, gf)
        vlb = wp.cross(ff, gt)
        ftb = wp.cross(gt, w_)
        ffb = wp.cross(gt, vl) + wp.cross(gf, w_)
        return (vec6(wb[0], wb[1], wb[2], vlb[0], vlb[1], vlb[2]),
                vec6(ftb[0], ftb[1], ftb[2], ffb[0], ffb[1], ffb[2]))

    @wp.func
    def inert_mul_adjoint(v: vec6, g: vec6):
        """The adjoint of inert_mul(i, v) with respect to the inertia i (mju_mulInertVec's
        10-vector: the diagonal, the off-diagonal (0,1), (0,2), (1,2), mass times the CoM offset,
        the mass) for the product's adjoint g: d (g . I v) / d i_k. (With respect to v it is
        inert_mul(i, g): the 6x6 matrix of a spatial inertia is symmetric.)"""
        return vec10(g[0] * v[0], g[1] * v[1], g[2] * v[2],
                     g[0] * v[1] + g[1] * v[0],
                     g[0] * v[2] + g[2] * v[0],
                     g[1] * v[2] + g[2] * v[1],
                     g[2] * v[4] - g[1] * v[5] + g[4] * v[2] - g[5] * v[1],
                     g[0] * v[5] - g[2] * v[3] + g[5] * v[0] - g[3] * v[2],
                     g[1] * v[3] - g[0] * v[4] + g[3] * v[1] - g[4] * v[0],
                     g[3] * v[3] + g[4] * v[4] + g[5] * v[5])

    @wp.func
    def com_vel_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """com_vel_body of body b backwards (a launch per tree level, the leaves first), with the
        parts of cdof_dot_dof and rne_body that sum along the tree: cdof_dot of b's dofs and
        the sums cacc = -g + sum cdof_dot qvel over the dofs of b's chain.

        The adjoint of cacc[b] (rne_body_adjoint added its own force's) reaches cdof_dot[i] and
        qvel[i] of every dof of b as the sum S over b's subtree; the adjoint of cvel[b] is its
        own (its readers') plus what each child passes up (its dofs' velocity chain starts at
        cvel[b], its first joint's cdof_dot crosses it). Walking b's dofs from the last, G is the
        adjoint of dof_cvel[j] (cvel[b] is the last one's copy):
            qvel_bar[j] += cdof[j] . G + cdof_dot[j] . S,  cdof_bar[j] += qvel[j] G + u_bar,
        with cdof_dot's adjoint adj.cdof_dot[j] + qvel[j] S through motion_cross_adjoint (u_bar;
        its v_bar joins G at the dof it crosses the velocity of, or the parent's). The sums pass
        to the parent in b's own slots of adj.cacc (S) and adj.cvel (the parent's velocity's
        adjoint), which no pass reads afterwards: the parent's thread, one launch later, adds
        its children's in ascending order.

        Model: body_child, body_child_adr, body_child_num, body_dofadr, body_dofnum, body_parentid, dof_jntid,
        jnt_dofadr, jnt_type. Data in: qvel, cdof, cdof_dot, cvel, dof_cvel. Adjoints in: cacc, cvel (with the
        children's sums), dof_cvel, cdof_dot. Adjoints out: qvel, cdof (of its dofs); cacc, cvel (its sums)."""
        if b > 0:
            zero = vec6(scalar(0.0))
            S = adj.cacc[w, b]
            G = adj.cvel[w, b]
            adr = m.body_child_adr[b]
            for k in range(adr, adr + m.body_child_num[b]):
                c = m.body_child[k]
                S = S + adj.cacc[w, c]
                G = G + adj.cvel[w, c]
            adj.cacc[w, b] = S
            dofadr = m.body_dofadr[b]
            dofnum = m.body_dofnum[b]
            parent_vel = d.cvel[w, m.body_parentid[b]]
            up = zero  # the adjoint of the parent's cvel from the cdof_dot of b's first joint
            pending = zero  # the adjoint of dof_cvel[pending_at] from the cdof_dot of later dofs
            pending_at = int(-1)
            for n in range(dofnum):
                j = dofadr + dofnum - 1 - n
                G = G + adj.dof_cvel[w, j]
                if j == pending_at:
                    G = G + pending
                    pending = zero
                cdof = d.cdof[w, j]
                qv = d.qvel[w, j]
                cdof_bar = G * qv
                start = cdof_dot_start(m, j)
                if start >= 0:
                    v = parent_vel
                    if start > dofadr:
                        v = d.dof_cvel[w, start - 1]
                    v_bar, u_bar = motion_cross_adjoint(v, cdof, adj.cdof_dot[w, j] + S * qv)
                    cdof_bar = cdof_bar + u_bar
                    if start > dofadr:
                        pending = pending + v_bar
                        pending_at = start - 1
                    else:
                        up = up + v_bar
                if adj.qvel.shape[0] > 0:  # an input without a gradient has no adjoint array
                    adj.qvel[w, j] = adj.qvel[w, j] + (wp.dot(cdof, G) + wp.dot(d.cdof_dot[w, j], S))
                adj.cdof[w, j] = adj.cdof[w, j] + cdof_bar
            adj.cvel[w, b] = G + up

    @wp.func
    def rne_body_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """rne_body's own force I cacc + cvel x* (I cvel) of body b backwards, for the adjoint g
        of cfrc_bias[b] (rne_subtree_adjoint's: the force's own), with h = I cvel:
            cacc_bar += I g,  cvel_bar += v_bar + I h_bar,  cinert_bar += dI(g, cacc) + dI(h_bar, cvel),
        (v_bar, h_bar) force_cross_adjoint's, dI inert_mul_adjoint. cacc's sum along the chain is
        com_vel_adjoint's (a pass from the leaves). A body whose force has no gradient does nothing.

        Data in: cacc, cinert, cvel. Adjoints in: cfrc_bias. Adjoints out: cacc, cvel, cinert."""
        if b > 0:
            g = adj.cfrc_bias[w, b]
            if (g[0] != scalar(0.0) or g[1] != scalar(0.0) or g[2] != scalar(0.0) or g[3] != scalar(0.0)
                    or g[4] != scalar(0.0) or g[5] != scalar(0.0)):
                cinert = d.cinert[w, b]
                cvel = d.cvel[w, b]
                h = f.inert_mul(cinert, cvel)
                v_bar, h_bar = force_cross_adjoint(cvel, h, g)
                adj.cacc[w, b] = adj.cacc[w, b] + f.inert_mul(cinert, g)
                adj.cvel[w, b] = adj.cvel[w, b] + (v_bar + f.inert_mul(cinert, h_bar))
                adj.cinert[w, b] = adj.cinert[w, b] + (inert_mul_adjoint(d.cacc[w, b], g)
                                                       + inert_mul_adjoint(cvel, h_bar))

    @wp.func
    def rne_subtree_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """rne_subtree_body backwards (a launch per tree level, the root's first): cfrc_bias[b]
        is part of its parent's sum (unless the parent is the world), whose adjoint, complete by
        then, body b adds to its own.

        Model: body_parentid. Adjoints in and out: cfrc_bias."""
        p = m.body_parentid[b]
        if p > 0:
            adj.cfrc_bias[w, b] = adj.cfrc_bias[w, b] + adj.cfrc_bias[w, p]

    @wp.func
    def rne_dof_adjoint(m: Model, d: Data, adj: Data, w: int, i: int):
        """rne_dof of dof i backwards, with qfrc_bias's term of qfrc_smooth (actuation's
        smooth_force_dof subtracts it): for bias_bar = adj qfrc_bias[i] - adj qfrc_smooth[i],
        cdof_bar[i] += bias_bar cfrc_bias, the tendons' armature bias into ten_J[t, i]'s adjoint
        and (atomically: a tendon has several dofs) ten_bias[t]'s. The body's first dof gathers
        cfrc_bias's adjoint over the body's dofs in order, sum cdof bias_bar.

        Model: body_dofadr, body_dofnum, dof_bodyid, dof_tendon, dof_tendon_adr, tendon_armature_bias. Data in:
        cdof, cfrc_bias, ten_J, ten_bias. Adjoints in: qfrc_bias, qfrc_smooth. Adjoints out: cdof, ten_J (column
        i), ten_bias, cfrc_bias."""
        b = m.dof_bodyid[i]
        bias_bar = adj.qfrc_bias[w, i] - adj.qfrc_smooth[w, i]
        adj.cdof[w, i] = adj.cdof[w, i] + bias_bar * d.cfrc_bias[w, b]
        if m.tendon_armature_bias != 0:
            span = m.dof_tendon_adr[i]
            for k in range(span[0], span[0] + span[1]):
                t = m.dof_tendon[k]
                adj.ten_J[w, t, i] = adj.ten_J[w, t, i] + d.ten_bias[w, t] * bias_bar
                wp.atomic_add(adj.ten_bias, w, t, d.ten_J[w, t, i] * bias_bar)
        dofadr = m.body_dofadr[b]
        if i == dofadr:
            total = vec6(scalar(0.0))
            for k in range(dofadr, dofadr + m.body_dofnum[b]):
                total = total + d.cdof[w, k] * (adj.qfrc_bias[w, k] - adj.qfrc_smooth[w, k])
            adj.cfrc_bias[w, b] = adj.cfrc_bias[w, b] + total

    return SimpleNamespace(com_vel_body=com_vel_body, com_vel_from_root=com_vel_from_root,
                           cdof_dot_dof=cdof_dot_dof, rne_body=rne_body,
                           rne_subtree_body=rne_subtree_body, rne_dof=rne_dof,
                           com_vel_adjoint=com_vel_adjoint, rne_body_adjoint=rne_body_adjoint,
                           rne_subtree_adjoint=rne_subtree_adjoint, rne_dof_adjoint=rne_dof_adjoint,
                           # rne_subtree_body's sums for a body alone (simrl.sim.subtree: the same
                           # bits), each body's own force computed again as rne_body computes it. Model:
                           # body_subtree. Data in: cacc, cinert, cvel. Data out: cfrc_bias
                           rne_subtree_alone=subtree_sum(scalar, vec6, own_force, bias_write))
