"""The command-line scripts: exit codes, messages, and the benchmark's record format."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def run(*args):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_train_without_tasks_exits_cleanly():
    result = run("scripts/train.py")
    assert result.returncode == 0, result.stderr
    assert "no tasks yet" in result.stdout


def test_train_names_an_unknown_task():
    result = run("scripts/train.py", "task=quadruped")
    assert result.returncode == 2
    assert "unknown task 'quadruped'" in result.stderr


def test_benchmark_records(tmp_path):
    out = tmp_path / "bench.json"
    md = tmp_path / "bench.md"
    result = run("scripts/benchmark.py", "--model", "inverted_pendulum", "--smooth", "--worlds", "1,8",
                 "--seconds", "0.05", "--out", str(out), "--markdown", str(md))
    assert result.returncode == 0, result.stderr
    records = json.loads(out.read_text())
    engines = {(r["engine"], r["num_worlds"]) for r in records}
    assert engines == {("mujoco", 1), ("simrl", 1), ("simrl", 8), ("mujoco_rollout", 1), ("mujoco_rollout", 8)}
    for r in records:
        assert {"engine", "model", "device", "num_worlds", "mode", "steps_per_second"} <= r.keys()
        assert r["model"] == "inverted_pendulum" and r["mode"] == "forward"
        assert r["steps_per_second"] > 0
        assert r["nan_free_worlds"] == r["num_worlds"]
    assert "| simrl | cpu | float32 | 8 |" in md.read_text()


@pytest.mark.parametrize("args", [["--model", "no_such_robot"], ["--model", "pusher"]])
def test_benchmark_refuses_with_a_reason(args):
    result = run("scripts/benchmark.py", *args, "--worlds", "1", "--seconds", "0.01", "--engines", "simrl")
    assert result.returncode != 0
    assert "no such file" in result.stderr or "--smooth" in result.stderr
