"""The Warp structs that carry a model into kernels: `model_struct(scalar)` (MuJoCo's mjModel
fields the engine reads, and the tables simrl.sim.io builds for it) and the element types of its
tables (actuators, tendons, equalities, sensors, site transmissions, contact sensors, far geoms,
meshes, height fields).

Model parameters that domain randomization may touch carry a leading world axis of size 1
(shared) that can be replaced by one of size num_worlds (PER_WORLD_FIELDS); kernels read them at
`worldid % shape[0]`. simrl.sim.io fills these structs from a compiled MjModel.
"""


import functools

import warp as wp

from simrl.sim.by_reference import pass_by_reference
from simrl.sim.types import scalar_types

#: rows of the stack of partial sums of simrl.sim.subtree (a tree deeper than this keeps the wide
#: schedule's launches per level for its subtree sums)
SUBTREE_STACK = 16


# Model arrays with a leading world axis (size 1: shared, or num_worlds: per world), which
# kernels read at `worldid % shape[0]`.
# dof_invweight0 and body_invweight0 are derived from the masses, inertias and armature at
# qpos0 (mj_setConst): `Sim.set_const` recomputes them per world after those change.
PER_WORLD_FIELDS = ("body_ipos", "body_iquat", "body_mass", "body_inertia", "jnt_stiffness", "qpos_spring",
                    "dof_damping", "dof_armature", "dof_frictionloss", "actuator_gear", "actuator_gainprm",
                    "actuator_biasprm", "actuator_forcerange", "cpair_friction", "gravity", "dof_invweight0",
                    "body_invweight0")
#: the per-world fields from which mj_setConst derives dof_invweight0 and body_invweight0
SET_CONST_INPUTS = ("body_mass", "body_inertia", "body_ipos", "body_iquat", "dof_armature")


#: the largest Warp struct, in bytes, that CUDA keeps out of a thread's stack: a Model or Data
#: struct above 8 KB is copied to local memory by every kernel that passes it to a function
#: (sm_90, CUDA 13: a struct just over the limit costs each such kernel tens of KB of stack,
#: spills and every register). Tables of new features are packed into arrays of
#: small structs to stay under it (tests/test_gpu_report.py checks).
STRUCT_LIMIT = 8192


@functools.cache
def tendon_structs(scalar):
    """(Tendon, Wrap, Segment): the element types of the Model's tendon tables."""
    T = scalar_types(scalar)

    @wp.struct
    class Tendon:
        """One tendon (mjModel's tendon_* fields): a fixed tendon's joint terms
        wrap[wrapadr + k], k < wrapnum; a spatial tendon's segments seg[segadr + k], k < segnum;
        ten_J's columns tendon_colind[t, :nnz]."""
        fixed: int
        wrapadr: int
        wrapnum: int
        segadr: int
        segnum: int
        nnz: int
        stiffness: scalar
        damping: scalar
        armature: scalar
        margin: scalar
        frictionloss: scalar
        length0: scalar
        invweight0: scalar
        lengthspring: T.vec2  # the spring's dead band [lower, upper]
        actfrclimited: int  # 1: the total force of the actuators on it is scaled into actfrcrange
        actfrcrange: T.vec2
        range: T.vec2
        solref_lim: T.vec2
        solimp_lim: T.vec5
        solref_fri: T.vec2
        solimp_fri: T.vec5

    @wp.struct
    class Wrap:
        """A fixed tendon's term coef * q[jnt]."""
        jnt: int
        coef: scalar

    @wp.struct
    class Segment:
        """A spatial tendon's piece from site0 to site1, divided by its pulley's divisor: a straight
        segment (geom -1), or a site-geom-site sequence that wraps around a sphere or cylinder geom
        when the straight line would cross it (mju_wrap), on the side of site `side` (-1: none)."""
        site0: int
        site1: int
        divisor: scalar
        geom: int
        side: int

    return Tendon, Wrap, Segment


