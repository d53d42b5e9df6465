"""Candidate geom pairs and their contact tables, fixed when the model is loaded (host side).

Follows engine_collision_driver.c: `filterBodyPair` (same weld body, both dof-less,
parent-child unless mjDSBL_FILTERPARENT), `filterBitmask` (contype/conaffinity), `<exclude>`
body pairs, and explicit `<pair>` elements, which replace the default pair of the same geoms.
Every candidate pair has a number of contact slots (as many contacts as its two shapes can
produce, mj_maxContact); each evaluation the broadphase (simrl.sim.broadphase) gives the pairs
it keeps that many of their world's slots, within the slot budget (`contact_budgets`, nconmax),
and the collision stage (simrl.sim.collision_driver) fills them and flags which are detected.
Constraint rows are not owned by slots: the constraint stage places those of the detected
contacts within the row budget (njmax; simrl.sim.constraint.efc_address). The model
(simrl.sim.io) copies these tables to the device.
"""

from dataclasses import dataclass

import mujoco
import numpy as np

from simrl.sim.types import ConeType, DisableBit, EnableBit, GeomType


def _weld_parent(mjm: mujoco.MjModel, weld: int) -> int:
    return int(mjm.body_weldid[mjm.body_parentid[weld]])


def filter_body_pair(mjm: mujoco.MjModel, b1: int, b2: int) -> bool:
    """True when MuJoCo discards every contact between bodies b1 and b2 (filterBodyPair)."""
    w1, w2 = int(mjm.body_weldid[b1]), int(mjm.body_weldid[b2])
    if w1 == w2:
        return True
    if mjm.body_dofnum[w1] == 0 and mjm.body_dofnum[w2] == 0:
        return True
    filterparent = not (mjm.opt.disableflags & DisableBit.FILTERPARENT)
    if filterparent and w1 != 0 and w2 != 0 and (w1 == _weld_parent(mjm, w2) or w2 == _weld_parent(mjm, w1)):
        return True
    return False


def candidate_geom_pairs(mjm: mujoco.MjModel) -> list[tuple[int, int, int]]:
    """All geom pairs that the collision stage must test, as (geom1, geom2, pair_id).

    pair_id is the index of the explicit `<pair>` element, or -1 for a pair found by the
    contype/conaffinity rules.
    """
    excluded = {int(s) for s in np.asarray(mjm.exclude_signature).ravel()}
    explicit = {}
    for p in range(mjm.npair):
        g1, g2 = int(mjm.pair_geom1[p]), int(mjm.pair_geom2[p])
        explicit[(min(g1, g2), max(g1, g2))] = (g1, g2, p)

    pairs = []
    for g1 in range(mjm.ngeom):
        for g2 in range(g1 + 1, mjm.ngeom):
            if (g1, g2) in explicit:
                continue
            if not ((mjm.geom_contype[g1] & mjm.geom_conaffinity[g2])
                    or (mjm.geom_contype[g2] & mjm.geom_conaffinity[g1])):
                continue
            b1, b2 = int(mjm.geom_bodyid[g1]), int(mjm.geom_bodyid[g2])
            if filter_body_pair(mjm, b1, b2):
                continue
            lo, hi = min(b1, b2), max(b1, b2)
            if (lo << 16) + hi in excluded:
                continue
            pairs.append((g1, g2, -1))
    pairs.extend(explicit.values())
    return pairs


# --------------------------------------------------------------------------------------------
# Static contact tables: every candidate pair's slots (contacts at most) and rows per contact

