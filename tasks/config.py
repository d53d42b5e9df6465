"""The configuration of scripts/train.py and scripts/play.py: Hydra's registration, one schema
per section and the validation of a composed configuration.

Every tasks/*.yaml becomes an option of the `task` group, so `task=NAME` selects it. The
sections and their schemas (simrl.rl.config.Section): the command lines' top-level keys
(TrainCfg, PlayCfg), `sim` (SimCfg), a task file's own keys (TaskCfg), its `ppo` and `shac`
sections (the learners' simrl.rl.config.PpoCfg and ShacCfg), and the environment's:
`task.env` is checked against the environment's constructor (`check_env`; the sections with a
checker of their own are listed in ENV_SECTIONS), `task.robot` and `task.terrain` against
envs.robot.RobotCfg and envs.terrain.TerrainCfg. `validate(cfg)` checks a composed
configuration in one place and raises ConfigError naming every bad key, with the closest known
one for a misspelt key.
"""

import dataclasses
import inspect
import math
import re
from collections.abc import Callable, Mapping
from pathlib import Path

from hydra.core.config_store import ConfigStore
from omegaconf import DictConfig, OmegaConf, open_dict

import tasks
from simrl.errors import ConfigError
from simrl.rl.config import (
    RUN_TASK_FILE,
    Checker,
    PpoCfg,
    Rule,
    Section,
    ShacCfg,
    boolean,
    expect,
    is_int,
    is_number,
    number,
    one_of,
    positive_int,
    resolve_device,
    section,
    setting,
    suggest,
)

DEFAULT_TASK = "quadruped"

#: env keyword arguments that come from the `sim` section (SimCfg): sim.backend, sim.njmax, sim.nconmax,
#: sim.strict
SIM_KEYS = ("backend", "njmax", "nconmax", "strict")
#: env keyword arguments that come from top-level keys instead (num_envs=, ..., sim.backend=, ...)
ENV_TOP_LEVEL = {"num_envs", "device", "seed", *SIM_KEYS}


# ------------------------------------------------------------------- the environment's section
def _env_class(task_name: str):
    """The environment class `envs.make(task_name)` builds and its registered defaults, or None."""
    import envs

    return envs.registry().get(task_name)


def _env_parameters(task_name: str) -> dict | None:
    """Keyword parameters (name -> default) of the environment class `envs.make(task_name)` builds."""
    registered = _env_class(task_name)
    if registered is None:
        return None
    cls, defaults = registered
    params = {}
    for klass in cls.__mro__:  # a constructor that takes **kwargs passes them to its base class's
        init = klass.__dict__.get("__init__")
        if init is None:
            continue
        parameters = inspect.signature(init).parameters
        for name, p in parameters.items():
            if name == "self" or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) or name in params:
                continue
            params[name] = defaults.get(name, p.default)
        if not any(p.kind == p.VAR_KEYWORD for p in parameters.values()):
            break
    return params


def _randomization(value, env_class) -> list[str]:
    from envs import randomization

    return randomization.check_config(value)


def _actuator(value, env_class) -> list[str]:
    from envs import actuators

    return actuators.check_config(value)


def _observations(value, env_class) -> list[str]:
    from envs import observations

    groups = {"policy": list(env_class.POLICY_TERMS)} if hasattr(env_class, "POLICY_TERMS") else {}
    return observations.check_config(value, groups)


def _terms(section: str) -> Callable[[object, type], list[str]]:
    """The checker of a section of the env's terms (envs/terms.py: rewards, terminations, ...)."""
    def check(value, env_class) -> list[str]:
        from envs import terms

        return terms.check_config(env_class, section, value)

    return check


#: sections of `task.env` with a checker of their own: key -> checker(value, environment class),
#: which returns the problems of the section, one line each (naming task.env.<key>...)
ENV_SECTIONS: dict[str, Callable[[object, type], list[str]]] = {
    "randomization": _randomization,
    "actuator": _actuator,
    "observations": _observations,
    **{section: _terms(section) for section in ("rewards", "terminations", "commands", "curriculum")},
}


def _scale(v) -> bool:
    """An action scale: a number > 0 or a non-empty list of them."""
    values = v if isinstance(v, (list, tuple)) else [v]
    return bool(values) and all(is_number(x) and math.isfinite(x) and x > 0 for x in values)


