"""1-D flexes (cables of bodies) held together by their edge equality (mjEQ_FLEX) against MuJoCo:
the rows, qacc at qpos0 and at random states, trajectories, per-world eq_active, both schedules bit
for bit, gradients against finite differences; negative controls that tell a wrong rest length or
wrong vertex positions apart."""

import mujoco
import numpy as np
import pytest
import torch
from gradcheck import one_step_gradient_error
from test_schedule import assert_same_data, reverse_thread_order, run, start_state

from simrl import Sim, UnsupportedFeatureError, diff_step

# MuJoCo Warp's test_data/flex/rope.xml without its visuals: two cables of 12 vertex bodies (3
# slide joints each), the first vertex of each pinned to the parent body, 0.55 m away from its
# origin (flex_vert), solved with CG to a tolerance of 1e-6
ROPE = """
<mujoco model="rope">
  <option solver="CG" tolerance="1e-6" timestep=".001"/>
  <worldbody>
    <geom name="ground" type="plane" size="0 0 1" condim="1"/>
    <body name="flexes" pos=".1 -.2 1.5">
      <flexcomp type="grid" count="12 1 1" spacing=".1 .1 .1" pos="-0.5 0 0" radius=".03" name="rope1" dim="1"
                mass="1">
        <edge equality="true"/>
        <contact condim="3" selfcollide="none" conaffinity="0" contype="0"/>
        <pin id="0"/>
      </flexcomp>
      <flexcomp type="grid" count="12 1 1" spacing=".1 .1 .1" pos="0.5 0 0" radius=".03" name="rope2" dim="1"
                mass="1">
        <edge equality="true"/>
        <contact condim="3" selfcollide="none" conaffinity="0" contype="0"/>
        <pin id="0"/>
      </flexcomp>
    </body>
  </worldbody>
</mujoco>"""

# A flex whose vertices sit off their bodies' origins (flex_vert, not centered) on bodies that
# rotate (free, hinge and ball joints), the last body a child of the second: the Jacobians of an
# edge's two vertices share the second body's dofs; soft solref and solimp of its own
OFFSETS = """
<mujoco model="offsets">
  <option timestep="0.002"/>
  <worldbody>
    <body name="a" pos="0 0 1"><freejoint/><geom size=".05" contype="0" conaffinity="0"/></body>
    <body name="b" pos="0.3 0 1">
      <joint type="hinge" axis="0 1 0"/><joint type="slide" axis="1 0 0"/>
      <geom size=".04" contype="0" conaffinity="0"/>
      <body name="c" pos="0.3 0 0">
        <joint type="ball"/><geom type="box" size=".03 .02 .01" contype="0" conaffinity="0"/>
      </body>
    </body>
  </worldbody>
  <deformable>
    <flex name="cable" dim="1" body="a b c" vertex="0.05 0 0.02  -0.03 0.01 0  0 0.02 0.04" element="0 1 1 2">
      <contact contype="0" conaffinity="0" selfcollide="none"/>
    </flex>
  </deformable>
  <equality><flex flex="cable" solref="0.01 0.8" solimp="0.85 0.95 0.01 0.4 3"/></equality>
</mujoco>"""

MODELS = {"rope": ROPE, "offsets": OFFSETS}


def model(name: str, newton: bool = False) -> mujoco.MjModel:
    """The model; with `newton`, MuJoCo solves with Newton to 1e-12 (the rope's own CG stops at
    1e-6), the solver simrl always runs."""
    mjm = mujoco.MjModel.from_xml_string(MODELS[name])
    if newton:
        mjm.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
        mjm.opt.tolerance = 1e-12
    return mjm


def random_states(mjm, n, rng, scale=0.05):
    md = mujoco.MjData(mjm)
    states = []
    for _ in range(n):
        md.qpos[:] = mjm.qpos0 + scale * rng.standard_normal(mjm.nq)
        mujoco.mj_normalizeQuat(mjm, md.qpos)
        states.append((md.qpos.copy(), 0.3 * rng.standard_normal(mjm.nv)))
    return states


def mujoco_forward(mjm, qpos, qvel, eq_active=None):
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:] = qpos, qvel
    if eq_active is not None:
        md.eq_active[:] = eq_active
    mujoco.mj_forward(mjm, md)
    return md


