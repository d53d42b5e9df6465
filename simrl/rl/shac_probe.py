"""SHAC's actor objective taken apart (simrl.rl.shac): the window objective of the runner, of
its reward part, its critic (bootstrap) part or one reward term, and its gradient with respect
to the actor's parameters. tools/shac_probe.py reads them at a checkpoint to say why a run
stalls or falls."""

import contextlib
import copy

import torch


@contextlib.contextmanager
def only_term(env, name: str):
    """The env's step reward is reward term `name` alone (the other terms' weights 0) inside the
    block: each term is computed where the step computes it (terms that keep state, such as
    feet_air_time's air times and action_rate's last action, see what they would)."""
    if name not in env.reward_terms:
        raise ValueError(f"the task has no reward term {name!r}; its terms: {', '.join(env.reward_terms)}")
    weights = {k: term.weight for k, term in env.reward_terms.items()}
    try:
        for k, term in env.reward_terms.items():
            term.weight = term.weight if k == name else 0.0
        yield
    finally:
        for k, term in env.reward_terms.items():
            term.weight = weights[k]


def window_objective(runner, env, state: dict, seed: int, part: str = "all"):
    """The runner's actor objective (minus its loss, times horizon x num_envs) over one window
    from `state` (an env.state_dict) with exploration noise from torch seed `seed`. `part`: "all",
    "rewards" (the discounted rewards only), "values" (the bootstrap values only) or a reward
    term's name (that term, discounted, its weight applied). Returns the objective as a scalar
    tensor on the autograd graph; the env is left at the window's end."""
    c = runner.cfg
    H, N, gamma = c.horizon, env.num_envs, c.gamma
    if part not in ("all", "rewards", "values"):
        with only_term(env, part):
            return window_objective(runner, env, state, seed, "rewards")
    env.load_state_dict(copy.deepcopy(state))
    env.enable_grad(True)
    env.detach_state()
    torch.manual_seed(seed)
    obs_norm, critic_norm = runner.obs_normalizer.frozen(), runner.critic_obs_normalizer.frozen()
    obs = env.observations()
    total = torch.zeros(())
    reward_sum, discount = torch.zeros(N), torch.ones(N)
    for i in range(H):
        obs, reward, terminated, time_outs, extras = env.step(runner.actor(obs_norm(obs["policy"])))
        reward = reward * c.reward_scale
        done = terminated | time_outs
        end = done if i < H - 1 else torch.ones_like(done)
        value = runner.target_critic(critic_norm(extras["final_obs"]["critic"])).squeeze(-1)
        value = torch.where(terminated, torch.zeros_like(value), value)
        reward_sum = reward_sum + discount * reward
        piece = {"all": reward_sum + gamma * discount * value, "values": gamma * discount * value}.get(part, reward_sum)
        total = total + torch.where(end, piece, torch.zeros_like(piece)).sum()
        discount = torch.where(done, torch.ones_like(discount), discount * gamma)
        reward_sum = torch.where(done, torch.zeros_like(reward_sum), reward_sum)
    return total


def gradient(runner, objective: torch.Tensor) -> torch.Tensor:
    """The flat gradient of `objective` with respect to the actor's parameters."""
    params = list(runner.actor.parameters())
    grads = torch.autograd.grad(objective, params, allow_unused=True)
    return torch.cat([(g if g is not None else torch.zeros_like(p)).flatten() for g, p in zip(grads, params,
                                                                                             strict=True)])
