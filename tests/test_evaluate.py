"""simrl.rl.evaluate against episodes run by hand: one episode per world, nothing counted after
a world's episode ended (its world was reset and keeps earning), metrics averaged per episode.

The reference is the same environment (same seed, so the same initial states) stepped here
with the same policy, each world's episode cut at its first termination or time-out."""

import mujoco
import numpy as np
import torch
from task_reference import mujoco_reference

import envs
from envs import ASSETS_DIR
from simrl.rl.evaluate import evaluate


def episodes_by_hand(env, policy, steps):
    """Per world: return and length of its first episode, whether it ended by termination, and
    the states each of its actions was taken in (qpos, qvel, commands where the env has them)."""
    obs = env.reset()
    n = env.num_envs
    returns, lengths = np.zeros(n), np.zeros(n, int)
    ended, fell = np.zeros(n, bool), np.zeros(n, bool)
    states = []
    for _ in range(steps):
        states.append((env.sim.qpos.numpy().astype(np.float64).copy(), env.sim.qvel.numpy().astype(np.float64).copy(),
                       env.commands.numpy().astype(np.float64).copy() if hasattr(env, "commands") else None))
        obs, reward, terminated, time_outs, _ = env.step(policy(obs))
        running = ~ended
        returns[running] += reward.numpy()[running]
        lengths[running] += 1
        fell |= running & terminated.numpy()
        ended |= (terminated | time_outs).numpy()
    assert ended.all()
    return returns, lengths, fell, states


def test_zero_policy_on_the_cartpole_returns_its_episode_lengths():
    """The balance task pays 1 per step, also after an auto-reset: with the mask, a zero
    policy's return is its episode length (the pole falls at different times in different
    worlds); without it every world would score the maximum, 250."""
    n = 16
    kwargs = dict(num_envs=n, device="cpu", seed=5)
    zero = lambda obs: torch.zeros(n, 1)
    result = evaluate(envs.make("cartpole", **kwargs), zero)
    env = envs.make("cartpole", **kwargs)
    returns, lengths, fell, _ = episodes_by_hand(env, zero, env.max_episode_length)
    np.testing.assert_array_equal(returns, lengths)
    assert len(set(lengths.tolist())) > 3 and lengths.max() < env.max_episode_length  # all fell, at various steps
    assert result["mean_return"] == result["mean_episode_length"] == lengths.mean()
    assert result["fall_rate"] == fell.mean() == 1.0 and result["episodes"] == n

    # the first 8 worlds only; a swing-up (no failure: every episode times out) with a reward
    # that is not 1 per step
    result = evaluate(envs.make("cartpole", **kwargs), zero, num_episodes=8)
    assert result["mean_episode_length"] == lengths[:8].mean() and result["episodes"] == 8
    kwargs["episode_length_s"] = 0.5
    push = lambda obs: torch.linspace(-1, 1, n)[:, None]
    result = evaluate(envs.make("cartpole_swingup", **kwargs), push)
    env = envs.make("cartpole_swingup", **kwargs)
    returns, lengths, fell, _ = episodes_by_hand(env, push, env.max_episode_length)
    assert (lengths == 25).all() and not fell.any()
    np.testing.assert_allclose(result["mean_return"], returns.mean(), rtol=1e-6)
    assert result["mean_episode_length"] == 25 and result["fall_rate"] == 0.0


def test_quadruped_tracking_errors_are_episode_means_by_hand():
    """lin_vel_tracking_error = mean over episodes of the episode mean of |command_xy - v_xy|
    (trunk frame, MuJoCo's trunk velocity), taken in the state each action is applied in; yaw
    the same with |command_yaw - w_z|. Half the worlds fold their legs and fall (below
    the base_height termination's 0.28 m) after 3 or 4 steps: their episodes count only those steps."""
    n = 8
    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    kwargs = dict(num_envs=n, device="cpu", seed=0, episode_length_s=0.2,
                  terminations={"base_contact": {}, "base_height": {"min_height": 0.28}, "upside_down": {}})
    fold = torch.zeros(n, 12)
    fold[: n // 2] = torch.tensor([0.0, 4.0, -4.0] * 4)  # targets beyond the hip and knee limits
    policy = lambda obs: fold
    env = envs.make("quadruped", **kwargs)
    returns, lengths, fell, states = episodes_by_hand(env, policy, env.max_episode_length)
    assert fell.tolist() == [True] * 4 + [False] * 4 and set(lengths[:4]) <= {2, 3, 4, 5}
    lin_err, yaw_err = np.zeros(n), np.zeros(n)
    for t, (qpos, qvel, commands) in enumerate(states):
        ref = mujoco_reference(mjm, qpos, qvel)
        running = t < lengths
        lin_err += running * np.linalg.norm(commands[:, :2] - np.stack([r["lin"][:2] for r in ref]), axis=1)
        yaw_err += running * np.abs(commands[:, 2] - np.array([r["ang"][2] for r in ref]))
    result = evaluate(envs.make("quadruped", **kwargs), policy)
    assert result["mean_episode_length"] == lengths.mean()
    np.testing.assert_allclose(result["lin_vel_tracking_error"], (lin_err / lengths).mean(), rtol=1e-5)
    np.testing.assert_allclose(result["yaw_rate_tracking_error"], (yaw_err / lengths).mean(), rtol=1e-5)
    np.testing.assert_allclose(result["mean_return"], returns.mean(), rtol=1e-5, atol=1e-7)
    assert result["fall_rate"] == fell.mean() == 0.5
    # the folded legs put the base below the base_height termination's; none turned over
    causes = result["falls_by_cause"]
    assert causes.keys() == {"base_contact", "base_height", "upside_down"}
    assert causes["base_height"] == 0.5 and causes["upside_down"] == 0.0 and causes["base_contact"] <= 0.5


class ScriptedEnv:
    """Four worlds whose episodes end as scripted: world 0 falls at step 2 by causes a and b,
    world 1 times out at step 3 with cause a true (not a fall), world 2 falls at step 1 by b, and
    at step 3 (a second episode: not counted) by a; world 3 falls at step 3 by a."""

    num_envs, device, max_episode_length = 4, "cpu", 3

    def reset(self):
        self.t = 0
        return {"policy": torch.zeros(4, 1)}

    def step(self, actions):
        self.t += 1
        a = torch.tensor({1: [0, 0, 0, 0], 2: [1, 0, 0, 0], 3: [0, 1, 1, 1]}[self.t], dtype=torch.bool)
        b = torch.tensor({1: [0, 0, 1, 0], 2: [1, 0, 0, 0], 3: [0, 0, 0, 0]}[self.t], dtype=torch.bool)
        self.termination_causes = {"a": a, "b": b}
        terminated = torch.tensor({1: [0, 0, 1, 0], 2: [1, 0, 0, 0], 3: [0, 0, 1, 1]}[self.t], dtype=torch.bool)
        time_outs = torch.full((4,), self.t == 3) & ~terminated
        return {"policy": torch.zeros(4, 1)}, torch.ones(4), terminated, time_outs, {}


def test_falls_by_cause_count_each_episode_once_and_only_falls():
    result = evaluate(ScriptedEnv(), lambda obs: torch.zeros(4, 1))
    assert result["fall_rate"] == 0.75 and result["mean_episode_length"] == (2 + 3 + 1 + 3) / 4
    assert result["falls_by_cause"] == {"a": 0.5, "b": 0.5}
