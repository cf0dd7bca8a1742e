"""Small builders shared by the tests."""

from __future__ import annotations

from typing import Any


def msg(message_id: str, text: str = "", role: str = "user", **extra: Any) -> dict[str, Any]:
    """A message dict in the reference's (AI SDK) shape with one text part."""
    text = text or f"message {message_id}"
    return {"id": message_id, "role": role, "parts": [{"type": "text", "text": text}], **extra}


def ids(messages: Any) -> list[str]:
    return [m.id for m in messages]
