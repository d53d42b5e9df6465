"""Reading a compiled MuJoCo model into Warp arrays (the host side of simrl.sim.model's
structs), and refusing what the engine lacks.

MuJoCo's compiler is the single source of truth: defaults, degrees vs radians, inertial
frames and `<default>` classes are all resolved by `mujoco.MjModel`; this file only copies
the compiled fields, and builds the tables the kernels read: the constraint rows' layout, the
candidate geom pairs and their contact slots (simrl.sim.contact_tables), the sensors' and the
contact sensors' tables, the meshes' and height fields'. Model parameters that domain
randomization may touch carry a leading world axis of size 1 (shared) that can be replaced by
one of size num_worlds; kernels read them at `worldid % shape[0]`.
"""


import mujoco
import numpy as np
import warp as wp

from simrl.errors import UnsupportedFeatureError
from simrl.sim.contact_tables import (
    CCD_ROWS,
    CONVEX_KINDS,
    CONVEX_MAX_CONTACTS,
    CYLINDER_CLIP_KINDS,
    FACE_CLIP_KINDS,
    MAX_CONTACTS,
    candidate_geom_pairs,
    clip_scratch_widths,
    clip_sizes,
    contact_budgets,
    contact_tables,
    polytope_sizes,
)
from simrl.sim.data import RAY_SCRATCH
from simrl.sim.mjmodel_fields import refused_fields
from simrl.sim.model import (
    SUBTREE_STACK,
    HFieldInfo,
    MeshInfo,
    actuator_struct,
    contact_sensor_struct,
    element_structs,
    far_struct,
    flexedge_struct,
    model_struct,
    muscle_struct,
    tendon_structs,
    transmission_struct,
)
from simrl.sim.types import (
    RK4_A,
    RK4_B,
    BiasType,
    CamLight,
    ConeType,
    ConstraintType,
    DisableBit,
    DynType,
    EnableBit,
    EqType,
    GainType,
    GeomType,
    IntegratorType,
    JointType,
    ObjType,
    SensorType,
    TrnType,
    WrapType,
    scalar_types,
)

#: sensor types that read contact forces through cfrc_int or rays (touch, force, torque): the
#: last entries of Model.sensor, evaluated by a pass of their own (simrl.sim.sensor)
WRENCH_SENSOR_TYPES = (SensorType.TOUCH, SensorType.FORCE, SensorType.TORQUE)
#: geom types a rangefinder's ray can meet (mj_ray: mju_rayGeom, mj_rayHfield); a mesh (mj_rayMesh
#: on its triangles, which simrl does not load) or an SDF in the ray's way refuses the rangefinder
RAY_GEOM_TYPES = (GeomType.PLANE, GeomType.HFIELD, GeomType.SPHERE, GeomType.CAPSULE, GeomType.ELLIPSOID,
                  GeomType.CYLINDER, GeomType.BOX)

#: far-testable runs per group of the broadphase (simrl.sim.broadphase: a group far from the
#: moving geoms is left out with one test; on a terrain of 130 boxes, 17 tests instead of 130)
BP_GROUP_RUNS = 8
#: constraint rows of each supported equality type (a flex equality: one per non-rigid edge,
#: `flex_rows`)
EQ_ROWS = {EqType.CONNECT: 3, EqType.WELD: 6, EqType.JOINT: 1, EqType.TENDON: 1}
SUPPORTED_EQ = (*EQ_ROWS, EqType.FLEX)

#: activation dynamics the engine implements (mj_fwdActuation); muscle, dcmotor, pid and user are refused
SUPPORTED_DYN = (DynType.NONE, DynType.INTEGRATOR, DynType.FILTER, DynType.FILTEREXACT, DynType.MUSCLE)
#: transmissions the engine implements (mj_transmission); SO(3) is refused
SUPPORTED_TRN = (TrnType.JOINT, TrnType.JOINTINPARENT, TrnType.SLIDERCRANK, TrnType.TENDON, TrnType.SITE,
                 TrnType.BODY)


# --------------------------------------------------------------------------------------------
# Sensors

#: the sensor types simrl computes (simrl.sim.sensor; others are refused by name when the model is
#: loaded): every member of SensorType
SUPPORTED_SENSORS = frozenset(SensorType)
#: object types a frame sensor can read
FRAME_OBJECTS = frozenset((ObjType.BODY, ObjType.XBODY, ObjType.GEOM, ObjType.SITE))
_FRAME_TYPES = frozenset((SensorType.FRAMEPOS, SensorType.FRAMEXAXIS, SensorType.FRAMEYAXIS, SensorType.FRAMEZAXIS,
                          SensorType.FRAMEQUAT, SensorType.FRAMELINVEL, SensorType.FRAMEANGVEL, SensorType.FRAMELINACC,
                          SensorType.FRAMEANGACC))


def sensor_columns(mjm: mujoco.MjModel, name: str) -> slice:
    """The columns of sensor `name` (its MJCF name) in `sensordata [W, nsensordata]`; KeyError
    listing the model's sensors when it has none of that name."""
    i = mujoco.mj_name2id(mjm, ObjType.SENSOR, name)
    if i < 0:
        names = [mujoco.mj_id2name(mjm, ObjType.SENSOR, k) for k in range(mjm.nsensor)]
        raise KeyError(f"no sensor named {name!r}; the model's sensors: {[n for n in names if n] or 'none'}")
    adr = int(mjm.sensor_adr[i])
    return slice(adr, adr + int(mjm.sensor_dim[i]))


def wrap_points(mjm: mujoco.MjModel) -> dict[str, np.ndarray]:
    """Where each point of MuJoCo's tendon paths (mjData.wrap_xpos, wrap_obj; mj_tendon's walk)
    comes from, a row per point that a path can hold, tendon by tendon: `tendon`, `obj` (wrap_obj:
    -1 a site, -2 a pulley, else the wrapping geom), `source` (an index into the sites' positions
    followed by the wrapping segments' first and then second tangent points (Data.wrap_path), then
    a zero point for the pulleys) and `segment` (the wrapping segment whose arc the point needs:
    present only when it wraps; -1: always present)."""
    nsite, first = mjm.nsite, None
    segs = []  # the geom of each spatial segment (-1: none), in Model.tendon_seg's order
    rows = []
    for t in range(mjm.ntendon):
        adr, num = int(mjm.tendon_adr[t]), int(mjm.tendon_num[t])
        kinds = [int(k) for k in mjm.wrap_type[adr:adr + num]]
        objs = [int(o) for o in mjm.wrap_objid[adr:adr + num]]
        if kinds[0] == WrapType.JOINT:
            continue
        j = 0
        while j < num - 1:
            if kinds[j] == WrapType.PULLEY or kinds[j + 1] == WrapType.PULLEY:
                if kinds[j] == WrapType.PULLEY:
                    rows.append((t, -2, "zero", -1))
                j += 1
                continue
            rows.append((t, -1, objs[j], -1))
            if kinds[j + 1] in (WrapType.SPHERE, WrapType.CYLINDER):
                k = len(segs)
                first = k if first is None else first
                rows += [(t, objs[j + 1], ("t0", k), k), (t, objs[j + 1], ("t1", k), k)]
                segs.append(objs[j + 1])
                j += 2
            else:
                segs.append(-1)
                j += 1
            if j == num - 1 or kinds[j + 1] == WrapType.PULLEY:
                rows.append((t, -1, objs[j], -1))
    # Data.wrap_path's rows: the segments from the first wrapping one to the last
    nrow = max(1, 0 if first is None else max(k for k, g in enumerate(segs) if g >= 0) + 1 - first)

    def source(src):
        if isinstance(src, tuple):
            return nsite + (src[1] - first) + (nrow if src[0] == "t1" else 0)
        return nsite + 2 * nrow if src == "zero" else src

    return {"tendon": np.array([r[0] for r in rows], dtype=np.int64),
            "obj": np.array([r[1] for r in rows], dtype=np.int64),
            "source": np.array([source(r[2]) for r in rows], dtype=np.int64),
            "segment": np.array([-1 if r[3] < 0 else r[3] - first for r in rows], dtype=np.int64)}


def frame_sensor(kind: int) -> bool:
    """The sensor reads an object's frame (objtype / reftype)."""
    return kind in _FRAME_TYPES


def ray_geoms(mjm: mujoco.MjModel) -> list[int]:
    """The geoms mj_ray sees when no geom group is given (ray_eliminate, engine_ray.c): the
    visible ones, whose rgba alpha (their material's where they have one) is not 0."""
    out = []
    for g in range(mjm.ngeom):
        mat = int(mjm.geom_matid[g])
        alpha = mjm.mat_rgba[mat][3] if mat >= 0 else mjm.geom_rgba[g][3]
        if alpha != 0:
            out.append(g)
    return out


def camera_constants(mjm: mujoco.MjModel, cam: int) -> dict:
    """What a camprojection sensor needs of camera `cam` (mj_camlight's frame, cam_project's
    focal lengths in pixels: from the intrinsics and sensor size when the sensor size is set, in
    float32 as MuJoCo's C arithmetic on those float fields, else from fovy in float64)."""
    mode = int(mjm.cam_mode[cam])
    res = [float(x) for x in mjm.cam_resolution[cam]]
    size = mjm.cam_sensorsize[cam].astype(np.float32)
    if size[0] and size[1]:
        intrinsic = mjm.cam_intrinsic[cam].astype(np.float32)
        focal = [float(intrinsic[k] / size[k] * np.float32(res[k])) for k in range(2)]
    else:
        focal = [0.5 / np.tan(float(mjm.cam_fovy[cam]) * np.pi / 360.0) * res[1]] * 2
    pos0 = mjm.cam_poscom0[cam] if mode == CamLight.TRACKCOM else mjm.cam_pos0[cam]
    return {"cam_body": int(mjm.cam_bodyid[cam]), "cam_mode": mode, "cam_target": int(mjm.cam_targetbodyid[cam]),
            "cam_pos": mjm.cam_pos[cam], "cam_quat": mjm.cam_quat[cam], "cam_pos0": pos0,
            "cam_mat0": mjm.cam_mat0[cam], "cam_focal": focal, "cam_res": res}


# --------------------------------------------------------------------------------------------
# The contact sensor's tables


