"""The broadphase's list of kept pairs and their contact slots (`nconmax`): the candidate pairs that
may touch, in pair order, each taking its collider's slots after the pairs before it; a world
whose kept pairs' slots outgrow the budget keeps the pairs whose slots fit, the first in pair
order, is flagged, warned about, raised on in strict mode, and cut the same way in every
schedule; the slots no kept pair holds are free (no pair, no contact).

The references: the pairs computed in numpy from MuJoCo's poses (mj_filterSphere and the
broadphase's sphere-to-box test) and the pairs MuJoCo reports a contact for (each must be kept);
the same scene with a budget of every slot (the pairs kept under a small budget are the longest
prefix of those whose slots fit, and the slots they all need is what the flag reports)."""

import warnings

import mujoco
import numpy as np
import pytest
import torch
from test_budgets import STACK
from test_schedule import assert_same_data, cpu_blocks  # noqa: F401 (a fixture)

from simrl import Sim
from simrl.sim.data import OVERFLOW_CONTACTS

# a plane, three static geoms (a ledge, a post, a sphere far from everything: their pairs with the
# boxes are far-testable runs, after the plane's) and four free boxes: one on the floor, one on it,
# one on the ledge, one on the floor 5 mm from the post (within its margin)
SCENE = """
<mujoco>
  <option timestep="0.002"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <geom name="ledge" type="box" pos="0.8 0 0.05" size="0.15 0.15 0.05"/>
    <geom name="post" type="capsule" pos="-0.9 0 0.3" size="0.05 0.3"/>
    <geom name="far" type="sphere" pos="0 3 0.5" size="0.2"/>
    <body pos="0 0 0.095"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0.02 0.01 0.29" euler="0 0 10"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="0.8 0 0.195" euler="0 0 30"><freejoint/><geom type="box" size="0.1 0.1 0.1"/></body>
    <body pos="-0.645 0 0.045"><freejoint/><geom type="box" size="0.2 0.05 0.05" condim="4" margin="0.01"/></body>
  </worldbody>
</mujoco>"""
W = 4
B1, B2, B3, B4 = 0, 7, 14, 21  # qpos addresses of the boxes' free joints
# the pairs, in pair order: the plane's (0-3), the ledge's (4-7), the post's (8-11), the far
# sphere's (12-15), the boxes' (16: box 1-box 2, 17: box 1-box 3, ...)
FULL_LISTS = [[0, 3, 6, 11, 16], [0, 2, 3, 11, 16, 17, 19], [0, 2, 3, 16], [0, 11, 16]]
NPAIR = 22
# the pairs' slots: plane-box 4, box-box 8, capsule-box 4, sphere-box 1; every pair's, and the
# slots each world's kept pairs take
NSLOT = [4] * 4 + [8] * 4 + [4] * 4 + [1] * 4 + [8] * 6
NSLOT_TOTAL = 116
FULL_NEED = [sum(NSLOT[p] for p in kept) for kept in FULL_LISTS]  # 28, 40, 20, 16


def scene_qpos(mjm):
    """World 0: as loaded; 1: box 3 on the floor beside box 1 (no contact, but near enough for
    both the sphere and the box test), touching box 2's corner; 2: box 3 farther (its bounding
    sphere overlaps box 1's, but lies beyond box 1 itself), box 4 away from the post, on a corner
    5 mm above the floor (within its margin: its bounding sphere 5 mm off the plane's half-space
    grown by the margin); 3: box 3 lifted high, box 4 on a corner 5 mm above the post's top
    (within its margin: their bounding spheres 5 mm apart, less than the margin)."""
    qpos = np.tile(mjm.qpos0, (W, 1))
    qpos[:, 2::7] -= np.random.default_rng(3).uniform(0.001, 0.003, (W, 4))
    qpos[1, B3:B3 + 3] = [0.25, 0.0, 0.095]
    qpos[2, B3:B3 + 3] = [0.3, 0.12, 0.095]
    corner = mjm.geom_size[7] / np.linalg.norm(mjm.geom_size[7])
    down = np.zeros(4)
    mujoco.mju_quatZ2Vec(down, -corner)  # turns -z to the corner; its inverse, the corner down
    qpos[2, B4:B4 + 3] = [-0.3, 0.5, mjm.geom_rbound[7] + 0.005]
    mujoco.mju_negQuat(qpos[2, B4 + 3:B4 + 7], down)
    qpos[3, B3:B3 + 3] = [0.8, 0.0, 1.2]
    qpos[3, B4:B4 + 3] = [-0.9, 0.0, 0.655 + mjm.geom_rbound[7]]
    mujoco.mju_negQuat(qpos[3, B4 + 3:B4 + 7], down)
    return qpos


