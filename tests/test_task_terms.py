"""Every reward term and termination of every task, computed by hand on constructed states.

The references are closed forms written out here, with MuJoCo as the oracle for what the
closed forms need from the physics: base-frame velocities from `mj_objectVelocity`, the body
frame from `mju_quat2Mat`, and which geoms touch the floor from `mj_forward`'s contact list.
Also by value: the step's weighted sum and the logged episode sums of the terms, observation
scaling, observation noise statistics, command resampling, pushes and per-world friction.
Terms are called as the env calls them: `env.reward_terms[name](env)` (envs/terms.py).
"""

import math

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat, quat_mul
from task_reference import mujoco_reference

import envs
from envs import ASSETS_DIR
from envs.mdp import cartpole
from envs.quadruped import DEFAULT_RANDOMIZATION

DT = 0.02  # the quadruped's policy step: 4 x 0.005 s
NO_PUSH = {"friction": DEFAULT_RANDOMIZATION["friction"]}  # the default randomization without pushes
LEGS = ("FR", "FL", "RR", "RL")
HOME_JOINTS = np.array([0, 0.8, -1.5, 0, 0.8, -1.5, 0, 1.0, -1.5, 0, 1.0, -1.5])  # quadruped.xml, key "home"
KP, KV = 30.0, 1.0  # quadruped.xml: every position actuator
FORCE_LIMIT = np.tile([25.0, 25.0, 35.0], 4)  # abduction, flexion, knee
JOINT_RANGE = np.tile([[-0.8, 0.8], [-1.0, 3.5], [-2.7, -0.9]], (4, 1))  # = ctrlrange


@pytest.fixture(scope="module")
def quad_mjm():
    return mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))


def terminations(min_height):
    """The quadruped's terminations with the base_height term's min_height (m)."""
    return {"base_contact": {}, "base_height": {"min_height": min_height}, "upside_down": {}}


def rewards(weights):
    """A rewards section of the terms in `weights` ({name: weight}), at their default parameters."""
    return {name: {"weight": weight} for name, weight in weights.items()}


def quad_env(num_envs, **kwargs):
    env = envs.make("quadruped", num_envs=num_envs, device="cpu", seed=0, **kwargs)
    env.reset()
    return env


def set_state(env, qpos, qvel):
    """Write a constructed state into every world and recompute what depends on it."""
    env.sim.qpos[:] = torch.as_tensor(np.asarray(qpos), dtype=env.sim.qpos.dtype)
    env.sim.qvel[:] = torch.as_tensor(np.asarray(qvel), dtype=env.sim.qvel.dtype)
    env.sim.forward()  # contacts and actuator forces of this state
    env._base_cache = env._contact_cache = None  # the env caches both per state


def random_quadruped_states(rng, n, z=0.6, tilt=0.6):
    """n states with the trunk in the air, tilted and yawed at random, joints near home,
    random velocities."""
    qpos = np.zeros((n, 19))
    qpos[:, 2] = z
    for i in range(n):
        yaw = axis_angle_quat([0, 0, 1], rng.uniform(-math.pi, math.pi))
        qpos[i, 3:7] = quat_mul(yaw, axis_angle_quat(rng.normal(size=3), rng.uniform(0, tilt)))
    qpos[:, 7:] = HOME_JOINTS + rng.uniform(-0.3, 0.3, (n, 12))
    qvel = rng.normal(0.0, 1.0, (n, 18))
    return qpos, qvel


