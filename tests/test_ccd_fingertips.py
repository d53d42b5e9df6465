"""GJK and EPA of a small sphere against a mesh as the MuJoCo 4.0.1 library runs them, checked on
the configurations where aloha_pot (MuJoCo Warp's test_data) parted from MuJoCo: its fingertip
spheres (radius 0.6 mm) against the right finger's mesh, at MuJoCo's own states of steps 10, 13
and 14 (each sphere's centre in the finger geom's frame, from `mj_step`'s trajectory).

mjc_ccd shrinks the sphere to its centre and runs GJK on the point and the mesh: near the surface
(0.05 mm outside it here) the inflated distance is the contact. The 4.0.1 library counts a point
(or a capsule's segment) as a discrete shape, so that search runs without the duality-gap
tolerance, to the exact distance; MuJoCo 3.12.1's source stops at 0.5 tol^2 (a normal 1e-7 off).
When the centre is inside the mesh, GJK and EPA run on the whole sphere, which is curved, so EPA
stops at the ccd tolerance (1e-6) with a normal tens of micrometres off the limit: where it stops
depends on its steps, and 4.0.1 tests this step's bound (not the least one). simrl's contacts
were up to 6e-5 apart from MuJoCo's before it followed both (simrl.sim.collision_gjk)."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from simrl import Sim

try:
    import mujoco_warp
except ImportError:  # the 'bench' extra: the fingertip test skips, the generated hull's runs
    mujoco_warp = None
ALOHA = Path(mujoco_warp.__file__).parent / "test_data" / "aloha_pot" if mujoco_warp else Path("/nonexistent")
FINGER = "vx300s_8_custom_finger_right-41349941da5624f43b137273d462f62ab9605c36.stl"

#: a fingertip sphere's centre in the right finger geom's frame (aloha_pot, MuJoCo's state):
#: (step, sphere geom, outside or inside the mesh)
TIPS = {
    (10, 89, "outside"): (0.0006817288468686269, 0.0021046810433902477, 0.061333308409841296),
    (13, 88, "outside"): (0.0019185009417950112, 0.005919682801997436, 0.066472600707659),
    (13, 58, "inside"): (0.002256235937415241, 0.005919406410178471, 0.06653156027559945),
    (14, 88, "inside"): (0.002392527769503201, 0.005919294873180845, 0.06655535321277777),
}


@pytest.mark.skipif(not (ALOHA / FINGER).exists(), reason="needs MuJoCo Warp's test_data/aloha_pot")
def test_fingertip_sphere_mesh_contacts_match_mujoco():
    xml = f"""<mujoco><compiler meshdir="{ALOHA}"/><option gravity="0 0 0"/>
  <asset><mesh name="finger" file="{FINGER}"/></asset>
  <worldbody>
    <body><freejoint/><geom type="mesh" mesh="finger"/></body>
    <body><freejoint/><geom type="sphere" size="0.0006"/></body>
  </worldbody></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    qpos = np.tile(mjm.qpos0, (len(TIPS), 1))
    for w, tip in enumerate(TIPS.values()):
        qpos[w, 7:10] = mjd.geom_xpos[0] + mjd.geom_xmat[0].reshape(3, 3) @ np.array(tip)
    sim = Sim.from_model(mjm, num_worlds=len(TIPS), dtype="float64", device="cpu")
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    con, errors = sim.contact, {}
    for w, name in enumerate(TIPS):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        ours = np.flatnonzero(con.active[w].numpy())
        assert mjd.ncon == 1 and len(ours) == 1, (name, mjd.ncon, len(ours))
        c, s = mjd.contact[0], ours[0]
        assert (c.dist < -0.0006) == (name[2] == "inside"), (name, c.dist)
        errors[name] = max(abs(con.dist[w, s].item() - c.dist), np.abs(con.pos[w, s].numpy() - c.pos).max(),
                           np.abs(con.frame[w, s, 0].numpy() - c.frame[:3]).max())
    assert max(errors.values()) < 1e-12, errors


def _hull_xml(seed: int) -> tuple[str, np.ndarray]:
    """A convex mesh of 200 points on an ellipsoid of 2-6 cm (written into the MJCF, no asset
    file) and a 0.6 mm sphere, each on a free joint; the mesh's vertices."""
    rng = np.random.default_rng(seed)
    v = rng.normal(size=(200, 3))
    v = v / np.linalg.norm(v, axis=1, keepdims=True) * np.array([0.02, 0.04, 0.06])
    xml = f"""<mujoco><option gravity="0 0 0"/>
  <asset><mesh name="hull" vertex="{' '.join(f'{x:.17g}' for x in v.ravel())}"/></asset>
  <worldbody>
    <body><freejoint/><geom type="mesh" mesh="hull"/></body>
    <body><freejoint/><geom type="sphere" size="0.0006"/></body>
  </worldbody></mujoco>"""
    return xml, v


@pytest.mark.parametrize("offset", [5e-5, 3e-4])
def test_small_spheres_near_a_generated_hull_get_mujocos_contacts(offset):
    """The same searches without MuJoCo Warp's files (so that CI runs them): a 0.6 mm sphere whose
    centre is `offset` outside or inside a generated convex mesh, mostly near its edges and
    vertices, at 32 places; every contact (distance, normal, point) equals MuJoCo 4.0.1's within
    1e-10 (3e-13 measured; with MuJoCo 3.12.1's GJK and EPA, which simrl followed before, 4e-3 at
    0.05 mm and 0.25 at 0.3 mm)."""
    xml, _ = _hull_xml(7)
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjd = mujoco.MjData(mjm)
    mujoco.mj_kinematics(mjm, mjd)
    mesh = mjm.geom_dataid[0]
    verts = mjm.mesh_vert[mjm.mesh_vertadr[mesh]:mjm.mesh_vertadr[mesh] + mjm.mesh_vertnum[mesh]].astype(float)
    faces = mjm.mesh_face[mjm.mesh_faceadr[mesh]:mjm.mesh_faceadr[mesh] + mjm.mesh_facenum[mesh]]
    rng = np.random.default_rng(3)
    R, x = mjd.geom_xmat[0].reshape(3, 3), mjd.geom_xpos[0]
    qpos = np.tile(mjm.qpos0, (32, 1))
    for w in range(32):  # a point of a face, mostly near its edges and corners, `offset` off it
        a, b, c = verts[faces[rng.integers(len(faces))]]
        lam = rng.dirichlet([0.3, 0.3, 0.3])
        n = np.cross(b - a, c - a)
        n /= np.linalg.norm(n)
        point = lam[0] * a + lam[1] * b + lam[2] * c + (offset if w % 2 == 0 else -offset) * n
        qpos[w, 7:10] = x + R @ point
    sim = Sim.from_model(mjm, num_worlds=32, dtype="float64", device="cpu")
    sim.qpos = torch.as_tensor(qpos)
    sim.forward()
    con, compared = sim.contact, 0
    for w in range(32):
        mjd.qpos[:] = qpos[w]
        mujoco.mj_forward(mjm, mjd)
        ours = np.flatnonzero(con.active[w].numpy())
        assert mjd.ncon == len(ours), (w, mjd.ncon, len(ours))
        for k, c in zip(ours, mjd.contact[:mjd.ncon], strict=True):
            for mine, theirs in ((con.dist[w, k].item(), c.dist), (con.frame[w, k, 0].numpy(), c.frame[:3]),
                                 (con.pos[w, k].numpy(), c.pos)):
                np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-10, err_msg=f"world {w}")
            compared += 1
    assert compared >= 16