def stack_qpos(mjm):
    """test_budgets.stack_sim's poses: four boxes pressed into the floor and onto one another."""
    qpos = np.tile(mjm.qpos0, (W, 1))
    qpos[:, 2::7] -= np.random.default_rng(3).uniform(0.0, 0.004, (W, mjm.nbody - 1))
    return qpos


def make_sim(xml=SCENE, nconmax=None, schedule="fused", strict=False, qpos=None):
    mjm = mujoco.MjModel.from_xml_string(xml)
    # a row budget of every slot: only the pairs' budget can overflow
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64", schedule=schedule, njmax=100_000, nconmax=nconmax,
                         strict=strict)
    sim.qpos = torch.tensor(scene_qpos(mjm) if qpos is None else qpos)
    return sim


def kept_lists(sim):
    n, pairs = sim.data.ncollision.numpy(), sim.data.collision_pair.numpy()
    return [pairs[w, :n[w]].tolist() for w in range(sim.num_worlds)]


def fitting(kept, nconmax):
    """The longest prefix of a world's kept pairs whose slots fit nconmax."""
    out, used = [], 0
    for p in kept:
        used += NSLOT[p]
        if used > nconmax:
            break
        out.append(p)
    return out


def slots(sim, w, p):
    """The contact slots world w's kept pair p holds (an empty slice: not kept)."""
    n = int(sim.data.ncollision.numpy()[w])
    pairs = sim.data.collision_pair.numpy()[w, :n].tolist()
    if p not in pairs:
        return slice(0, 0)
    first = int(sim.data.collision_adr.numpy()[w, pairs.index(p)])
    return slice(first, first + NSLOT[p])


def box_distance(mjd, box, centre, size):
    """Distance from a point to a box geom (0 inside)."""
    local = mjd.geom_xmat[box].reshape(3, 3).T @ (centre - mjd.geom_xpos[box])
    return np.linalg.norm(np.maximum(np.abs(local) - size, 0.0))


def near_pairs(mjm, mjd, pairs):
    """The pairs that may touch, in numpy from MuJoCo's poses: mj_filterSphere's bounding spheres
    (a plane's half-space against the other's sphere), and each geom's bounding sphere against
    the other when it is a box; margins MuJoCo's (the larger of the two geoms')."""
    box = mujoco.mjtGeom.mjGEOM_BOX
    out = []
    for p, (g1, g2) in enumerate(pairs):
        margin = max(mjm.geom_margin[g1], mjm.geom_margin[g2]) + max(mjm.geom_gap[g1], mjm.geom_gap[g2])
        r1, r2 = mjm.geom_rbound[g1], mjm.geom_rbound[g2]
        x1, x2 = mjd.geom_xpos[g1], mjd.geom_xpos[g2]
        if r1 > 0 and r2 > 0:
            far = np.linalg.norm(x1 - x2) > r1 + r2 + margin
            for a, b, rb in ((g1, g2, r2), (g2, g1, r1)):
                if mjm.geom_type[a] == box:
                    far = far or box_distance(mjd, a, mjd.geom_xpos[b], mjm.geom_size[a]) > rb + margin
        elif mjm.geom_type[g1] == mujoco.mjtGeom.mjGEOM_PLANE:
            far = (x2 - x1) @ mjd.geom_xmat[g1].reshape(3, 3)[:, 2] > r2 + margin
        else:
            far = False
        if not far:
            out.append(p)
    return out


