"""The core dependencies: pyproject.toml admits only the minor versions simrl is tested with,
and the names simrl uses beyond their public API are there (simrl.deps)."""

import re
from pathlib import Path

import pytest
import tomllib
import warp._src.codegen
from rsl_rl.utils.logger import Logger

from simrl import deps

ROOT = Path(__file__).resolve().parents[1]


def _requirements() -> dict[str, str]:
    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return {re.match(r"[A-Za-z0-9_.-]+", r).group(0): r for r in listed}


@pytest.mark.parametrize("distribution", sorted(deps.TESTED))
def test_pyproject_caps_each_core_dependency_below_the_next_minor(distribution):
    major, minor = (int(x) for x in deps.TESTED[distribution].split("."))
    requirement = _requirements()[distribution]
    assert f"<{major}.{minor + 1}" in requirement.replace(" ", ""), (
        f"pyproject.toml's {requirement!r} should admit no release newer than {distribution} "
        f"{major}.{minor}.x, the one simrl is tested with (simrl.deps.TESTED)")
    assert deps.installed(distribution).startswith(f"{major}.{minor}."), (
        f"{distribution} {deps.installed(distribution)} is installed; simrl is tested with {major}.{minor}.x")


def test_the_private_names_simrl_uses_are_there():
    problems = deps.private_api_problems()
    logger = Logger(log_dir=None, cfg={"algorithm": {}}, env_cfg={}, num_envs=1, is_distributed=False,
                    gpu_world_size=1, gpu_global_rank=0, device="cpu")
    problems += deps.logger_attribute_problems(logger)
    assert not problems, "\n".join(problems)


def test_a_name_gone_from_a_release_is_named_with_the_tested_version(monkeypatch):
    monkeypatch.delattr(warp._src.codegen, "codegen_kernel")
    problems = deps.private_api_problems("warp-lang")
    assert problems == [f"warp._src.codegen.codegen_kernel is gone from warp-lang {deps.installed('warp-lang')}; "
                        f"simrl.sim.by_reference needs it (simrl is tested with warp-lang 1.19.x: pip install "
                        f"'warp-lang==1.19.*')"]
    with pytest.raises(ImportError, match="an installed dependency lacks what simrl uses"):
        deps.require(problems)
    gone = Logger(log_dir=None, cfg={"algorithm": {}}, env_cfg={}, num_envs=1, is_distributed=False,
                  gpu_world_size=1, gpu_global_rank=0, device="cpu")
    del gone.rewbuffer
    assert [p.split(" is gone")[0] for p in deps.logger_attribute_problems(gone)] == [
        "rsl_rl.utils.logger.Logger().rewbuffer"]
