"""The contact sensor (`<sensor><contact>`, mjSENS_CONTACT) against MuJoCo 4.0's sensordata: every
step of trajectories with box, sphere and capsule contacts on a plane and on each other (an
explicit <pair>, condim 1, 3 and 6, both friction cones); the matching rules (geom, body, subtree,
site, and pairs of them, with the normal flipped when the sensor's first object is the contact's
second), every data field (found, force, torque, dist, pos, normal, tangent, linvel, angvel), every
reduction (none, mindist, maxforce, netforce), more slots than contacts (zero padding), the ignored
cutoff; mjData.contact's order with and without the midphase; float32; both schedules bit for bit;
MujocoSim's own sensordata."""

import mujoco
import numpy as np
import pytest
import torch
from test_schedule import assert_same_data, run

from simrl import Sim
from simrl.mujoco_sim import MujocoSim
from simrl.sim.sensor import REDUCE_NETFORCE
from simrl.sim.types import ConDataField, SensorType

# a crate (box and sphere, an arm on a hinge) with a lid, a ball held off the floor by an explicit
# frictionless <pair>, a capsule with condim 6 and a site around it
XML = """
<mujoco>
  <option timestep="0.002" tolerance="1e-12" iterations="100"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="crate" pos="0 0 0.13">
      <freejoint/>
      <geom name="crate_box" type="box" size="0.1 0.1 0.1" euler="3 4 0"/>
      <geom name="crate_ball" type="sphere" size="0.05" pos="0.2 0 -0.06"/>
      <site name="crate_bottom" type="box" size="0.3 0.3 0.03" pos="0 0 -0.1"/>
      <body name="arm" pos="-0.1 0 0.05">
        <joint name="hinge" type="hinge" axis="0 1 0" range="-1.5 1.5"/>
        <geom name="arm" type="capsule" fromto="0 0 0 -0.25 0 0" size="0.03"/>
      </body>
    </body>
    <body name="lid" pos="0.02 0.01 0.3">
      <freejoint/>
      <geom name="lid" type="box" size="0.05 0.06 0.04"/>
    </body>
    <body name="ball" pos="0.35 0.02 0.3">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.05"/>
    </body>
    <body name="rod" pos="-0.6 0.3 0.2" euler="0 80 20">
      <freejoint/>
      <geom name="rod" type="capsule" size="0.04 0.2" condim="6" friction="0.8 0.01 0.01"/>
      <site name="rod_skin" type="capsule" size="0.05 0.2"/>
    </body>
  </worldbody>
  <contact><pair geom1="ball" geom2="floor" condim="1"/></contact>
  <sensor>
    <contact name="all" num="24" data="found force torque dist pos normal tangent linvel angvel"/>
    <contact name="floor_second" geom2="floor" num="6" data="found force normal linvel"/>
    <contact name="crate" body1="crate" num="4" data="found force torque pos normal"/>
    <contact name="crate_tree_mindist" subtree1="crate" reduce="mindist" num="3" data="found dist pos normal"/>
    <contact name="lid_on_crate_maxforce" body1="lid" body2="crate" reduce="maxforce" num="2"
             data="found force torque normal tangent"/>
    <contact name="floor_to_tree" geom1="floor" subtree2="crate" num="3" data="found force normal tangent"/>
    <contact name="tree_netforce" subtree1="crate" reduce="netforce"
             data="found force torque dist pos normal tangent"/>
    <contact name="never_netforce" body1="rod" body2="lid" reduce="netforce" data="found force pos normal"/>
    <contact name="bottom" site="crate_bottom" num="5" data="found force pos"/>
    <contact name="bottom_floor" site="crate_bottom" geom2="floor" num="5" data="found normal"/>
    <contact name="skin_maxforce" site="rod_skin" reduce="maxforce" num="2" data="found force torque" cutoff="1"/>
    <contact name="ball" geom1="ball" num="2" data="found force dist angvel"/>
  </sensor>
</mujoco>"""


