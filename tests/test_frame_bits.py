"""Poses with MuJoCo's bits: the quaternion helpers against mujoco.mju_*, forward kinematics'
frames against mj_forward's, and the contacts of geoms resting exactly on a plane.

A geom lying on a plane is touching at a distance of about 1e-17, negative or not by the last
bit of its pose: with other bits than MuJoCo's a contact appears or disappears (MuJoCo Warp's
humanoid/n_humanoid.xml: 22 contacts instead of 24). So the frames are compared bit for bit.
"""

import functools
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from conftest import random_states

from simrl import Sim
from simrl.sim.types import scalar_types

DATA = Path(__file__).parent / "data"
FRAMES = ("xpos", "xmat", "xipos", "ximat", "geom_xpos", "geom_xmat", "site_xpos", "site_xmat")

# frames within 1e-6 of their body's or inertial frame (MuJoCo then copies that frame:
# geom_sameframe, site_sameframe), a ball joint, a slide joint, a body turned off the identity
SAMEFRAME_XML = """
<mujoco>
  <worldbody>
    <geom type="plane" size="5 5 .1"/>
    <body pos=".1 .2 .9" quat="0.9 0.1 -0.3 0.2">
      <joint type="ball"/>
      <inertial pos=".05 .02 .01" quat="0.8 0.2 0.1 -0.3" mass="1" diaginertia=".01 .02 .03"/>
      <geom type="capsule" pos=".05 .02 .0100003" quat="0.8 0.2 0.1 -0.3" size=".05 .1"/>
      <geom type="box" pos=".1 .1 .1" quat="0.8 0.2 0.1 -0.3" size=".05 .04 .03"/>
      <geom type="sphere" pos="4e-7 -3e-7 2e-7" size=".04"/>
      <geom type="box" pos=".1 0 0" quat="1 3e-7 -2e-7 1e-7" size=".05 .04 .03"/>
      <site pos="-2e-7 1e-7 0" quat="-1 1e-7 0 0"/>
      <site pos=".05 .02 .01" quat="0.8 0.2 0.1 -0.3000004"/>
      <body pos="-.1 .2 .1" euler="-20 10 5">
        <joint type="hinge" axis="1 0 0"/>
        <inertial pos="3e-7 0 -2e-7" quat="1 0 2e-7 0" mass=".5" diaginertia=".01 .01 .01"/>
        <geom type="sphere" size=".02"/>
      </body>
      <body pos=".3 .1 -.2" euler="10 20 30">
        <joint type="slide" axis="1 1 0"/>
        <joint type="hinge" axis="0 1 1" pos=".01 .02 .03"/>
        <geom type="ellipsoid" size=".06 .05 .04" pos=".02 .03 .01" euler="5 -7 11"/>
        <geom type="cylinder" fromto="0 0 0 .1 .2 .3" size=".03"/>
      </body>
    </body>
  </worldbody>
</mujoco>
"""


@functools.cache
def _helpers_kernel():
    T = scalar_types(wp.float64)
    f = T.f

    @wp.kernel(enable_backward=False)
    def helpers(a: wp.array(dtype=T.quat), b: wp.array(dtype=T.quat), v: wp.array(dtype=T.vec3),
                mul: wp.array(dtype=T.quat), mat: wp.array(dtype=T.mat33), rot: wp.array(dtype=T.vec3),
                unit: wp.array(dtype=T.quat)):
        i = wp.tid()
        mul[i] = f.quat_mul(a[i], b[i])
        mat[i] = f.quat_to_mat(a[i])
        rot[i] = f.rot_vec_quat(v[i], a[i])
        unit[i] = f.quat_normalize(b[i])

    return helpers, T


def _xyzw(q):
    return np.asarray(q)[..., [1, 2, 3, 0]]


def _wxyz(q):
    return np.asarray(q)[..., [3, 0, 1, 2]]


