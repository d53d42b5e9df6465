"""One engine, two schedules: the same stage code launched as a CPU or as a GPU wants it.

Every stage file of simrl/sim is written per element, with MuJoCo's names:
`kinematics.body_tree(m, d, w, b)` places one body, `crb.dof(m, d, w, i)` fills one row of the
mass matrix, `collision_driver` collides one candidate pair, `constraint.contact_rows` makes
the rows of one contact slot. The dense per-world algebra (factor_m, the Newton solver) is a
*world function* `f(m, d, w, lane, nlanes)` written for a block of threads (simrl.sim.types).
A `Pass` runs element functions over one domain (the bodies from the root, the dofs, the
candidate pairs, ...); a *segment* is a tuple of passes, e.g. simrl.sim.forward's mj_forward.
From one segment this module builds either schedule:

- **fused**: one kernel, one thread per world, each pass a loop over its elements. Right for a
  CPU core, which steps one world after another and pays for every launch.
- **wide**: a launch per pass over (worlds, elements): tree passes from the root (kinematics,
  velocities) one launch over every body, each redoing its path from the world in registers,
  from the leaves (subtree sums) one launch too, each body summing its subtree in MuJoCo's order
  (`Pass.alone`; the differentiable step's a launch per tree level), candidate
  pairs a launch per collider kind, world functions a block of `LANES` threads per world
  (wp.launch_tiled). Right for a GPU, which needs many threads per world to fill its SMs and
  hide memory latency at the 1,000-10,000 worlds people train with (a thread per world fills
  16 of an H200's 132 SMs at 4096 worlds).

Both visit every element with the same code and combine across elements in the same order
(sums over children, over the actuators of a dof, over the active rows of a dof are gathered
by the element that owns the result, in ascending order; sums in world functions are taken by
lane 0), so on the CPU they give the same bits. A thread writes only its own element's
outputs: no atomics whose order changes results, no dependence on the CPU's serial order.
"""


import functools
from dataclasses import dataclass

import warp as wp

from simrl.sim.data import MAX_LANES, data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import kernel_module

#: threads per world of the wide schedule's world functions (one warp); on the CPU Warp runs a
#: block as one thread unless wp.config.enable_cpu_blocks is set
LANES = 32
assert LANES <= MAX_LANES
#: threads per world of the wide schedule's launches over a world's list of kept pairs (the
#: narrow phase): a thread takes every LIST_THREADS-th entry (the quadruped on terrain keeps at
#: most 8 pairs; a thread per slot of the budget, 170, would mostly find nothing to do)
LIST_THREADS = 32
LIST_BLOCK = 256  # Warp's threads per block of a launch

SCHEDULES = ("auto", "fused", "wide")

#: registers per thread the world kernels are compiled to (CUDA); more would halve how many
#: blocks an SM keeps resident (65536 registers per SM)
MAX_REGISTERS = 128

