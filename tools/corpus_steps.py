#!/usr/bin/env python
"""Where a corpus model's forward parts from MuJoCo's along MuJoCo's own trajectory: from
MuJoCo's state at each of --steps `mj_step` steps (qpos, qvel, ctrl, warm start, as
tools/model_corpus.py sets them), simrl's `sim.forward` (float64, CPU, one world) against
`mj_forward`: the largest qacc difference, and each geom pair whose contacts (dist, pos,
normal, matched by pair, each of MuJoCo's to simrl's nearest) differ by more than --tol or
come in another number.

    python tools/corpus_steps.py path/to/aloha_pot/scene.xml --steps 20 --nconmax 3370
"""

import argparse
import sys
import warnings
from pathlib import Path

import mujoco
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from model_corpus import set_state  # noqa: E402

from simrl import Sim  # noqa: E402


def contacts_by_pair(mjd: mujoco.MjData, sim: Sim) -> dict:
    """{geom pair: ([MuJoCo's (dist, pos, normal)], [simrl's])}."""
    con, pairs = sim.contact, {}
    for c in mjd.contact[:mjd.ncon]:
        pairs.setdefault((int(c.geom[0]), int(c.geom[1])), ([], []))[0].append(
            (c.dist, c.pos.copy(), c.frame[:3].copy()))
    for s in np.flatnonzero(con.active[0].numpy()):
        pairs.setdefault(tuple(con.geom[0, s].tolist()), ([], []))[1].append(
            (con.dist[0, s].item(), con.pos[0, s].numpy(), con.frame[0, s, 0].numpy()))
    return pairs


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("model", type=Path)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--nconmax", type=int, default=None)
    p.add_argument("--tol", type=float, default=1e-10, help="contact difference reported (default 1e-10)")
    args = p.parse_args(argv)
    warnings.simplefilter("ignore")
    mjm = mujoco.MjModel.from_xml_path(str(args.model))
    md = mujoco.MjData(mjm)
    mujoco.mj_forward(mjm, md)
    sim = Sim.from_model(mjm, num_worlds=1, dtype="float64", device="cpu", nconmax=args.nconmax)
    for k in range(args.steps + 1):
        m2 = mujoco.MjData(mjm)
        mujoco.mj_copyData(m2, mjm, md)
        set_state(sim, m2)
        mujoco.mj_forward(mjm, m2)
        sim.forward()
        print(f"step {k}: ncon {m2.ncon}, |qacc - MuJoCo's| {np.abs(sim.qacc[0].numpy() - m2.qacc).max():.2e}")
        for pair, (theirs, ours) in contacts_by_pair(m2, sim).items():
            if len(theirs) != len(ours):
                print(f"  geoms {pair}: {len(theirs)} contacts, simrl {len(ours)}")
                continue
            err = max((max(abs(c[0] - o[0]), np.abs(c[1] - o[1]).max(), np.abs(c[2] - o[2]).max())
                       for c in theirs for o in [min(ours, key=lambda o, c=c: np.abs(o[1] - c[1]).max())]),
                      default=0.0)
            if err > args.tol:
                print(f"  geoms {pair}: {len(theirs)} contacts, {err:.1e} apart")
        mujoco.mj_step(mjm, md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
