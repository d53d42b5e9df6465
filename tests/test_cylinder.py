"""Cylinders (MuJoCo's dedicated colliders mjc_PlaneCylinder and mjc_SphereCylinder) in whole
scenes against MuJoCo: contact sets and qacc for the same states, resting heights and a rolling
trajectory; and the two schedules on a cylinder scene bit for bit. The colliders themselves are
compared pose by pose in test_collision_primitive.py and differentiated in test_grad_collision.py."""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from test_contact_parity import contact_states, simulate

from simrl import Sim

# cylinders standing, tilted and lying on a plane, a sphere on a cap and one against a side;
# cylinders do not collide with each other (convex pairs: tests/test_convex.py)
CYLINDERS = """
<mujoco>
  <option timestep="0.002" tolerance="1e-10" iterations="1000"/>
  <default>
    <geom contype="1" conaffinity="3"/>
    <default class="can"><geom type="cylinder" contype="2" conaffinity="1"/></default>
  </default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 1"/>
    <body pos="0 0 0.25"><freejoint/><geom class="can" size="0.1 0.25"/></body>
    <body pos="0 0 0.62"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0.6 0 0.3" euler="8 5 0"><freejoint/><geom class="can" size="0.15 0.2"/></body>
    <body pos="-0.6 0 0.12" euler="90 0 20"><freejoint/><geom class="can" size="0.12 0.3"/></body>
    <body pos="-0.6 0.3 0.3"><freejoint/><geom type="sphere" size="0.08"/></body>
  </worldbody>
</mujoco>"""


def cylinders() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(CYLINDERS)


def test_cylinder_contacts_match_mujoco(rng):
    mjm = cylinders()
    states = contact_states(mjm, 16, rng)
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype="float64")
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]))
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]))
    sim.forward()
    con, mjd, total = sim.contact, mujoco.MjData(mjm), 0
    cylinder = int(mujoco.mjtGeom.mjGEOM_CYLINDER)
    with_cylinder = 0
    for w, (qpos, qvel, _) in enumerate(states):
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        ours = list(np.flatnonzero(con.active[w].numpy()))
        assert len(ours) == mjd.ncon, f"world {w}: {len(ours)} contacts, MuJoCo {mjd.ncon}"
        for c in mjd.contact[:mjd.ncon]:
            candidates = [s for s in ours if tuple(con.geom[w, s].tolist()) == (c.geom[0], c.geom[1])]
            assert candidates, f"world {w}: MuJoCo's contact between geoms {c.geom} not found"
            s = min(candidates, key=lambda s: np.linalg.norm(con.pos[w, s].numpy() - c.pos))
            ours.remove(s)
            assert abs(con.dist[w, s].item() - c.dist) < 1e-5
            np.testing.assert_allclose(con.pos[w, s].numpy(), c.pos, atol=1e-5)
            np.testing.assert_allclose(con.frame[w, s].numpy().ravel(), c.frame, atol=1e-5)
            with_cylinder += cylinder in (mjm.geom_type[c.geom[0]], mjm.geom_type[c.geom[1]])
            total += 1
    assert with_cylinder > 20, f"only {with_cylinder} cylinder contacts in the sampled states"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_qacc_with_cylinder_contacts_matches_mujoco(dtype, rng):
    mjm = cylinders()
    states = contact_states(mjm, 16, rng)
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype)
    sim.set_solver(iterations=1000, tolerance=1e-10 if dtype == "float64" else 1e-7)
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]), dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]), dtype=sim.torch_dtype)
    sim.forward()
    mjd, worst = mujoco.MjData(mjm), 0.0
    for w, (qpos, qvel, _) in enumerate(states):
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        worst = max(worst, np.linalg.norm(sim.qacc[w].numpy() - mjd.qacc) / max(np.linalg.norm(mjd.qacc), 1e-9))
    assert worst < (1e-6 if dtype == "float64" else 1e-3), f"relative qacc error {worst:.2e}"


def _single(geom: str, pos: str, euler: str = "0 0 0") -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="0.002"/><worldbody>
        <geom type="plane" size="10 10 1"/><body pos="{pos}" euler="{euler}"><freejoint/>{geom}</body>
        </worldbody></mujoco>""")
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    return mjm


@pytest.mark.parametrize("euler", ["0 0 0", "10 4 0", "90 0 30"], ids=["standing", "tilted", "lying"])
def test_cylinder_dropped_on_a_plane_rests_at_mujocos_height(euler):
    mjm = _single('<geom type="cylinder" size="0.1 0.2"/>', "0 0 0.5", euler)
    ref, ours = simulate(mjm, 2.0, lambda d: None)
    assert abs(ours[2] - ref[2]) < 1e-3, f"rests at {ours[2]:.5f} m, MuJoCo {ref[2]:.5f} m"
    assert ref[2] < 0.21, "the cylinder should have landed"


def test_cylinder_rolls_like_mujoco():
    mjm = _single('<geom type="cylinder" size="0.1 0.2"/>', "0 0 0.1", "90 0 0")

    def push(mjd):
        mjd.qvel[0] = 1.0  # across its axis: it rolls

    ref, ours = simulate(mjm, 1.0, push)
    assert ref[0] > 0.3, "the cylinder should roll a visible distance"
    assert abs(ours[2] - ref[2]) < 1e-3
    assert abs(ours[0] - ref[0]) < 0.05 * ref[0]


def test_both_schedules_agree_on_cylinders():
    mjm = cylinders()
    out = []
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=4, dtype="float64", schedule=schedule)
        sim.qvel = torch.as_tensor(np.random.default_rng(2).normal(0, 0.5, (4, mjm.nv)))
        sim.step(100)
        assert int(sim.view("efc_nactive").min()) > 0
        out.append({name: wp.to_torch(getattr(sim.data, name)).clone()
                    for name in ("qpos", "qvel", "qacc", "efc_force", "contact_dist")})
    for name in out[0]:
        assert torch.equal(out[0][name], out[1][name]), name
