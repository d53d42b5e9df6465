"""Hydra configuration shared by scripts/train.py and scripts/play.py: every tasks/*.yaml
becomes an option of the `task` group, so `task=NAME` selects it. `validate(cfg)` checks a
composed configuration in one place and raises `ConfigError` naming every bad key."""

import difflib
import inspect
import math
from collections.abc import Mapping

from hydra.core.config_store import ConfigStore
from omegaconf import OmegaConf

import tasks
from simrl.errors import ConfigError

DEFAULT_TASK = "quadruped"

#: top-level keys of each registered primary config (besides `task`), for `validate`
_KEYS: dict[str, set[str]] = {}
#: the registered top-level nodes themselves (nested sections such as `sim`), for `check_overrides`
_NODES: dict[str, dict] = {}

#: keys of a task file and of its `ppo` section that simrl reads (simrl.rl.ppo.rsl_rl_config)
TASK_KEYS = {"name", "env", "terrain", "robot", "num_envs", "num_envs_gpu", "max_iterations", "ppo", "shac"}
PPO_KEYS = {"num_steps_per_env", "save_interval", "actor_hidden_dims", "critic_hidden_dims", "activation",
            "init_noise_std", "obs_normalization", "algorithm", "sync_free", "cuda_graph"}
#: env keyword arguments that come from top-level keys instead (`backend` from sim.backend)
ENV_TOP_LEVEL = {"num_envs", "device", "seed", "backend"}
#: keys of the top-level `sim` section: the simulation the environment runs on
SIM_KEYS = {"backend"}
#: the `sim` section the scripts register (sim.backend: "warp", this engine, or "mujoco",
#: MuJoCo itself on the CPU, for sim-to-sim evaluation)
SIM_DEFAULTS = {"backend": "warp"}


def register(config_name: str, keys: dict, run_dir: str) -> None:
    """Register the task group and the primary config `config_name` with top-level `keys`."""
    store = ConfigStore.instance()
    for name in tasks.available():
        store.store(group="task", name=name, node=OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml"))
    store.store(name=config_name, node={
        # no Hydra <job>.log: the scripts keep their own (simrl.rl.runlog), since they print, not log
        "defaults": ["_self_", {"task": DEFAULT_TASK}, {"override hydra/job_logging": "none"}],
        **keys,
        "hydra": {"run": {"dir": run_dir}, "job": {"chdir": False}},
    })
    _KEYS[config_name] = set(keys)
    _NODES[config_name] = keys


def available_devices() -> list[str]:
    """Devices simrl can run on here: cpu and every CUDA device torch sees."""
    import torch

    return ["cpu"] + [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def resolve_device(device, backend: str = "warp") -> str:
    """`auto` -> cuda:0 when a GPU is present, else cpu; `cuda` -> cuda:0. A device that does
    not exist raises ConfigError naming the available ones. With backend "mujoco" (CPU only),
    `auto` is cpu and any other device than cpu is a ConfigError."""
    import torch

    if backend == "mujoco":
        if device is None or str(device).strip() in ("auto", "cpu"):
            return "cpu"
        raise ConfigError(f"device={device!r}: sim.backend=mujoco runs MuJoCo on the CPU only; use device=cpu "
                          f"(or auto), or sim.backend=warp")
    if device is None or device == "auto":
        return "cuda:0" if torch.cuda.is_available() else "cpu"
    name = str(device).strip()
    if name == "cuda":
        name = "cuda:0"
    available = available_devices()
    if name not in available:
        raise ConfigError(f"device={device!r} does not exist here; available devices: {', '.join(available)} "
                          f"(or auto)")
    return name


# ------------------------------------------------------------------------------- validation
def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _suggest(key: str, choices) -> str:
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(choices))}"


