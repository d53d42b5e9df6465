"""Per-world simulation state and intermediate quantities, as Warp arrays [num_worlds, ...].

Names follow mjData. Everything a stage writes lives here, so one step runs with no
allocation and can be captured as a graph.
"""


import functools

import numpy as np
import warp as wp

from simrl.sim.by_reference import pass_by_reference
from simrl.sim.types import scalar_types

#: the most threads a world's block may have (simrl.sim.schedule.LANES): Data.efc_lane_count's width
MAX_LANES = 64

#: Data.solver_scalar's columns: the solver's per-world scalars and line-search points
#: (simrl.sim.solver), then SOLVER_ISLAND for each island (at most one per body); Data.solver_flag's:
#: SOLVER_FLAG_FIXED integers, then 2 for each body (the islands' union-find)
SOLVER_FIXED = 36
SOLVER_ISLAND = 10
SOLVER_FLAG_FIXED = 7

#: Data.overflow's bits: what outgrew its budget in a world's last evaluation (the contact slots of
#: the pairs the broadphase kept, nconmax; the constraint rows, njmax). Data.overflow_need's
#: columns: the pairs the broadphase kept (all of them, those cut included), the slots they needed,
#: the rows needed
OVERFLOW_CONTACTS = 2
OVERFLOW_ROWS = 4
OVERFLOW_NAMES = ("pairs", "contacts", "rows")

#: Data.solver_scalar's column that holds the world's time (one the solver leaves alone: its
#: scalars are columns 0-9 and its line-search points 12-35, simrl.sim.solver asserts it)
TIME = 10
#: scratch columns of Data.sensordata per rangefinder, past the model's nsensordata
#: (simrl.sim.sensor.ray_hfield_sensor: the nearest height field's geom, part and distance)
RAY_SCRATCH = 5
#: Data.nan_world[:, 1]'s bits: the MuJoCo warnings (mjtWarning) a world's last evaluation raised,
#: which simrl models as MuJoCo does and reports (Sim.warnings, Sim.check_overflow)
WARNING_INERTIA = 1
WARNING_MESSAGES = {
    WARNING_INERTIA: "the inertia matrix is too close to singular (mjWARN_INERTIA): a pivot of its factorization "
                     "was below mjMINVAL and was raised to it, as MuJoCo's mj_factorM does; check the model's "
                     "masses, inertias and armature",
}

CCD_SCRATCH = ("ccd_simplex", "ccd_vert", "ccd_face", "ccd_map", "ccd_horizon", "ccd_stack", "ccd_index", "ccd_clip",
               "ccd_clipd", "ccd_cliptag", "ccd_norm", "ccd_normidx")


@functools.cache
def ccd_structs(scalar):
    """(Vertex, Face, Obj) of the convex collision (simrl.sim.collision_gjk, after
    engine_collision_gjk.h), and ConvexContact, what it found for one contact slot."""
    T = scalar_types(scalar)

    @wp.struct
    class Vertex:
        vert: T.vec3  # vert1 - vert2: a point of the Minkowski difference
        vert1: T.vec3  # its support point on geom 1
        vert2: T.vec3  # on geom 2
        index1: int  # the vertex of a box or mesh that vert1 is (-1 for smooth shapes)
        index2: int

    @wp.struct
    class Face:
        verts: wp.vec3i  # vertices of the face in the polytope
        adj: wp.vec3i  # adjacent faces across edges (v1, v2), (v2, v3), (v3, v1)
        v: T.vec3  # the origin projected on the face
        dist2: scalar  # |v|^2
        index: int  # place in the map; -1 not in it, -2 deleted

    @wp.struct
    class Obj:
        type: int  # mjtGeom, or collision_gjk.GEOM_POINT / GEOM_LINE
        pos: T.vec3
        mat: T.mat33
        size: T.vec3
        margin: scalar
        # a mesh (its convex hull): Model.mesh_vec and mesh_int with this mesh's addresses in them,
        # and the row of Data.ccd_index that caches its last support vertex (mjCCDObj's vertindex
        # and meshindex, which decide ties as MuJoCo does)
        vec: wp.array(dtype=wp.vec3f)
        ints: wp.array(dtype=int)
        vertadr: int
        vertnum: int
        graphadr: int  # -1: no hull graph (exhaustive search)
        extadr: int  # mesh_extrema: 27 seeds of the hill climb
        cache: wp.array2d(dtype=int)
        row: int
        col: int  # 0 for geom 1, 2 for geom 2: (vertindex, meshindex)
        # a height field's prism (mjc_ConvexHField): its bottom and top vertices (rows), in the
        # height field's frame
        prism_lo: T.mat33
        prism_hi: T.mat33

    @wp.struct
    class ConvexContact:
        normal: T.vec3  # contact normal, geom 1 -> geom 2
        x1: T.vec3  # witness point on geom 1, in geom 1's frame
        x2: T.vec3  # witness point on geom 2, in geom 2's frame
        pos: T.vec3  # the contact point found (world)
        found: int  # 1: a contact found by the detection pass, 0: none
        # how each witness point moves with the poses (simrl.sim.collision_convex.frames: track):
        # bits 0, 1: geom 1's, geom 2's is a smooth support point; bits 2, 3: a polytope's vertex
        feature: int
        offset1: T.vec3  # witness - track(...) at the poses of detection (world)
        offset2: T.vec3

    return Vertex, Face, Obj, ConvexContact