# domains of a pass: what its elements are, and how each schedule visits them
WORLD = "world"  # a world function f(m, d, w, lane, nlanes)
ONCE = "once"  # one element f(m, d, w, 0) per world (a per-world scalar such as the time)
BODIES_DOWN = "bodies_down"  # f(m, d, w, b), parents before children: a launch per tree level (or Pass.alone)
BODIES_UP = "bodies_up"  # children before parents: a launch per level, the deepest first (or Pass.alone)
BODIES = "bodies"  # every body, in any order
FRAMES = "frames"  # every body, then every geom, then every site (placed frames)
DOFS = "dofs"
# every dof of a model with gravity compensation (Model.enable_gravcomp), none otherwise
GRAVCOMP_DOFS = "gravcomp_dofs"
JOINTS = "joints"
GEOMS = "geoms"
SITES = "sites"
ACTUATORS = "actuators"
CONTROLS = "controls"  # the world's controls, checked together: one element when nu > 0
SITE_TRANSMISSIONS = "site_transmissions"  # the moment row transmissions but bodies' (Model.actuator_trnsite)
BODY_TRANSMISSIONS = "body_transmissions"  # the bodies' (the table's last Model.nbody_trn rows)
RICH_ACTUATORS = "rich_actuators"  # muscles and the actuators of force-limited tendons (Model.rich_actuator)
# the contact slots that have constraint rows (constraint.efc_address): the fused schedule visits
# Data.contact_slots' list, the wide one a thread per contact row of the budget (a slot at its
# first row), not per slot: on terrain thousands of slots, a few with rows
CONTACTS = "contacts"
# those of a model with pyramidal (or frictionless) cones, none in one with elliptic cones, and
# the other way round: passes for one kind of cone (the differentiable step's)
PYRAMIDAL_CONTACTS = "pyramidal_contacts"
ELLIPTIC_CONTACTS = "elliptic_contacts"
SLOTS_WITH_ROWS = (CONTACTS, PYRAMIDAL_CONTACTS, ELLIPTIC_CONTACTS)
EQUALITIES = "equalities"  # equality constraints that have rows
# the equality constraints of a model with flex equalities (none in one without: the
# differentiable step's pass for their rows)
FLEX_EQUALITIES = "flex_equalities"
SENSORS = "sensors"
CONTACT_SENSORS = "contact_sensors"  # the contact sensors (Model.contact_sensor)
WRENCH_SENSORS = "wrench_sensors"  # the touch, force and torque sensors (the last Model.nsensor_wrench)
RAY_SENSORS = "ray_sensors"  # the rangefinders (the Model.nsensor_ray before the wrench sensors)
TENDONS = "tendons"
WRAP_TENDONS = "wrap_tendons"  # the range of tendons that holds every wrapping segment (Model.tendon_wrap_first)
WRAP_SEGMENTS = "wrap_segments"  # the range of tendon segments that holds every wrapping one (Model.wrap_seg_first)
FRICTION_ROWS = "friction_rows"  # the constraint rows of dof friction loss
LIMIT_ROWS = "limit_rows"  # the constraint rows of joint limits
CONTACT_ROWS = "contact_rows"  # the constraint rows of the contact slots (after every other row)
ACTIVE_ROWS = "active_rows"  # constraint rows that are active (efc_active) in the world
PAIRS = "pairs"  # the candidate pairs the broadphase kept (Data.collision_pair): a launch per group of kinds

# domains that are a range of indices: m -> (first index, count), of the Model struct (the
# kernels' versions are in _range_funcs)
_RANGES = {ONCE: lambda m: (0, 1), BODIES: lambda m: (0, m.nbody), FRAMES: lambda m: (0, m.nbody + m.ngeom + m.nsite),
           DOFS: lambda m: (0, m.nv), GRAVCOMP_DOFS: lambda m: (0, m.nv if m.enable_gravcomp else 0),
           JOINTS: lambda m: (0, m.njnt), GEOMS: lambda m: (0, m.ngeom),
           SITES: lambda m: (0, m.nsite), ACTUATORS: lambda m: (0, m.nu), CONTROLS: lambda m: (0, min(m.nu, 1)),
           SITE_TRANSMISSIONS: lambda m: (0, m.nsite_trn - m.nbody_trn),
           BODY_TRANSMISSIONS: lambda m: (m.nsite_trn - m.nbody_trn, m.nbody_trn),
           RICH_ACTUATORS: lambda m: (0, m.nu_rich),
           CONTACTS: lambda m: (0, m.nconmax),
           PYRAMIDAL_CONTACTS: lambda m: (0, 0 if m.cone_elliptic else m.nconmax),
           ELLIPTIC_CONTACTS: lambda m: (0, m.nconmax if m.cone_elliptic else 0),
           EQUALITIES: lambda m: (0, m.neq if m.nefc_eq > 0 else 0),
           FLEX_EQUALITIES: lambda m: (0, m.neq if m.nefc_eq > 0 and m.nflexedge > 0 else 0),
           SENSORS: lambda m: (0, m.nsensor - m.nsensor_ray - m.nsensor_wrench),
           RAY_SENSORS: lambda m: (m.nsensor - m.nsensor_ray - m.nsensor_wrench, m.nsensor_ray),
           WRENCH_SENSORS: lambda m: (m.nsensor - m.nsensor_wrench, m.nsensor_wrench),
           CONTACT_SENSORS: lambda m: (0, m.ncontact_sensor), TENDONS: lambda m: (0, m.ntendon),
           WRAP_TENDONS: lambda m: (m.tendon_wrap_first, m.tendon_wrap_num),
           WRAP_SEGMENTS: lambda m: (m.wrap_seg_first, m.wrap_seg_num),
           FRICTION_ROWS: lambda m: (m.nefc_eq, m.nefc_friction),
           LIMIT_ROWS: lambda m: (m.nefc_eq + m.nefc_friction, m.nefc_limit),
           CONTACT_ROWS: lambda m: (m.nefc_eq + m.nefc_friction + m.nefc_limit,
                                    m.nefc - m.nefc_eq - m.nefc_friction - m.nefc_limit)}