#: environment keyword arguments checked by name; the others by their default's type (_rule_by_default)
ENV_RULES: dict[str, Rule] = {
    "nonfinite_actions": one_of("error", "zero"),
    "observation_source": one_of("sensors", "state"),
    "dtype": one_of("float32", "float64"),
    "decimation": positive_int(),
    # the legged tasks' (null: the robot section's task.robot.action_scale)
    "action_scale": expect(lambda v: v is None or _scale(v),
                           "a number > 0, a list of them (one per actuator) or null (task.robot.action_scale)"),
}


def _rule_by_default(key: str, default) -> Rule | None:
    """The rule of an environment keyword argument that ENV_RULES does not name: a duration
    (`*_s`, `*_dt`, dt, timestep) is a number > 0; otherwise the type of its default."""
    if key.endswith("_s") or key in ("dt", "timestep") or key.endswith("_dt"):
        return number(low=0, low_open=True)
    if isinstance(default, bool):
        return boolean()
    if is_int(default):
        return expect(is_int, "an integer")
    if isinstance(default, float):
        return number()
    if isinstance(default, str):
        return expect(lambda v: isinstance(v, str), "a string")
    if isinstance(default, (tuple, list)):
        return expect(lambda v: isinstance(v, (list, tuple)) and len(v) == len(default)
                      and all(is_number(x) and math.isfinite(x) for x in v), f"a list of {len(default)} numbers")
    return None


def _check_env(c: Checker, task_name: str, env_cfg) -> None:
    import envs

    params = _env_parameters(task_name)
    if params is None:
        c.errors.append(f"task.name={task_name!r} is not an environment; available: {', '.join(envs.names())}")
        return
    if OmegaConf.is_config(env_cfg):
        env_cfg = OmegaConf.to_container(env_cfg, resolve=True)
    if not isinstance(env_cfg, Mapping):
        c.fail("task.env", env_cfg, "a mapping of environment keyword arguments")
        return
    for key, value in env_cfg.items():
        full = f"task.env.{key}"
        if key in ENV_TOP_LEVEL:
            top = f"sim.{key}" if key in SIM_KEYS else key
            c.errors.append(f"{full}: set the top-level key {top}=... instead")
        elif key in ("terrain", "robot") and key in params:
            c.errors.append(f"{full}: set the task's {key} section, task.{key}.*, instead")
        elif key not in params:
            from envs.terms import former_key_error  # a key of the form before the terms: what to write

            c.errors.append(former_key_error(_env_class(task_name)[0], key, env_cfg)
                            or f"unknown key {full} for environment {task_name!r}"
                            f"{suggest(key, [p for p in params if p not in ENV_TOP_LEVEL])}")
        elif key in ENV_SECTIONS:
            c.errors.extend(ENV_SECTIONS[key](value, _env_class(task_name)[0]))
        else:
            rule = ENV_RULES.get(key) or _rule_by_default(key, params[key])
            if rule is not None:
                rule(c, full, value)


def check_env(task_name: str, env_cfg) -> list[str]:
    """The problems of `env_cfg` as the `task.env` section of a task whose environment is
    `task_name` (an envs.make name), one line each; empty when it is valid."""
    c = Checker()
    _check_env(c, task_name, env_cfg)
    return c.errors


# ------------------------------------------------------------- the robot and terrain sections
def _section_known(c: Checker, task_name: str, key: str, value, cfg_class, missing: str) -> set | None:
    """The keys of the dataclass `cfg_class` when `value` can be the task's `key` section
    (task.robot, task.terrain), after reporting its unknown keys; None, with the error recorded,
    when the environment has no such section (`missing` says which have) or `value` is not a
    mapping."""
    if key not in (_env_parameters(task_name) or {}):
        c.errors.append(f"task.{key}: environment {task_name!r} has no {missing}")
        return None
    if not isinstance(value, Mapping):
        c.fail(f"task.{key}", value, f"a mapping of {key} keys (envs/{key}.py {cfg_class.__name__})")
        return None
    known = {f.name for f in dataclasses.fields(cfg_class)}
    c.unknown(f"task.{key}.", value.keys(), known)
    return known


