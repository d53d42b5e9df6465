"""The set of contacts simrl detects against MuJoCo's (`mj_forward`, `d.contact`) over many random
states, in scenes where geom pairs sit just inside and just outside the distance at which they
are detected (margin + gap): a broadphase that drops a pair MuJoCo's narrowphase finds, or a
compaction that loses, duplicates or misfiles a contact, changes the set.

Per world, the geom pairs (sorted ids) with their contact counts must be MuJoCo's, and each
contact's dist and pos MuJoCo's, matched within the pair by position. The states are drawn so
that the test cannot pass vacuously: besides contacts, there are contacts detected within the
margin but not touching (a broadphase that forgets the margin drops them), pairs just outside
their detection distance and pairs whose bounding spheres overlap, both without a contact (the
narrowphase behind any broadphase must still reject them).
"""

import itertools
from collections import Counter

import mujoco
import numpy as np
import pytest
import torch

from simrl import Sim
from simrl.bench.models import resolve_model
from simrl.sim.contact_tables import candidate_geom_pairs
from simrl.sim.data import OVERFLOW_CONTACTS

NUM_WORLDS = 64
G = mujoco.mjtGeom
# Closed-form pairs agree to rounding (measured <= 1e-14). Pairs that MuJoCo collides by GJK/EPA
# (an ellipsoid or a height field with anything, a cylinder with anything but a plane or a
# sphere) agree to EPA's stopping error, which ccd_tolerance="1e-12" brings to 2e-5 in the
# points (docs/GUIDE.md, Convex pairs; measured 2.1e-6 here, 1.5e-5 at worst over five seeds).
TOL = 1e-9
CONVEX_TOL = 2e-5
CCD = '<option gravity="0 0 0" ccd_tolerance="1e-12" ccd_iterations="100"/>'

# Known differences from MuJoCo 4.0 in the narrowphase, left out of what is compared:
# - a cylinder's face clipping (multiccd) against a box or another cylinder: which corners of
#   the contact patch, and sometimes how many, turn on EPA's witness on the curved side and on
#   near-ties (docs/GUIDE.md, multiccd; 1 count in 75 pairs here, points up to 2 cm apart):
#   only whether the pair touches is compared;
# - a box on a height field: about 1 prism in 60 gets another contact than MuJoCo's (another
#   face of EPA's polytope, as GUIDE.md says of meshes on a field; up to 8 mm in depth, 2 cm in
#   position, not changed by ccd_iterations or ccd_tolerance): the count is compared, not the values.
PRESENCE_ONLY = [{G.mjGEOM_CYLINDER, G.mjGEOM_BOX}, {G.mjGEOM_CYLINDER}]
COUNT_ONLY = [{G.mjGEOM_HFIELD, G.mjGEOM_BOX}]

# free bodies of every primitive type, some with a margin or a gap, one of two geoms
FREE_BODIES = [
    '<geom name="ball" type="sphere" size="0.06"/>',
    '<geom name="ball_margin" type="sphere" size="0.045" margin="0.01"/>',
    '<geom name="capsule" type="capsule" size="0.04 0.08"/>',
    '<geom name="capsule_gap" type="capsule" size="0.03 0.06" margin="0.006" gap="0.004"/>',
    '<geom name="box" type="box" size="0.07 0.05 0.04"/>',
    '<geom name="box_margin" type="box" size="0.05 0.05 0.03" margin="0.008"/>',
    '<geom name="cylinder" type="cylinder" size="0.05 0.05"/>',
    '<geom name="cylinder_gap" type="cylinder" size="0.04 0.07" gap="0.005"/>',
    '<geom name="ellipsoid" type="ellipsoid" size="0.07 0.05 0.04"/>',
    '<geom name="ellipsoid_margin" type="ellipsoid" size="0.05 0.04 0.06" margin="0.007"/>',
    '<geom name="hammer" type="box" size="0.05 0.03 0.03"/>'
    '<geom name="hammer_head" type="sphere" size="0.035" pos="0.07 0 0" margin="0.005"/>',
]
STATIC_BOXES = ('<geom name="wall" type="box" size="0.1 0.06 0.05" pos="0.1 -0.05 0.05" euler="0 0 25"/>'
                '<geom name="step" type="box" size="0.08 0.08 0.08" pos="-0.15 0.12 0.04" euler="10 0 0" '
                'margin="0.01"/>'
                '<geom name="beam" type="box" size="0.15 0.03 0.06" pos="0.05 0.2 0.06"/>')