def check_overrides(config_name: str, overrides) -> None:
    """Name the misspelt keys among command-line overrides before Hydra sees them.

    Hydra refuses `num_env=16` with "use +num_env=16", which would only move the refusal to
    `validate`. This checks each plain `key=value` override against the keys that the script
    registered (top-level keys and their sections, e.g. `sim.backend`) and raises ConfigError
    naming every unknown one with the closest known key. Left to Hydra: the task's own keys
    (`task.*`, whose file Hydra composes), `hydra.*`, group selections (`task=NAME`, `a/b=c`),
    additions and deletions (`+key=`, `~key`) and command-line flags (`--cfg`, `-m`, ...)."""
    node_of_script = _NODES.get(config_name)
    if node_of_script is None:
        return
    root = {**node_of_script, "task": None, "hydra": None}
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
                problems.append(f"unknown key {prefix}{part}{_suggest(prefix + part, known)}")
                break
            if prefix == "" and part in ("task", "hydra"):
                break
            node, prefix = node[part], prefix + part + "."
    if problems:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(problems))


class _Checker:
    def __init__(self):
        self.errors: list[str] = []

    def fail(self, key: str, value, expected: str) -> None:
        self.errors.append(f"{key} must be {expected}, got {value!r}")

    def positive_int(self, key, value, allow_none=False):
        if value is None and allow_none:
            return
        if not _is_int(value) or value < 1:
            self.fail(key, value, "a positive integer" + (" or null" if allow_none else ""))

    def number(self, key, value, low=None, high=None, low_open=False, allow_none=False):
        if value is None and allow_none:
            return
        ok = _is_number(value) and math.isfinite(value)
        if ok and low is not None:
            ok = value > low if low_open else value >= low
        if ok and high is not None:
            ok = value <= high
        if not ok:
            if low is None:
                expected = "a finite number"
            elif high is None:
                expected = f"a number {'>' if low_open else '>='} {low}"
            else:
                expected = f"a number in {'(' if low_open else '['}{low}, {high}]"
            self.fail(key, value, expected + (" or null" if allow_none else ""))

    def choice(self, key, value, choices):
        if value not in choices:
            self.fail(key, value, "one of " + ", ".join(repr(c) for c in choices))

    def boolean(self, key, value):
        if not isinstance(value, bool):
            self.fail(key, value, "true or false")

    def unknown(self, prefix: str, keys, known) -> None:
        for key in keys:
            if key not in known:
                self.errors.append(f"unknown key {prefix}{key}{_suggest(key, known)}")


def _env_parameters(task_name: str):
    """Keyword parameters (name -> default) of the environment class `envs.make(task_name)` builds."""
    import envs

    registry = envs._registry()
    if task_name not in registry:
        return None
    cls, defaults = registry[task_name]
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


def env_kwargs(task) -> dict:
    """The keyword arguments of `envs.make` that a task's file gives: its `env` section, and
    its `terrain` and `robot` sections as `terrain=` and `robot=` where it has them."""
    if not isinstance(task, dict):
        task = OmegaConf.to_container(task, resolve=True)
    kwargs = dict(task.get("env") or {})
    for section in ("terrain", "robot"):
        if task.get(section) is not None:
            kwargs[section] = task[section]
    return kwargs


def _section_keys(c: _Checker, task_name: str, key: str, value, cfg_class, missing: str) -> set | None:
    """The keys of the dataclass `cfg_class` when `value` can be the task's `key` section
    (task.robot, task.terrain), after reporting its unknown keys; None, with the error recorded,
    when the environment has no such section (`missing` says which have) or `value` is not a
    mapping."""
    import dataclasses

    if key not in (_env_parameters(task_name) or {}):
        c.errors.append(f"task.{key}: environment {task_name!r} has no {missing}")
        return None
    if not isinstance(value, Mapping):
        c.fail(f"task.{key}", value, f"a mapping of {key} keys (envs/{key}.py {cfg_class.__name__})")
        return None
    known = {f.name for f in dataclasses.fields(cfg_class)}
    c.unknown(f"task.{key}.", value.keys(), known)
    return known


