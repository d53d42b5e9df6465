"""Subtree centres of mass, body inertias and motion dofs in the CoM-centred world frame
(mj_comPos, engine_core_smooth.c).

Each kinematic tree uses the centre of mass of its whole subtree (`subtree_com` of its
root) as the reference point, so every spatial quantity of a tree is in one frame.

Elements: `subtree_body(m, d, w, b)` sums body b's subtree mass from its children's (a tree
pass from the leaves; `subtree_body_alone`, the same sums for body b alone: simrl.sim.subtree);
`body` then gives body b its
subtree CoM, its inertia about its tree's CoM and the motion axes of its joints' dofs (the
differentiable step: `body_cinert`, then `cdof_dof` per dof). `subtree_body_adjoint`,
`body_cinert_adjoint` (with cdof_dof's of the body's dofs) are their hand-written adjoints, which
the differentiable step runs in place of the generated ones (simrl.sim.grad's `reverse`).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import adjoints
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.subtree import subtree_sum
from simrl.sim.types import MINVAL, JointType, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, vec10 = T.f, T.vec3, T.vec10
    vec4 = wp.types.vector(4, dtype=scalar)
    mat33 = T.mat33
    A = adjoints.build(scalar)

    @wp.func
    def subtree_body(m: Model, d: Data, w: int, b: int):
        """Subtree mass and mass-weighted position of body b, gathered from its children in
        ascending order (each element is written once, then only added to: the adjoints stay
        exact).

        Model: body_child, body_child_adr, body_child_num, body_mass. Data in: xipos; the children's subtree_mass,
        subtree_mcom. Data out: subtree_mass, subtree_mcom."""
        mass = m.body_mass[w % m.body_mass.shape[0], b]
        d.subtree_mass[w, b] = mass
        d.subtree_mcom[w, b] = d.xipos[w, b] * mass
        adr = m.body_child_adr[b]
        for k in range(adr, adr + m.body_child_num[b]):
            c = m.body_child[k]
            d.subtree_mass[w, b] += d.subtree_mass[w, c]
            d.subtree_mcom[w, b] += d.subtree_mcom[w, c]

    @wp.func
    def mass_own(m: Model, d: Data, w: int, b: int):
        """Body b's mass and mass-weighted position, as subtree_body starts its sums."""
        mass = m.body_mass[w % m.body_mass.shape[0], b]
        mcom = d.xipos[w, b] * mass
        return vec4(mass, mcom[0], mcom[1], mcom[2])

    @wp.func
    def mass_write(m: Model, d: Data, w: int, b: int, total: vec4):
        d.subtree_mass[w, b] = total[0]
        d.subtree_mcom[w, b] = vec3(total[1], total[2], total[3])

    @wp.func
    def subtree_com(m: Model, d: Data, w: int, b: int):
        """The centre of mass of body b's subtree (its inertial frame's origin when massless)."""
        total = d.subtree_mass[w, b]
        com = d.xipos[w, b]
        if total >= scalar(MINVAL):
            com = d.subtree_mcom[w, b] / total
        return com

    def make_body(cdof: bool):
        """`body`, with its dofs' cdof (the engine's step) or without (the differentiable step
        computes them in `cdof_dof`, a launch of its own: in one kernel the generated adjoint of
        both needs more registers than a GPU thread should use)."""
        @wp.func
        def body(m: Model, d: Data, w: int, b: int):
            """subtree_com of body b, its cinert about its tree's CoM, and cdof of the dofs of its
            joints: [rotation axis, linear velocity of the reference point].

            Model: body_inertia, body_jntadr, body_jntnum, body_mass, body_rootid, jnt_dofadr, jnt_type. Data in:
            xipos, ximat, xmat, xanchor, xaxis; subtree_mass, subtree_mcom of the body and of its tree's root. Data
            out: subtree_com, cinert, cdof (`cdof`: of its joints' dofs)."""
            d.subtree_com[w, b] = subtree_com(m, d, w, b)
            if b == 0:
                d.cinert[w, 0] = vec10(scalar(0.0))
            else:
                # the root's CoM, computed as the root's own element computes it
                root_com = subtree_com(m, d, w, m.body_rootid[b])
                wm = w % m.body_mass.shape[0]
                d.cinert[w, b] = f.inert_com(m.body_inertia[w % m.body_inertia.shape[0], b], d.ximat[w, b],
                                             d.xipos[w, b] - root_com, m.body_mass[wm, b])
                if wp.static(cdof):
                    xmat = d.xmat[w, b]
                    for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
                        da = m.jnt_dofadr[j]
                        jtype = m.jnt_type[j]
                        offset = root_com - d.xanchor[w, j]
                        if jtype == JointType.FREE or jtype == JointType.BALL:
                            rot = da
                            if jtype == JointType.FREE:
                                # translation along the world axes
                                for k in range(3):
                                    e = vec3(scalar(0.0))
                                    e[k] = scalar(1.0)
                                    d.cdof[w, da + k] = f.dof_com_slide(e)
                                rot = da + 3
                            # rotation about the body-frame axes
                            for k in range(3):
                                axis = vec3(xmat[0, k], xmat[1, k], xmat[2, k])
                                d.cdof[w, rot + k] = f.dof_com(axis, offset)
                        elif jtype == JointType.SLIDE:
                            d.cdof[w, da] = f.dof_com_slide(d.xaxis[w, j])
                        else:
                            d.cdof[w, da] = f.dof_com(d.xaxis[w, j], offset)
        return body

    @wp.func
    def cdof_dof(m: Model, d: Data, w: int, i: int):
        """cdof of dof i, as `body` computes it for the dofs of the body's joints.

        Model: body_rootid, dof_bodyid, dof_jntid, jnt_dofadr, jnt_type. Data in: xipos, xmat, xanchor, xaxis;
        subtree_mass, subtree_mcom of the tree's root. Data out: cdof."""
        j = m.dof_jntid[i]
        b = m.dof_bodyid[i]
        k = i - m.jnt_dofadr[j]
        jtype = m.jnt_type[j]
        offset = subtree_com(m, d, w, m.body_rootid[b]) - d.xanchor[w, j]
        if jtype == JointType.FREE and k < 3:
            # translation along the world axes
            e = vec3(scalar(0.0))
            e[k] = scalar(1.0)
            d.cdof[w, i] = f.dof_com_slide(e)
        elif jtype == JointType.FREE or jtype == JointType.BALL:
            # rotation about the body-frame axes
            if jtype == JointType.FREE:
                k = k - 3
            xmat = d.xmat[w, b]
            d.cdof[w, i] = f.dof_com(vec3(xmat[0, k], xmat[1, k], xmat[2, k]), offset)
        elif jtype == JointType.SLIDE:
            d.cdof[w, i] = f.dof_com_slide(d.xaxis[w, j])
        else:
            d.cdof[w, i] = f.dof_com(d.xaxis[w, j], offset)

    # ---------------------------------------------------------------------------------------
    # Hand-written adjoints of `subtree_body`, `body_cinert` and `cdof_dof` (the com_pos_subtree,
    # com_pos_body and com_pos_dof passes backwards: simrl.sim.grad's `reverse`), without atomics.
    # Every body's cinert and every rotational dof's cdof read the CoM of their tree's root: a
    # body's thread leaves the adjoint of that CoM from its own cinert and dofs in place of its
    # subtree_com's adjoint (adj subtree_com of the body: after its thread, nothing reads it),
    # and the root's thread of the subtree pass, which runs backwards after them, the root level
    # first, gathers its tree's in body order.

    @wp.func
    def model_mass_adjoint(m: Model, adj_m: Model, w: int, b: int, mass_bar: scalar):
        """Adds mass_bar into the adjoint of body b's body_mass where it has one (a parameter
        differentiated: simrl.diff)."""
        if adj_m.body_mass.shape[0] > 0:
            adj_m.body_mass[w % m.body_mass.shape[0], b] += mass_bar

    @wp.func
    def subtree_com_adjoint(m: Model, d: Data, adj: Data, w: int, b: int, com_bar: vec3):
        """`subtree_com`'s adjoint for body b: into subtree_mcom's and subtree_mass's (com =
        mcom / mass), or xipos's where the subtree is massless."""
        total = d.subtree_mass[w, b]
        if total >= scalar(MINVAL):
            adj.subtree_mcom[w, b] += com_bar / total
            adj.subtree_mass[w, b] -= wp.dot(com_bar, d.subtree_com[w, b]) / total
        else:
            adj.xipos[w, b] += com_bar

    @wp.func
    def dof_axis(m: Model, d: Data, w: int, b: int, j: int, k: int):
        """The rotation axis of the k-th rotational dof of joint j (of body b): the joint's axis,
        or a column of the body's xmat (ball joints, a free joint's last three dofs)."""
        axis = d.xaxis[w, j]
        if m.jnt_type[j] == JointType.FREE or m.jnt_type[j] == JointType.BALL:
            xmat = d.xmat[w, b]
            axis = vec3(xmat[0, k], xmat[1, k], xmat[2, k])
        return axis

    @wp.func
    def dofs_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """`cdof_dof`'s adjoint for the dofs of body b: cdof = [axis, axis x offset] (offset =
        root CoM - xanchor; a slide's [0, xaxis]) into the adjoints of xaxis, xmat's columns
        (ball joints, a free joint's last three dofs) and xanchor; it returns the root CoM's
        (lin_bar x axis summed in dof order)."""
        com = d.subtree_com[w, m.body_rootid[b]]
        com_bar = vec3(scalar(0.0))
        xmat_bar = mat33(scalar(0.0))
        for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
            jtype = m.jnt_type[j]
            da = m.jnt_dofadr[j]
            if jtype == JointType.SLIDE:
                g = adj.cdof[w, da]
                adj.xaxis[w, j] += vec3(g[3], g[4], g[5])
            else:
                n = 1
                if jtype == JointType.FREE:
                    da = da + 3
                if jtype == JointType.FREE or jtype == JointType.BALL:
                    n = 3
                offset = com - d.xanchor[w, j]
                offset_bar = vec3(scalar(0.0))
                for k in range(n):
                    g = adj.cdof[w, da + k]
                    lin = vec3(g[3], g[4], g[5])
                    axis_bar = vec3(g[0], g[1], g[2]) + wp.cross(offset, lin)
                    offset_bar = offset_bar + wp.cross(lin, dof_axis(m, d, w, b, j, k))
                    if jtype == JointType.HINGE:
                        adj.xaxis[w, j] += axis_bar
                    else:
                        xmat_bar[0, k] = xmat_bar[0, k] + axis_bar[0]
                        xmat_bar[1, k] = xmat_bar[1, k] + axis_bar[1]
                        xmat_bar[2, k] = xmat_bar[2, k] + axis_bar[2]
                adj.xanchor[w, j] -= offset_bar
                com_bar = com_bar + offset_bar
        if A.nonzero33(xmat_bar):
            adj.xmat[w, b] += xmat_bar
        return com_bar

    @wp.func
    def subtree_body_adjoint(m: Model, d: Data, adj: Data, adj_m: Model, w: int, b: int):
        """`subtree_body`'s adjoint for body b, whose parent's thread (the level before) added
        its share: at a tree's root first the adjoint of the root's CoM that the tree's bodies
        left (see above), then the sums' adjoints into the children's, xipos's and body_mass's."""
        if b > 0 and m.body_rootid[b] == b:
            com_bar = vec3(scalar(0.0))
            for c in range(b, m.body_subtree[b][0]):
                com_bar = com_bar + adj.subtree_com[w, c]
            if A.nonzero3(com_bar):
                subtree_com_adjoint(m, d, adj, w, b, com_bar)
        mass_bar = adj.subtree_mass[w, b]
        mcom_bar = adj.subtree_mcom[w, b]
        if mass_bar != scalar(0.0) or A.nonzero3(mcom_bar):
            adr = m.body_child_adr[b]
            for k in range(adr, adr + m.body_child_num[b]):
                c = m.body_child[k]
                adj.subtree_mass[w, c] += mass_bar
                adj.subtree_mcom[w, c] += mcom_bar
            # subtree_mass = body_mass + ..., subtree_mcom = xipos body_mass + ...
            adj.xipos[w, b] += mcom_bar * m.body_mass[w % m.body_mass.shape[0], b]
            model_mass_adjoint(m, adj_m, w, b, mass_bar + wp.dot(mcom_bar, d.xipos[w, b]))

    @wp.func
    def body_cinert_adjoint(m: Model, d: Data, adj: Data, adj_m: Model, w: int, b: int):
        """`body_cinert`'s adjoint for body b, and `cdof_dof`'s for its dofs (dofs_adjoint: the
        differentiable step's com_pos_dof pass backwards does nothing, the body's thread reads
        its dofs' cdof adjoints once): its subtree_com's into subtree_mcom's and subtree_mass's
        (or xipos's); cinert's, mju_inertCom of (body_inertia, ximat, dif = xipos - root CoM,
        body_mass), into ximat's, xipos's and body_mass's. The adjoint of the root's CoM
        (cinert's and cdof's) replaces subtree_com's."""
        sc_bar = adj.subtree_com[w, b]
        if A.nonzero3(sc_bar):
            subtree_com_adjoint(m, d, adj, w, b, sc_bar)
        com_bar = vec3(scalar(0.0))
        if b > 0:
            g = adj.cinert[w, b]
            if A.nonzero3(vec3(g[0], g[1], g[2])) or A.nonzero3(vec3(g[3], g[4], g[5])) or A.nonzero4(
                    T.quat(g[6], g[7], g[8], g[9])):
                wm = w % m.body_mass.shape[0]
                mass = m.body_mass[wm, b]
                inertia = m.body_inertia[w % m.body_inertia.shape[0], b]
                rot = d.ximat[w, b]
                dif = d.xipos[w, b] - d.subtree_com[w, m.body_rootid[b]]
                # r = rot diag(inertia) rot', of which cinert keeps the upper triangle (adjoint
                # G): rot_bar = (G + G') rot diag(inertia)
                s = mat33(scalar(2.0) * g[0], g[3], g[4],
                          g[3], scalar(2.0) * g[1], g[5],
                          g[4], g[5], scalar(2.0) * g[2])
                adj.ximat[w, b] += s * rot * wp.diag(inertia)
                x = dif[0]
                y = dif[1]
                z = dif[2]
                two = scalar(2.0)
                dif_bar = mass * vec3(two * x * (g[1] + g[2]) - y * g[3] - z * g[4] + g[6],
                                      two * y * (g[0] + g[2]) - x * g[3] - z * g[5] + g[7],
                                      two * z * (g[0] + g[1]) - x * g[4] - y * g[5] + g[8])
                adj.xipos[w, b] += dif_bar
                com_bar = -dif_bar
                model_mass_adjoint(m, adj_m, w, b, g[0] * (y * y + z * z) + g[1] * (x * x + z * z)
                                   + g[2] * (x * x + y * y) - g[3] * x * y - g[4] * x * z - g[5] * y * z
                                   + g[6] * x + g[7] * y + g[8] * z + g[9])
            com_bar = com_bar + dofs_adjoint(m, d, adj, w, b)
        adj.subtree_com[w, b] = com_bar

    return SimpleNamespace(subtree_body=subtree_body, body=make_body(True), body_cinert=make_body(False),
                           cdof_dof=cdof_dof, subtree_body_adjoint=subtree_body_adjoint,
                           body_cinert_adjoint=body_cinert_adjoint,
                           # subtree_body's sums for a body alone (simrl.sim.subtree: the same bits). Model:
                           # body_subtree, body_mass. Data in: xipos. Data out: subtree_mass, subtree_mcom
                           subtree_body_alone=subtree_sum(scalar, vec4, mass_own, mass_write))
