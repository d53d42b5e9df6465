"""The differentiable step: `Sim.step`'s stages recorded on a `wp.Tape`, with exact adjoints.

Every stage function of the engine (kinematics ... actuation, integrate_pos) is written so that
Warp's generated adjoint is exact: each array element is written once and then only added to,
and no local variable is carried across the iterations of a loop with a dynamic trip count.
They are compiled here a second time, into a module that generates adjoints
(`kernel_module(..., backward=True)`); the engine's own module skips them for compile time.

The linear solves are the exception: the sparse L'DL factorization works in place, so it has
a hand-written adjoint instead (`solve_adjoint`). For x = A^-1 b with A symmetric,
    b_bar = A^-1 x_bar,    A_bar = -b_bar x^T,
using the factor kept from the forward pass (one more solve, no refactorization); the solve of
qacc_smooth, which only the constraint solver reads, records none. The Newton solver's result is
differentiated implicitly (`constraint_adjoint`) with the factor of its Hessian that it leaves
at the solution (solver_H), again no refactorization. The constraint forces of the solution,
qfrc_constraint = J' efc_force(J qacc - aref), and the right-hand side of the implicit-damping
solve are taken from the solver's jar and efc_force (`constraint_rhs`), with a hand-written
adjoint (`constraint_qfrc_adjoint`, over the active rows only).

The fused schedule's smooth and velocity segments run backwards pass by pass (`by_pass`). Some
passes run backwards by hand-written reverse kernels in both schedules (`reverse`):
kinematics_joint, kinematics_body_root, kinematics_body and kinematics_frame
(kinematics.joint_adjoint, body_root_adjoint, body_tree_adjoint, frame_adjoint), com_pos_subtree,
com_pos_body and com_pos_dof (com_pos.subtree_body_adjoint, body_cinert_adjoint with the dofs'),
crb_body and crb_dof (crb.body_adjoint; crb.dof_adjoint, the wide schedule's
crb.dof_adjoint_gather), the velocity segment's rne passes (rne.com_vel_adjoint, which also takes
cdof_dot's and rne_body's sums along the tree; rne.rne_body_adjoint, rne.rne_subtree_adjoint)
and smooth_dof (actuation.dof_adjoint, passive.dof_adjoint, rne.rne_dof_adjoint). A tree pass
runs backwards level by level, each body's thread gathering its children's adjoints (no
atomics; smooth_dof's sums into a tendon or a multi-dof actuator are atomic). In the fused
schedule the contact rows (frictionless and pyramidal) and the limits of hinges and slides run
backwards by `rows_reverse` (constraint.contact_reverse, joint_limit_reverse), the other rows by
the generated adjoint of the constraint segment without them.

One `Step` holds the buffers of one physics step (a fresh Data, so nothing the tape recorded
is overwritten); `simrl.diff` chains them and bridges to torch.autograd.
"""

import contextlib
import functools
import math
import os
import weakref

import mujoco
import numpy as np
import warp as wp

from simrl.sim import (
    actuation,
    com_pos,
    crb,
    euler,
    factor_m,
    forward,
    integrate_pos,
    kinematics,
    passive,
    rk4,
    rne,
    schedule,
    solver,
)
from simrl.sim.constraint import build as constraint_functions
from simrl.sim.contact_tables import MINMU
from simrl.sim.data import TIME, available_memory, data_bytes_per_world, data_struct, make_data, size_text
from simrl.sim.integrate_pos import jnt_nv
from simrl.sim.model import model_struct
from simrl.sim.schedule import WARP_LAUNCH, WORLD, Pass, coop_module, replays, segment
from simrl.sim.solver import FLAG_TREE
from simrl.sim.types import (
    EULER_LIKE,
    RK4_A,
    RK4_B,
    ConstraintType,
    block_sync,
    build_notice,
    kernel_module,
    no_sync,
    scalar_types,
)