@dataclass(frozen=True)
class Pass:
    """Element functions `funcs`, called in order for each element of the domain `over`.

    `skip_world`: a body pass that leaves out the world body. `kinds` (PAIRS only): ((kinds,
    f(m, d, w, i)), ...), the wide schedule's launch per group of collider kinds, f colliding
    entry i of the world's kept pairs when its kind is of the group; `funcs` then holds the
    function that dispatches on every kind, for the fused schedule."""

    name: str
    over: str
    funcs: tuple
    skip_world: bool = False
    # BODIES_DOWN: the wide schedule leaves out the levels from the world's that hold only bodies
    # placed without their parent (Model.body_levels_placed_alone), on which the pass does nothing
    skip_placed_alone: bool = False
    # BODIES_DOWN, BODIES_UP: functions f(m, d, w, b) that do `funcs`' work for body b alone, its
    # path from the world (down) or its subtree (up, simrl.sim.subtree) redone in registers with
    # the same arithmetic (the same bits): the wide schedule's engine step launches them once over
    # every body, not a launch per level (a GPU pays for each launch more than for a few redone
    # bodies); the differentiable step keeps the levels (an input read by several threads would
    # have its adjoint summed by atomics), as do subtree sums of a model deeper than
    # model.SUBTREE_STACK (Model.subtree_alone)
    alone: tuple = ()
    kinds: tuple = ()  # ((kinds, function), ...)
    # PAIRS: the groups of kinds whose function uses a row of the convex scratch: the
    # wide schedule launches them a thread per row (Model.nccdmax), which runs the entries of
    # that row (Data.collision_ccd mod nccdmax) in list order, not a thread per entry
    ccd_rows: tuple = ()


@dataclass(frozen=True)
class Launch:
    """One kernel launch of a schedule: dim = (num_worlds, *dims); `inputs` follow (m, d);
    `block_dim`: a tiled launch with that many threads per world (a world function)."""

    kernel: wp.Kernel
    dims: tuple = ()
    inputs: tuple = ()
    block_dim: int | None = None


def resolve(schedule: str, device) -> str:
    """'fused' or 'wide' for `schedule` on `device` ('auto': fused on the CPU, wide on CUDA)."""
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {', '.join(repr(s) for s in SCHEDULES)}, got {schedule!r}")
    if schedule == "auto":
        return "fused" if wp.get_device(device).is_cpu else "wide"
    return schedule


#: Warp's own launch function: a profiler or launch recorder that replaces wp.launch
#: (scripts/gpu_report.py) must see every launch, so none is replayed while it is replaced
WARP_LAUNCH = wp.launch


def replays(device) -> bool:
    """Whether launches on `device` may be recorded once and replayed (Warp's record_cmd: the
    arguments packed once, run by the command's `launch()`, a fraction of wp.launch's Python):
    on the CPU, outside a capture, without Warp's launch log, with wp.launch Warp's own."""
    return (device.is_cpu and not device.is_capturing and not wp.config.print_launches
            and wp.launch is WARP_LAUNCH)


def launch(item: Launch, m, d, num_worlds: int, device, record: bool = False):
    """Run one Launch on the worlds of (m, d); with `record`, return it as a recorded command
    (Warp's `record_cmd`: the arguments packed once, run by its `launch()`) instead."""
    inputs = [m, d, *item.inputs]
    if item.block_dim is not None:
        return wp.launch_tiled(item.kernel, dim=[num_worlds], inputs=inputs, block_dim=item.block_dim,
                               device=device, record_cmd=record)
    return wp.launch(item.kernel, dim=(num_worlds, *item.dims), inputs=inputs, device=device, record_cmd=record)


# --------------------------------------------------------------------------------------------
# Building blocks shared by both schedules


def _chain(funcs, Model, Data, world: bool):
    """One function that calls `funcs` in order on the same element (or world)."""
    if len(funcs) == 1:
        return funcs[0]
    first, rest = funcs[0], _chain(funcs[1:], Model, Data, world)
    if world:
        @wp.func
        def both_world(m: Model, d: Data, w: int, lane: int, nlanes: int):
            first(m, d, w, lane, nlanes)
            rest(m, d, w, lane, nlanes)

        return both_world

    @wp.func
    def both(m: Model, d: Data, w: int, e: int):
        first(m, d, w, e)
        rest(m, d, w, e)

    return both