@functools.cache
def data_struct(scalar):
    """The Warp struct type that carries per-world data of precision `scalar` into kernels."""
    T = scalar_types(scalar)
    # the convex collision's search runs in float64 (simrl.sim.collision_convex)
    Vertex, Face, _, _ = ccd_structs(wp.float64)
    ConvexContact = ccd_structs(scalar)[3]

    @wp.struct
    class Data:
        # state and inputs
        qpos: wp.array2d(dtype=scalar)  # [W, nq]
        qvel: wp.array2d(dtype=scalar)  # [W, nv]
        ctrl: wp.array2d(dtype=scalar)  # [W, nu]
        act: wp.array2d(dtype=scalar)  # [W, na], actuator activations (state, like qpos and qvel)
        qfrc_applied: wp.array2d(dtype=scalar)  # [W, nv]
        # poses of the mocap bodies, set by the user (mjData.mocap_pos, mocap_quat: w, x, y, z)
        mocap_pos: wp.array2d(dtype=T.vec3)  # [W, nmocap]
        mocap_quat: wp.array3d(dtype=scalar)  # [W, nmocap, 4]
        # output of forward
        qacc: wp.array2d(dtype=scalar)  # [W, nv]
        # kinematics
        xpos: wp.array2d(dtype=T.vec3)  # [W, nbody]
        xquat: wp.array2d(dtype=T.quat)
        xmat: wp.array2d(dtype=T.mat33)
        xipos: wp.array2d(dtype=T.vec3)
        ximat: wp.array2d(dtype=T.mat33)
        xanchor: wp.array2d(dtype=T.vec3)  # [W, njnt]
        xaxis: wp.array2d(dtype=T.vec3)
        jnt_xpos: wp.array2d(dtype=T.vec3)  # [W, njnt], body frame after joint j (kinematics)
        jnt_xquat: wp.array2d(dtype=T.quat)
        jnt_qloc: wp.array2d(dtype=T.quat)  # [W, njnt], the joint's rotation in its parent frame
        geom_xpos: wp.array2d(dtype=T.vec3)  # [W, ngeom]
        geom_xmat: wp.array2d(dtype=T.mat33)
        site_xpos: wp.array2d(dtype=T.vec3)  # [W, nsite]
        site_xmat: wp.array2d(dtype=T.mat33)
        # com_pos
        subtree_mass: wp.array2d(dtype=scalar)  # [W, nbody]
        subtree_com: wp.array2d(dtype=T.vec3)
        subtree_mcom: wp.array2d(dtype=T.vec3)  # subtree mass * com, accumulated
        cinert: wp.array2d(dtype=T.vec10)
        cdof: wp.array2d(dtype=T.vec6)  # [W, nv]
        # crb, factor_m
        crb: wp.array2d(dtype=T.vec10)  # [W, nbody]
        qM: wp.array3d(dtype=scalar)  # [W, nv, nv], dense, symmetric
        qLD: wp.array3d(dtype=scalar)  # [W, nv, nv], L'DL factor: D on the diagonal, L below
        # com_vel, rne
        cvel: wp.array2d(dtype=T.vec6)  # [W, nbody]
        cdof_dot: wp.array2d(dtype=T.vec6)  # [W, nv]
        # tendons (mj_tendon): length, velocity, Jacobian; the passive spring and damper forces
        # along each tendon
        ten_length: wp.array2d(dtype=scalar)  # [W, ntendon]
        ten_velocity: wp.array2d(dtype=scalar)
        ten_J: wp.array3d(dtype=scalar)  # [W, ntendon, nv]
        # each wrapping segment's path around its geom (mju_wrap): the arc length (-1: the segment runs
        # straight), the two tangent points in the world frame; [W, Model.wrap_seg_num, 7]
        wrap_path: wp.array3d(dtype=scalar)
        ten_spring: wp.array2d(dtype=scalar)
        ten_damper: wp.array2d(dtype=scalar)
        # implicitfast: d (force along tendon t) / d (its velocity), the tendon damping's and the
        # tendon actuators' (qDeriv's tendon terms are this times ten_J[t]' ten_J[t])
        ten_qderiv: wp.array2d(dtype=scalar)  # [W, ntendon]
        # implicitfast: d actuator_force / d actuator_velocity of the site transmissions' actuators
        # (qDeriv's site terms are this times actuator_moment[a]' actuator_moment[a]) and of the rich
        # actuators (simrl.sim.actuation.rich_limit); [W, 1] without either
        actuator_qderiv: wp.array2d(dtype=scalar)  # [W, nu]
        # the rich actuators' (Model.rich_actuator) force before the limits and its gain's velocity
        # derivative, for their limit pass (simrl.sim.actuation.rich_limit; [W, 1] without); one
        # array, not two: Data and Model travel by value, and a backward kernel's parameters, with
        # their adjoints, are near CUDA's 32 KB (tests/test_kernel_params.py)
        actuator_force_raw: wp.array2d(dtype=T.vec2)  # [W, nu]
        # Euler's implicit damping and implicitfast: qDeriv's diagonal terms (simrl.sim.euler.qderiv_dof)
        dof_qderiv: wp.array2d(dtype=scalar)  # [W, nv]
        # armature ten_Jdot qvel of each spatial tendon (mj_tendonBias; qfrc_bias gains it times ten_J)
        ten_bias: wp.array2d(dtype=scalar)  # [W, ntendon]
        dof_cvel: wp.array2d(dtype=T.vec6)  # [W, nv], body velocity with dofs up to i added
        cacc: wp.array2d(dtype=T.vec6)  # [W, nbody], bias acceleration (no qacc term)
        cfrc_bias: wp.array2d(dtype=T.vec6)  # [W, nbody]
        qfrc_bias: wp.array2d(dtype=scalar)  # [W, nv]
        # passive, actuation
        qfrc_spring: wp.array2d(dtype=scalar)
        qfrc_damper: wp.array2d(dtype=scalar)
        qfrc_gravcomp: wp.array2d(dtype=scalar)
        qfrc_passive: wp.array2d(dtype=scalar)
        # [W], 1: a control of the world is NaN or beyond mjMAXVAL, so every actuator reads 0
        ctrl_bad: wp.array(dtype=int)
        actuator_length: wp.array2d(dtype=scalar)  # [W, nu]
        # the site transmissions' moments (mj_transmission): row a is d actuator_length[a] / d qpos
        # for a site actuator a ([W, 1, 1] when the model has none)
        actuator_moment: wp.array3d(dtype=scalar)  # [W, nu, nv]
        actuator_velocity: wp.array2d(dtype=scalar)
        actuator_force: wp.array2d(dtype=scalar)
        act_dot: wp.array2d(dtype=scalar)  # [W, na], d act / dt (mj_fwdActuation)
        qfrc_actuator_raw: wp.array2d(dtype=scalar)  # [W, nv], before actuatorfrcrange
        qfrc_actuator: wp.array2d(dtype=scalar)  # [W, nv]
        # acceleration
        qfrc_smooth: wp.array2d(dtype=scalar)
        qacc_smooth: wp.array2d(dtype=scalar)
        # collision: the contact slots of a world [W, Model.nconmax]: each pair the broadphase kept
        # takes as many as its collider can make contacts (Model.cpair_nslot), from
        # collision_adr, in the list's order (pair order); the rest are free (contact_pair -1)
        contact_pair: wp.array2d(dtype=int)  # the candidate pair that holds the slot, -1: free
        contact_active: wp.array2d(dtype=int)  # 1: detected (dist < margin + gap)
        contact_dist: wp.array2d(dtype=scalar)
        contact_pos: wp.array2d(dtype=T.vec3)
        contact_frame: wp.array2d(dtype=T.mat33)  # rows: normal (geom1 -> geom2), tangents
        # the fused schedule's list of the slots that have constraint rows, in increasing order (the
        # first contact_nslots[w] of contact_slots[w]), made by constraint.efc_address for the later
        # passes of the same step, which then skip the others (thousands on terrain); the next
        # evaluation's efc_address reads it first: the only slots whose contact_efc_adr is set
        contact_slots: wp.array2d(dtype=int)  # [W, nconmax]
        contact_nslots: wp.array(dtype=int)  # [W]
        # the broadphase (simrl.sim.broadphase): the candidate pairs it kept, in pair order, those
        # whose slots fit Model.nconmax [W, nconmax] (the first ncollision[w]), each one's first
        # contact slot, its number of slots (Model.cpair_nslot; a height field pair's prisms that
        # can touch, at most that) and its index among the kept pairs that search by GJK/EPA (-1:
        # not such a pair); [W, 3 MAX_LANES] each lane's count of kept pairs, of those that search by GJK/EPA,
        # and of their slots (the wide schedule's prefix sums)
        collision_pair: wp.array2d(dtype=int)
        collision_adr: wp.array2d(dtype=int)
        collision_nslot: wp.array2d(dtype=int)
        collision_ccd: wp.array2d(dtype=int)
        ncollision: wp.array(dtype=int)
        bp_lane_count: wp.array2d(dtype=int)
        bp_run_kept: wp.array2d(dtype=int)  # [W, Model.nbp_run]: each run's kept pairs (the lanes' count)
        # convex collision (simrl.sim.collision_convex): what GJK/EPA found per contact slot
        # [W, nconmax] (the slots of the convex pairs; [W, 1] in a model without them), and the
        # search's scratch rows [W * nccdmax, ...] (the simplex and the EPA polytope), which the
        # world's searches take in turn (collision_driver.detect)
        ccd_contact: wp.array2d(dtype=ConvexContact)
        ccd_simplex: wp.array2d(dtype=Vertex)
        ccd_vert: wp.array2d(dtype=Vertex)
        ccd_face: wp.array2d(dtype=Face)
        ccd_map: wp.array2d(dtype=int)
        ccd_horizon: wp.array2d(dtype=wp.vec2i)
        ccd_stack: wp.array2d(dtype=wp.vec3i)
        ccd_index: wp.array2d(dtype=int)  # [W * nccdmax, 4]: each mesh's last support vertex
        # multiccd's face clipping (simrl.sim.collision_multiccd; no columns when the model clips
        # no faces): [W * nccdmax, contact_tables.clip_scratch_widths]
        ccd_clip: wp.array2d(dtype=wp.vec3d)
        ccd_clipd: wp.array2d(dtype=wp.float64)
        ccd_cliptag: wp.array2d(dtype=int)
        ccd_norm: wp.array2d(dtype=wp.vec3d)
        ccd_normidx: wp.array2d(dtype=int)
        # [W, nsensordata] (or [W, 1]), and RAY_SCRATCH columns per rangefinder after those
        sensordata: wp.array2d(dtype=scalar)
        eq_active: wp.array2d(dtype=int)  # [W, neq] (or [W, 1]): 1 where the equality constraint acts
        # constraint rows [W, nefc] (nefc: the row budget, Model.nefc): the fixed rows, then the
        # rows of the slots whose contact is within its margin, in slot order (constraint.efc_address)
        nefc: wp.array(dtype=int)  # [W], rows in use
        contact_efc_adr: wp.array2d(dtype=int)  # [W, nconmax], a slot's first row, -1: none
        efc_type: wp.array2d(dtype=int)  # mjtConstraint
        efc_id: wp.array2d(dtype=int)  # equality, dof, joint, tendon or contact slot
        efc_sub: wp.array2d(dtype=int)  # limit side (-1 lower, +1 upper, 0 ball); the row's index in its constraint
        efc_cols: wp.array2d(dtype=int)  # the row's column set (Model.efc_colind)
        # [W], what outgrew its budget in the last evaluation (types.Overflow bits, 0: none), and
        # [W, 3] how much each would have needed: pairs, contacts, rows
        overflow: wp.array(dtype=int)
        overflow_need: wp.array2d(dtype=int)
        efc_active: wp.array2d(dtype=int)
        efc_nactive: wp.array(dtype=int)  # [W], number of active rows
        efc_list: wp.array2d(dtype=int)  # [W, nefc], the active rows, increasing, first efc_nactive
        # [W, MAX_LANES]: the active rows each lane of a world's block found in its share of the
        # rows and slots (the wide schedule's constraint_list: a prefix sum gives each its place)
        efc_lane_count: wp.array2d(dtype=int)
        efc_J: wp.array3d(dtype=scalar)  # [W, nefc, nv]
        efc_pos: wp.array2d(dtype=scalar)
        efc_margin: wp.array2d(dtype=scalar)
        efc_frictionloss: wp.array2d(dtype=scalar)
        efc_R: wp.array2d(dtype=scalar)
        efc_D: wp.array2d(dtype=scalar)
        efc_K: wp.array2d(dtype=scalar)
        efc_B: wp.array2d(dtype=scalar)
        efc_imp: wp.array2d(dtype=scalar)
        efc_vel: wp.array2d(dtype=scalar)
        efc_aref: wp.array2d(dtype=scalar)
        efc_force: wp.array2d(dtype=scalar)
        efc_jar: wp.array2d(dtype=scalar)  # solver: J qacc - aref
        efc_jv: wp.array2d(dtype=scalar)  # solver: J search
        efc_cost: wp.array2d(dtype=scalar)  # solver: the row's cost at jar
        efc_dds: wp.array2d(dtype=scalar)  # solver: the row's second derivative at jar
        efc_ls1: wp.array2d(dtype=scalar)  # solver: per-row terms of the line search's sums
        efc_ls2: wp.array2d(dtype=scalar)
        efc_ls3: wp.array2d(dtype=scalar)
        # elliptic cones: the contact's regularized-cone mu on its normal row, friction[j - 1] on
        # its friction row j (mj_makeImpedance, contact.mu / contact.friction); [W, 1] in the pyramidal cone
        efc_mu: wp.array2d(dtype=scalar)
        # solver: the cone Hessian of a contact in the middle zone, row r's entries against the
        # contact's rows (contact.H); [W, nefc, 6] in the elliptic cone, else [W, 1, 1]
        efc_hcone: wp.array3d(dtype=scalar)
        # line search: a contact's cost along the search as quadratic coefficients (its rows 0-2,
        # `solver.elliptic_cone`); [W, nefc, 4] in the elliptic cone, else [W, 1, 1]
        efc_quad: wp.array3d(dtype=scalar)
        qfrc_constraint: wp.array2d(dtype=scalar)  # [W, nv]
        # solver
        qacc_warmstart: wp.array2d(dtype=scalar)  # [W, nv]
        solver_niter: wp.array(dtype=int)  # [W]
        solver_H: wp.array3d(dtype=scalar)  # [W, nv, nv], Cholesky factor of the Hessian
        solver_grad: wp.array2d(dtype=scalar)
        solver_search: wp.array2d(dtype=scalar)
        solver_res: wp.array2d(dtype=scalar)  # qacc - qacc_smooth
        solver_Mres: wp.array2d(dtype=scalar)
        solver_Msearch: wp.array2d(dtype=scalar)  # M search, from the line search
        # [W, SOLVER_FIXED + SOLVER_ISLAND max(1, nbody)]: per-world scalars (solver.COST, ...) and
        # the line search's points, then each island's (solver.ISL_SCALE, ...); at column TIME the
        # world's simulation time (mjData.time, advanced by each step): not an array of its own, as a
        # Data of more than 8,192 bytes makes the CUDA compiler copy it to the stack in every kernel
        solver_scalar: wp.array2d(dtype=scalar)
        # [W, SOLVER_FLAG_FIXED + 2 nbody + nv + nefc]: 1 where the Hessian has M's sparsity, the
        # number of islands, the line search's state (solver.FLAG_STATE, ...); for each body that
        # roots a tree its union-find parent and its island (-1: none); each dof's island, each
        # row's
        solver_flag: wp.array2d(dtype=int)
        # [W, 2]: column 0, 1 when the world's state became non-finite; column 1, the WARNING_* bits
        # of its last evaluation (one array: a field more in Data makes the struct, passed by value,
        # too large for the GPU compiler to keep out of the stack)
        nan_world: wp.array2d(dtype=int)
        # [W], 1: the engine's kernels leave the world alone (Sim.forward(worlds=...); 0 otherwise)
        world_skip: wp.array(dtype=int)
        # integrators
        qH: wp.array3d(dtype=scalar)  # [W, nv, nv], factor of M - h*qDeriv (Euler's damping, implicitfast)
        qacc_int: wp.array2d(dtype=scalar)  # [W, nv], acceleration used by Euler and implicitfast
        rk_qpos: wp.array2d(dtype=scalar)  # [W, nq], RK4 start state
        rk_qvel: wp.array2d(dtype=scalar)  # [W, nv]
        rk_k: wp.array2d(dtype=scalar)  # [W, nv], position derivative of the last stage
        rk_dqpos: wp.array2d(dtype=scalar)  # [W, nv], sum of B_i * k_i
        rk_dqvel: wp.array2d(dtype=scalar)  # [W, nv], sum of B_i * qacc_i
        rk_act: wp.array2d(dtype=scalar)  # [W, na], RK4 start activations
        rk_dact: wp.array2d(dtype=scalar)  # [W, na], sum of B_i * act_dot_i

    pass_by_reference(Data)  # no 13 KB copy per function call on the CPU
    return Data


