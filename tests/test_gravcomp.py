"""Gravity compensation (<body gravcomp>, mj_gravcomp in engine_passive.c) against MuJoCo: the
force -gravity * mass * gravcomp at each compensated body's centre of mass, mapped to the dofs of
its chain, into qfrc_passive, or into qfrc_actuator for joints with actuatorgravcomp (before
their actuatorfrcrange clamp; lost when the model has no actuators, as in mj_fwdActuation), and
nothing when gravity is disabled or mj_passive is skipped (springs and dampers both disabled).
qacc for random states in float64 and float32, both schedules bit for bit, gradients against
finite differences. The negative control: the same model without gravcomp must miss the
tolerances."""

import mujoco
import numpy as np
import pytest
import torch
from conftest import random_states
from test_grad import _check_gradients, _params, verify_array_access  # noqa: F401 (a fixture)
from test_schedule import _diff_rollout, assert_same_data

from simrl import Sim

# A floating base with an arm: a ball shoulder (gravcomp 0.5), an elbow hinge and a slide on
# one body (gravcomp 1), a wrist and a massive fixed tip (gravcomp 0.25) below a body
# without gravcomp. Contacts are off: the arm's links overlap.
CHAIN = """
<mujoco model="gravcomp_chain">
  <option timestep="0.002"><flag contact="disable"/></option>
  <worldbody>
    <body name="base" pos="0 0 1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <body name="upper" pos="0.1 0 0" gravcomp="0.5">
        <joint name="shoulder" type="ball" damping="0.1"/>
        <inertial pos="0.15 0.02 0" quat="0.9 0.1 0.2 0" mass="0.8" diaginertia="0.01 0.02 0.02"/>
        <body name="fore" pos="0.3 0 0" euler="10 0 20" gravcomp="1">
          <joint name="elbow" type="hinge" axis="0 1 0" ACTUATORGRAVCOMP/>
          <joint name="extend" type="slide" axis="1 0 0" damping="0.2"/>
          <inertial pos="0.1 0 -0.02" mass="0.5" diaginertia="0.005 0.01 0.01"/>
          <body name="hand" pos="0.25 0 0">
            <joint name="wrist" type="hinge" axis="0 0 1" stiffness="0.5"/>
            <inertial pos="0.03 0 0" mass="0.2" diaginertia="0.001 0.001 0.001"/>
            <body name="tip" pos="0.05 0 0" gravcomp="0.25">
              <inertial pos="0.02 0.01 0" mass="0.1" diaginertia="0.0005 0.0005 0.0005"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  ACTUATORS
</mujoco>"""

MOTOR = '<actuator><motor joint="elbow" gear="2"/><motor joint="wrist"/></actuator>'


def chain(variant: str = "passive", gravcomp: bool = True) -> mujoco.MjModel:
    """variant: 'passive' (gravcomp in qfrc_passive), 'actuator' (the elbow's through its
    actuators, clamped by actuatorfrcrange), 'actuator_unactuated' (actuatorgravcomp on a model
    without actuators), 'actuator_disabled' (with mjDSBL_ACTUATION), 'no_gravity'
    (mjDSBL_GRAVITY), 'no_passive' (springs and dampers off)."""
    actgravcomp = 'actuatorgravcomp="true" actuatorfrcrange="-2.5 2.5"' if variant.startswith("actuator") else ""
    xml = CHAIN.replace("ACTUATORGRAVCOMP", actgravcomp)
    mjm = mujoco.MjModel.from_xml_string(xml.replace("ACTUATORS", "" if variant == "actuator_unactuated" else MOTOR))
    if variant == "actuator_disabled":
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_ACTUATION
    if variant == "no_gravity":
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_GRAVITY
    if variant == "no_passive":
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_SPRING | mujoco.mjtDisableBit.mjDSBL_DAMPER
    if not gravcomp:
        mjm.body_gravcomp[:] = 0.0
    return mjm


def _forward(mjm, states, dtype, schedule="fused"):
    qpos, qvel, ctrl = states
    sim = Sim.from_model(mjm, num_worlds=len(qpos), dtype=dtype, schedule=schedule, device="cpu")
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in states)
    sim.forward()
    return sim


def _mujoco(mjm, states):
    out = []
    for qpos, qvel, ctrl in zip(*states, strict=True):
        d = mujoco.MjData(mjm)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(mjm, d)
        out.append(d)
    return out


def _errors(sim, datas):
    """Relative qacc error and absolute errors of the force vectors, worst over the worlds."""
    errors = {"qacc": 0.0}
    for w, d in enumerate(datas):
        errors["qacc"] = max(errors["qacc"], float(np.linalg.norm(sim.qacc[w].double().numpy() - d.qacc)
                                                   / np.linalg.norm(d.qacc)))
        for name in ("qfrc_gravcomp", "qfrc_passive", "qfrc_actuator"):
            e = float(np.abs(sim.view(name)[w].double().numpy() - getattr(d, name)).max())
            errors[name] = max(errors.get(name, 0.0), e)
    return errors


