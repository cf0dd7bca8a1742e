"""LangGraph-style checkpoints whose threads are a manager's sessions (framework-neutral).

A thread id is a session id of the manager's namespace: the first checkpoint of a thread
registers its session in the checkpoint's own transaction (so ``list_sessions`` and
``session_search`` see it; once per thread and ``Checkpoints``, again after the manager reports
the session cleared), the session's messages are what the framework's memory stores (the
checkpoints keep the graph's state, as bytes its saver serialised), and removing the session
removes its checkpoints. The store needs the optional ``CheckpointStore`` capability. Every
method does one store call, and the reads and the checkpoint write past a thread's first are one
statement each.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ._async import AsyncTwins, io, run_in_thread
from ._time import now_us
from .branching import ensure_session
from .errors import ConflictError, InvalidInputError, UnsupportedOperationError
from .models import SessionEvent
from .retention import CheckpointRewrite, EraseResult
from .stores.base import (
    CheckpointQuery,
    CheckpointRow,
    CheckpointStore,
    CheckpointWrite,
    SessionRow,
    Store,
    supports,
)
from .text import check_text

if TYPE_CHECKING:
    from ._twins import CheckpointsTwins
    from .manager import SessionManager
else:
    CheckpointsTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones

__all__ = [
    "PRUNE_STRATEGIES",
    "CheckpointRewrite",
    "CheckpointRow",
    "CheckpointWrite",
    "Checkpoints",
    "checkpoint_store",
]


PRUNE_STRATEGIES = ("keep_latest", "delete")
"""``keep_latest``: the latest checkpoint of each checkpoint namespace stays; ``delete``: none."""

LIST_PAGE = 100
"""Checkpoints read per statement while listing (a listing holds at most one page of them)."""

MAX_CHANNELS = 100
"""Channels whose writes one read of ancestors may name (each a parameter of its statement)."""

_ID_CACHE = 65_536
"""Threads remembered as registered (and their storage ids), at most this many, the first
remembered forgotten first: a put to a thread not among them reads the registry first (a round
trip on PostgreSQL). A few MB at most; it holds the threads of 600k checkpoints written ten a
thread, where 4,096, cleared when full, made most puts among 100k checkpoints read the registry
(3.8x PostgresSaver's put time)."""


def _remember(cache: dict[str, Any], key: str, value: Any) -> None:
    if len(cache) >= _ID_CACHE:
        del cache[next(iter(cache))]
    cache[key] = value


def checkpoint_store(store: Store) -> Store:
    """``store`` if it implements ``CheckpointStore``, else ``UnsupportedOperationError``."""
    if not supports(store, CheckpointStore):
        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional CheckpointStore capability"
            " (checkpoints); use a store that does (SqliteStore, PostgresStore) for this feature"
        )
    return store


