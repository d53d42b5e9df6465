"""The body transmission (mj_transmission's mjTRN_BODY: adhesion actuators) against MuJoCo 4.0 in
float64: actuator length, velocity and moment, qfrc_actuator, the actuator sensors and qacc (with
negative controls: the adhesion's gain zeroed, and its control off), trajectories of 200 steps
under Euler, implicitfast and RK4, both schedules bit for bit, and diff_step's gradients against
central differences.

The models, tests/data/*.xml: adhesion.xml (MuJoCo Warp's test model: spheres on the floor inside
their margin or in their gap) and adhesion_box.xml (simrl's: a gripper whose pad rests on a free
box and whose toe reaches the floor, with the box's own contacts with the floor beside), the
latter in the pyramidal and the elliptic cone with condim 1, 3 and 6.
"""

import copy
import re
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from conftest import qpos_distance
from test_schedule import assert_same_data

from simrl import Sim, diff_step

DATA = Path(__file__).parent / "data"
VARIANTS = ["pyramidal-1", "pyramidal-3", "pyramidal-6", "elliptic-3", "elliptic-6"]


def box_model(variant: str = "pyramidal-3", integrator: str | None = None, converge: bool = True) -> mujoco.MjModel:
    """adhesion_box.xml with the cone and condim of `variant` ('cone-condim'); `converge`: both
    solvers to tolerance 1e-14 (so that only the model, not convergence, can make them differ)."""
    cone, condim = variant.split("-")
    text = (DATA / "adhesion_box.xml").read_text().replace('condim="3"', f'condim="{condim}"')
    mjm = mujoco.MjModel.from_xml_string(text)
    mjm.opt.cone = getattr(mujoco.mjtCone, f"mjCONE_{cone.upper()}")
    if integrator:
        mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator.upper()}")
    if converge:
        mjm.opt.tolerance, mjm.opt.iterations = 1e-14, 1000
    return mjm


def without_adhesion(mjm: mujoco.MjModel, only: str | None = None) -> mujoco.MjModel:
    """The negative control: the same model with the body transmissions' gain and bias zeroed
    (`only`: that actuator's alone)."""
    other = copy.copy(mjm)
    for a in range(other.nu):
        if other.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_BODY and only in (None, other.actuator(a).name):
            other.actuator_gainprm[a] = 0.0
            other.actuator_biasprm[a] = 0.0
    return other


def box_states(mjm, n, seed=0):
    """Near the rest pose: the pad on the box (up to 4 contacts with rows), the toe 15 mm over the
    floor (in its gap, or inside its 10 mm margin when the gripper sits lower), the box on the
    floor; random velocities and controls, the adhesion's ("glue") off in world 0."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(mjm.qpos0, (n, 1))
    qpos[:, :3] += rng.normal(0.0, 0.004, (n, 3))
    qpos[:, 3:7] += rng.normal(0.0, 0.02, (n, 4))
    qpos[:, 3:7] /= np.linalg.norm(qpos[:, 3:7], axis=1, keepdims=True)
    qpos[:, 7:] += rng.normal(0.0, 0.008, (n, 3))
    qvel = rng.normal(0.0, 0.3, (n, mjm.nv))
    ctrl = rng.uniform(0.0, 1.0, (n, mjm.nu))
    ctrl[0, 0] = 0.0
    return qpos, qvel, ctrl


def key_states(mjm):
    """adhesion.xml's keyframes with the adhesion on, then half on."""
    md = mujoco.MjData(mjm)
    out = []
    for key in range(mjm.nkey):
        mujoco.mj_resetDataKeyframe(mjm, md, key)
        for ctrl in (1.0, 0.5):
            out.append((md.qpos.copy(), np.random.default_rng(key).normal(0.0, 0.3, mjm.nv), np.full(mjm.nu, ctrl)))
    return tuple(np.stack(x) for x in zip(*out, strict=True))


def mujoco_forward(mjm, qpos, qvel, ctrl):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:], md.ctrl[:] = qpos, qvel, ctrl
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, schedule="fused", dtype="float64"):
    sim = Sim.from_model(mjm, num_worlds=len(states[0]), dtype=dtype, schedule=schedule)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x, dtype=sim.torch_dtype) for x in states)
    sim.forward()
    return sim


