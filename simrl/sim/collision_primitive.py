"""Narrow phase for primitive geom pairs (plane, sphere, capsule, box) as Warp functions.

Each collision function follows one of MuJoCo's primitive colliders
(engine_collision_primitive.c, engine_collision_box.c) operation by operation, so that it
returns the same contacts: same count, order, dist, pos, normal and tangent.

Conventions (shared by every function):
- geom poses are a position `vec3` and a rotation `mat33` whose columns are the geom's local
  axes in the world frame (MuJoCo's geom_xmat as a row-major 3x3); sizes are MuJoCo's
  geom_size (sphere: radius; capsule: radius, half-length along local z; box: half-sizes;
  plane: ignored, the normal is local z);
- geom1 has the lower type in MuJoCo's enum, the normal points from geom1 to geom2;
- `margin` is the detection margin MuJoCo passes to its collision function (in MuJoCo 4.0:
  margin + gap of the pair);
- contact i = 0..n-1 goes to dist[w, slot + i], pos[w, slot + i], frame[w, slot + i], where
  frame is the contact frame that mj_setContact makes (mju_makeFrame) from the collider's normal
  and tangent (mjPreContact.tangent, zero unless it sets one): rows normal, tangent, normal x
  tangent. Nothing is written beyond slot + n - 1; the functions return n, at most
  MAX_CONTACTS[(type1, type2)].

Written for exact Warp adjoints (wp.Tape, simrl.sim.grad): every array element is written once;
no local vector is written in place after it holds a value that carries a gradient (a component
is replaced through `with3`, which builds a new vector); every loop whose body carries a value
from one iteration to the next has a constant trip count (unrolled), or belongs to a function
whose adjoint is written out (`clip_half_plane`) or empty (the searches that return an integer
choice: its values are then recomputed for the chosen feature alone); square roots and divisions
that can see zero are guarded so that a zero adjoint stays zero instead of becoming NaN.

The installed MuJoCo 4.0 library is the reference where it differs from the C sources read:
capsule-capsule with (nearly) parallel axes follows the 4.0 behavior (see capsule_capsule).
"""


import functools
import types

import warp as wp

from simrl.sim.contact_tables import PRIMITIVE_MAX_CONTACTS
from simrl.sim.types import MAXVAL, MINVAL, GeomType, scalar_types

# mj_maxContact (engine_collision_driver.c) for the pairs implemented here (simrl.sim.contact_tables;
# plane-ellipsoid is simrl.sim.collision_convex's).
# Capsule-box reserves 4 slots but its collider makes at most 2 contacts (one sphere-box per
# point on the segment).
MAX_CONTACTS = {pair: n for pair, n in PRIMITIVE_MAX_CONTACTS.items() if GeomType.ELLIPSOID not in pair}

