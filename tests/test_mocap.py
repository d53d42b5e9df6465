"""Mocap bodies (<body mocap="true">) against MuJoCo: the user sets `sim.mocap_pos` /
`sim.mocap_quat` between steps and the bodies are placed there (mj_kinematics), collide as
bodies without dofs (their contacts' Jacobian is the other body's only, their velocity zero)
and carry children with joints. Checked: poses and qacc for random mocap poses, a free box
pushed along a path for 200 steps, the MuJoCo backend's `mocap_pos` against mj_step, reset and
state, both schedules bit for bit, and diff_step's gradients against finite differences. The
negative controls: the same comparisons with the mocap bodies left at their model poses must
miss the tolerances."""

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat, qpos_distance
from test_grad import _check_gradients, _params
from test_schedule import assert_same_data, reverse_thread_order

from simrl import Sim, diff_step
from simrl.mujoco_sim import MujocoSim

# A paddle moved by the user (mocap) pushes a free crate over the floor; a pendulum with a
# motor hangs from the paddle (a child of a mocap body, with a joint). The tight solver
# tolerance brings MuJoCo's and simrl's Newton solves to the same converged solution.
PUSHER = """
<mujoco model="mocap_pusher">
  <option timestep="0.002" tolerance="1e-15" iterations="200"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="paddle" mocap="true" pos="-0.3 0 0.1" quat="1 0 0 0.1">
      <geom name="blade" type="box" size="0.03 0.08 0.06"/>
      <site name="tip" pos="0.03 0 0"/>
      <body name="pendulum" pos="0 0 0.3">
        <joint name="swing" type="hinge" axis="0 1 0" damping="0.05"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.15" size="0.02" mass="0.3" contype="0" conaffinity="0"/>
      </body>
    </body>
    <body name="crate" pos="0 0 0.1">
      <freejoint/>
      <geom name="crate" type="box" size="0.1 0.1 0.1" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="swing" gear="0.5"/></actuator>
</mujoco>"""

STEPS = 200


def pusher(integrator: str = "Euler") -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(PUSHER)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    return mjm


def paddle_path(k: int, w: int, dt: float):
    """World w's paddle pose at step k: it sweeps forward (faster in later worlds), weaves
    sideways and turns; the quaternion is left unnormalized (the engines normalize it)."""
    t = k * dt
    pos = np.array([-0.16 + (0.8 + 0.3 * w) * t, 0.04 * np.sin(4 * t + w), 0.1])
    quat = axis_angle_quat([0, 0, 1], 0.1 + 0.4 * t * (1 if w % 2 else -1)) * (1.0 + 0.3 * w)
    return pos, quat


def _trajectory(sim, mjm, W, move=True):
    """qpos [STEPS, W, nq] of `sim` (a Sim or a MujocoSim) driven along paddle_path."""
    out = []
    sim.ctrl = torch.full((W, 1), 0.3, dtype=sim.torch_dtype)
    for k in range(STEPS):
        if move:
            for w in range(W):
                pos, quat = paddle_path(k, w, mjm.opt.timestep)
                sim.mocap_pos[w, 0] = torch.as_tensor(pos)
                sim.mocap_quat[w, 0] = torch.as_tensor(quat)
        sim.step()
        out.append(sim.qpos.double().clone().numpy())
    return np.stack(out)


def _mujoco_trajectory(mjm, W):
    out = np.zeros((STEPS, W, mjm.nq))
    for w in range(W):
        d = mujoco.MjData(mjm)
        d.ctrl[:] = 0.3
        for k in range(STEPS):
            d.mocap_pos[0], d.mocap_quat[0] = paddle_path(k, w, mjm.opt.timestep)
            mujoco.mj_step(mjm, d)
            out[k, w] = d.qpos
    return out


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
def test_pushed_crate_follows_mujoco(integrator):
    """The paddle pushes the crate 0.26-0.49 m in 200 steps; qpos over the whole trajectory
    agrees with MuJoCo to 1e-10 in float64 (achieved, all 3 worlds: 1.5e-13 with Euler, 3.4e-12
    with RK4, whose four stages all see the step's mocap pose); the MuJoCo
    backend reproduces mj_step bit for bit. Negative control: the paddle left where the model
    puts it (no mocap motion) misses by more than 0.1 (0.49)."""
    mjm = pusher(integrator)
    W = 3
    reference = _mujoco_trajectory(mjm, W)
    moved = reference[-1, :, 1] - reference[0, :, 1]
    assert moved.min() > 0.2, f"the paddle should push the crate forward, moved {moved}"

    backend = MujocoSim(mjm, num_worlds=W)
    assert backend.nmocap == 1 and backend.mocap_pos.shape == (W, 1, 3) and backend.mocap_quat.shape == (W, 1, 4)
    assert np.array_equal(_trajectory(backend, mjm, W), reference)

    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    error = qpos_distance(mjm, _trajectory(sim, mjm, W), reference)
    assert error < 1e-10, f"qpos error {error:.2e}"

    still = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    control = qpos_distance(mjm, _trajectory(still, mjm, W, move=False), reference)
    assert control > 0.1, f"without the mocap motion the trajectories should differ, got {control:.2e}"


