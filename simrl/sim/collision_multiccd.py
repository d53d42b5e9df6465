"""multiccd's face clipping (engine_collision_gjk.c, `multicontact`, as MuJoCo 4.0 does it): up
to four contacts of two geoms with faces (box, mesh, cylinder) or of a capsule's side and a face,
from the polytope EPA ended with.

mjc_Convex asks mjc_ccd for up to four contacts for these pairs; EPA then finds the deepest
point as for any convex pair (where the cores do not penetrate, GJK's simplex stands in for
EPA's face: a capsule's segment, or with a margin the geoms without it), and `multicontact`
turns it into a contact patch:

1. The final face of EPA's polytope has three vertices, each a pair of support points, one on
   each geom. The distinct support points of geom 1 (one, two or three: `simplex_dim`) name a
   vertex, an edge or a face of it; the same for geom 2. A cylinder's support points are named
   by their cap (0 the top, 1 the bottom): all three on one cap's rim make that cap its feature,
   on both caps its side. A capsule's are all one: its side.
2. The candidate face normals of each geom at that feature (`box_normals`, `mesh_normals`,
   `cylinder_normals`: the box faces or hull polygons through it, a cylinder's cap; a capsule has
   none). Of the normals of geom 1 that face against the contact direction and those of geom 2
   that face along it, the pair most opposed, if within mjFACE_TOL (about 5 degrees,
   `aligned_faces`), makes a face-face contact. Otherwise, when a geom touches with a vertex or
   an edge, the edges leaving that feature (`box_edge_normals`, `mesh_edge_normals`; a
   cylinder's or capsule's side line through its witness point: `cylinder_edge`, `capsule_edge`)
   are tried against the other's faces that face the contact (within mjEDGE_TOL of lying in the
   face, `aligned_face_edge`): an edge-face contact. Anything else keeps EPA's single contact.
3. `polygon_clip` (Sutherland-Hodgman) clips the one polygon (face or edge, in world
   coordinates: `box_face`, `mesh_face`, `cylinder_face`: a cap as a 16-gon) by the side planes
   of the other face, keeps the points below that face, reduces more than four to four by
   MuJoCo's walk (`polygon_quad`, the area of a quadrilateral by its diagonals), an edge's to its
   two farthest points, and gives each point its witnesses (`witness_on_face`): the point
   projected on the clipping face, and that projection moved back along the other normal by
   the depth. With a margin, the faces and edges are those of the geoms without it (a support
   point of the inflated geom is replaced by its vertex, a cylinder's side line moved back onto
   its side), the points within the margin above the face are kept, and the witnesses moved
   out by half the margin each (`margins`).

Ported operation by operation (which polygon is clipped by which, the order of the points) from
MuJoCo's C source before 4.0 and, where MuJoCo 4.0 changed it, from MuJoCo Warp 4.0.0's port of
4.0 (collision_gjk.py, read for understanding), checked against the MuJoCo 4.0 binary in
tests/test_multiccd.py. These rules follow the binary where the two sources differ from it:
- when geom 1 touches with an edge or a vertex and none of its edges lies in a face of geom 2,
  geom 2's edges are tried against geom 1's faces (both sources stop there with one contact);
- a cylinder's side line passes through the witness point (not a support point), starting at
  the cap of its feature's second support point when they are on both caps (an edge of the
  side); geom 1's edges are tried when its feature is no larger than geom 2's, whether or not
  geom 1 has faces there;
- polygon_clip's crossing with a side plane is at t = dP / (dP - dQ) from the two points'
  distances to it, kept for 0 <= t <= 1 (MuJoCo 3's source: from the plane's offset; MuJoCo
  Warp: with a tolerance and clamped), and a cylinder's 16-gon is the binary's cylinderFace
  (its tables of cos and sin, 15-digit literals, its order of operations), both read from the
  disassembly of libmujoco.so.4.0.1: on a cap lying flat, and on meshes touching face on face,
  polygon_quad's choice among equal quadrilaterals depends on the last bit (aloha_pot,
  tools/aloha_quad_tie.py).
With these, box- and mesh-mesh and capsule contacts equal the binary's to rounding; cylinders
resting on boxes and meshes touch where its do; in deep random overlaps of cylinder pairs the
count is the binary's in 99% of the pairs, and where two contacts are found some lie elsewhere
along the side by millimetres (EPA's witness on a curved side is only as exact as its
tolerance; docs/GUIDE.md, Meshes).

Like the rest of the convex collision it finds *which* points touch and is not differentiated.
simrl.sim.collision_convex records each contact's two witness points as points of their geoms
and rebuilds the contacts from the poses on the tape. It needs to know which witness is a
vertex, and the clipping tracks that: each point is a vertex of the clipped polygon, a
vertex of the clipping face, or a crossing of two edges.

The working memory (mjc_ccdSize's multiccd part) is the Data's per-pair scratch rows `ccd_clip`,
`ccd_clipd`, `ccd_cliptag`, `ccd_norm` and `ccd_normidx` (contact_tables.clip_scratch_widths),
sized from the model's largest polygon (npolygonmax, at least 16 with a cylinder pair) and vertex
degree (nmeshdegmax) as MuJoCo sizes its buffer.
"""

import functools
import types

import warp as wp

from simrl.sim.data import ccd_structs, data_struct
from simrl.sim.model import MeshInfo, model_struct
from simrl.sim.types import MINVAL, GeomType

#: face-face alignment: cos of about 5.1 degrees (mjFACE_TOL); edge-face: |cos| below mjEDGE_TOL
FACE_TOL = 0.996
EDGE_TOL = 0.0888
#: a cylinder's cap as a polygon (MuJoCo 4.0's multicontact): its vertices at angles k pi / 8
CYLINDER_POLYGON = 16
#: (cos, sin) of k pi / 8 for k = 0..3 as the MuJoCo 4.0.1 binary's cylinderFace tables hold them
#: (decimal literals of 15 digits, not the nearest doubles: cos and sin of pi / 4 differ in the
#: last bit); the other twelve corners are these turned by quarter turns, as in its tables
RIM = ((1.0, 0.0), (0.923879532511287, 0.38268343236509), (0.707106781186548, 0.707106781186547),
       (0.38268343236509, 0.923879532511287))


