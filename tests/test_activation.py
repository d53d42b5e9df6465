"""Actuator activation dynamics (mjData.act) against MuJoCo 4.0.

An actuator with dyntype integrator, filter or filterexact owns an activation act whose
derivative is ctrl (integrator) or (ctrl - act) / tau (the filters); its force multiplies act
(with actearly: the next step's activation) instead of ctrl; Euler and implicitfast advance act
with mj_nextActivation (filterexact exactly, then the actrange clamp), RK4 carries it through its
stages (mj_RungeKutta). The model below has each of them on a hinge/slide chain (filter with an
affine bias, filter with actearly and an affine gain, filterexact with actearly, filterexact with
a clamped force, intvelocity = integrator + actrange, an integrator with actearly, actrange and a
gear in actuator group 1) and a stateless motor.

- qacc, act_dot and actuator_force of 64 random states (qpos, qvel, act beyond the actranges,
  ctrl beyond ctrlrange): within 1e-10 (relative, float64) and 1e-4 (float32) of mj_forward;
  negative controls: MuJoCo with act zeroed, or with actearly off, is far from ours;
- with actuation, an actuator group or ctrl clamping disabled, one step as mj_step's;
- 200 steps of random controls (Euler, RK4, implicitfast): qpos, qvel, act within 1e-8
  (float64) and 1e-3 (float32) of mj_step's, the actrange clamps reached;
- fused == wide bit for bit (every Data array, each integrator);
- reset, the env state_dict round trip, the MuJoCo backend (mj_step's bits, act copied in and
  out), a differentiable env that carries act through diff_step;
- diff_step's gradients of (qpos, qvel, act) after two steps with respect to qpos0, qvel0, ctrl,
  act0 against central finite differences (float64, each integrator);
- user activation dynamics are refused by name (muscles: tests/test_muscle.py).
"""

import mujoco
import numpy as np
import pytest
import torch
from conftest import random_ctrl, random_states
from test_grad import verify_array_access  # noqa: F401 (a fixture)
from test_schedule import assert_same_data

from envs.base import BatchedEnv
from simrl import Sim, UnsupportedFeatureError, diff_step
from simrl.mujoco_sim import MujocoSim

ACTIVATION = """
<mujoco model="activation">
  <option timestep="0.005"><flag contact="disable"/></option>
  <worldbody>
    <body name="cart" pos="0 0 1">
      <joint name="slide" type="slide" axis="1 0 0" damping="0.3"/>
      <geom type="box" size="0.1 0.1 0.05" mass="2"/>
      <body name="upper">
        <joint name="shoulder" type="hinge" axis="0 1 0" damping="0.1"/>
        <geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.04" mass="0.5"/>
        <body name="lower" pos="0.3 0 0">
          <joint name="elbow" type="hinge" axis="0 0 1" damping="0.05"/>
          <geom type="capsule" fromto="0 0 0 0.25 0 -0.1" size="0.03" mass="0.3"/>
          <body name="hand" pos="0.25 0 -0.1">
            <joint name="wrist" type="hinge" axis="1 0 0" damping="0.01"/>
            <geom type="capsule" fromto="0 0 0 0 0.1 0" size="0.02" mass="0.1"/>
          </body>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator>
    <general name="slide_filter" joint="slide" dyntype="filter" dynprm="0.05" gainprm="40" biastype="affine"
             biasprm="0 -40 -4" ctrllimited="true" ctrlrange="-0.5 0.5"/>
    <general name="slide_early" joint="slide" dyntype="filter" dynprm="0.02" gaintype="affine" gainprm="2 0.5 0.05"
             actearly="true"/>
    <general name="shoulder_exact" joint="shoulder" dyntype="filterexact" dynprm="0.03" gaintype="affine"
             gainprm="5 0.5 0.05" biastype="affine" biasprm="0 -5 -0.5" actearly="true"/>
    <general name="elbow_exact" joint="elbow" dyntype="filterexact" dynprm="0.02" gainprm="1.5" forcelimited="true"
             forcerange="-0.6 0.6"/>
    <intvelocity name="elbow_intvel" joint="elbow" kp="4" actrange="-0.2 0.2"/>
    <general name="wrist_integrator" joint="wrist" dyntype="integrator" gainprm="0.5" gear="1.5" actlimited="true"
             actrange="-0.3 0.4" actearly="true" group="1"/>
    <motor name="wrist_motor" joint="wrist" gear="0.3" ctrlrange="-1 1"/>
  </actuator>
</mujoco>"""