@functools.cache
def _range_funcs(scalar):
    """{domain: g(m) -> (first index, count)} for the range domains (a Warp function cannot read
    a struct field named by a variable, so there is one per domain)."""
    Model = model_struct(scalar)

    @wp.func
    def once(m: Model):
        return 0, 1

    @wp.func
    def bodies(m: Model):
        return 0, m.nbody

    @wp.func
    def frames(m: Model):
        return 0, m.nbody + m.ngeom + m.nsite

    @wp.func
    def dofs(m: Model):
        return 0, m.nv

    @wp.func
    def gravcomp_dofs(m: Model):
        n = int(0)
        if m.enable_gravcomp != 0:
            n = m.nv
        return 0, n

    @wp.func
    def joints(m: Model):
        return 0, m.njnt

    @wp.func
    def geoms(m: Model):
        return 0, m.ngeom

    @wp.func
    def sites(m: Model):
        return 0, m.nsite

    @wp.func
    def actuators(m: Model):
        return 0, m.nu

    @wp.func
    def controls(m: Model):
        return 0, wp.min(m.nu, 1)

    @wp.func
    def site_transmissions(m: Model):
        return 0, m.nsite_trn - m.nbody_trn

    @wp.func
    def body_transmissions(m: Model):
        return m.nsite_trn - m.nbody_trn, m.nbody_trn

    @wp.func
    def rich_actuators(m: Model):
        return 0, m.nu_rich

    @wp.func
    def contacts(m: Model):
        return 0, m.nconmax

    @wp.func
    def pyramidal_contacts(m: Model):
        n = m.nconmax
        if m.cone_elliptic != 0:
            n = 0
        return 0, n

    @wp.func
    def elliptic_contacts(m: Model):
        n = int(0)
        if m.cone_elliptic != 0:
            n = m.nconmax
        return 0, n

    @wp.func
    def sensors(m: Model):
        return 0, m.nsensor - m.nsensor_ray - m.nsensor_wrench

    @wp.func
    def ray_sensors(m: Model):
        return m.nsensor - m.nsensor_ray - m.nsensor_wrench, m.nsensor_ray

    @wp.func
    def wrench_sensors(m: Model):
        return m.nsensor - m.nsensor_wrench, m.nsensor_wrench

    @wp.func
    def contact_sensors(m: Model):
        return 0, m.ncontact_sensor

    @wp.func
    def tendons(m: Model):
        return 0, m.ntendon

    @wp.func
    def wrap_tendons(m: Model):
        return m.tendon_wrap_first, m.tendon_wrap_num

    @wp.func
    def wrap_segments(m: Model):
        return m.wrap_seg_first, m.wrap_seg_num

    @wp.func
    def equalities(m: Model):
        n = int(0)
        if m.nefc_eq > 0:
            n = m.neq
        return 0, n

    @wp.func
    def flex_equalities(m: Model):
        n = int(0)
        if m.nefc_eq > 0 and m.nflexedge > 0:
            n = m.neq
        return 0, n

    @wp.func
    def friction_rows(m: Model):
        return m.nefc_eq, m.nefc_friction

    @wp.func
    def limit_rows(m: Model):
        return m.nefc_eq + m.nefc_friction, m.nefc_limit

    @wp.func
    def contact_rows(m: Model):
        first = m.nefc_eq + m.nefc_friction + m.nefc_limit
        return first, m.nefc - first

    out = {ONCE: once, BODIES: bodies, FRAMES: frames, DOFS: dofs, GRAVCOMP_DOFS: gravcomp_dofs, JOINTS: joints,
           GEOMS: geoms, SITES: sites,
           ACTUATORS: actuators, CONTROLS: controls,
           SITE_TRANSMISSIONS: site_transmissions, BODY_TRANSMISSIONS: body_transmissions,
           RICH_ACTUATORS: rich_actuators, CONTACTS: contacts,
           SENSORS: sensors,
           PYRAMIDAL_CONTACTS: pyramidal_contacts, ELLIPTIC_CONTACTS: elliptic_contacts,
           RAY_SENSORS: ray_sensors, WRENCH_SENSORS: wrench_sensors, CONTACT_SENSORS: contact_sensors,
           TENDONS: tendons, WRAP_TENDONS: wrap_tendons, WRAP_SEGMENTS: wrap_segments,
           EQUALITIES: equalities, FLEX_EQUALITIES: flex_equalities, FRICTION_ROWS: friction_rows,
           LIMIT_ROWS: limit_rows, CONTACT_ROWS: contact_rows}
    assert set(out) == set(_RANGES)
    return out


