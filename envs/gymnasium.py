"""gymnasium 1.x adapter: a `BatchedEnv` as a `gymnasium.vector.VectorEnv`.

    import gymnasium
    import envs.gymnasium                  # registers simrl/Cartpole-v0, simrl/Quadruped-v0, ...
    vec = gymnasium.make_vec("simrl/Cartpole-v0", num_envs=16, vectorization_mode="vector_entry_point",
                             device="cpu", seed=0)
    obs, infos = vec.reset(seed=0)         # obs: torch.Tensor [16, 5] on the env's device
    obs, rewards, terminations, truncations, infos = vec.step(actions)

Registration. Importing this module registers one id per name of `envs.names()`:
"simrl/" + the name in CamelCase + "-v0" (`gym_id`), with `make_vec_env` as the
`vector_entry_point`; `gymnasium.make_vec("envs.gymnasium:simrl/Cartpole-v0", ...)` imports
it for you. Keyword arguments of `make_vec` other than num_envs go to `make_vec_env`
(`to_numpy`) and to `envs.make` (device, seed, episode_length_s, ...). The ids are vector
environments only: there is no single-environment entry point, so `gymnasium.make` refuses them.

Autoreset: `AutoresetMode.SAME_STEP`, which is what `BatchedEnv.step` does. On the step where
a world's episode ends (terminations | truncations), the observation returned for it is the
first observation of its next episode; the observation the episode ended in is in
`infos["final_obs"]`, a batch [num_envs, n] like the observations, and `infos["_final_obs"]`
[num_envs] bool marks the worlds that ended (both keys are present only on steps where some
world ended). The adapter gets them by setting `BatchedEnv.keep_final_obs`: the env computes
its observations once more, before resetting, on those steps only; the random draws of that
pass (observation noise) are replayed for the returned observations, so the wrapped env runs
exactly as it would unwrapped. Rows of worlds that did not end hold their current observation.

Data. By default observations, rewards, terminations and truncations are torch tensors on the
env's device, as `BatchedEnv` makes them (no host copy; the same convention as Isaac Lab's
environments), and `infos["log"]` is the env's `extras["log"]` (episode sums of the reward
terms, diagnostics; 0-d tensors). `to_numpy=True` returns numpy arrays instead (float32
observations and rewards, bool terminations, copies on the host, log values as floats) for
libraries that expect numpy; it costs one device-to-host copy per step on a GPU. `step` takes
actions [num_envs, num_actions] as a torch tensor on the env's device or as anything numpy
accepts (converted to float32 on the env's device).

Spaces. `single_observation_space` is the "policy" observation group, Box(-inf, inf, (n,),
float32); other groups (e.g. "critic") are in `vec.env.observations()`. `single_action_space`
is a float32 Box whose bounds are where the env saturates its controls, so that actions beyond
them act as the bound does (the env clamps; the adapter does not): cartpole [-1, 1]; quadruped
(ctrlrange - home joint position) / action_scale per joint; an env that defines
`action_bounds() -> (low, high)` gives its own; any other env (-inf, inf).
"""

from numbers import Integral

import gymnasium
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import envs
from envs.base import BatchedEnv


def action_bounds(env: BatchedEnv) -> tuple[np.ndarray, np.ndarray]:
    """Low and high [num_actions] (float32) of the actions `env` tells apart (see the module
    docstring); (-inf, inf) where the env does not say."""
    if callable(getattr(env, "action_bounds", None)):
        low, high = env.action_bounds()
    else:
        low, high = np.full(env.num_actions, -np.inf), np.full(env.num_actions, np.inf)
    as_array = lambda x: np.asarray(x.cpu() if isinstance(x, torch.Tensor) else x, dtype=np.float32)
    return as_array(low), as_array(high)


class GymVectorEnv(gymnasium.vector.VectorEnv):
    """`env` as a gymnasium vector environment of `env.num_envs` sub-environments (its worlds);
    see the module docstring for the autoreset mode, the data types and the spaces.

    Args:
        env: the batched environment; its `keep_final_obs` is turned on.
        to_numpy: return numpy arrays instead of torch tensors on the env's device.
    """

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}

    def __init__(self, env: BatchedEnv, to_numpy: bool = False):
        self.env = env
        self.to_numpy = bool(to_numpy)
        self.num_envs = env.num_envs
        self.device = env.device
        env.keep_final_obs = True
        draws = env.generator.get_state()  # the size probe must not use up the env's random draws
        num_obs = env.observations()["policy"].shape[1]
        env.generator.set_state(draws)
        self.single_observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (num_obs,), np.float32)
        low, high = action_bounds(env)
        self.single_action_space = gymnasium.spaces.Box(low, high, (env.num_actions,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        """Reset every world, reseeding the env first when `seed` is given (one integer: every
        world's random stream derives from it). Returns (observations [num_envs, n], {})."""
        if seed is not None and (not isinstance(seed, Integral) or isinstance(seed, bool)):
            raise TypeError(f"seed must be one integer (each world's random stream derives from it), got {seed!r}")
        if options:
            raise ValueError(f"reset options are not supported, got {options!r}; reset(seed=...) takes a seed only")
        super().reset(seed=seed)  # gymnasium's own np_random
        if seed is not None:
            self.env.seed(int(seed))
        return self._out(self.env.reset()["policy"]), {}

    def step(self, actions):
        """Apply actions [num_envs, num_actions]; returns (observations, rewards, terminations,
        truncations, infos) as described in the module docstring."""
        if not isinstance(actions, torch.Tensor):
            actions = torch.as_tensor(np.asarray(actions, dtype=np.float32), device=self.device)
        obs, reward, terminated, time_outs, extras = self.env.step(actions)
        log = extras["log"]
        if self.to_numpy:
            log = {k: float(v) if v.dim() == 0 else v.cpu().numpy() for k, v in log.items()}
        infos = {"log": log}
        if "final_obs" in extras:
            infos["final_obs"] = self._out(extras["final_obs"]["policy"])
            infos["_final_obs"] = self._out(terminated | time_outs)
        return self._out(obs["policy"]), self._out(reward), self._out(terminated), self._out(time_outs), infos

    def _out(self, x: torch.Tensor):
        x = x.detach()
        if x.is_floating_point():
            x = x.float()
        return x.to("cpu", copy=True).numpy() if self.to_numpy else x


def make_vec_env(task: str, num_envs: int = 1, to_numpy: bool = False, **env_kwargs) -> GymVectorEnv:
    """The `vector_entry_point` of the registered ids: `envs.make(task, num_envs=num_envs,
    **env_kwargs)` as a `GymVectorEnv`."""
    return GymVectorEnv(envs.make(task, num_envs=num_envs, **env_kwargs), to_numpy=to_numpy)


def gym_id(name: str) -> str:
    """The gymnasium id of the environment `name`: "cartpole_swingup" -> "simrl/CartpoleSwingup-v0"."""
    return "simrl/" + "".join(part.capitalize() for part in name.split("_")) + "-v0"


def register_envs() -> list[str]:
    """Register every environment of `envs.names()` with gymnasium (ids that are already
    registered are left alone); return the ids. Runs when this module is imported."""
    ids = []
    for name in envs.names():
        env_id = gym_id(name)
        if env_id not in gymnasium.registry:
            gymnasium.register(env_id, vector_entry_point=f"{__name__}:make_vec_env", kwargs={"task": name})
        ids.append(env_id)
    return ids


register_envs()
