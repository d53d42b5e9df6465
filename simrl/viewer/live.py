"""The viewer's simulation side: copy the shown worlds' state from the simulation, run a policy
live under the page's controls (scripts/play.py viewer=web), and show worlds while training
runs (scripts/train.py viewer=web).

Copying is the only host work the simulation sees: a few worlds' qpos, qvel, ctrl, act,
qfrc_applied and mocap poses (`snapshot`), at most `fps` times a second. Poses, contacts and
the drawing are computed from the copy (simrl.viewer.server, on a thread of its own while
training).
"""

import contextlib
import io
import logging
import queue
import threading
import time

import numpy as np
import torch

from simrl.viewer.scene import STATE_FIELDS
from simrl.viewer.server import WebViewer


def snapshot(env, worlds: torch.Tensor) -> dict[str, np.ndarray]:
    """The shown worlds' state (STATE_FIELDS) as host arrays [len(worlds), ...]; the
    differentiable step's qpos and qvel when gradients are on (env.qpos, env.qvel)."""
    out = {}
    for name in STATE_FIELDS:
        value = getattr(env, name) if name in ("qpos", "qvel") else getattr(env.sim, name, None)
        if value is None or value.numel() == 0:
            continue
        out[name] = value.detach()[worlds].cpu().numpy().astype(np.float64)
    return out


def command_info(env) -> dict | None:
    """The velocity command the page can steer (envs.mdp.commands.base_velocity): its ranges
    and whether the yaw slider sets a heading; None for a task without one."""
    if not hasattr(env, "commands") or not hasattr(env, "command_ranges"):
        return None
    term = getattr(env, "velocity_command", None)
    return {"ranges": env.command_ranges.detach().cpu().numpy(),
            "heading": bool(getattr(term, "heading_command", False))}


def reward_terms(env) -> list[str]:
    return list(getattr(env, "reward_weights", {}))


def _apply_command(env, viewer: WebViewer, worlds: torch.Tensor) -> bool:
    """Write the page's command into the shown worlds (every step, so that the task's own
    resampling does not take it back); True if it did."""
    c = viewer.controls
    with c.lock:
        if not c.override_command:
            return False
        command = c.command.copy()
    heading = getattr(getattr(env, "velocity_command", None), "heading_command", False)
    cmd = torch.as_tensor(command, dtype=env.commands.dtype, device=env.device)
    env.commands[worlds, :2] = cmd[:2]
    if heading:
        env.heading_target[worlds] = cmd[2]
    else:
        env.commands[worlds, 2] = cmd[2]
    return True


@torch.inference_mode()
def run_live(env, policy, viewer: WebViewer, seconds: float | None = None, log=print) -> dict:
    """Run `policy` (a callable on the TensorDict of observation groups) in `env` under the
    page's controls until `seconds` have passed (None: until Ctrl-C), at real time times the
    page's speed (or as fast as the simulation goes, when slower); draw every step that fits
    the frame rate. Returns counts: policy steps, frames drawn, seconds, the achieved
    real-time factor."""
    from tensordict import TensorDict

    worlds = torch.as_tensor(viewer.worlds, device=env.device, dtype=torch.long)
    obs = env.reset()
    start = time.monotonic()
    steps, sim_time, next_frame, deadline = 0, 0.0, start, start
    rate_window = (start, 0.0)
    rtf = 0.0
    try:
        while seconds is None or time.monotonic() - start < seconds:
            c = viewer.controls
            if c.take_reset():
                obs = env.reset()
            if not c.take_step():
                time.sleep(0.02)
                viewer.update(snapshot(env, worlds), status=_status(steps, sim_time, rtf, paused=True))
                deadline = time.monotonic()
                continue
            if _apply_command(env, viewer, worlds):
                obs = env.observations()  # the policy sees the steered command now
            actions = policy(TensorDict(obs, batch_size=[env.num_envs], device=env.device))
            obs, _reward, _terminated, _time_outs, _extras = env.step(actions)
            steps += 1
            sim_time += env.step_dt
            terms = getattr(env, "step_reward_terms", None)
            if terms is not None and viewer._plot is not None:
                plotted = worlds[c.world if c.world is not None else 0]
                viewer.record_rewards(sim_time, {k: float(v[plotted]) for k, v in terms().items()})
            now = time.monotonic()
            if now - rate_window[0] >= 1.0:
                rtf = (sim_time - rate_window[1]) / (now - rate_window[0])
                rate_window = (now, sim_time)
            if now >= next_frame:
                viewer.update(snapshot(env, worlds), status=_status(steps, sim_time, rtf, paused=False))
                next_frame = now + 1.0 / 30.0
            deadline += env.step_dt / max(c.speed, 1e-3)
            wait = deadline - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            elif wait < -0.25:  # slower than asked: do not build up a backlog to catch up with
                deadline = time.monotonic()
    except KeyboardInterrupt:
        log("simrl: viewer stopped (Ctrl-C)")
    elapsed = time.monotonic() - start
    return {"steps": steps, "frames": viewer.frames, "seconds": elapsed,
            "real_time_factor": sim_time / max(elapsed, 1e-9)}