# ------------------------------------------------------------------------------ quadruped
def test_quadruped_velocity_and_orientation_terms_by_hand(quad_mjm, rng):
    """tracking_lin_vel, tracking_ang_vel, lin_vel_z, ang_vel_xy, orientation: legged_gym's
    closed forms on MuJoCo's trunk-frame velocities and rotation, times the policy dt."""
    n = 16
    qpos, qvel = random_quadruped_states(rng, n)
    env = quad_env(n)
    set_state(env, qpos, qvel)
    commands = rng.uniform([-1, -0.5, -1], [1, 0.5, 1], (n, 3))
    env.commands[:] = torch.as_tensor(commands, dtype=torch.float32)
    sigma = 0.25
    ref = mujoco_reference(quad_mjm, qpos, qvel)
    lin = np.stack([r["lin"] for r in ref])
    ang = np.stack([r["ang"] for r in ref])
    gravity = np.stack([r["R"].T @ [0, 0, -1] for r in ref])
    expected = {
        "tracking_lin_vel": np.exp(-((commands[:, :2] - lin[:, :2]) ** 2).sum(1) / sigma) * DT,
        "tracking_ang_vel": np.exp(-(commands[:, 2] - ang[:, 2]) ** 2 / sigma) * DT,
        "lin_vel_z": lin[:, 2] ** 2 * DT,
        "ang_vel_xy": (ang[:, :2] ** 2).sum(1) * DT,
        "orientation": (gravity[:, :2] ** 2).sum(1) * DT,
    }
    for name, value in expected.items():
        got = env.reward_terms[name](env).numpy()
        np.testing.assert_allclose(got, value, rtol=2e-5, atol=1e-8, err_msg=name)
    # the tracking terms were exercised away from their maximum and the others away from zero
    assert expected["tracking_lin_vel"].min() < 0.5 * DT and expected["orientation"].min() > 1e-4 * DT


def test_quadruped_torque_acceleration_and_action_rate_terms_by_hand(rng):
    """torques: sum of the position actuators' forces squared, kp (target - q) - kv qdot clamped
    to the force limits (targets clamped to ctrlrange); dof_acc: joint accelerations over the
    policy step, squared; action_rate: change of action squared. All times dt."""
    n = 8
    qpos, qvel = random_quadruped_states(rng, n)
    qvel[:, 6:] *= 5.0  # some forces saturate
    env = quad_env(n)
    set_state(env, qpos, qvel)
    ctrl = HOME_JOINTS + rng.uniform(-1.5, 1.5, (n, 12))  # some targets beyond ctrlrange
    env.sim.ctrl[:] = torch.as_tensor(ctrl, dtype=torch.float32)
    env.sim.forward()
    target = np.clip(ctrl, JOINT_RANGE[:, 0], JOINT_RANGE[:, 1])
    force = np.clip(KP * (target - qpos[:, 7:]) - KV * qvel[:, 6:], -FORCE_LIMIT, FORCE_LIMIT)
    assert (np.abs(force) == FORCE_LIMIT).any() and (np.abs(force) < FORCE_LIMIT).any()
    assert (ctrl != target).any()
    np.testing.assert_allclose(env.reward_terms["torques"](env).numpy(), (force ** 2).sum(1) * DT, rtol=1e-5)

    before = qvel + rng.normal(0.0, 0.5, (n, 18))
    env._prestep_qvel = torch.as_tensor(before, dtype=torch.float32)
    acc = (qvel[:, 6:] - before[:, 6:]) / DT  # the base's six dofs do not count
    np.testing.assert_allclose(env.reward_terms["dof_acc"](env).numpy(), (acc ** 2).sum(1) * DT, rtol=1e-4)

    actions, last = rng.normal(size=(n, 12)), rng.normal(size=(n, 12))
    env.actions[:] = torch.as_tensor(actions, dtype=torch.float32)
    env.last_actions[:] = torch.as_tensor(last, dtype=torch.float32)
    np.testing.assert_allclose(env.reward_terms["action_rate"](env).numpy(), ((actions - last) ** 2).sum(1) * DT,
                               rtol=1e-5)


def feet_on_ground_state(lifted=()):
    """Upright, the four legs alike (home's knees, hips between home's front and rear angles) so
    that the feet are level; the legs in `lifted` folded up (knee at its limit, hip swung back)
    so that their feet are in the air. The height is set by `foot_height_to_touch`."""
    qpos = np.zeros(19)
    qpos[3] = 1.0
    qpos[7:] = [0.0, 0.9, -1.5] * 4
    for leg in lifted:
        i = 7 + 3 * LEGS.index(leg)
        qpos[i + 1], qpos[i + 2] = 2.0, -2.7
    return qpos


def foot_height_to_touch(mjm, qpos):
    """Trunk height at which the lowest foot of `qpos` penetrates the floor by 5 mm."""
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:] = qpos
    mujoco.mj_kinematics(mjm, mjd)
    lowest = min(mjd.geom_xpos[mjm.geom(f"{leg}_foot").id, 2] for leg in LEGS)
    return qpos[2] - (lowest - 0.02) - 0.005


