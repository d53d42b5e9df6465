"""The browser viewer's server: viser (a well-kept library for 3D scenes in the browser over a
websocket, which mjlab's `--viewer viser` also uses; its wheel carries the built web client, so
nothing is fetched at run time) serves the scene and the controls.

The page steers the shown worlds and nothing else: the GUI has only the controls made here
(pause, step, reset, world, speed, command, contact forces), viser's share button and its
share-tunnel request (which would open a public tunnel) are removed, no upload or file widget
is made, and the server binds to `host` (127.0.0.1 unless the user says otherwise). A port in
use is an error naming it (viser itself would take the next free one).
"""

import contextlib
import errno
import io
import socket
import threading
import time
from collections import deque

import numpy as np

from simrl.viewer.scene import HostWorlds, drawn_geoms, geom_quat, world_spacing

#: the reward plot's window, policy steps
PLOT_STEPS = 250
#: colours of the reward plot's series (cycled)
PLOT_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
               "#bcbd22", "#17becf")


class ViewerError(RuntimeError):
    """The viewer cannot start (a port in use, viser missing)."""


def check_port(host: str, port: int) -> None:
    """Raise ViewerError naming the port when (host, port) cannot be bound."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        # as the server binds (asyncio sets SO_REUSEADDR): a listening socket still refuses the
        # bind, a closed server's connections in TIME_WAIT do not
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as e:
            why = "is in use" if e.errno == errno.EADDRINUSE else f"cannot be bound ({e.strerror})"
            raise ViewerError(f"viewer: port {port} on {host} {why}; choose another with viewer_port=") from None


class Controls:
    """What the page set: read by the simulation loop, written by viser's callback threads."""

    def __init__(self):
        self.lock = threading.Lock()
        self.paused = False
        self.steps_requested = 0
        self.reset_requested = False
        self.speed = 1.0
        self.world: int | None = None  # None: every shown world side by side
        self.override_command = False
        self.command = np.zeros(3)
        self.contact_forces = True
        self.follow = False  # the camera keeps its offset from the shown worlds' root bodies

    def take_step(self) -> bool:
        """Whether the loop may advance one step now (running, or a requested single step)."""
        with self.lock:
            if not self.paused:
                return True
            if self.steps_requested > 0:
                self.steps_requested -= 1
                return True
            return False

    def take_reset(self) -> bool:
        with self.lock:
            requested, self.reset_requested = self.reset_requested, False
            return requested


