"""``Session``: one conversation tree in a store, with sync methods and async twins."""

from __future__ import annotations

import gc
import logging
import threading
from contextlib import contextmanager
import uuid
from array import array
from datetime import datetime
from pathlib import Path
from collections.abc import Mapping
from typing import Any, AsyncIterator, Callable, Iterable, Iterator, Sequence

from ._async import async_twin, call, call_with_timeout, run_in_thread
from ._time import from_us, now_us, to_us
from .attachments import extract_blobs, restore_blobs
from .compaction import CompactContext, CompactResult
from .context import ContextBlock, ContextBlocks, ContextConfig, render_system_prompt
from .errors import CompactionError, MessageTooLargeError, MessageValidationError, SessionsError
from .messages import (
    COMPACTION_ID_PREFIX,
    MessageInput,
    SessionMessage,
    TextPart,
    is_marker,
    message_from_storage,
    parse_message,
    storage_json,
    text_content,
)
from .models import AppendResult, Compaction, RecentHistory, SearchResult, SessionEvent
from .overlays import Segment, plan_overlays
from .providers import StorePromptCache, bind_provider
from .stores.base import LATEST, CompactionRow, Inserted, MessageRecord, MessageRow, PathEntry, Store, _Latest
from .stores.sqlite import SqliteStore
from .tokens import estimate_message_tokens, estimate_tokens
from .tools import Tool, context_tools, loaded_skills_in_history, unloaded_skill_rewrite

logger = logging.getLogger("sessions_core")

TokenCounter = Callable[[list[SessionMessage]], int]

class StoreOwner:
    """Closing for objects over a store: ``close()`` / ``aclose()`` and ``with`` / ``async with``
    close the store only when the object opened it (from a path or URL)."""

    store: Store
    _owns_store: bool

    def close(self) -> None:
        """Close the store if this object opened it."""
        if self._owns_store:
            self.store.close()

    async def aclose(self) -> None:
        await run_in_thread(self.close)

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


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