@functools.cache
def muscle_struct(scalar):
    """Muscle: a muscle actuator's parameters (MuJoCo's gainprm, biasprm and dynprm of the muscle
    types, and the compiler's lengthrange and acc0)."""
    T = scalar_types(scalar)

    @wp.struct
    class Muscle:
        """mju_muscleGain's prm = gainprm[:9] = (range[2], force, scale, lmin, lmax, vmax, fpmax,
        fvmax); mju_muscleBias's the same layout from biasprm; mju_muscleDynamics's dynprm[:3] =
        (tau_act, tau_deact, smoothing width); the length range and acc0 (the acceleration of
        a unit force at qpos0) that scale them."""
        gain_range: T.vec2
        gain_force: scalar
        gain_scale: scalar
        gain_lmin: scalar
        gain_lmax: scalar
        gain_vmax: scalar
        gain_fvmax: scalar
        bias_range: T.vec2
        bias_force: scalar
        bias_scale: scalar
        bias_lmax: scalar
        bias_fpmax: scalar
        tau_act: scalar
        tau_deact: scalar
        smoothing: scalar
        lengthrange: T.vec2
        acc0: scalar

    return Muscle


@functools.cache
def actuator_struct(scalar):
    """Actuator: the element type of the Model's actuator table."""
    T = scalar_types(scalar)
    Muscle = muscle_struct(scalar)

    @wp.struct
    class Actuator:
        """One actuator: mjModel's actuator_* fields that no world changes (gear, gainprm, biasprm
        and forcerange, which a world may change, are Model arrays of their own, [1 or W, nu]).

        The transmission trntype (mjtTrn) with a joint's dof and qpos addresses (dofadr, qposadr;
        0 for the other kinds) or a tendon's index (tendon; -1 for the other kinds). The
        activation dynamics (mj_fwdActuation, mj_nextActivation): the activation act[actadr] (-1:
        stateless, the force uses ctrl), dyntype, the filters' time constant dynprm[0], the clamp
        of the activation to actrange and actearly (the force uses the next step's activation)."""
        enabled: int  # 0 when its group is in opt.disableactuator
        trntype: int
        tendon: int
        dofadr: int
        qposadr: int
        gaintype: int
        biastype: int
        dyntype: int
        actadr: int
        ctrllimited: int
        forcelimited: int
        actlimited: int
        actearly: int
        # 1: the actuator is rich (Model.rich_actuator): a muscle, or on a force-limited tendon
        rich: int
        # 1: its moment is a row of Data.actuator_moment (Model.actuator_trnsite: site,
        # slider-crank, body, ball and free joint transmissions), else the gear (times ten_J)
        moment_row: int
        ctrlrange: T.vec2
        actrange: T.vec2
        dynprm: scalar  # dynprm[0]
        muscle: Muscle  # read for the muscle gain, bias and dyntype

    return Actuator


@functools.cache
def element_structs(scalar):
    """(Equality, Sensor): the element types of the Model's equality and sensor tables."""
    T = scalar_types(scalar)

    @wp.struct
    class Equality:
        """One equality constraint (connect, weld, joint, tendon, flex; mjtEq type): its first row; the
        bodies (of the sites) and their anchors in the body frames, the frames' orientations
        relative to the bodies (weld: body 1's relpose), torquescale, site semantics; the joints
        or tendons and polycoef of joint and tendon equalities (obj2id -1: no second); a flex
        equality's edges, one a row: Model.flexedge[flexedge_adr + k], k < flexedge_num."""
        type: int
        efc_adr: int
        body1: int
        body2: int
        anchor1: T.vec3
        anchor2: T.vec3
        quat1: T.quat
        quat2: T.quat
        torquescale: scalar
        site: int
        obj1id: int
        obj2id: int
        polycoef: T.vec5
        solref: T.vec2
        solimp: T.vec5
        flexedge_adr: int
        flexedge_num: int

    @wp.struct
    class Sensor:
        """One sensor: MuJoCo's sensor_* fields."""
        type: int
        objtype: int
        objid: int
        reftype: int
        refid: int
        adr: int
        dim: int
        datatype: int
        cutoff: scalar
        intprm: int  # sensor_intprm[0]: a rangefinder's data fields (RayDataField bits)
        # a rangefinder's first scratch column of Data.sensordata (past nsensordata, RAY_SCRATCH
        # of them: simrl.sim.sensor.ray_hfield_sensor's result)
        scratch: int
        # a camprojection's camera (mj_camlight, cam_project): its body, mode (CamLight), target
        # body, cam_pos and cam_quat in the body's frame, cam_pos0 (track) or cam_poscom0
        # (trackcom), cam_mat0, and the focal lengths and resolution in pixels
        cam_body: int
        cam_mode: int
        cam_target: int
        cam_pos: T.vec3
        cam_quat: T.quat
        cam_pos0: T.vec3
        cam_mat0: T.mat33
        cam_focal: T.vec2
        cam_res: T.vec2

    return Equality, Sensor


