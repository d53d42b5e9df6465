"""A capped constraint solve (few Newton iterations, a short line search) stops where MuJoCo's
does: simrl's Newton solver follows MuJoCo's (engine_solver.c mj_solPrimal, PrimalSearch;
engine_island.c's islands), so qacc and solver_niter match the installed MuJoCo at any
iterations / ls_iterations, not only at convergence.

The model (tests/data/capped_solver.xml): boxes, capsules and spheres on a plane and on each other
(condim 1, 3, 4 and 6), an arm with limits and friction loss touching a box, and a joint equality
that joins two trees into one island; both friction cones, islands on and off.

A capped solve is not a smooth function of the state (which line-search branch runs, which
contacts exist), and in this scene MuJoCo's own trajectory moves by up to 600 in qacc within 100
steps when its state moves by 1e-14. So the trajectory test steps simrl freely and, at each step,
steps MuJoCo from simrl's state (qpos, qvel, warm start): both must agree to round-off there."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch

from simrl import Sim

MODEL = Path(__file__).parent / "data" / "capped_solver.xml"
CTRL = [0.5, -0.3]


def capped_model(cone: int, iterations: int, ls_iterations: int, island: bool = True) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_path(str(MODEL))
    mjm.opt.cone = cone
    mjm.opt.iterations = iterations
    mjm.opt.ls_iterations = ls_iterations
    if not island:
        mjm.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_ISLAND)
    return mjm


def mujoco_niter(md: mujoco.MjData) -> int:
    """MuJoCo's iterations of its busiest island (of the whole solve without islands)."""
    return int(md.solver_niter[:max(1, md.nisland)].max())


def shadow(mjm: mujoco.MjModel, steps: int, other: mujoco.MjModel | None = None):
    """simrl's trajectory from rest, and at each step MuJoCo's step from simrl's state: the largest
    qacc difference relative to max(1, |qacc|), the steps whose solver_niter differs, and (with
    `other`, a model with other solver options) the largest qacc difference of `other`'s step
    from the same states."""
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu")
    sim.ctrl = torch.tensor([CTRL], dtype=torch.float64)
    sim.view("qacc_warmstart")[:] = 0
    qacc, niter_differs, apart = 0.0, [], 0.0
    for step in range(steps):
        start = mujoco.MjData(mjm)
        start.ctrl[:] = CTRL
        start.qpos[:], start.qvel[:] = sim.qpos[0].numpy(), sim.qvel[0].numpy()
        start.qacc_warmstart[:] = sim.view("qacc_warmstart")[0].numpy()
        if other is not None:
            od = mujoco.MjData(other)
            mujoco.mj_copyData(od, other, start)
            mujoco.mj_step(other, od)
        mujoco.mj_step(mjm, start)
        sim.step()
        scale = max(1.0, float(np.abs(start.qacc).max()))
        qacc = max(qacc, float(np.abs(sim.qacc[0].numpy() - start.qacc).max()) / scale)
        if int(sim.solver_niter[0]) != mujoco_niter(start):
            niter_differs.append(step)
        if other is not None:
            apart = max(apart, float(np.abs(od.qacc - start.qacc).max()) / scale)
    return qacc, niter_differs, apart


@pytest.mark.parametrize("cone", [0, 1], ids=["pyramidal", "elliptic"])
@pytest.mark.parametrize("iterations,ls_iterations", [(1, 4), (2, 2), (3, 1)])
def test_capped_trajectory_matches_mujoco(cone, iterations, ls_iterations):
    """100 steps at iterations 1-3 and ls_iterations 1-4: at each step, MuJoCo's step from
    simrl's state has the same qacc within 1e-11 (relative to max(1, |qacc|); measured <= 3e-13)
    and the same solver_niter. The negative control: MuJoCo's step with two more line-search
    evaluations, from the same states, is more than 1e-6 away, so a line search that stopped
    elsewhere would fail."""
    mjm = capped_model(cone, iterations, ls_iterations)
    qacc, niter_differs, apart = shadow(mjm, 100, other=capped_model(cone, iterations, ls_iterations + 2))
    print(f"cone {cone} iterations {iterations} ls_iterations {ls_iterations}: qacc {qacc:.1e}, solver_niter "
          f"differs at steps {niter_differs}; ls_iterations + 2: {apart:.1e}")
    assert niter_differs == []
    assert qacc < 1e-11
    assert apart > 1e-6


@pytest.mark.parametrize("cone", [0, 1], ids=["pyramidal", "elliptic"])
def test_islands_off_matches_mujoco(cone):
    """<flag island='disable'>: one solve over every dof, scaled by 1 / (meaninertia nv), as
    MuJoCo's; 100 capped steps match as above, and MuJoCo's island solve from the same states is
    more than 1e-6 away."""
    mjm = capped_model(cone, 1, 4, island=False)
    qacc, niter_differs, apart = shadow(mjm, 100, other=capped_model(cone, 1, 4))
    print(f"cone {cone} islands off: qacc {qacc:.1e}, solver_niter differs at {niter_differs}; islands on {apart:.1e}")
    assert niter_differs == []
    assert qacc < 1e-11
    assert apart > 1e-6


@pytest.mark.parametrize("cone", [0, 1], ids=["pyramidal", "elliptic"])
def test_free_trajectory_matches_mujoco(cone):
    """Three Newton iterations with one Newton step per line search: here the trajectory is
    well conditioned, and 100 free steps of both engines end within 1e-10 in qpos (measured
    9e-16 pyramidal, 1.4e-12 elliptic)."""
    mjm = capped_model(cone, 3, 1)
    md = mujoco.MjData(mjm)
    md.ctrl[:] = CTRL
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu")
    sim.ctrl = torch.tensor([CTRL], dtype=torch.float64)
    sim.view("qacc_warmstart")[:] = 0
    niter_differs = []
    for step in range(100):
        mujoco.mj_step(mjm, md)
        sim.step()
        if int(sim.solver_niter[0]) != mujoco_niter(md):
            niter_differs.append(step)
    qpos = float(np.abs(sim.qpos[0].numpy() - md.qpos).max())
    print(f"cone {cone}: qpos {qpos:.1e} after 100 steps, solver_niter differs at {niter_differs}")
    assert niter_differs == []
    assert qpos < 1e-10


@pytest.mark.parametrize("cone", [0, 1], ids=["pyramidal", "elliptic"])
def test_capped_schedules_give_the_same_bits(cone):
    """The fused schedule (a thread per world) and the wide one (a block of threads per world)
    give the same bits on the CPU over 30 capped steps of 3 worlds in different states."""
    mjm = capped_model(cone, 1, 4)
    out = {}
    for schedule in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=3, dtype="float64", device="cpu", schedule=schedule)
        sim.qvel = torch.as_tensor(0.3 * np.random.default_rng(1).standard_normal((3, mjm.nv)))
        sim.ctrl = torch.tensor([CTRL] * 3, dtype=torch.float64)
        niter = []
        for _ in range(30):
            sim.step()
            niter.append(sim.solver_niter.numpy().copy())
        out[schedule] = (sim.qpos.clone(), sim.qacc.clone(), np.array(niter))
    assert torch.equal(out["fused"][0], out["wide"][0])
    assert torch.equal(out["fused"][1], out["wide"][1])
    np.testing.assert_array_equal(out["fused"][2], out["wide"][2])
    assert out["fused"][2].max() >= 1
