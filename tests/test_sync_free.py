"""`BatchedEnv.set_sync_free()`: a step with no host synchronisation (envs/base.py), the step a
CUDA graph can capture.

- the sync-free step gives every world bit for bit what the indexed step gives it, through resets
  (falls and time-outs), command draws, interval terms (pushes), reset terms (friction), the
  terrain curriculum, observation noise and history;
- a step makes none of the operations that synchronise a GPU with the host (torch's
  data-dependent operations, recorded by a dispatch mode on the CPU: `nonzero`, `item`, boolean
  masks, ...);
- what needs the host is refused by name, and a non-finite action is raised later, not lost.
"""

import math

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import envs

#: torch operations whose result size or value the host must wait for (on CUDA, each is a
#: device-to-host synchronisation); aten::index with a boolean index is one too (a nonzero)
SYNCING = {"aten::nonzero", "aten::_local_scalar_dense", "aten::masked_select", "aten::is_nonzero",
           "aten::item", "aten::equal", "aten::allclose", "aten::unique", "aten::_unique2",
           "aten::unique_consecutive", "aten::repeat_interleave", "aten::masked_scatter"}


def _from_warp() -> bool:
    """Whether the current operation runs inside warp.to_torch (a view of a Warp array's memory:
    zero-copy on CUDA, not host data)."""
    import traceback

    return any("/warp/" in frame.filename and frame.name == "to_torch" for frame in traceback.extract_stack())


class SyncRecorder(TorchDispatchMode):
    """Records every operation of SYNCING, every index/index_put with a boolean index, and every
    tensor of one or more dimensions made from host data (aten::lift_fresh: torch.tensor(list),
    torch.as_tensor(array); on CUDA a copy from pageable host memory, which waits for the stream;
    a Python number written into a tensor, `x[i] = 0.0`, is a 0-dimensional one that CUDA kernels
    take as an argument, and warp.to_torch a view of device memory, not copies)."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name
        syncing = name in SYNCING
        if name in ("aten::index.Tensor", "aten::index", "aten::index_put", "aten::index_put_") and len(args) > 1:
            syncing = syncing or any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1]
                                     if i is not None)
        if name == "aten::lift_fresh" and args and args[0].dim() >= 1 and not _from_warp():
            syncing = True
        if syncing:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))


SMALL = {"rows": 2, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 3.0,
         "max_init_level": 1}


def _rough(**kwargs):
    # short episodes, frequent pushes and command draws: every kind of reset within a few steps
    options = dict(num_envs=6, device="cpu", seed=3, terrain=SMALL, episode_length_s=0.4,
                   commands={"base_velocity": {"resample_s": 0.16}}, obs_noise=1.0,
                   randomization={"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs",
                                               "shared": True},
                                  "push": {"mode": "interval", "interval_s": [0.08, 0.2], "range": [-0.5, 0.5]}})
    return envs.make("quadruped_rough", **{**options, **kwargs})


def _actions(env, k):
    g = torch.Generator().manual_seed(k)
    return torch.randn(env.num_envs, env.num_actions, generator=g) * 1.5


def _state(env):
    return {k: v.clone() for k, v in env._row_state().items()}


def _task_env(task):
    """The task file's environment, 6 worlds, short episodes."""
    from omegaconf import OmegaConf

    import tasks
    from tasks.config import env_kwargs

    kwargs = env_kwargs(OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / f"{task}.yaml")))
    return envs.make(task, num_envs=6, device="cpu", seed=3, **{**kwargs, "episode_length_s": 0.4})