def contact_order(mjm: mujoco.MjModel, tables: dict) -> list[int]:
    """The candidate pairs of `tables` (simrl.sim.contact_tables) in the order in which mj_collision
    (engine_collision_driver.c) appends their contacts to mjData.contact: body pairs by signature
    (body1 << 16) + body2 (mj_broadphase sorts them), and within one signature first the explicit
    <pair>s (merged in pair_signature order), then the default pairs, one geom pair after another:
    two single-geom bodies have one; the midphase (mj_collideTree, both bodies with a BVH, unless
    mjDSBL_MIDPHASE) sorts its contacts by their geom ids (geom1 the lower geom type, as stored in
    the contact), stably; otherwise all-to-all, the first body's geoms in the outer loop. A geom
    pair's own contacts keep its collider's order, which its slots follow."""
    explicit = {frozenset((int(mjm.pair_geom1[p]), int(mjm.pair_geom2[p]))): p for p in range(mjm.npair)}
    midphase = not mjm.opt.disableflags & DisableBit.MIDPHASE

    def key(p):
        g1, g2 = (int(g) for g in tables["geom"][p])
        b1, b2 = int(mjm.geom_bodyid[g1]), int(mjm.geom_bodyid[g2])
        lo, hi = min(b1, b2), max(b1, b2)
        ipair = explicit.get(frozenset((g1, g2)), -1)
        if ipair >= 0:
            return int(mjm.pair_signature[ipair]), 0, ipair, 0
        if midphase and mjm.body_bvhadr[lo] >= 0 and mjm.body_bvhadr[hi] >= 0:
            return (lo << 16) + hi, 1, g1, g2
        return (lo << 16) + hi, 1, *((g1, g2) if b1 == lo else (g2, g1))

    return sorted(range(len(tables["geom"])), key=key)


def _contact_match(mjm, geoms, kind, objid) -> tuple[bool, bool]:
    """checkMatch (engine_sensor.c) of a sensor object against the contact's two geoms and their
    bodies: (matches the first, matches the second). A site matches both here (its volume is
    tested while simulating); a subtree (mjOBJ_XBODY) holds the body or one of its ancestors."""
    out = []
    for g in geoms:
        body = int(mjm.geom_bodyid[g])
        if kind in (ObjType.UNKNOWN, ObjType.SITE):
            out.append(True)
        elif kind == ObjType.GEOM:
            out.append(objid == g)
        elif kind == ObjType.BODY:
            out.append(objid == body)
        elif kind == ObjType.XBODY:
            while body > objid:
                body = int(mjm.body_parentid[body])
            out.append(body == objid)
        else:
            out.append(False)
    return out[0], out[1]


def contact_direction(mjm: mujoco.MjModel, i: int, geoms) -> int:
    """matchContact (engine_sensor.c) of contact sensor i and a contact between `geoms` (geom1,
    geom2 as mjData.contact stores them), apart from the site's volume: 0 no match, 1 a match
    that keeps the contact's normal, -1 a match that flips it (the sensor's first object is the
    contact's second)."""
    type1, id1 = int(mjm.sensor_objtype[i]), int(mjm.sensor_objid[i])
    type2, id2 = int(mjm.sensor_reftype[i]), int(mjm.sensor_refid[i])
    if type1 == ObjType.UNKNOWN and type2 == ObjType.UNKNOWN:
        return 1
    m11, m12 = _contact_match(mjm, geoms, type1, id1)
    m21, m22 = _contact_match(mjm, geoms, type2, id2)
    if not (m11 or m12) or not (m21 or m22):
        return 0
    if type1 != ObjType.UNKNOWN and type2 != ObjType.UNKNOWN:
        regular, reverse = m11 and m22, m12 and m21
        return 1 if regular else -1 if reverse else 0
    if type1 != ObjType.UNKNOWN:
        return 1 if m11 else -1
    return 1 if m22 else -1


def contact_sensor_tables(mjm: mujoco.MjModel, tables: dict) -> tuple[list[tuple[int, int, int]],
                                                                        list[tuple[int, int]]]:
    """The contact sensors, as (sensor id, first candidate, number of candidates), and their
    candidates: (pair, slot of the pair, flip) of every slot of the candidate pairs whose geoms
    the sensor matches (flip 1: the normal is reversed), in mjData.contact's order
    (`contact_order`, then a pair's slots in turn)."""
    order = contact_order(mjm, tables)
    sensors, slots = [], []
    for i in np.flatnonzero(mjm.sensor_type == SensorType.CONTACT):
        start = len(slots)
        for p in order:
            direction = contact_direction(mjm, int(i), tables["geom"][p])
            if direction != 0:
                slots.extend((p, k, int(direction < 0)) for k in range(tables["nslot"][p]))
        sensors.append((int(i), start, len(slots) - start))
    return sensors, slots


# --------------------------------------------------------------------------------------------
# Meshes

def mesh_tables(mjm: mujoco.MjModel):
    """(info rows, mesh_vec [n, 3] float32, mesh_int, polygon normals [npoly, 3] float64) of the
    model's meshes (MeshInfo)."""
    nv_all = int(mjm.nmeshvert)
    vec = np.asarray(mjm.mesh_vert, np.float32).reshape(-1, 3)
    normals = np.asarray(mjm.mesh_polynormal, np.float64).reshape(-1, 3)
    graph = np.asarray(mjm.mesh_graph, np.int64).ravel()
    extrema = np.asarray(mjm.mesh_extrema, np.int64).ravel()
    npoly = int(mjm.nmeshpoly)
    polyvert = np.asarray(mjm.mesh_polyvert, np.int64).ravel()
    polymap = np.asarray(mjm.mesh_polymap, np.int64).ravel()
    # mesh_int: graph | extrema | poly vertex addresses | poly vertex counts | polyvert |
    # vertex map addresses | vertex map counts | polymap
    G = 0
    E = G + graph.size
    PA = E + extrema.size
    PN = PA + npoly
    PV = PN + npoly
    MA = PV + polyvert.size
    MN = MA + nv_all
    PM = MN + nv_all
    ints = np.concatenate([graph, extrema, PV + np.asarray(mjm.mesh_polyvertadr, np.int64).ravel()[:npoly],
                           np.asarray(mjm.mesh_polyvertnum, np.int64).ravel()[:npoly], polyvert,
                           PM + np.asarray(mjm.mesh_polymapadr, np.int64).ravel()[:nv_all],
                           np.asarray(mjm.mesh_polymapnum, np.int64).ravel()[:nv_all], polymap])
    rows = []
    for i in range(mjm.nmesh):
        polyadr = int(mjm.mesh_polyadr[i])
        vertadr = int(mjm.mesh_vertadr[i])
        rows.append(dict(vertadr=vertadr, vertnum=int(mjm.mesh_vertnum[i]),
                         graphadr=G + int(mjm.mesh_graphadr[i]) if mjm.mesh_graphadr[i] >= 0 else -1,
                         extadr=E + 27 * i, polynum=int(mjm.mesh_polynum[i]), poly_vertadr=PA + polyadr,
                         poly_vertnum=PN + polyadr, poly_normal=polyadr, vert_mapadr=MA + vertadr,
                         vert_mapnum=MN + vertadr))
    return rows, vec, ints, normals


# --------------------------------------------------------------------------------------------
# What the engine supports


def _name(mjm, obj, i) -> str:
    name = mujoco.mj_id2name(mjm, obj, i)
    return f"'{name}'" if name else f"#{i}"


def _disabled(mjm, flag) -> bool:
    return bool(mjm.opt.disableflags & flag)


def standalone_free_bodies(mjm: mujoco.MjModel) -> list[int]:
    """Bodies whose only joint is free and that have no children with dofs or mass (MuJoCo's
    mj_isFreeBody, engine_derivative.c): implicitfast solves their 6x6 block apart."""
    bodies = []
    for b in range(1, mjm.nbody):
        jnt = int(mjm.body_jntadr[b])
        if (mjm.body_jntnum[b] == 1 and mjm.jnt_type[jnt] == JointType.FREE
                and mjm.tree_dofnum[mjm.dof_treeid[mjm.jnt_dofadr[jnt]]] == 6
                and mjm.body_subtreemass[b] == mjm.body_mass[b]):
            bodies.append(b)
    return bodies


def flex_problems(mjm: mujoco.MjModel) -> list[str]:
    """What the engine does not implement of the model's flexes. It implements 1-D flexes (cables)
    whose vertices are bodies, as <flexcomp dim="1" dof="full"> (or "radial") builds them, held
    together by their edge equality (<edge equality="true"/>, mjEQ_FLEX): the bodies and joints
    are ordinary ones; what the flex adds is one constraint row per edge (mj_flex,
    mj_instantiateEquality). Collisions, interpolated vertices, elasticity, edge spring-dampers
    and plasticity are refused."""
    problems = []
    for f in range(mjm.nflex):
        where = f"<flex>/<flexcomp> {_name(mjm, ObjType.FLEX, f)}"
        if int(mjm.flex_dim[f]) != 1:
            problems.append(f"{where}: dim={int(mjm.flex_dim[f])}: only 1-D flexes (dim=1, cables) are supported")
        if int(mjm.flex_interp[f]) != 0:
            problems.append(f"{where}: vertices interpolated from nodes (<flexcomp dof='trilinear'> or "
                            "'quadratic') are not supported; use dof='full' or 'radial'")
        if int(mjm.flex_contype[f]) or int(mjm.flex_conaffinity[f]):
            problems.append(f"{where}: <contact contype='{int(mjm.flex_contype[f])}' "
                            f"conaffinity='{int(mjm.flex_conaffinity[f])}'>: flex collisions are not supported "
                            "(set both to 0)")
        if int(mjm.flex_selfcollide[f]) != mujoco.mjtFlexSelf.mjFLEXSELF_NONE:
            mode = mujoco.mjtFlexSelf(int(mjm.flex_selfcollide[f])).name.removeprefix("mjFLEXSELF_").lower()
            problems.append(f"{where}: <contact selfcollide='{mode}'>: flex self-collisions are not supported "
                            "(set selfcollide='none')")
        if int(mjm.flex_passive[f]):
            problems.append(f"{where}: <contact passive='true'>: passive flex contacts are not supported")
        if mjm.flex_edgestiffness[f] != 0 or mjm.flex_edgedamping[f] != 0:
            problems.append(f"{where}: <edge stiffness='{mjm.flex_edgestiffness[f]:g}' "
                            f"damping='{mjm.flex_edgedamping[f]:g}'>: flex edge spring-dampers are not supported "
                            "(set both to 0; <edge equality='true'> holds the edges' lengths)")
        if (mjm.flex_damping[f] != 0 or int(mjm.flex_stiffnessadr[f]) >= 0 or int(mjm.flex_bendingadr[f]) >= 0):
            problems.append(f"{where}: <elasticity>: flex elasticity and damping are not supported "
                            "(remove <elasticity>)")
        if int(mjm.flex_plasticadr[f]) >= 0:
            problems.append(f"{where}: flex plasticity is not supported")
        if int(mjm.flex_edgeequality[f]) not in (0, 1):
            problems.append(f"{where}: <edge equality='{int(mjm.flex_edgeequality[f])}'>: only the edge "
                            "equality (equality='true') is supported")
    return problems


def flex_rows(mjm: mujoco.MjModel, f: int) -> list[int]:
    """The edges of flex f that a flex equality constrains, one row each: the non-rigid ones
    (their vertices on different bodies), in edge order (mj_instantiateEquality, mjEQ_FLEX)."""
    adr, num = int(mjm.flex_edgeadr[f]), int(mjm.flex_edgenum[f])
    return [e for e in range(adr, adr + num) if not mjm.flexedge_rigid[e]]


def equality_rows(mjm: mujoco.MjModel, i: int) -> int:
    """The constraint rows of equality constraint i."""
    kind = int(mjm.eq_type[i])
    return len(flex_rows(mjm, int(mjm.eq_obj1id[i]))) if kind == EqType.FLEX else EQ_ROWS[kind]


