"""Torsional (condim 4) and rolling (condim 6) friction in the pyramidal cone against MuJoCo:
qacc for the same states, a top that stops spinning and a ball that stops rolling as MuJoCo's
do; gradients through a step with such contacts against finite differences."""

import mujoco
import numpy as np
import pytest
import torch
from test_contact_parity import contact_states, simulate

from simrl import Sim

# spheres, a box and a capsule on a plane with condim 3, 4 and 6 (rolling friction on the balls)
SCENE = """
<mujoco>
  <option timestep="0.002" tolerance="1e-10" iterations="1000"/>
  <worldbody>
    <geom type="plane" size="5 5 1" friction="0.8 0.02 0.005"/>
    <body pos="0 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="6" friction="1 0.03 0.01"/></body>
    <body pos="0.5 0 0.1"><freejoint/><geom type="sphere" size="0.1" condim="4" friction="0.9 0.05 0"/></body>
    <body pos="-0.5 0 0.06" euler="5 3 20"><freejoint/><geom type="box" size="0.1 0.08 0.05" condim="4"/></body>
    <body pos="0 0.5 0.06" euler="90 0 0"><freejoint/><geom type="capsule" size="0.05 0.15" condim="6"/></body>
    <body pos="0 -0.5 0.1"><freejoint/><geom type="sphere" size="0.1" condim="3"/></body>
  </worldbody>
</mujoco>"""


def rows_on_the_floor(mjm):
    """(sim, slots with rows, rows of each, their first row) of one world whose free bodies each
    have their geom pressed 5 mm into the floor."""
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    qpos = mjm.qpos0.copy()
    for b in range(mjm.nbody - 1):
        qpos[7 * b + 2] -= 0.005
    sim.qpos = torch.tensor(qpos[None])
    sim.forward()
    adr, nefc = sim.data.contact_efc_adr.numpy()[0], int(sim.data.nefc.numpy()[0])
    slots = np.flatnonzero(adr >= 0)
    assert len(slots) >= mjm.nbody - 1, "every geom touches the floor"
    return sim, slots, np.diff(np.append(adr[slots], nefc)), adr[slots[0]]


def test_rows_per_contact():
    """2 (condim - 1) pyramid edges per contact: 10 for condim 6, 6 for condim 4, placed one after
    another in slot order after the fixed rows."""
    sim, slots, rows, first = rows_on_the_floor(mujoco.MjModel.from_xml_string(SCENE))
    tables = sim.model.contact_tables
    assert sorted(set(tables["condim"])) == [3, 4, 6]
    assert first == sim.model.budgets.nefc_fixed
    pair = sim.view("contact_pair")[0].tolist()
    assert rows.tolist() == [2 * (tables["condim"][pair[c]] - 1) for c in slots]
    assert (sim.data.efc_type.numpy()[0, first:int(sim.data.nefc.numpy()[0])] == 6).all()


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_qacc_with_torsional_and_rolling_friction_matches_mujoco(dtype, rng):
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    states = contact_states(mjm, 16, rng)
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype)
    sim.set_solver(iterations=1000, tolerance=1e-10 if dtype == "float64" else 1e-7)
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]), dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]), dtype=sim.torch_dtype)
    sim.forward()
    mjd, worst, rows = mujoco.MjData(mjm), 0.0, 0
    for w, (qpos, qvel, _) in enumerate(states):
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        rows += sum(2 * (c.dim - 1) for c in mjd.contact[:mjd.ncon] if c.dim > 3)
        worst = max(worst, np.linalg.norm(sim.qacc[w].numpy() - mjd.qacc) / max(np.linalg.norm(mjd.qacc), 1e-9))
    assert rows > 50, "the states should have contacts with condim 4 and 6"
    assert worst < (1e-6 if dtype == "float64" else 1e-3), f"relative qacc error {worst:.2e}"


def _single(geom: str, pos: str) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(f"""<mujoco><option timestep="0.002"/><worldbody>
        <geom type="plane" size="10 10 1"/><body pos="{pos}"><freejoint/>{geom}</body></worldbody></mujoco>""")
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    return mjm


