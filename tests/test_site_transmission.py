"""Site transmissions (`<motor site=...>`, `<general site=... refsite=...>`; mj_transmission's
mjTRN_SITE) against MuJoCo 4.0: actuator length, velocity and moment, the forces, qacc,
trajectories under Euler, RK4 and implicitfast (whose qDeriv gains the site actuators'
moment' force_vel moment), both schedules bit for bit, a per-world gear, and diff_step's
gradients against central differences.

The model: a free-flying base with two thrusters (site transmissions without a reference site,
one with a tilted site frame and a six-component gear), a branched arm under it, and actuators
that act between sites: on one chain (tip relative to mid: the shared dofs are left out), on two
branches (tip relative to tip2), and relative to a site of the world; translation, rotation and
both; with velocity-dependent gains and biases."""

import mujoco
import numpy as np
import pytest
import torch
from conftest import assert_qacc_matches_mujoco
from test_schedule import assert_same_data, run

from simrl import Sim, diff_step

XML = """
<mujoco model="site transmissions">
  <option timestep="0.002" integrator="implicitfast"/>
  <default><joint armature="0.01" damping="0.05"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 0.1"/>
    <site name="world_ref" pos="0.3 -0.2 0.5" quat="0.9 0.1 0.3 -0.2"/>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.02" mass="0.5"/>
      <site name="rotor0" pos="0.1 0.1 0" quat="0.95 0.2 0 0.1"/>
      <site name="rotor1" pos="-0.1 0.1 0"/>
      <body name="link1" pos="0 0 -0.05">
        <joint name="j1" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.5"/>
        <site name="mid" pos="0 0 -0.1" quat="0.8 0 0.6 0"/>
        <body name="link2" pos="0 0 -0.2">
          <joint name="j2" type="hinge" axis="1 0 0"/>
          <joint name="j3" type="slide" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0 0 -0.2" size="0.03" mass="0.5"/>
          <site name="tip" pos="0.02 0 -0.2" quat="0.7 0.1 -0.7 0.2"/>
        </body>
        <body name="link3" pos="0 0.15 -0.2">
          <joint name="j4" type="ball"/>
          <geom type="sphere" size="0.05" mass="0.3"/>
          <site name="tip2" pos="0.05 0.02 0" quat="0.5 0.5 -0.5 0.5"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <motor name="thrust0" site="rotor0" gear="0 0 1 0 0 0.1"/>
    <motor name="thrust1" site="rotor1" gear="0.3 -0.2 1 0.1 0.2 -0.1"/>
    <general name="tip_pos" site="tip" refsite="mid" gear="1 0.5 -0.3 0 0 0" biastype="affine"
             biasprm="0 -10 -2"/>
    <general name="tip_rot" site="tip" refsite="mid" gear="0 0 0 0.2 -1 0.5" biastype="affine"
             biasprm="0 -3 -0.5" gaintype="affine" gainprm="2 0 -0.3"/>
    <general name="tip2_world" site="tip2" refsite="world_ref" gear="1 -1 0.5 0.3 0.2 0.1"/>
    <general name="tip_tip2" site="tip" refsite="tip2" gear="0.4 0.1 0.2 -0.5 0.3 0.8" biastype="affine"
             biasprm="0 0 -1"/>
    <motor name="hinge" joint="j1" gear="2"/>
  </actuator>
  <sensor>
    <actuatorpos actuator="tip_rot"/><actuatorvel actuator="tip_tip2"/><actuatorfrc actuator="thrust1"/>
    <jointactuatorfrc joint="j2"/>
  </sensor>
</mujoco>
"""

SITE = mujoco.mjtTrn.mjTRN_SITE


def model(integrator: str = "implicitfast") -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(XML)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    return mjm


def random_states(mjm, n, seed=0):
    rng = np.random.default_rng(seed)
    qpos = []
    for _ in range(n):
        q = mjm.qpos0 + 0.3 * rng.standard_normal(mjm.nq)
        for start in (3, 10):  # the free joint's and the ball joint's quaternions
            q[start:start + 4] /= np.linalg.norm(q[start:start + 4])
        qpos.append(q)
    return np.stack(qpos), rng.standard_normal((n, mjm.nv)), rng.uniform(-1, 1, (n, mjm.nu))


