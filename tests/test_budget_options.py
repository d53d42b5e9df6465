"""The Sim's budgets from tasks and training: `sim.njmax`, `sim.nconmax` and `sim.strict` checked
by the run's configuration and passed to the Sim (tasks.config SimCfg, sim_options, the envs'
`njmax=` / `nconmax=` / `strict=`), `Diagnostics/overflow` in the env's logs, and the overflow warning
reaching the user of a rollout and of a training run.

The references: the rows each world needed in every physics step (`overflow_need`, recorded
around `Sim.step`) against the budget, for the share the log reports; the Sim's check cadence
(OVERFLOW_CHECK_STEPS physics steps) for when a rollout warns; tools/run_scalars.py reading what
a training run wrote."""

import math
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from hydra import compose, initialize

import envs
from simrl.errors import ConfigError
from simrl.rl.config import sim_options
from simrl.sim.sim import OVERFLOW_CHECK_STEPS
from tasks.config import TaskEnvFactory, register, validate

ROOT = Path(__file__).resolve().parents[1]
register("train")
register("play")

# quadruped_rough on a small terrain grid, with no terminations: a robot laid on the ground stays there
SMALL = {"rows": 2, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 30.0,
         "max_init_level": 1}


def config(*overrides, script="train"):
    with initialize(version_base=None):
        return compose(script, overrides=list(overrides))


# --------------------------------------------------------------------------- configuration
@pytest.mark.parametrize("overrides", [[], ["sim.njmax=400"], ["sim.njmax=1"], ["sim.njmax=null"],
                                       ["sim.nconmax=400"], ["sim.nconmax=1"], ["sim.nconmax=null"],
                                       ["sim.strict=true", "sim.njmax=300", "sim.nconmax=50"],
                                       ["sim.backend=mujoco", "sim.njmax=null", "sim.nconmax=null",
                                        "sim.strict=false"]])
def test_sim_njmax_nconmax_and_strict_accept_a_positive_integer_null_and_a_boolean(overrides):
    for script in ("train", "play"):
        validate(config("task=quadruped_rough", *overrides, script=script), script)


@pytest.mark.parametrize("overrides,message", [
    (["sim.njmax=0"], "sim.njmax must be a positive integer or null, got 0"),
    (["sim.njmax=-400"], "sim.njmax must be a positive integer or null, got -400"),
    (["sim.njmax=abc"], "sim.njmax must be a positive integer or null, got 'abc'"),
    (["sim.njmax='400'"], "sim.njmax must be a positive integer or null, got '400'"),
    (["sim.njmax=true"], "sim.njmax must be a positive integer or null, got True"),
    (["sim.njmax=2.5"], "sim.njmax must be a positive integer or null, got 2.5"),
    (["sim.nconmax=0"], "sim.nconmax must be a positive integer or null, got 0"),
    (["sim.nconmax=-400"], "sim.nconmax must be a positive integer or null, got -400"),
    (["sim.nconmax=abc"], "sim.nconmax must be a positive integer or null, got 'abc'"),
    (["sim.nconmax='400'"], "sim.nconmax must be a positive integer or null, got '400'"),
    (["sim.nconmax=true"], "sim.nconmax must be a positive integer or null, got True"),
    (["sim.nconmax=2.5"], "sim.nconmax must be a positive integer or null, got 2.5"),
    (["sim.strict=yes"], "sim.strict must be true or false, got 'yes'"),
    (["sim.strict=1"], "sim.strict must be true or false, got 1"),
    (["+sim.njmx=400"], "unknown key sim.njmx; did you mean 'njmax'?"),
    (["+sim.ncomax=400"], "unknown key sim.ncomax; did you mean 'nconmax'?"),
    (["+task.env.njmax=400"], "task.env.njmax: set the top-level key sim.njmax=... instead"),
    (["+task.env.nconmax=400"], "task.env.nconmax: set the top-level key sim.nconmax=... instead"),
    (["+task.env.strict=true"], "task.env.strict: set the top-level key sim.strict=... instead"),
    (["sim.backend=mujoco", "sim.njmax=400"], "sim.njmax=400: MuJoCo (sim.backend=mujoco) has no constraint-row "
     "budget; leave sim.njmax=null or use sim.backend=warp"),
    (["sim.backend=mujoco", "sim.nconmax=400"], "sim.nconmax=400: MuJoCo (sim.backend=mujoco) has no "
     "contact budget; leave sim.nconmax=null or use sim.backend=warp"),
    (["sim.backend=mujoco", "sim.strict=true"], "sim.strict=true: MuJoCo (sim.backend=mujoco) has no constraint-row "
     "budget; leave sim.strict=false or use sim.backend=warp"),
])
def test_bad_sim_budgets_are_named(overrides, message):
    for script in ("train", "play"):
        with pytest.raises(ConfigError) as info:
            validate(config("task=quadruped_rough", *overrides, script=script), script)
        assert message in str(info.value), script