def _check_from_dict(c: Checker, key: str, value: Mapping, cfg_class, known: set) -> None:
    """Whatever else `cfg_class.from_dict` refuses in the section."""
    try:
        cfg_class.from_dict({k: v for k, v in value.items() if k in known})
    except (ValueError, TypeError) as e:
        c.errors.append(f"task.{key}: {e}")


def _presets() -> list[str]:
    from envs.presets import PRESETS

    return list(PRESETS)


_NAME = expect(lambda v: v is None or isinstance(v, str), "a string")
_NAME_OR_NULL = expect(lambda v: v is None or isinstance(v, str), "a string or null")
_NAMES = expect(lambda v: v is None or isinstance(v, str)
                or (isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v)),
                "a name or a list of names (regular expressions)")

#: value rules of the robot section's keys (envs.robot.RobotCfg; the names are checked against
#: the MJCF when the environment loads it, envs.robot.Robot)
ROBOT_RULES: dict[str, Rule] = {
    "mjcf": _NAME_OR_NULL, "base_body": _NAME, "keyframe": _NAME_OR_NULL,
    "foot_geoms": _NAMES, "foot_bodies": _NAMES, "termination_geoms": _NAMES, "termination_bodies": _NAMES,
    "undesired_geoms": _NAMES, "undesired_bodies": _NAMES,
    "action_scale": expect(lambda v: v is None or _scale(v), "a number > 0 or a list of them (one per actuator)"),
    "floor_geom": _NAME, "lin_vel_sensor": _NAME, "ang_vel_sensor": _NAME, "orientation_sensor": _NAME,
    "imu_site": _NAME_OR_NULL,
    "preset": lambda c, key, value: value is None or value in _presets() or c.fail(
        key, value, f"null or a preset of envs/presets.py: {', '.join(_presets())}"),
}


def _check_robot(c: Checker, task_name: str, robot) -> None:
    from envs.robot import RobotCfg

    if robot is None and "robot" in (_env_parameters(task_name) or {}):
        return
    known = _section_known(c, task_name, "robot", robot, RobotCfg, "robot section (the legged tasks have: "
                           "quadruped, quadruped_rough, humanoid, humanoid_rough)")
    if known is None:
        return
    for key, rule in ROBOT_RULES.items():
        if key in robot:
            rule(c, f"task.robot.{key}", robot[key])
    _check_from_dict(c, "robot", robot, RobotCfg, known)


def _check_terrain(c: Checker, task_name: str, terrain) -> None:
    from envs.terrain import TerrainCfg

    known = _section_known(c, task_name, "terrain", terrain, TerrainCfg, "terrain (quadruped_rough has)")
    if known is not None:
        _check_from_dict(c, "terrain", terrain, TerrainCfg, known)


# ------------------------------------------------------------------------------------ schemas
@dataclasses.dataclass(kw_only=True)
class TaskCfg(Section):
    """A task file's own keys (`task.*`, tasks/<name>.yaml)."""

    KEY = "task"

    #: the environment, an envs.make name
    name: str = setting(rule=expect(lambda v: isinstance(v, str), "an environment name"))
    #: keyword arguments of envs.make (check_env)
    env: dict = setting({})
    #: the terrain grid (envs.terrain.TerrainCfg) of an environment that has one
    terrain: dict | None = setting(None)
    #: the robot (envs.robot.RobotCfg) of a legged environment
    robot: dict | None = setting(None)
    #: worlds on the CPU and on a GPU, and iterations, when the command line leaves them null
    num_envs: int | None = setting(None, positive_int())
    num_envs_gpu: int | None = setting(None, positive_int())
    max_iterations: int | None = setting(None, positive_int())
    ppo: PpoCfg | None = setting(None, section(PpoCfg))
    #: SHAC's settings, for a task whose environment has a differentiable step
    shac: ShacCfg | None = setting(None, section(ShacCfg, "a mapping of SHAC settings"))

    @classmethod
    def check_together(cls, c: Checker, values: Mapping) -> None:
        """The environment's sections, against the environment that `name` gives."""
        name = values.get("name")
        if not isinstance(name, str):
            return
        _check_env(c, name, values.get("env", {}))
        if "terrain" in values:
            _check_terrain(c, name, values["terrain"])
        if "robot" in values:
            _check_robot(c, name, values["robot"])
            robot, env = values.get("robot"), values.get("env")
            actuator = env.get("actuator") if isinstance(env, Mapping) else None
            kind = actuator.get("type", "mujoco") if isinstance(actuator, Mapping) else "mujoco"
            if isinstance(robot, Mapping) and robot.get("actuators") and kind != "mujoco":
                c.errors.append(f"task.env.actuator.type={kind}: with task.robot.actuators each group sets its type "
                                f"(position, pd, dc_motor); leave task.env.actuator.type mujoco")


