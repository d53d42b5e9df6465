"""The two schedules of the step (simrl.sim.schedule) against each other on the CPU.

- fused (a thread per world) and wide (a launch per pass over worlds x elements, world
  functions as blocks of threads) give the same bits: every array of the simulation data after
  a trajectory with contacts, limits and friction loss, Euler and RK4, float64 and float32;
- the differentiable step: the same outputs bit for bit; gradients within 1e-12 (relative, float64),
  because Warp's generated adjoints accumulate into shared inputs in another order (the fused
  adjoint replays a world's loops backwards, the wide one runs an element per thread);
- a world function run by a block of several threads (Warp's cooperative CPU blocks stand in for
  a GPU's) gives the same bits as one thread: every lane reads only what a barrier made visible.
"""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from conftest import GYM_ASSETS, quaternion_slices
from models import CUSTOM_MODELS
from test_contact_parity import SCENES
from test_grad import LIMITS_FRICTION

from envs import ASSETS_DIR
from simrl import Sim, diff_step
from simrl.sim import schedule
from simrl.sim.contact_tables import HFIELD_KINDS
from simrl.sim.data import data_struct

XML = {**CUSTOM_MODELS, **SCENES, "limits_friction": LIMITS_FRICTION}


def load(name: str) -> mujoco.MjModel:
    if name == "quadruped":
        return mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    if name in XML:
        return mujoco.MjModel.from_xml_string(XML[name])
    return mujoco.MjModel.from_xml_path(str(GYM_ASSETS / f"{name}.xml"))


def start_state(mjm, W, rng):
    """Near the keyframe (or qpos0), perturbed: contacts and limits come and go."""
    qpos = np.tile(mjm.key_qpos[0] if mjm.nkey else mjm.qpos0, (W, 1)) + rng.normal(0.0, 0.05, (W, mjm.nq))
    for s in quaternion_slices(mjm):
        qpos[:, s] /= np.linalg.norm(qpos[:, s], axis=1, keepdims=True)
    qvel = rng.normal(0.0, 0.5, (W, mjm.nv))
    ctrl = rng.uniform(-1.0, 1.0, (W, mjm.nu))
    return qpos, qvel, ctrl


