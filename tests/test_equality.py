"""Equality constraints (connect, weld with torquescale and relpose, body and site semantics,
joint with polycoef) against MuJoCo: the rows, qacc for random states, trajectories, per-world
eq_active, gradients against finite differences, both schedules bit for bit."""

import mujoco
import numpy as np
import pytest
import torch
from gradcheck import one_step_gradient_error
from test_schedule import assert_same_data, reverse_thread_order, run

from simrl import Sim, diff_step

XML = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body name="a" pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <body name="b" pos="0.4 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      </body>
    </body>
    <body name="c" pos="0.8 0.2 1">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
      <site name="sc" pos="0.02 0 0" quat="0.9 0.1 0.3 0"/>
    </body>
    <body name="d" pos="0 0.5 1">
      <freejoint/>
      <geom type="box" size="0.05 0.1 0.05"/>
      <site name="sd" pos="0 0.05 0"/>
    </body>
    <body name="e" pos="0.5 -0.5 0.5">
      <joint name="s1" type="slide" axis="0 0 1"/>
      <joint name="h3" type="hinge" axis="1 0 0"/>
      <geom size="0.05"/>
    </body>
    <body name="f" pos="-0.5 -0.5 1">
      <joint type="ball"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="b" body2="c" anchor="0.4 0 0"/>
    <weld body1="d" body2="a" relpose="0 0.5 0 1 0 0 0" torquescale="2"/>
    <weld site1="sc" site2="sd" solref="0.05 1"/>
    <joint joint1="s1" joint2="h3" polycoef="0.1 0.5 0.2 0.1 0.05"/>
    <joint joint1="h2" polycoef="0.2 0 0 0 0" solimp="0.8 0.95 0.01"/>
    <connect body1="f" body2="world" anchor="0 0 -0.3"/>
  </equality>