@pytest.mark.parametrize("variant", ["passive", "actuator", "actuator_unactuated", "actuator_disabled", "no_gravity",
                                     "no_passive"])
def test_qacc_matches_mujoco_float64(variant, rng):
    """16 random states: qacc within 1e-10 relative of MuJoCo's, qfrc_gravcomp, qfrc_passive and
    qfrc_actuator within 1e-10 (achieved: 1.3e-14 relative, 4.2e-15 absolute). Where gravcomp acts,
    the model without it misses qacc by more than 1e-3 (negative control; achieved 0.81)."""
    mjm = chain(variant)
    states = random_states(mjm, 16, rng)
    datas = _mujoco(mjm, states)
    acts = variant in ("passive", "actuator")
    assert np.abs(np.stack([d.qfrc_gravcomp for d in datas])).max() > (1.0 if acts else -1.0)
    if variant == "actuator":
        elbow = mjm.joint("elbow").dofadr[0]
        clamped = [abs(d.qfrc_actuator[elbow]) == 2.5 for d in datas]
        assert any(clamped) and not all(clamped), "some states should meet the elbow's actuatorfrcrange"
    errors = _errors(_forward(mjm, states, "float64"), datas)
    assert max(errors.values()) < 1e-10, errors
    if acts:
        control = _errors(_forward(chain(variant, gravcomp=False), states, "float64"), datas)
        assert control["qacc"] > 1e-3, control


def test_qacc_matches_mujoco_float32(rng):
    """The float32 build: qacc within 1e-4 relative of MuJoCo's (achieved: 6.7e-6); the
    model without gravcomp misses by more than 1e-3 (0.81)."""
    for variant in ("passive", "actuator"):
        mjm = chain(variant)
        states = random_states(mjm, 16, rng)
        datas = _mujoco(mjm, states)
        errors = _errors(_forward(mjm, states, "float32"), datas)
        assert errors["qacc"] < 1e-4, (variant, errors)
        control = _errors(_forward(chain(variant, gravcomp=False), states, "float32"), datas)
        assert control["qacc"] > 1e-3, (variant, control)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype, rng):
    """50 steps from random states, gravcomp through qfrc_passive and qfrc_actuator: every array
    of the data, bit for bit."""
    mjm = chain("actuator")
    states = random_states(mjm, 4, rng)
    sims = [_forward(mjm, states, dtype, schedule) for schedule in ("fused", "wide")]
    for sim in sims:
        sim.step(50)
    assert sims[0].view("qfrc_gravcomp").abs().max() > 0.1
    assert_same_data(*sims)


@pytest.mark.parametrize("variant", ["passive", "actuator"])
def test_gradients(variant, rng):
    """diff_step's gradients with respect to qpos, qvel, ctrl, body_mass (which scales the
    compensating force) and actuator_gain against central finite differences (float64, < 1e-6
    relative; achieved 2.5e-9 or better)."""
    mjm = chain(variant)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    qpos, qvel, ctrl = random_states(mjm, 2, rng)
    ctrl = np.clip(ctrl, -0.9, 0.9)
    _check_gradients(sim, mjm, [qpos, qvel, ctrl, *_params(mjm, 2)], tol=1e-6)


@pytest.mark.slow  # 81 s warm, minutes cold (the checked build compiles apart)
@pytest.mark.usefixtures("verify_array_access")
def test_gradients_float32_checked_array_access(rng):
    """The float32 build's gradients (gravcomp through qfrc_passive and qfrc_actuator) against
    float64 finite differences: < 1e-2 relative, with Warp's check that no differentiated kernel
    writes an array after reading it (the fixture of tests/test_grad.py)."""
    mjm = chain("actuator")
    sim32 = Sim.from_model(mjm, num_worlds=2, dtype="float32")
    sim64 = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    qpos, qvel, ctrl = random_states(mjm, 2, rng)
    ctrl = np.clip(ctrl, -0.9, 0.9)
    _check_gradients(sim32, mjm, [qpos, qvel, ctrl, *_params(mjm, 2)], tol=1e-2, fd_sim=sim64)


@pytest.mark.slow  # 61 s in a cold run on 2 cores; test_schedule compares the two schedules' diff_step
def test_wide_diff_step_equals_fused():
    """Six chained diff_steps of the arm (gravcomp in qfrc_passive and qfrc_actuator) in both
    schedules: the same outputs bit for bit, gradients (state, controls, body_mass,
    geom_friction) within 1e-12 relative."""
    mjm = chain("actuator")
    (out_f, grad_f), (out_w, grad_w) = _diff_rollout(mjm, "fused"), _diff_rollout(mjm, "wide")
    for a, b in zip(out_f, out_w, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_f[:4], grad_w[:4], strict=True):  # (geom_friction: no contacts here, zero)
        assert torch.isfinite(a).all() and a.abs().max() > 0
        assert ((a - b).abs().max() / a.abs().max()).item() <= 1e-12
