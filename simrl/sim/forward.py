"""mj_forward: from (qpos, qvel, ctrl) to qacc, one thread per world.

The stages run in MuJoCo's order (engine_forward.c: mj_fwdPosition, mj_fwdVelocity,
mj_fwdActuation, mj_fwdAcceleration, mj_fwdConstraint) inside one kernel, so a step costs
few launches.
"""


import functools

import warp as wp

from simrl.sim import actuation, collision_driver, com_pos, constraint, crb, factor_m, kinematics, passive, rne, solver
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import kernel_module


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    kinematics_ = kinematics.build(scalar)
    com_pos_ = com_pos.build(scalar)
    crb_ = crb.build(scalar)
    factor_m_, _, solve_ld = factor_m.build(scalar)
    com_vel_, rne_ = rne.build(scalar)
    passive_ = passive.build(scalar)
    actuation_ = actuation.build(scalar)
    collision_ = collision_driver.build(scalar)
    make_constraint_, reference_constraint_ = constraint.build(scalar)
    solve_ = solver.build(scalar)

    @wp.func
    def fwd_acceleration(m: Model, d: Data, w: int):
        """qfrc_smooth = passive - bias + applied + actuator; qacc_smooth = M^-1 qfrc_smooth."""
        for i in range(m.nv):
            qfrc = d.qfrc_passive[w, i] - d.qfrc_bias[w, i] + d.qfrc_applied[w, i] + d.qfrc_actuator[w, i]
            d.qfrc_smooth[w, i] = qfrc
            d.qacc_smooth[w, i] = qfrc
        solve_ld(m, d.qLD, d.qacc_smooth, w)

    @wp.kernel(module=kernel_module(scalar))
    def forward(m: Model, d: Data):
        w = wp.tid()
        # position-dependent
        kinematics_(m, d, w)
        com_pos_(m, d, w)
        crb_(m, d, w)
        factor_m_(m, d, w)
        collision_(m, d, w)
        make_constraint_(m, d, w)
        # velocity-dependent
        com_vel_(m, d, w)
        passive_(m, d, w)
        reference_constraint_(m, d, w)
        rne_(m, d, w)
        # forces to acceleration
        actuation_(m, d, w)
        fwd_acceleration(m, d, w)
        solve_(m, d, w)

    return forward
