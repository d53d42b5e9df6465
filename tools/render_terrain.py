#!/usr/bin/env python
"""Render a rough-terrain task's grid to a PNG: the robot in its home pose at the centre of
every patch (where the environment's resets put it), seen from above a corner.

    python tools/render_terrain.py [--task quadruped_rough] [--all-types] [--out terrain.png]

`--all-types` gives every column its own type (the five of BOX_TYPES, then the three of
HEIGHTFIELD_TYPES); rows go up in difficulty along +x. The scene is the environment's own model
(envs.make: the robot's MJCF with the terrain added by MjSpec); one MjData per patch, the first
drawn by mujoco.Renderer and the robots of the others added to the same scene (mjv_addGeoms).
MuJoCo renders offscreen with the OpenGL backend in MUJOCO_GL (default here: egl, which Mesa
also provides on a machine without a GPU).
"""
import argparse
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "egl")  # before mujoco is imported: it picks the backend once
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import mujoco  # noqa: E402
import numpy as np  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

import envs  # noqa: E402
import tasks  # noqa: E402
from envs.terrain import BOX_TYPES, HEIGHTFIELD_TYPES, column_types  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="quadruped_rough", choices=["quadruped_rough", "humanoid_rough"])
    parser.add_argument("--all-types", action="store_true", help="one column per terrain type")
    parser.add_argument("--out", default="terrain.png")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    args = parser.parse_args(argv)

    task = OmegaConf.to_container(OmegaConf.load(tasks.TASKS_DIR / f"{args.task}.yaml"), resolve=True)
    terrain = dict(task["terrain"])
    if args.all_types:
        types = (*BOX_TYPES, *HEIGHTFIELD_TYPES)
        terrain.update(cols=len(types), types={t: 1.0 for t in types})
    env_cfg = {**task["env"], "terrain": terrain}
    env_cfg.pop("randomization", None)
    env = envs.make(args.task, num_envs=1, device="cpu", seed=0, **env_cfg)
    mjm = env.sim.mj_model
    origins = env.terrain_origins.double().numpy()  # [rows, cols, 3]
    rows, cols = origins.shape[:2]
    home = env.home_qpos.double().numpy()

    poses = []
    for r in range(rows):
        for c in range(cols):
            data = mujoco.MjData(mjm)
            data.qpos[:] = home
            data.qpos[0:3] = home[0:3] + origins[r, c]
            mujoco.mj_forward(mjm, data)
            poses.append(data)

    mjm.vis.global_.offwidth = max(mjm.vis.global_.offwidth, args.width)
    mjm.vis.global_.offheight = max(mjm.vis.global_.offheight, args.height)
    mjm.vis.quality.shadowsize = 4096
    camera = mujoco.MjvCamera()
    centre = origins.reshape(-1, 3).mean(axis=0)
    extent = float(np.ptp(origins[..., 0]) + np.ptp(origins[..., 1])) + 2 * env.terrain_cfg.patch_size
    camera.lookat[:] = centre
    camera.distance = 0.62 * extent
    camera.azimuth, camera.elevation = 225.0, -35.0
    with mujoco.Renderer(mjm, args.height, args.width) as renderer:
        renderer.update_scene(poses[0], camera)
        option, perturb = mujoco.MjvOption(), mujoco.MjvPerturb()
        for data in poses[1:]:  # the moving geoms (the robot) of every other patch
            mujoco.mjv_addGeoms(mjm, data, option, perturb, mujoco.mjtCatBit.mjCAT_DYNAMIC, renderer.scene)
        pixels = renderer.render()
    from PIL import Image

    Image.fromarray(pixels).save(args.out)
    print(f"wrote {args.out}: {rows} rows x {cols} columns of {env.terrain_cfg.patch_size} m patches "
          f"(columns: {', '.join(column_types(env.terrain_cfg))})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
