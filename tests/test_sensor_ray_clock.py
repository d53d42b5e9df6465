"""The rangefinder, camprojection and clock sensors against MuJoCo's sensordata.

Rangefinders (mj_ray from the site along its z axis): probes on ball joints above targets of
every geom type a ray can meet (sphere, capsule, ellipsoid, cylinder, box, a finite plane, a
tilted height field, the floor), turned at random so that rays hit the target, the floor or
nothing; every data field (dist, dir, origin, point, normal, depth), cutoff, noise (metadata,
not applied), geoms of the site's body and invisible geoms (alpha 0 of their own or of their
material) left out. Which geom MuJoCo's mj_ray meets is counted per type, so that every type is
exercised. camprojection: cameras fixed in a moving body, tracking, tracking the subtree CoM,
looking at a target body or its CoM, with fovy and with intrinsics and sensor size. clock: the
time after steps (Euler and RK4), resets and in diff_step. Both schedules bit for bit, float64
tight, float32 loose; gradients against central differences; refusals by name."""

from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from test_grad_sensor import _assert_close, sensor_gradient_errors
from test_schedule import assert_same_data

from simrl import Sim, diff_step
from simrl.errors import UnsupportedFeatureError
from simrl.sim.types import GeomType

# the targets of the probes, left to right (x = 2 k), each on a hinge but the plane; the probe
# above each
TARGETS = {
    "sphere": 'type="sphere" size=".3" pos="0 .05 0"',
    "capsule": 'type="capsule" size=".2 .3" euler="30 60 0"',
    "ellipsoid": 'type="ellipsoid" size=".4 .2 .3" euler="10 20 30"',
    "cylinder": 'type="cylinder" size=".3 .25" euler="40 0 20"',
    "box": 'type="box" size=".3 .2 .25" euler="20 30 40"',
    "plane": 'type="plane" size=".5 .4 .1" euler="10 -15 0"',
}


def _xml(integrator="Euler") -> str:
    # (a plane must be static: on the world body)
    targets = "".join(
        f'<geom name="{name}" pos="{2 * k} 0 1" {geom}/>' if name == "plane" else
        f'<body name="t_{name}" pos="{2 * k} 0 1"><joint name="t_{name}" axis="{1 + k % 2} {k % 3} 1"/>'
        f'<geom name="{name}" {geom}/><site name="mark_{name}" pos=".1 .2 .3"/></body>'
        for k, (name, geom) in enumerate(TARGETS.items()))
    probes = "".join(
        f'<body name="p_{name}" pos="{2 * k} 0 2.5"><joint name="p_{name}" type="ball"/>'
        f'<geom size=".05" mass="0.1"/><site name="s_{name}" quat="0 1 0 0"/></body>'
        for k, name in enumerate([*TARGETS, "hfield", "ghost"]))
    rays = "".join(f'<rangefinder name="r_{name}" site="s_{name}"/>'
                   f'<rangefinder name="rn_{name}" site="s_{name}" data="point normal"/>'
                   for name in [*TARGETS, "hfield", "ghost"])
    return f"""
<mujoco>
  <option timestep="0.005" gravity="0 0 -2" integrator="{integrator}"/>
  <asset>
    <hfield name="hf" nrow="5" ncol="6" size=".7 .6 .4 .1"
            elevation="0 .2 .5 .3 .1 0  .1 .6 .9 .4 .2 .1  .2 .5 1 .8 .3 0  0 .3 .6 .7 .2 .1  .1 .1 .2 .4 .3 0"/>
    <material name="clear" rgba="1 1 1 0"/>
    <material name="red" rgba="1 0 0 1"/>
  </asset>
  <default><geom contype="0" conaffinity="0"/></default>
  <worldbody>
    <geom name="floor" type="plane" size="30 30 .1"/>
    <geom name="hfield" type="hfield" hfield="hf" pos="12 0 0.8" euler="8 -6 30"/>
    <!-- above the ghost probe's target box: one invisible by rgba, one by its material -->
    <geom name="ghost_rgba" type="box" size=".6 .6 .02" pos="14 0 1.6" rgba="1 0 0 0"/>
    <geom name="ghost_mat" type="box" size=".6 .6 .02" pos="14 0 1.4" material="clear" rgba="1 1 1 1"/>
    <geom name="ghost_target" type="box" size=".5 .5 .1" pos="14 0 1" material="red" rgba="1 1 1 0"/>
    {targets}
    {probes}
    <body name="up" pos="16 0 2"><joint name="up" type="ball"/><geom size=".05"/><site name="s_up"/></body>
    <body name="rig" pos="5 -7 2.5">
      <joint name="rig" type="ball"/><geom size=".1"/>
      <camera name="fixed" pos=".1 .2 .3" xyaxes="1 0 0 0 .3 1" fovy="50" resolution="640 480"/>
      <camera name="track" mode="track" pos=".2 0 0" xyaxes="1 0 0 0 .2 1" fovy="60" resolution="320 200"/>
      <camera name="trackcom" mode="trackcom" xyaxes="1 0 0 0 .2 1" resolution="320 200"/>
      <camera name="target" mode="targetbody" target="t_box" resolution="800 600"/>
      <camera name="targetcom" mode="targetbodycom" target="p_box" resolution="100 80"/>
      <camera name="intrinsic" xyaxes="1 0 0 0 .3 1" resolution="1280 720" sensorsize=".036 .024"
              focal=".03 .035"/>
    </body>
  </worldbody>
  <sensor>
    {rays}
    <rangefinder name="r_all" site="s_box" data="dist dir origin point normal depth"/>
    <rangefinder name="r_all_miss" site="s_up" data="dist dir origin point normal depth"/>
    <rangefinder name="r_cut" site="s_cylinder" cutoff="1.3"/>
    <rangefinder name="r_cut_all" site="s_up" data="dist dir origin point normal depth" cutoff="0.7"/>
    <rangefinder name="r_noise" site="s_capsule" noise="0.3"/>
    <camprojection name="c_fixed" site="mark_box" camera="fixed"/>
    <camprojection name="c_track" site="mark_sphere" camera="track"/>
    <camprojection name="c_trackcom" site="s_ellipsoid" camera="trackcom"/>
    <camprojection name="c_target" site="mark_capsule" camera="target"/>
    <camprojection name="c_targetcom" site="s_plane" camera="targetcom"/>
    <camprojection name="c_intrinsic" site="mark_cylinder" camera="intrinsic" cutoff="2000"/>
    <clock name="clock"/>
    <clock name="clock_cut" cutoff="0.3"/>
  </sensor>
</mujoco>"""


