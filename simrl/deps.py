"""The core dependencies' versions simrl is tested with, and the names it uses that those
packages do not promise to keep.

Four places reach past a dependency's public API, each because none exists for what it needs:
- `simrl.sim.by_reference` wraps Warp's code generator (`warp._src.codegen`) so that the CPU
  build passes the Model and Data structs by reference (Warp's own `wp.ref` is refused in
  kernels with a backward pass);
- `simrl.sim.initialized_locals` wraps the same function so that the engine's CUDA build
  declares its functions' locals initialized (no values carried around loops: registers and
  spills);
- `simrl.sim.no_replay` wraps Warp's `ModuleBuilder.build_function` to mark the functions that
  return nothing `skip_replay` in the differentiable modules (`wp.func` takes no such option);
- `simrl.rl.ppo.Runner` replaces two methods of rsl-rl's `Logger` on its instance (the progress
  line, the rollout's book-keeping without host synchronisation) and reads and restores the
  logger's episode buffers (checkpoints that resume exactly), and overrides the runner's
  `_configure_multi_gpu` (the process group is simrl's).

pyproject.toml caps each core dependency below its next minor version (tests/test_deps.py
holds the two lists together); `private_api_problems()` says, naming the tested version, what
an installed release no longer has.
"""

import importlib
import importlib.metadata

#: distribution -> the minor version simrl is tested with (pyproject.toml admits no newer minor)
TESTED = {"warp-lang": "1.19", "mujoco": "4.0", "rsl-rl-lib": "5.5", "torch": "2.13", "gymnasium": "1.4",
          "hydra-core": "1.3"}

#: what simrl uses beyond each distribution's public API: (distribution, module, attribute path,
#: who uses it)
PRIVATE_NAMES = (
    ("warp-lang", "warp._src.codegen", "codegen_func", "simrl.sim.by_reference"),
    ("warp-lang", "warp._src.codegen", "codegen_kernel", "simrl.sim.by_reference"),
    ("warp-lang", "warp._src.codegen", "codegen_func", "simrl.sim.initialized_locals"),
    ("warp-lang", "warp._src.context", "ModuleBuilder.build_function", "simrl.sim.no_replay"),
    ("rsl-rl-lib", "rsl_rl.runners", "OnPolicyRunner._configure_multi_gpu", "simrl.rl.ppo.Runner"),
    ("rsl-rl-lib", "rsl_rl.utils.logger", "Logger.log", "simrl.rl.ppo.Runner"),
    ("rsl-rl-lib", "rsl_rl.utils.logger", "Logger.process_env_step", "simrl.rl.ppo.Runner"),
    ("rsl-rl-lib", "rsl_rl.utils.logger", "Logger.save_model", "simrl.rl.ppo.Runner"),
    ("rsl-rl-lib", "rsl_rl.utils.logger", "Logger.stop_logging_writer", "simrl.rl.ppo.Runner"),
)

#: the rsl-rl Logger's instance attributes that simrl.rl.ppo.Runner reads or restores
LOGGER_ATTRIBUTES = ("writer", "log_dir", "ep_extras", "rewbuffer", "lenbuffer", "cur_reward_sum",
                     "cur_episode_length", "tot_timesteps", "tot_time")


def installed(distribution: str) -> str:
    """The installed version of `distribution` ("not installed" when it is not)."""
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _moved(distribution: str, what: str, user: str) -> str:
    return (f"{what} is gone from {distribution} {installed(distribution)}; {user} needs it (simrl is tested with "
            f"{distribution} {TESTED[distribution]}.x: pip install '{distribution}=={TESTED[distribution]}.*')")


def private_api_problems(distribution: str | None = None) -> list[str]:
    """One line per name of PRIVATE_NAMES (of `distribution`, or of all) that the installed
    packages lack, naming the version simrl is tested with."""
    problems = []
    for dist, module_name, path, user in PRIVATE_NAMES:
        if distribution not in (None, dist):
            continue
        try:
            obj = importlib.import_module(module_name)
            for part in path.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError):
            problems.append(_moved(dist, f"{module_name}.{path}", user))
    return problems


def logger_attribute_problems(logger) -> list[str]:
    """One line per attribute of LOGGER_ATTRIBUTES that the rsl-rl `logger` instance lacks."""
    return [_moved("rsl-rl-lib", f"rsl_rl.utils.logger.Logger().{name}", "simrl.rl.ppo.Runner")
            for name in LOGGER_ATTRIBUTES if not hasattr(logger, name)]


def require(problems: list[str]) -> None:
    """Raise ImportError listing `problems`, if any."""
    if problems:
        raise ImportError("simrl: an installed dependency lacks what simrl uses:\n  " + "\n  ".join(problems))
