"""The documentation site builds with ``mkdocs build --strict`` and its pages render: headless
Chromium opens the home page and the LangChain page, takes a screenshot of each, and the rendered
page shows its title and its first code block. Skips, saying why, where Chromium or MkDocs is
not installed (``.ci/run`` installs Debian's ``chromium`` when it can)."""

from __future__ import annotations

import contextlib
import html
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import zlib
from pathlib import Path

import pytest

from .docs_snippets import FENCE, ROOT

PAGES = [
    # (the page, where the site has it, its <title>, its heading)
    ("index.md", "index.html", "session-memory", "Getting started"),
    ("langchain.md", "langchain/index.html", "LangChain - session-memory", "LangChain"),
]


def _chromium() -> str:
    for name in (os.environ.get("SESSIONS_CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        found = name and shutil.which(name)
        if found:
            return found
    pytest.skip("no Chromium installed (apt-get install chromium, or set SESSIONS_CHROMIUM to a browser)")


@pytest.fixture(scope="module")
def chromium() -> str:
    return _chromium()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    pytest.importorskip("mkdocs", reason="MkDocs is not installed (pip install -e '.[docs]')")
    target = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(target)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr
    return target


BROWSER_SECONDS = 120


def _browser(chromium: str, profile: Path, *arguments: str) -> subprocess.CompletedProcess[str]:
    """Chromium run headless to its end, in a process group of its own that is killed whole when
    it ends or after ``BROWSER_SECONDS``, its output in files: a renderer or zygote that outlives
    the browser can neither hold a pipe open nor keep running (``subprocess.run`` with pipes and a
    timeout waits for the pipes after the kill, forever if a child still has them). Tried twice;
    a browser that hangs both times skips the test (the site's build is checked apart from it)."""
    command = [
        chromium,
        "--headless",
        "--no-sandbox",  # CI runs as root
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--hide-scrollbars",
        f"--user-data-dir={profile}",
        "--window-size=1280,1600",
        *arguments,
    ]
    for _attempt in range(2):
        with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
            process = subprocess.Popen(command, stdout=out, stderr=err, text=True, start_new_session=True)
            try:
                process.wait(timeout=BROWSER_SECONDS)
            except subprocess.TimeoutExpired:
                continue
            finally:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
                process.wait()
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(command, process.returncode, out.read(), err.read())
    pytest.skip(f"Chromium did not finish within {BROWSER_SECONDS} s, twice: a browser problem, not the site's")


def _png_pixels(path: Path) -> tuple[int, int, bytes]:
    """Width, height and the decompressed scanlines of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG file"
    width, height = struct.unpack(">II", data[16:24])
    chunks, offset = [], 8
    while offset < len(data):
        (length,) = struct.unpack(">I", data[offset : offset + 4])
        kind = data[offset + 4 : offset + 8]
        if kind == b"IDAT":
            chunks.append(data[offset + 8 : offset + 8 + length])
        offset += 12 + length
    return width, height, zlib.decompress(b"".join(chunks))


def _first_code_line(page: str) -> str:
    source = (ROOT / "docs" / page).read_text(encoding="utf-8")
    match = FENCE.search(source)
    assert match is not None, f"docs/{page} has no code block"
    return match.group(2).splitlines()[0].split("  #", 1)[0].strip()


@pytest.mark.parametrize(("page", "built", "title", "heading"), PAGES, ids=[page for page, *_ in PAGES])
def test_page_renders(page, built, title, heading, chromium, site, tmp_path):
    url = (site / built).as_uri()
    shot = tmp_path / "page.png"
    taken = _browser(chromium, tmp_path / "profile", f"--screenshot={shot}", url)
    assert shot.exists(), taken.stderr
    width, height, pixels = _png_pixels(shot)
    assert (width, height) == (1280, 1600)
    assert len(set(pixels[: 1280 * 4 * 400])) > 32, "the screenshot is blank"

    dom = _browser(chromium, tmp_path / "profile", "--dump-dom", url).stdout
    assert f"<title>{title}</title>" in dom
    shown = re.search(r"<h1[^>]*>(.*?)(<a class=\"headerlink\".*?)?</h1>", dom, flags=re.DOTALL)
    assert shown is not None and re.sub(r"<[^>]+>", "", shown.group(1)).strip() == heading
    first_block = re.search(r"<pre[^>]*>(.*?)</pre>", dom, flags=re.DOTALL)
    assert first_block is not None, "no code block rendered"
    text = html.unescape(re.sub(r"<[^>]+>", "", first_block.group(1)))
    assert text.lstrip().startswith(_first_code_line(page))
