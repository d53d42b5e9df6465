"""Velocity tracking for legged robots on flat ground (`LeggedEnv`), in the manner of
legged_gym / Isaac Lab / mjlab: commanded (vx, vy, yaw rate) resampled every few seconds, joint
position targets around the default pose at 50 Hz over 0.005 s physics steps, reward terms for
tracking and for smooth, efficient, upright motion, termination when a base part touches the
ground or the robot falls. The robot is any MJCF its `robot:` section describes (envs.robot:
base body, feet, keyframe, contact parts, action scale); envs.quadruped and envs.humanoid are
this task on the project's own robots. Domain randomization is configured as terms
(envs.randomization, `randomization=`; by default per-world friction at reset and random
pushes), the actuators as an actuator model (envs.actuators, `actuator=`; by default the MJCF's
own position servos).

The policy's base velocities and projected gravity come from the IMU sensors of the MJCF
(`observation_source="sensors"`, the default; their names are the robot section's
`lin_vel_sensor`, `ang_vel_sensor`, `orientation_sensor`) or from the state (`"state"`):

- sensors: angular velocity from the gyro (`imu_gyro`), projected gravity from the IMU's
  orientation (`imu_quat`, a framequat: world -z rotated into the IMU frame, as Isaac Lab and
  mjlab compute it; an accelerometer also feels the contacts' shocks), linear velocity from a
  velocimeter (`imu_linvel`, as MuJoCo Playground's Go1 does: a real robot has no such sensor,
  it stands for the output of a state estimator). They are MuJoCo's sensordata: after the
  action's physics steps they describe the state the last physics step started from (one
  physics step, 5 ms, old), exactly what a MuJoCo deployment reading `sensordata` after
  `mj_step` sees; after a reset, a forward pass makes them describe the reset state (see
  envs.base). The simulation backends agree on them (sim-to-sim).
- state: the same quantities from qpos and qvel of the current state (free-joint quaternion and
  velocities).

Joint positions and velocities come from the state in both cases. The critic's observations,
the rewards and the terminations always use the true current state (privileged), as in
Isaac Lab and mjlab: `observation_source` changes the policy's observations only."""

import functools
import math
import re
import types

import mujoco
import torch

from envs import ASSETS_DIR
from envs.actuators import ActuatorModel
from envs.base import BatchedEnv, make_sim, per_world_param
from envs.observations import ObservationPipeline, merge
from envs.robot import Robot, RobotCfg, with_floor
from simrl.sim.sensor import sensor_columns

#: where the policy's observations come from (`observation_source`)
OBSERVATION_SOURCES = ("sensors", "state")

DEFAULT_REWARDS = {
    "tracking_lin_vel": 1.0, "tracking_ang_vel": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
    "orientation": -1.0, "torques": -1e-4, "dof_acc": -2.5e-7, "action_rate": -0.01,
    "feet_air_time": 1.0, "undesired_contacts": -1.0,
}


#: the default randomization (legged_gym's): one friction coefficient per world at each reset,
#: the tangential entries of every contact pair; a kick of the base's x, y velocity every 8 s
DEFAULT_RANDOMIZATION = {
    "friction": {"mode": "reset", "range": [0.5, 1.25], "operation": "abs", "shared": True},
    "push": {"mode": "interval", "interval_s": 8.0, "range": [-0.5, 0.5]},
}


#: the policy group's observation terms and their default pipeline (envs.observations): legged_gym's
#: scales and uniform noise amplitudes (times obs_noise); the critic sees the same scales, clean
DEFAULT_POLICY_OBSERVATIONS = {
    "base_lin_vel": {"scale": 2.0, "noise": {"type": "uniform", "scale": 0.2}},
    "base_ang_vel": {"scale": 0.25, "noise": {"type": "uniform", "scale": 0.05}},
    "projected_gravity": {"noise": {"type": "uniform", "scale": 0.05}},
    "commands": {"scale": [2.0, 2.0, 0.25]},
    "joint_pos": {"noise": {"type": "uniform", "scale": 0.01}},
    "joint_vel": {"scale": 0.05, "noise": {"type": "uniform", "scale": 0.075}},
    "last_action": {},
}