def simrl_forward(mjm, states, dtype="float64", schedule="auto", eq_active=None):
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype=dtype, schedule=schedule)
    if eq_active is not None:
        sim.eq_active = torch.as_tensor(eq_active)
    sim.qpos = torch.as_tensor(np.stack([q for q, _ in states]), dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(np.stack([v for _, v in states]), dtype=sim.torch_dtype)
    sim.forward()
    return sim


def relative(ours, ref) -> float:
    return float(np.abs(ours - ref).max()) / max(1.0, float(np.abs(ref).max()))


@pytest.mark.parametrize("name", list(MODELS))
def test_rows_like_mujocos(name, rng):
    """One row per edge, in MuJoCo's order: residual (edge length - length0), Jacobian, R (from
    flexedge_invweight0) and aref of every row."""
    mjm = model(name)
    states = random_states(mjm, 2, rng)
    sim = simrl_forward(mjm, states)
    assert sim.model.struct.nefc_eq == mjm.nflexedge
    for w, (q, v) in enumerate(states):
        md = mujoco_forward(mjm, q, v)
        ne = md.ne
        assert ne == mjm.nflexedge
        J = np.zeros((md.nefc, mjm.nv))
        if mujoco.mj_isSparse(mjm):
            mujoco.mju_sparse2dense(J, md.efc_J, md.efc_J_rownnz, md.efc_J_rowadr, md.efc_J_colind)
        else:
            J[:] = md.efc_J.reshape(md.nefc, mjm.nv)
        for field, ref, tol in (("efc_pos", md.efc_pos[:ne], 1e-14), ("efc_R", md.efc_R[:ne], 1e-12),
                                ("efc_aref", md.efc_aref[:ne], 1e-10)):
            err = relative(sim.view(field)[w, :ne].numpy(), ref)
            assert err < tol, f"{field}: relative difference {err:.2e}"
        assert np.abs(md.efc_pos[:ne]).max() > 1e-4, "the state stretches the edges"
        assert np.abs(sim.view("efc_J")[w, :ne].numpy() - J[:ne]).max() < 1e-13


@pytest.mark.parametrize("name", list(MODELS))
def test_qacc_matches_mujoco(name, rng):
    """qacc at qpos0 at rest and at random states, float64 (measured ~1e-15 relative to |qacc|);
    negative controls at the random states: without the equality, with the rest lengths 5% longer,
    or with the vertices at their bodies' origins (flex_vert ignored), qacc misses MuJoCo's by
    far."""
    mjm = model(name, newton=True)
    states = [(mjm.qpos0.copy(), np.zeros(mjm.nv))] + random_states(mjm, 3, rng)
    sim = simrl_forward(mjm, states)
    unconstrained = model(name, newton=True)
    unconstrained.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_EQUALITY
    longer = model(name, newton=True)
    longer.flexedge_length0[:] *= 1.05
    at_origins = model(name, newton=True)
    at_origins.flex_centered[:] = True
    wrong = {"longer": simrl_forward(longer, states), "at_origins": simrl_forward(at_origins, states)}
    for w, (q, v) in enumerate(states):
        ref = mujoco_forward(mjm, q, v).qacc
        err = relative(sim.qacc[w].numpy(), ref)
        assert err < 1e-9, f"state {w}: qacc relative difference {err:.2e}"
        if w == 0:
            continue  # at rest at qpos0 the edges are at their rest lengths, and pull on nothing
        assert relative(mujoco_forward(unconstrained, q, v).qacc, ref) > 1e-3
        for label, other in wrong.items():
            assert relative(other.qacc[w].numpy(), ref) > 1e-3, label


def test_eq_active_per_world(rng):
    """sim.eq_active turns each rope's rows on and off per world like MuJoCo's eq_active."""
    mjm = model("rope", newton=True)
    states = random_states(mjm, 1, rng) * 3
    masks = np.array([[1, 1], [0, 1], [0, 0]], dtype=np.int32)
    sim = simrl_forward(mjm, states, eq_active=masks)
    for w in range(3):
        ref = mujoco_forward(mjm, *states[w], eq_active=masks[w]).qacc
        assert relative(sim.qacc[w].numpy(), ref) < 1e-9
    assert relative(sim.qacc[1].numpy(), sim.qacc[0].numpy()) > 1e-3


@pytest.mark.parametrize("name,integrator", [("rope", "EULER"), ("offsets", "EULER"), ("offsets", "RK4"),
                                             ("offsets", "IMPLICITFAST")])
def test_trajectory_matches_mujoco(name, integrator):
    """100 steps from a random state: every step's qpos, float64, MuJoCo solving with Newton to
    1e-12 (measured: rope 1.4e-16, offsets Euler 1.1e-14, implicitfast 4.7e-15, RK4 8.8e-11, the
    last growing step by step as RK4's does with connects and welds); the cables swing and their
    edges are pulled toward their rest lengths."""
    mjm = model(name, newton=True)
    mjm.opt.integrator = getattr(mujoco.mjtIntegrator, f"mjINT_{integrator}")
    (q, v), = random_states(mjm, 1, np.random.default_rng(5))
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:] = q, v
    mujoco.mj_forward(mjm, md)
    stretch = np.abs(md.flexedge_length - mjm.flexedge_length0).max()
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.qpos, sim.qvel = torch.as_tensor(q[None]), torch.as_tensor(v[None])
    worst = 0.0
    for _ in range(100):
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, np.abs(sim.qpos[0].numpy() - md.qpos).max())
    assert worst < 1e-9, f"max qpos difference {worst:.2e}"
    assert np.abs(md.qpos - q).max() > 0.01, "the model moved"
    assert np.abs(md.flexedge_length - mjm.flexedge_length0).max() < 0.5 * stretch


