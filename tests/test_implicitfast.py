"""The implicitfast integrator (<option integrator="implicitfast">) against MuJoCo 4.0.

MuJoCo's mj_implicitSkip with implicitfast integrates
    qacc = (M - h qDeriv)^-1 (qfrc_smooth + qfrc_constraint),
qDeriv = d qfrc_smooth / d qvel without RNE's part: the actuators' velocity derivative (affine
bias kv, affine gain times the clamped ctrl, gear^2; none where forcerange clamps the force)
minus the dof damping; none for the actuators of a joint whose actuatorfrcrange clamps their
sum; the constraint forces are the solver's, found with M.

- one step from 64 random states (controls a little beyond ctrlrange, forces clamped by
  forcerange in some worlds): the integrated acceleration within 1e-10 (relative, float64) and
  1e-4 (float32) of MuJoCo's, the next state likewise (and with dampers, actuation, ctrl
  clamping or actuator groups disabled); negative control: Euler's step misses
  the float32 tolerance;
- the quadruped with contacts over 200 steps: qpos within 1e-6 of mj_step (float64), 1e-4
  (float32); Euler's trajectory misses both;
- fused == wide bit for bit (also with blocks of 8 threads per world, and diff_step's outputs);
  diff_step's gradients against central finite differences (float64; float32 within 1e-2,
  with Warp's autograd array-access check), ctrl's through qDeriv included;
- tendons: the tendon dampers and the velocity-dependent actuators on tendons put
  ten_qderiv ten_J' ten_J into qDeriv, which MuJoCo gathers onto M's sparsity (a tendon
  coupling two sibling fingers loses that coupling): one step from random states and a
  200-step trajectory equal MuJoCo's; negative controls: the ungathered qDeriv and the
  diagonal-only one miss;
- standalone free bodies, whose 6x6 block MuJoCo solves apart with the gyroscopic derivative
  (mjd_freeMhat): one step from random states and a 200-step trajectory with contacts equal
  MuJoCo's; negative control: Euler misses;
- `implicit` is refused by name.
"""

import mujoco
import numpy as np
import pytest
import torch
from conftest import qpos_distance, random_ctrl, random_states
from test_grad import _check_gradients, _inputs, _params, verify_array_access  # noqa: F401 (a fixture)
from test_schedule import _diff_rollout, assert_same_data, cpu_blocks  # noqa: F401 (a fixture)

from envs import ASSETS_DIR
from simrl import Sim, UnsupportedFeatureError, diff_step

IMPLICITFAST = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
EULER = mujoco.mjtIntegrator.mjINT_EULER
TOL = {"float64": 1e-10, "float32": 1e-4}

# A chain of slide, hinges and a ball with dof damping; position and velocity actuators with kv
# (two on the slide's dof), a position actuator whose force forcerange clamps in some states, a
# servo with an affine gain (so qDeriv depends on ctrl) and a motor (no derivative); the elbow's
# actuatorfrcrange clamps the sum of its two actuators in some states (MuJoCo 4.0 then drops
# their derivative).
CHAIN = """
<mujoco model="implicitfast_chain">
  <option timestep="0.01" integrator="implicitfast"><flag contact="disable"/></option>
  <worldbody>
    <body name="base" pos="0 0 1">
      <joint name="slide" type="slide" axis="1 0 0" damping="0.5"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <body name="upper">
        <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.2"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" mass="0.5"/>
        <body name="lower" pos="0.3 0 0">
          <joint name="elbow" type="hinge" axis="0 0 1" damping="0.05" actuatorfrcrange="-1.5 1.5"/>
          <geom type="capsule" fromto="0 0 0 0.25 0 -0.1" size="0.03" mass="0.3"/>
          <body name="hand" pos="0.25 0 -0.1">
            <joint name="wrist" type="ball" damping="0.02"/>
            <geom type="sphere" size="0.05" pos="0.05 0 0" mass="0.2"/>
            <body name="finger" pos="0.1 0 0">
              <joint name="finger" type="hinge" axis="1 0 0"/>
              <geom type="capsule" fromto="0 0 0 0 0.1 0" size="0.02" mass="0.1"/>
            </body>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <position name="slide_pos" joint="slide" kp="40" kv="6" ctrlrange="-0.5 0.5"/>
    <velocity name="slide_vel" joint="slide" kv="2"/>
    <position name="shoulder_pos" joint="shoulder" kp="20" kv="2" gear="1.5" forcerange="-3 3"/>
    <velocity name="elbow_vel" joint="elbow" kv="0.5" gear="2"/>
    <motor name="elbow_motor" joint="elbow" gear="0.5" ctrlrange="-1 1"/>
    <general name="finger_servo" joint="finger" gaintype="affine" gainprm="0.5 0 0.01" biastype="affine"
             biasprm="0 -0.5 -0.02" ctrlrange="-1 1"/>
  </actuator>
</mujoco>"""


