"""Reading a compiled MuJoCo model into Warp arrays, and refusing what the engine lacks.

MuJoCo's compiler is the single source of truth: defaults, degrees vs radians, inertial
frames and `<default>` classes are all resolved by `mujoco.MjModel`; this file only copies
the compiled fields. Model parameters that domain randomization may touch carry a leading
world axis of size 1 (shared) that can be replaced by one of size num_worlds; kernels read
them at `worldid % shape[0]`.
"""


import functools

import mujoco
import numpy as np
import warp as wp

from simrl.errors import UnsupportedFeatureError
from simrl.sim.collision_driver import candidate_geom_pairs
from simrl.sim.types import JNT_HINGE, JNT_SLIDE, scalar_types

DSBL = mujoco.mjtDisableBit
ENBL = mujoco.mjtEnableBit

INTEGRATOR_EULER = int(mujoco.mjtIntegrator.mjINT_EULER)
INTEGRATOR_RK4 = int(mujoco.mjtIntegrator.mjINT_RK4)

GAIN_FIXED = int(mujoco.mjtGain.mjGAIN_FIXED)
GAIN_AFFINE = int(mujoco.mjtGain.mjGAIN_AFFINE)
BIAS_NONE = int(mujoco.mjtBias.mjBIAS_NONE)
BIAS_AFFINE = int(mujoco.mjtBias.mjBIAS_AFFINE)


@functools.cache
def model_struct(scalar):
    """The Warp struct type that carries a model of precision `scalar` into kernels."""
    T = scalar_types(scalar)

    @wp.struct
    class Model:
        # sizes
        nbody: int
        njnt: int
        nq: int
        nv: int
        nu: int
        ngeom: int
        nsite: int
        # options
        timestep: scalar
        gravity: T.vec3  # zero when mjDSBL_GRAVITY is set
        enable_spring: int
        enable_damper: int
        enable_actuation: int
        enable_clampctrl: int
        euler_damp: int  # Euler integrates dof damping implicitly (mj_EulerSkip)
        # bodies
        body_parentid: wp.array(dtype=int)
        body_rootid: wp.array(dtype=int)
        body_jntadr: wp.array(dtype=int)
        body_jntnum: wp.array(dtype=int)
        body_dofadr: wp.array(dtype=int)
        body_dofnum: wp.array(dtype=int)
        body_pos: wp.array(dtype=T.vec3)
        body_quat: wp.array(dtype=T.quat)
        body_ipos: wp.array2d(dtype=T.vec3)  # [1 or W, nbody]
        body_iquat: wp.array2d(dtype=T.quat)  # [1 or W, nbody]
        body_mass: wp.array2d(dtype=scalar)  # [1 or W, nbody]
        body_inertia: wp.array2d(dtype=T.vec3)  # [1 or W, nbody]
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
        dof_damping: wp.array2d(dtype=scalar)  # [1 or W, nv]
        dof_armature: wp.array2d(dtype=scalar)  # [1 or W, nv]
        # actuators (joint transmission, one input and one output each)
        actuator_enabled: wp.array(dtype=int)  # 0 when its group is in opt.disableactuator
        actuator_dofadr: wp.array(dtype=int)
        actuator_qposadr: wp.array(dtype=int)
        actuator_gear: wp.array2d(dtype=scalar)  # [1 or W, nu]
        actuator_gaintype: wp.array(dtype=int)
        actuator_gainprm: wp.array2d(dtype=T.vec3)  # [1 or W, nu]
        actuator_biastype: wp.array(dtype=int)
        actuator_biasprm: wp.array2d(dtype=T.vec3)  # [1 or W, nu]
        actuator_ctrllimited: wp.array(dtype=int)
        actuator_ctrlrange: wp.array(dtype=T.vec2)
        actuator_forcelimited: wp.array(dtype=int)
        actuator_forcerange: wp.array(dtype=T.vec2)
        # geoms and sites (placed by kinematics; used by collision and observations)
        geom_bodyid: wp.array(dtype=int)
        geom_pos: wp.array(dtype=T.vec3)
        geom_quat: wp.array(dtype=T.quat)
        site_bodyid: wp.array(dtype=int)
        site_pos: wp.array(dtype=T.vec3)
        site_quat: wp.array(dtype=T.quat)
        # contact parameters of geoms and the candidate geom pairs (read for the collision stage)
        geom_type: wp.array(dtype=int)
        geom_size: wp.array(dtype=T.vec3)
        geom_rbound: wp.array(dtype=scalar)
        geom_condim: wp.array(dtype=int)
        geom_priority: wp.array(dtype=int)
        geom_solmix: wp.array(dtype=scalar)
        geom_friction: wp.array2d(dtype=T.vec3)  # [1 or W, ngeom]
        geom_solref: wp.array(dtype=T.vec2)
        geom_solimp: wp.array(dtype=T.vec5)
        geom_margin: wp.array(dtype=scalar)
        geom_gap: wp.array(dtype=scalar)
        collision_pair: wp.array(dtype=wp.vec3i)  # (geom1, geom2, <pair> id or -1)
        # joint limits and dof friction (read for the constraint stage)
        jnt_limited: wp.array(dtype=int)
        jnt_range: wp.array(dtype=T.vec2)
        jnt_solref: wp.array(dtype=T.vec2)
        jnt_solimp: wp.array(dtype=T.vec5)
        jnt_margin: wp.array(dtype=scalar)
        dof_frictionloss: wp.array2d(dtype=scalar)  # [1 or W, nv]

    return Model


