"""Failures a user meets, and what they are told: bad configurations, bad actions, unusable
checkpoints (another task, corrupt, unsafe, half-written), resuming exactly, Ctrl-C, a world
that goes non-finite (contained, reset, logged; training goes on) and determinism."""

import contextlib
import io
import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize
from hydra.errors import ConfigCompositionException, MissingConfigException
from omegaconf import OmegaConf

import envs
from envs.rsl_rl import RslRlVecEnv
from simrl.errors import CheckpointError, ConfigError
from simrl.rl import checkpoint as checkpoints
from simrl.rl import ppo
from simrl.rl.checkpoint import find_latest_checkpoint, load_checkpoint
from simrl.rl.train import train as train_run
from tasks.config import TaskEnvFactory, check_overrides, env_kwargs, register, validate

ROOT = Path(__file__).resolve().parents[1]
register("train")  # the `train` config, as scripts/train.py registers it

# a tiny cart-pole run: 8 worlds x 24 steps per iteration
TINY = ["task=cartpole", "num_envs=8", "seed=3"]


def config(*overrides):
    with initialize(version_base=None):
        return compose("train", overrides=list(overrides))


def train(run_dir, *overrides, runs_root="runs"):
    """scripts/train.py in this process (its validation, then its run); returns (exit status,
    stdout)."""
    cfg = config(*TINY, *overrides)
    validate(cfg, "train")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        status = train_run(cfg, Path(run_dir), TaskEnvFactory(cfg.task), runs_root=runs_root)
    return status, out.getvalue()


# ------------------------------------------------------------------------ 1. configuration
@pytest.mark.parametrize("overrides,message", [
    (["num_envs=0"], "num_envs must be a positive integer or null, got 0"),
    (["num_envs=-8"], "num_envs must be a positive integer or null, got -8"),
    (["num_envs=abc"], "num_envs must be a positive integer or null, got 'abc'"),
    (["num_envs=2.5"], "num_envs must be a positive integer or null, got 2.5"),
    (["max_iterations=-1"], "max_iterations must be a positive integer or null, got -1"),
    (["seed=abc"], "seed must be a non-negative integer, got 'abc'"),
    (["algo=sac"], "algo must be one of 'ppo', 'shac', got 'sac'"),
    (["algo=shac"], "algo=shac: task 'cartpole' has no `shac` section (SHAC needs a task with a differentiable step"),
    (["task=cartpole_swingup", "algo=shac", "task.shac.horizon=0"], "task.shac.horizon must be a positive integer"),
    (["task=cartpole_swingup", "algo=shac", "+task.shac.horizn=8"], "unknown key task.shac.horizn; did you mean"),
    (["task=cartpole_swingup", "task.shac.num_envs=0"], "task.shac.num_envs must be a positive integer or null, got 0"),
    (["~task.ppo.num_steps_per_env"], "task.ppo.num_steps_per_env must be a positive integer, got None"),
    (["+num_env=64"], "unknown key num_env; did you mean 'num_envs'?"),
    (["task.env.decimation=0"], "task.env.decimation must be a positive integer, got 0"),
    (["task.env.episode_length_s=-1"], "task.env.episode_length_s must be a number > 0, got -1"),
    (["task.env.episode_length_s=abc"], "task.env.episode_length_s must be a number > 0, got 'abc'"),
    (["task.env.terminations.pole_fallen.limit=[1,2]"],
     "task.env.terminations.pole_fallen.limit must be a finite number, got [1, 2]"),
    (["+task.env.terminations.pole_fallen.limt=0.3"],
     "unknown key task.env.terminations.pole_fallen.limt; did you mean 'limit'?"),
    (["+task.env.terminations.pole_falen={}"],
     "task.env.terminations: unknown termination term 'pole_falen' for CartpoleEnv; did you mean 'pole_fallen'?"),
    (["task.env.rewards.alive.weight=abc"], "task.env.rewards.alive.weight must be a finite number, got 'abc'"),
    (["+task.env.decimaton=2"],
     "unknown key task.env.decimaton for environment 'cartpole'; did you mean 'decimation'?"),
    # the form before the terms: refused with what to write instead
    (["+task.env.max_angle=0.3"], "task.env.max_angle is the former form of the task's terminations (task files list "
     "terms by section, envs/terms.py): write task.env.terminations.pole_fallen.limit=0.3"),
    (["task=quadruped", "+task.env.reward_weights={termination: -5.0}"],
     "task.env.reward_weights is the former form of the task's rewards (task files list terms by section, "
     "envs/terms.py): write task.env.rewards: {termination: {weight: -5.0}}"),
    (["task=quadruped", "+task.env.tracking_sigma=0.5"],
     "write task.env.rewards.tracking_lin_vel.sigma=0.5 and task.env.rewards.tracking_ang_vel.sigma=0.5"),
    (["task=quadruped", "+task.env.lin_vel_x=[0,1]"], "write task.env.commands.base_velocity.lin_vel_x=[0, 1]"),
    (["task=quadruped", "+task.env.min_base_height=0.2"],
     "write task.env.terminations.base_height.min_height=0.2"),
    (["task=quadruped_rough", "+task.env.command_curriculum=true", "+task.env.max_lin_vel_x=1.5"],
     "list the term, task.env.curriculum.command_vel: {max_lin_vel_x: 1.5}"),
    (["+task.env.num_envs=4"], "task.env.num_envs: set the top-level key num_envs=... instead"),
    (["task.env.nonfinite_actions=clamp"], "task.env.nonfinite_actions must be one of 'error', 'zero', got 'clamp'"),
    (["task=quadruped", "task.env.observation_source=imu"],
     "task.env.observation_source must be one of 'sensors', 'state', got 'imu'"),
    (["task.ppo.num_steps_per_env=0"], "task.ppo.num_steps_per_env must be a positive integer, got 0"),
    (["+task.ppo.sync_free=maybe"], "task.ppo.sync_free must be true, false or auto (true on CUDA), got 'maybe'"),
    (["+task.ppo.cuda_graph=1"], "task.ppo.cuda_graph must be true, false or auto"),
    (["task.ppo.algorithm.gamma=1.5"], "task.ppo.algorithm.gamma must be a number in (0, 1], got 1.5"),
    (["task.ppo.algorithm.learning_rate=-0.1"], "task.ppo.algorithm.learning_rate must be a number > 0, got -0.1"),
    (["+task.ppo.algorithm.lerning_rate=0.1"],
     "unknown key task.ppo.algorithm.lerning_rate; did you mean 'learning_rate'?"),
    (["device=cuda:3"], "device='cuda:3' does not exist here; available devices: cpu"),
    (["device=gpu"], "device='gpu' does not exist here; available devices: cpu"),
])
def test_bad_configurations_are_named(overrides, message):
    with pytest.raises(ConfigError) as info:
        validate(config("task=cartpole", *overrides))
    assert message in str(info.value)