REGION = 0.3  # the free bodies are scattered over [-REGION, REGION]^2


def scene(floor: str, asset: str = "") -> mujoco.MjModel:
    bodies = "".join(f'<body pos="{0.1 * i} 0 0.5"><freejoint/>{geoms}</body>' for i, geoms in enumerate(FREE_BODIES))
    return mujoco.MjModel.from_xml_string(
        f"<mujoco>{CCD}<asset>{asset}</asset><worldbody>{floor}{STATIC_BOXES}{bodies}</worldbody></mujoco>")


def plane_scene() -> mujoco.MjModel:
    return scene('<geom name="floor" type="plane" size="1 1 0.1" margin="0.004"/>')


def hfield_scene() -> mujoco.MjModel:
    """The free bodies over a bumpy height field, with a margin on the field: its pairs detect
    at the field's margin plus the geom's margin and gap."""
    nrow, ncol = 9, 11
    elevation = np.random.default_rng(5).uniform(0, 1, (nrow, ncol))
    asset = (f"<hfield name='bumps' nrow='{nrow}' ncol='{ncol}' size='0.45 0.45 0.06 0.05' "
             f"elevation='{' '.join(f'{x:.6f}' for x in elevation.ravel())}'/>")
    floor = '<geom name="field" type="hfield" hfield="bumps" margin="0.003"/>'
    return scene(floor, asset)


def rough_quadruped() -> mujoco.MjModel:
    """The rough-terrain task's model: terrain boxes, a height field and the quadruped (no margins)."""
    mjm = resolve_model("task:quadruped_rough")[1]
    mjm.opt.ccd_tolerance, mjm.opt.ccd_iterations = 1e-12, 100
    return mjm


def threshold(mjm, g1: int, g2: int) -> float:
    """The distance below which MuJoCo 4.0 reports a contact: an explicit <pair>'s margin plus
    gap, else the two geoms' margins and gaps summed."""
    for p in range(mjm.npair):
        if {int(mjm.pair_geom1[p]), int(mjm.pair_geom2[p])} == {g1, g2}:
            return float(mjm.pair_margin[p] + mjm.pair_gap[p])
    return float(mjm.geom_margin[g1] + mjm.geom_margin[g2] + mjm.geom_gap[g1] + mjm.geom_gap[g2])


def geom_distance(mjm, mjd, g1: int, g2: int, distmax: float = 1.0):
    """(distance, point on g1, point on g2) by mj_geomDistance, whose segment runs from the geom of
    the lower type to the other (not for height fields: there it misses the nearest prism)."""
    fromto = np.zeros(6)
    swap = mjm.geom_type[g1] > mjm.geom_type[g2]
    dist = mujoco.mj_geomDistance(mjm, mjd, *((g2, g1) if swap else (g1, g2)), distmax, fromto)
    a, b = (fromto[3:], fromto[:3]) if swap else (fromto[:3], fromto[3:])
    return dist, a, b


def random_quat(rng, tilt: float = np.pi) -> np.ndarray:
    axis = rng.normal(size=3)
    angle = rng.uniform(0, tilt)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis / np.linalg.norm(axis)])


