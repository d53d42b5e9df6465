"""Contacts, limits and the constraint solver against MuJoCo (Newton, tolerance 1e-10,
1000 iterations, pyramidal cone): contact sets, one-step qacc, and trajectories."""

import copy
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import GYM_ASSETS, qpos_distance, quaternion_slices, random_ctrl

from simrl import Sim

QUADRUPED = Path(__file__).resolve().parents[1] / "envs" / "assets" / "quadruped.xml"

SCENES = {
    # boxes, spheres and capsules on a plane and on each other: every primitive pair
    "primitives": """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 1"/>
    <body pos="0 0 0.2"><freejoint/><geom type="box" size="0.1 0.15 0.05"/></body>
    <body pos="0.05 0.02 0.35" euler="10 20 30"><freejoint/><geom type="box" size="0.08 0.06 0.04"/></body>
    <body pos="0.5 0 0.15"><freejoint/><geom type="sphere" size="0.1"/></body>
    <body pos="0.52 0.03 0.35"><freejoint/><geom type="sphere" size="0.08"/></body>
    <body pos="-0.5 0 0.15" euler="20 10 0"><freejoint/><geom type="capsule" size="0.05 0.2"/></body>
    <body pos="-0.45 0.05 0.35" euler="80 0 30"><freejoint/><geom type="capsule" size="0.04 0.15"/></body>
    <body pos="0.25 0.0 0.45" euler="0 70 10"><freejoint/><geom type="capsule" size="0.05 0.2"/></body>
  </worldbody>
</mujoco>""",
}


def load(name: str) -> mujoco.MjModel:
    if name == "quadruped":
        mjm = mujoco.MjModel.from_xml_path(str(QUADRUPED))
    elif name in SCENES:
        mjm = mujoco.MjModel.from_xml_string(SCENES[name])
    else:
        mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))
    mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    mjm.opt.tolerance = 1e-10
    mjm.opt.iterations = 1000
    return mjm


def contact_states(mjm: mujoco.MjModel, n: int, rng: np.random.Generator):
    """n states with contacts penetrating, touching and apart: MuJoCo trajectories from
    perturbed initial states under random controls, sampled, with the height jittered."""
    states = []
    mjd = mujoco.MjData(mjm)
    while len(states) < n:
        mujoco.mj_resetData(mjm, mjd)
        if mjm.nkey:
            mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
        mjd.qpos[:] += rng.normal(0.0, 0.1, mjm.nq)
        for s in quaternion_slices(mjm):
            mjd.qpos[s] /= np.linalg.norm(mjd.qpos[s])
        for _ in range(int(rng.integers(20, 200))):
            mjd.ctrl[:] = random_ctrl(mjm, 1, rng)[0]
            mujoco.mj_step(mjm, mjd)
        qpos = mjd.qpos.copy()
        if mjm.jnt_type[0] == mujoco.mjtJoint.mjJNT_FREE:
            qpos[2] += rng.normal(0.0, 0.02)
        # put one limited hinge or slide joint at (just inside or beyond) an end of its range
        limited = [j for j in np.flatnonzero(mjm.jnt_limited)
                   if mjm.jnt_type[j] in (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))]
        if limited:
            j = rng.choice(limited)
            qpos[mjm.jnt_qposadr[j]] = mjm.jnt_range[j, rng.integers(2)] + rng.normal(0.0, 0.02)
        states.append((qpos, mjd.qvel.copy() + rng.normal(0.0, 0.3, mjm.nv), random_ctrl(mjm, 1, rng)[0]))
    return states


CONTACT_MODELS = ["ant", "half_cheetah", "hopper", "walker2d", "humanoid", "quadruped", "primitives"]


