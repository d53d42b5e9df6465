"""MuJoCo's enums, scalar types and spatial algebra shared by every stage of the engine.

MuJoCo's enums (mjtJoint, mjtGeom, mjtConstraint, ...) are IntEnum groups with MuJoCo Warp's
names (`JointType.FREE` for mjJNT_FREE), used by kernels and host code alike.

The engine is written once and built for a chosen floating-point type (float32 for
training, float64 for crisp parity and gradient checks). `scalar_types(wp.float64)` returns a
bundle `T` with the vector types and the `wp.func` helpers of that precision; each stage
file builds its kernels from such a bundle.

Float constants inside kernels are written as exact expressions of the scalar type
(`scalar(1.0) / scalar(12.0)`): Warp types a Python float literal as float32, which would
silently round it in the float64 build.

Conventions follow MuJoCo (doc/computation/index.rst, engine_util_spatial.c):
- spatial motion vectors are [angular(3), linear(3)], force vectors [torque(3), force(3)];
- a composite inertia "cinert" is 10 numbers: the 3x3 rotational inertia about the
  reference point as (xx, yy, zz, xy, xz, yz), then mass * (com - reference point), then mass;
- quaternions in qpos and in the MJCF are (w, x, y, z). Warp stores (x, y, z, w); the
  conversion happens only where qpos is read or written (`quat_from_qpos`, `quat_to_qpos`).
"""


import contextlib
import enum
import functools
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import warp as wp

from simrl.sim import initialized_locals, no_replay

#: MuJoCo's smallest safe divisor (mjMINVAL in mjmodel.h)
MINVAL = 1e-15
#: MuJoCo's largest valid value (mjMAXVAL): a control beyond it is bad (mju_isBad)
MAXVAL = 1e10


# --------------------------------------------------------------------------------------------
# MuJoCo's enums (mjmodel.h), one group per enum with MuJoCo Warp's names (mjJNT_FREE is
# JointType.FREE). The values are written out so that kernels and host code share one source
# without importing mujoco here; tests/test_types.py holds each to MuJoCo's own. Kernels compare
# with the members directly (`if jtype == JointType.FREE:`).


class JointType(enum.IntEnum):
    """mjtJoint: the type of a joint (qpos coordinates, dofs)."""

    FREE = 0  # position and orientation (7, 6)
    BALL = 1  # orientation (4, 3)
    SLIDE = 2  # translation along an axis (1, 1)
    HINGE = 3  # rotation about an axis (1, 1)


class GeomType(enum.IntEnum):
    """mjtGeom: the shape of a geom (or of a site's volume)."""

    PLANE = 0
    HFIELD = 1
    SPHERE = 2
    CAPSULE = 3
    ELLIPSOID = 4
    CYLINDER = 5
    BOX = 6
    MESH = 7
    SDF = 8


class ConstraintType(enum.IntEnum):
    """mjtConstraint: the kind of a constraint row (Model.efc_type)."""

    EQUALITY = 0
    FRICTION_DOF = 1
    FRICTION_TENDON = 2
    LIMIT_JOINT = 3
    LIMIT_TENDON = 4
    CONTACT_FRICTIONLESS = 5
    CONTACT_PYRAMIDAL = 6
    CONTACT_ELLIPTIC = 7


class EqType(enum.IntEnum):
    """mjtEq: the kind of an equality constraint."""

    CONNECT = 0
    WELD = 1
    JOINT = 2
    TENDON = 3
    FLEX = 4
    FLEXVERT = 5
    FLEXSTRAIN = 6
    DISTANCE = 7


class TrnType(enum.IntEnum):
    """mjtTrn: an actuator's transmission."""

    JOINT = 0
    JOINTINPARENT = 1
    SLIDERCRANK = 2
    TENDON = 3
    SITE = 4
    BODY = 5
    SO3 = 6


class DynType(enum.IntEnum):
    """mjtDyn: an actuator's activation dynamics."""

    NONE = 0
    INTEGRATOR = 1
    FILTER = 2
    FILTEREXACT = 3
    MUSCLE = 4
    DCMOTOR = 5
    PID = 6
    USER = 7


