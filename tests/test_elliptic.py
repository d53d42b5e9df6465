"""The elliptic friction cone (<option cone="elliptic">) against MuJoCo: a contact's rows (normal
and friction directions), qacc and forces for the same states in all three zones of the cone,
trajectories (a box sliding to rest, the quadruped standing with impratio 100), solreffriction
of an explicit <pair>; gradients through a step against finite differences; both schedules
bit for bit. The negative controls: the pyramidal cone, and the elliptic one with impratio
changed, must miss the tolerances."""

import mujoco
import numpy as np
import pytest
import torch
from test_condim import SCENE, rows_on_the_floor
from test_contact_parity import contact_states, load_xml, simulate
from test_schedule import assert_same_data, run

from envs import ASSETS_DIR
from simrl import Sim, diff_step

ELLIPTIC = SCENE.replace("<option ", '<option cone="elliptic" impratio="3" ')
STATE_CONE = 4  # mjCNSTRSTATE_CONE: the middle zone


def elliptic(xml: str = ELLIPTIC, **options) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(xml)
    for name, value in options.items():
        setattr(mjm.opt, name, value)
    return mjm


def test_rows_per_contact():
    """condim rows per contact slot (the normal, then condim - 1 friction directions), type
    mjCNSTR_CONTACT_ELLIPTIC; Jacobian rows unscaled by friction, as MuJoCo's efc_J."""
    sim, slots, rows, first = rows_on_the_floor(elliptic())
    tables = sim.model.contact_tables
    pair = sim.view("contact_pair")[0].tolist()
    assert rows.tolist() == [tables["condim"][pair[c]] for c in slots]
    contact_rows = sim.data.efc_type.numpy()[0, first:int(sim.data.nefc.numpy()[0])]
    assert set(contact_rows.tolist()) == {int(mujoco.mjtConstraint.mjCNSTR_CONTACT_ELLIPTIC)}


def _forward_both(mjm, states, dtype, tolerance=None):
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype)
    sim.set_solver(iterations=1000, tolerance=tolerance or (1e-10 if dtype == "float64" else 1e-7))
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]), dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]), dtype=sim.torch_dtype)
    sim.forward()
    mjds = []
    for qpos, qvel, _ in states:
        mjd = mujoco.MjData(mjm)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, mjd)
        mjds.append(mjd)
    return sim, mjds


def _qacc_error(sim, mjds):
    return max(np.linalg.norm(sim.qacc[w].numpy() - mjd.qacc) / max(np.linalg.norm(mjd.qacc), 1e-9)
               for w, mjd in enumerate(mjds))


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_qacc_matches_mujoco_in_every_zone(dtype, rng):
    mjm = elliptic()
    states = contact_states(mjm, 16, rng)
    sim, mjds = _forward_both(mjm, states, dtype)
    zones = np.concatenate([mjd.efc_state[[c.efc_address for c in mjd.contact[:mjd.ncon] if c.efc_address >= 0]]
                            for mjd in mjds])
    assert (zones == STATE_CONE).sum() > 50, "the states should have contacts in the cone's middle zone"
    assert (zones == mujoco.mjtConstraintState.mjCNSTRSTATE_SATISFIED).sum() > 0
    worst = _qacc_error(sim, mjds)
    assert worst < (1e-6 if dtype == "float64" else 1e-3), f"relative qacc error {worst:.2e}"
    if dtype == "float64":
        # negative controls: the pyramidal cone, and the elliptic cone at another impratio
        for control in (elliptic(cone=mujoco.mjtCone.mjCONE_PYRAMIDAL), elliptic(impratio=1.0)):
            other, _ = _forward_both(control, states, dtype)
            assert _qacc_error(other, mjds) > 1e3 * worst