#: contacts of one geom pair at most (mjMAXCONPAIR): a height field's prisms stop there
MAXCONPAIR = 50
# pairs with a collider of their own (collision_primitive; plane-ellipsoid: mjc_PlaneConvex), in
# MuJoCo's type order (geom1 <= geom2), so that the pairs of one geom1 type have consecutive
# kinds (collision_driver.GROUPS launches them together)
PRIMITIVE_MAX_CONTACTS = {
    (GeomType.PLANE, GeomType.SPHERE): 1, (GeomType.PLANE, GeomType.CAPSULE): 2,
    (GeomType.PLANE, GeomType.ELLIPSOID): 1, (GeomType.PLANE, GeomType.CYLINDER): 4, (GeomType.PLANE, GeomType.BOX): 4,
    (GeomType.SPHERE, GeomType.SPHERE): 1, (GeomType.SPHERE, GeomType.CAPSULE): 1,
    (GeomType.SPHERE, GeomType.CYLINDER): 1, (GeomType.SPHERE, GeomType.BOX): 1,
    (GeomType.CAPSULE, GeomType.CAPSULE): 2, (GeomType.CAPSULE, GeomType.BOX): 4,
    (GeomType.BOX, GeomType.BOX): 8,
}
assert list(PRIMITIVE_MAX_CONTACTS) == sorted(PRIMITIVE_MAX_CONTACTS)
# pairs MuJoCo collides with its general convex collision (mjc_Convex: GJK and EPA,
# simrl.sim.collision_convex); meshes (their convex hulls) too. The pairs of two geoms with faces
# (box, mesh, cylinder) or a capsule and one of those get up to 4 contacts by MuJoCo 4.0's
# multiccd face clipping (FACE_CLIP, simrl.sim.collision_multiccd; 1 used when
# <flag multiccd="disable"/>). plane-mesh by MuJoCo 4.0's mjc_PlaneConvex: the deepest vertex and
# up to three more of the hull face most opposed to the plane's normal, found in the same
# detection pass
#
# height fields (mjc_ConvexHField): GJK/EPA on each prism of the cells under the geom's box grown
# by the margin, one contact per prism, up to MAXCONPAIR; each pair owns as many slots as it has
# prisms under it at most (hfield_slots); one contact per prism with multiccd on or off
CONVEX_MAX_CONTACTS = {
    (GeomType.PLANE, GeomType.MESH): 4,
    (GeomType.HFIELD, GeomType.SPHERE): MAXCONPAIR, (GeomType.HFIELD, GeomType.CAPSULE): MAXCONPAIR,
    (GeomType.HFIELD, GeomType.ELLIPSOID): MAXCONPAIR, (GeomType.HFIELD, GeomType.CYLINDER): MAXCONPAIR,
    (GeomType.HFIELD, GeomType.BOX): MAXCONPAIR, (GeomType.HFIELD, GeomType.MESH): MAXCONPAIR,
    (GeomType.SPHERE, GeomType.ELLIPSOID): 1, (GeomType.SPHERE, GeomType.MESH): 1,
    (GeomType.CAPSULE, GeomType.ELLIPSOID): 1, (GeomType.CAPSULE, GeomType.CYLINDER): 4,
    (GeomType.CAPSULE, GeomType.MESH): 4,
    (GeomType.ELLIPSOID, GeomType.ELLIPSOID): 1, (GeomType.ELLIPSOID, GeomType.CYLINDER): 1,
    (GeomType.ELLIPSOID, GeomType.BOX): 1, (GeomType.ELLIPSOID, GeomType.MESH): 1,
    (GeomType.CYLINDER, GeomType.CYLINDER): 4, (GeomType.CYLINDER, GeomType.BOX): 4,
    (GeomType.CYLINDER, GeomType.MESH): 4,
    (GeomType.BOX, GeomType.MESH): 4,
    (GeomType.MESH, GeomType.MESH): 4,
}
#: the pairs whose multiccd clips faces (MuJoCo 4.0's `multicontact`): two geoms with faces (box,
#: mesh, cylinder: its caps) or a capsule's side and a face; the convex pairs with more than one
#: slot that are not height fields or plane-mesh
FACE_CLIP = ((GeomType.CAPSULE, GeomType.CYLINDER), (GeomType.CAPSULE, GeomType.MESH),
             (GeomType.CYLINDER, GeomType.CYLINDER), (GeomType.CYLINDER, GeomType.BOX),
             (GeomType.CYLINDER, GeomType.MESH), (GeomType.BOX, GeomType.MESH), (GeomType.MESH, GeomType.MESH))
#: a cylinder's cap as a polygon of MuJoCo 4.0's multicontact (collision_multiccd.CYLINDER_POLYGON)
CYLINDER_POLYGON = 16
#: contacts of a face-clipping pair (mjc_Convex's maxContacts)
MAX_CLIP_CONTACTS = 4
assert set(FACE_CLIP) == {p for p, n in CONVEX_MAX_CONTACTS.items()
                          if n == MAX_CLIP_CONTACTS and p[0] != GeomType.PLANE}
