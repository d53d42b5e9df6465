"""Adjoints of the differentiable step that are not Warp's generated adjoints of its kernels, against
those (simrl.sim.grad): equal to round-off (float64, 1e-12 relative), on models with free and
ball joints in trees, with and without contacts; tests/test_grad*.py check all of them against
finite differences.

The fused schedule runs its smooth and velocity segments backwards pass by pass (`build`'s
`by_pass`): the wide schedule's kernel of each pass, its adjoint over all worlds, the last pass
first. The same adjoint code as the fused kernels' own; only the order in which several elements
add into one adjoint differs. `constraint_rhs` takes efc_force and qfrc_constraint from the
solver (its last evaluation is at the solution) and forms the right-hand side of the
implicit-damping solve, with a hand-written adjoint; the kinematics, com_pos and crb passes run
backwards by hand-written reverse kernels (grad's `reverse`: kinematics.frame_adjoint,
joint_adjoint, body_root_adjoint, body_tree_adjoint, com_pos.subtree_body_adjoint,
body_cinert_adjoint, crb.body_adjoint, crb.dof_adjoint, the wide schedule's
crb.dof_adjoint_gather); the fused schedule's contact and joint-limit rows by rows_reverse. The
constraint solve's implicit adjoint solves with the factor of the Newton solver's Hessian
(constraint_adjoint), the reference assembles and factorizes it anew
(constraint_adjoint_refactor); the solve of qacc_smooth records no adjoint, as nothing on the
tape reads it."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from conftest import GYM_ASSETS, without_constraints
from models import BALL_CHAIN, SLIDE_HINGE, TWO_TREES

from envs import ASSETS_DIR
from simrl import Sim, diff_step
from simrl.sim import grad
from simrl.sim.types import ConstraintType

MODELS = {
    "quadruped": lambda: mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml")),
    "humanoid": lambda: mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "humanoid.xml")),
    "ball_chain": lambda: without_constraints(mujoco.MjModel.from_xml_string(BALL_CHAIN)),
    "two_trees": lambda: without_constraints(mujoco.MjModel.from_xml_string(TWO_TREES)),
    "slide_hinge": lambda: mujoco.MjModel.from_xml_string(SLIDE_HINGE),
    "mocap_pusher": lambda: __import__("test_mocap").pusher(),
}


def _assert_same(hand, generated):
    """The same forward (the first two results, bit for bit) and gradients (the rest) within
    1e-12 of the largest, each receiving one."""
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)
    for a, b in zip(hand[2:], generated[2:], strict=True):
        assert torch.isfinite(a).all()
        scale = b.abs().max().item()
        assert scale > 0
        assert (a - b).abs().max().item() <= 1e-12 * scale, (a - b).abs().max().item() / scale


def _near_qpos0(mjm, W, rng):
    """(qpos, qvel, ctrl, mass) of W worlds near qpos0: qpos0 + N(0, 0.05), qvel N(0, 0.5), ctrl
    U(-0.5, 0.5), the model's masses."""
    qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    return qpos, qvel, ctrl, np.tile(mjm.body_mass, (W, 1))


def _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps):
    inputs = [torch.tensor(v, requires_grad=True) for v in (qpos, qvel, ctrl, mass)]
    q, v = inputs[0], inputs[1]
    for _ in range(steps):
        q, v = diff_step(sim, q, v, inputs[2], {"body_mass": inputs[3]})
    (q.square().sum() + v.square().sum() + q.sum() * v.sum()).backward()
    return [q.detach(), v.detach(), *(x.grad for x in inputs)]


@pytest.mark.parametrize("name", ["quadruped", "humanoid", "ball_chain", "two_trees"])
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
    _assert_same(by_pass, fused)


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
    """constraint_rhs (the solver's efc_force and qfrc_constraint, and the implicit-damping
    solve's right-hand side) and its hand-written adjoint give the generated adjoints' values, bit
    for bit, and gradients: contacts, limits, friction loss in both zones, Euler's implicit
    damping; with the sensors of the step too where the model has some."""
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
    _assert_same(hand, generated)


def _compare_handwritten(name, schedule, monkeypatch, seed):
    """The step's gradients with the hand-written reverse kernels against the generated adjoints':
    the same forward, gradients of qpos, qvel, ctrl and the bodies' masses within 1e-12."""
    W = 2
    mjm = MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(seed)
    qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1)) * rng.uniform(0.9, 1.1, (W, mjm.nbody))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    _assert_same(hand, generated)


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
    qpos, qvel, ctrl, mass = _near_qpos0(mjm, W, np.random.default_rng(11))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    hand = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    _assert_same(hand, generated)