class WebViewer:
    """The scene of an environment's shown worlds (`worlds`, indices into its worlds) in a
    browser. `update(state)` draws a state copied from the simulation (simrl.viewer.live);
    `record_rewards(t, terms)` feeds the reward plot. `interactive` adds the play controls
    (pause, step, reset, speed, command); training shows the worlds only."""

    def __init__(self, mj_model, worlds: list[int], *, host: str = "127.0.0.1", port: int = 8080,
                 title: str = "simrl", interactive: bool = True, command: dict | None = None,
                 side_by_side: bool = True, reward_terms: list[str] | None = None):
        try:
            import viser
            from viser import _messages
        except ImportError as e:  # a core dependency: only a broken install gets here
            raise ViewerError(f"viewer=web needs viser (pip install viser): {e}") from None
        check_port(host, port)
        self.model = mj_model
        self.worlds = list(worlds)
        self.controls = Controls()
        self.host_worlds = HostWorlds(mj_model, len(self.worlds))
        self.server = viser.ViserServer(host=host, port=port, label=title, verbose=False)
        if self.server.get_port() != port:  # taken between the check and viser's bind
            self.server.stop()
            raise ViewerError(f"viewer: port {port} on {host} is in use; choose another with viewer_port=")
        # the page steers the worlds and nothing else: no public share tunnel
        self.server._websock_server.unregister_handler(_messages.ShareUrlRequest)
        self.server.gui.configure_theme(show_share_button=False, control_width="medium", dark_mode=False)
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"
        self._geoms = drawn_geoms(mj_model)
        self.spacing = world_spacing(mj_model) if side_by_side else 0.0
        self._moving = np.array([g.geom for g in self._geoms if g.moving], dtype=int)
        # the body the camera follows: the first body with a free joint (a floating base)
        free = [int(mj_model.jnt_bodyid[j]) for j in range(mj_model.njnt)
                if int(mj_model.jnt_type[j]) == 0]  # mjJNT_FREE
        self._free_root = free[0] if free else None
        self._followed = None
        self._handles = {}
        self._build_scene()
        self._build_gui(interactive, command, reward_terms or [])
        self._contact_handle = None
        self._last_state = None
        self.frames = 0

    # ------------------------------------------------------------------------------ scene
    def offsets(self, shown: list[int]) -> np.ndarray:
        """Where each shown slot's world is drawn: side by side along y, or at its own place."""
        out = np.zeros((len(shown), 3))
        out[:, 1] = np.asarray(shown, dtype=float) * self.spacing
        return out

    def _shown_slots(self) -> list[int]:
        world = self.controls.world
        return list(range(len(self.worlds))) if world is None else [world]

    def _build_scene(self) -> None:
        scene = self.server.scene
        scene.set_up_direction("+z")
        # viser's default image-based lighting washes dark colours out to white; dimmed, the
        # geoms keep the colours MuJoCo gives them
        scene.configure_environment_map("warehouse", environment_intensity=0.35)
        n = len(self.worlds)
        offsets = self.offsets(list(range(n)))
        ident = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
        d = self.host_worlds.data[0]
        for g in self._geoms:
            name = f"/geoms/{g.name}"
            if g.plane:  # one ground for every world
                q = geom_quat(d, np.array([g.geom]))[0]
                scene.add_mesh_simple(name, g.vertices, g.faces, color=g.color, opacity=g.opacity,
                                      position=d.geom_xpos[g.geom], wxyz=q, side="double", cast_shadow=False)
                continue
            if not g.moving and self.spacing == 0.0:  # terrain and fixed parts: drawn once
                q = geom_quat(d, np.array([g.geom]))[0]
                scene.add_mesh_simple(name, g.vertices, g.faces, color=g.color, opacity=g.opacity,
                                      position=d.geom_xpos[g.geom], wxyz=q)
                continue
            # one instance per shown world (batched: one draw call for all of them)
            positions = np.asarray(d.geom_xpos[g.geom])[None] + offsets
            quats = ident if g.moving else np.tile(geom_quat(d, np.array([g.geom])), (n, 1))
            self._handles[g.geom] = scene.add_batched_meshes_simple(
                name, g.vertices, g.faces, batched_wxyzs=quats, batched_positions=positions,
                batched_colors=g.color, opacity=g.opacity if g.opacity < 1 else None, lod="off")
        # 0.5 m cells, 2.5 m sections, everywhere: the eye reads speed and distance from it (not
        # over a terrain, whose height the grid would cut through)
        if self.spacing > 0:
            scene.add_grid("/grid", cell_size=0.5, section_size=2.5, plane="xy", infinite_grid=True,
                           fade_distance=60.0, position=(0.0, 0.0, 0.005))
        # looking at the row of worlds from the front left, from far enough to see them all
        centre = np.array([0.0, 0.5 * self.spacing * (n - 1), 0.3])
        distance = max(2.0, 0.85 * self.spacing * n + 1.2)
        #: the camera's place relative to the point it looks at, for a page that opens
        self._view_offset = distance * np.array([0.55, -0.7, 0.45])
        if self.spacing == 0.0:  # over a terrain: higher and farther, above the walls of pits and steps
            self._view_offset = np.array([1.5, -1.8, 1.9])
        self.server.initial_camera.look_at = tuple(centre)
        self.server.initial_camera.position = tuple(centre + self._view_offset)

        self._initial_at = None  # where the initial camera (a page that opens) looks, when following

    # -------------------------------------------------------------------------------- GUI
    def _build_gui(self, interactive: bool, command: dict | None, reward_terms: list[str]) -> None:
        gui, c = self.server.gui, self.controls
        self.status = gui.add_markdown("starting")
        choices = ("all", *[f"world {w}" for w in self.worlds])
        world = gui.add_dropdown("World", choices, initial_value="all" if len(self.worlds) > 1 else choices[1])
        c.world = None if len(self.worlds) > 1 else 0

        @world.on_update
        def _(_event) -> None:
            c.world = None if world.value == "all" else choices.index(world.value) - 1
            self._hide_others()

        forces = gui.add_checkbox("Contact forces", initial_value=True)
        follow = gui.add_checkbox("Follow", initial_value=self._free_root is not None,
                                  disabled=self._free_root is None)

        @follow.on_update
        def _(_event) -> None:
            c.follow = bool(follow.value)

        c.follow = bool(follow.value)

        @forces.on_update
        def _(_event) -> None:
            c.contact_forces = bool(forces.value)

        if interactive:
            with gui.add_folder("Simulation"):
                paused = gui.add_checkbox("Pause", initial_value=False)
                step = gui.add_button("Step")
                reset = gui.add_button("Reset")
                speed = gui.add_slider("Speed (x real time)", min=0.1, max=4.0, step=0.1, initial_value=1.0)

            @paused.on_update
            def _(_event) -> None:
                with c.lock:
                    c.paused = bool(paused.value)

            @step.on_click
            def _(_event) -> None:
                with c.lock:
                    c.steps_requested += 1

            @reset.on_click
            def _(_event) -> None:
                with c.lock:
                    c.reset_requested = True

            @speed.on_update
            def _(_event) -> None:
                c.speed = float(speed.value)

        if interactive and command is not None:
            self._command_gui(command)
        self._terms = list(reward_terms)
        self._plot = None
        if self._terms:
            self._history_t = deque(maxlen=PLOT_STEPS)
            self._history = {k: deque(maxlen=PLOT_STEPS) for k in self._terms}
            series = ({"label": "t (s)"}, *({"label": k, "stroke": PLOT_COLORS[i % len(PLOT_COLORS)], "width": 1.5}
                                          for i, k in enumerate(self._terms)))
            empty = tuple(np.zeros(1) for _ in range(len(self._terms) + 1))
            with gui.add_folder("Reward terms (weighted, per step)"):
                self._plot = gui.add_uplot(empty, series, aspect=1.2)
            self._plot_time = 0.0

    def _command_gui(self, command: dict) -> None:
        """Sliders for the velocity command of the shown worlds: `command` has `ranges` [3, 2]
        (vx, vy, yaw rate) and `heading` (the yaw slider sets a target heading instead)."""
        gui, c = self.server.gui, self.controls
        ranges = np.asarray(command["ranges"], dtype=float)
        labels = ["vx (m/s)", "vy (m/s)", "heading (rad)" if command.get("heading") else "yaw rate (rad/s)"]
        if command.get("heading"):
            ranges[2] = (-np.pi, np.pi)
        with gui.add_folder("Command"):
            override = gui.add_checkbox("Steer (override the task's command)", initial_value=False)
            sliders = []
            for k in range(3):
                lo, hi = float(ranges[k, 0]), float(ranges[k, 1])
                if hi <= lo:
                    lo, hi = lo - 1.0, hi + 1.0
                sliders.append(gui.add_slider(labels[k], min=lo, max=hi, step=(hi - lo) / 100,
                                              initial_value=float(np.clip(0.0, lo, hi))))

        @override.on_update
        def _(_event) -> None:
            with c.lock:
                c.override_command = bool(override.value)

        for k, slider in enumerate(sliders):
            def changed(_event, k=k, slider=slider) -> None:
                with c.lock:
                    c.command[k] = float(slider.value)
            slider.on_update(changed)

    def _hide_others(self) -> None:
        """Show the chosen world alone, or every shown world: redraw the last state (batched
        meshes get the instances of the shown worlds only)."""
        if self._last_state is not None:
            self.update(self._last_state)

    @property
    def plots_rewards(self) -> bool:
        """Whether the page has a reward plot (the env has reward terms)."""
        return self._plot is not None

    # ---------------------------------------------------------------------------- updates
    def update(self, state: dict[str, np.ndarray], status: str | None = None) -> None:
        """Draw the shown worlds in `state` (STATE_FIELDS -> [len(worlds), ...] arrays copied from
        the simulation): every moving geom's pose, the contact-force arrows, the status line."""
        self._last_state = state
        slots = self._shown_slots()
        offsets = self.offsets(slots) if self.controls.world is None else np.zeros((1, 3))
        positions = np.zeros((len(self._moving), len(slots), 3))
        quats = np.zeros((len(self._moving), len(slots), 4))
        arrows = []
        for j, i in enumerate(slots):
            d = self.host_worlds.set(i, {k: v[i] for k, v in state.items()})
            positions[:, j] = d.geom_xpos[self._moving] + offsets[j]
            quats[:, j] = geom_quat(d, self._moving)
            if self.controls.contact_forces and d.ncon:
                pos, force = self.host_worlds.contacts(i)
                arrows.append((pos + offsets[j], force))
        if self.controls.follow and self._free_root is not None:
            # worlds side by side: their middle; worlds at their own places (terrain): the first shown
            roots = [self.host_worlds.data[i].xpos[self._free_root] + offsets[j] for j, i in enumerate(slots)]
            self._follow(np.mean(roots, axis=0) if self.spacing > 0 else roots[0])
        with self.server.atomic():
            for k, g in enumerate(self._moving):
                handle = self._handles[g]
                handle.batched_positions = positions[k]
                handle.batched_wxyzs = quats[k]
            for g, handle in self._handles.items():  # fixed parts drawn beside each world
                if g not in set(self._moving.tolist()) and len(handle.batched_positions) != len(slots):
                    d = self.host_worlds.data[0]
                    handle.batched_positions = np.asarray(d.geom_xpos[g])[None] + offsets
                    handle.batched_wxyzs = np.tile(geom_quat(d, np.array([g])), (len(slots), 1))
            self._draw_contacts(arrows)
            if status is not None:
                self.status.content = status
        self.frames += 1

    def _follow(self, target: np.ndarray) -> None:
        """Keep every page's camera at the default offset from the followed point, looking at it
        (horizontally only, so that the view does not bob with the gait); a page that opens
        starts there too (viser's initial camera, moved when the point has gone 0.25 m). To
        orbit and zoom freely, untick Follow: the camera then stays where it is."""
        target = np.array([target[0], target[1], 0.0])
        look = target + np.array([0.0, 0.0, 0.3])
        if self._initial_at is None or np.linalg.norm(target - self._initial_at) > 0.25:
            self.server.initial_camera.position = tuple(look + self._view_offset)
            self.server.initial_camera.look_at = tuple(look)
            self._initial_at = target
        if self._followed is None or np.linalg.norm(target - self._followed) > 0.005:
            for client in self.server.get_clients().values():
                with client.atomic():  # the position first: viser keeps the view's direction then
                    client.camera.position = look + self._view_offset
                    client.camera.look_at = look
            self._followed = target

    def _draw_contacts(self, arrows: list) -> None:
        """An arrow from each contact point along the force on its geom2 (mj_contactForce's normal
        points from geom1 to geom2: a foot's ground reaction points up), scaled so that the
        model's weight is 0.5 m long."""
        pos = np.concatenate([a[0] for a in arrows]) if arrows else np.zeros((0, 3))
        force = np.concatenate([a[1] for a in arrows]) if arrows else np.zeros((0, 3))
        keep = np.linalg.norm(force, axis=1) > 1e-6
        if not keep.any():
            if self._contact_handle is not None:
                self._contact_handle.visible = False
            return
        weight = max(float(np.sum(self.model.body_mass)) * 9.81, 1e-3)
        points = np.stack([pos[keep], pos[keep] + force[keep] * (0.5 / weight)], axis=1)  # [n, 2, 3]
        self._contact_handle = self.server.scene.add_arrows("/contacts", points=points.astype(np.float32),
                                                            colors=(230, 40, 40), shaft_radius=0.006,
                                                            head_radius=0.015, head_length=0.03)

    def record_rewards(self, t: float, terms: dict[str, float]) -> None:
        """Add one step's weighted reward terms of the plotted world; redraw at most 5 times a s."""
        if self._plot is None:
            return
        self._history_t.append(t)
        for k in self._terms:
            self._history[k].append(float(terms.get(k, np.nan)))
        now = time.monotonic()
        if now - self._plot_time < 0.2:
            return
        self._plot_time = now
        self._plot.data = (np.asarray(self._history_t), *(np.asarray(self._history[k]) for k in self._terms))

    def close(self) -> None:
        with contextlib.redirect_stdout(io.StringIO()):  # viser's "Server stopped"
            self.server.stop()
            time.sleep(0.05)
