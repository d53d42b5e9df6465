"""The differentiable step: `Sim.step`'s stages recorded on a `wp.Tape`, with exact adjoints.

Every stage function of the engine (kinematics ... actuation, integrate_pos) is written so that
Warp's generated adjoint is exact: each array element is written once and then only added to,
and no local variable is carried across the iterations of a loop with a dynamic trip count.
They are compiled here a second time, into a module that generates adjoints
(`kernel_module(..., backward=True)`); the engine's own module skips them for compile time.

The linear solves are the exception: the sparse L'DL factorization works in place, so it has
a hand-written adjoint instead (`solve_adjoint`). For x = A^-1 b with A symmetric,
    b_bar = A^-1 x_bar,    A_bar = -b_bar x^T,
using the factor kept from the forward pass (one more solve, no refactorization).

One `Step` holds the buffers of one physics step (a fresh Data, so nothing the tape recorded
is overwritten); `simrl.diff` chains them and bridges to torch.autograd.
"""

import functools

import warp as wp

from simrl.errors import UnsupportedFeatureError
from simrl.sim import forward, integrate_pos
from simrl.sim.data import data_struct, make_data
from simrl.sim.model import INTEGRATOR_EULER, model_struct
from simrl.sim.types import kernel_module, scalar_types


@functools.cache
def build(scalar):
    """The kernels of the differentiable step for precision `scalar`."""
    T = scalar_types(scalar)
    Model, Data = model_struct(scalar), data_struct(scalar)
    s = forward.stages(scalar)
    kinematics_, com_pos_, crb_ = s["kinematics"], s["com_pos"], s["crb"]
    com_vel_, passive_, rne_, actuation_ = s["com_vel"], s["passive"], s["rne"], s["actuation"]
    from simrl.sim import factor_m

    _, factor_ld, solve_ld = factor_m.build(scalar)
    integrate_pos_ = integrate_pos.build(scalar)
    module = kernel_module(scalar, name="grad", backward=True)

    @wp.kernel(module=module)
    def smooth(m: Model, d: Data):
        """Position- and velocity-dependent stages up to qfrc_smooth (mj_fwdPosition,
        mj_fwdVelocity, mj_fwdActuation without the constraint parts)."""
        w = wp.tid()
        kinematics_(m, d, w)
        com_pos_(m, d, w)
        crb_(m, d, w)
        com_vel_(m, d, w)
        passive_(m, d, w)
        rne_(m, d, w)
        actuation_(m, d, w)
        for i in range(m.nv):
            d.qfrc_smooth[w, i] = d.qfrc_passive[w, i] - d.qfrc_bias[w, i] + d.qfrc_applied[w, i] + \
                d.qfrc_actuator[w, i]

    @wp.kernel(module=module)
    def euler_diagonal(m: Model, out: wp.array2d(dtype=scalar)):
        """h * dof_damping when Euler integrates damping implicitly (mj_EulerSkip), else 0."""
        w, i = wp.tid()
        value = scalar(0.0)
        if m.euler_damp:
            value = m.timestep * m.dof_damping[w % m.dof_damping.shape[0], i]
        out[w, i] = value

    @wp.kernel(module=module)
    def solve_forward(m: Model, A: wp.array3d(dtype=scalar), diag: wp.array2d(dtype=scalar),
                      b: wp.array2d(dtype=scalar), LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar)):
        """x = (A + diag(diag))^-1 b for a matrix with the sparsity of qM; LD keeps the factor."""
        w = wp.tid()
        for i in range(m.nv):
            LD[w, i, i] = A[w, i, i] + diag[w, i]
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                LD[w, i, j] = A[w, i, j]
            x[w, i] = b[w, i]
        factor_ld(m, LD, w)
        solve_ld(m, LD, x, w)

    @wp.kernel(module=module)
    def solve_adjoint(m: Model, LD: wp.array3d(dtype=scalar), x: wp.array2d(dtype=scalar),
                      x_bar: wp.array2d(dtype=scalar), y: wp.array2d(dtype=scalar),
                      b_bar: wp.array2d(dtype=scalar), A_bar: wp.array3d(dtype=scalar),
                      diag_bar: wp.array2d(dtype=scalar)):
        """Adjoint of `solve_forward`: y = A^-1 x_bar; b_bar += y; A_bar -= y x^T on the
        sparsity pattern (both triangles, as qM stores both); diag_bar -= y * x."""
        w = wp.tid()
        for i in range(m.nv):
            y[w, i] = x_bar[w, i]
        solve_ld(m, LD, y, w)
        for i in range(m.nv):
            yi = y[w, i]
            xi = x[w, i]
            b_bar[w, i] = b_bar[w, i] + yi
            A_bar[w, i, i] = A_bar[w, i, i] - yi * xi
            diag_bar[w, i] = diag_bar[w, i] - yi * xi
            adr = m.dof_ancestor_adr[i]
            for k in range(adr, adr + m.dof_ancestor_num[i]):
                j = m.dof_ancestor[k]
                A_bar[w, i, j] = A_bar[w, i, j] - yi * x[w, j]
                A_bar[w, j, i] = A_bar[w, j, i] - y[w, j] * xi

    @wp.kernel(module=module)
    def advance(m: Model, qpos0: wp.array2d(dtype=scalar), qvel0: wp.array2d(dtype=scalar),
                qacc: wp.array2d(dtype=scalar), qpos1: wp.array2d(dtype=scalar),
                qvel1: wp.array2d(dtype=scalar)):
        """Semi-implicit Euler (mj_advance): qvel1 = qvel0 + h qacc, then qpos on the manifold."""
        w = wp.tid()
        h = m.timestep
        for i in range(m.nv):
            qvel1[w, i] = qvel0[w, i] + h * qacc[w, i]
        integrate_pos_(m, qpos0, qpos1, qvel1, h, w)

    @wp.kernel(module=module)
    def gain_to_gainprm(gain: wp.array2d(dtype=scalar), base: wp.array2d(dtype=T.vec3),
                        out: wp.array2d(dtype=T.vec3)):
        """actuator_gainprm with its first entry (the gain of a fixed or affine gain) from `gain`."""
        w, a = wp.tid()
        prm = base[w % base.shape[0], a]
        out[w, a] = T.vec3(gain[w, a], prm[1], prm[2])

    return {"smooth": smooth, "euler_diagonal": euler_diagonal, "solve_forward": solve_forward,
            "solve_adjoint": solve_adjoint, "advance": advance, "gain_to_gainprm": gain_to_gainprm}


