"""Robot sections for the robots people train, under the names MuJoCo Menagerie gives them
(`task.robot.preset=go1` with `task.robot.mjcf=PATH` at the user's copy; envs.robot).

Each preset is the whole robot section of one Menagerie robot file: base body, feet, the parts
whose ground contact ends an episode or is penalised, the IMU (a site, or a body to put one
on: envs.robot with_imu), the default standing pose (`init_state`) and the actuators from the
published motor data (`actuators`, replacing the file's own), and the parameters of the task's
terms that name joints (`term_params`: the humanoid task's pose stds, joint_deviation, dof_acc
and torques joints, in place of those the env class gives for the project's own robot). simrl
ships no Menagerie file:
`names` lists what the preset expects of the file, and a file that lacks any of them is refused
naming them and the preset (envs.robot check_preset_names); tests/data holds MJCF of the
project's own with these names.

Gains. Where mjlab publishes a robot (Go1, G1), its recipe: each joint's armature is its
motor's reflected rotor inertia (rotor inertia x gear ratio^2, Unitree's URDF and motor data),
and the position servo is a critically over-damped second-order system at 10 Hz,
stiffness = armature w^2 and damping = 2 zeta armature w with w = 2 pi 10 rad/s and zeta = 2
(mjlab, asset_zoo/robots/unitree_*/*_constants.py). The effort limits are the motors' peak
torques as Unitree publishes them (and Menagerie's forceranges and ctrlranges repeat). H1 has
no mjlab recipe: Isaac Lab's H1_CFG gains (isaaclab_assets/robots/unitree.py) with Unitree's
torques from Menagerie's h1.xml.
"""

from __future__ import annotations

import dataclasses
import math

#: the servo's natural frequency (rad/s) and damping ratio of mjlab's recipe (module docstring)
NATURAL_FREQ = 2.0 * math.pi * 10.0
DAMPING_RATIO = 2.0


def _motor(armature: float, effort_limit: float) -> dict:
    """A position group's gains for a joint of reflected inertia `armature` (kg m^2): stiffness
    armature w^2 (N m/rad), damping 2 zeta armature w (N m s/rad), and its torque limit (N m)."""
    return {"type": "position", "stiffness": armature * NATURAL_FREQ ** 2,
            "damping": 2.0 * DAMPING_RATIO * armature * NATURAL_FREQ, "armature": armature,
            "effort_limit": effort_limit}


# Go1 and Go2: Unitree's rotor inertia about its axis, 0.000111842 kg m^2 (go1.urdf's rotor links;
# Go2 uses the same motor family); Go1's gearboxes 6:1 at the hip and thigh, 9:1 at the knee
# (mjlab's go1_constants.py); Go2's knee 6.33 x 1.92 (whole_body_tracking's GO2_CFG). Peak
# torques: Go1 23.7 / 35.55 N m, Go2 23.7 / 45.43 N m (Unitree; Menagerie's go1.xml forcerange,
# go2.xml ctrlrange).
_GO_ROTOR = 0.000111842

# G1: the reflected inertias (kg m^2) and peak torques (N m) of its four motor types (mjlab's
# g1_constants.py from Unitree's data); ankles and the waist's roll and pitch are driven by two
# 5020 motors through a linkage: twice the inertia and the torque.
_G1_5020, _G1_7520_14, _G1_7520_22, _G1_4010 = 0.003609725, 0.010177520, 0.025101925, 0.00425

_LEGS4 = ("FR", "FL", "RR", "RL")
_GO_JOINTS = tuple(f"{leg}_{part}_joint" for leg in _LEGS4 for part in ("hip", "thigh", "calf"))

_SIDES = ("left", "right")
_G1_JOINTS = (
    *(f"{s}_{j}_joint" for s in _SIDES for j in ("hip_pitch", "hip_roll", "hip_yaw", "knee", "ankle_pitch",
                                                 "ankle_roll")),
    "waist_yaw_joint", "waist_roll_joint", "waist_pitch_joint",
    *(f"{s}_{j}_joint" for s in _SIDES for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow",
                                                 "wrist_roll", "wrist_pitch", "wrist_yaw")))