@pytest.mark.parametrize("xml", ["scene", "stack"])
def test_default_budget_keeps_the_pairs_that_may_touch_in_pair_order(xml):
    mjm = mujoco.MjModel.from_xml_string(SCENE if xml == "scene" else STACK)
    sim = make_sim(SCENE if xml == "scene" else STACK, qpos=scene_qpos(mjm) if xml == "scene" else stack_qpos(mjm))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.forward()
    budgets = sim.model.budgets
    assert budgets.nconmax == budgets.nconmax_default and budgets.npair == len(sim.model.contact_tables["geom"])
    assert not sim.overflow.any()
    pairs = sim.model.contact_tables["geom"]
    index = {frozenset(g): p for p, g in enumerate(pairs)}
    lists = kept_lists(sim)
    assert sim.model.contact_tables["nslot"] == NSLOT if xml == "scene" else True
    assert sim.data.overflow_need.numpy()[:, 0].tolist() == [len(kept) for kept in lists]
    nslot = sim.model.contact_tables["nslot"]
    assert sim.data.overflow_need.numpy()[:, 1].tolist() == [sum(nslot[p] for p in kept) for kept in lists]
    adr = sim.data.collision_adr.numpy()
    for w, kept in enumerate(lists):
        assert adr[w, :len(kept)].tolist() == np.cumsum([0] + [nslot[p] for p in kept[:-1]]).tolist()
    mjd = mujoco.MjData(mjm)
    touching_in = []
    for w in range(W):
        mjd.qpos[:] = sim.qpos[w].numpy()
        mujoco.mj_forward(mjm, mjd)
        kept = lists[w]
        assert kept == sorted(set(kept)), "increasing: pair order"
        assert kept == near_pairs(mjm, mjd, pairs), f"world {w}"
        touching = {index[frozenset((int(c.geom1), int(c.geom2)))] for c in mjd.contact[:mjd.ncon]}
        assert touching <= set(kept), f"world {w}: every pair MuJoCo finds a contact for"
        touching_in.append(touching)
        if xml == "stack":
            assert kept == sorted(touching), "the stack's pairs: near exactly when touching"
    if xml == "scene":
        assert lists == FULL_LISTS
        # box 1-box 3: kept without a contact in world 1; in world 2 left out by the box test alone
        assert 17 in lists[1] and 17 not in touching_in[1] and 17 not in lists[2]
        mjd.qpos[:] = sim.qpos[2].numpy()
        mujoco.mj_forward(mjm, mjd)
        assert np.linalg.norm(mjd.geom_xpos[4] - mjd.geom_xpos[6]) < mjm.geom_rbound[4] + mjm.geom_rbound[6]
        # box 4 on its corner: MuJoCo's contact 5 mm off the floor (world 2) and the post (world 3),
        # within the margin
        for w, other in ((2, 0), (3, 2)):
            mjd.qpos[:] = sim.qpos[w].numpy()
            mujoco.mj_forward(mjm, mjd)
            dist = [c.dist for c in mjd.contact[:mjd.ncon] if {int(c.geom1), int(c.geom2)} == {other, 7}]
            assert len(dist) == 1 and 0.004 < dist[0] < 0.006


def assert_slots_outside_the_list_empty(sim):
    """The slots no kept pair holds are free: no pair, no contact."""
    active, owner = sim.view("contact_active").numpy(), sim.view("contact_pair").numpy()
    for w, kept in enumerate(kept_lists(sim)):
        held = np.zeros(active.shape[1], dtype=bool)
        for p in kept:
            held[slots(sim, w, p)] = True
            assert (owner[w, slots(sim, w, p)] == p).all(), f"world {w}, pair {p}"
        assert not active[w, ~held].any() and (owner[w, ~held] == -1).all(), f"world {w}"