def random_states(mjm, W, seed, tilt=0.6):
    """States with each ball joint turned about a random horizontal-ish axis by up to `tilt`
    radians and the hinges anywhere, random velocities."""
    rng = np.random.default_rng(seed)
    qpos = np.tile(mjm.qpos0, (W, 1))
    for j in range(mjm.njnt):
        adr = mjm.jnt_qposadr[j]
        if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_BALL:
            axis = rng.standard_normal((W, 3))
            axis /= np.linalg.norm(axis, axis=1, keepdims=True)
            angle = rng.uniform(0, tilt, (W, 1))
            qpos[:, adr:adr + 4] = np.concatenate([np.cos(angle / 2), np.sin(angle / 2) * axis], axis=1)
        else:
            qpos[:, adr] = rng.uniform(-np.pi, np.pi, W)
    qvel = rng.standard_normal((W, mjm.nv))
    return qpos, qvel


def mujoco_sensordata(mjm, qpos, qvel):
    """MuJoCo's sensordata after mj_forward at each state, and for every geom type the number
    of rangefinder rays whose nearest geom (mj_ray) is of that type."""
    md = mujoco.MjData(mjm)
    out, hits = [], {}
    for q, v in zip(qpos, qvel, strict=True):
        md.qpos[:], md.qvel[:] = q, v
        mujoco.mj_forward(mjm, md)
        out.append(md.sensordata.copy())
        for i in np.flatnonzero(mjm.sensor_type == mujoco.mjtSensor.mjSENS_RANGEFINDER):
            site = mjm.sensor_objid[i]
            geom = np.zeros(1, dtype=np.int32)
            mujoco.mj_ray(mjm, md, md.site_xpos[site], md.site_xmat[site].reshape(3, 3)[:, 2], None, 1,
                          mjm.site_bodyid[site], geom)
            kind = GeomType(int(mjm.geom_type[geom[0]])).name.lower() if geom[0] >= 0 else "none"
            hits[kind] = hits.get(kind, 0) + 1
    return np.array(out), hits


def forward(mjm, qpos, qvel, dtype="float64", schedule="fused"):
    sim = Sim.from_model(mjm, num_worlds=len(qpos), dtype=dtype, schedule=schedule)
    sim.qpos = torch.as_tensor(qpos, dtype=sim.torch_dtype)
    sim.qvel = torch.as_tensor(qvel, dtype=sim.torch_dtype)
    sim.forward()
    return sim


