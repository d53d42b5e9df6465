"""The terms an env is composed of (envs/terms.py, envs/mdp/), by value: the velocity command's
draws and schedule, the terminations and their causes, every kind of randomization event and the
curricula, each against its formula written out here; the term sections of a task file (checks,
a robot's own parameters, the former flat keys refused with what to write instead). The reward
terms are in test_task_terms.py, test_humanoid.py and test_gait.py.

A term's random draws come from the env's per-world streams (BatchedEnv.rand_worlds), which are
counter-based: rewinding a world's counter replays its draws (`replay`), so the expected values
are the formulas applied to the very uniforms the term took.
"""

import math

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat

import envs
from envs import ASSETS_DIR, terms
from envs.cartpole import CartpoleEnv
from envs.legged import LeggedEnv
from envs.mdp import cartpole, commands, curriculum
from envs.mdp.curriculum import update_terrain_levels

NO_EVENTS: dict = {}
QUAD_MJM = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
SMALL = {"rows": 5, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 30.0,
         "max_init_level": 4}


def replay(env, before: torch.Tensor, ids: torch.Tensor, *shape) -> torch.Tensor:
    """The uniforms [len(ids), *shape] the worlds `ids` drew since their counters were `before`
    (float64), checking that it was one draw each."""
    after = env.world_draws.clone()
    env.world_draws.copy_(before)
    u = env.rand_worlds(ids, *shape).double()
    assert torch.equal(env.world_draws[ids], after[ids])
    env.world_draws.copy_(after)
    return u


def quad(n, **kwargs):
    return envs.make("quadruped", num_envs=n, device="cpu", seed=5, **{"randomization": NO_EVENTS, **kwargs})


# ---------------------------------------------------------------------------------- registries
@pytest.mark.parametrize("name", envs.names())
def test_every_term_comes_from_its_registry(name):
    """Each env class's default terms are named in its registries, the built terms are those
    functions (or instances of those classes), and no reward is a method found by its name."""
    env = envs.make(name, num_envs=1, device="cpu")
    cls = type(env)
    for section, (registry, defaults, _) in terms.SECTIONS.items():
        assert set(getattr(cls, defaults, {})) <= set(getattr(cls, registry, {})), (name, section)
    for built, registry in ((env.reward_terms, cls.REWARD_TERMS), (env.termination_terms, cls.TERMINATION_TERMS)):
        for term_name, term in built.items():
            func = registry[term_name]
            assert term.func is func or isinstance(term.func, func), (name, term_name)
    assert not [n for n in dir(cls) if n.startswith("_reward_")]


