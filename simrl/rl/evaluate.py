"""Evaluation episodes of a policy on a batched environment."""

import torch
from tensordict import TensorDict


@torch.inference_mode()
def evaluate(env, policy, num_episodes: int | None = None, on_step=None) -> dict:
    """Run one episode in each world (the first `num_episodes` worlds count) with the
    deterministic `policy` (a callable on the TensorDict of observation groups); return
    mean_return, mean_episode_length, fall_rate (episodes that ended by termination) and the
    episode mean of every metric the environment reports in `step_metrics()`, if it has one.
    An environment that keeps `termination_causes` (a mapping of [num_envs] bool tensors, the
    conditions of the state its last step ended in, before resets; envs.legged's) also gets
    `falls_by_cause`: per cause, the share of episodes that ended by termination with it true
    (a fall may have several).

    `on_step(env, running)`, if given, is called once per policy step before the action is
    applied (the env's state is the one the action is taken in), with `running` [num_envs] bool:
    the worlds still in their evaluation episode. scripts/play.py records its video this way."""
    n = env.num_envs if num_episodes is None else min(num_episodes, env.num_envs)
    obs = env.reset()
    returns = torch.zeros(env.num_envs, device=env.device)
    lengths = torch.zeros(env.num_envs, dtype=torch.long, device=env.device)
    fell = torch.zeros(env.num_envs, dtype=torch.bool, device=env.device)
    running = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
    metric_sums: dict[str, torch.Tensor] = {}
    cause_counts: dict[str, torch.Tensor] = {}
    for _ in range(env.max_episode_length):
        actions = policy(TensorDict(obs, batch_size=[env.num_envs], device=env.device))
        if hasattr(env, "step_metrics"):  # task metrics of the state the action is taken in
            for key, value in env.step_metrics().items():
                metric_sums[key] = metric_sums.get(key, torch.zeros_like(value)) + value * running
        if on_step is not None:
            on_step(env, running)
        obs, reward, terminated, time_outs, _ = env.step(actions)
        returns += torch.where(running, reward, torch.zeros_like(reward))
        lengths += running.long()
        fell |= running & terminated
        for key, value in getattr(env, "termination_causes", {}).items():
            cause_counts[key] = cause_counts.get(key, torch.zeros_like(fell)) | (running & terminated & value)
        running &= ~(terminated | time_outs)
        if not running.any():
            break
    result = {"mean_return": float(returns[:n].mean()), "mean_episode_length": float(lengths[:n].float().mean()),
              "fall_rate": float(fell[:n].float().mean()), "episodes": n}
    if cause_counts:
        result["falls_by_cause"] = {key: float(hit[:n].float().mean()) for key, hit in cause_counts.items()}
    for key, total in metric_sums.items():  # per-episode mean of each metric, then over episodes
        result[key] = float((total[:n] / lengths[:n].clamp(min=1)).mean())
    return result