@functools.cache
def build(scalar, schedule: str = "fused"):
    """The kernels of the differentiable step for precision `scalar` and `schedule` ('fused' or
    'wide'): segments (simrl.sim.schedule) for the stages, custom world kernels (hand-written
    adjoints; a thread per world, or a block of threads per world in the wide schedule), and
    element kernels both schedules share."""
    lanes = schedule == "wide"
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    sync = block_sync if lanes else no_sync
    ld = factor_m.build(scalar, lanes)
    factor_ld, solve_ld = ld.factor_ld, ld.solve_ld
    cholesky_factor, cholesky_solve = solver.dense_cholesky(scalar, lanes)
    cone_middle = solver.elliptic_cone(scalar).cone_middle  # at the solution, as the solver left it
    integrate = integrate_pos.build(scalar)
    world = forward.world_functions(scalar, lanes)
    module = kernel_module(scalar, name="grad_step", backward=True)
    # kernels the tape never differentiates (in-place factorizations with hand-written
    # adjoints): no generated adjoints; for a block of threads per world in the wide schedule
    custom = coop_module(scalar, "coop_grad") if lanes else kernel_module(scalar, name="grad_custom")

    # in MuJoCo's order, recorded with their generated adjoints: the positions (mj_fwdPosition
    # without the constraint parts), contacts and constraint rows (mj_collision, mj_makeConstraint:
    # differentiable except which contacts and rows exist), the body transmissions (from the rows),
    # the stages up to qfrc_smooth (mj_fwdVelocity, mj_fwdActuation), the rows' reference
    # accelerations (mj_referenceConstraint)
    smooth = segment("smooth", forward.position(scalar, fine=True), scalar, schedule, "grad", backward=True)
    velocity = segment("velocity", forward.transmission_body(scalar) + forward.velocity(scalar, fine=True), scalar,
                       schedule, "grad", backward=True)
    reference = segment("reference", forward.reference(scalar), scalar, schedule, "grad", backward=True)
    # the fused schedule's smooth and velocity segments run backwards pass by pass: the wide
    # schedule's kernel of each pass, its adjoint launched over all worlds, in reverse order
    # (Rollout._segment). The same adjoint code as the fused kernel's, which runs every pass's
    # adjoint for one world after another: on a CPU core that costs 1.5x as much (the quadruped,
    # 1024 worlds: 0.29 s against 0.19 s for smooth, 0.19 s against 0.13 s for velocity, per
    # 32-step rollout; each world runs through the code and gradient arrays of every pass, where
    # a pass at a time keeps one adjoint's hot). A module of its own (its kernels only)
    by_pass = {}
    if schedule == "fused":
        by_pass = {seg.name: segment(seg.name, seg.passes, scalar, "wide", "grad_passes", backward=True)
                   for seg in (smooth, velocity)}
    # the broadphase (which pairs the narrow phase collides: integers), off the tape
    broadphase = segment("broadphase", forward.broadphase_pass(scalar, lanes), scalar, schedule, "grad_detect")
    # the convex collision's search (GJK/EPA), off the tape: the constraint segment's narrow phase
    # rebuilds its contacts from the poses differentiably (simrl.sim.collision_convex)
    convex_detect = segment("convex_detect", forward.detect_contacts(scalar), scalar, schedule, "grad_detect")
    # the narrow phase on the tape, then the places of the rows (integers: off the tape), then the rows
    narrowphase = segment("narrowphase", forward.collision(scalar, grouped=False), scalar, schedule, "grad",
                          backward=True)
    efc_address = segment("efc_address", (Pass("efc_address", WORLD, (world.efc_address_all,)),), scalar,
                          schedule, "grad_custom")
    constraint = segment("constraint", forward.rows(scalar, grouped=False), scalar, schedule, "grad", backward=True)
    # the fused schedule runs a pyramidal or frictionless model's contact rows and hinge and slide
    # limits backwards by the hand-written `rows_reverse`, and the other rows (equality, friction
    # loss, the limits of ball joints and tendons) by the generated adjoint of this twin of the
    # constraint segment without those passes
    constraint_other = None
    if schedule == "fused":
        others = tuple(p for p in constraint.passes if p.name not in REVERSED_ROWS)
        constraint_other = segment("constraint_other", others, scalar, schedule, "grad_rows", backward=True)
    # and its reference segment's rows by the hand-written `reference_reverse`, the equality
    # constraints' Jdot qvel by the generated adjoint of this twin without them
    reference_other = None
    if schedule == "fused":
        reference_other = segment("reference_other", tuple(p for p in reference.passes if p.name != "reference_rows"),
                                  scalar, schedule, "grad_rows", backward=True)
    # the Newton solver (simrl.sim.solver), run forward only: its result is differentiated
    # implicitly by `constraint_adjoint`
    # the sensors (mj_sensorPos/Vel/Acc), with generated adjoints, in a module of their own (only a
    # call that asks for sensordata compiles them)
    sensors = segment("sensors", forward.sensor_passes(scalar, hfield=False), scalar, schedule, "grad_sensor",
                      backward=True)
    # the rangefinders' height-field search before them, off the tape: which part of a field a ray
    # meets (integers, and a distance the rangefinders' pass only compares; it recomputes the hit)
    sensor_hfield = segment("sensor_hfield", forward.ray_hfield_pass(scalar), scalar, schedule, "grad_sensor_detect")
    # two launches in the wide schedule, as in the engine's step (forward._acceleration): in one
    # kernel the list and the solver need more registers than a GPU thread should use
    constraint_solve = segment("constraint_solve", (Pass("constraint_list", WORLD, (world.constraint_list,)),
                                                    Pass("constraint_solve", WORLD, (world.solve,))),
                               scalar, schedule, "grad_custom")

    # the fused schedule's acceleration of an evaluation with constraint rows, off the tape: the
    # engine's own world functions (forward._acceleration with its integrator): qLD and
    # qacc_smooth, the Newton solver's qacc and efc_force, qfrc_constraint, and Euler's implicit
    # damping or implicitfast's qH = M - h qDeriv with qacc_int (or qacc_int = qacc). Their
    # adjoints are hand-written (constraint_adjoint, constraint_qfrc_adjoint, solve_adjoint,
    # Rollout._constrained), which read what these leave in the Data
    accelerate = None
    if schedule == "fused":
        accelerate = segment("accelerate", (
            Pass("fwd_acceleration", WORLD, (world.constraint_list, world.fwd_acceleration)),
            Pass("constraint_solve", WORLD, (world.solve,)),
            Pass("constraint_force_euler", WORLD, (world.constraint_force, world.euler_damping))),
            scalar, schedule, "grad_custom")

    # the fused schedule's forward of an evaluation up to qfrc_smooth and the rows' reference
    # accelerations in one kernel, as the engine's fused step (the backward is recorded segment by
    # segment, as above), and with rows the acceleration too (`accelerate`): a world's buffers
    # stay in the core's caches from one stage to the next, where a kernel per segment streams
    # every world's through memory again (the same functions in the same order: the same bits).
    # By (rows: the model has constraint rows, detect: convex pairs), in a module without adjoints
    forward_segments = {}

    def forward_segment(rows: bool, detect: bool):
        key = (rows, detect)
        if key not in forward_segments:
            passes = smooth.passes
            if rows:
                passes += broadphase.passes + (convex_detect.passes if detect else ()) + narrowphase.passes + \
                    efc_address.passes + constraint.passes
            passes += velocity.passes + (reference.passes + accelerate.passes if rows else ())
            # a module per variant: one that gained a kernel would be built again whole, in every
            # process that meets the variants in another order
            name = "forward" + "_rows" * rows + "_detect" * detect
            forward_segments[key] = segment(name, passes, scalar, "fused", f"grad_{name}")
        return forward_segments[key]

    # hand-written reverse kernels of passes of the segments, launched in place of a pass's
    # generated adjoint (Rollout._segment): {pass name: kernel(m, d, adj_d, *pass inputs)} (the
    # passes of "reverse_model": kernel(m, d, adj_d, adj_m, *pass inputs)), a thread per (world,
    # element) as the wide schedule's kernel of the pass; a tree pass's per level (table, start)
    reverse = kernel_module(scalar, name="grad_reverse")
    kin = kinematics.build(scalar)

    @wp.kernel(module=reverse)
    def frame_reverse(m: Model, d: Data, adj: Data, start: int):
        """The kinematics_frame pass backwards: kinematics.frame_adjoint of frame start + e."""
        w, e = wp.tid()
        kin.frame_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def joint_reverse(m: Model, d: Data, adj: Data, start: int):
        """The kinematics_joint pass backwards: kinematics.joint_adjoint of joint start + e."""
        w, e = wp.tid()
        kin.joint_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def body_root_reverse(m: Model, d: Data, adj: Data, start: int):
        """The kinematics_body_root pass backwards: kinematics.body_root_adjoint of body start + e
        (after body_reverse's levels)."""
        w, e = wp.tid()
        kin.body_root_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def body_reverse(m: Model, d: Data, adj: Data, table: wp.array(dtype=int), start: int):
        """A level of the kinematics_body pass backwards (the deepest first):
        kinematics.body_tree_adjoint of body table[start + e]."""
        w, e = wp.tid()
        kin.body_tree_adjoint(m, d, adj, w, table[start + e])

    cp = com_pos.build(scalar)

    @wp.kernel(module=reverse)
    def cdof_reverse(m: Model, d: Data, adj: Data, start: int):
        """The com_pos_dof pass backwards: nothing here; com_pos.body_cinert_adjoint, the
        com_pos_body pass's next, does each body's dofs (a thread per body reads their cdof
        adjoints once, and no two threads add into a ball joint's xanchor or a body's xmat)."""
        pass

    @wp.kernel(module=reverse)
    def cinert_reverse(m: Model, d: Data, adj: Data, adj_m: Model, start: int):
        """The com_pos_body pass backwards: com_pos.body_cinert_adjoint of body start + e."""
        w, e = wp.tid()
        cp.body_cinert_adjoint(m, d, adj, adj_m, w, start + e)

    @wp.kernel(module=reverse)
    def subtree_reverse(m: Model, d: Data, adj: Data, adj_m: Model, table: wp.array(dtype=int), start: int):
        """A level of the com_pos_subtree pass backwards (the world's first):
        com_pos.subtree_body_adjoint of body table[start + e]."""
        w, e = wp.tid()
        cp.subtree_body_adjoint(m, d, adj, adj_m, w, table[start + e])

    contact_reverse = constraint_functions(scalar).contact_reverse
    joint_limit_reverse = constraint_functions(scalar).joint_limit_reverse

    @wp.kernel(module=reverse)
    def rows_reverse(m: Model, d: Data, adj: Data, friction_adj: wp.array2d(dtype=T.vec5)):
        """The constraint segment's limit rows of hinges and slides and its contact passes
        backwards (constraint.joint_limit_reverse of each limit row, constraint.contact_reverse
        of each slot that has rows, in Data.contact_slots' order), a thread per world: the fused
        schedule's, for models whose contacts are frictionless or pyramidal."""
        w = wp.tid()
        start = m.nefc_eq + m.nefc_friction
        for r in range(start, start + m.nefc_limit):
            joint_limit_reverse(m, d, adj, w, r)
        for k in range(d.contact_nslots[w]):
            contact_reverse(m, d, adj, friction_adj, w, d.contact_slots[w, k])

    @wp.kernel(module=reverse)
    def reference_reverse(m: Model, d: Data, adj: Data):
        """The reference segment's reference_rows pass backwards, a thread per world: the adjoint
        of constraint.reference_row, efc_vel = J qvel and aref = -B vel - K imp (pos - margin), of
        each active row (vel_bar = efc_vel's gradient - B aref_bar; B_bar -= vel aref_bar, K_bar,
        imp_bar, pos_bar -= the other factors' product times aref_bar, margin_bar += it; J_bar_r
        += vel_bar qvel, qvel_bar += vel_bar J_r, rows ascending). The fused schedule's."""
        w = wp.tid()
        for r in range(d.nefc[w]):
            if d.efc_active[w, r] != 0:
                ab = adj.efc_aref[w, r]
                K = d.efc_K[w, r]
                imp = d.efc_imp[w, r]
                dp = d.efc_pos[w, r] - d.efc_margin[w, r]
                vb = adj.efc_vel[w, r] - d.efc_B[w, r] * ab
                adj.efc_B[w, r] = adj.efc_B[w, r] - d.efc_vel[w, r] * ab
                adj.efc_K[w, r] = adj.efc_K[w, r] - imp * dp * ab
                adj.efc_imp[w, r] = adj.efc_imp[w, r] - K * dp * ab
                adj.efc_pos[w, r] = adj.efc_pos[w, r] - K * imp * ab
                adj.efc_margin[w, r] = adj.efc_margin[w, r] + K * imp * ab
                cs = d.efc_cols[w, r]
                for k in range(m.efc_nnz[cs]):
                    j = m.efc_colind[cs, k]
                    adj.efc_J[w, r, j] = adj.efc_J[w, r, j] + vb * d.qvel[w, j]
                    adj.qvel[w, j] = adj.qvel[w, j] + vb * d.efc_J[w, r, j]

    crb_functions = crb.build(scalar)

    @wp.kernel(module=reverse)
    def crb_body_reverse(m: Model, d: Data, adj: Data, table: wp.array(dtype=int), start: int):
        """A tree level of the crb_body pass backwards (the root's level first):
        crb.body_adjoint of body table[start + e]."""
        w, e = wp.tid()
        crb_functions.body_adjoint(m, d, adj, w, table[start + e])

    @wp.kernel(module=reverse)
    def crb_dof_reverse(m: Model, d: Data, adj: Data, start: int):
        """The crb_dof pass backwards, the fused schedule's (the CPU's cheapest): crb.dof_adjoint
        (every row of world w, by the thread of dof 0)."""
        w, e = wp.tid()
        crb_functions.dof_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def crb_dof_gather_reverse(m: Model, d: Data, adj: Data, start: int):
        """The crb_dof pass backwards, the wide schedule's (a GPU's threads share a world's
        rows): crb.dof_adjoint_gather of dof start + e."""
        w, e = wp.tid()
        crb_functions.dof_adjoint_gather(m, d, adj, w, start + e)

    # the velocity segment's rne passes backwards (simrl.sim.rne's adjoints): com_vel_reverse
    # also takes cdof_dot's adjoint and rne_body's sums along the chain (a pass from the leaves,
    # which those passes' launches are not), so cdof_dot's reverse has nothing left to do
    rn, pa, ac = rne.build(scalar), passive.build(scalar), actuation.build(scalar)

    @wp.kernel(module=reverse)
    def com_vel_reverse(m: Model, d: Data, adj: Data, table: wp.array(dtype=int), start: int):
        """The com_vel_body pass backwards, one tree level: rne.com_vel_adjoint of its bodies."""
        w, e = wp.tid()
        rn.com_vel_adjoint(m, d, adj, w, table[start + e])

    @wp.kernel(module=reverse)
    def cdof_dot_reverse(m: Model, d: Data, adj: Data, start: int):
        """The cdof_dot pass backwards: nothing (com_vel_reverse's)."""
        pass

    @wp.kernel(module=reverse)
    def rne_body_reverse(m: Model, d: Data, adj: Data, start: int):
        """The rne_body pass backwards: rne.rne_body_adjoint of body start + e."""
        w, e = wp.tid()
        rn.rne_body_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def rne_subtree_reverse(m: Model, d: Data, adj: Data, table: wp.array(dtype=int), start: int):
        """The rne_subtree pass backwards, one tree level (the root's first)."""
        w, e = wp.tid()
        rn.rne_subtree_adjoint(m, d, adj, w, table[start + e])

    @wp.kernel(module=reverse)
    def smooth_dof_reverse(m: Model, d: Data, adj: Data, start: int):
        """The smooth_dof pass backwards for dof start + e: qfrc_smooth's, qfrc_actuator's,
        qfrc_passive's and qfrc_bias's adjoints to their inputs (actuation.dof_adjoint,
        passive.dof_adjoint, rne.rne_dof_adjoint)."""
        w, e = wp.tid()
        i = start + e
        ac.dof_adjoint(m, d, adj, w, i)
        pa.dof_adjoint(m, d, adj, w, i)
        rn.rne_dof_adjoint(m, d, adj, w, i)

    @wp.kernel(module=reverse)
    def transmission_reverse(m: Model, d: Data, adj: Data, start: int):
        """The actuation_transmission pass backwards: actuation.transmission_adjoint of actuator start + e."""
        w, e = wp.tid()
        ac.transmission_adjoint(m, d, adj, w, start + e)

    @wp.kernel(module=reverse)
    def actuator_force_reverse(m: Model, d: Data, adj: Data, adj_m: Model, start: int):
        """The actuation_actuator pass backwards: actuation.force_adjoint of actuator start + e."""
        w, e = wp.tid()
        ac.force_adjoint(m, d, adj, adj_m, w, start + e)

    rne_reverse = {"com_vel_body": com_vel_reverse, "cdof_dot": cdof_dot_reverse, "rne_body": rne_body_reverse,
                   "rne_subtree": rne_subtree_reverse, "smooth_dof": smooth_dof_reverse,
                   "actuation_transmission": transmission_reverse, "actuation_actuator": actuator_force_reverse}

    @wp.func
    def lanes_of_block():
        """Threads per world of a custom world kernel: its block in the wide schedule, else one."""
        n = int(1)
        if wp.static(lanes):
            n = wp.block_dim()
        return n

    @wp.func
    def row_zone(m: Model, d: Data, w: int, r: int, jar: scalar):
        """The zone of row r's cost at jar: 1 quadratic, 0 none (unilateral, jar >= 0), -1
        linear (friction loss beyond R floss); for a row of a contact in the elliptic cone, 1 in
        the bottom zone (D_r), 0 in the top and middle zones (`cone_middle`), as the solver
        left them."""
        zone = int(0)
        if d.efc_type[w, r] == ConstraintType.FRICTION_DOF or d.efc_type[w, r] == ConstraintType.FRICTION_TENDON:
            zone = 1
            fl = d.efc_frictionloss[w, r] * d.efc_R[w, r]
            if jar <= -fl or jar >= fl:
                zone = -1
        elif d.efc_type[w, r] == ConstraintType.CONTACT_ELLIPTIC:
            if d.efc_dds[w, r] != scalar(0.0):
                zone = 1
        elif jar < scalar(0.0) or d.efc_type[w, r] == ConstraintType.EQUALITY:
            zone = 1
        return zone

    @wp.func
    def cone_force(m: Model, d: Data, w: int, r: int, jar: wp.array2d(dtype=scalar)):
        """efc_force of row r of a contact in the elliptic cone at jar (`solver.elliptic_cone`),
        differentiably: the contact's at most 6 rows unrolled, no square root at T = 0."""
        r0 = r - d.efc_sub[w, r]
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r]]]
        mu = d.efc_mu[w, r0]
        N = mu * jar[w, r0]
        T2 = scalar(0.0)
        for j in range(1, 6):
            if j < n:
                u = d.efc_mu[w, r0 + j] * jar[w, r0 + j]
                T2 = T2 + u * u
        T = scalar(0.0)
        if T2 > scalar(0.0):
            T = wp.sqrt(T2)
        f = scalar(0.0)
        if N >= mu * T or (T <= scalar(0.0) and N >= scalar(0.0)):
            f = scalar(0.0)  # top zone
        elif mu * N + T <= scalar(0.0) or (T <= scalar(0.0) and N < scalar(0.0)):
            f = -d.efc_D[w, r] * jar[w, r]  # bottom zone
        else:
            # middle: f_0 = -D_0 (jar_0 - T) mu / (1 + mu^2) ... (D_m (N - mu T) mu, simplified)
            g = d.efc_D[w, r0] * (jar[w, r0] - T) / (scalar(1.0) + mu * mu)
            f = -g
            if r != r0:
                fr = d.efc_mu[w, r]
                f = g * fr * fr * jar[w, r] / T
        return f

    @wp.kernel(module=module)
    def constraint_jar(m: Model, d: Data, qacc: wp.array2d(dtype=scalar), jar: wp.array2d(dtype=scalar)):
        """jar = J qacc - aref of active row r, differentiably."""
        w, r = wp.tid()
        if d.efc_active[w, r] != 0:
            jar[w, r] = -d.efc_aref[w, r]
            for k in range(m.efc_nnz[d.efc_cols[w, r]]):
                j = m.efc_colind[d.efc_cols[w, r], k]
                jar[w, r] += d.efc_J[w, r, j] * qacc[w, j]

    @wp.kernel(module=module)
    def constraint_force_row(m: Model, d: Data, jar: wp.array2d(dtype=scalar), force: wp.array2d(dtype=scalar)):
        """efc_force of active row r at jar, differentiably: D (aref - J qacc) in the quadratic
        zone, -+ frictionloss in the linear zone of friction loss; the rows of contacts in the
        elliptic cone are constraint_force_cone's (apart: in one kernel the generated adjoint
        needs more registers than a GPU thread should use)."""
        w, r = wp.tid()
        if d.efc_active[w, r] != 0 and d.efc_type[w, r] != ConstraintType.CONTACT_ELLIPTIC:
            value = jar[w, r]
            fr = scalar(0.0)
            zone = row_zone(m, d, w, r, value)
            if zone == 1:
                fr = -d.efc_D[w, r] * value
            elif zone == -1:
                fr = -d.efc_frictionloss[w, r]
                if value < scalar(0.0):
                    fr = d.efc_frictionloss[w, r]
            force[w, r] = fr

    @wp.kernel(module=module)
    def constraint_force_cone(m: Model, d: Data, jar: wp.array2d(dtype=scalar), force: wp.array2d(dtype=scalar)):
        """efc_force of active row r of a contact in the elliptic cone at jar, differentiably
        (launched for models with elliptic cones)."""
        w, r = wp.tid()
        if d.efc_active[w, r] != 0 and d.efc_type[w, r] == ConstraintType.CONTACT_ELLIPTIC:
            force[w, r] = cone_force(m, d, w, r, jar)

    @wp.kernel(module=module)
    def constraint_force_dof(m: Model, d: Data, force: wp.array2d(dtype=scalar), qfrc: wp.array2d(dtype=scalar)):
        """qfrc_constraint[i] = (J' efc_force)[i], over the active rows in ascending order."""
        w, i = wp.tid()
        qfrc[w, i] = scalar(0.0)
        for a in range(d.efc_nactive[w]):
            r = d.efc_list[w, a]
            if m.efc_colmask[d.efc_cols[w, r], i] != 0:
                qfrc[w, i] += d.efc_J[w, r, i] * force[w, r]

    @wp.kernel(module=custom)
    def constraint_rhs(m: Model, d: Data, qfrc_smooth: wp.array2d(dtype=scalar), qfrc: wp.array2d(dtype=scalar),
                       rhs: wp.array2d(dtype=scalar)):
        """qfrc = J' efc_force over the active rows in ascending order (the solver's
        `constraint_force`) and rhs = qfrc_smooth + qfrc, the right-hand side of the
        implicit-damping solve, for models without elliptic cones. The solver's last `evaluate`
        is at its solution (solver.solve: evaluate, newton_direction, the stopping tests), so
        efc_jar and efc_force hold each active row's jar = J qacc - aref and force at qacc, with
        the arithmetic of the generated path's constraint_jar and constraint_force_row (the same
        bits): they are not recomputed. A world kernel: one thread per world scatters J' efc_force
        row by row, a block's lanes gather their dofs' sums (term by term the same). Its adjoint
        is `constraint_qfrc_adjoint`, which reads efc_jar and efc_force (off the tape, kept with
        the evaluation's Data until backward)."""
        w, lane = wp.tid()
        nlanes = lanes_of_block()
        nactive = d.efc_nactive[w]
        if wp.static(lanes):
            for i in range(lane, m.nv, nlanes):
                q = scalar(0.0)
                for a in range(nactive):
                    r = d.efc_list[w, a]
                    if m.efc_colmask[d.efc_cols[w, r], i] != 0:
                        q = q + d.efc_J[w, r, i] * d.efc_force[w, r]
                qfrc[w, i] = q
                rhs[w, i] = qfrc_smooth[w, i] + q
        else:
            for i in range(m.nv):
                qfrc[w, i] = scalar(0.0)
            for a in range(nactive):
                r = d.efc_list[w, a]
                cols = d.efc_cols[w, r]
                fr = d.efc_force[w, r]
                for k in range(m.efc_nnz[cols]):
                    j = m.efc_colind[cols, k]
                    qfrc[w, j] = qfrc[w, j] + d.efc_J[w, r, j] * fr
            for i in range(m.nv):
                rhs[w, i] = qfrc_smooth[w, i] + qfrc[w, i]

    @wp.func
    def qfrc_adjoint(m: Model, d: Data, qacc: wp.array2d(dtype=scalar), jar: wp.array2d(dtype=scalar),
                     force: wp.array2d(dtype=scalar), force_bar: wp.array2d(dtype=scalar),
                     qfrc_bar: wp.array2d(dtype=scalar), rhs_bar: wp.array2d(dtype=scalar),
                     jar_bar: wp.array2d(dtype=scalar), qacc_bar: wp.array2d(dtype=scalar),
                     qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                     D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                     floss_bar: wp.array2d(dtype=scalar), w: int, lane: int, nlanes: int):
        """Adjoint of `constraint_rhs` with the rows' forces of the solution: qfrc = J' efc_force(jar),
        jar = J qacc - aref, rhs = qfrc_smooth + qfrc. With g = qfrc_bar + rhs_bar (qfrc_smooth_bar += rhs_bar),
        active row r's force adjoint f_bar_r = force_bar_r + J_r . g (J_bar_r += f_r g); its zone
        (jar_r as the forward left it) gives jar_bar_r: -D_r f_bar_r in the quadratic zone (D_bar_r
        -= jar_r f_bar_r), 0 in the linear zone of friction loss (floss_bar_r -+= f_bar_r) and
        beyond a unilateral row's zero; then aref_bar_r -= jar_bar_r, J_bar_r += jar_bar_r qacc and
        qacc_bar += J' jar_bar. A world kernel: a lane owns rows (their J_bar row, D_bar, aref_bar,
        floss_bar and jar_bar, a scratch row array), then dofs (qacc_bar, gathered over the rows
        in ascending order, and qfrc_smooth_bar), so no two threads add into one element; one
        thread per world scatters J' jar_bar row by row instead (the same sums). World w's, by
        its lane `lane` of `nlanes`."""
        nactive = d.efc_nactive[w]
        for a in range(lane, nactive, nlanes):
            r = d.efc_list[w, a]
            cols = d.efc_cols[w, r]
            fr = force[w, r]
            fb = force_bar[w, r]
            for k in range(m.efc_nnz[cols]):
                j = m.efc_colind[cols, k]
                g = qfrc_bar[w, j] + rhs_bar[w, j]
                fb = fb + d.efc_J[w, r, j] * g
                J_bar[w, r, j] = J_bar[w, r, j] + fr * g
            value = jar[w, r]
            jb = scalar(0.0)
            zone = row_zone(m, d, w, r, value)
            if zone == 1:
                jb = -d.efc_D[w, r] * fb
                D_bar[w, r] = D_bar[w, r] - value * fb
            elif zone == -1:
                if value < scalar(0.0):
                    floss_bar[w, r] = floss_bar[w, r] + fb
                else:
                    floss_bar[w, r] = floss_bar[w, r] - fb
            jar_bar[w, r] = jb
            aref_bar[w, r] = aref_bar[w, r] - jb
            for k in range(m.efc_nnz[cols]):
                j = m.efc_colind[cols, k]
                J_bar[w, r, j] = J_bar[w, r, j] + jb * qacc[w, j]
                if wp.static(not lanes):  # one thread per world: J' jar_bar scattered row by row
                    qacc_bar[w, j] = qacc_bar[w, j] + d.efc_J[w, r, j] * jb
        sync()
        for i in range(lane, m.nv, nlanes):
            if wp.static(lanes):  # a block: each lane gathers its dofs' sums, rows ascending
                g = qacc_bar[w, i]
                for a in range(nactive):
                    r = d.efc_list[w, a]
                    if m.efc_colmask[d.efc_cols[w, r], i] != 0:
                        g = g + d.efc_J[w, r, i] * jar_bar[w, r]
                qacc_bar[w, i] = g
            qfrc_smooth_bar[w, i] = qfrc_smooth_bar[w, i] + rhs_bar[w, i]

    @wp.kernel(module=custom)
    def constraint_qfrc_adjoint(m: Model, d: Data, qacc: wp.array2d(dtype=scalar), jar: wp.array2d(dtype=scalar),
                                force: wp.array2d(dtype=scalar), force_bar: wp.array2d(dtype=scalar),
                                qfrc_bar: wp.array2d(dtype=scalar), rhs_bar: wp.array2d(dtype=scalar),
                                jar_bar: wp.array2d(dtype=scalar), qacc_bar: wp.array2d(dtype=scalar),
                                qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                                D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                                floss_bar: wp.array2d(dtype=scalar)):
        """`qfrc_adjoint` of each world."""
        w, lane = wp.tid()
        qfrc_adjoint(m, d, qacc, jar, force, force_bar, qfrc_bar, rhs_bar, jar_bar, qacc_bar, qfrc_smooth_bar, J_bar,
                     D_bar, aref_bar, floss_bar, w, lane, lanes_of_block())

    row_product = constraint_functions(scalar).row_dot  # efc_J[w, r] . x[w]

    @wp.func
    def cone_adjoint(m: Model, d: Data, w: int, r: int, qacc: wp.array2d(dtype=scalar),
                     lam: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar), D_bar: wp.array2d(dtype=scalar),
                     aref_bar: wp.array2d(dtype=scalar), mu_bar: wp.array2d(dtype=scalar)):
        """The adjoint terms of row r of a contact in the elliptic cone's middle zone, for
        lam = H^-1 qacc_bar and the contact's jl = J lam: with G = df/djar = -H_cone,
            J_bar_r += f_r lam + (G' jl)_r qacc,  aref_bar_r -= (G' jl)_r,
        and on its first row the parameters' p_bar = jl' df/dp of the force
            f_0 = -g, f_j = g friction_j^2 jar_j / T, g = D_0 (jar_0 - T) / (1 + mu^2):
            D_bar_0 += s / D_0,  mu_bar_0 += -2 mu s / (1 + mu^2)  (s = jl' f),
            mu_bar_j (friction_j) += ds/dT T_fj + c (jar_0 - T) / T 2 friction_j jar_j jl_j,
        c = D_0 / (1 + mu^2), T_fj = friction_j jar_j^2 / T, Q = sum friction_j^2 jar_j jl_j,
        ds/dT = c (jl_0 - Q / T - (jar_0 - T) Q / T^2)."""
        r0 = r - d.efc_sub[w, r]
        n = m.cpair_condim[d.contact_pair[w, d.efc_id[w, r]]]
        gjl = scalar(0.0)  # (G' jl)_r = -(H_cone jl)_r (H_cone symmetric)
        for e in range(n):
            gjl = gjl - d.efc_hcone[w, r, e] * row_product(m, d, w, r0 + e, lam)
        fr = d.efc_force[w, r]
        for k in range(m.efc_nnz[d.efc_cols[w, r]]):
            j = m.efc_colind[d.efc_cols[w, r], k]
            J_bar[w, r, j] = J_bar[w, r, j] + fr * lam[w, j] + gjl * qacc[w, j]
        aref_bar[w, r] = aref_bar[w, r] - gjl
        if r == r0:
            mu = d.efc_mu[w, r0]
            D0 = d.efc_D[w, r0]
            c = D0 / (scalar(1.0) + mu * mu)
            jar0 = row_product(m, d, w, r0, qacc) - d.efc_aref[w, r0]
            T2 = scalar(0.0)
            Q = scalar(0.0)
            for e in range(1, n):
                fe = d.efc_mu[w, r0 + e]
                jar = row_product(m, d, w, r0 + e, qacc) - d.efc_aref[w, r0 + e]
                jl = row_product(m, d, w, r0 + e, lam)
                T2 = T2 + fe * fe * jar * jar
                Q = Q + fe * fe * jar * jl
            T = wp.sqrt(T2)
            jl0 = row_product(m, d, w, r0, lam)
            s = c * (jar0 - T) * (-jl0 + Q / T)
            D_bar[w, r0] = D_bar[w, r0] + s / D0
            mu_bar[w, r0] = mu_bar[w, r0] - scalar(2.0) * mu * s / (scalar(1.0) + mu * mu)
            ds_dT = c * (jl0 - Q / T - (jar0 - T) * Q / (T * T))
            for e in range(1, n):
                fe = d.efc_mu[w, r0 + e]
                jar = row_product(m, d, w, r0 + e, qacc) - d.efc_aref[w, r0 + e]
                jl = row_product(m, d, w, r0 + e, lam)
                mu_bar[w, r0 + e] = (mu_bar[w, r0 + e] + ds_dT * fe * jar * jar / T
                                     + c * (jar0 - T) / T * scalar(2.0) * fe * jar * jl)

    @wp.func
    def solver_adjoint(m: Model, d: Data, qacc: wp.array2d(dtype=scalar), qacc_bar: wp.array2d(dtype=scalar),
                       lam: wp.array2d(dtype=scalar), qM_bar: wp.array3d(dtype=scalar),
                       qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                       D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                       floss_bar: wp.array2d(dtype=scalar), mu_bar: wp.array2d(dtype=scalar), mass: int, w: int,
                       lane: int, nlanes: int):
        """Implicit adjoint of the constraint solve (without `mass`, M_bar's term is left to the
        caller: `mass_matrix_adjoint`). At the solver's minimum, with each row's
        zone fixed (contact activation is not differentiable),
            (M + sum_quad D_r J_r' J_r) a = qfrc_smooth + sum_quad D_r aref_r J_r' + sum_lin f_r J_r'.
        With lam = H^-1 a_bar (H the matrix on the left, the Newton solver's Hessian at a):
            qfrc_smooth_bar += lam,  M_bar -= lam a',
            quadratic rows: J_bar_r += f_r lam - D_r (J_r lam) a,  D_bar_r += (J_r lam)(aref_r - J_r a),
                            aref_bar_r += D_r (J_r lam),
            linear rows:    J_bar_r += f_r lam,  floss_bar_r += sign(f_r) (J_r lam),
            elliptic contacts in the middle zone: H holds J' H_cone J, and `cone_adjoint`.

        H^-1 comes from the solver's own factor, not a new one: `solver.solve` stops only right
        after `newton_direction`, which factorizes H (solver_H: sparse L'DL when
        solver_flag[FLAG_TREE], else dense Cholesky) at the zones of the `evaluate` just before
        it, at the qacc it returns (the warm start rejected, `evaluate` runs again at
        qacc_smooth; the dofs in no island that then take qacc_smooth enter no row). A world
        without active rows returns before: its H is M, whose factor qLD keeps from qacc_smooth
        = M^-1 qfrc_smooth (Rollout._constrained). Each row's zone, jar and force are that
        evaluate's too (efc_dds: D_r in the quadratic zone, else 0; efc_jar, efc_force; the
        cones' efc_hcone): the line search writes none of them, nor does anything after the
        solver. So the row terms use exactly the Hessian's zones. A world function: the lanes
        share the dofs and the constraint rows (the triangular solves are lane 0's)."""
        nv = m.nv
        nactive = d.efc_nactive[w]
        for i in range(lane, nv, nlanes):
            lam[w, i] = qacc_bar[w, i]
        sync()
        if nactive == 0:
            solve_ld(m, d.qLD, lam, w, lane, nlanes)
        elif d.solver_flag[w, FLAG_TREE] == 1:
            solve_ld(m, d.solver_H, lam, w, lane, nlanes)
        else:
            cholesky_solve(d.solver_H, lam, nv, w, lane, nlanes)
        sync()
        # smooth force and mass matrix (entries on M's sparsity pattern, both triangles: entry
        # (j, i) of an ancestor j of i belongs to dof i's lane)
        for i in range(lane, nv, nlanes):
            li = lam[w, i]
            qfrc_smooth_bar[w, i] = qfrc_smooth_bar[w, i] + li
            if mass != 0:
                qM_bar[w, i, i] = qM_bar[w, i, i] - li * qacc[w, i]
                adr = m.dof_ancestor_adr[i]
                for k in range(adr, adr + m.dof_ancestor_num[i]):
                    j = m.dof_ancestor[k]
                    qM_bar[w, i, j] = qM_bar[w, i, j] - li * qacc[w, j]
                    qM_bar[w, j, i] = qM_bar[w, j, i] - lam[w, j] * qacc[w, i]
        # constraint rows, in the zones of the solver's last evaluate
        for a in range(lane, nactive, nlanes):
            r = d.efc_list[w, a]
            dds = d.efc_dds[w, r]
            friction = (d.efc_type[w, r] == ConstraintType.FRICTION_DOF
                        or d.efc_type[w, r] == ConstraintType.FRICTION_TENDON)
            if dds != scalar(0.0) or friction:
                jl = row_product(m, d, w, r, lam)
                fr = d.efc_force[w, r]  # -D_r jar_r, or -+ frictionloss_r
                cols = d.efc_cols[w, r]
                if dds != scalar(0.0):  # D_r
                    for k in range(m.efc_nnz[cols]):
                        j = m.efc_colind[cols, k]
                        J_bar[w, r, j] = J_bar[w, r, j] + fr * lam[w, j] - dds * jl * qacc[w, j]
                    D_bar[w, r] = D_bar[w, r] - jl * d.efc_jar[w, r]
                    aref_bar[w, r] = aref_bar[w, r] + dds * jl
                else:
                    for k in range(m.efc_nnz[cols]):
                        j = m.efc_colind[cols, k]
                        J_bar[w, r, j] = J_bar[w, r, j] + fr * lam[w, j]
                    if d.efc_jar[w, r] < scalar(0.0):
                        floss_bar[w, r] = floss_bar[w, r] + jl
                    else:
                        floss_bar[w, r] = floss_bar[w, r] - jl
            elif cone_middle(m, d, w, r):
                cone_adjoint(m, d, w, r, qacc, lam, J_bar, D_bar, aref_bar, mu_bar)

    @wp.kernel(module=custom)
    def constraint_adjoint(m: Model, d: Data, qacc: wp.array2d(dtype=scalar), qacc_bar: wp.array2d(dtype=scalar),
                           lam: wp.array2d(dtype=scalar), qM_bar: wp.array3d(dtype=scalar),
                           qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                           D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                           floss_bar: wp.array2d(dtype=scalar), mu_bar: wp.array2d(dtype=scalar)):
        """`solver_adjoint` of each world: the implicit adjoint of the constraint solve."""
        w, lane = wp.tid()
        solver_adjoint(m, d, qacc, qacc_bar, lam, qM_bar, qfrc_smooth_bar, J_bar, D_bar, aref_bar, floss_bar, mu_bar,
                       1, w, lane, lanes_of_block())

    @wp.kernel(module=custom)
    def constraint_adjoint_refactor(m: Model, d: Data, qacc: wp.array2d(dtype=scalar),
                                    qacc_bar: wp.array2d(dtype=scalar), lam: wp.array2d(dtype=scalar),
                                    H: wp.array3d(dtype=scalar), qM_bar: wp.array3d(dtype=scalar),
                                    qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                                    D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                                    floss_bar: wp.array2d(dtype=scalar), mu_bar: wp.array2d(dtype=scalar)):
        """`constraint_adjoint` with H assembled anew from the rows' zones at qacc and
        factorized by dense Cholesky in H (REFACTOR: what tests compare the solver's factor
        against). A world function: the lanes share the rows of H, the dofs and the
        constraint rows."""
        w, lane = wp.tid()
        nlanes = lanes_of_block()
        nv = m.nv
        nactive = d.efc_nactive[w]
        # each row's jar at the solution (efc_ls1: the solver's scratch, free now)
        for a in range(lane, nactive, nlanes):
            r = d.efc_list[w, a]
            jar = -d.efc_aref[w, r]
            for k in range(m.efc_nnz[d.efc_cols[w, r]]):
                j = m.efc_colind[d.efc_cols[w, r], k]
                jar = jar + d.efc_J[w, r, j] * qacc[w, j]
            d.efc_ls1[w, r] = jar
        sync()
        for i in range(lane, nv, nlanes):
            for j in range(i + 1):
                H[w, i, j] = d.qM[w, i, j]
            for a in range(nactive):
                r = d.efc_list[w, a]
                if m.efc_colmask[d.efc_cols[w, r], i] != 0 and row_zone(m, d, w, r, d.efc_ls1[w, r]) == 1:
                    D = d.efc_D[w, r]
                    for kj in range(m.efc_nnz[d.efc_cols[w, r]]):
                        j = m.efc_colind[d.efc_cols[w, r], kj]
                        if j <= i:
                            H[w, i, j] = H[w, i, j] + D * d.efc_J[w, r, i] * d.efc_J[w, r, j]
            # the cone Hessians of the elliptic contacts in the middle zone: J_r' H_rs J_s
            if m.cone_elliptic != 0:
                for a in range(nactive):
                    r = d.efc_list[w, a]
                    if m.efc_colmask[d.efc_cols[w, r], i] != 0 and cone_middle(m, d, w, r):
                        r0 = r - d.efc_sub[w, r]
                        for e in range(m.cpair_condim[d.contact_pair[w, d.efc_id[w, r]]]):
                            h = d.efc_J[w, r, i] * d.efc_hcone[w, r, e]
                            for kj in range(m.efc_nnz[d.efc_cols[w, r0 + e]]):
                                j = m.efc_colind[d.efc_cols[w, r0 + e], kj]
                                if j <= i:
                                    H[w, i, j] = H[w, i, j] + h * d.efc_J[w, r0 + e, j]
        sync()
        # H = L L', then lam = H^-1 qacc_bar
        cholesky_factor(H, nv, w, lane, nlanes)
        for i in range(lane, nv, nlanes):
            lam[w, i] = qacc_bar[w, i]
        sync()
        cholesky_solve(H, lam, nv, w, lane, nlanes)
        # smooth force and mass matrix (entries on M's sparsity pattern, both triangles: entry
        # (j, i) of an ancestor j of i belongs to dof i's lane)
        for i in range(lane, nv, nlanes):
            li = lam[w, i]
            qfrc_smooth_bar[w, i] = qfrc_smooth_bar[w, i] + li
            qM_bar[w, i, i] = qM_bar[w, i, i] - li * qacc[w, i]
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                qM_bar[w, i, j] = qM_bar[w, i, j] - li * qacc[w, j]
                qM_bar[w, j, i] = qM_bar[w, j, i] - lam[w, j] * qacc[w, i]
        # constraint rows
        for a in range(lane, nactive, nlanes):
            r = d.efc_list[w, a]
            ja = scalar(0.0)
            jl = scalar(0.0)
            for k in range(m.efc_nnz[d.efc_cols[w, r]]):
                j = m.efc_colind[d.efc_cols[w, r], k]
                ja = ja + d.efc_J[w, r, j] * qacc[w, j]
                jl = jl + d.efc_J[w, r, j] * lam[w, j]
            jar = ja - d.efc_aref[w, r]
            zone = row_zone(m, d, w, r, jar)
            if zone == 1:
                D = d.efc_D[w, r]
                fr = -D * jar
                for k in range(m.efc_nnz[d.efc_cols[w, r]]):
                    j = m.efc_colind[d.efc_cols[w, r], k]
                    J_bar[w, r, j] = J_bar[w, r, j] + fr * lam[w, j] - D * jl * qacc[w, j]
                D_bar[w, r] = D_bar[w, r] - jl * jar
                aref_bar[w, r] = aref_bar[w, r] + D * jl
            elif zone == -1:
                sign = scalar(-1.0)
                if jar < scalar(0.0):
                    sign = scalar(1.0)
                fr = sign * d.efc_frictionloss[w, r]
                for k in range(m.efc_nnz[d.efc_cols[w, r]]):
                    j = m.efc_colind[d.efc_cols[w, r], k]
                    J_bar[w, r, j] = J_bar[w, r, j] + fr * lam[w, j]
                floss_bar[w, r] = floss_bar[w, r] + sign * jl
            elif cone_middle(m, d, w, r):
                cone_adjoint(m, d, w, r, qacc, lam, J_bar, D_bar, aref_bar, mu_bar)

    @wp.kernel(module=kernel_module(scalar, "grad_detect"))
    def merge_overflow(bits: wp.array(dtype=int), need: wp.array2d(dtype=int), acc: wp.array(dtype=int),
                       acc_need: wp.array2d(dtype=int)):
        """What outgrew a budget in one evaluation (Data.overflow, overflow_need) into the rollout's
        record of all its evaluations: the bits or-ed, each need the largest."""
        w = wp.tid()
        acc[w] = acc[w] | bits[w]
        for k in range(3):
            acc_need[w, k] = wp.max(acc_need[w, k], need[w, k])

    @wp.kernel(module=kernel_module(scalar, "grad_detect"))
    def advance_time(time: wp.array(dtype=scalar), h: scalar, out: wp.array(dtype=scalar)):
        """The next step's time (simrl.sim.euler.advance_time's sum): not differentiated."""
        w = wp.tid()
        out[w] = time[w] + h

    @wp.kernel(module=kernel_module(scalar, "grad_detect"))
    def store_time(time: wp.array(dtype=scalar), scalars: wp.array2d(dtype=scalar)):
        """The time into Data.solver_scalar's TIME column, where the clock sensor reads it."""
        w = wp.tid()
        scalars[w, TIME] = time[w]

    @wp.kernel(module=module)
    def add(a: wp.array2d(dtype=scalar), b: wp.array2d(dtype=scalar), out: wp.array2d(dtype=scalar)):
        w, i = wp.tid()
        out[w, i] = a[w, i] + b[w, i]

    integrator = euler.build(scalar)
    qderiv, tendon_qderiv, free_body_solve = integrator.qderiv, integrator.tendon_qderiv, integrator.free_body_solve

    @wp.kernel(module=module)
    def implicit_tendons(m: Model, d: Data):
        """ten_qderiv (simrl.sim.euler.tendon_qderiv) with implicitfast."""
        w, t = wp.tid()
        d.ten_qderiv[w, t] = tendon_qderiv(m, d, w, t)

    site_force_vel = actuation.build(scalar).site_force_vel
    qderiv_dof, damping_qderiv_dof = integrator.qderiv_dof, integrator.damping_qderiv_dof

    @wp.kernel(module=module)
    def implicit_dofs(m: Model, d: Data):
        """dof_qderiv (simrl.sim.euler.qderiv_dof): implicitfast's."""
        w, i = wp.tid()
        d.dof_qderiv[w, i] = qderiv_dof(m, d, w, i)

    @wp.kernel(module=module)
    def implicit_damping_dofs(m: Model, d: Data):
        """dof_qderiv of Euler's implicit damping (simrl.sim.euler.damping_qderiv_dof)."""
        w, i = wp.tid()
        d.dof_qderiv[w, i] = damping_qderiv_dof(m, d, w, i)

    @wp.kernel(module=module)
    def implicit_site_actuators(m: Model, d: Data):
        """actuator_qderiv (simrl.sim.actuation.site_force_vel) with implicitfast."""
        w, a = wp.tid()
        site_force_vel(m, d, w, a)

    @wp.kernel(module=module)
    def implicit_matrix(m: Model, d: Data, out: wp.array3d(dtype=scalar)):
        """-h qDeriv on M's lower sparsity (simrl.sim.euler): h * dof_damping on the diagonal when
        Euler integrates damping implicitly (mj_EulerSkip); with implicitfast also minus h times
        the actuators' and tendons' velocity derivative, whose gain term carries ctrl's gradient
        (mj_implicitSkip); else 0."""
        w, i = wp.tid()
        h = m.timestep
        if m.euler_damp or m.implicitfast:
            out[w, i, i] = -(h * qderiv(m, d, w, i, i))
            if m.implicitfast:
                adr = m.dof_ancestor_adr[i]
                for k in range(adr, adr + m.dof_ancestor_num[i]):
                    j = m.dof_ancestor[k]
                    out[w, i, j] = -(h * qderiv(m, d, w, i, j))

    @wp.kernel(module=module)
    def free_body_rows(m: Model, d: Data, f1: wp.array2d(dtype=scalar), f2: wp.array2d(dtype=scalar),
                       qacc: wp.array2d(dtype=scalar), out: wp.array2d(dtype=scalar)):
        """out = qacc, but for implicitfast's standalone free bodies, whose dofs get A^-1 (f1 + f2)
        over their block (simrl.sim.euler.free_body_solve, mj_implicitSkip)."""
        w, jnt = wp.tid()
        adr = m.jnt_dofadr[jnt]
        # (a flag found by a loop here would lose the branch's adjoint: Warp's backward pass
        # does not replay a dynamic loop's assignments)
        if m.jnt_free_body[jnt]:
            x1, x2 = free_body_solve(m, d, w, jnt, f1, f2)
            for r in range(3):
                out[w, adr + r] = x1[r]
                out[w, adr + 3 + r] = x2[r]
        else:
            for k in range(jnt_nv(m.jnt_type[jnt])):
                out[w, adr + k] = qacc[w, adr + k]

    @wp.kernel(module=custom)
    def solve_forward(m: Model, A: wp.array3d(dtype=scalar), dA: wp.array3d(dtype=scalar),
                      b: wp.array2d(dtype=scalar), LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar)):
        """x = (A + dA)^-1 b for a matrix with the sparsity of qM, dA given by its lower triangle
        (-h qDeriv); LD keeps the factor."""
        w, lane = wp.tid()
        nlanes = lanes_of_block()
        for i in range(lane, m.nv, nlanes):
            LD[w, i, i] = A[w, i, i] + dA[w, i, i]
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                LD[w, i, j] = A[w, i, j] + dA[w, i, j]
            x[w, i] = b[w, i]
        sync()
        factor_ld(m, LD, w, lane, nlanes)
        solve_ld(m, LD, x, w, lane, nlanes)

    @wp.func
    def linear_solve_adjoint(m: Model, LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar),
                             x_bar: wp.array2d(dtype=scalar), y: wp.array2d(dtype=scalar),
                             b_bar: wp.array2d(dtype=scalar), A_bar: wp.array3d(dtype=scalar),
                             dA_bar: wp.array3d(dtype=scalar), dA_grad: int, w: int, lane: int, nlanes: int):
        """Adjoint of `solve_forward` in world w: y = (A + dA)^-1 x_bar; b_bar += y; A_bar -= y x^T
        on the sparsity pattern (both triangles, as qM stores both); with `dA_grad` (dA on the
        tape), dA_bar -= y x^T + x y^T on its lower triangle (the one entry stands for both)."""
        for i in range(lane, m.nv, nlanes):
            y[w, i] = x_bar[w, i]
        sync()
        solve_ld(m, LD, y, w, lane, nlanes)
        for i in range(lane, m.nv, nlanes):
            yi = y[w, i]
            xi = x[w, i]
            b_bar[w, i] = b_bar[w, i] + yi
            A_bar[w, i, i] = A_bar[w, i, i] - yi * xi
            if dA_grad != 0:
                dA_bar[w, i, i] = dA_bar[w, i, i] - yi * xi
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                A_bar[w, i, j] = A_bar[w, i, j] - yi * x[w, j]
                A_bar[w, j, i] = A_bar[w, j, i] - y[w, j] * xi
                if dA_grad != 0:
                    dA_bar[w, i, j] = dA_bar[w, i, j] - (yi * x[w, j] + y[w, j] * xi)

    @wp.kernel(module=custom)
    def solve_adjoint(m: Model, LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar),
                      x_bar: wp.array2d(dtype=scalar), y: wp.array2d(dtype=scalar),
                      b_bar: wp.array2d(dtype=scalar), A_bar: wp.array3d(dtype=scalar),
                      dA_bar: wp.array3d(dtype=scalar), dA_grad: int):
        """`linear_solve_adjoint` of each world."""
        w, lane = wp.tid()
        linear_solve_adjoint(m, LD, x, x_bar, y, b_bar, A_bar, dA_bar, dA_grad, w, lane, lanes_of_block())

    @wp.func
    def mass_matrix_adjoint(m: Model, qM_bar: wp.array3d(dtype=scalar), y: wp.array2d(dtype=scalar),
                            x: wp.array2d(dtype=scalar), lam: wp.array2d(dtype=scalar),
                            qacc: wp.array2d(dtype=scalar), with_lam: int, dA_bar: wp.array3d(dtype=scalar),
                            dA_grad: int, w: int, lane: int, nlanes: int):
        """M_bar -= y x' + lam qacc' on M's sparsity (both triangles: entry (j, i) of an ancestor j
        of i belongs to dof i's lane): the terms of the last solve (`linear_solve_adjoint`'s) and of
        the constraint solve (`solver_adjoint`'s; without `with_lam` lam is zero) in one pass; with
        `dA_grad`, dA_bar -= y x' + x y' on its lower triangle. (World w's rows as views: an
        index fewer per access.)"""
        Mb = qM_bar[w]
        yw = y[w]
        xw = x[w]
        for i in range(lane, m.nv, nlanes):
            yi = yw[i]
            xi = xw[i]
            adr = m.dof_ancestor_adr[i]
            end = adr + m.dof_ancestor_num[i]
            if with_lam != 0:
                lw = lam[w]
                aw = qacc[w]
                li = lw[i]
                ai = aw[i]
                Mb[i, i] = Mb[i, i] - (yi * xi + li * ai)
                for k in range(adr, end):
                    j = m.dof_ancestor[k]
                    Mb[i, j] = Mb[i, j] - (yi * xw[j] + li * aw[j])
                    Mb[j, i] = Mb[j, i] - (yw[j] * xi + lw[j] * ai)
            else:
                Mb[i, i] = Mb[i, i] - yi * xi
                for k in range(adr, end):
                    j = m.dof_ancestor[k]
                    Mb[i, j] = Mb[i, j] - yi * xw[j]
                    Mb[j, i] = Mb[j, i] - yw[j] * xi
            if dA_grad != 0:
                dAb = dA_bar[w]
                dAb[i, i] = dAb[i, i] - yi * xi
                for k in range(adr, end):
                    j = m.dof_ancestor[k]
                    dAb[i, j] = dAb[i, j] - (yi * xw[j] + yw[j] * xi)

    @wp.kernel(module=custom)
    def acceleration_adjoint(m: Model, d: Data, LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar),
                             x_bar: wp.array2d(dtype=scalar), y: wp.array2d(dtype=scalar),
                             dA_bar: wp.array3d(dtype=scalar), dA_grad: int, qacc: wp.array2d(dtype=scalar),
                             force: wp.array2d(dtype=scalar), force_bar: wp.array2d(dtype=scalar),
                             qfrc_bar: wp.array2d(dtype=scalar), rhs_bar: wp.array2d(dtype=scalar),
                             jar_bar: wp.array2d(dtype=scalar), qacc_bar: wp.array2d(dtype=scalar),
                             lam: wp.array2d(dtype=scalar), qM_bar: wp.array3d(dtype=scalar),
                             qfrc_smooth_bar: wp.array2d(dtype=scalar), J_bar: wp.array3d(dtype=scalar),
                             D_bar: wp.array2d(dtype=scalar), aref_bar: wp.array2d(dtype=scalar),
                             floss_bar: wp.array2d(dtype=scalar), mu_bar: wp.array2d(dtype=scalar)):
        """The three adjoints of an evaluation whose last solve (M + dA) x = qfrc_smooth +
        qfrc_constraint took the engine's qH and constraint forces (Rollout._constrained), in one
        launch, each world's one after another while its buffers are in the core's caches:
        `linear_solve_adjoint`'s y = (M + dA)^-1 x_bar (x = qacc_int), `qfrc_adjoint` (rhs and
        qfrc_constraint to the solution qacc and the rows), `solver_adjoint` (the solver's
        implicit adjoint), then the mass matrix's terms of the first and the last in one pass
        (`mass_matrix_adjoint`). A world without active rows skips the solver's adjoint: nothing
        adds into qacc_bar then (qfrc_adjoint adds J' jar_bar over the active rows only, and no
        other adjoint reads qacc in this path), so its lam = H^-1 qacc_bar is zero and all its
        terms are."""
        w, lane = wp.tid()
        nlanes = lanes_of_block()
        for i in range(lane, m.nv, nlanes):
            y[w, i] = x_bar[w, i]
        sync()
        solve_ld(m, LD, y, w, lane, nlanes)
        for i in range(lane, m.nv, nlanes):
            rhs_bar[w, i] = rhs_bar[w, i] + y[w, i]
        sync()
        qfrc_adjoint(m, d, qacc, d.efc_jar, force, force_bar, qfrc_bar, rhs_bar, jar_bar, qacc_bar, qfrc_smooth_bar,
                     J_bar, D_bar, aref_bar, floss_bar, w, lane, nlanes)
        sync()
        with_lam = int(0)
        if d.efc_nactive[w] > 0:
            solver_adjoint(m, d, qacc, qacc_bar, lam, qM_bar, qfrc_smooth_bar, J_bar, D_bar, aref_bar, floss_bar,
                           mu_bar, 0, w, lane, nlanes)
            with_lam = 1
        sync()
        mass_matrix_adjoint(m, qM_bar, y, x, lam, qacc, with_lam, dA_bar, dA_grad, w, lane, nlanes)

    @wp.func
    def advance_joint(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                      qacc: wp.array2d(dtype=scalar), qpos1: wp.array2d(dtype=scalar),
                      qvel1: wp.array2d(dtype=scalar), w: int, j: int):
        """Semi-implicit Euler (mj_advance) of joint j: qvel1 = qvel0 + h qacc, then qpos on the
        manifold."""
        h = m.timestep
        dadr = m.jnt_dofadr[j]
        for k in range(jnt_nv(m.jnt_type[j])):
            i = dadr + k
            qvel1[w, i] = qvel0[w, i] + h * qacc[w, i]
        integrate.joint(m, qpos0, qpos1, qvel1, h, w, j)

    @wp.kernel(module=module)
    def advance(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                qacc: wp.array2d(dtype=scalar), qpos1: wp.array2d(dtype=scalar),
                qvel1: wp.array2d(dtype=scalar)):
        """`advance_joint` of joint j (a thread per joint: the wide schedule's)."""
        w, j = wp.tid()
        advance_joint(m, qpos0, qvel0, qacc, qpos1, qvel1, w, j)

    @wp.kernel(module=module)
    def advance_world(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                      qacc: wp.array2d(dtype=scalar), qpos1: wp.array2d(dtype=scalar),
                      qvel1: wp.array2d(dtype=scalar)):
        """`advance_joint` of each joint of world w, one after another (a thread per world: the
        fused schedule's, where a CPU thread per joint costs more than the joint's update; the
        joints write disjoint elements and carry nothing from one to the next, so the generated
        adjoint is exact)."""
        w = wp.tid()
        for j in range(m.njnt):
            advance_joint(m, qpos0, qvel0, qacc, qpos1, qvel1, w, j)

    advance_activation = actuation.build(scalar).advance_activation

    @wp.kernel(module=module)
    def advance_act(m: Model, act0: wp.array2d(dtype=scalar), act_dot: wp.array2d(dtype=scalar),
                    act1: wp.array2d(dtype=scalar)):
        """Actuator u's activation after the step (mj_advance): act0 advanced by act_dot."""
        w, u = wp.tid()
        advance_activation(m, act0, act_dot, act1, w, u)

    next_stage_act_, end_act_ = rk4.activation_funcs(scalar)

    @wp.kernel(module=module)
    def rk_next_act(m: Model, act0: wp.array2d(dtype=scalar), act_dot: wp.array2d(dtype=scalar), a: scalar,
                    act: wp.array2d(dtype=scalar)):
        """Actuator u's activation of the next RK4 stage (simrl.sim.rk4.next_stage_act)."""
        w, u = wp.tid()
        next_stage_act_(m, act0, act_dot, a, act, w, u)

    @wp.kernel(module=module)
    def rk_end_act(m: Model, act0: wp.array2d(dtype=scalar), d1: wp.array2d(dtype=scalar),
                   d2: wp.array2d(dtype=scalar), d3: wp.array2d(dtype=scalar), d4: wp.array2d(dtype=scalar),
                   b1: scalar, b2: scalar, b3: scalar, b4: scalar, dact: wp.array2d(dtype=scalar),
                   act1: wp.array2d(dtype=scalar)):
        """Actuator u's activation at the end of an RK4 step: act0 advanced by the B-weighted
        act_dot of the stages (summed in the order of the Sim's rk4, for the same bits)."""
        w, u = wp.tid()
        adr = m.actuator[u].actadr
        if adr >= 0:
            dact[w, adr] = d1[w, adr] * b1 + d2[w, adr] * b2 + d3[w, adr] * b3 + d4[w, adr] * b4
        end_act_(m, act0, dact, act1, w, u)

    stage_derivative_, next_stage_ = rk4.stage_funcs(scalar)

    @wp.kernel(module=module)
    def rk_derivative(m: Model, k_prev: wp.array2d(dtype=scalar), qvel: wp.array2d(dtype=scalar), a: scalar,
                      k: wp.array2d(dtype=scalar)):
        """Joint j's part of k_i of an RK4 stage (simrl.sim.rk4.stage_derivative), into a fresh buffer."""
        w, j = wp.tid()
        stage_derivative_(m, k_prev, qvel, k, a, w, j)

    @wp.kernel(module=module)
    def rk_next(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                k: wp.array2d(dtype=scalar), qacc: wp.array2d(dtype=scalar), a: scalar,
                qpos: wp.array2d(dtype=scalar), qvel: wp.array2d(dtype=scalar)):
        """Joint j's part of the next RK4 stage's state (simrl.sim.rk4.next_stage)."""
        w, j = wp.tid()
        next_stage_(m, qpos0, qvel0, k, qacc, a, qpos, qvel, w, j)

    @wp.kernel(module=module)
    def rk_end(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
               k1: wp.array2d(dtype=scalar), k2: wp.array2d(dtype=scalar), k3: wp.array2d(dtype=scalar),
               k4: wp.array2d(dtype=scalar), a1: wp.array2d(dtype=scalar), a2: wp.array2d(dtype=scalar),
               a3: wp.array2d(dtype=scalar), a4: wp.array2d(dtype=scalar), b1: scalar, b2: scalar, b3: scalar,
               b4: scalar, dq: wp.array2d(dtype=scalar), qpos1: wp.array2d(dtype=scalar),
               qvel1: wp.array2d(dtype=scalar)):
        """Joint j's part of X0 advanced by h times the B-weighted stage derivatives (summed in the
        order of rk4.accumulate, so the result equals Sim.step's to the bit)."""
        w, j = wp.tid()
        h = m.timestep
        dadr = m.jnt_dofadr[j]
        for c in range(jnt_nv(m.jnt_type[j])):
            i = dadr + c
            dq[w, i] = k1[w, i] * b1 + k2[w, i] * b2 + k3[w, i] * b3 + k4[w, i] * b4
            dqvel = a1[w, i] * b1 + a2[w, i] * b2 + a3[w, i] * b3 + a4[w, i] * b4
            qvel1[w, i] = qvel0[w, i] + dqvel * h
        integrate.joint(m, qpos0, qpos1, dq, h, w, j)

    @wp.kernel(module=module)
    def gain_to_gainprm(gain: wp.array2d(dtype=scalar), base: wp.array2d(dtype=T.vec3),
                        out: wp.array2d(dtype=T.vec3)):
        """actuator_gainprm with its first entry (the gain of a fixed or affine gain) from `gain`."""
        w, a = wp.tid()
        prm = base[w % base.shape[0], a]
        out[w, a] = T.vec3(gain[w, a], prm[1], prm[2])

    @wp.kernel(module=module)
    def geom_friction_to_cpair(friction: wp.array2d(dtype=T.vec3), source: wp.array(dtype=wp.vec2i),
                               base: wp.array2d(dtype=T.vec5), out: wp.array2d(dtype=T.vec5)):
        """cpair_friction from per-world geom friction (sliding, torsional, rolling): the maximum
        of the two geoms', or the higher-priority geom's, as MuJoCo mixes them (mj_contactParam);
        pairs with their own friction (<pair>, override) keep `base`."""
        w, p = wp.tid()
        src = source[p]
        value = base[w % base.shape[0], p]
        if src[0] >= 0:
            fr = friction[w, src[0]]
            if src[1] >= 0:
                other = friction[w, src[1]]
                fr = T.vec3(wp.max(fr[0], other[0]), wp.max(fr[1], other[1]), wp.max(fr[2], other[2]))
            lo = scalar(MINMU)
            value = T.vec5(wp.max(lo, fr[0]), wp.max(lo, fr[0]), wp.max(lo, fr[1]), wp.max(lo, fr[2]),
                           wp.max(lo, fr[2]))
        out[w, p] = value

    return {"geom_friction_to_cpair": geom_friction_to_cpair, "smooth": smooth, "velocity": velocity,
            "reference": reference, "convex_detect": convex_detect,
            "broadphase": broadphase, "narrowphase": narrowphase, "efc_address": efc_address,
            "constraint": constraint,
            "constraint_solve": constraint_solve, "accelerate": accelerate, "constraint_jar": constraint_jar,
            "constraint_force_row": constraint_force_row, "constraint_force_cone": constraint_force_cone,
            "constraint_force_dof": constraint_force_dof, "constraint_adjoint": constraint_adjoint,
            "constraint_adjoint_refactor": constraint_adjoint_refactor, "add": add,
            "constraint_rhs": constraint_rhs, "constraint_qfrc_adjoint": constraint_qfrc_adjoint,
            "merge_overflow": merge_overflow, "advance_time": advance_time, "store_time": store_time,
            "implicit_dofs": implicit_dofs, "implicit_damping_dofs": implicit_damping_dofs,
            "implicit_tendons": implicit_tendons,
            "implicit_site_actuators": implicit_site_actuators,
            "implicit_matrix": implicit_matrix,
            "free_body_rows": free_body_rows, "solve_forward": solve_forward, "solve_adjoint": solve_adjoint,
            "acceleration_adjoint": acceleration_adjoint,
            "advance": advance, "rk_derivative": rk_derivative, "rk_next": rk_next, "rk_end": rk_end,
            "advance_world": advance_world if schedule == "fused" else None,
            "advance_act": advance_act, "rk_next_act": rk_next_act, "rk_end_act": rk_end_act,
            "gain_to_gainprm": gain_to_gainprm, "custom_lanes": lanes, "sensors": sensors, "by_pass": by_pass,
            "reverse": {"kinematics_frame": frame_reverse, "kinematics_joint": joint_reverse,
                        "kinematics_body_root": body_root_reverse, "kinematics_body": body_reverse,
                        "com_pos_subtree": subtree_reverse, "com_pos_body": cinert_reverse,
                        "com_pos_dof": cdof_reverse, "crb_body": crb_body_reverse,
                        "crb_dof": crb_dof_gather_reverse if lanes else crb_dof_reverse, **rne_reverse},
            # the passes whose reverse kernel reads the Model's adjoint too, after adj_d (body_mass, actuator_gain)
            "reverse_model": {"com_pos_subtree", "com_pos_body", "actuation_actuator"},
            "constraint_other": constraint_other, "rows_reverse": rows_reverse,
            "reference_other": reference_other, "reference_reverse": reference_reverse,
            "sensor_hfield": sensor_hfield, "forward_segment": forward_segment if schedule == "fused" else None,
            "modules": (module, custom, reverse, *smooth.modules, *broadphase.modules, *convex_detect.modules,
                        *narrowphase.modules,
                        *efc_address.modules, *constraint.modules,
                        *constraint_solve.modules, *(accelerate.modules if accelerate else ()),
                        *sensors.modules, *sensor_hfield.modules,
                        *(seg.modules[0] for seg in by_pass.values()),
                        *(constraint_other.modules if constraint_other is not None else ()),
                        *(reference_other.modules if reference_other is not None else ()))}


