#!/usr/bin/env python
"""What rough terrain costs: environment steps per second of `quadruped` (flat) and
`quadruped_rough` (with each given terrain) on the same machine, in the same run, with the number
of terrain boxes, height fields and contact slots per world.

    python tools/terrain_cost.py --worlds 256 --steps 20
    python tools/terrain_cost.py --terrain '{"rows": 3, "robot_geoms": ["FR_foot", "FL_foot"]}'
    python tools/terrain_cost.py --terrain '{}' --terrain '{"cols": 6, "types": {"flat": 1, "pyramid_stairs": 1,
        "pyramid_stairs_inv": 1, "discrete_obstacles": 1, "random_rough": 1, "pyramid_slope": 1}}'

`--terrain` may be given several times (each is measured in turn, after the flat task); its
fields override the task's (tasks/quadruped_rough.yaml).

Each environment runs `--steps` policy steps of random actions after 3 warm-up steps (which
compile); resets included, as in training.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import envs  # noqa: E402


def measure(name: str, worlds: int, steps: int, **kwargs) -> dict:
    env = envs.make(name, num_envs=worlds, device="cpu", seed=0, **kwargs)
    env.reset()
    generator = torch.Generator().manual_seed(0)

    def actions():
        return torch.rand(worlds, env.num_actions, generator=generator) * 2 - 1

    for _ in range(3):
        env.step(actions())
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        env.step(actions())
    seconds = time.perf_counter() - start
    # this process's CPU time: less sensitive than the wall clock to other processes on a shared machine
    cpu_seconds = time.process_time() - cpu_start
    terrain = getattr(env, "terrain", None)
    return {"task": name, "worlds": worlds, "env_steps_per_s": worlds * steps / seconds,
            "cpu_ms_per_step": 1e3 * cpu_seconds / steps,
            "boxes": terrain.num_boxes if terrain is not None else 0,
            "hfields": terrain.num_hfields if terrain is not None else 0, "ngeom": env.sim.mj_model.ngeom,
            "contact_slots": int(env.sim.model.budgets.nconmax)}


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--worlds", type=int, default=256)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--terrain", action="append", default=None,
                        help="task.terrain fields as JSON, over the task's (repeatable; default: the task's)")
    args = parser.parse_args()
    from omegaconf import OmegaConf

    import tasks

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped_rough.yaml"), resolve=True)
    flat = measure("quadruped", args.worlds, args.steps)
    results = [flat]
    for fields in args.terrain or ["{}"]:
        terrain = {**task.get("terrain", {}), **json.loads(fields)}
        results.append({**measure("quadruped_rough", args.worlds, args.steps, terrain=terrain), "terrain": fields})
    for r in results:
        print(f"{r['task']:16s} worlds={r['worlds']} boxes={r['boxes']:4d} hfields={r['hfields']} "
              f"ngeom={r['ngeom']:4d} contact slots={r['contact_slots']:6d}  {r['env_steps_per_s']:9,.0f} env steps/s"
              f"  {1e3 * r['worlds'] / r['env_steps_per_s']:7.1f} ms per step of all worlds"
              f" ({r['cpu_ms_per_step']:7.1f} ms CPU time)"
              + (f"  terrain {r['terrain']}" if "terrain" in r else ""))
    for r in results[1:]:
        print(f"rough / flat: {r['env_steps_per_s'] / flat['env_steps_per_s']:.2f}, CPU time "
              f"{r['cpu_ms_per_step'] / flat['cpu_ms_per_step']:.1f}x  ({r['terrain']})")


if __name__ == "__main__":
    main()
