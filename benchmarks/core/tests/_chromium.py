"""A minimal headless-Chromium driver over the DevTools protocol on ``--remote-debugging-pipe`` (stdlib only).

Chromium reads commands from file descriptor 3 and writes replies and events to
file descriptor 4, each message one JSON object ended by a NUL byte.  The page
is driven by events: :meth:`Page.open` returns once ``Page.loadEventFired``
arrives, and no call ever sleeps; every read waits on the pipe with a deadline.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--remote-debugging-pipe", "--hide-scrollbars",
         "--mute-audio", "--disable-extensions", "--disable-default-apps")


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``), None when none is installed."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def _pipe_fds(commands: int, replies: int) -> None:
    """In the child before exec: the command pipe on fd 3, the reply pipe on fd 4, both inherited.

    Both ends are first moved above 10 so that neither is overwritten by the other's move; every other
    descriptor of the parent is non-inheritable (Python's default) and closes at exec.
    """
    high = (fcntl.fcntl(commands, fcntl.F_DUPFD, 10), fcntl.fcntl(replies, fcntl.F_DUPFD, 10))
    for target, fd in zip((3, 4), high):
        os.dup2(fd, target, inheritable=True)
        os.close(fd)


class DevToolsError(RuntimeError):
    """Chromium answered a command with an error, closed the pipe, or did not answer in time."""


class Browser:
    """One headless Chromium with a fresh profile; a context manager that ends the process it started."""

    def __init__(self, binary: str, profile: Path, timeout: float = 60.0):
        self.timeout = timeout
        to_child_r, self._to_child = os.pipe()
        self._from_child, from_child_w = os.pipe()
        # the child sees the command pipe on fd 3 and the reply pipe on fd 4
        self.process = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=lambda: _pipe_fds(to_child_r, from_child_w),
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buffer = b""
        self._next_id = 0
        self.events: list[dict[str, Any]] = []

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.send("Browser.close")
        except (DevToolsError, OSError):
            pass
        try:
            self.process.wait(timeout=self.timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        for fd in (self._to_child, self._from_child):
            try:
                os.close(fd)
            except OSError:
                pass

    # ------------------------------------------------------------------ the pipe

    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise DevToolsError(f"Chromium did not answer within {self.timeout:g} s")
            ready, _, _ = select.select([self._from_child], [], [], left)
            if not ready:
                continue
            chunk = os.read(self._from_child, 1 << 20)
            if not chunk:
                raise DevToolsError(f"Chromium closed the DevTools pipe (exit status {self.process.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None) -> dict[str, Any]:
        """Send one command and return its result; events that arrive meanwhile are kept in ``events``."""
        self._next_id += 1
        ident = self._next_id
        command: dict[str, Any] = {"id": ident, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        os.write(self._to_child, json.dumps(command).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            message = self._read_message(deadline)
            if message.get("id") == ident:
                if "error" in message:
                    raise DevToolsError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def wait_for(self, method: str, session: str) -> dict[str, Any]:
        """The first event ``method`` of ``session`` not yet consumed (waiting for it on the pipe)."""
        deadline = time.monotonic() + self.timeout
        seen = 0
        while True:
            for index in range(seen, len(self.events)):
                event = self.events[index]
                if event.get("method") == method and event.get("sessionId") == session:
                    del self.events[index]
                    return event
            seen = len(self.events)
            message = self._read_message(deadline)
            if "method" in message:
                self.events.append(message)

    def page(self) -> "Page":
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        return Page(self, session)


class Page:
    """One tab: navigation, console errors, network requests, DOM queries and a full-page screenshot."""

    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def open(self, url: str) -> None:
        """Navigate to ``url`` and return once its load event fired (images included)."""
        result = self.send("Page.navigate", {"url": url})
        if result.get("errorText"):
            raise DevToolsError(f"navigation to {url} failed: {result['errorText']}")
        self.browser.wait_for("Page.loadEventFired", self.session)

    def _events(self, *methods: str) -> list[dict[str, Any]]:
        return [e for e in self.browser.events if e.get("sessionId") == self.session and e.get("method") in methods]

    def console_errors(self) -> list[str]:
        """Console errors, uncaught exceptions and error log entries (a refused resource load among them)."""
        out = []
        for event in self._events("Runtime.consoleAPICalled", "Runtime.exceptionThrown", "Log.entryAdded"):
            params = event.get("params", {})
            if event["method"] == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif event["method"] == "Runtime.exceptionThrown":
                out.append(str(params.get("exceptionDetails", {}).get("text")))
            elif event["method"] == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
                out.append(f"{params['entry'].get('source')}: {params['entry'].get('text')} {params['entry'].get('url', '')}")
        return out

    def requests(self) -> list[str]:
        """The URL of every request the page sent (its own navigation included)."""
        return [e["params"]["request"]["url"] for e in self._events("Network.requestWillBeSent")]

    def evaluate(self, expression: str) -> Any:
        result = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise DevToolsError(f"{expression[:60]}: {result['exceptionDetails'].get('text')}")
        return result["result"].get("value")

    def screenshot(self, path: Path) -> Path:
        """A PNG of the whole page (beyond the viewport)."""
        size = self.send("Page.getLayoutMetrics")["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": size["width"], "height": size["height"], "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})["data"]
        path.write_bytes(base64.b64decode(data))
        return path