def test_rope_at_its_own_solver_settings():
    """The rope as written (MuJoCo's CG to a tolerance of 1e-6, simrl's Newton): tools/model_corpus.py's
    test, 20 steps from qpos0 within 1e-6 (measured 2.8e-7; 9.2e-7 after 100 steps: CG's
    stopping point, which the Newton trajectories above leave out)."""
    mjm = model("rope")
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    for _ in range(20):
        mujoco.mj_step(mjm, md)
    sim.step(20)
    assert np.abs(sim.qpos[0].numpy() - md.qpos).max() < 1e-6
    assert np.abs(md.qpos - mjm.qpos0).max() > 1e-3, "the rope moved"


@pytest.mark.parametrize("name", list(MODELS))
def test_gradients_against_finite_differences(name, rng):
    """d (a random linear function of the next state) / d (qpos, qvel) through one step with
    every edge row active, against central differences."""
    mjm = model(name)
    error = one_step_gradient_error(mjm, random_states(mjm, 2, rng))
    assert error < 1e-5, f"relative gradient error {error:.2e}"


@pytest.mark.parametrize("name,dtype", [("rope", "float64"), ("offsets", "float64"), ("offsets", "float32")])
def test_wide_equals_fused_bit_for_bit(name, dtype):
    mjm = model(name)
    fused = run(mjm, "fused", dtype, 20)
    assert int(fused.view("efc_nactive").min()) == mjm.nflexedge
    assert_same_data(fused, run(mjm, "wide", dtype, 20))


def test_wide_diff_step_equals_fused():
    """The differentiable step (its own pass for the flex rows): 6 steps of 4 worlds, the same
    states bit for bit in both schedules, gradients within 1e-12 (adjoints of shared reads
    accumulate in another order)."""
    mjm = model("offsets")

    def rollout(schedule_name):
        sim = Sim.from_model(mjm, num_worlds=4, device="cpu", dtype="float64", schedule=schedule_name)
        qpos, qvel, _ = start_state(mjm, 4, np.random.default_rng(3))
        q0, v0 = torch.tensor(qpos, requires_grad=True), torch.tensor(qvel, requires_grad=True)
        mass = torch.tensor(np.tile(mjm.body_mass, (4, 1)), requires_grad=True)
        q, v = q0, v0
        for _ in range(6):
            q, v = diff_step(sim, q, v, torch.zeros(4, 0, dtype=torch.float64), params={"body_mass": mass})
        (q.square().sum() + v.square().sum()).backward()
        return (q.detach(), v.detach()), (q0.grad, v0.grad, mass.grad)

    (out_f, grad_f), (out_w, grad_w) = rollout("fused"), rollout("wide")
    for a, b in zip(out_f, out_w, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_f, grad_w, strict=True):
        assert torch.isfinite(a).all() and a.abs().max() > 0
        assert ((a - b).abs().max() / a.abs().max()).item() <= 1e-12


def test_wide_threads_in_any_order(monkeypatch):
    """The wide step with every element launch's threads in reverse order
    (tests/test_schedule.py::reverse_thread_order): the same bits."""
    mjm = model("offsets")
    ordered = run(mjm, "wide", "float64", 20)
    reverse_thread_order(monkeypatch)
    assert_same_data(ordered, run(mjm, "wide", "float64", 20))


def test_set_const_refuses_masses_that_change_the_edges_weights():
    """flexedge_invweight0 (the rows' R) is kept for all worlds: set_const refuses a world whose
    randomized masses would change it, rather than keep a stale one."""
    mjm = model("offsets")
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.per_world_param("body_mass")[1, 1] *= 2.0
    with pytest.raises(UnsupportedFeatureError, match="flexedge_invweight0"):
        sim.set_const()
