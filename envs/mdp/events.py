"""Domain randomization terms (events), in the manner of Isaac Lab's / mjlab's event terms: one
class per kind of term, registered by type in `TERM_TYPES`; envs.randomization builds the terms a
task lists under `task.env.randomization` and runs them (at startup, at resets, on intervals).

Every term has
    mode:         startup (once, when the env is built), reset (each time a world resets) or
                  interval (every interval_s of each world's episode; interval_s: a number, or
                  [lo, hi] for a fresh uniform draw after each firing and at each reset)
    range:        [lo, hi], or one [lo, hi] per component (com, gravity, push: x, y, z)
    operation:    scale (nominal x value), add (nominal + value) or abs (value)
    distribution: uniform, or log_uniform (lo > 0; for scales)
    shared:       false (default): one draw per world and element; true: one per world, for
                  every element (and component) of the term

Values are always computed from the nominal (compiled) value, so resets do not compound. Draws
come from the env's per-world streams (`BatchedEnv.rand_worlds`): a world's values depend on the
seed, the world and its own history only.

Each term class declares the model fields it changes and what the engine recomputes
(`Term.fields`, `Term.recompute`); GUIDE.md "Domain randomization" has the table. Masses,
centres of mass, inertias and armature feed mj_setConst's invweight0 (the constraints'
regularizer): the term calls `sim.set_const(worlds)` after changing them, in both backends.
"""

from __future__ import annotations

import mujoco
import numpy as np
import torch

from envs.model_names import hinge_slide_joints, names

MODES = ("startup", "reset", "interval")
OPERATIONS = ("scale", "add", "abs")
DISTRIBUTIONS = ("uniform", "log_uniform")
#: keys every term accepts
COMMON_KEYS = {"type", "mode", "interval_s", "range", "operation", "distribution", "shared"}


def _select(term: str, kind: str, wanted, available: list[str], default: list[int]) -> list[int]:
    """Indices of the named elements (None: `default`); ValueError listing what the model has."""
    if wanted is None:
        return default
    if isinstance(wanted, str):
        wanted = [wanted]
    unknown = [w for w in wanted if w not in available]
    if unknown:
        raise ValueError(f"randomization term {term!r}: unknown {kind} {unknown}; the model has: "
                         f"{', '.join(a for a in available if not a.startswith('#'))}")
    return [available.index(w) for w in wanted]


def _bodies(term: str, cfg: dict, mjm) -> list[int]:
    """The bodies a term names (`bodies`; default every body but the world)."""
    return _select(term, "bodies", cfg.get("bodies"), names(mjm, mujoco.mjtObj.mjOBJ_BODY, mjm.nbody, numbered=True),
                   list(range(1, mjm.nbody)))