@pytest.mark.parametrize("name", ["quadruped", "humanoid", "ball_chain", "two_trees", "slide_hinge", "mocap_pusher"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_kinematics_and_com_adjoints(name, schedule, monkeypatch):
    """The kinematics_joint, kinematics_body_root and kinematics_body passes backwards
    (kinematics.joint_adjoint, body_root_adjoint, body_tree_adjoint: the tree's levels leaves
    first, each body gathering its children's adjoints) give the generated adjoints' gradients:
    free bodies with children, ball joints (a chain of them, one under a free body), hinges,
    slide joints and several joints on one body (slide_hinge), a body welded to its parent,
    a mocap body with a jointed child (mocap_pusher: no gradient to the mocap pose); and
    com_pos's subtree, body and dof passes backwards (com_pos.subtree_body_adjoint,
    body_cinert_adjoint with the dofs': the adjoint of each tree's CoM gathered by its
    root), per-world masses with gradients."""
    _compare_handwritten(name, schedule, monkeypatch, seed=13)


CAPPED = Path(__file__).parent / "data" / "capped_solver.xml"


def _solver_inputs(name, W, rng):
    """(mjm, qpos, qvel, ctrl) of constraint_adjoint's checks; the quadruped without dof damping
    (Euler integrates the solver's qacc itself, in every world) and its last world lifted 1 m,
    out of contact (a world without active rows)."""
    if name.startswith("capped"):
        # boxes, capsules and spheres on the floor and on each other (condim 1, 3, 4, 6), an arm
        # with limits and friction loss, a joint equality; 2 Newton iterations (the solve stops
        # at its iteration limit)
        mjm = mujoco.MjModel.from_xml_path(str(CAPPED))
        mjm.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC if "elliptic" in name else mujoco.mjtCone.mjCONE_PYRAMIDAL
        if "no_island" in name:
            mjm.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
        md = mujoco.MjData(mjm)
        for _ in range(30):  # settled into contact
            mujoco.mj_step(mjm, md)
        qpos = np.tile(md.qpos, (W, 1))
        qvel = np.tile(md.qvel, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nv))
        return mjm, qpos, qvel, rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mjm, qpos, qvel, ctrl = _constrained_inputs(name, W, rng)
    if name == "quadruped":
        mjm.dof_damping[:] = 0.0
        qpos[-1, 2] += 1.0
    return mjm, qpos, qvel, ctrl


@pytest.mark.parametrize("name", ["quadruped", "limits_friction", "humanoid", "capped_elliptic",
                                  "capped_pyramidal_no_island"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_constraint_adjoint_with_the_solver_factor(name, schedule, monkeypatch):
    """constraint_adjoint, which solves with the Hessian factor the Newton solver leaves in
    solver_H (sparse L'DL or dense Cholesky; qLD's M where no row is active), gives the
    gradients of constraint_adjoint_refactor, which assembles and factorizes H anew: contacts
    (a quadruped world without any), limits and friction loss in both zones, an equality,
    elliptic cones in their middle zone, islands on and off, a solve stopped by its iteration
    limit, two steps (the second from the warm start)."""
    W = 3 if name == "quadruped" else 2
    mjm, qpos, qvel, ctrl = _solver_inputs(name, W, np.random.default_rng(3))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    sim.qpos, sim.qvel, sim.ctrl = torch.tensor(qpos), torch.tensor(qvel), torch.tensor(ctrl)
    sim.forward()
    nactive = sim.data.efc_nactive.numpy()
    assert nactive[:W - 1].min() > 0
    assert (nactive[-1] == 0) == (name == "quadruped")
    assert bool(sim.model.struct.euler_damp) == (name != "quadruped")
    if name == "capped_elliptic":
        hcone = sim.view("efc_hcone").numpy()
        assert (np.abs(hcone).sum(axis=2) > 0).any(axis=1).all()  # contacts in the middle zone
        assert sim.model.struct.enable_island != 0
    if name == "capped_pyramidal_no_island":
        assert sim.model.struct.enable_island == 0
    stored = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "REFACTOR", True)
    refactored = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    _assert_same(stored, refactored)


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_unrecorded_smooth_solve_adjoint(schedule, monkeypatch):
    """The solve of qacc_smooth in a constrained evaluation records no adjoint: nothing on the
    tape reads qacc_smooth (the solver reads it off the tape; the accelerometer, touch, force
    and torque sensors read the solver's qacc and forces), so the gradients, of the state and
    of the sensors, are those with the adjoint recorded, bit for bit. Contacts, a connect,
    Euler's implicit damping."""
    from test_sensor import CONTACT_XML

    mjm = mujoco.MjModel.from_xml_string(CONTACT_XML.replace("<sensor>", '<sensor><accelerometer site="hip1"/>'))
    W = 2
    rng = np.random.default_rng(9)
    md = mujoco.MjData(mjm)
    for _ in range(50):
        mujoco.mj_step(mjm, md)
    qpos = np.tile(md.qpos, (W, 1))
    qvel = np.tile(md.qvel, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    assert sim.model.struct.euler_damp

    def gradients():
        inputs = [torch.tensor(v, requires_grad=True) for v in (qpos, qvel, ctrl, mass)]
        q, v, sd = diff_step(sim, *inputs[:3], {"body_mass": inputs[3]}, substeps=2, sensors=True)
        (q.square().sum() + v.square().sum() + (sd * torch.linspace(0.5, 1.5, sd.shape[1])).sum()).backward()
        return [q.detach(), v.detach(), sd.detach(), *(x.grad for x in inputs)]

    # no stage reads qacc_smooth but the solver (solver.py) and mj_fwdAcceleration (factor_m.py);
    # grad.py's solves write it, data.py allocates it: a new reader must be looked at here
    sim_dir = Path(grad.__file__).parent
    readers = {p.name for p in sim_dir.glob("*.py") if "d.qacc_smooth" in p.read_text()}
    assert readers == {"solver.py", "factor_m.py", "grad.py", "data.py"}, readers
    skipped = gradients()
    monkeypatch.setattr(grad, "SMOOTH_SOLVE_ADJOINT", True)
    recorded = gradients()
    for a, b in zip(skipped, recorded, strict=True):
        assert torch.equal(a, b)
    assert all(g.abs().max() > 0 for g in skipped[3:])


@pytest.mark.parametrize("name", ["quadruped", "capped_elliptic"])
def test_constraint_adjoint_after_a_rejected_warm_start(name, monkeypatch):
    """The first solve of the rollout starts from a warm start of 1e4 in every dof, whose cost
    is far above qacc_smooth's: the solver rejects it and evaluates again at qacc_smooth before
    its Newton steps (`solver.solve`'s `smooth`); the factor it leaves still gives the
    refactorized adjoint's gradients."""
    W = 3 if name == "quadruped" else 2
    mjm, qpos, qvel, ctrl = _solver_inputs(name, W, np.random.default_rng(3))
    mass = np.tile(mjm.body_mass, (W, 1))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule="fused")
    constrained = grad.Rollout._constrained

    def far_warm_start(self, m, d, *args, **kwargs):
        if self.warmstart is None:
            self.warmstart = wp.array(np.full(d.qacc.shape, 1e4), dtype=d.qacc.dtype, device=d.qacc.device)
        return constrained(self, m, d, *args, **kwargs)

    monkeypatch.setattr(grad.Rollout, "_constrained", far_warm_start)
    stored = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    monkeypatch.setattr(grad, "REFACTOR", True)
    refactored = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    _assert_same(stored, refactored)


# contacts with condim 1, 3, 4 and 6 in the pyramidal cone (a pair's condim is the larger of its
# geoms'; solimp's transition zone wide enough that the impedance depends on the depth), limits of
# a slide, a hinge and a ball joint
ROWS = """
<mujoco model="rows">
  <option timestep="0.004" integrator="Euler"/>
  <default><geom solimp="0.3 0.95 0.05 0.4 2"/></default>
  <worldbody>
    <geom type="plane" size="5 5 0.1" condim="1"/>
    <body pos="0 0 0.09"><freejoint/><geom type="sphere" size="0.1" condim="6" friction="1 0.03 0.01"/></body>
    <body pos="0.5 0 0.09"><freejoint/><geom type="sphere" size="0.1" condim="4" friction="0.9 0.05 0"/></body>
    <body pos="-0.5 0 0.045" euler="5 3 20"><freejoint/><geom type="box" size="0.1 0.08 0.05" condim="1"/></body>
    <body pos="0 -0.5 0.09"><freejoint/><geom type="sphere" size="0.1" condim="3"/></body>
    <body pos="1 1 0.3">
      <joint name="slide" type="slide" axis="1 0 0" range="-0.1 0.1"/>
      <geom type="box" size="0.1 0.05 0.05" mass="1" contype="0" conaffinity="0"/>
      <body pos="0.1 0 0">
        <joint name="hinge" type="hinge" axis="0 1 0" range="-10 30" solimplimit="0.2 0.9 0.2 0.6 3"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.2" size="0.03" mass="0.3" contype="0" conaffinity="0"/>
        <body pos="0.2 0 -0.2">
          <joint name="ball" type="ball" range="0 20"/>
          <geom type="sphere" size="0.05" pos="0 0 -0.07" mass="0.2" contype="0" conaffinity="0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slide" gear="5"/><motor joint="hinge" gear="2"/></actuator>
</mujoco>"""


@pytest.mark.parametrize("name", ["quadruped", "rows", "humanoid"])
def test_handwritten_rows_adjoint(name, monkeypatch):
    """The fused schedule's constraint rows backwards (rows_reverse: contacts of condim 1, 3, 4
    and 6 in the pyramidal cone, inside solimp's transition zone, and the limits of slides and
    hinges; the ball joint's limit by the generated adjoint of the other rows) give the generated
    adjoints' gradients, of the geoms' friction too."""
    W = 2
    rng = np.random.default_rng(3)
    if name == "rows":
        mjm = mujoco.MjModel.from_xml_string(ROWS)
        qpos = np.tile(mjm.qpos0, (W, 1))
        # every limit beyond its range; the ball joint tilted 25 degrees
        qpos[:, -6] = [0.12, -0.13]
        qpos[:, -5] = np.radians([32.0, -12.0])
        qpos[:, -4:] = [np.cos(np.radians(12.5)), np.sin(np.radians(12.5)), 0.0, 0.0]
        qpos = qpos + rng.normal(0.0, 0.003, qpos.shape)
        qvel = rng.normal(0.0, 0.3, (W, mjm.nv))
        ctrl = rng.uniform(-0.5, 0.5, (W, mjm.nu))
    else:
        mjm, qpos, qvel, ctrl = _constrained_inputs(name, W, rng)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule="fused")
    sim.qpos, sim.qvel = torch.tensor(qpos), torch.tensor(qvel)
    sim.forward()
    efc_type = sim.data.efc_type.numpy()
    active = (sim.view("efc_active").numpy() != 0) & (np.arange(efc_type.shape[1]) < sim.data.nefc.numpy()[:, None])
    limits = (active & (efc_type == ConstraintType.LIMIT_JOINT)).sum(axis=1)
    if name == "humanoid":  # limits (and its floor contacts where a foot touches)
        assert limits.min() > 0
    else:
        assert (active & (efc_type == ConstraintType.CONTACT_PYRAMIDAL)).any(axis=1).all()
    if name == "rows":
        assert limits.min() == 3
        assert (active & (efc_type == ConstraintType.CONTACT_FRICTIONLESS)).any(axis=1).all()

    def gradients():
        friction = torch.tensor(np.tile(mjm.geom_friction, (W, 1, 1)), requires_grad=True)
        inputs = [torch.tensor(v, requires_grad=True) for v in (qpos, qvel, ctrl)]
        q, v = inputs[0], inputs[1]
        for _ in range(2):
            q, v = diff_step(sim, q, v, inputs[2], {"geom_friction": friction})
        (q.square().sum() + v.square().sum() + q.sum() * v.sum()).backward()
        return [q.detach(), v.detach(), *(x.grad for x in inputs), friction.grad]

    hand = gradients()
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = gradients()
    for a, b in zip(hand[:2], generated[:2], strict=True):
        assert torch.equal(a, b)
    for k, (a, b) in enumerate(zip(hand[2:], generated[2:], strict=True)):
        scale = b.abs().max().item()
        if name == "humanoid" and k == 3 and scale == 0:  # no foot on the floor: no friction gradient
            assert torch.equal(a, b)
            continue
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
    _assert_same(hand, generated)


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
    _assert_same(hand, generated)


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
    qpos, qvel, ctrl, mass = _near_qpos0(mjm, W, np.random.default_rng(17))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    in_order = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    reverse = grad.build(sim.model.dtype, schedule)["reverse"]
    threads = _ReversedThreads({reverse[p] for p in RNE_PASSES})
    monkeypatch.setattr(grad, "wp", threads)
    reversed_order = _gradients(sim, mjm, qpos, qvel, ctrl, mass, steps=2)
    assert threads.split > 0
    for a, b in zip(in_order, reversed_order, strict=True):
        assert torch.equal(a, b)


ACTUATORS = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body pos="0 0 1">
      <joint name="h1" type="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
      <body pos="0.3 0 0">
        <joint name="h2" type="hinge" axis="0 1 0"/>
        <joint name="sl" type="slide" axis="1 0 0"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.05"/>
        <site name="tip" pos="0.3 0 0"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="t1"><joint joint="h1" coef="1"/><joint joint="h2" coef="-0.5"/></fixed>
  </tendon>
  <actuator>
    <position joint="h1" kp="5" kv="2" ctrlrange="-1 1" forcerange="-3 3"/>
    <velocity joint="h1" kv="3" ctrlrange="-1 1"/>
    <motor joint="h2" gear="2" ctrlrange="-0.2 0.2"/>
    <general joint="sl" gaintype="affine" gainprm="1 0.5 0.2" biastype="affine" biasprm="0 -1 -0.3"
             dyntype="filterexact" dynprm="0.05" actearly="true" actlimited="true" actrange="-0.5 0.5"/>
    <general tendon="t1" dyntype="integrator" gainprm="2" actlimited="true" actrange="-1 1"/>
    <general site="tip" gear="0 0 1 0 0 0" dyntype="filter" dynprm="0.1" gainprm="1.5"/>
  </actuator>
</mujoco>
"""


def _actuation_gradients(sim, mjm, values):
    """Two steps from (qpos, qvel, ctrl, act, gain) with the actuators' gains as parameters: the
    final state and the gradients of every input that receives one."""
    inputs = [torch.tensor(v, requires_grad=True) for v in values]
    q, v, ctrl, a, gain = inputs
    for _ in range(2):
        out = diff_step(sim, q, v, ctrl, {"actuator_gain": gain}, act0=a if mjm.na else None)
        q, v = out[:2]
        a = out[2] if mjm.na else a
    loss = q.square().sum() + v.square().sum() + q.sum() * v.sum()
    (loss + a.square().sum() if mjm.na else loss).backward()
    return [q.detach(), v.detach(), *(x.grad for x in inputs if x.grad is not None)]


@pytest.mark.parametrize("name", ["actuators", "quadruped"])
@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_handwritten_actuation_adjoints(name, schedule, monkeypatch):
    """The actuation passes backwards by hand (actuation.transmission_adjoint, force_adjoint):
    the gradients of qpos, qvel, ctrl, the activations and the actuators' gains equal the
    generated adjoints' within 1e-12, on joint, tendon and site transmissions; fixed and affine
    gains and biases; two actuators on one joint; controls inside and beyond ctrlrange, forces
    inside and beyond forcerange; stateless actuators, integrator, filter and filterexact
    activations with actearly and actrange. The quadruped's position servos too, with its
    contacts."""
    W = 4
    mjm = mujoco.MjModel.from_xml_string(ACTUATORS) if name == "actuators" else MODELS[name]()
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    rng = np.random.default_rng(23)
    qpos = np.tile(mjm.key_qpos[0] if mjm.nkey else mjm.qpos0, (W, 1))
    qpos[:, -3:] += rng.normal(0.0, 0.1, (W, 3))  # hinges and slides (the quadruped's last leg)
    values = (qpos, rng.normal(0.0, 0.5, (W, mjm.nv)),
              rng.uniform(-1.5, 1.5, (W, mjm.nu)),  # some beyond ctrlrange
              rng.uniform(-0.8, 0.8, (W, mjm.na)),  # some activations clamped by actrange after a step
              np.tile(mjm.actuator_gainprm[:, 0], (W, 1)) * rng.uniform(0.8, 1.2, (W, mjm.nu)))
    if name == "actuators":  # the position servo's target at the joint in world 0, beyond ctrlrange in world 1
        values[2][0, 0], values[2][1, 0] = qpos[0, 0], 1.5
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule)
    hand = _actuation_gradients(sim, mjm, values)
    if name == "actuators":
        sim.qpos, sim.qvel, sim.ctrl, sim.act = (torch.tensor(x) for x in values[:4])
        sim.forward()
        force = np.abs(sim.data.actuator_force.numpy()[:, 0])
        assert force.max() == 3.0 and force.min() < 3.0  # forcerange clamps in some worlds, not all
    monkeypatch.setattr(grad, "HANDWRITTEN", False)
    generated = _actuation_gradients(sim, mjm, values)
    assert len(hand) == (7 if mjm.na else 6)
    _assert_same(hand, generated)
