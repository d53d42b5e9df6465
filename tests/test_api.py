"""The public Sim API: views, shapes, errors, reset, batching."""

import mujoco
import numpy as np
import pytest
import torch
import warp as wp
from conftest import random_states, without_constraints
from models import CUSTOM_MODELS

from simrl import Sim


@pytest.fixture(scope="module")
def mjm():
    return without_constraints(mujoco.MjModel.from_xml_string(CUSTOM_MODELS["two_trees"]))


def test_sizes_and_views(mjm):
    sim = Sim.from_model(mjm, num_worlds=5, device="cpu")
    assert (sim.nq, sim.nv, sim.nu, sim.num_worlds) == (mjm.nq, mjm.nv, mjm.nu, 5)
    assert sim.timestep == pytest.approx(mjm.opt.timestep)
    assert sim.mj_model is mjm
    assert sim.qpos.shape == (5, mjm.nq) and sim.qvel.shape == (5, mjm.nv)
    assert sim.ctrl.shape == (5, mjm.nu) and sim.qacc.shape == (5, mjm.nv)
    assert sim.qpos.dtype == torch.float32
    np.testing.assert_allclose(sim.qpos.numpy(), np.tile(mjm.qpos0, (5, 1)), atol=1e-7)


def test_views_are_zero_copy(mjm):
    sim = Sim.from_model(mjm, num_worlds=3)
    assert sim.qpos.data_ptr() == sim.data.qpos.ptr
    sim.qpos[1, 0] = 5.0  # moves free body a along x in world 1 only
    sim.forward()
    xpos = sim.view("xpos").numpy()
    assert xpos[1, 1, 0] == pytest.approx(5.0)
    assert xpos[0, 1, 0] == pytest.approx(0.0)


def test_assigning_a_tensor_checks_it(mjm):
    sim = Sim.from_model(mjm, num_worlds=4)
    sim.ctrl = torch.ones(4, mjm.nu)
    assert torch.all(sim.ctrl == 1)
    with pytest.raises(ValueError, match=r"ctrl must have shape \(4, 1\)"):
        sim.ctrl = torch.ones(3, mjm.nu)
    with pytest.raises(TypeError, match="floating-point"):
        sim.ctrl = torch.ones(4, mjm.nu, dtype=torch.int64)
    with pytest.raises(AttributeError):
        sim.qacc = torch.zeros(4, mjm.nv)


def test_bad_arguments_are_named(mjm):
    with pytest.raises(ValueError, match="num_worlds must be a positive integer"):
        Sim.from_model(mjm, num_worlds=0)
    with pytest.raises(ValueError, match=r"device 'cuda:3' does not exist; available devices: .*cpu"):
        Sim.from_model(mjm, num_worlds=1, device="cuda:3")
    with pytest.raises(ValueError, match="dtype must be"):
        Sim.from_model(mjm, num_worlds=1, dtype="float16")
    with pytest.raises(TypeError, match="mujoco.MjModel"):
        Sim.from_model("model.xml", num_worlds=1)
    sim = Sim.from_model(mjm, num_worlds=1)
    with pytest.raises(ValueError, match="non-negative integer"):
        sim.step(-1)


def test_worlds_are_independent(mjm, rng):
    """A world's trajectory does not depend on the other worlds in the batch."""
    qpos, qvel, ctrl = random_states(mjm, 6, rng)
    batch = Sim.from_model(mjm, num_worlds=6, dtype="float64")
    batch.qpos, batch.qvel, batch.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
    batch.step(25)
    single = Sim.from_model(mjm, num_worlds=1, dtype="float64")
    single.qpos, single.qvel, single.ctrl = (torch.as_tensor(x[3:4]) for x in (qpos, qvel, ctrl))
    single.step(25)
    assert torch.equal(batch.qpos[3], single.qpos[0])
    assert torch.equal(batch.qvel[3], single.qvel[0])


def test_step_n_equals_n_steps(mjm, rng):
    qpos, qvel, ctrl = random_states(mjm, 2, rng)
    a = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    b = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    for sim in (a, b):
        sim.qpos, sim.qvel, sim.ctrl = (torch.as_tensor(x) for x in (qpos, qvel, ctrl))
    a.step(7)
    for _ in range(7):
        b.step()
    assert torch.equal(a.qpos, b.qpos) and torch.equal(a.qvel, b.qvel)


def test_reset_some_worlds(mjm, rng):
    sim = Sim.from_model(mjm, num_worlds=4)
    sim.qvel[:] = 1.0
    sim.ctrl[:] = 0.5
    sim.step(10)
    moved = sim.qpos.clone()
    sim.reset(torch.tensor([1, 3]))
    qpos0 = torch.as_tensor(mjm.qpos0, dtype=torch.float32)
    assert torch.equal(sim.qpos[1], qpos0) and torch.equal(sim.qpos[3], qpos0)
    assert torch.all(sim.qvel[[1, 3]] == 0) and torch.all(sim.ctrl[[1, 3]] == 0)
    assert torch.equal(sim.qpos[[0, 2]], moved[[0, 2]])
    assert torch.all(sim.qvel[[0, 2]] != 0)
    sim.reset(torch.tensor([True, False, False, False]))
    assert torch.equal(sim.qpos[0], qpos0)
    sim.reset()
    assert torch.all(sim.qvel == 0)
    with pytest.raises(ValueError, match="boolean world mask"):
        sim.reset(torch.tensor([True, False]))