def test_quadruped_feet_air_time_and_undesired_contacts_by_hand(quad_mjm):
    """feet_air_time (legged_gym): a foot's time in the air accumulates dt per step; at its
    first contact it pays (air time - 0.5 s), only while the command is faster than 0.1 m/s.
    undesired_contacts: the number of thigh and calf contacts with the floor. Contacts from
    MuJoCo, the sequence of rewards by hand."""
    # world 0 lands on four feet, world 1 on three (FR stays folded), world 2 the same as world 0
    # under a standing command (no reward); world 3 lies on its side: thighs and calves touch
    ground = [feet_on_ground_state(), feet_on_ground_state(lifted=("FR",)), feet_on_ground_state()]
    for q in ground:
        q[2] = foot_height_to_touch(quad_mjm, q)
    side = feet_on_ground_state()
    side[3:7] = axis_angle_quat([1, 0, 0], math.pi / 2)
    side[2] = 0.06
    air = [q.copy() for q in ground]
    for q in air:
        q[2] += 0.3
    states_air = np.stack([*air, side])
    states_ground = np.stack([*ground, side])
    env = quad_env(4)
    env.commands[:] = torch.tensor([[0.5, 0.0, 0.0], [0.0, -0.3, 0.0], [0.05, 0.05, 0.8], [0.5, 0.0, 0.0]])
    env.feet_air_time.zero_()
    env.last_contacts.zero_()
    ref_air = mujoco_reference(quad_mjm, states_air, np.zeros((4, 18)))
    ref_ground = mujoco_reference(quad_mjm, states_ground, np.zeros((4, 18)))
    assert [r["touching"] for r in ref_air[:3]] == [[], [], []]
    assert sorted(ref_ground[0]["touching"]) == sorted(f"{leg}_foot" for leg in LEGS)
    assert sorted(ref_ground[1]["touching"]) == sorted(f"{leg}_foot" for leg in LEGS[1:])

    def feet(ref):
        return np.array([[f"{leg}_foot" in r["touching"] for leg in LEGS] for r in ref])

    air_steps = 30
    air_time, last = np.zeros((4, 4)), np.zeros((4, 4), bool)
    command_fast = np.linalg.norm(env.commands[:, :2].numpy(), axis=1) > 0.1
    for k in range(air_steps + 3):
        states, ref = (states_air, ref_air) if k < air_steps else (states_ground, ref_ground)
        set_state(env, states, np.zeros((4, 18)))
        contact = feet(ref)
        first = contact & ~last & (air_time > 0)
        air_time += DT
        expected = ((air_time - 0.5) * first).sum(1) * command_fast * DT
        air_time *= ~contact
        last = contact
        got = env.reward_terms["feet_air_time"](env).numpy()
        np.testing.assert_allclose(got, expected, atol=1e-7, err_msg=f"step {k}")
        if k == air_steps:  # the landing step: 31 steps in the air, 0.12 s beyond the target
            np.testing.assert_allclose(got, [4 * 0.12 * DT, 3 * 0.12 * DT, 0.0, 0.0], atol=1e-7)

    undesired = [sum(name.endswith(("_thigh", "_calf")) for name in r["touching"]) for r in ref_ground]
    assert undesired[:3] == [0, 0, 0] and undesired[3] >= 2
    np.testing.assert_allclose(env.reward_terms["undesired_contacts"](env).numpy(), np.array(undesired) * DT, rtol=1e-6)


