"""Convex pairs (simrl.sim.collision_convex: MuJoCo's GJK/EPA, mjc_Convex; plane-ellipsoid by
mjc_PlaneConvex) against MuJoCo, the same states in both.

EPA stops when its bounds on the depth are within `opt.ccd_tolerance` (1e-6 by default): the
depth is then known to that tolerance, but the contact normal of two curved surfaces only to
about its square root, and which point of a flat patch it stops at depends on how the polytope
grew. simrl follows the GJK and EPA expansion of the MuJoCo 4.0.1 library (read from its binary,
tests/test_ccd_fingertips.py) and the starting polytopes of MuJoCo's 3.12.1 sources
(engine_collision_gjk.c), which MuJoCo 4.0 has changed in places, so at the default tolerance
depths agree to the tolerance, positions and normals to EPA's stopping error; with a tight
tolerance both converge to the exact contact and agree closely (both measured here).
Plane-ellipsoid is closed form and exact.
"""

import mujoco
import numpy as np
import pytest
import torch

import simrl
from simrl import Sim

SIZE = {"ellipsoid": "0.1 0.2 0.15", "cylinder": "0.1 0.2", "box": "0.1 0.15 0.2", "sphere": "0.12",
        "capsule": "0.08 0.15"}
#: every convex pair type, each in a place of its own, colliding only with its partner
PAIRS = ("sphere-ellipsoid", "capsule-ellipsoid", "capsule-cylinder", "ellipsoid-ellipsoid", "ellipsoid-cylinder",
         "ellipsoid-box", "cylinder-cylinder", "cylinder-box")


def scene(tolerance: float = 1e-6, iterations: int = 35, multiccd: bool = False) -> str:
    bodies = []
    for i, pair in enumerate(PAIRS):
        a, b = pair.split("-")
        bit = 1 << i
        bodies.append(f"<body pos='{2.0 * i} 0 1'><freejoint/><geom type='{a}' size='{SIZE[a]}' contype='{bit}' "
                      f"conaffinity='{bit}'/></body>")
        bodies.append(f"<body pos='{2.0 * i + 0.12} 0.05 1.1'><freejoint/><geom type='{b}' size='{SIZE[b]}' "
                      f"contype='{bit}' conaffinity='{bit}'/></body>")
    # ellipsoids on the floor (plane-ellipsoid)
    floor = 1 << len(PAIRS)
    bodies.append(f"<body pos='0 3 0.1'><freejoint/><geom type='ellipsoid' size='{SIZE['ellipsoid']}' "
                  f"contype='{floor}' conaffinity='{floor}'/></body>")
    flag = "" if multiccd else "<flag multiccd='disable'/>"
    return (f"<mujoco><option gravity='0 0 0' ccd_tolerance='{tolerance}' ccd_iterations='{iterations}'>{flag}"
            f"</option><worldbody><geom type='plane' size='20 20 1' contype='{floor}' conaffinity='{floor}'/>"
            f"{''.join(bodies)}</worldbody></mujoco>")


def random_states(mjm: mujoco.MjModel, n: int, rng) -> np.ndarray:
    """qpos [n, nq]: every body near its place, turned at random (the pairs overlap)."""
    qpos = np.tile(mjm.qpos0, (n, 1))
    for w in range(n):
        for j in range(mjm.njnt):
            a = mjm.jnt_qposadr[j]
            qpos[w, a:a + 3] += rng.normal(0, 0.04, 3)
            q = rng.normal(size=4)
            qpos[w, a + 3:a + 7] = q / np.linalg.norm(q)
    return qpos


def compare(mjm: mujoco.MjModel, qpos: np.ndarray, sim: Sim) -> dict:
    """Per pair type, the largest differences (dist, pos, normal) between the engines' contacts
    for the states qpos, after checking that both find the same number per geom pair."""
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    con, mjd = sim.contact, mujoco.MjData(mjm)
    worst = {}
    for w in range(len(qpos)):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        ours = [s for s in np.flatnonzero(con.active[w].numpy())]
        for c in mjd.contact[:mjd.ncon]:
            t1, t2 = (mujoco.mjtGeom(int(mjm.geom_type[g])).name[7:].lower() for g in c.geom)
            name = f"{t1}-{t2}"
            mine = [s for s in ours if tuple(con.geom[w, s].tolist()) == (c.geom[0], c.geom[1])]
            assert mine, f"world {w}: MuJoCo's {name} contact not found"
            s = min(mine, key=lambda s: np.linalg.norm(con.pos[w, s].numpy() - c.pos))
            ours.remove(s)
            e = worst.setdefault(name, [0.0, 0.0, 0.0])
            e[0] = max(e[0], abs(con.dist[w, s].item() - c.dist))
            e[1] = max(e[1], np.abs(con.pos[w, s].numpy() - c.pos).max())
            e[2] = max(e[2], np.abs(con.frame[w, s, 0].numpy() - c.frame[:3]).max())
        assert not ours, f"world {w}: contacts MuJoCo does not have: {[tuple(con.geom[w, s].tolist()) for s in ours]}"
    return worst


