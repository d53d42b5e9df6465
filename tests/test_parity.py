"""The Warp engine against MuJoCo on the same model and state (contacts and constraints off).

- one step: qacc of `Sim.forward` equals `mj_forward`'s for 64 random states and controls,
  all in one batch, ||a - a_ref|| / ||a_ref|| < 1e-4 (float32) and < 1e-10 (float64);
- rollout: 100 steps of random controls from qpos0, qpos within 1e-4 of `mj_step`'s
  (float32; 1e-10 in float64), quaternions compared up to sign, several worlds at once. The
  largest errors measured (2026-12) were 7.8e-6 (float32, walker2d) and 1.1e-12 (float64, ant):
  the tolerances are 13x and 90x those. Negative control: MuJoCo on the same model with its
  bodies 5% heavier must be further from MuJoCo than both tolerances.
"""

import mujoco
import numpy as np
import pytest
import torch
from conftest import GYM_ASSETS, qpos_distance, random_ctrl, random_states, without_constraints
from models import CUSTOM_MODELS

from simrl import Sim, UnsupportedFeatureError

GYM_MODELS = ["ant", "half_cheetah", "hopper", "walker2d", "humanoid", "humanoidstandup", "reacher",
              "pusher", "inverted_pendulum", "inverted_double_pendulum"]

TOL = {"float32": {"qacc": 1e-4, "qpos": 1e-4}, "float64": {"qacc": 1e-10, "qpos": 1e-10}}


def load(name: str) -> mujoco.MjModel:
    if name in CUSTOM_MODELS:
        mjm = mujoco.MjModel.from_xml_string(CUSTOM_MODELS[name])
    else:
        mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    return without_constraints(mjm)


ALL_MODELS = GYM_MODELS + list(CUSTOM_MODELS)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ALL_MODELS)
def test_forward_matches_mujoco(name, dtype, rng):
    mjm = load(name)
    num_worlds = 64
    qpos, qvel, ctrl = random_states(mjm, num_worlds, rng)
    sim = Sim.from_model(mjm, num_worlds=num_worlds, device="cpu", dtype=dtype)
    sim.qpos = torch.as_tensor(qpos, dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(qvel, dtype=sim.torch_dtype)
    sim.ctrl = torch.as_tensor(ctrl, dtype=sim.torch_dtype)
    sim.forward()
    qacc = sim.qacc.numpy().astype(np.float64)

    mjd = mujoco.MjData(mjm)
    worst = 0.0
    for w in range(num_worlds):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_forward(mjm, mjd)
        rel = np.linalg.norm(qacc[w] - mjd.qacc) / max(np.linalg.norm(mjd.qacc), 1e-12)
        worst = max(worst, rel)
    assert worst < TOL[dtype]["qacc"], f"{name}: worst relative qacc error {worst:.3e}"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", ALL_MODELS)
def test_rollout_matches_mujoco(name, dtype, rng):
    mjm = load(name)
    num_worlds, steps = 3, 100
    ctrl = np.stack([random_ctrl(mjm, num_worlds, rng) for _ in range(steps)])
    sim = Sim.from_model(mjm, num_worlds=num_worlds, device="cpu", dtype=dtype)
    for t in range(steps):
        sim.ctrl = torch.as_tensor(ctrl[t], dtype=sim.torch_dtype)
        sim.step()

    def mujoco_rollout(model):
        datas = [mujoco.MjData(model) for _ in range(num_worlds)]
        for t in range(steps):
            for w, mjd in enumerate(datas):
                mjd.ctrl[:] = ctrl[t, w]
                mujoco.mj_step(model, mjd)
        return np.stack([mjd.qpos for mjd in datas])

    ref = mujoco_rollout(mjm)
    err = qpos_distance(mjm, sim.qpos.numpy().astype(np.float64), ref)
    assert np.all(np.isfinite(ref))
    assert err < TOL[dtype]["qpos"], f"{name}: qpos differs from mj_step by {err:.3e} after {steps} steps"
    heavier = load(name)
    heavier.body_mass[:] *= 1.05
    miss = qpos_distance(mjm, mujoco_rollout(heavier), ref)
    assert miss > TOL["float32"]["qpos"], f"{name}: 5% heavier bodies move qpos by only {miss:.2e}"  # reacher: 2.3e-4


def test_swimmer_fluid_forces_are_refused():
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "swimmer.xml"))
    with pytest.raises(UnsupportedFeatureError, match=r"<option density.*viscosity"):
        Sim.from_model(without_constraints(mjm), num_worlds=1)