def near_touch(mjm, mjd, rng, body: int, partners: list[tuple[int, int]]) -> None:
    """Move the free `body` so that its nearest partner (pairs (own geom, other geom)) ends just
    inside or just outside their detection distance (by 0.1 to 2 mm), or overlapping."""
    adr = mjm.jnt_qposadr[mjm.body_jntadr[body]]
    mujoco.mj_kinematics(mjm, mjd)
    g, h = min(partners, key=lambda gh: geom_distance(mjm, mjd, *gh)[0] - threshold(mjm, *gh))
    offset = (-rng.uniform(0, 0.015), -rng.uniform(1e-4, 2e-3), rng.uniform(1e-4, 2e-3))[rng.integers(3)]
    target = threshold(mjm, g, h) + offset
    for _ in range(4):  # Newton's method along the line of the nearest points
        dist, a, b = geom_distance(mjm, mjd, g, h)
        if abs(dist - target) < 1e-5:
            break
        if dist > 1e-6:
            step = (a - b) / np.linalg.norm(a - b) * (target - dist)
        else:  # overlapping: pull apart along the line of the centres (a plane's normal) first
            away = mjd.geom_xpos[g] - mjd.geom_xpos[h]
            if mjm.geom_type[h] == G.mjGEOM_PLANE:
                away = mjd.geom_xmat[h].reshape(3, 3)[:, 2]
            step = away / np.linalg.norm(away) * 0.05
        mjd.qpos[adr:adr + 3] += step
        mujoco.mj_kinematics(mjm, mjd)


def scattered_states(mjm, n: int, rng) -> np.ndarray:
    """qpos [n, nq]: the free bodies at random poses over the floor, then each moved, in a random
    order, to just inside or just outside the detection distance of its nearest partner (a height
    field is not one: the bodies start among its bumps)."""
    mjd = mujoco.MjData(mjm)
    pairs = [(g1, g2) for g1, g2, _ in candidate_geom_pairs(mjm)
             if G.mjGEOM_HFIELD not in (mjm.geom_type[g1], mjm.geom_type[g2])]
    free = [b for b in range(1, mjm.nbody) if mjm.body_jntnum[b]]
    out = []
    for _ in range(n):
        for b in free:
            adr = mjm.jnt_qposadr[mjm.body_jntadr[b]]
            mjd.qpos[adr:adr + 3] = [*rng.uniform(-REGION, REGION, 2), rng.uniform(0.03, 0.2)]
            mjd.qpos[adr + 3:adr + 7] = random_quat(rng)
        for b in rng.permutation(free):
            own = [(g1, g2) if mjm.geom_bodyid[g1] == b else (g2, g1) for g1, g2 in pairs
                   if b in (mjm.geom_bodyid[g1], mjm.geom_bodyid[g2])]
            near_touch(mjm, mjd, rng, b, own)
        out.append(mjd.qpos.copy())
    return np.stack(out)


def lowest_points(mjm, mjd, geoms) -> np.ndarray:
    """[n, 3]: the lowest points of spheres and capsules (at each end) and the corners of boxes."""
    corners = np.array(list(itertools.product((-1, 1), repeat=3)))
    out = []
    for g in geoms:
        pos, mat, size = mjd.geom_xpos[g], mjd.geom_xmat[g].reshape(3, 3), mjm.geom_size[g]
        if mjm.geom_type[g] == G.mjGEOM_BOX:
            out += list(pos + (corners * size) @ mat.T)
        else:
            half = size[1] if mjm.geom_type[g] == G.mjGEOM_CAPSULE else 0.0
            out += [pos + sign * half * mat[:, 2] - [0, 0, size[0]] for sign in (-1, 1)]
    return np.array(out)