class Term:
    """One configured term. Subclasses set `fields` (what they change), `recompute` (what the
    engine derives again afterwards), `components` (the number of values per element) and
    implement `_apply(env_ids, values)` with values [n, elements or 1, components]."""

    fields: tuple[str, ...] = ()
    recompute: str = "nothing"
    operations: tuple[str, ...] = OPERATIONS
    extra_keys: set[str] = set()
    components: int = 1
    set_const: bool = False  # sim.set_const after applying
    #: the env's row-state tensors (BatchedEnv._row_state names) `apply` writes besides the per-world
    #: random streams; None: it may write any (a sync-free env then keeps every one of them)
    writes: tuple[str, ...] | None = None

    def __init__(self, env, name: str, cfg: dict):
        self.env, self.name, self.cfg = env, name, cfg
        unknown = set(cfg) - COMMON_KEYS - self.extra_keys
        if unknown:
            raise ValueError(f"randomization term {name!r} ({self.type}): unknown keys {sorted(unknown)}; "
                             f"accepted: {', '.join(sorted(COMMON_KEYS | self.extra_keys))}")
        self.mode = cfg.get("mode", "reset")
        if self.mode not in MODES:
            raise ValueError(f"randomization term {name!r}: mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        self.operation = cfg.get("operation", self.operations[0])
        if self.operation not in self.operations:
            raise ValueError(f"randomization term {name!r} ({self.type}): operation must be one of "
                             f"{', '.join(self.operations)}, got {self.operation!r}")
        self.distribution = cfg.get("distribution", "uniform")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"randomization term {name!r}: distribution must be one of {', '.join(DISTRIBUTIONS)}, "
                             f"got {self.distribution!r}")
        self.shared = bool(cfg.get("shared", False))
        self.interval = None
        if self.mode == "interval":
            if "interval_s" not in cfg:
                raise ValueError(f"randomization term {name!r}: mode interval needs interval_s")
            iv = cfg["interval_s"]
            lo, hi = (iv, iv) if isinstance(iv, (int, float)) else tuple(iv)
            if not (0 < lo <= hi):
                raise ValueError(f"randomization term {name!r}: interval_s must be > 0 (or [lo, hi] with "
                                 f"0 < lo <= hi), got {iv!r}")
            # in policy steps, at least one
            self.interval = (max(1, round(lo / env.step_dt)), max(1, round(hi / env.step_dt)))
        elif "interval_s" in cfg:
            raise ValueError(f"randomization term {name!r}: interval_s is for mode interval, not {self.mode}")

    @property
    def type(self) -> str:
        return self.cfg.get("type", self.name)

    def _ranges(self, key: str = "range", components: int | None = None) -> torch.Tensor:
        """[components, 2] (lo, hi) from `key`: one [lo, hi] for all, or one per component."""
        c = self.components if components is None else components
        value = self.cfg.get(key)
        if value is None:
            raise ValueError(f"randomization term {self.name!r} ({self.type}): {key} is required ([lo, hi])")
        r = np.asarray(value, dtype=np.float64)
        if r.shape == (2,):
            r = np.tile(r, (c, 1))
        if r.shape != (c, 2) or not np.all(np.isfinite(r)) or np.any(r[:, 0] > r[:, 1]):
            raise ValueError(f"randomization term {self.name!r}: {key} must be [lo, hi] with lo <= hi"
                             f"{f' or {c} such pairs' if c > 1 else ''}, got {value!r}")
        if self.distribution == "log_uniform" and np.any(r <= 0):
            raise ValueError(f"randomization term {self.name!r}: log_uniform needs lo > 0, got {value!r}")
        if self.operation == "scale" and np.any(r < 0):
            raise ValueError(f"randomization term {self.name!r}: a scale must be >= 0, got {value!r}")
        return torch.as_tensor(r, dtype=torch.float64, device=self.env.device)

    def sample(self, env_ids: torch.Tensor, elements: int, ranges: torch.Tensor) -> torch.Tensor:
        """Values [n, elements, components] (float64) in `ranges` [components, 2]."""
        n, c = env_ids.numel(), ranges.shape[0]
        shape = (1, 1) if self.shared else (elements, c)
        u = self.env.rand_worlds(env_ids, *shape).double()
        u = u.expand(n, elements, c) if self.shared else u
        lo, hi = ranges[:, 0], ranges[:, 1]
        if self.distribution == "log_uniform":
            return torch.exp(torch.log(lo) + (torch.log(hi) - torch.log(lo)) * u)
        return lo + (hi - lo) * u

    def combine(self, nominal: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
        if self.operation == "scale":
            return nominal * value
        if self.operation == "add":
            return nominal + value
        return value.expand_as(nominal) if value.shape != nominal.shape else value

    def apply(self, env_ids: torch.Tensor) -> None:
        raise NotImplementedError

    def describe(self) -> str:
        return f"{self.name} ({self.type}, {self.mode}): changes {', '.join(self.fields)}; recomputes {self.recompute}"


class _ModelFieldTerm(Term):
    """A term on a per-world model field [W, nelement(, ncomponent)]: `field`, the selected
    `elements` and `columns` of it."""

    field: str = ""
    columns: list[int] | None = None  # the components of a vector field (None: a scalar field)

    def setup(self, elements: list[int]) -> None:
        self.elements = torch.as_tensor(elements, dtype=torch.long, device=self.env.device)
        self.view = self.env.sim.per_world_param(self.field)
        self.ranges = self._ranges()
        nominal = self.view[0].double().clone()[self.elements]
        self.nominal = nominal if self.columns is None else nominal[:, self.columns]
        if self.columns is None:
            self.nominal = self.nominal[:, None]

    def new_values(self, env_ids: torch.Tensor) -> torch.Tensor:
        value = self.sample(env_ids, len(self.elements), self.ranges)
        return self.combine(self.nominal.expand(env_ids.numel(), -1, -1), value)

    def write(self, view, env_ids, values, columns=None) -> None:
        rows = env_ids[:, None]
        if columns is None:
            view[rows, self.elements] = values[..., 0].to(view.dtype)
        else:
            for k, c in enumerate(columns):
                view[rows, self.elements, c] = values[..., k].to(view.dtype)

    def apply(self, env_ids: torch.Tensor) -> None:
        self.write(self.view, env_ids, self.new_values(env_ids), self.columns)


class BodyMass(_ModelFieldTerm):
    """body_mass of the named bodies (`bodies`, default all but the world); their inertia
    follows (`inertia: scale`, default: body_inertia x new mass / nominal mass, the same
    radii of gyration, so a valid inertia stays valid; `keep`: unchanged)."""

    field = "body_mass"
    fields = ("body_mass", "body_inertia")
    recompute = "dof_invweight0, body_invweight0 (Sim.set_const: mj_setConst per world)"
    extra_keys = {"bodies", "inertia"}
    set_const = True

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        bodies = _bodies(name, cfg, mjm)
        self.inertia = cfg.get("inertia", "scale")
        if self.inertia not in ("scale", "keep"):
            raise ValueError(f"randomization term {name!r}: inertia must be scale or keep, got {self.inertia!r}")
        self.setup(bodies)
        if self.inertia == "keep":
            self.fields = ("body_mass",)
        low = self.combine(self.nominal[:, 0], self.ranges[0, 0]) if self.operation != "scale" else None
        if low is not None and bool((low <= 0).any()):
            b = int(self.elements[int(torch.nonzero(low <= 0)[0])])
            body = mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_BODY, b)
            raise ValueError(f"randomization term {name!r}: body {body!r}"
                             f" (mass {float(mjm.body_mass[b]):g}) could get a mass <= 0 from range {cfg['range']}")
        if self.operation == "scale" and float(self.ranges[0, 0]) <= 0:
            raise ValueError(f"randomization term {name!r}: a mass scale must be > 0, got range {cfg['range']}")
        self.inertia_view = env.sim.per_world_param("body_inertia")
        self.nominal_inertia = self.inertia_view[0].double().clone()[self.elements]

    def apply(self, env_ids):
        mass = self.new_values(env_ids)
        self.write(self.view, env_ids, mass)
        if self.inertia == "scale":
            ratio = mass[..., 0] / self.nominal[:, 0].clamp_min(1e-300)
            inertia = self.nominal_inertia * ratio[..., None]
            self.write(self.inertia_view, env_ids, inertia, [0, 1, 2])


