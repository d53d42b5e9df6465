"""The names and joint kinds of a compiled MjModel's elements, as the task configuration refers
to them (robot parts, randomized bodies and joints, actuators, reward terms' joints)."""

import re

import mujoco

#: the joints one generalized coordinate moves: MuJoCo's mjJNT_HINGE and mjJNT_SLIDE
HINGE_SLIDE = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))


def names(mjm: mujoco.MjModel, obj: mujoco.mjtObj, count: int, numbered: bool = False) -> list[str]:
    """The names of the `count` elements of kind `obj`, in id order; an unnamed element is ""
    (or "#<id>" with `numbered`, for messages and lookups that must tell unnamed ones apart)."""
    return [mujoco.mj_id2name(mjm, obj, i) or (f"#{i}" if numbered else "") for i in range(count)]


def hinge_slide_joints(mjm: mujoco.MjModel) -> list[int]:
    """Ids of the hinge and slide joints, in the model's order."""
    return [j for j in range(mjm.njnt) if int(mjm.jnt_type[j]) in HINGE_SLIDE]


def match_joints(mjm: mujoco.MjModel, patterns, option: str, source) -> list[int]:
    """Ids of the hinge and slide joints whose whole name matches one of `patterns` (names or
    regular expressions), in the model's order; ValueError naming a pattern that matches none
    (`option`: the setting it came from), with the joints the model (`source`) has."""
    all_names = names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt)
    movable = hinge_slide_joints(mjm)
    chosen = set()
    for pattern in patterns:
        ids = [j for j in movable if re.fullmatch(pattern, all_names[j])]
        if not ids:
            raise ValueError(f"{option}: no hinge or slide joint of {source} is named {pattern!r} (a name or a "
                             f"regular expression); its joints: {', '.join(all_names[j] for j in movable)}")
        chosen.update(ids)
    return sorted(chosen)
