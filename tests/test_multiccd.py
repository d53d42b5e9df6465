"""multiccd with meshes (MuJoCo's default): box-mesh and mesh-mesh by MuJoCo's face clipping
(simrl.sim.collision_multiccd), capsule- and cylinder-mesh by the rotations the other capsule and
cylinder pairs use (simrl.sim.collision_convex).

The face clipping follows engine_collision_gjk.c's `multicontact` (the source of 2026-08-22, the
newest this project has) and, where MuJoCo 4.0.0's binary was found to differ, that binary: when
an edge of geom 1 lies in no face of geom 2, geom 2's edges are tried against geom 1's faces.
Measured on random overlapping states (tests/test_multiccd.py's scene, 128 worlds): every
single-contact and every edge (two-contact) result equals MuJoCo 4.0.0's to rounding, in
MuJoCo's order; face-on-face patches (three or four contacts) have MuJoCo's count and normal and
the deepest depth within 7e-4, but their points differ (by up to 5 cm for deep random overlaps:
MuJoCo 4.0.0 changed this case after the source above). Resting contacts, where the faces are
parallel and the depths small, agree: the drop test below follows MuJoCo within 1e-3.
"""

import mujoco
import numpy as np
import pytest
import torch
from test_mesh import MESHES, names, random_states
from test_mesh import scene as mesh_scene

import simrl
from simrl import Sim

#: the face-clipping pairs (geom 1 type or mesh, mesh)
CLIP_PAIRS = (("box", "hex"), ("box", "cube"), ("ico", "hex"), ("cube", "ell"), ("box", "ico"), ("hex", "cube"))

#: a slab-shaped mesh, its sizes exact in float32 (MuJoCo keeps mesh vertices in float32)
SLAB = [(x, y, z) for x in (-0.5, 0.5) for y in (-0.5, 0.5) for z in (-0.0625, 0.0625)]


def _assets(extra: dict | None = None) -> str:
    meshes = {**MESHES, **(extra or {})}
    return "".join(f"<mesh name='{n}' vertex='{' '.join(f'{x:.9g}' for p in v for x in p)}'/>"
                   for n, v in meshes.items())


def _contacts_by_pair(mjm, mjd, sim, w):
    """{geom pair: ([MuJoCo's (dist, pos, normal)], [simrl's])} for world w, each in its order."""
    con = sim.contact
    pairs = {}
    for c in mjd.contact[:mjd.ncon]:
        pairs.setdefault((int(c.geom[0]), int(c.geom[1])), ([], []))[0].append(
            (c.dist, c.pos.copy(), c.frame[:3].copy()))
    for s in np.flatnonzero(con.active[w].numpy()):
        pairs.setdefault(tuple(con.geom[s].tolist()), ([], []))[1].append(
            (con.dist[w, s].item(), con.pos[w, s].numpy(), con.frame[w, s, 0].numpy()))
    return pairs


@pytest.fixture(scope="module")
def clip_scene():
    mjm = mujoco.MjModel.from_xml_string(mesh_scene(CLIP_PAIRS, multiccd=True))
    return mjm, Sim.from_model(mjm, num_worlds=48, dtype="float64")


