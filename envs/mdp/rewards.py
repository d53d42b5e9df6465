"""Reward terms of the legged velocity-tracking tasks (envs.legged), after legged_gym, Isaac Lab
(`isaaclab.envs.mdp.rewards`, the velocity task's mdp), mjlab and unitree_rl_gym.

Each term is a function of the env (or a class whose instance is, when it resolves joints once)
with its parameters keyword-only (envs/terms.py); the task file lists them with a weight each:

    rewards:
      tracking_lin_vel: {weight: 1.0, sigma: 0.25}

Rates are multiplied by the policy step dt inside the term, as legged_gym scales its rewards,
so a weight means per second; `termination` is a count (1 on the step a world fails). The
env's buffers a term updates (feet_air_time's air times and last contacts) are the env's own
per-world tensors, saved in its state_dict. `TERMS` is the registry LeggedEnv uses.
"""

import re

import mujoco
import torch

from envs.model_names import HINGE_SLIDE, match_joints, names


# ---------------------------------------------------------------------------- base motion
def tracking_lin_vel(env, *, sigma: float = 0.25) -> torch.Tensor:
    """legged_gym's tracking_lin_vel: exp(-|command_xy - v_xy|^2 / sigma), v in the base frame."""
    lin_vel, _, _ = env.base_state()
    err = ((env.commands[:, :2] - lin_vel[:, :2]) ** 2).sum(dim=1)
    return torch.exp(-err / sigma) * env.step_dt


def tracking_ang_vel(env, *, sigma: float = 0.25) -> torch.Tensor:
    """legged_gym's tracking_ang_vel: exp(-(command_yaw - w_z)^2 / sigma)."""
    _, ang_vel, _ = env.base_state()
    err = (env.commands[:, 2] - ang_vel[:, 2]) ** 2
    return torch.exp(-err / sigma) * env.step_dt


def lin_vel_z(env) -> torch.Tensor:
    """legged_gym's lin_vel_z: the base's vertical velocity squared (base frame)."""
    lin_vel, _, _ = env.base_state()
    return lin_vel[:, 2] ** 2 * env.step_dt


def ang_vel_xy(env) -> torch.Tensor:
    """legged_gym's ang_vel_xy: the base's roll and pitch rates squared."""
    _, ang_vel, _ = env.base_state()
    return (ang_vel[:, :2] ** 2).sum(dim=1) * env.step_dt


def orientation(env) -> torch.Tensor:
    """legged_gym's orientation: |projected gravity_xy|^2, 0 when the base is level."""
    _, _, gravity = env.base_state()
    return (gravity[:, :2] ** 2).sum(dim=1) * env.step_dt


class upright:  # noqa: N801 (a term's name, as the task file writes it)
    """mjlab's upright: exp(-|projected gravity_xy|^2 / sigma), 1 when the base is level (weight
    it positive; mjlab reads the torso, this the robot's base body)."""

    def __init__(self, env, *, sigma: float = 0.2):
        if not sigma > 0.0:
            raise ValueError(f"rewards.upright.sigma must be > 0 (the squared tilt at which upright is 1/e), "
                             f"got {sigma}")
        self.sigma = float(sigma)

    def __call__(self, env) -> torch.Tensor:
        _, _, gravity = env.base_state()
        return torch.exp(-(gravity[:, :2] ** 2).sum(dim=1) / self.sigma) * env.step_dt


def base_height(env, *, target: float) -> torch.Tensor:
    """legged_gym's base_height: (base height above the ground under it - target)^2 (m)."""
    return (env.base_height() - target) ** 2 * env.step_dt


# ------------------------------------------------------------------------ joints, actions
def _joint_columns(env, joints, option: str, offset: int) -> torch.Tensor:
    """Columns of qpos[7:] (offset 7, jnt_qposadr) or qvel[6:] (offset 6, jnt_dofadr) of the
    hinge and slide joints matched by `joints` (envs.model_names.match_joints)."""
    mjm = env.sim.mj_model
    adr = mjm.jnt_qposadr if offset == 7 else mjm.jnt_dofadr
    ids = match_joints(mjm, joints, option, env.mjcf_path)
    return torch.tensor([int(adr[j]) - offset for j in ids], dtype=torch.long, device=env.device)


