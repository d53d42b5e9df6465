"""Constraint rows: dof friction loss, joint limits and contacts in the pyramidal or the
elliptic friction cone, with MuJoCo's soft-constraint parameters (engine_core_constraint.c:
mj_instantiateFriction, mj_instantiateLimit, mj_instantiateContact, mj_diagApprox,
getsolparam, getimpedance, mj_makeImpedance, mj_referenceConstraint; doc/computation
"Constraint model" and "Parameters").

Rows have fixed places, decided when the model is loaded (see `Model`): first one row per dof
with friction loss, then two rows per limited hinge or slide joint (lower, upper) and one per
limited ball joint, then the rows of every contact slot (1 for condim 1, 2 (condim - 1)
pyramid edges otherwise: sliding in two directions for condim 3, with torsion for condim 4,
with rolling about both tangents for condim 6; in the elliptic cone condim rows: the normal,
then one per friction direction). `efc_active` says which rows exist in the current state; an
inactive row has D = 0 and force 0. `efc_list[:efc_nactive]` lists the active rows in
increasing order: later stages iterate it instead of scanning all rows. A row's Jacobian can
be non-zero only in the model's `efc_colind` columns of that row (fixed when the model is
loaded), so only those are written and read.

Elements: `friction_row` and `limit_row` (one row each), `contact_rows` (the rows of one
contact slot), each writing only its own rows; then `constraint_list` (per world) and
`reference_row` (one active row).
"""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, MINVAL, scalar_types

# mjtConstraint
CNSTR_FRICTION_DOF = 1
CNSTR_LIMIT_JOINT = 3
CNSTR_CONTACT_FRICTIONLESS = 5
CNSTR_CONTACT_PYRAMIDAL = 6
CNSTR_CONTACT_ELLIPTIC = 7

