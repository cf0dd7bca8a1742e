"""The read planner of a session: the path to a leaf walked as ids, its compaction overlays
applied, then the rows fetched in bounded chunks; the recent history within a byte budget; the
token estimate of a branch from the stored per-message estimates.

Every function takes the store and the storage id of the session it reads.
"""

from __future__ import annotations

import gc
import threading
from array import array
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any, NamedTuple

from ._async import run_in_thread
from ._time import from_us
from .attachments import BLOB_PREFIX, INLINE_PREFIX, restore_payloads
from .messages import COMPACTION_ID_PREFIX, SessionMessage, TextPart, is_marker, message_from_storage
from .models import Compaction, RecentHistory, SearchResult
from .overlays import Anchored, Segment, overlay_ending_at, plan_overlays
from .stores.base import (
    BlobStore,
    CompactionRow,
    MessageRow,
    OverlayRow,
    PathEntry,
    Store,
    StoredContent,
    supports,
)

MessageCounter = Callable[[list[SessionMessage]], int]


# -- pausing the cycle collector -----------------------------------------------------------

_pause_lock = threading.Lock()
_host_thresholds: tuple[int, ...] | None = None  # the thresholds a running pause will restore
_PAUSED_THRESHOLD = 1 << 30  # allocations before a collection: none happens during a read
PAUSE_FROM_ROWS = 500
"""A shorter read runs through a collection of the young generation or two: cheaper than a pause."""


@contextmanager
def gc_paused() -> Iterator[None]:
    """Hold off automatic cycle collection while a large list of messages is built: they hold
    no cycles, yet each collection would re-scan every message built so far (about half of a
    10,000-message read).

    The collector is never switched on or off: the first generation's threshold is raised for
    the length of the read, then restored, also on error. A collector the host disabled is left
    alone; thresholds the host sets meanwhile are kept. Concurrent reads share one pause, which
    ends with the read that started it (so reads that overlap cannot hold it off for ever).

    At its end, what was built joins the oldest generation without a scan (``gc.freeze()`` then
    ``gc.unfreeze()``, two list splices): the messages returned are then scanned only by the
    next full collection, if they are still alive, not at once by the young generation's (about
    10 ms of a 10,000-message read). Every object younger than that generation, other threads'
    too, is moved with them, so a cycle among them is collected by the next full collection
    rather than a younger one. This is skipped when the host has frozen objects of its own,
    which ``gc.unfreeze()`` would release.
    """
    global _host_thresholds
    host: tuple[int, ...] = ()  # both set when this read starts the pause
    paused: tuple[int, ...] = ()
    with _pause_lock:
        starts = _host_thresholds is None and gc.isenabled()
        if starts:
            host = gc.get_threshold()
            paused = (_PAUSED_THRESHOLD, *host[1:])
            gc.set_threshold(*paused)
            _host_thresholds = host
    try:
        yield
    finally:
        if starts:
            with _pause_lock:
                if gc.isenabled() and gc.get_freeze_count() == 0:
                    gc.freeze()
                    gc.unfreeze()
                if gc.get_threshold() == paused:
                    gc.set_threshold(*host)
                _host_thresholds = None


# -- rows to messages ----------------------------------------------------------------------


def parse_row(row: MessageRow | None) -> SessionMessage | None:
    """A stored row as a message (``None`` for no row, or a ``compaction_`` row)."""
    if row is None or row.id.startswith(COMPACTION_ID_PREFIX):
        return None
    return message_from_storage(row.content, row.created_at_us)


def stored_message(store: Store, row: MessageRow | None) -> SessionMessage | None:
    """One stored row as a message with its file payloads (``None`` as :func:`parse_row`)."""
    message = parse_row(row)
    return None if message is None else restore(store, [message])[0]


def compaction(row: CompactionRow) -> Compaction:
    """A stored overlay as the ``Compaction`` that reads return."""
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


def restore(store: Store, messages: list[SessionMessage]) -> list[SessionMessage]:
    """Put file payloads back as written (one store read per call, none without payloads; a
    store without ``BlobStore`` keeps them in the message JSON)."""
    return restore_payloads(messages, store.get_blobs if supports(store, BlobStore) else None)


def restore_some(store: Store, messages: list[SessionMessage], positions: list[int]) -> list[SessionMessage]:
    """:func:`restore` of the messages at ``positions`` only, in place in ``messages``."""
    if positions:
        for position, message in zip(positions, restore(store, [messages[i] for i in positions])):
            messages[position] = message
    return messages


