"""Every field of mujoco.MjModel, its options and its flags classified (simrl.sim.mjmodel_fields):
read by the engine, refused when not at its default, or without effect on the dynamics, so that a
field that changes MuJoCo's answer cannot be accepted and ignored (a MuJoCo upgrade's new field
fails here until it is classified)."""

import glob
import re

import mujoco
import numpy as np
import pytest
import torch

from simrl import Sim, UnsupportedFeatureError
from simrl.sim import mjmodel_fields as F
from simrl.sim.io import unsupported_features

SINK_XML = """
<mujoco model="sink">
  <option timestep="0.004"/>
  <asset>
    <texture name="grid" type="2d" builtin="checker" width="16" height="16" rgb1=".2 .3 .4" rgb2=".1 .2 .3"/>
    <material name="mat" texture="grid" rgba="1 1 1 1"/>
    <mesh name="tet" vertex="0 0 0  0.1 0 0  0 0.1 0  0 0 0.1"/>
    <hfield name="hf" nrow="3" ncol="3" elevation="0 0 0 0 1 0 0 0 0" size="1 1 0.1 0.05"/>
  </asset>
  <worldbody>
    <light name="sun" pos="0 0 3"/>
    <camera name="cam" pos="0 -2 1" xyaxes="1 0 0 0 0.5 1"/>
    <geom name="floor" type="plane" size="3 3 0.1" material="mat"/>
    <geom name="terrain" type="hfield" hfield="hf" pos="2 0 0"/>
    <site name="anchor" pos="0 0 1.5"/>
    <body name="arm" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0" range="-1 1" damping="0.1" armature="0.01"/>
      <geom name="upper" type="capsule" fromto="0 0 0 0.3 0 0" size="0.04"/>
      <site name="s_arm" pos="0.15 0 0.05"/>
      <body name="fore" pos="0.3 0 0">
        <joint name="slide" type="slide" axis="1 0 0" range="-0.1 0.1" frictionloss="0.01"/>
        <geom name="fore" type="cylinder" size="0.03 0.1"/>
        <site name="s_fore" pos="0.1 0 0"/>
        <body name="wrist" pos="0.1 0 0">
          <joint name="ball" type="ball"/>
          <geom name="hand" type="ellipsoid" size="0.05 0.04 0.03"/>
        </body>
      </body>
    </body>
    <body name="box" pos="0.5 0.5 0.2">
      <freejoint name="free"/>
      <geom name="box" type="box" size="0.1 0.1 0.1"/>
      <geom name="tet" type="mesh" mesh="tet" pos="0 0 0.1"/>
      <site name="imu"/>
    </body>
    <body name="ball" pos="-0.5 0 0.2">
      <freejoint/>
      <geom name="ball" type="sphere" size="0.1"/>
    </body>
    <body name="target" mocap="true" pos="1 1 1"><geom type="sphere" size="0.05" contype="0" conaffinity="0"/></body>
  </worldbody>
  <contact>
    <pair geom1="ball" geom2="floor" friction="1 1 0.005 0.0001 0.0001"/>
    <exclude body1="arm" body2="box"/>
  </contact>
  <equality>
    <connect body1="box" body2="ball" anchor="0 0 0" active="false"/>
    <weld body1="box" body2="target" active="false"/>
    <joint joint1="hinge" joint2="slide" active="false"/>
    <tendon tendon1="couple" active="false"/>
  </equality>
  <tendon>
    <fixed name="couple" range="-1 1" limited="true" stiffness="1">
      <joint joint="hinge" coef="1"/>
      <joint joint="slide" coef="0.5"/>
    </fixed>
    <spatial name="cable" damping="0.1">
      <site site="anchor"/>
      <site site="s_arm"/>
      <site site="s_fore"/>
    </spatial>
  </tendon>
  <actuator>
    <motor name="m_hinge" joint="hinge" ctrlrange="-1 1"/>
    <position name="p_slide" joint="slide" kp="10"/>
    <general name="f_cable" tendon="cable" dyntype="filter" dynprm="0.1" gainprm="2"/>
    <motor name="thrust" site="imu" gear="0 0 1 0 0 0"/>
  </actuator>
  <sensor>
    <jointpos joint="hinge"/>
    <accelerometer site="imu"/>
    <touch site="imu"/>
    <tendonpos tendon="cable"/>
    <actuatorfrc actuator="m_hinge"/>
  </sensor>
  <keyframe>
    <key name="home" qpos="0 0 1 0 0 0 0.5 0.5 0.2 1 0 0 0 -0.5 0 0.2 1 0 0 0"/>
  </keyframe>
  <custom>
    <numeric name="n" data="1 2"/>
    <text name="t" data="hello"/>
    <tuple name="tu"><element objtype="body" objname="arm" prm="1"/></tuple>
  </custom>
</mujoco>
"""


