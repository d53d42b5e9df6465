"""A task file of the user's own (`task=PATH.yaml`, tasks.config.load_task_file and
task_overrides; issue 51 item 4): `base:` starts from a shipped task and the file overrides it
key by key; its errors are named; a run keeps its task as `task.yaml`, which train.py's resume=
and play.py's checkpoint= read when no task= is given.

The end-to-end reference is tests/data/go1_bare.xml (no actuators, no keyframe) trained, resumed
and played from nothing but a user's file that gives its actuators and start pose."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml
from hydra import compose, initialize
from omegaconf import OmegaConf

import envs
import tasks
from simrl.errors import ConfigError
from tasks.config import env_kwargs, load_task_file, register, task_overrides, validate

ROOT = Path(__file__).resolve().parents[1]
GO1 = ROOT / "tests" / "data" / "go1_bare.xml"

#: a user's Go1 task over the shipped quadruped's: the robot section of an MJCF without
#: actuators and keyframe (regular-expression keys, which Hydra's command line cannot spell)
GO1_TASK = f"""\
base: quadruped
env:
  observation_source: state
  rewards:
    feet_air_time: {{weight: 0.5}}
robot:
  mjcf: {GO1}
  keyframe: null
  foot_geoms: [FR, FL, RR, RL]
  actuators:
    - {{joints: [".*_hip_joint", ".*_thigh_joint"], type: position, stiffness: 30, damping: 1, effort_limit: 25,
       armature: 0.01}}
    - {{joints: [".*_calf_joint"], type: position, stiffness: 30, damping: 1, effort_limit: 35, armature: 0.01}}
  init_state:
    pos: [0, 0, 0.33]
    joint_pos: {{"F._thigh_joint": 0.8, "R._thigh_joint": 1.0, ".*_calf_joint": -1.5}}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_base_gives_the_shipped_task_and_the_file_overrides_it_key_by_key(tmp_path):
    task = OmegaConf.to_container(load_task_file(write(tmp_path / "go1.yaml", GO1_TASK)))
    quadruped = OmegaConf.to_container(tasks.load("quadruped"))
    assert "base" not in task and task["name"] == "quadruped"
    # the file's keys replace the base's; mappings merge, so the base's other keys stay
    assert task["env"]["observation_source"] == "state" and quadruped["env"]["observation_source"] == "sensors"
    assert task["env"]["rewards"]["feet_air_time"] == {"weight": 0.5, "threshold": 0.5}
    assert task["env"]["rewards"]["tracking_lin_vel"] == quadruped["env"]["rewards"]["tracking_lin_vel"]
    assert task["env"]["commands"] == quadruped["env"]["commands"] and task["ppo"] == quadruped["ppo"]
    assert task["robot"]["foot_geoms"] == ["FR", "FL", "RR", "RL"]  # a list replaces the base's
    assert task["robot"]["termination_geoms"] == quadruped["robot"]["termination_geoms"]
    assert task["robot"]["init_state"]["joint_pos"] == {"F._thigh_joint": 0.8, "R._thigh_joint": 1.0,
                                                        ".*_calf_joint": -1.5}
    assert task["robot"]["actuators"][1]["joints"] == [".*_calf_joint"]
    # through Hydra: task=PATH.yaml selects it, task.* overrides still apply, and it validates
    register("train")
    overrides = task_overrides("train", [f"task={tmp_path / 'go1.yaml'}", "task.env.decimation=2", "num_envs=4"])
    assert overrides == ["task=go1.yaml", "task.env.decimation=2", "num_envs=4"]
    with initialize(version_base=None):
        cfg = compose("train", overrides=overrides)
    validate(cfg, "train")
    assert cfg.task.env.decimation == 2 and cfg.task.robot.actuators[0].stiffness == 30
    assert cfg.task.env.rewards.feet_air_time.weight == 0.5


def test_the_example_task_file_stands_its_robot(monkeypatch):
    """examples/go1_task.yaml (README, "Your own robot"), from the repository's root: its robot,
    an MJCF without actuators and keyframe, stands on the section's servos from init_state's pose
    (2 s of zero actions: no episode ends, the trunk settles near 0.30 m, as the project's
    quadruped on its home keyframe)."""
    monkeypatch.chdir(ROOT)
    task = OmegaConf.to_container(load_task_file("examples/go1_task.yaml"))
    env = envs.make(task["name"], num_envs=4, device="cpu", seed=0, **env_kwargs(task))
    assert env.sim.mj_model.nu == 12 and env.robot.key is None
    env.reset()
    for _ in range(100):
        _, _, terminated, _, _ = env.step(torch.zeros(4, 12))
        assert not terminated.any()
    height = env.sim.qpos[:, 2]
    assert ((height > 0.29) & (height < 0.32)).all(), height


@pytest.mark.parametrize("text,message", [
    ("base: quadrupedd\n", r"task file .*bad.yaml: base: 'quadrupedd' is not a shipped task; available: .*quadruped"),
    ("env: {decimation: 2}\n", r"task file .*bad.yaml: give base: <a shipped task> \(ant, cartpole"),
    ("base: quadruped\nrobott: {}\n", r"invalid task file .*bad.yaml:\n  unknown key robott; did you mean 'robot'\?"),
    ("- a\n- b\n", r"task=.*bad.yaml: a task file is a mapping of task keys"),
    ("base: [\n", r"task=.*bad.yaml: not a YAML task file"),
])
def test_task_file_errors_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_task_file(write(tmp_path / "bad.yaml", text))


