"""`MujocoSim`: the `Sim` interface served by MuJoCo itself (C, CPU, one `MjData` per world).

The reference backend of DESIGN.md: a policy trained on the Warp engine is evaluated in MuJoCo
("sim-to-sim") by building its environment with `backend="mujoco"`:

    from simrl.mujoco_sim import MujocoSim
    sim = MujocoSim(mj_model, num_worlds=8)
    sim.ctrl[:] = 0.1
    sim.step(10)          # mj_step, ten times, in every world
    sim.qpos              # torch view [num_worlds, nq] (float64) of the backend's own memory

What the environments use of `simrl.Sim` is served the same way:

- State: `qpos`, `qvel`, `ctrl`, `act`, `qfrc_applied` (and `qacc_warmstart`) are float64
  numpy arrays [num_worlds, n], the mocap bodies' `mocap_pos` [num_worlds, nmocap, 3] and
  `mocap_quat` [num_worlds, nmocap, 4] (w, x, y, z), shared with torch (`torch.from_numpy`,
  zero copy): writes such as `sim.qpos[ids] = ...` or `sim.mocap_pos[:, 0, 2] += ...` take
  effect at the next `step`, which copies each world's row into its `MjData`, runs `mj_step`
  and copies the new state back (the mocap poses are inputs: the step does not change them).
  MuJoCo computes in double precision, so every tensor is float64 whatever the Warp engine's
  `dtype` would have been.
- Outputs (`view(name)`): the same [num_worlds, ...] shapes as the Warp engine's data
  (vectors [.., 3], matrices [.., 3, 3], quaternions (x, y, z, w)), refreshed after every
  `step` and `forward` for each name requested once. Like the Warp engine, values computed in
  a step (`qacc`, `actuator_force`, `xpos`, contacts, ...) belong to the state the step started
  from (mj_step's forward pass precedes the integration).
- Sensors: `sensordata [num_worlds, nsensordata]` and `sensor(name)` (one sensor's columns, a
  view of it) as the Warp engine's, MuJoCo's own values: after `step`, of the state the last
  `mj_step` started from; after `forward`, of the current state.
- `contact`: the Warp engine's slot layout for a world whose broadphase kept every candidate
  pair (`simrl.sim.contact_tables.contact_tables`: each pair in pair order takes its `nslot`
  slots; `contact_pair` names each slot's pair). MuJoCo's contacts of one pair come out in the
  same order as the Warp colliders fill that pair's slots (both follow MuJoCo's primitive
  colliders), so the k-th MuJoCo contact of a pair goes to the pair's k-th slot. The slots are
  filled from the worlds' MjData when `contact` (or `view("contact_...")`) is read, not after
  every step (it costs more than a step): read `sim.contact` again after stepping.
- `nan_worlds`: MuJoCo's automatic reset of a world with a bad state is turned off
  (`mjDSBL_AUTORESET` in this backend's copy of the model): a world whose qpos or qvel
  becomes non-finite is flagged, as the Warp engine does, and is not stepped again until it is
  reset (its state stays non-finite, nothing is reset behind the caller's back).
- Per-world friction (`per_world_param("cpair_friction")`, domain randomization): the
  friction of every contact is overwritten with its world's value for the contact's pair
  between collision detection and the construction of the constraints (mj_fwdPosition, then
  mj_makeConstraint / mj_island / mj_projectConstraint again), so MuJoCo solves with exactly
  the friction that the Warp engine would use (with the same values as the model's, the result
  is mj_step's bit for bit). It makes a step 1.5-2 times as expensive. Euler and implicit
  integrators only: RK4's intermediate stages detect contacts again inside MuJoCo, out of reach.
- Other per-world parameters (PER_WORLD_PARAMS: masses, inertias, centres of mass, damping,
  armature, frictionloss, gains, biases, force ranges, gravity, ...; the Warp engine's layout):
  the first one requested gives each world its own MjModel copy, into which the world's values
  are copied before each of its steps; `set_const(world_ids)` runs mj_setConst on those copies
  (as `Sim.set_const`), so invweight0 and the rest of what the compiler derives from masses and
  armature follow each world's values.

Speed: one Python loop over the worlds on one core, each world's `mj_step` plus a few
microseconds of copying. Worlds are not spread over threads.

Anything else of `Sim` (gradients, `data`, constraint rows, solver statistics, the derived
invweight0 as a parameter) raises an error that names it.
"""

