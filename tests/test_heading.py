"""Heading commands of the legged tasks (the base_velocity command's `heading_command`,
envs/mdp/commands.py; legged_gym's `heading_command`, Isaac Lab's UniformVelocityCommand): the
base's heading against MuJoCo's body frame, the yaw-rate command's law by hand (wrapping across
+-pi, clipping to the ang_vel_yaw range), the targets' draws, a robot steered by it, and the
settings' errors."""

import math

import mujoco
import numpy as np
import pytest
import torch
from conftest import axis_angle_quat, quat_mul

import envs

NO_PUSH = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True}}


def heading_env(n, **velocity):
    """A quadruped whose velocity command (envs/mdp/commands.py) has heading control and `velocity`."""
    env = envs.make("quadruped", num_envs=n, device="cpu", seed=0, randomization=NO_PUSH,
                    commands={"base_velocity": {"heading_command": True, **velocity}})
    env.reset()
    return env


def test_base_heading_is_the_angle_of_the_body_x_axis_in_mujoco(rng):
    """base_heading() = atan2(xmat[1, 0], xmat[0, 0]) of the trunk after mj_kinematics, for
    yawed, pitched and rolled bases."""
    n = 16
    env = heading_env(n)
    mjm = env.sim.mj_model
    qpos = np.tile(mjm.key("home").qpos, (n, 1))
    for i in range(n):
        yaw = axis_angle_quat([0, 0, 1], rng.uniform(-math.pi, math.pi))
        qpos[i, 3:7] = quat_mul(yaw, axis_angle_quat(rng.normal(size=3), rng.uniform(0, 0.8)))
    env.sim.qpos[:] = torch.as_tensor(qpos, dtype=env.sim.qpos.dtype)
    data = mujoco.MjData(mjm)
    trunk = env.robot.base_body
    expected = []
    for i in range(n):
        data.qpos[:] = qpos[i]
        mujoco.mj_kinematics(mjm, data)
        xmat = data.xmat[trunk].reshape(3, 3)
        expected.append(math.atan2(xmat[1, 0], xmat[0, 0]))
    np.testing.assert_allclose(env.base_heading().numpy(), expected, atol=1e-5)


def test_yaw_rate_command_follows_the_heading_error_wrapped_and_clipped():
    """commands[:, 2] = clip(k (target - heading) wrapped to [-pi, pi], ang_vel_yaw range), by
    hand: small errors, errors across +-pi (the short way round), clipped ones."""
    k, lo, hi = 0.8, -0.6, 0.9
    headings = np.array([0.0, 0.3, 3.0, -3.0, 1.0, 0.0, -2.5])
    targets = np.array([0.5, -0.2, -3.0, 3.0, -2.0, 3.1, 2.5])
    n = len(headings)
    env = heading_env(n, heading_stiffness=k, ang_vel_yaw=(lo, hi))
    qpos = env.sim.qpos.clone()
    qpos[:, 3] = torch.as_tensor(np.cos(headings / 2), dtype=qpos.dtype)
    qpos[:, 4:6] = 0.0
    qpos[:, 6] = torch.as_tensor(np.sin(headings / 2), dtype=qpos.dtype)
    env.sim.qpos[:] = qpos
    env.heading_target[:] = torch.as_tensor(targets, dtype=torch.float32)
    env._base_cache = env._contact_cache = None
    obs = env.observations()
    error = np.array([0.5, -0.5, 2 * math.pi - 6.0, 6.0 - 2 * math.pi, -3.0, 3.1, 5.0 - 2 * math.pi])
    expected = np.clip(k * error, lo, hi)
    np.testing.assert_allclose(env.commands[:, 2].numpy(), expected, atol=1e-5)
    # the policy sees it, noiseless (commands after the IMU's 9 columns, the yaw rate scaled by 0.25)
    np.testing.assert_allclose(obs["policy"][:, 11].numpy(), 0.25 * expected, atol=1e-6)


def test_targets_are_drawn_in_range_with_the_commands_and_kept_in_the_state():
    """Each reset and resample draws a target uniformly in heading_range; the yaw-rate command
    is no longer drawn; heading_target is per-world state (state_dict)."""
    n = 512
    env = heading_env(n, heading_range=(-1.0, 2.0), resample_s=0.1)
    first = env.heading_target.clone()
    for _ in range(5):
        env.step(torch.zeros(n, env.num_actions))
    second = env.heading_target.clone()
    for draws in (first, second):
        assert float(draws.min()) >= -1.0 and float(draws.max()) <= 2.0
        assert abs(float(draws.mean()) - 0.5) < 5 * 3.0 / math.sqrt(12 * n)
    assert (first != second).float().mean() > 0.99  # redrawn at the resample
    state = env.state_dict()
    assert torch.equal(state["tensors"]["heading_target"], env.heading_target)
    # the yaw-rate command is the law's, not a draw
    error = torch.remainder(env.heading_target - env.base_heading() + math.pi, 2 * math.pi) - math.pi
    env.observations()
    np.testing.assert_allclose(env.commands[:, 2].numpy(), torch.clamp(0.5 * error, -1.0, 1.0).numpy(), atol=1e-6)


def test_a_turning_base_meets_its_heading():
    """Closed loop with the law itself: a free base turned at the commanded yaw rate each policy
    step (no legs involved: qpos written) reaches the target heading, error shrinking by
    (1 - k dt) per step, and then its command is 0."""
    env = heading_env(4, heading_stiffness=0.5)
    env.heading_target[:] = torch.tensor([2.0, -2.0, 3.0, 0.1])
    heading = torch.zeros(4)
    dt = env.step_dt
    for _ in range(1000):
        env.sim.qpos[:, 3] = torch.cos(heading / 2).to(env.sim.qpos.dtype)
        env.sim.qpos[:, 4:6] = 0.0
        env.sim.qpos[:, 6] = torch.sin(heading / 2).to(env.sim.qpos.dtype)
        env._base_cache = env._contact_cache = None
        env.observations()
        heading = heading + dt * env.commands[:, 2]
    np.testing.assert_allclose(heading.numpy(), [2.0, -2.0, 3.0, 0.1], atol=1e-3)
    assert float(env.commands[:, 2].abs().max()) < 1e-3


@pytest.mark.parametrize("kwargs, message", [
    ({"heading_stiffness": 0.0}, "heading_stiffness must be > 0"),
    ({"heading_range": (-4.0, 1.0)}, "heading_range must be"),
    ({"heading_range": (1.0, 0.0)}, "heading_range must be"),
])
def test_bad_heading_settings_are_errors(kwargs, message):
    with pytest.raises(ValueError, match=message):
        heading_env(1, **kwargs)


def test_without_heading_commands_nothing_changes():
    """heading_command off (the default): no heading state, the yaw rate is drawn."""
    env = envs.make("quadruped", num_envs=64, device="cpu", seed=0, randomization=NO_PUSH)
    env.reset()
    assert not hasattr(env, "heading_target") and "heading_target" not in env.state_dict()["tensors"]
    assert len(set(env.commands[:, 2].tolist())) == 64
