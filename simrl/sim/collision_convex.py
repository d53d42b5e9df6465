"""Convex pairs (mjc_Convex, mjc_PlaneConvex, mjc_ConvexHField of engine_collision_convex.c):
ellipsoids with anything, cylinders with capsules, cylinders and boxes, meshes with anything,
height fields with anything but planes.

A convex pair is collided in two passes over the candidate pairs:

1. `detect(m, d, w, p, s, slot)` runs MuJoCo's GJK/EPA (simrl.sim.collision_gjk) as mjc_Convex does:
   one penetration query at the geoms' poses; for the pairs of two boxes, meshes or cylinders
   or a capsule and one of those (multiccd, on unless `<flag multiccd="disable"/>`), up to
   four contacts by clipping the touching faces (simrl.sim.collision_multiccd, MuJoCo 4.0's
   `multicontact`, with or without a margin). It stores, per contact slot, the normal and the
   two witness points as points of the geoms (in each geom's frame): `d.ccd_contact` (at the
   pair's contact slots, Data.collision_adr; in scratch row s). Not differentiated: which points
   touch changes piecewise.
2. `contacts(m, d, w, i)` (the narrow phase proper, for entry i of the kept pairs, recorded on
   the tape) rebuilds each contact from the geoms' poses: the witness points moved with their geoms, pos their midpoint,
   dist = margin - n . (x1 - x2) with the normal n held fixed. At the poses detection saw,
   these are MuJoCo's values; their derivatives are those of the distance at a fixed normal,
   which for smooth shapes is the exact derivative of the penetration depth (the witness
   points are support points along n, envelope theorem); the normal's own derivative is left
   out (documented in docs/GUIDE.md).

Plane-ellipsoid is closed form (mjc_PlaneConvex: the ellipsoid's support point along the
plane's inward normal) and lives here with the collider signature of collision_primitive.
"""

import functools
import types

import warp as wp

from simrl.sim import collision_gjk, collision_multiccd
from simrl.sim.contact_tables import (
    CONVEX_KINDS,
    HFIELD_KINDS,
    KIND_PLANE_MESH,
    MAX_CONTACTS,
    PAIR_KIND,
)
from simrl.sim.data import ccd_structs, data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import GeomType, scalar_types

#: contact slots of each convex kind
CONVEX_SLOTS = {PAIR_KIND[pair]: n for pair, n in MAX_CONTACTS.items() if PAIR_KIND[pair] in CONVEX_KINDS}
KIND_HFIELD0, KIND_HFIELD1 = HFIELD_KINDS[0], HFIELD_KINDS[-1]


