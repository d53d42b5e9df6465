"""Every field of `mujoco.MjModel`, of its `opt`, and every disable and enable flag, in one of
three classes, so that no field changes MuJoCo's dynamics without simrl either computing it or
refusing the model (tests/test_mjmodel_fields.py: a field in no class or in two fails, as after a
MuJoCo upgrade that adds one):

- `READ`: simrl's loader reads it (simrl.sim.io and the tables it builds): the engine computes
  what MuJoCo computes from it, and the parity tests compare the results;
- `REFUSED`: a field the engine does not implement, with the value every element has when the
  feature is unused; a model where it has another value is refused by name
  (simrl.sim.io.unsupported_features: with a message of its own where the loader checks the
  feature itself, else the generic message of `refused_fields`);
- `INERT`: a field without effect on what simrl computes, with the reason: drawing, names and
  user data, MuJoCo's own indexing and sparse storage (derived from fields simrl reads), or a
  field that only a refused feature reads.
"""

import numpy as np

#: MjModel fields the loader reads
READ = frozenset("""
    nq nv nu na nbody njnt ngeom nsite ntendon neq npair nkey nmocap nsensor nsensordata nhfield
    nhfielddata nmesh nmeshvert nmeshpoly nmeshdegmax npolygonmax nconmax njmax
    qpos0 qpos_spring
    body_parentid body_rootid body_weldid body_mocapid body_jntnum body_jntadr body_dofnum body_dofadr
    body_pos body_quat body_ipos body_iquat body_mass body_subtreemass body_inertia body_invweight0
    body_gravcomp body_bvhadr
    jnt_type jnt_qposadr jnt_dofadr jnt_bodyid jnt_limited jnt_actfrclimited jnt_actgravcomp jnt_solref
    jnt_solimp jnt_pos jnt_axis jnt_stiffness jnt_range jnt_actfrcrange jnt_margin
    dof_bodyid dof_jntid dof_parentid dof_treeid dof_solref dof_solimp dof_frictionloss dof_armature
    dof_damping dof_invweight0
    tree_dofnum
    geom_type geom_contype geom_conaffinity geom_condim geom_bodyid geom_dataid geom_priority
    geom_solmix geom_solref geom_solimp geom_size geom_rbound geom_pos geom_quat geom_friction
    geom_margin geom_gap
    site_type site_bodyid site_size site_pos site_quat
    mesh_vertadr mesh_vertnum mesh_graphadr mesh_vert mesh_graph mesh_polynum mesh_polyadr
    mesh_polynormal mesh_polyvertadr mesh_polyvertnum mesh_polyvert mesh_polymapadr mesh_polymapnum
    mesh_polymap mesh_extrema
    hfield_size hfield_nrow hfield_ncol hfield_adr hfield_data
    pair_dim pair_geom1 pair_geom2 pair_signature pair_solref pair_solreffriction pair_solimp pair_margin
    pair_gap pair_friction
    exclude_signature
    eq_type eq_obj1id eq_obj2id eq_objtype eq_active0 eq_solref eq_solimp eq_data
    nflex flex_vertadr flex_vertbodyid flex_vert flex_centered flex_edgeadr flex_edgenum flex_edge
    flex_edgeequality flexedge_rigid flexedge_length0 flexedge_invweight0
    tendon_adr tendon_num tendon_limited tendon_actfrclimited tendon_solref_lim tendon_solimp_lim
    tendon_solref_fri tendon_solimp_fri tendon_range tendon_actfrcrange tendon_margin tendon_stiffness
    tendon_damping tendon_armature tendon_frictionloss tendon_lengthspring tendon_length0
    tendon_invweight0
    wrap_type wrap_objid wrap_prm
    actuator_trntype actuator_dyntype actuator_gaintype actuator_biastype actuator_trnid actuator_actadr
    actuator_actnum actuator_group actuator_ctrllimited actuator_forcelimited actuator_actlimited
    actuator_dynprm actuator_gainprm actuator_biasprm actuator_actearly actuator_ctrlrange
    actuator_forcerange actuator_actrange actuator_gear actuator_lengthrange actuator_acc0 actuator_cranklength
    sensor_type sensor_objtype sensor_objid sensor_reftype sensor_refid sensor_intprm sensor_dim
    sensor_adr sensor_cutoff
    geom_matid geom_rgba mat_rgba
    cam_bodyid cam_mode cam_targetbodyid cam_pos cam_quat cam_pos0 cam_poscom0 cam_mat0 cam_fovy cam_resolution
    cam_intrinsic cam_sensorsize
    key_qpos
    opt stat
""".split())