def columns(mjm: mujoco.MjModel):
    """Masks over sensordata: the contact sensors' `found` columns, and the columns that depend on
    the solver's forces (force, torque; netforce's centroid); the rest are geometry and velocities."""
    found = np.zeros(mjm.nsensordata, bool)
    forces = np.zeros(mjm.nsensordata, bool)
    for i in range(mjm.nsensor):
        assert mjm.sensor_type[i] == SensorType.CONTACT
        spec, reduce = int(mjm.sensor_intprm[i, 0]), int(mjm.sensor_intprm[i, 1])
        sizes = [1, 3, 3, 1, 3, 3, 3, 3, 3]
        fields = [k for k in range(9) if spec & (1 << k)]
        size = sum(sizes[k] for k in fields)
        for slot in range(mjm.sensor_dim[i] // size):
            a = mjm.sensor_adr[i] + slot * size
            for k in fields:
                if k == ConDataField.FOUND:
                    found[a] = True
                elif (k in (ConDataField.FORCE, ConDataField.TORQUE)
                      or (reduce == REDUCE_NETFORCE and k > ConDataField.DIST)):
                    forces[a:a + sizes[k]] = True
                a += sizes[k]
    return found, forces


def errors(mjm, ours, ref):
    """(found differs, largest force error, largest other error), relative to max(1, |MuJoCo's|)."""
    found, forces = columns(mjm)
    err = np.abs(ours - ref) / np.maximum(1.0, np.abs(ref))
    return bool(np.any(ours[found] != ref[found])), err[forces].max(), err[~found & ~forces].max()


def sensor(mjm, data, name):
    i = mjm.sensor(name).id
    return data[mjm.sensor_adr[i]:mjm.sensor_adr[i] + mjm.sensor_dim[i]]


def test_contact_sensors_every_step_of_a_trajectory():
    """200 steps of the scene settling (pyramidal cone): after every step, every contact sensor
    equals MuJoCo's sensordata after mj_step (float64; found exactly, forces within 1e-9 of
    max(1, |value|), the rest within 1e-10; measured: 8e-13 and 5e-15). Each sensor matched
    something (but the one whose bodies never touch, which stays zero: netforce without matches);
    the sensor of every contact has more slots than contacts; the normal of `geom2="floor"` points
    down (flipped), that of `geom1="floor"` up."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.set_solver(tolerance=1e-12, iterations=100)
    worst = np.zeros(2)
    matched = np.zeros(mjm.nsensor, int)
    for step in range(200):
        mujoco.mj_step(mjm, md)
        sim.step()
        ours = sim.sensordata[0].numpy()
        found, force_err, other_err = errors(mjm, ours, md.sensordata)
        assert not found, f"step {step}: the number of matches differs"
        worst = np.maximum(worst, (force_err, other_err))
        matched += [sensor(mjm, md.sensordata, mjm.sensor(i).name)[0] > 0 for i in range(mjm.nsensor)]
    assert worst[0] < 1e-9 and worst[1] < 1e-10, f"largest differences: forces {worst[0]:.2e}, others {worst[1]:.2e}"
    never = mjm.sensor("never_netforce").id
    assert matched[never] == 0 and np.all(np.delete(matched, never) > 0), matched
    assert np.all(sensor(mjm, ours, "never_netforce") == 0)
    allc = sensor(mjm, ours, "all").reshape(24, -1)
    n = int(allc[0, 0])
    assert 5 < n < 24 and np.all(allc[n:] == 0) and np.all(allc[:n, 0] == n)
    second = sensor(mjm, ours, "floor_second").reshape(6, -1)
    assert second[0, 0] > 0 and np.allclose(second[:int(second[0, 0]), 4:7], [0, 0, -1])
    first = sensor(mjm, ours, "floor_to_tree").reshape(3, -1)
    assert first[0, 0] > 0 and np.allclose(first[:int(min(3, first[0, 0])), 4:7], [0, 0, 1])


def test_contact_sensors_with_the_elliptic_cone():
    """Every 10th state of MuJoCo's trajectory with the elliptic cone, one world each: mj_forward's
    contact sensors, both solvers run to convergence (MuJoCo's tolerance 0: until a Newton step
    gains nothing; simrl's 1e-16); float64; found exactly, forces within 1e-7 of max(1, |value|),
    the rest within 1e-10; measured 6e-9 and 4e-16. With tolerance 1e-12 the two Newton solvers
    stop after a few iterations at points up to 1e-5 apart (relative force) in this scene, on
    single states and along a warm-started trajectory alike: the solver's tolerance, not the
    sensor's."""
    mjm = mujoco.MjModel.from_xml_string(XML.replace("<option ", '<option cone="elliptic" '))
    md = mujoco.MjData(mjm)
    states = []
    for step in range(200):
        mujoco.mj_step(mjm, md)
        if step % 10 == 9:
            states.append((md.qpos.copy(), md.qvel.copy()))
    mjm.opt.tolerance = 0.0
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype="float64")
    sim.set_solver(tolerance=1e-16, iterations=100)
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]))
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]))
    sim.forward()
    worst = np.zeros(2)
    for w, (qpos, qvel) in enumerate(states):
        ref = mujoco.MjData(mjm)
        ref.qpos[:], ref.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, ref)
        found, force_err, other_err = errors(mjm, sim.sensordata[w].numpy(), ref.sensordata)
        assert not found, f"state {w}: the number of matches differs"
        worst = np.maximum(worst, (force_err, other_err))
    assert worst[0] < 1e-7 and worst[1] < 1e-10, f"largest differences: forces {worst[0]:.2e}, others {worst[1]:.2e}"
    assert float(sim.sensor("skin_maxforce")[:, 0].max()) > 0 and float(sim.sensor("ball")[:, 0].max()) > 0