def quadruped_states(mjm, n: int, rng) -> np.ndarray:
    """qpos [n, nq]: the robot over random points of the terrain grid, its base a little tilted,
    its joints anywhere in range, lowered until the lowest point of its geoms is between 3 cm
    below and 5 mm above the ground straight under it (a ray cast on the terrain's geom group)."""
    mjd = mujoco.MjData(mjm)
    robot = [g for g in range(mjm.ngeom) if mjm.geom_bodyid[g] > 0 and mjm.geom_contype[g]]
    terrain = np.zeros(6, np.uint8)
    terrain[np.unique(mjm.geom_group[mjm.geom_bodyid == 0])] = 1
    joints = [j for j in range(mjm.njnt) if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    out = []
    for _ in range(n):
        mjd.qpos[:] = mjm.qpos0
        mjd.qpos[:3] = rng.uniform(1.0, 19.0), rng.uniform(1.0, 13.0), 1.0
        mjd.qpos[3:7] = random_quat(rng, tilt=0.5)
        for j in joints:
            mjd.qpos[mjm.jnt_qposadr[j]] = rng.uniform(*mjm.jnt_range[j])
        mujoco.mj_kinematics(mjm, mjd)
        clearance = min(p[2] - 5.0 + mujoco.mj_ray(mjm, mjd, [p[0], p[1], 5.0], [0, 0, -1], terrain, 1, -1,
                                                   np.zeros(1, np.int32))
                        for p in lowest_points(mjm, mjd, robot))
        mjd.qpos[2] -= clearance - rng.uniform(-0.03, 0.005)
        out.append(mjd.qpos.copy())
    return np.stack(out)


def mujoco_contacts(mjm, qpos: np.ndarray) -> list[dict]:
    """Per world, {(geom, geom) sorted: [(dist, pos), ...]} of mj_forward's contacts."""
    mjd = mujoco.MjData(mjm)
    out = []
    for q in qpos:
        mjd.qpos[:] = q
        mujoco.mj_forward(mjm, mjd)
        world = {}
        for c in mjd.contact[:mjd.ncon]:
            world.setdefault(tuple(sorted(int(g) for g in c.geom)), []).append((c.dist, c.pos.copy()))
        out.append(world)
    return out


def simrl_contacts(sim: Sim) -> list[dict]:
    """Per world, {(geom, geom) sorted: [(dist, pos), ...]} of the contacts sim.contact flags
    (its `geom` [ncon, 2], or [W, ncon, 2] where the contacts of each world are its own)."""
    con = sim.contact
    active, dist, pos = con.active.numpy(), con.dist.numpy(), con.pos.numpy()
    geom = np.sort(con.geom.numpy(), axis=-1)
    out = []
    for w in range(sim.num_worlds):
        world = {}
        for s in np.flatnonzero(active[w]):
            pair = geom[w, s] if geom.ndim == 3 else geom[s]
            world.setdefault(tuple(int(g) for g in pair), []).append((float(dist[w, s]), pos[w, s].copy()))
        out.append(world)
    return out


def compare(mjm, ours: list[dict], theirs: list[dict]) -> float:
    """Assert the contact sets equal, world by world; return the largest dist or pos error."""

    def label(pair):
        return "-".join(mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g) or
                        f"{G(int(mjm.geom_type[g])).name[7:].lower()}{g}" for g in pair)

    def types(pair):
        return {G(int(mjm.geom_type[g])) for g in pair}

    worst = 0.0
    for w, (mine, ref) in enumerate(zip(ours, theirs, strict=True)):
        missing, extra = sorted(map(label, ref.keys() - mine.keys())), sorted(map(label, mine.keys() - ref.keys()))
        assert not missing and not extra, f"world {w}: pairs only MuJoCo has {missing}, only simrl has {extra}"
        for pair, contacts in ref.items():
            if types(pair) in PRESENCE_ONLY:
                continue
            assert len(mine[pair]) == len(contacts), \
                f"world {w}, pair {label(pair)}: {len(mine[pair])} contacts, MuJoCo {len(contacts)}"
            if types(pair) in COUNT_ONLY:
                continue
            convex = (types(pair) & {G.mjGEOM_ELLIPSOID, G.mjGEOM_HFIELD}
                      or G.mjGEOM_CYLINDER in types(pair) and not types(pair) & {G.mjGEOM_PLANE, G.mjGEOM_SPHERE})
            unmatched = list(mine[pair])
            for dist, pos in contacts:
                d, p = unmatched.pop(min(range(len(unmatched)), key=lambda i: np.linalg.norm(unmatched[i][1] - pos)))
                err = max(abs(d - dist), np.abs(p - pos).max())
                assert err < (CONVEX_TOL if convex else TOL), \
                    f"world {w}, pair {label(pair)}: MuJoCo's contact at {pos}, dist {dist:.6g}; simrl's {p}, {d:.6g}"
                worst = max(worst, err)
    return worst


