#!/usr/bin/env python
"""Issue 52's last corpus mismatch (MuJoCo Warp's test_data/aloha_pot/scene.xml), reduced: at
step 7 the wrist mesh (geom 46) and the right finger mesh (geom 91) touch face on face, the
finger's polygon 62 clipped by the wrist's polygon 1 (15 points), and polygon_quad's walk meets
a tie between two degenerate quadrilaterals, (8, 8, 9, 11) and (8, 9, 9, 11), both of area
triangle(8, 9, 11): they differ by one ulp. simrl (and this script, MuJoCo's C operation order)
keeps (8, 8, 9, 11), contacts A, A, B, C; the MuJoCo 4.0.1 binary gives A, B, B, C.

    python tools/aloha_quad_tie.py [path/to/aloha_pot/scene.xml]

`intersect 1` (t = dP / (dP - dQ)) picks the binary's quad here, but the same rounding in
simrl's polygon_clip breaks the flat cylinder cap of tests/test_multiccd.py. Needs only mujoco
and numpy; the clipping is polygonClip/polygonQuad of engine_collision_gjk.c
with MuJoCo Warp 4.0.0's tolerances, as simrl.sim.collision_multiccd ports them.
"""

import sys
from pathlib import Path

import mujoco
import numpy as np


def world_face(mjm, md, g, poly):
    """meshFace: polygon poly of geom g's mesh in world coordinates, in reverse order."""
    mesh = mjm.geom_dataid[g]
    p = mjm.mesh_polyadr[mesh] + poly
    adr, nv = mjm.mesh_polyvertadr[p], mjm.mesh_polyvertnum[p]
    R, x = md.geom_xmat[g], md.geom_xpos[g]
    out = []
    for i in range(nv - 1, -1, -1):
        v = mjm.mesh_vert[mjm.mesh_vertadr[mesh] + mjm.mesh_polyvert[adr + i]].astype(np.float64)
        out.append(np.array([R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2] + x[r] for r in range(3)]))
    return out


def clip(face1, face2, n, intersect=0):
    """polygonClip's Sutherland-Hodgman pass and its pruning above the face (intersect 0: t from
    the plane's offset, as MuJoCo's C source and simrl; 1: t = dP / (dP - dQ))."""
    m = len(face1)
    pn = []
    for i in range(m):
        v1, v2 = face1[i], face1[(i + 1) % m]
        r = np.cross(v2 - v1, (v1 + n) - v1)
        pn.append(r / np.sqrt(r @ r))
    poly = list(face2)
    for e in range(m):
        out = []
        for i in range(len(poly)):
            P, Q = poly[i], poly[(i + 1) % len(poly)]
            dp, dq = (P - face1[e]) @ pn[e], (Q - face1[e]) @ pn[e]
            in1, in2 = dp > -1e-15, dq > -1e-15
            if in1 and in2:
                out.append(Q)
                continue
            if not in1 and not in2:
                continue
            t = (pn[e] @ face1[e] - pn[e] @ P) / (pn[e] @ (Q - P)) if intersect == 0 else dp / (dp - dq)
            if -3e-7 < t < 1 + 3e-7:
                out.append(P + (Q - P) * min(max(t, 0.0), 1.0))
            if in2:
                out.append(Q)
        poly = out
    return [p for p in poly if (p - face1[0]) @ n <= 0]


def area4(a, b, c, d):
    return 0.5 * np.linalg.norm(np.cross(a - c, b - d))


def quad(poly):
    """polygonQuad's walk."""
    N = len(poly)

    def nx(i):
        return (i + 1) % N

    b, c, d = 1, 2, 3
    res = (0, 1, 2, 3)
    m = area4(poly[0], poly[1], poly[2], poly[3])
    for a in range(N):
        while (mn := area4(poly[a], poly[b], poly[c], poly[nx(d)])) > m:
            m, d, res = mn, nx(d), (a, b, c, nx(d))
            while (mn := area4(poly[a], poly[b], poly[nx(c)], poly[d])) > m:
                m, c, res = mn, nx(c), (a, b, nx(c), d)
            while (mn := area4(poly[a], poly[nx(b)], poly[c], poly[d])) > m:
                m, b, res = mn, nx(b), (a, nx(b), c, d)
        if b == a:
            b = nx(b)
            if c == b:
                c = nx(c)
                if d == c:
                    d = nx(d)
    return res


def main():
    import mujoco_warp

    default = Path(mujoco_warp.__file__).parent / "test_data/aloha_pot/scene.xml"
    mjm = mujoco.MjModel.from_xml_path(sys.argv[1] if len(sys.argv) > 1 else str(default))
    md = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, md)
    for _ in range(7):
        mujoco.mj_step(mjm, md)
    mujoco.mj_forward(mjm, md)
    print("MuJoCo's contacts of geoms 46, 91 (pos, dist):")
    for c in md.contact[:md.ncon]:
        if sorted(c.geom) == [46, 91]:
            print("  ", c.pos, repr(c.dist))
    face1, face2 = world_face(mjm, md, 46, 1), world_face(mjm, md, 91, 62)
    R = md.geom_xmat[46]
    v = mjm.mesh_polynormal[mjm.mesh_polyadr[mjm.geom_dataid[46]] + 1].astype(np.float64)
    n = np.array([R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2] for r in range(3)])
    for intersect in (0, 1):
        poly = clip(face1, face2, n, intersect)
        q = quad(poly)
        tie = area4(poly[8], poly[8], poly[9], poly[11]), area4(poly[8], poly[9], poly[9], poly[11])
        print(f"intersect {intersect}: {len(poly)} points, quad {q}, areas (8,8,9,11) {tie[0]!r} (8,9,9,11) {tie[1]!r}")


if __name__ == "__main__":
    main()