#: whether the fused schedule runs its smooth and velocity segments backwards pass by pass
#: (`build`'s by_pass; False: by the fused kernels' own adjoints, as tests compare)
BY_PASS = True

#: whether the fused schedule's forward runs an evaluation's stages up to qfrc_smooth (and the
#: rows' reference accelerations) in one kernel (`build`'s forward_segment; False: a kernel per
#: segment, as tests compare)
FUSED_FORWARD = True

#: whether the stages with hand-written adjoints use them (False: their generated adjoints, as
#: tests compare): constraint_rhs, the reverse kernels of the kinematics, com_pos, crb and rne
#: passes and smooth_dof (`build`'s reverse; all or none: they pass adjoints on to each other in
#: the places of others, e.g. a body's thread leaves its parent's pose adjoint in the body's,
#: com_vel_body's does cdof_dot's), the fused schedule's rows_reverse
HANDWRITTEN = True

#: whether an evaluation's last solve, constraint forces and constraint solve run backwards in one
#: launch (`acceleration_adjoint`; False: three, as tests compare) where no sensor reads between them
ONE_ACCELERATION_ADJOINT = True

#: whether the constraint solve's implicit adjoint assembles and factorizes its Hessian anew
#: (`constraint_adjoint_refactor`, as tests compare) instead of solving with the factor the
#: Newton solver left in solver_H (`constraint_adjoint`)
REFACTOR = False

