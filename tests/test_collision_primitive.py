"""The primitive narrow phase (simrl.sim.collision_primitive) against MuJoCo's own contacts.

For every implemented geom pair, a two-geom scene is posed at random (penetrating, touching
within the margin, apart) and in special configurations (resting faces, parallel axes, centers
inside boxes); MuJoCo's d.contact after mj_forward is the reference. The Warp functions get
MuJoCo's geom poses, so the comparison isolates the collision functions.
"""

import functools

import mujoco
import numpy as np
import pytest
import warp as wp
from conftest import axis_angle_quat, quat_mul

from simrl.sim import collision_primitive as cp
from simrl.sim.types import GeomType, scalar_types

SLOT = 1  # contacts are written from this slot on; slot 0 and the tail must stay untouched
NSLOT = SLOT + 8 + 1
TOL = 1e-9
# test kernels only: no adjoint code and a light optimization level keep the compile short
_OPTS = {"enable_backward": False, "optimization_level": 0}

# (name, geom1 MJCF, geom2 MJCF); geom1 of type plane goes to the worldbody
PAIRS = {
    "plane_sphere": ('type="plane" size="0 0 1"', 'type="sphere" size="0.3"'),
    "plane_capsule": ('type="plane" size="0 0 1"', 'type="capsule" size="0.2 0.5"'),
    "plane_box": ('type="plane" size="0 0 1"', 'type="box" size="0.3 0.4 0.5"'),
    "sphere_sphere": ('type="sphere" size="0.3"', 'type="sphere" size="0.45"'),
    "sphere_capsule": ('type="sphere" size="0.3"', 'type="capsule" size="0.2 0.5"'),
    "sphere_box": ('type="sphere" size="0.3"', 'type="box" size="0.3 0.4 0.5"'),
    "capsule_capsule": ('type="capsule" size="0.25 0.6"', 'type="capsule" size="0.2 0.5"'),
    "capsule_box": ('type="capsule" size="0.2 0.5"', 'type="box" size="0.3 0.4 0.5"'),
    "box_box": ('type="box" size="0.4 0.35 0.5"', 'type="box" size="0.38 0.4 0.35"'),
    "plane_cylinder": ('type="plane" size="0 0 1"', 'type="cylinder" size="0.25 0.4"'),
    "sphere_cylinder": ('type="sphere" size="0.3"', 'type="cylinder" size="0.25 0.4"'),
}
PAIR_IDS = {name: i for i, name in enumerate(PAIRS)}
GEOM_TYPES = {name: GeomType[name.upper()] for name in ("plane", "sphere", "capsule", "box", "cylinder")}


def _model(name: str) -> mujoco.MjModel:
    g1, g2 = PAIRS[name]
    if "plane" in g1:
        world = f'<geom name="g1" {g1}/>'
        bodies = f'<body><freejoint/><geom name="g2" {g2}/></body>'
    else:
        world = ""
        bodies = f'<body><freejoint/><geom name="g1" {g1}/></body><body><freejoint/><geom name="g2" {g2}/></body>'
    xml = f'<mujoco><option gravity="0 0 0"/><worldbody>{world}{bodies}</worldbody></mujoco>'
    return mujoco.MjModel.from_xml_string(xml)