@pytest.mark.parametrize("task", ["quadruped_rough", "cartpole", "humanoid", "ant"])
def test_sync_free_step_matches_the_indexed_step(task):
    make = _rough if task == "quadruped_rough" else (lambda: _task_env(task))
    indexed, free = make(), make()
    free.set_sync_free()
    for env in (indexed, free):
        env.reset()
        # staggered episodes: the worlds time out on different steps
        env.episode_length_buf.copy_(torch.arange(env.num_envs) * env.max_episode_length // env.num_envs)
    done_steps = 0
    for k in range(30):
        a = _actions(indexed, k)
        oi, ri, ti, tsi, ei = indexed.step(a)
        of, rf, tf, tsf, ef = free.step(a.clone())
        for group in oi:
            assert torch.equal(oi[group], of[group]), (k, group)
        assert torch.equal(ri, rf) and torch.equal(ti, tf) and torch.equal(tsi, tsf), k
        si, sf = _state(indexed), _state(free)
        assert si.keys() == sf.keys()
        for key in si:
            assert torch.equal(si[key], sf[key]), (k, key)
        # the logs: the same means on the steps where episodes ended, NaN on the others
        ended = bool((ti | tsi).any())
        done_steps += ended
        for key, value in ef["log"].items():
            if key.startswith(("Episode_Reward/", "Diagnostics/nan_resets")):
                if ended:
                    assert torch.equal(value.float(), ei["log"][key].float()), (k, key)
                else:
                    assert math.isnan(float(value)) and key not in ei["log"], (k, key)
            else:
                assert torch.equal(value, ei["log"][key]), (k, key)
    assert done_steps >= 6  # the rollout reset worlds on many steps


def test_sync_free_step_makes_no_host_synchronisation():
    env = _rough()
    env.set_sync_free()
    env.reset()
    env.step(_actions(env, -1))  # (the first step makes its torch views of Warp arrays: no copies)
    recorder = SyncRecorder()
    ended = 0
    with recorder:
        for k in range(25):
            _, _, terminated, time_outs, _ = env.step(_actions(env, k))
            ended += (terminated | time_outs).sum()
    assert int(ended) > 0
    assert recorder.calls == []
    # the recorder sees what the indexed step does (it is not blind)
    env.set_sync_free(False)
    with recorder:
        for k in range(3):
            env.step(_actions(env, k))
    assert "aten::nonzero" in recorder.calls and "aten::_local_scalar_dense" in recorder.calls


def test_sync_free_refuses_what_needs_the_host_by_name():
    env = _rough(randomization={"mass": {"type": "body_mass", "mode": "reset", "range": [0.9, 1.1],
                                         "operation": "scale"}})
    with pytest.raises(ValueError, match="randomization term 'mass'.*mode startup"):
        env.set_sync_free()
    assert not env.sync_free
    env = _rough(curriculum={"terrain_levels": {}, "command_vel": {"max_lin_vel_x": 1.0}})
    with pytest.raises(ValueError, match="command curriculum"):
        env.set_sync_free()
    env = envs.make("cartpole", num_envs=2, device="cpu", backend="mujoco")
    with pytest.raises(ValueError, match="MuJoCo backend"):
        env.set_sync_free()


def test_sync_free_defers_the_non_finite_action_error():
    env = _rough()
    env.set_sync_free()
    env.reset()
    a = _actions(env, 0)
    a[2, 1] = float("nan")
    obs, reward, *_ = env.step(a)  # no error yet, and no NaN in the physics: the entry became 0
    assert torch.isfinite(env.sim.qpos).all() and torch.isfinite(reward).all()
    with pytest.raises(ValueError, match="NaN or inf in 1 world-steps"):
        env.raise_deferred_errors()
    env.raise_deferred_errors()  # reported once


def _ppo(sync_free: bool, log_dir):
    import contextlib
    import io

    from omegaconf import OmegaConf

    import tasks
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.ppo import Runner, rsl_rl_config

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole.yaml"))
    torch.manual_seed(0)
    env = envs.make("cartpole", num_envs=16, device="cpu", seed=0, **{**task["env"], "episode_length_s": 0.3})
    if sync_free:
        env.set_sync_free()
    ppo = {**task["ppo"], "num_steps_per_env": 16}
    keys = [f"Episode_Reward/{k}" for k in env.reward_weights]
    with contextlib.redirect_stdout(io.StringIO()):
        runner = Runner(RslRlVecEnv(env), rsl_rl_config(ppo), log_dir=str(log_dir), device="cpu", key_terms=keys,
                        task="cartpole")
    return runner


def test_ppo_rollout_without_host_synchronisation_learns_as_the_indexed_one(tmp_path):
    """A PPO run on a sync-free env: its rollout (act, env step, rsl-rl's transition and episode
    book-keeping) makes no host synchronisation, and three iterations give the same learning
    curve, logged episode terms and weights as the indexed env."""
    import contextlib
    import io

    indexed, free = _ppo(False, tmp_path / "indexed"), _ppo(True, tmp_path / "free")
    assert free.sync_free and not indexed.sync_free
    recorder = SyncRecorder()

    def recorded(f):
        def g(*args, **kwargs):
            with recorder:
                return f(*args, **kwargs)
        return g

    free.alg.act = recorded(free.alg.act)
    free.env.step = recorded(free.env.step)
    free.alg.process_env_step = recorded(free.alg.process_env_step)
    free.logger.process_env_step = recorded(free.logger.process_env_step)
    logged = {}
    for name, runner in (("indexed", indexed), ("free", free)):
        # what rsl-rl's logger averages for TensorBoard, as it gets it
        def keep(*args, _log=runner._verbose_log, _name=name, _runner=runner, **kwargs):
            logged.setdefault(_name, []).append([{k: float(v) for k, v in e.items()}
                                                 for e in _runner.logger.ep_extras])
            _log(*args, **kwargs)

        runner._verbose_log = keep
        torch.manual_seed(1)  # the actions' and minibatches' draws
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(num_learning_iterations=3)
    assert recorder.calls == []
    assert indexed.curve == [dict(c, seconds=i["seconds"]) for c, i in zip(free.curve, indexed.curve, strict=True)]
    assert all(not math.isnan(c["mean_return"]) for c in free.curve)
    assert logged["free"] == logged["indexed"] and any(logged["free"][-1])
    for a, b in zip(indexed.alg.get_policy().parameters(), free.alg.get_policy().parameters(), strict=True):
        assert torch.equal(a, b)


def test_cuda_graphs_are_refused_on_the_cpu_by_name():
    """(The graphs themselves run in tests/test_gpu.py, on a GPU.)"""
    from envs.rsl_rl import CapturedStep

    env = _rough()
    with pytest.raises(ValueError, match="need a CUDA device"):
        CapturedStep(env)


def test_shac_window_without_host_synchronisation_learns_as_the_indexed_one():
    """SHAC (`task.shac.sync_free`): the differentiable steps of its windows make no host
    synchronisation on a sync-free env, and two iterations give the same curve and weights."""
    import contextlib
    import io

    from omegaconf import OmegaConf

    import tasks
    from simrl.rl.shac import ShacRunner

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole_swingup.yaml"))
    shac = {k: v for k, v in task["shac"].items() if k not in ("num_envs", "num_envs_gpu", "max_iterations")}
    runners = []
    recorder = SyncRecorder()
    for sync_free in (False, True):
        torch.manual_seed(0)
        env = envs.make("cartpole_swingup", num_envs=8, device="cpu", seed=0,
                        **{**task["env"], "episode_length_s": 0.4})
        runner = ShacRunner(env, {**shac, "horizon": 16, "sync_free": sync_free}, log_dir=None, device="cpu",
                            key_terms=[f"Episode_Reward/{k}" for k in env.reward_weights])
        if sync_free:
            step = env.step

            def recorded_step(actions, _step=step):
                with recorder:
                    return _step(actions)

            env.step = recorded_step
        torch.manual_seed(1)
        with contextlib.redirect_stdout(io.StringIO()):
            runner.learn(num_learning_iterations=2)
        runners.append(runner)
    indexed, free = runners
    assert free.env.sync_free and recorder.calls == []
    # (str: the first window may end no episode, nan in both)
    assert [str((c["mean_return"], c["mean_episode_length"])) for c in indexed.curve] == \
        [str((c["mean_return"], c["mean_episode_length"])) for c in free.curve]
    assert not math.isnan(free.curve[-1]["mean_return"])
    for a, b in zip(indexed.actor.parameters(), free.actor.parameters(), strict=True):
        assert torch.equal(a, b)
