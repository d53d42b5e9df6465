"""Domain randomization terms (envs/randomization.py), the per-world recomputation of what
mj_setConst derives (Sim.set_const), the MuJoCo backend under randomization, and the actuator
models (envs/actuators.py), against MuJoCo and closed forms."""

import copy

import mujoco
import numpy as np
import pytest
import torch

import envs
from envs import ASSETS_DIR
from envs.quadruped import DEFAULT_RANDOMIZATION
from envs.randomization import TERM_TYPES
from simrl import Sim

QUAD = ASSETS_DIR / "quadruped.xml"

#: one term of (almost) every type, each at reset (the env tests below use it)
TERMS = {
    "friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True},
    "body_mass": {"mode": "reset", "range": [0.7, 1.3]},
    "trunk_com": {"type": "body_com", "mode": "reset", "bodies": ["trunk"], "range": [-0.03, 0.03]},
    "joint_damping": {"mode": "reset", "range": [0.2, 5.0], "distribution": "log_uniform"},
    "joint_armature": {"mode": "reset", "range": [0.0, 0.02], "operation": "add"},
    "actuator_gains": {"mode": "reset", "kp_range": [0.7, 1.3], "kd_range": [0.5, 2.0]},
    "effort_limit": {"mode": "reset", "range": [0.5, 1.0]},
    "gravity": {"mode": "reset", "range": [[-1.0, 1.0], [-1.0, 1.0], [-1.5, 1.5]], "operation": "add"},
    "push": {"mode": "reset", "range": [-0.5, 0.5]},
}


def quad(num_envs=4, **kw):
    kw = {"device": "cpu", "seed": 3, "obs_noise": 0.0, "randomization": TERMS, **kw}
    return envs.make("quadruped", num_envs=num_envs, **kw)


def contact_states(mjm, n, rng):
    """n quadruped states near home with the feet on the ground, velocities and controls."""
    home = mjm.key("home")
    qpos = np.tile(home.qpos, (n, 1))
    qpos[:, 2] -= 0.03  # the feet pressed into the floor
    qpos[:, 7:] += rng.normal(0.0, 0.05, (n, mjm.nq - 7))
    qvel = rng.normal(0.0, 0.3, (n, mjm.nv))
    ctrl = np.tile(home.ctrl, (n, 1)) + rng.normal(0.0, 0.1, (n, mjm.nu))
    return qpos, qvel, ctrl


# ------------------------------------------------------------ engine: set_const per world
def test_randomized_mass_inertia_com_armature_give_mujocos_qacc_after_set_const(rng):
    """Per world, scaled masses and inertias, moved centres of mass and added armature: the
    engine's qacc (float64, in contact) equals MuJoCo's for an MjModel given the same values
    and mj_setConst (achieved ~1e-12 relative). Without set_const (the compiled invweight0) the
    contact regularizer is wrong: qacc differs by more than 1e-5."""
    mjm = mujoco.MjModel.from_xml_path(str(QUAD))
    W = 4
    qpos, qvel, ctrl = contact_states(mjm, W, rng)
    mass_scale = rng.uniform(0.5, 2.0, (W, mjm.nbody))
    com = rng.uniform(-0.02, 0.02, (W, mjm.nbody, 3))
    armature = rng.uniform(0.0, 0.05, (W, mjm.nv))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
    sim.per_world_param("body_mass")[:] = torch.as_tensor(mjm.body_mass * mass_scale)
    sim.per_world_param("body_inertia")[:] = torch.as_tensor(mjm.body_inertia * mass_scale[..., None])
    sim.per_world_param("body_ipos")[:] = torch.as_tensor(mjm.body_ipos + com)
    sim.per_world_param("dof_armature")[:] = torch.as_tensor(mjm.dof_armature + armature)
    sim.forward()
    stale = sim.qacc.numpy().copy()
    sim.set_const()
    sim.forward()
    ours = sim.qacc.numpy()
    ref = np.zeros_like(ours)
    for w in range(W):
        m = copy.copy(mjm)
        m.body_mass[:] = mjm.body_mass * mass_scale[w]
        m.body_inertia[:] = mjm.body_inertia * mass_scale[w][:, None]
        m.body_ipos[:] = mjm.body_ipos + com[w]
        m.dof_armature[:] = mjm.dof_armature + armature[w]
        d = mujoco.MjData(m)
        mujoco.mj_setConst(m, d)
        np.testing.assert_allclose(sim.model.struct.dof_invweight0.numpy()[w], m.dof_invweight0, rtol=1e-12)
        d.qpos[:], d.qvel[:], d.ctrl[:] = qpos[w], qvel[w], ctrl[w]
        mujoco.mj_forward(m, d)
        assert d.ncon > 0
        ref[w] = d.qacc
    err = np.abs(ours - ref).max() / np.abs(ref).max()
    stale_err = np.abs(stale - ref).max() / np.abs(ref).max()
    print(f"qacc relative error after set_const {err:.1e}, with the compiled invweight0 {stale_err:.1e}")
    assert err < 1e-8 and stale_err > 1e-5, (err, stale_err)


