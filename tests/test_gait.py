"""The gait clock of the legged tasks (envs/legged.py `_setup_gait`, unitree_rl_gym's G1 and H1
tasks): each foot's phase, the clock the policy and the critic observe, the terms gait_contact,
feet_swing_height, base_height and alive by hand and against MuJoCo's body positions, the feet's
heights over terrain against Terrain.height_at, and the errors of inconsistent settings."""

import math

import mujoco
import numpy as np
import pytest
import torch

import envs
from envs.humanoid import DEFAULT_REWARDS

DT = 0.02
NO_PUSH = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True}}
GAIT_REWARDS = {**DEFAULT_REWARDS, "gait_contact": {"weight": 0.18}, "feet_swing_height": {"weight": -20.0},
                "alive": {"weight": 0.15}, "base_height": {"weight": -10.0, "target": 0.76}}


def gait_env(n=4, name="humanoid", **kwargs):
    kwargs = {"gait_period": 0.8, "rewards": GAIT_REWARDS, **kwargs}
    env = envs.make(name, num_envs=n, device="cpu", seed=0, randomization=NO_PUSH, **kwargs)
    env.reset()
    return env


def test_phases_and_the_observed_clock():
    """Phase = (t / period + offset) mod 1 with t = steps x 0.02 s since the episode began; the
    policy's two last columns and the critic's two after the flat task's privileged terms are
    sin and cos of the first foot's 2 pi phase, free of noise."""
    env = gait_env(3)
    env.episode_length_buf[:] = torch.tensor([0, 10, 47])
    t = np.array([0, 10, 47]) * DT
    first = np.mod(t / 0.8, 1.0)
    expected = np.stack([first, np.mod(first + 0.5, 1.0)], axis=1)
    np.testing.assert_allclose(env.gait_phase().numpy(), expected, atol=1e-6)
    obs = env.observations()
    assert obs["policy"].shape == (3, 83) and obs["critic"].shape == (3, 86)
    clock = np.stack([np.sin(2 * math.pi * first), np.cos(2 * math.pi * first)], axis=1)
    np.testing.assert_allclose(obs["policy"][:, -2:].numpy(), clock, atol=1e-5)
    np.testing.assert_allclose(obs["critic"][:, 81:83].numpy(), clock, atol=1e-5)
    # without a period, the flat task's sizes
    plain = envs.make("humanoid", num_envs=1, device="cpu", seed=0, randomization=NO_PUSH)
    assert plain.observations()["policy"].shape == (1, 81)


def test_gait_contact_counts_the_feet_that_follow_the_clock():
    """unitree's `contact`: a foot scores when it is down in its stance part (phase < 0.55) or up
    in its swing part."""
    env = gait_env(4)
    env.episode_length_buf[:] = 10  # first foot at 0.25 (stance), second at 0.75 (swing)
    contacts = torch.tensor([[True, False], [True, True], [False, True], [False, False]])
    env.feet_contact = lambda: contacts
    gait_contact = env.reward_terms["gait_contact"]
    np.testing.assert_allclose(gait_contact(env).numpy(), np.array([2, 1, 0, 1]) * DT, atol=1e-7)
    env.episode_length_buf[:] = 30  # 0.75 and 0.25: the roles swap
    np.testing.assert_allclose(gait_contact(env).numpy(), np.array([0, 1, 2, 1]) * DT, atol=1e-7)


