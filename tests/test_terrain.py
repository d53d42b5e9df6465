"""Terrain (envs/terrain.py: boxes and height fields), the height scan (envs/height_scan.py) and the
rough-terrain task (envs/rough.py, envs/quadruped_rough.py): generator determinism and geometry, difficulty
scaling of the heightfield types, the curriculum rule, the surface and the ray casts against
mujoco.mj_ray, spawning at patch centres, stepping on height fields, both backends."""

import dataclasses
from pathlib import Path

import mujoco
import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

import envs
from envs import ASSETS_DIR
from envs.height_scan import HeightScan
from envs.mdp.curriculum import update_terrain_levels
from envs.rough import edge_warning
from envs.terrain import BOX_TYPES, HEIGHTFIELD_TYPES, TERRAIN_GROUP, TerrainCfg, add_terrain, generate, terrain_model
from simrl.errors import ConfigError

ALL_TYPES = {name: 1.0 for name in BOX_TYPES}
HFIELD_TYPES = {name: 1.0 for name in HEIGHTFIELD_TYPES}
# height field runs split by box columns: random_rough | stairs | slope, slope_inv
MIXED = {"random_rough": 1.0, "pyramid_stairs_inv": 1.0, "pyramid_slope": 1.0, "pyramid_slope_inv": 1.0}
SMALL = {"rows": 2, "cols": 2, "types": {"pyramid_stairs": 1.0, "pyramid_stairs_inv": 1.0}, "border": 1.0}


def test_generator_is_deterministic_in_its_seed():
    cfg = TerrainCfg(rows=3, cols=5, types=ALL_TYPES, seed=3)
    a, b = generate(cfg), generate(cfg)
    assert np.array_equal(a.boxes, b.boxes) and np.array_equal(a.origins, b.origins)
    c = generate(dataclasses.replace(cfg, seed=4))
    assert a.boxes.shape != c.boxes.shape or not np.array_equal(a.boxes, c.boxes)
    # the random types differ, the deterministic ones (stairs) do not
    stairs = [k for k, (_, j) in enumerate(a.box_patch) if a.patch_types[0][j] == "pyramid_stairs"]
    stairs_c = [k for k, (_, j) in enumerate(c.box_patch) if c.patch_types[0][j] == "pyramid_stairs"]
    assert np.array_equal(a.boxes[stairs], c.boxes[stairs_c])


def test_columns_follow_the_proportions():
    assert generate(TerrainCfg(cols=5, types=ALL_TYPES)).patch_types[0] == list(BOX_TYPES)
    cfg = TerrainCfg(cols=4, types={"flat": 0.5, "pyramid_stairs": 0.5})
    assert generate(cfg).patch_types[0] == ["flat", "flat", "pyramid_stairs", "pyramid_stairs"]


def test_stairs_rise_and_fall_toward_the_centre_and_patches_stay_in_bounds():
    cfg = TerrainCfg(rows=3, cols=5, types=ALL_TYPES, seed=1)
    t = generate(cfg)
    s, h1 = cfg.patch_size, cfg.step_height[1]
    row = cfg.rows - 1  # difficulty 1
    steps = 4  # (4 m - 2 m platform) / 2 / 0.31 m, rounded up
    for j, kind in enumerate(t.patch_types[0]):
        x0, x1, y0, y1 = t.patch_bounds(row, j)
        cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
        line = t.height_at(np.linspace(x0 + 1e-3, cx, 200), np.full(200, cy))
        if kind == "pyramid_stairs":
            assert np.all(np.diff(line) >= 0) and line[0] == 0.0
            assert line[-1] == pytest.approx(steps * h1) and len(np.unique(line)) == steps + 1
        if kind == "pyramid_stairs_inv":
            assert np.all(np.diff(line) <= 0) and line[-1] == pytest.approx(-steps * h1)
        if kind == "stepping_stones":
            assert line.min() == t.floor_z and line.max() == 0.0  # stones at ground level over the pit
        assert t.origins[row, j, 2] == pytest.approx(t.height_at(cx, cy))
    for (i, j), (bx0, bx1, by0, by1, _) in zip(t.box_patch, t.boxes, strict=True):
        if i >= 0:
            x0, x1, y0, y1 = t.patch_bounds(i, j)
            assert x0 - 1e-9 <= bx0 < bx1 <= x1 + 1e-9 and y0 - 1e-9 <= by0 < by1 <= y1 + 1e-9
    # obstacles leave the central platform clear; ground, border included, is level
    assert t.height_at(*t.origins[row, 3, :2]) == 0.0
    assert t.height_at(-0.5 * cfg.border, 1.0) == 0.0 and t.height_at(1.0, 5 * s + 0.5 * cfg.border) == 0.0