def test_forces_match_mujoco_row_by_row(rng):
    """efc_force of each contact's rows (normal, then friction), matched to MuJoCo's contacts by
    position: the solver's per-row outputs, not only their sum J' f. Both solvers run to 1e-14
    (at 1e-10 the forces of the stiff normal rows agree to 5e-6 of the largest)."""
    mjm = elliptic(tolerance=1e-14)
    states = contact_states(mjm, 8, rng)
    sim, mjds = _forward_both(mjm, states, "float64", tolerance=1e-14)
    s = sim.model.struct
    condim = s.cpair_condim.numpy()
    checked, worst = 0, 0.0
    for w, mjd in enumerate(mjds):
        pair = sim.data.contact_pair.numpy()[w]
        adr = sim.data.contact_efc_adr.numpy()[w]
        active = adr >= 0
        pos = sim.data.contact_pos.numpy()[w]
        for c in mjd.contact[:mjd.ncon]:
            if c.efc_address < 0:
                continue
            slot = np.flatnonzero(active & (np.linalg.norm(pos - c.pos, axis=1) < 1e-9))
            assert len(slot) == 1, "every MuJoCo contact has one simrl contact at its position"
            n = condim[pair[slot[0]]]
            ours = sim.efc_force.numpy()[w, adr[slot[0]]:adr[slot[0]] + n]
            ref = mjd.efc_force[c.efc_address:c.efc_address + n]
            worst = max(worst, np.abs(ours - ref).max() / max(1.0, np.abs(mjd.efc_force).max()))
            checked += 1
    assert checked > 20
    assert worst < 1e-7, f"largest force difference {worst:.2e} of the world's largest force"


def test_a_sliding_box_stops_like_mujocos():
    """A box pushed across the floor slides, is braked by friction, and stops where MuJoCo's
    stops; with impratio 10 (a stiffer friction) and 1."""
    for impratio in (1.0, 10.0):
        mjm = load_xml('<mujoco><option timestep="0.002" cone="elliptic"/><worldbody>'
                       '<geom type="plane" size="10 10 1" friction="0.4 0.005 0.0001"/>'
                       '<body pos="0 0 0.05"><freejoint/><geom type="box" size="0.1 0.1 0.05"/></body>'
                       '</worldbody></mujoco>')
        mjm.opt.impratio = impratio

        def push(mjd):
            mjd.qvel[0], mjd.qvel[1] = 2.0, 0.5

        ref, ours = simulate(mjm, 1.0, push, dtype="float64")
        assert 0.1 < np.linalg.norm(ref[:2]) < 1.0, f"the box should slide and stop ({ref[:2]})"
        assert np.abs(ours - ref).max() < 1e-6, f"impratio {impratio}: {ours[:3]} vs MuJoCo {ref[:3]}"


def test_pair_solreffriction_like_mujoco():
    """An explicit <pair> with its own solreffriction: the friction rows' B comes from it."""
    xml = ('<mujoco><option timestep="0.002" cone="elliptic"/><worldbody>'
           '<geom name="floor" type="plane" size="10 10 1"/>'
           '<body pos="0 0 0.1"><freejoint/><geom name="ball" type="sphere" size="0.1"/></body></worldbody>'
           '<contact><pair geom1="floor" geom2="ball" condim="3" solreffriction="0.05 0.3"/></contact></mujoco>')
    mjm = load_xml(xml)

    def push(mjd):
        mjd.qvel[0], mjd.qvel[4] = 1.0, -3.0  # slipping: friction acts

    ref, ours = simulate(mjm, 0.3, push, dtype="float64")
    assert np.abs(ours - ref).max() < 1e-8
    mjm_default = load_xml(xml.replace(' solreffriction="0.05 0.3"', ""))
    ref_default, _ = simulate(mjm_default, 0.3, push, dtype="float64")
    assert np.abs(ref_default - ref).max() > 1e3 * max(np.abs(ours - ref).max(), 1e-12), \
        "solreffriction should change the motion"


