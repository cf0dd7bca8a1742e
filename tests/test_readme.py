"""Every Python snippet of the README runs as written, offline: the snippets of one section in
order, in one namespace (a later snippet may use what an earlier one of its section defined),
each section in a fresh folder."""

import os
import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
SECTIONS = [
    (title.strip(), re.findall(r"```python\n(.*?)```", body, flags=re.DOTALL))
    for title, body in re.findall(r"^## (.+?)\n(.*?)(?=^## |\Z)", README, flags=re.DOTALL | re.MULTILINE)
]
SECTIONS = [(title, blocks) for title, blocks in SECTIONS if blocks]


def test_every_snippet_is_in_a_tested_section():
    assert sum(len(blocks) for _, blocks in SECTIONS) == README.count("```python\n") >= 14


@pytest.mark.parametrize(("title", "blocks"), SECTIONS, ids=[title for title, _ in SECTIONS])
def test_readme_section_runs(title, blocks, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    if "DATABASE_URL" not in os.environ and any("psycopg" in block for block in blocks):
        from .postgres import postgres_url, require_postgres

        require_postgres()
        monkeypatch.setenv("DATABASE_URL", postgres_url())
    namespace = {"__name__": "readme"}
    for number, code in enumerate(blocks, 1):
        exec(compile(code, f"README.md ({title}, snippet {number})", "exec"), namespace)


def _cli_lines() -> list[str]:
    section = README.split("## Command line", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, flags=re.DOTALL).group(1)
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def test_readme_command_line_examples_run(tmp_path):
    """Every command of the README's command-line block, on a store holding ``user-42``
    (the PostgreSQL line runs against a SQLite file instead: the URL is the only difference)."""
    import os
    import subprocess
    import sys

    from sessions_core import Session

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
