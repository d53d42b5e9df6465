"""Spatial tendons that wrap around spheres and cylinders (mju_wrap) against MuJoCo 4.0, float64:
lengths, Jacobians, velocities, the forces through them (springs, dampers, a limit, a motor, a
filtered actuator), sensors and qacc for random states; trajectories; both schedules bit for bit;
the differentiable step against central differences. The model (tests/data/tendon_wrap.xml) has
each path MuJoCo distinguishes: no side site, a side site outside the geom (which picks the way
round, or keeps the straight line), a side site inside the sphere (wrap_inside), a wrap after a
pulley; every path is seen both wrapped and straight among the states."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import assert_qacc_matches_mujoco
from test_schedule import assert_same_data, reverse_thread_order, run
from test_tendon import assert_step_gradients

from simrl import Sim

MODEL = Path(__file__).parent / "data" / "tendon_wrap.xml"
SIDE_TENDONS = ("sphere_side", "cylinder_side")


@pytest.fixture(scope="module")
def mjm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(MODEL))


def without(mjm, what: str) -> mujoco.MjModel:
    """A copy of the model with its wrapping geoms' radius 0 ("geoms": every tendon a straight
    line between its sites, mju_wrap's radius < mjMINVAL) or without side sites ("sides")."""
    other = mujoco.MjModel.from_xml_path(str(MODEL))
    geoms = other.wrap_type >= int(mujoco.mjtWrap.mjWRAP_SPHERE)
    if what == "geoms":
        other.geom_size[other.wrap_objid[geoms], 0] = 0.0
    else:
        other.wrap_prm[geoms] = -1
    return other


def random_states(mjm, n, seed):
    rng = np.random.default_rng(seed)
    return (0.8 * rng.standard_normal((n, mjm.nq)), rng.standard_normal((n, mjm.nv)),
            rng.uniform(-1, 1, (n, mjm.nu)), rng.uniform(-1, 1, (n, mjm.na)))


def mujoco_forward(mjm, qpos, qvel, ctrl, act):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:], md.ctrl[:], md.act[:] = qpos, qvel, ctrl, act
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, dtype="float64", schedule="auto"):
    sim = Sim.from_model(mjm, num_worlds=len(states[0]), dtype=dtype, schedule=schedule)
    for name, x in zip(("qpos", "qvel", "ctrl", "act"), states, strict=True):
        setattr(sim, name, torch.as_tensor(x, dtype=sim.torch_dtype))
    sim.forward()
    return sim


def wrapped(mjm, md) -> np.ndarray:
    """[ntendon, npieces]: whether each site-geom-site piece of each tendon wraps (wrap_obj holds
    the geom at the tangent points)."""
    out = np.zeros((mjm.ntendon, 2), dtype=bool)
    for t in range(mjm.ntendon):
        adr, num = md.ten_wrapadr[t], md.ten_wrapnum[t]
        objs = md.wrap_obj.ravel()[adr:adr + num]
        pieces = [k for k in range(num - 1) if objs[k] >= 0 and objs[k] == objs[k + 1]]
        out[t, :len(pieces)] = True
    return out


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_wrapping_matches_mujoco(mjm, schedule):
    """ten_length, ten_J, ten_velocity, the paths' points (`sim.wrap`), the spring, damper and
    actuator forces, actuator lengths, sensors, the tendon limit's rows and qacc for 48 random
    states, within 1e-12 of MuJoCo's (measured: 4e-16 for lengths, Jacobians and points, 1e-13 for
    qacc); the states cover each tendon wrapped and straight, and the side sites' effect in both
    directions."""
    W = 48
    states = random_states(mjm, W, seed=0)
    sim = simrl_forward(mjm, states, schedule=schedule)
    plain, straight = without(mjm, "sides"), without(mjm, "geoms")
    seen_wrapped = np.zeros(mjm.ntendon, dtype=int)
    seen_straight = np.zeros(mjm.ntendon, dtype=int)
    side_wraps_more = side_other_way = limit_rows = 0
    detour = 0.0
    paths = sim.wrap
    for w in range(W):
        x = [s[w] for s in states]
        md = mujoco_forward(mjm, *x)
        ten_J = np.zeros((mjm.ntendon, mjm.nv))
        mujoco.mju_sparse2dense(ten_J, md.ten_J, mjm.ten_J_rownnz, mjm.ten_J_rowadr, mjm.ten_J_colind)
        for name, ref in (("ten_length", md.ten_length), ("ten_J", ten_J), ("ten_velocity", md.ten_velocity),
                          ("qfrc_spring", md.qfrc_spring), ("qfrc_damper", md.qfrc_damper),
                          ("actuator_length", md.actuator_length), ("qfrc_actuator", md.qfrc_actuator),
                          ("sensordata", md.sensordata), ("qacc", md.qacc)):
            ours = sim.qacc[w].numpy() if name == "qacc" else sim.view(name)[w].numpy()
            assert np.abs(ours - ref).max() < 1e-12 * max(1.0, np.abs(ref).max()), (w, name)
        # the paths' points (mjData's wrap_xpos, wrap_obj, ten_wrapadr, ten_wrapnum; measured 5e-16)
        total = int(md.ten_wrapnum.sum())
        assert np.array_equal(paths.ten_wrapnum[w].numpy(), md.ten_wrapnum), w
        assert np.array_equal(paths.ten_wrapadr[w].numpy(), md.ten_wrapadr), w
        assert np.array_equal(paths.wrap_obj[w].reshape(-1)[:total].numpy(), md.wrap_obj.ravel()[:total]), w
        ours = paths.wrap_xpos[w].reshape(-1, 3)[:total].numpy()
        assert np.abs(ours - md.wrap_xpos.reshape(-1, 3)[:total]).max() < 1e-12, w
        wraps = wrapped(mjm, md).any(axis=1)
        seen_wrapped += wraps
        seen_straight += ~wraps
        # the straight line between the sites is shorter (the negative control)
        far = mujoco_forward(straight, *x)
        assert np.all((md.ten_length - far.ten_length)[wraps] > 0)
        detour = max(detour, (md.ten_length - far.ten_length).max())
        # a side site wraps where the straight line clears the geom on the other side, and where
        # both wrap, it can send the path the longer way round
        md_plain = mujoco_forward(plain, *x)
        near = wrapped(plain, md_plain).any(axis=1)
        for t in (mjm.tendon(n).id for n in SIDE_TENDONS):
            side_wraps_more += wraps[t] and not near[t]
            side_other_way += wraps[t] and near[t] and md.ten_length[t] > md_plain.ten_length[t] + 1e-6
        limit_rows += int(np.sum(md.efc_type == int(mujoco.mjtConstraint.mjCNSTR_LIMIT_TENDON)))
    assert np.all(seen_wrapped >= 2) and np.all(seen_straight >= 2), (seen_wrapped, seen_straight)
    assert side_wraps_more >= 2 and side_other_way >= 2, (side_wraps_more, side_other_way)
    assert limit_rows >= 2, "some state should have the limited tendon at a limit"
    assert detour > 0.1