class GainType(enum.IntEnum):
    """mjtGain: an actuator's gain."""

    FIXED = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3
    SO3 = 4
    PID = 5
    USER = 6


class BiasType(enum.IntEnum):
    """mjtBias: an actuator's bias."""

    NONE = 0
    AFFINE = 1
    MUSCLE = 2
    DCMOTOR = 3
    SO3 = 4
    USER = 5


class WrapType(enum.IntEnum):
    """mjtWrap: an element of a tendon's path."""

    NONE = 0
    JOINT = 1
    PULLEY = 2
    SITE = 3
    SPHERE = 4
    CYLINDER = 5


class IntegratorType(enum.IntEnum):
    """mjtIntegrator: the integrator of <option integrator>."""

    EULER = 0
    RK4 = 1
    IMPLICIT = 2
    IMPLICITFAST = 3
    DISCRETE = 4


#: integrators whose step is one forward pass and mj_advance (mj_Euler, mj_implicit)
EULER_LIKE = (IntegratorType.EULER, IntegratorType.IMPLICITFAST)

#: the tableau of MuJoCo's RK4 (mj_RungeKutta's _RK4A, _RK4B, engine_forward.c): A's diagonal,
#: the weights B (simrl.sim.rk4)
RK4_A = (0.5, 0.5, 1.0)
RK4_B = (1.0 / 6.0, 1.0 / 3.0, 1.0 / 3.0, 1.0 / 6.0)


class ConeType(enum.IntEnum):
    """mjtCone: the friction cone of <option cone>."""

    PYRAMIDAL = 0
    ELLIPTIC = 1


class DisableBit(enum.IntFlag):
    """mjtDisableBit: the bits of <option><flag ... = 'disable'> (opt.disableflags)."""

    CONSTRAINT = 1 << 0
    EQUALITY = 1 << 1
    FRICTIONLOSS = 1 << 2
    LIMIT = 1 << 3
    CONTACT = 1 << 4
    SPRING = 1 << 5
    DAMPER = 1 << 6
    GRAVITY = 1 << 7
    CLAMPCTRL = 1 << 8
    WARMSTART = 1 << 9
    FILTERPARENT = 1 << 10
    ACTUATION = 1 << 11
    REFSAFE = 1 << 12
    SENSOR = 1 << 13
    MIDPHASE = 1 << 14
    EULERDAMP = 1 << 15
    AUTORESET = 1 << 16
    NATIVECCD = 1 << 17
    ISLAND = 1 << 18
    MULTICCD = 1 << 19


class EnableBit(enum.IntFlag):
    """mjtEnableBit: the bits of <option><flag ... = 'enable'> (opt.enableflags)."""

    OVERRIDE = 1 << 0
    ENERGY = 1 << 1
    FWDINV = 1 << 2
    INVDISCRETE = 1 << 3
    SLEEP = 1 << 4
    DIAGEXACT = 1 << 5
    IPC = 1 << 6
    SPECULATIVE = 1 << 7


class ObjType(enum.IntEnum):
    """mjtObj: the kind of a model object (a sensor's objtype, mj_id2name's type)."""

    UNKNOWN = 0
    BODY = 1
    XBODY = 2  # a body's regular frame, not its inertial frame
    JOINT = 3
    DOF = 4
    GEOM = 5
    SITE = 6
    CAMERA = 7
    FLEX = 9
    EQUALITY = 17
    TENDON = 18
    ACTUATOR = 19
    SENSOR = 20


