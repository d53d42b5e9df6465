"""The Model and Data structs go to Warp functions by reference in the CPU build.

Warp's generated C++ passes a struct argument of a `@wp.func` by value: every call of a
function that takes the Model and the Data copies about 13 KB in float32 (Model 7,064 bytes,
Data 6,328) onto the stack before the call. The fused schedule calls its element functions
once per body, dof, pair, slot and row, so on the CPU these copies are a large share of a
step (docs/notes/benchmarks-2026.md, "Struct copies on the CPU"). Warp's own pass-by-reference
annotation, `wp.ref[T]`, is refused in kernels that have a backward pass, and every stage of
this engine has one.

The engine never assigns a field of `m` or `d` inside a kernel function (the arrays they hold
are written through, never replaced), so passing them by reference gives the same results as
passing copies. `pass_by_reference(struct)` registers a struct type; the CPU source Warp
generates for every function then takes arguments of that type as `Type& __restrict__`
(forward and adjoint functions alike; the adjoint arguments already are references), and every
kernel binds its arguments of that type (and a backward kernel its adjoints of them) to the
launch's argument blocks instead of copying them into each thread (the wide schedule runs a CPU
thread per world and element, the differentiable step kernels per constraint row). `__restrict__`
matters: with a plain reference the compiler reloads the struct's fields after every store to
an array, and the step is slower than with copies. CUDA code is left as
Warp writes it: the CUDA compiler inlines device functions, and the static GPU report
(scripts/gpu_report.py) reads that code.

A Warp version without the code generator's two functions is refused with the version simrl is
tested with (simrl.deps); one whose generated headers no longer look as this expects gets its
source as it is (correct, only slower): tests/test_by_reference.py checks that the headers
change, and that no function of the engine assigns a field of `m` or `d` (what makes the
references safe).
"""


import re

from simrl import deps

# native names (Warp's C++ type names) of the structs passed by reference
_NATIVE_NAMES: set[str] = set()
_installed = False


def pass_by_reference(struct) -> None:
    """Pass arguments of the Warp struct type `struct` by reference in CPU functions."""
    _NATIVE_NAMES.add(struct.native_name)
    _install()


def _by_reference(source: str) -> str:
    """`source` (Warp's C++ of one function and its adjoint) with the registered structs'
    parameters declared as references. A parameter is a header line `    Type var_name,` or
    `    Type var_name)`; lines of a function's body end in `;`, `{` or `}`."""
    names = "|".join(re.escape(n) for n in sorted(_NATIVE_NAMES))
    pattern = re.compile(rf"^(\s+)({names}) (var_\w+)([,)])$", re.MULTILINE)
    adjoints = re.findall(rf"^\s+(?:{names}) & (adj_\w+)[,)]$", source, re.MULTILINE)
    return _without_field_adjoints(pattern.sub(r"\1\2& __restrict__ \3\4", source), adjoints)


def _without_field_adjoints(source: str, adjoints: list[str]) -> str:
    """`source` without the statements `adj_d.field = adj_7;` of the registered structs'
    adjoints `adjoints`. Warp's adjoint of reading a struct's field assigns the field's adjoint
    (here always a zero local: an array's gradient flows through its own `grad` pointer, which
    the reverse code uses when the adjoint array it is handed has no data) back into the
    struct's adjoint; that adjoint is a reference to the launch's argument block, so each
    assignment is a real store of an array descriptor (56 bytes and more), one for every field
    an element function reads, that no code reads back (their values are what the launch put
    there or zeros, and nothing reads them: see `_kernel_by_reference`)."""
    if not adjoints:
        return source
    names = "|".join(re.escape(a) for a in sorted(set(adjoints)))
    return re.sub(rf"^[ \t]*(?:{names})\.\w+ = adj_\d+;\n", "", source, flags=re.MULTILINE)


def _kernel_by_reference(source: str) -> str:
    """`source` (Warp's C++ of one kernel) with the registered structs' arguments bound by
    reference to the launch's argument blocks (`Type& var_m = _wp_args->m;`, and in a backward
    kernel `Type& adj_m = _wp_adj_args->m;`) instead of copied into each thread.

    The adjoint structs too: a backward kernel that hands `adj_m`, `adj_d` to the adjoint of a
    function makes the compiler copy all 13 KB of them into every thread, which for a kernel
    over (worlds x constraint rows) costs more than the row's own arithmetic (docs/notes/benchmarks-2026.md,
    "The backward pass: adjoint structs by reference"). Their array fields are the gradients,
    written through and never replaced, so a reference writes the same gradients; their scalar fields (the
    Model's options, e.g. timestep) only collect adjoints that nothing reads (a leaf's adjoint
    is accumulated, never read back: diff_step differentiates parameters through arrays), so
    the threads may share them."""
    names = "|".join(re.escape(n) for n in sorted(_NATIVE_NAMES))
    pattern = re.compile(rf"^(\s*)({names}) ((?:var|adj)_\w+) = (_wp_args|_wp_adj_args)->(\w+);$", re.MULTILINE)
    adjoints = re.findall(rf"^\s*(?:{names}) (adj_\w+) = _wp_adj_args->\w+;$", source, re.MULTILINE)
    return _without_field_adjoints(pattern.sub(r"\1\2& \3 = \4->\5;", source), adjoints)


def _install() -> None:
    global _installed
    if _installed:
        return
    deps.require(deps.private_api_problems("warp-lang"))
    import warp._src.codegen as codegen

    original_func, original_kernel = codegen.codegen_func, codegen.codegen_kernel

    def codegen_func(adj, *args, device="cpu", **kwargs):
        source = original_func(adj, *args, device=device, **kwargs)
        if device == "cpu" and _NATIVE_NAMES:
            source = _by_reference(source)
        return source

    def codegen_kernel(kernel, device, options):
        source = original_kernel(kernel, device, options)
        if device == "cpu" and _NATIVE_NAMES:
            source = _kernel_by_reference(source)
        return source

    codegen.codegen_func = codegen_func
    codegen.codegen_kernel = codegen_kernel
    _installed = True
