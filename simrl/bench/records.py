"""Where a benchmark's results go: the table printed, the records as JSON (--out), and a dated
markdown section with the machine and the command that measured it (--markdown), so that a
figure copied into docs/BENCHMARKS.md carries how to measure it again."""

import datetime
import json
import sys
from pathlib import Path

from simrl.bench.host import machine


def command_line(args) -> str:
    """The command that was run: `args.command` where the caller set it, else
    scripts/benchmark.py with this process's arguments."""
    return getattr(args, "command", None) or "python scripts/benchmark.py " + " ".join(sys.argv[1:])


def make_output_folders(*paths: str | None) -> None:
    """The folders of the output files, made before a run of minutes, so that it cannot end
    unable to write what it measured."""
    for path in paths:
        if path:
            Path(path).parent.mkdir(parents=True, exist_ok=True)


def append_markdown(path: str, heading: str, body: str) -> None:
    """A section `### heading, <today>` with `body` appended to the markdown file `path`."""
    with open(path, "a") as f:
        f.write(f"\n### {heading}, {datetime.date.today().isoformat()}\n\n{body}")
    print(f"appended the table to {path}")


def write_results(args, records: list[dict], table: str, title: str) -> None:
    """Print the table; write the records (`args.out`) and a dated section with the machine and
    the command (`args.markdown`)."""
    print()
    print(table)
    if args.out:
        Path(args.out).write_text(json.dumps(records, indent=2))
    if args.markdown:
        append_markdown(args.markdown, title, f"`{command_line(args)}` on {machine()}\n\n{table}\n")
