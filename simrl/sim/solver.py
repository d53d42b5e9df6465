"""The constraint solver: Newton's method on MuJoCo's reduced primal problem
(doc/computation "Reduced primal problem", "Algorithms"; engine_solver.c mj_solPrimal).

    qacc = argmin_x  1/2 (x - qacc_smooth)' M (x - qacc_smooth) + s(J x - aref)

s is convex: for an equality row 1/2 D jar^2; for a limit or pyramid-edge row, 1/2 D jar^2
while jar < 0 and 0 beyond; for a friction-loss row the Huber function with linear zones
|jar| > R floss; for the rows of a contact in the elliptic cone a function of the whole
contact (`elliptic_cone`): 0 inside the cone, 1/2 sum D_j jar_j^2 inside its dual, and
between them 1/2 D_m (N - mu T)^2 of the distance from the cone, with a dense cone Hessian.
Its minimizer is unique, so any solver that converges finds MuJoCo's answer; simrl follows
MuJoCo's Newton solver step for step (engine_forward.c warmstart, engine_island.c mj_island,
engine_solver.c mj_solPrimal and PrimalSearch), so that a capped solve (few `iterations`,
`ls_iterations`, a loose `tolerance`) stops where MuJoCo's does. The rows' trees are joined into
islands (unless mjDSBL_ISLAND), each solved apart with scale 1 / (its sum of diag M) (without
islands one, scale 1 / (meaninertia max(1, nv))). Each iteration solves (M + J' D_active J) p =
-grad (the Hessian factorized like M when it has M's sparsity, else by dense Cholesky; its
blocks are the islands') and searches along each island's p with MuJoCo's line search (Newton
steps, then a bracketed search, stopping within tolerance ls_tolerance |p| / scale or after
ls_iterations evaluations). An island stops when its line search's scaled improvement is in
(0, tolerance), its scaled gradient or Newton decrement is below `tolerance`, or after
`iterations`; `solver_niter` is the most iterations of an island.

`solve` is a world function (simrl.sim.types): with a block of threads per world, dofs and
active rows are shared among the lanes in each phase (residuals, M products, row costs, the
gradient gathered per dof, the Hessian one row per lane, factorization columns), and every
sum over dofs or rows is taken by lane 0 in the same order as one thread would take it, so
the result does not depend on the number of lanes, bit for bit.
"""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import constraint, factor_m
from simrl.sim.data import SOLVER_FIXED, SOLVER_FLAG_FIXED, SOLVER_ISLAND, TIME, data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, ConstraintType, block_sync, no_sync

# per-world scalars the lanes share (Data.solver_scalar[w, ...]): the cost, the cost at
# qacc_smooth, the line search's last evaluation, whether every island is done, the line search's
# next alpha (its result when done), tolerance on the slope, direction of the one-sided search and
# improvement
COST, COST_SMOOTH, LS_COST, LS_D1, LS_D2, ALL_DONE, LS_ALPHA, LS_GTOL, LS_DIRECTION, LS_IMPROVE = range(10)
# the line search's points (engine_solver.c PrimalSearch's p0, p1, p2, pmid, p1next, p2next),
# each (alpha, cost at alpha less cost at 0, first and second derivative)
P0, P1, P2, PMID, P1NEXT, P2NEXT = (12 + 4 * k for k in range(6))
PT_ALPHA, PT_COST, PT_D1, PT_D2 = range(4)
# each island's scalars, from column SOLVER_FIXED + SOLVER_ISLAND k: its scale, 1 when done, its
# iterations, the last step's alpha and improvement, grad' grad, grad' search, and the search's
# search' search, search' M res, 1/2 search' M search
(ISL_SCALE, ISL_DONE, ISL_ITER, ISL_ALPHA, ISL_IMPROVE, ISL_GRAD2, ISL_GRADSEARCH, ISL_SEARCH2, ISL_GAUSS1,
 ISL_GAUSS2) = range(SOLVER_ISLAND)
# Data.solver_flag's integers: the Hessian has M's sparsity, the number of islands, the line
# search's state (-1: every island searched), the point it evaluates, whether p2next follows
# p1next, its evaluations, the island it searches
FLAG_TREE, FLAG_NISLAND, FLAG_STATE, FLAG_TARGET, FLAG_NEXT2, FLAG_NEV, FLAG_ISLAND = range(SOLVER_FLAG_FIXED)
# the union-find of tree (root body) b: its parent at column UF + 2 b, its island at UF + 2 b + 1
UF = SOLVER_FLAG_FIXED
assert P2NEXT + 4 <= SOLVER_FIXED
assert LS_IMPROVE < TIME < P0  # the world's time shares the row (simrl.sim.data.TIME)

# what `cone_pass` computes for each elliptic contact: the solver's evaluation (cost, forces,
# Hessian), the line search's polynomials, its terms at alpha, the cost alone
CONE_EVALUATE, CONE_QUAD, CONE_LINE, CONE_COST = range(4)