def search_results(rows: Iterable[tuple[str, str, str, str, int]]) -> list[SearchResult]:
    """Search rows ``(session_id, id, role, content, created_at_us)`` as results."""
    return [
        SearchResult(id_, role, content, from_us(created_at_us), session_id)
        for session_id, id_, role, content, created_at_us in rows
    ]


# -- the plan ------------------------------------------------------------------------------


class _Chunk:
    __slots__ = ("items", "seqs")

    def __init__(self, items: list[Any], seqs: list[int]) -> None:
        self.items = items  # each a row's seq (an int) or an overlay, in reading order
        self.seqs = seqs  # the rows to fetch


class ReadPlan:
    """A path (ids only) with its overlays applied, read in bounded chunks."""

    def __init__(
        self,
        seqs: array,
        ids: Sequence[str],
        overlays: Sequence[CompactionRow],
        chunk_rows: int,
        *,
        hide_markers: bool = True,
    ) -> None:
        self.hide_markers = hide_markers
        self.seqs = seqs
        self.segments: list[Segment] = plan_overlays(ids, overlays)
        self.chunk_rows = chunk_rows

    @classmethod
    def of_entries(cls, path: Sequence[PathEntry], overlays: Sequence[CompactionRow], chunk_rows: int) -> ReadPlan:
        return cls(array("q", (entry.seq for entry in path)), [entry.id for entry in path], overlays, chunk_rows)

    @classmethod
    def of_segments(cls, seqs: array, segments: list[Segment], chunk_rows: int) -> ReadPlan:
        """A plan made already (by :func:`visible_path`)."""
        made = cls(array("q"), [], [], chunk_rows)
        made.seqs, made.segments = seqs, segments
        return made

    def chunks(self, newest_first: bool) -> Iterator[_Chunk]:
        items: list[Any] = []
        seqs: list[int] = []
        room = self.chunk_rows
        segments = reversed(self.segments) if newest_first else self.segments
        for segment in segments:
            if segment.overlay is not None:
                items.append(segment.overlay)
                continue
            start, end = segment.start, segment.end
            while start < end:
                count = min(end - start, room - len(seqs))
                if newest_first:
                    taken = self.seqs[end - count : end][::-1]
                    end -= count
                else:
                    taken = self.seqs[start : start + count]
                    start += count
                items += taken
                seqs += taken
                if len(seqs) >= room:
                    yield _Chunk(items, seqs)
                    items, seqs = [], []
        if items:
            yield _Chunk(items, seqs)

    def read(self, store: Store, chunk: _Chunk) -> list[SessionMessage]:
        """The messages of ``chunk``: its rows fetched, parsed, their file payloads put back."""
        messages, with_references = self.messages(chunk, store.fetch_contents(chunk.seqs))
        return restore_some(store, messages, with_references)

    def messages(self, chunk: _Chunk, rows: Mapping[int, StoredContent]) -> tuple[list[SessionMessage], list[int]]:
        """The messages of ``chunk`` parsed from ``rows`` (:func:`parse_rows`)."""
        return parse_rows(chunk.items, rows, self.hide_markers)


def parse_rows(
    items: Iterable[Any], rows: Mapping[int, StoredContent], hide_markers: bool
) -> tuple[list[SessionMessage], list[int]]:
    """The messages of ``items`` (each a row's seq, looked up in ``rows``, or an overlay shown as
    its summary), and the positions among them of those whose stored JSON may hold payload
    references (for :func:`restore_some`). Rows that are missing or no longer parse are skipped,
    and so are head markers when ``hide_markers``."""
    messages: list[SessionMessage] = []
    with_references: list[int] = []
    for item in items:
        if type(item) is not int:
            messages.append(summary_message(item))
            continue
        row = rows.get(item)
        if row is None:
            continue
        created_at_us, content = row
        message = message_from_storage(content, created_at_us)
        if message is None or message.id.startswith(COMPACTION_ID_PREFIX):
            continue
        if hide_markers and message.role == "system" and is_marker(message):
            continue
        if BLOB_PREFIX in content or INLINE_PREFIX in content:
            with_references.append(len(messages))
        messages.append(message)
    return messages, with_references


def leaf_or_latest(store: Store, session_id: str, leaf_id: str | None) -> str | None:
    """``leaf_id``, or the id of the latest leaf when it is not given (``None``: no messages)."""
    return leaf_id or store.latest_leaf_id(session_id)


def plan(store: Store, session_id: str, leaf_id: str | None, raw: bool = False) -> ReadPlan:
    """The plan of the path to ``leaf_id`` (default: the latest leaf); ``raw``: no overlays, markers kept."""
    leaf = leaf_or_latest(store, session_id, leaf_id)
    if leaf is None:
        return ReadPlan(array("q"), [], [], store.fetch_chunk_rows)
    return plan_to(store, session_id, leaf, [] if raw else store.overlays(session_id), raw)


