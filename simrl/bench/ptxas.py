"""What each kernel of a recorded step costs a GPU thread, read without a GPU.

Every Warp module that had a (non-empty) launch is compiled ahead of time to PTX for the GPU
architecture (`--arch`, e.g. 90 for Hopper) with the block size it is launched with there
(Warp's CUDA default, 256, unless the launch asks for one), and the PTX is assembled by
ptxas -v, which reports per kernel the registers per thread, the stack frame, and the bytes
spilled from registers to local memory. A kernel's CUDA entry is its mangled name (key and
hash) + "_cuda_kernel_forward" (or "_cuda_kernel_backward" for an adjoint launch); each is
checked against the entries of the PTX.

ptxas: Warp writes PTX newer than many installed CUDA toolkits read; the one of pip's
nvidia-cuda-nvcc wheel is used (`pip install -e ".[gpu-tools]"`), or the one named by $PTXAS.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import warp as wp

from simrl.bench.launches import Launch


def find_ptxas() -> Path:
    """ptxas from $PTXAS, else from pip's nvidia-cuda-nvcc wheel (nvidia/cu13/bin/ptxas, or
    nvidia/cuda_nvcc/bin/ptxas in the CUDA 12 wheels), the newest one found."""
    if os.environ.get("PTXAS"):
        path = Path(os.environ["PTXAS"])
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise SystemExit(f"PTXAS={path}: no such executable")
        return path
    spec = importlib.util.find_spec("nvidia")
    candidates = []
    for root in (spec.submodule_search_locations or []) if spec else []:
        candidates += list(Path(root).glob("cu[0-9]*/bin/ptxas")) + list(Path(root).glob("cuda_nvcc/bin/ptxas"))
    if not candidates:
        raise SystemExit("ptxas not found: Warp's PTX needs a recent one; install pip's nvidia-cuda-nvcc with "
                         "`pip install -e \".[gpu-tools]\"` (or set PTXAS=/path/to/ptxas)")

    def version(path: Path) -> tuple[int, ...]:
        found = re.search(r"cu(\d+)", path.parent.parent.name)
        return (int(found.group(1)),) if found else (12,)

    return max(candidates, key=version)


def ptxas_version(ptxas: Path) -> str:
    """The release and build of `ptxas`, e.g. "13.0 (V13.0.88)"."""
    out = subprocess.run([str(ptxas), "--version"], capture_output=True, text=True).stdout
    found = re.search(r"release ([\d.]+), (V[\d.]+)", out)
    return f"{found.group(1)} ({found.group(2)})" if found else out.strip().splitlines()[-1]


_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPERTIES = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_CUMULATIVE_STACK = re.compile(r"(\d+) bytes cumulative stack size")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas(text: str) -> dict[str, dict]:
    """ptxas -v's report (its stderr) per function: {name: {"stack_frame_bytes",
    "spill_store_bytes", "spill_load_bytes"}}, and for entry functions (kernels) also "entry":
    True, "arch", "registers", "cumulative_stack_bytes" and "smem_bytes".

    ptxas prints, for each entry, "Compiling entry function 'NAME' for 'sm_XX'", then
    "Function properties for NAME" with its stack frame and spills, then "Used R registers, ...,
    S bytes cumulative stack size" (registers and stack of the kernel with everything it calls).
    The properties of functions that were not inlined ("Function properties for _ZN...") come
    in between entries: which entry calls them is in the PTX (`ptx_calls`), not here."""
    functions: dict[str, dict] = {}
    entry = properties = None
    for line in text.splitlines():
        if found := _ENTRY.search(line):
            entry, properties = found.group(1), None
            functions.setdefault(entry, {}).update(entry=True, arch=found.group(2))
        elif found := _PROPERTIES.search(line):
            properties = found.group(1)
        elif (found := _FRAME.search(line)) and properties is not None:
            stack, stores, loads = (int(x) for x in found.groups())
            functions.setdefault(properties, {}).update(stack_frame_bytes=stack, spill_store_bytes=stores,
                                                        spill_load_bytes=loads)
            properties = None
        elif (found := _USED.search(line)) and entry is not None:
            record = functions[entry]
            record["registers"] = int(found.group(1))
            cumulative = _CUMULATIVE_STACK.search(line)
            # ptxas leaves out a cumulative stack of 0 bytes
            record["cumulative_stack_bytes"] = int(cumulative.group(1)) if cumulative else 0
            smem = _SMEM.search(line)
            record["smem_bytes"] = int(smem.group(1)) if smem else 0
            entry = None
    return functions


# a function's declaration: ".visible .entry NAME(" or ".func (.param .b32 func_retval0) NAME("
_PTX_FUNCTION = re.compile(r"^[ \t]*(?:\.visible\s+|\.weak\s+|\.extern\s+)*\.(entry|func)\s+"
                           r"(?:\([^)]*\)\s*)?([A-Za-z_$][\w$]*)", flags=re.MULTILINE)
_PTX_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([A-Za-z_$][\w$]*)")


def ptx_entries(ptx: str) -> list[str]:
    """Names of the entry functions (kernels) declared in PTX text."""
    return [m.group(2) for m in _PTX_FUNCTION.finditer(ptx) if m.group(1) == "entry"]


def ptx_calls(ptx: str) -> dict[str, set[str]]:
    """The functions each function of PTX text calls directly: {caller: {callee, ...}}. A
    function's text runs from its declaration to the next one."""
    heads = list(_PTX_FUNCTION.finditer(ptx))
    calls: dict[str, set[str]] = {}
    for head, after in zip(heads, [*heads[1:], None], strict=True):
        body = ptx[head.end():after.start() if after else len(ptx)]
        calls.setdefault(head.group(2), set()).update(_PTX_CALL.findall(body))
    return calls