@functools.cache
def elliptic_cone(scalar):
    """The functions of the contact whose rows start at r0 in the elliptic cone
    (mj_constraintUpdate_impl, engine_core_constraint.c; the line search's terms as
    engine_solver.c's mj_lineSearch takes them). With U_0 = mu jar_0, U_j = friction_j jar_j,
    N = U_0, T = |U_1..|:
      top zone (N >= mu T): inside the cone, no cost, no force;
      bottom zone (mu N + T <= 0): every row quadratic, 1/2 D_j jar_j^2;
      middle zone: 1/2 D_m (N - mu T)^2, D_m = D_0 / (mu^2 (1 + mu^2)), force
          f_0 = -D_m (N - mu T) mu, f_j = -f_0 U_j friction_j / T,
        and the cone Hessian D_m S H S, S = diag(mu, friction),
          H = [[1, -mu U'/T], [-mu U/T, mu N / T^3 U U' + (mu^2 - mu N / T) I]].
    `cone(m, d, w, r0)` (the solver's evaluation) writes efc_cost (on row r0), efc_force,
    efc_dds (D_j in the bottom zone, else 0) and efc_hcone (the middle zone's Hessian, else 0);
    `cone_quad` and `cone_line` the line search's terms at jar + alpha jv; `cone_cost` the cost;
    `cone_middle(m, d, w, r)` whether row r's contact is in the middle zone (after `cone`)."""
    Model, Data = model_struct(scalar), data_struct(scalar)

    @wp.func
    def cone_zone(mu: scalar, N: scalar, T: scalar):
        """0 top (inside the cone), 1 middle, 2 bottom (inside the dual cone)."""
        zone = int(1)
        if N >= mu * T or (T <= scalar(0.0) and N >= scalar(0.0)):
            zone = 0
        elif mu * N + T <= scalar(0.0) or (T <= scalar(0.0) and N < scalar(0.0)):
            zone = 2
        return zone

    @wp.func
    def cone(m: Model, d: Data, w: int, r0: int):
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r0]]]
        mu = d.efc_mu[w, r0]
        N = mu * d.efc_jar[w, r0]
        T2 = scalar(0.0)
        for j in range(1, n):
            u = d.efc_mu[w, r0 + j] * d.efc_jar[w, r0 + j]
            T2 = T2 + u * u
        T = wp.sqrt(T2)
        zone = cone_zone(mu, N, T)
        Dm = d.efc_D[w, r0] / (mu * mu * (scalar(1.0) + mu * mu))
        NmT = N - mu * T
        cost = scalar(0.0)
        f0 = -Dm * NmT * mu
        for j in range(n):
            r = r0 + j
            jar = d.efc_jar[w, r]
            f = scalar(0.0)
            dds = scalar(0.0)
            if zone == 2:
                D = d.efc_D[w, r]
                f = -D * jar
                dds = D
                cost = cost + scalar(0.5) * D * jar * jar
            elif zone == 1:
                f = f0
                if j > 0:
                    fr = d.efc_mu[w, r]
                    f = -f0 / T * (fr * jar) * fr
            d.efc_force[w, r] = f
            d.efc_dds[w, r] = dds
            d.efc_cost[w, r] = scalar(0.0)
        if zone == 1:
            cost = scalar(0.5) * Dm * NmT * NmT
            # the middle zone's Hessian, row by row (k) against the contact's rows (j)
            for k in range(n):
                s_k = mu
                if k > 0:
                    s_k = d.efc_mu[w, r0 + k]
                u_k = s_k * d.efc_jar[w, r0 + k]
                for j in range(n):
                    s_j = mu
                    if j > 0:
                        s_j = d.efc_mu[w, r0 + j]
                    u_j = s_j * d.efc_jar[w, r0 + j]
                    h = scalar(0.0)
                    if k == 0 and j == 0:
                        h = scalar(1.0)
                    elif k == 0:
                        h = -mu / T * u_j
                    elif j == 0:
                        h = -mu / T * u_k
                    else:
                        h = mu * N / (T * T * T) * u_k * u_j
                        if j == k:
                            h = h + mu * mu - mu * N / T
                    d.efc_hcone[w, r0 + k, j] = Dm * s_k * s_j * h
        else:
            for k in range(n):
                for j in range(n):
                    d.efc_hcone[w, r0 + k, j] = scalar(0.0)
        d.efc_cost[w, r0] = cost

    @wp.func
    def cone_quad(m: Model, d: Data, w: int, r0: int):
        """Once per search direction: the contact's terms as polynomials in alpha, from jar and
        jv = J search (engine_solver.c PrimalPrepare). efc_quad[r0]: 1/2 sum D_j jar_j^2,
        sum D_j jar_j jv_j, 1/2 sum D_j jv_j^2 (the bottom zone's cost), U_0 = mu jar_0;
        efc_quad[r0 + 1]: V_0 = mu jv_0, U.U, U.V, V.V (the friction rows, U_j = friction_j jar_j,
        V_j = friction_j jv_j); efc_quad[r0 + 2, 0]: D_m. Zeroes the line-search terms of the
        contact's other rows."""
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r0]]]
        mu = d.efc_mu[w, r0]
        jar0 = d.efc_jar[w, r0]
        jv0 = d.efc_jv[w, r0]
        D0 = d.efc_D[w, r0]
        dj0 = D0 * jar0
        a = jar0 * dj0
        b = jv0 * dj0
        c = jv0 * D0 * jv0
        UU = scalar(0.0)
        UV = scalar(0.0)
        VV = scalar(0.0)
        for j in range(1, n):
            r = r0 + j
            jar = d.efc_jar[w, r]
            jv = d.efc_jv[w, r]
            D = d.efc_D[w, r]
            dj = D * jar
            a = a + jar * dj
            b = b + jv * dj
            c = c + jv * D * jv
            fr = d.efc_mu[w, r]
            u = jar * fr
            v = jv * fr
            UU = UU + u * u
            UV = UV + u * v
            VV = VV + v * v
            d.efc_ls1[w, r] = scalar(0.0)
            d.efc_ls2[w, r] = scalar(0.0)
            d.efc_ls3[w, r] = scalar(0.0)
        d.efc_quad[w, r0, 0] = scalar(0.5) * a
        d.efc_quad[w, r0, 1] = b
        d.efc_quad[w, r0, 2] = scalar(0.5) * c
        d.efc_quad[w, r0, 3] = jar0 * mu
        d.efc_quad[w, r0 + 1, 0] = jv0 * mu
        d.efc_quad[w, r0 + 1, 1] = UU
        d.efc_quad[w, r0 + 1, 2] = UV
        d.efc_quad[w, r0 + 1, 3] = VV
        d.efc_quad[w, r0 + 2, 0] = D0 / ((mu * mu) * (scalar(1.0) + (mu * mu)))

    @wp.func
    def line_zone(mu: scalar, N: scalar, Tsqr: scalar):
        """The line search's zone of a contact (1 top, 2 bottom, 3 middle) and T, from N and T^2
        (engine_solver.c ellipticCostDif, PrimalEval)."""
        zone = int(1)
        T = scalar(0.0)
        if Tsqr <= scalar(0.0):
            if N < scalar(0.0):
                zone = 2
        else:
            T = wp.sqrt(Tsqr)
            if N >= mu * T:
                zone = 1
            elif mu * N + T <= scalar(0.0):
                zone = 2
            else:
                zone = 3
        return zone, T

    @wp.func
    def cone_line(m: Model, d: Data, w: int, r0: int, alpha: scalar):
        """The contact's terms of the line search at jar + alpha jv, from `cone_quad`, on row r0:
        efc_ls1 its cost at alpha less its cost at 0, efc_ls2 and efc_ls3 the first and second
        derivative along jv (engine_solver.c ellipticCostDif and PrimalEval: the zone at 0 and at
        alpha; within the middle zone a rationalized difference that avoids cancellation)."""
        mu = d.efc_mu[w, r0]
        q0 = d.efc_quad[w, r0, 0]
        q1 = d.efc_quad[w, r0, 1]
        q2 = d.efc_quad[w, r0, 2]
        U0 = d.efc_quad[w, r0, 3]
        V0 = d.efc_quad[w, r0 + 1, 0]
        UU = d.efc_quad[w, r0 + 1, 1]
        UV = d.efc_quad[w, r0 + 1, 2]
        VV = d.efc_quad[w, r0 + 1, 3]
        Dm = d.efc_quad[w, r0 + 2, 0]
        zone0, T0 = line_zone(mu, U0, UU)
        N = U0 + alpha * V0
        zone, T = line_zone(mu, N, UU + alpha * (scalar(2.0) * UV + alpha * VV))
        cost = scalar(0.0)
        if zone0 == 2 and zone == 2:
            cost = alpha * alpha * q2 + alpha * q1
        elif zone0 == 3 and zone == 3:
            T_delta = alpha * (scalar(2.0) * UV + alpha * VV) / (T + T0)
            r_delta = alpha * V0 - mu * T_delta
            cost = scalar(0.5) * Dm * r_delta * (scalar(2.0) * (U0 - mu * T0) + r_delta)
        elif zone0 == 3 and zone == 2:
            boundary0 = mu * U0 + T0
            cost = alpha * (alpha * q2 + q1) + scalar(0.5) * Dm * boundary0 * boundary0
        elif zone0 == 2 and zone == 3:
            boundary = mu * N + T
            cost = alpha * (alpha * q2 + q1) - scalar(0.5) * Dm * boundary * boundary
        elif zone0 == 1 and zone == 2:
            cost = alpha * alpha * q2 + alpha * q1 + q0
        elif zone0 == 1 and zone == 3:
            rr = N - mu * T
            cost = scalar(0.5) * Dm * rr * rr
        elif zone0 == 3 and zone == 1:
            r0c = U0 - mu * T0
            cost = -scalar(0.5) * Dm * r0c * r0c
        elif zone0 == 2 and zone == 1:
            cost = -q0
        d1 = scalar(0.0)
        d2 = scalar(0.0)
        if zone == 2:
            d1 = scalar(2.0) * alpha * q2 + q1
            d2 = scalar(2.0) * q2
        elif zone == 3:
            T1 = (UV + alpha * VV) / T
            T2 = VV / T - (UV + alpha * VV) * T1 / (T * T)
            dN = V0 - mu * T1
            d1 = Dm * (N - mu * T) * dN
            d2 = Dm * (dN * dN + (N - mu * T) * (-mu * T2))
        d.efc_ls1[w, r0] = cost
        d.efc_ls2[w, r0] = d1
        d.efc_ls3[w, r0] = d2

    @wp.func
    def cone_cost(m: Model, d: Data, w: int, r0: int):
        """The contact's cost at jar in efc_ls1 of row r0 (0 on its other rows)."""
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r0]]]
        mu = d.efc_mu[w, r0]
        N = mu * d.efc_jar[w, r0]
        a = d.efc_D[w, r0] * d.efc_jar[w, r0] * d.efc_jar[w, r0]
        T2 = scalar(0.0)
        for j in range(1, n):
            jar = d.efc_jar[w, r0 + j]
            u = d.efc_mu[w, r0 + j] * jar
            T2 = T2 + u * u
            a = a + d.efc_D[w, r0 + j] * jar * jar
            d.efc_ls1[w, r0 + j] = scalar(0.0)
        T = wp.sqrt(T2)
        zone = cone_zone(mu, N, T)
        cost = scalar(0.0)
        if zone == 2:
            cost = scalar(0.5) * a
        elif zone == 1:
            NmT = N - mu * T
            cost = scalar(0.5) * d.efc_D[w, r0] / (mu * mu * (scalar(1.0) + mu * mu)) * NmT * NmT
        d.efc_ls1[w, r0] = cost

    @wp.func
    def cone_middle(m: Model, d: Data, w: int, r: int):
        """Row r belongs to a contact in the elliptic cone's middle zone (a dense cone Hessian), as
        the last `cone` left it.

        Model: efc_type, efc_sub. Data in: efc_hcone."""
        middle = False
        if d.efc_type[w, r] == ConstraintType.CONTACT_ELLIPTIC:
            middle = d.efc_hcone[w, r - d.efc_sub[w, r], 0] != scalar(0.0)
        return middle

    return SimpleNamespace(cone=cone, cone_quad=cone_quad, cone_line=cone_line, cone_cost=cone_cost,
                           cone_middle=cone_middle)


