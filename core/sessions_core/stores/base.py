"""The storage interface. Its docstrings are the contract every backend passes
(``tests/conformance`` runs it against each one).

A store holds many sessions; every method takes the ``session_id`` it acts on and never
touches another session's rows. Stores only execute SQL: validation, JSON encoding, overlay
application and events live in ``Session``. All methods are synchronous; ``Session`` runs them
in a worker thread for its async twins.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from array import array
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any, NamedTuple, NoReturn

from ..attachments import Blob


class _Latest:
    """The sentinel default of ``parent_id``: attach to the latest leaf."""

    _instance: _Latest | None = None

    def __new__(cls) -> _Latest:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "LATEST"

    def __reduce__(self) -> str:
        return "LATEST"


LATEST = _Latest()
"""Attach a new message to the session's latest leaf (``None`` starts a new root)."""


def utf8_size(text: str) -> int:
    """``len(text.encode("utf-8"))`` without holding a copy of a long text."""
    if text.isascii():
        return len(text)
    step = 1 << 16
    return sum(len(text[i : i + step].encode("utf-8")) for i in range(0, len(text), step))


@dataclass(slots=True)
class MessageRecord:
    """What a store writes for one message; computed by the caller, never changed after (not
    frozen only because a frozen dataclass costs four times as much to build, once per append)."""

    id: str
    role: str
    content: str
    """The message JSON."""
    text: str
    """What full-text search indexes."""
    tokens: int
    created_at_us: int
    """Creation time in microseconds since the Unix epoch (UTC)."""
    blobs: tuple[Blob, ...] = ()
    """Payloads the content refers to (``sessions-blob:`` references), stored once each."""

    @property
    def size(self) -> int:
        """Bytes of the stored JSON plus its payloads (what byte budgets count)."""
        return utf8_size(self.content) + sum(len(blob.data) for blob in self.blobs)

    def insert_params(self, session_id: str) -> dict[str, object]:
        """The named parameters of a store's insert statement."""
        return {
            "s": session_id,
            "id": self.id,
            "role": self.role,
            "created_at": self.created_at_us,
            "tokens": self.tokens,
            "bytes": self.size,
            "text": self.text,
            "content": self.content,
        }


class MessageRow(NamedTuple):
    id: str
    parent_id: str | None
    role: str
    created_at_us: int
    content: str


# The tables that hold rows of a session, and the column naming it: what inspection counts.
SUMMARY_SOURCES = (
    ("session_messages", "session_id"),
    ("session_compactions", "session_id"),
    ("cached_prompts", "session_id"),
    ("search_entries", "session_id"),
    ("context_block_versions", "session_id"),
    ("checkpoints", "session_id"),
    ("checkpoint_writes", "session_id"),
    ("sessions", "storage_id"),
)


class StoredContent(NamedTuple):
    """What a history read needs of a row: its creation time and its stored JSON."""

    created_at_us: int
    content: str


class PathEntry(NamedTuple):
    """One row of a path, without its content."""

    seq: int
    id: str
    role: str
    size: int
    """UTF-8 bytes of the stored JSON."""
    tokens: int
    """The token estimate stored with the message."""


class PathTotals(NamedTuple):
    """Running totals from the root of a path down to (and including) one message."""

    depth: int
    tokens: int
    size: int


class Inserted(NamedTuple):
    """Where an inserted message landed."""

    parent_id: str | None
    totals: PathTotals


class CompactionRow(NamedTuple):
    id: str
    summary: str
    from_message_id: str
    to_message_id: str
    created_at_us: int


class BlockVersionRow(NamedTuple):
    """One stored version of a context block (or of a keyed entry of one)."""

    version: int
    content: str
    created_at_us: int
    source: str
    """``"tool"`` (the model's tools), ``"code"`` (the Python API) or ``"import"``."""
    tool_call_id: str | None


class OverlayRow(NamedTuple):
    """A compaction overlay with the depths of its two ends, when known: set when the first
    message is an ancestor of the last (``-1`` for both when the overlay can never apply),
    ``None`` when not checked since the session's tree last changed."""

    compaction: CompactionRow
    from_depth: int | None
    to_depth: int | None


class SearchRow(NamedTuple):
    session_id: str
    id: str
    role: str
    content: str
    created_at_us: int


class SessionRow(NamedTuple):
    """A session of a manager's registry."""

    namespace: str
    id: str
    storage_id: str
    """The ``session_id`` its messages, overlays and blocks are stored under."""
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at_us: int
    updated_at_us: int

    @classmethod
    def new(cls, namespace: str, session_id: str, storage_id: str, name: str, moment_us: int) -> SessionRow:
        """A session registered now: no parent, model, source, usage or end."""
        return cls(namespace, session_id, storage_id, name, None, None, None, 0, 0, 0.0, None, moment_us, moment_us)


SESSION_COLUMNS = (
    "namespace",
    "id",
    "storage_id",
    "name",
    "parent_session_id",
    "model",
    "source",
    "input_tokens",
    "output_tokens",
    "estimated_cost",
    "end_reason",
    "created_at",
    "updated_at",
)
"""The ``sessions`` table's columns, in ``SessionRow`` order."""


class SessionChanges(NamedTuple):
    """An update of a registry row: ``None`` keeps a field; counters are added."""

    name: str | None = None
    end_reason: str | None = None
    input_tokens: int = 0
    output_tokens: int = 0
    estimated_cost: float = 0.0
    updated_at_us: int = 0


def split_storage_id(storage_id: str) -> tuple[str, str]:
    """The namespace and session id a storage id names by its form, the inverse of
    ``SessionManager.storage_id``: ``"ns:id"`` -> ``("ns", "id")``; ``":a:b"`` and ``"id"`` are
    of the default namespace ``""``. What a registry row says wins over this."""
    if storage_id.startswith(":"):
        return "", storage_id[1:]
    namespace, colon, session_id = storage_id.partition(":")
    return (namespace, session_id) if colon else ("", storage_id)


class StoredSession(NamedTuple):
    """A session of a store, with its last activity (``SessionErasure.session_activity``)."""

    namespace: str
    id: str
    """The id within its namespace (the registry's, else what the storage id's form says)."""
    storage_id: str
    last_activity_us: int
    registered: bool


