"""Short-Horizon Actor-Critic (SHAC): policy learning through the differentiable simulator.

Xu, Makoviychuk, Narang, Ramos, Matusik, Garg, Macklin: "Accelerated Policy Learning with
Parallel Differentiable Simulation", ICLR 2022. One iteration, in the order it runs:

1. Freeze the observation normalisers for the window (`_Normalizer.frozen`).
2. Roll the policy out for `horizon` steps through `env.step` with gradients on
   (`BatchedEnv.enable_grad`: the physics runs through `simrl.diff_step`). The actor's loss is
   minus the mean over worlds of the discounted reward sum of each episode piece in the window,
   plus gamma^k times the target critic's value of the state where the piece ends: at the end
   of the window, or at a time-out (the value of the state reached, `extras["final_obs"]`);
   the value is zero where an episode terminated (failure).
3. Backpropagate through the whole window, clip the actor's gradient to norm `grad_norm`, and
   take an Adam step; a gradient that is not finite is not applied but counted
   (`skipped_steps`).
4. Critic: TD(lambda) targets of the window computed with the target critic's values, then
   `critic_iterations` passes of minibatch regression; the target critic follows by Polyak
   averaging, target <- alpha target + (1 - alpha) critic.
5. Detach the simulation state: the next window starts from where this one ended, with the
   gradient path cut (truncated backpropagation through time).

The policy is a Gaussian whose mean is an MLP of the normalised observation; actions are
tanh of a reparameterised sample (the mean at evaluation), so they lie in [-1, 1].
"""

import contextlib
import copy
import math
import os
import time
from collections.abc import Mapping

import torch
from torch import nn

from simrl.errors import CheckpointError
from simrl.rl import distributed
from simrl.rl.checkpoint import atomic_torch_save, check_identity, load_checkpoint, rng_state, set_rng_state
from simrl.rl.config import ACTIVATIONS, RUN_KEYS, ShacCfg
from simrl.rl.episodes import EpisodeRing
from simrl.rl.runlog import mean_text

CHECKPOINT_FORMAT = 1

def mlp(sizes: list[int], activation: str) -> nn.Sequential:
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(getattr(nn, ACTIVATIONS[activation])())
    return nn.Sequential(*layers)


class _Normalizer(nn.Module):
    """Running mean and variance of observations (Chan et al.'s parallel update), applied as
    (x - mean) / sqrt(var + eps). `frozen()` is a copy that does not change during a window.
    Under torchrun an update pools the samples of all ranks, so the normalisers stay equal."""

    def __init__(self, size: int, enabled: bool = True, eps: float = 1e-5):
        super().__init__()
        self.enabled, self.eps = enabled, eps
        self.register_buffer("mean", torch.zeros(size))
        self.register_buffer("var", torch.ones(size))
        self.register_buffer("count", torch.tensor(1e-4))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        if not self.enabled:
            return
        x = x.reshape(-1, x.shape[-1])
        x = x[torch.isfinite(x).all(dim=1)]
        n = x.shape[0]
        mean = x.mean(dim=0) if n else torch.zeros_like(self.mean)
        var = x.var(dim=0, unbiased=False) if n else torch.zeros_like(self.var)
        n, mean, var = distributed.reduce_moments(n, mean, var)  # the samples of every rank (torchrun)
        if n == 0:
            return
        total = self.count + n
        delta = mean - self.mean
        self.var.copy_((self.var * self.count + var * n + delta.square() * self.count * n / total) / total)
        self.mean.add_(delta * n / total)
        self.count.copy_(total)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return x
        return (x - self.mean) / torch.sqrt(self.var + self.eps)

    def frozen(self) -> "_Normalizer":
        return copy.deepcopy(self).requires_grad_(False)


class Actor(nn.Module):
    """Gaussian policy: mean = MLP(normalised obs), a learned log standard deviation per action."""

    def __init__(self, num_obs: int, num_actions: int, hidden: list[int], activation: str, init_log_std: float):
        super().__init__()
        self.mean = mlp([num_obs, *hidden, num_actions], activation)
        self.log_std = nn.Parameter(torch.full((num_actions,), float(init_log_std)))

    def forward(self, obs: torch.Tensor, deterministic: bool = False) -> torch.Tensor:
        mean = self.mean(obs)
        if deterministic:
            return torch.tanh(mean)
        return torch.tanh(mean + torch.randn_like(mean) * self.log_std.exp())  # reparameterised