class BodyInertia(_ModelFieldTerm):
    """body_inertia (principal moments at the CoM) of the named bodies, all three by the same
    scale, so the triangle inequality of a valid inertia keeps holding."""

    field = "body_inertia"
    fields = ("body_inertia",)
    recompute = BodyMass.recompute
    operations = ("scale",)
    extra_keys = {"bodies"}
    set_const = True

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        self.setup(_bodies(name, cfg, mjm))
        self.nominal = self.view[0].double().clone()[self.elements]  # [E, 3]

    def apply(self, env_ids):
        value = self.sample(env_ids, len(self.elements), self.ranges)  # [n, E, 1]
        self.write(self.view, env_ids, self.nominal * value, [0, 1, 2])


class BodyCom(_ModelFieldTerm):
    """body_ipos (the centre of mass in the body frame) of the named bodies, offset by a value
    per axis (range: [lo, hi] or three pairs, metres)."""

    field = "body_ipos"
    fields = ("body_ipos",)
    recompute = BodyMass.recompute
    operations = ("add",)
    extra_keys = {"bodies"}
    components = 3
    columns = [0, 1, 2]
    set_const = True

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        self.setup(_bodies(name, cfg, mjm))


def _joint_dofs(term: str, mjm, joints) -> list[int]:
    """The dofs of the named joints (default: every hinge and slide joint)."""
    ids = _select(term, "joints", joints, names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt, numbered=True),
                  hinge_slide_joints(mjm))
    width = {int(mujoco.mjtJoint.mjJNT_FREE): 6, int(mujoco.mjtJoint.mjJNT_BALL): 3}
    return [int(mjm.jnt_dofadr[j]) + k for j in ids for k in range(width.get(int(mjm.jnt_type[j]), 1))]


