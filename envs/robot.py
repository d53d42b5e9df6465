"""The `robot:` section of a legged task: which MJCF to load and what its parts are called.

    robot:
      mjcf: ~/menagerie/unitree_go1/scene.xml   # null: the task's own asset
      base_body: trunk                          # the body of the free joint
      keyframe: home                            # the default pose (null: qpos0)
      foot_geoms: [FR, FL, RR, RL]              # or foot_bodies: one foot per entry
      termination_bodies: [trunk]               # ground contact ends the episode
      undesired_geoms: [".*_thigh"]             # ground contact is penalised
      action_scale: 0.25                        # target = default + scale * action
      actuators:                                # optional: actuators from config (below)
        - {joints: [".*_hip_joint", ".*_thigh_joint"], type: position, stiffness: 20, damping: 0.5,
           effort_limit: 23.7, armature: 0.005}
        - {joints: [".*_calf_joint"], type: dc_motor, stiffness: 20, damping: 0.5, effort_limit: 35.5,
           saturation_effort: 35.5, velocity_limit: 21.0}
      init_state:                               # optional: the default pose without a keyframe
        pos: [0, 0, 0.3]
        rot: [1, 0, 0, 0]
        joint_pos: {".*_thigh_joint": 0.9, ".*_calf_joint": -1.8}
        joint_vel: {}
      imu_site: imu                             # optional: a site (or body) for missing IMU sensors
      preset: null                              # go1, go2, g1, h1: start from envs.presets' section

`preset` starts from the section of a Menagerie robot (envs.presets): the keys of the section set
to something other than the defaults (the task's own robot) override the preset's, and a file
without a name the preset uses is refused naming them (check_preset_names).

Every name may be a regular expression (Python `re.fullmatch`, as Isaac Lab's body names are):
`".*_foot"` selects every geom (or body) whose whole name matches, in the model's order. A name
that matches nothing is an error listing what the model has. Contacts are counted by geom: a
body entry stands for the geoms attached to that body itself (not to its children).

What the task needs of the model, checked when it loads (`Robot`, with an error that names the
problem and lists the candidates):

- `base_body` has a free joint, and it is the model's first joint (qpos[0:7], qvel[0:6]): the
  base pose, velocities and the joint-position observations (qpos[7:]) are read from there.
- `keyframe` exists (its qpos is the default pose: spawn, action offset, joint observations), or
  `init_state` gives the pose (with `keyframe: null`; giving both is an error).
- every actuator drives one hinge or slide joint (the action is that joint's position target);
  with the default actuator model (`task.env.actuator.type: mujoco`) they are position servos
  (MuJoCo's `<position>`: bias = -kp q - kv qd); for motors use `type: pd` with kp and kd.
- `actuators` (when given): every pattern matches a joint, no joint is matched by two groups, a
  matched joint is a hinge or slide (the free joint is never matched), and the MJCF has no actuators
  of its own unless `replace_actuators: true`.
- a ground plane named `floor_geom`; a model without one (a Menagerie robot file without its
  scene) gets a plane of that name with MjSpec (contype and conaffinity 1, MuJoCo's defaults,
  as the floor of a Menagerie scene).
- the IMU sensors the policy reads with `observation_source: sensors` (names below), or set
  `task.env.observation_source: state`.

Actuators from config (`actuators`, Isaac Lab's actuator groups; for an MJCF without actuators,
such as mjlab's or Menagerie's robot files that leave them to Python): each group is
`{joints, type, stiffness, damping, effort_limit, armature, frictionloss, velocity_limit,
saturation_effort}`, its joints names or regular expressions. simrl adds one actuator per matched
joint with MjSpec before compiling, named after its joint and in the model's joint order (the
action order), so the MuJoCo backend (`sim.backend=mujoco`) runs the same model:

- every type: a position servo (MuJoCo's `<position>`: gain kp = stiffness, bias -kp q - kv qd with
  kv = damping, forcerange +-effort_limit; no effort_limit: unlimited); armature and frictionloss,
  when given, replace the joint's own.
- `position`: that servo is the actuator (implicit in the integrator's sense: with `implicitfast`
  MuJoCo integrates its damping implicitly).
- `pd`, `dc_motor`: the explicit torque models of envs.actuators (kp, kd and effort_limit read from
  that servo, which is then switched off); `dc_motor` needs `saturation_effort` and
  `velocity_limit`. Groups of `pd` and `dc_motor` mix; `position` groups do not mix with them
  (one actuator model per environment), and with groups `task.env.actuator.type` stays `mujoco`.
  stiffness is required (> 0), damping defaults to 0.

`init_state` (Isaac Lab's init_state) gives the default pose of a model without a usable keyframe:
`pos` and `rot` (w, x, y, z; normalised) of the free joint, `joint_pos` and `joint_vel` as
{name or regular expression: value} over the hinge and slide joints. Joints no key matches keep
their qpos0 (the MJCF's reference pose) and velocity 0; a key that matches no joint, or a joint that
two keys match, is an error. Unset pos and rot keep the base's qpos0 (its MJCF position, upright).
"""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path

