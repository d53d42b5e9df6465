#!/usr/bin/env python
"""Train a policy: `python scripts/train.py task=NAME [key=value ...]` (Hydra).

    python scripts/train.py                      # the default task: quadruped
    python scripts/train.py task=cartpole
    python scripts/train.py task=cartpole num_envs=512 seed=1 max_iterations=200
    python scripts/train.py task=cartpole task.env.episode_length_s=8 hydra.run.dir=runs/mine
    python scripts/train.py task=cartpole resume=runs/cartpole/<date>/model_99.pt
    python scripts/train.py task=cartpole resume=latest
    python scripts/train.py task=humanoid_rough init_policy=runs/humanoid/<date>/model_2499.pt

Top-level keys: task, num_envs (null: the task's default for the device), device (auto: cuda
if present, else cpu), seed, max_iterations (null: the task's), algo (ppo, or shac for the tasks
with a differentiable step and a `shac` section: cartpole_swingup, ant, quadruped), resume (a checkpoint
path, a run directory, or `latest`: the most recently written model_<it>.pt under runs/<task>/
relative to the current directory), init_policy (a checkpoint or run directory of another
run whose policy starts this one: fine-tuning), sim.backend (warp: this engine; mujoco: MuJoCo itself, CPU
only and much slower), sim.njmax (constraint rows per world; null: the model's default), sim.nconmax
(contact slots per world, for the pairs the broadphase keeps; null: the model's default) and sim.strict (true: a
world that outgrows them is an error, not a warning; all warp only), dist_timeout_s, viewer
(web: the first viewer_worlds worlds, default 4, shown in a browser while training runs, at
viewer_host:viewer_port, default 127.0.0.1:8080, for viewer_seconds or the whole run; each
progress line ends with its cost; simrl.viewer, docs/GUIDE.md "Watch it in a browser"). Any
task field is `task.<field>`. A misspelt top-level key
is named with the closest one (tasks.config.check_overrides), and the configuration is
checked before anything is built (tasks.config.validate): unknown keys, wrong types and
out-of-range values are errors that name the key. Each run writes to its directory
(hydra.run.dir): the resolved config.yaml, train.log (everything the run printed), TensorBoard
logs, checkpoints (model_<iteration>.pt, written atomically), learning_curve.json and
learning_curve.png (README, "Train" lists every file).

A resumed run restores the policy, optimizer, observation normalizers, iteration counter,
random generators and environment state, then trains max_iterations more iterations; on the
CPU it continues exactly as the uninterrupted run would have. Ctrl-C (SIGINT) finishes the
current iteration, saves a checkpoint, says where, and exits with status 130; a second Ctrl-C
quits at once without saving.

init_policy= starts a new run from another run's policy (fine-tuning: humanoid_rough from a
flat humanoid, whose policy observes the same terms): the actor's weights, observation
normalizer and action noise are loaded, the critic, optimizer and iteration count start afresh.

Several processes (torchrun; simrl.rl.distributed): the same command under
`torchrun --nproc_per_node=N scripts/train.py ...` trains with N ranks, each simulating its
own num_envs worlds on cuda:LOCAL_RANK (or the CPU) with seed + RANK; gradients are averaged
over the ranks every update, and only rank 0 writes the run directory. dist_timeout_s bounds
how long a rank waits for the others in a collective before the run fails.
"""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.cli import config_errors_exit, require_hydra  # noqa: E402  (the standard library only)

hydra = require_hydra("train")

from hydra.core.hydra_config import HydraConfig  # noqa: E402
from omegaconf import DictConfig  # noqa: E402

from simrl.rl.train import train  # noqa: E402
from tasks.config import (  # noqa: E402
    TaskEnvFactory,
    apply_algo_env,
    check_overrides,
    register,
    task_overrides,
    validate,
)

register("train")


@hydra.main(version_base=None, config_name="train")
def main(cfg: DictConfig) -> None:
    with config_errors_exit():
        apply_algo_env(cfg)  # algo=shac: the task's shac.env over its env section
        validate(cfg, "train")
    status = train(cfg, Path(HydraConfig.get().runtime.output_dir), TaskEnvFactory(cfg.task))
    if status:
        sys.exit(status)


def _hydra_args_for_rank(argv: list[str]) -> list[str]:
    """Under torchrun, every rank runs Hydra, and each would make its own time-stamped run
    directory. Ranks other than 0 get a throw-away one instead (removed at exit); they use
    rank 0's, which only rank 0 writes."""
    if int(os.environ.get("RANK", "0") or 0) == 0:
        return argv
    import atexit
    import shutil
    import tempfile

    scratch = tempfile.mkdtemp(prefix=f"simrl_rank{os.environ['RANK']}_")
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    keep = [a for a in argv[1:] if not a.lstrip("+").startswith(("hydra.run.dir=", "hydra.output_subdir="))]
    return [argv[0], *keep, f"hydra.run.dir={scratch}", "hydra.output_subdir=null"]


if __name__ == "__main__":
    with config_errors_exit():
        check_overrides("train", sys.argv[1:])  # "did you mean num_envs", before Hydra's "use +num_env"
        sys.argv = [sys.argv[0], *task_overrides("train", sys.argv[1:])]  # task=PATH.yaml, the run's own task
    sys.argv = _hydra_args_for_rank(sys.argv)
    main()
