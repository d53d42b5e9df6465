"""Sparse L'DL factorization of the inertia matrix and solves with it (mj_factorM,
mj_factorI, mj_solveLD in engine_core_smooth.c).

M = L' D L with L unit lower-triangular. In a kinematic tree, row i of L is non-zero only in
the columns of the ancestor dofs of i, so eliminating from the last dof to the first creates
no fill-in: the cost is the sum of squared tree depths, not nv^3. Matrices are stored dense
[nv, nv] per world; only the diagonal (D) and the ancestor entries below it (L) are used.

These are world functions (simrl.sim.types): with a block of threads per world, the rows
updated by one elimination step are shared among the lanes (they are independent: each row i
reads only row k and itself), a barrier between steps. The triangular solves run on lane 0
(each step depends on the last). Every lane sees the result when a function returns.
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import WARNING_INERTIA, data_struct, set_warning_func
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, block_sync, no_sync


@functools.cache
def build(scalar, lanes: bool = False):
    """The world functions of precision `scalar`; `lanes`: for a block of threads per world
    (the wide schedule), else for one thread (the fused schedule)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    sync = block_sync if lanes else no_sync
    set_warning = set_warning_func(scalar)

    @wp.func
    def mine(t: int, lane: int, nlanes: int):
        """Whether the t-th item of a phase belongs to this lane (every item to the only lane of
        the fused schedule)."""
        if wp.static(lanes):
            return t % nlanes == lane
        return True

    # Loops walk parent chains with `while`: Warp's CPU code for `for i in range(n)` with a
    # run-time n, or over an index table, is slower on these short loops.

    @wp.func
    def factor_ld(m: Model, mat: wp.array3d(dtype=scalar), w: int, lane: int, nlanes: int) -> int:
        """In-place L'DL factorization of mat[w] (mj_factorI): D on the diagonal, L below. A pivot
        D(k) below mjMINVAL (a singular or indefinite matrix) is raised to mjMINVAL, as MuJoCo's
        factorization does with its warning mjWARN_INERTIA; returns how many were (the same
        count in every lane).

        Model: dof_parentid, nv. In and out: mat (on M's sparsity)."""
        raised = int(0)
        k = m.nv - 1
        while k >= 0:
            dk = mat[w, k, k]
            if dk < scalar(MINVAL):
                dk = scalar(MINVAL)
                raised = raised + 1
            inv_d = scalar(1.0) / dk
            # rows i < k that are ancestors of k: L(i, 0..i) -= L(k, i) / D(k) * L(k, 0..i)
            i = m.dof_parentid[k]
            t = int(0)
            while i >= 0:
                if mine(t, lane, nlanes):
                    scale = mat[w, k, i] * inv_d
                    j = i
                    while j >= 0:
                        mat[w, i, j] = mat[w, i, j] - scale * mat[w, k, j]
                        j = m.dof_parentid[j]
                i = m.dof_parentid[i]
                t = t + 1
            sync()
            # row k: L(k, :) = L(k, :) / D(k); the raised pivot stored (every lane read it before the
            # barrier above)
            if lane == 0:
                mat[w, k, k] = dk
            i = m.dof_parentid[k]
            t = int(0)
            while i >= 0:
                if mine(t, lane, nlanes):
                    mat[w, k, i] = mat[w, k, i] * inv_d
                i = m.dof_parentid[i]
                t = t + 1
            sync()
            k = k - 1
        return raised

    @wp.func
    def solve_ld(m: Model, mat: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar), w: int, lane: int,
                 nlanes: int):
        """x[w] <- inv(L' D L) x[w] in place, with the factor from `factor_ld` (mj_solveLD).

        Model: dof_parentid, nv. In: mat. In and out: x."""
        if lane == 0:
            # x <- inv(L') x
            i = m.nv - 1
            while i >= 0:
                xi = x[w, i]
                if xi != scalar(0.0):
                    j = m.dof_parentid[i]
                    while j >= 0:
                        x[w, j] = x[w, j] - mat[w, i, j] * xi
                        j = m.dof_parentid[j]
                i = i - 1
            # x <- inv(D) x
            i = int(0)
            while i < m.nv:
                x[w, i] = x[w, i] * (scalar(1.0) / mat[w, i, i])
                i = i + 1
            # x <- inv(L) x
            i = int(0)
            while i < m.nv:
                xi = x[w, i]
                j = m.dof_parentid[i]
                while j >= 0:
                    xi = xi - mat[w, i, j] * x[w, j]
                    j = m.dof_parentid[j]
                x[w, i] = xi
                i = i + 1
        sync()

    @wp.func
    def copy_tree(m: Model, src: wp.array3d(dtype=scalar), dst: wp.array3d(dtype=scalar), w: int, lane: int,
                  nlanes: int):
        """dst[w] = src[w] on the sparsity pattern of M (diagonal and ancestor entries).

        Model: dof_parentid, nv. In: src. Out: dst (on M's sparsity)."""
        i = int(lane)
        while i < m.nv:
            dst[w, i, i] = src[w, i, i]
            j = m.dof_parentid[i]
            while j >= 0:
                dst[w, i, j] = src[w, i, j]
                j = m.dof_parentid[j]
            i = i + nlanes
        sync()

    @wp.func
    def mul_m(m: Model, d: Data, x: wp.array2d(dtype=scalar), out: wp.array2d(dtype=scalar), w: int, lane: int,
              nlanes: int):
        """out[w] = qM[w] x[w] (mj_mulM), each row a dot product over all nv columns in order (qM is
        stored dense, zero off M's sparsity), the rows shared among the lanes (no barrier: the
        caller's `sync` before out is read across lanes).

        Model: nv. Data in: qM. In: x. Out: out."""
        i = int(lane)
        while i < m.nv:
            s = scalar(0.0)
            j = int(0)
            while j < m.nv:
                s = s + d.qM[w, i, j] * x[w, j]
                j = j + 1
            out[w, i] = s
            i = i + nlanes

    @wp.func
    def factor_m(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qLD = L'DL factor of qM (mj_factorM), and the world's warning WARNING_INERTIA when a
        pivot was raised to mjMINVAL (MuJoCo's mjWARN_INERTIA: "Inertia matrix is too close to
        singular").

        Model: dof_parentid, nv. Data in: qM. Data out: qLD, nan_world[w, 1] (its warning bit)."""
        copy_tree(m, d.qM, d.qLD, w, lane, nlanes)
        raised = factor_ld(m, d.qLD, w, lane, nlanes)
        if lane == 0:
            set_warning(d, w, WARNING_INERTIA, raised > 0)

    @wp.func
    def fwd_acceleration(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qLD, and qacc_smooth = M^-1 qfrc_smooth (mj_fwdAcceleration).

        Model: dof_parentid, nv. Data in: qM, qfrc_smooth. Data out: qLD, qacc_smooth."""
        factor_m(m, d, w, lane, nlanes)
        i = int(lane)
        while i < m.nv:
            d.qacc_smooth[w, i] = d.qfrc_smooth[w, i]
            i = i + nlanes
        sync()
        solve_ld(m, d.qLD, d.qacc_smooth, w, lane, nlanes)

    return SimpleNamespace(factor_ld=factor_ld, solve_ld=solve_ld, copy_tree=copy_tree, mul_m=mul_m, factor_m=factor_m,
                           fwd_acceleration=fwd_acceleration)
