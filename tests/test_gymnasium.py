"""envs.gymnasium: BatchedEnv as a gymnasium 1.x VectorEnv, made through gymnasium.make_vec;
same-step autoreset against the wrapped env, spaces, numpy mode, and the checks of
gymnasium.utils.env_checker in their vector form."""

import math

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import data_equivalence
from gymnasium.utils.passive_env_checker import data_shares_objects
from gymnasium.vector import AutoresetMode, VectorEnv

import envs
import envs.gymnasium  # noqa: F401  (registers the simrl/... ids)

CARTPOLE_ACTIONS = torch.tensor([[1.0], [-1.0], [0.0], [0.2]])  # two worlds fall, two time out


def make_vec(env_id, num_envs, **kwargs):
    return gymnasium.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", device="cpu",
                              **kwargs)


def test_every_environment_is_registered():
    for name in envs.names():
        spec = gymnasium.spec(envs.gymnasium.gym_id(name))
        assert spec.vector_entry_point == "envs.gymnasium:make_vec_env" and spec.kwargs == {"task": name}
    assert envs.gymnasium.gym_id("cartpole_swingup") == "simrl/CartpoleSwingup-v0"
    # the module:id form imports the module first, as gymnasium documents
    vec = gymnasium.make_vec("envs.gymnasium:simrl/Cartpole-v0", num_envs=2, device="cpu")
    assert vec.spec.id == "simrl/Cartpole-v0" and vec.num_envs == 2


def test_spaces_and_torch_outputs():
    vec = make_vec("simrl/Cartpole-v0", 4, seed=0)
    assert isinstance(vec, VectorEnv) and vec.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    assert vec.single_observation_space == gymnasium.spaces.Box(-np.inf, np.inf, (5,), np.float32)
    assert vec.single_action_space == gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert vec.observation_space.shape == (4, 5) and vec.action_space.shape == (4, 1)
    obs, infos = vec.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.dtype == torch.float32 and obs.device == vec.env.device
    assert obs.numpy() in vec.observation_space and infos == {}
    obs, rewards, terminations, truncations, infos = vec.step(torch.zeros(4, 1))
    assert all(isinstance(x, torch.Tensor) for x in (obs, rewards, terminations, truncations))
    assert rewards.dtype == torch.float32 and terminations.dtype == torch.bool and truncations.dtype == torch.bool
    assert rewards.shape == terminations.shape == (4,) and "log" in infos
    assert obs.numpy() in vec.observation_space
    with pytest.raises(TypeError, match="one integer"):
        vec.reset(seed=[1, 2, 3, 4])
    with pytest.raises(ValueError, match="options"):
        vec.reset(options={"reset_mask": np.ones(4, bool)})


def angle(obs):
    return torch.atan2(obs[:, 2], obs[:, 1])


def test_same_step_autoreset_matches_the_wrapped_env():
    vec = make_vec("simrl/Cartpole-v0", 4, seed=3, episode_length_s=0.3)
    reference = envs.make("cartpole", num_envs=4, device="cpu", seed=3, episode_length_s=0.3)
    assert vec.env.max_episode_length == 15
    obs, _ = vec.reset(seed=3)
    assert torch.equal(obs, reference.reset()["policy"])
    ended = torch.zeros(4, dtype=torch.long)
    for step in range(1, 41):
        obs, rewards, terminations, truncations, infos = vec.step(CARTPOLE_ACTIONS)
        ref_obs, ref_reward, ref_terminated, ref_time_outs, ref_extras = reference.step(CARTPOLE_ACTIONS)
        assert torch.equal(obs, ref_obs["policy"]) and torch.equal(rewards, ref_reward)
        assert torch.equal(terminations, ref_terminated) and torch.equal(truncations, ref_time_outs)
        done = terminations | truncations
        assert ("final_obs" in infos) == bool(done.any()) and "final_obs" not in ref_extras
        if not done.any():
            continue
        ended += done.long()
        final = infos["final_obs"]
        assert torch.equal(infos["_final_obs"], done)
        assert torch.equal(final[~done], obs[~done])  # the others' rows: their current observation
        # a world that failed ended beyond the limits; on the same step it starts again near upright
        failed = terminations
        assert ((angle(final[failed]).abs() > 0.4) | (final[failed, 0].abs() > 2.5)).all()
        assert (angle(obs[done]).abs() <= 0.05).all() and (obs[done, 0].abs() <= 0.05).all()
        assert torch.equal(reference.episode_length_buf[done], torch.zeros(int(done.sum()), dtype=torch.long))
        if truncations.any():
            assert step % 15 == 0  # time-outs come exactly every max_episode_length steps
    # worlds pushed hard fall before the time-out; the gently pushed ones time out twice in 40 steps
    assert ended[0] >= 2 and ended[1] >= 2 and ended[2] == 2 and ended[3] == 2


