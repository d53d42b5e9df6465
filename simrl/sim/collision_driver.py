"""Candidate geom pairs, fixed when the model is loaded (MuJoCo's broad-phase filters).

Follows engine_collision_driver.c: `filterBodyPair` (same weld body, both dof-less,
parent-child unless mjDSBL_FILTERPARENT), `filterBitmask` (contype/conaffinity), `<exclude>`
body pairs, and explicit `<pair>` elements, which replace the default pair of the same geoms.
The narrow phase (contacts) is not implemented yet: `Model` uses these pairs to refuse models
in which contacts could occur, unless contacts are disabled.
"""

from __future__ import annotations

import mujoco
import numpy as np


def _weld_parent(mjm: mujoco.MjModel, weld: int) -> int:
    return int(mjm.body_weldid[mjm.body_parentid[weld]])


def filter_body_pair(mjm: mujoco.MjModel, b1: int, b2: int) -> bool:
    """True when MuJoCo discards every contact between bodies b1 and b2 (filterBodyPair)."""
    w1, w2 = int(mjm.body_weldid[b1]), int(mjm.body_weldid[b2])
    if w1 == w2:
        return True
    if mjm.body_dofnum[w1] == 0 and mjm.body_dofnum[w2] == 0:
        return True
    filterparent = not (mjm.opt.disableflags & mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
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