def test_quadruped_stands_like_mujoco_with_impratio_100():
    """The project's quadruped with MuJoCo Playground's contact settings (elliptic, impratio 100)
    from its keyframe for 1 s: every qpos within 1e-6 of MuJoCo's."""
    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    mjm.opt.cone, mjm.opt.impratio = mujoco.mjtCone.mjCONE_ELLIPTIC, 100.0
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 100

    def start(mjd):
        mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)

    ref, ours = simulate(mjm, 1.0, start, dtype="float64")
    assert np.abs(ours - ref).max() < 1e-6, f"max qpos difference {np.abs(ours - ref).max():.2e}"


def test_gradients_against_finite_differences(rng):
    """d (a random linear function of the next state) / d (state, geom friction) against central
    differences, through one Euler step with condim 3, 4 and 6 contacts in the elliptic cone
    (the cone Hessian in the implicit adjoint, mu and the friction coefficients' terms)."""
    mjm = elliptic(integrator=mujoco.mjtIntegrator.mjINT_EULER)
    W = 2
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.set_solver(iterations=100, tolerance=1e-15)
    qpos = np.tile(mjm.qpos0, (W, 1))
    for b in range(5):  # every geom pressed 5 mm into the floor
        qpos[:, 7 * b + 2] -= 0.005
    qvel = rng.normal(0.0, 0.3, (W, mjm.nv))
    sim.qpos, sim.qvel = torch.tensor(qpos), torch.tensor(qvel)
    sim.forward()
    hcone = sim.data.efc_hcone.numpy()
    first = sim.data.contact_efc_adr.numpy()
    assert sum((hcone[w, first[w][first[w] >= 0], 0] != 0).sum() for w in range(W)) >= 6, "contacts in the middle zone"

    gen = torch.Generator().manual_seed(0)
    wq = torch.randn(W, mjm.nq, generator=gen, dtype=torch.float64)
    wv = torch.randn(W, mjm.nv, generator=gen, dtype=torch.float64)
    ctrl = torch.zeros(W, 0, dtype=torch.float64)
    friction = torch.tensor(np.tile(mjm.geom_friction, (W, 1, 1)))

    def loss(q0, v0, fr):
        q1, v1 = diff_step(sim, q0, v0, ctrl, params={"geom_friction": fr})
        return (q1 * wq).sum() + (v1 * wv).sum()

    q0, v0 = torch.tensor(qpos, requires_grad=True), torch.tensor(qvel, requires_grad=True)
    fr = friction.clone().requires_grad_(True)
    loss(q0, v0, fr).backward()
    x = torch.cat([q0.detach().ravel(), v0.detach().ravel(), friction.ravel()])
    g = torch.cat([q0.grad.ravel(), v0.grad.ravel(), fr.grad.ravel()])
    nq, nv = qpos.size, qvel.size
    # 20 state coordinates, and the friction coefficients that act (the floor's are the
    # maximum only where they exceed the body's)
    picks = np.concatenate([np.random.default_rng(3).choice(nq + nv, 20, replace=False),
                            nq + nv + np.flatnonzero(fr.grad.ravel().numpy() != 0)])
    assert len(picks) > 25
    eps, fd = 1e-6, []
    for i in picks:
        values = []
        for sign in (1, -1):
            y = x.clone()
            y[i] += sign * eps
            with torch.no_grad():
                values.append(loss(y[:nq].reshape(qpos.shape), y[nq:nq + nv].reshape(qvel.shape),
                                   y[nq + nv:].reshape(friction.shape)).item())
        fd.append((values[0] - values[1]) / (2 * eps))
    fd = torch.tensor(fd, dtype=torch.float64)
    for part, sl in (("state", slice(0, 20)), ("friction", slice(20, None))):
        error = ((g[picks][sl] - fd[sl]).norm() / fd[sl].norm()).item()
        assert error < 1e-5, f"{part}: relative gradient error {error:.2e}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    mjm = elliptic()
    fused, wide = run(mjm, "fused", dtype, 20), run(mjm, "wide", dtype, 20)
    assert (fused.data.efc_hcone.numpy() != 0).any(), "the middle zone's Hessian was used"
    assert_same_data(fused, wide)


