"""Actuator forces on joints: gain * ctrl + bias, clamped, mapped through the gear
(mj_transmission and mj_fwdActuation, engine_core_smooth.c / engine_forward.c)."""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import BIAS_AFFINE, GAIN_AFFINE, model_struct

# mjMAXVAL: a control beyond it counts as bad (mju_isBad)
MAXVAL = 1e10


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)

    @wp.func
    def actuation(m: Model, d: Data, w: int):
        for i in range(m.nv):
            d.qfrc_actuator_raw[w, i] = scalar(0.0)

        # transmission: length and velocity along the joint, scaled by the gear
        wg = w % m.actuator_gear.shape[0]
        for a in range(m.nu):
            gear = m.actuator_gear[wg, a]
            d.actuator_length[w, a] = d.qpos[w, m.actuator_qposadr[a]] * gear
            d.actuator_velocity[w, a] = d.qvel[w, m.actuator_dofadr[a]] * gear

        # MuJoCo zeroes every control of a world when any is NaN or beyond mjMAXVAL
        bad = int(0)
        for a in range(m.nu):
            c = d.ctrl[w, a]
            if wp.isnan(c) or c > scalar(MAXVAL) or c < scalar(-MAXVAL):
                bad = 1

        wgain = w % m.actuator_gainprm.shape[0]
        wbias = w % m.actuator_biasprm.shape[0]
        for a in range(m.nu):
            force = scalar(0.0)
            # an actuator in a group listed in opt.disableactuator produces no force
            if m.enable_actuation and m.actuator_enabled[a]:
                ctrl = d.ctrl[w, a]
                if bad:
                    ctrl = scalar(0.0)
                if m.enable_clampctrl and m.actuator_ctrllimited[a]:
                    r = m.actuator_ctrlrange[a]
                    ctrl = wp.clamp(ctrl, r[0], r[1])
                length = d.actuator_length[w, a]
                velocity = d.actuator_velocity[w, a]
                gp = m.actuator_gainprm[wgain, a]
                gain = gp[0]
                if m.actuator_gaintype[a] == GAIN_AFFINE:
                    gain = gp[0] + gp[1] * length + gp[2] * velocity
                force = gain * ctrl
                if m.actuator_biastype[a] == BIAS_AFFINE:
                    bp = m.actuator_biasprm[wbias, a]
                    force = force + (bp[0] + bp[1] * length + bp[2] * velocity)
            if m.actuator_forcelimited[a]:
                r = m.actuator_forcerange[a]
                force = wp.clamp(force, r[0], r[1])
            d.actuator_force[w, a] = force
            dof = m.actuator_dofadr[a]
            d.qfrc_actuator_raw[w, dof] += m.actuator_gear[wg, a] * force

        # joint-level actuator force limits (actuatorfrcrange), into a second array so that no
        # element is overwritten after it was read (exact adjoints)
        for i in range(m.nv):
            frc = d.qfrc_actuator_raw[w, i]
            j = m.dof_jntid[i]
            if m.jnt_actfrclimited[j]:
                r = m.jnt_actfrcrange[j]
                frc = wp.clamp(frc, r[0], r[1])
            d.qfrc_actuator[w, i] = frc

    return actuation