# ------------------------------------------------------------------------------------ commands
def test_velocity_command_draws_by_hand():
    """base_velocity.resample: command = lo + (hi - lo) u per component, and with heading commands
    a target heading lo + (hi - lo) u' from the next draw of the same world; only those worlds."""
    ranges = [(-0.7, 1.2), (-0.4, 0.1), (0.3, 0.9)]
    velocity = {"lin_vel_x": ranges[0], "lin_vel_y": ranges[1], "ang_vel_yaw": ranges[2], "heading_command": True,
                "heading_range": (-1.0, 2.5), "resample_s": 0.1}
    env = quad(6, commands={"base_velocity": velocity})
    term = env.velocity_command
    assert isinstance(term, commands.base_velocity) and term.resample_steps == 5  # 0.1 s / 0.02 s
    assert env.command_ranges.tolist() == [[pytest.approx(lo), pytest.approx(hi)] for lo, hi in ranges]
    ids = torch.tensor([1, 4, 5])
    old_commands, old_targets = env.commands.clone(), env.heading_target.clone()
    before = env.world_draws.clone()
    term.resample(env, ids)
    after = env.world_draws.clone()
    env.world_draws.copy_(before)  # replay: the command's draw, then the heading's
    u = env.rand_worlds(ids, 3).double()
    heading = env.rand_worlds(ids, 1).double()[:, 0]
    assert torch.equal(env.world_draws, after)
    lo, hi = np.array(ranges).T
    np.testing.assert_allclose(env.commands[ids].numpy(), lo + (hi - lo) * u.numpy(), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(env.heading_target[ids].numpy(), -1.0 + 3.5 * heading.numpy(), rtol=1e-6)
    others = torch.tensor([0, 2, 3])
    assert torch.equal(env.commands[others], old_commands[others])
    assert torch.equal(env.heading_target[others], old_targets[others])


def test_velocity_command_step_redraws_the_worlds_that_are_due():
    """base_velocity.step: a world redraws when its episode's step count is a multiple of
    resample_steps (0 included), the others keep their command."""
    env = quad(6, commands={"base_velocity": {"resample_s": 0.1}})
    env.episode_length_buf[:] = torch.tensor([0, 5, 7, 10, 4, 16])
    due = torch.tensor([0, 1, 3])
    old = env.commands.clone()
    before = env.world_draws.clone()
    env.velocity_command.step(env)
    u = replay(env, before, due, 3).numpy()
    lo, hi = np.array([(-1.0, 1.0), (-0.5, 0.5), (-1.0, 1.0)]).T  # the signature's defaults
    np.testing.assert_allclose(env.commands[due].numpy(), lo + (hi - lo) * u, rtol=1e-6, atol=1e-7)
    assert torch.equal(env.commands[[2, 4, 5]], old[[2, 4, 5]])
    assert torch.equal(env.world_draws[[2, 4, 5]], before[[2, 4, 5]])


def test_heading_yaw_rate_by_hand():
    """stiffness x (target - heading) wrapped to [-pi, pi], clipped to [lo, hi]."""
    target = torch.tensor([0.5, -3.0, 3.0, 2.0, 0.1])
    heading = torch.tensor([0.0, 3.0, -3.0, -2.0, 0.0])
    error = np.array([0.5, 2 * math.pi - 6.0, 6.0 - 2 * math.pi, 4.0 - 2 * math.pi, 0.1])
    np.testing.assert_allclose(commands.heading_yaw_rate(target, heading, 0.8, -0.6, 0.9).numpy(),
                               np.clip(0.8 * error, -0.6, 0.9), atol=1e-6)


# -------------------------------------------------------------------------------- terminations
def test_only_the_listed_terminations_end_an_episode(rng):
    """A state with the trunk on the floor below 0.15 m, one upside down in the air: with
    terminations {upside_down} only the second fails, and termination_causes names that term
    alone; with the default three both fail, by the causes written out here."""
    lying = QUAD_MJM.key("home").qpos.copy()
    lying[7:] = [0.0, 2.0, -2.7] * 4  # legs folded: the trunk rests on the floor
    lying[2] = 0.05
    upside = QUAD_MJM.key("home").qpos.copy()
    upside[3:7] = axis_angle_quat([1, 0, 0], math.pi)
    upside[2] = 1.0
    qpos = torch.as_tensor(np.stack([lying, upside]), dtype=torch.float32)
    for listed, expected in (({"upside_down": {}}, {"upside_down": [False, True]}),
                             (None, {"base_contact": [True, False], "base_height": [True, False],
                                     "upside_down": [False, True]})):
        env = quad(2, terminations=listed)
        env.sim.qpos[:] = qpos
        env.sim.qvel[:] = 0.0
        env.sim.forward()
        env._base_cache = env._contact_cache = None
        terminated = env.terminated()
        assert {k: v.tolist() for k, v in env.termination_causes.items()} == expected
        assert terminated.tolist() == [any(v[w] for v in expected.values()) for w in range(2)]


def test_cartpole_terminations_by_hand():
    """cart_out_of_bounds: |x| > limit; pole_fallen: |angle| > limit; each with its own limit."""
    qpos = np.array([[0.0, 0.0], [1.9, 0.0], [2.1, 0.0], [0.0, 0.29], [0.0, -0.31], [-2.2, 1.0]])
    env = envs.make("cartpole", num_envs=len(qpos), device="cpu",
                    terminations={"cart_out_of_bounds": {"limit": 2.0}, "pole_fallen": {"limit": 0.3}})
    env.sim.qpos[:] = torch.as_tensor(qpos, dtype=torch.float32)
    assert env.terminated().tolist() == [False, False, True, False, True, True]
    causes = {k: v.tolist() for k, v in env.termination_causes.items()}
    assert causes == {"cart_out_of_bounds": (np.abs(qpos[:, 0]) > 2.0).tolist(),
                      "pole_fallen": (np.abs(qpos[:, 1]) > 0.3).tolist()}
    assert cartpole.pole_fallen(env, limit=1.5).tolist() == [False] * len(qpos)


# -------------------------------------------------------------------------------------- events
def _event(term_cfg):
    """A 4-world quadruped with one randomization term (applied by hand below: at construction
    the model holds the MJCF's nominal values), the term and its type's nominal values."""
    env = quad(4, randomization={"event": {**term_cfg, "mode": "reset"}})
    return env, env.randomization.terms[0]


EVENTS = {  # type -> (settings, uniform draws' shape per world)
    "body_mass": ({"bodies": ["trunk", "FR_thigh"], "range": [0.7, 1.3]}, (2, 1)),
    "body_inertia": ({"bodies": ["trunk"], "range": [0.8, 1.2]}, (1, 1)),
    "body_com": ({"bodies": ["trunk"], "range": [[-0.01, 0.01], [-0.02, 0.02], [-0.03, 0.03]]}, (1, 3)),
    "joint_damping": ({"range": [0.2, 5.0], "distribution": "log_uniform"}, (12, 1)),
    "joint_armature": ({"range": [0.0, 0.02], "operation": "add"}, (12, 1)),
    "friction": ({"range": [0.3, 1.7], "operation": "abs", "shared": True}, (1, 1)),
    "effort_limit": ({"range": [0.5, 1.0]}, (12, 1)),
    "gravity": ({"range": [[-1.0, 1.0], [-1.0, 1.0], [-1.5, 1.5]], "operation": "add"}, (1, 3)),
    "push": ({"range": [[-0.5, 0.5], [-0.2, 0.3]]}, (1, 2)),
    "encoder_bias": ({"range": [-0.05, 0.05]}, (12, 1)),
    "action_delay": ({"range": [1, 3]}, (1,)),
}


def _written(env, kind) -> torch.Tensor:
    """The tensor a randomization term of type `kind` writes."""
    field = {"body_mass": "body_mass", "body_inertia": "body_inertia", "body_com": "body_ipos",
             "joint_damping": "dof_damping", "joint_armature": "dof_armature", "friction": "cpair_friction",
             "effort_limit": "actuator_forcerange", "gravity": "gravity"}.get(kind)
    if field is not None:
        return env.sim.per_world_param(field)
    return {"push": env.sim.qvel, "encoder_bias": getattr(env, "encoder_bias", None),
            "action_delay": env.action_delay}[kind]


@pytest.mark.parametrize("kind", list(EVENTS))
def test_event_values_by_hand(kind):
    """Each randomization type's new values from the uniforms u it drew: lo + (hi - lo) u
    (log_uniform: exp(log lo + (log hi - log lo) u)), combined with the MJCF's nominal value as
    its operation says (scale x, add +, abs =); a world it is not applied to keeps its values."""
    settings, shape = EVENTS[kind]
    env, term = _event({"type": kind, **settings})
    sim, m = env.sim, QUAD_MJM
    ids = torch.tensor([0, 2, 3])
    rng = np.array(settings["range"], dtype=np.float64).reshape(-1, 2)
    lo, hi = rng[:, 0], rng[:, 1]
    written = _written(env, kind).clone()
    before = env.world_draws.clone()
    term.apply(ids)
    u = replay(env, before, ids, *shape).numpy()
    value = lo + (hi - lo) * u
    hinge_dofs = np.arange(6, 18)
    joint_cols = np.array([m.jnt_qposadr[j] for j in range(1, m.njnt)])
    if kind == "body_mass":
        bodies = [m.body("trunk").id, m.body("FR_thigh").id]
        mass = m.body_mass[bodies] * value[..., 0]
        np.testing.assert_allclose(sim.per_world_param("body_mass")[ids][:, bodies].numpy(), mass, rtol=1e-6)
        np.testing.assert_allclose(sim.per_world_param("body_inertia")[ids][:, bodies].numpy(),
                                   m.body_inertia[bodies] * value, rtol=1e-6)
    elif kind == "body_inertia":
        trunk = m.body("trunk").id
        np.testing.assert_allclose(sim.per_world_param("body_inertia")[ids, trunk].numpy(),
                                   m.body_inertia[trunk] * value[:, 0], rtol=1e-6)
    elif kind == "body_com":
        trunk = m.body("trunk").id
        np.testing.assert_allclose(sim.per_world_param("body_ipos")[ids, trunk].numpy(),
                                   m.body_ipos[trunk] + value[:, 0], rtol=1e-6, atol=1e-7)
    elif kind == "joint_damping":
        log = np.log(lo) + (np.log(hi) - np.log(lo)) * u
        np.testing.assert_allclose(sim.per_world_param("dof_damping")[ids][:, hinge_dofs].numpy(),
                                   m.dof_damping[hinge_dofs] * np.exp(log[..., 0]), rtol=1e-6)
    elif kind == "joint_armature":
        np.testing.assert_allclose(sim.per_world_param("dof_armature")[ids][:, hinge_dofs].numpy(),
                                   m.dof_armature[hinge_dofs] + value[..., 0], rtol=1e-6)
    elif kind == "friction":  # one coefficient per world: both tangential entries of every pair
        friction = sim.per_world_param("cpair_friction")[ids].numpy()
        np.testing.assert_allclose(friction[..., :2], np.broadcast_to(value[:, :, :1], friction[..., :2].shape),
                                   rtol=1e-6)
    elif kind == "effort_limit":  # both ends of the force range scaled
        np.testing.assert_allclose(sim.per_world_param("actuator_forcerange")[ids].numpy(),
                                   m.actuator_forcerange * value, rtol=1e-6)
    elif kind == "gravity":
        np.testing.assert_allclose(sim.per_world_param("gravity")[ids].numpy(), m.opt.gravity + value[:, 0],
                                   rtol=1e-6, atol=1e-7)
    elif kind == "push":  # a kick of the base's x, y velocity, added to the state
        np.testing.assert_allclose((sim.qvel - written)[ids][:, :2].numpy(), value[:, 0], rtol=1e-5, atol=1e-7)
        assert torch.equal(sim.qvel[:, 2:], written[:, 2:])
    elif kind == "encoder_bias":
        np.testing.assert_allclose(env.encoder_bias[ids][:, joint_cols].numpy(), value[..., 0], rtol=1e-6,
                                   atol=1e-8)
    else:  # action_delay: lo + floor(u (hi - lo + 1)) policy steps
        assert env.action_delay[ids].tolist() == (1 + np.floor(u[:, 0] * 3)).astype(int).tolist()
    assert torch.equal(_written(env, kind)[1], written[1])
    assert not torch.equal(_written(env, kind)[ids], written[ids])


def test_actuator_gains_event_by_hand():
    """actuator_gains: kp = kp0 (lo + (hi - lo) u), then kd from the next draw; written as MuJoCo's
    position servo: gainprm[0] = kp, biasprm[1] = -kp, biasprm[2] = -kd."""
    env, term = _event({"type": "actuator_gains", "kp_range": [0.7, 1.3], "kd_range": [0.5, 2.0]})
    ids = torch.tensor([1, 3])
    before = env.world_draws.clone()
    term.apply(ids)
    after = env.world_draws.clone()
    env.world_draws.copy_(before)
    u_kp = env.rand_worlds(ids, 12, 1).double()[..., 0].numpy()
    u_kd = env.rand_worlds(ids, 12, 1).double()[..., 0].numpy()
    assert torch.equal(env.world_draws, after)
    kp = QUAD_MJM.actuator_gainprm[:, 0] * (0.7 + 0.6 * u_kp)
    kd = -QUAD_MJM.actuator_biasprm[:, 2] * (0.5 + 1.5 * u_kd)
    gain, bias = env.sim.per_world_param("actuator_gainprm")[ids], env.sim.per_world_param("actuator_biasprm")[ids]
    np.testing.assert_allclose(gain[..., 0].numpy(), kp, rtol=1e-6)
    np.testing.assert_allclose(bias[..., 1].numpy(), -kp, rtol=1e-6)
    np.testing.assert_allclose(bias[..., 2].numpy(), -kd, rtol=1e-6)


# ---------------------------------------------------------------------------------- curriculum
def test_terrain_curriculum_rule_at_its_thresholds():
    """update_terrain_levels with 4 m patches and 20 s episodes: up a row when the distance walked
    exceeds 2 m (not at 2 m), down when it is below |cmd| x 20 s x 0.5 (1 m at 0.1 m/s: 0.99 m
    down, 1.01 m stays) unless moving up; never below row 0; past the top row (4 of 5) the
    random row; reaching the top row from below is not past it."""
    cases = [  # level, distance, |cmd|, expected
        (2, 2.0, 0.0, 2), (2, 2.01, 0.0, 3), (2, 1.99, 0.0, 2),
        (2, 0.99, 0.1, 1), (2, 1.01, 0.1, 2), (2, 0.5, 0.04, 2), (2, 0.35, 0.04, 1),
        (2, 2.5, 1.0, 3),  # far, though short of the 10 m asked: up, not down
        (0, 0.0, 1.0, 0), (3, 3.0, 0.0, 4), (4, 3.0, 0.0, 1), (4, 1.0, 0.0, 4), (4, 0.1, 0.5, 3),
    ]
    levels = torch.tensor([c[0] for c in cases])
    distance = torch.tensor([c[1] for c in cases])
    command = torch.tensor([[c[2] * 0.6, c[2] * 0.8] for c in cases])  # |(0.6 s, 0.8 s)| = s
    random_rows = torch.full((len(cases),), 1)
    new = update_terrain_levels(levels, distance, command, 4.0, 20.0, 5, random_rows)
    assert new.tolist() == [c[3] for c in cases]
    # the episode length scales the down threshold: with 10 s, 0.5 m at 0.1 m/s stays
    assert update_terrain_levels(torch.tensor([2, 2]), torch.tensor([0.49, 0.51]), torch.tensor([[0.1, 0.0]] * 2),
                                 4.0, 10.0, 5, torch.tensor([0, 0])).tolist() == [1, 2]


def _rough(n=6, **kwargs):
    return envs.make("quadruped_rough", num_envs=n, device="cpu", seed=2, terrain=SMALL, randomization=NO_EVENTS,
                     **kwargs)


def test_terrain_levels_term_moves_the_worlds_that_ended_by_hand():
    """The terrain_levels term at a reset: for the worlds whose episode ended (steps > 0), the
    distance from the spawn point and the command of the episode give the new row by the rule,
    with the episode length of the env (here 10 s: 0.5 m at 0.1 m/s is the down threshold); a
    world past the top row gets row floor(5 u) from its next draw; the spawn point becomes the
    new patch's centre. A world resetting at step 0 neither moves nor draws."""
    env = _rough(6, episode_length_s=10.0)
    env.reset()
    term = env.curriculum_terms["terrain_levels"]
    assert isinstance(term.func, curriculum.terrain_levels)
    env.terrain_levels[:] = torch.tensor([2, 2, 2, 4, 0, 3])
    env.env_origins[:] = env.terrain_origins[env.terrain_levels, env.terrain_types]
    walked = torch.tensor([2.2, 0.45, 0.55, 2.5, 0.0, 3.0])  # m along x from the spawn point
    env.sim.qpos[:, :2] = (env.env_origins[:, :2] + torch.stack([walked, torch.zeros(6)], 1)).to(env.sim.qpos.dtype)
    env.commands[:] = torch.tensor([[0.0, 0.0, 0.0], [0.1, 0.0, 0.0], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0],
                                    [1.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    env.episode_length_buf[:] = torch.tensor([100, 100, 100, 100, 100, 0])
    ids = torch.arange(6)
    before = env.world_draws.clone()
    origins = env.env_origins.clone()
    term(env, ids)
    ended = torch.tensor([True] * 5 + [False])
    env.world_draws.copy_(before)
    top = int(np.floor(float(env.rand_worlds(ids, 1, mask=ended)[3, 0]) * 5))
    assert env.terrain_levels.tolist() == [3, 1, 2, top, 0, 3]
    assert env.world_draws.tolist() == (before + ended.long()).tolist()
    expected = env.terrain_origins[env.terrain_levels, env.terrain_types]
    assert torch.equal(env.env_origins[:5], expected[:5]) and torch.equal(env.env_origins[5], origins[5])
    # and the next reset spawns there
    env._reset(torch.tensor([0]))
    assert torch.allclose(env.sim.qpos[0, :3].float(), env.home_qpos[:3] + env.terrain_origins[3, env.terrain_types[0]])


def test_the_curriculum_section_and_the_terrains_rows():
    """Without a curriculum section the terrain_levels term runs when terrain.curriculum is on, and
    no term when it is off; listed with terrain.curriculum off it is an error naming the fix."""
    assert list(_rough(2).curriculum_terms) == ["terrain_levels"]
    flat_rows = {**SMALL, "curriculum": False}
    env = envs.make("quadruped_rough", num_envs=2, device="cpu", terrain=flat_rows, randomization=NO_EVENTS)
    assert env.curriculum_terms == {}
    with pytest.raises(ValueError, match="terrain_levels .* needs terrain.curriculum: true"):
        envs.make("quadruped_rough", num_envs=2, device="cpu", terrain=flat_rows, curriculum={"terrain_levels": {}})


@pytest.mark.parametrize("share, widened", [(0.79, False), (0.81, True)])
def test_command_curriculum_widens_past_80_percent_up_to_its_maximum(share, widened):
    """command_vel: at a step that is a multiple of the episode length, the worlds ending then
    earned `share` of the largest tracking reward; above 80% lin_vel_x widens by 0.5 m/s each
    way, capped at max_lin_vel_x (1.2 m/s here: [-1.2, 1.2], not [-1.5, 1.5])."""
    env = _rough(4, curriculum={"terrain_levels": {}, "command_vel": {"max_lin_vel_x": 1.2}})
    env.reset()
    n = env.max_episode_length
    env._steps = n - 1
    env.episode_length_buf[:] = n - 1
    env.episode_sums["tracking_lin_vel"][:] = share * env.reward_weights["tracking_lin_vel"] * env.step_dt * n
    _, _, _, time_outs, extras = env.step(torch.zeros(4, 12))
    assert time_outs.all()
    expected = [-1.2, 1.2] if widened else [-1.0, 1.0]
    assert env.command_ranges[0].tolist() == pytest.approx(expected)
    assert float(extras["log"]["Curriculum/max_lin_vel_x"]) == pytest.approx(expected[1])


# ------------------------------------------------------------------------------- task sections
def test_term_sections_are_checked_by_name_and_type():
    """check_config: unknown terms and parameters with the closest name, a reward's weight, a
    required parameter, values of the wrong type; none for a valid section or a term set to null."""
    errors = terms.check_config(LeggedEnv, "rewards", {
        "tracking_lin_vel": {"weight": 1.0, "sigm": 0.3}, "feet_air_tim": {"weight": 1.0},
        "orientation": {}, "base_height": {"weight": -1.0}, "upright": {"weight": 1.0, "sigma": "wide"},
        "alive": None})
    assert errors == [
        "unknown key task.env.rewards.tracking_lin_vel.sigm; did you mean 'sigma'?",
        "task.env.rewards: unknown reward term 'feet_air_tim' for LeggedEnv; did you mean 'feet_air_time'?",
        "task.env.rewards.orientation.weight must be a finite number, got None",
        "task.env.rewards.base_height.target is required (the reward term 'base_height' has no default)",
        "task.env.rewards.upright.sigma must be a finite number, got 'wide'"]
    assert terms.check_config(LeggedEnv, "commands", {"base_velocity": {"lin_vel_x": [1.0], "resample_s": 0,
                                                                        "heading_command": 1}}) == [
        "task.env.commands.base_velocity.resample_s must be a number > 0 (s), got 0",
        "task.env.commands.base_velocity.lin_vel_x must be a list of 2 numbers, got [1.0]",
        "task.env.commands.base_velocity.heading_command must be true or false, got 1"]
    assert terms.check_config(CartpoleEnv, "terminations", {"pole_fallen": {"limit": 0.2}}) == []
    assert terms.check_config(CartpoleEnv, "terminations", []) == [
        "task.env.terminations must be a mapping {term: {parameter: value}}, got []"]


def test_a_robots_own_parameters_sit_between_the_defaults_and_the_task():
    """TERM_PARAMS: the humanoid's base_height termination is at 0.4 m unless the task says, the
    quadruped's at the function's 0.15 m."""
    assert envs.make("humanoid", num_envs=1, device="cpu").termination_terms["base_height"].params == {
        "min_height": 0.4}
    listed = envs.make("humanoid", num_envs=1, device="cpu", terminations={"base_height": {"min_height": 0.3}})
    assert listed.termination_terms["base_height"].params == {"min_height": 0.3}
    assert quad(1).termination_terms["base_height"].params == {}  # base_height(env, min_height=0.15)


def test_the_former_flat_keys_are_refused_with_what_to_write():
    """An env section of the form before the terms: each flat key refused, with its value in the
    place it goes now; the rewards written out whole with their parameters."""
    former = {"reward_weights": {"tracking_lin_vel": 1.0, "feet_air_time": 1.0}, "tracking_sigma": 0.3,
              "air_time_target": 0.4, "min_base_height": 0.2, "command_resample_s": 5.0, "lin_vel_x": [-2.0, 2.0],
              "heading_command": True}
    with pytest.raises(ValueError) as info:
        quad(1, **former)
    message = str(info.value)
    for expected in (
            "reward_weights is the former form of the task's rewards (task files list terms by section, "
            "envs/terms.py): write rewards: {tracking_lin_vel: {weight: 1.0, sigma: 0.3}, "
            "feet_air_time: {weight: 1.0, threshold: 0.4}}",
            "write rewards.tracking_lin_vel.sigma=0.3;",  # the terms listed take it
            "write rewards.feet_air_time.threshold=0.4;",
            "write terminations.base_height.min_height=0.2",
            "write commands.base_velocity.resample_s=5.0",
            "write commands.base_velocity.lin_vel_x=[-2.0, 2.0]",
            "write commands.base_velocity.heading_command=true"):
        assert expected in message, (expected, message)
    with pytest.raises(ValueError, match=r"max_angle is the former form .* write terminations.pole_fallen.limit=0.3"):
        envs.make("cartpole", num_envs=1, max_angle=0.3)
    # a parameter of a term the former file did not list: leave it out, or list the term with it
    with pytest.raises(ValueError, match=r"deviation_joints is the former form .*: leave it out \(none of the terms "
                                         r"that take it is listed: joint_deviation\), or list one with it: "
                                         r"rewards.joint_deviation: \{weight: w, joints: \[waist_yaw\]\}"):
        envs.make("humanoid", num_envs=1, reward_weights={"upright": 1.0}, deviation_joints=["waist_yaw"])