def test_every_problem_is_listed_and_the_shipped_tasks_are_valid():
    with pytest.raises(ConfigError) as info:
        validate(config("task=cartpole", "num_envs=0", "max_iterations=-2", "task.env.decimation=-1"))
    text = str(info.value)
    assert "num_envs must" in text and "max_iterations must" in text and "task.env.decimation must" in text
    for task in ("cartpole", "cartpole_swingup", "quadruped"):
        validate(config(f"task={task}"))


def test_each_section_is_a_typed_dataclass_with_its_checks():
    """A schema builds its section from a mapping (defaults filled in, nested sections typed)
    and refuses a wrong one with the lines validate gives; the task registry's sections too."""
    from simrl.rl.config import PpoCfg, ShacCfg
    from tasks.config import ENV_SECTIONS, PlayCfg, TrainCfg, check_env

    cfg = TrainCfg.from_dict(OmegaConf.to_container(config("task=cartpole_swingup", "seed=7"), resolve=True))
    assert (cfg.seed, cfg.algo, cfg.sim.backend, cfg.dist_timeout_s) == (7, "ppo", "warp", 900)
    ppo, shac = cfg.task.ppo, cfg.task.shac
    assert isinstance(ppo, PpoCfg) and ppo.num_steps_per_env == 32 and ppo.cuda_graph is False
    assert isinstance(shac, ShacCfg) and shac.horizon == 32 and shac.reward_scale == 1.0
    # num_envs null: 100 evaluation worlds, or the viewer's 4 (simrl.rl.play)
    assert PlayCfg.defaults() == {"checkpoint": None, "num_envs": None, "num_episodes": None, "device": "auto",
                                  "seed": 1, "video": False, "video_length_s": 10.0,
                                  "sim": {"backend": "warp", "njmax": None, "nconmax": None,
                                          "strict": False},
                                  "viewer": None, "viewer_host": "127.0.0.1", "viewer_port": 8080,
                                  "viewer_seconds": None}
    with pytest.raises(ConfigError, match=r"configuration:\n  task.shac.horizon must be a positive integer, got 0"):
        ShacCfg.from_dict({"horizon": 0})
    assert ShacCfg.check({"horizn": 4}) == ["unknown key task.shac.horizn; did you mean 'horizon'?"]
    assert sorted(ENV_SECTIONS) == ["actuator", "commands", "curriculum", "observations", "randomization", "rewards",
                                    "terminations"]
    assert check_env("cartpole", {"terminations": {"pole_fallen": {"limit": "far"}}}) == [
        "task.env.terminations.pole_fallen.limit must be a finite number, got 'far'"]
    assert check_env("quadruped", {"actuator": {"type": "servo"}, "decimation": 0}) == [
        "task.env.actuator.type: one of mujoco, pd, dc_motor, got 'servo'", "task.env.decimation must be a positive "
        "integer, got 0"]