def simrl_forward(mjm, states, dtype="float64"):
    sim = Sim.from_model(mjm, num_worlds=len(states[0]), dtype=dtype)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in states)
    sim.forward()
    return sim


def mujoco_forward(mjm, qpos, qvel, ctrl):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:], md.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, md)
    return md


def test_model_exercises_every_case():
    """Sites with and without a reference; a reference on the same chain, on another branch, on
    the world; gears of translation, rotation and both."""
    mjm = model()
    site = [a for a in range(mjm.nu) if mjm.actuator_trntype[a] == SITE]
    refs = [int(mjm.actuator_trnid[a, 1]) for a in site]
    assert len(site) == 6 and refs.count(-1) == 2
    assert 0 in [int(mjm.site_bodyid[r]) for r in refs if r >= 0]


def test_transmission_matches_mujoco():
    """Per site actuator, for 8 random states (float64): actuator_length, actuator_velocity,
    the moment row (mjData.actuator_moment), qfrc_actuator, sensordata (measured ~1e-15 relative)."""
    mjm = model()
    states = random_states(mjm, 8)
    sim = simrl_forward(mjm, states)
    site = [a for a in range(mjm.nu) if mjm.actuator_trntype[a] == SITE]
    for w in range(8):
        md = mujoco_forward(mjm, *(x[w] for x in states))
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind)
        for name, ours, ref in (("actuator_length", sim.view("actuator_length")[w], md.actuator_length),
                                ("actuator_velocity", sim.view("actuator_velocity")[w], md.actuator_velocity),
                                ("actuator_moment", sim.view("actuator_moment")[w][site], moment[site]),
                                ("qfrc_actuator", sim.view("qfrc_actuator")[w], md.qfrc_actuator),
                                ("sensordata", sim.sensordata[w], md.sensordata)):
            err = np.abs(ours.numpy() - ref).max() / max(1.0, np.abs(ref).max())
            assert err < 1e-12, f"world {w} {name}: {err:.2e}"


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
def test_qacc_matches_mujoco(dtype, tol):
    """qacc for random states (measured: float64 2.5e-14 relative to |qacc|); MuJoCo with the site
    actuators' gears zeroed misses by far more."""
    mjm = model()
    states = random_states(mjm, 8, seed=1)
    sim = simrl_forward(mjm, states, dtype)
    inert = model()
    inert.actuator_gear[inert.actuator_trntype == SITE] = 0
    assert_qacc_matches_mujoco(sim, mjm, inert, states, tol)


def trajectory(mjm, dtype, steps=200, seed=2):
    """The largest qpos difference between simrl and mj_step over `steps` steps of random controls
    from random states (3 worlds)."""
    qpos, qvel, _ = random_states(mjm, 3, seed)
    rng = np.random.default_rng(seed)
    sim = Sim.from_model(mjm, num_worlds=3, dtype=dtype)
    sim.qpos, sim.qvel = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in (qpos, qvel))
    datas = [mujoco.MjData(mjm) for _ in range(3)]
    for md, q, v in zip(datas, qpos, qvel, strict=True):
        md.qpos[:], md.qvel[:] = q, v
    worst = 0.0
    for _ in range(steps):
        ctrl = rng.uniform(-1, 1, (3, mjm.nu))
        sim.ctrl = torch.as_tensor(ctrl, dtype=sim.torch_dtype)
        sim.step()
        for md, c in zip(datas, ctrl, strict=True):
            md.ctrl[:] = c
            mujoco.mj_step(mjm, md)
        worst = max(worst, np.abs(sim.qpos.numpy() - np.stack([md.qpos for md in datas])).max())
    print(f"{dtype}: max qpos difference {worst:.2e}")
    return worst


@pytest.mark.parametrize("integrator,dtype,tol", [("Euler", "float64", 1e-8), ("RK4", "float64", 1e-8),
                                                  ("implicitfast", "float64", 1e-8), ("implicitfast", "float32", 1e-3),
                                                  ("Euler", "float32", 1e-3)])