assert list(CONVEX_MAX_CONTACTS) == sorted(CONVEX_MAX_CONTACTS)
#: every implemented pair of geom types and its contact slots
MAX_CONTACTS = {**PRIMITIVE_MAX_CONTACTS, **CONVEX_MAX_CONTACTS}
# index of each supported type pair, used to dispatch in the collision kernel: the primitive
# pairs, then the convex ones (consecutive: one launch detects them all)
PAIR_KIND = {pair: i for i, pair in enumerate(MAX_CONTACTS)}
CONVEX_KINDS = tuple(PAIR_KIND[pair] for pair in CONVEX_MAX_CONTACTS)
#: plane-mesh: found by the detection pass without GJK (no scratch rows); the others search by GJK
KIND_PLANE_MESH = PAIR_KIND[(GeomType.PLANE, GeomType.MESH)]
GJK_KINDS = tuple(k for k in CONVEX_KINDS if k != KIND_PLANE_MESH)
#: the kinds with multiccd's face clipping
FACE_CLIP_KINDS = tuple(PAIR_KIND[pair] for pair in FACE_CLIP)
#: those that clip a cylinder's cap (a 16-gon: the scratch rows' polygons are at least that long)
CYLINDER_CLIP_KINDS = tuple(PAIR_KIND[pair] for pair in FACE_CLIP if GeomType.CYLINDER in pair)
#: the height-field kinds (consecutive)
HFIELD_KINDS = tuple(PAIR_KIND[pair] for pair in CONVEX_MAX_CONTACTS if pair[0] == GeomType.HFIELD)
assert list(HFIELD_KINDS) == list(range(HFIELD_KINDS[0], HFIELD_KINDS[-1] + 1))


def clip_sizes(mjm: mujoco.MjModel, cylinder: bool = False) -> tuple[int, int]:
    """(P, D): the largest hull polygon (vertices) and vertex degree (polygons through a vertex)
    of the model's meshes, at least a box's (four corners a face, three faces a corner) and, when
    a cylinder's caps are clipped, its 16-gon, as mjc_ccdSize sizes multiccd's buffer from
    npolygonmax and nmeshdegmax."""
    P = max([CYLINDER_POLYGON if cylinder else 4, int(mjm.npolygonmax)]
            + [int(n) for n in np.asarray(mjm.mesh_polyvertnum).ravel()[:mjm.nmeshpoly]])
    D = max([3, int(mjm.nmeshdegmax)] + [int(n) for n in np.asarray(mjm.mesh_polymapnum).ravel()[:mjm.nmeshvert]])
    return P, D


def clip_scratch_widths(P: int, D: int) -> dict:
    """Columns of the scratch row of a face-clipping pair (simrl.sim.collision_multiccd's layout):
    ccd_clip (vec3): two polygon buffers of 2 P points, the P side-plane normals, face 1, face 2,
    then the contacts' witness points (x1, x2 per contact); ccd_clipd: the P side-plane offsets,
    then the contacts' distances; ccd_cliptag: the feature of each point of the two polygon
    buffers, then each contact's vertex bits; ccd_norm (vec3): face normals of geom 1, of geom 2,
    edge end points, edge directions (D each); ccd_normidx: the face index of each normal of
    geom 1 and geom 2 (D each)."""
    return {"ccd_clip": 7 * P + 2 * MAX_CLIP_CONTACTS, "ccd_clipd": P + MAX_CLIP_CONTACTS,
            "ccd_cliptag": 4 * P + MAX_CLIP_CONTACTS, "ccd_norm": 4 * D, "ccd_normidx": 2 * D}


def hfield_slots(mjm: mujoco.MjModel, hfield_geom: int, geom: int, margin: float = 0.0) -> int:
    """The contacts a geom can have with a height field: one per prism of the sub-grid under its
    bounding sphere grown by the pair's `margin` (margin + gap; mjc_ConvexHField spans cells
    floor(xmin - margin) to ceil(xmax + margin), two prisms each), at most MAXCONPAIR."""
    h = int(mjm.geom_dataid[hfield_geom])
    nrow, ncol = int(mjm.hfield_nrow[h]), int(mjm.hfield_ncol[h])
    dx = 2 * mjm.hfield_size[h][0] / (ncol - 1)
    dy = 2 * mjm.hfield_size[h][1] / (nrow - 1)
    extent = 2 * (float(mjm.geom_rbound[geom]) + margin)
    ncells_x = min(ncol - 1, int(np.floor(extent / dx)) + 2)
    ncells_y = min(nrow - 1, int(np.floor(extent / dy)) + 2)
    return min(MAXCONPAIR, 2 * ncells_x * ncells_y)

