"""Gradients of `simrl.diff_step` against central finite differences.

The float64 build makes the comparison crisp (relative errors ~1e-8 where the finite
differences are exact to ~1e-9); the float32 build is checked against the float64 finite
differences. With constraints, states are chosen so that no contact, limit or friction zone
changes within the finite-difference step (activation is not differentiable)."""

import re

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from conftest import GYM_ASSETS, without_constraints
from models import BALL_CHAIN, SLIDE_HINGE, TWO_TREES

from envs import ASSETS_DIR
from simrl import Sim, diff_step

QUADRUPED_XML = ASSETS_DIR / "quadruped.xml"

# Slide, hinge and ball limits, friction loss on two dofs, dof damping (implicit in Euler, so
# the constraint force enters a second solve) and a sphere pressed into the floor.
LIMITS_FRICTION = """
<mujoco model="limits_friction_contact">
  <option timestep="0.004" integrator="Euler"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1" pos="0 0 0.06"/>
    <body pos="0 0 0.3">
      <joint name="slide" type="slide" axis="1 0 0" range="-0.1 0.1" frictionloss="0.5" damping="0.3"/>
      <geom type="box" size="0.1 0.05 0.05" mass="1" contype="0" conaffinity="0"/>
      <body pos="0.1 0 0">
        <joint name="hinge" type="hinge" axis="0 1 0" range="-10 30" frictionloss="0.2" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.2 0 -0.2" size="0.03" mass="0.3" contype="0" conaffinity="0"/>
        <body pos="0.2 0 -0.2">
          <joint name="ball" type="ball" range="0 20" damping="0.05"/>
          <geom type="sphere" size="0.05" pos="0 0 -0.07" mass="0.2"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><motor joint="slide" gear="5"/><motor joint="hinge" gear="2"/></actuator>
</mujoco>"""

NAMES = ("qpos0", "qvel0", "ctrl", "body_mass", "actuator_gain", "geom_friction")


def _euler(mjm):
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    return mjm


def _inputs(mjm, W, rng, kind):
    """(qpos, qvel, ctrl) for the gradient checks."""
    if kind == "random":
        qpos = np.tile(mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.3, (W, mjm.nq))
        for j in range(mjm.njnt):
            t = int(mjm.jnt_type[j])
            if t in (int(mujoco.mjtJoint.mjJNT_FREE), int(mujoco.mjtJoint.mjJNT_BALL)):
                a = mjm.jnt_qposadr[j] + (3 if t == int(mujoco.mjtJoint.mjJNT_FREE) else 0)
                qpos[:, a:a + 4] /= np.linalg.norm(qpos[:, a:a + 4], axis=1, keepdims=True)
        qvel = rng.normal(0.0, 1.0, (W, mjm.nv))
    elif kind == "quadruped":
        # standing, feet pressed 2 cm into the ground, joints and velocities perturbed
        qpos = np.tile(mjm.key_qpos[0], (W, 1))
        qpos[:, 2] -= 0.02
        qpos[:, 7:] += rng.normal(0.0, 0.03, (W, mjm.nq - 7))
        qvel = rng.normal(0.0, 0.2, (W, mjm.nv))
    else:  # limits_friction: every limit beyond its range, the sphere in the floor
        angle = 0.2
        qpos = np.tile([0.104, -0.2, np.cos(angle), np.sin(angle) * 0.6, np.sin(angle) * 0.8, 0.0], (W, 1))
        qvel = np.tile([0.3, -0.5, 0.1, 0.2, -0.1], (W, 1))
        qvel[1] *= 1e-3  # second world: friction loss in its quadratic zone
    # controls inside ctrlrange (clamping has zero gradient)
    lo = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1.0)
    ctrl = rng.uniform(lo + 0.1 * (hi - lo), hi - 0.1 * (hi - lo), (W, mjm.nu))
    return qpos, qvel, ctrl


