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
Isaac Lab and mjlab: `observation_source` changes the policy's observations only.

The task's parts are terms (envs/terms.py), listed in the task file: the velocity command
(envs/mdp/commands.py), the reward terms (envs/mdp/rewards.py), the terminations
(envs/mdp/terminations.py), the randomization events (envs/mdp/events.py) and the observation
terms (envs/mdp/observations.py). This class holds the robot's state they read (base frame
velocities, contacts, heights) and composes them."""

import math

import mujoco
import numpy as np
import torch

from envs import ASSETS_DIR, presets, terms
from envs.actuators import ActuatorModel
from envs.base import BatchedEnv, make_sim, per_world_param
from envs.mdp import commands as command_terms
from envs.mdp import observations as obs
from envs.mdp import rewards as reward_terms
from envs.mdp import terminations as termination_terms
from envs.model_names import match_joints
from envs.observations import ObservationPipeline, merge
from envs.robot import (
    Robot,
    RobotCfg,
    actuator_model_cfg,
    check_preset_names,
    with_actuators,
    with_floor,
    with_imu,
)
from simrl.sim.io import sensor_columns

#: where the policy's observations come from (`observation_source`)
OBSERVATION_SOURCES = ("sensors", "state")

#: the reward terms when the task gives none: legged_gym's (envs/mdp/rewards.py)
DEFAULT_REWARDS = {name: {"weight": weight} for name, weight in {
    "tracking_lin_vel": 1.0, "tracking_ang_vel": 0.5, "lin_vel_z": -2.0, "ang_vel_xy": -0.05,
    "orientation": -1.0, "torques": -1e-4, "dof_acc": -2.5e-7, "action_rate": -0.01,
    "feet_air_time": 1.0, "undesired_contacts": -1.0,
}.items()}

#: the terminations when the task gives none (envs/mdp/terminations.py)
DEFAULT_TERMINATIONS = {"base_contact": {}, "base_height": {}, "upside_down": {}}


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


#: what each policy observation term holds, for the exported policy's metadata (policy_metadata);
#: {frame} is the IMU's (observation_source sensors: the sensors named) or the base's (state)
TERM_MEANINGS = {
    "base_lin_vel": "the base's linear velocity in the {frame} frame (m/s)",
    "base_ang_vel": "the base's angular velocity in the {frame} frame (rad/s)",
    "projected_gravity": "world -z rotated into the {frame} frame ((0, 0, -1) when level)",
    "commands": "the velocity command: vx, vy (m/s) in the base frame and yaw rate (rad/s)",
    "joint_pos": "joint positions minus observed_default_joint_pos, in observed_joint_names order (rad or m)",
    "joint_vel": "joint velocities, in observed_joint_names order (rad/s or m/s)",
    # LeggedEnv.step observes before it records the action it applied: the policy sees the one before
    "last_action": ("the action sent before the latest one, as the policy output it (the policy choosing action k "
                    "sees action k - 2; zero while the episode has none)"),
    "gait_phase": "sin and cos of 2 pi phase, phase = (time since the episode's start / gait_period_s) mod 1",
}


def _qpos_columns(mjm: mujoco.MjModel) -> list[str]:
    """A name for each qpos column: a hinge or slide joint's name, `name[i]` for the columns of a
    ball or free joint."""
    out = []
    for j in range(mjm.njnt):
        width = {int(mujoco.mjtJoint.mjJNT_FREE): 7, int(mujoco.mjtJoint.mjJNT_BALL): 4}.get(int(mjm.jnt_type[j]), 1)
        name = mjm.joint(j).name or f"joint{j}"
        out += [name] if width == 1 else [f"{name}[{i}]" for i in range(width)]
    return out


def _floats(values) -> list:
    """`values` (float32 numbers) as the shortest decimals that round to them, None for an
    infinite one (JSON has no infinity)."""
    return [float(str(np.float32(v))) if math.isfinite(float(v)) else None for v in values]


def quat_rotate_inverse(q: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Rotate world vectors v [N, 3] into the frame of unit quaternions q [N, 4] (w, x, y, z)."""
    w, u = q[:, :1], q[:, 1:]
    return v * (2.0 * w * w - 1.0) - torch.cross(u, v, dim=1) * w * 2.0 + u * (u * v).sum(1, keepdim=True) * 2.0


