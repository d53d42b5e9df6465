"""Tendons against MuJoCo: fixed tendons and spatial tendons through sites and a pulley, with
limits, springs with a dead band, dampers, friction loss, armature (on one chain, across trees,
on spatial tendons with their bias force), tendon equality, tendon
transmissions and the tendon and limit sensors. Lengths, Jacobians, forces, constraint rows and
qacc for random states; trajectories with Euler, RK4 and implicitfast; both schedules bit for
bit; gradients of the differentiable step against finite differences."""

import mujoco
import numpy as np
import pytest
import torch
from conftest import assert_qacc_matches_mujoco
from test_schedule import assert_same_data, reverse_thread_order, run

from simrl import Sim, diff_step

XML = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <site name="anchor" pos="0.1 0 1.3"/>
    <site name="anchor2" pos="-0.3 0.1 1.2"/>
    <body name="a" pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.05"/>
      <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
      <site name="sa" pos="0.2 0 0.05"/>
      <body name="b" pos="0.4 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0" size="0.04"/>
        <site name="sb" pos="0.3 0.02 0.04"/>
        <body name="c" pos="0.4 0 0">
          <joint name="s3" type="slide" axis="1 0 0" range="-0.1 0.1"/>
          <geom type="box" size="0.05 0.05 0.05"/>
          <site name="sc" pos="0.05 0 0"/>
        </body>
      </body>
    </body>
    <body name="d" pos="0 0.6 1">
      <joint name="h4" type="hinge" axis="1 0 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
      <site name="sd" pos="0 0 -0.3"/>
      <body name="e" pos="0 0 -0.3">
        <joint name="h5" type="hinge" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <site name="se" pos="0 0.03 -0.25"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="couple" limited="true" range="-0.4 0.3" stiffness="2" springlength="-0.05 0.05" damping="0.3"
           frictionloss="0.05" armature="0.05">
      <joint joint="h1" coef="1"/>
      <joint joint="h4" coef="-0.5"/>
    </fixed>
    <fixed name="chain" armature="0.02" stiffness="1">
      <joint joint="h4" coef="0.7"/>
      <joint joint="h5" coef="0.3"/>
    </fixed>
    <spatial name="cable" limited="true" range="0.1 0.75" stiffness="5" damping="0.2" frictionloss="0.02"
             armature="0.03">
      <site site="anchor"/>
      <site site="sa"/>
      <site site="sb"/>
      <pulley divisor="2"/>
      <site site="sb"/>
      <site site="sc"/>
    </spatial>
    <spatial name="cross" damping="0.1" armature="0.04">
      <site site="anchor2"/>
      <site site="sd"/>
      <site site="se"/>
    </spatial>
  </tendon>
  <equality>
    <tendon tendon1="cross" tendon2="chain" polycoef="0 0.5 0.1 0 0" solref="0.05 1"/>
  </equality>
  <actuator>
    <motor name="m_couple" tendon="couple" gear="2" ctrlrange="-1 1"/>
    <position name="p_cable" tendon="cable" kp="20" ctrlrange="0.2 0.7"/>
    <motor name="m_h2" joint="h2" gear="1"/>
  </actuator>
  <sensor>
    <tendonpos tendon="cable"/>
    <tendonvel tendon="couple"/>
    <actuatorpos actuator="p_cable"/>
    <actuatorfrc actuator="m_couple"/>
    <tendonactuatorfrc tendon="couple"/>
    <tendonlimitpos tendon="cable"/>
    <tendonlimitvel tendon="cable"/>
    <tendonlimitfrc tendon="cable"/>
    <jointlimitpos joint="s3"/>
    <jointlimitvel joint="s3"/>
    <jointlimitfrc joint="s3"/>
  </sensor>
