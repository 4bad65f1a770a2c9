"""A page opened in Debian's headless Chromium at a phone's or a desktop's width, driven over the
DevTools protocol on a pipe (`--remote-debugging-pipe`: JSON messages ended by NUL on file
descriptors 3 and 4), with nothing to install beyond Chromium itself. One Chromium serves every
render of a process, each page in a tab of its own.

The window cannot be narrower than 500 px in headless Chromium, so the width is set by device
emulation (`Emulation.setDeviceMetricsOverride`, `mobile` true below 500 px): as on a phone, a page
without a viewport tag is then laid out 980 px wide, and `innerWidth` shows it.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PHONE_WIDTH_PX = 390  # an iPhone 12-15's CSS width
DESKTOP_WIDTH_PX = 1280
TIMEOUT_S = 60.0


def browser() -> str:
    """Debian's Chromium (`.ci/run` and the README's test command install it when missing)."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise AssertionError("no Chromium on PATH: install Debian's package (apt-get install -y chromium)")


@dataclass
class Rendered:
    """What the page showed at one width: document width against the viewport's, the console's
    messages and uncaught errors, and a full-page PNG screenshot."""

    scroll_width_px: int
    inner_width_px: int
    console: list[str] = field(default_factory=list)
    screenshot_png: bytes = b""


class _Pipe:
    def __init__(self, process: subprocess.Popen[bytes], to_browser: int, from_browser: int) -> None:
        self.process, self.to_browser, self.from_browser = process, to_browser, from_browser
        self.next_id, self.buffer = 0, b""
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            if time.monotonic() > deadline:
                raise AssertionError("Chromium did not answer in time")
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise AssertionError(f"Chromium closed the pipe (exit {self.process.poll()})")
            self.buffer += chunk
        message, self.buffer = self.buffer.split(b"\0", 1)
        return dict(json.loads(message))

    def call(self, method: str, session: str | None = None, **params: Any) -> dict[str, Any]:
        """Send one command; keep the events that arrive before its answer; return its result."""
        self.next_id += 1
        message: dict[str, Any] = {"id": self.next_id, "method": method, "params": params}
        if session is not None:
            message["sessionId"] = session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.next_id:
                if "error" in reply:
                    raise AssertionError(f"{method}: {reply['error']}")
                return dict(reply.get("result", {}))
            self.events.append(reply)

    def wait_for(self, method: str, session: str) -> None:
        """Read until the event `method` of `session` has arrived."""
        deadline = time.monotonic() + TIMEOUT_S
        while not any(e.get("method") == method and e.get("sessionId") == session for e in self.events):
            self.events.append(self._read(deadline))


def _console(events: list[dict[str, Any]]) -> list[str]:
    out = []
    for event in events:
        params = event.get("params", {})
        if event.get("method") == "Runtime.consoleAPICalled":
            out.append(" ".join(str(arg.get("value", arg.get("description", ""))) for arg in params.get("args", [])))
        elif event.get("method") == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            out.append(str(details.get("exception", {}).get("description", details.get("text", ""))))
        elif event.get("method") == "Log.entryAdded":
            out.append(str(params.get("entry", {}).get("text", "")))
    return out


#: the process's Chromium (`_browser`): started on the first render, closed when the process exits
_BROWSER: _Pipe | None = None


def _launch() -> tuple[_Pipe, tempfile.TemporaryDirectory[str]]:
    """Chromium on a fresh profile, driven over its DevTools pipe."""
    chrome_reads, we_write = os.pipe()
    we_read, chrome_writes = os.pipe()
    # Chromium reads commands on fd 3 and writes answers on fd 4; dup2 in the child puts them there
    fds = {3: chrome_reads, 4: chrome_writes}

    def child_fds() -> None:
        copies = {target: os.dup(source) for target, source in fds.items()}  # a source may sit on 3 or 4
        for target, copy in copies.items():
            os.dup2(copy, target)

    profile = tempfile.TemporaryDirectory(prefix="chromium-profile-")
    process = subprocess.Popen(
        [
            browser(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            "--remote-debugging-pipe",
            f"--user-data-dir={profile.name}",
            "about:blank",
        ],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        pass_fds=(3, 4),
        preexec_fn=child_fds,
    )
    os.close(chrome_reads)
    os.close(chrome_writes)
    return _Pipe(process, we_write, we_read), profile


def _browser() -> _Pipe:
    """The process's Chromium, started when first asked for (or again if it died): a start costs
    about 0.7 s, a page in a new tab of a running one about 0.1 s."""
    global _BROWSER
    if _BROWSER is None or _BROWSER.process.poll() is not None:
        pipe, profile = _launch()
        atexit.register(_close, pipe, profile)
        _BROWSER = pipe
    return _BROWSER


def _close(pipe: _Pipe, profile: tempfile.TemporaryDirectory[str]) -> None:
    try:
        if pipe.process.poll() is None:
            pipe.call("Browser.close")
            pipe.process.wait(timeout=TIMEOUT_S)
    except (AssertionError, OSError, subprocess.TimeoutExpired):
        pass
    finally:
        if pipe.process.poll() is None:
            pipe.process.kill()
            pipe.process.wait()
        os.close(pipe.to_browser)
        os.close(pipe.from_browser)
        profile.cleanup()


def render(page: Path, width_px: int, height_px: int = 844) -> Rendered:
    """Open `page` in a new tab at `width_px` (a phone below 500 px: touch, mobile viewport), wait
    for its load event, and measure it; the console is the tab's own."""
    assert page.is_file(), page  # Chromium would show its own error page, which fits any width
    pipe = _browser()
    pipe.events.clear()
    target = pipe.call("Target.createTarget", url="about:blank")["targetId"]
    try:
        session = pipe.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        for domain in ("Page", "Runtime", "Log"):
            pipe.call(f"{domain}.enable", session)
        pipe.call(
            "Emulation.setDeviceMetricsOverride",
            session,
            width=width_px,
            height=height_px,
            deviceScaleFactor=1,
            mobile=width_px < 500,
        )
        pipe.call("Page.navigate", session, url=page.resolve().as_uri())
        pipe.wait_for("Page.loadEventFired", session)
        measured = pipe.call(
            "Runtime.evaluate",
            session,
            expression="[document.documentElement.scrollWidth, window.innerWidth]",
            returnByValue=True,
        )["result"]["value"]
        shot = pipe.call("Page.captureScreenshot", session, format="png", captureBeyondViewport=True)["data"]
    finally:
        pipe.call("Target.closeTarget", targetId=target)
    console = _console([event for event in pipe.events if event.get("sessionId") == session])
    return Rendered(int(measured[0]), int(measured[1]), console, base64.b64decode(shot))