@dataclass(frozen=True, slots=True)
class RowCounts:
    """Rows of each kind that a removal of sessions deletes (or would)."""

    registry: int = 0
    """Registry rows of a ``SessionManager``."""
    messages: int = 0
    compactions: int = 0
    blocks: int = 0
    """Context blocks (labels); their versions are in ``block_versions``."""
    block_versions: int = 0
    """Kept versions of blocks and of searchable entries."""
    search_entries: int = 0
    prompts: int = 0
    """Cached system prompts."""
    blobs: int = 0
    """Payloads no other session refers to."""
    vectors: int = 0
    """Vectors semantic recall recorded as sent to its index."""
    checkpoints: int = 0
    """LangGraph checkpoints of the session's thread (``CheckpointStore``)."""
    checkpoint_writes: int = 0
    """Their pending writes."""

    def __add__(self, other: RowCounts) -> RowCounts:
        return RowCounts(*(a + b for a, b in zip(self.as_tuple(), other.as_tuple())))

    def as_tuple(self) -> tuple[int, ...]:
        return tuple(getattr(self, field.name) for field in fields(self))

    def as_dict(self) -> dict[str, int]:
        """The counts by kind, in field order."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @property
    def total(self) -> int:
        return sum(self.as_tuple())


class Removal(NamedTuple):
    """What ``SessionErasure.remove_sessions`` removed: the sessions (storage ids) and the rows."""

    storage_ids: tuple[str, ...]
    counts: RowCounts


# -- inspection and transfer rows (see the last section of ``Store``) ------------------------


class SessionSummary(NamedTuple):
    """A session id holding rows of any kind, with its message count and registry row."""

    session_id: str
    """The storage id (what ``Session.for_session`` takes; ``"namespace:id"`` for a manager's)."""
    message_count: int
    first_created_at_us: int | None
    """The oldest message's ``created_at``; ``None`` without messages."""
    last_created_at_us: int | None
    """The newest message's ``created_at``; ``None`` without messages."""
    registry: SessionRow | None
    """The manager registry row whose ``storage_id`` is this session, if any."""


class BlockRow(NamedTuple):
    label: str
    content: str
    updated_at_us: int


class SearchEntryRow(NamedTuple):
    seq: int
    """Insertion order, for paging."""
    label: str
    key: str
    content: str
    created_at_us: int
    updated_at_us: int


@dataclass(frozen=True, slots=True)
class StoreStats:
    """Row counts of a whole store, with what the backend knows of its size and schema."""

    sessions: int
    """Distinct session ids holding rows of any kind."""
    registered_sessions: int
    messages: int
    compactions: int
    blocks: int
    cached_prompts: int
    search_entries: int
    schema_version: int
    size_bytes: int | None = None
    """The database's size as the backend reports it (``None`` when unknown)."""


class CheckpointWrite(NamedTuple):
    """A pending write of a checkpoint: what one task wrote to one channel."""

    task_id: str
    idx: int
    """Its position among the task's writes (LangGraph's special channels have negative ones)."""
    channel: str
    type: str
    """The serialiser's type tag of ``value``."""
    value: bytes | None
    task_path: str = ""


class CheckpointRow(NamedTuple):
    """A stored checkpoint of a thread, with its pending writes (in no particular order)."""

    thread_id: str
    """The thread's id in its namespace (the registry id of its session)."""
    checkpoint_ns: str
    checkpoint_id: str
    parent_checkpoint_id: str | None
    type: str
    """The serialiser's type tag of ``checkpoint``."""
    checkpoint: bytes
    metadata: str
    """The metadata as JSON text."""
    writes: tuple[CheckpointWrite, ...] = ()


class CheckpointQuery(NamedTuple):
    """Which checkpoints :meth:`CheckpointStore.list_checkpoints` returns: of one session
    (``session_id``) or of every session of ``namespace`` (``session_id`` ``None``); of one
    ``checkpoint_ns`` and ``checkpoint_id`` when given; whose metadata holds every key of
    ``metadata`` with that JSON value (primitives compared for equality, objects and arrays by
    containment where the backend can, else by their compact JSON); with an id below ``before``."""

    namespace: str
    session_id: str | None = None
    checkpoint_ns: str | None = None
    checkpoint_id: str | None = None
    metadata: tuple[tuple[str, object], ...] = ()
    before: str | None = None


class ItemRow(NamedTuple):
    """A stored item: a JSON value under ``(prefix, key)``, ``prefix`` being its namespace's
    labels joined by ``.``; times in microseconds since the epoch."""

    prefix: str
    key: str
    value: str
    """The value as JSON text (an object)."""
    created_at_us: int
    updated_at_us: int
    version: int


class ItemWrite(NamedTuple):
    """A write of an item: ``value`` (JSON text of an object) stored as its next version, or
    the item deleted when ``value`` is ``None``. ``text`` is what keyword search indexes of it
    (``None``: not indexed); ``vectors`` the embeddings of its indexed fields, replacing those it
    had (``None``: its vectors are kept; empty: removed). ``ttl_minutes`` sets when it expires."""

    prefix: str
    key: str
    value: str | None
    text: str | None = None
    vectors: tuple[tuple[str, bytes], ...] | None = ()
    ttl_minutes: float | None = None


class ItemCondition(NamedTuple):
    """That an item's value at ``path`` (object keys, outermost first) compares to ``value``
    with ``op`` (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``): numbers as numbers,
    strings as strings, booleans and ``null`` as JSON, objects and arrays by their JSON; a
    comparison of different kinds is false (``$ne``: true), a missing path is ``null``."""

    path: tuple[str, ...]
    op: str
    value: Any


class ItemVersionRow(NamedTuple):
    """A version of an item: the value it was given (``None``: the item was deleted)."""

    version: int
    value: str | None
    created_at_us: int


CheckpointKey = tuple[str, str, str]
"""``(checkpoint_id, session_id, checkpoint_ns)``: where a page of checkpoints ends."""


class RequiredStore(ABC):
    """What every store implements: the message tree, compaction overlays and context blocks
    (thirteen abstract methods, with ``setup`` and ``close``, which default to doing nothing).
    A store of one's own subclasses :class:`Store` and implements these; the optional
    capabilities are the other bases of ``Store``."""

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        """Create or migrate the schema. Idempotent; safe when several processes run it."""
        return None

    def close(self) -> None:
        """Release what the store opened itself. Idempotent."""
        self._closed = True

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called (a store that does not say is never closed)."""
        return bool(getattr(self, "_closed", False))

    # -- message writes --------------------------------------------------------------------

    @abstractmethod
    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        """Store ``records`` as a chain in ONE transaction: the first under ``parent_id``, each
        next one under the previous record's id.

        ``LATEST`` resolves to the session's latest leaf at the moment of the insert (a root when
        the session is empty); ``None`` makes a new root; an id that is not in this session also
        makes a root. A record whose id already exists in this session is not stored again
        (``None``: the first content and parent win) and the chain continues from that stored
        message. If anything fails, nothing of the batch is stored. ``[]`` stores nothing.
        """

    @abstractmethod
    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        """Replace the content, role, text and token estimate of an existing message, keeping
        its parent and creation time. Return ``False`` (and change nothing) if it does not exist."""

    @abstractmethod
    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        """Delete these messages (unknown ids are ignored) and return the ids deleted.

        Children are not re-attached: each child of a deleted message becomes a root, so a path
        read through it stops there. Compaction rows are not touched.
        """

    @abstractmethod
    def clear_session(self, session_id: str) -> None:
        """Delete every message and compaction of the session."""

    # -- message reads ---------------------------------------------------------------------

    @abstractmethod
    def get_message(self, session_id: str, message_id: str) -> MessageRow | None:
        """The stored row of one message of this session."""

    @abstractmethod
    def latest_leaf(self, session_id: str) -> MessageRow | None:
        """The childless message with the greatest ``created_at``, ties broken by the latest
        insert; ``None`` for an empty session."""

    @abstractmethod
    def children(self, session_id: str, message_id: str) -> list[MessageRow]:
        """The direct children of a message, oldest first (ties by insertion order)."""

    @abstractmethod
    def path(self, session_id: str, leaf_id: str) -> list[PathEntry]:
        """The path root -> ``leaf_id`` without content; ``[]`` if the id is not in this session.
        ``PathEntry.seq`` is the store's key for the row (any int unique in the store)."""

    @abstractmethod
    def fetch_contents(self, seqs: Sequence[int]) -> dict[int, StoredContent]:
        """The creation time and stored JSON of the rows with these ``PathEntry.seq`` keys
        (missing ones are absent); callers pass at most ``fetch_chunk_rows`` at once."""

    # -- compactions -----------------------------------------------------------------------

    @abstractmethod
    def add_compaction(self, session_id: str, row: CompactionRow) -> None:
        """Store a compaction overlay."""

    @abstractmethod
    def get_compactions(self, session_id: str) -> list[CompactionRow]:
        """Every compaction of the session, oldest first (ties by insertion order)."""

    # -- context blocks --------------------------------------------------------------------

    @abstractmethod
    def get_blocks(self, session_id: str, labels: Sequence[str]) -> dict[str, str]:
        """The stored content of the session's blocks among ``labels``, by label (a label with
        no stored block is absent)."""

    @abstractmethod
    def write_block(
        self,
        session_id: str,
        label: str,
        content: str,
        *,
        key: str | None = None,
        source: str = "code",
        tool_call_id: str | None = None,
        keep: int | None = None,
        at_us: int | None = None,
        created_at_us: int | None = None,
        version: int | None = None,
    ) -> int | None:
        """Create or replace a block's content, in one transaction; ``key`` (passed only to a
        store with ``SearchEntries``) names an entry of a searchable block. A store with
        ``BlockVersions`` keeps the write as the block's next version and returns its number
        (``keep``: versions kept at most, the oldest go; ``at_us``: the write's time;
        ``version``: the number the content has already, for an import); one without returns
        ``None``."""


