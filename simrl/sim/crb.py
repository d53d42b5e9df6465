"""Joint-space inertia matrix by the composite rigid body algorithm (mj_crb / mj_makeM,
engine_core_smooth.c), with dof armature on the diagonal."""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f = T.f

    @wp.func
    def crb(m: Model, d: Data, w: int):
        # composite inertia of each subtree (not merged into the world body)
        for b in range(m.nbody):
            d.crb[w, b] = d.cinert[w, b]
        for i in range(m.nbody - 1):
            b = m.nbody - 1 - i
            p = m.body_parentid[b]
            if p > 0:
                d.crb[w, p] += d.crb[w, b]
        # M(i, j) = cdof_j . (crb_body(i) cdof_i) for j = i and every ancestor dof j of i;
        # entries between dofs that are not ancestors of each other stay zero.
        wa = w % m.dof_armature.shape[0]
        for i in range(m.nv):
            buf = f.inert_mul(d.crb[w, m.dof_bodyid[i]], d.cdof[w, i])
            d.qM[w, i, i] = m.dof_armature[wa, i] + wp.dot(d.cdof[w, i], buf)
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                mij = wp.dot(d.cdof[w, j], buf)
                d.qM[w, i, j] = mij
                d.qM[w, j, i] = mij

    return crb
