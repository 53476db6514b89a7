"""The documentation site builds with ``mkdocs build --strict`` and renders in a real browser.

The built site is served on 127.0.0.1 and opened in headless Chromium (Debian's
``chromium``; ``scripts/check`` installs it where it is missing). Each check
reads the DOM after the page's scripts ran, and each page leaves a screenshot
in ``build/screenshots/``.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

# Chromium, the docs site and the server are the subject here, not the interpreter:
# scripts/check runs these on its first Python only.
pytestmark = pytest.mark.once

ROOT = Path(__file__).resolve().parents[1]
MERMAID_JS = ROOT / "docs" / "assets" / "javascripts" / "mermaid.min.js"
SCREENSHOTS = ROOT / "build" / "screenshots"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built strictly (any warning fails the build)."""
    assert MERMAID_JS.is_file(), "docs need npm's mermaid.min.js: run bash scripts/check"
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        timeout=110,
    )
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.fixture(scope="module")
def base_url(site: Path) -> Iterator[str]:
    """The site served over HTTP on 127.0.0.1."""

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(site)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    assert found, "headless Chromium is missing: bash scripts/check installs Debian's chromium"
    return found


def _browse(url: str, screenshot: Path) -> str:
    """The page's DOM after its scripts ran, and a screenshot of it."""
    flags = [
        _chromium(),
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--hide-scrollbars",
        "--virtual-time-budget=15000",  # lets the page's scripts (Mermaid) finish first
        "--window-size=1280,1400",
    ]
    dom = subprocess.run(
        [*flags, "--dump-dom", url], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    screenshot.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [*flags, f"--screenshot={screenshot}", url], capture_output=True, timeout=60, check=True
    )
    assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return dom


def test_the_home_page_renders(base_url: str) -> None:
    """The home page shows its title, the navigation and the search box."""
    dom = _browse(f"{base_url}/", SCREENSHOTS / "home.png")
    assert "<h1" in dom
    assert "Give LLMs tools" in dom
    assert 'class="md-nav' in dom
    assert "A local model (local:)" in dom


def test_the_api_reference_is_generated_from_docstrings(base_url: str) -> None:
    """The API page holds the classes and functions, with their docstrings' text."""
    dom = _browse(f"{base_url}/api/toolfold/", SCREENSHOTS / "api.png")
    assert 'id="toolfold.Agent"' in dom
    assert 'id="toolfold.generate_text"' in dom
    assert "Run a model with tools until it answers" in dom  # generate_text's docstring


def test_a_mermaid_diagram_is_drawn(base_url: str) -> None:
    """Mermaid runs in the page (served locally, no CDN): its source block becomes a diagram."""
    dom = _browse(f"{base_url}/local-model/", SCREENSHOTS / "mermaid.png")
    assert '<div class="mermaid">' in dom  # Material swaps in the rendered diagram...
    assert '<pre class="mermaid"' not in dom  # ...for the source block it started with


def test_the_composition_diagrams_are_drawn(base_url: str) -> None:
    """The four `to_mermaid()` diagrams of the composition page render (none stays source)."""
    dom = _browse(f"{base_url}/composition/", SCREENSHOTS / "composition.png")
    assert dom.count('<div class="mermaid">') == 4
    assert '<pre class="mermaid"' not in dom
