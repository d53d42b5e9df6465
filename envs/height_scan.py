"""Height scan: a grid of vertical rays around a robot's base, cast in Warp against the terrain
geoms (planes, boxes and height fields), as Isaac Lab's RayCaster with a GridPatternCfg and yaw-only attachment
(`isaaclab/sensors/ray_caster`; legged_gym's measured_heights, `legged_gym/envs/base/
legged_robot.py`, samples its heightfield at the same kind of grid).

The grid has `size` = (length along the base's heading, width) and `resolution` spacing, centred
on the base, rotated by the base's yaw only; every ray starts `start_height` above the highest
terrain point and points down (-z). One Warp kernel runs over (worlds x rays), each thread on
its own ray (no shared state, the same on the GPU and Warp's CPU backend); each ray tests the
terrain geoms whose footprint holds its (x, y) (a grid of square cells lists them; infinite
planes everywhere: the same hits as testing every geom, at a few geoms per ray) with MuJoCo's
ray functions (mju_rayGeom for boxes, simrl.sim.ray; ray_plane and ray_hfield_down here,
engine_ray.c) and keeps the nearest hit. The observation is Isaac Lab's
`height_scan`: base z - hit z - offset, clipped to `clip`.

Height fields: the rays are always vertical, so against a field whose z axis is vertical (any
yaw) a ray meets the triangle of the one cell under it; a field tilted otherwise would need
mj_ray's general case (ray-box on the field's bounds, its sides and base, every triangle the
ray's shadow crosses) and is refused by HeightScan.
"""

import mujoco
import numpy as np
import torch
import warp as wp

from simrl.sim import ray as simrl_ray
from simrl.sim.types import MINVAL, GeomType

_ray_geom = simrl_ray.build(wp.float32)


@wp.func
def ray_plane(pos: wp.vec3, mat: wp.mat33, size: wp.vec3, pnt: wp.vec3, vec: wp.vec3):
    """mju_rayGeom for a plane (engine_ray.c ray_plane): the ray must meet the front face, within
    the plane's size where that is positive (size 0: infinite)."""
    lpnt = wp.transpose(mat) * (pnt - pos)
    lvec = wp.transpose(mat) * vec
    x = float(-1.0)
    if lvec[2] <= -MINVAL:
        sol = -lpnt[2] / lvec[2]
        if sol >= 0.0:
            p0 = lpnt[0] + sol * lvec[0]
            p1 = lpnt[1] + sol * lvec[1]
            if (size[0] <= 0.0 or wp.abs(p0) <= size[0]) and (size[1] <= 0.0 or wp.abs(p1) <= size[1]):
                x = sol
    return x


@wp.func
def ray_hfield_down(pos: wp.vec3, mat: wp.mat33, size: wp.vec4, nrow: int, ncol: int, adr: int,
                    data: wp.array(dtype=float), pnt: wp.vec3):
    """mju_rayGeom for a height field (engine_ray.c ray_hfield) and a ray straight down (-z) from
    above the field's top (HeightScan's start_z), the field's z axis vertical: the distance to the
    surface of the cell under the ray, -1 outside the field. Cell (r, c) is MuJoCo's two triangles
    (r, c), (r + 1, c + 1), (r, c + 1) and (r, c), (r + 1, c + 1), (r + 1, c) (ray_hfield, and
    mjc_ConvexHField's prisms); elevation x size[2] above the geom's origin. A vertical ray from
    above inside the footprint meets the top first, outside it meets neither sides nor base."""
    lpnt = wp.transpose(mat) * (pnt - pos)
    x = float(-1.0)
    if wp.abs(lpnt[0]) <= size[0] and wp.abs(lpnt[1]) <= size[1]:
        u = (lpnt[0] + size[0]) / (2.0 * size[0]) * float(ncol - 1)
        v = (lpnt[1] + size[1]) / (2.0 * size[1]) * float(nrow - 1)
        c = wp.clamp(int(wp.floor(u)), 0, ncol - 2)
        r = wp.clamp(int(wp.floor(v)), 0, nrow - 2)
        fu = u - float(c)
        fv = v - float(r)
        k = adr + r * ncol + c
        h00 = data[k]
        h01 = data[k + 1]  # (r, c + 1)
        h10 = data[k + ncol]  # (r + 1, c)
        h11 = data[k + ncol + 1]
        h = float(0.0)
        if fu >= fv:  # the triangle (r, c), (r, c + 1), (r + 1, c + 1)
            h = h00 + (h01 - h00) * fu + (h11 - h01) * fv
        else:  # the triangle (r, c), (r + 1, c), (r + 1, c + 1)
            h = h00 + (h10 - h00) * fv + (h11 - h10) * fu
        x = lpnt[2] - h * size[2]
    return x