# A gripper on a slide: the fixed tendon "split" couples the sibling fingers' joints (and the
# slide), with damping and an actuator whose bias has a kv term and whose affine gain makes
# the derivative depend on ctrl, clamped by forcerange in some states; the spatial tendon
# through three sites on one chain has damping and a position actuator with kv.
TENDON = """
<mujoco model="implicitfast_tendon">
  <option timestep="0.01" integrator="implicitfast"><flag contact="disable"/></option>
  <worldbody>
    <body name="base" pos="0 0 1">
      <joint name="slide" type="slide" axis="1 0 0" damping="0.3"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <site name="s0" pos="0 0.1 0"/>
      <body name="left">
        <joint name="left" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
        <site name="s1" pos="0.2 0 0.02"/>
        <body name="left_tip" pos="0.3 0 0">
          <joint name="left_tip" axis="0 0 1"/>
          <geom type="capsule" fromto="0 0 0 0.2 0 0" size="0.02"/>
          <site name="s2" pos="0.15 0.01 0"/>
        </body>
      </body>
      <body name="right">
        <joint name="right" axis="0 1 0"/>
        <geom type="capsule" fromto="0 0 0 -0.3 0 0" size="0.03"/>
      </body>
    </body>
  </worldbody>
  <tendon>
    <fixed name="split" damping="0.7">
      <joint joint="left" coef="0.5"/><joint joint="right" coef="-0.5"/><joint joint="slide" coef="0.2"/>
    </fixed>
    <spatial name="cord" damping="0.4"><site site="s0"/><site site="s1"/><site site="s2"/></spatial>
  </tendon>
  <actuator>
    <general name="grip" tendon="split" gaintype="affine" gainprm="0.3 0 0.05" biastype="affine"
             biasprm="0 -10 -2" ctrlrange="0 1" forcerange="-1.5 1.5"/>
    <position name="cord" tendon="cord" kp="5" kv="0.5"/>
    <position name="tip" joint="left_tip" kp="1" kv="0.1"/>
  </actuator>
</mujoco>"""

# A box with a free joint (dof damping; its centre of mass off the joint's origin) on a plane,
# held by a damped spatial tendon from a world site, beside a damped, actuated hinge.
FREE = """
<mujoco model="implicitfast_free">
  <option timestep="0.005" integrator="implicitfast"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <site name="anchor" pos="0 0 1.2"/>
    <body name="box" pos="0 0 0.3" quat="0.9 0.1 0.3 0.2">
      <joint name="box" type="free" damping="0.02"/>
      <geom type="box" size="0.1 0.2 0.05" pos="0.05 0.02 -0.03" quat="0.8 0.3 0.1 0.4"/>
      <geom type="sphere" size="0.04" pos="0.2 0 0"/>
      <site name="hook" pos="0.1 0.1 0.05"/>
    </body>
    <body name="arm" pos="1 0 0.5">
      <joint name="hinge" axis="0 1 0" damping="0.1"/>
      <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03"/>
    </body>
  </worldbody>
  <tendon><spatial name="cord" damping="0.5"><site site="anchor"/><site site="hook"/></spatial></tendon>
  <actuator><position joint="hinge" kp="5" kv="0.5"/></actuator>
</mujoco>"""


