"""Joint-space inertia matrix by the composite rigid body algorithm (mj_crb / mj_makeM,
engine_core_smooth.c), with dof armature on the diagonal and the tendons' armature.

Elements: `body(m, d, w, b)` sums body b's composite inertia from its children's (a tree pass
from the leaves; bodies of the world are not merged into it; `body_alone`, the same sums for
body b alone: simrl.sim.subtree); `dof(m, d, w, i)` fills row i
of qM and its transpose: the entries between dof i and its ancestor dofs. `body_adjoint` and
`dof_adjoint` are their hand-written adjoints, which the differentiable step runs in place of
the generated ones (simrl.sim.grad's `reverse`), without atomics: a body's thread writes its own
body's adjoints; one thread per world runs qM's rows in a fixed order (`dof_adjoint`), or a
dof's thread gathers its own adjoints (`dof_adjoint_gather`).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.subtree import subtree_sum
from simrl.sim.types import scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f = T.f

    @wp.func
    def body(m: Model, d: Data, w: int, b: int):
        """Composite inertia of the subtree of body b (b > 0), children in ascending order.

        Model: body_child, body_child_adr, body_child_num. Data in: cinert; the children's crb. Data out: crb."""
        d.crb[w, b] = d.cinert[w, b]
        adr = m.body_child_adr[b]
        for k in range(adr, adr + m.body_child_num[b]):
            d.crb[w, b] += d.crb[w, m.body_child[k]]

    @wp.func
    def cinert_own(m: Model, d: Data, w: int, b: int):
        return d.cinert[w, b]

    @wp.func
    def crb_write(m: Model, d: Data, w: int, b: int, total: T.vec10):
        d.crb[w, b] = total

    @wp.func
    def dof(m: Model, d: Data, w: int, i: int):
        """M(i, j) = cdof_j . (crb_body(i) cdof_i) for j = i and every ancestor dof j of i, and
        M(j, i); entries between dofs that are not ancestors of each other stay zero.

        Model: dof_ancestor, dof_ancestor_adr, dof_ancestor_num, dof_armature, dof_bodyid, dof_tendon,
        dof_tendon_adr, tendon. Data in: crb, cdof, ten_J. Data out: qM (row i and column i: the entries between dof
        i and its ancestors)."""
        buf = f.inert_mul(d.crb[w, m.dof_bodyid[i]], d.cdof[w, i])
        d.qM[w, i, i] = m.dof_armature[w % m.dof_armature.shape[0], i] + wp.dot(d.cdof[w, i], buf)
        adr = m.dof_ancestor_adr[i]
        for k in range(adr, adr + m.dof_ancestor_num[i]):
            j = m.dof_ancestor[k]
            mij = wp.dot(d.cdof[w, j], buf)
            d.qM[w, i, j] = mij
            d.qM[w, j, i] = mij
        # + armature ten_J' ten_J of the tendons through dof i (mj_tendonArmature): row i's entries
        # in its own and its ancestors' columns, and their mirror; as in MuJoCo, which adds the
        # product on M's sparsity only, a tendon's coupling of dofs on different branches is dropped
        span = m.dof_tendon_adr[i]
        for k in range(span[0], span[0] + span[1]):
            t = m.dof_tendon[k]
            arm = m.tendon[t].armature
            if arm != scalar(0.0):
                ji = d.ten_J[w, t, i] * arm
                d.qM[w, i, i] += ji * d.ten_J[w, t, i]
                for a in range(adr, adr + m.dof_ancestor_num[i]):
                    j = m.dof_ancestor[a]
                    mij = ji * d.ten_J[w, t, j]
                    d.qM[w, i, j] += mij
                    d.qM[w, j, i] += mij

    @wp.func
    def inert_mul_grad(u: T.vec6, v: T.vec6):
        """d (u' inert_mul(i, v)) / d i: the adjoint of a 10-vector spatial inertia i in
        mju_mulInertVec for the product's adjoint u (the product is linear in i)."""
        return T.vec10(u[0] * v[0], u[1] * v[1], u[2] * v[2], u[0] * v[1] + u[1] * v[0], u[0] * v[2] + u[2] * v[0],
                       u[1] * v[2] + u[2] * v[1], u[2] * v[4] + u[4] * v[2] - u[1] * v[5] - u[5] * v[1],
                       u[0] * v[5] + u[5] * v[0] - u[2] * v[3] - u[3] * v[2],
                       u[1] * v[3] + u[3] * v[1] - u[0] * v[4] - u[4] * v[0], u[3] * v[3] + u[4] * v[4] + u[5] * v[5])

    @wp.func
    def body_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """`body`'s adjoint for body b (b > 0), its parent's done (a launch per tree level, the
        root's first): crb_bar(b) = its own (what read crb(b): qM's rows) + its parent's
        crb_bar (which holds the parent's own and the grandparent's, as the parent's sum reads
        crb(b)); cinert_bar(b) += crb_bar(b). The thread of body b writes only body b's
        adjoints; the world body (not a sum) passes nothing on.

        Model: body_parentid. Data in: the adjoints crb of b and its parent. Data out: the
        adjoints crb (b's, complete) and cinert of body b."""
        total = adj.crb[w, b]
        p = m.body_parentid[b]
        if p > 0:
            total = total + adj.crb[w, p]
            adj.crb[w, b] = total
        adj.cinert[w, b] = adj.cinert[w, b] + total

    @wp.func
    def dof_adjoint(m: Model, d: Data, adj: Data, w: int, i: int):
        """`dof`'s adjoint for every row of world w, by the thread of dof 0 (the others do
        nothing): the rows in ascending order, each adding into the adjoints of its own and its
        ancestors' dofs, so no two threads add into one element and the order is fixed. With
        I = crb(b(i)) (b(i) the body of dof i), buf_i = I cdof_i, G_ii = qM_bar(i, i) and G_ij =
        qM_bar(i, j) + qM_bar(j, i) for the ancestors j of i, row i adds
            u_i = G_ii cdof_i + sum_j G_ij cdof_j               (buf_i's adjoint)
            cdof_bar_i += G_ii buf_i + I u_i,  cdof_bar_j += G_ij buf_i,
            crb_bar(b(i)) += d (u_i' I cdof_i) / d I            (`inert_mul_grad`),
        and the armature arm_t of each tendon t through dof i (arm_t ten_J_t' ten_J_t on M's
        sparsity)
            ten_J_bar(t, i) += arm_t (2 J_ti G_ii + sum_j J_tj G_ij),  ten_J_bar(t, j) += arm_t J_ti G_ij.
        (`dof_adjoint_gather`, a thread per dof, costs the CPU twice this; the wide schedule's
        GPU runs it.) dof_armature and the tendons' armature are not differentiated (no
        gradients).

        Model: dof_ancestor, dof_ancestor_adr, dof_ancestor_num, dof_bodyid, dof_tendon,
        dof_tendon_adr, tendon. Data in: cdof, crb, ten_J; the adjoint qM. Data out: the
        adjoints cdof, crb, ten_J."""
        if i != 0:
            return
        for r in range(m.nv):
            b = m.dof_bodyid[r]
            crb = d.crb[w, b]
            cdof = d.cdof[w, r]
            buf = f.inert_mul(crb, cdof)
            gii = adj.qM[w, r, r]
            u = gii * cdof
            adr = m.dof_ancestor_adr[r]
            for k in range(adr, adr + m.dof_ancestor_num[r]):
                j = m.dof_ancestor[k]
                gij = adj.qM[w, r, j] + adj.qM[w, j, r]
                u = u + gij * d.cdof[w, j]
                adj.cdof[w, j] = adj.cdof[w, j] + gij * buf
            adj.cdof[w, r] = adj.cdof[w, r] + gii * buf + f.inert_mul(crb, u)
            adj.crb[w, b] = adj.crb[w, b] + inert_mul_grad(u, cdof)
            span = m.dof_tendon_adr[r]
            for a in range(span[0], span[0] + span[1]):
                t = m.dof_tendon[a]
                arm = m.tendon[t].armature
                if arm != scalar(0.0):
                    ji = arm * d.ten_J[w, t, r]
                    jb = scalar(2.0) * ji * gii
                    for k in range(adr, adr + m.dof_ancestor_num[r]):
                        j = m.dof_ancestor[k]
                        gij = adj.qM[w, r, j] + adj.qM[w, j, r]
                        jb = jb + arm * d.ten_J[w, t, j] * gij
                        adj.ten_J[w, t, j] = adj.ten_J[w, t, j] + ji * gij
                    adj.ten_J[w, t, r] = adj.ten_J[w, t, r] + jb

    @wp.func
    def row_adjoint(m: Model, d: Data, adj: Data, w: int, i: int):
        """u_i = G_ii cdof_i + sum over the ancestors j of i of G_ij cdof_j (`dof_adjoint`)."""
        u = adj.qM[w, i, i] * d.cdof[w, i]
        adr = m.dof_ancestor_adr[i]
        for k in range(adr, adr + m.dof_ancestor_num[i]):
            j = m.dof_ancestor[k]
            u = u + (adj.qM[w, i, j] + adj.qM[w, j, i]) * d.cdof[w, j]
        return u

    @wp.func
    def dof_adjoint_gather(m: Model, d: Data, adj: Data, w: int, i: int):
        """`dof_adjoint`'s sums gathered by dof i for the adjoints it owns, for a GPU (a thread per
        dof, none waiting for a world's rows to run one after another): cdof_bar_i from its own
        row and its descendants' (the dofs after i up to the end of b(i)'s subtree: MuJoCo
        numbers bodies depth first and dofs by body, and within a body each dof is the parent of
        the next), I_b(i) u_i + sum over k in {i} and the descendants of G_ki buf_k; ten_J_bar's
        column i alike; crb_bar(b) from all of body b's rows by the thread of b's first dof.
        Each pair of rows is visited twice (u_k, then the gather), buf_k once per ancestor: on a
        CPU twice `dof_adjoint`'s cost.

        Model: body_dofadr, body_dofnum, body_subtree, and `dof_adjoint`'s. Data in: cdof, crb,
        ten_J; the adjoint qM. Data out: the adjoints cdof (dof i), ten_J (column i), crb (the
        body of i, from its first dof)."""
        b = m.dof_bodyid[i]
        if i == m.body_dofadr[b]:
            g = T.vec10(scalar(0.0))
            for k in range(i, i + m.body_dofnum[b]):
                g = g + inert_mul_grad(row_adjoint(m, d, adj, w, k), d.cdof[w, k])
            adj.crb[w, b] = adj.crb[w, b] + g
        end = m.body_subtree[b][0]
        acc = f.inert_mul(d.crb[w, b], row_adjoint(m, d, adj, w, i))
        for k in range(i, m.nv):
            bk = m.dof_bodyid[k]
            if bk >= end:
                break
            gki = adj.qM[w, i, i]
            if k != i:
                gki = adj.qM[w, k, i] + adj.qM[w, i, k]
            acc = acc + gki * f.inert_mul(d.crb[w, bk], d.cdof[w, k])
            span = m.dof_tendon_adr[k]
            for a in range(span[0], span[0] + span[1]):
                t = m.dof_tendon[a]
                arm = m.tendon[t].armature
                if arm != scalar(0.0):
                    jb = arm * d.ten_J[w, t, k] * gki
                    if k == i:
                        jb = jb + jb
                        adr = m.dof_ancestor_adr[i]
                        for q in range(adr, adr + m.dof_ancestor_num[i]):
                            j = m.dof_ancestor[q]
                            jb = jb + arm * d.ten_J[w, t, j] * (adj.qM[w, i, j] + adj.qM[w, j, i])
                    adj.ten_J[w, t, i] = adj.ten_J[w, t, i] + jb
        adj.cdof[w, i] = adj.cdof[w, i] + acc

    # body_alone: body's sums for a body alone (simrl.sim.subtree: the same bits). Model: body_subtree.
    # Data in: cinert. Data out: crb
    return SimpleNamespace(body=body, body_alone=subtree_sum(scalar, T.vec10, cinert_own, crb_write), dof=dof,
                           body_adjoint=body_adjoint, dof_adjoint=dof_adjoint,
                           dof_adjoint_gather=dof_adjoint_gather)