def test_per_world_gravity_and_forcerange_reach_the_engine():
    """gravity [W, 3] and actuator_forcerange [W, nu, 2] are per world: a free body in each world
    falls with its own gravity, and each world's actuator force is clamped to its own range."""
    xml = """<mujoco><worldbody><body><freejoint/><geom size="0.1" mass="2"/></body>
      <body pos="1 0 0"><joint name="j" type="hinge"/><geom size="0.1" mass="1"/></body></worldbody>
      <actuator><motor joint="j" forcelimited="true" forcerange="-1 1"/></actuator></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float64")
    g = torch.tensor([[0.0, 0.0, -9.81], [1.0, 0.0, -3.0], [0.0, -2.0, 0.0]], dtype=torch.float64)
    sim.per_world_param("gravity")[:] = g
    sim.per_world_param("actuator_forcerange")[:, 0] = torch.tensor([[-1.0, 1.0], [-0.5, 0.5], [-0.2, 0.3]])
    sim.ctrl[:] = 5.0
    sim.forward()
    np.testing.assert_allclose(sim.qacc[:, :3].numpy(), g.numpy(), rtol=1e-12)
    np.testing.assert_allclose(sim.view("actuator_force")[:, 0].numpy(), [1.0, 0.5, 0.3])


def test_thread_blocks_see_per_world_parameters_set_between_steps():
    """With CPU threads, each block of worlds steps with a Model whose per-world arrays are
    slices of the Sim's (kept from step to step): a parameter made per-world after steps began
    (a new array) and values written in place into an existing one both reach every block,
    exactly as on one thread."""
    xml = """<mujoco><worldbody><body><freejoint/><geom size="0.1" mass="2"/></body>
      <body pos="1 0 0"><joint name="j" type="hinge" damping="0.1"/><geom size="0.1" mass="1"/></body>
      </worldbody><actuator><motor joint="j"/></actuator></mujoco>"""
    mjm = mujoco.MjModel.from_xml_string(xml)
    one, two = (Sim.from_model(mjm, num_worlds=4, dtype="float64", cpu_threads=t) for t in (1, 2))
    assert two.cpu_threads == 2
    for sim in (one, two):
        sim.per_world_param("gravity")[:] = torch.tensor([[0.0, 0.0, -9.81], [1.0, 0.0, -3.0],
                                                          [0.0, -2.0, 0.0], [0.0, 0.0, -1.0]], dtype=torch.float64)
        sim.ctrl[:] = 1.0
        sim.step(3)
        sim.per_world_param("dof_damping")[:, 6] = torch.tensor([0.0, 1.0, 2.0, 3.0])  # a new [W, nv] array
        sim.step(3)
        sim.per_world_param("gravity")[:, 2] = torch.tensor([-1.0, -2.0, -3.0, -4.0])  # in place
        sim.step(3)
    assert torch.equal(one.qpos, two.qpos) and torch.equal(one.qvel, two.qvel)
    # the damping and the gravity written last did act: worlds with the same start differ
    assert len({float(v) for v in two.qvel[:, 6]}) == 4 and len({float(v) for v in two.qvel[:, 2]}) == 4


# ----------------------------------------------------------------- terms through the env
def test_terms_reach_both_backends_identically_and_trajectories_agree():
    """The same terms and seed in the Warp engine (float64) and in MuJoCo: every randomized
    field has the same value in both, and 10 policy steps (40 physics steps, contacts) give the
    same trajectory (achieved ~1e-10); without the randomization the worlds would not differ."""
    warp, mj = quad(dtype="float64"), quad(backend="mujoco")
    for env in (warp, mj):
        env.reset()
    fields = ("body_mass", "body_inertia", "body_ipos", "dof_damping", "dof_armature", "actuator_gainprm",
              "actuator_biasprm", "actuator_forcerange", "gravity", "cpair_friction")
    for name in fields:
        a, b = warp.sim.per_world_param(name), mj.sim.per_world_param(name)
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-12, err_msg=name)
        assert not torch.equal(a[0], a[1]), f"{name}: worlds 0 and 1 got the same values"
    actions = torch.randn(10, 4, 12, generator=torch.Generator().manual_seed(0)) * 0.3
    for t in range(10):
        warp.step(actions[t])
        mj.step(actions[t])
    err = (warp.sim.qpos - mj.sim.qpos).abs().max().item()
    print(f"qpos difference after 10 randomized policy steps: {err:.1e}")
    assert err < 1e-7


def test_draws_are_seeded_per_world_and_independent_of_the_other_worlds():
    """Same seed: the same values; another seed: others; world w's values do not depend on how
    many worlds the env has; resetting world 0 redraws world 0 only."""
    a, b, c = quad(4), quad(4), quad(2)
    other = quad(4, seed=4)
    for env in (a, b, c, other):
        env.reset()
    mass = lambda env: env.sim.per_world_param("body_mass").clone()  # noqa: E731
    assert torch.equal(mass(a), mass(b)) and torch.equal(mass(a)[:2], mass(c))
    assert not torch.equal(mass(a), mass(other))
    before = mass(a)
    a._reset(torch.tensor([0]))
    after = mass(a)
    assert not torch.equal(after[0], before[0]) and torch.equal(after[1:], before[1:])


def test_modes_startup_reset_interval_fire_when_they_should():
    """startup: drawn once when the env is built, kept through resets; reset: drawn at each reset
    of that world; interval: every interval_s of a world's episode (interval_s = 3 policy steps),
    or after a random 2..4 steps when interval_s is a range."""
    dt = 0.02
    cfg = {"mass": {"type": "body_mass", "mode": "startup", "bodies": ["trunk"], "range": [0.5, 1.5]},
           "damping": {"type": "joint_damping", "mode": "reset", "range": [0.5, 2.0]},
           "gravity": {"mode": "interval", "interval_s": 3 * dt, "range": [-1.0, 1.0]},
           "push": {"mode": "interval", "interval_s": [2 * dt, 4 * dt], "range": [-0.1, 0.1]}}
    env = quad(8, randomization=cfg, episode_length_s=100.0)
    env._terminated = lambda: torch.zeros(8, dtype=torch.bool)
    sim = env.sim
    trunk = sim.mj_model.body("trunk").id
    startup = sim.per_world_param("body_mass")[:, trunk].clone()
    assert not torch.allclose(startup, torch.full_like(startup, float(sim.mj_model.body_mass[trunk])))
    env.reset()
    assert torch.equal(sim.per_world_param("body_mass")[:, trunk], startup)
    damping = sim.per_world_param("dof_damping").clone()
    gravity = [sim.per_world_param("gravity").clone()]
    pushes = torch.zeros(8, dtype=torch.long)
    for _ in range(12):
        push_timer = env.randomization.timers["push"].clone()
        env.step(torch.zeros(8, 12))
        gravity.append(sim.per_world_param("gravity").clone())
        pushes += (push_timer == 1).long()
    changed = [bool((g1 != g0).any(dim=1).all()) for g0, g1 in zip(gravity[:-1], gravity[1:], strict=True)]
    unchanged = [bool((g1 == g0).all()) for g0, g1 in zip(gravity[:-1], gravity[1:], strict=True)]
    assert [t + 1 for t, c in enumerate(changed) if c] == [3, 6, 9, 12]
    assert all(c or u for c, u in zip(changed, unchanged, strict=True))
    assert torch.equal(sim.per_world_param("dof_damping"), damping)  # no reset happened
    assert ((pushes >= 3) & (pushes <= 6)).all(), pushes  # 12 steps at 2..4 steps each
    env._reset(torch.tensor([5]))
    new = sim.per_world_param("dof_damping")
    assert not torch.equal(new[5], damping[5]) and torch.equal(new[:5], damping[:5])
    assert torch.equal(sim.per_world_param("body_mass")[:, trunk], startup)


def test_mass_term_scales_inertia_and_values_stay_in_range():
    """body_mass scale s: mass = nominal s, inertia = nominal inertia s (same radii of gyration);
    every value within the range; invweight0 follows (set_const ran)."""
    env = quad(16)
    env.reset()
    mjm = env.sim.mj_model
    mass = env.sim.per_world_param("body_mass").numpy()[:, 1:]
    scale = mass / mjm.body_mass[1:]
    assert (scale >= 0.7 - 1e-6).all() and (scale <= 1.3 + 1e-6).all() and scale.std() > 0.1
    np.testing.assert_allclose(env.sim.per_world_param("body_inertia").numpy()[:, 1:],
                               mjm.body_inertia[1:] * scale[..., None], rtol=1e-5)
    assert not np.allclose(env.sim.model.struct.body_invweight0.numpy()[0], mjm.body_invweight0)


def test_encoder_bias_offsets_the_policys_joint_positions_only():
    cfg = {"encoder_bias": {"mode": "reset", "range": [-0.05, 0.05]}}
    env = quad(8, randomization=cfg)
    obs = env.reset()
    bias = (obs["policy"][:, 12:24] - obs["critic"][:, 12:24]).numpy()
    np.testing.assert_allclose(bias, env.encoder_bias[:, 7:].numpy(), atol=1e-6)
    assert (np.abs(bias) <= 0.05 + 1e-6).all() and np.abs(bias).max() > 0.02


def test_action_delay_applies_the_action_of_d_policy_steps_ago():
    """With an action delay d (0..2 per world), the controls of step t are those of action t - d
    (zero before the episode's first action)."""
    cfg = {"action_delay": {"mode": "reset", "range": [0, 2]}}
    env = quad(16, randomization=cfg, episode_length_s=100.0)
    env._terminated = lambda: torch.zeros(16, dtype=torch.bool)
    env.reset()
    delay = env.action_delay.clone()
    assert set(delay.tolist()) == {0, 1, 2}
    actions = torch.rand(5, 16, 12, generator=torch.Generator().manual_seed(1)) * 0.4 - 0.2
    for t in range(5):
        env.step(actions[t])
        expected = torch.stack([actions[t - d, w] if t >= d else torch.zeros(12) for w, d in enumerate(delay.tolist())])
        target = torch.clamp(env.default_joint_pos + env.action_scale * expected, env.ctrl_low, env.ctrl_high)
        torch.testing.assert_close(env.sim.ctrl, target)


def test_configuration_errors_name_the_problem():
    with pytest.raises(ValueError, match=r"unknown bodies \['torso'\]; the model has: world, trunk, FR_hip"):
        quad(randomization={"body_mass": {"bodies": ["torso"], "range": [0.9, 1.1]}})
    with pytest.raises(ValueError, match="unknown term type 'mass'"):
        quad(randomization={"mass": {"range": [0.9, 1.1]}})
    with pytest.raises(ValueError, match=r"unknown keys \['rnage'\]"):
        quad(randomization={"body_mass": {"rnage": [0.9, 1.1]}})
    with pytest.raises(ValueError, match="body_mass.mode: one of startup, reset, interval"):
        quad(randomization={"body_mass": {"mode": "always", "range": [0.9, 1.1]}})
    with pytest.raises(ValueError, match="no frictionloss in the MJCF"):
        quad(randomization={"joint_frictionloss": {"range": [0.0, 0.1], "operation": "add"}})
    with pytest.raises(ValueError, match="mode interval needs interval_s"):
        quad(randomization={"push": {"mode": "interval", "range": [-1, 1]}})
    with pytest.raises(ValueError, match="could get a mass <= 0"):
        quad(randomization={"body_mass": {"bodies": ["trunk"], "operation": "add", "range": [-100.0, 1.0]}})
    with pytest.raises(ValueError, match="both set body_mass"):
        quad(randomization={"a": {"type": "body_mass", "range": [0.9, 1.1]},
                            "b": {"type": "body_mass", "bodies": ["trunk"], "range": [0.9, 1.1]}})
    with pytest.raises(ValueError, match="unknown keys \\['kp'\\] for type mujoco"):
        quad(actuator={"type": "mujoco", "kp": 3})
    from tasks.config import check_env

    errors = check_env("quadruped", {"randomization": {"mass": {"range": [1, 2]}}, "actuator": {"type": "servo"}})
    assert any("unknown term type 'mass'" in e for e in errors) and any("servo" in e for e in errors)


def test_every_term_type_names_its_fields_and_recomputation():
    for name, cls in TERM_TYPES.items():
        assert cls.fields and cls.recompute, name


# ------------------------------------------------------------------------- actuator models
def test_pd_and_dc_motor_torques_are_the_closed_forms(rng):
    """pd: tau = clip(kp (target - q) - kd qd, +-effort_limit) in qfrc_applied of the actuated
    dofs; dc_motor: the pd torque clipped to [clip(S (-1 - qd / vmax), -limit, 0),
    clip(S (1 - qd / vmax), 0, limit)]; the MJCF's servos add nothing (actuator_force 0)."""
    n = 64
    for kind, extra in (("pd", {}), ("dc_motor", {"saturation_effort": 40.0, "velocity_limit": 10.0})):
        env = quad(n, randomization={}, dtype="float64",
                   actuator={"type": kind, "kp": 50.0, "kd": 2.0, "effort_limit": 20.0, **extra})
        env.reset()
        q = env.sim.qpos[:, 7:].clone()
        qd = torch.as_tensor(rng.uniform(-15, 15, (n, 12)))
        env.sim.qvel[:, 6:] = qd
        target = q + torch.as_tensor(rng.uniform(-0.6, 0.6, (n, 12)))
        env.actuator_model.apply(target)
        tau = (50.0 * (target - q) - 2.0 * qd).numpy()
        if kind == "pd":
            expected = np.clip(tau, -20.0, 20.0)
        else:
            top = np.clip(40.0 * (1 - qd.numpy() / 10.0), 0, 20.0)
            bottom = np.clip(40.0 * (-1 - qd.numpy() / 10.0), -20.0, 0)
            expected = np.clip(tau, bottom, top)
            assert (expected != np.clip(tau, -20, 20)).any()  # the speed limit binds somewhere
        np.testing.assert_allclose(env.sim.qfrc_applied[:, 6:].numpy(), expected, rtol=1e-12, atol=1e-12)
        env.sim.step()
        assert env.sim.view("actuator_force").abs().max() == 0.0


def test_pd_with_the_mjcf_gains_is_mujocos_position_servo():
    """pd with the MJCF's kp, kv and forcerange (the defaults) gives the trajectory of MuJoCo's
    own position actuators (float64, 10 policy steps: achieved ~1e-13)."""
    actions = torch.randn(10, 4, 12, generator=torch.Generator().manual_seed(2)) * 0.5
    runs = []
    for actuator in ({"type": "mujoco"}, {"type": "pd"}):
        env = quad(randomization={}, dtype="float64", actuator=actuator)
        env.reset()
        for t in range(10):
            env.step(actions[t])
        runs.append(env.sim.qpos.clone())
    err = (runs[0] - runs[1]).abs().max().item()
    assert err < 1e-9, err
    assert (runs[0] - quad(randomization={}, dtype="float64").sim.qpos).abs().max() > 1e-2  # it moved


def test_actuator_delay_in_physics_steps_per_world():
    """delay [0, 3]: world w's torque at physics step k uses the target of step k - d_w (the
    first target before that)."""
    env = quad(16, randomization={}, actuator={"type": "pd", "delay": [0, 3]})
    env.reset()
    model = env.actuator_model
    assert set(model.delay.tolist()) == {0, 1, 2, 3}
    targets = [torch.full((16, 12), 0.1 * (k + 1)) for k in range(5)]
    applied = []
    for k in range(5):
        model.apply(targets[k])
        applied.append(env.sim.ctrl.float().clone())
    for w, d in enumerate(model.delay.tolist()):
        for k in range(5):
            torch.testing.assert_close(applied[k][w], targets[max(0, k - d)][w])


def test_pd_gains_and_effort_limit_terms_set_the_actuator_model():
    cfg = {"actuator_gains": {"mode": "reset", "kp_range": [0.5, 1.5], "kd_range": [1.0, 1.0]},
           "effort_limit": {"mode": "reset", "range": [5.0, 10.0], "operation": "abs"}}
    env = quad(8, randomization=cfg, actuator={"type": "pd", "kp": 40.0, "kd": 1.5})
    env.reset()
    m = env.actuator_model
    assert ((m.kp >= 20.0) & (m.kp <= 60.0)).all() and m.kp.std() > 1.0
    assert torch.equal(m.kd, torch.full_like(m.kd, 1.5))
    assert ((m.effort_limit >= 5.0) & (m.effort_limit <= 10.0)).all()


def test_the_default_task_randomization_is_the_task_files():
    from omegaconf import OmegaConf

    from tasks import TASKS_DIR

    task = OmegaConf.to_container(OmegaConf.load(TASKS_DIR / "quadruped.yaml"))
    assert task["env"]["randomization"] == DEFAULT_RANDOMIZATION
