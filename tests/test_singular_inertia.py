"""A singular mass matrix handled as MuJoCo does: a pivot of the L'DL factorization below
mjMINVAL is raised to mjMINVAL (mj_factorM, MuJoCo's warning mjWARN_INERTIA "Inertia matrix is
too close to singular"), the state stays finite and follows MuJoCo's, and the world is flagged
(Sim.warnings) with a RuntimeWarning.

The model is MJX's test_data/actuator/general_dyntype.xml in small: a box on three slides and a
fourth along x + y, which makes M singular (a free body with a redundant coordinate).
"""

import warnings

import mujoco
import numpy as np
import pytest
import torch

from simrl import Sim
from simrl.mujoco_sim import MujocoSim
from simrl.sim.data import WARNING_INERTIA

XML = """
<mujoco>
  <option integrator="{integrator}"/>
  <worldbody>
    <body>
      <joint type="slide" axis="1 0 0"/>
      <joint type="slide" axis="0 1 0"/>
      <joint type="slide" axis="0 0 1" damping=".3"/>
      {redundant}
      <geom type="box" size=".05 .05 .05" mass="1"/>
    </body>
  </worldbody>
  <actuator>
    <general joint="{actuated}" gainprm="1.1"/>
  </actuator>
</mujoco>
"""


def _model(singular: bool, integrator: str) -> mujoco.MjModel:
    redundant = '<joint name="j4" type="slide" axis="1 1 0"/>' if singular else '<joint name="j4" type="hinge"/>'
    return mujoco.MjModel.from_xml_string(XML.format(integrator=integrator, redundant=redundant, actuated="j4"))


@pytest.mark.parametrize("schedule", ["fused", "wide"])
@pytest.mark.parametrize("integrator", ["Euler", "implicitfast"])
def test_singular_mass_matrix_follows_mujoco_and_is_flagged(integrator, schedule):
    mjm = _model(True, integrator)
    md = mujoco.MjData(mjm)
    # no force along M's null vector (1, 1, 0, -sqrt 2): a pivot of mjMINVAL would turn it into an
    # acceleration of ~1e15, which MuJoCo's mj_checkAcc takes for a diverged state
    md.qvel[:] = [0.1, -0.2, 0.3, 0.05]
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64", device="cpu", schedule=schedule)
    sim.qvel = torch.as_tensor(np.tile(md.qvel, (2, 1)))
    mujoco.mj_forward(mjm, md)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.forward()
    assert md.warning[mujoco.mjtWarning.mjWARN_INERTIA].number > 0
    # D's pivots: MuJoCo's 1 / qLDiagInv, the first raised to mjMINVAL
    assert 1 / md.qLDiagInv[0] == 1e-15
    pivots = np.diagonal(sim.view("qLD")[0].numpy())
    np.testing.assert_allclose(pivots, 1 / md.qLDiagInv, rtol=1e-12)
    assert sim.warnings.tolist() == [WARNING_INERTIA, WARNING_INERTIA]
    assert any("too close to singular" in str(w.message) for w in caught)
    for _ in range(50):
        mujoco.mj_step(mjm, md)
    sim.step(50)
    qpos = sim.qpos.numpy()
    assert np.isfinite(qpos).all() and not sim.nan_worlds.any()
    np.testing.assert_allclose(qpos[0], md.qpos, rtol=1e-9, atol=1e-9)
    assert sim.warnings.tolist() == [WARNING_INERTIA, WARNING_INERTIA]
    sim.reset(torch.tensor([1]))
    assert sim.warnings.tolist() == [WARNING_INERTIA, 0]


def test_regular_mass_matrix_is_not_flagged():
    """Negative control: the same body with a hinge as its fourth joint has a regular M."""
    mjm = _model(False, "Euler")
    md = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, md)
    assert md.warning[mujoco.mjtWarning.mjWARN_INERTIA].number == 0
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        sim.forward()
        sim.step(5)
    assert sim.warnings.tolist() == [0]
    assert not any("too close to singular" in str(w.message) for w in caught)


def test_mujoco_backend_flags_the_same_worlds():
    sim = MujocoSim(_model(True, "Euler"), num_worlds=1)
    sim.step(2)
    assert sim.warnings.tolist() == [WARNING_INERTIA]
    sim.reset()
    assert sim.warnings.tolist() == [0]
    regular = MujocoSim(_model(False, "Euler"), num_worlds=1)
    regular.step(2)
    assert regular.warnings.tolist() == [0]