def test_final_observations_replay_the_random_draws():
    """The quadruped's observations carry noise from the env's generator: computing the final
    observations must not shift it (the wrapped env runs bit for bit as the bare one)."""
    vec = make_vec("simrl/Quadruped-v0", 2, seed=5, episode_length_s=0.1)
    reference = envs.make("quadruped", num_envs=2, device="cpu", seed=5, episode_length_s=0.1)
    obs, _ = vec.reset()
    assert torch.equal(obs, reference.reset()["policy"])
    endings = 0
    actions = torch.zeros(2, 12)
    for _ in range(12):
        obs, rewards, _, truncations, infos = vec.step(actions)
        ref_obs, ref_reward, *_ = reference.step(actions)
        assert torch.equal(obs, ref_obs["policy"]) and torch.equal(rewards, ref_reward)
        endings += "final_obs" in infos
    assert endings == 2  # time-outs after 5 and 10 steps


def test_quadruped_action_bounds_are_where_controls_saturate():
    vec = make_vec("simrl/Quadruped-v0", 2, seed=0)
    env = vec.env
    low, high = vec.single_action_space.low, vec.single_action_space.high
    ctrlrange = env.sim.mj_model.actuator_ctrlrange
    vec.reset(seed=0)
    for bound, beyond, ctrl in ((high, high + 1.0, ctrlrange[:, 1]), (low, low - 1.0, ctrlrange[:, 0])):
        env._apply_actions(torch.as_tensor(np.stack([bound, beyond])))
        np.testing.assert_allclose(env.sim.ctrl.numpy(), np.stack([ctrl, ctrl]), atol=1e-5)
        env._apply_actions(torch.as_tensor(np.stack([bound * 0.5, bound * 0.5])))  # inside: not saturated
        assert (np.abs(env.sim.ctrl.numpy()[0] - ctrl) > 1e-3).all()


def test_numpy_mode_passes_the_env_checks_in_vector_form():
    """gymnasium.utils.env_checker.check_env takes single environments only; these are its
    checks for a vector env: seeded reset and step determinism, observations in the space,
    fresh data on every call, sampled actions accepted; plus a gymnasium vector wrapper that
    relies on the declared autoreset mode."""
    vec = make_vec("simrl/Cartpole-v0", 4, seed=0, to_numpy=True, episode_length_s=0.3)
    obs_1, _ = vec.reset(seed=123)
    obs_2, _ = vec.reset(seed=123)
    assert isinstance(obs_1, np.ndarray) and obs_1.dtype == np.float32 and obs_1 in vec.observation_space
    assert data_equivalence(obs_1, obs_2, exact=True) and not data_shares_objects(obs_1, obs_2)
    assert not data_equivalence(obs_1, vec.reset(seed=124)[0], exact=True)

    vec.action_space.seed(123)
    actions = vec.action_space.sample()
    assert actions in vec.action_space
    vec.reset(seed=123)
    first = vec.step(actions)
    vec.reset(seed=123)
    second = vec.step(actions.astype(np.float64))  # any numpy dtype is taken, as float32
    assert data_equivalence(first, second, exact=True)
    obs, rewards, terminations, truncations, infos = first
    assert obs in vec.observation_space and rewards.dtype == np.float32 and rewards.shape == (4,)
    assert terminations.dtype == np.bool_ and truncations.dtype == np.bool_
    assert not data_shares_objects(first, second)

    stats = gymnasium.wrappers.vector.RecordEpisodeStatistics(vec)
    stats.reset(seed=1)
    episodes = 0
    for _ in range(20):
        _, rewards, terminations, truncations, infos = stats.step(CARTPOLE_ACTIONS.numpy())
        done = terminations | truncations
        assert isinstance(infos["final_obs"], np.ndarray) if done.any() else "final_obs" not in infos
        if done.any():
            assert infos["final_obs"].shape == (4, 5) and np.array_equal(infos["_final_obs"], done)
            assert isinstance(infos["log"]["Episode_Reward/alive"], float)
            # cartpole pays 1 per step: each finished episode's return is its length
            np.testing.assert_array_equal(infos["episode"]["r"][done], infos["episode"]["l"][done])
            assert (infos["episode"]["l"][truncations] == 15).all()  # the whole episode, reset step included
            assert math.isclose(infos["log"]["Episode_Reward/alive"], float(infos["episode"]["r"][done].mean()),
                                rel_tol=1e-6)
            episodes += int(done.sum())
    assert episodes >= 4
