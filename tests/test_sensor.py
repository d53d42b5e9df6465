"""Sensors against MuJoCo's sensordata: every supported type on random states (bodies,
xbodies, geoms and sites, with and without a reference frame, cutoff), every step of a
trajectory (the values of the state each step started from, as after mj_step; RK4 computes them
at the first stage only), `sim.sensor(name)`, both schedules bit for bit, and refusals by name."""

import mujoco
import numpy as np
import pytest
import torch
from test_schedule import assert_same_data, run

from simrl import Sim
from simrl.errors import UnsupportedFeatureError

XML = """
<mujoco>
  <option timestep="0.002" magnetic="0.1 -0.4 0.3"/>
  <worldbody>
    <geom type="plane" size="2 2 0.1"/>
    <body name="torso" pos="0 0 0.6">
      <freejoint/>
      <geom name="tg" type="box" size="0.2 0.1 0.05" pos="0.01 0 0" euler="0 10 0"/>
      <site name="imu" pos="0.05 0.02 0.01" euler="10 20 30"/>
      <body name="leg" pos="0.2 0 0">
        <joint name="hip" type="hinge" axis="0 1 0" range="-1 1"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <site name="foot" pos="0 0 -0.3"/>
        <body name="ball" pos="0 0 -0.3">
          <joint name="bj" type="ball"/>
          <geom size="0.04" pos="0.02 0 0"/>
        </body>
      </body>
    </body>
  </worldbody>
  <actuator><position name="a" joint="hip" kp="20" kv="1"/></actuator>
  <sensor>
    <magnetometer site="imu"/><jointpos joint="hip"/><actuatorpos actuator="a"/><ballquat joint="bj"/>
    <framepos objtype="site" objname="foot"/><framepos objtype="body" objname="leg" reftype="site" refname="imu"/>
    <framexaxis objtype="geom" objname="tg"/><frameyaxis objtype="xbody" objname="ball" reftype="body" refname="torso"/>
    <framezaxis objtype="site" objname="imu"/>
    <framequat objtype="site" objname="imu"/><framequat objtype="body" objname="ball" reftype="geom" refname="tg"/>
    <subtreecom body="leg"/><subtreelinvel body="leg"/><subtreeangmom body="torso"/><subtreeangmom body="world"/>
    <velocimeter site="imu"/><gyro name="gyro" site="imu" cutoff="0.5"/><jointvel joint="hip"/>
    <actuatorvel actuator="a"/>
    <ballangvel joint="bj"/>
    <framelinvel objtype="site" objname="foot"/><frameangvel objtype="body" objname="ball"/>
    <framelinvel objtype="site" objname="foot" reftype="site" refname="imu"/>
    <frameangvel objtype="geom" objname="tg" reftype="xbody" refname="ball"/>
    <accelerometer name="acc" site="imu"/><framelinacc objtype="site" objname="foot"/>
    <frameangacc objtype="body" objname="ball"/>
    <actuatorfrc actuator="a"/><jointactuatorfrc joint="hip"/>
  </sensor>
</mujoco>"""


def model(**options) -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(XML)
    for key, value in options.items():
        setattr(mjm.opt, key, value)
    return mjm


def per_sensor_error(mjm, ours, ref):
    """Largest difference of each sensor's values, relative to max(1, |MuJoCo's|)."""
    out = []
    for i in range(mjm.nsensor):
        a, n = mjm.sensor_adr[i], mjm.sensor_dim[i]
        out.append(np.abs(ours[a:a + n] - ref[a:a + n]).max() / max(1.0, np.abs(ref[a:a + n]).max()))
    return np.array(out)


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-12), ("float32", 1e-4)])
def test_sensordata_matches_mujoco(dtype, tol):
    """Random states and controls: every sensor (measured: float64 <= 2.6e-14, float32
    <= 1.6e-5, frameangacc the largest, through qacc). Negative control: the same comparison
    against the states' neighbours fails."""
    mjm = model()
    rng = np.random.default_rng(0)
    W = 6
    md = mujoco.MjData(mjm)
    states = []
    for _ in range(W):
        md.qpos[:] = mjm.qpos0 + 0.2 * rng.standard_normal(mjm.nq)
        mujoco.mj_normalizeQuat(mjm, md.qpos)
        states.append((md.qpos.copy(), rng.standard_normal(mjm.nv), rng.standard_normal(mjm.nu)))
    sim = Sim.from_model(mjm, num_worlds=W, dtype=dtype)
    for name, k in (("qpos", 0), ("qvel", 1), ("ctrl", 2)):
        setattr(sim, name, torch.as_tensor(np.stack([s[k] for s in states]), dtype=sim.torch_dtype))
    sim.forward()
    assert sim.sensordata.shape == (W, mjm.nsensordata)
    refs = []
    for q, v, c in states:
        md.qpos[:], md.qvel[:], md.ctrl[:] = q, v, c
        mujoco.mj_forward(mjm, md)
        refs.append(md.sensordata.copy())
    for w in range(W):
        err = per_sensor_error(mjm, sim.sensordata[w].numpy(), refs[w])
        worst = int(np.argmax(err))
        kind = mujoco.mjtSensor(mjm.sensor_type[worst]).name
        assert err.max() < tol, f"world {w}: sensor {worst} ({kind}) {err.max():.2e}"
        other = per_sensor_error(mjm, sim.sensordata[w].numpy(), refs[(w + 1) % W])
        assert (other > 1e-2).sum() >= mjm.nsensor - 3
    # the gyro's cutoff of 0.5 clipped some of these velocities
    assert float(sim.sensor("gyro").abs().max()) == pytest.approx(0.5)


