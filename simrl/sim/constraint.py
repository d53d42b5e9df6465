"""Constraint rows: equality constraints (connect, weld, joint, tendon, flex), dof and tendon friction
loss, joint and tendon limits and contacts in the pyramidal or the elliptic friction cone, with
MuJoCo's soft-constraint parameters (engine_core_constraint.c: mj_instantiateEquality,
mj_instantiateFriction, mj_instantiateLimit, mj_instantiateContact, mj_diagApprox,
getsolparam, getimpedance, mj_makeImpedance, mj_referenceConstraint; doc/computation
"Constraint model" and "Parameters").

The rows of a world come in MuJoCo's order (mj_makeConstraint): the rows of every equality
constraint (3 per connect, 6 per weld, 1 per joint or tendon equality, 1 per non-rigid edge of a
flex), one row per dof and then per tendon with friction loss, two rows per limited hinge or
slide joint (lower, upper) and one per limited ball joint, two per limited tendon; these have
fixed places, decided when the model is loaded (see `Model`). Then the rows of the contacts (1
for condim 1, 2 (condim - 1) pyramid edges otherwise: sliding in two directions for condim 3,
with torsion for condim 4, with rolling about both tangents for condim 6; in the elliptic cone
condim rows: the normal, then one per friction direction), placed each evaluation by
`efc_address`: the slots that hold a contact within its margin, in slot order, one after
another, by a prefix sum (no atomics: the same places every run), up to the row budget
(Model.nefc, `njmax`); what does not fit is left out, the last in slot order first, and flagged
(Data.overflow). Data.nefc[w] counts the rows in use; Data.efc_type, efc_id, efc_sub say what
each is, Data.efc_cols its column set: a row's Jacobian can be non-zero only in those columns
(Model.efc_colind, fixed when the model is loaded), so only those are written and read.
`efc_active` says which fixed rows exist in the current state (an inactive row has D = 0 and
force 0); every contact row is active. `efc_list[:efc_nactive]` lists the active rows in
increasing order: later stages iterate it.

Elements: `equality_rows` (the rows of one equality constraint), `friction_row` and
`limit_row` (one row each), `contact_rows` (the rows of one contact slot), each writing only
its own rows; per world `efc_address` (by a world's lanes: `efc_address_lanes`) before the
contact rows and the list of active rows after them (`constraint_list_lanes`, or one thread's
`constraint_list_one`), `reference_row` (one active row) and `equality_reference` (the Jdot
qvel term of a connect or weld).
"""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import OVERFLOW_ROWS, data_struct, record_overflow
from simrl.sim.model import model_struct
from simrl.sim.types import MINVAL, ConstraintType, EqType, JointType, scalar_types

