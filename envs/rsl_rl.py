"""rsl-rl-lib 5.x adapter: a `BatchedEnv` as an `rsl_rl.env.VecEnv` (TensorDict observation
groups, `extras["time_outs"]`, `extras["log"]`), with no host copies."""

import torch
from rsl_rl.env import VecEnv
from tensordict import TensorDict

from envs.base import BatchedEnv


class RslRlVecEnv(VecEnv):
    def __init__(self, env: BatchedEnv, cfg: dict | None = None):
        self.env = env
        self.num_envs = env.num_envs
        self.num_actions = env.num_actions
        self.max_episode_length = env.max_episode_length
        self.device = env.device
        self.cfg = cfg or {}
        self._obs = self._pack(env.reset())

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length_buf[:] = value

    def _pack(self, obs: dict) -> TensorDict:
        return TensorDict(obs, batch_size=[self.num_envs], device=self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def set_observations(self, obs: dict) -> None:
        """Replace the current observations (restoring a checkpoint's training state)."""
        self._obs = self._pack({k: v.to(self.device) for k, v in obs.items()})

    def step(self, actions: torch.Tensor):
        obs, reward, terminated, time_outs, extras = self.env.step(actions)
        self._obs = self._pack(obs)
        dones = (terminated | time_outs).to(torch.long)
        extras = {"time_outs": time_outs, "log": extras["log"]}
        return self._obs, reward, dones, extras
