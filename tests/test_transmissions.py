"""Actuators on ball and free joints (`joint=` and `jointinparent=`; mj_transmission's
mjTRN_JOINT and mjTRN_JOINTINPARENT with a 3D or 6D gear) and slider-cranks (`cranksite=`,
mjTRN_SLIDERCRANK) against MuJoCo 4.0 in float64:
actuator length, velocity and moment, qfrc_actuator, sensors, qacc (with a negative control: the
same model with those actuators' gears zeroed), trajectories of 300 steps under Euler, RK4 and
implicitfast, both schedules bit for bit, and diff_step's gradients against central differences.

The models, tests/data/*.xml: ball_transmission.xml (a ball joint under a hinge and one under
it, with motor, affine and position actuators, joint and jointinparent; a free-flying body driven
by 6D gears); slidercrank.xml (an engine whose crank and piston share a turning frame's dof, and
a crank against a world slider site with a rod too short to reach in some states)."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import assert_qacc_matches_mujoco, qpos_distance, quaternion_slices
from test_schedule import assert_same_data, run

from simrl import Sim, diff_step

DATA = Path(__file__).parent / "data"
JOINT, INPARENT = mujoco.mjtTrn.mjTRN_JOINT, mujoco.mjtTrn.mjTRN_JOINTINPARENT
SLIDERCRANK = mujoco.mjtTrn.mjTRN_SLIDERCRANK
MODELS = ["ball_transmission", "slidercrank"]


def model(name: str, integrator: str | None = None) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_path(str(DATA / f"{name}.xml"))
    if integrator:
        mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    return mjm


def driven(mjm) -> np.ndarray:
    """The actuators under test: slider-cranks, and ball and free joints (a moment of several dofs)."""
    kinds = (mujoco.mjtJoint.mjJNT_BALL, mujoco.mjtJoint.mjJNT_FREE)
    return np.array([a for a in range(mjm.nu) if int(mjm.actuator_trntype[a]) == SLIDERCRANK
                     or (int(mjm.actuator_trntype[a]) in (JOINT, INPARENT)
                         and int(mjm.jnt_type[mjm.actuator_trnid[a, 0]]) in kinds)], dtype=int)


def random_states(mjm, n, seed=0):
    rng = np.random.default_rng(seed)
    qpos = mjm.qpos0 + 0.4 * rng.standard_normal((n, mjm.nq))
    for s in quaternion_slices(mjm):
        qpos[:, s] /= np.linalg.norm(qpos[:, s], axis=1, keepdims=True)
    return qpos, rng.standard_normal((n, mjm.nv)), rng.uniform(-1, 1, (n, mjm.nu))


def mujoco_forward(mjm, qpos, qvel, ctrl):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:], md.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, dtype="float64"):
    sim = Sim.from_model(mjm, num_worlds=len(states[0]), dtype=dtype)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in states)
    sim.forward()
    return sim


def test_ball_model_exercises_every_case():
    """Ball and free joints, each with joint and jointinparent; a hinge with jointinparent."""
    mjm = model("ball_transmission")
    cases = {(int(mjm.jnt_type[mjm.actuator_trnid[a, 0]]), int(mjm.actuator_trntype[a])) for a in range(mjm.nu)}
    for jnt in (mujoco.mjtJoint.mjJNT_BALL, mujoco.mjtJoint.mjJNT_FREE):
        assert {(jnt, JOINT), (jnt, INPARENT)} <= cases
    assert (mujoco.mjtJoint.mjJNT_HINGE, INPARENT) in cases


def test_slidercrank_model_exercises_every_case():
    """The engine's crank and slider chains share a dof; among the states the transmission tests
    use, the short rod reaches in some (det > 0) and not in others (det <= 0)."""
    mjm = model("slidercrank")
    engine, short = (mjm.actuator(name).id for name in ("engine", "short_rod"))
    crank, slider = (int(mjm.site_bodyid[s]) for s in mjm.actuator_trnid[engine])
    assert mjm.body_parentid[crank] == mjm.body_parentid[slider] and mjm.body_dofnum[mjm.body_parentid[crank]] == 1
    dets = []
    for state in zip(*random_states(mjm, 8), strict=True):
        md = mujoco_forward(mjm, *state)
        s, r = mjm.actuator_trnid[short]
        v = md.site_xpos[s] - md.site_xpos[r]
        av = v @ md.site_xmat[r].reshape(3, 3)[:, 2]
        dets.append(av * av + mjm.actuator_cranklength[short] ** 2 - v @ v)
    assert min(dets) < 0 < max(dets), dets


@pytest.mark.parametrize("name", MODELS)
def test_transmission_matches_mujoco(name):
    """Per actuator, for 8 random states: actuator_length, actuator_velocity, the moment rows of
    the actuators under test, qfrc_actuator and sensordata (float64, 1e-12 relative)."""
    mjm = model(name)
    states = random_states(mjm, 8)
    sim = simrl_forward(mjm, states)
    rows = driven(mjm)
    for w in range(8):
        md = mujoco_forward(mjm, *(x[w] for x in states))
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind)
        for field, ours, ref in (("actuator_length", sim.view("actuator_length")[w], md.actuator_length),
                                 ("actuator_velocity", sim.view("actuator_velocity")[w], md.actuator_velocity),
                                 ("actuator_moment", sim.view("actuator_moment")[w][rows], moment[rows]),
                                 ("qfrc_actuator", sim.view("qfrc_actuator")[w], md.qfrc_actuator),
                                 ("sensordata", sim.sensordata[w], md.sensordata)):
            err = np.abs(ours.numpy() - ref).max() / max(1.0, np.abs(ref).max())
            assert err < 1e-12, f"world {w} {field}: {err:.2e}"


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype,tol", [("float64", 1e-10), ("float32", 1e-4)])
def test_qacc_matches_mujoco(name, dtype, tol):
    """qacc for random states; MuJoCo with the tested actuators' gears zeroed misses by far more."""
    mjm = model(name)
    states = random_states(mjm, 8, seed=1)
    sim = simrl_forward(mjm, states, dtype)
    inert = model(name)
    inert.actuator_gear[driven(inert)] = 0
    assert_qacc_matches_mujoco(sim, mjm, inert, states, tol)


