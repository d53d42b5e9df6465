"""Sensors: `sensordata [W, nsensordata]` as MuJoCo computes it in mj_forward
(engine_sensor.c: mj_sensorPos, mj_sensorVel, mj_sensorAcc; mj_objectVelocity and
mj_objectAcceleration in engine_core_util.c; the accelerations of mj_rnePostConstraint in
engine_core_smooth.c), after the constraint solver, so the values are those of the state the
step started from, as after mj_step.

Elements (`build(scalar)`): `sensor(m, d, w, i)` writes sensor i's `sensor_dim` values at
`sensor_adr` and applies its cutoff (real values clipped to +-cutoff, positive ones to at most
cutoff), except for the rangefinders, which `ray_sensor(m, d, w, i)` writes (the
Model.nsensor_ray entries of Model.sensor before the wrench sensors), the touch, force and
torque sensors, which `wrench_sensor(m, d, w, i)` writes (the last Model.nsensor_wrench
entries), and contact sensors, which
`contact_sensor(m, d, w, k)` and `contact_sensor_sorted` write (k indexing Model.contact_sensor),
each in passes of their own (their loops over contacts and ray casts would raise the registers
of every sensor's kernel on a GPU by half), the contact sensors without cutoff as MuJoCo. Noise
is metadata MuJoCo does not apply; neither does simrl.

Supported (SensorType, simrl.sim.types): magnetometer, rangefinder (on a site: mj_ray,
simrl.sim.ray), camprojection (cam_project, the camera placed as mj_camlight), jointpos,
actuatorpos, tendonpos, ballquat, framepos, framexaxis/yaxis/zaxis, framequat, subtreecom, clock
(Data.solver_scalar's TIME) (position stage); velocimeter, gyro, jointvel, actuatorvel, tendonvel, ballangvel,
framelinvel, frameangvel, subtreelinvel, subtreeangmom (velocity stage); accelerometer,
framelinacc, frameangacc, actuatorfrc, jointactfrc, tendonactfrc (acceleration stage);
jointlimitpos/vel/frc and tendonlimitpos/vel/frc (of the first active limit row of the joint or
tendon); touch, force, torque and contact (MuJoCo 4.0's mjSENS_CONTACT: matching, reduction and
extraction as mj_computeSensorAcc and its helpers matchContact, checkMatch, copySensorData,
total_wrench; its matching geom pairs fixed at load in mjData.contact's order,
simrl.sim.io.contact_sensor_tables). Objects: bodies (inertial and regular frames), geoms,
sites. A body's acceleration (MuJoCo's cacc of mj_rnePostConstraint: -gravity at the world,
cdof_dot qvel + cdof qacc added down the tree) is summed over the dof chain that moves it, so no
tree pass is needed; a force or torque sensor's cfrc_int is RNE's cfrc_bias of the site's body
(its subtree's velocity and gravity terms) plus cinert (cdof qacc) of each body of the subtree,
minus the subtree's contact and equality wrenches, gathered in one pass over the contacts."""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import ray
from simrl.sim.data import TIME, data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import (
    MINVAL,
    CamLight,
    ConDataField,
    ConstraintType,
    DataType,
    EqType,
    GeomType,
    ObjType,
    RayDataField,
    SensorType,
    scalar_types,
)