def test_quaternion_helpers_have_mujocos_bits():
    """quat_mul, quat_to_mat, rot_vec_quat, quat_normalize equal the installed mju_mulQuat,
    mju_quat2Mat, mju_rotVecQuat, mju_normalize4 bit for bit, on random inputs (the normalize's
    inputs not unit, some within mjMINVAL of unit, one below mjMINVAL)."""
    rng = np.random.default_rng(3)
    n = 512
    a = rng.normal(size=(n, 4))
    a /= np.linalg.norm(a, axis=1, keepdims=True)
    b = rng.normal(size=(n, 4)) * 2
    b[: n // 8] = a[: n // 8]
    b[n // 8] = 1e-17
    v = rng.normal(size=(n, 3))
    helpers, T = _helpers_kernel()
    args = [wp.array(_xyzw(a), dtype=T.quat, device="cpu"), wp.array(_xyzw(b), dtype=T.quat, device="cpu"),
            wp.array(v, dtype=T.vec3, device="cpu")]
    outs = [wp.zeros(n, dtype=t, device="cpu") for t in (T.quat, T.mat33, T.vec3, T.quat)]
    wp.launch(helpers, n, inputs=args, outputs=outs, device="cpu")
    mul, mat, rot, unit = (o.numpy() for o in outs)
    want = {"mul": np.zeros((n, 4)), "mat": np.zeros((n, 9)), "rot": np.zeros((n, 3)), "unit": b.copy()}
    for i in range(n):
        mujoco.mju_mulQuat(want["mul"][i], a[i], b[i])
        mujoco.mju_quat2Mat(want["mat"][i], a[i])
        mujoco.mju_rotVecQuat(want["rot"][i], v[i], a[i])
        mujoco.mju_normalize4(want["unit"][i])
    np.testing.assert_array_equal(_wxyz(mul), want["mul"])
    np.testing.assert_array_equal(mat.reshape(n, 9), want["mat"])
    np.testing.assert_array_equal(rot, want["rot"])
    np.testing.assert_array_equal(_wxyz(unit), want["unit"])
    # negative control: the source's left-to-right sum (and Warp's product) differ in some last bits
    warp_mul = np.array([[p[0] * q[0] - p[1] * q[1] - p[2] * q[2] - p[3] * q[3]] for p, q in zip(a, b, strict=True)])
    assert np.any(warp_mul[:, 0] != want["mul"][:, 0])


def _set_state(sim: Sim, mds) -> None:
    sim.qpos = torch.as_tensor(np.stack([md.qpos for md in mds]), dtype=torch.float64)
    sim.qvel = torch.as_tensor(np.stack([md.qvel for md in mds]), dtype=torch.float64)


@pytest.mark.parametrize("schedule", ["fused", "wide"])
@pytest.mark.parametrize("model", ["resting_on_plane", "sameframe"])
def test_frames_have_mujocos_bits(model, schedule):
    """Every body, inertial, geom and site frame after sim.forward equals mj_forward's bit for bit,
    at qpos0 and at random states, including frames MuJoCo copies from the body's or its inertial
    frame because the compiler found them within 1e-6 (mjSAMEFRAME_*)."""
    if model == "sameframe":
        mjm = mujoco.MjModel.from_xml_string(SAMEFRAME_XML)
        copied = set(mjm.geom_sameframe.tolist()) | set(mjm.site_sameframe.tolist())
        # the model exercises the copies it is meant to
        assert copied == {0, 1, 2, 3, 4} and 1 in mjm.body_sameframe[1:], copied
    else:
        mjm = mujoco.MjModel.from_xml_path(str(DATA / f"{model}.xml"))
    qpos, qvel, _ = random_states(mjm, 4, np.random.default_rng(5))
    qpos[0], qvel[0] = mjm.qpos0, 0.0
    mds = []
    for i in range(len(qpos)):
        md = mujoco.MjData(mjm)
        md.qpos[:], md.qvel[:] = qpos[i], qvel[i]
        mujoco.mj_forward(mjm, md)
        mds.append(md)
    sim = Sim.from_model(mjm, num_worlds=len(mds), dtype="float64", device="cpu", schedule=schedule)
    _set_state(sim, mds)
    sim.forward()
    for name in FRAMES:
        want = np.stack([getattr(md, name) for md in mds])
        if want.size:
            got = sim.view(name).numpy().reshape(want.shape)
            np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.parametrize("schedule", ["fused", "wide"])
def test_resting_geoms_touch_the_plane_as_in_mujoco(schedule):
    """Capsules, spheres, boxes, cylinders and ellipsoids lying on the floor in turned bodies:
    sim.forward finds MuJoCo's contacts, their number and distances bit for bit (distances of
    about -3e-17: each contact exists by the last bit of the geom's pose)."""
    mjm = mujoco.MjModel.from_xml_path(str(DATA / "resting_on_plane.xml"))
    md = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, md)
    kinds = {int(mjm.geom_type[g]) for g in md.contact.geom2[: md.ncon]}
    assert len(kinds) == 5 and np.abs(md.contact.dist[: md.ncon]).max() < 1e-15  # the edge case is exercised
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu", schedule=schedule)
    _set_state(sim, [md])
    sim.forward()
    c = sim.contact
    active = c.active[0].numpy()
    got = sorted(zip(c.geom[0].numpy()[active, 1].tolist(), c.dist[0].numpy()[active].tolist(), strict=True))
    want = sorted(zip(md.contact.geom2[: md.ncon].tolist(), md.contact.dist[: md.ncon].tolist(), strict=True))
    assert got == want
    np.testing.assert_allclose(sim.qacc[0].numpy(), md.qacc, rtol=1e-9, atol=1e-9)
