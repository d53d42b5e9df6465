"""Trajectory optimization through the simulator: open-loop controls that swing a cart-pole up.

    python examples/cartpole_swingup.py

The pole starts hanging down. 100 controls, each held for 5 steps of 10 ms (5 s), are
optimized by Adam on the gradient of a loss through all 500 physics steps (simrl.diff_step).
The goal is to bring the pole upright and nearly at rest at some moment within the 5 s (a
swing-up; holding it there is a feedback controller's job): the loss is a soft minimum over
the 100 control intervals of

    cost_t = (1 - cos(angle_t)) + 0.02 angular_velocity_t^2 + 0.01 cart_position_t^2.

Controls pass through tanh to stay in the actuator's ctrlrange [-1, 1] (a clamped control has
no gradient). The engine steps with Euler here (4x cheaper than the model's RK4 per step;
diff_step differentiates both).

Swing-up is not convex: one guess can settle in a local minimum. The simulator is batched,
so 16 random initial guesses are optimized at once, one per world, for about the price of
one; the run stops when one of them reaches upright (|angle| < 0.1 rad, |angular velocity|
< 0.5 rad/s).
"""

import argparse
import math
import time

import mujoco
import torch

import simrl
from envs import ASSETS_DIR


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--guesses", type=int, default=16, help="initial control sequences, optimized in parallel")
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "cartpole.xml"))
    mjm.opt.integrator = mujoco.mjtIntegrator.mjINT_EULER
    W, knots, hold = args.guesses, 100, 5
    sim = simrl.Sim.from_model(mjm, num_worlds=W, dtype="float64")
    interval = hold * sim.timestep
    qpos0 = torch.tensor([[0.0, math.pi]], dtype=torch.float64).repeat(W, 1)  # pole hanging down
    qvel0 = torch.zeros(W, 2, dtype=torch.float64)
    generator = torch.Generator().manual_seed(args.seed)
    u = (0.5 * torch.randn(knots, W, 1, generator=generator, dtype=torch.float64)).requires_grad_()
    optimizer = torch.optim.Adam([u], lr=args.lr)
    temperature = 0.05  # of the soft minimum over time
    worlds = torch.arange(W)
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        qpos, qvel = qpos0, qvel0
        costs, angles, velocities = [], [], []
        for k in range(knots):
            qpos, qvel = simrl.diff_step(sim, qpos, qvel, torch.tanh(u[k]), substeps=hold)
            costs.append((1.0 - torch.cos(qpos[:, 1])) + 0.02 * qvel[:, 1].square() + 0.01 * qpos[:, 0].square())
            angles.append(torch.remainder(qpos[:, 1].detach() + math.pi, 2 * math.pi) - math.pi)
            velocities.append(qvel[:, 1].detach())
        costs = torch.stack(costs)  # [knots, W]
        loss = -temperature * torch.logsumexp(-costs / temperature, dim=0)  # [W]
        optimizer.zero_grad()
        loss.sum().backward()  # the guesses are independent: one backward for all
        optimizer.step()

        best_time = torch.argmin(costs.detach(), dim=0)  # per guess, its closest approach
        angle = torch.stack(angles)[best_time, worlds]
        velocity = torch.stack(velocities)[best_time, worlds]
        upright = (angle.abs() < 0.1) & (velocity.abs() < 0.5)
        best = int(torch.argmin(loss.detach()))
        if it % 10 == 0 or it == 1 or upright.any():
            print(f"iteration {it:3d}  best loss {loss[best].item():.4f}: pole at {angle[best].item():+.3f} rad, "
                  f"{velocity[best].item():+.3f} rad/s at t = {(best_time[best].item() + 1) * interval:.2f} s  "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        if upright.any():
            w = int(torch.nonzero(upright)[0])
            print(f"converged in {it} iterations: guess {w} brings the pole upright at "
                  f"t = {(best_time[w].item() + 1) * interval:.2f} s (angle {angle[w].item():+.3f} rad, "
                  f"angular velocity {velocity[w].item():+.3f} rad/s)")
            return 0
    print(f"did not converge in {args.iterations} iterations")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
