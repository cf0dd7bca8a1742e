"""Where a context-block write comes from, for the version it records (pure).

A write is ``"code"`` (the Python API) unless made inside :func:`writing_as`: the memory tools
write as ``"tool"`` (with the tool call's id when the framework gives one), an import as
``"import"``. The value follows the call into worker threads (``asyncio.to_thread`` copies it).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[tuple[str, str | None]] = ContextVar("sessions_core_write_source", default=("code", None))


def write_source() -> tuple[str, str | None]:
    """``(source, tool_call_id)`` of the writes made now."""
    return _current.get()


@contextmanager
def writing_as(source: str, tool_call_id: str | None = None) -> Iterator[None]:
    """Writes made inside are recorded as ``source`` (and ``tool_call_id``)."""
    token = _current.set((source, tool_call_id))
    try:
        yield
    finally:
        _current.reset(token)
