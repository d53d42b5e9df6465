"""What the viewer draws of a model: every geom that MuJoCo's viewer draws by default (geom
groups 0-2, alpha above 0; mjvOption's geomgroup), as a triangle mesh in the geom's own frame,
and the state of the shown worlds, computed on the host by MuJoCo itself.

A world's poses come from `mj_forward` on an MjData of the viewer's own, given the world's
qpos, qvel, ctrl, act, qfrc_applied and mocap poses copied from the simulation (a few worlds,
at the viewer's frame rate): the geoms' frames, and the contacts with their forces
(mj_contactForce) for the arrows. It is MuJoCo's answer for that state, which simrl
reproduces; parameters that domain randomization gave a world its own value of (friction,
masses) are the compiled model's there, so only the arrows can differ from the simulation's
forces.
"""

import dataclasses

import mujoco
import numpy as np
import trimesh

G = mujoco.mjtGeom
#: the geom groups MuJoCo's viewer shows by default (mjv_defaultOption: groups 0, 1 and 2)
VISIBLE_GROUPS = (0, 1, 2)
#: the side of the square drawn for an infinite plane (size 0 in MJCF), m
INFINITE_PLANE = 200.0


@dataclasses.dataclass
class GeomMesh:
    """One drawn geom: its triangles in the geom frame, colour (0-255 RGB) and opacity, and
    whether it moves (a body that is not welded to the world, or a mocap body)."""

    geom: int
    name: str
    vertices: np.ndarray  # [V, 3] float32
    faces: np.ndarray  # [F, 3] uint32
    color: tuple[int, int, int]
    opacity: float
    moving: bool
    plane: bool


def geom_rgba(m: mujoco.MjModel, g: int) -> np.ndarray:
    """The colour MuJoCo draws a geom with: its material's rgba when it has one (mjv_makeScene
    takes mat_rgba then), times its texture's mean colour, else geom_rgba."""
    mat = int(m.geom_matid[g])
    if mat < 0:
        return np.asarray(m.geom_rgba[g], dtype=float)
    rgba = np.array(m.mat_rgba[mat], dtype=float)
    texture = texture_rgb(m, mat)
    if texture is not None:  # MuJoCo multiplies the texture by the material's colour
        rgba[:3] *= texture
    return rgba


def texture_rgb(m: mujoco.MjModel, mat: int) -> np.ndarray | None:
    """The mean colour (0-1) of a material's 2D RGB texture (a checker floor's two colours,
    averaged), or None when it has none: the viewer draws a textured plane in that colour."""
    tex = int(m.mat_texid[mat, int(mujoco.mjtTextureRole.mjTEXROLE_RGB)])
    if tex < 0 or int(m.tex_type[tex]) != int(mujoco.mjtTexture.mjTEXTURE_2D):
        return None
    w, h, nc = int(m.tex_width[tex]), int(m.tex_height[tex]), int(m.tex_nchannel[tex])
    adr = int(m.tex_adr[tex])
    pixels = np.asarray(m.tex_data[adr:adr + w * h * nc], dtype=float).reshape(h * w, nc)[:, :3]
    return pixels.mean(axis=0) / 255.0


def _hfield_mesh(m: mujoco.MjModel, h: int) -> trimesh.Trimesh:
    """A height field's top surface: sample (r, c) at x = (2c / (ncol - 1) - 1) size[0],
    y = (2r / (nrow - 1) - 1) size[1], z = data size[2] (MuJoCo's hfield layout, row-major from
    -y to +y), two triangles a cell; the sides and base are left out (seen from above)."""
    nrow, ncol = int(m.hfield_nrow[h]), int(m.hfield_ncol[h])
    adr = int(m.hfield_adr[h])
    z = np.asarray(m.hfield_data[adr:adr + nrow * ncol], dtype=float).reshape(nrow, ncol) * m.hfield_size[h, 2]
    sx, sy = m.hfield_size[h, 0], m.hfield_size[h, 1]
    x, y = np.meshgrid(np.linspace(-sx, sx, ncol), np.linspace(-sy, sy, nrow))
    vertices = np.stack([x, y, z], axis=-1).reshape(-1, 3)
    r, c = np.meshgrid(np.arange(nrow - 1), np.arange(ncol - 1), indexing="ij")
    a = (r * ncol + c).ravel()
    b, d, e = a + 1, a + ncol, a + ncol + 1
    faces = np.concatenate([np.stack([a, b, e], 1), np.stack([a, e, d], 1)])
    return trimesh.Trimesh(vertices, faces, process=False)