class Checkpoints(AsyncTwins, CheckpointsTwins):
    """The checkpoints of ``manager``'s sessions, a session being a thread.

    ``erase_sessions``: :meth:`delete_thread` erases the thread's session with every trace of
    it (``SessionManager.erase``: registry row, messages, blocks, overlays, checkpoints...);
    without it only the checkpoints and their writes go. The manager's store is shared, never
    closed here.
    """

    def __init__(self, manager: SessionManager, *, erase_sessions: bool = False) -> None:
        self.manager = manager
        self.store = checkpoint_store(manager.store)
        self.namespace = manager.namespace
        self.erase_sessions = erase_sessions
        self._ids: dict[str, str] = {}
        self._registered: dict[str, None] = {}
        forget = weakref.WeakMethod(self._forget)
        manager.subscribe(lambda event: (method := forget()) is not None and method(event))

    def _forget(self, event: SessionEvent) -> None:
        """A session of the manager was cleared or removed: check its registration again."""
        if event.type == "clear":
            self._registered.pop(event.session_id, None)

    def _register(self, thread_id: str) -> None:
        if thread_id not in self._registered:
            ensure_session(self.manager, thread_id)
            _remember(self._registered, thread_id, None)

    def __repr__(self) -> str:
        return f"Checkpoints({self.manager!r})"

    def storage_id(self, thread_id: str) -> str:
        """The storage id of the thread's session (``SessionManager.storage_id``; cached)."""
        found = self._ids.get(thread_id)
        if found is None:
            if not isinstance(thread_id, str) or not thread_id:
                raise InvalidInputError(f"a thread id is a non-empty string, not {thread_id!r}")
            found = self.manager.storage_id(thread_id)
            _remember(self._ids, thread_id, found)
        return found

    # -- writes ----------------------------------------------------------------------------

    @io
    def put(self, row: CheckpointRow, *, run_id: str | None = None) -> None:
        """Store a checkpoint of ``row.thread_id`` (registering its session on the first one),
        replacing one with the same ids; ``row.writes`` are ignored (see :meth:`put_writes`).
        ``run_id``: the run that made it (:meth:`delete_runs`)."""
        thread_id = row.thread_id
        session_id = self.storage_id(thread_id)
        check_text(row.checkpoint_ns, "checkpoint_ns")
        check_text(row.checkpoint_id, "checkpoint_id")
        moment = now_us()
        first = thread_id not in self._registered
        session = SessionRow.new(self.namespace, thread_id, session_id, thread_id, moment) if first else None
        self.store.put_checkpoint(session_id, self.namespace, row, run_id=run_id, created_at_us=moment, session=session)
        if first:
            _remember(self._registered, thread_id, None)

    @io
    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[CheckpointWrite],
        *,
        replace: bool = False,
    ) -> None:
        """Store a checkpoint's pending writes atomically; one already stored under the same
        ``(task_id, idx)`` is replaced when ``replace``, else kept."""
        self.store.put_checkpoint_writes(
            self.storage_id(thread_id), checkpoint_ns, checkpoint_id, writes, replace=replace
        )

    # -- reads -----------------------------------------------------------------------------

    @io
    def get(self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None) -> CheckpointRow | None:
        """The checkpoint ``checkpoint_id`` of the thread (``None``: its latest in
        ``checkpoint_ns``) with its pending writes, or ``None``."""
        return self.store.get_checkpoint(self.storage_id(thread_id), checkpoint_ns, checkpoint_id)

    @io
    def ancestors(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        limit: int,
        channels: Sequence[str] | None = None,
    ) -> list[CheckpointRow]:
        """The checkpoint ``checkpoint_id`` and then its ancestors, nearest first, ``limit`` at
        most, each with its pending writes (``channels``: those to these channels only), in one
        statement (``[]``: no such checkpoint); to walk further, ask again from the last one's
        parent. A chain that loops repeats ids."""
        if not isinstance(limit, int) or limit < 1:
            raise InvalidInputError(f"limit is an integer >= 1, not {limit!r}")
        if channels is not None:
            channels = list(channels)
            if len(channels) > MAX_CHANNELS or not all(isinstance(channel, str) for channel in channels):
                raise InvalidInputError(f"channels are at most {MAX_CHANNELS} strings, not {channels!r}")
            for channel in channels:
                check_text(channel, "channel")
        return self.store.checkpoint_ancestors(
            self.storage_id(thread_id), checkpoint_ns, checkpoint_id, limit, channels
        )

    def list_checkpoints(
        self,
        thread_id: str | None = None,
        *,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRow]:
        """The checkpoints of the thread (``None``: of every thread of the namespace), newest
        first, with their writes: of ``checkpoint_ns`` and ``checkpoint_id`` when given, whose
        metadata holds each key of ``metadata`` with that value, with an id below ``before``,
        at most ``limit``. Read a page at a time."""
        query, remaining = self._query(thread_id, checkpoint_ns, checkpoint_id, metadata, before, limit)
        after = None
        while remaining > 0:
            size = min(remaining, LIST_PAGE)
            page = self.store.list_checkpoints(query, int(size), after)
            yield from page
            if len(page) < size:
                return
            remaining -= len(page)
            last = page[-1]
            after = (last.checkpoint_id, self.storage_id(last.thread_id), last.checkpoint_ns)

    async def alist_checkpoints(
        self,
        thread_id: str | None = None,
        *,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        metadata: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRow]:
        """Async form of :meth:`list_checkpoints` (each page read in a worker thread)."""
        query, remaining = self._query(thread_id, checkpoint_ns, checkpoint_id, metadata, before, limit)
        after = None
        while remaining > 0:
            size = min(remaining, LIST_PAGE)
            page = await run_in_thread(self.store.list_checkpoints, query, int(size), after)
            for row in page:
                yield row
            if len(page) < size:
                return
            remaining -= len(page)
            last = page[-1]
            after = (last.checkpoint_id, self.storage_id(last.thread_id), last.checkpoint_ns)

    def _query(
        self,
        thread_id: str | None,
        checkpoint_ns: str | None,
        checkpoint_id: str | None,
        metadata: Mapping[str, Any] | None,
        before: str | None,
        limit: int | None,
    ) -> tuple[CheckpointQuery, float]:
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidInputError(f"limit must be a non-negative int or None, not {limit!r}")
        items = tuple(_metadata_items(metadata))
        session_id = None if thread_id is None else self.storage_id(thread_id)
        query = CheckpointQuery(self.namespace, session_id, checkpoint_ns, checkpoint_id, items, before)
        return query, math.inf if limit is None else limit

    # -- removal and copies ----------------------------------------------------------------

    @io
    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread's checkpoints and writes; with ``erase_sessions``, erase its
        whole session instead (``SessionManager.erase``)."""
        if self.erase_sessions:
            self.manager.erase(thread_id)
            self._registered.pop(thread_id, None)
        else:
            self.store.delete_checkpoints([self.storage_id(thread_id)])

    @io
    def erase_messages(
        self, thread_id: str, ids: Iterable[str], rewrite: CheckpointRewrite, *, vacuum: bool = False
    ) -> EraseResult:
        """Erase messages of the thread's session (``SessionManager.erase_messages``), taking
        them out of its checkpoints and pending writes first through ``rewrite`` (the saver's),
        so that none of their text stays in the store."""
        return self.manager.erase_messages(thread_id, ids, vacuum=vacuum, checkpoints=rewrite)

    @io
    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> int:
        """Copy every checkpoint and write of one thread to another (registered if it is not);
        checkpoints the target holds already stay. The number copied."""
        source, target = self.storage_id(source_thread_id), self.storage_id(target_thread_id)
        self._register(target_thread_id)
        return self.store.copy_checkpoints(source, target, self.namespace, target_thread_id)

    @io
    def delete_runs(self, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints (and their writes) these runs made in the namespace's threads;
        the number deleted."""
        runs = [check_text(run, "run_id") for run in run_ids]
        if not all(isinstance(run, str) for run in runs):
            raise InvalidInputError("run ids are strings")
        return self.store.delete_checkpoint_runs(self.namespace, runs)

    @io
    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> int:
        """Delete the threads' checkpoints but the latest of each checkpoint namespace
        (``keep_latest``, which keeps its writes and leaves it without a parent) or all of them
        (``delete``); the number deleted. ``keep_latest`` refuses (``ConflictError``, nothing
        deleted) when a thread's graph uses a ``DeltaChannel``, whose value is rebuilt from
        older checkpoints."""
        if strategy not in PRUNE_STRATEGIES:
            raise InvalidInputError(f"strategy must be one of {PRUNE_STRATEGIES}, not {strategy!r}")
        session_ids = [self.storage_id(thread_id) for thread_id in thread_ids]
        if not session_ids:
            return 0
        keep_latest = strategy == "keep_latest"
        if keep_latest:
            delta = self.store.delta_checkpoint_sessions(session_ids)
            if delta:
                raise ConflictError(
                    f"prune(strategy='keep_latest') refused: the threads of sessions {delta} use a DeltaChannel,"
                    " whose latest value is rebuilt from older checkpoints; nothing was pruned"
                    " (strategy='delete' removes whole threads)"
                )
        return self.store.delete_checkpoints(session_ids, keep_latest=keep_latest)


def _metadata_items(metadata: Mapping[str, Any] | None) -> Iterator[tuple[str, Any]]:
    """A metadata filter's items, checked: string keys without ``"``, JSON values."""
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise InvalidInputError(f"a metadata filter is a mapping, not {type(metadata).__name__}")
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or '"' in key:
            raise InvalidInputError(f"a metadata filter key is a non-empty string without '\"', not {key!r}")
        if not _is_json(value):
            raise InvalidInputError(f"the metadata filter's value of {key!r} is not JSON: {value!r}")
        yield check_text(key, "metadata key"), value


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, (list, tuple)):
        return all(_is_json(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False
