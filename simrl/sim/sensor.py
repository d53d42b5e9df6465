"""Sensors: `sensordata [W, nsensordata]` as MuJoCo computes it in mj_forward
(engine_sensor.c: mj_sensorPos, mj_sensorVel, mj_sensorAcc; mj_objectVelocity and
mj_objectAcceleration in engine_core_util.c; the accelerations of mj_rnePostConstraint in
engine_core_smooth.c), after the constraint solver, so the values are those of the state the
step started from, as after mj_step.

Element: `sensor(m, d, w, i)` writes sensor i's `sensor_dim` values at `sensor_adr` and applies
its cutoff (real values clipped to +-cutoff, positive ones to at most cutoff). Noise is
metadata MuJoCo does not apply; neither does simrl.

Supported (SUPPORTED below): magnetometer, jointpos, actuatorpos, tendonpos, ballquat, framepos,
framexaxis/yaxis/zaxis, framequat, subtreecom (position stage); velocimeter, gyro, jointvel,
actuatorvel, tendonvel, ballangvel, framelinvel, frameangvel, subtreelinvel, subtreeangmom
(velocity stage); accelerometer, framelinacc, frameangacc, actuatorfrc, jointactfrc,
tendonactfrc (acceleration stage); jointlimitpos/vel/frc and tendonlimitpos/vel/frc (of the
first active limit row of the joint or tendon). Objects: bodies
(inertial and regular frames), geoms, sites. A body's acceleration (MuJoCo's cacc of
mj_rnePostConstraint: -gravity at the world, cdof_dot qvel + cdof qacc added down the tree) is
summed over the dof chain that moves it, so no tree pass is needed.
"""

import functools

import mujoco
import warp as wp

from simrl.sim import ray
from simrl.sim.constraint import CNSTR_LIMIT_JOINT, CNSTR_LIMIT_TENDON, EQ_CONNECT, EQ_WELD
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, scalar_types

S = mujoco.mjtSensor
OBJ_BODY, OBJ_XBODY, OBJ_GEOM, OBJ_SITE = (int(mujoco.mjtObj.mjOBJ_BODY), int(mujoco.mjtObj.mjOBJ_XBODY),
                                           int(mujoco.mjtObj.mjOBJ_GEOM), int(mujoco.mjtObj.mjOBJ_SITE))
(MAGNETOMETER, JOINTPOS, ACTUATORPOS, BALLQUAT, FRAMEPOS, FRAMEXAXIS, FRAMEYAXIS, FRAMEZAXIS, FRAMEQUAT,
 SUBTREECOM, VELOCIMETER, GYRO, JOINTVEL, ACTUATORVEL, BALLANGVEL, FRAMELINVEL, FRAMEANGVEL, ACCELEROMETER,
 FRAMELINACC, FRAMEANGACC, ACTUATORFRC, JOINTACTFRC) = (int(getattr(S, "mjSENS_" + n)) for n in (
    "MAGNETOMETER", "JOINTPOS", "ACTUATORPOS", "BALLQUAT", "FRAMEPOS", "FRAMEXAXIS", "FRAMEYAXIS", "FRAMEZAXIS",
    "FRAMEQUAT", "SUBTREECOM", "VELOCIMETER", "GYRO", "JOINTVEL", "ACTUATORVEL", "BALLANGVEL", "FRAMELINVEL",
    "FRAMEANGVEL", "ACCELEROMETER", "FRAMELINACC", "FRAMEANGACC", "ACTUATORFRC", "JOINTACTFRC"))