def test_unknown_types_and_keys_are_refused():
    with pytest.raises(ValueError, match="unknown terrain type 'stairs'"):
        TerrainCfg(types={"stairs": 1.0})
    with pytest.raises(ValueError, match="unknown terrain keys"):
        TerrainCfg.from_dict({"row": 3})
    with pytest.raises(ValueError, match="hfield_resolution=0.3 must divide patch_size=4.0"):
        TerrainCfg(types=HFIELD_TYPES, hfield_resolution=0.3)


def test_heightfield_generator_is_deterministic_in_its_seed():
    cfg = TerrainCfg(rows=3, cols=3, types=HFIELD_TYPES, seed=3)
    a, b = generate(cfg), generate(cfg)
    assert a.num_hfields == 1 and a.num_boxes == 4  # one field for the three adjacent columns; the border
    assert np.array_equal(a.hfields[0].heights, b.hfields[0].heights) and np.array_equal(a.origins, b.origins)
    c = generate(dataclasses.replace(cfg, seed=4)).hfields[0].heights
    n = 40  # samples per patch side: 4 m / 0.1 m
    rough = np.s_[: n, :]  # column 0: random_rough (rows of samples along y)
    slopes = np.s_[n + 1:, :]
    assert not np.array_equal(a.hfields[0].heights[rough], c[rough])
    assert np.array_equal(a.hfields[0].heights[slopes], c[slopes])  # the slopes are not random
    # the field covers the three columns and every row, at 0.1 m
    field = a.hfields[0]
    assert field.heights.shape == (3 * n + 1, 3 * n + 1) and (field.x0, field.y0, field.dx) == (0.0, 0.0, 0.1)
    assert (field.x1, field.y1, field.columns) == (12.0, 12.0, (0, 2))


def test_heightfield_difficulty_scaling():
    cfg = TerrainCfg(rows=5, cols=3, types=HFIELD_TYPES, seed=0, pit_depth=1.0)
    t = generate(cfg)
    field, n, step = t.hfields[0], 40, cfg.rough_step
    rough_max, slopes = [], []
    for i in range(cfg.rows):
        d = i / (cfg.rows - 1)
        h = cfg.rough_height[0] + (cfg.rough_height[1] - cfg.rough_height[0]) * d
        patch = field.heights[0:n, i * n:(i + 1) * n]  # the shared edges hold the next patch's samples
        rough_max.append(np.abs(patch).max())
        # heights are multiples of rough_step within [-h, h], the extremes drawn on 21 x 21 coarse points
        assert np.allclose(patch / step, np.round(patch / step), atol=1e-4)
        assert rough_max[-1] == pytest.approx(np.floor(h / step + 1e-9) * step, abs=1e-6)
        slope = cfg.slope[0] + (cfg.slope[1] - cfg.slope[0]) * d
        slopes.append(slope)
        x0, x1, _, _ = t.patch_bounds(i, 1)
        xs = np.linspace(x0, x0 + 0.5, 6)
        for col, sign in ((1, 1.0), (2, -1.0)):  # pyramid_slope, pyramid_slope_inv
            cy = (col + 0.5) * cfg.patch_size
            line = t.height_at(xs, np.full(6, cy))
            # along the centre line the slope rises (falls) at `slope` from the edge (legged_gym)
            assert np.allclose(np.diff(line) / 0.1, sign * slope, atol=1e-5)
            # the platform: slope x half x (1 - platform / patch)^2 = 0.5 slope with the defaults
            assert t.origins[i, col, 2] == pytest.approx(sign * 0.5 * slope, abs=1e-6)
            assert t.height_at((x0 + x1) / 2 + 0.7, cy) == pytest.approx(sign * 0.5 * slope, abs=1e-6)
    assert all(np.diff(rough_max) > 0) and rough_max[0] <= 0.01 + 1e-6  # near flat at difficulty 0
    assert np.abs(field.heights[n + 1:, 0:n + 1]).max() == 0.0  # the slopes are flat at difficulty 0


