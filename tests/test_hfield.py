"""Height fields (simrl.sim.collision_convex.hfield_pair: mjc_ConvexHField) against MuJoCo 4.0,
the same states in both: a sphere, capsule, ellipsoid, cylinder, box or mesh against the
triangular prisms of the cells under it, GJK/EPA per prism (from the prism's vertex mean,
mjc_center), one contact per prism up to mjMAXCONPAIR, with multiccd on (MuJoCo's default).
"""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

import simrl
from simrl import Sim
from simrl.sim.contact_tables import MAXCONPAIR, hfield_slots

PHI = (1 + 5 ** 0.5) / 2
ICO = " ".join(f"{0.08 * x:.9g}" for p in ((-1, PHI, 0), (1, PHI, 0), (-1, -PHI, 0), (1, -PHI, 0), (0, -1, PHI),
                                         (0, 1, PHI), (0, -1, -PHI), (0, 1, -PHI), (PHI, 0, -1), (PHI, 0, 1),
                                         (-PHI, 0, -1), (-PHI, 0, 1)) for x in p)
SHAPES = {"sphere": "size='0.1'", "capsule": "size='0.06 0.15'", "ellipsoid": "size='0.1 0.07 0.12'",
          "cylinder": "size='0.08 0.1'", "box": "size='0.1 0.12 0.08'", "mesh": "mesh='ico'"}


def field(rng, nrow: int = 12, ncol: int = 15) -> str:
    elevation = rng.uniform(0, 1, (nrow, ncol))
    return (f"<hfield name='terrain' nrow='{nrow}' ncol='{ncol}' size='2 1.5 0.3 0.1' "
            f"elevation='{' '.join(f'{x:.6f}' for x in elevation.ravel())}'/>")


def scene(rng, copies: int = 2) -> str:
    """Each shape `copies` times over a random field, colliding with it only."""
    bodies = []
    for k in range(copies):
        for i, (shape, size) in enumerate(SHAPES.items()):
            bodies.append(f"<body pos='{-1.6 + 0.6 * i} {-0.7 + 1.4 * k} 0.3'><freejoint/>"
                          f"<geom type='{shape}' {size} contype='2' conaffinity='0'/></body>")
    return (f"<mujoco><option gravity='0 0 0'/><asset>{field(rng)}<mesh name='ico' vertex='{ICO}'/></asset><worldbody>"
            f"<geom type='hfield' hfield='terrain' contype='0' conaffinity='2'/>{''.join(bodies)}</worldbody></mujoco>")


def random_states(mjm, n, rng):
    qpos = np.tile(mjm.qpos0, (n, 1))
    for w in range(n):
        for j in range(mjm.njnt):
            a = mjm.jnt_qposadr[j]
            qpos[w, a:a + 2] += rng.normal(0, 0.05, 2)
            qpos[w, a + 2] = 0.12 + 0.15 * rng.uniform()  # into the field's bumps (0.3 high at most)
            q = rng.normal(size=4)
            qpos[w, a + 3:a + 7] = q / np.linalg.norm(q)
    return qpos


def compare(mjm, qpos, sim):
    """Per shape, the differences (dist, pos, normal) of each contact [n, 3], which both engines
    list in the same order (prism by prism); the counts per geom pair equal."""
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    con, mjd = sim.contact, mujoco.MjData(mjm)
    worst, total = {}, 0
    for w in range(len(qpos)):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        total += mjd.ncon
        for g in range(1, mjm.ngeom):
            theirs = [c for c in mjd.contact[:mjd.ncon] if c.geom[1] == g]
            ours = [s for s in np.flatnonzero(con.active[w].numpy()) if con.geom[w, s][1] == g]
            assert len(ours) == len(theirs), (w, g, len(ours), len(theirs))
            name = mujoco.mjtGeom(int(mjm.geom_type[g])).name[7:].lower()
            e = worst.setdefault(name, [])
            for s, c in zip(ours, theirs, strict=True):
                e.append((abs(con.dist[w, s].item() - c.dist), np.abs(con.pos[w, s].numpy() - c.pos).max(),
                          np.abs(con.frame[w, s, 0].numpy() - c.frame[:3]).max()))
    return {name: np.array(e).reshape(-1, 3) for name, e in worst.items()}, total


@pytest.fixture(scope="module")
def field_scene():
    mjm = mujoco.MjModel.from_xml_string(scene(np.random.default_rng(7)))
    # a dozen shapes pressed into the bumps at once: a slot budget of every pair's slots
    return mjm, Sim.from_model(mjm, num_worlds=8, dtype="float64", nconmax=10**9)


