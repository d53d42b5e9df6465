"""Candidate geom pairs (fixed at load) against the pairs MuJoCo's own collision pipeline
tests, in a scene where every pair of geoms overlaps."""

import mujoco
import numpy as np
import pytest

from simrl import Sim
from simrl.sim.contact_tables import candidate_geom_pairs

# All geoms are big spheres around the origin, so MuJoCo reports a contact for every pair
# that its filters let through: contype/conaffinity, parent-child, weld, <exclude>, <pair>.
SCENE = """
<mujoco>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 1"/>
    <geom name="static" type="sphere" size="1" pos="0 0 0.5"/>
    <body name="a" pos="0 0 0.5">
      <freejoint/>
      <geom name="a1" type="sphere" size="1"/>
      <geom name="a_ghost" type="sphere" size="1" contype="0" conaffinity="0"/>
      <body name="a_child" pos="0 0 0.1">
        <joint type="hinge"/>
        <geom name="ac" type="sphere" size="1"/>
        <body name="a_welded" pos="0 0 0.1">
          <geom name="aw" type="sphere" size="1"/>
        </body>
        <body name="a_grandchild" pos="0 0 0.1">
          <joint type="hinge"/>
          <geom name="ag" type="sphere" size="1" contype="2" conaffinity="2"/>
        </body>
      </body>
    </body>
    <body name="b" pos="0 0 0.5">
      <freejoint/>
      <geom name="b1" type="sphere" size="1" contype="2" conaffinity="1"/>
    </body>
    <body name="c" pos="0 0 0.5">
      <freejoint/>
      <geom name="c1" type="capsule" size="0.5 1"/>
    </body>
  </worldbody>
  <contact>
    <exclude body1="b" body2="c"/>
    <pair geom1="ag" geom2="floor"/>
  </contact>
</mujoco>
"""


def names(mjm, pairs):
    def name(g):
        return mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, g)
    return {frozenset((name(g1), name(g2))) for g1, g2 in pairs}


@pytest.mark.parametrize("filterparent", [True, False])
def test_candidate_pairs_equal_mujocos_contacts(filterparent):
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    if not filterparent:
        mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_FILTERPARENT
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    found = names(mjm, [(c.geom1, c.geom2) for c in mjd.contact[: mjd.ncon]])
    ours = names(mjm, [(g1, g2) for g1, g2, _ in candidate_geom_pairs(mjm)])
    assert ours == found
    assert frozenset(("ag", "floor")) in ours  # explicit <pair> despite contype/conaffinity
    assert frozenset(("b1", "c1")) not in ours  # <exclude>
    assert (frozenset(("a1", "ac")) in ours) == (not filterparent)


def test_limit_parameters_and_pairs_are_kept():
    mjm = mujoco.MjModel.from_xml_string(SCENE)
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    m = sim.model.struct
    np.testing.assert_array_equal(m.geom_size.numpy(), mjm.geom_size)
    np.testing.assert_array_equal(m.jnt_range.numpy(), mjm.jnt_range)
    np.testing.assert_array_equal(m.jnt_solimp.numpy(), mjm.jnt_solimp)
    assert m.ncpair == 0  # contacts disabled: no pairs, no slots
    mjm.opt.disableflags &= ~int(mujoco.mjtDisableBit.mjDSBL_CONTACT)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    assert sim.model.struct.ncpair == len(candidate_geom_pairs(mjm))
