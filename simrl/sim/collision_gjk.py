"""MuJoCo's native convex collision (engine_collision_gjk.c, `mjc_ccd`): GJK for the distance
or the intersection of two convex shapes, then EPA for the penetration depth, as Warp functions.

Ported operation by operation from MuJoCo 4.0 so that the witness points agree where the
answer is not unique (a flat face on a flat face: which point of the face EPA stops at depends
on the polytope it grew): the same initial simplex (the geoms' centres), the same subdistance
algorithm (Montanari et al., ToG 2017: S1D, S2D, S3D) run on until the simplex holds the origin (as MuJoCo 4.0),
the same initial polytopes (polytope2/3/4) and the same expansion (the horizon walked in the
recursive order of horizonRec, with an explicit stack: Warp functions cannot recurse).

Convex objects are described by `Obj` (a geom type, its pose, size and the margin that inflates
its support); the support functions are `support` (mjc_*Support of engine_collision_convex.c).
The polytope lives in per-pair scratch rows of the Data (ccd_vert, ccd_face, ...), sized from
`opt.ccd_iterations` as mjc_ccdSize sizes MuJoCo's buffer, so every loop is bounded by it.

These functions are not differentiated: they find *which* points touch (simplex and polytope
searches are piecewise constant in the inputs); simrl.sim.collision_convex records the result
as material points of the two geoms and rebuilds the contact from the poses differentiably.
"""

import functools
import types

import warp as wp

from simrl.sim.data import ccd_structs
from simrl.sim.types import MINVAL, GeomType, scalar_types

# shrunk forms of a sphere (its centre) and a capsule (its segment) for mjc_ccd's first GJK pass
GEOM_POINT = -2
GEOM_LINE = -3