DISABLE_FLAGS = ["mjDSBL_GRAVITY", "mjDSBL_SPRING", "mjDSBL_DAMPER", "mjDSBL_ACTUATION",
                 "mjDSBL_CLAMPCTRL", "mjDSBL_EULERDAMP"]


@pytest.mark.parametrize("flag", DISABLE_FLAGS)
@pytest.mark.parametrize("name", ["slide_hinge", "ball_chain"])
def test_disable_flags_match_mujoco(name, flag, rng):
    """Each disable flag changes the result, and in the same way as in MuJoCo."""
    mjm = load(name)
    mjm.opt.disableflags |= int(getattr(mujoco.mjtDisableBit, flag))
    num_worlds, steps = 4, 20
    qpos, qvel, _ = random_states(mjm, num_worlds, rng)
    ctrl = random_ctrl(mjm, num_worlds, rng) * 3.0  # well beyond ctrlrange: clamping matters
    sim = Sim.from_model(mjm, num_worlds=num_worlds, dtype="float64")
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=torch.float64) for x in (qpos, qvel, ctrl))
    sim.step(steps)

    enabled = load(name)
    for model, expect_equal in ((mjm, True), (enabled, False)):
        ref = []
        for w in range(num_worlds):
            mjd = mujoco.MjData(model)
            mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
            for _ in range(steps):
                mujoco.mj_step(model, mjd)
            ref.append(mjd.qpos.copy())
        err = qpos_distance(mjm, sim.qpos.numpy(), np.stack(ref))
        if expect_equal:
            assert err < 1e-8, f"{flag}: differs from MuJoCo by {err:.3e}"
        elif not (flag == "mjDSBL_EULERDAMP" and mjm.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4):
            # the flag must matter on these models, or the test above proves nothing
            # (eulerdamp only concerns the Euler integrator)
            assert err > 1e-6, f"{flag} made no difference on {name}"


def test_qfrc_applied_matches_mujoco(rng):
    mjm = load("two_trees")
    qpos, qvel, ctrl = random_states(mjm, 8, rng)
    applied = rng.normal(0, 2.0, (8, mjm.nv))
    sim = Sim.from_model(mjm, num_worlds=8, dtype="float64")
    sim.qpos, sim.qvel, sim.ctrl, sim.qfrc_applied = (
        torch.as_tensor(x, dtype=torch.float64) for x in (qpos, qvel, ctrl, applied))
    sim.forward()
    mjd = mujoco.MjData(mjm)
    for w in range(8):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:], mjd.qfrc_applied[:] = qpos[w], qvel[w], ctrl[w], applied[w]
        mujoco.mj_forward(mjm, mjd)
        np.testing.assert_allclose(sim.qacc[w].numpy(), mjd.qacc, rtol=1e-10, atol=1e-10)


def test_intermediate_quantities_match_mujoco(rng):
    """Body poses, inertia matrix, bias and actuator forces, not only their end result."""
    mjm = load("slide_hinge")
    qpos, qvel, ctrl = random_states(mjm, 4, rng)
    sim = Sim.from_model(mjm, num_worlds=4, dtype="float64")
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=torch.float64) for x in (qpos, qvel, ctrl))
    sim.forward()
    mjd = mujoco.MjData(mjm)
    dense_m = np.zeros((mjm.nv, mjm.nv))
    for w in range(4):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_forward(mjm, mjd)
        mujoco.mj_fullM(mjm, mjd, dense_m)
        for name, ref in [("xpos", mjd.xpos), ("xipos", mjd.xipos), ("subtree_com", mjd.subtree_com),
                          ("geom_xpos", mjd.geom_xpos), ("qM", dense_m), ("qfrc_bias", mjd.qfrc_bias),
                          ("qfrc_passive", mjd.qfrc_passive), ("actuator_force", mjd.actuator_force),
                          ("qfrc_actuator", mjd.qfrc_actuator), ("cdof", mjd.cdof), ("cinert", mjd.cinert)]:
            np.testing.assert_allclose(sim.view(name)[w].numpy(), ref, rtol=1e-10, atol=1e-10, err_msg=name)
        xmat = sim.view("xmat")[w].numpy().reshape(mjm.nbody, 9)
        np.testing.assert_allclose(xmat, mjd.xmat, atol=1e-12)
