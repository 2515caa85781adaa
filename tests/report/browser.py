"""Headless Chromium for the report tests: dump a page's DOM, take a screenshot.

The tests skip, saying so, where no chromium is installed (``make chromium`` installs
Debian's package where apt-get exists and we are root).  The browser only ever opens
local files; --no-sandbox is needed when the tests run as root (containers, CI).
"""
import shutil
import subprocess
import tempfile

import pytest

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_chromium() -> str | None:
    return next((p for p in map(shutil.which, CANDIDATES) if p), None)


def require_chromium() -> str:
    path = find_chromium()
    if path is None:
        pytest.skip("headless Chromium is not installed (Debian: `make chromium`, or apt-get install chromium); "
                    "the browser checks of the report are skipped")
    return path


def _run(args: list, timeout: float = 90) -> str:
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="kiln-chromium-") as profile:
        cmd = [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
               f"--user-data-dir={profile}", *args]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


def dump_dom(html_path, fragment: str = "") -> str:
    """The DOM after the page's scripts ran, as HTML text."""
    return _run(["--dump-dom", f"file://{html_path}{fragment}"])


def screenshot(html_path, png_path, width: int = 1300, height: int = 1800) -> None:
    _run(["--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={png_path}", f"file://{html_path}"])