class InferencePolicy(nn.Module):
    """What play.py evaluates and exports: normalise the observation, the actor's mean, tanh."""

    def __init__(self, normalizer: _Normalizer, actor: Actor):
        super().__init__()
        self.normalizer = copy.deepcopy(normalizer)
        self.actor = copy.deepcopy(actor.mean)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.actor(self.normalizer(obs)))


def td_lambda_targets(rewards, next_values, ends, gamma: float, lam: float) -> torch.Tensor:
    """TD(lambda) returns [H, N] of a window: G_i = r_i + gamma ((1 - lam) V_{i+1} + lam G_{i+1}),
    and G_i = r_i + gamma V_{i+1} where a piece ends (`ends[i]`: done, or the window's last step).
    `next_values[i]` is the value of the state reached by step i (0 after a termination)."""
    targets = torch.zeros_like(rewards)
    following = torch.zeros_like(rewards[0])
    for i in reversed(range(rewards.shape[0])):
        blended = (1.0 - lam) * next_values[i] + lam * following
        targets[i] = rewards[i] + gamma * torch.where(ends[i], next_values[i], blended)
        following = targets[i]
    return targets


class ShacRunner:
    """SHAC on a `BatchedEnv` with a differentiable step (`env.differentiable`); the same
    interface as the PPO runner for scripts/train.py and scripts/play.py: `learn`, `save`,
    `load`, `get_inference_policy`, `request_stop`, the learning `curve`.

    Under torchrun (an initialised process group), each rank steps its own worlds; `learn`
    first copies rank 0's networks and normalisers to every rank, and each actor and critic
    step averages the gradients of all ranks, so the networks stay identical. Only rank 0
    prints, logs and saves (pass `log_dir=None` on the others)."""

    def __init__(self, env, cfg: Mapping | ShacCfg, log_dir: str | None, device: str, key_terms: list[str],
                 task: str | None = None, max_iterations: int | None = None):
        """`cfg`: a task's `shac` section (a ShacCfg), or a mapping of the runner's settings (over
        ShacCfg's defaults; the RUN_KEYS are the training driver's and refused here)."""
        if not getattr(env, "differentiable", False):
            raise ValueError(f"algo=shac needs a differentiable task; {type(env).__name__} has no differentiable step "
                             f"(differentiable tasks: cartpole, cartpole_swingup, ant, and the legged tasks with "
                             f"observation_source=state)")
        env.enable_grad(True)  # what the task cannot differentiate as configured: refused now, not at learn()
        env.enable_grad(False)
        if not isinstance(cfg, ShacCfg):
            unknown = set(cfg) - (set(ShacCfg.keys()) - set(RUN_KEYS))
            if unknown:
                raise ValueError(f"unknown SHAC settings: {', '.join(sorted(unknown))}")
            cfg = ShacCfg.from_dict(cfg)
        self.cfg = cfg
        self.env, self.device, self.log_dir = env, device, log_dir
        sync_free = self.cfg.sync_free
        if sync_free == "auto":
            sync_free = str(device).startswith("cuda")
        if sync_free:
            env.set_sync_free()
        self.world_size = distributed.world_size()
        self.rank = distributed.rank()
        self.key_terms = key_terms
        self.task = task or getattr(env, "name", None)
        c = self.cfg
        obs = env.reset()
        num_obs, num_critic_obs = obs["policy"].shape[1], obs["critic"].shape[1]
        self.actor = Actor(num_obs, env.num_actions, list(c.actor_hidden_dims), c.activation, c.init_log_std).to(device)
        self.critic = mlp([num_critic_obs, *c.critic_hidden_dims, 1], c.activation).to(device)
        self.target_critic = copy.deepcopy(self.critic).requires_grad_(False)
        self.obs_normalizer = _Normalizer(num_obs, c.obs_normalization).to(device)
        self.critic_obs_normalizer = _Normalizer(num_critic_obs, c.obs_normalization).to(device)
        betas = tuple(c.betas)
        self.actor_optimizer = torch.optim.Adam(self.actor.parameters(), lr=c.actor_learning_rate, betas=betas)
        self.critic_optimizer = torch.optim.Adam(self.critic.parameters(), lr=c.critic_learning_rate, betas=betas)
        self.max_iterations = max_iterations

        n = env.num_envs
        self.episode_return = torch.zeros(n, device=device)
        self.episode_length = torch.zeros(n, device=device)
        self.finished = EpisodeRing(100, device)  # the last 100 episodes' returns and lengths
        self.episode_terms: dict[str, list[torch.Tensor]] = {}
        self.completed_iterations = 0
        self.skipped_steps = 0
        self.grad_norms: list[float] = []  # the last 100 windows' actor gradient norms (before clipping)
        self.env_steps = 0
        self.curve: list[dict] = []
        #: callables whose text ends each progress line (e.g. the viewer's cost)
        self.progress_notes: list = []
        self._time_offset = 0.0
        self.stop_requested = False
        self.stopped_early = False
        self.last_checkpoint: str | None = None
        self.resume_notes: list[str] = []
        self.writer = None
        if log_dir is not None:
            from torch.utils.tensorboard import SummaryWriter

            self.writer = SummaryWriter(log_dir=log_dir, flush_secs=10)

    @property
    def current_learning_iteration(self) -> int:
        """The index of the next iteration (as rsl-rl's runner calls it)."""
        return self.completed_iterations

    # --------------------------------------------------------------------------- training
    def request_stop(self) -> None:
        """Finish the current iteration, save a checkpoint and return from `learn`."""
        self.stop_requested = True

    def _learning_rates(self, iteration: int, total: int) -> None:
        if self.cfg.lr_schedule != "linear":
            return
        frac = max(0.0, 1.0 - iteration / max(total, 1))
        for opt, key in ((self.actor_optimizer, "actor_learning_rate"),
                         (self.critic_optimizer, "critic_learning_rate")):
            for group in opt.param_groups:
                group["lr"] = getattr(self.cfg, key) * frac

    def learn(self, num_learning_iterations: int) -> None:
        env, c = self.env, self.cfg
        env.enable_grad(True)
        # the learning-rate schedule spans the planned run (a resumed run: what is done plus what is asked)
        total = max(self.max_iterations or 0, self.completed_iterations + num_learning_iterations)
        first = self.completed_iterations
        start = time.time()
        self.stopped_early = False
        distributed.broadcast_modules(self.actor, self.critic, self.target_critic, self.obs_normalizer,
                                      self.critic_obs_normalizer)
        try:
            for it in range(first, first + num_learning_iterations):
                t0 = time.time()
                self._learning_rates(it, total)
                stats = self._iteration()
                self.completed_iterations = it + 1
                self._log(it, first, first + num_learning_iterations, time.time() - t0, time.time() - start, stats)
                last = it + 1 == first + num_learning_iterations
                self.stop_requested = distributed.any_rank(self.stop_requested, self.device)
                if self.log_dir is not None and (self.completed_iterations % c.save_interval == 0 or last
                                                 or self.stop_requested):
                    self.save(os.path.join(self.log_dir, f"model_{it}.pt"))
                if self.stop_requested and not last:
                    self.stopped_early = True
                    break
        finally:
            self.stop_requested = False
            env.enable_grad(False)
            if self.writer is not None:
                self.writer.flush()

    def _iteration(self) -> dict:
        env, c = self.env, self.cfg
        H, N = c.horizon, env.num_envs
        gamma = c.gamma
        obs_norm, critic_norm = self.obs_normalizer.frozen(), self.critic_obs_normalizer.frozen()
        env.detach_state()
        obs = env.observations()

        critic_obs = torch.zeros(H, N, critic_norm.mean.shape[0], device=self.device)
        rewards = torch.zeros(H, N, device=self.device)
        next_values = torch.zeros(H, N, device=self.device)
        ends = torch.zeros(H, N, dtype=torch.bool, device=self.device)
        raw_policy_obs, raw_critic_obs, window_actions = [], [], []

        loss = torch.zeros((), device=self.device)
        reward_sum = torch.zeros(N, device=self.device)  # discounted, since the piece began
        discount = torch.ones(N, device=self.device)
        for i in range(H):
            raw_policy_obs.append(obs["policy"].detach())
            raw_critic_obs.append(obs["critic"].detach())
            critic_obs[i] = critic_norm(raw_critic_obs[-1])
            actions = self.actor(obs_norm(obs["policy"]))
            actions.retain_grad()  # the gradient health diagnostics read d loss / d actions per world
            window_actions.append(actions)
            obs, reward, terminated, time_outs, extras = env.step(actions)
            self._track_episodes(reward.detach(), terminated | time_outs, extras)
            reward = reward * c.reward_scale
            done = terminated | time_outs
            end = done if i < H - 1 else torch.ones_like(done)
            value = self.target_critic(critic_norm(extras["final_obs"]["critic"])).squeeze(-1)
            value = torch.where(terminated, torch.zeros_like(value), value)  # a failure has no future
            reward_sum = reward_sum + discount * reward
            piece = reward_sum + gamma * discount * value
            loss = loss - torch.where(end, piece, torch.zeros_like(piece)).sum()
            rewards[i], next_values[i], ends[i] = reward.detach(), value.detach(), end
            discount = torch.where(done, torch.ones_like(discount), discount * gamma)
            reward_sum = torch.where(done, torch.zeros_like(reward_sum), reward_sum)
        loss = loss / (H * N)
        if env.sync_free:
            env.raise_deferred_errors()  # a non-finite action of the window (one synchronisation)

        # actor step
        self.actor_optimizer.zero_grad(set_to_none=True)
        loss.backward()
        distributed.average_gradients(self.actor.parameters())  # the mean over all ranks' worlds
        grad_norm = torch.nn.utils.clip_grad_norm_(self.actor.parameters(), c.grad_norm)
        health = self._gradient_health(window_actions, float(grad_norm))
        skipped = not bool(torch.isfinite(grad_norm))
        if skipped:
            self.skipped_steps += 1
            self.actor_optimizer.zero_grad(set_to_none=True)
        else:
            self.actor_optimizer.step()
        env.detach_state()

        # critic: TD(lambda) targets, minibatch regression, Polyak-averaged target network
        targets = td_lambda_targets(rewards, next_values, ends, gamma, c.lam)
        valid = torch.isfinite(targets) & torch.isfinite(critic_obs).all(dim=-1)
        x, y = critic_obs[valid], targets[valid]
        critic_loss = torch.zeros((), device=self.device)
        # a fixed number of minibatches, so that every rank takes the same number of steps
        for _ in range(c.critic_iterations):
            order = torch.randperm(x.shape[0], device=self.device)
            for ids in torch.tensor_split(order, c.critic_mini_batches):
                predicted = self.critic(x[ids]).squeeze(-1)
                critic_loss = (predicted - y[ids]).square().mean() if ids.numel() else predicted.sum() * 0.0
                self.critic_optimizer.zero_grad(set_to_none=True)
                critic_loss.backward()
                distributed.average_gradients(self.critic.parameters())
                torch.nn.utils.clip_grad_norm_(self.critic.parameters(), c.grad_norm)
                self.critic_optimizer.step()
        with torch.no_grad():
            alpha = c.target_critic_alpha
            for target, source in zip(self.target_critic.parameters(), self.critic.parameters(), strict=True):
                target.mul_(alpha).add_(source, alpha=1.0 - alpha)

        # normalisers learn from the window (they were frozen while it ran)
        self.obs_normalizer.update(torch.stack(raw_policy_obs))
        self.critic_obs_normalizer.update(torch.stack(raw_critic_obs))
        self.env_steps += H * N * self.world_size
        return {"actor_loss": float(loss.detach()), "critic_loss": float(critic_loss.detach()),
                "grad_norm": float(grad_norm), "skipped": skipped, **health}

    def _gradient_health(self, window_actions: list[torch.Tensor], grad_norm: float) -> dict:
        """The window's gradient health: `world_grad_cv`, the spread over worlds of each world's
        |d loss / d actions| over the window (standard deviation over mean: near 0 when every world
        pulls alike, large when a few worlds' contacts dominate), and `exploding_share`, the share
        of the last 100 windows whose actor gradient norm (before clipping) was not finite or above
        10 times the median of those windows' norms (the median once 10 windows ran)."""
        grads = [a.grad for a in window_actions if a.grad is not None]
        cv = float("nan")
        if grads:
            per_world = torch.stack([g.float().square().sum(dim=1) for g in grads]).sum(dim=0).sqrt()
            finite = per_world[torch.isfinite(per_world)]
            if finite.numel() > 1 and float(finite.mean()) > 0:
                cv = float(finite.std() / finite.mean())
        self.grad_norms.append(grad_norm)
        del self.grad_norms[:-100]
        norms = torch.tensor(self.grad_norms, dtype=torch.float64)
        median = float(norms[torch.isfinite(norms)].median()) if torch.isfinite(norms).any() else float("nan")
        exploding = ~torch.isfinite(norms)
        if norms.numel() >= 10:
            exploding |= norms > 10.0 * median
        return {"world_grad_cv": cv, "exploding_share": float(exploding.double().mean())}

    def _track_episodes(self, reward, done, extras) -> None:
        self.episode_return += torch.where(torch.isfinite(reward), reward, torch.zeros_like(reward))
        self.episode_length += 1
        # on the device, masked: no host synchronisation per step
        self.finished.add(done, self.episode_return, self.episode_length)
        self.episode_return.masked_fill_(done, 0.0)
        self.episode_length.masked_fill_(done, 0.0)
        for key in self.key_terms:
            if key in extras["log"]:
                self.episode_terms.setdefault(key, []).append(torch.as_tensor(extras["log"][key]).detach())

    def _notes(self) -> str:
        """The progress line's notes (progress_notes), each after two spaces."""
        return "".join(f"  {text}" for text in (note() for note in self.progress_notes) if text)

    def _log(self, it: int, first: int, total: int, iteration_time: float, elapsed: float, stats: dict) -> None:
        """One progress line and TensorBoard scalars (rank 0: its own episodes; steps/s of all ranks)."""
        steps = self.cfg.horizon * self.env.num_envs * self.world_size
        mean_return, mean_length = self.finished.means()
        # (a sync-free env logs NaN on the steps where no episode ended: left out, as the indexed
        # step leaves those steps' entries out)
        terms = {k.split("/")[-1]: float(torch.nanmean(torch.stack(v).float()))
                 for k, v in self.episode_terms.items() if v}
        terms = {k: v for k, v in terms.items() if not math.isnan(v)}
        self.episode_terms = {}
        self.curve.append({"iteration": it, "env_steps": self.env_steps, "seconds": self._time_offset + elapsed,
                           "mean_return": mean_return, "mean_episode_length": mean_length})
        done = it + 1 - first
        eta = elapsed / done * (total - first - done)
        if self.rank != 0:
            return
        term_text = " ".join(f"{k}={v:.3g}" for k, v in terms.items())
        skipped = f"  skipped {self.skipped_steps}" if self.skipped_steps else ""
        print(f"it {it + 1:5d}/{total}  {steps / max(iteration_time, 1e-9):8.0f} steps/s  "
              f"return {mean_text(mean_return, 9, 3)}  length {mean_text(mean_length, 7, 1)}  {term_text}  "
              f"grad {stats['grad_norm']:.3g} (cv {stats['world_grad_cv']:.2g}, exploding "
              f"{100 * stats['exploding_share']:.0f}%){skipped}  eta {eta:6.0f}s{self._notes()}", flush=True)
        if self.writer is not None:
            w = self.writer
            w.add_scalar("Train/mean_reward", mean_return, it)
            w.add_scalar("Train/mean_episode_length", mean_length, it)
            w.add_scalar("Loss/actor", stats["actor_loss"], it)
            w.add_scalar("Loss/critic", stats["critic_loss"], it)
            w.add_scalar("Loss/actor_grad_norm", stats["grad_norm"], it)
            w.add_scalar("Loss/skipped_steps", self.skipped_steps, it)
            w.add_scalar("Gradient/world_cv", stats["world_grad_cv"], it)
            w.add_scalar("Gradient/exploding_share", stats["exploding_share"], it)
            w.add_scalar("Perf/total_fps", steps / max(iteration_time, 1e-9), it)
            for k, v in terms.items():
                w.add_scalar(f"Episode_Reward/{k}", v, it)

    # --------------------------------------------------------------------------- policies
    def get_inference_policy(self, device=None):
        """A callable on the TensorDict (or dict) of observation groups -> deterministic actions."""
        policy = InferencePolicy(self.obs_normalizer, self.actor).to(device or self.device).eval()

        def act(obs):
            return policy(obs["policy"])

        return act

    def inference_module(self) -> InferencePolicy:
        return InferencePolicy(self.obs_normalizer, self.actor).cpu().eval()

    def export_policy_to_onnx(self, path: str, filename: str = "policy.onnx") -> None:
        """One self-contained ONNX file, input "obs" [batch, num_obs], output "actions" (torch's
        TorchScript-based exporter, which keeps the weights inside the file up to protobuf's 2 GiB)."""
        module = self.inference_module()
        example = torch.zeros(1, self.obs_normalizer.mean.shape[0])
        os.makedirs(path, exist_ok=True)
        with contextlib.redirect_stdout(None):
            torch.onnx.export(module, (example,), os.path.join(path, filename), input_names=["obs"],
                              output_names=["actions"], dynamic_axes={"obs": {0: "batch"}, "actions": {0: "batch"}},
                              dynamo=False)

    def export_policy_to_jit(self, path: str, filename: str = "policy.pt") -> None:
        torch.jit.script(self.inference_module()).save(os.path.join(path, filename))

    # --------------------------------------------------------------------------- checkpoints
    def _identity(self) -> dict:
        obs = self.env.observations()
        return {"algo": "shac", "task": self.task, "obs_sizes": {k: list(v.shape[1:]) for k, v in obs.items()},
                "num_actions": int(self.env.num_actions), "num_envs": int(self.env.num_envs)}

    def save(self, path: str) -> None:

        returns, lengths = self.finished.episodes()
        training = {"rng": rng_state(), "curve": list(self.curve), "returns": returns,
                    "lengths": lengths, "episode_return": self.episode_return.clone(),
                    "episode_length": self.episode_length.clone(), "env_steps": self.env_steps,
                    "skipped_steps": self.skipped_steps, "env": self.env.state_dict()}
        saved = {"actor_state_dict": self.actor.state_dict(), "critic_state_dict": self.critic.state_dict(),
                 "target_critic_state_dict": self.target_critic.state_dict(),
                 "obs_normalizer": self.obs_normalizer.state_dict(),
                 "critic_obs_normalizer": self.critic_obs_normalizer.state_dict(),
                 "actor_optimizer_state_dict": self.actor_optimizer.state_dict(),
                 "critic_optimizer_state_dict": self.critic_optimizer.state_dict(),
                 "iter": self.completed_iterations - 1,
                 "simrl": {"format": CHECKPOINT_FORMAT, **self._identity(),
                           "completed_iterations": self.completed_iterations, "training": training}}
        atomic_torch_save(saved, path)
        self.last_checkpoint = path

    def load(self, path: str, map_location: str | None = None, restore_training_state: bool = False) -> None:
        loaded = load_checkpoint(path, map_location=map_location)
        meta = loaded.get("simrl") or {}
        if meta.get("algo") != "shac":
            raise CheckpointError(f"checkpoint {path} was written by algo={meta.get('algo', 'ppo')}, not shac; "
                                  f"pass algo={meta.get('algo', 'ppo')}")
        check_identity(path, meta, self._identity())
        try:
            self.actor.load_state_dict(loaded["actor_state_dict"])
            self.critic.load_state_dict(loaded["critic_state_dict"])
            self.target_critic.load_state_dict(loaded["target_critic_state_dict"])
            self.obs_normalizer.load_state_dict(loaded["obs_normalizer"])
            self.critic_obs_normalizer.load_state_dict(loaded["critic_obs_normalizer"])
            self.actor_optimizer.load_state_dict(loaded["actor_optimizer_state_dict"])
            self.critic_optimizer.load_state_dict(loaded["critic_optimizer_state_dict"])
        except (RuntimeError, KeyError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path} does not fit this policy ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0]})") from e
        self.completed_iterations = int(meta.get("completed_iterations", 0))
        self.resume_notes = []
        if not restore_training_state:
            return
        state = meta.get("training", {})
        set_rng_state(state["rng"])
        self.curve = list(state.get("curve", []))
        if self.curve:
            self._time_offset = float(self.curve[-1]["seconds"])
        self.finished.restore(state.get("returns", []), state.get("lengths", []))
        self.env_steps = int(state.get("env_steps", 0))
        self.skipped_steps = int(state.get("skipped_steps", 0))
        if int(meta.get("num_envs", -1)) != self.env.num_envs:
            self.resume_notes.append(f"the checkpoint was trained with num_envs={meta.get('num_envs')}, this run has "
                                     f"{self.env.num_envs}: the environments start afresh")
            return
        self.episode_return.copy_(state["episode_return"])
        self.episode_length.copy_(state["episode_length"])
        try:
            self.env.load_state_dict(state["env"])
        except ValueError as e:
            self.resume_notes.append(f"environment state not restored ({e}); the environments start afresh")
