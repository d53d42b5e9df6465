"""Training on 2 ranks with torchrun (gloo on the CPU, loopback): the ranks stay identical, one
update equals the combined batch's update in one process, `scripts/train.py` runs and resumes
under torchrun, and a rank that dies or hangs ends the run with a non-zero status."""

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import distributed_worker as worker
import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torchrun(args: list[str], timeout: float = 900, **kw) -> subprocess.CompletedProcess:
    cmd = [*TORCHRUN, f"--master_port={free_port()}", "--master_addr=127.0.0.1", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout, **kw)


def run_worker(mode: str, out: Path) -> tuple[dict, dict]:
    result = torchrun([str(ROOT / "tests" / "distributed_worker.py"), mode, str(out)])
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return (torch.load(out / "rank0.pt", weights_only=False), torch.load(out / "rank1.pt", weights_only=False))


def assert_equal_dicts(a: dict, b: dict, what: str) -> None:
    assert a.keys() == b.keys(), what
    for k in a:
        assert torch.equal(a[k], b[k]), f"{what}: {k} differs between the ranks"


def assert_close_dicts(got: dict, expected: dict, what: str, rtol: float, atol: float) -> None:
    assert got.keys() == expected.keys(), what
    for k in got:
        torch.testing.assert_close(got[k], expected[k], rtol=rtol, atol=atol, msg=lambda m, k=k: f"{what} {k}: {m}")


