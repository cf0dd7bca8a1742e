"""``Session``: one conversation tree in a store, with sync methods and async twins."""

from __future__ import annotations

import uuid
from array import array
from datetime import datetime
from pathlib import Path
from typing import Any, AsyncIterator, Iterable, Iterator, Sequence

from ._async import async_twin, run_in_thread
from ._time import from_us, now_us, to_us
from .errors import MessageTooLargeError
from .messages import (
    COMPACTION_ID_PREFIX,
    MessageInput,
    SessionMessage,
    TextPart,
    message_from_storage,
    parse_message,
    storage_json,
    text_content,
)
from .models import AppendResult, Compaction, RecentHistory, SearchResult
from .overlays import Segment, plan_overlays
from .stores.base import LATEST, CompactionRow, MessageRecord, MessageRow, PathEntry, Store, _Latest
from .stores.sqlite import SqliteStore
from .tokens import estimate_message_tokens

def open_store(store: Any) -> tuple[Store, bool]:
    """A store object for ``store`` (a path, ``":memory:"``, a ``postgresql://`` URL or a store),
    and whether the caller opened it (and so must close it)."""
    if isinstance(store, Store):
        return store, False
    if isinstance(store, Path):
        return SqliteStore(store), True
    if isinstance(store, str):
        if store.startswith(("postgresql://", "postgres://")):
            try:
                from .stores.postgres import PostgresStore
            except ModuleNotFoundError as error:
                raise ImportError(
                    "PostgreSQL stores need the postgres extra: pip install 'session-memory[postgres]'"
                ) from error
            return PostgresStore(store), True
        return SqliteStore(store), True
    raise TypeError(f"store must be a path, ':memory:', a postgresql:// URL or a Store, not {type(store).__name__}")