class _DofTerm(_ModelFieldTerm):
    extra_keys = {"joints"}

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        self.setup(_joint_dofs(name, env.sim.mj_model, cfg.get("joints")))
        if self.operation != "scale" and float(self.ranges[0, 0]) + float(self.nominal.min()) < 0:
            raise ValueError(f"randomization term {name!r}: {self.field} could become negative with range "
                             f"{cfg['range']}")


class DofDamping(_DofTerm):
    """dof_damping of the named joints' dofs (default: hinges and slides)."""

    field = "dof_damping"
    fields = ("dof_damping",)
    recompute = "the implicit Euler damping flag (Sim.set_const), when the compiled damping was all zero"
    set_const = True


class DofArmature(_DofTerm):
    """dof_armature (rotor inertia added to the mass matrix's diagonal)."""

    field = "dof_armature"
    fields = ("dof_armature",)
    recompute = BodyMass.recompute
    set_const = True


class DofFrictionloss(_DofTerm):
    """dof_frictionloss. The engine fixes its constraint rows when the model is loaded (one per
    dof with frictionloss > 0): a dof compiled without frictionloss can only be scaled (stays 0),
    adding to it is refused."""

    field = "dof_frictionloss"
    fields = ("dof_frictionloss",)
    recompute = "nothing (the friction rows read it at each step)"

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        zero = [int(i) for i, v in zip(self.elements.tolist(), self.nominal[:, 0].tolist(), strict=True) if v <= 0]
        if zero and self.operation != "scale":
            jnt = [mujoco.mj_id2name(mjm, mujoco.mjtObj.mjOBJ_JOINT, int(mjm.dof_jntid[i])) for i in zero]
            raise ValueError(f"randomization term {name!r}: joints {sorted(set(jnt))} have no frictionloss in the "
                             f"MJCF, and the engine builds friction rows only for dofs that have some; give them "
                             f"a small frictionloss in the MJCF, select other joints, or use operation scale")


class Friction(_ModelFieldTerm):
    """cpair_friction (the friction of each candidate contact pair: tangential 1 and 2,
    torsional, rolling 1 and 2) of the pairs that involve `geoms` (default all pairs), entries
    `axes` (default [0, 1]: the tangential ones)."""

    field = "cpair_friction"
    fields = ("cpair_friction",)
    recompute = "nothing (the contact rows read it at each step)"
    extra_keys = {"geoms", "axes"}

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        pairs = np.asarray(env.sim.model.contact_tables["geom"], dtype=np.int64).reshape(-1, 2)
        chosen = list(range(len(pairs)))
        if cfg.get("geoms") is not None:
            geom_names = names(mjm, mujoco.mjtObj.mjOBJ_GEOM, mjm.ngeom, numbered=True)
            geoms = _select(name, "geoms", cfg["geoms"], geom_names, [])
            chosen = [p for p in chosen if pairs[p, 0] in geoms or pairs[p, 1] in geoms]
        if not chosen:
            raise ValueError(f"randomization term {name!r}: no contact pair to randomize (geoms {cfg.get('geoms')})")
        axes = list(cfg.get("axes", [0, 1]))
        if not axes or any(a not in range(5) for a in axes) or len(set(axes)) != len(axes):
            raise ValueError(f"randomization term {name!r}: axes must be distinct entries of 0..4, got {axes}")
        self.columns = axes
        self.components = len(axes)
        self.setup(chosen)
        self.same_ranges = bool((self.ranges == self.ranges[:1]).all())

    def sample(self, env_ids, elements, ranges):
        # the pair's tangential entries move together (one coefficient per pair, as MuJoCo's
        # geom friction), unless the ranges differ per axis
        # (the configured ranges are compared once, at setup: no host synchronisation per reset)
        same = self.same_ranges if ranges is self.ranges else bool((ranges == ranges[:1]).all())
        if same:
            return super().sample(env_ids, elements, ranges[:1]).expand(-1, -1, ranges.shape[0])
        return super().sample(env_ids, elements, ranges)


