"""The narrow phase (mj_collision's colliders, engine_collision_driver.c) over the candidate
pairs the broadphase kept (simrl.sim.broadphase: Data.collision_pair, in pair order).

Element: entry i of a world's kept pairs (its pair Data.collision_pair[w, i], its slots from
Data.collision_adr[w, i]). `pair_functions()[kind](m, d, w, i)` runs the collider of that pair's
type combination, writes its contacts into the pair's own slots and flags which slots hold a
contact, so every slot is written by its pair alone: the fused
schedule loops over the world's list and dispatches on the kind, the wide schedule launches one
kernel per group of kinds over the list's entries (each kernel compiles only its colliders).

Tape-safe (simrl.sim.grad): the colliders store each contact once, frame included (the
mju_makeFrame of mj_setContact happens in them, not as a rewrite here).
"""

import functools

import warp as wp

from simrl.sim import collision_convex, collision_primitive
from simrl.sim.contact_tables import (
    CONVEX_KINDS,
    HFIELD_KINDS,
    KIND_PLANE_MESH,
    MAX_CONTACTS,
    PAIR_KIND,
    PRIMITIVE_MAX_CONTACTS,
)
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import GeomType

#: collider names by kind (contact_tables.PAIR_KIND): collision_primitive's, "<type1>_<type2>"
COLLIDERS = {PAIR_KIND[pair]: f"{pair[0].name.lower()}_{pair[1].name.lower()}" for pair in MAX_CONTACTS}
#: contact slots of one pair of each kind
KIND_SLOTS = {PAIR_KIND[pair]: n for pair, n in MAX_CONTACTS.items()}