def geom_trimesh(m: mujoco.MjModel, g: int) -> trimesh.Trimesh | None:
    """The geom's surface in its own frame (MuJoCo's sizes: engine_vis_visualize.c draws the
    same shapes), or None for a type the viewer does not draw (SDF)."""
    kind, size = int(m.geom_type[g]), np.asarray(m.geom_size[g], dtype=float)
    if kind == G.mjGEOM_PLANE:
        # an infinite plane (size 0) is drawn as a large square, a finite one at its half-sizes
        hx = size[0] if size[0] > 0 else INFINITE_PLANE / 2
        hy = size[1] if size[1] > 0 else INFINITE_PLANE / 2
        vertices = np.array([[-hx, -hy, 0], [hx, -hy, 0], [hx, hy, 0], [-hx, hy, 0]], dtype=float)
        return trimesh.Trimesh(vertices, np.array([[0, 1, 2], [0, 2, 3]]), process=False)
    if kind == G.mjGEOM_SPHERE:
        return trimesh.creation.icosphere(subdivisions=2, radius=size[0])
    if kind == G.mjGEOM_CAPSULE:  # along z, half-length size[1] between the caps' centres
        return trimesh.creation.capsule(height=2 * size[1], radius=size[0], count=[16, 16])
    if kind == G.mjGEOM_CYLINDER:
        return trimesh.creation.cylinder(radius=size[0], height=2 * size[1], sections=24)
    if kind == G.mjGEOM_ELLIPSOID:
        sphere = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        return trimesh.Trimesh(sphere.vertices * size, sphere.faces, process=False)
    if kind == G.mjGEOM_BOX:
        return trimesh.creation.box(extents=2 * size)
    if kind == G.mjGEOM_MESH:  # vertices in the mesh frame, which the compiler made the geom's
        mesh = int(m.geom_dataid[g])
        v0, nv = int(m.mesh_vertadr[mesh]), int(m.mesh_vertnum[mesh])
        f0, nf = int(m.mesh_faceadr[mesh]), int(m.mesh_facenum[mesh])
        return trimesh.Trimesh(m.mesh_vert[v0:v0 + nv], m.mesh_face[f0:f0 + nf], process=False)
    if kind == G.mjGEOM_HFIELD:
        return _hfield_mesh(m, int(m.geom_dataid[g]))
    return None


def drawn_geoms(m: mujoco.MjModel) -> list[GeomMesh]:
    """The geoms MuJoCo's viewer would draw with its default options, each as a GeomMesh."""
    out = []
    for g in range(m.ngeom):
        rgba = geom_rgba(m, g)
        if int(m.geom_group[g]) not in VISIBLE_GROUPS or rgba[3] <= 0.0:
            continue
        mesh = geom_trimesh(m, g)
        if mesh is None:
            continue
        body = int(m.geom_bodyid[g])
        moving = int(m.body_weldid[body]) != 0 or int(m.body_mocapid[body]) >= 0
        name = mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"
        color = tuple(int(round(255 * float(np.clip(c, 0.0, 1.0)))) for c in rgba[:3])
        out.append(GeomMesh(g, name, np.asarray(mesh.vertices, dtype=np.float32),
                            np.asarray(mesh.faces, dtype=np.uint32), color, float(rgba[3]), moving,
                            int(m.geom_type[g]) == G.mjGEOM_PLANE))
    return out


def world_spacing(m: mujoco.MjModel) -> float:
    """How far apart worlds are drawn side by side (m): twice the reach of the moving geoms from
    the first moving body at qpos0 (their bounding spheres included), plus 0.5 m."""
    d = mujoco.MjData(m)
    mujoco.mj_kinematics(m, d)
    moving = [g for g in range(m.ngeom) if int(m.body_weldid[m.geom_bodyid[g]]) != 0]
    if not moving:
        return 1.0
    root = d.xpos[int(m.body_rootid[m.geom_bodyid[moving[0]]])]
    reach = max(float(np.linalg.norm(d.geom_xpos[g, :2] - root[:2]) + m.geom_rbound[g]) for g in moving)
    return 2.0 * reach + 0.5


#: what the viewer copies of a world to compute its poses and contacts (mjData names)
STATE_FIELDS = ("qpos", "qvel", "ctrl", "act", "qfrc_applied", "mocap_pos", "mocap_quat")


class HostWorlds:
    """MjData of the viewer's own for the shown worlds: `set(i, state)` gives world slot i the
    copied state (a mapping of STATE_FIELDS to arrays) and runs mj_forward."""

    def __init__(self, m: mujoco.MjModel, count: int):
        self.model = m
        self.data = [mujoco.MjData(m) for _ in range(count)]
        for d in self.data:
            mujoco.mj_forward(m, d)

    def set(self, i: int, state: dict[str, np.ndarray]) -> mujoco.MjData:
        d = self.data[i]
        for name, value in state.items():
            target = getattr(d, name)
            if target.size:
                target[:] = np.asarray(value, dtype=float).reshape(target.shape)
        mujoco.mj_forward(self.model, d)
        return d

    def contacts(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        """World slot i's contacts: positions [n, 3] and the force each exerts on geom2 [n, 3]
        in the world frame (mj_contactForce gives it in the contact frame, whose rows are the
        normal from geom1 to geom2 and two tangents)."""
        m, d = self.model, self.data[i]
        pos = np.zeros((d.ncon, 3))
        force = np.zeros((d.ncon, 3))
        wrench = np.zeros(6)
        for c in range(d.ncon):
            mujoco.mj_contactForce(m, d, c, wrench)
            frame = d.contact[c].frame.reshape(3, 3)
            pos[c] = d.contact[c].pos
            force[c] = frame.T @ wrench[:3]
        return pos, force


def geom_quat(d: mujoco.MjData, geoms: np.ndarray) -> np.ndarray:
    """The geoms' orientations as unit quaternions (w, x, y, z) [n, 4] from geom_xmat."""
    out = np.empty((len(geoms), 4))
    for k, g in enumerate(geoms):
        mujoco.mju_mat2Quat(out[k], d.geom_xmat[g])
    return out
