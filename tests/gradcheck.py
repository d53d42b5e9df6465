"""The gradient check the feature tests share: one differentiable step (simrl.diff_step) of a
random linear function of the next state, against central differences."""

import numpy as np
import torch

from simrl import Sim, diff_step


def one_step_gradient_error(mjm, states: list, picks: int = 30, eps: float = 1e-6) -> float:
    """Relative error (norm over `picks` random coordinates of qpos and qvel) of d (a random
    linear function of the next state) / d (qpos, qvel) through one float64 step from `states`
    ((qpos, qvel) per world), the solver run to 1e-15, against central differences of step `eps`."""
    W = len(states)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    qpos = np.stack([q for q, _ in states])
    qvel = np.stack([v for _, v in states])
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)
    ctrl = torch.zeros(W, mjm.nu, dtype=torch.float64)

    def loss(q0, v0):
        q1, v1 = diff_step(sim, q0, v0, ctrl)
        return (q1 * wq).sum() + (v1 * wv).sum()

    q0, v0 = torch.tensor(qpos, requires_grad=True), torch.tensor(qvel, requires_grad=True)
    loss(q0, v0).backward()
    x = torch.cat([q0.detach().ravel(), v0.detach().ravel()])
    g = torch.cat([q0.grad.ravel(), v0.grad.ravel()])
    nq = qpos.size
    chosen = np.random.default_rng(3).choice(x.numel(), min(picks, x.numel()), replace=False)
    fd = []
    for i in chosen:
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            with torch.no_grad():
                values.append(loss(y[:nq].reshape(qpos.shape), y[nq:].reshape(qvel.shape)).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    return ((g[chosen] - fd).norm() / fd.norm()).item()
