"""Headless Chromium for the viewer's tests, driven over the DevTools protocol with the
`websockets` client viser already depends on: open a page, take screenshots.

Debian's package (`apt-get install chromium`, which .ci/run installs) at /usr/bin/chromium;
`chromium_path()` is None where there is none, and the tests skip saying how to install it.
Started as the workplace's notes say: headless, no sandbox (root), software WebGL
(SwiftShader), and no background networking (the machine has no network to reach).
"""

import base64
import io
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request

import numpy as np

INSTALL_HINT = "headless Chromium is not installed (Debian: apt-get install chromium; .ci/run does it)"


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class Browser:
    """One headless Chromium with one page of `width` x `height` CSS pixels."""

    def __init__(self, width: int = 1000, height: int = 700, timeout: float = 30.0):
        self.profile = tempfile.mkdtemp(prefix="simrl-chromium-")
        self.process = subprocess.Popen(
            [chromium_path(), "--headless", "--no-sandbox", "--disable-gpu", "--use-angle=swiftshader",
             "--enable-unsafe-swiftshader", "--disable-quic", "--no-first-run", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--remote-debugging-port=0",
             f"--user-data-dir={self.profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while not (os.path.exists(port_file) and open(port_file).read().strip()):
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.close()
                raise RuntimeError("headless Chromium did not start")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout))
        page = next(t for t in targets if t["type"] == "page")
        from websockets.sync.client import connect

        self.ws = connect(page["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout)
        self.next_id = 0
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                  mobile=False)

    def call(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv(timeout=60))
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def open(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def screenshot(self, path=None) -> np.ndarray:
        """The page as an RGB array [height, width, 3] (and a PNG at `path`, if given)."""
        from PIL import Image

        png = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        if path is not None:
            with open(path, "wb") as f:
                f.write(png)
        return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))

    def close(self) -> None:
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
        shutil.rmtree(self.profile, ignore_errors=True)