def test_gait_joint_swing_by_hand_and_its_gradient():
    """The quadruped's gait prior on its knees (trot offsets 0, 0.5, 0.5, 0; stance 0.55; period
    0.5 s): exp(-mean (q - default - amplitude s)^2 / sigma) x dt written out at two clock times,
    one foot pair in swing, the other in stance; and d term / d qpos is the closed form's (the
    term is a function of the differentiable state)."""
    swing = {"gait_joint_swing": {"weight": 1.0, "joints": [".._knee"], "amplitude": -0.5, "sigma": 0.1}}
    env = envs.make("quadruped", num_envs=2, device="cpu", seed=0, randomization=NO_PUSH, gait_period=0.5,
                    rewards=swing, observation_source="state")
    env.reset()
    term = env.reward_terms["gait_joint_swing"]
    knees = [2, 5, 8, 11]  # qpos[7:] columns of FR, FL, RR, RL _knee
    offsets = torch.tensor([0.1, -0.2, 0.3, 0.05])
    qpos = env.sim.qpos.clone()
    qpos[:, 7:][:, knees] = env.default_joint_pos[knees] + offsets
    env.sim.qpos[:] = qpos
    env.episode_length_buf[:] = torch.tensor([19, 3])  # t = 0.38 s and 0.06 s
    expected = []
    for t in (0.38, 0.06):
        error = 0.0
        for foot, offset in enumerate((0.0, 0.5, 0.5, 0.0)):
            phase = (t / 0.5 + offset) % 1.0
            s = math.sin(math.pi * (phase - 0.55) / 0.45) if phase >= 0.55 else 0.0
            error += (float(offsets[foot]) + 0.5 * s) ** 2
        expected.append(math.exp(-error / 4 / 0.1) * DT)
    np.testing.assert_allclose(term(env).numpy(), expected, rtol=1e-5)
    assert expected[0] != expected[1]  # the two clock times differ: one has feet in swing

    env.enable_grad(True)
    state = env.sim.qpos.clone().requires_grad_(True)
    env._grad_state = (state, env.sim.qvel.clone())
    term(env).sum().backward()
    phase = env.gait_phase()
    s = torch.where(phase >= 0.55, torch.sin(math.pi * (phase - 0.55) / 0.45), torch.zeros_like(phase))
    error = offsets - (-0.5) * s
    value = torch.tensor(expected)[:, None]
    closed = value * (-2.0 * error / 4 / 0.1)  # d/dq of exp(-mean e^2 / sigma) dt
    torch.testing.assert_close(state.grad[:, 7:][:, knees].float(), closed, rtol=1e-4, atol=1e-7)
    assert float(state.grad[:, 7:][:, [0, 1, 3]].abs().sum()) == 0.0  # other joints: no gradient


def test_swing_height_and_base_height_against_mujoco():
    """feet_swing_height: (z of the foot body - 0.08)^2 over the feet in the air, z from MuJoCo's
    xpos of the same state; base_height: (pelvis height - target)^2; alive: 1 per second."""
    env = gait_env(2)
    mjm = env.sim.mj_model
    q = np.tile(mjm.key_qpos[0], (2, 1))
    q[0, 2] += 0.1  # lifted 10 cm: both feet in the air
    q[1, mjm.joint("left_knee").qposadr[0]] += 0.6  # the left foot drawn up
    env.sim.qpos[:] = torch.as_tensor(q, dtype=env.sim.qpos.dtype)
    env.sim.qvel[:] = 0.0
    env.sim.forward()
    env._base_cache = env._contact_cache = None
    contact = env.feet_contact()
    assert contact.tolist() == [[False, False], [False, True]]
    d = mujoco.MjData(mjm)
    expected = []
    for w in range(2):
        d.qpos[:] = q[w]
        mujoco.mj_kinematics(mjm, d)
        z = np.array([d.body(f"{side}_ankle_roll_link").xpos[2] for side in ("left", "right")])
        expected.append(float((((z - 0.08) ** 2) * ~contact[w].numpy()).sum()))
    assert expected[1] > 0.0
    terms = env.reward_terms
    np.testing.assert_allclose(terms["feet_swing_height"](env).numpy(), np.array(expected) * DT, rtol=1e-5)
    np.testing.assert_allclose(terms["base_height"](env).numpy(), (q[:, 2] - 0.76) ** 2 * DT, rtol=1e-5)
    np.testing.assert_allclose(terms["alive"](env).numpy(), [DT, DT])


def test_foot_heights_over_terrain_are_above_its_surface():
    """On the terrain grid the feet's heights are measured from the ground under each foot
    (one ray each): z - Terrain.height_at(x, y)."""
    terrain = {"rows": 2, "cols": 2, "types": {"random_rough": 1.0, "pyramid_stairs": 1.0}, "border": 1.0,
               "max_init_level": 1}
    env = envs.make("quadruped_rough", num_envs=4, device="cpu", seed=0, terrain=terrain, gait_period=0.5)
    env.reset()
    for _ in range(3):
        env.step(torch.zeros(4, 12))
    pos = env.sim.view("xpos")[:, env._foot_bodies].double()
    ground = env.terrain.height_at(pos[..., 0].numpy().ravel(), pos[..., 1].numpy().ravel()).reshape(4, 4)
    assert np.abs(ground).max() > 0.01  # not the flat floor
    np.testing.assert_allclose(env.foot_heights().numpy(), pos[..., 2].numpy() - ground, atol=2e-6)
    # the quadruped's default clock is a trot: diagonal feet together
    assert env._gait_offsets.tolist() == [0.0, 0.5, 0.5, 0.0]


