"""The README's examples marked ``<!-- readme-test -->`` run as written."""

import re
from pathlib import Path

import pytest

README = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
BLOCKS = re.findall(r"<!-- readme-test -->\n```python\n(.*?)```", README, flags=re.DOTALL)


def test_the_readme_has_tested_examples():
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("code", BLOCKS, ids=[f"block{i}" for i in range(len(BLOCKS))])
def test_readme_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    exec(compile(code, "README.md", "exec"), {"__name__": "readme"})


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
