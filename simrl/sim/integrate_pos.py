"""Position integration on the configuration manifold (mj_integratePos, engine_support.c):
free joints move linearly in the world frame and rotate by their body-frame angular velocity
(mju_quatIntegrate); ball joints rotate; hinge and slide joints add."""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, JNT_FREE, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model = model_struct(scalar)
    f, vec3 = T.f, T.vec3

    @wp.func
    def integrate_pos(m: Model, qpos_in: wp.array2d(dtype=scalar), qpos_out: wp.array2d(dtype=scalar),
                      vel: wp.array2d(dtype=scalar), dt: scalar, w: int):
        """qpos_out[w] = qpos_in[w] advanced by velocity vel[w] for time dt (may alias)."""
        for j in range(m.njnt):
            padr = m.jnt_qposadr[j]
            vadr = m.jnt_dofadr[j]
            jtype = m.jnt_type[j]
            if jtype == JNT_FREE or jtype == JNT_BALL:
                if jtype == JNT_FREE:
                    for c in range(3):
                        qpos_out[w, padr + c] = qpos_in[w, padr + c] + dt * vel[w, vadr + c]
                    padr = padr + 3
                    vadr = vadr + 3
                omega = vec3(vel[w, vadr], vel[w, vadr + 1], vel[w, vadr + 2])
                q = f.quat_integrate(f.quat_from_qpos(qpos_in, w, padr), omega, dt)
                f.quat_to_qpos(q, qpos_out, w, padr)
            else:
                qpos_out[w, padr] = qpos_in[w, padr] + dt * vel[w, vadr]

    return integrate_pos


@functools.cache
def build_check(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)

    @wp.func
    def check_finite(m: Model, d: Data, w: int):
        """Flag the world in nan_world when its new state is not finite (it stays flagged until
        reset); other worlds are untouched, each world being its own thread."""
        bad = int(0)
        for i in range(m.nq):
            if not wp.isfinite(d.qpos[w, i]):
                bad = 1
        for i in range(m.nv):
            if not wp.isfinite(d.qvel[w, i]):
                bad = 1
        if bad:
            d.nan_world[w] = 1

    return check_finite