def _check_backend(c: Checker, key: str, value) -> None:
    from envs.base import BACKENDS

    one_of(*BACKENDS)(c, key, value)


@dataclasses.dataclass(kw_only=True)
class SimCfg(Section):
    """The simulation the environment runs on (`sim.*`)."""

    KEY = "sim"

    #: warp: this engine; mujoco: MuJoCo itself, one MjData per world, CPU only (sim-to-sim)
    backend: str = setting("warp", _check_backend)
    #: constraint rows per world (simrl.Sim's njmax, MuJoCo Warp's name); null: the model's
    #: default, which the Sim prints when it is made
    njmax: int | None = setting(None, positive_int(allow_none=True))
    #: contact slots per world, for the pairs the broadphase keeps (simrl.Sim's nconmax, MuJoCo
    #: Warp's name for its contacts per world);
    #: null: the model's default, which the Sim prints when it is made
    nconmax: int | None = setting(None, positive_int(allow_none=True))
    #: true: a world that outgrows a budget raises OverflowError; false: a RuntimeWarning the
    #: first time, and the share of such worlds in Diagnostics/overflow
    strict: bool = setting(False, boolean())

    @classmethod
    def check_together(cls, c: Checker, values: Mapping) -> None:
        """MuJoCo (backend mujoco) has no budgets: njmax, nconmax and strict belong to this engine."""
        if values.get("backend") != "mujoco":
            return
        for key, unset, text, budget in (("njmax", None, "null", "constraint-row"),
                                         ("nconmax", None, "null", "contact"),
                                         ("strict", False, "false", "constraint-row")):
            value = values.get(key, unset)
            if value is not unset:
                shown = str(value).lower() if isinstance(value, bool) else value
                c.errors.append(f"sim.{key}={shown}: MuJoCo (sim.backend=mujoco) has no {budget} budget; "
                                f"leave sim.{key}={text} or use sim.backend=warp")


#: the viewer keys of train.py and play.py (simrl.viewer; docs/GUIDE.md "Watch it in a browser")
_VIEWER = expect(lambda v: v is None or v == "web", "web or null")
_HOST = expect(lambda v: isinstance(v, str) and bool(v.strip()), "a host name or address (127.0.0.1, 0.0.0.0)")
_PORT = expect(lambda v: is_int(v) and 1 <= v <= 65535, "a port number in [1, 65535]")


def _file(also: str = "") -> Rule:
    return expect(lambda v: v is None or (isinstance(v, str) and bool(v.strip())), "a file path" + also)


_SEED = expect(lambda v: is_int(v) and 0 <= v < 2**63, "a non-negative integer")
_DEVICE = expect(lambda v: isinstance(v, str), "auto, cpu, cuda or cuda:N")
_TASK = section(TaskCfg, lambda: f"a task name ({', '.join(tasks.available())})")


class _RunCfg(Section):
    """What TrainCfg and PlayCfg check together: the device and the algorithm against the backend."""

    @classmethod
    def check_together(cls, c: Checker, values: Mapping) -> None:
        from envs.base import BACKENDS

        sim = values.get("sim")
        backend = sim.get("backend", "warp") if isinstance(sim, Mapping) else "warp"
        backend = backend if backend in BACKENDS else "warp"
        if backend == "mujoco" and values.get("algo") == "shac":
            c.errors.append("algo=shac differentiates through the simulation, which sim.backend=mujoco cannot; "
                            "use sim.backend=warp")
        if isinstance(values.get("device"), str):
            try:
                resolve_device(values["device"], backend)
            except ConfigError as e:
                c.errors.append(str(e))
        task = values.get("task")
        if values.get("algo") == "shac" and isinstance(task, Mapping) and "shac" not in task:
            c.errors.append(f"algo=shac: task {task.get('name')!r} has no `shac` section (SHAC needs a task with a "
                            f"differentiable step: {', '.join(shac_tasks())})")


