"""Configuration schemas, the learners' sections and device resolution.

A configuration section is a typed dataclass (`Section`) whose fields carry a rule each
(`setting(default, rule)`): `check` names every problem of a mapping (unknown keys with the
closest known one, values of the wrong type or range, one line each) and `from_dict` builds the
dataclass or raises ConfigError with those lines. The learners' sections are here, PpoCfg (read
by simrl.rl.ppo.rsl_rl_config) and ShacCfg (simrl.rl.shac.ShacRunner): this module imports
neither torch nor rsl-rl, so that a command line names a bad key at once. The command lines' and
the task files' own sections, which know the environments, are in tasks.config.

    @dataclasses.dataclass(kw_only=True)
    class SimCfg(Section):
        KEY = "sim"
        backend: str = setting("warp", one_of("warp", "mujoco"))

    SimCfg.check({"backend": "bullet"})  # ["sim.backend must be one of 'warp', 'mujoco', got 'bullet'"]
"""

import copy
import dataclasses
import difflib
import inspect
import math
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from simrl.errors import ConfigError


# ------------------------------------------------------------------------------- problems
def is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def suggest(key: str, choices) -> str:
    """"; did you mean 'x'?" for the closest of `choices`, else the list of them."""
    close = difflib.get_close_matches(key, list(choices), n=1)
    return f"; did you mean {close[0]!r}?" if close else f"; known keys: {', '.join(sorted(choices))}"


class Checker:
    """The problems found in a configuration, one line each."""

    def __init__(self):
        self.errors: list[str] = []

    def fail(self, key: str, value, expected: str) -> None:
        self.errors.append(f"{key} must be {expected}, got {value!r}")

    def unknown(self, prefix: str, keys, known) -> None:
        for key in keys:
            if key not in known:
                self.errors.append(f"unknown key {prefix}{key}{suggest(key, known)}")

    def raise_errors(self) -> None:
        """ConfigError listing every problem, when there is one."""
        if self.errors:
            raise ConfigError("invalid configuration:\n  " + "\n  ".join(self.errors))


# ----------------------------------------------------------------------------------- rules
#: a rule checks the value of one key: rule(checker, key, value) records what is wrong with it
Rule = Callable[[Checker, str, Any], None]


def expect(ok: Callable[[Any], bool], expected: str) -> Rule:
    """A value for which `ok` holds; otherwise "<key> must be <expected>"."""

    def rule(c: Checker, key: str, value) -> None:
        if not ok(value):
            c.fail(key, value, expected)

    return rule


def positive_int(allow_none: bool = False) -> Rule:
    return expect(lambda v: (v is None and allow_none) or (is_int(v) and v >= 1),
                  "a positive integer" + (" or null" if allow_none else ""))


def number(low=None, high=None, low_open: bool = False, allow_none: bool = False) -> Rule:
    """A finite number, within [low, high] ((low, high] with low_open) where they are given."""

    def ok(v) -> bool:
        if v is None and allow_none:
            return True
        good = is_number(v) and math.isfinite(v)
        if good and low is not None:
            good = v > low if low_open else v >= low
        if good and high is not None:
            good = v <= high
        return good

    if low is None:
        expected = "a finite number"
    elif high is None:
        expected = f"a number {'>' if low_open else '>='} {low}"
    else:
        expected = f"a number in {'(' if low_open else '['}{low}, {high}]"
    return expect(ok, expected + (" or null" if allow_none else ""))


def one_of(*choices) -> Rule:
    return expect(lambda v: v in choices, "one of " + ", ".join(repr(c) for c in choices))


def boolean() -> Rule:
    return expect(lambda v: isinstance(v, bool), "true or false")


def bool_or_auto(expected: str) -> Rule:
    """true, false or "auto" (resolved when the run knows its device)."""
    return expect(lambda v: isinstance(v, bool) or v == "auto", expected)


def hidden_dims() -> Rule:
    """The widths of a network's hidden layers."""
    return expect(lambda v: isinstance(v, (list, tuple)) and bool(v) and all(is_int(x) and x > 0 for x in v),
                  "a non-empty list of positive integers")


class section:
    """The rule of a nested section: a mapping, checked by its own schema; `expected` says what
    else was wanted (a string, or a function giving it)."""

    def __init__(self, schema: "type[Section]", expected: str | Callable[[], str] = "a mapping"):
        self.schema, self.expected = schema, expected

    def __call__(self, c: Checker, key: str, value) -> None:
        if not isinstance(value, Mapping):
            c.fail(key, value, self.expected() if callable(self.expected) else self.expected)
        else:
            self.schema.check_into(c, value)


# -------------------------------------------------------------------------------- sections
_REQUIRED = dataclasses.MISSING


