"""Gradients of the sensors `simrl.diff_step(..., sensors=True)` returns, sensor by sensor,
against central finite differences of the same call (float64), and its sensordata against
`Sim.step`'s. Models: every smooth sensor type (test_sensor's model, Euler, implicitfast and RK4,
and a joint limit beyond its range); touch, force and torque with contacts and a connect
(test_sensor's contact model); the contact sensor's fields and reductions (test_contact_sensor's
scene). States are chosen away from the sensors' kinks (no contact appears or leaves, no limit or
cutoff switches within the finite-difference step)."""

import mujoco
import numpy as np
import pytest
import torch
from test_contact_sensor import XML as CONTACT_SENSOR_XML
from test_sensor import CONTACT_XML
from test_sensor import XML as SENSOR_XML

from simrl import Sim, diff_step

EPS = 1e-6


def _step(sim, qpos, qvel, ctrl, mass, substeps, requires_grad=False):
    args = [torch.tensor(x, dtype=torch.float64, requires_grad=requires_grad) for x in (qpos, qvel, ctrl, mass)]
    out = diff_step(sim, *args[:3], {"body_mass": args[3]}, substeps=substeps, sensors=True)
    return args, out[-1]


def sensor_gradient_errors(mjm, qpos, qvel, ctrl, substeps=1, seed=0, eps=EPS):
    """Per sensor: the relative difference between diff_step's gradient of a random weighting of
    its values (with respect to qpos0, qvel0, ctrl and body_mass) and central differences, and
    the size of the finite-difference gradient. Also checks the values against Sim.step's."""
    W = len(qpos)
    sim = Sim.from_model(mjm, num_worlds=W, dtype="float64")
    mass = np.tile(mjm.body_mass, (W, 1))
    base = [np.asarray(x, dtype=np.float64) for x in (qpos, qvel, ctrl, mass)]
    # the values: Sim.step's sensordata from the same state
    with torch.no_grad():
        _, sd = _step(sim, *base, substeps)
    sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in base[:3])
    sim.step(substeps)
    scale = np.maximum(1.0, np.abs(sim.sensordata.numpy()))
    diff = np.abs(sd.numpy() - sim.sensordata.numpy()) / scale
    assert diff.max() < 1e-10, f"sensordata differs from Sim.step's by {diff.max():.2e}"
    # finite differences: one column of every world at a time (the worlds are independent)
    jac = []  # per input: [n, W, nsensordata]
    for k, x in enumerate(base):
        cols = []
        for c in range(x.shape[1]):
            values = []
            for sign in (1, -1):
                pert = [y.copy() for y in base]
                pert[k][:, c] += sign * eps
                with torch.no_grad():
                    values.append(_step(sim, *pert, substeps)[1].numpy())
            cols.append((values[0] - values[1]) / (2 * eps))
        jac.append(np.stack(cols) if cols else np.zeros((0, W, mjm.nsensordata)))
    rng = np.random.default_rng(seed)
    out = {}
    for i in range(mjm.nsensor):
        a, n = mjm.sensor_adr[i], mjm.sensor_dim[i]
        r = rng.standard_normal((W, n))
        args, sd = _step(sim, *base, substeps, requires_grad=True)
        (sd[:, a:a + n] * torch.as_tensor(r)).sum().backward()
        ad = np.concatenate([g.grad.numpy().ravel() for g in args])
        fd = np.concatenate([np.einsum("cwj,wj->wc", J[:, :, a:a + n], r).ravel() for J in jac])
        out[i] = (np.linalg.norm(ad - fd) / max(np.linalg.norm(fd), 1e-300), np.linalg.norm(fd),
                  np.linalg.norm(ad))
    return out


def _assert_close(mjm, errors, tol):
    bad = {}
    floor = 1e-9 * max(fd for _, fd, _ in errors.values())
    for i, (rel, fd, ad) in errors.items():
        name = f"{mujoco.mjtSensor(mjm.sensor_type[i]).name.removeprefix('mjSENS_').lower()} {mjm.sensor(i).name}"
        if fd < floor:  # a sensor with no gradient here (a count, a free body's cfrc_int, no contacts)
            if ad > floor:
                bad[f"{i} {name}"] = f"fd 0, ad {ad:.2e}"
        elif rel > tol:
            bad[f"{i} {name}"] = f"{rel:.2e} (|fd| {fd:.2e})"
    assert not bad, bad