#: the value of every element of a refused field when its feature is unused (a field that the
#: loader checks with a message of its own is in REFUSED_OWN_MESSAGE too)
REFUSED = {
    "nplugin": 0, "nplastic": 0, "nhistory": 0,
    "flex_dim": 1, "flex_interp": 0, "flex_contype": 0, "flex_conaffinity": 0, "flex_selfcollide": 0,
    "flex_passive": 0, "flex_edgestiffness": 0, "flex_edgedamping": 0, "flex_damping": 0, "flex_stiffnessadr": -1,
    "flex_bendingadr": -1, "flex_plasticadr": -1,
    "actuator_damping": 0, "actuator_armature": 0, "actuator_delay": 0, "actuator_dampingpoly": 0,
    "actuator_plugin": -1, "actuator_ctrlnum": 1, "actuator_outnum": 1, "actuator_history": 0,
    "actuator_historyadr": -1,
    "jnt_springyield": 0, "jnt_stiffnesspoly": 0, "dof_dampingpoly": 0,
    "tendon_springyield": 0, "tendon_stiffnesspoly": 0, "tendon_dampingpoly": 0,
    "sensor_delay": 0, "sensor_interval": 0, "sensor_history": 0, "sensor_historyadr": -1,
    "geom_adhesion": 0, "pair_adhesion": 0, "geom_surfacevel": 0,
}

#: the refused fields that simrl.sim.io.unsupported_features checks with a message of its own
#: (adhesion: only for geoms that can collide)
REFUSED_OWN_MESSAGE = frozenset("""
    flex_dim flex_interp flex_contype flex_conaffinity flex_selfcollide flex_passive flex_edgestiffness
    flex_edgedamping flex_damping flex_stiffnessadr flex_bendingadr flex_plasticadr
    nplugin nplastic actuator_damping actuator_armature actuator_delay actuator_dampingpoly
    actuator_plugin actuator_ctrlnum actuator_outnum jnt_springyield jnt_stiffnesspoly dof_dampingpoly
    tendon_springyield tendon_stiffnesspoly tendon_dampingpoly sensor_delay sensor_interval sensor_history
    geom_adhesion pair_adhesion
""".split())

#: what the generic refusal names for the other refused fields
REFUSED_FEATURE = {
    "nhistory": "actuator or sensor history buffers (<actuator delay>, <sensor delay/interval>)",
    "actuator_history": "<actuator delay> (actuator history buffers)",
    "actuator_historyadr": "<actuator delay> (actuator history buffers)",
    "sensor_historyadr": "<sensor delay/interval> (sensor history buffers)",
    "geom_surfacevel": "<geom surfacevel> (surface velocity, as of a conveyor belt)",
}

_DRAW = "drawing only"
_NAME = "names and file paths"
_USER = "user data: MuJoCo's dynamics do not read it either"
_SIZE = "a size: the arrays it describes are classified"
_DERIVED = ("derived by MuJoCo's compiler from fields simrl reads, for MuJoCo's own indexing, sparse storage, "
            "trees or islands; simrl derives what it needs itself")
_MIDPHASE = ("MuJoCo's bounding volumes for its midphase, which decides which pairs its narrow phase tests, not "
             "the contacts (simrl's broadphase keeps every pair that can touch: tests/test_contact_sets.py)")
_FLEX_CONTACT = "flex collisions only (refused: flex_contype, flex_conaffinity, flex_selfcollide, flex_passive)"
_FLEX_INTERP = "flexes with interpolated vertices only (refused: flex_interp)"
_FLEX_ELASTIC = ("flex elasticity, bending and passive contacts only (refused: flex_stiffnessadr, flex_bendingadr, "
                 "flex_damping, flex_passive)")
_FLEX_ELEMENTS = ("a flex's elements, shells and bounding volumes: its collisions, elasticity and drawing (refused or "
                  "without effect); its dynamics come from its edges, which simrl reads")
_PLUGIN = "plugins only (refused: nplugin)"
_PLASTIC = "plasticity only (refused: nplastic)"
_SDF = "SDF geoms only (refused as collision pairs by geom type)"
_KEY = "a keyframe's values: a state a user resets to, not dynamics (simrl's envs read key_qpos)"


