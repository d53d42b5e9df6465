#!/usr/bin/env python
"""Which models of a corpus of MJCF files simrl loads and matches MuJoCo on: issue 52's count
over MuJoCo Warp's and MJX's test models.

    python tools/model_corpus.py                       # MuJoCo Warp's test_data (the installed package)
    python tools/model_corpus.py DIR [DIR ...] [--converged] --json out.json

A directory is searched for *.xml files (recursively); a file MuJoCo does not compile (an
include, an asset, a plugin it lacks) is left out of the count. For each other file, simrl
loads it in float64 on the CPU (Sim.from_model, one world), or refuses it (the reason is its
error's first line). A loaded model matches when, from qpos0 and from each keyframe (at most
three), mj_forward's qacc and sim.forward's agree within --tol relative to max(1, |qacc|), and
after --steps steps of mj_step and sim.step from the first of those states qpos agrees within
--tol (quaternions up to sign). A model whose contacts or rows outgrow simrl's default budgets is
run again with the budgets the overflow warning names (Sim(nconmax=..., njmax=...)).
"""

import argparse
import json
import re
import sys
import warnings
from pathlib import Path

import mujoco
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from simrl import Sim  # noqa: E402


def mujoco_warp_test_data() -> Path:
    import mujoco_warp

    return Path(mujoco_warp.__file__).parent / "test_data"


def states(mjm: mujoco.MjModel) -> list[mujoco.MjData]:
    """qpos0 at rest, then each keyframe (at most three), each after mj_forward."""
    out = []
    for key in [None, *range(min(mjm.nkey, 3))]:
        md = mujoco.MjData(mjm)
        if key is not None:
            mujoco.mj_resetDataKeyframe(mjm, md, key)
        mujoco.mj_forward(mjm, md)
        out.append(md)
    return out


def set_state(sim: Sim, md: mujoco.MjData) -> None:
    """md's state, and its warm start: a solve that stops before convergence (a few iterations, a
    loose tolerance) ends where its start leads it, and sim.forward, unlike mj_forward, saves its
    solution as the next warm start."""
    for name in ("qpos", "qvel", "ctrl", "act", "mocap_pos", "mocap_quat"):
        value = getattr(md, name)
        if value.size:
            setattr(sim, name, torch.as_tensor(value[None], dtype=sim.torch_dtype))
    if md.qacc_warmstart.size:
        sim.view("qacc_warmstart")[0] = torch.as_tensor(md.qacc_warmstart, dtype=sim.torch_dtype)


def quaternion_distance(mjm: mujoco.MjModel, a: np.ndarray, b: np.ndarray) -> float:
    dif = np.abs(a - b)
    for j in range(mjm.njnt):
        kind, adr = int(mjm.jnt_type[j]), int(mjm.jnt_qposadr[j])
        start = adr + 3 if kind == mujoco.mjtJoint.mjJNT_FREE else adr
        if kind in (mujoco.mjtJoint.mjJNT_FREE, mujoco.mjtJoint.mjJNT_BALL):
            s = slice(start, start + 4)
            dif[s] = np.minimum(np.abs(a[s] - b[s]), np.abs(a[s] + b[s]))
    return float(dif.max()) if dif.size else 0.0


def compare(mjm: mujoco.MjModel, sim: Sim, steps: int) -> tuple[float, float]:
    """(the largest relative qacc difference over the states, the qpos difference after `steps`)."""
    worst = 0.0
    starts = states(mjm)
    for md in starts:
        set_state(sim, md)
        sim.forward()
        if mjm.nv:
            scale = max(1.0, float(np.abs(md.qacc).max()))
            worst = max(worst, float(np.abs(sim.qacc[0].numpy() - md.qacc).max()) / scale)
    md = starts[0]
    set_state(sim, md)
    for _ in range(steps):
        mujoco.mj_step(mjm, md)
    sim.step(steps)
    return worst, quaternion_distance(mjm, sim.qpos[0].numpy(), md.qpos)


def check(path: Path, tol: float, steps: int, converged: bool = False) -> dict:
    """One model's row: MuJoCo refuses it, simrl refuses it (the reason), or the comparison. When
    the contact or row budget (nconmax, njmax) overflows, the run is repeated with the budgets
    the overflow warning asks for (up to three times)."""
    try:
        mjm = mujoco.MjModel.from_xml_path(str(path))
    except Exception as e:  # noqa: BLE001 -- MuJoCo's own refusal: out of the count
        return {"model": str(path), "status": "mujoco refuses", "reason": str(e).strip().splitlines()[0]}
    if converged:
        # both solvers to their optimum: tells a difference in the solution apart from one in
        # where a capped solve stops (which simrl reproduces: its Newton solver is MuJoCo's)
        mjm.opt.iterations = max(int(mjm.opt.iterations), 1000)
        mjm.opt.ls_iterations = max(int(mjm.opt.ls_iterations), 50)
        mjm.opt.tolerance = 1e-15
    budgets = {}
    for _ in range(4):
        try:
            sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu", **budgets)
        except Exception as e:  # noqa: BLE001 -- the refusal's message is the finding
            return {"model": str(path), "status": "refused",
                    "reason": f"{type(e).__name__}: " + " ".join(str(e).split())}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            qacc, qpos = compare(mjm, sim, steps)
        asked = {k: int(v) for w in caught for k, v in re.findall(r"Sim\((nconmax|njmax)=(\d+)\)", str(w.message))}
        if not asked:
            break
        budgets = {k: max(budgets.get(k, 0), asked.get(k, 0)) or None for k in ("nconmax", "njmax")}
        budgets = {k: v for k, v in budgets.items() if v}
    ok = qacc < tol and qpos < tol
    return {"model": str(path), "status": "match" if ok else "mismatch", "qacc": qacc, "qpos": qpos,
            "budgets": budgets}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dirs", nargs="*", type=Path, help="directories of MJCF files (default: MuJoCo Warp's test_data)")
    p.add_argument("--tol", type=float, default=1e-6, help="relative tolerance of qacc and qpos (default 1e-6)")
    p.add_argument("--steps", type=int, default=20, help="mj_step / sim.step steps compared (default 20)")
    p.add_argument("--converged", action="store_true",
                   help="solve each model's constraints to convergence in both engines (iterations >= 1000, "
                        "ls_iterations >= 50, tolerance 1e-15) instead of at the model's solver settings")
    p.add_argument("--json", type=Path, help="write the rows as JSON to this file")
    args = p.parse_args(argv)
    rows = []
    for root in args.dirs or [mujoco_warp_test_data()]:
        for path in sorted(root.rglob("*.xml")):
            row = check(path, args.tol, args.steps, args.converged)
            row["model"] = str(path.relative_to(root.parent))
            rows.append(row)
            detail = row.get("reason") or f"qacc {row['qacc']:.1e}, qpos {row['qpos']:.1e}" + (
                f" (budgets {row['budgets']})" if row["budgets"] else "")
            print(f"{row['status']:15s} {row['model']}: {detail}", flush=True)
    compiled = [r for r in rows if r["status"] != "mujoco refuses"]
    matched = [r for r in compiled if r["status"] == "match"]
    loaded = [r for r in compiled if r["status"] != "refused"]
    print(f"\nMuJoCo compiles {len(compiled)} of {len(rows)}; simrl loads {len(loaded)} and matches "
          f"{len(matched)}: {len(matched)}/{len(compiled)} = {100 * len(matched) / max(1, len(compiled)):.1f}%")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