def test_qacc_against_straight_tendons(mjm):
    """qacc within 1e-10 of MuJoCo's, and far from MuJoCo's with the geoms' radius 0 (straight
    tendons: the forces through the wrapped paths are exercised)."""
    qpos, qvel, ctrl, act = random_states(mjm, 8, seed=1)
    sim = simrl_forward(mjm, (qpos, qvel, ctrl, np.zeros_like(act)))  # the helper sets no act
    assert_qacc_matches_mujoco(sim, mjm, without(mjm, "geoms"), (qpos, qvel, ctrl), 1e-10)


@pytest.mark.parametrize("integrator,dtype,tol", [("Euler", "float64", 1e-8), ("RK4", "float64", 1e-8),
                                                  ("implicitfast", "float64", 1e-8), ("Euler", "float32", 1e-4)])
def test_trajectory_matches_mujoco(integrator, dtype, tol):
    """300 steps of random controls from a random state, tendons wrapping and unwrapping: qpos of
    every step (measured: float64 6e-15, float32 1.2e-6)."""
    mjm = mujoco.MjModel.from_xml_path(str(MODEL))
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    rng = np.random.default_rng(2)
    md = mujoco.MjData(mjm)
    md.qpos[:] = 0.5 * rng.standard_normal(mjm.nq)
    sim = Sim.from_model(mjm, num_worlds=1, dtype=dtype)
    sim.qpos = torch.as_tensor(md.qpos[None], dtype=sim.torch_dtype)
    worst = moved = 0.0
    wraps = np.zeros(mjm.ntendon, dtype=int)
    for _ in range(300):
        md.ctrl[:] = rng.uniform(-1, 1, mjm.nu)
        sim.ctrl = torch.as_tensor(md.ctrl[None], dtype=sim.torch_dtype)
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
        moved = max(moved, np.abs(md.qpos).max())
        wraps += wrapped(mjm, md).any(axis=1)
    print(f"{integrator} {dtype}: max qpos difference {worst:.2e}; steps wrapped per tendon {wraps}")
    assert moved > 0.3
    assert np.count_nonzero(wraps) >= 3 and np.count_nonzero((wraps > 0) & (wraps < 300)) >= 2
    assert worst < tol, f"max qpos difference {worst:.2e}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(mjm, dtype):
    assert_same_data(run(mjm, "fused", dtype, 20), run(mjm, "wide", dtype, 20))


def test_wide_threads_in_any_order(mjm, monkeypatch):
    ordered = run(mjm, "wide", "float64", 20)
    reverse_thread_order(monkeypatch)
    assert_same_data(ordered, run(mjm, "wide", "float64", 20))


def test_gradients_against_finite_differences(mjm):
    """d (a random linear function of one diff_step's state) / d (qpos, qvel, ctrl, act) against
    central differences (float64), in states where every kind of piece wraps, the inside side
    site's Newton solve included (its adjoint is the implicit function theorem's)."""
    qpos, qvel, ctrl, act = random_states(mjm, 64, seed=3)
    pieces = np.array([wrapped(mjm, mujoco_forward(mjm, qpos[w], qvel[w], ctrl[w], act[w])).any(axis=1)
                       for w in range(64)])
    # at most three states that together wrap every tendon
    chosen = []
    for w in np.argsort(-pieces.sum(axis=1), kind="stable"):
        covered = pieces[chosen].any(axis=0) if chosen else np.zeros(mjm.ntendon, dtype=bool)
        if (pieces[w] & ~covered).any() and len(chosen) < 3:
            chosen.append(int(w))
    assert pieces[chosen].any(axis=0).all(), pieces[chosen]
    sim = Sim.from_model(mjm, num_worlds=len(chosen), dtype="float64")
    assert_step_gradients(sim, qpos[chosen], qvel[chosen], ctrl[chosen], act[chosen], seed=4)