@pytest.fixture(scope="module")
def default_scene():
    mjm = mujoco.MjModel.from_xml_string(scene())
    return mjm, Sim.from_model(mjm, num_worlds=16, dtype="float64")


def test_contacts_match_mujoco_to_epa_tolerance(default_scene, rng):
    mjm, sim = default_scene
    worst = compare(mjm, random_states(mjm, 16, rng), sim)
    assert set(worst) == set(PAIRS) | {"plane-ellipsoid"}, f"pair types without contacts: {set(PAIRS) - set(worst)}"
    for name, (dist, pos, normal) in worst.items():
        if name == "plane-ellipsoid":  # closed form
            assert max(dist, pos, normal) < 1e-12, (name, dist, pos, normal)
            continue
        # the depth to EPA's tolerance (1e-6); positions and normals to its stopping error
        assert dist < 2e-5, (name, dist)
        assert pos < 1e-3 and normal < 0.05, (name, pos, normal)


def test_searches_beyond_the_scratch_rows_take_them_in_turn(default_scene):
    """Every world keeps more pairs that search by GJK/EPA than it has rows of the convex
    scratch (contact_tables.CCD_ROWS): those share the rows in turn, and the contacts are still
    MuJoCo's (test_contacts_match_mujoco_to_epa_tolerance, on this scene)."""
    mjm, sim = default_scene
    sim.forward()
    searched = (sim.data.collision_ccd.numpy() >= 0).sum(axis=1)
    assert sim.model.struct.nccdmax == simrl.sim.contact_tables.CCD_ROWS
    assert (searched > 2 * sim.model.struct.nccdmax - 1).all(), searched


def test_contacts_converge_to_mujoco_with_a_tight_tolerance(rng):
    mjm = mujoco.MjModel.from_xml_string(scene(tolerance=1e-12, iterations=500))
    sim = Sim.from_model(mjm, num_worlds=8, dtype="float64")
    worst = compare(mjm, random_states(mjm, 8, rng), sim)
    for name, (dist, pos, normal) in worst.items():
        assert max(dist, pos, normal) < 1e-4, (name, dist, pos, normal)


def test_separated_pairs_have_no_contacts(default_scene):
    mjm, sim = default_scene
    qpos = np.tile(mjm.qpos0, (sim.num_worlds, 1))
    for j in range(mjm.njnt):
        qpos[:, mjm.jnt_qposadr[j] + 1] += 0.6 * j  # every body apart from every other
        qpos[:, mjm.jnt_qposadr[j] + 2] += 1.0  # and above the floor
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    assert sim.contact.active.numpy().sum() == 0