# solimp bounds (mjMINIMP, mjMAXIMP)
MINIMP = 0.0001
MAXIMP = 0.9999


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec2, vec3, vec5 = T.f, T.vec2, T.vec3, T.vec5

    @wp.func
    def impedance(solimp: vec5, pos: scalar, margin: scalar):
        """getimpedance: d(r) from solimp = (dmin, dmax, width, midpoint, power)."""
        imp = scalar(0.5) * (solimp[0] + solimp[1])
        if solimp[0] != solimp[1] and solimp[2] > scalar(MINVAL):
            x = (pos - margin) / solimp[2]
            if x < scalar(0.0):
                x = -x
            if x >= scalar(1.0):
                imp = solimp[1]
            elif x <= scalar(0.0):
                imp = solimp[0]
            else:
                y = x
                p = solimp[4]
                if p != scalar(1.0):
                    mid = solimp[3]
                    if x <= mid:
                        a = scalar(1.0) / wp.pow(mid, p - scalar(1.0))
                        y = a * wp.pow(x, p)
                    else:
                        b = scalar(1.0) / wp.pow(scalar(1.0) - mid, p - scalar(1.0))
                        y = scalar(1.0) - b * wp.pow(scalar(1.0) - x, p)
                imp = solimp[0] + y * (solimp[1] - solimp[0])
        return imp

    @wp.func
    def clamp_solimp(s: vec5):
        lo = scalar(MINIMP)
        hi = scalar(MAXIMP)
        return vec5(wp.clamp(s[0], lo, hi), wp.clamp(s[1], lo, hi), wp.max(scalar(0.0), s[2]),
                    wp.clamp(s[3], lo, hi), wp.max(scalar(1.0), s[4]))

    @wp.func
    def stiffness_damping(m: Model, solref: vec2, dmax: scalar):
        """K and B of the reference acceleration from solref, standard (timeconst, dampratio)
        or direct (-stiffness, -damping) form; the standard form's time constant is kept at
        least 2 timesteps unless mjDSBL_REFSAFE."""
        ref0 = solref[0]
        if m.enable_refsafe and ref0 > scalar(0.0):
            ref0 = wp.max(ref0, scalar(2.0) * m.timestep)
        k = scalar(0.0)
        b = scalar(0.0)
        if ref0 > scalar(0.0):
            k = scalar(1.0) / wp.max(scalar(MINVAL), dmax * dmax * ref0 * ref0 * solref[1] * solref[1])
        else:
            k = -ref0 / wp.max(scalar(MINVAL), dmax * dmax)
        if solref[1] > scalar(0.0):
            b = scalar(2.0) / wp.max(scalar(MINVAL), dmax * ref0)
        else:
            b = -solref[1] / wp.max(scalar(MINVAL), dmax)
        return k, b

    @wp.func
    def regularizer(imp: scalar, diag: scalar):
        """R = (1 - imp) / imp * diagApprox (mj_makeImpedance)."""
        return wp.max(scalar(MINVAL), (scalar(1.0) - imp) * diag / imp)

    @wp.func
    def set_row(d: Data, w: int, r: int, pos: scalar, margin: scalar, floss: scalar, imp: scalar,
                R: scalar, k: scalar, b: scalar):
        """Row parameters, D = 1 / R. Each is written once (exact adjoints)."""
        d.efc_active[w, r] = 1
        d.efc_pos[w, r] = pos
        d.efc_margin[w, r] = margin
        d.efc_frictionloss[w, r] = floss
        d.efc_R[w, r] = R
        d.efc_D[w, r] = scalar(1.0) / R
        d.efc_K[w, r] = k
        d.efc_B[w, r] = b
        d.efc_imp[w, r] = imp

    @wp.func
    def clear_row(d: Data, w: int, r: int):
        """Deactivate row r; its Jacobian is zeroed only when the row becomes active (J of an
        inactive row is never read), so quiet rows cost nothing."""
        d.efc_active[w, r] = 0
        d.efc_D[w, r] = scalar(0.0)
        d.efc_force[w, r] = scalar(0.0)

    @wp.func
    def zero_jacobian(m: Model, d: Data, w: int, r: int):
        # outside its columns (efc_colind) a row's Jacobian is never written: it stays zero
        for k in range(m.efc_nnz[r]):
            d.efc_J[w, r, m.efc_colind[r, k]] = scalar(0.0)

    @wp.func
    def row_dot(m: Model, d: Data, w: int, r: int, x: wp.array2d(dtype=scalar)):
        """efc_J[w, r] . x[w], over the row's possibly non-zero columns."""
        s = scalar(0.0)
        for k in range(m.efc_nnz[r]):
            j = m.efc_colind[r, k]
            s = s + d.efc_J[w, r, j] * x[w, j]
        return s

    @wp.func
    def friction_direction(k: int, frame: T.mat33, jp: vec3, ang: vec3):
        """Friction direction k of a contact's Jacobian column (mj_instantiateContact): k = 0, 1
        the point's translation along the tangents, 2 the rotation about the normal, 3, 4 about
        the tangents."""
        jk = scalar(0.0)
        if k < 2:
            jk = frame[1 + k, 0] * jp[0] + frame[1 + k, 1] * jp[1] + frame[1 + k, 2] * jp[2]
        else:
            a = k - 2
            jk = frame[a, 0] * ang[0] + frame[a, 1] * ang[1] + frame[a, 2] * ang[2]
        return jk

    @wp.func
    def add_contact_dof(m: Model, d: Data, w: int, r0: int, nrow: int, dof: int, offset: vec3, frame: T.mat33,
                        friction: vec5, sign: scalar):
        """Column `dof` of sign x (Jacobian of the contact) in the contact frame, added to the
        contact's rows: the normal row; then in the elliptic cone the friction directions J_k,
        k = 1 .. condim-1, in the pyramidal cone the edges J_n +- mu_k J_k (`friction_direction`;
        mj_instantiateContact)."""
        cdof = d.cdof[w, dof]
        ang = vec3(cdof[0], cdof[1], cdof[2])
        jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(ang, offset)
        nrm = vec3(frame[0, 0], frame[0, 1], frame[0, 2])
        jn = wp.dot(nrm, jp) * sign
        if nrow == 1:
            d.efc_J[w, r0, dof] += jn
        elif m.cone_elliptic != 0:
            d.efc_J[w, r0, dof] += jn
            for k in range(nrow - 1):
                d.efc_J[w, r0 + 1 + k, dof] += friction_direction(k, frame, jp, ang) * sign
        else:
            for k in range(nrow // 2):
                jk = friction_direction(k, frame, jp, ang) * sign * friction[k]
                d.efc_J[w, r0 + 2 * k, dof] += jn + jk
                d.efc_J[w, r0 + 2 * k + 1, dof] += jn - jk

    @wp.func
    def add_contact_jacobian(m: Model, d: Data, w: int, r0: int, nrow: int, body: int, point: vec3,
                             frame: T.mat33, friction: vec5, sign: scalar):
        """Add sign x (Jacobian of `point` on `body`) in the contact frame to the rows of one
        contact (mj_jac, mj_instantiateContact): the dofs of the chain that moves the body."""
        dof = m.body_dofend[body]
        if dof >= 0:
            offset = point - d.subtree_com[w, m.body_rootid[body]]
            add_contact_dof(m, d, w, r0, nrow, dof, offset, frame, friction, sign)
            adr = m.dof_ancestor_adr[dof]
            for k in range(adr, adr + m.dof_ancestor_num[dof]):
                add_contact_dof(m, d, w, r0, nrow, m.dof_ancestor[k], offset, frame, friction, sign)

    @wp.func
    def friction_row(m: Model, d: Data, w: int, r: int):
        """Row r (< nefc_friction): dof friction loss, J = e_dof, no position residual (K = 0)."""
        dof = m.efc_id[r]
        floss = m.dof_frictionloss[w % m.dof_frictionloss.shape[0], dof]
        if m.enable_constraint != 0 and floss > scalar(0.0):
            solimp = clamp_solimp(m.dof_solimp[dof])
            imp = impedance(solimp, scalar(0.0), scalar(0.0))
            k, b = stiffness_damping(m, m.dof_solref[dof], solimp[1])
            set_row(d, w, r, scalar(0.0), scalar(0.0), floss, imp, regularizer(imp, m.dof_invweight0[dof]),
                    scalar(0.0), b)
            zero_jacobian(m, d, w, r)
            d.efc_J[w, r, dof] = scalar(1.0)
        else:
            clear_row(d, w, r)

    @wp.func
    def limit_row(m: Model, d: Data, w: int, r: int):
        """Row r (a joint limit side): residual = distance to the nearer end of the range."""
        jnt = m.efc_id[r]
        side = m.efc_sub[r]
        dof = m.jnt_dofadr[jnt]
        qadr = m.jnt_qposadr[jnt]
        rng = m.jnt_range[jnt]
        margin = m.jnt_margin[jnt]
        active = int(0)
        if m.jnt_type[jnt] == JNT_BALL:
            q = f.quat_normalize(f.quat_from_qpos(d.qpos, w, qadr))
            axis_angle = f.quat_to_vel(q)
            angle = wp.length(axis_angle)
            axis = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
            if angle >= scalar(MINVAL):
                axis = axis_angle / angle
            dist = wp.max(rng[0], rng[1]) - angle
            if m.enable_constraint != 0 and dist < margin:
                active = 1
                zero_jacobian(m, d, w, r)
                for c in range(3):
                    d.efc_J[w, r, dof + c] = -axis[c]
        else:
            value = d.qpos[w, qadr]
            dist = rng[1] - value
            if side < 0:
                dist = value - rng[0]
            if m.enable_constraint != 0 and dist < margin:
                active = 1
                zero_jacobian(m, d, w, r)
                d.efc_J[w, r, dof] = scalar(-side)
        if active:
            solimp = clamp_solimp(m.jnt_solimp[jnt])
            imp = impedance(solimp, dist, margin)
            k, b = stiffness_damping(m, m.jnt_solref[jnt], solimp[1])
            set_row(d, w, r, dist, margin, scalar(0.0), imp, regularizer(imp, m.dof_invweight0[dof]), k, b)
        else:
            clear_row(d, w, r)

    @wp.func
    def contact_rows(m: Model, d: Data, w: int, c: int):
        """The rows of contact slot c: active when the slot holds a contact within its margin
        (contacts in the gap get no rows)."""
        p = m.contact_pair[c]
        dist = d.contact_dist[w, c]
        margin = m.cpair_margin[p]
        r0 = m.contact_efc_adr[c]
        condim = m.cpair_condim[p]
        nrow = 1
        if condim > 1:
            nrow = 2 * (condim - 1)  # pyramid edges
            if m.cone_elliptic != 0:
                nrow = condim  # normal and friction directions
        if m.enable_constraint != 0 and d.contact_active[w, c] != 0 and dist < margin:
            fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
            g = m.cpair_geom[p]
            b1 = m.geom_bodyid[g[0]]
            b2 = m.geom_bodyid[g[1]]
            frame = d.contact_frame[w, c]
            point = d.contact_pos[w, c]
            for e in range(nrow):
                zero_jacobian(m, d, w, r0 + e)
            add_contact_jacobian(m, d, w, r0, nrow, b2, point, frame, fr, scalar(1.0))
            add_contact_jacobian(m, d, w, r0, nrow, b1, point, frame, fr, scalar(-1.0))

            # approximate inverse inertia of the contact (mj_diagApprox): both bodies
            iw1 = m.body_invweight0[b1]
            iw2 = m.body_invweight0[b2]
            tran = iw1[0] + iw2[0]
            solimp = clamp_solimp(m.cpair_solimp[p])
            imp = impedance(solimp, dist, margin)
            k, b = stiffness_damping(m, m.cpair_solref[p], solimp[1])
            if nrow == 1:
                set_row(d, w, r0, dist, margin, scalar(0.0), imp, regularizer(imp, tran), k, b)
            elif m.cone_elliptic != 0:
                # the normal row's R, R_1 = R_0 / impratio, R_j mu_j^2 = R_1 mu_1^2; the friction
                # rows have no position residual (K = 0) and solreffriction's B when set
                # (mj_makeImpedance); mu of the regularized cone = friction_0 sqrt(R_1 / R_0)
                r_0 = regularizer(imp, tran)
                r_1 = r_0 / wp.max(scalar(MINVAL), m.impratio)
                set_row(d, w, r0, dist, margin, scalar(0.0), imp, r_0, k, b)
                d.efc_mu[w, r0] = fr[0] * wp.sqrt(r_1 / r_0)
                ref = m.cpair_solreffriction[p]
                if ref[0] == scalar(0.0) and ref[1] == scalar(0.0):
                    ref = m.cpair_solref[p]
                kf, bf = stiffness_damping(m, ref, solimp[1])
                for e in range(1, nrow):
                    r_e = r_1 * fr[0] * fr[0] / (fr[e - 1] * fr[e - 1])
                    set_row(d, w, r0 + e, scalar(0.0), scalar(0.0), scalar(0.0), imp, r_e, scalar(0.0), bf)
                    d.efc_mu[w, r0 + e] = fr[e - 1]
            else:
                # first edge's R, then the pyramid's common R matching the elliptic cone's
                # friction impedance: R_py = 2 mu^2 R_0, mu = friction_0 sqrt(R_1 / R_0)
                r_0 = regularizer(imp, tran + fr[0] * fr[0] * tran)
                r_1 = r_0 / wp.max(scalar(MINVAL), m.impratio)
                mu = fr[0] * wp.sqrt(r_1 / r_0)
                r_py = scalar(2.0) * mu * mu * r_0
                for e in range(nrow):
                    set_row(d, w, r0 + e, dist, margin, scalar(0.0), imp, r_py, k, b)
        else:
            for e in range(nrow):
                clear_row(d, w, r0 + e)

    @wp.func
    def constraint_list(m: Model, d: Data, w: int):
        """efc_list[:efc_nactive]: the active rows in increasing order, which later stages iterate."""
        n = int(0)
        for r in range(m.nefc):
            if d.efc_active[w, r] != 0:
                d.efc_list[w, n] = r
                n = n + 1
        d.efc_nactive[w] = n

    @wp.func
    def reference_row(m: Model, d: Data, w: int, r: int):
        """efc_vel = J qvel and aref = -B vel - K imp (pos - margin) of active row r
        (mj_referenceConstraint)."""
        # accumulated in memory, not in a local carried across a dynamic loop (exact adjoints)
        d.efc_vel[w, r] = scalar(0.0)
        for k in range(m.efc_nnz[r]):
            j = m.efc_colind[r, k]
            d.efc_vel[w, r] += d.efc_J[w, r, j] * d.qvel[w, j]
        vel = d.efc_vel[w, r]
        d.efc_aref[w, r] = (-d.efc_B[w, r] * vel
                            - d.efc_K[w, r] * d.efc_imp[w, r] * (d.efc_pos[w, r] - d.efc_margin[w, r]))

    return SimpleNamespace(friction_row=friction_row, limit_row=limit_row, contact_rows=contact_rows,
                           constraint_list=constraint_list, reference_row=reference_row, row_dot=row_dot)