def flex_edge_vertices(mjm: mujoco.MjModel, f: int, e: int) -> list[tuple[int, np.ndarray]]:
    """(body, offset in the body's frame) of each vertex of edge e of flex f: mj_flex places a
    vertex at its body's origin where the flex is centered (or its flex_vert is zero), else at
    xpos + xmat flex_vert."""
    out = []
    for k in (0, 1):
        v = int(mjm.flex_vertadr[f]) + int(mjm.flex_edge[e, k])
        offset = np.zeros(3) if mjm.flex_centered[f] else np.asarray(mjm.flex_vert[v], dtype=np.float64)
        out.append((int(mjm.flex_vertbodyid[v]), offset))
    return out


def unsupported_features(mjm: mujoco.MjModel) -> list[str]:
    """Everything in `mjm` that changes the dynamics and that this engine does not implement.

    Each entry names the MJCF element and attribute (and how to avoid it where possible).
    An empty list means the engine reproduces `mj_step` on this model.
    """
    problems = []
    opt = mjm.opt
    if opt.integrator not in (IntegratorType.EULER, IntegratorType.RK4, IntegratorType.IMPLICITFAST):
        name = IntegratorType(opt.integrator).name
        problems.append(f"<option integrator='{name.lower()}'>: only Euler, RK4 and implicitfast are supported "
                        "(implicitfast is implicit without the derivative of the Coriolis and centrifugal forces)")
    if opt.density != 0 or opt.viscosity != 0:
        problems.append(f"<option density='{opt.density:g}' viscosity='{opt.viscosity:g}'>: "
                        "fluid forces are not supported (set both to 0)")
    for flag in (EnableBit.SLEEP, EnableBit.IPC, EnableBit.DIAGEXACT, EnableBit.SPECULATIVE):
        if opt.enableflags & flag:
            problems.append(f"<option><flag {flag.name.lower()}='enable'>: "
                            "not supported")
    if mjm.nplugin:
        problems.append(f"<plugin>: {mjm.nplugin} plugin instance(s) are not supported")
    problems.extend(flex_problems(mjm))
    if getattr(mjm, "nplastic", 0):
        problems.append("<joint springyield> or <tendon springyield>: plasticity is not supported")
    # the refused mjModel fields the checks below do not name (simrl.sim.mjmodel_fields)
    problems.extend(refused_fields(mjm))

    constraints_on = not _disabled(mjm, DisableBit.CONSTRAINT)
    how = "(disable with <option><flag {}='disable'/>)"
    if constraints_on and mjm.neq and not _disabled(mjm, DisableBit.EQUALITY):
        for i in range(mjm.neq):
            kind = int(mjm.eq_type[i])
            ename = _name(mjm, ObjType.EQUALITY, i)
            if kind not in SUPPORTED_EQ:
                tag = EqType(kind).name.lower()
                problems.append(f"<equality><{tag}> {ename}: only connect, weld, joint, tendon and flex edge "
                                "equality constraints are supported " + how.format("equality"))
            elif kind == EqType.JOINT:
                for j in (int(mjm.eq_obj1id[i]), int(mjm.eq_obj2id[i])):
                    if j >= 0 and int(mjm.jnt_type[j]) not in (JointType.HINGE, JointType.SLIDE):
                        problems.append(f"<equality><joint> {ename}: joint "
                                        f"{_name(mjm, ObjType.JOINT, j)} is not a hinge or slide")

    # sensors
    for i in range(mjm.nsensor):
        sname = _name(mjm, ObjType.SENSOR, i)
        kind = int(mjm.sensor_type[i])
        tag = mujoco.mjtSensor(kind).name.removeprefix("mjSENS_").lower()
        if kind not in SUPPORTED_SENSORS:
            problems.append(f"<sensor><{tag}> {sname}: this sensor type is not computed (supported: "
                            + ", ".join(sorted(k.name.lower() for k in SUPPORTED_SENSORS))
                            + "); remove it from the MJCF to load the model")
        elif frame_sensor(kind) and any(int(t) not in FRAME_OBJECTS for t, j in (
                (mjm.sensor_objtype[i], mjm.sensor_objid[i]), (mjm.sensor_reftype[i], mjm.sensor_refid[i])) if j >= 0):
            problems.append(f"<sensor><{tag}> {sname}: frame sensors of cameras are not supported")
        if kind == SensorType.RANGEFINDER:
            if int(mjm.sensor_objtype[i]) != ObjType.SITE:
                problems.append(f"<sensor><rangefinder camera=...> {sname}: a rangefinder on a camera (a ray per "
                                "pixel) is not supported; attach it to a site")
            else:
                body = int(mjm.site_bodyid[mjm.sensor_objid[i]])
                for g in ray_geoms(mjm):
                    if int(mjm.geom_bodyid[g]) != body and int(mjm.geom_type[g]) not in RAY_GEOM_TYPES:
                        gtype = GeomType(int(mjm.geom_type[g])).name.lower()
                        problems.append(f"<sensor><rangefinder> {sname}: its ray can meet {gtype} geom "
                                        f"{_name(mjm, ObjType.GEOM, g)}, and rays against {gtype} geoms are not "
                                        "implemented (make the geom invisible, rgba alpha 0, or remove the sensor)")
                        break
        if int(mjm.sensor_history[i, 0]) > 0 or mjm.sensor_delay[i] > 0 or mjm.sensor_interval[i, 0] > 0:
            problems.append(f"<sensor><{tag}> {sname}: sensor delay, interval and history are not supported")

    # joints and dofs
    for j in range(mjm.njnt):
        jname = _name(mjm, ObjType.JOINT, j)
        if np.any(mjm.jnt_stiffnesspoly[j] != 0):
            problems.append(f"<joint stiffnesspoly> on joint {jname}: not supported")
        if getattr(mjm, "jnt_springyield", None) is not None and np.any(mjm.jnt_springyield[j] != 0):
            problems.append(f"<joint springyield> on joint {jname}: not supported")
    for i in range(mjm.nv):
        jname = _name(mjm, ObjType.JOINT, int(mjm.dof_jntid[i]))
        if np.any(mjm.dof_dampingpoly[i] != 0):
            problems.append(f"<joint dampingpoly> on joint {jname}: not supported")

    # tendons (mj_tendon): fixed, and spatial through sites and pulleys
    for t in range(mjm.ntendon):
        tname = _name(mjm, ObjType.TENDON, t)
        adr, num = int(mjm.tendon_adr[t]), int(mjm.tendon_num[t])
        kinds = [int(k) for k in mjm.wrap_type[adr:adr + num]]
        if getattr(mjm, "tendon_springyield", None) is not None and np.any(mjm.tendon_springyield[t] != 0):
            problems.append(f"<tendon springyield> on tendon {tname}: not supported")
        if np.any(mjm.tendon_stiffnesspoly[t] != 0) or np.any(mjm.tendon_dampingpoly[t] != 0):
            problems.append(f"<tendon stiffnesspoly/dampingpoly> on tendon {tname}: polynomial tendon springs "
                            "and dampers are not supported")

    # actuators (MuJoCo 4.0's nu counts the controls: an actuator with several inputs, refused
    # below, makes it larger than the number of actuators)
    for a in range(getattr(mjm, "nactuator", mjm.nu)):
        aname = "actuator " + _name(mjm, ObjType.ACTUATOR, a)
        trn = int(mjm.actuator_trntype[a])
        if trn not in SUPPORTED_TRN:
            kind = TrnType(trn).name.lower()
            problems.append(f"<actuator> {aname} transmission '{kind}': only joint, jointinparent, slider-crank, "
                            "tendon, site and body transmissions (joint=..., jointinparent=..., cranksite=..., "
                            "tendon=..., site=... with or without refsite=..., body=...) are supported")
        dyntype = int(mjm.actuator_dyntype[a])
        if dyntype not in SUPPORTED_DYN:
            kind = DynType(dyntype).name.lower()
            problems.append(f"<actuator dyntype='{kind}'> {aname}: only the activation dynamics none, "
                            "integrator, filter, filterexact and muscle are supported")
        elif int(mjm.actuator_actnum[a]) != (0 if dyntype == DynType.NONE else 1):
            kind = DynType(dyntype).name.lower()
            problems.append(f"<actuator actdim='{int(mjm.actuator_actnum[a])}'> {aname}: dyntype '{kind}' "
                            f"with {int(mjm.actuator_actnum[a])} activations is not supported (none has 0, "
                            "integrator, filter, filterexact and muscle have 1)")
        if mjm.actuator_gaintype[a] not in (GainType.FIXED, GainType.AFFINE, GainType.MUSCLE):
            kind = GainType(int(mjm.actuator_gaintype[a])).name.lower()
            problems.append(f"<actuator gaintype='{kind}'> {aname}: only fixed, affine and muscle gains "
                            "are supported")
        if mjm.actuator_biastype[a] not in (BiasType.NONE, BiasType.AFFINE, BiasType.MUSCLE):
            kind = BiasType(int(mjm.actuator_biastype[a])).name.lower()
            problems.append(f"<actuator biastype='{kind}'> {aname}: only none, affine and muscle biases "
                            "are supported")
        for attr in ("damping", "armature", "delay"):
            value = getattr(mjm, f"actuator_{attr}", None)
            if value is not None and np.any(np.asarray(value[a]) != 0):
                problems.append(f"<actuator {attr}> {aname}: not supported")
        if hasattr(mjm, "actuator_dampingpoly") and np.any(mjm.actuator_dampingpoly[a] != 0):
            problems.append(f"<actuator dampingpoly> {aname}: not supported")
        if hasattr(mjm, "actuator_ctrlnum") and (mjm.actuator_ctrlnum[a] != 1
                                                 or mjm.actuator_outnum[a] != 1):
            problems.append(f"<actuator> {aname}: actuators with {mjm.actuator_ctrlnum[a]} inputs "
                            f"and {mjm.actuator_outnum[a]} outputs are not supported (1 and 1)")
        if mjm.actuator_plugin[a] >= 0:
            problems.append(f"<actuator plugin> {aname}: not supported")

    # contacts: possible only when neither contact nor constraint is disabled
    if constraints_on and not _disabled(mjm, DisableBit.CONTACT):
        pairs = candidate_geom_pairs(mjm)
        geom = ObjType.GEOM
        if pairs and opt.noslip_iterations > 0:
            problems.append(f"<option noslip_iterations='{opt.noslip_iterations}'>: the noslip "
                            "post-processing is not supported")
        libccd_named = False
        for g1, g2, ipair in pairs:
            types = tuple(sorted((int(mjm.geom_type[g1]), int(mjm.geom_type[g2]))))
            names = f"geoms {_name(mjm, geom, g1)} and {_name(mjm, geom, g2)}"
            if types not in MAX_CONTACTS:
                kinds = "-".join(GeomType(t).name.lower() for t in types)
                problems.append(f"<geom type> {names} can collide as {kinds}: the implemented pairs are plane "
                                "or height field with sphere, capsule, ellipsoid, cylinder, box or mesh, and any "
                                "two of sphere, capsule, ellipsoid, cylinder, box and mesh (SDFs and flexes are "
                                "not supported) " + how.format("contact")
                                + " or set contype/conaffinity so they cannot collide")
                continue
            if types in CONVEX_MAX_CONTACTS and _disabled(mjm, DisableBit.NATIVECCD) and not libccd_named:
                libccd_named = True
                problems.append(f"<option><flag nativeccd='disable'/> with {names}: convex pairs collide by "
                                "MuJoCo's native GJK/EPA only (libccd's MPR is not implemented)")
            condim = int(mjm.pair_dim[ipair]) if ipair >= 0 else None
            if condim is None:
                p1, p2 = mjm.geom_priority[g1], mjm.geom_priority[g2]
                condim = int(mjm.geom_condim[g1] if p1 > p2 else mjm.geom_condim[g2] if p2 > p1
                             else max(mjm.geom_condim[g1], mjm.geom_condim[g2]))
            if condim not in (1, 3, 4, 6):
                problems.append(f"<geom condim='{condim}'> for {names}: only condim 1, 3, 4 and 6 are supported")
            adhesion = mjm.pair_adhesion[ipair] if ipair >= 0 else mjm.geom_adhesion[g1] + mjm.geom_adhesion[g2]
            if adhesion != 0:
                problems.append(f"<geom adhesion> for {names}: adhesion is not supported")
    return problems