def test_bad_controls_are_zeroed_like_mujoco():
    """mj_fwdActuation zeroes every control of a world if any one is NaN; so does the engine. Five
    actuators, one NaN entry: the world moves as with all controls 0 (MuJoCo's qacc for the same
    controls), not as with only the NaN entry replaced by 0."""
    model = without_constraints(mujoco.MjModel.from_xml_string(CUSTOM_MODELS["slide_hinge"]))
    assert model.nu == 5
    ctrl = np.array([0.7, -0.5, 0.9, 0.4, -0.8])
    bad = ctrl.copy()
    bad[2] = float("nan")
    repaired = ctrl.copy()
    repaired[2] = 0.0
    sim = Sim.from_model(model, num_worlds=3, dtype="float64")
    sim.ctrl = torch.as_tensor(np.stack([bad, repaired, np.zeros(5)]))
    sim.forward()
    assert torch.all(torch.isfinite(sim.qacc))
    mjd = mujoco.MjData(model)
    mjd.ctrl[:] = bad
    mujoco.mj_forward(model, mjd)
    np.testing.assert_allclose(sim.qacc[0].numpy(), mjd.qacc, rtol=1e-10, atol=1e-10)
    assert torch.equal(sim.qacc[0], sim.qacc[2])
    assert (sim.qacc[0] - sim.qacc[1]).abs().max() > 1e-3  # the other controls did act in world 1


def test_from_mjcf_accepts_a_path(tmp_path):
    path = tmp_path / "robot.xml"
    xml = CUSTOM_MODELS["slide_hinge"].replace('integrator="Euler"/>',
                                               'integrator="Euler"><flag contact="disable"/></option>')
    path.write_text(xml)
    sim = Sim.from_mjcf(path, num_worlds=2)
    assert sim.nu == 5
    assert "Sim(nq=" in repr(sim)


