"""Adjoints of the differentiable step that are not Warp's generated adjoints of its kernels, against
those (simrl.sim.grad): equal to round-off (float64, 1e-12 relative), on models with free and
ball joints in trees, with and without contacts; tests/test_grad*.py check all of them against
finite differences.

The fused schedule runs its smooth and velocity segments backwards pass by pass (`build`'s
`by_pass`): the wide schedule's kernel of each pass, its adjoint over all worlds, the last pass
first. The same adjoint code as the fused kernels' own; only the order in which several elements
add into one adjoint differs. `constraint_qfrc` computes efc_force, qfrc_constraint and the
right-hand side of the implicit-damping solve in one world kernel, with a hand-written adjoint;
the kinematics_frame pass runs backwards by kinematics.frame_adjoint, the crb_body and crb_dof
passes by crb.body_adjoint and crb.dof_adjoint (the wide schedule's: crb.dof_adjoint_gather)."""

import mujoco
import numpy as np
import pytest
import torch
from conftest import GYM_ASSETS, without_constraints
from models import BALL_CHAIN, TWO_TREES

from envs import ASSETS_DIR
from simrl import Sim, diff_step
from simrl.sim import grad

MODELS = {
    "quadruped": lambda: mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml")),
    "humanoid": lambda: mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "humanoid.xml")),
    "ball_chain": lambda: without_constraints(mujoco.MjModel.from_xml_string(BALL_CHAIN)),
    "two_trees": lambda: without_constraints(mujoco.MjModel.from_xml_string(TWO_TREES)),
}


def _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps):
    inputs = [torch.tensor(v, requires_grad=True) for v in (qpos, qvel, ctrl, mass)]
    q, v = inputs[0], inputs[1]
    for _ in range(steps):
        q, v = diff_step(sim, q, v, inputs[2], {"body_mass": inputs[3]})
    (q.square().sum() + v.square().sum() + q.sum() * v.sum()).backward()
    return [q.detach(), v.detach(), *(x.grad for x in inputs)]


@pytest.mark.parametrize("name", list(MODELS))
def test_by_pass_backward_equals_the_fused_adjoint(name, monkeypatch):
    mjm = MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    W = 3
    rng = np.random.default_rng(7)
    qpos = np.tile(mjm.key_qpos[0] if mjm.nkey else mjm.qpos0, (W, 1))
    for j in range(mjm.njnt):
        t, a = int(mjm.jnt_type[j]), mjm.jnt_qposadr[j]
        if t == int(mujoco.mjtJoint.mjJNT_FREE):
            a += 3
        if t in (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)):
            qpos[:, a:a + 4] += rng.normal(0.0, 0.05, (W, 4))
            qpos[:, a:a + 4] /= np.linalg.norm(qpos[:, a:a + 4], axis=1, keepdims=True)
        else:
            qpos[:, a] += rng.normal(0.0, 0.05, W)
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1)) * rng.uniform(0.9, 1.1, (W, mjm.nbody))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule="fused")
    assert set(grad.build(sim.model.dtype, "fused")["by_pass"]) == {"smooth", "velocity"}
    by_pass = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "BY_PASS", False)
    fused = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    for a, b in zip(by_pass[:2], fused[:2], strict=True):
        assert torch.equal(a, b)  # the same forward
    for a, b in zip(by_pass[2:], fused[2:], strict=True):
        assert torch.isfinite(a).all()
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale


def _constrained_inputs(name, W, rng):
    from test_grad import LIMITS_FRICTION, _inputs

    if name == "limits_friction":
        mjm = mujoco.MjModel.from_xml_string(LIMITS_FRICTION)
        qpos, qvel, ctrl = _inputs(mjm, W, rng, "limits_friction")
    else:
        mjm = MODELS[name]()
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
        qpos, qvel, ctrl = _inputs(mjm, W, rng, "quadruped") if name == "quadruped" else (
            np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.02, (W, mjm.nq)), rng.normal(0.0, 0.3, (W, mjm.nv)),
            rng.uniform(-0.3, 0.3, (W, mjm.nu)))
    return mjm, qpos, qvel, ctrl


@pytest.mark.parametrize("name", ["quadruped", "limits_friction", "humanoid"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_constraint_force_adjoint(name, schedule, monkeypatch):
    """constraint_qfrc (efc_force, qfrc_constraint and the implicit-damping solve's right-hand
    side in one world kernel) and its hand-written adjoint give the generated adjoints'
    gradients: contacts, limits, friction loss in both zones, Euler's implicit damping; with
    the sensors of the step too where the model has some."""
    W = 2
    mjm, qpos, qvel, ctrl = _constrained_inputs(name, W, np.random.default_rng(5))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    assert sim.model.struct.euler_damp  # the path with a second solve
    sim.qpos, sim.qvel = torch.tensor(qpos), torch.tensor(qvel)
    sim.forward()
    assert int(sim.data.efc_nactive.numpy().min()) > 0  # rows act in every world
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)  # the same forward, bit for bit
    for a, b in zip(hand[2:], generated[2:], strict=True):
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale


@pytest.mark.parametrize("name", ["ball_chain", "two_trees", "humanoid"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_frame_adjoint(name, schedule, monkeypatch):
    """kinematics.frame_adjoint (the kinematics_frame pass backwards: bodies' rotation
    matrices and inertial frames, geoms and sites, the frames that share their body's or
    inertial frame's pose) gives the generated adjoint's gradients; the humanoid's geoms in
    contact with the floor receive gradients, the others none (skipped)."""
    W = 2
    mjm = MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(11)
    qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(hand[2:], generated[2:], strict=True):
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale


def _tendon_model():
    from test_tendon import XML

    return mujoco.MjModel.from_xml_string(XML)


@pytest.mark.parametrize("name", [*MODELS, "tendons"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_crb_adjoint(name, schedule, monkeypatch):
    """crb.body_adjoint and crb.dof_adjoint, or crb.dof_adjoint_gather in the wide schedule
    (the crb_body and crb_dof passes backwards: the composite inertias up the tree, qM's
    rows), give the generated adjoints' gradients: free, ball, hinge and slide joints, two
    trees, bodies with several dofs; with the tendons' armature on one chain and across trees.
    qM receives a gradient from the solve's adjoint in every world, and the masses' gradient
    flows through the composite inertias."""
    W = 2
    mjm = _tendon_model() if name == "tendons" else MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(13)
    qpos = np.tile(mjm.key_qpos[0] if mjm.nkey else mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1)) * rng.uniform(0.9, 1.1, (W, mjm.nbody))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    assert {"crb_body", "crb_dof"} <= set(grad.build(sim.model.dtype, schedule)["reverse"])
    if name == "tendons":
        assert (mjm.tendon_armature > 0).sum() >= 3
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(hand[2:], generated[2:], strict=True):
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale
