"""The engine's CUDA build declares its functions' locals initialized
(simrl.sim.initialized_locals): without it, values that Warp's `if` leaves stale are carried
around loops, and the solver's kernel spills (scripts/gpu_report.py reads the spills)."""

import warp as wp

from simrl.sim import initialized_locals, schedule
from simrl.sim.types import kernel_module


def test_locals_are_declared_initialized_and_nothing_else_changes():
    source = ("static CUDA_CALLABLE void f_0(\n    wp::float32 var_x,\n    wp::int32 var_w)\n{\n"
              "    wp::float32 var_0;\n    bool var_1;\n    wp::array_t<wp::int32>* var_2;\n"
              "    const wp::float32 var_3 = 0.5;\n    wp::int32 var_4;\n"
              "    var_0 = wp::mul(var_x, var_3);\n    return var_4;\n}\n")
    out = initialized_locals.initialized_locals(source)
    for declaration in ("wp::float32 var_0{};", "bool var_1{};", "wp::array_t<wp::int32>* var_2{};",
                        "wp::int32 var_4{};"):
        assert f"    {declaration}\n" in out
    # arguments, constants and statements are untouched
    for line in ("    wp::float32 var_x,", "    wp::int32 var_w)", "    const wp::float32 var_3 = 0.5;",
                 "    var_0 = wp::mul(var_x, var_3);", "    return var_4;"):
        assert line + "\n" in out
    assert out.count("{};") == 4


def test_the_engines_cuda_source_declares_initialized_locals():
    """Every module of the engine asks for it (the world functions' among them), and the
    solver's CUDA source has it (the CPU's is left as Warp writes it)."""
    assert kernel_module(wp.float64).options[initialized_locals.OPTION]
    assert kernel_module(wp.float32, "widegrad", backward=True).options[initialized_locals.OPTION]
    module = schedule.coop_module(wp.float32)
    assert module.options[initialized_locals.OPTION]
    from warp._src.codegen import codegen_func

    from simrl.sim import forward

    solve = forward.world_functions(wp.float32, True).solve
    builder = wp._src.context.ModuleBuilder(module, module.options)
    builder.build_function(solve)
    cuda = codegen_func(solve.adj, c_func_name=solve.native_func, device="cuda", options=module.options,
                        forward_only=True)
    cpu = codegen_func(solve.adj, c_func_name=solve.native_func, device="cpu", options=module.options,
                       forward_only=True)
    assert "wp::int32 var_" in cuda and "{};" in cuda
    assert "{};" not in cpu
