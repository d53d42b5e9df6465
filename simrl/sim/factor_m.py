"""Sparse L'DL factorization of the inertia matrix and solves with it (mj_factorM,
mj_factorI, mj_solveLD in engine_core_smooth.c).

M = L' D L with L unit lower-triangular. In a kinematic tree, row i of L is non-zero only in
the columns of the ancestor dofs of i, so eliminating from the last dof to the first creates
no fill-in: the cost is the sum of squared tree depths, not nv^3. Matrices are stored dense
[nv, nv] per world; only the diagonal (D) and the ancestor entries below it (L) are used.
"""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)

    @wp.func
    def factor_ld(m: Model, mat: wp.array3d(dtype=scalar), w: int):
        """In-place L'DL factorization of mat[w] (mj_factorI): D on the diagonal, L below."""
        for r in range(m.nv):
            k = m.nv - 1 - r
            inv_d = scalar(1.0) / mat[w, k, k]
            # rows i < k that are ancestors of k: L(i, 0..i) -= L(k, i) / D(k) * L(k, 0..i)
            i = m.dof_parentid[k]
            while i >= 0:
                scale = mat[w, k, i] * inv_d
                j = i
                while j >= 0:
                    mat[w, i, j] = mat[w, i, j] - scale * mat[w, k, j]
                    j = m.dof_parentid[j]
                i = m.dof_parentid[i]
            # row k: L(k, :) = L(k, :) / D(k)
            i = m.dof_parentid[k]
            while i >= 0:
                mat[w, k, i] = mat[w, k, i] * inv_d
                i = m.dof_parentid[i]

    @wp.func
    def solve_ld(m: Model, mat: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar), w: int):
        """x[w] <- inv(L' D L) x[w] in place, with the factor from `factor_ld` (mj_solveLD)."""
        # x <- inv(L') x
        for r in range(m.nv):
            i = m.nv - 1 - r
            xi = x[w, i]
            if xi != scalar(0.0):
                j = m.dof_parentid[i]
                while j >= 0:
                    x[w, j] = x[w, j] - mat[w, i, j] * xi
                    j = m.dof_parentid[j]
        # x <- inv(D) x
        for i in range(m.nv):
            x[w, i] = x[w, i] * (scalar(1.0) / mat[w, i, i])
        # x <- inv(L) x
        for i in range(m.nv):
            j = m.dof_parentid[i]
            xi = x[w, i]
            while j >= 0:
                xi = xi - mat[w, i, j] * x[w, j]
                j = m.dof_parentid[j]
            x[w, i] = xi

    @wp.func
    def factor_m(m: Model, d: Data, w: int):
        """qLD = L'DL factor of qM."""
        for i in range(m.nv):
            d.qLD[w, i, i] = d.qM[w, i, i]
            j = m.dof_parentid[i]
            while j >= 0:
                d.qLD[w, i, j] = d.qM[w, i, j]
                j = m.dof_parentid[j]
        factor_ld(m, d.qLD, w)

    return factor_m, factor_ld, solve_ld