INTEGRATORS = {"Euler": mujoco.mjtIntegrator.mjINT_EULER, "RK4": mujoco.mjtIntegrator.mjINT_RK4,
               "implicitfast": mujoco.mjtIntegrator.mjINT_IMPLICITFAST}
TOL_FORWARD = {"float64": 1e-10, "float32": 1e-4}
TOL_TRAJECTORY = {"float64": 1e-8, "float32": 1e-3}


def model(integrator: str = "Euler") -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(ACTIVATION)
    mjm.opt.integrator = INTEGRATORS[integrator]
    return mjm


def random_act(mjm, n, rng):
    """Activations in [-1, 1]: beyond the actranges, so that the clamp of the next activation acts."""
    return rng.uniform(-1.0, 1.0, (n, mjm.na))


def relative(a, b) -> float:
    """Worst relative difference of rows a[w] and b[w]."""
    return float(max(np.linalg.norm(x - y) / max(np.linalg.norm(y), 1e-12) for x, y in zip(a, b, strict=True)))


def mujoco_forward(mjm, qpos, qvel, act, ctrl):
    """mj_forward of each state: {qacc, act_dot, actuator_force} [W, ...]."""
    d = mujoco.MjData(mjm)
    out = {"qacc": [], "act_dot": [], "actuator_force": []}
    for w in range(qpos.shape[0]):
        d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = qpos[w], qvel[w], act[w], ctrl[w]
        mujoco.mj_forward(mjm, d)
        for name, rows in out.items():
            rows.append(getattr(d, name).copy())
    return {name: np.stack(rows) for name, rows in out.items()}


def make_sim(mjm, W, dtype, schedule="auto"):
    return Sim.from_model(mjm, num_worlds=W, device="cpu", dtype=dtype, schedule=schedule)


def set_state(sim, qpos, qvel, act, ctrl):
    sim.qpos, sim.qvel, sim.act, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in (qpos, qvel, act, ctrl))


def numpy(x) -> np.ndarray:
    return x.numpy().astype(np.float64)


