"""Tendons: length, Jacobian and velocity (mj_tendon, engine_core_smooth.c; ten_velocity of
mj_fwdVelocity, engine_forward.c) and the spring and damper along each tendon (mj_springdamper,
engine_passive.c).

A fixed tendon is a linear combination of joint positions, L = sum_k coef_k q_k, so its Jacobian
has the coefficients in the joints' dofs. A spatial tendon is a path through sites: its length is
the sum of the straight segments between consecutive sites, each divided by the divisor of the
pulley before it, and its Jacobian the sum over segments whose two sites move with different
bodies of dir' (J_site1 - J_site0) / divisor, dir the segment's unit direction (mj_jacDifPair's
point Jacobians of the two sites). A site-geom-site sequence wraps around the sphere or cylinder
when the straight line between the sites would cross it (mju_wrap, engine_util_misc.c): the path
runs straight to a tangent point, along the geodesic arc (a helix on a cylinder) to a second
tangent point and straight on to the second site; a side site picks the side to pass on, and one
inside the geom makes the path touch the surface at a single point (wrap_inside). As in mj_tendon,
the Jacobian takes only the straight pieces: the tangent points move with the geom's body (the
arc changes the length only through them, to first order).

A tendon's armature adds armature ten_J' ten_J to M on M's sparsity (simrl.sim.crb, as
mj_tendonArmature: the coupling of dofs on different branches is dropped) and, for a spatial
tendon, the bias force armature (ten_Jdot qvel) ten_J' (mj_tendonBias; a fixed tendon's Jacobian
is constant).

Elements: `length(m, d, w, t)` (ten_length and ten_J of tendon t, after com_pos: it needs
site_xpos, cdof and subtree_com), `wrap_path(m, d, w, k)` (segment k's path around its geom:
arc length and tangent points in Data.wrap_path; the differentiable step splits it in
`wrap_path_outside` and `wrap_path_inside` by where the side site lies), `length_wrap(m, d, w, t)`
(the wrapping segments' lengths and Jacobians from their paths, added in a pass over the tendons
that have them, so that the other tendons' kernel stays small), `velocity(m, d, w, t)`
(ten_velocity = ten_J qvel and the tendon's spring and damper forces, ten_spring and ten_damper)
and `bias(m, d, w, t)` (the armature's bias along the tendon, ten_bias, after cdof_dot). The dofs
gather what the tendons give them: simrl.sim.passive (their springs and dampers), simrl.sim.crb
(their armature), simrl.sim.rne (their armature's bias), simrl.sim.actuation (their actuators).
"""


import functools
import math
from types import SimpleNamespace

import warp as wp

from simrl.sim import constraint
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, GeomType, scalar_types