@functools.cache
def set_warning_func(scalar):
    """`f(d, w, bit, on)`: bit `bit` of world w's warnings (Data.nan_world[w, 1]) set when `on`,
    cleared otherwise."""
    Data = data_struct(scalar)

    @wp.func
    def set_warning(d: Data, w: int, bit: int, on: bool):
        """Bit `bit` of Data.nan_world[w, 1] set when `on`, cleared otherwise."""
        bits = d.nan_world[w, 1]
        if (bits & bit) != 0:
            bits = bits - bit
        if on:
            bits = bits + bit
        d.nan_world[w, 1] = bits

    return set_warning


@functools.cache
def record_overflow(scalar):
    """`f(d, w, bit, column, need, budget)`: world w's need for one budget into
    Data.overflow_need[w, column], and that budget's bit of Data.overflow set when the need is
    more than the budget, cleared otherwise (the broadphase's pairs, efc_address's rows)."""
    Data = data_struct(scalar)

    @wp.func
    def record(d: Data, w: int, bit: int, column: int, need: int, budget: int):
        """Data.overflow_need[w, column] and bit `bit` of Data.overflow[w]."""
        d.overflow_need[w, column] = need
        bits = d.overflow[w]
        if (bits & bit) != 0:
            bits = bits - bit
        if need > budget:
            bits = bits + bit
        d.overflow[w] = bits

    return record