@pytest.mark.parametrize("name", CONTACT_MODELS)
def test_contacts_match_mujoco(name, rng):
    mjm = load(name)
    states = contact_states(mjm, 16, rng)
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype="float64")
    for key, k in (("qpos", 0), ("qvel", 1), ("ctrl", 2)):
        setattr(sim, key, torch.as_tensor(np.stack([s[k] for s in states])))
    sim.forward()
    con = sim.contact
    mjd = mujoco.MjData(mjm)
    total = 0
    for w, (qpos, qvel, ctrl) in enumerate(states):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(mjm, mjd)
        ours = np.flatnonzero(con.active[w].numpy())
        assert len(ours) == mjd.ncon, f"{name} world {w}: {len(ours)} contacts, MuJoCo {mjd.ncon}"
        unmatched = list(ours)
        for c in mjd.contact[: mjd.ncon]:
            candidates = [s for s in unmatched if tuple(con.geom[w, s].tolist()) == (c.geom[0], c.geom[1])]
            assert candidates, f"{name} world {w}: MuJoCo contact between geoms {c.geom} not found"
            s = min(candidates, key=lambda s: np.linalg.norm(con.pos[w, s].numpy() - c.pos))
            unmatched.remove(s)
            assert abs(con.dist[w, s].item() - c.dist) < 1e-5
            np.testing.assert_allclose(con.pos[w, s].numpy(), c.pos, atol=1e-5)
            np.testing.assert_allclose(con.frame[w, s].numpy().ravel(), c.frame, atol=1e-5)
            total += 1
    assert total > 0, f"{name}: the sampled states produced no contacts; the test would prove nothing"


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", CONTACT_MODELS + ["inverted_double_pendulum"])
def test_qacc_with_contacts_and_limits_matches_mujoco(name, dtype, rng):
    mjm = load(name)
    states = contact_states(mjm, 16, rng)
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype)
    sim.set_solver(iterations=1000, tolerance=1e-10 if dtype == "float64" else 1e-7)
    for key, k in (("qpos", 0), ("qvel", 1), ("ctrl", 2)):
        setattr(sim, key, torch.as_tensor(np.stack([s[k] for s in states]), dtype=sim.torch_dtype))
    sim.forward()
    mjd = mujoco.MjData(mjm)
    worst, constrained = 0.0, 0
    for w, (qpos, qvel, ctrl) in enumerate(states):
        mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = qpos, qvel, ctrl
        mujoco.mj_forward(mjm, mjd)
        constrained += mjd.nefc > 0
        ref = mjd.qacc
        worst = max(worst, np.linalg.norm(sim.qacc[w].numpy() - ref) / max(np.linalg.norm(ref), 1e-9))
    assert constrained > 0, f"{name}: no state had an active constraint"
    assert worst < (1e-3 if dtype == "float32" else 1e-6), f"{name}: relative qacc error {worst:.2e}"


# Trajectories: simrl (float32 and float64) against mj_step over whole trajectories, the largest
# qpos difference at any step. Each tolerance is about 100x the float64 error achieved (measured
# 2026-12, in the comment beside it), but not below 1e-10 (rounding differences grow along a
# contact trajectory); float32 gets 1e-4, 40-160x what it achieves. Each test has a negative
# control: MuJoCo itself, with one parameter of the model changed by 10%, must be further from
# MuJoCo than both tolerances, or the test could not tell a wrong model from a right one.
F32_TOL = 1e-4


def initial_state(mjm, setup):
    mjd = mujoco.MjData(mjm)
    setup(mjd)
    return mjd.qpos.copy(), mjd.qvel.copy(), mjd.ctrl.copy()


def mujoco_trajectory(mjm, state, steps):
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:], mjd.ctrl[:] = state
    out = []
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
        out.append(mjd.qpos.copy())
    return np.stack(out)


def simrl_trajectory(mjm, state, steps, dtype):
    sim = Sim.from_model(mjm, num_worlds=1, dtype=dtype)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x[None], dtype=sim.torch_dtype) for x in state)
    out = []
    for _ in range(steps):
        sim.step()
        out.append(sim.qpos[0].numpy().astype(np.float64))
    assert not sim.nan_worlds.any()
    return np.stack(out)


def trajectory_distance(mjm, a, b) -> float:
    return max(qpos_distance(mjm, x, y) for x, y in zip(a, b, strict=True))


