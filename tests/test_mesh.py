"""Mesh geoms (their convex hulls) against MuJoCo 4.0, the same states in both: plane-mesh by
MuJoCo 4.0's mjc_PlaneConvex (the deepest hull vertex and up to three more of the hull polygon
most opposed to the plane), every other pair by GJK/EPA with the mesh's support by exhaustive
search or hill climbing (simrl.sim.collision_gjk.mesh_support), one contact per pair
(`<flag multiccd="disable"/>`; multiccd's extra contacts: tests/test_multiccd.py).

Where two meshes' or a mesh's and a box's vertices are the support points (discrete shapes), GJK
and EPA end exactly and simrl's contacts equal MuJoCo's to rounding; against smooth shapes EPA
stops at `ccd_tolerance` as for the other convex pairs (tests/test_convex.py).
"""

import mujoco
import numpy as np
import pytest
import torch

import simrl
from simrl import Sim

PHI = (1 + 5 ** 0.5) / 2
#: an icosahedron (12 vertices: hill climbing), a box-shaped mesh (8: exhaustive search), a
#: hexagonal prism (hexagonal faces: hull4 picks four of six), an L-shaped prism (not convex:
#: MuJoCo collides its hull)
MESHES = {
    "ico": [(0.08 * a, 0.08 * b, 0.08 * c) for a, b, c in (
        (-1, PHI, 0), (1, PHI, 0), (-1, -PHI, 0), (1, -PHI, 0), (0, -1, PHI), (0, 1, PHI), (0, -1, -PHI),
        (0, 1, -PHI), (PHI, 0, -1), (PHI, 0, 1), (-PHI, 0, -1), (-PHI, 0, 1))],
    "cube": [(x, y, z) for x in (-0.1, 0.1) for y in (-0.1, 0.15) for z in (-0.08, 0.08)],
    "hex": [(0.12 * np.cos(a), 0.12 * np.sin(a), z) for a in np.arange(6) * np.pi / 3 for z in (-0.06, 0.06)],
    "ell": [(x, y, z) for x, y in ((0, 0), (0.2, 0), (0.2, 0.06), (0.06, 0.06), (0.06, 0.2), (0, 0.2))
            for z in (-0.05, 0.05)],
}
SIZE = {"sphere": "0.1", "capsule": "0.06 0.12", "ellipsoid": "0.1 0.07 0.12", "cylinder": "0.08 0.1",
        "box": "0.09 0.1 0.11"}
#: (shape or mesh, mesh) of each pair; "plane" pairs lie on the floor
PAIRS = (("plane", "ico"), ("plane", "cube"), ("plane", "hex"), ("plane", "ell"),
         ("sphere", "ico"), ("sphere", "ell"), ("capsule", "hex"), ("ellipsoid", "cube"), ("cylinder", "ico"),
         ("box", "hex"), ("box", "cube"), ("ico", "hex"), ("cube", "ell"))


def _geom(shape: str, bits: int) -> str:
    kind = f"type='mesh' mesh='{shape}'" if shape in MESHES else f"type='{shape}' size='{SIZE[shape]}'"
    return f"<geom {kind} contype='{bits}' conaffinity='{bits}'/>"


def scene(pairs=PAIRS, multiccd: bool = False, tolerance: float = 1e-6, iterations: int = 50) -> str:
    """Each pair in a place of its own, its two geoms colliding only with each other."""
    assets = "".join(f"<mesh name='{n}' vertex='{' '.join(f'{x:.9g}' for p in v for x in p)}'/>"
                     for n, v in MESHES.items())
    bodies, floor = [], 0
    for i, (a, b) in enumerate(pairs):
        bit = 1 << i
        if a == "plane":
            floor |= bit
            rest = -min(v[2] for v in MESHES[b]) - 0.01  # 1 cm into the floor
            bodies.append(f"<body pos='{0.6 * i} -2 {rest:.9g}'><freejoint/>{_geom(b, bit)}</body>")
            continue
        bodies.append(f"<body pos='{0.6 * i} 0 1'><freejoint/>{_geom(a, bit)}</body>")
        bodies.append(f"<body pos='{0.6 * i + 0.1} 0.04 1.12'><freejoint/>{_geom(b, bit)}</body>")
    flag = "" if multiccd else "<flag multiccd='disable'/>"
    return (f"<mujoco><option gravity='0 0 0' ccd_tolerance='{tolerance}' ccd_iterations='{iterations}'>{flag}"
            f"</option><asset>{assets}</asset><worldbody><geom type='plane' size='20 20 1' contype='{floor}' "
            f"conaffinity='{floor}'/>{''.join(bodies)}</worldbody></mujoco>")