# --------------------------------------------------------------------------------------------
# What the engine supports


def _name(mjm, obj, i) -> str:
    name = mujoco.mj_id2name(mjm, obj, i)
    return f"'{name}'" if name else f"#{i}"


def _disabled(mjm, flag) -> bool:
    return bool(mjm.opt.disableflags & flag)


def unsupported_features(mjm: mujoco.MjModel) -> list[str]:
    """Everything in `mjm` that changes the dynamics and that this engine does not implement.

    Each entry names the MJCF element and attribute (and how to avoid it where possible).
    An empty list means the engine reproduces `mj_step` on this model.
    """
    problems = []
    opt = mjm.opt
    if opt.integrator not in (INTEGRATOR_EULER, INTEGRATOR_RK4):
        name = mujoco.mjtIntegrator(opt.integrator).name.removeprefix("mjINT_")
        problems.append(f"<option integrator='{name.lower()}'>: only Euler and RK4 are supported")
    if opt.density != 0 or opt.viscosity != 0:
        problems.append(f"<option density='{opt.density:g}' viscosity='{opt.viscosity:g}'>: "
                        "fluid forces are not supported (set both to 0)")
    for flag in ("mjENBL_SLEEP", "mjENBL_IPC"):
        if hasattr(ENBL, flag) and opt.enableflags & getattr(ENBL, flag):
            problems.append(f"<option><flag {flag.removeprefix('mjENBL_').lower()}='enable'>: "
                            "not supported")
    if mjm.nplugin:
        problems.append(f"<plugin>: {mjm.nplugin} plugin instance(s) are not supported")
    if mjm.nflex:
        problems.append(f"<flex>/<flexcomp>: {mjm.nflex} flex object(s) are not supported")
    if getattr(mjm, "nplastic", 0):
        problems.append("<joint springyield>: joint plasticity is not supported")

    constraints_on = not _disabled(mjm, DSBL.mjDSBL_CONSTRAINT)
    how = "(disable with <option><flag {}='disable'/>)"
    if constraints_on and mjm.neq and not _disabled(mjm, DSBL.mjDSBL_EQUALITY):
        problems.append(f"<equality>: {mjm.neq} equality constraint(s) are not supported "
                        + how.format("equality"))

    # bodies
    for b in range(1, mjm.nbody):
        if mjm.body_mocapid[b] >= 0:
            problems.append(f"<body mocap='true'> on body {_name(mjm, mujoco.mjtObj.mjOBJ_BODY, b)}: "
                            "mocap bodies are not supported")
        if mjm.body_gravcomp[b] != 0:
            problems.append(f"<body gravcomp> on body {_name(mjm, mujoco.mjtObj.mjOBJ_BODY, b)}: "
                            "gravity compensation is not supported")

    # joints and dofs
    for j in range(mjm.njnt):
        jname = _name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j)
        if np.any(mjm.jnt_stiffnesspoly[j] != 0):
            problems.append(f"<joint stiffnesspoly> on joint {jname}: not supported")
        if getattr(mjm, "jnt_springyield", None) is not None and np.any(mjm.jnt_springyield[j] != 0):
            problems.append(f"<joint springyield> on joint {jname}: not supported")
        if (constraints_on and mjm.jnt_limited[j] and not _disabled(mjm, DSBL.mjDSBL_LIMIT)):
            problems.append(f"<joint limited='true' range> on joint {jname}: joint limits are "
                            "constraints, not implemented yet " + how.format("limit"))
    for i in range(mjm.nv):
        jname = _name(mjm, mujoco.mjtObj.mjOBJ_JOINT, int(mjm.dof_jntid[i]))
        if np.any(mjm.dof_dampingpoly[i] != 0):
            problems.append(f"<joint dampingpoly> on joint {jname}: not supported")
        if (constraints_on and mjm.dof_frictionloss[i] > 0
                and not _disabled(mjm, DSBL.mjDSBL_FRICTIONLOSS)):
            problems.append(f"<joint frictionloss> on joint {jname}: dof friction is a constraint, "
                            "not implemented yet " + how.format("frictionloss"))

    # tendons: accepted only when they have no effect on the dynamics
    for t in range(mjm.ntendon):
        tname = _name(mjm, mujoco.mjtObj.mjOBJ_TENDON, t)
        for attr, active in (
            ("limited", constraints_on and mjm.tendon_limited[t]
             and not _disabled(mjm, DSBL.mjDSBL_LIMIT)),
            ("stiffness", mjm.tendon_stiffness[t] != 0 or np.any(mjm.tendon_stiffnesspoly[t] != 0)),
            ("damping", mjm.tendon_damping[t] != 0 or np.any(mjm.tendon_dampingpoly[t] != 0)),
            ("frictionloss", constraints_on and mjm.tendon_frictionloss[t] > 0
             and not _disabled(mjm, DSBL.mjDSBL_FRICTIONLOSS)),
            ("armature", mjm.tendon_armature[t] != 0),
        ):
            if active:
                problems.append(f"<tendon {attr}> on tendon {tname}: tendons that act on the "
                                "dynamics are not supported")

    # actuators
    trn_joint = int(mujoco.mjtTrn.mjTRN_JOINT)
    dyn_none = int(mujoco.mjtDyn.mjDYN_NONE)
    for a in range(mjm.nu):
        aname = "actuator " + _name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a)
        trn = int(mjm.actuator_trntype[a])
        if trn != trn_joint:
            kind = mujoco.mjtTrn(trn).name.removeprefix("mjTRN_").lower()
            problems.append(f"<actuator> {aname} transmission '{kind}': only joint transmissions "
                            "(joint=...) are supported")
        elif mjm.jnt_type[mjm.actuator_trnid[a, 0]] not in (JNT_HINGE, JNT_SLIDE):
            problems.append(f"<actuator joint> {aname}: actuators on ball or free joints are not "
                            "supported (hinge and slide only)")
        if mjm.actuator_dyntype[a] != dyn_none:
            kind = mujoco.mjtDyn(int(mjm.actuator_dyntype[a])).name.removeprefix("mjDYN_").lower()
            problems.append(f"<actuator dyntype='{kind}'> {aname}: actuator activation dynamics "
                            "(dyntype, timeconst, ...) are not supported")
        if mjm.actuator_gaintype[a] not in (GAIN_FIXED, GAIN_AFFINE):
            kind = mujoco.mjtGain(int(mjm.actuator_gaintype[a])).name.removeprefix("mjGAIN_").lower()
            problems.append(f"<actuator gaintype='{kind}'> {aname}: only fixed and affine gains "
                            "are supported")
        if mjm.actuator_biastype[a] not in (BIAS_NONE, BIAS_AFFINE):
            kind = mujoco.mjtBias(int(mjm.actuator_biastype[a])).name.removeprefix("mjBIAS_").lower()
            problems.append(f"<actuator biastype='{kind}'> {aname}: only none and affine biases "
                            "are supported")
        for attr in ("damping", "armature", "delay"):
            value = getattr(mjm, f"actuator_{attr}", None)
            if value is not None and np.any(np.asarray(value[a]) != 0):
                problems.append(f"<actuator {attr}> {aname}: not supported")
        if hasattr(mjm, "actuator_dampingpoly") and np.any(mjm.actuator_dampingpoly[a] != 0):
            problems.append(f"<actuator dampingpoly> {aname}: not supported")
        if hasattr(mjm, "actuator_ctrlnum") and (mjm.actuator_ctrlnum[a] != 1
                                                 or mjm.actuator_outnum[a] != 1):
            problems.append(f"<actuator> {aname}: actuators with {mjm.actuator_ctrlnum[a]} inputs "
                            f"and {mjm.actuator_outnum[a]} outputs are not supported (1 and 1)")
        if mjm.actuator_plugin[a] >= 0:
            problems.append(f"<actuator plugin> {aname}: not supported")

    # contacts: possible only when neither contact nor constraint is disabled
    if constraints_on and not _disabled(mjm, DSBL.mjDSBL_CONTACT):
        pairs = candidate_geom_pairs(mjm)
        if pairs:
            g1, g2, _ = pairs[0]
            problems.append(
                f"contacts: {len(pairs)} geom pair(s) can collide, e.g. geoms "
                f"{_name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g1)} and "
                f"{_name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g2)} (contype/conaffinity); contacts are "
                "not implemented yet " + how.format("contact"))
    return problems