def chain(integrator=IMPLICITFAST) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(CHAIN)
    mjm.opt.integrator = integrator
    return mjm


def tendon_model(integrator=IMPLICITFAST) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(TENDON)
    mjm.opt.integrator = integrator
    return mjm


def free_model(integrator=IMPLICITFAST) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(FREE)
    mjm.opt.integrator = integrator
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    return mjm


MODELS = {"chain": lambda: chain(), "tendon": lambda: tendon_model(), "free": lambda: free_model()}


def quadruped(integrator=IMPLICITFAST) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    mjm.opt.integrator = integrator
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    return mjm


def mujoco_step(mjm, qpos, qvel, ctrl):
    """mj_step from each state: (qpos1, qvel1) [W, ...]."""
    mjd = mujoco.MjData(mjm)
    out_q, out_v = [], []
    for w in range(qpos.shape[0]):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_step(mjm, mjd)
        out_q.append(mjd.qpos.copy())
        out_v.append(mjd.qvel.copy())
    return np.stack(out_q), np.stack(out_v)


def simrl_step(mjm, qpos, qvel, ctrl, dtype, schedule="auto"):
    sim = Sim.from_model(mjm, device="cpu", num_worlds=qpos.shape[0], dtype=dtype, schedule=schedule)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in (qpos, qvel, ctrl))
    sim.step()
    return sim


def relative(a, b) -> float:
    """Worst relative difference of rows a[w] and b[w]."""
    return float(max(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12) for x, y in zip(a, b, strict=True)))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_step_matches_mujoco(dtype, rng):
    mjm = chain()
    h = mjm.opt.timestep
    qpos, qvel, ctrl = random_states(mjm, 64, rng)
    ref_q, ref_v = mujoco_step(mjm, qpos, qvel, ctrl)
    ref_acc = (ref_v - qvel) / h

    # the batch has worlds where forcerange clamps the shoulder actuator's force and where the
    # elbow's actuatorfrcrange clamps its actuators' sum, and worlds where they do not
    mjd = mujoco.MjData(mjm)
    clamped, joint_clamped = [], []
    elbow = mjm.jnt_dofadr[mjm.joint("elbow").id]
    for w in range(64):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_forward(mjm, mjd)
        clamped.append(abs(mjd.actuator_force[2]) >= 3.0)
        joint_clamped.append(abs(mjd.qfrc_actuator[elbow]) >= 1.5)
    assert mjm.actuator_forcelimited[2] and 5 < sum(clamped) < 59, sum(clamped)
    assert 5 < sum(joint_clamped) < 59, sum(joint_clamped)

    sim = simrl_step(mjm, qpos, qvel, ctrl, dtype)
    acc = sim.view("qacc_int").numpy().astype(np.float64)
    err_acc = relative(acc, ref_acc)
    err_q = qpos_distance(mjm, sim.qpos.numpy().astype(np.float64), ref_q)
    err_v = np.abs(sim.qvel.numpy().astype(np.float64) - ref_v).max()
    print(f"{dtype}: acceleration {err_acc:.2e} (relative), qpos {err_q:.2e}, qvel {err_v:.2e}")
    assert err_acc < TOL[dtype], f"integrated acceleration differs from mj_step's by {err_acc:.3e}"
    assert err_q < TOL[dtype] and err_v < TOL[dtype] * np.abs(ref_v).max(), (err_q, err_v)

    # negative control: simrl's Euler step (implicit in damping only) on the same states
    euler = simrl_step(chain(EULER), qpos, qvel, ctrl, dtype)
    miss = relative(euler.view("qacc_int").numpy().astype(np.float64), ref_acc)
    print(f"negative control (Euler): {miss:.2e}")
    assert miss > TOL["float32"], f"Euler's acceleration is only {miss:.2e} from implicitfast's"