# a base with two crossing legs on hinges, which touch each other (siblings: not filtered) and
# the floor, and a site around the crossing
TREE_XML = """
<mujoco>
  <option timestep="0.002" tolerance="1e-12" iterations="100"/>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <body name="base" pos="0 0 0.45">
      <freejoint/>
      <geom name="base" type="box" size="0.12 0.1 0.02"/>
      <site name="cross" type="ellipsoid" size="0.08 0.08 0.12" pos="0 0 -0.15"/>
      <body name="l1" pos="0.05 0.025 0">
        <joint name="j1" type="hinge" axis="0 1 0" damping="0.02"/>
        <geom name="l1" type="capsule" fromto="0 0 0 -0.15 0 -0.3" size="0.03"/>
      </body>
      <body name="l2" pos="-0.05 -0.025 0">
        <joint name="j2" type="hinge" axis="0 1 0" damping="0.02"/>
        <geom name="l2" type="capsule" fromto="0 0 0 0.15 0 -0.3" size="0.03"/>
        <geom name="l2_foot" type="sphere" size="0.04" pos="0.15 0 -0.3"/>
      </body>
    </body>
  </worldbody>
  <sensor>
    <contact name="self" subtree1="base" subtree2="base" num="2" data="found force normal"/>
    <contact name="l2_second" body2="l2" num="3" data="found force normal"/>
    <contact name="tree_second" subtree2="base" num="4" data="found normal tangent linvel"/>
    <contact name="l2_on_l1" geom1="l2" geom2="l1" data="found force torque normal"/>
    <contact name="l1_on_l2" geom1="l1" geom2="l2" data="found force torque normal"/>
    <contact name="floor_l2" geom1="floor" body2="l2" num="3" reduce="mindist" data="found force dist"/>
    <contact name="cross_l1" site="cross" body2="l1" data="found force pos normal"/>
    <contact name="cross_tree" site="cross" subtree2="base" num="2" reduce="mindist" data="found dist pos"/>
    <contact name="strongest" reduce="maxforce" num="3" data="found force normal"/>
    <contact name="l1_net" body1="l1" reduce="netforce" data="found force torque pos"/>
  </sensor>
</mujoco>"""