def setting(default=_REQUIRED, rule: Rule | None = None) -> Any:
    """A field of a Section: its default (none: required, and checked when missing too) and the
    rule its value must pass (None: any value)."""
    metadata = {"rule": rule}
    if default is _REQUIRED:
        return dataclasses.field(metadata=metadata)
    if isinstance(default, (list, dict)) or dataclasses.is_dataclass(default):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


class Section:
    """Base of a configuration section: a `dataclasses.dataclass(kw_only=True)` whose fields are
    made by `setting`. KEY is where the section stands in a configuration ("task.ppo"; "" at
    the top), the prefix of the keys its problems name."""

    KEY: ClassVar[str] = ""

    @classmethod
    def keys(cls) -> list[str]:
        return [f.name for f in dataclasses.fields(cls)]

    @classmethod
    def defaults(cls) -> dict:
        """{key: default} of the keys that have one, nested sections as mappings, in field order."""
        values = {}
        for f in dataclasses.fields(cls):
            if f.default is not _REQUIRED:
                values[f.name] = f.default
            elif f.default_factory is not _REQUIRED:
                value = f.default_factory()
                values[f.name] = value.defaults() if isinstance(value, Section) else value
        return values

    @classmethod
    def check(cls, values: Mapping) -> list[str]:
        """The problems of `values` as this section, one line each; empty when it is valid."""
        c = Checker()
        cls.check_into(c, values)
        return c.errors

    @classmethod
    def check_into(cls, c: Checker, values: Mapping) -> None:
        """Unknown keys, then each field's rule (a missing required key's with None), then
        `check_together`."""
        prefix = f"{cls.KEY}." if cls.KEY else ""
        c.unknown(prefix, values.keys(), cls.keys())
        for f in dataclasses.fields(cls):
            rule = f.metadata.get("rule")
            if rule is None:
                continue
            if f.name in values:
                rule(c, prefix + f.name, values[f.name])
            elif f.default is _REQUIRED and f.default_factory is _REQUIRED:
                rule(c, prefix + f.name, None)
        cls.check_together(c, values)

    @classmethod
    def check_together(cls, c: Checker, values: Mapping) -> None:
        """Rules between keys of the section (a subclass's); the fields are checked one by one
        before."""

    @classmethod
    def from_dict(cls, values: Mapping | None):
        """The section from a mapping (keys left out take their defaults; nested sections become
        their dataclasses); ConfigError naming every problem."""
        values = values or {}
        c = Checker()
        cls.check_into(c, values)
        c.raise_errors()
        kwargs = {}
        for f in dataclasses.fields(cls):
            if f.name in values:
                value, rule = values[f.name], f.metadata.get("rule")
                kwargs[f.name] = rule.schema.from_dict(value) if isinstance(rule, section) else value
        return cls(**kwargs)


# ---------------------------------------------------------------------------- PPO and SHAC
#: rules of the rsl-rl PPO arguments that simrl checks (the others only against PPO's signature)
ALGORITHM_RULES = {
    "learning_rate": number(low=0, low_open=True), "clip_param": number(low=0, low_open=True),
    "gamma": number(low=0, high=1, low_open=True), "lam": number(low=0, high=1),
    "value_loss_coef": number(low=0), "entropy_coef": number(low=0), "max_grad_norm": number(low=0, low_open=True),
    "desired_kl": number(low=0, low_open=True, allow_none=True),
    "num_learning_epochs": positive_int(), "num_mini_batches": positive_int(),
    "schedule": one_of("adaptive", "fixed"),
}


def _check_algorithm(c: Checker, key: str, algorithm) -> None:
    """`ppo.algorithm`: keyword arguments of rsl-rl's PPO (its signature names the known ones)."""
    if not isinstance(algorithm, Mapping):
        c.fail(key, algorithm, "a mapping of rsl-rl PPO arguments")
        return
    from rsl_rl.algorithms import PPO  # here, not above: rsl-rl is slow to import, a misspelt key need not wait

    known = set(inspect.signature(PPO.__init__).parameters) - {"self", "actor", "critic", "storage", "device",
                                                               "multi_gpu_cfg"}
    c.unknown(f"{key}.", algorithm.keys(), known)
    for name, rule in ALGORITHM_RULES.items():
        if name in algorithm:
            rule(c, f"{key}.{name}", algorithm[name])