@pytest.fixture(scope="module")
def sink() -> mujoco.MjModel:
    mjm = mujoco.MjModel.from_xml_string(SINK_XML)
    assert unsupported_features(mjm) == []
    return mjm


def source_text() -> str:
    files = glob.glob("simrl/**/*.py", recursive=True) + glob.glob("envs/**/*.py", recursive=True)
    return "\n".join(open(f).read() for f in files if not f.endswith("mjmodel_fields.py"))


def test_every_mjmodel_field_is_classified_once():
    fields = set(F.mjmodel_fields())
    classes = {"READ": set(F.READ), "REFUSED": set(F.REFUSED), "INERT": set(F.INERT)}
    unclassified = fields - set().union(*classes.values())
    assert not unclassified, f"MjModel fields in no class of simrl.sim.mjmodel_fields: {sorted(unclassified)}"
    for a in classes:
        for b in classes:
            if a < b:
                assert not classes[a] & classes[b], f"in {a} and {b}: {sorted(classes[a] & classes[b])}"
    assert set().union(*classes.values()) <= fields, "classified names that MjModel lacks"
    assert all(F.INERT.values()), "every inert field says why"
    assert F.REFUSED_OWN_MESSAGE <= set(F.REFUSED)
    assert set(F.REFUSED) - F.REFUSED_OWN_MESSAGE == set(F.REFUSED_FEATURE)


def test_every_option_and_flag_is_classified_once():
    opt = mujoco.MjModel.from_xml_string("<mujoco/>").opt
    options = {n for n in dir(opt) if not n.startswith("_") and not callable(getattr(opt, n))}
    option_classes = [set(F.OPTION_READ), set(F.OPTION_REFUSED), set(F.OPTION_INERT)]
    assert set().union(*option_classes) == options
    assert sum(len(c) for c in option_classes) == len(options)
    for enum, prefix, classes in ((mujoco.mjtDisableBit, "mjDSBL_", (F.DISABLE_READ, F.DISABLE_INERT)),
                                  (mujoco.mjtEnableBit, "mjENBL_", (F.ENABLE_READ, F.ENABLE_REFUSED, F.ENABLE_INERT))):
        flags = {n.removeprefix(prefix) for n in enum.__members__ if not n.startswith(("mjNDISABLE", "mjNENABLE"))}
        sets = [set(c) for c in classes]
        assert set().union(*sets) == flags, sorted(flags ^ set().union(*sets))
        assert sum(len(c) for c in sets) == len(flags)


def test_read_fields_options_and_flags_are_read():
    """Each field in READ is named in simrl's source outside the table, each option as opt.NAME,
    each flag as DisableBit.NAME or EnableBit.NAME."""
    src = source_text()
    assert [n for n in sorted(F.READ) if not re.search(rf"\b{n}\b", src)] == []
    assert [n for n in sorted(F.OPTION_READ) if not re.search(rf"\.{n}\b", src)] == []
    assert [n for n in sorted(F.DISABLE_READ) if f"DisableBit.{n}" not in src] == []
    assert [n for n in sorted(F.ENABLE_READ) if f"EnableBit.{n}" not in src] == []


def away_from_default(value: np.ndarray, default):
    """value with its first element moved off the default."""
    out = np.array(value)
    out.reshape(-1)[0] = default + (2 if default == -1 else 1)
    return out


# refused fields that are empty (or a size) in any model without their feature: a model with it
REFUSED_BY_MODEL = {
    # a flex of bodies that collides (contype 1 by default), and a 2-D one that does not
    "flex_contype": '<deformable><flex name="f" dim="1" body="ball box" vertex="0 0 0 0 0 0" element="0 1"/>'
                    '</deformable>',
    "flex_dim": '<deformable><flex name="f" dim="2" body="ball box target" vertex="0 0 0 0 0 0 0 0 0" '
                'element="0 1 2"><contact contype="0" conaffinity="0" selfcollide="none"/></flex></deformable>',
    "nplastic": '<tendon><fixed name="y" stiffness="1" springyield="0.5"><joint joint="hinge" coef="1"/>'
                '</fixed></tendon>',
    "nhistory": '<actuator><motor name="late" joint="hinge" delay="0.01" nsample="4"/></actuator>',
    "nplugin": None,  # a plugin needs its library: tests/test_unsupported.py refuses <plugin> by name
}


