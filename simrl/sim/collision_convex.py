"""Convex pairs (mjc_Convex, mjc_PlaneConvex of engine_collision_convex.c): ellipsoids with
anything, and cylinders with capsules, cylinders and boxes.

A convex pair is collided in two passes over the candidate pairs:

1. `detect(m, d, w, p)` runs MuJoCo's GJK/EPA (simrl.sim.collision_gjk) as mjc_Convex does:
   one penetration query at the geoms' poses and, for pairs with a capsule or cylinder and no
   sphere or ellipsoid (multiccd, on unless `<flag multiccd="disable"/>`), four more with the two
   geoms turned by -+1e-3 rad in opposite senses about the two tangents of the first contact
   (mju_rotateFrame about its point), keeping those farther than 1e-3 x the smaller bounding
   radius from every contact found (mjc_isDistinctContact), at the first contact's depth. It
   stores, per contact slot, the normal and the two witness points as points of the geoms
   (in each geom's frame): `d.ccd_contact`. Not differentiated: which points touch changes
   piecewise.
2. `contacts(m, d, w, p)` (the narrow phase proper, recorded on the tape) rebuilds each contact
   from the geoms' poses: the witness points moved with their geoms (and by the multiccd
   rotation), pos their midpoint, dist = margin - n . (x1 - x2) with the normal n held fixed.
   At the poses detection saw, these are MuJoCo's values; their derivatives are those of the
   distance at a fixed normal, which for smooth shapes is the exact derivative of the
   penetration depth (the witness points are support points along n, envelope theorem); the
   normal's own derivative is left out (documented in docs/GUIDE.md).

Plane-ellipsoid is closed form (mjc_PlaneConvex: the ellipsoid's support point along the
plane's inward normal) and lives here with the collider signature of collision_primitive.
"""

import functools
import types

import warp as wp

from simrl.sim import collision_gjk
from simrl.sim.contact_tables import CONVEX_KINDS, GEOM_ELLIPSOID, GEOM_PLANE, GEOM_SPHERE, MAX_CONTACTS, PAIR_KIND
from simrl.sim.data import ccd_structs, data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import scalar_types

#: multiccd: relative tolerance of distinct contacts, angle of the turns (mjc_Convex)
MULTICCD_TOLERANCE = 1e-3
MULTICCD_ANGLE = 1e-3

#: contact slots of each convex kind
CONVEX_SLOTS = {PAIR_KIND[pair]: n for pair, n in MAX_CONTACTS.items() if PAIR_KIND[pair] in CONVEX_KINDS}
# the kinds with multiccd's extra slots (capsule-cylinder, cylinder-cylinder, cylinder-box)
_MULTI = sorted(k for k, n in CONVEX_SLOTS.items() if n > 1)
assert len(_MULTI) == 3 and all(CONVEX_SLOTS[k] == 5 for k in _MULTI)
KIND_MULTI0, KIND_MULTI1, KIND_MULTI2 = _MULTI