@wp.func
def _ray_one(g: int, geom_type: wp.array(dtype=int), geom_pos: wp.array(dtype=wp.vec3),
             geom_mat: wp.array(dtype=wp.mat33), geom_size: wp.array(dtype=wp.vec3), geom_hfield: wp.array(dtype=int),
             hfield_size: wp.array(dtype=wp.vec4), hfield_nrow: wp.array(dtype=int), hfield_ncol: wp.array(dtype=int),
             hfield_adr: wp.array(dtype=int), hfield_data: wp.array(dtype=float), pnt: wp.vec3, vec: wp.vec3):
    """Distance along the ray to geom g (mju_rayGeom), -1 for none."""
    x = float(-1.0)
    if geom_type[g] == GeomType.PLANE:
        x = ray_plane(geom_pos[g], geom_mat[g], geom_size[g], pnt, vec)
    elif geom_type[g] == GeomType.HFIELD:
        h = geom_hfield[g]
        x = ray_hfield_down(geom_pos[g], geom_mat[g], hfield_size[h], hfield_nrow[h], hfield_ncol[h],
                            hfield_adr[h], hfield_data, pnt)
    else:
        x = _ray_geom(geom_pos[g], geom_mat[g], geom_size[g], geom_type[g], pnt, vec)
    return x


@wp.kernel
def height_scan_kernel(
    # Model:
    geom_type: wp.array(dtype=int), geom_pos: wp.array(dtype=wp.vec3), geom_mat: wp.array(dtype=wp.mat33),
    geom_size: wp.array(dtype=wp.vec3), geom_hfield: wp.array(dtype=int), hfield_size: wp.array(dtype=wp.vec4),
    hfield_nrow: wp.array(dtype=int), hfield_ncol: wp.array(dtype=int), hfield_adr: wp.array(dtype=int),
    hfield_data: wp.array(dtype=float), pattern: wp.array(dtype=wp.vec2), start_z: float,
    # the grid of cells (HeightScan): geoms whose footprint meets cell k are
    # cell_geoms[cell_start[k]:cell_start[k + 1]]; unbounded ones (infinite planes) are `everywhere`
    grid_origin: wp.vec2, cell_size: float, grid_shape: wp.vec2i, cell_start: wp.array(dtype=int),
    cell_geoms: wp.array(dtype=int), everywhere: wp.array(dtype=int), n_everywhere: int,
    # Data in:
    base_pose: wp.array2d(dtype=float),
    # Data out:
    hit_z: wp.array2d(dtype=float),
):
    w, r = wp.tid()
    qw = base_pose[w, 3]
    qx = base_pose[w, 4]
    qy = base_pose[w, 5]
    qz = base_pose[w, 6]
    yaw = wp.atan2(2.0 * (qw * qz + qx * qy), 1.0 - 2.0 * (qy * qy + qz * qz))
    c = wp.cos(yaw)
    s = wp.sin(yaw)
    p = pattern[r]
    pnt = wp.vec3(base_pose[w, 0] + c * p[0] - s * p[1], base_pose[w, 1] + s * p[0] + c * p[1], start_z)
    vec = wp.vec3(0.0, 0.0, -1.0)
    best = float(-1.0)
    # a vertical ray can meet only the geoms whose footprint holds its (x, y): those listed for
    # its cell, and the unbounded ones
    ix = int(wp.floor((pnt[0] - grid_origin[0]) / cell_size))
    iy = int(wp.floor((pnt[1] - grid_origin[1]) / cell_size))
    first = int(0)
    last = int(0)
    if ix >= 0 and ix < grid_shape[0] and iy >= 0 and iy < grid_shape[1]:
        k = ix * grid_shape[1] + iy
        first = cell_start[k]
        last = cell_start[k + 1]
    for i in range(first, last + n_everywhere):
        g = int(0)
        if i < last:
            g = cell_geoms[i]
        else:
            g = everywhere[i - last]
        x = _ray_one(g, geom_type, geom_pos, geom_mat, geom_size, geom_hfield, hfield_size, hfield_nrow,
                     hfield_ncol, hfield_adr, hfield_data, pnt, vec)
        if x >= 0.0 and (best < 0.0 or x < best):
            best = x
    if best >= 0.0:
        hit_z[w, r] = start_z - best
    else:
        hit_z[w, r] = -1.0e6  # nothing below: the clipped height says "far down"