def test_a_spinning_ball_stops_like_mujocos():
    """condim 4: the torsional friction brakes a ball spinning about the vertical."""
    mjm = _single('<geom type="sphere" size="0.1" condim="4" friction="1 0.05 0"/>', "0 0 0.1")

    def spin(mjd):
        mjd.qvel[5] = 20.0

    qvel = {}
    for seconds in (0.05, 0.3):
        mjd = mujoco.MjData(mjm)
        spin(mjd)
        sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
        sim.qvel = torch.as_tensor(mjd.qvel[None])
        steps = int(round(seconds / mjm.opt.timestep))
        for _ in range(steps):
            mujoco.mj_step(mjm, mjd)
        sim.step(steps)
        qvel[seconds] = (mjd.qvel[5], sim.qvel[0, 5].item())
    assert 0.5 < qvel[0.05][0] / 20.0 < 0.99, "the spin should slow visibly, not stop at once"
    for ref, ours in qvel.values():
        assert abs(ours - ref) < 1e-6 * 20.0, f"spin {ours:.6f} rad/s, MuJoCo {ref:.6f}"


def test_a_rolling_ball_stops_like_mujocos():
    """condim 6: rolling friction brakes a rolling ball (condim 3 would let it roll on)."""
    mjm = _single('<geom type="sphere" size="0.1" condim="6" friction="1 0.005 0.02"/>', "0 0 0.1")

    def push(mjd):
        mjd.qvel[0] = 1.0
        mjd.qvel[4] = 10.0  # rolling without slipping: v = omega r

    ref, ours = simulate(mjm, 1.0, push, dtype="float64")
    assert 0.05 < ref[0] < 0.9, f"the ball should roll and be braked ({ref[0]:.3f} m)"
    assert abs(ours[0] - ref[0]) < 1e-6, f"rolled {ours[0]:.6f} m, MuJoCo {ref[0]:.6f} m"


def test_gradients_through_torsional_and_rolling_contacts(rng):
    """d (a random linear function of the next state) / d (state) against central differences, on
    24 random coordinates, through one Euler step with condim 3, 4 and 6 contacts."""
    from simrl import diff_step

    mjm = mujoco.MjModel.from_xml_string(SCENE)
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)  # the solution to rounding: crisp differences
    qpos = np.tile(mjm.qpos0, (2, 1))
    for b in range(5):  # every geom pressed 5 mm into the floor
        qpos[:, 7 * b + 2] -= 0.005
    qvel = rng.normal(0.0, 0.3, (2, mjm.nv))
    sim.qpos, sim.qvel = torch.tensor(qpos), torch.tensor(qvel)
    sim.forward()
    edges = sim.data.efc_type.numpy() == 6
    assert ((sim.efc_force.numpy() > 0) & edges).sum(axis=1).min() > 10, "contacts with friction"

    gen = torch.Generator().manual_seed(0)
    wq, wv = torch.randn(2, mjm.nq, generator=gen, dtype=torch.float64), torch.randn(2, mjm.nv, generator=gen,
                                                                                        dtype=torch.float64)
    ctrl = torch.zeros(2, 0, dtype=torch.float64)

    def loss(q0, v0):
        q1, v1 = diff_step(sim, q0, v0, ctrl)
        return (q1 * wq).sum() + (v1 * wv).sum()

    q0, v0 = torch.tensor(qpos, requires_grad=True), torch.tensor(qvel, requires_grad=True)
    loss(q0, v0).backward()
    x = torch.cat([torch.tensor(qpos).ravel(), torch.tensor(qvel).ravel()])
    g = torch.cat([q0.grad.ravel(), v0.grad.ravel()])
    picks = np.random.default_rng(3).choice(x.numel(), 24, replace=False)
    eps, fd = 1e-6, []
    for i in picks:
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            with torch.no_grad():
                values.append(loss(y[:qpos.size].reshape(qpos.shape), y[qpos.size:].reshape(qvel.shape)).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    error = ((g[picks] - fd).norm() / fd.norm()).item()
    assert error < 1e-5, f"relative gradient error {error:.2e}"