def _check_from_dict(c: _Checker, key: str, value: Mapping, cfg_class, known: set) -> None:
    """Whatever else `cfg_class.from_dict` refuses in the section."""
    try:
        cfg_class.from_dict({k: v for k, v in value.items() if k in known})
    except (ValueError, TypeError) as e:
        c.errors.append(f"task.{key}: {e}")


def _check_robot(c: _Checker, task_name: str, robot) -> None:
    """The robot section's keys and value types (the names are checked against the MJCF when
    the environment loads it, envs.robot.Robot)."""
    from envs.robot import RobotCfg

    if robot is None and "robot" in (_env_parameters(task_name) or {}):
        return
    known = _section_keys(c, task_name, "robot", robot, RobotCfg, "robot section (the legged tasks have: "
                          "quadruped, quadruped_rough, humanoid, humanoid_rough)")
    if known is None:
        return
    for key in ("mjcf", "base_body", "keyframe", "floor_geom", "lin_vel_sensor", "ang_vel_sensor",
                "orientation_sensor"):
        value = robot.get(key)
        if value is not None and not isinstance(value, str):
            c.fail(f"task.robot.{key}", value, "a string" + (" or null" if key in ("mjcf", "keyframe") else ""))
    for key in ("foot_geoms", "foot_bodies", "termination_geoms", "termination_bodies", "undesired_geoms",
                "undesired_bodies"):
        value = robot.get(key)
        if value is not None and not (isinstance(value, str) or (isinstance(value, (list, tuple))
                                                                 and all(isinstance(v, str) for v in value))):
            c.fail(f"task.robot.{key}", value, "a name or a list of names (regular expressions)")
    scale = robot.get("action_scale")
    if scale is not None:
        values = scale if isinstance(scale, (list, tuple)) else [scale]
        if not values or not all(_is_number(v) and math.isfinite(v) and v > 0 for v in values):
            c.fail("task.robot.action_scale", scale, "a number > 0 or a list of them (one per actuator)")
    _check_from_dict(c, "robot", robot, RobotCfg, known)


def _check_terrain(c: _Checker, task_name: str, terrain) -> None:
    from envs.terrain import TerrainCfg

    known = _section_keys(c, task_name, "terrain", terrain, TerrainCfg, "terrain (quadruped_rough has)")
    if known is not None:
        _check_from_dict(c, "terrain", terrain, TerrainCfg, known)


