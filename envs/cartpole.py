"""Cart-pole tasks: keep the pole upright (`cartpole`), or swing it up first
(`cartpole_swingup`). The action is the force on the cart, in [-1, 1] x 10 N."""

import math

import mujoco
import torch

from envs import ASSETS_DIR
from envs.base import BatchedEnv, make_sim
from envs.mdp import cartpole as mdp


class CartpoleEnv(BatchedEnv):
    """Balance (swingup=False: start near upright, fail when the pole tilts or the cart runs
    too far: the terminations pole_fallen and cart_out_of_bounds) or swing up (swingup=True: start
    hanging down; no failure: the rail's joint limit at +-3 m stops the cart, as in dm_control's
    swing-up, and every episode runs its full length, which keeps the whole episode
    differentiable for SHAC).

    Observations ("policy" = "critic"): cart position, cos and sin of the pole angle, cart
    velocity, pole angular velocity. Differentiable (SHAC): observations and rewards are torch
    functions of the state and the action. Reward terms (envs/mdp/cartpole.py): `alive` (1 per
    step), `upright` ((1 + cos angle) / 2), `centered` (cart near the middle), `effort` (action
    squared).
    """

    differentiable = True
    REWARD_TERMS = mdp.REWARDS
    TERMINATION_TERMS = mdp.TERMINATIONS
    REWARDS = {"alive": {"weight": 1.0}}
    TERMINATIONS = {"cart_out_of_bounds": {"limit": 2.5}, "pole_fallen": {"limit": 0.4}}
    #: the swing-up's terms when the task lists none
    SWINGUP_REWARDS = {"upright": {"weight": 1.0}, "centered": {"weight": 0.1}, "effort": {"weight": -0.01}}
    SWINGUP_TERMINATIONS: dict = {}

    def __init__(self, num_envs: int = 256, device=None, seed: int = 0, swingup: bool = False,
                 decimation: int = 2, episode_length_s: float = 5.0, rewards: dict | None = None,
                 terminations: dict | None = None, dtype: str = "float32", nonfinite_actions: str = "error",
                 backend: str = "warp", njmax: int | None = None, nconmax: int | None = None,
                 strict: bool = False):
        mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "cartpole.xml"))
        sim = make_sim(mjm, num_envs, device=device, dtype=dtype, backend=backend, njmax=njmax,
                       nconmax=nconmax, strict=strict)
        if swingup:
            rewards = self.SWINGUP_REWARDS if rewards is None else rewards
            terminations = self.SWINGUP_TERMINATIONS if terminations is None else terminations
        self.swingup = swingup
        super().__init__(sim, num_actions=1, decimation=decimation, episode_length_s=episode_length_s,
                         rewards=rewards, terminations=terminations, seed=seed, nonfinite_actions=nonfinite_actions)

    def action_bounds(self):
        """_ctrl clamps the action to [-1, 1] (gymnasium adapter)."""
        return -torch.ones(self.num_actions), torch.ones(self.num_actions)

    def _ctrl(self, actions):
        return actions.clamp(-1.0, 1.0)

    def _observations(self):
        q, v = self.qpos.float(), self.qvel.float()
        obs = torch.stack([q[:, 0], torch.cos(q[:, 1]), torch.sin(q[:, 1]), v[:, 0], v[:, 1]], dim=1)
        return {"policy": obs, "critic": obs}

    def _reset_envs(self, env_ids):
        qpos = (self.rand_worlds(env_ids, 2) - 0.5) * 0.1
        if self.swingup:
            qpos[:, 1] += math.pi
        self.sim.qpos[env_ids] = qpos.to(self.sim.qpos.dtype)
        self.sim.qvel[env_ids] = ((self.rand_worlds(env_ids, 2) - 0.5) * 0.1).to(self.sim.qvel.dtype)
