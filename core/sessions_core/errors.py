"""The exceptions of sessions_core; all derive from :class:`SessionsError`."""

from __future__ import annotations


class SessionsError(Exception):
    """Base class of every error raised by this library."""


class MessageValidationError(SessionsError, ValueError):
    """A message does not have the shape of a ``SessionMessage``; nothing was stored."""


class MessageTooLargeError(SessionsError, ValueError):
    """A client-supplied message is larger than the configured maximum; nothing was stored."""


class SessionNotFoundError(SessionsError, LookupError):
    """The store holds nothing under the session id asked for."""


class InvalidRecordError(SessionsError, ValueError):
    """A record of an import is malformed; nothing was written. ``line`` is its 1-based position
    in the input (blank lines counted), ``reason`` what is wrong with it."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class StoreError(SessionsError):
    """The storage backend failed or was misconfigured."""


class CompactionError(SessionsError):
    """The compaction function failed, timed out or returned something unusable; the history
    is unchanged."""


class ContextError(SessionsError):
    """A context block operation was refused (unknown, read-only or over-limit block...)."""


class InvalidTextError(SessionsError, ValueError):
    """A string is not valid Unicode text: it holds a lone surrogate (``"\\ud800"``, as
    ``json.loads`` of broken input makes), which no store can hold. Nothing was stored."""


class RecallError(SessionsError):
    """Semantic recall's vector index failed to search; the message names the index's error
    (its type and message), which is the ``__cause__``. ``mode="hybrid"`` never raises it: it
    falls back to the full-text ranking (``SearchResults.text_only``)."""
