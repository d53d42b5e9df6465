"""The constraint solver: Newton's method on MuJoCo's reduced primal problem
(doc/computation "Reduced primal problem", "Algorithms"; engine_solver.c mj_solPrimal).

    qacc = argmin_x  1/2 (x - qacc_smooth)' M (x - qacc_smooth) + s(J x - aref)

s is convex: for an equality row 1/2 D jar^2; for a limit or pyramid-edge row, 1/2 D jar^2
while jar < 0 and 0 beyond; for a friction-loss row the Huber function with linear zones
|jar| > R floss; for the rows of a contact in the elliptic cone a function of the whole
contact (`elliptic_cone`): 0 inside the cone, 1/2 sum D_j jar_j^2 inside its dual, and
between them 1/2 D_m (N - mu T)^2 of the distance from the cone, with a dense cone Hessian.
Its minimizer is unique, so any solver that converges finds MuJoCo's answer. Each iteration
solves (M + J' D_active J) p = -grad by a dense Cholesky factorization (nv is small; one
thread per world) and takes the exact step along p (1-D Newton with bisection safeguard on
the piecewise-quadratic cost). Iterations stop, per world, when the scaled cost improvement
gradient or Newton decrement falls below `tolerance` (scale = 1 / (meaninertia max(1, nv)),
as MuJoCo), or after `iterations`. The number used is kept in `solver_niter`.

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
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, ConstraintType, block_sync, no_sync

LS_ITERATIONS = 50

# per-world scalars the lanes share (Data.solver_scalar[w, ...])
COST, COST_SMOOTH, D1, D2, MAG, P_MR, P_MP, NORM = range(8)

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
        """Once per line search: the contact's terms as polynomials in alpha (as MuJoCo's
        mj_lineSearch prepares its quad terms), from jar and jv = J search. efc_quad[r0]: the
        bottom zone's sum D_j jar_j^2, sum D_j jar_j jv_j, sum D_j jv_j^2, sum |D_j jar_j jv_j|;
        efc_quad[r0 + 1]: N, V_0 = mu jv_0, D_m, sum |U_j V_j|; efc_quad[r0 + 2]: U.U, U.V, V.V
        (V = S jv). Zeroes the line-search terms of the contact's other rows."""
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r0]]]
        mu = d.efc_mu[w, r0]
        a = scalar(0.0)
        b = scalar(0.0)
        c = scalar(0.0)
        babs = scalar(0.0)
        UU = scalar(0.0)
        UV = scalar(0.0)
        VV = scalar(0.0)
        UVabs = scalar(0.0)
        for j in range(n):
            r = r0 + j
            jar = d.efc_jar[w, r]
            jv = d.efc_jv[w, r]
            D = d.efc_D[w, r]
            a = a + D * jar * jar
            b = b + D * jar * jv
            c = c + D * jv * jv
            babs = babs + wp.abs(D * jar * jv)
            if j > 0:
                fr = d.efc_mu[w, r]
                u = fr * jar
                v = fr * jv
                UU = UU + u * u
                UV = UV + u * v
                VV = VV + v * v
                UVabs = UVabs + wp.abs(u * v)
                d.efc_ls1[w, r] = scalar(0.0)
                d.efc_ls2[w, r] = scalar(0.0)
                d.efc_ls3[w, r] = scalar(0.0)
        d.efc_quad[w, r0, 0] = a
        d.efc_quad[w, r0, 1] = b
        d.efc_quad[w, r0, 2] = c
        d.efc_quad[w, r0, 3] = babs
        d.efc_quad[w, r0 + 1, 0] = mu * d.efc_jar[w, r0]
        d.efc_quad[w, r0 + 1, 1] = mu * d.efc_jv[w, r0]
        d.efc_quad[w, r0 + 1, 2] = d.efc_D[w, r0] / (mu * mu * (scalar(1.0) + mu * mu))
        d.efc_quad[w, r0 + 1, 3] = UVabs
        d.efc_quad[w, r0 + 2, 0] = UU
        d.efc_quad[w, r0 + 2, 1] = UV
        d.efc_quad[w, r0 + 2, 2] = VV

    @wp.func
    def cone_line(m: Model, d: Data, w: int, r0: int, alpha: scalar):
        """The line search's terms of the contact at jar + alpha jv, from `cone_quad`, on row
        r0: the first and second derivative along jv and the magnitude of the first's terms in
        efc_ls1..3. With N = N_0 + alpha V_0, U.V = U.V_0 + alpha V.V, T^2 = U.U + 2 alpha U.V_0
        + alpha^2 V.V: bottom zone b + alpha c and c; middle zone D_m (N - mu T) (V_0 - mu U.V / T)
        and D_m ((V_0 - mu U.V / T)^2 + (N - mu T) mu (U.V^2 / T^3 - V.V / T)) = jv' H jv."""
        mu = d.efc_mu[w, r0]
        V0 = d.efc_quad[w, r0 + 1, 1]
        N = d.efc_quad[w, r0 + 1, 0] + alpha * V0
        VV = d.efc_quad[w, r0 + 2, 2]
        UV0 = d.efc_quad[w, r0 + 2, 1]
        UV = UV0 + alpha * VV
        T = wp.sqrt(wp.max(d.efc_quad[w, r0 + 2, 0] + alpha * (scalar(2.0) * UV0 + alpha * VV), scalar(0.0)))
        zone = cone_zone(mu, N, T)
        d1 = scalar(0.0)
        d2 = scalar(0.0)
        mag = scalar(0.0)
        if zone == 2:
            c = d.efc_quad[w, r0, 2]
            d1 = d.efc_quad[w, r0, 1] + alpha * c
            d2 = c
            mag = d.efc_quad[w, r0, 3] + alpha * c
        elif zone == 1:
            Dm = d.efc_quad[w, r0 + 1, 2]
            NmT = N - mu * T
            dNmT = V0 - mu * UV / T
            d1 = Dm * NmT * dNmT
            d2 = Dm * (dNmT * dNmT + NmT * mu * (UV * UV / (T * T * T) - VV / T))
            mag = wp.abs(Dm * NmT) * (wp.abs(V0) + mu * (d.efc_quad[w, r0 + 1, 3] + alpha * VV) / T)
        d.efc_ls1[w, r0] = d1
        d.efc_ls2[w, r0] = d2
        d.efc_ls3[w, r0] = mag

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
    # machine epsilon of the build's precision (a power of two: exact as a kernel constant)
    eps = 2.0**-23 if scalar == wp.float32 else 2.0**-52
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
            d.solver_flag[w] = tree
        sync()
        tree = d.solver_flag[w]
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
    def line_derivatives(m: Model, d: Data, w: int, lane: int, nlanes: int, alpha: scalar, p_mr: scalar,
                         p_mp: scalar):
        """First and second derivative of the cost along the search direction at alpha, and the
        sum of the magnitudes of the terms of the first (its rounding error is about eps times
        that). Each lane evaluates some rows; lane 0 adds the terms in row order."""
        nactive = d.efc_nactive[w]
        a = int(lane)
        while a < nactive:
            r = d.efc_list[w, a]
            if d.efc_type[w, r] != ConstraintType.CONTACT_ELLIPTIC:
                jv = d.efc_jv[w, r]
                c, ds, dds = row_cost(m, d, w, r, d.efc_jar[w, r] + alpha * jv)
                d.efc_ls1[w, r] = ds * jv
                d.efc_ls2[w, r] = dds * jv * jv
                d.efc_ls3[w, r] = wp.abs(ds * jv)
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, alpha, CONE_LINE)
        sync()
        if lane == 0:
            d1 = p_mr + alpha * p_mp
            d2 = p_mp
            mag = wp.abs(p_mr) + wp.abs(alpha * p_mp)
            a = int(0)
            while a < nactive:
                r = d.efc_list[w, a]
                d1 = d1 + d.efc_ls1[w, r]
                d2 = d2 + d.efc_ls2[w, r]
                mag = mag + d.efc_ls3[w, r]
                a = a + 1
            d.solver_scalar[w, D1] = d1
            d.solver_scalar[w, D2] = d2
            d.solver_scalar[w, MAG] = mag
        sync()
        return d.solver_scalar[w, D1], d.solver_scalar[w, D2], d.solver_scalar[w, MAG]

    @wp.func
    def line_search(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """Exact minimizer alpha >= 0 of the convex piecewise-quadratic cost along the search
        (every lane returns the same alpha)."""
        nv = m.nv
        mul_m(m, d, d.solver_search, d.solver_Msearch, w, lane, nlanes)
        end1 = d.efc_nactive[w]
        a = int(lane)
        while a < end1:
            r = d.efc_list[w, a]
            d.efc_jv[w, r] = row_dot(m, d, w, r, d.solver_search)
            a = a + nlanes
        cone_pass(m, d, w, lane, nlanes, scalar(0.0), CONE_QUAD)
        sync()
        if lane == 0:
            p_mr = scalar(0.0)
            p_mp = scalar(0.0)
            i = int(0)
            while i < nv:
                p_mr = p_mr + d.solver_search[w, i] * d.solver_Mres[w, i]
                p_mp = p_mp + d.solver_search[w, i] * d.solver_Msearch[w, i]
                i = i + 1
            d.solver_scalar[w, P_MR] = p_mr
            d.solver_scalar[w, P_MP] = p_mp
        sync()
        p_mr = d.solver_scalar[w, P_MR]
        p_mp = d.solver_scalar[w, P_MP]
        # the derivatives at 0 first, then Newton steps (one call site of line_derivatives keeps
        # the GPU kernel's registers down), safeguarded as rtsafe (Numerical Recipes 9.4): once
        # the minimizer is bracketed, a Newton step that leaves the bracket, or that is not less
        # than half the step before the last, is replaced by bisection. Across an elliptic cone's
        # middle zone d1 bends so much that Newton from each side overshoots to the other, the
        # bracket shrinking by a few percent a step: without the safeguard, 50 steps can end far
        # from the minimizer, at a cost higher than before the step.
        gtol = scalar(0.0)
        lo = scalar(0.0)
        hi = scalar(-1.0)  # no upper bracket yet
        alpha = scalar(0.0)
        dx = scalar(1.0)  # the last step, and the one before it (none: the first Newton step is free)
        dx_old = scalar(1e30)
        it = int(0)
        while it <= LS_ITERATIONS:
            d1, d2, mag = line_derivatives(m, d, w, lane, nlanes, alpha, p_mr, p_mp)
            if it == 0:
                if d1 >= scalar(0.0):
                    break
                gtol = -d1 * scalar(1e-10)
                alpha = scalar(1.0)
            else:
                # converged: to the tolerance, or to the rounding error of d1 (which float32 cannot
                # push below the tolerance; Newton would then wander by rounding noise)
                if wp.abs(d1) <= wp.max(gtol, scalar(16.0) * scalar(eps) * mag):
                    break
                if d1 < scalar(0.0):
                    lo = alpha
                else:
                    hi = alpha
                newton = d1 / wp.max(d2, scalar(MINVAL))
                step = alpha - newton
                if hi >= scalar(0.0) and (step <= lo or step >= hi
                                          or scalar(2.0) * wp.abs(newton) > wp.abs(dx_old)):
                    step = scalar(0.5) * (lo + hi)
                dx_old = dx
                dx = step - alpha
                # a step within rounding of alpha: converged as far as the precision allows
                if wp.abs(step - alpha) <= scalar(4.0) * scalar(eps) * wp.abs(alpha):
                    alpha = step
                    break
                alpha = step
            it = it + 1
        return alpha

    @wp.func
    def norm_terms(d: Data, w: int, nv: int, lane: int):
        """grad' grad (lane 0), for every lane."""
        if lane == 0:
            gnorm = scalar(0.0)
            i = int(0)
            while i < nv:
                gnorm = gnorm + d.solver_grad[w, i] * d.solver_grad[w, i]
                i = i + 1
            d.solver_scalar[w, NORM] = gnorm
        sync()
        return d.solver_scalar[w, NORM]

    @wp.func
    def newton_decrement(d: Data, w: int, nv: int, lane: int):
        """1/2 g' H^-1 g = -1/2 g' p: the predicted improvement of the Newton step (lane 0)."""
        if lane == 0:
            decrement = scalar(0.0)
            i = int(0)
            while i < nv:
                decrement = decrement - scalar(0.5) * d.solver_grad[w, i] * d.solver_search[w, i]
                i = i + 1
            d.solver_scalar[w, NORM] = decrement
        sync()
        return d.solver_scalar[w, NORM]

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
        `constraint_force` follows).

        Model: cone_elliptic, cpair_condim, dof_parentid, enable_warmstart, efc_chain, efc_colind, efc_colmask, efc_id,
        efc_nnz, efc_sub, efc_type, nv, solver_iterations, solver_scale, solver_tolerance. Data in: qM, qacc_smooth,
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
            # warm start: the previous solution if it costs less than the smooth acceleration
            # (with mjDSBL_WARMSTART the smooth acceleration, as MuJoCo's cold start); then
            # Newton iterations. Written as one loop with one call of `evaluate` (at the warm
            # start, at the smooth acceleration if that costs less, after each step), which
            # keeps the GPU kernel's registers down.
            i = int(lane)
            while i < nv:
                if m.enable_warmstart:
                    d.qacc[w, i] = d.qacc_warmstart[w, i]
                else:
                    d.qacc[w, i] = d.qacc_smooth[w, i]
                i = i + nlanes
            sync()
            cost_smooth = smooth_cost(m, d, w, lane, nlanes)
            scale = m.solver_scale
            start = int(0)  # 0: evaluating the warm start, 1: the smooth acceleration, 2: a step
            cost = scalar(0.0)
            niter = int(0)
            it = int(0)
            while True:
                evaluate(m, d, w, lane, nlanes)
                new_cost = d.solver_scalar[w, COST]
                if start == 0:
                    cost = new_cost
                    if cost_smooth < cost:
                        i = int(lane)
                        while i < nv:
                            d.qacc[w, i] = d.qacc_smooth[w, i]
                            i = i + nlanes
                        sync()
                        start = 1
                        continue
                    start = 2
                elif start == 1:
                    cost = new_cost
                    start = 2
                else:
                    niter = niter + 1
                    improvement = scale * (cost - new_cost)
                    cost = new_cost
                    if improvement < m.solver_tolerance:
                        break
                if it >= m.solver_iterations:
                    break
                it = it + 1
                if scale * wp.sqrt(norm_terms(d, w, nv, lane)) < m.solver_tolerance:
                    break
                newton_direction(m, d, w, lane, nlanes)
                if scale * newton_decrement(d, w, nv, lane) < m.solver_tolerance:
                    break
                alpha = line_search(m, d, w, lane, nlanes)
                if alpha == scalar(0.0):
                    break
                i = int(lane)
                while i < nv:
                    d.qacc[w, i] = d.qacc[w, i] + alpha * d.solver_search[w, i]
                    i = i + nlanes
                sync()
            if lane == 0:
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