import mujoco
import numpy as np

from envs import presets
from envs.model_names import HINGE_SLIDE, names

#: the fields of a robot section that list MJCF names (and the object each names)
_GEOM_LISTS = ("foot_geoms", "termination_geoms", "undesired_geoms")
_BODY_LISTS = ("foot_bodies", "termination_bodies", "undesired_bodies")

#: the types of an actuator group (`robot.actuators[i].type`)
ACTUATOR_GROUP_TYPES = ("position", "pd", "dc_motor")


def _number(where: str, value, low: float = 0.0, strict: bool = False, none: bool = False) -> float | None:
    """`value` as a finite float >= low (> low with `strict`; None passes with `none`); else ValueError."""
    if value is None and none:
        return None
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and (
        value > low if strict else value >= low)
    if not ok:
        bound = "" if low == -math.inf else f" {'>' if strict else '>='} {low:g}"
        raise ValueError(f"{where}: a number{bound}{' or null' if none else ''}, got {value!r}")
    return float(value)


def _patterns(where: str, value) -> tuple[str, ...]:
    """A name or list of names (regular expressions) as a tuple; ValueError for anything else."""
    patterns = (value,) if isinstance(value, str) else value
    if not isinstance(patterns, (list, tuple)) or not patterns or not all(isinstance(p, str) for p in patterns):
        raise ValueError(f"{where}: a joint name or a non-empty list of them (regular expressions), got {value!r}")
    for pattern in patterns:
        try:
            re.compile(pattern)
        except re.error as e:
            raise ValueError(f"{where}: {pattern!r} is not a valid regular expression ({e})") from None
    return tuple(patterns)


@dataclasses.dataclass(frozen=True)
class ActuatorGroup:
    """One entry of `robot.actuators`: joints driven alike (see the module docstring). Units:
    N m/rad (N/m) for stiffness, N m s/rad for damping, N m (N) for efforts, kg m^2 for armature,
    rad/s for velocity_limit."""

    #: joint names or regular expressions (re.fullmatch), over the hinge and slide joints
    joints: tuple
    #: position (MuJoCo's servo), pd or dc_motor (envs.actuators' explicit models)
    type: str = "position"
    stiffness: float = 0.0
    damping: float = 0.0
    #: +- torque limit; None: unlimited
    effort_limit: float | None = None
    #: the joints' armature and frictionloss; None: the MJCF's
    armature: float | None = None
    frictionloss: float | None = None
    #: dc_motor only: the torque-speed curve (envs.actuators)
    velocity_limit: float | None = None
    saturation_effort: float | None = None

    @classmethod
    def from_dict(cls, values, where: str) -> ActuatorGroup:
        """An ActuatorGroup from a mapping; ValueError naming `where` (robot.actuators[i]) and the key."""
        if isinstance(values, ActuatorGroup):
            return values
        if not isinstance(values, dict):
            raise ValueError(f"{where}: a mapping {{joints: [...], type: position|pd|dc_motor, stiffness: ...}}, "
                             f"got {values!r}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; known: {', '.join(known)}")
        if "joints" not in values:
            raise ValueError(f"{where}: give joints (names or regular expressions)")
        kind = values.get("type", "position")
        if kind not in ACTUATOR_GROUP_TYPES:
            raise ValueError(f"{where}.type: one of {', '.join(ACTUATOR_GROUP_TYPES)}, got {kind!r}")
        if "stiffness" not in values:
            raise ValueError(f"{where}: give stiffness (> 0, the position gain)")
        for key in ("velocity_limit", "saturation_effort"):
            if kind == "dc_motor" and values.get(key) is None:
                raise ValueError(f"{where}.{key} is required for type dc_motor")
            if kind != "dc_motor" and values.get(key) is not None:
                raise ValueError(f"{where}.{key} belongs to type dc_motor, not {kind}")
        return cls(joints=_patterns(f"{where}.joints", values["joints"]), type=kind,
                   stiffness=_number(f"{where}.stiffness", values["stiffness"], strict=True),
                   damping=_number(f"{where}.damping", values.get("damping", 0.0)),
                   effort_limit=_number(f"{where}.effort_limit", values.get("effort_limit"), strict=True, none=True),
                   armature=_number(f"{where}.armature", values.get("armature"), none=True),
                   frictionloss=_number(f"{where}.frictionloss", values.get("frictionloss"), none=True),
                   velocity_limit=_number(f"{where}.velocity_limit", values.get("velocity_limit"), strict=True,
                                          none=True),
                   saturation_effort=_number(f"{where}.saturation_effort", values.get("saturation_effort"),
                                             strict=True, none=True))


