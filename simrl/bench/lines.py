"""Instructions per source line of simrl's step on one thread (`--per-line`): which Python line
of which stage executes how many instructions per world-step (valgrind's callgrind; no timer
noise).

`--per-stage` attributes instructions to the wide schedule's kernels; the fused schedule, which
the CPU runs, is one kernel whose stages are inlined into each other, so it needs attribution by
source line. Warp loads CPU kernels through LLVM's JIT: valgrind sees their code but no
symbols. So:
  1. a child process (step_worlds.py --line-tables) builds the Sim with its kernels compiled
     with line tables (clang's -debug-info-kind=line-tables-only, x86-64-v3 code as the
     instruction counts'; a private kernel cache under the output directory), looks up the JIT
     addresses of the module object's global symbols (Warp's own lookup), takes one step
     uncounted, then STEPS steps under callgrind's instrumentation (client requests);
  2. this process reads the callgrind file (--dump-instr=yes: a count per instruction
     address), maps every address inside the kernels' code to its chain of inlined functions
     and lines in Warp's generated C++ (`addr2line -i` on the object file), and each C++ line
     to the Python line Warp's code generator wrote beside it (its `<L n>` comments and each
     function's `# file.py:line` header);
  3. it prints per Python function the instructions of every inlined call of it (inclusive:
     a function counts everything inlined into it) and per Python line the instructions of
     that line alone (self), per world-step; the share outside the kernels (Python, launches)
     is printed apart.
Needs valgrind (callgrind), addr2line, nm and readelf (binutils); x86-64 only.
"""

import collections
import glob
import json
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from simrl.bench.instructions import child_command, run_child
from simrl.bench.models import start_arrays


def self_costs(path: str) -> collections.Counter:
    """Self instructions per instruction address of a callgrind file written with
    --dump-instr=yes (positions "instr line"; a `calls=` line's next line is the call's
    inclusive cost, not the caller's own, and is left out)."""
    cost = collections.Counter()
    position, skip = 0, False
    positions = ["line"]
    for line in open(path):
        head = line[0]
        if line.startswith("positions:"):
            positions = line.split()[1:]
        elif head in "0123456789+-*":
            parts = line.split()
            p = parts[0]
            if p.startswith("0x"):
                position = int(p, 16)
            elif p[0] in "+-":
                step = int(p[1:], 16) if p[1:].startswith("0x") else int(p[1:])
                position += step if p[0] == "+" else -step
            if skip:
                skip = False
                continue
            if positions[0] == "instr" and len(parts) > len(positions):
                cost[position] += int(parts[len(positions)])
        elif line.startswith("calls="):
            skip = True
    return cost


def code_section(obj: str) -> tuple[str, int]:
    """(name, size) of the object file's code section (Warp's CPU objects use the large code
    model: .ltext, else .text)."""
    out = subprocess.run(["readelf", "-S", "-W", obj], capture_output=True, text=True, check=True).stdout
    sizes = {}
    for line in out.splitlines():
        fields = line.replace("[ ", "[").split()
        for name in (".ltext", ".text"):
            if name in fields:
                i = fields.index(name)
                sizes[name] = int(fields[i + 4], 16)
    name = ".ltext" if sizes.get(".ltext") else ".text"
    return name, sizes.get(name, 0)


def python_lines(cpp: str) -> list:
    """For each line of Warp's generated C++ (1-based), (python file:line of the function,
    function name, python line) from the code generator's comments."""
    header, function, py_line = None, None, None
    table = [None]
    for text in Path(cpp).read_text().splitlines():
        s = text.strip()
        match = re.match(r"// (/\S+\.py):(\d+)$", s)
        if match:
            header, function, py_line = f"{Path(match.group(1)).name}:{match.group(2)}", None, None
        match = re.match(r"(?:static\s+)?(?:CUDA_CALLABLE\s+)?[\w:<>*&]+\s+(\w+)\($", s)
        if match and header:
            function = readable(match.group(1))
        match = re.search(r"<L (\d+)>\s*$", s)
        if match:
            py_line = int(match.group(1))
        table.append((header, function, py_line))
    return table


def readable(cpp_name: str) -> str:
    """`build__locals__factor_ld_0` -> `factor_ld` (Warp's mangled name of a nested function)."""
    name = cpp_name.split("__locals__")[-1]
    return re.sub(r"_\d+$", "", name)


def _symbol_offsets(obj: str) -> dict[str, int]:
    """Offset in the object file of each of its defined symbols (nm)."""
    offsets = {}
    for line in subprocess.run(["nm", "--defined-only", obj], capture_output=True, text=True,
                               check=True).stdout.splitlines():
        parts = line.split()
        if len(parts) == 3:
            offsets[parts[2]] = int(parts[0], 16)
    return offsets


