"""Small builders shared by the tests."""

from __future__ import annotations

import re
from typing import Any


def msg(message_id: str, text: str = "", role: str = "user", **extra: Any) -> dict[str, Any]:
    """A message dict in the reference's (AI SDK) shape with one text part."""
    text = text or f"message {message_id}"
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}], **extra}


def ids(messages: Any) -> list[str]:
    return [m.id for m in messages]


_HIT_HEADER = re.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d UTC \| session [^|]+ \| (\w+)\] ")
_HIT_TURN = re.compile(r"\n  (?:reply|asked) \(\w+\): [^\n]*\Z")


def plain_hits(text: str) -> list[str]:
    """The hits of a search tool's text (``tools.format_hits``) as ``"[role] content"``, without
    their time, session and neighbouring turn."""
    hits = []
    for entry in text.split("\n---\n"):
        header = _HIT_HEADER.match(entry)
        assert header is not None, f"not a search hit: {entry!r}"
        hits.append(f"[{header.group(1)}] {_HIT_TURN.sub('', entry[header.end() :])}")
    return hits


_WRITTEN = re.compile(r"^(\[[^\]\n]*\]) \(\d{4}-\d\d-\d\d \d\d:\d\d UTC\)$", re.M)


def untimed(text: str) -> str:
    """A searchable block's ``search_context`` text without the times of its entries."""
    return _WRITTEN.sub(r"\1", text)