@dataclasses.dataclass(frozen=True)
class InitState:
    """`robot.init_state`: the default pose without a keyframe (see the module docstring)."""

    #: the free joint's position (m) and orientation (w, x, y, z, normalised); None: qpos0's
    pos: tuple | None = None
    rot: tuple | None = None
    #: ((name or regular expression, value), ...): joint positions (rad or m) and velocities
    joint_pos: tuple = ()
    joint_vel: tuple = ()

    @classmethod
    def from_dict(cls, values) -> InitState:
        """An InitState from a mapping; ValueError naming the key."""
        if isinstance(values, InitState):
            return values
        where = "robot.init_state"
        if not isinstance(values, dict):
            raise ValueError(f"{where}: a mapping {{pos, rot, joint_pos, joint_vel}}, got {values!r}")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(values) - set(known))
        if unknown:
            raise ValueError(f"{where}: unknown keys {unknown}; known: {', '.join(known)}")

        def vector(key, size):
            value = values.get(key)
            if value is None:
                return None
            if not (isinstance(value, (list, tuple)) and len(value) == size):
                raise ValueError(f"{where}.{key}: {size} numbers, got {value!r}")
            return tuple(_number(f"{where}.{key}", v, low=-math.inf) for v in value)

        def joint_values(key):
            value = values.get(key) or {}
            if not isinstance(value, dict):
                raise ValueError(f"{where}.{key}: a mapping {{joint name or regular expression: value}}, "
                                 f"got {value!r}")
            return tuple((_patterns(f"{where}.{key}", k)[0], _number(f"{where}.{key}.{k}", v, low=-math.inf))
                         for k, v in value.items())

        rot = vector("rot", 4)
        if rot is not None:
            norm = math.sqrt(sum(v * v for v in rot))
            if norm == 0.0:
                raise ValueError(f"{where}.rot: a unit quaternion (w, x, y, z), got {list(rot)}")
            rot = tuple(v / norm for v in rot)
        return cls(pos=vector("pos", 3), rot=rot, joint_pos=joint_values("joint_pos"),
                   joint_vel=joint_values("joint_vel"))


