"""The public surface of llamaindex_sessions and its example."""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import llamaindex_sessions

EXAMPLE = Path(__file__).parents[2] / "examples" / "llamaindex_agent.py"


def test_all_lists_exactly_the_public_names():
    public = {
        name
        for name, value in vars(llamaindex_sessions).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert set(llamaindex_sessions.__all__) == public


def test_example_output(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run(
        [sys.executable, str(EXAMPLE), str(tmp_path / "memory.db")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=True,
    )
    out = result.stdout
    assert "tool call: set_context({'label': 'memory', 'content': \"The user's name is Ada. They love trams.\"})" in out
    assert "memory block: The user's name is Ada. They love trams." in out
    assert "answer: You're Ada, and you love trams." in out
    assert (
        "user[text] -> assistant[tool-call] -> tool[tool-result] -> assistant[text] -> user[text] -> assistant[text]"
        in out
    )