def _check_env(c: _Checker, task_name: str, env_cfg) -> None:
    import envs

    params = _env_parameters(task_name)
    if params is None:
        c.errors.append(f"task.name={task_name!r} is not an environment; available: {', '.join(envs.names())}")
        return
    if not isinstance(env_cfg, Mapping):
        c.fail("task.env", env_cfg, "a mapping of environment keyword arguments")
        return
    for key, value in env_cfg.items():
        full = f"task.env.{key}"
        if key in ENV_TOP_LEVEL:
            top = "sim.backend" if key == "backend" else key
            c.errors.append(f"{full}: set the top-level key {top}=... instead")
            continue
        if key in ("terrain", "robot") and key in params:
            c.errors.append(f"{full}: set the task's {key} section, task.{key}.*, instead")
            continue
        if key not in params:
            c.errors.append(f"unknown key {full} for environment {task_name!r}"
                            f"{_suggest(key, [p for p in params if p not in ENV_TOP_LEVEL])}")
            continue
        default = params[key]
        if key in ("randomization", "actuator"):
            from envs import actuators, randomization

            value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
            checker = randomization.check_config if key == "randomization" else actuators.check_config
            c.errors.extend(checker(value))
        elif key == "observations":
            from envs import observations

            value = OmegaConf.to_container(value, resolve=True) if OmegaConf.is_config(value) else value
            cls = envs._registry()[task_name][0]
            groups = {"policy": list(cls.POLICY_TERMS)} if hasattr(cls, "POLICY_TERMS") else {}
            c.errors.extend(observations.check_config(value, groups))
        elif key == "nonfinite_actions":
            c.choice(full, value, ("error", "zero"))
        elif key == "observation_source":
            c.choice(full, value, ("sensors", "state"))
        elif key == "dtype":
            c.choice(full, value, ("float32", "float64"))
        elif key == "decimation":
            c.positive_int(full, value)
        elif key.endswith("_s") or key in ("dt", "timestep") or key.endswith("_dt"):  # durations
            c.number(full, value, low=0, low_open=True)
        elif isinstance(default, bool):
            c.boolean(full, value)
        elif _is_int(default):
            if not _is_int(value):
                c.fail(full, value, "an integer")
        elif isinstance(default, float):
            c.number(full, value)
        elif isinstance(default, str) and not isinstance(value, str):
            c.fail(full, value, "a string")
        elif key in ("deviation_joints", "acc_joints", "torque_joints"):
            if not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
                c.fail(full, value, "a list of joint names (regular expressions)")
        elif key == "action_scale" and default is None:  # the legged tasks': else the robot section's
            values = value if isinstance(value, (list, tuple)) else [value]
            if value is not None and not (values and all(_is_number(v) and math.isfinite(v) and v > 0
                                                         for v in values)):
                c.fail(full, value, "a number > 0, a list of them (one per actuator) or null (task.robot.action_scale)")
        elif isinstance(default, (tuple, list)):
            if not (isinstance(value, (list, tuple)) and len(value) == len(default)
                    and all(_is_number(v) and math.isfinite(v) for v in value)):
                c.fail(full, value, f"a list of {len(default)} numbers")
        elif key == "reward_weights" and value is not None:
            if not isinstance(value, Mapping):
                c.fail(full, value, "a mapping {term: weight}")
            else:
                for term, weight in value.items():
                    c.number(f"{full}.{term}", weight)


def _check_ppo(c: _Checker, ppo) -> None:
    if not isinstance(ppo, Mapping):
        c.fail("task.ppo", ppo, "a mapping")
        return
    c.unknown("task.ppo.", ppo.keys(), PPO_KEYS)
    for key in ("num_steps_per_env", "save_interval"):
        if key in ppo:
            c.positive_int(f"task.ppo.{key}", ppo[key])
    for key in ("actor_hidden_dims", "critic_hidden_dims"):
        if key in ppo and not (isinstance(ppo[key], (list, tuple)) and ppo[key]
                               and all(_is_int(v) and v > 0 for v in ppo[key])):
            c.fail(f"task.ppo.{key}", ppo[key], "a non-empty list of positive integers")
    if "init_noise_std" in ppo:
        c.number("task.ppo.init_noise_std", ppo["init_noise_std"], low=0, low_open=True)
    if "obs_normalization" in ppo:
        c.boolean("task.ppo.obs_normalization", ppo["obs_normalization"])
    if "sync_free" in ppo and not (isinstance(ppo["sync_free"], bool) or ppo["sync_free"] == "auto"):
        c.fail("task.ppo.sync_free", ppo["sync_free"], "true, false or auto (true on CUDA)")
    if "cuda_graph" in ppo and not (isinstance(ppo["cuda_graph"], bool) or ppo["cuda_graph"] == "auto"):
        c.fail("task.ppo.cuda_graph", ppo["cuda_graph"], "true, false or auto (true on CUDA with sync_free)")
    if "activation" in ppo and not isinstance(ppo["activation"], str):
        c.fail("task.ppo.activation", ppo["activation"], "a string (elu, relu, tanh, ...)")
    alg = ppo.get("algorithm")
    if not isinstance(alg, Mapping):
        c.fail("task.ppo.algorithm", alg, "a mapping of rsl-rl PPO arguments")
        return
    from rsl_rl.algorithms import PPO

    known = set(inspect.signature(PPO.__init__).parameters) - {"self", "actor", "critic", "storage", "device",
                                                               "multi_gpu_cfg"}
    c.unknown("task.ppo.algorithm.", alg.keys(), known)
    p = "task.ppo.algorithm."
    rules = {
        "learning_rate": dict(low=0, low_open=True), "clip_param": dict(low=0, low_open=True),
        "gamma": dict(low=0, high=1, low_open=True), "lam": dict(low=0, high=1),
        "value_loss_coef": dict(low=0), "entropy_coef": dict(low=0), "max_grad_norm": dict(low=0, low_open=True),
        "desired_kl": dict(low=0, low_open=True, allow_none=True),
    }
    for key, rule in rules.items():
        if key in alg:
            c.number(p + key, alg[key], **rule)
    for key in ("num_learning_epochs", "num_mini_batches"):
        if key in alg:
            c.positive_int(p + key, alg[key])
    if "schedule" in alg:
        c.choice(p + "schedule", alg["schedule"], ("adaptive", "fixed"))