@dataclasses.dataclass(kw_only=True)
class TrainCfg(_RunCfg):
    """scripts/train.py's top-level keys (its docstring says what each does)."""

    RUN_DIR = "runs/${task.name}/${now:%Y-%m-%d_%H-%M-%S}"

    num_envs: int | None = setting(None, positive_int(allow_none=True))
    device: str = setting("auto", _DEVICE)
    seed: int = setting(42, _SEED)
    max_iterations: int | None = setting(None, positive_int(allow_none=True))
    algo: str = setting("ppo", one_of("ppo", "shac"))
    resume: str | None = setting(None, _file(", a run directory or latest"))
    init_policy: str | None = setting(None, _file(" or a run directory"))
    sim: SimCfg = setting(SimCfg(), section(SimCfg, "a mapping (sim.backend=..., sim.njmax=..., "
                                                              "sim.nconmax=..., sim.strict=...)"))
    dist_timeout_s: float = setting(900, number(low=0.0, low_open=True))
    viewer: str | None = setting(None, _VIEWER)
    viewer_host: str = setting("127.0.0.1", _HOST)
    viewer_port: int = setting(8080, _PORT)
    viewer_seconds: float | None = setting(None, number(low=0, low_open=True, allow_none=True))
    viewer_worlds: int = setting(4, positive_int())
    task: TaskCfg = setting(rule=_TASK)


@dataclasses.dataclass(kw_only=True)
class PlayCfg(_RunCfg):
    """scripts/play.py's top-level keys (its docstring says what each does)."""

    RUN_DIR = "runs/${task.name}/play_${now:%Y-%m-%d_%H-%M-%S}"

    checkpoint: str | None = setting(None, _file())
    num_envs: int | None = setting(None, positive_int(allow_none=True))
    num_episodes: int | None = setting(None, positive_int(allow_none=True))
    device: str = setting("auto", _DEVICE)
    seed: int = setting(1, _SEED)
    video: bool = setting(False, boolean())
    video_length_s: float = setting(10.0, number(low=0, low_open=True))
    sim: SimCfg = setting(SimCfg(), section(SimCfg, "a mapping (sim.backend=..., sim.njmax=..., "
                                                              "sim.nconmax=..., sim.strict=...)"))
    viewer: str | None = setting(None, _VIEWER)
    viewer_host: str = setting("127.0.0.1", _HOST)
    viewer_port: int = setting(8080, _PORT)
    viewer_seconds: float | None = setting(None, number(low=0, low_open=True, allow_none=True))
    task: TaskCfg = setting(rule=_TASK)

    @classmethod
    def check_together(cls, c: Checker, values: Mapping) -> None:
        super().check_together(c, values)
        if values.get("viewer") == "web" and values.get("video"):
            c.errors.append("viewer=web runs the policy live in a browser and video=true records an evaluation "
                            "episode: run play.py once for each")


#: the schema of each primary config (the script of that name's)
SCHEMAS: dict[str, type[_RunCfg]] = {"train": TrainCfg, "play": PlayCfg}


# ------------------------------------------------------------------------------ registration
def register(config_name: str) -> None:
    """Register the task group and the primary config `config_name` ("train" or "play": the
    defaults of SCHEMAS[config_name]) in Hydra's ConfigStore; `compose(config_name)` and
    `@hydra.main(config_name=...)` can then build it."""
    schema = SCHEMAS[config_name]
    store = ConfigStore.instance()
    for name in tasks.available():
        store.store(group="task", name=name, node=tasks.load(name))
    store.store(name=config_name, node={
        # no Hydra <job>.log: the scripts keep their own (simrl.rl.runlog), since they print, not log
        "defaults": ["_self_", {"task": DEFAULT_TASK}, {"override hydra/job_logging": "none"}],
        **schema.defaults(),
        "hydra": {"run": {"dir": schema.RUN_DIR}, "job": {"chdir": False}},
    })


# ------------------------------------------------------------------------ a user's task file
#: what a `task=` value ends with when it is a task file's path rather than a shipped task's name
TASK_FILE_SUFFIXES = (".yaml", ".yml")