def _check_gradients(sim, mjm, values, substeps=1, tol=1e-6, fd_sim=None, eps=1e-6):
    """Gradients of a random linear function of (qpos1, qvel1) vs central differences."""
    W = sim.num_worlds
    names = NAMES[:len(values)]
    gen = torch.Generator().manual_seed(0)
    dtype = sim.qpos.dtype
    inputs = [torch.tensor(v, dtype=dtype, requires_grad=True) for v in values]
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)
    qpos1, qvel1 = diff_step(sim, *inputs[:3], dict(zip(names[3:], inputs[3:], strict=True)), substeps=substeps)
    assert qpos1.grad_fn is not None
    loss = (qpos1.double() * wq).sum() + (qvel1.double() * wv).sum()
    loss.backward()

    fd_sim = fd_sim or sim
    base = [torch.tensor(v, dtype=torch.float64) for v in values]

    def f(args):
        with torch.no_grad():
            q, v = diff_step(fd_sim, *args[:3], dict(zip(names[3:], args[3:], strict=True)), substeps=substeps)
        return ((q * wq).sum() + (v * wv).sum()).item()

    errors = {}
    for k, name in enumerate(names):
        g = inputs[k].grad.double()
        fd = torch.zeros_like(base[k])
        for i in range(fd.numel()):
            if name == "body_mass" and i % mjm.nbody == 0:
                continue  # the world body's mass does not enter the dynamics
            plus = [x.clone() for x in base]
            minus = [x.clone() for x in base]
            plus[k].view(-1)[i] += eps
            minus[k].view(-1)[i] -= eps
            fd.view(-1)[i] = (f(plus) - f(minus)) / (2 * eps)
        if name == "body_mass":
            g[:, 0] = 0.0
        assert fd.norm() > 0, name
        errors[name] = ((g - fd).norm() / fd.norm()).item()
    assert max(errors.values()) < tol, errors
    return errors


def _params(mjm, W, friction=False):
    """body_mass, actuator_gain and, with contacts, geom_friction: each geom's friction scaled
    by its own random factor, so that no two geoms tie in MuJoCo's max rule (a kink)."""
    params = [np.tile(mjm.body_mass, (W, 1)), np.tile(mjm.actuator_gainprm[:, 0], (W, 1))]
    if friction:
        scale = np.random.default_rng(7).uniform(0.7, 1.3, (W, mjm.ngeom, 1))
        params.append(np.tile(mjm.geom_friction, (W, 1, 1)) * scale)
    return params


SMOOTH = {"slide_hinge": SLIDE_HINGE, "ball_chain": BALL_CHAIN, "two_trees": TWO_TREES, "humanoid": None}


def _smooth_model(name):
    xml = SMOOTH[name]
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "humanoid.xml")) if xml is None \
        else mujoco.MjModel.from_xml_string(xml)
    return _euler(without_constraints(mjm))


@pytest.mark.parametrize("name", list(SMOOTH))
def test_smooth_gradients_float64(name, rng):
    """Smooth dynamics (no constraint rows), two Euler steps: every input and parameter."""
    mjm = _smooth_model(name)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    values = [*_inputs(mjm, 2, rng, "random"), *_params(mjm, 2)]
    _check_gradients(sim, mjm, values, substeps=2, tol=1e-6)


FREE_AT_REST = """
<mujoco>
  <option timestep="0.004"><flag contact="disable"/></option>
  <worldbody>
    <body pos="0 0 1"><freejoint/><geom type="box" size="0.1 0.2 0.3" mass="1"/><site name="com"/></body>
  </worldbody>
  <actuator><motor site="com" gear="0 0 1 0 0 0"/></actuator>
</mujoco>"""


@pytest.mark.parametrize("name", ["ball_chain", "free_at_rest"])
def test_gradients_at_rest_and_at_qpos0_float64(name, rng):
    """From qpos0 at rest, two Euler steps: every hinge at its zero angle, a ball joint's spring
    at its rest orientation, a free body whose angular velocity stays exactly 0 (the identity
    shortcuts of mju_axisAngle2Quat, mju_quat2Vel and mju_quatIntegrate): the gradients are the
    rotations' (as constants the shortcuts gave a hinge's qpos, the spring's orientation and a
    still body's angular velocity none)."""
    mjm = _smooth_model("ball_chain") if name == "ball_chain" else mujoco.MjModel.from_xml_string(FREE_AT_REST)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    _, _, ctrl = _inputs(mjm, 2, rng, "random")
    qpos, qvel = np.tile(mjm.qpos0, (2, 1)), np.zeros((2, mjm.nv))
    _check_gradients(sim, mjm, [qpos, qvel, ctrl], substeps=2, tol=1e-6)


