"""The exceptions of sessions_core and its adapters; all derive from :class:`SessionsError`.

This docstring is the one place the tree is documented::

    SessionsError                     anything this library raises on purpose
    ├── InvalidInputError             (also ValueError) a bad argument value, a wrong combination
    │   │                             of arguments, or malformed input; nothing was done
    │   ├── MessageValidationError    a message is not a SessionMessage (role, id, parts...)
    │   ├── MessageTooLargeError      a client message over max_message_bytes
    │   ├── InvalidRecordError        a record of an import is malformed (.line, .reason)
    │   ├── InvalidParentError        a parent_id (or compaction end) names no message of the session
    │   └── InvalidTextError          a string holds a lone surrogate, which no store can hold
    ├── NotFoundError                 (also LookupError) what was named does not exist
    │   └── SessionNotFoundError      the store holds nothing under a session id
    ├── ConflictError                 (also RuntimeError and ValueError) the call conflicts with
    │                                 the state it meets: already done or bound elsewhere, not
    │                                 bound yet, or changed concurrently
    ├── StoreError                    the storage backend failed or was misconfigured
    │   ├── StoreUnavailableError     no connection to the database could be made or kept, or
    │   │                             the file an open store used is gone
    │   ├── EncryptionKeyError        an encrypted SQLite file opened with a wrong key or none,
    │   │                             or a key given for a file that is not encrypted
    │   └── UnsupportedOperationError (also NotImplementedError) the store lacks an optional
    │                                 capability a feature needs
    ├── CompactionError               compaction (or a summariser) failed or gave nothing usable
    ├── ContextError                  a context block operation was refused
    ├── RecallError                   semantic recall's vector index failed to search
    └── RedactionError                the redactor given to with_redaction raised or returned
                                      something that is not text; nothing was stored

When each is raised, by example:

- ``InvalidInputError``: ``search(mode="fuzzy")`` or ``match="some"``; ``mode="semantic"``
  without ``with_semantic_recall``; ``with_context("")`` or ``keep_versions=0``; options for a
  new ``SemanticRecall`` given with a shared one; ``SqliteStore(synchronous="FAST")``;
  ``SessionManager(namespace="a:b")``; an unknown tiktoken encoding; an invalid skill key; an
  adapter given arguments that contradict each other (``session_id=`` that is not the
  ``Session``'s, ``compact_after`` without a summariser) or lack one that goes with another
  (a manager without ``session_id=``); a message that converts to several where one is asked.
  Its subclasses: a message that does not parse, one over ``max_message_bytes``, a bad import
  line, text with a lone surrogate.
- ``NotFoundError``: exporting a session the store does not hold (``SessionNotFoundError``).
- ``ConflictError``: one ``SemanticRecall`` attached to a second store, or used before it is
  attached; a store-backed provider used before a session binds it.
- ``StoreError``: any failure of the database or its driver (locked past the timeout, disk
  full, read-only, a value it cannot hold, a schema missing or newer than the library);
  ``StoreUnavailableError`` when PostgreSQL cannot be reached or the connection is lost, or a
  SQLite file was deleted or replaced under an open store; ``EncryptionKeyError`` for
  ``SqliteStore(path, key=...)`` with a wrong key, an encrypted file opened without ``key=``,
  or a key for a plain file; ``UnsupportedOperationError`` when the store lacks what a feature
  needs (``InspectableStore``, ``RecallStore``).
- ``CompactionError``: ``compact()`` or auto-compaction whose function fails, times out or
  returns something unusable; a summariser whose model returned no text.
- ``ContextError``: an unknown, read-only or keyed block written as a plain one, a write over
  ``max_tokens``, a block added twice, a version that does not exist.
- ``RecallError``: ``search(mode="semantic")`` when the vector index fails.

The categories keep the built-in bases the raises had before them, so ``except ValueError``
(``LookupError``, ``RuntimeError``) still catches what it caught. A wrong argument *type* is a
plain ``TypeError``, as in Python itself; a wrong value or combination of arguments is an
``InvalidInputError``. Tools never raise into the agent loop: they return an ``Error: ...``
string.
"""

from __future__ import annotations


class SessionsError(Exception):
    """Base class of every error raised by this library."""


class InvalidInputError(SessionsError, ValueError):
    """An argument has a bad value, arguments go together wrongly, or input is malformed; nothing
    was done."""


class NotFoundError(SessionsError, LookupError):
    """What the call names does not exist."""


class ConflictError(SessionsError, RuntimeError, ValueError):
    """The call conflicts with the state it meets (an object already bound elsewhere or not bound
    yet, something already done or changed concurrently); nothing was done. A ``RuntimeError``
    and a ``ValueError``, as the raises it replaced were."""


class MessageValidationError(InvalidInputError):
    """A message does not have the shape of a ``SessionMessage``; nothing was stored."""


class MessageTooLargeError(InvalidInputError):
    """A client-supplied message is larger than the configured maximum; nothing was stored."""


class InvalidParentError(InvalidInputError):
    """A ``parent_id`` (or a compaction's message id) names no message of this session; nothing
    was stored. ``None`` as a parent starts a new root."""


class SessionNotFoundError(NotFoundError):
    """The store holds nothing under the session id asked for."""


class InvalidRecordError(InvalidInputError):
    """A record of an import is malformed; nothing was written. ``line`` is its 1-based position
    in the input (blank lines counted), ``reason`` what is wrong with it."""

    def __init__(self, line: int, reason: str) -> None:
        super().__init__(f"line {line}: {reason}")
        self.line = line
        self.reason = reason


class StoreError(SessionsError):
    """The storage backend failed or was misconfigured."""


class StoreUnavailableError(StoreError):
    """No connection to the database could be made or kept: PostgreSQL unreachable or refusing
    the connection (the message gives its reason: server down, unknown host, bad credentials...),
    a connection lost during the call (every one of the pool broken), or the SQLite file an open
    store was using deleted or replaced. The store works again on the first call after the
    database is back. A call cut off by a lost connection may have committed (appends are safe to
    retry by id)."""


class EncryptionKeyError(StoreError):
    """An encrypted SQLite file was opened with a wrong key or without one, or a key was given
    for a file that is not encrypted; nothing was read or written."""


class UnsupportedOperationError(StoreError, NotImplementedError):
    """The store does not implement the optional capability a feature needs (the message names
    the capability and the method); nothing was written."""


class CompactionError(SessionsError):
    """The compaction function failed, timed out or returned something unusable (a summariser
    of this library raises it for a model that returned no text); the history is unchanged."""


class ContextError(SessionsError):
    """A context block operation was refused (unknown, read-only or over-limit block...)."""


class InvalidTextError(InvalidInputError):
    """A string is not valid Unicode text: it holds a lone surrogate (``"\\ud800"``, as
    ``json.loads`` of broken input makes), which no store can hold. Nothing was stored."""


class RecallError(SessionsError):
    """Semantic recall's vector index failed to search; the message names the index's error
    (its type and message), which is the ``__cause__``. ``mode="hybrid"`` never raises it: it
    falls back to the full-text ranking (``SearchResults.text_only``)."""


class RedactionError(SessionsError):
    """The redactor of ``with_redaction`` raised (the ``__cause__``) or returned something that
    is not text; nothing of the write was stored, indexed or queued."""