def resolution(mjm, qpos: np.ndarray, theirs: list[dict]) -> Counter:
    """What the states exercise, over all worlds: contacts; contacts detected within the margin
    but apart (dist > 0); pairs without a contact whose bounding spheres, grown by their
    detection distance, overlap; of those and of the pairs with a plane, the ones less than 5 mm
    beyond their detection distance (height fields left out: see geom_distance)."""
    mjd = mujoco.MjData(mjm)
    pairs = [(min(g1, g2), max(g1, g2)) for g1, g2, _ in candidate_geom_pairs(mjm)]
    g1, g2 = np.array(pairs).T
    plane = (mjm.geom_type[g1] == G.mjGEOM_PLANE) | (mjm.geom_type[g2] == G.mjGEOM_PLANE)
    hfield = (mjm.geom_type[g1] == G.mjGEOM_HFIELD) | (mjm.geom_type[g2] == G.mjGEOM_HFIELD)
    detect = np.array([threshold(mjm, a, b) for a, b in pairs])
    stats = Counter()
    for q, ref in zip(qpos, theirs, strict=True):
        mjd.qpos[:] = q
        mujoco.mj_kinematics(mjm, mjd)
        stats["contacts"] += sum(len(c) for c in ref.values())
        stats["within margin, apart"] += sum(d > 0 for c in ref.values() for d, _ in c)
        apart = np.array([p not in ref for p in pairs])
        spheres = ~plane & (np.linalg.norm(mjd.geom_xpos[g1] - mjd.geom_xpos[g2], axis=1)
                            < mjm.geom_rbound[g1] + mjm.geom_rbound[g2] + detect)
        stats["bounding spheres overlap, apart"] += int((spheres & apart).sum())
        for i in np.flatnonzero(apart & (spheres | plane) & ~hfield):
            dist = geom_distance(mjm, mjd, *pairs[i], detect[i] + 0.01)[0]
            stats["just outside"] += bool(detect[i] <= dist < detect[i] + 0.005)
    return stats


# scene: (model, states, the least of each statistic of `resolution` over NUM_WORLDS worlds)
SCENES = {
    "plane": (plane_scene, scattered_states, {"contacts": 500, "within margin, apart": 100, "just outside": 100,
                                              "bounding spheres overlap, apart": 300}),
    "hfield": (hfield_scene, scattered_states, {"contacts": 500, "within margin, apart": 100, "just outside": 100,
                                                "bounding spheres overlap, apart": 300}),
    # no margins in the task's model: the contacts and the near misses
    "quadruped_rough": (rough_quadruped, quadruped_states, {"contacts": 100, "just outside": 10,
                                                            "bounding spheres overlap, apart": 1000}),
}


@pytest.mark.parametrize("name", SCENES)
def test_contact_sets_equal_mujocos(name):
    """64 random states in one Sim (float64), one forward: MuJoCo's pairs, counts and contacts."""
    load, states, least = SCENES[name]
    mjm = load()
    qpos = states(mjm, NUM_WORLDS, np.random.default_rng(2027))
    # the height field scene presses a dozen shapes into the field at once: a slot budget of
    # every pair's slots (the default holds 8 per moving geom); the others run at the default
    sim = Sim.from_model(mjm, num_worlds=NUM_WORLDS, dtype="float64", nconmax=10**9 if name == "hfield" else None)
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    assert not (sim.overflow & OVERFLOW_CONTACTS).any(), "every kept pair's slots held"
    theirs = mujoco_contacts(mjm, qpos)
    worst = compare(mjm, simrl_contacts(sim), theirs)
    stats = resolution(mjm, qpos, theirs)
    print(f"{name}: {dict(stats)}, largest error {worst:.1e}")
    for what, n in least.items():
        assert stats[what] >= n, f"{name}: only {stats[what]} {what}; the states would not test the broadphase"