@pytest.mark.parametrize("name", ["ball_chain", "two_trees", "quadruped"])
def test_rk4_gradients_float64(name, rng):
    """RK4 (MuJoCo 4.0's, with the Munthe-Kaas correction on ball and free joints): the step
    equals Sim.step's and its gradients match finite differences, smooth and with contacts."""
    if name == "quadruped":
        mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
        values = [*_inputs(mjm, 2, rng, "quadruped"), *_params(mjm, 2, friction=True)]
    else:
        mjm = without_constraints(mujoco.MjModel.from_xml_string(SMOOTH[name]))
        values = [*_inputs(mjm, 2, rng, "random"), *_params(mjm, 2)]
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    qpos1, qvel1 = diff_step(sim, *(torch.tensor(v) for v in values[:3]))
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in values[:3])
    sim.step()
    assert torch.allclose(sim.qpos, qpos1, rtol=0, atol=1e-12)
    assert torch.allclose(sim.qvel, qvel1, rtol=0, atol=1e-10)
    _check_gradients(sim, mjm, values, tol=1e-5 if name == "quadruped" else 1e-6)


@pytest.mark.parametrize("model", ["quadruped", "limits_friction"])
def test_constraint_gradients_float64(model, rng):
    """Contacts (pyramidal, condim 3), slide/hinge/ball limits, friction loss in both zones,
    implicit damping with constraint forces: one Euler step."""
    if model == "quadruped":
        mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    else:
        mjm = mujoco.MjModel.from_xml_string(LIMITS_FRICTION)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)  # the solution to rounding: crisp differences
    values = [*_inputs(mjm, 2, rng, model), *_params(mjm, 2, friction=True)]
    # the state really has active constraints of each kind
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in values[:3])
    sim.forward()
    efc_type = sim.data.efc_type.numpy()  # [W, nefc]: each world's rows
    in_use = np.arange(efc_type.shape[1]) < sim.data.nefc.numpy()[:, None]
    force = np.where(in_use, sim.efc_force.numpy(), 0.0)
    assert ((force > 0) & (efc_type == 6)).any(axis=1).all(), "contacts"
    if model == "limits_friction":
        assert ((force > 0) & (efc_type == 3)).sum(axis=1).min() == 3, "three limits active"
        assert ((force != 0) & (efc_type == 1)).sum(axis=1).min() == (efc_type[0] == 1).sum(), "friction loss"
    # finite differences through the solver are exact to ~1e-7 relative here
    _check_gradients(sim, mjm, values, tol=1e-5)


# solimp with wide transition zones (width 5 cm for the contact, 0.2 rad for the limit; power 2
# and 3), so that impedance depends on the position where the step starts: the hand-written
# adjoint of `impedance` (simrl.sim.constraint) in both halves of its curve.
SOFT_IMPEDANCE = """
<mujoco model="soft_impedance">
  <option timestep="0.004" cone="{cone}"/>
  <default><geom solimp="0.3 0.95 0.05 0.4 2"/></default>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body pos="0 0 0.1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1"/>
    </body>
    <body pos="1 0 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-10 10" solimplimit="0.2 0.9 0.2 0.6 3"/>
      <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02" mass="0.5" contype="0" conaffinity="0"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="2"/></actuator>
</mujoco>"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_soft_impedance_gradients_float64(cone, rng):
    """Contacts and a limit inside their impedance's transition zone (imp strictly between dmin
    and dmax, on both sides of solimp's midpoint), both friction cones: one Euler step."""
    mjm = mujoco.MjModel.from_xml_string(SOFT_IMPEDANCE.format(cone=cone))
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    # world 0: sphere 1 cm in (x = 0.2 < midpoint 0.4), hinge 0.03 rad beyond its range
    # (x = 0.15 < 0.6); world 1: 3 cm in (x = 0.6 > 0.4), hinge 0.15 rad beyond (x = 0.75 > 0.6)
    lim = np.radians(10.0)
    qpos = np.array([[0.0, 0.0, 0.09, 1.0, 0.0, 0.0, 0.0, lim + 0.03],
                     [0.0, 0.0, 0.07, 1.0, 0.0, 0.0, 0.0, -lim - 0.15]])
    qpos[:, 3:7] += rng.normal(0.0, 0.05, (2, 4))
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    qvel = rng.normal(0.0, 0.1, (2, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (2, mjm.nu))
    values = [qpos, qvel, ctrl, *_params(mjm, 2, friction=True)]
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in values[:3])
    sim.forward()
    active = sim.view("efc_active").numpy() != 0
    imp = sim.view("efc_imp").numpy()
    efc_type = sim.data.efc_type.numpy()
    for w in range(2):
        for kind, lo, hi in ((3, 0.2, 0.9), (6 if cone == "pyramidal" else 7, 0.3, 0.95)):
            rows = active[w] & (efc_type[w] == kind) & (np.arange(len(active[w])) < sim.data.nefc.numpy()[w])
            assert rows.any(), (w, kind)
            assert ((imp[w, rows] > lo + 1e-3) & (imp[w, rows] < hi - 1e-3)).all(), (w, kind, imp[w, rows])
    _check_gradients(sim, mjm, values, tol=1e-5)


