"""The quadruped's observation pipeline (envs/observations.py): the defaults reproduce the
hand-written observations bit for bit; noise, scale, clip, delay and history do what GUIDE.md
"Observation pipeline" says; bad names are rejected; the history is part of the env's state."""

import math
from pathlib import Path

import pytest
import torch
import yaml

import envs
from envs.observations import check_config
from envs.quadruped import DEFAULT_RANDOMIZATION

NO_PUSH = {"friction": DEFAULT_RANDOMIZATION["friction"]}
TASK = Path(__file__).resolve().parents[1] / "tasks" / "quadruped.yaml"


def quad_env(num_envs, policy=None, **kwargs):
    """A quadruped env whose worlds end by time-out only, reset."""
    kwargs = {"device": "cpu", "seed": 0, "randomization": NO_PUSH, **kwargs}
    if policy is not None:
        kwargs["observations"] = {"policy": policy}
    env = envs.make("quadruped", num_envs=num_envs, **kwargs)
    env._terminated = lambda: torch.zeros(num_envs, dtype=torch.bool)
    env.reset()
    return env


def hand_written_policy(env, obs_noise):
    """The policy group as envs/quadruped.py computed it before the pipeline (legged_gym's scales
    and uniform noise amplitudes), drawing from the env's generator."""
    q, v = env.sim.qpos.float(), env.sim.qvel.float()
    q_seen = q + env.encoder_bias if hasattr(env, "encoder_bias") else q
    lin_vel, ang_vel, gravity = env.imu() if env.observation_source == "sensors" else env.base_state()
    clean = torch.cat([lin_vel * 2.0, ang_vel * 0.25, gravity, env.commands * torch.tensor([2.0, 2.0, 0.25]),
                       q_seen[:, 7:] - env.default_joint_pos, v[:, 6:] * 0.05, env.last_actions], dim=1)
    noise_scale = torch.cat([torch.full((3,), 0.2), torch.full((3,), 0.05), torch.full((3,), 0.05),
                             torch.zeros(3), torch.full((12,), 0.01), torch.full((12,), 0.075),
                             torch.zeros(12)]) * obs_noise
    return clean + (env.rand(*clean.shape) * 2 - 1) * noise_scale


@pytest.mark.parametrize("source,obs_noise", [("sensors", 1.0), ("state", 0.5)])
def test_defaults_equal_the_hand_written_observations_bit_for_bit(source, obs_noise):
    env = quad_env(6, observation_source=source, obs_noise=obs_noise,
                   randomization={**NO_PUSH, "encoder_bias": {"mode": "reset", "range": [-0.05, 0.05]}})
    gen = torch.Generator()
    for _ in range(3):
        env.step(torch.randn(6, 12, generator=gen))
        draws = env.generator.get_state()
        policy = env.observations()["policy"]
        after = env.generator.get_state()
        env.generator.set_state(draws)
        expected = hand_written_policy(env, obs_noise)
        assert torch.equal(policy, expected)
        assert torch.equal(env.generator.get_state(), after)  # the same draws, no more


def test_the_task_files_pipeline_is_the_default():
    cfg = yaml.safe_load(TASK.read_text())["env"]
    a = quad_env(4, obs_noise=cfg["obs_noise"], observations=cfg["observations"])
    b = quad_env(4)
    for _ in range(2):
        oa, ob = a.step(torch.ones(4, 12) * 0.3)[0], b.step(torch.ones(4, 12) * 0.3)[0]
        assert torch.equal(oa["policy"], ob["policy"]) and oa["policy"].shape == (4, 48)


def test_noise_statistics_uniform_bounds_and_gaussian_std():
    """gaussian std 0.3 (x obs_noise 0.5) on base_lin_vel, uniform 0.2 on joint_pos: policy -
    critic is N(0, 0.15^2) (std within 4%: 12288 samples, 5 standard errors are 3.2%) and
    U(-0.1, 0.1) (bounded, std a / sqrt(3) within 4%, the whole interval reached)."""
    env = quad_env(256, obs_noise=0.5, observation_source="state",
                   policy={"base_lin_vel": {"noise": {"type": "gaussian", "std": 0.3}},
                           "joint_pos": {"noise": {"type": "uniform", "scale": 0.2}}})
    noise = torch.cat([o["policy"] - o["critic"][:, :48] for o in (env.observations() for _ in range(16))]).double()
    gauss, unif = noise[:, 0:3].reshape(-1), noise[:, 12:24].reshape(-1)
    assert abs(gauss.std().item() / 0.15 - 1) < 0.04
    assert abs(gauss.mean().item()) < 5 * 0.15 / math.sqrt(gauss.numel())
    assert gauss.abs().max().item() > 3 * 0.15  # tails, not a bounded distribution
    assert unif.abs().max().item() <= 0.1 * (1 + 1e-6) and unif.abs().max().item() > 0.099
    assert abs(unif.std().item() / (0.1 / math.sqrt(3)) - 1) < 0.04
    assert torch.all(noise[:, 9:12] == 0)  # commands: no noise