def test_pairs_of_criteria_and_self_collisions():
    """200 steps of the legged base: the criteria in pairs (both subtrees the base's: its legs'
    contact with each other; geom1 and geom2 both ways, whose normals, along y where the legs
    lie side by side, and force z and torque z are opposite; a site with a body or a subtree;
    body2, subtree2 alone), each sensor equal to MuJoCo's after every step (float64; found
    exactly, forces within 1e-9, the rest within 1e-10; measured 5e-12 and 1e-14)."""
    mjm = mujoco.MjModel.from_xml_string(TREE_XML)
    md = mujoco.MjData(mjm)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.set_solver(tolerance=1e-12, iterations=100)
    worst = np.zeros(2)
    matched = np.zeros(mjm.nsensor, int)
    for step in range(200):
        mujoco.mj_step(mjm, md)
        sim.step()
        ours = sim.sensordata[0].numpy()
        found, force_err, other_err = errors(mjm, ours, md.sensordata)
        assert not found, f"step {step}: the number of matches differs"
        worst = np.maximum(worst, (force_err, other_err))
        matched += [sensor(mjm, md.sensordata, mjm.sensor(i).name)[0] > 0 for i in range(mjm.nsensor)]
    assert worst[0] < 1e-9 and worst[1] < 1e-10, f"largest differences: forces {worst[0]:.2e}, others {worst[1]:.2e}"
    assert np.all(matched > 0), matched
    a, b = sensor(mjm, ours, "l1_on_l2"), sensor(mjm, ours, "l2_on_l1")
    assert a[0] == b[0] == 1 and np.allclose(a[[1, 2, 4, 5]], b[[1, 2, 4, 5]])
    assert np.allclose(a[[3, 6]], -b[[3, 6]]) and np.allclose(a[7:10], -b[7:10]) and abs(a[8]) > 0.9


def test_netforce_and_cutoff():
    """At rest, the netforce of the crate's subtree (the force it exerts on the floor and on the
    lid, whose normals point away from it) is minus its own weight and its arm's: the floor
    carries the lid's weight too, which the lid puts on the crate. Its dist is 0, its frame the
    world's. The maxforce sensor's cutoff of 1 is ignored (MuJoCo's apply_cutoff skips contact
    sensors)."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.step(1500)
    net = sim.sensor("tree_netforce")[0].numpy()
    weight = 9.81 * sum(mjm.body(b).mass[0] for b in ("crate", "arm"))
    assert net[0] >= 5 and np.allclose(net[1:4], [0, 0, -weight], rtol=1e-3, atol=1e-3), net
    assert net[7] == 0 and list(net[11:17]) == [1, 0, 0, 0, 1, 0]
    assert float(sim.sensor("skin_maxforce")[0, 1:4].norm()) > 1, "cutoff ignored"


def test_disabled_contacts_leave_the_sensors_zero():
    """With <flag contact="disable"/> mjData.contact is empty: every contact sensor reads zero,
    found included, as MuJoCo's."""
    mjm = mujoco.MjModel.from_xml_string(XML.replace("<option ", '<option><flag contact="disable"/></option><option '))
    md = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, md)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    sim.forward()
    assert md.ncon == 0 and not np.any(md.sensordata) and not np.any(sim.sensordata.numpy())


# a box and a sphere on one body, a sphere touching both, and a free box resting on an explicit
# <pair>: the midphase sorts the first body pair's contacts by geom ids as stored (lower geom type
# first), the all-to-all loop by the order of the bodies' geoms
ORDER_XML = """
<mujoco>
  <option><flag midphase="MIDPHASE"/></option>
  <worldbody>
    <geom name="floor" type="plane" size="3 3 0.1"/>
    <geom name="wall" type="box" size="0.1 1 1" pos="3 0 0"/>
    <body name="a">
      <joint type="slide" axis="1 0 0"/>
      <geom name="a_box" type="box" size="0.1 0.1 0.1" pos="0 0 0.4"/>
      <geom name="a_ball" type="sphere" size="0.1" pos="0 0 0.65"/>
    </body>
    <body name="b" pos="0.15 0 0.54">
      <freejoint/>
      <geom name="b_ball" type="sphere" size="0.1"/>
    </body>
    <body name="c" pos="1 0 0.045">
      <freejoint/>
      <geom name="c_box" type="box" size="0.05 0.05 0.05" euler="1 1 0"/>
    </body>
  </worldbody>
  <contact><pair geom1="c_box" geom2="floor"/></contact>
  <sensor>
    <contact name="all" num="12" data="found dist pos normal"/>
    <contact name="b" body1="b" num="3" data="found dist normal"/>
  </sensor>
</mujoco>"""


