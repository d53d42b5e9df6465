#!/usr/bin/env python
"""Probe SHAC's actor objective at a checkpoint (simrl/rl/shac.py): why a run stalls or falls.

    python tools/shac_probe.py runs/quadruped/<date>/model_149.pt
    python tools/shac_probe.py runs/quadruped/<date> --horizon 32 --num-envs 64 --warmup 100

From the state the policy reaches after `--warmup` steps (no gradient), one window of
`--horizon` steps of the runner's actor objective (the window's discounted rewards plus the
target critic's values where pieces end, zero after a failure) is rolled out twice more with
the same start state and exploration noise, each time differentiating one part:

- the actor gradient of the window's rewards, of the critic's bootstrap values, and of each
  reward term that has a gradient, with their norms and cosines: a critic part larger than the
  reward part and pointing against it is a policy held in place by its critic;
- the objective after a step of length a along the whole gradient (a in `--steps`, parameter
  space), against the first-order prediction a |g|: whether the gradient still describes the
  objective at the size of an optimizer step (Adam's first steps move each weight by about
  the learning rate, |step| about lr sqrt(#weights)).

The run directory's task.yaml gives the task and its `shac` section (algo=shac's env settings
applied). CPU; deterministic, so the repeated windows see the same physics and noise.
"""

import argparse
import copy
import math
import sys
from pathlib import Path

import torch
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simrl.rl.shac_probe import gradient, window_objective  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoint", help="a SHAC model_<it>.pt or its run directory (the highest iteration)")
    parser.add_argument("--horizon", type=int, default=None, help="window length (default: the run's)")
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--warmup", type=int, default=100, help="policy steps before the window (no gradient)")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--steps", default="0.001,0.01,0.03,0.1,0.3", help="step lengths along the gradient")
    args = parser.parse_args()

    import envs
    from simrl.rl.checkpoint import resolve_resume
    from simrl.rl.shac import ShacRunner
    from tasks.config import env_kwargs

    checkpoint = Path(resolve_resume(args.checkpoint, task="", key="checkpoint"))
    task = yaml.safe_load((checkpoint.parent / "task.yaml").read_text())
    task["env"] = {**task.get("env", {}), **task["shac"].get("env", {})}
    cfg = {k: v for k, v in task["shac"].items() if k not in ("env", "num_envs", "num_envs_gpu", "max_iterations")}
    if args.horizon:
        cfg["horizon"] = args.horizon
    env = envs.make(task["name"], num_envs=args.num_envs, device="cpu", seed=args.seed, **env_kwargs(task))
    torch.manual_seed(args.seed)
    runner = ShacRunner(env, cfg, log_dir=None, device="cpu", key_terms=[])
    runner.load(str(checkpoint))
    with torch.no_grad():
        obs = env.observations()
        for _ in range(args.warmup):
            obs, *_ = env.step(runner.actor(runner.obs_normalizer(obs["policy"])))
    state = copy.deepcopy(env.state_dict())
    scale = 1.0 / (runner.cfg.horizon * env.num_envs)  # the runner's loss is per step and world

    print(f"{checkpoint}: horizon {runner.cfg.horizon}, {env.num_envs} worlds, after {args.warmup} steps")
    grads, values = {}, {}
    for part in ["all", "rewards", "values", *env.reward_terms]:
        objective = window_objective(runner, env, state, args.seed, part)
        value = float(objective.detach()) * scale
        g = gradient(runner, objective * scale) if objective.requires_grad else None
        if g is None or not float(g.abs().max()) > 0.0:
            print(f"  {part:22s} window {value * runner.cfg.horizon:+.4e} per world  (no gradient: a constant "
                  f"of the plain step, e.g. of contacts)")
            continue
        values[part], grads[part] = value, g
    cos = torch.nn.functional.cosine_similarity
    for part, g in grads.items():
        print(f"  {part:22s} window {values[part] * runner.cfg.horizon:+.4e} per world  |grad| {float(g.norm()):.3e}"
              f"  cos(rewards) {float(cos(g, grads['rewards'], dim=0)):+.2f}"
              f"  cos(values) {float(cos(g, grads['values'], dim=0)):+.2f}")

    g = grads["all"]
    direction = g / g.norm()
    params = list(runner.actor.parameters())
    base = values["all"]
    print("  objective along the gradient (per step and world; first-order prediction in brackets):")
    for a in (float(x) for x in args.steps.split(",")):
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(torch.nn.utils.parameters_to_vector(params) + a * direction, params)
            moved = float(window_objective(runner, env, state, args.seed).detach()) * scale
            torch.nn.utils.vector_to_parameters(torch.nn.utils.parameters_to_vector(params) - a * direction, params)
        print(f"    a={a:<6g} change {moved - base:+.3e} ({a * float(g.norm()):+.3e})"
              + ("" if math.isfinite(moved) else "  (not finite)"))


if __name__ == "__main__":
    main()
