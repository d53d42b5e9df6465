"""Subtree centres of mass, body inertias and motion dofs in the CoM-centred world frame
(mj_comPos, engine_core_smooth.c).

Each kinematic tree uses the centre of mass of its whole subtree (`subtree_com` of its
root) as the reference point, so every spatial quantity of a tree is in one frame.
"""


import functools

import warp as wp

from simrl.sim.data import data_struct
from simrl.sim.model import model_struct
from simrl.sim.types import JNT_BALL, JNT_FREE, JNT_SLIDE, MINVAL, scalar_types


@functools.cache
def build(scalar):
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    f, vec3, vec10 = T.f, T.vec3, T.vec10

    @wp.func
    def com_pos(m: Model, d: Data, w: int):
        wm = w % m.body_mass.shape[0]
        # subtree mass and mass-weighted position, accumulated leaf to root (every array
        # element is written once, then only added to: the adjoints stay exact)
        for b in range(m.nbody):
            mass = m.body_mass[wm, b]
            d.subtree_mass[w, b] = mass
            d.subtree_mcom[w, b] = d.xipos[w, b] * mass
        for i in range(m.nbody - 1):
            b = m.nbody - 1 - i
            p = m.body_parentid[b]
            d.subtree_mass[w, p] += d.subtree_mass[w, b]
            d.subtree_mcom[w, p] += d.subtree_mcom[w, b]
        for b in range(m.nbody):
            mass = d.subtree_mass[w, b]
            com = d.xipos[w, b]
            if mass >= scalar(MINVAL):
                com = d.subtree_mcom[w, b] / mass
            d.subtree_com[w, b] = com
        # body inertias about the subtree CoM of their tree
        d.cinert[w, 0] = vec10(scalar(0.0))
        wi = w % m.body_inertia.shape[0]
        for b in range(1, m.nbody):
            offset = d.xipos[w, b] - d.subtree_com[w, m.body_rootid[b]]
            d.cinert[w, b] = f.inert_com(m.body_inertia[wi, b], d.ximat[w, b], offset,
                                         m.body_mass[wm, b])

        # motion dofs: [rotation axis, linear velocity of the reference point]
        for b in range(1, m.nbody):
            root_com = d.subtree_com[w, m.body_rootid[b]]
            xmat = d.xmat[w, b]
            for j in range(m.body_jntadr[b], m.body_jntadr[b] + m.body_jntnum[b]):
                da = m.jnt_dofadr[j]
                jtype = m.jnt_type[j]
                offset = root_com - d.xanchor[w, j]
                if jtype == JNT_FREE or jtype == JNT_BALL:
                    rot = da
                    if jtype == JNT_FREE:
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
                elif jtype == JNT_SLIDE:
                    d.cdof[w, da] = f.dof_com_slide(d.xaxis[w, j])
                else:
                    d.cdof[w, da] = f.dof_com(d.xaxis[w, j], offset)

    return com_pos