</mujoco>"""


@pytest.fixture(scope="module")
def mjm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(XML)


def random_states(mjm, n, seed=0):
    rng = np.random.default_rng(seed)
    qpos = np.stack([mjm.qpos0 + 0.3 * rng.standard_normal(mjm.nq) for _ in range(n)])
    return qpos, 0.5 * rng.standard_normal((n, mjm.nv)), rng.uniform(-1, 1, (n, mjm.nu))


def mujoco_forward(mjm, qpos, qvel, ctrl):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:], md.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, dtype, schedule="auto"):
    qpos, qvel, ctrl = states
    sim = Sim.from_model(mjm, num_worlds=len(qpos), dtype=dtype, schedule=schedule)
    sim.qpos = torch.as_tensor(qpos, dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(qvel, dtype=sim.torch_dtype)
    sim.ctrl = torch.as_tensor(ctrl, dtype=sim.torch_dtype)
    sim.forward()
    return sim


def dense(mjm, md, sparse, rownnz, rowadr, colind, rows):
    out = np.zeros((rows, mjm.nv))
    mujoco.mju_sparse2dense(out, sparse, rownnz, rowadr, colind)
    return out


def test_tendons_match_mujoco(mjm):
    """ten_length, ten_J, ten_velocity, the passive and actuator forces through the tendons, M with
    the tendon armature, the sensors, and every constraint row (MuJoCo's order: equality, dof and
    tendon friction, joint and tendon limits) for random states, float64."""
    states = random_states(mjm, 8)
    sim = simrl_forward(mjm, states, "float64")
    limit_rows = limit_sensors = 0
    for w in range(8):
        md = mujoco_forward(mjm, *(x[w] for x in states))
        ten_J = dense(mjm, md, md.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind, mjm.ntendon)
        M = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, md, M)
        for name, ref in (("ten_length", md.ten_length), ("ten_J", ten_J), ("ten_velocity", md.ten_velocity),
                          ("qfrc_spring", md.qfrc_spring), ("qfrc_damper", md.qfrc_damper),
                          ("actuator_length", md.actuator_length), ("actuator_velocity", md.actuator_velocity),
                          ("qfrc_actuator", md.qfrc_actuator), ("qM", M), ("qfrc_bias", md.qfrc_bias),
                          ("sensordata", md.sensordata)):
            ours = sim.view(name)[w].numpy()
            # the limit force sensors carry the solver's convergence (efc_force below)
            tol = 1e-9 if name == "sensordata" else 1e-12
            assert np.abs(ours - ref).max() < tol * max(1.0, np.abs(ref).max()), name
        limit_sensors += int(np.any(md.sensordata[-6:] != 0))
        # the rows other than contacts MuJoCo made, matched by type and object to simrl's active
        # rows, in order
        s = sim.model.struct
        rows = [r for r in range(s.nefc_eq + s.nefc_friction + s.nefc_limit) if sim.view("efc_active")[w, r]]
        mine = [r for r in range(md.nefc) if md.efc_type[r] < int(mujoco.mjtConstraint.mjCNSTR_CONTACT_FRICTIONLESS)]
        assert list(s.efc_type.numpy()[rows]) == list(md.efc_type[mine])
        assert list(s.efc_id.numpy()[rows]) == list(md.efc_id[mine])
        limit_rows += int(np.sum(md.efc_type == int(mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON)))
        efc_J = md.efc_J.reshape(md.nefc, mjm.nv)
        if mujoco.mj_isSparse(mjm):
            efc_J = dense(mjm, md, md.efc_J, md.efc_J_rownnz, md.efc_J_rowadr, md.efc_J_colind, md.nefc)
        for name, ref in (("efc_J", efc_J[mine]), ("efc_pos", md.efc_pos[mine]), ("efc_R", md.efc_R[mine]),
                          ("efc_aref", md.efc_aref[mine]), ("efc_force", md.efc_force[mine])):
            ours = sim.view(name)[w].numpy()[rows]
            assert np.abs(ours - ref).max() < 1e-9 * max(1.0, np.abs(ref).max()), name
    assert limit_rows > 0, "some state should have a tendon at its limit"
    assert limit_sensors > 0, "some state should have a limit sensor reading a row"
    assert {2, 4} <= set(int(t) for t in sim.model.struct.efc_type.numpy())


def test_spatial_tendon_armature_bias(mjm):
    """The spatial tendons' armature adds armature (ten_Jdot qvel) ten_J' to qfrc_bias
    (mj_tendonBias): simrl's qfrc_bias is MuJoCo's within 1e-12 relative (test above), and MuJoCo
    without the spatial tendons' armature differs from it by far more (the term is exercised);
    the across-tree fixed tendon's coupling is dropped from M as MuJoCo drops it."""
    states = random_states(mjm, 4, seed=7)
    sim = simrl_forward(mjm, states, "float64")
    plain = mujoco.MjModel.from_xml_string(XML)
    spatial = plain.wrap_type[plain.tendon_adr] != int(mujoco.mjtWrap.mjWRAP_JOINT)
    plain.tendon_armature[spatial] = 0
    h1, h4 = (int(mjm.jnt_dofadr[mjm.joint(n).id]) for n in ("h1", "h4"))
    for w in range(4):
        ours = sim.view("qfrc_bias")[w].numpy()
        ref = mujoco_forward(mjm, *(x[w] for x in states)).qfrc_bias
        other = mujoco_forward(plain, *(x[w] for x in states)).qfrc_bias
        assert np.abs(ours - ref).max() < 1e-12 * max(1.0, np.abs(ref).max())
        assert np.abs(ours - other).max() > 1e-4
        assert sim.view("qM")[w, h1, h4] == 0


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
def test_qacc_matches_mujoco(mjm, dtype, tol):
    """qacc for random states with every tendon feature in play (measured: float64 6e-15,
    float32 3e-6 relative to |qacc|); MuJoCo with inert tendons misses by far."""
    states = random_states(mjm, 8, seed=1)
    sim = simrl_forward(mjm, states, dtype)
    # the tendons made inert: no springs, dampers, friction, limits or equality
    slack = mujoco.MjModel.from_xml_string(XML)
    for name in ("tendon_stiffness", "tendon_damping", "tendon_frictionloss", "tendon_limited", "tendon_armature",
                 "eq_active0"):
        getattr(slack, name)[:] = 0
    assert_qacc_matches_mujoco(sim, mjm, slack, states, tol)