#: whether the solve of qacc_smooth = M^-1 qfrc_smooth in a constrained evaluation records its
#: adjoint (as tests compare): only the constraint solver reads qacc_smooth, off the tape, and
#: its implicit adjoint differentiates qacc with respect to M and qfrc_smooth directly, so no
#: recorded adjoint gives qacc_smooth a gradient
SMOOTH_SOLVE_ADJOINT = False

#: bytes of step buffers kept for reuse after backward (per process); SIMRL_GRAD_POOL_BYTES
#: overrides. A rollout holds all its buffers until backward anyway, so keeping one rollout's
#: worth (SHAC on the ant: 32 actions x 5 RK4 steps x 4 evaluations x 3.2 MB at 64 worlds,
#: about 2 GB) adds no peak memory; it saves allocating and first touching them again.
POOL_BYTES = int(os.environ.get("SIMRL_GRAD_POOL_BYTES", 4 * 2**30))

#: whether the backward zeroes the constraint rows' gradients over the rows in use only (the CPU's:
#: Rollout._zero_grads); tests compare with the whole slab zeroed
ZERO_ROWS_IN_USE = True


def _zero_rows(arrays, n: int):
    """Zero rows [0, n) of `arrays`: (the [W, njmax * row bytes] uint8 numpy view of a [W, njmax,
    ...] array, its row's bytes) (numpy fills bytes at twice the speed of floats)."""
    for a, row in arrays:
        a[:, :n * row] = 0