from __future__ import annotations

import copy
from types import SimpleNamespace

import mujoco
import numpy as np
import torch

from simrl.errors import UnsupportedFeatureError
from simrl.sim.contact_tables import candidate_geom_pairs, contact_tables
from simrl.sim.data import WARNING_INERTIA
from simrl.sim.io import sensor_columns
from simrl.sim.types import DisableBit, EnableBit, IntegratorType, ObjType

#: state copied into each world's MjData before a step and back after it (the mocap poses are
#: inputs, [num_worlds, nmocap, 3 or 4])
_STATE = ("qpos", "qvel", "ctrl", "qfrc_applied", "qacc_warmstart", "act", "mocap_pos", "mocap_quat")
#: state the step changes (ctrl and qfrc_applied are inputs only)
_STATE_OUT = ("qpos", "qvel", "qacc_warmstart", "act")

#: outputs available through `view`, by the trailing shape of one element in the Warp engine's
#: data (MjData stores them flat: [n * size])
_VECTORS = {
    1: ("qacc", "qfrc_bias", "qfrc_spring", "qfrc_damper", "qfrc_passive", "actuator_length",
        "actuator_velocity", "actuator_force", "act_dot", "qfrc_actuator", "qfrc_smooth", "qacc_smooth",
        "qfrc_constraint", "sensordata"),
    3: ("xpos", "xipos", "xanchor", "xaxis", "geom_xpos", "site_xpos", "subtree_com"),
    6: ("cvel", "cdof", "cdof_dot", "cacc", "cfrc_bias"),
    10: ("cinert",),
}
_MATRICES = ("xmat", "ximat", "geom_xmat", "site_xmat")
_QUATERNIONS = ("xquat",)  # MuJoCo (w, x, y, z) -> the Warp engine's (x, y, z, w)
_CONTACT_VIEWS = ("contact_active", "contact_dist", "contact_pos", "contact_frame", "contact_pair")

#: attributes a `Sim` sets on itself (its class does not list them), for clear errors here
_SIM_ATTRIBUTES = ("data", "compile_time", "cpu_threads")

#: per-world model parameters this backend can randomize (envs.base.per_world_param): the
#: contacts' friction, set between collision and constraints, and MjModel fields, set on the
#: world's own MjModel before each of its steps. Name -> (MjModel field, the columns of it that
#: the Warp engine's layout holds, or None for all); body_iquat is (x, y, z, w) as in the engine.
_MODEL_FIELDS = {
    "body_mass": ("body_mass", None), "body_inertia": ("body_inertia", None), "body_ipos": ("body_ipos", None),
    "body_iquat": ("body_iquat", None), "jnt_stiffness": ("jnt_stiffness", None),
    "qpos_spring": ("qpos_spring", None), "dof_damping": ("dof_damping", None),
    "dof_armature": ("dof_armature", None), "dof_frictionloss": ("dof_frictionloss", None),
    "actuator_gear": ("actuator_gear", 0), "actuator_gainprm": ("actuator_gainprm", slice(0, 3)),
    "actuator_biasprm": ("actuator_biasprm", slice(0, 3)), "actuator_forcerange": ("actuator_forcerange", None),
    "gravity": ("gravity", None),
}
PER_WORLD_PARAMS = ("cpair_friction", *_MODEL_FIELDS)


def _resolve_cpu(device) -> torch.device:
    if device is None or str(device) in ("auto", "cpu"):
        return torch.device("cpu")
    raise ValueError(f"the MuJoCo backend runs on the CPU only (one MjData per world); got device={str(device)!r}: "
                     f"use device='cpu', or backend='warp' for {device}")


class _ModelInfo:
    """The part of `Sim.model` that holds for MuJoCo: the compiled model and the contact tables;
    the Warp engine's arrays (`struct`, ...) do not exist here."""

    def __init__(self, mjm: mujoco.MjModel, tables: dict):
        self.mjm = mjm
        self.contact_tables = tables

    def __getattr__(self, name: str):
        raise AttributeError(f"MujocoSim.model has no {name!r}: it holds only `mjm` (the MjModel MuJoCo steps) "
                             f"and `contact_tables`; {name!r} belongs to the Warp engine (backend='warp')")


