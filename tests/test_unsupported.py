"""Features that change the dynamics and are not implemented are refused by name."""

import mujoco
import pytest
from conftest import GYM_ASSETS

from simrl import MJCFError, Sim, UnsupportedFeatureError


def body(inner: str, option: str = '<option><flag contact="disable"/></option>', extra: str = "") -> str:
    return f"""<mujoco>{option}
      <worldbody>
        <body name="b1" pos="0 0 1"><joint name="j1" type="hinge"/><geom name="g1" size="0.1" mass="1"/>
          <site name="s1"/>
          <body name="b2" pos="0 0 -0.5"><joint name="j2" type="hinge"/><geom name="g2" size="0.1" mass="1"/>
            <site name="s2"/>
          </body>
          {inner}
        </body>
      </worldbody>{extra}</mujoco>"""


CASES = {
    "implicit integrator": (body("", '<option integrator="implicit"><flag contact="disable"/></option>'),
                            r"<option integrator='implicit'>: only Euler, RK4 and implicitfast"),
    "fluid forces": (body("", '<option density="1.2"><flag contact="disable"/></option>'), r"<option density"),
    "insidesite sensor": (body("", extra='<sensor><insidesite name="r" site="s1" objtype="site" objname="s2"/>'
                                         '</sensor>'),
                          r"<sensor><insidesite> 'r': this sensor type is not computed"),
    "rangefinder on a camera": (body('<camera name="c" resolution="4 3"/>',
                                     extra='<sensor><rangefinder name="r" camera="c"/></sensor>'),
                                r"<sensor><rangefinder camera=...> 'r': a rangefinder on a camera"),
    "2-D flex": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="2 2 1" spacing=".1 .1 .1" pos="0 0 1">'
                 '<contact contype="0" conaffinity="0" selfcollide="none"/></flexcomp></worldbody></mujoco>',
                 r"<flex>/<flexcomp> 'f': dim=2: only 1-D flexes"),
    "colliding flex": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="3 1 1" spacing=".1 .1 .1" '
                       'pos="0 0 1" dim="1"><edge equality="true"/></flexcomp></worldbody></mujoco>',
                       r"<flex>/<flexcomp> 'f': <contact contype='1' conaffinity='1'>: flex collisions are not"),
    "self-colliding flex": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="3 1 1" spacing=".1 .1 .1" '
                            'pos="0 0 1" dim="1"><contact contype="0" conaffinity="0" selfcollide="auto"/>'
                            '</flexcomp></worldbody></mujoco>',
                            r"<flex>/<flexcomp> 'f': <contact selfcollide='auto'>: flex self-collisions"),
    "interpolated flex": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="3 3 3" spacing=".1 .1 .1" '
                          'pos="0 0 1" dim="3" dof="trilinear"><contact contype="0" conaffinity="0" '
                          'selfcollide="none"/></flexcomp></worldbody></mujoco>',
                          r"<flex>/<flexcomp> 'f': vertices interpolated from nodes"),
    "flex elasticity": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="3 1 1" spacing=".1 .1 .1" '
                        'pos="0 0 1" dim="1"><contact contype="0" conaffinity="0" selfcollide="none"/>'
                        '<elasticity young="1e4" damping="0.1"/></flexcomp></worldbody></mujoco>',
                        r"<flex>/<flexcomp> 'f': <elasticity>: flex elasticity and damping are not supported"),
    "flex edge spring": ('<mujoco><worldbody><flexcomp name="f" type="grid" count="3 1 1" spacing=".1 .1 .1" '
                         'pos="0 0 1" dim="1"><contact contype="0" conaffinity="0" selfcollide="none"/>'
                         '<edge stiffness="10"/></flexcomp></worldbody></mujoco>',
                         r"<flex>/<flexcomp> 'f': <edge stiffness='10' damping='0'>: flex edge spring-dampers"),
    "SO(3) transmission (orientation servo)": (
        '<mujoco><worldbody><body pos="0 0 1"><joint name="b" type="ball"/><geom size="0.1" mass="1"/></body>'
        '</worldbody><actuator><orientation name="m" joint="b" kp="1"/></actuator></mujoco>',
        r"actuator 'm' transmission 'so3': only joint, jointinparent, slider-crank, tendon, site and body"),
    "joint plasticity": ('<mujoco><worldbody><body><joint name="j" type="hinge" springyield="1"/><geom size="0.1"/>'
                         '</body></worldbody></mujoco>', r"<joint springyield> on joint 'j': not supported"),
    "user activation dynamics": (body("", extra='<actuator><general name="m" joint="j1" dyntype="user"/>'
                                                '</actuator>'), r"<actuator dyntype='user'> actuator 'm'"),
    "DC motor": (body("", extra='<actuator><dcmotor name="m" joint="j1" motorconst="0.05" resistance="1"/>'
                                '</actuator>'),
                 r"<actuator gaintype='dcmotor'> actuator 'm': only fixed, affine and muscle"),
    "libccd": ('<mujoco><option><flag nativeccd="disable"/></option><worldbody><geom name="floor" type="box" '
               'size="1 1 0.1"/><body pos="0 0 0.3"><freejoint/><geom name="egg" type="ellipsoid" '
               'size="0.1 0.08 0.06"/></body></worldbody></mujoco>',
               r"<option><flag nativeccd='disable'/> with geoms 'floor' and 'egg'"),
    "noslip": ('<mujoco><option noslip_iterations="5"/><worldbody><geom type="plane" size="1 1 1"/>'
               '<body pos="0 0 1"><freejoint/><geom size="0.1"/></body></worldbody></mujoco>',
               r"noslip_iterations"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_unsupported_feature_is_named(case):
    xml, pattern = CASES[case]
    with pytest.raises(UnsupportedFeatureError, match=pattern):
        Sim.from_mjcf(xml, num_worlds=1)


def test_disabling_contacts_makes_the_model_loadable():
    xml, _ = CASES["noslip"]
    mjm = mujoco.MjModel.from_xml_string(xml)
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT
    Sim.from_model(mjm, num_worlds=1)


def test_pusher_loads_with_its_cylinder_collisions():
    # gymnasium's pusher: cylinders against capsules and cylinders (convex pairs, GJK/EPA)
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "pusher.xml"))
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")  # (the kernels tests/test_convex.py compiles)
    assert sim.model.struct.nccdpair > 0


