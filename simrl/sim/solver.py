"""The constraint solver: Newton's method on MuJoCo's reduced primal problem
(doc/computation "Reduced primal problem", "Algorithms"; engine_solver.c mj_solPrimal).

    qacc = argmin_x  1/2 (x - qacc_smooth)' M (x - qacc_smooth) + s(J x - aref)

s is a convex quadratic spline: for a limit or pyramid-edge row, 1/2 D jar^2 while jar < 0
and 0 beyond; for a friction-loss row the Huber function with linear zones |jar| > R floss.
Its minimizer is unique, so any solver that converges finds MuJoCo's answer. Each iteration
solves (M + J' D_active J) p = -grad by a dense Cholesky factorization (nv is small; one
thread per world) and takes the exact step along p (1-D Newton with bisection safeguard on
the piecewise-quadratic cost). Iterations stop, per world, when the scaled cost improvement
gradient or Newton decrement falls below `tolerance` (scale = 1 / (meaninertia max(1, nv)),
as MuJoCo), or after `iterations`. The number used is kept in `solver_niter`.
"""

import functools

import warp as wp

from simrl.sim import constraint, factor_m
from simrl.sim.constraint import CNSTR_FRICTION_DOF
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL

LS_ITERATIONS = 50


@functools.cache
def dense_cholesky(scalar):
    """(cholesky_factor, cholesky_solve): dense Cholesky of a per-world [nv, nv] matrix, in
    place, for Hessians whose sparsity is not that of M (and the solver's implicit adjoint)."""

    @wp.func
    def cholesky_factor(H: wp.array3d(dtype=scalar), nv: int, w: int):
        """H[w] = L L' in place: L in the lower triangle (the upper one is not read)."""
        for j in range(nv):
            s = H[w, j, j]
            for k in range(j):
                s = s - H[w, j, k] * H[w, j, k]
            ljj = wp.sqrt(wp.max(s, scalar(MINVAL)))
            H[w, j, j] = ljj
            for i in range(j + 1, nv):
                s2 = H[w, i, j]
                for k in range(j):
                    s2 = s2 - H[w, i, k] * H[w, j, k]
                H[w, i, j] = s2 / ljj

    @wp.func
    def cholesky_solve(L: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar), nv: int, w: int):
        """x[w] <- (L L')^-1 x[w] in place, L from `cholesky_factor`."""
        for i in range(nv):
            s = x[w, i]
            for k in range(i):
                s = s - L[w, i, k] * x[w, k]
            x[w, i] = s / L[w, i, i]
        for ii in range(nv):
            i = nv - 1 - ii
            s = x[w, i]
            for k in range(i + 1, nv):
                s = s - L[w, k, i] * x[w, k]
            x[w, i] = s / L[w, i, i]

    return cholesky_factor, cholesky_solve


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    # machine epsilon of the build's precision (a power of two: exact as a kernel constant)
    eps = 2.0**-23 if scalar == wp.float32 else 2.0**-52
    row_dot = constraint.build(scalar)[2]
    _, factor_ld, solve_ld = factor_m.build(scalar)
    cholesky_factor, cholesky_solve = dense_cholesky(scalar)

    @wp.func
    def row_cost(m: Model, d: Data, w: int, r: int, jar: scalar):
        """Cost, first and second derivative of row r's penalty at jar; also its force."""
        D = d.efc_D[w, r]
        cost = scalar(0.0)
        ds = scalar(0.0)
        dds = scalar(0.0)
        if m.efc_type[r] == CNSTR_FRICTION_DOF:
            R = d.efc_R[w, r]
            fl = d.efc_frictionloss[w, r]
            if jar <= -R * fl:
                cost = -scalar(0.5) * R * fl * fl - fl * jar
                ds = -fl
            elif jar >= R * fl:
                cost = -scalar(0.5) * R * fl * fl + fl * jar
                ds = fl
            else:
                cost = scalar(0.5) * D * jar * jar
                ds = D * jar
                dds = D
        elif jar < scalar(0.0):
            cost = scalar(0.5) * D * jar * jar
            ds = D * jar
            dds = D
        return cost, ds, dds

    @wp.func
    def evaluate(m: Model, d: Data, w: int):
        """At x = d.qacc: jar, forces, cost and gradient. Returns the cost."""
        cost = scalar(0.0)
        for i in range(m.nv):
            d.solver_res[w, i] = d.qacc[w, i] - d.qacc_smooth[w, i]
        for i in range(m.nv):
            mr = scalar(0.0)
            for j in range(m.nv):
                mr = mr + d.qM[w, i, j] * d.solver_res[w, j]
            d.solver_Mres[w, i] = mr
            cost = cost + scalar(0.5) * d.solver_res[w, i] * mr
            d.solver_grad[w, i] = mr
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            jar = -d.efc_aref[w, r]
            for k in range(m.efc_nnz[r]):
                j = m.efc_colind[r, k]
                jar = jar + d.efc_J[w, r, j] * d.qacc[w, j]
            d.efc_jar[w, r] = jar
            c, ds, dds = row_cost(m, d, w, r, jar)
            cost = cost + c
            d.efc_force[w, r] = -ds
            if ds != scalar(0.0):
                for k in range(m.efc_nnz[r]):
                    j = m.efc_colind[r, k]
                    d.solver_grad[w, j] = d.solver_grad[w, j] + d.efc_J[w, r, j] * ds
        return cost

    @wp.func
    def newton_direction(m: Model, d: Data, w: int):
        """solver_search = -(M + J' D_quadratic J)^-1 grad.

        When every row in its quadratic zone acts on one chain of ancestor dofs (contacts with
        a static body, limits, friction loss), the Hessian has the sparsity of M and is
        factorized like M (sparse L'DL from the leaves, no fill-in); otherwise by dense
        Cholesky."""
        nv = m.nv
        tree = int(1)
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            if m.efc_chain[r] == 0:
                c, ds, dds = row_cost(m, d, w, r, d.efc_jar[w, r])
                if dds != scalar(0.0):
                    tree = 0
        if tree == 1:
            for i in range(nv):
                d.solver_H[w, i, i] = d.qM[w, i, i]
                j = m.dof_parentid[i]
                while j >= 0:
                    d.solver_H[w, i, j] = d.qM[w, i, j]
                    j = m.dof_parentid[j]
        else:
            for i in range(nv):
                for j in range(i + 1):
                    d.solver_H[w, i, j] = d.qM[w, i, j]
        # J' D J over the rows in their quadratic zone, only in the rows' non-zero columns
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            c, ds, dds = row_cost(m, d, w, r, d.efc_jar[w, r])
            if dds != scalar(0.0):
                for ki in range(m.efc_nnz[r]):
                    i = m.efc_colind[r, ki]
                    ji = d.efc_J[w, r, i] * dds
                    if ji != scalar(0.0):
                        for kj in range(ki + 1):
                            j = m.efc_colind[r, kj]
                            d.solver_H[w, i, j] = d.solver_H[w, i, j] + ji * d.efc_J[w, r, j]
        if tree == 1:
            factor_ld(m, d.solver_H, w)
            for i in range(nv):
                d.solver_search[w, i] = -d.solver_grad[w, i]
            solve_ld(m, d.solver_H, d.solver_search, w)
            return
        cholesky_factor(d.solver_H, nv, w)
        for i in range(nv):
            d.solver_search[w, i] = -d.solver_grad[w, i]
        cholesky_solve(d.solver_H, d.solver_search, nv, w)

    @wp.func
    def line_derivatives(m: Model, d: Data, w: int, alpha: scalar, p_mr: scalar, p_mp: scalar):
        """First and second derivative of the cost along the search direction at alpha, and the
        sum of the magnitudes of the terms of the first (its rounding error is about eps times
        that)."""
        d1 = p_mr + alpha * p_mp
        d2 = p_mp
        mag = wp.abs(p_mr) + wp.abs(alpha * p_mp)
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            jv = d.efc_jv[w, r]
            c, ds, dds = row_cost(m, d, w, r, d.efc_jar[w, r] + alpha * jv)
            d1 = d1 + ds * jv
            d2 = d2 + dds * jv * jv
            mag = mag + wp.abs(ds * jv)
        return d1, d2, mag

    @wp.func
    def line_search(m: Model, d: Data, w: int):
        """Exact minimizer alpha >= 0 of the convex piecewise-quadratic cost along the search."""
        p_mr = scalar(0.0)
        p_mp = scalar(0.0)
        for i in range(m.nv):
            mp = scalar(0.0)
            for j in range(m.nv):
                mp = mp + d.qM[w, i, j] * d.solver_search[w, j]
            p_mr = p_mr + d.solver_search[w, i] * d.solver_Mres[w, i]
            p_mp = p_mp + d.solver_search[w, i] * mp
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            d.efc_jv[w, r] = row_dot(m, d, w, r, d.solver_search)
        d0, dd0, mag0 = line_derivatives(m, d, w, scalar(0.0), p_mr, p_mp)
        if d0 >= scalar(0.0):
            return scalar(0.0)
        gtol = -d0 * scalar(1e-10)
        lo = scalar(0.0)
        hi = scalar(-1.0)  # no upper bracket yet
        alpha = scalar(1.0)
        for _ in range(LS_ITERATIONS):
            d1, d2, mag = line_derivatives(m, d, w, alpha, p_mr, p_mp)
            # converged: to the tolerance, or to the rounding error of d1 (which float32 cannot
            # push below the tolerance; Newton would then wander by rounding noise)
            if wp.abs(d1) <= wp.max(gtol, scalar(16.0) * scalar(eps) * mag):
                break
            if d1 < scalar(0.0):
                lo = alpha
            else:
                hi = alpha
            step = alpha - d1 / wp.max(d2, scalar(MINVAL))
            if hi >= scalar(0.0) and (step <= lo or step >= hi):
                step = scalar(0.5) * (lo + hi)
            # a step within rounding of alpha: converged as far as the precision allows
            if wp.abs(step - alpha) <= scalar(4.0) * scalar(eps) * wp.abs(alpha):
                alpha = step
                break
            alpha = step
        return alpha

    @wp.func
    def solve(m: Model, d: Data, w: int):
        """qacc, efc_force and qfrc_constraint from qacc_smooth and the constraint rows."""
        nactive = d.efc_nactive[w]
        d.solver_niter[w] = 0
        for i in range(m.nv):
            d.qfrc_constraint[w, i] = scalar(0.0)
            d.qacc[w, i] = d.qacc_smooth[w, i]
        if nactive == 0:
            return

        # warm start: the previous solution if it costs less than the smooth acceleration
        for i in range(m.nv):
            d.qacc[w, i] = d.qacc_warmstart[w, i]
        cost = evaluate(m, d, w)
        cost_smooth = scalar(0.0)
        for a in range(nactive):
            r = d.efc_list[w, a]
            jar = -d.efc_aref[w, r]
            for k in range(m.efc_nnz[r]):
                j = m.efc_colind[r, k]
                jar = jar + d.efc_J[w, r, j] * d.qacc_smooth[w, j]
            c, ds, dds = row_cost(m, d, w, r, jar)
            cost_smooth = cost_smooth + c
        if cost_smooth < cost:
            for i in range(m.nv):
                d.qacc[w, i] = d.qacc_smooth[w, i]
            cost = evaluate(m, d, w)

        scale = m.solver_scale
        niter = int(0)
        for _ in range(m.solver_iterations):
            gnorm = scalar(0.0)
            for i in range(m.nv):
                gnorm = gnorm + d.solver_grad[w, i] * d.solver_grad[w, i]
            if scale * wp.sqrt(gnorm) < m.solver_tolerance:
                break
            newton_direction(m, d, w)
            # Newton decrement 1/2 g' H^-1 g = -1/2 g' p: the predicted improvement of this step
            decrement = scalar(0.0)
            for i in range(m.nv):
                decrement = decrement - scalar(0.5) * d.solver_grad[w, i] * d.solver_search[w, i]
            if scale * decrement < m.solver_tolerance:
                break
            alpha = line_search(m, d, w)
            if alpha == scalar(0.0):
                break
            for i in range(m.nv):
                d.qacc[w, i] = d.qacc[w, i] + alpha * d.solver_search[w, i]
            new_cost = evaluate(m, d, w)
            niter = niter + 1
            improvement = scale * (cost - new_cost)
            cost = new_cost
            if improvement < m.solver_tolerance:
                break
        d.solver_niter[w] = niter

        # qfrc_constraint = J' efc_force at the solution (efc_force set by evaluate)
        for a in range(nactive):
            r = d.efc_list[w, a]
            fr = d.efc_force[w, r]
            for k in range(m.efc_nnz[r]):
                j = m.efc_colind[r, k]
                d.qfrc_constraint[w, j] = d.qfrc_constraint[w, j] + d.efc_J[w, r, j] * fr
        for i in range(m.nv):
            d.qacc_warmstart[w, i] = d.qacc[w, i]

    return solve