@dataclasses.dataclass(frozen=True)
class RobotCfg:
    """A legged robot (`task.robot.*`); see the module docstring."""

    #: the MJCF file (a path; `~` is expanded); None: the task's own asset
    mjcf: str | None = None
    #: the body of the free joint (the base whose velocity is tracked)
    base_body: str = "trunk"
    #: the keyframe of the default pose; None: qpos0
    keyframe: str | None = "home"
    #: one foot per geom (air time, foot contacts), or per body with foot_bodies (not both)
    foot_geoms: tuple = ()
    foot_bodies: tuple = ()
    #: parts whose contact with the ground ends an episode
    termination_geoms: tuple = ()
    termination_bodies: tuple = ()
    #: parts whose contact with the ground is penalised (reward term undesired_contacts)
    undesired_geoms: tuple = ()
    undesired_bodies: tuple = ()
    #: joint-position target = default pose + action_scale * action (a number, or one per actuator)
    action_scale: float | tuple = 0.25
    #: the ground plane (added when the model has none)
    floor_geom: str = "floor"
    #: sensors of observation_source=sensors: a velocimeter, a gyro and a framequat
    lin_vel_sensor: str = "imu_linvel"
    ang_vel_sensor: str = "imu_gyro"
    orientation_sensor: str = "imu_quat"
    #: actuator groups added with MjSpec (ActuatorGroup, see the module docstring); empty: the MJCF's
    actuators: tuple = ()
    #: with actuators: remove the MJCF's own actuators first (without it an MJCF that has any is refused)
    replace_actuators: bool = False
    #: the default pose of a model without a usable keyframe (InitState); needs keyframe None
    init_state: InitState | None = None
    #: where the IMU sensors go when the MJCF lacks them: a site, or a body (a site is added at its
    #: origin); None: the MJCF must have them (with observation_source sensors)
    imu_site: str | None = None
    #: a robot of envs.presets whose section this one starts from (its keys override the preset's)
    preset: str | None = None

    @classmethod
    def _with_preset(cls, values: dict, base: RobotCfg) -> RobotCfg:
        """The preset's section (envs.presets) under the keys of `values` that are the user's: those
        set to something else than `base` (the task's own robot, which a shipped task file repeats),
        and mjcf; a user's feet, keyframe or init_state replace the preset's of either kind."""
        name = values["preset"]
        if not isinstance(name, str):
            raise ValueError(f"robot.preset: a preset name ({', '.join(presets.PRESETS)}), got {name!r}")
        section = dict(presets.get(name).section)
        plain = cls.from_dict({k: v for k, v in values.items() if k != "preset"}, base)
        own = {k: v for k, v in values.items()
               if k == "mjcf" or (k != "preset" and getattr(plain, k) != getattr(base, k))}
        for group in (("foot_geoms", "foot_bodies"), ("keyframe", "init_state")):
            if any(k in own and own[k] not in (None, [], ()) for k in group):
                for k in group:
                    section.pop(k, None)
        cfg = cls.from_dict({**section, **own}, cls())
        return dataclasses.replace(cfg, preset=name)

    @classmethod
    def from_dict(cls, values: dict | None, defaults: RobotCfg | None = None) -> RobotCfg:
        """A RobotCfg from a mapping (a task's `robot` section) over `defaults`; unknown keys
        and a section giving both foot_geoms and foot_bodies are ValueErrors."""
        base = defaults or cls()
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"robot: unknown keys {unknown}; known: {', '.join(sorted(known))}")
        if values.get("preset") is not None:
            return cls._with_preset(values, base)
        for key in (*_GEOM_LISTS, *_BODY_LISTS):
            if key in values:
                value = values[key]
                values[key] = (value,) if isinstance(value, str) else tuple(value or ())
        if isinstance(values.get("action_scale"), (list, tuple)):
            values["action_scale"] = tuple(float(v) for v in values["action_scale"])
        if "actuators" in values:
            groups = values["actuators"] or ()
            if not isinstance(groups, (list, tuple)):
                raise ValueError(f"robot.actuators: a list of actuator groups, got {groups!r}")
            values["actuators"] = tuple(ActuatorGroup.from_dict(g, f"robot.actuators[{i}]")
                                        for i, g in enumerate(groups))
            kinds = {"position" if g.type == "position" else "explicit" for g in values["actuators"]}
            if len(kinds) > 1:
                raise ValueError("robot.actuators: groups of type position (MuJoCo's servos) and of types pd / "
                                 "dc_motor (explicit torques) cannot be mixed; give every group position, or "
                                 "every group pd or dc_motor")
        if "replace_actuators" in values and not isinstance(values["replace_actuators"], bool):
            raise ValueError(f"robot.replace_actuators: true or false, got {values['replace_actuators']!r}")
        if values.get("init_state") is not None:
            values["init_state"] = InitState.from_dict(values["init_state"])
            if "keyframe" not in values:  # a section that gives the pose replaces the defaults' keyframe
                values["keyframe"] = None
        # a section that names the feet replaces the defaults' feet of either kind
        if "foot_geoms" in values and "foot_bodies" not in values:
            values["foot_bodies"] = ()
        if "foot_bodies" in values and "foot_geoms" not in values:
            values["foot_geoms"] = ()
        cfg = dataclasses.replace(base, **values)
        if cfg.foot_geoms and cfg.foot_bodies:
            raise ValueError(f"robot: give foot_geoms or foot_bodies, not both (foot_geoms={list(cfg.foot_geoms)}, "
                             f"foot_bodies={list(cfg.foot_bodies)}; empty the other, e.g. task.robot.foot_geoms=[])")
        if cfg.init_state is not None and cfg.keyframe is not None:
            raise ValueError(f"robot: give keyframe or init_state, not both (keyframe={cfg.keyframe!r}); set "
                             f"keyframe: null to start from init_state")
        return cfg

    def mjcf_path(self, default: Path) -> Path:
        """The MJCF to load: `mjcf` (expanded), or `default`; FileNotFoundError when it is missing."""
        path = Path(self.mjcf).expanduser() if self.mjcf else Path(default)
        if not path.is_file():
            raise FileNotFoundError(f"robot.mjcf: MJCF file not found: {path}")
        return path