@pytest.mark.parametrize("flag", ["damper", "actuation", "clampctrl", "actuator group"])
def test_disabled_terms_leave_qderiv(flag, rng):
    """With the dampers, the actuation, ctrl clamping or the actuators' group disabled, qDeriv
    loses the matching terms as in MuJoCo (mjd_passive_vel, mjd_actuator_vel): one step, float64."""
    mjm = chain()
    if flag == "actuator group":
        mjm.opt.disableactuator = 1  # group 0: every actuator of the chain
    else:
        mjm.opt.disableflags |= getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag.upper()}")
    qpos, qvel, ctrl = random_states(mjm, 16, rng)
    ref_q, ref_v = mujoco_step(mjm, qpos, qvel, ctrl)
    sim = simrl_step(mjm, qpos, qvel, ctrl, "float64")
    err = relative(sim.view("qacc_int").numpy(), (ref_v - qvel) / mjm.opt.timestep)
    print(f"{flag} disabled: acceleration {err:.2e}")
    assert err < TOL["float64"]
    assert qpos_distance(mjm, sim.qpos.numpy(), ref_q) < TOL["float64"]


def test_quadruped_trajectory_matches_mujoco(rng):
    """200 steps (1 s) from the home keyframe dropped from 5 cm, random controls around the
    keyframe's: contacts, joint limits and clamped actuator forces."""
    mjm = quadruped()
    steps = 200
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)
    mjd.qpos[2] += 0.05
    state = (mjd.qpos.copy(), mjd.qvel.copy())
    ctrl = mjd.ctrl + rng.normal(0.0, 0.3, (steps, mjm.nu))

    def mujoco_trajectory(model):
        d = mujoco.MjData(model)
        d.qpos[:], d.qvel[:] = state
        out, clamped = [], 0
        for t in range(steps):
            d.ctrl[:] = ctrl[t]
            mujoco.mj_step(model, d)
            out.append(d.qpos.copy())
            clamped += int(np.any(np.abs(d.actuator_force) >= mjm.actuator_forcerange[:, 1]))
        return np.stack(out), clamped

    def simrl_trajectory(model, dtype):
        sim = Sim.from_model(model, device="cpu", num_worlds=1, dtype=dtype)
        sim.qpos, sim.qvel = (torch.as_tensor(x[None], dtype=sim.torch_dtype) for x in state)
        out, active = [], 0
        for t in range(steps):
            sim.ctrl = torch.as_tensor(ctrl[t][None], dtype=sim.torch_dtype)
            sim.step()
            out.append(sim.qpos[0].numpy().astype(np.float64))
            active = max(active, int(sim.view("efc_nactive").max()))
        assert not sim.nan_worlds.any()
        return np.stack(out), active

    ref, clamped = mujoco_trajectory(mjm)
    assert clamped > 0, "some step should clamp an actuator force (no derivative for it)"
    tol = {"float64": 1e-6, "float32": 1e-4}
    for dtype in ("float64", "float32"):
        ours, active = simrl_trajectory(mjm, dtype)
        assert active > 0, "the trajectory should have contacts"
        err = max(qpos_distance(mjm, x, y) for x, y in zip(ours, ref, strict=True))
        print(f"{dtype}: trajectory error {err:.2e}")
        assert err < tol[dtype], f"{dtype} trajectory differs from mj_step's by {err:.3e}"
    euler, _ = simrl_trajectory(quadruped(EULER), "float64")
    miss = max(qpos_distance(mjm, x, y) for x, y in zip(euler, ref, strict=True))
    print(f"negative control (Euler): {miss:.2e}")
    assert miss > max(tol.values()), f"Euler's trajectory is only {miss:.2e} from implicitfast's"


@pytest.mark.parametrize("model", ["chain", "tendon", "free", "quadruped"])
def test_wide_equals_fused_bit_for_bit(model, rng):
    mjm = MODELS[model]() if model in MODELS else quadruped()
    W = 4
    if model != "quadruped":
        qpos, qvel, ctrl = random_states(mjm, W, rng)
    else:
        qpos, qvel, ctrl = _inputs(mjm, W, rng, "quadruped")
    sims = []
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, device="cpu", num_worlds=W, dtype="float64", schedule=schedule)
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
        sim.step(20)
        assert not sim.nan_worlds.any()
        sims.append(sim)
    assert_same_data(*sims)


