"""``SemanticRecall``: a vector index kept up to date from a store's outbox, and searched.

The store is the source of truth. A session enabled for recall has every change to its messages
and search entries queued in the store's outbox in the transaction that makes it
(:class:`~sessions_core.stores.base.RecallStore`); :meth:`SemanticRecall.drain` sends the queued
changes to the index after the commit (by default from a background thread woken by each write),
retries a failed batch later with a growing delay, and records the vectors it sent so that a later
delete removes them. Sending is idempotent: each change is resolved against what the store holds
when it is sent, and every vector has an id derived from where its text comes from.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import weakref
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._async import AsyncTwins, caller_loop, io, resolve
from ._time import now_us
from .errors import ConflictError, InvalidInputError, RecallError, SessionsError
from .messages import COMPACTION_ID_PREFIX, message_from_storage, recall_text
from .recall import (
    ENTRY,
    MESSAGE,
    SESSION,
    VectorHit,
    VectorIndex,
    chunk_text,
    digest,
    entry_ref,
    split_entry_ref,
    vector_id,
)
from .stores.base import (
    OutboxRow,
    RecallBacklog,
    RecallSource,
    RecallStore,
    Removal,
    RowCounts,
    Store,
    VectorRow,
    recall_store,
)

if TYPE_CHECKING:
    from ._twins import RecallOwnerTwins
else:
    RecallOwnerTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones

logger = logging.getLogger("sessions_core.semantic")

__all__ = ["DrainReport", "RecallHit", "RecallOwner", "SemanticRecall"]


@dataclass
class DrainReport:
    """What one :meth:`SemanticRecall.drain` did."""

    changes: int = 0
    """Queued changes sent (and dropped from the outbox)."""
    added: int = 0
    """Vectors sent to the index."""
    removed: int = 0
    """Vectors deleted from the index."""
    failed: int = 0
    """Changes whose batch failed: kept, retried later."""
    errors: list[str] = field(default_factory=list)
    retry_in: float | None = None
    """Seconds until the failed batch is due again (``None`` when nothing failed)."""


@dataclass(frozen=True, slots=True)
class RecallHit:
    """A message or entry found by meaning: its session, kind, reference and best score."""

    session_id: str
    kind: str
    ref: str
    score: float


def source_text(kind: str, source: RecallSource) -> str:
    """The text recall embeds for a stored message or entry (``""``: nothing to embed)."""
    if kind == ENTRY:
        return source.content
    if source.ref.startswith(COMPACTION_ID_PREFIX):
        return ""
    message = message_from_storage(source.content, source.created_at_us)
    return "" if message is None else recall_text(message)


def _nearest(limit: int) -> int:
    """How many vectors to ask for ``limit`` results: four times as many (chunks of one message
    count once, and hits outside the scope are dropped), at least 20, and no more than 1,000
    beyond the limit itself."""
    return min(max(limit * 4, 20), max(limit, 1000))


def _runs_in(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is the one running ``loop``."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


def _namespace_of(storage_id: str) -> str:
    """The manager namespace a storage id was made in (a filter hint only: the registry decides)."""
    if storage_id.startswith(":") or ":" not in storage_id:
        return ""
    return storage_id.split(":", 1)[0]


class SemanticRecall:
    """Semantic recall over ``index`` (a :class:`~sessions_core.recall.VectorIndex`).

    Texts longer than ``chunk_chars`` are sent in overlapping chunks, each knowing its message.
    ``background``: a daemon thread drains the outbox after each write and retries failures;
    without it only :meth:`drain` sends. ``min_score`` drops search hits scoring below it (for
    an index whose score is a similarity, as the in-memory stores' cosine is; by default every
    one of the nearest is kept). The index is called by one thread at a time (a search waits
    for a batch being sent), as in-memory stores need; ``concurrent_index=True`` lets a store
    that takes concurrent calls (a database's) search while the sender sends. One object may
    serve many sessions of one store. ``async_index=True`` calls the index through ``aadd``,
    ``adelete`` and ``asearch`` only, on the event loop of the async code that last wrote or
    searched (a vector store with an async client only, bound to that loop).
    """

    def __init__(
        self,
        index: VectorIndex,
        *,
        chunk_chars: int = 2000,
        chunk_overlap: int = 200,
        batch_size: int = 64,
        background: bool = True,
        lease_seconds: float = 60.0,
        retry_seconds: float = 0.5,
        max_retry_seconds: float = 60.0,
        idle_seconds: float = 30.0,
        min_score: float | None = None,
        concurrent_index: bool = False,
        async_index: bool = False,
    ) -> None:
        missing = [name for name in ("add", "delete", "search") if not callable(getattr(index, name, None))]
        if missing:
            raise TypeError(f"index must have add, delete and search (a VectorIndex); {index!r} lacks {missing}")
        if chunk_chars <= chunk_overlap or chunk_overlap < 0:
            raise InvalidInputError("chunk_chars must be larger than chunk_overlap, which must be >= 0")
        self.index = index
        self.chunk_chars = chunk_chars
        self.chunk_overlap = chunk_overlap
        self.batch_size = batch_size
        self.background = background
        self.lease_us = int(lease_seconds * 1e6)
        self.retry_seconds = retry_seconds
        self.max_retry_seconds = max_retry_seconds
        self.idle_seconds = idle_seconds
        self.min_score = min_score
        self._index_lock: Any = contextlib.nullcontext() if concurrent_index else threading.Lock()
        self.async_index = async_index
        self._loop: asyncio.AbstractEventLoop | None = None
        self._store: RecallStore | None = None
        self._enabled: set[str] = set()
        self._turned_on: weakref.WeakSet[RecallOwner] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._draining = threading.Lock()
        self._wake = threading.Event()
        self._worker: threading.Thread | None = None
        self._closed = False

    def __repr__(self) -> str:
        return f"SemanticRecall({self.index!r})"

    # -- wiring ----------------------------------------------------------------------------

    def attach(self, store: Store) -> SemanticRecall:
        """Serve ``store`` (one store per object: a second one raises ``ConflictError``, a
        ``ValueError``)."""
        checked = recall_store(store)
        with self._lock:
            if self._store is not None and self._store is not checked:
                raise ConflictError("this SemanticRecall already serves another store; create one per store")
            self._store = checked
        return self

    @property
    def store(self) -> RecallStore:
        if self._store is None:
            raise ConflictError("SemanticRecall is not attached to a store (with_semantic_recall attaches it)")
        return self._store

    def enable(self, session_id: str) -> None:
        """Queue every later change of ``session_id`` (once per process and session; a session
        enabled for the first time gets its stored history queued too)."""
        if session_id in self._enabled:
            return
        if self.store.recall_enable([session_id]):
            self.notify()
        self._enabled.add(session_id)

    def turn_on(self, owner: RecallOwner) -> None:
        """``owner`` (a ``Session`` or ``SessionManager``) turned recall on: its sessions (those
        it names when the outbox is next read) are enabled before the next :meth:`drain`, so
        the history they stored before gets indexed without waiting for a write; the
        background sender starts now to do it."""
        with self._lock:
            self._turned_on.add(owner)
        self.notify()

    def _enable_turned_on(self) -> None:
        """Enable the sessions of the owners that turned recall on since the last call."""
        with self._lock:
            owners = list(self._turned_on)
            self._turned_on.clear()
        if not owners:
            return
        try:
            named = dict.fromkeys(session_id for owner in owners for session_id in owner._recall_sessions())
            wanted = [session_id for session_id in named if session_id not in self._enabled]
            if wanted:
                self.store.recall_enable(wanted)
                self._enabled.update(wanted)
        except BaseException:
            with self._lock:  # the store failed: try again on the next drain
                for owner in owners:
                    self._turned_on.add(owner)
            raise

    def forget(self, session_id: str) -> None:
        """The session was deleted (its registration with it): enable it again on its next write."""
        self._enabled.discard(session_id)

    def erase(self, session_ids: Sequence[str]) -> Removal:
        """Remove these sessions from the store (``SessionErasure.remove_sessions``) with every
        vector recorded for them deleted from the index first, now, and none of their changes
        left in the outbox; no send runs meanwhile in this process. An index that fails raises
        :class:`~sessions_core.errors.RecallError` and nothing is removed."""
        store = self.store
        with self._draining:
            self._delete_erased([row.vector_id for s in session_ids for row in store.recall_vectors(s)], "sessions'")
            removal = store.remove_sessions(session_ids, forget_vectors=True)
            for session_id in session_ids:
                self.forget(session_id)
            return removal

    def erase_messages(self, session_id: str, ids: Sequence[str]) -> tuple[list[str], RowCounts]:
        """Remove these messages from the store (``RecordErasure.remove_messages``) with their
        vectors deleted from the index first, now, as :meth:`erase` does for sessions."""
        store = self.store
        with self._draining:
            self._delete_erased([row.vector_id for row in store.recall_vectors(session_id, MESSAGE, ids)], "messages'")
            return store.remove_messages(session_id, ids, forget_vectors=True)

    def erase_block(self, session_id: str, label: str, key: str | None) -> RowCounts:
        """Remove a context block, or one entry of it, from the store
        (``RecordErasure.remove_block``) with its entries' vectors deleted from the index first."""
        store = self.store
        ref = entry_ref(label, "" if key is None else key)
        with self._draining:
            rows = store.recall_vectors(session_id, ENTRY)
            self._delete_erased(
                [r.vector_id for r in rows if r.ref == ref or (key is None and r.ref.startswith(ref))], "block's"
            )
            return store.remove_block(session_id, label, key, forget_vectors=True)

    def _delete_erased(self, vector_ids: list[str], what: str) -> None:
        """Delete the vectors of what is being erased from the index, or raise ``RecallError``."""
        try:
            with self._index_lock:
                for start in range(0, len(vector_ids), self.batch_size):
                    self._call_index("delete", vector_ids[start : start + self.batch_size])
        except Exception as error:  # the index's failure, whatever its type
            raise RecallError(
                f"semantic recall: the vector index failed to delete the erased {what} vectors, so nothing"
                f" was erased: {type(error).__name__}: {error}"
            ) from error

    def notify(self) -> None:
        """A write was queued: wake the background sender (started when none is running)."""
        self._remember_loop()
        if not self.background or self._closed:
            return
        with self._lock:
            self._wake.set()
            if self._worker is None:
                self._worker = threading.Thread(target=self._run, name="sessions-recall", daemon=True)
                self._worker.start()

    def close(self, timeout: float | None = 5.0) -> None:
        """Stop the background sender (what is queued stays queued in the store)."""
        self._closed = True
        self._wake.set()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(timeout)

    # -- sending ---------------------------------------------------------------------------

    def backlog(self) -> RecallBacklog:
        """The outbox's size: changes waiting, those that failed at least once, the last error."""
        self._enable_turned_on()
        return self.store.recall_backlog()

    def drain(self, *, max_changes: int | None = None) -> DrainReport:
        """Send queued changes to the index until the outbox holds none that are due (or
        ``max_changes`` were taken); a batch the index fails is kept and retried later. Waits
        for a drain running in another thread of this process first."""
        report = DrainReport()
        self._enable_turned_on()
        with self._draining:
            while max_changes is None or report.changes + report.failed < max_changes:
                limit = self.batch_size if max_changes is None else min(self.batch_size, max_changes - report.changes)
                rows = self.store.recall_claim(limit, now_us(), self.lease_us)
                if not rows:
                    break
                if not self._send(rows, report):
                    break
        return report

    def _send(self, rows: list[OutboxRow], report: DrainReport) -> bool:
        """Send one claimed batch; ``False`` if the index failed (what failed is kept). A
        failed batch is sent again one change at a time, so a change the index refuses holds
        back only itself; two failures in a row keep the rest too (the index is down)."""
        try:
            self._count(report, rows, self._apply(rows))
            return True
        except Exception as error:  # the index's (or the store's) failure, whatever its type
            if len(rows) == 1:
                self._keep(rows, error, report)
                return False
        failed_last = False
        for position, row in enumerate(rows):
            try:
                self._count(report, [row], self._apply([row]))
                failed_last = False
            except Exception as error:
                if failed_last:
                    self._keep(rows[position:], error, report)
                    return False
                self._keep([row], error, report)
                failed_last = True
        return not failed_last

    @staticmethod
    def _count(report: DrainReport, rows: list[OutboxRow], sent: tuple[int, int]) -> None:
        report.changes += len(rows)
        report.added += sent[0]
        report.removed += sent[1]

    def _keep(self, rows: list[OutboxRow], error: BaseException, report: DrainReport) -> None:
        """Keep failed changes in the outbox until their retry is due (a growing delay)."""
        attempts = max(row.attempts for row in rows) + 1
        delay = min(self.max_retry_seconds, self.retry_seconds * 2 ** (attempts - 1))
        message = f"{type(error).__name__}: {error}"
        logger.warning(
            "semantic recall: sending %d change(s) failed (attempt %d, retry in %.1fs): %s",
            len(rows),
            attempts,
            delay,
            message,
        )
        self.store.recall_retry([row.seq for row in rows], message, now_us() + int(delay * 1e6))
        report.failed += len(rows)
        report.errors.append(message)
        report.retry_in = delay

    def _apply(self, rows: list[OutboxRow]) -> tuple[int, int]:
        """Bring the index in line with the store for every change of ``rows``; a whole
        session's change is split into one change per message and entry it concerns (those
        stored and those the index holds), queued to be sent like any other."""
        store = self.store
        wanted: dict[tuple[str, str], set[str]] = defaultdict(set)
        for row in rows:
            if row.kind == SESSION:
                messages, entries = store.recall_refs(row.session_id)
                changes = {(MESSAGE, ref) for ref in messages} | {(ENTRY, ref) for ref in entries}
                changes |= {(v.kind, v.ref) for v in store.recall_vectors(row.session_id)}
                store.recall_split(row.seq, row.session_id, sorted(changes))
            else:
                wanted[(row.session_id, row.kind)].add(row.ref)
        added = removed = 0
        for (session_id, kind), refs in sorted(wanted.items()):
            ordered = sorted(refs)
            for start in range(0, len(ordered), self.batch_size):
                a, r = self._sync(session_id, kind, ordered[start : start + self.batch_size])
                added, removed = added + a, removed + r
        store.recall_record((), (), [row.seq for row in rows if row.kind != SESSION])
        return added, removed

    def _sync(self, session_id: str, kind: str, refs: Sequence[str]) -> tuple[int, int]:
        """Send what changed for ``refs`` of one session and record it; (added, removed)."""
        store = self.store
        sources = store.recall_sources(session_id, kind, refs)
        sent: dict[str, list[VectorRow]] = defaultdict(list)
        for row in store.recall_vectors(session_id, kind, refs):
            sent[row.ref].append(row)
        ids: list[str] = []
        texts: list[str] = []
        metadatas: list[dict[str, Any]] = []
        added: list[VectorRow] = []
        removed: list[str] = []
        for ref in refs:
            source = sources.get(ref)
            previous = sent.get(ref, [])
            if source is None:
                removed += [row.vector_id for row in previous]
                continue
            text = source_text(kind, source)
            text_digest = digest(text)
            chunks = chunk_text(text, self.chunk_chars, self.chunk_overlap)
            if len(previous) == len(chunks) and all(row.digest == text_digest for row in previous):
                continue
            rows = [
                VectorRow(vector_id(session_id, kind, ref, n), session_id, kind, ref, n, text_digest)
                for n in range(len(chunks))
            ]
            kept = {row.vector_id for row in rows}
            removed += [row.vector_id for row in previous if row.vector_id not in kept]
            added += rows
            ids += [row.vector_id for row in rows]
            texts += chunks
            metadatas += [self._metadata(session_id, kind, source, n, row.vector_id) for n, row in enumerate(rows)]
        with self._index_lock:
            if removed:
                self._call_index("delete", removed)
            if ids:
                self._call_index("add", ids, texts, metadatas)
        if added or removed:
            store.recall_record(added, removed, ())
        return len(added), len(removed)

    @staticmethod
    def _metadata(session_id: str, kind: str, source: Any, chunk: int, vid: str) -> dict[str, Any]:
        metadata: dict[str, Any] = {
            "session_id": session_id,
            "namespace": _namespace_of(session_id),
            "kind": kind,
            "created_at": source.created_at_us,
            "chunk": chunk,
            "vector_id": vid,
        }
        if kind == ENTRY:
            metadata["label"], metadata["key"] = split_entry_ref(source.ref)
        else:
            metadata["message_id"] = source.ref
            metadata["role"] = source.role
        return metadata

    def _remember_loop(self) -> None:
        if self.async_index:
            self._loop = caller_loop() or self._loop

    def _call_index(self, name: str, *args: Any) -> Any:
        """``index.<name>(*args)``; with ``async_index``, its coroutine ``a<name>`` awaited on
        the remembered event loop (given up after ``lease_seconds``), else on one of its own."""
        if not self.async_index:
            return getattr(self.index, name)(*args)
        coroutine = getattr(self.index, "a" + name)(*args)
        loop = caller_loop() or self._loop
        if loop is not None and loop.is_running() and not _runs_in(loop):
            return asyncio.run_coroutine_threadsafe(coroutine, loop).result(timeout=self.lease_us / 1e6)
        return resolve(coroutine)

    def _run(self) -> None:
        """The background sender: drain when woken; after a failure, again once it is due;
        gone after ``idle_seconds`` without work (the next write starts another)."""
        delay: float | None = None
        store_failures = 0
        while not self._closed:
            if not self._wake.wait(delay if delay is not None else self.idle_seconds):
                with self._lock:
                    if delay is None and not self._wake.is_set():
                        self._worker = None
                        return
            self._wake.clear()
            if self._closed:
                break
            try:
                report = self.drain()
            except Exception as error:  # the store failed (a database that is gone): try again later
                if self._store is not None and self._store.closed:
                    break
                store_failures += 1
                delay = min(self.max_retry_seconds, self.retry_seconds * 2 ** (store_failures - 1))
                logger.warning("semantic recall: reading the outbox failed (retry in %.1fs): %s", delay, error)
                continue
            store_failures = 0
            delay = report.retry_in
        with self._lock:
            self._worker = None

    # -- searching -------------------------------------------------------------------------

    def search(
        self,
        query: str,
        limit: int,
        *,
        session_ids: Sequence[str] | None = None,
        namespace: str | None = None,
        kind: str = MESSAGE,
        label: str | None = None,
    ) -> list[RecallHit]:
        """The messages (or a searchable block's entries) closest to ``query`` in meaning,
        best first, each once: of ``session_ids`` (storage ids), or of the sessions registered
        in ``namespace`` (then named by their registry ids). An index that fails raises
        :class:`~sessions_core.errors.RecallError` naming its error."""
        if limit <= 0 or not query.strip():
            return []
        where: dict[str, Any] = {"kind": kind}
        if namespace is not None:
            where["namespace"] = namespace
        elif session_ids is not None:
            ids = list(session_ids)
            where["session_id"] = ids[0] if len(ids) == 1 else ids
        if label is not None:
            where["label"] = label
        self._remember_loop()
        try:
            with self._index_lock:
                found = self._call_index("search", query, _nearest(limit), where)
            hits = [VectorHit(str(hit.id), float(hit.score)) for hit in found]
        except Exception as error:  # the index's failure (or a malformed answer), whatever its type
            raise RecallError(
                f"semantic recall: the vector index failed to search: {type(error).__name__}: {error}"
            ) from error
        return self._resolve(hits, limit, session_ids, namespace, kind, label)

    def _resolve(
        self,
        hits: Sequence[VectorHit],
        limit: int,
        session_ids: Sequence[str] | None,
        namespace: str | None,
        kind: str,
        label: str | None,
    ) -> list[RecallHit]:
        """Hits (best first) the store confirms as vectors of the allowed sessions, each
        reference once at its best chunk's place."""
        found = self.store.recall_lookup([hit.id for hit in hits], session_ids=session_ids, namespace=namespace)
        best: dict[tuple[str, str, str], float] = {}
        for hit in hits:
            if self.min_score is not None and hit.score < self.min_score:
                continue
            where = found.get(hit.id)
            if where is None or where[1] != kind:
                continue
            if label is not None and split_entry_ref(where[2])[0] != label:
                continue
            best.setdefault(where, hit.score)
        return [RecallHit(s, k, ref, score) for (s, k, ref), score in list(best.items())[:limit]]


class RecallOwner(AsyncTwins, RecallOwnerTwins):
    """What ``Session`` and ``SessionManager`` share of semantic recall."""

    _recall: SemanticRecall | None = None

    @property
    def recall(self) -> SemanticRecall | None:
        """The semantic recall of ``with_semantic_recall``, or ``None``."""
        return self._recall

    @io
    def drain_recall(self) -> DrainReport:
        """Send what the outbox holds to the index now (the background sender does it anyway),
        after any send in progress. Needs ``with_semantic_recall``."""
        return self._require_recall().drain()

    @io
    def recall_backlog(self) -> RecallBacklog:
        """The outbox's size: changes waiting, those failing, the last error."""
        return self._require_recall().backlog()

    def _recall_sessions(self) -> list[str]:
        """The storage ids of the sessions recall serves for this owner (read when
        :meth:`SemanticRecall.turn_on` enables them)."""
        return []

    def _require_recall(self) -> SemanticRecall:
        if self._recall is None:
            raise SessionsError("semantic recall is off: call with_semantic_recall(index) first")
        return self._recall


def metadata_matches(metadata: Mapping[str, Any], where: Mapping[str, Any]) -> bool:
    """Whether ``metadata`` satisfies a :meth:`VectorIndex.search` filter (for indexes that
    filter in Python)."""
    for key, wanted in where.items():
        value = metadata.get(key)
        if isinstance(wanted, (list, tuple, set, frozenset)):
            if value not in wanted:
                return False
        elif value != wanted:
            return False
    return True