def polytope_sizes(iterations: int) -> tuple[int, int]:
    """(vertices, faces) of the EPA polytope of a convex pair for `opt.ccd_iterations`, as
    mjc_ccdSize sizes MuJoCo's buffer (simrl.sim.collision_gjk)."""
    return 5 + iterations, 6 * iterations


MINMU = 1e-5  # mjMINMU: smallest friction coefficient


def _override(mjm) -> bool:
    return bool(mjm.opt.enableflags & EnableBit.OVERRIDE)


def friction_geoms(mjm: mujoco.MjModel, g1: int, g2: int, ipair: int) -> tuple[int, int]:
    """The geoms whose friction gives the pair's (`contact_parameters`): both (their maximum),
    the one of higher priority (and -1), or (-1, -1) when it is the <pair>'s or the override's."""
    if ipair >= 0 or _override(mjm):
        return -1, -1
    p1, p2 = mjm.geom_priority[g1], mjm.geom_priority[g2]
    if p1 != p2:
        return (g1 if p1 > p2 else g2), -1
    return g1, g2


def contact_parameters(mjm: mujoco.MjModel, g1: int, g2: int, ipair: int):
    """condim, solref(2), solreffriction(2), solimp(5), friction(5), margin, gap of a geom pair,
    combined as mj_contactParam / getMargin / getGap / mj_assign* (engine_collision_driver.c,
    engine_core_constraint.c) do. Explicit <pair> elements carry their own values;
    solreffriction (the elliptic cone's friction rows) is (0, 0), meaning solref, except for
    a <pair> that sets it."""
    solreffriction = np.zeros(2)
    if ipair >= 0:
        condim = int(mjm.pair_dim[ipair])
        if np.any(mjm.pair_solreffriction[ipair] != 0):
            solreffriction = np.array(mjm.pair_solreffriction[ipair], dtype=np.float64)
        solref = np.array(mjm.pair_solref[ipair], dtype=np.float64)
        solimp = np.array(mjm.pair_solimp[ipair], dtype=np.float64)
        friction = np.array(mjm.pair_friction[ipair], dtype=np.float64)
        margin, gap = float(mjm.pair_margin[ipair]), float(mjm.pair_gap[ipair])
    else:
        p1, p2 = mjm.geom_priority[g1], mjm.geom_priority[g2]
        if p1 != p2:
            g = g1 if p1 > p2 else g2
            condim = int(mjm.geom_condim[g])
            solref = np.array(mjm.geom_solref[g], dtype=np.float64)
            solimp = np.array(mjm.geom_solimp[g], dtype=np.float64)
            fri = np.array(mjm.geom_friction[g], dtype=np.float64)
        else:
            condim = int(max(mjm.geom_condim[g1], mjm.geom_condim[g2]))
            s1, s2 = mjm.geom_solmix[g1], mjm.geom_solmix[g2]
            if s1 >= 1e-15 and s2 >= 1e-15:
                mix = s1 / (s1 + s2)
            elif s1 < 1e-15 and s2 < 1e-15:
                mix = 0.5
            else:
                mix = 0.0 if s1 < 1e-15 else 1.0
            r1, r2 = mjm.geom_solref[g1], mjm.geom_solref[g2]
            if r1[0] > 0 and r2[0] > 0:
                solref = mix * r1 + (1 - mix) * r2
            else:
                solref = np.minimum(r1, r2)
            solimp = mix * mjm.geom_solimp[g1] + (1 - mix) * mjm.geom_solimp[g2]
            fri = np.maximum(mjm.geom_friction[g1], mjm.geom_friction[g2])
        friction = np.array([fri[0], fri[0], fri[1], fri[2], fri[2]], dtype=np.float64)
        margin = float(mjm.geom_margin[g1] + mjm.geom_margin[g2])
        gap = float(mjm.geom_gap[g1] + mjm.geom_gap[g2])
    if _override(mjm):
        margin = float(mjm.opt.o_margin)
        solref = np.array(mjm.opt.o_solref, dtype=np.float64)
        solreffriction = solref.copy()  # mj_assignRef overrides both
        solimp = np.array(mjm.opt.o_solimp, dtype=np.float64)
        friction = np.array(mjm.opt.o_friction, dtype=np.float64)
    friction = np.maximum(MINMU, friction)
    return (condim, np.asarray(solref, np.float64), solreffriction, np.asarray(solimp, np.float64), friction,
            margin, gap)


