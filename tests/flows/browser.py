"""A headless Chromium driven over the DevTools protocol, for the UI tests.

Chromium is Debian's ``chromium`` (``.ci/run`` installs it); the protocol runs over the
``websockets`` client Prefect already depends on, so no driver library or browser
download is needed. A missing browser is a failure, not a skip: :func:`chromium_binary`
raises ``AssertionError`` naming how to install it.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

# Flags for a closed network: no background connections, no first-run or sync chatter.
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
)
CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_binary() -> str:
    """The Chromium executable: ``TRAINWISE_CHROMIUM`` if set, else the first of :data:`CANDIDATES`
    on PATH; fails if there is none."""
    explicit = os.environ.get("TRAINWISE_CHROMIUM")
    if explicit:
        assert Path(explicit).is_file(), f"TRAINWISE_CHROMIUM={explicit} is not a file"
        return explicit
    found = next(filter(None, map(shutil.which, CANDIDATES)), None)
    assert found, (f"no Chromium on PATH (looked for {', '.join(CANDIDATES)}); install it with "
                   "`apt-get install -y chromium` (.ci/run does)")
    return found


class Browser:
    """One headless Chromium with a fresh profile, and a DevTools session on its first tab."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout_s: float = 30.0) -> None:
        self._profile = tempfile.mkdtemp(prefix="trainwise-chromium-")
        self._proc = subprocess.Popen(
            [chromium_binary(), *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}", f"--window-size={width},{height}",
             "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        try:
            self._ws = self._connect(timeout_s)
        except BaseException:
            self._stop()
            raise
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _connect(self, timeout_s: float) -> Any:
        from websockets.sync.client import connect

        port_file = Path(self._profile) / "DevToolsActivePort"
        deadline = time.monotonic() + timeout_s
        while not port_file.is_file() or not port_file.read_text().strip():
            assert self._proc.poll() is None, f"Chromium exited with code {self._proc.returncode} at start-up"
            assert time.monotonic() < deadline, f"Chromium did not open its DevTools port within {timeout_s:.0f} s"
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=timeout_s) as response:
            pages = [t for t in json.load(response) if t.get("type") == "page"]
        return connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=timeout_s)

    def call(self, method: str, timeout_s: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one DevTools command and return its result (events in between are dropped)."""
        msg_id = next(self._ids)
        self._ws.send(json.dumps({"id": msg_id, "method": method, "params": params}))
        deadline = time.monotonic() + timeout_s
        while True:
            reply = json.loads(self._ws.recv(timeout=max(0.1, deadline - time.monotonic())))
            if reply.get("id") == msg_id:
                assert "error" not in reply, f"{method}: {reply['error']}"
                return reply.get("result", {})

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, f"{expression!r}: {result['exceptionDetails']}"
        return result["result"].get("value")

    def goto(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def wait_for(self, expression: str, timeout_s: float) -> Any:
        """Poll a JavaScript expression until it is truthy; its value, or ``None`` at the timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.25)
        return None

    def screenshot(self, path: Path, max_height: int = 4000) -> Path:
        """A PNG of the page's content, scrolled parts included (up to ``max_height`` pixels).

        Single-page apps scroll an inner element, not the document, so the window is made as
        tall as the tallest element for the capture, and put back after it."""
        size = self.evaluate("[window.innerWidth, Math.max(...Array.from(document.querySelectorAll('*'), e => e.scrollHeight))]")
        self.call("Emulation.setDeviceMetricsOverride", width=size[0], height=min(size[1], max_height),
                  deviceScaleFactor=1, mobile=False)
        try:
            time.sleep(0.5)  # let the page lay itself out at the new height
            shot = self.call("Page.captureScreenshot", format="png")
        finally:
            self.call("Emulation.clearDeviceMetricsOverride")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def _stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._profile, ignore_errors=True)

    def close(self) -> None:
        try:
            self._ws.close()
        finally:
            self._stop()

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
