"""PPO with rsl-rl-lib's `OnPolicyRunner`, configured from a task, with the run directory,
one-line progress, atomic checkpoints and a learning-curve record the product promises.

A checkpoint (`model_<it>.pt`, where <it> is the 0-based index of the last completed
iteration) holds rsl-rl's entries (actor, critic and optimizer state, including the observation
normalizers and the adaptive learning rate; "iter"; "infos") and a "simrl" entry: the task name,
observation group sizes and action size (checked when loading), the number of completed
iterations, and the training state that makes a resumed run continue exactly as an uninterrupted
one would: random generators (torch, CUDA, numpy, Python), the environment's state (simulation,
per-world tensors, its generator), the last observations, the episode statistics of the logger
and the learning curve. Loading uses `torch.load(weights_only=True)` (simrl.rl.checkpoint).
"""

import contextlib
import io
import json
import os
import statistics
import time
from collections.abc import Mapping

import torch
from rsl_rl.runners import OnPolicyRunner

from simrl import deps
from simrl.errors import CheckpointError
from simrl.rl import distributed, export
from simrl.rl.checkpoint import atomic_torch_save, check_identity, load_checkpoint, rng_state, set_rng_state
from simrl.rl.config import PpoCfg
from simrl.rl.episodes import EpisodeRing
from simrl.rl.runlog import mean_text

CHECKPOINT_FORMAT = 1


class _StopTraining(Exception):
    """Raised at the end of an iteration after `Runner.request_stop()`."""


