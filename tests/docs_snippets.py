"""The fenced code blocks of README.md and docs/, found once for the tests that run them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).parent.parent
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
FENCE = re.compile(r"^```(\w+)[^\n]*\n(.*?)^```", flags=re.DOTALL | re.MULTILINE)
SUBPROCESS_MARK = "<!-- docs-test: subprocess -->"
"""Put on the line before a block that must run in a fresh interpreter (global state of its own)."""


@dataclass(frozen=True)
class Snippet:
    path: Path
    line: int
    """The line of the opening fence (1-based)."""
    language: str
    code: str
    subprocess: bool = False

    @property
    def name(self) -> str:
        return f"{self.path.relative_to(ROOT).as_posix()}:{self.line}"


def snippets(language: str = "python") -> list[Snippet]:
    """Every fenced block of ``language`` in README.md and docs/, in document order."""
    found = []
    for path in DOCUMENTS:
        text = path.read_text(encoding="utf-8")
        for match in FENCE.finditer(text):
            if match.group(1) != language:
                continue
            before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
            line = text.count("\n", 0, match.start()) + 1
            found.append(Snippet(path, line, language, match.group(2), before.strip() == SUBPROCESS_MARK))
    return found