</mujoco>"""


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def model(**options) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(XML)
    for key, value in options.items():
        setattr(mjm.opt, key, value)
    return mjm


def random_states(mjm, n, rng):
    md = mujoco.MjData(mjm)
    states = []
    for _ in range(n):
        md.qpos[:] = mjm.qpos0 + 0.1 * rng.standard_normal(mjm.nq)
        mujoco.mj_normalizeQuat(mjm, md.qpos)
        states.append((md.qpos.copy(), 0.3 * rng.standard_normal(mjm.nv)))
    return states


def mujoco_forward(mjm, qpos, qvel, eq_active=None):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:] = qpos, qvel
    if eq_active is not None:
        md.eq_active[:] = eq_active
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, dtype, schedule="auto"):
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype, schedule=schedule)
    sim.qpos = torch.as_tensor(np.stack([q for q, _ in states]), dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(np.stack([v for _, v in states]), dtype=sim.torch_dtype)
    sim.forward()
    return sim


def test_rows_like_mujocos(rng):
    """Row count, residual (efc_pos), Jacobian, R and aref (with MuJoCo's Jdot qvel term) of every
    equality row, in MuJoCo's order, before the friction, limit and contact rows."""
    mjm = model()
    states = random_states(mjm, 3, rng)
    sim = simrl_forward(mjm, states, "float64")
    for w, (q, v) in enumerate(states):
        md = mujoco_forward(mjm, q, v)
        ne = md.ne
        assert ne == 3 + 6 + 6 + 1 + 1 + 3 == sim.model.struct.nefc_eq
        J = md.efc_J.reshape(md.nefc, mjm.nv)
        if mujoco.mj_isSparse(mjm):
            J = np.zeros((md.nefc, mjm.nv))
            mujoco.mju_sparse2dense(J, md.efc_J, md.efc_J_rownnz, md.efc_J_rowadr, md.efc_J_colind)
        for name, ref, tol in (("efc_pos", md.efc_pos[:ne], 1e-14), ("efc_R", md.efc_R[:ne], 1e-12),
                               ("efc_aref", md.efc_aref[:ne], 1e-10)):
            ours = sim.view(name)[w, :ne].numpy()
            err = np.abs(ours - ref).max() / max(1.0, np.abs(ref).max())
            assert err < tol, f"{name}: relative difference {err:.2e}"
        assert np.abs(sim.view("efc_J")[w, :ne].numpy() - J[:ne]).max() < 1e-13


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
def test_qacc_matches_mujoco(dtype, tol, rng):
    """qacc for random states (measured: float64 1.6e-15, float32 5e-7 relative to |qacc|),
    and the same states without the equality constraints miss by far (negative control)."""
    mjm = model()
    states = random_states(mjm, 6, rng)
    sim = simrl_forward(mjm, states, dtype)
    unconstrained = model()
    unconstrained.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EQUALITY
    for w, (q, v) in enumerate(states):
        ref = mujoco_forward(mjm, q, v).qacc
        scale = max(1.0, np.abs(ref).max())
        assert np.abs(sim.qacc[w].numpy() - ref).max() / scale < tol
        free = mujoco_forward(unconstrained, q, v).qacc
        assert np.abs(sim.qacc[w].numpy() - free).max() / scale > 1e3 * tol


def test_eq_active_per_world(rng):
    """sim.eq_active toggles constraints per world like MuJoCo's eq_active; reset restores
    eq_active0; a float tensor is refused."""
    mjm = model()
    states = random_states(mjm, 1, rng) * 3
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float64")
    assert sim.eq_active.shape == (3, mjm.neq) and bool((sim.eq_active == 1).all())
    masks = np.array([[1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0]], dtype=np.int32)
    sim.eq_active = torch.as_tensor(masks)
    sim.qpos = torch.as_tensor(np.stack([q for q, _ in states]))
    sim.qvel = torch.as_tensor(np.stack([v for _, v in states]))
    sim.forward()
    for w in range(3):
        ref = mujoco_forward(mjm, *states[w], eq_active=masks[w]).qacc
        assert np.abs(sim.qacc[w].numpy() - ref).max() < 1e-9 * max(1.0, np.abs(ref).max())
    assert not np.allclose(sim.qacc[0].numpy(), sim.qacc[1].numpy())
    with pytest.raises(TypeError, match="eq_active"):
        sim.eq_active = torch.zeros(3, mjm.neq)
    sim.reset()
    assert bool((sim.eq_active == 1).all())


def test_diff_step_honours_eq_active(rng):
    """diff_step steps with the Sim's eq_active: per world, the same qpos and qvel as Sim.step
    (float64, measured equal to 1e-16). Its step buffers come from a pool whose arrays start
    zeroed; before they took the Sim's eq_active, every equality constraint was off in diff_step
    (a world with all on then misses Sim.step's by far more than the tolerance: checked below)."""
    mjm = model()
    states = random_states(mjm, 1, rng) * 3
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float64")
    masks = np.array([[1, 1, 1, 1, 1, 1], [0, 1, 0, 1, 0, 1], [0, 0, 0, 0, 0, 0]], dtype=np.int32)
    sim.eq_active = torch.as_tensor(masks)
    qpos = torch.as_tensor(np.stack([q for q, _ in states]))
    qvel = torch.as_tensor(np.stack([v for _, v in states]))
    with torch.no_grad():
        qpos1, qvel1 = diff_step(sim, qpos, qvel, sim.ctrl.clone(), substeps=2)
    sim.qpos, sim.qvel = qpos, qvel
    sim.step(2)
    for ours, ref in ((qpos1, sim.qpos), (qvel1, sim.qvel)):
        assert (ours - ref).abs().max() < 1e-12 * max(1.0, float(ref.abs().max()))
    assert float((qvel1[0] - qvel1[2]).abs().max()) > 1e-3, "the constraints change the step"


def test_trajectory_matches_mujoco():
    """200 steps of the whole model from rest (chains pulled together, the ball-jointed pendulum
    hanging from its connect): every step's qpos in float64 (measured 1.9e-14)."""
    mjm = model()
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    worst = 0.0
    for _ in range(200):
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
    assert worst < 1e-8, f"max qpos difference {worst:.2e}"
    assert np.abs(md.qpos - mjm.qpos0).max() > 0.01, "the constraints moved the model"


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_rk4_trajectory_matches_mujoco(schedule):
    """100 RK4 steps of the whole model from rest, Newton to 1e-12 (up to 1000 iterations) in
    both engines: every step's qpos in float64 (measured 1.6e-15). Its connect and weld spin body
    c up to 50 rad/s, where RK4's stages need MuJoCo's closed-form inverse differential of exp
    (simrl.sim.rk4): with the series cut after theta^2 the figure was 8.0e-9."""
    mjm = model(integrator=mujoco.mjtIntegrator.mjINT_RK4, tolerance=1e-12, iterations=1000)
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", schedule=schedule)
    worst, spin = 0.0, 0.0
    for _ in range(100):
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
        spin = max(spin, np.linalg.norm(md.qvel[5:8]))
    assert worst < 1e-13, f"max qpos difference {worst:.2e}"
    assert spin > 30.0, "body c should spin fast"


def test_gradients_against_finite_differences(rng):
    """d (a random linear function of the next state) / d (qpos, qvel) through one step with every
    equality row active, against central differences."""
    mjm = model()
    error = one_step_gradient_error(mjm, random_states(mjm, 2, rng))
    assert error < 1e-5, f"relative gradient error {error:.2e}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    mjm = model()
    assert_same_data(run(mjm, "fused", dtype, 20), run(mjm, "wide", dtype, 20))


def test_wide_threads_in_any_order(monkeypatch):
    """The wide step with every element launch's threads in reverse order
    (tests/test_schedule.py::reverse_thread_order): the same bits."""
    mjm = model()
    ordered = run(mjm, "wide", "float64", 20)
    reverse_thread_order(monkeypatch)
    assert_same_data(ordered, run(mjm, "wide", "float64", 20))

