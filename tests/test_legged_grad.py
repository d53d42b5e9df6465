"""The legged velocity task (envs.legged) through the differentiable step (SHAC, issue 53):
`enable_grad()` gives the plain step's observations, rewards and terminations, and the reward's
gradient with respect to the actions is the central differences'."""

import copy

import pytest
import torch

import envs

SMOOTH_REWARDS = {"tracking_lin_vel": {"weight": 1.0, "sigma": 0.25},
                  "tracking_ang_vel": {"weight": 0.5, "sigma": 0.25},
                  "lin_vel_z": {"weight": -2.0}, "ang_vel_xy": {"weight": -0.05}, "orientation": {"weight": -1.0},
                  "torques": {"weight": -1.0e-4}, "dof_acc": {"weight": -2.5e-7}, "action_rate": {"weight": -0.01}}


def quadruped(**kwargs):
    return envs.make("quadruped", num_envs=4, seed=3, obs_noise=0.0, observation_source="state", dtype="float64",
                     device="cpu", **kwargs)


def test_differentiable_step_gives_the_plain_steps_values():
    """Eight steps with pushes every other step (the differentiable state takes each push): every
    reward term, both observation groups, terminations and the servos' torque (a torch function
    of the state, MuJoCo's actuator_force) equal the plain step's: the state to float64 round-off
    (the differentiable step's kernels sum in their own order), the float32 terms to rounding."""
    randomization = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True},
                     "push": {"mode": "interval", "interval_s": 0.08, "range": [-0.5, 0.5]}}
    plain, grad = quadruped(randomization=randomization), quadruped(randomization=randomization)
    plain.reset()
    grad.reset()
    grad.enable_grad(True)
    generator = torch.Generator().manual_seed(0)
    pushed = 0
    for _ in range(8):
        actions = torch.randn(4, plain.num_actions, generator=generator) * 0.5
        before = plain.sim.qvel.clone()
        obs_a, reward_a, term_a, out_a, _ = plain.step(actions)
        obs_b, reward_b, term_b, out_b, _ = grad.step(actions.clone().requires_grad_(True))
        pushed += int((plain.sim.qvel[:, :2] != before[:, :2]).any())
        assert reward_b.requires_grad and obs_b["policy"].requires_grad
        close = dict(rtol=1e-6, atol=1e-7)
        for name, term in plain.step_reward_terms().items():
            torch.testing.assert_close(term, grad.step_reward_terms()[name], **close, msg=name)
        torch.testing.assert_close(reward_a, reward_b.detach(), **close)
        torch.testing.assert_close(obs_a["policy"], obs_b["policy"].detach(), **close)
        torch.testing.assert_close(obs_a["critic"], obs_b["critic"].detach(), **close)
        assert torch.equal(term_a, term_b) and torch.equal(out_a, out_b)
        torch.testing.assert_close(plain.sim.view("actuator_force").float(),
                                   grad.actuator_model.applied_torque().detach(), rtol=1e-6, atol=1e-5)
        torch.testing.assert_close(plain.sim.qvel, grad.sim.qvel, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(plain.sim.qpos, grad.sim.qpos, rtol=1e-12, atol=1e-12)
    assert pushed >= 3  # the pushes happened


def test_reward_gradient_matches_central_differences():
    """d(sum of one step's rewards)/d(actions) through four physics steps with contacts (the
    smooth reward terms: contact and air-time terms are piecewise constant), against central
    differences of the float64 simulation (the terms are float32: eps 3e-3)."""
    env = quadruped(rewards=SMOOTH_REWARDS)
    env.reset()
    env.enable_grad(True)
    generator = torch.Generator().manual_seed(1)
    for _ in range(3):
        env.step(torch.randn(4, env.num_actions, generator=generator) * 0.5)
    state = env.state_dict()
    actions = (torch.randn(4, env.num_actions, generator=generator) * 0.3).requires_grad_(True)

    def reward_sum(x):
        env.load_state_dict(copy.deepcopy(state))
        return env.step(x)[1].sum()

    reward_sum(actions).backward()
    assert env.sim.view("contact_active").sum() > 0  # feet on the ground
    eps = 3e-3
    for i, j in [(0, 0), (1, 3), (2, 7), (3, 11), (0, 5)]:
        shift = torch.zeros_like(actions)
        shift[i, j] = eps
        with torch.no_grad():
            fd = (reward_sum(actions + shift) - reward_sum(actions - shift)) / (2 * eps)
        assert abs(actions.grad[i, j] - fd) <= 5e-3 * abs(fd) + 2e-6, (i, j, actions.grad[i, j].item(), fd.item())


def test_enable_grad_refuses_what_it_does_not_differentiate():
    with pytest.raises(ValueError, match="observation_source=state"):
        envs.make("quadruped", num_envs=2, device="cpu").enable_grad()
    env = quadruped(actuator={"type": "mujoco", "delay": [0, 2]})
    with pytest.raises(ValueError, match="actuator delays"):
        env.enable_grad()
    with pytest.raises(ValueError, match="pd / dc_motor"):
        quadruped(actuator={"type": "pd", "kp": 20.0, "kd": 0.5}).enable_grad()
