"""What the tests of the tasks' terms take from MuJoCo for their hand-written references."""

import mujoco
import numpy as np


def mujoco_reference(mjm, qpos, qvel):
    """From MuJoCo, per state: trunk velocity in the trunk frame (linear, angular), the trunk's
    rotation matrix, and the names of the geoms that penetrate the floor (one entry per contact)."""
    mjd = mujoco.MjData(mjm)
    trunk, floor = mjm.body("trunk").id, mjm.geom("floor").id
    out = []
    for q, v in zip(qpos, qvel, strict=True):
        mjd.qpos[:], mjd.qvel[:] = q, v
        mujoco.mj_forward(mjm, mjd)
        vel = np.zeros(6)
        mujoco.mj_objectVelocity(mjm, mjd, mujoco.mjtObj.mjOBJ_BODY, trunk, vel, 1)  # local frame: (ang, lin)
        touching = [mjm.geom(int(c.geom[0] + c.geom[1] - floor)).name for c in mjd.contact[:mjd.ncon]
                    if floor in (c.geom[0], c.geom[1]) and c.dist < 0]
        out.append({"lin": vel[3:].copy(), "ang": vel[:3].copy(), "R": mjd.xmat[trunk].reshape(3, 3).copy(),
                    "touching": touching})
    return out