@functools.cache
def dense_cholesky(scalar, lanes: bool = False):
    """(cholesky_factor, cholesky_solve): dense Cholesky of a per-world [nv, nv] matrix, in
    place, for Hessians whose sparsity is not that of M (and the solver's implicit adjoint);
    world functions (`lanes`: for a block of threads per world)."""
    sync = block_sync if lanes else no_sync

    @wp.func
    def cholesky_factor(H: wp.array3d(dtype=scalar), nv: int, w: int, lane: int, nlanes: int):
        """H[w] = L L' in place: L in the lower triangle (the upper one is not read); column j's
        entries below the diagonal are shared among the lanes."""
        j = int(0)
        while j < nv:
            if lane == 0:
                s = H[w, j, j]
                k = int(0)
                while k < j:
                    s = s - H[w, j, k] * H[w, j, k]
                    k = k + 1
                H[w, j, j] = wp.sqrt(wp.max(s, scalar(MINVAL)))
            sync()
            ljj = H[w, j, j]
            i = int(j + 1 + lane)
            while i < nv:
                s2 = H[w, i, j]
                k = int(0)
                while k < j:
                    s2 = s2 - H[w, i, k] * H[w, j, k]
                    k = k + 1
                H[w, i, j] = s2 / ljj
                i = i + nlanes
            sync()
            j = j + 1

    @wp.func
    def cholesky_solve(L: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar), nv: int, w: int, lane: int,
                       nlanes: int):
        """x[w] <- (L L')^-1 x[w] in place, L from `cholesky_factor` (lane 0; each step depends on
        the last)."""
        if lane == 0:
            i = int(0)
            while i < nv:
                s = x[w, i]
                k = int(0)
                while k < i:
                    s = s - L[w, i, k] * x[w, k]
                    k = k + 1
                x[w, i] = s / L[w, i, i]
                i = i + 1
            ii = int(0)
            while ii < nv:
                i = nv - 1 - ii
                s = x[w, i]
                k = int(i + 1)
                while k < nv:
                    s = s - L[w, k, i] * x[w, k]
                    k = k + 1
                x[w, i] = s / L[w, i, i]
                ii = ii + 1
        sync()

    return cholesky_factor, cholesky_solve