def random_states(mjm: mujoco.MjModel, n: int, rng) -> np.ndarray:
    """qpos [n, nq]: every body near its place, turned at random (the pairs overlap)."""
    qpos = np.tile(mjm.qpos0, (n, 1))
    for w in range(n):
        for j in range(mjm.njnt):
            a = mjm.jnt_qposadr[j]
            qpos[w, a:a + 3] += rng.normal(0, 0.03, 3)
            q = rng.normal(size=4)
            qpos[w, a + 3:a + 7] = q / np.linalg.norm(q)
    return qpos


def names(mjm, g) -> str:
    return mjm.geom(g).name or (mjm.mesh(mjm.geom_dataid[g]).name if mjm.geom_type[g] == 7
                                else mujoco.mjtGeom(int(mjm.geom_type[g])).name[7:].lower())


def compare(mjm: mujoco.MjModel, qpos: np.ndarray, sim: Sim, ordered: bool = True) -> dict:
    """Per pair, the largest differences (dist, pos, normal) between the engines' contacts for
    the states qpos, after checking that both find the same number per geom pair (`ordered`: in
    the same order, else each matched to the nearest)."""
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    con, mjd = sim.contact, mujoco.MjData(mjm)
    worst = {}
    for w in range(len(qpos)):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        ours = [int(s) for s in np.flatnonzero(con.active[w].numpy())]
        for c in mjd.contact[:mjd.ncon]:
            name = f"{names(mjm, c.geom[0])}-{names(mjm, c.geom[1])}"
            mine = [s for s in ours if tuple(con.geom[w, s].tolist()) == (c.geom[0], c.geom[1])]
            assert mine, f"world {w}: MuJoCo's {name} contact not found"
            s = mine[0] if ordered else min(mine, key=lambda s: np.linalg.norm(con.pos[w, s].numpy() - c.pos))
            ours.remove(s)
            e = worst.setdefault(name, [0.0, 0.0, 0.0])
            e[0] = max(e[0], abs(con.dist[w, s].item() - c.dist))
            e[1] = max(e[1], np.abs(con.pos[w, s].numpy() - c.pos).max())
            e[2] = max(e[2], np.abs(con.frame[w, s, 0].numpy() - c.frame[:3]).max())
        assert not ours, f"world {w}: contacts MuJoCo does not have: {[tuple(con.geom[w, s].tolist()) for s in ours]}"
    return worst


@pytest.fixture(scope="module")
def mesh_scene():
    mjm = mujoco.MjModel.from_xml_string(scene())
    return mjm, Sim.from_model(mjm, num_worlds=16, dtype="float64")


def expected_names():
    return {f"plane-{b}" if a == "plane" else f"{a}-{b}" for a, b in PAIRS}


def test_mesh_contacts_match_mujoco(mesh_scene, rng):
    """Random overlapping poses: the same contacts per pair, in MuJoCo's order; plane-mesh, the
    discrete pairs (box-mesh, mesh-mesh) and the sphere's and capsule's (GJK on their centre and
    segment) to rounding (measured 3e-15 in the depth, 2e-13 in the normal), the ellipsoid's and
    cylinder's to EPA's stopping error (as tests/test_convex.py)."""
    mjm, sim = mesh_scene
    worst = compare(mjm, random_states(mjm, 16, rng), sim)
    assert set(worst) == expected_names(), f"pairs without contacts: {expected_names() - set(worst)}"
    for name, (dist, pos, normal) in worst.items():
        if name.split("-")[0] in ("ellipsoid", "cylinder"):  # curved: EPA's stopping error
            assert dist < 2e-5 and pos < 1e-3 and normal < 0.05, (name, dist, pos, normal)
        else:  # a vertex, a point or a segment against a polytope: GJK and EPA end exactly
            assert max(dist, pos, normal) < 1e-9, (name, dist, pos, normal)