def trajectory(mjm, dtype, steps, seed=2):
    """qpos of simrl and MuJoCo over `steps` steps of random controls from a random state."""
    rng = np.random.default_rng(seed)
    md = mujoco.MjData(mjm)
    md.qpos[:] = mjm.qpos0 + 0.2 * rng.standard_normal(mjm.nq)
    sim = Sim.from_model(mjm, num_worlds=1, dtype=dtype)
    sim.qpos = torch.as_tensor(md.qpos[None], dtype=sim.torch_dtype)
    worst, moved = 0.0, 0.0
    for _ in range(steps):
        md.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
        sim.ctrl = torch.as_tensor(md.ctrl[None], dtype=sim.torch_dtype)
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
        moved = max(moved, np.abs(md.qpos - mjm.qpos0).max())
    return worst, moved


@pytest.mark.parametrize("integrator,dtype,tol", [("Euler", "float64", 1e-8), ("RK4", "float64", 1e-8),
                                                  ("implicitfast", "float64", 1e-8), ("Euler", "float32", 1e-3)])
def test_trajectory_matches_mujoco(integrator, dtype, tol):
    """200 steps with random controls: qpos of every step (implicitfast with the tendon dampers'
    and the tendon actuators' velocity derivative)."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    worst, moved = trajectory(mjm, dtype, 200)
    print(f"{integrator} {dtype}: max qpos difference {worst:.2e}")
    assert moved > 0.05
    assert worst < tol, f"max qpos difference {worst:.2e}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(mjm, dtype):
    assert_same_data(run(mjm, "fused", dtype, 20), run(mjm, "wide", dtype, 20))


def test_wide_threads_in_any_order(mjm, monkeypatch):
    """The wide step with every element launch's threads in reverse order
    (tests/test_schedule.py::reverse_thread_order): the same bits."""
    ordered = run(mjm, "wide", "float64", 20)
    reverse_thread_order(monkeypatch)
    assert_same_data(ordered, run(mjm, "wide", "float64", 20))


def test_gradients_against_finite_differences(mjm):
    """d (a random linear function of the next state) / d (qpos, qvel, ctrl) through one step,
    against central differences (float64)."""
    W = 2
    qpos, qvel, ctrl = random_states(mjm, W, seed=3)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)

    def loss(q0, v0, c0):
        q1, v1 = diff_step(sim, q0, v0, c0)
        return (q1 * wq).sum() + (v1 * wv).sum()

    inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl)]
    loss(*inputs).backward()
    x = torch.cat([t.detach().ravel() for t in inputs])
    g = torch.cat([t.grad.ravel() for t in inputs])
    sizes = [t.numel() for t in inputs]

    def unpack(y):
        parts = torch.split(y, sizes)
        return [p.reshape(t.shape) for p, t in zip(parts, inputs, strict=True)]

    eps, fd = 1e-6, []
    for i in range(x.numel()):
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            with torch.no_grad():
                values.append(loss(*unpack(y)).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    error = ((g - fd).norm() / fd.norm()).item()
    assert error < 1e-5, f"relative gradient error {error:.2e}"


# A tendon's actuator force limit (actuatorfrclimited, MuJoCo's tendon_actfrcrange): four
# actuators on tendon "t" (a motor, a position servo with its own forcerange, a filter with
# actearly), one on tendon "u" without the limit
LIMIT_XML = """
<mujoco>
  <option timestep="0.005"/>
  <worldbody>
    <body name="b1" pos="0 0 1">
      <joint name="j1" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.5" size="0.05" mass="1"/>
      <body name="b2" pos="0 0 -0.5">
        <joint name="j2" type="hinge" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.05" mass="1"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t" actuatorfrclimited="true" actuatorfrcrange="-0.6 0.8">
      <joint joint="j1" coef="1"/>
      <joint joint="j2" coef="-0.5"/>
    </fixed>
    <fixed name="u"><joint joint="j2" coef="1"/></fixed>
  </tendon>
  <actuator>
    <motor name="m" tendon="t" gear="2"/>
    <position name="p" tendon="t" kp="5" kv="0.5" forcelimited="true" forcerange="-0.5 0.5"/>
    <general name="f" tendon="t" dyntype="filter" dynprm="0.05" actearly="true" gainprm="1.5"/>
    <motor name="o" tendon="u"/>
  </actuator>
  <sensor>
    <actuatorfrc actuator="m"/>
    <tendonactuatorfrc tendon="t"/>
  </sensor>