def test_hydra_names_unknown_tasks_and_keys():
    with pytest.raises(MissingConfigException) as info:
        config("task=no_such_task")
    assert "no_such_task" in str(info.value) and "cartpole" in str(info.value)  # lists the tasks
    with pytest.raises(ConfigCompositionException) as info:
        config("task=cartpole", "num_env=64")
    assert "num_env" in str(info.value)


@pytest.mark.parametrize("overrides,message", [
    (["num_env=16"], "unknown key num_env; did you mean 'num_envs'?"),
    (["seeds=3"], "unknown key seeds; did you mean 'seed'?"),
    (["max_iteration=3", "algos=shac"], "unknown key max_iteration; did you mean 'max_iterations'?\n  "
                                        "unknown key algos; did you mean 'algo'?"),
    (["sim.backnd=mujoco"], "unknown key sim.backnd; did you mean 'sim.backend'?"),
    (["colour=red"], "unknown key colour; known keys: algo, device, dist_timeout_s, init_policy, max_iterations"),
])
def test_misspelt_top_level_keys_are_named_before_hydra(overrides, message):
    with pytest.raises(ConfigError) as info:
        check_overrides("train", ["task=cartpole", *overrides])
    assert message in str(info.value)


def test_overrides_hydra_handles_are_left_to_it():
    # known keys, the task group and its fields, additions, deletions, hydra's own keys and flags
    check_overrides("train", ["task=quadruped", "num_envs=16", "sim.backend=mujoco", "task.env.decimation=2",
                              "task.env.no_such_key=1", "+extra=1", "~seed", "hydra.run.dir=/tmp/x",
                              "hydra/job_logging=none", "--cfg", "job", "-m"])