def _random_states(mjm, W, seed, spread=0.2):
    rng = np.random.default_rng(seed)
    md = mujoco.MjData(mjm)
    qpos, qvel, ctrl = [], [], []
    for _ in range(W):
        md.qpos[:] = mjm.qpos0 + spread * rng.standard_normal(mjm.nq)
        mujoco.mj_normalizeQuat(mjm, md.qpos)
        qpos.append(md.qpos.copy())
        qvel.append(rng.standard_normal(mjm.nv))
        ctrl.append(rng.uniform(-0.5, 0.5, mjm.nu))
    return np.array(qpos), np.array(qvel), np.array(ctrl)


@pytest.mark.parametrize("integrator", ["Euler", "implicitfast", "RK4"])
def test_smooth_sensor_gradients(integrator):
    """Every position, velocity and acceleration sensor of test_sensor's model (frames of bodies,
    geoms and sites with and without a reference, subtree momenta, IMU, actuator and joint
    sensors, the gyro's cutoff), two worlds in the air, one with the hip beyond its limit (a
    limit row in the solver: the accelerations read the constrained qacc), two substeps: within
    1e-6 of central differences (measured: <= 5.8e-9, frameangacc, ballangvel and jointvel the
    largest)."""
    xml = SENSOR_XML.replace('<option timestep="0.002"', f'<option timestep="0.002" integrator="{integrator}"')
    mjm = mujoco.MjModel.from_xml_string(xml)
    qpos, qvel, ctrl = _random_states(mjm, 2, seed=1)
    qpos[:, 2] = 1.0  # in the air
    qpos[1, 7] = 1.2  # the hip beyond its range of +-1
    errors = sensor_gradient_errors(mjm, qpos, qvel, ctrl, substeps=2)
    _assert_close(mjm, errors, 1e-6)


def _trajectory_states(mjm, steps):
    """MuJoCo's states at `steps` of a trajectory from the model's initial state (the actuators
    swaying)."""
    md = mujoco.MjData(mjm)
    states = []
    for step in range(max(steps) + 1):
        if mjm.nu:
            md.ctrl[:] = 0.3 * np.sin(0.02 * step + np.arange(mjm.nu))
        mujoco.mj_step(mjm, md)
        if step in steps:
            states.append((md.qpos.copy(), md.qvel.copy(), md.ctrl.copy()))
    return (np.array([s[k] for s in states]) for k in range(3))


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_touch_force_and_torque_gradients(cone):
    """Touch sensors of five site shapes, force and torque sensors (cfrc_int with contact and
    connect forces) on test_sensor's contact model settling on the floor, 12 contacts: their
    values equal Sim.step's (this failed before diff_step honoured eq_active: the connect was
    off), gradients within 5e-5 of central differences with a step of 1e-5 (measured: <= 8.6e-6;
    smaller steps meet the solver's tolerance: 1e-7 gives 3e-3, the differences' noise)."""
    mjm = mujoco.MjModel.from_xml_string(CONTACT_XML.replace("<option ", f'<option cone="{cone}" '))
    qpos, qvel, ctrl = _trajectory_states(mjm, (79, 159, 239))
    errors = sensor_gradient_errors(mjm, qpos, qvel, ctrl, eps=1e-5)
    _assert_close(mjm, errors, 5e-5)


@pytest.mark.parametrize("cone", ["pyramidal", "elliptic"])
def test_contact_sensor_gradients(cone):
    """test_contact_sensor's scene as the crate lands (7 contacts, the keys of the sorted
    reductions apart): every contact sensor's force, torque, dist, pos, normal, tangent and
    velocities, reductions none, mindist, maxforce and netforce, site and geom matching, within
    1e-6 of central differences (measured: <= 6.4e-8); `found` and the sensors without a match
    have no gradient."""
    mjm = mujoco.MjModel.from_xml_string(CONTACT_SENSOR_XML.replace("<option ", f'<option cone="{cone}" '))
    qpos, qvel, ctrl = _trajectory_states(mjm, (42, 49, 56))
    errors = sensor_gradient_errors(mjm, qpos, qvel, ctrl, eps=1e-5)
    _assert_close(mjm, errors, 1e-6)


def test_sensors_argument_is_checked():
    mjm = mujoco.MjModel.from_xml_string(SENSOR_XML)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    with pytest.raises(TypeError, match="sensors must be True or False"):
        diff_step(sim, sim.qpos, sim.qvel, sim.ctrl, sensors="yes")
    bare = Sim.from_model(mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/>"
                                                         "</body></worldbody></mujoco>"), num_worlds=1,
                       dtype="float64")
    with pytest.raises(ValueError, match="defines no sensors"):
        diff_step(bare, bare.qpos, bare.qvel, bare.ctrl, sensors=True)
