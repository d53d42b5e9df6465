"""`BatchedEnv`: many copies of one robot task on a `simrl.Sim`, as torch tensors on one device.

A task subclass defines what the policy sees and is paid for; this class does the rest, in
the manner of legged_gym / Isaac Lab: actions become controls, the physics runs `decimation`
steps per action, every named reward term is weighted and summed over the episode for
logging, terminations are kept apart from time-outs, and finished worlds are reset alone
while the others keep running. Nothing leaves the device inside `step`.

A subclass implements
    _apply_actions(actions)      # [num_envs, num_actions] -> self.sim.ctrl
    _observations() -> dict      # {"policy": [num_envs, n], "critic": [num_envs, m], ...}
    _reset_envs(env_ids)         # write the initial state of those worlds into self.sim
and names its reward and termination terms (envs/terms.py: the registries REWARD_TERMS and
TERMINATION_TERMS, the defaults REWARDS and TERMINATIONS): `rewards` and `terminations` choose
among them with their weights and parameters. The step reward is the sum of each term times its
weight, in the order listed; the terminations are or-ed (time-outs are handled here).

Actions are checked in `step`: a torch.Tensor of shape [num_envs, num_actions], floating
point, on the env's device, and finite. A non-finite action is an error by default
(`nonfinite_actions="error"`); `nonfinite_actions="zero"` replaces each NaN/inf entry by 0 and
reports the number of worlds affected in `extras["log"]["Diagnostics/nonfinite_actions"]` (every
step) and in `nonfinite_action_count` (the running total). Cost: "error" evaluates one
`torch.isfinite(actions).all()` per step, which synchronises with the device (free on the CPU,
one host round trip per step on a GPU); "zero" needs no synchronisation.

Differentiable steps (SHAC, `simrl.rl.shac`): a task whose class sets `differentiable = True`
computes its observations and rewards with torch operations from `self.qpos`, `self.qvel`
and `self.actions`, and turns actions into controls in `_ctrl(actions)`. After
`enable_grad()`, `step` runs the physics through `simrl.diff_step`, so the reward and the
observations carry gradients back to the actions and to the state the window started from;
`extras["final_obs"]` holds the observations of the state every world reached before finished
worlds were reset (differentiable too; a critic bootstraps time-outs from it), and reset worlds
start from a state with no gradient. `detach_state()` cuts the gradient path (between two
SHAC windows). Terminations, time-outs and resets are not differentiated.

Observations read from the simulation's outputs (sensors, `sim.sensordata`): MuJoCo computes
them inside the step, before integrating, so after the `decimation` physics steps of `step` they
describe the state the last physics step started from (one physics step old, as after
`mj_step`). A reset world's outputs would describe its previous episode: a task that lists the
outputs its observations read in `observed_outputs` gets `sim.forward(worlds=...)` of the reset
worlds after every reset, so the first observation of an episode describes the reset state (as
MuJoCo Playground's reset runs mj_forward). Only the reset worlds are computed (the others keep
every output as the step left it), and every world keeps its solver warm start (which mj_forward
leaves alone), so no world's observations or trajectory depend on another world's reset. A step
on which some worlds reset costs a forward pass of those worlds (on a GPU the other worlds'
threads return at once).

Without host synchronisation (`set_sync_free()`, for CUDA graphs): `step` then makes no
device-to-host round trip. Every world runs the reset, a command draw or an interval term, and
only the worlds it was due for keep the result (`_rows_only`: the rows of every per-world tensor
are chosen with torch.where), which gives each world exactly what the indexed reset gives it
(the per-world random streams draw only for the chosen worlds). The episode logs become masked
means (NaN on steps where no episode ended; simrl.rl.ppo drops those), with
nonfinite_actions="error" a non-finite action is replaced by 0 and raised by
`raise_deferred_errors()` (the PPO runner calls it once per iteration), and the Sim's budget
overflow is warned about (or raised, `strict`) there too. It costs a reset of
every world per step (the forward pass after it only of the worlds that reset); on the CPU the
indexed path, the default, is cheaper.

`state_dict()` / `load_state_dict()` capture what the next step depends on (the simulation
state with the actuator activations and the mocap bodies' poses when the model has any, `sensordata` when it
has sensors,
per-world model parameters, every per-world tensor attribute of the env and its random
generator), so that a resumed training run continues exactly where it stopped.
"""

import contextlib
import functools
import math
import types

import torch

from envs import terms
from simrl import Sim

_GOLDEN = 0x9E3779B97F4A7C15 - (1 << 64)  # as a signed int64


def _capturing(device) -> bool:
    """Whether a CUDA graph is being captured on the current stream (observers copy to the host,
    which a capture cannot hold)."""
    return torch.device(device).type == "cuda" and torch.cuda.is_current_stream_capturing()


def _mix(x: torch.Tensor) -> torch.Tensor:
    """SplitMix64's finalizer on int64 tensors (wrapping arithmetic; logical shifts by masks)."""
    x = x + _GOLDEN
    x = (x ^ ((x >> 30) & ((1 << 34) - 1))) * (0xBF58476D1CE4E5B9 - (1 << 64))
    x = (x ^ ((x >> 27) & ((1 << 37) - 1))) * (0x94D049BB133111EB - (1 << 64))
    return x ^ ((x >> 31) & ((1 << 33) - 1))