def shac_tasks() -> list[str]:
    """Tasks whose file has a `shac` section (their environments have a differentiable step)."""
    return [name for name in tasks.available() if "shac" in OmegaConf.load(tasks.TASKS_DIR / f"{name}.yaml")]


def _check_shac(c: _Checker, shac) -> None:
    from simrl.rl.shac import DEFAULTS

    if not isinstance(shac, Mapping):
        c.fail("task.shac", shac, "a mapping of SHAC settings")
        return
    c.unknown("task.shac.", shac.keys(), DEFAULTS)
    p = "task.shac."
    if "sync_free" in shac and not (isinstance(shac["sync_free"], bool) or shac["sync_free"] == "auto"):
        c.fail(p + "sync_free", shac["sync_free"], "true, false or auto (true on CUDA)")
    for key in ("horizon", "critic_iterations", "critic_mini_batches", "save_interval"):
        if key in shac:
            c.positive_int(p + key, shac[key])
    rules = {"gamma": dict(low=0, high=1, low_open=True), "lam": dict(low=0, high=1),
             "actor_learning_rate": dict(low=0, low_open=True), "critic_learning_rate": dict(low=0, low_open=True),
             "grad_norm": dict(low=0, low_open=True), "target_critic_alpha": dict(low=0, high=1),
             "init_log_std": dict(), "reward_scale": dict(low=0, low_open=True)}
    for key, rule in rules.items():
        if key in shac:
            c.number(p + key, shac[key], **rule)
    if "lr_schedule" in shac:
        c.choice(p + "lr_schedule", shac["lr_schedule"], ("linear", "constant"))
    if "activation" in shac:
        from simrl.rl.shac import _ACTIVATIONS

        c.choice(p + "activation", shac["activation"], tuple(_ACTIVATIONS))
    if "obs_normalization" in shac:
        c.boolean(p + "obs_normalization", shac["obs_normalization"])
    if "betas" in shac and not (isinstance(shac["betas"], (list, tuple)) and len(shac["betas"]) == 2
                                and all(_is_number(b) and 0 <= b < 1 for b in shac["betas"])):
        c.fail(p + "betas", shac["betas"], "two numbers in [0, 1)")
    for key in ("actor_hidden_dims", "critic_hidden_dims"):
        if key in shac and not (isinstance(shac[key], (list, tuple)) and shac[key]
                                and all(_is_int(v) and v > 0 for v in shac[key])):
            c.fail(p + key, shac[key], "a non-empty list of positive integers")


