"""Search over history for ``Session`` and ``SessionManager``: by words, by meaning, or both.

``mode="text"`` is the full-text search of the store; ``"semantic"`` asks the session's
:class:`~sessions_core.semantic.SemanticRecall`; ``"hybrid"`` fuses the two rankings by
reciprocal rank, each message once. Every result says whether a compaction overlay hides it.
An index that fails to search makes ``"semantic"`` raise ``RecallError``; ``"hybrid"`` (and a
searchable block's search) then fall back to the full-text ranking, with a warning.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._time import from_us
from .errors import RecallError
from .messages import TextPart, message_from_storage
from .models import SearchResult, SearchResults
from .ranking import check_match
from .recall import ENTRY, MESSAGE, check_mode, fuse, split_entry_ref
from .semantic import SemanticRecall, source_text
from .stores.base import MessageRow, Store, recall_store
from .tools import CONTEXT_CHARS, HitTurn, ToolHit, shorten

logger = logging.getLogger("sessions_core.searching")


@dataclass(frozen=True)
class Scope:
    """Where a search looks: sessions by storage id, or a manager's namespace; how a storage id
    is shown in results and back."""

    session_ids: Sequence[str] | None = None
    namespace: str | None = None
    shown: Callable[[str], str] = str
    storage: Callable[[str], str] = str


def search_messages(
    store: Store, recall: SemanticRecall | None, query: str, limit: int, mode: str, scope: Scope, match: str = "any"
) -> SearchResults:
    """The messages of ``scope`` matching ``query`` in ``mode`` (its words as ``match`` says), best first."""
    check_mode(mode, recall is not None)
    check_match(match)
    if limit <= 0:
        return SearchResults(text_only=mode == "text")
    text: list[SearchResult] = []
    if mode != "semantic":
        rows = (
            store.search_messages(scope.session_ids, query, limit, match)
            if scope.namespace is None
            else store.search_sessions(scope.namespace, query, limit, match)
        )
        text = [
            SearchResult(id_, role, content, from_us(created), session_id)
            for session_id, id_, role, content, created in rows
        ]
    if mode == "text":
        return SearchResults(mark_compacted(store, text, scope), text_only=True)
    assert recall is not None
    try:
        hits = recall.search(query, limit, session_ids=scope.session_ids, namespace=scope.namespace)
    except RecallError as error:
        if mode == "semantic":
            raise
        logger.warning("hybrid search: %s; returning the full-text ranking only", error)
        return SearchResults(mark_compacted(store, text, scope), text_only=True, recall_error=str(error))
    refs: dict[str, list[str]] = defaultdict(list)
    for hit in hits:
        refs[hit.session_id].append(hit.ref)
    outbox = recall_store(store)  # recall was attached to this store, so it keeps the outbox
    sources = {
        (session_id, ref): source
        for session_id, wanted in refs.items()
        for ref, source in outbox.recall_sources(session_id, MESSAGE, wanted).items()
    }
    semantic = [
        SearchResult(
            source.ref,
            source.role,
            source_text(MESSAGE, source),
            from_us(source.created_at_us),
            scope.shown(hit.session_id),
        )
        for hit in hits
        if (source := sources.get((hit.session_id, hit.ref))) is not None
    ]
    if mode == "semantic":
        return SearchResults(mark_compacted(store, semantic, scope))
    by_key = {(r.session_id, r.id): r for r in (*semantic, *text)}
    order = fuse([[(r.session_id, r.id) for r in text], [(r.session_id, r.id) for r in semantic]], limit)
    return SearchResults(mark_compacted(store, [by_key[key] for key in order], scope))


def search_entries(
    store: Store, recall: SemanticRecall | None, session_id: str, label: str, query: str, limit: int
) -> list[tuple[str, str]]:
    """``(key, content)`` of a searchable block's entries matching ``query``: by words, fused
    with the entries closest in meaning when ``recall`` is on (by words alone, with a warning,
    when its index fails)."""
    text = store.search_entries(session_id, label, query, limit)
    if recall is None:
        return text
    try:
        hits = recall.search(query, limit, session_ids=[session_id], kind=ENTRY, label=label)
    except RecallError as error:
        logger.warning("searching block %r: %s; returning the full-text matches only", label, error)
        return text
    found = recall_store(store).recall_sources(session_id, ENTRY, [hit.ref for hit in hits])
    semantic = [(split_entry_ref(ref)[1], found[ref].content) for ref in (hit.ref for hit in hits) if ref in found]
    contents = dict(semantic) | dict(text)
    return [(key, contents[key]) for key in fuse([[k for k, _ in text], [k for k, _ in semantic]], limit)]


def mark_compacted(store: Store, results: list[SearchResult], scope: Scope) -> list[SearchResult]:
    """``results`` with ``compacted`` set on those an overlay of their session covers."""
    storage_of = {r.session_id: scope.storage(r.session_id) for r in results}
    compacted = store.with_overlays(list(storage_of.values())) if storage_of else set()
    covered: set[tuple[str, str]] = set()
    for shown, storage_id in storage_of.items():
        if storage_id not in compacted:
            continue
        overlays = store.overlays(storage_id)
        seen: set[str] = set()
        # widest first: an overlay nested in one already walked adds nothing
        for overlay in sorted(overlays, key=lambda o: -(o.to_depth or 0) + (o.from_depth or 0)):
            row = overlay.compaction
            if overlay.from_depth == -1 or (row.from_message_id in seen and row.to_message_id in seen):
                continue
            seen.update(store.span_ids(storage_id, row.from_message_id, row.to_message_id))
        covered.update((shown, message_id) for message_id in seen)
    if not covered:
        return results
    return [r._replace(compacted=True) if (r.session_id, r.id) in covered else r for r in results]


# -- what a tool shows of a hit ----------------------------------------------------------------


def hit_neighbours(store: Store, results: Sequence[SearchResult], scope: Scope) -> dict[tuple[str, str], HitTurn]:
    """For each user or assistant hit, the turn that completes it: a question's reply (its first
    child written by the assistant), a reply's question (its parent, when a user wrote it); none
    when that turn is itself among ``results``."""
    found = {(r.session_id, r.id) for r in results}
    turns: dict[tuple[str, str], HitTurn] = {}
    for result in results:
        storage_id = scope.storage(result.session_id)
        neighbour: MessageRow | None = None
        if result.role == "user":
            neighbour = next((row for row in store.children(storage_id, result.id) if row.role == "assistant"), None)
            relation = "reply"
        elif result.role == "assistant":
            row = store.get_message(storage_id, result.id)
            parent = store.get_message(storage_id, row.parent_id) if row is not None and row.parent_id else None
            neighbour = parent if parent is not None and parent.role == "user" else None
            relation = "asked"
        else:
            continue
        if neighbour is None or (result.session_id, neighbour.id) in found:
            continue
        message = message_from_storage(neighbour.content, neighbour.created_at_us)
        text = "" if message is None else " ".join(p.text for p in message.parts if isinstance(p, TextPart)).strip()
        if text:
            turns[(result.session_id, result.id)] = HitTurn(relation, neighbour.role, shorten(text, CONTEXT_CHARS))
    return turns


def tool_hits(
    store: Store, results: Sequence[SearchResult], scope: Scope, session_label: Callable[[str], str]
) -> list[ToolHit]:
    """``results`` as a search tool shows them (``tools.format_hits``): each with its session's
    ``session_label`` and the turn that completes it."""
    turns = hit_neighbours(store, results, scope)
    labels = {r.session_id: session_label(r.session_id) for r in results}
    return [
        ToolHit(r.created_at, labels[r.session_id], r.role, r.content, turns.get((r.session_id, r.id))) for r in results
    ]