def test_the_run_configuration_reaches_the_sim():
    cfg = config("task=quadruped", "sim.njmax=100", "sim.nconmax=7", "sim.strict=true")
    validate(cfg)
    assert sim_options(cfg) == {"backend": "warp", "njmax": 100, "nconmax": 7, "strict": True}
    assert sim_options(config("task=quadruped")) == {"backend": "warp", "njmax": None, "nconmax": None,
                                                     "strict": False}
    env = TaskEnvFactory(cfg.task).make(num_envs=2, device="cpu", seed=0, **sim_options(cfg))
    assert env.sim.model.budgets.njmax == 100 and env.sim.model.budgets.nconmax == 7 and env.sim.strict
    default = envs.make("quadruped", num_envs=2, device="cpu")
    budgets = default.sim.model.budgets
    assert budgets.njmax == budgets.njmax_default and budgets.nconmax == budgets.nconmax_default
    assert not default.sim.strict
    assert envs.make("ant", num_envs=2, device="cpu", njmax=20).sim.model.budgets.njmax == 20
    assert envs.make("ant", num_envs=2, device="cpu", nconmax=5).sim.model.budgets.nconmax == 5
    with pytest.raises(ValueError, match=r"njmax=100, nconmax=None, strict=False: MuJoCo \(backend 'mujoco'\) has "
                                         r"no constraint-row or contact budget"):
        envs.make("cartpole", num_envs=2, device="cpu", backend="mujoco", njmax=100)
    with pytest.raises(ValueError, match=r"njmax=None, nconmax=5, strict=False: MuJoCo \(backend 'mujoco'\) has "
                                         r"no constraint-row or contact budget; leave njmax=None, "
                                         r"nconmax=None and strict=False"):
        envs.make("cartpole", num_envs=2, device="cpu", backend="mujoco", nconmax=5)


# ----------------------------------------------------------------------------- the logs
def record_rows_needed(env) -> list:
    """Record, after each of the env's physics steps, which worlds needed more rows than the
    budget (`overflow_need` against njmax, not the flags)."""
    sim, outgrew = env.sim, []
    step = sim.step

    def recorded(n: int = 1):
        step(n)
        outgrew.append(sim.data.overflow_need.numpy()[:, 2] > sim.model.budgets.njmax)

    sim.step = recorded
    return outgrew


def lie_down(env) -> None:
    """Every robot on its side, its base 0.2 m lower (the trunk and legs on the ground)."""
    q = env.sim.qpos.clone()
    q[:, 2] -= 0.2
    q[:, 3:7] = torch.tensor([math.cos(math.pi / 4), math.sin(math.pi / 4), 0.0, 0.0], dtype=q.dtype)
    env.sim.qpos.copy_(q)


def rough(**kwargs):
    return envs.make("quadruped_rough", num_envs=4, device="cpu", seed=0, terrain=SMALL, terminations={}, **kwargs)


def test_diagnostics_overflow_is_the_share_of_worlds_that_outgrew_the_budget():
    runs = {}
    for njmax in (None, 48):
        env = rough(njmax=njmax)
        env.reset()
        lie_down(env)
        outgrew = record_rows_needed(env)
        logged, expected = [], []
        with warnings.catch_warnings():
            warnings.simplefilter("error" if njmax is None else "ignore", RuntimeWarning)
            for _ in range(4):
                start = len(outgrew)
                logged.append(float(env.step(torch.zeros(env.num_envs, env.num_actions))[4]["log"]
                                    ["Diagnostics/overflow"]))
                expected.append(float(torch.tensor(sum(outgrew[start:]) > 0).float().mean()))
        assert len(outgrew) == 4 * env.decimation
        assert logged == expected
        runs[njmax] = logged
    assert runs[None] == [0.0] * 4, "the default budget holds the robots lying on the terrain"
    assert runs[48][0] == 1.0, "every robot laid down needs more than 48 rows"