def test_scale_and_clip_closed_form():
    env = quad_env(8, observation_source="state",
                   policy={"joint_vel": {"scale": 0.1, "noise": None, "clip": [-0.2, 0.3]},
                           "commands": {"scale": [1.0, -3.0, 0.5], "clip": [-1.0, 1.0]}})
    qvel = torch.randn(8, env.sim.nv, generator=torch.Generator().manual_seed(1)) * 4.0
    env.sim.qvel[:] = qvel
    env._state_loaded()
    policy = env.observations()["policy"]
    expected_vel = torch.clamp(qvel[:, 6:] * 0.1, -0.2, 0.3)
    assert (expected_vel == 0.3).any() and (expected_vel == -0.2).any()  # both bounds are hit
    assert torch.equal(policy[:, 24:36], expected_vel)
    assert torch.equal(policy[:, 9:12], torch.clamp(env.commands * torch.tensor([1.0, -3.0, 0.5]), -1.0, 1.0))


def test_delay_returns_the_value_of_n_steps_ago_and_zero_before():
    """base_ang_vel delayed 2 policy steps: at step t it is the undelayed env's (same seed, same
    noise draws) value of step t - 2; zero on the first two observations of the episode."""
    delayed = quad_env(4, policy={"base_ang_vel": {"delay": 2}})
    plain = quad_env(4)
    a, b = [delayed.reset()["policy"]], [plain.reset()["policy"]]
    actions = torch.randn(6, 4, 12, generator=torch.Generator().manual_seed(2)) * 0.5
    for act in actions:
        a.append(delayed.step(act)[0]["policy"])
        b.append(plain.step(act)[0]["policy"])
    for t in range(len(a)):
        assert torch.equal(a[t][:, 3:6], b[t - 2][:, 3:6] if t >= 2 else torch.zeros(4, 3))
        assert torch.equal(a[t][:, :3], b[t][:, :3]) and torch.equal(a[t][:, 6:], b[t][:, 6:])


def test_history_stacks_oldest_first_and_restarts_with_the_world():
    k = 3
    stacked, plain = quad_env(4, policy={"history": k}), quad_env(4)
    frames = [plain.reset()["policy"]]
    out = [stacked.reset()["policy"]]
    assert out[0].shape == (4, k * 48)
    assert torch.equal(out[0], torch.cat([torch.zeros(4, 96), frames[0]], dim=1))
    act = torch.full((4, 12), 0.2)
    for _ in range(3):
        frames.append(plain.step(act)[0]["policy"])
        out.append(stacked.step(act)[0]["policy"])
    assert torch.equal(out[-1], torch.cat(frames[-3:], dim=1))
    for env in (stacked, plain):  # world 1 times out at the next step
        env.episode_length_buf[1] = env.max_episode_length - 1
    frames.append(plain.step(act)[0]["policy"])
    last = stacked.step(act)[0]["policy"]
    assert torch.equal(last[1], torch.cat([torch.zeros(96), frames[-1][1]]))
    assert torch.equal(last[[0, 2, 3]], torch.cat(frames[-3:], dim=1)[[0, 2, 3]])


def test_unknown_names_are_rejected_with_the_valid_ones():
    with pytest.raises(ValueError, match="unknown observation term 'base_vel'.*base_lin_vel, base_ang_vel"):
        quad_env(2, policy={"base_vel": {"scale": 1.0}})
    with pytest.raises(ValueError, match=r"unknown keys \['gain'\]"):
        quad_env(2, policy={"joint_pos": {"gain": 1.0}})
    with pytest.raises(ValueError, match="a list of 3 numbers"):
        quad_env(2, policy={"commands": {"scale": [1.0, 2.0]}})
    terms = {"policy": ["base_lin_vel"]}
    assert check_config({"policy": {"base_lin_vel": {"delay": 1}, "history": 2}}, terms) == []
    for bad, message in [({"critic": {}}, "privileged"), ({"policy": {"history": 0}}, "history"),
                         ({"policy": {"base_lin_vel": {"noise": {"type": "gaussian", "scale": 1}}}}, "std"),
                         ({"policy": {"base_lin_vel": {"clip": [1, -1]}}}, "clip"),
                         ({"policy": {"base_lin_vel": {"delay": -1}}}, "delay")]:
        errors = check_config(bad, terms)
        assert len(errors) >= 1 and message in errors[0], (bad, errors)


def test_task_config_checks_observation_terms():
    from omegaconf import OmegaConf

    from tasks.config import check_env

    errors = check_env("quadruped", OmegaConf.create({"observations": {"policy": {"lin_vel": {}}}}))
    assert len(errors) == 1 and "unknown observation term 'lin_vel'" in errors[0]


def test_state_dict_round_trip_with_delay_and_history():
    policy = {"history": 2, "joint_vel": {"delay": 1}}
    a = quad_env(4, policy=policy)
    act = torch.randn(5, 4, 12, generator=torch.Generator().manual_seed(3)) * 0.5
    for x in act[:3]:
        a.step(x)
    state = a.state_dict()
    assert state["tensors"]["observation_history.policy"].shape == (4, 2, 48)
    expected = [a.step(x)[0]["policy"] for x in act[3:]]
    b = quad_env(4, policy=policy, seed=9)
    b.load_state_dict(state)
    assert all(torch.equal(b.step(x)[0]["policy"], e) for x, e in zip(act[3:], expected, strict=True))
    with pytest.raises(ValueError, match="observation_history.policy"):
        quad_env(4).load_state_dict(state)
