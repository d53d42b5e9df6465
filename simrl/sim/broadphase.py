"""The broadphase (mj_collision's filters, engine_collision_driver.c): which candidate pairs the
narrow phase collides in this evaluation, compacted in pair order into a per-world list.

Element: a world. The candidate pairs (simrl.sim.contact_tables, fixed at load) are visited in
pair order as runs (Model.bp_run): the pairs of one world geom that the tables call far-testable
(terrain: a geom of the world body and the moving geoms of its primitive pairs), and runs of
other pairs; consecutive far-testable runs in groups of up to eight (Model.bp_group), each with a
sphere around its world geoms (which never move). A group, then a run, whose sphere (a run's: its
geom's bounding sphere, and its box) is farther than its pairs' margins from one sphere around
all the moving geoms is left out whole, at the cost of one test (on terrain most of a world's
1,700 pairs). A pair of another run, or of a run that is near, is kept unless its bounding
spheres are farther apart than the margin (mj_filterSphere), the other geom's bounding sphere is
farther than the margin from a box (a test MuJoCo lacks, conservative), or, with a height field,
no prism that mjc_ConvexHField would search under the other geom's bounding sphere reaches
within the margin of it (the collider's own range and prism test, made on the sphere: those
prisms, at most the pair's slots, are the slots a kept height field pair takes). The narrow
phase would find no contact within the margin for any pair left out: the contacts are MuJoCo's
(tests/test_contact_sets.py).

The kept pairs are written in pair order to Data.collision_pair (their count Data.ncollision),
each with its first contact slot (Data.collision_adr): a pair takes as many consecutive slots of
its world as its collider can make contacts (Model.cpair_nslot; a height field pair as many as
it has prisms that can touch: Data.collision_nslot), the slots of the pairs before
it first, out of `nconmax` (Model.nconmax, contact_tables.contact_budgets); Data.contact_pair
says which pair holds each slot. Prefix sums, no atomics: the same list and the same slots every
run. Those that search by GJK/EPA are numbered in the same order (Data.collision_ccd: they take
the convex scratch's rows in turn). A world whose kept pairs' slots outgrow the budget keeps the
pairs whose slots fit, the first in pair order, and is flagged (Data.overflow,
OVERFLOW_CONTACTS, with the slots it needed in overflow_need[:, 1]; the pairs it kept in [:, 0]).
The slots the last evaluation's pairs held are emptied first (inactive, no pair), so that every
slot that no kept pair holds is free.

One thread per world (the fused schedule), or the world's block of threads (the wide schedule):
the groups split into contiguous shares, each lane counting its share's kept pairs, then writing
them from the counts of the lanes before it (Data.bp_lane_count), barriers between.

Not differentiated: it decides which pairs are collided (integers); the narrow phase's contacts
are differentiable functions of the poses (simrl.sim.grad launches this off the tape).
"""

import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.contact_tables import HFIELD_KINDS
from simrl.sim.data import MAX_LANES, OVERFLOW_CONTACTS, data_struct, record_overflow
from simrl.sim.model import model_struct
from simrl.sim.types import GeomType, block_sync, scalar_types

KIND_HFIELD0, KIND_HFIELD1 = HFIELD_KINDS[0], HFIELD_KINDS[-1]