# sensor_intprm[1] of a contact sensor (mj_computeSensorAcc's local enum)
REDUCE_NONE, REDUCE_MINDIST, REDUCE_MAXFORCE, REDUCE_NETFORCE = 0, 1, 2, 3


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, vec6 = T.f, T.vec3, T.vec6
    ray_geom = ray.build(scalar)
    rf = ray.functions(scalar)
    zero3 = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
    vec4 = wp.types.vector(4, scalar)

    @wp.func
    def frame_body(m: Model, objtype: int, objid: int):
        """The body that carries an object's frame."""
        b = objid
        if objtype == ObjType.GEOM:
            b = m.geom_bodyid[objid]
        elif objtype == ObjType.SITE:
            b = m.site_bodyid[objid]
        return b

    @wp.func
    def frame_pos(d: Data, w: int, objtype: int, objid: int):
        """get_xpos_xmat's position: xipos (body), xpos (xbody), geom_xpos, site_xpos."""
        p = d.xpos[w, objid]
        if objtype == ObjType.BODY:
            p = d.xipos[w, objid]
        elif objtype == ObjType.GEOM:
            p = d.geom_xpos[w, objid]
        elif objtype == ObjType.SITE:
            p = d.site_xpos[w, objid]
        return p

    @wp.func
    def frame_mat(d: Data, w: int, objtype: int, objid: int):
        """get_xpos_xmat's orientation: ximat, xmat, geom_xmat, site_xmat."""
        r = d.xmat[w, objid]
        if objtype == ObjType.BODY:
            r = d.ximat[w, objid]
        elif objtype == ObjType.GEOM:
            r = d.geom_xmat[w, objid]
        elif objtype == ObjType.SITE:
            r = d.site_xmat[w, objid]
        return r

    @wp.func
    def frame_quat(m: Model, d: Data, w: int, objtype: int, objid: int):
        """get_xquat: the body's xquat times the object's local quaternion."""
        q = d.xquat[w, objid]
        if objtype == ObjType.BODY:
            q = d.xquat[w, objid] * m.body_iquat[w % m.body_iquat.shape[0], objid]
        elif objtype == ObjType.GEOM:
            q = d.xquat[w, m.geom_bodyid[objid]] * m.geom_quat[objid]
        elif objtype == ObjType.SITE:
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
    def body_acceleration(m: Model, d: Data, w: int, b: int, bias: int):
        """cacc of mj_rnePostConstraint: -gravity, plus cdof_dot qvel + cdof qacc of every dof of
        the chain that moves the body (root first, as the tree recursion adds them). With bias 0
        only the cdof qacc terms: the part of cacc that qacc makes (RNE's cfrc_bias has the rest)."""
        acc = vec6(scalar(0.0))
        if bias != 0:
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
                if bias != 0:
                    acc = acc + d.cdof_dot[w, i] * d.qvel[w, i]
                acc = acc + d.cdof[w, i] * d.qacc[w, i]
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
            ang, lin = transform_motion(body_acceleration(m, d, w, b, 1), dif)
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
    def subtree_linear_momentum(m: Model, d: Data, w: int, root: int):
        """Sum of m_i v_i over the bodies of root's subtree (v_i: the CoM's linear velocity)."""
        p = zero3
        for i in range(1, m.nbody):
            if in_subtree(m, i, root):
                ang, lin = object_velocity(m, d, w, ObjType.BODY, i, 0)
                p = p + lin * m.body_mass[w % m.body_mass.shape[0], i]
        return p

    @wp.func
    def subtree_angular_momentum(m: Model, d: Data, w: int, root: int, vc: vec3):
        """Sum of R_i I_i R_i' w_i + m_i (x_i - c) x (v_i - vc) over root's subtree, c its CoM."""
        out = zero3
        c = d.subtree_com[w, root]
        for i in range(1, m.nbody):
            if in_subtree(m, i, root):
                ang, lin = object_velocity(m, d, w, ObjType.BODY, i, 0)
                r = d.ximat[w, i]
                local = wp.transpose(r) * ang
                inertia = m.body_inertia[w % m.body_inertia.shape[0], i]
                spin = r * vec3(local[0] * inertia[0], local[1] * inertia[1], local[2] * inertia[2])
                mass = m.body_mass[w % m.body_mass.shape[0], i]
                out = out + spin + wp.cross(d.xipos[w, i] - c, (lin - vc) * mass)
        return out

    @wp.func
    def subtree_momentum(m: Model, d: Data, w: int, root: int, angular: int):
        """mj_subtreeVel for one subtree: its center of mass's linear velocity (sum of m_i v_i
        over its bodies / its mass), or (angular) its angular momentum about its center of mass,
        sum of R_i I_i R_i' w_i + m_i (x_i - c) x (v_i - v_c), which MuJoCo's recursion adds up
        by the parallel-axis theorem.

        Each loop is a function of its own whose result the caller uses: the generated adjoint
        of a kernel replays a dynamic loop's iterations in reverse but not the values the loop
        leaves behind, so a loop's result used later in the same function reads its initial
        value in the backward pass (a called function's forward, though, is rerun whole)."""
        vc = subtree_linear_momentum(m, d, w, root) / wp.max(scalar(MINVAL), d.subtree_mass[w, root])
        out = vc
        if angular != 0:
            out = subtree_angular_momentum(m, d, w, root, vc)
        return out

    @wp.func
    def write3(d: Data, w: int, adr: int, v: vec3):
        for k in range(3):
            d.sensordata[w, adr + k] = v[k]

    @wp.func
    def limit_row(m: Model, d: Data, w: int, cnstr: int, objid: int):
        """The first active limit row of joint or tendon objid (MuJoCo's order: the lower side
        first), -1 without one."""
        row = int(-1)
        first = m.nefc_eq + m.nefc_friction
        for r in range(first, first + m.nefc_limit):
            if row < 0 and d.efc_active[w, r] != 0 and m.efc_type[r] == cnstr and m.efc_id[r] == objid:
                row = r
        return row

    @wp.func
    def limit_value(m: Model, d: Data, w: int, cnstr: int, objid: int, which: int):
        """Of the first active limit row of joint or tendon objid: which 0 its distance - margin,
        1 its velocity, 2 its force; 0 without one. (The row from a function of its own: see
        `subtree_momentum`.)"""
        value = scalar(0.0)
        r = limit_row(m, d, w, cnstr, objid)
        if r >= 0:
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
        p = d.contact_pair[w, c]
        r0 = d.contact_efc_adr[w, c]
        condim = m.cpair_condim[p]
        fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
        # loops of constant length (unrolled): the generated adjoint of a vector's component
        # updated in a dynamic loop is wrong (see subtree_momentum)
        out = vec6()
        if condim == 1:
            out[0] = d.efc_force[w, r0]
        elif m.cone_elliptic != 0:
            for k in range(6):
                if k < condim:
                    out[k] = d.efc_force[w, r0 + k]
        else:
            normal = scalar(0.0)
            for k in range(10):
                if k < 2 * (condim - 1):
                    normal = normal + d.efc_force[w, r0 + k]
            out[0] = normal
            for k in range(5):
                if k < condim - 1:
                    out[k + 1] = (d.efc_force[w, r0 + 2 * k] - d.efc_force[w, r0 + 2 * k + 1]) * fr[k]
        return vec3(out[0], out[1], out[2]), vec3(out[3], out[4], out[5])

    @wp.func
    def contact_normal_force(m: Model, d: Data, w: int, c: int):
        """The normal force of contact slot c, mj_contactForce's first component: a pyramid's
        edge forces summed (mju_decodePyramid), else the normal row's force."""
        p = d.contact_pair[w, c]
        r0 = d.contact_efc_adr[w, c]
        condim = m.cpair_condim[p]
        normal = d.efc_force[w, r0]
        if condim > 1 and m.cone_elliptic == 0:
            normal = scalar(0.0)
            for k in range(10):  # unrolled (see contact_force)
                if k < 2 * (condim - 1):
                    normal = normal + d.efc_force[w, r0 + k]
        return normal

    @wp.func
    def subtree_wrench_ext(m: Model, d: Data, w: int, root: int):
        """The sum of cfrc_ext (mj_rnePostConstraint) over the bodies of root's subtree: the
        (torque, force) of the contacts of its bodies (minus for the contact's first body) and of
        their connect and weld constraints (plus for the first), about the subtree CoM of its
        tree, world-oriented. One pass over the contacts and equalities (not one per body: a
        contact between two bodies of the subtree adds and removes the same wrench, as the
        bodies' cfrc_ext do)."""
        com = d.subtree_com[w, m.body_rootid[root]]
        torque = zero3
        force = zero3
        for c in range(m.nconmax):
            if d.contact_efc_adr[w, c] >= 0:
                g = m.cpair_geom[d.contact_pair[w, c]]
                in1 = in_subtree(m, m.geom_bodyid[g[0]], root)
                in2 = in_subtree(m, m.geom_bodyid[g[1]], root)
                if in1 != in2:
                    lf, lt = contact_force(m, d, w, c)
                    frame = d.contact_frame[w, c]
                    fw = wp.transpose(frame) * lf
                    tw = wp.transpose(frame) * lt - wp.cross(com - d.contact_pos[w, c], fw)
                    if in1:
                        torque = torque - tw
                        force = force - fw
                    else:
                        torque = torque + tw
                        force = force + fw
        for e in range(m.neq):
            kind = m.eq[e].type
            if m.nefc_eq > 0 and (kind == EqType.CONNECT or kind == EqType.WELD) and d.eq_active[w, e] != 0:
                r0 = m.eq[e].efc_adr
                if d.efc_active[w, r0] != 0:
                    fw = vec3(d.efc_force[w, r0], d.efc_force[w, r0 + 1], d.efc_force[w, r0 + 2])
                    tw = zero3
                    if kind == EqType.WELD:
                        tw = vec3(d.efc_force[w, r0 + 3], d.efc_force[w, r0 + 4], d.efc_force[w, r0 + 5])
                    b1 = m.eq[e].body1
                    b2 = m.eq[e].body2
                    if b1 != 0 and in_subtree(m, b1, root):
                        pos = d.xpos[w, b1] + d.xmat[w, b1] * m.eq[e].anchor1
                        torque = torque + tw - wp.cross(com - pos, fw)
                        force = force + fw
                    if b2 != 0 and in_subtree(m, b2, root):
                        pos = d.xpos[w, b2] + d.xmat[w, b2] * m.eq[e].anchor2
                        torque = torque - (tw - wp.cross(com - pos, fw))
                        force = force - fw
        return torque, force

    @wp.func
    def subtree_wrench_int(m: Model, d: Data, w: int, root: int):
        """cfrc_int of body `root` (mj_rnePostConstraint): over the bodies of its subtree,
        cinert cacc + cvel x* (cinert cvel), minus their cfrc_ext (`subtree_wrench_ext`), as
        (torque, force) about its tree's CoM. The velocity and gravity part of the sum is RNE's
        cfrc_bias of root (simrl.sim.rne: summed over its subtree already); the rest is
        cinert (cdof qacc over the body's chain) of each body of the subtree."""
        total = d.cfrc_bias[w, root]
        for i in range(1, m.nbody):
            if in_subtree(m, i, root):
                total = total + f.inert_mul(d.cinert[w, i], body_acceleration(m, d, w, i, 0))
        t, fo = subtree_wrench_ext(m, d, w, root)
        return vec3(total[0], total[1], total[2]) - t, vec3(total[3], total[4], total[5]) - fo

    @wp.func
    def touch(m: Model, d: Data, w: int, site: int):
        """The normal forces of the contacts of the site's body whose normal force, as a ray from
        the contact point (pointing into the body), meets the site's volume (mju_rayGeom)."""
        b = m.site_bodyid[site]
        total = scalar(0.0)
        for c in range(m.nconmax):
            if d.contact_efc_adr[w, c] >= 0:
                g = m.cpair_geom[d.contact_pair[w, c]]
                b1 = m.geom_bodyid[g[0]]
                b2 = m.geom_bodyid[g[1]]
                if b1 == b or b2 == b:
                    normal = contact_normal_force(m, d, w, c)
                    if normal > scalar(0.0):
                        frame = d.contact_frame[w, c]
                        # mju_normalize3 of the normal times the force: the unit normal
                        conray = vec3(frame[0, 0], frame[0, 1], frame[0, 2])
                        if b == b2:
                            conray = -conray
                        x = ray_geom(d.site_xpos[w, site], d.site_xmat[w, site], m.site_size[site], m.site_type[site],
                                     d.contact_pos[w, c], conray)
                        if x >= scalar(0.0):
                            total = total + normal
        return total

    @wp.func
    def inside_site(m: Model, d: Data, w: int, site: int, point: vec3):
        """mju_insideGeom (engine_util_misc.c): the point lies strictly inside the site's volume."""
        size = m.site_size[site]
        kind = m.site_type[site]
        v = point - d.site_xpos[w, site]
        p = wp.transpose(d.site_xmat[w, site]) * v
        inside = False
        if kind == GeomType.SPHERE:
            inside = wp.dot(v, v) < size[0] * size[0]
        elif kind == GeomType.CAPSULE:
            dz = p[2] - wp.clamp(p[2], -size[1], size[1])
            inside = p[0] * p[0] + p[1] * p[1] + dz * dz < size[0] * size[0]
        elif kind == GeomType.ELLIPSOID:
            inside = (p[0] * p[0] / (size[0] * size[0]) + p[1] * p[1] / (size[1] * size[1])
                      + p[2] * p[2] / (size[2] * size[2])) < scalar(1.0)
        elif kind == GeomType.CYLINDER:
            inside = wp.abs(p[2]) < size[1] and p[0] * p[0] + p[1] * p[1] < size[0] * size[0]
        elif kind == GeomType.BOX:
            inside = wp.abs(p[0]) < size[0] and wp.abs(p[1]) < size[1] and wp.abs(p[2]) < size[2]
        return inside

    @wp.func
    def world_slot(m: Model, d: Data, w: int, candidate: wp.vec3i):
        """The contact slot of world w that holds slot candidate[1] of candidate pair
        candidate[0] (a Model.contact_sensor_slot entry), -1 when the broadphase did not keep
        the pair: a binary search of the world's kept pairs, which are in pair order."""
        p = candidate[0]
        lo = int(0)
        hi = d.ncollision[w]
        while lo < hi:
            mid = (lo + hi) // 2
            if d.collision_pair[w, mid] < p:
                lo = mid + 1
            else:
                hi = mid
        slot = int(-1)
        if lo < d.ncollision[w]:
            if d.collision_pair[w, lo] == p:
                slot = d.collision_adr[w, lo] + candidate[1]
        return slot

    @wp.func
    def contact_matches(m: Model, d: Data, w: int, i: int, c: int):
        """Contact slot c (-1: none) holds a contact (mjData.contact) that contact sensor i
        matches: its geom pair matched at load (Model.contact_sensor_slot); a site's volume holds
        its position."""
        found = False
        if c >= 0:
            found = d.contact_active[w, c] != 0
        if found and m.contact_sensor[i].objtype == ObjType.SITE:
            found = inside_site(m, d, w, m.contact_sensor[i].objid, d.contact_pos[w, c])
        return found

    @wp.func
    def contact_wrench(m: Model, d: Data, w: int, c: int):
        """mj_contactForce: (force, torque) in the contact frame; zero for a contact without
        constraint rows (one in the gap, dist >= margin - gap)."""
        force = zero3
        torque = zero3
        if d.contact_efc_adr[w, c] >= 0:
            force, torque = contact_force(m, d, w, c)
        return force, torque

    @wp.func
    def contact_criterion(m: Model, d: Data, w: int, c: int, reduce: int):
        """The sorted reductions' key, smallest first: dist (mindist), -|force|^2 (maxforce)."""
        key = d.contact_dist[w, c]
        if reduce == REDUCE_MAXFORCE:
            force, torque = contact_wrench(m, d, w, c)
            key = -wp.dot(force, force)
        return key

    @wp.func
    def point_velocity(m: Model, d: Data, w: int, b: int, point: vec3):
        """(angular, linear) velocity of body b's frame moved to `point`, world-oriented."""
        ang = zero3
        lin = zero3
        if m.body_dofend[b] >= 0:
            ang, lin = transform_motion(d.cvel[w, b], point - d.subtree_com[w, m.body_rootid[b]])
        return ang, lin

    @wp.func
    def write_flipped(d: Data, w: int, adr: int, v: vec3, flip: int):
        """A vector in the contact frame; flip negates its last component (the frame turned half
        a turn about its second tangent, so the other body's equal and opposite value reads alike)."""
        d.sensordata[w, adr] = v[0]
        d.sensordata[w, adr + 1] = v[1]
        if flip != 0:
            d.sensordata[w, adr + 2] = -v[2]
        else:
            d.sensordata[w, adr + 2] = v[2]

    @wp.func
    def write_contact(m: Model, d: Data, w: int, adr: int, dataspec: int, c: int, flip: int, nmatch: int):
        """copySensorData (engine_sensor.c): the fields of `dataspec` of the contact in slot c at
        sensordata[adr:], in mjtConDataField order; flip reverses the normal and the tangent
        and the last component of force, torque and (4.0) the relative velocities."""
        a = adr
        sign = scalar(1.0)
        if flip != 0:
            sign = scalar(-1.0)
        if (dataspec & (1 << ConDataField.FOUND)) != 0:
            d.sensordata[w, a] = scalar(nmatch)
            a = a + 1
        force = zero3
        torque = zero3
        if (dataspec & ((1 << ConDataField.FORCE) | (1 << ConDataField.TORQUE))) != 0:
            force, torque = contact_wrench(m, d, w, c)
        if (dataspec & (1 << ConDataField.FORCE)) != 0:
            write_flipped(d, w, a, force, flip)
            a = a + 3
        if (dataspec & (1 << ConDataField.TORQUE)) != 0:
            write_flipped(d, w, a, torque, flip)
            a = a + 3
        if (dataspec & (1 << ConDataField.DIST)) != 0:
            d.sensordata[w, a] = d.contact_dist[w, c]
            a = a + 1
        pos = d.contact_pos[w, c]
        if (dataspec & (1 << ConDataField.POS)) != 0:
            write3(d, w, a, pos)
            a = a + 3
        frame = d.contact_frame[w, c]
        if (dataspec & (1 << ConDataField.NORMAL)) != 0:
            write3(d, w, a, sign * vec3(frame[0, 0], frame[0, 1], frame[0, 2]))
            a = a + 3
        if (dataspec & (1 << ConDataField.TANGENT)) != 0:
            write3(d, w, a, sign * vec3(frame[1, 0], frame[1, 1], frame[1, 2]))
            a = a + 3
        if (dataspec & ((1 << ConDataField.LINVEL) | (1 << ConDataField.ANGVEL))) != 0:
            # the velocity of the second geom's body relative to the first's at the contact point,
            # in the contact frame
            g = m.cpair_geom[d.contact_pair[w, c]]
            ang1, lin1 = point_velocity(m, d, w, m.geom_bodyid[g[0]], pos)
            ang2, lin2 = point_velocity(m, d, w, m.geom_bodyid[g[1]], pos)
            if (dataspec & (1 << ConDataField.LINVEL)) != 0:
                write_flipped(d, w, a, frame * (lin2 - lin1), flip)
                a = a + 3
            if (dataspec & (1 << ConDataField.ANGVEL)) != 0:
                write_flipped(d, w, a, frame * (ang2 - ang1), flip)

    def contact_sensor_of(sorted_reductions: bool):
        """The contact sensor, of the sensors whose reduction sorts (mindist, maxforce) or of the
        others (none, netforce): two kernels in the wide schedule (as one it needs more registers
        than a GPU thread should use: scripts/gpu_report.py), each leaving the other's sensors
        alone."""

        @wp.func
        def contact_sensor(m: Model, d: Data, w: int, i: int):
            """The contact sensor (mj_computeSensorAcc's mjSENS_CONTACT) i of Model.contact_sensor:
            of the contacts that match (its candidate slots, in mjData.contact's order), `num`
            slots of the fields of `dataspec` (found: the number of matches), by reduction none
            (the first num), mindist or maxforce (the num smallest keys, ascending; ties by order,
            as ContactSelect's partial sort), or netforce (one synthetic contact at the
            force-weighted centroid: the total world-frame wrench about it, normal and tangent the
            world's x and y; all zero without a match, as MuJoCo 4.0 gives); empty slots zero.
            Every value is written once, and which contact fills a slot comes from a function
            (`nth_match`, `nth_sorted`), not from a counter carried through a loop: the generated
            adjoint does not replay a loop's carried values (see `subtree_momentum`).

            Model: body_dofend, body_rootid, cone_elliptic, contact_sensor, contact_sensor_slot, cpair_condim,
            cpair_friction, cpair_geom, geom_bodyid, site_size, site_type. Data in: collision_pair, collision_adr,
            ncollision, contact_pair, contact_active, contact_dist, contact_pos, contact_frame, site_xpos,
            site_xmat, cvel, subtree_com, efc_active, efc_force. Data out: sensordata (the sensor's columns)."""
            reduce = m.contact_sensor[i].reduce
            if (reduce == REDUCE_MINDIST or reduce == REDUCE_MAXFORCE) == wp.static(sorted_reductions):
                adr = m.contact_sensor[i].adr
                dim = m.contact_sensor[i].dim
                dataspec = m.contact_sensor[i].dataspec
                first = m.contact_sensor[i].slot_adr
                size = condata_size(dataspec)
                num = dim // size
                nmatch = match_count(m, d, w, i)
                if reduce == REDUCE_NETFORCE:
                    if nmatch > 0:
                        net_force_slot(m, d, w, i, adr, dataspec, nmatch)
                    else:
                        zero_values(d, w, adr, size)
                    for j in range(1, num):
                        zero_values(d, w, adr + j * size, size)
                else:
                    for j in range(num):
                        k = int(-1)
                        if j < nmatch:
                            if wp.static(sorted_reductions):
                                k = nth_sorted(m, d, w, i, j)
                            else:
                                k = nth_match(m, d, w, i, j)
                        if k >= 0:
                            e = m.contact_sensor_slot[first + k]
                            write_contact(m, d, w, adr + j * size, dataspec, world_slot(m, d, w, e), e[2], nmatch)
                        else:
                            zero_values(d, w, adr + j * size, size)
                zero_values(d, w, adr + num * size, dim - num * size)

        return contact_sensor

    @wp.func
    def condata_size(dataspec: int):
        """mju_condataSize: found and dist one value, the other fields three."""
        size = int(0)
        for k in range(wp.static(len(ConDataField))):
            if (dataspec & (1 << k)) != 0:
                if k == ConDataField.FOUND or k == ConDataField.DIST:
                    size = size + 1
                else:
                    size = size + 3
        return size

    @wp.func
    def zero_values(d: Data, w: int, adr: int, n: int):
        for k in range(n):
            d.sensordata[w, adr + k] = scalar(0.0)

    @wp.func
    def match_count(m: Model, d: Data, w: int, i: int):
        """The number of contacts contact sensor i matches."""
        first = m.contact_sensor[i].slot_adr
        n = int(0)
        for k in range(m.contact_sensor[i].slot_num):
            if contact_matches(m, d, w, i, world_slot(m, d, w, m.contact_sensor_slot[first + k])):
                n = n + 1
        return n

    @wp.func
    def nth_match(m: Model, d: Data, w: int, i: int, j: int):
        """Reduction none: the candidate (index into the sensor's slots) of its j-th match in
        order, -1 if it has fewer."""
        first = m.contact_sensor[i].slot_adr
        count = int(0)
        found = int(-1)
        for k in range(m.contact_sensor[i].slot_num):
            if found < 0 and contact_matches(m, d, w, i, world_slot(m, d, w, m.contact_sensor_slot[first + k])):
                if count == j:
                    found = k
                count = count + 1
        return found

    @wp.func
    def nth_sorted(m: Model, d: Data, w: int, i: int, j: int):
        """Reductions mindist and maxforce: the candidate of the j-th smallest (key, order) of the
        matches, as ContactSelect (a partial heap sort, then an insertion sort) orders them; -1
        if there is none (fewer matches, or a NaN key)."""
        first = m.contact_sensor[i].slot_adr
        n = m.contact_sensor[i].slot_num
        reduce = m.contact_sensor[i].reduce
        last_key = scalar(0.0)
        last = int(-1)
        for _rank in range(j + 1):
            best_key = scalar(0.0)
            best = int(-1)
            for k in range(n):
                c = world_slot(m, d, w, m.contact_sensor_slot[first + k])
                if contact_matches(m, d, w, i, c):
                    key = contact_criterion(m, d, w, c, reduce)
                    later = last < 0 or key > last_key or (key == last_key and k > last)
                    if later and (best < 0 or key < best_key):
                        best_key = key
                        best = k
            last_key = best_key
            last = best
            if best < 0:
                break
        return last

    @wp.func
    def weighted_positions(m: Model, d: Data, w: int, i: int):
        """Over the matches of contact sensor i: the sum of the contact positions weighted by the
        norms of their forces, and the sum of the weights."""
        first = m.contact_sensor[i].slot_adr
        point = zero3
        total = scalar(0.0)
        for k in range(m.contact_sensor[i].slot_num):
            c = world_slot(m, d, w, m.contact_sensor_slot[first + k])
            if contact_matches(m, d, w, i, c):
                force, torque = contact_wrench(m, d, w, c)
                weight = wp.length(force)
                point = point + d.contact_pos[w, c] * weight
                total = total + weight
        return point, total

    @wp.func
    def net_wrench(m: Model, d: Data, w: int, i: int, point: vec3):
        """The matches' wrenches (negated when flipped) in the world frame, summed about `point`."""
        first = m.contact_sensor[i].slot_adr
        net_force = zero3
        net_torque = zero3
        for k in range(m.contact_sensor[i].slot_num):
            e = m.contact_sensor_slot[first + k]
            c = world_slot(m, d, w, e)
            if contact_matches(m, d, w, i, c):
                force, torque = contact_wrench(m, d, w, c)
                if e[2] != 0:
                    force = -force
                    torque = -torque
                frame_t = wp.transpose(d.contact_frame[w, c])
                fw = frame_t * force
                net_force = net_force + fw
                net_torque = net_torque + frame_t * torque
                net_torque = net_torque + wp.cross(d.contact_pos[w, c] - point, fw)
        return net_force, net_torque

    @wp.func
    def net_force_slot(m: Model, d: Data, w: int, i: int, adr: int, dataspec: int, nmatch: int):
        """Reduction netforce: the force-weighted centroid of the matches and their total wrench
        about it in the world frame (total_wrench), as one slot; MuJoCo's compiler refuses linvel
        and angvel with it."""
        weighted, total = weighted_positions(m, d, w, i)
        point = weighted * (scalar(1.0) / wp.max(total, scalar(MINVAL)))
        net_force, net_torque = net_wrench(m, d, w, i, point)
        a = adr
        if (dataspec & (1 << ConDataField.FOUND)) != 0:
            d.sensordata[w, a] = scalar(nmatch)
            a = a + 1
        if (dataspec & (1 << ConDataField.FORCE)) != 0:
            write3(d, w, a, net_force)
            a = a + 3
        if (dataspec & (1 << ConDataField.TORQUE)) != 0:
            write3(d, w, a, net_torque)
            a = a + 3
        if (dataspec & (1 << ConDataField.DIST)) != 0:
            d.sensordata[w, a] = scalar(0.0)
            a = a + 1
        if (dataspec & (1 << ConDataField.POS)) != 0:
            write3(d, w, a, point)
            a = a + 3
        if (dataspec & (1 << ConDataField.NORMAL)) != 0:
            write3(d, w, a, vec3(scalar(1.0), scalar(0.0), scalar(0.0)))
            a = a + 3
        if (dataspec & (1 << ConDataField.TANGENT)) != 0:
            write3(d, w, a, vec3(scalar(0.0), scalar(1.0), scalar(0.0)))

    @wp.func
    def value3(v: vec3):
        return vec4(v[0], v[1], v[2], scalar(0.0))

    @wp.func
    def value_quat(q: T.quat):
        """A quaternion in MuJoCo's order (w, x, y, z)."""
        return vec4(q[3], q[0], q[1], q[2])

    @wp.func
    def value1(x: scalar):
        return vec4(x, scalar(0.0), scalar(0.0), scalar(0.0))

    @wp.func
    def camera_frame(m: Model, d: Data, w: int, i: int):
        """The (position, orientation) of sensor i's camera (mj_camlight): fixed in its body
        (mj_local2Global), or tracking the body (track) or its subtree's CoM (trackcom) at a fixed
        orientation, or looking at its target body (targetbody) or the target's subtree CoM
        (targetbodycom), its x axis horizontal."""
        b = m.sensor[i].cam_body
        xquat = d.xquat[w, b]
        pos = d.xpos[w, b] + wp.quat_rotate(xquat, m.sensor[i].cam_pos)
        mat = wp.quat_to_matrix(f.quat_normalize(xquat * m.sensor[i].cam_quat))
        mode = m.sensor[i].cam_mode
        if mode == CamLight.TRACK or mode == CamLight.TRACKCOM:
            mat = m.sensor[i].cam_mat0
            if mode == CamLight.TRACK:
                pos = d.xpos[w, b] + m.sensor[i].cam_pos0
            else:
                pos = d.subtree_com[w, b] + m.sensor[i].cam_pos0
        elif (mode == CamLight.TARGETBODY or mode == CamLight.TARGETBODYCOM) and m.sensor[i].cam_target >= 0:
            target = d.xpos[w, m.sensor[i].cam_target]
            if mode == CamLight.TARGETBODYCOM:
                target = d.subtree_com[w, m.sensor[i].cam_target]
            z = wp.normalize(pos - target)
            x = wp.normalize(wp.cross(vec3(scalar(0.0), scalar(0.0), scalar(1.0)), z))
            y = wp.normalize(wp.cross(z, x))
            mat = T.mat33(x[0], y[0], z[0], x[1], y[1], z[1], x[2], y[2], z[2])
        return pos, mat

    @wp.func
    def cam_projection(m: Model, d: Data, w: int, i: int):
        """cam_project (engine_sensor.c): sensor i's site in its camera's image, in pixels from
        the top-left corner (not clipped; a point behind the camera projects too)."""
        pos, mat = camera_frame(m, d, w, i)
        p = wp.transpose(mat) * (d.site_xpos[w, m.sensor[i].objid] - pos)
        # keep the denominator away from 0 (MuJoCo's own guard, not a smooth one)
        denom = p[2]
        if wp.abs(denom) < scalar(MINVAL):
            if denom < scalar(0.0):
                denom = -scalar(MINVAL)
            else:
                denom = scalar(MINVAL)
        half = scalar(0.5)
        return vec4(-m.sensor[i].cam_focal[0] * (p[0] / denom) + half * m.sensor[i].cam_res[0],
                    m.sensor[i].cam_focal[1] * (p[1] / denom) + half * m.sensor[i].cam_res[1], scalar(0.0), scalar(0.0))

    @wp.func
    def sensor_value(m: Model, d: Data, w: int, i: int):
        """The (at most 4) values of sensor i, not a contact sensor (mj_computeSensorPos / Vel /
        Acc)."""
        kind = m.sensor[i].type
        objtype = m.sensor[i].objtype
        objid = m.sensor[i].objid
        reftype = m.sensor[i].reftype
        refid = m.sensor[i].refid
        v = vec4()
        if kind == SensorType.MAGNETOMETER:
            v = value3(wp.transpose(d.site_xmat[w, objid]) * m.magnetic)
        elif kind == SensorType.CAMPROJECTION:
            v = cam_projection(m, d, w, i)
        elif kind == SensorType.CLOCK:
            v = value1(d.solver_scalar[w, TIME])
        elif kind == SensorType.JOINTPOS:
            v = value1(d.qpos[w, m.jnt_qposadr[objid]])
        elif kind == SensorType.ACTUATORPOS:
            v = value1(d.actuator_length[w, objid])
        elif kind == SensorType.TENDONPOS:
            v = value1(d.ten_length[w, objid])
        elif kind == SensorType.TENDONVEL:
            v = value1(d.ten_velocity[w, objid])
        elif kind == SensorType.BALLQUAT:
            v = value_quat(f.quat_normalize(f.quat_from_qpos(d.qpos, w, m.jnt_qposadr[objid])))
        elif kind == SensorType.FRAMEPOS:
            p = frame_pos(d, w, objtype, objid)
            if refid >= 0:
                p = wp.transpose(frame_mat(d, w, reftype, refid)) * (p - frame_pos(d, w, reftype, refid))
            v = value3(p)
        elif kind == SensorType.FRAMEXAXIS or kind == SensorType.FRAMEYAXIS or kind == SensorType.FRAMEZAXIS:
            r = frame_mat(d, w, objtype, objid)
            c = kind - SensorType.FRAMEXAXIS
            axis = vec3(r[0, c], r[1, c], r[2, c])
            if refid >= 0:
                axis = wp.transpose(frame_mat(d, w, reftype, refid)) * axis
            v = value3(axis)
        elif kind == SensorType.FRAMEQUAT:
            q = frame_quat(m, d, w, objtype, objid)
            if refid >= 0:
                q = wp.quat_inverse(frame_quat(m, d, w, reftype, refid)) * q
            v = value_quat(q)
        elif kind == SensorType.SUBTREECOM:
            v = value3(d.subtree_com[w, objid])
        elif kind == SensorType.VELOCIMETER:
            ang, lin = object_velocity(m, d, w, ObjType.SITE, objid, 1)
            v = value3(lin)
        elif kind == SensorType.GYRO:
            ang, lin = object_velocity(m, d, w, ObjType.SITE, objid, 1)
            v = value3(ang)
        elif kind == SensorType.JOINTVEL:
            v = value1(d.qvel[w, m.jnt_dofadr[objid]])
        elif kind == SensorType.ACTUATORVEL:
            v = value1(d.actuator_velocity[w, objid])
        elif kind == SensorType.BALLANGVEL:
            a = m.jnt_dofadr[objid]
            v = vec4(d.qvel[w, a], d.qvel[w, a + 1], d.qvel[w, a + 2], scalar(0.0))
        elif kind == SensorType.FRAMELINVEL or kind == SensorType.FRAMEANGVEL:
            ang, lin = object_velocity(m, d, w, objtype, objid, 0)
            if refid >= 0:
                rang, rlin = object_velocity(m, d, w, reftype, refid, 0)
                rt = wp.transpose(frame_mat(d, w, reftype, refid))
                rvec = frame_pos(d, w, objtype, objid) - frame_pos(d, w, reftype, refid)
                lin = rt * (lin - rlin + wp.cross(rvec, rang))
                ang = rt * (ang - rang)
            if kind == SensorType.FRAMELINVEL:
                v = value3(lin)
            else:
                v = value3(ang)
        elif kind == SensorType.ACCELEROMETER:
            ang, lin = object_acceleration(m, d, w, ObjType.SITE, objid, 1)
            v = value3(lin)
        elif kind == SensorType.FRAMELINACC or kind == SensorType.FRAMEANGACC:
            ang, lin = object_acceleration(m, d, w, objtype, objid, 0)
            if kind == SensorType.FRAMELINACC:
                v = value3(lin)
            else:
                v = value3(ang)
        elif kind == SensorType.SUBTREELINVEL:
            v = value3(subtree_momentum(m, d, w, objid, 0))
        elif kind == SensorType.SUBTREEANGMOM:
            v = value3(subtree_momentum(m, d, w, objid, 1))
        elif kind == SensorType.ACTUATORFRC:
            v = value1(d.actuator_force[w, objid])
        elif kind == SensorType.JOINTACTFRC:
            v = value1(d.qfrc_actuator[w, m.jnt_dofadr[objid]])
        elif kind == SensorType.TENDONACTFRC:
            # the forces of the actuators on the tendon, without their gears
            total = scalar(0.0)
            for a in range(m.nu):
                if m.actuator[a].tendon == objid:
                    total = total + d.actuator_force[w, a]
            v = value1(total)
        elif (kind == SensorType.JOINTLIMITPOS or kind == SensorType.JOINTLIMITVEL
              or kind == SensorType.JOINTLIMITFRC):
            v = value1(limit_value(m, d, w, ConstraintType.LIMIT_JOINT, objid, kind - SensorType.JOINTLIMITPOS))
        elif (kind == SensorType.TENDONLIMITPOS or kind == SensorType.TENDONLIMITVEL
              or kind == SensorType.TENDONLIMITFRC):
            v = value1(limit_value(m, d, w, ConstraintType.LIMIT_TENDON, objid, kind - SensorType.TENDONLIMITPOS))
        return v

    @wp.func
    def wrench_value(m: Model, d: Data, w: int, i: int):
        """The values of sensor i, a touch, force or torque sensor (mj_computeSensorAcc)."""
        kind = m.sensor[i].type
        site = m.sensor[i].objid
        v = vec4()
        if kind == SensorType.TOUCH:
            v = value1(touch(m, d, w, site))
        else:
            # cfrc_int of the site's body moved to the site, in its frame (mju_transformSpatial)
            b = m.site_bodyid[site]
            t, fo = subtree_wrench_int(m, d, w, b)
            rt = wp.transpose(d.site_xmat[w, site])
            if kind == SensorType.FORCE:
                v = value3(rt * fo)
            else:
                v = value3(rt * (t - wp.cross(d.site_xpos[w, site] - d.subtree_com[w, m.body_rootid[b]], fo)))
        return v

    @wp.func
    def write_sensor(m: Model, d: Data, w: int, i: int, v: vec4):
        """Sensor i's values v after apply_cutoff into sensordata, each written once (the
        generated adjoint of the differentiable step needs it)."""
        adr = m.sensor[i].adr
        dim = m.sensor[i].dim
        cutoff = m.sensor[i].cutoff
        datatype = m.sensor[i].datatype
        for k in range(4):  # unrolled
            if k < dim:
                x = v[k]
                if cutoff > scalar(0.0):
                    if datatype == DataType.REAL:
                        x = wp.clamp(x, -cutoff, cutoff)
                    elif datatype == DataType.POSITIVE:
                        x = wp.min(cutoff, x)
                d.sensordata[w, adr + k] = x

    @wp.func
    def sensor(m: Model, d: Data, w: int, i: int):
        """Sensor i (mj_computeSensorPos / Vel / Acc, then apply_cutoff), not a touch, force or
        torque sensor (`wrench_sensor`'s: Model.sensor holds them last) nor a contact sensor
        (`contact_sensor`'s, which apply no cutoff, as MuJoCo).

        Model: actuator, body_dofend, body_inertia, body_iquat, body_mass, body_parentid, body_rootid, dof_ancestor,
        dof_ancestor_adr, dof_ancestor_num, efc_id, efc_type, geom_bodyid, geom_quat, gravity, jnt_dofadr, jnt_qposadr,
        magnetic, nbody, nefc_eq, nefc_friction, nefc_limit, nu, sensor, site_bodyid, site_quat. Data in: qpos, qvel,
        qacc, xpos, xquat, xmat, xipos, ximat, geom_xpos, geom_xmat, site_xpos, site_xmat, subtree_com, subtree_mass,
        cvel, cdof, cdof_dot, ten_length, ten_velocity, actuator_length, actuator_velocity, actuator_force,
        qfrc_actuator, efc_active, efc_pos, efc_margin, efc_vel, efc_force, solver_scalar (the time). Data out:
        sensordata (the sensor's columns)."""
        if m.sensor[i].type != SensorType.CONTACT:
            write_sensor(m, d, w, i, sensor_value(m, d, w, i))

    @wp.func
    def hfield_size(m: Model, g: int):
        """Height field geom g's hfield_size (radius x, radius y, elevation z, base z)."""
        s = m.hfield_info[m.geom_dataid[g]].size
        return vec4(scalar(s[0]), scalar(s[1]), scalar(s[2]), scalar(s[3]))

    @wp.func
    def hfield_hit(m: Model, d: Data, w: int, g: int, pnt: vec3, vec: vec3, kind: int, fi: int, fj: int):
        """The distance to and the normal (world frame) at the part (kind, fi, fj) of height
        field geom g that ray.hfield_feature found (mj_rayHfield)."""
        info = m.hfield_info[m.geom_dataid[g]]
        mat = d.geom_xmat[w, g]
        x, nl = rf.hfield_feature_hit(wp.transpose(mat) * (pnt - d.geom_xpos[w, g]), wp.transpose(mat) * vec,
                                      hfield_size(m, g), info.nrow, info.ncol, info.adr, m.hfield_data, kind, fi, fj)
        return x, mat * nl

    @wp.func
    def ray_origin(m: Model, d: Data, w: int, i: int):
        """Rangefinder i's ray: its site's position and z axis."""
        site = m.sensor[i].objid
        xmat = d.site_xmat[w, site]
        return d.site_xpos[w, site], vec3(xmat[0, 2], xmat[1, 2], xmat[2, 2])

    @wp.func
    def nearest_geom(m: Model, d: Data, w: int, exclude: int, pnt: vec3, vec: vec3, hfields: int):
        """mj_ray's search (geomgroup NULL, flg_static 1) among the visible geoms (Model.ray_geom)
        not on body `exclude`, the height fields (`hfields` 1) or the others (0): the geom the
        ray meets nearest (-1: none), the distance to it (a loop's result: no gradient), and for
        a height field the part of it the ray meets (ray.hfield_feature: kind, fi, fj)."""
        best = scalar(-1.0)
        found = int(-1)
        found_kind = int(0)
        found_i = int(0)
        found_j = int(0)
        for k in range(m.nray_geom):
            g = m.ray_geom[k]
            gtype = m.geom_type[g]
            if m.geom_bodyid[g] != exclude and (gtype == GeomType.HFIELD) == (hfields != 0):
                pos = d.geom_xpos[w, g]
                mat = d.geom_xmat[w, g]
                x = scalar(-1.0)
                kind = int(0)
                fi = int(0)
                fj = int(0)
                if gtype == GeomType.PLANE:
                    x = rf.ray_plane(pos, mat, m.geom_size[g], pnt, vec)
                elif gtype == GeomType.HFIELD:
                    info = m.hfield_info[m.geom_dataid[g]]
                    kind, fi, fj, x = rf.hfield_feature(wp.transpose(mat) * (pnt - pos), wp.transpose(mat) * vec,
                                                        hfield_size(m, g), info.nrow, info.ncol, info.adr,
                                                        m.hfield_data)
                else:
                    x = ray_geom(pos, mat, m.geom_size[g], gtype, pnt, vec)
                if x >= scalar(0.0) and (best < scalar(0.0) or x < best):
                    best = x
                    found = g
                    found_kind = kind
                    found_i = fi
                    found_j = fj
        return found, best, found_kind, found_i, found_j

    @wp.func
    def ray_hfield_sensor(m: Model, d: Data, w: int, i: int):
        """The height field part of rangefinder i's mj_ray, before `ray_sensor`: the nearest
        height field geom its ray meets, into the sensor's scratch columns of sensordata (past
        nsensordata, Model.sensor's `scratch`): the geom (-1: none), the part (kind, row or face,
        column) and the distance. A pass of its own: with the other geoms' search in one kernel,
        a GPU thread would need more registers than it has.

        Model: geom_bodyid, geom_dataid, geom_type, hfield_data, hfield_info, nray_geom, ray_geom, sensor,
        site_bodyid. Data in: geom_xpos, geom_xmat, site_xpos, site_xmat. Data out: sensordata (the sensor's
        scratch columns)."""
        pnt, vec = ray_origin(m, d, w, i)
        g, x, kind, fi, fj = nearest_geom(m, d, w, m.site_bodyid[m.sensor[i].objid], pnt, vec, 1)
        s = m.sensor[i].scratch
        d.sensordata[w, s] = scalar(g)
        d.sensordata[w, s + 1] = scalar(kind)
        d.sensordata[w, s + 2] = scalar(fi)
        d.sensordata[w, s + 3] = scalar(fj)
        d.sensordata[w, s + 4] = x

    @wp.func
    def cut(m: Model, i: int, x: scalar):
        """apply_cutoff of sensor i to one value."""
        cutoff = m.sensor[i].cutoff
        out = x
        if cutoff > scalar(0.0):
            if m.sensor[i].datatype == DataType.REAL:
                out = wp.clamp(x, -cutoff, cutoff)
            elif m.sensor[i].datatype == DataType.POSITIVE:
                out = wp.min(cutoff, x)
        return out

    @wp.func
    def write3_cut(m: Model, d: Data, w: int, i: int, adr: int, v: vec3):
        for k in range(3):
            d.sensordata[w, adr + k] = cut(m, i, v[k])

    @wp.func
    def ray_sensor(m: Model, d: Data, w: int, i: int):
        """Rangefinder i on a site (mj_computeSensorPos, fill_raydata, then apply_cutoff): the ray
        from the site along its z axis, against the visible geoms but those of the site's body
        (mj_ray); the data fields sensor_intprm[0] selects: dist (-1: nothing hit), dir, origin,
        point, normal (zeros when nothing is hit), depth (the distance; -1). Differentiable where
        the ray meets a geom: the geom is found by a function of its own (see
        `subtree_momentum`), its distance and normal computed again outside the loop. The nearest
        height field is `ray_hfield_sensor`'s (its scratch columns); the nearer of it and the
        other geoms' nearest is the hit, the lower geom id on a tie (mj_ray's order).

        Model: geom_bodyid, geom_dataid, geom_size, geom_type, hfield_data, hfield_info, nray_geom, ray_geom, sensor,
        site_bodyid. Data in: geom_xpos, geom_xmat, site_xpos, site_xmat, sensordata (the scratch columns). Data
        out: sensordata (the sensor's columns)."""
        spec = m.sensor[i].intprm
        pnt, vec = ray_origin(m, d, w, i)
        g, best, kind, fi, fj = nearest_geom(m, d, w, m.site_bodyid[m.sensor[i].objid], pnt, vec, 0)
        s = m.sensor[i].scratch
        hfield = int(d.sensordata[w, s])
        hfield_x = d.sensordata[w, s + 4]
        if hfield >= 0 and (g < 0 or hfield_x < best or (hfield_x == best and hfield < g)):
            g = hfield
            kind = int(d.sensordata[w, s + 1])
            fi = int(d.sensordata[w, s + 2])
            fj = int(d.sensordata[w, s + 3])
        x = scalar(-1.0)
        normal = zero3
        if g >= 0:
            gtype = m.geom_type[g]
            if gtype == GeomType.HFIELD:
                x, normal = hfield_hit(m, d, w, g, pnt, vec, kind, fi, fj)
            else:
                pos = d.geom_xpos[w, g]
                mat = d.geom_xmat[w, g]
                if gtype == GeomType.PLANE:
                    x = rf.ray_plane(pos, mat, m.geom_size[g], pnt, vec)
                else:
                    x = ray_geom(pos, mat, m.geom_size[g], gtype, pnt, vec)
                if (spec & (1 << RayDataField.NORMAL)) != 0:
                    normal = rf.geom_normal(pos, mat, m.geom_size[g], gtype, pnt, vec, x)
        hit = x >= scalar(0.0)
        a = m.sensor[i].adr
        if (spec & (1 << RayDataField.DIST)) != 0:
            d.sensordata[w, a] = cut(m, i, x)
            a = a + 1
        if (spec & (1 << RayDataField.DIR)) != 0:
            direction = zero3
            if hit:
                direction = vec
            write3_cut(m, d, w, i, a, direction)
            a = a + 3
        if (spec & (1 << RayDataField.ORIGIN)) != 0:
            write3_cut(m, d, w, i, a, pnt)
            a = a + 3
        if (spec & (1 << RayDataField.POINT)) != 0:
            point = zero3
            if hit:
                point = pnt + vec * x
            write3_cut(m, d, w, i, a, point)
            a = a + 3
        if (spec & (1 << RayDataField.NORMAL)) != 0:
            if not hit:
                normal = zero3
            write3_cut(m, d, w, i, a, normal)
            a = a + 3
        if (spec & (1 << RayDataField.DEPTH)) != 0:
            depth = scalar(-1.0)
            if hit:
                depth = x
            d.sensordata[w, a] = cut(m, i, depth)

    @wp.func
    def wrench_sensor(m: Model, d: Data, w: int, i: int):
        """Touch, force or torque sensor i, then apply_cutoff: a pass of its own, so that the
        sensors most models have are not compiled beside the contact-force loops and ray casts
        of these (with them, the `sensor` kernel needs about twice the registers on a GPU).

        Model: body_dofend, body_parentid, body_rootid, cone_elliptic, cpair_condim,
        cpair_friction, cpair_geom, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, eq, geom_bodyid, nbody,
        nconmax, nefc_eq, neq, sensor, site_bodyid, site_size, site_type. Data in: qacc, xpos, xmat,
        site_xpos, site_xmat, subtree_com, cdof, cinert, cfrc_bias, eq_active, contact_pair, contact_pos, contact_frame,
        efc_active, efc_force. Data out: sensordata (the sensor's columns)."""
        write_sensor(m, d, w, i, wrench_value(m, d, w, i))

    return SimpleNamespace(sensor=sensor, ray_hfield_sensor=ray_hfield_sensor, ray_sensor=ray_sensor,
                           wrench_sensor=wrench_sensor,
                           contact_sensor=contact_sensor_of(False),
                           contact_sensor_sorted=contact_sensor_of(True))