def errors_by_sensor(mjm, got, ref):
    """The largest |got - ref| / max(1, |ref|) of each sensor, by name."""
    err = np.abs(got - ref) / np.maximum(1.0, np.abs(ref))
    return {mjm.sensor(i).name: float(err[:, a:a + n].max())
            for i, (a, n) in enumerate(zip(mjm.sensor_adr, mjm.sensor_dim, strict=True))}


@pytest.mark.parametrize("dtype,tol", [("float64", 1e-9), ("float32", 2e-3)])
def test_sensors_match_mujoco_at_random_states(dtype, tol):
    """64 random states: every rangefinder, camprojection and clock value within 1e-9 of
    MuJoCo's in float64, within 2e-3 in float32 (relative to values above 1: pixels, metres);
    every geom type met by some ray, some rays missing (dist -1)."""
    mjm = mujoco.MjModel.from_xml_string(_xml())
    qpos, qvel = random_states(mjm, 64, seed=3)
    ref, hits = mujoco_sensordata(mjm, qpos, qvel)
    for kind in ("sphere", "capsule", "ellipsoid", "cylinder", "box", "plane", "hfield", "none"):
        assert hits.get(kind, 0) >= 5, f"too few rays meet a {kind}: {hits}"
    sim = forward(mjm, qpos, qvel, dtype)
    got = sim.sensordata.double().numpy()
    errors = errors_by_sensor(mjm, got, ref)
    bad = {k: v for k, v in errors.items() if not v <= tol}
    assert not bad, bad
    # the misses: -1, and clipped by the cutoff to -0.7; the direction, point, normal zero
    real = sim.sensordata.numpy().dtype.type
    miss = sim.sensor("r_all_miss").numpy()
    np.testing.assert_array_equal(miss[:, 0], -1.0)
    np.testing.assert_array_equal(miss[:, 1:4], 0.0)
    np.testing.assert_array_equal(sim.sensor("r_cut_all").numpy()[:, 0], real(-0.7))
    # the cutoff clips, noise is not applied
    assert (sim.sensor("r_cut").numpy() == real(1.3)).any()
    np.testing.assert_array_equal(sim.sensor("r_noise").numpy(), sim.sensor("r_capsule").numpy())


def test_invisible_geoms_and_the_sites_body_are_left_out():
    """The ghost probe's ray passes through two invisible boxes (alpha 0 of the geom, and of its
    material though the geom's own rgba is opaque) and meets the box below, which is visible by
    its material though its own rgba alpha is 0; each probe's ray starts inside its own body's
    sphere, which it does not see. Negative control: made visible, the first ghost stops the ray."""
    mjm = mujoco.MjModel.from_xml_string(_xml())
    qpos = np.tile(mjm.qpos0, (1, 1))
    sim = forward(mjm, qpos, np.zeros((1, mjm.nv)))
    np.testing.assert_allclose(sim.sensor("r_ghost").numpy(), [[2.5 - 1.1]], atol=1e-12)
    # the sphere of radius .3 at (0, .05, 1): its top above the probe at z = 1 + sqrt(.3^2 - .05^2)
    np.testing.assert_allclose(sim.sensor("r_sphere").numpy(), [[1.5 - np.sqrt(0.3**2 - 0.05**2)]], atol=1e-12)
    visible = mujoco.MjModel.from_xml_string(_xml().replace('rgba="1 0 0 0"', 'rgba="1 0 0 1"'))
    sim = forward(visible, qpos, np.zeros((1, mjm.nv)))
    np.testing.assert_allclose(sim.sensor("r_ghost").numpy(), [[2.5 - 1.62]], atol=1e-12)