def check_supported(mjm: mujoco.MjModel) -> None:
    """Raise UnsupportedFeatureError naming every unsupported feature of `mjm`."""
    problems = unsupported_features(mjm)
    if problems:
        lines = "\n  - ".join(problems)
        raise UnsupportedFeatureError(f"the model uses features simrl does not support:\n  - {lines}")


# --------------------------------------------------------------------------------------------
# Copying the compiled model to the device


def _wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    return q[:, [1, 2, 3, 0]]


class Model:
    """A compiled MjModel copied to Warp arrays of one precision on one device.

    `struct` is what kernels receive. Attributes mirror MuJoCo's names.
    """

    def __init__(self, mjm: mujoco.MjModel, device, dtype=wp.float32):
        check_supported(mjm)
        self.mjm = mjm
        self.device = wp.get_device(device)
        self.dtype = dtype
        self.T = scalar_types(dtype)
        T = self.T
        npf = np.float64 if dtype == wp.float64 else np.float32

        def ints(x):
            return wp.array(np.asarray(x, dtype=np.int32).ravel(), dtype=int, device=self.device)

        def arr(x, dt, shape=None):
            a = np.asarray(x, dtype=npf)
            if shape is not None:
                a = a.reshape(shape)
            return wp.array(a, dtype=dt, device=self.device)

        def shared(x, dt, width):
            # randomizable parameter: leading world axis of size 1
            a = np.asarray(x, dtype=npf).reshape((1, -1) if width == 1 else (1, -1, width))
            return wp.array(a, dtype=dt, device=self.device)

        opt = mjm.opt
        flags = int(opt.disableflags)
        m = model_struct(dtype)()
        m.nbody, m.njnt, m.nq, m.nv, m.nu = mjm.nbody, mjm.njnt, mjm.nq, mjm.nv, mjm.nu
        m.ngeom, m.nsite = mjm.ngeom, mjm.nsite
        m.timestep = dtype(opt.timestep)
        gravity = np.zeros(3) if flags & DSBL.mjDSBL_GRAVITY else np.asarray(opt.gravity)
        m.gravity = T.vec3(*[float(g) for g in gravity])
        m.enable_spring = int(not flags & DSBL.mjDSBL_SPRING)
        m.enable_damper = int(not flags & DSBL.mjDSBL_DAMPER)
        m.enable_actuation = int(not flags & DSBL.mjDSBL_ACTUATION)
        m.enable_clampctrl = int(not flags & DSBL.mjDSBL_CLAMPCTRL)
        # mj_EulerSkip integrates damping implicitly unless eulerdamp or damper is disabled;
        # with zero damping that path equals the explicit one, so it is skipped.
        m.euler_damp = int(not flags & DSBL.mjDSBL_EULERDAMP and not flags & DSBL.mjDSBL_DAMPER
                           and bool(np.any(mjm.dof_damping > 0)))

        m.body_parentid = ints(mjm.body_parentid)
        m.body_rootid = ints(mjm.body_rootid)
        m.body_jntadr = ints(mjm.body_jntadr)
        m.body_jntnum = ints(mjm.body_jntnum)
        m.body_dofadr = ints(mjm.body_dofadr)
        m.body_dofnum = ints(mjm.body_dofnum)
        m.body_pos = arr(mjm.body_pos, T.vec3)
        m.body_quat = arr(_wxyz_to_xyzw(mjm.body_quat), T.quat)
        m.body_ipos = shared(mjm.body_ipos, T.vec3, 3)
        m.body_iquat = shared(_wxyz_to_xyzw(mjm.body_iquat), T.quat, 4)
        m.body_mass = shared(mjm.body_mass, dtype, 1)
        m.body_inertia = shared(mjm.body_inertia, T.vec3, 3)

        m.jnt_type = ints(mjm.jnt_type)
        m.jnt_qposadr = ints(mjm.jnt_qposadr)
        m.jnt_dofadr = ints(mjm.jnt_dofadr)
        m.jnt_pos = arr(mjm.jnt_pos, T.vec3)
        m.jnt_axis = arr(mjm.jnt_axis, T.vec3)
        m.jnt_stiffness = shared(mjm.jnt_stiffness, dtype, 1)
        m.jnt_actfrclimited = ints(mjm.jnt_actfrclimited)
        m.jnt_actfrcrange = arr(mjm.jnt_actfrcrange, T.vec2)
        m.qpos0 = arr(mjm.qpos0, dtype)
        m.qpos_spring = shared(mjm.qpos_spring, dtype, 1)

        m.dof_bodyid = ints(mjm.dof_bodyid)
        m.dof_jntid = ints(mjm.dof_jntid)
        m.dof_parentid = ints(mjm.dof_parentid)
        m.dof_damping = shared(mjm.dof_damping, dtype, 1)
        m.dof_armature = shared(mjm.dof_armature, dtype, 1)

        nu = mjm.nu
        trn_jnt = mjm.actuator_trnid[:, 0] if nu else np.zeros(0, np.int32)
        group = mjm.actuator_group
        disabled = [(0 <= g <= 30) and bool(opt.disableactuator & (1 << int(g))) for g in group]
        m.actuator_enabled = ints([0 if d else 1 for d in disabled])
        m.actuator_dofadr = ints(mjm.jnt_dofadr[trn_jnt] if nu else [])
        m.actuator_qposadr = ints(mjm.jnt_qposadr[trn_jnt] if nu else [])
        m.actuator_gear = shared(mjm.actuator_gear[:, 0], dtype, 1)
        m.actuator_gaintype = ints(mjm.actuator_gaintype)
        m.actuator_gainprm = shared(mjm.actuator_gainprm[:, :3], T.vec3, 3)
        m.actuator_biastype = ints(mjm.actuator_biastype)
        m.actuator_biasprm = shared(mjm.actuator_biasprm[:, :3], T.vec3, 3)
        m.actuator_ctrllimited = ints(mjm.actuator_ctrllimited)
        m.actuator_ctrlrange = arr(mjm.actuator_ctrlrange, T.vec2, (-1, 2))
        m.actuator_forcelimited = ints(mjm.actuator_forcelimited)
        m.actuator_forcerange = arr(mjm.actuator_forcerange, T.vec2, (-1, 2))

        m.geom_bodyid = ints(mjm.geom_bodyid)
        m.geom_pos = arr(mjm.geom_pos, T.vec3, (-1, 3))
        m.geom_quat = arr(_wxyz_to_xyzw(mjm.geom_quat), T.quat)
        m.site_bodyid = ints(mjm.site_bodyid)
        m.site_pos = arr(mjm.site_pos, T.vec3, (-1, 3))
        m.site_quat = arr(_wxyz_to_xyzw(mjm.site_quat), T.quat)

        m.geom_type = ints(mjm.geom_type)
        m.geom_size = arr(mjm.geom_size, T.vec3, (-1, 3))
        m.geom_rbound = arr(mjm.geom_rbound, dtype)
        m.geom_condim = ints(mjm.geom_condim)
        m.geom_priority = ints(mjm.geom_priority)
        m.geom_solmix = arr(mjm.geom_solmix, dtype)
        m.geom_friction = shared(mjm.geom_friction, T.vec3, 3)
        m.geom_solref = arr(mjm.geom_solref, T.vec2, (-1, 2))
        m.geom_solimp = arr(mjm.geom_solimp, T.vec5, (-1, 5))
        m.geom_margin = arr(mjm.geom_margin, dtype)
        m.geom_gap = arr(mjm.geom_gap, dtype)
        pairs = np.asarray(candidate_geom_pairs(mjm), dtype=np.int32).reshape(-1, 3)
        m.collision_pair = wp.array(pairs, dtype=wp.vec3i, device=self.device)
        m.jnt_limited = ints(mjm.jnt_limited)
        m.jnt_range = arr(mjm.jnt_range, T.vec2, (-1, 2))
        m.jnt_solref = arr(mjm.jnt_solref, T.vec2, (-1, 2))
        m.jnt_solimp = arr(mjm.jnt_solimp, T.vec5, (-1, 5))
        m.jnt_margin = arr(mjm.jnt_margin, dtype)
        m.dof_frictionloss = shared(mjm.dof_frictionloss, dtype, 1)
        self.struct = m

    # sizes, for convenience
    @property
    def nq(self) -> int:
        return self.mjm.nq

    @property
    def nv(self) -> int:
        return self.mjm.nv

    @property
    def nu(self) -> int:
        return self.mjm.nu

    @property
    def nbody(self) -> int:
        return self.mjm.nbody

    @property
    def integrator(self) -> int:
        return int(self.mjm.opt.integrator)