def run(mjm, schedule_name, dtype, steps, seed=0, W=6):
    sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype=dtype, schedule=schedule_name)
    assert sim.schedule == schedule_name
    qpos, qvel, ctrl = start_state(mjm, W, np.random.default_rng(seed))
    sim.qpos = torch.as_tensor(qpos, dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(qvel, dtype=sim.torch_dtype)
    sim.ctrl = torch.as_tensor(ctrl, dtype=sim.torch_dtype)
    sim.step(steps)
    return sim


# the fused schedule's list of the slots that have rows (only its first contact_nslots entries
# are the step's; the wide schedule makes none): checked against contact_efc_adr instead
FUSED_ONLY = ("contact_slots", "contact_nslots")
# the wide schedule's: each lane's count (constraint.constraint_list_lanes, efc_address_lanes,
# the broadphase's)
WIDE_ONLY = ("efc_lane_count", "bp_lane_count", "bp_run_kept")


def assert_contact_list(sim: Sim):
    """The fused schedule's Data.contact_slots: the slots that have rows, increasing."""
    adr = sim.view("contact_efc_adr").numpy()
    slots, count = sim.view("contact_slots").numpy(), sim.view("contact_nslots").numpy()
    for w in range(sim.num_worlds):
        assert slots[w, :count[w]].tolist() == np.flatnonzero(adr[w] >= 0).tolist(), f"world {w}"


def assert_same_data(a: Sim, b: Sim):
    """Every array of the two simulations' data, bit for bit."""
    for sim in (a, b):
        if sim.schedule == "fused":
            assert_contact_list(sim)
    for name in data_struct(a.model.dtype).vars:
        if name in FUSED_ONLY + WIDE_ONLY and a.schedule != b.schedule:
            continue
        x, y = getattr(a.data, name), getattr(b.data, name)
        if hasattr(x.dtype, "vars"):  # a struct dtype: the convex collision's records and scratch
            assert x.numpy().tobytes() == y.numpy().tobytes(), f"{name} differs"
            continue
        x, y = wp.to_torch(x), wp.to_torch(y)
        assert torch.equal(x, y), f"{name}: max difference {(x.double() - y.double()).abs().max().item():.3e}"


@pytest.mark.parametrize("name", ["quadruped", "primitives", "humanoid", "ant", "ball_chain", "slide_hinge",
                                  "two_trees", "limits_friction"])
def test_wide_equals_fused_bit_for_bit_float64(name):
    mjm = load(name)
    fused, wide = run(mjm, "fused", "float64", 40), run(mjm, "wide", "float64", 40)
    assert not fused.nan_worlds.any()
    if name in ("quadruped", "primitives", "humanoid", "ant", "limits_friction"):
        assert int(fused.view("efc_nactive").max()) > 0, "the trajectory should exercise constraint rows"
    assert_same_data(fused, wide)


@pytest.mark.parametrize("name", ["quadruped", "humanoid"])
def test_wide_equals_fused_bit_for_bit_float32(name):
    mjm = load(name)
    assert_same_data(run(mjm, "fused", "float32", 40), run(mjm, "wide", "float32", 40))


def reverse_thread_order(monkeypatch) -> list:
    """From now on (until monkeypatch undoes it) every element launch of the wide step runs as one
    launch per element, the last element first: each world's threads see the other threads'
    outputs of the launch written where, in ascending order, they saw them unwritten, and the
    other way round. A GPU runs a launch's threads in any order, the CPU in ascending order: a
    thread that read what another thread of its launch writes would pass on the CPU and race on
    a GPU. (The tiled world functions are left whole: their lanes are tested in blocks below; the
    active-row launch indexes by thread.) Returns the list the split kernels' names go into."""

    original, split = schedule.launch, []

    def reversed_launch(item, m, d, num_worlds, device, record=False):
        assert not record
        if item.block_dim is None and item.dims and item.inputs and isinstance(item.inputs[-1], int):
            first = item.inputs[-1]  # the launch's elements are first + e, e < dims[0]
            for e in reversed(range(item.dims[0])):
                original(schedule.Launch(item.kernel, (1,), (*item.inputs[:-1], first + e)), m, d, num_worlds, device)
            split.append(item.kernel.key)
            return None
        return original(item, m, d, num_worlds, device)

    monkeypatch.setattr(schedule, "launch", reversed_launch)
    monkeypatch.setattr(schedule, "WARP_LAUNCH", None)  # Sim._run: launch directly, not recorded
    return split


@pytest.mark.parametrize("name", ["quadruped", "two_trees", "slide_hinge", "ball_chain", "primitives", "humanoid"])
def test_wide_launches_do_not_depend_on_the_order_of_their_threads(name, monkeypatch):
    """The wide step with every element launch's threads in reverse order (reverse_thread_order):
    every array keeps its bits. (A pass that placed each body from its parent's pose in one
    launch over all bodies passes the bit-for-bit tests above and fails this one.)"""
    mjm = load(name)
    ordered = run(mjm, "wide", "float64", 20)
    split = reverse_thread_order(monkeypatch)
    reversed_ = run(mjm, "wide", "float64", 20)
    assert {"kinematics_body", "com_vel_body", "com_pos_subtree_alone", "crb_body_alone", "rne_subtree_alone"} \
        <= set(split)
    # the contacts' rows: a thread per slot or per contact row, whichever the model has fewer of
    assert {"contact_rows", "contact_rows_by_slot"} & set(split)
    assert_same_data(ordered, reversed_)


def test_subtree_sums_of_a_tree_deeper_than_the_stack():
    """simrl.sim.subtree keeps a stack of SUBTREE_STACK partial sums: a chain deeper than that
    keeps the wide step's launches per level for its subtree sums, with the fused step's bits;
    a branching tree (the quadruped) sums each subtree in one launch."""
    from simrl.sim.model import SUBTREE_STACK

    n = SUBTREE_STACK + 2
    links = "".join('<body pos="0 0 -0.1"><joint type="hinge" axis="0 1 0" damping="0.01"/>'
                    '<geom type="capsule" size="0.02" fromto="0 0 0 0.02 0 -0.1"/>' for _ in range(n))
    xml = f"<mujoco><worldbody>{links}{'</body>' * n}</worldbody></mujoco>"
    mjm = mujoco.MjModel.from_xml_string(xml)
    fused, wide = run(mjm, "fused", "float64", 20), run(mjm, "wide", "float64", 20)
    assert not wide.model.subtree_alone and fused.model.struct.body_subtree.numpy()[:, 1].max() == n
    names = [item.kernel.key for seg in wide._step_segments for item in seg.launches(wide.model)]
    assert names.count("crb_body") == n and "crb_body_alone" not in names  # a launch per level
    assert_same_data(fused, wide)
    assert Sim.from_model(load("quadruped"), num_worlds=1).model.subtree_alone


@pytest.mark.parametrize("schedule_name", ["fused", "wide"])
def test_a_model_of_the_world_alone_steps(schedule_name):
    """No body but the world: the tree's passes that leave the world out launch nothing."""
    sim = Sim.from_mjcf("<mujoco><worldbody><geom type='plane' size='1 1 1'/></worldbody></mujoco>",
                        num_worlds=2, device="cpu", schedule=schedule_name)
    sim.step(2)
    assert sim.qpos.shape == (2, 0) and not sim.nan_worlds.any()


def test_forward_alone_equal():
    mjm = load("primitives")
    sims = []
    for s in ("fused", "wide"):
        sim = run(mjm, s, "float64", 0)
        sim.forward()
        sims.append(sim)
    assert_same_data(*sims)


def _diff_rollout(mjm, schedule_name, steps=6, W=4, seed=3):
    sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype="float64", schedule=schedule_name)
    qpos, qvel, ctrl = start_state(mjm, W, np.random.default_rng(seed))
    qpos0 = torch.tensor(qpos, requires_grad=True)
    qvel0 = torch.tensor(qvel, requires_grad=True)
    ctrl0 = torch.tensor(ctrl, requires_grad=True)
    mass = torch.tensor(np.tile(mjm.body_mass, (W, 1)), requires_grad=True)
    friction = torch.tensor(np.tile(mjm.geom_friction, (W, 1, 1)), requires_grad=True)
    params = {"body_mass": mass, "geom_friction": friction}
    q, v = qpos0, qvel0
    for _ in range(steps):
        q, v = diff_step(sim, q, v, ctrl0, params=params)
    (q.square().sum() + v.square().sum()).backward()
    return (q.detach(), v.detach()), (qpos0.grad, qvel0.grad, ctrl0.grad, mass.grad, friction.grad)