class Runner(OnPolicyRunner):
    """OnPolicyRunner that prints one line per iteration, saves checkpoints atomically with the
    task's identity and the full training state, loads them safely, keeps the learning curve
    (iteration, env steps, seconds, mean return, mean length), and stops cleanly at the end of
    an iteration when asked (`request_stop`, e.g. from a Ctrl-C handler).

    Under torchrun (an initialised process group, simrl.rl.distributed) it uses rsl-rl-lib's
    multi-GPU path on any device: parameters broadcast from rank 0 when `learn` starts,
    gradients and the adaptive learning rate's KL averaged over the ranks, the observation
    normalisers updated from every rank's samples. Only rank 0 prints, logs and saves; a stop
    requested on any rank stops all of them after the same iteration."""

    def __init__(self, env, train_cfg: dict, log_dir: str | None, device: str, key_terms: list[str],
                 task: str | None = None):
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        deps.require(deps.private_api_problems("rsl-rl-lib") + deps.logger_attribute_problems(self.logger))
        self.key_terms = key_terms
        self.task = task or getattr(getattr(env, "env", env), "name", None)
        self.curve: list[dict] = []
        #: callables whose text ends each progress line (e.g. the viewer's cost)
        self.progress_notes: list = []
        self._start_time = time.time()
        self._time_offset = 0.0
        self._verbose_log = self.logger.log
        self.logger.log = self._log_one_line
        # an env that steps without host synchronisation (BatchedEnv.set_sync_free): the rollout
        # makes none either. rsl-rl's NaN check (the env resets non-finite worlds itself and logs
        # them as Diagnostics/nan_resets) and its episode book-keeping (which copies finished
        # episodes to the host at every step) give way to device-side ones, read once per iteration.
        self.sync_free = bool(getattr(getattr(env, "env", env), "sync_free", False))
        if self.sync_free:
            self.cfg["check_for_nan"] = False
            self._episodes = EpisodeRing(self.logger.rewbuffer.maxlen or 100, self.device)
            self._host_process_env_step = self.logger.process_env_step
            self.logger.process_env_step = self._process_env_step_on_device
        self.completed_iterations = 0
        self.stop_requested = False
        self.stopped_early = False
        self.last_checkpoint: str | None = None
        self.resume_notes: list[str] = []

    def _configure_multi_gpu(self) -> None:
        """rsl-rl's own version reads torchrun's variables, then insists on CUDA and NCCL and
        initialises the group itself; here the group is already up (scripts/train.py joins it
        with gloo on the CPU or NCCL on CUDA), so only rsl-rl's `multi_gpu` entry is set."""
        n = distributed.world_size()
        self.gpu_world_size = n
        self.is_distributed = n > 1
        self.gpu_global_rank = distributed.rank()
        self.gpu_local_rank = distributed.from_environment().local_rank if n > 1 else 0
        self.cfg["multi_gpu"] = ({"global_rank": self.gpu_global_rank, "local_rank": self.gpu_local_rank,
                                  "world_size": n} if n > 1 else None)

    # --------------------------------------------------------------------------- training
    def request_stop(self) -> None:
        """Finish the current iteration, save a checkpoint and return from `learn`."""
        self.stop_requested = True

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        """rsl-rl's learning loop; after `request_stop()` it ends after the current iteration,
        with a checkpoint of it (`last_checkpoint`) and `stopped_early` set. Iterations are
        numbered on from the last completed one (rsl-rl alone would repeat that index when
        `learn` is called again)."""
        self.stopped_early = False
        self.current_learning_iteration = max(self.current_learning_iteration, self.completed_iterations)
        try:
            super().learn(num_learning_iterations, init_at_random_ep_len)
        except _StopTraining:
            self.stopped_early = True
            if self.logger.writer is not None:
                self.save(os.path.join(self.logger.log_dir, f"model_{self.current_learning_iteration}.pt"))
                self.logger.stop_logging_writer()
        finally:
            self.stop_requested = False

    def _process_env_step_on_device(self, rewards, dones, extras, intrinsic_rewards=None) -> None:
        """rsl-rl's Logger.process_env_step without host synchronisation: finished episodes go to
        a ring on the device (`_read_device_logs` reads it once per iteration)."""
        logger = self.logger
        if intrinsic_rewards is not None:  # RND's extrinsic / intrinsic split: rsl-rl's own
            return self._host_process_env_step(rewards, dones, extras, intrinsic_rewards)
        if logger.writer is None:
            return
        logger.ep_extras.append(extras["log"])
        logger.cur_reward_sum += rewards
        logger.cur_episode_length += 1
        done = dones > 0
        self._episodes.add(done, logger.cur_reward_sum, logger.cur_episode_length)
        logger.cur_reward_sum.masked_fill_(done, 0)
        logger.cur_episode_length.masked_fill_(done, 0)

    def _read_device_logs(self) -> None:
        """Once per iteration, with the env sync-free: a deferred non-finite action error is
        raised; the finished episodes reach rsl-rl's buffers; the logged values of steps on
        which no episode ended (NaN) are dropped, as the indexed step leaves them out."""
        getattr(self.env, "env", self.env).raise_deferred_errors()
        logger = self.logger
        returns, lengths = self._episodes.episodes()
        logger.rewbuffer.clear()
        logger.rewbuffer.extend(returns)
        logger.lenbuffer.clear()
        logger.lenbuffer.extend(lengths)
        entries = [(i, k) for i, e in enumerate(logger.ep_extras) for k, v in e.items()
                   if isinstance(v, torch.Tensor) and v.numel() == 1]
        if entries:
            values = torch.stack([logger.ep_extras[i][k].reshape(()).float() for i, k in entries])
            for (i, k), nan in zip(entries, torch.isnan(values).tolist(), strict=True):
                if nan:
                    del logger.ep_extras[i][k]

    def _notes(self) -> str:
        """The progress line's notes (progress_notes), each after two spaces."""
        return "".join(f"  {text}" for text in (note() for note in self.progress_notes) if text)

    def _log_one_line(self, it, start_it, total_it, collect_time, learn_time, **kwargs):
        logger = self.logger
        if self.sync_free:
            self._read_device_logs()
        self.completed_iterations = it + 1
        terms = {}
        for key in self.key_terms:
            values = [float(e[key]) for e in logger.ep_extras if key in e]
            if values:
                terms[key.split("/")[-1]] = sum(values) / len(values)
        with contextlib.redirect_stdout(io.StringIO()):  # keep TensorBoard logging, drop the block
            self._verbose_log(it=it, start_it=start_it, total_it=total_it, collect_time=collect_time,
                              learn_time=learn_time, **kwargs)
        steps = self.cfg["num_steps_per_env"] * self.env.num_envs * self.gpu_world_size  # all ranks
        fps = steps / max(collect_time + learn_time, 1e-9)
        mean_return = statistics.mean(logger.rewbuffer) if logger.rewbuffer else float("nan")
        mean_length = statistics.mean(logger.lenbuffer) if logger.lenbuffer else float("nan")
        elapsed = time.time() - self._start_time
        done = it + 1 - start_it
        eta = elapsed / done * (total_it - start_it - done)
        self.curve.append({"iteration": it, "env_steps": (it + 1) * steps, "seconds": self._time_offset + elapsed,
                           "mean_return": mean_return, "mean_episode_length": mean_length})
        term_text = " ".join(f"{k}={v:.3g}" for k, v in terms.items())
        if self.gpu_global_rank == 0:
            print(f"it {it + 1:5d}/{total_it}  {fps:8.0f} steps/s  return {mean_text(mean_return, 9, 3)}  "
                  f"length {mean_text(mean_length, 7, 1)}  {term_text}  eta {eta:6.0f}s{self._notes()}", flush=True)
        self.stop_requested = distributed.any_rank(self.stop_requested, self.device)
        if self.stop_requested:
            raise _StopTraining

    # --------------------------------------------------------------------------- policies
    def export_policy_to_onnx(self, path: str, filename: str = "policy.onnx", verbose: bool = False) -> None:
        """rsl-rl's export (its ONNX model, opset 18, input "obs", output "actions"), written as one
        self-contained file when the weights fit (simrl.rl.export) instead of torch's default pair
        of `filename` and `filename.data`."""
        model = self.alg.get_policy().as_onnx(verbose=verbose).to("cpu").eval()
        os.makedirs(path, exist_ok=True)
        target = os.path.join(path, filename)
        external = export.onnx_external_data(model)
        torch.onnx.export(model, model.get_dummy_inputs(), target, export_params=True, opset_version=18,
                          verbose=verbose, input_names=model.input_names, output_names=model.output_names,
                          external_data=external)
        if not external:  # a pair left by an earlier export would no longer belong to this file
            with contextlib.suppress(FileNotFoundError):
                os.remove(target + ".data")

    # --------------------------------------------------------------------------- checkpoints
    def _identity(self) -> dict:
        obs = self.env.get_observations()
        return {"task": self.task, "obs_sizes": {k: list(v.shape[1:]) for k, v in obs.items()},
                "num_actions": int(self.env.num_actions), "num_envs": int(self.env.num_envs)}

    def _training_state(self) -> dict:
        logger = self.logger
        state = {"rng": rng_state(), "curve": list(self.curve),
                 "logger": {"rewbuffer": [float(x) for x in logger.rewbuffer],
                            "lenbuffer": [float(x) for x in logger.lenbuffer],
                            "cur_reward_sum": logger.cur_reward_sum.clone(),
                            "cur_episode_length": logger.cur_episode_length.clone(),
                            "tot_timesteps": int(logger.tot_timesteps), "tot_time": float(logger.tot_time)},
                 "observations": {k: v.clone() for k, v in self.env.get_observations().items()}}
        inner = getattr(self.env, "env", None)
        if hasattr(inner, "state_dict"):
            state["env"] = inner.state_dict()
        return state

    def save(self, path: str, infos: dict | None = None) -> None:
        saved = self.alg.save()
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = infos
        saved["simrl"] = {"format": CHECKPOINT_FORMAT, "algo": "ppo", **self._identity(),
                          "completed_iterations": self.completed_iterations, "training": self._training_state()}
        atomic_torch_save(saved, path)
        self.last_checkpoint = path
        self.logger.save_model(path, self.current_learning_iteration)
        if self.logger.log_dir is not None:
            with open(os.path.join(self.logger.log_dir, "learning_curve.json"), "w") as f:
                json.dump(self.curve, f)

    def load(self, path: str, load_cfg: dict | None = None, strict: bool = True, map_location: str | None = None,
             restore_training_state: bool = False) -> dict:
        """Load a checkpoint safely (weights_only) and check that it was written for this task
        with these observation and action sizes; CheckpointError names the file otherwise.

        rsl-rl's parts are loaded as OnPolicyRunner.load does (actor, critic with their
        normalizers, optimizer, iteration). With `restore_training_state` (resuming training),
        the random generators, the environment's state and last observations, the logger's
        episode statistics and the learning curve are restored too, so the next iteration is the
        one an uninterrupted run would have made; parts that do not fit (another num_envs) are
        skipped and explained in `resume_notes`."""
        loaded = load_checkpoint(path, map_location=map_location)
        meta = loaded.get("simrl")
        self.resume_notes = []
        if meta is not None:
            self._check_identity(path, meta)
        try:
            load_iteration = self.alg.load(loaded, load_cfg, strict)
        except (RuntimeError, KeyError, ValueError) as e:
            raise CheckpointError(f"checkpoint {path} does not fit this policy ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0]})") from e
        if load_iteration:
            if meta is not None and "completed_iterations" in meta:
                self.completed_iterations = int(meta["completed_iterations"])
                self.current_learning_iteration = self.completed_iterations  # the next iteration's index
            else:  # a checkpoint of rsl-rl's own runner
                self.current_learning_iteration = loaded["iter"]
        if restore_training_state:
            if meta is None or "training" not in meta:
                self.resume_notes.append("the checkpoint has no training state (random generators, environment): "
                                         "the run continues from the policy and optimizer only")
            else:
                self._restore_training_state(meta["training"], int(meta.get("num_envs", -1)))
        return loaded["infos"]

    def load_policy(self, path: str, map_location: str | None = None) -> dict:
        """Start the policy from another run's checkpoint, for fine-tuning: e.g. humanoid_rough
        from a flat humanoid run, whose policy sees the same observations. The actor's weights,
        its observation normalizer and its action noise are loaded; the critic, the optimizer,
        the iteration count and the environments start afresh. The checkpoint's policy
        observation and action sizes must be this task's (CheckpointError names both otherwise);
        that the observation terms mean the same things is the caller's to know. Returns the
        checkpoint's "simrl" entry (its task, sizes, completed iterations)."""
        loaded = load_checkpoint(path, map_location=map_location)
        meta = loaded.get("simrl") or {}
        if meta.get("algo", "ppo") != "ppo":
            raise CheckpointError(f"checkpoint {path} was written by algo={meta['algo']}: init_policy takes a "
                                  f"PPO checkpoint")
        mine = self._identity()
        theirs = {"policy": meta.get("obs_sizes", {}).get("policy"), "actions": meta.get("num_actions")}
        ours = {"policy": mine["obs_sizes"].get("policy"), "actions": mine["num_actions"]}
        if any(theirs[k] is not None and theirs[k] != ours[k] for k in ours):
            raise CheckpointError(f"checkpoint {path} (task {meta.get('task')!r}) has a policy for observations "
                                  f"{theirs['policy']} and {theirs['actions']} actions; task {self.task!r} has "
                                  f"{ours['policy']} and {ours['actions']}")
        try:
            self.alg.load(loaded, {"actor": True}, strict=True)
        except (RuntimeError, KeyError) as e:
            raise CheckpointError(f"checkpoint {path}'s policy does not fit this one ({type(e).__name__}: "
                                  f"{str(e).splitlines()[0]})") from e
        return meta

    def _check_identity(self, path: str, meta: dict) -> None:
        if meta.get("algo", "ppo") != "ppo":
            raise CheckpointError(f"checkpoint {path} was written by algo={meta['algo']}, not ppo; "
                                  f"pass algo={meta['algo']}")
        check_identity(path, meta, self._identity())

    def _restore_training_state(self, state: dict, saved_num_envs: int) -> None:
        set_rng_state(state["rng"])
        self.curve = list(state.get("curve", []))
        if self.curve:
            self._time_offset = float(self.curve[-1]["seconds"])
        logger = self.logger
        log_state = state.get("logger", {})
        logger.rewbuffer.extend(log_state.get("rewbuffer", []))
        logger.lenbuffer.extend(log_state.get("lenbuffer", []))
        if self.sync_free:
            self._episodes.restore(list(logger.rewbuffer), list(logger.lenbuffer))
        logger.tot_timesteps = log_state.get("tot_timesteps", logger.tot_timesteps)
        logger.tot_time = log_state.get("tot_time", logger.tot_time)
        if saved_num_envs != self.env.num_envs:
            self.resume_notes.append(f"the checkpoint was trained with num_envs={saved_num_envs}, this run has "
                                     f"{self.env.num_envs}: the environments start afresh (policy, optimizer, "
                                     f"normalizers and random generators are restored)")
            return
        for key in ("cur_reward_sum", "cur_episode_length"):
            if key in log_state:
                getattr(logger, key).copy_(log_state[key])
        inner = getattr(self.env, "env", None)
        if "env" in state and hasattr(inner, "load_state_dict"):
            try:
                inner.load_state_dict(state["env"])
            except ValueError as e:
                self.resume_notes.append(f"environment state not restored ({e}); the environments start afresh")
                return
            if "observations" in state and hasattr(self.env, "set_observations"):
                self.env.set_observations(state["observations"])


def rsl_rl_config(ppo: Mapping | PpoCfg) -> dict:
    """The rsl-rl 5.x training configuration from a task's `ppo` section."""
    if not isinstance(ppo, PpoCfg):
        ppo = PpoCfg.from_dict(ppo)
    return {
        "num_steps_per_env": int(ppo.num_steps_per_env),
        "save_interval": int(ppo.save_interval),
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "logger": "tensorboard",
        "check_for_nan": True,
        "algorithm": {"class_name": "PPO", **ppo.algorithm},
        "actor": {"class_name": "MLPModel", "hidden_dims": list(ppo.actor_hidden_dims),
                  "activation": ppo.activation, "obs_normalization": ppo.obs_normalization,
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": ppo.init_noise_std,
                                       "std_type": "scalar"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": list(ppo.critic_hidden_dims),
                   "activation": ppo.activation, "obs_normalization": ppo.obs_normalization},
    }
