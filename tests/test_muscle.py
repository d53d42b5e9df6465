"""Muscles against MuJoCo: the muscle gain (length and velocity curves), passive force and
activation dynamics (mju_muscleGain, mju_muscleBias, mju_muscleDynamics), on tendons and a
joint, with the compiler's lengthrange and acc0 scaling, smoothed and hard switching of the time
constant. Forces, act_dot and qacc for random states that put every muscle in every part of its
curves; trajectories with Euler, implicitfast (with the muscles' velocity derivative) and RK4;
both schedules bit for bit; gradients of the differentiable step against finite differences."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from test_schedule import assert_same_data, reverse_thread_order, run
from test_tendon import assert_step_gradients

from simrl import Sim

#: three tendon muscles and a joint muscle on a two-link arm (also the static GPU report's
#: muscle model: python scripts/gpu_report.py --model tests/data/muscle_arm.xml)
XML = (Path(__file__).parent / "data" / "muscle_arm.xml").read_text()


@pytest.fixture(scope="module")
def mjm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_string(XML)


def random_states(mjm, n, seed):
    rng = np.random.default_rng(seed)
    qpos = rng.uniform(mjm.jnt_range[:, 0] - 0.1, mjm.jnt_range[:, 1] + 0.1, (n, mjm.nq))
    # speeds from 1e-4 to 6 rad/s (log-uniform): every muscle's normalized velocity in each part
    qvel = rng.choice([-1.0, 1.0], (n, mjm.nv)) * 10.0 ** rng.uniform(-4, np.log10(6), (n, mjm.nv))
    return qpos, qvel, rng.uniform(-0.3, 1.3, (n, mjm.nu)), rng.uniform(-0.1, 1.1, (n, mjm.na))


def regions(mjm, md) -> set:
    """(actuator, curve, part) of every muscle at MuJoCo's state: the parts of the length curve,
    the velocity curve and the passive force its normalized length and velocity fall in."""
    out = set()
    for a in range(mjm.nu):
        prm, lr = mjm.actuator_gainprm[a], mjm.actuator_lengthrange[a]
        L0 = (lr[1] - lr[0]) / (prm[1] - prm[0])
        L = prm[0] + (md.actuator_length[a] - lr[0]) / L0
        V = md.actuator_velocity[a] / (L0 * prm[6])
        lmin, lmax = prm[4], prm[5]
        out.add((a, "length", int(np.searchsorted([lmin, 0.5 * (lmin + 1), 1, 0.5 * (1 + lmax), lmax], L))))
        out.add((a, "velocity", int(np.searchsorted([-1, 0, prm[8] - 1], V))))
        out.add((a, "passive", int(np.searchsorted([1, 0.5 * (1 + lmax)], L))))
    return out


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_muscles_match_mujoco(mjm, schedule):
    """actuator_force, act_dot and qacc for 64 random states (float64) within 1e-10 of MuJoCo's,
    every part of every muscle's length, velocity and passive curves visited; MuJoCo with the
    muscles' time constants swapped differs in act_dot."""
    W = 64
    qpos, qvel, ctrl, act = random_states(mjm, W, seed=0)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    for name, x in (("qpos", qpos), ("qvel", qvel), ("ctrl", ctrl), ("act", act)):
        setattr(sim, name, torch.as_tensor(x))
    sim.forward()
    swapped = mujoco.MjModel.from_xml_string(XML)
    swapped.actuator_dynprm[:, [0, 1]] = swapped.actuator_dynprm[:, [1, 0]]
    seen, apart = set(), 0.0
    for w in range(W):
        md, other = mujoco.MjData(mjm), mujoco.MjData(swapped)
        for data, model in ((md, mjm), (other, swapped)):
            data.qpos[:], data.qvel[:], data.ctrl[:], data.act[:] = qpos[w], qvel[w], ctrl[w], act[w]
            mujoco.mj_forward(model, data)
        seen |= regions(mjm, md)
        apart = max(apart, np.abs(other.act_dot - md.act_dot).max())
        for name in ("actuator_force", "act_dot", "qacc", "sensordata"):
            ours = sim.qacc.numpy()[w] if name == "qacc" else sim.view(name).numpy()[w]
            ref = getattr(md, name)
            atol = 1e-10 * max(1.0, np.abs(ref).max())
            assert np.allclose(ours, ref, rtol=1e-10, atol=atol), (w, name, ours, ref)
    missing = {(a, c, k) for a in range(mjm.nu) for c, n in (("length", 6), ("velocity", 4), ("passive", 3))
               for k in range(n)} - seen
    assert not missing, f"curve parts no state visited: {sorted(missing)}"
    assert apart > 1.0


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_muscle_trajectory_matches_mujoco(integrator):
    """500 steps of random excitations from a random state: qpos and act of every step within
    1e-9 of MuJoCo's (implicitfast with mjd_muscleGain_vel's derivative in qDeriv)."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    rng = np.random.default_rng(3)
    md = mujoco.MjData(mjm)
    md.qpos[:] = [0.3, -0.5]
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos = torch.as_tensor(md.qpos[None])
    worst, moved = 0.0, 0.0
    for k in range(500):
        if k % 25 == 0:
            md.ctrl[:] = rng.uniform(0, 1, mjm.nu)
            sim.ctrl = torch.as_tensor(md.ctrl[None])
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos.numpy()[0] - md.qpos).max(), np.abs(sim.act.numpy()[0] - md.act).max())
        moved = max(moved, np.abs(md.qpos - [0.3, -0.5]).max())
    print(f"{integrator}: max qpos/act difference {worst:.2e}, moved {moved:.2f} rad")
    assert moved > 0.3
    assert worst < 1e-9, f"max difference {worst:.2e}"


def test_muscle_schedules_bit_for_bit(mjm, monkeypatch):
    """Fused and wide (threads in reverse order too): the same bits, implicitfast."""
    model = mujoco.MjModel.from_xml_string(XML)
    model.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    fused = run(model, "fused", "float64", 20)
    assert_same_data(fused, run(model, "wide", "float64", 20))
    reverse_thread_order(monkeypatch)
    assert_same_data(fused, run(model, "wide", "float64", 20))


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_muscle_gradients(mjm, integrator):
    """d (a random linear function of the next state and activations) / d (qpos, qvel, ctrl, act)
    through one step, against central differences (float64), states away from the curves'
    kinks."""
    model = mujoco.MjModel.from_xml_string(XML)
    model.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    W = 3
    qpos = np.array([[0.2, -0.4], [-0.5, -1.0], [0.8, 0.0]])
    qvel = np.array([[0.3, -0.2], [-1.0, 0.5], [0.1, 0.8]])
    ctrl = np.array([[0.3, 0.6, 0.8, 0.2], [0.7, 0.1, 0.4, 0.9], [0.5, 0.5, 0.2, 0.6]])
    act = np.array([[0.4, 0.3, 0.6, 0.5], [0.2, 0.8, 0.3, 0.4], [0.6, 0.1, 0.5, 0.3]])
    sim = Sim.from_model(model, num_worlds=W, dtype="float64")
    assert_step_gradients(sim, qpos, qvel, ctrl, act, seed=2)
