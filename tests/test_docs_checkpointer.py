"""The python blocks of ``docs/langgraph-checkpointer.md`` run alone, each in an empty folder."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "langgraph-checkpointer.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), flags=re.S)


def test_the_page_has_its_sections_and_a_snippet() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert "## Checkpointer" in text and "### What differs from LangGraph's savers" in text
    assert BLOCKS


@pytest.mark.parametrize("block", BLOCKS, ids=[f"block{n}" for n in range(len(BLOCKS))])
def test_each_python_block_runs_alone(block: str, tmp_path: Path) -> None:
    script = tmp_path / "snippet.py"
    script.write_text(block, encoding="utf-8")
    result = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