def test_mesh_contacts_converge_with_a_tight_tolerance(rng):
    mjm = mujoco.MjModel.from_xml_string(scene(tolerance=1e-12, iterations=500))
    sim = Sim.from_model(mjm, num_worlds=8, dtype="float64")
    worst = compare(mjm, random_states(mjm, 8, rng), sim)
    for name, (dist, pos, normal) in worst.items():
        assert max(dist, pos, normal) < 1e-5, (name, dist, pos, normal)


def test_meshes_lying_flat_touch_at_face_vertices(mesh_scene):
    """At rest on the floor (a hull face exactly flat): MuJoCo's contact count and depth, each
    contact a vertex of the bottom face. Which vertices of a hexagon's six (ties) are taken
    depends on the last bit of the geom's orientation, which simrl's kinematics round differently
    from MuJoCo's (4e-15 here): for the hexagon and the L's pentagonal hull face, each contact is
    checked to be one of the face's vertices; elsewhere the places are MuJoCo's."""
    mjm, sim = mesh_scene
    qpos = mjm.qpos0.copy()  # the floor's meshes 1 cm into it
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_forward(mjm, mjd)
    sim.qpos = torch.as_tensor(np.tile(qpos, (sim.num_worlds, 1)))
    sim.forward()
    con = sim.contact
    for a, b in PAIRS:
        if a != "plane":
            continue
        g = next(i for i in range(mjm.ngeom) if mjm.geom_type[i] == 7 and names(mjm, i) == b
                 and mjm.geom_conaffinity[i] & mjm.geom_conaffinity[0])
        theirs = [c for c in mjd.contact[:mjd.ncon] if c.geom[1] == g]
        ours = [s for s in np.flatnonzero(con.active[0].numpy()) if con.geom[0, s][1] == g]
        assert len(ours) == len(theirs), (b, len(ours), len(theirs))
        for s in ours:
            assert min(abs(con.dist[0, s].item() - c.dist) for c in theirs) < 1e-12
        mine = sorted(tuple(np.round(con.pos[0, s].numpy(), 9)) for s in ours)
        if b in ("hex", "ell"):  # 6 and 5 tied vertices: each contact one of them
            mesh = mjm.geom_dataid[g]
            v = mjm.mesh_vert[mjm.mesh_vertadr[mesh]:mjm.mesh_vertadr[mesh] + mjm.mesh_vertnum[mesh]]
            world = v @ mjd.geom_xmat[g].reshape(3, 3).T + mjd.geom_xpos[g]
            bottom = world[np.abs(world[:, 2] + 0.01) < 1e-7]  # (float vertices)
            for s in ours:
                p = con.pos[0, s].numpy()
                assert np.abs(bottom[:, :2] - p[:2]).max(axis=1).min() < 1e-12, (b, p)
        else:
            other = sorted(tuple(np.round(c.pos, 9)) for c in theirs)
            np.testing.assert_allclose(mine, other, atol=1e-9)


def test_separated_meshes_have_no_contacts(mesh_scene):
    mjm, sim = mesh_scene
    qpos = np.tile(mjm.qpos0, (sim.num_worlds, 1))
    for j in range(mjm.njnt):
        qpos[:, mjm.jnt_qposadr[j] + 1] += 0.5 * j
        qpos[:, mjm.jnt_qposadr[j] + 2] += 1.0
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    assert sim.contact.active.numpy().sum() == 0


