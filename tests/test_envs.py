"""The batched environments: shapes, reward-term logging, terminations vs time-outs,
per-world resets, seeding, action checks, per-world parameters."""

import pytest
import torch

import envs
from envs.base import per_world_param


def test_make_names_unknown_environments():
    with pytest.raises(ValueError, match="unknown environment 'nope'.*cartpole"):
        envs.make("nope")


def test_quadruped_observation_groups():
    env = envs.make("quadruped", num_envs=4, device="cpu", seed=0)
    obs = env.reset()
    assert obs["policy"].shape == (4, 48)
    assert obs["critic"].shape == (4, 53)
    assert env.step_dt == pytest.approx(0.02)
    assert env.max_episode_length == 1000


def test_reward_term_names_are_checked():
    with pytest.raises(ValueError, match="unknown reward term 'flying'"):
        envs.make("cartpole", num_envs=2, rewards={"flying": {"weight": 1.0}})


def test_actions_are_checked():
    env = envs.make("cartpole", num_envs=3, device="cpu")
    env.reset()
    with pytest.raises(ValueError, match=r"shape \(3, 1\)"):
        env.step(torch.zeros(3, 2))
    with pytest.raises(TypeError, match="floating point"):
        env.step(torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(ValueError, match="NaN"):
        env.step(torch.full((3, 1), float("nan")))


def test_seeding_is_deterministic():
    runs = []
    for _ in range(2):
        env = envs.make("quadruped", num_envs=3, device="cpu", seed=7)
        env.reset()
        for _ in range(5):
            obs, reward, *_ = env.step(torch.ones(3, 12) * 0.1)
        runs.append((obs["policy"], reward))
    assert torch.equal(runs[0][0], runs[1][0]) and torch.equal(runs[0][1], runs[1][1])


def test_failed_worlds_reset_alone_and_log_their_terms():
    env = envs.make("cartpole", num_envs=4, device="cpu", seed=0, episode_length_s=10.0)
    env.reset()
    push = torch.zeros(4, 1)
    push[0] = 1.0  # world 0 drives the cart away until the pole falls
    for _ in range(200):
        _, _, terminated, time_outs, extras = env.step(push)
        if terminated[0]:
            break
    assert terminated[0] and not time_outs[0]
    assert "Episode_Reward/alive" in extras["log"]
    assert env.episode_length_buf[0] == 0  # reset
    assert (env.episode_length_buf[1:] > 0).all()  # the others keep running


def test_time_outs_are_not_terminations():
    env = envs.make("cartpole", num_envs=2, device="cpu", seed=0, episode_length_s=0.1,
                    terminations={"cart_out_of_bounds": {}, "pole_fallen": {"limit": 3.0}})
    env.reset()
    for _ in range(env.max_episode_length):
        _, _, terminated, time_outs, _ = env.step(torch.zeros(2, 1))
    assert time_outs.all() and not terminated.any()


def test_per_world_friction_reaches_the_contacts():
    env = envs.make("quadruped", num_envs=2, device="cpu", seed=0)
    env.reset()
    friction = per_world_param(env.sim, "cpair_friction")
    assert friction.shape[0] == 2
    assert not torch.equal(friction[0, :, 0], friction[1, :, 0])  # randomised per world


def test_ant_matches_gymnasium_ant_v5():
    """The ant task against gymnasium's own Ant-v5 (MuJoCo underneath; contact cost off and no
    cfrc_ext in the observation, as simrl's task): from the same state, with the same actions,
    observations, rewards and terminations agree step by step (engine in float64)."""
    import gymnasium
    import numpy as np

    gym_env = gymnasium.make("Ant-v5", include_cfrc_ext_in_observation=False, contact_cost_weight=0.0)
    gym_env.reset(seed=0)
    data = gym_env.unwrapped.data
    env = envs.make("ant", num_envs=1, device="cpu", seed=0, dtype="float64")
    env.reset()
    env.sim.qpos[0] = torch.as_tensor(data.qpos)
    env.sim.qvel[0] = torch.as_tensor(data.qvel)
    rng = np.random.default_rng(0)
    forward = []
    dt = gym_env.unwrapped.dt
    for t in range(40):
        action = rng.uniform(-1.0, 1.0, 8).astype(np.float32)
        x_before = float(data.qpos[0])
        obs_ref, reward_ref, terminated_ref, _, info = gym_env.step(action.astype(np.float64))
        # Ant-v5 takes x from data.xpos, which mj_step leaves at the start of its last substep
        # (kinematics run before integration); simrl differences the state itself: x of qpos
        velocity = (float(data.qpos[0]) - x_before) / dt
        reward_ref = reward_ref - info["x_velocity"] + velocity
        obs, reward, terminated, _, _ = env.step(torch.as_tensor(action)[None])
        np.testing.assert_allclose(obs["policy"][0].numpy(), obs_ref, atol=1e-4, err_msg=f"step {t}")
        assert abs(float(reward[0]) - reward_ref) < 1e-4, (t, float(reward[0]), reward_ref)
        assert bool(terminated[0]) == terminated_ref
        forward.append(velocity)
    assert max(abs(v) for v in forward) > 0.05  # the forward term was exercised
