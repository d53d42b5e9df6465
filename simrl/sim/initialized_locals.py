"""The engine's CUDA build declares the locals of its functions initialized.

Warp's generated C++ declares every local of a function at its top, uninitialized, and writes
an `if` as two guarded blocks followed by `wp::where(cond, a, b)` for each variable either block
assigns: `a` is written only when `cond` holds, `b` only when it does not. Once the CUDA compiler
inlines such a function into a loop (a world function's loops over rows and dofs, the Newton
solver's iterations), the branch not taken leaves `a` holding what it held in the loop's
previous pass, and the select still reads it: to the compiler it is a value carried around the
loop, which keeps a register (or a spill slot) through everything else the loop does. Without
what this does, the Newton solver's kernel (its loops nested in the iterations) and the convex
collision's GJK and EPA spill such values (scripts/gpu_report.py reads the spills).

Declared initialized (`wp::float32 var_7{};`), each local is defined again wherever its
declaration runs, once per inlined call, so nothing is carried. Results cannot change: a select
never returns the stale value. Only the CUDA source of modules that ask for it (`OPTION`: every
module of the engine, simrl.sim.types.kernel_module) is changed, the CPU's is left as Warp writes
it; the option also keys those modules' cache entries, so that a build from before is not reused.
"""

import re

from simrl import deps

#: (not a Warp option) a module whose CUDA functions declare their locals initialized
OPTION = "simrl_cuda_initialized_locals"

# a declaration of a function's local: `    wp::float32 var_7;`, `    bool var_3;`,
# `    wp::array_t<wp::int32>* var_12;` (constants are declared with their value, arguments end
# in `,` or `)`)
_DECLARATION = re.compile(r"^(\s+)((?:wp::|bool\b)[^=;(){}]*?) (var_\w+);$", re.MULTILINE)
_installed = False


def initialized_locals(source: str) -> str:
    """`source` (Warp's C++ or CUDA of one function) with its locals declared initialized."""
    return _DECLARATION.sub(r"\1\2 \3{};", source)


def install() -> None:
    """Declare the locals initialized in the CUDA functions of modules with option `OPTION`."""
    global _installed
    if _installed:
        return
    deps.require(deps.private_api_problems("warp-lang"))
    import warp._src.codegen as codegen

    original = codegen.codegen_func

    def codegen_func(adj, *args, device="cpu", options=None, **kwargs):
        source = original(adj, *args, device=device, options=options, **kwargs)
        if device == "cuda" and (options or {}).get(OPTION):
            source = initialized_locals(source)
        return source

    codegen.codegen_func = codegen_func
    _installed = True