def _mj_ray_down(mjm, points, start_z):
    """Hit z of mujoco.mj_ray straight down from (x, y, start_z) onto the terrain group's geoms."""
    mjd = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, mjd)
    group = np.zeros(6, np.uint8)
    group[TERRAIN_GROUP] = 1  # the terrain and the floor, not the robot
    geomid = np.zeros(1, np.int32)
    down = np.array([0.0, 0.0, -1.0])
    return np.array([start_z - mujoco.mj_ray(mjm, mjd, np.array([x, y, start_z]), down, group, 1, -1, geomid)
                     for x, y in points])


def test_height_at_matches_mj_ray_on_height_fields():
    mjm, t = terrain_model(ASSETS_DIR / "quadruped.xml", TerrainCfg(rows=3, cols=4, types=MIXED, seed=5))
    assert t.num_hfields == 2 and [f.columns for f in t.hfields] == [(0, 0), (2, 3)]
    rng = np.random.default_rng(1)
    points = np.stack([rng.uniform(-1, 13, 4000), rng.uniform(-1, 17, 4000)], axis=1)
    reference = _mj_ray_down(mjm, points, 3.0)
    assert np.abs(t.height_at(points[:, 0], points[:, 1]) - reference).max() < 1e-9
    as_torch = t.height_at(torch.tensor(points[:, 0], dtype=torch.float32), torch.tensor(points[:, 1],
                                                                                       dtype=torch.float32))
    assert np.abs(as_torch.numpy() - reference).max() < 2e-5
    assert len(np.unique(np.round(reference, 3))) > 100  # rough and sloped surfaces, not a few levels


def test_terrain_boxes_collide_with_the_robot_only():
    mjm, t = terrain_model(ASSETS_DIR / "quadruped.xml", TerrainCfg(**SMALL))
    assert mjm.geom("floor").pos[2] == t.floor_z == -1.0
    from simrl.sim.contact_tables import candidate_geom_pairs

    terrain = set(t.geom_ids) | {mjm.geom("floor").id}
    pairs = candidate_geom_pairs(mjm)
    assert all(not (g1 in terrain and g2 in terrain) for g1, g2, _ in pairs)
    robot = [g for g in range(mjm.ngeom) if mjm.geom_bodyid[g] != 0]
    assert len(pairs) == (len(t.geom_ids) + 1) * len(robot)
    only = dataclasses.replace(TerrainCfg(**SMALL), robot_geoms=("FR_foot", "trunk"))
    mjm2, t2 = terrain_model(ASSETS_DIR / "quadruped.xml", only)
    assert len(candidate_geom_pairs(mjm2)) == len(t2.geom_ids) * 2 + len(robot)
    with pytest.raises(ValueError, match="no geoms \\['FR_toe'\\]"):
        terrain_model(ASSETS_DIR / "quadruped.xml", dataclasses.replace(only, robot_geoms=("FR_toe",)))


def test_curriculum_rule():
    # patch 4 m: up beyond 2 m; down below |cmd| * 20 s * 0.5; past the top: the random row
    levels = torch.tensor([0, 2, 2, 2, 4, 0])
    distance = torch.tensor([2.5, 1.0, 3.0, 1.0, 2.1, 0.0])
    command = torch.tensor([[0.0, 0.0], [0.3, 0.4], [1.0, 0.0], [0.05, 0.0], [1.0, 0.0], [1.0, 0.0]])
    new = update_terrain_levels(levels, distance, command, 4.0, 20.0, 5, torch.full((6,), 3))
    assert new.tolist() == [1, 1, 3, 2, 3, 0]