@pytest.fixture(scope="module")
def sims():
    """Simulations of the activation model by (integrator, dtype), made once for the module."""
    cache = {}

    def get(integrator, dtype, W):
        key = (integrator, dtype, W)
        if key not in cache:
            cache[key] = make_sim(model(integrator), W, dtype)
        return cache[key]

    return get


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_forward_matches_mujoco(dtype, rng, sims):
    mjm = model()
    W = 64
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    act = random_act(mjm, W, rng)
    ref = mujoco_forward(mjm, qpos, qvel, act, ctrl)
    sim = sims("Euler", dtype, W)
    set_state(sim, qpos, qvel, act, ctrl)
    sim.forward()
    errors = {"qacc": relative(numpy(sim.qacc), ref["qacc"]), "act_dot": relative(numpy(sim.act_dot), ref["act_dot"]),
              "actuator_force": relative(numpy(sim.view("actuator_force")), ref["actuator_force"])}
    print(f"{dtype}: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert max(errors.values()) < TOL_FORWARD[dtype], errors

    # the batch exercises the clamp of the next activation (actearly, actrange) on both sides
    h, wrist = mjm.opt.timestep, mjm.actuator("wrist_integrator").id
    adr = mjm.actuator_actadr[wrist]
    lo, hi = mjm.actuator_actrange[wrist]
    nxt = act[:, adr] + h * ctrl[:, wrist]
    assert (nxt < lo).sum() > 5 and (nxt > hi).sum() > 5 and ((nxt > lo) & (nxt < hi)).sum() > 5

    # negative controls: the forces depend on act, and on actearly
    if dtype == "float64":
        zero_act = relative(mujoco_forward(mjm, qpos, qvel, 0 * act, ctrl)["qacc"], ref["qacc"])
        late = mujoco.MjModel.from_xml_string(ACTIVATION)
        late.actuator_actearly[:] = 0
        no_early = relative(mujoco_forward(late, qpos, qvel, act, ctrl)["qacc"], ref["qacc"])
        print(f"negative controls: act zeroed {zero_act:.2e}, actearly off {no_early:.2e}")
        assert zero_act > 1e-2 and no_early > 1e-3


@pytest.mark.parametrize("flag", ["actuation", "actuator group", "clampctrl"])
def test_disabled_terms(flag, rng, sims):
    """Actuation disabled (act_dot not integrated, act unchanged), actuator group 1 disabled (the
    wrist integrator's force gone, its act only clamped by mj_advance), ctrl clamping disabled:
    one step from 16 random states as mj_step's (float64)."""
    mjm = model()
    if flag == "actuator group":
        mjm.opt.disableactuator = 1 << 1
    else:
        mjm.opt.disableflags |= getattr(mujoco.mjtDisableBit, f"mjDSBL_{flag.upper()}")
    W = 16
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    act = random_act(mjm, W, rng)
    d = mujoco.MjData(mjm)
    ref = {"qpos": [], "qvel": [], "act": []}
    for w in range(W):
        d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = qpos[w], qvel[w], act[w], ctrl[w]
        mujoco.mj_step(mjm, d)
        for name, rows in ref.items():
            rows.append(getattr(d, name).copy())
    sim = make_sim(mjm, W, "float64")
    set_state(sim, qpos, qvel, act, ctrl)
    sim.step()
    errors = {name: float(np.abs(numpy(getattr(sim, name)) - np.stack(rows)).max()) for name, rows in ref.items()}
    print(f"{flag} disabled: {errors}")
    assert max(errors.values()) < 1e-10, errors
    if flag == "actuation":
        assert np.array_equal(sim.act.numpy(), act)
    if flag == "actuator group":
        adr = mjm.actuator_actadr[mjm.actuator("wrist_integrator").id]
        assert np.array_equal(sim.act[:, adr].numpy(), np.clip(act[:, adr], -0.3, 0.4))


def mujoco_trajectory(mjm, state, ctrls):
    """mj_step along ctrls [T, W, nu] from state (qpos, qvel, act): {qpos, qvel, act} [T, W, ...]."""
    out = {"qpos": [], "qvel": [], "act": []}
    datas = [mujoco.MjData(mjm) for _ in range(ctrls.shape[1])]
    for w, d in enumerate(datas):
        d.qpos[:], d.qvel[:], d.act[:] = (x[w] for x in state)
    for ctrl in ctrls:
        for w, d in enumerate(datas):
            d.ctrl[:] = ctrl[w]
            mujoco.mj_step(mjm, d)
        for name, rows in out.items():
            rows.append(np.stack([getattr(d, name).copy() for d in datas]))
    return {name: np.stack(rows) for name, rows in out.items()}


def simrl_trajectory(sim, state, ctrls):
    sim.reset()
    sim.qpos, sim.qvel, sim.act = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in state)
    out = {"qpos": [], "qvel": [], "act": []}
    for ctrl in ctrls:
        sim.ctrl = torch.as_tensor(ctrl, dtype=sim.torch_dtype)
        sim.step()
        for name, rows in out.items():
            rows.append(numpy(getattr(sim, name)))
    assert not sim.nan_worlds.any()
    return {name: np.stack(rows) for name, rows in out.items()}


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("integrator", list(INTEGRATORS))
def test_trajectory_matches_mujoco(integrator, dtype, sims):
    """200 steps from a random state with random controls, two worlds."""
    mjm = model(integrator)
    rng = np.random.default_rng(7)
    W, steps = 2, 200
    qpos, qvel, _ = random_states(mjm, W, rng)
    state = (qpos, qvel, random_act(mjm, W, rng))
    ctrls = np.stack([random_ctrl(mjm, W, rng) for _ in range(steps)])
    ref = mujoco_trajectory(mjm, state, ctrls)
    ours = simrl_trajectory(sims(integrator, dtype, W), state, ctrls)
    errors = {name: float(np.abs(ours[name] - ref[name]).max()) for name in ref}
    print(f"{integrator} {dtype}: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert max(errors.values()) < TOL_TRAJECTORY[dtype], errors
    # the activations move, and the actrange clamps are reached
    assert np.abs(ref["act"][-1] - state[2]).min() > 1e-3
    for name in ("elbow_intvel", "wrist_integrator"):
        a = mjm.actuator(name).id
        at_bound = np.isin(ref["act"][:, :, mjm.actuator_actadr[a]], mjm.actuator_actrange[a])
        assert at_bound.sum() > 5, name


@pytest.mark.parametrize("integrator", list(INTEGRATORS))
def test_wide_equals_fused_bit_for_bit(integrator, rng):
    mjm = model(integrator)
    W = 3
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    act = random_act(mjm, W, rng)
    runs = []
    for schedule in ("fused", "wide"):
        sim = make_sim(mjm, W, "float64", schedule)
        set_state(sim, qpos, qvel, act, ctrl)
        sim.step(20)
        runs.append(sim)
    assert not np.array_equal(runs[0].act.numpy(), act)
    assert_same_data(*runs)


def test_reset_and_env_state(rng, sims):
    """reset(world_ids) zeroes act there only; an env's state_dict holds act (a model without
    activations keeps its keys) and load_state_dict replays the same steps bit for bit."""
    mjm = model()
    W = 3
    sim = sims("Euler", "float64", W)
    qpos, qvel, ctrl = random_states(mjm, W, rng)
    act = random_act(mjm, W, rng)
    set_state(sim, qpos, qvel, act, ctrl)
    sim.step(5)
    moved = sim.act.clone()
    sim.reset([1])
    assert torch.equal(sim.act[1], torch.zeros(mjm.na, dtype=torch.float64))
    assert torch.equal(sim.act[[0, 2]], moved[[0, 2]])
    with pytest.raises(ValueError, match=r"act must have shape \(3, 6\)"):
        sim.act = torch.zeros(W, 5, dtype=torch.float64)

    env = BatchedEnv(sim, num_actions=mjm.nu, decimation=1, episode_length_s=1.0, rewards={})
    set_state(sim, qpos, qvel, act, ctrl)
    state = env.state_dict()
    assert torch.equal(state["tensors"]["sim.act"], torch.as_tensor(act))
    sim.step(10)
    after = [sim.qpos.clone(), sim.act.clone()]
    sim.reset()
    env.load_state_dict(state)
    assert torch.equal(sim.act, torch.as_tensor(act))
    sim.step(10)
    assert torch.equal(sim.qpos, after[0]) and torch.equal(sim.act, after[1])
    plain = Sim.from_mjcf("<mujoco><worldbody><body><joint/><geom size='0.1'/></body></worldbody></mujoco>",
                          dtype="float64")
    keys = BatchedEnv(plain, num_actions=1, decimation=1, episode_length_s=1.0, rewards={}).state_dict()
    assert "sim.act" not in keys["tensors"] and plain.act.shape == (1, 0)


def test_mujoco_backend_steps_act_as_mj_step(rng):
    """MujocoSim copies act in and out of each world's MjData: mj_step's bits; reset zeroes it."""
    mjm = model("RK4")
    W = 2
    qpos, qvel, _ = random_states(mjm, W, rng)
    act = random_act(mjm, W, rng)
    ctrls = np.stack([random_ctrl(mjm, W, rng) for _ in range(20)])
    sim = MujocoSim(mjm, num_worlds=W)
    sim.qpos, sim.qvel, sim.act = (torch.as_tensor(x) for x in (qpos, qvel, act))
    act_dot = sim.view("act_dot")
    for ctrl in ctrls:
        sim.ctrl = torch.as_tensor(ctrl)
        sim.step()
    ref = mujoco_trajectory(mjm, (qpos, qvel, act), ctrls)
    for name in ("qpos", "qvel", "act"):
        assert np.array_equal(getattr(sim, name).numpy(), ref[name][-1]), name
    d = mujoco.MjData(mjm)
    d.qpos[:], d.qvel[:], d.act[:], d.ctrl[:] = ref["qpos"][-2][1], ref["qvel"][-2][1], ref["act"][-2][1], ctrls[-1][1]
    mujoco.mj_step(mjm, d)
    assert np.array_equal(act_dot[1].numpy(), d.act_dot)
    sim.reset([0])
    assert not sim.act[0].any() and sim.act[1].abs().sum() > 0


class _ActEnv(BatchedEnv):
    """Controls = actions; observes qpos. Differentiable."""

    differentiable = True

    def _ctrl(self, actions):
        return actions

    def _observations(self):
        return {"policy": self.qpos}

    def _terminated(self):
        return torch.zeros(self.num_envs, dtype=torch.bool)

    def _reset_envs(self, env_ids):
        pass


@pytest.mark.slow  # 69 s in a cold run on 2 cores (the differentiable env's kernels compile apart)
def test_differentiable_env_carries_act(rng):
    """An env with enable_grad() steps through diff_step with act as state: the same states as
    Sim.step's (they would differ if act restarted from sim.act), and the first action's
    gradient reaches the last qpos."""
    mjm = model()
    W = 2
    envs = [_ActEnv(make_sim(mjm, W, "float64"), mjm.nu, 2, 1.0, {}) for _ in range(2)]
    envs[1].enable_grad()
    actions = [torch.as_tensor(random_ctrl(mjm, W, rng)) for _ in range(3)]
    leaves = [a.clone().requires_grad_() for a in actions]
    for env, steps in zip(envs, (actions, leaves), strict=True):
        env.reset()
        for a in steps:
            env.step(a)
    plain, grad = envs[0].sim, envs[1].sim
    assert plain.act.abs().min() > 0
    assert torch.equal(plain.act, grad.act) and torch.equal(plain.qpos, grad.qpos)
    envs[1].qpos.sum().backward()
    assert leaves[0].grad is not None and leaves[0].grad.abs().sum() > 0


def _grad_inputs(mjm, W, rng):
    """A random state away from the clamps (ctrl inside ctrlrange, act inside actrange, small
    velocities): central differences do not straddle a kink."""
    qpos = mjm.qpos0 + rng.normal(0.0, 0.3, (W, mjm.nq))
    qvel = rng.normal(0.0, 0.3, (W, mjm.nv))
    ctrl = rng.uniform(-0.4, 0.4, (W, mjm.nu))
    act = rng.uniform(-0.25, 0.25, (W, mjm.na))
    return [qpos, qvel, ctrl, act]


@pytest.mark.parametrize("integrator", list(INTEGRATORS))
def test_gradients_against_finite_differences(integrator, sims):
    """Gradients of a random linear function of (qpos, qvel, act) after two steps with respect to
    qpos0, qvel0, ctrl and act0, against central differences (float64)."""
    mjm = model(integrator)
    W, substeps, eps = 2, 2, 1e-6
    sim = sims(integrator, "float64", W)
    values = _grad_inputs(mjm, W, np.random.default_rng(3))
    inputs = [torch.tensor(v, requires_grad=True) for v in values]
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(W, n, generator=gen, dtype=torch.float64) for n in (mjm.nq, mjm.nv, mjm.na)]

    def loss(args):
        out = diff_step(sim, *args[:3], act0=args[3], substeps=substeps)
        return sum((x * w).sum() for x, w in zip(out, weights, strict=True))

    loss(inputs).backward()
    # the step's outputs are Sim.step's
    sim.reset()
    set_state(sim, *values[:2], values[3], values[2])
    sim.step(substeps)
    with torch.no_grad():
        q, v, a = diff_step(sim, *(torch.tensor(x) for x in values[:3]), act0=torch.tensor(values[3]),
                            substeps=substeps)
    assert torch.equal(q, sim.qpos) and torch.equal(v, sim.qvel) and torch.equal(a, sim.act)

    errors = {}
    for k, name in enumerate(("qpos0", "qvel0", "ctrl", "act0")):
        fd = np.zeros_like(values[k])
        for i in range(fd.size):
            plus = [torch.tensor(x) for x in values]
            minus = [torch.tensor(x) for x in values]
            plus[k].view(-1)[i] += eps
            minus[k].view(-1)[i] -= eps
            with torch.no_grad():
                fd.flat[i] = (loss(plus) - loss(minus)).item() / (2 * eps)
        g = inputs[k].grad.numpy()
        assert np.linalg.norm(fd) > 0, name
        errors[name] = float(np.linalg.norm(g - fd) / np.linalg.norm(fd))
    print(f"{integrator}: " + ", ".join(f"{k} {v:.2e}" for k, v in errors.items()))
    assert max(errors.values()) < 1e-6, errors


