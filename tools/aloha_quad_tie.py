#!/usr/bin/env python
"""Issue 52's last corpus mismatch (MuJoCo Warp's test_data/aloha_pot/scene.xml), reduced: at
step 7 the wrist mesh (geom 46) and the right finger mesh (geom 91) touch face on face, the
finger's polygon 62 clipped by the wrist's polygon 1 (15 points), and polygonQuad's walk meets
a tie between two degenerate quadrilaterals, (8, 8, 9, 11) and (8, 9, 9, 11), both of area
triangle(8, 9, 11): which one wins depends on the last bit of the clipped points.

    python tools/aloha_quad_tie.py [path/to/aloha_pot/scene.xml]

Two roundings of polygonClip (engine_collision_gjk.c), in scalar double arithmetic (no FMA,
as the binary):
- `3.12.1`: MuJoCo 3.12.1's C source: a crossing at t = (pd - pn . P) / (pn . PQ) from the side
  plane's offset pd (with MuJoCo Warp 4.0.0's tolerances): contacts A, A, B, C;
- `4.0.1`: the MuJoCo 4.0.1 binary (libmujoco.so.4.0.1's polygonClip, read from its
  disassembly): t = dP / (dP - dQ) from the two halfspace distances dP = (P - a) . pn and
  dQ = (Q - a) . pn, kept for 0 <= t <= 1 (no tolerance, no clamp): contacts A, B, B, C, the
  binary's. The rest (planeNormal, the halfspace test at -mjMINVAL, the pruning above the face,
  polygonQuad's walk and area4 = |(a - c) x (b - d)| / 2) is the same in both.
Needs only mujoco and numpy.

The 4.0.1 reading was checked in the binary under gdb: a breakpoint at polygonClip+0x66d (where
polygonQuad, inlined, begins; r14 holds the clipped polygon, r10d its size) in a Python process
running these seven steps and mj_forward stops at this pair with 15 points, all 15 equal bit for
bit to `clip(..., "4.0.1")` (2 of 15 to `clip(..., "3.12.1")`).
"""

import math
import sys
from pathlib import Path

import mujoco


def sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def world_face(mjm, md, g, poly):
    """meshFace: polygon poly of geom g's mesh in world coordinates, in reverse order."""
    mesh = mjm.geom_dataid[g]
    p = mjm.mesh_polyadr[mesh] + poly
    adr, nv = mjm.mesh_polyvertadr[p], mjm.mesh_polyvertnum[p]
    R, x = [float(r) for r in md.geom_xmat[g]], [float(c) for c in md.geom_xpos[g]]
    out = []
    for i in range(nv - 1, -1, -1):
        v = [float(c) for c in mjm.mesh_vert[mjm.mesh_vertadr[mesh] + mjm.mesh_polyvert[adr + i]]]
        out.append(tuple(R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2] + x[r] for r in range(3)))
    return out


def plane_normal(v1, v2, n):
    """planeNormal: (v2 - v1) x ((v1 + n) - v1), normalized as mju_normalize3 (times 1 / norm)."""
    r = cross(sub(v2, v1), sub((v1[0] + n[0], v1[1] + n[1], v1[2] + n[2]), v1))
    norm = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
    if norm < 1e-15:
        return (1.0, 0.0, 0.0)
    s = 1.0 / norm
    return (r[0] * s, r[1] * s, r[2] * s)


def clip(face1, face2, n, version="4.0.1"):
    """polygonClip's Sutherland-Hodgman pass and its pruning above the face."""
    m = len(face1)
    pn = [plane_normal(face1[i], face1[(i + 1) % m], n) for i in range(m)]
    pd = [dot(pn[i], face1[i]) for i in range(m)]
    poly = list(face2)
    for e in range(m):
        out = []
        for i in range(len(poly)):
            P, Q = poly[i], poly[(i + 1) % len(poly)]
            dp, dq = dot(sub(P, face1[e]), pn[e]), dot(sub(Q, face1[e]), pn[e])
            in1, in2 = dp > -1e-15, dq > -1e-15
            if in1 and in2:
                out.append(Q)
                continue
            if not in1 and not in2:
                continue
            pq = sub(Q, P)
            if version == "4.0.1":
                den = dp - dq
                ok = den != 0
                t = dp / den if ok else 0.0
                ok = ok and 0.0 <= t <= 1.0
            else:
                den = dot(pn[e], pq)
                ok = abs(den) >= 1e-10
                t = (pd[e] - dot(pn[e], P)) / den if ok else 0.0
                ok = ok and -3e-7 < t < 1 + 3e-7
                t = min(max(t, 0.0), 1.0)
            if ok:
                out.append((P[0] + pq[0] * t, P[1] + pq[1] * t, P[2] + pq[2] * t))
            if in2:
                out.append(Q)
        poly = out
    return [p for p in poly if dot(sub(p, face1[0]), n) <= 0]


def area4(a, b, c, d):
    r = cross(sub(a, c), sub(b, d))
    return 0.5 * math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])


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
    R = [float(r) for r in md.geom_xmat[46]]
    v = [float(c) for c in mjm.mesh_polynormal[mjm.mesh_polyadr[mjm.geom_dataid[46]] + 1]]
    n = tuple(R[3 * r] * v[0] + R[3 * r + 1] * v[1] + R[3 * r + 2] * v[2] for r in range(3))
    for version in ("3.12.1", "4.0.1"):
        poly = clip(face1, face2, n, version)
        q = quad(poly)
        tie = area4(poly[8], poly[8], poly[9], poly[11]), area4(poly[8], poly[9], poly[9], poly[11])
        print(f"{version}: {len(poly)} points, quad {q}, areas (8,8,9,11) {tie[0]!r} (8,9,9,11) {tie[1]!r}")


if __name__ == "__main__":
    main()