def test_pushed_crate_float32():
    """The float32 build along the same paths: qpos within 1e-3 of MuJoCo's over 200 steps
    (achieved: 9e-5)."""
    mjm = pusher()
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float32")
    error = qpos_distance(mjm, _trajectory(sim, mjm, 2), _mujoco_trajectory(mjm, 2))
    assert error < 1e-3, f"qpos error {error:.2e}"


def _random_mocap(mjm, W, rng):
    pos = rng.normal(0.0, 0.5, (W, mjm.nmocap, 3))
    quat = rng.normal(0.0, 1.0, (W, mjm.nmocap, 4))  # not unit length: both engines normalize
    return pos, quat


def test_poses_and_dynamics_follow_mocap(rng):
    """Random mocap poses and states in 5 worlds: the mocap body's xpos/xquat/xmat, its geom and
    site and the pendulum below it, and qacc (the pendulum swings in the paddle's frame) equal
    MuJoCo's (float64: 1e-12; achieved 2e-16 for poses and 2.4e-15 relative for qacc).
    cvel of the mocap body is zero, as in mj_comVel. Negative control: the poses at the model's
    mocap pose are far off."""
    mjm = pusher()
    W = 5
    pos, quat = _random_mocap(mjm, W, rng)
    qpos = np.tile(mjm.qpos0, (W, 1))
    qpos[:, 0] = rng.normal(0.0, 1.0, W)  # the pendulum's angle; the crate stays at rest on the floor
    qvel = rng.normal(0.0, 1.0, (W, mjm.nv))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    assert sim.nmocap == 1 and sim.mocap_pos.shape == (W, 1, 3) and sim.mocap_quat.shape == (W, 1, 4)
    sim.qpos, sim.qvel = torch.as_tensor(qpos), torch.as_tensor(qvel)
    sim.mocap_pos, sim.mocap_quat = torch.as_tensor(pos), torch.as_tensor(quat)
    sim.forward()
    xquat = sim.view("xquat").numpy()[:, :, [3, 0, 1, 2]]
    paddle = mjm.body("paddle").id
    errors = {"pose": 0.0, "qacc": 0.0}
    for w in range(W):
        d = mujoco.MjData(mjm)
        d.qpos[:], d.qvel[:], d.mocap_pos[:], d.mocap_quat[:] = qpos[w], qvel[w], pos[w], quat[w]
        mujoco.mj_forward(mjm, d)
        assert np.allclose(d.xpos[paddle], pos[w, 0])
        for ours, theirs in ((sim.view("xpos")[w].numpy(), d.xpos), (xquat[w], d.xquat),
                             (sim.view("xmat")[w].numpy().reshape(-1, 9), d.xmat),
                             (sim.view("geom_xpos")[w].numpy(), d.geom_xpos),
                             (sim.view("geom_xmat")[w].numpy().reshape(-1, 9), d.geom_xmat),
                             (sim.view("site_xpos")[w].numpy(), d.site_xpos),
                             (sim.view("xanchor")[w].numpy(), d.xanchor)):
            errors["pose"] = max(errors["pose"], float(np.abs(ours - theirs).max()))
        errors["qacc"] = max(errors["qacc"], float(np.linalg.norm(sim.qacc[w].numpy() - d.qacc)
                                                   / np.linalg.norm(d.qacc)))
        assert not d.cvel[paddle].any() and not sim.view("cvel")[w, paddle].any()
    assert max(errors.values()) < 1e-12, errors

    sim.reset()
    assert torch.equal(sim.mocap_pos[:, 0], torch.as_tensor(mjm.body_pos[paddle]).expand(W, 3))
    sim.qpos, sim.qvel = torch.as_tensor(qpos), torch.as_tensor(qvel)
    sim.forward()
    control = float(np.abs(sim.view("xpos")[:, paddle].numpy() - pos[:, 0]).max())
    assert control > 0.1


