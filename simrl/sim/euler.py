"""Semi-implicit Euler and implicitfast (mj_EulerSkip, mj_implicitSkip and mj_advance,
engine_forward.c).

qvel += h * qacc, then qpos is integrated with the new qvel. When the model has dof damping
(and neither eulerdamp nor damper is disabled), Euler integrates the damping implicitly:
qacc = (M + h D)^-1 (qfrc_smooth + qfrc_constraint). The implicitfast integrator always
integrates qacc = (M - h qDeriv)^-1 (qfrc_smooth + qfrc_constraint), qDeriv the derivative of
qfrc_smooth with respect to qvel without RNE's part (mjd_smooth_vel with flg_bias = 0): the
actuators' (mjd_actuator_vel) minus the dof damping (mjd_passive_vel). The constraint forces
are those the solver found with M, as in MuJoCo. Joint transmissions on hinges and slides and
the dof damping put qDeriv on the diagonal; tendons couple their dofs: the tendon's damping and
the velocity derivative of the actuators on it add ten_qderiv[t] ten_J[t]' ten_J[t], and a site
transmission's actuator its force_vel moment' moment. MuJoCo keeps
qDeriv in the dof-dof sparsity of the tree and then gathers M - h qDeriv onto M's (mjd_passive_vel,
mjd_actuator_vel and mj_implicitSkip's mapD2M): a tendon's coupling of two dofs on different
branches is dropped, and M - h qDeriv keeps M's sparsity and its L'DL factorization.

A standalone free body (one free joint, no children: mj_isFreeBody) is solved apart, as
mj_implicitSkip does after the global solve: its 6x6 block A = M - h qDeriv + h B with B = d
qfrc_bias / d qvel, the gyroscopic derivative the global solve leaves out (mjd_freeMhat,
engine_derivative.c).

`damping(m, d, w, lane, nlanes)` (a world function, simrl.sim.types) computes the acceleration
to integrate, qacc_int (`qderiv(m, d, w, i, j)` is qDeriv[i, j] for j = i or an ancestor dof of
i, after `qderiv_dof` has filled dof_qderiv, `tendon_qderiv` ten_qderiv and actuation's
`site_force_vel` actuator_qderiv;
`free_body_solve` is a free body's block); the element
`joint(m, d, w, j)` then advances joint j's velocity and position and checks them, and
`actuator(m, d, w, a)` advances actuator a's activation and `advance_time(m, d, w, 0)` the
world's time (mj_advance).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import actuation, factor_m, integrate_pos
from simrl.sim.data import TIME, WARNING_INERTIA, data_struct, set_warning_func
from simrl.sim.integrate_pos import jnt_nv
from simrl.sim.model import model_struct
from simrl.sim.types import block_sync, no_sync, scalar_types


@functools.cache
def build(scalar, lanes: bool = False):
    Model, Data = model_struct(scalar), data_struct(scalar)
    ld = factor_m.build(scalar, lanes)
    factor_ld, solve_ld = ld.factor_ld, ld.solve_ld
    integrate = integrate_pos.build(scalar)
    sync = block_sync if lanes else no_sync
    set_warning = set_warning_func(scalar)
    act = actuation.build(scalar)
    actuator_qderiv, force_vel = act.qderiv_dof, act.force_vel
    site_force_vel, site_qderiv = act.site_force_vel, act.site_qderiv
    T = scalar_types(scalar)

    def make_qderiv_dof(actuators: bool):
        """`qderiv_dof`, or without the actuators' part (`actuators` False: for a model without
        implicitfast, whose differentiable step launches it: the actuators' part, never run there,
        would cost the generated adjoint registers)."""
        @wp.func
        def qderiv_dof(m: Model, d: Data, w: int, i: int):
            """qDeriv[i, i] without the tendons: with implicitfast the actuators' derivative, then
            minus the dof damping (mjd_smooth_vel's order); for Euler only the damping (mj_EulerSkip).

            Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, actuator_gear, dof_actuator,
            dof_actuator_adr, dof_actuator_num, dof_damping, dof_jntid, enable_actuation, enable_clampctrl,
            enable_damper, implicitfast, jnt_actfrclimited, jnt_actfrcrange, timestep. Data in: actuator_force, ctrl,
            act, act_dot, qfrc_actuator_raw."""
            deriv = scalar(0.0)
            if wp.static(actuators):
                if m.implicitfast:
                    deriv = actuator_qderiv(m, d, w, i)
            if m.enable_damper:
                deriv = deriv - m.dof_damping[w % m.dof_damping.shape[0], i]
            return deriv
        return qderiv_dof

    qderiv_dof = make_qderiv_dof(True)
    damping_qderiv_dof = make_qderiv_dof(False)

    @wp.func
    def tendon_qderiv(m: Model, d: Data, w: int, t: int):
        """d (force along tendon t) / d ten_velocity[t] with implicitfast: minus its damping
        (mjd_passive_vel) plus gear^2 force_vel of each actuator on it (mjd_actuator_vel; the
        joints' actuatorfrcrange does not drop these, the tendon's own does when it holds their
        total, as in MuJoCo 4.0).

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, actuator_gear, enable_actuation,
        enable_clampctrl, enable_damper, nu, tendon, timestep. Data in: actuator_force, ctrl, ctrl_bad, act, act_dot,
        ten_length, ten_velocity."""
        deriv = scalar(0.0)
        if m.enable_damper:
            deriv = -m.tendon[t].damping
        wg = w % m.actuator_gear.shape[0]
        for a in range(m.nu):
            if m.actuator[a].tendon == t:
                gear = m.actuator_gear[wg, a]
                deriv = deriv + gear * (gear * force_vel(m, d, w, a))
        return deriv

    @wp.func
    def qderiv(m: Model, d: Data, w: int, i: int, j: int):
        """qDeriv[i, j] for j = i or a dof of the same chain: the diagonal terms (dof_qderiv), and
        with implicitfast the site transmissions on dof i (simrl.sim.actuation.site_qderiv) and the
        tendons through dof i, ten_qderiv[t] ten_J[t, i] ten_J[t, j]. Tables filled beforehand keep
        it small: it is inlined into each of the 36 entries of a free body's block.

        Model: dof_actuator, dof_actuator_adr, dof_actuator_num, dof_tendon, dof_tendon_adr, implicitfast,
        nsite_trn. Data in: dof_qderiv, ten_qderiv, ten_J, actuator_qderiv, actuator_moment."""
        deriv = scalar(0.0)
        if i == j:
            deriv = d.dof_qderiv[w, i]
        if m.implicitfast and m.nsite_trn > 0:
            deriv = deriv + site_qderiv(m, d, w, i, j)
        if m.implicitfast:
            span = m.dof_tendon_adr[i]
            for k in range(span[0], span[0] + span[1]):
                t = m.dof_tendon[k]
                deriv = deriv + d.ten_qderiv[w, t] * (d.ten_J[w, t, i] * d.ten_J[w, t, j])
        return deriv

    @wp.func
    def free_body_solve(m: Model, d: Data, w: int, jnt: int, f1: wp.array2d(dtype=scalar),
                        f2: wp.array2d(dtype=scalar)):
        """The accelerations (linear, angular) of the standalone free body of joint `jnt` with
        implicitfast: A^-1 (f1 + f2) over its 6 dofs, A = M - h qDeriv + h B (mjd_freeMhat, its 3x3
        blocks solved by the Schur complement of the linear one). B = d qfrc_bias / d qvel has
        only angular columns: with w = R qvel_rot (R = xmat), s = xipos - xpos, the bias is the
        force f = m w x (w x s) and the torque R' (s x f + w x I w), so d f / d w = -m K with
        K = [w x s]x + [w]x [s]x and d tau / d w = [w]x I - [I w]x.

        Model: body_inertia, body_mass, dof_actuator, dof_actuator_adr, dof_actuator_num, dof_bodyid, dof_tendon,
        dof_tendon_adr, implicitfast, jnt_dofadr, nsite_trn, timestep. Data in: qM, qvel, xpos, xmat, xipos, ximat,
        and qderiv's. In: f1, f2."""
        h = m.timestep
        adr = m.jnt_dofadr[jnt]
        body = m.dof_bodyid[adr]
        A11 = T.mat33()
        A12 = T.mat33()
        A21 = T.mat33()
        A22 = T.mat33()
        for r in range(3):
            for c in range(3):
                A11[r, c] = d.qM[w, adr + r, adr + c] - h * qderiv(m, d, w, adr + r, adr + c)
                A12[r, c] = d.qM[w, adr + r, adr + 3 + c] - h * qderiv(m, d, w, adr + r, adr + 3 + c)
                A21[r, c] = d.qM[w, adr + 3 + r, adr + c] - h * qderiv(m, d, w, adr + 3 + r, adr + c)
                A22[r, c] = d.qM[w, adr + 3 + r, adr + 3 + c] - h * qderiv(m, d, w, adr + 3 + r, adr + 3 + c)
        R = d.xmat[w, body]
        Xi = d.ximat[w, body]
        mass = m.body_mass[w % m.body_mass.shape[0], body]
        inertia = m.body_inertia[w % m.body_inertia.shape[0], body]
        Iw = Xi * wp.diag(inertia) * wp.transpose(Xi)
        s = d.xipos[w, body] - d.xpos[w, body]
        omega = R * T.vec3(d.qvel[w, adr + 3], d.qvel[w, adr + 4], d.qvel[w, adr + 5])
        K = wp.skew(wp.cross(omega, s)) + wp.skew(omega) * wp.skew(s)
        A12 = A12 - (h * mass) * (K * R)
        A22 = A22 + h * (wp.transpose(R) * ((-mass) * (wp.skew(s) * K) + wp.skew(omega) * Iw
                                            - wp.skew(Iw * omega)) * R)
        b1 = T.vec3(f1[w, adr] + f2[w, adr], f1[w, adr + 1] + f2[w, adr + 1], f1[w, adr + 2] + f2[w, adr + 2])
        b2 = T.vec3(f1[w, adr + 3] + f2[w, adr + 3], f1[w, adr + 4] + f2[w, adr + 4],
                    f1[w, adr + 5] + f2[w, adr + 5])
        inv11 = wp.inverse(A11)
        schur = A22 - A21 * (inv11 * A12)
        x2 = wp.inverse(schur) * (b2 - A21 * (inv11 * b1))
        x1 = inv11 * (b1 - A12 * x2)
        return x1, x2

    @wp.func
    def damping(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """qacc_int: (M - h qDeriv)^-1 (qfrc_smooth + qfrc_constraint), or qacc.

        Model: actuator, actuator_biasprm, actuator_forcerange, actuator_gainprm, actuator_gear, body_inertia,
        body_mass, dof_actuator, dof_actuator_adr, dof_actuator_num, dof_bodyid, dof_damping, dof_jntid, dof_parentid,
        dof_tendon, dof_tendon_adr, enable_actuation, enable_clampctrl, enable_damper, euler_damp, free_body_num,
        implicitfast, jnt_actfrclimited, jnt_actfrcrange, jnt_dofadr, jnt_free_body, njnt, nsite_trn, ntendon, nu, nv,
        tendon, timestep. Data in: qM, qacc, qfrc_smooth, qfrc_constraint, qvel, xpos, xmat, xipos, ximat, ten_J,
        actuator_force, actuator_moment, qfrc_actuator_raw, ctrl, act, act_dot. Data out: qacc_int; the scratch
        dof_qderiv, ten_qderiv, actuator_qderiv, qH; nan_world[w, 1] (WARNING_INERTIA set when qH needed a
        raised pivot)."""
        h = m.timestep
        if m.euler_damp or m.implicitfast:
            i = int(lane)
            while i < m.nv:
                d.dof_qderiv[w, i] = qderiv_dof(m, d, w, i)
                i = i + nlanes
            if m.implicitfast:
                t = int(lane)
                while t < m.ntendon:
                    d.ten_qderiv[w, t] = tendon_qderiv(m, d, w, t)
                    t = t + nlanes
                if m.nsite_trn > 0:
                    a = int(lane)
                    while a < m.nu:
                        site_force_vel(m, d, w, a)
                        a = a + nlanes
            sync()
            # qH = M - h qDeriv on M's sparsity (Euler: M + h diag(damping)), factorized like M;
            # qDeriv's off-diagonal terms come from tendons and site transmissions alone (qderiv),
            # without them qH's off-diagonal entries are M's (M - h 0: the same bits)
            coupled = m.implicitfast and (m.ntendon > 0 or m.nsite_trn > 0)
            i = int(lane)
            while i < m.nv:
                d.qH[w, i, i] = d.qM[w, i, i] - h * qderiv(m, d, w, i, i)
                j = m.dof_parentid[i]
                while j >= 0:
                    if coupled:
                        d.qH[w, i, j] = d.qM[w, i, j] - h * qderiv(m, d, w, i, j)
                    else:
                        d.qH[w, i, j] = d.qM[w, i, j]
                    j = m.dof_parentid[j]
                d.qacc_int[w, i] = d.qfrc_smooth[w, i] + d.qfrc_constraint[w, i]
                i = i + nlanes
            sync()
            # MuJoCo's mj_factorI warns (mjWARN_INERTIA) for M - h D too; qLD's flag already cleared
            if factor_ld(m, d.qH, w, lane, nlanes) > 0 and lane == 0:
                set_warning(d, w, WARNING_INERTIA, True)
            solve_ld(m, d.qH, d.qacc_int, w, lane, nlanes)
            # the standalone free bodies' blocks: their rows of M - h qDeriv are decoupled from
            # the others', so the global solve's other rows stand (mj_implicitSkip)
            if m.free_body_num:
                jnt = int(lane)
                while jnt < m.njnt:
                    if m.jnt_free_body[jnt]:
                        adr = m.jnt_dofadr[jnt]
                        x1, x2 = free_body_solve(m, d, w, jnt, d.qfrc_smooth, d.qfrc_constraint)
                        for r in range(3):
                            d.qacc_int[w, adr + r] = x1[r]
                            d.qacc_int[w, adr + 3 + r] = x2[r]
                    jnt = jnt + nlanes
                sync()
        else:
            i = int(lane)
            while i < m.nv:
                d.qacc_int[w, i] = d.qacc[w, i]
                i = i + nlanes

    @wp.func
    def joint(m: Model, d: Data, w: int, j: int):
        """Joint j's velocity advanced by h qacc_int, then its position (mj_advance), then checked.

        Model: jnt_dofadr, jnt_qposadr, jnt_type, timestep. Data in: qacc_int, qpos, qvel. Data out: qvel, qpos (of
        the joint's dofs and coordinates), nan_world (by atomic max)."""
        h = m.timestep
        dadr = m.jnt_dofadr[j]
        for k in range(jnt_nv(m.jnt_type[j])):
            i = dadr + k
            d.qvel[w, i] = d.qvel[w, i] + d.qacc_int[w, i] * h
        integrate.joint(m, d.qpos, d.qpos, d.qvel, h, w, j)
        integrate.check_joint(m, d, w, j)

    advance_activation = actuation.build(scalar).advance_activation

    @wp.func
    def actuator(m: Model, d: Data, w: int, a: int):
        """Actuator a's activation advanced by its act_dot (mj_advance).

        Model: actuator, enable_actuation, timestep. Data in: act, act_dot. Data out: act (the actuator's
        activation)."""
        advance_activation(m, d.act, d.act_dot, d.act, w, a)

    @wp.func
    def advance_time(m: Model, d: Data, w: int, e: int):
        """The world's time advanced by one timestep (mj_advance: d->time += h; mj_RungeKutta
        restores the step's first time before it calls mj_advance, so RK4 ends the same way).

        Model: timestep. Data in: solver_scalar (the time). Data out: solver_scalar (the time)."""
        d.solver_scalar[w, TIME] = d.solver_scalar[w, TIME] + m.timestep

    return SimpleNamespace(damping=damping, joint=joint, advance_time=advance_time, qderiv_dof=qderiv_dof,
                           damping_qderiv_dof=damping_qderiv_dof,
                           qderiv=qderiv,
                           tendon_qderiv=tendon_qderiv, free_body_solve=free_body_solve, actuator=actuator)