def _status(steps: int, sim_time: float, rtf: float, paused: bool) -> str:
    state = "paused" if paused else "running"
    return f"**{state}** · t = {sim_time:.2f} s · {steps} steps · {rtf:.2f}x real time"


class TrainingView:
    """Shows `viewer`'s worlds while training runs: called after every environment step
    (BatchedEnv.step_observers), it copies the shown worlds' state at most `fps` times a
    second and hands the copy to a thread that draws it, so the training loop pays only for
    the copy. `cost()` is the share of the training's wall-clock time spent here so far."""

    def __init__(self, env, viewer: WebViewer, fps: float = 15.0, seconds: float | None = None):
        self.env, self.viewer = env, viewer
        self.worlds = torch.as_tensor(viewer.worlds, device=env.device, dtype=torch.long)
        self.period = 1.0 / fps
        self.start = time.monotonic()
        self.until = None if seconds is None else self.start + seconds
        self.next = self.start
        self.spent = 0.0  # s of the training loop's thread, copying
        self.drawn = 0.0  # s of CPU time of the drawing thread
        self.steps = 0
        self._queue: queue.Queue = queue.Queue(maxsize=1)
        self._thread = threading.Thread(target=self._draw, daemon=True, name="simrl-viewer")
        self._thread.start()
        self.closed = False

    def __call__(self, env) -> None:
        self.steps += 1
        now = time.monotonic()
        if now < self.next or self.closed:
            return
        if self.until is not None and now >= self.until:
            self.close()
            return
        state = snapshot(env, self.worlds)
        terms = env.step_reward_terms() if hasattr(env, "step_reward_terms") else {}
        if terms:  # the plotted world's weighted terms of this step, in one copy
            values = torch.stack([v.detach()[self.worlds[0]] for v in terms.values()]).cpu().tolist()
            terms = dict(zip(terms, values, strict=True))
        try:
            self._queue.put_nowait((state, terms, self.steps))
        except queue.Full:  # the drawing thread is behind: skip this frame
            pass
        self.next = now + self.period
        self.spent += time.monotonic() - now

    def _draw(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            state, terms, steps = item
            t0 = time.thread_time()
            self.viewer.update(state, status=f"**training** · {steps} env steps · {self.viewer.frames + 1} frames "
                                             f"(world {self.viewer.worlds[0]}'s reward terms)")
            if terms:
                self.viewer.record_rewards(steps * self.env.step_dt, terms)
            self.drawn += time.thread_time() - t0

    def cost(self) -> tuple[float, float]:
        """Since the viewer started: the share of wall-clock time the training loop spent
        copying for it, and the drawing thread's CPU time as a share of one core."""
        wall = max(time.monotonic() - self.start, 1e-9)
        return self.spent / wall, self.drawn / wall

    def progress_note(self) -> str:
        """The progress line's note: the viewer's cost (see `cost`)."""
        if self.closed:
            return ""
        copy, draw = self.cost()
        return f"viewer: copy {100.0 * copy:.1f}% draw {100.0 * draw:.0f}% of a core"

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self._queue.put(None, timeout=1.0)
        except queue.Full:
            pass
        self._thread.join(timeout=5.0)
        self.viewer.close()


def open_viewer(env, worlds: list[int], cfg, **kwargs) -> WebViewer:
    """Start the browser viewer on cfg's viewer_host and viewer_port and print where to open it
    (with the SSH tunnel for a remote machine)."""
    host, port = str(cfg.get("viewer_host", "127.0.0.1")), int(cfg.get("viewer_port", 8080))
    logging.getLogger("websockets").setLevel(logging.WARNING)  # "server listening on ...": said below
    with contextlib.redirect_stdout(io.StringIO()):  # viser's own banner: the line below says it
        viewer = WebViewer(env.sim.mj_model, worlds, host=host, port=port, **kwargs)
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    print(f"simrl: viewer at http://{shown}:{port} (from another machine: ssh -L {port}:localhost:{port} "
          f"USER@THIS_HOST, then open http://localhost:{port})", flush=True)
    return viewer


def shown_worlds(num_envs: int, count: int) -> list[int]:
    """The first `count` worlds (at least one, at most num_envs)."""
    return list(range(max(1, min(int(count), int(num_envs)))))


def side_by_side(env) -> bool:
    """Whether worlds are drawn beside each other: not for terrain tasks, whose worlds stand at
    their own places on the terrain (env_origins)."""
    return not hasattr(env, "env_origins")