class SensorType(enum.IntEnum):
    """mjtSensor: the sensor types simrl computes, and those it names when it refuses them."""

    TOUCH = 0
    ACCELEROMETER = 1
    VELOCIMETER = 2
    GYRO = 3
    FORCE = 4
    TORQUE = 5
    MAGNETOMETER = 6
    RANGEFINDER = 7
    CAMPROJECTION = 8
    JOINTPOS = 9
    JOINTVEL = 10
    TENDONPOS = 11
    TENDONVEL = 12
    ACTUATORPOS = 13
    ACTUATORVEL = 14
    ACTUATORFRC = 15
    JOINTACTFRC = 16
    TENDONACTFRC = 17
    BALLQUAT = 18
    BALLANGVEL = 19
    JOINTLIMITPOS = 20
    JOINTLIMITVEL = 21
    JOINTLIMITFRC = 22
    TENDONLIMITPOS = 23
    TENDONLIMITVEL = 24
    TENDONLIMITFRC = 25
    FRAMEPOS = 26
    FRAMEQUAT = 27
    FRAMEXAXIS = 28
    FRAMEYAXIS = 29
    FRAMEZAXIS = 30
    FRAMELINVEL = 31
    FRAMEANGVEL = 32
    FRAMELINACC = 33
    FRAMEANGACC = 34
    SUBTREECOM = 35
    SUBTREELINVEL = 36
    SUBTREEANGMOM = 37
    CONTACT = 42
    CLOCK = 45


class DataType(enum.IntEnum):
    """mjtDataType: how a sensor's cutoff applies (mj_sensor's apply_cutoff)."""

    REAL = 0
    POSITIVE = 1
    AXIS = 2
    QUATERNION = 3


class ConDataField(enum.IntEnum):
    """mjtConDataField: the fields of a contact sensor's slot, in their order (bit k of
    sensor_intprm[0] selects field k)."""

    FOUND = 0
    FORCE = 1
    TORQUE = 2
    DIST = 3
    POS = 4
    NORMAL = 5
    TANGENT = 6
    LINVEL = 7
    ANGVEL = 8


class RayDataField(enum.IntEnum):
    """mjtRayDataField: the fields of a rangefinder's values, in their order (bit k of
    sensor_intprm[0] selects field k): dist 1 value, dir, origin, point, normal 3, depth 1."""

    DIST = 0
    DIR = 1
    ORIGIN = 2
    POINT = 3
    NORMAL = 4
    DEPTH = 5


class CamLight(enum.IntEnum):
    """mjtCamLight: how a camera's frame follows its body (mj_camlight)."""

    FIXED = 0
    TRACK = 1
    TRACKCOM = 2
    TARGETBODY = 3
    TARGETBODYCOM = 4


@dataclass(frozen=True)
class ScalarTypes:
    """Warp types and helper functions of one floating-point precision."""

    scalar: Any
    vec2: Any
    vec3: Any
    vec5: Any
    vec6: Any
    vec10: Any
    quat: Any
    mat33: Any
    f: Any  # namespace of wp.func helpers, see _build_funcs

    @property
    def name(self) -> str:
        return self.scalar.__name__


class _Funcs:
    """Namespace of the wp.func helpers of one precision."""


@functools.cache
def scalar_types(scalar) -> ScalarTypes:
    """The type bundle for `scalar` (wp.float32 or wp.float64), built once per precision."""
    if scalar not in (wp.float32, wp.float64):
        raise ValueError(f"dtype must be wp.float32 or wp.float64, got {scalar!r}")
    vec2 = wp.types.vector(2, dtype=scalar)
    vec3 = wp.types.vector(3, dtype=scalar)
    vec5 = wp.types.vector(5, dtype=scalar)
    vec6 = wp.types.vector(6, dtype=scalar)
    vec10 = wp.types.vector(10, dtype=scalar)
    quat = wp.types.quaternion(dtype=scalar)
    mat33 = wp.types.matrix((3, 3), dtype=scalar)
    f = _build_funcs(scalar, vec3, vec6, vec10, quat, mat33)
    return ScalarTypes(scalar, vec2, vec3, vec5, vec6, vec10, quat, mat33, f)