@pytest.mark.usefixtures("cpu_blocks")
def test_lanes_of_a_block_give_the_bits_of_one_thread(rng):
    """The wide schedule's world functions (the M - h qDeriv factorization among them) run by
    blocks of 8 cooperative threads give the bits of the fused schedule."""
    mjm = chain()
    qpos, qvel, ctrl = random_states(mjm, 3, rng)
    sims = []
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, device="cpu", num_worlds=3, dtype="float64", schedule=schedule)
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
        sim.step(10)
        sims.append(sim)
    assert_same_data(*sims)


@pytest.mark.parametrize("model", ["chain", "quadruped"])
def test_wide_diff_step_equals_fused(model):
    """diff_step in the two schedules: outputs bit for bit, gradients within 1e-12 (the order in
    which generated adjoints accumulate shared reads differs)."""
    mjm = chain() if model == "chain" else quadruped()
    (out_f, grad_f), (out_w, grad_w) = _diff_rollout(mjm, "fused", steps=3), _diff_rollout(mjm, "wide", steps=3)
    for a, b in zip(out_f, out_w, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_f, grad_w, strict=True):
        assert torch.isfinite(a).all()
        assert ((a - b).abs().max() / a.abs().max().clamp_min(1e-300)).item() <= 1e-12


def test_gradients_smooth_float64(rng):
    """Two implicitfast steps of the chain: gradients w.r.t. qpos, qvel, ctrl (which also enters
    qDeriv through the servo's affine gain), body masses and actuator gains."""
    mjm = chain()
    sim = Sim.from_model(mjm, device="cpu", num_worlds=2, dtype="float64")
    values = [*_inputs(mjm, 2, rng, "random"), *_params(mjm, 2)]
    # the step of diff_step is Sim.step's
    qpos1, qvel1 = diff_step(sim, *(torch.tensor(v) for v in values[:3]))
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in values[:3])
    sim.step()
    assert torch.allclose(sim.qpos, qpos1, rtol=0, atol=1e-13)
    assert torch.allclose(sim.qvel, qvel1, rtol=0, atol=1e-12)
    errors = _check_gradients(sim, mjm, values, substeps=2, tol=1e-6)
    print("relative gradient errors:", {k: f"{v:.1e}" for k, v in errors.items()})