@functools.cache
def build(scalar):
    Model, Data = model_struct(scalar), data_struct(scalar)
    f64 = wp.float64
    vec3d = wp.vec3d
    _, _, Obj, _ = ccd_structs(f64)
    zero, one, half = f64(0.0), f64(1.0), f64(0.5)
    face_tol, edge_tol, minval = f64(FACE_TOL), f64(EDGE_TOL), f64(MINVAL)
    rim1c, rim1s = f64(RIM[1][0]), f64(RIM[1][1])
    rim2c, rim2s = f64(RIM[2][0]), f64(RIM[2][1])
    rim3c, rim3s = f64(RIM[3][0]), f64(RIM[3][1])

    @wp.func
    def normalize(v: vec3d) -> vec3d:
        """mju_normalize3 (a vector shorter than mjMINVAL becomes (1, 0, 0))."""
        norm = wp.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])
        if norm < minval:
            return vec3d(one, zero, zero)
        inv = one / norm
        return vec3d(v[0] * inv, v[1] * inv, v[2] * inv)

    @wp.func
    def corner(o: Obj, sx: f64, sy: f64, sz: f64) -> vec3d:
        """The box point (sx, sy, sz) x its half sizes, in world coordinates (globalcoord)."""
        return o.mat * vec3d(sx * o.size[0], sy * o.size[1], sz * o.size[2]) + o.pos

    @wp.func
    def corner_signs(bits: int) -> vec3d:
        """The signs (+-1) of box corner `bits` along x, y, z (bit 0: +x, bit 1: +y, bit 2: +z)."""
        sg = vec3d(-one, -one, -one)
        if (bits & 1) != 0:
            sg[0] = one
        if (bits & 2) != 0:
            sg[1] = one
        if (bits & 4) != 0:
            sg[2] = one
        return sg

    @wp.func
    def vertex(m: Model, o: Obj, mesh: MeshInfo, v: int) -> vec3d:
        """Mesh vertex v (local id) in world coordinates."""
        return o.mat * vec3d(m.mesh_vec[mesh.vertadr + v]) + o.pos

    # ------------------------------------------------------------------ features and normals

    @wp.func
    def simplex_dim(vi: wp.vec3i, p1: vec3d, p2: vec3d):
        """simplexDim: how many distinct vertices (1, 2, 3) one geom's side of EPA's face has; the
        second one moved into place (vi[1], p1) when the first two are the same."""
        if vi[0] == vi[1]:
            if vi[0] == vi[2]:
                return 1, vi, p1
            return 2, wp.vec3i(vi[0], vi[2], vi[2]), p2
        if vi[2] == vi[0] or vi[2] == vi[1]:
            return 2, vi, p1
        return 3, vi, p1

    @wp.func
    def axis_vector(i: int) -> vec3d:
        """The normal of box face i: +x -x +y -y +z -z."""
        sign = one
        if i % 2 == 1:
            sign = -one
        if i < 2:
            return vec3d(sign, zero, zero)
        if i < 4:
            return vec3d(zero, sign, zero)
        return vec3d(zero, zero, sign)

    @wp.func
    def box_normal_near(d: Data, s: int, base: int, o: Obj, n: vec3d) -> int:
        """boxNormals2: the box face whose normal is within mjFACE_TOL of the direction n."""
        ln = wp.transpose(o.mat) * n
        ln = ln * (one / wp.sqrt(wp.dot(ln, ln)))
        for i in range(6):
            local = axis_vector(i)
            if wp.dot(ln, local) > face_tol:
                d.ccd_norm[s, base] = o.mat * local
                d.ccd_normidx[s, base] = i
                return 1
        return 0

    @wp.func
    def shared_sign(b1: int, b2: int, b3: int, bit: int) -> int:
        """+1 when the corners all lie on the positive side of one axis (its bit set), -1 when all
        on the negative side, else 0."""
        if (b1 & bit) != 0 and (b2 & bit) != 0 and (b3 & bit) != 0:
            return 1
        if (b1 & bit) == 0 and (b2 & bit) == 0 and (b3 & bit) == 0:
            return -1
        return 0

    @wp.func
    def box_normals(d: Data, s: int, base: int, o: Obj, dim: int, vi: wp.vec3i, dir: vec3d) -> int:
        """boxNormals: the normals (ccd_norm[s, base + k]) and indices (+x -x +y -y +z -z: 0-5) of
        the box faces through a corner (dim 1: three), an edge (2) or a face (3) given by corner
        numbers (bit 0: +x, bit 1: +y, bit 2: +z); a face given by two corners of a diagonal or
        three that name no face falls back to the face nearest dir."""
        if dim == 3:
            x = shared_sign(vi[0], vi[1], vi[2], 1)
            y = shared_sign(vi[0], vi[1], vi[2], 2)
            z = shared_sign(vi[0], vi[1], vi[2], 4)
            if wp.abs(x) + wp.abs(y) + wp.abs(z) == 1:
                d.ccd_norm[s, base] = o.mat * vec3d(f64(x), f64(y), f64(z))
                idx = int(0)
                if y != 0:
                    idx = 2
                if z != 0:
                    idx = 4
                if x + y + z == -1:
                    idx += 1
                d.ccd_normidx[s, base] = idx
                return 1
            return box_normal_near(d, s, base, o, dir)
        if dim == 2:
            x = shared_sign(vi[0], vi[1], vi[1], 1)
            y = shared_sign(vi[0], vi[1], vi[1], 2)
            z = shared_sign(vi[0], vi[1], vi[1], 4)
            if wp.abs(x) + wp.abs(y) + wp.abs(z) == 2:
                c = int(0)
                for axis in range(3):
                    sgn = x
                    if axis == 1:
                        sgn = y
                    elif axis == 2:
                        sgn = z
                    if sgn != 0:
                        idx = 2 * axis
                        if sgn < 0:
                            idx += 1
                        d.ccd_norm[s, base + c] = o.mat * axis_vector(idx)
                        d.ccd_normidx[s, base + c] = idx
                        c += 1
                return 2
            return box_normal_near(d, s, base, o, dir)
        if dim == 1:
            for axis in range(3):
                idx = 2 * axis + 1
                if (vi[0] & (1 << axis)) != 0:
                    idx = 2 * axis
                d.ccd_norm[s, base + axis] = o.mat * axis_vector(idx)
                d.ccd_normidx[s, base + axis] = idx
            return 3
        return 0

    @wp.func
    def common_polygons(m: Model, mesh: MeshInfo, v1: int, v2: int):
        """intersect: up to two polygons that mesh vertices v1 and v2 are both on, in v1's order."""
        adr1 = m.mesh_int[mesh.vert_mapadr + v1]
        num1 = m.mesh_int[mesh.vert_mapnum + v1]
        adr2 = m.mesh_int[mesh.vert_mapadr + v2]
        num2 = m.mesh_int[mesh.vert_mapnum + v2]
        count = int(0)
        first = int(-1)
        second = int(-1)
        i = int(0)
        while i < num1 and count < 2:
            p = m.mesh_int[adr1 + i]
            j = int(0)
            while j < num2 and count < 2:
                if m.mesh_int[adr2 + j] == p:
                    if count == 0:
                        first = p
                    else:
                        second = p
                    count += 1
                j += 1
            i += 1
        return count, first, second

    @wp.func
    def on_polygon(m: Model, mesh: MeshInfo, v: int, poly: int) -> int:
        """1 when mesh vertex v is on polygon poly (v's polygon map lists it)."""
        adr = m.mesh_int[mesh.vert_mapadr + v]
        num = m.mesh_int[mesh.vert_mapnum + v]
        for j in range(num):
            if m.mesh_int[adr + j] == poly:
                return 1
        return 0

    @wp.func
    def put_polygon_normal(m: Model, d: Data, s: int, k: int, o: Obj, mesh: MeshInfo, poly: int):
        d.ccd_norm[s, k] = o.mat * m.mesh_polynormal[mesh.poly_normal + poly]
        d.ccd_normidx[s, k] = poly

    @wp.func
    def mesh_normals(m: Model, d: Data, s: int, base: int, o: Obj, mesh: MeshInfo, dim: int, vi: wp.vec3i) -> int:
        """meshNormals: the normals and polygon ids of the hull polygons through a vertex (dim 1:
        all of them), an edge (2: the polygons of both ends, at most two) or a face (3: the one
        polygon of all three)."""
        if dim == 3:
            n, first, second = common_polygons(m, mesh, vi[0], vi[1])
            if n == 0:
                return 0
            poly = int(-1)
            if on_polygon(m, mesh, vi[2], first) != 0:
                poly = first
            elif n == 2 and on_polygon(m, mesh, vi[2], second) != 0:
                poly = second
            if poly < 0:
                return 0
            put_polygon_normal(m, d, s, base, o, mesh, poly)
            return 1
        if dim == 2:
            n, first, second = common_polygons(m, mesh, vi[0], vi[1])
            if n > 0:
                put_polygon_normal(m, d, s, base, o, mesh, first)
            if n > 1:
                put_polygon_normal(m, d, s, base + 1, o, mesh, second)
            return n
        if dim == 1:
            adr = m.mesh_int[mesh.vert_mapadr + vi[0]]
            num = m.mesh_int[mesh.vert_mapnum + vi[0]]
            for i in range(num):
                put_polygon_normal(m, d, s, base + i, o, mesh, m.mesh_int[adr + i])
            return num
        return 0

    @wp.func
    def box_edge_normals(d: Data, s: int, base: int, ebase: int, o: Obj, dim: int, p1: vec3d, p2: vec3d,
                         v1: int) -> int:
        """boxEdgeNormals: the unit directions (ccd_norm[s, base + k]) and far ends (ebase + k) of
        the touching edge (dim 2) or of the three edges leaving the touching corner (dim 1)."""
        if dim == 2:
            d.ccd_norm[s, ebase] = p2
            d.ccd_norm[s, base] = normalize(p2 - p1)
            return 1
        if dim == 1:
            sg = corner_signs(v1)
            x = sg[0]
            y = sg[1]
            z = sg[2]
            e0 = corner(o, -x, y, z)
            e1 = corner(o, x, -y, z)
            e2 = corner(o, x, y, -z)
            d.ccd_norm[s, ebase] = e0
            d.ccd_norm[s, ebase + 1] = e1
            d.ccd_norm[s, ebase + 2] = e2
            d.ccd_norm[s, base] = normalize(e0 - p1)
            d.ccd_norm[s, base + 1] = normalize(e1 - p1)
            d.ccd_norm[s, base + 2] = normalize(e2 - p1)
            return 3
        return 0

    @wp.func
    def mesh_edge_normals(m: Model, d: Data, s: int, base: int, ebase: int, o: Obj, mesh: MeshInfo, dim: int,
                          p1: vec3d, p2: vec3d, v1: int) -> int:
        """meshEdgeNormals: the touching edge (dim 2), or for each polygon through the touching
        vertex (dim 1) its edge that ends there (from the polygon's previous vertex)."""
        if dim == 2:
            d.ccd_norm[s, ebase] = p2
            d.ccd_norm[s, base] = normalize(p2 - p1)
            return 1
        if dim == 1:
            adr = m.mesh_int[mesh.vert_mapadr + v1]
            num = m.mesh_int[mesh.vert_mapnum + v1]
            for i in range(num):
                poly = m.mesh_int[adr + i]
                fa = m.mesh_int[mesh.poly_vertadr + poly]
                fn = m.mesh_int[mesh.poly_vertnum + poly]
                for j in range(fn):
                    if m.mesh_int[fa + j] == v1:
                        k = j - 1
                        if j == 0:
                            k = fn - 1
                        e = vertex(m, o, mesh, m.mesh_int[fa + k])
                        d.ccd_norm[s, ebase + i] = e
                        d.ccd_norm[s, base + i] = normalize(e - p1)
                        break
            return num
        return 0

    @wp.func
    def box_face(d: Data, s: int, base: int, o: Obj, idx: int) -> int:
        """boxFace: the four corners of box face idx (+x -x +y -y +z -z), in MuJoCo's order."""
        c0 = vec3d()
        c1 = vec3d()
        c2 = vec3d()
        c3 = vec3d()
        if idx == 0:
            c0 = corner(o, one, one, one)
            c1 = corner(o, one, one, -one)
            c2 = corner(o, one, -one, -one)
            c3 = corner(o, one, -one, one)
        elif idx == 1:
            c0 = corner(o, -one, one, -one)
            c1 = corner(o, -one, one, one)
            c2 = corner(o, -one, -one, one)
            c3 = corner(o, -one, -one, -one)
        elif idx == 2:
            c0 = corner(o, -one, one, -one)
            c1 = corner(o, one, one, -one)
            c2 = corner(o, one, one, one)
            c3 = corner(o, -one, one, one)
        elif idx == 3:
            c0 = corner(o, -one, -one, one)
            c1 = corner(o, one, -one, one)
            c2 = corner(o, one, -one, -one)
            c3 = corner(o, -one, -one, -one)
        elif idx == 4:
            c0 = corner(o, -one, one, one)
            c1 = corner(o, one, one, one)
            c2 = corner(o, one, -one, one)
            c3 = corner(o, -one, -one, one)
        elif idx == 5:
            c0 = corner(o, one, one, -one)
            c1 = corner(o, -one, one, -one)
            c2 = corner(o, -one, -one, -one)
            c3 = corner(o, one, -one, -one)
        else:
            return 0
        d.ccd_clip[s, base] = c0
        d.ccd_clip[s, base + 1] = c1
        d.ccd_clip[s, base + 2] = c2
        d.ccd_clip[s, base + 3] = c3
        return 4

    @wp.func
    def mesh_face(m: Model, d: Data, s: int, base: int, o: Obj, mesh: MeshInfo, poly: int) -> int:
        """meshFace: hull polygon poly's vertices in world coordinates, in reverse order."""
        fa = m.mesh_int[mesh.poly_vertadr + poly]
        fn = m.mesh_int[mesh.poly_vertnum + poly]
        for j in range(fn):
            d.ccd_clip[s, base + j] = vertex(m, o, mesh, m.mesh_int[fa + fn - 1 - j])
        return fn

    @wp.func
    def aligned_faces(d: Data, s: int, base1: int, n1: int, base2: int, n2: int, dir: vec3d):
        """alignedFaces (MuJoCo 4.0): of the normals of geom 1 facing against dir (x2 - x1) and
        those of geom 2 facing along it (both beyond mjEDGE_TOL |dir|), the pair (i, j) most
        opposed to each other, if within mjFACE_TOL."""
        dir_tol = edge_tol * wp.length(dir)
        best = -face_tol
        found = int(0)
        bi = int(0)
        bj = int(0)
        for i in range(n1):
            ni = d.ccd_norm[s, base1 + i]
            if wp.dot(ni, dir) >= -dir_tol:
                continue
            for j in range(n2):
                nj = d.ccd_norm[s, base2 + j]
                if wp.dot(nj, dir) <= dir_tol:
                    continue
                c = wp.dot(ni, nj)
                if c < best:
                    best = c
                    bi = i
                    bj = j
                    found = 1
        return found, bi, bj

    @wp.func
    def aligned_face_edge(d: Data, s: int, ebase: int, nedge: int, fbase: int, nface: int, dir: vec3d):
        """alignedFaceEdge: the first (edge, face) with the edge within mjEDGE_TOL of lying in the
        face's plane, of the faces whose normal points along dir (faces outer, edges inner)."""
        for i in range(nface):
            if wp.dot(d.ccd_norm[s, fbase + i], dir) <= minval:
                continue
            for j in range(nedge):
                if wp.abs(wp.dot(d.ccd_norm[s, ebase + j], d.ccd_norm[s, fbase + i])) < edge_tol:
                    return 1, j, i
        return 0, 0, 0

    # ------------------------------------------------------------------ clipping

    @wp.func
    def area4(a: vec3d, b: vec3d, c: vec3d, e: vec3d) -> f64:
        """area4 (MuJoCo 4.0): the area of the quadrilateral a, b, c, e, half the cross product of
        its diagonals."""
        return half * wp.length(wp.cross(a - c, b - e))

    @wp.func
    def nxt(i: int, n: int) -> int:
        if i == n - 1:
            return 0
        return i + 1

    @wp.func
    def quad_area(d: Data, s: int, pa: int, a: int, b: int, c: int, e: int) -> f64:
        return area4(d.ccd_clip[s, pa + a], d.ccd_clip[s, pa + b], d.ccd_clip[s, pa + c], d.ccd_clip[s, pa + e])

    @wp.func
    def polygon_quad(d: Data, s: int, pa: int, n: int) -> wp.vec4i:
        """polygonQuad: four of the n points at pa spanning a large area, by MuJoCo's walk (each
        corner advanced while the area grows, for every first corner): a local maximum."""
        b = int(1)
        c = int(2)
        e = int(3)
        res = wp.vec4i(0, 1, 2, 3)
        mx = quad_area(d, s, pa, 0, b, c, e)
        for a in range(n):
            while True:
                m_next = quad_area(d, s, pa, a, b, c, nxt(e, n))
                if m_next <= mx:
                    break
                mx = m_next
                e = nxt(e, n)
                res = wp.vec4i(a, b, c, e)
                while True:
                    m_next = quad_area(d, s, pa, a, b, nxt(c, n), e)
                    if m_next <= mx:
                        break
                    mx = m_next
                    c = nxt(c, n)
                    res = wp.vec4i(a, b, c, e)
                while True:
                    m_next = quad_area(d, s, pa, a, nxt(b, n), c, e)
                    if m_next <= mx:
                        break
                    mx = m_next
                    b = nxt(b, n)
                    res = wp.vec4i(a, b, c, e)
            if b == a:
                b = nxt(b, n)
                if c == b:
                    c = nxt(c, n)
                    if e == c:
                        e = nxt(e, n)
        return res

    @wp.func
    def witness_on_face(d: Data, s: int, out: int, k: int, P: int, v: vec3d, p: vec3d, n: vec3d, dir: vec3d,
                        tag: int):
        """witnessOnFace (MuJoCo 4.0): contact k from clipped point v: x1 = v projected on the
        face through p with normal n, dist = (x1 - v) . dir, x2 = x1 - dist dir (v itself when n
        and dir are opposed); and which of the two is a vertex (`point_kind` of its tag)."""
        w1 = v - n * wp.dot(v - p, n)
        dist = wp.dot(w1 - v, dir)
        d.ccd_clip[s, out + 2 * k] = w1
        d.ccd_clip[s, out + 2 * k + 1] = w1 - dir * dist
        d.ccd_clipd[s, P + k] = dist
        d.ccd_cliptag[s, 4 * P + k] = point_kind(tag)

    # Which feature each clipped point is (for the contacts' derivatives, not in MuJoCo): a vertex
    # of the clipped polygon (SUBJECT), a point on side plane e of the clipping face (e >= 0: a
    # crossing of two edges), or a vertex k of the clipping face (CORNER + k: on two side planes).
    SUBJECT = -1
    CORNER = 1 << 20

    @wp.func
    def point_kind(tag: int) -> int:
        """1: the point is a vertex of the clipped polygon, 2: of the clipping face, 0: neither."""
        if tag == SUBJECT:
            return 1
        if tag >= CORNER:
            return 2
        return 0

    @wp.func
    def on_plane(tag: int, e: int, n: int) -> int:
        """1 when a point of this tag lies on side plane e of an n-gon."""
        if tag >= CORNER:
            k = tag - CORNER
            km = k - 1
            if k == 0:
                km = n - 1
            if e == k or e == km:
                return 1
            return 0
        if tag == e:
            return 1
        return 0

    @wp.func
    def crossing_tag(tp: int, tq: int, e: int, n: int) -> int:
        """The tag of the point where segment (P, Q) meets side plane e: the clipping face's
        vertex shared with plane e - 1 when the segment lies on that plane (or plane n - 1 for
        e = 0), else a point on plane e."""
        ep = e - 1
        if e == 0:
            ep = n - 1
        if on_plane(tp, ep, n) != 0 and on_plane(tq, ep, n) != 0:
            return CORNER + e
        en = e + 1
        if en == n:
            en = 0
        if on_plane(tp, en, n) != 0 and on_plane(tq, en, n) != 0:
            return CORNER + en
        return e

    @wp.func
    def vertex_bits(kind: int, swapped: int) -> int:
        """point_kind (1: the clipped polygon's vertex, 2: the clipping face's) as
        collision_convex.record's `vertex` bits (1: x1 is a vertex of geom 1, 2: x2 of geom 2):
        geom 2's polygon clipped by geom 1's face, or (swapped) geom 1's edge by geom 2's face."""
        if kind == 0:
            return 0
        if swapped != 0:
            return kind
        return 3 - kind

    @wp.func
    def polygon_clip(d: Data, s: int, P: int, f1: int, nface1: int, f2: int, nface2: int, n: vec3d,
                     dir: vec3d, margin: f64) -> int:
        """polygonClip: the polygon (or edge) at f2 clipped by the side planes of face f1 (normal
        n), the points not farther above the face than `margin` kept, at most four contacts
        written (their number; 0: none, EPA's contact stays); each point's feature tracked along
        (d.ccd_cliptag)."""
        if nface1 < 3:
            return 0
        pn = 4 * P
        out = 7 * P
        # each edge's side plane's normal (planeNormal)
        for i in range(nface1):
            v1 = d.ccd_clip[s, f1 + i]
            v2 = d.ccd_clip[s, f1 + nxt(i, nface1)]
            d.ccd_clip[s, pn + i] = normalize(wp.cross(v2 - v1, (v1 + n) - v1))  # planeNormal's rounding
        pa = int(0)
        pb = 2 * P
        for i in range(nface2):
            d.ccd_clip[s, pa + i] = d.ccd_clip[s, f2 + i]
            d.ccd_cliptag[s, pa + i] = SUBJECT
        npoly = nface2
        for e in range(nface1):
            a = d.ccd_clip[s, f1 + e]
            side = d.ccd_clip[s, pn + e]
            nclipped = int(0)
            for i in range(npoly):
                inext = nxt(i, npoly)
                p = d.ccd_clip[s, pa + i]
                q = d.ccd_clip[s, pa + inext]
                tq = d.ccd_cliptag[s, pa + inext]
                pq = q - p
                dp = wp.dot(p - a, side)
                dq = wp.dot(q - a, side)
                inside1 = dp > -minval
                inside2 = dq > -minval
                if not inside1 and not inside2:
                    continue
                if inside1 and inside2:
                    if nclipped < 2 * P:
                        d.ccd_clip[s, pb + nclipped] = q
                        d.ccd_cliptag[s, pb + nclipped] = tq
                        nclipped += 1
                    continue
                # the crossing from the two distances to the side plane, kept on the segment only
                # (the MuJoCo 4.0.1 binary's polygonClip; MuJoCo 3's source measures t from the
                # plane's offset, MuJoCo Warp's with a tolerance: both round differently)
                den = dp - dq
                if den != zero:
                    t = dp / den
                    if t >= zero and t <= one and nclipped < 2 * P:
                        d.ccd_clip[s, pb + nclipped] = p + pq * t
                        d.ccd_cliptag[s, pb + nclipped] = crossing_tag(d.ccd_cliptag[s, pa + i], tq, e, nface1)
                        nclipped += 1
                if inside2 and nclipped < 2 * P:
                    d.ccd_clip[s, pb + nclipped] = q
                    d.ccd_cliptag[s, pb + nclipped] = tq
                    nclipped += 1
            swap = pa
            pa = pb
            pb = swap
            npoly = nclipped
        # the points not above the face
        face0 = d.ccd_clip[s, f1]
        kept = int(0)
        for i in range(npoly):
            v = d.ccd_clip[s, pa + i]
            if wp.dot(v - face0, n) <= margin:
                if kept != i:
                    d.ccd_clip[s, pa + kept] = v
                    d.ccd_cliptag[s, pa + kept] = d.ccd_cliptag[s, pa + i]
                kept += 1
        if kept < 1:
            return 0
        if kept > 4:
            # more than four points, even of a clipped edge (its near-duplicates): polygonQuad
            # first, as the 4.0.1 binary's polygonClip (MuJoCo Warp tests the edge first)
            r = polygon_quad(d, s, pa, kept)
            for k in range(4):
                witness_on_face(d, s, out, k, P, d.ccd_clip[s, pa + r[k]], face0, n, dir, d.ccd_cliptag[s, pa + r[k]])
            return 4
        if nface2 == 2 and kept > 2:
            # an edge: its two farthest points
            best1 = int(0)
            best2 = int(1)
            far = zero
            for i in range(kept):
                for j in range(i + 1, kept):
                    diff = d.ccd_clip[s, pa + j] - d.ccd_clip[s, pa + i]
                    d2 = wp.dot(diff, diff)
                    if d2 > far:
                        far = d2
                        best1 = i
                        best2 = j
            witness_on_face(d, s, out, 0, P, d.ccd_clip[s, pa + best1], face0, n, dir, d.ccd_cliptag[s, pa + best1])
            witness_on_face(d, s, out, 1, P, d.ccd_clip[s, pa + best2], face0, n, dir, d.ccd_cliptag[s, pa + best2])
            return 2
        for k in range(kept):
            witness_on_face(d, s, out, k, P, d.ccd_clip[s, pa + k], face0, n, dir, d.ccd_cliptag[s, pa + k])
        return kept

    # ------------------------------------------------------------------ cylinders and capsules

    @wp.func
    def axis_of(o: Obj) -> vec3d:
        return vec3d(o.mat[0, 2], o.mat[1, 2], o.mat[2, 2])

    @wp.func
    def cylinder_normals(d: Data, s: int, base: int, o: Obj, dim: int, vi: wp.vec3i) -> int:
        """A cylinder's face at its feature (MuJoCo 4.0): the cap (index 0 the top, 1 the bottom:
        the support's vertex index) when all of its support points are on that cap's rim."""
        if dim != 1:
            return 0
        sgn = one
        if vi[0] != 0:
            sgn = -one
        d.ccd_norm[s, base] = axis_of(o) * sgn
        d.ccd_normidx[s, base] = vi[0]
        return 1

    @wp.func
    def cylinder_edge(d: Data, s: int, base: int, ebase: int, o: Obj, pt: vec3d, cap: int) -> vec3d:
        """A cylinder's edge: the side line through pt from cap `cap` (0 the top, 1 the bottom) to
        the other; returns its first end."""
        a = axis_of(o)
        zc = o.size[1]
        if cap != 0:
            zc = -o.size[1]
        if o.margin > zero:
            # the witness of the inflated cylinder: back onto its side
            rel = pt - o.pos
            radial = rel - a * wp.dot(rel, a)
            rn = wp.length(radial)
            if rn >= minval:
                pt = pt - radial * (one - o.size[0] / rn)
        start = pt + a * (zc - wp.dot(pt - o.pos, a))
        along = a * (-zc / o.size[1])  # toward the other cap
        d.ccd_norm[s, base] = along
        d.ccd_norm[s, ebase] = start + along * (f64(2.0) * o.size[1])
        return start

    @wp.func
    def capsule_edge(d: Data, s: int, base: int, ebase: int, o: Obj, w: vec3d) -> vec3d:
        """A capsule's edge through its witness point w: the line of its side along the axis,
        over the segment's length; returns its first end."""
        a = axis_of(o)
        pr = wp.dot(w - o.pos, a)
        d.ccd_norm[s, base] = a
        d.ccd_norm[s, ebase] = w + a * (o.size[1] - pr)
        return w - a * (pr + o.size[1])

    @wp.func
    def rim(k: int):
        """(cos, sin) of k pi / 8 as MuJoCo 4.0.1's cylinderFace tables (RIM, turned by quarter
        turns): its contact choice on a cap lying flat (ties of polygonQuad) depends on their
        last bits."""
        i = k % 4
        c = one
        sn = zero
        if i == 1:
            c = rim1c
            sn = rim1s
        elif i == 2:
            c = rim2c
            sn = rim2s
        elif i == 3:
            c = rim3c
            sn = rim3s
        for _q in range(k // 4):
            t = c
            c = -sn
            sn = t
        return c, sn

    @wp.func
    def cylinder_face(d: Data, s: int, base: int, o: Obj, idx: int) -> int:
        """A cylinder's cap (idx 0 the top, 1 the bottom) as MuJoCo 4.0's 16-gon: the rim at angles
        k pi / 8, clockwise about the cap's outward normal. The rounding of the 4.0.1
        binary's cylinderFace (engine_collision_gjk.c): the local corner (r cos, -sgn r sin,
        sgn h) turned by the rows of the frame, x then y then z, and moved by the position."""
        sgn = one
        if idx != 0:
            sgn = -one
        r = o.size[0]
        z = sgn * o.size[1]
        for k in range(CYLINDER_POLYGON):
            c, sn = rim(k)
            x = r * c
            y = -(sgn * (r * sn))
            d.ccd_clip[s, base + k] = vec3d(
                o.mat[0, 0] * x + o.mat[0, 1] * y + o.mat[0, 2] * z + o.pos[0],
                o.mat[1, 0] * x + o.mat[1, 1] * y + o.mat[1, 2] * z + o.pos[1],
                o.mat[2, 0] * x + o.mat[2, 1] * y + o.mat[2, 2] * z + o.pos[2])
        return CYLINDER_POLYGON

    # ------------------------------------------------------------------ multicontact

    @wp.func
    def normals(m: Model, d: Data, s: int, base: int, o: Obj, mesh: MeshInfo, dim: int, vi: wp.vec3i,
                dir: vec3d) -> int:
        """The face normals at a geom's feature; none for a capsule (its side is an edge)."""
        if o.type == GeomType.BOX:
            return box_normals(d, s, base, o, dim, vi, dir)
        if o.type == GeomType.MESH:
            return mesh_normals(m, d, s, base, o, mesh, dim, vi)
        if o.type == GeomType.CYLINDER:
            return cylinder_normals(d, s, base, o, dim, vi)
        return 0

    @wp.func
    def edge_normals(m: Model, d: Data, s: int, base: int, ebase: int, o: Obj, mesh: MeshInfo, dim: int,
                     p1: vec3d, p2: vec3d, vi: wp.vec3i, w: vec3d):
        """The edges at a geom's feature (directions at base, far ends at ebase): their number and
        their common first end (p1; a capsule's or cylinder's side line passes through its witness
        point w)."""
        if o.type == GeomType.BOX:
            return box_edge_normals(d, s, base, ebase, o, dim, p1, p2, vi[0]), p1
        if o.type == GeomType.MESH:
            return mesh_edge_normals(m, d, s, base, ebase, o, mesh, dim, p1, p2, vi[0]), p1
        if o.type == GeomType.CYLINDER:
            # from the cap of its support point (a vertex), or of the second (the side: MuJoCo
            # 4.0's binary starts there)
            cap = vi[0]
            if dim == 2:
                cap = vi[1]
            return 1, cylinder_edge(d, s, base, ebase, o, w, cap)
        return 1, capsule_edge(d, s, base, ebase, o, w)

    @wp.func
    def polygon(m: Model, d: Data, s: int, base: int, o: Obj, mesh: MeshInfo, idx: int) -> int:
        if o.type == GeomType.BOX:
            return box_face(d, s, base, o, idx)
        if o.type == GeomType.CYLINDER:
            return cylinder_face(d, s, base, o, idx)
        return mesh_face(m, d, s, base, o, mesh, idx)

    @wp.func
    def feature_vertex(m: Model, o: Obj, mesh: MeshInfo, index: int, p: vec3d) -> vec3d:
        """The vertex a support point p names: a box's corner by its sign bits, a mesh's vertex by
        its number; p itself for other shapes."""
        if o.type == GeomType.BOX:
            sg = corner_signs(index)
            return corner(o, sg[0], sg[1], sg[2])
        if o.type == GeomType.MESH:
            return vertex(m, o, mesh, index)
        return p

    @wp.func
    def side_bit(o: Obj, bit: int) -> int:
        """`bit` when the clipped edge is a cylinder's or capsule's side line: its points are then
        on the curved side, where the geom's support along the normal is as it turns
        (collision_convex.frames' track)."""
        if o.type == GeomType.CYLINDER or o.type == GeomType.CAPSULE:
            return bit
        return 0

    @wp.func
    def margins(o1: Obj, o2: Obj):
        """Half the margin of each geom that its faces and edges leave out (a capsule's side line
        has it: it passes through the witness of the inflated capsule)."""
        m1 = zero
        if o1.type != GeomType.CAPSULE:
            m1 = half * o1.margin
        m2 = zero
        if o2.type != GeomType.CAPSULE:
            m2 = half * o2.margin
        return m1, m2

    @wp.func
    def mesh_of(m: Model, o: Obj, g: int) -> MeshInfo:
        if o.type == GeomType.MESH:
            return m.mesh_info[m.geom_dataid[g]]
        return MeshInfo()

    @wp.func
    def multicontact(m: Model, d: Data, s: int, o1: Obj, o2: Obj, g1: int, g2: int, face: int, x1: vec3d,
                     x2: vec3d) -> int:
        """multicontact: from EPA's final face (row `face` of d.ccd_face[s]; GJK's simplex when a
        capsule's core did not penetrate) and its witness points x1, x2, the contacts of the
        touching faces, or edge and face, of two boxes, meshes or cylinders or a capsule and
        one of those; their number (0: none, EPA's one contact stands). Contact k's witness
        points are d.ccd_clip[s, 7 P + 2 k] (geom 1) and [.., 7 P + 2 k + 1] (geom 2), its
        distance d.ccd_clipd[s, P + k] (P = m.ccd_npolygon)."""
        mesh1 = mesh_of(m, o1, g1)
        mesh2 = mesh_of(m, o2, g2)
        if o1.type == GeomType.MESH and mesh1.polynum == 0:
            return 0
        if o2.type == GeomType.MESH and mesh2.polynum == 0:
            return 0
        P = m.ccd_npolygon
        D = m.ccd_ndeg
        fc = d.ccd_face[s, face]
        va = d.ccd_vert[s, fc.verts[0]]
        vb = d.ccd_vert[s, fc.verts[1]]
        vc = d.ccd_vert[s, fc.verts[2]]
        nface1, v1i, q1 = simplex_dim(wp.vec3i(va.index1, vb.index1, vc.index1), vb.vert1, vc.vert1)
        nface2, v2i, q2 = simplex_dim(wp.vec3i(va.index2, vb.index2, vc.index2), vb.vert2, vc.vert2)
        p1 = va.vert1
        p2 = va.vert2
        if o1.margin > zero:
            # support points of the inflated shape: their vertices instead
            p1 = feature_vertex(m, o1, mesh1, v1i[0], p1)
            q1 = feature_vertex(m, o1, mesh1, v1i[1], q1)
        if o2.margin > zero:
            p2 = feature_vertex(m, o2, mesh2, v2i[0], p2)
            q2 = feature_vertex(m, o2, mesh2, v2i[1], q2)
        dir = x2 - x1
        # the face normals of each geom at its feature: geom 1's at columns [0, D), geom 2's at [D, 2 D)
        nn1 = normals(m, d, s, 0, o1, mesh1, nface1, v1i, -dir)
        nn2 = normals(m, d, s, D, o2, mesh2, nface2, v2i, dir)
        found, i, j = aligned_faces(d, s, 0, nn1, D, nn2, dir)
        edge1 = int(0)
        edge2 = int(0)
        if found == 0 and nface1 < 3 and nn2 > 0 and nface1 <= nface2:
            # geom 1 touches with an edge or a vertex: its edges (columns [3 D, 4 D), their far
            # ends at [2 D, 3 D)) against geom 2's faces
            ne, p1 = edge_normals(m, d, s, 3 * D, 2 * D, o1, mesh1, nface1, p1, q1, v1i, x1)
            found, i, j = aligned_face_edge(d, s, 3 * D, ne, D, nn2, dir)
            edge1 = found
        if found == 0 and nface2 < 3 and nn1 > 0:
            # geom 2's edges against geom 1's faces (also when geom 1's edges lie in none of
            # geom 2's faces: two edges crossing, one of them on a face of the other geom)
            ne, p2 = edge_normals(m, d, s, 3 * D, 2 * D, o2, mesh2, nface2, p2, q2, v2i, x2)
            found, i, j = aligned_face_edge(d, s, 3 * D, ne, 0, nn1, -dir)
            edge2 = found
        if found == 0:
            return 0
        # the two polygons (an edge: its two end points), in world coordinates
        f1 = 5 * P
        f2 = 6 * P
        nf1 = int(2)
        nf2 = int(2)
        if edge1 != 0:
            d.ccd_clip[s, f1] = p1
            d.ccd_clip[s, f1 + 1] = d.ccd_norm[s, 2 * D + i]
        else:
            k1 = i
            if edge2 != 0:
                k1 = j
            nf1 = polygon(m, d, s, f1, o1, mesh1, d.ccd_normidx[s, k1])
        if edge2 != 0:
            d.ccd_clip[s, f2] = p2
            d.ccd_clip[s, f2 + 1] = d.ccd_norm[s, 2 * D + i]
        else:
            nf2 = polygon(m, d, s, f2, o2, mesh2, d.ccd_normidx[s, D + j])
        # the margins the faces and edges do not carry; the clipped witnesses moved out by them
        # along the contact normal
        m1, m2 = margins(o1, o2)
        nx = int(0)
        normal = vec3d()
        out = 7 * P
        if edge1 != 0:
            # geom 1's edge clipped by geom 2's face; the witness points swapped back
            n2 = d.ccd_norm[s, D + j]
            normal = -n2
            nx = polygon_clip(d, s, P, f2, nf2, f1, nf1, n2, -n2, m1 + m2)
            for k in range(nx):
                a = d.ccd_clip[s, out + 2 * k]
                d.ccd_clip[s, out + 2 * k] = d.ccd_clip[s, out + 2 * k + 1]
                d.ccd_clip[s, out + 2 * k + 1] = a
                # the vertex kind as collision_convex.record's bits: the clipped edge is geom 1's
                d.ccd_cliptag[s, 4 * P + k] = vertex_bits(d.ccd_cliptag[s, 4 * P + k], 1) + side_bit(o1, 4)
        else:
            if edge2 != 0:
                # geom 2's edge clipped by geom 1's face
                n1 = d.ccd_norm[s, j]
                normal = n1
                nx = polygon_clip(d, s, P, f1, nf1, f2, nf2, n1, -n1, m1 + m2)
            else:
                # face on face: geom 2's face clipped by geom 1's, witnesses along geom 2's normal
                normal = -d.ccd_norm[s, D + j]
                nx = polygon_clip(d, s, P, f1, nf1, f2, nf2, d.ccd_norm[s, i], d.ccd_norm[s, D + j], m1 + m2)
            for k in range(nx):
                d.ccd_cliptag[s, 4 * P + k] = vertex_bits(d.ccd_cliptag[s, 4 * P + k], 0) + edge2 * side_bit(o2, 8)
        if m1 + m2 > zero:
            for k in range(nx):
                d.ccd_clip[s, out + 2 * k] = d.ccd_clip[s, out + 2 * k] + normal * m1
                d.ccd_clip[s, out + 2 * k + 1] = d.ccd_clip[s, out + 2 * k + 1] - normal * m2
                d.ccd_clipd[s, P + k] = d.ccd_clipd[s, P + k] - (m1 + m2)
        return nx

    return types.SimpleNamespace(multicontact=multicontact, margins=margins, normalize=normalize)