def test_the_mesh_scene_loads_with_multiccd(rng):
    """With multiccd on (MuJoCo's default) every pair loads (box- and mesh-mesh clip faces,
    capsule- and cylinder-mesh turn: tests/test_multiccd.py); the pairs multiccd leaves alone
    (plane-, sphere- and ellipsoid-mesh) equal MuJoCo's contacts as with it off."""
    Sim.from_mjcf(scene(multiccd=True), num_worlds=1)
    ok = [p for p in PAIRS if p[0] in ("plane", "sphere", "ellipsoid")]
    mjm = mujoco.MjModel.from_xml_string(scene(ok, multiccd=True))
    sim = Sim.from_model(mjm, num_worlds=8, dtype="float64")
    worst = compare(mjm, random_states(mjm, 8, rng), sim)
    for name, (dist, pos, normal) in worst.items():
        if name.startswith("ellipsoid"):
            assert dist < 2e-5 and pos < 1e-3 and normal < 0.05, (name, dist, pos, normal)
        else:
            assert max(dist, pos, normal) < 1e-9, (name, dist, pos, normal)


def drop_scene() -> str:
    """A box-shaped mesh and an icosahedron dropped on the floor, an icosahedron on a box, a
    sphere on a hexagonal prism standing on the floor, a capsule across a box-shaped mesh."""
    assets = "".join(f"<mesh name='{n}' vertex='{' '.join(f'{x:.9g}' for p in v for x in p)}'/>"
                     for n, v in MESHES.items())
    return f"""<mujoco>
  <option timestep="0.002" tolerance="1e-10" iterations="100" ccd_tolerance="1e-10" ccd_iterations="200">
    <flag multiccd="disable"/></option>
  <asset>{assets}</asset>
  <worldbody>
    <geom type="plane" size="5 5 1"/>
    <geom type="box" size="0.3 0.3 0.1" pos="1 0 0.1"/>
    <body pos="0 0 0.2" euler="10 5 0"><freejoint/><geom type="mesh" mesh="cube"/></body>
    <body pos="0 1 0.25" euler="3 20 0"><freejoint/><geom type="mesh" mesh="ico"/></body>
    <body pos="1 0 0.4" euler="0 7 11"><freejoint/><geom type="mesh" mesh="ico"/></body>
    <body pos="2 0 0.06"><freejoint/><geom type="mesh" mesh="hex" mass="3"/></body>
    <body pos="2.02 0.01 0.25"><freejoint/><geom type="sphere" size="0.05"/></body>
    <body pos="-1 0 0.08"><freejoint/><geom type="mesh" mesh="cube" mass="3"/></body>
    <body pos="-1 0 0.3" euler="0 90 10"><freejoint/><geom type="capsule" size="0.03 0.08"/></body>
  </worldbody>
</mujoco>"""


def test_dropped_meshes_follow_mujocos_trajectory():
    """Drop and settle for 1 s (float64): the states within 1e-3 of MuJoCo's every 0.1 s, and at
    the end at MuJoCo's heights within 1 mm, the meshes on the floor at rest in both."""
    mjm = mujoco.MjModel.from_xml_string(drop_scene())
    mjd = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(10):
        for _ in range(50):
            mujoco.mj_step(mjm, mjd)
        sim.step(50)
        np.testing.assert_allclose(sim.qpos[0].numpy(), mjd.qpos, atol=1e-3)
    heights = sim.qpos[0].numpy()[2::7]
    np.testing.assert_allclose(heights, mjd.qpos[2::7], atol=1e-3)
    # the meshes on the floor at rest (the icosahedron on the box still rocks after 1 s, and the
    # capsule, touching the box-shaped mesh at one point, rolls on, in both engines)
    assert np.abs(mjd.qvel[:12]).max() < 1e-3 and np.abs(sim.qvel[0, :12].numpy()).max() < 1e-3