def _build_funcs(scalar, vec3, vec6, vec10, quat, mat33):
    f = _Funcs()

    @wp.func
    def quat_from_qpos(qpos: wp.array2d(dtype=scalar), w: int, adr: int):
        """(w, x, y, z) stored at qpos[w, adr:adr+4] as a Warp quaternion."""
        return quat(qpos[w, adr + 1], qpos[w, adr + 2], qpos[w, adr + 3], qpos[w, adr])

    @wp.func
    def quat_to_qpos(q: quat, qpos: wp.array2d(dtype=scalar), w: int, adr: int):
        qpos[w, adr] = q[3]
        qpos[w, adr + 1] = q[0]
        qpos[w, adr + 2] = q[1]
        qpos[w, adr + 3] = q[2]

    @wp.func
    def quat_normalize(q: quat):
        """mju_normalize4 (engine_util_blas.c) with the installed MuJoCo's bits: the identity when
        the norm is below mjMINVAL, q itself when the norm is within mjMINVAL of 1, else q times
        1 / norm; the squares summed in pairs, (w^2 + x^2) + (y^2 + z^2), as the binary does
        (checked against mujoco.mju_normalize4; Warp stores x, y, z, w)."""
        n = wp.sqrt((q[3] * q[3] + q[0] * q[0]) + (q[1] * q[1] + q[2] * q[2]))
        if n < scalar(MINVAL):
            return quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        if wp.abs(n - scalar(1.0)) <= scalar(MINVAL):
            return q
        inv = scalar(1.0) / n
        return quat(q[0] * inv, q[1] * inv, q[2] * inv, q[3] * inv)

    @wp.func_grad(quat_normalize)
    def adj_quat_normalize(q: quat, adj_ret: quat):
        """The derivative of q / |q| even where the forward pass keeps q (a norm within mjMINVAL
        of 1): the map is a normalization, and finite differences see one; none below mjMINVAL
        (the identity is a constant)."""
        n = wp.sqrt((q[3] * q[3] + q[0] * q[0]) + (q[1] * q[1] + q[2] * q[2]))
        if n >= scalar(MINVAL):
            v = q / n
            wp.adjoint[q] += (adj_ret - v * wp.dot(v, adj_ret)) / n

    @wp.func
    def quat_mul(a: quat, b: quat):
        """mju_mulQuat (engine_util_spatial.c) with the installed MuJoCo's bits: each component's
        four products summed in pairs, first two plus last two of the source's order (checked
        against mujoco.mju_mulQuat; Warp's product sums in another order). Warp's storage x, y,
        z, w."""
        return quat((a[3] * b[0] + a[0] * b[3]) + (a[1] * b[2] - a[2] * b[1]),
                    (a[3] * b[1] - a[0] * b[2]) + (a[1] * b[3] + a[2] * b[0]),
                    (a[3] * b[2] + a[0] * b[1]) + (a[2] * b[3] - a[1] * b[0]),
                    (a[3] * b[3] - a[0] * b[0]) - (a[1] * b[1] + a[2] * b[2]))

    @wp.func
    def quat_to_mat(q: quat):
        """mju_quat2Mat (engine_util_spatial.c) with the installed MuJoCo's bits: the diagonal's
        squares summed in pairs as the binary does (checked against mujoco.mju_quat2Mat); its
        shortcut for the identity gives the same matrix as the general formula, which also keeps
        the derivative there."""
        q00 = q[3] * q[3]
        q01 = q[3] * q[0]
        q02 = q[3] * q[1]
        q03 = q[3] * q[2]
        q11 = q[0] * q[0]
        q12 = q[0] * q[1]
        q13 = q[0] * q[2]
        q22 = q[1] * q[1]
        q23 = q[1] * q[2]
        q33 = q[2] * q[2]
        two = scalar(2.0)
        return mat33((q00 - q22) + (q11 - q33), two * (q12 - q03), two * (q13 + q02),
                     two * (q12 + q03), (q00 + q22) - (q11 + q33), two * (q23 - q01),
                     two * (q13 - q02), two * (q23 + q01), (q00 - q22) - (q11 - q33))

    @wp.func
    def rot_vec_quat(v: vec3, q: quat):
        """mju_rotVecQuat (engine_util_spatial.c, mji_rotVecQuat) with its bits: t = w v + u x v,
        v + 2 u x t for q = (w, u) (the shortcut for the identity gives the same vector)."""
        t = vec3(q[3] * v[0] + q[1] * v[2] - q[2] * v[1],
                 q[3] * v[1] + q[2] * v[0] - q[0] * v[2],
                 q[3] * v[2] + q[0] * v[1] - q[1] * v[0])
        two = scalar(2.0)
        return vec3(v[0] + two * (q[1] * t[2] - q[2] * t[1]),
                    v[1] + two * (q[2] * t[0] - q[0] * t[2]),
                    v[2] + two * (q[0] * t[1] - q[1] * t[0]))

    @wp.func
    def axis_angle_quat(axis: vec3, angle: scalar):
        """mju_axisAngle2Quat; `axis` is a unit vector. At angle 0 the identity, as MuJoCo's
        shortcut, written so that its derivative in the angle is the rotation's, axis / 2 (a
        constant would give a hinge at qpos0 no gradient; 0 + x: +0 where axis x 0 is -0)."""
        if angle == scalar(0.0):
            h = angle * scalar(0.5)
            return quat(scalar(0.0) + axis[0] * h, scalar(0.0) + axis[1] * h, scalar(0.0) + axis[2] * h,
                        scalar(1.0))
        s = wp.sin(angle * scalar(0.5))
        return quat(axis[0] * s, axis[1] * s, axis[2] * s, wp.cos(angle * scalar(0.5)))

    @wp.func
    def quat_integrate(q: quat, vel: vec3, dt: scalar):
        """mju_quatIntegrate: rotate q by the body-frame angular velocity `vel` for time dt. At
        zero velocity the identity, written so that its derivative in the velocity is the
        rotation's, dt / 2 (through the velocity's norm it would be 0: a body at rest would get
        no gradient)."""
        n = wp.length(vel)
        axis = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
        if n >= scalar(MINVAL):
            axis = vel / n
        qrot = axis_angle_quat(axis, dt * n)
        if n == scalar(0.0):
            h = dt * scalar(0.5)
            qrot = quat(scalar(0.0) + vel[0] * h, scalar(0.0) + vel[1] * h, scalar(0.0) + vel[2] * h, scalar(1.0))
        return quat_normalize(q) * qrot

    @wp.func
    def quat_to_vel(q: quat):
        """mju_quat2Vel with dt = 1: rotation vector of a unit quaternion, angle in (-pi, pi]. At
        the identity (vector part exactly 0) the zero vector, written so that its derivative is
        the rotation vector's, 2 / w times the vector part (a constant would give a spring at its
        rest orientation no gradient; 0 + x: +0 where x is -0)."""
        axis = vec3(q[0], q[1], q[2])
        sin_half = wp.length(axis)
        if sin_half == scalar(0.0):
            c = scalar(0.0)
            if q[3] != scalar(0.0):
                c = scalar(2.0) / q[3]
            return vec3(scalar(0.0) + q[0] * c, scalar(0.0) + q[1] * c, scalar(0.0) + q[2] * c)
        if sin_half < scalar(MINVAL):
            return vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        axis = axis / sin_half
        angle = scalar(2.0) * wp.atan2(sin_half, q[3])
        # pi from atan2: a Python float constant would enter the kernel rounded to float32
        pi = wp.atan2(scalar(0.0), scalar(-1.0))
        if angle > pi:
            angle = angle - scalar(2.0) * pi
        return axis * angle

    @wp.func
    def sub_quat(qa: quat, qb: quat):
        """mju_subQuat: the 3D rotation vector v with qb * quat(v) = qa."""
        return quat_to_vel(wp.quat_inverse(qb) * qa)

    @wp.func
    def motion_cross(v: vec6, u: vec6):
        """mju_crossMotion: v x u for spatial motion vectors."""
        w = vec3(v[0], v[1], v[2])
        vl = vec3(v[3], v[4], v[5])
        ua = vec3(u[0], u[1], u[2])
        ul = vec3(u[3], u[4], u[5])
        a = wp.cross(w, ua)
        lin = wp.cross(w, ul) + wp.cross(vl, ua)
        return vec6(a[0], a[1], a[2], lin[0], lin[1], lin[2])

    @wp.func
    def force_cross(v: vec6, fr: vec6):
        """mju_crossForce: v x* f for a motion vector v and a force vector f."""
        w = vec3(v[0], v[1], v[2])
        vl = vec3(v[3], v[4], v[5])
        ft = vec3(fr[0], fr[1], fr[2])
        ff = vec3(fr[3], fr[4], fr[5])
        t = wp.cross(w, ft) + wp.cross(vl, ff)
        fo = wp.cross(w, ff)
        return vec6(t[0], t[1], t[2], fo[0], fo[1], fo[2])

    @wp.func
    def inert_mul(i: vec10, v: vec6):
        """mju_mulInertVec: spatial inertia (10-vector) times motion vector -> force vector."""
        return vec6(
            i[0] * v[0] + i[3] * v[1] + i[4] * v[2] - i[8] * v[4] + i[7] * v[5],
            i[3] * v[0] + i[1] * v[1] + i[5] * v[2] + i[8] * v[3] - i[6] * v[5],
            i[4] * v[0] + i[5] * v[1] + i[2] * v[2] - i[7] * v[3] + i[6] * v[4],
            i[8] * v[1] - i[7] * v[2] + i[9] * v[3],
            i[6] * v[2] - i[8] * v[0] + i[9] * v[4],
            i[7] * v[0] - i[6] * v[1] + i[9] * v[5],
        )

    @wp.func
    def inert_com(inertia: vec3, rot: mat33, dif: vec3, mass: scalar):
        """mju_inertCom: diagonal body inertia, rotated to world by `rot` and shifted by `dif`
        (com minus reference point), as a 10-vector."""
        r = rot * wp.diag(inertia) * wp.transpose(rot)
        return vec10(
            r[0, 0] + mass * (dif[1] * dif[1] + dif[2] * dif[2]),
            r[1, 1] + mass * (dif[0] * dif[0] + dif[2] * dif[2]),
            r[2, 2] + mass * (dif[0] * dif[0] + dif[1] * dif[1]),
            r[0, 1] - mass * dif[0] * dif[1],
            r[0, 2] - mass * dif[0] * dif[2],
            r[1, 2] - mass * dif[1] * dif[2],
            mass * dif[0],
            mass * dif[1],
            mass * dif[2],
            mass,
        )

    @wp.func
    def dof_com(axis: vec3, offset: vec3):
        """mju_dofCom for a rotational dof: [axis, axis x offset]."""
        lin = wp.cross(axis, offset)
        return vec6(axis[0], axis[1], axis[2], lin[0], lin[1], lin[2])

    @wp.func
    def dof_com_slide(axis: vec3):
        return vec6(scalar(0.0), scalar(0.0), scalar(0.0), axis[0], axis[1], axis[2])

    f.quat_from_qpos = quat_from_qpos
    f.quat_to_qpos = quat_to_qpos
    f.quat_normalize = quat_normalize
    f.quat_mul = quat_mul
    f.quat_to_mat = quat_to_mat
    f.rot_vec_quat = rot_vec_quat
    f.axis_angle_quat = axis_angle_quat
    f.quat_integrate = quat_integrate
    f.quat_to_vel = quat_to_vel
    f.sub_quat = sub_quat
    f.motion_cross = motion_cross
    f.force_cross = force_cross
    f.inert_mul = inert_mul
    f.inert_com = inert_com
    f.dof_com = dof_com
    f.dof_com_slide = dof_com_slide
    return f