@pytest.mark.parametrize("integrator,tol", [(mujoco.mjtIntegrator.mjINT_EULER, 1e-10),
                                           (mujoco.mjtIntegrator.mjINT_RK4, 1e-10)])
def test_sensordata_every_step_of_a_trajectory(integrator, tol):
    """200 steps of the actuated model falling with its hip limit active: after every step,
    sensordata equals MuJoCo's after mj_step (float64; measured: Euler 6.7e-13, RK4 7.3e-13;
    both engines' solvers stop after the same Newton iterations at the same line-search point)."""
    mjm = model(integrator=integrator)
    md = mujoco.MjData(mjm)
    md.ctrl[:] = 0.5
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.set_solver(tolerance=1e-12, iterations=100)
    mjm.opt.tolerance, mjm.opt.iterations = 1e-12, 100
    sim.ctrl = torch.full((1, mjm.nu), 0.5, dtype=torch.float64)
    worst = 0.0
    for _ in range(200):
        mujoco.mj_step(mjm, md)
        sim.step()
        worst = max(worst, per_sensor_error(mjm, sim.sensordata[0].numpy(), md.sensordata).max())
    print(f"max sensor difference {worst:.2e}")
    assert worst < tol, f"max sensor difference {worst:.2e}"


def test_sensor_by_name():
    mjm = model()
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    acc = sim.sensor("acc")
    assert acc.shape == (2, 3)
    # a view into sensordata: the accelerometer's three columns
    i = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, "acc")
    assert acc.data_ptr() == sim.sensordata[:, mjm.sensor_adr[i]:].data_ptr()
    assert float(acc[0].abs().max()) < 1e-9, "free fall: the accelerometer reads nothing"
    with pytest.raises(KeyError, match="no sensor named 'nope'"):
        sim.sensor("nope")


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    mjm = model()
    fused, wide = run(mjm, "fused", dtype, 10), run(mjm, "wide", dtype, 10)
    assert np.abs(fused.sensordata.numpy()).max() > 0
    assert_same_data(fused, wide)


@pytest.mark.parametrize("sensor,message", [
    ('<insidesite site="imu" objtype="site" objname="foot"/>', r"<sensor><insidesite> .*: this sensor type is not "
                                                                r"computed"),
    ('<rangefinder camera="cam"/>', r"<sensor><rangefinder camera=...> .*: a rangefinder on a camera"),
    ('<framepos objtype="camera" objname="cam"/>', r"frame sensors of cameras are not supported"),
    ('<jointpos joint="hip" delay="0.01" nsample="2"/>', r"sensor delay, interval and history are not supported"),
])
def test_unsupported_sensors_are_named(sensor, message):
    xml = XML.replace("<sensor>", "<sensor>" + sensor).replace(
        '<site name="imu"', '<camera name="cam"/><site name="imu"')
    with pytest.raises(UnsupportedFeatureError, match=message):
        Sim.from_model(mujoco.MjModel.from_xml_string(xml))


