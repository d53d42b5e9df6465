"""Ray-geom intersection (mju_rayGeom, engine_ray.c): the distance along a ray from a point to the
surface of a sphere, capsule, ellipsoid, cylinder or box, -1 when the ray misses. The touch sensor
counts a contact when the ray from the contact point along its normal force meets the sensor's
site (always when the point is inside the site's volume).

`ray_geom(pos, mat, size, gtype, pnt, vec)` with the geom's frame (pos, mat), its size and type;
the ray is pnt + x vec, x >= 0.

`functions(scalar)` adds what mj_ray needs beyond that (the rangefinder, simrl.sim.sensor):
`ray_plane`, `geom_normal` (the surface normal of a solid where the ray meets it, as
mju_rayGeom's normal output), and a height field's intersection (in the field's frame) in two
parts, `hfield_feature` (which part of the field the ray meets first: a loop over the cells the
ray's shadow crosses, as mj_rayHfield) and `hfield_feature_hit` (the distance and normal at
that part, no loop: the differentiable step's generated adjoint reads what a loop leaves
behind as its initial value).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.types import MINVAL, GeomType, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    vec2, vec3, mat33 = T.vec2, T.vec3, T.mat33

    @wp.func
    def ray_quad(a: scalar, b: scalar, c: scalar):
        """Both real solutions x0 <= x1 of a x^2 + 2 b x + c = 0 ((-1, -1) if there are none) and
        the smallest non-negative one, or -1 (ray_quad)."""
        det = b * b - a * c
        x = vec2(scalar(-1.0), scalar(-1.0))
        best = scalar(-1.0)
        if det >= scalar(0.0) and a >= scalar(MINVAL):
            det = wp.sqrt(det)
            x = vec2((-b - det) / a, (-b + det) / a)
            if x[0] >= scalar(0.0):
                best = x[0]
            elif x[1] >= scalar(0.0):
                best = x[1]
        return best, x

    @wp.func
    def ray_sphere(pos: vec3, dist_sqr: scalar, pnt: vec3, vec: vec3):
        dif = pnt - pos
        best, x = ray_quad(wp.dot(vec, vec), wp.dot(vec, dif), wp.dot(dif, dif) - dist_sqr)
        return best

    @wp.func
    def ray_capsule(pos: vec3, mat: mat33, size: vec3, pnt: vec3, vec: vec3):
        x = scalar(-1.0)
        ssz = size[0] + size[1]
        if ray_sphere(pos, ssz * ssz, pnt, vec) >= scalar(0.0):
            # ray_map: into the capsule's frame
            lpnt = wp.transpose(mat) * (pnt - pos)
            lvec = wp.transpose(mat) * vec
            # the round side, between the flat ends
            a = lvec[0] * lvec[0] + lvec[1] * lvec[1]
            b = lvec[0] * lpnt[0] + lvec[1] * lpnt[1]
            c = lpnt[0] * lpnt[0] + lpnt[1] * lpnt[1] - size[0] * size[0]
            sol, xx = ray_quad(a, b, c)
            if sol >= scalar(0.0) and wp.abs(lpnt[2] + sol * lvec[2]) <= size[1]:
                x = sol
            # the caps: the top half of the top sphere, the bottom half of the bottom one
            a = wp.dot(lvec, lvec)
            for k in range(2):
                side = scalar(1.0) - scalar(2.0) * scalar(k)
                ldif = vec3(lpnt[0], lpnt[1], lpnt[2] - side * size[1])
                sol, xx = ray_quad(a, wp.dot(lvec, ldif), wp.dot(ldif, ldif) - size[0] * size[0])
                for i in range(2):
                    z = lpnt[2] + xx[i] * lvec[2]
                    if xx[i] >= scalar(0.0) and side * z >= size[1]:
                        if x < scalar(0.0) or xx[i] < x:
                            x = xx[i]
        return x

    @wp.func
    def ray_ellipsoid(pos: vec3, mat: mat33, size: vec3, pnt: vec3, vec: vec3):
        lpnt = wp.transpose(mat) * (pnt - pos)
        lvec = wp.transpose(mat) * vec
        s = vec3(scalar(1.0) / (size[0] * size[0]), scalar(1.0) / (size[1] * size[1]),
                 scalar(1.0) / (size[2] * size[2]))
        a = s[0] * lvec[0] * lvec[0] + s[1] * lvec[1] * lvec[1] + s[2] * lvec[2] * lvec[2]
        b = s[0] * lvec[0] * lpnt[0] + s[1] * lvec[1] * lpnt[1] + s[2] * lvec[2] * lpnt[2]
        c = s[0] * lpnt[0] * lpnt[0] + s[1] * lpnt[1] * lpnt[1] + s[2] * lpnt[2] * lpnt[2] - scalar(1.0)
        best, xx = ray_quad(a, b, c)
        return best

    @wp.func
    def ray_cylinder(pos: vec3, mat: mat33, size: vec3, pnt: vec3, vec: vec3):
        x = scalar(-1.0)
        if ray_sphere(pos, size[0] * size[0] + size[1] * size[1], pnt, vec) >= scalar(0.0):
            lpnt = wp.transpose(mat) * (pnt - pos)
            lvec = wp.transpose(mat) * vec
            # the flat ends, within the radius
            if wp.abs(lvec[2]) > scalar(MINVAL):
                for k in range(2):
                    side = scalar(2.0) * scalar(k) - scalar(1.0)
                    sol = (side * size[1] - lpnt[2]) / lvec[2]
                    if sol >= scalar(0.0):
                        p0 = lpnt[0] + sol * lvec[0]
                        p1 = lpnt[1] + sol * lvec[1]
                        if p0 * p0 + p1 * p1 <= size[0] * size[0]:
                            if x < scalar(0.0) or sol < x:
                                x = sol
            # the round side, between the ends
            a = lvec[0] * lvec[0] + lvec[1] * lvec[1]
            b = lvec[0] * lpnt[0] + lvec[1] * lpnt[1]
            c = lpnt[0] * lpnt[0] + lpnt[1] * lpnt[1] - size[0] * size[0]
            sol, xx = ray_quad(a, b, c)
            if sol >= scalar(0.0) and wp.abs(lpnt[2] + sol * lvec[2]) <= size[1]:
                if x < scalar(0.0) or sol < x:
                    x = sol
        return x

    @wp.func
    def ray_box(pos: vec3, mat: mat33, size: vec3, pnt: vec3, vec: vec3):
        x = scalar(-1.0)
        if ray_sphere(pos, wp.dot(size, size), pnt, vec) >= scalar(0.0):
            lpnt = wp.transpose(mat) * (pnt - pos)
            lvec = wp.transpose(mat) * vec
            for i in range(3):
                if wp.abs(lvec[i]) > scalar(MINVAL):
                    # the two other axes of the faces normal to axis i
                    i0 = 0
                    i1 = 2
                    if i == 0:
                        i0 = 1
                    elif i == 2:
                        i1 = 1
                    for k in range(2):
                        side = scalar(2.0) * scalar(k) - scalar(1.0)
                        sol = (side * size[i] - lpnt[i]) / lvec[i]
                        if sol >= scalar(0.0):
                            p0 = lpnt[i0] + sol * lvec[i0]
                            p1 = lpnt[i1] + sol * lvec[i1]
                            if wp.abs(p0) <= size[i0] and wp.abs(p1) <= size[i1]:
                                if x < scalar(0.0) or sol < x:
                                    x = sol
        return x

    @wp.func
    def ray_geom(pos: vec3, mat: mat33, size: vec3, gtype: int, pnt: vec3, vec: vec3):
        """mju_rayGeom for the solid types; -1 for the others (planes, meshes, ...)."""
        x = scalar(-1.0)
        if gtype == GeomType.SPHERE:
            x = ray_sphere(pos, size[0] * size[0], pnt, vec)
        elif gtype == GeomType.CAPSULE:
            x = ray_capsule(pos, mat, size, pnt, vec)
        elif gtype == GeomType.ELLIPSOID:
            x = ray_ellipsoid(pos, mat, size, pnt, vec)
        elif gtype == GeomType.CYLINDER:
            x = ray_cylinder(pos, mat, size, pnt, vec)
        elif gtype == GeomType.BOX:
            x = ray_box(pos, mat, size, pnt, vec)
        return x

    return ray_geom


#: hfield_feature's parts of a height field: none, the base box's face, a cell's first or second
#: triangle, a side of the top box (HF_SIDE + 0..3: -x, +x, -y, +y)
HF_NONE, HF_BASE, HF_TRI_A, HF_TRI_B, HF_SIDE = 0, 1, 2, 3, 4


@functools.cache
def functions(scalar):
    """mj_ray's per-geom functions of precision `scalar` (see the module docstring)."""
    T = scalar_types(scalar)
    vec3, mat33, vec6 = T.vec3, T.mat33, T.vec6
    vec4 = wp.types.vector(4, scalar)
    ray_geom = build(scalar)
    zero3 = vec3(scalar(0.0), scalar(0.0), scalar(0.0))

    @wp.func
    def ray_plane(pos: vec3, mat: mat33, size: vec3, pnt: vec3, vec: vec3):
        """mju_rayGeom for a plane (ray_plane): the ray must meet the front face, within the
        plane's size where that is positive (size 0: infinite)."""
        lpnt = wp.transpose(mat) * (pnt - pos)
        lvec = wp.transpose(mat) * vec
        x = scalar(-1.0)
        if lvec[2] <= -scalar(MINVAL):
            sol = -lpnt[2] / lvec[2]
            if sol >= scalar(0.0):
                p0 = lpnt[0] + sol * lvec[0]
                p1 = lpnt[1] + sol * lvec[1]
                if (size[0] <= scalar(0.0) or wp.abs(p0) <= size[0]) and (
                        size[1] <= scalar(0.0) or wp.abs(p1) <= size[1]):
                    x = sol
        return x

    @wp.func
    def geom_normal(pos: vec3, mat: mat33, size: vec3, gtype: int, pnt: vec3, vec: vec3, x: scalar):
        """The outward unit normal (world frame) of a plane or solid geom where the ray meets it
        at distance x >= 0, as mju_rayGeom's normal: the face or part it hit is the one whose
        constraint the hit point meets (the others it satisfies with room to spare)."""
        n = vec3(mat[0, 2], mat[1, 2], mat[2, 2])  # a plane: its z axis
        if gtype == GeomType.SPHERE:
            n = wp.normalize(pnt + vec * x - pos)
        elif gtype != GeomType.PLANE:
            lp = wp.transpose(mat) * (pnt - pos) + (wp.transpose(mat) * vec) * x
            nl = lp
            if gtype == GeomType.CAPSULE:
                # the round side between the ends (z 0), else the nearer cap's sphere
                z = scalar(0.0)
                if lp[2] > size[1]:
                    z = lp[2] - size[1]
                elif lp[2] < -size[1]:
                    z = lp[2] + size[1]
                nl = vec3(lp[0], lp[1], z)
            elif gtype == GeomType.ELLIPSOID:
                nl = vec3(lp[0] / (size[0] * size[0]), lp[1] / (size[1] * size[1]), lp[2] / (size[2] * size[2]))
            elif gtype == GeomType.CYLINDER:
                r = wp.sqrt(lp[0] * lp[0] + lp[1] * lp[1])
                if wp.abs(size[1] - wp.abs(lp[2])) < wp.abs(size[0] - r):
                    nl = vec3(scalar(0.0), scalar(0.0), wp.sign(lp[2]))
                else:
                    nl = vec3(lp[0], lp[1], scalar(0.0))
            elif gtype == GeomType.BOX:
                # the face whose plane the point is on: the axis nearest its face (by branches,
                # as hfield_feature_hit)
                e0 = wp.abs(lp[0]) - size[0]
                e1 = wp.abs(lp[1]) - size[1]
                e2 = wp.abs(lp[2]) - size[2]
                nl = vec3(wp.sign(lp[0]), scalar(0.0), scalar(0.0))
                if e1 > e0 and e1 >= e2:
                    nl = vec3(scalar(0.0), wp.sign(lp[1]), scalar(0.0))
                elif e2 > e0 and e2 > e1:
                    nl = vec3(scalar(0.0), scalar(0.0), wp.sign(lp[2]))
            n = mat * wp.normalize(nl)
        return n

    @wp.func
    def bounding_sphere(pos: vec3, dist_sqr: scalar, pnt: vec3, vec: vec3):
        """The ray meets the sphere of squared radius dist_sqr about pos (ray_sphere >= 0)."""
        dif = pnt - pos
        a = wp.dot(vec, vec)
        b = wp.dot(vec, dif)
        det = b * b - a * (wp.dot(dif, dif) - dist_sqr)
        hit = False
        if det >= scalar(0.0) and a >= scalar(MINVAL):
            hit = (-b + wp.sqrt(det)) / a >= scalar(0.0)
        return hit

    @wp.func
    def ray_box_faces(lpnt: vec3, lvec: vec3, size: vec3):
        """ray_box with its `all` output, in the box's frame (the ray lpnt + x lvec): the nearest
        face the ray meets within the face (-x, +x, -y, +y, -z, +z: 0-5; -1: none), the distance
        to it (-1: none), and the distance to each face (-1: not met)."""
        faces = vec6(scalar(-1.0))
        near = int(-1)
        best = scalar(-1.0)
        if bounding_sphere(zero3, wp.dot(size, size), lpnt, lvec):
            for i in range(3):
                if wp.abs(lvec[i]) > scalar(MINVAL):
                    i0 = 0
                    i1 = 2
                    if i == 0:
                        i0 = 1
                    elif i == 2:
                        i1 = 1
                    for k in range(2):
                        face = 2 * i + k
                        # (Warp: a cast of an unrolled loop's index changes the index's type)
                        side = scalar(2 * k - 1)
                        sol = (side * size[i] - lpnt[i]) / lvec[i]
                        if sol >= scalar(0.0):
                            p0 = lpnt[i0] + sol * lvec[i0]
                            p1 = lpnt[i1] + sol * lvec[i1]
                            if wp.abs(p0) <= size[i0] and wp.abs(p1) <= size[i1]:
                                if near < 0 or sol < best:
                                    near = face
                                    best = sol
                                faces[face] = sol
        return near, best, faces

    @wp.func
    def hfield_boxes(hsize: vec4):
        """mj_rayHfield's base box (below the field's origin) and top box (the elevations' range)
        in the field's frame: their centres' heights and half sizes."""
        base_z = -hsize[3] * scalar(0.5)
        top_z = hsize[2] * scalar(0.5)
        return base_z, vec3(hsize[0], hsize[1], -base_z), top_z, vec3(hsize[0], hsize[1], top_z)

    @wp.func
    def triangle_distance(lpnt: vec3, lvec: vec3, b0: vec3, b1: vec3, v0: vec3, v1: vec3, v2: vec3):
        """ray_triangle (engine_ray.c): the distance to the triangle (-1: missed), in the frame of
        lpnt and lvec; b0, b1 span the plane normal to lvec."""
        x = scalar(-1.0)
        d0 = v0 - lpnt
        d1 = v1 - lpnt
        d2 = v2 - lpnt
        a0 = wp.dot(b0, d0)
        a1 = wp.dot(b0, d1)
        a2 = wp.dot(b0, d2)
        c0 = wp.dot(b1, d0)
        c1 = wp.dot(b1, d1)
        c2 = wp.dot(b1, d2)
        zero = scalar(0.0)
        same = ((a0 > zero and a1 > zero and a2 > zero) or (a0 < zero and a1 < zero and a2 < zero)
                or (c0 > zero and c1 > zero and c2 > zero) or (c0 < zero and c1 < zero and c2 < zero))
        if not same:
            # the origin inside the triangle's projection: A t = b, A = (p0 - p2, p1 - p2), b = -p2
            A0 = a0 - a2
            A1 = a1 - a2
            A2 = c0 - c2
            A3 = c1 - c2
            det = A0 * A3 - A1 * A2
            if wp.abs(det) >= scalar(MINVAL):
                t0 = (A3 * (-a2) - A1 * (-c2)) / det
                t1 = (-A2 * (-a2) + A0 * (-c2)) / det
                if t0 >= zero and t1 >= zero and t0 + t1 <= scalar(1.0):
                    n = wp.cross(v0 - v2, v1 - v2)
                    denom = wp.dot(lvec, n)
                    if wp.abs(denom) >= scalar(MINVAL):
                        x = -wp.dot(lpnt - v2, n) / denom
        return x

    @wp.func
    def triangle(lpnt: vec3, lvec: vec3, b0: vec3, b1: vec3, v0: vec3, v1: vec3, v2: vec3):
        """`triangle_distance` and the triangle's unit normal (v0 - v2) x (v1 - v2)."""
        return triangle_distance(lpnt, lvec, b0, b1, v0, v1, v2), wp.normalize(wp.cross(v0 - v2, v1 - v2))

    @wp.func
    def hfield_basis(lvec: vec3):
        """mj_rayHfield's basis b0, b1 of the plane normal to lvec."""
        b0 = vec3(scalar(1.0), scalar(1.0), scalar(1.0))
        if wp.abs(lvec[0]) >= wp.abs(lvec[1]) and wp.abs(lvec[0]) >= wp.abs(lvec[2]):
            b0[0] = scalar(0.0)
        elif wp.abs(lvec[1]) >= wp.abs(lvec[2]):
            b0[1] = scalar(0.0)
        else:
            b0[2] = scalar(0.0)
        b1 = wp.normalize(b0 - lvec * (wp.dot(lvec, b0) / wp.dot(lvec, lvec)))
        b0 = wp.normalize(wp.cross(b1, lvec))
        return b0, b1

    @wp.func
    def cell_triangle(hsize: vec4, nrow: int, ncol: int, adr: int, data: wp.array(dtype=wp.float32), r: int,
                      c: int, second: int):
        """Cell (r, c)'s first triangle (r, c), (r, c + 1), (r + 1, c + 1) or second (r, c),
        (r + 1, c + 1), (r + 1, c) in the field's frame (mj_rayHfield's winding: normals up)."""
        dx = scalar(2.0) * hsize[0] / scalar(ncol - 1)
        dy = scalar(2.0) * hsize[1] / scalar(nrow - 1)
        v0 = vec3(dx * scalar(c) - hsize[0], dy * scalar(r) - hsize[1], scalar(data[adr + r * ncol + c]) * hsize[2])
        v2 = vec3(dx * scalar(c + 1) - hsize[0], dy * scalar(r + 1) - hsize[1],
                  scalar(data[adr + (r + 1) * ncol + c + 1]) * hsize[2])
        v1 = vec3(dx * scalar(c + 1) - hsize[0], dy * scalar(r) - hsize[1],
                  scalar(data[adr + r * ncol + c + 1]) * hsize[2])
        if second != 0:
            v1 = v2
            v2 = vec3(dx * scalar(c) - hsize[0], dy * scalar(r + 1) - hsize[1],
                      scalar(data[adr + (r + 1) * ncol + c]) * hsize[2])
        return v0, v1, v2

    @wp.func
    def side_below(hsize: vec4, nrow: int, ncol: int, adr: int, data: wp.array(dtype=wp.float32), lpnt: vec3,
                   lvec: vec3, i: int, sol: scalar):
        """mj_rayHfield: the top box's side i (-x, +x, -y, +y) met at distance sol lies below the
        field's edge there (the point's normalized height under the edge's segment)."""
        dx = scalar(2.0) * hsize[0] / scalar(ncol - 1)
        dy = scalar(2.0) * hsize[1] / scalar(nrow - 1)
        z = (lpnt[2] + sol * lvec[2]) / hsize[2]
        y = scalar(0.0)
        z0 = scalar(0.0)
        z1 = scalar(0.0)
        y0 = scalar(0.0)
        if i < 2:
            y = (lpnt[1] + sol * lvec[1] + hsize[1]) / dy
            y0 = wp.max(scalar(0.0), wp.min(scalar(nrow - 2), wp.floor(y)))
            col = int(0)
            if i == 1:
                col = ncol - 1
            z0 = scalar(data[adr + int(y0) * ncol + col])
            z1 = scalar(data[adr + (int(y0) + 1) * ncol + col])
        else:
            y = (lpnt[0] + sol * lvec[0] + hsize[0]) / dx
            y0 = wp.max(scalar(0.0), wp.min(scalar(ncol - 2), wp.floor(y)))
            row = int(0)
            if i == 3:
                row = (nrow - 1) * ncol
            z0 = scalar(data[adr + int(y0) + row])
            z1 = scalar(data[adr + int(y0) + 1 + row])
        return z < z0 * (y0 + scalar(1.0) - y) + z1 * (y - y0)

    @wp.func
    def hfield_feature(lpnt: vec3, lvec: vec3, hsize: vec4, nrow: int, ncol: int, adr: int,
                       data: wp.array(dtype=wp.float32)):
        """mj_rayHfield's search, for the ray lpnt + x lvec in the field's frame: the part of the
        field the ray meets first, (kind, i, j): HF_NONE; HF_BASE and the base box's face i;
        HF_TRI_A or HF_TRI_B and cell (row i, column j); HF_SIDE and the top box's side i; and
        the distance to it (-1: none; without a gradient, as a loop's result: hfield_feature_hit
        has one)."""
        base_z, base_size, top_z, top_size = hfield_boxes(hsize)
        kind = int(HF_NONE)
        fi = int(0)
        fj = int(0)
        near, x, base_faces = ray_box_faces(lpnt - vec3(scalar(0.0), scalar(0.0), base_z), lvec, base_size)
        if near >= 0:
            kind = HF_BASE
            fi = near
        top_near, top, faces = ray_box_faces(lpnt - vec3(scalar(0.0), scalar(0.0), top_z), lvec, top_size)
        if top_near >= 0:
            b0, b1 = hfield_basis(lvec)
            # the ray's segment inside the top box
            s0 = scalar(0.0)
            s1 = top
            for i in range(6):
                if faces[i] > s1:
                    s0 = top
                    s1 = faces[i]
            dx = scalar(2.0) * hsize[0] / scalar(ncol - 1)
            dy = scalar(2.0) * hsize[1] / scalar(nrow - 1)
            sx0 = (lpnt[0] + s0 * lvec[0] + hsize[0]) / dx
            sx1 = (lpnt[0] + s1 * lvec[0] + hsize[0]) / dx
            sy0 = (lpnt[1] + s0 * lvec[1] + hsize[1]) / dy
            sy1 = (lpnt[1] + s1 * lvec[1] + hsize[1]) / dy
            cmin = wp.max(0, int(wp.floor(wp.min(sx0, sx1))) - 1)
            cmax = wp.min(ncol - 1, int(wp.ceil(wp.max(sx0, sx1))) + 1)
            rmin = wp.max(0, int(wp.floor(wp.min(sy0, sy1))) - 1)
            rmax = wp.min(nrow - 1, int(wp.ceil(wp.max(sy0, sy1))) + 1)
            ntri = int(2)  # a loop, not unrolled: fewer registers on a GPU
            for r in range(rmin, rmax):
                for c in range(cmin, cmax):
                    for t in range(ntri):
                        v0, v1, v2 = cell_triangle(hsize, nrow, ncol, adr, data, r, c, t)
                        sol = triangle_distance(lpnt, lvec, b0, b1, v0, v1, v2)
                        if sol >= scalar(0.0) and (x < scalar(0.0) or sol < x):
                            x = sol
                            kind = HF_TRI_A + t
                            fi = r
                            fj = c
            for i in range(4):
                if faces[i] >= scalar(0.0) and (faces[i] < x or x < scalar(0.0)):
                    if side_below(hsize, nrow, ncol, adr, data, lpnt, lvec, i, faces[i]):
                        x = faces[i]
                        kind = HF_SIDE + i
                        fi = i
        return kind, fi, fj, x

    @wp.func
    def hfield_feature_hit(lpnt: vec3, lvec: vec3, hsize: vec4, nrow: int, ncol: int, adr: int,
                           data: wp.array(dtype=wp.float32), kind: int, fi: int, fj: int):
        """The distance along the ray (lpnt + x lvec, the field's frame) to the part
        `hfield_feature` found, and the field's outward normal there (the field's frame);
        (-1, 0) for HF_NONE."""
        x = scalar(-1.0)
        nl = zero3
        if kind == HF_TRI_A or kind == HF_TRI_B:
            b0, b1 = hfield_basis(lvec)
            v0, v1, v2 = cell_triangle(hsize, nrow, ncol, adr, data, fi, fj, kind - HF_TRI_A)
            x, nl = triangle(lpnt, lvec, b0, b1, v0, v1, v2)
        elif kind != HF_NONE:
            # a face of the base box (fi) or a side of the top box (fi < 4): a plane of its box
            base_z, base_size, top_z, top_size = hfield_boxes(hsize)
            lp = lpnt - vec3(scalar(0.0), scalar(0.0), base_z)
            size = base_size
            if kind != HF_BASE:
                lp = lpnt - vec3(scalar(0.0), scalar(0.0), top_z)
                size = top_size
            side = scalar(2 * (fi % 2) - 1)
            # the face's axis, by branches (an array index by a run-time value puts a vector in a
            # GPU thread's stack)
            if fi < 2:
                x = (side * size[0] - lp[0]) / lvec[0]
                nl = vec3(side, scalar(0.0), scalar(0.0))
            elif fi < 4:
                x = (side * size[1] - lp[1]) / lvec[1]
                nl = vec3(scalar(0.0), side, scalar(0.0))
            else:
                x = (side * size[2] - lp[2]) / lvec[2]
                nl = vec3(scalar(0.0), scalar(0.0), side)
        return x, nl

    return SimpleNamespace(ray_geom=ray_geom, ray_plane=ray_plane, geom_normal=geom_normal,
                           hfield_feature=hfield_feature, hfield_feature_hit=hfield_feature_hit)