def heading_yaw_rate(target: torch.Tensor, heading: torch.Tensor, stiffness: float, lo, hi) -> torch.Tensor:
    """The heading controller's yaw-rate command (legged_gym, Isaac Lab): stiffness times the
    heading error wrapped to [-pi, pi], clipped to [lo, hi]."""
    error = torch.remainder(target - heading + math.pi, 2.0 * math.pi) - math.pi
    return torch.clamp(stiffness * error, lo, hi)


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate world vectors v [N, 3] into the frame of unit quaternions q [N, 4] (w, x, y, z)."""
    w, u = q[:, :1], q[:, 1:]
    return v * (2.0 * w * w - 1.0) - torch.cross(u, v, dim=1) * w * 2.0 + u * (u * v).sum(1, keepdim=True) * 2.0


def _match_joints(mjm: mujoco.MjModel, patterns, option: str, source) -> list[int]:
    """Ids of the hinge and slide joints whose whole name matches one of `patterns` (names or
    regular expressions), in the model's order; ValueError naming a pattern that matches none,
    with the joints the model has."""
    names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j) or "" for j in range(mjm.njnt)]
    hinge_slide = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
    movable = [j for j in range(mjm.njnt) if int(mjm.jnt_type[j]) in hinge_slide]
    chosen = set()
    for pattern in patterns:
        ids = [j for j in movable if re.fullmatch(pattern, names[j])]
        if not ids:
            raise ValueError(f"{option}: no hinge or slide joint of {source} is named {pattern!r} (a name or a "
                             f"regular expression); its joints: {', '.join(names[j] for j in movable)}")
        chosen.update(ids)
    return sorted(chosen)


class LeggedEnv(BatchedEnv):
    """Observation groups: "policy" (9 + 3 + (nq - 7) + (nv - 6) + nu: base linear and angular
    velocity in the base frame, projected gravity, command, joint positions relative to the
    default pose, joint velocities, last action; with noise; the first nine from the IMU sensors
    or the state, `observation_source`; each a named term of the observation pipeline,
    `observations=`, envs.observations: noise, clip, scale, delay, history) and "critic" (the
    same from the current state without noise, plus friction and foot contacts). Reward terms are
    scaled by the policy step dt, as in legged_gym.

    `robot` (a RobotCfg or the mapping of a task's `robot:` section, over the class's `ROBOT`)
    names the MJCF and its parts (envs.robot); `action_scale`, when given, overrides the robot's.
    Reward terms that name joints take lists of names or regular expressions: `deviation_joints`
    (joint_deviation), `acc_joints` (dof_acc; empty: every joint) and `torque_joints` (torques:
    the actuators of those joints; empty: every actuator), as Isaac Lab's asset_cfg joint_names."""

    #: the policy group's observation terms, in the order of its frame (envs.observations)
    POLICY_TERMS = tuple(DEFAULT_POLICY_OBSERVATIONS)
    #: the robot's MJCF when its section gives none
    MJCF = ASSETS_DIR / "quadruped.xml"
    #: the robot section's defaults
    ROBOT = RobotCfg()
    #: the reward weights when none are given
    DEFAULT_REWARDS = DEFAULT_REWARDS
    #: the pose term's per-joint tolerances when the task gives no `pose_std` (none: it must)
    POSE_STD = None
    #: an encoder_bias randomization term offsets the joint positions the policy observes
    supports_encoder_bias = True

    def __init__(self, num_envs: int = 256, device=None, seed: int = 0, decimation: int = 4,
                 episode_length_s: float = 20.0, robot: dict | RobotCfg | None = None,
                 action_scale: float | None = None,
                 command_resample_s: float = 10.0, lin_vel_x: tuple = (-1.0, 1.0), lin_vel_y: tuple = (-0.5, 0.5),
                 ang_vel_yaw: tuple = (-1.0, 1.0), randomization: dict | None = None, actuator: dict | None = None,
                 obs_noise: float = 1.0, observations: dict | None = None, tracking_sigma: float = 0.25,
                 air_time_target: float = 0.5, min_base_height: float = 0.15, joint_pos_noise: float = 0.1,
                 deviation_joints: tuple = (), acc_joints: tuple = (), torque_joints: tuple = (),
                 gait_period: float = 0.0, gait_offsets: tuple = (), gait_stance: float = 0.55,
                 swing_height: float = 0.08, base_height_target: float | None = None,
                 only_positive_rewards: bool = False, upright_sigma: float = 0.2, pose_std: dict | None = None,
                 pose_thresholds: tuple = (0.05, 1.5), heading_command: bool = False,
                 heading_stiffness: float = 0.5, heading_range: tuple = (-math.pi, math.pi),
                 reward_weights: dict | None = None, dtype: str = "float32", nonfinite_actions: str = "error",
                 backend: str = "warp", observation_source: str = "sensors"):
        if observation_source not in OBSERVATION_SOURCES:
            raise ValueError(f"observation_source must be one of {', '.join(map(repr, OBSERVATION_SOURCES))}, "
                             f"got {observation_source!r}")
        self.robot_cfg = robot if isinstance(robot, RobotCfg) else RobotCfg.from_dict(robot, self.ROBOT)
        #: the MJCF file the robot comes from
        self.mjcf_path = self.robot_cfg.mjcf_path(self.MJCF)
        mjm = self._build_model()
        #: the robot section resolved against the model (ids; envs.robot)
        self.robot = Robot(self.robot_cfg, mjm, str(self.mjcf_path))
        #: the sensors the policy's base observations read with observation_source="sensors":
        #: quantity -> (sensor name, MuJoCo sensor type it must have)
        self.imu_sensors = {"lin_vel": (self.robot_cfg.lin_vel_sensor, "velocimeter"),
                            "ang_vel": (self.robot_cfg.ang_vel_sensor, "gyro"),
                            "orientation": (self.robot_cfg.orientation_sensor, "framequat")}
        #: "sensors" or "state": where the policy's base velocities and gravity come from
        self.observation_source = observation_source
        #: columns of sensordata of each IMU quantity (observation_source="sensors")
        self.imu_columns = self._imu_columns(mjm) if observation_source == "sensors" else None
        # the first observation of an episode reads the critic's foot contacts (`_touching`:
        # contact_active and contact_dist) and, from the sensors, the policy's IMU of the reset
        # state: envs.base runs a forward pass of the reset worlds after resets
        self.observed_outputs = (("sensordata",) if observation_source == "sensors" else ()) + (
            "contact_active", "contact_dist")
        if (actuator or {}).get("type", "mujoco") == "mujoco":
            Robot.check_position_servos(mjm, str(self.mjcf_path))
        #: targets -> torques (envs.actuators); pd / dc_motor switch the MJCF's servos off in mjm
        actuator_model = ActuatorModel(actuator, mjm)
        sim = make_sim(mjm, num_envs, device=device, dtype=dtype, backend=backend)
        weights = dict(self.DEFAULT_REWARDS if reward_weights is None else reward_weights)
        super().__init__(sim, num_actions=mjm.nu, decimation=decimation, episode_length_s=episode_length_s,
                         reward_weights=weights, seed=seed, nonfinite_actions=nonfinite_actions)
        dev = self.device
        self.home_qpos = torch.as_tensor(self.robot.qpos0, dtype=torch.float32, device=dev)
        #: the default pose's joint positions (qpos[7:]): the joint observations are relative to it
        self.default_joint_pos = self.home_qpos[7:].clone()
        #: the default pose's positions of the actuated joints: target = these + scale * action
        self.default_targets = self.home_qpos[self.robot.actuator_qposadr].clone()
        scale = self.robot_cfg.action_scale if action_scale is None else action_scale
        self.action_scale = (torch.as_tensor(scale, dtype=torch.float32, device=dev) if isinstance(scale, (list, tuple))
                             else float(scale))
        self.command_ranges = torch.tensor([lin_vel_x, lin_vel_y, ang_vel_yaw], dtype=torch.float32, device=dev)
        self.command_resample_steps = max(1, int(round(command_resample_s / self.step_dt)))
        self._setup_heading(heading_command, heading_stiffness, heading_range)
        self.obs_noise = obs_noise
        self._down = torch.tensor([[0.0, 0.0, -1.0]], device=dev)  # gravity's direction, world frame
        self._commands_scale = torch.tensor([2.0, 2.0, 0.25], device=dev)
        self.tracking_sigma = tracking_sigma
        self.only_positive_rewards = bool(only_positive_rewards)
        self.air_time_target = air_time_target
        self.min_base_height = min_base_height
        self.joint_pos_noise = joint_pos_noise
        # joint_deviation, dof_acc and torques: the joints each reaches (regular expressions; none: all)
        deviation = _match_joints(mjm, deviation_joints, "deviation_joints", self.mjcf_path)
        #: columns of qpos[7:] that joint_deviation penalises
        self._deviation_columns = torch.tensor([int(mjm.jnt_qposadr[j]) - 7 for j in deviation],
                                               dtype=torch.long, device=dev)
        acc = _match_joints(mjm, acc_joints, "acc_joints", self.mjcf_path) if acc_joints else None
        #: columns of qvel[6:] that dof_acc penalises (None: all)
        self._acc_columns = None if acc is None else torch.tensor(
            [int(mjm.jnt_dofadr[j]) - 6 for j in acc], dtype=torch.long, device=dev)
        self._torque_columns = None
        if torque_joints:
            chosen = set(_match_joints(mjm, torque_joints, "torque_joints", self.mjcf_path))
            columns = [a for a in range(mjm.nu) if int(mjm.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                       and int(mjm.actuator_trnid[a, 0]) in chosen]
            if not columns:
                raise ValueError(f"torque_joints {list(torque_joints)}: no actuator of {self.mjcf_path} drives "
                                 f"those joints")
            #: actuators whose torques the torques term penalises (None: all)
            self._torque_columns = torch.tensor(columns, dtype=torch.long, device=dev)
        # dof_pos_limits: the limited hinge and slide joints' columns of qpos[7:] and their ranges
        hinge_slide = (int(mujoco.mjtJoint.mjJNT_HINGE), int(mujoco.mjtJoint.mjJNT_SLIDE))
        limited = [j for j in range(mjm.njnt) if mjm.jnt_limited[j] and int(mjm.jnt_type[j]) in hinge_slide]
        self._limit_columns = torch.tensor([int(mjm.jnt_qposadr[j]) - 7 for j in limited], dtype=torch.long,
                                           device=dev)
        self._limit_low = torch.tensor([mjm.jnt_range[j][0] for j in limited], dtype=torch.float32, device=dev)
        self._limit_high = torch.tensor([mjm.jnt_range[j][1] for j in limited], dtype=torch.float32, device=dev)
        # targets are clamped to ctrlrange where the actuator is ctrllimited, else to the joint's range
        low, high = [], []
        for a in range(mjm.nu):
            j = int(mjm.actuator_trnid[a, 0])
            if mjm.actuator_ctrllimited[a]:
                lo, hi = mjm.actuator_ctrlrange[a]
            elif mjm.jnt_limited[j]:
                lo, hi = mjm.jnt_range[j]
            else:
                lo, hi = -math.inf, math.inf
            low.append(lo)
            high.append(hi)
        self.ctrl_low = torch.tensor(low, dtype=torch.float32, device=dev)
        self.ctrl_high = torch.tensor(high, dtype=torch.float32, device=dev)

        # contact slots of the ground (the floor, and the terrain of subclasses) with each robot part
        contact = sim.contact
        ground = set(self._ground_geoms(mjm))
        geom = contact.geom.cpu().tolist()

        def slots(geom_ids):
            return [s for s in range(len(geom)) if set(geom[s]) & set(geom_ids) and ground & set(geom[s])]

        self.foot_slots = [slots(ids) for ids in self.robot.feet]
        self.trunk_slots = slots(self.robot.termination_geoms)
        self.undesired_slots = slots(self.robot.undesired_geoms)
        self._undesired_index = torch.tensor(self.undesired_slots, dtype=torch.long, device=self.device)
        self._foot_index = self._slot_index(self.foot_slots)
        self._trunk_index = self._slot_index([self.trunk_slots])
        self.num_feet = len(self.foot_slots)
        #: each foot's body (the body of its first geom) and that body's root (feet_slide)
        self._foot_bodies = torch.tensor([int(mjm.geom_bodyid[ids[0]]) for ids in self.robot.feet], dtype=torch.long,
                                         device=dev)
        self._foot_roots = torch.tensor(mjm.body_rootid[self._foot_bodies.cpu().numpy()], dtype=torch.long, device=dev)
        self._setup_gait(gait_period, gait_offsets, gait_stance, swing_height, base_height_target)
        if not upright_sigma > 0.0:
            raise ValueError(f"upright_sigma must be > 0 (the squared tilt at which upright is 1/e), "
                             f"got {upright_sigma}")
        #: upright's kernel width: exp(-|projected gravity_xy|^2 / upright_sigma)
        self.upright_sigma = float(upright_sigma)
        self._setup_pose(mjm, self.POSE_STD if pose_std is None else pose_std, pose_thresholds)

        self.commands = torch.zeros(num_envs, 3, device=dev)
        self.last_actions = torch.zeros(num_envs, self.num_actions, device=dev)
        self.last_qvel = torch.zeros(num_envs, mjm.nv, device=dev)
        self.feet_air_time = torch.zeros(num_envs, self.num_feet, device=dev)
        self.feet_contact_time = torch.zeros(num_envs, self.num_feet, device=dev)
        self.last_biped_contacts = torch.zeros(num_envs, self.num_feet, dtype=torch.bool, device=dev)
        self.last_contacts = torch.zeros(num_envs, self.num_feet, dtype=torch.bool, device=dev)
        self.friction = per_world_param(sim, "cpair_friction")  # [W, npair, 5]
        self.actuator_model = actuator_model
        actuator_model.bind(self)
        self.setup_randomization(DEFAULT_RANDOMIZATION if randomization is None else randomization)
        sizes = dict(zip(self.POLICY_TERMS, (3, 3, 3, 3, mjm.nq - 7, mjm.nv - 6, self.num_actions), strict=True))
        defaults = dict(DEFAULT_POLICY_OBSERVATIONS)
        if self.gait_period > 0:  # the gait clock's sin and cos, after the flat task's terms
            sizes["gait_phase"] = 2
            defaults["gait_phase"] = {}
        #: the policy group's pipeline (envs.observations); obs_noise multiplies every noise amplitude
        self.policy_observations = ObservationPipeline(
            self, "policy", sizes, merge(defaults, (observations or {}).get("policy")), obs_noise)

    def _setup_pose(self, mjm: mujoco.MjModel, pose_std, thresholds):
        """The pose term's per-joint tolerances (mjlab's variable_posture): for each command regime
        (standing, walking, running) a mapping {joint name or regular expression: std (rad or m)}
        that must cover every hinge and slide joint; the regime is chosen by |command_xy| +
        |command_yaw| against `thresholds` (walking from the first, running from the second).
        Checked only when the term is weighted; ValueError naming what is missing."""
        if "pose" not in self.reward_weights:
            return
        walking, running = (float(t) for t in thresholds)
        if not 0.0 <= walking <= running:
            raise ValueError(f"pose_thresholds must be (walking, running) with 0 <= walking <= running, "
                             f"got {list(thresholds)}")
        self._pose_thresholds = (walking, running)
        regimes = ("standing", "walking", "running")
        if not isinstance(pose_std, dict) or set(pose_std) != set(regimes):
            raise ValueError(f"the reward term pose needs task.env.pose_std: a mapping with keys "
                             f"{', '.join(regimes)}, each {{joint name or regular expression: std}}; got {pose_std!r}")
        joints = _match_joints(mjm, (".*",), "pose_std", self.mjcf_path)  # every hinge and slide joint
        names = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, j) or "" for j in joints]
        table = []
        for regime in regimes:
            row = []
            for name in names:  # the first pattern that matches the whole name
                std = next((v for k, v in pose_std[regime].items() if re.fullmatch(k, name)), None)
                if std is None or not float(std) > 0.0:
                    raise ValueError(f"pose_std.{regime}: joint {name!r} of {self.mjcf_path} has "
                                     f"{'no pattern' if std is None else f'std {std} (must be > 0)'}; its "
                                     f"joints: {', '.join(names)}")
                row.append(float(std))
            table.append(row)
        #: [3, joints] each regime's per-joint std; the joints' columns of qpos[7:]
        self._pose_std = torch.tensor(table, dtype=torch.float32, device=self.device)
        self._pose_columns = torch.tensor([int(mjm.jnt_qposadr[j]) - 7 for j in joints], dtype=torch.long,
                                          device=self.device)

    def _setup_gait(self, period, offsets, stance, swing_height, base_height_target):
        """The gait clock of unitree_rl_gym's G1 and H1 tasks (legged_gym/envs/g1/g1_env.py): a phase
        running from 0 to 1 every `period` seconds from each episode's start, each foot's phase
        shifted by its offset; a foot's phase below `stance` is its stance part. With a period, the
        policy and the critic observe sin and cos of 2 pi phase, and the terms gait_contact and
        feet_swing_height can be weighted. ValueError for inconsistent values."""
        if not period >= 0.0:
            raise ValueError(f"gait_period must be >= 0 s (0: no gait clock), got {period}")
        offsets = tuple(float(o) for o in offsets)
        if period > 0 and not offsets:
            defaults = {2: (0.0, 0.5), 4: (0.0, 0.5, 0.5, 0.0)}  # alternating; a trot in the robot's foot order
            if self.num_feet not in defaults:
                raise ValueError(f"gait_period is set but gait_offsets is not: give one phase offset in [0, 1) "
                                 f"per foot ({self.num_feet} feet)")
            offsets = defaults[self.num_feet]
        if period > 0 and len(offsets) != self.num_feet:
            raise ValueError(f"gait_offsets has {len(offsets)} entries, the robot has {self.num_feet} feet "
                             f"({', '.join(self.robot_cfg.foot_bodies or self.robot_cfg.foot_geoms)})")
        if any(not 0.0 <= o < 1.0 for o in offsets):
            raise ValueError(f"gait_offsets must lie in [0, 1) (fractions of the period), got {list(offsets)}")
        if not 0.0 < stance < 1.0:
            raise ValueError(f"gait_stance must lie in (0, 1) (the stance fraction of the period), got {stance}")
        if "gait_contact" in self.reward_weights and period <= 0:
            raise ValueError("the reward term gait_contact needs the gait clock: set task.env.gait_period "
                             "(s, > 0), or remove the term")
        if "base_height" in self.reward_weights and base_height_target is None:
            raise ValueError("the reward term base_height needs task.env.base_height_target (m above the ground)")
        #: the gait clock's period (s; 0: none), each foot's phase offset, the stance fraction
        self.gait_period = float(period)
        self._gait_offsets = torch.tensor(offsets or (0.0,) * self.num_feet, dtype=torch.float32,
                                          device=self.device)
        self.gait_stance = float(stance)
        #: feet_swing_height's target height of a foot body in the air, above the ground under it
        self.swing_height = float(swing_height)
        self.base_height_target = base_height_target

    @property
    def env_friction(self) -> torch.Tensor:
        """[num_envs]: each world's sliding friction, the mean over contact pairs of the first
        tangential entry (one value with the default friction term); the critic observes it."""
        return self.friction[:, :, 0].float().mean(dim=1)

    def action_bounds(self):
        """Target = default + scale * action, clamped to the control range (gymnasium adapter)."""
        return ((self.ctrl_low - self.default_targets) / self.action_scale,
                (self.ctrl_high - self.default_targets) / self.action_scale)

    def _state_loaded(self):
        self._base_cache = self._contact_cache = None

    def _model_spec(self) -> mujoco.MjSpec:
        """The robot's MjSpec with its floor (envs.robot.with_floor); a subclass adds terrain."""
        return with_floor(mujoco.MjSpec.from_file(str(self.mjcf_path)), self.robot_cfg.floor_geom)

    def _build_model(self) -> mujoco.MjModel:
        """The compiled model the env simulates."""
        return self._model_spec().compile()

    def _ground_geoms(self, mjm: mujoco.MjModel) -> list[int]:
        """Geoms that are the ground: contacts with them count as foot, trunk and undesired contacts."""
        return [mjm.geom(self.robot_cfg.floor_geom).id]

    def _base_height(self) -> torch.Tensor:
        """Height of the base above the ground under it [num_envs] (the floor is at z = 0)."""
        return self.sim.qpos[:, 2].float()

    def _ground_z(self, xy: torch.Tensor) -> torch.Tensor:
        """Height of the ground [...] under points xy [..., 2] (the floor: z = 0; terrain: its surface)."""
        return torch.zeros_like(xy[..., 0])

    def _foot_heights(self) -> torch.Tensor:
        """[num_envs, num_feet]: each foot body's origin above the ground under it (xpos: like the
        contacts, of the state the last physics step started from)."""
        pos = self.sim.view("xpos")[:, self._foot_bodies].float()
        return pos[..., 2] - self._ground_z(pos[..., :2])

    def gait_phase(self) -> torch.Tensor:
        """[num_envs, num_feet]: each foot's phase in [0, 1) of the gait clock at the current
        time of its episode (`_setup_gait`); stance while below gait_stance."""
        t = self.episode_length_buf.float() * self.step_dt
        phase = torch.remainder(t / self.gait_period, 1.0) if self.gait_period > 0 else torch.zeros_like(t)
        return torch.remainder(phase[:, None] + self._gait_offsets, 1.0)

    def _imu_columns(self, mjm: mujoco.MjModel) -> dict[str, slice]:
        """sensordata columns of each IMU quantity; ValueError naming a sensor the MJCF lacks or
        that has another type."""
        columns = {}
        for quantity, (name, kind) in self.imu_sensors.items():
            i = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_SENSOR, name)
            if i < 0:
                raise ValueError(f"observation_source='sensors' reads the {quantity} from a {kind} sensor named "
                                 f"{name!r}, which {self.mjcf_path} does not define (its sensors: "
                                 f"{[mjm.sensor(k).name for k in range(mjm.nsensor)] or 'none'}); add "
                                 f"<{kind} name=\"{name}\" .../> to its <sensor> section, name yours in "
                                 f"task.robot.{quantity}_sensor, or set "
                                 f"task.env.observation_source=state")
            found = mujoco.mjtSensor(int(mjm.sensor_type[i])).name.removeprefix("mjSENS_").lower()
            if found != kind:
                raise ValueError(f"observation_source='sensors' reads the {quantity} from sensor {name!r} of "
                                 f"{self.mjcf_path}, which is a {found}, not a {kind}")
            columns[quantity] = sensor_columns(mjm, name)
        return columns

    # ------------------------------------------------------------------------ state helpers
    def _imu(self):
        """Base linear and angular velocity in the IMU frame and projected gravity, as the IMU
        sensors read them (sensordata: one physics step old after a step, see the module
        docstring)."""
        data = self.sim.sensordata.float()
        c = self.imu_columns
        down = self._down.expand(self.num_envs, 3)
        return data[:, c["lin_vel"]], data[:, c["ang_vel"]], quat_rotate_inverse(data[:, c["orientation"]], down)

    def _state_changed(self):
        self._base_cache = self._contact_cache = None  # a push changed the velocities

    def _base(self):
        """Base linear/angular velocity in the base frame and projected gravity; computed once
        per state (reward terms, observations and terminations share it)."""
        if getattr(self, "_base_cache", None) is not None:
            return self._base_cache
        q, v = self.sim.qpos.float(), self.sim.qvel.float()
        quat = q[:, 3:7]
        lin_vel = quat_rotate_inverse(quat, v[:, 0:3])
        ang_vel = v[:, 3:6]  # free-joint angular velocity is already in the body frame
        gravity = quat_rotate_inverse(quat, self._down.expand(len(q), 3))
        self._base_cache = (lin_vel, ang_vel, gravity)
        return self._base_cache

    def _slot_index(self, slot_lists) -> torch.Tensor:
        """[len(slot_lists), longest] slot indices, padded with the index of an always-false column."""
        pad = self.sim.view("contact_active").shape[1]
        longest = max((len(s) for s in slot_lists), default=0)
        return torch.tensor([s + [pad] * (longest - len(s)) for s in slot_lists], dtype=torch.long,
                            device=self.device).reshape(len(slot_lists), longest)

    def _touching(self) -> torch.Tensor:
        """[num_envs, ncon + 1] bool: slots in contact (dist < 0), and a false column for padding;
        computed once per state."""
        if getattr(self, "_contact_cache", None) is None:
            active = (self.sim.view("contact_active") != 0) & (self.sim.view("contact_dist") < 0.0)
            # in a tuple: a cache, not per-world state for state_dict (envs.base)
            self._contact_cache = (torch.cat([active, torch.zeros_like(active[:, :1])], dim=1),)
        return self._contact_cache[0]

    def _in_contact(self, slot_index: torch.Tensor) -> torch.Tensor:
        """[num_envs, groups] bool: any slot of each row of `slot_index` (`_slot_index`) in contact."""
        return self._touching()[:, slot_index].any(dim=2)

    # ------------------------------------------------------------------------------ the task
    def _apply_actions(self, actions):
        self._base_cache = self._contact_cache = None  # the state is about to change
        target = self.default_targets + self.action_scale * actions
        self.actuator_model.apply(torch.clamp(target, self.ctrl_low, self.ctrl_high))

    def reset(self):
        obs = super().reset()
        self.policy_observations.commit()
        return obs

    def step(self, actions):
        self._prestep_qvel = self.sim.qvel.float().clone()
        out = super().step(actions)
        self.policy_observations.commit()  # the frame of the observations step returns
        self.last_actions[:] = self.actions  # as applied (non-finite entries repaired), zero where reset
        # command resampling and pushes on each world's own schedule
        due = self.episode_length_buf % self.command_resample_steps == 0
        if self.sync_free:  # every world draws, those due keep their draw
            drawn = ("commands", "world_draws") + (("heading_target",) if self.heading_command else ())
            with self._rows_only(due, only=drawn) as every:
                self._sample_commands(every)
        else:
            resample = due.nonzero(as_tuple=False).squeeze(-1)
            if resample.numel():
                self._sample_commands(resample)
        self._base_cache = self._contact_cache = None  # resets and interval terms changed the state
        return out

    def _observations(self):
        if self.heading_command:  # a function of the state: recomputing it for the same state changes nothing
            self._update_heading_commands()
        q, v = self.sim.qpos.float(), self.sim.qvel.float()
        # the policy's joint positions carry the encoder bias of an encoder_bias term; the critic's are true
        q_seen = q + self.encoder_bias if hasattr(self, "encoder_bias") else q

        commands_scale = self._commands_scale
        lin_vel, ang_vel, gravity = self._base()
        privileged = torch.cat([lin_vel * 2.0, ang_vel * 0.25, gravity, self.commands * commands_scale,
                                q[:, 7:] - self.default_joint_pos, v[:, 6:] * 0.05, self.last_actions], dim=1)
        seen = self._imu() if self.observation_source == "sensors" else (lin_vel, ang_vel, gravity)
        # the terms in POLICY_TERMS order, unscaled: the pipeline scales them
        terms = [*seen, self.commands, q_seen[:, 7:] - self.default_joint_pos, v[:, 6:], self.last_actions]
        if self.gait_period > 0:  # the clock of the first foot: the others' are fixed offsets from it
            angle = 2.0 * math.pi * self.gait_phase()[:, :1]
            clock = torch.cat([torch.sin(angle), torch.cos(angle)], dim=1)
            terms.append(clock)
            privileged = torch.cat([privileged, clock], dim=1)
        policy = self.policy_observations(terms)
        feet = self._in_contact(self._foot_index).float()
        critic = torch.cat([privileged, self.env_friction[:, None], feet], dim=1)
        return {"policy": policy, "critic": critic}

    def termination_terms(self) -> dict[str, torch.Tensor]:
        """The failure conditions [num_envs] bool of the current state, by name: `base_contact`
        (a termination geom touches the ground), `base_height` (the base below min_base_height
        over the ground under it), `upside_down` (the base's z axis points down)."""
        none = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        _, _, gravity = self._base()
        return {"base_contact": self._in_contact(self._trunk_index).squeeze(1) if self.trunk_slots else none,
                "base_height": self._base_height() < self.min_base_height,
                "upside_down": gravity[:, 2] > 0.0}

    def _terminated(self):
        terms = self.termination_terms()
        #: the last termination_terms() (simrl.rl.evaluate counts the falls by cause); a read-only
        #: mapping, not a dict: no step depends on it, so it is no part of state_dict()
        self.termination_causes = types.MappingProxyType(terms)
        return functools.reduce(torch.logical_or, terms.values())

    def _sample_commands(self, env_ids):
        lo, hi = self.command_ranges[:, 0], self.command_ranges[:, 1]
        self.commands[env_ids] = lo + (hi - lo) * self.rand_worlds(env_ids, 3)
        if self.heading_command:
            lo, hi = self.heading_range
            self.heading_target[env_ids] = lo + (hi - lo) * self.rand_worlds(env_ids, 1)[:, 0]

    # ------------------------------------------------------------------------ heading commands
    def _setup_heading(self, enabled: bool, stiffness: float, heading_range) -> None:
        """Heading commands (legged_gym `heading_command`, Isaac Lab UniformVelocityCommand
        `heading_command`): each world draws a target heading with its velocity command, and its
        yaw-rate command is stiffness * (target - heading), wrapped to [-pi, pi] and clipped to
        the ang_vel_yaw range, recomputed from the state before every observation. The robot
        turns toward the target and then walks straight; a drawn yaw rate would walk it in
        circles (radius |v| / |yaw rate|), which holds back the terrain curriculum's distance
        rule (docs/RESULTS.md, quadruped_rough)."""
        #: whether the yaw-rate command follows a target heading (heading_command)
        self.heading_command = bool(enabled)
        if not self.heading_command:
            return
        if not stiffness > 0.0:
            raise ValueError(f"heading_stiffness must be > 0 (yaw-rate command per radian of heading error), "
                             f"got {stiffness}")
        lo, hi = (float(x) for x in heading_range)
        if not -math.pi <= lo <= hi <= math.pi:
            raise ValueError(f"heading_range must be [lo, hi] with -pi <= lo <= hi <= pi, got {list(heading_range)}")
        self.heading_stiffness, self.heading_range = float(stiffness), (lo, hi)
        #: each world's target heading (rad, world frame: the angle of the base's x axis about z)
        self.heading_target = torch.zeros(self.num_envs, device=self.device)

    def base_heading(self) -> torch.Tensor:
        """[num_envs] the heading of the base: atan2 of its x axis's y and x in the world frame
        (the free joint's quaternion w, x, y, z; Isaac Lab's `heading_w`)."""
        w, x, y, z = self.sim.qpos[:, 3:7].float().unbind(dim=1)
        return torch.atan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))

    def _update_heading_commands(self) -> None:
        lo, hi = self.command_ranges[2]
        self.commands[:, 2] = heading_yaw_rate(self.heading_target, self.base_heading(), self.heading_stiffness, lo, hi)

    def _reset_envs(self, env_ids):
        self._base_cache = self._contact_cache = None
        n = env_ids.numel()
        qpos = self.home_qpos.expand(n, -1).clone()
        yaw = (self.rand_worlds(env_ids, 1)[:, 0] * 2 - 1) * math.pi
        qpos[:, 3] = torch.cos(yaw / 2)
        qpos[:, 6] = torch.sin(yaw / 2)
        qpos[:, 7:] += (self.rand_worlds(env_ids, self.default_joint_pos.numel()) - 0.5) * (2 * self.joint_pos_noise)
        self.sim.qpos[env_ids] = qpos.to(self.sim.qpos.dtype)
        self.sim.qvel[env_ids] = ((self.rand_worlds(env_ids, self.sim.nv) - 0.5) * 0.2).to(self.sim.qvel.dtype)
        self.sim.ctrl[env_ids] = self.default_targets.to(self.sim.ctrl.dtype)
        self._sample_commands(env_ids)
        self.last_actions[env_ids] = 0.0
        self.last_qvel[env_ids] = 0.0
        self.feet_air_time[env_ids] = 0.0
        self.feet_contact_time[env_ids] = 0.0
        self.last_biped_contacts[env_ids] = False
        self.last_contacts[env_ids] = False
        if hasattr(self, "policy_observations"):  # not yet during the constructor's randomization
            self.policy_observations.reset(env_ids)

    def step_metrics(self) -> dict[str, torch.Tensor]:
        """Velocity tracking errors [num_envs]: |command_xy - v_xy| (m/s), |command_yaw - w_z| (rad/s)."""
        lin_vel, ang_vel, _ = self._base()
        return {"lin_vel_tracking_error": (self.commands[:, :2] - lin_vel[:, :2]).norm(dim=1),
                "yaw_rate_tracking_error": (self.commands[:, 2] - ang_vel[:, 2]).abs()}

    # ------------------------------------------------------------------------- reward terms
    def _reward_tracking_lin_vel(self):
        lin_vel, _, _ = self._base()
        err = ((self.commands[:, :2] - lin_vel[:, :2]) ** 2).sum(dim=1)
        return torch.exp(-err / self.tracking_sigma) * self.step_dt

    def _reward_tracking_ang_vel(self):
        _, ang_vel, _ = self._base()
        err = (self.commands[:, 2] - ang_vel[:, 2]) ** 2
        return torch.exp(-err / self.tracking_sigma) * self.step_dt

    def _reward_lin_vel_z(self):
        lin_vel, _, _ = self._base()
        return lin_vel[:, 2] ** 2 * self.step_dt

    def _reward_ang_vel_xy(self):
        _, ang_vel, _ = self._base()
        return (ang_vel[:, :2] ** 2).sum(dim=1) * self.step_dt

    def _reward_orientation(self):
        _, _, gravity = self._base()
        return (gravity[:, :2] ** 2).sum(dim=1) * self.step_dt

    def _reward_torques(self):
        torque = self.actuator_model.applied_torque()
        if self._torque_columns is not None:
            torque = torque[:, self._torque_columns]
        return (torque ** 2).sum(dim=1) * self.step_dt

    def _reward_dof_acc(self):
        acc = (self.sim.qvel.float()[:, 6:] - self._prestep_qvel[:, 6:]) / self.step_dt
        if self._acc_columns is not None:
            acc = acc[:, self._acc_columns]
        return (acc ** 2).sum(dim=1) * self.step_dt

    def _reward_feet_slide(self):
        """Isaac Lab's feet_slide: the horizontal speed (m/s) of each foot body's centre of mass,
        summed over the feet on the ground. From cvel (MuJoCo's: angular and linear velocity
        about subtree_com of the body's root) moved to xipos: v = lin + ang x (xipos - com);
        like the contacts, of the state the last physics step started from."""
        bodies = self._foot_bodies
        cvel = self.sim.view("cvel")[:, bodies].float()
        offset = self.sim.view("xipos")[:, bodies].float() - self.sim.view("subtree_com")[:, self._foot_roots].float()
        speed = (cvel[..., 3:5] + torch.linalg.cross(cvel[..., :3], offset)[..., :2]).norm(dim=-1)
        return (speed * self._in_contact(self._foot_index)).sum(dim=1) * self.step_dt

    def _reward_action_rate(self):
        return ((self.actions - self.last_actions) ** 2).sum(dim=1) * self.step_dt

    def _reward_feet_air_time(self):
        contact = self._in_contact(self._foot_index)
        first_contact = contact & ~self.last_contacts & (self.feet_air_time > 0)
        self.feet_air_time += self.step_dt
        reward = ((self.feet_air_time - self.air_time_target) * first_contact).sum(dim=1)
        reward *= self.commands[:, :2].norm(dim=1) > 0.1  # no reward for stepping in place
        self.feet_air_time *= ~contact
        self.last_contacts = contact
        return reward * self.step_dt

    def _reward_undesired_contacts(self):
        if not self.undesired_slots:
            return torch.zeros(self.num_envs, device=self.device)
        # the number of slots in contact, gathered at once (one index per slot costs a launch
        # each, thousands on terrain)
        return self._touching()[:, self._undesired_index].float().sum(dim=1) * self.step_dt

    def _reward_feet_air_time_biped(self):
        """Isaac Lab's feet_air_time_positive_biped: while exactly one foot is on the ground, the
        shortest time any foot has spent in its current mode (in the air or on the ground),
        capped at air_time_target (Isaac Lab's threshold); nothing for small commands."""
        contact = self._in_contact(self._foot_index)
        # a foot's time in the air or on the ground, each reset when the mode changes
        zero = torch.zeros_like(self.feet_air_time)
        self.feet_air_time = torch.where(contact, zero, self.feet_air_time + self.step_dt)
        touched_before = torch.where(self.last_biped_contacts, self.feet_contact_time, zero)
        self.feet_contact_time = torch.where(contact, touched_before + self.step_dt, zero)
        self.last_biped_contacts = contact
        in_mode = torch.where(contact, self.feet_contact_time, self.feet_air_time)
        single_stance = contact.sum(dim=1) == 1
        reward = torch.where(single_stance, in_mode.min(dim=1).values, torch.zeros_like(in_mode[:, 0]))
        reward = reward.clamp(max=self.air_time_target) * (self.commands[:, :2].norm(dim=1) > 0.1)
        return reward * self.step_dt

    def _reward_joint_deviation(self):
        """Isaac Lab's joint_deviation_l1: sum of |q - default| over `deviation_joints`."""
        q = self.sim.qpos.float()[:, 7:]
        cols = self._deviation_columns
        return (q[:, cols] - self.default_joint_pos[cols]).abs().sum(dim=1) * self.step_dt

    def _reward_dof_pos_limits(self):
        """Isaac Lab's joint_pos_limits: how far the limited joints are beyond their ranges."""
        q = self.sim.qpos.float()[:, 7:][:, self._limit_columns]
        out = (self._limit_low - q).clamp(min=0.0) + (q - self._limit_high).clamp(min=0.0)
        return out.sum(dim=1) * self.step_dt

    def _reward_termination(self):
        """1 on the step a world fails (terminations, not time-outs): Isaac Lab's termination
        penalty with a negative weight."""
        return self._terminated().float()

    def _reward_gait_contact(self):
        """unitree_rl_gym's G1 `contact`: the number of feet whose ground contact matches the gait
        clock (on the ground in the stance part of its phase, in the air in the swing part)."""
        stance = self.gait_phase() < self.gait_stance
        return (stance == self._in_contact(self._foot_index)).float().sum(dim=1) * self.step_dt

    def _reward_feet_swing_height(self):
        """unitree_rl_gym's G1 feet_swing_height: (foot height - swing_height)^2 summed over the
        feet in the air."""
        airborne = ~self._in_contact(self._foot_index)
        return ((self._foot_heights() - self.swing_height) ** 2 * airborne).sum(dim=1) * self.step_dt

    def _reward_base_height(self):
        """legged_gym's base_height: (base height above the ground - base_height_target)^2."""
        return (self._base_height() - self.base_height_target) ** 2 * self.step_dt

    def _reward_upright(self):
        """mjlab's upright: exp(-|projected gravity_xy|^2 / upright_sigma), 1 when the base is level
        (weight it positive; mjlab reads the torso, this the robot's base body)."""
        _, _, gravity = self._base()
        return torch.exp(-(gravity[:, :2] ** 2).sum(dim=1) / self.upright_sigma) * self.step_dt

    def _reward_pose(self):
        """mjlab's variable_posture: exp(-mean over the joints of ((q - default) / std)^2), each
        joint's std that of the world's command regime (`pose_std`, `pose_thresholds`): tight
        when told to stand, looser to walk and to run (weight it positive)."""
        speed = self.commands[:, :2].norm(dim=1) + self.commands[:, 2].abs()
        walking, running = self._pose_thresholds
        regime = (speed >= walking).long() + (speed >= running).long()
        cols = self._pose_columns
        error = (self.sim.qpos.float()[:, 7:][:, cols] - self.default_joint_pos[cols]) / self._pose_std[regime]
        return torch.exp(-(error ** 2).mean(dim=1)) * self.step_dt

    def _reward_alive(self):
        """unitree_rl_gym's alive: 1 per second the episode runs (weight it positive)."""
        return torch.full((self.num_envs,), self.step_dt, device=self.device)