def _host_range(model, over: str) -> tuple[int, int]:
    """(first index, count) of a range domain, from the model's sizes."""
    return _RANGES[over](model.struct)


# --------------------------------------------------------------------------------------------
# fused: one thread per world


@functools.cache
def _fused_pass(p: Pass, scalar, backward: bool = True):
    """The fused schedule's loop over pass p's elements in one world. In a module without
    adjoints (`backward` False: the engine's own step) the loops are `while` loops, which
    Warp's CPU code runs with far fewer instructions than `for e in range(n)` with a run-time n
    (its range iterator); the differentiable step keeps `for` loops, whose adjoints
    Warp generates in reverse order; neither the loop nor its element function (functions that
    return nothing) is replayed in the backward kernel (simrl.sim.no_replay)."""
    return _fused_loop(p, scalar, backward)


def _fused_loop(p: Pass, scalar, backward: bool):
    Model, Data = model_struct(scalar), data_struct(scalar)
    f = _chain(p.funcs, Model, Data, world=p.over == WORLD)
    first = 1 if p.skip_world else 0
    if p.over == WORLD:
        @wp.func
        def run_world(m: Model, d: Data, w: int):
            f(m, d, w, 0, 1)

        return run_world
    if p.over == BODIES_DOWN:
        @wp.func
        def run_down(m: Model, d: Data, w: int):
            if wp.static(backward):
                for i in range(first, m.nbody):
                    f(m, d, w, m.body_tree[i])
            else:
                i = int(first)
                while i < m.nbody:
                    f(m, d, w, m.body_tree[i])
                    i = i + 1

        return run_down
    if p.over == BODIES_UP:
        @wp.func
        def run_up(m: Model, d: Data, w: int):
            if wp.static(backward):
                for i in range(m.nbody - first):
                    f(m, d, w, m.body_tree[m.nbody - 1 - i])
            else:
                i = m.nbody - 1
                while i >= first:
                    f(m, d, w, m.body_tree[i])
                    i = i - 1

        return run_up
    if p.over == ACTIVE_ROWS:
        @wp.func
        def run_rows(m: Model, d: Data, w: int):
            # the rows in use that are active (every contact row is; constraint.efc_address)
            if wp.static(backward):
                for r in range(d.nefc[w]):
                    if d.efc_active[w, r] != 0:
                        f(m, d, w, r)
            else:
                r = int(0)
                end = d.nefc[w]
                while r < end:
                    if d.efc_active[w, r] != 0:
                        f(m, d, w, r)
                    r = r + 1

        return run_rows
    if p.over == PAIRS:
        @wp.func
        def run_pairs(m: Model, d: Data, w: int):
            # the entries of the pairs the broadphase kept (simrl.sim.broadphase), in pair order;
            # each writes only its own slots
            if wp.static(backward):
                for i in range(d.ncollision[w]):
                    f(m, d, w, i)
            else:
                i = int(0)
                end = d.ncollision[w]
                while i < end:
                    f(m, d, w, i)
                    i = i + 1

        return run_pairs
    if p.over in SLOTS_WITH_ROWS:
        bounds = _range_funcs(scalar)[p.over]  # no slots for a pass of the other cone

        @wp.func
        def run_contacts(m: Model, d: Data, w: int):
            # the slots that have rows, listed by constraint.efc_address (Data.contact_slots): on
            # terrain thousands of slots, a few with rows; the others have nothing to do
            start, count = bounds(m)
            if wp.static(backward):
                if count > 0:
                    for k in range(d.contact_nslots[w]):
                        f(m, d, w, d.contact_slots[w, k])
            else:
                k = int(0)
                end = int(0)
                if count > 0:
                    end = d.contact_nslots[w]
                while k < end:
                    f(m, d, w, d.contact_slots[w, k])
                    k = k + 1

        return run_contacts
    if p.over == CONTACT_ROWS:
        @wp.func
        def run_contact_rows(m: Model, d: Data, w: int):
            # the contact rows in use
            start = m.nefc_eq + m.nefc_friction + m.nefc_limit
            if wp.static(backward):
                for r in range(start, d.nefc[w]):
                    f(m, d, w, r)
            else:
                r = start
                while r < d.nefc[w]:
                    f(m, d, w, r)
                    r = r + 1

        return run_contact_rows
    bounds = _range_funcs(scalar)[p.over]

    @wp.func
    def run_range(m: Model, d: Data, w: int):
        start, count = bounds(m)
        if wp.static(backward):
            for e in range(count):
                f(m, d, w, start + e)
        else:
            e = start
            end = start + count
            while e < end:
                f(m, d, w, e)
                e = e + 1

    return run_range