@pytest.mark.parametrize("name", ["quadruped", "limits_friction", "ball_chain"])
def test_wide_diff_step_equals_fused(name):
    mjm = load(name)
    (out_f, grad_f), (out_w, grad_w) = _diff_rollout(mjm, "fused"), _diff_rollout(mjm, "wide")
    for a, b in zip(out_f, out_w, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_f, grad_w, strict=True):
        assert torch.isfinite(a).all()
        scale = a.abs().max().clamp_min(1e-300)
        # named reduction-order difference: adjoint accumulation of shared reads
        assert ((a - b).abs().max() / scale).item() <= 1e-12


@pytest.mark.parametrize("name", ["quadruped", "limits_friction", "ball_chain"])
def test_wide_diff_step_threads_in_any_order(name, monkeypatch):
    """The differentiable step's wide launches (forward and, on the tape, adjoint) with every
    element launch's threads in reverse order, as reverse_thread_order does for the engine's
    step: the same outputs bit for bit, gradients within 1e-12 (the adjoints of shared reads
    accumulate in another order)."""
    from simrl.sim import grad

    mjm = load(name)
    out_a, grad_a = _diff_rollout(mjm, "wide")
    split = []

    def reversed_segment(self, seg, m, d, W, forward=True):
        assert forward  # the wide schedule launches every segment's forward (no fused forward)
        for item in seg.launches(self.model):
            if item.dims and item.inputs and isinstance(item.inputs[-1], int):
                for e in reversed(range(item.dims[0])):
                    self._launch(item.kernel, (W, 1), [m, d, *item.inputs[:-1], item.inputs[-1] + e])
                split.append(item.kernel.key)
            else:
                self._launch(item.kernel, (W, *item.dims), [m, d, *item.inputs])

    monkeypatch.setattr(grad.Rollout, "_segment", reversed_segment)
    out_b, grad_b = _diff_rollout(mjm, "wide")
    assert {"kinematics_body", "com_vel_body", "crb_body", "contact_rows"} <= set(split)
    for a, b in zip(out_a, out_b, strict=True):
        assert torch.equal(a, b)
    for a, b in zip(grad_a, grad_b, strict=True):
        scale = a.abs().max().clamp_min(1e-300)
        assert ((a - b).abs().max() / scale).item() <= 1e-12


@pytest.fixture
def cpu_blocks(monkeypatch):
    """World functions run as blocks of 8 cooperative threads on the CPU."""
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", True)
    monkeypatch.setattr(schedule, "LANES", 8)
    yield 8


