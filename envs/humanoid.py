"""Velocity tracking for the project's humanoid (envs/assets/humanoid23.xml, a 23-joint
G1-class biped): the legged task of envs.legged (commands, observations, randomization,
actuator models as for the quadruped) with a humanoid's robot section and reward terms.

- Robot: base body `pelvis`; feet `left_ankle_roll_link` and `right_ankle_roll_link` (their box
  geoms); the pelvis, torso or head touching the ground ends the episode, as does the pelvis
  below the base_height termination's min_height (0.4 m; it stands at 0.77 m) or tilting past
  horizontal; thighs,
  shins, arms and hands touching it are undesired contacts; the `home` keyframe is the default
  pose; action scale 0.25 rad (unitree_rl_gym's for its G1).
- Rewards (envs/mdp/rewards.py): mjlab's G1 velocity terms (its velocity task,
  config/g1/env_cfgs.py): tracking of (vx, vy) and yaw rate (exp(-err^2 / 0.25), std 0.5) weighted 2 each, `upright`
  (exp(-|gravity_xy|^2 / 0.2)) and `pose` (mjlab's variable_posture: each joint's distance from the
  default pose over a std chosen by the command's regime, POSE_STD) weighted 1, an action-rate
  penalty of -0.1 (20 times Isaac Lab's), the angular-velocity penalty, the feet's sliding speed
  while on the ground (`feet_slide`), joint-limit violations and undesired contacts; no
  termination penalty. With them and an initial action noise of 0.5 the humanoid walks on
  command (docs/notes/results-2026.md, humanoid); Isaac Lab's G1 terms (flat_env_cfg.py over
  rough_env_cfg.py: flat orientation, lin_vel_z, hip and knee torques and accelerations
  (`joints` of torques and dof_acc), the biped air time up to 0.4 s, joint deviation of the
  hips' yaw and roll, waist and arms, termination -200) taught it to stand only; they keep this
  robot's parameters (TERM_PARAMS) when a task lists them. Weights in tasks/humanoid.yaml.
- Commands: vx in [-0.5, 1.0] m/s, vy in [-0.3, 0.3] m/s, yaw rate in [-1, 1] rad/s.
"""

from envs import ASSETS_DIR
from envs.legged import LeggedEnv
from envs.robot import RobotCfg

#: the robot section of the project's humanoid
HUMANOID = RobotCfg(base_body="pelvis", keyframe="home", foot_bodies=("left_ankle_roll_link", "right_ankle_roll_link"),
                    termination_geoms=("pelvis", "torso", "head"),
                    undesired_geoms=(".*_thigh", ".*_shin", ".*_upper_arm", ".*_forearm", ".*_hand"),
                    action_scale=0.25)

#: joints held near the default pose by joint_deviation (Isaac Lab's G1: hips' yaw and roll, torso, arms)
DEVIATION_JOINTS = (".*_hip_yaw", ".*_hip_roll", "waist_yaw", ".*_shoulder_.*", ".*_elbow", ".*_wrist_roll")

#: joints whose accelerations and torques are penalised (Isaac Lab's G1 flat task: hips and knees)
LEG_JOINTS = (".*_hip_.*", ".*_knee")

#: the reward terms when the task gives none: mjlab's G1 velocity recipe
DEFAULT_REWARDS = {name: {"weight": weight} for name, weight in {
    "tracking_lin_vel": 2.0, "tracking_ang_vel": 2.0, "upright": 1.0, "pose": 1.0, "ang_vel_xy": -0.05,
    "action_rate": -0.1, "feet_slide": -0.1, "dof_pos_limits": -1.0, "undesired_contacts": -1.0,
}.items()}


#: the pose term's per-joint std (rad) in each command regime: mjlab's G1 values (its
#: velocity task, config/g1/env_cfgs.py) for the joints this robot shares with the G1. Hips'
#: pitch and knees loosest for the stride, hip roll and yaw tighter against sway, ankle roll
#: tight for balance; every joint 0.05 when told to stand.
POSE_STD = {
    "standing": {".*": 0.05},
    "walking": {".*_hip_pitch": 0.3, ".*_hip_roll": 0.15, ".*_hip_yaw": 0.15, ".*_knee": 0.35,
                ".*_ankle_pitch": 0.25, ".*_ankle_roll": 0.1, "waist_yaw": 0.2, ".*_shoulder_pitch": 0.15,
                ".*_shoulder_roll": 0.15, ".*_shoulder_yaw": 0.1, ".*_elbow": 0.15, ".*_wrist_roll": 0.3},
    "running": {".*_hip_pitch": 0.5, ".*_hip_roll": 0.2, ".*_hip_yaw": 0.2, ".*_knee": 0.6,
                ".*_ankle_pitch": 0.35, ".*_ankle_roll": 0.15, "waist_yaw": 0.3, ".*_shoulder_pitch": 0.5,
                ".*_shoulder_roll": 0.2, ".*_shoulder_yaw": 0.15, ".*_elbow": 0.35, ".*_wrist_roll": 0.3},
}


class HumanoidEnv(LeggedEnv):
    """LeggedEnv on the project's humanoid; observation groups "policy" (81) and "critic" (84)."""

    MJCF = ASSETS_DIR / "humanoid23.xml"
    ROBOT = HUMANOID
    REWARDS = DEFAULT_REWARDS
    #: the humanoid's own defaults of the terms' parameters (envs/terms.py); a robot preset's
    #: joint-named ones replace them (envs.presets term_params)
    TERM_PARAMS = {
        "commands": {"base_velocity": {"lin_vel_x": (-0.5, 1.0), "lin_vel_y": (-0.3, 0.3), "ang_vel_yaw": (-1.0, 1.0)}},
        "rewards": {"pose": {"std": POSE_STD}, "feet_air_time": {"threshold": 0.4},
                    "feet_air_time_biped": {"threshold": 0.4}, "joint_deviation": {"joints": DEVIATION_JOINTS},
                    "dof_acc": {"joints": LEG_JOINTS}, "torques": {"joints": LEG_JOINTS}},
        # the pelvis stands at 0.77 m
        "terminations": {"base_height": {"min_height": 0.4}},
    }