def test_reset_assignment_and_threads(rng):
    """reset puts the mocap bodies back at their model poses (mj_resetData) in the worlds it
    resets, on both backends; whole-tensor assignment checks the shape; worlds split over CPU
    threads read their own mocap poses."""
    mjm = pusher()
    W = 4
    paddle = mjm.body("paddle").id
    pos, quat = _random_mocap(mjm, W, rng)
    for sim in (Sim.from_model(mjm, num_worlds=W, dtype="float64", cpu_threads=2), MujocoSim(mjm, num_worlds=W)):
        sim.mocap_pos, sim.mocap_quat = torch.as_tensor(pos), torch.as_tensor(quat)
        sim.forward()
        xpos = sim.view("xpos")
        assert np.allclose(xpos[:, paddle].numpy(), pos[:, 0], rtol=0, atol=1e-12)
        sim.reset([1, 3])
        assert np.array_equal(sim.mocap_pos[[1, 3], 0].numpy(), np.tile(mjm.body_pos[paddle], (2, 1)))
        assert np.array_equal(sim.mocap_quat[[1, 3], 0].numpy(), np.tile(mjm.body_quat[paddle], (2, 1)))
        assert np.array_equal(sim.mocap_pos[[0, 2]].numpy(), pos[[0, 2]])
        with pytest.raises(ValueError, match=r"mocap_pos must have shape \(4, 1, 3\)"):
            sim.mocap_pos = torch.zeros(W, 3, dtype=torch.float64)


def test_env_state_holds_the_mocap_poses(rng):
    """An environment's state_dict carries mocap_pos and mocap_quat when the model has mocap
    bodies (the user sets them, like ctrl), and load_state_dict restores them; a model without
    mocap bodies keeps its state_dict keys."""
    from envs.base import BatchedEnv

    sim = Sim.from_model(pusher(), num_worlds=2, dtype="float64")
    env = BatchedEnv(sim, num_actions=1, decimation=1, episode_length_s=1.0, rewards={})
    pos, quat = _random_mocap(sim.mj_model, 2, rng)
    sim.mocap_pos, sim.mocap_quat = torch.as_tensor(pos), torch.as_tensor(quat)
    state = env.state_dict()
    sim.reset()
    assert not np.array_equal(sim.mocap_pos.numpy(), pos)
    env.load_state_dict(state)
    assert np.array_equal(sim.mocap_pos.numpy(), pos) and np.array_equal(sim.mocap_quat.numpy(), quat)
    plain = Sim.from_mjcf("<mujoco><worldbody><body><joint/><geom size='0.1'/></body></worldbody></mujoco>",
                          dtype="float64")
    keys = BatchedEnv(plain, num_actions=1, decimation=1, episode_length_s=1.0, rewards={}).state_dict()
    assert not any("mocap" in k for k in keys["tensors"])


def _schedule_run(mjm, schedule, dtype):
    sim = Sim.from_model(mjm, num_worlds=3, dtype=dtype, schedule=schedule, device="cpu")
    _trajectory(sim, mjm, 3)
    return sim


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    """The pushing trajectory in both schedules: every array of the data, bit for bit."""
    mjm = pusher()
    fused, wide = _schedule_run(mjm, "fused", dtype), _schedule_run(mjm, "wide", dtype)
    assert int(fused.view("efc_nactive").max()) > 0
    assert_same_data(fused, wide)


def test_wide_threads_in_any_order(monkeypatch):
    """The pushing trajectory, wide, with every element launch's threads in reverse order
    (tests/test_schedule.py::reverse_thread_order): the same bits."""
    mjm = pusher()
    ordered = _schedule_run(mjm, "wide", "float64")
    reverse_thread_order(monkeypatch)
    assert_same_data(ordered, _schedule_run(mjm, "wide", "float64"))