@functools.cache
def _kernel(scalar):
    """One test kernel for all pairs: world w collides the pair of type ptype[w]."""
    T = scalar_types(scalar)
    vec3, mat33 = T.vec3, T.mat33
    F = cp.build(scalar)

    @wp.kernel(module="unique", enable_backward=False, module_options=_OPTS)
    def collide(ptype: wp.array(dtype=int), pos1: wp.array(dtype=vec3), mat1: wp.array(dtype=mat33),
                size1: wp.array(dtype=vec3), pos2: wp.array(dtype=vec3), mat2: wp.array(dtype=mat33),
                size2: wp.array(dtype=vec3), margin: wp.array(dtype=scalar),
                dist: wp.array2d(dtype=scalar), pos: wp.array2d(dtype=vec3), frame: wp.array2d(dtype=mat33),
                ncon: wp.array(dtype=int)):
        w = wp.tid()
        t = ptype[w]
        a, ra, sa, b, rb, sb, mg = pos1[w], mat1[w], size1[w], pos2[w], mat2[w], size2[w], margin[w]
        n = int(0)
        if t == 0:
            n = F.plane_sphere(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 1:
            n = F.plane_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 2:
            n = F.plane_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 3:
            n = F.sphere_sphere(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 4:
            n = F.sphere_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 5:
            n = F.sphere_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 6:
            n = F.capsule_capsule(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 7:
            n = F.capsule_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 8:
            n = F.box_box(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 9:
            n = F.plane_cylinder(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        elif t == 10:
            n = F.sphere_cylinder(a, ra, sa, b, rb, sb, mg, dist, pos, frame, w, SLOT)
        ncon[w] = n

    return collide


def _rand_quat(rng, n):
    q = rng.normal(size=(n, 4))
    return q / np.linalg.norm(q, axis=1, keepdims=True)


def _poses(name, mjm, rng, n):
    """n (pos1, quat1, pos2, quat2): random poses at distances around contact, plus special
    configurations that exercise the multi-contact branches."""
    rb = mjm.geom_rbound
    plane = mjm.geom_type[0] == mujoco.mjtGeom.mjGEOM_PLANE
    r = rb[1] if plane else rb[0] + rb[1]
    p1 = rng.uniform(-0.5, 0.5, (n, 3))
    q1 = _rand_quat(rng, n)
    q2 = _rand_quat(rng, n)
    p2 = p1 + rng.normal(size=(n, 3)) * r * rng.uniform(0.0, 0.8, (n, 1))
    ident = np.array([1.0, 0, 0, 0])
    k = n // 3  # the last third: special configurations
    for s in range(n - k, n):
        c = s % 4
        tilt = axis_angle_quat(rng.normal(size=3), rng.choice([0.0, 1e-3, 0.05, 0.3]))
        if name == "plane_cylinder":
            # standing on a disk (exactly upright: the disk-parallel branch), or lying on its side
            q1[s], p1[s] = ident, 0.0
            radius, half = mjm.geom_size[1][:2]
            yaw = axis_angle_quat([0, 0, 1], rng.uniform(0, np.pi))
            upright = c < 2
            t = ident if c == 0 else tilt
            q2[s] = quat_mul(t, yaw) if upright else quat_mul(t, quat_mul(yaw, axis_angle_quat([1, 0, 0], np.pi / 2)))
            h = half if upright else radius
            p2[s] = [rng.uniform(-1, 1), rng.uniform(-1, 1), h + rng.uniform(-0.05, 0.05)]
            continue
        if name == "sphere_cylinder":
            # the sphere's center by the side, over a cap, by the rim, or inside, in the cylinder's frame
            radius, half = mjm.geom_size[1][:2]
            rs = mjm.geom_size[0][0]
            around = rng.normal(size=2)
            around /= np.linalg.norm(around)
            r_local, z_local = [(radius + rs + rng.uniform(-0.08, 0.03), rng.uniform(-half, half)),
                                (rng.uniform(0, radius), half + rs + rng.uniform(-0.08, 0.03)),
                                (radius + rng.uniform(0.0, 0.2), -(half + rng.uniform(0.0, 0.2))),
                                (rng.uniform(0, radius), rng.uniform(-half, half))][c]
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, q2[s])
            p1[s] = p2[s] + rot.reshape(3, 3) @ [around[0] * r_local, around[1] * r_local, z_local]
            continue
        if name.startswith("plane") or name == "box_box" or name == "capsule_box":
            # geom2 resting on the top face of geom1 (plane / box), slightly tilted
            q1[s] = _rand_quat(rng, 1)[0] if c == 0 else ident
            base = ident if name != "capsule_box" else axis_angle_quat([1, 0, 0], np.pi / 2)
            if name == "capsule_box":
                q1[s], q2[s] = ident, quat_mul(tilt, axis_angle_quat([0, 0, 1], rng.uniform(0, np.pi)))
                q2[s] = quat_mul(q2[s], base)
                top = mjm.geom_size[1][2] + mjm.geom_size[0][0]
                p1[s] = p2[s] = 0.0
                p1[s][:2] = rng.uniform(-0.5, 0.5, 2)
                p1[s][2] = top * rng.choice([1.0, -1.0]) + rng.uniform(-0.05, 0.05)
                continue
            yaw = np.pi / 4 if c == 2 and name == "box_box" else rng.uniform(0, np.pi)  # 8-point octagon
            q2[s] = quat_mul(tilt, axis_angle_quat([0, 0, 1], yaw) if c < 3 else base)
            if name == "plane_capsule":
                q2[s] = quat_mul(tilt, axis_angle_quat([1, 0, 0], np.pi / 2))
            if plane:
                q1[s] = ident
                h = mjm.geom_size[1][2] if name == "plane_box" else mjm.geom_size[1][0]
                p1[s] = 0.0
                p2[s] = [rng.uniform(-1, 1), rng.uniform(-1, 1), h + rng.uniform(-0.05, 0.05)]
            else:
                q1[s] = ident
                h = mjm.geom_size[0][2] + mjm.geom_size[1][2]
                p2[s] = p1[s] + [rng.uniform(-0.5, 0.5), rng.uniform(-0.5, 0.5), h + rng.uniform(-0.05, 0.05)]
        elif name == "capsule_capsule":
            # (nearly) parallel axes with an offset along the axis; MuJoCo 4 treats sin(angle) < 1e-4
            # as parallel
            tilt = axis_angle_quat(rng.normal(size=3), rng.choice([0.0, 1e-9, 1e-6, 5e-5, 2e-4, 1e-3]))
            flip = axis_angle_quat([1, 0, 0], np.pi)
            q2[s] = quat_mul(q1[s], tilt) if c < 2 else quat_mul(q1[s], quat_mul(tilt, flip))
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, q1[s])
            lateral = rot.reshape(3, 3)[:, 0] * rng.uniform(0.3, 0.5)
            p2[s] = p1[s] + lateral + rot.reshape(3, 3)[:, 2] * rng.uniform(-1.2, 1.2)
        elif name == "sphere_box":
            # sphere center inside the box
            p1[s] = p2[s] + rng.uniform(-0.25, 0.25, 3)
        elif name == "sphere_capsule":
            # near the axis, or exactly on it (coincident centers: normal from the z axes)
            rot = np.zeros(9)
            mujoco.mju_quat2Mat(rot, q2[s])
            p1[s] = p2[s] + rot.reshape(3, 3)[:, 2] * rng.uniform(-0.7, 0.7) + (rng.normal(size=3) * 0.1 if c else 0)
        elif name == "sphere_sphere":
            p1[s] = p2[s] + (rng.normal(size=3) * 0.1 if c else 0.0)
    return p1, q1, p2, q2


def _mujoco_cases(name, rng, n, margins):
    """Run MuJoCo on n random poses of pair `name`; returns the kernel inputs and the contacts."""
    mjm = _model(name)
    d = mujoco.MjData(mjm)
    plane = mjm.geom_type[0] == mujoco.mjtGeom.mjGEOM_PLANE
    p1, q1, p2, q2 = _poses(name, mjm, rng, n)
    rows = {k: [] for k in ("pos1", "mat1", "size1", "pos2", "mat2", "size2", "margin")}
    contacts = []
    for s in range(n):
        margin, gap = margins[s % len(margins)]
        mjm.geom_margin[:] = margin / 2
        mjm.geom_gap[:] = [gap, 0.0]
        if plane:
            mjm.geom_pos[0], mjm.geom_quat[0] = p1[s], q1[s]
            d.qpos[:] = np.concatenate([p2[s], q2[s]])
        else:
            d.qpos[:] = np.concatenate([p1[s], q1[s], p2[s], q2[s]])
        mujoco.mj_forward(mjm, d)
        for i, g in enumerate((0, 1)):
            rows[f"pos{i + 1}"].append(d.geom_xpos[g].copy())
            rows[f"mat{i + 1}"].append(d.geom_xmat[g].reshape(3, 3).copy())
            rows[f"size{i + 1}"].append(mjm.geom_size[g].copy())
        rows["margin"].append(margin + gap)
        con = d.contact
        assert np.all(con.geom[:, 0] == 0) and np.all(con.geom[:, 1] == 1)
        contacts.append((con.dist.copy(), con.pos.copy(), con.frame.copy()))
    return {k: np.array(v) for k, v in rows.items()}, contacts


@functools.cache
def _cases(seed, ncase):
    """MuJoCo on ncase poses of every pair: (kernel inputs of all pairs, {name: contacts})."""
    rng = np.random.default_rng(seed)
    margins = [(0.0, 0.0), (0.0, 0.0), (0.1, 0.0), (0.06, 0.04)]
    inputs, refs, ptype = [], {}, []
    for name in PAIRS:
        data, contacts = _mujoco_cases(name, rng, ncase, margins)
        inputs.append(data)
        refs[name] = contacts
        ptype += [PAIR_IDS[name]] * len(contacts)
    cat = {k: np.concatenate([x[k] for x in inputs]) for k in inputs[0]}
    cat["ptype"] = np.array(ptype, np.int32)
    return cat, refs


@functools.cache
def _results(seed=1234, ncase=400, scalar=wp.float64):
    """All pairs in one launch: {name: (MuJoCo's contacts, (ncon, dist, pos, frame), margin)}."""
    cat, refs = _cases(seed, ncase)
    n = len(cat["ptype"])
    T = scalar_types(scalar)
    dev = "cpu"
    fdt = np.float64 if scalar == wp.float64 else np.float32

    def arr(x, dtype):
        return wp.array(np.asarray(x, fdt if dtype is not int else np.int32), dtype=dtype, device=dev)

    sentinel = 1e300 if scalar == wp.float64 else 1e30
    dist = arr(np.full((n, NSLOT), sentinel), scalar)
    pos = arr(np.full((n, NSLOT, 3), sentinel), T.vec3)
    frame = arr(np.full((n, NSLOT, 3, 3), sentinel), T.mat33)
    ncon = arr(np.zeros(n), int)
    wp.launch(_kernel(scalar), dim=n, device=dev,
              inputs=[arr(cat["ptype"], int), arr(cat["pos1"], T.vec3), arr(cat["mat1"], T.mat33),
                      arr(cat["size1"], T.vec3), arr(cat["pos2"], T.vec3), arr(cat["mat2"], T.mat33),
                      arr(cat["size2"], T.vec3), arr(cat["margin"], scalar), dist, pos, frame, ncon])
    out = (ncon.numpy(), dist.numpy(), pos.numpy(), frame.numpy())
    res, start = {}, 0
    for name in PAIRS:
        k = len(refs[name])
        res[name] = (refs[name], tuple(o[start:start + k] for o in out), cat["margin"][start:start + k])
        start += k
    return res


def _maxcon(name):
    t1, t2 = name.split("_")
    return cp.MAX_CONTACTS[(GEOM_TYPES[t1], GEOM_TYPES[t2])]


def _compare(name, results=None):
    """Worst errors of pair `name` against MuJoCo; asserts counts and untouched slots."""
    refs, (ncon, dist, pos, frame), margin = (results or _results())[name]
    maxcon = _maxcon(name)
    err = {"dist": 0.0, "pos": 0.0, "frame": 0.0}
    ncontacts = 0
    for s, (rd, rp, rf) in enumerate(refs):
        n = ncon[s]
        assert n == len(rd), f"{name} case {s}: {n} contacts, MuJoCo {len(rd)}"
        assert n <= maxcon
        ncontacts += n
        # nothing written outside slots SLOT .. SLOT + n - 1
        untouched = [i for i in range(NSLOT) if not SLOT <= i < SLOT + n]
        assert np.all(dist[s, untouched] == 1e300) and np.all(pos[s, untouched] == 1e300)
        assert np.all(frame[s, untouched] == 1e300)
        if n == 0:
            continue
        # the contact frame (mju_makeFrame of the collider's normal and tangent): a rotation
        fr = frame[s, SLOT:SLOT + n]
        assert np.allclose(fr @ fr.transpose(0, 2, 1), np.eye(3), atol=1e-12)
        assert np.allclose(np.linalg.det(fr), 1.0, atol=1e-12)
        assert np.all(dist[s, SLOT:SLOT + n] <= margin[s])
        # match as sets, by position
        mine = list(range(SLOT, SLOT + n))
        for j in range(n):
            k = min(mine, key=lambda i: np.linalg.norm(pos[s, i] - rp[j]))
            mine.remove(k)
            err["dist"] = max(err["dist"], abs(dist[s, k] - rd[j]))
            err["pos"] = max(err["pos"], np.abs(pos[s, k] - rp[j]).max())
            err["frame"] = max(err["frame"], np.abs(frame[s, k].ravel() - rf[j]).max())
    return err, ncontacts


@pytest.mark.parametrize("name", list(PAIRS))
def test_pair_matches_mujoco(name):
    err, ncontacts = _compare(name)
    refs = _results()[name][0]
    counts = np.bincount([len(r[0]) for r in refs])
    # the cases cover contact and no contact, and the multi-contact branches (capsule-box makes at
    # most 2 of its 4 reserved slots: one sphere-box per point; box-box face manifolds 4 or more)
    assert counts[0] > 0 and ncontacts > 0
    most = {"capsule_box": 2, "box_box": 4}.get(name, _maxcon(name))
    assert len(counts) - 1 >= most, counts
    print(f"{name}: contacts per case {counts.tolist()}, worst errors {err}")
    for key, e in err.items():
        assert e < TOL, f"{name}: {key} error {e:.3g} ({err})"


def test_margin_contacts():
    """With a positive margin + gap, separated geoms within it make contacts with dist > 0."""
    for name in PAIRS:
        refs, (ncon, dist, *_), margin = _results()[name]
        pos_margin = margin > 0
        separated = [(dist[s, SLOT:SLOT + ncon[s]] > 0).any() for s in range(len(refs))]
        assert np.any(np.array(separated) & pos_margin), name
        # without margin, no contact is separated
        assert not np.any(np.array(separated) & ~pos_margin), name


def test_max_contacts_table():
    """MAX_CONTACTS equals the sizes MuJoCo reserves per pair (mj_maxContact via d.ncon bounds):
    spot-check by the largest counts MuJoCo produced in the random cases."""
    for name in PAIRS:
        refs = _results()[name][0]
        assert max(len(r[0]) for r in refs) <= _maxcon(name)
    assert len(cp.MAX_CONTACTS) == len(PAIRS)


def test_float32_smoke():
    """The float32 build compiles for every pair and agrees with MuJoCo to float32 accuracy on the
    well-conditioned cases (counts may differ right at the margin, normals where the closest points
    nearly coincide): checked on the random poses, not the deliberately degenerate ones."""
    res = _results(scalar=wp.float32)
    for name in PAIRS:
        refs, (ncon, dist, pos, frame), margin = res[name]
        nrandom = len(refs) - len(refs) // 3  # see _poses
        same = [s for s in range(nrandom) if ncon[s] == len(refs[s][0])]
        assert len(same) >= 0.97 * nrandom, name
        errs = []
        for s in same:
            rd, rp, rf = refs[s]
            mine = list(range(SLOT, SLOT + ncon[s]))
            for j in range(len(rd)):
                k = min(mine, key=lambda i: np.linalg.norm(pos[s, i] - rp[j]))
                mine.remove(k)
                errs.append(max(abs(dist[s, k] - rd[j]), np.abs(pos[s, k] - rp[j]).max()))
        print(f"{name} float32: {nrandom - len(same)} count mismatches, dist/pos error "
              f"median {np.median(errs):.2g} 99% {np.quantile(errs, 0.99):.2g} max {np.max(errs):.2g}")
        assert np.median(errs) < 1e-6 and np.quantile(errs, 0.99) < 1e-4, name