@functools.cache
def far_struct(scalar):
    """FarGeom: a world geom whose run of pairs the broadphase tests as a whole (Model.far_geom)."""

    @wp.struct
    class FarGeom:
        """World geom `geom` and the largest margin + gap of its pairs in the run."""
        geom: int
        margin: scalar

    return FarGeom


@wp.struct
class MeshInfo:
    """One mesh's convex hull for collisions (mjModel's mesh_* fields of mesh i): vertices
    Model.mesh_vec[vertadr + k], k < vertnum (the geom's frame, float32 as MuJoCo keeps them);
    in Model.mesh_int its hull graph at graphadr (-1: none; mesh_graph's layout), the 27 seeds of
    the hill climb at extadr (mesh_extrema), per hull polygon k < polynum its first vertex's
    address poly_vertadr + k and vertex count poly_vertnum + k (local vertex ids in mesh_int),
    its normal Model.mesh_polynormal[poly_normal + k] (float64, as MuJoCo's mesh_polynormal); per
    vertex v the polygons it is on: count
    mesh_int[vert_mapnum + v] from mesh_int[vert_mapadr + v] (local polygon ids)."""
    vertadr: int
    vertnum: int
    graphadr: int
    extadr: int
    polynum: int
    poly_vertadr: int
    poly_vertnum: int
    poly_normal: int
    vert_mapadr: int
    vert_mapnum: int


@wp.struct
class HFieldInfo:
    """One height field (mjModel's hfield_* fields): nrow x ncol elevations in [0, 1],
    Model.hfield_data[adr + r * ncol + c]; size: radius_x, radius_y, elevation_z, base_z."""
    nrow: int
    ncol: int
    adr: int
    size: wp.vec4d

@functools.cache
def transmission_struct(scalar):
    """The element type of the Model's site transmission table (simrl.sim.actuation)."""
    T = scalar_types(scalar)

    @wp.struct
    class SiteTransmission:
        """A transmission whose moment is a row of Data.actuator_moment (mj_transmission), of type
        trntype (mjtTrn) for its actuator, with the gear [translation, rotation] (gear[0] is read
        from Model.actuator_gear, which a world may change):
        - mjTRN_SITE: its site, its reference site (refsite, -1: none) and the last dof the two
          sites' chains share (common, -1: none; its column and its ancestors' are left out of the
          moment, as mj_transmission does);
        - mjTRN_SLIDERCRANK: the crank site (site), the slider site (refsite) and the rod's
          length (cranklength);
        - mjTRN_JOINT, mjTRN_JOINTINPARENT on a ball or free joint: the joint (jnt);
        - mjTRN_BODY (an adhesion actuator): the body whose contacts give the moment (body)."""
        actuator: int
        trntype: int
        site: int
        refsite: int
        common: int
        jnt: int
        body: int
        cranklength: scalar
        gear: T.vec6

    return SiteTransmission


