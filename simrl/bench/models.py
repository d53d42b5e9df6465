"""The model every engine of a benchmark runs, and the start states and controls they share.

Every engine starts all worlds from the same state (the model's 'home' keyframe, else qpos0,
optionally settled on the floor by MuJoCo first) under the same constant random controls,
one row per world, so that their figures compare the same steps.
"""

from pathlib import Path

import mujoco
import numpy as np

from simrl import compile_mjcf

#: MuJoCo's full physics state: what mujoco.rollout starts each world from
STATE_SPEC = mujoco.mjtState.mjSTATE_FULLPHYSICS


def resolve_model(spec: str) -> tuple[str, mujoco.MjModel]:
    """(name, model) of a path to an MJCF file, a robot shipped in envs/assets ('quadruped'),
    the name of a model shipped with gymnasium (e.g. 'ant'), or `task:NAME`: the model a task
    builds from its task file (e.g. 'task:quadruped_rough', the quadruped on the terrain grid)."""
    if spec.startswith("task:"):
        from simrl.bench.training import task_model

        name = spec.removeprefix("task:")
        return name, task_model(name, f"--model {spec!r}")
    if Path(spec).is_file():
        return Path(spec).stem, compile_mjcf(spec)
    from envs import ASSETS_DIR

    if (ASSETS_DIR / f"{spec}.xml").is_file():
        return spec, compile_mjcf(ASSETS_DIR / f"{spec}.xml")
    import gymnasium

    path = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / f"{spec}.xml"
    if path.is_file():
        return spec, compile_mjcf(path)
    raise SystemExit(f"--model {spec!r}: no such file, and not a model in envs/assets or gymnasium's assets")


def integrator_name(mjm: mujoco.MjModel) -> str:
    """MuJoCo's integrator of the model without its prefix: EULER, RK4, IMPLICITFAST, ..."""
    return mujoco.mjtIntegrator(mjm.opt.integrator).name.removeprefix("mjINT_")


def solver_name(mjm: mujoco.MjModel) -> str:
    """MuJoCo's constraint solver of the model without its prefix: NEWTON, CG or PGS."""
    return mujoco.mjtSolver(mjm.opt.solver).name.removeprefix("mjSOL_")


def with_newton(mjm: mujoco.MjModel) -> mujoco.MjModel:
    """An independent copy of the model (options included) whose constraint solver is Newton."""
    import copy

    out = copy.deepcopy(mjm)
    out.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    return out


def random_controls(mjm: mujoco.MjModel, n: int, seed: int = 0) -> np.ndarray:
    """[n, nu] controls drawn uniformly in each actuator's ctrlrange ([-1, 1] where unlimited)."""
    rng = np.random.default_rng(seed)
    lo = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 0], -1.0)
    hi = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange[:, 1], 1.0)
    return rng.uniform(lo, hi, (n, mjm.nu))


def initial_state(mjm: mujoco.MjModel, settle: float = 0.0) -> mujoco.MjData:
    """The model's 'home' keyframe when it has one, else qpos0; with `settle` S > 0 (seconds),
    that state after S simulated seconds of `mj_step` with the controls at the middle of their
    ranges (zero where unlimited), so that a robot that starts in the air (the ant, gymnasium's
    humanoid) stands or lies on the floor with its contacts made. Time, warm start and
    activations are reset, so every engine starts from the same qpos and qvel."""
    mjd = mujoco.MjData(mjm)
    if mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0:
        mujoco.mj_resetDataKeyframe(mjm, mjd, mjm.key("home").id)
    if settle > 0.0:
        mjd.ctrl[:] = np.where(mjm.actuator_ctrllimited, mjm.actuator_ctrlrange.mean(axis=1), 0.0)
        for _ in range(int(round(settle / mjm.opt.timestep))):
            mujoco.mj_step(mjm, mjd)
        if not np.all(np.isfinite(mjd.qpos)) or not np.all(np.isfinite(mjd.qvel)):
            raise SystemExit(f"--settle {settle}: the model's state is not finite after settling")
        qpos, qvel = mjd.qpos.copy(), mjd.qvel.copy()
        mujoco.mj_resetData(mjm, mjd)
        mjd.qpos[:], mjd.qvel[:] = qpos, qvel
    return mjd


def start_description(mjm: mujoco.MjModel, settle: float = 0.0) -> str:
    """Where every engine starts, for the printed header."""
    key = mujoco.mj_name2id(mjm, mujoco.mjtObj.mjOBJ_KEY, "home") >= 0
    where = "the 'home' keyframe" if key else "qpos0"
    settled = f", settled for {settle:g} s (--settle)" if settle > 0.0 else ""
    return f"start: {where}{settled}"


def start_arrays(mjm: mujoco.MjModel, num_worlds: int, settle: float = 0.0) -> dict:
    """The start of every world in every engine: `qpos [W, nq]`, `qvel [W, nv]`, `ctrl [W, nu]`
    (constant random controls, one row per world) and `state [W, nstate]` (MuJoCo's
    mjSTATE_FULLPHYSICS of the same start)."""
    mjd = initial_state(mjm, settle)
    state = np.zeros(mujoco.mj_stateSize(mjm, STATE_SPEC))
    mujoco.mj_getState(mjm, mjd, state, STATE_SPEC)
    return {"qpos": np.tile(mjd.qpos, (num_worlds, 1)), "qvel": np.tile(mjd.qvel, (num_worlds, 1)),
            "ctrl": random_controls(mjm, num_worlds), "state": np.tile(state, (num_worlds, 1))}