@pytest.mark.parametrize("nconmax", [8, 20, 30])
def test_pairs_beyond_the_budget_are_the_last_in_pair_order(nconmax):
    full = make_sim(nconmax=10_000)
    assert full.model.budgets.nconmax == NSLOT_TOTAL, "cut to the candidate pairs' slots"
    full.forward()
    full_lists = kept_lists(full)
    assert full_lists == FULL_LISTS and not full.overflow.any()
    small = make_sim(nconmax=nconmax)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        small.forward()
    assert kept_lists(small) == [fitting(kept, nconmax) for kept in full_lists]
    bits = small.overflow.numpy()
    assert ((bits & OVERFLOW_CONTACTS) != 0).tolist() == [n > nconmax for n in FULL_NEED]
    assert (bits & ~OVERFLOW_CONTACTS == 0).all(), "no other budget outgrown"
    assert small.data.overflow_need.numpy()[:, 0].tolist() == [len(kept) for kept in full_lists]
    assert small.data.overflow_need.numpy()[:, 1].tolist() == FULL_NEED
    active_full = full.view("contact_active").numpy()
    dropped = 0
    for w in range(W):
        kept = fitting(full_lists[w], nconmax)
        for p in full_lists[w][len(kept):]:
            dropped += int(active_full[w, slots(full, w, p)].sum())
        for p in kept:
            on = small.view("contact_active")[w, slots(small, w, p)]
            assert torch.equal(on, full.view("contact_active")[w, slots(full, w, p)]), f"world {w}, pair {p}"
            for name in ("contact_dist", "contact_pos"):  # of the slots that hold a contact
                ours, theirs = small.view(name)[w, slots(small, w, p)], full.view(name)[w, slots(full, w, p)]
                assert torch.equal(ours[on != 0], theirs[on != 0]), f"world {w}, pair {p}: {name}"
    assert dropped > 0, "the dropped pairs had contacts"
    assert_slots_outside_the_list_empty(small)


def overflowed_runs(nconmax, steps):
    runs = []
    for schedule in ("fused", "wide"):
        sim = make_sim(nconmax=nconmax, schedule=schedule)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            sim.step(steps)
        assert sim.overflow.any()
        runs.append(sim)
    return runs


@pytest.mark.parametrize("nconmax", [8, 20])
def test_overflow_cut_is_the_same_in_both_schedules(nconmax):
    fused, wide = overflowed_runs(nconmax, 20)
    assert_same_data(fused, wide)
    assert_slots_outside_the_list_empty(wide)


@pytest.mark.parametrize("nconmax", [8, 20])
def test_overflow_cut_by_the_lanes_of_a_block(nconmax, cpu_blocks):  # noqa: F811 (the fixture)
    """The list by 8 cooperative lanes (a GPU block's stand-in), a run of pairs each (5 runs):
    the cut inside the first lane's share (8 slots: the plane's pairs) or the fifth's, the boxes'
    pairs (20), gives the bits of one thread."""
    fused, wide = overflowed_runs(nconmax, 10)
    lanes = wide.data.bp_lane_count.numpy()[:, :cpu_blocks]
    assert (lanes[:, 1:] > 0).any(axis=1).all(), "lanes after the first count pairs in every world"
    assert_same_data(fused, wide)


def test_check_overflow_warns_once_and_names_the_budget():
    sim = make_sim(nconmax=27)
    expected = (r"contact slots of the pairs the broadphase kept in 2 of 4 worlds outgrew nconmax=27 \(they "
                r"needed up to 40\).*set Sim\(nconmax=40\)")
    with pytest.warns(RuntimeWarning, match=expected) as caught:
        sim.forward()
    assert len(caught) == 1 and caught[0].filename == __file__, "once, naming the caller's line"
    assert ((sim.overflow.numpy() & OVERFLOW_CONTACTS) != 0).tolist() == [True, True, False, False]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.forward()
        sim.check_overflow()
    strict = make_sim(nconmax=27, strict=True)
    with pytest.raises(OverflowError, match=r"nconmax=27 .*set Sim\(nconmax=40\)"):
        strict.forward()