def test_face_clipping_matches_mujoco(clip_scene):
    """Random overlapping poses of every face-clipping pair: vertex and edge contacts (one or two
    per pair) equal MuJoCo 4.0's to rounding; face-on-face patches (three or four) have its
    count, its normal and its deepest depth within 2e-3 (measured 7e-4)."""
    mjm, sim = clip_scene
    qpos = random_states(mjm, 48, np.random.default_rng(5))
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    mjd = mujoco.MjData(mjm)
    seen = {1: 0, 2: 0, 3: 0}
    for w in range(len(qpos)):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        for (g1, g2), (theirs, ours) in _contacts_by_pair(mjm, mjd, sim, w).items():
            name = f"world {w} {names(mjm, g1)}-{names(mjm, g2)}"
            assert len(ours) == len(theirs), (name, len(ours), len(theirs))
            seen[min(len(theirs), 3)] += 1
            if len(theirs) <= 2:
                # an edge's two ends: the order can differ (the clipped edge holds near-duplicate
                # points, and which pair is farthest is decided by rounding)
                for d0, p0, n0 in theirs:
                    d1, p1, n1 = min(ours, key=lambda c: np.abs(c[1] - p0).max())
                    assert abs(d0 - d1) < 1e-9 and np.abs(p0 - p1).max() < 1e-9, (name, d0, d1, p0, p1)
                    assert np.abs(n0 - n1).max() < 1e-9, (name, n0, n1)
            else:
                for (_, _, n0), (_, _, n1) in zip(theirs, ours, strict=True):
                    assert np.abs(n0 - n1).max() < 1e-9, (name, n0, n1)
                deepest = min(c[0] for c in theirs)
                assert abs(deepest - min(c[0] for c in ours)) < 2e-3, name
    # the states cover vertex, edge and face contacts
    assert min(seen.values()) > 0, seen


def test_a_box_lying_flat_on_a_mesh_touches_at_its_four_corners():
    """Closed form: a box lowered 3 mm into a mesh slab, flat and turned about the vertical,
    touches at its four bottom corners, each 3 mm deep, the normal straight down (geom 1, the
    box, to geom 2, the slab); MuJoCo finds the same."""
    half = np.array([0.06, 0.05, 0.04])
    depth, yaw = 0.003, 0.3
    xml = f"""<mujoco><compiler angle="radian"/><asset>{_assets({'slab': SLAB})}</asset><worldbody>
      <geom type="mesh" mesh="slab" pos="0 0 -0.0625"/>
      <body pos="0.02 -0.01 {half[2] - depth}" euler="0 0 {yaw}"><freejoint/>
        <geom type="box" size="{half[0]} {half[1]} {half[2]}"/></body>
      </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.forward()
    con = sim.contact
    ours = np.flatnonzero(con.active[0].numpy())
    assert len(ours) == 4 and mjd.ncon == 4
    c, s = np.cos(yaw), np.sin(yaw)
    corners = {(round(0.02 + c * x - s * y, 9), round(-0.01 + s * x + c * y, 9))
               for x in (-half[0], half[0]) for y in (-half[1], half[1])}
    for k in ours:
        pos = con.pos[0, k].numpy()
        assert (round(pos[0], 9), round(pos[1], 9)) in corners, pos
        assert abs(pos[2] + depth / 2) < 1e-12  # midway between the corner and the slab's top
        assert abs(con.dist[0, k].item() + depth) < 1e-12
        np.testing.assert_allclose(con.frame[0, k, 0].numpy(), [0, 0, -1], atol=1e-12)
    for k, theirs in zip(ours, mjd.contact[:mjd.ncon], strict=True):
        assert abs(con.dist[0, k].item() - theirs.dist) < 1e-12
        np.testing.assert_allclose(con.pos[0, k].numpy(), theirs.pos, atol=1e-12)


def test_a_box_lying_on_its_edge_touches_at_the_edge_ends():
    """Closed form: a box turned 30 degrees about x, its lowest edge 2 mm into a mesh slab: two
    contacts, at the edge's ends (x = +-half x), 2 mm deep; MuJoCo finds the same."""
    half = np.array([0.06, 0.05, 0.04])
    depth, tilt = 0.002, np.pi / 6
    # the lowest point of the turned box's section: |y| c + |z| s below its centre
    low = half[1] * np.sin(tilt) + half[2] * np.cos(tilt)
    xml = f"""<mujoco><compiler angle="radian"/><asset>{_assets({'slab': SLAB})}</asset><worldbody>
      <geom type="mesh" mesh="slab" pos="0 0 -0.0625"/>
      <body pos="0 0 {low - depth}" euler="{tilt} 0 0"><freejoint/>
        <geom type="box" size="{half[0]} {half[1]} {half[2]}"/></body>
      </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.forward()
    con = sim.contact
    ours = np.flatnonzero(con.active[0].numpy())
    assert len(ours) == 2 and mjd.ncon == 2
    assert sorted(round(con.pos[0, k, 0].item(), 9) for k in ours) == [-half[0], half[0]]
    for k, theirs in zip(ours, mjd.contact[:mjd.ncon], strict=True):
        assert abs(con.dist[0, k].item() + depth) < 1e-12
        assert abs(con.dist[0, k].item() - theirs.dist) < 1e-12
        np.testing.assert_allclose(con.pos[0, k].numpy(), theirs.pos, atol=1e-12)


def stack_scene() -> str:
    """A box and a hexagonal prism dropped on a mesh slab, a box-shaped mesh and an icosahedron
    on a box (box-mesh and mesh-mesh, multiccd on)."""
    return f"""<mujoco>
  <option timestep="0.002" tolerance="1e-10" iterations="100" ccd_tolerance="1e-10" ccd_iterations="200"/>
  <asset>{_assets({'slab': SLAB})}</asset>
  <worldbody>
    <geom type="plane" size="5 5 1"/>
    <geom type="mesh" mesh="slab" pos="0 0 0.0625"/>
    <geom type="box" size="0.4 0.4 0.05" pos="1 0 0.05"/>
    <body pos="0.1 0 0.2" euler="4 3 10"><freejoint/><geom type="box" size="0.06 0.05 0.04"/></body>
    <body pos="-0.15 0.1 0.25" euler="5 -4 30"><freejoint/><geom type="mesh" mesh="hex"/></body>
    <body pos="1.1 0 0.25" euler="6 5 0"><freejoint/><geom type="mesh" mesh="cube"/></body>
    <body pos="0.9 0.15 0.25" euler="3 20 0"><freejoint/><geom type="mesh" mesh="ico"/></body>
  </worldbody>
