"""Small adjoints shared by the hand-written reverse kernels of the differentiable step
(simrl.sim.grad's `reverse`): of the quaternion functions of simrl.sim.types, each the exact
derivative of the formula the forward evaluates (not of the rotation it stands for: a quaternion
a little off unit length gives the generated adjoint's numbers), and tests of whether an
adjoint is nonzero (an element whose outputs received no gradient is skipped).

Warp stores a quaternion x, y, z, w."""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.types import MINVAL, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    vec3, vec6, quat, mat33 = T.vec3, T.vec6, T.quat, T.mat33

    @wp.func
    def nonzero3(v: vec3):
        """Whether a vector has a nonzero (or NaN) component."""
        return v[0] != scalar(0.0) or v[1] != scalar(0.0) or v[2] != scalar(0.0)

    @wp.func
    def nonzero4(q: quat):
        return nonzero3(vec3(q[0], q[1], q[2])) or q[3] != scalar(0.0)

    @wp.func
    def nonzero6(v: vec6):
        return nonzero3(vec3(v[0], v[1], v[2])) or nonzero3(vec3(v[3], v[4], v[5]))

    @wp.func
    def nonzero33(a: mat33):
        return nonzero3(vec3(a[0, 0], a[0, 1], a[0, 2])) or nonzero3(vec3(a[1, 0], a[1, 1], a[1, 2])) or nonzero3(
            vec3(a[2, 0], a[2, 1], a[2, 2]))

    @wp.func
    def quat_to_mat_adjoint(q: quat, g: mat33):
        """The adjoint of quat_to_mat at q for the matrix's adjoint g (d tr(g' R(q)) / dq)."""
        x = q[0]
        y = q[1]
        z = q[2]
        s = q[3]
        two = scalar(2.0)
        return quat(two * (x * (g[0, 0] - g[1, 1] - g[2, 2]) + y * (g[0, 1] + g[1, 0]) + z * (g[0, 2] + g[2, 0])
                           + s * (g[2, 1] - g[1, 2])),
                    two * (y * (g[1, 1] - g[0, 0] - g[2, 2]) + x * (g[0, 1] + g[1, 0]) + z * (g[1, 2] + g[2, 1])
                           + s * (g[0, 2] - g[2, 0])),
                    two * (z * (g[2, 2] - g[0, 0] - g[1, 1]) + x * (g[0, 2] + g[2, 0]) + y * (g[1, 2] + g[2, 1])
                           + s * (g[1, 0] - g[0, 1])),
                    two * (s * (g[0, 0] + g[1, 1] + g[2, 2]) + x * (g[2, 1] - g[1, 2]) + y * (g[0, 2] - g[2, 0])
                           + z * (g[1, 0] - g[0, 1])))

    @wp.func
    def quat_mul_adjoint(b: quat, g: quat):
        """The adjoint of quat_mul(a, b) with respect to a, for the product's adjoint g."""
        return quat(g[0] * b[3] - g[1] * b[2] + g[2] * b[1] - g[3] * b[0],
                    g[0] * b[2] + g[1] * b[3] - g[2] * b[0] - g[3] * b[1],
                    g[1] * b[0] - g[0] * b[1] + g[2] * b[3] - g[3] * b[2],
                    g[0] * b[0] + g[1] * b[1] + g[2] * b[2] + g[3] * b[3])

    @wp.func
    def quat_mul_adjoint_b(a: quat, g: quat):
        """The adjoint of quat_mul(a, b) with respect to b, for the product's adjoint g."""
        return quat(g[0] * a[3] + g[1] * a[2] - g[2] * a[1] - g[3] * a[0],
                    g[1] * a[3] - g[0] * a[2] + g[2] * a[0] - g[3] * a[1],
                    g[0] * a[1] - g[1] * a[0] + g[2] * a[3] - g[3] * a[2],
                    g[0] * a[0] + g[1] * a[1] + g[2] * a[2] + g[3] * a[3])

    @wp.func
    def rot_vec_quat_adjoint(v: vec3, q: quat, g: vec3):
        """The adjoint of rot_vec_quat(v, q) with respect to q (v a constant), for the rotated
        vector's adjoint g: r = v + 2 u x t, t = s v + u x v for q = (u, s), so
        u_bar = 2 t x g + v x t_bar, s_bar = v . t_bar with t_bar = 2 g x u."""
        u = vec3(q[0], q[1], q[2])
        t = q[3] * v + wp.cross(u, v)
        two = scalar(2.0)
        t_bar = two * wp.cross(g, u)
        u_bar = two * wp.cross(t, g) + wp.cross(v, t_bar)
        return quat(u_bar[0], u_bar[1], u_bar[2], wp.dot(v, t_bar))

    @wp.func
    def quat_normalize_adjoint(q: quat, g: quat):
        """The adjoint of quat_normalize at q for the result's adjoint g, as its custom adjoint
        (simrl.sim.types): that of q / |q| even where the forward keeps q, none below mjMINVAL."""
        n = wp.sqrt((q[3] * q[3] + q[0] * q[0]) + (q[1] * q[1] + q[2] * q[2]))
        r = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(0.0))
        if n >= scalar(MINVAL):
            v = q / n
            r = (g - v * wp.dot(v, g)) / n
        return r

    return SimpleNamespace(nonzero3=nonzero3, nonzero4=nonzero4, nonzero6=nonzero6, nonzero33=nonzero33,
                           quat_to_mat_adjoint=quat_to_mat_adjoint, quat_mul_adjoint=quat_mul_adjoint,
                           quat_mul_adjoint_b=quat_mul_adjoint_b, rot_vec_quat_adjoint=rot_vec_quat_adjoint,
                           quat_normalize_adjoint=quat_normalize_adjoint)