def _inert() -> dict:
    out = {}

    def put(names: str, reason: str):
        for name in names.split():
            out[name] = reason

    put("""nB nC nD nM nJfe nJmom nJten narena nbuffer nbvh nbvhdynamic nbvhstatic nemax nout nnames nnames_map
        npaths nwrap nexclude nactuator nmeshface nmeshgraph nmeshnormal nmeshpolymap nmeshpolyvert nmeshtexcoord
        ntree ngravcomp""", _SIZE)
    put("""ncam nlight nmat ntex ntexdata nskin nskinbone nskinbonevert nskinface nskintexvert nskinvert vis""", _DRAW)
    put("""nnumeric nnumericdata ntext ntextdata ntuple ntupledata nuserdata nuser_actuator nuser_body nuser_cam
        nuser_geom nuser_jnt nuser_sensor nuser_site nuser_tendon""", _USER)
    put("nflexedge nflexvert nflexelem nflexelemdata nflexelemedge nflexshelldata", _SIZE)
    put("nflexbending nflexstiffness nefm0L nefm0dof nefmCvert flex_stiffness flex_bending flex_edgeflap efm0_L "
        "efm0_L_colind efm0_L_rowadr efm0_L_rownnz efm0_dofid efmC_perm", _FLEX_ELASTIC)
    put("nflexnode flex_node flex_node0 flex_nodeadr flex_nodebodyid flex_nodenum flex_cellnum flex_vertcell "
        "flex_vert0", _FLEX_INTERP)
    put("""flex_condim flex_friction flex_margin flex_gap flex_priority flex_solmix flex_solref flex_solimp
        flex_radius flex_activelayers""", _FLEX_CONTACT)
    put("""flex_elem flex_elemadr flex_elemnum flex_elemdataadr flex_elemedge flex_elemedgeadr flex_elemlayer
        flex_shell flex_shelldataadr flex_shellnum flex_bvhadr flex_bvhnum flex_size""", _FLEX_ELEMENTS)
    put("flex_yield flex_plasticmode", "flex plasticity only (refused: flex_plasticadr)")
    put("flex_rgba flex_group flex_matid flex_texcoord flex_texcoordadr flex_elemtexcoord flex_flatskin nflextexcoord",
        _DRAW)
    put("npluginattr npluginstate plugin plugin_attr plugin_attradr plugin_stateadr plugin_statenum", _PLUGIN)
    put("noct oct_aabb oct_child oct_coeff oct_depth mesh_octadr mesh_octnum", _SDF)
    put("signature", "a hash of the model's structure")
    put("names names_map paths hfield_pathadr mesh_pathadr skin_pathadr tex_pathadr", _NAME)

    put("actuator_length0", "mj_setLengthRange only")
    put("actuator_ctrladr actuator_outadr",
        "an actuator's first control and output: its own index, each having one (refused otherwise)")
    put("actuator_ctrlspec", "DC-motor and SO(3) gains only (refused by gaintype)")
    put("body_bvhnum bvh_aabb bvh_child bvh_depth bvh_nodeid geom_aabb body_margin mesh_bvhadr mesh_bvhnum",
        _MIDPHASE)
    put("""body_contype body_conaffinity body_geomadr body_geomnum body_sameframe body_simple body_treeid
        geom_sameframe site_sameframe dof_Madr dof_simplenum dof_M0 tree_bodyadr tree_bodynum tree_dofadr
        tendon_treeid tendon_treenum jnt_actuatorid tendon_actuatorid sensor_needstage
        B_colind B_rowadr B_rownnz D_colind D_diag D_rowadr D_rownnz M_colind M_rowadr M_rownnz
        mapD2M mapM2D mapM2M ten_J_colind ten_J_rowadr ten_J_rownnz flg_adhesion flg_gravcomp
        flg_surfacevel flex_vertnum flex_rigid flexedge_J_colind flexedge_J_rowadr flexedge_J_rownnz""", _DERIVED)
    put("dof_length tree_sleep_policy", "sleeping only (refused: <flag sleep>)")
    put("body_plugin geom_plugin sensor_plugin", _PLUGIN)
    put("jnt_plasticadr tendon_plasticadr key_plastic", _PLASTIC)
    put("geom_fluid", "fluid forces only, which MuJoCo computes when density or viscosity is not 0 (refused)")
    put("""geom_castshadow geom_group site_group site_matid site_rgba site_dataid jnt_group
        tendon_group tendon_matid tendon_rgba tendon_width""", _DRAW)
    put("""mesh_face mesh_faceadr mesh_facenormal mesh_facenum mesh_facetexcoord mesh_normal mesh_normaladr
        mesh_normalnum mesh_texcoord mesh_texcoordadr mesh_texcoordnum""",
        "a mesh's faces, normals and texture coordinates: drawing and ray casts (its collisions use the "
        "convex hull's graph and polygons)")
    put("mesh_pos mesh_quat mesh_scale", "the compiler's transform of a mesh, already applied to mesh_vert")
    put("tendon_type", "fixed or spatial, which simrl reads from wrap_type")
    put("sensor_datatype", "real or positive, fixed by the sensor type for the sensors simrl computes (its "
                           "cutoff follows the type)")
    put("sensor_noise", "metadata: MuJoCo does not apply it either")
    put("key_act key_ctrl key_mpos key_mquat key_qvel key_time", _KEY)
    for prefix in ("cam_", "light_", "mat_", "tex_", "skin_"):
        put(" ".join(f for f in _MJMODEL_FIELDS if f.startswith(prefix) and f not in out and f not in READ), _DRAW)
    put(" ".join(f for f in _MJMODEL_FIELDS if f.startswith("name_")), _NAME)
    put(" ".join(f for f in _MJMODEL_FIELDS if f.startswith(("numeric_", "text_", "tuple_")) or f.endswith("_user")),
        _USER)
    return out


