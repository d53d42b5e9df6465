"""PPO (rsl-rl-lib through simrl.rl.ppo.Runner) learns cartpole on this CPU: the deterministic
policy reaches >= 95% of the maximum return within 5 minutes of training."""

import time

import torch
from omegaconf import OmegaConf

import envs
import tasks
from envs.rsl_rl import RslRlVecEnv
from simrl.rl.evaluate import evaluate
from simrl.rl.ppo import Runner, rsl_rl_config


def test_ppo_learns_cartpole(tmp_path):
    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole.yaml"))
    torch.manual_seed(0)
    env = envs.make("cartpole", num_envs=task["num_envs"], device="cpu", seed=0, **task["env"])
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(task["ppo"]), log_dir=str(tmp_path), device="cpu",
                    key_terms=["Episode_Reward/alive"])
    max_return = float(env.max_episode_length)  # 1 per step alive
    start = time.time()
    best = {"mean_return": 0.0}
    while time.time() - start < 300:
        runner.learn(num_learning_iterations=10)
        eval_env = envs.make("cartpole", num_envs=64, device="cpu", seed=123, **task["env"])
        result = evaluate(eval_env, runner.get_inference_policy(device="cpu"))
        best = max(best, result, key=lambda r: r["mean_return"])
        if result["mean_return"] >= 0.95 * max_return:
            break
    elapsed = time.time() - start
    assert best["mean_return"] >= 0.95 * max_return, (
        f"best evaluation return {best['mean_return']:.1f} of {max_return:.0f} after {elapsed:.0f} s")
    assert elapsed < 300
    assert any(p.name.startswith("model_") for p in tmp_path.iterdir()), "no checkpoint written"