class torques:  # noqa: N801
    """legged_gym's torques: the actuators' applied torques squared (envs.actuators), of the
    actuators that drive `joints` (names or regular expressions; empty: every actuator), as
    Isaac Lab's joint_torques_l2 with asset_cfg joint_names."""

    def __init__(self, env, *, joints: tuple = ()):
        self.columns = None
        if joints:
            mjm = env.sim.mj_model
            chosen = set(match_joints(mjm, joints, "rewards.torques.joints", env.mjcf_path))
            columns = [a for a in range(mjm.nu) if int(mjm.actuator_trntype[a]) == int(mujoco.mjtTrn.mjTRN_JOINT)
                       and int(mjm.actuator_trnid[a, 0]) in chosen]
            if not columns:
                raise ValueError(f"rewards.torques.joints {list(joints)}: no actuator of {env.mjcf_path} drives "
                                 f"those joints")
            self.columns = torch.tensor(columns, dtype=torch.long, device=env.device)

    def __call__(self, env) -> torch.Tensor:
        torque = env.actuator_model.applied_torque()
        if self.columns is not None:
            torque = torque[:, self.columns]
        return (torque ** 2).sum(dim=1) * env.step_dt


class dof_acc:  # noqa: N801
    """legged_gym's dof_acc: the joint accelerations over the policy step squared, of `joints`
    (empty: every joint)."""

    def __init__(self, env, *, joints: tuple = ()):
        self.columns = _joint_columns(env, joints, "rewards.dof_acc.joints", 6) if joints else None

    def __call__(self, env) -> torch.Tensor:
        acc = env.joint_acc()
        if self.columns is not None:
            acc = acc[:, self.columns]
        return (acc ** 2).sum(dim=1) * env.step_dt


def action_rate(env) -> torch.Tensor:
    """legged_gym's action_rate: the change of the action since the last step, squared."""
    return ((env.actions - env.last_actions) ** 2).sum(dim=1) * env.step_dt


class joint_deviation:  # noqa: N801
    """Isaac Lab's joint_deviation_l1: sum of |q - default| over `joints` (none: nothing)."""

    def __init__(self, env, *, joints: tuple = ()):
        self.columns = _joint_columns(env, joints, "rewards.joint_deviation.joints", 7)

    def __call__(self, env) -> torch.Tensor:
        q = env.qpos.float()[:, 7:]
        cols = self.columns
        return (q[:, cols] - env.default_joint_pos[cols]).abs().sum(dim=1) * env.step_dt


class dof_pos_limits:  # noqa: N801
    """Isaac Lab's joint_pos_limits: how far the limited hinge and slide joints are beyond their
    ranges (rad or m)."""

    def __init__(self, env):
        mjm, dev = env.sim.mj_model, env.device
        limited = [j for j in range(mjm.njnt) if mjm.jnt_limited[j] and int(mjm.jnt_type[j]) in HINGE_SLIDE]
        self.columns = torch.tensor([int(mjm.jnt_qposadr[j]) - 7 for j in limited], dtype=torch.long, device=dev)
        self.low = torch.tensor([mjm.jnt_range[j][0] for j in limited], dtype=torch.float32, device=dev)
        self.high = torch.tensor([mjm.jnt_range[j][1] for j in limited], dtype=torch.float32, device=dev)

    def __call__(self, env) -> torch.Tensor:
        q = env.qpos.float()[:, 7:][:, self.columns]
        out = (self.low - q).clamp(min=0.0) + (q - self.high).clamp(min=0.0)
        return out.sum(dim=1) * env.step_dt