def contact_rows(condim: int, elliptic: bool = False) -> int:
    """Constraint rows of one contact: 1 for condim 1; else condim in the elliptic cone (normal,
    then the friction directions), 2 (condim - 1) edges in the pyramidal cone."""
    if condim == 1:
        return 1
    return condim if elliptic else 2 * (condim - 1)


def contact_tables(mjm: mujoco.MjModel | None) -> dict:
    """Per candidate pair, everything the collision and constraint stages need that does not
    change while simulating (empty tables for None: contacts disabled): its geoms, collider kind,
    slots (`nslot`: the contacts its collider can make at once; a pair the broadphase keeps takes
    that many of its world's slots), contact parameters and rows per contact; `nslot_total` and
    `nrow`, every pair's slots and their rows."""
    pairs = candidate_geom_pairs(mjm) if mjm is not None else []
    elliptic = mjm is not None and mjm.opt.cone == ConeType.ELLIPTIC
    t = {name: [] for name in ("geom", "kind", "nslot", "ccd", "condim", "rows", "solref",
                               "solreffriction", "solimp", "friction", "friction_geoms", "margin", "gap")}
    nslot_total = nrow = 0
    for g1, g2, ipair in pairs:
        if mjm.geom_type[g1] > mjm.geom_type[g2]:
            g1, g2 = g2, g1
        types = (int(mjm.geom_type[g1]), int(mjm.geom_type[g2]))
        if types not in MAX_CONTACTS:
            continue  # refused by model checks; kept out of the tables
        condim, solref, solreffriction, solimp, friction, margin, gap = contact_parameters(mjm, g1, g2, ipair)
        nslot = (MAX_CONTACTS[types] if types[0] != GeomType.HFIELD
                 else hfield_slots(mjm, g1, g2, margin + gap))
        t["geom"].append((g1, g2))
        t["kind"].append(PAIR_KIND[types])
        t["nslot"].append(nslot)
        # the pair's index among those that search by GJK/EPA (-1: another kind)
        t["ccd"].append(sum(1 for k in t["kind"][:-1] if k in GJK_KINDS) if PAIR_KIND[types] in GJK_KINDS
                        else -1)
        t["condim"].append(condim)
        t["rows"].append(contact_rows(condim, elliptic))
        t["solref"].append(solref)
        t["solreffriction"].append(solreffriction)
        t["solimp"].append(solimp)
        t["friction"].append(friction)
        t["friction_geoms"].append(friction_geoms(mjm, g1, g2, ipair))
        t["margin"].append(margin)
        t["gap"].append(gap)
        nrow += nslot * t["rows"][-1]
        nslot_total += nslot
    t["nslot_total"] = nslot_total
    t["nrow"] = nrow
    t["elliptic"] = elliptic
    return t


# --------------------------------------------------------------------------------------------
# Budgets: what one world's contacts may hold

#: contacts per moving geom that the default row budget is sized for (a box resting on a box has
#: 4, a foot on terrain 1 to 4), and the least default
CONTACTS_PER_GEOM = 4
MIN_CONTACTS = 16
#: contact slots per moving geom in the default slot budget (nconmax), and the least default: a
#: kept pair takes as many slots as its collider can make contacts (a box on a box 8, a sphere on
#: a box 1, a height field pair its prisms that can touch), more than it finds; the quadruped on
#: terrain (170 slots) needs at most 144 in 64 random poses (tests/test_contact_sets.py)
SLOTS_PER_GEOM = 10
MIN_SLOTS = 64
#: rows of the convex search's scratch (the GJK simplex, the EPA polytope: 22 KiB each at
#: MuJoCo's 35 ccd_iterations) per world at most: a world's kept pairs that search by GJK/EPA take
#: the rows in turn (the c-th kept such pair row c mod CCD_ROWS, searched after the pairs before
#: it on that row), so the scratch is bounded whatever a world keeps, and the wide schedule runs
#: up to CCD_ROWS searches of a world at once (the quadruped on terrain keeps at most 8 such
#: pairs, and mostly 1 or 2: docs/BENCHMARKS.md)
CCD_ROWS = 4