def adhesion_contacts(mjm, md) -> list[int]:
    """contact.exclude of the contacts that touch an adhesion actuator's body."""
    bodies = {int(mjm.actuator_trnid[a, 0]) for a in range(mjm.nu)
              if mjm.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_BODY}
    return [int(c.exclude) for c in md.contact[:md.ncon] if bodies & {int(mjm.geom_bodyid[g]) for g in c.geom}]


def test_states_exercise_every_case():
    """Among the states the tests use: contacts with rows and in the gap, each alone and together
    on the gripper, the box's contacts with the floor (not the gripper's), and states without any
    contact of the adhesion's body (adhesion.xml's second keyframe: the moment is zero)."""
    seen = set()
    for mjm, states in ((box_model(), box_states(box_model(), 8)),
                        (mujoco.MjModel.from_xml_path(str(DATA / "adhesion.xml")), None)):
        states = states or key_states(mjm)
        for state in zip(*states, strict=True):
            md = mujoco_forward(mjm, *state)
            excluded = adhesion_contacts(mjm, md)
            seen.add((0 in excluded, 1 in excluded))
            assert md.ncon > len(excluded) or mjm.nbody == 4  # others' contacts beside (the box model)
    assert seen == {(True, False), (False, True), (True, True), (False, False)}, seen


def model_and_states(name):
    if name == "adhesion":
        mjm = mujoco.MjModel.from_xml_path(str(DATA / "adhesion.xml"))
        return mjm, key_states(mjm)
    mjm = box_model(name)
    return mjm, box_states(mjm, 8)


@pytest.mark.parametrize("name", ["adhesion", *VARIANTS])
def test_transmission_matches_mujoco(name):
    """Per state: actuator_length (0), actuator_velocity, actuator_moment, qfrc_actuator and the
    actuator sensors (float64, 1e-12 relative)."""
    mjm, states = model_and_states(name)
    sim = simrl_forward(mjm, states)
    # the rows of the body transmissions (simrl keeps no row for a hinge's or slide's actuator)
    rows = [a for a in range(mjm.nu) if mjm.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_BODY]
    moments = []
    for w in range(len(states[0])):
        md = mujoco_forward(mjm, *(x[w] for x in states))
        moment = np.zeros((mjm.nu, mjm.nv))
        mujoco.mju_sparse2dense(moment, md.actuator_moment, md.moment_rownnz, md.moment_rowadr, md.moment_colind)
        moment = moment[rows]
        moments.append(moment)
        for field, ours, ref in (("actuator_length", sim.view("actuator_length")[w], md.actuator_length),
                                 ("actuator_velocity", sim.view("actuator_velocity")[w], md.actuator_velocity),
                                 ("actuator_moment", sim.view("actuator_moment")[w][rows], moment),
                                 ("qfrc_actuator", sim.view("qfrc_actuator")[w], md.qfrc_actuator),
                                 ("sensordata", sim.sensordata[w], md.sensordata)):
            err = np.abs(ours.numpy() - ref).max(initial=0.0) / max(1.0, np.abs(ref).max(initial=0.0))
            assert err < 1e-12, f"world {w} {field}: {err:.2e}"
    # the moments are not trivial: non-zero in most states, on the box's dofs too in the box model
    assert sum(np.abs(m).max() > 0.5 for m in moments) >= len(moments) // 2
    if name != "adhesion":
        assert max(np.abs(m[0, :6]).max() for m in moments) > 0.5