def plan_to(store: Store, session_id: str, leaf: str, overlays: Sequence[OverlayRow], raw: bool) -> ReadPlan:
    """:func:`plan` of the path to ``leaf``, given the session's overlays (none when ``raw``)."""
    if overlays:
        visible = visible_path(store, session_id, leaf, overlays)
        if visible is not None:
            return ReadPlan.of_segments(visible.seqs, visible.segments, store.fetch_chunk_rows)
    seqs, ids = store.path_ids(session_id, leaf)
    compactions = [o.compaction for o in overlays] if ids else []
    return ReadPlan(seqs, ids, compactions, store.fetch_chunk_rows, hide_markers=not raw)


def _any_stored(store: Store, session_id: str, message_ids: list[str]) -> bool:
    return bool(stored_ids(store, session_id, message_ids))


def stored_ids(store: Store, session_id: str, message_ids: Sequence[str]) -> set[str]:
    """Which of ``message_ids`` the session holds: one query on a store that answers it
    (``stored_message_ids``), a read per id on one that does not."""
    answer = getattr(store, "stored_message_ids", None)
    if answer is not None:
        return set(answer(session_id, message_ids))
    return {message_id for message_id in message_ids if store.get_message(session_id, message_id) is not None}


class VisiblePath(NamedTuple):
    seqs: array
    """The rows shown, root first."""
    segments: list[Segment]
    """Runs of ``seqs`` and, between them, the overlays shown instead of what they cover."""
    tokens: int
    """The stored token estimates of the rows shown."""


def visible_path(store: Store, session_id: str, leaf: str, overlays: Sequence[OverlayRow]) -> VisiblePath | None:
    """What :func:`plan_overlays` makes of the path to ``leaf``, read without the ranges the
    overlays cover: up from the leaf to the deepest end of an overlay, over to the overlay's
    start, on up from its parent. Costs what is shown, not the path's length. ``None`` when an
    overlay whose last message is stored has unknown depths, or the depths do not tell which
    overlay applies (then read the whole path)."""
    unknown = [o.compaction.to_message_id for o in overlays if o.from_depth is None]
    if unknown and _any_stored(store, session_id, unknown):
        return None  # an overlay not checked since its last message was stored: it may apply anywhere
    anchored = [
        Anchored(o.compaction, order, o.from_depth, o.to_depth)  # type: ignore[arg-type]
        for order, o in enumerate(overlays)
        if o.from_depth is not None and o.from_depth >= 0
    ]
    ends = {a.overlay.to_message_id for a in anchored}
    pieces: list[tuple[array, array, Anchored | None]] = []  # the leaf's first
    start, above, start_depth = leaf, False, None
    while True:
        seqs, ids, tokens, root = store.path_up(session_id, start, above=above)
        if not ids:
            if above and start_depth != 1:
                return None  # the overlay's first message has a parent, yet none was found: changed meanwhile
            break
        if ids[0] not in ends:
            if not root:
                return None  # stopped at an overlay written since they were read
            pieces.append((seqs, tokens, None))
            break
        chosen = overlay_ending_at(ids[0], anchored)
        if chosen is None:
            return None
        pieces.append((seqs[1:], tokens[1:], chosen))
        start, above, start_depth = chosen.overlay.from_message_id, True, chosen.from_depth
    shown: array = array("q")
    segments: list[Segment] = []
    for seqs, _tokens, overlay in reversed(pieces):
        if overlay is not None:
            segments.append(Segment(len(shown), len(shown), overlay.overlay))
        if seqs:
            segments.append(Segment(len(shown), len(shown) + len(seqs), None))
            shown.extend(seqs)
    return VisiblePath(shown, segments, sum(sum(tokens) for _seqs, tokens, _overlay in pieces))


# -- reads ---------------------------------------------------------------------------------


def history(
    store: Store, session_id: str, leaf_id: str | None, *, newest_first: bool = False, raw: bool = False
) -> Iterator[SessionMessage]:
    """The path as planned by :func:`plan`, one chunk of rows in memory at a time."""
    read_plan = plan(store, session_id, leaf_id, raw)
    for chunk in read_plan.chunks(newest_first):
        yield from read_plan.read(store, chunk)


async def ahistory(
    store: Store, session_id: str, leaf_id: str | None, *, newest_first: bool = False, raw: bool = False
) -> AsyncIterator[SessionMessage]:
    """Async twin of :func:`history`: each chunk is read off the event loop."""
    read_plan = await run_in_thread(plan, store, session_id, leaf_id, raw)
    for chunk in read_plan.chunks(newest_first):
        for message in await run_in_thread(read_plan.read, store, chunk):
            yield message


