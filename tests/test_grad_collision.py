"""Exact adjoints of the primitive narrow phase (simrl.sim.collision_primitive) under wp.Tape.

Every collider the collision stage dispatches is called from one test kernel, compiled with
adjoints, on poses given as positions and quaternions (the rotation matrices come from the
normalized quaternions, so a perturbed quaternion is still a rotation). The gradient of a random
weighting of the contacts (dist, pos, frame) with respect to both poses, from the tape, must match
central finite differences of the same kernel's forward pass. The configurations penetrate, are
generically oriented and keep away from the ties where the set of contacts or the closest feature
changes, so that the contacts are smooth functions of the poses there.
"""

import contextlib
import functools

import numpy as np
import pytest
import warp as wp
from conftest import axis_angle_quat as _aa
from conftest import quat_mul as _qmul

from simrl.sim import collision_primitive as cp
from simrl.sim.types import kernel_module, scalar_types

SCALAR = wp.float64
NSLOT = 8  # the most contacts of any collider (box-box)
EPS = 1e-6  # finite-difference step
TOL = 1e-6  # relative gradient error per collider

KINDS = ["plane_sphere", "plane_capsule", "plane_box", "sphere_sphere", "sphere_capsule", "sphere_box",
         "capsule_capsule", "capsule_box", "box_box", "plane_cylinder", "sphere_cylinder"]


def _rot(q):
    """Rotation matrix of the unit quaternion q = (w, x, y, z)."""
    w, x, y, z = q
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                     [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                     [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]])


def _quat(r):
    """Unit quaternion (w, x, y, z) of the rotation matrix r."""
    t = np.trace(r)
    if t > 0:
        w = np.sqrt(1.0 + t) / 2
        return np.array([w, r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]]) / [1, 4 * w, 4 * w, 4 * w]
    i = int(np.argmax(np.diag(r)))
    j, k = (i + 1) % 3, (i + 2) % 3
    v = np.sqrt(1.0 + r[i, i] - r[j, j] - r[k, k]) / 2
    q = np.zeros(4)
    q[0] = (r[k, j] - r[j, k]) / (4 * v)
    q[1 + i] = v
    q[1 + j] = (r[j, i] + r[i, j]) / (4 * v)
    q[1 + k] = (r[k, i] + r[i, k]) / (4 * v)
    return q


def _unit(v):
    v = np.asarray(v, float)
    return v / np.linalg.norm(v)


def _along(axis):
    """A quaternion that turns local z onto `axis` (the capsule axis)."""
    z = _unit(axis)
    x = _unit(np.cross([0.3, 0.8, 0.5], z))
    return _quat(np.column_stack([x, np.cross(z, x), z]))


# sizes as MuJoCo's geom_size (plane: unused)
SIZES = {"plane": (0.0, 0.0, 0.0), "sphere": (0.3, 0.0, 0.0), "capsule": (0.2, 0.5, 0.0),
         "box": (0.3, 0.4, 0.5), "cylinder": (0.25, 0.4, 0.0)}
BOX1, BOX2 = (0.4, 0.35, 0.5), (0.38, 0.4, 0.35)  # box-box sizes
TILT = _aa([0.3, -0.7, 0.2], 0.17)  # a generic small rotation
GENERIC = _aa([0.6, 0.25, -0.4], 1.1)  # a generic large rotation
P0 = np.array([0.1, -0.2, 0.3])


def _case(name, pos1, quat1, pos2, quat2, margin=0.0, size1=None, size2=None, ncon=1):
    """One test case of collider `name`; ncon: the number of contacts it makes."""
    t1, t2 = name.split("_")
    return dict(name=name, kind=KINDS.index(name), size1=size1 or SIZES[t1], size2=size2 or SIZES[t2],
                margin=margin, pos1=np.asarray(pos1, float), quat1=np.asarray(quat1, float),
                pos2=np.asarray(pos2, float), quat2=np.asarray(quat2, float), ncon=ncon)