SUBTREELINVEL, SUBTREEANGMOM = int(S.mjSENS_SUBTREELINVEL), int(S.mjSENS_SUBTREEANGMOM)
TENDONPOS, TENDONVEL = int(S.mjSENS_TENDONPOS), int(S.mjSENS_TENDONVEL)
TOUCH, FORCE, TORQUE = int(S.mjSENS_TOUCH), int(S.mjSENS_FORCE), int(S.mjSENS_TORQUE)
(TENDONACTFRC, JOINTLIMITPOS, JOINTLIMITVEL, JOINTLIMITFRC, TENDONLIMITPOS, TENDONLIMITVEL,
 TENDONLIMITFRC) = (int(getattr(S, "mjSENS_" + n)) for n in (
    "TENDONACTFRC", "JOINTLIMITPOS", "JOINTLIMITVEL", "JOINTLIMITFRC", "TENDONLIMITPOS", "TENDONLIMITVEL",
    "TENDONLIMITFRC"))
#: the sensor types simrl computes (others are refused by name when the model is loaded)
SUPPORTED = frozenset((MAGNETOMETER, JOINTPOS, ACTUATORPOS, BALLQUAT, FRAMEPOS, FRAMEXAXIS, FRAMEYAXIS, FRAMEZAXIS,
                       FRAMEQUAT, SUBTREECOM, VELOCIMETER, GYRO, JOINTVEL, ACTUATORVEL, BALLANGVEL, FRAMELINVEL,
                       FRAMEANGVEL, ACCELEROMETER, FRAMELINACC, FRAMEANGACC, ACTUATORFRC, JOINTACTFRC,
                       SUBTREELINVEL, SUBTREEANGMOM, TENDONPOS, TENDONVEL, TENDONACTFRC, JOINTLIMITPOS,
                       JOINTLIMITVEL, JOINTLIMITFRC, TENDONLIMITPOS, TENDONLIMITVEL, TENDONLIMITFRC,
                       TOUCH, FORCE, TORQUE))
#: object types a frame sensor can read
FRAME_OBJECTS = frozenset((OBJ_BODY, OBJ_XBODY, OBJ_GEOM, OBJ_SITE))
_FRAME_TYPES = frozenset((FRAMEPOS, FRAMEXAXIS, FRAMEYAXIS, FRAMEZAXIS, FRAMEQUAT, FRAMELINVEL, FRAMEANGVEL,
                          FRAMELINACC, FRAMEANGACC))


def sensor_columns(mjm: mujoco.MjModel, name: str) -> slice:
    """The columns of sensor `name` (its MJCF name) in `sensordata [W, nsensordata]`; KeyError
    listing the model's sensors when it has none of that name."""
    i = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, name)
    if i < 0:
        names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_SENSOR, k) for k in range(mjm.nsensor)]
        raise KeyError(f"no sensor named {name!r}; the model's sensors: {[n for n in names if n] or 'none'}")
    adr = int(mjm.sensor_adr[i])
    return slice(adr, adr + int(mjm.sensor_dim[i]))


def frame_sensor(kind: int) -> bool:
    """The sensor reads an object's frame (objtype / reftype)."""
    return kind in _FRAME_TYPES