def mjmodel_fields() -> list[str]:
    """The fields of the installed MuJoCo's MjModel (its attributes that are not methods)."""
    import mujoco

    m = mujoco.MjModel.from_xml_string("<mujoco/>")
    return sorted(n for n in dir(m) if not n.startswith("_") and not callable(getattr(m, n)))


_MJMODEL_FIELDS = mjmodel_fields()
INERT = _inert()

#: mjOption: read, refused when not at their default, or without effect
OPTION_READ = frozenset("""timestep impratio tolerance gravity magnetic o_margin o_solref o_solimp o_friction
    integrator cone solver iterations ls_iterations ls_tolerance ccd_iterations ccd_tolerance disableflags
    enableflags disableactuator""".split())
OPTION_REFUSED = {"density": 0, "viscosity": 0, "noslip_iterations": 0}
OPTION_INERT = {
    "jacobian": "dense or sparse storage of the same rows",
    "noslip_tolerance": "noslip only (refused: noslip_iterations)",
    "sdf_initpoints": _SDF, "sdf_iterations": _SDF,
    "sleep_tolerance": "sleeping only (refused: <flag sleep>)",
    "wind": "fluid forces only (refused unless density and viscosity are 0)",
}

#: mjtDisableBit and mjtEnableBit flags (names without the mjDSBL_/mjENBL_ prefix)
DISABLE_READ = frozenset("""CONSTRAINT EQUALITY FRICTIONLOSS LIMIT CONTACT SPRING DAMPER GRAVITY CLAMPCTRL
    WARMSTART FILTERPARENT ACTUATION REFSAFE MIDPHASE EULERDAMP NATIVECCD MULTICCD ISLAND""".split())
DISABLE_INERT = {
    "SENSOR": "sensordata only (simrl computes the sensors in any case)",
    "AUTORESET": "MuJoCo's reset of a diverged mjData: simrl flags non-finite worlds and its envs reset them",
}
ENABLE_READ = frozenset(["OVERRIDE"])
ENABLE_REFUSED = frozenset(["SLEEP", "DIAGEXACT", "IPC", "SPECULATIVE"])
ENABLE_INERT = {
    "ENERGY": "potential and kinetic energy are reported by MuJoCo, not used by its dynamics",
    "FWDINV": "a comparison of forward and inverse dynamics (mjData.solver_fwdinv): diagnostics",
    "INVDISCRETE": "mj_inverse only",
}


def at_default(value, default) -> bool:
    """Whether every element of a field's value equals its unused default (a size: equals it)."""
    return bool(np.all(np.asarray(value) == default))


def refused_fields(mjm) -> list[str]:
    """The generic refusal: a problem for each feature of a refused field that is not at its default
    and that simrl.sim.io.unsupported_features does not check with a message of its own."""
    problems = []
    for name, default in REFUSED.items():
        if name in REFUSED_OWN_MESSAGE or not hasattr(mjm, name):
            continue
        if not at_default(getattr(mjm, name), default):
            problem = f"{REFUSED_FEATURE[name]}: not supported (mjModel.{name} is not {default})"
            if not any(p.startswith(REFUSED_FEATURE[name]) for p in problems):
                problems.append(problem)
    return problems