# a state of tests/test_robustness.py's fuzz (seed 53): a box with torsional friction (condim 4) on
# the plane, elliptic cone, impratio 10, under a chain of slides; the Sim's warm start is its first
# forward's, at qpos0
LINE_SEARCH_XML = """<mujoco><option timestep="0.002" cone="elliptic" impratio="10"/><worldbody>
<geom type="plane" size="5 5 0.1"/>
<geom type="box" size="0.1 0.1 0.1" pos="0.02837 0.1072 0.05" euler="-24.09 16.9 -23.72"/>
<body pos="0 0 0.297" euler="-75.58 55.02 -22.7"><joint type="free"/>
 <geom type="box" size="0.1099 0.1498 0.1199" density="518.8" condim="4" friction="1.02 0.0318 0.0019"/>
 <body pos="0.007146 -0.02 -0.2463" euler="-76.95 71.66 4.658"><joint type="slide" axis="0.8561 0.1578 -0.4921"/>
  <geom type="sphere" size="0.0722" density="2480"/>
  <body pos="0.1476 -0.2013 -0.2086" euler="70.77 -55.18 -70.52">
   <joint type="slide" axis="-0.4184 0.6798 0.6024" limited="true" range="-1.47 0.867"/>
   <geom type="box" size="0.07458 0.1329 0.07425" density="1254" condim="1" friction="0.456 0.0335 0.00336"
         margin="0.0171"/>
   <body pos="0.2949 -0.2682 -0.09051" euler="-5.291 -59.85 -56.5">
    <joint type="slide" axis="0.823 -0.3757 -0.4261" limited="true" range="-0.579 0.202"/>
    <geom type="sphere" size="0.13" density="1796" condim="3"/>
   </body></body></body></body></worldbody></mujoco>"""
LINE_SEARCH_QPOS = [0.03765493322297039, -0.16521456614798768, 0.21324731800261312, 0.6383490647270128,
                    -0.49670618673842726, -0.10006435310370933, -0.5794657546877612, 0.22211914749552306,
                    0.39736142883689524, 0.11355790661660461]
LINE_SEARCH_QVEL = [-0.7212685254419863, -0.04292697102404805, -0.10972589555990292, 2.320086603496344,
                    0.6086345769241622, -2.3271816555017573, -1.241267575879418, -0.6913837148743618,
                    0.6350589792304534]


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_line_search_across_the_cone_finds_the_minimum(schedule):
    """Along the Newton direction the elliptic cone's middle zone bends the cost's slope so much
    that Newton steps from each side of the minimizer overshoot to the other; a line search
    without a bracket ends far from the minimizer, at 2.5 times MuJoCo's cost here. MuJoCo's
    bracketed search finds it: the solution is MuJoCo's (its cost, and qacc to 1e-8)."""
    from test_robustness import primal_cost

    mjm = mujoco.MjModel.from_xml_string(LINE_SEARCH_XML)
    mjm.opt.tolerance, mjm.opt.iterations = 1e-10, 1000
    sim = Sim.from_model(mjm, num_worlds=1, device="cpu", dtype="float64", schedule=schedule)
    sim.qpos[0] = torch.tensor(LINE_SEARCH_QPOS, dtype=torch.float64)
    sim.qvel[0] = torch.tensor(LINE_SEARCH_QVEL, dtype=torch.float64)
    sim.forward()
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.qvel[:] = LINE_SEARCH_QPOS, LINE_SEARCH_QVEL
    mujoco.mj_forward(mjm, mjd)
    ours, theirs = sim.qacc[0].numpy(), mjd.qacc.copy()
    assert primal_cost(mjm, mjd, ours) <= primal_cost(mjm, mjd, theirs) * (1 + 1e-12)
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-8 * np.abs(theirs).max())