def check_supported(mjm: mujoco.MjModel) -> None:
    """Raise UnsupportedFeatureError naming every unsupported feature of `mjm`."""
    problems = unsupported_features(mjm)
    if problems:
        lines = "\n  - ".join(problems)
        raise UnsupportedFeatureError(f"the model uses features simrl does not support:\n  - {lines}")


# --------------------------------------------------------------------------------------------
# Copying the compiled model to the device


def _wxyz_to_xyzw(q: np.ndarray) -> np.ndarray:
    q = np.asarray(q, dtype=np.float64).reshape(-1, 4)
    return q[:, [1, 2, 3, 0]]


def _dof_chain(mjm, body: int) -> list[int]:
    """The dofs that move `body`: those of the body and of its ancestors."""
    while body > 0 and mjm.body_dofnum[body] == 0:
        body = mjm.body_parentid[body]
    dof = int(mjm.body_dofadr[body] + mjm.body_dofnum[body] - 1) if mjm.body_dofnum[body] else -1
    chain = []
    while dof >= 0:
        chain.append(dof)
        dof = int(mjm.dof_parentid[dof])
    return chain


def _row_columns(mjm, efc_type: int, efc_id: int, efc_sub: int) -> list[int]:
    """Increasing column indices where the Jacobian of a row before the contacts' can be non-zero."""
    if efc_type == ConstraintType.EQUALITY:
        if int(mjm.eq_type[efc_id]) == EqType.FLEX:
            f = int(mjm.eq_obj1id[efc_id])
            (b1, _), (b2, _) = flex_edge_vertices(mjm, f, flex_rows(mjm, f)[efc_sub])
            return sorted(set(_dof_chain(mjm, b1)) | set(_dof_chain(mjm, b2)))
        if int(mjm.eq_type[efc_id]) == EqType.TENDON:
            tens = [t for t in (int(mjm.eq_obj1id[efc_id]), int(mjm.eq_obj2id[efc_id])) if t >= 0]
            return sorted({c for t in tens for c in tendon_columns(mjm, t)})
        if int(mjm.eq_type[efc_id]) == EqType.JOINT:
            jnts = [j for j in (int(mjm.eq_obj1id[efc_id]), int(mjm.eq_obj2id[efc_id])) if j >= 0]
            return sorted({int(mjm.jnt_dofadr[j]) for j in jnts})
        bodies = _eq_bodies(mjm, efc_id)
        return sorted(set(_dof_chain(mjm, bodies[0])) | set(_dof_chain(mjm, bodies[1])))
    if efc_type == ConstraintType.FRICTION_DOF:
        return [efc_id]
    if efc_type in (ConstraintType.FRICTION_TENDON, ConstraintType.LIMIT_TENDON):
        return tendon_columns(mjm, efc_id)
    if efc_type == ConstraintType.LIMIT_JOINT:
        dof = int(mjm.jnt_dofadr[efc_id])
        return [dof, dof + 1, dof + 2] if mjm.jnt_type[efc_id] == JointType.BALL else [dof]
    raise ValueError(f"no fixed columns for a row of type {efc_type}")


def _pair_columns(mjm, g1: int, g2: int) -> list[int]:
    """Increasing column indices where the Jacobian of a contact between geoms g1 and g2 can be
    non-zero: the dof chains that move their two bodies."""
    return sorted(set(_dof_chain(mjm, int(mjm.geom_bodyid[g1]))) | set(_dof_chain(mjm, int(mjm.geom_bodyid[g2]))))


def tendon_columns(mjm, t: int) -> list[int]:
    """Increasing dofs in which tendon t's Jacobian can be non-zero: a fixed tendon's joints' dofs,
    a spatial tendon's the dof chains that move its sites and its wrapping geoms."""
    adr, num = int(mjm.tendon_adr[t]), int(mjm.tendon_num[t])
    cols = set()
    for k in range(adr, adr + num):
        kind, obj = int(mjm.wrap_type[k]), int(mjm.wrap_objid[k])
        if kind == WrapType.JOINT:
            cols.add(int(mjm.jnt_dofadr[obj]))
        elif kind == WrapType.SITE:
            cols |= set(_dof_chain(mjm, int(mjm.site_bodyid[obj])))
        elif kind in (WrapType.SPHERE, WrapType.CYLINDER):
            # the tangent points move with the geom (a side site moves nothing)
            cols |= set(_dof_chain(mjm, int(mjm.geom_bodyid[obj])))
    return sorted(cols)


def _eq_bodies(mjm, i: int) -> tuple[int, int]:
    """The two bodies of a connect or weld (of its sites under site semantics)."""
    b = int(mjm.eq_obj1id[i]), int(mjm.eq_obj2id[i])
    if int(mjm.eq_objtype[i]) == ObjType.SITE:
        return int(mjm.site_bodyid[b[0]]), int(mjm.site_bodyid[b[1]])
    return b


def _is_chain(mjm, cols: list[int]) -> bool:
    """Every column is an ancestor dof of the last one (then J' D J adds nothing outside the
    sparsity pattern of the inertia matrix)."""
    if not cols:
        return True
    chain, dof = set(), cols[-1]
    while dof >= 0:
        chain.add(dof)
        dof = int(mjm.dof_parentid[dof])
    return set(cols) <= chain


