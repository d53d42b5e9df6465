"""Adjoints of the differentiable step that are not Warp's generated adjoints of its kernels, against
those (simrl.sim.grad): equal to round-off (float64, 1e-12 relative), on models with free and
ball joints in trees, with and without contacts; tests/test_grad*.py check all of them against
finite differences.

The fused schedule runs its smooth and velocity segments backwards pass by pass (`build`'s
`by_pass`): the wide schedule's kernel of each pass, its adjoint over all worlds, the last pass
first. The same adjoint code as the fused kernels' own; only the order in which several elements
add into one adjoint differs. `constraint_qfrc` computes efc_force, qfrc_constraint and the
right-hand side of the implicit-damping solve in one world kernel, with a hand-written adjoint;
the kinematics_frame pass runs backwards by kinematics.frame_adjoint."""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
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


#: the reverse kernels of the velocity segment's rne passes and of smooth_dof (simrl.sim.rne,
#: simrl.sim.passive.dof_adjoint, simrl.sim.actuation.dof_adjoint)
RNE_PASSES = {"com_vel_body", "cdof_dot", "rne_body", "rne_subtree", "smooth_dof"}

# The forces smooth_dof sums, of every kind: joint springs and dampers, a fixed tendon and a
# spatial one with springs and dampers, the spatial one with armature (its bias in qfrc_bias),
# gravity compensation into qfrc_passive and, for the shoulder, into qfrc_actuator before its
# actuatorfrcrange (which its force exceeds in the second world only); actuators on a
# slide, hinges, both tendons and a site (a moment row), with gains and biases of several kinds.
SMOOTH_FORCES = """
<mujoco model="smooth_forces">
  <option timestep="0.002" integrator="Euler"><flag contact="disable"/></option>
  <worldbody>
    <body name="cart" pos="0 0 0.5">
      <joint name="slide_x" type="slide" axis="1 0 0" damping="0.5" stiffness="2"/>
      <geom type="box" size="0.2 0.1 0.05" mass="2"/>
      <site name="s0" pos="0.1 0 0.05"/>
      <body name="arm" pos="0.1 0 0.05" euler="10 20 30" gravcomp="0.5">
        <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.3" stiffness="1" actuatorgravcomp="true"
               actuatorfrcrange="-7 7"/>
        <joint name="twist" type="hinge" axis="0 0 1" armature="0.05"/>
        <geom type="capsule" fromto="0 0 0 0.4 0 0.1" size="0.03" mass="0.6"/>
        <body name="hand" pos="0.4 0 0.1" gravcomp="1">
          <joint name="wrist" type="ball" damping="0.2" stiffness="0.4"/>
          <geom type="sphere" size="0.05" mass="0.3"/>
          <site name="s2" pos="0.05 0.02 0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="fixed" stiffness="3" damping="0.4" springlength="0.1">
      <joint joint="slide_x" coef="1"/>
      <joint joint="twist" coef="-0.5"/>
    </fixed>
    <spatial name="spatial" armature="0.02" damping="0.3" stiffness="5" springlength="0.2">
      <site site="s0"/>
      <site site="s2"/>
    </spatial>
  </tendon>
  <actuator>
    <motor joint="slide_x" gear="20"/>
    <position joint="shoulder" kp="30" gear="2"/>
    <velocity joint="twist" kv="3"/>
    <general tendon="fixed" gaintype="affine" gainprm="2 0.5 0.1" biastype="affine" biasprm="0.3 -1 -0.2"/>
    <motor tendon="spatial" gear="2"/>
    <motor site="s2" gear="0 0 1 0 0.5 0"/>
  </actuator>
</mujoco>
"""


@pytest.mark.parametrize("name", ["smooth_forces", "quadruped", "humanoid", "ball_chain", "two_trees"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_rne_adjoints(name, schedule, monkeypatch):
    """The velocity segment's rne passes (com_vel_body with cdof_dot and rne_body's sums along
    the tree, rne_body's own forces, rne_subtree) and smooth_dof (qfrc_bias, the passive and
    actuator forces, qfrc_smooth) backwards by hand give the generated adjoints' gradients, to
    qpos, qvel, ctrl and body_mass (gravity compensation's too), on trees with free and ball
    joints and on a model with every kind of force smooth_dof sums."""
    W = 2
    if name == "smooth_forces":
        mjm = mujoco.MjModel.from_xml_string(SMOOTH_FORCES)
    else:
        mjm = MODELS[name]()
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(13)
    qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    ctrl[1] = rng.uniform(-2.0, 2.0, mjm.nu)
    mass = np.tile(mjm.body_mass, (W, 1)) * rng.uniform(0.9, 1.1, (W, mjm.nbody))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    assert RNE_PASSES <= set(grad.build(sim.model.dtype, schedule)["reverse"])
    if name == "smooth_forces":
        s = sim.model.struct
        assert s.enable_gravcomp and s.tendon_armature_bias and s.nsite_trn
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)  # the same forward, bit for bit
    for a, b in zip(hand[2:], generated[2:], strict=True):
        assert torch.isfinite(a).all()
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale


class _ReversedThreads:
    """Warp as grad.py sees it, with the launches of `kernels` split a thread per launch, the
    elements' threads in reverse order (a GPU runs them in any order)."""

    def __init__(self, kernels):
        self.kernels = kernels
        self.split = 0  # launches split

    def __getattr__(self, name):
        return getattr(wp, name)

    def launch(self, kernel, dim, inputs, **kwargs):
        if kernel not in self.kernels:
            return wp.launch(kernel, dim=dim, inputs=inputs, **kwargs)
        *rest, start = inputs
        self.split += 1
        for e in reversed(range(dim[1])):
            wp.launch(kernel, dim=(dim[0], 1), inputs=[*rest, start + e], **kwargs)


@pytest.mark.parametrize("name", ["quadruped", "ball_chain", "two_trees"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_rne_reverse_kernels_in_any_thread_order(name, schedule, monkeypatch):
    """The rne passes' and smooth_dof's reverse kernels give the same gradients, bit for bit,
    with each launch's threads run one at a time in reverse order: no thread reads what another
    of its launch writes (sums are gathered by the element that owns them, in a fixed order;
    these models have no tendon, whose sums are atomic)."""
    W = 2
    mjm = MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    assert mjm.ntendon == 0
    rng = np.random.default_rng(17)
    qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    in_order = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    reverse = grad.build(sim.model.dtype, schedule)["reverse"]
    threads = _ReversedThreads({reverse[p] for p in RNE_PASSES})
    monkeypatch.setattr(grad, "wp", threads)
    reversed_order = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    assert threads.split > 0
    for a, b in zip(in_order, reversed_order, strict=True):
        assert torch.equal(a, b)