@functools.cache
def build(scalar, lanes: bool) -> SimpleNamespace:
    """`broadphase(m, d, w, lane, nlanes)`: the world function (one thread, or a block of threads
    with `lanes`); and the tests it is made of."""
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    vec3 = T.vec3
    overflow = record_overflow(scalar)
    # 0.1% and 0.1 mm of slack on every test that leaves a pair out: far beyond the rounding of
    # the colliders' own distances (float32 here, float64 in the convex colliders)
    rel, ab = scalar(1.001), scalar(1e-4)

    @wp.func
    def sphere_far_from_box(m: Model, d: Data, w: int, box: int, centre: vec3, radius: scalar, margin: scalar):
        """A sphere (a geom's bounding sphere) farther than margin from a box: the distance from
        its centre to the box, in the box's frame, beyond radius + margin, with slack."""
        mat = d.geom_xmat[w, box]
        local = wp.transpose(mat) * (centre - d.geom_xpos[w, box])
        size = m.geom_size[box]
        out = vec3(wp.max(wp.abs(local[0]) - size[0], scalar(0.0)), wp.max(wp.abs(local[1]) - size[1], scalar(0.0)),
                   wp.max(wp.abs(local[2]) - size[2], scalar(0.0)))
        return wp.length(out) > (radius + margin) * rel + ab

    @wp.func
    def far_apart(m: Model, d: Data, w: int, g1: int, g2: int, margin: scalar):
        """mj_filterSphere: bounding spheres (or plane and sphere) farther apart than margin; and,
        a pair with a box, the other geom's bounding sphere farther than margin from the box (a
        tighter test than the box's sphere, which on terrain overlaps many robot geoms that are
        nowhere near the box: no contact within the margin is possible either way)."""
        r1 = m.geom_rbound[g1]
        r2 = m.geom_rbound[g2]
        p1 = d.geom_xpos[w, g1]
        p2 = d.geom_xpos[w, g2]
        if r1 > scalar(0.0) and r2 > scalar(0.0):
            far = wp.length(p1 - p2) > r1 + r2 + margin
            if not far and m.geom_type[g2] == GeomType.BOX:
                far = sphere_far_from_box(m, d, w, g2, p1, r1, margin)
            if not far and m.geom_type[g1] == GeomType.BOX:
                far = sphere_far_from_box(m, d, w, g1, p2, r2, margin)
            return far
        if m.geom_type[g1] == GeomType.PLANE and r2 > scalar(0.0):
            mat = d.geom_xmat[w, g1]
            normal = vec3(mat[0, 2], mat[1, 2], mat[2, 2])
            return wp.dot(p2 - p1, normal) > margin + r2
        return False

    @wp.func
    def hfield_prisms(m: Model, d: Data, w: int, hf: int, g: int, margin: scalar):
        """The prisms of height field hf that mjc_ConvexHField could find a contact in with geom
        g, counted on g's bounding sphere grown by the margin (and by slack): the cells of the
        collider's own range (collision_convex.hfield_pair's formula on the sphere's extents,
        which hold the geom's support extents), two prisms each, but for cells whose four corners
        all lie more than the margin below the sphere's lowest point (the collider skips each
        prism whose top does). The collider makes at most one contact per prism it does not skip:
        at most this many, 0 when the geom is outside the field's box or above every elevation
        under it."""
        mat = d.geom_xmat[w, hf]
        local = wp.transpose(mat) * (d.geom_xpos[w, g] - d.geom_xpos[w, hf])
        r = (m.geom_rbound[g] + margin) * rel + ab
        info = m.hfield_info[m.geom_dataid[hf]]
        sx = scalar(info.size[0])
        sy = scalar(info.size[1])
        sz = scalar(info.size[2])
        ncol = info.ncol
        nrow = info.nrow
        count = int(0)
        if local[0] - r <= sx and local[0] + r >= -sx and local[1] - r <= sy and local[1] + r >= -sy:
            cmin = wp.max(0, int(wp.floor((local[0] - r + sx) / (scalar(2.0) * sx) * scalar(ncol - 1))))
            cmax = wp.min(ncol - 1, int(wp.ceil((local[0] + r + sx) / (scalar(2.0) * sx) * scalar(ncol - 1))))
            rmin = wp.max(0, int(wp.floor((local[1] - r + sy) / (scalar(2.0) * sy) * scalar(nrow - 1))))
            rmax = wp.min(nrow - 1, int(wp.ceil((local[1] + r + sy) / (scalar(2.0) * sy) * scalar(nrow - 1))))
            low = local[2] - r
            row = rmin
            while row < rmax:
                a = info.adr + row * ncol
                c = cmin + 1
                while c <= cmax:
                    top = wp.max(wp.max(m.hfield_data[a + c - 1], m.hfield_data[a + c]),
                                 wp.max(m.hfield_data[a + ncol + c - 1], m.hfield_data[a + ncol + c]))
                    if scalar(top) * sz * rel + ab >= low:
                        count = count + 2
                    c = c + 1
                row = row + 1
        return count

    @wp.func
    def pair_slots(m: Model, d: Data, w: int, p: int):
        """The contact slots candidate pair p takes in this evaluation: 0 when it cannot have a
        contact within its margin (margin + gap), else its collider's most contacts
        (Model.cpair_nslot), for a height field pair at most its prisms that can touch
        (`hfield_prisms`)."""
        g = m.cpair_geom[p]
        margin = m.cpair_margin[p] + m.cpair_gap[p]
        n = int(0)
        if not far_apart(m, d, w, g[0], g[1], margin):
            n = m.cpair_nslot[p]
            kind = m.cpair_kind[p]
            if kind >= KIND_HFIELD0 and kind <= KIND_HFIELD1:
                n = wp.min(n, hfield_prisms(m, d, w, g[0], g[1], margin))
        return n

    @wp.func
    def moving_sphere(m: Model, d: Data, w: int):
        """(centre, radius): a sphere around the bounding spheres of the moving geoms of the
        far-testable pairs (Model.far_moving): the centre of the box around their centres."""
        centre = vec3()
        radius = scalar(0.0)
        if m.nfar_moving > 0:
            lo = d.geom_xpos[w, m.far_moving[0]]
            hi = lo
            k = int(1)
            while k < m.nfar_moving:
                x = d.geom_xpos[w, m.far_moving[k]]
                lo = wp.min(lo, x)
                hi = wp.max(hi, x)
                k = k + 1
            centre = (lo + hi) * scalar(0.5)
            k = int(0)
            while k < m.nfar_moving:
                g = m.far_moving[k]
                radius = wp.max(radius, wp.length(d.geom_xpos[w, g] - centre) + m.geom_rbound[g])
                k = k + 1
        return centre, radius

    @wp.func
    def run_far(m: Model, d: Data, w: int, far: int, centre: vec3, radius: scalar):
        """Run of far-testable geom `far` (Model.far_geom; -1: not such a run) out of reach of
        every moving geom: each of its pairs' tests would reject it (the sphere around the moving
        geoms encloses each one's bounding sphere: far from it, far from each)."""
        out = False
        if far >= 0:
            record = m.far_geom[far]
            t = record.geom
            reach = radius + m.geom_rbound[t] + record.margin
            out = wp.length(d.geom_xpos[w, t] - centre) > reach * rel + ab
            # a box (a terrain's step, a slab): the sphere against the box itself
            if not out and m.geom_type[t] == GeomType.BOX:
                out = sphere_far_from_box(m, d, w, t, centre, radius, record.margin)
        return out

    @wp.func
    def group_far(m: Model, d: Data, w: int, k: int, centre: vec3, radius: scalar):
        """Group k of runs (Model.bp_group) out of reach of every moving geom: its sphere, around
        its world geoms' bounding spheres grown by their margins, is farther than the moving
        geoms' sphere (a group of a run that is not far-testable is never far)."""
        r = m.bp_group_radius[k]
        out = False
        if r >= scalar(0.0):
            out = wp.length(m.bp_group_centre[k] - centre) > (radius + r) * rel + ab
        return out

    @wp.func
    def clear_old(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """Free the contact slots of the pairs the last evaluation kept (every nlanes-th entry
        of the list from `lane`): after the narrow phase, a slot no kept pair holds is free
        (no pair, no contact)."""
        i = lane
        n = d.ncollision[w]
        while i < n:
            s = d.collision_adr[w, i]
            end = s + d.collision_nslot[w, i]
            while s < end:
                d.contact_active[w, s] = 0
                d.contact_pair[w, s] = -1
                s = s + 1
            i = i + nlanes

    @wp.func
    def list_end(d: Data, w: int):
        """The slot after those of the world's listed pairs (0: none listed)."""
        n = d.ncollision[w]
        end = int(0)
        if n > 0:
            end = d.collision_adr[w, n - 1] + d.collision_nslot[w, n - 1]
        return end

    @wp.func
    def count_runs(m: Model, d: Data, w: int, lo: int, hi: int, centre: vec3, radius: scalar):
        """(kept pairs, of them searched by GJK/EPA, their slots) in the runs of groups lo .. hi
        - 1; each tested run's kept pairs into Data.bp_run_kept, -1 in the first run of a group
        left out whole (for `write_runs`, which then tests only the runs that keep some)."""
        n = int(0)
        nccd = int(0)
        nslot = int(0)
        gk = lo
        while gk < hi:
            group = m.bp_group[gk]
            k = group[0]
            last = k + group[1]
            if group_far(m, d, w, gk, centre, radius):
                d.bp_run_kept[w, k] = -1  # the whole group: none kept, its runs not tested
                k = last
            while k < last:
                run = m.bp_run[k]
                kept = int(0)
                if not run_far(m, d, w, run[2], centre, radius):
                    p = run[0]
                    end = p + run[1]
                    while p < end:
                        take = pair_slots(m, d, w, p)
                        if take > 0:
                            kept = kept + 1
                            nslot = nslot + take
                            if m.cpair_ccd[p] >= 0:
                                nccd = nccd + 1
                        p = p + 1
                d.bp_run_kept[w, k] = kept
                n = n + kept
                k = k + 1
            gk = gk + 1
        return n, nccd, nslot

    def make_write_runs(counted: bool):
        """`write_runs`; `counted`: the runs' kept pairs were counted first (count_runs: a run
        that keeps none is not tested again)."""
        @wp.func
        def write_runs(m: Model, d: Data, w: int, lo: int, hi: int, centre: vec3, radius: scalar, n0: int,
                       nccd0: int, slot0: int):
            """The kept pairs of the runs of groups lo .. hi - 1 into the list from entry n0 (the
            searches numbered from nccd0), with their slots from slot0, those whose slots fit the
            budget (Model.nconmax); the pair whose slots are the first not to fit sets the list's
            length (Data.ncollision). Returns (the kept pairs' entries, slots) after them, fitting
            or not."""
            n = n0
            nccd = nccd0
            slot = slot0
            gk = lo
            while gk < hi:
                group = m.bp_group[gk]
                k = group[0]
                last = k + group[1]
                if wp.static(counted):
                    if d.bp_run_kept[w, k] < 0:
                        k = last
                else:
                    if group_far(m, d, w, gk, centre, radius):
                        k = last
                while k < last:
                    run = m.bp_run[k]
                    near = False
                    if wp.static(counted):
                        near = d.bp_run_kept[w, k] > 0
                    else:
                        near = not run_far(m, d, w, run[2], centre, radius)
                    if near:
                        p = run[0]
                        end = p + run[1]
                        while p < end:
                            take = pair_slots(m, d, w, p)
                            if take > 0:
                                ccd = int(-1)
                                if m.cpair_ccd[p] >= 0:
                                    ccd = nccd
                                    nccd = nccd + 1
                                after = slot + take
                                if after <= m.nconmax:
                                    d.collision_pair[w, n] = p
                                    d.collision_adr[w, n] = slot
                                    d.collision_nslot[w, n] = take
                                    d.collision_ccd[w, n] = ccd
                                    s = slot
                                    while s < after:
                                        d.contact_pair[w, s] = p
                                        s = s + 1
                                elif slot <= m.nconmax:
                                    d.ncollision[w] = n  # the first pair cut: the list ends before it
                                n = n + 1
                                slot = after
                            p = p + 1
                    k = k + 1
                gk = gk + 1
            return n, slot

        return write_runs

    @wp.func
    def finish(m: Model, d: Data, w: int, n: int, need: int):
        """The list's length when every kept pair fits (else the first pair cut set it), the
        pairs kept, the slots the world needed, the slots' overflow bit."""
        if need <= m.nconmax:
            d.ncollision[w] = n
        d.overflow_need[w, 0] = n
        overflow(d, w, OVERFLOW_CONTACTS, 1, need, m.nconmax)

    if not lanes:
        write_runs = make_write_runs(False)

        @wp.func
        def broadphase(m: Model, d: Data, w: int, lane: int, nlanes: int):
            """The kept pairs of world w, in pair order (one thread).

            Model: bp_group, bp_group_centre, bp_group_radius, bp_run, cpair_ccd, cpair_gap, cpair_geom,
            cpair_kind, cpair_margin, cpair_nslot, far_geom, far_moving, geom_dataid, geom_rbound,
            geom_size, geom_type, hfield_data, hfield_info, nbp_group, nconmax, nfar_moving. Data in: geom_xpos,
            geom_xmat, collision_pair, collision_adr, collision_nslot, ncollision (the last evaluation's), overflow.
            Data out: contact_active, contact_pair (the slots of the last list's pairs and the new one's),
            collision_pair,
            collision_adr, collision_nslot, collision_ccd, ncollision, overflow, overflow_need."""
            # the slots the last list's pairs held: those the new list's pairs take get their pair
            # now and their flags from the narrow phase; the rest, after them, are freed here
            old_end = list_end(d, w)
            centre, radius = moving_sphere(m, d, w)
            n, need = write_runs(m, d, w, 0, m.nbp_group, centre, radius, 0, 0, 0)
            finish(m, d, w, n, need)
            s = list_end(d, w)
            while s < old_end:
                d.contact_active[w, s] = 0
                d.contact_pair[w, s] = -1
                s = s + 1

        return SimpleNamespace(broadphase=broadphase, pair_slots=pair_slots)

    write_counted = make_write_runs(True)

    @wp.func
    def lanes_before(d: Data, w: int, lane: int, column: int):
        """The counts of the lanes before `lane` (Data.bp_lane_count[w, column + k])."""
        n = int(0)
        k = int(0)
        while k < lane:
            n = n + d.bp_lane_count[w, column + k]
            k = k + 1
        return n

    @wp.func
    def broadphase_lanes(m: Model, d: Data, w: int, lane: int, nlanes: int):
        """`broadphase` by the world's block of nlanes threads: each lane counts the kept pairs
        of its share of the runs, then writes them after those of the lanes before it.

        Model, Data: those of the one-thread broadphase; the scratch bp_lane_count, bp_run_kept."""
        clear_old(m, d, w, lane, nlanes)
        centre, radius = moving_sphere(m, d, w)
        share = (m.nbp_group + nlanes - 1) // nlanes
        lo = wp.min(lane * share, m.nbp_group)
        hi = wp.min(lo + share, m.nbp_group)
        n, nccd, nslot = count_runs(m, d, w, lo, hi, centre, radius)
        d.bp_lane_count[w, lane] = n
        d.bp_lane_count[w, MAX_LANES + lane] = nccd
        d.bp_lane_count[w, 2 * MAX_LANES + lane] = nslot
        block_sync()  # every lane has emptied its old entries' slots and counted
        end, need = write_counted(m, d, w, lo, hi, centre, radius, lanes_before(d, w, lane, 0),
                                  lanes_before(d, w, lane, MAX_LANES), lanes_before(d, w, lane, 2 * MAX_LANES))
        if lane == nlanes - 1:
            finish(m, d, w, end, need)
        block_sync()

    return SimpleNamespace(broadphase=broadphase_lanes, pair_slots=pair_slots)
