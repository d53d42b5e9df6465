"""The differentiable step's adjoints call no function that returns nothing before running it
backwards.

Warp generates the adjoint of a `@wp.func` as its forward code (the *replay*: every local
recomputed, array stores left out) followed by the reverse code, and the reverse code of each
call runs the callee's adjoint, which replays the callee again. A function that returns
nothing (an element function of simrl.sim.schedule, a stage's helper that writes a joint
frame, the chain of a pass's functions) is replayed as a call of its *forward* function, the
one that stores: in a backward kernel an element function nested k calls deep would run k + 1
times before its own reverse code, each time rewriting values its forward launch left in
memory, and Warp's compiler cannot drop the calls (they store).

Such a call computes nothing its caller's adjoint reads from a register: all it leaves is what
it stores. The stages' discipline makes those stores the values already in memory: each
element writes its own outputs once and then only adds to them, no later launch of the step
overwrites an array the tape recorded (simrl.sim.grad),
and the adjoint code reads arrays, never its replays' registers. So a void function's replay
can be skipped (Warp's `Function.skip_replay`, which its atomic built-ins use): the replay
then leaves the call out (a comment in the generated code), for the CPU and CUDA alike, for
every void function a differentiable module builds: the loops of simrl.sim.schedule's passes,
their element functions, the stages' helpers. The gradients are the same to
the bit as with the replays (4-step diff_step chains of the quadruped, the ant and the
humanoid, float64, both schedules); tests/test_grad*.py check them against finite differences, and
tests/test_by_reference.py that the replays stay skipped.

Only modules that ask for it (`kernel_module(..., backward=True)` sets `OPTION`) mark their
functions; the mark stays on the function (a `wp.Function` is shared by the modules that
build it), and a function that returns nothing has no replay any module needs.
"""


from simrl import deps

#: module option that asks for void functions without replay (its value is part of the module's
#: hash, so that a build without the mark is not taken from Warp's cache)
OPTION = "simrl_void_replay"
SKIPPED = "skipped"

_installed = False


def install() -> None:
    """Wrap Warp's ModuleBuilder.build_function: in a module whose options set OPTION to SKIPPED,
    a user function found to return nothing is marked skip_replay before its callers are
    generated (Warp builds a callee before it emits the call)."""
    global _installed
    if _installed:
        return
    deps.require(deps.private_api_problems("warp-lang"))
    from warp._src.context import ModuleBuilder

    original = ModuleBuilder.build_function

    def build_function(self, func):
        original(self, func)
        if self.options.get(OPTION) == SKIPPED and not func.is_builtin():
            returns = func.adj.return_var
            if returns is None or len(returns) == 0:
                func.skip_replay = True

    ModuleBuilder.build_function = build_function
    _installed = True
