"""Write the benchmark scenes of docs/BENCHMARKS.md "Meshes and height fields" that are generated
rather than shipped: icospheres of 12, 42, 162 and 642 vertices resting on the floor and on each
other (the cost of a mesh's vertex count), and the project's quadruped on a rough height field.

    python tools/make_collision_scenes.py --out /tmp/scenes
    python scripts/benchmark.py --model /tmp/scenes/icospheres_162.xml --worlds 64 --count-instructions \
        --steps 20 --engines simrl,mujoco
"""

import argparse
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]


def icosphere(subdivisions: int, radius: float) -> np.ndarray:
    """Vertices of an icosahedron subdivided `subdivisions` times onto the sphere (12, 42, 162, 642)."""
    phi = (1 + 5 ** 0.5) / 2
    verts = [np.array(p, float) for p in ((-1, phi, 0), (1, phi, 0), (-1, -phi, 0), (1, -phi, 0), (0, -1, phi),
                                          (0, 1, phi), (0, -1, -phi), (0, 1, -phi), (phi, 0, -1), (phi, 0, 1),
                                          (-phi, 0, -1), (-phi, 0, 1))]
    verts = [v / np.linalg.norm(v) for v in verts]
    faces = [(0, 11, 5), (0, 5, 1), (0, 1, 7), (0, 7, 10), (0, 10, 11), (1, 5, 9), (5, 11, 4), (11, 10, 2),
             (10, 7, 6), (7, 1, 8), (3, 9, 4), (3, 4, 2), (3, 2, 6), (3, 6, 8), (3, 8, 9), (4, 9, 5), (2, 4, 11),
             (6, 2, 10), (8, 6, 7), (9, 8, 1)]
    for _ in range(subdivisions):
        middle, refined = {}, []

        def mid(a, b, middle=middle):
            key = (min(a, b), max(a, b))
            if key not in middle:
                p = verts[a] + verts[b]
                verts.append(p / np.linalg.norm(p))
                middle[key] = len(verts) - 1
            return middle[key]

        for a, b, c in faces:
            ab, bc, ca = mid(a, b), mid(b, c), mid(c, a)
            refined += [(a, ab, ca), (b, bc, ab), (c, ca, bc), (ab, bc, ca)]
        faces = refined
    return radius * np.array(verts)


def icospheres_scene(subdivisions: int) -> str:
    v = icosphere(subdivisions, 0.05)
    vertex = " ".join(f"{x:.6f}" for x in v.ravel())
    z = -v[:, 2].min() - 0.001  # resting 1 mm into the floor
    return f"""<mujoco model="icospheres_{len(v)}">
  <option timestep="0.002"><flag multiccd="disable"/></option>
  <asset><mesh name="ball" vertex="{vertex}"/></asset>
  <worldbody>
    <geom type="plane" size="3 3 0.1"/>
    <body pos="0 0 {z:.6f}"><freejoint/><geom type="mesh" mesh="ball"/></body>
    <body pos="0.3 0 {z:.6f}"><freejoint/><geom type="mesh" mesh="ball"/></body>
    <body pos="0.35 0.01 {2 * z + 0.03:.6f}"><freejoint/><geom type="sphere" size="0.03"/></body>
    <body pos="0.04 0 {2 * z:.6f}"><freejoint/><geom type="mesh" mesh="ball"/></body>
  </worldbody>
</mujoco>
"""


def rough_quadruped(seed: int = 11, n: int = 41) -> str:
    """envs/assets/quadruped.xml with its floor replaced by an n x n height field of random bumps
    (4 cm high at most, over 4 m x 4 m)."""
    xml = (ROOT / "envs" / "assets" / "quadruped.xml").read_text()
    elevation = " ".join(f"{x:.4f}" for x in np.random.default_rng(seed).uniform(0, 1, n * n))
    floor = re.search(r'<geom name="floor"[^>]*/>', xml).group(0)
    xml = xml.replace(floor, '<geom name="floor" type="hfield" hfield="rough" contype="1" conaffinity="1"/>')
    asset = f'<asset><hfield name="rough" nrow="{n}" ncol="{n}" size="2 2 0.04 0.1" elevation="{elevation}"/></asset>'
    return xml.replace("<worldbody>", asset + "\n  <worldbody>", 1)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/simrl_scenes", help="directory to write the MJCF files to")
    out = Path(parser.parse_args().out)
    out.mkdir(parents=True, exist_ok=True)
    for k in range(4):
        xml = icospheres_scene(k)
        name = re.search(r'model="([^"]+)"', xml).group(1)
        (out / f"{name}.xml").write_text(xml)
        print(out / f"{name}.xml")
    (out / "quadruped_hfield.xml").write_text(rough_quadruped())
    print(out / "quadruped_hfield.xml")


if __name__ == "__main__":
    main()