@pytest.mark.parametrize("name", ["primitives", "quadruped", "limits_friction"])
def test_lanes_of_a_block_give_the_bits_of_one_thread(name, cpu_blocks):
    mjm = load(name)
    assert_same_data(run(mjm, "fused", "float64", 30), run(mjm, "wide", "float64", 30))


def test_lanes_of_a_block_split_the_terrain_broadphase(cpu_blocks):
    """On stair terrain the broadphase's groups of boxes (simrl.sim.broadphase) split among a
    world's 8 lanes: robots spread over the patches, some on the stairs' edges, keep the same
    pairs in the same order, and every array its bits, as one thread per world."""
    from envs.terrain import TerrainCfg, terrain_model

    cfg = TerrainCfg(rows=2, cols=2, types={"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, border=1.0)
    mjm, terrain = terrain_model(ASSETS_DIR / "quadruped.xml", cfg)
    W = 4
    rng = np.random.default_rng(5)
    qpos, qvel, ctrl = start_state(mjm, W, rng)
    qpos[:, :3] = terrain.origins.reshape(-1, 3)[np.arange(W) % 4] + np.array([0.0, 0.0, 0.35])
    qpos[:, :2] += rng.uniform(-1.5, 1.5, (W, 2))
    sims = []
    for name in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype="float64", schedule=name)
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(a, dtype=torch.float64) for a in (qpos, qvel, ctrl))
        sim.step(20)
        sims.append(sim)
    assert sims[1].model.struct.nbp_group >= 4, "groups for several lanes"
    assert (sims[1].view("bp_lane_count")[:, 1:8] > 0).any(), "lanes after the first kept pairs"
    assert_same_data(*sims)


def test_lanes_in_the_differentiable_step(cpu_blocks, monkeypatch):
    mjm = load("limits_friction")
    out_b, grad_b = _diff_rollout(mjm, "wide")
    monkeypatch.setattr(wp.config, "enable_cpu_blocks", False)
    out_1, grad_1 = _diff_rollout(mjm, "wide")
    for a, b in zip(out_b + grad_b, out_1 + grad_1, strict=True):
        assert torch.equal(a, b)


def test_schedule_argument():
    mjm = load("slide_hinge")
    sim = Sim.from_model(mjm, num_worlds=2, device="cpu")
    assert sim.schedule == "fused" and "schedule='fused'" in repr(sim)
    with pytest.raises(ValueError, match="schedule must be one of 'auto', 'fused', 'wide'"):
        Sim.from_model(mjm, num_worlds=2, device="cpu", schedule="parallel")


def test_tree_levels():
    """Every body's parent is in an earlier level; levels hold each body once; children lists
    match MuJoCo's parents; each body's path runs from the world through its ancestors."""
    mjm = load("humanoid")
    model = Sim.from_model(mjm, num_worlds=1).model
    tree = model.struct.body_tree.numpy()
    level_of = {}
    for depth, (start, count) in enumerate(model.body_levels):
        for b in tree[start:start + count]:
            level_of[int(b)] = depth
    assert sorted(level_of) == list(range(mjm.nbody)) and model.body_levels[0] == (0, 1)
    for b in range(1, mjm.nbody):
        assert level_of[int(mjm.body_parentid[b])] == level_of[b] - 1
    adr, num, child = (getattr(model.struct, f).numpy() for f in ("body_child_adr", "body_child_num", "body_child"))
    for b in range(mjm.nbody):
        assert list(child[adr[b]:adr[b] + num[b]]) == [c for c in range(1, mjm.nbody) if mjm.body_parentid[c] == b]
    # each body's path from the world (Pass.alone walks it): the world, ..., the parent, the body
    span, path = model.struct.body_path_adr.numpy(), model.struct.body_path.numpy()
    ends = model.struct.body_subtree.numpy()[:, 0]
    for b in range(mjm.nbody):
        # the subtree: the bodies from b up to its end, each a descendant of b
        assert all((b in [int(x) for x in path[span[e, 0]:span[e, 0] + span[e, 1]]]) == (b <= e < ends[b])
                   for e in range(mjm.nbody))
        walk = [b]
        while walk[-1] != 0:
            walk.append(int(mjm.body_parentid[walk[-1]]))
        assert list(path[span[b, 0]:span[b, 0] + span[b, 1]]) == walk[::-1]