def _in_box(name, local_pos, local_quat, **kw):
    """geom1 posed in the frame of a box (geom2) at P0 with the generic rotation GENERIC."""
    r = _rot(GENERIC)
    return _case(name, P0 + r @ local_pos, _qmul(GENERIC, local_quat), P0, GENERIC, **kw)


def _capsule_in_box(lower_end, direction):
    """capsule-box: the capsule with its -z end at lower_end, its axis along direction, in
    the box frame."""
    center = np.asarray(lower_end, float) + SIZES["capsule"][1] * _unit(direction)
    return center, _along(direction)


def _box_edges(gap=-0.02, angle=1.0, shift1=0.07, shift2=-0.05):
    """box-box edge-edge: box2's edge (local z at x = -size, y = -size) crosses box1's edge
    (local x at y = +size, z = +size) at `angle`, `gap` apart along their common normal
    n = (0, 1, 1) / sqrt(2), both boxes then turned by GENERIC; shifts move the crossing along
    the two edges."""
    n = _unit([0, 1, 1])
    e2 = np.cos(angle) * np.array([1.0, 0, 0]) + np.sin(angle) * _unit([0, 1, -1])
    v = np.cross(e2, n)
    r2 = np.column_stack([_unit(n + v), _unit(n - v), np.cross(_unit(n + v), _unit(n - v))])
    edge1 = np.array([shift1, BOX1[1], BOX1[2]])
    pos2 = edge1 + gap * n - r2 @ [-BOX2[0], -BOX2[1], 0.0] + shift2 * r2[:, 2]
    g = _rot(GENERIC)
    return _case("box_box", P0, GENERIC, P0 + g @ pos2, _qmul(GENERIC, _quat(r2)), size1=BOX1, size2=BOX2)


