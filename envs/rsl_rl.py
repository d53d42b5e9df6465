"""rsl-rl-lib 5.x adapter: a `BatchedEnv` as an `rsl_rl.env.VecEnv` (TensorDict observation
groups, `extras["time_outs"]`, `extras["log"]`), with no host copies; on CUDA, optionally with
each environment step replayed as one CUDA graph (`CapturedStep`)."""

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

    def capture_steps(self) -> None:
        """Replay each `step` as one CUDA graph from now on (see CapturedStep)."""
        self._captured = CapturedStep(self.env)

    def step(self, actions: torch.Tensor):
        step = getattr(self, "_captured", None) or self.env.step
        obs, reward, terminated, time_outs, extras = step(actions)
        self._obs = self._pack(obs)
        dones = (terminated | time_outs).to(torch.long)
        extras = {"time_outs": time_outs, "log": extras["log"]}
        return self._obs, reward, dones, extras


class CapturedStep:
    """`env.step(actions)` as one CUDA graph: torch's graph, with the Warp launches of the
    physics, forward passes and ray casts captured into it (Warp's external capture on torch's
    capture stream), so that the decimation physics steps, rewards, terminations, resets,
    interval terms and observations of an environment step cost one graph launch.

    The env must step without host synchronisation (`BatchedEnv.set_sync_free`): a capture
    records device work only. The first call runs an ordinary step (it loads the Warp modules
    and makes the torch views of Warp arrays); the second captures the step and replays it; later
    calls copy the actions into the graph's input and replay. The graph is captured again when
    one of the tensors it reads or writes was replaced (an env state loaded into new tensors, a
    per-world model parameter made, a Warp array reallocated): the addresses of the env's
    per-world tensors and the simulation's model arrays are compared before each replay.
    Outputs are copies (rsl-rl keeps references to the observations it was given)."""

    def __init__(self, env: BatchedEnv):
        if env.device.type != "cuda":
            raise ValueError(f"CUDA graphs need a CUDA device; the env is on {env.device}")
        if not env.sync_free:
            raise ValueError("CUDA graphs need an env that steps without host synchronisation: call "
                             "env.set_sync_free() first (task.ppo.sync_free)")
        self.env = env
        self.graph = None
        self.captures = 0  #: how many times the step was captured
        self._warm = False
        self._key = None

    def _addresses(self) -> tuple:
        sim = self.env.sim
        tensors = tuple((name, t.data_ptr()) for name, t in self.env._row_state().items())
        return tensors + ((sim._graph_key(),) if hasattr(sim, "_graph_key") else ())

    def _capture(self, actions: torch.Tensor) -> None:
        import warp as wp

        env = self.env
        self._actions = actions.detach().clone()
        graph = torch.cuda.CUDAGraph()
        graph.register_generator_state(env.generator)  # observation noise draws from it
        # thread_local: the mode Warp's external capture assumes by default
        with torch.cuda.graph(graph, capture_error_mode="thread_local"):
            stream = wp.stream_from_torch(torch.cuda.current_stream(env.device))
            with wp.ScopedStream(stream):
                wp.capture_begin(stream=stream, external=True)
                try:
                    self._outputs = env.step(self._actions)
                finally:
                    wp.capture_end(stream=stream)
        self.graph = graph
        self.captures += 1
        self._key = self._addresses()

    def __call__(self, actions: torch.Tensor):
        if not self._warm:
            self._warm = True
            return self.env.step(actions)
        self.env.check_action_layout(actions)  # type, shape, device and dtype, as an ordinary step's
        if self.graph is None or self._addresses() != self._key:
            self._capture(actions)
        self._actions.copy_(actions)
        self.graph.replay()
        outputs = _copied(self._outputs)
        if self.env.step_observers:  # what BatchedEnv.step runs after a step, outside the graph
            self.env.notify_step_observers()
        return outputs


def _copied(x):
    """x with every tensor in it (inside tuples, lists and dicts) copied."""
    if isinstance(x, torch.Tensor):
        return x.clone()
    if isinstance(x, dict):
        return {k: _copied(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return type(x)(_copied(v) for v in x)
    return x