def _random_poses(rng, n, x_range, y_range):
    pose = np.zeros((n, 7))
    pose[:, 0] = rng.uniform(*x_range, n)
    pose[:, 1] = rng.uniform(*y_range, n)
    pose[:, 2] = rng.uniform(-0.6, 1.2, n)
    q = rng.normal(size=(n, 4))
    pose[:, 3:] = q / np.linalg.norm(q, axis=1, keepdims=True)
    return pose


def _scan_reference(mjm, scan, pose):
    """mj_ray's hit z for every ray of `scan` at base poses [n, 7] (the pattern turned by the yaw)."""
    points = []
    for qw, qx, qy, qz in pose[:, 3:]:
        yaw = np.arctan2(2 * (qw * qz + qx * qy), 1 - 2 * (qy * qy + qz * qz))
        c, s = np.cos(yaw), np.sin(yaw)
        points.append(np.stack([c * scan.pattern[:, 0] - s * scan.pattern[:, 1],
                                s * scan.pattern[:, 0] + c * scan.pattern[:, 1]], axis=1))
    points = np.stack(points) + pose[:, None, :2]
    return _mj_ray_down(mjm, points.reshape(-1, 2), scan.start_z).reshape(len(pose), -1)


def test_height_scan_matches_mj_ray():
    mjm, t = terrain_model(ASSETS_DIR / "quadruped.xml", TerrainCfg(rows=3, cols=5, types=ALL_TYPES, seed=2))
    scan = HeightScan(mjm, [mjm.geom("floor").id] + t.geom_ids, "cpu")
    assert scan.num_rays == 17 * 11
    pose = _random_poses(np.random.default_rng(0), 16, (-2, 3 * 4 + 2), (-2, 5 * 4 + 2))
    hit = scan.hit_z(torch.tensor(pose)).numpy()
    reference = _scan_reference(mjm, scan, pose)
    assert np.abs(hit - reference).max() < 2e-6
    assert len(np.unique(np.round(reference, 3))) > 5  # the rays met boxes at several heights and the pit floor
    heights = scan.heights(torch.tensor(pose)).numpy()
    assert np.allclose(heights, np.clip(pose[:, 2:3] - reference - 0.5, -1, 1), atol=2e-6)


def test_height_scan_matches_mj_ray_on_height_fields():
    spec = mujoco.MjSpec.from_file(str(ASSETS_DIR / "quadruped.xml"))
    t = add_terrain(spec, TerrainCfg(rows=3, cols=4, types=MIXED, seed=5))
    # one more field beyond the grid, turned about z by 0.5 rad, raised, with a coarse odd grid
    spec.add_hfield(name="extra", nrow=7, ncol=5, size=[1.5, 1.0, 0.4, 0.2],
                    userdata=np.random.default_rng(2).uniform(0, 1, 35).tolist())
    spec.worldbody.add_geom(name="extra", type=mujoco.mjtGeom.mjGEOM_HFIELD, hfieldname="extra", pos=[6, -4, 0.3],
                            quat=[np.cos(0.25), 0, 0, np.sin(0.25)], group=TERRAIN_GROUP, contype=0, conaffinity=0)
    mjm = spec.compile()
    geoms = [mjm.geom(n).id for n in ["floor", "extra"] + [g.name for g in spec.geoms if g.name.startswith("terrain_")]]
    scan = HeightScan(mjm, geoms, "cpu")
    assert scan.start_z == pytest.approx(max(t.top, 0.7) + 1.0)
    rng = np.random.default_rng(3)
    pose = np.concatenate([_random_poses(rng, 12, (-1, 13), (-1, 17)), _random_poses(rng, 4, (4.5, 7.5), (-5, -3))])
    hit = scan.hit_z(torch.tensor(pose)).numpy()
    reference = _scan_reference(mjm, scan, pose)
    assert np.abs(hit - reference).max() < 2e-6  # measured: 4.8e-7 (float32 kernel)
    assert len(np.unique(np.round(reference[-4:], 3))) > 50  # the rays of the last poses met the turned field
    # a field tilted off the vertical is refused by name
    next(g for g in spec.geoms if g.name == "extra").quat = [np.cos(0.1), np.sin(0.1), 0, 0]
    tilted = spec.compile()
    with pytest.raises(ValueError, match="height field geom 'extra' is tilted"):
        HeightScan(tilted, [tilted.geom("extra").id], "cpu")