class Session(StoreOwner):
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
        self._compact_fn: Callable[..., Any] | None = None
        self._compaction_timeout: float | None = None
        self._compact_threshold: int | None = None
        self._token_counter: TokenCounter | None = None
        self._compaction_error_handler: Callable[[BaseException], Any] | None = None
        self._compact_lock = threading.RLock()
        self._estimate_cache: tuple[str, int] | None = None
        self._warned_noop = False
        self._context_configs: list[ContextConfig] = []
        self._prompt_cache: Any = None
        self._blocks: ContextBlocks | None = None
        self._context_lock = threading.RLock()
        self._prompt_tokens_cache: tuple[str, int] | None = None
        self._listeners: list[Callable[[SessionEvent], Any]] = []

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
        self._blocks = None
        self._estimate_cache = None
        return self

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> "Session":
        """Add a context block rendered into the system prompt. Without a provider it is a
        writable block kept in this session's store; ``StoreSearchContext()`` makes a searchable
        one; any object with ``get()`` (and ``set``/``load``/``search``) is a provider."""
        config = ContextConfig(label, description, max_tokens, provider)
        if self._blocks is not None:
            self._blocks.add_context(self._bound(config))
        self._context_configs.append(config)
        return self

    def with_cached_prompt(self, provider: Any = None) -> "Session":
        """Persist the frozen system prompt (in this session's store unless a writable
        ``provider`` is given), so a new process on the same store renders the same prompt."""
        self._prompt_cache = provider if provider is not None else StorePromptCache
        self._blocks = None
        return self

    def on_compaction(self, fn: Callable[..., Any], *, timeout: float | None = None) -> "Session":
        """Register the compaction function ``fn(messages, context) -> CompactResult | None``
        (plain or ``async def``; see ``create_compact_function``). A call that runs longer than
        ``timeout`` seconds counts as a failure."""
        self._compact_fn = fn
        self._compaction_timeout = timeout
        return self

    def compact_after(self, threshold: int, *, token_counter: TokenCounter | None = None) -> "Session":
        """Compact after an append that takes the token estimate of the active branch (history
        with overlays, plus the system prompt) above ``threshold``. ``token_counter(messages)``
        replaces the heuristic; the estimate is kept per stored message, so the check reads no
        history."""
        self._compact_threshold = threshold
        if token_counter is not None:
            self._token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> "Session":
        """Call ``handler(error)`` when an automatic compaction fails (the append still succeeds)."""
        self._compaction_error_handler = handler
        return self

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
        parsed, record = self._prepare(message, source)
        if record is None:
            return AppendResult(False, parsed)
        result = self._appended(parsed, record, self.store.insert_message(self.session_id, record, parent_id))
        if result.inserted:
            self._maybe_auto_compact(record.id)
        return result

    def append_messages(
        self,
        messages: Iterable[MessageInput],
        parent_id: "str | None | _Latest" = LATEST,
        *,
        source: str | None = None,
    ) -> list[AppendResult]:
        """Store messages as a chain in one transaction: the first under ``parent_id`` (default:
        the latest leaf; ``None``: a new root), each next one under the previous one.

        Returns one ``AppendResult`` per message, as ``append_message`` would. Every message is
        validated first: a malformed one raises ``MessageValidationError`` and nothing is stored.
        An id already stored is not stored again and the chain continues from it; ``compaction_``
        ids are skipped. Subscribers get the events ``append_message`` sends, after the batch is
        stored; the automatic compaction check runs once, after the batch.
        """
        if isinstance(messages, (SessionMessage, Mapping, str, bytes)):
            raise TypeError("append_messages takes a list of messages (append_message takes one)")
        batch: list[tuple[SessionMessage, MessageRecord | None]] = []
        for index, message in enumerate(messages):
            try:
                batch.append(self._prepare(message, source))
            except MessageValidationError as error:
                raise MessageValidationError(f"messages[{index}]: {error}") from None
        records = [record for _, record in batch if record is not None]
        outcomes = iter(self.store.insert_messages(self.session_id, records, parent_id) if records else [])
        results = [
            AppendResult(False, parsed) if record is None else self._appended(parsed, record, next(outcomes))
            for parsed, record in batch
        ]
        last = next((r.message.id for r in reversed(results) if r.inserted), None)
        if last is not None:
            self._maybe_auto_compact(last)
        return results

    def _prepare(self, message: MessageInput, source: str | None) -> tuple[SessionMessage, MessageRecord | None]:
        """The validated message, with its creation time, and the record to store (``None`` for
        a ``compaction_`` id: a summary echoed back, never stored)."""
        parsed = self._accept(message, source)
        if parsed.id.startswith(COMPACTION_ID_PREFIX):
            return parsed, None
        created = parsed.created_at
        record = self._record(parsed, to_us(created) if created else now_us())
        if created is None:
            if parsed is message:  # the caller's object: never changed behind their back
                parsed = parsed.model_copy()
            parsed.created_at = from_us(record.created_at_us)
        return parsed, record

    def _appended(self, parsed: SessionMessage, record: MessageRecord, inserted: Inserted | None) -> AppendResult:
        """The result of one insert, announced to subscribers and counted in the estimate."""
        if inserted is None:
            stored = self.get_message(parsed.id) or parsed
            self._emit(SessionEvent("append", self.session_id, message=stored, inserted=False))
            return AppendResult(False, stored)
        if self._listeners:
            self._emit(SessionEvent("append", self.session_id, message=parsed, parent_id=inserted.parent_id, inserted=True))
        self._track_estimate(record, inserted.parent_id)
        return AppendResult(True, parsed)

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
        self._estimate_cache = None
        updated = self.store.update_message(self.session_id, self._record(parsed, 0))
        if updated:
            self._emit(SessionEvent("update", self.session_id, message=parsed))
        return updated

    def delete_messages(self, ids: Iterable[str]) -> list[str]:
        """Delete messages by id and return those deleted. Their children become roots."""
        if isinstance(ids, str):
            ids = [ids]
        self._estimate_cache = None
        deleted = self.store.delete_messages(self.session_id, list(ids))
        if deleted:
            self._emit(SessionEvent("delete", self.session_id, message_ids=tuple(deleted)))
        return deleted

    def clear_messages(self) -> None:
        """Delete every message and compaction of this session (context blocks stay)."""
        self._estimate_cache = None
        self.store.clear_session(self.session_id)
        if self._has_context():
            blocks = self._context()
            blocks.clear_loaded_skills()
            blocks.refresh_system_prompt()
        self._emit(SessionEvent("clear", self.session_id))

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

    def _record(self, message: SessionMessage, created_at_us: int) -> MessageRecord:
        stored, blobs = extract_blobs(message)
        return MessageRecord(
            id=message.id,
            role=message.role,
            content=storage_json(stored),
            text=text_content(message),
            # A ``compaction_`` row (only an import can store one) is never shown, so it adds
            # nothing to the running token totals that the estimate reads.
            tokens=0 if message.id.startswith(COMPACTION_ID_PREFIX) else self._count([message]),
            created_at_us=created_at_us,
            blobs=blobs,
        )

    def _restore(self, messages: list[SessionMessage]) -> list[SessionMessage]:
        """Put inline file payloads back (one store read per call, none without payloads)."""
        return restore_blobs(messages, self.store.get_blobs)

    def _count(self, messages: list[SessionMessage]) -> int:
        return (self._token_counter or estimate_message_tokens)(messages)

    # -- reads -----------------------------------------------------------------------------

    def get_message(self, message_id: str) -> SessionMessage | None:
        """One stored message of this session, or ``None``."""
        message = _parse_row(self.store.get_message(self.session_id, message_id))
        return None if message is None else self._restore([message])[0]

    def get_latest_leaf(self) -> SessionMessage | None:
        """The childless message created last (ties: inserted last), without overlays."""
        message = _parse_row(self.store.latest_leaf(self.session_id))
        return None if message is None else self._restore([message])[0]

    def get_branches(self, message_id: str) -> list[SessionMessage]:
        """The direct children of a message, oldest first."""
        rows = self.store.children(self.session_id, message_id)
        return self._restore([m for m in map(_parse_row, rows) if m is not None])

    def get_path_length(self, leaf_id: str | None = None) -> int:
        """The number of stored messages on the path to ``leaf_id`` (default: the latest leaf),
        overlays not collapsed; 0 when there is none."""
        leaf = self._leaf_id(leaf_id)
        totals = self.store.path_totals(self.session_id, leaf) if leaf else None
        return totals.depth if totals else 0

    def get_history(self, leaf_id: str | None = None, *, raw: bool = False) -> list[SessionMessage]:
        """The path root -> ``leaf_id`` (default: the latest leaf) with compaction overlays
        applied (``raw=True``: every stored message of the path, as written); ``[]`` when the id
        is not in this session."""
        with _gc_paused():
            return list(self.history(leaf_id, raw=raw))

    def history(
        self, leaf_id: str | None = None, *, newest_first: bool = False, raw: bool = False
    ) -> Iterator[SessionMessage]:
        """Stream the path like ``get_history``, holding one chunk of rows in memory at a time."""
        plan = self._plan(leaf_id, raw)
        for chunk in plan.chunks(newest_first):
            yield from self._restore(list(plan.messages(chunk, self.store.fetch_rows(chunk.seqs))))

    async def ahistory(
        self, leaf_id: str | None = None, *, newest_first: bool = False, raw: bool = False
    ) -> AsyncIterator[SessionMessage]:
        """Async twin of :meth:`history`: each chunk is read off the event loop."""
        plan = await run_in_thread(self._plan, leaf_id, raw)
        for chunk in plan.chunks(newest_first):
            rows = await run_in_thread(self.store.fetch_rows, chunk.seqs)
            for message in await run_in_thread(self._restore, list(plan.messages(chunk, rows))):
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
        plan = _ReadPlan.of_entries(window, self.store.get_compactions(self.session_id), self.store.fetch_chunk_rows)
        messages = self._restore(
            [
                message
                for chunk in plan.chunks(False)
                for message in plan.messages(chunk, self.store.fetch_rows(chunk.seqs))
            ]
        )
        return RecentHistory(messages, len(window) < totals.depth, totals.size)

    def search(self, query: str, *, limit: int = 20) -> list[SearchResult]:
        """Messages of this session (every branch) containing every word of ``query``,
        stemmed, best match first. A query with no searchable word gives ``[]``."""
        rows = self.store.search_messages([self.session_id], query, limit)
        return [
            SearchResult(id_, role, content, from_us(created_at_us), session_id)
            for session_id, id_, role, content, created_at_us in rows
        ]

    def _leaf_id(self, leaf_id: str | None) -> str | None:
        if leaf_id:
            return leaf_id
        row = self.store.latest_leaf(self.session_id)
        return row.id if row else None

    def _plan(self, leaf_id: str | None, raw: bool = False) -> "_ReadPlan":
        leaf = self._leaf_id(leaf_id)
        if leaf is None:
            return _ReadPlan(array("q"), [], [], self.store.fetch_chunk_rows)
        seqs, ids = self.store.path_ids(self.session_id, leaf)
        compactions = self.store.get_compactions(self.session_id) if ids and not raw else []
        return _ReadPlan(seqs, ids, compactions, self.store.fetch_chunk_rows, hide_markers=not raw)

    # -- compactions -----------------------------------------------------------------------

    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> Compaction:
        """Store an overlay that shows ``summary`` instead of ``from .. to`` on every read."""
        row = CompactionRow(str(uuid.uuid4()), summary, from_message_id, to_message_id, now_us())
        self.store.add_compaction(self.session_id, row)
        self._estimate_cache = None
        compaction = _compaction(row)
        self._emit(SessionEvent("compact", self.session_id, compaction=compaction))
        return compaction

    def compact(self, leaf_id: str | None = None) -> CompactResult | None:
        """Summarise the middle of the branch ending at ``leaf_id`` (default: the active one).

        Runs the registered compaction function on the history (overlays applied) and stores
        its range as an overlay that starts where the earliest overlay visible on this branch
        starts, so successive compactions form one chain. Returns ``None`` when there is nothing
        to compress. Raises ``CompactionError`` if the function fails, times out or names a
        message that is not on the branch; the history is then unchanged.
        """
        if self._compact_fn is None:
            raise SessionsError("No compaction function registered. Call on_compaction() first.")
        with self._compact_lock:
            leaf = self._leaf_id(leaf_id)
            history = self.get_history(leaf) if leaf else []
            context = CompactContext(token_counter=self._count)
            try:
                outcome = call_with_timeout(self._compaction_timeout, self._compact_fn, history, context)
            except Exception as error:
                raise CompactionError(f"compaction function failed: {error}") from error
            result = _compact_result(outcome)
            if result is None:
                return None
            visible = {message.id for message in history}
            if result.to_message_id not in visible or result.to_message_id.startswith(COMPACTION_ID_PREFIX):
                raise CompactionError(
                    f"compaction function named {result.to_message_id!r}, which is not on the branch"
                )
            existing = [
                c
                for c in self.store.get_compactions(self.session_id)
                if COMPACTION_ID_PREFIX + c.id in visible
                or (c.from_message_id in visible and c.to_message_id in visible)
            ]
            from_id = existing[0].from_message_id if existing else result.from_message_id
            position = {entry.id: i for i, entry in enumerate(self.store.path(self.session_id, leaf))}
            if position.get(from_id, len(position)) > position[result.to_message_id]:
                raise CompactionError(
                    f"compaction function named the range {from_id!r} .. {result.to_message_id!r},"
                    " which does not lie on the branch in that order"
                )
            # The overlay's time is taken once the check has run: newest wins, so storage order
            # must be the order in which compactions were checked.
            row = self.store.add_compaction_unless(
                self.session_id,
                lambda: CompactionRow(str(uuid.uuid4()), result.summary, from_id, result.to_message_id, now_us()),
                lambda compactions: self._superseded(compactions, visible, from_id, result.to_message_id, leaf, position),
            )
            self._estimate_cache = None
            if row is None:
                return None
            self._emit(SessionEvent("compact", self.session_id, compaction=_compaction(row)))
            self._warned_noop = False
            if self._has_context():
                self._context().refresh_system_prompt()
            return CompactResult(result.summary, from_id, result.to_message_id)

    def _superseded(
        self,
        compactions: Sequence[CompactionRow],
        visible: set[str],
        from_id: str,
        to_id: str,
        leaf: str,
        position: Mapping[str, int],
    ) -> bool:
        """Whether an overlay the compaction function did not see (stored meanwhile by another
        ``Session``, in this process or another) already covers ``from_id .. to_id`` and more on
        this branch: storing this one, the newest, would show again what that one summarised."""
        for overlay in compactions:
            if overlay.from_message_id != from_id or COMPACTION_ID_PREFIX + overlay.id in visible:
                continue
            end = position.get(overlay.to_message_id)
            if end is not None:
                if end > position[to_id]:
                    return True
            elif any(entry.id == leaf for entry in self.store.path(self.session_id, overlay.to_message_id)):
                return True  # it ends after messages appended to this branch since the read
        return False

    def get_token_estimate(self, leaf_id: str | None = None) -> int:
        """Tokens of the branch as the model sees it: the history with overlays applied (from
        the stored per-message estimates, no content read) plus the system prompt."""
        leaf = self._leaf_id(leaf_id)
        history = self._history_tokens(leaf) if leaf else 0
        return history + self._prompt_tokens()

    def _history_tokens(self, leaf_id: str) -> int:
        overlays = self.store.get_compactions(self.session_id)
        if not overlays:  # the leaf row carries the running total of its path
            totals = self.store.path_totals(self.session_id, leaf_id)
            return totals.tokens if totals is not None else 0
        path = self.store.path(self.session_id, leaf_id)
        total = 0
        for segment in plan_overlays([entry.id for entry in path], overlays):
            if segment.overlay is None:
                total += sum(
                    entry.tokens
                    for entry in path[segment.start : segment.end]
                    if not entry.id.startswith(COMPACTION_ID_PREFIX)
                )
            else:
                total += self._count([summary_message(segment.overlay)])
        return total

    def _prompt_tokens(self) -> int:
        if not self._has_context():
            return 0
        prompt = self._context().prompt_for_estimate()
        cached = self._prompt_tokens_cache
        if cached is not None and cached[0] is prompt:
            return cached[1]
        counter = self._token_counter
        if counter is None:
            tokens = estimate_tokens(prompt)
        elif callable(getattr(counter, "count_text", None)):
            tokens = counter.count_text(prompt)
        else:
            tokens = counter([SessionMessage(id="system-prompt", role="system", parts=[TextPart(text=prompt)])])
        self._prompt_tokens_cache = (prompt, tokens)
        return tokens

    def _track_estimate(self, record: MessageRecord, parent_id: str | None) -> None:
        if self._compact_threshold is None or self._compact_fn is None:
            return
        cached = self._estimate_cache
        if parent_id is not None and cached is not None and cached[0] == parent_id:
            tokens = cached[1] + record.tokens
        else:
            tokens = self._history_tokens(record.id)
        self._estimate_cache = (record.id, tokens)

    def _maybe_auto_compact(self, leaf_id: str) -> None:
        if self._compact_threshold is None or self._compact_fn is None or self._estimate_cache is None:
            return
        try:
            if self._estimate_cache[1] + self._prompt_tokens() <= self._compact_threshold:
                return
            if self.compact(leaf_id) is None and not self._warned_noop:
                self._warned_noop = True
                logger.warning(
                    "session %r is over its compaction threshold but the compaction function found"
                    " nothing to compress; the token counter may under-count the tail",
                    self.session_id,
                )
        except Exception as error:
            self._report_compaction_error(error)

    def _report_compaction_error(self, error: BaseException) -> None:
        handler = self._compaction_error_handler
        if handler is None:
            logger.warning("automatic compaction of session %r failed: %s", self.session_id, error)
            return
        try:
            call_with_timeout(None, handler, error)
        except Exception as handler_error:
            logger.warning("the compaction error handler failed: %s", handler_error)

    def get_compactions(self) -> list[Compaction]:
        """Every overlay of this session, oldest first."""
        return [_compaction(row) for row in self.store.get_compactions(self.session_id)]

    # -- context blocks --------------------------------------------------------------------

    def get_context_block(self, label: str) -> ContextBlock | None:
        """A block as currently loaded (providers are read on first use), or ``None``."""
        blocks = self._context()
        blocks.load()
        return blocks.get_block(label)

    def get_context_blocks(self) -> list[ContextBlock]:
        """Every block, in registration order."""
        blocks = self._context()
        blocks.load()
        return blocks.get_blocks()

    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block's content (``max_tokens`` enforced). The frozen prompt keeps
        the old text until ``refresh_system_prompt``."""
        return self._context().set_block(label, content)

    def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block, on a new line (``max_tokens`` applies to the result)."""
        return self._context().append_to_block(label, content)

    def add_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> ContextBlock:
        """Register a block at runtime and return it loaded; the frozen prompt is unchanged."""
        config = ContextConfig(label, description, max_tokens, provider)
        blocks = self._context()
        block = blocks.add_context(self._bound(config))
        self._context_configs.append(config)
        if block.is_skill and not blocks.loaded_skill_keys():
            self._restore_skills(blocks)
        return block

    def remove_context(self, label: str) -> bool:
        """Drop a block and its loaded skills; ``False`` if there is no such block."""
        known = any(c.label == label for c in self._context_configs)
        self._context_configs = [c for c in self._context_configs if c.label != label]
        removed = self._blocks.remove_context(label) if self._blocks is not None else False
        return known or removed

    def freeze_system_prompt(self) -> str:
        """The system prompt for this run: the persisted one if any, else rendered now (and
        persisted with ``with_cached_prompt``). Block writes do not change it until a refresh."""
        return self._context().freeze_system_prompt()

    def refresh_system_prompt(self) -> str:
        """Reload every block, render the prompt anew, persist it, and return it."""
        return self._context().refresh_system_prompt()

    def system_prompt_for_run(self) -> str:
        """The system prompt to hold for one agent run: the frozen prompt, refreshed first if
        a block changed since it was frozen (here or in another process). Call it once at the
        start of each run, so the prompt, and the model's prefix cache, stay fixed during it."""
        blocks = self._context()
        frozen = blocks.freeze_system_prompt()
        blocks.load(force=True)
        if render_system_prompt(blocks.get_blocks()) != frozen:
            return blocks.refresh_system_prompt()
        return frozen

    def get_loaded_skills(self) -> list[str]:
        """The ``"label:key"`` skills currently loaded, oldest first."""
        return self._context().loaded_skill_keys()

    def tools(self) -> list[Tool]:
        """The model's memory tools for these blocks: ``set_context``, ``load_context``,
        ``unload_context``, ``search_context`` as they apply (``[]`` without blocks)."""
        return context_tools(self._context())

    @property
    def context_configs(self) -> tuple[ContextConfig, ...]:
        """The blocks declared with ``with_context`` / ``add_context``, providers as given."""
        return tuple(self._context_configs)

    def _has_context(self) -> bool:
        return bool(self._context_configs) or self._prompt_cache is not None

    def _bound(self, config: ContextConfig) -> ContextConfig:
        provider = bind_provider(config.provider, self.store, self.session_id, config.label)
        return ContextConfig(config.label, config.description, config.max_tokens, provider)

    def _context(self) -> ContextBlocks:
        with self._context_lock:
            if self._blocks is None:
                prompt_store = self._prompt_cache
                if prompt_store is StorePromptCache:
                    prompt_store = StorePromptCache(self.store, self.session_id)
                blocks = ContextBlocks([self._bound(c) for c in self._context_configs], prompt_store=prompt_store)
                blocks.on_unload = self._rewrite_unloaded_skill
                blocks.on_write = self._block_written
                if blocks.has_skill_providers():
                    self._restore_skills(blocks)
                self._blocks = blocks
            return self._blocks

    def _restore_skills(self, blocks: ContextBlocks) -> None:
        """Reload the set of loaded skills from the raw active branch (after a restart)."""
        try:
            keys = loaded_skills_in_history(self.history(raw=True))
            if keys:
                blocks.restore_loaded_skills(keys)
        except Exception as error:
            logger.warning("could not restore the loaded skills of session %r: %s", self.session_id, error)

    def _rewrite_unloaded_skill(self, label: str, key: str) -> None:
        rewritten = unloaded_skill_rewrite(self.get_history(), label, key)
        if rewritten is not None:
            self.update_message(rewritten)

    # -- change feed -----------------------------------------------------------------------

    def subscribe(self, callback: Callable[[SessionEvent], Any]) -> Callable[[], None]:
        """Report every write of this session object to ``callback(event)`` (plain or ``async
        def``), after it is stored; return the function that unsubscribes. A failing callback is
        logged and never fails the write."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def mirror(self, get: Callable[[], list[SessionMessage]], set: Callable[[list[SessionMessage]], Any]) -> Callable[[], None]:
        """Keep an in-memory list equal to ``get_history()``: ``set`` it now and after every write
        that changes the active branch (an append to its leaf extends it; anything else reloads).
        Returns the function that stops mirroring."""
        set(self.get_history())

        def follow(event: SessionEvent) -> None:
            if event.type == "block" or (event.type == "append" and not event.inserted):
                return
            if event.type == "append" and event.message is not None:
                current = get()
                last = current[-1] if current else None
                extends = (last.id if last else None) == event.parent_id
                newest = last is None or (event.message.created_at or last.created_at) >= last.created_at
                if extends and newest:
                    set([*current, event.message])
                    return
            set(self.get_history())

        return self.subscribe(follow)

    def _emit(self, event: SessionEvent) -> None:
        for listener in list(self._listeners):
            try:
                call(listener, event)
            except Exception as error:
                logger.warning("a change-feed subscriber failed on %s: %s", event.type, error)

    def _block_written(self, label: str, key: str | None) -> None:
        self._emit(SessionEvent("block", self.session_id, label=label, key=key))

    # -- async twins -----------------------------------------------------------------------

    aappend_message = async_twin(append_message)
    aappend_messages = async_twin(append_messages)
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
    acompact = async_twin(compact)
    aget_token_estimate = async_twin(get_token_estimate)
    aget_compactions = async_twin(get_compactions)
    aget_context_block = async_twin(get_context_block)
    aget_context_blocks = async_twin(get_context_blocks)
    areplace_context_block = async_twin(replace_context_block)
    aappend_context_block = async_twin(append_context_block)
    aadd_context = async_twin(add_context)
    afreeze_system_prompt = async_twin(freeze_system_prompt)
    arefresh_system_prompt = async_twin(refresh_system_prompt)
    asystem_prompt_for_run = async_twin(system_prompt_for_run)
    aget_loaded_skills = async_twin(get_loaded_skills)
    atools = async_twin(tools)


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cycle collector while building a large list of messages: they hold no cycles,
    yet each collection would re-scan every message built so far (about half of a 10,000-message
    read). The collector's previous state is restored."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse_row(row: MessageRow | None) -> SessionMessage | None:
    if row is None or row.id.startswith(COMPACTION_ID_PREFIX):
        return None
    return message_from_storage(row.content, from_us(row.created_at_us))


def _compact_result(outcome: Any) -> CompactResult | None:
    """A compaction function's result as a ``CompactResult`` (``None`` when there is none)."""
    if outcome is None:
        return None
    if isinstance(outcome, Mapping):
        get = outcome.get
        outcome = CompactResult(
            get("summary"), get("from_message_id", get("fromMessageId")), get("to_message_id", get("toMessageId"))
        )
    summary = getattr(outcome, "summary", None)
    start = getattr(outcome, "from_message_id", None)
    end = getattr(outcome, "to_message_id", None)
    if not all(isinstance(value, str) for value in (summary, start, end)):
        raise CompactionError(f"a compaction function must return a CompactResult or None, not {outcome!r}")
    if not summary.strip():
        return None
    return CompactResult(summary, start, end)


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
    def of_entries(cls, path: Sequence[PathEntry], overlays: Sequence[CompactionRow], chunk_rows: int) -> "_ReadPlan":
        return cls(array("q", (entry.seq for entry in path)), [entry.id for entry in path], overlays, chunk_rows)

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
                if message is not None and not (self.hide_markers and is_marker(message)):
                    yield message
            else:
                yield summary_message(item)