def mocap_pose0(model) -> tuple[np.ndarray, np.ndarray]:
    """The mocap bodies' poses at reset (mj_resetData): their body_pos [nmocap, 3] and body_quat
    [nmocap, 4] (w, x, y, z), float64."""
    bodies = model.mocap_body
    mjm = model.mjm
    return (np.asarray(mjm.body_pos[bodies], dtype=np.float64).reshape(-1, 3),
            np.asarray(mjm.body_quat[bodies], dtype=np.float64).reshape(-1, 4))


def available_memory(device) -> int | None:
    """Bytes `device` can still allocate, at most: a GPU's free memory after the device's pending
    frees (a synchronization), plus what Warp's memory pool may hold unused (up to its high-water
    mark less what it uses now); on Linux, for the CPU, the kernel's estimate of available memory
    plus free swap (MemAvailable + SwapFree), or what the process's cgroup (v2) still allows where
    that is less; None where unknown."""
    if device.is_cuda:
        wp.synchronize_device(device)
        free = int(device.free_memory)
        if free and wp.is_mempool_enabled(device):
            free += max(0, wp.get_mempool_used_mem_high(device) - wp.get_mempool_used_mem_current(device))
        return free or None
    try:
        with open("/proc/meminfo") as f:
            info = {line.split(":")[0]: int(line.split()[1]) * 1024 for line in f if line.strip()}
        free = info["MemAvailable"] + info.get("SwapFree", 0)
    except (OSError, KeyError, ValueError, IndexError):
        return None
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            limit = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if limit != "max":
            free = min(free, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(free, 0)


def data_bytes_per_world(model) -> dict[str, int]:
    """Bytes of one world's Data by array name: every Data array has a row per world (or
    nccdmax rows, the convex search's scratch), so W worlds take W times as much. Measured on a
    Data of one world, once per model."""
    if "_data_bytes_per_world" not in model.__dict__:
        d = make_data(model, 1)
        model._data_bytes_per_world = {name: getattr(d, name).capacity for name in data_struct(model.T.scalar).vars}
    return model._data_bytes_per_world


def check_memory(model, num_worlds: int):
    """MemoryError, before anything is allocated, when the Data of `num_worlds` worlds would not
    fit in what the model's device has available (`available_memory`): on a GPU the allocation
    would fail part way, on a CPU the process would be killed by the kernel without a message.
    The error says how much one world takes and how many worlds fit."""
    available = available_memory(model.device)
    if available is None:
        return
    sizes = data_bytes_per_world(model)
    per_world = sum(sizes.values())
    need = num_worlds * per_world
    if need <= available:
        return
    rows = sum(b for name, b in sizes.items() if name.startswith("efc_"))
    slots = sum(b for name, b in sizes.items() if name.startswith("contact_"))
    nefc, ncon = model.struct.nefc, model.struct.nconmax
    detail = (f", {size_text(rows)} of which are its budget of {nefc:,} constraint rows (njmax) and "
              f"{size_text(slots)} its {ncon:,} contact slots (nconmax): smaller budgets hold fewer "
              f"(their overflow is flagged)") if ncon else ""
    raise MemoryError(
        f"{num_worlds:,} worlds of this model need {size_text(need)} for the simulation's data "
        f"({size_text(per_world)} per world{detail}), "
        f"but {model.device} has {size_text(available)} available: the data of at most "
        f"{available // per_world:,} worlds fits")


def size_text(n: int) -> str:
    """Bytes in KiB, MiB or GiB, two decimals."""
    for unit, scale in (("GiB", 2**30), ("MiB", 2**20)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n / 2**10:.2f} KiB"


def make_data(model, num_worlds: int, requires_grad: bool = False):
    """Allocate a Data struct for `num_worlds` copies of `model`, at qpos0 and rest (activations
    zero), the mocap bodies at their model poses.
    `requires_grad`: floating-point arrays get gradient buffers (the differentiable step)."""
    T = model.T
    mjm = model.mjm
    device = model.device
    W = num_worlds
    nq, nv, nu, na, nbody, njnt = mjm.nq, mjm.nv, mjm.nu, mjm.na, mjm.nbody, mjm.njnt

    def zeros(shape, dtype=T.scalar):
        grad = requires_grad and dtype is not int
        return wp.zeros(shape, dtype=dtype, device=device, requires_grad=grad)

    d = data_struct(T.scalar)()
    npf = np.float64 if T.scalar == wp.float64 else np.float32
    d.qpos = wp.array(np.tile(np.asarray(mjm.qpos0, dtype=npf), (W, 1)).reshape(W, nq),
                      dtype=T.scalar, device=device)
    d.qvel = zeros((W, nv))
    d.ctrl = zeros((W, nu))
    d.act = zeros((W, na))  # mj_resetData: zero (keyframes are not supported)
    d.qfrc_applied = zeros((W, nv))
    mocap_pos, mocap_quat = mocap_pose0(model)
    d.mocap_pos = wp.array(np.tile(mocap_pos.astype(npf), (W, 1, 1)), dtype=T.vec3, device=device,
                           requires_grad=requires_grad)
    d.mocap_quat = wp.array(np.tile(mocap_quat.astype(npf), (W, 1, 1)), dtype=T.scalar, device=device,
                            requires_grad=requires_grad)
    d.qacc = zeros((W, nv))
    d.xpos = zeros((W, nbody), T.vec3)
    d.xquat = zeros((W, nbody), T.quat)
    d.xmat = zeros((W, nbody), T.mat33)
    d.xipos = zeros((W, nbody), T.vec3)
    d.ximat = zeros((W, nbody), T.mat33)
    d.xanchor = zeros((W, njnt), T.vec3)
    d.xaxis = zeros((W, njnt), T.vec3)
    d.jnt_xpos = zeros((W, njnt), T.vec3)
    d.jnt_xquat = zeros((W, njnt), T.quat)
    d.jnt_qloc = zeros((W, njnt), T.quat)
    d.geom_xpos = zeros((W, mjm.ngeom), T.vec3)
    d.geom_xmat = zeros((W, mjm.ngeom), T.mat33)
    d.site_xpos = zeros((W, mjm.nsite), T.vec3)
    d.site_xmat = zeros((W, mjm.nsite), T.mat33)
    d.subtree_mass = zeros((W, nbody))
    d.subtree_com = zeros((W, nbody), T.vec3)
    d.subtree_mcom = zeros((W, nbody), T.vec3)
    d.cinert = zeros((W, nbody), T.vec10)
    d.cdof = zeros((W, nv), T.vec6)
    d.crb = zeros((W, nbody), T.vec10)
    d.qM = zeros((W, nv, nv))
    d.qLD = zeros((W, nv, nv))
    d.cvel = zeros((W, nbody), T.vec6)
    d.cdof_dot = zeros((W, nv), T.vec6)
    d.dof_cvel = zeros((W, nv), T.vec6)
    d.cacc = zeros((W, nbody), T.vec6)
    d.cfrc_bias = zeros((W, nbody), T.vec6)
    d.qfrc_bias = zeros((W, nv))
    d.qfrc_spring = zeros((W, nv))
    d.qfrc_damper = zeros((W, nv))
    d.qfrc_gravcomp = zeros((W, nv))
    d.qfrc_passive = zeros((W, nv))
    nten = max(1, mjm.ntendon)
    for name in ("ten_length", "ten_velocity", "ten_spring", "ten_damper", "ten_qderiv", "ten_bias"):
        setattr(d, name, zeros((W, nten)))
    d.ten_J = zeros((W, nten, nv))
    d.wrap_path = zeros((W, max(1, model.struct.wrap_seg_num), 7))
    d.actuator_length = zeros((W, nu))
    d.actuator_moment = zeros((W, nu, nv) if model.struct.nsite_trn else (W, 1, 1))
    d.actuator_qderiv = zeros((W, nu if model.struct.nsite_trn or model.struct.nu_rich else 1))
    d.actuator_force_raw = zeros((W, nu if model.struct.nu_rich else 1), T.vec2)
    d.dof_qderiv = zeros((W, nv))
    d.actuator_velocity = zeros((W, nu))
    d.actuator_force = zeros((W, nu))
    d.ctrl_bad = zeros(W, int)
    d.act_dot = zeros((W, na))
    d.qfrc_actuator_raw = zeros((W, nv))
    d.qfrc_actuator = zeros((W, nv))
    d.qfrc_smooth = zeros((W, nv))
    d.qacc_smooth = zeros((W, nv))
    ncon, nefc = max(model.struct.nconmax, 1), model.struct.nefc
    nefc_fixed = model.budgets.nefc_fixed
    d.contact_pair = wp.array(np.full((W, ncon), -1, dtype=np.int32), dtype=int, device=device)
    d.contact_active = zeros((W, ncon), int)
    d.contact_dist = zeros((W, ncon))
    d.contact_pos = zeros((W, ncon), T.vec3)
    d.contact_frame = zeros((W, ncon), T.mat33)
    d.contact_slots = zeros((W, ncon), int)
    d.contact_nslots = zeros(W, int)
    d.collision_pair = zeros((W, ncon), int)
    d.collision_adr = zeros((W, ncon), int)
    d.collision_nslot = zeros((W, ncon), int)
    d.collision_ccd = zeros((W, ncon), int)
    d.ncollision = zeros(W, int)
    d.bp_lane_count = zeros((W, 3 * MAX_LANES), int)
    d.bp_run_kept = zeros((W, max(model.struct.nbp_run, 1)), int)
    # convex collision: no gradients (it finds which points touch; simrl.sim.collision_convex
    # rebuilds the contacts from the poses on the tape)
    Vertex, Face, _, _ = ccd_structs(wp.float64)
    ConvexContact = ccd_structs(T.scalar)[3]
    nverts, nfaces = model.ccd_polytope
    S = W * model.struct.nccdmax
    d.ccd_contact = wp.zeros((W, ncon if model.struct.ndetect else 1), dtype=ConvexContact, device=device)
    d.ccd_simplex = wp.zeros((S, 8), dtype=Vertex, device=device)
    d.ccd_vert = wp.zeros((S, nverts), dtype=Vertex, device=device)
    d.ccd_face = wp.zeros((S, nfaces), dtype=Face, device=device)
    d.ccd_map = wp.zeros((S, nfaces), dtype=int, device=device)
    d.ccd_horizon = wp.zeros((S, nfaces), dtype=wp.vec2i, device=device)
    d.ccd_stack = wp.zeros((S, nfaces), dtype=wp.vec3i, device=device)
    d.ccd_index = wp.zeros((S, 4), dtype=int, device=device)
    clip = model.ccd_clip
    d.ccd_clip = wp.zeros((S, clip["ccd_clip"]), dtype=wp.vec3d, device=device)
    d.ccd_clipd = wp.zeros((S, clip["ccd_clipd"]), dtype=wp.float64, device=device)
    d.ccd_cliptag = wp.zeros((S, clip["ccd_cliptag"]), dtype=int, device=device)
    d.ccd_norm = wp.zeros((S, clip["ccd_norm"]), dtype=wp.vec3d, device=device)
    d.ccd_normidx = wp.zeros((S, clip["ccd_normidx"]), dtype=int, device=device)
    mjm = model.mjm
    d.sensordata = zeros((W, max(1, mjm.nsensordata + RAY_SCRATCH * model.struct.nsensor_ray)))
    d.eq_active = wp.array(np.tile(np.asarray(mjm.eq_active0, dtype=np.int32).reshape(1, -1), (W, 1))
                           if mjm.neq else np.zeros((W, 1), dtype=np.int32), dtype=int, device=model.device)
    d.nefc = wp.array(np.full(W, nefc_fixed, dtype=np.int32), dtype=int, device=device)
    d.contact_efc_adr = wp.array(np.full((W, ncon), -1, dtype=np.int32), dtype=int, device=device)
    for name, fixed in zip(("efc_type", "efc_id", "efc_sub"), model.efc_fixed, strict=True):
        rows = np.zeros((W, nefc), dtype=np.int32)
        rows[:, :nefc_fixed] = fixed
        setattr(d, name, wp.array(rows, dtype=int, device=device))
    cols = np.zeros((W, nefc), dtype=np.int32)
    cols[:, :nefc_fixed] = np.arange(nefc_fixed)
    d.efc_cols = wp.array(cols, dtype=int, device=device)
    d.overflow = zeros(W, int)
    d.overflow_need = zeros((W, 3), int)
    d.efc_active = zeros((W, nefc), int)
    d.efc_nactive = zeros(W, int)
    d.efc_list = zeros((W, nefc), int)
    d.efc_lane_count = zeros((W, MAX_LANES), int)
    d.efc_J = zeros((W, nefc, nv))
    for name in ("efc_pos", "efc_margin", "efc_frictionloss", "efc_R", "efc_D", "efc_K", "efc_B", "efc_imp",
                 "efc_vel", "efc_aref", "efc_force", "efc_jar", "efc_jv", "efc_cost", "efc_dds", "efc_ls1",
                 "efc_ls2", "efc_ls3"):
        setattr(d, name, zeros((W, nefc)))
    elliptic = model.struct.cone_elliptic
    d.efc_mu = zeros((W, nefc if elliptic else 1))
    d.efc_hcone = zeros((W, nefc, 6) if elliptic else (W, 1, 1))
    d.efc_quad = zeros((W, nefc, 4) if elliptic else (W, 1, 1))
    d.qfrc_constraint = zeros((W, nv))
    d.qacc_warmstart = zeros((W, nv))
    d.solver_niter = zeros(W, int)
    d.solver_H = zeros((W, nv, nv))
    for name in ("solver_grad", "solver_search", "solver_res", "solver_Mres", "solver_Msearch"):
        setattr(d, name, zeros((W, nv)))
    nbody = model.struct.nbody
    d.solver_scalar = zeros((W, SOLVER_FIXED + SOLVER_ISLAND * max(1, nbody)))
    d.solver_flag = zeros((W, SOLVER_FLAG_FIXED + 2 * max(1, nbody) + nv + nefc), int)
    d.nan_world = zeros((W, 2), int)
    d.world_skip = zeros(W, int)
    d.qH = zeros((W, nv, nv))
    d.qacc_int = zeros((W, nv))
    d.rk_qpos = zeros((W, nq))
    d.rk_qvel = zeros((W, nv))
    d.rk_k = zeros((W, nv))
    d.rk_dqpos = zeros((W, nv))
    d.rk_dqvel = zeros((W, nv))
    d.rk_act = zeros((W, na))
    d.rk_dact = zeros((W, na))
    return d