def _cases():
    """{label: case}: penetrating, generic, away from ties (labels: collider/configuration)."""
    plane_q = _aa([0.2, 0.5, 0.1], 0.3)  # a tilted plane; geom2 turned with it (plane_q * ...)
    p0 = P0

    def on_plane(x, y, height):  # height above the plane along its normal
        return p0 + _rot(plane_q) @ [x, y, height]

    return {
        "plane_sphere": _case("plane_sphere", p0, plane_q, on_plane(0.3, 0.1, 0.31),
                              GENERIC, margin=0.05),
        "plane_capsule": _case("plane_capsule", p0, plane_q, on_plane(0.2, -0.4, 0.12),
                               _qmul(plane_q, _qmul(TILT, _aa([1, 0, 0], np.pi / 2))), ncon=2),
        "plane_box/4": _case("plane_box", p0, plane_q, on_plane(-0.3, 0.2, 0.35),
                             _qmul(plane_q, _qmul(TILT, _aa([0, 0, 1], 0.4))), ncon=4),
        "plane_box/2": _case("plane_box", p0, plane_q, on_plane(-0.3, 0.2, 0.52),
                             _qmul(plane_q, _qmul(_aa([1, 0.1, 0], 0.25), _aa([0, 0, 1], 0.4))), ncon=2),
        "sphere_sphere": _case("sphere_sphere", p0, GENERIC, p0 + [0.31, -0.25, 0.36], TILT,
                               size2=(0.45, 0.0, 0.0)),
        "sphere_capsule/side": _case("sphere_capsule", p0 + [0.3, 0.35, 0.1], TILT, p0, GENERIC),
        "sphere_capsule/end": _case("sphere_capsule", p0 + _rot(GENERIC) @ [0.25, -0.1, 0.75], TILT, p0,
                                    GENERIC),
        "sphere_box/face": _in_box("sphere_box", [0.1, -0.15, 0.7], TILT),
        "sphere_box/edge": _in_box("sphere_box", [0.4, -0.55, 0.1], TILT),
        "sphere_box/corner": _in_box("sphere_box", [0.4, 0.5, -0.6], TILT),
        "sphere_box/inside": _in_box("sphere_box", [0.05, -0.1, 0.3], TILT),
        "capsule_capsule/cross": _case("capsule_capsule", p0, GENERIC, p0 + [0.2, 0.3, -0.1],
                                       _qmul(TILT, _aa([1, 0.2, 0], 1.3)), size1=(0.25, 0.6, 0.0)),
        "capsule_capsule/end": _case("capsule_capsule", p0, GENERIC, p0 + _rot(GENERIC) @ [0.1, 0.2, 0.85],
                                     _qmul(TILT, _aa([1, 0.2, 0], 1.3)), size1=(0.25, 0.6, 0.0)),
        # parallel axes (MuJoCo 4's parallel branch: contacts at both ends of the overlap)
        "capsule_capsule/parallel": _case("capsule_capsule", p0, GENERIC, p0 + _rot(GENERIC) @ [0.35, 0.1, 0.4],
                                          GENERIC, size1=(0.25, 0.6, 0.0), ncon=2),
        # the lower end over the top face; the second point where the segment leaves the face
        "capsule_box/face": _in_box("capsule_box", *_capsule_in_box([0.05, -0.15, 0.62], [0.15, 1.0, 0.05]),
                                    ncon=2),
        # crossing the edge y = 0.4, z = 0.5 (second point along the face) and a T over an edge
        "capsule_box/edge": _in_box("capsule_box", [0.05, 0.1, 0.65], _qmul(_aa([0.2, 1, 0], 1.45),
                                                                            _aa([0, 0, 1], 0.3)), ncon=2),
        "capsule_box/edge_t": _in_box("capsule_box", [0.42, 0.05, 0.6], _aa([1, 0.3, 0.2], 1.2)),
        # the segment over the corner (0.3, 0.4, 0.5)
        "capsule_box/corner": _in_box("capsule_box", np.array([0.3, 0.4, 0.5]) + 0.15 * _unit([1, 1, 1]),
                                      _along([1.0, -1.0, 0.3])),
        # upright on the top face, both unrotated: axis components exactly 0 (no 0 / 0 adjoint)
        "capsule_box/upright": _case("capsule_box", [0.05, -0.1, 1.15], [1.0, 0, 0, 0], [0.0, 0, 0],
                                     [1.0, 0, 0, 0]),
        "box_box/face": _case("box_box", p0, GENERIC, p0 + _rot(GENERIC) @ [0.1, -0.05, 0.82],
                              _qmul(GENERIC, _qmul(_aa([0.3, 1, 0], 0.02), _aa([0, 0, 1], 0.5))),
                              size1=BOX1, size2=BOX2, ncon=8),
        # box2 small on box1's top face: box1's face is the reference, nothing clipped
        "box_box/face_small": _case("box_box", p0, GENERIC, p0 + _rot(GENERIC) @ [0.1, -0.05, 0.58],
                                    _qmul(GENERIC, _qmul(_aa([0.3, 1, 0], 0.05), _aa([0, 0, 1], 0.5))),
                                    size1=BOX1, size2=(0.2, 0.15, 0.1), ncon=4),
        "box_box/edge": _box_edges(),
        # standing tilted on the plane: the nearest rim point and the triangle's two
        "plane_cylinder/3": _case("plane_cylinder", p0, plane_q, on_plane(0.1, -0.2, 0.395),
                                  _qmul(plane_q, _qmul(_aa([1, 0.3, 0], 0.03), _aa([0, 0, 1], 0.7))), ncon=3),
        # lying on its side: one point at each end of the axis
        "plane_cylinder/2": _case("plane_cylinder", p0, plane_q, on_plane(-0.2, 0.3, 0.24),
                                  _qmul(plane_q, _qmul(_aa([0.1, 1, 0.2], 0.02), _aa([1, 0, 0], np.pi / 2))),
                                  ncon=2),
        "sphere_cylinder/side": _case("sphere_cylinder", P0 + _rot(GENERIC) @ [0.5, 0.1, 0.15], TILT, P0, GENERIC),
        "sphere_cylinder/cap": _case("sphere_cylinder", P0 + _rot(GENERIC) @ [0.1, -0.05, 0.65], TILT, P0, GENERIC),
        "sphere_cylinder/rim": _case("sphere_cylinder", P0 + _rot(GENERIC) @ [0.3, 0.2, -0.55], TILT, P0, GENERIC),
        "sphere_cylinder/inside": _case("sphere_cylinder", P0 + _rot(GENERIC) @ [0.05, 0.1, 0.3], TILT, P0,
                                        GENERIC),
    }


