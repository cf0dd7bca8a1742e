"""Every fenced Python block of README.md and docs/ runs alone, as written, offline: each in an
empty folder of its own and a fresh namespace (in a fresh interpreter where the block is marked
``<!-- docs-test: subprocess -->``), so a reader can paste any one of them and see what its
prose says (the blocks assert what they claim)."""

from __future__ import annotations

import linecache
import os
import re
import subprocess
import sys

import pytest

from .docs_snippets import ROOT, snippets

PYTHON = snippets("python")


def test_the_documentation_has_its_snippets():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert readme.count("```python\n") == sum(1 for s in PYTHON if s.path.name == "README.md") >= 2
    assert len(PYTHON) >= 24


@pytest.fixture
def snippet_env(tmp_path, monkeypatch):
    """An empty folder, no API key, and a PostgreSQL URL in ``DATABASE_URL`` for the blocks that use one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    return tmp_path


def _postgres_url(code: str) -> str | None:
    if "DATABASE_URL" not in code:
        return None
    from .postgres import postgres_url, require_postgres

    require_postgres()
    return postgres_url()


@pytest.mark.parametrize("snippet", PYTHON, ids=[s.name for s in PYTHON])
def test_snippet_runs_alone(snippet, snippet_env, monkeypatch):
    url = _postgres_url(snippet.code)
    if url is not None:
        monkeypatch.setenv("DATABASE_URL", url)
    if snippet.subprocess:
        result = subprocess.run(
            [sys.executable, "-c", snippet.code], cwd=snippet_env, capture_output=True, text=True, timeout=300
        )
        assert result.returncode == 0, f"{snippet.name}\n{result.stderr}"
        return
    linecache.cache[snippet.name] = (len(snippet.code), None, snippet.code.splitlines(True), snippet.name)
    exec(compile(snippet.code, snippet.name, "exec"), {"__name__": "__docs__"})


def _cli_lines() -> list[str]:
    page = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    block = re.search(r"```bash\n(.*?)```", page, flags=re.DOTALL)
    assert block is not None
    lines = [line.split("  #", 1)[0].strip() for line in block.group(1).splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_cli_page_examples_run(tmp_path):
    """Every command of the CLI page's first block, on a store holding ``user-42`` and an item
    (the PostgreSQL line runs against a SQLite file instead: the URL is the only difference)."""
    from sessions_core import Session
    from sessions_core.items import Items

    pytest.importorskip("click")
    pytest.importorskip("rich")
    with Session(tmp_path / "chat.db").for_session("user-42").with_context("memory") as session:
        session.append_message(
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Lisbon weather in May?"}]}
        )
        session.append_message(
            {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "Warm and sunny."}]}
        )
        session.replace_context_block("memory", "Trip to Lisbon")
        Items(session.store).put(("memories", "sam"), "drink", {"content": "Sam drinks green tea"})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "sessions"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m sessions_core "$@"\n')
    launcher.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    for line in _cli_lines():
        line = re.sub(r"--store postgresql://\S+ --schema \S+", "--store other.db", line)
        if line.startswith("export "):
            name, value = line.removeprefix("export ").split("=", 1)
            env[name] = value
            continue
        result = subprocess.run(["sh", "-c", line], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        assert result.returncode == 0, (line, result.stderr)