def test_height_scan_cells_change_no_hit():
    """The grid of cells that lists the geoms under each ray gives the same hits, bit for bit,
    as testing every geom (cell_size=None), at random poses and at rays on cell boundaries;
    every bounded geom is listed in the cell under its centre."""
    spec = mujoco.MjSpec.from_file(str(ASSETS_DIR / "quadruped.xml"))
    add_terrain(spec, TerrainCfg(rows=3, cols=6, types=ALL_TYPES, seed=4))
    mjm = spec.compile()
    geoms = [mjm.geom("floor").id] + [mjm.geom(g.name).id for g in spec.geoms if g.name.startswith("terrain_")]
    culled, every = HeightScan(mjm, geoms, "cpu", cell_size=0.5), HeightScan(mjm, geoms, "cpu", cell_size=None)
    assert culled.grid_shape.prod() > 100 and tuple(every.grid_shape) == (1, 1)
    rng = np.random.default_rng(5)
    pose = _random_poses(rng, 24, (-2, 3 * 4 + 2), (-2, 6 * 4 + 2))
    on_edges = pose[:4].copy()
    on_edges[:, :2] = culled.grid_origin + culled.cell_size * rng.integers(1, 20, (4, 2))
    on_edges[:, 3:] = [1.0, 0.0, 0.0, 0.0]  # unturned: the grid's middle ray lies on a cell corner
    pose = np.concatenate([pose, on_edges])
    a, b = culled.hit_z(torch.tensor(pose)).numpy(), every.hit_z(torch.tensor(pose)).numpy()
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(np.round(b, 3))) > 5
    starts = culled._cell_start.numpy()
    listed = culled._cell_geoms.numpy()
    for k, g in enumerate(geoms[1:], start=1):  # the floor is an infinite plane: everywhere
        i, j = np.floor((mjm.geom_pos[g][:2] - culled.grid_origin) / culled.cell_size).astype(int)
        cell = i * culled.grid_shape[1] + j
        assert k in listed[starts[cell]:starts[cell + 1]]
    assert culled._everywhere.numpy()[:culled._n_everywhere].tolist() == [0]


HFIELD_SMALL = {**SMALL, "types": {"random_rough": 1.0, "pyramid_slope": 1.0}}


def _rough(backend="warp", num_envs=4, terrain=SMALL, **kwargs):
    return envs.make("quadruped_rough", num_envs=num_envs, device="cpu", seed=0, backend=backend,
                     terrain={**terrain, "max_init_level": 1}, **kwargs)


def test_edge_warning():
    """A world on an outer patch is patch_size / 2 + border from the terrain's edge and walks at
    most |command_xy|max x episode length; farther than that, it would drop to the floor plane."""
    cfg = TerrainCfg(**SMALL)  # border 1 m, 4 m patches: 3 m to the edge
    problem = edge_warning(cfg, [-1.0, 1.0], [-0.5, 0.5], 20.0)  # hypot(1, 0.5) x 20 s = 22.4 m
    assert "terrain.border=1 m" in problem and "22.4 m" in problem and "terrain.border >= 21" in problem
    assert edge_warning(dataclasses.replace(cfg, border=21.0), [-1.0, 1.0], [-0.5, 0.5], 20.0) is None
    assert edge_warning(dataclasses.replace(cfg, border=20.0), [-1.0, 1.0], [-0.5, 0.5], 20.0) is not None
    assert edge_warning(cfg, [0.0, 0.1], [0.0, 0.0], 20.0) is None  # 2 m of walking
    assert edge_warning(dataclasses.replace(cfg, border=0.0), [0.0, 0.0], [0.0, 0.0], 1.0) is not None
    # the rough tasks' own terrains keep every world on level ground
    for name in ("quadruped_rough", "humanoid_rough"):
        task = OmegaConf.load(Path(envs.__file__).parents[1] / "tasks" / f"{name}.yaml")
        terrain = TerrainCfg.from_dict(OmegaConf.to_container(task.terrain))
        velocity = task.env.commands.base_velocity
        assert edge_warning(terrain, velocity.lin_vel_x, velocity.lin_vel_y, task.env.episode_length_s) is None, name
    with pytest.warns(UserWarning, match="terrain.border=1 m"):
        _rough(num_envs=1)


