"""GPU-only checks (skipped without CUDA; run by scripts/gpu_check.sh on a GPU machine): the
CUDA build agrees with the CPU build, the differentiable step too, and environments step on
the device without host copies of their state."""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp

from envs import ASSETS_DIR
from simrl import Sim, diff_step

wp.init()
CUDA = wp.is_cuda_available()
pytestmark = pytest.mark.skipif(not CUDA, reason="needs a CUDA device")


def _quadruped():
    return mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))


def _start(mjm, W, seed=0):
    rng = np.random.default_rng(seed)
    qpos = np.tile(mjm.key_qpos[0], (W, 1))
    qpos[:, 7:] += rng.normal(0.0, 0.05, (W, mjm.nq - 7))
    ctrl = np.tile(mjm.key_ctrl[0], (W, 1)) + rng.normal(0.0, 0.2, (W, mjm.nu))
    return qpos, ctrl


def test_cuda_steps_match_cpu_float64():
    """200 steps of the quadruped with contacts, 64 worlds: CUDA and CPU builds within 1e-9."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 64)
    out = []
    for device in ("cpu", "cuda:0"):
        sim = Sim.from_model(mjm, num_worlds=64, device=device, dtype="float64")
        sim.qpos = torch.tensor(qpos, device=sim.qpos.device)
        sim.ctrl = torch.tensor(ctrl, device=sim.qpos.device)
        sim.step(200)
        assert not sim.nan_worlds.any()
        out.append(sim.qpos.cpu())
    assert torch.allclose(out[0], out[1], rtol=0, atol=1e-9), (out[0] - out[1]).abs().max()


def test_cuda_gradients_match_cpu_float64():
    """diff_step on CUDA: 8 chained steps with contacts, gradients equal to the CPU's."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 4, seed=1)
    grads = []
    for device in ("cpu", "cuda:0"):
        sim = Sim.from_model(mjm, num_worlds=4, device=device, dtype="float64")
        dev = sim.qpos.device
        q = torch.tensor(qpos, device=dev)
        v = torch.zeros(4, mjm.nv, dtype=torch.float64, device=dev)
        c = torch.tensor(ctrl, device=dev, requires_grad=True)
        for _ in range(8):
            q, v = diff_step(sim, q, v, c)
        (q[:, :3].sum() + v.square().sum()).backward()
        grads.append(c.grad.cpu())
    assert torch.allclose(grads[0], grads[1], rtol=1e-7, atol=1e-9), (grads[0] - grads[1]).abs().max()


def test_env_steps_on_cuda():
    import envs

    env = envs.make("quadruped", num_envs=256, device="cuda:0")
    obs = env.reset()
    assert all(o.device.type == "cuda" for o in obs.values())
    for _ in range(10):
        actions = torch.zeros(256, env.num_actions, device="cuda:0")
        obs, reward, terminated, time_outs, extras = env.step(actions)
    assert reward.device.type == "cuda" and torch.isfinite(reward).all()


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_cuda_graph_replay_equals_plain_steps(schedule):
    """Sim.step's CUDA graph: 20 steps replayed equal 20 launched steps bit for bit."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 256)
    out = []
    for graphs in (False, True):
        sim = Sim.from_model(mjm, num_worlds=256, device="cuda:0", dtype="float32", schedule=schedule,
                             use_graphs=graphs)
        sim.qpos = torch.tensor(qpos, dtype=torch.float32, device="cuda:0")
        sim.ctrl = torch.tensor(ctrl, dtype=torch.float32, device="cuda:0")
        sim.step(10)
        sim.step(10)  # the second call replays the graph the first recorded
        wp.synchronize_device(sim.device)
        out.append(sim.qpos.cpu())
    assert torch.equal(out[0], out[1])


def test_forward_of_some_worlds_on_cuda():
    """Sim.forward(worlds=mask) on the GPU's schedule: the other worlds' qacc and sensors are
    not written, the chosen ones' are a full forward pass's (blocks of a world return together:
    no barrier waits for a lane that left)."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 64)
    sims = []
    for _ in range(2):
        sim = Sim.from_model(mjm, num_worlds=64, device="cuda:0", dtype="float64")
        sim.qpos = torch.tensor(qpos, device=sim.qpos.device)
        sim.ctrl = torch.tensor(ctrl, device=sim.qpos.device)
        sim.step(20)
        sim.qpos[:, 7:] += 0.05
        sims.append(sim)
    full, some = sims
    mask = torch.arange(64, device=full.qpos.device) % 3 == 0
    before = some.view("qacc").clone()
    full.forward()
    some.forward(worlds=mask)
    assert torch.equal(some.view("qacc")[mask], full.view("qacc")[mask])
    assert torch.equal(some.view("qacc")[~mask], before[~mask])
    assert not torch.equal(full.view("qacc")[~mask], before[~mask])


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_schedule_on_cuda_matches_cpu(dtype):
    """The GPU's schedule (wide, auto on CUDA) against the CPU's (fused): 200 quadruped steps."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 64)
    out = []
    for device, schedule in (("cpu", "fused"), ("cuda:0", "auto")):
        sim = Sim.from_model(mjm, num_worlds=64, device=device, dtype=dtype, schedule=schedule)
        assert sim.schedule == ("wide" if device != "cpu" else "fused")
        t = torch.float64 if dtype == "float64" else torch.float32
        sim.qpos = torch.tensor(qpos, dtype=t, device=sim.qpos.device)
        sim.ctrl = torch.tensor(ctrl, dtype=t, device=sim.qpos.device)
        sim.step(200)
        assert not sim.nan_worlds.any()
        out.append(sim.qpos.cpu().double())
    tol = 1e-9 if dtype == "float64" else 2e-3
    assert torch.allclose(out[0], out[1], rtol=0, atol=tol), (out[0] - out[1]).abs().max()


def test_wide_gradients_on_cuda_match_cpu():
    """diff_step in the wide schedule on CUDA: gradients equal to the fused CPU step's."""
    mjm = _quadruped()
    qpos, ctrl = _start(mjm, 4, seed=1)
    grads = []
    for device, schedule in (("cpu", "fused"), ("cuda:0", "wide")):
        sim = Sim.from_model(mjm, num_worlds=4, device=device, dtype="float64", schedule=schedule)
        dev = sim.qpos.device
        q = torch.tensor(qpos, device=dev)
        v = torch.zeros(4, mjm.nv, dtype=torch.float64, device=dev)
        c = torch.tensor(ctrl, device=dev, requires_grad=True)
        for _ in range(8):
            q, v = diff_step(sim, q, v, c)
        (q[:, :3].sum() + v.square().sum()).backward()
        grads.append(c.grad.cpu())
    assert torch.allclose(grads[0], grads[1], rtol=1e-7, atol=1e-9), (grads[0] - grads[1]).abs().max()


