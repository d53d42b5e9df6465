"""Terrain for legged robots: a rows x cols grid of square patches built from boxes and height
fields, in the manner of legged_gym (`legged_gym/utils/terrain.py` and `terrain_utils.py`, Rudin
et al., CoRL 2021) and Isaac Lab (`isaaclab/terrains`): rows are difficulty levels (row i has
difficulty i / (rows - 1), from 0 to 1), columns are terrain types, drawn from the configured
proportions as legged_gym's curriculum layout does (column j takes the type whose cumulative
proportion first exceeds j / cols + 0.001).

Box types:

- `flat`: level ground.
- `pyramid_stairs`: square steps rising toward a central platform (legged_gym's
  pyramid_stairs_terrain: from the patch edge inwards, each step `step_width` narrower on every
  side and `step_height` higher, while the remaining square is wider than `platform_size`).
- `pyramid_stairs_inv`: the same steps going down toward the centre.
- `discrete_obstacles`: `num_obstacles` random rectangular blocks raised above the ground around a
  clear central platform (legged_gym's discrete_obstacles_terrain also sinks some below the
  ground; here they are all raised, a pit needs four more boxes each).
- `stepping_stones`: square stones at ground level with gaps over a pit, around a central platform
  (legged_gym's stepping_stones_terrain, stones at one height).

Heightfield types (`<hfield>` geoms, samples `hfield_resolution` apart, 0.1 m as legged_gym's
horizontal_scale):

- `random_rough`: legged_gym's random_uniform_terrain: heights uniform over the multiples of
  `rough_step` in [-h, h] (h = `rough_height`), drawn `rough_downsample` apart and interpolated
  bilinearly.
- `pyramid_slope`: legged_gym's pyramid_sloped_terrain: the ground rises at `slope` from the patch
  edge toward a flat central platform (`platform_size`); the height is slope x half-side x the
  product of two tents, so the rise is `slope` along the patch's centre lines.
- `pyramid_slope_inv`: the same, falling toward the centre.

Geometry. Every box stands on the floor plane, which is lowered to z = -pit_depth; ground level is
z = 0. The terrain's surface is the maximum of its boxes' tops and height fields' surfaces (a 2.5D
height function, `Terrain.height_at`): stairs up are boxes stacked on one another (one box per
step, the union gives the steps), stairs down are rings of four boxes per step, pits are where no
box stands. The ground at level 0 (flat patches, the floor under stairs up and obstacles, the
border around the grid) is merged into as few rectangles as the grid allows. Adjacent
heightfield columns share one `<hfield>` geom spanning all rows (`Terrain.hfields`), its base
reaching down to the floor plane; between samples its surface is MuJoCo's, each cell split into
two triangles along the diagonal from sample (r, c) to (r + 1, c + 1) (engine_ray.c ray_hfield,
engine_collision_convex.c mjc_ConvexHField), which `height_at` and the height scan follow.
The robot collides with every terrain geom: boxes and height fields have contype 0 and the
floor's conaffinity, so every robot geom that collides with the floor collides with them, or with
`robot_geoms` given, they have conaffinity bit 30 only and those robot geoms get contype bit 30
too. Terrain geoms and the floor all belong to the world body, so MuJoCo never pairs them with
one another (filterBodyPair).

Cost. Each terrain geom is a candidate pair with every robot geom that can touch it, tested every
physics step by the broadphase (simrl.sim.broadphase), which gives the pairs that may touch their
contact slots: a box-robot pair 1 to 8, a height field-robot pair one per prism under the robot
geom that can touch it, up to 50 (contact_tables.hfield_slots; at 0.1 m the quadruped's trunk 50,
a thigh 32, a calf 18, a foot 8), whatever the field's size, since the pair visits only the cells
under the geom. Hence one field
per run of adjacent heightfield columns, not one per patch: list the heightfield types next to
one another in `types`. See docs/GUIDE.md "Terrain" for the measured cost. Keep geoms few:
`Terrain.num_boxes`, `Terrain.num_hfields`.

    spec = mujoco.MjSpec.from_file("envs/assets/quadruped.xml")
    terrain = add_terrain(spec, TerrainCfg(rows=5, cols=4, seed=0))
    mjm = spec.compile()          # Sim.from_model(mjm, ...) or MujocoSim(mjm, ...)
"""

import dataclasses

import mujoco
import numpy as np
import torch