#: alignment of each array in a slab (bytes)
_ALIGN = 64


#: Data fields that only kernels off the tape write (the constraint solver's scratch, its
#: warm start and result, the factors of the linear solves, the time), or that the
#: differentiable step never uses (the engine's RK4 stage buffers rk_*: Rollout._rk4 keeps its
#: stages in arrays of its own): no recorded adjoint reads their gradients, so they have none (a
#: quarter of the gradient slab that `_Pool.take` zeroes at every evaluation; an adjoint that
#: reads such a field adds into nothing, as Warp's adjoint of a load skips an array without a
#: gradient). The differentiable step takes the solver's qacc and efc_force from clones and
#: recomputations with gradients of their own (Rollout._constrained; the sensors read those,
#: Rollout._sensors).
OFF_TAPE = frozenset(("solver_H", "solver_scalar", "solver_search", "solver_res", "solver_grad", "solver_Msearch",
                      "solver_Mres", "efc_ls1", "efc_ls2", "efc_ls3", "efc_jv", "efc_cost", "efc_jar", "efc_dds",
                      "efc_hcone", "efc_force", "qLD", "qH", "qacc", "qacc_warmstart", "rk_qpos", "rk_qvel", "rk_k",
                      "rk_dqpos", "rk_dqvel", "rk_act", "rk_dact"))


#: Data fields whose gradient is an array of its own, not a view into the shared gradient slab:
#: the sensors' (simrl.diff seeds it before the backward, which zeroes the slab)
OWN_GRAD = frozenset(("sensordata",))


