"""scripts/play.py: metrics.json from evaluation episodes, and exported policies (ONNX,
TorchScript) that compute what the trained torch policy computes."""

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
import readme
import torch

import envs
import tasks
from envs.rsl_rl import RslRlVecEnv
from simrl.rl import export
from simrl.rl.ppo import Runner, rsl_rl_config

ROOT = Path(__file__).resolve().parents[1]


def run(*args, cwd=ROOT):
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def test_play_writes_metrics_and_matching_exports(tmp_path):
    train_dir, play_dir = tmp_path / "runs" / "cartpole" / "train", tmp_path / "play"
    result = run("scripts/train.py", "task=cartpole", "num_envs=32", "max_iterations=3", f"hydra.run.dir={train_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    assert sorted(p.name for p in train_dir.glob("model_*.pt")) == ["model_0.pt", "model_2.pt"]
    # a run directory, as train.py's resume= takes it: its highest-iteration checkpoint
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={train_dir}", "num_envs=8",
                 f"hydra.run.dir={play_dir}")
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((play_dir / "metrics.json").read_text())
    assert metrics["checkpoint"] == str(train_dir / "model_2.pt")
    # its run directory holds the files the README documents (video.mp4 only with video=true)
    entries, documented = readme.listing(play_dir), readme.documented_files("## Evaluate and export")
    assert readme.undocumented(entries, documented) == [] and readme.missing(documented, entries) == ["video.mp4"]
    log = (play_dir / "play.log").read_text()  # what play.py printed, kept in its run directory
    assert f"checkpoint: {train_dir / 'model_2.pt'}" in log and log.splitlines()[-1].startswith("wrote metrics.json")
    assert {"mean_return", "mean_episode_length", "fall_rate"} <= metrics.keys()
    assert 0 < metrics["mean_episode_length"] <= 250 and 0.0 <= metrics["fall_rate"] <= 1.0

    # policy.onnx is self-contained: no policy.onnx.data beside it, and it loads from elsewhere alone
    assert sorted(p.name for p in play_dir.glob("policy*")) == ["policy.onnx", "policy.pt"]
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(play_dir / "policy.onnx", alone / "policy.onnx")
    scripted = torch.jit.load(str(play_dir / "policy.pt"))
    session = onnxruntime.InferenceSession(str(alone / "policy.onnx"))
    for obs in torch.randn(16, 1, 5):  # the ONNX graph takes one observation at a time
        onnx_out = session.run(None, {"obs": obs.numpy()})[0]
        np.testing.assert_allclose(onnx_out, scripted(obs).detach().numpy(), atol=1e-5)
    # both carry the metadata play.py printed it wrote (simrl.rl.export; the legged tasks' keys:
    # tests/test_export_metadata.py)
    meta = {k: json.loads(v) for k, v in session.get_modelmeta().custom_metadata_map.items()}
    assert meta == export.read_jit_metadata(play_dir / "policy.pt")
    assert meta["task"] == "cartpole" and meta["checkpoint"] == str(train_dir / "model_2.pt")
    assert meta["num_actions"] == 1 and meta["control_period_s"] == pytest.approx(0.02)
    printed = next(line for line in log.splitlines() if line.startswith("policy metadata ("))
    assert set(printed.split("(", 1)[1].split(")", 1)[0].split(", ")) == set(meta)

    # checkpoint=latest: the newest checkpoint under ./runs/<task>/, as resume=latest
    result = run(ROOT / "scripts" / "play.py", "task=cartpole", "checkpoint=latest", "num_envs=4",
                 f"hydra.run.dir={tmp_path / 'play_latest'}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    metrics = json.loads((tmp_path / "play_latest" / "metrics.json").read_text())
    assert (tmp_path / metrics["checkpoint"]).resolve() == (train_dir / "model_2.pt").resolve()


def test_play_refuses_a_missing_checkpoint(tmp_path):
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={tmp_path / 'nope.pt'}",
                 f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert f"checkpoint={tmp_path / 'nope.pt'}: no such checkpoint file or run directory" in result.stderr
    result = run("scripts/play.py", "task=cartpole", f"checkpoint={tmp_path}", f"hydra.run.dir={tmp_path}")
    assert result.returncode != 0
    assert f"checkpoint={tmp_path}: the directory holds no checkpoint (model_<iteration>.pt)" in result.stderr
    result = run(ROOT / "scripts" / "play.py", "task=cartpole", "checkpoint=latest", f"hydra.run.dir={tmp_path}",
                 cwd=tmp_path)
    assert result.returncode != 0
    assert "checkpoint=latest: no checkpoint (model_<iteration>.pt) of task 'cartpole' under" in result.stderr


def test_onnx_export_is_one_file_unless_the_weights_are_too_big(tmp_path, monkeypatch):
    """Below ONNX_SINGLE_FILE_MAX_BYTES one self-contained policy.onnx; above it the graph and a
    policy.onnx.data file of the weights, which compute the same actions together."""
    from omegaconf import OmegaConf

    ppo_cfg = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "cartpole.yaml").ppo)
    env = envs.make("cartpole", num_envs=4, device="cpu", seed=0)
    runner = Runner(RslRlVecEnv(env), rsl_rl_config(ppo_cfg), log_dir=None, device="cpu", key_terms=[])
    model = runner.alg.get_policy().as_onnx(verbose=False)
    assert 4 * (5 * 64 + 64 + 64 * 64 + 64 + 64 + 1) <= export.weight_bytes(model) < export.ONNX_SINGLE_FILE_MAX_BYTES
    runner.export_policy_to_onnx(str(tmp_path / "small"))
    assert sorted(p.name for p in (tmp_path / "small").iterdir()) == ["policy.onnx"]

    monkeypatch.setattr(export, "ONNX_SINGLE_FILE_MAX_BYTES", 1024)
    runner.export_policy_to_onnx(str(tmp_path / "big"))
    assert sorted(p.name for p in (tmp_path / "big").iterdir()) == ["policy.onnx", "policy.onnx.data"]
    assert (tmp_path / "big" / "policy.onnx").stat().st_size < (tmp_path / "small" / "policy.onnx").stat().st_size
    obs = np.random.default_rng(0).normal(size=(1, 5)).astype(np.float32)
    small, big = (onnxruntime.InferenceSession(str(tmp_path / d / "policy.onnx")) for d in ("small", "big"))
    np.testing.assert_array_equal(small.run(None, {"obs": obs})[0], big.run(None, {"obs": obs})[0])
