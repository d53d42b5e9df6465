"""Scalar types and spatial algebra shared by every stage of the engine.

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
import functools
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

import warp as wp

# MuJoCo's smallest safe divisor (mjMINVAL in mjmodel.h).
MINVAL = 1e-15

# mjtJoint
JNT_FREE = 0
JNT_BALL = 1
JNT_SLIDE = 2
JNT_HINGE = 3


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
        """mju_normalize4: the unit quaternion, or identity when the norm is below mjMINVAL."""
        n = wp.sqrt(q[0] * q[0] + q[1] * q[1] + q[2] * q[2] + q[3] * q[3])
        if n < scalar(MINVAL):
            return quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        return quat(q[0] / n, q[1] / n, q[2] / n, q[3] / n)

    @wp.func
    def axis_angle_quat(axis: vec3, angle: scalar):
        """mju_axisAngle2Quat; `axis` is a unit vector."""
        if angle == scalar(0.0):
            return quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        s = wp.sin(angle * scalar(0.5))
        return quat(axis[0] * s, axis[1] * s, axis[2] * s, wp.cos(angle * scalar(0.5)))

    @wp.func
    def quat_integrate(q: quat, vel: vec3, dt: scalar):
        """mju_quatIntegrate: rotate q by the body-frame angular velocity `vel` for time dt."""
        n = wp.length(vel)
        axis = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
        if n >= scalar(MINVAL):
            axis = vel / n
        qrot = axis_angle_quat(axis, dt * n)
        return quat_normalize(q) * qrot

    @wp.func
    def quat_to_vel(q: quat):
        """mju_quat2Vel with dt = 1: rotation vector of a unit quaternion, angle in (-pi, pi]."""
        axis = vec3(q[0], q[1], q[2])
        sin_half = wp.length(axis)
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
def build_notice(what: str, device, notice_after: float | None = None):
    """Around the first load (or launch) of Warp kernels (`what`, for the messages) on `device`:
    a build of the engine's takes about a minute on a first run, a load from Warp's cache a
    fraction of a second. When the body has run for `notice_after` seconds (default
    BUILD_NOTICE_SECONDS), a line on stderr says what is happening, and one more, at the end,
    how long it took: no silent minute. Yields a dict whose "seconds" is set at the end."""
    notice_after = BUILD_NOTICE_SECONDS if notice_after is None else notice_after
    lock = threading.Lock()
    state = {"done": False, "said": False, "seconds": None}

    def notice():
        with lock:
            if not state["done"]:
                state["said"] = True
                print(f"simrl: loading {what} for {device}: a first run builds them, about a minute (Warp "
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
    # -O3 instead of Warp's CPU default -O2: ~1.5x faster steps on ant and humanoid for ~50%
    # more compile time (once, then cached)
    module.options["optimization_level"] = 3
    module.options["enable_backward"] = backward
    # not a Warp option: it makes the module's hash (and its cache entry) differ from a build
    # that passed the Model and Data by value (simrl.sim.by_reference)
    module.options["simrl_struct_arguments"] = "by_reference_restrict_kernel_adjoint"
    return module