def check_differentiable(model) -> None:
    """Raise UnsupportedFeatureError for what the differentiable step does not cover yet."""
    if model.integrator != INTEGRATOR_EULER:
        raise UnsupportedFeatureError(
            "diff_step supports the Euler integrator only (the model uses "
            f"{'RK4' if model.integrator == 1 else 'integrator ' + str(model.integrator)}); "
            "set <option integrator=\"Euler\"/>")
    if model.struct.nefc > 0:
        raise UnsupportedFeatureError(
            f"diff_step: gradients through constraints (this model has {model.struct.nefc} constraint rows: "
            "contacts, joint limits or friction loss) are not implemented yet; disable them with "
            "<option><flag constraint=\"disable\"/></option> to differentiate the smooth dynamics")


def _solve(tape, kernels, m, W, A, diag, b, x, device):
    """x = (A + diag)^-1 b, launched outside the tape, with its hand-written adjoint recorded."""
    nv = A.shape[1]
    LD = wp.zeros_like(A, requires_grad=False)
    wp.launch(kernels["solve_forward"], dim=W, inputs=[m, A, diag, b, LD, x], device=device, record_tape=False)

    def backward():
        y = wp.zeros((W, nv), dtype=x.dtype, device=device)
        wp.launch(kernels["solve_adjoint"], dim=W, inputs=[m, LD, x, x.grad, y, b.grad, A.grad, diag.grad],
                  device=device)

    tape.record_func(backward, arrays=[A, diag, b, x])


class Rollout:
    """Physics steps recorded on one tape, from (qpos0, qvel0, ctrl) and model parameters.

    `model_struct` is the Model the kernels read (parameters replaced by arrays with
    gradients); `steps` Euler steps are taken with the same ctrl. Call `backward()` after
    seeding `qpos1.grad` / `qvel1.grad`."""

    def __init__(self, model, m, qpos0, qvel0, ctrl, qfrc_applied, steps: int, tape: wp.Tape):
        self.kernels = k = build(model.dtype)
        self.tape = tape
        device = model.device
        W = qpos0.shape[0]
        nv = model.nv
        self.datas = []
        qpos, qvel = qpos0, qvel0
        with tape:
            for _ in range(steps):
                d = make_data(model, W, requires_grad=True)
                d.qpos, d.qvel, d.ctrl, d.qfrc_applied = qpos, qvel, ctrl, qfrc_applied
                wp.launch(k["smooth"], dim=W, inputs=[m, d], device=device)
                diag = wp.zeros((W, nv), dtype=model.dtype, device=device, requires_grad=True)
                wp.launch(k["euler_diagonal"], dim=(W, nv), inputs=[m, diag], device=device)
                # without constraints qacc = M^-1 qfrc_smooth; with implicit damping Euler uses
                # (M + h D)^-1 qfrc_smooth instead (mj_EulerSkip)
                _solve(tape, k, m, W, d.qM, diag, d.qfrc_smooth, d.qacc_int, device)
                qpos_next = wp.zeros_like(qpos, requires_grad=True)
                qvel_next = wp.zeros_like(qvel, requires_grad=True)
                wp.launch(k["advance"], dim=W, inputs=[m, qpos, qvel, d.qacc_int, qpos_next, qvel_next],
                          device=device)
                self.datas.append(d)
                qpos, qvel = qpos_next, qvel_next
        self.qpos1, self.qvel1 = qpos, qvel
