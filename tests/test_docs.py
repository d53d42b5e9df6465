"""The documentation does what it says.

- Every ```python block of README.md and docs/*.md runs, from a scratch directory (so a block
  that reads a file must find it through `envs.ASSETS_DIR`, not the current directory); blocks
  that show a value assert it.
- README.md's ```bash blocks are not run (they train for minutes), but every command in them is
  checked: Makefile targets exist, scripts exist, train.py / play.py overrides compose and pass
  validation, the flags of other scripts appear in their --help.
- The README's task table, its refusal messages and the figures it quotes are checked against
  the environments, the engine and docs/BENCHMARKS.md / docs/RESULTS.md.
"""

import importlib.util
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
from hydra import compose, initialize
from readme import README, ROOT, code_blocks, code_spans, section, table
from test_unsupported import CASES

import envs
import tasks
from simrl import Sim, UnsupportedFeatureError
from tasks.config import check_overrides, register, task_overrides, validate

DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
BLOCKS = [(page.name, i, code) for page in PAGES for i, code in enumerate(code_blocks(page, "python"))]


@pytest.mark.parametrize("name,index,code", BLOCKS, ids=[f"{n}-{i}" for n, i, _ in BLOCKS])
def test_doc_example_runs(name, index, code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # from any directory, not only the repository's root
    exec(compile(code, f"{name} example {index}", "exec"), {"__name__": "__doc_example__"})


def test_the_readme_has_python_examples():
    assert len(code_blocks(README, "python")) >= 4


# ------------------------------------------------------------------- README shell commands
@cache
def _help(*command: str) -> str:
    result = subprocess.run([sys.executable, *command, "--help"], cwd=ROOT, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


def readme_commands() -> list[list[str]]:
    """Every command line of README.md's ```bash blocks, continuation lines joined, comments
    dropped, as shell words."""
    commands = []
    for block in code_blocks(README, "bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # OMP_NUM_THREADS=1 python ...
                words = words[1:]
            if words:
                commands.append(words)
    return commands


def check_hydra_overrides(script: str, overrides: list[str]) -> None:
    """What train.py / play.py check before they build anything: simrl's key check, a task file
    (task=PATH.yaml), Hydra's composition, and validate."""
    register(script)  # the script's Hydra config, as scripts/<script>.py registers it
    check_overrides(script, overrides)
    overrides = task_overrides(script, overrides)
    with initialize(version_base=None):
        cfg = compose(script, overrides=overrides)
    validate(cfg, script)


def check_command(words: list[str]) -> None:
    program, args = words[0], words[1:]
    if program == "make":
        target = args[0]
        assert re.search(rf"^{re.escape(target)}:", (ROOT / "Makefile").read_text(), re.M), f"no make target {target}"
        make_args = [a.split("=", 1)[1] for a in args[1:] if a.startswith("ARGS=")]
        if target == "train" and make_args:
            check_hydra_overrides("train", shlex.split(make_args[0]))
    elif program == "source":
        assert args == [".venv/bin/activate"]
    elif program == "tensorboard":
        assert importlib.util.find_spec("tensorboard") is not None and args[0] == "--logdir"
    elif program in ("python", "torchrun"):
        at = next(i for i, a in enumerate(args) if a.endswith(".py"))
        launcher_flags, script, script_args = args[:at], args[at], args[at + 1:]
        assert (ROOT / script).is_file(), f"{script} does not exist"
        if program == "torchrun":
            torchrun_help = _help("-m", "torch.distributed.run")
            for flag in launcher_flags:
                assert flag.split("=")[0] in torchrun_help, f"torchrun has no {flag}"
        name = Path(script).stem
        if script.startswith("scripts/") and name in ("train", "play"):
            check_hydra_overrides(name, script_args)
        else:
            flags = [a.split("=")[0] for a in script_args if a.startswith("--")]
            if flags:
                text = _help(script)
                for flag in flags:
                    assert flag in text, f"{script} has no {flag}"
    else:
        raise AssertionError(f"README command {' '.join(words)!r}: nothing checks {program!r}; teach test_docs")


def test_every_readme_command_is_checked(monkeypatch):
    monkeypatch.chdir(ROOT)  # the README's commands run from the repository's root
    commands = readme_commands()
    assert ["make", "train"] in commands and ["make", "test"] in commands  # the quick start
    for words in commands:
        check_command(words)


def test_a_stale_readme_command_would_be_caught():
    for bad in (["python", "scripts/train.py", "task=cartpole", "num_env=16"],
                ["python", "scripts/play.py", "task=cartpole", "checkpoint=latest", "num_episodes=0"],
                ["python", "scripts/benchmark.py", "--no-such-flag"],
                ["make", "no-such-target"],
                ["python", "scripts/no_such_script.py"]):
        with pytest.raises(Exception):  # noqa: B017 - each fails in its own way
            check_command(bad)


# ------------------------------------------------------------------------- README content
def test_the_task_table_matches_the_environments():
    rows = {code_spans(row[0])[0]: row for row in table(section(README, "## Tasks"))}
    assert sorted(rows) == tasks.available() == envs.names()
    for name, (_, observations, actions, terms, _) in rows.items():
        env = envs.make(name, num_envs=2, device="cpu")
        obs = env.reset()
        assert observations == f"{obs['policy'].shape[1]} / {obs['critic'].shape[1]}", name
        assert int(actions) == env.num_actions, name
        assert code_spans(terms) == list(env.reward_weights), name


def test_the_refusals_quoted_are_the_engines_messages():
    messages = []
    for xml, _ in CASES.values():
        with pytest.raises(UnsupportedFeatureError) as info:
            Sim.from_mjcf(xml, num_worlds=1)
        messages.append(str(info.value))
    quoted = [span for row in table(section(README, "## Supported MJCF")) for span in code_spans(row[2])
              if ": " in span]
    assert len(quoted) >= 10
    for message in quoted:
        assert any(message in m for m in messages), f"README quotes a refusal simrl does not give: {message}"


def test_quoted_speedups_are_measured_figures():
    """Every ratio the README quotes (1.21x, 1.23-1.48x, ...) is a figure of docs/BENCHMARKS.md or
    docs/RESULTS.md."""
    measured = (DOCS / "BENCHMARKS.md").read_text() + (DOCS / "RESULTS.md").read_text()
    ratios = re.findall(r"(\d+\.\d+)(?:-(\d+\.\d+))?x\b", README.read_text())
    assert len(ratios) >= 5
    for low, high in ratios:
        for value in filter(None, (low, high)):
            assert f"{value}x" in measured, f"README quotes {value}x, which no measurement gives"


def test_the_two_rank_speedup_is_the_measured_range():
    benchmarks = DOCS / "BENCHMARKS.md"
    heading = re.search(r"^### Several processes: 1 and 2 CPU ranks.*$", benchmarks.read_text(), re.M).group(0)
    text = section(benchmarks, heading)
    ratios = [float(row[-1].rstrip("x")) for row in table(text) if row[0].startswith("2")]
    assert f"{min(ratios):.2f}-{max(ratios):.2f}x" in section(README, "## Several GPUs or machines")


def test_the_gpu_section_says_whether_a_gpu_was_measured():
    """Until docs/BENCHMARKS.md holds a CUDA record, the README says plainly that no GPU run has
    happened, and quotes no GPU figure; once it does, the README must stop saying so."""
    measured_on_cuda = re.search(r"^\| \w+ \| cuda", (DOCS / "BENCHMARKS.md").read_text(), re.M) is not None
    gpus = section(README, "### Measured GPU results")
    assert ("No GPU run has happened yet" in gpus) is not measured_on_cuda
    if not measured_on_cuda:
        assert not re.search(r"\d[\d,]* steps/s", gpus)
