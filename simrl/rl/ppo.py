"""PPO with rsl-rl-lib's `OnPolicyRunner`, configured from a task, with the run directory,
one-line progress, atomic checkpoints and a learning-curve record the product promises."""

import contextlib
import io
import json
import os
import statistics
import tempfile
import time

import torch
from rsl_rl.runners import OnPolicyRunner


def atomic_torch_save(obj, path: str) -> None:
    """Write `obj` to a temporary file beside `path`, then rename: a crash mid-write leaves
    the previous file intact."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp_", suffix=".pt")
    try:
        with os.fdopen(fd, "wb") as f:
            torch.save(obj, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)
        raise


class Runner(OnPolicyRunner):
    """OnPolicyRunner that prints one line per iteration, saves checkpoints atomically and
    keeps the learning curve (iteration, env steps, seconds, mean return, mean length)."""

    def __init__(self, env, train_cfg: dict, log_dir: str | None, device: str, key_terms: list[str]):
        super().__init__(env, train_cfg, log_dir=log_dir, device=device)
        self.key_terms = key_terms
        self.curve: list[dict] = []
        self._start_time = time.time()
        self._verbose_log = self.logger.log
        self.logger.log = self._log_one_line

    def _log_one_line(self, it, start_it, total_it, collect_time, learn_time, **kwargs):
        logger = self.logger
        terms = {}
        for key in self.key_terms:
            values = [float(e[key]) for e in logger.ep_extras if key in e]
            if values:
                terms[key.split("/")[-1]] = sum(values) / len(values)
        with contextlib.redirect_stdout(io.StringIO()):  # keep TensorBoard logging, drop the block
            self._verbose_log(it=it, start_it=start_it, total_it=total_it, collect_time=collect_time,
                              learn_time=learn_time, **kwargs)
        steps = self.cfg["num_steps_per_env"] * self.env.num_envs
        fps = steps / max(collect_time + learn_time, 1e-9)
        mean_return = statistics.mean(logger.rewbuffer) if logger.rewbuffer else float("nan")
        mean_length = statistics.mean(logger.lenbuffer) if logger.lenbuffer else float("nan")
        elapsed = time.time() - self._start_time
        done = it + 1 - start_it
        eta = elapsed / done * (total_it - start_it - done)
        self.curve.append({"iteration": it, "env_steps": (it + 1) * steps, "seconds": elapsed,
                           "mean_return": mean_return, "mean_episode_length": mean_length})
        term_text = " ".join(f"{k}={v:.3g}" for k, v in terms.items())
        print(f"it {it + 1:5d}/{total_it}  {fps:8.0f} steps/s  return {mean_return:9.3f}  "
              f"length {mean_length:7.1f}  {term_text}  eta {eta:6.0f}s", flush=True)

    def save(self, path: str, infos: dict | None = None) -> None:
        saved = self.alg.save()
        saved["iter"] = self.current_learning_iteration
        saved["infos"] = infos
        atomic_torch_save(saved, path)
        self.logger.save_model(path, self.current_learning_iteration)
        if self.logger.log_dir is not None:
            with open(os.path.join(self.logger.log_dir, "learning_curve.json"), "w") as f:
                json.dump(self.curve, f)


def rsl_rl_config(ppo: dict) -> dict:
    """The rsl-rl 5.x training configuration from a task's `ppo` section."""
    return {
        "num_steps_per_env": int(ppo["num_steps_per_env"]),
        "save_interval": int(ppo.get("save_interval", 50)),
        "obs_groups": {"actor": ["policy"], "critic": ["critic"]},
        "logger": "tensorboard",
        "check_for_nan": True,
        "algorithm": {"class_name": "PPO", **ppo["algorithm"]},
        "actor": {"class_name": "MLPModel", "hidden_dims": list(ppo["actor_hidden_dims"]),
                  "activation": ppo.get("activation", "elu"), "obs_normalization": ppo.get("obs_normalization", True),
                  "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": ppo.get("init_noise_std", 1.0),
                                       "std_type": "scalar"}},
        "critic": {"class_name": "MLPModel", "hidden_dims": list(ppo["critic_hidden_dims"]),
                   "activation": ppo.get("activation", "elu"), "obs_normalization": ppo.get("obs_normalization", True)},
    }
