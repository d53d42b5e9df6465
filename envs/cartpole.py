"""Cart-pole tasks: keep the pole upright (`cartpole`), or swing it up first
(`cartpole_swingup`). The action is the force on the cart, in [-1, 1] x 10 N."""

import math

import mujoco
import torch

from envs import ASSETS_DIR
from envs.base import BatchedEnv, make_sim


class CartpoleEnv(BatchedEnv):
    """Balance (swingup=False: start near upright, fail beyond `max_angle` or when the cart
    passes `max_cart`) or swing up (swingup=True: start hanging down; no failure: the rail's
    joint limit at +-3 m stops the cart, as in dm_control's swing-up, and every episode runs
    its full length, which keeps the whole episode differentiable for SHAC).

    Observations ("policy" = "critic"): cart position, cos and sin of the pole angle, cart
    velocity, pole angular velocity. Differentiable (SHAC): observations and rewards are torch
    functions of the state and the action. Reward terms: `alive` (1 per step), `upright`
    ((1 + cos angle) / 2), `centered` (cart near the middle), `effort` (action squared).
    """

    def __init__(self, num_envs: int = 256, device=None, seed: int = 0, swingup: bool = False,
                 decimation: int = 2, episode_length_s: float = 5.0, max_angle: float = 0.4,
                 max_cart: float = 2.5, reward_weights: dict | None = None, dtype: str = "float32",
                 nonfinite_actions: str = "error", backend: str = "warp"):
        mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "cartpole.xml"))
        sim = make_sim(mjm, num_envs, device=device, dtype=dtype, backend=backend)
        if reward_weights is None:
            reward_weights = ({"upright": 1.0, "centered": 0.1, "effort": -0.01} if swingup else {"alive": 1.0})
        self.swingup = swingup
        self.max_angle = max_angle
        self.max_cart = max_cart
        super().__init__(sim, num_actions=1, decimation=decimation, episode_length_s=episode_length_s,
                         reward_weights=reward_weights, seed=seed, nonfinite_actions=nonfinite_actions)

    differentiable = True

    def action_bounds(self):
        """_ctrl clamps the action to [-1, 1] (gymnasium adapter)."""
        return -torch.ones(self.num_actions), torch.ones(self.num_actions)

    def _ctrl(self, actions):
        return actions.clamp(-1.0, 1.0)

    def _observations(self):
        q, v = self.qpos.float(), self.qvel.float()
        obs = torch.stack([q[:, 0], torch.cos(q[:, 1]), torch.sin(q[:, 1]), v[:, 0], v[:, 1]], dim=1)
        return {"policy": obs, "critic": obs}

    def _terminated(self):
        q = self.sim.qpos
        if self.swingup:
            return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return (q[:, 0].abs() > self.max_cart) | (q[:, 1].abs() > self.max_angle)

    def _reset_envs(self, env_ids):
        qpos = (self.rand_worlds(env_ids, 2) - 0.5) * 0.1
        if self.swingup:
            qpos[:, 1] += math.pi
        self.sim.qpos[env_ids] = qpos.to(self.sim.qpos.dtype)
        self.sim.qvel[env_ids] = ((self.rand_worlds(env_ids, 2) - 0.5) * 0.1).to(self.sim.qvel.dtype)

    # reward terms ------------------------------------------------------------------------
    def _reward_alive(self):
        return torch.ones(self.num_envs, device=self.device)

    def _reward_upright(self):
        return (1.0 + torch.cos(self.qpos[:, 1].float())) * 0.5

    def _reward_centered(self):
        return torch.exp(-self.qpos[:, 0].float() ** 2)

    def _reward_effort(self):
        return self.actions[:, 0] ** 2