def _pressed(mjm, W, rng, schedule="fused"):
    """A Sim with the paddle pressed 3 mm into the crate's side (moved from its model pose,
    turned a little) and (qpos, qvel, ctrl) with the crate 2 mm into the floor. The states keep
    away from a change of any contact row's zone within the finite-difference step (some
    random states are within 1e-5 of one: a pyramid edge's force about to vanish)."""
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule, device="cpu")
    crate = int(mjm.jnt_qposadr[mjm.body("crate").jntadr[0]])
    qpos = np.tile(mjm.qpos0, (W, 1))
    qpos[:, crate + 2] = 0.098
    qvel = rng.normal(0.0, 0.05, (W, mjm.nv))
    qpos[:, 0] = np.linspace(0.3, -0.2, W)
    ctrl = np.linspace(0.4, -0.7, W)[:, None]
    sim.mocap_pos = torch.as_tensor(np.tile([-0.127, 0.01, 0.1], (W, 1, 1)))
    sim.mocap_quat = torch.as_tensor(np.tile(axis_angle_quat([0, 0, 1], 0.01), (W, 1, 1)))
    return sim, qpos, qvel, ctrl


def test_gradients_with_a_mocap_body(rng):
    """diff_step with the paddle (moved away from its model pose, turned a little) pressed 3 mm
    into the crate's side and the crate 2 mm into the floor: gradients with respect to qpos,
    qvel, ctrl, body_mass, actuator_gain and geom_friction against central finite differences
    (float64, < 1e-5 relative; achieved 2.5e-8 for geom_friction, 2e-10 to 6e-9 for the rest).
    diff_step reads the Sim's mocap poses: its step equals sim.step there (to 1e-10), and differs
    from a step at the model's mocap pose. No gradient reaches the mocap poses (not provided)."""
    mjm = pusher()
    W = 2
    sim, qpos, qvel, ctrl = _pressed(mjm, W, rng)
    sim.qpos, sim.qvel, sim.ctrl = torch.as_tensor(qpos), torch.as_tensor(qvel), torch.as_tensor(ctrl)
    sim.forward()
    blade, crate_geom = mjm.geom("blade").id, mjm.geom("crate").id
    contact = sim.contact
    pushing = ((contact.geom == torch.tensor([blade, crate_geom])).all(2)
               | (contact.geom == torch.tensor([crate_geom, blade])).all(2))
    assert (contact.active & pushing).sum(1).min() >= 2, "the paddle should press on the crate"
    q1, v1 = diff_step(sim, torch.as_tensor(qpos), torch.as_tensor(qvel), torch.as_tensor(ctrl))
    sim.step()
    # the same step up to the solver's tolerance (sim.step warm-starts from the last forward)
    assert torch.allclose(q1, sim.qpos, rtol=0, atol=1e-12) and torch.allclose(v1, sim.qvel, rtol=0, atol=1e-10)
    default = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    _, v0 = diff_step(default, torch.as_tensor(qpos), torch.as_tensor(qvel), torch.as_tensor(ctrl))
    assert (v0 - v1).abs().max() > 1e-3

    values = [qpos, qvel, ctrl, *_params(mjm, W, friction=True)]
    _check_gradients(sim, mjm, values, tol=1e-5)


def test_wide_diff_step_equals_fused():
    """Three chained diff_steps with the paddle pressing on the crate in both schedules: the
    same outputs bit for bit, gradients within 1e-12 relative (Warp's adjoints of the two
    schedules accumulate shared reads in different orders, as tests/test_schedule.py says)."""
    mjm = pusher()
    results = []
    for schedule in ("fused", "wide"):
        sim, qpos, qvel, ctrl = _pressed(mjm, 3, np.random.default_rng(5), schedule)
        inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl)]
        q, v = inputs[0], inputs[1]
        for _ in range(3):
            q, v = diff_step(sim, q, v, inputs[2])
        (q.square().sum() + v.square().sum()).backward()
        results.append(((q.detach(), v.detach()), [x.grad for x in inputs]))
    (out_f, grad_f), (out_w, grad_w) = results
    for a, b in zip(out_f, out_w, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_f, grad_w, strict=True):
        assert torch.isfinite(a).all() and a.abs().max() > 0
        assert ((a - b).abs().max() / a.abs().max()).item() <= 1e-12