@pytest.mark.parametrize("integrator", ["Euler", "RK4"])
def test_clock_after_steps_and_resets(integrator):
    """The clock reads the time the step started from (mj_step's sensors come before the
    integrator advances the time), exactly as MuJoCo after 100 steps in float64 and after a
    reset of one world (its time back to 0); float32 within its rounding of 100 sums."""
    mjm = mujoco.MjModel.from_xml_string(_xml(integrator))
    qpos, qvel = random_states(mjm, 2, seed=5)
    md = mujoco.MjData(mjm)
    md.qpos[:], md.qvel[:] = qpos[0], qvel[0]
    for _ in range(100):
        mujoco.mj_step(mjm, md)
    clock = slice(mjm.sensor_adr[mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, "clock")], None)
    for dtype in ("float64", "float32"):
        sim = forward(mjm, qpos, qvel, dtype)
        sim.step(100)
        exact = dtype == "float64"
        tol = 0 if exact else 1e-5
        np.testing.assert_allclose(sim.time.double().numpy(), [md.time] * 2, rtol=0, atol=tol)
        np.testing.assert_allclose(sim.sensordata[:, clock].double().numpy(),
                                   [md.sensordata[clock]] * 2, rtol=0, atol=tol)
        assert md.sensordata[clock][1] == 0.3  # clipped by its cutoff
        sim.reset([1])
        assert sim.time.tolist() == [pytest.approx(md.time, abs=tol), 0.0]
        sim.step(2)
        np.testing.assert_allclose(sim.sensordata[1, clock].double().numpy(), [0.005, 0.005], atol=tol)


def test_mjx_sensor_model_along_a_trajectory():
    """MJX's sensor test model (tests/data/mjx_sensor.xml: two rangefinders, two camprojections
    and the clock beside every other sensor type, touch sites on capsules that fall onto a plane):
    sensordata of each of 40 steps from random velocities and controls within 1e-7 of MuJoCo's
    (relative to values above 1), the solver's tolerance 1e-12 (the touch sensors read contact
    forces: at the model's 1e-8 they differ by up to 1e-2, the two solvers' stopping points)."""
    mjm = mujoco.MjModel.from_xml_path(str(Path(__file__).parent / "data" / "mjx_sensor.xml"))
    mjm.opt.tolerance, mjm.opt.iterations = 1e-12, 200  # the touch sensors: contact forces to rounding
    rng = np.random.default_rng(13)
    W = 2
    qvel = 0.5 * rng.standard_normal((W, mjm.nv))
    ctrl = rng.uniform(-1, 1, (W, mjm.nu))
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    sim.qvel, sim.ctrl = torch.as_tensor(qvel), torch.as_tensor(ctrl)
    datas = [mujoco.MjData(mjm) for _ in range(W)]
    for md, v, u in zip(datas, qvel, ctrl, strict=True):
        md.qvel[:], md.ctrl[:] = v, u
    worst = {}
    for _ in range(40):
        sim.step()
        for md in datas:
            mujoco.mj_step(mjm, md)
        ref = np.array([md.sensordata for md in datas])
        for name, err in errors_by_sensor(mjm, sim.sensordata.numpy(), ref).items():
            worst[name] = max(worst.get(name, 0.0), err)
    bad = {k: v for k, v in worst.items() if not v <= 1e-7}
    assert not bad, bad
    kinds = {mujoco.mjtSensor(t).name for t in mjm.sensor_type}
    assert {"mjSENS_RANGEFINDER", "mjSENS_CAMPROJECTION", "mjSENS_CLOCK"} <= kinds


def test_mujoco_backends_time():
    """The MuJoCo backend's `time` is each MjData's: advanced by its steps, zeroed by reset."""
    from simrl.mujoco_sim import MujocoSim

    mjm = mujoco.MjModel.from_xml_string(_xml())
    sim = MujocoSim(mjm, num_worlds=2)
    h = 0.005
    sim.step(3)
    assert sim.time.tolist() == [h + h + h] * 2
    assert sim.sensor("clock").tolist() == [[h + h]] * 2
    sim.reset([0])
    assert sim.time.tolist() == [0.0, h + h + h]
    sim.step(1)
    assert sim.sensor("clock").tolist() == [[0.0], [h + h + h]]


def test_wide_equals_fused_bit_for_bit():
    mjm = mujoco.MjModel.from_xml_string(_xml("RK4"))
    qpos, qvel = random_states(mjm, 6, seed=7)
    for dtype in ("float64", "float32"):
        sims = [forward(mjm, qpos, qvel, dtype, schedule) for schedule in ("fused", "wide")]
        for sim in sims:
            sim.step(20)
        assert np.abs(sims[0].sensordata.double().numpy()).max() > 0
        assert_same_data(*sims)


