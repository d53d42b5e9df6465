"""Actuator models of an environment's joints, chosen per task (`task.env.actuator`):

    actuator: {type: mujoco}                      # MuJoCo's own actuators of the MJCF (default)
    actuator: {type: pd, kp: 30, kd: 1, effort_limit: 25}
    actuator: {type: dc_motor, saturation_effort: 40, velocity_limit: 20, effort_limit: 25}
    actuator: {type: pd, delay: [0, 2]}           # + a per-world delay of 0..2 physics steps

The policy's actions become joint-position targets (the task's doing); the model turns the
targets into joint torques at every physics step:

- mujoco: the targets are the controls of the MJCF's position actuators (MuJoCo computes
  gain * ctrl + bias, clamps to forcerange).
- pd: an explicit PD in torch, tau = kp (q_target - q) - kd qd, clipped to +-effort_limit
  (Isaac Lab's IdealPDActuator), written to `qfrc_applied` of the actuated dofs (both backends
  have it); the MJCF's actuators are switched off (gains and biases zero) so they add nothing.
- dc_motor: the pd torque clipped to the DC motor's torque-speed curve (Isaac Lab's DCMotor):
  tau_max = clip(saturation_effort (1 - qd / velocity_limit), 0, effort_limit),
  tau_min = clip(saturation_effort (-1 - qd / velocity_limit), -effort_limit, 0).

kp, kd and effort_limit default to the MJCF's position actuators (gainprm[0], -biasprm[2],
forcerange; no forcerange: unlimited), so `pd` with no gains is MuJoCo's position servo computed
explicitly; each may be a number or one value per actuator. They are per-world tensors [W, nu]
(`kp`, `kd`, `effort_limit`), which the actuator_gains and effort_limit randomization terms set.

`delay: [lo, hi]` (physics steps, integers): each world applies the target of `d` physics steps
ago, d drawn uniformly in [lo, hi] at each reset (the env's per-world streams); before an
episode has that many steps, its first target. Any type may be delayed.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch
import warp as wp

from envs.model_names import HINGE_SLIDE, names

ACTUATOR_TYPES = ("mujoco", "pd", "dc_motor")
_KEYS = {"mujoco": {"type", "delay"}, "pd": {"type", "delay", "kp", "kd", "effort_limit"},
         "dc_motor": {"type", "delay", "kp", "kd", "effort_limit", "saturation_effort", "velocity_limit"}}


def check_config(cfg) -> list[str]:
    """Problems of an `actuator` mapping found without a model (for tasks.config)."""
    if cfg is None:
        return []
    if not isinstance(cfg, dict):
        return [f"task.env.actuator must be a mapping (type: {'|'.join(ACTUATOR_TYPES)}, ...), got {cfg!r}"]
    kind = cfg.get("type", "mujoco")
    if kind not in ACTUATOR_TYPES:
        return [f"task.env.actuator.type: one of {', '.join(ACTUATOR_TYPES)}, got {kind!r}"]
    errors = []
    unknown = set(cfg) - _KEYS[kind]
    if unknown:
        errors.append(f"task.env.actuator: unknown keys {sorted(unknown)} for type {kind}; accepted: "
                      f"{', '.join(sorted(_KEYS[kind]))}")
    if kind == "dc_motor":
        for key in ("saturation_effort", "velocity_limit"):
            if key not in cfg:
                errors.append(f"task.env.actuator.{key} is required for type dc_motor")
    delay = cfg.get("delay")
    if delay is not None and not (isinstance(delay, (list, tuple)) and len(delay) == 2
                                  and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in delay)
                                  and delay[0] <= delay[1]):
        errors.append(f"task.env.actuator.delay: [lo, hi] integers 0 <= lo <= hi (physics steps), got {delay!r}")
    return errors


class ActuatorModel:
    """Targets -> torques for the actuators of a model whose actuators are joint position
    servos (see the module docstring). Build it with the env's own MjModel before the
    simulation (`prepare` switches the MJCF's actuators off for pd / dc_motor), then `bind(env)`."""

    def __init__(self, cfg: dict | None, mjm: mujoco.MjModel):
        cfg = dict(cfg or {})
        errors = check_config(cfg)
        if errors:
            raise ValueError("; ".join(errors))
        self.type = cfg.get("type", "mujoco")
        self._force_limited = None  # the servos' force bounds, once _servo_force needs them
        self.cfg = cfg
        nu = mjm.nu
        actuators = names(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, nu, numbered=True)
        joint = mujoco.mjtTrn.mjTRN_JOINT
        if self.type != "mujoco":
            for a in range(nu):
                jnt = int(mjm.actuator_trnid[a, 0])
                ok = (mjm.actuator_trntype[a] == joint and mjm.jnt_type[jnt] in HINGE_SLIDE
                      and mjm.actuator_gear[a, 0] == 1.0 and mjm.actuator_dyntype[a] == mujoco.mjtDyn.mjDYN_NONE)
                if not ok:
                    raise ValueError(f"actuator model {self.type}: actuator {actuators[a]!r} must drive one hinge or "
                                     f"slide joint with gear 1 and no activation dynamics")
        self.dofadr = [int(mjm.jnt_dofadr[mjm.actuator_trnid[a, 0]]) for a in range(nu)]
        self.qposadr = [int(mjm.jnt_qposadr[mjm.actuator_trnid[a, 0]]) for a in range(nu)]
        servo_kp = np.asarray(mjm.actuator_gainprm[:, 0], dtype=np.float64)
        servo_kd = -np.asarray(mjm.actuator_biasprm[:, 2], dtype=np.float64)
        limit = np.where(mjm.actuator_forcelimited != 0, np.abs(mjm.actuator_forcerange).max(axis=1), np.inf)
        self._defaults = {"kp": self._per_actuator("kp", cfg.get("kp"), servo_kp, nu),
                          "kd": self._per_actuator("kd", cfg.get("kd"), servo_kd, nu),
                          "effort_limit": self._per_actuator("effort_limit", cfg.get("effort_limit"), limit, nu)}
        if self.type == "dc_motor":
            self.saturation_effort = self._per_actuator("saturation_effort", cfg["saturation_effort"], None, nu)
            self.velocity_limit = self._per_actuator("velocity_limit", cfg["velocity_limit"], None, nu)
            if np.any(self.velocity_limit <= 0):
                raise ValueError(f"actuator model dc_motor: velocity_limit must be > 0, got {cfg['velocity_limit']}")
        if self.type != "mujoco":
            # the MJCF's servos add nothing: the model's torque is the only actuation
            mjm.actuator_gainprm[:] = 0.0
            mjm.actuator_biasprm[:] = 0.0
        delay = cfg.get("delay") or [0, 0]
        self.delay_range = (int(delay[0]), int(delay[1]))

    def nominal(self) -> dict[str, np.ndarray]:
        """The configured gains and limits [nu] before any randomization: kp (stiffness), kd
        (damping), effort_limit (inf: unlimited), and for dc_motor saturation_effort and
        velocity_limit."""
        out = {key: value.copy() for key, value in self._defaults.items()}
        if self.type == "dc_motor":
            out.update(saturation_effort=self.saturation_effort.copy(), velocity_limit=self.velocity_limit.copy())
        return out

    @staticmethod
    def _per_actuator(key, value, default, nu) -> np.ndarray:
        if value is None:
            return np.array(default, dtype=np.float64)
        v = np.asarray(value, dtype=np.float64)
        if v.ndim == 0:
            v = np.full(nu, float(v))
        if v.shape != (nu,) or np.any(np.isnan(v)) or np.any(v < 0):
            raise ValueError(f"actuator model: {key} must be a non-negative number or {nu} of them (one per "
                             f"actuator), got {value!r}")
        return v

    def bind(self, env) -> None:
        """Allocate the per-world tensors on the env's device: kp, kd, effort_limit [W, nu]
        (in the simulation's dtype), the delay [W] and the target history [W, max delay + 1, nu]."""
        self.env = env
        W, dev = env.num_envs, env.device
        dtype = env.sim.qpos.dtype  # the simulation's precision (float64 on the MuJoCo backend)
        for key, value in self._defaults.items():
            setattr(self, key, torch.as_tensor(value, dtype=dtype, device=dev).repeat(W, 1))
        self._qadr = torch.as_tensor(self.qposadr, device=dev)
        self._dadr = torch.as_tensor(self.dofadr, device=dev)
        nu = len(self.dofadr)
        self.torque = torch.zeros(W, nu, dtype=dtype, device=dev)  # [W, nu]: the last physics step's
        if self.type == "dc_motor":
            self._sat = torch.as_tensor(self.saturation_effort, dtype=dtype, device=dev)
            self._vlim = torch.as_tensor(self.velocity_limit, dtype=dtype, device=dev)
        self.delay = torch.zeros(W, dtype=torch.long, device=dev)
        self.history = (torch.zeros(W, self.delay_range[1] + 1, nu, dtype=dtype, device=dev)
                        if self.delay_range[1] else None)
        self._fresh = torch.ones(W, dtype=torch.bool, device=dev)  # no target since the reset
        env.actuator_state = self.state()  # per-world tensors: in the env's state_dict

    def state(self) -> dict[str, torch.Tensor]:
        """The per-world tensors the next step depends on (for the env's state_dict)."""
        out = {"kp": self.kp, "kd": self.kd, "effort_limit": self.effort_limit, "delay": self.delay,
               "fresh": self._fresh, "torque": self.torque}
        if self.history is not None:
            out["history"] = self.history
        return out

    def reset(self, env_ids: torch.Tensor) -> None:
        lo, hi = self.delay_range
        if hi > lo:
            u = self.env.rand_worlds(env_ids, 1)[:, 0]
            self.delay[env_ids] = lo + torch.floor(u * (hi - lo + 1)).long().clamp_max(hi - lo)
        else:
            self.delay[env_ids] = lo
        self._fresh[env_ids] = True
        self.torque[env_ids] = 0.0

    def delayed(self, target: torch.Tensor) -> torch.Tensor:
        """The target each world applies at this physics step (see `delay`)."""
        if self.history is None:
            return target
        h = self.history
        fresh = self._fresh[:, None, None]
        # an episode's first target fills the history: before it had `delay` steps, it applies that
        h.copy_(torch.where(fresh, target[:, None].expand_as(h), torch.cat([target[:, None], h[:, :-1]], dim=1)))
        self._fresh.zero_()
        return h[torch.arange(h.shape[0], device=h.device), self.delay]

    def compute(self, target: torch.Tensor, q: torch.Tensor, qd: torch.Tensor) -> torch.Tensor:
        """Torques [W, nu] of the pd / dc_motor model for joint targets, positions and velocities
        [W, nu] (the closed forms of the module docstring)."""
        tau = self.kp * (target - q) - self.kd * qd
        if self.type == "dc_motor":
            top = torch.minimum(torch.clamp(self._sat * (1.0 - qd / self._vlim), min=0.0), self.effort_limit)
            bottom = torch.maximum(torch.clamp(self._sat * (-1.0 - qd / self._vlim), max=0.0), -self.effort_limit)
            return torch.maximum(torch.minimum(tau, top), bottom)
        return torch.maximum(torch.minimum(tau, self.effort_limit), -self.effort_limit)

    def apply(self, target: torch.Tensor) -> None:
        """One physics step's actuation from joint-position targets [W, nu]."""
        sim = self.env.sim
        target = self.delayed(target.to(self.kp.dtype))
        sim.ctrl[:] = target.to(sim.ctrl.dtype)
        if self.type == "mujoco":
            return
        self.torque.copy_(self.compute(target, sim.qpos[:, self._qadr], sim.qvel[:, self._dadr]))
        sim.qfrc_applied[:, self._dadr] = self.torque.to(sim.qfrc_applied.dtype)

    def applied_torque(self) -> torch.Tensor:
        """Joint torques [W, nu] of the last physics step: MuJoCo's actuator_force, or the model's."""
        if self.type == "mujoco":
            if self.env.grad_enabled and self.env.sim.nu == len(self.dofadr):
                return self._servo_force()
            return self.env.sim.view("actuator_force").float()
        return self.torque.float()

    def _servo_force(self) -> torch.Tensor:
        """With `enable_grad()`: MuJoCo's actuator_force of the position servos at the state the
        last physics step started from, a torch function of it and of the actions (mj_fwdActuation,
        engine_forward.c: gain ctrl + bias0 + bias1 length + bias2 velocity, length = gear q and
        velocity = gear qdot for a joint transmission, clamped to forcerange when forcelimited)."""
        env = self.env
        struct, mjm = env.sim.model.struct, env.sim.mj_model
        qpos, qvel = env._substep_start[0], env._substep_start[1]
        ctrl = env._ctrl(env.actions).to(qpos.dtype)
        gain = wp.to_torch(struct.actuator_gainprm, requires_grad=False)[..., 0]  # [1 or W, nu]
        bias = wp.to_torch(struct.actuator_biasprm, requires_grad=False)  # [1 or W, nu, 3]
        gear = wp.to_torch(struct.actuator_gear, requires_grad=False)
        gear = gear[..., 0] if gear.dim() == 3 else gear
        length, velocity = gear * qpos[:, self._qadr], gear * qvel[:, self._dadr]
        force = gain * ctrl + bias[..., 0] + bias[..., 1] * length + bias[..., 2] * velocity
        if self._force_limited is None:
            limited = torch.as_tensor(mjm.actuator_forcelimited != 0, device=force.device)
            lo = torch.as_tensor(np.where(limited.cpu().numpy(), mjm.actuator_forcerange[:, 0], -np.inf),
                                 dtype=force.dtype, device=force.device)
            hi = torch.as_tensor(np.where(limited.cpu().numpy(), mjm.actuator_forcerange[:, 1], np.inf),
                                 dtype=force.dtype, device=force.device)
            self._force_limited = (lo, hi)
        lo, hi = self._force_limited
        return torch.minimum(torch.maximum(force, lo), hi).float()