def test_train_script_exits_with_the_message_and_no_traceback(tmp_path):
    result = subprocess.run([sys.executable, "scripts/train.py", "task=cartpole", "num_envs=-4", "max_iterations=-1",
                             "device=cuda:3", f"hydra.run.dir={tmp_path}"], cwd=ROOT, capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    assert "simrl: invalid configuration" in result.stderr
    assert "num_envs must be a positive integer or null, got -4" in result.stderr
    assert "max_iterations must be a positive integer or null, got -1" in result.stderr
    assert "device='cuda:3' does not exist here; available devices: cpu" in result.stderr
    assert "Traceback" not in result.stderr


def test_progress_line_shows_a_dash_until_an_episode_ends(tmp_path):
    # a pole allowed to fall to 3.2 rad does not end any episode in the first 24 steps
    status, out = train(tmp_path, "max_iterations=1", "task.env.terminations.pole_fallen.limit=3.2")
    assert status == 0
    line = next(line for line in out.splitlines() if line.startswith("it "))
    assert "return         -  length       -  " in line and "nan" not in out, line
    assert "mean return -, mean episode length -;" in out


# ------------------------------------------------------------------------------ 2. actions
def test_bad_actions_are_named():
    env = envs.make("cartpole", num_envs=3, device="cpu")
    env.reset()
    with pytest.raises(ValueError, match=r"actions must have shape \(3, 1\) \[num_envs, num_actions\], got \(3,\)"):
        env.step(torch.zeros(3))
    with pytest.raises(TypeError, match="actions must be a floating point tensor, got dtype torch.int64"):
        env.step(torch.zeros(3, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="actions must be a torch.Tensor, got list"):
        env.step([[0.0]] * 3)
    with pytest.raises(ValueError, match="actions must be on device cpu, got a tensor on meta"):
        env.step(torch.zeros(3, 1, device="meta"))
    bad = torch.zeros(3, 1)
    bad[1] = float("nan")
    with pytest.raises(ValueError, match=r"NaN or inf \(1 entries in 1 of 3 worlds, e.g. world 1\).*nonfinite_actions"):
        env.step(bad)
    bad[1] = float("inf")
    with pytest.raises(ValueError, match="NaN or inf"):
        env.step(bad)
    with pytest.raises(ValueError, match="nonfinite_actions must be 'error' or 'zero', got 'clamp'"):
        envs.make("cartpole", num_envs=2, nonfinite_actions="clamp")


def test_nonfinite_actions_zero_repairs_and_counts():
    env = envs.make("cartpole", num_envs=3, device="cpu", seed=1, nonfinite_actions="zero")
    twin = envs.make("cartpole", num_envs=3, device="cpu", seed=1)
    env.reset(), twin.reset()
    actions = torch.tensor([[0.5], [float("nan")], [-float("inf")]])
    _, _, _, _, extras = env.step(actions)
    twin.step(torch.tensor([[0.5], [0.0], [0.0]]))
    assert torch.equal(env.sim.qpos, twin.sim.qpos) and torch.equal(env.sim.qvel, twin.sim.qvel)
    assert extras["log"]["Diagnostics/nonfinite_actions"] == 2
    assert torch.isnan(actions[1, 0])  # the caller's tensor is not modified
    env.step(actions)
    assert int(env.nonfinite_action_count) == 4


def test_step_leaves_the_callers_actions_alone_when_worlds_reset():
    env = envs.make("cartpole", num_envs=2, device="cpu", seed=0, episode_length_s=0.04)  # 2 steps
    env.reset()
    actions = torch.full((2, 1), 0.5)
    env.step(actions), env.step(actions)
    assert (env.episode_length_buf == 0).all()  # both worlds were reset
    assert torch.equal(actions, torch.full((2, 1), 0.5))


# -------------------------------------------------------------------- 3, 4. checkpoints, resume
def test_env_state_of_an_earlier_version_loads_with_a_warning():
    """A quadruped state saved before the randomization terms and actuator models (it has
    env_friction and lacks their per-world state) loads, warns, and steps; any other
    difference is still refused."""
    a = envs.make("quadruped", num_envs=2, device="cpu", seed=0)
    a.reset()
    state = a.state_dict()
    old = dict(state, tensors={k: v for k, v in state["tensors"].items()
                               if not k.startswith(("actuator_state.", "randomization_timers."))})
    old["tensors"]["env_friction"] = torch.ones(2)
    b = envs.make("quadruped", num_envs=2, device="cpu", seed=1)
    b.reset()
    with pytest.warns(UserWarning, match="earlier version of QuadrupedEnv"):
        b.load_state_dict(old)
    torch.testing.assert_close(b.sim.qpos, a.sim.qpos)
    b.step(torch.zeros(2, b.num_actions))
    state = b.state_dict()
    bad = dict(state, tensors={**state["tensors"], "episode_sums.not_a_term": torch.ones(2)})
    with pytest.raises(ValueError, match="episode_sums.not_a_term"):
        b.load_state_dict(bad)


def test_env_state_round_trip_continues_exactly():
    """The quadruped (contacts, solver warm start, per-world friction, masses (and their
    invweight0), pushes on a random interval, action and actuator delays, an explicit PD, command
    resampling, resets, observation noise): an env restored from another's state_dict steps
    exactly as the original does."""
    randomization = {"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True},
                     "push": {"mode": "interval", "interval_s": [0.04, 0.08], "range": [-0.5, 0.5]},
                     "body_mass": {"mode": "reset", "range": [0.8, 1.2]},
                     "action_delay": {"mode": "reset", "range": [0, 2]}}
    kwargs = dict(num_envs=3, device="cpu", episode_length_s=0.1, commands={"base_velocity": {"resample_s": 0.04}},
                  randomization=randomization, actuator={"type": "pd", "delay": [0, 1]})
    a = envs.make("quadruped", seed=0, **kwargs)
    a.reset()
    actions = torch.randn(20, 3, 12, generator=torch.Generator().manual_seed(0)) * 0.5
    for t in range(10):
        a.step(actions[t])
    b = envs.make("quadruped", seed=99, **kwargs)  # another seed and history
    b.reset()
    b.load_state_dict(a.state_dict())
    for t in range(10, 20):
        obs_a, rew_a, term_a, out_a, _ = a.step(actions[t])
        obs_b, rew_b, term_b, out_b, _ = b.step(actions[t])
        assert torch.equal(obs_a["policy"], obs_b["policy"]) and torch.equal(obs_a["critic"], obs_b["critic"])
        assert torch.equal(rew_a, rew_b) and torch.equal(term_a, term_b) and torch.equal(out_a, out_b)
    assert torch.equal(a.sim.qpos, b.sim.qpos)
    with pytest.raises(ValueError, match="env state is for 3 envs with 12 actions, this env has 2"):
        envs.make("quadruped", num_envs=2, device="cpu").load_state_dict(a.state_dict())


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """2 iterations in one go (a/), and 1 iteration (runs/cartpole/b/) resumed with
    resume=latest for 1 more (c/)."""
    root = tmp_path_factory.mktemp("runs")
    status_a, _ = train(root / "a", "max_iterations=2")
    status_b, _ = train(root / "runs" / "cartpole" / "b", "max_iterations=1")
    status_c, out_c = train(root / "c", "max_iterations=1", "resume=latest", runs_root=root / "runs")
    assert status_a == status_b == status_c == 0
    return root, out_c


def test_resume_latest_continues_exactly(runs):
    root, out = runs
    assert f"resumed from {root / 'runs' / 'cartpole' / 'b' / 'model_0.pt'} at iteration 1" in out
    assert "it     2/2" in out  # the iteration counter continues
    a, c = load_checkpoint(root / "a" / "model_1.pt"), load_checkpoint(root / "c" / "model_1.pt")
    for part in ("actor_state_dict", "critic_state_dict"):  # weights, noise std, observation normalizers
        assert a[part].keys() == c[part].keys()
        for key in a[part]:
            assert torch.equal(a[part][key], c[part][key]), (part, key)
    opt_a, opt_c = a["optimizer_state_dict"], c["optimizer_state_dict"]
    assert opt_a["param_groups"] == opt_c["param_groups"]  # learning rate (adaptive schedule) included
    for i, state in opt_a["state"].items():
        for key, value in state.items():
            assert torch.equal(value, opt_c["state"][i][key])
    assert a["simrl"]["completed_iterations"] == c["simrl"]["completed_iterations"] == 2
    curve_a, curve_c = a["simrl"]["training"]["curve"], c["simrl"]["training"]["curve"]
    assert [x["mean_return"] for x in curve_a] == [x["mean_return"] for x in curve_c]


def test_checkpoint_of_another_task_is_refused(runs, tmp_path):
    root, _ = runs
    checkpoint = root / "runs" / "cartpole" / "b" / "model_0.pt"
    # cartpole_swingup has the same observation and action sizes: only the stored task name tells
    with pytest.raises(SystemExit) as info:
        train(tmp_path / "x", "task=cartpole_swingup", f"resume={checkpoint}")
    assert f"checkpoint {checkpoint} was trained on task 'cartpole', not 'cartpole_swingup'" in str(info.value)
    saved = load_checkpoint(checkpoint)
    saved["simrl"]["obs_sizes"]["policy"] = [7]
    other = tmp_path / "model_0.pt"
    torch.save(saved, other)
    with pytest.raises(SystemExit, match=r"observation sizes \{'policy': \[7\], 'critic': \[5\]\}"):
        train(tmp_path / "y", f"resume={other}")


def test_init_policy_starts_a_new_run_from_another_runs_actor(runs, tmp_path):
    """init_policy= loads the actor (weights, observation normalizer, action noise) of a
    checkpoint of another task with the same policy sizes; the critic keeps its fresh weights
    and the run starts at iteration 0."""
    root, _ = runs
    checkpoint = root / "runs" / "cartpole" / "b" / "model_0.pt"
    saved = load_checkpoint(checkpoint)
    swingup = ["task=cartpole_swingup", "task.ppo.actor_hidden_dims=[64,64]"]  # cartpole's actor network
    task = OmegaConf.to_container(config(*TINY, *swingup).task, resolve=True)
    env = envs.make("cartpole_swingup", num_envs=8, device="cpu", seed=3, **env_kwargs(task))
    runner = ppo.Runner(RslRlVecEnv(env), ppo.rsl_rl_config(task["ppo"]), log_dir=None, device="cpu",
                        key_terms=[], task="cartpole_swingup")
    fresh_actor = {k: v.clone() for k, v in runner.alg.get_policy().state_dict().items()}
    fresh_critic = {k: v.clone() for k, v in runner.alg._raw_critic.state_dict().items()}
    meta = runner.load_policy(str(checkpoint))
    assert meta["task"] == "cartpole" and meta["completed_iterations"] == 1
    actor, critic = runner.alg.get_policy().state_dict(), runner.alg._raw_critic.state_dict()
    assert not torch.equal(fresh_actor["mlp.0.weight"], saved["actor_state_dict"]["mlp.0.weight"])
    for key, value in saved["actor_state_dict"].items():  # weights, std, normalizer statistics
        assert torch.equal(actor[key], value), key
    for key, value in fresh_critic.items():
        assert torch.equal(critic[key], value), key
    assert runner.current_learning_iteration == 0

    status, out = train(tmp_path / "s", *swingup, "max_iterations=1", f"init_policy={checkpoint}")
    assert status == 0
    assert f"policy initialised from {checkpoint} (task cartpole, 1 iterations)" in out
    assert "it     1/1" in out
    # another network, a policy of other sizes, both keys at once, `latest`
    with pytest.raises(SystemExit, match=r"policy does not fit this one \(RuntimeError: Error\(s\) in loading"):
        train(tmp_path / "w", "task=cartpole_swingup", f"init_policy={checkpoint}")
    saved["simrl"]["obs_sizes"]["policy"] = [7]
    other = tmp_path / "model_0.pt"
    torch.save(saved, other)
    with pytest.raises(SystemExit, match=r"has a policy for observations \[7\] and 1 actions; task 'cartpole' "
                                         r"has \[5\] and 1"):
        train(tmp_path / "t", f"init_policy={other}")
    with pytest.raises(SystemExit, match="give one of them"):
        train(tmp_path / "u", f"init_policy={checkpoint}", f"resume={checkpoint}")
    with pytest.raises(SystemExit, match="init_policy=latest would pick this task's own newest run"):
        train(tmp_path / "v", "init_policy=latest")


def test_corrupt_and_truncated_checkpoints_name_the_file(runs, tmp_path):
    root, _ = runs
    data = (root / "runs" / "cartpole" / "b" / "model_0.pt").read_bytes()
    cases = {"truncated.pt": data[: len(data) // 2], "garbage.pt": b"not a checkpoint" * 10, "empty.pt": b""}
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(CheckpointError, match="is corrupt or truncated") as info:
            load_checkpoint(tmp_path / name)
        assert str(tmp_path / name) in str(info.value)
    torch.save(torch.zeros(3), tmp_path / "tensor.pt")
    with pytest.raises(CheckpointError, match="is not a training checkpoint"):
        load_checkpoint(tmp_path / "tensor.pt")
    with pytest.raises(SystemExit) as info:  # through train.py
        train(tmp_path / "z", f"resume={tmp_path / 'truncated.pt'}")
    assert f"checkpoint {tmp_path / 'truncated.pt'} is corrupt or truncated" in str(info.value)
    with pytest.raises(SystemExit, match="no such checkpoint file or run directory"):
        train(tmp_path / "z", f"resume={tmp_path / 'missing.pt'}")


class _Payload:
    def __init__(self, path):
        self.path = path

    def __reduce__(self):  # unpickling would create a directory: code from the file running
        return os.makedirs, (self.path,)


def test_loading_a_checkpoint_runs_no_code(tmp_path):
    marker = tmp_path / "code_ran"
    torch.save({"actor_state_dict": _Payload(str(marker)), "iter": 0}, tmp_path / "evil.pt")
    with pytest.raises(CheckpointError, match="holds objects other than tensors and plain containers") as info:
        load_checkpoint(tmp_path / "evil.pt")
    assert str(tmp_path / "evil.pt") in str(info.value)
    assert not marker.exists()


def test_an_interrupted_write_leaves_the_previous_checkpoint(runs, tmp_path, monkeypatch):
    root, _ = runs
    run = tmp_path / "runs" / "cartpole" / "run"
    run.mkdir(parents=True)
    good = run / "model_0.pt"
    good.write_bytes((root / "runs" / "cartpole" / "b" / "model_0.pt").read_bytes())
    before = good.read_bytes()

    def crash(obj, f):  # half the bytes reach the disk, then the process "dies"
        f.write(before[: len(before) // 2])
        raise KeyboardInterrupt

    monkeypatch.setattr(checkpoints.torch, "save", crash)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.atomic_torch_save({"x": torch.zeros(1)}, str(good))
    monkeypatch.undo()
    assert good.read_bytes() == before and [p.name for p in run.iterdir()] == ["model_0.pt"]
    # a hard crash (kill -9) leaves the temporary file behind: it is never taken for a checkpoint
    (run / ".tmp_abc123.pt").write_bytes(before[: len(before) // 3])
    time.sleep(0.01)
    os.utime(run / ".tmp_abc123.pt")
    assert find_latest_checkpoint("cartpole", tmp_path / "runs") == good
    load_checkpoint(good)


def test_resume_latest_picks_the_newest_checkpoint_of_the_task(tmp_path):
    with pytest.raises(CheckpointError, match=r"no checkpoint \(model_<iteration>.pt\) of task 'cartpole' under"):
        find_latest_checkpoint("cartpole", tmp_path)
    for i, name in enumerate(["cartpole/r1/model_50.pt", "cartpole/r2/model_10.pt", "quadruped/r3/model_0.pt"]):
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
        os.utime(path, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
    assert find_latest_checkpoint("cartpole", tmp_path) == tmp_path / "cartpole/r2/model_10.pt"


# ------------------------------------------------------------------------------- 5. Ctrl-C
def test_ctrl_c_saves_a_checkpoint_and_says_where(tmp_path):
    run_dir = tmp_path / "run"
    process = subprocess.Popen([sys.executable, "-u", "scripts/train.py", *TINY, "max_iterations=1000",
                                f"hydra.run.dir={run_dir}"], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        for line in process.stdout:
            if line.startswith("it "):  # the first iteration's line
                process.send_signal(signal.SIGINT)
                break
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    assert process.returncode == 130, err[-2000:]
    assert "Traceback" not in err
    saved = [line for line in out.splitlines() if "checkpoint saved to" in line]
    assert saved, out[-2000:]
    path = Path(saved[0].split("checkpoint saved to ")[1].strip())
    assert path.parent == run_dir and path.is_file()
    checkpoint = load_checkpoint(path)
    assert checkpoint["simrl"]["completed_iterations"] >= 1
    assert f"resume={path}" in out


# ------------------------------------------------------------------ 6. a world goes non-finite
FAULT_WORLD, FAULT_STEP = 3, 3


def fault_run(fault=None, steps=20):
    """Cart-pole, 8 worlds, fixed actions; `fault(sim)` is applied just before step FAULT_STEP.
    Returns each step's (observations, reward, terminated, extras["log"], episode lengths)."""
    env = envs.make("cartpole", num_envs=8, device="cpu", seed=5)
    env.reset()
    actions = torch.linspace(-0.2, 0.2, 8)[:, None]
    out = []
    for t in range(steps):
        if t == FAULT_STEP and fault is not None:
            fault(env.sim)
        obs, reward, terminated, _, extras = env.step(actions)
        assert not env.sim.nan_worlds.any()  # flagged worlds were reset inside the step
        out.append((obs["policy"].clone(), reward.clone(), terminated.clone(), dict(extras["log"]),
                    env.episode_length_buf.clone()))
    return out


def nan_qvel(sim):
    sim.qvel[FAULT_WORLD, :] = float("nan")


def impulse(sim):  # 1e9 m/s and rad/s: the float32 state overflows within the step
    sim.qvel[FAULT_WORLD, :] = 1e9


@pytest.mark.parametrize("fault", [nan_qvel, impulse])
def test_a_non_finite_world_is_reset_logged_and_contained(fault):
    reference, faulty = fault_run(), fault_run(fault)
    others = torch.arange(8) != FAULT_WORLD
    # no other world ends an episode in these 20 steps (later episodes: the test below)
    assert all((r[4][others] > 0).all() for r in reference)
    assert "Diagnostics/nan_resets" not in reference[FAULT_STEP][3]
    obs, reward, terminated, log, lengths = faulty[FAULT_STEP]
    assert torch.isfinite(obs).all() and torch.isfinite(reward).all()
    assert bool(terminated[FAULT_WORLD]) and int(lengths[FAULT_WORLD]) == 0  # ended and reset
    assert reward[FAULT_WORLD] == 0
    assert int(log["Diagnostics/nan_resets"]) == 1
    assert torch.isfinite(log["Episode_Reward/alive"])
    for t, (ref, out) in enumerate(zip(reference, faulty, strict=True)):
        assert torch.isfinite(out[0]).all() and torch.isfinite(out[1]).all(), t
        for i in range(3):  # observations, rewards, terminations of the other worlds: bit for bit
            assert torch.equal(ref[i][others], out[i][others]), (t, i)
    assert not torch.equal(reference[-1][0][FAULT_WORLD], faulty[-1][0][FAULT_WORLD])  # it did restart


def test_episode_sums_skip_a_non_finite_world():
    """cartpole_swingup's terms are functions of the state: a NaN world must not turn the
    logged episode means into NaN."""
    env = envs.make("cartpole_swingup", num_envs=4, device="cpu", seed=0)
    env.reset()
    env.sim.qvel[1] = float("nan")
    _, reward, terminated, _, extras = env.step(torch.zeros(4, 1))
    assert bool(terminated[1]) and reward[1] == 0 and int(extras["log"]["Diagnostics/nan_resets"]) == 1
    for key, value in extras["log"].items():
        assert torch.isfinite(torch.as_tensor(value, dtype=torch.float)).all(), key


def test_later_episodes_of_other_worlds_do_not_depend_on_a_fault():
    reference, faulty = fault_run(steps=40), fault_run(nan_qvel, steps=40)
    others = torch.arange(8) != FAULT_WORLD
    assert any((r[4][others] == 0).any() for r in reference)  # other worlds do reset in 40 steps
    for ref, out in zip(reference, faulty, strict=True):
        assert torch.equal(ref[0][others], out[0][others])


def test_training_goes_on_when_a_world_goes_non_finite(tmp_path, monkeypatch):
    """train.py, 1 iteration: a NaN written into one world's velocities mid-rollout does not stop
    rsl-rl (check_for_nan is on) and is logged as Diagnostics/nan_resets."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    calls = []
    step = RslRlVecEnv.step

    def step_with_fault(self, actions):
        calls.append(1)
        if len(calls) == 10:
            self.env.sim.qvel[FAULT_WORLD, :] = float("nan")
        return step(self, actions)

    monkeypatch.setattr(RslRlVecEnv, "step", step_with_fault)
    status, out = train(tmp_path, "max_iterations=1")
    assert status == 0 and len(calls) == 24, out
    actor = load_checkpoint(tmp_path / "model_0.pt")["actor_state_dict"]
    assert all(torch.isfinite(v).all() for v in actor.values())
    events = EventAccumulator(str(tmp_path))
    events.Reload()
    logged = events.Scalars("Diagnostics/nan_resets")
    assert len(logged) == 1 and logged[0].value > 0  # the mean over steps with a reset


# ---------------------------------------------------------------------------- 7. determinism
@pytest.fixture(scope="module")
def reruns(runs):
    """runs' a/ (2 iterations, seed 3) again, and with seed 4."""
    root, _ = runs
    status_a2, _ = train(root / "a2", "max_iterations=2")
    status_d, _ = train(root / "d", "max_iterations=2", "seed=4")
    assert status_a2 == status_d == 0
    return root


def test_same_seed_same_run_on_the_cpu(reruns):
    a, a2, d = (load_checkpoint(reruns / run / "model_1.pt") for run in ("a", "a2", "d"))
    curve_a, curve_a2 = (json.loads((reruns / run / "learning_curve.json").read_text()) for run in ("a", "a2"))
    returns = [c["mean_return"] for c in curve_a]
    assert len(returns) == 2 and all(math.isfinite(r) for r in returns)
    assert returns == [c["mean_return"] for c in curve_a2]
    assert [c["mean_episode_length"] for c in curve_a] == [c["mean_episode_length"] for c in curve_a2]
    for part in ("actor_state_dict", "critic_state_dict"):
        for key in a[part]:
            assert torch.equal(a[part][key], a2[part][key]), (part, key)
    assert any(not torch.equal(a["actor_state_dict"][k], d["actor_state_dict"][k]) for k in a["actor_state_dict"])


def test_sigkill_while_writing_leaves_a_loadable_checkpoint(tmp_path):
    """A process that keeps rewriting a 32 MB checkpoint is killed with SIGKILL mid-way: the
    file at the path is a complete checkpoint of one of the writes (never a mix or a stub)."""
    path = tmp_path / "model.pt"
    script = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[1])!r})\n"
        "from simrl.rl.checkpoint import atomic_torch_save\n"
        "i = 0\n"
        "while True:\n"
        f"    atomic_torch_save({{'weights': torch.full((8_000_000,), float(i)), 'iter': i}}, {str(path)!r})\n"
        "    i += 1\n"
    )
    process = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.time() + 60
        while not path.exists() and time.time() < deadline:
            time.sleep(0.05)
        assert path.exists(), "the writer never produced a checkpoint"
        time.sleep(0.5)  # several more writes are under way
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    assert process.returncode == -signal.SIGKILL
    checkpoint = torch.load(path, weights_only=True)
    weights = checkpoint["weights"]
    assert weights.numel() == 8_000_000 and bool((weights == float(checkpoint["iter"])).all())