@functools.cache
def pair_functions(scalar):
    """{kind: f(m, d, w, i)}: the collision of entry i of world w's kept pairs, of that kind."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    prim = collision_primitive.build(scalar)
    convex = collision_convex.build(scalar)

    def make(collider, nslot):
        # inlined into the loop over pairs
        @wp.func(inline=True)
        def collide_pair(m: Model, d: Data, w: int, e: int):
            """The contacts of entry e of the kept pairs by its pair's collider; each slot flagged.

            Model: cpair_gap, cpair_geom, cpair_margin, geom_size. Data in: collision_pair, collision_adr,
            geom_xpos, geom_xmat. Data out (the pair's slots): contact_dist, contact_pos, contact_frame,
            contact_active."""
            p = d.collision_pair[w, e]
            g = m.cpair_geom[p]
            g1 = g[0]
            g2 = g[1]
            margin = m.cpair_margin[p] + m.cpair_gap[p]
            slot = d.collision_adr[w, e]
            n = collider(d.geom_xpos[w, g1], d.geom_xmat[w, g1], m.geom_size[g1], d.geom_xpos[w, g2],
                         d.geom_xmat[w, g2], m.geom_size[g2], margin, d.contact_dist, d.contact_pos,
                         d.contact_frame, w, slot)
            # every slot of the pair says whether it holds a contact (1: dist < margin + gap)
            for i in range(nslot):
                active = int(0)
                if i < n:
                    active = 1
                d.contact_active[w, slot + i] = active

        return collide_pair

    def collider(name):
        return getattr(prim, name) if hasattr(prim, name) else getattr(convex, name)

    # the convex pairs rebuild the contacts their detection pass found (simrl.sim.collision_convex)
    def pair(kind, name):
        if kind == KIND_PLANE_MESH:
            return convex.plane_mesh_contacts
        if kind in HFIELD_KINDS:
            return convex.hfield_contacts
        if kind in CONVEX_KINDS:
            return convex.contacts(KIND_SLOTS[kind])
        return make(collider(name), KIND_SLOTS[kind])

    return {kind: pair(kind, name) for kind, name in COLLIDERS.items()}


#: the kinds of the convex pairs, and the groups of them the wide schedule's detection pass
#: launches apart (plane-mesh, the height fields', GJK/EPA between two geoms with multiccd)
DETECT_KINDS = tuple(CONVEX_KINDS)
DETECT_PLANE_MESH = (KIND_PLANE_MESH,)
DETECT_HFIELD = tuple(HFIELD_KINDS)
DETECT_GJK = tuple(k for k in CONVEX_KINDS if k != KIND_PLANE_MESH and k not in HFIELD_KINDS)
DETECT_GROUPS = (DETECT_PLANE_MESH, DETECT_HFIELD, DETECT_GJK)
#: the groups whose search takes a row of the convex scratch (the wide schedule launches them a
#: thread per row, which searches the row's pairs in turn)
DETECT_ROWS = (DETECT_HFIELD, DETECT_GJK)
assert sorted(k for g in DETECT_GROUPS for k in g) == list(DETECT_KINDS)
assert all(list(g) == list(range(g[0], g[0] + len(g))) for g in DETECT_GROUPS)


#: kinds launched together in the wide schedule: the pairs of geom1's type, plane or sphere
#: (consecutive kinds: a launch tests an entry's kind against a range); the colliders whose kernels
#: need many registers (capsule-capsule, capsule-box, box-box) alone
GROUPS = tuple(tuple(PAIR_KIND[p] for p in PRIMITIVE_MAX_CONTACTS if p[0] == t)
               for t in (GeomType.PLANE, GeomType.SPHERE)) \
    + tuple((PAIR_KIND[p],) for p in PRIMITIVE_MAX_CONTACTS if p[0] not in (GeomType.PLANE, GeomType.SPHERE)) \
    + DETECT_GROUPS
assert sorted(k for g in GROUPS for k in g) == sorted(PAIR_KIND.values())
assert all(list(g) == list(range(g[0], g[0] + len(g))) for g in GROUPS)


@functools.cache
def dispatch(scalar, kinds: tuple):
    """f(m, d, w, i): the collision of entry i of the kept pairs, whose kind is one of `kinds` (a
    static if-chain)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    funcs = pair_functions(scalar)
    # a run of kinds that share one function (the height fields' rebuild, the convex pairs' of one
    # slot count) is one branch: each function is compiled into the kernel once
    n = 1
    while n < len(kinds) and funcs[kinds[n]] is funcs[kinds[0]]:
        n += 1
    if n == len(kinds):
        return funcs[kinds[0]]
    first, last, f_first, rest = kinds[0], kinds[n - 1], funcs[kinds[0]], dispatch(scalar, kinds[n:])
    one = n == 1

    # inlined into the loop over pairs
    @wp.func(inline=True)
    def collide(m: Model, d: Data, w: int, i: int):
        """The collision of entry i of the kept pairs, by the function of its pair's kind.

        Model: cpair_kind. Data in: collision_pair. Data: those of the pair's function (collide_pair,
        collision_convex's contacts)."""
        kind = m.cpair_kind[d.collision_pair[w, i]]
        hit = kind == first
        if wp.static(not one):
            hit = kind >= first and kind <= last
        if hit:
            f_first(m, d, w, i)
        else:
            rest(m, d, w, i)

    return collide


def build(scalar):
    """`pair(m, d, w, i)`: the collision of entry i of the kept pairs, dispatched on its kind (for
    the fused schedule, which visits every kept pair in one thread)."""
    return dispatch(scalar, tuple(sorted(COLLIDERS)))


@functools.cache
def detect(scalar, kinds: tuple = None):
    """`f(m, d, w, i)`: the convex collision's first pass (GJK/EPA) for entry i of the world's
    kept pairs (Data.collision_pair), whose kind is one of `kinds` (one of DETECT_GROUPS, for the
    wide schedule's launch of that group), or any kind (None: nothing for the primitive pairs; the
    fused schedule's)."""
    Model, Data = model_struct(scalar), data_struct(scalar)
    convex = collision_convex.build(scalar)
    if kinds is None:
        run, first, last = convex.detect, CONVEX_KINDS[0], CONVEX_KINDS[-1]
    else:
        # each kind of search compiled alone: a kernel's registers are those of its largest path
        run = {DETECT_PLANE_MESH: convex.detect_plane_mesh, DETECT_HFIELD: convex.detect_hfield,
               DETECT_GJK: convex.detect_gjk}[kinds]
        first, last = kinds[0], kinds[-1]

    @wp.func
    def detect_pair(m: Model, d: Data, w: int, i: int):
        """The convex detection of entry i of world w's kept pairs (Data.collision_pair), when its
        kind is one of this launch's, in its row of the convex scratch: the c-th kept pair that
        searches by GJK/EPA (c = Data.collision_ccd) takes the world's row c mod Model.nccdmax
        (contact_tables.CCD_ROWS), after the pairs before it on that row (the wide schedule runs
        a row's pairs in one thread, in order: `ccd_rows` kernels).

        Model: cpair_kind, nccdmax. Data in: collision_pair, collision_adr, collision_nslot, collision_ccd. Data: those
        of collision_convex's detection (geom_xpos, geom_xmat in; the pair's ccd_contact entries and scratch rows
        out)."""
        p = d.collision_pair[w, i]
        kind = m.cpair_kind[p]
        if kind >= first and kind <= last:
            ccd = d.collision_ccd[w, i]
            row = int(-1)  # plane-mesh: no search, no scratch
            if ccd >= 0:
                row = w * m.nccdmax + ccd % m.nccdmax
            run(m, d, w, p, row, d.collision_adr[w, i], d.collision_nslot[w, i])

    return detect_pair