def test_env_spawns_at_patch_centres_and_moves_up_the_curriculum():
    env = _rough()
    obs = env.reset()
    assert obs["critic"].shape == (4, 53 + 187) and obs["policy"].shape == (4, 48)
    assert env.terrain_types.tolist() == [0, 0, 1, 1]
    origins = env.terrain_origins[env.terrain_levels, env.terrain_types]
    assert torch.allclose(env.sim.qpos[:, :3], env.home_qpos[:3] + origins)
    assert torch.equal(env.env_origins, origins)
    # world 0 walked 3 m (> half of the 4 m patch): next row; world 1 stood still on a 1 m/s command: down
    env.episode_length_buf[:] = 10
    env.sim.qpos[0, 0] += 3.0
    env.commands[1] = torch.tensor([1.0, 0.0, 0.0])
    env.terrain_levels[:] = torch.tensor([0, 1, 0, 0])
    env.env_origins[:] = env.terrain_origins[env.terrain_levels, env.terrain_types]
    env.commands[2:] = 0.0
    env._reset(torch.tensor([0, 1]))
    assert env.terrain_levels.tolist() == [1, 0, 0, 0]
    assert torch.allclose(env.sim.qpos[:2, :3], env.home_qpos[:3] + env.terrain_origins[[1, 0], [0, 0]])
    _, _, _, _, extras = env.step(torch.zeros(4, 12))
    assert extras["log"]["Curriculum/terrain_level"] == pytest.approx(0.25)


def test_command_curriculum_widens_the_ranges_and_a_saved_env_keeps_them():
    """legged_gym's update_command_curriculum: at a step that is a multiple of the episode
    length, when the worlds ending then earned more than 80% of the largest tracking reward,
    lin_vel_x's range widens by 0.5 m/s each way (up to max_lin_vel_x); state_dict keeps the
    widened ranges and the step counter, so a resumed run goes on as the uninterrupted one."""
    def ending_env(tracking_share):
        env = _rough(curriculum={"terrain_levels": {}, "command_vel": {}})
        env.reset()
        n = env.max_episode_length
        env._steps = n - 1  # the next step is the curriculum's
        env.episode_length_buf[:] = n - 1  # every world times out on it
        best = env.reward_weights["tracking_lin_vel"] * env.step_dt * n
        env.episode_sums["tracking_lin_vel"][:] = tracking_share * best
        return env

    env = ending_env(0.5)  # tracked poorly: the ranges stay
    env.step(torch.zeros(4, 12))
    assert env.command_ranges[0].tolist() == [-1.0, 1.0]
    env = ending_env(0.9)
    _, _, _, time_outs, extras = env.step(torch.zeros(4, 12))
    assert time_outs.all()
    assert env.command_ranges[0].tolist() == [-1.5, 1.5]
    assert env.command_ranges[1:].tolist() == [[-0.5, 0.5], [-1.0, 1.0]]
    assert float(extras["log"]["Curriculum/max_lin_vel_x"]) == 1.5
    for _ in range(3):
        env.step(torch.zeros(4, 12))
    state = env.state_dict()
    resumed = _rough(curriculum={"terrain_levels": {}, "command_vel": {}})
    resumed.reset()
    resumed.load_state_dict(state)
    assert resumed.command_ranges.tolist() == env.command_ranges.tolist() and resumed._steps == env._steps
    for _ in range(2):
        a, b = env.step(torch.full((4, 12), 0.1)), resumed.step(torch.full((4, 12), 0.1))
        assert torch.equal(a[0]["critic"], b[0]["critic"]) and torch.equal(a[1], b[1])
    # a state naming shared state this env does not keep is refused by name
    state["shared"]["lin_vel_range"] = 3.0
    with pytest.raises(ValueError, match="shared state 'lin_vel_range'"):
        resumed.load_state_dict(state)


