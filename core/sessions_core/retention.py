"""Retention and erasure of whole sessions: pruned by their last activity, or erased so that
none of their text stays readable in the store.

``SessionManager.prune``, ``erase`` and ``erase_namespace``, ``Session.erase``, the
``retention=`` option and the ``sessions prune`` / ``sessions erase`` commands run these over a
store with the optional :class:`~sessions_core.stores.base.SessionErasure` capability (both
built-in stores); another store raises ``UnsupportedOperationError``.

A session's last activity is the latest time among its registry row's ``updated_at``, its
messages' and overlays' ``created_at``, its block versions, search entries and cached prompt
(an imported message counts with the time it was given). A prune removes a whole session with
every trace of it: registry row, messages, overlays, blocks and their versions, search entries,
cached prompt, the payloads no other session refers to, and its vectors, which leave the index
through semantic recall's outbox as a delete's do. An erase also scrubs the files
(``SessionErasure.scrub``): on SQLite none of the erased text remains in the database file or
its ``-wal``; on PostgreSQL no row or index entry remains for any query, and the server keeps
dead tuples and WAL until ``VACUUM`` (``vacuum=True``) and WAL recycling.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from ._time import from_us, now_us
from .errors import ConflictError, InvalidInputError, SessionsError, UnsupportedOperationError
from .stores.base import (
    CheckpointErasure,
    CheckpointQuery,
    CheckpointStore,
    ItemStore,
    RecordErasure,
    Removal,
    RowCounts,
    SessionErasure,
    Store,
    StoredSession,
    supports,
)

if TYPE_CHECKING:
    from .semantic import SemanticRecall

logger = logging.getLogger("sessions_core.retention")

__all__ = [
    "CHECKPOINT_PAGE",
    "RETENTION_INTERVAL",
    "CheckpointRewrite",
    "EraseResult",
    "PruneResult",
    "Retention",
    "erase_block",
    "erase_messages",
    "erase_sessions",
    "erasure_store",
    "has_checkpoints",
    "parse_duration",
    "prune_sessions",
    "rewrite_checkpoints",
]

CHECKPOINT_PAGE = 100
"""Checkpoints read and rewritten per transaction when messages are taken out of them."""

RETENTION_INTERVAL = 3600.0
"""Seconds between two automatic prunes of one namespace of one store (``retention=``)."""


@dataclass(frozen=True, slots=True)
class PruneResult:
    """What a prune removed, or with ``dry_run`` would remove."""

    session_ids: tuple[str, ...]
    """The sessions pruned, by their ids within their namespaces."""
    storage_ids: tuple[str, ...]
    """The same sessions by the ids their rows are stored under (``Session.for_session``'s)."""
    counts: RowCounts
    cutoff: datetime
    """Sessions last active before this time were pruned."""
    dry_run: bool


@dataclass(frozen=True, slots=True)
class EraseResult:
    """What an erase removed."""

    session_ids: tuple[str, ...]
    """The sessions erased (an id that held nothing is absent)."""
    counts: RowCounts
    vectors_pending: int = 0
    """Vectors of the erased sessions left for semantic recall's sender to delete from the index
    (through the outbox), because recall was not attached to the object that erased them."""
    vacuumed: bool = False
    items: int = 0
    """Items of the namespace's LangGraph store (``SessionStore``, ``sessions_core.items``)
    removed with their versions and vectors: by an erase of a whole namespace only."""


_DURATION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", re.IGNORECASE)
_DURATIONS = re.compile(r"(?:\s*+\d++(?:\.\d++)?+\s*+[smhdw]\s*+)++", re.IGNORECASE)
"""A whole text of durations, checked before :data:`_DURATION` reads its parts: in linear time
(read from each of a long run's characters, a text of spaces or digits took quadratic time)."""
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_duration(text: str) -> timedelta:
    """A duration written ``90d``, ``12h``, ``30m``, ``45s`` or ``2w`` (or a sum: ``1d12h``)."""
    parts = list(_DURATION.finditer(text)) if _DURATIONS.fullmatch(text) else []
    if not text.strip() or "".join(part.group(0) for part in parts) != text:
        raise InvalidInputError(f"not a duration: {text!r} (write it as 90d, 12h, 30m, 45s or 2w)")
    return sum(
        (timedelta(**{_UNITS[part.group(2).lower()]: float(part.group(1))}) for part in parts),
        timedelta(),
    )


def _check_older_than(older_than: timedelta) -> timedelta:
    if not isinstance(older_than, timedelta) or older_than <= timedelta():
        raise InvalidInputError(f"older_than must be a positive timedelta, not {older_than!r}")
    return older_than


def erasure_store(store: Store) -> Store:
    """``store`` if it implements ``SessionErasure``, else ``UnsupportedOperationError``."""
    if not supports(store, SessionErasure):
        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional SessionErasure capability (retention,"
            " prune and erase); use a store that does (SqliteStore, PostgresStore) for this feature"
        )
    return store


def prune_sessions(
    store: Store,
    older_than: timedelta,
    *,
    namespace: str | None,
    dry_run: bool = False,
    recall: SemanticRecall | None = None,
) -> tuple[PruneResult, list[StoredSession]]:
    """Prune the sessions of ``namespace`` (``None``: every namespace) last active more than
    ``older_than`` ago; the result, and the sessions it concerns."""
    cutoff = now_us() - _microseconds(_check_older_than(older_than))
    stale = erasure_store(store).session_activity(namespace, before_us=cutoff)
    ids = [session.storage_id for session in stale]
    if dry_run:
        counts = store.count_session_rows(ids) if ids else RowCounts()
    else:
        removal = store.remove_sessions(ids, inactive_before_us=cutoff) if ids else Removal((), RowCounts())
        kept = set(removal.storage_ids)
        stale = [session for session in stale if session.storage_id in kept]
        counts = removal.counts
        if recall is not None:
            for storage_id in removal.storage_ids:
                recall.forget(storage_id)
            if removal.storage_ids:
                recall.notify()
    result = PruneResult(
        tuple(session.id for session in stale),
        tuple(session.storage_id for session in stale),
        counts,
        from_us(cutoff),
        dry_run,
    )
    return result, stale


def erase_sessions(
    store: Store,
    storage_ids: Sequence[str],
    *,
    vacuum: bool = False,
    recall: SemanticRecall | None = None,
    namespace: str | None = None,
) -> tuple[Removal, EraseResult]:
    """Erase these sessions (storage ids) and scrub the store's files; with ``recall`` their
    vectors leave the index now, else through the outbox; with ``namespace`` (an erase of all
    of it) its items go too, on a store that keeps items. The removal, and the result naming
    the sessions by their storage ids."""
    erasure_store(store)
    items = store.remove_namespace_items(namespace) if namespace is not None and supports(store, ItemStore) else 0
    unique = list(dict.fromkeys(storage_ids))
    if recall is not None:
        removal, pending = recall.erase(unique), 0
    else:
        removal = store.remove_sessions(unique)
        pending = removal.counts.vectors
    store.scrub(vacuum=vacuum)
    return removal, EraseResult(removal.storage_ids, removal.counts, pending, vacuum, items)


def erase_messages(
    store: Store,
    storage_id: str,
    ids: Sequence[str],
    *,
    vacuum: bool = False,
    recall: SemanticRecall | None = None,
    checkpoints: CheckpointRewrite | None = None,
) -> tuple[list[str], EraseResult]:
    """Erase these messages of a session (storage id), with the overlays made from them and
    the payloads no other message refers to, and scrub the store's files; with ``recall``
    their vectors leave the index now, else through the outbox. A session with LangGraph
    checkpoints has them taken out of those first (``checkpoints``: the saver's rewrite), and
    without ``checkpoints`` is refused (``ConflictError``, nothing erased). The ids erased, and
    the result naming the session when anything was."""
    record_erasure_store(store)
    unique = list(dict.fromkeys(ids))
    if checkpoints is not None:
        rewrite_checkpoints(store, storage_id, unique, checkpoints)
    elif has_checkpoints(store, storage_id):
        raise ConflictError(
            f"session {storage_id!r} is a LangGraph thread whose checkpoints keep their own copy of its messages;"
            " nothing was erased: erase them with SessionSaver.erase_messages(thread_id, ids), which takes them"
            " out of the checkpoints too, or erase the whole session"
        )
    if recall is not None:
        erased, counts = recall.erase_messages(storage_id, unique)
        pending = 0
    else:
        erased, counts = store.remove_messages(storage_id, unique)
        pending = counts.vectors
    store.scrub(vacuum=vacuum)
    return erased, EraseResult((storage_id,) if erased else (), counts, pending, vacuum)


def erase_block(
    store: Store,
    storage_id: str,
    label: str,
    key: str | None = None,
    *,
    vacuum: bool = False,
    recall: SemanticRecall | None = None,
) -> EraseResult:
    """Erase a context block of a session (storage id), every version and entry of it, or
    only its entry ``key``, with the session's cached prompt, and scrub the store's files;
    with ``recall`` the entries' vectors leave the index now, else through the outbox."""
    record_erasure_store(store)
    if recall is not None:
        counts, pending = recall.erase_block(storage_id, label, key), 0
    else:
        counts = store.remove_block(storage_id, label, key)
        pending = counts.vectors
    store.scrub(vacuum=vacuum)
    erased = counts.blocks or counts.block_versions or counts.search_entries
    return EraseResult((storage_id,) if erased else (), counts, pending, vacuum)


def record_erasure_store(store: Store) -> Store:
    """``store`` if it implements ``SessionErasure`` and ``RecordErasure``, else
    ``UnsupportedOperationError`` naming the one it lacks."""
    erasure_store(store)
    if not supports(store, RecordErasure):
        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional RecordErasure capability (erasing messages"
            " and blocks); use a store that does (SqliteStore, PostgresStore) for this feature"
        )
    return store


def _microseconds(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


_last_runs: weakref.WeakKeyDictionary[Store, dict[str | None, float]] = weakref.WeakKeyDictionary()
_runs_lock = threading.Lock()


class Retention:
    """The ``retention=`` option: prune ``namespace`` of a store on its own, on its owner's
    write path, at most once every :data:`RETENTION_INTERVAL` per store and namespace (however
    many objects share the store in this process). A failing prune is logged, never raised
    into the write that ran it."""

    def __init__(self, older_than: timedelta, namespace: str) -> None:
        self.older_than = _check_older_than(older_than)
        self.namespace = namespace

    def after_write(self, store: Store, recall: SemanticRecall | None) -> PruneResult | None:
        """Prune if due (the result), else ``None``."""
        moment = time.monotonic()
        with _runs_lock:
            runs = _last_runs.setdefault(store, {})
            last = runs.get(self.namespace)
            if last is not None and moment - last < RETENTION_INTERVAL:
                return None
            runs[self.namespace] = moment
        try:
            return prune_sessions(store, self.older_than, namespace=self.namespace, recall=recall)[0]
        except SessionsError as error:
            logger.warning(
                "retention: pruning %r of %r failed (tried again in an hour): %s", self.namespace, store, error
            )
            return None


CheckpointRewrite = Callable[[str, bytes, frozenset[str]], "tuple[str, bytes] | None"]
"""How a framework's saver takes messages out of a value it serialised: given the value's type
tag, its bytes and the ids of the messages to erase, the value without them (type tag and
bytes), or ``None`` when it holds none of them."""


def has_checkpoints(store: Store, storage_id: str) -> bool:
    """Whether the session (storage id) is a thread with checkpoints."""
    return supports(store, CheckpointStore) and bool(store.list_checkpoints(CheckpointQuery("", storage_id), 1))


def rewrite_checkpoints(store: Store, storage_id: str, ids: Iterable[str], rewrite: CheckpointRewrite) -> int:
    """Take the messages ``ids`` out of every checkpoint and pending write of a session
    (storage id) through ``rewrite``, a page of checkpoints a transaction (a failure leaves
    the pages before it rewritten: running it again finishes); how many values changed."""
    if not supports(store, CheckpointErasure):
        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional CheckpointErasure capability (erasing"
            " messages from a thread's checkpoints); use a store that does (SqliteStore, PostgresStore)"
        )
    wanted = frozenset(ids)
    query, after, changed = CheckpointQuery("", storage_id), None, 0
    while True:
        page = store.list_checkpoints(query, CHECKPOINT_PAGE, after)
        rewritten = []
        for row in page:
            new = rewrite(row.type, row.checkpoint, wanted)
            writes = []
            for write in row.writes:
                value = None if write.value is None else rewrite(write.type, write.value, wanted)
                if value is not None:
                    writes.append(write._replace(type=value[0], value=value[1]))
            if new is not None or writes:
                kind, data = (row.type, row.checkpoint) if new is None else new
                rewritten.append(row._replace(type=kind, checkpoint=data, writes=tuple(writes)))
                changed += (new is not None) + len(writes)
        store.rewrite_checkpoints(storage_id, rewritten)
        if len(page) < CHECKPOINT_PAGE:
            return changed
        last = page[-1]
        after = (last.checkpoint_id, storage_id, last.checkpoint_ns)
