"""Checks that strings can be stored (pure)."""

from __future__ import annotations

from typing import Any

from .errors import InvalidTextError


def lone_surrogate(value: str) -> int | None:
    """The position of the first lone surrogate in ``value``, or ``None`` if it is valid text."""
    if value.isascii():
        return None
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def surrogate_problem(what: str, value: str, position: int) -> str:
    """What to say about a lone surrogate at ``position`` of ``value`` (``what`` names the field)."""
    return (
        f"{what} holds a lone surrogate {value[position]!r} at position {position}, which is not valid"
        " Unicode text and cannot be stored (it often comes from json.loads of broken input;"
        " decode such input with errors='replace' or fix it)"
    )


def check_text(value: Any, what: str) -> Any:
    """``value`` unchanged, unless it is a string holding a lone surrogate: ``InvalidTextError``
    naming ``what`` (the field). Any other value is left for the caller's own checks."""
    if isinstance(value, str):
        position = lone_surrogate(value)
        if position is not None:
            raise InvalidTextError(surrogate_problem(what, value, position))
    return value
