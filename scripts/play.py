#!/usr/bin/env python
"""Evaluate a trained policy headless and export it:
`python scripts/play.py task=NAME checkpoint=PATH [num_envs=.. num_episodes=.. device=.. seed=..
sim.backend=warp|mujoco sim.njmax=.. sim.nconmax=.. sim.strict=.. viewer=web viewer_port=..
viewer_host=.. viewer_seconds=..]`. PATH is what train.py's
`resume=` takes: a model_<iteration>.pt, a run directory (its highest-iteration checkpoint) or
`latest` (the most recently written checkpoint under runs/<task>/). `sim.backend=mujoco`
evaluates the policy in MuJoCo itself (CPU, one MjData per world) instead of this engine:
sim-to-sim; metrics.json records the backend. sim.njmax, sim.nconmax (candidate pairs the
broadphase keeps per world) and sim.strict set this engine's budgets as in train.py.

Runs `num_episodes` evaluation episodes (one per world; default num_envs, itself 100) with
the deterministic policy, prints
the metrics and writes to the run directory (hydra.run.dir, default runs/<task>/play_<date>):
metrics.json (mean_return, mean_episode_length, fall_rate, and for locomotion
lin_vel_tracking_error in m/s, yaw_rate_tracking_error in rad/s and falls_by_cause: per failure
condition of envs.legged, the share of episodes that ended with it), policy.onnx and policy.pt
(TorchScript), both with the metadata a robot needs to run the policy (joint names, default
pose, action scale, gains, observation terms; docs/GUIDE.md "Exported policies"), and play.log
(everything it printed). `video=true` also writes video.mp4: world 0's first evaluation
episode (at most `video_length_s` seconds, default 10) rendered by MuJoCo at the policy rate
(1 / step_dt fps), 640x480, a camera following the root body of a floating-base
robot, a fixed view otherwise. MuJoCo renders in a child process, trying the OpenGL backends in
turn (simrl.rl.video); when none works, play.py says why and goes on (metrics.json and the
exported policies are written before). The run itself: simrl.rl.play.

`viewer=web` instead runs the policy live in a browser (simrl.viewer): num_envs worlds (default
4) side by side, at real time or the page's speed, with pause, step, reset, the world shown,
the velocity command (sliders) and the reward terms and contact forces of the shown world; it
prints the URL (viewer_host:viewer_port, default 127.0.0.1:8080; a port in use is an error) and
stops after viewer_seconds or at Ctrl-C. Nothing is evaluated or written but play.log.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tasks.cli import config_errors_exit, require_hydra  # noqa: E402  (the standard library only)

hydra = require_hydra("play")
from hydra.core.hydra_config import HydraConfig  # noqa: E402

from simrl.rl.play import play  # noqa: E402
from simrl.rl.runlog import tee_output  # noqa: E402
from tasks.config import TaskEnvFactory, check_overrides, register, task_overrides, validate  # noqa: E402

register("play")


@hydra.main(version_base=None, config_name="play")
def main(cfg) -> None:
    run_dir = Path(HydraConfig.get().runtime.output_dir)
    with tee_output(run_dir / "play.log"):
        with config_errors_exit():
            validate(cfg, "play")
        play(cfg, run_dir, TaskEnvFactory(cfg.task))


if __name__ == "__main__":
    with config_errors_exit():
        check_overrides("play", sys.argv[1:])  # "did you mean num_envs", before Hydra's "use +num_env"
        sys.argv = [sys.argv[0], *task_overrides("play", sys.argv[1:])]  # task=PATH.yaml, the run's own task
    main()