class LeggedEnv(BatchedEnv):
    """Observation groups: "policy" (9 + 3 + (nq - 7) + (nv - 6) + nu: base linear and angular
    velocity in the base frame, projected gravity, command, joint positions relative to the
    default pose, joint velocities, last action; with noise; the first nine from the IMU sensors
    or the state, `observation_source`; each a named term of the observation pipeline,
    `observations=`, envs.observations: noise, clip, scale, delay, history) and "critic" (the
    same from the current state without noise, plus friction and foot contacts).

    `robot` (a RobotCfg or the mapping of a task's `robot:` section, over the class's `ROBOT`)
    names the MJCF and its parts (envs.robot); `action_scale`, when given, overrides the robot's.
    `commands`, `rewards` and `terminations` list the task's terms with their parameters
    (envs/terms.py; None: the class's COMMANDS, REWARDS, TERMINATIONS); the command term
    `base_velocity` is required. The gait clock (`gait_period` s, 0: none; `gait_offsets`, each
    foot's phase offset; `gait_stance`, the stance fraction) is observed and read by the
    gait_contact, gait_joint_swing and feet_swing_height reward terms; `gait_targets` ({joints,
    amplitude}: one actuated joint per foot) adds amplitude x each foot's swing profile to the
    joint targets, so that the actions are a residual on an open-loop gait (`_setup_gait_targets`).
    `only_positive_rewards`: legged_gym's clip
    of the step reward at zero (envs.base)."""

    #: the policy group's observation terms, in the order of its frame (envs.observations)
    POLICY_TERMS = tuple(DEFAULT_POLICY_OBSERVATIONS)
    #: the robot's MJCF when its section gives none
    MJCF = ASSETS_DIR / "quadruped.xml"
    #: the robot section's defaults
    ROBOT = RobotCfg()
    #: the terms a task file can list (envs/terms.py), and those used when it lists none
    REWARD_TERMS = reward_terms.TERMS
    TERMINATION_TERMS = termination_terms.TERMS
    COMMAND_TERMS = command_terms.TERMS
    REWARDS = DEFAULT_REWARDS
    TERMINATIONS = DEFAULT_TERMINATIONS
    COMMANDS = {"base_velocity": {}}
    #: an encoder_bias randomization term offsets the joint positions the policy observes
    supports_encoder_bias = True
    #: SHAC (`enable_grad`): the terms of the state (base motion, joints, actions, torques)
    #: differentiate; contacts, heights and sensors are the plain step's outputs, read as constants
    differentiable = True
    outputs_in_grad = True

    def __init__(self, num_envs: int = 256, device=None, seed: int = 0, decimation: int = 4,
                 episode_length_s: float = 20.0, robot: dict | RobotCfg | None = None,
                 action_scale: float | None = None, commands: dict | None = None, rewards: dict | None = None,
                 terminations: dict | None = None, randomization: dict | None = None, actuator: dict | None = None,
                 obs_noise: float = 1.0, observations: dict | None = None, joint_pos_noise: float = 0.1,
                 gait_period: float = 0.0, gait_offsets: tuple = (), gait_stance: float = 0.55,
                 only_positive_rewards: bool = False, dtype: str = "float32", nonfinite_actions: str = "error",
                 backend: str = "warp", njmax: int | None = None, nconmax: int | None = None,
                 strict: bool = False, observation_source: str = "sensors", gait_targets: dict | None = None):
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
        # the first observation of an episode reads the critic's foot contacts (`touching`:
        # contact_active, contact_dist, contact_pair) and, from the sensors, the policy's IMU of the reset
        # state: envs.base runs a forward pass of the reset worlds after resets
        self.observed_outputs = (("sensordata",) if observation_source == "sensors" else ()) + (
            "contact_active", "contact_dist", "contact_pair")
        # robot.actuators groups set the actuator model's type (envs.robot)
        actuator = actuator_model_cfg(self.robot_cfg, self.robot.actuator_groups, actuator)
        if (actuator or {}).get("type", "mujoco") == "mujoco":
            Robot.check_position_servos(mjm, str(self.mjcf_path))
        #: targets -> torques (envs.actuators); pd / dc_motor switch the MJCF's servos off in mjm
        actuator_model = ActuatorModel(actuator, mjm)
        sim = make_sim(mjm, num_envs, device=device, dtype=dtype, backend=backend, njmax=njmax,
                       nconmax=nconmax, strict=strict)
        super().__init__(sim, num_actions=mjm.nu, decimation=decimation, episode_length_s=episode_length_s,
                         rewards=rewards, terminations=terminations, seed=seed, nonfinite_actions=nonfinite_actions)
        dev = self.device
        self.home_qpos = torch.as_tensor(self.robot.qpos0, dtype=torch.float32, device=dev)
        #: the default pose's velocities: the joint velocities of robot.init_state, else zero
        self.home_qvel = torch.as_tensor(self.robot.qvel0, dtype=torch.float32, device=dev)
        #: the default pose's joint positions (qpos[7:]): the joint observations are relative to it
        self.default_joint_pos = self.home_qpos[7:].clone()
        #: the default pose's positions of the actuated joints: target = these + scale * action
        self.default_targets = self.home_qpos[self.robot.actuator_qposadr].clone()
        #: each actuator's joint (the action order) and the joints of the joint observations (qpos[7:])
        self.action_joint_names = [mjm.joint(int(mjm.actuator_trnid[a, 0])).name for a in range(mjm.nu)]
        self.observed_joint_names = _qpos_columns(mjm)[7:]
        scale = self.robot_cfg.action_scale if action_scale is None else action_scale
        self.action_scale = (torch.as_tensor(scale, dtype=torch.float32, device=dev) if isinstance(scale, (list, tuple))
                             else float(scale))
        #: the velocity command term (envs/mdp/commands.py); the commands are env.commands
        self.command_terms = terms.build(self, "commands", commands)
        if "base_velocity" not in self.command_terms:
            raise ValueError("commands: a legged task needs the command term base_velocity (the velocity it tracks)")
        self.velocity_command = self.command_terms["base_velocity"].func
        self.obs_noise = obs_noise
        self._down = torch.tensor([[0.0, 0.0, -1.0]], device=dev)  # gravity's direction, world frame
        self._commands_scale = torch.tensor([2.0, 2.0, 0.25], device=dev)
        self.only_positive_rewards = bool(only_positive_rewards)
        self.joint_pos_noise = joint_pos_noise
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

        # the candidate contact pairs of the ground (the floor, and the terrain of subclasses) with
        # each robot part: each foot, the termination parts, the undesired parts
        ground = set(self._ground_geoms(mjm))
        pair_geoms = [set(g) for g in sim.model.contact_tables["geom"]]

        def pairs(geom_ids):
            return [p for p, g in enumerate(pair_geoms) if g & set(geom_ids) and g & ground]

        self.foot_pairs = [pairs(ids) for ids in self.robot.feet]
        self.trunk_pairs = pairs(self.robot.termination_geoms)
        self.undesired_pairs = pairs(self.robot.undesired_geoms)
        self.num_feet = len(self.foot_pairs)
        # [candidate pairs + 1, parts] bool: which parts' counts a contact of the pair adds to (the
        # feet, then the termination parts, then the undesired parts); the last row, for the free
        # slots (pair -1), none
        parts = torch.zeros(len(pair_geoms) + 1, self.num_feet + 2, dtype=torch.bool)
        for k, group in enumerate([*self.foot_pairs, self.trunk_pairs, self.undesired_pairs]):
            parts[group, k] = True
        self._pair_parts = parts.to(dev)
        #: each foot's body (the body of its first geom) and that body's root (foot_speed)
        self._foot_bodies = torch.tensor([int(mjm.geom_bodyid[ids[0]]) for ids in self.robot.feet], dtype=torch.long,
                                         device=dev)
        self._foot_roots = torch.tensor(mjm.body_rootid[self._foot_bodies.cpu().numpy()], dtype=torch.long, device=dev)
        self._setup_gait(gait_period, gait_offsets, gait_stance)
        self._setup_gait_targets(mjm, gait_targets)

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

    def _setup_gait(self, period, offsets, stance):
        """The gait clock of unitree_rl_gym's G1 and H1 tasks (legged_gym/envs/g1/g1_env.py): a phase
        running from 0 to 1 every `period` seconds from each episode's start, each foot's phase
        shifted by its offset; a foot's phase below `stance` is its stance part. With a period, the
        policy and the critic observe sin and cos of 2 pi phase, and the reward term gait_contact
        can be listed. ValueError for inconsistent values."""
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
        for name in ("gait_contact", "gait_joint_swing"):
            if name in self.reward_terms and period <= 0:
                raise ValueError(f"the reward term {name} needs the gait clock: set task.env.gait_period "
                                 f"(s, > 0), or remove the term")
        if "gait_joint_swing" in self.reward_terms:
            swing = self.reward_terms["gait_joint_swing"].func
            if swing.columns.numel() != self.num_feet:
                raise ValueError(f"rewards.gait_joint_swing.joints {swing.joints} match {swing.columns.numel()} "
                                 f"joints; give one joint per foot ({self.num_feet} feet)")
        #: the gait clock's period (s; 0: none), each foot's phase offset, the stance fraction
        self.gait_period = float(period)
        self._gait_offsets = torch.tensor(offsets or (0.0,) * self.num_feet, dtype=torch.float32,
                                          device=self.device)
        self.gait_stance = float(stance)

    def _setup_gait_targets(self, mjm, cfg: dict | None) -> None:
        """`gait_targets` {joints, amplitude}: an open-loop swing added to the joint targets of one
        actuated joint per foot (`joints`, names or regular expressions, in the model's order,
        which must be the feet's), amplitude x the foot's swing profile (`gait_swing`), so that
        the policy's actions are a residual on a stepping gait. Needs the gait clock."""
        #: (action columns [num_feet], amplitude rad) or None
        self.gait_targets = None
        if not cfg:
            return
        unknown = set(cfg) - {"joints", "amplitude"}
        if unknown or "joints" not in cfg:
            raise ValueError(f"gait_targets takes joints (one per foot) and amplitude (rad); got {dict(cfg)}")
        if self.gait_period <= 0:
            raise ValueError("gait_targets needs the gait clock: set task.env.gait_period (s, > 0)")
        chosen = set(match_joints(mjm, cfg["joints"], "gait_targets.joints", self.mjcf_path))
        columns = [a for a in range(mjm.nu) if int(mjm.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                   and int(mjm.actuator_trnid[a, 0]) in chosen]
        if len(columns) != self.num_feet:
            raise ValueError(f"gait_targets.joints {list(cfg['joints'])} match {len(columns)} actuated joints; give "
                             f"one per foot ({self.num_feet} feet)")
        self.gait_targets = (torch.tensor(columns, dtype=torch.long, device=self.device),
                             float(cfg.get("amplitude", -0.4)))

    def gait_swing(self) -> torch.Tensor:
        """[num_envs, num_feet]: each foot's swing profile from the gait clock, sin(pi (phase -
        stance) / (1 - stance)) in the swing part of its phase, 0 in stance."""
        phase, stance = self.gait_phase(), self.gait_stance
        return torch.where(phase >= stance, torch.sin(math.pi * (phase - stance) / (1.0 - stance)),
                           torch.zeros_like(phase))

    def _targets(self, actions: torch.Tensor) -> torch.Tensor:
        """Joint targets of the actions: default + action_scale x action (+ the gait_targets swing)."""
        target = self.default_targets + self.action_scale * actions
        if self.gait_targets is not None:
            columns, amplitude = self.gait_targets
            offset = torch.zeros_like(target)
            offset[:, columns] = amplitude * self.gait_swing()
            target = target + offset
        return target

    @property
    def env_friction(self) -> torch.Tensor:
        """[num_envs]: each world's sliding friction, the mean over contact pairs of the first
        tangential entry (one value with the default friction term); the critic observes it."""
        return self.friction[:, :, 0].float().mean(dim=1)

    @property
    def term_params(self) -> dict:
        """The class's TERM_PARAMS with the robot preset's over them (envs.presets term_params:
        the parameters that name the preset robot's joints)."""
        if self.robot_cfg.preset is None:
            return self.TERM_PARAMS
        return terms.over(self.TERM_PARAMS, presets.get(self.robot_cfg.preset).term_params)

    def action_bounds(self):
        """Target = default + scale * action, clamped to the control range (gymnasium adapter)."""
        return ((self.ctrl_low - self.default_targets) / self.action_scale,
                (self.ctrl_high - self.default_targets) / self.action_scale)

    def _state_loaded(self):
        self._base_cache = self._contact_cache = None

    def _model_spec(self) -> mujoco.MjSpec:
        """The robot's MjSpec (a preset's names checked: envs.robot.check_preset_names) with its
        floor, IMU sensors and the actuators of its robot section (envs.robot.with_floor, with_imu,
        with_actuators); a subclass adds terrain."""
        spec = mujoco.MjSpec.from_file(str(self.mjcf_path))
        check_preset_names(spec, self.robot_cfg, str(self.mjcf_path))
        spec = with_imu(with_floor(spec, self.robot_cfg.floor_geom), self.robot_cfg, str(self.mjcf_path))
        return with_actuators(spec, self.robot_cfg, str(self.mjcf_path))

    def _build_model(self) -> mujoco.MjModel:
        """The compiled model the env simulates."""
        return self._model_spec().compile()

    def _ground_geoms(self, mjm: mujoco.MjModel) -> list[int]:
        """Geoms that are the ground: contacts with them count as foot, trunk and undesired contacts."""
        return [mjm.geom(self.robot_cfg.floor_geom).id]

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

    def policy_observation_terms(self) -> list[dict]:
        """The policy group's frame, term by term (ObservationPipeline.terms, with each term's
        `meaning` and `stacked`: true for the pipeline's terms, whose frame is stacked over
        `observation_history` steps); a subclass that appends terms after the stack adds them here
        with stacked false."""
        frame = (f"IMU (sensors {self.robot_cfg.lin_vel_sensor}, {self.robot_cfg.ang_vel_sensor}, "
                 f"{self.robot_cfg.orientation_sensor})" if self.observation_source == "sensors"
                 else f"base body ({self.robot_cfg.base_body})")
        return [{**term, "meaning": TERM_MEANINGS[term["name"]].format(frame=frame), "stacked": True}
                for term in self.policy_observations.terms()]

    def policy_metadata(self) -> dict:
        """envs.base's keys and what a robot needs to run the exported policy (docs/GUIDE.md,
        "Exported policies"): the actuated joints in action order (`joint_names`), the pose the
        actions are offsets from (`default_joint_pos`), `action_scale` (target = default +
        scale x action, clamped to [`joint_pos_target_min`, `joint_pos_target_max`], null:
        unbounded), the actuators' nominal `stiffness`, `damping` and `effort_limit` per joint
        (and the DC motor curve), the observation terms in order with sizes, scales, clips and
        delays (`observation_terms`; the stacked terms' frame over `observation_history` steps,
        oldest first, then the others), the joints the
        joint observations cover (`observed_joint_names`, `observed_default_joint_pos`), the
        command's components and, with a gait clock, its period and offsets."""
        nominal = self.actuator_model.nominal()
        scale = self.action_scale
        scale = (scale.tolist() if isinstance(scale, torch.Tensor) else [float(scale)] * self.num_actions)
        terms = self.policy_observation_terms()
        meta = {**super().policy_metadata(),
                "robot_mjcf": self.mjcf_path.name, "base_body": self.robot_cfg.base_body,
                "joint_names": list(self.action_joint_names),
                "default_joint_pos": _floats(self.default_targets.tolist()),
                "action_scale": _floats(scale),
                "joint_pos_target_min": _floats(self.ctrl_low.tolist()),
                "joint_pos_target_max": _floats(self.ctrl_high.tolist()),
                "actuator_type": self.actuator_model.type,
                "stiffness": nominal["kp"].tolist(), "damping": nominal["kd"].tolist(),
                "effort_limit": _floats(nominal["effort_limit"]),
                "observation_source": self.observation_source,
                # the velocimeter, gyro and framequat the base terms read (observation_source sensors)
                "imu_sensors": ({q: name for q, (name, _) in self.imu_sensors.items()}
                                if self.observation_source == "sensors" else None),
                "observation_terms": terms,
                "observation_history": self.policy_observations.history,
                "num_observations": sum(t["size"] * (self.policy_observations.history if t["stacked"] else 1)
                                        for t in terms),
                "observed_joint_names": list(self.observed_joint_names),
                "observed_default_joint_pos": _floats(self.default_joint_pos.tolist()),
                "command_names": ["lin_vel_x", "lin_vel_y", "ang_vel_z"]}
        if self.actuator_model.type == "dc_motor":
            meta.update(saturation_effort=_floats(nominal["saturation_effort"]),
                        velocity_limit=_floats(nominal["velocity_limit"]))
        if self.gait_period > 0:
            meta.update(gait_period_s=self.gait_period, gait_offsets=self._gait_offsets.tolist())
        if self.gait_targets is not None:  # the robot must add the same swing to the policy's targets
            columns, amplitude = self.gait_targets
            meta.update(gait_stance=self.gait_stance, gait_target_amplitude=amplitude,
                        gait_target_joints=[self.action_joint_names[int(c)] for c in columns])
        return meta

    # ------------------------------------------------------------- the state the terms read
    def base_state(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Base linear and angular velocity in the base frame and projected gravity, [num_envs, 3]
        each; computed once per state (reward terms, observations and terminations share it)."""
        if getattr(self, "_base_cache", None) is not None:
            return self._base_cache
        q, v = self.qpos.float(), self.qvel.float()
        quat = q[:, 3:7]
        lin_vel = quat_rotate_inverse(quat, v[:, 0:3])
        ang_vel = v[:, 3:6]  # free-joint angular velocity is already in the body frame
        gravity = quat_rotate_inverse(quat, self._down.expand(len(q), 3))
        self._base_cache = (lin_vel, ang_vel, gravity)
        return self._base_cache

    def imu(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Base linear and angular velocity in the IMU frame and projected gravity, as the IMU
        sensors read them (sensordata: one physics step old after a step, see the module
        docstring)."""
        data = self.sim.sensordata.float()
        c = self.imu_columns
        down = self._down.expand(self.num_envs, 3)
        return data[:, c["lin_vel"]], data[:, c["ang_vel"]], quat_rotate_inverse(data[:, c["orientation"]], down)

    def base_heading(self) -> torch.Tensor:
        """[num_envs] the heading of the base: atan2 of its x axis's y and x in the world frame
        (the free joint's quaternion w, x, y, z; Isaac Lab's `heading_w`)."""
        w, x, y, z = self.qpos[:, 3:7].float().unbind(dim=1)
        return torch.atan2(2.0 * (x * y + w * z), 1.0 - 2.0 * (y * y + z * z))

    def base_height(self) -> torch.Tensor:
        """Height of the base above the ground under it [num_envs] (the floor is at z = 0)."""
        return self.qpos[:, 2].float()

    def ground_z(self, xy: torch.Tensor) -> torch.Tensor:
        """Height of the ground [...] under points xy [..., 2] (the floor: z = 0; terrain: its surface)."""
        return torch.zeros_like(xy[..., 0])

    def foot_heights(self) -> torch.Tensor:
        """[num_envs, num_feet]: each foot body's origin above the ground under it (xpos: like the
        contacts, of the state the last physics step started from)."""
        pos = self.sim.view("xpos")[:, self._foot_bodies].float()
        return pos[..., 2] - self.ground_z(pos[..., :2])

    def foot_speed(self) -> torch.Tensor:
        """[num_envs, num_feet]: the horizontal speed (m/s) of each foot body's centre of mass. From
        cvel (MuJoCo's: angular and linear velocity about subtree_com of the body's root) moved to
        xipos: v = lin + ang x (xipos - com); like the contacts, of the state the last physics step
        started from."""
        bodies = self._foot_bodies
        cvel = self.sim.view("cvel")[:, bodies].float()
        offset = self.sim.view("xipos")[:, bodies].float() - self.sim.view("subtree_com")[:, self._foot_roots].float()
        return (cvel[..., 3:5] + torch.linalg.cross(cvel[..., :3], offset)[..., :2]).norm(dim=-1)

    def joint_acc(self) -> torch.Tensor:
        """[num_envs, nv - 6]: the joints' mean accelerations over the last policy step."""
        return (self.qvel.float()[:, 6:] - self._prestep_qvel[:, 6:]) / self.step_dt

    def gait_phase(self) -> torch.Tensor:
        """[num_envs, num_feet]: each foot's phase in [0, 1) of the gait clock at the current
        time of its episode (`_setup_gait`); stance while below gait_stance."""
        t = self.episode_length_buf.float() * self.step_dt
        phase = torch.remainder(t / self.gait_period, 1.0) if self.gait_period > 0 else torch.zeros_like(t)
        return torch.remainder(phase[:, None] + self._gait_offsets, 1.0)

    def part_contacts(self) -> torch.Tensor:
        """[num_envs, num_feet + 2] int: the contacts touching the ground (dist < 0) of each foot,
        of the termination parts and of the undesired parts; computed once per state, from each
        contact slot's pair (a gather over the world's slots, the pairs the broadphase kept)."""
        if getattr(self, "_contact_cache", None) is None:
            touching = (self.sim.view("contact_active") != 0) & (self.sim.view("contact_dist") < 0.0)
            parts = self._pair_parts[self.sim.view("contact_pair").long()]  # [num_envs, slots, parts]
            # in a tuple: a cache, not per-world state for state_dict (envs.base)
            self._contact_cache = ((parts & touching[:, :, None]).sum(dim=1),)
        return self._contact_cache[0]

    def feet_contact(self) -> torch.Tensor:
        """[num_envs, num_feet] bool: each foot touching the ground."""
        return self.part_contacts()[:, :self.num_feet] > 0

    def termination_contact(self) -> torch.Tensor:
        """[num_envs] bool: a termination part of the robot touching the ground."""
        return self.part_contacts()[:, self.num_feet] > 0

    def undesired_contact_count(self) -> torch.Tensor:
        """[num_envs] float: the number of contacts of undesired parts touching the ground."""
        return self.part_contacts()[:, self.num_feet + 1].float()

    def _state_changed(self):
        self._base_cache = self._contact_cache = None  # a push changed the velocities

    # ------------------------------------------------------------------------------ the task
    def _apply_actions(self, actions):
        self._base_cache = self._contact_cache = None  # the state is about to change
        self.actuator_model.apply(torch.clamp(self._targets(actions), self.ctrl_low, self.ctrl_high))

    def enable_grad(self, enabled: bool = True) -> None:
        if enabled and self.observation_source != "state":
            raise ValueError("enable_grad: the policy observes the IMU sensors (observation_source: sensors), which "
                             "the differentiable step does not differentiate; set task.env.observation_source=state "
                             "for SHAC")
        if enabled and self.actuator_model.history is not None:
            raise ValueError("enable_grad: actuator delays (task.env.actuator.delay) are not differentiated; "
                             "configure none for SHAC")
        super().enable_grad(enabled)

    def _ctrl(self, actions):
        """The MJCF's position servos' controls of the differentiable step: `_apply_actions`'s."""
        return torch.minimum(torch.maximum(self._targets(actions), self.ctrl_low), self.ctrl_high)

    def reset(self):
        obs = super().reset()
        self.policy_observations.commit()
        return obs

    def step(self, actions):
        self._base_cache = self._contact_cache = None  # of the state the observations read
        self._prestep_qvel = self.qvel.float().clone()  # on the graph with enable_grad()
        out = super().step(actions)
        self.policy_observations.commit()  # the frame of the observations step returns
        # as applied (non-finite entries repaired), zero where reset; a constant for the next step
        self.last_actions[:] = self.actions.detach()
        self.velocity_command.step(self)  # command resampling on each world's own schedule
        self._base_cache = self._contact_cache = None  # resets and interval terms changed the state
        return out

    def _observations(self):
        self.velocity_command.update(self)  # heading commands: the yaw rate of the current state
        lin_vel, ang_vel, gravity = obs.base_lin_vel(self), obs.base_ang_vel(self), obs.projected_gravity(self)
        commands, joint_pos, joint_vel = obs.velocity_commands(self), obs.joint_pos_rel(self), obs.joint_vel(self)
        actions = obs.last_action(self)
        privileged = torch.cat([lin_vel * 2.0, ang_vel * 0.25, gravity, commands * self._commands_scale,
                                joint_pos, joint_vel * 0.05, actions], dim=1)
        seen = ((obs.imu_lin_vel(self), obs.imu_ang_vel(self), obs.imu_projected_gravity(self))
                if self.observation_source == "sensors" else (lin_vel, ang_vel, gravity))
        # the terms in POLICY_TERMS order, unscaled: the pipeline scales them; the policy's joint
        # positions carry the encoder bias of an encoder_bias term, the critic's are true
        terms = [*seen, commands, obs.joint_pos_rel(self, encoder_bias=True), joint_vel, actions]
        if self.gait_period > 0:  # the clock of the first foot: the others' are fixed offsets from it
            clock = obs.gait_clock(self)
            terms.append(clock)
            privileged = torch.cat([privileged, clock], dim=1)
        policy = self.policy_observations(terms)
        critic = torch.cat([privileged, obs.friction(self), obs.feet_contact(self)], dim=1)
        return {"policy": policy, "critic": critic}

    def _reset_envs(self, env_ids):
        self._base_cache = self._contact_cache = None
        n = env_ids.numel()
        qpos = self.home_qpos.expand(n, -1).clone()
        yaw = (self.rand_worlds(env_ids, 1)[:, 0] * 2 - 1) * math.pi
        # a random heading about the world z axis, before the default pose's orientation: q = q_yaw q_home
        cy, sy = torch.cos(yaw / 2)[:, None], torch.sin(yaw / 2)[:, None]
        w, x, y, z = self.home_qpos[3:7]
        qpos[:, 3:7] = torch.cat([cy * w - sy * z, cy * x - sy * y, cy * y + sy * x, cy * z + sy * w], dim=1)
        qpos[:, 7:] += (self.rand_worlds(env_ids, self.default_joint_pos.numel()) - 0.5) * (2 * self.joint_pos_noise)
        self.sim.qpos[env_ids] = qpos.to(self.sim.qpos.dtype)
        qvel = self.home_qvel + (self.rand_worlds(env_ids, self.sim.nv) - 0.5) * 0.2
        self.sim.qvel[env_ids] = qvel.to(self.sim.qvel.dtype)
        self.sim.ctrl[env_ids] = self.default_targets.to(self.sim.ctrl.dtype)
        self.velocity_command.resample(self, env_ids)
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
        lin_vel, ang_vel, _ = self.base_state()
        return {"lin_vel_tracking_error": (self.commands[:, :2] - lin_vel[:, :2]).norm(dim=1),
                "yaw_rate_tracking_error": (self.commands[:, 2] - ang_vel[:, 2]).abs()}