class UnsupportedByStore:
    """Raises :class:`~sessions_core.errors.UnsupportedOperationError` for a method of an
    optional capability that a store does not implement."""

    @staticmethod
    def refuse(store: object, capability: str, method: str) -> NoReturn:
        from ..errors import UnsupportedOperationError

        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional {capability} capability"
            f" ({method}); use a store that does (SqliteStore, PostgresStore) for this feature"
        )


_refuse = UnsupportedByStore.refuse


class ReadPlanner(RequiredStore):
    """Optional fast paths of the history read. Each default is correct, built on the required
    methods; a store overrides them to answer without walking or reading whole paths."""

    fetch_chunk_rows: int = 200
    """How many rows a caller fetches at once with :meth:`RequiredStore.fetch_contents`."""

    def insert_message(
        self, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> Inserted | None:
        """:meth:`RequiredStore.insert_messages` of one record."""
        return self.insert_messages(session_id, [record], parent_id)[0]

    def latest_leaf_id(self, session_id: str) -> str | None:
        """The id of :meth:`RequiredStore.latest_leaf` (a store can read it without the row)."""
        row = self.latest_leaf(session_id)
        return row.id if row is not None else None

    def latest_leaf_totals(self, session_id: str) -> tuple[str, PathTotals] | None:
        """The id of the latest leaf and its :meth:`path_totals` (a store can read both in one
        statement); ``None`` for an empty session."""
        leaf = self.latest_leaf_id(session_id)
        totals = None if leaf is None else self.path_totals(session_id, leaf)
        return None if leaf is None or totals is None else (leaf, totals)

    def path_ids(self, session_id: str, leaf_id: str) -> tuple[array, list[str]]:
        """The path root -> ``leaf_id`` as row keys (an ``array('q')``) and ids, in order: what
        a read needs, without a tuple per message (a 100,000-message path: ~7 MB, not ~25)."""
        path = self.path(session_id, leaf_id)
        return array("q", (entry.seq for entry in path)), [entry.id for entry in path]

    def path_tail(self, session_id: str, leaf_id: str, max_bytes: int, min_rows: int) -> list[PathEntry]:
        """The longest suffix of the path to ``leaf_id`` (root-most first) whose sizes sum to at
        most ``max_bytes``, extended to at least ``min_rows`` rows; it always holds the leaf."""
        path = self.path(session_id, leaf_id)
        start, total = len(path), 0
        while start > 0:
            size = path[start - 1].size
            if total + size > max_bytes and len(path) - start >= max(min_rows, 1):
                break
            total += size
            start -= 1
        return path[start:]

    def path_totals(self, session_id: str, leaf_id: str) -> PathTotals | None:
        """Depth, summed token estimates and summed sizes of the path to ``leaf_id`` (a store
        can read them from the message row alone, with no walk)."""
        path = self.path(session_id, leaf_id)
        if not path:
            return None
        return PathTotals(len(path), sum(e.tokens for e in path), sum(e.size for e in path))

    def short_path_contents(self, session_id: str, leaf_id: str, limit: int) -> dict[int, StoredContent] | None:
        """:meth:`RequiredStore.fetch_contents` of the whole path to ``leaf_id``, root first (keyed by
        seq), when it holds at most ``limit`` rows; ``None`` when it holds more. A store can read
        it in one statement."""
        seqs, _ = self.path_ids(session_id, leaf_id)
        if len(seqs) > limit:
            return None
        rows = self.fetch_contents(seqs)
        return {seq: rows[seq] for seq in seqs if seq in rows}

    def short_latest_path_contents(self, session_id: str, limit: int) -> dict[int, StoredContent] | None:
        """:meth:`short_path_contents` of the latest leaf (a store can find the leaf in the
        statement that reads its path); for an empty session ``{}``, or ``None`` when the store
        cannot tell it from a long path."""
        leaf_id = self.latest_leaf_id(session_id)
        return {} if leaf_id is None else self.short_path_contents(session_id, leaf_id, limit)

    def add_compaction_unless(
        self,
        session_id: str,
        make_row: Callable[[], CompactionRow],
        superseded: Callable[[list[CompactionRow]], bool],
    ) -> CompactionRow | None:
        """Store ``make_row()`` unless ``superseded(every compaction of the session)`` is true;
        the row stored, or ``None``. The row is made after the check, so its ``created_at``
        orders it after every compaction the check saw. A store that can makes the check and the
        insert one step against other writers of the session (this default does not)."""
        if superseded(self.get_compactions(session_id)):
            return None
        row = make_row()
        self.add_compaction(session_id, row)
        return row

    def overlays(self, session_id: str) -> list[OverlayRow]:
        """:meth:`RequiredStore.get_compactions` with the depths of each overlay's ends where the store
        keeps them (this default keeps none: reads then walk whole paths)."""
        return [OverlayRow(row, None, None) for row in self.get_compactions(session_id)]

    def overlays_and_short_path(
        self, session_id: str, leaf_id: str | None, limit: int
    ) -> tuple[list[OverlayRow], dict[int, StoredContent] | None]:
        """:meth:`overlays` and, when there are none, :meth:`short_path_contents` of ``leaf_id``
        (``None``: :meth:`short_latest_path_contents`); ``None`` for the path when there are
        overlays. A store can read both at once (then also reading a path it will not use)."""
        overlays = self.overlays(session_id)
        if overlays:
            return overlays, None
        if leaf_id is None:
            return [], self.short_latest_path_contents(session_id, limit)
        return [], self.short_path_contents(session_id, leaf_id, limit)

    def overlays_and_totals(
        self, session_id: str, leaf_id: str | None
    ) -> tuple[list[OverlayRow], tuple[str, PathTotals] | None]:
        """:meth:`overlays`, and the leaf ``leaf_id`` (``None``: the latest) with its
        :meth:`path_totals` (``None``: no such leaf). A store can read both at once."""
        overlays = self.overlays(session_id)
        if leaf_id is None:
            return overlays, self.latest_leaf_totals(session_id)
        totals = self.path_totals(session_id, leaf_id)
        return overlays, None if totals is None else (leaf_id, totals)

    def with_overlays(self, session_ids: Sequence[str]) -> set[str]:
        """Which of ``session_ids`` hold a compaction overlay (one query for many sessions)."""
        return {session_id for session_id in session_ids if self.get_compactions(session_id)}

    def path_up(self, session_id: str, start_id: str, *, above: bool = False) -> tuple[array, list[str], array, bool]:
        """The path from ``start_id`` (``above``: from its parent) up towards the root, as row
        keys, ids and stored token estimates (top first), ending at (and holding) the first
        row that ends an overlay whose depths are known, and whether its top row is a root; empty
        if there is no such start."""
        path = self.path(session_id, start_id)
        if above:
            path = path[:-1]
        stops = {
            o.compaction.to_message_id
            for o in self.overlays(session_id)
            if o.from_depth is not None and o.from_depth >= 0
        }
        top = next((i for i in range(len(path) - 1, -1, -1) if path[i].id in stops), None)
        kept = path if top is None else path[top:]
        root = top is None and bool(path)
        return array("q", (e.seq for e in kept)), [e.id for e in kept], array("q", (e.tokens for e in kept)), root

    def span_ids(self, session_id: str, from_id: str, to_id: str) -> list[str]:
        """The ids from ``to_id`` up to and including its ancestor ``from_id`` (leaf first): what
        an overlay over them covers; ``[]`` if ``from_id`` is not ``to_id`` or an ancestor of it."""
        ids = self.path_ids(session_id, to_id)[1]
        if from_id not in ids:
            return []
        return ids[ids.index(from_id) :][::-1]

    def get_block(self, session_id: str, label: str) -> str | None:
        """The stored content of one of the session's context blocks, or ``None``."""
        return self.get_blocks(session_id, [label]).get(label)

    def set_block(self, session_id: str, label: str, content: str) -> None:
        """Create or replace a session's context block (:meth:`RequiredStore.write_block`)."""
        self.write_block(session_id, label, content)


class BlobStore(RequiredStore):
    """Optional: payloads stored once, apart from the messages referring to them. A store without
    it keeps attachments inline in the message JSON."""

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        """The stored payloads with these digests (missing ones are absent). A payload lives as
        long as some message refers to it; ``Store.insert_messages`` stores ``record.blobs``."""
        _refuse(self, "BlobStore", "get_blobs")


class BlockVersions(RequiredStore):
    """Optional: every write of a context block kept as a version (``get_context_history``,
    ``restore_context``, ``edit_context``)."""

    def block_versions(
        self, session_id: str, label: str, key: str | None = None, limit: int | None = None
    ) -> list[BlockVersionRow]:
        """The block's (or entry's) kept versions, newest first, at most ``limit``; ``[]`` from a
        store that keeps none (this default)."""
        return []


class PromptCache(RequiredStore):
    """Optional: the frozen system prompt persisted per session (``with_cached_prompt()``)."""

    def get_cached_prompt(self, session_id: str) -> str | None:
        """The session's persisted frozen system prompt, or ``None``."""
        _refuse(self, "PromptCache", "get_cached_prompt")

    def set_cached_prompt(self, session_id: str, prompt: str) -> None:
        """Persist the session's frozen system prompt."""
        _refuse(self, "PromptCache", "set_cached_prompt")


class SearchEntries(RequiredStore):
    """Optional: the keyed entries of searchable context blocks (``StoreSearchContext``)."""

    def set_search_entry(self, session_id: str, label: str, key: str, content: str) -> None:
        """Create or replace an entry of a searchable block; the old text is no longer found."""
        _refuse(self, "SearchEntries", "set_search_entry")

    def count_search_entries(self, session_id: str, label: str) -> int:
        """How many entries a searchable block holds."""
        _refuse(self, "SearchEntries", "count_search_entries")

    def search_entries(
        self, session_id: str, label: str, query: str, limit: int, match: str = "any"
    ) -> list[tuple[str, str]]:
        """``(key, content)`` of the block's entries matching ``query`` as
        ``TextSearch.search_messages`` matches, best first."""
        _refuse(self, "SearchEntries", "search_entries")


class TextSearch(RequiredStore):
    """Optional: full-text search of messages (``Session.search``, ``search_context``)."""

    def search_messages(
        self, session_ids: Sequence[str] | None, query: str, limit: int, match: str = "any"
    ) -> list[SearchRow]:
        """Messages matching ``query``, best match first.

        ``match="any"``: containing any meaningful word of it, those with every word first, by
        BM25 (``sessions_core.ranking``); ``"all"``: containing every word (stemmed), ranked by
        relevance. ``session_ids=None`` searches every session. ``query`` is the user's raw
        text: the store quotes it; a query with no searchable word gives ``[]``. ``match`` other
        than those two raises ``ValueError``.
        """
        _refuse(self, "TextSearch", "search_messages")


class SessionRegistry(RequiredStore):
    """Optional: the named sessions of a ``SessionManager``, by namespace."""

    def register_session(self, row: SessionRow) -> None:
        """Add a session to a namespace's registry."""
        _refuse(self, "SessionRegistry", "register_session")

    def get_session_row(self, namespace: str, session_id: str) -> SessionRow | None:
        """One registered session, or ``None``."""
        _refuse(self, "SessionRegistry", "get_session_row")

    def list_session_rows(self, namespace: str) -> list[SessionRow]:
        """The namespace's sessions, most recently updated first."""
        _refuse(self, "SessionRegistry", "list_session_rows")

    def update_session_row(self, namespace: str, session_id: str, changes: SessionChanges) -> bool:
        """Apply ``changes`` (set the name or end reason, add to counters, set ``updated_at``);
        ``False`` if the session is not registered."""
        _refuse(self, "SessionRegistry", "update_session_row")

    def delete_session(self, namespace: str, session_id: str) -> bool:
        """Atomically remove a registered session with its messages, overlays, blocks, cached
        prompt and search entries; ``False`` if it is not registered."""
        _refuse(self, "SessionRegistry", "delete_session")

    def fork_session(self, source_storage_id: str, leaf_id: str, row: SessionRow) -> None:
        """Atomically register ``row`` and copy into it the path root -> ``leaf_id`` of the source
        (ids, parents, times and estimates kept) with the overlays lying on that path."""
        _refuse(self, "SessionRegistry", "fork_session")

    def search_sessions(self, namespace: str, query: str, limit: int, match: str = "any") -> list[SearchRow]:
        """Like ``TextSearch.search_messages`` over every session registered in ``namespace``;
        each row's ``session_id`` is the registry id."""
        _refuse(self, "SessionRegistry", "search_sessions")


class SessionErasure(RequiredStore):
    """Optional: whole sessions listed by their last activity and removed with every trace
    (``SessionManager.prune``, ``erase`` and ``erase_namespace``, ``Session.erase``, the
    ``retention=`` option)."""

    def session_activity(self, namespace: str | None = None, before_us: int | None = None) -> list[StoredSession]:
        """Every session of ``namespace`` (``None``: of every namespace) with its last activity:
        each storage id a registry row names or holding rows of any kind. Its last activity is
        the latest of its registry row's ``updated_at``, its messages' and overlays'
        ``created_at``, its block versions' times, its search entries' ``updated_at`` and its
        cached prompt's. An id no registry row names is of the namespace its form says
        (:func:`split_storage_id`). With ``before_us``, only those last active before it.
        Ordered by storage id (its UTF-8 bytes)."""
        _refuse(self, "SessionErasure", "session_activity")

    def count_session_rows(self, storage_ids: Sequence[str]) -> RowCounts:
        """What :meth:`remove_sessions` would remove for these sessions, changing nothing."""
        _refuse(self, "SessionErasure", "count_session_rows")

    def remove_sessions(
        self, storage_ids: Sequence[str], *, inactive_before_us: int | None = None, forget_vectors: bool = False
    ) -> Removal:
        """Remove these sessions (storage ids) in one transaction: their registry rows,
        messages, overlays, blocks with their versions, search entries and cached prompt, and
        every payload no other session's message refers to. ``inactive_before_us``: only those
        still last active before it (checked in the transaction: a session written meanwhile
        stays). A session semantic recall is on for has recall turned off and one ``session``
        change queued, so its recorded vectors leave the index through the outbox, as
        ``delete_session`` does; with ``forget_vectors`` (the caller deleted them from the index
        already) its vector records and queued changes go instead and nothing is queued.
        Unknown ids are ignored."""
        _refuse(self, "SessionErasure", "remove_sessions")

    def scrub(self, *, vacuum: bool = False) -> None:
        """After :meth:`remove_sessions` (or a ``RecordErasure`` removal), leave none of
        the removed text readable in the store's files as far as the backend allows
        (``vacuum``: also rebuild or vacuum them); what remains where is the backend's to
        document."""
        _refuse(self, "SessionErasure", "scrub")


class RecordErasure(RequiredStore):
    """Optional: single records of a session removed with every trace, messages
    (``Session.erase_messages``, ``SessionManager.erase_messages``) and context blocks
    (``Session.erase_context``), their text then scrubbed by ``SessionErasure.scrub`` (an
    erase needs both)."""

    def remove_messages(
        self, session_id: str, ids: Sequence[str], *, forget_vectors: bool = False
    ) -> tuple[list[str], RowCounts]:
        """Remove these messages of a session in one transaction, as ``delete_messages`` does
        (their children become roots), with the overlays whose range holds one of them (their
        summaries were made from it) and every payload no other message refers to; the ids
        removed and the rows (``messages``, ``compactions``, ``blobs``, and ``vectors``: those
        recorded for the messages). Recorded vectors leave the index through the outbox, as a
        delete's do; with ``forget_vectors`` (the caller deleted them from the index already)
        their records and queued changes go instead. Unknown ids are ignored."""
        _refuse(self, "RecordErasure", "remove_messages")

    def remove_block(
        self, session_id: str, label: str, key: str | None = None, *, forget_vectors: bool = False
    ) -> RowCounts:
        """Remove a context block of a session in one transaction: with ``key`` ``None`` every
        version of the block and every entry of it (a searchable block's) with their versions,
        else only the entry ``key`` and its versions; and the session's cached prompt, which
        may quote it. The rows (``blocks``, ``block_versions``, ``search_entries``,
        ``prompts``, and ``vectors``: those recorded for the entries). Recorded vectors leave
        the index through the outbox; with ``forget_vectors`` their records and queued changes
        go instead."""
        _refuse(self, "RecordErasure", "remove_block")


class CheckpointStore(RequiredStore):
    """Optional: LangGraph checkpoints kept per session, a session being a thread
    (``sessions_core.checkpoints``, ``langchain_sessions.SessionSaver``). A checkpoint is keyed
    by ``(session_id, checkpoint_ns, checkpoint_id)``; ids order checkpoints (the greatest is
    the latest, compared as bytes); ``namespace`` and ``thread_id`` name the session in the
    registry (the caller registers it). The removal of a session
    (``SessionRegistry.delete_session``, ``SessionErasure.remove_sessions``) removes its
    checkpoints and writes."""

    def put_checkpoint(
        self,
        session_id: str,
        namespace: str,
        row: CheckpointRow,
        *,
        run_id: str | None,
        created_at_us: int,
        session: SessionRow | None = None,
    ) -> None:
        """Store ``row`` (its ``writes`` are ignored) in one statement, replacing a checkpoint
        stored under the same key (its writes are kept). With ``session`` (a thread's first
        checkpoint), first register that session in the same transaction unless its namespace
        already has a session of its id (``SessionRegistry``)."""
        _refuse(self, "CheckpointStore", "put_checkpoint")

    def put_checkpoint_writes(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[CheckpointWrite],
        *,
        replace: bool,
    ) -> None:
        """Store the writes of a checkpoint atomically; a write whose ``(task_id, idx)`` is
        stored already is replaced when ``replace``, else kept as it was."""
        _refuse(self, "CheckpointStore", "put_checkpoint_writes")

    def get_checkpoint(self, session_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> CheckpointRow | None:
        """The checkpoint (``None``: the latest of ``checkpoint_ns``) with its writes, read in
        one statement; ``None`` when there is none."""
        _refuse(self, "CheckpointStore", "get_checkpoint")

    def checkpoint_ancestors(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        limit: int,
        channels: Sequence[str] | None = None,
    ) -> list[CheckpointRow]:
        """The checkpoint ``checkpoint_id`` and then its ancestors (following
        ``parent_checkpoint_id``), nearest first, ``limit`` at most, each with its writes (with
        ``channels``: its writes to those channels only), read in one statement; ``[]`` when the
        checkpoint is not stored. A chain that loops (a checkpoint put again under a descendant)
        repeats ids until ``limit``."""
        _refuse(self, "CheckpointStore", "checkpoint_ancestors")

    def list_checkpoints(
        self, query: CheckpointQuery, limit: int, after: CheckpointKey | None = None
    ) -> list[CheckpointRow]:
        """Up to ``limit`` checkpoints matching ``query``, with their writes, ordered by
        ``(checkpoint_id, session_id, checkpoint_ns)`` descending, starting after ``after``
        (the key of the last row of the previous page)."""
        _refuse(self, "CheckpointStore", "list_checkpoints")

    def delete_checkpoints(self, session_ids: Sequence[str], *, keep_latest: bool = False) -> int:
        """Delete the checkpoints and writes of these sessions in one transaction (with
        ``keep_latest``: all but the latest checkpoint of each ``checkpoint_ns`` and its writes,
        the kept ones left without a parent); the number of checkpoints deleted."""
        _refuse(self, "CheckpointStore", "delete_checkpoints")

    def copy_checkpoints(self, source_id: str, target_id: str, namespace: str, thread_id: str) -> int:
        """Copy every checkpoint and write of ``source_id`` to ``target_id`` (named
        ``(namespace, thread_id)``), keeping ids; those the target holds already stay. The
        number of checkpoints copied."""
        _refuse(self, "CheckpointStore", "copy_checkpoints")

    def delete_checkpoint_runs(self, namespace: str, run_ids: Sequence[str]) -> int:
        """Delete the checkpoints (and their writes) that these runs made in the sessions of
        ``namespace``; the number of checkpoints deleted."""
        _refuse(self, "CheckpointStore", "delete_checkpoint_runs")

    def delta_checkpoint_sessions(self, session_ids: Sequence[str]) -> list[str]:
        """Those of these sessions holding a checkpoint whose metadata has
        ``counters_since_delta_snapshot`` (its graph uses a LangGraph ``DeltaChannel``)."""
        _refuse(self, "CheckpointStore", "delta_checkpoint_sessions")


class CheckpointErasure(RequiredStore):
    """Optional, beside ``CheckpointStore``: erasing messages from a thread's checkpoints
    (``SessionSaver.erase_messages``), whose values the framework's saver serialised."""

    def rewrite_checkpoints(self, session_id: str, rows: Sequence[CheckpointRow]) -> None:
        """Replace the serialised value (and type tag) of each checkpoint of ``rows`` and of
        each of its ``writes``, found by key, in one transaction (``rows`` hold the new values;
        a key not stored is skipped)."""
        _refuse(self, "CheckpointErasure", "rewrite_checkpoints")


class ItemStore(RequiredStore):
    """Optional: LangGraph-style items (``sessions_core.items``, ``langchain_sessions.SessionStore``),
    each a JSON object under a namespace and key, every write kept as a version. Every method
    works in one ``namespace`` (a ``SessionManager``'s; ``""``: the default) and never reads,
    lists, searches, sweeps or versions another's items. An item's namespace within it is its
    labels joined by ``.`` (``prefix``); ``under`` selects a prefix and those below it (``""``:
    all). An item whose expiry has passed is not read, and is removed by :meth:`sweep_items`.
    Items belong to no session: erasing a session leaves them."""

    def put_items(self, namespace: str, writes: Sequence[ItemWrite], now_us: int) -> None:
        """Apply ``writes`` in order in one transaction (a later write of a key wins)."""
        _refuse(self, "ItemStore", "put_items")

    def get_items(
        self, namespace: str, keys: Sequence[tuple[str, str]], now_us: int, *, refresh: bool = False
    ) -> list[ItemRow]:
        """The live items of these ``(prefix, key)`` pairs, in no order; with ``refresh`` their
        expiry is moved to ``now_us`` plus their TTL."""
        _refuse(self, "ItemStore", "get_items")

    def refresh_items(self, namespace: str, keys: Sequence[tuple[str, str]], now_us: int) -> None:
        """Move the expiry of the live items of these ``(prefix, key)`` pairs that have a TTL to
        ``now_us`` plus their TTL (``get_items`` with ``refresh``, without reading them)."""
        _refuse(self, "ItemStore", "refresh_items")

    def list_items(
        self, namespace: str, under: str, conditions: Sequence[ItemCondition], limit: int, offset: int, now_us: int
    ) -> list[ItemRow]:
        """Live items under ``under`` meeting every condition, most recently updated first."""
        _refuse(self, "ItemStore", "list_items")

    def search_items(
        self, namespace: str, under: str, query: str, conditions: Sequence[ItemCondition], limit: int, now_us: int
    ) -> list[ItemRow]:
        """The best ``limit`` live items under ``under`` meeting every condition for the keyword
        ``query`` (ranked as the store's other searches), best first."""
        _refuse(self, "ItemStore", "search_items")

    def item_vectors(
        self, namespace: str, under: str, conditions: Sequence[ItemCondition], now_us: int
    ) -> list[tuple[str, str, bytes]]:
        """``(prefix, key, vector)`` of every embedded field of the live items under ``under``
        meeting every condition."""
        _refuse(self, "ItemStore", "item_vectors")

    def item_prefixes(self, namespace: str, under: str, now_us: int) -> list[str]:
        """The distinct prefixes of the live items under ``under``, sorted."""
        _refuse(self, "ItemStore", "item_prefixes")

    def item_versions(self, namespace: str, prefix: str, key: str) -> list[ItemVersionRow]:
        """Every version of the item, newest first (also of a deleted one)."""
        _refuse(self, "ItemStore", "item_versions")

    def sweep_items(self, namespace: str, now_us: int) -> int:
        """Remove the items expired at ``now_us`` with their versions and vectors; how many."""
        _refuse(self, "ItemStore", "sweep_items")

    def remove_items(self, namespace: str, keys: Sequence[tuple[str, str]]) -> int:
        """Remove these items (``(prefix, key)`` pairs) of ``namespace``, live, expired or
        deleted, with every version and vector of each, in one transaction; how many held any."""
        _refuse(self, "ItemStore", "remove_items")

    def remove_namespace_items(self, namespace: str) -> int:
        """Remove every item of ``namespace`` (live, expired or deleted) with its versions and
        vectors; how many items were live or expired."""
        _refuse(self, "ItemStore", "remove_namespace_items")


CAPABILITIES: dict[str, type] = {
    cls.__name__: cls
    for cls in (
        ReadPlanner,
        BlobStore,
        BlockVersions,
        PromptCache,
        SearchEntries,
        TextSearch,
        SessionRegistry,
        SessionErasure,
        RecordErasure,
        CheckpointStore,
        CheckpointErasure,
        ItemStore,
    )
}
"""The optional capabilities a store declares by overriding their methods (``supports``)."""


class Store(
    ReadPlanner,
    BlobStore,
    BlockVersions,
    PromptCache,
    SearchEntries,
    TextSearch,
    SessionRegistry,
    SessionErasure,
    RecordErasure,
    CheckpointStore,
    CheckpointErasure,
    ItemStore,
):
    """A backend for many sessions' message trees.

    The required contract is :class:`RequiredStore`'s: the message tree, compaction overlays
    and context blocks. Everything else is an optional capability, a base class whose methods
    a store overrides to declare it (:func:`supports`): ``ReadPlanner`` (fast paths; its
    defaults are correct), ``BlobStore``, ``BlockVersions``, ``PromptCache``,
    ``SearchEntries``, ``TextSearch``, ``SessionRegistry``, ``SessionErasure``,
    ``RecordErasure``, ``CheckpointStore``, ``CheckpointErasure``, ``ItemStore``; and the subclasses
    ``InspectableStore`` and ``RecallStore``. A feature whose capability a store lacks raises
    ``UnsupportedOperationError`` naming it.
    """


def supports(store: RequiredStore, capability: str | type) -> bool:
    """Whether ``store`` implements an optional capability (a name of :data:`CAPABILITIES` or
    its class, or ``InspectableStore`` / ``RecallStore``): it overrides every method of it
    (``ReadPlanner``: any, its defaults being correct), as LangGraph's conformance suite
    detects a saver's capabilities."""
    cls = CAPABILITIES.get(capability) if isinstance(capability, str) else capability
    if cls is None and capability in ("InspectableStore", "RecallStore"):
        cls = InspectableStore if capability == "InspectableStore" else RecallStore
    if cls is None or not (cls in CAPABILITIES.values() or cls in (InspectableStore, RecallStore)):
        from ..errors import InvalidInputError

        raise InvalidInputError(f"unknown store capability {capability!r}; known: {sorted(CAPABILITIES)}")
    return _type_supports(type(store), cls)


@functools.lru_cache(maxsize=256)
def _type_supports(store_type: type, capability: type) -> bool:
    if capability in (InspectableStore, RecallStore):
        return issubclass(store_type, capability)
    methods = [name for name, value in vars(capability).items() if not name.startswith("_") and callable(value)]
    overridden = [getattr(store_type, name) is not getattr(capability, name) for name in methods]
    return any(overridden) if capability is ReadPlanner else all(overridden)


def capabilities(store: Store) -> frozenset[str]:
    """The optional capabilities ``store`` implements, by name."""
    return frozenset(name for name in (*CAPABILITIES, "InspectableStore", "RecallStore") if supports(store, name))


class InspectableStore(Store):
    """A store that can also be listed, paged through, exported into and counted: what the
    ``sessions`` CLI and ``export_session`` / ``import_records`` need, and ``Session`` does not.

    Optional: a store that lacks it works with ``Session`` and ``SessionManager``; tools that
    need it raise ``StoreError`` (see :func:`inspectable`). A consistent picture needs no
    concurrent writers; pages never hold more than ``limit`` rows.
    """

    @abstractmethod
    def session_summaries(self, session_ids: Sequence[str] | None = None) -> list[SessionSummary]:
        """Every session id holding rows of any kind (messages, overlays, blocks, a cached
        prompt, search entries) or named as the ``storage_id`` of a registry row; with
        ``session_ids``, only those of them that do (an unknown id is simply absent). Ordered by
        session id."""

    @abstractmethod
    def message_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[tuple[int, MessageRow]]:
        """``(seq, row)`` of up to ``limit`` messages of the session (every branch), ordered by
        ``(created_at, seq)``, starting after the message whose ``seq`` is ``after_seq`` (``0``:
        from the start). Pass the last ``seq`` back to read the next page; each page is an index
        range, so reading a whole session costs one pass. A child may come before its parent only
        when it was imported with an earlier ``created_at``."""

    @abstractmethod
    def message_tree(self, session_id: str) -> list[tuple[str, str | None, str, int]]:
        """``(id, parent_id, role, created_at_us)`` of every message of the session, in
        :meth:`message_rows`' order, without their content (what draws the tree)."""

    @abstractmethod
    def list_blocks(self, session_id: str) -> list[BlockRow]:
        """Every stored context block of the session, by label."""

    @abstractmethod
    def search_entry_counts(self, session_id: str) -> list[tuple[str, int]]:
        """``(label, entries)`` of every searchable block of the session holding entries, by label."""

    @abstractmethod
    def search_entry_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[SearchEntryRow]:
        """Up to ``limit`` search entries of the session (every label), ordered by
        ``(label, key)``, starting after the entry whose ``seq`` is ``after_seq`` (``0``: from
        the start); page like :meth:`message_rows`."""

    @abstractmethod
    def stored_message_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        """Which of ``ids`` the session holds (an import skips them without preparing them)."""

    @abstractmethod
    def import_block(self, session_id: str, label: str, content: str, updated_at_us: int) -> None:
        """Store a context block with the time it was last written (an import keeps it)."""

    @abstractmethod
    def import_search_entry(
        self, session_id: str, label: str, key: str, content: str, created_at_us: int, updated_at_us: int
    ) -> None:
        """Store a search entry with its times (an entry stored already keeps its creation time)."""

    def block_version_rows(self, session_id: str) -> list[tuple[str, str, BlockVersionRow]]:
        """Every kept version of the session's blocks and entries as ``(label, key, version)``
        (key ``""`` for a plain block), by label, key and version; ``[]`` from a store that keeps none."""
        return []

    def import_block_version(self, session_id: str, label: str, key: str, row: BlockVersionRow) -> bool:
        """Store a version as it is (number, time, source), unless that number is stored already;
        ``True`` if it was stored. A store that keeps no versions stores nothing."""
        return False

    @abstractmethod
    def import_compaction(self, session_id: str, row: CompactionRow) -> bool:
        """Store an overlay keeping its id and time, unless an overlay with that id is already
        stored (in any session: ids are unique in the store); ``True`` if it was stored."""

    @abstractmethod
    def schema_version(self) -> int:
        """How many migrations the database holds, read without creating or migrating anything
        (``0`` for a database without the schema)."""

    @abstractmethod
    def stats(self) -> StoreStats:
        """Row counts of the whole store, its schema version and size."""


class OutboxRow(NamedTuple):
    """A change queued for the vector index: a message, a search entry or a whole session."""

    seq: int
    session_id: str
    kind: str
    ref: str
    attempts: int


class RecallSource(NamedTuple):
    """What is indexed for one message (``content``: its stored JSON) or search entry
    (``content``: its text; ``role`` is ``""``)."""

    ref: str
    role: str
    created_at_us: int
    content: str


class VectorRow(NamedTuple):
    """A vector sent to the index: the chunk ``chunk`` of the text of ``(kind, ref)``."""

    vector_id: str
    session_id: str
    kind: str
    ref: str
    chunk: int
    digest: str


class RecallBacklog(NamedTuple):
    """The outbox: changes waiting, those that failed at least once, the last error an index
    gave (``None`` when none did), the sessions enabled for recall and the vectors recorded."""

    pending: int
    failing: int
    last_error: str | None
    sessions: int = 0
    vectors: int = 0


class RecallStore(Store):
    """A store that keeps semantic recall's outbox (``with_semantic_recall``): a session enabled
    for recall has each change to its messages and search entries queued in the transaction
    that makes it, and the vectors sent for them recorded, so deletes reach the index.

    Optional, like :class:`InspectableStore`; both built-in stores implement it.
    """

    @abstractmethod
    def recall_enable(self, session_ids: Sequence[str]) -> list[str]:
        """Queue every later change of these sessions; each not enabled before also gets a
        ``session`` change queued (its stored history gets indexed). Returns those."""

    @abstractmethod
    def recall_claim(self, limit: int, now_us: int, lease_us: int) -> list[OutboxRow]:
        """Up to ``limit`` queued changes due at ``now_us``, oldest first, leased until
        ``now_us + lease_us`` (another worker skips them until then)."""

    @abstractmethod
    def recall_sources(self, session_id: str, kind: str, refs: Sequence[str]) -> dict[str, RecallSource]:
        """These messages (``kind="message"``, by id) or search entries (``"entry"``, by
        ``label + "\\x1f" + key``) as stored; absent refs are not stored (any more)."""

    @abstractmethod
    def recall_refs(self, session_id: str) -> tuple[list[str], list[str]]:
        """Every message id and every search entry ref of the session: what a
        ``session`` change reconciles the index with (both empty once recall is off for it)."""

    @abstractmethod
    def recall_vectors(
        self, session_id: str, kind: str | None = None, refs: Sequence[str] | None = None
    ) -> list[VectorRow]:
        """The vectors recorded as sent for the session (of ``kind`` and ``refs`` if given)."""

    @abstractmethod
    def recall_record(self, added: Sequence[VectorRow], removed: Sequence[str], done: Sequence[int]) -> None:
        """In one transaction: record ``added`` as sent (replacing rows with their ids), forget
        the vector ids ``removed``, and drop the changes ``done`` from the outbox."""

    @abstractmethod
    def recall_split(self, seq: int, session_id: str, changes: Sequence[tuple[str, str]]) -> None:
        """In one transaction: queue a change ``(kind, ref)`` of the session for each of
        ``changes`` not queued after ``seq`` already, due now, and drop the change ``seq`` (a
        whole session's, so split)."""

    @abstractmethod
    def recall_retry(self, seqs: Sequence[int], error: str, due_us: int) -> None:
        """Count a failed attempt for these changes and keep them until ``due_us``."""

    @abstractmethod
    def recall_backlog(self) -> RecallBacklog:
        """The outbox's size and state."""

    @abstractmethod
    def recall_lookup(
        self, vector_ids: Sequence[str], *, session_ids: Sequence[str] | None = None, namespace: str | None = None
    ) -> dict[str, tuple[str, str, str]]:
        """``vector id -> (storage id, kind, ref)`` for those of ``vector_ids`` recorded as sent
        for one of ``session_ids`` (storage ids), or for a session registered in ``namespace``
        (neither: any session). Unknown ids are absent."""

    @abstractmethod
    def recall_rebuild(self, session_ids: Sequence[str] | None = None) -> int:
        """Mark every vector of these sessions (every enabled session for ``None``) as stale and
        queue a ``session`` change for each, so the index is sent all of it again. Returns the
        number of sessions queued."""


def recall_store(store: Store) -> RecallStore:
    """``store`` if it keeps a recall outbox, else ``StoreError`` saying what it lacks."""
    if isinstance(store, RecallStore):
        return store
    from ..errors import UnsupportedOperationError

    raise UnsupportedOperationError(
        f"{store!r} cannot keep semantic recall's outbox: it does not implement RecallStore"
    )


def inspectable(store: Store) -> InspectableStore:
    """``store`` if it can be inspected, else ``StoreError`` saying what it lacks."""
    if isinstance(store, InspectableStore):
        return store
    from ..errors import UnsupportedOperationError

    raise UnsupportedOperationError(
        f"{store!r} cannot be listed, exported or counted: it does not implement InspectableStore"
    )
