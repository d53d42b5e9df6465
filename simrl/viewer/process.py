"""The viewer process of a training run (simrl.viewer.live.TrainingView): it serves the page
and draws the states the training process queues, so that the training loop's process does no
drawing. It imports neither torch nor Warp."""

import contextlib
import io
import logging
import os


def serve(mj_model, worlds: list[int], kwargs: dict, states, status, cpu, frames) -> None:
    """Start a WebViewer of `mj_model`'s `worlds` (put "ready", or the ViewerError's text, on
    `status`), then draw each (state, reward terms, time, env steps) taken from `states` until
    None arrives; keep `cpu` (this process's CPU seconds since it was ready, its server's
    threads included) and `frames` up to date."""
    from simrl.viewer.server import ViewerError, WebViewer

    logging.getLogger("websockets").setLevel(logging.WARNING)
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # viser's banner: the parent prints the URL
            viewer = WebViewer(mj_model, worlds, interactive=False, **kwargs)
    except ViewerError as e:
        status.put(str(e))
        return
    status.put("ready")
    start = os.times()  # the drawing's CPU time, not the imports' and the server's start
    try:
        while True:
            item = states.get()
            if item is None:
                break
            state, terms, t, steps = item
            viewer.update(state, status=f"**training** · {steps} env steps · world {worlds[0]}'s reward terms")
            if terms:
                viewer.record_rewards(t, terms)
            frames.value = viewer.frames
            now = os.times()
            cpu.value = (now.user - start.user) + (now.system - start.system)
    finally:
        viewer.close()