# --------------------------------------------------------------------------------------------
# Cooperative per-world functions (the wide schedule's dense work, simrl.sim.schedule)
#
# A "world function" f(m, d, w, lane, nlanes) is written once for a block of `nlanes` threads
# that share world w: lane k handles elements k, k + nlanes, ... of each parallel phase, and
# `sync()` separates phases. The fused schedule calls it with lane 0 of 1 (the loops then visit
# every element in order, `sync` compiles to nothing); the wide schedule launches it with
# wp.launch_tiled, one block per world. Per-world scalars that every lane needs (a cost, a step
# length, a convergence flag) go through memory: lane 0 writes, `sync`, every lane reads, so
# control flow is the same in all lanes of a block, as a barrier requires.


@wp.func_native("""
#if defined(__CUDA_ARCH__)
__syncthreads();
#else
WP_TILE_SYNC();
#endif
""")
def block_sync():
    """Barrier for the threads of one block (__syncthreads on CUDA; on the CPU a block has one
    thread, or cooperative fibers when wp.config.enable_cpu_blocks is set)."""
    ...


@wp.func
def no_sync():
    """The fused schedule's barrier: one thread per world, nothing to wait for."""
    pass


#: seconds a load of Warp kernels may take before `build_notice` says that it may be building them
BUILD_NOTICE_SECONDS = 3.0