def test_quadruped_terminations_by_hand(quad_mjm):
    """Terminated = trunk or hip touches the floor, or the trunk is below base_height's min_height, or
    its z axis points down (projected gravity z > 0). Contacts from MuJoCo."""
    standing = feet_on_ground_state()
    standing[2] = foot_height_to_touch(quad_mjm, standing)

    def posed(z, axis=(1, 0, 0), degrees=0.0, joints=None):
        q = standing.copy()
        q[2], q[3:7] = z, axis_angle_quat(axis, math.radians(degrees))
        if joints is not None:
            q[7:] = joints
        return q

    cases = [  # (state, terminated with the default min_height 0.15)
        ("standing", standing, False),
        ("tilted 80 deg in the air", posed(1.0, (1, 1, 0), 80), False),
        ("tilted 100 deg in the air", posed(1.0, (1, 1, 0), 100), True),
        ("upside down in the air", posed(1.0, (1, 0, 0), 180), True),
        ("trunk on the floor, legs folded", posed(0.05, joints=[0, 2.0, -2.7] * 4), True),  # box half height 0.055
        ("rolled 75 deg, hips touching", posed(0.14, (1, 0, 0), 75), True),  # the box's edge above the floor
    ]
    qpos = np.stack([q for _, q, _ in cases])
    ref = mujoco_reference(quad_mjm, qpos, np.zeros((len(qpos), 18)))
    assert "trunk" in ref[4]["touching"]
    assert "trunk" not in ref[5]["touching"] and {"FR_hip", "RR_hip"} <= set(ref[5]["touching"])
    trunk_geoms = {"trunk", *(f"{leg}_hip" for leg in LEGS)}
    for min_height in (0.15, 0.5, 0.0):  # 0: only contacts and orientation end an episode
        env = quad_env(len(qpos), terminations=terminations(min_height))
        set_state(env, qpos, np.zeros((len(qpos), 18)))
        expected = [bool(trunk_geoms & set(r["touching"])) or q[2] < min_height or r["R"][2, 2] < 0
                    for q, r in zip(qpos, ref, strict=True)]
        assert env._terminated().tolist() == expected, (min_height, [c[0] for c in cases])
        # each term by itself, as evaluate counts the falls by cause
        causes = dict(env.termination_causes)
        assert list(causes) == ["base_contact", "base_height", "upside_down"]
        assert causes["base_contact"].tolist() == [bool(trunk_geoms & set(r["touching"])) for r in ref]
        assert causes["base_height"].tolist() == [bool(q[2] < min_height) for q in qpos]
        assert causes["upside_down"].tolist() == [bool(r["R"][2, 2] < 0) for r in ref]
        if min_height == 0.15:
            assert expected == [t for _, _, t in cases]
        elif min_height == 0.5:  # standing (0.32 m) is now too low; the states in the air at 1 m are not
            assert expected[0] and not expected[1]
        else:  # the trunk on the floor at 5 cm ends the episode by its contact alone
            assert expected == [t for _, _, t in cases]


def test_quadruped_step_reward_is_the_weighted_sum_and_logs_episode_sums(quad_mjm):
    """The step's reward is sum(weight x term) on the state the physics reached, and at the end
    of an episode extras["log"]["Episode_Reward/<term>"] is the mean over the finished worlds of
    each weighted term summed over their episodes (here the velocity terms, by hand)."""
    weights = {"tracking_lin_vel": 1.5, "tracking_ang_vel": 0.5, "lin_vel_z": -2.0, "orientation": -1.0}
    n, steps = 4, 3
    env = quad_env(n, rewards=rewards(weights), episode_length_s=steps * DT, obs_noise=0.0)
    sums = {k: np.zeros(n) for k in weights}
    # the same env with long episodes reaches the same states, and keeps the last one (where
    # the env resets its worlds)
    probe = quad_env(n, rewards=rewards(weights), episode_length_s=100.0, obs_noise=0.0)
    actions = torch.full((n, 12), 0.3)
    for _ in range(steps):
        commands = env.commands.numpy().astype(np.float64)
        _, reward, terminated, time_outs, extras = env.step(actions)
        probe.step(actions)
        reached = (probe.sim.qpos.numpy().astype(np.float64), probe.sim.qvel.numpy().astype(np.float64))
        ref = mujoco_reference(quad_mjm, *reached)
        lin = np.stack([r["lin"] for r in ref])
        ang = np.stack([r["ang"] for r in ref])
        grav = np.stack([r["R"].T @ [0, 0, -1] for r in ref])
        terms = {"tracking_lin_vel": np.exp(-((commands[:, :2] - lin[:, :2]) ** 2).sum(1) / 0.25) * DT,
                 "tracking_ang_vel": np.exp(-(commands[:, 2] - ang[:, 2]) ** 2 / 0.25) * DT,
                 "lin_vel_z": lin[:, 2] ** 2 * DT, "orientation": (grav[:, :2] ** 2).sum(1) * DT}
        np.testing.assert_allclose(reward.numpy(), sum(weights[k] * terms[k] for k in weights), rtol=1e-4, atol=1e-7)
        for k in weights:
            sums[k] += weights[k] * terms[k]
    assert time_outs.all() and not terminated.any()
    for k in weights:
        np.testing.assert_allclose(float(extras["log"][f"Episode_Reward/{k}"]), sums[k].mean(), rtol=1e-4, atol=1e-8,
                                   err_msg=k)