#: meshes with fewer vertices are searched exhaustively, others by hill climbing their hull graph
#: (mjMESH_HILLCLIMB_MIN, engine_collision_convex.h)
HILLCLIMB_MIN = 10


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    vec3, mat33, vec2 = T.vec3, T.mat33, T.vec2
    Vertex, Face, Obj, _ = ccd_structs(scalar)
    is64 = scalar == wp.float64
    # numerical limits as in engine_collision_gjk.c (mjUSESINGLE for float32)
    minval, minval2 = scalar(MINVAL), scalar(MINVAL * MINVAL)
    minepatol = scalar(MINVAL if is64 else 1e-7)  # mjMINEPATOL: EPA's tolerance for discrete shapes
    flt_max = scalar(3.4028234663852886e38)
    max_limit = scalar(1.7976931348623157e308 if is64 else 3.4028234663852886e38)  # DBL_MAX / FLT_MAX
    mindist2 = scalar(MINVAL * MINVAL if is64 else 1e-10)
    mindist3 = mindist2
    mindist4 = scalar(MINVAL * MINVAL if is64 else 1e-17)
    zero, one, half = scalar(0.0), scalar(1.0), scalar(0.5)

    # ------------------------------------------------------------------ support functions

    @wp.func
    def vdot(ld: vec3, v: wp.vec3f) -> scalar:
        """dot3f: a direction with a mesh vertex (float) in the model's precision."""
        return ld[0] * scalar(v[0]) + ld[1] * scalar(v[1]) + ld[2] * scalar(v[2])

    @wp.func
    def grid(x: scalar) -> int:
        """A direction's component on the 3 x 3 x 3 grid of the hill climb's seeds (-1, 0, 1) + 1."""
        if x > scalar(0.4):
            return 2
        if x < scalar(-0.4):
            return 0
        return 1

    @wp.func
    def hill_climb(vec: wp.array(dtype=wp.vec3f), ints: wp.array(dtype=int), vertadr: int, graphadr: int,
                   start: int, ld: vec3) -> int:
        """From hull vertex `start` (a local id of the graph at graphadr, mesh_graph's layout: numvert,
        numface, vert_edgeadr, vert_globalid, edge_localid), climb to the neighbour farther along
        ld until none is: the local id of the vertex of the hull farthest along ld."""
        numvert = ints[graphadr]
        edgeadr = graphadr + 2
        globalid = graphadr + 2 + numvert
        localid = graphadr + 2 + 2 * numvert
        imax = start
        mx = vdot(ld, vec[vertadr + ints[globalid + imax]])
        prev = int(-1)
        while imax != prev:
            prev = imax
            i = ints[edgeadr + imax]
            sub = ints[localid + i]
            while sub >= 0:
                vd = vdot(ld, vec[vertadr + ints[globalid + sub]])
                if vd > mx:
                    mx = vd
                    imax = sub
                i += 1
                sub = ints[localid + i]
        return imax

    @wp.func
    def mesh_support(o: Obj, ld: vec3) -> int:
        """The mesh vertex farthest along ld (the geom's frame): mjc_meshSupport's exhaustive
        search below HILLCLIMB_MIN vertices or without a hull graph, else mjc_hillclimbSupport's
        climb of the hull graph from the better of the cached vertex and the direction's seed
        (mesh_extrema); both keep the cached vertex on ties, as MuJoCo's mjCCDObj does."""
        imax = int(0)
        if o.graphadr < 0 or o.vertnum < HILLCLIMB_MIN:
            mx = -flt_max
            cached = o.cache[o.row, o.col]
            if cached >= 0:
                imax = cached
                mx = vdot(ld, o.vec[o.vertadr + imax])
            for i in range(o.vertnum):
                vd = vdot(ld, o.vec[o.vertadr + i])
                if vd > mx:
                    mx = vd
                    imax = i
            o.cache[o.row, o.col] = imax
            return imax
        globalid = o.graphadr + 2 + o.ints[o.graphadr]
        seed = o.ints[o.extadr + grid(ld[0]) * 9 + grid(ld[1]) * 3 + grid(ld[2])]
        cached = o.cache[o.row, o.col + 1]
        imax = seed
        if cached >= 0:
            cached_dot = vdot(ld, o.vec[o.vertadr + o.ints[globalid + cached]])
            seed_dot = vdot(ld, o.vec[o.vertadr + o.ints[globalid + seed]])
            if not (seed_dot > cached_dot):
                imax = cached
        imax = hill_climb(o.vec, o.ints, o.vertadr, o.graphadr, imax, ld)
        o.cache[o.row, o.col + 1] = imax
        idx = o.ints[globalid + imax]
        o.cache[o.row, o.col] = idx
        return idx

    @wp.func
    def support(o: Obj, d: vec3) -> vec3:
        p, _i = support_idx(o, d)
        return p

    @wp.func
    def support_idx(o: Obj, d: vec3):
        """The point of object o farthest along the unit direction d (mjc_*Support), pushed out
        by half its margin (`support` of engine_collision_gjk.c), and which vertex it is for a
        box (the corner's sign bits) or a mesh, which cap's rim for a cylinder (0 top, 1 bottom),
        -1 for the other shapes."""
        pos, mat, size = o.pos, o.mat, o.size
        index = int(-1)
        # d in the geom's frame (mulMatTVec3)
        ld = vec3(mat[0, 0] * d[0] + mat[1, 0] * d[1] + mat[2, 0] * d[2],
                  mat[0, 1] * d[0] + mat[1, 1] * d[1] + mat[2, 1] * d[2],
                  mat[0, 2] * d[0] + mat[1, 2] * d[1] + mat[2, 2] * d[2])
        local = vec3(zero, zero, zero)
        res = pos
        if o.type == GEOM_POINT:
            res = pos
        elif o.type == GEOM_LINE:
            scl = size[1]
            if ld[2] < zero:
                scl = -size[1]
            res = vec3(mat[0, 2] * scl + pos[0], mat[1, 2] * scl + pos[1], mat[2, 2] * scl + pos[2])
        elif o.type == GeomType.SPHERE:
            res = vec3(size[0] * d[0] + pos[0], size[0] * d[1] + pos[1], size[0] * d[2] + pos[2])
        else:
            if o.type == GeomType.CAPSULE:
                lz = ld[2] * size[0]
                if ld[2] >= zero:
                    lz = lz + size[1]
                else:
                    lz = lz - size[1]
                local = vec3(ld[0] * size[0], ld[1] * size[0], lz)
            elif o.type == GeomType.ELLIPSOID:
                s = vec3(ld[0] * size[0], ld[1] * size[1], ld[2] * size[2])
                norm2 = s[0] * s[0] + s[1] * s[1] + s[2] * s[2]
                if norm2 < minval2:
                    local = vec3(size[0], zero, zero)
                else:
                    inv = one / wp.sqrt(norm2)
                    local = vec3(s[0] * inv * size[0], s[1] * inv * size[1], s[2] * inv * size[2])
            elif o.type == GeomType.CYLINDER:
                n2 = ld[0] * ld[0] + ld[1] * ld[1]
                scl = zero
                if n2 >= minval2:
                    scl = size[0] / wp.sqrt(n2)
                lz = size[1]
                index = int(0)  # the cap: 0 the top, 1 the bottom (MuJoCo 4.0's multicontact)
                if ld[2] < zero:
                    lz = -size[1]
                    index = 1
                local = vec3(scl * ld[0], scl * ld[1], lz)
            elif o.type == GeomType.BOX:
                lx = size[0]
                if ld[0] < zero:
                    lx = -size[0]
                ly = size[1]
                if ld[1] < zero:
                    ly = -size[1]
                lz = size[2]
                if ld[2] < zero:
                    lz = -size[2]
                local = vec3(lx, ly, lz)
                index = int(0)
                if lx > zero:
                    index = 1
                if ly > zero:
                    index += 2
                if lz > zero:
                    index += 4
            elif o.type == GeomType.MESH:
                index = mesh_support(o, ld)
                local = vec3(o.vec[o.vertadr + index])
            elif o.type == GeomType.HFIELD:
                # mjc_prism_support: the best of the top or (d down) the bottom three vertices;
                # the prism's pose is the identity (its vertices are in the field's frame)
                tri = o.prism_hi
                if d[2] < zero:
                    tri = o.prism_lo
                best = int(0)
                bd = tri[0, 0] * d[0] + tri[0, 1] * d[1] + tri[0, 2] * d[2]
                for k in range(1, 3):
                    kd = tri[k, 0] * d[0] + tri[k, 1] * d[1] + tri[k, 2] * d[2]
                    if kd > bd:
                        best = k
                        bd = kd
                local = vec3(tri[best, 0], tri[best, 1], tri[best, 2])
            # localToGlobal
            res = vec3(mat[0, 0] * local[0] + mat[0, 1] * local[1] + mat[0, 2] * local[2] + pos[0],
                       mat[1, 0] * local[0] + mat[1, 1] * local[1] + mat[1, 2] * local[2] + pos[1],
                       mat[2, 0] * local[0] + mat[2, 1] * local[1] + mat[2, 2] * local[2] + pos[2])
        if o.margin > zero:
            res = res + d * (half * o.margin)
        return res, index

    @wp.func
    def minkowski(o1: Obj, o2: Obj, d: vec3, d_neg: vec3) -> Vertex:
        """S_{A-B}(d) = S_A(d) - S_B(-d), with both support points (and their vertices)."""
        v = Vertex()
        p1, i1 = support_idx(o1, d)
        p2, i2 = support_idx(o2, d_neg)
        v.vert1 = p1
        v.index1 = i1
        v.vert2 = p2
        v.index2 = i2
        v.vert = v.vert1 - v.vert2
        return v

    @wp.func
    def gjk_support(o1: Obj, o2: Obj, x: vec3, x_norm: scalar) -> Vertex:
        """gjkSupport: the support point of A-B along -x."""
        inv = one / x_norm
        d_neg = vec3(x[0] * inv, x[1] * inv, x[2] * inv)
        return minkowski(o1, o2, -d_neg, d_neg)

    # ------------------------------------------------------------------ small helpers

    @wp.func
    def det3(v1: vec3, v2: vec3, v3: vec3) -> scalar:
        return (v1[0] * (v2[1] * v3[2] - v2[2] * v3[1]) + v1[1] * (v2[2] * v3[0] - v2[0] * v3[2])
                + v1[2] * (v2[0] * v3[1] - v2[1] * v3[0]))

    @wp.func
    def cross3(a: vec3, b: vec3) -> vec3:
        return vec3(a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])

    @wp.func
    def same_sign2(a: scalar, b: scalar) -> int:
        if a > zero and b > zero:
            return 1
        if a < zero and b < zero:
            return -1
        return 0

    @wp.func
    def project_on_normal(n: vec3, v: vec3):
        """One normal's try of projectOriginPlane: (1, 0) when n is zero (a degenerate triangle);
        (0, the origin projected onto the plane of normal n through v) when n . v != 0 and n . n >
        mjMINVAL; else (-1, 0), the next normal's turn."""
        nv = wp.dot(n, v)
        nn = wp.dot(n, n)
        if nn == zero:
            return 1, vec3(zero, zero, zero)
        if nv != zero and nn > minval:
            return 0, n * (nv / nn)
        return -1, vec3(zero, zero, zero)

    @wp.func
    def project_origin_plane(v1: vec3, v2: vec3, v3: vec3):
        """projectOriginPlane: (1 if degenerate, the origin projected onto the plane v1 v2 v3), by
        the first of the triangle's normals that gives one (`project_on_normal`; the third as it is)."""
        diff21 = v2 - v1
        diff31 = v3 - v1
        diff32 = v3 - v2
        status, p = project_on_normal(cross3(diff32, diff21), v2)
        if status < 0:
            status, p = project_on_normal(cross3(diff21, diff31), v1)
        if status < 0:
            n = cross3(diff31, diff32)
            status = 0
            p = n * (wp.dot(n, v3) / wp.dot(n, n))
        return status, p

    @wp.func
    def s1d(s1: vec3, s2: vec3) -> vec2:
        """S1D: barycentric coordinates of the point of segment s1 s2 closest to the origin. As
        the MuJoCo 4.0.1 binary's S1D (read from its disassembly): (0, 1) for a segment shorter
        than mjMINVAL, and (1, 0) when the origin projects beyond s1 (or onto it), where
        MuJoCo 3.12.1's source gives (0, 1): GJK on a point over a flat face's vertex, whose
        support in the face's normal ties, would swap ends forever."""
        diff = s2 - s1
        if wp.dot(diff, diff) < minval2:
            return vec2(zero, one)
        scl = -(wp.dot(s2, diff) / wp.dot(diff, diff))
        p = s2 + diff * scl
        mu_max = s1[0] - s2[0]
        index = int(0)
        mu = s1[1] - s2[1]
        if wp.abs(mu) >= wp.abs(mu_max):
            mu_max = mu
            index = 1
        mu = s1[2] - s2[2]
        if wp.abs(mu) >= wp.abs(mu_max):
            mu_max = mu
            index = 2
        c1 = p[index] - s2[index]
        c2 = s1[index] - p[index]
        if same_sign2(mu_max, c1) == 0:
            return vec2(zero, one)
        if same_sign2(mu_max, c2) != 0:
            return vec2(c1 / mu_max, c2 / mu_max)
        return vec2(one, zero)

    @wp.func
    def area2(p: vec3, a: vec3, b: vec3, x: int, y: int) -> scalar:
        """Signed area of the projected triangle (p, a, b) on axes x, y (the C3i of S2D)."""
        return p[x] * a[y] + p[y] * b[x] + a[x] * b[y] - p[x] * b[y] - p[y] * a[x] - b[x] * a[y]

    @wp.func
    def minors(s1: vec3, s2: vec3, s3: vec3):
        """M_14, M_24, M_34 of S2D and the projection axes that keep the largest shadow."""
        m14 = s2[1] * s3[2] - s2[2] * s3[1] - s1[1] * s3[2] + s1[2] * s3[1] + s1[1] * s2[2] - s1[2] * s2[1]
        m24 = s2[0] * s3[2] - s2[2] * s3[0] - s1[0] * s3[2] + s1[2] * s3[0] + s1[0] * s2[2] - s1[2] * s2[0]
        m34 = s2[0] * s3[1] - s2[1] * s3[0] - s1[0] * s3[1] + s1[1] * s3[0] + s1[0] * s2[1] - s1[1] * s2[0]
        mu1, mu2, mu3 = wp.abs(m14), wp.abs(m24), wp.abs(m34)
        if mu1 >= mu2 and mu1 >= mu3:
            return m14, 1, 2
        if mu2 >= mu3:
            return m24, 0, 2
        return m34, 0, 1

    @wp.func
    def s2d(s1: vec3, s2: vec3, s3: vec3) -> vec3:
        """S2D: barycentric coordinates of the point of triangle s1 s2 s3 closest to the origin."""
        degenerate, p = project_origin_plane(s1, s2, s3)
        if degenerate != 0:
            ld = s1d(s1, s2)
            return vec3(ld[0], ld[1], zero)
        m_max, x, y = minors(s1, s2, s3)
        c31 = area2(p, s2, s3, x, y)
        c32 = area2(p, s3, s1, x, y)
        c33 = area2(p, s1, s2, x, y)
        comp1 = same_sign2(m_max, c31)
        comp2 = same_sign2(m_max, c32)
        comp3 = same_sign2(m_max, c33)
        if comp1 != 0 and comp2 != 0 and comp3 != 0:
            return vec3(c31 / m_max, c32 / m_max, c33 / m_max)
        lam = vec3(zero, zero, zero)
        dmin = max_limit
        if comp1 == 0:
            l1 = s1d(s2, s3)
            q = s2 * l1[0] + s3 * l1[1]
            lam = vec3(zero, l1[0], l1[1])
            dmin = wp.dot(q, q)
        if comp2 == 0:
            l1 = s1d(s1, s3)
            q = s1 * l1[0] + s3 * l1[1]
            dd = wp.dot(q, q)
            if dd < dmin:
                lam = vec3(l1[0], zero, l1[1])
                dmin = dd
        if comp3 == 0:
            l1 = s1d(s1, s2)
            q = s1 * l1[0] + s2 * l1[1]
            dd = wp.dot(q, q)
            if dd < dmin:
                lam = vec3(l1[0], l1[1], zero)
        return lam

    vec4 = wp.types.vector(4, scalar)

    @wp.func
    def s3d(s1: vec3, s2: vec3, s3: vec3, s4: vec3) -> vec4:
        """S3D: barycentric coordinates of the point of tetrahedron s1..s4 closest to the origin."""
        c41 = -det3(s2, s3, s4)
        c42 = det3(s1, s3, s4)
        c43 = -det3(s1, s2, s4)
        c44 = det3(s1, s2, s3)
        m_det = c41 + c42 + c43 + c44
        comp1 = same_sign2(m_det, c41)
        comp2 = same_sign2(m_det, c42)
        comp3 = same_sign2(m_det, c43)
        comp4 = same_sign2(m_det, c44)
        if comp1 != 0 and comp2 != 0 and comp3 != 0 and comp4 != 0:
            return vec4(c41 / m_det, c42 / m_det, c43 / m_det, c44 / m_det)
        lam = vec4(zero, zero, zero, zero)
        dmin = max_limit
        if comp1 == 0:
            l2 = s2d(s2, s3, s4)
            q = s2 * l2[0] + s3 * l2[1] + s4 * l2[2]
            lam = vec4(zero, l2[0], l2[1], l2[2])
            dmin = wp.dot(q, q)
        if comp2 == 0:
            l2 = s2d(s1, s3, s4)
            q = s1 * l2[0] + s3 * l2[1] + s4 * l2[2]
            dd = wp.dot(q, q)
            if dd < dmin:
                lam = vec4(l2[0], zero, l2[1], l2[2])
                dmin = dd
        if comp3 == 0:
            l2 = s2d(s1, s2, s4)
            q = s1 * l2[0] + s2 * l2[1] + s4 * l2[2]
            dd = wp.dot(q, q)
            if dd < dmin:
                lam = vec4(l2[0], l2[1], zero, l2[2])
                dmin = dd
        if comp4 == 0:
            l2 = s2d(s1, s2, s3)
            q = s1 * l2[0] + s2 * l2[1] + s3 * l2[2]
            dd = wp.dot(q, q)
            if dd < dmin:
                lam = vec4(l2[0], l2[1], l2[2], zero)
        return lam

    @wp.func
    def lincomb(lam: vec4, n: int, a: vec3, b: vec3, c: vec3, e: vec3) -> vec3:
        """lincomb: sum of the first n of lam[i] * (a, b, c, e)[i], in MuJoCo's order."""
        if n == 1:
            return a * lam[0]
        if n == 2:
            return vec3(lam[0] * a[0] + lam[1] * b[0], lam[0] * a[1] + lam[1] * b[1], lam[0] * a[2] + lam[1] * b[2])
        if n == 3:
            return vec3(lam[0] * a[0] + lam[1] * b[0] + lam[2] * c[0], lam[0] * a[1] + lam[1] * b[1] + lam[2] * c[1],
                        lam[0] * a[2] + lam[1] * b[2] + lam[2] * c[2])
        if n == 4:
            return vec3(lam[0] * a[0] + lam[1] * b[0] + lam[2] * c[0] + lam[3] * e[0],
                        lam[0] * a[1] + lam[1] * b[1] + lam[2] * c[1] + lam[3] * e[1],
                        lam[0] * a[2] + lam[1] * b[2] + lam[2] * c[2] + lam[3] * e[2])
        return vec3(zero, zero, zero)

    @wp.func
    def set4(v: vec4, i: int, x: scalar) -> vec4:
        return vec4(wp.where(i == 0, x, v[0]), wp.where(i == 1, x, v[1]), wp.where(i == 2, x, v[2]),
                    wp.where(i == 3, x, v[3]))

    # ------------------------------------------------------------------ GJK

    @wp.func
    def project_origin_line(v1: vec3, v2: vec3) -> vec3:
        """projectOriginLine: the origin projected onto the line v1 v2, v2 - (v2 . d / d . d) d
        with d = v2 - v1."""
        diff = v2 - v1
        scl = -(wp.dot(v2, diff) / wp.dot(diff, diff))
        return vec3(v2[0] + scl * diff[0], v2[1] + scl * diff[1], v2[2] + scl * diff[2])

    @wp.func
    def gjk(simplex: wp.array2d(dtype=Vertex), s: int, o1: Obj, o2: Obj, x1_0: vec3, x2_0: vec3, tol: scalar,
            kmax: int, dist_cutoff: scalar, discrete: int):
        """gjk of the MuJoCo 4.0.1 binary (libmujoco.so.4.0.1's gjk, read from its disassembly):
        (separated, dist, x1, x2, nsimplex, nx) from the initial points x1_0, x2_0; the simplex
        in simplex[s, 0:nsimplex]. With dist_cutoff 0 it only decides contact. `discrete`: both
        shapes are boxes, meshes, prisms or a sphere's or capsule's core, without margin
        (`is_discrete`): no duality-gap tolerance.

        Where it differs from MuJoCo 3.12.1's source: no gjkIntersect for a tetrahedron (GJK runs
        on until the simplex holds the origin); a distance search (dist_cutoff > 0) or a discrete
        pair runs until |x_k| < mjMINVAL (else the tolerance), a single vertex always so; x_k is
        the origin projected onto the simplex's plane or line (projectOriginPlane,
        projectOriginLine; the barycentric combination when those degenerate), its norm tested
        after each step (the stall |x_k - x_k-1| < mjMINVAL from the second step on); the
        duality gap is tested after the separation test and from the second step on; a
        separating support point (lower > 0) of a distance search marks the pair separated
        even when the search goes on; an initial |x_0| < mjMINVAL starts from x_0 = (1, 0, 0);
        the final separation test is skipped for a tetrahedron."""
        get_dist = dist_cutoff > zero
        n = int(0)
        k = int(0)
        x1k = x1_0
        x2k = x2_0
        lam = vec4(one, zero, zero, zero)
        tol2 = tol * tol
        epsilon = half * tol2
        min_norm = tol
        if discrete != 0:
            epsilon = zero
        if discrete != 0 or get_dist:
            min_norm = minval
        xk = x1k - x2k
        x_norm = wp.length(xk)
        if x_norm < minval:
            xk = vec3(one, zero, zero)
            x_norm = one
        separated = int(0)
        while k < kmax:
            v = gjk_support(o1, o2, xk, x_norm)
            simplex[s, n] = v
            sk = v.vert
            lower = wp.dot(xk, sk)
            if not get_dist:
                if lower > zero:
                    return 1, max_limit, x1k, x2k, 0, 0
            elif lower > zero:
                separated = 1
                if dist_cutoff < max_limit and lower >= dist_cutoff * x_norm:
                    return 1, max_limit, x1k, x2k, 0, 0
            if k != 0 and wp.dot(xk, xk - sk) < epsilon:
                break
            # subdistance on the n + 1 vertices
            p0 = simplex[s, 0].vert
            p1 = simplex[s, 1].vert
            p2 = simplex[s, 2].vert
            p3 = simplex[s, 3].vert
            lam = vec4(one, zero, zero, zero)
            if n + 1 == 4:
                lam = s3d(p0, p1, p2, p3)
            elif n + 1 == 3:
                l3 = s2d(p0, p1, p2)
                lam = vec4(l3[0], l3[1], l3[2], zero)
            elif n + 1 == 2:
                l2 = s1d(p0, p1)
                lam = vec4(l2[0], l2[1], zero, zero)
            # keep the vertices with a nonzero coordinate
            nn = int(0)
            for i in range(4):
                if lam[i] != zero:
                    simplex[s, nn] = simplex[s, i]
                    lam = set4(lam, nn, lam[i])
                    nn += 1
            if nn < 1:
                return 1, max_limit, x1k, x2k, 0, 0
            n = nn
            if n == 4:
                if separated == 0:
                    x_norm = zero
                break
            a = simplex[s, 0].vert
            b = simplex[s, 1].vert
            if n == 3:
                status, proj = project_origin_plane(a, b, simplex[s, 2].vert)
                if status == 0:
                    xk = proj
                else:
                    xk = lincomb(lam, n, a, b, simplex[s, 2].vert, simplex[s, 3].vert)
            elif n == 2:
                d = b - a
                if wp.dot(d, d) < minval2:
                    xk = lincomb(lam, n, a, b, a, a)
                else:
                    xk = project_origin_line(a, b)
            else:
                xk = a * lam[0]
            x_norm_prev = x_norm
            x_norm = wp.length(xk)
            if x_norm < wp.where(n == 1, minval, min_norm):
                break
            if k != 0 and wp.abs(x_norm - x_norm_prev) < minval:
                break
            k += 1
        if n > 0:
            x1k = lincomb(lam, n, simplex[s, 0].vert1, simplex[s, 1].vert1, simplex[s, 2].vert1,
                          simplex[s, 3].vert1)
            x2k = lincomb(lam, n, simplex[s, 0].vert2, simplex[s, 1].vert2, simplex[s, 2].vert2,
                          simplex[s, 3].vert2)
        # final separation check
        if n <= 3 and separated == 0 and x_norm >= minval:
            tmp = gjk_support(o1, o2, xk, x_norm)
            if wp.dot(xk, tmp.vert) > zero:
                separated = 1
        return separated, x_norm, x1k, x2k, n, 1

    # ------------------------------------------------------------------ EPA polytope

    @wp.func
    def attach_face(verts: wp.array2d(dtype=Vertex), faces: wp.array2d(dtype=Face), s: int, nfaces: int,
                    center: vec3, v1: int, v2: int, v3: int, adj1: int, adj2: int, adj3: int) -> scalar:
        """attachFace: face number `nfaces` from vertices v1 v2 v3; its squared distance to the
        origin (0 when the projection fails)."""
        f = Face()
        f.verts = wp.vec3i(v1, v2, v3)
        f.adj = wp.vec3i(adj1, adj2, adj3)
        f.index = -1
        ret, v = project_origin_plane(verts[s, v3].vert, verts[s, v2].vert, verts[s, v1].vert)
        if ret != 0:
            f.dist2 = zero
            f.v = v
            faces[s, nfaces] = f
            return zero
        if wp.dot(v, verts[s, v1].vert - center) < zero:
            v = -v
        f.v = v
        f.dist2 = wp.dot(v, v)
        faces[s, nfaces] = f
        return f.dist2

    @wp.func
    def epa_support(verts: wp.array2d(dtype=Vertex), s: int, nverts: int, o1: Obj, o2: Obj, dvec: vec3,
                    dnorm: scalar):
        """epaSupport: a new polytope vertex (number nverts) along dvec."""
        d = vec3(one, zero, zero)
        if dnorm > minval:
            d = vec3(dvec[0] / dnorm, dvec[1] / dnorm, dvec[2] / dnorm)
        verts[s, nverts] = minkowski(o1, o2, d, -d)
        return nverts

    @wp.func
    def tri_affine(v1: vec3, v2: vec3, v3: vec3, p: vec3) -> vec3:
        """triAffineCoord: affine coordinates of p on the triangle v1 v2 v3."""
        m_max, x, y = minors(v1, v2, v3)
        return vec3(area2(p, v2, v3, x, y) / m_max, area2(p, v3, v1, x, y) / m_max, area2(p, v1, v2, x, y) / m_max)

    @wp.func
    def tri_point_intersect(v1: vec3, v2: vec3, v3: vec3, p: vec3) -> int:
        lam = tri_affine(v1, v2, v3, p)
        if lam[0] < zero or lam[1] < zero or lam[2] < zero:
            return 0
        pr = vec3(v1[0] * lam[0] + v2[0] * lam[1] + v3[0] * lam[2], v1[1] * lam[0] + v2[1] * lam[1] + v3[1] * lam[2],
                  v1[2] * lam[0] + v2[2] * lam[1] + v3[2] * lam[2])
        if wp.length(pr - p) < minval:
            return 1
        return 0

    @wp.func
    def same_side(p0: vec3, p1: vec3, p2: vec3, p3: vec3) -> int:
        n = cross3(p1 - p0, p2 - p0)
        dot1 = wp.dot(n, p3 - p0)
        dot2 = wp.dot(n, -p0)
        if dot1 > zero and dot2 > zero:
            return 1
        if dot1 < zero and dot2 < zero:
            return 1
        return 0

    @wp.func
    def test_tetra(p0: vec3, p1: vec3, p2: vec3, p3: vec3) -> int:
        if same_side(p0, p1, p2, p3) != 0 and same_side(p1, p2, p3, p0) != 0 and same_side(p2, p3, p0, p1) != 0 \
                and same_side(p3, p0, p1, p2) != 0:
            return 1
        return 0

    @wp.func
    def ray_triangle(v1: vec3, v2: vec3, v3: vec3, v4: vec3, v5: vec3) -> int:
        d12 = v2 - v1
        d13 = v3 - v1
        d14 = v4 - v1
        d15 = v5 - v1
        vol1 = det3(d13, d14, d12)
        vol2 = det3(d14, d15, d12)
        vol3 = det3(d15, d13, d12)
        if vol1 >= zero and vol2 >= zero and vol3 >= zero:
            return 1
        if vol1 <= zero and vol2 <= zero and vol3 <= zero:
            return -1
        return 0

    @wp.func
    def init_map(faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int, n: int):
        for i in range(n):
            fmap[s, i] = i
            f = faces[s, i]
            f.index = i
            faces[s, i] = f

    @wp.func
    def polytope3(simplex: wp.array2d(dtype=Vertex), verts: wp.array2d(dtype=Vertex),
                  faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int, o1: Obj, o2: Obj,
                  dist0: scalar):
        """polytope3: the hexahedron around the triangle simplex[s, 0:3]; (status, nverts, nfaces,
        nmap, center), status 0 on success."""
        v1 = simplex[s, 0].vert
        v2 = simplex[s, 1].vert
        v3 = simplex[s, 2].vert
        center = v1 + v2
        center = center + v3
        center = center * scalar(1.0 / 3.0)
        n = cross3(v2 - v1, v3 - v1)
        n_norm = wp.length(n)
        if n_norm < minval:
            return 4, 0, 0, 0, center  # mjEPA_P3_BAD_NORMAL
        verts[s, 0] = simplex[s, 0]
        verts[s, 1] = simplex[s, 1]
        verts[s, 2] = simplex[s, 2]
        v5i = epa_support(verts, s, 3, o1, o2, -n, n_norm)
        v4i = epa_support(verts, s, 4, o1, o2, n, n_norm)
        v4 = verts[s, v4i].vert
        v5 = verts[s, v5i].vert
        if tri_point_intersect(v1, v2, v3, v4) != 0:
            return 5, 5, 0, 0, center  # mjEPA_P3_INVALID_V4
        if tri_point_intersect(v1, v2, v3, v5) != 0:
            return 6, 5, 0, 0, center  # mjEPA_P3_INVALID_V5
        if dist0 > scalar(10.0) * minval and test_tetra(v1, v2, v3, v4) == 0 and test_tetra(v1, v2, v3, v5) == 0:
            return 7, 5, 0, 0, center  # mjEPA_P3_MISSING_ORIGIN
        if attach_face(verts, faces, s, 0, center, v4i, 0, 1, 1, 3, 2) < mindist3:
            return 8, 5, 1, 0, center  # mjEPA_P3_ORIGIN_ON_FACE
        if attach_face(verts, faces, s, 1, center, v4i, 2, 0, 2, 4, 0) < mindist3:
            return 8, 5, 2, 0, center
        if attach_face(verts, faces, s, 2, center, v4i, 1, 2, 0, 5, 1) < mindist3:
            return 8, 5, 3, 0, center
        if attach_face(verts, faces, s, 3, center, v5i, 1, 0, 5, 0, 4) < mindist3:
            return 8, 5, 4, 0, center
        if attach_face(verts, faces, s, 4, center, v5i, 0, 2, 3, 1, 5) < mindist3:
            return 8, 5, 5, 0, center
        if attach_face(verts, faces, s, 5, center, v5i, 2, 1, 4, 2, 3) < mindist3:
            return 8, 5, 6, 0, center
        init_map(faces, fmap, s, 6)
        return 0, 5, 6, 6, center

    @wp.func
    def replace_simplex3(simplex: wp.array2d(dtype=Vertex), verts: wp.array2d(dtype=Vertex), s: int, a: int,
                         b: int, c: int):
        """replaceSimplex3: the triangle a b c of the polytope becomes the simplex."""
        va = verts[s, a]
        vb = verts[s, b]
        vc = verts[s, c]
        simplex[s, 0] = va
        simplex[s, 1] = vb
        simplex[s, 2] = vc

    @wp.func
    def rotmat120(axis: vec3) -> mat33:
        """rotmat: rotation by 120 degrees about axis."""
        nrm = wp.length(axis)
        u1 = axis[0] / nrm
        u2 = axis[1] / nrm
        u3 = axis[2] / nrm
        sn = scalar(0.86602540378)
        cs = scalar(-0.5)
        return mat33(cs + u1 * u1 * (one - cs), u1 * u2 * (one - cs) - u3 * sn, u1 * u3 * (one - cs) + u2 * sn,
                     u2 * u1 * (one - cs) + u3 * sn, cs + u2 * u2 * (one - cs), u2 * u3 * (one - cs) - u1 * sn,
                     u1 * u3 * (one - cs) - u2 * sn, u2 * u3 * (one - cs) + u1 * sn, cs + u3 * u3 * (one - cs))

    @wp.func
    def polytope2(simplex: wp.array2d(dtype=Vertex), verts: wp.array2d(dtype=Vertex),
                  faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int, o1: Obj, o2: Obj):
        """polytope2: the hexahedron around the segment simplex[s, 0:2] (three support points at
        120 degrees about it); status -1 means: the triangle now in simplex[s, 0:3] goes to
        polytope3."""
        v1 = simplex[s, 0].vert
        v2 = simplex[s, 1].vert
        center = (v1 + v2) * half
        diff = v2 - v1
        value = max_limit
        index = int(0)
        for i in range(3):
            if wp.abs(diff[i]) < value:
                value = wp.abs(diff[i])
                index = i
        e = vec3(zero, zero, zero)
        if index == 0:
            e = vec3(one, zero, zero)
        elif index == 1:
            e = vec3(zero, one, zero)
        else:
            e = vec3(zero, zero, one)
        d1 = cross3(e, diff)
        R = rotmat120(diff)
        d2 = R * d1
        d3 = R * d2
        verts[s, 0] = simplex[s, 0]
        verts[s, 1] = simplex[s, 1]
        epa_support(verts, s, 2, o1, o2, d1, wp.length(d1))
        epa_support(verts, s, 3, o1, o2, d2, wp.length(d2))
        epa_support(verts, s, 4, o1, o2, d3, wp.length(d3))
        v3 = verts[s, 2].vert
        v4 = verts[s, 3].vert
        v5 = verts[s, 4].vert
        if attach_face(verts, faces, s, 0, center, 0, 2, 3, 1, 3, 2) < mindist2:
            replace_simplex3(simplex, verts, s, 0, 2, 3)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 1, center, 0, 4, 2, 2, 4, 0) < mindist2:
            replace_simplex3(simplex, verts, s, 0, 4, 2)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 2, center, 0, 3, 4, 0, 5, 1) < mindist2:
            replace_simplex3(simplex, verts, s, 0, 3, 4)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 3, center, 1, 3, 2, 5, 0, 4) < mindist2:
            replace_simplex3(simplex, verts, s, 1, 3, 2)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 4, center, 1, 2, 4, 3, 1, 5) < mindist2:
            replace_simplex3(simplex, verts, s, 1, 2, 4)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 5, center, 1, 4, 3, 4, 2, 3) < mindist2:
            replace_simplex3(simplex, verts, s, 1, 4, 3)
            return -1, 0, 0, 0, center
        if ray_triangle(v1, v2, v3, v4, v5) == 0:
            return 2, 5, 6, 0, center  # mjEPA_P2_NONCONVEX
        init_map(faces, fmap, s, 6)
        return 0, 5, 6, 6, center

    @wp.func
    def polytope4(simplex: wp.array2d(dtype=Vertex), verts: wp.array2d(dtype=Vertex),
                  faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int):
        """polytope4: the tetrahedron simplex[s, 0:4]; status -1: a face holds the origin and is
        now the triangle in simplex[s, 0:3] for polytope3."""
        for i in range(4):
            verts[s, i] = simplex[s, i]
        center = verts[s, 0].vert + verts[s, 1].vert
        center = center + verts[s, 2].vert
        center = center + verts[s, 3].vert
        center = center * scalar(0.25)
        if attach_face(verts, faces, s, 0, center, 0, 1, 2, 1, 3, 2) < mindist4:
            replace_simplex3(simplex, verts, s, 0, 1, 2)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 1, center, 0, 3, 1, 2, 3, 0) < mindist4:
            replace_simplex3(simplex, verts, s, 0, 3, 1)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 2, center, 0, 2, 3, 0, 3, 1) < mindist4:
            replace_simplex3(simplex, verts, s, 0, 2, 3)
            return -1, 0, 0, 0, center
        if attach_face(verts, faces, s, 3, center, 3, 2, 1, 2, 0, 1) < mindist4:
            replace_simplex3(simplex, verts, s, 3, 2, 1)
            return -1, 0, 0, 0, center
        if test_tetra(verts[s, 0].vert, verts[s, 1].vert, verts[s, 2].vert, verts[s, 3].vert) == 0:
            return 9, 4, 4, 0, center  # mjEPA_P4_MISSING_ORIGIN
        init_map(faces, fmap, s, 4)
        return 0, 4, 4, 4, center

    # ------------------------------------------------------------------ EPA expansion

    @wp.func
    def delete_face(faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int, f: int, nmap: int) -> int:
        """deleteFace: remove face f from the map (the last entry takes its place); new nmap."""
        face = faces[s, f]
        if face.index >= 0:
            nmap -= 1
            moved = fmap[s, nmap]
            fmap[s, face.index] = moved
            g = faces[s, moved]
            g.index = face.index
            faces[s, moved] = g
            face = faces[s, f]  # f itself may have been the moved face
        face.index = -2
        faces[s, f] = face
        return nmap

    @wp.func
    def get_edge(faces: wp.array2d(dtype=Face), s: int, f: int, vertex: int) -> int:
        v = faces[s, f].verts
        if v[0] == vertex:
            return 0
        if v[1] == vertex:
            return 1
        return 2

    @wp.func
    def visible(faces: wp.array2d(dtype=Face), s: int, f: int, w: vec3) -> bool:
        """horizonRec's test of the MuJoCo 4.0.1 binary: w lies beyond the face's plane by more
        than mjMINVAL relative to the face's distance, max(mjMINVAL |v|, mjMINVAL)."""
        face = faces[s, f]
        return wp.dot(face.v, w) - face.dist2 > wp.max(wp.sqrt(face.dist2) * minval, minval)

    @wp.func
    def horizon_from(faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), hz: wp.array2d(dtype=wp.vec2i),
                     stack: wp.array2d(dtype=wp.vec3i), s: int, f0: int, e0: int, w: vec3, nmap: int, nedges: int):
        """`if (!horizonRec(pt, f0, e0)) addEdge(pt, f0, e0)`, the recursion as an explicit
        stack of (face, edge, next k): (nmap, nedges)."""
        if not visible(faces, s, f0, w):
            hz[s, nedges] = wp.vec2i(f0, e0)
            return nmap, nedges + 1
        nmap = delete_face(faces, fmap, s, f0, nmap)
        sp = int(1)
        stack[s, 0] = wp.vec3i(f0, e0, 1)
        while sp > 0:
            top = stack[s, sp - 1]
            f = top[0]
            e = top[1]
            k = top[2]
            if k > 2:
                sp -= 1
                continue
            stack[s, sp - 1] = wp.vec3i(f, e, k + 1)
            i = (e + k) % 3
            face = faces[s, f]
            a = face.adj[i]
            if faces[s, a].index > -2:
                ae = get_edge(faces, s, a, face.verts[(i + 1) % 3])
                if visible(faces, s, a, w):
                    nmap = delete_face(faces, fmap, s, a, nmap)
                    stack[s, sp] = wp.vec3i(a, ae, 1)
                    sp += 1
                else:
                    hz[s, nedges] = wp.vec2i(a, ae)
                    nedges += 1
        return nmap, nedges

    @wp.func
    def horizon(faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), hz: wp.array2d(dtype=wp.vec2i),
                stack: wp.array2d(dtype=wp.vec3i), s: int, f: int, w: vec3, nmap: int):
        """horizon: delete the faces visible from w, starting at face f; (nmap, nedges), the
        horizon's (face, edge) pairs in hz[s, 0:nedges]."""
        nmap = delete_face(faces, fmap, s, f, nmap)
        face = faces[s, f]
        nedges = int(0)
        a = face.adj[0]
        nmap, nedges = horizon_from(faces, fmap, hz, stack, s, a, get_edge(faces, s, a, face.verts[1]), w, nmap,
                                    nedges)
        a = face.adj[1]
        if faces[s, a].index > -2:
            nmap, nedges = horizon_from(faces, fmap, hz, stack, s, a, get_edge(faces, s, a, face.verts[2]), w,
                                        nmap, nedges)
        a = face.adj[2]
        if faces[s, a].index > -2:
            nmap, nedges = horizon_from(faces, fmap, hz, stack, s, a, get_edge(faces, s, a, face.verts[0]), w,
                                        nmap, nedges)
        return nmap, nedges

    @wp.func
    def set_adj(faces: wp.array2d(dtype=Face), s: int, f: int, e: int, value: int):
        face = faces[s, f]
        adj = face.adj
        face.adj = wp.vec3i(wp.where(e == 0, value, adj[0]), wp.where(e == 1, value, adj[1]),
                            wp.where(e == 2, value, adj[2]))
        faces[s, f] = face

    @wp.func
    def add_to_map(faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int), s: int, f: int, nmap: int) -> int:
        fmap[s, nmap] = f
        face = faces[s, f]
        face.index = nmap
        faces[s, f] = face
        return nmap + 1

    @wp.func
    def epa(verts: wp.array2d(dtype=Vertex), faces: wp.array2d(dtype=Face), fmap: wp.array2d(dtype=int),
            hz: wp.array2d(dtype=wp.vec2i), stack: wp.array2d(dtype=wp.vec3i), s: int, o1: Obj, o2: Obj,
            nverts: int, nfaces: int, nmap: int, center: vec3, tol: scalar, max_iterations: int, maxfaces: int,
            discrete: int):
        """epa: expand the polytope toward the boundary of A-B nearest the origin; (nx, dist, x1,
        x2, vertex, face): one pair of witness points and their signed distance (-depth), or nx =
        0; the polytope's final face (its row in `faces`, -1 when none: multiccd's face clipping
        starts from its three vertices)."""
        upper = max_limit
        upper2 = max_limit
        face = int(-1)
        tolerance = tol
        if discrete != 0:
            tolerance = minepatol
        kmax = wp.min(max_iterations, 1000)
        k = int(0)
        while k < kmax:
            pface = face
            lower2 = max_limit
            for i in range(nmap):
                fi = fmap[s, i]
                if faces[s, fi].dist2 < lower2:
                    face = fi
                    lower2 = faces[s, fi].dist2
            if lower2 > upper2 or face < 0:
                face = pface
                break
            if lower2 <= zero:
                break  # MuJoCo warns: origin on the affine hull of a face
            lower = wp.sqrt(lower2)
            fv = faces[s, face].v
            wi = epa_support(verts, s, nverts, o1, o2, fv, lower)
            nverts += 1
            wv = verts[s, wi].vert
            upper_k = wp.dot(fv, wv) / lower
            if upper_k < upper:
                upper = upper_k
                upper2 = upper * upper
            # the MuJoCo 4.0.1 binary's epa stops on this step's bound (upper_k), not the least
            # one, and finds no contact on the first step when upper < lower - tolerance
            if upper_k - lower < tolerance:
                if k == 0 and upper < lower - tolerance:
                    face = -1
                break
            if discrete != 0:
                # a support point found before: the polytope cannot grow
                wnew = verts[s, wi]
                repeated = bool(False)
                for i in range(nverts - 1):
                    if verts[s, i].index1 == wnew.index1 and verts[s, i].index2 == wnew.index2:
                        repeated = True
                        break
                if repeated:
                    break
            nmap, nedges = horizon(faces, fmap, hz, stack, s, face, wv, nmap)
            if nedges < 3:
                face = -1
                break
            if nedges > maxfaces - nfaces:
                break  # MuJoCo warns: out of memory for faces
            nfaces0 = nfaces
            failed = int(0)
            for i in range(nedges):
                cur = nfaces0 + i
                prev = cur - 1
                if i == 0:
                    prev = nfaces0 + nedges - 1
                nxt = nfaces0 + (i + 1) % nedges
                he = hz[s, i]
                hv = faces[s, he[0]].verts
                v1 = hv[he[1]]
                v2 = hv[(he[1] + 1) % 3]
                set_adj(faces, s, he[0], he[1], cur)
                dist2 = attach_face(verts, faces, s, nfaces, center, wi, v2, v1, prev, he[0], nxt)
                nfaces += 1
                if dist2 == zero:
                    # the MuJoCo 4.0.1 binary's epa ends here with the face it expanded
                    failed = 1
                    break
                if dist2 >= lower2 and dist2 <= upper2:
                    nmap = add_to_map(faces, fmap, s, nfaces - 1, nmap)
            if failed != 0:
                break
            if nmap == 0:
                break
            k += 1
        if face < 0:
            return 0, zero, center, center, 0, -1
        fc = faces[s, face]
        a = verts[s, fc.verts[0]]
        b = verts[s, fc.verts[1]]
        c = verts[s, fc.verts[2]]
        lam = tri_affine(a.vert, b.vert, c.vert, fc.v)
        x1 = vec3(lam[0] * a.vert1[0] + lam[1] * b.vert1[0] + lam[2] * c.vert1[0],
                  lam[0] * a.vert1[1] + lam[1] * b.vert1[1] + lam[2] * c.vert1[1],
                  lam[0] * a.vert1[2] + lam[1] * b.vert1[2] + lam[2] * c.vert1[2])
        x2 = vec3(lam[0] * a.vert2[0] + lam[1] * b.vert2[0] + lam[2] * c.vert2[0],
                  lam[0] * a.vert2[1] + lam[1] * b.vert2[1] + lam[2] * c.vert2[1],
                  lam[0] * a.vert2[2] + lam[1] * b.vert2[2] + lam[2] * c.vert2[2])
        # which witness is one vertex of its polytope (the final face's three points share it)
        vertex = int(0)
        if a.index1 >= 0 and a.index1 == b.index1 and b.index1 == c.index1 and o1.type != GeomType.CYLINDER:
            vertex = 1
        if a.index2 >= 0 and a.index2 == b.index2 and b.index2 == c.index2 and o2.type != GeomType.CYLINDER:
            vertex += 2
        return 1, -wp.sqrt(fc.dist2), x1, x2, vertex, face

    # ------------------------------------------------------------------ mjc_ccd

    @wp.func
    def copy_obj(o: Obj) -> Obj:
        r = Obj()
        r.type = o.type
        r.pos = o.pos
        r.mat = o.mat
        r.size = o.size
        r.margin = o.margin
        r.vec = o.vec
        r.ints = o.ints
        r.vertadr = o.vertadr
        r.vertnum = o.vertnum
        r.graphadr = o.graphadr
        r.extadr = o.extadr
        r.cache = o.cache
        r.row = o.row
        r.col = o.col
        r.prism_lo = o.prism_lo
        r.prism_hi = o.prism_hi
        return r

    @wp.func
    def obj_center(o: Obj) -> vec3:
        """mjc_center: GJK's first point of a shape, its position, or a prism's vertex mean."""
        if o.type == GeomType.HFIELD:
            lo = o.prism_lo
            hi = o.prism_hi
            c = vec3(zero, zero, zero)
            for i in range(3):
                c = c + vec3(lo[i, 0], lo[i, 1], lo[i, 2])
            for i in range(3):
                c = c + vec3(hi[i, 0], hi[i, 1], hi[i, 2])
            return c * (one / scalar(6.0))
        return o.pos

    @wp.func
    def is_discrete(o: Obj) -> int:
        """discreteGeoms as the MuJoCo 4.0.1 binary has it (its gjk compares each object's
        support function with mjc_pointSupport and mjc_lineSupport): a box, mesh, prism, or
        the core of a sphere (a point) or capsule (a segment), without margin: GJK's search
        ends in finitely many steps, so it runs without the duality-gap tolerance."""
        if o.margin == zero and (o.type == GeomType.BOX or o.type == GeomType.MESH or o.type == GeomType.HFIELD
                                 or o.type == GEOM_POINT or o.type == GEOM_LINE):
            return 1
        return 0

    @wp.func
    def shrink(o: Obj, core_margin: bool) -> Obj:
        """A shape's core (mjc_ccd): a sphere as its centre, a capsule as its segment, without
        margin; another shape without its margin when `core_margin`."""
        r = copy_obj(o)
        if o.type == GeomType.SPHERE:
            r.type = GEOM_POINT
            r.margin = zero
        elif o.type == GeomType.CAPSULE:
            r.type = GEOM_LINE
            r.margin = zero
        elif core_margin:
            r.margin = zero
        return r

    @wp.func
    def full_margin(o: Obj, core_margin: bool) -> scalar:
        """How far the shape reaches beyond its core."""
        if o.type == GeomType.SPHERE or o.type == GeomType.CAPSULE:
            return o.size[0] + half * o.margin
        if core_margin:
            return half * o.margin
        return zero

    @wp.func
    def normalize(v: vec3) -> vec3:
        """mju_normalize3 (without the norm)."""
        norm = wp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        if norm < minval:
            return vec3(one, zero, zero)
        inv = one / norm
        return vec3(v[0] * inv, v[1] * inv, v[2] * inv)

    @wp.func
    def ccd(simplex: wp.array2d(dtype=Vertex), verts: wp.array2d(dtype=Vertex), faces: wp.array2d(dtype=Face),
            fmap: wp.array2d(dtype=int), hz: wp.array2d(dtype=wp.vec2i), stack: wp.array2d(dtype=wp.vec3i), s: int,
            o1: Obj, o2: Obj, tol: scalar, max_iterations: int, maxfaces: int, clip: int):
        """mjc_ccd with max_contacts 1 and dist_cutoff 0 (as mjc_penetration calls it): (nx,
        dist, x1, x2, vertex, face); a contact when nx = 1 and dist < 0 (the depth of the shapes
        inflated by half the margin each); vertex: bit 0 (1) when x1 is one vertex of a box or
        mesh, bit 1 (2) when x2 is (EPA's final face has it three times); face: EPA's final face,
        or 0 for GJK's simplex of the cores when they did not penetrate (-1 when neither: no
        contact, or EPA failed), from which simrl.sim.collision_multiccd clips faces for more
        contacts (mjc_ccd's `multicontact` when max_contacts > 1).

        A sphere's core is its centre, a capsule's its segment; for a face-clipping pair (`clip`,
        MuJoCo 4.0) or a height field's prism (mjc_ConvexHField, with or without multiccd) with
        a margin, a box's, mesh's, cylinder's or prism's core is itself without the margin. GJK
        runs on the cores first; only when they penetrate do GJK and EPA run on the full
        shapes."""
        x1 = obj_center(o1)
        x2 = obj_center(o2)
        # MuJoCo 4.0's prism contacts within a margin are exact on flat faces (a box 4 mm over a
        # flat field, margin 1 cm: dist 0.004 to rounding), as GJK on the cores gives
        core_margin = ((clip != 0 or o1.type == GeomType.HFIELD or o2.type == GeomType.HFIELD)
                       and (o1.margin > zero or o2.margin > zero))
        if (o1.type == GeomType.SPHERE or o2.type == GeomType.SPHERE or o1.type == GeomType.CAPSULE
                or o2.type == GeomType.CAPSULE or core_margin):
            m1 = full_margin(o1, core_margin)
            m2 = full_margin(o2, core_margin)
            c1 = shrink(o1, core_margin)
            c2 = shrink(o2, core_margin)
            separated, dist, x1, x2, nsimplex, nx = gjk(simplex, s, c1, c2, x1, x2, tol, max_iterations, m1 + m2,
                                                        is_discrete(c1) * is_discrete(c2))
            if dist > tol:
                # shallow penetration: the distance of the cores, inflated (`inflate`)
                n = normalize(x2 - x1)
                if m1 != zero:
                    x1 = x1 + n * m1
                if m2 != zero:
                    x2 = x2 - n * m2
                dist = dist - (m1 + m2)
                if dist > zero or nsimplex < 1:
                    if dist > zero:
                        dist = max_limit
                    return nx, dist, x1, x2, 0, -1
                # the cores' simplex as the face multiccd starts from (MuJoCo 4.0: a capsule's
                # side lying on a face is found without EPA); its vertices 0, 1, 2 (repeated when
                # the simplex is smaller)
                verts[s, 0] = simplex[s, 0]
                verts[s, 1] = simplex[s, wp.min(nsimplex - 1, 1)]
                verts[s, 2] = simplex[s, wp.min(nsimplex - 1, 2)]
                f = Face()
                f.verts = wp.vec3i(0, 1, 2)
                faces[s, 0] = f
                return nx, dist, x1, x2, 0, 0
            # deep penetration: GJK and EPA on the full shapes
            x1 = obj_center(o1)
            x2 = obj_center(o2)
        discrete = is_discrete(o1) * is_discrete(o2)
        separated, dist, x1, x2, nsimplex, nx = gjk(simplex, s, o1, o2, x1, x2, tol, max_iterations, zero, discrete)
        vertex = int(0)
        face = int(-1)
        if dist <= tol and nsimplex > 1 and separated == 0:
            dist = zero
            status = int(0)
            nverts = int(0)
            nfaces = int(0)
            nmap = int(0)
            center = vec3(zero, zero, zero)
            if nsimplex == 2:
                status, nverts, nfaces, nmap, center = polytope2(simplex, verts, faces, fmap, s, o1, o2)
            elif nsimplex == 4:
                status, nverts, nfaces, nmap, center = polytope4(simplex, verts, faces, fmap, s)
            else:
                status = -1
            if status == -1:
                status, nverts, nfaces, nmap, center = polytope3(simplex, verts, faces, fmap, s, o1, o2, dist)
            nx = 0
            if status == 0:
                nx, dist, x1, x2, vertex, face = epa(verts, faces, fmap, hz, stack, s, o1, o2, nverts, nfaces,
                                                     nmap, center, tol, max_iterations, maxfaces, discrete)
        return nx, dist, x1, x2, vertex, face

    return types.SimpleNamespace(ccd=ccd, support=support, support_idx=support_idx, mesh_support=mesh_support,
                                 grid=grid, hill_climb=hill_climb,
                                 copy_obj=copy_obj, vdot=vdot, normalize=normalize)