def test_float64_build(mjm):
    sim = Sim.from_model(mjm, num_worlds=2, dtype="float64")
    assert sim.qpos.dtype == torch.float64
    assert sim.model.dtype == wp.float64


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_cpu_threads_are_bit_identical(dtype):
    """Worlds split over threads step exactly as in one thread, contacts and limits included."""
    from envs import ASSETS_DIR

    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    W = 50
    ctrl = torch.as_tensor(np.random.default_rng(0).uniform(-1, 1, (W, mjm.nu)))
    results = []
    for threads in (1, 3):
        sim = Sim(mjm, num_worlds=W, device="cpu", dtype=dtype, cpu_threads=threads)
        assert sim.cpu_threads == threads
        sim.ctrl = ctrl.to(sim.torch_dtype)
        sim.step(30)
        sim.forward()
        results.append([sim.view(n).clone() for n in ("qpos", "qvel", "qacc", "efc_force", "solver_niter")])
    for a, b in zip(*results, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("threads", [1, 2])
def test_recorded_launches_see_replaced_model_fields(threads, monkeypatch):
    """CPU steps replay launches recorded at the first step (Sim._run). A Model field replaced
    after that, here the solver's iteration cap (a scalar) and a per-world body mass (a new
    array), is what the next steps use: the same bits as the same steps launched directly
    (Sim._run launches directly while wp.launch is replaced), and MuJoCo's qacc for the heavier
    body."""
    from envs import ASSETS_DIR

    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    W = 128
    ctrl = torch.as_tensor(np.random.default_rng(1).uniform(-1, 1, (W, mjm.nu)), dtype=torch.float64)

    def run():
        sim = Sim(mjm, num_worlds=W, device="cpu", dtype="float64", cpu_threads=threads)
        sim.ctrl = ctrl
        sim.step(1)
        sim.set_solver(iterations=2)
        sim.per_world_param("body_mass")[:, 1] *= 2.0
        sim.step(5)
        return sim

    recorded = run()
    assert recorded._recorded, "the CPU step did not record its launches"
    launch = wp.launch
    monkeypatch.setattr(wp, "launch", lambda *args, **kwargs: launch(*args, **kwargs))
    direct = run()
    assert not direct._recorded
    for name in ("qpos", "qvel", "qacc", "efc_force", "solver_niter"):
        assert torch.equal(recorded.view(name), direct.view(name)), name
    assert int(recorded.solver_niter.max()) <= 2
    # MuJoCo with the trunk twice as heavy, from world 0's state
    heavy = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    heavy.body_mass[1] *= 2.0
    heavy.opt.iterations = 2
    data = mujoco.MjData(heavy)
    data.qpos, data.qvel, data.ctrl = recorded.qpos[0].numpy(), recorded.qvel[0].numpy(), ctrl[0].numpy()
    mujoco.mj_forward(heavy, data)
    monkeypatch.undo()
    recorded.forward()
    if data.nefc == 0:  # no constraint, so no solver iterations that could differ
        np.testing.assert_allclose(recorded.qacc[0].numpy(), data.qacc, rtol=1e-8, atol=1e-8)
    else:
        np.testing.assert_allclose(recorded.qacc[0].numpy(), data.qacc, rtol=1e-3, atol=1e-3)


def test_cpu_threads_argument():
    mjm = mujoco.MjModel.from_xml_string("<mujoco><worldbody><body><freejoint/><geom size='.1'/></body>"
                                         "</worldbody></mujoco>")
    with pytest.raises(ValueError, match="cpu_threads"):
        Sim(mjm, num_worlds=4, device="cpu", cpu_threads=0)
    assert Sim(mjm, num_worlds=4, device="cpu").cpu_threads == 1  # too few worlds to split
    assert Sim(mjm, num_worlds=4, device="cpu", cpu_threads=8).cpu_threads == 4  # at most one per world


def test_worlds_that_would_not_fit_in_memory_are_refused(monkeypatch):
    """W worlds' data is W times one world's (what simrl.sim.data.check_memory multiplies); a Sim
    whose worlds would not fit in the memory its device has available is refused before anything
    is allocated, with one world's size and how many fit."""
    from envs import ASSETS_DIR
    from simrl.sim import data

    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    sim = Sim.from_model(mjm, num_worlds=3)
    names = data.data_struct(sim.model.dtype).vars
    per_world = sum(data.data_bytes_per_world(sim.model).values())
    assert sum(getattr(sim.data, n).capacity for n in names) == 3 * per_world
    available = data.available_memory(sim.model.device)
    assert available is None or available > 0

    monkeypatch.setattr(data, "available_memory", lambda device: 10 * per_world + 1)
    assert Sim.from_model(mjm, num_worlds=10).num_worlds == 10
    kib = f"{per_world / 1024:.2f}".replace(".", r"\.")
    message = (rf"11 worlds of this model need \d+\.\d\d KiB for the simulation's data \({kib} KiB per world, "
               r"\d+\.\d\d KiB of which are its budget of \d+ constraint rows \(njmax\) and \d+\.\d\d KiB its \d+ "
               r"contact slots \(nconmax\): smaller budgets hold fewer .*\), but cpu has \d+\.\d\d KiB available: "
               r"the data of at most 10 worlds fits")
    with pytest.raises(MemoryError, match=message):
        Sim.from_model(mjm, num_worlds=11)


def test_a_long_kernel_build_is_announced(capsys):
    """A first load of Warp kernels that takes longer than the notice's delay (a build, on a
    first run) says so on stderr, then how long it took; a quick one (from Warp's cache) says
    nothing."""
    import time

    from simrl.sim.types import build_notice

    with build_notice("the engine's kernels", "cpu", notice_after=0.05) as built:
        time.sleep(0.3)
    lines = capsys.readouterr().err.strip().splitlines()
    assert built["seconds"] >= 0.3 and len(lines) == 2, lines
    assert lines[0].startswith("simrl: loading the engine's kernels for cpu: a first run builds them, about a minute")
    assert lines[1] == f"simrl: the engine's kernels loaded in {built['seconds']:.0f} s"
    with build_notice("the engine's kernels", "cpu", notice_after=5.0) as built:
        pass
    assert built["seconds"] < 5.0 and capsys.readouterr().err == ""


def test_a_rollout_that_would_not_fit_in_memory_is_refused(monkeypatch):
    """The differentiable step checks each new set of step buffers against the memory the CPU
    has available, before allocating (a rollout keeps one per step until backward): a MemoryError
    that says what to shorten, where the process would have been killed without a message."""
    import simrl
    from envs import ASSETS_DIR
    from simrl.sim import data, grad

    mjm = mujoco.MjModel.from_xml_path(str(ASSETS_DIR / "quadruped.xml"))
    sim = Sim.from_model(mjm, num_worlds=4)
    qpos, qvel = sim.qpos.clone().requires_grad_(True), sim.qvel.clone().requires_grad_(True)
    ctrl = torch.zeros(4, sim.nu, requires_grad=True)
    per_world = 2 * sum(data.data_bytes_per_world(sim.model).values())
    monkeypatch.setattr(grad, "available_memory", lambda device: 2 * 4 * per_world - 1)
    monkeypatch.setattr(grad, "_POOL", grad._Pool())  # no buffers kept from other tests
    with pytest.raises(MemoryError, match=r"the differentiable step needs \d+\.\d\d KiB for the buffers of one more "
                                          r"evaluation of the dynamics \(4 worlds, .*shorten the horizon or use fewer"):
        simrl.diff_step(sim, qpos, qvel, ctrl)
    monkeypatch.setattr(grad, "available_memory", lambda device: 2 * 4 * per_world)
    qpos1, qvel1 = simrl.diff_step(sim, qpos, qvel, ctrl)
    (qpos1.sum() + qvel1.sum()).backward()
    assert torch.isfinite(qpos.grad).all()