def test_quadruped_observations_are_scaled_as_documented(quad_mjm, rng):
    """critic = [2 v_base, 0.25 w_base, projected gravity, (2, 2, 0.25) x command, q - home,
    0.05 qdot, last action, friction, feet in contact]; policy = the first 48 plus noise."""
    n = 6
    qpos, qvel = random_quadruped_states(rng, n)
    qpos[-1] = feet_on_ground_state(lifted=("RL",))
    qpos[-1, 2] = foot_height_to_touch(quad_mjm, qpos[-1])
    qvel[-1] = 0.0
    env = quad_env(n)
    set_state(env, qpos, qvel)
    commands = rng.uniform(-1, 1, (n, 3))
    actions = rng.normal(size=(n, 12))
    env.commands[:] = torch.as_tensor(commands, dtype=torch.float32)
    env.last_actions[:] = torch.as_tensor(actions, dtype=torch.float32)
    obs = env.observations()
    ref = mujoco_reference(quad_mjm, qpos, qvel)
    feet = [[f"{leg}_foot" in r["touching"] for leg in LEGS] for r in ref]
    assert feet[-1] == [True, True, True, False] and not any(map(any, feet[:-1]))
    expected = np.concatenate([
        np.stack([r["lin"] for r in ref]) * 2.0, np.stack([r["ang"] for r in ref]) * 0.25,
        np.stack([r["R"].T @ [0, 0, -1] for r in ref]), commands * [2.0, 2.0, 0.25], qpos[:, 7:] - HOME_JOINTS,
        qvel[:, 6:] * 0.05, actions, env.env_friction.numpy()[:, None], feet], axis=1)
    np.testing.assert_allclose(obs["critic"].numpy(), expected, rtol=1e-5, atol=1e-6)
    assert obs["policy"].shape == (n, 48)


NOISE_SCALE = np.concatenate([np.full(3, 0.2), np.full(3, 0.05), np.full(3, 0.05), np.zeros(3), np.full(12, 0.01),
                              np.full(12, 0.075), np.zeros(12)])  # legged_gym's, x obs_noise


@pytest.mark.parametrize("obs_noise", [1.0, 0.5])
def test_quadruped_observation_noise_is_uniform_with_the_documented_scales(obs_noise):
    """policy - critic[:48] is uniform on [-s, s] per entry, s = NOISE_SCALE x obs_noise: bounded
    by s, mean 0 and standard deviation s / sqrt(3) per entry (2048 draws each: 5 standard
    errors are 6% of the deviation), fresh at every call; exactly 0 where s = 0."""
    env = quad_env(256, obs_noise=obs_noise)
    draws = 8
    noise = np.concatenate([(o["policy"] - o["critic"][:, :48]).numpy().astype(np.float64)
                            for o in (env.observations() for _ in range(draws))])
    scale = NOISE_SCALE * obs_noise
    noisy = scale > 0
    assert np.all(noise[:, ~noisy] == 0.0)
    assert np.all(np.abs(noise) <= scale * (1 + 1e-5) + 1e-6)
    n = noise.shape[0]
    std = noise[:, noisy].std(0) / (scale[noisy] / math.sqrt(3))
    assert np.all(np.abs(std - 1) < 0.06), std
    assert np.all(np.abs(noise[:, noisy].mean(0)) < 5 * scale[noisy] / math.sqrt(3 * n))
    assert np.all(np.abs(noise[:, noisy]).max(0) > 0.99 * scale[noisy])  # the whole interval is reached