def test_sync_free_env_step_on_cuda_never_synchronises():
    """envs.BatchedEnv.set_sync_free on CUDA: torch's sync debug mode raises on any operation that
    waits for the device (nonzero, item, boolean masks, host copies), through resets, command draws,
    pushes and the terrain curriculum; the results equal the indexed step's on the same device."""
    import envs

    terrain = {"rows": 2, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 3.0,
               "max_init_level": 1}
    kwargs = dict(num_envs=64, device="cuda:0", seed=3, terrain=terrain, episode_length_s=0.4,
                  commands={"base_velocity": {"resample_s": 0.16}},
                  randomization={"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs",
                                              "shared": True},
                                 "push": {"mode": "interval", "interval_s": [0.08, 0.2], "range": [-0.5, 0.5]}})
    indexed, free = envs.make("quadruped_rough", **kwargs), envs.make("quadruped_rough", **kwargs)
    free.set_sync_free()
    for env in (indexed, free):
        env.reset()
        env.episode_length_buf.copy_(torch.arange(64, device="cuda:0") % env.max_episode_length)
    g = torch.Generator(device="cuda:0").manual_seed(0)
    actions = [torch.randn(64, free.num_actions, device="cuda:0", generator=g) * 1.5 for _ in range(30)]
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in actions:
            of, rf, tf, tsf, _ = free.step(a)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    for a in actions:
        oi, ri, ti, tsi, _ = indexed.step(a)
    for group in oi:
        assert torch.equal(oi[group], of[group])
    assert torch.equal(ri, rf) and torch.equal(ti, tf) and torch.equal(tsi, tsf)


def _rough_cuda(num_envs=64):
    import envs

    terrain = {"rows": 2, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 3.0,
               "max_init_level": 1}
    env = envs.make("quadruped_rough", num_envs=num_envs, device="cuda:0", seed=3, terrain=terrain,
                    episode_length_s=0.4, commands={"base_velocity": {"resample_s": 0.16}},
                    randomization={"friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs",
                                                "shared": True},
                                   "push": {"mode": "interval", "interval_s": [0.08, 0.2], "range": [-0.5, 0.5]}})
    env.set_sync_free()
    return env


def test_captured_env_step_equals_the_ordinary_step():
    """envs.rsl_rl.CapturedStep: each environment step replayed as one CUDA graph (physics, resets,
    pushes, curriculum, noise) gives what the same sync-free step gives without a graph, bit for bit;
    it is captured once, and again after a tensor it reads was replaced."""
    from envs.rsl_rl import RslRlVecEnv

    plain, graphed = RslRlVecEnv(_rough_cuda()), RslRlVecEnv(_rough_cuda())
    graphed.capture_steps()
    g = torch.Generator(device="cuda:0").manual_seed(0)
    for k in range(40):
        a = torch.randn(64, plain.num_actions, device="cuda:0", generator=g) * 1.5
        if k == 20:  # a per-world parameter made now: a new Warp array, so the graph is captured again
            for v in (plain, graphed):
                v.env.sim.per_world_param("dof_damping")
        op, rp, dp, ep = plain.step(a)
        og, rg, dg, eg = graphed.step(a)
        for group in op.keys():
            assert torch.equal(op[group], og[group]), (k, group)
        assert torch.equal(rp, rg) and torch.equal(dp, dg) and torch.equal(ep["time_outs"], eg["time_outs"]), k
    assert graphed._captured.captures == 2


def test_ppo_with_cuda_graphs_learns_as_without():
    """Three PPO iterations with the captured environment step: the same learning curve as the
    sync-free step without graphs."""
    import contextlib
    import io

    from omegaconf import OmegaConf

    import tasks
    from envs.rsl_rl import RslRlVecEnv
    from simrl.rl.ppo import Runner, rsl_rl_config

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped_rough.yaml"))
    curves = []
    for graphs in (False, True):
        torch.manual_seed(0)
        vec = RslRlVecEnv(_rough_cuda(256))
        if graphs:
            vec.capture_steps()
        with contextlib.redirect_stdout(io.StringIO()):
            runner = Runner(vec, rsl_rl_config(task["ppo"]), log_dir=None, device="cuda:0", key_terms=[])
            torch.manual_seed(1)
            runner.learn(num_learning_iterations=3)
        curves.append([(c["mean_return"], c["mean_episode_length"]) for c in runner.curve])
    assert curves[0] == curves[1]