def test_contacts_are_read_in_mjdata_contact_order():
    """reduce="none" reports the contacts in mjData.contact's order: explicit pairs of a body pair
    first, the midphase's sort by stored geom ids, or (midphase disabled) the all-to-all loop; the
    two orders differ here and both equal MuJoCo's (to 1e-12)."""
    orders = []
    for flag in ("enable", "disable"):
        mjm = mujoco.MjModel.from_xml_string(ORDER_XML.replace("MIDPHASE", flag))
        md = mujoco.MjData(mjm)
        mujoco.mj_forward(mjm, md)
        sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
        sim.forward()
        np.testing.assert_allclose(sim.sensordata[0].numpy(), md.sensordata, rtol=0, atol=1e-12)
        assert md.ncon == 6 and [tuple(int(g) for g in c.geom) for c in md.contact][:4] == [(0, 5)] * 4
        orders.append([tuple(int(g) for g in c.geom) for c in md.contact][4:])
    assert orders == [[(3, 4), (4, 2)], [(4, 2), (3, 4)]]


def test_float32():
    """States along MuJoCo's trajectory, float32 forward: found exactly, forces within 1e-3 of
    max(1, |value|), the rest within 1e-5 (measured 1.3e-4 and 1.4e-7). The lid is moved to the
    floor: for a box resting face down on a box, the box-box collider's float32 clipping may start
    at another corner (measured: the same four points as MuJoCo's, rotated by one slot), which
    the sensor of every contact would report in that order."""
    mjm = mujoco.MjModel.from_xml_string(XML.replace('<body name="lid" pos="0.02 0.01 0.3">',
                                                     '<body name="lid" pos="1 1 0.1">'))
    md = mujoco.MjData(mjm)
    states = []
    for step in range(200):
        mujoco.mj_step(mjm, md)
        if step % 25 == 24:
            states.append((md.qpos.copy(), md.qvel.copy()))
    sim = Sim.from_model(mjm, num_worlds=len(states), dtype="float32")
    sim.qpos = torch.as_tensor(np.stack([s[0] for s in states]), dtype=torch.float32)
    sim.qvel = torch.as_tensor(np.stack([s[1] for s in states]), dtype=torch.float32)
    sim.forward()
    worst = np.zeros(2)
    for w, (qpos, qvel) in enumerate(states):
        ref = mujoco.MjData(mjm)
        ref.qpos[:], ref.qvel[:] = qpos, qvel
        mujoco.mj_forward(mjm, ref)
        found, force_err, other_err = errors(mjm, sim.sensordata[w].numpy().astype(np.float64), ref.sensordata)
        assert not found, f"state {w}: the number of matches differs"
        worst = np.maximum(worst, (force_err, other_err))
    assert worst[0] < 1e-3 and worst[1] < 1e-5, f"largest differences: forces {worst[0]:.2e}, others {worst[1]:.2e}"


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_wide_equals_fused_bit_for_bit(dtype):
    """Six perturbed worlds, 60 steps: every array of the two schedules' data, sensordata too."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    fused, wide = run(mjm, "fused", dtype, 60), run(mjm, "wide", dtype, 60)
    for name in ("all", "crate_tree_mindist", "lid_on_crate_maxforce", "tree_netforce", "bottom"):
        assert float(fused.sensor(name)[:, 0].max()) > 0, name
    assert_same_data(fused, wide)


def test_mujoco_backend_gives_mujocos_contact_sensors():
    """MujocoSim's sensordata is MuJoCo's own, contact sensors included, and equals the Warp
    engine's after the same steps."""
    mjm = mujoco.MjModel.from_xml_string(XML)
    theirs, ours = MujocoSim(mjm, num_worlds=2), Sim.from_model(mjm, num_worlds=2, dtype="float64")
    ours.set_solver(tolerance=1e-12, iterations=100)
    md = mujoco.MjData(mjm)
    for _ in range(50):
        mujoco.mj_step(mjm, md)
    theirs.step(50)
    ours.step(50)
    assert float(theirs.sensor("all")[0, 0]) > 0
    np.testing.assert_array_equal(theirs.sensordata.numpy(), np.tile(md.sensordata, (2, 1)))
    np.testing.assert_allclose(ours.sensordata.numpy(), theirs.sensordata.numpy(), rtol=1e-9, atol=1e-9)