class ActuatorGains(_ModelFieldTerm):
    """kp and kv of position actuators: actuator_gainprm[0] = kp, actuator_biasprm[1] = -kp,
    actuator_biasprm[2] = -kv, kept consistent (kp_range, kd_range; either may be left out).
    With the env's pd or dc_motor actuator model (envs.actuators), its per-world kp and kd."""

    fields = ("actuator_gainprm", "actuator_biasprm")
    recompute = "nothing (the actuators read them at each step)"
    extra_keys = {"actuators", "kp_range", "kd_range"}

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        if "range" in cfg:
            raise ValueError(f"randomization term {name!r} (actuator_gains): give kp_range and/or kd_range, not range")
        if "kp_range" not in cfg and "kd_range" not in cfg:
            raise ValueError(f"randomization term {name!r} (actuator_gains): needs kp_range or kd_range")
        mjm = env.sim.mj_model
        actuators = names(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, mjm.nu, numbered=True)
        chosen = _select(name, "actuators", cfg.get("actuators"), actuators, list(range(mjm.nu)))
        self.elements = torch.as_tensor(chosen, dtype=torch.long, device=env.device)
        self.kp_ranges = self._ranges("kp_range") if "kp_range" in cfg else None
        self.kd_ranges = self._ranges("kd_range") if "kd_range" in cfg else None
        model = getattr(env, "actuator_model", None)
        self.model = model if model is not None and model.type != "mujoco" else None
        if self.model is not None:
            self.fields = (f"actuator_model.kp ({model.type})", f"actuator_model.kd ({model.type})")
            self.kp0 = model.kp[0, self.elements].double().clone()
            self.kd0 = model.kd[0, self.elements].double().clone()
            return
        for a in self.elements.tolist():
            servo = (mjm.actuator_gaintype[a] == mujoco.mjtGain.mjGAIN_FIXED
                     and mjm.actuator_biastype[a] == mujoco.mjtBias.mjBIAS_AFFINE
                     and mjm.actuator_biasprm[a, 0] == 0 and mjm.actuator_biasprm[a, 1] == -mjm.actuator_gainprm[a, 0])
            if not servo:
                raise ValueError(f"randomization term {name!r}: actuator {actuators[a]!r} is not a position servo "
                                 f"(gain fixed kp, bias affine [0, -kp, -kv]); kp/kv are defined for those only")
        self.gain = env.sim.per_world_param("actuator_gainprm")
        self.bias = env.sim.per_world_param("actuator_biasprm")
        self.kp0 = self.gain[0, self.elements, 0].double().clone()
        self.kd0 = -self.bias[0, self.elements, 2].double().clone()

    def apply(self, env_ids):
        n, e = env_ids.numel(), len(self.elements)
        kp = self.kp0.expand(n, e)
        kd = self.kd0.expand(n, e)
        if self.kp_ranges is not None:
            kp = self.combine(kp[..., None], self.sample(env_ids, e, self.kp_ranges))[..., 0]
        if self.kd_ranges is not None:
            kd = self.combine(kd[..., None], self.sample(env_ids, e, self.kd_ranges))[..., 0]
        rows = env_ids[:, None]
        if self.model is not None:
            self.model.kp[rows, self.elements] = kp.to(self.model.kp.dtype)
            self.model.kd[rows, self.elements] = kd.to(self.model.kd.dtype)
            return
        dt = self.gain.dtype
        self.gain[rows, self.elements, 0] = kp.to(dt)
        self.bias[rows, self.elements, 1] = (-kp).to(dt)
        self.bias[rows, self.elements, 2] = (-kd).to(dt)


