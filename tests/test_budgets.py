"""The per-world row budget (`njmax`): contacts' rows placed in slot order by a prefix sum, and a
world that outgrows the budget flagged, warned about, raised on in strict mode, and cut the same
way in every schedule (the last contacts in slot order left out).

The references: the same scene with a budget large enough for every slot (the rows kept under a
small budget are the first of those, bit for bit, and their count is what the flag reports), and
MuJoCo for the default budget (its constraint count)."""

import warnings

import mujoco
import numpy as np
import pytest
import torch
from test_schedule import assert_same_data, cpu_blocks  # noqa: F401 (a fixture)

from simrl import Sim
from simrl.sim.data import OVERFLOW_ROWS

# four boxes pressed into the floor and onto one another: box-box (8 slots) and box-plane
# (4 slots) pairs with several contacts each
STACK = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body pos="0 0 0.095"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0.02 0.01 0.29" euler="0 0 10"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0.5 0 0.095" euler="0 0 30"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-0.5 0.2 0.045"><freejoint/><geom type="box" size="0.2 0.05 0.05" condim="4"/></body>
  </worldbody>
</mujoco>"""


def stack_sim(njmax=None, schedule="fused", strict=False, W=3):
    mjm = mujoco.MjModel.from_xml_string(STACK)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule, njmax=njmax, strict=strict)
    rng = np.random.default_rng(3)
    qpos = np.tile(mjm.qpos0, (W, 1))
    qpos[:, 2::7] -= rng.uniform(0.0, 0.004, (W, mjm.nbody - 1))
    sim.qpos = torch.tensor(qpos)
    return sim


def rows_in_use(sim):
    return sim.data.nefc.numpy(), sim.data.contact_efc_adr.numpy()


def test_default_budget_holds_every_contact_of_the_stack_as_mujoco():
    sim = stack_sim()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.forward()
    assert not sim.overflow.any()
    mjm, mjd = sim.mj_model, mujoco.MjData(sim.mj_model)
    for w in range(sim.num_worlds):
        mjd.qpos[:] = sim.qpos[w].numpy()
        mujoco.mj_forward(mjm, mjd)
        assert int(sim.data.nefc.numpy()[w]) == mjd.nefc, "the same rows as MuJoCo's"
    assert sim.model.budgets.njmax == sim.model.budgets.njmax_default


def test_rows_beyond_the_budget_are_the_last_contacts_in_slot_order():
    full = stack_sim(njmax=10_000)
    full.forward()
    nefc_full, adr_full = rows_in_use(full)
    fixed = full.model.budgets.nefc_fixed
    assert full.model.budgets.njmax == fixed + full.model.budgets.contact_rows_max, "cut to what every slot needs"
    assert not full.overflow.any() and (nefc_full > fixed + 24).all(), "many contact rows"
    njmax = fixed + 21  # some contacts (4 rows each, 6 for condim 4) do not fit
    small = stack_sim(njmax=njmax)
    expected = rf"outgrew njmax={njmax} \(they needed up to {nefc_full.max()}\)"
    with pytest.warns(RuntimeWarning, match=expected) as caught:
        small.forward()
    assert caught[0].filename == __file__, "the warning names the caller's line"
    nefc, adr = rows_in_use(small)
    assert ((small.overflow.numpy() & OVERFLOW_ROWS) != 0).all()
    assert small.data.overflow_need.numpy()[:, 2].tolist() == nefc_full.tolist()
    for w in range(small.num_worlds):
        slots = np.flatnonzero(adr_full[w] >= 0)
        ends = np.append(adr_full[w][slots][1:], nefc_full[w])
        kept = slots[ends <= njmax]
        assert np.flatnonzero(adr[w] >= 0).tolist() == kept.tolist(), "a prefix of the slots, in order"
        assert adr[w][kept].tolist() == adr_full[w][kept].tolist()
        assert nefc[w] == (ends[ends <= njmax].max() if len(kept) else fixed) <= njmax
        # the rows kept are the full run's rows (the solve differs: fewer contacts)
        for name in ("efc_J", "efc_pos", "efc_R", "efc_aref"):
            ours, theirs = small.view(name)[w, :nefc[w]], full.view(name)[w, :nefc[w]]
            assert torch.equal(ours, theirs), name
    # a second overflow warns no more; check_overflow stays quiet with the flags clear
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        small.forward()


def test_strict_raises_and_names_the_budget():
    sim = stack_sim(njmax=stack_sim().model.budgets.nefc_fixed + 8, strict=True)
    with pytest.raises(OverflowError, match=r"njmax=\d+ .*set Sim\(njmax=\d+\)"):
        sim.step(1)


def test_njmax_must_be_an_integer_of_at_least_the_fixed_rows():
    mjm = mujoco.MjModel.from_xml_string(STACK)
    with pytest.raises(TypeError, match="njmax must be an integer"):
        Sim.from_model(mjm, njmax=12.5)
    with pytest.raises(ValueError, match="njmax=-1 is less than the model's 0 rows"):
        Sim.from_model(mjm, njmax=-1)


def overflowed_runs(steps):
    """The stack stepped in both schedules under a row budget that some contacts outgrow."""
    njmax = stack_sim().model.budgets.nefc_fixed + 21
    runs = []
    for schedule in ("fused", "wide"):
        sim = stack_sim(njmax=njmax, schedule=schedule)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sim.step(steps)
        assert sim.overflow.any()
        runs.append(sim)
    return runs


def test_overflow_cut_is_the_same_in_both_schedules():
    assert_same_data(*overflowed_runs(20))


def test_overflow_cut_by_the_lanes_of_a_block(cpu_blocks):  # noqa: F811 (the fixture)
    """efc_address by 8 cooperative lanes (a GPU block's stand-in): the lane whose share holds the
    first contact that does not fit, and those after it, place the same rows as one thread."""
    assert_same_data(*overflowed_runs(10))
