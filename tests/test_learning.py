"""PPO learns the quadruped and the ant: after a budget of iterations (not seconds: a loaded
machine makes these tests slower, never failing), the deterministic policy beats a zero policy
(doing nothing: the quadruped holds its home pose, the ant lies still) by a stated margin, on
the same initial states. Short versions run in the default suite; the full tasks are `slow`.

The short versions shrink the problem, not the code: the same environments, rewards, PPO
runner and evaluation, with settings that let learning show within seconds (said per test),
and the best of evaluations every 10 iterations, as tests/test_train_cartpole.py does. Their
margins come from 5 seeds (0-4), measured 2026-12 on this machine; the tests run seed 0.
"""

import contextlib
import io

import pytest
import torch
from omegaconf import OmegaConf

import envs
import tasks
from envs.rsl_rl import RslRlVecEnv
from simrl.rl.evaluate import evaluate
from simrl.rl.ppo import Runner, rsl_rl_config


def train_and_evaluate(name, num_envs, iterations, env_kwargs, ppo=None, algorithm=None, eval_worlds=32,
                       seed=0):
    """(best evaluation of the PPO policy every 10 iterations, the zero policy's evaluation)."""
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml"))
    env_kwargs = {**task["env"], **env_kwargs}
    ppo_cfg = {**task["ppo"], **(ppo or {})}
    ppo_cfg["algorithm"] = {**ppo_cfg["algorithm"], **(algorithm or {})}
    torch.manual_seed(seed)
    env = envs.make(name, num_envs=num_envs, device="cpu", seed=seed, **env_kwargs)
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(ppo_cfg), log_dir=None, device="cpu", key_terms=[])

    def score(policy):
        return evaluate(envs.make(name, num_envs=eval_worlds, device="cpu", seed=123, **env_kwargs), policy)

    zero = score(lambda obs: torch.zeros(eval_worlds, env.num_actions))
    best = None
    for it in range(10, iterations + 1, 10):
        with contextlib.redirect_stdout(io.StringIO()):  # rsl-rl's model summary and progress lines
            runner.learn(num_learning_iterations=10)
        result = score(runner.get_inference_policy(device="cpu"))
        print(f"{name} it {it}: return {result['mean_return']:.3f} (zero policy {zero['mean_return']:.3f})")
        if best is None or result["mean_return"] > best["mean_return"]:
            best = result
    return best, zero


def test_ppo_learns_to_walk_the_quadruped_forward():
    """The quadruped task reduced to one command, walk forward at 0.6 m/s, paid by its two
    tracking terms only (with the penalties, standing still is the better policy for the first
    few hundred iterations: docs/notes/results-2026.md, and measured here, every deterministic episode
    falls after 30-80 iterations of 128 worlds), 4 s episodes, 256 worlds, 40 iterations (about
    35 s). Standing still scores 2.92 (tracking error 0.61 m/s). Best return within 40
    iterations over seeds 0-4: at least 3.73, 3.91, 5.17, 5.03, 4.02 (seed 4 was at 3.02 after
    30 iterations); the bar is +15% (3.35)."""
    velocity = {"lin_vel_x": (0.6, 0.6), "lin_vel_y": (0.0, 0.0), "ang_vel_yaw": (0.0, 0.0)}
    env_kwargs = dict(episode_length_s=4.0, commands={"base_velocity": velocity},
                      rewards={"tracking_lin_vel": {"weight": 1.0}, "tracking_ang_vel": {"weight": 0.5}})
    best, zero = train_and_evaluate("quadruped", 256, 40, env_kwargs)
    assert best["mean_return"] > 1.15 * zero["mean_return"], (best, zero)
    assert best["lin_vel_tracking_error"] < zero["lin_vel_tracking_error"], (best, zero)
    assert best["fall_rate"] == 0.0


def test_ppo_learns_to_move_the_ant_forward():
    """The ant task (Ant-v5's rewards), 5 s episodes, 64 worlds, 30 iterations (about 25 s),
    with an initial action noise of 0.3 (the task's 1.0 costs 0.5 x 8 x 1 = 4 per step in
    ctrl_cost against a healthy bonus of 1, so for its first iterations ending the episode
    pays: measured, the return falls below doing nothing) and a KL target of 0.02. Lying still
    scores 100.5 (the healthy bonus). Best return within 30 iterations over seeds 0-4: 115.5,
    139.5, 148.0, 129.2, 151.5; the bar is +10 (110.5)."""
    best, zero = train_and_evaluate("ant", 64, 30, dict(episode_length_s=5.0), ppo={"init_noise_std": 0.3},
                                    algorithm={"desired_kl": 0.02})
    assert best["mean_return"] > zero["mean_return"] + 10.0, (best, zero)


@pytest.mark.slow
def test_ppo_trains_the_quadruped_task():
    """The full task as `make train` runs it: 512 worlds, 1000 iterations (about 45 min on one
    core), 20 s episodes with commands, pushes and friction randomised (docs/RESULTS.md: at 450
    iterations, tracking error 0.087 m/s, 3% falls). Bars: tracking error below
    the issue's 0.25 m/s, at most 10% falls, the return 10 above standing still."""
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped.yaml"))
    trained, zero = _full_run("quadruped", task, eval_worlds=64)
    assert trained["lin_vel_tracking_error"] < 0.25 and trained["fall_rate"] <= 0.1, trained
    assert trained["mean_return"] > zero["mean_return"] + 10.0, (trained, zero)


@pytest.mark.slow
def test_ppo_trains_the_ant_task():
    """The full task: 256 worlds, 1000-action episodes, the task's PPO settings, 350 iterations
    (about 20 min on one core). docs/RESULTS.md: training returns 2929-4762 after 327-586
    iterations (30 min). Bar: 1000 above lying still (which scores about 1000, the healthy
    bonus over the episode)."""
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "ant.yaml"))
    task["max_iterations"] = 350
    trained, zero = _full_run("ant", task, eval_worlds=32)
    assert trained["mean_return"] > zero["mean_return"] + 1000.0, (trained, zero)


def _full_run(name, task, eval_worlds):
    """Train with the task's own settings for its max_iterations; evaluate the final policy."""
    torch.manual_seed(0)
    env = envs.make(name, num_envs=task["num_envs"], device="cpu", seed=0, **task["env"])
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(task["ppo"]), log_dir=None, device="cpu", key_terms=[])
    runner.learn(num_learning_iterations=int(task["max_iterations"]))

    def score(policy):
        return evaluate(envs.make(name, num_envs=eval_worlds, device="cpu", seed=123, **task["env"]), policy)

    trained = score(runner.get_inference_policy(device="cpu"))
    zero = score(lambda obs: torch.zeros(eval_worlds, env.num_actions))
    print(f"{name}: trained {trained}, zero policy {zero}")
    return trained, zero
