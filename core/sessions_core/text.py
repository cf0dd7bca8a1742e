"""Checks that strings can be stored (pure)."""

from __future__ import annotations

from typing import Any

from .errors import InvalidInputError, InvalidTextError


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


def unstorable(where: str, error: UnicodeEncodeError) -> InvalidTextError:
    """The error for a driver's ``UnicodeEncodeError`` on a value bound for ``where``: the
    checks at the library's edge name the field; this covers what reaches a store otherwise
    (an id that was never stored, looked up)."""
    text = error.object if isinstance(error.object, str) else ""
    position = error.start if text else 0
    problem = surrogate_problem("a value", text, position) if text else "a value is not valid Unicode text"
    return InvalidTextError(f"{where}: {problem}; nothing was read or written")


def check_cache_size(value: object) -> int:
    """``value`` if it is a whole number of at least 1 (what a cache of handles holds at most)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError("cache_size must be an int")
    if value < 1:
        raise InvalidInputError("cache_size must be at least 1")
    return value