def _match(key: str, patterns, candidates: list[str], kind: str) -> list[list[int]]:
    """Ids of `candidates` (names) matched by each pattern (re.fullmatch), one list per pattern, in
    the model's order; ValueError naming a pattern that matches nothing and listing `candidates`."""
    groups = []
    for pattern in patterns:
        try:
            regex = re.compile(pattern)
        except re.error as e:
            raise ValueError(f"robot.{key}: {pattern!r} is not a valid regular expression ({e})") from None
        ids = [i for i, n in enumerate(candidates) if n and regex.fullmatch(n)]
        if not ids:
            shown = [n for n in candidates if n]
            raise ValueError(f"robot.{key}: no {kind} of the model is named {pattern!r} (a name or a regular "
                             f"expression); its {kind}s: {', '.join(shown) or 'none'}")
        groups.append(ids)
    return groups


_JOINT_KINDS = {int(mujoco.mjtJoint.mjJNT_FREE): "free", int(mujoco.mjtJoint.mjJNT_BALL): "ball",
                int(mujoco.mjtJoint.mjJNT_SLIDE): "slide", int(mujoco.mjtJoint.mjJNT_HINGE): "hinge"}


def match_joint_groups(groups: list[tuple[str, tuple[str, ...]]], joint_names: list[str], joint_types: list[int],
                       source: str) -> dict[int, int]:
    """Joint id -> index of the group that matches it, for groups given as (label, patterns) (the
    label names the group in messages: `robot.actuators[0]`), over the joints of a model (names
    and MuJoCo joint types, in id order). Patterns are names or regular expressions (re.fullmatch)
    over the hinge and slide joints; a free joint is never matched. ValueError naming the problem
    and listing the candidates: a pattern that matches no hinge or slide joint, one that matches a
    ball joint (or only the free joint), a joint that two groups match."""
    movable = [j for j, t in enumerate(joint_types) if int(t) in HINGE_SLIDE and joint_names[j]]
    candidates = ", ".join(joint_names[j] for j in movable) or "none"
    free = int(mujoco.mjtJoint.mjJNT_FREE)
    owner: dict[int, int] = {}
    for index, (label, patterns) in enumerate(groups):
        for pattern in patterns:
            regex = re.compile(pattern)
            matched = [j for j, n in enumerate(joint_names) if n and regex.fullmatch(n)]
            others = [j for j in matched if int(joint_types[j]) not in HINGE_SLIDE]
            # a ball joint is refused; the free joint only when the pattern matches nothing else
            wrong = [j for j in others if int(joint_types[j]) != free] or (others if others == matched else [])
            if wrong:
                j = wrong[0]
                raise ValueError(f"{label}: joint {joint_names[j]!r} of {source} (matched by {pattern!r}) is a "
                                 f"{_JOINT_KINDS.get(int(joint_types[j]), '?')} joint, not a hinge or slide; "
                                 f"its hinge and slide joints: {candidates}")
            if not matched:
                raise ValueError(f"{label}: no joint of {source} is named {pattern!r} (a name or a regular "
                                 f"expression); its hinge and slide joints: {candidates}")
            for j in matched:
                if j in others:
                    continue  # the free joint under a wide pattern: the base, not a driven joint
                if owner.get(j, index) != index:
                    first = groups[owner[j]]
                    raise ValueError(f"joint {joint_names[j]!r} of {source} is matched by {first[0]} "
                                     f"({', '.join(map(repr, first[1]))}) and by {label} "
                                     f"({', '.join(map(repr, patterns))}); a joint belongs to one of them")
                owner[j] = index
    return owner


def actuator_group_labels(cfg: RobotCfg) -> list[tuple[str, tuple[str, ...]]]:
    """(label, patterns) of each group of cfg.actuators, for match_joint_groups."""
    return [(f"robot.actuators[{i}]", g.joints) for i, g in enumerate(cfg.actuators)]