def test_ctrl_gradient_through_qderiv():
    """The servo's affine gain puts ctrl into qDeriv (gainprm[2] ctrl): d qvel1 / d ctrl of the
    finger against finite differences of mj_step, within 1e-8; negative control: the gradient
    with qDeriv held fixed, h (M - h qDeriv)^-1 d qfrc_actuator / d ctrl, misses by more than 1%."""
    mjm = chain()
    h = mjm.opt.timestep
    finger, servo = mjm.jnt_dofadr[mjm.joint("finger").id], mjm.actuator("finger_servo").id
    qvel = np.random.default_rng(3).normal(0.0, 1.0, mjm.nv)
    qvel[finger] = 8.0
    ctrl = np.array([0.1, 0.2, 0.1, 0.3, 0.2, 0.5])
    sim = Sim.from_model(mjm, device="cpu", num_worlds=1, dtype="float64")
    c = torch.tensor(ctrl[None], requires_grad=True)
    _, qvel1 = diff_step(sim, torch.tensor(mjm.qpos0[None]), torch.tensor(qvel[None]), c)
    qvel1[0, finger].backward()
    grad = c.grad[0, servo].item()

    mjd = mujoco.MjData(mjm)

    def finger_qvel1(u):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = mjm.qpos0, qvel, ctrl
        mjd.ctrl[servo] = u
        mujoco.mj_step(mjm, mjd)
        return mjd.qvel[finger]

    eps = 1e-6
    fd = (finger_qvel1(ctrl[servo] + eps) - finger_qvel1(ctrl[servo] - eps)) / (2 * eps)
    # qDeriv at the state (the shoulder's force is clamped here: no derivative), then the
    # frozen-qDeriv gradient
    mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = mjm.qpos0, qvel, ctrl
    mujoco.mj_forward(mjm, mjd)
    M = np.zeros((mjm.nv, mjm.nv))
    mujoco.mj_fullM(mjm, mjd, M)
    qderiv = -mjm.dof_damping.copy()
    shoulder = mjm.actuator("shoulder_pos").id
    assert abs(mjd.actuator_force[shoulder]) >= mjm.actuator_forcerange[shoulder, 1]
    elbow = mjm.jnt_dofadr[mjm.joint("elbow").id]
    elbow_clamped = abs(mjd.qfrc_actuator[elbow]) >= 1.5  # its actuatorfrcrange
    for a in range(mjm.nu):
        dof = mjm.jnt_dofadr[mjm.actuator_trnid[a, 0]]
        if a == shoulder or (dof == elbow and elbow_clamped):
            continue
        deriv = mjm.actuator_biasprm[a, 2] if mjm.actuator_biastype[a] else 0.0
        if mjm.actuator_gaintype[a]:
            deriv += mjm.actuator_gainprm[a, 2] * ctrl[a]
        qderiv[dof] += mjm.actuator_gear[a, 0] ** 2 * deriv
    dforce = np.zeros(mjm.nv)
    dforce[finger] = mjm.actuator_gear[servo, 0] * (mjm.actuator_gainprm[servo, 0]
                                                    + mjm.actuator_gainprm[servo, 2] * qvel[finger])
    frozen = h * np.linalg.solve(M - h * np.diag(qderiv), dforce)[finger]
    err, miss = abs(grad - fd) / abs(fd), abs(frozen - fd) / abs(fd)
    print(f"d qvel1 / d ctrl {grad:.10f}, finite differences {fd:.10f} ({err:.1e}); frozen qDeriv misses by {miss:.1e}")
    assert err < 1e-8
    assert miss > 1e-2