@functools.cache
def frames(scalar):
    """(make_frame, turn) in precision `scalar`: the contact frame of a normal and multiccd's
    rotations, for the detection (float64) and the contacts (the model's precision)."""
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

    @wp.func
    def turn(frame: mat33, perturb: int) -> mat33:
        """multiccd's rotation number perturb (1-4): about the first contact's tangent
        (perturb - 1) / 2 by -+MULTICCD_ANGLE (mju_axisAngle2Quat, mju_quat2Mat)."""
        axis = vec3(frame[1, 0], frame[1, 1], frame[1, 2])
        if perturb > 2:
            axis = vec3(frame[2, 0], frame[2, 1], frame[2, 2])
        angle = scalar(-MULTICCD_ANGLE)
        if perturb % 2 == 0:
            angle = scalar(MULTICCD_ANGLE)
        sn = wp.sin(angle * half)
        q = T.quat(axis[0] * sn, axis[1] * sn, axis[2] * sn, wp.cos(angle * half))
        return wp.quat_to_matrix(q)

    return make_frame, turn


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
    make_frame, turn = frames(scalar)
    make_frame64, turn64 = frames(f64)
    _, _, ObjS, _ = ccd_structs(scalar)
    zero, half = scalar(0.0), scalar(0.5)
    zero64, half64 = f64(0.0), f64(0.5)

    @wp.func
    def obj(m: Model, d: Data, w: int, g: int, margin: scalar) -> Obj:
        o = Obj()
        o.type = m.geom_type[g]
        o.pos = vec3d(d.geom_xpos[w, g])
        o.mat = mat33d(d.geom_xmat[w, g])
        o.size = vec3d(m.geom_size[g])
        o.margin = f64(margin)
        return o

    @wp.func
    def rotated(o: Obj, origin: vec3d, rot: mat33d) -> Obj:
        """mju_rotateFrame: o turned by rot about origin."""
        r = Obj()
        r.type = o.type
        r.size = o.size
        r.margin = o.margin
        r.mat = rot * o.mat
        rel = origin - o.pos
        r.pos = o.pos - (rot * rel - rel)
        return r

    @wp.func
    def penetration(d: Data, s: int, o1: Obj, o2: Obj, m: Model):
        """mjc_penetration: (found, normal, x1, x2, pos) of the contact of o1 and o2."""
        nx, dist, x1, x2 = gjk.ccd(d.ccd_simplex, d.ccd_vert, d.ccd_face, d.ccd_map, d.ccd_horizon, d.ccd_stack,
                                   s, o1, o2, f64(m.ccd_tolerance), m.ccd_iterations, m.ccd_maxfaces)
        found = nx > 0 and dist < zero64
        return found, gjk.normalize(x1 - x2), x1, x2, (x1 + x2) * half64

    @wp.func
    def record(d: Data, w: int, i: int, o1: Obj, o2: Obj, normal: vec3d, x1: vec3d, x2: vec3d, pos: vec3d,
               perturb: int):
        c = ConvexContact()
        c.normal = vec3(normal)
        c.x1 = vec3(wp.transpose(o1.mat) * (x1 - o1.pos))
        c.x2 = vec3(wp.transpose(o2.mat) * (x2 - o2.pos))
        c.pos = vec3(pos)
        c.perturb = perturb
        d.ccd_contact[w, i] = c

    @wp.func
    def detect(m: Model, d: Data, w: int, p: int):
        """Pass 1 for convex pair p: GJK/EPA (and multiccd) into d.ccd_contact."""
        kind = m.cpair_kind[p]
        nslot = int(1)
        if kind == KIND_MULTI0 or kind == KIND_MULTI1 or kind == KIND_MULTI2:
            nslot = 5
        slot = m.cpair_slot[p]
        for i in range(nslot):
            c = ConvexContact()
            c.perturb = -1
            d.ccd_contact[w, slot + i] = c
        g = m.cpair_geom[p]
        g1 = g[0]
        g2 = g[1]
        margin = m.cpair_margin[p] + m.cpair_gap[p]
        r1 = m.geom_rbound[g1]
        r2 = m.geom_rbound[g2]
        if wp.length(d.geom_xpos[w, g1] - d.geom_xpos[w, g2]) > r1 + r2 + margin:
            return  # mj_filterSphere
        s = w * m.nccdpair + m.cpair_ccd[p]
        o1 = obj(m, d, w, g1, margin)
        o2 = obj(m, d, w, g2, margin)
        found, normal, x1, x2, pos0 = penetration(d, s, o1, o2, m)
        if not found:
            return
        record(d, w, slot, o1, o2, normal, x1, x2, pos0, 0)
        if nslot == 1 or m.enable_multiccd == 0:
            return
        frame = make_frame64(normal)
        tolerance = scalar(MULTICCD_TOLERANCE) * wp.min(r1, r2)
        ncon = int(1)
        for perturb in range(1, 5):
            rot = turn64(frame, perturb)
            q1 = rotated(o1, pos0, rot)
            q2 = rotated(o2, pos0, wp.transpose(rot))
            found_k, normal_k, x1k, x2k, pos_k = penetration(d, s, q1, q2, m)
            if found_k:
                distinct = bool(True)
                for j in range(ncon):
                    if wp.length(d.ccd_contact[w, slot + j].pos - vec3(pos_k)) <= tolerance:
                        distinct = False
                if distinct:
                    record(d, w, slot + ncon, q1, q2, normal_k, x1k, x2k, pos_k, perturb)
                    ncon += 1

    @wp.func
    def collide(p1: vec3, R1: mat33, p2: vec3, R2: mat33, margin: scalar, cc: wp.array2d(dtype=ConvexContact),
                dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                active: wp.array2d(dtype=int), w: int, slot: int, nslot: int):
        """Pass 2: the contacts of one convex pair rebuilt from the poses (differentiable)."""
        c0 = cc[w, slot]
        n = int(0)
        dist0 = zero
        pos0 = vec3(zero, zero, zero)
        frame0 = mat33()
        if c0.perturb == 0:
            X1 = R1 * c0.x1 + p1
            X2 = R2 * c0.x2 + p2
            dist0 = margin - wp.dot(c0.normal, X1 - X2)
            pos0 = (X1 + X2) * half
            frame0 = make_frame(c0.normal)
            dist[w, slot] = dist0
            pos[w, slot] = pos0
            frame[w, slot] = frame0
            n = 1
        active[w, slot] = n
        for i in range(1, nslot):
            ci = cc[w, slot + i]
            on = int(0)
            if n > 0 and ci.perturb > 0:
                rot = turn(frame0, ci.perturb)
                X1 = pos0 + rot * (R1 * ci.x1 + p1 - pos0)
                X2 = pos0 + wp.transpose(rot) * (R2 * ci.x2 + p2 - pos0)
                dist[w, slot + i] = dist0
                pos[w, slot + i] = (X1 + X2) * half
                frame[w, slot + i] = make_frame(ci.normal)
                on = 1
            active[w, slot + i] = on

    def contacts(nslot: int):
        @wp.func
        def collide_pair(m: Model, d: Data, w: int, p: int):
            g = m.cpair_geom[p]
            collide(d.geom_xpos[w, g[0]], d.geom_xmat[w, g[0]], d.geom_xpos[w, g[1]], d.geom_xmat[w, g[1]],
                    m.cpair_margin[p] + m.cpair_gap[p], d.ccd_contact, d.contact_dist, d.contact_pos,
                    d.contact_frame, d.contact_active, w, m.cpair_slot[p], nslot)

        return collide_pair

    @wp.func
    def plane_ellipsoid(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                        dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                        frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjc_PlaneConvex for an ellipsoid: its support point along -normal, one contact."""
        normal = vec3(mat1[0, 2], mat1[1, 2], mat1[2, 2])
        o = ObjS()
        o.type = GEOM_ELLIPSOID
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

    return types.SimpleNamespace(detect=detect, contacts=contacts, plane_ellipsoid=plane_ellipsoid)


# the sphere's type is the lower one of a sphere pair: sphere-ellipsoid has no multiccd
assert GEOM_SPHERE < GEOM_ELLIPSOID and GEOM_PLANE < GEOM_SPHERE
