"""mj_forward: from (qpos, qvel, ctrl) to qacc, one thread per world.

The stages run in MuJoCo's order (engine_forward.c: mj_fwdPosition, mj_fwdVelocity,
mj_fwdActuation, mj_fwdAcceleration, mj_fwdConstraint) inside one kernel, so a step costs
few launches. `stages` lists them in that order (`simrl.sim.profile` times each on its own).
"""


import functools

import warp as wp

from simrl.sim import actuation, collision_driver, com_pos, constraint, crb, factor_m, kinematics, passive, rne, solver
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import kernel_module


@functools.cache
def stages(scalar):
    """The forward pass's stage functions `f(m, d, w)`, in the order `forward` calls them."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    _, _, solve_ld = factor_m.build(scalar)
    com_vel_, rne_ = rne.build(scalar)
    make_constraint_, reference_constraint_, _ = constraint.build(scalar)

    @wp.func
    def smooth_force(m: Model, d: Data, w: int):
        """qfrc_smooth = passive - bias + applied + actuator."""
        for i in range(m.nv):
            d.qfrc_smooth[w, i] = d.qfrc_passive[w, i] - d.qfrc_bias[w, i] + d.qfrc_applied[w, i] + \
                d.qfrc_actuator[w, i]

    @wp.func
    def fwd_acceleration(m: Model, d: Data, w: int):
        """qfrc_smooth, and qacc_smooth = M^-1 qfrc_smooth."""
        smooth_force(m, d, w)
        for i in range(m.nv):
            d.qacc_smooth[w, i] = d.qfrc_smooth[w, i]
        solve_ld(m, d.qLD, d.qacc_smooth, w)

    return {
        # position-dependent
        "kinematics": kinematics.build(scalar),
        "com_pos": com_pos.build(scalar),
        "crb": crb.build(scalar),
        "factor_m": factor_m.build(scalar)[0],
        "collision": collision_driver.build(scalar),
        "make_constraint": make_constraint_,
        # velocity-dependent
        "com_vel": com_vel_,
        "passive": passive.build(scalar),
        "reference_constraint": reference_constraint_,
        "rne": rne_,
        # forces to acceleration
        "actuation": actuation.build(scalar),
        "smooth_force": smooth_force,
        "fwd_acceleration": fwd_acceleration,
        "solve": solver.build(scalar),
    }


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    s = stages(scalar)
    kinematics_, com_pos_, crb_, factor_m_ = s["kinematics"], s["com_pos"], s["crb"], s["factor_m"]
    collision_, make_constraint_, com_vel_ = s["collision"], s["make_constraint"], s["com_vel"]
    passive_, reference_constraint_, rne_ = s["passive"], s["reference_constraint"], s["rne"]
    actuation_, fwd_acceleration, solve_ = s["actuation"], s["fwd_acceleration"], s["solve"]

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