# solimp bounds (mjMINIMP, mjMAXIMP)
MINIMP = 0.0001
MAXIMP = 0.9999


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec2, vec3, vec5 = T.f, T.vec2, T.vec3, T.vec5
    overflow = record_overflow(scalar)

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

    # Hand-written adjoints of the row parameters' functions. Their generated adjoints also
    # differentiate solimp, solref, margin and the timestep, constants of the model that the
    # differentiable step never differentiates (simrl.diff.PARAMS), which costs registers in every
    # kernel that makes rows (scripts/gpu_report.py --grad).
    @wp.func
    def impedance_slope(solimp: vec5, pos: scalar, margin: scalar):
        """d imp / d pos: (dmax - dmin) y'(x) dx/dpos inside the transition zone (0 < |x| < 1),
        x = (pos - margin) / width; zero outside it (imp is dmin or dmax there)."""
        slope = scalar(0.0)
        if solimp[0] != solimp[1] and solimp[2] > scalar(MINVAL):
            x = (pos - margin) / solimp[2]
            dx = scalar(1.0) / solimp[2]
            if x < scalar(0.0):
                x = -x
                dx = -dx
            if x < scalar(1.0) and x > scalar(0.0):
                dy = scalar(1.0)
                p = solimp[4]
                if p != scalar(1.0):
                    mid = solimp[3]
                    if x <= mid:
                        dy = p * wp.pow(x, p - scalar(1.0)) / wp.pow(mid, p - scalar(1.0))
                    else:
                        dy = p * wp.pow(scalar(1.0) - x, p - scalar(1.0)) / wp.pow(scalar(1.0) - mid, p - scalar(1.0))
                slope = (solimp[1] - solimp[0]) * dy * dx
        return slope

    @wp.func_grad(impedance)
    def adj_impedance(solimp: vec5, pos: scalar, margin: scalar, adj_ret: scalar):
        """`impedance_slope`: only pos has a derivative (solimp and margin are constants of the
        model)."""
        wp.adjoint[pos] += adj_ret * impedance_slope(solimp, pos, margin)

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

    @wp.func_grad(stiffness_damping)
    def adj_stiffness_damping(m: Model, solref: vec2, dmax: scalar, adj_k: scalar, adj_b: scalar):
        """K and B are functions of the model's constants only (solref, solimp, timestep)."""
        pass

    @wp.func_grad(clamp_solimp)
    def adj_clamp_solimp(s: vec5, adj_ret: vec5):
        """solimp is a constant of the model."""
        pass

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
        cs = d.efc_cols[w, r]
        for k in range(m.efc_nnz[cs]):
            d.efc_J[w, r, m.efc_colind[cs, k]] = scalar(0.0)

    @wp.func
    def row_dot(m: Model, d: Data, w: int, r: int, x: wp.array2d(dtype=scalar)):
        """efc_J[w, r] . x[w], over the row's possibly non-zero columns."""
        s = scalar(0.0)
        cs = d.efc_cols[w, r]
        for k in range(m.efc_nnz[cs]):
            j = m.efc_colind[cs, k]
            s = s + d.efc_J[w, r, j] * x[w, j]
        return s

    @wp.func
    def friction_direction(k: int, frame: T.mat33, jp: vec3, ang: vec3):
        """Friction direction k of a contact's Jacobian column (mj_instantiateContact): k = 0, 1
        the point's translation along the tangents, 2 the rotation about the normal, 3, 4 about
        the tangents."""
        # the frame's row picked by branches, not indexed with k: a run-time index into a
        # matrix puts it (and its adjoint) in local memory on a GPU
        r = k + 1
        v = jp
        if k >= 2:
            r = k - 2
            v = ang
        row = vec3(frame[0, 0], frame[0, 1], frame[0, 2])
        if r == 1:
            row = vec3(frame[1, 0], frame[1, 1], frame[1, 2])
        elif r == 2:
            row = vec3(frame[2, 0], frame[2, 1], frame[2, 2])
        return row[0] * v[0] + row[1] * v[1] + row[2] * v[2]

    @wp.func
    def friction_direction_indexed(k: int, frame: T.mat33, jp: vec3, ang: vec3):
        """`friction_direction` with the frame's row indexed by k (fewer registers where the
        pyramid's edges also index the friction by k)."""
        jk = scalar(0.0)
        if k < 2:
            jk = frame[1 + k, 0] * jp[0] + frame[1 + k, 1] * jp[1] + frame[1 + k, 2] * jp[2]
        else:
            a = k - 2
            jk = frame[a, 0] * ang[0] + frame[a, 1] * ang[1] + frame[a, 2] * ang[2]
        return jk

    def make_contact_jacobian(pyramid: bool, elliptic: bool, first: bool = True, second: bool = True,
                              zero: bool = True):
        """`contact_jacobian` for frictionless and pyramidal contacts, for elliptic ones, or all;
        the second geom's body's part (`first`), the first's (`second`) or both; with the rows
        zeroed first (`zero`) or not (the differentiable step zeroes them with the rows'
        parameters, and launches the cones and the two bodies apart: in one kernel their
        generated adjoint needs more registers than a GPU thread should use)."""
        @wp.func
        def add_contact_dof(m: Model, d: Data, w: int, r0: int, nrow: int, dof: int, offset: vec3,
                            frame: T.mat33, friction: vec5, sign: scalar):
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
                if wp.static(elliptic):
                    d.efc_J[w, r0, dof] += jn
                    for k in range(nrow - 1):
                        d.efc_J[w, r0 + 1 + k, dof] += friction_direction(k, frame, jp, ang) * sign
            elif wp.static(pyramid):
                for k in range(nrow // 2):
                    jk = friction_direction_indexed(k, frame, jp, ang) * sign * friction[k]
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
                # the body's last dof, then its ancestors (one call site: a smaller GPU kernel)
                adr = m.dof_ancestor_adr[dof]
                for k in range(adr - 1, adr + m.dof_ancestor_num[dof]):
                    i = dof
                    if k >= adr:
                        i = m.dof_ancestor[k]
                    add_contact_dof(m, d, w, r0, nrow, i, offset, frame, friction, sign)

        @wp.func
        def contact_jacobian(m: Model, d: Data, w: int, c: int):
            """The Jacobian of contact slot c's rows, when the slot has rows (efc_address: a contact
            within its margin): J of the point on the second geom's body minus that on the first, in
            the contact frame (mj_instantiateContact).

            Model: body_dofend, body_rootid, cone_elliptic, cpair_friction, cpair_geom, cpair_nrow,
            dof_ancestor, dof_ancestor_adr, dof_ancestor_num, efc_colind, efc_nnz, geom_bodyid. Data in:
            contact_pair, contact_efc_adr, contact_pos, contact_frame, efc_cols, cdof, subtree_com. Data out:
            efc_J (the slot's rows)."""
            r0 = d.contact_efc_adr[w, c]
            if r0 >= 0:
                p = d.contact_pair[w, c]
                nrow = m.cpair_nrow[p]
                cone = m.cone_elliptic != 0
                if (cone and wp.static(elliptic)) or (not cone and wp.static(pyramid)):
                    fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
                    g = m.cpair_geom[p]
                    frame = d.contact_frame[w, c]
                    point = d.contact_pos[w, c]
                    if wp.static(first):
                        if wp.static(zero):
                            for e in range(nrow):
                                zero_jacobian(m, d, w, r0 + e)
                        add_contact_jacobian(m, d, w, r0, nrow, m.geom_bodyid[g[1]], point, frame, fr, scalar(1.0))
                    if wp.static(second):
                        add_contact_jacobian(m, d, w, r0, nrow, m.geom_bodyid[g[0]], point, frame, fr, scalar(-1.0))

        return contact_jacobian

    @wp.func
    def add_equality_dof(m: Model, d: Data, w: int, r0: int, nrow: int, dof: int, offset: vec3, sign: scalar,
                         qleft: T.quat, qright: T.quat, torquescale: scalar):
        """Column `dof` of sign x (the point's translation; for a weld also the rotation) added to
        the rows of a connect or weld (mj_jacDifPair); the weld's rotation rows take
        0.5 torquescale Im(qleft (0, axis) qright), qleft = neg(q_2), qright = q_1 relpose
        (mj_instantiateEquality)."""
        cdof = d.cdof[w, dof]
        ang = vec3(cdof[0], cdof[1], cdof[2]) * sign
        jp = (vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(vec3(cdof[0], cdof[1], cdof[2]), offset)) * sign
        for k in range(3):
            d.efc_J[w, r0 + k, dof] += jp[k]
        if nrow == 6:
            q = qleft * T.quat(ang[0], ang[1], ang[2], scalar(0.0)) * qright
            for k in range(3):
                d.efc_J[w, r0 + 3 + k, dof] += scalar(0.5) * torquescale * q[k]

    @wp.func
    def add_equality_jacobian(m: Model, d: Data, w: int, r0: int, nrow: int, body: int, point: vec3,
                              sign: scalar, qleft: T.quat, qright: T.quat, torquescale: scalar):
        """`add_equality_dof` for the dofs of the chain that moves `body`."""
        dof = m.body_dofend[body]
        if dof >= 0:
            offset = point - d.subtree_com[w, m.body_rootid[body]]
            # the body's last dof, then its ancestors (one call site: a smaller GPU kernel)
            adr = m.dof_ancestor_adr[dof]
            for k in range(adr - 1, adr + m.dof_ancestor_num[dof]):
                i = dof
                if k >= adr:
                    i = m.dof_ancestor[k]
                add_equality_dof(m, d, w, r0, nrow, i, offset, sign, qleft, qright, torquescale)

    @wp.func
    def add_point_direction_jacobian(m: Model, d: Data, w: int, r: int, body: int, point: vec3, direction: vec3,
                                     sign: scalar):
        """sign x direction . (the translational Jacobian of `point` on `body`) added to row r
        (mj_jac, for the dofs of the chain that moves the body)."""
        dof = m.body_dofend[body]
        if dof >= 0:
            offset = point - d.subtree_com[w, m.body_rootid[body]]
            # the body's last dof, then its ancestors (one call site: a smaller GPU kernel)
            adr = m.dof_ancestor_adr[dof]
            for k in range(adr - 1, adr + m.dof_ancestor_num[dof]):
                i = dof
                if k >= adr:
                    i = m.dof_ancestor[k]
                cdof = d.cdof[w, i]
                jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(vec3(cdof[0], cdof[1], cdof[2]), offset)
                d.efc_J[w, r, i] += sign * wp.dot(direction, jp)

    @wp.func
    def flex_edge_row(m: Model, d: Data, w: int, r: int, i: int, solimp: vec5, kk: scalar, bb: scalar):
        """Row r, flex edge i of a flex equality (mj_flex, mj_instantiateEquality mjEQ_FLEX):
        residual = edge length - length0, J = u' (J_2 - J_1), u the unit vector from vertex 1 to
        vertex 2, J_k the translational Jacobian of vertex k (at xpos + xmat flex_vert of its body);
        R from flexedge_invweight0 (mj_diagApprox)."""
        fe = m.flexedge[i]
        p1 = d.xpos[w, fe.body1] + d.xmat[w, fe.body1] * fe.vert1
        p2 = d.xpos[w, fe.body2] + d.xmat[w, fe.body2] * fe.vert2
        v = p2 - p1
        length = wp.length(v)
        # mju_normalize3: below mjMINVAL the direction is the x axis
        u = vec3(scalar(1.0), scalar(0.0), scalar(0.0))
        if length >= scalar(MINVAL):
            u = v * (scalar(1.0) / length)
        zero_jacobian(m, d, w, r)
        add_point_direction_jacobian(m, d, w, r, fe.body2, p2, u, scalar(1.0))
        add_point_direction_jacobian(m, d, w, r, fe.body1, p1, u, scalar(-1.0))
        pos = length - fe.length0
        imp = impedance(solimp, pos, scalar(0.0))
        set_row(d, w, r, pos, scalar(0.0), scalar(0.0), imp, regularizer(imp, fe.invweight0), kk, bb)

    @wp.func
    def coupling(c: vec5, dif: scalar):
        """The polynomial of a joint or tendon coupling, c1 dif + c2 dif^2 + c3 dif^3 + c4 dif^4,
        and its derivative (mj_instantiateEquality)."""
        return (c[1] * dif + c[2] * dif * dif + c[3] * dif * dif * dif + c[4] * dif * dif * dif * dif,
                c[1] + scalar(2.0) * c[2] * dif + scalar(3.0) * c[3] * dif * dif + scalar(4.0) * c[4] * dif * dif * dif)

    @wp.func
    def weld_frames(m: Model, d: Data, w: int, e: int):
        """(qleft, qright) of a connect or weld: neg(q_2 relpose_2) and q_1 relpose_1
        (mj_instantiateEquality)."""
        qright = d.xquat[w, m.eq[e].body1] * m.eq[e].quat1
        qleft = wp.quat_inverse(d.xquat[w, m.eq[e].body2] * m.eq[e].quat2)
        return qleft, qright

    def make_equality_jacobian(first: bool):
        """The differentiable step's `equality_jacobian`: a connect's or weld's Jacobian, the
        first body's part (`first`) or the second's, added to rows `equality_rows` zeroed (in
        one kernel with the rows, the generated adjoint needs more registers than a GPU thread
        should use)."""
        @wp.func
        def equality_jacobian(m: Model, d: Data, w: int, e: int):
            """A connect's or weld's Jacobian: one body's part, added to its rows.

            Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, enable_constraint,
            eq. Data in: eq_active, xpos, xmat, xquat, cdof, subtree_com. Data out: efc_J (the constraint's rows)."""
            kind = m.eq[e].type
            if (kind == EqType.CONNECT or kind == EqType.WELD) and m.enable_constraint != 0 and d.eq_active[w, e] != 0:
                nrow = 3
                if kind == EqType.WELD:
                    nrow = 6
                qleft, qright = weld_frames(m, d, w, e)
                if wp.static(first):
                    b1 = m.eq[e].body1
                    p1 = d.xpos[w, b1] + d.xmat[w, b1] * m.eq[e].anchor1
                    add_equality_jacobian(m, d, w, m.eq[e].efc_adr, nrow, b1, p1, scalar(1.0), qleft, qright,
                                          m.eq[e].torquescale)
                else:
                    b2 = m.eq[e].body2
                    p2 = d.xpos[w, b2] + d.xmat[w, b2] * m.eq[e].anchor2
                    add_equality_jacobian(m, d, w, m.eq[e].efc_adr, nrow, b2, p2, scalar(-1.0), qleft, qright,
                                          m.eq[e].torquescale)
        return equality_jacobian

    def make_equality_rows(bodies: bool, joints: bool, tendons: bool, jacobian: bool = True, flexes: bool = False):
        """`equality_rows` for connects and welds (`bodies`), joint couplings, tendon couplings,
        flex edges (`flexes`), or all (the differentiable step launches them apart: in one kernel
        their generated adjoint needs more registers than a GPU thread should use); a connect's or
        weld's rows with their Jacobian (`jacobian`) or zeroed (the differentiable step adds it
        after, with `equality_jacobian`)."""
        @wp.func
        def equality_rows(m: Model, d: Data, w: int, e: int):
            """The rows of equality constraint e (mj_instantiateEquality; mj_diagApprox and
            mj_makeImpedance for its R, K, B): connect, 3 rows, pos_1 - pos_2 of the anchors; weld,
            6 rows, that and torquescale Im(neg(q_2) q_1 relpose); joint, 1 row,
            q_1 - q0_1 - poly(q_2 - q0_2); flex, a row per non-rigid edge (`flex_edge_row`). A
            connect's and a weld's impedance is of the norm of their residual. Inactive
            (eq_active 0): no rows.

            Model: body_dofend, body_invweight0, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num,
            dof_invweight0, efc_colind, efc_nnz, enable_constraint, enable_refsafe, eq, flexedge, jnt_dofadr,
            jnt_qposadr, qpos0, tendon, tendon_colind, timestep. Data in: eq_active, qpos, xpos, xmat, xquat, cdof,
            subtree_com, ten_length, ten_J. Data out (the constraint's rows): efc_J, efc_active, efc_pos,
            efc_margin, efc_frictionloss, efc_R, efc_D, efc_K, efc_B, efc_imp, efc_force."""
            kind = m.eq[e].type
            of_bodies = kind == EqType.CONNECT or kind == EqType.WELD
            if kind == EqType.FLEX:
                if wp.static(flexes):
                    r0 = m.eq[e].efc_adr
                    if m.enable_constraint != 0 and d.eq_active[w, e] != 0:
                        solimp = clamp_solimp(m.eq[e].solimp)
                        kk, bb = stiffness_damping(m, m.eq[e].solref, solimp[1])
                        for k in range(m.eq[e].flexedge_num):
                            flex_edge_row(m, d, w, r0 + k, m.eq[e].flexedge_adr + k, solimp, kk, bb)
                    else:
                        for k in range(m.eq[e].flexedge_num):
                            clear_row(d, w, r0 + k)
            elif ((of_bodies and wp.static(bodies)) or (kind == EqType.JOINT and wp.static(joints))
                    or (kind == EqType.TENDON and wp.static(tendons))):
                r0 = m.eq[e].efc_adr
                nrow = 1
                if kind == EqType.CONNECT:
                    nrow = 3
                elif kind == EqType.WELD:
                    nrow = 6
                if m.enable_constraint != 0 and d.eq_active[w, e] != 0:
                    for k in range(nrow):
                        zero_jacobian(m, d, w, r0 + k)
                    solimp = clamp_solimp(m.eq[e].solimp)
                    kk, bb = stiffness_damping(m, m.eq[e].solref, solimp[1])
                    if kind == EqType.TENDON and wp.static(tendons):
                        # L_1 - L0_1 - poly(L_2 - L0_2), J = J_1 - poly'(L_2 - L0_2) J_2
                        t1 = m.eq[e].obj1id
                        t2 = m.eq[e].obj2id
                        c = m.eq[e].polycoef
                        pos = d.ten_length[w, t1] - m.tendon[t1].length0 - c[0]
                        diag = m.tendon[t1].invweight0
                        deriv = scalar(0.0)
                        if t2 >= 0:
                            dif = d.ten_length[w, t2] - m.tendon[t2].length0
                            poly, deriv = coupling(c, dif)
                            pos = pos - poly
                            diag = diag + m.tendon[t2].invweight0
                        for k in range(m.tendon[t1].nnz):
                            j = m.tendon_colind[t1, k]
                            d.efc_J[w, r0, j] += d.ten_J[w, t1, j]
                        if t2 >= 0:
                            for k in range(m.tendon[t2].nnz):
                                j = m.tendon_colind[t2, k]
                                d.efc_J[w, r0, j] += -deriv * d.ten_J[w, t2, j]
                        imp = impedance(solimp, pos, scalar(0.0))
                        set_row(d, w, r0, pos, scalar(0.0), scalar(0.0), imp, regularizer(imp, diag), kk, bb)
                    elif kind == EqType.JOINT and wp.static(joints):
                        j1 = m.eq[e].obj1id
                        j2 = m.eq[e].obj2id
                        c = m.eq[e].polycoef
                        q1 = m.jnt_qposadr[j1]
                        pos = d.qpos[w, q1] - m.qpos0[q1] - c[0]
                        diag = m.dof_invweight0[w % m.dof_invweight0.shape[0], m.jnt_dofadr[j1]]
                        d.efc_J[w, r0, m.jnt_dofadr[j1]] += scalar(1.0)
                        if j2 >= 0:
                            q2 = m.jnt_qposadr[j2]
                            dif = d.qpos[w, q2] - m.qpos0[q2]
                            poly, deriv = coupling(c, dif)
                            pos = pos - poly
                            d.efc_J[w, r0, m.jnt_dofadr[j2]] += -deriv
                            diag = diag + m.dof_invweight0[w % m.dof_invweight0.shape[0], m.jnt_dofadr[j2]]
                        imp = impedance(solimp, pos, scalar(0.0))
                        set_row(d, w, r0, pos, scalar(0.0), scalar(0.0), imp, regularizer(imp, diag), kk, bb)
                    elif wp.static(bodies):
                        b1 = m.eq[e].body1
                        b2 = m.eq[e].body2
                        p1 = d.xpos[w, b1] + d.xmat[w, b1] * m.eq[e].anchor1
                        p2 = d.xpos[w, b2] + d.xmat[w, b2] * m.eq[e].anchor2
                        ts = m.eq[e].torquescale
                        qleft, qright = weld_frames(m, d, w, e)
                        cpos = p1 - p2
                        norm2 = wp.dot(cpos, cpos)
                        rot = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
                        if nrow == 6:
                            qe = qleft * qright
                            rot = vec3(qe[0], qe[1], qe[2]) * ts
                            norm2 = norm2 + wp.dot(rot, rot)
                        if wp.static(jacobian):
                            add_equality_jacobian(m, d, w, r0, nrow, b1, p1, scalar(1.0), qleft, qright, ts)
                            add_equality_jacobian(m, d, w, r0, nrow, b2, p2, scalar(-1.0), qleft, qright, ts)
                        imp = impedance(solimp, wp.sqrt(norm2), scalar(0.0))
                        iw1 = m.body_invweight0[w % m.body_invweight0.shape[0], b1]
                        iw2 = m.body_invweight0[w % m.body_invweight0.shape[0], b2]
                        for k in range(3):
                            set_row(d, w, r0 + k, cpos[k], scalar(0.0), scalar(0.0), imp,
                                    regularizer(imp, iw1[0] + iw2[0]), kk, bb)
                        if nrow == 6:
                            for k in range(3):
                                set_row(d, w, r0 + 3 + k, rot[k], scalar(0.0), scalar(0.0), imp,
                                        regularizer(imp, iw1[1] + iw2[1]), kk, bb)
                else:
                    for k in range(nrow):
                        clear_row(d, w, r0 + k)
        return equality_rows

    @wp.func
    def jac_dot_v(m: Model, d: Data, w: int, body: int, point: vec3):
        """(Jdot qvel of `point` on `body`, Jdot_rot qvel) (mj_jacDot): cdof_dot of ball and free
        rotation dofs from the body's own cvel, the point's velocity correction as MuJoCo's."""
        jdv = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        jrdv = vec3(scalar(0.0), scalar(0.0), scalar(0.0))
        dof = m.body_dofend[body]
        if dof >= 0:
            com = d.subtree_com[w, m.body_rootid[body]]
            offset = point - com
            cv = d.cvel[w, body]
            pvel = vec3(cv[3], cv[4], cv[5]) + wp.cross(vec3(cv[0], cv[1], cv[2]), offset)
            adr = m.dof_ancestor_adr[dof]
            for k in range(m.dof_ancestor_num[dof] + 1):
                i = dof
                if k > 0:
                    i = m.dof_ancestor[adr + k - 1]
                cd = d.cdof_dot[w, i]
                cdof = d.cdof[w, i]
                jnt = m.dof_jntid[i]
                if m.jnt_type[jnt] == JointType.BALL or (m.jnt_type[jnt] == JointType.FREE
                                                         and i >= m.jnt_dofadr[jnt] + 3):
                    cd = f.motion_cross(d.cvel[w, m.dof_bodyid[i]], cdof)
                ang = vec3(cd[0], cd[1], cd[2])
                v = d.qvel[w, i]
                jdv = jdv + (vec3(cd[3], cd[4], cd[5]) + wp.cross(ang, offset)
                             + wp.cross(vec3(cdof[0], cdof[1], cdof[2]), pvel)) * v
                jrdv = jrdv + ang * v
        return jdv, jrdv

    @wp.func
    def equality_reference(m: Model, d: Data, w: int, e: int):
        """aref -= Jdot qvel of a connect's or weld's rows (mj_Jdotv, after
        mj_referenceConstraint): the anchors' Jdot qvel, and for a weld the time derivative of
        0.5 neg(q_2) (J_1 - J_2) qvel q_1 relpose by the product rule.

        Model: body_dofend, body_rootid, dof_ancestor, dof_ancestor_adr, dof_ancestor_num, dof_bodyid, dof_jntid,
        enable_constraint, eq, jnt_dofadr, jnt_type. Data in: eq_active, qvel, xpos, xmat, xquat, cvel, cdof,
        cdof_dot, subtree_com, efc_aref. Data out: efc_aref (the constraint's rows)."""
        kind = m.eq[e].type
        if m.enable_constraint != 0 and d.eq_active[w, e] != 0 and (kind == EqType.CONNECT or kind == EqType.WELD):
            r0 = m.eq[e].efc_adr
            b1 = m.eq[e].body1
            b2 = m.eq[e].body2
            p1 = d.xpos[w, b1] + d.xmat[w, b1] * m.eq[e].anchor1
            p2 = d.xpos[w, b2] + d.xmat[w, b2] * m.eq[e].anchor2
            jdv1, jrdv1 = jac_dot_v(m, d, w, b1, p1)
            jdv2, jrdv2 = jac_dot_v(m, d, w, b2, p2)
            for k in range(3):
                d.efc_aref[w, r0 + k] = d.efc_aref[w, r0 + k] - (jdv1[k] - jdv2[k])
            if kind == EqType.WELD:
                zero = scalar(0.0)
                half = scalar(0.5)
                cv1 = d.cvel[w, b1]
                cv2 = d.cvel[w, b2]
                w1 = T.quat(cv1[0], cv1[1], cv1[2], zero)
                w2 = T.quat(cv2[0], cv2[1], cv2[2], zero)
                dw = T.quat(cv1[0] - cv2[0], cv1[1] - cv2[1], cv1[2] - cv2[2], zero)
                djr = jrdv1 - jrdv2
                q0r = d.xquat[w, b1] * m.eq[e].quat1
                negq1 = wp.quat_inverse(d.xquat[w, b2] * m.eq[e].quat2)
                # d/dt q_1 relpose: mju_derivQuat, 0.5 (0, omega) q, of the body's quaternion, then
                # relpose; of a site's whole frame (MuJoCo's two semantics)
                qdot0r = w1 * d.xquat[w, b1] * m.eq[e].quat1 * half
                if m.eq[e].site != 0:
                    qdot0r = w1 * q0r * half
                negqdot1 = wp.quat_inverse(w2 * d.xquat[w, b2] * m.eq[e].quat2 * half)
                t = (negqdot1 * dw * q0r + negq1 * T.quat(djr[0], djr[1], djr[2], zero) * q0r
                     + negq1 * dw * qdot0r)
                ts = m.eq[e].torquescale
                for k in range(3):
                    d.efc_aref[w, r0 + 3 + k] = d.efc_aref[w, r0 + 3 + k] - half * t[k] * ts

    @wp.func
    def copy_tendon_jacobian(m: Model, d: Data, w: int, r: int, t: int, scale: scalar):
        """efc_J[r] = scale ten_J[t] (the row's columns are the tendon's)."""
        for k in range(m.efc_nnz[r]):
            j = m.efc_colind[r, k]
            d.efc_J[w, r, j] = scale * d.ten_J[w, t, j]

    @wp.func
    def friction_row(m: Model, d: Data, w: int, r: int):
        """Row r (< nefc_friction): friction loss of a dof, J = e_dof, or of a tendon, J = ten_J;
        no position residual (K = 0) (mj_instantiateFriction).

        Model: dof_frictionloss, dof_invweight0, dof_solimp, dof_solref, efc_colind, efc_id, efc_nnz, efc_type,
        enable_constraint, enable_refsafe, tendon, timestep. Data in: ten_J. Data out (row r): efc_J, efc_active,
        efc_pos, efc_margin, efc_frictionloss, efc_R, efc_D, efc_K, efc_B, efc_imp, efc_force."""
        i = m.efc_id[r]
        tendon = m.efc_type[r] == ConstraintType.FRICTION_TENDON
        floss = scalar(0.0)
        if tendon:
            floss = m.tendon[i].frictionloss
        else:
            floss = m.dof_frictionloss[w % m.dof_frictionloss.shape[0], i]
        if m.enable_constraint != 0 and floss > scalar(0.0):
            solimp = vec5()
            solref = vec2()
            diag = scalar(0.0)
            if tendon:
                ten = m.tendon[i]
                solimp = clamp_solimp(ten.solimp_fri)
                solref = ten.solref_fri
                diag = ten.invweight0
            else:
                solimp = clamp_solimp(m.dof_solimp[i])
                solref = m.dof_solref[i]
                diag = m.dof_invweight0[w % m.dof_invweight0.shape[0], i]
            imp = impedance(solimp, scalar(0.0), scalar(0.0))
            k, b = stiffness_damping(m, solref, solimp[1])
            set_row(d, w, r, scalar(0.0), scalar(0.0), floss, imp, regularizer(imp, diag), scalar(0.0), b)
            if tendon:
                copy_tendon_jacobian(m, d, w, r, i, scalar(1.0))
            else:
                zero_jacobian(m, d, w, r)
                d.efc_J[w, r, i] = scalar(1.0)
        else:
            clear_row(d, w, r)

    @wp.func
    def tendon_limit_row(m: Model, d: Data, w: int, r: int):
        """Row r, a tendon limit side (mj_instantiateLimit): dist = side (range[side] - length),
        J = -side ten_J.

        Model: efc_colind, efc_id, efc_nnz, efc_sub, enable_constraint, enable_refsafe, tendon, timestep. Data in:
        ten_length, ten_J. Data out (row r): efc_J, efc_active, efc_pos, efc_margin, efc_frictionloss, efc_R, efc_D,
        efc_K, efc_B, efc_imp, efc_force."""
        t = m.efc_id[r]
        side = m.efc_sub[r]
        ten = m.tendon[t]
        rng = ten.range
        margin = ten.margin
        value = d.ten_length[w, t]
        dist = rng[1] - value
        if side < 0:
            dist = value - rng[0]
        if m.enable_constraint != 0 and dist < margin:
            copy_tendon_jacobian(m, d, w, r, t, scalar(-side))
            solimp = clamp_solimp(ten.solimp_lim)
            imp = impedance(solimp, dist, margin)
            k, b = stiffness_damping(m, ten.solref_lim, solimp[1])
            set_row(d, w, r, dist, margin, scalar(0.0), imp, regularizer(imp, ten.invweight0), k, b)
        else:
            clear_row(d, w, r)

    def make_limit_row(joints: bool, balls: bool, tendons: bool):
        """`limit_row` for the rows of hinges and slides (`joints`), of ball joints (`balls`), of
        tendons, or all (the differentiable step launches the three apart: together their
        generated adjoint needs more registers than a GPU thread should use)."""
        @wp.func
        def limit_row(m: Model, d: Data, w: int, r: int):
            """Row r (< nefc_limit), a joint's or a tendon's limit side: residual = distance to the
            nearer end of the range.

            Model: dof_invweight0, efc_colind, efc_id, efc_nnz, efc_sub, efc_type, enable_constraint,
            enable_refsafe, jnt_dofadr, jnt_margin, jnt_qposadr, jnt_range, jnt_solimp, jnt_solref, jnt_type,
            tendon, timestep. Data in: qpos, ten_length, ten_J. Data out (row r): efc_J, efc_active, efc_pos,
            efc_margin, efc_frictionloss, efc_R, efc_D, efc_K, efc_B, efc_imp, efc_force."""
            if m.efc_type[r] == ConstraintType.LIMIT_TENDON:
                if wp.static(tendons):
                    tendon_limit_row(m, d, w, r)
            elif wp.static(joints or balls):
                jnt = m.efc_id[r]
                ball = m.jnt_type[jnt] == JointType.BALL
                if ball and not wp.static(balls):
                    return
                if not ball and not wp.static(joints):
                    return
                side = m.efc_sub[r]
                dof = m.jnt_dofadr[jnt]
                qadr = m.jnt_qposadr[jnt]
                rng = m.jnt_range[jnt]
                margin = m.jnt_margin[jnt]
                active = int(0)
                if ball:
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
                    diag = m.dof_invweight0[w % m.dof_invweight0.shape[0], dof]
                    set_row(d, w, r, dist, margin, scalar(0.0), imp, regularizer(imp, diag), k, b)
                else:
                    clear_row(d, w, r)
        return limit_row

    @wp.func
    def contact_rows_start(m: Model):
        """The first contact row: the rows before it are the equality, friction and limit rows."""
        return m.nefc_eq + m.nefc_friction + m.nefc_limit

    @wp.func
    def slot_has_rows(m: Model, d: Data, w: int, c: int):
        """Contact slot c holds a contact within its margin (contacts in the gap get no rows)."""
        has = False
        if d.contact_active[w, c] != 0 and m.enable_constraint != 0:
            has = d.contact_dist[w, c] < m.cpair_margin[d.contact_pair[w, c]]
        return has

    @wp.func
    def place_slot_rows(m: Model, d: Data, w: int, c: int, r0: int):
        """Slot c's rows at r0: their (type, id, sub, column set) and the slot's first row."""
        p = d.contact_pair[w, c]
        kind = m.cpair_efc_type[p]
        cs = contact_rows_start(m) + p
        for e in range(m.cpair_nrow[p]):
            d.efc_type[w, r0 + e] = kind
            d.efc_id[w, r0 + e] = c
            d.efc_sub[w, r0 + e] = e
            d.efc_cols[w, r0 + e] = cs
        d.contact_efc_adr[w, c] = r0

    @wp.func
    def place_fixed_rows(m: Model, d: Data, w: int, lo: int, hi: int):
        """The fixed rows lo .. hi - 1: their (type, id, sub) from the model, column set their own."""
        r = lo
        while r < hi:
            d.efc_type[w, r] = m.efc_type[r]
            d.efc_id[w, r] = m.efc_id[r]
            d.efc_sub[w, r] = m.efc_sub[r]
            d.efc_cols[w, r] = r
            r = r + 1

    @wp.func
    def finish_address(m: Model, d: Data, w: int, n: int, need: int, old: int):
        """The row count n of world w (need: what its contacts needed), the rows n .. old - 1 that
        held contacts in the last evaluation deactivated, the row budget's overflow recorded."""
        r = n
        while r < old:
            d.efc_active[w, r] = 0
            d.efc_D[w, r] = scalar(0.0)
            d.efc_force[w, r] = scalar(0.0)
            r = r + 1
        d.nefc[w] = n
        overflow(d, w, OVERFLOW_ROWS, 2, need, m.nefc)

    def make_efc_address(write_all: bool):
        """`efc_address` that writes every slot's first row (`write_all`: for buffers whose values
        say nothing, the differentiable step's pooled Data) or only those of the slots listed
        before and now (Data.contact_slots: every other slot has none already)."""
        @wp.func
        def efc_address(m: Model, d: Data, w: int):
            """Places of the constraint rows (mj_makeConstraint's counts, by one thread): the fixed
            rows, then the rows of each slot that holds a contact within its margin (the slots of the
            pairs the broadphase kept, Data.collision_pair), in slot order,
            as long as they fit the row budget (Model.nefc); the slots whose rows do not fit, and
            every slot after them, get none (the overflow is flagged). Also the list of the slots
            with rows (Data.contact_slots), which the fused schedule's passes over the contacts
            visit.

            Model: cpair_efc_type, cpair_margin, cpair_nrow, efc_id,
            efc_sub, efc_type, enable_constraint, nconmax, nefc, nefc_eq, nefc_friction, nefc_limit. Data in:
            collision_pair, collision_adr, collision_nslot, ncollision, contact_pair, contact_active, contact_dist,
            contact_slots, contact_nslots, nefc, overflow. Data out: contact_efc_adr,
            contact_slots, contact_nslots, efc_type, efc_id, efc_sub, efc_cols, efc_active, efc_D,
            efc_force (rows no longer in use), nefc, overflow, overflow_need."""
            first = contact_rows_start(m)
            old = d.nefc[w]
            place_fixed_rows(m, d, w, 0, first)
            k = int(0)
            if wp.static(not write_all):
                # the slots that had rows: none now, unless placed again below
                while k < d.contact_nslots[w]:
                    d.contact_efc_adr[w, d.contact_slots[w, k]] = -1
                    k = k + 1
                k = int(0)
            if wp.static(write_all):
                c = int(0)
                while c < m.nconmax:
                    d.contact_efc_adr[w, c] = -1
                    c = c + 1
            n = first
            need = first
            # the slots of the pairs the broadphase kept, in pair order: slot order
            i = int(0)
            while i < d.ncollision[w]:
                p = d.collision_pair[w, i]
                c = d.collision_adr[w, i]
                end = c + d.collision_nslot[w, i]
                while c < end:
                    if slot_has_rows(m, d, w, c):
                        need = need + m.cpair_nrow[p]
                        if need <= m.nefc:
                            place_slot_rows(m, d, w, c, n)
                            n = need
                            d.contact_slots[w, k] = c
                            k = k + 1
                    c = c + 1
                i = i + 1
            d.contact_nslots[w] = k
            finish_address(m, d, w, n, need, old)

        return efc_address

    efc_address = make_efc_address(False)
    efc_address_all = make_efc_address(True)

    @wp.func
    def lanes_before(d: Data, w: int, lane: int, start: int):
        """start plus the counts (efc_lane_count) of world w's lanes before `lane`: where the lane's
        share begins in a list the lanes write together."""
        n = start
        k = int(0)
        while k < lane:
            n = n + d.efc_lane_count[w, k]
            k = k + 1
        return n

    @wp.func
    def pair_rows(m: Model, d: Data, w: int, i: int):
        """The rows the contacts of entry i of the kept pairs within their margins need."""
        count = int(0)
        p = d.collision_pair[w, i]
        c = d.collision_adr[w, i]
        end = c + d.collision_nslot[w, i]
        while c < end:
            if slot_has_rows(m, d, w, c):
                count = count + m.cpair_nrow[p]
            c = c + 1
        return count

    @wp.func
    def efc_address_lanes(m: Model, d: Data, w: int, lane: int, nlanes: int, old: int):
        """`efc_address` by the nlanes threads of world w's block (the wide schedule): the entries
        of the world's list of kept pairs (Data.collision_pair) split into contiguous shares, one
        per lane; each lane counts the rows its share's contacts need, then places them from the
        count of the lanes before it (efc_lane_count, a barrier between): the same places. Each
        lane also takes back the first rows the last evaluation gave slots (its share of the old
        contact rows, `old`: Data.nefc then). Returns the lane's share for
        `efc_address_lanes_write`. Barriers: the caller's (block_sync), before and after.

        Model: cpair_margin, cpair_nrow, efc_id, efc_sub, efc_type,
        enable_constraint, nefc_eq, nefc_friction, nefc_limit. Data in: collision_pair, ncollision,
        contact_active, contact_dist, efc_id, efc_sub (the old contact rows). Data out: contact_efc_adr (the
        old rows' slots), efc_lane_count (the lane's), efc_type, efc_id, efc_sub, efc_cols (the fixed rows of
        the lane's share)."""
        first = contact_rows_start(m)
        r = first + lane
        while r < old:
            if d.efc_sub[w, r] == 0:
                d.contact_efc_adr[w, d.efc_id[w, r]] = -1
            r = r + nlanes
        fshare = (first + nlanes - 1) // nlanes
        place_fixed_rows(m, d, w, wp.min(lane * fshare, first), wp.min(lane * fshare + fshare, first))
        n = d.ncollision[w]
        share = (n + nlanes - 1) // nlanes
        lo = wp.min(lane * share, n)
        hi = wp.min(lo + share, n)
        count = int(0)
        i = lo
        while i < hi:
            count = count + pair_rows(m, d, w, i)
            i = i + 1
        d.efc_lane_count[w, lane] = count
        return lo, hi

    @wp.func
    def efc_address_lanes_write(m: Model, d: Data, w: int, lane: int, nlanes: int, lo: int, hi: int, old: int):
        """The second half of `efc_address_lanes`, after the barrier: the slots of the lane's
        entries placed from the rows of the lanes before it; the last lane counts the rows and
        records the overflow (`old`: Data.nefc before this evaluation, read before the barrier).

        Model: cpair_efc_type, cpair_margin, cpair_nrow, enable_constraint,
        nefc, nefc_eq, nefc_friction, nefc_limit. Data in: collision_pair, collision_adr, collision_nslot, ncollision,
        contact_pair, contact_active, contact_dist, efc_lane_count, overflow. Data out: contact_efc_adr (the slots of
        the
        lane's entries), efc_type, efc_id, efc_sub, efc_cols (their rows); the last lane's nefc, overflow,
        overflow_need, efc_active, efc_D, efc_force (rows no longer in use)."""
        need = lanes_before(d, w, lane, contact_rows_start(m))
        i = lo
        while i < hi:
            p = d.collision_pair[w, i]
            c = d.collision_adr[w, i]
            end = c + d.collision_nslot[w, i]
            while c < end:
                placed = int(0)
                if slot_has_rows(m, d, w, c):
                    n = need
                    need = need + m.cpair_nrow[p]
                    if need <= m.nefc:
                        place_slot_rows(m, d, w, c, n)
                        placed = 1
                if placed == 0:
                    d.contact_efc_adr[w, c] = -1
                c = c + 1
            i = i + 1
        if lane == nlanes - 1:
            # the rows the budget kept: every lane's up to the first whose contacts do not all fit,
            # then that lane's contacts up to the first that does not (as it placed them)
            n = contact_rows_start(m)
            total = d.ncollision[w]
            share = (total + nlanes - 1) // nlanes
            k = int(0)
            while k < nlanes:
                step = d.efc_lane_count[w, k]
                if n + step > m.nefc:
                    i = wp.min(k * share, total)
                    last = wp.min(i + share, total)
                    full = int(0)
                    while i < last and full == 0:
                        p = d.collision_pair[w, i]
                        c = d.collision_adr[w, i]
                        end = c + d.collision_nslot[w, i]
                        while c < end:
                            if slot_has_rows(m, d, w, c):
                                if n + m.cpair_nrow[p] > m.nefc:
                                    full = 1
                                    break
                                n = n + m.cpair_nrow[p]
                            c = c + 1
                        i = i + 1
                    break
                n = n + step
                k = k + 1
            finish_address(m, d, w, n, need, old)

    contact_jacobian = make_contact_jacobian(True, True)

    @wp.func
    def pyramid_regularizer(m: Model, imp: scalar, tran: scalar, friction: scalar, nrow: int):
        """R of every row of a frictionless (nrow 1: R_0) or pyramidal contact: the pyramid's
        common R, matching the elliptic cone's friction impedance, R_py = 2 mu^2 R_0 with
        mu = friction_0 sqrt(R_1 / R_0), R_1 = R_0 / impratio (mj_makeImpedance); `tran` is the
        contact's approximate inverse inertia (mj_diagApprox)."""
        reg = scalar(0.0)
        if nrow == 1:
            reg = regularizer(imp, tran)
        else:
            r_0 = regularizer(imp, tran + friction * friction * tran)
            r_1 = r_0 / wp.max(scalar(MINVAL), m.impratio)
            mu = friction * wp.sqrt(r_1 / r_0)
            reg = scalar(2.0) * mu * mu * r_0
        return reg

    # ---------------------------------------------------------------------------------------
    # Hand-written adjoint of a frictionless or pyramidal contact's rows (`contact_row` for
    # each of its rows and `contact_jacobian` for both bodies), which the differentiable step's
    # fused schedule runs in place of the generated one (simrl.sim.grad's contact_reverse)

    @wp.func
    def pyramid_regularizer_adjoint(m: Model, imp: scalar, tran: scalar, friction: scalar, nrow: int,
                                    reg_bar: scalar):
        """The adjoints (imp_bar, friction_bar) of `pyramid_regularizer` for its output's reg_bar,
        in the branches its forward takes (max(MINVAL, x) passes the derivative to x unless
        MINVAL > x, as Warp's adjoint of max). With nrow > 1, reg = 2 mu^2 r_0 = 2 f^2 r_0 / ir
        (mu = f sqrt(r_1 / r_0), r_1 = r_0 / ir, ir = max(MINVAL, impratio)), r_0 = max(MINVAL,
        (1 - imp) diag / imp), diag = tran (1 + f^2): d reg / d r_0 = 2 f^2 / ir, d reg / d f
        (at fixed r_0) = 4 f r_0 / ir; d r_0 / d imp = -diag / imp^2, d r_0 / d diag = (1 - imp)
        / imp, d diag / d f = 2 f tran."""
        one = scalar(1.0)
        imp_bar = scalar(0.0)
        friction_bar = scalar(0.0)
        if nrow == 1:
            if not (scalar(MINVAL) > (one - imp) * tran / imp):
                imp_bar = -reg_bar * tran / (imp * imp)
        else:
            diag = tran + friction * friction * tran
            r_0 = wp.max(scalar(MINVAL), (one - imp) * diag / imp)
            ir = wp.max(scalar(MINVAL), m.impratio)
            r0_bar = reg_bar * scalar(2.0) * friction * friction / ir
            friction_bar = reg_bar * scalar(4.0) * friction * r_0 / ir
            if not (scalar(MINVAL) > (one - imp) * diag / imp):
                imp_bar = -r0_bar * diag / (imp * imp)
                friction_bar = friction_bar + r0_bar * (one - imp) / imp * scalar(2.0) * friction * tran
        return imp_bar, friction_bar

    @wp.func
    def joint_limit_reverse(m: Model, d: Data, adj: Data, w: int, r: int):
        """The adjoint of limit row r when it is a hinge's or a slide's and active (`limit_row`):
        efc_pos = dist = range_1 - qpos (side >= 0) or qpos - range_0, imp = impedance(dist),
        R = max(MINVAL, (1 - imp) diag / imp) (`regularizer`, d R / d imp = -diag / imp^2 unless
        clamped), D = 1 / R: qpos_bar -+= efc_pos_bar + (imp_bar + R_bar - D_bar / R^2 ...) d imp
        / d dist. J = -side is a constant; margin, K and B are the model's."""
        if m.efc_type[r] != ConstraintType.LIMIT_TENDON and d.efc_active[w, r] != 0:
            jnt = m.efc_id[r]
            if m.jnt_type[jnt] != JointType.BALL:
                dof = m.jnt_dofadr[jnt]
                dist = d.efc_pos[w, r]
                imp = d.efc_imp[w, r]
                R = d.efc_R[w, r]
                diag = m.dof_invweight0[w % m.dof_invweight0.shape[0], dof]
                imp_bar = adj.efc_imp[w, r]
                if not (scalar(MINVAL) > (scalar(1.0) - imp) * diag / imp):
                    imp_bar = imp_bar - (adj.efc_R[w, r] - adj.efc_D[w, r] / (R * R)) * diag / (imp * imp)
                solimp = clamp_solimp(m.jnt_solimp[jnt])
                dist_bar = adj.efc_pos[w, r] + imp_bar * impedance_slope(solimp, dist, m.jnt_margin[jnt])
                qadr = m.jnt_qposadr[jnt]
                if m.efc_sub[r] < 0:
                    adj.qpos[w, qadr] = adj.qpos[w, qadr] + dist_bar
                else:
                    adj.qpos[w, qadr] = adj.qpos[w, qadr] - dist_bar

    @wp.func
    def contact_body_reverse(m: Model, d: Data, adj: Data, w: int, r0: int, nrow: int, body: int, point: vec3,
                             frame: T.mat33, friction: vec5, sign: scalar):
        """The adjoint of `add_contact_jacobian` (sign x the Jacobian of `point` on `body` in
        the contact frame, added to the contact's rows) for the rows' J_bar: with J_n = n' jp,
        J_k = t_k' jp (k < 2) or a_{k-2}' ang, jp = cdof_lin + ang x offset, the pyramid's edges
        J_n +- mu_k J_k, per dof of the chain: jn_bar = sum_k (A_k + B_k), jk_bar = A_k - B_k (A, B
        the edges' J_bar), n_bar += s jn_bar jp, jp_bar = s jn_bar n + s mu_k jk_bar t_k, ...,
        cdof_bar += (ang_bar + offset x jp_bar, jp_bar), offset_bar += jp_bar x ang. Adds into
        adj.cdof, adj.subtree_com (offset = point - subtree_com of the root); returns (point_bar,
        frame_bar, friction_bar)."""
        point_bar = vec3(scalar(0.0))
        frame_bar = T.mat33(scalar(0.0))
        friction_bar = vec5(scalar(0.0))
        dof = m.body_dofend[body]
        if dof >= 0:
            root = m.body_rootid[body]
            offset = point - d.subtree_com[w, root]
            nrm = vec3(frame[0, 0], frame[0, 1], frame[0, 2])
            offset_bar = vec3(scalar(0.0))
            adr = m.dof_ancestor_adr[dof]
            for k in range(adr - 1, adr + m.dof_ancestor_num[dof]):
                i = dof
                if k >= adr:
                    i = m.dof_ancestor[k]
                cdof = d.cdof[w, i]
                ang = vec3(cdof[0], cdof[1], cdof[2])
                jp = vec3(cdof[3], cdof[4], cdof[5]) + wp.cross(ang, offset)
                jn_bar = scalar(0.0)
                jp_bar = vec3(scalar(0.0))
                ang_bar = vec3(scalar(0.0))
                if nrow == 1:
                    jn_bar = adj.efc_J[w, r0, i]
                else:
                    for e in range(nrow // 2):
                        a = adj.efc_J[w, r0 + 2 * e, i]
                        b = adj.efc_J[w, r0 + 2 * e + 1, i]
                        jn_bar = jn_bar + a + b
                        jk_bar = (a - b) * sign
                        if e < 2:
                            t = vec3(frame[1 + e, 0], frame[1 + e, 1], frame[1 + e, 2])
                            friction_bar[e] = friction_bar[e] + jk_bar * wp.dot(t, jp)
                            s = jk_bar * friction[e]
                            jp_bar = jp_bar + t * s
                            for c in range(3):
                                frame_bar[1 + e, c] = frame_bar[1 + e, c] + s * jp[c]
                        else:
                            t = vec3(frame[e - 2, 0], frame[e - 2, 1], frame[e - 2, 2])
                            friction_bar[e] = friction_bar[e] + jk_bar * wp.dot(t, ang)
                            s = jk_bar * friction[e]
                            ang_bar = ang_bar + t * s
                            for c in range(3):
                                frame_bar[e - 2, c] = frame_bar[e - 2, c] + s * ang[c]
                jn_bar = jn_bar * sign
                jp_bar = jp_bar + nrm * jn_bar
                for c in range(3):
                    frame_bar[0, c] = frame_bar[0, c] + jn_bar * jp[c]
                ang_bar = ang_bar + wp.cross(offset, jp_bar)
                offset_bar = offset_bar + wp.cross(jp_bar, ang)
                cb = adj.cdof[w, i]
                adj.cdof[w, i] = T.vec6(cb[0] + ang_bar[0], cb[1] + ang_bar[1], cb[2] + ang_bar[2],
                                        cb[3] + jp_bar[0], cb[4] + jp_bar[1], cb[5] + jp_bar[2])
            point_bar = offset_bar
            adj.subtree_com[w, root] = adj.subtree_com[w, root] - offset_bar
        return point_bar, frame_bar, friction_bar

    @wp.func
    def contact_reverse(m: Model, d: Data, adj: Data, friction_adj: wp.array2d(dtype=vec5), w: int, c: int):
        """The adjoint of contact slot c's rows, frictionless or pyramidal (`contact_row` of each
        row, `contact_jacobian` for both bodies), when the slot has rows: from the adjoints of
        the rows' efc_J, efc_pos, efc_imp, efc_R and efc_D (D = 1 / R) into those of
        contact_dist, contact_pos, contact_frame, cdof, subtree_com and, where the friction is
        differentiated (`friction_adj` not empty), cpair_friction. margin, K and B are
        functions of the model's constants only (their adjoints go nowhere)."""
        r0 = d.contact_efc_adr[w, c]
        if r0 >= 0:
            p = d.contact_pair[w, c]
            nrow = m.cpair_nrow[p]
            dist = d.contact_dist[w, c]
            fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
            g = m.cpair_geom[p]
            iw1 = m.body_invweight0[w % m.body_invweight0.shape[0], m.geom_bodyid[g[0]]]
            iw2 = m.body_invweight0[w % m.body_invweight0.shape[0], m.geom_bodyid[g[1]]]
            tran = iw1[0] + iw2[0]
            solimp = clamp_solimp(m.cpair_solimp[p])
            imp = d.efc_imp[w, r0]
            # the rows' parameters (each row: the same dist, imp and R)
            imp_bar = scalar(0.0)
            reg_bar = scalar(0.0)
            dist_bar = scalar(0.0)
            for e in range(nrow):
                r = r0 + e
                R = d.efc_R[w, r]
                reg_bar = reg_bar + adj.efc_R[w, r] - adj.efc_D[w, r] / (R * R)
                imp_bar = imp_bar + adj.efc_imp[w, r]
                dist_bar = dist_bar + adj.efc_pos[w, r]
            i_bar, f0_bar = pyramid_regularizer_adjoint(m, imp, tran, fr[0], nrow, reg_bar)
            dist_bar = dist_bar + (imp_bar + i_bar) * impedance_slope(solimp, dist, m.cpair_margin[p])
            adj.contact_dist[w, c] = adj.contact_dist[w, c] + dist_bar
            # the Jacobian: the second geom's body's part, then the first's (sign -1)
            frame = d.contact_frame[w, c]
            point = d.contact_pos[w, c]
            p2, fb2, frb2 = contact_body_reverse(m, d, adj, w, r0, nrow, m.geom_bodyid[g[1]], point, frame, fr,
                                                 scalar(1.0))
            p1, fb1, frb1 = contact_body_reverse(m, d, adj, w, r0, nrow, m.geom_bodyid[g[0]], point, frame, fr,
                                                 scalar(-1.0))
            adj.contact_pos[w, c] = adj.contact_pos[w, c] + p2 + p1
            adj.contact_frame[w, c] = adj.contact_frame[w, c] + fb2 + fb1
            if friction_adj.shape[0] > 0:
                fb = frb2 + frb1
                fb[0] = fb[0] + f0_bar
                q = w % friction_adj.shape[0]
                friction_adj[q, p] = friction_adj[q, p] + fb

    def make_contact_rows(jacobian: bool, pyramid: bool = True, elliptic: bool = True):
        """`contact_rows` with the Jacobian (`jacobian`; the engine's step) or without it, for
        frictionless and pyramidal contacts (which also deactivates the rows of slots without
        one), elliptic ones, or all. The differentiable step uses the elliptic one without the
        Jacobian, and `contact_row` for the others (their rows zeroed: it launches
        `contact_jacobian` apart)."""
        # inlined into the loop over slots
        @wp.func(inline=True)
        def contact_rows(m: Model, d: Data, w: int, c: int):
            """The rows of contact slot c, when efc_address gave it rows (a contact within its
            margin: contacts in the gap get none). A slot without rows, the common case on terrain
            (thousands of slots, a few contacts), reads one int.

            Model: body_dofend, body_invweight0, body_rootid, cone_elliptic, cpair_friction,
            cpair_geom, cpair_margin, cpair_nrow, cpair_solimp, cpair_solref, cpair_solreffriction, dof_ancestor,
            dof_ancestor_adr, dof_ancestor_num, efc_colind, efc_nnz, enable_refsafe, geom_bodyid, impratio,
            timestep. Data in: contact_pair, contact_efc_adr, contact_dist, contact_pos, contact_frame, efc_cols, cdof,
            subtree_com. Data out (the slot's rows): efc_J, efc_active, efc_pos, efc_margin, efc_frictionloss,
            efc_R, efc_D, efc_K, efc_B, efc_imp, efc_mu."""
            r0 = d.contact_efc_adr[w, c]
            if r0 >= 0:
                p = d.contact_pair[w, c]
                dist = d.contact_dist[w, c]
                margin = m.cpair_margin[p]
                nrow = m.cpair_nrow[p]  # 1 (condim 1), 2 (condim - 1) pyramid edges or condim
                fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
                g = m.cpair_geom[p]
                b1 = m.geom_bodyid[g[0]]
                b2 = m.geom_bodyid[g[1]]
                if wp.static(jacobian):
                    contact_jacobian(m, d, w, c)

                # approximate inverse inertia of the contact (mj_diagApprox): both bodies
                iw1 = m.body_invweight0[w % m.body_invweight0.shape[0], b1]
                iw2 = m.body_invweight0[w % m.body_invweight0.shape[0], b2]
                tran = iw1[0] + iw2[0]
                solimp = clamp_solimp(m.cpair_solimp[p])
                imp = impedance(solimp, dist, margin)
                k, b = stiffness_damping(m, m.cpair_solref[p], solimp[1])
                # the rows of each kind of cone in one loop over set_row
                if nrow == 1 or m.cone_elliptic == 0:
                    if wp.static(pyramid):
                        reg = pyramid_regularizer(m, imp, tran, fr[0], nrow)
                        for e in range(nrow):
                            set_row(d, w, r0 + e, dist, margin, scalar(0.0), imp, reg, k, b)
                elif wp.static(elliptic):
                    # the normal row's R, R_1 = R_0 / impratio, R_j mu_j^2 = R_1 mu_1^2; the
                    # friction rows have no position residual (K = 0) and solreffriction's B
                    # when set (mj_makeImpedance); mu of the regularized cone =
                    # friction_0 sqrt(R_1 / R_0)
                    r_0 = regularizer(imp, tran)
                    r_1 = r_0 / wp.max(scalar(MINVAL), m.impratio)
                    ref = m.cpair_solreffriction[p]
                    if ref[0] == scalar(0.0) and ref[1] == scalar(0.0):
                        ref = m.cpair_solref[p]
                    kf, bf = stiffness_damping(m, ref, solimp[1])
                    for e in range(nrow):
                        if e == 0:
                            set_row(d, w, r0, dist, margin, scalar(0.0), imp, r_0, k, b)
                            d.efc_mu[w, r0] = fr[0] * wp.sqrt(r_1 / r_0)
                        else:
                            r_e = r_1 * fr[0] * fr[0] / (fr[e - 1] * fr[e - 1])
                            set_row(d, w, r0 + e, scalar(0.0), scalar(0.0), scalar(0.0), imp, r_e, scalar(0.0), bf)
                            d.efc_mu[w, r0 + e] = fr[e - 1]
        return contact_rows

    @wp.func
    def contact_row(m: Model, d: Data, w: int, r: int):
        """The differentiable step's contact rows, one row per element (contact_rows' loop over a
        slot's rows costs its generated adjoint registers): row r (< nefc[w]) of slot c = efc_id[r],
        with the arithmetic of `contact_rows` for frictionless and pyramidal cones; every row's
        Jacobian zeroed (`contact_jacobian` adds each body's part after). Elliptic cones' rows:
        `contact_rows_elliptic`.

        Model: body_invweight0, cone_elliptic, cpair_friction, cpair_geom, cpair_margin, cpair_nrow,
        cpair_solimp, cpair_solref, efc_colind, efc_nnz, enable_refsafe, geom_bodyid, impratio, timestep. Data
        in: nefc, efc_id, efc_cols, contact_pair, contact_dist. Data out (row r): efc_J (zeroed), efc_active,
        efc_pos, efc_margin, efc_frictionloss, efc_R, efc_D, efc_K, efc_B, efc_imp."""
        if r < d.nefc[w]:
            c = d.efc_id[w, r]
            p = d.contact_pair[w, c]
            nrow = m.cpair_nrow[p]
            zero_jacobian(m, d, w, r)  # every cone's (contact_jacobian adds to it)
            if nrow == 1 or m.cone_elliptic == 0:
                dist = d.contact_dist[w, c]
                margin = m.cpair_margin[p]
                fr = m.cpair_friction[w % m.cpair_friction.shape[0], p]
                g = m.cpair_geom[p]
                iw1 = m.body_invweight0[w % m.body_invweight0.shape[0], m.geom_bodyid[g[0]]]
                iw2 = m.body_invweight0[w % m.body_invweight0.shape[0], m.geom_bodyid[g[1]]]
                tran = iw1[0] + iw2[0]
                solimp = clamp_solimp(m.cpair_solimp[p])
                imp = impedance(solimp, dist, margin)
                k, b = stiffness_damping(m, m.cpair_solref[p], solimp[1])
                reg = pyramid_regularizer(m, imp, tran, fr[0], nrow)
                set_row(d, w, r, dist, margin, scalar(0.0), imp, reg, k, b)

    @wp.func
    def constraint_list_lanes(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """`constraint_list` by the nlanes threads of world w's block (the wide schedule): the rows
        in use split into contiguous shares, one per lane; each lane counts its share's active rows,
        then writes them from the count of the lanes before it (efc_lane_count, a barrier between):
        the same list, in the same order. Returns the lane's share. Barriers: the caller's `sync`
        (block_sync), before and after.

        Data in: nefc, efc_active. Data out: efc_lane_count (the lane's)."""
        total = d.nefc[w]
        share = (total + nlanes - 1) // nlanes
        lo = wp.min(lane * share, total)
        hi = wp.min(lo + share, total)
        count = int(0)
        r = lo
        while r < hi:
            count = count + d.efc_active[w, r]
            r = r + 1
        d.efc_lane_count[w, lane] = count
        return lo, hi

    @wp.func
    def constraint_list_lanes_write(m: Model, d: Data, w: int, lane: int, nlanes: int, lo: int, hi: int):
        """The second half of `constraint_list_lanes`, after the barrier: the lane's rows written
        from the lanes before it; the last lane sets efc_nactive.

        Data in: efc_active, efc_lane_count. Data out: efc_list (the lane's share), efc_nactive (the last lane)."""
        n = lanes_before(d, w, lane, 0)
        r = lo
        while r < hi:
            if d.efc_active[w, r] != 0:
                d.efc_list[w, n] = r
                n = n + 1
            r = r + 1
        if lane == nlanes - 1:
            d.efc_nactive[w] = n

    @wp.func
    def constraint_list_one(m: Model, d: Data, w: int):
        """efc_list: the active rows of the rows in use (a fixed row may be inactive, every contact
        row is active), increasing, by one thread.

        Data in: nefc, efc_active. Data out: efc_list, efc_nactive."""
        n = int(0)
        r = int(0)
        end = d.nefc[w]
        while r < end:
            if d.efc_active[w, r] != 0:
                d.efc_list[w, n] = r
                n = n + 1
            r = r + 1
        d.efc_nactive[w] = n

    @wp.func
    def reference_row(m: Model, d: Data, w: int, r: int):
        """efc_vel = J qvel and aref = -B vel - K imp (pos - margin) of active row r
        (mj_referenceConstraint).

        Model: efc_colind, efc_nnz. Data in: qvel, efc_J, efc_B, efc_K, efc_imp, efc_pos, efc_margin. Data out:
        efc_vel, efc_aref (row r)."""
        # accumulated in memory, not in a local carried across a dynamic loop (exact adjoints)
        d.efc_vel[w, r] = scalar(0.0)
        cs = d.efc_cols[w, r]
        for k in range(m.efc_nnz[cs]):
            j = m.efc_colind[cs, k]
            d.efc_vel[w, r] += d.efc_J[w, r, j] * d.qvel[w, j]
        vel = d.efc_vel[w, r]
        d.efc_aref[w, r] = (-d.efc_B[w, r] * vel
                            - d.efc_K[w, r] * d.efc_imp[w, r] * (d.efc_pos[w, r] - d.efc_margin[w, r]))

    return SimpleNamespace(impedance=impedance, equality_rows=make_equality_rows(True, True, True, flexes=True),
                           equality_rows_flexes=make_equality_rows(False, False, False, flexes=True),
                           equality_rows_bodies=make_equality_rows(True, False, False, jacobian=False),
                           equality_jacobian_1=make_equality_jacobian(True),
                           equality_jacobian_2=make_equality_jacobian(False),
                           equality_rows_joints=make_equality_rows(False, True, False),
                           equality_rows_tendons=make_equality_rows(False, False, True),
                           equality_reference=equality_reference,
                           friction_row=friction_row, limit_row=make_limit_row(True, True, True),
                           joint_limit_row=make_limit_row(True, False, False),
                           ball_limit_row=make_limit_row(False, True, False),
                           tendon_limit_row=make_limit_row(False, False, True),
                           contact_rows=make_contact_rows(True), contact_jacobian=contact_jacobian,
                           # the differentiable step's: each cone's, the two bodies apart, rows zeroed
                           # by contact_row
                           contact_jacobian_pyramid_1=make_contact_jacobian(True, False, True, False, False),
                           contact_jacobian_pyramid_2=make_contact_jacobian(True, False, False, True, False),
                           contact_jacobian_elliptic_1=make_contact_jacobian(False, True, True, False, False),
                           contact_jacobian_elliptic_2=make_contact_jacobian(False, True, False, True, False),
                           contact_row=contact_row,
                           contact_rows_elliptic=make_contact_rows(False, False, True),
                           constraint_list_one=constraint_list_one,
                           constraint_list_lanes=constraint_list_lanes,
                           constraint_list_lanes_write=constraint_list_lanes_write,
                           efc_address=efc_address, efc_address_all=efc_address_all,
                           efc_address_lanes=efc_address_lanes,
                           efc_address_lanes_write=efc_address_lanes_write,
                           reference_row=reference_row, row_dot=row_dot, contact_reverse=contact_reverse,
                           joint_limit_reverse=joint_limit_reverse,
                           contact_rows_start=contact_rows_start,
                           jac_dot_v=jac_dot_v)