def test_qacc_with_mesh_contacts_matches_mujoco():
    """0.3 s into the drop, in contact: qacc of the same state equals MuJoCo's."""
    mjm = mujoco.MjModel.from_xml_string(drop_scene())
    mjd = mujoco.MjData(mjm)
    for _ in range(150):
        mujoco.mj_step(mjm, mjd)
    mujoco.mj_forward(mjm, mjd)
    assert mjd.ncon >= 8
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos = torch.as_tensor(mjd.qpos[None].copy())
    sim.qvel = torch.as_tensor(mjd.qvel[None].copy())
    sim.forward()
    assert int(sim.contact.active.sum()) == mjd.ncon
    err = np.abs(sim.qacc[0].numpy() - mjd.qacc).max() / (1.0 + np.abs(mjd.qacc).max())
    assert err < 1e-6, err


def test_gradients_through_mesh_contacts_match_finite_differences():
    """d(qvel1)/d(qpos0, qvel0) of one step with a tilted icosahedron on the floor (plane-mesh: a
    vertex of its hull) and a sphere on a box-shaped mesh (GJK/EPA), against central differences."""
    assets = "".join(f"<mesh name='{n}' vertex='{' '.join(f'{x:.9g}' for p in v for x in p)}'/>"
                     for n, v in MESHES.items())
    xml = f"""<mujoco><option timestep="0.002" ccd_tolerance="1e-12" ccd_iterations="200">
      <flag multiccd="disable"/></option>
      <asset>{assets}</asset><worldbody><geom type="plane" size="5 5 1"/>
      <geom type="mesh" mesh="cube" pos="2 0 0.08"/>
      <body pos="0 0 0.125" euler="7 11 0"><freejoint/><geom type="mesh" mesh="ico"/></body>
      <body pos="2.01 0.02 0.255"><freejoint/><geom type="sphere" size="0.1"/></body>
      </worldbody></mujoco>"""
    sim = Sim.from_mjcf(xml, num_worlds=1, dtype="float64")
    sim.forward()
    assert int(sim.contact.active.sum()) >= 2
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
    for name, x0, grad, idx in (("qpos", qpos0, qpos.grad, (0, 2, 4, 7, 9)), ("qvel", qvel0, qvel.grad, (2, 3, 8))):
        for i in idx:
            xp, xm = x0.clone(), x0.clone()
            xp[0, i] += eps
            xm[0, i] -= eps
            args_p = (xp, qvel0) if name == "qpos" else (qpos0, xp)
            args_m = (xm, qvel0) if name == "qpos" else (qpos0, xm)
            fd = (loss(*args_p) - loss(*args_m)).item() / (2 * eps)
            assert abs(grad[0, i].item() - fd) < 1e-5 * (1 + abs(fd)), (name, i, grad[0, i].item(), fd)


def test_cpu_threads_give_the_same_bits_with_meshes(rng):
    mjm = mujoco.MjModel.from_xml_string(drop_scene())
    out = []
    for threads in (1, 2):
        sim = Sim.from_model(mjm, num_worlds=4, dtype="float64", cpu_threads=threads)
        sim.step(100)
        out.append(sim.qpos.numpy().copy())
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.slow  # compiles the wide schedule's convex kernels (about two minutes cold)
def test_both_schedules_agree_on_meshes():
    mjm = mujoco.MjModel.from_xml_string(drop_scene())
    out = []
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=2, dtype="float64", schedule=schedule)
        sim.step(100)
        out.append((sim.qpos.numpy().copy(), sim.contact.dist.numpy().copy(), sim.contact.pos.numpy().copy()))
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.slow  # compiles the convex kernels in float32
def test_float32_mesh_contacts_match_mujoco(rng):
    mjm = mujoco.MjModel.from_xml_string(scene())
    sim = Sim.from_model(mjm, num_worlds=8)
    qpos = random_states(mjm, 8, rng).astype(np.float32).astype(np.float64)
    worst = compare(mjm, qpos, sim)
    for name, (dist, pos, normal) in worst.items():
        assert dist < 2e-5 and pos < 1e-4 and normal < 0.05, (name, dist, pos, normal)
