"""A sum over a body's subtree in the order of MuJoCo's recursion, by one thread.

MuJoCo gathers subtree sums from the leaves (mj_comPos's subtree masses, mj_crb's composite
inertias): each body adds its children's sums, in ascending order, to its own value, so a body's
sum is a tree of additions. The fused schedule runs that recursion; the wide schedule launched it
a level per launch. `subtree_sum` lets one thread per body compute its body's sum alone, with the
same additions in the same order (the same bits): it walks the subtree in MuJoCo's body order
(depth first: a subtree is the bodies b to Model.body_subtree[b][0] - 1) keeping the partial
sums of the bodies on the path from b in a stack, and adds a finished child's sum to its parent's
partial sum before the next child starts, as the recursion does. The stack has SUBTREE_STACK
rows: models deeper than that keep the launches per level (Model.subtree_alone).
"""

import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import SUBTREE_STACK, model_struct


@functools.cache
def subtree_sum(scalar, vec, own, write):
    """f(m, d, w, b): write(m, d, w, b, s) with s the sum over body b's subtree of own(m, d, w, e)
    (a vector of type `vec`), added as the recursion from the leaves adds them."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    n = vec._length_
    stack_type = wp.types.matrix(shape=(SUBTREE_STACK, n), dtype=scalar)

    @wp.func
    def body(m: Model, d: Data, w: int, b: int):
        """Body b's subtree sum, written by `write`.

        Model: body_subtree, and what `own` reads. Data: what `own` reads (of every body of the subtree)
        in, what `write` writes (of body b) out."""
        stack = stack_type()
        tree = m.body_subtree[b]  # (end, depth)
        top = int(0)
        for e in range(b, tree[0]):
            k = m.body_subtree[e][1] - tree[1]
            # each subtree finished before e (rows k to top) added to its parent's partial sum
            while top >= k and k > 0:
                for c in range(n):
                    stack[top - 1, c] = stack[top - 1, c] + stack[top, c]
                top = top - 1
            value = own(m, d, w, e)
            for c in range(n):
                stack[k, c] = value[c]
            top = k
        while top > 0:
            for c in range(n):
                stack[top - 1, c] = stack[top - 1, c] + stack[top, c]
            top = top - 1
        out = vec()
        for c in range(n):
            out[c] = stack[0, c]
        write(m, d, w, b, out)

    return body