GEOM_CYLINDER = int(GeomType.CYLINDER)
TWO_PI = 2.0 * math.pi
# wrap_inside's constants: the Newton start (phi = pi/2) and the bounds of cos(G) between no wrap, a wrap at
# the ends' average and the Newton solve
HALF_PI = 0.5 * math.pi
COS_LO = -1.0 + MINVAL
COS_HI = 1.0 - MINVAL


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    vec3 = T.vec3
    wrap = build_wrap(scalar)

    @wp.func
    def add_point_jacobian(m: Model, d: Data, w: int, t: int, body: int, point: vec3, direction: vec3,
                           scale: scalar):
        """ten_J[t] += scale direction' J(point on body): the point's translation Jacobian over the
        dofs of the chain that moves the body, cdof_lin + cdof_ang x (point - subtree_com of the
        root) (mj_jac)."""
        dof = m.body_dofend[body]
        if dof >= 0:
            offset = point - d.subtree_com[w, m.body_rootid[body]]
            adr = m.dof_ancestor_adr[dof]
            for k in range(m.dof_ancestor_num[dof] + 1):
                i = dof
                if k > 0:
                    i = m.dof_ancestor[adr + k - 1]
                cdof = d.cdof[w, i]
                jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(vec3(cdof[0], cdof[1], cdof[2]), offset)
                d.ten_J[w, t, i] += scale * wp.dot(jp, direction)

    @wp.func
    def straight(m: Model, d: Data, w: int, t: int, b0: int, p0: vec3, b1: int, p1: vec3, inv: scalar):
        """ten_J[t] += inv dir' (J(p1 on b1) - J(p0 on b0)), dir the unit direction from p0 to p1,
        when the bodies differ; returns |p1 - p0|."""
        dif = p1 - p0
        norm = wp.length(dif)
        if b0 != b1:
            # mju_normalize3: a segment shorter than mjMINVAL points along x
            direction = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
            if norm >= scalar(MINVAL):
                direction = dif / norm
            add_point_jacobian(m, d, w, t, b1, p1, direction, inv)
            add_point_jacobian(m, d, w, t, b0, p0, direction, -inv)
        return norm

    @wp.func
    def store_path(m: Model, d: Data, w: int, k: int, wlen: scalar, t0: vec3, t1: vec3):
        i = k - m.wrap_seg_first
        d.wrap_path[w, i, 0] = wlen
        for c in range(3):
            d.wrap_path[w, i, 1 + c] = t0[c]
            d.wrap_path[w, i, 4 + c] = t1[c]

    @wp.func
    def wrap_path(m: Model, d: Data, w: int, k: int):
        """wrap_path[k - wrap_seg_first] of segment k when it wraps around a geom: mju_wrap's arc
        length (-1 when the straight line clears the geom) and its two tangent points (mj_tendon).
        A pass of its own, before `length_wrap`: the adjoint of mju_wrap and that of the Jacobian's
        loops over dofs would not fit a GPU thread's registers together.

        Model: geom_size, geom_type, tendon_seg, wrap_seg_first. Data in: site_xpos, geom_xpos, geom_xmat. Data out:
        wrap_path."""
        seg = m.tendon_seg[k]
        g = seg.geom
        if g >= 0:
            p0 = d.site_xpos[w, seg.site0]
            side = p0
            if seg.side >= 0:
                side = d.site_xpos[w, seg.side]
            wlen, t0, t1 = wrap.wrap(p0, d.site_xpos[w, seg.site1], d.geom_xpos[w, g], d.geom_xmat[w, g],
                                     m.geom_size[g][0], int(m.geom_type[g] == GEOM_CYLINDER), side, int(seg.side >= 0))
            store_path(m, d, w, k, wlen, t0, t1)

    @wp.func
    def wrap_path_outside(m: Model, d: Data, w: int, k: int):
        """`wrap_path` of the segments without a side site inside their geom (the differentiable
        step's: with those of `wrap_path_inside`, mju_wrap's adjoint would spill on a GPU)."""
        seg = m.tendon_seg[k]
        g = seg.geom
        if g >= 0:
            p0 = d.site_xpos[w, seg.site0]
            side = p0
            if seg.side >= 0:
                side = d.site_xpos[w, seg.side]
            xpos = d.geom_xpos[w, g]
            xmat = d.geom_xmat[w, g]
            radius = m.geom_size[g][0]
            if wrap.side_inside(side, xpos, xmat, radius, int(seg.side >= 0)) == 0:
                wlen, t0, t1 = wrap.wrap_outside(p0, d.site_xpos[w, seg.site1], xpos, xmat, radius,
                                                 int(m.geom_type[g] == GEOM_CYLINDER), side, int(seg.side >= 0))
                store_path(m, d, w, k, wlen, t0, t1)

    @wp.func
    def wrap_path_inside(m: Model, d: Data, w: int, k: int):
        """`wrap_path` of the segments with a side site inside their geom (the differentiable step's)."""
        seg = m.tendon_seg[k]
        g = seg.geom
        if g >= 0 and seg.side >= 0:
            xpos = d.geom_xpos[w, g]
            xmat = d.geom_xmat[w, g]
            radius = m.geom_size[g][0]
            if wrap.side_inside(d.site_xpos[w, seg.side], xpos, xmat, radius, 1) != 0:
                wlen, t0, t1 = wrap.wrap_through(d.site_xpos[w, seg.site0], d.site_xpos[w, seg.site1], xpos, xmat,
                                                 radius, int(m.geom_type[g] == GEOM_CYLINDER))
                store_path(m, d, w, k, wlen, t0, t1)

    @wp.func
    def wrap_length(m: Model, d: Data, w: int, t: int, k: int):
        """Segment k's site-geom-site length added to ten_length[t], its Jacobian to ten_J[t], from
        its path (`wrap_path`): straight when the line clears the geom, else the two straight
        pieces to the tangent points and the arc between them (mj_tendon)."""
        seg = m.tendon_seg[k]
        p0 = d.site_xpos[w, seg.site0]
        p1 = d.site_xpos[w, seg.site1]
        b0 = m.site_bodyid[seg.site0]
        b1 = m.site_bodyid[seg.site1]
        inv = scalar(1.0) / seg.divisor
        i = k - m.wrap_seg_first
        wlen = d.wrap_path[w, i, 0]
        if wlen < scalar(0.0):
            d.ten_length[w, t] += straight(m, d, w, t, b0, p0, b1, p1, inv) * inv
        else:
            t0 = vec3(d.wrap_path[w, i, 1], d.wrap_path[w, i, 2], d.wrap_path[w, i, 3])
            t1 = vec3(d.wrap_path[w, i, 4], d.wrap_path[w, i, 5], d.wrap_path[w, i, 6])
            gb = m.geom_bodyid[seg.geom]
            l0 = straight(m, d, w, t, b0, p0, gb, t0, inv)
            l1 = straight(m, d, w, t, gb, t1, b1, p1, inv)
            d.ten_length[w, t] += (l0 + wlen + l1) * inv

    @wp.func
    def length(m: Model, d: Data, w: int, t: int):
        """ten_length[t] and ten_J[t] (mj_tendon), but for the segments that wrap around a geom
        (`length_wrap`).

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, jnt_dofadr, jnt_qposadr,
        site_bodyid, tendon, tendon_colind, tendon_seg, wrap. Data in: qpos, site_xpos, cdof, subtree_com. Data out:
        ten_length, ten_J."""
        ten = m.tendon[t]
        for k in range(ten.nnz):
            d.ten_J[w, t, m.tendon_colind[t, k]] = scalar(0.0)
        d.ten_length[w, t] = scalar(0.0)
        if ten.fixed != 0:
            for k in range(ten.wrapadr, ten.wrapadr + ten.wrapnum):
                j = m.wrap[k].jnt
                coef = m.wrap[k].coef
                d.ten_length[w, t] += coef * d.qpos[w, m.jnt_qposadr[j]]
                d.ten_J[w, t, m.jnt_dofadr[j]] += coef
        else:
            for k in range(ten.segadr, ten.segadr + ten.segnum):
                seg = m.tendon_seg[k]
                if seg.geom < 0:
                    inv = scalar(1.0) / seg.divisor
                    p0 = d.site_xpos[w, seg.site0]
                    p1 = d.site_xpos[w, seg.site1]
                    b0 = m.site_bodyid[seg.site0]
                    b1 = m.site_bodyid[seg.site1]
                    d.ten_length[w, t] += straight(m, d, w, t, b0, p0, b1, p1, inv) * inv

    @wp.func
    def length_wrap(m: Model, d: Data, w: int, t: int):
        """The segments of tendon t that wrap around a geom, added to ten_length[t] and ten_J[t]
        after `length` (a pass of its own: mju_wrap's code stays out of the other tendons' kernel).

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, geom_bodyid, site_bodyid,
        tendon, tendon_seg, wrap_seg_first. Data in: site_xpos, wrap_path, cdof, subtree_com. Data out: ten_length,
        ten_J."""
        ten = m.tendon[t]
        if ten.fixed == 0:
            for k in range(ten.segadr, ten.segadr + ten.segnum):
                if m.tendon_seg[k].geom >= 0:
                    wrap_length(m, d, w, t, k)

    @wp.func
    def velocity(m: Model, d: Data, w: int, t: int):
        """ten_velocity[t] = ten_J[t] qvel; the spring force -k x, x the length's distance from the
        dead band [lengthspring], and the damper force -b v along the tendon (mj_springdamper).

        Model: enable_damper, enable_spring, tendon, tendon_colind. Data in: qvel, ten_J, ten_length. Data out:
        ten_velocity, ten_spring, ten_damper."""
        ten = m.tendon[t]
        d.ten_velocity[w, t] = scalar(0.0)
        for k in range(ten.nnz):
            i = m.tendon_colind[t, k]
            d.ten_velocity[w, t] += d.ten_J[w, t, i] * d.qvel[w, i]
        spring = scalar(0.0)
        if m.enable_spring != 0:
            ln = d.ten_length[w, t]
            band = ten.lengthspring
            x = scalar(0.0)
            if ln > band[1]:
                x = ln - band[1]
            elif ln < band[0]:
                x = ln - band[0]
            spring = -ten.stiffness * x
        damper = scalar(0.0)
        if m.enable_damper != 0:
            damper = -ten.damping * d.ten_velocity[w, t]
        d.ten_spring[w, t] = spring
        d.ten_damper[w, t] = damper

    jac_dot_v = constraint.build(scalar).jac_dot_v

    @wp.func
    def point_velocity(m: Model, d: Data, w: int, body: int, point: vec3):
        """The velocity of `point` moving with `body` (mj_objectVelocity's linear part): cvel
        moved from the root's subtree CoM to the point."""
        cv = d.cvel[w, body]
        offset = point - d.subtree_com[w, m.body_rootid[body]]
        return vec3(cv[3], cv[4], cv[5]) + wp.cross(vec3(cv[0], cv[1], cv[2]), offset)

    @wp.func
    def segment_jdot(m: Model, d: Data, w: int, seg_id: int):
        """ten_Jdot qvel of one straight segment (mj_tendonDot): with u the unit direction and L
        the length, d/dt (u' (J_1 - J_0)) qvel = u' (Jdot_1 - Jdot_0) qvel + (v_1 - v_0)' (v_1 - v_0
        - u u' (v_1 - v_0)) / L, divided by the pulley's divisor; 0 when both sites move with one
        body."""
        seg = m.tendon_seg[seg_id]
        b0 = m.site_bodyid[seg.site0]
        b1 = m.site_bodyid[seg.site1]
        out = scalar(0.0)
        if b0 != b1:
            p0 = d.site_xpos[w, seg.site0]
            p1 = d.site_xpos[w, seg.site1]
            dif = p1 - p0
            norm = wp.length(dif)
            # mju_normalize3: a segment shorter than mjMINVAL points along x and bends nothing
            direction = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
            inv_norm = scalar(0.0)
            if norm >= scalar(MINVAL):
                direction = dif / norm
                inv_norm = scalar(1.0) / norm
            rel = point_velocity(m, d, w, b1, p1) - point_velocity(m, d, w, b0, p0)
            bend = (rel - direction * wp.dot(direction, rel)) * inv_norm
            jdv1, jr1 = jac_dot_v(m, d, w, b1, p1)
            jdv0, jr0 = jac_dot_v(m, d, w, b0, p0)
            out = (wp.dot(jdv1 - jdv0, direction) + wp.dot(rel, bend)) / seg.divisor
        return out

    @wp.func
    def tendon_jdot(m: Model, d: Data, w: int, t: int):
        """ten_Jdot[t] qvel of a spatial tendon: the sum over its segments."""
        ten = m.tendon[t]
        out = scalar(0.0)
        for k in range(ten.segadr, ten.segadr + ten.segnum):
            out = out + segment_jdot(m, d, w, k)
        return out

    @wp.func
    def bias(m: Model, d: Data, w: int, t: int):
        """ten_bias[t] = armature ten_Jdot qvel, the force along tendon t that the dofs' bias
        forces gain through ten_J (mj_tendonBias); 0 for a fixed tendon or without armature.

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, dof_bodyid, dof_jntid,
        jnt_dofadr, jnt_type, site_bodyid, tendon, tendon_seg. Data in: qvel, site_xpos, subtree_com, cvel, cdof,
        cdof_dot. Data out: ten_bias."""
        ten = m.tendon[t]
        value = scalar(0.0)
        if ten.fixed == 0 and ten.armature != scalar(0.0):
            value = ten.armature * tendon_jdot(m, d, w, t)
        d.ten_bias[w, t] = value

    return SimpleNamespace(length=length, wrap_path=wrap_path, wrap_path_outside=wrap_path_outside,
                           wrap_path_inside=wrap_path_inside, length_wrap=length_wrap, velocity=velocity, bias=bias)


