"""Forward kinematics (mj_kinematics, engine_core_smooth.c): body, inertial-frame, geom and
site poses in the world frame from qpos (and mocap bodies' from mocap_pos, mocap_quat).

Elements: `joint(m, d, w, j)` turns joint j's coordinates into its local rotation (the trig and
normalisation, independent of the tree); `body(m, d, w, b)` places body b from its parent's pose
(a tree pass from the root, level by level in the differentiable step's wide schedule;
`body_from_root` places a body alone, its path from the world in registers, for the engine's
wide step); `frame(m, d, w, e)` then gives
body, inertial-frame, geom and site frames their rotation matrices and positions (e < nbody: body e
and its inertial frame, then the geoms, then the sites). `frame_adjoint(m, d, adj, w, e)` is
`frame`'s hand-written adjoint, which the differentiable step runs in place of the generated one
(simrl.sim.grad's `reverse`): it skips the frames whose outputs receive no gradient;
`joint_adjoint`, `body_root_adjoint` and `body_tree_adjoint` are those of `joint`, `body_root`
and `body_tree` (the tree backwards level by level, each body gathering its children's
adjoints).
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim import adjoints
from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JointType, scalar_types

#: the distance below which MuJoCo's compiler takes two frames for the same (kFrameEps in
#: user_model.cc): mj_local2Global then copies the frame (geom_sameframe, site_sameframe,
#: body_sameframe)
FRAME_EPS = 1e-6


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, quat, mat33 = T.f, T.vec3, T.quat, T.mat33
    A = adjoints.build(scalar)
    nonzero3, nonzero33, nonzero4 = A.nonzero3, A.nonzero33, A.nonzero4
    quat_to_mat_adjoint, quat_mul_adjoint = A.quat_to_mat_adjoint, A.quat_mul_adjoint

    @wp.func
    def same_vec(a: vec3, b: vec3):
        """IsSameVec (user_model.cc): every component less than 1e-6 apart."""
        eps = scalar(FRAME_EPS)
        return wp.abs(a[0] - b[0]) < eps and wp.abs(a[1] - b[1]) < eps and wp.abs(a[2] - b[2]) < eps

    @wp.func
    def same_quat(a: quat, b: quat):
        """IsSameQuat (user_model.cc): a and b, or a and -b, less than 1e-6 apart in every
        component."""
        eps = scalar(FRAME_EPS)
        minus = (wp.abs(a[0] - b[0]) < eps and wp.abs(a[1] - b[1]) < eps and wp.abs(a[2] - b[2]) < eps
                 and wp.abs(a[3] - b[3]) < eps)
        plus = (wp.abs(a[0] + b[0]) < eps and wp.abs(a[1] + b[1]) < eps and wp.abs(a[2] + b[2]) < eps
                and wp.abs(a[3] + b[3]) < eps)
        return minus or plus

    @wp.func_grad(same_vec)
    def adj_same_vec(a: vec3, b: vec3, adj_ret: bool):
        """A comparison has no derivative: nothing to replay (a smaller GPU adjoint)."""
        pass

    @wp.func_grad(same_quat)
    def adj_same_quat(a: quat, b: quat, adj_ret: bool):
        """A comparison has no derivative: nothing to replay (a smaller GPU adjoint)."""
        pass

    @wp.func
    def local_to_global(xpos: vec3, xquat: quat, pos: vec3, rot: quat, copy_pos: bool):
        """mj_local2Global (engine_core_util.c) for a frame at (pos, rot) in a body at (xpos,
        xquat), with MuJoCo's bits: xmat pos + xpos (xmat the matrix of xquat), and the matrix of
        xquat rot (not normalized); where rot is the identity within 1e-6, xmat, and where pos is
        also 0 within 1e-6 and `copy_pos`, its xpos (mjSAMEFRAME_BODYROT, mjSAMEFRAME_BODY: the
        compiler's test, IsNullPose in user_model.cc, made on the current values)."""
        xmat = f.quat_to_mat(xquat)
        p = xmat * pos + xpos
        r = xmat
        if not same_quat(rot, quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))):
            r = f.quat_to_mat(f.quat_mul(xquat, rot))
        elif copy_pos and same_vec(pos, vec3(scalar(0.0))):
            p = xpos
        return p, r

    @wp.func
    def inertial_frame(m: Model, w: int, b: int, xpos: vec3, xquat: quat):
        """Body b's inertial frame, xipos and ximat (mj_kinematics2), from the body's pose
        (randomizable: per-world or shared parameters)."""
        return local_to_global(xpos, xquat, m.body_ipos[w % m.body_ipos.shape[0], b],
                               m.body_iquat[w % m.body_iquat.shape[0], b], True)

    @wp.func
    def joint(m: Model, d: Data, w: int, j: int):
        """jnt_qloc: joint j's rotation in its parent frame from qpos (a unit quaternion; the
        identity for slide joints; a free joint's own orientation).

        Model: jnt_axis, jnt_qposadr, jnt_type, qpos0. Data in: qpos. Data out: jnt_qloc."""
        qadr = m.jnt_qposadr[j]
        jtype = m.jnt_type[j]
        qloc = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        if jtype == JointType.FREE:
            qloc = f.quat_normalize(f.quat_from_qpos(d.qpos, w, qadr + 3))
        elif jtype == JointType.BALL:
            qloc = f.quat_normalize(f.quat_from_qpos(d.qpos, w, qadr))
        elif jtype != JointType.SLIDE:
            qloc = f.axis_angle_quat(m.jnt_axis[j], d.qpos[w, qadr] - m.qpos0[qadr])
        d.jnt_qloc[w, j] = qloc

    @wp.func
    def body_mocap(m: Model, d: Data, w: int, b: int):
        """A mocap body (a child of the world, no joints) is placed where the user put it:
        mocap_pos, and mocap_quat normalized twice, as mj_kinematics does (once as read, once
        as every body's xquat)."""
        mocap = m.body_mocapid[b]
        d.xpos[w, b] = d.mocap_pos[w, mocap]
        read = quat(d.mocap_quat[w, mocap, 1], d.mocap_quat[w, mocap, 2], d.mocap_quat[w, mocap, 3],
                    d.mocap_quat[w, mocap, 0])
        d.xquat[w, b] = f.quat_normalize(f.quat_normalize(read))

    @wp.func
    def body_free(m: Model, d: Data, w: int, b: int):
        """A body with a free joint (its only joint; a child of the world): the pose is qpos."""
        j = m.body_jntadr[b]
        qadr = m.jnt_qposadr[j]
        xpos = vec3(d.qpos[w, qadr], d.qpos[w, qadr + 1], d.qpos[w, qadr + 2])
        xquat = d.jnt_qloc[w, j]
        d.xanchor[w, j] = xpos
        d.xaxis[w, j] = m.jnt_axis[j]
        d.jnt_xpos[w, j] = xpos
        d.jnt_xquat[w, j] = xquat
        d.xpos[w, b] = xpos
        d.xquat[w, b] = f.quat_normalize(xquat)

    @wp.func
    def offset(m: Model, d: Data, w: int, b: int):
        """Body b's frame before its joints: the parent's, moved by the body's fixed offset."""
        pid = m.body_parentid[b]
        xquat = d.xquat[w, pid]
        return f.quat_to_mat(xquat) * m.body_pos[b] + d.xpos[w, pid], f.quat_mul(xquat, m.body_quat[b])

    @wp.func
    def before_joint(m: Model, d: Data, w: int, b: int, j: int):
        """The frame that joint j of body b moves: the body's offset from its parent for its first
        joint, else the frame after the joint before it."""
        if j == m.body_jntadr[b]:
            return offset(m, d, w, b)
        return d.jnt_xpos[w, j - 1], d.jnt_xquat[w, j - 1]

    @wp.func
    def joint_rotation(m: Model, d: Data, w: int, b: int, j: int):
        """The frame after hinge or ball joint j of body b (a rotation about the joint's anchor,
        not the body origin): xanchor, xaxis and the frame, kept in jnt_xpos and jnt_xquat."""
        xpos, xquat = before_joint(m, d, w, b, j)
        xanchor = f.rot_vec_quat(m.jnt_pos[j], xquat) + xpos
        d.xanchor[w, j] = xanchor
        d.xaxis[w, j] = f.rot_vec_quat(m.jnt_axis[j], xquat)
        xquat = f.quat_mul(xquat, d.jnt_qloc[w, j])
        d.jnt_xpos[w, j] = xanchor - f.rot_vec_quat(m.jnt_pos[j], xquat)
        d.jnt_xquat[w, j] = xquat

    @wp.func
    def joint_slide(m: Model, d: Data, w: int, b: int, j: int):
        """The frame after slide joint j of body b: moved along the joint's axis."""
        xpos, xquat = before_joint(m, d, w, b, j)
        xaxis = f.rot_vec_quat(m.jnt_axis[j], xquat)
        d.xanchor[w, j] = f.rot_vec_quat(m.jnt_pos[j], xquat) + xpos
        d.xaxis[w, j] = xaxis
        qadr = m.jnt_qposadr[j]
        d.jnt_xpos[w, j] = xpos + xaxis * (d.qpos[w, qadr] - m.qpos0[qadr])
        d.jnt_xquat[w, j] = xquat

    @wp.func
    def body_joints(m: Model, d: Data, w: int, b: int):
        """Body b's frame after each of its hinge, ball and slide joints in order (the frame
        after joint j kept in jnt_xpos/jnt_xquat: no local variable is carried across the
        iterations of a dynamic loop, whose adjoint Warp replays), or its fixed offset from
        the parent when it has no joints."""
        jntadr = m.body_jntadr[b]
        jntnum = m.body_jntnum[b]
        for j in range(jntadr, jntadr + jntnum):
            if m.jnt_type[j] == JointType.SLIDE:
                joint_slide(m, d, w, b, j)
            else:
                joint_rotation(m, d, w, b, j)
        xpos = vec3(scalar(0.0))
        xquat = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        if jntnum > 0:
            xpos = d.jnt_xpos[w, jntadr + jntnum - 1]
            xquat = d.jnt_xquat[w, jntadr + jntnum - 1]
        else:
            xpos, xquat = offset(m, d, w, b)
        d.xpos[w, b] = xpos
        d.xquat[w, b] = f.quat_normalize(xquat)

    @wp.func
    def placed_alone(m: Model, b: int):
        """Whether body b is placed without its parent's pose: the world, a mocap body, a body
        with a free joint (its only joint; MuJoCo allows one only in a child of the world)."""
        return b == 0 or m.body_mocapid[b] >= 0 or (
            m.body_jntnum[b] == 1 and m.jnt_type[m.body_jntadr[b]] == JointType.FREE)

    @wp.func
    def body_root(m: Model, d: Data, w: int, b: int):
        """Pose of body b if it is placed alone (placed_alone): the world body is the identity.

        Model: body_jntadr, body_jntnum, body_mocapid, jnt_axis, jnt_qposadr, jnt_type. Data in: qpos, jnt_qloc,
        mocap_pos, mocap_quat. Data out: xpos, xquat; a free body's joint's xanchor, xaxis, jnt_xpos, jnt_xquat."""
        if b == 0:
            d.xpos[w, 0] = vec3(scalar(0.0))
            d.xquat[w, 0] = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
        elif m.body_mocapid[b] >= 0:
            body_mocap(m, d, w, b)
        elif placed_alone(m, b):
            body_free(m, d, w, b)

    @wp.func
    def body_tree(m: Model, d: Data, w: int, b: int):
        """Pose of body b from its parent's, unless it is placed alone (mj_kinematics1). Both
        schedules place the bodies placed alone first (`body_root` over every body), then the
        tree from the root; the wide schedule launches the tree's levels from the first that holds
        a body placed from its parent (Pass.skip_placed_alone). It is a function apart from
        body_root, and each kind of body one of its own, so that the differentiable step's
        generated adjoint stays within a GPU thread's registers.

        Model: body_jntadr, body_jntnum, body_mocapid, body_parentid, body_pos, body_quat, jnt_axis, jnt_pos,
        jnt_qposadr, jnt_type, qpos0. Data in: qpos, jnt_qloc, the parent's xpos and xquat. Data out: xpos, xquat;
        its joints' xanchor, xaxis, jnt_xpos, jnt_xquat."""
        if not placed_alone(m, b):
            body_joints(m, d, w, b)

    @wp.func
    def joints_from(m: Model, d: Data, w: int, b: int, xpos: vec3, xquat: quat, own: bool):
        """Body b's pose from its parent's (xpos, xquat) in registers, with the arithmetic of
        offset, joint_rotation, joint_slide and body_joints in their order (the same bits); `own`:
        body b is the one being placed, whose joints' frames are stored."""
        xpos, xquat = f.quat_to_mat(xquat) * m.body_pos[b] + xpos, f.quat_mul(xquat, m.body_quat[b])
        jntadr = m.body_jntadr[b]
        for j in range(jntadr, jntadr + m.body_jntnum[b]):
            xaxis = f.rot_vec_quat(m.jnt_axis[j], xquat)
            xanchor = f.rot_vec_quat(m.jnt_pos[j], xquat) + xpos
            if m.jnt_type[j] == JointType.SLIDE:
                qadr = m.jnt_qposadr[j]
                xpos = xpos + xaxis * (d.qpos[w, qadr] - m.qpos0[qadr])
            else:
                xquat = f.quat_mul(xquat, d.jnt_qloc[w, j])
                xpos = xanchor - f.rot_vec_quat(m.jnt_pos[j], xquat)
            if own:
                d.xanchor[w, j] = xanchor
                d.xaxis[w, j] = xaxis
                d.jnt_xpos[w, j] = xpos
                d.jnt_xquat[w, j] = xquat
        return xpos, f.quat_normalize(xquat)

    @wp.func
    def body_from_root(m: Model, d: Data, w: int, b: int):
        """body_tree's pose of body b, every body of its path from the world placed in registers
        in turn (from the pose of the last one placed alone, which body_root stored): the wide
        schedule's engine step places all bodies in one launch, not a launch per tree level.
        The differentiable step keeps the levels (here an ancestor's qpos is read by every
        descendant's thread, and the generated adjoint would sum into it with atomics).

        Model: body_jntadr, body_jntnum, body_mocapid, body_path, body_path_adr, body_pos, body_quat, jnt_axis,
        jnt_pos, jnt_qposadr, jnt_type, qpos0. Data in: qpos, jnt_qloc, xpos and xquat of the bodies placed alone
        (body_root). Data out: xpos, xquat; its joints' xanchor, xaxis, jnt_xpos, jnt_xquat."""
        if not placed_alone(m, b):
            xpos = vec3(scalar(0.0))
            xquat = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
            span = m.body_path_adr[b]
            for k in range(span[0], span[0] + span[1]):
                a = m.body_path[k]
                if placed_alone(m, a):
                    xpos = d.xpos[w, a]
                    xquat = d.xquat[w, a]
                else:
                    xpos, xquat = joints_from(m, d, w, a, xpos, xquat, a == b)
            d.xpos[w, b] = xpos
            d.xquat[w, b] = xquat

    @wp.func
    def frame(m: Model, d: Data, w: int, e: int):
        """Frame e: body e's rotation matrix and inertial frame (mj_kinematics2; e < nbody), else
        geom e - nbody, else site e - nbody - ngeom, placed on its body.

        Model: body_ipos, body_iquat, geom_bodyid, geom_pos, geom_quat, nbody, ngeom, site_bodyid, site_pos,
        site_quat. Data in: xpos, xquat. Data out: xmat, xipos, ximat (body e), geom_xpos, geom_xmat, site_xpos,
        site_xmat."""
        if e < m.nbody:
            xquat = d.xquat[w, e]
            xmat = f.quat_to_mat(xquat)
            d.xmat[w, e] = xmat
            if e == 0:
                d.xipos[w, 0] = vec3(scalar(0.0))
                d.ximat[w, 0] = xmat
            else:
                ipos, imat = inertial_frame(m, w, e, d.xpos[w, e], xquat)
                d.xipos[w, e] = ipos
                d.ximat[w, e] = imat
        else:
            # a geom or a site: one call of local_to_global for both (a smaller GPU adjoint)
            g = e - m.nbody
            geom = g < m.ngeom
            s = g - m.ngeom
            b = int(0)
            pos = vec3(scalar(0.0))
            rot = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
            if geom:
                b = m.geom_bodyid[g]
                pos = m.geom_pos[g]
                rot = m.geom_quat[g]
            else:
                b = m.site_bodyid[s]
                pos = m.site_pos[s]
                rot = m.site_quat[s]
            # mjSAMEFRAME_INERTIA(ROT): a frame within 1e-6 of the body's inertial frame (and not
            # of the body's) takes the inertial frame's matrix (composed from the body's iquat as
            # ximat is), and its position when pos is that frame's too (IsSamePose in
            # user_model.cc, on the current values); one composition, for a smaller GPU adjoint
            copy_pos = True
            iquat = m.body_iquat[w % m.body_iquat.shape[0], b]
            if b > 0 and not same_quat(rot, quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))) and (
                    same_quat(rot, iquat)):
                rot = iquat
                ipos = m.body_ipos[w % m.body_ipos.shape[0], b]
                copy_pos = same_vec(pos, ipos)
                if copy_pos:
                    pos = ipos
            xpos, xmat = local_to_global(d.xpos[w, b], d.xquat[w, b], pos, rot, copy_pos)
            if geom:
                d.geom_xpos[w, g] = xpos
                d.geom_xmat[w, g] = xmat
            else:
                d.site_xpos[w, s] = xpos
                d.site_xmat[w, s] = xmat


    # ---------------------------------------------------------------------------------------
    # Hand-written adjoint of `frame` (the differentiable step's kinematics_frame pass runs it
    # backwards with `frame_adjoint` instead of Warp's generated adjoint, which replays the whole
    # frame first and runs for every geom and site, most of which receive no gradient)

    @wp.func
    def local_to_global_adjoint(xquat: quat, pos: vec3, rot: quat, copy_pos: bool, p_bar: vec3, r_bar: mat33):
        """The adjoint of local_to_global's xquat for the adjoints (p_bar, r_bar) of its (p, r),
        in the branch the forward took (pos and rot are constants; xpos's adjoint is p_bar)."""
        xmat_bar = mat33(scalar(0.0))
        xquat_bar = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(0.0))
        if not same_quat(rot, quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))):
            xquat_bar = quat_mul_adjoint(rot, quat_to_mat_adjoint(f.quat_mul(xquat, rot), r_bar))
            xmat_bar = wp.outer(p_bar, pos)
        else:
            xmat_bar = r_bar
            if not (copy_pos and same_vec(pos, vec3(scalar(0.0)))):
                xmat_bar = xmat_bar + wp.outer(p_bar, pos)
        return xquat_bar + quat_to_mat_adjoint(xquat, xmat_bar)

    @wp.func
    def frame_adjoint(m: Model, d: Data, adj: Data, w: int, e: int):
        """Adds `frame`'s adjoint for frame e into the adjoints `adj` of its body's xpos and xquat
        (atomically: a body's frames are threads of their own), from those of its outputs; a
        frame whose outputs have no gradient (a geom in no contact, a site nothing reads) does
        nothing."""
        zero3 = vec3(scalar(0.0))
        zero33 = mat33(scalar(0.0))
        b = e
        xquat_bar = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(0.0))
        xpos_bar = zero3
        if e < m.nbody:
            xmat_bar = adj.xmat[w, e]
            if e > 0:
                ipos_bar = adj.xipos[w, e]
                imat_bar = adj.ximat[w, e]
                if nonzero3(ipos_bar) or nonzero33(imat_bar):
                    xpos_bar = ipos_bar
                    xquat_bar = local_to_global_adjoint(d.xquat[w, e], m.body_ipos[w % m.body_ipos.shape[0], e],
                                                        m.body_iquat[w % m.body_iquat.shape[0], e], True, ipos_bar,
                                                        imat_bar)
            if nonzero33(xmat_bar):
                xquat_bar = xquat_bar + quat_to_mat_adjoint(d.xquat[w, e], xmat_bar)
        else:
            g = e - m.nbody
            geom = g < m.ngeom
            s = g - m.ngeom
            p_bar = zero3
            r_bar = zero33
            if geom:
                p_bar = adj.geom_xpos[w, g]
                r_bar = adj.geom_xmat[w, g]
            else:
                p_bar = adj.site_xpos[w, s]
                r_bar = adj.site_xmat[w, s]
            if nonzero3(p_bar) or nonzero33(r_bar):
                pos = zero3
                rot = quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))
                if geom:
                    b = m.geom_bodyid[g]
                    pos = m.geom_pos[g]
                    rot = m.geom_quat[g]
                else:
                    b = m.site_bodyid[s]
                    pos = m.site_pos[s]
                    rot = m.site_quat[s]
                # `frame`'s choice of the inertial frame's rotation and position
                copy_pos = True
                iquat = m.body_iquat[w % m.body_iquat.shape[0], b]
                if b > 0 and not same_quat(rot, quat(scalar(0.0), scalar(0.0), scalar(0.0), scalar(1.0))) and (
                        same_quat(rot, iquat)):
                    rot = iquat
                    ipos = m.body_ipos[w % m.body_ipos.shape[0], b]
                    copy_pos = same_vec(pos, ipos)
                    if copy_pos:
                        pos = ipos
                xpos_bar = p_bar
                xquat_bar = local_to_global_adjoint(d.xquat[w, b], pos, rot, copy_pos, p_bar, r_bar)
        if nonzero3(xpos_bar):
            wp.atomic_add(adj.xpos, w, b, xpos_bar)
        if nonzero4(xquat_bar):
            wp.atomic_add(adj.xquat, w, b, xquat_bar)

    # ---------------------------------------------------------------------------------------
    # Hand-written adjoints of `joint`, `body_root` and `body_tree` (the kinematics_joint,
    # kinematics_body_root and kinematics_body passes backwards: simrl.sim.grad's `reverse`).
    # They read the frames the forward stored (jnt_xpos, jnt_xquat, jnt_qloc) instead of
    # replaying it. The tree pass runs backwards level by level, the leaves first: a body's
    # thread gathers the adjoints its children's threads left for its pose, then leaves its own
    # for its parent in place of its pose's adjoint (adj xpos, xquat of the body: nothing reads
    # them after its thread), so that no two threads add into one element (no atomics: the
    # same sums in the same order on every run). The bodies placed alone gather theirs in
    # body_root_adjoint, whose pass runs backwards after the tree's.

    @wp.func
    def children_adjoint(m: Model, adj: Data, w: int, b: int, p_bar: vec3, q_bar: quat):
        """Body b's pose adjoints (p_bar, q_bar) plus those its children left for it, in the
        children's order."""
        adr = m.body_child_adr[b]
        for k in range(adr, adr + m.body_child_num[b]):
            c = m.body_child[k]
            p_bar = p_bar + adj.xpos[w, c]
            q_bar = q_bar + adj.xquat[w, c]
        return p_bar, q_bar

    @wp.func
    def joint_adjoint(m: Model, d: Data, adj: Data, w: int, j: int):
        """`joint`'s adjoint: qpos's from jnt_qloc's (nothing for a slide joint; the adjoint of
        the normalization of a free or ball joint's quaternion; the derivative of the hinge's
        axis_angle_quat in the angle, (axis cos(a/2), -sin(a/2)) / 2, the sine and cosine read
        from jnt_qloc = (axis sin(a/2), cos(a/2)): axis is a unit vector)."""
        g = adj.jnt_qloc[w, j]
        jtype = m.jnt_type[j]
        if jtype != JointType.SLIDE and nonzero4(g):
            qadr = m.jnt_qposadr[j]
            if jtype == JointType.FREE or jtype == JointType.BALL:
                if jtype == JointType.FREE:
                    qadr = qadr + 3
                r = A.quat_normalize_adjoint(f.quat_from_qpos(d.qpos, w, qadr), g)
                adj.qpos[w, qadr] += r[3]
                adj.qpos[w, qadr + 1] += r[0]
                adj.qpos[w, qadr + 2] += r[1]
                adj.qpos[w, qadr + 3] += r[2]
            else:
                axis = m.jnt_axis[j]
                qloc = d.jnt_qloc[w, j]
                sin = qloc[0] * axis[0] + qloc[1] * axis[1] + qloc[2] * axis[2]
                adj.qpos[w, qadr] += ((g[0] * axis[0] + g[1] * axis[1] + g[2] * axis[2]) * qloc[3]
                                      - g[3] * sin) * scalar(0.5)

    @wp.func
    def body_root_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """`body_root`'s adjoint: a free body's pose adjoint (its own, its children's, its
        joint's frame's) into qpos's and jnt_qloc's. Nothing for the world and the mocap
        bodies (their poses are constants)."""
        if b > 0 and m.body_mocapid[b] < 0 and placed_alone(m, b):
            j = m.body_jntadr[b]
            qadr = m.jnt_qposadr[j]
            p_bar, n_bar = children_adjoint(m, adj, w, b, adj.xpos[w, b], adj.xquat[w, b])
            p_bar = p_bar + adj.xanchor[w, j] + adj.jnt_xpos[w, j]
            adj.qpos[w, qadr] += p_bar[0]
            adj.qpos[w, qadr + 1] += p_bar[1]
            adj.qpos[w, qadr + 2] += p_bar[2]
            adj.jnt_qloc[w, j] += A.quat_normalize_adjoint(d.jnt_qloc[w, j], n_bar) + adj.jnt_xquat[w, j]

    @wp.func
    def body_tree_adjoint(m: Model, d: Data, adj: Data, w: int, b: int):
        """`body_tree`'s adjoint for body b (not placed alone): its pose adjoint, with its
        children's, back through the normalization of xquat and its joints, the last first,
        into qpos's (slide joints), jnt_qloc's (hinge and ball joints) and the adjoint of its
        parent's pose, which it leaves in adj xpos, xquat of body b (see above)."""
        if not placed_alone(m, b):
            p_bar, n_bar = children_adjoint(m, adj, w, b, adj.xpos[w, b], adj.xquat[w, b])
            jntadr = m.body_jntadr[b]
            jntnum = m.body_jntnum[b]
            pid = m.body_parentid[b]
            parent_quat = d.xquat[w, pid]
            # the frame before the first joint (offset's)
            q0 = f.quat_mul(parent_quat, m.body_quat[b])
            q_last = q0
            if jntnum > 0:
                q_last = d.jnt_xquat[w, jntadr + jntnum - 1]
            q_bar = A.quat_normalize_adjoint(q_last, n_bar)
            for t in range(jntnum):
                j = jntadr + jntnum - 1 - t
                p_bar = p_bar + adj.jnt_xpos[w, j]
                q_bar = q_bar + adj.jnt_xquat[w, j]
                q = q0  # the frame's rotation before joint j
                if j > jntadr:
                    q = d.jnt_xquat[w, j - 1]
                anchor_bar = adj.xanchor[w, j]
                axis_bar = adj.xaxis[w, j]
                if m.jnt_type[j] == JointType.SLIDE:
                    # xpos' = xpos + xaxis (qpos - qpos0), xquat' = xquat
                    qadr = m.jnt_qposadr[j]
                    axis_bar = axis_bar + p_bar * (d.qpos[w, qadr] - m.qpos0[qadr])
                    adj.qpos[w, qadr] += wp.dot(d.xaxis[w, j], p_bar)
                else:
                    # xquat' = xquat qloc, xpos' = xanchor - rot(jnt_pos, xquat')
                    anchor_bar = anchor_bar + p_bar
                    q_bar = q_bar - A.rot_vec_quat_adjoint(m.jnt_pos[j], d.jnt_xquat[w, j], p_bar)
                    adj.jnt_qloc[w, j] += A.quat_mul_adjoint_b(q, q_bar)
                    q_bar = quat_mul_adjoint(d.jnt_qloc[w, j], q_bar)
                    p_bar = vec3(scalar(0.0))
                # xanchor = rot(jnt_pos, xquat) + xpos, xaxis = rot(jnt_axis, xquat)
                q_bar = q_bar + A.rot_vec_quat_adjoint(m.jnt_pos[j], q, anchor_bar) + A.rot_vec_quat_adjoint(
                    m.jnt_axis[j], q, axis_bar)
                p_bar = p_bar + anchor_bar
            # offset: xpos = mat(parent xquat) body_pos + parent xpos, xquat = parent xquat body_quat
            adj.xpos[w, b] = p_bar
            adj.xquat[w, b] = quat_to_mat_adjoint(parent_quat, wp.outer(p_bar, m.body_pos[b])) + quat_mul_adjoint(
                m.body_quat[b], q_bar)

    return SimpleNamespace(joint=joint, body_root=body_root, body_tree=body_tree, body_from_root=body_from_root,
                           frame=frame, frame_adjoint=frame_adjoint,
                           joint_adjoint=joint_adjoint, body_root_adjoint=body_root_adjoint,
                           body_tree_adjoint=body_tree_adjoint)