@dataclass(frozen=True)
class Budgets:
    """Per-world budgets of one model: `nconmax` contact slots (MuJoCo Warp's name for its
    contacts per world; here the places of the contacts of the pairs the broadphase keeps, each
    kept pair taking as many as its collider can make), `njmax` constraint rows (the rows before
    the contacts', `nefc_fixed`, included: MuJoCo Warp's meaning), what the model's candidate
    pairs could need at most (`npair`, `nslot`, `contact_rows_max`), the defaults and their
    rule."""

    njmax: int
    njmax_default: int
    nefc_fixed: int
    contact_rows_max: int
    nconmax_rule: int  # contacts the default row budget is sized for
    nconmax: int = 0
    nconmax_default: int = 0
    npair: int = 0  # candidate pairs
    nslot: int = 0  # their slots: the contacts they could make at once

    def describe(self) -> str:
        pairs = (f"nconmax {self.nconmax:,} contact slots per world for the pairs the broadphase keeps (the "
                 f"model's {self.npair:,} candidate pairs have {self.nslot:,}); ") if self.npair else ""
        return (f"{pairs}njmax {self.njmax:,} constraint rows per world ({self.nefc_fixed:,} fixed + room for "
                f"{self.njmax - self.nefc_fixed:,} contact rows; the model's pairs could need "
                f"{self.contact_rows_max:,})")


def moving_geoms(mjm: mujoco.MjModel, tables: dict) -> set[int]:
    """The geoms of moving bodies that some candidate pair holds."""
    return {g for pair in tables["geom"] for g in pair if mjm.body_weldid[mjm.geom_bodyid[g]] != 0}


def default_nconmax(mjm: mujoco.MjModel | None, tables: dict) -> int:
    """The contacts a world's default row budget holds: CONTACTS_PER_GEOM for every geom of a
    moving body that some candidate pair holds, at least MIN_CONTACTS, at most every slot."""
    if not tables["geom"]:
        return 0
    return min(tables["nslot_total"], max(MIN_CONTACTS, CONTACTS_PER_GEOM * len(moving_geoms(mjm, tables))))


def default_nslot(mjm: mujoco.MjModel | None, tables: dict) -> int:
    """The default slot budget (nconmax): SLOTS_PER_GEOM for every geom of a moving body that
    some candidate pair holds, at least MIN_SLOTS, at most every slot."""
    if not tables["geom"]:
        return 0
    return min(tables["nslot_total"], max(MIN_SLOTS, SLOTS_PER_GEOM * len(moving_geoms(mjm, tables))))


def _budget(name: str, value, least: int, meaning: str):
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{name} must be an integer ({meaning}), got {value!r}")
    if value < least:
        raise ValueError(f"{name}={value} is less than {least}: {meaning} cannot be fewer")
    return int(value)


def contact_budgets(mjm: mujoco.MjModel, tables: dict, nefc_fixed: int, njmax: int | None = None,
                    nconmax: int | None = None) -> Budgets:
    """The budgets of a world. `nconmax`: the contact slots of the pairs the broadphase keeps,
    when given (at least 1; more than every candidate pair's slots is cut to that), else the
    default: `default_nslot` (SLOTS_PER_GEOM per moving geom of a pair, at least MIN_SLOTS), at
    most every slot. `njmax`: the constraint rows, when given (at least the fixed rows;
    more than every slot's rows is cut to that), else the default: the fixed rows and the rows of
    `default_nconmax` contacts of the model's largest condim (at most every slot's rows)."""
    rows_max = tables["nrow"]
    per_contact = max(tables["rows"], default=0)
    rule = default_nconmax(mjm, tables)
    default = nefc_fixed + min(rows_max, rule * per_contact)
    if njmax is None:
        chosen = default
    else:
        if isinstance(njmax, bool) or not isinstance(njmax, (int, np.integer)):
            raise TypeError(f"njmax must be an integer (constraint rows per world), got {njmax!r}")
        if njmax < nefc_fixed:
            raise ValueError(f"njmax={njmax} is less than the model's {nefc_fixed} rows of equality constraints, "
                             f"friction loss and limits, which every world needs; set at least {nefc_fixed} "
                             f"(default {default})")
        chosen = min(int(njmax), nefc_fixed + rows_max)
    nslot = tables["nslot_total"]
    slots_default = default_nslot(mjm, tables)
    slots = slots_default if nconmax is None else min(nslot, _budget(
        "nconmax", nconmax, 1, "the contact slots of the pairs a world's broadphase keeps"))
    return Budgets(njmax=chosen, njmax_default=default, nefc_fixed=nefc_fixed, contact_rows_max=rows_max,
                   nconmax_rule=rule, nconmax=slots, nconmax_default=slots_default, npair=len(tables["geom"]),
                   nslot=nslot)