@functools.cache
def build(scalar, lanes: bool = False):
    """`solve(m, d, w, lane, nlanes)`, the constraint solver as a world function (`lanes`: for a
    block of threads per world, else for one thread)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    sync = block_sync if lanes else no_sync
    row_dot = constraint.build(scalar).row_dot
    ld = factor_m.build(scalar, lanes)
    factor_ld, solve_ld, mul_m = ld.factor_ld, ld.solve_ld, ld.mul_m
    cholesky_factor, cholesky_solve = dense_cholesky(scalar, lanes)
    ec = elliptic_cone(scalar)
    cone, cone_quad, cone_line, cone_cost = ec.cone, ec.cone_quad, ec.cone_line, ec.cone_cost
    cone_middle = ec.cone_middle

    @wp.func
    def cone_pass(m: Model, d: Data, w: int, lane: int, nlanes: int, alpha: scalar, mode: int):
        """`cone` of every active elliptic contact (at its first row), after the other rows;
        nothing in the pyramidal cone."""
        if m.cone_elliptic != 0:
            sync()
            nactive = d.efc_nactive[w]
            a = int(lane)
            while a < nactive:
                r = d.efc_list[w, a]
                if d.efc_type[w, r] == ConstraintType.CONTACT_ELLIPTIC and d.efc_sub[w, r] == 0:
                    if mode == CONE_EVALUATE:
                        cone(m, d, w, r)
                    elif mode == CONE_QUAD:
                        cone_quad(m, d, w, r)
                    elif mode == CONE_LINE:
                        cone_line(m, d, w, r, alpha)
                    else:
                        cone_cost(m, d, w, r)
                a = a + nlanes

    @wp.func
    def row_cost(m: Model, d: Data, w: int, r: int, jar: scalar):
        """Cost, first and second derivative of row r's penalty at jar; also its force."""
        D = d.efc_D[w, r]
        cost = scalar(0.0)
        ds = scalar(0.0)
        dds = scalar(0.0)
        if d.efc_type[w, r] == ConstraintType.FRICTION_DOF or d.efc_type[w, r] == ConstraintType.FRICTION_TENDON:
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
        elif jar < scalar(0.0) or d.efc_type[w, r] == ConstraintType.EQUALITY:
            # equality rows are bilateral: always quadratic
            cost = scalar(0.5) * D * jar * jar
            ds = D * jar
            dds = D
        return cost, ds, dds

    @wp.func
    def evaluate(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """At x = d.qacc: jar, forces, gradient, and the cost in solver_scalar[w, COST]."""
        nv = m.nv
        nactive = d.efc_nactive[w]
        i = int(lane)
        while i < nv:
            d.solver_res[w, i] = d.qacc[w, i] - d.qacc_smooth[w, i]
            i = i + nlanes
        sync()
        mul_m(m, d, d.solver_res, d.solver_Mres, w, lane, nlanes)
        a = int(lane)
        while a < nactive:
            r = d.efc_list[w, a]
            cs = d.efc_cols[w, r]
            jar = -d.efc_aref[w, r]
            end1 = m.efc_nnz[cs]
            k = int(0)
            while k < end1:
                j = m.efc_colind[cs, k]
                jar = jar + d.efc_J[w, r, j] * d.qacc[w, j]
                k = k + 1
            d.efc_jar[w, r] = jar
            if d.efc_type[w, r] != ConstraintType.CONTACT_ELLIPTIC:
                c, ds, dds = row_cost(m, d, w, r, jar)
                d.efc_cost[w, r] = c
                d.efc_force[w, r] = -ds
                d.efc_dds[w, r] = dds
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, scalar(0.0), CONE_EVALUATE)
        sync()
        # gradient M res + J' ds: each dof adds the rows in ascending order (a thread per world
        # scatters row by row, a block gathers per dof: the same sum, term by term)
        if wp.static(lanes):
            i = int(lane)
            while i < nv:
                d.solver_grad[w, i] = d.solver_Mres[w, i]
                a = int(0)
                while a < nactive:
                    r = d.efc_list[w, a]
                    cs = d.efc_cols[w, r]
                    ds = -d.efc_force[w, r]
                    if ds != scalar(0.0) and m.efc_colmask[cs, i] != 0:
                        d.solver_grad[w, i] = d.solver_grad[w, i] + d.efc_J[w, r, i] * ds
                    a = a + 1
                i = i + nlanes
        else:
            i = int(0)
            while i < nv:
                d.solver_grad[w, i] = d.solver_Mres[w, i]
                i = i + 1
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                cs = d.efc_cols[w, r]
                ds = -d.efc_force[w, r]
                if ds != scalar(0.0):
                    end2 = m.efc_nnz[cs]
                    k = int(0)
                    while k < end2:
                        j = m.efc_colind[cs, k]
                        d.solver_grad[w, j] = d.solver_grad[w, j] + d.efc_J[w, r, j] * ds
                        k = k + 1
                a = a + 1
        if lane == 0:
            cost = scalar(0.0)
            i = int(0)
            while i < nv:
                cost = cost + scalar(0.5) * d.solver_res[w, i] * d.solver_Mres[w, i]
                i = i + 1
            a = int(0)
            while a < nactive:
                cost = cost + d.efc_cost[w, d.efc_list[w, a]]
                a = a + 1
            d.solver_scalar[w, COST] = cost
        sync()

    @wp.func
    def cone_hessian_row(m: Model, d: Data, w: int, r: int, i: int):
        """Adds J_ri H_rs J_sj to solver_H[i, j <= i] for the rows s of r's contact, in order."""
        ji = d.efc_J[w, r, i]
        if ji != scalar(0.0):
            r0 = r - d.efc_sub[w, r]
            n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r]]]
            cs = d.efc_cols[w, r]  # a contact's rows share their columns
            e = int(0)
            while e < n:
                h = ji * d.efc_hcone[w, r, e]
                if h != scalar(0.0):
                    rs = r0 + e
                    end = m.efc_nnz[cs]
                    kj = int(0)
                    while kj < end:
                        j = m.efc_colind[cs, kj]
                        if j <= i:
                            d.solver_H[w, i, j] = d.solver_H[w, i, j] + h * d.efc_J[w, rs, j]
                        kj = kj + 1
                e = e + 1

    @wp.func
    def newton_direction(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """solver_search = -(M + J' D_quadratic J)^-1 grad, at the jar of the last `evaluate`.

        When every row in its quadratic zone acts on one chain of ancestor dofs (contacts with
        a static body, limits, friction loss), the Hessian has the sparsity of M and is
        factorized like M (sparse L'DL from the leaves, no fill-in); otherwise by dense
        Cholesky. Each lane assembles whole rows of the Hessian, adding the rows' J' D J terms
        in ascending row order."""
        nv = m.nv
        nactive = d.efc_nactive[w]
        if lane == 0:
            tree = int(1)
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                cs = d.efc_cols[w, r]
                if m.efc_chain[cs] == 0 and (d.efc_dds[w, r] != scalar(0.0) or cone_middle(m, d, w, r)):
                    tree = 0
                a = a + 1
            d.solver_flag[w, FLAG_TREE] = tree
        sync()
        tree = d.solver_flag[w, FLAG_TREE]
        i = int(lane)
        while i < nv:
            if tree == 1:
                d.solver_H[w, i, i] = d.qM[w, i, i]
                j = m.dof_parentid[i]
                while j >= 0:
                    d.solver_H[w, i, j] = d.qM[w, i, j]
                    j = m.dof_parentid[j]
            else:
                end2 = i + 1
                j = int(0)
                while j < end2:
                    d.solver_H[w, i, j] = d.qM[w, i, j]
                    j = j + 1
            # J' D J over the rows in their quadratic zone, only in the rows' non-zero columns
            if wp.static(lanes):
                a = int(0)
                while a < nactive:
                    r = d.efc_list[w, a]
                    cs = d.efc_cols[w, r]
                    dds = d.efc_dds[w, r]
                    if dds != scalar(0.0) and m.efc_colmask[cs, i] != 0:
                        ji = d.efc_J[w, r, i] * dds
                        if ji != scalar(0.0):
                            end3 = m.efc_nnz[cs]
                            kj = int(0)
                            while kj < end3:
                                j = m.efc_colind[cs, kj]
                                if j <= i:
                                    d.solver_H[w, i, j] = d.solver_H[w, i, j] + ji * d.efc_J[w, r, j]
                                kj = kj + 1
                    a = a + 1
                # then J_r' H_rs J_s of the contacts in the elliptic cone's middle zone
                if m.cone_elliptic != 0:
                    a = int(0)
                    while a < nactive:
                        r = d.efc_list[w, a]
                        cs = d.efc_cols[w, r]
                        if m.efc_colmask[cs, i] != 0 and cone_middle(m, d, w, r):
                            cone_hessian_row(m, d, w, r, i)
                        a = a + 1
            i = i + nlanes
        if wp.static(not lanes):
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                cs = d.efc_cols[w, r]
                dds = d.efc_dds[w, r]
                if dds != scalar(0.0):
                    end5 = m.efc_nnz[cs]
                    ki = int(0)
                    while ki < end5:
                        i = m.efc_colind[cs, ki]
                        ji = d.efc_J[w, r, i] * dds
                        if ji != scalar(0.0):
                            end4 = ki + 1
                            kj = int(0)
                            while kj < end4:
                                j = m.efc_colind[cs, kj]
                                d.solver_H[w, i, j] = d.solver_H[w, i, j] + ji * d.efc_J[w, r, j]
                                kj = kj + 1
                        ki = ki + 1
                a = a + 1
            if m.cone_elliptic != 0:
                a = int(0)
                while a < nactive:
                    r = d.efc_list[w, a]
                    cs = d.efc_cols[w, r]
                    if cone_middle(m, d, w, r):
                        end6 = m.efc_nnz[cs]
                        ki = int(0)
                        while ki < end6:
                            cone_hessian_row(m, d, w, r, m.efc_colind[cs, ki])
                            ki = ki + 1
                    a = a + 1
        sync()
        if tree == 1:
            factor_ld(m, d.solver_H, w, lane, nlanes)
        else:
            cholesky_factor(d.solver_H, nv, w, lane, nlanes)
        i = int(lane)
        while i < nv:
            d.solver_search[w, i] = -d.solver_grad[w, i]
            i = i + nlanes
        sync()
        if tree == 1:
            solve_ld(m, d.solver_H, d.solver_search, w, lane, nlanes)
        else:
            cholesky_solve(d.solver_H, d.solver_search, nv, w, lane, nlanes)

    @wp.func
    def dof_island(m: Model, d: Data, w: int, i: int):
        """The island of dof i (-1: no constraint row reaches its tree; 0 without islands), as
        `islands` left it."""
        return d.solver_flag[w, UF + 2 * m.nbody + i]

    @wp.func
    def row_island(m: Model, d: Data, w: int, r: int):
        """The island of active constraint row r (that of its first column's tree), as `islands`
        left it: its row's entry is 2 island + (1 where the row's line-search terms are a
        polynomial's coefficients, `line_eval`)."""
        return d.solver_flag[w, UF + 2 * m.nbody + m.nv + r] >> 1

    @wp.func
    def tree_root(d: Data, w: int, t: int):
        """The root of tree t (a tree is named by its root body) in the union-find forest."""
        root = t
        while d.solver_flag[w, UF + 2 * root] != root:
            root = d.solver_flag[w, UF + 2 * root]
        return root

    @wp.func
    def islands(m: Model, d: Data, w: int, lane: int):
        """Lane 0: the islands of the world's rows (mj_island, engine_island.c): the trees that the
        active rows reach, joined when a row reaches several (union-find, the larger root linked
        under the smaller), numbered in increasing order of their smallest tree. Without islands,
        one island of every dof and row. Data out: solver_flag[w, FLAG_NISLAND], solver_flag[w, UF:]
        (the trees', then each dof's and each active row's island: `dof_island`, `row_island`)."""
        if lane == 0:
            n = int(1)
            if m.enable_island != 0:
                b = int(0)
                while b < m.nbody:
                    d.solver_flag[w, UF + 2 * b] = -1
                    b = b + 1
                nactive = d.efc_nactive[w]
                a = int(0)
                while a < nactive:
                    cs = d.efc_cols[w, d.efc_list[w, a]]
                    t1 = int(-1)
                    k = int(0)
                    while k < m.efc_nnz[cs]:
                        t = m.body_rootid[m.dof_bodyid[m.efc_colind[cs, k]]]
                        if d.solver_flag[w, UF + 2 * t] < 0:
                            d.solver_flag[w, UF + 2 * t] = t
                        if t1 < 0:
                            t1 = t
                        elif t != t1:
                            root1 = tree_root(d, w, t1)
                            root2 = tree_root(d, w, t)
                            if root1 < root2:
                                d.solver_flag[w, UF + 2 * root2] = root1
                            elif root2 < root1:
                                d.solver_flag[w, UF + 2 * root1] = root2
                        k = k + 1
                    a = a + 1
                n = int(0)
                b = int(0)
                while b < m.nbody:
                    parent = d.solver_flag[w, UF + 2 * b]
                    island = int(-1)
                    if parent == b:
                        island = n
                        n = n + 1
                    elif parent >= 0:
                        # the root is a smaller body, numbered already
                        island = d.solver_flag[w, UF + 1 + 2 * tree_root(d, w, b)]
                    d.solver_flag[w, UF + 1 + 2 * b] = island
                    b = b + 1
            d.solver_flag[w, FLAG_NISLAND] = n
            # each dof's island and each active row's (that of its first column)
            dofs = UF + 2 * m.nbody
            i = int(0)
            while i < m.nv:
                island = int(0)
                if m.enable_island != 0:
                    island = d.solver_flag[w, UF + 1 + 2 * m.body_rootid[m.dof_bodyid[i]]]
                d.solver_flag[w, dofs + i] = island
                i = i + 1
            nrows = d.efc_nactive[w]
            a = int(0)
            while a < nrows:
                r = d.efc_list[w, a]
                d.solver_flag[w, dofs + m.nv + r] = 2 * d.solver_flag[w, dofs + m.efc_colind[d.efc_cols[w, r], 0]]
                a = a + 1
        sync()

    @wp.func
    def island_update(m: Model, d: Data, w: int, lane: int, first: int):
        """Lane 0, after `newton_direction`: each island's gradient and Newton decrement, and its
        stopping tests (engine_solver.c mj_solPrimal). `first`: at the starting point, where an
        island is done when both are below the tolerance, and the islands' scales are set (1 /
        the sum of the island's diagonal of M; without islands 1 / (meaninertia max(1, nv)));
        else each island that stepped counts an iteration and is done when its line search's
        scaled improvement is in (0, tolerance), or its scaled gradient or decrement is below
        the tolerance. Returns, for every lane, 1 when every island is done."""
        if lane == 0:
            nisland = d.solver_flag[w, FLAG_NISLAND]
            k = int(0)
            while k < nisland:
                base = SOLVER_FIXED + SOLVER_ISLAND * k
                d.solver_scalar[w, base + ISL_GRAD2] = scalar(0.0)
                d.solver_scalar[w, base + ISL_GRADSEARCH] = scalar(0.0)
                if first != 0:
                    d.solver_scalar[w, base + ISL_SCALE] = scalar(0.0)
                k = k + 1
            i = int(0)
            while i < m.nv:
                k = dof_island(m, d, w, i)
                if k >= 0:
                    base = SOLVER_FIXED + SOLVER_ISLAND * k
                    g = d.solver_grad[w, i]
                    d.solver_scalar[w, base + ISL_GRAD2] = d.solver_scalar[w, base + ISL_GRAD2] + g * g
                    d.solver_scalar[w, base + ISL_GRADSEARCH] = (d.solver_scalar[w, base + ISL_GRADSEARCH]
                                                                 + g * d.solver_search[w, i])
                    if first != 0:
                        d.solver_scalar[w, base + ISL_SCALE] = d.solver_scalar[w, base + ISL_SCALE] + d.qM[w, i, i]
                i = i + 1
            tol = m.solver_tolerance
            all_done = scalar(1.0)
            k = int(0)
            while k < nisland:
                base = SOLVER_FIXED + SOLVER_ISLAND * k
                if first != 0:
                    scale0 = m.solver_scale
                    if m.enable_island != 0:
                        scale0 = scalar(1.0) / d.solver_scalar[w, base + ISL_SCALE]
                    d.solver_scalar[w, base + ISL_SCALE] = scale0
                scale = d.solver_scalar[w, base + ISL_SCALE]
                gradient = scale * wp.sqrt(d.solver_scalar[w, base + ISL_GRAD2])
                # 1/2 grad' H^-1 grad, with search = -H^-1 grad
                decrement = wp.max(scalar(0.0), scalar(0.5) * scale * (-d.solver_scalar[w, base + ISL_GRADSEARCH]))
                if first != 0:
                    done = scalar(0.0)
                    if gradient < tol and decrement < tol:
                        done = scalar(1.0)
                    d.solver_scalar[w, base + ISL_DONE] = done
                    d.solver_scalar[w, base + ISL_ITER] = scalar(0.0)
                elif d.solver_scalar[w, base + ISL_DONE] == scalar(0.0):
                    d.solver_scalar[w, base + ISL_ITER] = d.solver_scalar[w, base + ISL_ITER] + scalar(1.0)
                    improvement = scale * d.solver_scalar[w, base + ISL_IMPROVE]
                    if ((improvement > scalar(0.0) and improvement < tol) or gradient < tol
                            or decrement < tol):
                        d.solver_scalar[w, base + ISL_DONE] = scalar(1.0)
                if d.solver_scalar[w, base + ISL_DONE] == scalar(0.0):
                    all_done = scalar(0.0)
                k = k + 1
            d.solver_scalar[w, ALL_DONE] = all_done
        sync()
        return d.solver_scalar[w, ALL_DONE] != scalar(0.0)

    @wp.func
    def line_prepare(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """Once per search direction, for every island's line search: M search, jv = J search, the
        elliptic contacts' polynomials, and per island search' search and the Gauss cost's
        polynomial (engine_solver.c PrimalPrepare's quadGauss); the first island's search begins."""
        mul_m(m, d, d.solver_search, d.solver_Msearch, w, lane, nlanes)
        nactive = d.efc_nactive[w]
        a = int(lane)
        while a < nactive:
            r = d.efc_list[w, a]
            d.efc_jv[w, r] = row_dot(m, d, w, r, d.solver_search)
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, scalar(0.0), CONE_QUAD)
        sync()
        if lane == 0:
            nisland = d.solver_flag[w, FLAG_NISLAND]
            k = int(0)
            while k < nisland:
                base = SOLVER_FIXED + SOLVER_ISLAND * k
                d.solver_scalar[w, base + ISL_SEARCH2] = scalar(0.0)
                d.solver_scalar[w, base + ISL_GAUSS1] = scalar(0.0)
                d.solver_scalar[w, base + ISL_GAUSS2] = scalar(0.0)
                d.solver_scalar[w, base + ISL_ALPHA] = scalar(0.0)
                k = k + 1
            i = int(0)
            while i < m.nv:
                k = dof_island(m, d, w, i)
                if k >= 0:
                    base = SOLVER_FIXED + SOLVER_ISLAND * k
                    s = d.solver_search[w, i]
                    d.solver_scalar[w, base + ISL_SEARCH2] = d.solver_scalar[w, base + ISL_SEARCH2] + s * s
                    d.solver_scalar[w, base + ISL_GAUSS1] = (d.solver_scalar[w, base + ISL_GAUSS1]
                                                             + s * d.solver_Mres[w, i])
                    d.solver_scalar[w, base + ISL_GAUSS2] = (d.solver_scalar[w, base + ISL_GAUSS2]
                                                             + s * d.solver_Msearch[w, i])
                i = i + 1
            k = int(0)
            while k < nisland:
                base = SOLVER_FIXED + SOLVER_ISLAND * k
                d.solver_scalar[w, base + ISL_GAUSS2] = scalar(0.5) * d.solver_scalar[w, base + ISL_GAUSS2]
                k = k + 1
            line_begin(m, d, w, 0)
        sync()

    @wp.func
    def line_row(m: Model, d: Data, w: int, r: int, alpha: scalar):
        """Row r's terms of the line search at alpha (not in the elliptic cone), and whether they
        are a polynomial's coefficients (MuJoCo's quadTotal: an equality row, or a limit or
        pyramid row active at alpha: 1/2 D jar^2 less its cost at 0, D jar jv, 1/2 D jv^2) or the
        cost difference and derivatives themselves (friction loss, an inactive row)
        (engine_solver.c PrimalEval)."""
        jar = d.efc_jar[w, r]
        jv = d.efc_jv[w, r]
        D = d.efc_D[w, r]
        x = jar + alpha * jv
        t = d.efc_type[w, r]
        c0 = scalar(0.0)
        c1 = scalar(0.0)
        c2 = scalar(0.0)
        poly = int(1)
        if t == ConstraintType.FRICTION_DOF or t == ConstraintType.FRICTION_TENDON:
            poly = 0
            f = d.efc_frictionloss[w, r]
            Rf = d.efc_R[w, r] * f
            # the Huber cost at x less that at jar (frictionCostDif)
            if -Rf < x and x < Rf:
                c1 = D * x * jv
                c2 = D * jv * jv
            elif x <= -Rf:
                c1 = -f * jv
            else:
                c1 = f * jv
            if -Rf < jar and jar < Rf and -Rf < x and x < Rf:
                c0 = scalar(0.5) * D * (x - jar) * (x + jar)
            elif jar <= -Rf and x <= -Rf:
                c0 = f * (jar - x)
            elif jar >= Rf and x >= Rf:
                c0 = f * (x - jar)
            else:
                cx = f * (-scalar(0.5) * Rf + x)
                if -Rf < x and x < Rf:
                    cx = scalar(0.5) * D * x * x
                elif x <= -Rf:
                    cx = f * (-scalar(0.5) * Rf - x)
                cj = f * (-scalar(0.5) * Rf + jar)
                if -Rf < jar and jar < Rf:
                    cj = scalar(0.5) * D * jar * jar
                elif jar <= -Rf:
                    cj = f * (-scalar(0.5) * Rf - jar)
                c0 = cx - cj
        else:
            dj = D * jar
            q0 = scalar(0.5) * (jar * dj)
            c1 = jv * dj
            c2 = scalar(0.5) * (jv * D * jv)
            if t != ConstraintType.EQUALITY:
                cost0 = scalar(0.0)
                if jar < scalar(0.0):
                    cost0 = q0
                if x < scalar(0.0):
                    c0 = q0 - cost0
                else:
                    poly = 0
                    c0 = -cost0
                    c1 = scalar(0.0)
                    c2 = scalar(0.0)
        return c0, c1, c2, poly

    @wp.func
    def line_eval(m: Model, d: Data, w: int, lane: int, nlanes: int, island: int, alpha: scalar):
        """The island's cost at qacc + alpha search less its cost at qacc, and the cost's first and
        second derivative along the search (engine_solver.c PrimalEval), for every lane. Each
        lane evaluates some rows; lane 0 adds them in row order as MuJoCo does: the polynomial
        terms (the Gauss cost's first) apart, evaluated at alpha at the end."""
        nactive = d.efc_nactive[w]
        rows = UF + 2 * m.nbody + m.nv
        a = int(lane)
        while a < nactive:
            r = d.efc_list[w, a]
            if d.efc_type[w, r] != ConstraintType.CONTACT_ELLIPTIC and row_island(m, d, w, r) == island:
                c0, c1, c2, poly = line_row(m, d, w, r, alpha)
                d.efc_ls1[w, r] = c0
                d.efc_ls2[w, r] = c1
                d.efc_ls3[w, r] = c2
                d.solver_flag[w, rows + r] = 2 * island + poly
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, alpha, CONE_LINE)
        sync()
        if lane == 0:
            base = SOLVER_FIXED + SOLVER_ISLAND * island
            cost = scalar(0.0)
            d1 = scalar(0.0)
            d2 = scalar(0.0)
            q0 = scalar(0.0)
            q1 = d.solver_scalar[w, base + ISL_GAUSS1]
            q2 = d.solver_scalar[w, base + ISL_GAUSS2]
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                entry = d.solver_flag[w, rows + r]
                if entry == 2 * island + 1:
                    q0 = q0 + d.efc_ls1[w, r]
                    q1 = q1 + d.efc_ls2[w, r]
                    q2 = q2 + d.efc_ls3[w, r]
                elif entry == 2 * island:
                    cost = cost + d.efc_ls1[w, r]
                    d1 = d1 + d.efc_ls2[w, r]
                    d2 = d2 + d.efc_ls3[w, r]
                a = a + 1
            cost = cost + (alpha * alpha * q2 + alpha * q1 + q0)
            d1 = d1 + (scalar(2.0) * alpha * q2 + q1)
            d2 = d2 + scalar(2.0) * q2
            if d2 <= scalar(0.0):
                d2 = scalar(MINVAL)  # not convex: should not occur
            d.solver_scalar[w, LS_COST] = cost
            d.solver_scalar[w, LS_D1] = d1
            d.solver_scalar[w, LS_D2] = d2
        sync()
        return d.solver_scalar[w, LS_COST], d.solver_scalar[w, LS_D1], d.solver_scalar[w, LS_D2]

    @wp.func
    def point_copy(d: Data, w: int, dst: int, src: int):
        for j in range(4):
            d.solver_scalar[w, dst + j] = d.solver_scalar[w, src + j]

    @wp.func
    def newton_point(d: Data, w: int, p: int):
        """The Newton step's alpha from point p: alpha - d1 / d2."""
        return d.solver_scalar[w, p + PT_ALPHA] - d.solver_scalar[w, p + PT_D1] / d.solver_scalar[w, p + PT_D2]

    @wp.func
    def update_bracket(d: Data, w: int, p: int):
        """engine_solver.c updateBracket: point p replaced by each of the candidates (p1next,
        p2next, pmid) whose first derivative has p's sign and is smaller in magnitude; whether
        any was."""
        flag = int(0)
        for j in range(3):
            c = P1NEXT
            if j == 1:
                c = P2NEXT
            elif j == 2:
                c = PMID
            pd = d.solver_scalar[w, p + PT_D1]
            cd = d.solver_scalar[w, c + PT_D1]
            if (pd < scalar(0.0) and cd < scalar(0.0) and pd < cd) or (pd > scalar(0.0) and cd > scalar(0.0)
                                                                        and pd > cd):
                point_copy(d, w, p, c)
                flag = 1
        return flag

    @wp.func
    def line_go(d: Data, w: int, state: int, target: int, alpha: scalar):
        """The line search's next evaluation: point `target` at alpha, in `state`."""
        d.solver_flag[w, FLAG_STATE] = state
        d.solver_flag[w, FLAG_TARGET] = target
        d.solver_scalar[w, LS_ALPHA] = alpha

    @wp.func
    def line_begin(m: Model, d: Data, w: int, first: int):
        """Lane 0: the line search of the first island from `first` on that is not done (one whose
        search direction is too short to search is done: alpha 0, as PrimalSearch); none left:
        solver_flag[FLAG_STATE] = -1."""
        nisland = d.solver_flag[w, FLAG_NISLAND]
        k = int(first)
        found = int(0)
        while k < nisland and found == 0:
            base = SOLVER_FIXED + SOLVER_ISLAND * k
            if d.solver_scalar[w, base + ISL_DONE] == scalar(0.0):
                snorm = wp.sqrt(d.solver_scalar[w, base + ISL_SEARCH2])
                if snorm >= scalar(MINVAL):
                    found = 1
                    d.solver_scalar[w, LS_GTOL] = (m.solver_tolerance * m.solver_ls_tolerance * snorm
                                                   / d.solver_scalar[w, base + ISL_SCALE])
                    d.solver_flag[w, FLAG_NEV] = 0
                    line_go(d, w, 0, P0, scalar(0.0))
                else:
                    d.solver_scalar[w, base + ISL_DONE] = scalar(1.0)
                    k = k + 1
            else:
                k = k + 1
        d.solver_flag[w, FLAG_ISLAND] = k
        if found == 0:
            d.solver_flag[w, FLAG_STATE] = -1

    @wp.func
    def line_done(m: Model, d: Data, w: int, target: int):
        """The island's line search ends at point `target` (-1: alpha 0, no improvement, and the
        island is done): its alpha and improvement (ISL_ALPHA, ISL_IMPROVE); then the next
        island's search begins."""
        k = d.solver_flag[w, FLAG_ISLAND]
        base = SOLVER_FIXED + SOLVER_ISLAND * k
        alpha = scalar(0.0)
        improvement = scalar(0.0)
        if target >= 0:
            alpha = d.solver_scalar[w, target + PT_ALPHA]
            improvement = -d.solver_scalar[w, target + PT_COST]
        d.solver_scalar[w, base + ISL_ALPHA] = alpha
        d.solver_scalar[w, base + ISL_IMPROVE] = improvement
        if alpha == scalar(0.0):
            d.solver_scalar[w, base + ISL_DONE] = scalar(1.0)  # no improvement
        line_begin(m, d, w, k + 1)

    @wp.func
    def line_step(m: Model, d: Data, w: int):
        """Lane 0: one step of MuJoCo's line search (engine_solver.c PrimalSearch) after the
        evaluation at solver_scalar[LS_ALPHA], as a state machine (solver_flag[FLAG_STATE]: the
        point just evaluated; 0 p0, 1 the first Newton step p1, 2 p1 of the one-sided search, 3
        p1next (the bracket's start), 4 pmid, 5 p1next after a bracket update (p2next to follow
        when FLAG_NEXT2), 6 p2next after a bracket update) whose points live in solver_scalar:
        records the point and sets the next evaluation (`line_go`) or the result (`line_done`)."""
        state = d.solver_flag[w, FLAG_STATE]
        target = d.solver_flag[w, FLAG_TARGET]
        nev = d.solver_flag[w, FLAG_NEV] + 1
        d.solver_flag[w, FLAG_NEV] = nev
        alpha = d.solver_scalar[w, LS_ALPHA]
        cost = d.solver_scalar[w, LS_COST]
        d1 = d.solver_scalar[w, LS_D1]
        d.solver_scalar[w, target + PT_ALPHA] = alpha
        d.solver_scalar[w, target + PT_COST] = cost
        d.solver_scalar[w, target + PT_D1] = d1
        d.solver_scalar[w, target + PT_D2] = d.solver_scalar[w, LS_D2]
        gtol = d.solver_scalar[w, LS_GTOL]
        next_state = int(-1)  # -1: done, at point `result` (-1: alpha 0)
        next_target = int(0)
        source = int(0)  # the point whose Newton step is next (-1: the bracket's midpoint)
        result = int(-1)
        one_sided = int(0)
        bracket = int(0)
        if state == 0:
            next_state = 1
            next_target = P1
            source = P0
        elif state == 1:
            if wp.abs(d1) < gtol and (alpha == scalar(0.0) or cost < scalar(0.0)):
                result = P1
            else:
                direction = scalar(1.0)
                if d1 >= scalar(0.0):
                    direction = scalar(-1.0)
                d.solver_scalar[w, LS_DIRECTION] = direction
                point_copy(d, w, P2, P0)
                one_sided = 1
        elif state == 2:
            if wp.abs(d1) < gtol and cost < scalar(0.0):
                result = P1
            else:
                one_sided = 1
        elif state == 4:
            # the first candidate within gtol with the lowest cost
            best = int(-1)
            best_cost = scalar(0.0)
            for j in range(3):
                c = P1NEXT
                if j == 1:
                    c = P2NEXT
                elif j == 2:
                    c = PMID
                c_cost = d.solver_scalar[w, c + PT_COST]
                if wp.abs(d.solver_scalar[w, c + PT_D1]) < gtol and (best == -1 or c_cost < best_cost):
                    best = c
                    best_cost = c_cost
            if best >= 0:
                result = best
            else:
                b1 = update_bracket(d, w, P1)
                b2 = update_bracket(d, w, P2)
                d.solver_flag[w, FLAG_NEXT2] = b2
                if b1 == 0 and b2 == 0:
                    result = PMID  # numerical accuracy reached: the midpoint
                elif b1 != 0:
                    next_state = 5
                    next_target = P1NEXT
                    source = P1
                else:
                    next_state = 6
                    next_target = P2NEXT
                    source = P2
        elif state == 5 and d.solver_flag[w, FLAG_NEXT2] != 0:
            next_state = 6
            next_target = P2NEXT
            source = P2
        else:
            bracket = 1  # states 3, 5 and 6
        lsit = m.solver_ls_iterations
        if one_sided != 0:
            if d.solver_scalar[w, P1 + PT_D1] * d.solver_scalar[w, LS_DIRECTION] <= -gtol and nev < lsit:
                point_copy(d, w, P2, P1)
                next_state = 2
                next_target = P1
                source = P1
            elif nev >= lsit:
                result = P1  # could not bracket
            else:
                point_copy(d, w, P2NEXT, P1)
                next_state = 3
                next_target = P1NEXT
                source = P1
        if bracket != 0:
            if nev < lsit:
                next_state = 4
                next_target = PMID
                source = -1  # the bracket's midpoint
            else:
                # out of evaluations: the bracket's end with the lower cost, if lower than at 0
                c1 = d.solver_scalar[w, P1 + PT_COST]
                c2 = d.solver_scalar[w, P2 + PT_COST]
                if c1 <= c2 and c1 < scalar(0.0):
                    result = P1
                elif c2 <= c1 and c2 < scalar(0.0):
                    result = P2
                else:
                    result = -1
        if next_state >= 0:
            next_alpha = scalar(0.5) * (d.solver_scalar[w, P1 + PT_ALPHA] + d.solver_scalar[w, P2 + PT_ALPHA])
            if source >= 0:
                next_alpha = newton_point(d, w, source)
            line_go(d, w, next_state, next_target, next_alpha)
        else:
            line_done(m, d, w, result)

    @wp.func
    def smooth_cost(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """The constraint cost at qacc_smooth (its Gauss term is 0), for every lane."""
        nactive = d.efc_nactive[w]
        a = int(lane)
        while a < nactive:
            r = d.efc_list[w, a]
            cs = d.efc_cols[w, r]
            jar = -d.efc_aref[w, r]
            k = int(0)
            while k < m.efc_nnz[cs]:
                j = m.efc_colind[cs, k]
                jar = jar + d.efc_J[w, r, j] * d.qacc_smooth[w, j]
                k = k + 1
            if d.efc_type[w, r] != ConstraintType.CONTACT_ELLIPTIC:
                c, ds, dds = row_cost(m, d, w, r, jar)
                d.efc_ls1[w, r] = c
            else:
                d.efc_jar[w, r] = jar  # the cone reads the whole contact's
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, scalar(0.0), CONE_COST)
        sync()
        if lane == 0:
            cost = scalar(0.0)
            a = int(0)
            while a < nactive:
                cost = cost + d.efc_ls1[w, d.efc_list[w, a]]
                a = a + 1
            d.solver_scalar[w, COST_SMOOTH] = cost
        sync()
        return d.solver_scalar[w, COST_SMOOTH]

    @wp.func
    def solve(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qacc and efc_force from qacc_smooth and the constraint rows (qfrc_constraint zeroed:
        `constraint_force` follows), as MuJoCo's Newton solver (engine_forward.c warmstart,
        engine_solver.c mj_solPrimal): the warm start if it costs no more than qacc_smooth; then
        each island (one without islands) iterates Newton steps with MuJoCo's line search until
        its stopping tests or `iterations`; solver_niter is the most iterations of an island.

        Model: body_rootid, cone_elliptic, cpair_condim, dof_bodyid, dof_parentid, enable_island, enable_warmstart,
        efc_chain, efc_colind, efc_colmask, efc_id, efc_nnz, efc_sub, efc_type, nbody, nv, solver_iterations,
        solver_ls_iterations, solver_ls_tolerance, solver_scale, solver_tolerance. Data in: qM, qacc_smooth,
        qacc_warmstart, contact_pair, efc_list, efc_nactive, efc_J, efc_D, efc_R, efc_aref, efc_frictionloss,
        efc_mu. Data out: qacc, efc_force, qfrc_constraint (zeroed), solver_niter; the scratch solver_res,
        solver_Mres, solver_grad, solver_H, solver_search, solver_Msearch, solver_flag, solver_scalar, efc_jar,
        efc_cost, efc_dds, efc_hcone, efc_jv, efc_quad, efc_ls1, efc_ls2, efc_ls3."""
        nv = m.nv
        nactive = d.efc_nactive[w]
        i = int(lane)
        while i < nv:
            d.qfrc_constraint[w, i] = scalar(0.0)
            d.qacc[w, i] = d.qacc_smooth[w, i]
            i = i + nlanes
        if lane == 0:
            d.solver_niter[w] = 0
        if nactive > 0:
            # warm start: the previous solution if it costs no more than the smooth acceleration
            # (with mjDSBL_WARMSTART the smooth acceleration, as MuJoCo's cold start); with
            # islands, the dofs in none take the smooth acceleration. Then the Newton iterations,
            # written as one loop with one call of `evaluate`, `newton_direction` and `line_eval`
            # (the GPU kernel's registers)
            i = int(lane)
            while i < nv:
                if m.enable_warmstart:
                    d.qacc[w, i] = d.qacc_warmstart[w, i]
                i = i + nlanes
            sync()
            smooth_cost(m, d, w, lane, nlanes)
            islands(m, d, w, lane)
            start = int(0)  # 0: evaluating the warm start, 1: the starting point, 2: after a step
            it = int(0)
            while True:
                evaluate(m, d, w, lane, nlanes)
                if start == 0:
                    smooth = d.solver_scalar[w, COST] > d.solver_scalar[w, COST_SMOOTH]
                    i = int(lane)
                    while i < nv:
                        if smooth or dof_island(m, d, w, i) < 0:
                            d.qacc[w, i] = d.qacc_smooth[w, i]
                        i = i + nlanes
                    sync()
                    start = 1
                    if smooth:
                        continue
                # dofs in no island only change the Gauss cost, which no island reads
                newton_direction(m, d, w, lane, nlanes)
                all_done = island_update(m, d, w, lane, int(start == 1))
                start = 2
                if all_done or it >= m.solver_iterations:
                    break
                it = it + 1
                # MuJoCo's line search (engine_solver.c PrimalSearch) of each island in turn, one
                # evaluation a pass: the lanes share the evaluation, lane 0 steps the search's state
                # machine (`line_step`, in memory) and begins the next island's; then each island's
                # step (the islands are independent: each search reads only its own rows and dofs)
                line_prepare(m, d, w, lane, nlanes)
                while d.solver_flag[w, FLAG_STATE] >= 0:
                    line_eval(m, d, w, lane, nlanes, d.solver_flag[w, FLAG_ISLAND], d.solver_scalar[w, LS_ALPHA])
                    if lane == 0:
                        line_step(m, d, w)
                    sync()
                i = int(lane)
                while i < nv:
                    k = dof_island(m, d, w, i)
                    if k >= 0:
                        d.qacc[w, i] = (d.qacc[w, i]
                                        + d.solver_scalar[w, SOLVER_FIXED + SOLVER_ISLAND * k + ISL_ALPHA]
                                        * d.solver_search[w, i])
                    i = i + nlanes
                sync()
            if lane == 0:
                niter = int(0)
                k = int(0)
                while k < d.solver_flag[w, FLAG_NISLAND]:
                    niter = wp.max(niter, int(d.solver_scalar[w, SOLVER_FIXED + SOLVER_ISLAND * k + ISL_ITER]))
                    k = k + 1
                d.solver_niter[w] = niter

    @wp.func
    def constraint_force(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qfrc_constraint = J' efc_force at the solution (efc_force set by the solver's last
        evaluate), the rows added in ascending order (scattered row by row by a thread per world,
        gathered per dof by a block: the same sums); the next step's warm start (unless the
        integrator saves it at the end of the step: RK4).

        Model: efc_colind, efc_colmask, efc_nnz, nv, warmstart_at_end. Data in: qacc, efc_list, efc_nactive, efc_J,
        efc_force, qfrc_constraint. Data out: qfrc_constraint, qacc_warmstart."""
        nv = m.nv
        nactive = d.efc_nactive[w]
        if wp.static(lanes):
            i = int(lane)
            while i < nv:
                a = int(0)
                while a < nactive:
                    r = d.efc_list[w, a]
                    cs = d.efc_cols[w, r]
                    if m.efc_colmask[cs, i] != 0:
                        d.qfrc_constraint[w, i] = d.qfrc_constraint[w, i] + d.efc_J[w, r, i] * d.efc_force[w, r]
                    a = a + 1
                i = i + nlanes
        else:
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                cs = d.efc_cols[w, r]
                fr = d.efc_force[w, r]
                k = int(0)
                while k < m.efc_nnz[cs]:
                    j = m.efc_colind[cs, k]
                    d.qfrc_constraint[w, j] = d.qfrc_constraint[w, j] + d.efc_J[w, r, j] * fr
                    k = k + 1
                a = a + 1
        if m.warmstart_at_end == 0:
            i = int(lane)
            while i < nv:
                d.qacc_warmstart[w, i] = d.qacc[w, i]
                i = i + nlanes

    return SimpleNamespace(solve=solve, constraint_force=constraint_force, evaluate=evaluate, row_cost=row_cost)
