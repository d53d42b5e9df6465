"""`Sim`: many copies ("worlds") of one MuJoCo model, stepped together by Warp kernels.

    from simrl import Sim
    sim = Sim.from_mjcf("robot.xml", num_worlds=1024, device="cpu")
    sim.ctrl[:] = torch.rand(1024, sim.nu) * 2 - 1
    sim.step(10)          # like mj_step, ten times, in every world
    sim.qpos              # torch view [num_worlds, nq] of the simulation's own memory

The step runs in one of two schedules of the same kernels (simrl.sim.schedule): `fused`, a
thread per world (the CPU's), or `wide`, a launch per stage over worlds x elements (the GPU's).
"""

from __future__ import annotations

import os
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace

import mujoco
import numpy as np
import torch
import warp as wp

from simrl.errors import MJCFError
from simrl.sim import forward
from simrl.sim import schedule as simrl_schedule
from simrl.sim.data import (
    CCD_SCRATCH,
    OVERFLOW_CONTACTS,
    OVERFLOW_ROWS,
    TIME,
    WARNING_MESSAGES,
    check_memory,
    data_struct,
    make_data,
    mocap_pose0,
)
from simrl.sim.io import Model, sensor_columns, wrap_points
from simrl.sim.model import PER_WORLD_FIELDS, SET_CONST_INPUTS, copy_struct
from simrl.sim.types import EULER_LIKE, DisableBit, ObjType, build_notice

if not os.environ.get("SIMRL_WARP_VERBOSE"):
    # Warp's greeting and per-module load lines; warnings still show (SIMRL_WARP_VERBOSE=1 restores all)
    wp.config.log_level = wp.LOG_WARNING

_DTYPES = {
    "float32": wp.float32, "float64": wp.float64,
    torch.float32: wp.float32, torch.float64: wp.float64,
    wp.float32: wp.float32, wp.float64: wp.float64,
}


def _resolve_device(device) -> wp.context.Device:
    wp.init()
    if device is None or device == "auto":
        return wp.get_device("cuda:0" if wp.is_cuda_available() else "cpu")
    name = str(device)
    available = [d.alias for d in wp.get_devices()]
    if name == "cuda":
        name = "cuda:0"
    if name not in available:
        raise ValueError(f"device {str(device)!r} does not exist; available devices: {', '.join(available)}")
    return wp.get_device(name)


#: below this many worlds per thread, splitting a CPU batch over threads does not pay
MIN_WORLDS_PER_THREAD = 64

_pools: dict[int, ThreadPoolExecutor] = {}
_pools_lock = threading.Lock()


def _cpu_pool(workers: int) -> ThreadPoolExecutor:
    """Worker threads shared by every Sim that splits its worlds over `workers + 1` threads."""
    with _pools_lock:
        if workers not in _pools:
            # each worker flushes denormals to zero like the Sim's own thread (see Sim)
            _pools[workers] = ThreadPoolExecutor(workers, thread_name_prefix="simrl-cpu",
                                                 initializer=torch.set_flush_denormal, initargs=(True,))
        return _pools[workers]


def _available_cpus() -> int:
    """The cores this process may use: its CPU affinity, shared out among the processes torchrun
    started on this machine (LOCAL_WORLD_SIZE), so that ranks do not oversubscribe the cores."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    try:
        local_ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    except ValueError:
        local_ranks = 1
    return max(1, cpus // local_ranks)


def compile_mjcf(mjcf: str | os.PathLike) -> mujoco.MjModel:
    """Compile an MJCF file path or XML string with MuJoCo's compiler."""
    text = str(mjcf)
    if text.lstrip().startswith("<"):
        source, load = "the MJCF string", lambda: mujoco.MjModel.from_xml_string(text)
    else:
        path = Path(text)
        if not path.is_file():
            raise FileNotFoundError(f"MJCF file not found: {path}")
        source, load = str(path), lambda: mujoco.MjModel.from_xml_path(str(path))
    try:
        return load()
    except ValueError as e:
        raise MJCFError(f"MuJoCo could not compile {source}: {e}") from e



def check_world_mask(worlds, num_worlds: int, device) -> None:
    """TypeError or ValueError unless `worlds` is a bool torch.Tensor [num_worlds] on `device`
    (`forward(worlds=...)` of either backend)."""
    if not isinstance(worlds, torch.Tensor) or worlds.dtype != torch.bool:
        raise TypeError(f"worlds must be a bool torch.Tensor [num_worlds], got "
                        f"{worlds.dtype if isinstance(worlds, torch.Tensor) else type(worlds).__name__}")
    if worlds.shape != (num_worlds,):
        raise ValueError(f"worlds must have shape ({num_worlds},) [num_worlds], got {tuple(worlds.shape)}")
    if worlds.device != device:
        raise ValueError(f"worlds must be on device {device}, got a tensor on {worlds.device}")


def assign_view(view: torch.Tensor, name: str, value) -> None:
    """`sim.<name> = value` for a state array: check device, dtype kind and shape, then copy
    into the simulation's own tensor `view` (which stays the same object)."""
    if not isinstance(value, torch.Tensor):
        value = torch.as_tensor(np.asarray(value), dtype=view.dtype)
    if value.device != view.device:
        raise ValueError(f"{name} must be on device {view.device}, got a tensor on {value.device}")
    if not value.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got dtype {value.dtype}")
    if tuple(value.shape) != tuple(view.shape):
        raise ValueError(f"{name} must have shape {tuple(view.shape)} [num_worlds, ...], got {tuple(value.shape)}")
    view.copy_(value)

