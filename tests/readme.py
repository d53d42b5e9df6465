"""Reading README.md and docs/*.md in tests: code blocks, sections, tables, and the file names
a table documents."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def code_blocks(path: Path, language: str) -> list[str]:
    """The fenced code blocks of `path` in `language` (```python, ```bash), in order."""
    return re.findall(rf"```{language}\n(.*?)```", path.read_text(), re.S)


def section(path: Path, heading: str) -> str:
    """The text under the markdown heading `heading` (e.g. "## Tasks") up to the next heading of
    the same or a higher level (lines inside code fences are not headings)."""
    lines = path.read_text().splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    start = lines.index(heading) + 1
    fenced = False
    for end in range(start, len(lines)):
        if lines[end].startswith("```"):
            fenced = not fenced
        elif not fenced and re.match(rf"#{{1,{level}}} ", lines[end]):
            return "\n".join(lines[start:end])
    return "\n".join(lines[start:])


def table(text: str) -> list[list[str]]:
    """The rows (cells, stripped) of the first markdown table in `text`, header and rule left out."""
    lines = [line for line in text.splitlines() if line.startswith("|")]
    first = text.splitlines().index(lines[0])
    rows = []
    for line in text.splitlines()[first:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return [row for row in rows[2:]]


def code_spans(cell: str) -> list[str]:
    """The `inline code` of a table cell."""
    return re.findall(r"`([^`]+)`", cell)


def name_pattern(documented: str) -> re.Pattern:
    """A documented file name as a pattern: `<it>` stands for a number, `*` for anything, a
    trailing slash for a directory."""
    parts = re.split(r"(<it>|\*)", documented)
    body = "".join(r"\d+" if p == "<it>" else ".*" if p == "*" else re.escape(p) for p in parts)
    return re.compile(f"^{body}$")


def undocumented(entries: list[str], documented: list[str]) -> list[str]:
    """Entries of a directory (directories with a trailing slash) that no documented name covers."""
    patterns = [name_pattern(d) for d in documented]
    return [e for e in entries if not any(p.match(e) for p in patterns)]


def missing(documented: list[str], entries: list[str]) -> list[str]:
    """Documented names that no entry of the directory matches."""
    return [d for d in documented if not any(name_pattern(d).match(e) for e in entries)]


def documented_files(heading: str) -> list[str]:
    """The file names in the first column of the table under `heading` in README.md."""
    return [code_spans(row[0])[0] for row in table(section(README, heading))]


def listing(directory: Path) -> list[str]:
    """The names in `directory`, directories with a trailing slash."""
    return sorted(p.name + ("/" if p.is_dir() else "") for p in directory.iterdir())
