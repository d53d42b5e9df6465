#!/usr/bin/env python
"""Train a policy: `python scripts/train.py task=NAME [key=value ...]`.

Tasks are configuration files in tasks/. PPO training on the batched environments lands
with the training work; until a task exists this script says so and exits cleanly.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import tasks  # noqa: E402


def main(argv: list[str]) -> int:
    names = tasks.available()
    overrides = dict(arg.split("=", 1) for arg in argv if "=" in arg)
    bad = [arg for arg in argv if "=" not in arg]
    if bad:
        print(f"error: arguments must be key=value overrides, got {bad}", file=sys.stderr)
        return 2
    task = overrides.get("task")
    if not names:
        if task is not None:
            print(f"error: unknown task {task!r}: no tasks are available yet", file=sys.stderr)
            return 2
        print("simrl: no tasks yet. Training (PPO on batched environments) arrives with the first "
              "task configuration in tasks/. Meanwhile: `make test` runs the physics parity suite and "
              "`python scripts/benchmark.py --model ant --smooth` measures the engine.")
        return 0
    print(f"error: training is not wired yet; tasks found: {', '.join(names)}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