def test_impedance_adjoint_against_finite_differences():
    """`impedance`'s hand-written adjoint (d imp / d pos) against central differences of the
    function itself, float64: both halves of the curve, power 1, 2 and 3, a negative distance,
    and positions outside the transition zone (zero gradient)."""
    from simrl.sim.constraint import build
    from simrl.sim.types import kernel_module

    impedance = build(wp.float64).impedance
    vec5 = wp.types.vector(5, wp.float64)

    @wp.kernel(module=kernel_module(wp.float64, "test_impedance", backward=True))
    def imp_kernel(solimp: wp.array(dtype=vec5), pos: wp.array(dtype=wp.float64), margin: wp.float64,
                   out: wp.array(dtype=wp.float64)):
        i = wp.tid()
        out[i] = impedance(solimp[i], pos[i], margin)

    cases = []
    for power in (1.0, 2.0, 3.0):
        for p in (-0.031, -0.012, -0.004, 0.006, 0.027, -0.09, 0.08):
            cases.append(((0.2, 0.9, 0.05, 0.4, power), p))
    solimp = wp.array(np.array([c[0] for c in cases]), dtype=vec5)
    pos = wp.array(np.array([c[1] for c in cases]), dtype=wp.float64, requires_grad=True)
    out = wp.zeros(len(cases), dtype=wp.float64, requires_grad=True)
    margin = 0.01
    tape = wp.Tape()
    with tape:
        wp.launch(imp_kernel, dim=len(cases), inputs=[solimp, pos, margin, out])
    tape.backward(grads={out: wp.ones(len(cases), dtype=wp.float64)})
    grad = pos.grad.numpy()

    def value(p):
        x = wp.array(p, dtype=wp.float64)
        y = wp.zeros(len(cases), dtype=wp.float64)
        wp.launch(imp_kernel, dim=len(cases), inputs=[solimp, x, margin, y])
        return y.numpy()

    eps = 1e-7
    p0 = pos.numpy()
    fd = (value(p0 + eps) - value(p0 - eps)) / (2 * eps)
    inside = np.abs(p0 - margin) < 0.05
    assert inside.sum() == 15 and (np.abs(fd[inside]) > 1.0).all()
    assert np.allclose(grad, fd, rtol=1e-6, atol=1e-9), np.c_[p0, grad, fd]
    assert (grad[~inside] == 0.0).all()


@pytest.mark.parametrize("model", ["slide_hinge", "quadruped"])
def test_gradients_float32(model, rng, verify_array_access):
    """The float32 build's gradients against float64 finite differences: < 1e-2 relative.
    Runs with wp.config.verify_autograd_array_access (see the fixture)."""
    if model == "quadruped":
        mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
        kind = "quadruped"
    else:
        mjm = _smooth_model(model)
        kind = "random"
    sim32 = Sim.from_model(mjm, num_worlds=2, dtype="float32")
    sim64 = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim64.set_solver(iterations=100, tolerance=1e-15)
    values = [*_inputs(mjm, 2, rng, kind), *_params(mjm, 2, friction=kind == "quadruped")]
    _check_gradients(sim32, mjm, values, tol=1e-2, fd_sim=sim64)


# Warp's analysis of kernels that read an array and then write it (wrong generated adjoints).
# It also inspects the kernels with hand-written adjoints (in-place factorizations, named
# here), which the tape never differentiates, and the rollout's record of the budgets' overflow
# (integers, launched off the tape); a warning about any other function fails.
CUSTOM_ADJOINT = ("factor_ld", "solve_ld", "cholesky_factor", "cholesky_solve",
                  "constraint_adjoint", "constraint_solve", "solve_forward",
                  "solve_adjoint", "newton_direction", "evaluate", "solve", "merge_overflow",
                  "constraint_rhs", "constraint_qfrc_adjoint", "frame_reverse", "solver_adjoint", "qfrc_adjoint",
                  "linear_solve_adjoint", "acceleration_adjoint", "mass_matrix_adjoint")