@pytest.mark.parametrize("name", ["adhesion", *VARIANTS])
def test_qacc_matches_mujoco(name):
    """qacc within `tol` (relative to max(1, |qacc|)) of mj_forward's; MuJoCo without the body
    transmissions' gain and bias misses by more than 100 tol where their body touches, and
    MuJoCo without the adhesion's ("glue") agrees where its control is off (world 0 of the box
    model) or its body touches nothing. tol is 1e-10, 1e-7 in the elliptic cone:
    there MuJoCo's Newton solver stops 6e-9 short on the box model's states where a single corner
    of the box touches the floor (measured with the adhesion taken out of the model)."""
    mjm, states = model_and_states(name)
    tol = 1e-7 if name.startswith("elliptic") else 1e-10
    if name == "adhesion":
        # the other keyframes: in the third the unactuated sphere's center lies on the floor, its
        # rows (D = 5e14) make the primal cost 6.9e19, the adhesion body's qacc moves it by less
        # than its rounding, and the two Newton solvers stop at different points of equal cost
        # (test_third_keyframe_without_the_unactuated_body)
        keep = [w for w in range(len(states[0])) if w // 2 != 2]
        states = tuple(x[keep] for x in states)
    sim = simrl_forward(mjm, states)
    inert, unglued = without_adhesion(mjm), without_adhesion(mjm, "glue" if name != "adhesion" else None)
    misses = 0
    for w in range(len(states[0])):
        state = tuple(x[w] for x in states)
        ref = mujoco_forward(mjm, *state)
        scale = max(1.0, np.abs(ref.qacc).max())
        err = np.abs(sim.qacc[w].numpy() - ref.qacc).max() / scale
        assert err < tol, f"world {w}: qacc {err:.2e}"
        miss = np.abs(sim.qacc[w].numpy() - mujoco_forward(inert, *state).qacc).max() / scale
        unglued_miss = np.abs(sim.qacc[w].numpy() - mujoco_forward(unglued, *state).qacc).max() / scale
        if not adhesion_contacts(mjm, ref):
            assert miss < tol, f"world {w}: a body transmission acts without contacts ({miss:.2e})"
        else:
            assert miss > 100 * tol, f"world {w}: the body transmissions change qacc by only {miss:.2e}"
            misses += 1
        if states[2][w, 0] == 0.0 or not adhesion_contacts(mjm, ref):
            assert unglued_miss < tol, f"world {w}: the adhesion acts while off or untouched ({unglued_miss:.2e})"
        else:
            assert unglued_miss > 100 * tol, f"world {w}: the adhesion changes qacc by only {unglued_miss:.2e}"
    assert misses >= len(states[0]) // 2


def test_qacc_matches_mujoco_float32():
    """float32: qacc within 1e-4 (relative to max(1, |qacc|)) of mj_forward's where the body
    transmissions act; MuJoCo without them misses by more than 100 times that."""
    mjm = box_model("pyramidal-3")
    states = box_states(mjm, 8)
    sim = simrl_forward(mjm, states, dtype="float32")
    inert = without_adhesion(mjm)
    for w in range(8):
        state = tuple(x[w] for x in states)
        ref = mujoco_forward(mjm, *state)
        scale = max(1.0, np.abs(ref.qacc).max())
        assert np.abs(sim.qacc[w].numpy() - ref.qacc).max() / scale < 1e-4
        if adhesion_contacts(mjm, ref):
            assert np.abs(sim.qacc[w].numpy() - mujoco_forward(inert, *state).qacc).max() / scale > 1e-2


def test_third_keyframe_without_the_unactuated_body():
    """adhesion.xml's third keyframe, which test_qacc_matches_mujoco leaves out, matches once the
    unactuated body (whose contact rows swamp the primal cost) is taken out of the model."""
    text = (DATA / "adhesion.xml").read_text()
    text = re.sub(r"<!-- unactuated -->.*?</body>", "", text, flags=re.S)
    text = re.sub(r'(<key qpos="[^ ]+ [^ ]+) [^"]+"', r'\1"', text)  # the keyframes without its joint
    mjm = mujoco.MjModel.from_xml_string(text)
    states = tuple(x[4:6] for x in key_states(mjm))
    sim = simrl_forward(mjm, states)
    for w in range(2):
        ref = mujoco_forward(mjm, *(x[w] for x in states))
        assert adhesion_contacts(mjm, ref) == [0, 0, 0]
        assert np.abs(sim.qacc[w].numpy() - ref.qacc).max() < 1e-10 * max(1.0, np.abs(ref.qacc).max())


def trajectory(mjm, steps=200, seed=2, models=()):
    """qpos after each of `steps` steps from 3 of box_states with random controls: simrl's, then
    mj_step's on mjm and on each of `models`."""
    qpos, qvel, _ = box_states(mjm, 3, seed)
    rng = np.random.default_rng(seed)
    controls = rng.uniform(0.0, 1.0, (steps, 3, mjm.nu))
    sim = Sim.from_model(mjm, num_worlds=3, dtype="float64")
    sim.qpos, sim.qvel = torch.as_tensor(qpos), torch.as_tensor(qvel)
    ours = []
    for ctrl in controls:
        sim.ctrl = torch.as_tensor(ctrl)
        sim.step()
        ours.append(sim.qpos.numpy().copy())
    out = [np.stack(ours)]
    for m in (mjm, *models):
        datas = [mujoco.MjData(m) for _ in range(3)]
        for md, q, v in zip(datas, qpos, qvel, strict=True):
            md.qpos[:], md.qvel[:] = q, v
        traj = []
        for ctrl in controls:
            for md, c in zip(datas, ctrl, strict=True):
                md.ctrl[:] = c
                mujoco.mj_step(m, md)
            traj.append(np.stack([md.qpos.copy() for md in datas]))
        out.append(np.stack(traj))
    return out


@pytest.mark.parametrize("variant", ["pyramidal-3", "elliptic-6"])
@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_trajectory_matches_mujoco(variant, integrator):
    """qpos at every step of 200 under random controls within 1e-8 of mj_step's; without the
    adhesion's gain MuJoCo ends more than 1e-3 away (the negative control)."""
    mjm = box_model(variant, integrator)
    ours, ref, inert = trajectory(mjm, models=(without_adhesion(mjm),))
    err = max(qpos_distance(mjm, a, b) for a, b in zip(ours, ref, strict=True))
    miss = qpos_distance(mjm, ours[-1], inert[-1])
    print(f"{variant} {integrator}: max qpos difference {err:.2e}, without the adhesion {miss:.2e}")
    assert err < 1e-8, f"max qpos difference {err:.2e}"
    assert miss > 1e-3, f"the adhesion moves the trajectory by only {miss:.2e}"


@pytest.mark.parametrize("variant", ["pyramidal-3", "elliptic-6"])
def test_wide_equals_fused_bit_for_bit(variant):
    """20 steps of the box model from box_states in both schedules: every Data array, bit for bit."""
    mjm = box_model(variant, converge=False)
    runs = []
    for schedule in ("fused", "wide"):
        sim = simrl_forward(mjm, box_states(mjm, 6), schedule)
        sim.step(20)
        runs.append(sim)
    assert_same_data(*runs)


@pytest.mark.parametrize("variant,integrator", [("pyramidal-3", "implicitfast"), ("elliptic-3", "RK4"),
                                                ("pyramidal-1", "Euler")])
def test_gradients_against_finite_differences(variant, integrator):
    """d (a random linear function of the state after 2 steps) / d (qpos, qvel, ctrl) against
    central differences (float64), from states whose contacts stay the same within the step."""
    mjm = box_model(variant, integrator)
    W = 2
    qpos, qvel, ctrl = box_states(mjm, W + 1, seed=4)
    qpos, qvel, ctrl = qpos[1:], 0.1 * qvel[1:], ctrl[1:]  # the adhesion on in both worlds
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)

    def loss(q0, v0, c0):
        q1, v1 = diff_step(sim, q0, v0, c0, substeps=2)
        return (q1 * wq).sum() + (v1 * wv).sum()

    inputs = [torch.tensor(x, requires_grad=True) for x in (qpos, qvel, ctrl)]
    loss(*inputs).backward()
    x = torch.cat([t.detach().ravel() for t in inputs])
    ad = torch.cat([t.grad.ravel() for t in inputs])
    sizes = [t.numel() for t in inputs]
    eps, fd = 1e-6, []
    for i in range(x.numel()):
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            parts = [p.reshape(t.shape) for p, t in zip(torch.split(y, sizes), inputs, strict=True)]
            with torch.no_grad():
                values.append(loss(*parts).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    err = ((ad - fd).norm() / fd.norm()).item()
    # the adhesion's control reaches the state (its gradient is not zero)
    glue = [w * mjm.nu for w in range(W)]
    glue_grad = ad[sum(sizes[:2]):][glue].abs().max().item()
    print(f"{variant} {integrator}: relative gradient error {err:.2e}, d/d ctrl_glue {glue_grad:.2e}")
    assert glue_grad > 1e-6
    assert err < 1e-6, f"relative gradient error {err:.2e}"