class pose:  # noqa: N801
    """mjlab's variable_posture: exp(-mean over the joints of ((q - default) / std)^2), each
    joint's std that of the world's command regime: tight when told to stand, looser to walk
    and to run (weight it positive).

    `std`: for each regime (standing, walking, running) a mapping {joint name or regular
    expression: std (rad or m)} that covers every hinge and slide joint (the first pattern that
    matches a joint's whole name counts; a pattern that matches none is an error); the env's
    term_params give a robot's (envs.humanoid, envs.presets).
    The regime is chosen by |command_xy| + |command_yaw| against `thresholds` (walking from the
    first, running from the second)."""

    REGIMES = ("standing", "walking", "running")

    def __init__(self, env, *, std: dict | None = None, thresholds: tuple = (0.05, 1.5)):
        walking, running = (float(t) for t in thresholds)
        if not 0.0 <= walking <= running:
            raise ValueError(f"rewards.pose.thresholds must be (walking, running) with 0 <= walking <= running, "
                             f"got {list(thresholds)}")
        self.thresholds = (walking, running)
        if not isinstance(std, dict) or set(std) != set(self.REGIMES):
            raise ValueError(f"the reward term pose needs rewards.pose.std: a mapping with keys "
                             f"{', '.join(self.REGIMES)}, each {{joint name or regular expression: std}}; got {std!r}")
        mjm = env.sim.mj_model
        joints = match_joints(mjm, (".*",), "rewards.pose.std", env.mjcf_path)  # every hinge and slide joint
        joint_names = [names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt)[j] for j in joints]
        table = []
        for regime in self.REGIMES:
            unmatched = [k for k in std[regime] if not any(re.fullmatch(k, name) for name in joint_names)]
            if unmatched:
                raise ValueError(f"rewards.pose.std.{regime}: no hinge or slide joint of {env.mjcf_path} is named "
                                 f"{' or '.join(map(repr, unmatched))} (a name or a regular expression); its joints: "
                                 f"{', '.join(joint_names)}")
            row = []
            for name in joint_names:
                value = next((v for k, v in std[regime].items() if re.fullmatch(k, name)), None)
                if value is None or not float(value) > 0.0:
                    raise ValueError(f"rewards.pose.std.{regime}: joint {name!r} of {env.mjcf_path} has "
                                     f"{'no pattern' if value is None else f'std {value} (must be > 0)'}; its "
                                     f"joints: {', '.join(joint_names)}")
                row.append(float(value))
            table.append(row)
        #: [3, joints] each regime's per-joint std; the joints' columns of qpos[7:]
        self.std = torch.tensor(table, dtype=torch.float32, device=env.device)
        self.columns = torch.tensor([int(mjm.jnt_qposadr[j]) - 7 for j in joints], dtype=torch.long,
                                    device=env.device)

    def __call__(self, env) -> torch.Tensor:
        speed = env.commands[:, :2].norm(dim=1) + env.commands[:, 2].abs()
        walking, running = self.thresholds
        regime = (speed >= walking).long() + (speed >= running).long()
        cols = self.columns
        error = (env.qpos.float()[:, 7:][:, cols] - env.default_joint_pos[cols]) / self.std[regime]
        return torch.exp(-(error ** 2).mean(dim=1)) * env.step_dt


# ----------------------------------------------------------------------------------- feet
def feet_air_time(env, *, threshold: float = 0.5) -> torch.Tensor:
    """legged_gym's feet_air_time: at a foot's first contact after a flight, its time in the air
    minus `threshold` (s); nothing while the command is slower than 0.1 m/s (no reward for
    stepping in place). Updates the env's feet_air_time and last_contacts."""
    contact = env.feet_contact()
    first_contact = contact & ~env.last_contacts & (env.feet_air_time > 0)
    env.feet_air_time += env.step_dt
    reward = ((env.feet_air_time - threshold) * first_contact).sum(dim=1)
    reward *= env.commands[:, :2].norm(dim=1) > 0.1  # no reward for stepping in place
    env.feet_air_time *= ~contact
    env.last_contacts = contact
    return reward * env.step_dt


def feet_air_time_biped(env, *, threshold: float = 0.5) -> torch.Tensor:
    """Isaac Lab's feet_air_time_positive_biped: while exactly one foot is on the ground, the
    shortest time any foot has spent in its current mode (in the air or on the ground), capped
    at `threshold` (s); nothing for small commands. Updates the env's feet_air_time,
    feet_contact_time and last_biped_contacts."""
    contact = env.feet_contact()
    # a foot's time in the air or on the ground, each reset when the mode changes
    zero = torch.zeros_like(env.feet_air_time)
    env.feet_air_time = torch.where(contact, zero, env.feet_air_time + env.step_dt)
    touched_before = torch.where(env.last_biped_contacts, env.feet_contact_time, zero)
    env.feet_contact_time = torch.where(contact, touched_before + env.step_dt, zero)
    env.last_biped_contacts = contact
    in_mode = torch.where(contact, env.feet_contact_time, env.feet_air_time)
    single_stance = contact.sum(dim=1) == 1
    reward = torch.where(single_stance, in_mode.min(dim=1).values, torch.zeros_like(in_mode[:, 0]))
    reward = reward.clamp(max=threshold) * (env.commands[:, :2].norm(dim=1) > 0.1)
    return reward * env.step_dt