def test_a_budget_that_fits_exactly_stays_quiet():
    sim = make_sim(nconmax=40, strict=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sim.forward()
        sim.step(3)
        sim.check_overflow()
    assert not sim.overflow.any()
    assert sim.data.overflow_need.numpy()[:, 1].tolist() == FULL_NEED


def test_nconmax_must_be_a_positive_integer():
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    with pytest.raises(ValueError, match="nconmax=0 is less than 1"):
        Sim.from_model(mjm, nconmax=0)
    with pytest.raises(ValueError, match="nconmax=-3 is less than 1"):
        Sim.from_model(mjm, nconmax=-3)
    for bad in (2.5, True, "4"):
        with pytest.raises(TypeError, match="nconmax must be an integer"):
            Sim.from_model(mjm, nconmax=bad)
    assert Sim.from_model(mjm, nconmax=np.int64(3)).model.budgets.nconmax == 3
    assert Sim.from_model(mjm, nconmax=NSLOT_TOTAL + 1).model.budgets.nconmax == NSLOT_TOTAL
    assert Sim.from_model(mjm, nconmax=10**9).model.budgets.nconmax == NSLOT_TOTAL


def test_slots_of_pairs_that_move_out_of_reach_are_emptied():
    """Box 3 lifted off the ledge in world 0 after steps with its contacts: its pairs leave the
    list and their slots hold no contact, while the other contacts stay."""
    sim = make_sim()
    sim.step(5)
    active = sim.view("contact_active").numpy()
    assert active[0, slots(sim, 0, 6)].any(), "box 3 on the ledge"
    assert all(active[w, slots(sim, w, 0)].any() for w in range(W)), "box 1 on the floor"
    qpos = sim.qpos.clone()
    qpos[0, B3 + 2] = 1.5
    sim.qpos = qpos
    for advance in (sim.forward, lambda: sim.step(1)):
        advance()
        lists = kept_lists(sim)
        assert 6 not in lists[0] and lists[0] == [0, 3, 11, 16]
        assert_slots_outside_the_list_empty(sim)
        active = sim.view("contact_active").numpy()
        assert all(active[w, slots(sim, w, 0)].any() for w in range(W)), "box 1 still on the floor"
        assert active[0, slots(sim, 0, 16)].any(), "box 2 still on box 1"


def test_slots_of_pairs_cut_by_the_budget_are_emptied():
    """World 0 with box 4 lifted fits a budget of 20 slots with box 1-box 2's contacts; box 4 back
    on the floor and against the post adds two pairs before it in pair order: box 1-box 2 is cut, and no
    slot holds its contacts."""
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    qpos = scene_qpos(mjm)
    lifted = qpos.copy()
    lifted[0, B4:B4 + 3] = [-0.3, 0.0, 1.6]
    sim = make_sim(nconmax=20, qpos=lifted)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim.forward()
    assert kept_lists(sim)[0] == [0, 6, 16]  # 20 slots: the budget exactly
    assert not sim.overflow[0] and sim.view("contact_active").numpy()[0, slots(sim, 0, 16)].any()
    sim.qpos = torch.tensor(qpos)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        sim.forward()
    assert kept_lists(sim)[0] == fitting(FULL_LISTS[0], 20) == [0, 3, 6, 11]
    assert sim.overflow[0] == OVERFLOW_CONTACTS and sim.data.overflow_need.numpy()[0, 1] == FULL_NEED[0]
    assert not (sim.view("contact_pair").numpy()[0] == 16).any()
    assert_slots_outside_the_list_empty(sim)


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_the_differentiable_step_reports_its_overflow(schedule):
    """simrl.diff_step's evaluations keep their own buffers: what outgrew the pairs' budget in
    them reaches the Sim's flags (sim.overflow, overflow_need: those of a plain step from the
    same state, the reference) and its warning, or OverflowError with strict."""
    from simrl import diff_step

    plain = make_sim(nconmax=27, schedule=schedule)
    with pytest.warns(RuntimeWarning):
        plain.step(1)
        plain.check_overflow()
    sim = make_sim(nconmax=27, schedule=schedule)
    qpos, qvel, ctrl = sim.qpos.clone(), sim.qvel.clone(), sim.ctrl.clone()
    with pytest.warns(RuntimeWarning, match=r"outgrew nconmax=27 \(they needed up to 40\)") as caught:
        diff_step(sim, qpos, qvel, ctrl)
        sim.check_overflow()
    assert len(caught) == 1
    assert torch.equal(sim.overflow, plain.overflow) and (sim.overflow != 0).any()
    assert torch.equal(sim.view("overflow_need"), plain.view("overflow_need"))
    strict = make_sim(nconmax=4, schedule=schedule, strict=True)
    with pytest.raises(OverflowError, match=r"nconmax=4"):
        diff_step(strict, qpos, qvel, ctrl)