# the convex collision's search (GJK/EPA, multiccd): its kernels run off the tape in a module
# without adjoints (simrl.sim.grad's convex_detect), which Warp analyses all the same when it
# builds that module while the check is on
SEARCH_FILES = ("collision_gjk.py", "collision_multiccd.py")


@pytest.fixture
def verify_array_access(capfd):
    previous = wp.config.verify_autograd_array_access
    wp.config.verify_autograd_array_access = True
    yield
    wp.config.verify_autograd_array_access = previous
    out = capfd.readouterr()
    text = out.out + out.err
    kernels = re.findall(r"in kernel (\w+) at ([^\s]+)", text)
    offending = [k for k in kernels if k[0] not in CUSTOM_ADJOINT and not k[1].split(":")[0].endswith(SEARCH_FILES)]
    assert not offending, f"read-then-write in differentiated kernels: {offending}"
    assert "being written to after it has been read" not in "".join(
        line for line in text.splitlines() if not any(f"kernel {c} " in line for c in CUSTOM_ADJOINT)
        and not any(f"{f}:" in line for f in SEARCH_FILES))


def test_repeat_release_and_substeps(rng):
    """A repeated call gives identical gradients (no state leaks through the Sim or the tape);
    the step's buffers are released by backward; substeps equal sim.step(n)."""
    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float64")
    qpos, qvel, ctrl = (torch.tensor(v, requires_grad=True) for v in _inputs(mjm, 3, rng, "quadruped"))
    state = sim.qpos.clone()
    grads = []
    for _ in range(2):
        qpos1, qvel1 = diff_step(sim, qpos, qvel, ctrl, substeps=4)
        node = qpos1.grad_fn
        assert len(node.rollout.datas) == 4  # one set of buffers per physics step
        (qpos1[:, :3].sum() + qvel1.square().sum()).backward()
        assert node.rollout is None  # tape and buffers released
        grads.append([t.grad.clone() for t in (qpos, qvel, ctrl)])
        for t in (qpos, qvel, ctrl):
            t.grad = None
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)
    assert torch.equal(sim.qpos, state)  # the Sim's own state is untouched

    sim.qpos, sim.qvel, sim.ctrl = qpos.detach(), qvel.detach(), ctrl.detach()
    sim.step(4)
    assert torch.allclose(sim.qpos, qpos1.detach(), rtol=0, atol=1e-9)
    assert torch.allclose(sim.qvel, qvel1.detach(), rtol=0, atol=1e-7)


def test_quadruped_rollout_32_steps():
    """32 chained steps of the quadruped on the ground; loss = final trunk position and
    velocity; the gradient w.r.t. the 32 x 12 controls agrees with finite differences
    (computed by Sim.step, one perturbed control per world) in sign and direction."""
    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    H, nu = 32, mjm.nu
    rng = np.random.default_rng(3)
    ctrl_seq = np.tile(mjm.key_ctrl[0], (H, 1)) + rng.normal(0.0, 0.2, (H, nu))
    qpos0 = torch.tensor(mjm.key_qpos[0][None])
    qvel0 = torch.zeros(1, mjm.nv, dtype=torch.float64)
    weights = torch.tensor([1.0, 1.0, 1.0, 0.5, 0.5, 0.5], dtype=torch.float64)

    def loss_of(qpos, qvel):
        return (torch.cat([qpos[:, :3], qvel[:, :3]], dim=1) * weights).sum(dim=1)

    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    ctrl = torch.tensor(ctrl_seq, requires_grad=True)
    qpos, qvel = qpos0, qvel0
    for t in range(H):
        qpos, qvel = diff_step(sim, qpos, qvel, ctrl[t:t + 1])
    loss_of(qpos, qvel).sum().backward()
    grad = ctrl.grad.numpy().ravel()

    # finite differences: world 2i + 1 / 2i + 2 perturb control entry i by +- eps
    n = H * nu
    eps = 1e-5
    fd_sim = Sim.from_model(mjm, num_worlds=2 * n + 1, dtype="float64")
    fd_sim.qpos = qpos0.repeat(2 * n + 1, 1)
    fd_sim.qvel = qvel0.repeat(2 * n + 1, 1)
    seq = np.repeat(ctrl_seq[None], 2 * n + 1, axis=0)  # [world, t, nu]
    flat = seq.reshape(2 * n + 1, n)
    flat[1 + 2 * np.arange(n), np.arange(n)] += eps
    flat[2 + 2 * np.arange(n), np.arange(n)] -= eps
    for t in range(H):
        fd_sim.ctrl = torch.tensor(seq[:, t])
        fd_sim.step()
    losses = loss_of(fd_sim.qpos, fd_sim.qvel).numpy()
    fd = (losses[1::2] - losses[2::2]) / (2 * eps)
    assert abs(losses[0] - loss_of(qpos, qvel).item()) < 1e-9  # same trajectory as the engine

    cosine = grad @ fd / (np.linalg.norm(grad) * np.linalg.norm(fd))
    significant = np.abs(fd) > 1e-3 * np.abs(fd).max()
    sign_agreement = np.mean(np.sign(grad[significant]) == np.sign(fd[significant]))
    assert cosine > 0.95, cosine
    assert sign_agreement >= 0.95, sign_agreement


