"""Joint-space inertia matrix by the composite rigid body algorithm (mj_crb / mj_makeM,
engine_core_smooth.c), with dof armature on the diagonal and the tendons' armature.

Elements: `body(m, d, w, b)` sums body b's composite inertia from its children's (a tree pass
from the leaves; bodies of the world are not merged into it; `body_alone`, the same sums for
body b alone: simrl.sim.subtree); `dof(m, d, w, i)` fills row i
of qM and its transpose: the entries between dof i and its ancestor dofs.
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

    # body_alone: body's sums for a body alone (simrl.sim.subtree: the same bits). Model: body_subtree.
    # Data in: cinert. Data out: crb
    return SimpleNamespace(body=body, body_alone=subtree_sum(scalar, T.vec10, cinert_own, crb_write), dof=dof)