@functools.cache
def _kernel():
    """The test kernel: world w collides case w with the collider of kind[w]."""
    T = scalar_types(SCALAR)
    vec3, mat33, quat = T.vec3, T.mat33, T.quat
    F = cp.build(SCALAR)
    module = kernel_module(SCALAR, name="grad_collision_test", backward=True)
    module.options["optimization_level"] = 0  # test kernel: compiles in ~7 s instead of ~30 s

    @wp.kernel(module=module)
    def collide(kind: wp.array(dtype=int), size1: wp.array(dtype=vec3), size2: wp.array(dtype=vec3),
                margin: wp.array(dtype=SCALAR), pos1: wp.array(dtype=vec3), quat1: wp.array(dtype=quat),
                pos2: wp.array(dtype=vec3), quat2: wp.array(dtype=quat),
                dist: wp.array2d(dtype=SCALAR), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                ncon: wp.array(dtype=int)):
        w = wp.tid()
        t = kind[w]
        a = pos1[w]
        ra = wp.quat_to_matrix(wp.normalize(quat1[w]))
        sa = size1[w]
        b = pos2[w]
        rb = wp.quat_to_matrix(wp.normalize(quat2[w]))
        sb = size2[w]
        mg = margin[w]
        n = int(0)
        if t == 0:
            n = F.plane_sphere(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 1:
            n = F.plane_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 2:
            n = F.plane_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 3:
            n = F.sphere_sphere(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 4:
            n = F.sphere_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 5:
            n = F.sphere_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 6:
            n = F.capsule_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 7:
            n = F.capsule_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 8:
            n = F.box_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 9:
            n = F.plane_cylinder(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        elif t == 10:
            n = F.sphere_cylinder(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, 0)
        ncon[w] = n

    return collide


def _wquat(q):
    """(w, x, y, z) -> Warp's (x, y, z, w)."""
    q = np.asarray(q, float)
    return q[..., [1, 2, 3, 0]]


def _launch(cases, x, tape=None):
    """Run the kernel on cases with poses x[:, 14] = (pos1, quat1 wxyz, pos2, quat2 wxyz); returns
    the output arrays and, for the tape, the input arrays."""
    T = scalar_types(SCALAR)
    n = len(x)
    fields = {k: np.array([c[k] for c in cases]) for k in ("kind", "size1", "size2", "margin")}
    rg = tape is not None
    inputs = [wp.array(fields["kind"].astype(np.int32), dtype=int), wp.array(fields["size1"], dtype=T.vec3),
              wp.array(fields["size2"], dtype=T.vec3), wp.array(fields["margin"], dtype=SCALAR)]
    poses = [wp.array(x[:, 0:3], dtype=T.vec3, requires_grad=rg),
             wp.array(_wquat(x[:, 3:7]), dtype=T.quat, requires_grad=rg),
             wp.array(x[:, 7:10], dtype=T.vec3, requires_grad=rg),
             wp.array(_wquat(x[:, 10:14]), dtype=T.quat, requires_grad=rg)]
    outputs = [wp.zeros((n, NSLOT), dtype=SCALAR, requires_grad=rg),
               wp.zeros((n, NSLOT), dtype=T.vec3, requires_grad=rg),
               wp.zeros((n, NSLOT), dtype=T.mat33, requires_grad=rg),
               wp.zeros(n, dtype=int)]
    with tape if tape is not None else contextlib.nullcontext():
        wp.launch(_kernel(), dim=n, inputs=inputs + poses, outputs=outputs)
    return outputs, poses


def _gradients(cases, seed=0):
    """(tape gradient, finite-difference gradient, contacts per case): gradients of
    sum(weights * outputs) with respect to the 14 pose coordinates of each case."""
    n = len(cases)
    x = np.array([np.concatenate([c["pos1"], c["quat1"], c["pos2"], c["quat2"]]) for c in cases])
    rng = np.random.default_rng(seed)
    wd = rng.normal(size=(n, NSLOT))
    wpos = rng.normal(size=(n, NSLOT, 3))
    wfr = rng.normal(size=(n, NSLOT, 3, 3))

    tape = wp.Tape()
    (dist, pos, frame, ncon), poses = _launch(cases, x, tape)
    T = scalar_types(SCALAR)
    tape.backward(grads={dist: wp.array(wd, dtype=SCALAR), pos: wp.array(wpos, dtype=T.vec3),
                         frame: wp.array(wfr, dtype=T.mat33)})
    g = np.concatenate([poses[0].grad.numpy(), poses[1].grad.numpy()[:, [3, 0, 1, 2]],
                        poses[2].grad.numpy(), poses[3].grad.numpy()[:, [3, 0, 1, 2]]], axis=1)
    ncon = ncon.numpy()

    # central differences: all cases and coordinates in one launch
    xs = [x]
    for sgn in (1.0, -1.0):
        for k in range(14):
            xk = x.copy()
            xk[:, k] += sgn * EPS
            xs.append(xk)
    (d_, p_, f_, n_), _ = _launch(cases * len(xs), np.concatenate(xs))
    loss = ((d_.numpy().reshape(len(xs), n, NSLOT) * wd).sum(-1)
            + (p_.numpy().reshape(len(xs), n, NSLOT, 3) * wpos).sum((-1, -2))
            + (f_.numpy().reshape(len(xs), n, NSLOT, 3, 3) * wfr).sum((-1, -2, -3)))
    counts = n_.numpy().reshape(len(xs), n)
    g_fd = ((loss[1:15] - loss[15:29]) / (2 * EPS)).T
    return g, g_fd, ncon, counts


@functools.cache
def _results():
    cases = _cases()
    g, g_fd, ncon, counts = _gradients(list(cases.values()))
    return {label: (g[i], g_fd[i], ncon[i], counts[:, i]) for i, label in enumerate(cases)}


def test_every_collider_covered():
    kinds = {label.split("/")[0] for label in _cases()}
    assert kinds == set(KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_gradient_matches_finite_differences(kind):
    res = _results()
    cases = _cases()
    g_all, fd_all = [], []
    for label, (g, g_fd, ncon, counts) in res.items():
        if cases[label]["name"] != kind:
            continue
        # the configuration makes its contacts, and the same number within the finite-difference step
        assert ncon == cases[label]["ncon"], f"{label}: {ncon} contacts, expected {cases[label]['ncon']}"
        assert np.all(counts == ncon), f"{label}: contact count changes within eps: {counts}"
        err = np.linalg.norm(g - g_fd) / np.linalg.norm(g_fd)
        print(f"{label}: {ncon} contacts, relative gradient error {err:.2e}")
        assert np.all(np.isfinite(g)) and err < TOL, f"{label}: relative gradient error {err:.3g}"
        g_all.append(g)
        fd_all.append(g_fd)
    g_all, fd_all = np.concatenate(g_all), np.concatenate(fd_all)
    err = np.linalg.norm(g_all - fd_all) / np.linalg.norm(fd_all)
    print(f"{kind}: relative gradient error {err:.2e}")
    assert np.all(np.isfinite(g_all)) and err < TOL, f"{kind}: relative gradient error {err:.3g}"