@pytest.mark.parametrize("schedule_name", ["fused", "wide"])
def test_recorded_graph_replays_the_same_steps(schedule_name):
    """Sim.step's graph (wp.ScopedCapture, here Warp's CPU recording, on CUDA a CUDA graph):
    replayed steps equal launched steps bit for bit, and a model array replaced between two
    calls (per-world friction) is recorded again, not read from the stale graph."""
    from envs.base import per_world_param

    mjm = load("quadruped")
    sims = []
    for graphs in (False, True):
        sim = Sim.from_model(mjm, num_worlds=6, device="cpu", dtype="float64", schedule=schedule_name,
                             use_graphs=graphs)
        qpos, qvel, ctrl = start_state(mjm, 6, np.random.default_rng(4))
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
        sim.step(5)
        sim.step(5)  # replays what the first call recorded
        friction = per_world_param(sim, "cpair_friction")  # a new array: recorded again
        friction[:, :, :2] *= torch.linspace(0.2, 1.0, 6, dtype=friction.dtype)[:, None, None]
        sim.step(5)
        sims.append(sim)
    assert sims[1].use_graphs and len(sims[1]._graphs) == 1
    assert_same_data(*sims)


def test_graph_key_follows_every_model_field():
    """Sim._graph_key (the bytes of the Model struct's argument block) stays the same while
    nothing changes and changes with a replaced array (its address), a scalar field (the solver's
    iterations and tolerance) and back: a stale graph is never replayed."""
    from envs.base import per_world_param

    sim = Sim.from_model(load("quadruped"), num_worlds=3, device="cpu")
    key = sim._graph_key()
    assert sim._graph_key() == key
    per_world_param(sim, "cpair_friction")
    replaced = sim._graph_key()
    assert replaced != key
    iterations = sim.model.struct.solver_iterations
    sim.set_solver(iterations=iterations + 1)
    assert sim._graph_key() != replaced
    sim.set_solver(iterations=iterations)
    assert sim._graph_key() == replaced
    sim.set_solver(tolerance=0.5)
    assert sim._graph_key() != replaced