def trajectory(mjm, dtype, steps=300, seed=2):
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
        worst = max(worst, qpos_distance(mjm, sim.qpos.numpy(), np.stack([md.qpos for md in datas])))
    print(f"{dtype}: max qpos difference {worst:.2e}")
    return worst


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("integrator,dtype,tol", [("Euler", "float64", 1e-8), ("RK4", "float64", 1e-8),
                                                  ("implicitfast", "float64", 1e-8),
                                                  ("implicitfast", "float32", 1e-3)])
def test_trajectory_matches_mujoco(name, integrator, dtype, tol):
    """qpos of every step of 300 from random states under random controls."""
    worst = trajectory(model(name, integrator), dtype)
    assert worst < tol, f"max qpos difference {worst:.2e}"


@pytest.mark.parametrize("name", MODELS)
def test_trajectory_needs_the_transmission(name):
    """The negative control of the trajectories: with the tested actuators' gears zeroed MuJoCo
    ends elsewhere than simrl's run of the model."""
    mjm = model(name)
    inert = model(name)
    inert.actuator_gear[driven(inert)] = 0
    qpos, qvel, _ = random_states(mjm, 1, 5)
    ends = []
    for m in (mjm, inert):
        md = mujoco.MjData(m)
        md.qpos[:], md.qvel[:], md.ctrl[:] = qpos[0], qvel[0], 0.5
        mujoco.mj_step(m, md, 100)
        ends.append(md.qpos.copy())
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos, sim.qvel = torch.as_tensor(qpos), torch.as_tensor(qvel)
    sim.ctrl[:] = 0.5
    sim.step(100)
    assert qpos_distance(mjm, sim.qpos[0].numpy(), ends[0]) < 1e-10
    assert qpos_distance(mjm, sim.qpos[0].numpy(), ends[1]) > 1e-3


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(name, dtype):
    assert_same_data(run(model(name), "fused", dtype, 20), run(model(name), "wide", dtype, 20))


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("integrator", ["implicitfast", "RK4"])
def test_gradients_against_finite_differences(name, integrator):
    """d (a random linear function of the state after 2 steps) / d (qpos, qvel, ctrl) against
    central differences (float64)."""
    mjm = model(name, integrator)
    W = 2
    qpos, qvel, ctrl = random_states(mjm, W, seed=3)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)

    def loss(q0, v0, c0):
        q1, v1 = diff_step(sim, q0, v0, c0, substeps=2)
        return (q1 * wq).sum() + (v1 * wv).sum()

    inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl)]
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