def check_trajectory(mjm, seconds, setup, f64_tol, control, f32_tol=F32_TOL):
    """simrl's trajectories from `setup`'s state against mj_step's, within f64_tol (float64) and
    f32_tol (float32); `control(mjm)` changes one parameter in place, and MuJoCo on the changed
    model must miss both tolerances. Returns MuJoCo's trajectory and simrl's float32 one."""
    state = initial_state(mjm, setup)
    steps = int(round(seconds / mjm.opt.timestep))
    ref = mujoco_trajectory(mjm, state, steps)
    ours = {dtype: simrl_trajectory(mjm, state, steps, dtype) for dtype in ("float32", "float64")}
    err = {dtype: trajectory_distance(mjm, traj, ref) for dtype, traj in ours.items()}
    print(f"trajectory error float64 {err['float64']:.2e}, float32 {err['float32']:.2e}")
    assert err["float64"] < f64_tol, f"float64 trajectory differs from mj_step by {err['float64']:.3e}"
    assert err["float32"] < f32_tol, f"float32 trajectory differs from mj_step by {err['float32']:.3e}"
    changed = copy.copy(mjm)
    control(changed)
    miss = trajectory_distance(mjm, mujoco_trajectory(changed, state, steps), ref)
    print(f"negative control: {miss:.2e}")
    assert miss > max(f64_tol, f32_tol), f"MuJoCo with the changed model is only {miss:.2e} away: no resolution"
    return ref, ours["float32"]


def single_body(geom: str, pos: str, euler: str = "0 0 0", floor_friction: str = "1 0.005 0.0001") -> mujoco.MjModel:
    return load_xml(f"""<mujoco><option timestep="0.002"/><worldbody>
        <geom type="plane" size="10 10 1" friction="{floor_friction}"/>
        <body pos="{pos}" euler="{euler}"><freejoint/>{geom}</body></worldbody></mujoco>""")


def load_xml(xml):
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    return mjm