@functools.cache
def contact_sensor_struct():
    """The element type of the Model's contact sensor table (simrl.sim.sensor)."""

    @wp.struct
    class ContactSensor:
        """One contact sensor: its sensordata range, data fields and reduction (sensor_intprm[0:2]),
        its site (objtype mjOBJ_SITE) and its candidate slots Model.contact_sensor_slot[slot_adr:
        slot_adr + slot_num]."""
        adr: int
        dim: int
        dataspec: int
        reduce: int
        objtype: int
        objid: int
        slot_adr: int
        slot_num: int

    return ContactSensor


@functools.cache
def flexedge_struct(scalar):
    """The element type of the Model's flex edge table (the rows of flex equality constraints)."""
    T = scalar_types(scalar)

    @wp.struct
    class FlexEdge:
        """One non-rigid edge of a flex whose vertices are bodies (mj_flex): its vertices'
        bodies (flex_vertbodyid) and the vertices' offsets in those bodies' frames (flex_vert,
        zero where the flex is centered), its rest length (flexedge_length0) and the diagonal
        approximation of its inverse inertia (flexedge_invweight0)."""
        body1: int
        body2: int
        vert1: T.vec3
        vert2: T.vec3
        length0: scalar
        invweight0: scalar

    return FlexEdge


@functools.cache
def model_struct(scalar):
    """The Warp struct type that carries a model of precision `scalar` into kernels."""
    T = scalar_types(scalar)
    Tendon, Wrap, Segment = tendon_structs(scalar)
    Equality, Sensor = element_structs(scalar)
    FlexEdge = flexedge_struct(scalar)
    FarGeom = far_struct(scalar)
    SiteTransmission = transmission_struct(scalar)
    Actuator = actuator_struct(scalar)

    @wp.struct
    class Model:
        # sizes
        nbody: int
        njnt: int
        nq: int
        nv: int
        nu: int
        na: int  # activations (mjData.act): one per actuator with dyntype integrator, filter or filterexact
        ngeom: int
        nsite: int
        nmocap: int
        # options
        timestep: scalar
        gravity: wp.array(dtype=T.vec3)  # [1 or W]; zero when mjDSBL_GRAVITY is set
        enable_spring: int
        enable_damper: int
        enable_actuation: int
        enable_clampctrl: int
        euler_damp: int  # Euler integrates dof damping implicitly (mj_EulerSkip)
        # 1: the warm start is saved at the end of the step (RK4: the last stage's qacc, as
        # mj_advance), not after each constraint solve
        warmstart_at_end: int
        enable_warmstart: int  # 0 (mjDSBL_WARMSTART): the solver starts from qacc_smooth
        implicitfast: int  # integrator implicitfast: (M - h qDeriv) without RNE's derivative (mj_implicitSkip)
        # implicitfast's standalone free bodies (mj_isFreeBody: one free joint, no children), whose
        # 6x6 block is solved apart with the gyroscopic derivative (mjd_freeMhat): how many, and
        # per joint 1 for their free joints
        free_body_num: int
        jnt_free_body: wp.array(dtype=int)  # [njnt]
        rk4_a: T.vec3  # RK4 tableau (simrl.sim.rk4): A's diagonal and the weights B
        rk4_b: wp.types.vector(4, dtype=scalar)
        # bodies
        body_parentid: wp.array(dtype=int)
        body_rootid: wp.array(dtype=int)
        body_jntadr: wp.array(dtype=int)
        body_jntnum: wp.array(dtype=int)
        body_dofadr: wp.array(dtype=int)
        body_dofnum: wp.array(dtype=int)
        # the tree for the wide schedule: bodies by depth (the world first, then its children,
        # ...; ascending id within a depth), Model.body_levels says where each depth starts;
        # children of body b: body_child[body_child_adr[b] + k], k < body_child_num[b], ascending
        body_tree: wp.array(dtype=int)
        body_child_adr: wp.array(dtype=int)
        body_child_num: wp.array(dtype=int)
        body_child: wp.array(dtype=int)
        # the path from the world to body b, both included (ascending: MuJoCo numbers a parent
        # before its children): body_path[adr + k], k < num, (adr, num) = body_path_adr[b]
        body_path_adr: wp.array(dtype=wp.vec2i)
        body_path: wp.array(dtype=int)
        # (end, depth) of body b: its subtree is the bodies b to end - 1 (MuJoCo numbers bodies depth
        # first); its depth in the tree (the world 0, its children 1, ...). Pairs of ints, as the
        # other (first, count) tables: the Model struct must stay under STRUCT_LIMIT
        body_subtree: wp.array(dtype=wp.vec2i)
        body_pos: wp.array(dtype=T.vec3)
        body_quat: wp.array(dtype=T.quat)
        body_ipos: wp.array2d(dtype=T.vec3)  # [1 or W, nbody]
        body_iquat: wp.array2d(dtype=T.quat)  # [1 or W, nbody]
        body_mass: wp.array2d(dtype=scalar)  # [1 or W, nbody]
        body_inertia: wp.array2d(dtype=T.vec3)  # [1 or W, nbody]
        body_mocapid: wp.array(dtype=int)  # -1, or the body's index into Data.mocap_pos / mocap_quat
        # gravity compensation (mj_gravcomp): the bodies with body_gravcomp != 0 whose Jacobian has a
        # column for dof i, ascending: dof_gravcomp_body[dof_gravcomp_adr[i] + k], k < dof_gravcomp_num[i]
        body_gravcomp: wp.array(dtype=scalar)
        dof_gravcomp_adr: wp.array(dtype=int)
        dof_gravcomp_num: wp.array(dtype=int)
        dof_gravcomp_body: wp.array(dtype=int)
        jnt_actgravcomp: wp.array(dtype=int)  # 1: the joint's gravcomp goes to qfrc_actuator, not qfrc_passive
        enable_gravcomp: int  # mj_passive runs (spring or damper enabled) and some body has gravcomp
        # joints
        jnt_type: wp.array(dtype=int)
        jnt_qposadr: wp.array(dtype=int)
        jnt_dofadr: wp.array(dtype=int)
        jnt_pos: wp.array(dtype=T.vec3)
        jnt_axis: wp.array(dtype=T.vec3)
        jnt_stiffness: wp.array2d(dtype=scalar)  # [1 or W, njnt]
        jnt_actfrclimited: wp.array(dtype=int)
        jnt_actfrcrange: wp.array(dtype=T.vec2)
        qpos0: wp.array(dtype=scalar)
        qpos_spring: wp.array2d(dtype=scalar)  # [1 or W, nq]
        # dofs
        dof_bodyid: wp.array(dtype=int)
        dof_jntid: wp.array(dtype=int)
        dof_parentid: wp.array(dtype=int)
        # ancestor dofs of dof i (nearest first): dof_ancestor[dof_ancestor_adr[i] + k], k < num
        dof_ancestor_adr: wp.array(dtype=int)
        dof_ancestor_num: wp.array(dtype=int)
        dof_ancestor: wp.array(dtype=int)
        dof_damping: wp.array2d(dtype=scalar)  # [1 or W, nv]
        dof_armature: wp.array2d(dtype=scalar)  # [1 or W, nv]
        # actuators (one input and one output each): the constants of each (Actuator), the
        # parameters a world may change
        actuator: wp.array(dtype=Actuator)  # [max(nu, 1)]
        actuator_gear: wp.array2d(dtype=scalar)  # [1 or W, nu]
        actuator_gainprm: wp.array2d(dtype=T.vec3)  # [1 or W, nu]
        actuator_biasprm: wp.array2d(dtype=T.vec3)  # [1 or W, nu]
        actuator_forcerange: wp.array2d(dtype=T.vec2)  # [1 or W, nu]
        # the rich actuators: those with a muscle gain, bias or dyntype and those on a tendon with
        # actuatorfrclimited (Actuator.rich), in ascending order (rich_actuator[k], k < nu_rich; [1]
        # without), whose forces passes of their own compute (simrl.sim.actuation.make_actuator)
        rich_actuator: wp.array(dtype=int)
        nu_rich: int
        # actuators that act on dof i, ascending: dof_actuator[dof_actuator_adr[i] + k], k < num
        dof_actuator_adr: wp.array(dtype=int)
        dof_actuator_num: wp.array(dtype=int)
        dof_actuator: wp.array(dtype=int)
        # geoms and sites (placed by kinematics; used by collision and observations)
        geom_bodyid: wp.array(dtype=int)
        geom_pos: wp.array(dtype=T.vec3)
        geom_quat: wp.array(dtype=T.quat)
        site_bodyid: wp.array(dtype=int)
        site_pos: wp.array(dtype=T.vec3)
        site_quat: wp.array(dtype=T.quat)
        site_type: wp.array(dtype=int)  # the touch sensor's volume
        site_size: wp.array(dtype=T.vec3)
        # geoms: shapes for collision
        geom_type: wp.array(dtype=int)
        geom_size: wp.array(dtype=T.vec3)
        geom_rbound: wp.array(dtype=scalar)
        geom_dataid: wp.array(dtype=int)  # a mesh geom's mesh, a height field geom's field (-1: none)
        hfield_info: wp.array(dtype=HFieldInfo)  # [nhfield]
        hfield_data: wp.array(dtype=wp.float32)  # the fields' elevations (HFieldInfo)
        mesh_info: wp.array(dtype=MeshInfo)  # [nmesh]
        mesh_vec: wp.array(dtype=wp.vec3f)  # the meshes' vertices
        mesh_int: wp.array(dtype=int)  # the meshes' hull graphs and polygon tables (MeshInfo)
        mesh_polynormal: wp.array(dtype=wp.vec3d)  # the hull polygons' normals (MeshInfo)
        # constraint options
        enable_constraint: int  # any constraint row can exist
        enable_refsafe: int  # solref time constants kept >= 2 timesteps
        impratio: scalar
        cone_elliptic: int  # <option cone="elliptic">: a contact's rows are its normal and friction directions
        solver_iterations: int
        solver_tolerance: scalar
        solver_scale: scalar  # 1 / (meaninertia * max(1, nv)), the scale without islands
        solver_ls_iterations: int  # the line search's evaluations (<option ls_iterations>)
        solver_ls_tolerance: scalar  # the line search's tolerance relative to `tolerance` (<option ls_tolerance>)
        # 0 (mjDSBL_ISLAND): one solve over every dof; 1: each island (trees coupled by constraint
        # rows) is solved with its own scale, line search and stopping tests (mj_island)
        enable_island: int
        # candidate contact pairs, fixed at load; each pair the broadphase keeps takes cpair_nslot
        # consecutive contact slots of its world (Data.collision_adr)
        ncpair: int
        cpair_geom: wp.array(dtype=wp.vec2i)  # geom1, geom2 with type1 <= type2
        cpair_kind: wp.array(dtype=int)  # collision function (contact_tables.PAIR_KIND)
        cpair_nslot: wp.array(dtype=int)  # slots of each pair (a height field pair: its prisms, hfield_slots)
        nccdpair: int  # pairs that collide by GJK/EPA (contact_tables.CONVEX_MAX_CONTACTS but plane-mesh)
        cpair_ccd: wp.array(dtype=int)  # >= 0: the pair searches by GJK/EPA (a row of the convex scratch); -1: not
        # the broadphase (simrl.sim.broadphase): the candidate pairs as runs in pair order, (first
        # pair, count, far_geom record or -1); the world geoms whose runs it tests as a whole
        # against one sphere around the moving geoms of their pairs (far_moving)
        nbp_run: int
        bp_run: wp.array(dtype=wp.vec3i)
        # the runs in groups of consecutive runs (first run, count), each group's sphere around its
        # world geoms' bounding spheres grown by their margins (radius < 0: tested run by run)
        nbp_group: int
        bp_group: wp.array(dtype=wp.vec2i)
        bp_group_centre: wp.array(dtype=T.vec3)
        bp_group_radius: wp.array(dtype=scalar)
        nfar_geom: int
        far_geom: wp.array(dtype=FarGeom)
        nfar_moving: int
        far_moving: wp.array(dtype=int)
        # the budget of contact slots per world (Data.contact_*, ccd_contact): the slots of the
        # pairs the broadphase keeps (Data.collision_pair, at most nconmax of them too)
        nconmax: int
        nccdmax: int  # rows of the convex scratch per world: min(nccdpair, nconmax, contact_tables.CCD_ROWS)
        ndetect: int  # pairs of the convex kinds (plane-mesh included): the detection pass runs
        ccd_iterations: int  # opt.ccd_iterations: bound of GJK's and EPA's iterations
        ccd_tolerance: scalar  # opt.ccd_tolerance
        ccd_maxfaces: int  # faces of the EPA polytope (6 ccd_iterations, mjc_ccdSize)
        enable_multiccd: int  # not <flag multiccd="disable">: capsule, cylinder, box, mesh pairs look for more contacts
        ccd_npolygon: int  # P of the face clipping's scratch rows (contact_tables.clip_sizes)
        ccd_ndeg: int  # D
        cpair_condim: wp.array(dtype=int)
        cpair_margin: wp.array(dtype=scalar)
        cpair_gap: wp.array(dtype=scalar)
        cpair_solref: wp.array(dtype=T.vec2)
        cpair_solreffriction: wp.array(dtype=T.vec2)  # the elliptic cone's friction rows; (0, 0): solref
        cpair_solimp: wp.array(dtype=T.vec5)
        cpair_friction: wp.array2d(dtype=T.vec5)  # [1 or W, ncpair]
        cpair_nrow: wp.array(dtype=int)  # constraint rows of one contact of the pair (contact_tables.contact_rows)
        cpair_efc_type: wp.array(dtype=int)  # mjtConstraint of those rows
        # equality constraints (connect, weld, joint, tendon, flex), mjtEq: the bodies (of the sites) and
        # their anchors in the body frames, the frames' orientations relative to the bodies
        # (weld: body 1's relpose), torquescale, the joints and polycoef of joint equalities
        neq: int
        eq: wp.array(dtype=Equality)
        # the edges of the flexes that have an edge equality (dim 1, vertices on bodies), in row
        # order (Equality.flexedge_adr)
        nflexedge: int
        flexedge: wp.array(dtype=FlexEdge)
        # tendons (simrl.sim.tendon, mj_tendon)
        ntendon: int
        tendon_armature_bias: int  # 1: some spatial tendon has armature (mj_tendonBias adds to qfrc_bias)
        # the tendons from tendon_wrap_first, tendon_wrap_num of them, hold every segment that wraps
        # around a geom (simrl.sim.tendon.length_wrap: a pass of its own, none without wrapping); the
        # segments from wrap_seg_first, wrap_seg_num of them, hold every one that wraps (their paths:
        # simrl.sim.tendon.wrap_path, Data.wrap_path)
        tendon_wrap_first: int
        tendon_wrap_num: int
        wrap_seg_first: int
        wrap_seg_num: int
        tendon: wp.array(dtype=Tendon)
        wrap: wp.array(dtype=Wrap)
        tendon_seg: wp.array(dtype=Segment)
        # the only columns in which ten_J[t] can be non-zero, increasing: tendon_colind[t, :nnz]
        tendon_colind: wp.array2d(dtype=int)  # [ntendon, nv]
        # tendons whose columns hold dof i, ascending: dof_tendon[adr + k], (adr, num) = dof_tendon_adr[i]
        dof_tendon_adr: wp.array(dtype=wp.vec2i)
        dof_tendon: wp.array(dtype=int)
        # [nsite_trn]: the transmissions with a moment row, in actuator order (site, slider-crank,
        # ball and free joints), then the bodies' (the last nbody_trn, after the constraint rows)
        actuator_trnsite: wp.array(dtype=SiteTransmission)
        nsite_trn: int  # actuators with a moment row (Data.actuator_moment is [W, nu, nv] if any)
        nbody_trn: int  # of which body transmissions
        # sensors (simrl.sim.sensor), MuJoCo's sensor_* arrays; opt.magnetic
        nsensor: int
        # touch, force and torque sensors, the last nsensor_wrench entries of `sensor` (they
        # read contact forces: a kernel of their own, simrl.sim.sensor `wrench_sensor`)
        nsensor_wrench: int
        # rangefinders, the nsensor_ray entries of `sensor` before the wrench sensors (each casts a
        # ray against the geoms: a kernel of their own, simrl.sim.sensor `ray_sensor`), and the
        # geoms mj_ray can see (visible: alpha > 0), in geom order
        nsensor_ray: int
        nray_geom: int
        ray_geom: wp.array(dtype=int)
        sensor: wp.array(dtype=Sensor)
        # the contact sensors and their candidate slots (candidate pair, slot of the pair, 1: flip
        # the normal), in mjData.contact's order (a pair's slots are found in the world's list of
        # kept pairs: sensor.world_slot)
        ncontact_sensor: int
        contact_sensor: wp.array(dtype=contact_sensor_struct())
        contact_sensor_slot: wp.array(dtype=wp.vec3i)
        magnetic: T.vec3
        # constraint rows: nefc is the row budget of a world (njmax, Data's rows); the first
        # nefc_eq + nefc_friction + nefc_limit rows have fixed places (equality, friction loss,
        # limits), the contacts' rows follow in slot order, placed each evaluation (Data.efc_type,
        # efc_id, efc_sub, efc_cols; constraint.efc_address)
        nefc: int
        nefc_eq: int
        nefc_friction: int
        nefc_limit: int
        efc_type: wp.array(dtype=int)  # [fixed rows] mjtConstraint
        efc_id: wp.array(dtype=int)  # [fixed rows] equality, dof, joint or tendon
        efc_sub: wp.array(dtype=int)  # [fixed rows] limit side (-1 lower, +1 upper, 0 ball); an equality's row
        # column sets: the only columns in which a row of efc_J can be non-zero (the dofs of its
        # joint, or of the dof chains that move a contact's two bodies), increasing:
        # efc_colind[s, :efc_nnz[s]] for set s = Data.efc_cols[w, r] (fixed row r's own set r, a
        # contact row's its pair's, fixed rows + pair)
        efc_nnz: wp.array(dtype=int)  # [fixed rows + ncpair]
        efc_colind: wp.array2d(dtype=int)  # [fixed rows + ncpair, nv]
        efc_colmask: wp.array2d(dtype=int)  # [fixed rows + ncpair, nv], 1 in the columns of efc_colind
        efc_chain: wp.array(dtype=int)  # [fixed rows + ncpair], 1: the columns are one chain of ancestor dofs
        # joint limits and dof friction
        jnt_range: wp.array(dtype=T.vec2)
        jnt_solref: wp.array(dtype=T.vec2)
        jnt_solimp: wp.array(dtype=T.vec5)
        jnt_margin: wp.array(dtype=scalar)
        dof_frictionloss: wp.array2d(dtype=scalar)  # [1 or W, nv]
        dof_solref: wp.array(dtype=T.vec2)
        dof_solimp: wp.array(dtype=T.vec5)
        # inverse inertias at qpos0 (mj_setConst) for the diagonal approximation of A
        dof_invweight0: wp.array2d(dtype=scalar)  # [1 or W, nv]
        body_invweight0: wp.array2d(dtype=T.vec2)  # [1 or W, nbody]: translation, rotation
        body_dofend: wp.array(dtype=int)  # last dof of the chain that moves the body, or -1

    pass_by_reference(Model)  # no 13 KB copy per function call on the CPU
    return Model


def copy_struct(struct, scalar, **replace):
    """A shallow copy of a Model struct of precision `scalar` (the same arrays), with the
    fields in `replace` set to other values."""
    struct_type = model_struct(scalar)
    copy = struct_type()
    for name in struct_type.vars:
        setattr(copy, name, replace.get(name, getattr(struct, name)))
    return copy
