"""The browser viewer (scripts/play.py and scripts/train.py `viewer=web`): the scene of a few
worlds served by viser to a browser, updated live from the simulation, with controls for the
shown worlds (docs/GUIDE.md, "Watch it in a browser").

    scene   what is drawn: MuJoCo's default-visible geoms as meshes, poses and contacts by
            mj_forward on host copies of the shown worlds
    server  the viser server, its controls and the drawing
    live    the copies from the simulation, the live play loop and the training view
"""

from simrl.viewer.server import ViewerError, WebViewer, check_port

__all__ = ["ViewerError", "WebViewer", "check_port"]
