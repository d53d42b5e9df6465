"""The project's quadruped (envs/assets/quadruped.xml): its main numbers, and that it stands in
MuJoCo for 10 s holding its home pose."""

from pathlib import Path

import mujoco
import numpy as np
import pytest

QUADRUPED = Path(__file__).resolve().parents[1] / "envs" / "assets" / "quadruped.xml"
LEGS = ("FR", "FL", "RR", "RL")
PRIMITIVES = {mujoco.mjtGeom.mjGEOM_PLANE, mujoco.mjtGeom.mjGEOM_SPHERE, mujoco.mjtGeom.mjGEOM_CAPSULE,
              mujoco.mjtGeom.mjGEOM_BOX}


@pytest.fixture(scope="module")
def mjm() -> mujoco.MjModel:
    return mujoco.MjModel.from_xml_path(str(QUADRUPED))


def geom_name(mjm, g) -> str:
    return mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_GEOM, int(g))


def test_options(mjm):
    assert mjm.opt.timestep == pytest.approx(0.005)
    assert mjm.opt.integrator == mujoco.mjtIntegrator.mjINT_EULER
    assert mjm.opt.solver == mujoco.mjtSolver.mjSOL_NEWTON
    assert mjm.opt.cone == mujoco.mjtCone.mjCONE_PYRAMIDAL
    assert mjm.opt.density == 0 and mjm.opt.viscosity == 0
    assert mjm.neq == 0 and mjm.ntendon == 0 and mjm.nmocap == 0
    assert np.all(mjm.body_gravcomp == 0)


def test_mass_and_trunk(mjm):
    assert 10.0 <= mjm.body_subtreemass[0] <= 14.0
    trunk = mjm.body("trunk")
    assert 5.0 <= trunk.mass[0] <= 6.0
    for leg in LEGS:
        assert mjm.body(f"{leg}_hip").mass[0] == pytest.approx(0.6, abs=0.15)
        assert mjm.body(f"{leg}_thigh").mass[0] == pytest.approx(1.0, abs=0.2)
        assert mjm.body(f"{leg}_calf").mass[0] == pytest.approx(0.25, abs=0.1)
    g = mjm.geom("trunk")
    assert g.type[0] == mujoco.mjtGeom.mjGEOM_BOX
    np.testing.assert_allclose(2 * g.size, [0.38, 0.19, 0.11], atol=0.01)
    # inertias consistent with the geometry: a uniform box of the trunk's mass and size
    size = 2 * g.size
    box = trunk.mass[0] / 12 * np.array([size[1] ** 2 + size[2] ** 2, size[0] ** 2 + size[2] ** 2,
                                          size[0] ** 2 + size[1] ** 2])
    np.testing.assert_allclose(np.sort(mjm.body_inertia[trunk.id]), np.sort(box), rtol=0.05)
    # every body's inertia satisfies the triangle inequality (a physical rigid body)
    for b in range(1, mjm.nbody):
        i = np.sort(mjm.body_inertia[b])
        assert i[0] > 0 and i[0] + i[1] >= i[2]


