"""Every example in examples/ runs, offline, as a test."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = sorted((Path(__file__).parent.parent / "examples").glob("*.py"))


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_example_runs(example, tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [sys.executable, str(example)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip(), "an example should show what it did"


def test_quickstart_output(tmp_path):
    quickstart = str(EXAMPLES[[p.name for p in EXAMPLES].index("quickstart.py")])
    result = subprocess.run([sys.executable, quickstart], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert "active branch: ['u1', 'a1', 'u2', 'a2-retry']" in result.stdout
    assert "retry inserted? False" in result.stdout
    assert "after reopening: 4 messages" in result.stdout
    assert result.stdout.rstrip().endswith("look inside: sessions --store chat.db show user-42")
    again = subprocess.run([sys.executable, quickstart], cwd=tmp_path, capture_output=True, text=True, check=True)
    assert again.stdout == result.stdout  # it leaves chat.db, and a second run stores nothing twice
    shown = subprocess.run(
        [sys.executable, "-m", "sessions_core", "--store", "chat.db", "show", "user-42"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "a2-retry" in shown.stdout


def test_semantic_recall_suggests_only_a_database_that_exists(tmp_path):
    """Without a path the example's database is temporary: it says so instead of naming a deleted
    file; with one, the command it suggests works on what it left."""
    example = str(EXAMPLES[[p.name for p in EXAMPLES].index("semantic_recall.py")])
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    run = subprocess.run([sys.executable, example], cwd=tmp_path, env=env, capture_output=True, text=True, check=True)
    assert run.stdout.rstrip().endswith(
        "the database was temporary and is gone; to keep one and look at its outbox:"
        " python examples/semantic_recall.py memory.db && sessions --store memory.db recall backlog"
    )
    kept = subprocess.run(
        [sys.executable, example, "memory.db"], cwd=tmp_path, env=env, capture_output=True, text=True, check=True
    )
    assert kept.stdout.rstrip().endswith("the outbox, from the shell: sessions --store memory.db recall backlog")
    backlog = subprocess.run(
        [sys.executable, "-m", "sessions_core", "--store", "memory.db", "recall", "backlog"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert backlog.returncode == 0, backlog.stderr