class MujocoSim:
    """`num_worlds` copies of a MuJoCo model, each an `MjData` stepped by `mujoco.mj_step`.

    Args:
        mj_model: the compiled model; it is copied (later changes to it do not reach the
            simulation), and the copy has MuJoCo's automatic reset on bad states disabled.
        num_worlds: number of worlds.
        device: "cpu" (or None / "auto"); any other device raises ValueError.
    """

    backend = "mujoco"
    torch_dtype = torch.float64

    def __init__(self, mj_model: mujoco.MjModel, num_worlds: int = 1, device=None):
        if not isinstance(mj_model, mujoco.MjModel):
            raise TypeError(f"expected a mujoco.MjModel, got {type(mj_model).__name__}")
        if isinstance(num_worlds, bool) or not isinstance(num_worlds, (int, np.integer)) or num_worlds < 1:
            raise ValueError(f"num_worlds must be a positive integer, got {num_worlds!r}")
        self.device = _resolve_cpu(device)
        self.num_worlds = W = int(num_worlds)
        mjm = copy.copy(mj_model)  # a full copy (mj_copyModel)
        # a bad state must stay visible (nan_worlds), not be replaced by qpos0 behind the caller's back
        mjm.opt.disableflags |= int(DisableBit.AUTORESET)
        self._mjm = mjm
        self._data = [mujoco.MjData(mjm) for _ in range(W)]

        sizes = {"qpos": mjm.nq, "qvel": mjm.nv, "ctrl": mjm.nu, "qfrc_applied": mjm.nv,
                 "qacc_warmstart": mjm.nv, "act": mjm.na, "mocap_pos": mjm.nmocap, "mocap_quat": mjm.nmocap}
        self._state = {name: np.zeros((W, n)) for name, n in sizes.items()}
        self._state["qpos"][:] = mjm.qpos0
        # the mocap bodies at their model poses, as MjData starts them (mj_resetData)
        self._mocap0 = (np.array(self._data[0].mocap_pos), np.array(self._data[0].mocap_quat))
        self._state["mocap_pos"] = np.tile(self._mocap0[0], (W, 1, 1))
        self._state["mocap_quat"] = np.tile(self._mocap0[1], (W, 1, 1))
        # as the Warp engine's nan_world: column 0 the non-finite flag, column 1 the warning bits
        self._flags = np.zeros((W, 2), dtype=np.int32)
        self._nan, self._warning = self._flags[:, 0], self._flags[:, 1]
        self._views: dict[str, torch.Tensor] = {name: torch.from_numpy(a) for name, a in self._state.items()}
        self._views["nan_world"] = torch.from_numpy(self._flags)
        # per world, (MjData buffer, row of ours) pairs: the copies around each step, with the
        # numpy views of MjData's memory made once (they stay valid as long as the MjData)
        self._copy_in = [[(getattr(d, n), self._state[n][i]) for n in _STATE if sizes[n]]
                         for i, d in enumerate(self._data)]
        self._copy_out = [[(self._state[n][i], getattr(d, n)) for n in _STATE_OUT if sizes[n]]
                          for i, d in enumerate(self._data)]
        self._outputs: dict[str, np.ndarray] = {}  # outputs requested through view(), [W, ...]
        self._contacts: dict[str, np.ndarray] | None = None  # contact slots, once requested
        self._contacts_stale = False  # MjData hold newer contacts than self._contacts

        # contact slots: the Warp engine's tables, so that slot s means the same pair in both backends
        flags = mjm.opt.disableflags
        contact_on = not flags & (DisableBit.CONSTRAINT | DisableBit.CONTACT)
        tables = contact_tables(mjm) if contact_on else contact_tables(None)
        self.model = _ModelInfo(mjm, tables)
        self._pair_of = np.full((mjm.ngeom, mjm.ngeom), -1, dtype=np.int64)  # geom1, geom2 -> pair
        for p, (g1, g2) in enumerate(tables["geom"]):
            self._pair_of[g1, g2] = self._pair_of[g2, g1] = p
        self._pair_nslot = np.asarray(tables["nslot"], dtype=np.int64)
        # every pair kept, in pair order: its first slot, and each slot's pair
        self._pair_first_slot = np.concatenate([[0], np.cumsum(self._pair_nslot)[:-1]]).astype(np.int64)
        self._slot_pair = np.repeat(np.arange(len(self._pair_nslot)), self._pair_nslot)
        self._pair_geom = np.asarray(tables["geom"], dtype=np.int64).reshape(-1, 2)
        # candidate pairs that MuJoCo collides but that have no slots (geom types the Warp engine lacks)
        self._slotless = [(g1, g2) for g1, g2, _ in (candidate_geom_pairs(mjm) if contact_on else [])
                          if self._pair_of[g1, g2] < 0]
        self._friction: np.ndarray | None = None  # [W, ncpair, 5] once per_world_param asks for it
        #: per world, an MjModel of its own once a model field has a value per world (else None:
        #: every world steps self._mjm), and the per-world values [W, ...] by name
        self._models: list[mujoco.MjModel] | None = None
        self._params: dict[str, np.ndarray] = {}

    # ---------------------------------------------------------------------------- sizes
    @property
    def mj_model(self) -> mujoco.MjModel:
        return self._mjm

    @property
    def nq(self) -> int:
        return int(self._mjm.nq)

    @property
    def nv(self) -> int:
        return int(self._mjm.nv)

    @property
    def nu(self) -> int:
        return int(self._mjm.nu)

    @property
    def na(self) -> int:
        return int(self._mjm.na)

    @property
    def nmocap(self) -> int:
        return int(self._mjm.nmocap)

    @property
    def timestep(self) -> float:
        return float(self._mjm.opt.timestep)

    # ---------------------------------------------------------------------------- state views
    def view(self, name: str) -> torch.Tensor:
        """Torch view [num_worlds, ...] of a state array or an output of the last step (mjData
        names, the Warp engine's layout); see the module docstring."""
        if name in _CONTACT_VIEWS:
            self._update_contacts()
        if name not in self._views:
            self._views[name] = torch.from_numpy(self._register_output(name))
        return self._views[name]

    def _register_output(self, name: str) -> np.ndarray:
        if name in _CONTACT_VIEWS:
            return self._contacts[name]
        if name in _QUATERNIONS:
            shape = (4,)
        elif name in _MATRICES:
            shape = (3, 3)
        else:
            size = next((s for s, names in _VECTORS.items() if name in names), None)
            if size is None:
                available = sorted([*_STATE, "nan_world", *_CONTACT_VIEWS, *_MATRICES, *_QUATERNIONS,
                                    *(n for names in _VECTORS.values() for n in names)])
                raise AttributeError(f"the MuJoCo backend has no view {name!r}; available: {', '.join(available)}")
            shape = () if size == 1 else (size,)
        n = getattr(self._data[0], name).size // int(np.prod(shape, dtype=int))
        array = np.zeros((self.num_worlds, n, *shape))
        for i, d in enumerate(self._data):
            source = getattr(d, name).reshape(n, *shape)  # a view of MjData's memory
            if name in _QUATERNIONS:  # MuJoCo's (w, x, y, z) -> the Warp engine's (x, y, z, w)
                pairs = [(array[i, :, :3], source[:, 1:]), (array[i, :, 3], source[:, 0])]
            else:
                pairs = [(array[i], source)]
            for dst, src in pairs:
                np.copyto(dst, src)
            self._copy_out[i].extend(pairs)  # refreshed after every step from now on
        self._outputs[name] = array
        return array

    def _assign(self, name: str, value) -> None:
        from simrl.sim.sim import assign_view

        assign_view(self.view(name), name, value)

    qpos = property(lambda self: self.view("qpos"), lambda self, v: self._assign("qpos", v),
                    doc="joint positions [num_worlds, nq] float64 (free/ball quaternions w, x, y, z)")
    qvel = property(lambda self: self.view("qvel"), lambda self, v: self._assign("qvel", v),
                    doc="joint velocities [num_worlds, nv] float64")
    ctrl = property(lambda self: self.view("ctrl"), lambda self, v: self._assign("ctrl", v),
                    doc="actuator controls [num_worlds, nu] float64, clamped to ctrlrange by MuJoCo")
    act = property(lambda self: self.view("act"), lambda self, v: self._assign("act", v),
                   doc="actuator activations [num_worlds, na] float64 (mjData.act), advanced by mj_step")
    qfrc_applied = property(lambda self: self.view("qfrc_applied"),
                            lambda self, v: self._assign("qfrc_applied", v),
                            doc="generalized forces applied by the user [num_worlds, nv] float64")
    mocap_pos = property(lambda self: self.view("mocap_pos"), lambda self, v: self._assign("mocap_pos", v),
                         doc="positions of the mocap bodies [num_worlds, nmocap, 3] float64, set by the user")
    mocap_quat = property(lambda self: self.view("mocap_quat"), lambda self, v: self._assign("mocap_quat", v),
                          doc="orientations of the mocap bodies [num_worlds, nmocap, 4] float64 (w, x, y, z)")
    qacc = property(lambda self: self.view("qacc"), doc="joint accelerations [num_worlds, nv] of the last step")

    @property
    def time(self) -> torch.Tensor:
        """Simulation time of each world [num_worlds] float64 (each MjData's time, advanced by
        mj_step, zeroed by `reset`): a copy, where `Sim.time` is a view."""
        return torch.tensor([d.time for d in self._data], dtype=torch.float64)
    qfrc_constraint = property(lambda self: self.view("qfrc_constraint"),
                               doc="generalized constraint forces [num_worlds, nv] of the last step")

    sensordata = property(lambda self: self.view("sensordata"),
                          doc="MuJoCo's sensordata [num_worlds, nsensordata] float64 of the last step (of the "
                              "state it started from) or forward; `sensor(name)` gives one sensor's columns")

    def sensor(self, name: str) -> torch.Tensor:
        """View of one sensor's values [num_worlds, dim] in `sensordata`, by its MJCF name."""
        return self.view("sensordata")[:, sensor_columns(self._mjm, name)]

    @property
    def nan_worlds(self) -> torch.Tensor:
        """Bool [num_worlds]: the world's state became non-finite (cleared by `reset`)."""
        return self.view("nan_world")[:, 0] != 0

    @property
    def warnings(self) -> torch.Tensor:
        """Int [num_worlds]: as `Sim.warnings`, the MuJoCo warnings each world raised in the last
        `step` or `forward` call, as bits (simrl.sim.data.WARNING_INERTIA: mjWARN_INERTIA; 0:
        none), from MjData's warning counters. Cleared by `reset`."""
        return self.view("nan_world")[:, 1]

    # ---------------------------------------------------------------------------- contacts
    def _update_contacts(self) -> None:
        """Bring the contact slots up to date with the worlds' MjData. Done when they are read,
        not after every step: mapping contacts to slots costs more than a step of a small
        robot, and environments read them once per action, after `decimation` steps."""
        if self._contacts is None:
            if self._slotless:
                names = ", ".join(f"{_geom_name(self._mjm, a)}-{_geom_name(self._mjm, b)}"
                                  for a, b in self._slotless[:4])
                raise UnsupportedFeatureError(
                    f"contact slots are defined for the Warp engine's primitive pairs only; this model has "
                    f"candidate pairs without slots ({names}), whose MuJoCo contacts could not be reported")
            W, ncon = self.num_worlds, int(self._pair_nslot.sum())
            self._contacts = {"contact_active": np.zeros((W, ncon), dtype=np.int32),
                              "contact_dist": np.zeros((W, ncon)), "contact_pos": np.zeros((W, ncon, 3)),
                              "contact_frame": np.zeros((W, ncon, 3, 3)),
                              "contact_pair": np.tile(self._slot_pair.astype(np.int32), (W, 1))}
            self._contacts_stale = True
        if not self._contacts_stale:
            return
        c = self._contacts
        c["contact_active"][:] = 0
        for i, d in enumerate(self._data):
            if d.ncon == 0:
                continue
            con = d.contact  # the ncon contacts of the last step
            slot, same_order = self._slots(con.geom)
            c["contact_active"][i, slot] = 1
            c["contact_dist"][i, slot] = con.dist
            c["contact_pos"][i, slot] = con.pos
            frame = con.frame.reshape(-1, 3, 3)
            if not same_order.all():
                # geoms swapped relative to the slot's pair: the normal (and, to keep the frame
                # right-handed, the first tangent) point the other way
                frame = frame.copy()
                frame[~same_order, :2] *= -1.0
            c["contact_frame"][i, slot] = frame
        self._contacts_stale = False

    def _slots(self, geom: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Slot of each contact of one MjData (geom [ncon, 2]), and whether its geoms are in the
        order of the slot's pair (else its normal points the other way)."""
        pair = self._pair_of[geom[:, 0], geom[:, 1]]
        if (pair < 0).any():
            g1, g2 = geom[int(np.flatnonzero(pair < 0)[0])]
            raise RuntimeError(f"MuJoCo reported a contact between geoms {_geom_name(self._mjm, g1)} and "
                               f"{_geom_name(self._mjm, g2)}, which are not a candidate pair of the contact tables")
        # contacts of one pair are consecutive: the k-th of its run goes to the pair's k-th slot
        index = np.arange(len(pair))
        run_start = np.empty(len(pair), dtype=bool)
        run_start[0] = True
        np.not_equal(pair[1:], pair[:-1], out=run_start[1:])
        rank = index - np.maximum.accumulate(np.where(run_start, index, 0))
        if (rank >= self._pair_nslot[pair]).any():
            p = int(pair[np.flatnonzero(rank >= self._pair_nslot[pair])[0]])
            raise RuntimeError(f"MuJoCo reported more contacts for the pair {self._pair_geom[p].tolist()} than its "
                               f"{self._pair_nslot[p]} slots")
        return self._pair_first_slot[pair] + rank, geom[:, 0] == self._pair_geom[pair, 0]

    @property
    def contact(self) -> SimpleNamespace:
        """Contact slots of every world, as `Sim.contact` (every candidate pair's, in pair order):
        `active [W, nslot]` (bool), `dist`, `pos [.., 3]`, `frame [.., 3, 3]` (rows: normal from
        geom1 to geom2, then two tangents), `pair` (each slot's candidate pair) and `geom [.., 2]`
        (its geom ids)."""
        pair = self.view("contact_pair")
        geom = torch.as_tensor(self._pair_geom[self._slot_pair]).expand(self.num_worlds, -1, -1)
        return SimpleNamespace(active=self.view("contact_active") != 0, dist=self.view("contact_dist"),
                               pos=self.view("contact_pos"), frame=self.view("contact_frame"), pair=pair, geom=geom)

    # ---------------------------------------------------------------------------- parameters
    def per_world_param(self, name: str) -> torch.Tensor:
        """A writable torch view [num_worlds, ...] of a model parameter with its own value in
        every world (domain randomization), in the Warp engine's layout (`Sim.per_world_param`):
        `cpair_friction` [W, ncpair, 5] (the friction of each candidate geom pair, in the order
        of the contact tables) or an MjModel field of PER_WORLD_PARAMS. The first MjModel field
        gives every world its own copy of the MjModel (mj_copyModel; the quadruped's is a few
        hundred kB); the values are copied into the world's copy before each of its steps, so
        writes take effect at the next step. After masses, inertias or armature, `set_const`
        recomputes what mj_setConst derives from them."""
        if name not in PER_WORLD_PARAMS:
            raise UnsupportedFeatureError(f"the MuJoCo backend cannot give {name!r} a value per world; "
                                          f"supported: {', '.join(PER_WORLD_PARAMS)}")
        if name == "cpair_friction":
            return self._friction_param()
        if name not in self._params:
            if self._models is None:
                self._models = [copy.copy(self._mjm) for _ in range(self.num_worlds)]
            self._params[name] = np.repeat(self._model_field(self._mjm, name)[None], self.num_worlds, axis=0)
            self._views[f"model.{name}"] = torch.from_numpy(self._params[name])
        return self._views[f"model.{name}"]

    @staticmethod
    def _model_field(m: mujoco.MjModel, name: str) -> np.ndarray:
        """The values of per-world parameter `name` in model m, in the Warp engine's layout."""
        field, columns = _MODEL_FIELDS[name]
        if field == "gravity":
            return np.array(m.opt.gravity)
        value = np.array(getattr(m, field))
        if field == "body_iquat":
            return value[:, [1, 2, 3, 0]]  # w, x, y, z -> x, y, z, w
        return value if columns is None else value[:, columns]

    def _apply_params(self, i: int) -> mujoco.MjModel:
        """World i's MjModel with its per-world values (self._mjm when none has one)."""
        if self._models is None:
            return self._mjm
        m = self._models[i]
        for name, values in self._params.items():
            field, columns = _MODEL_FIELDS[name]
            row = values[i]
            if field == "gravity":
                m.opt.gravity[:] = row
            elif field == "body_iquat":
                m.body_iquat[:] = row[:, [3, 0, 1, 2]]
            else:
                dst = getattr(m, field)
                if columns is None:
                    dst[:] = row
                else:
                    dst[:, columns] = row
        return m

    def set_const(self, world_ids=None) -> None:
        """mj_setConst on the MjModel of every world in `world_ids` (None: all) with its
        per-world values: dof_invweight0, body_invweight0, body_subtreemass, dof_M0,
        actuator_acc0 follow the world's masses, inertias and armature (as `Sim.set_const`)."""
        if self._models is None:
            return
        if world_ids is None:
            worlds = np.arange(self.num_worlds)
        else:
            ids = torch.as_tensor(world_ids).cpu()
            worlds = np.arange(self.num_worlds)[ids.numpy()] if ids.dtype == torch.bool else ids.numpy().ravel()
        scratch = mujoco.MjData(self._mjm)  # mj_setConst resets the data it is given
        for i in worlds:
            mujoco.mj_setConst(self._apply_params(int(i)), scratch)

    def _friction_param(self) -> torch.Tensor:
        if self._friction is None:
            if self._mjm.opt.integrator == IntegratorType.RK4:
                raise UnsupportedFeatureError(
                    "per-world cpair_friction with <option integrator='RK4'> is not supported by the MuJoCo backend "
                    "(RK4's intermediate stages detect contacts inside MuJoCo, where their friction cannot be set)")
            if self._mjm.nflex:
                raise UnsupportedFeatureError("per-world cpair_friction is not supported for models with flexes "
                                              "by the MuJoCo backend")
            if self._slotless:
                raise UnsupportedFeatureError("per-world cpair_friction needs every candidate pair in the contact "
                                              "tables; this model has pairs of geom types the tables lack")
            friction = np.reshape(np.asarray(self.model.contact_tables["friction"], dtype=np.float64), (-1, 5))
            self._friction = np.repeat(friction[None], self.num_worlds, axis=0)
            self._views["model.cpair_friction"] = torch.from_numpy(self._friction)
        return self._views["model.cpair_friction"]

    def per_world_params(self) -> dict[str, torch.Tensor]:
        """The per-world parameters created so far, by name (for an environment's state_dict)."""
        return {name: self._views[f"model.{name}"] for name in PER_WORLD_PARAMS if f"model.{name}" in self._views}

    def set_solver(self, iterations: int | None = None, tolerance: float | None = None) -> None:
        """Override MuJoCo's solver iterations and tolerance (<option iterations tolerance>)."""
        if iterations is not None:
            if isinstance(iterations, bool) or not isinstance(iterations, (int, np.integer)) or iterations < 0:
                raise ValueError(f"iterations must be a non-negative integer, got {iterations!r}")
            for m in [self._mjm, *(self._models or [])]:
                m.opt.iterations = int(iterations)
        if tolerance is not None:
            if not np.isfinite(tolerance) or tolerance < 0:
                raise ValueError(f"tolerance must be a non-negative finite number, got {tolerance!r}")
            for m in [self._mjm, *(self._models or [])]:
                m.opt.tolerance = float(tolerance)

    # ---------------------------------------------------------------------------- simulation
    def step(self, n: int = 1) -> None:
        """mj_step, `n` times, in every world whose state is finite."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise ValueError(f"n must be a non-negative integer, got {n!r}")
        self._run(lambda m, d, friction: [self._mj_step(m, d, friction) for _ in range(int(n))])

    def forward(self, worlds: torch.Tensor | None = None) -> None:
        """mj_forward in every world (or in those of the bool tensor `worlds` [num_worlds], the
        others left as they were): the outputs (views, contacts) of the current state."""
        chosen = None
        if worlds is not None:
            from simrl.sim.sim import check_world_mask

            check_world_mask(worlds, self.num_worlds, self.device)
            chosen = worlds.numpy()
        self._run(self._mj_forward, chosen)

    def _run(self, advance, chosen: np.ndarray | None = None) -> None:
        s = self._state
        finite = np.isfinite(s["qpos"]).all(axis=1) & np.isfinite(s["qvel"]).all(axis=1)
        if chosen is not None:  # the other worlds are left alone, their flags too
            self._nan[~finite & chosen] = 1
            finite = finite & chosen
        else:
            self._nan[~finite] = 1
        friction = self._friction
        for i in np.flatnonzero(finite):
            for dst, src in self._copy_in[i]:
                np.copyto(dst, src)
            inertia = self._data[i].warning[int(mujoco.mjtWarning.mjWARN_INERTIA)]
            count = inertia.number
            advance(self._apply_params(int(i)), self._data[i], None if friction is None else friction[i])
            self._warning[i] = WARNING_INERTIA if inertia.number > count else 0
            for dst, src in self._copy_out[i]:  # the new state, and the outputs requested so far
                np.copyto(dst, src)
        self._contacts_stale = True
        finite = np.isfinite(s["qpos"]).all(axis=1) & np.isfinite(s["qvel"]).all(axis=1)
        self._nan[~finite] = 1

    def _mj_step(self, m: mujoco.MjModel, d: mujoco.MjData, friction: np.ndarray | None) -> None:
        if friction is None:
            mujoco.mj_step(m, d)
            return
        # mj_step (engine_forward.c) with the world's friction set between collision and constraints
        mujoco.mj_checkPos(m, d)
        mujoco.mj_checkVel(m, d)
        self._mj_forward(m, d, friction)
        mujoco.mj_checkAcc(m, d)
        if m.opt.integrator == IntegratorType.EULER:
            mujoco.mj_Euler(m, d)
        else:  # implicit, implicitfast (RK4 is refused by per_world_param)
            mujoco.mj_implicit(m, d)

    def _mj_forward(self, m: mujoco.MjModel, d: mujoco.MjData, friction: np.ndarray | None) -> None:
        if friction is None:
            mujoco.mj_forward(m, d)
            return
        mujoco.mj_fwdPosition(m, d)
        if d.ncon:
            con = d.contact  # ncon contacts
            geom = con.geom
            con.friction[:] = friction[self._pair_of[geom[:, 0], geom[:, 1]]]
            # rebuild what mj_fwdPosition derived from the contacts (the efc arena restarts
            # after the contact array, so this replaces the first construction)
            mujoco.mj_makeConstraint(m, d)
            mujoco.mj_island(m, d)
            mujoco.mj_projectConstraint(m, d)
        mujoco.mj_sensorPos(m, d)
        if m.opt.enableflags & EnableBit.ENERGY:
            mujoco.mj_energyPos(m, d)
        mujoco.mj_forwardSkip(m, d, mujoco.mjtStage.mjSTAGE_POS, 0)

    def reset(self, world_ids=None) -> None:
        """As `Sim.reset`: qpos to qpos0, the mocap bodies to their model poses and qvel, ctrl,
        qfrc_applied, qacc, the solver's warm start (and activations) to zero, the non-finite
        flag cleared, in all worlds or in `world_ids` (a sequence, an index tensor or a boolean
        mask over worlds). Each reset world's MjData is reset too (mj_resetData: time, warnings)."""
        if world_ids is None:
            index = np.arange(self.num_worlds)
        else:
            ids = torch.as_tensor(world_ids)
            if ids.dtype == torch.bool:
                if ids.shape != (self.num_worlds,):
                    raise ValueError(f"a boolean world mask must have shape ({self.num_worlds},), "
                                     f"got {tuple(ids.shape)}")
                ids = ids.nonzero().reshape(-1)
            elif ids.dtype not in (torch.int32, torch.int64):
                raise TypeError(f"world_ids must be integer indices or a boolean mask, got {ids.dtype}")
            index = np.arange(self.num_worlds)[ids.cpu().numpy().reshape(-1)]
        s = self._state
        s["qpos"][index] = self._mjm.qpos0
        s["mocap_pos"][index] = self._mocap0[0]
        s["mocap_quat"][index] = self._mocap0[1]
        for name in ("qvel", "ctrl", "qfrc_applied", "qacc_warmstart", "act"):
            s[name][index] = 0.0
        if "qacc" in self._outputs:
            self._outputs["qacc"][index] = 0.0
        self._nan[index] = 0
        self._warning[index] = 0
        if self._contacts is not None:
            self._update_contacts()  # the last step's contacts stay readable, as in the Warp engine
        for i in np.unique(index):
            mujoco.mj_resetData(self._mjm, self._data[i])

    # ---------------------------------------------------------------------------- the rest
    def __getattr__(self, name: str):
        from simrl.sim.sim import Sim

        if not name.startswith("__") and (hasattr(Sim, name) or name in _SIM_ATTRIBUTES):
            raise AttributeError(f"MujocoSim does not support Sim.{name} (MuJoCo backend); use backend='warp' "
                                 f"for it")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __repr__(self) -> str:
        return (f"MujocoSim(nq={self.nq}, nv={self.nv}, nu={self.nu}, num_worlds={self.num_worlds}, "
                f"device='cpu', dtype=float64)")


def _geom_name(mjm: mujoco.MjModel, g: int) -> str:
    name = mujoco.mj_id2name(mjm, ObjType.GEOM, int(g))
    return repr(name) if name else f"#{int(g)}"
