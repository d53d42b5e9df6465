"""`BatchedEnv`: many copies of one robot task on a `simrl.Sim`, as torch tensors on one device.

A task subclass defines what the policy sees and is paid for; this class does the rest, in
the manner of legged_gym / Isaac Lab: actions become controls, the physics runs `decimation`
steps per action, every named reward term is weighted and summed over the episode for
logging, terminations are kept apart from time-outs, and finished worlds are reset alone
while the others keep running. Nothing leaves the device inside `step`.

A subclass implements
    _apply_actions(actions)      # [num_envs, num_actions] -> self.sim.ctrl
    _observations() -> dict      # {"policy": [num_envs, n], "critic": [num_envs, m], ...}
    _reward_<name>() -> tensor   # [num_envs], one per key of `reward_weights`
    _terminated() -> bool tensor # [num_envs], failure (time-outs are handled here)
    _reset_envs(env_ids)         # write the initial state of those worlds into self.sim
"""

import math

import torch

from simrl import Sim


class BatchedEnv:
    """Base class of the batched environments; see the module docstring.

    Args:
        sim: the simulation, one world per environment.
        num_actions: size of the action vector.
        decimation: physics steps per action.
        episode_length_s: episode duration in seconds; an episode that reaches it is a time-out.
        reward_weights: {term name: weight}; the step reward is sum(weight * term).
        seed: seed of the environment's random generator (resets, commands, noise).
    """

    def __init__(self, sim: Sim, num_actions: int, decimation: int, episode_length_s: float,
                 reward_weights: dict[str, float], seed: int = 0):
        if decimation < 1:
            raise ValueError(f"decimation must be >= 1, got {decimation}")
        if episode_length_s <= 0:
            raise ValueError(f"episode_length_s must be positive, got {episode_length_s}")
        self.sim = sim
        self.num_envs = sim.num_worlds
        self.num_actions = num_actions
        self.device = sim.qpos.device
        self.decimation = int(decimation)
        self.step_dt = sim.timestep * self.decimation
        self.max_episode_length = int(math.ceil(episode_length_s / self.step_dt))
        for name in reward_weights:
            if not callable(getattr(self, f"_reward_{name}", None)):
                raise ValueError(f"unknown reward term {name!r} for {type(self).__name__}; "
                                 f"available: {sorted(self.reward_term_names())}")
        self.reward_weights = {k: float(v) for k, v in reward_weights.items()}
        self.generator = torch.Generator(device=self.device)
        self.seed(seed)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.episode_sums = {k: torch.zeros(self.num_envs, device=self.device) for k in self.reward_weights}
        self.actions = torch.zeros(self.num_envs, num_actions, device=self.device)

    @classmethod
    def reward_term_names(cls) -> list[str]:
        return [n.removeprefix("_reward_") for n in dir(cls) if n.startswith("_reward_")]

    def seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed))

    def rand(self, *shape) -> torch.Tensor:
        """Uniform [0, 1) samples from the environment's own generator."""
        return torch.rand(*shape, generator=self.generator, device=self.device)

    # ------------------------------------------------------------------------------------ API
    def reset(self) -> dict[str, torch.Tensor]:
        """Reset every world; return the observation groups."""
        self._reset(torch.arange(self.num_envs, device=self.device))
        return self._observations()

    def observations(self) -> dict[str, torch.Tensor]:
        return self._observations()

    def step(self, actions: torch.Tensor):
        """Apply actions [num_envs, num_actions] for `decimation` physics steps.

        Returns (observations, reward [num_envs], terminated [num_envs] bool,
        time_outs [num_envs] bool, extras). Worlds that finished are reset before the
        observations are computed; extras["log"] holds the mean episode sum of each reward term
        over the episodes that ended ("Episode_Reward/<term>") and "Diagnostics/nan_resets".
        """
        self._check_actions(actions)
        self.actions = actions
        for _ in range(self.decimation):
            self._apply_actions(actions)
            self.sim.step()
        self.episode_length_buf += 1

        reward = torch.zeros(self.num_envs, device=self.device)
        for name, weight in self.reward_weights.items():
            term = getattr(self, f"_reward_{name}")() * weight
            self.episode_sums[name] += term
            reward += term
        nan = self.sim.nan_worlds
        reward = torch.where(nan, torch.zeros_like(reward), reward)
        terminated = self._terminated() | nan
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        done = terminated | time_outs

        extras = {"log": {}}
        done_ids = done.nonzero(as_tuple=False).squeeze(-1)
        if done_ids.numel() > 0:
            for name in self.reward_weights:
                extras["log"][f"Episode_Reward/{name}"] = self.episode_sums[name][done_ids].mean()
            extras["log"]["Diagnostics/nan_resets"] = nan.sum()
            self._reset(done_ids)
        return self._observations(), reward, terminated, time_outs, extras

    def _reset(self, env_ids: torch.Tensor) -> None:
        self.sim.reset(env_ids)
        self._reset_envs(env_ids)
        self.episode_length_buf[env_ids] = 0
        self.actions[env_ids] = 0.0
        for sums in self.episode_sums.values():
            sums[env_ids] = 0.0

    def _check_actions(self, actions) -> None:
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions must have shape ({self.num_envs}, {self.num_actions}) "
                             f"[num_envs, num_actions], got {tuple(actions.shape)}")
        if actions.device != self.device:
            raise ValueError(f"actions must be on {self.device}, got {actions.device}")
        if not actions.is_floating_point():
            raise TypeError(f"actions must be floating point, got {actions.dtype}")
        if not torch.isfinite(actions).all():
            raise ValueError("actions contain NaN or inf")

    # ------------------------------------------------------------------------ for subclasses
    def _apply_actions(self, actions: torch.Tensor) -> None:
        raise NotImplementedError

    def _observations(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def _terminated(self) -> torch.Tensor:
        raise NotImplementedError

    def _reset_envs(self, env_ids: torch.Tensor) -> None:
        raise NotImplementedError


def per_world_param(sim: Sim, name: str) -> torch.Tensor:
    """Give the model parameter `name` its own value in every world (domain randomization) and
    return a writable torch view [num_worlds, ...]. Only parameters that the kernels read at
    `worldid % shape[0]` qualify (Model fields declared `[1 or W, ...]` in simrl/sim/model.py)."""
    import numpy as np
    import warp as wp

    struct = sim.model.struct
    array = getattr(struct, name, None)
    if not isinstance(array, wp.array) or array.ndim < 2:
        raise ValueError(f"{name!r} is not a per-world model parameter")
    if array.shape[0] != sim.num_worlds:
        if array.shape[0] != 1:
            raise ValueError(f"{name!r} has {array.shape[0]} worlds, the simulation {sim.num_worlds}")
        expanded = np.repeat(array.numpy(), sim.num_worlds, axis=0)
        setattr(struct, name, wp.array(expanded, dtype=array.dtype, device=array.device))
    return wp.to_torch(getattr(struct, name))