class EffortLimit(_ModelFieldTerm):
    """The actuators' force limits: actuator_forcerange (symmetric scale of both ends, or abs:
    [-value, value]; the actuator must be forcelimited), or with the env's pd / dc_motor model
    its per-world effort_limit."""

    field = "actuator_forcerange"
    fields = ("actuator_forcerange",)
    recompute = "nothing (the actuators read it at each step)"
    operations = ("scale", "abs")
    extra_keys = {"actuators"}

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        actuators = names(mjm, mujoco.mjtObj.mjOBJ_ACTUATOR, mjm.nu, numbered=True)
        chosen = _select(name, "actuators", cfg.get("actuators"), actuators, list(range(mjm.nu)))
        model = getattr(env, "actuator_model", None)
        self.model = model if model is not None and model.type != "mujoco" else None
        if self.model is not None:
            self.fields = (f"actuator_model.effort_limit ({model.type})",)
            self.elements = torch.as_tensor(chosen, dtype=torch.long, device=env.device)
            self.ranges = self._ranges()
            self.nominal = model.effort_limit[0, self.elements].double().clone()[:, None]
            return
        unlimited = [actuators[a] for a in chosen if not mjm.actuator_forcelimited[a]]
        if unlimited:
            raise ValueError(f"randomization term {name!r}: actuators {unlimited} have no forcerange "
                             f"(forcelimited=false): there is no effort limit to randomize")
        self.columns = [0, 1]
        self.components = 1
        self.setup(chosen)

    def apply(self, env_ids):
        if self.model is not None:
            value = self.combine(self.nominal.expand(env_ids.numel(), -1, -1),
                                 self.sample(env_ids, len(self.elements), self.ranges))
            self.model.effort_limit[env_ids[:, None], self.elements] = value[..., 0].to(self.model.effort_limit.dtype)
            return
        value = self.sample(env_ids, len(self.elements), self.ranges)  # [n, E, 1]
        if self.operation == "scale":
            new = self.nominal * value
        else:
            new = torch.cat([-value, value], dim=-1)
        self.write(self.view, env_ids, new, [0, 1])


class Gravity(Term):
    """The gravity vector of each world (range per axis, m/s^2; scale or add)."""

    fields = ("gravity",)
    recompute = "nothing (bias forces, gravity compensation and accelerometers read it at each step)"
    operations = ("add", "scale")
    components = 3

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        mjm = env.sim.mj_model
        if mjm.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_GRAVITY:
            raise ValueError(f"randomization term {name!r}: the model disables gravity (<flag gravity=disable>)")
        self.view = env.sim.per_world_param("gravity")
        self.ranges = self._ranges()
        self.nominal = self.view[0].double().clone()[None]  # [1, 3]

    def apply(self, env_ids):
        value = self.combine(self.nominal.expand(env_ids.numel(), 1, 3), self.sample(env_ids, 1, self.ranges))
        self.view[env_ids] = value[:, 0].to(self.view.dtype)


def _free_joint_dofs(term: str, mjm) -> int:
    free = [j for j in range(mjm.njnt) if mjm.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE]
    if not free:
        raise ValueError(f"randomization term {term!r}: the model has no free joint to push")
    return int(mjm.jnt_dofadr[free[0]])