class BatchedEnv:
    """Base class of the batched environments; see the module docstring.

    Args:
        sim: the simulation, one world per environment.
        num_actions: size of the action vector.
        decimation: physics steps per action.
        episode_length_s: episode duration in seconds; an episode that reaches it is a time-out.
        rewards: {term name: {weight: w, parameters}} (envs/terms.py; None: the class's REWARDS);
            the step reward is sum(weight * term).
        terminations: {term name: {parameters}} (None: the class's TERMINATIONS); an episode
            fails when any is true.
        seed: seed of the environment's random generator (resets, commands, noise).
        nonfinite_actions: "error" (default): `step` raises on NaN or inf actions; "zero": they
            are replaced by 0 and counted (see the module docstring).
    """

    #: the name the environment was made under (`envs.make` sets it); stored in checkpoints
    name: str | None = None

    #: True: `step` also returns extras["final_obs"], the observation groups of the state the
    #: finished worlds ended in (see `step`); off by default, it costs one more observation pass
    #: on each step where a world ends. envs.gymnasium.GymVectorEnv turns it on.
    keep_final_obs: bool = False

    #: True: `step` makes no host synchronisation (`set_sync_free`, see the module docstring)
    sync_free: bool = False

    #: True for tasks whose observations and rewards are torch functions of `qpos`, `qvel` and
    #: `actions`, with `_ctrl` defined: they support `enable_grad()` (see the module docstring)
    differentiable: bool = False

    #: simulation arrays that carry state from one step to the next (everything else in the
    #: simulation's data is recomputed from these by the next step's forward pass)
    SIM_STATE = ("qpos", "qvel", "ctrl", "qfrc_applied", "qacc", "qacc_warmstart", "nan_world")

    #: simulation outputs besides the state that `_observations` reads (e.g. "sensordata",
    #: "contact_active"): with any listed, a reset runs `sim.forward(worlds=...)` of the reset
    #: worlds so that they describe their new state (see the module docstring); empty: no forward
    #: after resets
    observed_outputs: tuple[str, ...] = ()
    #: with `enable_grad()`: after each step's differentiable physics, a forward pass (no
    #: gradient) of the state its last physics step started from, so that the simulation's outputs
    #: (contacts, sensordata, actuator_force, poses) are what the plain step leaves for terms that
    #: read them (not differentiated); `_substep_start` holds that state, differentiable
    outputs_in_grad: bool = False
    #: legged_gym's only_positive_rewards: the step reward of every term but `termination` is
    #: clipped at zero before the termination term is added (the episode sums stay unclipped)
    only_positive_rewards: bool = False

    #: the reward and termination terms a task can list (envs/terms.py), and those used when it lists none
    REWARD_TERMS: dict = {}
    TERMINATION_TERMS: dict = {}
    REWARDS: dict = {}
    TERMINATIONS: dict = {}
    #: a robot's own defaults of term parameters: {section: {term: {parameter: value}}}
    TERM_PARAMS: dict = {}

    @property
    def term_params(self) -> dict:
        """The defaults of the terms' parameters this env's robot gives (envs/terms.py): the
        class's TERM_PARAMS."""
        return self.TERM_PARAMS

    def __init__(self, sim: Sim, num_actions: int, decimation: int, episode_length_s: float,
                 rewards: dict | None = None, terminations: dict | None = None, seed: int = 0,
                 nonfinite_actions: str = "error"):
        if nonfinite_actions not in ("error", "zero"):
            raise ValueError(f"nonfinite_actions must be 'error' or 'zero', got {nonfinite_actions!r}")
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
        #: the reward terms (envs/terms.py Term: name, function, parameters, weight), in order
        self.reward_terms = terms.build(self, "rewards", rewards)
        #: {term name: weight}
        self.reward_weights = {name: term.weight for name, term in self.reward_terms.items()}
        #: the termination terms, in order
        self.termination_terms = terms.build(self, "terminations", terminations)
        self.generator = torch.Generator(device=self.device)
        self.seed(seed)
        self.episode_length_buf = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.episode_sums = {k: torch.zeros(self.num_envs, device=self.device) for k in self.reward_weights}
        self.actions = torch.zeros(self.num_envs, num_actions, device=self.device)
        self.nonfinite_actions = nonfinite_actions
        self.nonfinite_action_count = torch.zeros((), dtype=torch.long, device=self.device)
        self.world_draws = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)  # rand_worlds
        # sync_free: a non-finite action seen since the last raise_deferred_errors (count of worlds)
        self._deferred_nonfinite = torch.zeros((), dtype=torch.long, device=self.device)
        self._reset_rows: torch.Tensor | None = None  # the worlds a masked reset is for (see _rows_only)
        self._every_world = torch.arange(self.num_envs, device=self.device)
        self.grad_enabled = False
        #: the configured domain randomization (envs.randomization), once setup_randomization ran
        self.randomization = None
        #: per-world action delay in policy steps [num_envs] (an action_delay randomization term)
        self.action_delay: torch.Tensor | None = None
        # (qpos, qvel), and act when the model has activations, on the autograd graph
        self._grad_state: tuple[torch.Tensor, ...] | None = None
        # with enable_grad: the state the last physics step of `step` started from (on the graph)
        self._substep_start: tuple[torch.Tensor, ...] | None = None
        #: callables f(env) run after every step (outside CUDA graph capture; the captured step
        #: runs them after each replay): simrl.viewer's training view
        self.step_observers: list = []
        # the last step's weighted reward terms [num_envs] by name, in a tuple: not per-world
        # state for state_dict (see step_reward_terms)
        self._step_terms: tuple[dict, ...] = ({},)

    def setup_randomization(self, cfg: dict | None) -> None:
        """Build the domain randomization terms of `cfg` (envs.randomization; None: none) and apply
        the startup terms to every world. A subclass calls it at the end of its constructor."""
        from envs.randomization import Randomization

        self.randomization = Randomization(self, cfg)
        self.randomization.startup()

    def _setup_action_delay(self, max_delay: int) -> None:
        """Per-world action delay of up to max_delay policy steps (the action_delay term)."""
        if self.action_delay is not None:
            raise ValueError("only one action_delay randomization term can be configured")
        self.action_delay = torch.zeros(self.num_envs, dtype=torch.long, device=self.device)
        self.action_history = torch.zeros(self.num_envs, max_delay + 1, self.num_actions, device=self.device)

    def _delayed_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """The actions the physics applies: each world's of action_delay policy steps ago."""
        if self.action_delay is None:
            return actions
        h = self.action_history
        h.copy_(torch.cat([actions[:, None].to(h.dtype), h[:, :-1]], dim=1))
        return h[torch.arange(self.num_envs, device=self.device), self.action_delay]

    def seed(self, seed: int) -> None:
        self.generator.manual_seed(int(seed))
        self._seed = int(seed)
        if hasattr(self, "world_draws"):
            self.world_draws.zero_()

    def rand(self, *shape) -> torch.Tensor:
        """Uniform [0, 1) samples from the environment's own generator (for draws that every
        world makes at the same time, such as observation noise)."""
        return torch.rand(*shape, generator=self.generator, device=self.device)

    def rand_worlds(self, env_ids: torch.Tensor, *shape, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Uniform [0, 1) samples [len(env_ids), *shape] from per-world streams: what a world
        draws depends only on the seed, the world and how many draws it made before, never on
        which other worlds draw (a reset of one world leaves the others' futures unchanged).
        Counter-based: SplitMix64 (Steele, Lea, Flood, OOPSLA 2014) of (seed, world, draw, k).
        `mask` (bool [len(env_ids)]): only those worlds draw (their streams advance); the others'
        rows are what they would have drawn, and their streams stay where they were."""
        env_ids = torch.as_tensor(env_ids, device=self.device).long().reshape(-1)
        size = math.prod(shape)
        draw = self.world_draws[env_ids]
        if mask is None:
            self.world_draws[env_ids] += 1
        else:
            self.world_draws[env_ids] += mask.long()
        key = (_mix(torch.full_like(draw, self._seed)) + env_ids * _GOLDEN) * _GOLDEN + draw
        bits = _mix(_mix(key)[:, None] + torch.arange(size, device=self.device))
        uniform = ((bits >> 40) & 0xFFFFFF).float() * (1.0 / (1 << 24))  # top 24 bits
        return uniform.reshape(env_ids.numel(), *shape)

    # ------------------------------------------------------------------------------ state
    @property
    def qpos(self) -> torch.Tensor:
        """The generalized positions the task reads: the simulation's, or with `enable_grad()`
        the differentiable ones of the current window."""
        return self.sim.qpos if self._grad_state is None else self._grad_state[0]

    @property
    def qvel(self) -> torch.Tensor:
        return self.sim.qvel if self._grad_state is None else self._grad_state[1]

    def enable_grad(self, enabled: bool = True) -> None:
        """Run `step` through the differentiable simulator (see the module docstring)."""
        if enabled and not self.differentiable:
            raise ValueError(f"{type(self).__name__} has no differentiable step (its rewards or observations are "
                             f"not torch functions of the state); SHAC needs one of the differentiable tasks")
        if enabled and (self.action_delay is not None or getattr(self, "actuator_model", None) is not None
                        and self.actuator_model.type != "mujoco"):
            raise ValueError("enable_grad: action delays and the pd / dc_motor actuator models are not "
                             "differentiated; configure neither for SHAC")
        self.grad_enabled = bool(enabled)
        self._grad_state = None
        self.actions = self.actions.detach().clone()

    def detach_state(self) -> None:
        """Cut the gradient path: the next step starts from the current state as a constant."""
        if self._grad_state is not None:
            self._grad_state = tuple(x.detach() for x in self._grad_state)

    # ------------------------------------------------------------------------------------ API
    def reset(self) -> dict[str, torch.Tensor]:
        """Reset every world; return the observation groups."""
        self._reset(torch.arange(self.num_envs, device=self.device))
        return self._observations()

    def observations(self) -> dict[str, torch.Tensor]:
        return self._observations()

    def policy_metadata(self) -> dict:
        """What running the exported policy needs to know of this env (scripts/play.py writes it
        into policy.onnx and policy.pt, simrl.rl.export): `control_period_s` (s between actions),
        `physics_dt_s`, `decimation` and `num_actions`. Environments with more to say (envs.legged:
        joints, gains, observation terms) extend it; every value is JSON (numbers, strings, lists,
        mappings, null)."""
        return {"control_period_s": float(self.step_dt), "physics_dt_s": float(self.sim.timestep),
                "decimation": self.decimation, "num_actions": int(self.num_actions)}

    def step(self, actions: torch.Tensor):
        """Apply actions [num_envs, num_actions] for `decimation` physics steps.

        Returns (observations, reward [num_envs], terminated [num_envs] bool,
        time_outs [num_envs] bool, extras). Worlds that finished are reset before the
        observations are computed; extras["log"] holds the mean episode sum of each reward term
        over the episodes that ended ("Episode_Reward/<term>") and "Diagnostics/nan_resets"; at
        every step "Diagnostics/overflow", the share of worlds in which some physics step of this
        step outgrew a budget of the Sim (`sim.overflow`, the differentiable step's too; not with
        the MuJoCo backend), and with nonfinite_actions="zero", "Diagnostics/nonfinite_actions"
        (worlds whose actions had NaN or inf entries, replaced by 0). With `keep_final_obs`, on
        steps where a world finished, extras["final_obs"] holds the observation groups
        [num_envs, ...] computed before the reset (the rows of the finished worlds are their final
        observations); the random draws they take are replayed for the returned observations, so
        keeping them changes nothing else.
        """
        actions, nonfinite = self._check_actions(actions)
        self._pre_physics()
        if self.grad_enabled:
            self.actions = actions.clone()  # on the graph: the rewards differentiate it
            nan, overflow = self._physics_grad(self.actions)
        else:
            self.actions.copy_(actions)  # the env's own buffer: resets below must not zero the caller's tensor
            applied = self._delayed_actions(actions)
            # what outgrew a budget in any of the physics steps (the Sim's flags describe its last
            # step only); MuJoCo has no budgets
            overflow = torch.zeros_like(self.sim.overflow) if isinstance(self.sim, Sim) else None
            for _ in range(self.decimation):
                self._apply_actions(applied)
                self.sim.step()
                if overflow is not None:
                    overflow |= self.sim.overflow
            nan = self.sim.nan_worlds
        self.episode_length_buf += 1

        # a world whose state became non-finite earns nothing this step: its terms (NaN) must
        # reach neither the reward nor the logged episode sums
        reward = torch.zeros(self.num_envs, device=self.device)
        termination = None
        for name, reward_term in self.reward_terms.items():
            term = reward_term(self) * reward_term.weight
            term = torch.where(nan, torch.zeros_like(term), term)
            self._step_terms[0][name] = term.detach()
            self.episode_sums[name] += term.detach()
            if name == "termination" and self.only_positive_rewards:
                termination = term
            else:
                reward = reward + term
        if self.only_positive_rewards:  # legged_gym: clip, then add the termination term
            reward = reward.clamp(min=0.0)
            if termination is not None:
                reward = reward + termination
        terminated = self._terminated() | nan
        time_outs = (self.episode_length_buf >= self.max_episode_length) & ~terminated
        done = terminated | time_outs

        extras = {"log": {}}
        if overflow is not None:
            extras["log"]["Diagnostics/overflow"] = (overflow != 0).float().mean()
        if self.grad_enabled:
            extras["final_obs"] = self._observations()
        if nonfinite is not None:
            extras["log"]["Diagnostics/nonfinite_actions"] = nonfinite.float()
        if self.sync_free:
            self._reset_done_masked(done, nan, extras)
        else:
            done_ids = done.nonzero(as_tuple=False).squeeze(-1)
            if done_ids.numel() > 0:
                for name in self.reward_weights:
                    extras["log"][f"Episode_Reward/{name}"] = self.episode_sums[name][done_ids].mean()
                extras["log"]["Diagnostics/nan_resets"] = nan.sum()
                if self.keep_final_obs and "final_obs" not in extras:
                    extras["final_obs"] = self._final_observations()
                self._reset(done_ids)
                if self._grad_state is not None:  # reset worlds start from a constant
                    sim_state = (self.sim.qpos, self.sim.qvel, self.sim.act)
                    self._grad_state = tuple(torch.where(done[:, None], s, x)
                                             for s, x in zip(sim_state, self._grad_state, strict=False))
        if self.randomization is not None:
            self.randomization.interval()  # interval terms (pushes, ...), after resets, before observing
            self._state_changed()
            if self._grad_state is not None:
                # a push changed the simulation's state: the differentiable state takes the change,
                # and its gradient path goes on through it
                sim_state = (self.sim.qpos, self.sim.qvel, self.sim.act)
                self._grad_state = tuple(x + (s - x.detach())
                                         for s, x in zip(sim_state, self._grad_state, strict=False))
        obs = self._observations()
        if self.step_observers and not _capturing(self.device):
            self.notify_step_observers()
        return obs, reward, terminated, time_outs, extras

    def step_reward_terms(self) -> dict[str, torch.Tensor]:
        """The last step's reward terms, each times its weight [num_envs] (zero in worlds whose
        state became non-finite), by name: what that step's reward summed."""
        return dict(self._step_terms[0])

    def notify_step_observers(self) -> None:
        """Run the step observers (after a step; envs/rsl_rl.py CapturedStep after a replay)."""
        for observer in self.step_observers:
            observer(self)

    def _final_observations(self) -> dict[str, torch.Tensor]:
        """The observation groups before the reset, with the draws they take replayed after."""
        draws = self.generator.get_state()
        obs = self._observations()
        self.generator.set_state(draws)
        return obs

    def _reset_done_masked(self, done: torch.Tensor, nan: torch.Tensor, extras: dict) -> None:
        """`step`'s resets without host synchronisation (sync_free): the logs are means over the
        finished worlds (NaN when none finished), and every world runs the reset, the finished
        ones keeping its result."""
        count = done.sum()
        ended = done.float()
        none = torch.full((), float("nan"), device=self.device)
        for name in self.reward_weights:
            mean = (self.episode_sums[name] * ended).sum() / count.clamp(min=1)
            extras["log"][f"Episode_Reward/{name}"] = torch.where(count > 0, mean, none)
        extras["log"]["Diagnostics/nan_resets"] = torch.where(count > 0, nan.sum().float(), none)
        if self.keep_final_obs and "final_obs" not in extras:
            extras["final_obs"] = self._final_observations()
        with self._rows_only(done) as every:
            self._reset(every)
        if self._grad_state is not None:  # reset worlds start from a constant
            sim_state = (self.sim.qpos, self.sim.qvel, self.sim.act)
            self._grad_state = tuple(torch.where(done[:, None], s, x)
                                     for s, x in zip(sim_state, self._grad_state, strict=False))

    def _row_state(self) -> dict[str, torch.Tensor]:
        """Every tensor with one row per world that a reset, a command draw or an interval term
        may write, by name: the simulation's state and per-world model parameters
        (`_sim_tensors`, and eq_active), the env's per-world tensors, and those of the objects
        of this package that the env holds (observation pipelines, actuator model, randomization
        timers)."""
        out = {**self._sim_tensors(), **self._per_world_tensors()}
        if getattr(self.sim.mj_model, "neq", 0):
            out["sim.eq_active"] = self.sim.eq_active
        n = self.num_envs
        for name, value in vars(self).items():
            if not type(value).__module__.startswith("envs.") or not hasattr(value, "__dict__"):
                continue
            for key, item in vars(value).items():
                items = item.items() if isinstance(item, dict) else [(None, item)]
                for sub, x in items:
                    if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[0] == n:
                        out[f"{name}.{key}" + (f".{sub}" if sub is not None else "")] = x
        return out

    @contextlib.contextmanager
    def _rows_only(self, rows: torch.Tensor, only: tuple[str, ...] | None = None):
        """Run the body for every world (it gets their ids), then put back the rows of the worlds
        not in `rows` (bool [num_envs]) in every tensor of `_row_state` (or those named in `only`,
        when the body writes no other): the body's writes reach only those worlds, without host
        synchronisation. The rows are in `_reset_rows` meanwhile."""
        def state():
            tensors = self._row_state()
            return tensors if only is None else {k: tensors[k] for k in only}

        before = {k: v.detach().clone() for k, v in state().items()}
        self._reset_rows = rows
        try:
            yield self._every_world
        finally:
            self._reset_rows = None
        for key, value in state().items():
            old = before.get(key)
            if old is not None and old.shape == value.shape:
                value.copy_(torch.where(rows.view(-1, *[1] * (value.dim() - 1)), value, old))

    def set_sync_free(self, enabled: bool = True) -> None:
        """Make `step` free of host synchronisation (see the module docstring), or not.
        ValueError naming what the task uses that needs the host."""
        if enabled:
            problems = self._sync_free_problems()
            if problems:
                raise ValueError(f"{type(self).__name__} cannot step without host synchronisation: "
                                 + "; ".join(problems))
        self.sync_free = bool(enabled)
        if isinstance(self.sim, Sim):  # its overflow flags are read by raise_deferred_errors instead
            self.sim.auto_check_overflow = not self.sync_free

    def _sync_free_problems(self) -> list[str]:
        """What keeps this env from stepping without host synchronisation (a subclass adds its own)."""
        out = []
        if not isinstance(self.sim, Sim):
            out.append("the MuJoCo backend (sim.backend=mujoco) steps on the host")
        if self.randomization is not None:
            out += self.randomization.sync_free_problems()
        return out

    def raise_deferred_errors(self) -> None:
        """sync_free: with nonfinite_actions="error", raise the ValueError `step` would have
        raised for non-finite actions since the last call; then read the Sim's overflow flags of
        the last physics step (`Sim.check_overflow`: a RuntimeWarning the first time, with
        `strict` an OverflowError), which a step replayed as a CUDA graph does not read. One host
        synchronisation (two reads); the runners call it once per iteration."""
        count = int(self._deferred_nonfinite)
        if count:
            self._deferred_nonfinite.zero_()
            raise ValueError(f"actions contained NaN or inf in {count} world-steps since the last check; the "
                             f"policy has probably diverged (the steps replaced them by 0: sync_free). Set "
                             f"nonfinite_actions='zero' (task.env.nonfinite_actions=zero) to replace them by 0 "
                             f"and count them in Diagnostics/nonfinite_actions instead")
        if isinstance(self.sim, Sim):
            self.sim.check_overflow()

    def _physics_grad(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """`decimation` steps of `simrl.diff_step` from the current (differentiable) state; the
        simulation's own state follows, detached. Returns the worlds whose state is not finite, and
        what outgrew a budget of the Sim in any of the steps (None with the MuJoCo backend)."""
        from simrl.diff import diff_step

        sim = self.sim
        views = (sim.qpos, sim.qvel, sim.act) if sim.na else (sim.qpos, sim.qvel)
        state = self._grad_state if self._grad_state is not None else tuple(x.clone() for x in views)
        overflow = torch.zeros_like(sim.overflow) if isinstance(sim, Sim) else None
        for _ in range(self.decimation):
            self._substep_start = state
            ctrl = self._ctrl(actions).to(sim.ctrl.dtype)
            if sim.na:
                state = diff_step(sim, state[0], state[1], ctrl, act0=state[2], check_finite=False)
            else:
                state = diff_step(sim, state[0], state[1], ctrl, check_finite=False)
            if overflow is not None:
                overflow |= sim.overflow
        with torch.no_grad():
            if self.outputs_in_grad:
                # the outputs (contacts, sensors, actuator forces, poses) the plain step leaves: those
                # of the state its last physics step started from (mj_step's forward pass)
                for view, x in zip(views, self._substep_start, strict=True):
                    view.copy_(x)
                sim.ctrl.copy_(ctrl)
                warmstart = sim.view("qacc_warmstart").clone()
                sim.forward()
                sim.view("qacc_warmstart").copy_(warmstart)
            for view, x in zip(views, state, strict=True):
                view.copy_(x)
            sim.ctrl.copy_(ctrl)
        self._grad_state = state
        return ~(torch.isfinite(state[0]).all(dim=1) & torch.isfinite(state[1]).all(dim=1)), overflow

    def _reset(self, env_ids: torch.Tensor) -> None:
        self.sim.reset(env_ids)
        self._reset_envs(env_ids)
        if self.randomization is not None:  # reset terms before the forward pass: they change the model
            self.randomization.reset(env_ids)
        if self.action_delay is not None:
            self.action_history[env_ids] = 0.0
        if getattr(self, "actuator_model", None) is not None:
            self.actuator_model.reset(env_ids)
        if self.observed_outputs:
            self._forward_reset_worlds(env_ids)
        self.episode_length_buf[env_ids] = 0
        if self._grad_state is not None and self._reset_rows is None and env_ids.numel() == self.num_envs:
            self._grad_state = None  # a full reset: every world starts from the simulation's state
        if self.actions.requires_grad:  # a differentiable step's actions: keep them off the graph from here
            self.actions = self.actions.detach().clone()
        self.actions[env_ids] = 0.0
        for sums in self.episode_sums.values():
            sums[env_ids] = 0.0

    def _forward_reset_worlds(self, env_ids: torch.Tensor) -> None:
        """`sim.forward(worlds=...)` for the worlds `env_ids` just reset: their outputs (the
        `observed_outputs`, qacc) take the values of their reset state; the other worlds are not
        computed and keep theirs, and every world keeps its solver warm start, as mj_forward
        would (see the module docstring). Without host synchronisation (a bool mask of worlds)."""
        sim = self.sim
        reset = self._reset_rows
        if reset is None:
            reset = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
            reset[env_ids] = True
        warmstart = sim.view("qacc_warmstart").clone()
        sim.forward(worlds=reset)
        sim.view("qacc_warmstart").copy_(warmstart)

    def check_action_layout(self, actions) -> None:
        """TypeError or ValueError unless `actions` is a floating point torch.Tensor of shape
        [num_envs, num_actions] on the env's device (checked on the host, without the values)."""
        if not isinstance(actions, torch.Tensor):
            raise TypeError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
        if actions.shape != (self.num_envs, self.num_actions):
            raise ValueError(f"actions must have shape ({self.num_envs}, {self.num_actions}) "
                             f"[num_envs, num_actions], got {tuple(actions.shape)}")
        if actions.device != self.device:
            raise ValueError(f"actions must be on device {self.device}, got a tensor on {actions.device}")
        if not actions.is_floating_point():
            raise TypeError(f"actions must be a floating point tensor, got dtype {actions.dtype}")

    def _check_actions(self, actions) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Check type, shape, device and dtype; handle non-finite entries as configured. Returns
        the actions to apply and, with nonfinite_actions="zero", the number of worlds whose
        actions were repaired (a device tensor, no synchronisation)."""
        self.check_action_layout(actions)
        if self.nonfinite_actions == "zero":
            finite = torch.isfinite(actions)
            bad_worlds = (~finite).any(dim=1).sum()
            self.nonfinite_action_count += bad_worlds
            return torch.where(finite, actions, torch.zeros_like(actions)), bad_worlds
        if self.sync_free:  # repaired now, raised by raise_deferred_errors
            finite = torch.isfinite(actions)
            self._deferred_nonfinite += (~finite).any(dim=1).sum()
            return torch.where(finite, actions, torch.zeros_like(actions)), None
        if not torch.isfinite(actions).all():  # one host synchronisation per step on a GPU
            bad = ~torch.isfinite(actions)
            worlds = bad.any(dim=1).nonzero().squeeze(-1).tolist()
            raise ValueError(f"actions contain NaN or inf ({int(bad.sum())} entries in {len(worlds)} of "
                             f"{self.num_envs} worlds, e.g. world {worlds[0]}); the policy has probably "
                             f"diverged. Set nonfinite_actions='zero' (task.env.nonfinite_actions=zero) to "
                             f"replace them by 0 and count them in Diagnostics/nonfinite_actions instead")
        return actions, None

    # ------------------------------------------------------------------------------ state
    def _per_world_tensors(self) -> dict[str, torch.Tensor]:
        """Every tensor attribute of the env with a leading num_envs axis (and those inside
        dict attributes, such as episode_sums), by name: the env's per-world state."""
        out = {}
        for name, value in vars(self).items():
            if isinstance(value, torch.Tensor) and value.dim() >= 1 and value.shape[0] == self.num_envs:
                out[name] = value
            elif isinstance(value, dict):
                for key, item in value.items():
                    if isinstance(item, torch.Tensor) and item.dim() >= 1 and item.shape[0] == self.num_envs:
                        out[f"{name}.{key}"] = item
        return out

    def _sim_tensors(self) -> dict[str, torch.Tensor]:
        import warp as wp

        from simrl.sim.model import PER_WORLD_FIELDS

        out = {f"sim.{name}": self.sim.view(name) for name in self.SIM_STATE}
        if self.sim.mj_model.nsensordata:  # what the next observation reads of the sensors
            out["sim.sensordata"] = self.sim.sensordata
        if self.sim.mj_model.na:  # actuator activations (dyntype integrator, filter, filterexact)
            out["sim.act"] = self.sim.view("act")
        if self.sim.mj_model.nmocap:  # the poses of mocap bodies, which users set between steps
            out.update({f"sim.{name}": self.sim.view(name) for name in ("mocap_pos", "mocap_quat")})
        if not isinstance(self.sim, Sim):  # the MuJoCo backend
            return {**out, **{f"model.{k}": v for k, v in self.sim.per_world_params().items()}}
        struct = self.sim.model.struct
        views = self.__dict__.setdefault("_model_views", {})  # torch views, made once per array
        for name in PER_WORLD_FIELDS:  # per-world model parameters (domain randomization)
            array = getattr(struct, name, None)
            if isinstance(array, wp.array) and array.shape[0] == self.num_envs and self.num_envs > 1:
                if views.get(name, (None,))[0] is not array:
                    views[name] = (array, wp.to_torch(array, requires_grad=False))
                out[f"model.{name}"] = views[name][1]
        return out

    def state_dict(self) -> dict:
        """A copy of everything the next `step` depends on: simulation state, per-world model
        parameters, per-world env tensors, the random generator, the non-finite action count."""
        tensors = {**self._sim_tensors(), **self._per_world_tensors()}
        return {"num_envs": self.num_envs, "num_actions": self.num_actions,
                "tensors": {k: v.detach().clone() for k, v in tensors.items()},
                "generator": self.generator.get_state(), "seed": self._seed,
                "nonfinite_action_count": self.nonfinite_action_count.clone(),
                "shared": {k: v.detach().clone() if isinstance(v, torch.Tensor) else v
                           for k, v in self._shared_state().items()}}

    def load_state_dict(self, state: dict) -> None:
        """Restore a `state_dict()` of an env of the same task, num_envs and configuration, in
        place (tensors that are views of the simulation stay views). Raises ValueError naming
        the first mismatch; nothing is changed then."""
        if state.get("num_envs") != self.num_envs or state.get("num_actions") != self.num_actions:
            raise ValueError(f"env state is for {state.get('num_envs')} envs with {state.get('num_actions')} "
                             f"actions, this env has {self.num_envs} with {self.num_actions}")
        if self.actions.requires_grad:  # a differentiable step's actions: off the graph, to be overwritten
            self.actions = self.actions.detach().clone()
        mine = {**self._sim_tensors(), **self._per_world_tensors()}
        saved = self._upgraded(state["tensors"], mine)
        # attributes a subclass creates on the first step (not yet here) are set from the state
        lazy = {k for k in set(saved) - set(mine) if "." not in k and not hasattr(self, k)}
        missing = sorted((set(mine) ^ set(saved)) - lazy)
        if missing:
            raise ValueError(f"env state does not match this env (differs in: {', '.join(missing)})")
        for key in saved.keys() - lazy:
            if saved[key].shape != mine[key].shape or saved[key].dtype != mine[key].dtype:
                raise ValueError(f"env state {key}: saved {tuple(saved[key].shape)} {saved[key].dtype}, "
                                 f"this env {tuple(mine[key].shape)} {mine[key].dtype}")
        shared = state.get("shared", {})  # absent from env states saved before it was kept
        self._check_shared_state(shared)
        for key, value in saved.items():
            if key in lazy:
                setattr(self, key, value.to(self.device).clone())
            else:
                mine[key].copy_(value)
        self.generator.set_state(state["generator"].cpu())  # a generator's state lives on the host
        self._seed = int(state.get("seed", self._seed))  # the per-world streams (rand_worlds)
        self.nonfinite_action_count.copy_(state["nonfinite_action_count"])
        for key, value in shared.items():
            self._load_shared_state(key, value)
        if not isinstance(self.sim, Sim):  # the MuJoCo backend: per-world MjModels derive from the values
            self.sim.set_const()
        self._grad_state = None  # with enable_grad: the next step starts from the loaded state
        self._state_loaded()

    #: per-world state added since earlier versions saved env states (kept at this env's values
    #: when a saved state lacks them) and state they saved that is no longer kept (dropped)
    STATE_ADDED = ("actuator_state.", "randomization_timers.")
    STATE_REMOVED = ("env_friction",)  # the quadruped's friction: now the model's per-world cpair_friction

    def _upgraded(self, saved: dict, mine: dict) -> dict:
        """`saved` made loadable when it comes from an earlier version of the env (a checkpoint
        written before the randomization terms and actuator models): with a warning."""
        added = [k for k in mine if k not in saved and k.startswith(self.STATE_ADDED)]
        removed = [k for k in saved if k not in mine and k in self.STATE_REMOVED]
        if not added and not removed:
            return saved
        import warnings

        warnings.warn(f"env state from an earlier version of {type(self).__name__}: "
                      f"{', '.join(added) or 'nothing'} kept at this env's values, {', '.join(removed) or 'nothing'} "
                      "dropped (interval randomization terms such as pushes restart their timers)", stacklevel=3)
        upgraded = {k: v for k, v in saved.items() if k not in removed}
        upgraded.update({k: mine[k].detach().clone() for k in added})
        return upgraded

    def _state_loaded(self) -> None:
        """Called after `load_state_dict`: a subclass drops anything cached from the old state."""

    def _shared_state(self) -> dict:
        """State shared by every world that the next steps depend on (e.g. a command
        curriculum's velocity ranges and step counter), by name: tensors, ints or floats.
        `state_dict` saves it, `load_state_dict` gives each entry to `_load_shared_state`."""
        return {}

    def _check_shared_state(self, shared: dict) -> None:
        """ValueError naming the first entry of a saved `_shared_state` this env cannot take."""
        mine = self._shared_state()
        for key, value in shared.items():
            if key not in mine:
                raise ValueError(f"env state holds shared state {key!r}, which {type(self).__name__} does not keep "
                                 f"(it keeps: {', '.join(mine) or 'none'})")
            if isinstance(mine[key], torch.Tensor) and (not isinstance(value, torch.Tensor)
                                                        or tuple(value.shape) != tuple(mine[key].shape)):
                raise ValueError(f"env state {key}: saved {tuple(getattr(value, 'shape', ()))}, "
                                 f"this env {tuple(mine[key].shape)}")

    def _load_shared_state(self, key: str, value) -> None:
        """Restore one entry of `_shared_state` (checked by `_check_shared_state`): a tensor is
        copied into the attribute of that name, anything else set."""
        mine = getattr(self, key)
        if isinstance(mine, torch.Tensor):
            mine.copy_(value)
        else:
            setattr(self, key, type(mine)(value))

    # ------------------------------------------------------------------------ for subclasses
    def _apply_actions(self, actions: torch.Tensor) -> None:
        self.sim.ctrl[:] = self._ctrl(actions).to(self.sim.ctrl.dtype)

    def _ctrl(self, actions: torch.Tensor) -> torch.Tensor:
        """The controls [num_envs, nu] for `actions`, with torch operations (differentiable)."""
        raise NotImplementedError

    def _state_changed(self) -> None:
        """Called after the interval terms ran (they may have changed the state, e.g. a push):
        a subclass drops what it computed from the state before."""

    def _pre_physics(self) -> None:
        """Called in `step` before the physics runs (e.g. to keep the position a velocity
        reward differences against)."""

    def _observations(self) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def terminations(self) -> dict[str, torch.Tensor]:
        """The termination terms' values [num_envs] bool of the current state, by name."""
        return {name: term(self) for name, term in self.termination_terms.items()}

    def terminated(self) -> torch.Tensor:
        """[num_envs] bool: the current state fails (any termination term; time-outs aside)."""
        return self._terminated()

    def _terminated(self) -> torch.Tensor:
        values = self.terminations()
        #: the last terminations() (simrl.rl.evaluate counts the falls by cause); a read-only
        #: mapping, not a dict: no step depends on it, so it is no part of state_dict()
        self.termination_causes = types.MappingProxyType(values)
        if not values:
            return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return functools.reduce(torch.logical_or, values.values())

    def _reset_envs(self, env_ids: torch.Tensor) -> None:
        raise NotImplementedError


#: simulation backends an environment can run on (`backend=` of every env, `sim.backend=` on
#: the command line)
BACKENDS = ("warp", "mujoco")


def make_sim(mjm, num_worlds: int, device=None, dtype: str = "float32", backend: str = "warp",
             njmax: int | None = None, strict: bool = False, nconmax: int | None = None):
    """The simulation an environment runs on: `simrl.Sim` (backend "warp", this engine, in
    `dtype`) or `simrl.mujoco_sim.MujocoSim` (backend "mujoco": MuJoCo itself, one MjData per
    world, CPU only). MuJoCo computes in double precision whatever `dtype` says, so with
    "mujoco" the simulation's tensors are float64 (the environments convert what they read).

    `njmax` (constraint rows per world; None: the model's default), `nconmax` (contact slots per
    world, for the pairs the broadphase keeps; None: the model's default) and `strict` (raise
    OverflowError, not warn, when a world outgrows a budget) are the Sim's (the environments'
    keyword arguments of the same names, a task's `sim.njmax`, `sim.nconmax` and `sim.strict`);
    MuJoCo has no budgets, and refuses them."""
    if backend == "warp":
        return Sim.from_model(mjm, num_worlds=num_worlds, device=device, dtype=dtype, njmax=njmax, strict=strict,
                              nconmax=nconmax)
    if backend == "mujoco":
        from simrl.mujoco_sim import MujocoSim

        if njmax is not None or nconmax is not None or strict:
            raise ValueError(f"njmax={njmax!r}, nconmax={nconmax!r}, strict={strict!r}: MuJoCo (backend 'mujoco') has "
                             f"no constraint-row or contact budget; leave njmax=None, nconmax=None and "
                             f"strict=False, or use backend 'warp'")

        if dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        return MujocoSim(mjm, num_worlds=num_worlds, device=device)
    raise ValueError(f"unknown simulation backend {backend!r}; available: {', '.join(BACKENDS)}")


def per_world_param(sim: Sim, name: str) -> torch.Tensor:
    """Give the model parameter `name` its own value in every world (domain randomization) and
    return a writable torch view [num_worlds, ...]: `Sim.per_world_param` (fields of
    simrl.sim.model.PER_WORLD_FIELDS) or `MujocoSim.per_world_param` (those of
    simrl.mujoco_sim.PER_WORLD_PARAMS). Changed masses, inertias or armature need
    `sim.set_const()` afterwards (envs.randomization calls it)."""
    return sim.per_world_param(name)
