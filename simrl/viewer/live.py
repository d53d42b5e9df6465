"""The viewer's simulation side: copy the shown worlds' state from the simulation, run a policy
live under the page's controls (scripts/play.py viewer=web), and show worlds while training
runs (scripts/train.py viewer=web).

Copying is the only host work the simulation sees: a few worlds' qpos, qvel, ctrl, act,
qfrc_applied and mocap poses (`snapshot`), at most 30 (training: 15) times a second. Poses,
contacts and the drawing are computed from the copy (simrl.viewer.server; while training, in a
process of its own, simrl.viewer.process).
"""

import contextlib
import io
import logging
import queue
import time

import numpy as np
import torch

from simrl.viewer.scene import STATE_FIELDS
from simrl.viewer.server import ViewerError, WebViewer


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
def run_live(env, policy, viewer: WebViewer, seconds: float | None = None, log=print, stop=None) -> dict:
    """Run `policy` (a callable on the TensorDict of observation groups) in `env` under the
    page's controls until `seconds` have passed (None: until Ctrl-C, or until `stop`, a
    threading.Event, is set), at real time times the
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
        while (seconds is None or time.monotonic() - start < seconds) and not (stop is not None and stop.is_set()):
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
            if terms is not None and viewer.plots_rewards:
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
    """Shows worlds while training runs, drawn by a process of its own (simrl.viewer.process):
    called after every environment step (BatchedEnv.step_observers), it copies the shown
    worlds' state at most `fps` times a second and queues the copy; the viewer process
    computes the poses and serves the page. The training process pays for the copy alone (no
    thread of its own competes with the training loop for Python's lock).

    `worlds` are the env's world indices shown; `viewer` the WebViewer's keyword arguments
    (host, port, title, side_by_side, reward_terms). Raises ViewerError when the viewer cannot
    start (a port in use)."""

    def __init__(self, env, worlds: list[int], viewer: dict, fps: float = 15.0, seconds: float | None = None):
        import multiprocessing

        from simrl.viewer import process

        self.env = env
        self.worlds = torch.as_tensor(worlds, device=env.device, dtype=torch.long)
        self.period = 1.0 / fps
        ctx = multiprocessing.get_context("spawn")  # no copy of the training process's threads or GPU context
        self._queue = ctx.Queue(maxsize=1)
        status = ctx.Queue()
        self._cpu = ctx.Value("d", 0.0)  # the viewer process's CPU seconds, which it updates
        self._frames = ctx.Value("l", 0)
        self._process = ctx.Process(target=process.serve, name="simrl-viewer", daemon=True,
                                    args=(env.sim.mj_model, list(worlds), dict(viewer), self._queue, status,
                                          self._cpu, self._frames))
        self._process.start()
        try:
            started = status.get(timeout=120)
        except queue.Empty:
            started = "viewer: the viewer process did not start within 120 s"
        if started != "ready":
            self._process.join(timeout=10)
            raise ViewerError(started)
        self.start = time.monotonic()
        self.until = None if seconds is None else self.start + seconds
        self.next = self.start
        self.spent = 0.0  # s of the training loop, copying
        self.steps = 0
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
        if terms:  # the first shown world's weighted terms of this step, in one copy
            values = torch.stack([v.detach()[self.worlds[0]] for v in terms.values()]).cpu().tolist()
            terms = dict(zip(terms, values, strict=True))
        try:
            self._queue.put_nowait((state, terms, self.steps * env.step_dt, self.steps))
        except queue.Full:  # the viewer is behind: this frame is skipped
            pass
        self.next = now + self.period
        self.spent += time.monotonic() - now

    @property
    def frames(self) -> int:
        return int(self._frames.value)

    def cost(self) -> tuple[float, float]:
        """Since the viewer started: the share of wall-clock time the training loop spent
        copying for it, and the viewer process's CPU time as a share of one core."""
        wall = max(time.monotonic() - self.start, 1e-9)
        return self.spent / wall, float(self._cpu.value) / wall

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
            self._queue.put(None, timeout=5.0)
        except queue.Full:
            pass
        self._process.join(timeout=10.0)
        if self._process.is_alive():
            self._process.terminate()


def viewer_address(cfg) -> tuple[str, int]:
    """The viewer's host and port from a train.py or play.py config."""
    return str(cfg.get("viewer_host", "127.0.0.1")), int(cfg.get("viewer_port", 8080))


def print_address(host: str, port: int) -> None:
    """Say where to open the page, with the SSH tunnel for a remote machine."""
    shown = "localhost" if host in ("0.0.0.0", "::") else host
    print(f"simrl: viewer at http://{shown}:{port} (from another machine: ssh -L {port}:localhost:{port} "
          f"USER@THIS_HOST, then open http://localhost:{port})", flush=True)


def open_viewer(env, worlds: list[int], cfg, **kwargs) -> WebViewer:
    """Start the browser viewer in this process on cfg's viewer_host and viewer_port (play.py)
    and print where to open it."""
    host, port = viewer_address(cfg)
    logging.getLogger("websockets").setLevel(logging.WARNING)  # "server listening on ...": said below
    with contextlib.redirect_stdout(io.StringIO()):  # viser's own banner: the line below says it
        viewer = WebViewer(env.sim.mj_model, worlds, host=host, port=port, **kwargs)
    print_address(host, port)
    return viewer


def shown_worlds(num_envs: int, count: int) -> list[int]:
    """The first `count` worlds (at least one, at most num_envs)."""
    return list(range(max(1, min(int(count), int(num_envs)))))


def side_by_side(env) -> bool:
    """Whether worlds are drawn beside each other: not for terrain tasks, whose worlds stand at
    their own places on the terrain (env_origins)."""
    return not hasattr(env, "env_origins")

