"""Shared by the docs tests: build the site once per session (strict), serve it on localhost, and
drive Debian's chromium headless with the network closed."""
from __future__ import annotations

import contextlib
import functools
import http.server
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def mkdocs_build(site_dir: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
                          cwd=ROOT, capture_output=True, text=True, env={"NO_MKDOCS_2_WARNING": "1",
                                                                          **__import__("os").environ})


@functools.lru_cache(maxsize=1)
def built_site() -> Path:
    """The site built from the working tree, once per test session; fails loudly if the build does."""
    site = Path(tempfile.mkdtemp(prefix="reimpl-site-")) / "site"
    r = mkdocs_build(site)
    if r.returncode != 0:
        raise AssertionError(f"mkdocs build --strict failed:\n{r.stdout}\n{r.stderr}")
    return site


@contextlib.contextmanager
def serve(directory: Path):
    """Serve `directory` on 127.0.0.1 (a free port) in a thread; yields the base URL."""
    handler = functools.partial(_QuietHandler, directory=str(directory))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as srv:
        t = threading.Thread(target=srv.serve_forever, daemon=True)
        t.start()
        try:
            yield f"http://127.0.0.1:{srv.server_address[1]}"
        finally:
            srv.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass
