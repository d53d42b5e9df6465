"""Terms: the named functions an environment is composed of, listed with their parameters in
the task file, in the manner of Isaac Lab's and mjlab's managers.

The `env` section of a task file lists the terms of each section as a mapping
{term name: settings}:

    rewards:                 # weight, then the term's parameters (envs/mdp/rewards.py)
      tracking_lin_vel: {weight: 1.0, sigma: 0.25}
      feet_air_time: {weight: 1.0, threshold: 0.5}
    terminations:            # the term's parameters (envs/mdp/terminations.py)
      base_contact: {}
      base_height: {min_height: 0.15}
    commands:                # envs/mdp/commands.py
      base_velocity: {resample_s: 10.0, lin_vel_x: [-1.0, 1.0], lin_vel_y: [-0.5, 0.5]}
    curriculum:              # envs/mdp/curriculum.py
      terrain_levels: {}

A term is a function `func(env, *, parameters)` or a class `cls(env, *, parameters)` whose
instance is called with the env (`Term`). Its parameters are its keyword-only arguments: their
defaults, then the environment's `term_params` (a robot's own defaults, {section: {term:
{parameter: value}}}: the class's `TERM_PARAMS`, with those of a robot preset over them,
envs.presets), then the task file's values. Each environment class names the terms it
knows in one registry per section (`REWARD_TERMS`, `TERMINATION_TERMS`, `COMMAND_TERMS`,
`CURRICULUM_TERMS`: term name -> function or class) and the terms it uses when the task gives
none (`REWARDS`, `TERMINATIONS`, `COMMANDS`, `CURRICULUM`). A section given replaces the
default one; a term set to null is left out.

The environment evaluates them in the order listed: the step reward is sum(term(env) x weight)
(legged_gym's and Isaac Lab's reward manager; the legged terms include the policy step dt
themselves, envs/mdp/rewards.py), the terminations are or-ed, the curriculum terms run at each
reset. Events (domain randomization) are the terms of `envs.randomization` (envs/mdp/events.py),
observations those of `envs.observations` (envs/mdp/observations.py).

A task file in the former flat form (keys such as `reward_weights` and
`tracking_sigma`) is refused, each such key with what to write instead (`former_key_error`).
"""

from __future__ import annotations

import dataclasses
import difflib
import inspect
import math
from collections.abc import Callable, Mapping

#: section -> (the registry attribute of an env class, its default terms' attribute, the word for one term)
SECTIONS = {
    "rewards": ("REWARD_TERMS", "REWARDS", "reward"),
    "terminations": ("TERMINATION_TERMS", "TERMINATIONS", "termination"),
    "commands": ("COMMAND_TERMS", "COMMANDS", "command"),
    "curriculum": ("CURRICULUM_TERMS", "CURRICULUM", "curriculum"),
}


@dataclasses.dataclass
class Term:
    """One configured term: `term(env, *args)` is `func(env, *args, **params)` (a class term's
    instance holds its parameters: `params` is empty); `weight` for a reward term."""

    name: str
    func: Callable
    params: dict
    weight: float | None = None

    def __call__(self, env, *args):
        return self.func(env, *args, **self.params)


def parameters(func) -> dict[str, inspect.Parameter]:
    """The parameters a task file may set for term `func`: its keyword-only arguments (a
    class's, of its constructor)."""
    target = func.__init__ if isinstance(func, type) else func
    return {n: p for n, p in inspect.signature(target).parameters.items() if p.kind is p.KEYWORD_ONLY}


def registry(cls, section: str) -> dict[str, Callable]:
    """The terms env class `cls` knows in `section`: term name -> function or class."""
    return getattr(cls, SECTIONS[section][0], {})


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _suggest(key: str, choices, what: str = "known keys") -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; {what}: {', '.join(sorted(choices)) or 'none'}"


def _value_error(where: str, value, default) -> str | None:
    """What is wrong with `value` for a parameter whose default is `default` (None: nothing
    found; parameters without a telling default are checked by the term when it is built)."""
    if isinstance(default, bool):
        return None if isinstance(value, bool) else f"{where} must be true or false, got {value!r}"
    if _is_number(default):
        if where.endswith("_s"):  # a duration
            return None if _is_number(value) and value > 0 else f"{where} must be a number > 0 (s), got {value!r}"
        return None if _is_number(value) else f"{where} must be a finite number, got {value!r}"
    if isinstance(default, (tuple, list)) and default and all(map(_is_number, default)):
        ok = isinstance(value, (tuple, list)) and len(value) == len(default) and all(map(_is_number, value))
        return None if ok else f"{where} must be a list of {len(default)} numbers, got {value!r}"
    return None


def check_config(cls, section: str, cfg, prefix: str = "task.env.") -> list[str]:
    """Problems of the `section` mapping `cfg` for env class `cls` (empty when it is valid):
    unknown terms and parameters (with the closest known name), a reward term's weight,
    missing required parameters and values of the wrong type. `prefix` starts each key."""
    where = f"{prefix}{section}"
    if cfg is None:
        return []
    if not isinstance(cfg, Mapping):
        return [f"{where} must be a mapping {{term: {{parameter: value}}}}, got {cfg!r}"]
    terms, kind = registry(cls, section), SECTIONS[section][2]
    own = getattr(cls, "TERM_PARAMS", {}).get(section, {})
    errors = []
    for name, settings in cfg.items():
        if settings is None:
            continue  # left out (an override such as task.env.rewards.feet_air_time=null)
        if name not in terms:
            errors.append(f"{where}: unknown {kind} term {name!r} for {cls.__name__}"
                          f"{_suggest(name, terms, 'its ' + kind + ' terms')}")
            continue
        if not isinstance(settings, Mapping):
            what = "its weight and parameters" if section == "rewards" else "its parameters"
            errors.append(f"{where}.{name} must be a mapping of {what}, got {settings!r}")
            continue
        params = parameters(terms[name])
        known = set(params) | ({"weight"} if section == "rewards" else set())
        errors += [f"unknown key {where}.{name}.{key}{_suggest(key, known)}" for key in settings if key not in known]
        if section == "rewards" and not _is_number(settings.get("weight")):
            errors.append(f"{where}.{name}.weight must be a finite number, got {settings.get('weight')!r}")
        for key, p in params.items():
            default = own.get(name, {}).get(key, p.default)
            if key not in settings:
                if default is inspect.Parameter.empty:
                    errors.append(f"{where}.{name}.{key} is required (the {kind} term {name!r} has no default)")
                continue
            problem = _value_error(f"{where}.{name}.{key}", settings[key], default)
            if problem:
                errors.append(problem)
    return errors


def over(base: Mapping, top: Mapping) -> dict:
    """Term parameters {section: {term: {parameter: value}}} of `top` over those of `base`,
    parameter by parameter."""
    out = {section: {term: dict(params) for term, params in terms.items()} for section, terms in base.items()}
    for section, terms in top.items():
        for term, params in terms.items():
            out.setdefault(section, {}).setdefault(term, {}).update(params)
    return out


def build(env, section: str, cfg: Mapping | None = None) -> dict[str, Term]:
    """The terms of `section` for `env`, in the order listed: `cfg` ({term: settings}; None: the
    class's defaults), checked (ValueError naming every problem); class terms are constructed."""
    cls = type(env)
    if cfg is None:
        cfg = getattr(cls, SECTIONS[section][1], {})
    errors = check_config(cls, section, cfg, prefix="")
    if errors:
        raise ValueError("; ".join(errors))
    terms, own = registry(cls, section), env.term_params.get(section, {})
    out = {}
    for name, settings in cfg.items():
        if settings is None:
            continue
        settings = dict(settings)
        weight = settings.pop("weight", None)
        params = {**own.get(name, {}), **settings}
        func = terms[name]
        weight = None if weight is None else float(weight)
        out[name] = (Term(name, func(env, **params), {}, weight) if isinstance(func, type)
                     else Term(name, func, params, weight))
    return out