def test_inconsistent_gait_settings_are_errors():
    with pytest.raises(ValueError, match="gait_contact needs the gait clock: set task.env.gait_period"):
        envs.make("humanoid", num_envs=1, device="cpu", rewards={"gait_contact": {"weight": 1.0}})
    knees = {"gait_joint_swing": {"weight": 1.0, "joints": [".._knee"]}}
    with pytest.raises(ValueError, match="gait_joint_swing needs the gait clock"):
        envs.make("quadruped", num_envs=1, device="cpu", rewards=knees)
    with pytest.raises(ValueError, match=r"match 6 joints; give one joint per foot \(4 feet\)"):
        envs.make("quadruped", num_envs=1, device="cpu", gait_period=0.5,
                  rewards={"gait_joint_swing": {"weight": 1.0, "joints": [".._knee", "F._hip_flexion"]}})
    with pytest.raises(ValueError, match="rewards.base_height.target is required"):
        envs.make("humanoid", num_envs=1, device="cpu", rewards={"base_height": {"weight": -1.0}})
    with pytest.raises(ValueError, match="gait_offsets has 3 entries, the robot has 2 feet"):
        envs.make("humanoid", num_envs=1, device="cpu", gait_period=0.8, gait_offsets=[0.0, 0.5, 0.2])
    with pytest.raises(ValueError, match=r"gait_offsets must lie in \[0, 1\)"):
        envs.make("humanoid", num_envs=1, device="cpu", gait_period=0.8, gait_offsets=[0.0, 1.5])
    with pytest.raises(ValueError, match="gait_stance must lie in"):
        envs.make("humanoid", num_envs=1, device="cpu", gait_period=0.8, gait_stance=1.0)
    with pytest.raises(ValueError, match="gait_period must be >= 0"):
        envs.make("humanoid", num_envs=1, device="cpu", gait_period=-1.0)


def test_gait_targets_add_the_swing_to_the_servo_targets():
    """gait_targets on the quadruped's knees (amplitude -0.4 rad, trot clock of 0.5 s): with zero
    actions the servos' controls are the default pose plus -0.4 x sin(pi (phase - 0.55) / 0.45)
    on the knee of each foot in swing, written out; the differentiable step's controls are the
    plain step's, and the exported metadata names the joints and the amplitude."""
    kwargs = dict(num_envs=2, device="cpu", seed=0, randomization=NO_PUSH, gait_period=0.5,
                  gait_targets={"joints": [".._knee"], "amplitude": -0.4}, observation_source="state")
    plain, grad = envs.make("quadruped", **kwargs), envs.make("quadruped", **kwargs)
    for env in (plain, grad):
        env.reset()
        env.episode_length_buf[:] = torch.tensor([19, 3])  # t = 0.38 s and 0.06 s
    grad.enable_grad(True)
    knees = [2, 5, 8, 11]  # actuators FR, FL, RR, RL _knee
    expected = plain.default_targets.repeat(2, 1)
    for w, t in enumerate((0.38, 0.06)):
        for foot, offset in enumerate((0.0, 0.5, 0.5, 0.0)):
            phase = (t / 0.5 + offset) % 1.0
            if phase >= 0.55:
                expected[w, knees[foot]] += -0.4 * math.sin(math.pi * (phase - 0.55) / 0.45)
    assert float((expected - plain.default_targets).abs().sum()) > 0.3  # some knees swing
    zeros = torch.zeros(2, 12)
    plain.step(zeros)
    grad.step(zeros.clone().requires_grad_(True))
    torch.testing.assert_close(plain.sim.ctrl.float(), expected, rtol=0, atol=1e-6)
    torch.testing.assert_close(grad.sim.ctrl.float(), expected, rtol=0, atol=1e-6)
    meta = plain.policy_metadata()
    assert meta["gait_target_joints"] == ["FR_knee", "FL_knee", "RR_knee", "RL_knee"]
    assert meta["gait_target_amplitude"] == -0.4 and meta["gait_stance"] == 0.55
    with pytest.raises(ValueError, match="gait_targets needs the gait clock"):
        envs.make("quadruped", num_envs=1, device="cpu", gait_targets={"joints": [".._knee"]})
    with pytest.raises(ValueError, match=r"match 2 actuated joints; give one per foot \(4 feet\)"):
        envs.make("quadruped", num_envs=1, device="cpu", gait_period=0.5, gait_targets={"joints": ["F._knee"]})
