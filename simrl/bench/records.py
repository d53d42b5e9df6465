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


def data_table(records: list[dict]) -> str:
    """Markdown table of the simulation data per world of every engine that has the figure
    (`data_bytes_per_world`: simrl's Data, MuJoCo Warp's put_data; simrl.bench.engines), one row
    per engine and world count, with what sizes it: simrl's contact slots and constraint rows
    (fixed at load), MuJoCo Warp's budgets (put_data's defaults). "" when no record has it."""
    rows, done = [], set()
    for r in records:
        key = (r["engine"], r["num_worlds"])
        if "data_bytes_per_world" not in r or key in done:
            continue  # the data does not depend on the thread count: one row
        done.add(key)
        if "naconmax" in r:
            contacts = f"nconmax {r['nconmax']:,} (naconmax {r['naconmax']:,} for all worlds)"
            rows_per_world = f"njmax {r['njmax']:,}"
        else:
            contacts = f"{r['contact_slots']:,} slots"
            rows_per_world = f"{r['constraint_rows']:,}"
        rows.append(f"| {r['engine']} | {r['num_worlds']} | {r['data_bytes_per_world'] / 1024:,.1f} | {contacts} | "
                    f"{rows_per_world} |")
    if not rows:
        return ""
    return "\n".join(["Simulation data per world: simrl's Data (simrl.sim.data.data_bytes_per_world), MuJoCo Warp's "
                      "put_data arrays at its default budgets over its worlds.", "",
                      "| engine | worlds | data KiB/world | contacts per world | constraint rows per world |",
                      "|---|---:|---:|---|---:|", *rows])