def test_quadruped_steps_on_height_fields():
    env = _rough(terrain=HFIELD_SMALL)
    env.reset()
    t = env.terrain
    assert (t.num_hfields, t.num_boxes) == (1, 4)  # one field for both columns, the border's boxes
    # spawn: the home height above the highest sample within 1 m of the patch centre
    origins = env.terrain_origins[env.terrain_levels, env.terrain_types]
    assert torch.allclose(env.sim.qpos[:, 2].float(), env.home_qpos[2].float() + origins[:, 2])
    assert float(origins[env.terrain_types == 0, 2].min()) > 0.0  # row 1 of random_rough is not flat
    for _ in range(10):
        obs, _, terminated, _, _ = env.step(torch.zeros(4, 12))
    assert torch.isfinite(obs["critic"]).all() and not terminated.any()
    # every foot of every world stands on the height field, not deep in it
    mjm, contact = env.sim.mj_model, env.sim.contact
    field = set(t.geom_ids[t.num_boxes:])
    tables = env.sim.model.contact_tables
    for leg in ("FR", "FL", "RR", "RL"):
        foot = mjm.geom(f"{leg}_foot").id
        pair = next(p for p, g in enumerate(tables["geom"]) if foot in g and field & set(g))
        assert tables["nslot"][pair] == 8  # 2 x 2 cells of 0.1 m under a 2 cm sphere, two prisms each
        on = contact.active & (contact.pair == pair)
        assert on.any(dim=1).all()
        assert float(contact.dist[on].min()) > -0.01
    assert ((env.base_height() > 0.2) & (env.base_height() < 0.4)).all()
    # the base height the termination reads (one ray under the base) is Terrain.height_at's
    q = env.sim.qpos.float()
    reference = q[:, 2] - torch.as_tensor(t.height_at(q[:, 0].numpy().astype(np.float64),
                                                      q[:, 1].numpy().astype(np.float64)), dtype=torch.float32)
    assert torch.allclose(env.base_height(), reference, atol=1e-6, rtol=0)


@pytest.mark.parametrize("terrain", [SMALL, HFIELD_SMALL], ids=["boxes", "height_fields"])
def test_the_mujoco_backend_runs_the_same_scene(terrain):
    warp_env, mj_env = _rough("warp", 2, terrain), _rough("mujoco", 2, terrain)
    a, b = warp_env.reset(), mj_env.reset()
    assert torch.allclose(a["critic"], b["critic"].float(), atol=1e-4)
    for _ in range(2):
        a = warp_env.step(torch.zeros(2, 12))[0]
        b = mj_env.step(torch.zeros(2, 12))[0]
    assert torch.allclose(a["critic"], b["critic"].float(), atol=1e-2)


def test_task_terrain_keys_are_checked():
    from omegaconf import OmegaConf

    import tasks
    from tasks.config import env_kwargs, validate

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / "quadruped_rough.yaml"))
    validate({"task": task})
    assert env_kwargs(task)["terrain"] == task["terrain"]
    bad = {**task, "terrain": {**task["terrain"], "rowz": 3, "types": {"random_rugged": 1.0}}}
    with pytest.raises(ConfigError) as info:
        validate({"task": bad})
    assert "unknown key task.terrain.rowz; did you mean 'rows'?" in str(info.value)
    assert "unknown terrain type 'random_rugged'" in str(info.value)
    validate({"task": {**task, "terrain": {**task["terrain"], "types": {"random_rough": 1.0, "pyramid_slope": 1.0}}}})
    with pytest.raises(ConfigError, match="task.env.terrain: set the task's terrain section"):
        validate({"task": {**task, "env": {**task["env"], "terrain": {}}}})
