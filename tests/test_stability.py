"""Long random-control runs on every shipped model stay finite (slow: 256 worlds x 100,000
steps each; SIMRL_STABILITY_STEPS overrides the step count for a quicker look)."""

import os
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import GYM_ASSETS

from simrl import Sim

MODELS = ["quadruped", "ant", "half_cheetah", "hopper", "walker2d", "humanoid", "humanoidstandup",
          "inverted_pendulum", "inverted_double_pendulum", "reacher"]
STEPS = int(os.environ.get("SIMRL_STABILITY_STEPS", "100000"))
WORLDS = 256


@pytest.mark.slow
@pytest.mark.parametrize("name", MODELS)
def test_random_controls_stay_finite(name):
    if name == "quadruped":
        path = Path(__file__).resolve().parents[1] / "envs" / "assets" / "quadruped.xml"
    else:
        path = GYM_ASSETS / f"{name}.xml"
    mjm = mujoco.MjModel.from_xml_path(str(path))
    sim = Sim.from_model(mjm, num_worlds=WORLDS)
    lo = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1.0)
    lo, hi = torch.as_tensor(lo, dtype=torch.float32), torch.as_tensor(hi, dtype=torch.float32)
    generator = torch.Generator().manual_seed(0)
    hold = 10  # steps per control sample
    for _ in range(STEPS // hold):
        sim.ctrl = lo + (hi - lo) * torch.rand(WORLDS, mjm.nu, generator=generator)
        sim.step(hold)
    assert not sim.nan_worlds.any(), f"{name}: {int(sim.nan_worlds.sum())} worlds went non-finite"
    assert torch.isfinite(sim.qpos).all() and torch.isfinite(sim.qvel).all()
