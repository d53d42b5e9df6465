"""Actuator forces on joints, tendons and sites: gain * (ctrl or act) + bias, clamped, mapped
through the transmission's moment (mj_transmission and mj_fwdActuation, engine_core_smooth.c /
engine_forward.c).

Transmissions (mj_transmission): a hinge's or slide's is the gear, a tendon's the gear times the
tendon's Jacobian. A site transmission without a reference site has length 0 and applies the
wrench gear (force, torque) in the site's frame: its moment is J_site' R_site gear, J_site the
site's translation and rotation Jacobians. With a reference site its length is gear . (the site's
position in the reference frame, R_ref' (x_site - x_ref); the rotation vector from the reference
frame to the site's, mju_subQuat), and its moment (J_site - J_ref)' R_ref gear without the
columns of the dofs the two sites' chains share (MuJoCo's moment, not the exact derivative of
the rotational length). A ball joint's length is the gear . its rotation vector and its moment
the gear on its dofs, a free joint's length 0 and its moment the 6D gear (jointinparent: the
rotational gear given in the parent frame). A slider-crank's length is the slider's travel that
keeps the rod's length between the crank and slider sites, its moment the exact derivative.
A body's (adhesion) has length 0 and minus the mean of its contacts' normal Jacobians as its
moment, after the constraint rows. Joint and tendon moments are applied inline; the others'
rows are kept in actuator_moment.

Activation dynamics (mj_fwdActuation's act_dot): an actuator with dyntype integrator, filter or
filterexact owns one activation act[actadr], whose derivative is ctrl (integrator) or
(ctrl - act) / tau (both filters, tau = max(mjMINVAL, dynprm[0])), ctrl clamped as for the force.
Its force uses act in place of ctrl, or with actearly the activation after this step
(`next_activation`, mj_nextActivation of engine_support.c). The integrators advance act with
`next_activation` (simrl.sim.euler, simrl.sim.rk4).

Elements: `transmission_site(m, d, w, k)`, `transmission_joint` and `transmission_slidercrank`
(the k-th moment row transmission's length and row if it is a site's, a ball or free joint's or a
slider-crank's, after com_pos), `transmission_body` (a body's, after the constraint rows),
`actuator(m, d, w, a)` (length, velocity, act_dot and force of actuator a), `dof(m, d, w, i)`
(the gathered force of the actuators on dof i and the joint's actuatorgravcomp, clamped by the
joint's actuatorfrcrange), and `smooth_force_dof` (qfrc_smooth = passive - bias + applied +
actuator, the end of the smooth dynamics, mj_fwdAcceleration's right-hand side). For the
implicitfast integrator, `force_vel`, `qderiv_dof`, `site_force_vel` and `site_qderiv` give the
actuators' velocity derivative (mjd_actuator_vel).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct, muscle_struct, transmission_struct
from simrl.sim.types import MAXVAL, MINVAL, BiasType, DynType, GainType, JointType, TrnType, scalar_types


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    Muscle = muscle_struct(scalar)
    SiteTransmission = transmission_struct(scalar)
    T = scalar_types(scalar)
    vec2, vec3 = T.vec2, T.vec3
    sub_quat = T.f.sub_quat
    quat_from_qpos, quat_normalize, quat_to_vel = T.f.quat_from_qpos, T.f.quat_normalize, T.f.quat_to_vel

    @wp.func
    def chain_size(m: Model, dof: int):
        """The number of dofs of the chain that ends at `dof` (0 for -1)."""
        n = int(0)
        if dof >= 0:
            n = m.dof_ancestor_num[dof] + 1
        return n

    @wp.func
    def site_moment_chain(m: Model, d: Data, w: int, a: int, body: int, point: vec3, force: vec3, torque: vec3,
                          stop: int, sign: scalar):
        """actuator_moment[a, i] += sign (J_point[:, i]' force + J_rot[:, i]' torque) for the dofs i
        of the chain that moves `body`, from its last dof up to (not including) dof `stop`; the
        point's translation Jacobian column is cdof_lin + cdof_ang x (point - subtree_com of the
        root), its rotation column cdof_ang (mj_jac)."""
        dof = m.body_dofend[body]
        offset = point - d.subtree_com[w, m.body_rootid[body]]
        adr = m.dof_ancestor_adr[wp.max(dof, 0)]
        for k in range(chain_size(m, dof) - chain_size(m, stop)):
            i = dof
            if k > 0:
                i = m.dof_ancestor[adr + k - 1]
            cdof = d.cdof[w, i]
            ang = vec3(cdof[0], cdof[1], cdof[2])
            jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(ang, offset)
            d.actuator_moment[w, a, i] += sign * (wp.dot(jp, force) + wp.dot(ang, torque))

    @wp.func
    def transmission_gear(m: Model, w: int, trn: SiteTransmission):
        """A moment row transmission's gear (translation, rotation), its first component the
        world's actuator_gear."""
        g = trn.gear
        gear_t = vec3(m.actuator_gear[w % m.actuator_gear.shape[0], trn.actuator], g[1], g[2])
        return gear_t, vec3(g[3], g[4], g[5])

    @wp.func
    def zero_row(m: Model, d: Data, w: int, a: int):
        """actuator_moment[a] = 0 (the transmission then writes its non-zero entries)."""
        for i in range(m.nv):
            d.actuator_moment[w, a, i] = scalar(0.0)

    # The transmissions with a moment row, one function (and one kernel of the wide schedule) per
    # kind, each over the whole table and skipping the other kinds: in one kernel their branches'
    # adjoint would need more registers than a GPU thread should use.

    @wp.func
    def transmission_site(m: Model, d: Data, w: int, k: int):
        """The k-th moment row transmission if it is a site's (mj_transmission, mjTRN_SITE): its
        actuator's length and moment row (actuator_moment[a]). Without a reference site the
        length is 0 and the moment J_site' R_site gear; with one, gear . (the site's position in
        the reference frame, the rotation vector from the reference frame to the site's) and
        (J_site - J_ref)' R_ref gear without the shared dofs.

        Model: actuator_gear, actuator_trnsite, body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr,
        dof_ancestor_num, nv, site_bodyid, site_quat. Data in: site_xpos, site_xmat, xquat, cdof, subtree_com. Data
        out: actuator_length, actuator_moment (of the site's actuator)."""
        trn = m.actuator_trnsite[k]
        if trn.trntype == TrnType.SITE:
            a = trn.actuator
            gear_t, gear_r = transmission_gear(m, w, trn)
            zero_row(m, d, w, a)
            s = trn.site
            body = m.site_bodyid[s]
            length = scalar(0.0)
            if trn.refsite < 0:
                # the wrench gear in the site's frame, expressed in the world frame
                rot = d.site_xmat[w, s]
                site_moment_chain(m, d, w, a, body, d.site_xpos[w, s], rot * gear_t, rot * gear_r, -1, scalar(1.0))
            else:
                r = trn.refsite
                ref_body = m.site_bodyid[r]
                rot = d.site_xmat[w, r]
                force = rot * gear_t
                torque = rot * gear_r
                site_moment_chain(m, d, w, a, body, d.site_xpos[w, s], force, torque, trn.common, scalar(1.0))
                site_moment_chain(m, d, w, a, ref_body, d.site_xpos[w, r], force, torque, trn.common, scalar(-1.0))
                offset = wp.transpose(rot) * (d.site_xpos[w, s] - d.site_xpos[w, r])
                quat = d.xquat[w, body] * m.site_quat[s]
                ref_quat = d.xquat[w, ref_body] * m.site_quat[r]
                length = wp.dot(offset, gear_t) + wp.dot(sub_quat(quat, ref_quat), gear_r)
            d.actuator_length[w, a] = length

    @wp.func
    def transmission_joint(m: Model, d: Data, w: int, k: int):
        """The k-th moment row transmission if it is a ball or free joint's (mj_transmission,
        mjTRN_JOINT and mjTRN_JOINTINPARENT). A ball joint's length is gear[:3] . its rotation
        vector (mju_quat2Vel of the normalized quaternion), its moment gear[:3] on its three dofs;
        a free joint's length is 0, its moment the gear on its six. With jointinparent the
        rotational gear is given in the parent frame: R' gear, R the joint's rotation.

        Model: actuator_gear, actuator_trnsite, jnt_dofadr, jnt_qposadr, jnt_type, nv. Data in: qpos. Data out:
        actuator_length, actuator_moment (of the joint's actuator)."""
        trn = m.actuator_trnsite[k]
        if trn.trntype == TrnType.JOINT or trn.trntype == TrnType.JOINTINPARENT:
            a = trn.actuator
            gear_t, gear_r = transmission_gear(m, w, trn)
            zero_row(m, d, w, a)
            j = trn.jnt
            dof = m.jnt_dofadr[j]
            adr = m.jnt_qposadr[j]
            length = scalar(0.0)
            if m.jnt_type[j] == JointType.BALL:
                quat = quat_normalize(quat_from_qpos(d.qpos, w, adr))
                axis = gear_t
                if trn.trntype == TrnType.JOINTINPARENT:
                    axis = wp.quat_rotate_inv(quat, gear_t)
                length = wp.dot(quat_to_vel(quat), axis)
                for c in range(3):
                    d.actuator_moment[w, a, dof + c] = axis[c]
            else:
                axis = gear_r
                if trn.trntype == TrnType.JOINTINPARENT:
                    axis = wp.quat_rotate_inv(quat_normalize(quat_from_qpos(d.qpos, w, adr + 3)), gear_r)
                for c in range(3):
                    d.actuator_moment[w, a, dof + c] = gear_t[c]
                    d.actuator_moment[w, a, dof + 3 + c] = axis[c]
            d.actuator_length[w, a] = length

    @wp.func
    def transmission_slidercrank(m: Model, d: Data, w: int, k: int):
        """The k-th moment row transmission if it is a slider-crank (mj_transmission,
        mjTRN_SLIDERCRANK). With v = x_crank - x_slider, a the slider site's z axis and r the
        rod's length, the slider's length av - sqrt(det), det = av^2 + r^2 - v.v (av = a.v; av
        when det <= 0: the rod cannot reach), times gear[0]; its moment gear[0] (dl/dv' (J_crank
        - J_slider) + dl/da' J_a), J_a the axis's Jacobian with columns cdof_ang x a
        (mj_jacPointAxis): the exact derivative of the length, whose partial derivatives are
        dl/dv = a (1 - av / sqrt(det)) + v / sqrt(det), dl/da = v (1 - av / sqrt(det)) (v and a
        when det <= 0, as MuJoCo takes them).

        Model: actuator_gear, actuator_trnsite, body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr,
        dof_ancestor_num, nv, site_bodyid. Data in: site_xpos, site_xmat, cdof, subtree_com. Data out:
        actuator_length, actuator_moment (of the slider-crank's actuator)."""
        trn = m.actuator_trnsite[k]
        if trn.trntype == TrnType.SLIDERCRANK:
            a = trn.actuator
            gear = m.actuator_gear[w % m.actuator_gear.shape[0], a]
            zero_row(m, d, w, a)
            crank = trn.site
            slider = trn.refsite
            rot = d.site_xmat[w, slider]
            axis = vec3(rot[0, 2], rot[1, 2], rot[2, 2])
            v = d.site_xpos[w, crank] - d.site_xpos[w, slider]
            av = wp.dot(v, axis)
            rod = trn.cranklength
            det = av * av + rod * rod - wp.dot(v, v)
            length = av
            dl_dv = axis
            dl_da = v
            if det > scalar(0.0):
                sdet = wp.sqrt(det)
                length = av - sdet
                dl_dv = axis * (scalar(1.0) - av / sdet) + v / sdet
                dl_da = v * (scalar(1.0) - av / sdet)
            force = dl_dv * gear
            # dl/da . (cdof_ang x a) = cdof_ang . (a x dl/da): a torque on the slider's chain
            torque = wp.cross(dl_da, axis) * gear
            zero = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
            site_moment_chain(m, d, w, a, m.site_bodyid[crank], d.site_xpos[w, crank], force, zero, -1, scalar(1.0))
            site_moment_chain(m, d, w, a, m.site_bodyid[slider], d.site_xpos[w, slider], force, torque, -1,
                              scalar(-1.0))
            d.actuator_length[w, a] = length * gear

    # The body transmission (mj_transmission, mjTRN_BODY: adhesion), after the constraint rows
    # (mj_fwdPosition runs mj_transmission after mj_makeConstraint): its moment is minus the mean
    # over the body's contacts of the contact normals' Jacobians, each read from the contact's
    # constraint rows (the normal row for condim 1 and the elliptic cone, the mean of the 2 (dim - 1)
    # pyramid edges in the pyramidal cone) or, for a contact in the gap (no rows), computed at the
    # contact point; MuJoCo sums the rows' part (J' efc_force), adds the gap contacts' and scales by
    # -1 / count, and so does `body_moment`, one dof at a time.

    @wp.func
    def in_chain(m: Model, i: int, body: int):
        """Dof i moves `body` (it is the last dof of the body's chain or one of its ancestors)."""
        j = m.body_dofend[body]
        while j > i:
            j = m.dof_parentid[j]
        return j == i and i >= 0

    @wp.func
    def point_jac(m: Model, d: Data, w: int, body: int, point: vec3, i: int):
        """Column i of the translation Jacobian of `point` on `body` (mj_jac): cdof_lin + cdof_ang x
        (point - subtree_com of the root) when dof i moves the body, else 0."""
        jp = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        if in_chain(m, i, body):
            cdof = d.cdof[w, i]
            ang = vec3(cdof[0], cdof[1], cdof[2])
            jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(ang, point - d.subtree_com[w, m.body_rootid[body]])
        return jp

    @wp.func
    def body_contact(m: Model, d: Data, w: int, body: int, c: int):
        """What contact slot c is to a body transmission on `body`: 1 a contact of the body with
        constraint rows, 2 one in the gap (detected, beyond the margin that gives rows: MuJoCo's
        contact.exclude 1), 0 neither (no contact, another body's, or rows beyond the budget)."""
        kind = int(0)
        p = d.contact_pair[w, c]
        if p >= 0 and d.contact_active[w, c] != 0 and m.enable_constraint != 0:
            g = m.cpair_geom[p]
            if m.geom_bodyid[g[0]] == body or m.geom_bodyid[g[1]] == body:
                if d.contact_efc_adr[w, c] >= 0:
                    kind = 1
                elif d.contact_dist[w, c] >= m.cpair_margin[p]:
                    kind = 2
        return kind

    @wp.func
    def body_contact_count(m: Model, d: Data, w: int, body: int):
        """The number of a body's contacts, with rows or in the gap (mj_transmission's counter)."""
        count = int(0)
        for e in range(d.ncollision[w]):
            c0 = d.collision_adr[w, e]
            for c in range(c0, c0 + d.collision_nslot[w, e]):
                if body_contact(m, d, w, body, c) != 0:
                    count += 1
        return count

    @wp.func
    def body_moment_sums(m: Model, d: Data, w: int, body: int, i: int):
        """Column i of the body's contacts' normal Jacobians, summed: from their rows (J' efc_force
        with MuJoCo's weights), and apart those of the contacts in the gap, n . (J_2 - J_1) at the
        contact point (mj_jacDifPair)."""
        rows = scalar(0.0)
        gap = scalar(0.0)
        for e in range(d.ncollision[w]):
            c0 = d.collision_adr[w, e]
            for c in range(c0, c0 + d.collision_nslot[w, e]):
                kind = body_contact(m, d, w, body, c)
                p = d.contact_pair[w, c]
                # a row's entries outside its column set are stale (Data.efc_cols)
                if kind == 1 and m.efc_colmask[d.efc_cols[w, d.contact_efc_adr[w, c]], i] != 0:
                    r0 = d.contact_efc_adr[w, c]
                    dim = m.cpair_condim[p]
                    if dim == 1 or m.cone_elliptic != 0:
                        rows += d.efc_J[w, r0, i]
                    else:
                        weight = scalar(0.5) / scalar(dim - 1)
                        for k in range(2 * (dim - 1)):
                            rows += d.efc_J[w, r0 + k, i] * weight
                elif kind == 2:
                    g = m.cpair_geom[p]
                    pos = d.contact_pos[w, c]
                    dif = point_jac(m, d, w, m.geom_bodyid[g[1]], pos, i) - point_jac(m, d, w, m.geom_bodyid[g[0]],
                                                                                        pos, i)
                    frame = d.contact_frame[w, c]
                    gap += frame[0, 0] * dif[0] + frame[0, 1] * dif[1] + frame[0, 2] * dif[2]
        return rows, gap

    @wp.func
    def transmission_body(m: Model, d: Data, w: int, k: int):
        """The k-th moment row transmission, a body's (mj_transmission, mjTRN_BODY): length 0, the
        moment -(sum of the rows' part + sum of the gap contacts') / count over the body's
        contacts, 0 without any.

        Model: actuator_trnsite, body_dofend, body_rootid, cone_elliptic, cpair_condim, cpair_geom, cpair_margin,
        dof_parentid, efc_colmask, enable_constraint, geom_bodyid, nv. Data in: ncollision, collision_adr,
        collision_nslot, contact_pair, contact_active, contact_dist, contact_pos, contact_frame, contact_efc_adr,
        efc_cols, efc_J, cdof, subtree_com. Data out: actuator_length, actuator_moment (of the body's actuator)."""
        trn = m.actuator_trnsite[k]
        a = trn.actuator
        count = body_contact_count(m, d, w, trn.body)
        for i in range(m.nv):
            moment = scalar(0.0)
            if count > 0:
                rows, gap = body_moment_sums(m, d, w, trn.body, i)
                moment = (rows + gap) * (scalar(-1.0) / scalar(count))
            d.actuator_moment[w, a, i] = moment
        d.actuator_length[w, a] = scalar(0.0)

    @wp.func
    def site_velocity(m: Model, d: Data, w: int, a: int):
        """actuator_moment[a] qvel (mj_fwdVelocity's actuator_velocity of a site transmission)."""
        velocity = scalar(0.0)
        for i in range(m.nv):
            velocity = velocity + d.actuator_moment[w, a, i] * d.qvel[w, i]
        return velocity

    @wp.func
    def check_controls(m: Model, d: Data, w: int, e: int):
        """ctrl_bad[w]: 1 when any control of world w is NaN or beyond mjMAXVAL, which MuJoCo
        answers by zeroing them all (mj_fwdActuation's mju_isBad). Once per world (the pass over
        CONTROLS), before the actuators read it. (A `for` loop: this function is differentiated,
        and Warp's adjoint of a `while` loop would read ctrl at the index the loop ended with.)

        Model: nu. Data in: ctrl. Data out: ctrl_bad."""
        bad = int(0)
        for a in range(m.nu):
            if not (wp.abs(d.ctrl[w, a]) <= scalar(MAXVAL)):
                bad = 1
        d.ctrl_bad[w] = bad

    @wp.func
    def control(m: Model, d: Data, w: int, a: int):
        """The control actuator a reads: zero when any control of the world is bad (ctrl_bad),
        else ctrl clamped to ctrlrange (mj_fwdActuation's local copy)."""
        ctrl = d.ctrl[w, a]
        if d.ctrl_bad[w] != 0:
            ctrl = scalar(0.0)
        if m.enable_clampctrl and m.actuator[a].ctrllimited:
            r = m.actuator[a].ctrlrange
            ctrl = wp.clamp(ctrl, r[0], r[1])
        return ctrl

    @wp.func
    def next_activation(m: Model, act: wp.array2d(dtype=scalar), w: int, a: int, act_dot: scalar):
        """Actuator a's activation after a step of act_dot from act[w, actadr] (mj_nextActivation,
        engine_support.c): filterexact integrates its filter exactly,
        act + act_dot tau (1 - exp(-h / tau)), every other dyntype by Euler, act + act_dot h;
        then clamped to actrange when actlimited.

        Model: actuator, timestep. In: act."""
        h = m.timestep
        value = act[w, m.actuator[a].actadr]
        if m.actuator[a].dyntype == DynType.FILTEREXACT:
            tau = wp.max(scalar(MINVAL), m.actuator[a].dynprm)
            value = value + act_dot * tau * (scalar(1.0) - wp.exp(-h / tau))
        else:
            value = value + act_dot * h
        if m.actuator[a].actlimited:
            r = m.actuator[a].actrange
            value = wp.clamp(value, r[0], r[1])
        return value

    @wp.func
    def advance_activation(m: Model, act0: wp.array2d(dtype=scalar), act_dot: wp.array2d(dtype=scalar),
                           act1: wp.array2d(dtype=scalar), w: int, a: int):
        """act1 = actuator a's activation advanced from act0 by act_dot over one step (mj_advance):
        mj_nextActivation, with act_dot taken as 0 when the actuator's group is disabled;
        unchanged when actuation is disabled. act1 may alias act0 (read before written).

        Model: actuator, enable_actuation, timestep. In: act0, act_dot. Out: act1 (the actuator's activation)."""
        adr = m.actuator[a].actadr
        if adr >= 0:
            value = act0[w, adr]
            if m.enable_actuation:
                rate = scalar(0.0)
                if m.actuator[a].enabled:
                    rate = act_dot[w, adr]
                value = next_activation(m, act0, w, a, rate)
            act1[w, adr] = value

    @wp.func
    def actuator_input(m: Model, d: Data, w: int, a: int, ctrl: scalar):
        """What the gain multiplies: ctrl for a stateless actuator, else its activation, or with
        actearly the next one (mj_fwdActuation, mjd_actuator_vel)."""
        value = ctrl
        adr = m.actuator[a].actadr
        if adr >= 0:
            value = d.act[w, adr]
            if m.actuator[a].actearly:
                value = next_activation(m, d.act, w, a, d.act_dot[w, adr])
        return value

    # Muscles (engine_util_misc.c: mju_muscleGainLength, mju_muscleGain, mju_muscleBias,
    # mju_muscleDynamics, mju_sigmoid; engine_derivative.c: mjd_muscleGain_vel), in MuJoCo's
    # order of operations. The parameters: simrl.sim.model.muscle_struct.

    @wp.func
    def muscle_length_curve(length: scalar, lmin: scalar, lmax: scalar):
        """The normalized length-gain curve: 0 outside [lmin, lmax], half-quadratics rising to 1
        at the optimum length 1 (mju_muscleGainLength)."""
        out = scalar(0.0)
        if lmin <= length and length <= lmax:
            a = scalar(0.5) * (lmin + scalar(1.0))
            b = scalar(0.5) * (scalar(1.0) + lmax)
            x = scalar(0.0)
            if length <= a:
                x = (length - lmin) / wp.max(scalar(MINVAL), a - lmin)
                out = scalar(0.5) * x * x
            elif length <= scalar(1.0):
                x = (scalar(1.0) - length) / wp.max(scalar(MINVAL), scalar(1.0) - a)
                out = scalar(1.0) - scalar(0.5) * x * x
            elif length <= b:
                x = (length - scalar(1.0)) / wp.max(scalar(MINVAL), b - scalar(1.0))
                out = scalar(1.0) - scalar(0.5) * x * x
            else:
                x = (lmax - length) / wp.max(scalar(MINVAL), lmax - b)
                out = scalar(0.5) * x * x
        return out

    @wp.func
    def muscle_peak(force: scalar, scale: scalar, acc0: scalar):
        """The peak force: `force`, or when it is negative scale / acc0."""
        out = force
        if force < scalar(0.0):
            out = scale / wp.max(scalar(MINVAL), acc0)
        return out

    @wp.func
    def muscle_gain(mu: Muscle, length: scalar, velocity: scalar):
        """A muscle's gain -F FL(L) FV(V) at its length and velocity (mju_muscleGain) and its
        derivative in the velocity (mjd_muscleGain_vel)."""
        force = muscle_peak(mu.gain_force, mu.gain_scale, mu.acc0)
        lr = mu.lengthrange
        L0 = (lr[1] - lr[0]) / wp.max(scalar(MINVAL), mu.gain_range[1] - mu.gain_range[0])
        L = mu.gain_range[0] + (length - lr[0]) / wp.max(scalar(MINVAL), L0)
        V = velocity / wp.max(scalar(MINVAL), L0 * mu.gain_vmax)
        FL = muscle_length_curve(L, mu.gain_lmin, mu.gain_lmax)
        fvmax = mu.gain_fvmax
        y = fvmax - scalar(1.0)
        FV = fvmax
        dFV = scalar(0.0)
        if V <= scalar(-1.0):
            FV = scalar(0.0)
        elif V <= scalar(0.0):
            FV = (V + scalar(1.0)) * (V + scalar(1.0))
            dFV = scalar(2.0) * V + scalar(2.0)
        elif V <= y:
            FV = fvmax - (y - V) * (y - V) / wp.max(scalar(MINVAL), y)
            dFV = (scalar(-2.0) * V + scalar(2.0) * y) / wp.max(scalar(MINVAL), y)
        return -force * FL * FV, -force * FL * dFV / wp.max(scalar(MINVAL), L0 * mu.gain_vmax)

    @wp.func
    def muscle_bias(mu: Muscle, length: scalar):
        """A muscle's passive force (mju_muscleBias): 0 up to the optimum length, a
        half-quadratic to (1 + lmax) / 2, linear beyond."""
        force = muscle_peak(mu.bias_force, mu.bias_scale, mu.acc0)
        lr = mu.lengthrange
        L0 = (lr[1] - lr[0]) / wp.max(scalar(MINVAL), mu.bias_range[1] - mu.bias_range[0])
        L = mu.bias_range[0] + (length - lr[0]) / wp.max(scalar(MINVAL), L0)
        b = scalar(0.5) * (scalar(1.0) + mu.bias_lmax)
        out = scalar(0.0)
        if L > scalar(1.0):
            if L <= b:
                x = (L - scalar(1.0)) / wp.max(scalar(MINVAL), b - scalar(1.0))
                out = -force * mu.bias_fpmax * scalar(0.5) * x * x
            else:
                x = (L - b) / wp.max(scalar(MINVAL), b - scalar(1.0))
                out = -force * mu.bias_fpmax * (scalar(0.5) + x)
        return out

    @wp.func
    def sigmoid(x: scalar):
        """mju_sigmoid: the quintic 6x^5 - 15x^4 + 10x^3 on [0, 1], 0 below, 1 above."""
        out = scalar(0.0)
        if x >= scalar(1.0):
            out = scalar(1.0)
        elif x > scalar(0.0):
            out = x * x * x * (scalar(3.0) * x * (scalar(2.0) * x - scalar(5.0)) + scalar(10.0))
        return out

    @wp.func
    def muscle_rate(mu: Muscle, ctrl: scalar, act: scalar):
        """A muscle's act_dot (mju_muscleDynamics): (ctrl - act) / tau with ctrl clamped to [0, 1],
        tau the activation or deactivation time scaled by the activation (Millard et al. 2013),
        switched by the sign of ctrl - act or blended by a sigmoid of that width."""
        ctrlclamp = wp.clamp(ctrl, scalar(0.0), scalar(1.0))
        actclamp = wp.clamp(act, scalar(0.0), scalar(1.0))
        tau_act = mu.tau_act * (scalar(0.5) + scalar(1.5) * actclamp)
        tau_deact = mu.tau_deact / (scalar(0.5) + scalar(1.5) * actclamp)
        dctrl = ctrlclamp - act
        tau = tau_deact
        if mu.smoothing < scalar(MINVAL):
            if dctrl > scalar(0.0):
                tau = tau_act
        else:
            tau = tau_deact + (tau_act - tau_deact) * sigmoid(dctrl / mu.smoothing + scalar(0.5))
        return dctrl / wp.max(scalar(MINVAL), tau)

    def make_act_rate(muscles: bool):
        @wp.func
        def act_rate(m: Model, d: Data, w: int, a: int, ctrl: scalar):
            """act_dot of stateful actuator a when actuation is enabled (mj_fwdActuation): ctrl for an
            integrator, (ctrl - act) / tau for both filters (tau = max(mjMINVAL, dynprm[0])), with
            `muscles` the muscle dynamics for a muscle."""
            rate = ctrl
            if m.actuator[a].dyntype == DynType.FILTER or m.actuator[a].dyntype == DynType.FILTEREXACT:
                tau = wp.max(scalar(MINVAL), m.actuator[a].dynprm)
                rate = (ctrl - d.act[w, m.actuator[a].actadr]) / tau
            if wp.static(muscles):
                if m.actuator[a].dyntype == DynType.MUSCLE:
                    rate = muscle_rate(m.actuator[a].muscle, ctrl, d.act[w, m.actuator[a].actadr])
            return rate
        return act_rate

    def make_gain_bias(muscles: bool):
        @wp.func
        def gain_bias(m: Model, d: Data, w: int, a: int, length: scalar, velocity: scalar, value: scalar):
            """Actuator a's force before any limit (mj_fwdActuation): gain * value + bias, the gain
            and bias affine in the actuator's length and velocity when their types say so, with
            `muscles` a muscle's; and the gain's derivative in the velocity (an affine gain's
            gainprm[2], a muscle's; read only for those two)."""
            gp = m.actuator_gainprm[w % m.actuator_gainprm.shape[0], a]
            gain = gp[0]
            if m.actuator[a].gaintype == GainType.AFFINE:
                gain = gp[0] + gp[1] * length + gp[2] * velocity
            gain_vel = gp[2]
            frc = scalar(0.0)
            if wp.static(not muscles):
                frc = gain * value
                if m.actuator[a].biastype == BiasType.AFFINE:
                    bp = m.actuator_biasprm[w % m.actuator_biasprm.shape[0], a]
                    frc = frc + (bp[0] + bp[1] * length + bp[2] * velocity)
            else:
                bias = scalar(0.0)
                if m.actuator[a].biastype == BiasType.AFFINE:
                    bp = m.actuator_biasprm[w % m.actuator_biasprm.shape[0], a]
                    bias = bp[0] + bp[1] * length + bp[2] * velocity
                if m.actuator[a].gaintype == GainType.MUSCLE:
                    gain, gain_vel = muscle_gain(m.actuator[a].muscle, length, velocity)
                if m.actuator[a].biastype == BiasType.MUSCLE:
                    bias = muscle_bias(m.actuator[a].muscle, length)
                frc = gain * value + bias
            return frc, gain_vel
        return gain_bias

    # the plain actuators' (no muscle model) and the rich ones' (Model.rich_actuator)
    act_rate, act_rate_rich = make_act_rate(False), make_act_rate(True)
    gain_bias, gain_bias_rich = make_gain_bias(False), make_gain_bias(True)

    @wp.func
    def gain_input(m: Model, d: Data, w: int, a: int):
        """actuator_input with the control as force_vel reads it (clamped to ctrlrange when
        clampctrl is enabled), one early return per kind of input."""
        adr = m.actuator[a].actadr
        if adr < 0:
            ctrl = d.ctrl[w, a]
            if m.enable_clampctrl and m.actuator[a].ctrllimited:
                r = m.actuator[a].ctrlrange
                return wp.clamp(ctrl, r[0], r[1])
            return ctrl
        if m.actuator[a].actearly:
            return next_activation(m, d.act, w, a, d.act_dot[w, adr])
        return d.act[w, adr]

    @wp.func
    def rich_force_vel(m: Model, d: Data, w: int, a: int, gain_vel: scalar, held: bool):
        """d actuator_force[a] / d actuator_velocity[a] of a rich actuator (mjd_actuator_vel,
        engine_derivative.c): the affine bias's kv term biasprm[2] plus
        the gain's velocity derivative gain_vel (an affine gain's gainprm[2], a muscle's
        mjd_muscleGain_vel; a muscle's bias does not depend on the velocity) times what the
        gain multiplies (as `force_vel`'s); zero when actuation or the actuator is disabled or
        when a limit holds the force (`held`: forcerange, or its tendon's actuatorfrcrange)."""
        deriv = scalar(0.0)
        if m.enable_actuation and m.actuator[a].enabled and not held:
            if m.actuator[a].biastype == BiasType.AFFINE:
                deriv = m.actuator_biasprm[w % m.actuator_biasprm.shape[0], a][2]
            if m.actuator[a].gaintype == GainType.AFFINE or m.actuator[a].gaintype == GainType.MUSCLE:
                deriv = deriv + gain_vel * gain_input(m, d, w, a)
        return deriv

    @wp.func
    def tendon_total(m: Model, d: Data, w: int, t: int):
        """The total force before any limit of the actuators on tendon t (their actuator_force_raw),
        summed in actuator order (mj_fwdActuation's). A function of its own: Warp's adjoint of
        a function that loops over a run-time range sees a variable the loop accumulates at its
        value before the loop, so the sum's use (`rich_limit`) must not share the loop's
        function."""
        total = scalar(0.0)
        for b in range(m.nu):
            if m.actuator[b].tendon == t:
                total = total + d.actuator_force_raw[w, b][0]
        return total

    @wp.func
    def tendon_bound(m: Model, t: int, total: scalar):
        """Whether tendon t's actuatorfrcrange holds the total force of its actuators (at or beyond a
        bound: MuJoCo 4.0's mjd_actuator_vel then leaves their velocity derivatives out, measured:
        tests/test_tendon.py)."""
        r = m.tendon[t].actfrcrange
        return total <= r[0] or total >= r[1]

    @wp.func
    def rich_limit(m: Model, d: Data, w: int, k: int):
        """The k-th rich actuator's force from its actuator_force_raw (the pass before): on a tendon
        with actuatorfrclimited scaled by range / total when the total force of the tendon's
        actuators (all rich) lies outside the tendon's actuatorfrcrange (mj_fwdActuation,
        engine_forward.c), then clamped to its forcerange; with implicitfast its velocity
        derivative (rich_force_vel, zero when a limit holds the force) into actuator_qderiv.

        Model: actuator, actuator_forcerange, implicitfast, nu, rich_actuator, tendon and rich_force_vel's. Data
        in: actuator_force_raw and rich_force_vel's. Data out: actuator_force, actuator_qderiv (implicitfast)."""
        a = m.rich_actuator[k]
        raw = d.actuator_force_raw[w, a]
        frc = raw[0]
        held = False
        t = m.actuator[a].tendon
        if t >= 0:
            if m.tendon[t].actfrclimited:
                total = tendon_total(m, d, w, t)
                r = m.tendon[t].actfrcrange
                if total != scalar(0.0):
                    if total < r[0]:
                        frc = frc * (r[0] / total)
                    elif total > r[1]:
                        frc = frc * (r[1] / total)
                held = tendon_bound(m, t, total)
        if m.actuator[a].forcelimited:
            r = m.actuator_forcerange[w % m.actuator_forcerange.shape[0], a]
            frc = wp.clamp(frc, r[0], r[1])
            held = held or frc <= r[0] or frc >= r[1]
        d.actuator_force[w, a] = frc
        if m.implicitfast:
            d.actuator_qderiv[w, a] = rich_force_vel(m, d, w, a, raw[1], held)

    def make_actuator(transmission: bool, act_dot: bool, force: bool, rich: bool = False):
        """`actuator` with any of its three parts: the transmission's length and velocity, the
        activation's rate act_dot, the force. The engine's step runs all three in one pass; the
        differentiable step launches them apart (in one kernel their generated adjoint needs
        more registers than a GPU thread should use), each later part reading what the earlier
        wrote.

        `rich`: the function of element k of the rich actuators (Model.rich_actuator: muscles,
        actuators on a tendon with actuatorfrcrange), with the muscle model, whose force part
        leaves the limits to `rich_limit`; else the plain actuators' without it, whose act_dot
        and force parts leave the rich actuators out (passes of their own: the muscle model and
        a tendon's sum would otherwise take registers in every model's kernel)."""
        rate_of = act_rate_rich if rich else act_rate
        gain_bias_of = gain_bias_rich if rich else gain_bias

        @wp.func
        def actuator_parts(m: Model, d: Data, w: int, a: int):
            """Actuator a's transmission, activation rate and force (the parts `make_actuator` was asked for).

            Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, actuator_gear, enable_actuation,
            enable_clampctrl, nu, nv, tendon, timestep. Data in: qpos, qvel, ten_length, ten_velocity, actuator_moment,
            ctrl, ctrl_bad, act; the parts after the transmission actuator_length, actuator_velocity, act_dot. Data out:
            actuator_length, actuator_velocity (transmission), act_dot (act_dot), actuator_force (force; a rich
            actuator's actuator_force_raw: force and gain_vel, for rich_limit)."""
            # transmission (mj_transmission, mj_fwdVelocity): length and velocity along the joint or
            # the tendon, scaled by the gear; a transmission with a moment row (site, slider-crank,
            # ball or free joint) has its length from its pass (transmission_site), its velocity
            # moment qvel
            length = scalar(0.0)
            velocity = scalar(0.0)
            if wp.static(transmission):
                gear = m.actuator_gear[w % m.actuator_gear.shape[0], a]
                t = m.actuator[a].tendon
                if m.actuator[a].moment_row != 0:
                    length = d.actuator_length[w, a]
                    velocity = site_velocity(m, d, w, a)
                else:
                    if t >= 0:
                        length = d.ten_length[w, t] * gear
                        velocity = d.ten_velocity[w, t] * gear
                    else:
                        length = d.qpos[w, m.actuator[a].qposadr] * gear
                        velocity = d.qvel[w, m.actuator[a].dofadr] * gear
                    d.actuator_length[w, a] = length
                d.actuator_velocity[w, a] = velocity
            elif wp.static(force):
                length = d.actuator_length[w, a]
                velocity = d.actuator_velocity[w, a]
            adr = m.actuator[a].actadr
            ctrl = scalar(0.0)
            if wp.static(act_dot or force):
                if m.enable_actuation:
                    ctrl = control(m, d, w, a)
            if wp.static(act_dot):
                # act_dot of a stateful actuator, also when its group is disabled (as MuJoCo's);
                # zero when actuation is disabled (mj_fwdActuation returns early: the activation
                # does not move, mj_advance skips it)
                if adr >= 0:
                    rate = scalar(0.0)
                    if m.enable_actuation:
                        rate = rate_of(m, d, w, a, ctrl)
                    d.act_dot[w, adr] = rate
            if wp.static(force):
                frc = scalar(0.0)
                # an actuator in a group listed in opt.disableactuator produces no force
                gain_vel = scalar(0.0)
                if m.enable_actuation and m.actuator[a].enabled:
                    frc, gain_vel = gain_bias_of(m, d, w, a, length, velocity, actuator_input(m, d, w, a, ctrl))
                if wp.static(rich):
                    # before the limits, which need the other actuators' (rich_limit)
                    d.actuator_force_raw[w, a] = vec2(frc, gain_vel)
                else:
                    if m.actuator[a].forcelimited:
                        r = m.actuator_forcerange[w % m.actuator_forcerange.shape[0], a]
                        frc = wp.clamp(frc, r[0], r[1])
                    d.actuator_force[w, a] = frc

        if rich:
            @wp.func
            def actuator(m: Model, d: Data, w: int, k: int):
                actuator_parts(m, d, w, m.rich_actuator[k])
        elif act_dot or force:
            @wp.func
            def actuator(m: Model, d: Data, w: int, a: int):
                if m.actuator[a].rich == 0:
                    actuator_parts(m, d, w, a)
        else:
            actuator = actuator_parts
        return actuator

    @wp.func
    def transmission_adjoint(m: Model, d: Data, adj: Data, w: int, a: int):
        """The transmission part of actuator a (`make_actuator`'s, the differentiable step's
        actuation_transmission pass) backwards: the adjoints of actuator_length and
        actuator_velocity to their inputs, gear times them into the joint's qpos and qvel or the
        tendon's length and velocity; a moment row's velocity (moment qvel) into
        actuator_moment[a] and qvel (its length is its pass's, transmission_site). Several
        actuators can act on one joint or tendon: those sums are atomic (as a generated
        adjoint's).

        Model: actuator, actuator_gear, nv. Data in: actuator_moment, qvel. Adjoints in:
        actuator_length, actuator_velocity. Adjoints out: qpos, qvel, ten_length, ten_velocity,
        actuator_moment."""
        v_bar = adj.actuator_velocity[w, a]
        if m.actuator[a].moment_row != 0:
            for i in range(m.nv):
                adj.actuator_moment[w, a, i] = adj.actuator_moment[w, a, i] + v_bar * d.qvel[w, i]
                wp.atomic_add(adj.qvel, w, i, v_bar * d.actuator_moment[w, a, i])
            return
        gear = m.actuator_gear[w % m.actuator_gear.shape[0], a]
        l_bar = adj.actuator_length[w, a]
        t = m.actuator[a].tendon
        if t >= 0:
            wp.atomic_add(adj.ten_length, w, t, l_bar * gear)
            wp.atomic_add(adj.ten_velocity, w, t, v_bar * gear)
        else:
            wp.atomic_add(adj.qpos, w, m.actuator[a].qposadr, l_bar * gear)
            wp.atomic_add(adj.qvel, w, m.actuator[a].dofadr, v_bar * gear)

    @wp.func
    def force_adjoint(m: Model, d: Data, adj: Data, adj_m: Model, w: int, a: int):
        """The force part of a plain actuator a (`make_actuator`'s, the differentiable step's
        actuation_actuator pass; a rich actuator's is its own pass's) backwards. With f the
        adjoint of actuator_force[a], zero where forcerange clamps the force (wp.clamp's
        adjoint: the force inside the range or on a bound passes it), and the force
            gain(L, V) x + bias(L, V),  gain = g0 (+ g1 L + g2 V affine),  bias = b0 + b1 L + b2 V (affine)
        of the length L, velocity V and what the gain multiplies x (the control, clamped to
        ctrlrange when clampctrl is enabled and zero when any control of the world is bad; or the
        activation, with actearly the next one, clamped to actrange when actlimited):
            x_bar = f gain, L_bar += f (g1 x + b1), V_bar += f (g2 x + b2), gainprm_bar += f x (1, L, V)
        (the gain's parameters: simrl.diff's actuator_gain, where it has an adjoint array). Each
        thread adds into its actuator's own elements only.

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, enable_actuation,
        enable_clampctrl, timestep. Data in: actuator_length, actuator_velocity, ctrl, ctrl_bad,
        act, act_dot. Adjoints in: actuator_force. Adjoints out: actuator_length,
        actuator_velocity, ctrl, act, act_dot; Model adjoint: actuator_gainprm."""
        if m.actuator[a].rich != 0 or not (m.enable_actuation and m.actuator[a].enabled):
            return
        f_bar = adj.actuator_force[w, a]
        length = d.actuator_length[w, a]
        velocity = d.actuator_velocity[w, a]
        value = actuator_input(m, d, w, a, control(m, d, w, a))
        gp = m.actuator_gainprm[w % m.actuator_gainprm.shape[0], a]
        affine_gain = m.actuator[a].gaintype == GainType.AFFINE
        affine_bias = m.actuator[a].biastype == BiasType.AFFINE
        gain = gp[0]
        if affine_gain:
            gain = gp[0] + gp[1] * length + gp[2] * velocity
        bp = m.actuator_biasprm[w % m.actuator_biasprm.shape[0], a]
        frc = gain * value
        if affine_bias:
            frc = frc + (bp[0] + bp[1] * length + bp[2] * velocity)
        if m.actuator[a].forcelimited:
            r = m.actuator_forcerange[w % m.actuator_forcerange.shape[0], a]
            if frc < r[0] or frc > r[1]:
                return
        l_bar = scalar(0.0)
        v_bar = scalar(0.0)
        if affine_gain:
            l_bar = f_bar * value * gp[1]
            v_bar = f_bar * value * gp[2]
        if affine_bias:
            l_bar = l_bar + f_bar * bp[1]
            v_bar = v_bar + f_bar * bp[2]
        adj.actuator_length[w, a] = adj.actuator_length[w, a] + l_bar
        adj.actuator_velocity[w, a] = adj.actuator_velocity[w, a] + v_bar
        if adj_m.actuator_gainprm.shape[0] > 0:
            g_bar = vec3(f_bar * value, scalar(0.0), scalar(0.0))
            if affine_gain:
                g_bar = vec3(f_bar * value, f_bar * value * length, f_bar * value * velocity)
            adj_m.actuator_gainprm[w, a] = adj_m.actuator_gainprm[w, a] + g_bar
        x_bar = f_bar * gain
        adr = m.actuator[a].actadr
        if adr < 0:  # the control, as `control` read it
            if d.ctrl_bad[w] == 0 and adj.ctrl.shape[0] > 0:
                ctrl = d.ctrl[w, a]
                inside = True
                if m.enable_clampctrl and m.actuator[a].ctrllimited:
                    cr = m.actuator[a].ctrlrange
                    inside = ctrl >= cr[0] and ctrl <= cr[1]
                if inside:
                    adj.ctrl[w, a] = adj.ctrl[w, a] + x_bar
        elif m.actuator[a].actearly:  # next_activation(act, act_dot) of the activation
            h = m.timestep
            rate = h
            if m.actuator[a].dyntype == DynType.FILTEREXACT:
                tau = wp.max(scalar(MINVAL), m.actuator[a].dynprm)
                rate = tau * (scalar(1.0) - wp.exp(-h / tau))
            inside = True
            if m.actuator[a].actlimited:  # next_activation's value before its clamp, as it computes it
                next_value = d.act[w, adr] + d.act_dot[w, adr] * h
                if m.actuator[a].dyntype == DynType.FILTEREXACT:
                    tau = wp.max(scalar(MINVAL), m.actuator[a].dynprm)
                    next_value = d.act[w, adr] + d.act_dot[w, adr] * tau * (scalar(1.0) - wp.exp(-h / tau))
                ar = m.actuator[a].actrange
                inside = next_value >= ar[0] and next_value <= ar[1]
            if inside:
                adj.act[w, adr] = adj.act[w, adr] + x_bar
                adj.act_dot[w, adr] = adj.act_dot[w, adr] + x_bar * rate
        else:
            adj.act[w, adr] = adj.act[w, adr] + x_bar

    @wp.func
    def force_vel(m: Model, d: Data, w: int, a: int):
        """d actuator_force[a] / d actuator_velocity[a] (mjd_actuator_vel, engine_derivative.c):
        the affine bias's kv term biasprm[2] plus the affine gain's gainprm[2] times what the
        gain multiplies (the control clamped to ctrlrange, as the installed MuJoCo uses it; with
        activation dynamics the activation, with actearly the next one), zero when actuation or
        the actuator is disabled or when forcerange clamps the force. The activations of the
        supported dyntypes do not depend on the velocity. A rich actuator's (a muscle's gain,
        a force-limited tendon's) is its pass's, in actuator_qderiv (rich_limit).

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, enable_actuation, enable_clampctrl,
        timestep. Data in: actuator_force, actuator_qderiv (of the rich actuators), ctrl, act, act_dot."""
        deriv = scalar(0.0)
        if m.actuator[a].rich != 0:
            deriv = d.actuator_qderiv[w, a]
        elif m.enable_actuation and m.actuator[a].enabled:
            clamped = False
            if m.actuator[a].forcelimited:
                r = m.actuator_forcerange[w % m.actuator_forcerange.shape[0], a]
                force = d.actuator_force[w, a]
                clamped = force <= r[0] or force >= r[1]
            if not clamped:
                if m.actuator[a].biastype == BiasType.AFFINE:
                    deriv = m.actuator_biasprm[w % m.actuator_biasprm.shape[0], a][2]
                if m.actuator[a].gaintype == GainType.AFFINE:
                    deriv = deriv + m.actuator_gainprm[w % m.actuator_gainprm.shape[0], a][2] * \
                        gain_input(m, d, w, a)
        return deriv

    @wp.func
    def qderiv_dof(m: Model, d: Data, w: int, i: int):
        """qDeriv[i, i] = d qfrc_actuator[i] / d qvel[i]: gear^2 force_vel of the actuators on dof
        i (joint transmissions of hinges and slides act on one dof each, so the actuators'
        part of qDeriv is diagonal; mjd_actuator_vel adds moment' force_vel moment). Zero when
        the joint's actuatorfrcrange clamps their sum (as the installed MuJoCo 4.0 does).

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, actuator_gear, dof_actuator,
        dof_actuator_adr, dof_actuator_num, dof_jntid, enable_actuation, enable_clampctrl, jnt_actfrclimited,
        jnt_actfrcrange, timestep. Data in: actuator_force, ctrl, act, act_dot, qfrc_actuator_raw."""
        deriv = scalar(0.0)
        wg = w % m.actuator_gear.shape[0]
        adr = m.dof_actuator_adr[i]
        for k in range(adr, adr + m.dof_actuator_num[i]):
            a = m.dof_actuator[k]
            # tendons and moment rows (sites, slider-cranks, ball and free joints) couple dofs:
            # simrl.sim.euler adds their terms
            if m.actuator[a].tendon < 0 and m.actuator[a].moment_row == 0:
                gear = m.actuator_gear[wg, a]
                deriv = deriv + gear * (gear * force_vel(m, d, w, a))
        j = m.dof_jntid[i]
        if m.jnt_actfrclimited[j]:
            r = m.jnt_actfrcrange[j]
            raw = d.qfrc_actuator_raw[w, i]
            if raw <= r[0] or raw >= r[1]:
                deriv = scalar(0.0)
        return deriv

    @wp.func
    def site_force_vel(m: Model, d: Data, w: int, a: int):
        """actuator_qderiv[a]: force_vel of an actuator with a moment row, else 0; a rich
        actuator's is its pass's (rich_limit), left as it is.

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, enable_actuation, enable_clampctrl,
        timestep. Data in: actuator_force, ctrl, act, act_dot. Data out: actuator_qderiv."""
        if m.actuator[a].rich == 0:
            deriv = scalar(0.0)
            if m.actuator[a].moment_row != 0:
                deriv = force_vel(m, d, w, a)
            d.actuator_qderiv[w, a] = deriv

    @wp.func
    def site_qderiv(m: Model, d: Data, w: int, i: int, j: int):
        """The site transmissions' part of qDeriv[i, j]: actuator_qderiv moment[i] moment[j]
        summed over the site actuators on dof i (mjd_actuator_vel's moment' force_vel moment),
        after `site_force_vel` (a table read keeps this small: it is inlined into every entry
        of a free body's 6x6 block).

        Model: dof_actuator, dof_actuator_adr, dof_actuator_num. Data in: actuator_qderiv, actuator_moment."""
        deriv = scalar(0.0)
        adr = m.dof_actuator_adr[i]
        for k in range(adr, adr + m.dof_actuator_num[i]):
            a = m.dof_actuator[k]
            deriv = deriv + d.actuator_qderiv[w, a] * (d.actuator_moment[w, a, i] * d.actuator_moment[w, a, j])
        return deriv

    @wp.func
    def dof(m: Model, d: Data, w: int, i: int):
        """qfrc_actuator[i]: gear x force of the actuators on dof i, in ascending order, into
        qfrc_actuator_raw; then the joint-level limit (actuatorfrcrange) into a second array, so
        that no element is overwritten after it was read (exact adjoints).

        Model: actuator, actuator_gear, dof_actuator, dof_actuator_adr, dof_actuator_num, dof_jntid, enable_actuation,
        enable_gravcomp, jnt_actfrclimited, jnt_actfrcrange, jnt_actgravcomp, nu. Data in: actuator_force,
        actuator_moment, ten_J, qfrc_gravcomp. Data out: qfrc_actuator_raw, qfrc_actuator."""
        d.qfrc_actuator_raw[w, i] = scalar(0.0)
        wg = w % m.actuator_gear.shape[0]
        adr = m.dof_actuator_adr[i]
        for k in range(adr, adr + m.dof_actuator_num[i]):
            a = m.dof_actuator[k]
            # the moment: the gear, times ten_J[t, i] for a tendon transmission; else its row
            moment = m.actuator_gear[wg, a]
            t = m.actuator[a].tendon
            if m.actuator[a].moment_row != 0:
                moment = d.actuator_moment[w, a, i]
            elif t >= 0:
                moment = moment * d.ten_J[w, t, i]
            d.qfrc_actuator_raw[w, i] += moment * d.actuator_force[w, a]
        frc = d.qfrc_actuator_raw[w, i]
        j = m.dof_jntid[i]
        # actuator-level gravity compensation (<joint actuatorgravcomp>, mj_fwdActuation): added
        # before the joint's limit; lost when the model has no actuators or actuation is disabled
        if m.enable_gravcomp != 0 and m.jnt_actgravcomp[j] != 0 and m.nu > 0 and m.enable_actuation != 0:
            frc = frc + d.qfrc_gravcomp[w, i]
        if m.jnt_actfrclimited[j]:
            r = m.jnt_actfrcrange[j]
            frc = wp.clamp(frc, r[0], r[1])
        d.qfrc_actuator[w, i] = frc

    @wp.func
    def dof_adjoint(m: Model, d: Data, adj: Data, w: int, i: int):
        """`dof` of dof i backwards, with the terms of `smooth_force_dof` but qfrc_passive's and
        qfrc_bias's (simrl.sim.passive.dof_adjoint, simrl.sim.rne.rne_dof_adjoint): qfrc_applied
        gets adj qfrc_smooth[i]; the joint's limit passes the adjoint a of qfrc_actuator[i] (adj
        qfrc_actuator[i] + adj qfrc_smooth[i]) where the force lies in actfrcrange (as
        wp.clamp's adjoint), to actuator-level gravcomp and to qfrc_actuator_raw, whose adjoint r
        then reaches each actuator's force (moment r) and moment (force r: actuator_moment[a, i],
        or gear times ten_J[t, i]). A joint actuator acts on dof i alone; the others' forces take
        the sum of their dofs atomically (a generated adjoint's way).

        Model: actuator, actuator_gear, dof_actuator, dof_actuator_adr, dof_actuator_num, dof_jntid,
        enable_actuation, enable_gravcomp, jnt_actfrclimited, jnt_actfrcrange, jnt_actgravcomp, nu. Data in:
        actuator_force, actuator_moment, ten_J, qfrc_actuator_raw, qfrc_gravcomp. Adjoints in: qfrc_smooth,
        qfrc_actuator, qfrc_actuator_raw. Adjoints out: qfrc_applied, qfrc_gravcomp, actuator_force,
        actuator_moment (row entries at i), ten_J (column i)."""
        g = adj.qfrc_smooth[w, i]
        if adj.qfrc_applied.shape[0] > 0:  # an input without a gradient has no adjoint array
            adj.qfrc_applied[w, i] = adj.qfrc_applied[w, i] + g
        a_bar = adj.qfrc_actuator[w, i] + g
        j = m.dof_jntid[i]
        frc = d.qfrc_actuator_raw[w, i]
        gravcomp = m.enable_gravcomp != 0 and m.jnt_actgravcomp[j] != 0 and m.nu > 0 and m.enable_actuation != 0
        if gravcomp:
            frc = frc + d.qfrc_gravcomp[w, i]
        if m.jnt_actfrclimited[j]:
            r = m.jnt_actfrcrange[j]
            if frc < r[0] or frc > r[1]:
                a_bar = scalar(0.0)
        if gravcomp:
            adj.qfrc_gravcomp[w, i] = adj.qfrc_gravcomp[w, i] + a_bar
        raw_bar = adj.qfrc_actuator_raw[w, i] + a_bar
        wg = w % m.actuator_gear.shape[0]
        adr = m.dof_actuator_adr[i]
        for k in range(adr, adr + m.dof_actuator_num[i]):
            a = m.dof_actuator[k]
            moment = m.actuator_gear[wg, a]
            t = m.actuator[a].tendon
            force = d.actuator_force[w, a]
            if m.actuator[a].moment_row != 0:
                moment = d.actuator_moment[w, a, i]
                adj.actuator_moment[w, a, i] = adj.actuator_moment[w, a, i] + raw_bar * force
                wp.atomic_add(adj.actuator_force, w, a, moment * raw_bar)
            elif t >= 0:
                adj.ten_J[w, t, i] = adj.ten_J[w, t, i] + moment * (raw_bar * force)
                wp.atomic_add(adj.actuator_force, w, a, moment * d.ten_J[w, t, i] * raw_bar)
            else:
                adj.actuator_force[w, a] = adj.actuator_force[w, a] + moment * raw_bar

    @wp.func
    def smooth_force_dof(m: Model, d: Data, w: int, i: int):
        """qfrc_smooth = passive - bias + applied + actuator.

        Data in: qfrc_passive, qfrc_bias, qfrc_applied, qfrc_actuator. Data out: qfrc_smooth."""
        d.qfrc_smooth[w, i] = d.qfrc_passive[w, i] - d.qfrc_bias[w, i] + d.qfrc_applied[w, i] + \
            d.qfrc_actuator[w, i]

    return SimpleNamespace(transmission_site=transmission_site, transmission_joint=transmission_joint,
                           transmission_slidercrank=transmission_slidercrank, transmission_body=transmission_body,
                           check_controls=check_controls,
                           actuator=make_actuator(True, True, True),
                           actuator_transmission=make_actuator(True, False, False),
                           actuator_act_dot=make_actuator(False, True, False),
                           actuator_force=make_actuator(False, False, True),
                           actuator_rich=make_actuator(True, True, True, rich=True),
                           actuator_act_dot_rich=make_actuator(False, True, False, rich=True),
                           actuator_force_rich=make_actuator(False, False, True, rich=True),
                           rich_limit=rich_limit,
                           transmission_adjoint=transmission_adjoint, force_adjoint=force_adjoint,
                           dof=dof, dof_adjoint=dof_adjoint, smooth_force_dof=smooth_force_dof, force_vel=force_vel,
                           qderiv_dof=qderiv_dof,
                           site_force_vel=site_force_vel, site_qderiv=site_qderiv, next_activation=next_activation,
                           advance_activation=advance_activation)