def test_inert_tendons_are_accepted():
    # humanoid's fixed tendons have no stiffness, damping, limits or actuators
    mjm = mujoco.MjModel.from_xml_path(str(GYM_ASSETS / "humanoid.xml"))
    assert mjm.ntendon > 0
    mjm.opt.disableflags |= mujoco.mjtDisableBit.mjDSBL_CONTACT | mujoco.mjtDisableBit.mjDSBL_CONSTRAINT
    Sim.from_model(mjm, num_worlds=1)


def test_malformed_mjcf_includes_mujocos_message():
    with pytest.raises(MJCFError, match=r"MuJoCo could not compile the MJCF string: XML parse error") as info:
        Sim.from_mjcf("<mujoco><worldbody><body><joint type='hinge'/></body>", num_worlds=1)
    assert "line" in str(info.value).lower()


def test_unknown_attribute_includes_mujocos_message():
    with pytest.raises(MJCFError, match=r"unrecognized attribute.*'colour'|'colour'"):
        Sim.from_mjcf("<mujoco><worldbody><geom size='1' colour='red'/></worldbody></mujoco>")


def test_missing_file_is_named(tmp_path):
    missing = tmp_path / "nope.xml"
    with pytest.raises(FileNotFoundError, match="nope.xml"):
        Sim.from_mjcf(missing)


def test_mocap_bodies_and_gravcomp_are_accepted():
    # once refused; now simulated (tests/test_mocap.py, tests/test_gravcomp.py)
    from simrl.sim.io import unsupported_features

    xml = body('<body name="light" gravcomp="1"><joint actuatorgravcomp="true"/><geom size="0.1"/></body>',
               extra='<worldbody><body name="m" mocap="true"><geom size="0.1"/></body></worldbody>')
    mjm = mujoco.MjModel.from_xml_string(xml)
    assert mjm.nmocap == 1 and mjm.body_gravcomp.any() and mjm.jnt_actgravcomp.any()
    assert unsupported_features(mjm) == []


def test_a_tendon_force_limit_without_actuators_is_accepted_and_matches_mujoco():
    """actuatorfrclimited scales the forces of the actuators on the tendon (tests/test_tendon.py);
    on a tendon no actuator drives it does nothing, and the model runs with MuJoCo's qacc."""
    import numpy as np
    import torch

    xml = body("", option="", extra='<tendon><fixed name="t" actuatorfrclimited="true" actuatorfrcrange="-1 2">'
                                    '<joint joint="j1" coef="1"/></fixed></tendon>'
                                    '<actuator><motor name="m" joint="j2"/></actuator>')
    mjm = mujoco.MjModel.from_xml_string(xml)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    qpos = np.array([[0.3, -0.4]])
    sim.qpos, sim.ctrl = torch.tensor(qpos), torch.tensor([[5.0]], dtype=torch.float64)
    sim.forward()
    mjd = mujoco.MjData(mjm)
    mjd.qpos[:], mjd.ctrl[:] = qpos[0], 5.0
    mujoco.mj_forward(mjm, mjd)
    assert np.allclose(sim.qacc.numpy()[0], mjd.qacc, rtol=1e-10, atol=1e-10)