def load_task_file(path) -> DictConfig:
    """A task file outside the repository (`task=PATH.yaml`): its keys are a task file's
    (TaskCfg), plus `base: NAME`, a shipped task the file starts from: the file's sections
    override the base's key by key (OmegaConf.merge: mappings merge, lists and values replace).
    Without `base` the file is a whole task (it gives `name`). Paths in it (robot.mjcf) are
    relative to the working directory, as on the command line. Raises ConfigError naming the file
    and the problem: missing, not a mapping, an unknown top-level key (with the closest known
    one), a base that is not a shipped task, neither base nor name; deeper keys are checked with
    the composed configuration (validate)."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ConfigError(f"task={path}: no such task file")
    try:
        own = OmegaConf.load(file)
    except Exception as e:  # yaml's and OmegaConf's errors alike: the file is not a task
        raise ConfigError(f"task={path}: not a YAML task file ({type(e).__name__}: {e})") from None
    if not isinstance(own, DictConfig):
        raise ConfigError(f"task={path}: a task file is a mapping of task keys (base, name, env, robot, ...)")
    known = ["base", *(f.name for f in dataclasses.fields(TaskCfg))]
    unknown = [str(k) for k in own if k not in known]
    if unknown:
        raise ConfigError("\n  ".join([f"invalid task file {file}:"] + [
            f"unknown key {k}{suggest(k, known)}" for k in unknown]))
    base = own.pop("base", None)
    if base is None:
        if "name" not in own:
            raise ConfigError(f"task file {file}: give base: <a shipped task> ({', '.join(tasks.available())}) "
                              f"to start from one, or name: <an environment> for a whole task")
        return own
    if base not in tasks.available():
        raise ConfigError(f"task file {file}: base: {base!r} is not a shipped task; available: "
                          f"{', '.join(tasks.available())}")
    return OmegaConf.merge(tasks.load(base), own)


def task_overrides(config_name: str, overrides) -> list[str]:
    """The command line's overrides with the task's file registered in Hydra's ConfigStore (call
    after `register(config_name)`): `task=PATH.yaml` (a value ending in .yaml or .yml) is
    load_task_file(PATH), selected as the option of the file's name; with no `task=`, the run
    directory of train.py's `resume=` or play.py's `checkpoint=` (a checkpoint, a run directory,
    or `latest`: the newest checkpoint under runs/<DEFAULT_TASK>/, the task the command line
    means without task=) gives its own copy of the task it ran, RUN_TASK_FILE, when it has one.
    Other overrides pass unchanged."""
    store = ConfigStore.instance()

    def select(path) -> str:
        option = re.sub(r"[^\w.-]", "_", Path(path).name)
        store.store(group="task", name=option, node=load_task_file(path))
        return f"task={option}"

    out, chosen = [], False
    for arg in map(str, overrides):
        key, sep, value = arg.partition("=")
        if sep and key.strip() == "task":
            chosen = True
            if value.strip().endswith(TASK_FILE_SUFFIXES):
                arg = select(value.strip())
        out.append(arg)
    run_key = {"train": "resume", "play": "checkpoint"}.get(config_name)
    given = [a.partition("=")[2].strip() for a in out if a.partition("=")[0].strip() == run_key]
    if not chosen and given and given[-1] not in ("", "null"):
        source = Path(given[-1]).expanduser()
        if given[-1] == "latest":
            from simrl.errors import CheckpointError
            from simrl.rl.checkpoint import find_latest_checkpoint

            try:
                source = find_latest_checkpoint(DEFAULT_TASK, "runs", run_key)
            except CheckpointError:  # none: the run says so, as without a task file
                return out
        run_task = (source if source.is_dir() else source.parent) / RUN_TASK_FILE
        if run_task.is_file():
            print(f"simrl: task from {run_task} (the run's own; give task= to choose another)", flush=True)
            out.append(select(run_task))
    return out


def check_overrides(config_name: str, overrides) -> None:
    """Name the misspelt keys among command-line overrides before Hydra sees them.

    Hydra refuses `num_env=16` with "use +num_env=16", which would only move the refusal to
    `validate`. This checks each plain `key=value` override against the keys of the config's
    schema (top-level keys and their sections, e.g. `sim.backend`) and raises ConfigError
    naming every unknown one with the closest known key. Left to Hydra: the task's own keys
    (`task.*`, whose file Hydra composes), `hydra.*`, group selections (`task=NAME`, `a/b=c`),
    additions and deletions (`+key=`, `~key`) and command-line flags (`--cfg`, `-m`, ...)."""
    schema = SCHEMAS.get(config_name)
    if schema is None:
        return
    root = {**schema.defaults(), "task": None, "hydra": None}
    problems = []
    for arg in overrides:
        arg = str(arg)
        if arg.startswith(("-", "+", "~")) or "=" not in arg:
            continue
        key = arg.split("=", 1)[0].strip()
        if not key or "/" in key or "@" in key:
            continue
        node, prefix = root, ""
        for part in key.split("."):
            if not isinstance(node, Mapping):
                break  # a value, not a section: Hydra reports it
            if part not in node:
                known = [prefix + k for k in node if not (prefix == "" and k == "hydra")]
                problems.append(f"unknown key {prefix}{part}{suggest(prefix + part, known)}")
                break
            if prefix == "" and part in ("task", "hydra"):
                break
            node, prefix = node[part], prefix + part + "."
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


def validate(cfg, config_name: str = "train") -> None:
    """Check a composed configuration (scripts/train.py's or scripts/play.py's, by
    `config_name`) before anything is built: unknown keys (with a suggestion), values of the
    wrong type, out-of-range values (num_envs, max_iterations, seed, durations, decimation, PPO
    and SHAC hyper-parameters), the task's environment keyword arguments against the
    environment's constructor, and the device. Raises ConfigError listing every problem, one
    per line."""
    if not isinstance(cfg, dict):  # a DictConfig
        cfg = OmegaConf.to_container(cfg, resolve=True)
    c = Checker()
    SCHEMAS[config_name].check_into(c, {k: v for k, v in cfg.items() if k != "hydra"})
    c.raise_errors()


# ------------------------------------------------------------------------------ tasks' parts
def env_kwargs(task) -> dict:
    """The keyword arguments of `envs.make` that a task's file gives: its `env` section, and
    its `terrain` and `robot` sections as `terrain=` and `robot=` where it has them."""
    if not isinstance(task, dict):
        task = OmegaConf.to_container(task, resolve=True)
    kwargs = dict(task.get("env") or {})
    for key in ("terrain", "robot"):
        if task.get(key) is not None:
            kwargs[key] = task[key]
    return kwargs


def apply_algo_env(cfg) -> None:
    """algo=shac: the task's `shac.env` settings over its `env` section, in place (before
    `validate`, which then checks them as environment settings), so that the run's task file
    records the environment as it ran (resume= and play.py build the same)."""
    task = cfg.get("task")
    if cfg.get("algo") != "shac" or not isinstance(task, (Mapping, DictConfig)):
        return
    overrides = (task.get("shac") or {}).get("env") if isinstance(task.get("shac"), (Mapping, DictConfig)) else None
    if not overrides:
        return
    with open_dict(task):
        task["env"] = OmegaConf.merge(task.get("env") or {}, overrides)


def shac_tasks() -> list[str]:
    """Tasks whose file has a `shac` section (their environments have a differentiable step)."""
    return [name for name in tasks.available() if "shac" in tasks.load(name)]


@dataclasses.dataclass
class TaskEnvFactory:
    """How a run builds the environment of `task` (a task file's mapping) for simrl.rl.train
    and simrl.rl.play, which import no environments (their EnvFactory)."""

    task: Mapping

    def make(self, num_envs: int, device: str, seed: int, backend: str, njmax: int | None = None,
             strict: bool = False, nconmax: int | None = None):
        """`envs.make` of the task's environment with its file's sections; `backend`, `njmax`,
        `nconmax` and `strict` are the run's `sim` section (SimCfg)."""
        import envs

        return envs.make(self.task["name"], num_envs=num_envs, device=device, seed=seed, backend=backend,
                         njmax=njmax, nconmax=nconmax, strict=strict, **env_kwargs(self.task))

    @staticmethod
    def vec_env(env, cfg: dict | None = None):
        """`env` as rsl-rl's VecEnv (envs.rsl_rl.RslRlVecEnv); `cfg`: the run's configuration."""
        from envs.rsl_rl import RslRlVecEnv

        return RslRlVecEnv(env, cfg=cfg)