def grid_pattern(size=(1.6, 1.0), resolution: float = 0.1) -> np.ndarray:
    """Ray offsets [n, 2] in the base's yaw frame: x from -size[0]/2 to size[0]/2 (the base's
    heading), y likewise, `resolution` apart, x varying fastest within each y (Isaac Lab
    GridPatternCfg, ordering "xy")."""
    nx = int(round(size[0] / resolution)) + 1
    ny = int(round(size[1] / resolution)) + 1
    xs = np.linspace(-size[0] / 2, size[0] / 2, nx)
    ys = np.linspace(-size[1] / 2, size[1] / 2, ny)
    gx, gy = np.meshgrid(xs, ys, indexing="xy")
    return np.stack([gx.ravel(), gy.ravel()], axis=1)


class HeightScan:
    """Rays down onto the static geoms `geom_ids` (planes, boxes and height fields of the world
    body; height fields with a vertical z axis) of `mjm`.

    Args:
        mjm: the compiled model.
        geom_ids: the geoms the rays can hit (the terrain and the floor).
        device: torch device of the poses and results.
        size, resolution: the grid (metres).
        start_height: rays start this far above the highest of the geoms' tops.
        offset: subtracted from the heights (Isaac Lab: 0.5).
        clip: (low, high) of the heights (Isaac Lab: -1, 1).
        cell_size: side of the grid's cells that list the geoms under them (metres); None: one
            cell holding every geom (each ray tests them all).
    """

    def __init__(self, mjm: mujoco.MjModel, geom_ids, device, size=(1.6, 1.0), resolution: float = 0.1,
                 start_height: float = 1.0, offset: float = 0.5, clip=(-1.0, 1.0), cell_size: float | None = 0.5):
        geom_ids = [int(g) for g in geom_ids]
        for g in geom_ids:
            if int(mjm.geom_bodyid[g]) != 0:
                raise ValueError(f"height scan: geom {mjm.geom(g).name!r} is not on the world body (the scan casts "
                                 f"against static geoms only)")
            if int(mjm.geom_type[g]) not in (GeomType.PLANE, GeomType.HFIELD, GeomType.BOX):
                raise ValueError(f"height scan: geom {mjm.geom(g).name!r} is a "
                                 f"{mujoco.mjtGeom(int(mjm.geom_type[g])).name}; the scan hits planes, boxes and "
                                 f"height fields")
        if not resolution > 0 or not all(s >= 0 for s in size):
            raise ValueError(f"height scan: size must be >= 0 and resolution > 0, got {size}, {resolution}")
        wp.init()
        self.device = torch.device(device)
        self.wp_device = wp.device_from_torch(self.device)
        self.offset, self.clip = float(offset), (float(clip[0]), float(clip[1]))
        self.pattern = grid_pattern(size, resolution)
        mats = np.zeros((len(geom_ids), 9))
        for k, g in enumerate(geom_ids):
            mujoco.mju_quat2Mat(mats[k], mjm.geom_quat[g])
            if int(mjm.geom_type[g]) == GeomType.HFIELD and abs(mats[k, 6]) + abs(mats[k, 7]) > 1e-9:
                raise ValueError(f"height scan: height field geom {mjm.geom(g).name!r} is tilted (its z axis is "
                                 f"not vertical); the scan's vertical rays handle height fields turned about z "
                                 f"only (mj_ray's general hfield case is not implemented)")
        hfield = [int(mjm.geom_dataid[g]) if mjm.geom_type[g] == GeomType.HFIELD else -1 for g in geom_ids]

        def top(k, g):
            if mjm.geom_type[g] == GeomType.BOX:
                return mjm.geom_pos[g][2] + mjm.geom_size[g][2]
            if mjm.geom_type[g] == GeomType.HFIELD:
                return mjm.geom_pos[g][2] + mjm.hfield_size[hfield[k]][2]
            return mjm.geom_pos[g][2]

        self.start_z = float(max((top(k, g) for k, g in enumerate(geom_ids)), default=0.0) + start_height)

        def array(values, dtype):
            return wp.array(np.asarray(values, dtype=np.float32 if dtype is not int else np.int32), dtype=dtype,
                            device=self.wp_device)

        self._geom_type = array(mjm.geom_type[geom_ids], int)
        self._geom_pos = array(mjm.geom_pos[geom_ids], wp.vec3)
        self._geom_mat = array(mats.reshape(-1, 3, 3), wp.mat33)
        self._geom_size = array(mjm.geom_size[geom_ids], wp.vec3)
        self._geom_hfield = array(hfield, int)
        # the model's height fields (one dummy when it has none: Warp arrays of length 0 are avoided)
        nh = max(mjm.nhfield, 1)
        self._hfield_size = array(mjm.hfield_size if mjm.nhfield else np.ones((1, 4)), wp.vec4)
        self._hfield_nrow = array(mjm.hfield_nrow if mjm.nhfield else np.full(nh, 2), int)
        self._hfield_ncol = array(mjm.hfield_ncol if mjm.nhfield else np.full(nh, 2), int)
        self._hfield_adr = array(mjm.hfield_adr if mjm.nhfield else np.zeros(nh), int)
        self._hfield_data = array(mjm.hfield_data if mjm.nhfielddata else np.zeros(4), float)
        self._pattern = array(self.pattern, wp.vec2)
        self._grid(mjm, geom_ids, mats.reshape(-1, 3, 3), hfield, cell_size, array)

    def _grid(self, mjm, geom_ids, mats, hfield, cell_size, array):
        """The cells' geom lists: each bounded geom in every cell its footprint's (x, y) bounding
        box (padded by 0.1 mm) meets; planes of infinite size in `everywhere`."""
        lo, hi, bounded, everywhere = [], [], [], []
        for k, g in enumerate(geom_ids):
            kind, size, rot = int(mjm.geom_type[g]), mjm.geom_size[g], np.abs(mats[k][:2])
            if kind == GeomType.PLANE and (size[0] <= 0 or size[1] <= 0):
                everywhere.append(k)
                continue
            if kind == GeomType.PLANE:
                half = rot[:, :2] @ size[:2]
            elif kind == GeomType.HFIELD:
                half = rot[:, :2] @ mjm.hfield_size[hfield[k]][:2]
            else:
                half = rot @ size
            centre = mjm.geom_pos[g][:2]
            lo.append(centre - half - 1e-4)
            hi.append(centre + half + 1e-4)
            bounded.append(k)
        if bounded and cell_size:
            origin = np.min(lo, axis=0)
            shape = np.maximum(np.ceil((np.max(hi, axis=0) - origin) / cell_size).astype(int), 1)
        else:  # one cell holding every bounded geom
            origin = np.min(lo, axis=0) if bounded else np.zeros(2)
            cell_size = float(max(np.max(np.array(hi) - origin), 1.0)) if bounded else 1.0
            shape = np.array([1, 1])
        cells = [[] for _ in range(int(shape[0] * shape[1]))]
        for k, a, b in zip(bounded, lo, hi, strict=True):
            i0, j0 = np.clip(np.floor((a - origin) / cell_size).astype(int), 0, shape - 1)
            i1, j1 = np.clip(np.floor((b - origin) / cell_size).astype(int), 0, shape - 1)
            for i in range(i0, i1 + 1):
                for j in range(j0, j1 + 1):
                    cells[i * shape[1] + j].append(k)
        self.grid_origin, self.cell_size, self.grid_shape = origin.astype(float), float(cell_size), shape
        self._cell_start = array(np.cumsum([0] + [len(c) for c in cells]), int)
        self._cell_geoms = array([k for c in cells for k in c] or [0], int)
        self._everywhere = array(everywhere or [0], int)
        self._n_everywhere = len(everywhere)

    @property
    def num_rays(self) -> int:
        return len(self.pattern)

    def hit_z(self, base_pose: torch.Tensor) -> torch.Tensor:
        """World z [W, num_rays] where each ray meets the geoms, for base poses [W, 7] (position,
        quaternion w x y z: a free joint's qpos)."""
        pose = base_pose.detach().to(device=self.device, dtype=torch.float32).contiguous()
        out = torch.empty(pose.shape[0], self.num_rays, dtype=torch.float32, device=self.device)
        wp.launch(height_scan_kernel, dim=(pose.shape[0], self.num_rays),
                  inputs=[self._geom_type, self._geom_pos, self._geom_mat, self._geom_size, self._geom_hfield,
                          self._hfield_size, self._hfield_nrow, self._hfield_ncol, self._hfield_adr,
                          self._hfield_data, self._pattern, self.start_z,
                          wp.vec2(*self.grid_origin), self.cell_size, wp.vec2i(*(int(n) for n in self.grid_shape)),
                          self._cell_start, self._cell_geoms, self._everywhere, self._n_everywhere,
                          wp.from_torch(pose)],
                  outputs=[wp.from_torch(out)], device=self.wp_device)
        return out

    def heights(self, base_pose: torch.Tensor) -> torch.Tensor:
        """Isaac Lab's height_scan [W, num_rays]: base z - hit z - offset, clipped."""
        z = base_pose[:, 2:3].to(device=self.device, dtype=torch.float32)
        return (z - self.hit_z(base_pose) - self.offset).clamp(*self.clip)


__all__ = ["HeightScan", "grid_pattern", "height_scan_kernel", "ray_hfield_down", "ray_plane"]