#: Sim.step reads the overflow flags (check_overflow) after this many steps since the last read
OVERFLOW_CHECK_STEPS = 100


class Sim:
    """Batched simulation of `num_worlds` copies of a MuJoCo model.

    State tensors (`qpos [W, nq]`, `qvel [W, nv]`, `ctrl [W, nu]`, `act [W, na]`, `qacc [W, nv]`,
    `qfrc_applied [W, nv]`, and the poses of the mocap bodies `mocap_pos [W, nmocap, 3]`,
    `mocap_quat [W, nmocap, 4]`) are zero-copy torch views of the Warp arrays: writing into them
    changes the simulation. Assigning a whole tensor (`sim.ctrl = x`) copies it in after
    checking its shape, dtype and device.

    The compiled model is copied when the Sim is created: later changes to `mj_model` (its
    options included) do not reach the engine; create a new Sim instead.

    On the CPU, creating a Sim turns on flush-to-zero for denormal floats in the calling
    thread (`torch.set_flush_denormal(True)`), which also applies to torch code in that thread.

    `cpu_threads` (CPU only): split the worlds into that many contiguous blocks, each stepped
    by its own thread (Warp runs a CPU kernel on the thread that launches it and releases the
    GIL meanwhile). Worlds never interact, so results are bit-identical to one thread. The
    default (None) uses every available core when there are at least 64 worlds per thread,
    else one thread; 1 turns the threading off. Under torchrun the cores are shared out among
    the ranks of the machine (LOCAL_WORLD_SIZE).

    `schedule`: how the step's kernels are launched (simrl.sim.schedule). "fused": one thread per
    world runs the whole step (a launch per step: right for a CPU core); "wide": a launch per
    stage over (worlds x elements), the tree's passes a thread per body, the solver a block of
    threads per world (right for a GPU); "auto" (default): fused on the CPU, wide on CUDA. Both
    give the same results, bit for bit on the CPU.

    `use_graphs`: `step(n)` records its launches as a graph once per n (wp.ScopedCapture: a CUDA
    graph, or on the CPU Warp's recorded launches) and replays it, recording again when a model
    array has been replaced since (per_world_param, set_solver). None (default): on CUDA only,
    where it saves the launch latency of the wide schedule's ~40 launches per step. On the CPU
    every step already replays launches recorded once per segment (their arguments packed once),
    which see replaced model fields without recording again. Inside a capture that the caller
    opened, and with several CPU threads, graphs are not used.
    """

    def __init__(self, mj_model: mujoco.MjModel, num_worlds: int = 1, device=None, dtype="float32",
                 cpu_threads: int | None = None, schedule: str = "auto", use_graphs: bool | None = None,
                 njmax: int | None = None, strict: bool = False, nconmax: int | None = None):
        if not isinstance(mj_model, mujoco.MjModel):
            raise TypeError(f"expected a mujoco.MjModel, got {type(mj_model).__name__}")
        if isinstance(num_worlds, bool) or not isinstance(num_worlds, (int, np.integer)) or num_worlds < 1:
            raise ValueError(f"num_worlds must be a positive integer, got {num_worlds!r}")
        if dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
        if cpu_threads is not None and (isinstance(cpu_threads, bool) or not isinstance(cpu_threads, (int, np.integer))
                                        or cpu_threads < 1):
            raise ValueError(f"cpu_threads must be a positive integer or None, got {cpu_threads!r}")
        self.device = _resolve_device(device)
        if self.device.is_cpu:
            # Warp's CPU kernels run on this thread. Symmetric models seed float32 values below
            # 1e-38 that would otherwise run at a fraction of normal speed; flushing them to zero
            # changes nothing MuJoCo would resolve.
            torch.set_flush_denormal(True)
        self.num_worlds = int(num_worlds)
        self.model = Model(mj_model, self.device, _DTYPES[dtype], njmax=njmax, nconmax=nconmax)
        #: raise OverflowError (not warn) when a world outgrows a budget
        self.strict = bool(strict)
        #: True: step and forward read the overflow flags themselves (check_overflow: step every
        #: OVERFLOW_CHECK_STEPS steps, forward on the CPU, both at every call when strict); False:
        #: the caller does (an environment stepping without host synchronisation, once per iteration)
        self.auto_check_overflow = True
        self._overflow_warned = False
        #: the Data.warning bits already warned about (each once per Sim)
        self._warned = set()
        self._steps_unchecked = 0
        if self.model.struct.nconmax:
            print(f"simrl: {self.model.budgets.describe()}; set Sim(nconmax=..., njmax=...) or the task's "
                  f"sim.nconmax, sim.njmax", flush=True)
        check_memory(self.model, self.num_worlds)  # a MemoryError that says how many worlds fit
        self.data = make_data(self.model, self.num_worlds)
        scalar = self.model.dtype
        #: "fused" or "wide": the schedule the step's kernels run in
        self.schedule = schedule_ = simrl_schedule.resolve(schedule, self.device)
        convex = self.model.struct.ndetect > 0  # pairs found by the convex detection pass (GJK/EPA, plane-mesh)
        self._forward = forward.forward_segment(scalar, schedule_, convex=convex)
        # defined for every model, so that the module it shares with the forward holds the same
        # kernels whatever model comes first (forward._module)
        euler_step = forward.euler_segment(scalar, schedule_, convex=convex)
        if self.model.integrator in EULER_LIKE:
            self._step_segments = (euler_step,)
        else:
            begin, stage1, stage2, end = forward.rk4_segments(scalar, schedule_)
            # sensors at the step's first state only (mj_RungeKutta's mj_forwardSkip, skipsensor)
            f, f_skip = self._forward, forward.forward_segment(scalar, schedule_, sensors=False, convex=convex)
            self._step_segments = (f, begin, f_skip, stage1, f_skip, stage2, f_skip, end)
        #: whether step(n) replays recorded graphs (see the class docstring)
        self.use_graphs = self.device.is_cuda if use_graphs is None else bool(use_graphs)
        self._graphs = {}
        self._recorded = {}  # (segment, id(Data)) -> (Model struct, Data struct, recorded launches): _run
        self.torch_dtype = torch.float64 if scalar == wp.float64 else torch.float32
        self._views = {}
        modules = {id(mod): mod for seg in (self._forward, *self._step_segments) for mod in seg.modules}
        with build_notice("the engine's kernels", self.device) as built:
            for module in modules.values():
                wp.load_module(module, device=self.device)
        #: seconds spent compiling (or loading from Warp's cache) the engine's kernels
        self.compile_time = built["seconds"]
        self._setup_threads(cpu_threads)
        # the state at qpos0; its overflow flags are read with those of the first forward or steps
        self._parallel(lambda run: run(self._forward))

    def _setup_threads(self, cpu_threads: int | None) -> None:
        """Per-thread blocks of worlds: (Model struct, Data struct of array views, worlds)."""
        W = self.num_worlds
        if not self.device.is_cpu:
            threads = 1
        elif cpu_threads is None:
            threads = max(1, min(_available_cpus(), W // MIN_WORLDS_PER_THREAD))
        else:
            threads = min(int(cpu_threads), W)
        #: number of threads that step the worlds (CPU); 1 on a GPU
        self.cpu_threads = threads
        self._blocks = None
        self._block_models = {}  # (lo, hi) -> (_graph_key, the block's Model struct)
        if threads == 1:
            return
        bounds = [W * i // threads for i in range(threads + 1)]
        data_type = data_struct(self.model.dtype)
        self._blocks = []
        for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
            d = data_type()
            for name in data_type.vars:
                array = getattr(self.data, name)
                # the convex collision's scratch has nccdmax rows per world
                rows = self.model.struct.nccdmax if name in CCD_SCRATCH else 1
                # an empty array (e.g. site poses of a model without sites) is never read
                setattr(d, name, array[lo * rows:hi * rows] if array.size else array)
            self._blocks.append((lo, hi, d))
        self._pool = _cpu_pool(threads - 1)

    def _per_world_fields(self) -> bool:
        """Some per-world parameter array has one entry per world (not one shared)."""
        m = self.model.struct
        return any(getattr(m, f).size and getattr(m, f).shape[0] > 1 for f in PER_WORLD_FIELDS)

    def _block_model(self, lo: int, hi: int, key: tuple | None):
        """The model for worlds [lo, hi): the Sim's own (key None: no per-world arrays), or a
        copy whose per-world parameter arrays are sliced to those worlds. The copy (Python work per
        block) is kept until `key` (`_graph_key`: every Model
        field, arrays by address and shape) changes."""
        m = self.model.struct
        if key is None:
            return m
        cached = self._block_models.get((lo, hi))
        if cached is not None and cached[0] == key:
            return cached[1]
        sliced = {f: getattr(m, f)[lo:hi] for f in PER_WORLD_FIELDS
                  if getattr(m, f).size and getattr(m, f).shape[0] > 1}
        block = copy_struct(m, self.model.dtype, **sliced)
        self._block_models[(lo, hi)] = (key, block)
        return block

    def _run(self, segment, m, d, num_worlds: int) -> None:
        """Launch a segment's kernels on the worlds of (m, d). On the CPU from launches recorded
        once per (segment, m, d) (Warp's record_cmd: the arguments packed once), which saves
        most of a launch's Python on a small step. A recorded launch
        holds the structs' live argument blocks (Warp keeps a struct's block in step with its
        fields), so a Model field replaced later (per_world_param, set_solver) is seen."""
        if not simrl_schedule.replays(self.device):
            # a profiler or launch recorder that replaced wp.launch (scripts/gpu_report.py), or
            # Warp's launch log, sees every launch
            self._launch(segment, m, d, num_worlds)
            return
        key = (segment, id(d))
        recorded = self._recorded.get(key)
        if recorded is None or recorded[0] is not m or recorded[1] is not d:
            commands = [simrl_schedule.launch(item, m, d, num_worlds, self.device, record=True)
                        for item in segment.launches(self.model)]
            self._recorded[key] = recorded = (m, d, commands)
        for command in recorded[2]:
            command.launch()

    def _launch(self, segment, m, d, num_worlds: int) -> None:
        """Launch a segment's kernels on the worlds of (m, d), directly."""
        for item in segment.launches(self.model):
            simrl_schedule.launch(item, m, d, num_worlds, self.device)

    def _parallel(self, body) -> None:
        """Run body(run) once per block of worlds, blocks in parallel threads; `run(segment)`
        launches a segment on the block's worlds."""
        if self._blocks is None:
            body(lambda segment: self._run(segment, self.model.struct, self.data, self.num_worlds))
            return

        # once per call (the Model's fields cannot change during it), and only when needed
        key = self._graph_key() if self._per_world_fields() else None

        def run(lo, hi, d):
            m = self._block_model(lo, hi, key)
            body(lambda segment: self._run(segment, m, d, hi - lo))

        futures = [self._pool.submit(run, *block) for block in self._blocks[1:]]
        try:
            run(*self._blocks[0])
        finally:
            for f in futures:
                f.result()

    # ---------------------------------------------------------------------------- construction
    @classmethod
    def from_mjcf(cls, mjcf: str | os.PathLike, num_worlds: int = 1, device=None, dtype="float32",
                  cpu_threads: int | None = None, schedule: str = "auto", use_graphs: bool | None = None,
                  njmax: int | None = None, strict: bool = False, nconmax: int | None = None) -> Sim:
        """Compile MJCF (a file path or an XML string) with MuJoCo and load it."""
        return cls(compile_mjcf(mjcf), num_worlds, device, dtype, cpu_threads, schedule, use_graphs, njmax, strict,
                   nconmax)

    @classmethod
    def from_model(cls, mj_model: mujoco.MjModel, num_worlds: int = 1, device=None, dtype="float32",
                   cpu_threads: int | None = None, schedule: str = "auto", use_graphs: bool | None = None,
                   njmax: int | None = None, strict: bool = False, nconmax: int | None = None) -> Sim:
        """Load an already compiled `mujoco.MjModel`."""
        return cls(mj_model, num_worlds, device, dtype, cpu_threads, schedule, use_graphs, njmax, strict, nconmax)

    # ---------------------------------------------------------------------------- sizes
    @property
    def mj_model(self) -> mujoco.MjModel:
        return self.model.mjm

    @property
    def nq(self) -> int:
        return self.model.nq

    @property
    def nv(self) -> int:
        return self.model.nv

    @property
    def nu(self) -> int:
        return self.model.nu

    @property
    def na(self) -> int:
        """Number of actuator activations (mjModel.na)."""
        return self.model.na

    @property
    def nmocap(self) -> int:
        return int(self.model.mjm.nmocap)

    @property
    def timestep(self) -> float:
        return float(self.model.struct.timestep)

    # ---------------------------------------------------------------------------- state views
    def view(self, name: str) -> torch.Tensor:
        """Zero-copy torch view of any per-world array of the data (mjData names), e.g.
        `sim.view("xpos")` -> [W, nbody, 3]. Quaternions are stored (x, y, z, w), except the
        user's `mocap_quat` (w, x, y, z, as mjData's)."""
        if name not in self._views:
            array = getattr(self.data, name, None)
            if not isinstance(array, wp.array):
                raise AttributeError(f"simulation data has no array named {name!r}")
            self._views[name] = wp.to_torch(array, requires_grad=False)
        return self._views[name]

    def _assign(self, name: str, value) -> None:
        assign_view(self.view(name), name, value)

    qpos = property(lambda self: self.view("qpos"), lambda self, v: self._assign("qpos", v),
                    doc="joint positions [num_worlds, nq] (free/ball quaternions w, x, y, z)")
    qvel = property(lambda self: self.view("qvel"), lambda self, v: self._assign("qvel", v),
                    doc="joint velocities [num_worlds, nv]")
    ctrl = property(lambda self: self.view("ctrl"), lambda self, v: self._assign("ctrl", v),
                    doc="actuator controls [num_worlds, nu], clamped to ctrlrange when applied")
    act = property(lambda self: self.view("act"), lambda self, v: self._assign("act", v),
                   doc="actuator activations [num_worlds, na] (mjData.act; actuators with dyntype integrator, "
                       "filter or filterexact, in actuator order): state like qpos and qvel, advanced by the step, "
                       "zero after `reset`")
    act_dot = property(lambda self: self.view("act_dot"),
                       doc="activation derivatives [num_worlds, na] (mjData.act_dot) of the last forward pass")
    qfrc_applied = property(lambda self: self.view("qfrc_applied"),
                            lambda self, v: self._assign("qfrc_applied", v),
                            doc="generalized forces applied by the user [num_worlds, nv]")
    mocap_pos = property(lambda self: self.view("mocap_pos"), lambda self, v: self._assign("mocap_pos", v),
                         doc="positions of the mocap bodies [num_worlds, nmocap, 3] in the world frame, set by "
                             "the user (mjData.mocap_pos; read by the next step or forward)")
    mocap_quat = property(lambda self: self.view("mocap_quat"), lambda self, v: self._assign("mocap_quat", v),
                          doc="orientations of the mocap bodies [num_worlds, nmocap, 4] (w, x, y, z; normalized "
                              "when used), set by the user (mjData.mocap_quat)")
    qacc = property(lambda self: self.view("qacc"), doc="joint accelerations [num_worlds, nv]")
    time = property(lambda self: self.view("solver_scalar")[:, TIME], lambda self, v: assign_view(self.time, "time", v),
                    doc="simulation time of each world [num_worlds] (mjData.time): advanced by a timestep "
                        "each step, zero after `reset`; the clock sensor reads it")
    qfrc_constraint = property(lambda self: self.view("qfrc_constraint"),
                               doc="generalized constraint forces J' efc_force [num_worlds, nv]")
    efc_force = property(lambda self: self.view("efc_force"),
                         doc="constraint row forces [num_worlds, nefc] (rows: equality, friction loss, limits, "
                             "contact slots)")
    eq_active = property(lambda self: self.view("eq_active")[:, :self.model.mjm.neq],
                         lambda self, v: self._set_eq_active(v),
                         doc="1 where an equality constraint acts, per world [num_worlds, neq] (int32; from "
                             "eq_active0, restored by `reset`)")
    sensordata = property(lambda self: self.view("sensordata")[:, :self.model.mjm.nsensordata],
                          doc="MuJoCo's sensordata [num_worlds, nsensordata], of the state the last step "
                              "started from (as after mj_step); `sensor(name)` gives one sensor's columns")
    solver_niter = property(lambda self: self.view("solver_niter"),
                            doc="Newton iterations of the last constraint solve, per world [num_worlds]")

    def sensor(self, name: str) -> torch.Tensor:
        """Zero-copy view of one sensor's values [num_worlds, dim] in `sensordata`, by its MJCF name."""
        return self.view("sensordata")[:, sensor_columns(self.model.mjm, name)]

    def _set_eq_active(self, value) -> None:
        view = self.eq_active
        value = torch.as_tensor(value, device=view.device) if not isinstance(value, torch.Tensor) else value
        if value.device != view.device:
            raise ValueError(f"eq_active must be on device {view.device}, got a tensor on {value.device}")
        if value.is_floating_point() or value.is_complex():
            raise TypeError(f"eq_active must be a bool or integer tensor, got dtype {value.dtype}")
        if tuple(value.shape) != tuple(view.shape):
            raise ValueError(f"eq_active must have shape {tuple(view.shape)} [num_worlds, neq], "
                             f"got {tuple(value.shape)}")
        view.copy_(value != 0)

    @property
    def nan_worlds(self) -> torch.Tensor:
        """Bool [num_worlds]: the world's state became non-finite (cleared by `reset`)."""
        return self.view("nan_world")[:, 0] != 0

    @property
    def warnings(self) -> torch.Tensor:
        """Int [num_worlds]: the MuJoCo warnings each world's last evaluation raised, as bits
        (simrl.sim.data.WARNING_INERTIA: the inertia matrix too close to singular, handled as
        MuJoCo does; 0: none). `check_overflow` warns about them. Cleared by `reset`."""
        return self.view("nan_world")[:, 1]

    @property
    def contact(self) -> SimpleNamespace:
        """The contact slots of every world [W, nconmax] (the pairs the broadphase kept hold the
        first, in pair order; simrl.sim.broadphase): `active` (bool, a contact detected: dist <
        margin + gap), `dist`, `pos [.., 3]`, `frame [.., 3, 3]` (rows: normal from geom1 to
        geom2, then the two tangents), `pair` (the candidate pair that holds the slot, -1: free)
        and `geom [.., 2]`, its geom ids (-1 where free)."""
        pair = self.view("contact_pair")
        table = self.model.__dict__.get("_cpair_geom_torch")
        if table is None or table.device != pair.device:
            geoms = np.asarray(self.model.contact_tables["geom"], dtype=np.int64).reshape(-1, 2)
            # a last row of -1 for the free slots (pair -1)
            table = torch.as_tensor(np.concatenate([geoms, [[-1, -1]]]), device=pair.device)
            self.model._cpair_geom_torch = table
        geom = table[pair.long()]
        return SimpleNamespace(active=self.view("contact_active") != 0, dist=self.view("contact_dist"),
                               pos=self.view("contact_pos"), frame=self.view("contact_frame"), pair=pair, geom=geom)

    @property
    def wrap(self) -> SimpleNamespace:
        """The tendons' paths of every world in mjData's layout, of the last forward pass (after
        `step`, the state it started from, as `ten_length`): `ten_wrapadr`, `ten_wrapnum`
        [W, ntendon] (int64; 0 points for a fixed tendon), `wrap_obj` [W, nwrap, 2] (-1 a site, -2
        a pulley, else the geom wrapped) and `wrap_xpos` [W, nwrap, 6] (mjData's shapes: point i is
        wrap_xpos.reshape(W, -1, 3)[:, i], of object wrap_obj.reshape(W, -1)[:, i]): per spatial
        tendon its sites, a pulley as a zero point, and a wrapping geom's two tangent points when
        the path wraps around it (mj_tendon). Points past a world's last are 0 (wrap_obj -1).
        Computed from `sim.view("wrap_path")` on each call, not a view."""
        mjm = self.model.mjm
        table = self.model.__dict__.get("_wrap_points_torch")
        site = self.view("site_xpos")
        if table is None or table["source"].device != site.device:
            table = {k: torch.as_tensor(v, device=site.device) for k, v in wrap_points(mjm).items()}
            self.model._wrap_points_torch = table
        path = self.view("wrap_path")
        W = site.shape[0]
        points = torch.cat([site, path[:, :, 1:4], path[:, :, 4:7], torch.zeros_like(site[:, :1])], dim=1)
        seg = table["segment"]
        present = (seg < 0) | (path[:, seg.clamp(min=0), 0] >= 0)  # [W, rows]
        rows = present.sum(dim=1)
        ten_wrapnum = torch.zeros((W, mjm.ntendon), dtype=torch.int64, device=site.device)
        ten_wrapnum.index_add_(1, table["tendon"], present.long())
        ten_wrapadr = torch.cumsum(ten_wrapnum, dim=1) - ten_wrapnum
        n = 2 * mjm.nwrap
        wrap_xpos = torch.zeros((W, n + 1, 3), dtype=site.dtype, device=site.device)
        wrap_obj = torch.full((W, n + 1), -1, dtype=torch.int64, device=site.device)
        # each present point to its place in the world's list, the others to a row dropped after
        dest = torch.where(present, torch.cumsum(present.long(), dim=1) - 1, torch.full_like(rows[:, None], n))
        wrap_xpos.scatter_(1, dest[:, :, None].expand(-1, -1, 3), points[:, table["source"]])
        wrap_obj.scatter_(1, dest, table["obj"].expand(W, -1).clone())
        return SimpleNamespace(ten_wrapadr=ten_wrapadr, ten_wrapnum=ten_wrapnum,
                               wrap_obj=wrap_obj[:, :n].reshape(W, mjm.nwrap, 2),
                               wrap_xpos=wrap_xpos[:, :n].reshape(W, mjm.nwrap, 6))

    def per_world_param(self, name: str) -> torch.Tensor:
        """Give the model parameter `name` its own value in every world (domain randomization)
        and return a writable torch view [num_worlds, ...] (the engine's layout: quaternions
        x, y, z, w; actuator_gainprm and actuator_biasprm their first three entries;
        actuator_gear the first, for a site transmission the translational x of its wrench or
        offset). Only the fields of `simrl.sim.model.PER_WORLD_FIELDS`
        qualify (kernels read them at `worldid % shape[0]`). After changing body_mass,
        body_inertia, body_ipos, body_iquat or dof_armature, call `set_const` (their derived
        invweight0 would otherwise stay the compiled model's)."""
        struct = self.model.struct
        array = getattr(struct, name, None) if name in PER_WORLD_FIELDS else None
        if not isinstance(array, wp.array):
            raise ValueError(f"{name!r} is not a per-world model parameter; available: {', '.join(PER_WORLD_FIELDS)}")
        if array.shape[0] != self.num_worlds:
            if array.shape[0] != 1:
                raise ValueError(f"{name!r} has {array.shape[0]} worlds, the simulation {self.num_worlds}")
            expanded = np.repeat(array.numpy(), self.num_worlds, axis=0)
            setattr(struct, name, wp.array(expanded, dtype=array.dtype, device=array.device))
        return wp.to_torch(getattr(struct, name), requires_grad=False)

    def set_const(self, world_ids=None) -> None:
        """Recompute, per world, what MuJoCo's compiler derives from parameters that domain
        randomization changes (mj_setConst at qpos0): dof_invweight0 and body_invweight0 (the
        diagonal approximation of the constraint's inverse inertia, which scales every
        constraint row's regularizer R) from the world's body_mass, body_inertia, body_ipos,
        body_iquat and dof_armature. MuJoCo itself computes them: the world's values are set on a
        host copy of the MjModel and mj_setConst is called (host work per world; on a GPU one
        device-host round trip). `world_ids` (indices or a boolean
        mask; None: all worlds) limits the work to the worlds that changed.

        Also turns on the implicit Euler damping of mj_EulerSkip when some world's dof_damping
        became positive in a model compiled without damping (the engine skips that pass when
        the compiled damping is all zero).

        Not recomputed (documented in GUIDE.md "Domain randomization"): stat.meaninertia (which
        MuJoCo 4.0's mj_setConst keeps too; it only scales the solver's stopping test),
        body_subtreemass and actuator_acc0 (the engine reads neither). Raises
        UnsupportedFeatureError when a tendon's or a flex edge's invweight0 would change (tendon
        limits, frictionloss and equalities, flex equalities read them; they are not kept per
        world)."""
        import copy

        from simrl.errors import UnsupportedFeatureError

        mjm, struct = self.mj_model, self.model.struct
        W = self.num_worlds
        if world_ids is None:
            worlds = np.arange(W)
        else:
            ids = torch.as_tensor(world_ids).cpu()
            worlds = np.arange(W)[ids.numpy()] if ids.dtype == torch.bool else ids.numpy().astype(np.int64).ravel()
        # damping on where the compiled model had none (mj_EulerSkip, see Model.euler_damp)
        flags = int(mjm.opt.disableflags)
        if (not struct.euler_damp and not flags & DisableBit.EULERDAMP
                and not flags & DisableBit.DAMPER
                and bool((wp.to_torch(struct.dof_damping, requires_grad=False) > 0).any())):
            struct.euler_damp = 1
        if worlds.size == 0:
            return
        inputs = {name: getattr(struct, name) for name in SET_CONST_INPUTS}
        if all(a.shape[0] == 1 for a in inputs.values()):
            if self.model.struct.dof_invweight0.shape[0] == 1:
                return  # nothing is per world: the compiled values hold
        host = {name: a.numpy() for name, a in inputs.items()}
        scratch = copy.copy(mjm)  # mj_copyModel
        scratch_data = mujoco.MjData(scratch)
        dof_iw = self.per_world_param("dof_invweight0")
        body_iw = self.per_world_param("body_invweight0")
        dof_out = np.empty((len(worlds), mjm.nv))
        body_out = np.empty((len(worlds), mjm.nbody, 2))
        for k, w in enumerate(worlds):
            row = {name: a[w % a.shape[0]] for name, a in host.items()}
            scratch.body_mass[:] = row["body_mass"]
            scratch.body_inertia[:] = row["body_inertia"]
            scratch.body_ipos[:] = row["body_ipos"]
            scratch.body_iquat[:] = row["body_iquat"][:, [3, 0, 1, 2]]  # x, y, z, w -> w, x, y, z
            scratch.dof_armature[:] = row["dof_armature"]
            mujoco.mj_setConst(scratch, scratch_data)
            dof_out[k] = scratch.dof_invweight0
            body_out[k] = scratch.body_invweight0
            if mjm.ntendon and not np.allclose(scratch.tendon_invweight0, mjm.tendon_invweight0, rtol=1e-9, atol=0):
                raise UnsupportedFeatureError(
                    f"world {int(w)}: the randomized masses, inertias or armature change tendon_invweight0 "
                    f"(tendon {mujoco.mj_id2name(mjm, ObjType.TENDON, 0)!r}, ...), which the engine "
                    f"keeps for all worlds; randomize bodies that no tendon spans, or no masses")
            if mjm.nflex and not np.allclose(scratch.flexedge_invweight0, mjm.flexedge_invweight0, rtol=1e-9, atol=0):
                raise UnsupportedFeatureError(
                    f"world {int(w)}: the randomized masses, inertias or armature change flexedge_invweight0 "
                    f"(flex {mujoco.mj_id2name(mjm, ObjType.FLEX, 0)!r}, ...), which the engine keeps for all "
                    f"worlds; randomize bodies that are not a flex's vertices, or no masses")
        index = torch.as_tensor(worlds, device=dof_iw.device)
        dof_iw[index] = torch.as_tensor(dof_out, dtype=dof_iw.dtype, device=dof_iw.device)
        body_iw[index] = torch.as_tensor(body_out, dtype=body_iw.dtype, device=body_iw.device)

    def set_solver(self, iterations: int | None = None, tolerance: float | None = None) -> None:
        """Override the constraint solver's maximum iterations and tolerance (defaults: the
        model's <option iterations tolerance>)."""
        struct = self.model.struct
        if iterations is not None:
            if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
                raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
            struct.solver_iterations = int(iterations)
        if tolerance is not None:
            if not np.isfinite(tolerance) or tolerance < 0:
                raise ValueError(f"tolerance must be a non-negative finite number, got {tolerance!r}")
            struct.solver_tolerance = self.model.dtype(tolerance)

    # ---------------------------------------------------------------------------- simulation
    def forward(self, worlds: torch.Tensor | None = None) -> None:
        """Like mj_forward: qacc (and every intermediate, sensordata too) from the current qpos,
        qvel, ctrl. One difference: with the Euler and implicitfast integrators it also sets
        qacc_warmstart to the new qacc (the step's solver saves its warm start itself), which
        mj_forward leaves alone.

        `worlds`: a bool tensor [num_worlds] on the simulation's device; only those worlds are
        computed, and every array of the others is left as it was (e.g. after resetting a few
        worlds). No host synchronisation: the engine's kernels skip the others (Data.world_skip),
        which on the CPU costs them nothing."""
        if worlds is None:
            self._parallel(lambda run: run(self._forward))
        else:
            skip = self.view("world_skip")
            check_world_mask(worlds, self.num_worlds, skip.device)
            skip.copy_(~worlds)
            try:
                self._parallel(lambda run: run(self._forward))
            finally:
                skip.zero_()
        if self.auto_check_overflow and (self.device.is_cpu or self.strict):
            self.check_overflow(stacklevel=3)

    def step(self, n: int = 1) -> None:
        """Like mj_step with the model's integrator (Euler, implicitfast or RK4), `n` times."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        n = int(n)
        if self.use_graphs and n > 0 and self._blocks is None and not self.device.is_capturing:
            self._replay(n)
        else:
            # every thread runs all n steps of its worlds: worlds never interact
            self._parallel(lambda run: self._steps(run, n))
        self._count_steps(n, stacklevel=4)

    def _count_steps(self, n: int, stacklevel: int) -> None:
        """After n physics steps (of `step`, or of simrl.diff_step, which leaves its steps' flags in
        `overflow`): a look at the overflow flags now and then (every call when strict). On a GPU, a
        read waits for the device, which a graph being captured cannot."""
        self._steps_unchecked += n
        if self.auto_check_overflow and not self.device.is_capturing and (
                self.strict or self._steps_unchecked >= OVERFLOW_CHECK_STEPS):
            self.check_overflow(stacklevel=stacklevel)

    @property
    def overflow(self) -> torch.Tensor:
        """Int [num_worlds]: what outgrew its budget in each world's last evaluation (of `step`;
        after simrl.diff_step, in any evaluation of its steps), as bits (simrl.sim.data.OVERFLOW_CONTACTS,
        OVERFLOW_ROWS; 0: nothing). What did not fit was left out, the last in
        pair and slot order first; `check_overflow` names the budget to raise."""
        return self.view("overflow")

    def check_overflow(self, stacklevel: int = 2) -> None:
        """Warn (the first time for this Sim), or with `strict` raise OverflowError, when some
        world's last evaluation outgrew a budget: which budget, in how many worlds, and the value
        that would have held every world's. Reads the device's flags (a synchronization).
        `stacklevel`: warnings.warn's (the warning names the line that called this)."""
        self._steps_unchecked = 0
        self._check_warnings(stacklevel + 1)
        flags = self.view("overflow")
        if not bool(flags.any()):
            return
        need = self.view("overflow_need").max(dim=0).values.tolist()
        over = [0] + [int(((flags & bit) != 0).sum()) for bit in (OVERFLOW_CONTACTS, OVERFLOW_ROWS)]
        budgets = self.model.budgets
        parts = []
        if over[1]:
            parts.append(f"the contact slots of the pairs the broadphase kept in {over[1]} of {self.num_worlds} worlds "
                         f"outgrew nconmax={budgets.nconmax} (they needed up to {need[1]}): the pairs last in pair "
                         f"order were not collided; set Sim(nconmax={need[1]}) or the task's sim.nconmax={need[1]}")
        if over[2]:
            parts.append(f"the constraint rows of {over[2]} of {self.num_worlds} worlds outgrew njmax={budgets.njmax} "
                         f"(they needed up to {need[2]}): the contacts last in slot order were left out; "
                         f"set Sim(njmax={need[2]}) or the task's sim.njmax={need[2]}")
        message = "simrl: " + "; ".join(parts)
        if self.strict:
            raise OverflowError(message)
        if not self._overflow_warned:
            self._overflow_warned = True
            # the warning names the caller's line (of step or forward when they read the flags)
            warnings.warn(message, RuntimeWarning, stacklevel=stacklevel)

    def _check_warnings(self, stacklevel: int) -> None:
        """Warn, once per kind for this Sim, about the MuJoCo warnings (`warnings`) of the worlds'
        last evaluation: which, and in how many worlds."""
        flags = self.view("nan_world")[:, 1]
        if not bool(flags.any()):
            return
        for bit, message in WARNING_MESSAGES.items():
            count = int(((flags & bit) != 0).sum())
            if count and bit not in self._warned:
                self._warned.add(bit)
                warnings.warn(f"simrl: in {count} of {self.num_worlds} worlds {message} (Sim.warnings)",
                              RuntimeWarning, stacklevel=stacklevel)

    def _steps(self, run, n: int) -> None:
        for _ in range(n):
            for segment in self._step_segments:
                run(segment)

    def _graph_key(self) -> bytes:
        """What a captured graph depends on besides the Data arrays (which never move): every
        Model field (per_world_param and diff_step replace arrays), as the bytes of the struct's
        argument block, which Warp keeps in step with its fields: each array's address, shape
        and strides, each scalar's value (one read, not one per field)."""
        return bytes(self.model.struct.__ctype__())

    def _replay(self, n: int) -> None:
        """n steps as one graph, captured at the first call with this n (and again when a model
        array was replaced since)."""
        key = self._graph_key()
        graph = self._graphs.get(n)
        if graph is None or graph[0] != key:
            run = lambda segment: self._launch(segment, self.model.struct, self.data, self.num_worlds)
            with wp.ScopedCapture(device=self.device) as capture:
                self._steps(run, n)
            self._graphs[n] = graph = (key, capture.graph)
        wp.capture_launch(graph[1])

    def reset(self, world_ids=None) -> None:
        """Set qpos to qpos0, eq_active to eq_active0, qvel, ctrl, act, qfrc_applied, qacc, time to zero and
        the mocap bodies to their model poses (as mj_resetData), in all worlds or in `world_ids`
        (a sequence, an index tensor or a boolean mask over worlds)."""
        reset_values = self._reset_values()
        if world_ids is None:
            index = slice(None)
        else:
            index = torch.as_tensor(world_ids, device=self.qpos.device)
            if index.dtype == torch.bool:
                if index.shape != (self.num_worlds,):
                    raise ValueError(f"a boolean world mask must have shape ({self.num_worlds},), "
                                     f"got {tuple(index.shape)}")
            elif index.dtype not in (torch.int32, torch.int64):
                raise TypeError(f"world_ids must be integer indices or a boolean mask, got {index.dtype}")
        self.qpos[index] = reset_values["qpos"]
        if self.model.mjm.neq:
            self.eq_active[index] = reset_values["eq_active"]
        if self.model.struct.nmocap:
            for name in ("mocap_pos", "mocap_quat"):
                self.view(name)[index] = reset_values[name]
        for name in ("qvel", "ctrl", "act", "qfrc_applied", "qacc", "qacc_warmstart", "nan_world"):
            self.view(name)[index] = 0
        self.view("solver_scalar")[index, TIME] = 0

    def _reset_values(self) -> dict[str, torch.Tensor]:
        """The model's qpos0, eq_active0 and mocap poses on the device, copied there once (a copy
        from the host at every reset would wait for the device)."""
        if getattr(self, "_reset_cache", None) is None:
            device = self.qpos.device
            values = {"qpos": torch.as_tensor(np.asarray(self.mj_model.qpos0), dtype=self.torch_dtype, device=device)}
            if self.model.mjm.neq:
                values["eq_active"] = torch.as_tensor(np.asarray(self.mj_model.eq_active0, dtype=np.int32),
                                                      device=device)
            if self.model.struct.nmocap:
                for name, pose in zip(("mocap_pos", "mocap_quat"), mocap_pose0(self.model), strict=True):
                    values[name] = torch.as_tensor(pose, dtype=self.torch_dtype, device=device)
            self._reset_cache = values
        return self._reset_cache

    def __repr__(self) -> str:
        threads = f", cpu_threads={self.cpu_threads}" if self.cpu_threads > 1 else ""
        return (f"Sim(nq={self.nq}, nv={self.nv}, nu={self.nu}, num_worlds={self.num_worlds}, "
                f"device='{self.device.alias}', dtype={self.model.dtype.__name__}, "
                f"schedule='{self.schedule}'{threads})")