def combined(a: torch.Tensor, b: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cat([a, b], dim=dim)


def test_ppo_update_on_two_ranks_equals_the_combined_batch(tmp_path):
    """rsl-rl's multi-GPU PPO path on gloo. Tolerance: float32 sums taken in another order,
    rtol 1e-4 / atol 1e-6 on gradients and parameters."""
    r0, r1 = run_worker("ppo", tmp_path)
    # the ranks started from the same networks (broadcast) but simulated different worlds ...
    assert_equal_dicts(r0["before"]["actor"], r1["before"]["actor"], "actor before the update")
    assert not torch.equal(r0["storage"]["observations"]["policy"], r1["storage"]["observations"]["policy"])
    # ... and end with identical networks
    for part in ("actor", "critic", "actor_grads", "critic_grads"):
        assert_equal_dicts(r0["after"][part], r1["after"][part], part)
    assert r0["after"]["learning_rate"] == r1["after"]["learning_rate"]

    # one process, 2 x 8 worlds: the same starting point and the two rollouts side by side
    runner = worker.ppo_runner(2 * worker.NUM_ENVS, seed=0)
    alg = runner.alg
    alg.actor.load_state_dict(r0["before"]["actor"])
    alg.critic.load_state_dict(r0["before"]["critic"])
    alg.optimizer.load_state_dict(r0["before"]["optimizer"])
    alg.learning_rate = r0["before"]["learning_rate"]
    s0, s1, s = r0["storage"], r1["storage"], alg.storage
    for key in s0["observations"]:
        s.observations[key].copy_(combined(s0["observations"][key], s1["observations"][key], 1))
    for key in ("actions", "values", "returns", "advantages", "actions_log_prob"):
        getattr(s, key).copy_(combined(s0[key], s1[key], 1))
    s.distribution_params = tuple(combined(p, q, 1) for p, q in zip(s0["distribution_params"],
                                                                     s1["distribution_params"], strict=True))
    s.step = worker.PPO_STEPS
    alg.update()
    expected = {"actor": alg.actor.state_dict(), "critic": alg.critic.state_dict(),
                "actor_grads": worker.grads(alg.actor), "critic_grads": worker.grads(alg.critic)}
    for part, value in expected.items():
        assert_close_dicts(r0["after"][part], value, part, rtol=1e-4, atol=1e-6)
    assert r0["after"]["learning_rate"] == pytest.approx(alg.learning_rate, rel=1e-6)
    # the update moved the policy: the comparison is not between two untouched networks
    moved = max(float((r0["after"]["actor"][k] - r0["before"]["actor"][k]).abs().max())
                for k in r0["before"]["actor"] if k.startswith("mlp"))
    assert moved > 1e-4


@pytest.mark.slow  # 100 s cold: both ranks compile SHAC's differentiable step
def test_shac_update_on_two_ranks_equals_the_combined_batch(tmp_path):
    """SHAC's actor and critic gradients averaged over 2 ranks; the normalisers pool both
    ranks' samples. Tolerance: rtol 1e-4 / atol 1e-6 (float32 sums in another order)."""
    r0, r1 = run_worker("shac", tmp_path)
    for name in r0["before"]:
        assert_equal_dicts(r0["before"][name], r1["before"][name], f"{name} before the update")
    assert not torch.equal(r0["env"]["tensors"]["sim.qpos"], r1["env"]["tensors"]["sim.qpos"])
    for part in r0["after"]:
        assert_equal_dicts(r0["after"][part], r1["after"][part], part)

    runner = worker.shac_runner(2 * worker.NUM_ENVS, seed=0)
    for name, state in r0["before"].items():
        getattr(runner, name).load_state_dict(state)
    env_state = dict(r0["env"])
    env_state["num_envs"] = 2 * worker.NUM_ENVS
    env_state["tensors"] = {k: combined(v, r1["env"]["tensors"][k], 0) for k, v in r0["env"]["tensors"].items()}
    runner.env.load_state_dict(env_state)
    runner.learn(1)
    for name in r0["before"]:
        assert_close_dicts(r0["after"][name], runner.__getattribute__(name).state_dict(), name, rtol=1e-4, atol=1e-6)
    assert_close_dicts(r0["after"]["actor_grads"], worker.grads(runner.actor), "actor grads", rtol=1e-4, atol=1e-6)
    assert_close_dicts(r0["after"]["critic_grads"], worker.grads(runner.critic), "critic grads", rtol=1e-4, atol=1e-6)


@pytest.mark.slow  # 40 s cold
def test_train_script_runs_and_resumes_under_torchrun(tmp_path):
    """`torchrun --nproc_per_node=2 scripts/train.py`: only rank 0 writes the run directory; the
    progress counts the steps of both ranks; `resume=` continues the distributed run."""
    run = tmp_path / "run"
    args = ["scripts/train.py", "task=cartpole", "num_envs=16", "max_iterations=2", f"hydra.run.dir={run}"]
    first = torchrun(args)
    assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
    assert sorted(p.name for p in run.glob("model_*.pt")) == ["model_0.pt", "model_1.pt"]
    assert "16 envs on cpu per rank x 2 ranks" in first.stdout
    assert "rank 1 of 2" in first.stdout
    assert first.stdout.count("it     2/2") == 1  # one progress line per iteration: rank 0's
    curve = json.loads((run / "learning_curve.json").read_text())
    assert curve[-1]["env_steps"] == 2 * 24 * 16 * 2  # iterations x steps per env x envs x ranks

    resumed = torchrun(["scripts/train.py", "task=cartpole", "num_envs=16", "max_iterations=1",
                        f"resume={run / 'model_1.pt'}", f"hydra.run.dir={tmp_path / 'resumed'}"])
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    assert "resumed from" in resumed.stdout and "it     3/3" in resumed.stdout
    assert (tmp_path / "resumed" / "model_2.pt").exists()


def _start_and_wait_for_rank1(args: list[str]):
    """Start torchrun; return once both ranks train, with rank 1's pid. A watchdog kills the
    whole run after 400 s, so that a test can never hang."""
    cmd = [*TORCHRUN, f"--master_port={free_port()}", "--master_addr=127.0.0.1", *args]
    proc = subprocess.Popen(cmd, cwd=ROOT, env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    watchdog = threading.Timer(400, lambda: os.killpg(proc.pid, signal.SIGKILL))
    watchdog.start()
    lines, pid = [], None
    for line in proc.stdout:
        lines.append(line)
        if "rank 1 of 2" in line:
            pid = int(line.split("pid ")[1].split(",")[0])
        if pid and line.startswith("it "):  # training is under way on both ranks
            return proc, pid, lines, watchdog
    watchdog.cancel()
    raise AssertionError("the run ended before training started:\n" + "".join(lines))


@pytest.mark.parametrize("how", ["crash", pytest.param("hang", marks=pytest.mark.slow)])
def test_a_failed_rank_ends_the_whole_run(tmp_path, how):
    """A rank killed (SIGKILL) or frozen (SIGSTOP) makes torchrun exit non-zero instead of
    hanging: a crash is seen by torchrun at once, which stops the other rank and names the one
    that failed; a frozen rank makes the other's collective time out after dist_timeout_s, and
    that rank says so. (The frozen one is then let go, SIGCONT, to take torchrun's SIGTERM.)"""
    proc, pid, lines, watchdog = _start_and_wait_for_rank1(
        ["scripts/train.py", "task=cartpole", "num_envs=16", "max_iterations=100000", "dist_timeout_s=10",
         f"hydra.run.dir={tmp_path}"])
    try:
        start = time.time()
        os.kill(pid, signal.SIGKILL if how == "crash" else signal.SIGSTOP)
        for line in proc.stdout:
            lines.append(line)
            if how == "hang" and "lost contact" in line:
                waited = time.time() - start
                os.kill(pid, signal.SIGCONT)
        proc.wait()
    finally:
        watchdog.cancel()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)
    output = "".join(lines)
    assert proc.returncode not in (0, -signal.SIGKILL), output[-3000:]  # non-zero, and not the watchdog
    assert "rank      : 1" in output or how == "hang", output[-3000:]
    if how == "hang":
        assert "rank 0 of 2 lost contact with another rank" in output, output[-3000:]
        assert 10 <= waited < 60, waited


def test_ranks_share_the_cores_of_their_machine(monkeypatch):
    """Under torchrun a Sim's default CPU threads are the machine's cores over its ranks
    (LOCAL_WORLD_SIZE), so 2 ranks on 2 cores step with one thread each."""
    from simrl import Sim
    from simrl.sim.sim import _available_cpus

    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert _available_cpus() == cores
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(cores))
    assert _available_cpus() == 1
    sim = Sim.from_mjcf(ROOT / "envs" / "assets" / "cartpole.xml", num_worlds=256)
    assert sim.cpu_threads == 1