@dataclasses.dataclass(kw_only=True)
class PpoCfg(Section):
    """The `ppo` section of a task file: rsl-rl's runner, networks and PPO arguments, and how
    simrl steps the environment for it."""

    KEY = "task.ppo"

    #: environment steps per world and iteration (the rollout length)
    num_steps_per_env: int = setting(rule=positive_int())
    #: a checkpoint every this many iterations (and after the last)
    save_interval: int = setting(50, positive_int())
    actor_hidden_dims: list = setting(rule=hidden_dims())
    critic_hidden_dims: list = setting(rule=hidden_dims())
    #: torch.nn activation by rsl-rl's name (elu, relu, tanh, ...)
    activation: str = setting("elu", expect(lambda v: isinstance(v, str), "a string (elu, relu, tanh, ...)"))
    #: the Gaussian policy's initial standard deviation
    init_noise_std: float = setting(1.0, number(low=0, low_open=True))
    #: running mean/std normalisation of the actor's and the critic's observations
    obs_normalization: bool = setting(True, boolean())
    #: keyword arguments of rsl-rl's PPO (ALGORITHM_RULES)
    algorithm: dict = setting(rule=_check_algorithm)
    #: the rollout without host synchronisation (envs/base.py); auto: on CUDA
    sync_free: bool | str = setting(False, bool_or_auto("true, false or auto (true on CUDA)"))
    #: each environment step one CUDA graph (envs/rsl_rl.py); auto: on CUDA with sync_free
    cuda_graph: bool | str = setting(False, bool_or_auto("true, false or auto (true on CUDA with sync_free)"))


#: the activations of SHAC's networks: name -> torch.nn class name
ACTIVATIONS = {"elu": "ELU", "relu": "ReLU", "tanh": "Tanh", "selu": "SELU", "silu": "SiLU"}

#: keys of the `shac` section that the training driver reads (the task's defaults when algo=shac,
#: null: the task's own), not the runner
RUN_KEYS = ("num_envs", "num_envs_gpu", "max_iterations")


@dataclasses.dataclass(kw_only=True)
class ShacCfg(Section):
    """The `shac` section of a task file (simrl.rl.shac describes the algorithm)."""

    KEY = "task.shac"

    #: actions per window (gradients are truncated between windows)
    horizon: int = setting(32, positive_int())
    gamma: float = setting(0.99, number(low=0, high=1, low_open=True))
    #: TD(lambda) of the critic's targets
    lam: float = setting(0.95, number(low=0, high=1))
    actor_learning_rate: float = setting(2e-3, number(low=0, low_open=True))
    critic_learning_rate: float = setting(2e-3, number(low=0, low_open=True))
    #: linear decay to 0 over max_iterations, or constant
    lr_schedule: str = setting("linear", one_of("linear", "constant"))
    #: Adam's
    betas: list = setting([0.7, 0.95], expect(lambda v: isinstance(v, (list, tuple)) and len(v) == 2
                                              and all(is_number(b) and 0 <= b < 1 for b in v), "two numbers in [0, 1)"))
    #: actor and critic gradients clipped to this norm
    grad_norm: float = setting(1.0, number(low=0, low_open=True))
    #: passes over the window's data per iteration, in critic_mini_batches minibatches
    critic_iterations: int = setting(16, positive_int())
    critic_mini_batches: int = setting(4, positive_int())
    #: target <- alpha target + (1 - alpha) critic
    target_critic_alpha: float = setting(0.2, number(low=0, high=1))
    actor_hidden_dims: list = setting([64, 64], hidden_dims())
    critic_hidden_dims: list = setting([64, 64], hidden_dims())
    activation: str = setting("elu", one_of(*ACTIVATIONS))
    #: the log standard deviation of the exploration noise (before tanh) at the start
    init_log_std: float = setting(-1.0, number())
    obs_normalization: bool = setting(True, boolean())
    reward_scale: float = setting(1.0, number(low=0, low_open=True))
    save_interval: int = setting(50, positive_int())
    #: true: the env steps without host synchronisation (BatchedEnv.set_sync_free); auto: on CUDA
    sync_free: bool | str = setting(False, bool_or_auto("true, false or auto (true on CUDA)"))
    #: environment settings of SHAC runs, over the task's `env` section (e.g. the legged tasks'
    #: observation_source: state, which the differentiable step differentiates)
    env: dict = setting({}, expect(lambda v: isinstance(v, Mapping), "a mapping of task.env settings"))
    #: RUN_KEYS: worlds on the CPU and on a GPU, and iterations, when algo=shac
    num_envs: int | None = setting(None, positive_int(allow_none=True))
    num_envs_gpu: int | None = setting(None, positive_int(allow_none=True))
    max_iterations: int | None = setting(None, positive_int(allow_none=True))


# ------------------------------------------------------------------- the simulation, devices
#: the run directory's copy of the task section it ran (scripts/train.py writes it; train.py
#: resume= and play.py checkpoint= read it when no task= is given: tasks.config.task_overrides)
RUN_TASK_FILE = "task.yaml"


def sim_options(cfg: Mapping) -> dict:
    """The `sim` section of a composed run configuration (tasks.config.SimCfg, validated) as the
    keyword arguments of an EnvFactory's `make`: backend, njmax, nconmax, strict."""
    sim = cfg.get("sim") or {}
    njmax, nconmax = sim.get("njmax"), sim.get("nconmax")
    return {"backend": str(sim.get("backend", "warp")), "njmax": None if njmax is None else int(njmax),
            "nconmax": None if nconmax is None else int(nconmax), "strict": bool(sim.get("strict", False))}


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