def test_trajectory_matches_mujoco(integrator, dtype, tol):
    """qpos of every step of 200 (measured: float64 <= 6e-14, float32 <= 1.3e-6)."""
    worst = trajectory(model(integrator), dtype)
    assert worst < tol, f"max qpos difference {worst:.2e}"


def test_implicitfast_uses_the_site_actuators_velocity_derivative():
    """Under implicitfast the velocity-dependent site actuators (kv biases, an affine gain) enter
    M - h qDeriv: the trajectory above matches MuJoCo's implicitfast to 1e-8, and MuJoCo's Euler
    (implicit in the dof damping only, so it differs from implicitfast only by the actuators'
    term here) is far from it."""
    mjm, euler = model("implicitfast"), model("Euler")
    qpos, qvel, _ = random_states(mjm, 1, 5)
    ends = []
    for m in (mjm, euler):
        md = mujoco.MjData(m)
        md.qpos[:], md.qvel[:], md.ctrl[:] = qpos[0], qvel[0], 0.5
        mujoco.mj_step(m, md, 100)
        ends.append(md.qpos.copy())
    assert np.abs(ends[0] - ends[1]).max() > 1e-4
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos, sim.qvel = torch.as_tensor(qpos), torch.as_tensor(qvel)
    sim.ctrl[:] = 0.5
    sim.step(100)
    assert np.abs(sim.qpos[0].numpy() - ends[0]).max() < 1e-10


def test_per_world_gear():
    """A world's actuator_gear is the first gear component of a site transmission (as
    mujoco_sim.MujocoSim sets it): world 1 with the thrusters' and tip_tip2's gear[0] changed
    matches MuJoCo with those gears."""
    mjm = model()
    states = random_states(mjm, 2, seed=4)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    gear = sim.per_world_param("actuator_gear")
    changed = [0, 1, 5]
    gear[1, changed] = torch.tensor([0.7, -0.4, 1.3], dtype=torch.float64)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in states)
    sim.forward()
    other = model()
    other.actuator_gear[changed, 0] = [0.7, -0.4, 1.3]
    for w, m in ((0, model()), (1, other)):
        md = mujoco_forward(m, *(x[w] for x in states))
        for ours, ref in ((sim.view("actuator_length")[w], md.actuator_length), (sim.qacc[w], md.qacc)):
            assert np.abs(ours.numpy() - ref).max() < 1e-10 * max(1.0, np.abs(ref).max())
    assert np.abs(sim.qacc[1].numpy() - mujoco_forward(model(), *(x[1] for x in states)).qacc).max() > 1e-3


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    assert_same_data(run(model(), "fused", dtype, 20), run(model(), "wide", dtype, 20))


@pytest.mark.parametrize("integrator", ["implicitfast", "RK4"])
def test_gradients_against_finite_differences(integrator):
    """d (a random linear function of the state after 2 steps) / d (qpos, qvel, ctrl,
    actuator_gain) against central differences (float64)."""
    mjm = model(integrator)
    W = 2
    qpos, qvel, ctrl = random_states(mjm, W, seed=3)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)
    gain = np.tile(mjm.actuator_gainprm[:, 0], (W, 1))

    def loss(q0, v0, c0, g):
        q1, v1 = diff_step(sim, q0, v0, c0, {"actuator_gain": g}, substeps=2)
        return (q1 * wq).sum() + (v1 * wv).sum()

    inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl, gain)]
    loss(*inputs).backward()
    x = torch.cat([t.detach().ravel() for t in inputs])
    ad = torch.cat([t.grad.ravel() for t in inputs])
    sizes = [t.numel() for t in inputs]
    eps, fd = 1e-6, []
    for i in range(x.numel()):
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            parts = [p.reshape(t.shape) for p, t in zip(torch.split(y, sizes), inputs, strict=True)]
            with torch.no_grad():
                values.append(loss(*parts).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    err = ((ad - fd).norm() / fd.norm()).item()
    print(f"{integrator}: relative gradient error {err:.2e}")
    assert err < 1e-6, f"relative gradient error {err:.2e}"
    assert (ad - fd).abs().max().item() < 1e-5 * max(1.0, fd.abs().max().item())