def test_joints(mjm):
    hinge = [j for j in range(mjm.njnt) if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_HINGE]
    free = [j for j in range(mjm.njnt) if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    assert len(hinge) == 12 and len(free) == 1 and mjm.njnt == 13
    assert mjm.jnt_bodyid[free[0]] == mjm.body("trunk").id
    assert all(mjm.jnt_limited[j] for j in hinge)
    for leg in LEGS:
        np.testing.assert_allclose(mjm.joint(f"{leg}_hip_abduction").axis, [1, 0, 0])
        np.testing.assert_allclose(mjm.joint(f"{leg}_hip_flexion").axis, [0, 1, 0])
        np.testing.assert_allclose(mjm.joint(f"{leg}_knee").axis, [0, 1, 0])
        lo, hi = mjm.joint(f"{leg}_knee").range
        assert -3.0 < lo < hi < -0.5


def test_actuators(mjm):
    assert mjm.nu == 12
    for a in range(mjm.nu):
        assert mjm.actuator_trntype[a] == mujoco.mjtTrn.mjTRN_JOINT
        assert mjm.jnt_type[mjm.actuator_trnid[a, 0]] == mujoco.mjtJoint.mjJNT_HINGE
        # <position>: gain kp, bias -kp * qpos - kv * qvel
        assert mjm.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE
        assert mjm.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
        assert mjm.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
        kp = mjm.actuator_gainprm[a, 0]
        assert 20 <= kp <= 35
        assert mjm.actuator_biasprm[a, 1] == -kp
        assert 0.5 <= -mjm.actuator_biasprm[a, 2] <= 1.0
        assert mjm.actuator_forcelimited[a]
        lo, hi = mjm.actuator_forcerange[a]
        assert lo == -hi and 24 <= hi <= 36
        assert mjm.actuator_ctrllimited[a]
        np.testing.assert_allclose(mjm.actuator_ctrlrange[a], mjm.jnt_range[mjm.actuator_trnid[a, 0]])


def test_geoms_and_sites(mjm):
    assert {int(t) for t in mjm.geom_type} <= {int(t) for t in PRIMITIVES}
    floor = mjm.geom("floor")
    assert floor.type[0] == mujoco.mjtGeom.mjGEOM_PLANE and floor.bodyid[0] == 0
    robot = [g for g in range(mjm.ngeom) if mjm.geom_bodyid[g] != 0]
    names = {geom_name(mjm, g) for g in robot}
    assert {"trunk"} | {f"{leg}_{part}" for leg in LEGS for part in ("hip", "thigh", "calf", "foot")} <= names
    for leg in LEGS:
        assert mjm.geom(f"{leg}_foot").type[0] == mujoco.mjtGeom.mjGEOM_SPHERE
    # MuJoCo's filter: geoms i, j may collide if (contype_i & conaffinity_j) or (contype_j & conaffinity_i)
    def can_collide(i, j):
        return bool((mjm.geom_contype[i] & mjm.geom_conaffinity[j]) or (mjm.geom_contype[j] & mjm.geom_conaffinity[i]))
    for i in robot:
        assert can_collide(i, floor.id), geom_name(mjm, i)
        for j in robot:
            assert not can_collide(i, j), (geom_name(mjm, i), geom_name(mjm, j))
    mjm.site("imu")
    for leg in LEGS:
        assert mjm.site(f"{leg}_foot_site").bodyid[0] == mjm.body(f"{leg}_calf").id


def test_home_keyframe(mjm):
    key = mjm.key("home")
    assert 0.27 <= key.qpos[2] <= 0.34
    np.testing.assert_allclose(key.qpos[3:7], [1, 0, 0, 0])
    np.testing.assert_allclose(key.ctrl, key.qpos[7:])
    lo, hi = mjm.jnt_range[1:].T
    assert np.all((lo <= key.qpos[7:]) & (key.qpos[7:] <= hi))


def test_stands_for_10s_holding_home(mjm):
    mjd = mujoco.MjData(mjm)
    mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)
    trunk = mjm.body("trunk").id
    steps_per_s = round(1.0 / mjm.opt.timestep)
    height_1s = None
    for i in range(10 * steps_per_s):
        mujoco.mj_step(mjm, mjd)
        assert np.all(np.isfinite(mjd.qpos))
        if i + 1 == steps_per_s:
            height_1s = mjd.xpos[trunk, 2]
    height = mjd.xpos[trunk, 2]
    assert 0.25 <= height <= 0.34
    assert abs(height - height_1s) < 0.01
    assert mjd.xmat[trunk].reshape(3, 3)[2, 2] > 0.95  # trunk z axis . world z
    assert np.abs(mjd.qpos[:2]).max() < 0.1  # no drift across the floor
    assert np.abs(mjd.qvel).max() < 0.05  # at rest
    floor = mjm.geom("floor").id
    touching = set()
    for c in mjd.contact[: mjd.ncon]:
        assert floor in (c.geom1, c.geom2)
        touching.add(geom_name(mjm, c.geom2 if c.geom1 == floor else c.geom1))
    assert touching == {f"{leg}_foot" for leg in LEGS}