def history_list(store: Store, session_id: str, leaf_id: str | None, *, raw: bool = False) -> list[SessionMessage]:
    """The whole path as a list: a short path with no overlays read with them at once, any
    other as :func:`history` reads it (with cycle collection held off when it is long)."""
    if not raw:
        return history_and_overlays(store, session_id, leaf_id)[0]
    limit = store.fetch_chunk_rows
    if leaf_id:
        rows = store.short_path_contents(session_id, leaf_id, limit)
    else:
        rows = store.short_latest_path_contents(session_id, limit)
    return _listed(store, session_id, leaf_id, [], rows, raw=True)


def history_and_overlays(
    store: Store, session_id: str, leaf_id: str | None
) -> tuple[list[SessionMessage], list[OverlayRow]]:
    """:func:`history_list`, with the session's overlays it read."""
    overlays, rows = store.overlays_and_short_path(session_id, leaf_id or None, store.fetch_chunk_rows)
    return _listed(store, session_id, leaf_id, overlays, rows, raw=False), overlays


def _listed(
    store: Store,
    session_id: str,
    leaf_id: str | None,
    overlays: Sequence[OverlayRow],
    rows: Mapping[int, StoredContent] | None,
    *,
    raw: bool,
) -> list[SessionMessage]:
    """The path from ``rows`` (a short path's contents) when there are no overlays, else read."""
    if not overlays and rows is not None:
        messages, with_references = parse_rows(rows, rows, hide_markers=not raw)
        return restore_some(store, messages, with_references)
    leaf = leaf_or_latest(store, session_id, leaf_id)
    if leaf is None:
        return []
    read_plan = plan_to(store, session_id, leaf, overlays, raw)
    with gc_paused() if len(read_plan.seqs) >= PAUSE_FROM_ROWS else nullcontext():
        messages: list[SessionMessage] = []
        for chunk in read_plan.chunks(False):
            messages += read_plan.read(store, chunk)
        return messages


def recent_history(
    store: Store, session_id: str, max_bytes: int, leaf_id: str | None, min_recent_messages: int
) -> RecentHistory:
    """The longest suffix of the path whose stored size fits ``max_bytes`` (at least
    ``min_recent_messages`` messages, always the leaf), overlays applied within it."""
    leaf = leaf_or_latest(store, session_id, leaf_id)
    totals = store.path_totals(session_id, leaf) if leaf else None
    if not leaf or totals is None:
        return RecentHistory([], False, 0)
    window = store.path_tail(session_id, leaf, max(0, int(max_bytes)), max(1, int(min_recent_messages)))
    read_plan = ReadPlan.of_entries(window, store.get_compactions(session_id), store.fetch_chunk_rows)
    messages = [message for chunk in read_plan.chunks(False) for message in read_plan.read(store, chunk)]
    return RecentHistory(messages, len(window) < totals.depth, totals.size)


def path_length(store: Store, session_id: str, leaf_id: str | None) -> int:
    """The number of stored messages on the path to ``leaf_id`` (default: the latest leaf)."""
    if leaf_id:
        totals = store.path_totals(session_id, leaf_id)
    else:
        latest = store.latest_leaf_totals(session_id)
        totals = latest[1] if latest else None
    return totals.depth if totals else 0


def history_tokens(store: Store, session_id: str, leaf_id: str | None, count: MessageCounter) -> int:
    """Tokens of the path to ``leaf_id`` (``None``: the latest leaf) with overlays applied,
    from the stored per-message estimates (no content read); an overlay counts as its summary
    message."""
    rows, leaf = store.overlays_and_totals(session_id, leaf_id or None)
    if leaf is None:
        return 0
    if not rows:  # the leaf row carries the running total of its path
        return leaf[1].tokens
    leaf_id = leaf[0]
    visible = visible_path(store, session_id, leaf_id, rows)
    if visible is not None:
        summaries = [segment.overlay for segment in visible.segments if segment.overlay is not None]
        return visible.tokens + sum(count([summary_message(overlay)]) for overlay in summaries)
    overlays = [row.compaction for row in rows]
    path = store.path(session_id, leaf_id)
    total = 0
    for segment in plan_overlays([entry.id for entry in path], overlays):
        if segment.overlay is None:
            total += sum(
                entry.tokens
                for entry in path[segment.start : segment.end]
                if not entry.id.startswith(COMPACTION_ID_PREFIX)
            )
        else:
            total += count([summary_message(segment.overlay)])
    return total
