"""Position integration on the configuration manifold (mj_integratePos, engine_support.c):
free joints move linearly in the world frame and rotate by their body-frame angular velocity
(mju_quatIntegrate); ball joints rotate; hinge and slide joints add.

Elements: `joint(m, qpos_in, qpos_out, vel, dt, w, j)` integrates joint j's coordinates;
`check_joint(m, d, w, j)` flags the world when joint j's new state is not finite.
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JointType, scalar_types


@wp.func
def jnt_nq(jtype: int):
    """Coordinates of a joint of type jtype in qpos (mjtJoint)."""
    n = int(1)
    if jtype == JointType.FREE:
        n = 7
    elif jtype == JointType.BALL:
        n = 4
    return n


@wp.func
def jnt_nv(jtype: int):
    """Dofs of a joint of type jtype."""
    n = int(1)
    if jtype == JointType.FREE:
        n = 6
    elif jtype == JointType.BALL:
        n = 3
    return n


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3 = T.f, T.vec3

    @wp.func
    def joint(m: Model, qpos_in: wp.array2d(dtype=scalar), qpos_out: wp.array2d(dtype=scalar),
              vel: wp.array2d(dtype=scalar), dt: scalar, w: int, j: int):
        """Joint j's coordinates of qpos_out[w] = qpos_in[w] advanced by velocity vel[w] for time dt
        (may alias).

        Model: jnt_dofadr, jnt_qposadr, jnt_type. In: qpos_in, vel. Out: qpos_out."""
        padr = m.jnt_qposadr[j]
        vadr = m.jnt_dofadr[j]
        jtype = m.jnt_type[j]
        if jtype == JointType.FREE or jtype == JointType.BALL:
            if jtype == JointType.FREE:
                for c in range(3):
                    qpos_out[w, padr + c] = qpos_in[w, padr + c] + dt * vel[w, vadr + c]
                padr = padr + 3
                vadr = vadr + 3
            omega = vec3(vel[w, vadr], vel[w, vadr + 1], vel[w, vadr + 2])
            q = f.quat_integrate(f.quat_from_qpos(qpos_in, w, padr), omega, dt)
            f.quat_to_qpos(q, qpos_out, w, padr)
        else:
            qpos_out[w, padr] = qpos_in[w, padr] + dt * vel[w, vadr]

    @wp.func
    def check_joint(m: Model, d: Data, w: int, j: int):
        """Flag the world in nan_world[w, 0] when joint j's new qpos or qvel is not finite (it stays
        flagged until reset). The flag only ever goes from 0 to 1, so the joints of a world
        setting it in any order give the same result.

        Model: jnt_dofadr, jnt_qposadr, jnt_type. Data in: qpos, qvel. Data out: nan_world (by atomic max)."""
        jtype = m.jnt_type[j]
        bad = int(0)
        padr = m.jnt_qposadr[j]
        for k in range(jnt_nq(jtype)):
            if not wp.isfinite(d.qpos[w, padr + k]):
                bad = 1
        dadr = m.jnt_dofadr[j]
        for k in range(jnt_nv(jtype)):
            if not wp.isfinite(d.qvel[w, dadr + k]):
                bad = 1
        if bad:
            wp.atomic_max(d.nan_world, w, 0, 1)

    return SimpleNamespace(joint=joint, check_joint=check_joint)