def fused_kernel(name: str, passes: tuple, scalar, module):
    """The segment `passes` as one kernel over worlds: kernel(m, d), dim = num_worlds."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    backward = bool(module.options.get("enable_backward", True))
    runs = [_fused_pass(p, scalar, backward) for p in passes]

    @wp.kernel(module=module, name=name)
    def kernel(m: Model, d: Data):
        w = wp.tid()
        if wp.static(not backward):
            if d.world_skip[w] != 0:  # Sim.forward(worlds=...): a world left alone
                return
        for i in range(wp.static(len(runs))):
            wp.static(runs[i])(m, d, w)

    return kernel


# --------------------------------------------------------------------------------------------
# wide: a launch per pass, (worlds x elements) threads


def _wide_kernel(name: str, f, index: str, scalar, module):
    """A kernel running element function f once per (world, element) of its launch. `index`:
    'table' (elements table[start + e]), 'range' (start + e), 'list' (the kept pairs of a group of
    kinds), 'active' (rows, active only),
    'world' (a world function, a block of threads per world)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    # the engine's own kernels (not the differentiable step's) leave the worlds flagged in
    # Data.world_skip alone (Sim.forward(worlds=...)): one load per thread
    guard = not bool(module.options.get("enable_backward", True))
    if index == "table":
        @wp.kernel(module=module, name=name)
        def table_kernel(m: Model, d: Data, table: wp.array(dtype=int), start: int):
            w, e = wp.tid()
            if wp.static(guard):
                if d.world_skip[w] != 0:
                    return
            f(m, d, w, table[start + e])

        return table_kernel
    if index == "list":
        # `stride` threads per world (LIST_THREADS at most) over the entries of the world's list
        # of kept pairs (Data.collision_pair), thread t taking entries start + t, start + t +
        # stride, ...: those whose kind is in [lo, hi] run f with the entry
        # launch bounds that leave a thread MAX_REGISTERS registers (the colliders of capsules and
        # boxes would take more for the loop), at Warp's 256 threads per block; what they need
        # beyond them ptxas may keep in shared memory (CUDA 13), as the world kernels do
        @wp.kernel(module=module, name=name, enable_cuda_smem_spilling=True,
                   launch_bounds=(LIST_BLOCK, 65536 // (LIST_BLOCK * MAX_REGISTERS)))
        def list_kernel(m: Model, d: Data, lo: int, hi: int, stride: int, start: int):
            w, t = wp.tid()
            e = start + t
            n = d.ncollision[w]
            # most threads find the list shorter than they are: one load, first
            if e < n:
                if wp.static(guard):  # the engine's step
                    if d.world_skip[w] == 0:
                        # the list's length read again after each collision: nothing but the
                        # entry is held across the collider (a GPU thread's registers)
                        while e < d.ncollision[w]:
                            kind = m.cpair_kind[d.collision_pair[w, e]]
                            if kind >= lo and kind <= hi:
                                f(m, d, w, e)
                            e = e + stride
                else:  # the differentiable step's: a range loop, which Warp's adjoint replays
                    for i in range(e, n, stride):
                        kind = m.cpair_kind[d.collision_pair[w, i]]
                        if kind >= lo and kind <= hi:
                            f(m, d, w, i)

        return list_kernel
    if index == "ccd_rows":
        # a thread per row of a world's convex scratch: the entries of the world's list that
        # search on that row (the c-th that searches: row c mod nccdmax), in list order, whose
        # kind is in [lo, hi], run f with the entry
        @wp.kernel(module=module, name=name)
        def ccd_rows_kernel(m: Model, d: Data, lo: int, hi: int, start: int):
            w, tid = wp.tid()
            t = start + tid
            if wp.static(guard):
                if d.world_skip[w] != 0:
                    return
            e = int(0)
            end = d.ncollision[w]
            while e < end:
                ccd = d.collision_ccd[w, e]
                if ccd >= 0 and ccd % m.nccdmax == t:
                    kind = m.cpair_kind[d.collision_pair[w, e]]
                    if kind >= lo and kind <= hi:
                        f(m, d, w, e)
                e = e + 1

        return ccd_rows_kernel
    if index == "range":
        @wp.kernel(module=module, name=name)
        def range_kernel(m: Model, d: Data, start: int):
            w, e = wp.tid()
            if wp.static(guard):
                if d.world_skip[w] != 0:
                    return
            f(m, d, w, start + e)

        return range_kernel
    if index == "slots":
        # a thread per contact row of the budget (start: the first); the first row of each contact
        # runs f for its slot
        @wp.kernel(module=module, name=name)
        def slots_kernel(m: Model, d: Data, start: int):
            w, e = wp.tid()
            if wp.static(guard):
                if d.world_skip[w] != 0:
                    return
            r = start + e
            if r < d.nefc[w]:
                if d.efc_sub[w, r] == 0:
                    f(m, d, w, d.efc_id[w, r])

        return slots_kernel
    if index == "active":
        # a thread per row of the budget: those in use and active run f
        @wp.kernel(module=module, name=name)
        def rows_kernel(m: Model, d: Data):
            w, r = wp.tid()
            if wp.static(guard):
                if d.world_skip[w] != 0:
                    return
            if r < d.nefc[w]:
                if d.efc_active[w, r] != 0:
                    f(m, d, w, r)

        return rows_kernel
    assert index == "world"

    # launch bounds that leave a thread MAX_REGISTERS registers; what the solver's kernel needs
    # beyond them ptxas may keep in shared memory (CUDA 13) instead of spilling to local memory
    @wp.kernel(module=module, name=name, enable_cuda_smem_spilling=True,
               launch_bounds=(LANES, 65536 // (LANES * MAX_REGISTERS)))
    def world_kernel(m: Model, d: Data):
        w, lane = wp.tid()
        if wp.static(guard):
            if d.world_skip[w] != 0:  # every lane of the world's block: none waits at a barrier
                return
        f(m, d, w, lane, wp.block_dim())

    return world_kernel


@dataclass(frozen=True)
class _WidePass:
    p: Pass
    kernel: wp.Kernel | None  # the kernel of every domain but PAIRS (and a BODIES_DOWN pass alone)
    kind_kernels: tuple  # PAIRS: ((kinds, kernel), ...)
    # a tree pass's launch over every body (Pass.alone): always for BODIES_DOWN, for BODIES_UP where
    # the model's subtree sums fit a thread's stack (`kernel` then launches the levels of the others)
    alone_kernel: wp.Kernel | None = None
    # SLOTS_WITH_ROWS: a thread per slot (the function skips those without rows), launched instead
    # of `kernel`'s thread per contact row where a model has fewer slots than contact rows
    slot_kernel: wp.Kernel | None = None


@functools.cache
def _wide_pass(p: Pass, scalar, module_name: str, backward: bool) -> _WidePass:
    """The kernels of pass p (once per module: a pass shared by several segments has one)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    module = kernel_module(scalar, module_name, backward)

    # (a differentiable kernel replays no element function before its adjoint: simrl.sim.no_replay)
    if p.over == PAIRS:
        kernels = tuple((kinds, _wide_kernel(f"{p.name}_{'_'.join(map(str, kinds))}", f,
                                             "ccd_rows" if kinds in p.ccd_rows else "list", scalar, module))
                        for kinds, f in p.kinds)
        return _WidePass(p, None, kernels)
    f = _chain(p.funcs, Model, Data, world=p.over == WORLD)
    if p.over == WORLD:
        # the differentiable step's world kernels beside its hand-written adjoints (coop_module)
        coop = coop_module(scalar, "coop_grad" if module_name.startswith("widegrad") else "coop")
        return _WidePass(p, _wide_kernel(p.name, f, "world", scalar, coop), ())
    if p.over in (BODIES_DOWN, BODIES_UP) and p.alone and not backward:
        alone = _chain(p.alone, Model, Data, world=False)
        if p.over == BODIES_DOWN:
            return _WidePass(p, None, (), _wide_kernel(p.name, alone, "range", scalar, module))
        return _WidePass(p, _wide_kernel(p.name, f, "table", scalar, module), (),
                         _wide_kernel(f"{p.name}_alone", alone, "range", scalar, module))
    if p.over in (BODIES_DOWN, BODIES_UP):
        return _WidePass(p, _wide_kernel(p.name, f, "table", scalar, module), ())
    if p.over == ACTIVE_ROWS:
        return _WidePass(p, _wide_kernel(p.name, f, "active", scalar, module), ())
    if p.over in SLOTS_WITH_ROWS:
        return _WidePass(p, _wide_kernel(p.name, f, "slots", scalar, module), (),
                         slot_kernel=_wide_kernel(f"{p.name}_by_slot", f, "range", scalar, module))
    return _WidePass(p, _wide_kernel(p.name, f, "range", scalar, module), ())


def _wide_launches(wp_: _WidePass, model) -> list[Launch]:
    p, s = wp_.p, model.struct
    if p.over == WORLD:
        return [Launch(wp_.kernel, block_dim=LANES)]
    first = 1 if p.skip_world else 0
    count = _host_range(model, BODIES)[1] - first  # none in a model of the world alone, with skip_world
    if wp_.alone_kernel is not None and (p.over == BODIES_DOWN or model.subtree_alone):
        return [Launch(wp_.alone_kernel, (count,), (first,))] if count else []
    if p.over in (BODIES_DOWN, BODIES_UP):
        levels = model.body_levels[1:] if p.skip_world else model.body_levels
        if p.skip_placed_alone:
            levels = model.body_levels[model.body_levels_placed_alone:]
        if p.over == BODIES_UP:
            levels = levels[::-1]
        return [Launch(wp_.kernel, (count,), (s.body_tree, start)) for start, count in levels]
    if p.over == ACTIVE_ROWS:
        return [Launch(wp_.kernel, (model.struct.nefc,))] if model.struct.nefc else []
    if p.over in SLOTS_WITH_ROWS:
        rows = s.nefc - (s.nefc_eq + s.nefc_friction + s.nefc_limit)
        slots = _host_range(model, p.over)[1]
        if not slots or not rows:
            return []
        if slots <= rows:
            return [Launch(wp_.slot_kernel, (slots,), (0,))]
        return [Launch(wp_.kernel, (rows,), (s.nefc - rows,))]
    if p.over == PAIRS:
        # a launch per group of kinds the model has
        # a group's pairs can be anywhere in the list: the convex searches a thread per scratch
        # row, the others LIST_THREADS per world over the list
        threads = min(s.nconmax, LIST_THREADS)
        return [Launch(kernel, (s.nccdmax,), (kinds[0], kinds[-1], 0)) if kinds in p.ccd_rows
                else Launch(kernel, (threads,), (kinds[0], kinds[-1], threads, 0))
                for kinds, kernel in wp_.kind_kernels if any(kind in kinds for kind in model.pair_kinds)]
    start, count = _host_range(model, p.over)
    return [Launch(wp_.kernel, (count,), (start,))] if count else []


class Segment:
    """A segment of passes built for one schedule; `launches(model)` lists what to launch."""

    def __init__(self, name: str, passes: tuple, scalar, schedule: str, module_name: str = "sim",
                 backward: bool = False):
        self.name, self.passes, self.schedule = name, passes, schedule
        if schedule == "fused":
            module = kernel_module(scalar, module_name, backward)
            self._fused = fused_kernel(name, passes, scalar, module)
            #: the Warp modules that hold the segment's kernels
            self.modules = (module,)
        else:
            self._wide = [_wide_pass(p, scalar, f"wide{module_name}", backward) for p in passes]
            coop = coop_module(scalar, "coop_grad" if module_name.startswith("grad") else "coop")
            self.modules = (kernel_module(scalar, f"wide{module_name}", backward), coop)

    def launches(self, model) -> list[Launch]:
        if self.schedule == "fused":
            return [Launch(self._fused)]
        # the plan (launch sizes, the model's index tables) lives with the model it was made for:
        # keyed by id(model) here, a new model could find a collected one's plan under its id
        plans = model.__dict__.setdefault("launch_plans", {})
        if self not in plans:
            plans[self] = [item for wp_ in self._wide for item in _wide_launches(wp_, model)]
        return plans[self]


def coop_module(scalar, name: str = "coop"):
    """The module of the wide schedule's world functions, compiled for blocks of LANES threads
    (kernels without adjoints: the differentiable step writes theirs by hand, in a module of
    its own, `name="coop_grad"`, so that the step's is not built again when a process takes
    gradients too: forward._module)."""
    module = kernel_module(scalar, name)
    module.options["block_dim"] = LANES
    return module


@functools.cache
def segment(name: str, passes: tuple, scalar, schedule: str, module_name: str = "sim", backward: bool = False):
    """The Segment `passes` built for `schedule` ('fused' or 'wide'), once per process."""
    return Segment(name, passes, scalar, schedule, module_name, backward)