@pytest.mark.parametrize("name", sorted(F.REFUSED))
def test_refused_field_away_from_its_default_is_refused(sink, name):
    """On a model with every supported element (nothing refused), the field is at its default;
    moved off it (its first element, or a model with the feature) the model is refused."""
    default = F.REFUSED[name]
    value = getattr(sink, name)
    assert F.at_default(value, default), f"{name} = {value} on a supported model"
    if np.size(value) and np.ndim(value):
        mjm = mujoco.MjModel.from_xml_string(SINK_XML)
        getattr(mjm, name)[...] = away_from_default(value, default)
    elif REFUSED_BY_MODEL.get(name):
        end = SINK_XML.rindex("</mujoco>")
        mjm = mujoco.MjModel.from_xml_string(SINK_XML[:end] + REFUSED_BY_MODEL[name] + SINK_XML[end:])
        assert not F.at_default(getattr(mjm, name), default)
    else:
        pytest.skip(f"{name}: {F.REFUSED_FEATURE.get(name, 'refused by name in tests/test_unsupported.py')}")
    problems = unsupported_features(mjm)
    assert problems, f"{name} off its default and nothing refused"


@pytest.mark.parametrize("option", sorted(F.OPTION_REFUSED))
def test_refused_option_away_from_its_default_is_refused(sink, option):
    mjm = mujoco.MjModel.from_xml_string(SINK_XML)
    assert getattr(mjm.opt, option) == F.OPTION_REFUSED[option]
    setattr(mjm.opt, option, F.OPTION_REFUSED[option] + 1)
    assert unsupported_features(mjm)


@pytest.mark.parametrize("flag", sorted(F.ENABLE_REFUSED))
def test_refused_flag_is_refused(sink, flag):
    mjm = mujoco.MjModel.from_xml_string(SINK_XML)
    mjm.opt.enableflags |= int(getattr(mujoco.mjtEnableBit, f"mjENBL_{flag}"))
    assert unsupported_features(mjm)


def test_surface_velocity_is_refused_by_name():
    """A geom's surface velocity (a conveyor belt) moves what lies on it in MuJoCo: refused,
    not ignored."""
    xml = SINK_XML.replace('<geom name="floor" type="plane" size="3 3 0.1" material="mat"/>',
                           '<geom name="floor" type="plane" size="3 3 0.1" material="mat" surfacevel="1 0 0 0 0 0"/>')
    with pytest.raises(UnsupportedFeatureError, match=r"<geom surfacevel> \(surface velocity"):
        Sim.from_model(mujoco.MjModel.from_xml_string(xml), num_worlds=1)


WARM_XML = """
<mujoco>
  <option timestep="0.01" iterations="2" tolerance="1e-12"><flag warmstart="disable" island="disable"/></option>
  <worldbody>
    <geom type="plane" size="3 3 0.1"/>
    <body pos="0 0 0.12"><freejoint/><geom type="box" size="0.1 0.08 0.1"/></body>
    <body pos="0.05 0 0.35"><freejoint/><geom type="box" size="0.05 0.05 0.05"/></body>
    <body pos="-0.3 0 0.1"><freejoint/><geom type="sphere" size="0.1"/></body>
  </worldbody>
</mujoco>"""


def test_disabled_warmstart_matches_mujoco():
    """<flag warmstart='disable'>: the solver starts from the smooth acceleration every step (2
    Newton iterations here, so the start shows; islands off, as tests/test_capped_solver.py's
    other case): 100 steps within 1e-12 of MuJoCo's qpos (measured 1.6e-15); with warm starts
    MuJoCo's own trajectory is far from it."""
    mjm = mujoco.MjModel.from_xml_string(WARM_XML)
    warm = mujoco.MjModel.from_xml_string(WARM_XML.replace('warmstart="disable" ', ""))
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    md, mw = mujoco.MjData(mjm), mujoco.MjData(warm)
    rng = np.random.default_rng(0)
    qvel = 0.3 * rng.standard_normal(mjm.nv)
    md.qvel[:], mw.qvel[:] = qvel, qvel
    sim.qvel = torch.as_tensor(qvel[None])
    worst, apart = 0.0, 0.0
    for _ in range(100):
        mujoco.mj_step(mjm, md)
        mujoco.mj_step(warm, mw)
        sim.step()
        worst = max(worst, np.abs(sim.qpos.numpy()[0] - md.qpos).max())
        apart = max(apart, np.abs(mw.qpos - md.qpos).max())
    print(f"max qpos difference {worst:.2e}; MuJoCo with and without warm starts {apart:.2e}")
    assert apart > 1e-6
    assert worst < 1e-12