def test_terrain_pairs_left_out_by_the_broadphase_give_the_same_bits_in_both_schedules():
    """On box terrain the broadphase (simrl.sim.broadphase) leaves out the robot-terrain pairs of
    boxes far from the robot, whole runs at a time, and the narrow phase collides the pairs it
    kept. Worlds spread over the patches, stepped into and out of contact with the stairs: every
    array as in the other schedule (one thread per world against a block's lanes), with pairs
    both left out and kept, and contacts both made and broken; every slot of a pair left out
    holds no contact; and after contact_active was overwritten between steps, the slots of the
    kept pairs are written again (the same bits in both)."""
    from envs.terrain import TerrainCfg, terrain_model

    cfg = TerrainCfg(rows=2, cols=2, types={"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, border=1.0)
    mjm, terrain = terrain_model(ASSETS_DIR / "quadruped.xml", cfg)
    W = 8
    rng = np.random.default_rng(3)
    origins = terrain.origins.reshape(-1, 3)
    qpos, qvel, ctrl = start_state(mjm, W, rng)
    qpos[:, :3] = origins[np.arange(W) % len(origins)] + np.array([0.0, 0.0, 0.35])
    qpos[:, :2] += rng.uniform(-1.5, 1.5, (W, 2))  # some on the stairs' edges
    sims = {}
    for name in ("fused", "wide"):
        sim = Sim.from_model(mjm, num_worlds=W, device="cpu", dtype="float64", schedule=name)
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(a, dtype=torch.float64) for a in (qpos, qvel, ctrl))
        kept, contacts = [], []
        for _ in range(6):
            sim.step(10)
            kept.append(sim.view("ncollision").clone())
            contacts.append(sim.view("contact_active").clone())
            assert_slots_outside_the_list_empty(sim)
        sims[name] = (sim, kept, contacts)
    assert_same_data(sims["fused"][0], sims["wide"][0])
    noise = torch.as_tensor(rng.integers(0, 2, sims["fused"][0].view("contact_active").shape), dtype=torch.int32)
    for sim, _, _ in sims.values():
        sim.view("contact_active").copy_(noise)
        sim.step(5)
    fused, kept, contacts = sims["fused"]
    kept = torch.stack(kept)
    assert (kept > 0).any() and (kept < fused.model.struct.ncpair // 4).all(), "some pairs kept, most left out"
    contacts = torch.stack(contacts)
    made_and_broken = ((contacts[1:] == 1) & (contacts[:-1] == 0)).any() and \
        ((contacts[1:] == 0) & (contacts[:-1] == 1)).any()
    assert made_and_broken
    assert not fused.nan_worlds.any()
    assert_same_data(fused, sims["wide"][0])


def assert_slots_outside_the_list_empty(sim: Sim):
    """Every contact slot that no pair the broadphase kept holds is free (no pair, no contact),
    and each kept pair holds its slots."""
    nslot = sim.model.contact_tables["nslot"]
    n = sim.view("ncollision").numpy()
    pairs, adr = sim.view("collision_pair").numpy(), sim.view("collision_adr").numpy()
    taken = sim.view("collision_nslot").numpy()
    active, owner = sim.view("contact_active").numpy(), sim.view("contact_pair").numpy()
    for w in range(sim.num_worlds):
        inside = np.zeros(active.shape[1], dtype=bool)
        for p, a, k in zip(pairs[w, :n[w]], adr[w, :n[w]], taken[w, :n[w]], strict=True):
            assert 1 <= k <= nslot[p] and (k == nslot[p] or sim.model.contact_tables["kind"][p] in HFIELD_KINDS)
            inside[a:a + k] = True
            assert (owner[w, a:a + k] == p).all()
        assert not active[w, ~inside].any(), f"world {w}: a slot outside the kept pairs holds a contact"
        assert (owner[w, ~inside] == -1).all(), f"world {w}: a slot outside the kept pairs names a pair"


@pytest.mark.parametrize("schedule_name", ["fused", "wide"])
def test_forward_of_some_worlds(schedule_name):
    """`Sim.forward(worlds=mask)`: the chosen worlds' data as a forward pass of every world gives
    it, bit for bit, and every array of the other worlds as it was (the engine's kernels leave
    them alone: Data.world_skip), with the CPU's worlds split between two threads."""
    mjm = load("quadruped")
    W = 6
    sims = []
    for _ in range(2):
        sim = run(mjm, schedule_name, torch.float64, steps=3)
        sims.append(Sim.from_model(mjm, num_worlds=W, device="cpu", dtype=torch.float64,
                                   schedule=schedule_name, cpu_threads=2))
        new = sims[-1]
        for name in data_struct(new.model.dtype).vars:  # the first sim's data, mid-trajectory
            getattr(new.data, name).assign(getattr(sim.data, name))
    full, some = sims
    mask = torch.tensor([True, False, False, True, False, True])
    rng = np.random.default_rng(1)
    moved = torch.as_tensor(rng.normal(0.0, 0.05, (W, mjm.nq)))
    for sim in sims:  # a reset of some worlds: a new state the step's outputs do not describe
        sim.qpos[:, 7:] += moved[:, 7:]
    # every array with a row per world (the convex collision's struct scratch: none here)
    names = [name for name in data_struct(some.model.dtype).vars
             if not hasattr(getattr(some.data, name).dtype, "vars")]
    before = {name: wp.to_torch(getattr(some.data, name)).clone() for name in names}
    full.forward()
    some.forward(worlds=mask)
    changed = 0
    for name, old in before.items():
        x, y = wp.to_torch(getattr(full.data, name)), wp.to_torch(getattr(some.data, name))
        if x.dim() == 0 or x.shape[0] != W:
            continue
        assert torch.equal(y[mask], x[mask]), f"{name}: a chosen world differs from the full forward pass"
        assert torch.equal(y[~mask], old[~mask]), f"{name}: a world left out was written"
        changed += int(not torch.equal(x[~mask], old[~mask]))
    assert changed > 10  # the full pass did change the other worlds (the test can fail)
    assert not some.view("world_skip").any()
    # the worlds are stepped by the next step again
    full.step(2)
    some.step(2)
    assert torch.equal(full.qpos[mask], some.qpos[mask])


def test_forward_of_some_worlds_checks_the_mask():
    sim = Sim.from_model(load("quadruped"), num_worlds=4, device="cpu")
    with pytest.raises(TypeError, match="bool torch.Tensor"):
        sim.forward(worlds=torch.tensor([1, 0, 0, 1]))
    with pytest.raises(TypeError, match="bool torch.Tensor"):
        sim.forward(worlds=[True, False, True, False])
    with pytest.raises(ValueError, match=r"shape \(4,\)"):
        sim.forward(worlds=torch.ones(3, dtype=torch.bool))
    with pytest.raises(ValueError, match="device"):
        sim.forward(worlds=torch.ones(4, dtype=torch.bool, device="meta"))