# ------------------------------------------------------------------- the former form of a task
#: env keyword arguments of task files written before the terms, and where each went:
#: key -> (section, the terms that take it, the parameter's name)
FORMER_KEYS = {
    "reward_weights": ("rewards", (), "weight"),
    "tracking_sigma": ("rewards", ("tracking_lin_vel", "tracking_ang_vel"), "sigma"),
    "air_time_target": ("rewards", ("feet_air_time", "feet_air_time_biped"), "threshold"),
    "deviation_joints": ("rewards", ("joint_deviation",), "joints"),
    "acc_joints": ("rewards", ("dof_acc",), "joints"),
    "torque_joints": ("rewards", ("torques",), "joints"),
    "swing_height": ("rewards", ("feet_swing_height",), "height"),
    "base_height_target": ("rewards", ("base_height",), "target"),
    "upright_sigma": ("rewards", ("upright",), "sigma"),
    "pose_std": ("rewards", ("pose",), "std"),
    "pose_thresholds": ("rewards", ("pose",), "thresholds"),
    "min_base_height": ("terminations", ("base_height",), "min_height"),
    "max_cart": ("terminations", ("cart_out_of_bounds",), "limit"),
    "max_angle": ("terminations", ("pole_fallen",), "limit"),
    "command_resample_s": ("commands", ("base_velocity",), "resample_s"),
    **{key: ("commands", ("base_velocity",), key) for key in (
        "lin_vel_x", "lin_vel_y", "ang_vel_yaw", "heading_command", "heading_stiffness", "heading_range")},
    "command_curriculum": ("curriculum", ("command_vel",), None),
    "max_lin_vel_x": ("curriculum", ("command_vel",), "max_lin_vel_x"),
}


def _flow(value) -> str:
    """`value` in YAML's flow style (as a Hydra override takes it)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return "null" if value is None else str(value)


def former_key_error(cls, key: str, env_cfg: Mapping, prefix: str = "task.env.") -> str | None:
    """The message for `key` of an env section `env_cfg` in the form before the terms (None: not
    such a key): what to write instead for env class `cls`, with the values given."""
    if key not in FORMER_KEYS:
        return None
    section, names, param = FORMER_KEYS[key]
    value = env_cfg[key]
    head = (f"{prefix}{key} is the former form of the task's {section} (task files list terms by section, "
            f"envs/terms.py)")
    if key == "reward_weights":
        params = {term: {} for term in (value or {})}
        for other, (where, takers, name) in FORMER_KEYS.items():
            for term in takers if where == "rewards" and other in env_cfg else ():
                if term in params:
                    params[term][name] = env_cfg[other]
        rewards = {term: {"weight": w, **params[term]} for term, w in (value or {}).items()}
        return f"{head}: write {prefix}rewards: {_flow(rewards)}"
    if key == "command_curriculum":
        return (f"{head}: list the term, {prefix}curriculum.command_vel: {{max_lin_vel_x: "
                f"{_flow(env_cfg.get('max_lin_vel_x', 2.0))}}}" if value else f"{head}: leave it out")
    takers = [term for term in names if term in registry(cls, section)] or list(names[:1])
    # the terms the former file used: its reward_weights, or the class's default terms
    if section == "rewards" and "reward_weights" in env_cfg:
        listed = env_cfg["reward_weights"] or {}
    else:
        listed = getattr(cls, SECTIONS[section][1], {})
    targets = [f"{prefix}{section}.{term}.{param}={_flow(value)}" for term in takers if term in listed]
    if targets:
        return f"{head}: write {' and '.join(targets)}"
    weight = "weight: w, " if section == "rewards" else ""
    return (f"{head}: leave it out (none of the terms that take it is listed: {', '.join(takers)}), or list one "
            f"with it: {prefix}{section}.{takers[0]}: {{{weight}{param}: {_flow(value)}}}")