def simulate(mjm, seconds, setup, dtype="float32"):
    """Run MuJoCo and simrl side by side from the state `setup(mjd)` writes; return both final
    qpos (used by the cylinder, condim and elliptic-cone tests)."""
    mjd = mujoco.MjData(mjm)
    setup(mjd)
    sim = Sim.from_model(mjm, num_worlds=1, dtype=dtype)
    sim.qpos = torch.as_tensor(mjd.qpos[None], dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(mjd.qvel[None], dtype=sim.torch_dtype)
    sim.ctrl = torch.as_tensor(mjd.ctrl[None], dtype=sim.torch_dtype)
    steps = int(round(seconds / mjm.opt.timestep))
    for _ in range(steps):
        mujoco.mj_step(mjm, mjd)
    sim.step(steps)
    assert not sim.nan_worlds.any()
    return mjd.qpos.copy(), sim.qpos[0].numpy().astype(np.float64)


def scale(field: str, factor: float, column: int | None = 0):
    """A negative control: multiply a model field (one column of it) by `factor`."""
    def change(mjm):
        values = getattr(mjm, field)
        if column is None:
            values *= factor
        else:
            values[:, column] *= factor
    return change


def test_box_dropped_on_a_plane_rests_at_mujocos_pose():
    mjm = single_body('<geom type="box" size="0.1 0.15 0.05"/>', "0 0 0.5", "15 25 5")
    # achieved float64 1.1e-9; control: the box's contact time constant 0.02 -> 0.022 s (4e-3)
    ref, _ = check_trajectory(mjm, 2.0, lambda d: None, 1e-7, scale("geom_solref", 1.1))
    assert abs(ref[-1, 2] - 0.05) < 1e-3  # at rest on its face


def test_sphere_slides_then_rolls_like_mujoco():
    """Friction 0.2 on both the ball and the floor (MuJoCo combines them by maximum): the ball,
    launched without spin, slides for 2 v / (7 mu g) = 0.15 s before it rolls, so its path
    depends on the friction coefficient."""
    mjm = single_body('<geom type="sphere" size="0.1" friction="0.2 0.005 0.0001"/>', "0 0 0.1",
                      floor_friction="0.2 0.005 0.0001")

    def push(mjd):
        mjd.qvel[0] = 1.0

    # achieved float64 2.2e-10; control: friction 0.2 -> 0.22 on both geoms (2e-2)
    ref, _ = check_trajectory(mjm, 2.0, push, 2e-8, scale("geom_friction", 1.1))
    assert abs(ref[-1, 0] - ref[-2, 0] - 5 / 7 * 1.0 * mjm.opt.timestep) < 1e-4  # rolling at 5/7 of the launch speed


def test_capsule_slides_to_rest_like_mujoco():
    """Friction 0.3 on the capsule and on the floor, so that the low friction acts (MuJoCo takes
    the larger of the two): it stops after about v^2 / (2 mu g) = 0.68 m."""
    mjm = single_body('<geom type="capsule" size="0.05 0.2" friction="0.3 0.005 0.0001"/>', "0 0 0.05", "0 90 0",
                      floor_friction="0.3 0.005 0.0001")

    def push(mjd):
        mjd.qvel[0] = 2.0

    # achieved float64 1.5e-10, float32 1.9e-3; control: friction 0.3 -> 0.33 on both geoms (6e-2).
    # The capsule starts exactly on the floor: MuJoCo's float64 quaternion of euler 0 90 0 has
    # w and y one bit apart, so one end is 1e-17 lower and only it touches; in float32 they round
    # to one value, MuJoCo's formulas then give both ends distance 0 and both touch: another first
    # contact set, decided by rounding alone (not by the physics), hence float32's own tolerance
    ref, _ = check_trajectory(mjm, 2.0, push, 1e-8, scale("geom_friction", 1.1), f32_tol=5e-3)
    assert abs(ref[-1, 0] - 2.0**2 / (2 * 0.3 * 9.81)) < 0.05


@pytest.mark.parametrize("name", ["ant", "quadruped"])
def test_robot_dropped_from_above_rests_like_mujoco(name):
    mjm = load(name)

    def lift(mjd):
        if mjm.nkey:
            mujoco.mj_resetDataKeyframe(mjm, mjd, 0)
        mjd.qpos[2] += 0.3
    # achieved float64: ant 6.2e-8, quadruped 2e-15; control: joint damping x1.1 (ant 8e-2, quadruped 6e-3)
    check_trajectory(mjm, 2.0, lift, {"ant": 1e-5, "quadruped": 1e-10}[name], scale("dof_damping", 1.1, None))


def test_quadruped_stands_for_10_seconds_like_mujoco():
    mjm = load("quadruped")
    # achieved float64 2.8e-6; control: the contact time constant x1.1 (2e-3)
    ref, ours = check_trajectory(mjm, 10.0, lambda d: mujoco.mj_resetDataKeyframe(mjm, d, mjm.key("home").id), 3e-4,
                                 scale("geom_solref", 1.1))
    assert ours[-1, 2] > 0.25, "the quadruped fell"


def test_a_diverging_world_is_flagged_and_isolated():
    mjm = load("quadruped")
    home = mjm.key("home")
    runs = []
    for fault in (False, True):
        sim = Sim.from_model(mjm, num_worlds=3)
        sim.qpos = torch.as_tensor(np.tile(home.qpos, (3, 1)), dtype=torch.float32)
        sim.ctrl = torch.as_tensor(np.tile(home.ctrl, (3, 1)), dtype=torch.float32)
        sim.step(5)
        if fault:
            sim.qvel[1, 7] = float("nan")
        sim.step(20)
        runs.append((sim.qpos.clone(), sim.nan_worlds.clone()))
    (clean, clean_flags), (faulty, flags) = runs
    assert not clean_flags.any()
    assert flags.tolist() == [False, True, False]
    assert torch.equal(clean[[0, 2]], faulty[[0, 2]])