#: terrain types made of boxes
BOX_TYPES = ("flat", "pyramid_stairs", "pyramid_stairs_inv", "discrete_obstacles", "stepping_stones")
#: terrain types made of height fields (<hfield> geoms, one per run of adjacent heightfield columns)
HEIGHTFIELD_TYPES = ("random_rough", "pyramid_slope", "pyramid_slope_inv")
#: every terrain type
TYPES = BOX_TYPES + HEIGHTFIELD_TYPES
#: geom group of the terrain geoms and the floor (the height scan and mj_ray filters select it)
TERRAIN_GROUP = 2
#: contype/conaffinity bit of the terrain boxes when only some robot geoms touch them (robot_geoms)
TERRAIN_BIT = 1 << 30
#: name prefix of the terrain geoms (boxes: GEOM_PREFIX + index; height fields: HFIELD_PREFIX + index)
GEOM_PREFIX = "terrain_"
HFIELD_PREFIX = "terrain_hfield_"


@dataclasses.dataclass(frozen=True)
class TerrainCfg:
    """The terrain grid (`task.terrain.*`). Ranges `(a, b)` are the value at difficulty 0 and at
    difficulty 1, linearly interpolated in between. Lengths in metres. The box types use
    step_*, obstacle_*, stone_*; the heightfield types hfield_resolution, rough_* (random_rough)
    and slope (pyramid_slope, pyramid_slope_inv); platform_size is shared."""

    #: difficulty levels (legged_gym num_rows)
    rows: int = 5
    #: terrain columns (legged_gym num_cols); their types follow `types`
    cols: int = 4
    #: side of one square patch (legged_gym terrain_length / terrain_width: 8 m for ANYmal)
    patch_size: float = 4.0
    #: width of the level ground around the grid (legged_gym border_size 25 m, Isaac Lab 20 m);
    #: past it the ground drops to the floor plane (RoughTerrainEnv warns when a world can get there)
    border: float = 25.0
    #: {type: proportion} of the columns; types from BOX_TYPES and HEIGHTFIELD_TYPES
    types: dict = dataclasses.field(default_factory=lambda: {
        "random_rough": 0.25, "pyramid_stairs": 0.25, "pyramid_stairs_inv": 0.25, "discrete_obstacles": 0.25})
    #: seed of the random patches (obstacles, stones)
    seed: int = 0
    #: depth of the floor plane (the bottom of pits) below ground level
    pit_depth: float = 1.0
    #: side of the level square at the centre of stairs, obstacles and stepping stones
    platform_size: float = 2.0
    #: stairs: step height (legged_gym: 0.05 + 0.18 difficulty)
    step_height: tuple = (0.05, 0.23)
    #: stairs: step width (legged_gym 0.31)
    step_width: float = 0.31
    #: discrete obstacles: height of the highest (legged_gym: 0.05 + 0.2 difficulty); each block
    #: is at half or full height
    obstacle_height: tuple = (0.05, 0.25)
    #: discrete obstacles: range of the blocks' sides (legged_gym 1 to 2 m on 8 m patches)
    obstacle_size: tuple = (0.4, 1.0)
    #: discrete obstacles: blocks per patch (legged_gym 20 on 8 m patches)
    num_obstacles: int = 4
    #: stepping stones: side of a stone (legged_gym: 1.5 - 1.2 difficulty on 8 m patches)
    stone_size: tuple = (0.8, 0.4)
    #: stepping stones: gap between stones (legged_gym 0.05, then 0.1)
    stone_distance: tuple = (0.05, 0.25)
    #: height fields: horizontal spacing of the elevation samples (legged_gym horizontal_scale
    #: 0.1); must divide patch_size. Each cell is two triangles (MuJoCo's hfield surface)
    hfield_resolution: float = 0.1
    #: random_rough: heights uniform in [-h, h] (legged_gym random_uniform_terrain: -0.05 to 0.05
    #: at every difficulty; Isaac Lab noise_range 0.02 to 0.10)
    rough_height: tuple = (0.01, 0.06)
    #: random_rough: the heights are multiples of this step (legged_gym step 0.005)
    rough_step: float = 0.005
    #: random_rough: the heights are drawn on a grid this far apart and interpolated bilinearly
    #: to hfield_resolution (legged_gym downsampled_scale 0.2)
    rough_downsample: float = 0.2
    #: pyramid_slope(_inv): rise over run of the slope up (down) to the central platform
    #: (legged_gym: 0.4 difficulty; Isaac Lab slope_range (0, 0.4))
    slope: tuple = (0.0, 0.4)
    #: names of the robot geoms that collide with the terrain boxes; None: every geom that
    #: collides with the floor. Each box is a candidate pair with each of them, so fewer is cheaper
    robot_geoms: tuple | None = None
    #: the rows are levels of a curriculum: worlds start on rows 0..max_init_level, and the curriculum
    #: term terrain_levels (envs/mdp/curriculum.py; envs.rough) moves them; false: rows drawn uniformly once
    curriculum: bool = True
    #: curriculum: worlds start on a row in 0..max_init_level (legged_gym max_init_terrain_level)
    max_init_level: int = 1

    @classmethod
    def from_dict(cls, values: dict | None) -> "TerrainCfg":
        """A TerrainCfg from `task.terrain` (lists become tuples); ValueError naming unknown keys."""
        values = dict(values or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown terrain keys {unknown}; known: {sorted(known)}")
        return cls(**{k: tuple(v) if isinstance(v, (list, tuple)) else dict(v) if k == "types" else v
                      for k, v in values.items()})

    def __post_init__(self):
        check_types(self.types)
        problems = []
        for name in ("rows", "cols", "num_obstacles"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < (1 if name != "num_obstacles" else 0):
                problems.append(f"{name} must be a positive integer, got {value!r}")
        for name in ("patch_size", "pit_depth", "step_width", "hfield_resolution", "rough_step",
                     "rough_downsample"):
            if not getattr(self, name) > 0:
                problems.append(f"{name} must be positive, got {getattr(self, name)!r}")
        if not 0 <= self.border:
            problems.append(f"border must be >= 0, got {self.border!r}")
        if not 0 < self.platform_size <= self.patch_size:
            problems.append(f"platform_size must be in (0, patch_size={self.patch_size}], got {self.platform_size!r}")
        for name in ("step_height", "obstacle_height", "obstacle_size", "stone_size", "stone_distance",
                     "rough_height", "slope"):
            value = getattr(self, name)
            if not (isinstance(value, tuple) and len(value) == 2 and all(v >= 0 for v in value)):
                problems.append(f"{name} must be two non-negative numbers (difficulty 0, difficulty 1), got {value!r}")
        if self.hfield_resolution > 0:
            cells = self.patch_size / self.hfield_resolution
            if abs(cells - round(cells)) > 1e-6 or round(cells) < 2:
                problems.append(f"hfield_resolution={self.hfield_resolution!r} must divide patch_size="
                                f"{self.patch_size!r} into at least 2 cells")
            if self.rough_downsample > 0 and self.rough_downsample < self.hfield_resolution:
                problems.append(f"rough_downsample={self.rough_downsample!r} must be >= hfield_resolution="
                                f"{self.hfield_resolution!r}")
        if not (min(self.obstacle_size) > 0 and min(self.stone_size) > 0):
            problems.append("obstacle_size and stone_size must be positive")
        if self.robot_geoms is not None and not (isinstance(self.robot_geoms, tuple) and self.robot_geoms
                                                 and all(isinstance(n, str) for n in self.robot_geoms)):
            problems.append(f"robot_geoms must be null or a non-empty list of geom names, got {self.robot_geoms!r}")
        if not (isinstance(self.max_init_level, int) and 0 <= self.max_init_level):
            problems.append(f"max_init_level must be an integer >= 0, got {self.max_init_level!r}")
        if problems:
            raise ValueError("invalid terrain configuration: " + "; ".join(problems))


def check_types(types: dict) -> None:
    """Refuse unknown types and proportions that are not numbers >= 0 (ValueError)."""
    if not isinstance(types, dict) or not types:
        raise ValueError(f"terrain types must be a mapping {{type: proportion}}, got {types!r}")
    for name, share in types.items():
        if name not in TYPES:
            raise ValueError(f"unknown terrain type {name!r}; available: {', '.join(TYPES)}")
        if not (isinstance(share, (int, float)) and share >= 0):
            raise ValueError(f"terrain type {name!r}: proportion must be a number >= 0, got {share!r}")
    if sum(types.values()) <= 0:
        raise ValueError(f"terrain type proportions must not all be 0, got {types!r}")


@dataclasses.dataclass
class HeightField:
    """One `<hfield>` geom of the terrain: elevation samples `heights` [nrow, ncol] (world z) on a
    regular grid, sample (r, c) at (x0 + c dx, y0 + r dy) (MuJoCo's layout: rows along y), over
    the terrain columns first..last (all rows). Between the samples the surface is MuJoCo's: each
    cell is two triangles split along its diagonal from sample (r, c) to (r + 1, c + 1)."""

    x0: float
    y0: float
    dx: float
    dy: float
    #: [nrow, ncol] world z, as MuJoCo rebuilds it from the float32 elevations (`elevation`)
    heights: np.ndarray
    #: (first, last) terrain column the field covers
    columns: tuple
    #: z of elevation 0 (the lowest sample) and the elevation range (MuJoCo hfield size[2])
    zmin: float = 0.0
    zrange: float = 1.0
    #: [nrow, ncol] float32 elevations in [0, 1] (MuJoCo normalises its hfield data to [0, 1])
    elevation: np.ndarray | None = None

    @classmethod
    def from_heights(cls, x0, y0, dx, dy, heights: np.ndarray, columns) -> "HeightField":
        zmin, zmax = float(heights.min()), float(heights.max())
        zrange = zmax - zmin if zmax > zmin else 1.0  # flat: every elevation is 0, the range is free
        elevation = ((heights - zmin) / zrange).astype(np.float32)
        return cls(x0=float(x0), y0=float(y0), dx=float(dx), dy=float(dy),
                   heights=zmin + elevation.astype(np.float64) * zrange, columns=tuple(columns),
                   zmin=zmin, zrange=zrange, elevation=elevation)

    @property
    def x1(self) -> float:
        return self.x0 + (self.heights.shape[1] - 1) * self.dx

    @property
    def y1(self) -> float:
        return self.y0 + (self.heights.shape[0] - 1) * self.dy

    def surface(self, x, y):
        """(inside, z): whether points (x, y) (numpy or torch arrays of one shape) lie over the
        field, and its surface z there (meaningless outside). The triangle of the cell holding the
        point is the one mj_ray meets going straight down (engine_ray.c ray_hfield: triangles
        (r, c), (r + 1, c + 1), (r, c + 1) and (r, c), (r + 1, c + 1), (r + 1, c))."""
        nrow, ncol = self.heights.shape
        u, v = (x - self.x0) / self.dx, (y - self.y0) / self.dy
        if hasattr(u, "new_tensor"):
            heights = self._heights_like(u)
            c = u.floor().clamp(0, ncol - 2).long()
            r = v.floor().clamp(0, nrow - 2).long()
            where = torch.where
        else:
            heights = self.heights.ravel()
            c = np.clip(np.floor(u), 0, ncol - 2).astype(np.int64)
            r = np.clip(np.floor(v), 0, nrow - 2).astype(np.int64)
            where = np.where
        fu, fv = u - c, v - r
        k = r * ncol + c
        h00, h01, h10, h11 = heights[k], heights[k + 1], heights[k + ncol], heights[k + ncol + 1]
        # h01: sample (r, c + 1) (x + dx); h10: sample (r + 1, c) (y + dy)
        z = where(fu >= fv, h00 + (h01 - h00) * fu + (h11 - h01) * fv, h00 + (h10 - h00) * fv + (h11 - h10) * fu)
        inside = (u >= 0) & (u <= ncol - 1) & (v >= 0) & (v <= nrow - 1)
        return inside, z

    def _heights_like(self, x):
        cache = self.__dict__.setdefault("_tensors", {})
        key = (x.device, x.dtype)
        if key not in cache:
            cache[key] = x.new_tensor(self.heights.ravel())
        return cache[key]


@dataclasses.dataclass
class Terrain:
    """A generated grid. Boxes are rectangles [x0, x1] x [y0, y1] standing on the floor (z =
    floor_z) up to `top`; height fields cover the heightfield columns; the surface at (x, y) is the
    highest of the box tops and height field surfaces over it, or floor_z."""

    cfg: TerrainCfg
    #: [rows, cols] terrain type of each patch (names of TYPES)
    patch_types: list
    #: [nbox, 5]: x0, x1, y0, y1, top
    boxes: np.ndarray
    #: [nbox] (row, col) of the patch each box belongs to; (-1, -1) for merged ground
    box_patch: np.ndarray
    #: [rows, cols, 3] patch centres (legged_gym env_origins), z the surface height there (height
    #: field patches: the highest sample within 1 m of the centre, as legged_gym's env_origin_z)
    origins: np.ndarray
    #: height of the floor plane (the bottom of pits)
    floor_z: float
    #: the `<hfield>` geoms, one per run of adjacent heightfield columns
    hfields: list = dataclasses.field(default_factory=list)
    #: geom ids of the terrain geoms in the compiled model, boxes then height fields
    #: (terrain_model), else None
    geom_ids: list | None = None

    @property
    def num_boxes(self) -> int:
        return len(self.boxes)

    @property
    def num_hfields(self) -> int:
        return len(self.hfields)

    @property
    def top(self) -> float:
        """The highest point of the terrain."""
        tops = [self.boxes[:, 4].max(initial=self.floor_z), 0.0] + [float(h.heights.max()) for h in self.hfields]
        return float(max(tops))

    def height_at(self, x, y):
        """Surface height at points (x, y) (numpy or torch arrays of one shape): the highest box
        top or height field surface over them, else floor_z."""
        if hasattr(x, "new_tensor"):  # torch: [..., nbox] comparisons, no host copy
            b = self._boxes_like(x)
            xe, ye = x[..., None], y[..., None]
            inside = (xe >= b[:, 0]) & (xe <= b[:, 1]) & (ye >= b[:, 2]) & (ye <= b[:, 3])
            tops = torch.where(inside, b[:, 4], b.new_full((), self.floor_z))
            z = tops.amax(dim=-1).clamp(min=self.floor_z)
            for field in self.hfields:
                over, surface = field.surface(x, y)
                z = torch.where(over, torch.maximum(z, surface.to(z.dtype)), z)
            return z
        x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
        b = self.boxes
        xe, ye = x[..., None], y[..., None]
        inside = (xe >= b[:, 0]) & (xe <= b[:, 1]) & (ye >= b[:, 2]) & (ye <= b[:, 3])
        z = np.where(inside, b[:, 4], self.floor_z).max(axis=-1, initial=self.floor_z)
        for field in self.hfields:
            over, surface = field.surface(x, y)
            z = np.where(over, np.maximum(z, surface), z)
        return z

    def _boxes_like(self, x):
        cache = self.__dict__.setdefault("_tensors", {})
        key = (x.device, x.dtype)
        if key not in cache:
            cache[key] = x.new_tensor(self.boxes)
        return cache[key]

    def patch_bounds(self, row: int, col: int) -> tuple[float, float, float, float]:
        """x0, x1, y0, y1 of patch (row, col); rows run along x, columns along y (legged_gym)."""
        s = self.cfg.patch_size
        return row * s, (row + 1) * s, col * s, (col + 1) * s


def _lerp(pair: tuple, difficulty: float) -> float:
    return float(pair[0] + (pair[1] - pair[0]) * difficulty)


def column_types(cfg: TerrainCfg) -> list[str]:
    """The type of each column (legged_gym curriculum layout: choice = j / cols + 0.001 against
    the cumulative proportions)."""
    names = list(cfg.types)
    shares = np.array([cfg.types[n] for n in names], dtype=float)
    cumulative = np.cumsum(shares / shares.sum())
    out = []
    for j in range(cfg.cols):
        choice = j / cfg.cols + 0.001
        out.append(names[min(int(np.searchsorted(cumulative, choice, side="right")), len(names) - 1)])
    return out


# ---------------------------------------------------------------------------------- patches
# Each function returns (rects, ground): rects [x0, x1, y0, y1, top] in patch coordinates
# (centred on the patch, -s/2..s/2), and whether the patch stands on level ground (its
# ground then merges with the neighbouring ground into a few large boxes).

def _stair_levels(cfg: TerrainCfg) -> int:
    """Steps of pyramid stairs: inward steps while the remaining square is wider than the
    platform (legged_gym pyramid_stairs_terrain's loop)."""
    n, side = 0, cfg.patch_size
    while side > cfg.platform_size + 1e-9 and side - 2 * cfg.step_width > 0:
        side -= 2 * cfg.step_width
        n += 1
    return n


def _pyramid_stairs(cfg, difficulty, rng, inverted: bool):
    h = _lerp(cfg.step_height, difficulty)
    half = cfg.patch_size / 2
    n = _stair_levels(cfg)
    if not inverted:  # stacked squares: square k (k = 1..n) of half side half - k w, top k h
        return [[-(half - k * cfg.step_width), half - k * cfg.step_width,
                 -(half - k * cfg.step_width), half - k * cfg.step_width, k * h] for k in range(1, n + 1)], True
    rects = []
    for k in range(n):  # ring k between squares k and k + 1, top -k h: four boxes
        a, b = half - k * cfg.step_width, half - (k + 1) * cfg.step_width
        top = -k * h
        rects += [[-a, a, b, a, top], [-a, a, -a, -b, top], [b, a, -b, b, top], [-a, -b, -b, b, top]]
    c = half - n * cfg.step_width
    rects.append([-c, c, -c, c, -n * h])  # the platform at the bottom
    return rects, False


def _discrete_obstacles(cfg, difficulty, rng):
    h = _lerp(cfg.obstacle_height, difficulty)
    half, p = cfg.patch_size / 2, cfg.platform_size / 2
    rects = []
    lo, hi = cfg.obstacle_size
    while len(rects) < cfg.num_obstacles:
        sx, sy = rng.uniform(lo, hi, size=2)
        cx = rng.uniform(-half + sx / 2, half - sx / 2)
        cy = rng.uniform(-half + sy / 2, half - sy / 2)
        if abs(cx) < p + sx / 2 and abs(cy) < p + sy / 2:
            continue  # keep the central platform clear (redraw)
        rects.append([cx - sx / 2, cx + sx / 2, cy - sy / 2, cy + sy / 2, h * rng.choice([0.5, 1.0])])
    return rects, True


def _stepping_stones(cfg, difficulty, rng):
    size, gap = _lerp(cfg.stone_size, difficulty), _lerp(cfg.stone_distance, difficulty)
    half, p = cfg.patch_size / 2, cfg.platform_size / 2
    rects = [[-p, p, -p, p, 0.0]]
    pitch = size + gap
    n = int(cfg.patch_size // pitch)
    for i in range(n):
        x0 = -half + gap / 2 + i * pitch
        # every line of stones starts at a random offset (legged_gym draws the stones' positions)
        shift = rng.uniform(0.0, cfg.patch_size - n * pitch) if cfg.patch_size > n * pitch else 0.0
        for j in range(n):
            y0 = -half + gap / 2 + j * pitch + shift
            x1, y1 = x0 + size, min(y0 + size, half)
            if y1 <= y0 + 0.5 * size:
                continue
            if x0 < p and x1 > -p and y0 < p and y1 > -p:  # covered by the platform
                continue
            rects.append([x0, x1, y0, y1, 0.0])
    return rects, False


def _flat(cfg, difficulty, rng):
    return [], True


# Heightfield patches return the heights [n + 1, n + 1] of the patch's samples, rows along y,
# columns along x, n = patch_size / hfield_resolution, in patch coordinates (-s/2..s/2).

def _patch_samples(cfg: TerrainCfg) -> np.ndarray:
    n = int(round(cfg.patch_size / cfg.hfield_resolution))
    return np.linspace(-cfg.patch_size / 2, cfg.patch_size / 2, n + 1)


def _random_rough(cfg, difficulty, rng):
    """legged_gym terrain_utils.random_uniform_terrain: heights drawn uniformly from the multiples
    of `rough_step` in [-h, h] on a grid `rough_downsample` apart, interpolated bilinearly to the
    samples (legged_gym: scipy interp2d, kind linear) and rounded to the step."""
    h, step = _lerp(cfg.rough_height, difficulty), cfg.rough_step
    k = int(np.floor(h / step + 1e-9))
    levels = step * np.arange(-k, k + 1)
    fine = _patch_samples(cfg)
    coarse = np.linspace(-cfg.patch_size / 2, cfg.patch_size / 2, int(round(cfg.patch_size / cfg.rough_downsample)) + 1)
    drawn = rng.choice(levels, size=(len(coarse), len(coarse)))  # [y, x]
    along_x = np.stack([np.interp(fine, coarse, line) for line in drawn])  # [coarse y, fine x]
    heights = np.stack([np.interp(fine, coarse, along_x[:, c]) for c in range(len(fine))], axis=1)
    return np.round(heights / step) * step


def _pyramid_slope(cfg, difficulty, rng, inverted: bool):
    """legged_gym terrain_utils.pyramid_sloped_terrain (Isaac Lab hf pyramid_sloped_terrain):
    height = slope x half-side x tx x ty, with tx, ty tents (1 at the centre, 0 at the patch
    edge), clipped to its value at the platform's corner, which flattens the platform; down
    toward the centre for the inverted type."""
    slope = _lerp(cfg.slope, difficulty) * (-1.0 if inverted else 1.0)
    half = cfg.patch_size / 2
    tent = 1.0 - np.abs(_patch_samples(cfg)) / half
    heights = slope * half * tent[:, None] * tent[None, :]
    corner = slope * half * (1.0 - cfg.platform_size / 2 / half) ** 2
    return np.clip(heights, min(corner, 0.0), max(corner, 0.0))


HFIELD_PATCHES = {"random_rough": _random_rough,
                  "pyramid_slope": lambda c, d, r: _pyramid_slope(c, d, r, False),
                  "pyramid_slope_inv": lambda c, d, r: _pyramid_slope(c, d, r, True)}

PATCHES = {"flat": _flat, "pyramid_stairs": lambda c, d, r: _pyramid_stairs(c, d, r, False),
           "pyramid_stairs_inv": lambda c, d, r: _pyramid_stairs(c, d, r, True),
           "discrete_obstacles": _discrete_obstacles, "stepping_stones": _stepping_stones}


def _merge_ground(xs: np.ndarray, ys: np.ndarray, filled: np.ndarray) -> list[list[float]]:
    """Cover the filled cells of a grid with cell edges xs [n+1], ys [m+1] by few rectangles
    (greedy: grow along y, then along x while the whole span is filled)."""
    filled = filled.copy()
    rects = []
    for i in range(filled.shape[0]):
        for j in range(filled.shape[1]):
            if not filled[i, j]:
                continue
            j1 = j
            while j1 + 1 < filled.shape[1] and filled[i, j1 + 1]:
                j1 += 1
            i1 = i
            while i1 + 1 < filled.shape[0] and filled[i1 + 1, j:j1 + 1].all():
                i1 += 1
            filled[i:i1 + 1, j:j1 + 1] = False
            rects.append([xs[i], xs[i1 + 1], ys[j], ys[j1 + 1], 0.0])
    return rects


def _column_runs(types: list[str]) -> list[tuple[int, int]]:
    """(first, last) of each run of adjacent heightfield columns: one <hfield> geom each, since
    every field is a candidate pair with every robot geom (cost grows with their number, not
    their size: a pair only visits the cells under the robot geom)."""
    runs = []
    for j, name in enumerate(types):
        if name not in HEIGHTFIELD_TYPES:
            continue
        if runs and runs[-1][1] == j - 1:
            runs[-1] = (runs[-1][0], j)
        else:
            runs.append((j, j))
    return runs


def generate(cfg: TerrainCfg) -> Terrain:
    """The grid of `cfg`: deterministic in cfg (each patch draws from its own generator, seeded
    by (seed, row, col))."""
    types = column_types(cfg)
    s, rows, cols = cfg.patch_size, cfg.rows, cfg.cols
    n = int(round(s / cfg.hfield_resolution))  # cells per patch side in the height fields
    runs = _column_runs(types)
    run_of = {j: k for k, (j0, j1) in enumerate(runs) for j in range(j0, j1 + 1)}
    # [nrow, ncol] heights of each run: rows along y (its columns), columns along x (the rows)
    fields = [np.zeros(((j1 - j0 + 1) * n + 1, rows * n + 1)) for j0, j1 in runs]
    ground = np.zeros((rows + 2, cols + 2), dtype=bool)  # cells: border, patches, border
    ground[0, :] = ground[-1, :] = ground[:, 0] = ground[:, -1] = cfg.border > 0
    boxes, owner = [], []
    origins = np.zeros((rows, cols, 3))
    hfield_origin_z = {}
    for i in range(rows):
        difficulty = i / (rows - 1) if rows > 1 else 0.0
        for j in range(cols):
            rng = np.random.default_rng([cfg.seed, i, j])
            cx, cy = (i + 0.5) * s, (j + 0.5) * s
            origins[i, j, :2] = cx, cy
            if types[j] in HEIGHTFIELD_TYPES:
                heights = HFIELD_PATCHES[types[j]](cfg, difficulty, rng)
                r0 = (j - runs[run_of[j]][0]) * n
                # adjacent patches share their edge samples: the later patch's are kept
                fields[run_of[j]][r0:r0 + n + 1, i * n:(i + 1) * n + 1] = heights
                # legged_gym env_origin_z: the highest point within 1 m of the centre
                near = np.abs(_patch_samples(cfg)) <= min(1.0, s / 2) + 1e-9
                hfield_origin_z[i, j] = float(heights[np.ix_(near, near)].max())
                continue
            rects, on_ground = PATCHES[types[j]](cfg, difficulty, rng)
            ground[i + 1, j + 1] = on_ground
            for x0, x1, y0, y1, top in rects:
                boxes.append([cx + x0, cx + x1, cy + y0, cy + y1, top])
                owner.append((i, j))
    xs = np.concatenate([[-cfg.border], np.arange(rows + 1) * s, [rows * s + cfg.border]])
    ys = np.concatenate([[-cfg.border], np.arange(cols + 1) * s, [cols * s + cfg.border]])
    merged = _merge_ground(xs, ys, ground)
    step = s / n
    hfields = [HeightField.from_heights(0.0, j0 * s, step, step, heights, (j0, j1))
               for (j0, j1), heights in zip(runs, fields, strict=True)]
    terrain = Terrain(cfg=cfg, patch_types=[list(types) for _ in range(rows)],
                      boxes=np.array(merged + boxes, dtype=float).reshape(-1, 5),
                      box_patch=np.array([(-1, -1)] * len(merged) + owner, dtype=int).reshape(-1, 2),
                      origins=origins, floor_z=-cfg.pit_depth, hfields=hfields)
    deepest = min([terrain.boxes[:, 4].min(initial=0.0)] + [field.zmin for field in hfields])
    if deepest <= terrain.floor_z:
        raise ValueError(f"the terrain goes down to z={deepest:.3f}, at or below its floor "
                         f"(pit_depth={cfg.pit_depth}); raise terrain.pit_depth or lower step_height or slope")
    origins[:, :, 2] = terrain.height_at(origins[:, :, 0], origins[:, :, 1])
    for (i, j), z in hfield_origin_z.items():
        origins[i, j, 2] = max(z, origins[i, j, 2])
    return terrain


def add_terrain(spec: mujoco.MjSpec, cfg: TerrainCfg, floor: str = "floor") -> Terrain:
    """Generate `cfg`'s grid and add it to `spec`'s world body (in place): the plane geom named
    `floor` (added when the spec has none) is lowered to the bottom of the pits; boxes, named
    GEOM_PREFIX + their index in Terrain.boxes, and height fields (`<hfield>` assets and geoms,
    both named HFIELD_PREFIX + their index in Terrain.hfields) take its friction, condim, solref
    and solimp, contype 0 and its conaffinity, and the geom group TERRAIN_GROUP (the floor too).
    A height field's base reaches down to the floor plane (MuJoCo hfield size[3]). Returns the
    Terrain (`terrain_model` also sets its geom ids)."""
    terrain = generate(cfg)
    plane = next((g for g in spec.geoms if g.name == floor), None)
    if plane is None:
        plane = spec.worldbody.add_geom(name=floor, type=mujoco.mjtGeom.mjGEOM_PLANE, size=[0, 0, 0.05])
    elif plane.type != mujoco.mjtGeom.mjGEOM_PLANE:
        raise ValueError(f"terrain: geom {floor!r} must be a plane, it is a {mujoco.mjtGeom(plane.type).name}")
    plane.pos = [plane.pos[0], plane.pos[1], terrain.floor_z]
    plane.group = TERRAIN_GROUP
    conaffinity = plane.conaffinity or 1
    if cfg.robot_geoms is not None:
        by_name = {g.name: g for g in spec.geoms if g.name}
        missing = [n for n in cfg.robot_geoms if n not in by_name]
        if missing:
            raise ValueError(f"terrain.robot_geoms: the model has no geoms {missing}; its named geoms: "
                             f"{sorted(by_name)}")
        conaffinity = TERRAIN_BIT
        for name in cfg.robot_geoms:
            by_name[name].contype = by_name[name].contype | TERRAIN_BIT
    top = max(terrain.top, 1e-3)
    contact = dict(contype=0, conaffinity=conaffinity, condim=plane.condim, friction=plane.friction,
                   solref=plane.solref, solimp=plane.solimp, group=TERRAIN_GROUP)
    z0 = terrain.floor_z
    for k, (x0, x1, y0, y1, z1) in enumerate(terrain.boxes):
        shade = 0.35 + 0.5 * (z1 - z0) / (top - z0)
        spec.worldbody.add_geom(
            name=f"{GEOM_PREFIX}{k}", type=mujoco.mjtGeom.mjGEOM_BOX,
            pos=[(x0 + x1) / 2, (y0 + y1) / 2, (z0 + z1) / 2], size=[(x1 - x0) / 2, (y1 - y0) / 2, (z1 - z0) / 2],
            rgba=[shade * 0.8, shade * 0.85, shade, 1.0], **contact)
    for k, field in enumerate(terrain.hfields):
        name = f"{HFIELD_PREFIX}{k}"
        nrow, ncol = field.heights.shape
        # MuJoCo's hfield: size = (radius x, radius y, elevation z, base z); the surface is
        # geom z + elevation x size[2], elevations in [0, 1] (user data are rescaled to [0, 1]:
        # ours already span it, so MuJoCo keeps them as they are)
        spec.add_hfield(name=name, nrow=nrow, ncol=ncol, userdata=field.elevation.ravel().tolist(),
                        size=[(field.x1 - field.x0) / 2, (field.y1 - field.y0) / 2, field.zrange, field.zmin - z0])
        spec.worldbody.add_geom(
            name=name, type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname=name,
            pos=[(field.x0 + field.x1) / 2, (field.y0 + field.y1) / 2, field.zmin],
            rgba=[0.45, 0.5, 0.55, 1.0], **contact)
    return terrain


def terrain_model(mjcf_path, cfg: TerrainCfg, floor: str = "floor") -> tuple[mujoco.MjModel, Terrain]:
    """The robot of `mjcf_path` (a file, or an MjSpec, which gets the terrain) on `cfg`'s
    terrain: (compiled MjModel, Terrain)."""
    spec = mjcf_path if isinstance(mjcf_path, mujoco.MjSpec) else mujoco.MjSpec.from_file(str(mjcf_path))
    terrain = add_terrain(spec, cfg, floor)
    mjm = spec.compile()
    terrain.geom_ids = ([mjm.geom(f"{GEOM_PREFIX}{k}").id for k in range(terrain.num_boxes)]
                        + [mjm.geom(f"{HFIELD_PREFIX}{k}").id for k in range(terrain.num_hfields)])
    return mjm, terrain


def mjcf_with_terrain(mjcf_path, cfg: TerrainCfg, floor: str = "floor") -> str:
    """The robot of `mjcf_path` on `cfg`'s terrain as an MJCF string (for Sim.from_mjcf). Height
    field elevations pass through the XML's text: they differ from terrain_model's by up to about
    5e-7 of the field's range."""
    spec = mujoco.MjSpec.from_file(str(mjcf_path))
    add_terrain(spec, cfg, floor)
    spec.compile()
    return spec.to_xml()


__all__ = ["BOX_TYPES", "HEIGHTFIELD_TYPES", "TERRAIN_GROUP", "TYPES", "HeightField", "Terrain", "TerrainCfg",
           "add_terrain",
           "check_types", "column_types", "generate", "mjcf_with_terrain", "terrain_model"]
