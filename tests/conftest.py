import os
from pathlib import Path

# One torch thread per test process (and its subprocesses): on a 2-core machine, torch's
# two-thread OpenMP loops slow to a crawl (20x measured) whenever another process holds a core.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium
import mujoco
import numpy as np
import pytest
import torch

torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))

GYM_ASSETS = Path(os.path.dirname(gymnasium.__file__)) / "envs" / "mujoco" / "assets"

NO_CONSTRAINTS = int(mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT)


def without_constraints(mjm: mujoco.MjModel) -> mujoco.MjModel:
    """The model with contacts and every constraint row disabled (the engine has none yet)."""
    mjm.opt.disableflags |= NO_CONSTRAINTS
    return mjm


def quaternion_slices(mjm: mujoco.MjModel):
    """qpos slices that hold quaternions (free and ball joints)."""
    out = []
    for j in range(mjm.njnt):
        t = int(mjm.jnt_type[j])
        if t in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            adr = mjm.jnt_qposadr[j] + (3 if t == mujoco.mjtJoint.mjJNT_FREE else 0)
            out.append(slice(adr, adr + 4))
    return out


def axis_angle_quat(axis, angle):
    """Unit quaternion (w, x, y, z) of a rotation by `angle` about `axis`."""
    axis = np.asarray(axis, float) / np.linalg.norm(axis)
    return np.concatenate([[np.cos(angle / 2)], np.sin(angle / 2) * axis])


def quat_mul(a, b):
    """Hamilton product of quaternions (w, x, y, z)."""
    w1, x1, y1, z1 = a
    w2, x2, y2, z2 = b
    return np.array([w1 * w2 - x1 * x2 - y1 * y2 - z1 * z2, w1 * x2 + x1 * w2 + y1 * z2 - z1 * y2,
                     w1 * y2 - x1 * z2 + y1 * w2 + z1 * x2, w1 * z2 + x1 * y2 - y1 * x2 + z1 * w2])


def random_states(mjm: mujoco.MjModel, n: int, rng: np.random.Generator):
    """n random (qpos, qvel, ctrl): qpos0 plus noise with unit quaternions, controls drawn
    from (a little beyond) ctrlrange so clamping is exercised."""
    qpos = np.tile(mjm.qpos0, (n, 1)) + rng.normal(0.0, 0.4, (n, mjm.nq))
    for s in quaternion_slices(mjm):
        qpos[:, s] /= np.linalg.norm(qpos[:, s], axis=1, keepdims=True)
    qvel = rng.normal(0.0, 1.0, (n, mjm.nv))
    ctrl = random_ctrl(mjm, n, rng)
    return qpos, qvel, ctrl


def assert_qacc_matches_mujoco(sim, mjm: mujoco.MjModel, control: mujoco.MjModel, states, tol: float):
    """sim.qacc of world w within `tol` (relative to max(1, |qacc|)) of mj_forward's for states
    (qpos, qvel, ctrl)[w], and more than 100 tol from the `control` model's (the feature under test
    removed from it), so that the comparison could fail."""
    for w in range(len(states[0])):
        qacc = []
        for m in (mjm, control):
            md = mujoco.MjData(m)
            md.qpos[:], md.qvel[:], md.ctrl[:] = (x[w] for x in states)
            mujoco.mj_forward(m, md)
            qacc.append(md.qacc.copy())
        scale = max(1.0, np.abs(qacc[0]).max())
        assert np.abs(sim.qacc[w].numpy() - qacc[0]).max() / scale < tol
        assert np.abs(sim.qacc[w].numpy() - qacc[1]).max() / scale > 100 * tol


def random_ctrl(mjm: mujoco.MjModel, n: int, rng: np.random.Generator):
    lo = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1.0)
    span = hi - lo
    return rng.uniform(lo - 0.1 * span, hi + 0.1 * span, (n, mjm.nu))


def qpos_distance(mjm: mujoco.MjModel, a: np.ndarray, b: np.ndarray) -> float:
    """max |a - b| over qpos, with each quaternion compared up to sign."""
    dif = np.abs(a - b)
    for s in quaternion_slices(mjm):
        dif[..., s] = np.minimum(np.abs(a[..., s] - b[..., s]), np.abs(a[..., s] + b[..., s]))
    return float(dif.max())


@pytest.fixture
def rng():
    """A fresh generator with a fixed seed for every test: results do not depend on test order."""
    return np.random.default_rng(12345)