</mujoco>"""


def test_dropped_boxes_and_meshes_follow_mujoco_with_multiccd():
    """Drop and settle for 1 s (float64): the same number of contacts as MuJoCo at every 0.1 s,
    the states within 1e-3 of its (measured 5.5e-4), at its heights within 1e-4. At rest but
    for the hexagonal prism on the slab (mesh on mesh, four of its six corners chosen by the
    face clipping), which keeps trembling below 2e-2 rad/s in simrl (measured 1.2e-2 over 1.5 s)
    and 2e-3 in MuJoCo: simrl's face-on-face patches are not MuJoCo 4.0's (module docstring)."""
    mjm = mujoco.MjModel.from_xml_string(stack_scene())
    mjd = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(10):
        for _ in range(50):
            mujoco.mj_step(mjm, mjd)
        sim.step(50)
        assert int(sim.contact.active.sum()) == mjd.ncon
        np.testing.assert_allclose(sim.qpos[0].numpy(), mjd.qpos, atol=1e-3)
    assert mjd.ncon >= 12  # face on face: four contacts per body but the icosahedron's
    np.testing.assert_allclose(sim.qpos[0].numpy()[2::7], mjd.qpos[2::7], atol=1e-4)
    hexagon = slice(6, 12)
    assert np.abs(np.delete(sim.qvel[0].numpy(), np.s_[6:12])).max() < 2e-3
    assert np.abs(sim.qvel[0, hexagon].numpy()).max() < 2e-2 and np.abs(mjd.qvel).max() < 2e-2


def test_gradients_through_face_clipped_contacts_match_finite_differences():
    """d(qvel1)/d(qpos0, qvel0) of one step of a box pressed tilted onto a mesh slab (an edge:
    two contacts by face clipping), against central differences (float64)."""
    xml = f"""<mujoco><option timestep="0.002" ccd_tolerance="1e-12" ccd_iterations="200"/>
      <asset>{_assets({'slab': SLAB})}</asset><worldbody>
      <geom type="mesh" mesh="slab" pos="0 0 -0.0625"/>
      <body pos="0.01 0.02 0.0591" euler="30 0 0"><freejoint/><geom type="box" size="0.06 0.05 0.04"/></body>
      </worldbody></mujoco>"""
    sim = Sim.from_mjcf(xml, num_worlds=1, dtype="float64")
    sim.forward()
    assert int(sim.contact.active.sum()) == 2
    qpos0 = sim.qpos.clone()
    qvel0 = torch.zeros_like(sim.qvel)
    qvel0[0, 0:6] = torch.tensor([0.1, -0.2, -0.3, 0.4, -0.2, 0.1], dtype=torch.float64)
    ctrl = torch.zeros(1, 0, dtype=torch.float64)
    weights = torch.linspace(0.5, 1.5, sim.nv, dtype=torch.float64)[None]

    def loss(qpos, qvel):
        return (simrl.diff_step(sim, qpos, qvel, ctrl)[1] * weights).sum()

    qpos, qvel = qpos0.clone().requires_grad_(True), qvel0.clone().requires_grad_(True)
    loss(qpos, qvel).backward()
    eps = 1e-7
    for name, x0, grad, idx in (("qpos", qpos0, qpos.grad, (0, 2, 4, 5)), ("qvel", qvel0, qvel.grad, (2, 3))):
        for i in idx:
            xp, xm = x0.clone(), x0.clone()
            xp[0, i] += eps
            xm[0, i] -= eps
            args_p = (xp, qvel0) if name == "qpos" else (qpos0, xp)
            args_m = (xm, qvel0) if name == "qpos" else (qpos0, xm)
            fd = (loss(*args_p) - loss(*args_m)).item() / (2 * eps)
            assert abs(grad[0, i].item() - fd) < 1e-5 * (1 + abs(fd)), (name, i, grad[0, i].item(), fd)


def test_capsule_and_cylinder_mesh_pairs_load_with_multiccd():
    """Capsule- and cylinder-mesh pairs look for more contacts by multiccd's rotations (as the
    other capsule and cylinder pairs): where MuJoCo 4.0 has one contact, simrl's first equals it
    (within EPA's stopping error for the cylinder), and every extra contact is at its depth."""
    pairs = (("capsule", "hex"), ("cylinder", "ico"), ("capsule", "cube"))
    mjm = mujoco.MjModel.from_xml_string(mesh_scene(pairs, multiccd=True))
    sim = Sim.from_model(mjm, num_worlds=16, dtype="float64")
    qpos = random_states(mjm, 16, np.random.default_rng(3))
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    mjd = mujoco.MjData(mjm)
    singles = 0
    for w in range(16):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        for (g1, g2), (theirs, ours) in _contacts_by_pair(mjm, mjd, sim, w).items():
            assert ours, (w, names(mjm, g1), names(mjm, g2))
            assert all(abs(c[0] - ours[0][0]) < 1e-12 for c in ours)  # the rotations' contacts: slot 0's depth
            if len(theirs) == 1:
                singles += 1
                assert abs(theirs[0][0] - ours[0][0]) < 1e-4 and np.abs(theirs[0][1] - ours[0][1]).max() < 1e-3
    assert singles > 0


def test_cpu_threads_give_the_same_bits_with_face_clipping():
    """The face clipping's scratch rows are split per thread block like the rest of the convex
    scratch (Sim's CPU threads): 2 threads give 1's bits."""
    mjm = mujoco.MjModel.from_xml_string(stack_scene())
    out = []
    for threads in (1, 2):
        sim = Sim.from_model(mjm, num_worlds=4, dtype="float64", cpu_threads=threads)
        sim.step(150)
        out.append(sim.qpos.numpy().copy())
    np.testing.assert_array_equal(out[0], out[1])


@pytest.mark.slow  # compiles the wide schedule's convex kernels (about two minutes cold)
def test_both_schedules_agree_with_face_clipping():
    mjm = mujoco.MjModel.from_xml_string(stack_scene())
    out = []
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=2, dtype="float64", schedule=schedule)
        sim.step(100)
        out.append((sim.qpos.numpy().copy(), sim.contact.dist.numpy().copy(), sim.contact.pos.numpy().copy()))
    for a, b in zip(*out, strict=True):
        np.testing.assert_array_equal(a, b)