# box-box: vertex capacity of the clipped incident face (mjBOXBOX_MAXVERT)
BOXBOX_MAXVERT = 12


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    vec3, mat33 = T.vec3, T.mat33
    vec12 = wp.types.vector(BOXBOX_MAXVERT, dtype=scalar)
    is64 = scalar == wp.float64

    # box-box rounding scales (mjBOXBOX_*), per precision as in MuJoCo's mjUSESINGLE switch;
    # written as the reciprocal of exactly representable powers of ten
    sepeps_a, sepeps_b = (1e6, 1e7) if is64 else (1e6, 1.0)  # 1e-13 / 1e-6
    pareps_a, pareps_b = (1e8, 1e8) if is64 else (1e7, 1.0)  # 1e-16 / 1e-7
    sgneps_a, sgneps_b = (1e9, 1.0) if is64 else (1e5, 1.0)  # 1e-9 / 1e-5
    dupeps_a, dupeps_b = (1e7, 1e7) if is64 else (1e5, 1e5)  # 1e-14 / 1e-10

    # ------------------------------------------------------------------ helpers

    @wp.func
    def zero3():
        return vec3(scalar(0.0), scalar(0.0), scalar(0.0))

    @wp.func
    def col(m: mat33, j: int):
        """Column j of m: the geom's local axis j in world coordinates."""
        return vec3(m[0, j], m[1, j], m[2, j])

    @wp.func
    def with3(v: vec3, i: int, x: scalar):
        """v with component i replaced by x, as a new vector: `v[i] = x` on a local vector
        works in place, and Warp's adjoint of that keeps the old component's adjoint."""
        return vec3(wp.where(i == 0, x, v[0]), wp.where(i == 1, x, v[1]), wp.where(i == 2, x, v[2]))

    @wp.func
    def normalize3(v: vec3):
        """mju_normalize3: (unit vector, norm); (1, 0, 0) when the norm is below mjMINVAL."""
        sqr = v[0] * v[0] + v[1] * v[1] + v[2] * v[2]
        norm = scalar(0.0)
        if sqr > scalar(0.0):
            # sqrt(0) has an infinite derivative: its adjoint would turn a zero adjoint into NaN
            norm = wp.sqrt(sqr)
        if norm < scalar(MINVAL):
            return vec3(scalar(1.0), scalar(0.0), scalar(0.0)), norm
        inv = scalar(1.0) / norm
        return vec3(v[0] * inv, v[1] * inv, v[2] * inv), norm

    @wp.func
    def clip(x: scalar, lo: scalar, hi: scalar):
        """mju_clip."""
        if x < lo:
            return lo
        if x > hi:
            return hi
        return x

    @wp.func
    def corner_of(size: vec3, i: int):
        """Box corner i: +size[k] where bit k of i is set, -size[k] where not."""
        return vec3(wp.where((i & 1) != 0, size[0], -size[0]), wp.where((i & 2) != 0, size[1], -size[1]),
                    wp.where((i & 4) != 0, size[2], -size[2]))

    @wp.func
    def shorten(best: scalar, num: scalar, den: scalar):
        """mjraw_CapsuleBox's `e1 = num / den; if (e1 < best) best = e1` for den >= 0. A den of 0
        gives +inf or NaN, never below best: skipped, so that no division by 0 (a NaN adjoint)
        is evaluated."""
        if den != scalar(0.0):
            e1 = num / den
            if e1 < best:
                return e1
        return best

    @wp.func
    def edge_point(toward: vec3, size: vec3, i1: int, i2: int, sgn: scalar, amb: int, flip: int):
        """Box-box edge-edge: the point of the box's edge along its third axis that lies on the
        side of toward (sgn = 1) or against it (sgn = -1) in axes i1 and i2, with axis amb
        flipped for flip = 1 (the second candidate of an ambiguous sign); other axes 0."""
        x1 = -sgn * size[i1]
        if toward[i1] >= scalar(0.0):
            x1 = sgn * size[i1]
        x2 = -sgn * size[i2]
        if toward[i2] >= scalar(0.0):
            x2 = sgn * size[i2]
        c = with3(with3(zero3(), i1, x1), i2, x2)
        if amb >= 0 and flip == 1:
            c = with3(c, amb, -c[amb])
        return c

    @wp.func
    def clip_size(x: scalar, size: scalar):
        """x clipped to [-size, size] when size > 0 (mjraw_SphereBox's clamp of the center)."""
        if size > scalar(0.0):
            return clip(x, -size, size)
        return x

    @wp.func
    def make_frame(normal: vec3, tangent: vec3) -> mat33:
        """mju_makeFrame (engine_util_spatial.c): rows are the normalized normal, the tangent
        made orthogonal to it (or (0, 1, 0) / (0, 0, 1) when the tangent is unset) and their
        cross product."""
        x, nx = normalize3(normal)
        y = tangent
        if wp.dot(y, y) < scalar(0.25):
            if x[1] < scalar(0.5) and x[1] > scalar(-0.5):
                y = vec3(scalar(0.0), scalar(1.0), scalar(0.0))
            else:
                y = vec3(scalar(0.0), scalar(0.0), scalar(1.0))
        y = y - x * wp.dot(x, y)
        y, ny = normalize3(y)
        z = wp.cross(x, y)
        return mat33(x[0], x[1], x[2], y[0], y[1], y[2], z[0], z[1], z[2])

    @wp.func_grad(make_frame)
    def adj_make_frame(normal: vec3, tangent: vec3, adj_ret: mat33):
        """The adjoint of make_frame, written out: the generated one holds every intermediate of
        the two normalizations and the cross product at once (a plane-capsule kernel's adjoint
        then needs far more registers on a GPU). With rows x = n / |n|, u = y0 - x (x . y0),
        y = u / |u|, z = x cross y (y0 the tangent when it is set, else a constant):
        adj_x += y cross adj_z, adj_y += adj_z cross x; through a normalization v = w / |w|,
        adj_w = (adj_v - v (v . adj_v)) / |w| (none when |w| < mjMINVAL: v is a constant);
        through u, adj_x -= adj_u (x . y0) + y0 (x . adj_u) and adj_y0 = adj_u - x (x . adj_u)."""
        x, nx = normalize3(normal)
        set_tangent = wp.dot(tangent, tangent) >= scalar(0.25)
        y0 = tangent
        if not set_tangent:
            if x[1] < scalar(0.5) and x[1] > scalar(-0.5):
                y0 = vec3(scalar(0.0), scalar(1.0), scalar(0.0))
            else:
                y0 = vec3(scalar(0.0), scalar(0.0), scalar(1.0))
        xy0 = wp.dot(x, y0)
        y, ny = normalize3(y0 - x * xy0)
        adj_x = vec3(adj_ret[0, 0], adj_ret[0, 1], adj_ret[0, 2])
        adj_y = vec3(adj_ret[1, 0], adj_ret[1, 1], adj_ret[1, 2])
        adj_z = vec3(adj_ret[2, 0], adj_ret[2, 1], adj_ret[2, 2])
        adj_x = adj_x + wp.cross(y, adj_z)
        adj_y = adj_y + wp.cross(adj_z, x)
        if ny >= scalar(MINVAL):
            adj_u = (adj_y - y * wp.dot(y, adj_y)) / ny
            x_adj_u = wp.dot(x, adj_u)
            adj_x = adj_x - adj_u * xy0 - y0 * x_adj_u
            if set_tangent:
                wp.adjoint[tangent] += adj_u - x * x_adj_u
        if nx >= scalar(MINVAL):
            wp.adjoint[normal] += (adj_x - x * wp.dot(x, adj_x)) / nx

    @wp.func
    def write_contact(dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                      frame: wp.array2d(dtype=mat33), w: int, i: int,
                      d: scalar, p: vec3, normal: vec3, tangent: vec3):
        """Contact i: dist, pos and the frame mj_setContact makes from the collider's normal and
        tangent (mju_makeFrame), stored once (no rewrite of the frame in place)."""
        dist[w, i] = d
        pos[w, i] = p
        frame[w, i] = make_frame(normal, tangent)

    # ------------------------------------------------------------------ raw colliders

    @wp.func
    def plane_sphere_contact(normal: vec3, pos1: vec3, end: vec3, radius: scalar, margin: scalar,
                             dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), w: int,
                             slot: int) -> int:
        """mjraw_PlaneSphere's distance and position for a sphere at `end` and a plane through pos1
        with `normal` (the frame is its caller's: a capsule makes one for both ends); 1 if they
        touch, else 0."""
        cdist = wp.dot(end - pos1, normal)
        if cdist > margin + radius:
            return 0
        d = cdist - radius
        dist[w, slot] = d
        pos[w, slot] = end + normal * (-d / scalar(2.0) - radius)
        return 1

    @wp.func
    def raw_plane_sphere(pos1: vec3, mat1: mat33, pos2: vec3, radius: scalar, margin: scalar,
                         tangent: vec3, dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                         frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjraw_PlaneSphere, with the tangent to store."""
        normal = col(mat1, 2)
        n = plane_sphere_contact(normal, pos1, pos2, radius, margin, dist, pos, w, slot)
        if n > 0:
            frame[w, slot] = make_frame(normal, tangent)
        return n

    @wp.func
    def raw_sphere_sphere(pos1: vec3, mat1: mat33, r1: scalar, pos2: vec3, mat2: mat33, r2: scalar,
                          margin: scalar, dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                          frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjraw_SphereSphere."""
        dif = pos1 - pos2
        cdist_sqr = wp.dot(dif, dif)
        min_dist = margin + r1 + r2
        if cdist_sqr > min_dist * min_dist:
            return 0
        cdist = scalar(0.0)
        if cdist_sqr > scalar(0.0):
            cdist = wp.sqrt(cdist_sqr)  # guarded: no NaN adjoint at coincident centers
        d = cdist - r1 - r2
        normal, length = normalize3(pos2 - pos1)
        # coincident centers: normal = cross product of the z axes ((1, 0, 0) if parallel)
        if length < scalar(MINVAL):
            normal, length = normalize3(wp.cross(col(mat1, 2), col(mat2, 2)))
        p = normal * (r1 + d / scalar(2.0)) + pos1
        write_contact(dist, pos, frame, w, slot, d, p, normal, zero3())
        return 1

    @wp.func
    def raw_sphere_box(pos1: vec3, r1: scalar, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                       dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                       frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjraw_SphereBox (engine_collision_box.c)."""
        center = wp.transpose(mat2) * (pos1 - pos2)
        clamped = vec3(clip_size(center[0], size2[0]), clip_size(center[1], size2[1]),
                       clip_size(center[2], size2[2]))
        tmp, d = normalize3(clamped - center)
        if d - r1 > margin:
            return 0

        p = zero3()
        normal = zero3()
        if d <= scalar(MINVAL):
            # sphere center inside the box: push out through the closest face
            closest = (size2[0] + size2[1] + size2[2]) * scalar(2.0)
            k = int(0)
            for i in range(6):
                sgn = scalar(-1.0)
                if i % 2 == 1:
                    sgn = scalar(1.0)
                v = wp.abs(sgn * size2[i // 2] - center[i // 2])
                if closest > v:
                    closest = v
                    k = i
            nearest = with3(zero3(), k // 2, scalar(1.0))
            if k % 2 == 1:
                nearest = with3(zero3(), k // 2, scalar(-1.0))
            p = center + nearest * ((r1 - closest) / scalar(2.0))
            normal = mat2 * nearest
            d = -closest
        else:
            deepest = center + tmp * r1
            p = zero3() + clamped * scalar(0.5)
            p = p + deepest * scalar(0.5)
            normal = mat2 * tmp
        write_contact(dist, pos, frame, w, slot, d - r1, mat2 * p + pos2, normal, zero3())
        return 1

    # ------------------------------------------------------------------ plane

    @wp.func
    def plane_sphere(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                     dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                     w: int, slot: int) -> int:
        """mjc_PlaneSphere (engine_collision_primitive.c)."""
        return raw_plane_sphere(pos1, mat1, pos2, size2[0], margin, zero3(), dist, pos, frame, w, slot)

    @wp.func
    def plane_capsule(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                      dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                      w: int, slot: int) -> int:
        """mjc_PlaneCapsule: plane-sphere at both ends of the segment, tangent = capsule axis. Both
        contacts have the same frame, made once and written after them (the adjoint of two
        plane-sphere collisions, each making its frame, needs far more registers on a GPU)."""
        axis = col(mat2, 2)
        normal = col(mat1, 2)
        segment = axis * size2[1]
        contact_frame = make_frame(normal, axis)
        n1 = plane_sphere_contact(normal, pos1, pos2 + segment, size2[0], margin, dist, pos, w, slot)
        n2 = plane_sphere_contact(normal, pos1, pos2 - segment, size2[0], margin, dist, pos, w, slot + n1)
        if n1 + n2 > 0:
            frame[w, slot] = contact_frame
        if n1 + n2 > 1:
            frame[w, slot + 1] = contact_frame
        return n1 + n2

    @wp.func
    def bit_count(x: int):
        """The number of set bits of x >= 0."""
        n = int(0)
        v = x
        while v != 0:
            n += v & 1
            v = v >> 1
        return n

    @wp.func
    def plane_box_touches(norm: vec3, center_dist: scalar, mat2: mat33, size2: vec3, margin: scalar, i: int):
        """Whether box corner i is below the plane and within the margin (mjc_PlaneBox's test)."""
        ldist = wp.dot(norm, mat2 * corner_of(size2, i))
        return not (center_dist + ldist > margin or ldist > scalar(0.0))

    @wp.func
    def plane_box_corners(norm: vec3, center_dist: scalar, mat2: mat33, size2: vec3, margin: scalar):
        """The corners that touch the plane, as bits (corner i: bit i)."""
        mask = int(0)
        for i in range(8):
            if plane_box_touches(norm, center_dist, mat2, size2, margin, i):
                mask = mask | (1 << i)
        return mask

    @wp.func_grad(plane_box_corners)
    def adj_plane_box_corners(norm: vec3, center_dist: scalar, mat2: mat33, size2: vec3, margin: scalar,
                              adj_ret: int):
        """An integer: no gradient."""
        pass

    @wp.func
    def plane_box(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                  dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                  w: int, slot: int) -> int:
        """mjc_PlaneBox: the (first four) box corners below the plane and within the margin, each
        with the frame of the plane's normal (made once, written after). The touching corners are
        found first (an integer mask), then each writes its contact in a loop Warp does not unroll,
        with no variable carried across iterations: the adjoint of the eight corners unrolled would
        hold all their values at once (more registers than a GPU thread has)."""
        norm = col(mat1, 2)
        center_dist = wp.dot(pos2 - pos1, norm)
        contact_frame = make_frame(norm, zero3())
        mask = plane_box_corners(norm, center_dist, mat2, size2, margin)
        ncorner = 8 + 0 * mask  # a bound known at run time only: Warp unrolls loops with constant bounds
        for i in range(ncorner):
            if (mask >> i) & 1 != 0:
                rank = bit_count(mask & ((1 << i) - 1))
                if rank < 4:
                    corner = mat2 * corner_of(size2, i)
                    dd = center_dist + wp.dot(norm, corner)
                    dist[w, slot + rank] = dd
                    pos[w, slot + rank] = (corner + pos2) + norm * (-dd / scalar(2.0))
        n = wp.min(bit_count(mask), 4)
        for k in range(n):
            frame[w, slot + k] = contact_frame
        return n

    @wp.func
    def plane_cylinder(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                       dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                       w: int, slot: int) -> int:
        """mjc_PlaneCylinder: the point of the disk nearest the plane at each end of the axis, then
        two more points of the nearer disk's rim (an equilateral triangle with the first)."""
        normal = col(mat1, 2)
        axis = col(mat2, 2)
        # project, make sure the axis points towards the plane
        prjaxis = wp.dot(normal, axis)
        if prjaxis > scalar(0.0):
            axis = -axis
            prjaxis = -prjaxis
        # normal distance of the cylinder's center
        dist0 = wp.dot(pos2 - pos1, normal)
        # -normal without its component along the axis, scaled to the radius. MuJoCo computes it
        # as axis (axis . normal) - normal, which cancels when the disk is nearly parallel to the
        # plane: in float32 the rounding of |axis| then gives it a normal component of either
        # sign, as large as the radius (a missed contact). As -(axis x normal) x axis / |axis x
        # normal| it keeps its direction to rounding (the same vector, to 1e-16 in float64).
        c = wp.cross(axis, normal)
        len_sqr = wp.dot(c, c)
        vec = col(mat2, 0) * size2[0]  # disk parallel to the plane: the cylinder's x axis
        if len_sqr >= scalar(MINVAL) * scalar(MINVAL):
            vec = wp.cross(c, axis) * (-size2[0] / wp.sqrt(len_sqr))
        prjvec = wp.dot(vec, normal)
        # the axis scaled to the half-length
        axis = axis * size2[1]
        prjaxis = prjaxis * size2[1]

        # nearest point; none within the margin: no contacts
        d1 = dist0 + prjaxis + prjvec
        if d1 > margin:
            return 0
        write_contact(dist, pos, frame, w, slot, d1, ((pos2 + vec) + axis) + normal * (-d1 * scalar(0.5)), normal,
                      zero3())
        cnt = int(1)
        # the point of the other disk
        d2 = dist0 - prjaxis + prjvec
        if d2 <= margin:
            write_contact(dist, pos, frame, w, slot + cnt, d2, ((pos2 + vec) - axis) + normal * (-d2 * scalar(0.5)),
                          normal, zero3())
            cnt += 1
        # two more rim points of the nearer disk
        d3 = dist0 + prjaxis - prjvec * scalar(0.5)
        if d3 <= margin:
            side, side_norm = normalize3(wp.cross(vec, axis))
            side = side * (size2[0] * wp.sqrt(scalar(3.0)) / scalar(2.0))
            half = vec * scalar(-0.5)
            p_a = (((pos2 + side) + axis) + half) + normal * (-d3 * scalar(0.5))
            p_b = (((pos2 - side) + axis) + half) + normal * (-d3 * scalar(0.5))
            write_contact(dist, pos, frame, w, slot + cnt, d3, p_a, normal, zero3())
            write_contact(dist, pos, frame, w, slot + cnt + 1, d3, p_b, normal, zero3())
            cnt += 2
        return cnt

    # ------------------------------------------------------------------ sphere

    @wp.func
    def sphere_cylinder(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3,
                        margin: scalar, dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3),
                        frame: wp.array2d(dtype=mat33), w: int, slot: int) -> int:
        """mjc_SphereCylinder: the sphere against the cylinder's side (sphere-sphere with the
        nearest point of the axis), a cap (plane-sphere, the normal flipped to point from the
        sphere to the cylinder) or a rim point (sphere-sphere with a point)."""
        radius = size2[0]
        height = size2[1]
        axis = col(mat2, 2)
        # the sphere's projection onto the axis and onto the plane orthogonal to it
        vec = pos1 - pos2
        x = wp.dot(axis, vec)
        a_proj = axis * x
        p_proj = vec - a_proj
        p_proj_sqr = wp.dot(p_proj, p_proj)
        collide_side = wp.abs(x) < height
        collide_cap = p_proj_sqr < radius * radius
        if collide_side and collide_cap:
            # deep penetration (the sphere's center inside the cylinder): the nearer surface
            p_proj_len = scalar(0.0)
            if p_proj_sqr > scalar(0.0):
                p_proj_len = wp.sqrt(p_proj_sqr)
            if height - wp.abs(x) < radius - p_proj_len:
                collide_side = False
            else:
                collide_cap = False
        n = int(0)
        if collide_side:
            n = raw_sphere_sphere(pos1, mat1, size1[0], a_proj + pos2, mat2, radius, margin, dist, pos, frame,
                                  w, slot)
        elif collide_cap:
            cap_normal = axis
            cap = pos2 + axis * height
            if x <= scalar(0.0):
                cap_normal = -axis
                cap = pos2 + axis * (-height)
            cdist = wp.dot(pos1 - cap, cap_normal)
            if cdist <= margin + size1[0]:
                d = cdist - size1[0]
                p = pos1 + cap_normal * (-d / scalar(2.0) - size1[0])
                write_contact(dist, pos, frame, w, slot, d, p, -cap_normal, zero3())
                n = 1
        else:
            # the rim point nearest the sphere: sphere-sphere with a point (p_proj_sqr >= radius^2 > 0)
            p_proj_len = scalar(0.0)
            if p_proj_sqr > scalar(0.0):
                p_proj_len = wp.sqrt(p_proj_sqr)
            rim = p_proj * (radius / wp.max(p_proj_len, scalar(MINVAL)))
            end = axis * (-height)
            if x > scalar(0.0):
                end = axis * height
            n = raw_sphere_sphere(pos1, mat1, size1[0], (end + rim) + pos2, mat2, scalar(0.0), margin, dist, pos,
                                  frame, w, slot)
        return n

    @wp.func
    def sphere_sphere(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                      dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                      w: int, slot: int) -> int:
        """mjc_SphereSphere."""
        return raw_sphere_sphere(pos1, mat1, size1[0], pos2, mat2, size2[0], margin, dist, pos, frame, w, slot)

    @wp.func
    def sphere_capsule(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                       dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                       w: int, slot: int) -> int:
        """mjraw_SphereCapsule: sphere-sphere with the nearest point of the capsule segment."""
        length = size2[1]
        axis = col(mat2, 2)
        x = clip(wp.dot(axis, pos1 - pos2), -length, length)
        return raw_sphere_sphere(pos1, mat1, size1[0], axis * x + pos2, mat2, size2[0], margin,
                                 dist, pos, frame, w, slot)

    @wp.func
    def sphere_box(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                   dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                   w: int, slot: int) -> int:
        """mjc_SphereBox (engine_collision_box.c)."""
        return raw_sphere_box(pos1, size1[0], pos2, mat2, size2, margin, dist, pos, frame, w, slot)

    # ------------------------------------------------------------------ capsule

    @wp.func
    def capsule_capsule(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                        dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                        w: int, slot: int) -> int:
        """mjraw_CapsuleCapsule: nearest points of the segments, then sphere-sphere.

        MuJoCo 4 changed the parallel case from the 3.x source (four segment-end tests with the
        mjMINVAL determinant test); this follows the installed 4.0 library, reconstructed by
        probing it (matches it to ~1e-16): axes count as parallel when
        det < 1e-8 * |axis1|^2 |axis2|^2, i.e. sin(angle) < 1e-4, and the two contacts sit at the
        ends of the segments' overlap."""
        r1 = size1[0]
        r2 = size2[0]
        axis1 = col(mat1, 2) * size1[1]
        axis2 = col(mat2, 2) * size2[1]
        dif = pos1 - pos2
        ma = wp.dot(axis1, axis1)
        mb = -wp.dot(axis1, axis2)
        mc = wp.dot(axis2, axis2)
        u = -wp.dot(axis1, dif)
        v = wp.dot(axis2, dif)
        det = ma * mc - mb * mb
        one = scalar(1.0)
        parallel = one / (scalar(10000.0) * scalar(10000.0))  # sin(angle)^2 = 1e-8

        if det >= parallel * ma * mc:
            x1 = (mc * u - mb * v) / det
            x2 = (ma * v - mb * u) / det
            if x1 > one:
                x1 = one
                x2 = (v - mb) / mc
            elif x1 < -one:
                x1 = -one
                x2 = (v + mb) / mc
            if x2 > one:
                x2 = one
                x1 = clip((u - mb) / ma, -one, one)
            elif x2 < -one:
                x2 = -one
                x1 = clip((u + mb) / ma, -one, one)
            return raw_sphere_sphere(axis1 * x1 + pos1, mat1, r1, axis2 * x2 + pos2, mat2, r2, margin,
                                     dist, pos, frame, w, slot)

        # nearly parallel axes (MuJoCo 4: sin(angle) < 1e-4, not the mjMINVAL determinant test of
        # MuJoCo 3): contacts at both ends of the overlap of segment 2's projection onto segment 1,
        # lower end first; an end clamped to segment 1 pairs segment 1's end with its projection
        # onto segment 2, an end inside pairs segment 2's end with its projection onto segment 1
        ta = (u - mb) / ma  # segment 2's +end projected on segment 1
        tb = (u + mb) / ma  # segment 2's -end
        e_lo = one
        e_hi = -one
        if tb < ta:
            tmp = ta
            ta = tb
            tb = tmp
            e_lo = -one
            e_hi = one
        n = int(0)
        for k in range(2):
            t = ta
            e2 = e_lo
            if k == 1:
                t = tb
                e2 = e_hi
            x1 = t
            x2 = e2
            if wp.abs(t) > one:
                x1 = clip(t, -one, one)
                x2 = clip((v - mb * x1) / mc, -one, one)
            n += raw_sphere_sphere(axis1 * x1 + pos1, mat1, r1, axis2 * x2 + pos2, mat2, r2, margin,
                                   dist, pos, frame, w, slot + n)
        return n

    @wp.func
    def capsule_box_edge(cpos: vec3, halfaxis: vec3, halflength: scalar, size2: vec3, j: int, i: int):
        """mjraw_CapsuleBox's closest points of the capsule segment (cpos +- halfaxis, box frame)
        and the box edge along axis j through corner i (bit j of i clear): (x1 along the edge,
        x2 along the segment, each in [-1, 1]; s1, s2: 0 / 2 at one end or the other, 1 inside;
        the squared distance; 1 when the two lines are not parallel, else 0 and nothing else)."""
        one = scalar(1.0)
        tmp3 = with3(corner_of(size2, i), j, scalar(0.0))
        dif = tmp3 - cpos
        ma = size2[j] * size2[j]
        mb = -size2[j] * halfaxis[j]
        mc = halflength * halflength
        u = -size2[j] * dif[j]
        v = wp.dot(halfaxis, dif)
        det = ma * mc - mb * mb
        if wp.abs(det) < scalar(MINVAL):
            return scalar(0.0), scalar(0.0), 0, 0, scalar(0.0), 0
        idet = one / det
        x1 = (mc * u - mb * v) * idet
        x2 = (ma * v - mb * u) * idet
        s1 = int(1)
        s2 = int(1)
        if x1 > one:
            x1 = one
            s1 = 2
            x2 = (v - mb) * (one / mc)
        elif x1 < -one:
            x1 = -one
            s1 = 0
            x2 = (v + mb) * (one / mc)
        if x2 > one:
            x2 = one
            s2 = 2
            x1 = (u - mb) * (one / ma)
            if x1 > one:
                x1 = one
                s1 = 2
            elif x1 < -one:
                x1 = -one
                s1 = 0
        elif x2 < -one:
            x2 = -one
            s2 = 0
            x1 = (u + mb) * (one / ma)
            if x1 > one:
                x1 = one
                s1 = 2
            elif x1 < -one:
                x1 = -one
                s1 = 0
        dif = dif + halfaxis * (-x2)
        dif = with3(dif, j, dif[j] + size2[j] * x1)
        return x1, x2, s1, s2, wp.dot(dif, dif), 1

    @wp.func
    def capsule_box_search(cpos: vec3, halfaxis: vec3, radius: scalar, halflength: scalar, size2: vec3,
                           margin: scalar) -> int:
        """mjraw_CapsuleBox's search for the closest feature, in its order: the two segment ends
        against the faces (`100 + 10 end + face axis + 1`: the end's sign 2 end - 1, the face's
        axis, -1 for none), then the 12 edges (`8 axis + corner`); -1 when nothing is nearer than
        its starting distance. Only the choice leaves: the caller recomputes the chosen feature's
        values, so that the adjoint goes through one feature, not through the search."""
        bestdist = margin + scalar(2.0) * (radius + halflength + size2[0] + size2[1] + size2[2])
        best = int(-1)
        # a segment end against a face of the box
        for ii in range(2):
            tmp1 = cpos + halfaxis * scalar(2 * ii - 1)
            tmp2 = tmp1
            c1 = int(0)
            c2 = int(-1)
            for j in range(3):
                if tmp1[j] < -size2[j]:
                    c1 += 1
                    c2 = j
                    tmp1 = with3(tmp1, j, -size2[j])
                elif tmp1[j] > size2[j]:
                    c1 += 1
                    c2 = j
                    tmp1 = with3(tmp1, j, size2[j])
            if c1 <= 1:
                tmp1 = tmp1 - tmp2
                d = wp.dot(tmp1, tmp1)
                if d < bestdist:
                    bestdist = d
                    best = 100 + 10 * ii + c2 + 1
        # the segment against the edges of the box: edge e runs along axis j = e // 4 through the
        # (e % 4)-th corner with bit j clear (a loop Warp does not unroll: 12 unrolled edges spill
        # the kernel's registers on a GPU)
        e = int(0)
        while e < 12:
            j = e // 4
            k = e % 4
            i = (k & ((1 << j) - 1)) | ((k >> j) << (j + 1))
            x1, x2, s1, s2, d, ok = capsule_box_edge(cpos, halfaxis, halflength, size2, j, i)
            if ok == 1 and d < bestdist - scalar(MINVAL):
                bestdist = d
                best = 8 * j + i
            e = e + 1
        return best

    @wp.func_grad(capsule_box_search)
    def adj_capsule_box_search(cpos: vec3, halfaxis: vec3, radius: scalar, halflength: scalar, size2: vec3,
                               margin: scalar, adj_ret: int):
        """An integer: no gradient."""
        pass

    @wp.func
    def capsule_box(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                    dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                    w: int, slot: int) -> int:
        """mjraw_CapsuleBox (engine_collision_box.c): the point of the capsule segment closest
        to the box (over the two ends against the faces and the segment against the 12 edges),
        plus a heuristic second point along the segment; each point is collided as a sphere.
        The closest feature is found first (`capsule_box_search`), then its values recomputed."""
        one = scalar(1.0)
        halflength = size1[1]
        secondpos = scalar(-4.0)  # no second contact (valid values are in [-1, 1])

        # capsule center and axis in the box frame
        cpos = wp.transpose(mat2) * (pos1 - pos2)
        axis = wp.transpose(mat2) * col(mat1, 2)
        halfaxis = axis * halflength

        axisdir = int(0)
        if halfaxis[0] > scalar(0.0):
            axisdir += 1
        if halfaxis[1] > scalar(0.0):
            axisdir += 2
        if halfaxis[2] > scalar(0.0):
            axisdir += 4

        best = capsule_box_search(cpos, halfaxis, size1[0], halflength, size2, margin)
        if best < 0:
            return 0
        bestsegmentpos = scalar(0.0)
        bestboxpos = scalar(0.0)
        cltype = int(-4)
        clface = int(-1)
        clcorner = int(0)
        cledge = int(0)
        if best >= 100:  # a segment end against a face
            ii = (best - 100) // 10
            bestsegmentpos = scalar(2 * ii - 1)
            cltype = 2 * ii - 3
            clface = (best - 100) % 10 - 1
        else:  # the segment against an edge
            cledge = best // 8
            i = best % 8
            x1, x2, s1, s2, d, ok = capsule_box_edge(cpos, halfaxis, halflength, size2, cledge, i)
            c1 = s1 * 3 + s2
            bestsegmentpos = x2
            bestboxpos = x1
            clcorner = i + (1 << cledge) * (c1 // 6)
            cltype = c1


        # second contact point along the segment (secondpos), following MuJoCo's case analysis
        mul = scalar(0.0)
        e1 = scalar(0.0)
        e2 = scalar(0.0)
        ax = int(0)
        ax1 = int(0)
        ax2 = int(0)
        if cltype >= 0 and cltype // 3 != 1:
            # closest to a corner of the box
            c1 = axisdir ^ clcorner
            if c1 != 0 and c1 != 7:
                de = scalar(0.0)
                dp = scalar(0.0)
                if c1 == 1 or c1 == 2 or c1 == 4:
                    mul = one
                    de = one - bestsegmentpos
                    dp = one + bestsegmentpos
                else:
                    mul = -one
                    c1 = 7 - c1
                    dp = one - bestsegmentpos
                    de = one + bestsegmentpos
                if c1 == 1:
                    ax = 0
                    ax1 = 1
                    ax2 = 2
                elif c1 == 2:
                    ax = 1
                    ax1 = 2
                    ax2 = 0
                else:
                    ax = 2
                    ax1 = 0
                    ax2 = 1
                if axis[ax] * axis[ax] > scalar(0.5):
                    # second point along the edge of the box
                    secondpos = shorten(de, scalar(2.0) * size2[ax], wp.abs(halfaxis[ax]))
                    secondpos *= mul
                else:
                    # second point along a face of the box
                    secondpos = shorten(dp, scalar(2.0) * size2[ax1], wp.abs(halfaxis[ax1]))
                    secondpos = shorten(secondpos, scalar(2.0) * size2[ax2], wp.abs(halfaxis[ax2]))
                    secondpos *= -mul
        elif cltype >= 0:
            # closest to the interior of an edge: only a cross (not T) configuration gets a
            # second point
            c1 = (axisdir ^ clcorner) & (7 - (1 << cledge))
            if c1 == 1 or c1 == 2 or c1 == 4:
                if cledge == 0:
                    ax1 = 1
                    ax2 = 2
                elif cledge == 1:
                    ax1 = 2
                    ax2 = 0
                else:
                    ax1 = 0
                    ax2 = 1
                ax = cledge
                # the face with the lower angle to the capsule
                if wp.abs(axis[ax1]) > wp.abs(axis[ax2]):
                    ax1 = ax2
                ax2 = 3 - ax - ax1
                if c1 & (1 << ax2):
                    mul = one
                    secondpos = one - bestsegmentpos
                else:
                    mul = -one
                    secondpos = one + bestsegmentpos
                secondpos = shorten(secondpos, scalar(2.0) * size2[ax2], wp.abs(halfaxis[ax2]))
                if ((axisdir & (1 << ax)) != 0) == ((c1 & (1 << ax2)) != 0):
                    e2 = one - bestboxpos
                else:
                    e2 = one + bestboxpos
                secondpos = shorten(secondpos, size2[ax] * e2, wp.abs(halfaxis[ax]))
                secondpos *= mul
        else:
            # a segment end is closest to a face: clamp the other end to the box's extent
            if clface != -1:
                if cltype == -3:
                    mul = one
                else:
                    mul = -one
                secondpos = scalar(2.0)
                tmp1 = cpos + halfaxis * (-mul)
                for i in range(3):
                    # an axis component of 0 gives +-inf or NaN, never in (0, secondpos): skipped,
                    # so that no division by 0 enters the adjoint
                    if i != clface and halfaxis[i] != scalar(0.0):
                        e1 = (size2[i] - tmp1[i]) / halfaxis[i] * mul
                        if e1 > scalar(0.0) and e1 < secondpos:
                            secondpos = e1
                        e1 = (-size2[i] - tmp1[i]) / halfaxis[i] * mul
                        if e1 > scalar(0.0) and e1 < secondpos:
                            secondpos = e1
                secondpos *= mul

        # sphere-box at the first (and second) point
        p = mat2 * (cpos + halfaxis * bestsegmentpos) + pos2
        n = raw_sphere_box(p, size1[0], pos2, mat2, size2, margin, dist, pos, frame, w, slot)
        if secondpos > scalar(-3.0):
            p = mat2 * (cpos + halfaxis * (secondpos + bestsegmentpos)) + pos2
            n += raw_sphere_box(p, size1[0], pos2, mat2, size2, margin, dist, pos, frame, w, slot + n)
        return n

    # ------------------------------------------------------------------ box-box

    @wp.func
    def clip_distance(px: vec12, py: vec12, k: int, coord: int, sgn: scalar, limit: scalar) -> scalar:
        """How far vertex k is outside the half plane sgn * p[coord] <= limit (> 0: outside)."""
        c = px[k]
        if coord == 1:
            c = py[k]
        return sgn * c - limit

    @wp.func
    def clip_all_inside(px: vec12, py: vec12, nin: int, coord: int, sgn: scalar, limit: scalar) -> int:
        """1 when no vertex of the polygon is outside the half plane."""
        inside = int(1)
        for k in range(nin):
            if clip_distance(px, py, k, coord, sgn, limit) > scalar(0.0):
                inside = 0
        return inside

    @wp.func
    def clip_crosses(dp: scalar, dq: scalar) -> bool:
        """Whether the edge between vertices at distances dp and dq crosses the line."""
        return (dp < scalar(0.0) and dq > scalar(0.0)) or (dp > scalar(0.0) and dq < scalar(0.0))

    @wp.func
    def clip_half_plane(px: vec12, py: vec12, pz: vec12, nin: int, coord: int, sgn: scalar, limit: scalar):
        """clipHalfPlane (engine_collision_box.c): clip the polygon (px, py, pz) against
        sgn * p[coord] <= limit (coord 0: x, 1: y); z is interpolated as an attribute.

        Its loops run over the nin vertices (Warp does not unroll them: unrolled over all
        BOXBOX_MAXVERT slots, four calls fill the box-box kernel's registers on a GPU); the
        output count is carried from one vertex to the next, so the adjoint is written out
        (`adj_clip_half_plane`)."""
        # (written out here, not through the adjoint's helpers: calling them costs the kernel
        # registers on a GPU)
        all_inside = int(1)
        for k in range(nin):
            c = px[k]
            if coord == 1:
                c = py[k]
            if sgn * c - limit > scalar(0.0):
                all_inside = 0
        if all_inside == 1:
            return px, py, pz, nin

        ox = vec12()
        oy = vec12()
        oz = vec12()
        nout = int(0)
        for k in range(nin):
            k1 = k + 1
            if k1 == nin:
                k1 = 0
            ck = px[k]
            ck1 = px[k1]
            if coord == 1:
                ck = py[k]
                ck1 = py[k1]
            dp = sgn * ck - limit
            dq = sgn * ck1 - limit
            if dp <= scalar(0.0) and nout < BOXBOX_MAXVERT:
                ox[nout] = px[k]
                oy[nout] = py[k]
                oz[nout] = pz[k]
                nout += 1
            if ((dp < scalar(0.0) and dq > scalar(0.0)) or (dp > scalar(0.0) and dq < scalar(0.0))) and (
                nout < BOXBOX_MAXVERT
            ):
                t = dp / (dp - dq)
                ox[nout] = px[k] + t * (px[k1] - px[k])
                oy[nout] = py[k] + t * (py[k1] - py[k])
                oz[nout] = pz[k] + t * (pz[k1] - pz[k])
                nout += 1
        return ox, oy, oz, nout

    @wp.func_grad(clip_half_plane)
    def adj_clip_half_plane(px: vec12, py: vec12, pz: vec12, nin: int, coord: int, sgn: scalar, limit: scalar,
                            adj_ox: vec12, adj_oy: vec12, adj_oz: vec12, adj_nout: int):
        """The adjoint of clip_half_plane, written out: the forward pass again, each output
        vertex's adjoint sent to the inputs it came from. A kept vertex o = p_k passes it on; a
        crossing o = p_k + t (p_k1 - p_k), t = dp / (dp - dq), dp = sgn c_k - limit (c the
        clipped coordinate), gives adj_p_k += (1 - t) adj_o, adj_p_k1 += t adj_o and, with
        adj_t = adj_o . (p_k1 - p_k), adj_c_k += -sgn dq adj_t / (dp - dq)^2,
        adj_c_k1 += sgn dp adj_t / (dp - dq)^2, adj_limit += -adj_t / (dp - dq)."""
        ax = vec12()
        ay = vec12()
        az = vec12()
        alimit = scalar(0.0)
        if clip_all_inside(px, py, nin, coord, sgn, limit) == 1:
            wp.adjoint[px] += adj_ox
            wp.adjoint[py] += adj_oy
            wp.adjoint[pz] += adj_oz
            return
        nout = int(0)
        for k in range(nin):
            k1 = k + 1
            if k1 == nin:
                k1 = 0
            dp = clip_distance(px, py, k, coord, sgn, limit)
            dq = clip_distance(px, py, k1, coord, sgn, limit)
            if dp <= scalar(0.0) and nout < BOXBOX_MAXVERT:
                ax[k] = ax[k] + adj_ox[nout]
                ay[k] = ay[k] + adj_oy[nout]
                az[k] = az[k] + adj_oz[nout]
                nout += 1
            if clip_crosses(dp, dq) and nout < BOXBOX_MAXVERT:
                den = dp - dq
                t = dp / den
                gx = adj_ox[nout]
                gy = adj_oy[nout]
                gz = adj_oz[nout]
                ax[k] = ax[k] + (scalar(1.0) - t) * gx
                ay[k] = ay[k] + (scalar(1.0) - t) * gy
                az[k] = az[k] + (scalar(1.0) - t) * gz
                ax[k1] = ax[k1] + t * gx
                ay[k1] = ay[k1] + t * gy
                az[k1] = az[k1] + t * gz
                adj_t = gx * (px[k1] - px[k]) + gy * (py[k1] - py[k]) + gz * (pz[k1] - pz[k])
                adj_ck = -sgn * dq * adj_t / (den * den)
                adj_ck1 = sgn * dp * adj_t / (den * den)
                if coord == 1:
                    ay[k] = ay[k] + adj_ck
                    ay[k1] = ay[k1] + adj_ck1
                else:
                    ax[k] = ax[k] + adj_ck
                    ax[k1] = ax[k1] + adj_ck1
                alimit = alimit - adj_t / den
                nout += 1
        wp.adjoint[px] += ax
        wp.adjoint[py] += ay
        wp.adjoint[pz] += az
        wp.adjoint[limit] += alimit

    @wp.func
    def near_duplicate(qx: vec12, qy: vec12, n: int, x: scalar, y: scalar, dupe2: scalar) -> int:
        """1 when (x, y) lies within sqrt(dupe2) of one of the first n points (qx, qy). Only
        an int is carried across the dynamic loop: no gradient passes through it."""
        dupe = int(0)
        for q in range(n):
            dx = qx[q] - x
            dy = qy[q] - y
            if dx * dx + dy * dy < dupe2:
                dupe = 1
        return dupe

    @wp.func
    def box_face_accepted(px: vec12, py: vec12, pz: vec12, nvert: int, margin: scalar, dupe2: scalar) -> int:
        """mjc_BoxBox's choice of the clipped face's vertices (bit k: vertex k): those within the
        margin band, at most 8, each not within sqrt(dupe2) of one accepted before it."""
        qx = vec12()
        qy = vec12()
        mask = int(0)
        naccept = int(0)
        for k in range(nvert):
            if pz[k] <= margin and naccept < 8:
                if near_duplicate(qx, qy, naccept, px[k], py[k], dupe2) == 0:
                    qx[naccept] = px[k]
                    qy[naccept] = py[k]
                    mask = mask | (1 << k)
                    naccept += 1
        return mask

    @wp.func_grad(box_face_accepted)
    def adj_box_face_accepted(px: vec12, py: vec12, pz: vec12, nvert: int, margin: scalar, dupe2: scalar,
                              adj_ret: int):
        """An integer: no gradient."""
        pass

    @wp.func
    def box_edge_points(axis: vec3, a2: vec3, rot: mat33, pos21: vec3, size1: vec3, size2: vec3, ie: int, je: int,
                        amb1: int, amb2: int, v1: int, v2: int):
        """mjc_BoxBox's edge-edge candidate (v1, v2): the closest points of box 1's edge along axis
        ie on the side of `axis` (box 1's frame) and box 2's along je against it (flipped in an
        ambiguous axis for v = 1), clamped to the edges' lengths."""
        one = scalar(1.0)
        ie1 = (ie + 1) % 3
        ie2 = (ie + 2) % 3
        je1 = (je + 1) % 3
        je2 = (je + 2) % 3
        d2 = vec3(rot[0, je], rot[1, je], rot[2, je])
        b = d2[ie]
        denom = one - b * b
        c1 = edge_point(axis, size1, ie1, ie2, one, amb1, v1)
        cc = edge_point(a2, size2, je1, je2, -one, amb2, v2)
        c2 = rot * cc + pos21
        e = c2 - c1
        d1e = e[ie]
        d2e = wp.dot(d2, e)
        s = scalar(0.0)
        if denom >= scalar(MINVAL):
            s = (d1e - b * d2e) / denom
        s = clip(s, -size1[ie], size1[ie])
        t = clip(b * s - d2e, -size2[je], size2[je])
        s = clip(d1e + b * t, -size1[ie], size1[ie])
        return with3(c1, ie, c1[ie] + s), c2 + d2 * t

    @wp.func
    def box_edge_best(axis: vec3, a2: vec3, rot: mat33, pos21: vec3, size1: vec3, size2: vec3, ie: int, je: int,
                      amb1: int, amb2: int) -> int:
        """Which edge-edge candidate (2 v1 + v2) mjc_BoxBox keeps: the first of least distance
        (a second candidate per box only along an ambiguous axis)."""
        nv1 = int(1)
        if amb1 >= 0:
            nv1 = 2
        nv2 = int(1)
        if amb2 >= 0:
            nv2 = 2
        best = int(0)
        best_d2 = scalar(MAXVAL)
        for v1 in range(nv1):
            for v2 in range(nv2):
                p1, p2 = box_edge_points(axis, a2, rot, pos21, size1, size2, ie, je, amb1, amb2, v1, v2)
                g = p2 - p1
                gap2 = wp.dot(g, g)
                if gap2 < best_d2:
                    best_d2 = gap2
                    best = 2 * v1 + v2
        return best

    @wp.func_grad(box_edge_best)
    def adj_box_edge_best(axis: vec3, a2: vec3, rot: mat33, pos21: vec3, size1: vec3, size2: vec3, ie: int, je: int,
                          amb1: int, amb2: int, adj_ret: int):
        """An integer: no gradient."""
        pass

    @wp.func
    def box_box_axis(pos21: vec3, pos12: vec3, rot: mat33, size1: vec3, size2: vec3, margin: scalar) -> int:
        """mjc_BoxBox's separating-axis test: the axis of maximum separation among the 15
        candidates (0-2: box 1's faces, 3-5: box 2's, 6 + 3 i + j: edge i of box 1 x edge j of
        box 2), an edge axis nearly parallel to the best face axis yielding to the face unless
        it is better by 5% of the face depth; -1 when the boxes are apart. Only the choice
        leaves (an integer: its adjoint is empty)."""
        zero = scalar(0.0)
        one = scalar(1.0)
        sepeps = one / (scalar(sepeps_a) * scalar(sepeps_b))
        pareps = one / (scalar(pareps_a) * scalar(pareps_b))
        edgebias = one / scalar(1000000.0)
        septol = margin + sepeps * (size1[0] + size1[1] + size1[2] + size2[0] + size2[1] + size2[2])
        sep_best = scalar(-MAXVAL)
        code = int(-1)
        for i in range(3):
            radius2 = (wp.abs(rot[i, 0]) * size2[0] + wp.abs(rot[i, 1]) * size2[1]
                       + wp.abs(rot[i, 2]) * size2[2])
            sep = wp.abs(pos21[i]) - size1[i] - radius2
            if sep > septol:
                return -1
            if sep > sep_best:
                sep_best = sep
                code = i
        for j in range(3):
            radius1 = (wp.abs(rot[0, j]) * size1[0] + wp.abs(rot[1, j]) * size1[1]
                       + wp.abs(rot[2, j]) * size1[2])
            sep = wp.abs(pos12[j]) - size2[j] - radius1
            if sep > septol:
                return -1
            if sep > sep_best:
                sep_best = sep
                code = 3 + j
        sep_face = sep_best
        code_face = code

        for i in range(3):
            for j in range(3):
                i1 = (i + 1) % 3
                i2 = (i + 2) % 3
                ax1 = -rot[i2, j]
                ax2 = rot[i1, j]
                norm2 = ax1 * ax1 + ax2 * ax2
                if norm2 >= pareps:
                    inv = one / wp.sqrt(norm2)
                    ax1 = ax1 * inv
                    ax2 = ax2 * inv
                    radius1 = size1[i1] * wp.abs(ax1) + size1[i2] * wp.abs(ax2)
                    j1 = (j + 1) % 3
                    j2 = (j + 2) % 3
                    a2_1 = ax1 * rot[i1, j1] + ax2 * rot[i2, j1]
                    a2_2 = ax1 * rot[i1, j2] + ax2 * rot[i2, j2]
                    radius2 = size2[j1] * wp.abs(a2_1) + size2[j2] * wp.abs(a2_2)
                    sep = wp.abs(ax1 * pos21[i1] + ax2 * pos21[i2]) - radius1 - radius2
                    if sep > septol:
                        return -1
                    if sep - edgebias * wp.abs(sep) > sep_best and sep > sep_face:
                        sep_best = sep
                        code = 6 + 3 * i + j

        if code < 0:
            return -1

        # an edge axis nearly parallel to the best face axis yields to the face unless it is
        # better by 5% of the face depth
        if code >= 6:
            ie = (code - 6) // 3
            je = (code - 6) % 3
            axis = with3(with3(zero3(), (ie + 1) % 3, -rot[(ie + 2) % 3, je]), (ie + 2) % 3,
                         rot[(ie + 1) % 3, je])
            axis, an = normalize3(axis)
            face_dot = zero
            if code_face < 3:
                face_dot = wp.abs(axis[code_face])
            else:
                f = code_face - 3
                face_dot = wp.abs(axis[0] * rot[0, f] + axis[1] * rot[1, f] + axis[2] * rot[2, f])
            if face_dot > scalar(99.0) / scalar(100.0) and (
                sep_best < sep_face + scalar(5.0) / scalar(100.0) * wp.abs(sep_face) + scalar(MINVAL)
            ):
                code = code_face
                sep_best = sep_face

        return code

    @wp.func_grad(box_box_axis)
    def adj_box_box_axis(pos21: vec3, pos12: vec3, rot: mat33, size1: vec3, size2: vec3, margin: scalar,
                         adj_ret: int):
        """An integer: no gradient."""
        pass

    @wp.func
    def box_box(pos1: vec3, mat1: mat33, size1: vec3, pos2: vec3, mat2: mat33, size2: vec3, margin: scalar,
                dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                w: int, slot: int) -> int:
        """mjc_BoxBox (engine_collision_box.c, the separating-axis + face-clipping version of
        MuJoCo 4): the axis of maximum separation among the 15 candidates, then either one
        edge-edge contact or the incident face clipped against the reference face."""
        zero = scalar(0.0)
        one = scalar(1.0)
        half = scalar(0.5)
        sepeps = one / (scalar(sepeps_a) * scalar(sepeps_b))
        sgneps = one / (scalar(sgneps_a) * scalar(sgneps_b))
        dupeps = one / (scalar(dupeps_a) * scalar(dupeps_b))

        # rot: box2 axes in box1 frame (columns); pos21 / pos12: each center in the other's frame
        pos21 = wp.transpose(mat1) * (pos2 - pos1)
        pos12 = wp.transpose(mat2) * (pos1 - pos2)
        rot = wp.transpose(mat1) * mat2

        septol = margin + sepeps * (size1[0] + size1[1] + size1[2] + size2[0] + size2[1] + size2[2])
        # ---- stage 1: separating-axis test (the choice of axis, a function of its own)
        code = box_box_axis(pos21, pos12, rot, size1, size2, margin)
        if code < 0:
            return 0

        # ---- stage 2a: edge-edge contact
        if code >= 6:
            ie = (code - 6) // 3
            je = (code - 6) % 3
            ie1 = (ie + 1) % 3
            ie2 = (ie + 2) % 3
            je1 = (je + 1) % 3
            je2 = (je + 2) % 3
            axis = with3(with3(zero3(), ie1, -rot[ie2, je]), ie2, rot[ie1, je])
            axis, an = normalize3(axis)
            if wp.dot(axis, pos21) < zero:
                axis = -axis

            a2 = vec3(axis[0] * rot[0, 0] + axis[1] * rot[1, 0] + axis[2] * rot[2, 0],
                      axis[0] * rot[0, 1] + axis[1] * rot[1, 1] + axis[2] * rot[2, 1],
                      axis[0] * rot[0, 2] + axis[1] * rot[1, 2] + axis[2] * rot[2, 2])
            amb1 = int(-1)
            amb2 = int(-1)
            if wp.abs(axis[ie1]) < sgneps:
                amb1 = ie1
            elif wp.abs(axis[ie2]) < sgneps:
                amb1 = ie2
            if wp.abs(a2[je1]) < sgneps:
                amb2 = je1
            elif wp.abs(a2[je2]) < sgneps:
                amb2 = je2

            # the closest pair of the candidate edges (an integer), then that pair's points
            best = box_edge_best(axis, a2, rot, pos21, size1, size2, ie, je, amb1, amb2)
            w1, w2 = box_edge_points(axis, a2, rot, pos21, size1, size2, ie, je, amb1, amb2, best // 2, best % 2)

            d = wp.dot(w2 - w1, axis)
            if d > septol:
                return 0
            mid = vec3(half * (w1[0] + w2[0]), half * (w1[1] + w2[1]), half * (w1[2] + w2[2]))
            write_contact(dist, pos, frame, w, slot, d, mat1 * mid + pos1, mat1 * axis, zero3())
            return 1

        # ---- stage 2b: face contact
        ref1 = code < 3
        a = code
        sizeref = size1
        sizeinc = size2
        posref = pos1
        matref = mat1
        posoi = pos21
        rinc = rot
        if not ref1:
            a = code - 3
            sizeref = size2
            sizeinc = size1
            posref = pos2
            matref = mat2
            posoi = pos12
            rinc = wp.transpose(rot)

        sgn = one
        if posoi[a] < zero:
            sgn = -one

        # incident face: the face of the incident box most opposed to the reference normal
        binc = int(0)
        for k in range(1, 3):
            if wp.abs(rinc[a, k]) > wp.abs(rinc[a, binc]):
                binc = k
        tinc = one
        if sgn * rinc[a, binc] > zero:
            tinc = -one

        ax = (a + 1) % 3
        ay = (a + 2) % 3
        bu = (binc + 1) % 3
        bv = (binc + 2) % 3
        # incident face center and half-edges in the reference frame (ax, ay, a), the last
        # coordinate measured from the reference face along its outward normal
        cx = vec3(posoi[ax] + tinc * sizeinc[binc] * rinc[ax, binc],
                  posoi[ay] + tinc * sizeinc[binc] * rinc[ay, binc],
                  sgn * (posoi[a] + tinc * sizeinc[binc] * rinc[a, binc]) - sizeref[a])
        du = vec3(sizeinc[bu] * rinc[ax, bu], sizeinc[bu] * rinc[ay, bu], sizeinc[bu] * rinc[a, bu] * sgn)
        dv = vec3(sizeinc[bv] * rinc[ax, bv], sizeinc[bv] * rinc[ay, bv], sizeinc[bv] * rinc[a, bv] * sgn)

        px = vec12()
        py = vec12()
        pz = vec12()
        for k in range(4):
            su = one
            if k == 1 or k == 2:
                su = -one
            sv = one
            if k >= 2:
                sv = -one
            px[k] = cx[0] + su * du[0] + sv * dv[0]
            py[k] = cx[1] + su * du[1] + sv * dv[1]
            pz[k] = cx[2] + su * du[2] + sv * dv[2]

        nvert = int(4)
        px, py, pz, nvert = clip_half_plane(px, py, pz, nvert, 0, one, sizeref[ax])
        px, py, pz, nvert = clip_half_plane(px, py, pz, nvert, 0, -one, sizeref[ax])
        px, py, pz, nvert = clip_half_plane(px, py, pz, nvert, 1, one, sizeref[ay])
        px, py, pz, nvert = clip_half_plane(px, py, pz, nvert, 1, -one, sizeref[ay])

        # world normal from geom1 to geom2
        nsign = sgn
        if not ref1:
            nsign = -sgn
        normal = col(matref, a) * nsign

        # vertices within the margin band, dropping near-duplicates from clipping at corners
        # (MuJoCo compacts the accepted vertices to the front of the polygon in place): which ones
        # first (an integer mask), then each written at its rank among them, in a loop Warp does
        # not unroll and that carries nothing; one frame for all of them
        accepted = box_face_accepted(px, py, pz, nvert, margin,
                                     dupeps * (sizeref[ax] * sizeref[ax] + sizeref[ay] * sizeref[ay]))
        naccept = bit_count(accepted)
        if naccept > 0:
            contact_frame = make_frame(normal, zero3())
            for k in range(nvert):
                if (accepted >> k) & 1 != 0:
                    i = slot + bit_count(accepted & ((1 << k) - 1))
                    posc = with3(with3(vec3(sgn * (sizeref[a] + half * pz[k])), ax, px[k]), ay, py[k])
                    dist[w, i] = pz[k]
                    pos[w, i] = matref * posc + posref
                    frame[w, i] = contact_frame
        return naccept

    return types.SimpleNamespace(
        plane_sphere=plane_sphere,
        plane_capsule=plane_capsule,
        plane_cylinder=plane_cylinder,
        plane_box=plane_box,
        sphere_sphere=sphere_sphere,
        sphere_cylinder=sphere_cylinder,
        sphere_capsule=sphere_capsule,
        sphere_box=sphere_box,
        capsule_capsule=capsule_capsule,
        capsule_box=capsule_box,
        box_box=box_box,
        make_frame=make_frame,
    )