@contextlib.contextmanager
def build_notice(what: str, device, notice_after: float | None = None, estimate: str = "about a minute"):
    """Around the first load (or launch) of Warp kernels (`what`, for the messages) on `device`:
    a first run builds the engine's kernels, which takes a while (`estimate`, on a CPU core);
    the runs after load them from Warp's cache. When the body has run for `notice_after` seconds
    (default BUILD_NOTICE_SECONDS), a line on stderr says what is happening, and one more, at
    the end, how long it took: no silent minute. Yields a dict whose "seconds" is set at the end."""
    notice_after = BUILD_NOTICE_SECONDS if notice_after is None else notice_after
    lock = threading.Lock()
    state = {"done": False, "said": False, "seconds": None}

    def notice():
        with lock:
            if not state["done"]:
                state["said"] = True
                print(f"simrl: loading {what} for {device}: a first run builds them, {estimate} (Warp "
                      f"caches them in {wp.config.kernel_cache_dir} for the runs after) ...", file=sys.stderr,
                      flush=True)

    timer = threading.Timer(notice_after, notice)
    timer.daemon = True
    start = time.perf_counter()
    timer.start()
    try:
        yield state
    finally:
        with lock:
            state["done"] = True
        timer.cancel()
        state["seconds"] = time.perf_counter() - start
    if state["said"]:
        print(f"simrl: {what} loaded in {state['seconds']:.0f} s", file=sys.stderr, flush=True)