def test_hfield_contacts_match_mujoco(field_scene, rng):
    """Random poses over random bumps: MuJoCo's contacts prism by prism; the sphere's, capsule's
    and box's to rounding (measured 4e-12), the ellipsoid's and cylinder's to EPA's stopping
    error (as tests/test_convex.py); the mesh's to rounding but for about 1 in 75, where EPA on
    the two polytopes ends at another face than MuJoCo 4.0's (4 of 300 over four seeds, up to
    5.4 mm in depth)."""
    mjm, sim = field_scene
    errors, total = compare(mjm, random_states(mjm, 8, rng), sim)
    assert total > 100 and set(errors) == set(SHAPES)
    for name, e in errors.items():
        dist, pos, normal = e.max(axis=0)
        if name in ("ellipsoid", "cylinder"):
            assert dist < 2e-5 and pos < 1e-2 and normal < 0.05, (name, dist, pos, normal)
        elif name == "mesh":
            exact = e.max(axis=1) < 1e-9
            assert exact.mean() > 0.95 and dist < 1e-2, (exact.mean(), dist)
        else:
            assert max(dist, pos, normal) < 1e-9, (name, dist, pos, normal)


def test_each_pair_has_slots_for_every_prism_under_it(field_scene):
    """The slots of a pair bound the prisms mjc_ConvexHField can visit for it (hfield_slots);
    a big sphere on a fine field stops at mjMAXCONPAIR, as MuJoCo's does."""
    mjm, sim = field_scene
    tables = sim.model.contact_tables
    assert all(0 < n <= MAXCONPAIR for n in tables["nslot"])
    fine = ("<mujoco><asset><hfield name='h' nrow='40' ncol='40' size='1 1 0.1 0.1'/></asset><worldbody>"
            "<geom type='hfield' hfield='h'/><body pos='0 0 0.3'><freejoint/><geom type='sphere' size='0.3'/>"
            "</body></worldbody></mujoco>")
    mjm = mujoco.MjModel.from_xml_string(fine)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[2] = 0.3 - 0.05  # 5 cm into the flat field: more touching prisms than the cap
    mujoco.mj_forward(mjm, mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos = torch.as_tensor(mjd.qpos[None].copy())
    sim.forward()
    assert mjd.ncon == MAXCONPAIR == int(sim.contact.active.sum())
    np.testing.assert_allclose(np.sort(sim.contact.dist[0].numpy()[sim.contact.active[0].numpy() > 0]),
                               np.sort([c.dist for c in mjd.contact[:mjd.ncon]]), atol=1e-12)


def margin_scene(radius: float, z: float, x: float = 0.0, y: float = 0.0, margin: float = 0.0, gap: float = 0.0,
                 n: int = 3, geom: str = "", quat: str = "1 0 0 0") -> mujoco.MjModel:
    """A sphere (its margin and gap given) with its lowest point z over a flat n x n field; or
    `geom` (type and size), its centre radius + z high, turned by `quat`."""
    geom = geom or f"type='sphere' size='{radius}'"
    return mujoco.MjModel.from_xml_string(
        f"<mujoco><asset><hfield name='h' nrow='{n}' ncol='{n}' size='1 1 0.1 0.1'/></asset><worldbody>"
        f"<geom type='hfield' hfield='h'/><body pos='{x} {y} {radius + z}' quat='{quat}'><freejoint/>"
        f"<geom {geom} margin='{margin}' gap='{gap}'/></body></worldbody></mujoco>")


def contacts_of_both(mjm: mujoco.MjModel):
    """(MuJoCo's, simrl's) contacts at qpos0, each [(dist, x, y, z)] sorted (on values rounded
    to 1e-9, so that rounding does not reorder contacts at equal distances)."""
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.forward()
    on = np.flatnonzero(sim.contact.active[0].numpy())
    ours = np.column_stack([sim.contact.dist[0].numpy()[on], sim.contact.pos[0].numpy()[on]]).reshape(-1, 4)
    theirs = np.array([[c.dist, *c.pos] for c in mjd.contact[:mjd.ncon]]).reshape(-1, 4)
    return tuple(c[np.lexsort(np.round(c, 9).T[::-1])] for c in (theirs, ours))


@pytest.mark.parametrize("z, margin, gap, dist, ncon", [
    (0.009, 0.01, 0.0, 0.009, 6),    # within the margin: its true distance, not 1.5 margins less
    (0.009, 0.0, 0.01, 0.009, 6),    # the gap alike
    (-0.004, 0.01, 0.0, -0.004, 6),  # into the field
    (0.012, 0.01, 0.0, None, 0),     # beyond the margin
])
def test_margin_and_gap_on_a_height_field_match_mujoco(z, margin, gap, dist, ncon):
    """A sphere over the common vertex of six prisms of a flat field, its margin or gap set:
    MuJoCo 4.0's contacts (dist at the true distance, pos midway between the shapes inflated by
    half the margin each)."""
    theirs, ours = contacts_of_both(margin_scene(0.1, z, margin=margin, gap=gap))
    assert len(theirs) == ncon and np.allclose(theirs[:, 0], dist if ncon else [])
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_a_prism_beside_the_geom_within_the_margin_has_a_contact():
    """A small sphere 1 mm over cell column 1, its bounding box 0.5 mm clear of column 0: the
    prism of column 0 is within the margin (at 5.2 mm) and MuJoCo collides it too, so the cells
    span the box grown by the margin."""
    theirs, ours = contacts_of_both(margin_scene(0.01, 0.001, x=0.0105, y=0.5, margin=0.01))
    assert len(theirs) == 2 and np.isclose(theirs[:, 0].max(), np.hypot(0.0105, 0.011) - 0.01)
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


@pytest.mark.parametrize("z, quat, dist", [(0.004, "1 0 0 0", 0.004), (-0.004, "1 0 0 0", -0.00399993107555),
                                            (0.004, "0.99 0.1 0.05 0", -0.00657124974956)])
def test_a_box_within_the_margin_of_a_flat_field_matches_mujoco(z, quat, dist):
    """A box over two prisms, margin 1 cm: apart, GJK runs on the box and the prism without
    their margins (MuJoCo 4.0's dist is exact: 0.004); into the field, GJK and EPA on the shapes
    inflated by half the margin each (EPA's stopping error, 7e-8 here, is MuJoCo's too)."""
    mjm = margin_scene(0.1, z, x=0.3, y=0.3, margin=0.01, geom="type='box' size='0.1 0.1 0.1'", quat=quat)
    theirs, ours = contacts_of_both(mjm)
    assert len(theirs) == 2 and np.isclose(theirs[:, 0].max(), dist, rtol=0, atol=1e-14)
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_slots_cover_the_prisms_within_a_margin():
    """A sphere with a wide margin over a fine field touches more prisms than lie under its
    bounding sphere; hfield_slots counts the cells under the sphere grown by the margin, and every
    contact MuJoCo reports is simrl's."""
    mjm = margin_scene(0.02, 0.001, x=0.013, y=-0.021, margin=0.05, n=41)
    assert hfield_slots(mjm, 0, 1, 0.05) > hfield_slots(mjm, 0, 1)
    theirs, ours = contacts_of_both(mjm)
    assert hfield_slots(mjm, 0, 1) < len(theirs) <= hfield_slots(mjm, 0, 1, 0.05)
    np.testing.assert_allclose(ours, theirs, atol=1e-12)


def test_shapes_dropped_on_bumps_follow_mujocos_trajectory():
    """Each shape dropped on the random field (gravity on) for 1 s, float64: within 1e-3 of
    MuJoCo's state every 0.1 s."""
    xml = scene(np.random.default_rng(3), copies=1).replace("gravity='0 0 0'", "timestep='0.002'")
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(10):
        for _ in range(50):
            mujoco.mj_step(mjm, mjd)
        sim.step(50)
        np.testing.assert_allclose(sim.qpos[0].numpy(), mjd.qpos, atol=1e-3)
    assert mjd.ncon > 0


def rough_quadruped() -> mujoco.MjModel:
    """The project's quadruped on a rough height field instead of its floor, from the shipped
    MJCF through MjSpec."""
    spec = mujoco.MjSpec.from_file(str(Path(__file__).parents[1] / "envs" / "assets" / "quadruped.xml"))
    rng = np.random.default_rng(11)
    nrow = ncol = 41
    hf = spec.add_hfield(name="rough", nrow=nrow, ncol=ncol, size=[2.0, 2.0, 0.04, 0.1])
    hf.userdata = list(rng.uniform(0, 1, nrow * ncol))
    floor = spec.geom("floor")
    floor.type = mujoco.mjtGeom.mjGEOM_HFIELD
    floor.hfieldname = "rough"
    return spec.compile()


@pytest.mark.slow  # 1,000 steps of both engines (about a minute)
def test_quadruped_walks_on_rough_terrain_with_mujocos_trajectory(rng):
    """The quadruped on a rough height field under random controls for 1,000 steps: within 1e-3 of
    MuJoCo's state for the first 200, and standing (its trunk above the field) in both at the end."""
    mjm = rough_quadruped()
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
    mjd.qpos[2] += 0.04
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos = torch.as_tensor(mjd.qpos[None].copy())
    ctrl0 = mjd.ctrl.copy() if mjm.nkey == 0 else mjm.key_ctrl[0].copy()
    for t in range(1000):
        ctrl = ctrl0 + 0.2 * rng.uniform(-1, 1, mjm.nu)
        mjd.ctrl[:] = ctrl
        mujoco.mj_step(mjm, mjd)
        sim.ctrl = torch.as_tensor(ctrl[None].copy())
        sim.step()
        if t < 200:
            np.testing.assert_allclose(sim.qpos[0].numpy(), mjd.qpos, atol=1e-3, err_msg=f"step {t}")
    assert mjd.qpos[2] > 0.15 and sim.qpos[0, 2].item() > 0.15


@pytest.mark.parametrize("margin", [0.0, 0.01])
def test_gradients_through_hfield_contacts_match_finite_differences(margin):
    """d(qvel1)/d(qpos0, qvel0) of one step with a sphere resting on a prism's face (GJK on its
    centre: smooth), without and with a margin, against central differences."""
    xml = ("<mujoco><option timestep='0.002'/><asset><hfield name='h' nrow='3' ncol='3' size='1 1 0.2 0.1' "
           "elevation='0 0.2 0.4  0.1 0.3 0.5  0.2 0.4 0.6'/></asset><worldbody><geom type='hfield' hfield='h'/>"
           f"<body pos='0.13 0.21 0.25'><freejoint/><geom type='sphere' size='0.1' margin='{margin}'/></body>"
           "</worldbody></mujoco>")
    sim = Sim.from_mjcf(xml, num_worlds=1, dtype="float64")
    mjm = sim.model.mjm
    # just touching: lower it until MuJoCo reports 2 mm of penetration
    mjd = mujoco.MjData(mjm)
    for _ in range(200):
        mujoco.mj_forward(mjm, mjd)
        if mjd.ncon and mjd.contact[0].dist < -0.002:
            break
        mjd.qpos[2] -= 0.001
    assert mjd.ncon
    qpos0 = torch.as_tensor(mjd.qpos[None].copy())
    qvel0 = torch.zeros_like(sim.qvel)
    qvel0[0, :3] = torch.tensor([0.1, -0.2, -0.1], dtype=torch.float64)
    ctrl = torch.zeros(1, 0, dtype=torch.float64)
    weights = torch.linspace(0.5, 1.5, sim.nv, dtype=torch.float64)[None]

    def loss(qpos, qvel):
        return (simrl.diff_step(sim, qpos, qvel, ctrl)[1] * weights).sum()

    qpos, qvel = qpos0.clone().requires_grad_(True), qvel0.clone().requires_grad_(True)
    loss(qpos, qvel).backward()
    eps = 1e-7
    for name, x0, grad in (("qpos", qpos0, qpos.grad), ("qvel", qvel0, qvel.grad)):
        for i in range(6):
            xp, xm = x0.clone(), x0.clone()
            xp[0, i] += eps
            xm[0, i] -= eps
            args_p = (xp, qvel0) if name == "qpos" else (qpos0, xp)
            args_m = (xm, qvel0) if name == "qpos" else (qpos0, xm)
            fd = (loss(*args_p) - loss(*args_m)).item() / (2 * eps)
            assert abs(grad[0, i].item() - fd) < 1e-5 * (1 + abs(fd)), (name, i, grad[0, i].item(), fd)


@pytest.mark.slow  # compiles the wide schedule's convex kernels
def test_both_schedules_agree_on_height_fields(monkeypatch):
    """Both schedules, and the wide one with every element launch's threads in reverse order
    (tests/test_schedule.py::reverse_thread_order), give the same bits; the field with a margin."""
    from test_schedule import reverse_thread_order

    xml = (scene(np.random.default_rng(3), copies=1).replace("gravity='0 0 0'", "timestep='0.002'")
           .replace("hfield='terrain'", "hfield='terrain' margin='0.005'"))
    mjm = mujoco.MjModel.from_xml_string(xml)
    out = []
    for schedule in ("fused", "wide", "reversed"):
        if schedule == "reversed":
            schedule = "wide"
            reverse_thread_order(monkeypatch)
        sim = Sim.from_model(mjm, num_worlds=2, dtype="float64", schedule=schedule)
        sim.step(100)
        out.append((sim.qpos.numpy().copy(), sim.contact.dist.numpy().copy()))
    for other in out[1:]:
        for a, b in zip(out[0], other, strict=True):
            np.testing.assert_array_equal(a, b)