def test_quadruped_commands_are_resampled_on_schedule_and_uniform():
    """Commands are drawn at reset and every resample_s (the base_velocity command) on each world's own clock,
    uniformly within (lin_vel_x, lin_vel_y, ang_vel_yaw); in between they do not change."""
    ranges = np.array([[-0.7, 1.2], [-0.4, 0.1], [0.3, 0.9]])
    n, every = 512, 5
    velocity = {"resample_s": every * DT, "lin_vel_x": tuple(ranges[0]), "lin_vel_y": tuple(ranges[1]),
                "ang_vel_yaw": tuple(ranges[2])}
    env = quad_env(n, commands={"base_velocity": velocity}, episode_length_s=100.0, randomization=NO_PUSH,
                   terminations=terminations(0.0))
    draws = [env.commands.numpy().copy()]
    env._terminated = lambda: torch.zeros(n, dtype=torch.bool)  # keep every world on its clock
    restarted = 3  # world 0 restarts after 3 steps: its schedule moves by 3
    changed = []
    for t in range(1, 2 * every + 1):
        before = env.commands.clone()
        env.step(torch.zeros(n, 12))
        if t == restarted:
            env._reset(torch.tensor([0]))
        diff = (env.commands != before).all(dim=1)
        changed.append((t, bool(diff[1:].all()), bool(diff[1:].any()), bool(diff[0])))
        if diff[1:].all():
            draws.append(env.commands.numpy().copy())
    for t, all_changed, any_changed, world0 in changed:
        due = t % every == 0
        assert all_changed == due and any_changed == due, (t, all_changed, any_changed)
        assert world0 == (t == restarted or (t - restarted) % every == 0 and t > restarted), t
    values = np.concatenate(draws)  # 3 x 512 draws of each component
    lo, hi = ranges[:, 0], ranges[:, 1]
    assert np.all(values >= lo) and np.all(values <= hi)
    span = hi - lo
    assert np.all(np.abs(values.mean(0) - (lo + hi) / 2) < 5 * span / math.sqrt(12 * len(values)))
    assert np.all(np.abs(values.std(0) / (span / math.sqrt(12)) - 1) < 0.05)


def test_quadruped_pushes_kick_the_base_velocity_on_schedule():
    """Every interval_s of a world's episode (the push randomization term), its base velocity
    (x, y) gets a kick drawn uniformly from the term's range; nothing else changes. The reference is the
    same env with push_velocity = 0 (it makes the same random draws)."""
    n, every, push = 256, 4, 0.7
    kw = dict(episode_length_s=100.0, terminations=terminations(0.0))

    def pushes(velocity):
        term = {"mode": "interval", "interval_s": every * DT, "range": [-velocity, velocity]}
        return {**DEFAULT_RANDOMIZATION, "push": term}

    pushed, still = quad_env(n, randomization=pushes(push), **kw), quad_env(n, randomization=pushes(0.0), **kw)
    for t in range(1, every + 1):
        pushed.step(torch.zeros(n, 12))
        still.step(torch.zeros(n, 12))
        diff = (pushed.sim.qvel - still.sim.qvel).numpy().astype(np.float64)
        assert torch.equal(pushed.sim.qpos, still.sim.qpos)
        if t < every:
            assert np.all(diff == 0.0), t
    kick = diff[:, :2]
    assert np.all(diff[:, 2:] == 0.0)
    assert np.all(np.abs(kick) <= push * (1 + 1e-6)) and np.all(kick != 0.0)
    assert np.all(np.abs(kick.mean(0)) < 5 * push / math.sqrt(3 * n))
    assert np.all(np.abs(kick.std(0) / (push / math.sqrt(3)) - 1) < 0.1)


def test_quadruped_friction_is_drawn_per_world_into_the_contacts():
    """Each reset draws one friction coefficient per world, uniform in the friction term's range
    (shared: one for all pairs): it becomes
    the two tangential entries of every contact pair's friction (the torsional and rolling ones
    keep the model's) and the critic's friction observation."""
    n = 512
    env = quad_env(n, randomization={"friction": {**DEFAULT_RANDOMIZATION["friction"], "range": [0.3, 1.7]}})
    mu = env.env_friction.numpy().astype(np.float64)
    friction = env.friction.numpy()
    assert np.all((mu >= 0.3) & (mu <= 1.7))
    assert abs(mu.mean() - 1.0) < 5 * 1.4 / math.sqrt(12 * n) and abs(mu.std() / (1.4 / math.sqrt(12)) - 1) < 0.1
    np.testing.assert_allclose(friction[:, :, 0], np.repeat(mu[:, None], friction.shape[1], 1), rtol=1e-6)
    np.testing.assert_array_equal(friction[:, :, 0], friction[:, :, 1])
    np.testing.assert_allclose(friction[:, :, 2:], np.broadcast_to([0.005, 0.0001, 0.0001], friction[:, :, 2:].shape),
                               rtol=1e-6)
    np.testing.assert_array_equal(env.observations()["critic"][:, 48].numpy(), mu.astype(np.float32))