</mujoco>"""


def limit_model(integrator="Euler", limited=True):
    mjm = mujoco.MjModel.from_xml_string(LIMIT_XML)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    mjm.tendon_actfrclimited[0] = int(limited)
    return mjm


def limit_states(mjm, n, seed):
    rng = np.random.default_rng(seed)
    return (mjm.qpos0 + 0.4 * rng.standard_normal((n, mjm.nq)), rng.standard_normal((n, mjm.nv)),
            rng.uniform(-1, 1, (n, mjm.nu)), rng.uniform(-1, 1, (n, mjm.na)))


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_tendon_force_limit_matches_mujoco(schedule):
    """The forces of the actuators on a tendon with actuatorfrclimited, scaled so that their
    total lies in actuatorfrcrange before each actuator's forcerange (mj_fwdActuation), their
    sensors and qacc, against MuJoCo for random states (float64); the states put the total
    below, inside and above the range, and MuJoCo without the limit differs."""
    mjm, free = limit_model(), limit_model(limited=False)
    qpos, qvel, ctrl, act = limit_states(mjm, 16, seed=0)
    sim = Sim.from_model(mjm, num_worlds=16, dtype="float64", schedule=schedule)
    for name, x in (("qpos", qpos), ("qvel", qvel), ("ctrl", ctrl), ("act", act)):
        setattr(sim, name, torch.as_tensor(x))
    sim.forward()
    below = above = inside = 0
    for w in range(16):
        ref, other = mujoco.MjData(mjm), mujoco.MjData(free)
        for md, model in ((ref, mjm), (other, free)):
            md.qpos[:], md.qvel[:], md.ctrl[:], md.act[:] = qpos[w], qvel[w], ctrl[w], act[w]
            mujoco.mj_forward(model, md)
        total = other.actuator_force[:3].sum()  # the pre-limit total (p within its forcerange or not)
        below, above, inside = below + (total < -0.6), above + (total > 0.8), inside + (-0.6 <= total <= 0.8)
        for name in ("actuator_force", "qfrc_actuator", "sensordata", "qacc"):
            ours = sim.view(name).numpy()[w] if name != "qacc" else sim.qacc.numpy()[w]
            assert np.allclose(ours, getattr(ref, name), rtol=1e-12, atol=1e-12), (w, name)
        assert -0.6 - 1e-12 <= ref.sensordata[1] or ref.actuator_force[1] in (-0.5, 0.5)
    assert below >= 2 and above >= 2 and inside >= 2, (below, above, inside)
    # without the limit MuJoCo's forces differ where the total is outside the range
    assert np.abs(limit_forces(free, qpos, qvel, ctrl, act) - limit_forces(mjm, qpos, qvel, ctrl, act)).max() > 0.1


def limit_forces(mjm, qpos, qvel, ctrl, act):
    out = []
    for w in range(len(qpos)):
        md = mujoco.MjData(mjm)
        md.qpos[:], md.qvel[:], md.ctrl[:], md.act[:] = qpos[w], qvel[w], ctrl[w], act[w]
        mujoco.mj_forward(mjm, md)
        out.append(md.actuator_force.copy())
    return np.array(out)


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_tendon_force_limit_trajectory(integrator):
    """200 steps of random controls with the tendon's limit in play, qpos of every step within
    1e-9 of MuJoCo's (implicitfast: MuJoCo 4.0 leaves out the velocity derivatives of the
    actuators on a tendon whose limit holds their total; with them the trajectory is 1e-2 away)."""
    mjm = limit_model(integrator)
    rng = np.random.default_rng(4)
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    worst, held = 0.0, 0
    for _ in range(200):
        md.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
        sim.ctrl = torch.as_tensor(md.ctrl[None])
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
        held += not (-0.6 < md.actuator_force[:3].sum() < 0.8) or abs(md.actuator_force[1]) == 0.5
    print(f"{integrator}: max qpos difference {worst:.2e}; {held} steps at a limit")
    assert held >= 20
    assert worst < 1e-9, f"max qpos difference {worst:.2e}"


def test_tendon_force_limit_schedules_bit_for_bit(monkeypatch):
    """Fused and wide (threads in reverse order too): the same bits with the limit in play."""
    mjm = limit_model("implicitfast")
    fused = run(mjm, "fused", "float64", 20)
    assert_same_data(fused, run(mjm, "wide", "float64", 20))
    reverse_thread_order(monkeypatch)
    assert_same_data(fused, run(mjm, "wide", "float64", 20))


def assert_step_gradients(sim, qpos, qvel, ctrl, act, seed, tol=1e-6):
    """d (a random linear function of one diff_step's qpos, qvel and act) / d (qpos, qvel, ctrl,
    act) against central differences (float64 sims): relative error below tol for each input."""
    W = qpos.shape[0]
    gen = torch.Generator().manual_seed(seed)
    wq = torch.randn(W, qpos.shape[1], generator=gen, dtype=torch.float64)
    wv = torch.randn(W, qvel.shape[1], generator=gen, dtype=torch.float64)
    wa = torch.randn(W, act.shape[1], generator=gen, dtype=torch.float64)

    def loss(q0, v0, c0, a0):
        q1, v1, a1 = diff_step(sim, q0, v0, c0, act0=a0)
        return (q1 * wq).sum() + (v1 * wv).sum() + (a1 * wa).sum()

    inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl, act)]
    loss(*inputs).backward()
    eps = 1e-6
    for t in range(4):
        x, g = inputs[t].detach(), inputs[t].grad
        fd = torch.zeros_like(x)
        for i in np.ndindex(*x.shape):
            values = []
            for sign in (1, -1):
                y = [v.detach().clone() for v in inputs]
                y[t][i] += sign * eps
                with torch.no_grad():
                    values.append(loss(*y).item())
            fd[i] = (values[0] - values[1]) / (2 * eps)
        error = ((g - fd).norm() / fd.norm()).item()
        assert error < tol, f"input {t}: relative gradient error {error:.2e}"


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_tendon_force_limit_gradients(integrator):
    """The differentiable step through the limit's scaling (worlds below, inside and above the
    range), against central differences (float64)."""
    mjm = limit_model(integrator)
    W = 4
    qpos, qvel, ctrl, act = limit_states(mjm, W, seed=5)
    ctrl[:, 0] = [-1.0, 0.0, 1.0, 0.5]  # the motor and the filter set each world's total
    act[:, 0] = [-0.5, 0.0, 0.6, 0.1]
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    totals = limit_forces(limit_model(limited=False), qpos, qvel, ctrl, act)[:, :3].sum(axis=1)
    assert (totals < -0.6).any() and (totals > 0.8).any() and ((-0.6 < totals) & (totals < 0.8)).any(), totals
    assert_step_gradients(sim, qpos, qvel, ctrl, act, seed=1)
