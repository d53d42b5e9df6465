"""Gymnasium's ant running forward, with the rewards of gymnasium's Ant-v5.

The model is gymnasium's own `ant.xml` (0.01 s RK4 steps); the policy acts every 5 of them
(dt = 0.05 s, Ant-v5's frame_skip) and an episode lasts 1000 actions (50 s). Ant-v5's
defaults, term by term (gymnasium/envs/mujoco/ant_v5.py):

    forward      (x_torso after - x_torso before) / dt          weight 1
                 (x from the state; Ant-v5 reads MuJoCo's xpos, which mj_step leaves at
                 the start of its last substep: the same velocity, 0.01 s earlier)
    healthy      1 while the torso height is in [0.2, 1.0]      weight 1
    ctrl_cost    sum(action^2)                                  weight -0.5

The episode terminates when the ant is not healthy (torso height outside [0.2, 1.0] or a
non-finite state). Observation ("policy" = "critic", 27): qpos[2:] (torso height,
orientation, joint angles) and qvel, Ant-v5 with `include_cfrc_ext_in_observation=False`.
Ant-v5's contact cost (5e-4 x the clipped external contact forces squared, at most 0.04 per
step) is left out: simrl does not compute `cfrc_ext`. Reset: qpos0 plus uniform noise of
+-0.1 (the torso quaternion renormalised), qvel standard normal x 0.1, as Ant-v5 does.

Differentiable (SHAC): the observations and the forward and control terms are torch functions
of the state and the action; the healthy bonus is a step function of the height, so its
gradient is zero.
"""

import math

import mujoco
import torch

from envs.base import BatchedEnv, make_sim
from envs.mdp import ant as mdp


def gym_asset(name: str):
    """Path of an MJCF model shipped with gymnasium (envs/mujoco/assets)."""
    from pathlib import Path

    import gymnasium

    return Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / name


class AntEnv(BatchedEnv):
    """Ant-v5 (see the module docstring); terms in envs/mdp/ant.py."""

    differentiable = True
    REWARD_TERMS = mdp.REWARDS
    TERMINATION_TERMS = mdp.TERMINATIONS
    REWARDS = {"forward": {"weight": 1.0}, "healthy": {"weight": 1.0}, "ctrl_cost": {"weight": -0.5}}
    TERMINATIONS = {"unhealthy": {}}

    def __init__(self, num_envs: int = 256, device=None, seed: int = 0, decimation: int = 5,
                 episode_length_s: float = 50.0, healthy_z_range: tuple = (0.2, 1.0), reset_noise_scale: float = 0.1,
                 rewards: dict | None = None, terminations: dict | None = None, dtype: str = "float32",
                 nonfinite_actions: str = "error", backend: str = "warp", njmax: int | None = None,
                 nconmax: int | None = None, strict: bool = False):
        mjm = mujoco.MjModel.from_xml_path(str(gym_asset("ant.xml")))
        sim = make_sim(mjm, num_envs, device=device, dtype=dtype, backend=backend, njmax=njmax,
                       nconmax=nconmax, strict=strict)
        self.healthy_z_range = tuple(float(z) for z in healthy_z_range)
        self.reset_noise_scale = float(reset_noise_scale)
        super().__init__(sim, num_actions=mjm.nu, decimation=decimation, episode_length_s=episode_length_s,
                         rewards=rewards, terminations=terminations, seed=seed, nonfinite_actions=nonfinite_actions)
        self.qpos0 = torch.as_tensor(mjm.qpos0, dtype=torch.float32, device=self.device)
        self.ctrl_low = torch.as_tensor(mjm.actuator_ctrlrange[:, 0], dtype=torch.float32, device=self.device)
        self.ctrl_high = torch.as_tensor(mjm.actuator_ctrlrange[:, 1], dtype=torch.float32, device=self.device)
        self.x_before = torch.zeros(num_envs, device=self.device)

    def action_bounds(self):
        """Actions beyond the actuators' control range [-1, 1] saturate (gymnasium adapter)."""
        return self.ctrl_low.cpu().numpy(), self.ctrl_high.cpu().numpy()

    def _ctrl(self, actions):
        return torch.minimum(torch.maximum(actions, self.ctrl_low), self.ctrl_high)

    def _pre_physics(self):
        self.x_before = self.qpos[:, 0].float().clone()  # not a view of the state the step overwrites

    def _observations(self):
        obs = torch.cat([self.qpos[:, 2:].float(), self.qvel.float()], dim=1)
        return {"policy": obs, "critic": obs}

    def healthy(self) -> torch.Tensor:
        """[num_envs] bool: the torso height in healthy_z_range and the state finite."""
        z = self.qpos[:, 2].detach()
        lo, hi = self.healthy_z_range
        finite = torch.isfinite(self.qpos.detach()).all(1) & torch.isfinite(self.qvel.detach()).all(1)
        return (z >= lo) & (z <= hi) & finite

    def _reset_envs(self, env_ids):
        n, nq, nv = env_ids.numel(), self.sim.nq, self.sim.nv
        scale = self.reset_noise_scale
        qpos = self.qpos0 + (self.rand_worlds(env_ids, nq) * 2.0 - 1.0) * scale
        qpos[:, 3:7] = qpos[:, 3:7] / qpos[:, 3:7].norm(dim=1, keepdim=True)
        u1, u2 = self.rand_worlds(env_ids, 2, nv).unbind(1)  # Box-Muller: standard normal draws
        normal = torch.sqrt(-2.0 * torch.log1p(-u1)) * torch.cos(2.0 * math.pi * u2)
        self.sim.qpos[env_ids] = qpos.to(self.sim.qpos.dtype)
        self.sim.qvel[env_ids] = (normal * scale).reshape(n, nv).to(self.sim.qvel.dtype)
        self.sim.ctrl[env_ids] = 0.0