_H1_JOINTS = (
    *(f"{s}_{j}" for s in _SIDES for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle")), "torso",
    *(f"{s}_{j}" for s in _SIDES for j in ("shoulder_pitch", "shoulder_roll", "shoulder_yaw", "elbow")))


@dataclasses.dataclass(frozen=True)
class Preset:
    """A robot section for one Menagerie file (see the module docstring)."""

    #: the Menagerie file it is written for (relative to the Menagerie repository)
    menagerie_file: str
    #: the shipped tasks it runs (README's preset table)
    tasks: tuple
    #: the robot section (envs.robot RobotCfg keys)
    section: dict
    #: the names the file must have, by kind: {"joint" | "body" | "geom" | "site": names}
    names: dict
    #: the terms' parameters that name this robot's joints, over the env class's TERM_PARAMS
    #: ({section: {term: {parameter: value}}}, envs/terms.py); a task file's own values win
    term_params: dict = dataclasses.field(default_factory=dict)


def _quadruped(base: str, calf_gear: float, calf_effort: float) -> dict:
    hip = _motor(_GO_ROTOR * 6.0 ** 2, 23.7)
    return {
        "base_body": base, "keyframe": None, "replace_actuators": True,
        # Menagerie's collision geoms are unnamed but the feet: parts by body (a body's own geoms)
        "foot_geoms": list(_LEGS4), "foot_bodies": [],
        "termination_geoms": [], "termination_bodies": [base, ".._hip"],
        "undesired_geoms": [], "undesired_bodies": [".._thigh"],  # a calf body also holds its foot
        "imu_site": "imu",
        "actuators": [{"joints": [".*_hip_joint", ".*_thigh_joint"], **hip},
                      {"joints": [".*_calf_joint"], **_motor(_GO_ROTOR * calf_gear ** 2, calf_effort)}],
        # Menagerie's `home` keyframe
        "init_state": {"pos": [0.0, 0.0, 0.27], "rot": [1.0, 0.0, 0.0, 0.0],
                       "joint_pos": {".*_hip_joint": 0.0, ".*_thigh_joint": 0.9, ".*_calf_joint": -1.8}},
    }


def _quadruped_names(base: str) -> dict:
    return {"joint": _GO_JOINTS, "body": (base, *(f"{leg}_{p}" for leg in _LEGS4 for p in ("hip", "thigh"))),
            "geom": _LEGS4, "site": ("imu",)}


def _pose_std(table: dict) -> dict:
    """The pose term's std per regime (envs/mdp/rewards.py pose) from {joint regex: (walking,
    running) std}: every joint 0.05 rad when told to stand, as mjlab's G1."""
    return {"standing": {".*": 0.05}, "walking": {k: w for k, (w, _) in table.items()},
            "running": {k: r for k, (_, r) in table.items()}}


# The pose term's stds (rad; walking, running) of mjlab's G1 velocity task (mujocolab/mjlab,
# src/mjlab/tasks/velocity/config/g1/env_cfgs.py): hip pitch and knee loosest for the stride,
# hip roll and yaw tighter against sway, ankle roll tight for balance, waist roll and pitch tight
# to keep the torso upright, arms moderate, wrists loose; running about 1.5-2x walking.
_G1_POSE_STD = _pose_std({
    ".*_hip_pitch_joint": (0.3, 0.5), ".*_hip_roll_joint": (0.15, 0.2), ".*_hip_yaw_joint": (0.15, 0.2),
    ".*_knee_joint": (0.35, 0.6), ".*_ankle_pitch_joint": (0.25, 0.35), ".*_ankle_roll_joint": (0.1, 0.15),
    "waist_yaw_joint": (0.2, 0.3), "waist_roll_joint": (0.08, 0.08), "waist_pitch_joint": (0.1, 0.2),
    ".*_shoulder_pitch_joint": (0.15, 0.5), ".*_shoulder_roll_joint": (0.15, 0.2),
    ".*_shoulder_yaw_joint": (0.1, 0.15), ".*_elbow_joint": (0.15, 0.35), ".*_wrist_.*_joint": (0.3, 0.3)})

# H1 has no mjlab velocity task: the G1 stds by the joint's role. H1's ankle is a pitch joint (the
# G1's ankle pitch values) and its torso joint turns about the vertical (the G1's waist yaw).
_H1_POSE_STD = _pose_std({
    ".*_hip_pitch": (0.3, 0.5), ".*_hip_roll": (0.15, 0.2), ".*_hip_yaw": (0.15, 0.2), ".*_knee": (0.35, 0.6),
    ".*_ankle": (0.25, 0.35), "torso": (0.2, 0.3), ".*_shoulder_pitch": (0.15, 0.5),
    ".*_shoulder_roll": (0.15, 0.2), ".*_shoulder_yaw": (0.1, 0.15), ".*_elbow": (0.15, 0.35)})


def _humanoid_terms(pose_std: dict, deviation: tuple, legs: tuple) -> dict:
    """The humanoid task's (envs.humanoid TERM_PARAMS) joint-named parameters for a robot: the
    pose stds, joint_deviation's joints, and the joints of dof_acc and torques."""
    return {"rewards": {"pose": {"std": pose_std}, "joint_deviation": {"joints": deviation},
                        "dof_acc": {"joints": legs}, "torques": {"joints": legs}}}


PRESETS: dict[str, Preset] = {
    "go1": Preset("unitree_go1/go1.xml (or its scene.xml)", ("quadruped",), _quadruped("trunk", 9.0, 35.55),
                  _quadruped_names("trunk")),
    "go2": Preset("unitree_go2/go2.xml (or its scene.xml)", ("quadruped",), _quadruped("base", 6.33 * 1.92, 45.43),
                  _quadruped_names("base")),
    "g1": Preset(
        "unitree_g1/g1.xml (29 joints; or its scene.xml)", ("humanoid",),
        {"base_body": "pelvis", "keyframe": None, "replace_actuators": True,
         "foot_geoms": [], "foot_bodies": ["left_ankle_roll_link", "right_ankle_roll_link"],
         "termination_geoms": [], "termination_bodies": ["pelvis", "torso_link"],
         "undesired_geoms": [], "undesired_bodies": [".*_knee_link", ".*_elbow_link"],
         # on the pelvis, the base: Menagerie's IMU sites changed between versions of the file
         "imu_site": "pelvis",
         "actuators": [
             {"joints": [".*_hip_pitch_joint", ".*_hip_yaw_joint", "waist_yaw_joint"], **_motor(_G1_7520_14, 88.0)},
             {"joints": [".*_hip_roll_joint", ".*_knee_joint"], **_motor(_G1_7520_22, 139.0)},
             {"joints": [".*_ankle_.*_joint", "waist_roll_joint", "waist_pitch_joint"],
              **_motor(2.0 * _G1_5020, 50.0)},
             {"joints": [".*_shoulder_.*_joint", ".*_elbow_joint", ".*_wrist_roll_joint"], **_motor(_G1_5020, 25.0)},
             {"joints": [".*_wrist_pitch_joint", ".*_wrist_yaw_joint"], **_motor(_G1_4010, 5.0)}],
         # mjlab's knees-bent standing pose of the G1
         "init_state": {"pos": [0.0, 0.0, 0.76], "rot": [1.0, 0.0, 0.0, 0.0],
                        "joint_pos": {".*_hip_pitch_joint": -0.312, ".*_knee_joint": 0.669,
                                      ".*_ankle_pitch_joint": -0.363, ".*_elbow_joint": 0.6,
                                      "left_shoulder_pitch_joint": 0.2, "right_shoulder_pitch_joint": 0.2,
                                      "left_shoulder_roll_joint": 0.2, "right_shoulder_roll_joint": -0.2}}},
        {"joint": _G1_JOINTS, "body": ("pelvis", "torso_link", "left_ankle_roll_link", "right_ankle_roll_link",
                                       "left_knee_link", "right_knee_link", "left_elbow_link", "right_elbow_link")},
        # Isaac Lab's G1 (velocity/config/g1/rough_env_cfg.py and flat_env_cfg.py, a 37-joint G1):
        # joint_deviation of the hips' yaw and roll, the torso (here the waist's three joints) and the
        # arms (its elbow roll is the forearm's roll, here a wrist); dof_acc and torques of hips and knees
        _humanoid_terms(_G1_POSE_STD, (".*_hip_yaw_joint", ".*_hip_roll_joint", "waist_.*_joint",
                                       ".*_shoulder_.*_joint", ".*_elbow_joint", ".*_wrist_.*_joint"),
                        (".*_hip_.*", ".*_knee_joint"))),
    "h1": Preset(
        "unitree_h1/h1.xml (or its scene.xml)", ("humanoid",),
        {"base_body": "pelvis", "keyframe": None, "replace_actuators": True,
         "foot_geoms": [], "foot_bodies": ["left_ankle_link", "right_ankle_link"],
         "termination_geoms": [], "termination_bodies": ["torso_link"],  # the pelvis has no collision geom
         "undesired_geoms": [], "undesired_bodies": [".*_knee_link", ".*_elbow_link"],
         "imu_site": "pelvis",  # Menagerie's `imu` site is on the torso, which turns on its joint
         # Isaac Lab's H1_CFG gains; Unitree's torques (Menagerie's h1.xml ctrlrange)
         "actuators": [
             {"joints": [".*_hip_yaw", ".*_hip_roll"], "stiffness": 150.0, "damping": 5.0, "effort_limit": 200.0},
             {"joints": [".*_hip_pitch", "torso"], "stiffness": 200.0, "damping": 5.0, "effort_limit": 200.0},
             {"joints": [".*_knee"], "stiffness": 200.0, "damping": 5.0, "effort_limit": 300.0},
             {"joints": [".*_ankle"], "stiffness": 20.0, "damping": 4.0, "effort_limit": 40.0},
             {"joints": [".*_shoulder_pitch", ".*_shoulder_roll"], "stiffness": 40.0, "damping": 10.0,
              "effort_limit": 40.0},
             {"joints": [".*_shoulder_yaw", ".*_elbow"], "stiffness": 40.0, "damping": 10.0, "effort_limit": 18.0}],
         # Isaac Lab's H1 init_state
         "init_state": {"pos": [0.0, 0.0, 1.05], "rot": [1.0, 0.0, 0.0, 0.0],
                        "joint_pos": {".*_hip_pitch": -0.28, ".*_knee": 0.79, ".*_ankle": -0.52,
                                      ".*_shoulder_pitch": 0.28, ".*_elbow": 0.52}}},
        {"joint": _H1_JOINTS, "body": ("pelvis", "torso_link", "left_ankle_link", "right_ankle_link",
                                       "left_knee_link", "right_knee_link", "left_elbow_link", "right_elbow_link")},
        # Isaac Lab's H1 (velocity/config/h1/rough_env_cfg.py): joint_deviation of the hips' yaw and
        # roll, the arms and the torso; dof_acc and torques of the hips and knees, as for the G1
        _humanoid_terms(_H1_POSE_STD, (".*_hip_yaw", ".*_hip_roll", ".*_shoulder_.*", ".*_elbow", "torso"),
                        (".*_hip_.*", ".*_knee"))),
}


def get(name: str) -> Preset:
    """The preset `name`; ValueError listing the presets."""
    if name not in PRESETS:
        raise ValueError(f"robot.preset: no preset {name!r}; presets: {', '.join(PRESETS)}")
    return PRESETS[name]