@functools.cache
def frames(scalar):
    """make_frame, smooth, track in precision `scalar`: the contact frame of a normal and the
    witness points' motion, for the detection (float64) and the contacts (the model's
    precision)."""
    T = scalar_types(scalar)
    vec3, mat33 = T.vec3, T.mat33
    gjk = collision_gjk.build(scalar)
    zero, one, half = scalar(0.0), scalar(1.0), scalar(0.5)

    @wp.func
    def make_frame(normal: vec3) -> mat33:
        """mju_makeFrame of a normal with no tangent (rows: normal, tangents)."""
        x = gjk.normalize(normal)
        y = vec3(zero, zero, one)
        if x[1] < half and x[1] > -half:
            y = vec3(zero, one, zero)
        y = y - x * wp.dot(x, y)
        y = gjk.normalize(y)
        z = wp.cross(x, y)
        return mat33(x[0], x[1], x[2], y[0], y[1], y[2], z[0], z[1], z[2])

    _, _, Obj, _ = ccd_structs(scalar)
    eps = scalar(1e-6)

    @wp.func
    def smooth(gtype: int, R: mat33, n: vec3) -> int:
        """1 when a geom's support point along n is unique and moves smoothly with its pose (a
        sphere's or ellipsoid's always, a capsule's off its side, a cylinder's on its rim)."""
        if gtype == GeomType.SPHERE or gtype == GeomType.ELLIPSOID:
            return 1
        ld = wp.transpose(R) * n
        if gtype == GeomType.CAPSULE and wp.abs(ld[2]) > eps:
            return 1
        if gtype == GeomType.CYLINDER and wp.abs(ld[2]) > eps and ld[0] * ld[0] + ld[1] * ld[1] > eps * eps:
            return 1
        return 0

    @wp.func
    def support(gtype: int, p: vec3, R: mat33, size: vec3, margin: scalar, d: vec3) -> vec3:
        o = Obj()
        o.type = gtype
        o.pos = p
        o.mat = R
        o.size = size
        o.margin = margin
        return gjk.support(o, d)

    @wp.func
    def side(t: int, p: vec3, R: mat33, size: vec3, margin: scalar, x: vec3, d: vec3) -> vec3:
        """The point of a cylinder's or capsule's side at x's height along the axis, on the line of
        the side that faces d (a side line of a face clipping: it rolls as the geom turns about its
        axis). x: in the geom's frame, on the side (a capsule's inflated by half the margin)."""
        ld = wp.transpose(R) * d
        r = wp.sqrt(x[0] * x[0] + x[1] * x[1])
        n2 = ld[0] * ld[0] + ld[1] * ld[1]
        local = x
        if n2 > zero:
            scl = r / wp.sqrt(n2)
            local = vec3(ld[0] * scl, ld[1] * scl, x[2])
        return R * local + p

    @wp.func
    def track(t1: int, p1: vec3, R1: mat33, s1: vec3, x1: vec3, t2: int, p2: vec3, R2: mat33, s2: vec3, x2: vec3,
              margin: scalar, n: vec3, feature: int):
        """Where a contact's two witness points are for the given poses, the normal n held fixed:
        a smooth shape's support point along n (feature bits 0, 1), a point of a cylinder's or
        capsule's side line (bits 4, 5: `side`), else the material point x1, x2 (each geom's
        frame); when only one side is such a point (smooth, a side's or a polytope's vertex,
        bits 2, 3) the other is that point's projection on the other's tangent plane (a sphere on
        a face: the face's witness slides with the sphere). The contacts are rebuilt
        as witness = track(...) + the offset recorded at detection, so that their values are
        MuJoCo's and their derivatives these points' motion."""
        M1 = R1 * x1 + p1
        M2 = R2 * x2 + p2
        F1 = M1
        F2 = M2
        if feature & 1 != 0:
            F1 = support(t1, p1, R1, s1, margin, n)
        if feature & 2 != 0:
            F2 = support(t2, p2, R2, s2, margin, -n)
        if feature & 16 != 0:
            F1 = side(t1, p1, R1, s1, margin, x1, n)
        if feature & 32 != 0:
            F2 = side(t2, p2, R2, s2, margin, x2, -n)
        point1 = (feature & 21) != 0
        point2 = (feature & 42) != 0
        if point1 and not point2:
            F2 = F1 - n * wp.dot(n, F1 - M2)
        elif point2 and not point1:
            F1 = F2 - n * wp.dot(n, F2 - M1)
        return F1, F2

    return types.SimpleNamespace(make_frame=make_frame, smooth=smooth, track=track)


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    vec3, mat33 = T.vec3, T.mat33
    Model, Data = model_struct(scalar), data_struct(scalar)
    _, _, _, ConvexContact = ccd_structs(scalar)
    # the search runs in float64 whatever the model's precision: GJK's and EPA's stopping tests
    # (a duality gap of ccd_tolerance^2 / 2, 1e-13) are below float32's resolution, where GJK
    # stalls up to a millimetre short (measured on sphere-ellipsoid)
    f64 = wp.float64
    T64 = scalar_types(f64)
    vec3d, mat33d = T64.vec3, T64.mat33
    _, _, Obj, _ = ccd_structs(f64)
    gjk = collision_gjk.build(f64)
    gjk_s = collision_gjk.build(scalar)
    multiccd = collision_multiccd.build(scalar)
    fr, fr64 = frames(scalar), frames(f64)
    make_frame = fr.make_frame
    _, _, ObjS, _ = ccd_structs(scalar)
    zero, half = scalar(0.0), scalar(0.5)
    zero64, half64 = f64(0.0), f64(0.5)

    @wp.func
    def obj(m: Model, d: Data, w: int, g: int, margin: scalar, s: int, col: int) -> Obj:
        """mjc_initCCDObj of geom g (a mesh's support cache in row s, columns col, col + 1)."""
        o = Obj()
        o.type = m.geom_type[g]
        o.pos = vec3d(d.geom_xpos[w, g])
        o.mat = mat33d(d.geom_xmat[w, g])
        o.size = vec3d(m.geom_size[g])
        o.margin = f64(margin)
        o.vec = m.mesh_vec
        o.ints = m.mesh_int
        o.cache = d.ccd_index
        o.row = s
        o.col = col
        o.graphadr = -1
        if o.type == GeomType.MESH:
            mesh = m.mesh_info[m.geom_dataid[g]]
            o.vertadr = mesh.vertadr
            o.vertnum = mesh.vertnum
            o.graphadr = mesh.graphadr
            o.extadr = mesh.extadr
            o.cache[s, col] = -1
            o.cache[s, col + 1] = -1
        return o

    @wp.func
    def penetration(d: Data, s: int, o1: Obj, o2: Obj, m: Model, clip: int):
        """mjc_penetration: (found, normal, x1, x2, pos, vertex, face) of the contact of o1 and o2
        (face: EPA's final face, or GJK's simplex, for multiccd's face clipping when `clip`)."""
        nx, dist, x1, x2, vertex, face = gjk.ccd(d.ccd_simplex, d.ccd_vert, d.ccd_face, d.ccd_map, d.ccd_horizon,
                                                 d.ccd_stack, s, o1, o2, f64(m.ccd_tolerance), m.ccd_iterations,
                                                 m.ccd_maxfaces, clip)
        found = nx > 0 and dist < zero64
        return found, gjk.normalize(x1 - x2), x1, x2, (x1 + x2) * half64, vertex, face

    @wp.func
    def record(d: Data, w: int, i: int, o1: Obj, o2: Obj, normal: vec3d, x1: vec3d, x2: vec3d, pos: vec3d,
               vertex: int, clipped: int, shift1: vec3d, shift2: vec3d):
        """Contact slot i from its normal and witness points; `clipped`: a point of a face clipping,
        whose witnesses are points of their polygons (moved out by the margins, shift1 and shift2,
        which stay fixed in the world as the geoms turn), not support points along the normal."""
        c = ConvexContact()
        c.normal = vec3(normal)
        c.x1 = vec3(wp.transpose(o1.mat) * (x1 - shift1 - o1.pos))
        c.x2 = vec3(wp.transpose(o2.mat) * (x2 - shift2 - o2.pos))
        c.pos = vec3(pos)
        c.found = 1
        # how the witness points follow the poses (the contacts pass: track)
        feature = 4 * vertex
        if clipped == 0:
            feature += fr64.smooth(o1.type, o1.mat, normal) + 2 * fr64.smooth(o2.type, o2.mat, normal)
        F1, F2 = fr64.track(o1.type, o1.pos, o1.mat, o1.size, vec3d(c.x1), o2.type, o2.pos, o2.mat, o2.size,
                            vec3d(c.x2), o2.margin, vec3d(c.normal), feature)
        c.feature = feature
        c.offset1 = vec3(x1 - F1)
        c.offset2 = vec3(x2 - F2)
        d.ccd_contact[w, i] = c

    @wp.func
    def face_area(m: Model, vertadr: int, fa: int, a: int, b: int, c: int, e: int) -> f64:
        """Area of the quadrilateral of face vertices a, b, c, e (hull4's measure)."""
        va = vec3d(m.mesh_vec[vertadr + m.mesh_int[fa + a]])
        vb = vec3d(m.mesh_vec[vertadr + m.mesh_int[fa + b]])
        vc = vec3d(m.mesh_vec[vertadr + m.mesh_int[fa + c]])
        ve = vec3d(m.mesh_vec[vertadr + m.mesh_int[fa + e]])
        return half64 * wp.length(wp.cross(va - vc, vb - ve))

    @wp.func
    def hull4(m: Model, vertadr: int, fa: int, nhull: int, a: int):
        """At most four vertices of a convex face polygon of nhull vertices, keeping vertex a, that
        span the largest area (hull4f: each of d, c, b advanced while the area grows)."""
        b = (a + 1) % nhull
        c = (a + 2) % nhull
        e = (a + 3) % nhull
        if nhull <= 4:
            return nhull, wp.vec4i(a, b, c, e)
        area = face_area(m, vertadr, fa, a, b, c, e)
        while True:
            e_next = (e + 1) % nhull
            area_next = face_area(m, vertadr, fa, a, b, c, e_next)
            if area_next <= area:
                break
            e = e_next
            area = area_next
            while True:
                c_next = (c + 1) % nhull
                area_next = face_area(m, vertadr, fa, a, b, c_next, e)
                if area_next <= area:
                    break
                c = c_next
                area = area_next
            while True:
                b_next = (b + 1) % nhull
                area_next = face_area(m, vertadr, fa, a, b_next, c, e)
                if area_next <= area:
                    break
                b = b_next
                area = area_next
        return 4, wp.vec4i(a, b, c, e)

    @wp.func
    def plane_mesh_vertex(m: Model, d: Data, w: int, i: int, mesh_vertadr: int, v: int, normal: vec3d,
                          p1: vec3d, margin: f64, p2: vec3d, R2: mat33d):
        """Record mesh vertex v as the contact in slot i (its distance to the plane within margin)."""
        local = vec3d(m.mesh_vec[mesh_vertadr + v])
        pnt = R2 * local + p2
        dist = wp.dot(normal, pnt - p1)
        if dist > margin:
            return 0
        c = ConvexContact()
        c.normal = vec3(normal)
        c.x2 = vec3(local)
        c.pos = vec3(pnt - normal * (half64 * dist))
        c.found = 1
        d.ccd_contact[w, i] = c
        return 1

    @wp.func
    def plane_mesh(m: Model, d: Data, w: int, g1: int, g2: int, margin: scalar, slot: int):
        """mjc_PlaneConvex for a mesh, as MuJoCo 4.0: the hull vertex deepest below the plane, then
        up to three more vertices of the hull polygon through it whose normal is most opposed to
        the plane's (hull4 of that polygon), skipping those above the mesh's centre along the
        normal; contacts farther than the margin are dropped. Writes d.ccd_contact's slots."""
        p1 = vec3d(d.geom_xpos[w, g1])
        R1 = mat33d(d.geom_xmat[w, g1])
        p2 = vec3d(d.geom_xpos[w, g2])
        R2 = mat33d(d.geom_xmat[w, g2])
        normal = vec3d(R1[0, 2], R1[1, 2], R1[2, 2])
        rbound = f64(m.geom_rbound[g2])
        if wp.dot(p2 - p1, normal) > f64(margin) + rbound:
            return  # mj_filterSphere (plane)
        mesh = m.mesh_info[m.geom_dataid[g2]]
        local_normal = wp.transpose(R2) * normal
        ld = -local_normal
        # the support vertex along -normal (exhaustive, or a hill climb from the direction's seed)
        vi = int(-1)
        if mesh.graphadr < 0 or mesh.vertnum < collision_gjk.HILLCLIMB_MIN:
            mx = f64(-3.4028234663852886e38)
            for i in range(mesh.vertnum):
                vd = gjk.vdot(ld, m.mesh_vec[mesh.vertadr + i])
                if vd > mx:
                    mx = vd
                    vi = i
        else:
            seed = m.mesh_int[mesh.extadr + gjk.grid(ld[0]) * 9 + gjk.grid(ld[1]) * 3 + gjk.grid(ld[2])]
            imax = gjk.hill_climb(m.mesh_vec, m.mesh_int, mesh.vertadr, mesh.graphadr, seed, ld)
            vi = m.mesh_int[mesh.graphadr + 2 + m.mesh_int[mesh.graphadr] + imax]
        if vi < 0:
            return
        if plane_mesh_vertex(m, d, w, slot, mesh.vertadr, vi, normal, p1, f64(margin), p2, R2) == 0:
            return
        if mesh.polynum <= 0:
            return
        # the polygon through the vertex most opposed to the plane's normal
        best = int(-1)
        best_dot = f64(1.0)
        mapadr = m.mesh_int[mesh.vert_mapadr + vi]
        mapnum = m.mesh_int[mesh.vert_mapnum + vi]
        for i in range(mapnum):
            poly = m.mesh_int[mapadr + i]
            nd = wp.dot(m.mesh_polynormal[mesh.poly_normal + poly], local_normal)
            if nd < best_dot:
                best_dot = nd
                best = poly
        if best < 0:
            return
        fa = m.mesh_int[mesh.poly_vertadr + best]
        fn = m.mesh_int[mesh.poly_vertnum + best]
        a = int(0)
        for i in range(fn):
            if m.mesh_int[fa + i] == vi:
                a = i
                break
        n, idx = hull4(m, mesh.vertadr, fa, fn, a)
        ncon = int(1)
        for i in range(1, n):
            v = m.mesh_int[fa + idx[i]]
            pnt = R2 * vec3d(m.mesh_vec[mesh.vertadr + v]) + p2
            if wp.dot(normal, pnt - p2) > zero64:
                continue
            ncon += plane_mesh_vertex(m, d, w, slot + ncon, mesh.vertadr, v, normal, p1, f64(margin), p2, R2)

    @wp.func
    def prism_vert(o: Obj, hf: wp.array(dtype=wp.float32), adr: int, ncol: int, r: int, c: int, i: int, dx: f64,
                   dy: f64, size: wp.vec4d) -> Obj:
        """addPrismVert: the prism's vertices shifted by one, the new one the field's point
        (r + 1 - i, c)."""
        q = gjk.copy_obj(o)
        lo = o.prism_lo
        hi = o.prism_hi
        dr = 1 - i
        x = dx * f64(c) - size[0]
        y = dy * f64(r + dr) - size[1]
        z = f64(hf[adr + (r + dr) * ncol + c]) * size[2]
        q.prism_lo = mat33d(lo[1, 0], lo[1, 1], lo[1, 2], lo[2, 0], lo[2, 1], lo[2, 2], x, y, lo[2, 2])
        q.prism_hi = mat33d(hi[1, 0], hi[1, 1], hi[1, 2], hi[2, 0], hi[2, 1], hi[2, 2], x, y, z)
        return q

    @wp.func
    def hfield_pair(m: Model, d: Data, w: int, g1: int, g2: int, margin: scalar, slot: int, nslot: int, s: int):
        """mjc_ConvexHField as MuJoCo 4.0 runs it: the geom in the field's frame, its bounding box
        by its support points, then GJK/EPA against each prism of the cells under the box grown
        by the margin (two per cell, those whose top is within the margin of the geom's lowest
        point), one contact each, until the pair's slots (at most MAXCONPAIR) are full.

        The margin (the pair's margin + gap) enters as in mjc_Convex: the prism and the geom are
        each inflated by half of it, GJK runs first on the two without it (collision_gjk.ccd),
        and a contact's dist is margin - depth: a prism within the margin of the geom gives a
        contact at their true distance. This is MuJoCo 4.0's rule, measured against its wheel
        (tests/test_hfield.py); the published C source of mjc_ConvexHField (3.x) raises each
        prism's top by the margin instead, which reports dist 1.5 margins lower."""
        p1 = vec3d(d.geom_xpos[w, g1])
        R1 = mat33d(d.geom_xmat[w, g1])
        p2 = vec3d(d.geom_xpos[w, g2])
        R2 = mat33d(d.geom_xmat[w, g2])
        info = m.hfield_info[m.geom_dataid[g1]]
        size = info.size
        mg = f64(margin)
        local_pos = wp.transpose(R1) * (p2 - p1)
        radius = f64(m.geom_rbound[g2]) + mg
        # box-sphere test
        if (size[0] < local_pos[0] - radius or -size[0] > local_pos[0] + radius
                or size[1] < local_pos[1] - radius or -size[1] > local_pos[1] + radius
                or size[2] < local_pos[2] - radius or -size[3] > local_pos[2] + radius):
            return
        o2 = obj(m, d, w, g2, scalar(0.0), s, 2)
        o2.pos = local_pos
        o2.mat = wp.transpose(R1) * R2
        # the geom's bounding box in the field's frame
        xmax = gjk.support(o2, vec3d(f64(1.0), zero64, zero64))[0]
        xmin = gjk.support(o2, vec3d(f64(-1.0), zero64, zero64))[0]
        ymax = gjk.support(o2, vec3d(zero64, f64(1.0), zero64))[1]
        ymin = gjk.support(o2, vec3d(zero64, f64(-1.0), zero64))[1]
        zmax = gjk.support(o2, vec3d(zero64, zero64, f64(1.0)))[2]
        zmin = gjk.support(o2, vec3d(zero64, zero64, f64(-1.0)))[2]
        if (xmin - mg > size[0] or xmax + mg < -size[0] or ymin - mg > size[1] or ymax + mg < -size[1]
                or zmin - mg > size[2] or zmax + mg < -size[3]):
            return
        nrow = info.nrow
        ncol = info.ncol
        # the cells under the box grown by the margin: a prism beside the geom but within the
        # margin gives a contact (checked against MuJoCo 4.0; contact_tables.hfield_slots counts
        # the same cells)
        cmin = wp.max(0, int(wp.floor((xmin - mg + size[0]) / (f64(2.0) * size[0]) * f64(ncol - 1))))
        cmax = wp.min(ncol - 1, int(wp.ceil((xmax + mg + size[0]) / (f64(2.0) * size[0]) * f64(ncol - 1))))
        rmin = wp.max(0, int(wp.floor((ymin - mg + size[1]) / (f64(2.0) * size[1]) * f64(nrow - 1))))
        rmax = wp.min(nrow - 1, int(wp.ceil((ymax + mg + size[1]) / (f64(2.0) * size[1]) * f64(nrow - 1))))
        o2.margin = mg
        dx = (f64(2.0) * size[0]) / f64(ncol - 1)
        dy = (f64(2.0) * size[1]) / f64(nrow - 1)
        o1 = Obj()
        o1.type = GeomType.HFIELD
        o1.pos = vec3d(zero64, zero64, zero64)
        o1.mat = wp.identity(3, dtype=f64)
        o1.margin = mg
        o1.graphadr = -1
        bottom = -size[3]
        o1.prism_lo = mat33d(zero64, zero64, bottom, zero64, zero64, bottom, zero64, zero64, bottom)
        o1.prism_hi = mat33d(zero64, zero64, zero64, zero64, zero64, zero64, zero64, zero64, zero64)
        ncon = int(0)
        for r in range(rmin, rmax):
            if ncon >= nslot:
                break
            o1 = prism_vert(o1, m.hfield_data, info.adr, ncol, r, cmin, 0, dx, dy, size)
            o1 = prism_vert(o1, m.hfield_data, info.adr, ncol, r, cmin, 1, dx, dy, size)
            for c in range(cmin + 1, cmax + 1):
                if ncon >= nslot:
                    break
                for i in range(2):
                    if ncon >= nslot:
                        break
                    o1 = prism_vert(o1, m.hfield_data, info.adr, ncol, r, c, i, dx, dy, size)
                    # a prism whose top is more than the margin below the geom cannot touch it
                    top = o1.prism_hi
                    low = zmin - mg
                    if top[0, 2] < low and top[1, 2] < low and top[2, 2] < low:
                        continue
                    found, normal, x1, x2, pos, vertex, _face = penetration(d, s, o1, o2, m, 0)
                    if found:
                        # the field's world pose and the geom's, to record the contact in (read
                        # again here: held across the search, they cost a GPU thread registers)
                        w1 = Obj()
                        w1.type = GeomType.HFIELD
                        w1.pos = vec3d(d.geom_xpos[w, g1])
                        w1.mat = mat33d(d.geom_xmat[w, g1])
                        w1.margin = mg
                        w2 = gjk.copy_obj(o2)
                        w2.pos = vec3d(d.geom_xpos[w, g2])
                        w2.mat = mat33d(d.geom_xmat[w, g2])
                        record(d, w, slot + ncon, w1, w2, w1.mat * normal, w1.mat * x1 + w1.pos,
                               w1.mat * x2 + w1.pos, w1.mat * pos + w1.pos, vertex, 0, vec3d(), vec3d())
                        ncon += 1

    @wp.func
    def clear_slots(d: Data, w: int, slot: int, nslot: int):
        for i in range(nslot):
            c = ConvexContact()
            c.found = 0
            d.ccd_contact[w, slot + i] = c

    @wp.func
    def detect_plane_mesh(m: Model, d: Data, w: int, p: int, s: int, slot: int, nslot: int):
        """Pass 1 for a plane-mesh pair p (mjc_PlaneConvex): into d.ccd_contact from `slot`.

        Model: cpair_gap, cpair_geom, cpair_margin, geom_dataid, geom_rbound,
        mesh_info, mesh_int, mesh_polynormal, mesh_vec. Data in: geom_xpos, geom_xmat. Data out: ccd_contact (the
        pair's slots)."""
        clear_slots(d, w, slot, nslot)
        g = m.cpair_geom[p]
        plane_mesh(m, d, w, g[0], g[1], m.cpair_margin[p] + m.cpair_gap[p], slot)

    @wp.func
    def detect_hfield(m: Model, d: Data, w: int, p: int, s: int, slot: int, nslot: int):
        """Pass 1 for a height field pair p (mjc_ConvexHField): into d.ccd_contact's nslot slots
        from `slot` (the prisms the broadphase found can touch, at most the pair's slots).

        Model: ccd_iterations, ccd_maxfaces, ccd_tolerance, cpair_ccd, cpair_gap, cpair_geom,
        cpair_margin, geom_dataid, geom_rbound, geom_size, geom_type, hfield_data, hfield_info,
        mesh_info, mesh_int, mesh_vec. Data in: geom_xpos, geom_xmat. Data out: ccd_contact (the pair's
        entries); the scratch rows of the pair (ccd_simplex, ccd_vert, ccd_face, ccd_map, ccd_horizon, ccd_stack,
        ccd_index)."""
        clear_slots(d, w, slot, nslot)
        g = m.cpair_geom[p]
        hfield_pair(m, d, w, g[0], g[1], m.cpair_margin[p] + m.cpair_gap[p], slot, nslot, s)

    @wp.func
    def detect_gjk(m: Model, d: Data, w: int, p: int, s: int, slot: int, nslot: int):
        """Pass 1 for a convex pair p of two geoms (mjc_Convex): GJK/EPA, and multiccd's face
        clipping where the pair has the slots for it, into d.ccd_contact from `slot`.

        Model: ccd_iterations, ccd_maxfaces, ccd_ndeg, ccd_npolygon, ccd_tolerance, cpair_ccd,
        cpair_gap, cpair_geom, cpair_margin, enable_multiccd, geom_dataid, geom_rbound, geom_size,
        geom_type, mesh_info, mesh_int, mesh_polynormal, mesh_vec. Data in: geom_xpos, geom_xmat. Data
        out: ccd_contact (the pair's entries); the scratch rows of the pair (ccd_simplex, ccd_vert, ccd_face,
        ccd_map, ccd_horizon, ccd_stack, ccd_index, and multiccd's ccd_clip, ccd_clipd, ccd_cliptag, ccd_norm,
        ccd_normidx)."""
        clear_slots(d, w, slot, nslot)
        g = m.cpair_geom[p]
        g1 = g[0]
        g2 = g[1]
        margin = m.cpair_margin[p] + m.cpair_gap[p]
        r1 = m.geom_rbound[g1]
        r2 = m.geom_rbound[g2]
        if wp.length(d.geom_xpos[w, g1] - d.geom_xpos[w, g2]) > r1 + r2 + margin:
            return  # mj_filterSphere
        o1 = obj(m, d, w, g1, margin, s, 0)
        o2 = obj(m, d, w, g2, margin, s, 2)
        # the pairs left with more than one slot clip faces (contact_tables.FACE_CLIP)
        clip = int(0)
        if nslot > 1 and m.enable_multiccd != 0:
            clip = 1
        found, normal, x1, x2, pos0, vertex, face = penetration(d, s, o1, o2, m, clip)
        if clip != 0 and face >= 0:
            # the touching faces' contacts (mjc_ccd's multicontact), in its order, when the
            # deepest of them penetrates
            nx = multiccd.multicontact(m, d, s, o1, o2, g1, g2, face, x1, x2)
            if nx > 0:
                P = m.ccd_npolygon
                deepest = d.ccd_clipd[s, P]
                for k in range(1, nx):
                    deepest = wp.min(deepest, d.ccd_clipd[s, P + k])
                if deepest < zero64:
                    m1, m2 = multiccd.margins(o1, o2)
                    for k in range(nx):
                        xk1 = d.ccd_clip[s, 7 * P + 2 * k]
                        xk2 = d.ccd_clip[s, 7 * P + 2 * k + 1]
                        nk = gjk.normalize(xk1 - xk2)
                        record(d, w, slot + k, o1, o2, nk, xk1, xk2, (xk1 + xk2) * half64,
                               d.ccd_cliptag[s, 4 * P + k], 1, nk * m1, -nk * m2)
                return
        if found:
            record(d, w, slot, o1, o2, normal, x1, x2, pos0, vertex, 0, vec3d(), vec3d())

    @wp.func
    def detect(m: Model, d: Data, w: int, p: int, s: int, slot: int, nslot: int):
        """Pass 1 for convex pair p: GJK/EPA (and multiccd) into d.ccd_contact from `slot`, in
        scratch row s. (The wide schedule launches the three kinds of search apart.)

        Model: ccd_iterations, ccd_maxfaces, ccd_ndeg, ccd_npolygon, ccd_tolerance, cpair_ccd,
        cpair_gap, cpair_geom, cpair_kind, cpair_margin, enable_multiccd, geom_dataid, geom_rbound,
        geom_size, geom_type, hfield_data, hfield_info, mesh_info, mesh_int, mesh_polynormal, mesh_vec.
        Data: those of detect_plane_mesh, detect_hfield and detect_gjk."""
        kind = m.cpair_kind[p]
        if kind == KIND_PLANE_MESH:
            detect_plane_mesh(m, d, w, p, s, slot, nslot)
        elif kind >= KIND_HFIELD0 and kind <= KIND_HFIELD1:
            detect_hfield(m, d, w, p, s, slot, nslot)
        else:
            detect_gjk(m, d, w, p, s, slot, nslot)

    @wp.func
    def rebuild(c: ConvexContact, t1: int, p1: vec3, R1: mat33, s1: vec3, t2: int, p2: vec3, R2: mat33, s2: vec3,
                margin: scalar, dist_margin: scalar):
        """(dist, pos) of a contact found at detection, from the poses: its witness points tracked
        (frames: track) plus their offsets, dist = dist_margin - n . (x1 - x2)."""
        F1, F2 = fr.track(t1, p1, R1, s1, c.x1, t2, p2, R2, s2, c.x2, margin, c.normal, c.feature)
        X1 = F1 + c.offset1
        X2 = F2 + c.offset2
        return dist_margin - wp.dot(c.normal, X1 - X2), (X1 + X2) * half

    @wp.func
    def hfield_contacts(m: Model, d: Data, w: int, i: int):
        """Pass 2 for a height field pair (entry i of the kept pairs): each prism's contact
        rebuilt, dist = margin - depth of the prism and the geom inflated by half the margin each
        (as mjc_Convex's).

        Model: cpair_gap, cpair_geom, cpair_margin, geom_size, geom_type. Data in: collision_pair,
        collision_adr, collision_nslot, ccd_contact, geom_xpos, geom_xmat. Data out (the pair's slots): contact_dist,
        contact_pos, contact_frame, contact_active."""
        p = d.collision_pair[w, i]
        slot = d.collision_adr[w, i]
        g = m.cpair_geom[p]
        g1 = g[0]
        g2 = g[1]
        p1 = d.geom_xpos[w, g1]
        R1 = d.geom_xmat[w, g1]
        p2 = d.geom_xpos[w, g2]
        R2 = d.geom_xmat[w, g2]
        t2 = m.geom_type[g2]
        s2 = m.geom_size[g2]
        margin = m.cpair_margin[p] + m.cpair_gap[p]
        for k in range(d.collision_nslot[w, i]):
            c = d.ccd_contact[w, slot + k]
            on = int(0)
            if c.found != 0:
                dd, pp = rebuild(c, GeomType.HFIELD, p1, R1, s2, t2, p2, R2, s2, margin, margin)
                d.contact_dist[w, slot + k] = dd
                d.contact_pos[w, slot + k] = pp
                d.contact_frame[w, slot + k] = make_frame(c.normal)
                on = 1
            d.contact_active[w, slot + k] = on

    @wp.func
    def collide(t1: int, p1: vec3, R1: mat33, s1: vec3, t2: int, p2: vec3, R2: mat33, s2: vec3, margin: scalar,
                cc: wp.array2d(dtype=ConvexContact), dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                frame: wp.array2d(dtype=mat33), active: wp.array2d(dtype=int), w: int, slot: int, nslot: int):
        """Pass 2: the contacts of one convex pair rebuilt from the poses (differentiable), each
        from its witness points (slot 0, and every slot of a face clipping; what detection found
        in cc[w, slot + i])."""
        for i in range(nslot):
            c = cc[w, slot + i]
            on = int(0)
            if c.found != 0:
                dist_i, pos_i = rebuild(c, t1, p1, R1, s1, t2, p2, R2, s2, margin, margin)
                dist[w, slot + i] = dist_i
                pos[w, slot + i] = pos_i
                frame[w, slot + i] = make_frame(c.normal)
                on = 1
            active[w, slot + i] = on

    @wp.func
    def plane_mesh_contacts(m: Model, d: Data, w: int, i: int):
        """Pass 2 for plane-mesh (entry i of the kept pairs): each found vertex moved with the
        mesh, its distance along the plane's normal (differentiable in both poses).

        Model: cpair_geom. Data in: collision_pair, collision_adr, ccd_contact, geom_xpos, geom_xmat. Data out
        (the pair's slots): contact_dist, contact_pos, contact_frame, contact_active."""
        p = d.collision_pair[w, i]
        slot = d.collision_adr[w, i]
        g = m.cpair_geom[p]
        p1 = d.geom_xpos[w, g[0]]
        R1 = d.geom_xmat[w, g[0]]
        p2 = d.geom_xpos[w, g[1]]
        R2 = d.geom_xmat[w, g[1]]
        normal = vec3(R1[0, 2], R1[1, 2], R1[2, 2])
        for k in range(4):
            c = d.ccd_contact[w, slot + k]
            on = int(0)
            if c.found != 0:
                X2 = R2 * c.x2 + p2
                dd = wp.dot(normal, X2 - p1)
                d.contact_dist[w, slot + k] = dd
                d.contact_pos[w, slot + k] = X2 - normal * (half * dd)
                d.contact_frame[w, slot + k] = make_frame(normal)
                on = 1
            d.contact_active[w, slot + k] = on

    @functools.cache
    def contacts(nslot: int):
        @wp.func
        def collide_pair(m: Model, d: Data, w: int, i: int):
            """The contacts of entry i of the kept pairs, rebuilt from what its detection pass
            found (`collide`).

            Model: cpair_gap, cpair_geom, cpair_margin, geom_size, geom_type. Data in: collision_pair,
            collision_adr, ccd_contact, geom_xpos, geom_xmat. Data out (the pair's slots): contact_dist,
            contact_pos, contact_frame, contact_active."""
            p = d.collision_pair[w, i]
            g = m.cpair_geom[p]
            g1 = g[0]
            g2 = g[1]
            collide(m.geom_type[g1], d.geom_xpos[w, g1], d.geom_xmat[w, g1], m.geom_size[g1], m.geom_type[g2],
                    d.geom_xpos[w, g2], d.geom_xmat[w, g2], m.geom_size[g2], m.cpair_margin[p] + m.cpair_gap[p],
                    d.ccd_contact, d.contact_dist, d.contact_pos, d.contact_frame, d.contact_active, w,
                    d.collision_adr[w, i], nslot)

        return collide_pair

    @wp.func
    def plane_ellipsoid(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                        dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                        frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjc_PlaneConvex for an ellipsoid: its support point along -normal, one contact."""
        normal = vec3(mat1[0, 2], mat1[1, 2], mat1[2, 2])
        o = ObjS()
        o.type = GeomType.ELLIPSOID
        o.pos = pos2
        o.mat = mat2
        o.size = size2
        o.margin = zero
        s = gjk_s.support(o, -normal)
        dd = wp.dot(normal, s - pos1)
        if dd > margin:
            return 0
        dist[w, slot] = dd
        pos[w, slot] = s - normal * (half * dd)
        frame[w, slot] = make_frame(normal)
        return 1

    return types.SimpleNamespace(detect=detect, detect_plane_mesh=detect_plane_mesh, detect_hfield=detect_hfield,
                                 detect_gjk=detect_gjk, contacts=contacts, plane_mesh_contacts=plane_mesh_contacts,
                                 hfield_contacts=hfield_contacts,
                                 plane_ellipsoid=plane_ellipsoid)


# the sphere's type is the lower one of a sphere pair: sphere-ellipsoid has no multiccd
assert GeomType.SPHERE < GeomType.ELLIPSOID and GeomType.PLANE < GeomType.SPHERE
