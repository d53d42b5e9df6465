"""MuJoCo's enums and constants as simrl.sim.types writes them out: each member equals MuJoCo's own
value of the same name (mjJNT_FREE is JointType.FREE), so a MuJoCo release that renumbers one
fails here, not silently in a kernel."""

import enum
import inspect

import mujoco
import pytest

from simrl.sim import constraint, contact_tables, types

# simrl's group -> (MuJoCo's enum, the prefix of its members' names)
MUJOCO_ENUMS = {
    "JointType": ("mjtJoint", "mjJNT_"),
    "GeomType": ("mjtGeom", "mjGEOM_"),
    "ConstraintType": ("mjtConstraint", "mjCNSTR_"),
    "EqType": ("mjtEq", "mjEQ_"),
    "TrnType": ("mjtTrn", "mjTRN_"),
    "DynType": ("mjtDyn", "mjDYN_"),
    "GainType": ("mjtGain", "mjGAIN_"),
    "BiasType": ("mjtBias", "mjBIAS_"),
    "WrapType": ("mjtWrap", "mjWRAP_"),
    "IntegratorType": ("mjtIntegrator", "mjINT_"),
    "ConeType": ("mjtCone", "mjCONE_"),
    "DisableBit": ("mjtDisableBit", "mjDSBL_"),
    "EnableBit": ("mjtEnableBit", "mjENBL_"),
    "ObjType": ("mjtObj", "mjOBJ_"),
    "SensorType": ("mjtSensor", "mjSENS_"),
    "DataType": ("mjtDataType", "mjDATATYPE_"),
    "ConDataField": ("mjtConDataField", "mjCONDATA_"),
    "RayDataField": ("mjtRayDataField", "mjRAYDATA_"),
    "CamLight": ("mjtCamLight", "mjCAMLIGHT_"),
}


def test_every_enum_of_types_is_checked():
    """A group added to types.py is added here too (else its values would go unchecked)."""
    groups = {name for name, value in vars(types).items()
              if inspect.isclass(value) and issubclass(value, enum.Enum) and value.__module__ == types.__name__}
    assert groups == set(MUJOCO_ENUMS)


@pytest.mark.parametrize("group", sorted(MUJOCO_ENUMS))
def test_members_equal_mujoco(group):
    enum_name, prefix = MUJOCO_ENUMS[group]
    theirs = getattr(mujoco, enum_name)
    for member in getattr(types, group):
        assert hasattr(theirs, prefix + member.name), f"MuJoCo's {enum_name} has no {prefix}{member.name}"
        assert int(member) == int(getattr(theirs, prefix + member.name)), f"{group}.{member.name}"


def test_complete_groups():
    """The groups that mirror a whole MuJoCo enum hold every value MuJoCo defines (but its
    counts, mjN..., and mjtGeom's visual-only types): a new value fails here until added."""
    partial = {"SensorType", "ObjType", "GeomType"}  # the values simrl reads
    for group, (enum_name, prefix) in MUJOCO_ENUMS.items():
        if group in partial:
            continue
        theirs = {name.removeprefix(prefix) for name in getattr(mujoco, enum_name).__members__
                  if name.startswith(prefix)}
        theirs -= {"UNDEFINED"}  # mjTRN_UNDEFINED: an unset transmission, never compiled into a model
        assert {m.name for m in getattr(types, group)} == theirs, group


def test_constants():
    """MuJoCo's constants that the engine writes out (mjmodel.h)."""
    assert types.MINVAL == mujoco.mjMINVAL
    assert types.MAXVAL == mujoco.mjMAXVAL
    assert len(types.ConDataField) == mujoco.mjtConDataField.mjNCONDATA
    assert constraint.MINIMP == mujoco.mjMINIMP and constraint.MAXIMP == mujoco.mjMAXIMP
    assert contact_tables.MINMU == mujoco.mjMINMU
    assert contact_tables.MAXCONPAIR == mujoco.mjMAXCONPAIR