@functools.cache
def build_wrap(scalar):
    """mju_wrap and its 2D helpers (engine_util_misc.c), in MuJoCo's order of operations."""
    T = scalar_types(scalar)
    vec2, vec3, mat33 = T.vec2, T.vec3, T.mat33

    @wp.func
    def normalize2(v: vec2):
        """mju_normalize in 2D: (1, 0) below mjMINVAL."""
        n = wp.sqrt(v[0] * v[0] + v[1] * v[1])
        out = vec2(scalar(1.0), scalar(0.0))
        if n >= scalar(MINVAL):
            inv = scalar(1.0) / n
            out = vec2(v[0] * inv, v[1] * inv)
        return out

    @wp.func
    def normalize3(v: vec3):
        """mju_normalize3: (1, 0, 0) below mjMINVAL."""
        n = wp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        out = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
        if n >= scalar(MINVAL):
            inv = scalar(1.0) / n
            out = vec3(v[0] * inv, v[1] * inv, v[2] * inv)
        return out

    @wp.func
    def is_intersect(p1: vec2, p2: vec2, p3: vec2, p4: vec2):
        """1 when the 2D segments p1-p2 and p3-p4 cross (is_intersect), the bounds of both
        intersection parameters checked on the numerators, signed by the determinant."""
        u = p2 - p1
        v = p4 - p3
        det = v[1] * u[0] - v[0] * u[1]
        out = 0
        if wp.abs(det) >= scalar(MINVAL):
            sgn = scalar(-1.0)
            if det > scalar(0.0):
                sgn = scalar(1.0)
            q = p1 - p3
            e = p2 - p4
            if ((v[0] * q[1] - v[1] * q[0]) * sgn >= scalar(0.0) and (v[0] * e[1] - v[1] * e[0]) * sgn < scalar(0.0)
                    and (u[0] * q[1] - u[1] * q[0]) * sgn >= scalar(0.0)
                    and (u[0] * e[1] - u[1] * e[0]) * sgn < scalar(0.0)):
                out = 1
        return out

    @wp.func
    def winding(p: vec2, q: vec2):
        """The signed angle swept from p to q around the origin, in (-pi, pi]."""
        return wp.atan2(p[0] * q[1] - p[1] * q[0], wp.dot(p, q))

    @wp.func
    def length_circle(p0: vec2, p1: vec2, ind: int, radius: scalar):
        """The arc from p0 to p1 on the circle, turning the way solution `ind` turns (length_circle)."""
        cross = p0[1] * p1[0] - p0[0] * p1[1]
        angle = wp.atan2(wp.abs(cross), wp.dot(p0, p1))
        if (cross > scalar(0.0) and ind != 0) or (cross < scalar(0.0) and ind == 0):
            angle = scalar(TWO_PI) - angle
        return radius * angle

    @wp.func
    def tangent(end: vec2, sqlen: scalar, sqrt_: scalar, sqrad: scalar, radius: scalar, sgn: scalar):
        """A tangent point of the circle seen from `end` (wrap_circle's solutions); sgn picks which."""
        return vec2((end[0] * sqrad + sgn * radius * end[1] * sqrt_) / sqlen,
                    (end[1] * sqrad - sgn * radius * end[0] * sqrt_) / sqlen)

    @wp.func
    def wrap_circle(end0: vec2, end1: vec2, side: vec2, has_side: int, radius: scalar):
        """(length of the arc or -1 for no wrap, its two tangent points): wrap_circle in 2D.

        Without a side point the path wraps only when the segment crosses the circle, the shorter
        way round. With one, the path is the one homotopic to the polyline end0 -> side -> end1
        (MuJoCo 4.0): its winding angle about the centre sets the direction, and the straight
        segment is kept when its own winding angle is the same (then it clears the circle on the
        side point's side); the arc is that winding less the straight pieces' windings."""
        sqlen0 = end0[0] * end0[0] + end0[1] * end0[1]
        sqlen1 = end1[0] * end1[0] + end1[1] * end1[1]
        sqrad = radius * radius
        dif = end1 - end0
        dd = wp.dot(dif, dif)
        wlen = scalar(-1.0)
        pnt0 = vec2(scalar(0.0), scalar(0.0))
        pnt1 = pnt0
        # an end inside the circle, a circle too small or ends too close: no wrap
        ok = not (sqlen0 < sqrad or sqlen1 < sqrad or radius < scalar(MINVAL) or dd < scalar(MINVAL))
        wside = scalar(0.0)
        if ok:
            # the segment's point nearest the centre: outside the circle, the segment clears it
            a = wp.clamp(-wp.dot(dif, end0) / dd, scalar(0.0), scalar(1.0))
            near = a * dif + end0
            clear = wp.dot(near, near) > sqrad
            if has_side != 0:
                wside = winding(end0, side) + winding(side, end1)
                if clear and wp.abs(wside - winding(end0, end1)) < scalar(math.pi):
                    ok = False
            elif clear:
                ok = False
        if ok:
            sqrt0 = wp.sqrt(sqlen0 - sqrad)
            sqrt1 = wp.sqrt(sqlen1 - sqrad)
            a0 = tangent(end0, sqlen0, sqrt0, sqrad, radius, scalar(1.0))
            a1 = tangent(end1, sqlen1, sqrt1, sqrad, radius, scalar(-1.0))
            b0 = tangent(end0, sqlen0, sqrt0, sqrad, radius, scalar(-1.0))
            b1 = tangent(end1, sqlen1, sqrt1, sqrad, radius, scalar(1.0))
            cross_a = is_intersect(end0, a0, end1, a1)
            cross_b = is_intersect(end0, b0, end1, b1)
            # without a side: the shorter way, a path that crosses itself penalized; with one:
            # counter-clockwise (solution 1) when the side's winding is positive
            ind = 1
            if has_side != 0:
                if wside <= scalar(0.0):
                    ind = 0
            else:
                good_a = -wp.dot(a0 - a1, a0 - a1)
                good_b = -wp.dot(b0 - b1, b0 - b1)
                if cross_a != 0:
                    good_a = scalar(-10000.0)
                if cross_b != 0:
                    good_b = scalar(-10000.0)
                if good_a > good_b:
                    ind = 0
            crossing = cross_b
            pnt0 = b0
            pnt1 = b1
            if ind == 0:
                crossing = cross_a
                pnt0 = a0
                pnt1 = a1
            if crossing == 0:
                if has_side != 0:
                    wlen = radius * wp.abs(wside - winding(end0, pnt0) - winding(pnt1, end1))
                else:
                    wlen = length_circle(pnt0, pnt1, ind, radius)
        return wlen, pnt0, pnt1

    @wp.func
    def inside_f(phi: scalar, a: scalar, b: scalar, g: scalar):
        """wrap_inside's equation in phi = asin(z): asin(A z) + asin(B z) - 2 phi + G = 0."""
        z = wp.sin(phi)
        return wp.asin(a * z) + wp.asin(b * z) - scalar(2.0) * phi + g

    @wp.func
    def inside_df(phi: scalar, a: scalar, b: scalar):
        """Its derivative in phi, as wrap_inside bounds it."""
        lo = scalar(MINVAL)
        one = scalar(1.0)
        z = wp.sin(phi)
        zz = z * z
        da = a / wp.max(lo, wp.sqrt(one - zz * (a * a)))
        db = b / wp.max(lo, wp.sqrt(one - zz * (b * b)))
        return wp.cos(phi) * (da + db) - scalar(2.0)

    @wp.func
    def inside_solve(a: scalar, b: scalar, g: scalar):
        """wrap_inside's Newton iterations on phi from pi/2 (20 at most, tolerance 1e-6): phi, or
        10 where MuJoCo falls back to the ends' average (a start on the wrong side, a step that
        does not go left, no convergence)."""
        phi = scalar(HALF_PI)
        f = wp.asin(a) + wp.asin(b) - scalar(math.pi) + g
        out = scalar(10.0)
        if f <= scalar(0.0):
            it = int(0)
            failed = int(0)
            while it < 20 and wp.abs(f) > scalar(1e-6) and failed == 0:
                df = inside_df(phi, a, b)
                if df > -scalar(MINVAL):
                    failed = 1
                else:
                    phi1 = phi - f / df
                    if phi1 > phi:
                        failed = 1
                    else:
                        phi = phi1
                        f = inside_f(phi, a, b, g)
                        if f > scalar(1e-6):
                            failed = 1
                        it += 1
            if failed == 0 and it < 20:
                out = phi
        return out

    @wp.func_grad(inside_solve)
    def adj_inside_solve(a: scalar, b: scalar, g: scalar, adj_ret: scalar):
        """The root's derivative by the implicit function theorem, dphi = -(df/dx) / (df/dphi) dx;
        none for the fall-back."""
        phi = inside_solve(a, b, g)
        if phi <= scalar(HALF_PI):
            z = wp.sin(phi)
            s = -adj_ret / inside_df(phi, a, b)
            wp.adjoint[a] += s * z / wp.sqrt(scalar(1.0) - z * z * (a * a))
            wp.adjoint[b] += s * z / wp.sqrt(scalar(1.0) - z * z * (b * b))
            wp.adjoint[g] += s

    @wp.func
    def wrap_inside(end0: vec2, end1: vec2, radius: scalar):
        """(0, the point) where the path from end0 to end1 touches the circle, the side site being
        inside it, or (-1, ...) for no wrap (wrap_inside)."""
        len0 = wp.sqrt(end0[0] * end0[0] + end0[1] * end0[1])
        len1 = wp.sqrt(end1[0] * end1[0] + end1[1] * end1[1])
        dif = end1 - end0
        dd = wp.dot(dif, dif)
        ok = not (len0 <= radius or len1 <= radius or radius < scalar(MINVAL) or len0 < scalar(MINVAL)
                  or len1 < scalar(MINVAL))
        if ok and dd > scalar(MINVAL):
            # the segment crosses the circle: no wrap
            a = -wp.dot(dif, end0) / dd
            if a > scalar(0.0) and a < scalar(1.0):
                near = end0 + a * dif
                if wp.sqrt(near[0] * near[0] + near[1] * near[1]) <= radius:
                    ok = False
        wlen = scalar(-1.0)
        pnt = vec2(scalar(0.0), scalar(0.0))
        if ok:
            # the fall-back: the ends' average on the circle
            pnt = normalize2(scalar(0.5) * (end0 + end1)) * radius
            a = radius / len0
            b = radius / len1
            cos_g = (len0 * len0 + len1 * len1 - dd) / (scalar(2.0) * len0 * len1)
            if cos_g >= scalar(COS_LO):
                wlen = scalar(0.0)
                if cos_g <= scalar(COS_HI):
                    phi = inside_solve(a, b, wp.acos(cos_g))
                    if phi <= scalar(HALF_PI):
                        # rotate from the end that turns counter-clockwise to the other
                        z = wp.sin(phi)
                        vec = end1
                        ang = phi - wp.asin(b * z)
                        if end0[0] * end1[1] - end0[1] * end1[0] > scalar(0.0):
                            vec = end0
                            ang = phi - wp.asin(a * z)
                        vec = normalize2(vec)
                        pnt = vec2(radius * (wp.cos(ang) * vec[0] - wp.sin(ang) * vec[1]),
                                   radius * (wp.sin(ang) * vec[0] + wp.cos(ang) * vec[1]))
        return wlen, pnt, pnt

    @wp.func
    def wrap_plane(p0: vec3, p1: vec3, cylinder: int):
        """The plane of the 2D problem, as two axes in the geom frame: the plane through the centre
        and both ends (p0, p1 in the geom frame) for a sphere, the cross-section for a cylinder."""
        axis0 = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
        axis1 = vec3(scalar(0.0), scalar(1.0), scalar(0.0))
        if cylinder == 0:
            axis0 = normalize3(p0)
            normal = wp.cross(p0, p1)
            if wp.length(normal) < scalar(MINVAL):
                # p0 and p1 parallel: a normal off axis0's largest component
                i = 0
                a = wp.abs(axis0[0])
                b = wp.abs(axis0[1])
                c = wp.abs(axis0[2])
                if b > a and b > c:
                    i = 1
                if c > a and c > b:
                    i = 2
                other = vec3(scalar(0.0), scalar(1.0), scalar(1.0))
                if i == 1:
                    other = vec3(scalar(1.0), scalar(0.0), scalar(1.0))
                elif i == 2:
                    other = vec3(scalar(1.0), scalar(1.0), scalar(0.0))
                normal = wp.cross(axis0, other)
            normal = normalize3(normal)
            axis1 = normalize3(wp.cross(normal, axis0))
        return axis0, axis1

    @wp.func
    def wrap_space(p0: vec3, p1: vec3, axis0: vec3, axis1: vec3, xpos: vec3, xmat: mat33, cylinder: int,
                   wlen: scalar, pnt0: vec2, pnt1: vec2):
        """(the wrapped length, the two tangent points in the world frame) from the 2D solution: on a
        cylinder the path climbs along the axis in proportion to the 2D length travelled (a helix)."""
        res0 = axis0 * pnt0[0] + axis1 * pnt0[1]
        res1 = axis0 * pnt1[0] + axis1 * pnt1[1]
        out = wlen
        if cylinder != 0:
            l0 = wp.sqrt((p0[0] - res0[0]) * (p0[0] - res0[0]) + (p0[1] - res0[1]) * (p0[1] - res0[1]))
            l1 = wp.sqrt((p1[0] - res1[0]) * (p1[0] - res1[0]) + (p1[1] - res1[1]) * (p1[1] - res1[1]))
            total = l0 + wlen + l1
            z0 = p0[2] + (p1[2] - p0[2]) * l0 / total
            z1 = p0[2] + (p1[2] - p0[2]) * (l0 + wlen) / total
            res0 = vec3(res0[0], res0[1], z0)
            res1 = vec3(res1[0], res1[1], z1)
            height = wp.abs(z1 - z0)
            out = wp.sqrt(wlen * wlen + height * height)
        return out, xmat * res0 + xpos, xmat * res1 + xpos

    @wp.func
    def side_inside(side: vec3, xpos: vec3, xmat: mat33, radius: scalar, has_side: int):
        """1 when the side site lies inside the geom (wrap_inside's case)."""
        out = int(0)
        if has_side != 0:
            if wp.length(wp.transpose(xmat) * (side - xpos)) < radius:
                out = 1
        return out

    @wp.func
    def wrap_outside(x0: vec3, x1: vec3, xpos: vec3, xmat: mat33, radius: scalar, cylinder: int, side: vec3,
                     has_side: int):
        """mju_wrap without a side site inside the geom: (the wrapped length or -1 for no wrap, the
        two tangent points in the world frame; x0 and x1 for no wrap) of the path from x0 to x1
        around a sphere (cylinder 0) or a cylinder (along its z axis) of `radius` at (xpos, xmat),
        passing on the side of `side` when has_side."""
        p0 = wp.transpose(xmat) * (x0 - xpos)
        p1 = wp.transpose(xmat) * (x1 - xpos)
        wlen = scalar(-1.0)
        w0 = x0
        w1 = x1
        if wp.length(p0) >= scalar(MINVAL) and wp.length(p1) >= scalar(MINVAL):
            axis0, axis1 = wrap_plane(p0, p1, cylinder)
            sd = vec2(scalar(0.0), scalar(0.0))
            if has_side != 0:
                s = wp.transpose(xmat) * (side - xpos)
                sd = normalize2(vec2(wp.dot(s, axis0), wp.dot(s, axis1))) * radius
            wlen2, pnt0, pnt1 = wrap_circle(vec2(wp.dot(p0, axis0), wp.dot(p0, axis1)),
                                            vec2(wp.dot(p1, axis0), wp.dot(p1, axis1)), sd, has_side, radius)
            if wlen2 >= scalar(0.0):
                wlen, w0, w1 = wrap_space(p0, p1, axis0, axis1, xpos, xmat, cylinder, wlen2, pnt0, pnt1)
        return wlen, w0, w1

    @wp.func
    def wrap_through(x0: vec3, x1: vec3, xpos: vec3, xmat: mat33, radius: scalar, cylinder: int):
        """mju_wrap with a side site inside the geom: as `wrap_outside`, the path touching the
        surface at one point (wrap_inside)."""
        p0 = wp.transpose(xmat) * (x0 - xpos)
        p1 = wp.transpose(xmat) * (x1 - xpos)
        wlen = scalar(-1.0)
        w0 = x0
        w1 = x1
        if wp.length(p0) >= scalar(MINVAL) and wp.length(p1) >= scalar(MINVAL):
            axis0, axis1 = wrap_plane(p0, p1, cylinder)
            wlen2, pnt0, pnt1 = wrap_inside(vec2(wp.dot(p0, axis0), wp.dot(p0, axis1)),
                                            vec2(wp.dot(p1, axis0), wp.dot(p1, axis1)), radius)
            if wlen2 >= scalar(0.0):
                wlen, w0, w1 = wrap_space(p0, p1, axis0, axis1, xpos, xmat, cylinder, wlen2, pnt0, pnt1)
        return wlen, w0, w1

    @wp.func
    def wrap(x0: vec3, x1: vec3, xpos: vec3, xmat: mat33, radius: scalar, cylinder: int, side: vec3, has_side: int):
        """mju_wrap: `wrap_through` when the side site lies inside the geom, else `wrap_outside`."""
        wlen = scalar(-1.0)
        w0 = x0
        w1 = x1
        if side_inside(side, xpos, xmat, radius, has_side) != 0:
            wlen, w0, w1 = wrap_through(x0, x1, xpos, xmat, radius, cylinder)
        else:
            wlen, w0, w1 = wrap_outside(x0, x1, xpos, xmat, radius, cylinder, side, has_side)
        return wlen, w0, w1

    return SimpleNamespace(wrap=wrap, wrap_outside=wrap_outside, wrap_through=wrap_through, side_inside=side_inside,
                           wrap_circle=wrap_circle, wrap_inside=wrap_inside)