class PushVelocity(Term):
    """A kick of the base's velocity: qvel of the first free joint's linear dofs (`axes`,
    default [0, 1]: x and y in the world frame; 3-5 are the angular ones, body frame) plus a
    value drawn in range (m/s); usually mode interval."""

    fields = ("qvel (state)",)
    recompute = "nothing (state)"
    operations = ("add",)
    extra_keys = {"axes"}
    writes = ("sim.qvel",)

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        self.dof0 = _free_joint_dofs(name, env.sim.mj_model)
        self.axes = list(cfg.get("axes", [0, 1]))
        if not self.axes or any(a not in range(6) for a in self.axes):
            raise ValueError(f"randomization term {name!r}: axes must be entries of 0..5, got {self.axes}")
        self.components = len(self.axes)
        self.ranges = self._ranges()
        self.qvel_columns = torch.as_tensor([self.dof0 + a for a in self.axes], device=env.device)

    def apply(self, env_ids):
        kick = self.sample(env_ids, 1, self.ranges)[:, 0]  # [n, axes]
        qvel = self.env.sim.qvel
        qvel[env_ids[:, None], self.qvel_columns] += kick.to(qvel.dtype)


class EncoderBias(Term):
    """A constant offset per world of the joint positions the policy observes (`joints`,
    default hinges and slides; the env's `encoder_bias` [num_envs, nq], added by the task to
    the observed qpos; the physics and the critic see the true positions)."""

    fields = ("env.encoder_bias (observation)",)
    recompute = "nothing"
    operations = ("add",)
    extra_keys = {"joints"}

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        if not getattr(env, "supports_encoder_bias", False):
            raise ValueError(f"randomization term {name!r}: {type(env).__name__} does not add an encoder bias to its "
                             f"observations")
        mjm = env.sim.mj_model
        joint_names = names(mjm, mujoco.mjtObj.mjOBJ_JOINT, mjm.njnt, numbered=True)
        hinge_slide = hinge_slide_joints(mjm)
        joints = _select(name, "joints", cfg.get("joints"), joint_names, hinge_slide)
        bad = [joint_names[j] for j in joints if j not in hinge_slide]
        if bad:
            raise ValueError(f"randomization term {name!r}: an encoder bias is for hinge and slide joints, not {bad}")
        self.columns = torch.as_tensor([int(mjm.jnt_qposadr[j]) for j in joints], device=env.device)
        self.ranges = self._ranges()
        if not hasattr(env, "encoder_bias"):
            env.encoder_bias = torch.zeros(env.num_envs, mjm.nq, device=env.device)

    def apply(self, env_ids):
        bias = self.sample(env_ids, len(self.columns), self.ranges)[..., 0]
        self.env.encoder_bias[env_ids[:, None], self.columns] = bias.to(self.env.encoder_bias.dtype)


class ActionDelay(Term):
    """A delay of 0..N policy steps per world (range [0, N], integers, uniform): the physics
    applies the action of that many steps ago (zero actions before an episode's first)."""

    fields = ("env.action_delay (actions)",)
    recompute = "nothing"
    operations = ("abs",)

    def __init__(self, env, name, cfg):
        super().__init__(env, name, cfg)
        r = cfg.get("range")
        if (not isinstance(r, (list, tuple)) or len(r) != 2 or any(isinstance(v, bool) or int(v) != v or v < 0
                                                                     for v in r) or r[0] > r[1]):
            raise ValueError(f"randomization term {name!r}: range must be [lo, hi] integers 0 <= lo <= hi (policy "
                             f"steps), got {r!r}")
        if self.distribution != "uniform":
            raise ValueError(f"randomization term {name!r}: an action delay is drawn uniformly")
        self.low, self.high = int(r[0]), int(r[1])
        env._setup_action_delay(self.high)

    def apply(self, env_ids):
        u = self.env.rand_worlds(env_ids, 1)[:, 0]
        delay = self.low + torch.floor(u * (self.high - self.low + 1)).long().clamp_max(self.high - self.low)
        self.env.action_delay[env_ids] = delay


#: term type -> its class (GUIDE.md "Domain randomization" documents each)
TERM_TYPES = {
    "body_mass": BodyMass, "body_inertia": BodyInertia, "body_com": BodyCom, "joint_damping": DofDamping,
    "joint_armature": DofArmature, "joint_frictionloss": DofFrictionloss, "friction": Friction,
    "actuator_gains": ActuatorGains, "effort_limit": EffortLimit, "gravity": Gravity, "push": PushVelocity,
    "encoder_bias": EncoderBias, "action_delay": ActionDelay,
}
