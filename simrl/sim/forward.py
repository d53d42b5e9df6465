"""mj_forward and mj_step as passes over elements (simrl.sim.schedule builds them fused or wide).

From (qpos, qvel, ctrl) to qacc, in MuJoCo's order (engine_forward.c): positions (mj_fwdPosition:
kinematics, com_pos, crb, mj_collision, mj_makeConstraint, then the body transmissions, whose
moments come from the constraint rows), velocities and forces (mj_fwdVelocity, mj_fwdActuation:
com_vel, rne, passive, actuation, mj_referenceConstraint), and the per-world dense work
(factor_m, qacc_smooth, the constraint solver). A step adds Euler's
(mj_Euler) or RK4's (mj_RungeKutta) passes, over joints and actuators (activations).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import (
    actuation,
    broadphase,
    collision_driver,
    com_pos,
    constraint,
    crb,
    euler,
    factor_m,
    kinematics,
    passive,
    rk4,
    rne,
    sensor,
    solver,
    tendon,
)
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.schedule import (
    ACTIVE_ROWS,
    ACTUATORS,
    BODIES,
    BODIES_DOWN,
    BODIES_UP,
    BODY_TRANSMISSIONS,
    CONTACT_ROWS,
    CONTACT_SENSORS,
    CONTACTS,
    CONTROLS,
    DOFS,
    ELLIPTIC_CONTACTS,
    EQUALITIES,
    FLEX_EQUALITIES,
    FRAMES,
    FRICTION_ROWS,
    GRAVCOMP_DOFS,
    JOINTS,
    LIMIT_ROWS,
    ONCE,
    PAIRS,
    PYRAMIDAL_CONTACTS,
    RAY_SENSORS,
    RICH_ACTUATORS,
    SENSORS,
    SITE_TRANSMISSIONS,
    TENDONS,
    WORLD,
    WRAP_SEGMENTS,
    WRAP_TENDONS,
    WRENCH_SENSORS,
    Pass,
    segment,
)
from simrl.sim.types import block_sync


@functools.cache
def position(scalar, fine: bool = False) -> tuple:
    """mj_fwdPosition without factor_m: poses, subtree CoMs, cinert, cdof, tendons, the site
    transmissions, qM (with the tendons' armature). `fine`: the differentiable step's finer
    launches (cdof per dof, apart from the bodies' cinert: in one kernel, their generated
    adjoint needs more registers than a GPU thread should use)."""
    kin, cp, cr, ten = kinematics.build(scalar), com_pos.build(scalar), crb.build(scalar), tendon.build(scalar)
    # the bodies placed without their parent (the world, free and mocap bodies) in one launch
    # over all bodies, then the others: the engine's wide step in one launch, each body placed
    # along its path from the world; the differentiable step level by level from the first level
    # that holds a body placed from its parent
    kin_body = (Pass("kinematics_body_root", BODIES, (kin.body_root,)),
                Pass("kinematics_body", BODIES_DOWN, (kin.body_tree,), skip_placed_alone=True,
                     alone=(kin.body_from_root,)))
    com = (Pass("com_pos_body", BODIES, (cp.body_cinert,)), Pass("com_pos_dof", DOFS, (cp.cdof_dof,))) \
        if fine else (Pass("com_pos_body", BODIES, (cp.body,)),)
    # the differentiable step: the paths whose side site lies inside the geom apart from the others
    wrap_paths = (Pass("tendon_wrap_path", WRAP_SEGMENTS, (ten.wrap_path_outside,)),
                  Pass("tendon_wrap_path_inside", WRAP_SEGMENTS, (ten.wrap_path_inside,))) \
        if fine else (Pass("tendon_wrap_path", WRAP_SEGMENTS, (ten.wrap_path,)),)
    return (
        Pass("kinematics_joint", JOINTS, (kin.joint,)),
        *kin_body,
        Pass("kinematics_frame", FRAMES, (kin.frame,)),
        Pass("com_pos_subtree", BODIES_UP, (cp.subtree_body,), alone=(cp.subtree_body_alone,)),
        *com,
        Pass("tendon", TENDONS, (ten.length,)),
        *wrap_paths,
        Pass("tendon_wrap", WRAP_TENDONS, (ten.length_wrap,)),
        Pass("transmission_site", SITE_TRANSMISSIONS, (actuation.build(scalar).transmission_site,)),
        Pass("transmission_joint", SITE_TRANSMISSIONS, (actuation.build(scalar).transmission_joint,)),
        Pass("transmission_slidercrank", SITE_TRANSMISSIONS, (actuation.build(scalar).transmission_slidercrank,)),
        Pass("crb_body", BODIES_UP, (cr.body,), skip_world=True, alone=(cr.body_alone,)),
        Pass("crb_dof", DOFS, (cr.dof,)),
    )


@functools.cache
def transmission_body(scalar) -> tuple:
    """mj_transmission's body transmissions (adhesion), after the constraint rows: a pass only a
    model with body transmissions launches (BODY_TRANSMISSIONS)."""
    return (Pass("transmission_body", BODY_TRANSMISSIONS, (actuation.build(scalar).transmission_body,)),)


@functools.cache
def velocity(scalar, fine: bool = False) -> tuple:
    """mj_fwdVelocity and mj_fwdActuation up to qfrc_smooth: com_vel, tendon velocities, rne (with
    the tendons' armature bias), passive, actuation. `fine`: the differentiable step's finer
    launches (an actuator's transmission, act_dot and force apart; the springs of free and
    ball joints apart from the others; gravity compensation apart from the dofs' other forces;
    as `position`'s)."""
    rn, pa, ac, ten = rne.build(scalar), passive.build(scalar), actuation.build(scalar), tendon.build(scalar)
    # the rich actuators (muscles, force-limited tendons) after the others, in passes of their own:
    # their forces before the limits, then the limits (a tendon's sums its actuators' forces)
    act = (Pass("actuation_transmission", ACTUATORS, (ac.actuator_transmission,)),
           Pass("actuation_act_dot", ACTUATORS, (ac.actuator_act_dot,)),
           Pass("actuation_act_dot_rich", RICH_ACTUATORS, (ac.actuator_act_dot_rich,)),
           Pass("actuation_actuator", ACTUATORS, (ac.actuator_force,)),
           Pass("actuation_actuator_rich", RICH_ACTUATORS, (ac.actuator_force_rich,)),
           Pass("actuation_limit_rich", RICH_ACTUATORS, (ac.rich_limit,))) \
        if fine else (Pass("actuation_actuator", ACTUATORS, (ac.actuator,)),
                      Pass("actuation_actuator_rich", RICH_ACTUATORS, (ac.actuator_rich,)),
                      Pass("actuation_limit_rich", RICH_ACTUATORS, (ac.rich_limit,)))
    # the differentiable step: gravity compensation a pass of its own (its generated adjoint
    # carries body_mass's gradient), the rest of smooth_dof runs backwards by hand (simrl.sim.grad)
    gravcomp = (Pass("passive_gravcomp", GRAVCOMP_DOFS, (pa.gravcomp_dof,)),) if fine else ()
    passive_dof = pa.dof_without_gravcomp if fine else pa.dof
    springs = (Pass("passive_spring", JOINTS, (pa.spring_other,)),
               Pass("passive_spring_ball", JOINTS, (pa.spring_ball,))) \
        if fine else (Pass("passive_spring", JOINTS, (pa.spring_joint,)),)
    return (
        Pass("com_vel_body", BODIES_DOWN, (rn.com_vel_body,), alone=(rn.com_vel_from_root,)),
        Pass("tendon_velocity", TENDONS, (ten.velocity,)),
        Pass("cdof_dot", DOFS, (rn.cdof_dot_dof,)),
        Pass("tendon_bias", TENDONS, (ten.bias,)),
        Pass("rne_body", BODIES, (rn.rne_body,)),
        Pass("rne_subtree", BODIES_UP, (rn.rne_subtree_body,), skip_world=True, alone=(rn.rne_subtree_alone,)),
        *springs,
        Pass("control_check", CONTROLS, (ac.check_controls,)),
        *act,
        *gravcomp,
        Pass("smooth_dof", DOFS, (rn.rne_dof, passive_dof, ac.dof, ac.smooth_force_dof)),
    )


@functools.cache
def detect_contacts(scalar) -> tuple:
    """The convex collision's search (GJK/EPA, simrl.sim.collision_convex): before the narrow
    phase, never differentiated."""
    groups = tuple((kinds, collision_driver.detect(scalar, kinds)) for kinds in collision_driver.DETECT_GROUPS)
    return (Pass("convex_detect", PAIRS, (collision_driver.detect(scalar),), kinds=groups,
                 ccd_rows=collision_driver.DETECT_ROWS),)


@functools.cache
def broadphase_pass(scalar, lanes: bool) -> tuple:
    """The broadphase (simrl.sim.broadphase): the candidate pairs kept for the narrow phase, a
    world function (one thread, or a block of threads with `lanes`); never differentiated."""
    return (Pass("broadphase", WORLD, (broadphase.build(scalar, lanes).broadphase,)),)


@functools.cache
def collision(scalar, grouped: bool = True, detect: bool = False) -> tuple:
    """mj_collision: the contacts of the candidate pairs. `grouped`: the wide schedule launches
    collider kinds in groups (collision_driver.GROUPS); else one per collider kind (the
    differentiable step's). `detect`: with the convex collision's search first (for models with
    convex pairs: it is a large function the others need not compile; the differentiable step
    launches it apart, off the tape)."""
    groups = collision_driver.GROUPS if grouped else tuple((k,) for group in collision_driver.GROUPS for k in group)
    groups = tuple((kinds, collision_driver.dispatch(scalar, kinds)) for kinds in groups)
    return (detect_contacts(scalar) if detect else ()) + (
        Pass("narrowphase", PAIRS, (collision_driver.build(scalar),), kinds=groups),)


@functools.cache
def constraint_rows(scalar, lanes: bool, detect: bool = False) -> tuple:
    """mj_collision and mj_makeConstraint: the broadphase, contacts, the places of the constraint
    rows (world functions, a block of threads per world with `lanes`), the rows (their reference
    accelerations come after the velocities: `reference`)."""
    address = Pass("efc_address", WORLD, (world_functions(scalar, lanes).efc_address,))
    return broadphase_pass(scalar, lanes) + collision(scalar, detect=detect) + (address,) + rows(scalar)


@functools.cache
def rows(scalar, grouped: bool = True) -> tuple:
    """mj_makeConstraint once the rows have places (efc_address). `grouped`: each kind of row in
    one launch; else the differentiable step's finer launches: the equalities of bodies, of
    joints, of tendons and of flexes apart (a connect's or weld's Jacobian, each body's part, apart from its
    rows), the limits of hinges and slides, of ball joints and of tendons apart, a contact's
    Jacobian (each body's part) apart from its rows, the rows of frictionless and pyramidal
    contacts one per element, the two friction cones apart (in one kernel, the generated
    adjoints need more than a GPU thread's share of registers)."""
    c = constraint.build(scalar)
    return ((Pass("equality_rows", EQUALITIES, (c.equality_rows,)),) if grouped else (
        Pass("equality_rows", EQUALITIES, (c.equality_rows_bodies,)),
        Pass("equality_jacobian", EQUALITIES, (c.equality_jacobian_1,)),
        Pass("equality_jacobian_2", EQUALITIES, (c.equality_jacobian_2,)),
        Pass("equality_rows_joint", EQUALITIES, (c.equality_rows_joints,)),
        Pass("equality_rows_tendon", EQUALITIES, (c.equality_rows_tendons,)),
        Pass("equality_rows_flex", FLEX_EQUALITIES, (c.equality_rows_flexes,)))) + (
        Pass("friction_rows", FRICTION_ROWS, (c.friction_row,)),
    ) + ((Pass("limit_rows", LIMIT_ROWS, (c.limit_row,)),
          Pass("contact_rows", CONTACTS, (c.contact_rows,))) if grouped else (
        # the differentiable step: the limits of hinges and slides, ball joints and tendons apart, a
        # contact's Jacobian apart from its rows' parameters, those one row per element (in one
        # kernel, each generated adjoint needs more registers than a GPU thread should use:
        # scripts/gpu_report.py --grad)
        Pass("limit_rows", LIMIT_ROWS, (c.joint_limit_row,)),
        Pass("ball_limit_rows", LIMIT_ROWS, (c.ball_limit_row,)),
        Pass("tendon_limit_rows", LIMIT_ROWS, (c.tendon_limit_row,)),
        Pass("contact_rows", CONTACT_ROWS, (c.contact_row,)),
        Pass("contact_rows_elliptic", ELLIPTIC_CONTACTS, (c.contact_rows_elliptic,)),
        Pass("contact_jacobian", PYRAMIDAL_CONTACTS, (c.contact_jacobian_pyramid_1,)),
        Pass("contact_jacobian_2", PYRAMIDAL_CONTACTS, (c.contact_jacobian_pyramid_2,)),
        Pass("contact_jacobian_elliptic", ELLIPTIC_CONTACTS, (c.contact_jacobian_elliptic_1,)),
        Pass("contact_jacobian_elliptic_2", ELLIPTIC_CONTACTS, (c.contact_jacobian_elliptic_2,))))


@functools.cache
def reference(scalar) -> tuple:
    """mj_referenceConstraint (in mj_fwdVelocity): the rows' velocities and reference
    accelerations, and a connect's or weld's Jdot qvel (which reads cvel and cdof_dot)."""
    c = constraint.build(scalar)
    return (Pass("reference_rows", ACTIVE_ROWS, (c.reference_row,)),
            Pass("equality_reference", EQUALITIES, (c.equality_reference,)))


@functools.cache
def world_functions(scalar, lanes: bool) -> SimpleNamespace:
    """The per-world dense work, for a block of threads per world (`lanes`) or for one thread."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    c = constraint.build(scalar)

    if lanes:
        @wp.func
        def constraint_list(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """efc_list and efc_nactive, every lane walking its share of the rows
            (constraint.constraint_list_lanes).

            Data in: nefc, efc_active. Data out: efc_list, efc_nactive; the scratch efc_lane_count."""
            lo, hi = c.constraint_list_lanes(m, d, w, lane, nlanes)
            block_sync()
            c.constraint_list_lanes_write(m, d, w, lane, nlanes, lo, hi)
            block_sync()

        @wp.func
        def efc_address(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """The places of the constraint rows, every lane walking its share of the kept pairs
            (constraint.efc_address_lanes).

            Data: those of constraint.efc_address but contact_slots and contact_nslots; the scratch
            efc_lane_count."""
            old = d.nefc[w]
            lo, hi = c.efc_address_lanes(m, d, w, lane, nlanes, old)
            block_sync()
            c.efc_address_lanes_write(m, d, w, lane, nlanes, lo, hi, old)
            block_sync()
    else:
        @wp.func
        def constraint_list(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """efc_list and efc_nactive (one thread).

            Data in: nefc, efc_active. Data out: efc_list, efc_nactive."""
            c.constraint_list_one(m, d, w)

        @wp.func
        def efc_address(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """The places of the constraint rows (one thread: constraint.efc_address).

            Data: those of constraint.efc_address."""
            c.efc_address(m, d, w)

        @wp.func
        def efc_address_all(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """`efc_address` writing every slot's first row (the differentiable step's pooled buffers).

            Data: those of constraint.efc_address."""
            c.efc_address_all(m, d, w)

    sv = solver.build(scalar, lanes)
    return SimpleNamespace(constraint_list=constraint_list, efc_address=efc_address,
                           efc_address_all=efc_address if lanes else efc_address_all,
                           fwd_acceleration=factor_m.build(scalar, lanes).fwd_acceleration,
                           solve=sv.solve, constraint_force=sv.constraint_force,
                           euler_damping=euler.build(scalar, lanes).damping)


@functools.cache
def ray_hfield_pass(scalar) -> tuple:
    """The rangefinders' height-field search (simrl.sim.sensor.ray_hfield_sensor): which part of
    a field each ray meets, before the rangefinders' pass."""
    return (Pass("ray_hfield_sensor", RAY_SENSORS, (sensor.build(scalar).ray_hfield_sensor,)),)


@functools.cache
def sensor_passes(scalar, hfield: bool = True) -> tuple:
    """mj_sensorPos, mj_sensorVel and mj_sensorAcc: every sensor but the contact sensors, then
    those. `hfield` False: without the rangefinders' height-field search (`ray_hfield_pass`), which
    the differentiable step runs off the tape."""
    s = sensor.build(scalar)
    return (Pass("sensor", SENSORS, (s.sensor,)),
            *(ray_hfield_pass(scalar) if hfield else ()),
            Pass("ray_sensor", RAY_SENSORS, (s.ray_sensor,)),
            Pass("wrench_sensor", WRENCH_SENSORS, (s.wrench_sensor,)),
            Pass("contact_sensor", CONTACT_SENSORS, (s.contact_sensor,)),
            Pass("contact_sensor_sorted", CONTACT_SENSORS, (s.contact_sensor_sorted,)))


def _acceleration(scalar, lanes: bool, integrator: bool, sensors: bool = True) -> tuple:
    """mj_fwdAcceleration and mj_fwdConstraint, the sensors (mj_sensorPos/Vel/Acc, unless
    `sensors` is False: RK4's later stages skip them as mj_forwardSkip does), and with
    `integrator` the acceleration Euler or implicitfast integrates."""
    # three launches in the wide schedule: as one kernel the three would need twice the
    # registers a GPU thread should use (scripts/gpu_report.py)
    f = world_functions(scalar, lanes)
    passes = (Pass("fwd_acceleration", WORLD, (f.constraint_list, f.fwd_acceleration)),
              Pass("solve", WORLD, (f.solve,)))
    if sensors:
        passes = passes + sensor_passes(scalar)
    if integrator:
        return passes + (Pass("constraint_force_euler", WORLD, (f.constraint_force, f.euler_damping)),)
    return passes + (Pass("constraint_force", WORLD, (f.constraint_force,)),)


def _forward_passes(scalar, lanes: bool, euler_step: bool, sensors: bool = True, convex: bool = False) -> tuple:
    return (position(scalar) + constraint_rows(scalar, lanes, detect=convex) + transmission_body(scalar)
            + velocity(scalar) + reference(scalar) + _acceleration(scalar, lanes, euler_step, sensors))


def forward_segment(scalar, schedule: str, sensors: bool = True, convex: bool = False):
    """mj_forward: qacc and every intermediate from qpos, qvel, ctrl (and sensordata, unless
    `sensors` is False: mj_forwardSkip with skipsensor). `convex`: the model has convex pairs
    (Model.nccdpair), whose search the segment then runs."""
    name = ("forward" if sensors else "forward_skipsensor") + ("_convex" if convex else "")
    return segment(name, _forward_passes(scalar, schedule == "wide", False, sensors, convex), scalar, schedule,
                   _module(convex, rk4=not sensors))


def euler_segment(scalar, schedule: str, convex: bool = False):
    """mj_step with the Euler or implicitfast integrator: mj_forward, then velocities and positions
    advanced (simrl.sim.euler)."""
    e = euler.build(scalar)
    passes = _forward_passes(scalar, schedule == "wide", True, convex=convex) + (
        Pass("euler_joint", JOINTS, (e.joint,)), Pass("euler_actuator", ACTUATORS, (e.actuator,)),
        Pass("advance_time", ONCE, (e.advance_time,)))
    return segment("step_euler" + ("_convex" if convex else ""), passes, scalar, schedule, _module(convex))


def _module(convex: bool, rk4: bool = False) -> str:
    """The Warp module of a segment. Warp compiles a module as a whole, and a kernel added to it
    changes its hash: a process that loaded one module and then adds a kernel to it builds the
    whole module again. So every module's kernels are a fixed set, whatever models a process
    loads: mj_forward and the Euler step (every Sim defines both); RK4's parts and its forward
    without sensors in a module of their own; the convex variants in theirs."""
    return ("sim_convex" if convex else "sim") + ("_rk4" if rk4 else "")


def rk4_segments(scalar, schedule: str) -> tuple:
    """The parts of an RK4 step between its four forward passes: (begin, stage 1, stage 2, end),
    each over the joints and then the actuators' activations."""
    r = rk4.build(scalar)
    parts = (("begin", r.begin, r.begin_actuator), ("stage1", r.stage1, r.stage1_actuator),
             ("stage2", r.stage2, r.stage2_actuator), ("end", r.end, r.end_actuator))
    forward_segment(scalar, schedule, sensors=False)  # the module's fixed set (_module) holds it
    # the step's time advances at its end (mj_RungeKutta's mj_advance)
    time = (Pass("advance_time", ONCE, (euler.build(scalar).advance_time,)),)
    return tuple(segment(f"rk4_{name}", (Pass(f"rk4_{name}", JOINTS, (joint,)),
                                         Pass(f"rk4_{name}_actuator", ACTUATORS, (actuator,)))
                         + (time if name == "end" else ()), scalar, schedule, _module(False, rk4=True))
                 for name, joint, actuator in parts)