# ------------------------------------------------------------------------------------ ant
def test_ant_terms_and_terminations_by_hand():
    """forward = (x after - x before) / dt, healthy = 1 while 0.2 <= z <= 1.0 and the state is
    finite, ctrl_cost = sum(action^2) of the action as given (Ant-v5 does not clip it);
    terminated = not healthy."""
    heights = [0.19, 0.2, 0.55, 1.0, 1.01, 0.55]
    n = len(heights)
    env = envs.make("ant", num_envs=n, device="cpu", seed=0, dtype="float64")
    env.reset()
    env._pre_physics()
    x_before = env.sim.qpos[:, 0].numpy().copy()
    dx = np.linspace(-0.04, 0.06, n)
    env.sim.qpos[:, 0] += torch.as_tensor(dx)
    env.sim.qpos[:, 2] = torch.tensor(heights, dtype=torch.float64)
    env.sim.qvel[-1, 3] = float("nan")
    actions = np.linspace(-1.6, 1.6, n * 8).reshape(n, 8)
    env.actions = torch.as_tensor(actions, dtype=torch.float32)
    np.testing.assert_allclose(env.reward_terms["forward"](env).numpy(), (x_before + dx - x_before) / 0.05,
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(env.reward_terms["ctrl_cost"](env).numpy(), (actions ** 2).sum(1), rtol=1e-6)
    healthy = [0.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert env.reward_terms["healthy"](env).tolist() == healthy
    assert env._terminated().tolist() == [h == 0.0 for h in healthy]


def test_ant_terminates_with_gymnasium_when_it_jumps_out_of_the_healthy_range():
    """From a state that throws the torso upwards, simrl's ant and gymnasium's Ant-v5 end the
    episode (torso above 1.0 m) at the same step, with the same rewards until then."""
    import gymnasium

    gym_env = gymnasium.make("Ant-v5", include_cfrc_ext_in_observation=False, contact_cost_weight=0.0)
    gym_env.reset(seed=0)
    data = gym_env.unwrapped.data
    data.qpos[2], data.qvel[2] = 0.8, 3.0
    env = envs.make("ant", num_envs=1, device="cpu", seed=0, dtype="float64")
    env.reset()
    env.sim.qpos[0] = torch.as_tensor(data.qpos)
    env.sim.qvel[0] = torch.as_tensor(data.qvel)
    dt = gym_env.unwrapped.dt
    for t in range(20):
        x_before = float(data.qpos[0])
        _, reward_ref, terminated_ref, _, info = gym_env.step(np.zeros(8))
        reward_ref += (float(data.qpos[0]) - x_before) / dt - info["x_velocity"]  # x of qpos (see test_envs)
        z = float(data.qpos[2])
        _, reward, terminated, _, _ = env.step(torch.zeros(1, 8))
        assert bool(terminated[0]) == terminated_ref, (t, z)
        assert abs(float(reward[0]) - reward_ref) < 1e-4, (t, float(reward[0]), reward_ref)
        if terminated_ref:
            break
    assert terminated_ref and z > 1.0 and t > 0, (t, z)


# ------------------------------------------------------------------------------- cartpole
def test_cartpole_terms_and_terminations_by_hand():
    """alive = 1, upright = (1 + cos angle) / 2, centered = exp(-x^2), effort = action^2;
    balance fails beyond |x| > 2.5 m (cart_out_of_bounds) or |angle| > 0.4 rad (pole_fallen), the swing-up
    never."""
    qpos = np.array([[0.0, 0.0], [2.49, 0.39], [2.51, 0.0], [-2.51, 0.0], [0.3, 0.41], [-1.0, -0.41],
                     [0.5, math.pi], [-2.9, 3.0]])
    n = len(qpos)
    actions = np.linspace(-1.5, 1.5, n)[:, None]
    for swingup in (False, True):
        env = envs.make("cartpole_swingup" if swingup else "cartpole", num_envs=n, device="cpu", seed=0)
        env.reset()
        env.sim.qpos[:] = torch.as_tensor(qpos, dtype=torch.float32)
        env.actions = torch.as_tensor(actions, dtype=torch.float32)
        np.testing.assert_array_equal(cartpole.alive(env).numpy(), np.ones(n))
        np.testing.assert_allclose(cartpole.upright(env).numpy(), (1 + np.cos(qpos[:, 1])) / 2, rtol=1e-6,
                                   atol=1e-7)
        np.testing.assert_allclose(cartpole.centered(env).numpy(), np.exp(-qpos[:, 0] ** 2), rtol=1e-6)
        np.testing.assert_allclose(cartpole.effort(env).numpy(), actions[:, 0] ** 2, rtol=1e-6)
        expected = np.zeros(n, bool) if swingup else (np.abs(qpos[:, 0]) > 2.5) | (np.abs(qpos[:, 1]) > 0.4)
        assert env._terminated().tolist() == expected.tolist()
    assert expected.tolist() == [False] * n
    fails = (np.abs(qpos[:, 0]) > 2.5) | (np.abs(qpos[:, 1]) > 0.4)
    assert fails.tolist() == [False, False, True, True, True, True, True, True]


def test_cartpole_swingup_step_reward_and_episode_logs_by_hand():
    """The swing-up's reward, upright + 0.1 centered - 0.01 effort on the state each step reached,
    and the logged episode sums of each weighted term when the episodes time out."""
    n, steps = 4, 6
    env = envs.make("cartpole_swingup", num_envs=n, device="cpu", seed=3, episode_length_s=steps * 0.02)
    env.reset()
    actions = torch.tensor([[0.5], [-1.0], [2.0], [0.0]])
    weights = {"upright": 1.0, "centered": 0.1, "effort": -0.01}
    sums = {k: np.zeros(n) for k in weights}
    # the same env with long episodes reaches the same states, and keeps the last one
    probe = envs.make("cartpole_swingup", num_envs=n, device="cpu", seed=3, episode_length_s=10.0)
    probe.reset()
    for _ in range(steps):
        _, reward, terminated, time_outs, extras = env.step(actions)
        probe.step(actions)
        q = probe.sim.qpos.numpy().astype(np.float64)
        terms = {"upright": (1 + np.cos(q[:, 1])) / 2, "centered": np.exp(-q[:, 0] ** 2),
                 "effort": actions[:, 0].numpy() ** 2}
        np.testing.assert_allclose(reward.numpy(), sum(w * terms[k] for k, w in weights.items()), rtol=1e-5)
        for k, w in weights.items():
            sums[k] += w * terms[k]
    assert time_outs.all() and not terminated.any()
    for k in weights:
        np.testing.assert_allclose(float(extras["log"][f"Episode_Reward/{k}"]), sums[k].mean(), rtol=1e-5, err_msg=k)


def test_only_positive_rewards_clips_before_the_termination_term():
    """legged_gym's only_positive_rewards: the step reward is max(sum of the other terms, 0) plus
    the termination term, while the episode sums keep every term unclipped. Two envs of the same
    seed reach the same states; the plain one's reward, clipped, is the other's."""
    weights = {"tracking_lin_vel": 1.0, "lin_vel_z": -50.0, "termination": -200.0}
    n = 8
    plain = quad_env(n, rewards=rewards(weights), obs_noise=0.0)
    clipped = quad_env(n, rewards=rewards(weights), obs_noise=0.0, only_positive_rewards=True)
    failed = torch.tensor([True, False] * (n // 2))
    for env in (plain, clipped):  # a termination term of known value in half the worlds
        env.reward_terms["termination"].func = lambda env: failed.float()
    rng = np.random.default_rng(5)
    seen_negative = seen_positive = False
    for _ in range(6):
        actions = torch.as_tensor(rng.uniform(-1, 1, (n, 12)), dtype=torch.float32)
        _, r_plain, _, _, _ = plain.step(actions)
        _, r_clip, _, _, _ = clipped.step(actions)
        others = r_plain + 200.0 * failed.float()  # the plain reward without the termination term
        seen_negative |= bool((others < 0).any())
        seen_positive |= bool((others > 0).any())
        np.testing.assert_allclose(r_clip.numpy(), (others.clamp(min=0) - 200.0 * failed.float()).numpy(), atol=1e-6)
    assert seen_negative and seen_positive  # both sides of the clip were exercised
    for k in weights:
        assert torch.equal(plain.episode_sums[k], clipped.episode_sums[k]), k
