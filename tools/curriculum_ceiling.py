"""The terrain level a perfect policy would reach: the terrain curriculum's ceiling under a task's
commands.

A robot that tracks every command exactly (its base moves at the commanded body-frame velocity
and turns at the commanded yaw rate, or toward its commanded heading) is integrated over episodes
of the task's length, commands redrawn every `command_resample_s`; each episode's net
displacement goes through the task's own curriculum rule (envs/mdp/curriculum.py
`update_terrain_levels`: up a row beyond half a patch, down below half the commanded distance,
a random row past the top). Printed: the chances of moving up and down per episode and the mean
level after `--episodes` episodes, with drawn yaw rates and with heading commands.

    python tools/curriculum_ceiling.py                     # tasks/quadruped_rough.yaml's values
    python tools/curriculum_ceiling.py --lin-vel-x -0.5 1.0 --lin-vel-y -0.3 0.3   # the humanoid's

No physics: it measures the command design, not a policy. With drawn yaw rates a robot walks
arcs of radius |v| / |yaw rate|, and its net displacement is often short of the rule's distances.
"""

import argparse
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from envs.mdp.commands import heading_yaw_rate  # noqa: E402
from envs.mdp.curriculum import update_terrain_levels  # noqa: E402


def episode_displacements(n: int, steps: int, dt: float, resample: int, ranges, heading: bool,
                          stiffness: float, generator: torch.Generator):
    """Net displacement [n] after `steps` of exact tracking, and the last command's |v_xy| [n]."""
    pos = torch.zeros(n, 2, dtype=torch.float64)
    yaw = torch.zeros(n, dtype=torch.float64)
    lo = torch.tensor([r[0] for r in ranges], dtype=torch.float64)
    hi = torch.tensor([r[1] for r in ranges], dtype=torch.float64)
    for k in range(steps):
        if k % resample == 0:
            cmd = lo + (hi - lo) * torch.rand(n, 3, generator=generator, dtype=torch.float64)
            target = (2 * torch.rand(n, generator=generator, dtype=torch.float64) - 1) * math.pi
        rate = cmd[:, 2]
        if heading:
            rate = heading_yaw_rate(target, yaw, stiffness, lo[2], hi[2])
        c, s = torch.cos(yaw), torch.sin(yaw)
        pos += dt * torch.stack([c * cmd[:, 0] - s * cmd[:, 1], s * cmd[:, 0] + c * cmd[:, 1]], dim=1)
        yaw += dt * rate
    return pos.norm(dim=1), cmd[:, :2].norm(dim=1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lin-vel-x", type=float, nargs=2, default=(-1.0, 1.0))
    parser.add_argument("--lin-vel-y", type=float, nargs=2, default=(-0.5, 0.5))
    parser.add_argument("--ang-vel-yaw", type=float, nargs=2, default=(-1.0, 1.0))
    parser.add_argument("--episode-length-s", type=float, default=20.0)
    parser.add_argument("--command-resample-s", type=float, default=10.0)
    parser.add_argument("--step-dt", type=float, default=0.02, help="policy step, s")
    parser.add_argument("--heading-stiffness", type=float, default=0.5)
    parser.add_argument("--patch-size", type=float, default=4.0)
    parser.add_argument("--rows", type=int, default=5)
    parser.add_argument("--worlds", type=int, default=20000)
    parser.add_argument("--episodes", type=int, default=60, help="episodes per world for the mean level")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    ranges = (args.lin_vel_x, args.lin_vel_y, args.ang_vel_yaw)
    steps = round(args.episode_length_s / args.step_dt)
    resample = max(1, round(args.command_resample_s / args.step_dt))
    print(f"exact tracking, {args.worlds} worlds; vx {list(args.lin_vel_x)}, vy {list(args.lin_vel_y)}, "
          f"yaw rate {list(args.ang_vel_yaw)}; {args.episode_length_s:g} s episodes, commands every "
          f"{args.command_resample_s:g} s; {args.rows} rows of {args.patch_size:g} m patches")
    print(f"{'commands':<28s} {'P(up)':>6s} {'P(down)':>8s} {'median distance':>16s} {'mean level':>11s}")
    for heading in (False, True):
        generator = torch.Generator().manual_seed(args.seed)
        levels = torch.randint(0, 2, (args.worlds,), generator=generator)  # max_init_level 1
        for episode in range(args.episodes):
            distance, speed = episode_displacements(args.worlds, steps, args.step_dt, resample, ranges, heading,
                                                    args.heading_stiffness, generator)
            random_rows = torch.randint(0, args.rows, (args.worlds,), generator=generator)
            new = update_terrain_levels(levels, distance.float(), torch.stack([speed, torch.zeros_like(speed)], 1),
                                        args.patch_size, args.episode_length_s, args.rows, random_rows)
            if episode == 0:  # the rule's chances, from the first episode's displacements
                ups = float((distance > args.patch_size / 2).double().mean())
                downs = float(((distance < speed * args.episode_length_s * 0.5)
                               & (distance <= args.patch_size / 2)).double().mean())
                median = float(distance.median())
            levels = new
        name = "heading commands" if heading else "drawn yaw rates"
        print(f"{name:<28s} {ups:6.2f} {downs:8.2f} {median:14.2f} m {float(levels.float().mean()):11.2f}")


if __name__ == "__main__":
    main()