def test_diff_step_asks_for_act0(sims):
    mjm = model()
    sim = sims("Euler", "float64", 2)
    qpos, qvel, ctrl = (torch.zeros(2, n, dtype=torch.float64) for n in (mjm.nq, mjm.nv, mjm.nu))
    with pytest.raises(ValueError, match=r"6 actuator activations .* pass act0 \[W, 6\]"):
        diff_step(sim, qpos, qvel, ctrl)
    with pytest.raises(ValueError, match=r"act0 must have shape \(2, 6\)"):
        diff_step(sim, qpos, qvel, ctrl, act0=torch.zeros(2, 5, dtype=torch.float64))


@pytest.mark.parametrize("actuator, pattern", [
    ('<general name="m" joint="j1" dyntype="user"/>', r"<actuator dyntype='user'> actuator 'm'"),
])
def test_unsupported_dynamics_are_refused_by_name(actuator, pattern):
    xml = (f'<mujoco><worldbody><body><joint name="j1"/><geom size="0.1" mass="1"/></body></worldbody>'
           f'<actuator>{actuator}</actuator></mujoco>')
    with pytest.raises(UnsupportedFeatureError, match=pattern):
        Sim.from_mjcf(xml)


@pytest.mark.slow
@pytest.mark.usefixtures("verify_array_access")
def test_gradients_float32():
    """The float32 build's gradients (Euler, with Warp's autograd array-access check) against
    float64 central differences: < 1e-2 relative (slow: the checked build compiles apart)."""
    mjm = model()
    W, eps = 2, 1e-6
    sim32, sim64 = make_sim(mjm, W, "float32"), make_sim(mjm, W, "float64")
    values = _grad_inputs(mjm, W, np.random.default_rng(3))
    inputs = [torch.tensor(v, dtype=torch.float32, requires_grad=True) for v in values]
    gen = torch.Generator().manual_seed(0)
    weights = [torch.randn(W, n, generator=gen, dtype=torch.float64) for n in (mjm.nq, mjm.nv, mjm.na)]

    def loss(sim, args):
        out = diff_step(sim, *args[:3], act0=args[3], substeps=2)
        return sum((x.double() * w).sum() for x, w in zip(out, weights, strict=True))

    loss(sim32, inputs).backward()
    for k, name in enumerate(("qpos0", "qvel0", "ctrl", "act0")):
        fd = np.zeros_like(values[k])
        for i in range(fd.size):
            plus = [torch.tensor(x) for x in values]
            minus = [torch.tensor(x) for x in values]
            plus[k].view(-1)[i] += eps
            minus[k].view(-1)[i] -= eps
            with torch.no_grad():
                fd.flat[i] = (loss(sim64, plus) - loss(sim64, minus)).item() / (2 * eps)
        err = float(np.linalg.norm(inputs[k].grad.numpy() - fd) / np.linalg.norm(fd))
        print(f"float32 {name}: {err:.2e}")
        assert err < 1e-2, (name, err)


@pytest.mark.slow
@pytest.mark.parametrize("integrator", ["RK4", "implicitfast"])
def test_wide_diff_step_equals_fused(integrator):
    """diff_step in the two schedules: outputs bit for bit, gradients within 1e-12 (generated
    adjoints accumulate shared reads in another order); slow: the wide adjoints compile apart."""
    mjm = model(integrator)
    W = 2
    values = _grad_inputs(mjm, W, np.random.default_rng(5))
    results = []
    for schedule in ("fused", "wide"):
        sim = make_sim(mjm, W, "float64", schedule)
        inputs = [torch.tensor(v, requires_grad=True) for v in values]
        q, v, a = diff_step(sim, *inputs[:3], act0=inputs[3], substeps=3)
        (q.square().sum() + v.square().sum() + a.square().sum()).backward()
        results.append(((q.detach(), v.detach(), a.detach()), [x.grad for x in inputs]))
    (out_f, grad_f), (out_w, grad_w) = results
    for x, y in zip(out_f, out_w, strict=True):
        assert torch.equal(x, y)
    for x, y in zip(grad_f, grad_w, strict=True):
        assert ((x - y).abs().max() / x.abs().max()).item() <= 1e-12
