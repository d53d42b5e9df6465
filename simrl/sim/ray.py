"""Ray-geom intersection (mju_rayGeom, engine_ray.c): the distance along a ray from a point to the
surface of a sphere, capsule, ellipsoid, cylinder or box, -1 when the ray misses. The touch sensor
counts a contact when the ray from the contact point along its normal force meets the sensor's
site (always when the point is inside the site's volume).

`ray_geom(pos, mat, size, gtype, pnt, vec)` with the geom's frame (pos, mat), its size and type;
the ray is pnt + x vec, x >= 0.
"""


import functools

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