def validate(cfg, config_name: str = "train") -> None:
    """Check a composed configuration (scripts/train.py or scripts/play.py) before anything is
    built: unknown keys (with a suggestion), values of the wrong type, out-of-range values
    (num_envs, max_iterations, seed, durations, decimation, PPO hyper-parameters), the task's
    environment keyword arguments against the environment's constructor, and the device.
    Raises ConfigError listing every problem, one per line."""
    if not isinstance(cfg, dict):  # a DictConfig
        cfg = OmegaConf.to_container(cfg, resolve=True)
    c = _Checker()
    if config_name in _KEYS:  # registered by the script (register); Hydra itself refuses most unknown keys
        c.unknown("", [k for k in cfg if k != "hydra"], _KEYS[config_name] | {"task"})

    if "num_envs" in cfg:
        c.positive_int("num_envs", cfg["num_envs"], allow_none=config_name == "train")
    if "max_iterations" in cfg:
        c.positive_int("max_iterations", cfg["max_iterations"], allow_none=True)
    if "num_episodes" in cfg:
        c.positive_int("num_episodes", cfg["num_episodes"], allow_none=True)
    if "seed" in cfg and not (_is_int(cfg["seed"]) and 0 <= cfg["seed"] < 2**63):
        c.fail("seed", cfg["seed"], "a non-negative integer")
    if "algo" in cfg:
        c.choice("algo", cfg["algo"], ("ppo", "shac"))
    if "dist_timeout_s" in cfg:
        c.number("dist_timeout_s", cfg["dist_timeout_s"], low=0.0, low_open=True)
    for key in ("resume", "checkpoint", "init_policy"):
        if key in cfg and cfg[key] is not None and not (isinstance(cfg[key], str) and cfg[key].strip()):
            also = {"resume": ", a run directory or latest", "init_policy": " or a run directory"}.get(key, "")
            c.fail(key, cfg[key], "a file path" + also)
    if "video" in cfg:
        c.boolean("video", cfg["video"])
    backend = "warp"
    if "sim" in cfg:
        from envs.base import BACKENDS

        sim = cfg["sim"]
        if not isinstance(sim, Mapping):
            c.fail("sim", sim, "a mapping (sim.backend=...)")
        else:
            c.unknown("sim.", sim.keys(), SIM_KEYS)
            if "backend" in sim:
                c.choice("sim.backend", sim["backend"], BACKENDS)
                backend = sim["backend"] if sim["backend"] in BACKENDS else backend
        if backend == "mujoco" and cfg.get("algo") == "shac":
            c.errors.append("algo=shac differentiates through the simulation, which sim.backend=mujoco cannot; "
                            "use sim.backend=warp")
    if "device" in cfg:
        if not isinstance(cfg["device"], str):
            c.fail("device", cfg["device"], "auto, cpu, cuda or cuda:N")
        else:
            try:
                resolve_device(cfg["device"], backend)
            except ConfigError as e:
                c.errors.append(str(e))

    task = cfg.get("task")
    if not isinstance(task, Mapping):
        c.fail("task", task, f"a task name ({', '.join(tasks.available())})")
    else:
        c.unknown("task.", task.keys(), TASK_KEYS)
        for key in ("num_envs", "num_envs_gpu", "max_iterations"):
            if key in task:
                c.positive_int(f"task.{key}", task[key])
        if not isinstance(task.get("name"), str):
            c.fail("task.name", task.get("name"), "an environment name")
        else:
            _check_env(c, task["name"], task.get("env", {}))
        if "terrain" in task and isinstance(task.get("name"), str):
            _check_terrain(c, task["name"], task["terrain"])
        if "robot" in task and isinstance(task.get("name"), str):
            robot = task["robot"]
            _check_robot(c, task["name"], OmegaConf.to_container(robot, resolve=True)
                         if OmegaConf.is_config(robot) else robot)
        if "ppo" in task:
            _check_ppo(c, task["ppo"])
        if "shac" in task:
            _check_shac(c, task["shac"])
        elif cfg.get("algo") == "shac":
            c.errors.append(f"algo=shac: task {task.get('name')!r} has no `shac` section (SHAC needs a task with a "
                            f"differentiable step: {', '.join(shac_tasks())})")
    if c.errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(c.errors))