def test_errors_name_the_problem():
    mjm = _euler(mujoco.MjModel.from_xml_string(SLIDE_HINGE))
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    qpos = torch.tensor(np.tile(mjm.qpos0, (2, 1)))
    qvel = torch.zeros(2, mjm.nv, dtype=torch.float64)
    ctrl = torch.zeros(2, mjm.nu, dtype=torch.float64)
    with pytest.raises(ValueError, match=r"qvel0 must have shape \(2, 6\)"):
        diff_step(sim, qpos, qvel[:, :3], ctrl)
    with pytest.raises(TypeError, match="ctrl must be a floating-point tensor"):
        diff_step(sim, qpos, qvel, ctrl.long())
    with pytest.raises(ValueError, match="qpos0 contains NaN"):
        diff_step(sim, qpos * float("nan"), qvel, ctrl)
    with pytest.raises(KeyError, match="cannot differentiate parameter 'geom_size'"):
        diff_step(sim, qpos, qvel, ctrl, {"geom_size": torch.zeros(2, 3)})
    with pytest.raises(ValueError, match="substeps must be a positive integer"):
        diff_step(sim, qpos, qvel, ctrl, substeps=0)
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="device"):
            diff_step(sim, qpos.cuda(), qvel, ctrl)


def test_reused_step_buffers_give_identical_results():
    """The step buffers come back from simrl.sim.grad's pool cleared where a step reads them
    before writing: the same 3-step chain on the quadruped with contacts and implicit damping,
    run three times on reused buffers, another chain's run between the first two, gives the
    same states and gradients bit for bit (a value or gradient left by the other chain would
    change them)."""
    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    sim = Sim.from_model(mjm, num_worlds=4, dtype="float32")
    assert sim.model.struct.euler_damp
    qpos, qvel, ctrl = _inputs(mjm, 4, np.random.default_rng(3), "quadruped")
    other = _inputs(mjm, 4, np.random.default_rng(4), "quadruped")
    results = []
    for run in range(4):
        values = other if run == 1 else (qpos, qvel, ctrl)
        inputs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values]
        q, v = inputs[0], inputs[1]
        for _ in range(3):
            q, v = diff_step(sim, q, v, inputs[2])
        (q.square().sum() + v.square().sum()).backward()
        if run != 1:
            results.append([q.detach(), v.detach(), *(x.grad for x in inputs)])
    sim.qpos, sim.qvel = torch.tensor(qpos, dtype=torch.float32), torch.tensor(qvel, dtype=torch.float32)
    sim.forward()
    assert int(sim.contact.active.sum()) > 0  # the chain starts in contact
    for later in results[1:]:
        for a, b in zip(results[0], later, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("integrator", ["euler", "rk4"])
def test_replayed_launches_and_the_fused_forward_give_the_launches_results(integrator, monkeypatch):
    """The differentiable step records an evaluation's launches with its pooled buffers and
    replays them in later rollouts (grad.Rollout._command), packing only the arguments that
    changed; the fused schedule's forward runs an evaluation's stages in one kernel
    (grad.FUSED_FORWARD). A chain of calls on the quadruped (contacts, implicit damping or RK4;
    body masses, actuator gains and geom friction as parameters; sensors on the last call; two
    substeps) gives the states, sensors and gradients of the same chain launched directly by
    wp.launch, a kernel per segment, bit for bit: on the first run (recording) and on two runs
    that replay, with another chain's run (other parameters, no sensors: other recorded
    arguments and another sequence) between them."""
    from simrl.sim import grad, schedule

    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    if integrator == "rk4":
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float32")
    rng = np.random.default_rng(11)
    values = [*_inputs(mjm, 3, rng, "quadruped"), *_params(mjm, 3, friction=True)]
    other = [*_inputs(mjm, 3, rng, "quadruped"), *_params(mjm, 3, friction=True)]

    def chain(values, sensors=True):
        inputs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values]
        q, v, ctrl, mass, gain, friction = inputs
        params = {"body_mass": mass, "actuator_gain": gain, "geom_friction": friction}
        q, v = diff_step(sim, q, v, ctrl, params, substeps=2)
        q, v, s = diff_step(sim, q, v, ctrl, params, substeps=2, sensors=sensors) if sensors else (q, v, None)
        loss = q.square().sum() + v.square().sum() + (s.square().sum() if sensors else 0.0)
        loss.backward()
        return [q.detach(), v.detach(), *([s.detach()] if sensors else []), *(x.grad for x in inputs)]

    monkeypatch.setattr(grad, "_POOL", grad._Pool())
    replayed = [chain(values)]
    chain(other, sensors=False)
    replayed += [chain(values), chain(values)]
    monkeypatch.setattr(schedule, "WARP_LAUNCH", None)  # launched directly by wp.launch
    monkeypatch.setattr(grad, "FUSED_FORWARD", False)  # a kernel per segment
    monkeypatch.setattr(grad, "_POOL", grad._Pool())
    direct = chain(values)
    assert len(direct) == 9 and all(torch.isfinite(x).all() for x in direct)
    for run in replayed:
        for a, b in zip(direct, run, strict=True):
            assert torch.equal(a, b)