def test_multiccd_finds_the_contacts_along_a_lying_cylinder():
    """A cylinder lying across a box: MuJoCo's contacts are the two ends of the line of contact;
    simrl's (multiccd by rotations) span the same line at the same depth."""
    xml = """<mujoco><worldbody><geom type='box' size='1 1 0.1' pos='0 0 -0.1'/>
      <body pos='0 0 0.095'><freejoint/><geom type='cylinder' size='0.1 0.3' euler='90 0 0'/></body>
      </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.forward()
    con = sim.contact
    ours = np.flatnonzero(con.active[0].numpy())
    assert 2 <= len(ours) <= 5
    y = sorted(con.pos[0, s, 1].item() for s in ours)
    theirs = sorted(c.pos[1] for c in mjd.contact[:mjd.ncon])
    assert abs(y[0] - theirs[0]) < 1e-4 and abs(y[-1] - theirs[-1]) < 1e-4
    for s in ours:
        assert abs(con.dist[0, s].item() - mjd.contact[0].dist) < 1e-8
        np.testing.assert_allclose(con.frame[0, s, 0].numpy(), [0, 0, -1], atol=2e-3)


def test_libccd_is_refused_by_name():
    libccd = scene().replace("<flag multiccd='disable'/>", "<flag nativeccd='disable'/>")
    with pytest.raises(simrl.UnsupportedFeatureError, match="nativeccd"):
        Sim.from_mjcf(libccd, num_worlds=1)


# an ellipsoid and a lying cylinder dropped on a box, an ellipsoid on the floor, a capsule on a
# standing cylinder: every resting kind of contact the convex pairs make
DROP = """
<mujoco>
  <option timestep="0.002" tolerance="1e-10" iterations="100" ccd_tolerance="1e-10" ccd_iterations="200"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 1"/>
    <geom name="table" type="box" size="0.5 0.5 0.1" pos="0 0 0.1"/>
    <body pos="0.2 0 0.27" euler="5 3 0"><freejoint/><geom type="ellipsoid" size="0.1 0.06 0.05"/></body>
    <body pos="-0.2 0 0.35" euler="90 0 0"><freejoint/><geom type="cylinder" size="0.05 0.15"/></body>
    <body pos="1.5 0 0.07" euler="4 0 0"><freejoint/><geom type="ellipsoid" size="0.1 0.06 0.05"/></body>
    <body pos="-1.5 0 0.15"><freejoint/><geom type="cylinder" size="0.1 0.15" mass="5"/></body>
    <body pos="-1.5 0 0.45" euler="0 90 0"><freejoint/><geom type="capsule" size="0.04 0.1"/></body>
  </worldbody>
</mujoco>"""


def test_dropped_shapes_follow_mujocos_trajectory():
    """Drop and settle for 1 s (float64): the states stay within 1e-3 of MuJoCo's, sampled every
    0.1 s; the lying cylinder and the capsule on the standing cylinder come to rest in both (the
    ellipsoids keep rocking, in both)."""
    mjm = mujoco.MjModel.from_xml_string(DROP)
    mjd = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(10):
        for _ in range(50):
            mujoco.mj_step(mjm, mjd)
        sim.step(50)
        np.testing.assert_allclose(sim.qpos[0].numpy(), mjd.qpos, atol=1e-3)
    for qvel in (mjd.qvel, sim.qvel[0].numpy()):
        assert np.abs(qvel[6:12]).max() < 0.01 and np.abs(qvel[18:30]).max() < 0.01


def test_qacc_with_convex_contacts_matches_mujoco():
    """0.4 s into the drop: qacc of the same state equals MuJoCo's (contacts converged with the
    model's tight ccd_tolerance; one contact per pair: with multiccd the extra contacts of a flat
    contact differ, see test_multiccd_finds_the_contacts_along_a_lying_cylinder)."""
    mjm = mujoco.MjModel.from_xml_string(DROP)
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_MULTICCD
    mjd = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(200):  # into contact
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon >= 4
    sim.qpos = torch.as_tensor(mjd.qpos[None].copy())
    sim.qvel = torch.as_tensor(mjd.qvel[None].copy())
    sim.forward()
    assert int(sim.contact.active.sum()) == mjd.ncon
    err = np.abs(sim.qacc[0].numpy() - mjd.qacc).max() / (1.0 + np.abs(mjd.qacc).max())
    assert err < 1e-6, err


def test_gradients_through_convex_contacts_match_finite_differences():
    """d(qvel1)/d(qpos0, qvel0) of one step with an ellipsoid pressed on a box (EPA) and one on
    the floor (plane-ellipsoid), against central differences: both normals are the flat
    surface's, so the rebuilt contact (the ellipsoid's support point along the fixed normal, the
    box's witness its projection on the face) has the exact derivative."""
    xml = """<mujoco><option timestep="0.002" ccd_tolerance="1e-12" ccd_iterations="200"/><worldbody>
      <geom type="plane" size="5 5 1"/><geom type="box" size="0.5 0.5 0.1" pos="2 0 0.1"/>
      <body pos="0 0 0.045" euler="3 2 0"><freejoint/><geom type="ellipsoid" size="0.1 0.06 0.05"/></body>
      <body pos="2 0 0.245" euler="-2 3 0"><freejoint/><geom type="ellipsoid" size="0.1 0.06 0.05"/></body>
      </worldbody></mujoco>"""
    sim = Sim.from_mjcf(xml, num_worlds=1, dtype="float64")
    qpos0 = sim.qpos.clone()
    qvel0 = torch.zeros_like(sim.qvel)
    qvel0[0, 0:3] = torch.tensor([0.1, -0.2, -0.3], dtype=torch.float64)
    qvel0[0, 6:9] = torch.tensor([-0.1, 0.2, -0.3], dtype=torch.float64)
    ctrl = torch.zeros(1, 0, dtype=torch.float64)
    weights = torch.linspace(0.5, 1.5, sim.nv, dtype=torch.float64)[None]

    def loss(qpos, qvel):
        return (simrl.diff_step(sim, qpos, qvel, ctrl)[1] * weights).sum()

    qpos, qvel = qpos0.clone().requires_grad_(True), qvel0.clone().requires_grad_(True)
    loss(qpos, qvel).backward()
    eps = 1e-7
    # (not the box's ellipsoid's tangential coordinates: EPA's end point on the flat face moves
    # by its tolerance as the ellipsoid slides, a jump that central differences divide by eps)
    for name, x0, grad, idx in (("qpos", qpos0, qpos.grad, (0, 1, 2, 4, 9)), ("qvel", qvel0, qvel.grad, (0, 2, 3, 8))):
        for i in idx:
            xp, xm = x0.clone(), x0.clone()
            xp[0, i] += eps
            xm[0, i] -= eps
            args_p = (xp, qvel0) if name == "qpos" else (qpos0, xp)
            args_m = (xm, qvel0) if name == "qpos" else (qpos0, xm)
            fd = (loss(*args_p) - loss(*args_m)).item() / (2 * eps)
            assert abs(grad[0, i].item() - fd) < 1e-5 * (1 + abs(fd)), (name, i, grad[0, i].item(), fd)