def feet_slide(env) -> torch.Tensor:
    """Isaac Lab's feet_slide: the horizontal speed (m/s) of each foot body's centre of mass,
    summed over the feet on the ground."""
    return (env.foot_speed() * env.feet_contact()).sum(dim=1) * env.step_dt


def undesired_contacts(env) -> torch.Tensor:
    """legged_gym's collision: the number of the robot's undesired parts' contact slots touching
    the ground."""
    return env.undesired_contact_count() * env.step_dt


def gait_contact(env) -> torch.Tensor:
    """unitree_rl_gym's G1 `contact`: the number of feet whose ground contact matches the gait
    clock (on the ground in the stance part of its phase, in the air in the swing part); needs
    the env's gait clock (task.env.gait_period > 0: LeggedEnv checks it)."""
    stance = env.gait_phase() < env.gait_stance
    return (stance == env.feet_contact()).float().sum(dim=1) * env.step_dt


class gait_joint_swing:  # noqa: N801
    """A gait prior that the differentiable step differentiates (SHAC): exp(-mean over the feet
    of (q - default - amplitude s)^2 / sigma), q the angle of one joint per foot (`joints`, names
    or regular expressions matching one joint per foot; the feet's order is the model's), s the
    foot's swing profile from the gait clock: sin(pi (phase - stance) / (1 - stance)) in the swing
    part of its phase, 0 in stance. Weight it positive; needs the gait clock
    (task.env.gait_period > 0). The contact-based gait terms (feet_air_time, gait_contact,
    feet_swing_height) are constants of the plain step to the gradient; this one is a function
    of qpos."""

    def __init__(self, env, *, joints: tuple = (), amplitude: float = -0.5, sigma: float = 0.1):
        # (LeggedEnv._setup_gait checks the gait clock and one joint per foot: the env builds its
        # terms before its feet and clock)
        self.joints = list(joints)
        self.columns = _joint_columns(env, joints, "rewards.gait_joint_swing.joints", 7)
        self.amplitude, self.sigma = float(amplitude), float(sigma)

    def __call__(self, env) -> torch.Tensor:
        q = env.qpos.float()[:, 7:][:, self.columns]
        error = q - env.default_joint_pos[self.columns] - self.amplitude * env.gait_swing()
        return torch.exp(-(error ** 2).mean(dim=1) / self.sigma) * env.step_dt


def feet_swing_height(env, *, height: float = 0.08) -> torch.Tensor:
    """unitree_rl_gym's G1 feet_swing_height: (foot height - height)^2 summed over the feet in the
    air (foot body origins above the ground under them, m)."""
    airborne = ~env.feet_contact()
    return ((env.foot_heights() - height) ** 2 * airborne).sum(dim=1) * env.step_dt


# ------------------------------------------------------------------------------- episode
def termination(env) -> torch.Tensor:
    """1 on the step a world fails (its terminations, not time-outs): Isaac Lab's termination
    penalty with a negative weight. Not scaled by dt."""
    return env.terminated().float()


def alive(env) -> torch.Tensor:
    """unitree_rl_gym's alive: 1 per second the episode runs (weight it positive)."""
    return torch.full((env.num_envs,), env.step_dt, device=env.device)


#: the reward terms of the legged tasks, by the name a task file gives them
TERMS = {
    "tracking_lin_vel": tracking_lin_vel, "tracking_ang_vel": tracking_ang_vel, "lin_vel_z": lin_vel_z,
    "ang_vel_xy": ang_vel_xy, "orientation": orientation, "upright": upright, "base_height": base_height,
    "torques": torques, "dof_acc": dof_acc, "action_rate": action_rate, "joint_deviation": joint_deviation,
    "dof_pos_limits": dof_pos_limits, "pose": pose, "feet_air_time": feet_air_time,
    "feet_air_time_biped": feet_air_time_biped, "feet_slide": feet_slide, "undesired_contacts": undesired_contacts,
    "gait_contact": gait_contact, "gait_joint_swing": gait_joint_swing,
    "feet_swing_height": feet_swing_height, "termination": termination,
    "alive": alive,
}