def with_actuators(spec: mujoco.MjSpec, cfg: RobotCfg, source: str) -> mujoco.MjSpec:
    """`spec` with the actuators of `cfg.actuators` (see the module docstring): one position servo
    per matched joint, in joint order, named after the joint, and the groups' armature and
    frictionloss set on the joints; the MJCF's own actuators removed with `replace_actuators`
    (ValueError listing them without it). Keyframes lose their ctrl (the env sets the controls).
    Returns the spec; unchanged when cfg.actuators is empty."""
    if not cfg.actuators:
        return spec
    own = [a.name or f"#{i}" for i, a in enumerate(spec.actuators)]
    if own and not cfg.replace_actuators:
        raise ValueError(f"robot.actuators: {source} has actuators of its own ({', '.join(own)}) and the robot "
                         f"section lists actuator groups; set robot.replace_actuators: true to replace them, or "
                         f"remove robot.actuators to keep them")
    for actuator in list(spec.actuators):
        spec.delete(actuator)
    joints = list(spec.joints)
    owner = match_joint_groups(actuator_group_labels(cfg), [j.name for j in joints], [int(j.type) for j in joints],
                               source)
    for j in sorted(owner):
        joint, group = joints[j], cfg.actuators[owner[j]]
        if group.armature is not None:
            joint.armature = group.armature
        if group.frictionloss is not None:
            joint.frictionloss = group.frictionloss
        actuator = spec.add_actuator()
        actuator.name = joint.name
        actuator.trntype = mujoco.mjtTrn.mjTRN_JOINT
        actuator.target = joint.name
        actuator.gear = [1.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        actuator.dyntype = mujoco.mjtDyn.mjDYN_NONE
        actuator.gaintype = mujoco.mjtGain.mjGAIN_FIXED
        actuator.biastype = mujoco.mjtBias.mjBIAS_AFFINE
        # MuJoCo's <position kp kv>: force = kp ctrl - kp q - kv qd (XML reference, position)
        actuator.gainprm = [group.stiffness] + [0.0] * 9
        actuator.biasprm = [0.0, -group.stiffness, -group.damping] + [0.0] * 7
        actuator.ctrllimited = mujoco.mjtLimited.mjLIMITED_FALSE
        if group.effort_limit is None:
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_FALSE
        else:
            actuator.forcelimited = mujoco.mjtLimited.mjLIMITED_TRUE
            actuator.forcerange = [-group.effort_limit, group.effort_limit]
    for key in spec.keys:
        key.ctrl = []
    return spec


def actuator_model_cfg(cfg: RobotCfg, groups: list[ActuatorGroup], actuator: dict | None) -> dict | None:
    """The env's actuator model section (envs.actuators) for the actuators of `cfg.actuators`
    (`groups`: each actuator's group, in actuator order) over the task's `actuator` section (its
    delay): type mujoco for position groups, else pd, or dc_motor with each actuator's
    saturation_effort and velocity_limit (infinite for pd actuators: the dc_motor curve is then
    the pd clip). `actuator` unchanged when cfg.actuators is empty; ValueError when the task's
    section sets a type other than mujoco besides groups."""
    if not cfg.actuators:
        return actuator
    actuator = dict(actuator or {})
    if actuator.get("type", "mujoco") != "mujoco":
        raise ValueError(f"task.env.actuator.type={actuator['type']}: with robot.actuators each group sets its "
                         f"type (position, pd, dc_motor); leave task.env.actuator.type mujoco (its delay applies)")
    kinds = {g.type for g in groups}
    if kinds <= {"position"}:
        return actuator
    if "dc_motor" not in kinds:
        return {**actuator, "type": "pd"}
    return {**actuator, "type": "dc_motor",
            "saturation_effort": [g.saturation_effort if g.type == "dc_motor" else math.inf for g in groups],
            "velocity_limit": [g.velocity_limit if g.type == "dc_motor" else math.inf for g in groups]}


def check_preset_names(spec: mujoco.MjSpec, cfg: RobotCfg, source: str) -> None:
    """ValueError naming the preset and every name it expects (envs.presets) that `spec` lacks."""
    if cfg.preset is None:
        return
    preset = presets.get(cfg.preset)
    have = {"joint": {j.name for j in spec.joints}, "body": {b.name for b in spec.bodies},
            "geom": {g.name for g in spec.geoms}, "site": {s.name for s in spec.sites}}
    missing = [f"{kind}s {', '.join(n for n in expected if n not in have[kind])}"
               for kind, expected in preset.names.items() if any(n not in have[kind] for n in expected)]
    if missing:
        raise ValueError(f"robot.preset={cfg.preset}: {source} lacks names of Menagerie's {preset.menagerie_file} "
                         f"that the preset uses: {'; '.join(missing)} (point robot.mjcf at that file, or give "
                         f"the robot section without the preset)")


#: the IMU sensors of observation_source sensors: RobotCfg key -> MuJoCo sensor type
_IMU_SENSORS = {"lin_vel_sensor": mujoco.mjtSensor.mjSENS_VELOCIMETER, "ang_vel_sensor": mujoco.mjtSensor.mjSENS_GYRO,
                "orientation_sensor": mujoco.mjtSensor.mjSENS_FRAMEQUAT}


def with_imu(spec: mujoco.MjSpec, cfg: RobotCfg, source: str) -> mujoco.MjSpec:
    """`spec` with the IMU sensors the section names (a velocimeter, a gyro, a framequat) that it
    lacks, on the site `cfg.imu_site`, or on a site `<body>_imu` added at the origin of the body of
    that name; unchanged without imu_site. ValueError when imu_site is neither."""
    if cfg.imu_site is None:
        return spec
    have = {s.name for s in spec.sensors}
    wanted = {getattr(cfg, key): kind for key, kind in _IMU_SENSORS.items() if getattr(cfg, key) not in have}
    if not wanted:
        return spec
    site = cfg.imu_site
    if site not in {s.name for s in spec.sites}:
        body = next((b for b in spec.bodies if b.name == site), None)
        if body is None:
            raise ValueError(f"robot.imu_site: {source} has no site or body named {site!r} to put the IMU on; its "
                             f"sites: {', '.join(s.name for s in spec.sites if s.name) or 'none'}")
        site = f"{body.name}_imu"
        if site not in {s.name for s in spec.sites}:
            body.add_site(name=site)
    for name, kind in wanted.items():
        spec.add_sensor(name=name, type=kind, objtype=mujoco.mjtObj.mjOBJ_SITE, objname=site)
    return spec


def with_floor(spec: mujoco.MjSpec, floor: str) -> mujoco.MjSpec:
    """`spec` with a ground plane named `floor` if it has no geom of that name (see the module
    docstring); returns the spec."""
    if any(g.name == floor for g in spec.geoms):
        return spec
    plane = spec.worldbody.add_geom()
    plane.name = floor
    plane.type = mujoco.mjtGeom.mjGEOM_PLANE
    plane.size = [0.0, 0.0, 0.05]
    plane.contype = plane.conaffinity = 1  # MuJoCo's defaults, as a Menagerie scene's floor
    return spec


class Robot:
    """A RobotCfg resolved against a compiled model (ids, checked; see the module docstring).

    Attributes: base_body (id), key (keyframe id or None), qpos0 [nq] (the default pose),
    feet (list of geom-id lists, one per foot), termination_geoms, undesired_geoms (geom ids),
    floor (geom id), actuator_qposadr / actuator_dofadr (one per actuator)."""

    def __init__(self, cfg: RobotCfg, mjm: mujoco.MjModel, source: str):
        self.cfg = cfg
        bodies = names(mjm, mujoco.mjtObj.mjOBJ_BODY, mjm.nbody)
        geoms = names(mjm, mujoco.mjtObj.mjOBJ_GEOM, mjm.ngeom)
        if cfg.base_body not in bodies:
            raise ValueError(f"robot.base_body: {source} has no body named {cfg.base_body!r}; its bodies: "
                             f"{', '.join(n for n in bodies if n)}")
        self.base_body = bodies.index(cfg.base_body)
        free = int(mujoco.mjtJoint.mjJNT_FREE)
        free_bodies = [bodies[mjm.jnt_bodyid[j]] for j in range(mjm.njnt) if mjm.jnt_type[j] == free]
        first = mjm.body_jntadr[self.base_body]
        if first < 0 or mjm.jnt_type[first] != free:
            raise ValueError(f"robot.base_body: body {cfg.base_body!r} of {source} has no free joint; bodies with "
                             f"one: {', '.join(free_bodies) or 'none (add <freejoint/> to the base body)'}")
        if mjm.jnt_qposadr[first] != 0:
            raise ValueError(f"robot.base_body: the free joint of {cfg.base_body!r} must be the model's first "
                             f"joint (qpos[0:7]); in {source} it starts at qpos[{mjm.jnt_qposadr[first]}]")
        #: the default pose's velocities [nv]: robot.init_state's joint velocities, else zero
        self.qvel0 = np.zeros(mjm.nv)
        if cfg.init_state is not None:
            self.key, self.qpos0 = None, self._init_state_qpos(cfg.init_state, mjm, source)
        elif cfg.keyframe is None:
            self.key, self.qpos0 = None, mjm.qpos0.copy()
        else:
            keys = names(mjm, mujoco.mjtObj.mjOBJ_KEY, mjm.nkey)
            if cfg.keyframe not in keys:
                raise ValueError(f"robot.keyframe: {source} has no keyframe named {cfg.keyframe!r}; its keyframes: "
                                 f"{', '.join(repr(k) for k in keys) or 'none'} (or robot.keyframe=null for qpos0)")
            self.key = keys.index(cfg.keyframe)
            self.qpos0 = mjm.key_qpos[self.key].copy()
        if cfg.floor_geom not in geoms:
            raise ValueError(f"robot.floor_geom: {source} has no geom named {cfg.floor_geom!r}")
        self.floor = geoms.index(cfg.floor_geom)

        def geoms_of(group_bodies):
            return [[g for g in range(mjm.ngeom) if mjm.geom_bodyid[g] in ids] for ids in group_bodies]

        if cfg.foot_geoms:
            self.feet = [[g] for ids in _match("foot_geoms", cfg.foot_geoms, geoms, "geom") for g in ids]
        else:  # one foot per matched body: the geoms attached to it
            foot_bodies = [b for ids in _match("foot_bodies", cfg.foot_bodies, bodies, "body") for b in ids]
            self.feet = geoms_of([[b] for b in foot_bodies])
            for b, group in zip(foot_bodies, self.feet, strict=True):
                if not group:
                    raise ValueError(f"robot.foot_bodies: body {bodies[b]!r} of {source} has no geoms to touch the "
                                     f"ground with")
        if not self.feet:
            raise ValueError("robot: name the feet (foot_geoms or foot_bodies)")

        def flat(groups):
            return sorted({g for ids in groups for g in ids})

        self.termination_geoms = flat(_match("termination_geoms", cfg.termination_geoms, geoms, "geom")
                                      + geoms_of(_match("termination_bodies", cfg.termination_bodies, bodies,
                                                        "body")))
        self.undesired_geoms = flat(_match("undesired_geoms", cfg.undesired_geoms, geoms, "geom")
                                    + geoms_of(_match("undesired_bodies", cfg.undesired_bodies, bodies, "body")))

        actuators = names(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, mjm.nu)
        if mjm.nu == 0:
            raise ValueError(f"robot: {source} has no actuators: the policy's actions are actuator targets; give "
                             f"them in robot.actuators (groups of joints with type, stiffness, damping, ...)")
        for a in range(mjm.nu):
            j = int(mjm.actuator_trnid[a, 0])
            if mjm.actuator_trntype[a] != int(mujoco.mjtTrn.mjTRN_JOINT) or int(mjm.jnt_type[j]) not in HINGE_SLIDE:
                raise ValueError(f"robot: actuator {actuators[a] or a!r} of {source} does not drive one hinge or slide "
                                 f"joint; a legged task's actions are joint-position targets")
        self.actuator_qposadr = [int(mjm.jnt_qposadr[mjm.actuator_trnid[a, 0]]) for a in range(mjm.nu)]
        #: each actuator's group of cfg.actuators (empty: the MJCF's own actuators)
        self.actuator_groups: list[ActuatorGroup] = []
        if cfg.actuators:
            joints = names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt)
            owner = match_joint_groups(actuator_group_labels(cfg), joints, list(mjm.jnt_type), source)
            self.actuator_groups = [cfg.actuators[owner[int(mjm.actuator_trnid[a, 0])]] for a in range(mjm.nu)]
        scale = cfg.action_scale
        if isinstance(scale, tuple) and len(scale) != mjm.nu:
            raise ValueError(f"robot.action_scale: one number or {mjm.nu} (one per actuator), got {len(scale)}")

    def _init_state_qpos(self, state: InitState, mjm: mujoco.MjModel, source: str) -> np.ndarray:
        """qpos [nq] of `state` over qpos0; fills self.qvel0 [nv] with its joint velocities."""
        qpos = mjm.qpos0.copy()
        if state.pos is not None:
            qpos[0:3] = state.pos
        if state.rot is not None:
            qpos[3:7] = state.rot
        joints = names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt)
        for key, values, out, address in (("joint_pos", state.joint_pos, qpos, mjm.jnt_qposadr),
                                          ("joint_vel", state.joint_vel, self.qvel0, mjm.jnt_dofadr)):
            groups = [(f"robot.init_state.{key}", (pattern,)) for pattern, _ in values]
            for j, k in match_joint_groups(groups, joints, list(mjm.jnt_type), source).items():
                out[address[j]] = values[k][1]
        return qpos

    @staticmethod
    def check_position_servos(mjm: mujoco.MjModel, source: str) -> None:
        """ValueError naming an actuator that is not a position servo (MuJoCo's `<position>`)."""
        for a in range(mjm.nu):
            kp = mjm.actuator_gainprm[a, 0]
            servo = (mjm.actuator_gaintype[a] == int(mujoco.mjtGain.mjGAIN_FIXED)
                     and mjm.actuator_biastype[a] == int(mujoco.mjtBias.mjBIAS_AFFINE)
                     and kp > 0 and mjm.actuator_biasprm[a, 1] == -kp and mjm.actuator_biasprm[a, 0] == 0)
            if not servo:
                name = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, a) or f"#{a}"
                raise ValueError(f"actuator {name!r} of {source} is not a position servo (<position kp=...>), so its "
                                 f"control is not a joint-position target; set task.env.actuator.type=pd with kp and "
                                 f"kd (envs/actuators.py), or give the MJCF position actuators")