def test_deeper_keys_are_checked_with_the_configuration(tmp_path):
    """An unknown key inside a section is validate's error, as for a shipped task."""
    path = write(tmp_path / "mine.yaml", "base: quadruped\nrobot: {colour: red}\nenv: {decimaton: 2}\n")
    register("train")
    with initialize(version_base=None):
        cfg = compose("train", overrides=task_overrides("train", [f"task={path}"]))
    with pytest.raises(ConfigError) as info:
        validate(cfg, "train")
    assert "unknown key task.robot.colour" in str(info.value)
    assert "unknown key task.env.decimaton for environment 'quadruped'; did you mean 'decimation'?" in str(info.value)


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_scripts_name_a_missing_task_file(tmp_path):
    result = run("scripts/train.py", f"task={tmp_path / 'nope.yaml'}", f"hydra.run.dir={tmp_path / 'run'}")
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == f"simrl: task={tmp_path / 'nope.yaml'}: no such task file"


@pytest.fixture(scope="module")
def user_run(tmp_path_factory):
    """go1_bare.xml (no actuators, no keyframe) trained 2 iterations from a user's file alone
    (train.py task=FILE); the file is removed afterwards: the run's own copy is what counts."""
    tmp = tmp_path_factory.mktemp("user_task")
    user_file = write(tmp / "my_go1.yaml", GO1_TASK)
    run_dir = tmp / "run"
    result = run("scripts/train.py", f"task={user_file}", *TINY, "max_iterations=2", f"hydra.run.dir={run_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "it     2/2" in result.stdout
    user_file.unlink()
    return run_dir


TINY = ["num_envs=8", "task.ppo.num_steps_per_env=8"]


def test_a_run_keeps_its_task_and_play_finds_it(user_run, tmp_path):
    """The run's task.yaml is the task as run (the file over its base); play.py checkpoint=RUN
    with no task= evaluates the policy on it."""
    task = yaml.safe_load((user_run / "task.yaml").read_text())
    assert task == yaml.safe_load((user_run / "config.yaml").read_text())["task"]
    assert task["robot"]["mjcf"] == str(GO1) and task["robot"]["actuators"][0]["stiffness"] == 30
    assert task["env"]["rewards"]["feet_air_time"]["weight"] == 0.5
    assert task["env"]["rewards"]["tracking_lin_vel"]["weight"] == 1.0  # the base's
    played = tmp_path / "play"
    result = run("scripts/play.py", f"checkpoint={user_run}", "num_envs=2", "task.env.episode_length_s=0.2",
                 f"hydra.run.dir={played}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"simrl: task from {user_run / 'task.yaml'} (the run's own" in result.stdout
    metrics = json.loads((played / "metrics.json").read_text())
    assert metrics["checkpoint"] == str(user_run / "model_1.pt")
    played_task = yaml.safe_load((played / ".hydra" / "config.yaml").read_text())["task"]
    assert played_task["robot"] == task["robot"]


def test_resume_and_checkpoint_select_the_runs_task(user_run, tmp_path, monkeypatch):
    """resume= (train.py) and checkpoint= (play.py), a run directory, a checkpoint in one or
    `latest` (under runs/quadruped/, the task without task=), select the run's task.yaml when no
    task= is given; task= and a directory without the file leave the choice to the command line."""
    register("train")
    register("play")
    monkeypatch.chdir(tmp_path)  # latest: the newest checkpoint under ./runs/quadruped/
    assert task_overrides("play", ["checkpoint=latest"]) == ["checkpoint=latest"]  # none: the run says so
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "quadruped").symlink_to(user_run.parent)
    for config_name, key in (("train", "resume"), ("play", "checkpoint")):
        for source in (user_run, user_run / "model_1.pt"):
            assert task_overrides(config_name, [f"{key}={source}"]) == [f"{key}={source}", "task=task.yaml"]
        assert task_overrides(config_name, [f"{key}={user_run}", "task=cartpole"]) == [
            f"{key}={user_run}", "task=cartpole"]
        assert task_overrides(config_name, [f"{key}=latest"]) == [f"{key}=latest", "task=task.yaml"]
        assert task_overrides(config_name, [f"{key}={tmp_path / 'runs'}"]) == [f"{key}={tmp_path / 'runs'}"]
    with initialize(version_base=None):
        cfg = compose("train", overrides=task_overrides("train", [f"resume={user_run}"]))
    assert cfg.task.robot.mjcf == str(GO1)


@pytest.mark.slow  # 10 s: a third process of the run
def test_resume_continues_a_user_task_run_from_its_copy(user_run, tmp_path):
    resumed = tmp_path / "resumed"
    result = run("scripts/train.py", f"resume={user_run}", *TINY, "max_iterations=1", f"hydra.run.dir={resumed}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"simrl: task from {user_run / 'task.yaml'} (the run's own" in result.stdout
    assert f"resumed from {user_run / 'model_1.pt'} at iteration 2" in result.stdout and "it     3/3" in result.stdout
    assert yaml.safe_load((resumed / "task.yaml").read_text()) == yaml.safe_load((user_run / "task.yaml").read_text())