def _grad_layout(model, W):
    """({field: byte offset} of the Data gradients in a gradient slab, the slab's size, the offset
    where the constraint rows' arrays begin): once per model and world count (a Data's arrays
    have a row per world, or nccdmax rows). The rows' arrays ([W, njmax, ...]: `_row_arrays`)
    come last, so that the rest is one memset and they can be zeroed over the rows in use
    (Rollout._zero_grads)."""
    layouts = model.__dict__.setdefault("_grad_layouts", {})
    if W not in layouts:
        d = make_data(model, W, requires_grad=True)
        names = [name for name in data_struct(model.dtype).vars if name != "qpos" and name not in OFF_TAPE
                 and name not in OWN_GRAD and getattr(d, name).grad is not None]
        rows = _row_arrays(model, d, names)
        offsets, size, rows_start = {}, 0, None
        for name in sorted(names, key=lambda n: n in rows):
            if name in rows and rows_start is None:
                rows_start = size
            offsets[name] = size
            size += -(-max(getattr(d, name).capacity, 1) // _ALIGN) * _ALIGN
        layouts[W] = offsets, max(size, 1), size if rows_start is None else rows_start
    return layouts[W]


def _row_arrays(model, d, names) -> tuple:
    """The fields among `names` with a row per constraint row ([W, njmax, ...]: efc_J, efc_D, ...)."""
    njmax = model.struct.nefc
    return tuple(n for n in names if n.startswith("efc_") and getattr(d, n).ndim >= 2 and
                 getattr(d, n).shape[1] == njmax)


def _slab_data(model, W, grads):
    """A Data with gradients whose values are views into a slab of its own and whose gradients
    are views into `grads` (a uint8 array of `_grad_layout`'s size, shared by the Data of every
    evaluation in the same place of a step: `_Pool.grads`), so that its gradients are zeroed by
    a memset or two instead of two hundred calls. qpos keeps an array of its own (it starts at qpos0,
    not zero), and the fields of OWN_GRAD a gradient of their own; each view holds its slab
    alive. The fields of OFF_TAPE have no gradient."""
    d = make_data(model, W, requires_grad=True)
    device = model.device
    grad_offsets = _grad_layout(model, W)[0]
    names = [n for n in data_struct(model.dtype).vars if n != "qpos"]
    offsets, size = {}, 0
    for name in names:
        a = getattr(d, name)
        offsets[name] = size
        size += -(-max(a.capacity, 1) // _ALIGN) * _ALIGN
    values = wp.zeros(size, dtype=wp.uint8, device=device)
    for name in names:
        a = getattr(d, name)
        grad = None
        if name in grad_offsets:
            grad = wp.array(ptr=grads.ptr + grad_offsets[name], dtype=a.dtype, shape=a.shape, device=device)
            grad._slab = grads
        elif name in OWN_GRAD and a.grad is not None:
            grad = a.grad
        view = wp.array(ptr=values.ptr + offsets[name], dtype=a.dtype, shape=a.shape, device=device, grad=grad)
        view._slab = values
        setattr(d, name, view)
    return d


def _check_step_memory(model, W):
    """MemoryError, before allocating, when one more evaluation's buffers (a Data with
    gradients for W worlds, allocated once to size the slabs and then as the slabs) would not
    fit in what the device has available: a rollout keeps one set per evaluation of the
    dynamics until its backward, so a long horizon or many worlds can outgrow the memory, and
    the process would be killed without a message. The CPU's only: on a GPU the check would
    synchronize the device inside the rollout, and a failed allocation raises Warp's error."""
    if model.device.is_cuda:
        return
    available = available_memory(model.device)
    if available is None:
        return
    per_world = 2 * sum(data_bytes_per_world(model).values())  # values and gradients, at most
    need = 2 * W * per_world  # the Data that sizes the slabs, then the slabs
    if need > available:
        raise MemoryError(
            f"the differentiable step needs {size_text(need)} for the buffers of one more evaluation of the "
            f"dynamics ({W:,} worlds, {size_text(per_world)} per world with gradients), but {model.device} has "
            f"{size_text(available)} available: a rollout keeps one set per step (four with RK4) until its "
            f"backward; shorten the horizon or use fewer worlds")


def _values_slab(d):
    """The values slab of a `_slab_data` Data (qM is one of its views, never replaced)."""
    return d.qM._slab


class _Scratch:
    """The differentiable step's arrays beside the Data, one set per evaluation of the dynamics:
    `dA` (-h qDeriv, or zero), `zero` (a zero matrix standing for dA in the solves without
    one), `jar`, `force` (efc_force recomputed from the solution), `qfrc`, `rhs`, `qacc` (the
    constraint solver's solution, copied: a gradient of its own), and the
    backward's `lam` (constraint_adjoint's) and `y` (solve_adjoint's, shared by the solves of
    an evaluation: their adjoints run one after another, each writing it whole before reading
    it): views into a slab of values that comes back with the Data and a slab of gradients shared
    like the Data's (`_Pool.grads`), not allocated (fresh pages) at every evaluation.
    `zero_values` clears only the values a use reads before writing (the slab's leading part:
    UNZEROED's arrays come last), `zero_grads` the gradients that adjoints add into. `commands`:
    the launches of the evaluations on these buffers, recorded for replay (Rollout._command)."""

    #: name -> (shape after W: "nv" or "nefc" entries, has a gradient)
    FIELDS = {"dA": (("nv", "nv"), True), "jar": (("nefc",), True), "force": (("nefc",), True),
              "qfrc": (("nv",), True), "rhs": (("nv",), True), "zero": (("nv", "nv"), True),
              "lam": (("nv",), False), "y": (("nv",), False), "qacc": (("nv",), True)}
    #: what a reuse leaves as the last use left it: the values of `zero` (never written: zero since
    #: the slab's allocation), `qfrc` and `rhs` (written in full before they are read:
    #: constraint_rhs, or constraint_force_dof and add; `qacc`, copied), `lam` and `y` (constraint_adjoint and
    #: solve_adjoint write them in full before reading them); and the gradient of `zero`, which
    #: only the solves' adjoints add into (their dA_bar) and nothing reads. (dA's values stay
    #: zeroed: implicit_matrix writes them only in a step with implicit damping.)
    UNZEROED = {"values": ("zero", "lam", "y", "qfrc", "rhs", "qacc"), "grads": ("zero",)}

    @classmethod
    def _layout(cls, model, W):
        """(shapes, value offsets, gradient offsets, values size, gradients size, the sizes of the
        parts to zero: values, gradients, gradients but dA's, which come last)."""
        sizes = {"nv": model.nv, "nefc": model.struct.nefc}
        itemsize = wp.types.type_size_in_bytes(model.dtype)
        shapes = {name: (W, *(sizes[s] for s in dims)) for name, (dims, _) in cls.FIELDS.items()}
        offsets, grad_offsets, size, grad_size = {}, {}, 0, 0
        zeroed, grads_zeroed = 0, 0
        for name in sorted(cls.FIELDS, key=lambda n: n in cls.UNZEROED["values"]):
            nbytes = -(-max(1, math.prod(shapes[name]) * itemsize) // _ALIGN) * _ALIGN
            offsets[name], size = size, size + nbytes
            if name not in cls.UNZEROED["values"]:
                zeroed = size
        grads_without_dA = 0
        for name in sorted(cls.FIELDS, key=lambda n: (n in cls.UNZEROED["grads"], n == "dA")):
            if cls.FIELDS[name][1]:
                nbytes = -(-max(1, math.prod(shapes[name]) * itemsize) // _ALIGN) * _ALIGN
                grad_offsets[name], grad_size = grad_size, grad_size + nbytes
                if name not in cls.UNZEROED["grads"]:
                    grads_zeroed = grad_size
                if name not in cls.UNZEROED["grads"] and name != "dA":
                    grads_without_dA = grad_size
        return shapes, offsets, grad_offsets, size, grad_size, (zeroed, grads_zeroed, grads_without_dA)

    @classmethod
    def grads_size(cls, model, W):
        return cls._layout(model, W)[4]

    def __init__(self, model, W, grads):
        """`grads`: the shared gradient slab (uint8, `grads_size` bytes)."""
        device, dtype = model.device, model.dtype
        shapes, offsets, grad_offsets, size, _, (zeroed, grads_zeroed, without_dA) = self._layout(model, W)
        self.values = wp.zeros(size, dtype=wp.uint8, device=device)
        self.commands = []
        self.zeroing = None  # Rollout._zeroing's, for the Data that comes with these buffers
        self._zeroed_values, self._zeroed_grads = self.values[:zeroed], grads[:grads_zeroed]
        self._zeroed_grads_without_dA = grads[:without_dA]
        self.dA_grad = True  # whether this evaluation's dA is on the tape (Rollout._acceleration)
        for name in self.FIELDS:
            grad = None
            if name in grad_offsets:
                grad = wp.array(ptr=grads.ptr + grad_offsets[name], dtype=dtype, shape=shapes[name], device=device)
                grad._slab = grads
            view = wp.array(ptr=self.values.ptr + offsets[name], dtype=dtype, shape=shapes[name], device=device,
                            grad=grad)
            view._slab = self.values
            setattr(self, name, view)

    def zero_values(self):
        self._zeroed_values.zero_()

    def zero_grads(self):
        """The gradients adjoints add into: dA's only where dA is on the tape (else nothing
        writes or reads it)."""
        (self._zeroed_grads if self.dA_grad else self._zeroed_grads_without_dA).zero_()

    @property
    def nbytes(self):
        return self.values.capacity


class _Pool:
    """Step buffers (Data with gradients) returned after backward, reused by the next rollout of
    the same model and world count: allocating the hundred arrays of a Data costs more than a
    small step. Each Data's values live in a slab of their own (`_slab_data`); the gradients of
    every evaluation in the same place of a step (`slot`: RK4's stage, 0 for Euler) share one
    slab (`grads`), as does their scratch (`_Scratch`): an evaluation's gradients are read only by
    its own adjoints and those of the launches that read its outputs, which all run, one after
    another, between the slab's zeroing (recorded after those launches: `Rollout._zero_grads`)
    and the backward of the evaluation before. So the backward of a rollout touches one
    evaluation's gradients, not one set per evaluation, and the forward clears none. At most
    POOL_BYTES of values are kept."""

    def __init__(self):
        self.free = {}  # (id(model), W, slot) -> [(data, adjoint, scratch)]
        self.grads = {}  # (id(model), W, slot) -> (Data gradient slab, _Scratch gradient slab)
        self.arrays = {}  # (id(model), shape, dtype, with a gradient) -> [[array, its torch view, its gradient's]]
        self.watched = set()  # id(model) of the models whose buffers are kept
        self.bytes = 0

    def _watch(self, model):
        if id(model) not in self.watched:
            # a model's id is reused after it is freed: its buffers go with it (a later model
            # with the same id would get Data of the wrong sizes)
            self.watched.add(id(model))
            weakref.finalize(model, self._forget, id(model))

    def array(self, model, taken: dict, shape: tuple, dtype, grad: bool = False):
        """A small array of a rollout's own (a [W, nq] state, a [W] time, ...), with its gradient
        zeroed where `grad`: one given back (`give_arrays`) or a new one; `taken` (id(array) ->
        [array, its torch view, its gradient's], in the order taken) records it. Its values are its
        last user's: each use writes them whole before reading them (or zeroes them). Taking one
        costs a tenth of allocating it, and a recorded launch replayed with the same array packs
        nothing again (Rollout._command). The pool holds only the arrays given back: those of a
        rollout dropped before its backward go with it."""
        free = self.arrays.get((id(model), shape, dtype, grad))
        if free:
            entry = free.pop()
            self.bytes -= entry[0].capacity * (2 if grad else 1)
            if grad:
                entry[0].grad.zero_()
        else:
            self._watch(model)
            entry = [wp.zeros(shape, dtype=dtype, device=model.device, requires_grad=grad), None, None]
        taken[id(entry[0])] = entry
        return entry[0]

    def give_arrays(self, model, taken: dict):
        """Return the arrays of `taken` (after the backward of the rollout that took them), the
        last taken first: the next rollout takes them in the same order."""
        for entry in reversed(taken.values()):
            array = entry[0]
            size = array.capacity * (2 if array.grad is not None else 1)
            if self.bytes + size > POOL_BYTES:
                continue
            self.arrays.setdefault((id(model), array.shape, array.dtype, array.grad is not None), []).append(entry)
            self.bytes += size
        taken.clear()

    def take(self, model, W, slot: int = 0):
        """(Data, its adjoint struct or None, _Scratch): values that a use reads before writing zeroed;
        the gradients are the slot's shared slab (zeroed by Rollout._zero_grads before each use)."""
        key = (id(model), W, slot)
        if key not in self.grads:
            self._watch(model)
            self.grads[key] = (wp.zeros(_grad_layout(model, W)[1], dtype=wp.uint8, device=model.device),
                               wp.zeros(max(_Scratch.grads_size(model, W), 1), dtype=wp.uint8, device=model.device))
        free = self.free.get(key)
        if not free:
            _check_step_memory(model, W)
            grads, scratch_grads = self.grads[key]
            return _slab_data(model, W, grads), None, _Scratch(model, W, scratch_grads)
        d, adj, scratch = free.pop()
        self.bytes -= _values_slab(d).capacity + scratch.nbytes
        # Values need no clearing: every stage writes what it reads, as in Sim.step, which reuses
        # one Data for all its steps; the one value carried in, the solver's warm start, is set
        # by Rollout._constrained. Some scratch arrays are read where nothing wrote them (dA, the
        # inactive rows of jar and force): Rollout._acceleration clears those where a launch
        # reads them (_Scratch.zero_values). The gradients of OWN_GRAD are seeded in part (the
        # sensors' columns): the rest starts at zero.
        for name in OWN_GRAD:
            a = getattr(d, name)
            if a.grad is not None:
                a.grad.zero_()
        return d, adj, scratch

    def give(self, model, d, adj, scratch, slot: int = 0):
        size = _values_slab(d).capacity + scratch.nbytes
        if self.bytes + size > POOL_BYTES:
            return
        self.free.setdefault((id(model), d.qM.shape[0], slot), []).append((d, adj, scratch))
        self.bytes += size

    def _forget(self, model_id):
        self.watched.discard(model_id)
        for key in [k for k in self.grads if k[0] == model_id]:
            for d, _, scratch in self.free.pop(key, []):
                self.bytes -= _values_slab(d).capacity + scratch.nbytes
            del self.grads[key]
        for key in [k for k in self.arrays if k[0] == model_id]:
            for entry in self.arrays.pop(key):
                self.bytes -= entry[0].capacity * (2 if entry[0].grad is not None else 1)


_POOL = _Pool()


def pool_array(model, taken: dict, shape: tuple, dtype, grad: bool = False):
    """A small array from the step buffers' pool, recorded in `taken` (`_Pool.array`): a Rollout's
    `pooled`, which it gives back after the backward."""
    return _POOL.array(model, taken, shape, dtype, grad)


def pool_torch(taken: dict, array, grad: bool = False):
    """A torch tensor on the memory of `array` (an array of `taken`), or with `grad` of its
    gradient: made once per pooled array (wp.to_torch's wrapping costs more than copying a small
    state)."""
    entry = taken[id(array)]
    k = 2 if grad else 1
    if entry[k] is None:
        entry[k] = wp.to_torch(array.grad if grad else array, requires_grad=False)
    return entry[k]


def _set_fields(struct, **values):
    """Set the fields of a Warp struct instance that hold another object (packing a field costs
    more than the comparison; a pooled Data usually gets the pooled arrays it had)."""
    for name, value in values.items():
        if getattr(struct, name) is not value:
            setattr(struct, name, value)


def _set_changed(command, held, values, adjoint: bool):
    """Pack into a recorded launch the arguments (or, `adjoint`, the adjoint arguments) that are
    not those it holds: another object, or another number. `held` keeps the objects packed (so
    that an array packed is alive, and an identical object is the same one)."""
    for j, value in enumerate(values):
        old = held[j]
        if old is value or (type(value) in (int, float, bool) and type(old) is type(value) and old == value):
            continue
        command.set_param_at_index(j, value, adjoint)
        held[j] = value

#: (dtype, schedule, device) of the rollouts recorded so far (Rollout: the first one loads the kernels)
_LOADED = set()


class Rollout:
    """Physics steps recorded on one tape, from (qpos0, qvel0, ctrl), the activations act0 and
    model parameters.

    `m` is the Model struct the kernels read (parameters replaced by arrays with gradients);
    `steps` steps of the model's integrator (Euler, implicitfast or RK4) are taken with the same
    ctrl and the mocap bodies at `mocap` = (mocap_pos, mocap_quat), constants (no gradients flow
    to them; None: the model's poses). `act0` [W, na] (None: zero activations, without a
    gradient), the equality constraints acting where `eq_active` [W, neq] (None: eq_active0).
    Seed `qpos1.grad` / `qvel1.grad` / `act1.grad`, then run `tape.backward()`. `time0` [W]: the
    time the rollout starts at (None: zero), which the clock sensor reads; it advances by a
    timestep each step, as in `Sim.step` (not differentiated).

    With `sensors`, `sensordata` [W, >= nsensordata] holds the sensors of the state the last step
    started from, as `Sim.step` leaves them (mj_forward's, before the integrator: the
    accelerations and forces of the constraint solver's qacc and efc_force); seed its gradient
    too. Its values are the plain step's to rounding (efc_force recomputed from qacc)."""

    def __init__(self, model, m, qpos0, qvel0, ctrl, qfrc_applied, steps: int, tape: wp.Tape,
                 schedule: str = "fused", mocap=None, act0=None, sensors: bool = False, eq_active=None,
                 time0=None, pooled: dict | None = None):
        self.kernels = build(model.dtype, schedule)
        #: the small arrays taken from the pool (`pool_array`; the caller's, `pooled`, among them),
        #: given back by `release`
        self.pooled = pooled if pooled is not None else {}
        self.tape, self.model, self.m = tape, model, m
        self.ctrl, self.qfrc_applied = ctrl, qfrc_applied
        self.mocap = mocap
        self.eq_active = eq_active
        self.datas = []  # one set of buffers per evaluation of the forward dynamics
        self.commands, self.command = None, 0  # the current evaluation's recorded launches, the next one's index
        # (launches recorded and replayed unless something watches this module's wp.launch: a
        # test's, a profiler's)
        self.replays = replays(model.device) and wp.launch is WARP_LAUNCH and \
            not wp.config.verify_autograd_array_access
        self.scratch = {}  # id(Data) -> its _Scratch
        self.slots = {}  # id(Data) -> its place in its step (_Pool: the gradient slab it shares)
        self.warmstart = None  # the constraint solver starts from the previous solution, as Sim.step
        #: what outgrew a budget in any evaluation of the rollout ([W] bits, [W, 3] the largest needs:
        #: Data.overflow's meaning), for the Sim to report (simrl.diff)
        W = qpos0.shape[0]
        self.overflow = self._array((W,), wp.int32)
        self.overflow_need = self._array((W, 3), wp.int32)
        self.overflow.zero_()
        self.overflow_need.zero_()
        self.adjoints = {id(m): _model_adjoint(model, m, tape)}  # adjoint structs, built once per struct
        if act0 is None:
            act0 = wp.zeros((qpos0.shape[0], model.na), dtype=model.dtype, device=model.device, requires_grad=True)
        self.sensordata = None
        self.time = time0 if time0 is not None else wp.zeros(W, dtype=model.dtype, device=model.device)
        qpos, qvel, act = qpos0, qvel0, act0
        # the first rollout of a kind loads its kernels as it launches them (a build on a first run)
        key = (model.dtype, schedule, str(model.device))
        first = key not in _LOADED
        _LOADED.add(key)
        # (a first build: 2.5 minutes on an EPYC core for the quadruped, float32)
        with build_notice("the differentiable step's kernels", model.device, estimate="two to three minutes") \
                if first else contextlib.nullcontext():
            for step in range(steps):
                last = sensors and step == steps - 1
                if model.integrator in EULER_LIKE:
                    qpos, qvel, act = self._euler(qpos, qvel, act, last)
                else:
                    qpos, qvel, act = self._rk4(qpos, qvel, act, last)
                time = self._array(self.time.shape, self.time.dtype)
                self._run(self.kernels["advance_time"], W, [self.time, model.struct.timestep, time])
                self.time = time
        self.qpos1, self.qvel1, self.act1 = qpos, qvel, act

    def _launch(self, kernel, dim, inputs):
        """Launch a differentiable kernel and record its adjoint on the tape. Warp's tape would
        rebuild the adjoint of each struct argument (a hundred fields) at every launch of
        the backward pass; they are built once here instead. With
        wp.config.verify_autograd_array_access the tape's own path runs, with its checks."""
        if wp.config.verify_autograd_array_access:
            with self.tape:
                wp.launch(kernel, dim=dim, inputs=inputs, device=self.model.device)
            return
        self._run(kernel, dim, inputs)
        self._record(kernel, dim, inputs)

    def _record(self, kernel, dim, inputs):
        """Record the generated adjoint of a launch of `kernel` (launched already) on the tape."""
        self.tape.record_func(self._command(kernel, dim, inputs, self._adjoint_inputs(inputs)), arrays=[])

    def _command(self, kernel, dim, inputs, adj_inputs=None, block_dim=None):
        """A callable that launches `kernel` on `dim` with `inputs` (with `adj_inputs`: its
        generated adjoint; with `block_dim`: tiled, a block of threads per world). On the CPU
        the evaluation's launches are recorded once (Warp's record_cmd, kept with its pooled
        buffers) and replayed by the next rollouts that take those buffers, which runs the same
        launches in the same order: only the arguments that changed (a new array, a scalar)
        are packed again, so a launch costs a fraction of wp.launch's Python. A recorded
        struct argument is the struct's live argument block: a field set later is seen (the
        buffers' qpos, qvel, ...). A launch that does not match the recorded one at its place
        (another kernel or size) records the evaluation's launches from there on again."""
        device = self.model.device
        adjoint = adj_inputs is not None
        if self.commands is None or not self.replays:
            launch = wp.launch if block_dim is None else functools.partial(wp.launch_tiled, block_dim=block_dim)

            def direct():
                launch(kernel, dim=dim, inputs=inputs, adj_inputs=adj_inputs or [], adjoint=adjoint, device=device,
                       record_tape=False)
            return direct
        dim = (dim,) if isinstance(dim, int) else tuple(dim)
        commands, i = self.commands, self.command
        self.command += 1
        if i < len(commands):
            command, key, args, adj_args = commands[i]
            if key[0] is kernel and key[1:] == (dim, adjoint, block_dim):
                _set_changed(command, args, inputs, False)
                if adjoint:
                    _set_changed(command, adj_args, adj_inputs, True)
                return command.launch
            del commands[i:]
        if block_dim is None:
            command = wp.launch(kernel, dim=dim, inputs=inputs, adj_inputs=adj_inputs or [], adjoint=adjoint,
                                device=device, record_tape=False, record_cmd=True)
        else:
            command = wp.launch_tiled(kernel, dim=list(dim), inputs=inputs, adj_inputs=adj_inputs or [],
                                      adjoint=adjoint, device=device, record_tape=False, record_cmd=True,
                                      block_dim=block_dim)
        commands.append((command, (kernel, dim, adjoint, block_dim), list(inputs), list(adj_inputs or ())))
        return command.launch

    def _run(self, kernel, dim, inputs, block_dim=None):
        """Launch `kernel` now (off the tape): `_command`'s launch."""
        self._command(kernel, dim, inputs, block_dim=block_dim)()

    def _custom(self, kernel, W, inputs):
        """Launch a custom world kernel (no tape): a block of threads per world in the wide
        schedule, one thread per world in the fused one (its tid is then (w, 0))."""
        self._custom_command(kernel, W, inputs)()

    def _custom_command(self, kernel, W, inputs):
        if self.kernels["custom_lanes"]:
            return self._command(kernel, (W,), inputs, block_dim=schedule.LANES)
        return self._command(kernel, (W, 1), inputs)

    def _solve(self, m, W, A, dA, b, x, LD, y, record: bool = True, launch: bool = True, dA_grad: bool = False):
        """x = (A + dA)^-1 b (dA by its lower triangle), launched outside the tape (unless not
        `launch`: the engine's acceleration solved it, `accelerate`), with its hand-written
        adjoint recorded (unless not `record`: when nothing on the tape reads x); LD receives
        the factor, y [W, nv] is the adjoint's scratch. `dA_grad`: dA is on the tape (its
        adjoint gets dA's gradient; else nothing reads it)."""
        if launch:
            self._custom(self.kernels["solve_forward"], W, [m, A, dA, b, LD, x])
        if record:
            self.tape.record_func(self._custom_command(self.kernels["solve_adjoint"], W,
                                                       [m, LD, x, x.grad, y, b.grad, A.grad, dA.grad, int(dA_grad)]),
                                  arrays=[A, dA, b, x])

    def _adjoint_inputs(self, inputs):
        adj_inputs = []
        for x in inputs:
            if isinstance(x, wp.array):
                adj_inputs.append(x.grad)
            elif id(x) in self.adjoints:
                adj_inputs.append(self.adjoints[id(x)])
            else:
                adj_inputs.append(self.tape.get_adjoint(x))
        return adj_inputs

    def _segment(self, seg, m, d, W, forward: bool = True):
        """Launch a segment of stages (simrl.sim.schedule), each launch with its adjoint; a
        fused segment with a twin in `build`'s by_pass runs backwards by the twin's launches,
        the last pass's first. Without `forward` only the adjoints are recorded (the forward
        segment launched the stages)."""
        by_pass = self.kernels["by_pass"].get(seg.name) if BY_PASS else None
        if by_pass is None or wp.config.verify_autograd_array_access:
            for item in seg.launches(self.model):
                assert item.block_dim is None, "a differentiable segment has no world functions"
                dim, inputs = (W, *item.dims), [m, d, *item.inputs]
                if _inert(item, self.model) and not wp.config.verify_autograd_array_access:
                    if forward:
                        self._run(item.kernel, dim, inputs)
                    continue
                reverse = self._reverse(item, m, d, W)
                if reverse is None:
                    if forward:
                        self._launch(item.kernel, dim, inputs)
                    else:
                        self._record(item.kernel, dim, inputs)
                    continue
                if forward:
                    self._run(item.kernel, dim, inputs)
                self.tape.record_func(self._command(*reverse), arrays=[])
            return
        if forward:
            for item in seg.launches(self.model):
                self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        launches = []
        for item in reversed(by_pass.launches(self.model)):
            if _inert(item, self.model):
                continue
            inputs = [m, d, *item.inputs]
            reverse = self._reverse(item, m, d, W)
            launches.append(self._command(*reverse) if reverse is not None else
                            self._command(item.kernel, (W, *item.dims), inputs, self._adjoint_inputs(inputs)))

        def backward():
            for launch in launches:
                launch()

        self.tape.record_func(backward, arrays=[])

    def _reverse(self, item, m, d, W):
        """(kernel, dim, inputs) of the hand-written reverse kernel of a wide pass's launch
        (`build`'s reverse: in place of its generated adjoint), or None."""
        kernel = self.kernels["reverse"].get(item.kernel.key) if HANDWRITTEN else None
        if kernel is None or wp.config.verify_autograd_array_access:
            return None
        adjoints = [self.adjoints[id(d)]]
        if item.kernel.key in self.kernels["reverse_model"]:
            adjoints.append(self.adjoints[id(m)])
        return kernel, (W, *item.dims), [m, d, *adjoints, *item.inputs]

    def release(self):
        """Return the step buffers to the pool (after backward)."""
        # the last evaluation's first: the next rollout takes them in this one's order (the
        # pool hands out the last given first), each with the launches its evaluation recorded
        for d in reversed(self.datas):
            _POOL.give(self.model, d, self.adjoints.get(id(d)), self.scratch[id(d)], self.slots[id(d)])
        self.datas = []
        self.slots = {}
        self.adjoints = {}
        self.scratch = {}
        _POOL.give_arrays(self.model, self.pooled)

    def _data(self, qpos, qvel, act, slot: int):
        """Buffers for one evaluation of the dynamics at (qpos, qvel, act), the `slot`-th of its
        step (RK4's stage): from the pool, their gradients the slot's shared slab."""
        d, adj, scratch = _POOL.take(self.model, qpos.shape[0], slot)
        self.scratch[id(d)] = scratch
        self.slots[id(d)] = slot
        _set_fields(d, qpos=qpos, qvel=qvel, act=act, ctrl=self.ctrl, qfrc_applied=self.qfrc_applied)
        # the step's time (RK4's later stages compute no sensors: the step's first time serves them)
        self.commands, self.command = scratch.commands, 0  # this evaluation's launches, recorded or replayed
        self._run(self.kernels["store_time"], qpos.shape[0], [self.time, d.solver_scalar])
        if self.model.struct.nmocap:
            # the mocap poses, into the buffers' own arrays (a pooled Data holds old values)
            mocap = self.mocap
            if mocap is None:
                fresh = make_data(self.model, qpos.shape[0])
                mocap = self.mocap = (fresh.mocap_pos, fresh.mocap_quat)
            wp.copy(d.mocap_pos, mocap[0])
            wp.copy(d.mocap_quat, mocap[1])
        if self.model.mjm.neq:
            # which equality constraints act, into the buffers' own array (a pooled Data's slab
            # starts zeroed: every constraint off)
            if self.eq_active is None:
                self.eq_active = make_data(self.model, qpos.shape[0]).eq_active
            wp.copy(d.eq_active, self.eq_active)
        if adj is None:
            adj = self.tape.get_adjoint(d)
        _set_fields(adj, qpos=qpos.grad, qvel=qvel.grad, act=act.grad, ctrl=self.ctrl.grad,
                    qfrc_applied=self.qfrc_applied.grad)
        self.adjoints[id(d)] = adj
        self.datas.append(d)
        return d

    def _zero_grads(self, datas):
        """Record the zeroing of the gradient slabs of `datas` (one step's evaluations): the
        backward runs it before the adjoints of the step's launches, which alone add into them
        (_Pool); the previous step's backward, which runs after, finds them zero. On the CPU the
        constraint rows' arrays are zeroed over the rows that some world uses (d.nefc's largest,
        read off the host's memory: no adjoint reads a row past its world's nefc), a fifth of
        their njmax rows on the quadruped; a GPU memsets the slab whole (reading nefc would
        synchronise)."""
        parts = [(self._zeroing(d), self.scratch[id(d)]) for d in datas]

        def zero():
            for (grads, head, rows, nefc), scratch in parts:
                if rows and ZERO_ROWS_IN_USE:
                    head.zero_()
                    _zero_rows(rows, int(nefc.max()))
                else:
                    grads.zero_()
                scratch.zero_grads()

        self.tape.record_func(zero, arrays=[])

    def _zeroing(self, d):
        """(d's gradient slab, its part before the constraint rows' arrays, numpy views of those
        (none on a GPU), of d.nefc): built once per pooled Data, kept with its scratch."""
        scratch = self.scratch[id(d)]
        if scratch.zeroing is None:
            model = self.model
            grads = d.qM.grad._slab
            offsets, _, rows_start = _grad_layout(model, d.qM.shape[0])
            rows = []
            if model.device.is_cpu and rows_start < grads.capacity:
                rows = []
                for name in _row_arrays(model, d, list(offsets)):
                    a = getattr(d, name).grad.numpy()
                    rows.append((a.view(np.uint8).reshape(a.shape[0], -1), a.itemsize * math.prod(a.shape[2:])))
            scratch.zeroing = (grads, grads[:rows_start], rows, d.nefc.numpy() if rows else None)
        return scratch.zeroing

    def _array(self, shape: tuple, dtype, grad: bool = False):
        """A small array of this rollout's own from the pool (its values not zeroed)."""
        return _POOL.array(self.model, self.pooled, shape, dtype, grad)

    def _fresh(self, like):
        """An array like `like`, with a gradient (zeroed; the launch that writes it writes its
        values whole)."""
        return self._array(like.shape, like.dtype, True)

    def _euler(self, qpos, qvel, act, sensors: bool = False):
        """Semi-implicit Euler, with dof damping implicit when the model asks (mj_EulerSkip), or
        implicitfast (mj_implicitSkip): the same step with (M - h qDeriv) in the last solve."""
        struct = self.model.struct
        qacc, d = self._acceleration(qpos, qvel, act, implicit_damping=bool(struct.euler_damp or struct.implicitfast),
                                     sensors=sensors, slot=0)
        qpos1, qvel1 = self._fresh(qpos), self._fresh(qvel)
        inputs = [self.m, qpos, qvel, qacc, qpos1, qvel1]
        if self.kernels["advance_world"] is not None:  # the fused schedule's: a thread per world
            self._launch(self.kernels["advance_world"], qpos.shape[0], inputs)
        else:
            self._launch(self.kernels["advance"], (qpos.shape[0], self.model.struct.njnt), inputs)
        act1 = act
        if self.model.na:
            act1 = self._fresh(act)
            self._launch(self.kernels["advance_act"], (qpos.shape[0], self.model.nu), [self.m, act, d.act_dot, act1])
        self._zero_grads([d])
        return qpos1, qvel1, act1

    def _rk4(self, qpos, qvel, act, sensors: bool = False):
        """MuJoCo 4.0's RK4 (simrl.sim.rk4): four evaluations, each on buffers of its own."""
        k, m, W, scalar = self.kernels, self.m, qpos.shape[0], self.model.dtype
        njnt, nu, na = self.model.struct.njnt, self.model.nu, self.model.na
        A = [scalar(a) for a in RK4_A]
        B = [scalar(b) for b in RK4_B]
        derivatives, accelerations, act_dots, datas = [], [], [], []
        qpos_i, qvel_i, act_i = qpos, qvel, act
        for i in range(4):
            # sensors at the first stage only (mj_RungeKutta's later mj_forwardSkip skip them)
            qacc, d = self._acceleration(qpos_i, qvel_i, act_i, implicit_damping=False, sensors=sensors and i == 0,
                                         slot=i)
            datas.append(d)
            accelerations.append(qacc)
            act_dots.append(d.act_dot)
            if i == 0:
                derivatives.append(qvel)
            else:
                derivative = self._fresh(qvel)
                self._launch(k["rk_derivative"], (W, njnt), [m, derivatives[-1], qvel_i, A[i - 1], derivative])
                derivatives.append(derivative)
            if i < 3:
                qpos_next, qvel_next = self._fresh(qpos), self._fresh(qvel)
                self._launch(k["rk_next"], (W, njnt), [m, qpos, qvel, derivatives[-1], accelerations[-1], A[i],
                                               qpos_next, qvel_next])
                qpos_i, qvel_i = qpos_next, qvel_next
                if na:
                    act_i = self._fresh(act)
                    self._launch(k["rk_next_act"], (W, nu), [m, act, act_dots[-1], A[i], act_i])
        qpos1, qvel1, dq = self._fresh(qpos), self._fresh(qvel), self._fresh(qvel)
        self._launch(k["rk_end"], (W, njnt), [m, qpos, qvel, *derivatives, *accelerations, *B, dq, qpos1, qvel1])
        act1 = act
        if na:
            act1, dact = self._fresh(act), self._fresh(act)
            self._launch(k["rk_end_act"], (W, nu), [m, act, *act_dots, *B, dact, act1])
        self._zero_grads(datas)
        return qpos1, qvel1, act1

    def _acceleration(self, qpos, qvel, act, implicit_damping: bool, sensors: bool = False, slot: int = 0):
        """The acceleration the integrator uses at (qpos, qvel, act), and the evaluation's buffers
        (act_dot among them): qacc (M^-1 qfrc_smooth, or the constraint solver's), or with implicit
        damping (M - h qDeriv)^-1 (qfrc_smooth + qfrc_constraint). With `sensors`, the sensors
        (self.sensordata) of mj_forward's qacc and efc_force."""
        k, model, m = self.kernels, self.model, self.m
        W, nv = qpos.shape[0], model.nv
        d = self._data(qpos, qvel, act, slot)
        scratch = self.scratch[id(d)]
        rows = bool(model.struct.nefc)
        # with rows, the fused schedule's acceleration by the engine's world functions, off the
        # tape (build's accelerate): the Newton solver from the warm start set here
        engine = rows and k["accelerate"] is not None
        if engine:
            self._warmstart(d)
        # the stages in one kernel (build's forward_segment, with rows the acceleration too),
        # their adjoints recorded segment by segment; else a launch per segment
        fused = k["forward_segment"] is not None and FUSED_FORWARD and HANDWRITTEN and BY_PASS and \
            not wp.config.verify_autograd_array_access
        if fused:
            for item in k["forward_segment"](rows, bool(model.struct.ndetect)).launches(model):
                self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        self._segment(k["smooth"], m, d, W, not fused)
        if rows:
            self._rows(m, d, not fused)
        self._segment(k["velocity"], m, d, W, not fused)
        if rows:
            self._reference(m, d, not fused)
        if engine and not fused:
            for item in k["accelerate"].launches(model):
                self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        # whether the engine's qH and qacc_int stand for the last solve (_constrained's
        # hand-written path): then the kernels of -h qDeriv are recorded, not launched (the
        # engine's left their values in the Data)
        engine_solve = engine and HANDWRITTEN and not model.struct.cone_elliptic and \
            not wp.config.verify_autograd_array_access
        if not (engine_solve and implicit_damping):
            # the scratch values that a launch reads before writing them or without (dA, the
            # inactive rows of jar and force): none on the hand-written path after the engine's
            # acceleration (_constrained), which launches no solve and copies efc_force
            scratch.zero_values()
        dA = scratch.dA  # zero unless implicit_matrix writes it
        if implicit_damping and not model.struct.implicitfast and not wp.config.verify_autograd_array_access:
            # Euler's implicit damping: dA = h dof_damping, a constant of the model (not among the
            # parameters simrl.diff differentiates): off the tape (no use with the engine's qH)
            if not engine_solve:
                for name, inputs in (("implicit_damping_dofs", [m, d]), ("implicit_matrix", [m, d, dA])):
                    self._run(k[name], (W, nv), inputs)
        elif implicit_damping:
            add = self._record if engine_solve else self._launch
            add(k["implicit_dofs" if model.struct.implicitfast else "implicit_damping_dofs"], (W, nv), [m, d])
            if model.struct.implicitfast and model.struct.ntendon:
                add(k["implicit_tendons"], (W, model.struct.ntendon), [m, d])
            if model.struct.implicitfast and model.struct.nsite_trn:
                add(k["implicit_site_actuators"], (W, model.nu), [m, d])
            add(k["implicit_matrix"], (W, nv), [m, d, dA])
        # dA on the tape (implicit_matrix's adjoint reads its gradient)
        dA_grad = implicit_damping and bool(model.struct.implicitfast or wp.config.verify_autograd_array_access)
        scratch.dA_grad = dA_grad
        if model.struct.nefc == 0:
            self._solve(m, W, d.qM, dA, d.qfrc_smooth, d.qacc_int, d.qLD, scratch.y, dA_grad=dA_grad)
            if not implicit_damping:
                if sensors:
                    self._sensors(m, d, d.qacc_int, None)
                return d.qacc_int, d
            if sensors:  # mj_forward's qacc, M^-1 qfrc_smooth (qH is free without constraints)
                self._solve(m, W, d.qM, scratch.zero, d.qfrc_smooth, d.qacc_smooth, d.qH, scratch.y)
                self._sensors(m, d, d.qacc_smooth, None)
            no_force = self._fresh(d.qfrc_smooth)
            no_force.zero_()  # (a pooled array holds its last user's values)
            return self._free_bodies(m, d, d.qfrc_smooth, no_force, d.qacc_int), d
        return self._constrained(m, d, dA if implicit_damping else None, sensors, engine, dA_grad), d

    def _warmstart(self, d):
        """The constraint solver's warm start: the last evaluation's solution."""
        if self.warmstart is not None:
            wp.copy(d.qacc_warmstart, self.warmstart)
        else:  # the rollout's first solve starts from zero, whatever these buffers held before
            d.qacc_warmstart.zero_()

    def _sensors(self, m, d, qacc, efc_force):
        """Launch the sensors on `d` reading the differentiable `qacc` and `efc_force` (None:
        the model has no constraint rows) in place of the Data's own (the solver's, which have
        no adjoint); its sensordata becomes self.sensordata."""
        replace = {"qacc": qacc}
        if efc_force is not None:
            replace["efc_force"] = efc_force
        ds = _replace_fields(d, self.model.dtype, replace)
        self.adjoints[id(ds)] = _replace_fields(self.adjoints[id(d)], self.model.dtype,
                                                {name: a.grad for name, a in replace.items()})
        W = qacc.shape[0]
        for item in self.kernels["sensor_hfield"].launches(self.model):
            self._run(item.kernel, (W, *item.dims), [m, ds, *item.inputs])
        self._segment(self.kernels["sensors"], m, ds, W)
        self.sensordata = d.sensordata

    def _free_bodies(self, m, d, f1, f2, qacc):
        """qacc with implicitfast's standalone free bodies' rows solved apart (mj_implicitSkip)."""
        if not self.model.struct.free_body_num:
            return qacc
        out = self._fresh(qacc)
        self._launch(self.kernels["free_body_rows"], (qacc.shape[0], self.model.struct.njnt), [m, d, f1, f2, qacc, out])
        return out

    def _rows(self, m, d, forward: bool = True):
        """Contacts and constraint rows at d's positions (mj_collision, mj_makeConstraint): the
        broadphase and the places of the rows off the tape, the narrow phase and the rows on it.
        Without `forward` only the adjoints are recorded (the forward segment launched the stages)."""
        k, model = self.kernels, self.model
        W = d.qvel.shape[0]
        if forward:
            for item in k["broadphase"].launches(model):
                self._custom(item.kernel, W, [m, d])
            if model.struct.ndetect:
                for item in k["convex_detect"].launches(model):
                    self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        self._segment(k["narrowphase"], m, d, W, forward)
        if forward:
            for item in k["efc_address"].launches(model):
                self._custom(item.kernel, W, [m, d])
        self._run(k["merge_overflow"], W, [d.overflow, d.overflow_need, self.overflow, self.overflow_need])
        if k["constraint_other"] is None or not HANDWRITTEN or model.struct.cone_elliptic or \
                wp.config.verify_autograd_array_access:
            self._segment(k["constraint"], m, d, W, forward)
            return
        # the rows forward; backwards the contacts' and joint limits' by hand, the other rows' by
        # their generated adjoint
        if forward:
            for item in k["constraint"].launches(model):
                self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        friction = getattr(self.adjoints[id(m)], "cpair_friction", None)
        if friction is None:
            friction = _no_friction(model)
        launches = [self._command(k["rows_reverse"], W, [m, d, self.adjoints[id(d)], friction])]
        if _other_rows(model):
            for item in k["constraint_other"].launches(model):
                inputs = [m, d, *item.inputs]
                launches.append(self._command(item.kernel, (W, *item.dims), inputs, self._adjoint_inputs(inputs)))

        def backward():
            for launch in launches:
                launch()

        self.tape.record_func(backward, arrays=[])

    def _reference(self, m, d, forward: bool = True):
        """The rows' velocities and reference accelerations (mj_referenceConstraint): in the fused
        schedule backwards by the hand-written reference_reverse and, with equality constraints,
        the generated adjoint of their Jdot qvel (reference_other). Without `forward` only the
        adjoints are recorded (the forward segment launched the stages)."""
        k, model = self.kernels, self.model
        W = d.qvel.shape[0]
        if k["reference_other"] is None or not HANDWRITTEN or wp.config.verify_autograd_array_access:
            self._segment(k["reference"], m, d, W, forward)
            return
        if forward:
            for item in k["reference"].launches(model):
                self._run(item.kernel, (W, *item.dims), [m, d, *item.inputs])
        launches = []
        if model.struct.nefc_eq:
            for item in k["reference_other"].launches(model):
                inputs = [m, d, *item.inputs]
                launches.append(self._command(item.kernel, (W, *item.dims), inputs, self._adjoint_inputs(inputs)))
        launches.append(self._command(k["reference_reverse"], W, [m, d, self.adjoints[id(d)]]))

        def backward():
            for launch in launches:
                launch()

        self.tape.record_func(backward, arrays=[])

    def _constrained(self, m, d, dA, sensors: bool = False, engine: bool = False, dA_grad: bool = False):
        """qacc with constraints: the solver forward, its implicit adjoint on the tape; with
        `dA` (-h qDeriv: Euler's implicit damping, implicitfast; `dA_grad`: on the tape) then
        (M + dA)^-1 (qfrc_smooth + qfrc_constraint). Returns the acceleration to integrate. With
        `sensors`, the sensors of the solver's qacc and of efc_force recomputed from it
        (differentiably). `engine`: the engine's acceleration ran (build's accelerate): the solves
        and the solver are not launched again, the hand-written path reads its qfrc_constraint,
        qH and qacc_int."""
        k, tape, model = self.kernels, self.tape, self.model
        device = model.device
        W, nv, nefc = d.qvel.shape[0], model.nv, model.struct.nefc
        scratch = self.scratch[id(d)]
        # qacc_smooth for the solver; qLD keeps M's factor, which the implicit adjoint of a world
        # without active rows solves with (H = M). Its adjoint unrecorded (SMOOTH_SOLVE_ADJOINT):
        # the solver reads qacc_smooth off the tape, and the sensors read qacc (the solver's)
        self._solve(m, W, d.qM, scratch.zero, d.qfrc_smooth, d.qacc_smooth, d.qLD, scratch.y,
                    record=SMOOTH_SOLVE_ADJOINT, launch=not engine)
        if not engine:
            self._warmstart(d)
            for item in k["constraint_solve"].launches(model):
                self._custom(item.kernel, W, [m, d])
        qacc = scratch.qacc  # the solution, with a gradient of its own
        wp.copy(qacc, d.qacc)
        grads = [d.qM.grad, d.qfrc_smooth.grad, d.efc_J.grad, d.efc_D.grad, d.efc_aref.grad,
                 d.efc_frictionloss.grad, d.efc_mu.grad]
        # the hand-written path with a last solve: its three adjoints in one launch
        # (acceleration_adjoint) unless the sensors' adjoints run between them
        handwritten = dA is not None and HANDWRITTEN and not model.struct.cone_elliptic and \
            not wp.config.verify_autograd_array_access
        one = handwritten and not sensors and not REFACTOR and ONE_ACCELERATION_ADJOINT
        if not one:
            if REFACTOR:
                def backward():
                    H = wp.zeros((W, nv, nv), dtype=qacc.dtype, device=device)
                    self._custom_command(k["constraint_adjoint_refactor"], W,
                                         [m, d, qacc, qacc.grad, scratch.lam, H, *grads])()
            else:
                backward = self._custom_command(k["constraint_adjoint"], W,
                                                [m, d, qacc, qacc.grad, scratch.lam, *grads])
            tape.record_func(backward, arrays=[qacc, d.qM, d.qfrc_smooth, d.efc_J, d.efc_D, d.efc_aref,
                                               d.efc_frictionloss, d.efc_mu])
        self.warmstart = d.qacc
        if dA is None and not sensors:
            return qacc
        # efc_force of the solution, differentiably (the solver's own has no adjoint)
        jar, force = scratch.jar, scratch.force
        if handwritten:
            # the solver's efc_force and qfrc_constraint (constraint_rhs: its last evaluate is at
            # the solution), and the right-hand side, with a hand-written adjoint (the engine's
            # acceleration computed qfrc_constraint, and solved: only rhs's gradient is used)
            qfrc, rhs = (d.qfrc_constraint, scratch.rhs) if engine else (scratch.qfrc, scratch.rhs)
            if not engine:
                self._custom(k["constraint_rhs"], W, [m, d, d.qfrc_smooth, qfrc, rhs])
            if sensors:  # efc_force with a gradient of its own, for the sensors that read it
                wp.copy(force, d.efc_force)
            if one:
                self._solve(m, W, d.qM, dA, rhs, d.qacc_int, d.qH, scratch.y, record=False, launch=not engine)
                tape.record_func(self._custom_command(
                    k["acceleration_adjoint"], W,
                    [m, d, d.qH, d.qacc_int, d.qacc_int.grad, scratch.y, dA.grad, int(dA_grad), qacc, d.efc_force,
                     force.grad, qfrc.grad, rhs.grad, jar.grad, qacc.grad, scratch.lam, *grads]), arrays=[])
                return self._free_bodies(m, d, d.qfrc_smooth, qfrc, d.qacc_int)
            backward_qfrc = self._custom_command(
                k["constraint_qfrc_adjoint"], W,
                [m, d, qacc, d.efc_jar, d.efc_force, force.grad, qfrc.grad, rhs.grad, jar.grad, qacc.grad,
                 d.qfrc_smooth.grad, d.efc_J.grad, d.efc_D.grad, d.efc_aref.grad, d.efc_frictionloss.grad])
            tape.record_func(backward_qfrc, arrays=[qacc, jar, force, qfrc, rhs, d.qfrc_smooth, d.efc_J, d.efc_D,
                                                    d.efc_aref, d.efc_frictionloss])
            if sensors:
                self._sensors(m, d, qacc, force)
            self._solve(m, W, d.qM, dA, rhs, d.qacc_int, d.qH, scratch.y, launch=not engine, dA_grad=dA_grad)
            return self._free_bodies(m, d, d.qfrc_smooth, qfrc, d.qacc_int)
        self._launch(k["constraint_jar"], (W, nefc), [m, d, qacc, jar])
        self._launch(k["constraint_force_row"], (W, nefc), [m, d, jar, force])
        if model.struct.cone_elliptic:
            self._launch(k["constraint_force_cone"], (W, nefc), [m, d, jar, force])
        if sensors:
            self._sensors(m, d, qacc, force)
        if dA is None:
            return qacc
        qfrc, rhs = scratch.qfrc, scratch.rhs
        self._launch(k["constraint_force_dof"], (W, nv), [m, d, force, qfrc])
        self._launch(k["add"], (W, nv), [d.qfrc_smooth, qfrc, rhs])
        self._solve(m, W, d.qM, dA, rhs, d.qacc_int, d.qH, scratch.y, dA_grad=dA_grad)
        return self._free_bodies(m, d, d.qfrc_smooth, qfrc, d.qacc_int)


#: the constraint segment's passes that `rows_reverse` runs backwards in the fused schedule (the
#: limits of hinges and slides, the contact rows of either cone: `build`'s constraint_other
#: leaves them out)
REVERSED_ROWS = ("limit_rows", "contact_rows", "contact_rows_elliptic", "contact_jacobian", "contact_jacobian_2",
                 "contact_jacobian_elliptic", "contact_jacobian_elliptic_2")


def _other_rows(model) -> bool:
    """Whether a model has constraint rows that `build`'s constraint_other runs backwards (not
    rows_reverse's): equality constraints, friction loss, limits of ball joints or tendons."""
    mjm, ball = model.mjm, int(mujoco.mjtJoint.mjJNT_BALL)
    return bool(model.struct.nefc_eq or model.struct.nefc_friction or mjm.tendon_limited.any()
                or (mjm.jnt_limited.astype(bool) & (mjm.jnt_type == ball)).any())


def _no_friction(model):
    """An empty array for contact_rows_reverse's friction adjoint when the friction is not
    differentiated (kept with the model)."""
    empty = model.__dict__.get("grad_no_friction")
    if empty is None:
        empty = model.__dict__["grad_no_friction"] = wp.empty((0, 0), dtype=model.T.vec5, device=model.device)
    return empty


def _inert(item, model) -> bool:
    """Whether a wide pass's launch writes nothing a gradient flows through, so its adjoint adds
    nothing and is not launched: the controls' check (ctrl_bad, an integer), and the activations'
    rates of a model without activations."""
    name = item.kernel.key
    return name == "control_check" or (name == "actuation_act_dot" and model.na == 0)


def _model_adjoint(model, m, tape: wp.Tape):
    """The adjoint struct of the Model struct `m` the kernels read. For the model's own struct
    (no parameter differentiated: arrays without gradients) one built once and kept with the
    model: an adjoint of its hundred fields per call costs more than a small step, and it holds
    nothing that depends on their values (no array of the model's struct has a gradient; the
    adjoint of a scalar field is a zero nothing reads). Else the tape's, for `m`'s arrays with
    gradients."""
    if m is not model.struct or wp.config.verify_autograd_array_access:
        return tape.get_adjoint(m)
    adjoint = model.__dict__.get("grad_adjoint")
    if adjoint is None:
        adjoint = wp.Tape().get_adjoint(m)
        model.__dict__["grad_adjoint"] = adjoint
    return adjoint


def _replace_fields(struct, scalar, replace: dict):
    """A shallow copy of a Data struct (or of its adjoint) with the fields in `replace` set to
    other arrays."""
    struct_type = data_struct(scalar)
    copy = struct_type()
    for name in struct_type.vars:
        setattr(copy, name, replace.get(name, getattr(struct, name)))
    return copy