def test_diagnostics_overflow_counts_every_physics_step_of_an_env_step():
    """The ant's worlds hover at the budget: some outgrow it in an early physics step of an env
    step and not in its last, which the Sim's flags alone (the last step's) would miss."""
    env = envs.make("ant", num_envs=4, device="cpu", seed=0, njmax=24)
    env.reset()
    outgrew = record_rows_needed(env)
    logged, expected, last_only = [], [], []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(12):
            start = len(outgrew)
            logged.append(float(env.step(torch.zeros(env.num_envs, env.num_actions))[4]["log"]
                                ["Diagnostics/overflow"]))
            expected.append(float(torch.tensor(sum(outgrew[start:]) > 0).float().mean()))
            last_only.append(float(torch.tensor(outgrew[-1]).float().mean()))
    assert logged == expected
    assert any(e > last for e, last in zip(expected, last_only, strict=True)), "the rollout tells them apart"


def test_the_mujoco_backend_logs_no_overflow():
    env = envs.make("cartpole", num_envs=2, device="cpu", backend="mujoco")
    env.reset()
    assert "Diagnostics/overflow" not in env.step(torch.zeros(2, 1))[4]["log"]


# --------------------------------------------------------------------- warnings and strict
def test_strict_raises_overflow_error_naming_njmax():
    env = rough(njmax=48, strict=True)
    env.reset()
    lie_down(env)
    with pytest.raises(OverflowError, match=r"outgrew njmax=48 \(they needed up to \d+\).*sim\.njmax=\d+"):
        env.step(torch.zeros(env.num_envs, env.num_actions))


def test_a_rollout_warns_once_when_the_sim_reads_its_flags():
    """The ant's reset runs no forward pass: the first read of the flags is Sim.step's, after
    OVERFLOW_CHECK_STEPS physics steps; then the warning is not repeated."""
    env = envs.make("ant", num_envs=4, device="cpu", seed=0, njmax=16)  # its fixed rows only: any contact outgrows it
    env.reset()
    due = OVERFLOW_CHECK_STEPS // env.decimation
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(1, due + 5):
            env.step(torch.zeros(env.num_envs, env.num_actions))
            assert len(caught) == (k >= due), k
    assert caught[0].category is RuntimeWarning
    assert re.search(r"outgrew njmax=16 \(they needed up to \d+\).*sim\.njmax=\d+", str(caught[0].message))


def test_a_sync_free_rollout_reads_the_flags_once_per_iteration():
    """Sync-free (and so inside a CUDA graph) the Sim reads no flags in its steps; the runners'
    raise_deferred_errors does: it warns, or raises with strict."""
    for strict in (False, True):
        env = envs.make("ant", num_envs=4, device="cpu", seed=0, njmax=16, strict=strict)
        env.set_sync_free()
        env.reset()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for _ in range(OVERFLOW_CHECK_STEPS // env.decimation + 4):
                env.step(torch.zeros(env.num_envs, env.num_actions))
            assert caught == []
            if strict:
                with pytest.raises(OverflowError, match="outgrew njmax=16"):
                    env.raise_deferred_errors()
            else:
                env.raise_deferred_errors()
                assert len(caught) == 1 and "outgrew njmax=16" in str(caught[0].message)
        env.set_sync_free(False)
        assert env.sim.auto_check_overflow


def test_train_logs_the_overflow_and_its_warning(tmp_path):
    """scripts/train.py with too small a sim.njmax: the warning is in train.log, and
    Diagnostics/overflow in TensorBoard is above 0 (quadruped: 40 rows when its 4 feet touch).
    sim.nconmax=32 (the slots of all of quadruped's candidate pairs) reaches the Sim too."""
    run_dir = tmp_path / "run"
    result = subprocess.run([sys.executable, "scripts/train.py", "task=quadruped", "sim.njmax=28", "sim.nconmax=32",
                             "num_envs=2", "max_iterations=1", f"hydra.run.dir={run_dir}"], cwd=ROOT,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    log = (run_dir / "train.log").read_text()
    assert re.search(r"simrl: nconmax 32 contact slots per world .*; njmax 28 constraint rows per world",
                     log), log[-2000:]
    assert re.search(r"RuntimeWarning: simrl: the constraint rows of \d of 2 worlds outgrew njmax=28 .*"
                     r"sim\.njmax=\d+", log), log[-2000:]
    scalars = subprocess.run([sys.executable, "tools/run_scalars.py", str(run_dir), "Diagnostics/overflow"],
                             cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert scalars.returncode == 0, scalars.stderr[-2000:]
    share = float(re.search(r"mean over iterations 0-0 \(last \d+\): (\S+)", scalars.stdout).group(1))
    assert 0.0 < share <= 1.0