@pytest.mark.slow  # compiles the convex kernels in float32 (about a minute cold)
def test_float32_contacts_match_mujoco(rng):
    """simrl's default precision: the search runs in float64 in both precisions, so the contacts
    agree with MuJoCo's as closely as in float64, to float32's rounding of the poses."""
    mjm = mujoco.MjModel.from_xml_string(scene())
    sim = Sim.from_model(mjm, num_worlds=16)
    qpos = random_states(mjm, 16, rng)
    worst = compare(mjm, qpos.astype(np.float32).astype(np.float64), sim)
    for name, (dist, pos, normal) in worst.items():
        assert dist < 2e-5 and pos < 1e-3 and normal < 0.05, (name, dist, pos, normal)


@pytest.mark.slow  # compiles the wide schedule's convex kernels (about two minutes cold)
def test_both_schedules_agree_on_convex_pairs(rng, monkeypatch):
    """The wide schedule (a launch per pass, the detection over the convex pairs) gives the fused
    schedule's contacts and qacc bit for bit, and so does it with every element launch's threads
    in reverse order (tests/test_schedule.py::reverse_thread_order)."""
    from test_schedule import reverse_thread_order

    mjm = mujoco.MjModel.from_xml_string(DROP)
    qpos = random_states(mjm, 4, rng)
    out = []
    for schedule in ("fused", "wide", "reversed"):
        if schedule == "reversed":
            schedule = "wide"
            reverse_thread_order(monkeypatch)
        sim = Sim.from_model(mjm, num_worlds=4, dtype="float64", schedule=schedule)
        sim.qpos = torch.as_tensor(qpos)
        sim.step(20)
        out.append((sim.qpos.numpy().copy(), sim.contact.dist.numpy().copy(), sim.contact.frame.numpy().copy()))
    for other in out[1:]:
        for a, b in zip(out[0], other, strict=True):
            np.testing.assert_array_equal(a, b)


def test_cpu_threads_give_the_same_bits(rng):
    """Worlds stepped in two blocks on two threads (each block with its rows of the convex
    collision's scratch) give one thread's bits."""
    mjm = mujoco.MjModel.from_xml_string(DROP)
    qpos = random_states(mjm, 4, rng)
    out = []
    for threads in (1, 2):
        sim = Sim.from_model(mjm, num_worlds=4, dtype="float64", cpu_threads=threads)
        sim.qpos = torch.as_tensor(qpos)
        sim.step(20)
        out.append(sim.qpos.numpy().copy())
    np.testing.assert_array_equal(out[0], out[1])