@pytest.mark.parametrize("integrator", ["euler", "implicitfast"])
def test_one_acceleration_adjoint_gives_the_three_launches_bits(integrator, monkeypatch):
    """An evaluation's last solve, constraint forces and constraint solve run backwards in one
    launch (grad.acceleration_adjoint) where no sensor's adjoint runs between them: the same
    functions in the same order as the three launches, so a chain on the quadruped (contacts,
    implicit damping or implicitfast, parameters) gives their states and gradients bit for bit."""
    from simrl.sim import grad

    mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
    if integrator == "implicitfast":
        mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float32")
    values = [*_inputs(mjm, 3, np.random.default_rng(8), "quadruped"), *_params(mjm, 3, friction=True)]

    def chain():
        inputs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values]
        q, v, ctrl, mass, gain, friction = inputs
        params = {"body_mass": mass, "actuator_gain": gain, "geom_friction": friction}
        for _ in range(2):
            q, v = diff_step(sim, q, v, ctrl, params, substeps=2)
        (q.square().sum() + v.square().sum()).backward()
        return [q.detach(), v.detach(), *(x.grad for x in inputs)]

    one = chain()
    monkeypatch.setattr(grad, "ONE_ACCELERATION_ADJOINT", False)
    three = chain()
    for a, b in zip(one, three, strict=True):
        assert torch.isfinite(a).all() and torch.equal(a, b)