CONTACT_XML = """
<mujoco>
  <option timestep="0.002" tolerance="1e-12" iterations="200"/>
  <worldbody>
    <geom type="plane" size="3 3 0.1"/>
    <body name="base" pos="0 0 0.45">
      <freejoint/>
      <geom type="box" size="0.2 0.1 0.05"/>
      <body name="leg1" pos="0.15 0 -0.05">
        <joint name="hip1" type="hinge" axis="0 1 0" range="-1 1" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.3" size="0.03"/>
        <site name="hip1" pos="0 0 -0.02" euler="10 20 30"/>
        <body name="foot1" pos="0 0 -0.33">
          <geom type="sphere" size="0.04"/>
          <site name="sole1" type="sphere" size="0.05"/>
        </body>
      </body>
      <body name="leg2" pos="-0.15 0 -0.05">
        <joint name="hip2" type="hinge" axis="0 1 0" range="-1 1" damping="0.5"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.33" size="0.03"/>
        <site name="sole2" type="ellipsoid" pos="0 0 -0.33" size="0.04 0.05 0.04"/>
      </body>
    </body>
    <body name="crate" pos="0.8 0 0.1">
      <freejoint/>
      <geom type="box" size="0.1 0.1 0.1"/>
      <site name="crate_bottom" type="box" pos="0 0 -0.1" size="0.11 0.11 0.02"/>
      <site name="crate_corner" type="cylinder" pos="0.1 0.1 -0.1" size="0.02 0.02"/>
      <site name="crate_top" type="box" pos="0 0 0.1" size="0.1 0.1 0.01"/>
      <site name="crate_side" type="box" pos="0.1 0 0" size="0.01 0.05 0.05"/>
    </body>
    <body name="lid" pos="0.8 0 0.25">
      <freejoint/>
      <geom type="box" size="0.05 0.05 0.05"/>
    </body>
    <body name="rod" pos="-0.8 0 0.05" euler="0 90 0">
      <freejoint/>
      <geom type="capsule" size="0.05 0.2" condim="6" friction="0.8 0.01 0.01"/>
      <site name="rod_skin" type="capsule" size="0.06 0.2"/>
    </body>
  </worldbody>
  <equality>
    <connect body1="lid" body2="crate" anchor="0 0 -0.15"/>
  </equality>
  <actuator>
    <position joint="hip1" kp="30"/>
    <position joint="hip2" kp="30"/>
  </actuator>
  <sensor>
    <touch site="sole1"/>
    <touch site="sole2"/>
    <touch site="crate_bottom"/>
    <touch site="crate_corner"/>
    <touch site="crate_top"/>
    <touch site="rod_skin"/>
    <touch site="crate_side"/>
    <force site="hip1"/>
    <torque site="hip1"/>
    <force site="crate_top"/>
    <torque site="crate_top"/>
    <force site="rod_skin"/>
    <torque site="rod_skin"/>
  </sensor>
</mujoco>"""


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_touch_force_and_torque_match_mujoco(cone):
    """States along MuJoCo's trajectory of a two-legged base, a crate with a lid held on by a
    connect, and a capsule with condim 6, settling on the floor: touch sensors of sphere,
    ellipsoid, box, cylinder and capsule sites, force and torque sensors (cfrc_int with the
    contact and connect forces) equal mj_forward's at the same state (float64, within 1e-8 of
    max(1, |value|); the sensors read the solver's forces). The touch sensor on the crate's bottom
    reads the crate's and the lid's weight, the one on a corner a quarter of it, the one on a side
    that no contact meets 0."""
    mjm = mujoco.MjModel.from_xml_string(CONTACT_XML.replace("<option ", f'<option cone="{cone}" '))
    md = mujoco.MjData(mjm)
    states = []
    for step in range(300):
        md.ctrl[:] = 0.3 * np.sin(0.02 * step + np.arange(mjm.nu))
        mujoco.mj_step(mjm, md)
        if step % 60 == 59:
            states.append((md.qpos.copy(), md.qvel.copy(), md.ctrl.copy()))
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype="float64")
    for name, k in (("qpos", 0), ("qvel", 1), ("ctrl", 2)):
        setattr(sim, name, torch.as_tensor(np.stack([s[k] for s in states])))
    sim.forward()
    for w, (q, v, c) in enumerate(states):
        ref = mujoco.MjData(mjm)
        ref.qpos[:], ref.qvel[:], ref.ctrl[:] = q, v, c
        mujoco.mj_forward(mjm, ref)
        err = per_sensor_error(mjm, sim.sensordata[w].numpy(), ref.sensordata)
        worst = int(np.argmax(err))
        assert err.max() < 1e-8, f"state {w}: sensor {worst} ({mujoco.mjtSensor(mjm.sensor_type[worst]).name}) " \
                                 f"{err.max():.2e}"
    last = sim.sensordata[-1].numpy()
    touch = last[:7]
    assert touch[0] > 0 and touch[1] > 0 and touch[4] > 0 and touch[5] > 0
    weight = (mjm.body_mass[mjm.body("crate").id] + mjm.body_mass[mjm.body("lid").id]) * 9.81
    assert touch[2] == pytest.approx(weight, rel=0.05)
    assert touch[3] == pytest.approx(touch[2] / 4, rel=0.05), "the corner's site meets one of four contacts"
    assert touch[6] == 0, "no contact meets the crate's side"
