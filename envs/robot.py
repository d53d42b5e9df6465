"""The `robot:` section of a legged task: which MJCF to load and what its parts are called.

    robot:
      mjcf: ~/menagerie/unitree_go1/scene.xml   # null: the task's own asset
      base_body: trunk                          # the body of the free joint
      keyframe: home                            # the default pose (null: qpos0)
      foot_geoms: [FR, FL, RR, RL]              # or foot_bodies: one foot per entry
      termination_bodies: [trunk]               # ground contact ends the episode
      undesired_geoms: [".*_thigh"]             # ground contact is penalised
      action_scale: 0.25                        # target = default + scale * action

Every name may be a regular expression (Python `re.fullmatch`, as Isaac Lab's body names are):
`".*_foot"` selects every geom (or body) whose whole name matches, in the model's order. A name
that matches nothing is an error listing what the model has. Contacts are counted by geom: a
body entry stands for the geoms attached to that body itself (not to its children).

What the task needs of the model, checked when it loads (`Robot`, with an error that names the
problem and lists the candidates):

- `base_body` has a free joint, and it is the model's first joint (qpos[0:7], qvel[0:6]): the
  base pose, velocities and the joint-position observations (qpos[7:]) are read from there.
- `keyframe` exists (its qpos is the default pose: spawn, action offset, joint observations).
- every actuator drives one hinge or slide joint (the action is that joint's position target);
  with the default actuator model (`task.env.actuator.type: mujoco`) they are position servos
  (MuJoCo's `<position>`: bias = -kp q - kv qd); for motors use `type: pd` with kp and kd.
- a ground plane named `floor_geom`; a model without one (a Menagerie robot file without its
  scene) gets a plane of that name with MjSpec (contype and conaffinity 1, MuJoCo's defaults,
  as the floor of a Menagerie scene).
- the IMU sensors the policy reads with `observation_source: sensors` (names below), or set
  `task.env.observation_source: state`.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import mujoco

from envs.model_names import HINGE_SLIDE, names

#: the fields of a robot section that list MJCF names (and the object each names)
_GEOM_LISTS = ("foot_geoms", "termination_geoms", "undesired_geoms")
_BODY_LISTS = ("foot_bodies", "termination_bodies", "undesired_bodies")


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
        for key in (*_GEOM_LISTS, *_BODY_LISTS):
            if key in values:
                value = values[key]
                values[key] = (value,) if isinstance(value, str) else tuple(value or ())
        if isinstance(values.get("action_scale"), (list, tuple)):
            values["action_scale"] = tuple(float(v) for v in values["action_scale"])
        # a section that names the feet replaces the defaults' feet of either kind
        if "foot_geoms" in values and "foot_bodies" not in values:
            values["foot_bodies"] = ()
        if "foot_bodies" in values and "foot_geoms" not in values:
            values["foot_geoms"] = ()
        cfg = dataclasses.replace(base, **values)
        if cfg.foot_geoms and cfg.foot_bodies:
            raise ValueError(f"robot: give foot_geoms or foot_bodies, not both (foot_geoms={list(cfg.foot_geoms)}, "
                             f"foot_bodies={list(cfg.foot_bodies)}; empty the other, e.g. task.robot.foot_geoms=[])")
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
        if cfg.keyframe is None:
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
            raise ValueError(f"robot: {source} has no actuators: the policy's actions are actuator targets")
        for a in range(mjm.nu):
            j = int(mjm.actuator_trnid[a, 0])
            if mjm.actuator_trntype[a] != int(mujoco.mjtTrn.mjTRN_JOINT) or int(mjm.jnt_type[j]) not in HINGE_SLIDE:
                raise ValueError(f"robot: actuator {actuators[a] or a!r} of {source} does not drive one hinge or slide "
                                 f"joint; a legged task's actions are joint-position targets")
        self.actuator_qposadr = [int(mjm.jnt_qposadr[mjm.actuator_trnid[a, 0]]) for a in range(mjm.nu)]
        scale = cfg.action_scale
        if isinstance(scale, tuple) and len(scale) != mjm.nu:
            raise ValueError(f"robot.action_scale: one number or {mjm.nu} (one per actuator), got {len(scale)}")

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