DATATYPE_REAL, DATATYPE_POSITIVE = int(mujoco.mjtDataType.mjDATATYPE_REAL), int(mujoco.mjtDataType.mjDATATYPE_POSITIVE)


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, vec6 = T.f, T.vec3, T.vec6
    ray_geom = ray.build(scalar)
    zero3 = vec3(scalar(0.0), scalar(0.0), scalar(0.0))

    @wp.func
    def frame_body(m: Model, objtype: int, objid: int):
        """The body that carries an object's frame."""
        b = objid
        if objtype == OBJ_GEOM:
            b = m.geom_bodyid[objid]
        elif objtype == OBJ_SITE:
            b = m.site_bodyid[objid]
        return b

    @wp.func
    def frame_pos(d: Data, w: int, objtype: int, objid: int):
        """get_xpos_xmat's position: xipos (body), xpos (xbody), geom_xpos, site_xpos."""
        p = d.xpos[w, objid]
        if objtype == OBJ_BODY:
            p = d.xipos[w, objid]
        elif objtype == OBJ_GEOM:
            p = d.geom_xpos[w, objid]
        elif objtype == OBJ_SITE:
            p = d.site_xpos[w, objid]
        return p

    @wp.func
    def frame_mat(d: Data, w: int, objtype: int, objid: int):
        """get_xpos_xmat's orientation: ximat, xmat, geom_xmat, site_xmat."""
        r = d.xmat[w, objid]
        if objtype == OBJ_BODY:
            r = d.ximat[w, objid]
        elif objtype == OBJ_GEOM:
            r = d.geom_xmat[w, objid]
        elif objtype == OBJ_SITE:
            r = d.site_xmat[w, objid]
        return r

    @wp.func
    def frame_quat(m: Model, d: Data, w: int, objtype: int, objid: int):
        """get_xquat: the body's xquat times the object's local quaternion."""
        q = d.xquat[w, objid]
        if objtype == OBJ_BODY:
            q = d.xquat[w, objid] * m.body_iquat[w % m.body_iquat.shape[0], objid]
        elif objtype == OBJ_GEOM:
            q = d.xquat[w, m.geom_bodyid[objid]] * m.geom_quat[objid]
        elif objtype == OBJ_SITE:
            q = d.xquat[w, m.site_bodyid[objid]] * m.site_quat[objid]
        return q

    @wp.func
    def transform_motion(v: vec6, dif: vec3):
        """mju_transformSpatial of a motion vector to a point `dif` away: (ang, lin - dif x ang)."""
        ang = vec3(v[0], v[1], v[2])
        lin = vec3(v[3], v[4], v[5]) - wp.cross(dif, ang)
        return ang, lin

    @wp.func
    def object_velocity(m: Model, d: Data, w: int, objtype: int, objid: int, local: int):
        """mj_objectVelocity: (angular, linear) velocity of the object's frame, in the world
        frame or (local) its own; zero on a body without dofs."""
        b = frame_body(m, objtype, objid)
        ang = zero3
        lin = zero3
        if m.body_dofend[b] >= 0:
            ang, lin = transform_motion(d.cvel[w, b], frame_pos(d, w, objtype, objid)
                                        - d.subtree_com[w, m.body_rootid[b]])
            if local != 0:
                r = frame_mat(d, w, objtype, objid)
                ang = wp.transpose(r) * ang
                lin = wp.transpose(r) * lin
        return ang, lin

    @wp.func
    def body_acceleration(m: Model, d: Data, w: int, b: int):
        """cacc of mj_rnePostConstraint: -gravity, plus cdof_dot qvel + cdof qacc of every dof of
        the chain that moves the body (root first, as the tree recursion adds them)."""
        g = m.gravity[w % m.gravity.shape[0]]
        acc = vec6(scalar(0.0), scalar(0.0), scalar(0.0), -g[0], -g[1], -g[2])
        dof = m.body_dofend[b]
        if dof >= 0:
            adr = m.dof_ancestor_adr[dof]
            n = m.dof_ancestor_num[dof]
            k = int(n)
            while k >= 0:
                i = dof
                if k > 0:
                    i = m.dof_ancestor[adr + k - 1]
                acc = acc + d.cdof_dot[w, i] * d.qvel[w, i] + d.cdof[w, i] * d.qacc[w, i]
                k = k - 1
        return acc

    @wp.func
    def object_acceleration(m: Model, d: Data, w: int, objtype: int, objid: int, local: int):
        """mj_objectAcceleration: (angular, linear) acceleration of the object's frame with the
        rotating frame's correction vel_rot x vel_tran; zero on a body without dofs."""
        b = frame_body(m, objtype, objid)
        ang = zero3
        lin = zero3
        if m.body_dofend[b] >= 0:
            dif = frame_pos(d, w, objtype, objid) - d.subtree_com[w, m.body_rootid[b]]
            ang, lin = transform_motion(body_acceleration(m, d, w, b), dif)
            vang, vlin = transform_motion(d.cvel[w, b], dif)
            if local != 0:
                rt = wp.transpose(frame_mat(d, w, objtype, objid))
                ang = rt * ang
                lin = rt * lin
                vang = rt * vang
                vlin = rt * vlin
            lin = lin + wp.cross(vang, vlin)
        return ang, lin

    @wp.func
    def in_subtree(m: Model, b: int, root: int):
        """Body b is root or one of its descendants."""
        x = b
        while x > root:
            x = m.body_parentid[x]
        return x == root

    @wp.func
    def subtree_momentum(m: Model, d: Data, w: int, root: int, angular: int):
        """mj_subtreeVel for one subtree: its center of mass's linear velocity (sum of m_i v_i
        over its bodies / its mass), or (angular) its angular momentum about its center of mass,
        sum of R_i I_i R_i' w_i + m_i (x_i - c) x (v_i - v_c), which MuJoCo's recursion adds up
        by the parallel-axis theorem."""
        p = zero3
        for i in range(1, m.nbody):
            if in_subtree(m, i, root):
                ang, lin = object_velocity(m, d, w, OBJ_BODY, i, 0)
                p = p + lin * m.body_mass[w % m.body_mass.shape[0], i]
        vc = p / wp.max(scalar(MINVAL), d.subtree_mass[w, root])
        out = vc
        if angular != 0:
            out = zero3
            c = d.subtree_com[w, root]
            for i in range(1, m.nbody):
                if in_subtree(m, i, root):
                    ang, lin = object_velocity(m, d, w, OBJ_BODY, i, 0)
                    r = d.ximat[w, i]
                    local = wp.transpose(r) * ang
                    inertia = m.body_inertia[w % m.body_inertia.shape[0], i]
                    spin = r * vec3(local[0] * inertia[0], local[1] * inertia[1], local[2] * inertia[2])
                    mass = m.body_mass[w % m.body_mass.shape[0], i]
                    out = out + spin + wp.cross(d.xipos[w, i] - c, (lin - vc) * mass)
        return out

    @wp.func
    def write3(d: Data, w: int, adr: int, v: vec3):
        for k in range(3):
            d.sensordata[w, adr + k] = v[k]

    @wp.func
    def write_quat(d: Data, w: int, adr: int, q: T.quat):
        """A quaternion in MuJoCo's order (w, x, y, z)."""
        d.sensordata[w, adr] = q[3]
        for k in range(3):
            d.sensordata[w, adr + 1 + k] = q[k]

    @wp.func
    def limit_value(m: Model, d: Data, w: int, cnstr: int, objid: int, which: int):
        """Of the first active limit row of joint or tendon objid (MuJoCo's order: the lower side
        first): which 0 its distance - margin, 1 its velocity, 2 its force; 0 without one."""
        value = scalar(0.0)
        found = int(0)
        first = m.nefc_eq + m.nefc_friction
        for r in range(first, first + m.nefc_limit):
            if found == 0 and d.efc_active[w, r] != 0 and m.efc_type[r] == cnstr and m.efc_id[r] == objid:
                found = 1
                if which == 0:
                    value = d.efc_pos[w, r] - d.efc_margin[w, r]
                elif which == 1:
                    value = d.efc_vel[w, r]
                else:
                    value = d.efc_force[w, r]
        return value

    @wp.func
    def contact_force(m: Model, d: Data, w: int, c: int):
        """mj_contactForce of contact slot c: (force, torque) in the contact frame, (normal,
        tangent 1, tangent 2) and (torsion, rolling 1, rolling 2); a pyramid's edge forces decoded
        (mju_decodePyramid: the normal their sum, friction k (f_2k - f_2k+1) mu_k)."""
        p = m.contact_pair[c]
        r0 = m.contact_efc_adr[c]
        condim = m.cpair_condim[p]
        fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
        out = vec6()
        if condim == 1:
            out[0] = d.efc_force[w, r0]
        elif m.cone_elliptic != 0:
            for k in range(condim):
                out[k] = d.efc_force[w, r0 + k]
        else:
            for k in range(2 * (condim - 1)):
                out[0] = out[0] + d.efc_force[w, r0 + k]
            for k in range(condim - 1):
                out[k + 1] = (d.efc_force[w, r0 + 2 * k] - d.efc_force[w, r0 + 2 * k + 1]) * fr[k]
        return vec3(out[0], out[1], out[2]), vec3(out[3], out[4], out[5])

    @wp.func
    def body_wrench_ext(m: Model, d: Data, w: int, b: int):
        """cfrc_ext of body b (mj_rnePostConstraint): the (torque, force) of its contacts (minus for
        the contact's first body) and of its connect and weld constraints (plus for the first),
        about the subtree CoM of its tree, world-oriented."""
        com = d.subtree_com[w, m.body_rootid[b]]
        torque = zero3
        force = zero3
        for c in range(m.ncon):
            r0 = m.contact_efc_adr[c]
            if d.efc_active[w, r0] != 0:
                g = m.cpair_geom[m.contact_pair[c]]
                b1 = m.geom_bodyid[g[0]]
                b2 = m.geom_bodyid[g[1]]
                if b1 == b or b2 == b:
                    lf, lt = contact_force(m, d, w, c)
                    frame = d.contact_frame[w, c]
                    fw = wp.transpose(frame) * lf
                    tw = wp.transpose(frame) * lt - wp.cross(com - d.contact_pos[w, c], fw)
                    if b1 == b:
                        torque = torque - tw
                        force = force - fw
                    if b2 == b:
                        torque = torque + tw
                        force = force + fw
        for e in range(m.neq):
            kind = m.eq[e].type
            if m.nefc_eq > 0 and (kind == EQ_CONNECT or kind == EQ_WELD) and d.eq_active[w, e] != 0:
                r0 = m.eq[e].efc_adr
                if d.efc_active[w, r0] != 0:
                    fw = vec3(d.efc_force[w, r0], d.efc_force[w, r0 + 1], d.efc_force[w, r0 + 2])
                    tw = zero3
                    if kind == EQ_WELD:
                        tw = vec3(d.efc_force[w, r0 + 3], d.efc_force[w, r0 + 4], d.efc_force[w, r0 + 5])
                    b1 = m.eq[e].body1
                    b2 = m.eq[e].body2
                    if b1 == b and b1 != 0:
                        pos = d.xpos[w, b1] + d.xmat[w, b1] * m.eq[e].anchor1
                        torque = torque + tw - wp.cross(com - pos, fw)
                        force = force + fw
                    if b2 == b and b2 != 0:
                        pos = d.xpos[w, b2] + d.xmat[w, b2] * m.eq[e].anchor2
                        torque = torque - (tw - wp.cross(com - pos, fw))
                        force = force - fw
        return torque, force

    @wp.func
    def subtree_wrench_int(m: Model, d: Data, w: int, root: int):
        """cfrc_int of body `root` (mj_rnePostConstraint): over the bodies of its subtree,
        cinert cacc + cvel x* (cinert cvel) - cfrc_ext, as (torque, force) about its tree's CoM."""
        total = vec6()
        for i in range(1, m.nbody):
            if in_subtree(m, i, root):
                cinert = d.cinert[w, i]
                cvel = d.cvel[w, i]
                frc = f.inert_mul(cinert, body_acceleration(m, d, w, i)) + \
                    f.force_cross(cvel, f.inert_mul(cinert, cvel))
                t, fo = body_wrench_ext(m, d, w, i)
                total = total + frc - vec6(t[0], t[1], t[2], fo[0], fo[1], fo[2])
        return vec3(total[0], total[1], total[2]), vec3(total[3], total[4], total[5])

    @wp.func
    def touch(m: Model, d: Data, w: int, site: int):
        """The normal forces of the contacts of the site's body whose normal force, as a ray from
        the contact point (pointing into the body), meets the site's volume (mju_rayGeom)."""
        b = m.site_bodyid[site]
        total = scalar(0.0)
        for c in range(m.ncon):
            r0 = m.contact_efc_adr[c]
            if d.efc_active[w, r0] != 0:
                g = m.cpair_geom[m.contact_pair[c]]
                b1 = m.geom_bodyid[g[0]]
                b2 = m.geom_bodyid[g[1]]
                if b1 == b or b2 == b:
                    lf, lt = contact_force(m, d, w, c)
                    if lf[0] > scalar(0.0):
                        frame = d.contact_frame[w, c]
                        # mju_normalize3 of the normal times the force: the unit normal
                        conray = vec3(frame[0, 0], frame[0, 1], frame[0, 2])
                        if b == b2:
                            conray = -conray
                        x = ray_geom(d.site_xpos[w, site], d.site_xmat[w, site], m.site_size[site], m.site_type[site],
                                     d.contact_pos[w, c], conray)
                        if x >= scalar(0.0):
                            total = total + lf[0]
        return total

    @wp.func
    def sensor(m: Model, d: Data, w: int, i: int):
        """Sensor i (mj_computeSensorPos / Vel / Acc, then apply_cutoff)."""
        kind = m.sensor[i].type
        objtype = m.sensor[i].objtype
        objid = m.sensor[i].objid
        reftype = m.sensor[i].reftype
        refid = m.sensor[i].refid
        adr = m.sensor[i].adr
        if kind == MAGNETOMETER:
            write3(d, w, adr, wp.transpose(d.site_xmat[w, objid]) * m.magnetic)
        elif kind == JOINTPOS:
            d.sensordata[w, adr] = d.qpos[w, m.jnt_qposadr[objid]]
        elif kind == ACTUATORPOS:
            d.sensordata[w, adr] = d.actuator_length[w, objid]
        elif kind == TENDONPOS:
            d.sensordata[w, adr] = d.ten_length[w, objid]
        elif kind == TENDONVEL:
            d.sensordata[w, adr] = d.ten_velocity[w, objid]
        elif kind == BALLQUAT:
            write_quat(d, w, adr, f.quat_normalize(f.quat_from_qpos(d.qpos, w, m.jnt_qposadr[objid])))
        elif kind == FRAMEPOS:
            p = frame_pos(d, w, objtype, objid)
            if refid >= 0:
                p = wp.transpose(frame_mat(d, w, reftype, refid)) * (p - frame_pos(d, w, reftype, refid))
            write3(d, w, adr, p)
        elif kind == FRAMEXAXIS or kind == FRAMEYAXIS or kind == FRAMEZAXIS:
            r = frame_mat(d, w, objtype, objid)
            c = kind - FRAMEXAXIS
            axis = vec3(r[0, c], r[1, c], r[2, c])
            if refid >= 0:
                axis = wp.transpose(frame_mat(d, w, reftype, refid)) * axis
            write3(d, w, adr, axis)
        elif kind == FRAMEQUAT:
            q = frame_quat(m, d, w, objtype, objid)
            if refid >= 0:
                q = wp.quat_inverse(frame_quat(m, d, w, reftype, refid)) * q
            write_quat(d, w, adr, q)
        elif kind == SUBTREECOM:
            write3(d, w, adr, d.subtree_com[w, objid])
        elif kind == VELOCIMETER:
            ang, lin = object_velocity(m, d, w, OBJ_SITE, objid, 1)
            write3(d, w, adr, lin)
        elif kind == GYRO:
            ang, lin = object_velocity(m, d, w, OBJ_SITE, objid, 1)
            write3(d, w, adr, ang)
        elif kind == JOINTVEL:
            d.sensordata[w, adr] = d.qvel[w, m.jnt_dofadr[objid]]
        elif kind == ACTUATORVEL:
            d.sensordata[w, adr] = d.actuator_velocity[w, objid]
        elif kind == BALLANGVEL:
            for k in range(3):
                d.sensordata[w, adr + k] = d.qvel[w, m.jnt_dofadr[objid] + k]
        elif kind == FRAMELINVEL or kind == FRAMEANGVEL:
            ang, lin = object_velocity(m, d, w, objtype, objid, 0)
            if refid >= 0:
                rang, rlin = object_velocity(m, d, w, reftype, refid, 0)
                rt = wp.transpose(frame_mat(d, w, reftype, refid))
                rvec = frame_pos(d, w, objtype, objid) - frame_pos(d, w, reftype, refid)
                lin = rt * (lin - rlin + wp.cross(rvec, rang))
                ang = rt * (ang - rang)
            if kind == FRAMELINVEL:
                write3(d, w, adr, lin)
            else:
                write3(d, w, adr, ang)
        elif kind == ACCELEROMETER:
            ang, lin = object_acceleration(m, d, w, OBJ_SITE, objid, 1)
            write3(d, w, adr, lin)
        elif kind == FRAMELINACC or kind == FRAMEANGACC:
            ang, lin = object_acceleration(m, d, w, objtype, objid, 0)
            if kind == FRAMELINACC:
                write3(d, w, adr, lin)
            else:
                write3(d, w, adr, ang)
        elif kind == SUBTREELINVEL:
            write3(d, w, adr, subtree_momentum(m, d, w, objid, 0))
        elif kind == SUBTREEANGMOM:
            write3(d, w, adr, subtree_momentum(m, d, w, objid, 1))
        elif kind == ACTUATORFRC:
            d.sensordata[w, adr] = d.actuator_force[w, objid]
        elif kind == JOINTACTFRC:
            d.sensordata[w, adr] = d.qfrc_actuator[w, m.jnt_dofadr[objid]]
        elif kind == TOUCH:
            d.sensordata[w, adr] = touch(m, d, w, objid)
        elif kind == FORCE or kind == TORQUE:
            # cfrc_int of the site's body moved to the site, in its frame (mju_transformSpatial)
            b = m.site_bodyid[objid]
            t, fo = subtree_wrench_int(m, d, w, b)
            pos = d.site_xpos[w, objid]
            rt = wp.transpose(d.site_xmat[w, objid])
            if kind == FORCE:
                write3(d, w, adr, rt * fo)
            else:
                write3(d, w, adr, rt * (t - wp.cross(pos - d.subtree_com[w, m.body_rootid[b]], fo)))
        elif kind == TENDONACTFRC:
            # the forces of the actuators on the tendon, without their gears
            d.sensordata[w, adr] = scalar(0.0)
            for a in range(m.nu):
                if m.actuator_tendon[a] == objid:
                    d.sensordata[w, adr] += d.actuator_force[w, a]
        elif kind == JOINTLIMITPOS or kind == JOINTLIMITVEL or kind == JOINTLIMITFRC:
            d.sensordata[w, adr] = limit_value(m, d, w, CNSTR_LIMIT_JOINT, objid, kind - JOINTLIMITPOS)
        elif kind == TENDONLIMITPOS or kind == TENDONLIMITVEL or kind == TENDONLIMITFRC:
            d.sensordata[w, adr] = limit_value(m, d, w, CNSTR_LIMIT_TENDON, objid, kind - TENDONLIMITPOS)
        # apply_cutoff
        cutoff = m.sensor[i].cutoff
        if cutoff > scalar(0.0):
            for k in range(m.sensor[i].dim):
                x = d.sensordata[w, adr + k]
                if m.sensor[i].datatype == DATATYPE_REAL:
                    d.sensordata[w, adr + k] = wp.clamp(x, -cutoff, cutoff)
                elif m.sensor[i].datatype == DATATYPE_POSITIVE:
                    d.sensordata[w, adr + k] = wp.min(cutoff, x)

    return sensor