def kernel_module(scalar, name: str = "sim", backward: bool = False):
    """The one Warp module that holds every kernel of the engine in precision `scalar`, so that
    each precision compiles once, into one library. Tools that need other kernels built from
    the engine's functions (`name="profile"`: simrl.sim.profile) get a module of their own, so
    that the engine's library is not rebuilt for them. `backward=True` (the differentiable
    step, simrl.sim.grad) also generates the kernels' adjoints; the engine's own module skips
    them, as generating them doubles its compile time."""
    module = wp.get_module(f"simrl_{name}_{scalar.__name__}")
    # -O3 instead of Warp's CPU default -O2: faster steps for a longer compile (once, then
    # cached)
    module.options["optimization_level"] = 3
    module.options["enable_backward"] = backward
    # not a Warp option: it makes the module's hash (and its cache entry) differ from a build
    # that passed the Model and Data by value (simrl.sim.by_reference)
    module.options["simrl_struct_arguments"] = "by_reference_restrict_kernel_adjoint"
    # (not a Warp option) the CUDA functions declare their locals initialized: none is carried
    # around a loop by an `if` that did not write it (simrl.sim.initialized_locals)
    initialized_locals.install()
    module.options[initialized_locals.OPTION] = True
    if backward:
        # no replay of the functions that return nothing in the adjoints (simrl.sim.no_replay)
        no_replay.install()
        module.options[no_replay.OPTION] = no_replay.SKIPPED
        # (not a Warp option) the adjoints store no field adjoints of m and d (simrl.sim.by_reference)
        module.options["simrl_field_adjoints"] = "not_stored"
    return module
