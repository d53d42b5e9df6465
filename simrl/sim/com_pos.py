"""Subtree centres of mass, body inertias and motion dofs in the CoM-centred world frame
(mj_comPos, engine_core_smooth.c).

Each kinematic tree uses the centre of mass of its whole subtree (`subtree_com` of its
root) as the reference point, so every spatial quantity of a tree is in one frame.

Elements: `subtree_body(m, d, w, b)` sums body b's subtree mass from its children's (a tree
pass from the leaves; `subtree_body_alone`, the same sums for body b alone: simrl.sim.subtree);
`body` then gives body b its
subtree CoM, its inertia about its tree's CoM and the motion axes of its joints' dofs.
"""


import functools
from types import SimpleNamespace

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.subtree import subtree_sum
from simrl.sim.types import MINVAL, JointType, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, vec10 = T.f, T.vec3, T.vec10
    vec4 = wp.types.vector(4, dtype=scalar)

    @wp.func
    def subtree_body(m: Model, d: Data, w: int, b: int):
        """Subtree mass and mass-weighted position of body b, gathered from its children in
        ascending order (each element is written once, then only added to: the adjoints stay
        exact).

        Model: body_child, body_child_adr, body_child_num, body_mass. Data in: xipos; the children's subtree_mass,
        subtree_mcom. Data out: subtree_mass, subtree_mcom."""
        mass = m.body_mass[w % m.body_mass.shape[0], b]
        d.subtree_mass[w, b] = mass
        d.subtree_mcom[w, b] = d.xipos[w, b] * mass
        adr = m.body_child_adr[b]
        for k in range(adr, adr + m.body_child_num[b]):
            c = m.body_child[k]
            d.subtree_mass[w, b] += d.subtree_mass[w, c]
            d.subtree_mcom[w, b] += d.subtree_mcom[w, c]

    @wp.func
    def mass_own(m: Model, d: Data, w: int, b: int):
        """Body b's mass and mass-weighted position, as subtree_body starts its sums."""
        mass = m.body_mass[w % m.body_mass.shape[0], b]
        mcom = d.xipos[w, b] * mass
        return vec4(mass, mcom[0], mcom[1], mcom[2])

    @wp.func
    def mass_write(m: Model, d: Data, w: int, b: int, total: vec4):
        d.subtree_mass[w, b] = total[0]
        d.subtree_mcom[w, b] = vec3(total[1], total[2], total[3])

    @wp.func
    def subtree_com(m: Model, d: Data, w: int, b: int):
        """The centre of mass of body b's subtree (its inertial frame's origin when massless)."""
        total = d.subtree_mass[w, b]
        com = d.xipos[w, b]
        if total >= scalar(MINVAL):
            com = d.subtree_mcom[w, b] / total
        return com

    def make_body(cdof: bool):
        """`body`, with its dofs' cdof (the engine's step) or without (the differentiable step
        computes them in `cdof_dof`, a launch of its own: in one kernel the generated adjoint of
        both needs more registers than a GPU thread should use)."""
        @wp.func
        def body(m: Model, d: Data, w: int, b: int):
            """subtree_com of body b, its cinert about its tree's CoM, and cdof of the dofs of its
            joints: [rotation axis, linear velocity of the reference point].

            Model: body_inertia, body_jntadr, body_jntnum, body_mass, body_rootid, jnt_dofadr, jnt_type. Data in:
            xipos, ximat, xmat, xanchor, xaxis; subtree_mass, subtree_mcom of the body and of its tree's root. Data
            out: subtree_com, cinert, cdof (`cdof`: of its joints' dofs)."""
            d.subtree_com[w, b] = subtree_com(m, d, w, b)
            if b == 0:
                d.cinert[w, 0] = vec10(scalar(0.0))
            else:
                # the root's CoM, computed as the root's own element computes it
                root_com = subtree_com(m, d, w, m.body_rootid[b])
                wm = w % m.body_mass.shape[0]
                d.cinert[w, b] = f.inert_com(m.body_inertia[w % m.body_inertia.shape[0], b], d.ximat[w, b],
                                             d.xipos[w, b] - root_com, m.body_mass[wm, b])
                if wp.static(cdof):
                    xmat = d.xmat[w, b]
                    for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
                        da = m.jnt_dofadr[j]
                        jtype = m.jnt_type[j]
                        offset = root_com - d.xanchor[w, j]
                        if jtype == JointType.FREE or jtype == JointType.BALL:
                            rot = da
                            if jtype == JointType.FREE:
                                # translation along the world axes
                                for k in range(3):
                                    e = vec3(scalar(0.0))
                                    e[k] = scalar(1.0)
                                    d.cdof[w, da + k] = f.dof_com_slide(e)
                                rot = da + 3
                            # rotation about the body-frame axes
                            for k in range(3):
                                axis = vec3(xmat[0, k], xmat[1, k], xmat[2, k])
                                d.cdof[w, rot + k] = f.dof_com(axis, offset)
                        elif jtype == JointType.SLIDE:
                            d.cdof[w, da] = f.dof_com_slide(d.xaxis[w, j])
                        else:
                            d.cdof[w, da] = f.dof_com(d.xaxis[w, j], offset)
        return body

    @wp.func
    def cdof_dof(m: Model, d: Data, w: int, i: int):
        """cdof of dof i, as `body` computes it for the dofs of the body's joints.

        Model: body_rootid, dof_bodyid, dof_jntid, jnt_dofadr, jnt_type. Data in: xipos, xmat, xanchor, xaxis;
        subtree_mass, subtree_mcom of the tree's root. Data out: cdof."""
        j = m.dof_jntid[i]
        b = m.dof_bodyid[i]
        k = i - m.jnt_dofadr[j]
        jtype = m.jnt_type[j]
        offset = subtree_com(m, d, w, m.body_rootid[b]) - d.xanchor[w, j]
        if jtype == JointType.FREE and k < 3:
            # translation along the world axes
            e = vec3(scalar(0.0))
            e[k] = scalar(1.0)
            d.cdof[w, i] = f.dof_com_slide(e)
        elif jtype == JointType.FREE or jtype == JointType.BALL:
            # rotation about the body-frame axes
            if jtype == JointType.FREE:
                k = k - 3
            xmat = d.xmat[w, b]
            d.cdof[w, i] = f.dof_com(vec3(xmat[0, k], xmat[1, k], xmat[2, k]), offset)
        elif jtype == JointType.SLIDE:
            d.cdof[w, i] = f.dof_com_slide(d.xaxis[w, j])
        else:
            d.cdof[w, i] = f.dof_com(d.xaxis[w, j], offset)

    return SimpleNamespace(subtree_body=subtree_body, body=make_body(True), body_cinert=make_body(False),
                           cdof_dof=cdof_dof,
                           # subtree_body's sums for a body alone (simrl.sim.subtree: the same bits). Model:
                           # body_subtree, body_mass. Data in: xipos. Data out: subtree_mass, subtree_mcom
                           subtree_body_alone=subtree_sum(scalar, vec4, mass_own, mass_write))