def test_gradients_with_contacts_float64(rng):
    """One implicitfast step of the quadruped standing with its feet in the ground: the
    constraint forces enter the (M - h qDeriv) solve."""
    mjm = quadruped()
    sim = Sim.from_model(mjm, device="cpu", num_worlds=2, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    values = [*_inputs(mjm, 2, rng, "quadruped"), *_params(mjm, 2, friction=True)]
    sim.qpos, sim.qvel, sim.ctrl = (torch.tensor(v) for v in values[:3])
    sim.forward()
    assert (sim.efc_force.numpy() != 0).any(axis=1).all(), "contacts"
    errors = _check_gradients(sim, mjm, values, tol=1e-5)
    print("relative gradient errors:", {k: f"{v:.1e}" for k, v in errors.items()})


@pytest.mark.usefixtures("verify_array_access")
@pytest.mark.parametrize("model", ["chain", "quadruped"])
def test_gradients_float32(model, rng):
    """The float32 build's gradients against float64 finite differences, < 1e-2 relative, with
    wp.config.verify_autograd_array_access (test_grad's fixture)."""
    mjm = chain() if model == "chain" else quadruped()
    sim32 = Sim.from_model(mjm, device="cpu", num_worlds=2, dtype="float32")
    sim64 = Sim.from_model(mjm, device="cpu", num_worlds=2, dtype="float64")
    sim64.set_solver(iterations=100, tolerance=1e-15)
    kind = "random" if model == "chain" else "quadruped"
    values = [*_inputs(mjm, 2, rng, kind), *_params(mjm, 2, friction=model == "quadruped")]
    errors = _check_gradients(sim32, mjm, values, tol=1e-2, fd_sim=sim64)
    print("relative gradient errors:", {k: f"{v:.1e}" for k, v in errors.items()})


def test_implicit_is_refused_naming_implicitfast():
    mjm = chain(mujoco.mjtIntegrator.mjINT_IMPLICIT)
    with pytest.raises(UnsupportedFeatureError, match=r"<option integrator='implicit'>.*implicitfast"):
        Sim.from_model(mjm)


def _dense_tendon_j(mjm, mjd):
    """ten_J [ntendon, nv] from MuJoCo's sparse rows."""
    J = np.zeros((mjm.ntendon, mjm.nv))
    for t in range(mjm.ntendon):
        adr, nnz = mjm.ten_J_rowadr[t], mjm.ten_J_rownnz[t]
        J[t, mjm.ten_J_colind[adr:adr + nnz]] = mjd.ten_J[adr:adr + nnz]
    return J


def _tree_pattern(mjm):
    """[nv, nv] True where M can be non-zero: a dof and its ancestors (both triangles)."""
    pattern = np.zeros((mjm.nv, mjm.nv), bool)
    for i in range(mjm.nv):
        j = i
        while j >= 0:
            pattern[i, j] = pattern[j, i] = True
            j = mjm.dof_parentid[j]
    return pattern


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_tendon_step_matches_mujoco(dtype, rng):
    """Tendon dampers and velocity-dependent tendon actuators: qDeriv's tendon terms, gathered
    onto M's sparsity as mj_implicitSkip does."""
    mjm = tendon_model()
    h, W = mjm.opt.timestep, 48
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    ref_q, ref_v = mujoco_step(mjm, qpos, qvel, ctrl)
    ref_acc = (ref_v - qvel) / h
    sim = simrl_step(mjm, qpos, qvel, ctrl, dtype)
    err = relative(sim.view("qacc_int").numpy().astype(np.float64), ref_acc)
    err_q = qpos_distance(mjm, sim.qpos.numpy().astype(np.float64), ref_q)
    print(f"{dtype}: acceleration {err:.2e} (relative), qpos {err_q:.2e}")
    assert err < TOL[dtype] and err_q < TOL[dtype]

    # what the test covers: the split tendon couples two dofs outside M's sparsity, and the
    # grip actuator's force is clamped (no derivative) in some worlds only
    pattern = _tree_pattern(mjm)
    mjd = mujoco.MjData(mjm)
    grip = mjm.actuator("grip").id
    ungathered, diagonal, clamped = [], [], 0
    for w in range(W):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_forward(mjm, mjd)
        J = _dense_tendon_j(mjm, mjd)
        assert w or np.any(~pattern & (np.outer(J[0], J[0]) != 0)), "split should couple sibling dofs"
        force = mjd.actuator_force[grip]
        clamped += int(abs(force) >= 1.5)
        # negative controls: qDeriv with its tendon terms kept whole, and without them
        coef = -mjm.tendon_damping.copy()
        for a, t in ((grip, 0), (mjm.actuator("cord").id, 1)):
            if abs(mjd.actuator_force[a]) < 1.5 or not mjm.actuator_forcelimited[a]:
                u = np.clip(mjd.ctrl[a], *mjm.actuator_ctrlrange[a]) if mjm.actuator_ctrllimited[a] else mjd.ctrl[a]
                coef[t] += mjm.actuator_biasprm[a, 2] + mjm.actuator_gainprm[a, 2] * u
        tip = mjm.jnt_dofadr[mjm.joint("left_tip").id]
        diag = -mjm.dof_damping.copy()
        diag[tip] += -0.1  # the tip's position actuator (kv)
        M = np.zeros((mjm.nv, mjm.nv))
        mujoco.mj_fullM(mjm, mjd, M)
        rhs = mjd.qfrc_smooth + mjd.qfrc_constraint
        full = np.diag(diag) + (J.T * coef) @ J
        ungathered.append(np.linalg.solve(M - h * full, rhs))
        diagonal.append(np.linalg.solve(M - h * np.diag(diag), rhs))
    assert 3 < clamped < W - 3, clamped
    for name, acc in (("ungathered qDeriv", ungathered), ("diagonal qDeriv", diagonal)):
        miss = relative(np.stack(acc), ref_acc)
        print(f"negative control ({name}): {miss:.2e}")
        assert miss > TOL["float32"], f"the {name} is only {miss:.2e} from MuJoCo's step"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_free_body_step_matches_mujoco(dtype, rng):
    """A standalone free body: its 6x6 block with the gyroscopic derivative (mjd_freeMhat),
    with dof damping and a tendon damper in the block, contacts in some worlds."""
    mjm = free_model()
    h, W = mjm.opt.timestep, 32
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    qvel[:, 3:6] *= 4.0  # spinning: a large gyroscopic term
    ref_q, ref_v = mujoco_step(mjm, qpos, qvel, ctrl)
    ref_acc = (ref_v - qvel) / h
    sim = simrl_step(mjm, qpos, qvel, ctrl, dtype)
    assert (sim.view("efc_nactive").numpy() > 0).any(), "some worlds should have contacts"
    err = relative(sim.view("qacc_int").numpy().astype(np.float64), ref_acc)
    err_q = qpos_distance(mjm, sim.qpos.numpy().astype(np.float64), ref_q)
    print(f"{dtype}: acceleration {err:.2e} (relative), qpos {err_q:.2e}")
    assert err < TOL[dtype] and err_q < TOL[dtype]
    euler = simrl_step(free_model(EULER), qpos, qvel, ctrl, dtype)
    miss = relative(euler.view("qacc_int").numpy().astype(np.float64), ref_acc)
    print(f"negative control (Euler): {miss:.2e}")
    assert miss > TOL["float32"]


@pytest.mark.parametrize("model", ["tendon", "free"])
def test_trajectory_matches_mujoco(model, rng):
    """200 steps from one random state, random controls: the tendon gripper, and the free box
    tumbling onto the plane."""
    mjm = MODELS[model]()
    steps = 200
    qpos, qvel, _ = random_states(mjm, 1, rng)
    if model == "free":
        qpos[0, 2], qvel[0, 3:6] = 0.4, [6.0, -3.0, 4.0]
    ctrl = random_ctrl(mjm, steps, rng)
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = qpos[0], qvel[0]
    sim = Sim.from_model(mjm, device="cpu", num_worlds=1, dtype="float64")
    sim.qpos, sim.qvel = torch.tensor(qpos), torch.tensor(qvel)
    err, contacts = 0.0, 0
    for t in range(steps):
        mjd.ctrl[:] = ctrl[t]
        mujoco.mj_step(mjm, mjd)
        sim.ctrl = torch.tensor(ctrl[t][None])
        sim.step()
        contacts += int(sim.view("efc_nactive").max() > 0)
        err = max(err, qpos_distance(mjm, sim.qpos.numpy(), mjd.qpos[None]))
    print(f"{model}: trajectory error {err:.2e}, steps with contacts {contacts}")
    assert not sim.nan_worlds.any()
    assert model == "tendon" or contacts > 10
    assert err < 1e-6, f"trajectory differs from mj_step's by {err:.3e}"


@pytest.mark.parametrize("model", ["tendon", "free"])
def test_tendon_and_free_body_gradients_float64(model, rng):
    """diff_step through the tendon terms of qDeriv (ctrl in them through the affine gain) and
    through a free body's block (its gyroscopic derivative depends on qpos and qvel)."""
    mjm = MODELS[model]()
    sim = Sim.from_model(mjm, device="cpu", num_worlds=2, dtype="float64")
    qpos, qvel, ctrl = _inputs(mjm, 2, rng, "random")
    if model == "free":
        qpos[:, 2], qvel[:, 3:6] = 0.6, qvel[:, 3:6] * 3.0  # above the plane: smooth
    values = [qpos, qvel, ctrl, *_params(mjm, 2)]
    errors = _check_gradients(sim, mjm, values, substeps=2, tol=1e-6)
    print("relative gradient errors:", {k: f"{v:.1e}" for k, v in errors.items()})