class Session:
    """A conversation stored as a tree of messages.

    ``store`` is a SQLite path, ``":memory:"`` (the default), a ``postgresql://`` URL or a store
    object. The session closes the store only if it opened it. Builder methods return the
    session; every method that touches storage has an ``a``-prefixed async twin.
    """

    def __init__(
        self,
        store: Any = ":memory:",
        *,
        reserved_metadata_keys: Iterable[str] = (),
        max_message_bytes: int | None = None,
    ) -> None:
        self.store, self._owns_store = open_store(store)
        self.session_id = ""
        self.reserved_metadata_keys = frozenset(reserved_metadata_keys)
        self.max_message_bytes = max_message_bytes

    create = classmethod(lambda cls, store=":memory:", **options: cls(store, **options))
    create.__doc__ = "The constructor under the reference's name: ``Session.create(store)``."

    def __repr__(self) -> str:
        return f"Session({self.store!r}, session_id={self.session_id!r})"

    # -- builder ---------------------------------------------------------------------------

    def for_session(self, session_id: str) -> "Session":
        """Scope this session to ``session_id`` (the default is ``""``)."""
        if not isinstance(session_id, str):
            raise TypeError("session_id must be a string")
        self.session_id = session_id
        return self

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the store if this session opened it."""
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Session":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # -- writes ----------------------------------------------------------------------------

    def append_message(
        self, message: MessageInput, parent_id: "str | None | _Latest" = LATEST, *, source: str | None = None
    ) -> AppendResult:
        """Store a message under ``parent_id`` (default: the latest leaf; ``None``: a new root).

        An id already stored in this session is not stored again (``inserted=False``). A message
        whose id starts with ``compaction_`` is a synthetic summary echoed back and is never
        stored. ``source="client"`` strips the reserved metadata keys and enforces
        ``max_message_bytes``.
        """
        parsed = self._accept(message, source)
        if parsed.id.startswith(COMPACTION_ID_PREFIX):
            return AppendResult(False, parsed)
        created = parsed.created_at
        record = self._record(parsed, to_us(created) if created else now_us())
        if self.store.insert_message(self.session_id, record, parent_id) is not None:
            if created is None:
                parsed = parsed.model_copy(update={"created_at": from_us(record.created_at_us)})
            return AppendResult(True, parsed)
        return AppendResult(False, self.get_message(parsed.id) or parsed)

    def import_message(
        self, message: MessageInput, *, parent_id: str | None, created_at: datetime
    ) -> AppendResult:
        """Store a message as it is, with its given parent and creation time (for migrations)."""
        parsed = parse_message(message)
        record = self._record(parsed, to_us(created_at))
        if self.store.insert_message(self.session_id, record, parent_id) is not None:
            return AppendResult(True, parsed.model_copy(update={"created_at": from_us(record.created_at_us)}))
        return AppendResult(False, self.get_message(parsed.id) or parsed)

    def update_message(self, message: MessageInput) -> bool:
        """Replace a stored message's content (its parent and creation time stay); ``False`` if
        no message with that id is stored."""
        parsed = parse_message(message)
        return self.store.update_message(self.session_id, self._record(parsed, 0))

    def delete_messages(self, ids: Iterable[str]) -> list[str]:
        """Delete messages by id and return those deleted. Their children become roots."""
        if isinstance(ids, str):
            ids = [ids]
        return self.store.delete_messages(self.session_id, list(ids))

    def clear_messages(self) -> None:
        """Delete every message and compaction of this session (context blocks stay)."""
        self.store.clear_session(self.session_id)

    def _accept(self, message: MessageInput, source: str | None) -> SessionMessage:
        parsed = parse_message(message)
        if source != "client":
            return parsed
        if self.reserved_metadata_keys & parsed.metadata.keys():
            metadata = {k: v for k, v in parsed.metadata.items() if k not in self.reserved_metadata_keys}
            parsed = parsed.model_copy(update={"metadata": metadata})
            parsed.__pydantic_fields_set__.add("metadata")
        if self.max_message_bytes is not None:
            size = len(storage_json(parsed).encode("utf-8"))
            if size > self.max_message_bytes:
                raise MessageTooLargeError(
                    f"message {parsed.id!r} is {size} bytes, over the limit of {self.max_message_bytes}"
                )
        return parsed

    @staticmethod
    def _record(message: SessionMessage, created_at_us: int) -> MessageRecord:
        return MessageRecord(
            id=message.id,
            role=message.role,
            content=storage_json(message),
            text=text_content(message),
            tokens=estimate_message_tokens([message]),
            created_at_us=created_at_us,
        )

    # -- reads -----------------------------------------------------------------------------

    def get_message(self, message_id: str) -> SessionMessage | None:
        """One stored message of this session, or ``None``."""
        return _parse_row(self.store.get_message(self.session_id, message_id))

    def get_latest_leaf(self) -> SessionMessage | None:
        """The childless message created last (ties: inserted last), without overlays."""
        return _parse_row(self.store.latest_leaf(self.session_id))

    def get_branches(self, message_id: str) -> list[SessionMessage]:
        """The direct children of a message, oldest first."""
        rows = self.store.children(self.session_id, message_id)
        return [m for m in map(_parse_row, rows) if m is not None]

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """The number of stored messages on the path to ``leaf_id`` (default: the latest leaf),
        overlays not collapsed; 0 when there is none."""
        leaf = self._leaf_id(leaf_id)
        totals = self.store.path_totals(self.session_id, leaf) if leaf else None
        return totals.depth if totals else 0

    def get_history(self, leaf_id: str | None = None) -> list[SessionMessage]:
        """The path root -> ``leaf_id`` (default: the latest leaf) with compaction overlays
        applied; ``[]`` when the id is not in this session."""
        return list(self.history(leaf_id))

    def history(self, leaf_id: str | None = None, *, newest_first: bool = False) -> Iterator[SessionMessage]:
        """Stream the path like ``get_history``, holding one chunk of rows in memory at a time."""
        plan = self._plan(leaf_id)
        for chunk in plan.chunks(newest_first):
            yield from plan.messages(chunk, self.store.fetch_rows(chunk.seqs))

    async def ahistory(
        self, leaf_id: str | None = None, *, newest_first: bool = False
    ) -> AsyncIterator[SessionMessage]:
        """Async twin of :meth:`history`: each chunk is read off the event loop."""
        plan = await run_in_thread(self._plan, leaf_id)
        for chunk in plan.chunks(newest_first):
            rows = await run_in_thread(self.store.fetch_rows, chunk.seqs)
            for message in plan.messages(chunk, rows):
                yield message

    def get_recent_history(
        self, max_bytes: int, *, leaf_id: str | None = None, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The longest suffix of the path whose stored size fits ``max_bytes`` (at least
        ``min_recent_messages`` messages, always the leaf), overlays applied within it."""
        leaf = self._leaf_id(leaf_id)
        totals = self.store.path_totals(self.session_id, leaf) if leaf else None
        if totals is None:
            return RecentHistory([], False, 0)
        window = self.store.path_tail(
            self.session_id, leaf, max(0, int(max_bytes)), max(1, int(min_recent_messages))
        )
        plan = _ReadPlan(window, self.store.get_compactions(self.session_id), self.store.fetch_chunk_rows)
        messages = [
            message
            for chunk in plan.chunks(False)
            for message in plan.messages(chunk, self.store.fetch_rows(chunk.seqs))
        ]
        return RecentHistory(messages, len(window) < totals.depth, totals.size)

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Messages of this session (every branch) containing every word of ``query``,
        stemmed, best match first. A query with no searchable word gives ``[]``."""
        rows = self.store.search_messages([self.session_id], query, limit)
        return [SearchResult(r.id, r.role, r.content, from_us(r.created_at_us), r.session_id) for r in rows]

    def _leaf_id(self, leaf_id: str | None) -> str | None:
        if leaf_id:
            return leaf_id
        row = self.store.latest_leaf(self.session_id)
        return row.id if row else None

    def _plan(self, leaf_id: str | None) -> "_ReadPlan":
        leaf = self._leaf_id(leaf_id)
        if leaf is None:
            return _ReadPlan([], [], self.store.fetch_chunk_rows)
        path = self.store.path(self.session_id, leaf)
        compactions = self.store.get_compactions(self.session_id) if path else []
        return _ReadPlan(path, compactions, self.store.fetch_chunk_rows)

    # -- compactions -----------------------------------------------------------------------

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> Compaction:
        """Store an overlay that shows ``summary`` instead of ``from .. to`` on every read."""
        row = CompactionRow(str(uuid.uuid4()), summary, from_message_id, to_message_id, now_us())
        self.store.add_compaction(self.session_id, row)
        return _compaction(row)

    def get_compactions(self) -> list[Compaction]:
        """Every overlay of this session, oldest first."""
        return [_compaction(row) for row in self.store.get_compactions(self.session_id)]

    # -- async twins -----------------------------------------------------------------------

    aappend_message = async_twin(append_message)
    aimport_message = async_twin(import_message)
    aupdate_message = async_twin(update_message)
    adelete_messages = async_twin(delete_messages)
    aclear_messages = async_twin(clear_messages)
    aget_message = async_twin(get_message)
    aget_latest_leaf = async_twin(get_latest_leaf)
    aget_branches = async_twin(get_branches)
    aget_path_length = async_twin(get_path_length)
    aget_history = async_twin(get_history)
    aget_recent_history = async_twin(get_recent_history)
    asearch = async_twin(search)
    aadd_compaction = async_twin(add_compaction)
    aget_compactions = async_twin(get_compactions)
    aclose = async_twin(close)


def _parse_row(row: MessageRow | None) -> SessionMessage | None:
    if row is None or row.id.startswith(COMPACTION_ID_PREFIX):
        return None
    return message_from_storage(row.content, from_us(row.created_at_us))


def _compaction(row: CompactionRow) -> Compaction:
    return Compaction(row.id, row.summary, row.from_message_id, row.to_message_id, from_us(row.created_at_us))


def summary_message(overlay: Any) -> SessionMessage:
    """The synthetic assistant message an overlay shows in place of the range it covers."""
    created = overlay.created_at if isinstance(overlay, Compaction) else from_us(overlay.created_at_us)
    return SessionMessage(
        id=COMPACTION_ID_PREFIX + overlay.id,
        role="assistant",
        parts=[TextPart(text=overlay.summary)],
        created_at=created,
    )


class _Chunk:
    __slots__ = ("items", "seqs")

    def __init__(self, items: list[Any], seqs: list[int]) -> None:
        self.items = items  # each an int (path position) or an overlay
        self.seqs = seqs


class _ReadPlan:
    """A path (ids only) with its overlays applied, read in bounded chunks."""

    def __init__(self, path: Sequence[PathEntry], overlays: Sequence[CompactionRow], chunk_rows: int) -> None:
        self.seqs = array("q", (entry.seq for entry in path))
        self.segments: list[Segment] = plan_overlays([entry.id for entry in path], overlays)
        self.chunk_rows = chunk_rows

    def chunks(self, newest_first: bool) -> Iterator[_Chunk]:
        items: list[Any] = []
        seqs: list[int] = []
        segments = reversed(self.segments) if newest_first else self.segments
        for segment in segments:
            if segment.overlay is not None:
                items.append(segment.overlay)
                continue
            positions = range(segment.end - 1, segment.start - 1, -1) if newest_first else range(segment.start, segment.end)
            for position in positions:
                items.append(position)
                seqs.append(self.seqs[position])
                if len(seqs) >= self.chunk_rows:
                    yield _Chunk(items, seqs)
                    items, seqs = [], []
        if items:
            yield _Chunk(items, seqs)

    def messages(self, chunk: _Chunk, rows: dict[int, MessageRow]) -> Iterator[SessionMessage]:
        for item in chunk.items:
            if isinstance(item, int):
                message = _parse_row(rows.get(self.seqs[item]))
                if message is not None:
                    yield message
            else:
                yield summary_message(item)