def attribute(costs: collections.Counter, symbols: dict):
    """(inclusive per function, self per line, instructions in the kernels) from the costs per
    address and the JIT addresses of the objects' symbols."""
    inclusive, by_line, in_kernels = collections.Counter(), collections.Counter(), 0
    by_object = collections.defaultdict(list)
    for name, (address, obj) in symbols.items():
        by_object[obj].append((name, address))
    for obj, named in by_object.items():
        name, address = named[0]
        base = address - _symbol_offsets(obj)[name]
        section, size = code_section(obj)
        inside = {a - base: c for a, c in costs.items() if base <= a < base + size}
        in_kernels += sum(inside.values())
        if not inside:
            continue
        cpp = str(Path(obj).with_suffix("").with_suffix(".cpp"))
        if not os.path.isfile(cpp):
            cpp = (glob.glob(str(Path(obj).parent / "*.cpp")) or [None])[0]
        table = python_lines(cpp) if cpp else []
        addresses = sorted(inside)
        out = subprocess.run(["addr2line", "-i", "-f", "-C", "-a", "-j", section, "-e", obj,
                              *[hex(a) for a in addresses]], capture_output=True, text=True, check=True).stdout
        chains, current = [], None
        for line in out.splitlines():
            if line.startswith("0x"):
                current = [int(line, 16), []]
                chains.append(current)
            elif current is not None:
                current[1].append(line)
        for address, chain in chains:
            cost = inside.get(address, 0)
            frames = []  # innermost first: (python function, file:line header, python line)
            for k in range(0, len(chain) - 1, 2):
                location = chain[k + 1]
                file, _, number = location.rpartition(":")
                number = number.split()[0] if number else ""
                if file.endswith(".cpp") and number.isdigit() and int(number) < len(table) and table[int(number)]:
                    header, function, py_line = table[int(number)]
                    frames.append((function or readable(chain[k].split("(")[0]), header, py_line))
            if not frames:
                by_line[("(Warp runtime)", None, None)] += cost
                continue
            seen = set()
            for function, header, _ in frames:
                if (function, header) not in seen:
                    seen.add((function, header))
                    inclusive[(function, header)] += cost
            by_line[frames[0]] += cost
    return inclusive, by_line, in_kernels


def line_profile(name: str, mjm, worlds: int, steps: int, schedule: str, dtype: str, top: int,
                 out: str | None = None, keep: str | None = None, settle: float = 0.0) -> dict:
    """Count `steps` steps of `worlds` worlds under callgrind and print the instructions per
    world-step of every Python function (inclusive) and line (self) of simrl's kernels, `top`
    rows each; the whole report written to `out` (JSON) and returned. `keep`: a directory for the
    callgrind file, symbols and kernel cache (default: a temporary one, removed); `settle`: as
    simrl.bench.models.initial_state's."""
    if worlds < 1 or steps < 1:
        raise SystemExit(f"--worlds {worlds} --steps {steps}: both must be at least 1")
    missing = [tool for tool in ("valgrind", "addr2line", "nm", "readelf") if shutil.which(tool) is None]
    if missing:
        raise SystemExit(f"--per-line needs {', '.join(missing)} on PATH (valgrind; binutils)")
    import mujoco
    import numpy as np

    work = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="simrl-lines-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        mujoco.mj_saveModel(mjm, str(work / "model.mjb"), None)
        np.savez(work / "start.npz", **start_arrays(mjm, worlds, settle))

        def child(counted_steps: int) -> list[str]:
            return child_command("simrl", str(work / "model.mjb"), str(work / "start.npz"), str(counted_steps),
                                 "--schedule", schedule, "--dtype", dtype, "--line-tables", str(work / "kernels"),
                                 "--symbols", str(work / "symbols.json"))

        # the kernels compiled outside valgrind first (under it a compile takes minutes)
        print(f"model {name}: nv={mjm.nv}; {worlds} worlds, {schedule} schedule, {dtype}; "
              f"compiling the kernels with line tables ...", flush=True)
        run_child(child(0))
        print(f"counting {steps} steps under callgrind ...", flush=True)
        out_file = work / "callgrind.out"
        run_child(["valgrind", "--tool=callgrind", "--instr-atstart=no", "--dump-instr=yes",
                   f"--callgrind-out-file={out_file}", *child(steps)])
        if not out_file.is_file():
            raise SystemExit(f"the counted child wrote no {out_file}")
        costs = self_costs(str(out_file))
        symbols = json.loads((work / "symbols.json").read_text())
        inclusive, by_line, in_kernels = attribute(costs, symbols)
    finally:
        if not keep:
            shutil.rmtree(work, ignore_errors=True)
    world_steps = worlds * steps
    total = sum(costs.values())
    print(f"\n{total / world_steps:,.0f} instructions per world-step counted, "
          f"{in_kernels / world_steps:,.0f} of them in the kernels "
          f"({total - in_kernels:,} outside: Python and launches, over {steps} steps)")
    print("\nper function, inclusive (every function inlined into it counts), per world-step:")
    for (function, header), cost in inclusive.most_common(top):
        print(f"{cost / world_steps:10,.0f}  {function}  ({header})")
    print("\nper line, self, per world-step:")
    for (function, header, line), cost in by_line.most_common(top):
        where = f"{header.split(':')[0]}:{line}" if header and line else (header or "")
        print(f"{cost / world_steps:10,.0f}  {where}  {function}")
    report = {"model": name, "worlds": worlds, "steps": steps, "schedule": schedule, "dtype": dtype,
              "per_world_step_total": total / world_steps, "per_world_step_in_kernels": in_kernels / world_steps,
              "functions": [{"function": f, "defined_at": h, "inclusive": c / world_steps}
                            for (f, h), c in inclusive.most_common()],
              "lines": [{"function": f, "defined_at": h, "line": n, "self": c / world_steps}
                        for (f, h, n), c in by_line.most_common()]}
    if out:
        Path(out).write_text(json.dumps(report, indent=1))
    return report