def kernel_numbers(entry: str, functions: dict[str, dict], calls: dict[str, set[str]]) -> dict:
    """ptxas's numbers of one kernel: its registers and cumulative stack (ptxas counts what it
    calls), its own stack frame, and its spills with those of every function it calls (each
    once), which run in the kernel as much as its own."""
    own = functions[entry]
    reached, todo = set(), list(calls.get(entry, ()))
    while todo:
        name = todo.pop()
        if name not in reached:
            reached.add(name)
            todo.extend(calls.get(name, ()))
    stores = own.get("spill_store_bytes", 0) + sum(functions.get(f, {}).get("spill_store_bytes", 0) for f in reached)
    loads = own.get("spill_load_bytes", 0) + sum(functions.get(f, {}).get("spill_load_bytes", 0) for f in reached)
    return {"registers": own.get("registers"), "stack_frame_bytes": own.get("stack_frame_bytes"),
            "cumulative_stack_bytes": max(own.get("cumulative_stack_bytes", 0), own.get("stack_frame_bytes", 0)),
            "spill_store_bytes": stores, "spill_load_bytes": loads, "smem_bytes": own.get("smem_bytes"),
            "called_functions": sorted(reached)}


@dataclass
class CompiledModule:
    """One Warp module built for the GPU with one block size: its PTX's entries and ptxas's report."""

    name: str
    block_dim: int
    ptx: Path
    entries: list[str]  # the PTX's entry functions
    calls: dict[str, set[str]]  # the PTX's call graph
    functions: dict[str, dict]  # ptxas's report per function
    seconds: float
    error: str | None = None


def compile_module(module, block_dim: int, arch: int, build_dir: Path, ptxas: Path) -> CompiledModule:
    """PTX of `module` for sm_`arch` with launch bounds `block_dim` (wp.compile_aot_module), then
    ptxas -v on it. The module's block_dim option is set for the build and restored after."""
    start = time.perf_counter()
    saved = module.options["block_dim"]
    if saved != block_dim:
        wp.set_module_options({"block_dim": block_dim}, module=module)
    try:
        paths = wp.compile_aot_module(module, arch=arch, use_ptx=True, module_dir=build_dir)
    finally:
        if saved != block_dim:
            wp.set_module_options({"block_dim": saved}, module=module)
    ptx_path = Path(paths[-1])
    # Warp's PTX ends in a NUL byte, which ptxas rejects ("Unexpected EOF")
    text = ptx_path.read_bytes().replace(b"\0", b"").decode()
    clean = ptx_path.with_name(ptx_path.stem + ".clean.ptx")
    clean.write_text(text)
    target = re.search(r"^\s*\.target\s+(\w+)", text, flags=re.MULTILINE)
    gpu = target.group(1) if target else f"sm_{arch}"
    result = subprocess.run([str(ptxas), "-v", f"-arch={gpu}", str(clean), "-o", str(clean.with_suffix(".cubin"))],
                            capture_output=True, text=True)
    error = None
    if result.returncode != 0:
        error = f"ptxas failed ({result.returncode}): {result.stderr.strip()[-600:]}"
        if "Unsupported .version" in result.stderr:
            error += " -- this ptxas is older than the PTX; install pip's: pip install -e \".[gpu-tools]\""
    return CompiledModule(module.name, block_dim, clean, ptx_entries(text), ptx_calls(text),
                          parse_ptxas(result.stderr), time.perf_counter() - start, error)


def compile_launched(launches: list[Launch], arch: int, build_dir: Path, ptxas: Path, jobs: int,
                     log=print) -> dict[tuple[int, int], CompiledModule]:
    """Every (module, GPU block size) that a non-empty launch needs, built and assembled; the
    modules in parallel (`jobs`), the block sizes of one module one after another (each build
    sets the module's block_dim option). Keyed by (id(module), block_dim)."""
    needed: dict[int, tuple[object, list[int]]] = {}
    for launch in launches:
        if launch.threads == 0:
            continue  # Warp skips a launch with a zero dimension: nothing of it runs on a GPU
        module = launch.kernel.module
        _, sizes = needed.setdefault(id(module), (module, []))
        if launch.gpu_block_dim not in sizes:
            sizes.append(launch.gpu_block_dim)

    def build(module, sizes):
        built = []
        for block_dim in sizes:
            built.append(compile_module(module, block_dim, arch, build_dir, ptxas))
            log(f"  built {module.name} (block {block_dim}) in {built[-1].seconds:.1f} s")
        return module, built

    compiled = {}
    with ThreadPoolExecutor(max(1, jobs)) as pool:
        for module, built in pool.map(lambda item: build(*item), needed.values()):
            for c in built:
                compiled[(id(module), c.block_dim)] = c
    return compiled


def entry_of(kernel: wp.Kernel, adjoint: bool, compiled: CompiledModule) -> tuple[str | None, str]:
    """The CUDA entry of `kernel` (adjoint: its backward) in `compiled`, and how it was found:
    "exact" (kernel.get_mangled_name() + the entry suffix is in the PTX), "by key" (the PTX has
    exactly one entry of the kernel's key with some 8-digit hash), or "not found"."""
    suffix = "_cuda_kernel_backward" if adjoint else "_cuda_kernel_forward"
    name = kernel.get_mangled_name() + suffix
    if name in compiled.entries:
        return name, "exact"
    pattern = re.compile(re.escape(kernel.key) + r"_[0-9a-f]{8}" + re.escape(suffix) + "$")
    matches = [e for e in compiled.entries if pattern.match(e)]
    if len(matches) == 1:
        return matches[0], "by key"
    return None, "not found"