class Model:
    """A compiled MjModel copied to Warp arrays of one precision on one device.

    `struct` is what kernels receive. Attributes mirror MuJoCo's names.
    """

    def __init__(self, mjm: mujoco.MjModel, device, dtype=wp.float32, njmax: int | None = None,
                 nconmax: int | None = None):
        check_supported(mjm)
        self.mjm = mjm
        self.device = wp.get_device(device)
        self.dtype = dtype
        self.T = scalar_types(dtype)
        T = self.T
        npf = np.float64 if dtype == wp.float64 else np.float32

        def ints(x):
            return wp.array(np.asarray(x, dtype=np.int32).ravel(), dtype=int, device=self.device)

        def arr(x, dt, shape=None):
            a = np.asarray(x, dtype=npf)
            if shape is not None:
                a = a.reshape(shape)
            return wp.array(a, dtype=dt, device=self.device)

        def shared(x, dt, width):
            # randomizable parameter: leading world axis of size 1
            a = np.asarray(x, dtype=npf).reshape((1, -1) if width == 1 else (1, -1, width))
            return wp.array(a, dtype=dt, device=self.device)

        opt = mjm.opt
        flags = int(opt.disableflags)
        m = model_struct(dtype)()
        m.nbody, m.njnt, m.nq, m.nv, m.nu, m.na = mjm.nbody, mjm.njnt, mjm.nq, mjm.nv, mjm.nu, mjm.na
        m.ngeom, m.nsite, m.nmocap = mjm.ngeom, mjm.nsite, mjm.nmocap
        m.timestep = dtype(opt.timestep)
        gravity = np.zeros(3) if flags & DisableBit.GRAVITY else np.asarray(opt.gravity)
        m.gravity = wp.array(np.asarray(gravity, dtype=npf).reshape(1, 3), dtype=T.vec3, device=self.device)
        m.enable_spring = int(not flags & DisableBit.SPRING)
        m.enable_damper = int(not flags & DisableBit.DAMPER)
        m.enable_actuation = int(not flags & DisableBit.ACTUATION)
        m.enable_clampctrl = int(not flags & DisableBit.CLAMPCTRL)
        # mj_EulerSkip integrates damping implicitly unless eulerdamp or damper is disabled;
        # with zero damping that path equals the explicit one, so it is skipped.
        m.euler_damp = int(not flags & DisableBit.EULERDAMP and not flags & DisableBit.DAMPER
                           and bool(np.any(mjm.dof_damping > 0)))
        m.implicitfast = int(opt.integrator == IntegratorType.IMPLICITFAST)
        free_bodies = [int(mjm.body_jntadr[b]) for b in standalone_free_bodies(mjm)] if m.implicitfast else []
        m.free_body_num = len(free_bodies)
        m.jnt_free_body = ints([int(j in free_bodies) for j in range(mjm.njnt)] or [0])

        m.warmstart_at_end = int(opt.integrator == IntegratorType.RK4)
        m.enable_warmstart = int(not flags & DisableBit.WARMSTART)
        m.rk4_a = T.vec3(*RK4_A)
        m.rk4_b = wp.types.vector(4, dtype=dtype)(*RK4_B)
        m.body_parentid = ints(mjm.body_parentid)
        m.body_rootid = ints(mjm.body_rootid)
        m.body_jntadr = ints(mjm.body_jntadr)
        m.body_jntnum = ints(mjm.body_jntnum)
        m.body_dofadr = ints(mjm.body_dofadr)
        m.body_dofnum = ints(mjm.body_dofnum)
        # depths, levels and children (the wide schedule walks the tree a level per launch)
        depth = [0] * mjm.nbody
        for b in range(1, mjm.nbody):
            depth[b] = depth[mjm.body_parentid[b]] + 1
        tree = sorted(range(mjm.nbody), key=lambda b: (depth[b], b))
        counts = np.bincount(depth)
        #: (first index into body_tree, number of bodies) of each depth, the world's (0, 1) first
        self.body_levels = [(int(a), int(n)) for a, n in zip(np.cumsum(counts) - counts, counts, strict=True)]

        def placed_alone(b):  # as simrl.sim.kinematics.placed_alone
            return b == 0 or mjm.body_mocapid[b] >= 0 or (
                mjm.body_jntnum[b] == 1 and mjm.jnt_type[mjm.body_jntadr[b]] == JointType.FREE)

        #: how many levels from the world's hold only bodies placed without their parent (the world,
        #: free and mocap bodies): the tree's kinematics pass skips them (kinematics.body_root places them)
        self.body_levels_placed_alone = 0
        for start, count in self.body_levels:
            if not all(placed_alone(tree[i]) for i in range(start, start + count)):
                break
            self.body_levels_placed_alone += 1
        children = [[c for c in range(1, mjm.nbody) if mjm.body_parentid[c] == b] for b in range(mjm.nbody)]
        m.body_tree = ints(tree)
        m.body_child_adr = ints(np.cumsum([0] + [len(c) for c in children])[:-1])
        m.body_child_num = ints([len(c) for c in children])
        m.body_child = ints([c for cs in children for c in cs] or [0])
        paths = []
        for b in range(mjm.nbody):
            path = [b]
            while path[-1] != 0:
                path.append(int(mjm.body_parentid[path[-1]]))
            paths.append(path[::-1])
        adr = np.cumsum([0] + [len(p) for p in paths])[:-1]
        m.body_path_adr = wp.array(np.array([[a, len(p)] for a, p in zip(adr, paths, strict=True)], dtype=np.int32),
                                   dtype=wp.vec2i, device=self.device)
        m.body_path = ints([a for p in paths for a in p])
        # MuJoCo numbers bodies depth first (a parent before its children), so that each subtree
        # is a range of ids: b to the last descendant; checked by counting
        end, size = list(range(1, mjm.nbody + 1)), [1] * mjm.nbody
        for b in range(mjm.nbody - 1, 0, -1):
            parent = int(mjm.body_parentid[b])
            end[parent], size[parent] = max(end[parent], end[b]), size[parent] + size[b]
        m.body_subtree = wp.array(np.array([end, depth], dtype=np.int32).T.copy(), dtype=wp.vec2i, device=self.device)
        #: the wide schedule's engine step sums subtrees one thread per body (simrl.sim.subtree)
        #: when each subtree is a range of body ids and the tree fits the thread's stack
        self.subtree_alone = all(end[b] - b == size[b] for b in range(mjm.nbody)) and max(depth) < SUBTREE_STACK
        m.body_pos = arr(mjm.body_pos, T.vec3)
        m.body_quat = arr(_wxyz_to_xyzw(mjm.body_quat), T.quat)
        m.body_ipos = shared(mjm.body_ipos, T.vec3, 3)
        m.body_iquat = shared(_wxyz_to_xyzw(mjm.body_iquat), T.quat, 4)
        m.body_mass = shared(mjm.body_mass, dtype, 1)
        m.body_inertia = shared(mjm.body_inertia, T.vec3, 3)
        m.body_mocapid = ints(mjm.body_mocapid)
        #: the body of each mocap index (MuJoCo numbers mocap bodies in body order)
        self.mocap_body = [int(b) for b in np.flatnonzero(mjm.body_mocapid >= 0)[np.argsort(
            mjm.body_mocapid[mjm.body_mocapid >= 0])]]

        # gravity compensation (mj_gravcomp, engine_passive.c): force -gravity * mass * gravcomp at
        # body b's xipos, mapped to every dof of the chain that moves b (its ancestors' dofs)
        m.body_gravcomp = arr(mjm.body_gravcomp, dtype)
        gravcomp_bodies = [int(b) for b in np.flatnonzero(mjm.body_gravcomp != 0)]
        dof_gravcomp = [[b for b in gravcomp_bodies if i in _dof_chain(mjm, b)] for i in range(mjm.nv)]
        m.dof_gravcomp_adr = ints(np.cumsum([0] + [len(b) for b in dof_gravcomp])[:-1])
        m.dof_gravcomp_num = ints([len(b) for b in dof_gravcomp])
        m.dof_gravcomp_body = ints([b for bodies in dof_gravcomp for b in bodies] or [0])
        m.jnt_actgravcomp = ints(mjm.jnt_actgravcomp)
        # mj_passive skips every passive force when both springs and dampers are disabled, and
        # mj_gravcomp does nothing with gravity disabled or zero
        passive_on = not (flags & DisableBit.SPRING and flags & DisableBit.DAMPER)
        m.enable_gravcomp = int(bool(gravcomp_bodies) and passive_on and not flags & DisableBit.GRAVITY
                                and bool(np.any(np.asarray(opt.gravity) != 0)))

        m.jnt_type = ints(mjm.jnt_type)
        m.jnt_qposadr = ints(mjm.jnt_qposadr)
        m.jnt_dofadr = ints(mjm.jnt_dofadr)
        m.jnt_pos = arr(mjm.jnt_pos, T.vec3)
        m.jnt_axis = arr(mjm.jnt_axis, T.vec3)
        m.jnt_stiffness = shared(mjm.jnt_stiffness, dtype, 1)
        m.jnt_actfrclimited = ints(mjm.jnt_actfrclimited)
        m.jnt_actfrcrange = arr(mjm.jnt_actfrcrange, T.vec2)
        m.qpos0 = arr(mjm.qpos0, dtype)
        m.qpos_spring = shared(mjm.qpos_spring, dtype, 1)

        m.dof_bodyid = ints(mjm.dof_bodyid)
        m.dof_jntid = ints(mjm.dof_jntid)
        m.dof_parentid = ints(mjm.dof_parentid)
        ancestors, adr = [], []
        for i in range(mjm.nv):
            adr.append(len(ancestors))
            j = int(mjm.dof_parentid[i])
            while j >= 0:
                ancestors.append(j)
                j = int(mjm.dof_parentid[j])
        m.dof_ancestor_adr = ints(adr)
        m.dof_ancestor_num = ints(np.diff(adr + [len(ancestors)]))
        m.dof_ancestor = ints(ancestors if ancestors else [0])
        m.dof_damping = shared(mjm.dof_damping, dtype, 1)
        m.dof_armature = shared(mjm.dof_armature, dtype, 1)

        nu = mjm.nu
        trn_tendon = [int(mjm.actuator_trnid[a, 0]) if int(mjm.actuator_trntype[a]) == TrnType.TENDON else -1
                      for a in range(nu)]
        trn_joint = [int(mjm.actuator_trntype[a]) in (TrnType.JOINT, TrnType.JOINTINPARENT) for a in range(nu)]
        # the transmissions whose moment is a row of actuator_moment: sites, slider-cranks, bodies, ball
        # and free joints
        trn_site = [int(mjm.actuator_trntype[a]) in (TrnType.SITE, TrnType.SLIDERCRANK, TrnType.BODY)
                    or (trn_joint[a] and int(mjm.jnt_type[mjm.actuator_trnid[a, 0]]) in (JointType.BALL,
                                                                                        JointType.FREE))
                    for a in range(nu)]
        # a tendon, site or slider-crank actuator's joint fields point at joint 0 (never read)
        trn_jnt = np.array([int(mjm.actuator_trnid[a, 0]) if trn_joint[a] else 0 for a in range(nu)], dtype=np.int32)
        contact_on = not flags & (DisableBit.CONSTRAINT | DisableBit.CONTACT)
        m.actuator_trnsite, site_cols = self._site_transmissions(mjm, trn_site, contact_on)
        m.nsite_trn = sum(trn_site)
        m.nbody_trn = sum(1 for a in range(nu) if int(mjm.actuator_trntype[a]) == TrnType.BODY)
        group = mjm.actuator_group
        disabled = [(0 <= g <= 30) and bool(opt.disableactuator & (1 << int(g))) for g in group]
        m.actuator_gear = shared(mjm.actuator_gear[:, 0], dtype, 1)
        m.actuator_gainprm = shared(mjm.actuator_gainprm[:, :3], T.vec3, 3)
        m.actuator_biasprm = shared(mjm.actuator_biasprm[:, :3], T.vec3, 3)
        m.actuator_forcerange = shared(mjm.actuator_forcerange, T.vec2, 2)
        muscle = (GainType.MUSCLE, BiasType.MUSCLE, DynType.MUSCLE)
        rich = [int(mjm.actuator_gaintype[a] == muscle[0] or mjm.actuator_biastype[a] == muscle[1]
                    or mjm.actuator_dyntype[a] == muscle[2]
                    or (trn_tendon[a] >= 0 and bool(mjm.tendon_actfrclimited[trn_tendon[a]])))
                for a in range(mjm.nu)]
        m.actuator = self._actuators(mjm, trn_tendon, trn_jnt, trn_site, disabled, rich)
        m.rich_actuator = ints([a for a in range(mjm.nu) if rich[a]] or [0])
        m.nu_rich = sum(rich)
        # the actuators whose moment can be non-zero on dof i: joint transmissions on its joint,
        # tendon transmissions whose tendon has dof i among its columns
        acts_cols = [tendon_columns(mjm, trn_tendon[a]) if trn_tendon[a] >= 0 else site_cols[a] if trn_site[a]
                     else [int(mjm.jnt_dofadr[trn_jnt[a]])] for a in range(nu)]
        dof_act = [[a for a in range(nu) if i in acts_cols[a]] for i in range(mjm.nv)]
        m.dof_actuator_adr = ints(np.cumsum([0] + [len(a) for a in dof_act])[:-1])
        m.dof_actuator_num = ints([len(a) for a in dof_act])
        m.dof_actuator = ints([a for acts in dof_act for a in acts] or [0])

        m.geom_bodyid = ints(mjm.geom_bodyid)
        m.geom_pos = arr(mjm.geom_pos, T.vec3, (-1, 3))
        m.geom_quat = arr(_wxyz_to_xyzw(mjm.geom_quat), T.quat)
        m.site_bodyid = ints(mjm.site_bodyid)
        m.site_pos = arr(mjm.site_pos, T.vec3, (-1, 3))
        m.site_quat = arr(_wxyz_to_xyzw(mjm.site_quat), T.quat)
        m.site_type = ints(mjm.site_type if mjm.nsite else [0])
        m.site_size = arr(mjm.site_size if mjm.nsite else np.zeros((1, 3)), T.vec3, (-1, 3))

        m.geom_type = ints(mjm.geom_type)
        m.geom_size = arr(mjm.geom_size, T.vec3, (-1, 3))
        m.geom_rbound = arr(mjm.geom_rbound, dtype)
        m.geom_dataid = ints(np.where((mjm.geom_type == GeomType.MESH)
                                      | (mjm.geom_type == GeomType.HFIELD), mjm.geom_dataid, -1))
        fields = []
        for h in range(mjm.nhfield):
            hi = HFieldInfo()
            hi.nrow, hi.ncol, hi.adr = int(mjm.hfield_nrow[h]), int(mjm.hfield_ncol[h]), int(mjm.hfield_adr[h])
            hi.size = wp.vec4d(*[float(x) for x in mjm.hfield_size[h]])
            fields.append(hi)
        m.hfield_info = wp.array(fields or [HFieldInfo()], dtype=HFieldInfo, device=self.device)
        elevation = np.asarray(mjm.hfield_data, np.float32) if mjm.nhfielddata else np.zeros(1, np.float32)
        m.hfield_data = wp.array(elevation, dtype=wp.float32, device=self.device)
        rows, mesh_vec, mesh_int, polynormal = mesh_tables(mjm)
        info = []
        for r in rows:
            mi = MeshInfo()
            for k, v in r.items():
                setattr(mi, k, v)
            info.append(mi)
        m.mesh_info = wp.array(info or [MeshInfo()], dtype=MeshInfo, device=self.device)
        m.mesh_vec = wp.array(mesh_vec if len(mesh_vec) else np.zeros((1, 3), np.float32), dtype=wp.vec3f,
                              device=self.device)
        m.mesh_int = ints(mesh_int if len(mesh_int) else [0])
        m.mesh_polynormal = wp.array(polynormal if len(polynormal) else np.zeros((1, 3)), dtype=wp.vec3d,
                                     device=self.device)

        # constraints
        constraint_on = not flags & DisableBit.CONSTRAINT
        contact_on = constraint_on and not flags & DisableBit.CONTACT
        m.enable_constraint = int(constraint_on)
        m.enable_refsafe = int(not flags & DisableBit.REFSAFE)
        m.impratio = dtype(opt.impratio)
        m.cone_elliptic = int(opt.cone == ConeType.ELLIPTIC)
        m.solver_iterations = int(opt.iterations)
        m.solver_tolerance = dtype(opt.tolerance)
        m.solver_scale = dtype(1.0 / (mjm.stat.meaninertia * max(1, mjm.nv)))
        m.solver_ls_iterations = int(opt.ls_iterations)
        m.solver_ls_tolerance = dtype(opt.ls_tolerance)
        m.enable_island = int(not flags & DisableBit.ISLAND)

        tables = contact_tables(mjm) if contact_on else contact_tables(None)
        self.contact_tables = tables
        m.ncpair = len(tables["geom"])
        m.cpair_geom = wp.array(np.asarray(tables["geom"], dtype=np.int32).reshape(-1, 2), dtype=wp.vec2i,
                                device=self.device)
        m.cpair_kind = ints(tables["kind"])
        #: the collider kinds of the model's candidate pairs (the wide schedule launches the narrow
        #: phase's groups of kinds the model has)
        self.pair_kinds = sorted(set(tables["kind"]))
        m.cpair_nslot = ints(tables["nslot"])
        m.cpair_ccd = ints(tables["ccd"])
        m.nccdpair = sum(1 for c in tables["ccd"] if c >= 0)
        m.ndetect = sum(1 for k in tables["kind"] if k in CONVEX_KINDS)
        self._broadphase_tables(m, mjm, tables, dtype)
        m.ccd_iterations = int(opt.ccd_iterations)
        m.ccd_tolerance = dtype(opt.ccd_tolerance)
        #: (vertices, faces) of the EPA polytope per convex pair (collision_gjk.polytope_sizes)
        self.ccd_polytope = polytope_sizes(int(opt.ccd_iterations))
        m.ccd_maxfaces = self.ccd_polytope[1]
        m.enable_multiccd = int(not flags & DisableBit.MULTICCD)
        # multiccd's face clipping (contact_tables.FACE_CLIP): its scratch columns per pair
        cylinder_clip = any(k in CYLINDER_CLIP_KINDS for k in tables["kind"])
        m.ccd_npolygon, m.ccd_ndeg = clip_sizes(mjm, cylinder=cylinder_clip)
        clipping = m.enable_multiccd and any(k in FACE_CLIP_KINDS for k in tables["kind"])
        #: columns of each face-clipping scratch array of Data (0: the model clips no faces)
        self.ccd_clip = {k: (n if clipping else 0)
                         for k, n in clip_scratch_widths(m.ccd_npolygon, m.ccd_ndeg).items()}
        m.cpair_condim = ints(tables["condim"])
        m.cpair_margin = arr(tables["margin"], dtype)
        m.cpair_gap = arr(tables["gap"], dtype)
        m.cpair_solref = arr(np.reshape(tables["solref"], (-1, 2)), T.vec2)
        m.cpair_solreffriction = arr(np.reshape(tables["solreffriction"], (-1, 2)), T.vec2)
        m.cpair_solimp = arr(np.reshape(tables["solimp"], (-1, 5)), T.vec5)
        m.cpair_friction = shared(np.reshape(tables["friction"], (-1, 5)), T.vec5, 5)

        # rows (mj_makeConstraint's order): equality (3 per connect, 6 per weld, 1 per joint or
        # tendon, 1 per non-rigid edge of a flex), friction loss dofs, limits (2 per hinge/slide,
        # 1 per ball), contact rows
        efc_type, efc_id, efc_sub = [], [], []
        eq_adr = []
        eq_on = constraint_on and not flags & DisableBit.EQUALITY
        for i in range(mjm.neq):
            eq_adr.append(len(efc_type))
            if eq_on:
                for e in range(equality_rows(mjm, i)):
                    efc_type.append(ConstraintType.EQUALITY), efc_id.append(i), efc_sub.append(e)
        ne = len(efc_type)
        self._equality(m, mjm, eq_adr, ints, arr)
        self._tendons(m, mjm, ints, arr)
        if constraint_on and not flags & DisableBit.FRICTIONLOSS:
            for i in np.flatnonzero(mjm.dof_frictionloss > 0):
                efc_type.append(ConstraintType.FRICTION_DOF), efc_id.append(int(i)), efc_sub.append(0)
            for t in np.flatnonzero(mjm.tendon_frictionloss > 0):
                efc_type.append(ConstraintType.FRICTION_TENDON), efc_id.append(int(t)), efc_sub.append(0)
        nf = len(efc_type) - ne
        if constraint_on and not flags & DisableBit.LIMIT:
            for j in np.flatnonzero(mjm.jnt_limited):
                sides = (0,) if mjm.jnt_type[j] == JointType.BALL else (-1, 1)
                for side in sides:
                    efc_type.append(ConstraintType.LIMIT_JOINT), efc_id.append(int(j)), efc_sub.append(side)
            for t in np.flatnonzero(mjm.tendon_limited):
                for side in (-1, 1):
                    efc_type.append(ConstraintType.LIMIT_TENDON), efc_id.append(int(t)), efc_sub.append(side)
        nl = len(efc_type) - ne - nf
        base = len(efc_type)
        m.nefc_eq, m.nefc_friction, m.nefc_limit = ne, nf, nl
        # the rows before the contacts' have fixed places; the contacts' rows are given places
        # each evaluation, in slot order after them, up to the row budget (constraint.efc_address)
        m.efc_type, m.efc_id, m.efc_sub = ints(efc_type or [0]), ints(efc_id or [0]), ints(efc_sub or [0])
        #: the fixed rows' (type, id, sub), which every world's Data starts with (make_data)
        self.efc_fixed = (efc_type, efc_id, efc_sub)
        m.cpair_nrow = ints(tables["rows"] or [0])
        m.cpair_efc_type = ints([ConstraintType.CONTACT_FRICTIONLESS if n == 1 else ConstraintType.CONTACT_ELLIPTIC
                                 if tables["elliptic"] else ConstraintType.CONTACT_PYRAMIDAL
                                 for n in tables["rows"]] or [0])
        self.budgets = contact_budgets(mjm, tables, base, njmax, nconmax)
        m.nefc = self.budgets.njmax
        m.nconmax = self.budgets.nconmax
        # the convex search's scratch: CCD_ROWS rows per world at most, which the kept pairs that
        # search by GJK/EPA take in turn (collision_driver.detect)
        m.nccdmax = min(m.nccdpair, m.nconmax, CCD_ROWS)
        # the columns where a row's Jacobian can be non-zero, by column set: one per row before the
        # contacts' (set r for row r), then one per candidate pair (set base + p: the dof chains of
        # its two bodies), which every row of its contacts uses (Data.efc_cols)
        cols = [_row_columns(mjm, t, i, k) for t, i, k in zip(efc_type, efc_id, efc_sub, strict=True)]
        cols += [_pair_columns(mjm, g1, g2) for g1, g2 in tables["geom"]]
        colind = np.zeros((max(1, len(cols)), max(1, mjm.nv)), dtype=np.int32)
        for r, c in enumerate(cols):
            colind[r, :len(c)] = c
        m.efc_nnz = ints([len(c) for c in cols] or [0])
        m.efc_colind = wp.array(colind, dtype=int, device=self.device)
        colmask = np.zeros((max(1, len(cols)), max(1, mjm.nv)), dtype=np.int32)
        for r, c in enumerate(cols):
            colmask[r, c] = 1
        m.efc_colmask = wp.array(colmask, dtype=int, device=self.device)
        m.efc_chain = ints([int(_is_chain(mjm, c)) for c in cols] or [0])

        m.jnt_range = arr(mjm.jnt_range, T.vec2, (-1, 2))
        m.jnt_solref = arr(mjm.jnt_solref, T.vec2, (-1, 2))
        m.jnt_solimp = arr(mjm.jnt_solimp, T.vec5, (-1, 5))
        m.jnt_margin = arr(mjm.jnt_margin, dtype)
        m.dof_frictionloss = shared(mjm.dof_frictionloss, dtype, 1)
        m.dof_solref = arr(mjm.dof_solref, T.vec2, (-1, 2))
        m.dof_solimp = arr(mjm.dof_solimp, T.vec5, (-1, 5))
        m.dof_invweight0 = shared(mjm.dof_invweight0, dtype, 1)
        m.body_invweight0 = shared(mjm.body_invweight0, T.vec2, 2)
        dofend = []
        for b in range(mjm.nbody):
            w = b
            while w > 0 and mjm.body_dofnum[w] == 0:
                w = mjm.body_parentid[w]
            dofend.append(int(mjm.body_dofadr[w] + mjm.body_dofnum[w] - 1) if mjm.body_dofnum[w] else -1)
        m.body_dofend = ints(dofend)
        self.struct = m

    @staticmethod
    def _broadphase_tables(m, mjm, tables, dtype) -> None:
        """The broadphase's runs (simrl.sim.broadphase; the Model struct's bp_run, far_geom,
        far_moving): the candidate pairs in pair order, cut into runs; a run of the primitive
        pairs (those mj_filterSphere tests first) of one geom of the world body and geoms of
        other bodies, both with a bounding sphere, is far-testable: its world geom's record holds
        the largest margin + gap of the run's pairs, and the other geoms join the moving set."""
        static = mjm.geom_bodyid == 0
        FarGeom = far_struct(dtype)
        records, runs, moving = [], [], set()
        for p, (g1, g2) in enumerate(tables["geom"]):
            kind = tables["kind"][p]
            t = -1
            if (kind not in CONVEX_KINDS and static[g1] != static[g2] and mjm.geom_rbound[g1] > 0
                    and mjm.geom_rbound[g2] > 0):
                t, g = (g1, g2) if static[g1] else (g2, g1)
                moving.add(int(g))
            margin = float(tables["margin"][p]) + float(tables["gap"][p])
            last = runs[-1] if runs else None
            if last is not None and ((t < 0 and last[2] < 0) or (t >= 0 and last[2] >= 0
                                                               and records[last[2]][0] == t)):
                last[1] += 1
                if t >= 0:
                    records[last[2]][1] = max(records[last[2]][1], margin)
            elif t >= 0:
                records.append([int(t), margin])
                runs.append([p, 1, len(records) - 1])
            else:
                runs.append([p, 1, -1])
        device = m.cpair_nslot.device
        far = []
        for t, margin in records:
            record = FarGeom()
            record.geom, record.margin = t, dtype(margin)
            far.append(record)
        m.nbp_run = len(runs)
        m.bp_run = wp.array(np.asarray(runs or [[0, 0, -1]], dtype=np.int32), dtype=wp.vec3i, device=device)
        # groups of up to BP_GROUP_RUNS consecutive far-testable runs, each in a sphere around its
        # world geoms (their poses are the model's: a world geom never moves); any other run alone
        mjd = mujoco.MjData(mjm)
        mujoco.mj_kinematics(mjm, mjd)
        groups, centres, radii = [], [], []
        k = 0
        while k < len(runs):
            n = 1
            if runs[k][2] >= 0:
                while n < BP_GROUP_RUNS and k + n < len(runs) and runs[k + n][2] >= 0:
                    n += 1
                geoms = [records[runs[j][2]][0] for j in range(k, k + n)]
                reach = np.array([mjm.geom_rbound[t] + records[runs[j][2]][1] for j, t in zip(range(k, k + n), geoms,
                                                                                              strict=True)])
                x = mjd.geom_xpos[geoms]
                centre = (x.min(axis=0) + x.max(axis=0)) / 2
                radius = float(np.max(np.linalg.norm(x - centre, axis=1) + reach))
            else:
                centre, radius = np.zeros(3), -1.0
            groups.append([k, n])
            centres.append(centre)
            radii.append(radius)
            k += n
        m.nbp_group = len(groups)
        m.bp_group = wp.array(np.asarray(groups or [[0, 0]], dtype=np.int32), dtype=wp.vec2i, device=device)
        npf = np.float64 if dtype == wp.float64 else np.float32
        T = scalar_types(dtype)
        m.bp_group_centre = wp.array(np.asarray(centres or [np.zeros(3)], dtype=npf), dtype=T.vec3, device=device)
        m.bp_group_radius = wp.array(np.asarray(radii or [-1.0], dtype=npf), dtype=dtype, device=device)
        m.nfar_geom = len(far)
        m.far_geom = wp.array(far or [FarGeom()], dtype=FarGeom, device=device)
        m.nfar_moving = len(moving)
        m.far_moving = wp.array(np.asarray(sorted(moving) or [0], dtype=np.int32), dtype=int, device=device)

    def _site_transmissions(self, mjm, trn_site, contact_on: bool):
        """The table of the transmissions with a moment row (simrl.sim.model.transmission_struct:
        mj_transmission's sites, slider-cranks, ball and free joints, then the bodies) and, per
        actuator, the dofs its moment can be non-zero on: a joint's dofs; the chain of the site's
        body, or with a reference site the dofs of either chain that are not in both; a
        slider-crank's both chains; a body's the columns of the contacts its geoms can make
        (`contact_on`: contacts are not disabled)."""
        SiteTransmission = transmission_struct(self.dtype)
        rows, body_rows, cols = [], [], []
        pairs = candidate_geom_pairs(mjm) if contact_on else []
        for a in range(mjm.nu):
            cols.append([])
            if trn_site[a]:
                row = SiteTransmission()
                site, ref = (int(x) for x in mjm.actuator_trnid[a])
                kind = int(mjm.actuator_trntype[a])
                row.actuator, row.trntype, row.site, row.refsite, row.common, row.jnt = a, kind, site, ref, -1, -1
                row.body = -1
                row.cranklength = self.dtype(mjm.actuator_cranklength[a])
                row.gear = self.T.vec6(*(float(g) for g in mjm.actuator_gear[a]))
                if kind == TrnType.BODY:
                    # the body transmission's pass runs after the constraint rows (BODY_TRANSMISSIONS:
                    # the table's last Model.nbody_trn rows)
                    row.site = row.refsite = -1
                    row.body = site
                    body_rows.append(row)
                    touching = [(g1, g2) for g1, g2, _ in pairs if site in (int(mjm.geom_bodyid[g1]),
                                                                           int(mjm.geom_bodyid[g2]))]
                    cols[a] = sorted({i for g1, g2 in touching for i in _pair_columns(mjm, g1, g2)})
                    continue
                rows.append(row)
                if kind in (TrnType.JOINT, TrnType.JOINTINPARENT):
                    row.site = row.refsite = -1
                    row.jnt = site
                    dof = int(mjm.jnt_dofadr[site])
                    cols[a] = list(range(dof, dof + (3 if mjm.jnt_type[site] == JointType.BALL else 6)))
                    continue
                chain = _dof_chain(mjm, int(mjm.site_bodyid[site]))
                if kind == TrnType.SLIDERCRANK:
                    cols[a] = sorted(set(chain) | set(_dof_chain(mjm, int(mjm.site_bodyid[ref]))))
                elif ref >= 0:
                    other = _dof_chain(mjm, int(mjm.site_bodyid[ref]))
                    shared = [i for i in chain if i in other]
                    row.common = shared[0] if shared else -1  # chains list the nearest dof first
                    cols[a] = sorted(set(chain) ^ set(other))
                else:
                    cols[a] = sorted(chain)
        rows += body_rows
        return wp.array(rows or [SiteTransmission()], dtype=SiteTransmission, device=self.device), cols

    def _equality(self, m, mjm, eq_adr, ints, arr):
        """The equality constraints' tables (mj_equalityAnchors, mj_instantiateEquality)."""
        T, neq = self.T, mjm.neq
        m.neq = neq
        b1, b2, a1, a2, q1, q2, ts, j1, j2 = [], [], [], [], [], [], [], [], []
        for i in range(neq):
            kind, data = int(mjm.eq_type[i]), np.asarray(mjm.eq_data[i], dtype=np.float64)
            ident = np.array([1.0, 0.0, 0.0, 0.0])
            if kind in (EqType.JOINT, EqType.TENDON, EqType.FLEX):
                bodies, anchors, quats = (0, 0), (np.zeros(3), np.zeros(3)), (ident, ident)
                j1.append(int(mjm.eq_obj1id[i])), j2.append(int(mjm.eq_obj2id[i]))
            else:
                bodies = _eq_bodies(mjm, i)
                j1.append(-1), j2.append(-1)
                if int(mjm.eq_objtype[i]) == ObjType.SITE:
                    s1, s2 = int(mjm.eq_obj1id[i]), int(mjm.eq_obj2id[i])
                    anchors = (mjm.site_pos[s1], mjm.site_pos[s2])
                    quats = (mjm.site_quat[s1], mjm.site_quat[s2])
                elif kind == EqType.CONNECT:
                    anchors, quats = (data[0:3], data[3:6]), (ident, ident)
                else:  # weld: body 1's anchor is data[3:6], body 2's data[0:3]; relpose data[6:10]
                    anchors, quats = (data[3:6], data[0:3]), (data[6:10], ident)
            b1.append(bodies[0]), b2.append(bodies[1])
            a1.append(anchors[0]), a2.append(anchors[1])
            q1.append(quats[0]), q2.append(quats[1])
            ts.append(data[10] if kind == EqType.WELD else 1.0)
        Equality, Sensor = element_structs(self.dtype)
        FlexEdge = flexedge_struct(self.dtype)
        eqs, edges = [], []
        for i in range(neq):
            e = Equality()
            e.type, e.efc_adr, e.body1, e.body2 = int(mjm.eq_type[i]), eq_adr[i], b1[i], b2[i]
            e.anchor1, e.anchor2 = T.vec3(*[float(x) for x in a1[i]]), T.vec3(*[float(x) for x in a2[i]])
            # MuJoCo's (w, x, y, z) to Warp's (x, y, z, w)
            e.quat1 = T.quat(*[float(x) for x in np.asarray(q1[i])[[1, 2, 3, 0]]])
            e.quat2 = T.quat(*[float(x) for x in np.asarray(q2[i])[[1, 2, 3, 0]]])
            e.torquescale = self.dtype(ts[i])
            e.site = int(int(mjm.eq_objtype[i]) == ObjType.SITE)
            e.obj1id, e.obj2id = j1[i], j2[i]
            e.polycoef = T.vec5(*[float(x) for x in mjm.eq_data[i, :5]])
            e.solref = T.vec2(*[float(x) for x in mjm.eq_solref[i]])
            e.solimp = T.vec5(*[float(x) for x in mjm.eq_solimp[i]])
            e.flexedge_adr, e.flexedge_num = len(edges), 0
            if int(mjm.eq_type[i]) == EqType.FLEX:
                # the flex's non-rigid edges, a row each (mj_flex's edge length and Jacobian)
                f = int(mjm.eq_obj1id[i])
                for edge in flex_rows(mjm, f):
                    fe = FlexEdge()
                    (fe.body1, vert1), (fe.body2, vert2) = flex_edge_vertices(mjm, f, edge)
                    fe.vert1, fe.vert2 = T.vec3(*vert1.tolist()), T.vec3(*vert2.tolist())
                    fe.length0 = self.dtype(mjm.flexedge_length0[edge])
                    fe.invweight0 = self.dtype(mjm.flexedge_invweight0[edge])
                    edges.append(fe)
                e.flexedge_num = len(edges) - e.flexedge_adr
            eqs.append(e)
        m.eq = wp.array(eqs or [Equality()], dtype=Equality, device=self.device)
        m.nflexedge = len(edges)
        m.flexedge = wp.array(edges or [FlexEdge()], dtype=FlexEdge, device=self.device)
        ns = mjm.nsensor
        m.nsensor = ns
        sensors = []
        for i in range(ns):
            sen = Sensor()
            for name in ("type", "objtype", "objid", "reftype", "refid", "adr", "dim", "datatype"):
                setattr(sen, name, int(getattr(mjm, "sensor_" + name)[i]))
            sen.cutoff = self.dtype(mjm.sensor_cutoff[i])
            sen.intprm = int(mjm.sensor_intprm[i, 0])
            sen.cam_body = sen.cam_target = -1
            if sen.type == SensorType.CAMPROJECTION:
                cam = camera_constants(mjm, sen.refid)
                sen.cam_body, sen.cam_mode, sen.cam_target = cam["cam_body"], cam["cam_mode"], cam["cam_target"]
                sen.cam_pos, sen.cam_pos0 = T.vec3(*map(float, cam["cam_pos"])), T.vec3(*map(float, cam["cam_pos0"]))
                # MuJoCo's (w, x, y, z) to Warp's (x, y, z, w)
                sen.cam_quat = T.quat(*[float(x) for x in np.asarray(cam["cam_quat"])[[1, 2, 3, 0]]])
                sen.cam_mat0 = T.mat33(*map(float, cam["cam_mat0"]))
                sen.cam_focal, sen.cam_res = T.vec2(*cam["cam_focal"]), T.vec2(*cam["cam_res"])
            sensors.append(sen)
        # the rangefinders, then the touch, force and torque sensors last (each writes its own
        # sensordata columns, so the order of evaluation changes nothing)
        ray = [sen for sen in sensors if sen.type == SensorType.RANGEFINDER]
        for k, sen in enumerate(ray):
            sen.scratch = mjm.nsensordata + RAY_SCRATCH * k
        wrench = [sen for sen in sensors if sen.type in WRENCH_SENSOR_TYPES]
        sensors = [sen for sen in sensors if sen.type not in WRENCH_SENSOR_TYPES and sen.type != SensorType.RANGEFINDER]
        sensors = sensors + ray + wrench
        m.nsensor_ray, m.nsensor_wrench = len(ray), len(wrench)
        m.sensor = wp.array(sensors or [Sensor()], dtype=Sensor, device=self.device)
        visible = ray_geoms(mjm)
        m.nray_geom = len(visible)
        m.ray_geom = wp.array(np.asarray(visible or [0], dtype=np.int32), dtype=int, device=self.device)
        ContactSensor = contact_sensor_struct()
        table, slots = contact_sensor_tables(mjm, self.contact_tables)
        contact_sensors = []
        for i, slot_adr, slot_num in table:
            sen = ContactSensor()
            sen.adr, sen.dim = int(mjm.sensor_adr[i]), int(mjm.sensor_dim[i])
            sen.dataspec, sen.reduce = int(mjm.sensor_intprm[i, 0]), int(mjm.sensor_intprm[i, 1])
            sen.objtype, sen.objid = int(mjm.sensor_objtype[i]), int(mjm.sensor_objid[i])
            sen.slot_adr, sen.slot_num = slot_adr, slot_num
            contact_sensors.append(sen)
        m.ncontact_sensor = len(contact_sensors)
        m.contact_sensor = wp.array(contact_sensors or [ContactSensor()], dtype=ContactSensor, device=self.device)
        m.contact_sensor_slot = wp.array(np.asarray(slots or [(0, 0, 0)], dtype=np.int32).reshape(-1, 3),
                                         dtype=wp.vec3i, device=self.device)
        m.magnetic = T.vec3(*[float(x) for x in mjm.opt.magnetic])

    def _actuators(self, mjm, trn_tendon, trn_jnt, trn_site, disabled, rich):
        """Each actuator's constants (simrl.sim.model.actuator_struct): the tendon of a tendon
        transmission (`trn_tendon`, else -1), the joint of a joint transmission (`trn_jnt`), whether
        its moment is a row (`trn_site`), whether its group is disabled and whether it is rich
        (`disabled`, `rich`, per actuator)."""
        T, f = self.T, self.dtype
        Actuator = actuator_struct(self.dtype)
        actuators = []
        for a in range(mjm.nu):
            act = Actuator()
            act.enabled = 0 if disabled[a] else 1
            act.trntype, act.tendon = int(mjm.actuator_trntype[a]), trn_tendon[a]
            act.dofadr, act.qposadr = int(mjm.jnt_dofadr[trn_jnt[a]]), int(mjm.jnt_qposadr[trn_jnt[a]])
            act.gaintype, act.biastype = int(mjm.actuator_gaintype[a]), int(mjm.actuator_biastype[a])
            act.dyntype, act.actadr = int(mjm.actuator_dyntype[a]), int(mjm.actuator_actadr[a])
            act.ctrllimited, act.forcelimited = int(mjm.actuator_ctrllimited[a]), int(mjm.actuator_forcelimited[a])
            act.actlimited, act.actearly = int(mjm.actuator_actlimited[a]), int(mjm.actuator_actearly[a])
            act.rich = int(rich[a])
            act.moment_row = int(trn_site[a])
            act.ctrlrange = T.vec2(*[float(x) for x in mjm.actuator_ctrlrange[a]])
            act.actrange = T.vec2(*[float(x) for x in mjm.actuator_actrange[a]])
            act.dynprm = f(mjm.actuator_dynprm[a, 0])
            act.muscle = self._muscle(mjm, a)
            actuators.append(act)
        if not actuators:  # a placeholder: no kernel reads it
            act = Actuator()
            act.tendon = act.actadr = -1
            actuators.append(act)
        return wp.array(actuators, dtype=Actuator, device=self.device)

    def _muscle(self, mjm, a):
        """Actuator a's muscle parameters (simrl.sim.model.muscle_struct; read only by the muscle
        gain, bias and dyntype)."""
        T, f = self.T, self.dtype
        g, b, dyn = mjm.actuator_gainprm[a], mjm.actuator_biasprm[a], mjm.actuator_dynprm[a]
        mu = muscle_struct(self.dtype)()
        mu.gain_range = T.vec2(float(g[0]), float(g[1]))
        mu.gain_force, mu.gain_scale, mu.gain_lmin, mu.gain_lmax = f(g[2]), f(g[3]), f(g[4]), f(g[5])
        mu.gain_vmax, mu.gain_fvmax = f(g[6]), f(g[8])
        mu.bias_range = T.vec2(float(b[0]), float(b[1]))
        mu.bias_force, mu.bias_scale, mu.bias_lmax, mu.bias_fpmax = f(b[2]), f(b[3]), f(b[5]), f(b[7])
        mu.tau_act, mu.tau_deact, mu.smoothing = f(dyn[0]), f(dyn[1]), f(dyn[2])
        mu.lengthrange = T.vec2(*[float(x) for x in mjm.actuator_lengthrange[a]])
        mu.acc0 = f(mjm.actuator_acc0[a])
        return mu

    def _tendons(self, m, mjm, ints, arr):
        """The tendons' tables (mj_tendon, mj_passive, mj_instantiateFriction/Limit)."""
        T, nt, nv = self.T, mjm.ntendon, mjm.nv
        Tendon, Wrap, Segment = tendon_structs(self.dtype)
        m.ntendon = nt
        m.tendon_armature_bias = int(any(mjm.tendon_armature[t] != 0
                                         and mjm.wrap_type[mjm.tendon_adr[t]] != WrapType.JOINT for t in range(nt)))
        tendons, wraps, segments = [], [], []
        cols = [tendon_columns(mjm, t) for t in range(nt)]
        for t in range(nt):
            adr, num = int(mjm.tendon_adr[t]), int(mjm.tendon_num[t])
            kinds = [int(k) for k in mjm.wrap_type[adr:adr + num]]
            objs = [int(o) for o in mjm.wrap_objid[adr:adr + num]]
            prms = [float(x) for x in mjm.wrap_prm[adr:adr + num]]
            ten = Tendon()
            ten.fixed = int(kinds[0] == WrapType.JOINT)
            ten.wrapadr, ten.segadr, ten.nnz = len(wraps), len(segments), len(cols[t])
            if ten.fixed:
                for obj, prm in zip(objs, prms, strict=True):
                    wrap = Wrap()
                    wrap.jnt, wrap.coef = obj, self.dtype(prm)
                    wraps.append(wrap)
            else:
                # mj_tendon's walk: a pulley sets the divisor of the segments after it; a segment
                # joins two consecutive sites, or two sites around the sphere or cylinder between
                # them (wrap_prm holds the side site, -1 for none)
                div, j = 1.0, 0
                while j < num - 1:
                    if kinds[j] == WrapType.PULLEY or kinds[j + 1] == WrapType.PULLEY:
                        if kinds[j] == WrapType.PULLEY:
                            div = prms[j]
                        j += 1
                        continue
                    seg = Segment()
                    seg.site0, seg.divisor, seg.geom, seg.side = objs[j], self.dtype(div), -1, -1
                    if kinds[j + 1] in (WrapType.SPHERE, WrapType.CYLINDER):
                        seg.geom, seg.side = objs[j + 1], int(round(prms[j + 1]))
                        j += 1
                    seg.site1 = objs[j + 1]
                    segments.append(seg)
                    j += 1
            ten.wrapnum, ten.segnum = len(wraps) - ten.wrapadr, len(segments) - ten.segadr
            for name, field in (("stiffness", mjm.tendon_stiffness), ("damping", mjm.tendon_damping),
                                ("armature", mjm.tendon_armature), ("margin", mjm.tendon_margin),
                                ("frictionloss", mjm.tendon_frictionloss), ("length0", mjm.tendon_length0),
                                ("invweight0", mjm.tendon_invweight0)):
                setattr(ten, name, self.dtype(field[t]))
            ten.actfrclimited = int(mjm.tendon_actfrclimited[t])
            for name, vec, field in (("lengthspring", T.vec2, mjm.tendon_lengthspring),
                                     ("actfrcrange", T.vec2, mjm.tendon_actfrcrange),
                                     ("range", T.vec2, mjm.tendon_range),
                                     ("solref_lim", T.vec2, mjm.tendon_solref_lim),
                                     ("solimp_lim", T.vec5, mjm.tendon_solimp_lim),
                                     ("solref_fri", T.vec2, mjm.tendon_solref_fri),
                                     ("solimp_fri", T.vec5, mjm.tendon_solimp_fri)):
                setattr(ten, name, vec(*[float(x) for x in field[t]]))
            tendons.append(ten)
        wrapping = [t for t in range(nt) if any(segments[k].geom >= 0 for k in range(
            tendons[t].segadr, tendons[t].segadr + tendons[t].segnum))]
        m.tendon_wrap_first = wrapping[0] if wrapping else 0
        m.tendon_wrap_num = wrapping[-1] + 1 - wrapping[0] if wrapping else 0
        wrap_segs = [k for k, seg in enumerate(segments) if seg.geom >= 0]
        m.wrap_seg_first = wrap_segs[0] if wrap_segs else 0
        m.wrap_seg_num = wrap_segs[-1] + 1 - wrap_segs[0] if wrap_segs else 0
        m.tendon = wp.array(tendons or [Tendon()], dtype=Tendon, device=self.device)
        m.wrap = wp.array(wraps or [Wrap()], dtype=Wrap, device=self.device)
        m.tendon_seg = wp.array(segments or [Segment()], dtype=Segment, device=self.device)
        colind = np.zeros((max(1, nt), max(1, nv)), dtype=np.int32)
        for t, c in enumerate(cols):
            colind[t, :len(c)] = c
        m.tendon_colind = wp.array(colind, dtype=int, device=self.device)
        dof_ten = [[t for t in range(nt) if i in cols[t]] for i in range(nv)]
        adr = np.cumsum([0] + [len(x) for x in dof_ten])[:-1]
        m.dof_tendon_adr = wp.array(np.array([[a, len(x)] for a, x in zip(adr, dof_ten, strict=True)] or [[0, 0]],
                                             dtype=np.int32), dtype=wp.vec2i, device=self.device)
        m.dof_tendon = ints([t for x in dof_ten for t in x] or [0])

    # sizes, for convenience
    @property
    def nq(self) -> int:
        return self.mjm.nq

    @property
    def nv(self) -> int:
        return self.mjm.nv

    @property
    def nu(self) -> int:
        return self.mjm.nu

    @property
    def na(self) -> int:
        return self.mjm.na

    @property
    def nbody(self) -> int:
        return self.mjm.nbody

    @property
    def integrator(self) -> int:
        return int(self.mjm.opt.integrator)
