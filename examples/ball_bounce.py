"""Gradient descent through contact: find the initial velocity that makes a ball, thrown
from 1 m high, land at a target after bouncing once on the floor.

    python examples/ball_bounce.py

The loss is the squared distance between the ball and the target at t = 1.2 s; its gradient
with respect to the initial velocity flows back through 240 physics steps, including the
bounce (simrl.diff_step, contact forces differentiated implicitly).
"""

import argparse
import time

import torch

import simrl

BALL = """
<mujoco model="ball">
  <option timestep="0.005" integrator="Euler"/>
  <worldbody>
    <geom type="plane" size="10 10 0.1"/>
    <body name="ball" pos="0 0 1">
      <freejoint/>
      <geom type="sphere" size="0.1" mass="1" condim="1" solref="0.01 0.3"/>
    </body>
  </worldbody>
</mujoco>
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", type=float, nargs=2, default=(2.0, 0.5), help="x y of the target (m)")
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--lr", type=float, default=0.1)
    args = parser.parse_args()

    sim = simrl.Sim.from_mjcf(BALL, num_worlds=1, dtype="float64")
    target = torch.tensor([*args.target, 0.1], dtype=torch.float64)
    qpos0 = sim.qpos.clone()
    velocity = torch.tensor([[0.5, 0.0, 1.0]], dtype=torch.float64, requires_grad=True)
    optimizer = torch.optim.Adam([velocity], lr=args.lr)
    steps, substeps = 24, 10  # 240 steps of 5 ms
    ctrl = torch.zeros(1, 0, dtype=torch.float64)
    start = time.perf_counter()
    for it in range(1, args.iterations + 1):
        qvel = torch.cat([velocity, torch.zeros(1, 3, dtype=torch.float64)], dim=1)
        qpos, bounced = qpos0, False
        for _ in range(steps):
            qpos, qvel = simrl.diff_step(sim, qpos, qvel, ctrl, substeps=substeps)
            bounced |= bool(qvel[0, 2] > 0 and qpos[0, 2] < 0.2)
        error = (qpos[0, :3] - target).norm()
        loss = error.square()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if it % 10 == 0 or error < 0.01:
            print(f"iteration {it:3d}  distance to target {error.item():.4f} m  bounced {bounced}  "
                  f"v0 = {velocity.detach().numpy().round(3).tolist()[0]}  ({time.perf_counter() - start:.0f} s)",
                  flush=True)
        if error < 0.01:
            print(f"converged in {it} iterations: the ball lands within 1 cm of the target")
            return 0
    print(f"did not converge in {args.iterations} iterations (distance {error.item():.4f} m)")
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