@pytest.mark.parametrize("case", ["euler", "rk4", "elliptic", "generated", "limits_friction"])
def test_gradients_past_the_rows_in_use_are_never_read(case, monkeypatch):
    """On the CPU the backward zeroes the constraint rows' gradients (efc_J, efc_D, ...) only over
    the rows some world uses (grad.ZERO_ROWS_IN_USE), the rows past them keeping what an earlier
    evaluation left. With those rows filled with NaN instead, a chain of calls (contacts and
    limits, implicit damping or RK4, the elliptic cone, the generated adjoints in place of the
    hand-written ones; friction loss and ball limits; parameters, sensors on the last call where
    the model has some) gives the gradients
    of the slab zeroed whole, bit for bit: no adjoint reads a row past its world's nefc."""
    from simrl.sim import grad

    if case == "limits_friction":  # the floor lowered: the contact's rows unused
        mjm = mujoco.MjModel.from_xml_string(LIMITS_FRICTION.replace('pos="0 0 0.06"', 'pos="0 0 -1"'))
        values = list(_inputs(mjm, 2, np.random.default_rng(5), "limits_friction"))
    else:
        mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED_XML))
        if case == "rk4":
            mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_RK4
        if case == "elliptic":
            mjm.opt.cone = mujoco.mjtCone.mjCONE_ELLIPTIC
        values = [*_inputs(mjm, 3, np.random.default_rng(5), "quadruped"), *_params(mjm, 3, friction=True)]
    if case == "generated":
        monkeypatch.setattr(grad, "HANDWRITTEN", False)
    sim = Sim.from_model(mjm, num_worlds=values[0].shape[0], dtype="float32")

    def chain():
        inputs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values]
        q, v, ctrl = inputs[:3]
        params = dict(zip(("body_mass", "actuator_gain", "geom_friction"), inputs[3:], strict=False))
        q, v = diff_step(sim, q, v, ctrl, params, substeps=2)
        if not mjm.nsensordata:
            q, v = diff_step(sim, q, v, ctrl, params)
            (q.square().sum() + v.square().sum()).backward()
            return [q.detach(), v.detach(), *(x.grad for x in inputs)]
        q, v, s = diff_step(sim, q, v, ctrl, params, sensors=True)
        (q.square().sum() + v.square().sum() + s.square().sum()).backward()
        return [q.detach(), v.detach(), s.detach(), *(x.grad for x in inputs)]

    zero_rows, poisoned = grad._zero_rows, []

    def poison(arrays, n):
        zero_rows(arrays, n)
        for a, row in arrays:  # (the bytes of a [W, njmax, ...] array, a row's bytes)
            a[:, n * row:] = 0xFF  # every byte set: a NaN in float32 and float64
            poisoned.append(a.shape[1] // row - n)

    monkeypatch.setattr(grad, "_POOL", grad._Pool())
    monkeypatch.setattr(grad, "ZERO_ROWS_IN_USE", False)
    whole = chain()
    monkeypatch.setattr(grad, "ZERO_ROWS_IN_USE", True)
    monkeypatch.setattr(grad, "_zero_rows", poison)
    for _ in range(2):  # the second on the buffers of the first
        rows = chain()
        for a, b in zip(whole, rows, strict=True):
            assert torch.isfinite(a).all() and torch.equal(a, b)
    assert poisoned and min(poisoned) > 0  # rows were poisoned in every zeroing


FREE_BOX_ARM = """
<mujoco>
  <option integrator="implicitfast" timestep="0.01"/>
  <worldbody>
    <geom type="plane" size="5 5 0.1"/>
    <body name="box" pos="0 0 0.095">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
    <body name="arm" pos="1 0 0.5">
      <joint name="hinge" type="hinge" axis="0 1 0" damping="0.3"/>
      <geom type="capsule" fromto="0 0 0 0 0 -0.48" size="0.03"/>
    </body>
  </worldbody>
  <actuator><velocity joint="hinge" kv="2"/></actuator>
</mujoco>"""


def test_implicitfast_free_body_in_contact_gradients_float64():
    """implicitfast with a standalone free body (its rows of M - h qDeriv solved apart,
    mj_implicitSkip) resting on the floor, beside a damped hinge driven by a velocity actuator
    (qDeriv's gain term): one step, whose acceleration the engine's own world functions compute
    in the forward kernel (grad.build's accelerate), against central differences."""
    mjm = mujoco.MjModel.from_xml_string(FREE_BOX_ARM)
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    assert sim.model.struct.free_body_num == 1 and sim.model.struct.implicitfast
    sim.set_solver(iterations=100, tolerance=1e-15)
    rng = np.random.default_rng(0)
    qpos = np.tile(mjm.qpos0, (2, 1))
    qpos[:, 2], qpos[:, 7] = 0.095, 0.3  # the box 5 mm into the floor, the arm swung
    qvel = rng.normal(0.0, 0.3, (2, mjm.nv))
    ctrl = rng.uniform(-0.5, 0.5, (2, mjm.nu))
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in (qpos, qvel, ctrl))
    sim.forward()
    assert (sim.data.nefc.numpy() > 0).all()  # in contact
    _check_gradients(sim, mjm, [qpos, qvel, ctrl], tol=1e-5)