def test_gradients_against_central_differences():
    """diff_step's sensordata equals Sim.step's (the clock too: diff_step starts at sim.time),
    and the gradients of every rangefinder (where its ray meets a geom: distance, point and
    normal through the site's and the target's poses; height field triangles and sides
    included) and every camprojection within 1e-6 of central differences; the clock has none."""
    mjm = mujoco.MjModel.from_xml_string(_xml())
    qpos, qvel = random_states(mjm, 4, seed=11, tilt=0.3)
    errors = sensor_gradient_errors(mjm, qpos, qvel, np.zeros((4, 0)), substeps=1)
    _assert_close(mjm, errors, 1e-6)
    named = {mjm.sensor(i).name: e for i, e in errors.items()}
    assert named["r_hfield"][1] > 0 and named["r_box"][1] > 0 and named["c_fixed"][1] > 0
    assert named["clock"][1] == 0


def _sensor_gradients(mjm, schedule, qpos, qvel):
    sim = Sim.from_model(mjm, num_worlds=len(qpos), dtype="float64", schedule=schedule)
    q, v = torch.tensor(qpos, requires_grad=True), torch.tensor(qvel, requires_grad=True)
    *_, sd = diff_step(sim, q, v, torch.zeros(len(qpos), 0, dtype=torch.float64), sensors=True)
    weights = torch.as_tensor(np.random.default_rng(2).standard_normal(tuple(sd.shape)))
    (sd * weights).sum().backward()
    return sd.detach(), q.grad, v.grad


def test_wide_diff_step_equals_fused():
    """diff_step's sensordata in both schedules bit for bit, and its gradients within 1e-12 (the
    adjoints of shared reads accumulate in another order), the height fields' search off the
    tape in both."""
    mjm = mujoco.MjModel.from_xml_string(_xml())
    qpos, qvel = random_states(mjm, 4, seed=17, tilt=0.3)
    fused, wide = _sensor_gradients(mjm, "fused", qpos, qvel), _sensor_gradients(mjm, "wide", qpos, qvel)
    assert torch.equal(fused[0], wide[0])
    assert fused[1].abs().max() > 0  # (these sensors read positions only: qvel's gradient is zero)
    for a, b in zip(fused[1:], wide[1:], strict=True):
        assert ((a - b).abs().max() / a.abs().max().clamp_min(1e-300)).item() <= 1e-12


def test_diff_step_clock_follows_the_sims_time():
    mjm = mujoco.MjModel.from_xml_string(_xml())
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    sim.step(7)
    out = diff_step(sim, sim.qpos.clone(), sim.qvel.clone(), sim.ctrl.clone(), substeps=3, sensors=True)
    clock = mjm.sensor_adr[mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, "clock")]
    md = mujoco.MjData(mjm)
    for _ in range(7 + 2):
        mujoco.mj_step(mjm, md)
    assert out[-1][:, clock].tolist() == [md.time] * 2


@pytest.mark.parametrize("xml,message", [
    ('<mujoco><worldbody><body><freejoint/><geom size=".1"/><camera name="c" resolution="4 3"/></body>'
     '</worldbody><sensor><rangefinder name="r" camera="c"/></sensor></mujoco>',
     r"<sensor><rangefinder camera=...> 'r': a rangefinder on a camera"),
    ('<mujoco><asset><mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset><worldbody>'
     '<geom name="tet" type="mesh" mesh="m"/><body><freejoint/><geom size=".1"/><site name="s"/></body>'
     '</worldbody><sensor><rangefinder name="r" site="s"/></sensor></mujoco>',
     r"<sensor><rangefinder> 'r': its ray can meet mesh geom 'tet'"),
])
def test_refusals_are_named(xml, message):
    with pytest.raises(UnsupportedFeatureError, match=message):
        Sim.from_model(mujoco.MjModel.from_xml_string(xml))


def test_an_invisible_mesh_is_accepted():
    """The mesh refusal's negative control: a mesh no ray can see (alpha 0) does not refuse the
    rangefinder, whose ray then meets the floor."""
    xml = ('<mujoco><asset><mesh name="m" vertex="0 0 0 1 0 0 0 1 0 0 0 1"/></asset><worldbody>'
           '<geom type="plane" size="5 5 .1"/><geom name="tet" type="mesh" mesh="m" rgba="1 1 1 0"/>'
           '<body pos="0 0 2"><freejoint/><geom size=".1"/><site name="s" quat="0 1 0 0"/></body>'
           '</worldbody><sensor><rangefinder name="r" site="s"/></sensor></mujoco>')
    sim = Sim.from_model(mujoco.MjModel.from_xml_string(xml), dtype="float64")
    np.testing.assert_allclose(sim.sensor("r").numpy(), [[2.0]], atol=1e-12)
