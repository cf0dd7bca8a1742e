"""``Session``: one conversation tree in a store, with sync methods and async twins.

The facade and its builder. The jobs behind it live in their own modules: opening the store
(``store_owner``), history reads (``reads``), compaction (``autocompact``), context blocks
(``session_blocks``) and the change feed (``feed``).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from . import reads
from ._async import io
from ._time import from_us, now_us, to_us
from .attachments import extract_blobs, inline_payloads
from .autocompact import CompactionRunner, TokenCounter, store_overlay
from .compaction import CompactResult
from .context import ContextBlock, ContextBlocks, ContextConfig, is_search_provider, render_system_prompt
from .errors import (
    ConflictError,
    ContextError,
    InvalidInputError,
    InvalidParentError,
    MessageTooLargeError,
    MessageValidationError,
    SessionsError,
)
from .feed import ChangeFeed, mirror
from .messages import COMPACTION_ID_PREFIX, MessageInput, SessionMessage, parse_message, storage_json, text_content
from .models import AppendResult, Compaction, ContextVersion, RecentHistory, SearchResults, SessionEvent
from .providers import StorePromptCache
from .reads import summary_message
from .redaction import check_redactor, redact_message, redact_query, redact_text
from .retention import (
    CheckpointRewrite,
    EraseResult,
    Retention,
    erase_block,
    erase_messages,
    erase_sessions,
    erasure_store,
)
from .searching import Scope, search_messages
from .semantic import RecallOwner, SemanticRecall
from .session_blocks import SessionBlocks
from .store_owner import StoreOwner, open_store
from .stores.base import LATEST, BlobStore, CompactionRow, Inserted, MessageRecord, _Latest, supports
from .text import check_text
from .tools import Tool, context_tools

if TYPE_CHECKING:
    from typing_extensions import Self

    from ._twins import SessionTwins
else:
    SessionTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones

# ``open_store``, ``StoreOwner``, ``TokenCounter`` and ``summary_message`` were defined here before the split.
__all__ = ["Session", "StoreOwner", "TokenCounter", "open_store", "summary_message"]


class Session(RecallOwner, StoreOwner, SessionTwins):
    """A conversation stored as a tree of messages.

    ``store`` is a SQLite path, ``":memory:"`` (the default), a ``postgresql://`` URL or libpq
    ``key=value`` string, or a store object. The session closes the store only if it opened it.
    Builder methods return the session; every method that touches storage has an ``a``-prefixed
    async twin.

    ``retention``: after its appends, the session prunes the sessions of the default namespace
    ``""`` (those of plain sessions and of a ``SessionManager`` without a namespace) last active
    longer ago than that, at most once an hour per store (``SessionManager.prune``); the one it
    just wrote to is active.

    ``key``: the SQLite file is encrypted with it (``SqliteStore(path, key=...)``, SQLCipher).
    """

    def __init__(
        self,
        store: Any = ":memory:",
        *,
        reserved_metadata_keys: Iterable[str] = (),
        max_message_bytes: int | None = None,
        retention: timedelta | None = None,
        key: str | bytes | None = None,
    ) -> None:
        super().__init__(store, key=key)
        self._retention = None if retention is None else Retention(retention, "")
        if self._retention is not None:
            erasure_store(self.store)
        self._keeps_blobs = supports(self.store, BlobStore)
        self.session_id = ""
        self.reserved_metadata_keys = frozenset(reserved_metadata_keys)
        self.max_message_bytes = max_message_bytes
        self._compaction = CompactionRunner()
        self._feed = ChangeFeed()
        self._blocks = SessionBlocks(self, self._feed.publish)
        self._edit_tool = False
        self._recall: SemanticRecall | None = None
        self._redactor: Any = None
        self._fixed = False

    @classmethod
    def create(cls, store: Any = ":memory:", **options: Any) -> Self:
        """The constructor under the reference's name: ``Session.create(store)``."""
        return cls(store, **options)

    def __repr__(self) -> str:
        return f"Session({self.store!r}, session_id={self.session_id!r})"

    @io
    def close(self) -> None:
        """Close the store if this session opened it (stopping its semantic recall's sender)."""
        if self._owns_store and self._recall is not None:
            self._recall.close()
        super().close()

    # -- builder ---------------------------------------------------------------------------

    def for_session(self, session_id: str) -> Session:
        """Scope this session to ``session_id`` (the default is ``""``), a builder step. A handle
        a ``SessionManager`` gave out is fixed to its session (``ConflictError``): ask the
        manager for another one."""
        if not isinstance(session_id, str):
            raise TypeError("session_id must be a string")
        if self._fixed and session_id != self.session_id:
            raise ConflictError(
                f"this handle is a SessionManager's session {self.session_id!r}, fixed to it;"
                " use manager.get_session(...) for another session"
            )
        self.session_id = check_text(session_id, "session_id")
        self._blocks.reset()
        self._compaction.forget()
        if self._recall is not None:
            self._recall.turn_on(self)
        return self

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
        keep_versions: int | None = None,
    ) -> Session:
        """Add a context block rendered into the system prompt. Without a provider it is a
        writable block kept in this session's store; ``StoreSearchContext()`` makes a searchable
        one; any object with ``get()`` (and ``set``/``load``/``search``) is a provider. A block in
        the store keeps every write as a version (``get_context_history``), the newest
        ``keep_versions`` when given."""
        self._blocks.declare(ContextConfig(label, description, max_tokens, provider, keep_versions))
        return self

    def with_cached_prompt(self, provider: Any = None) -> Session:
        """Persist the frozen system prompt (in this session's store unless a writable
        ``provider`` is given), so a new process on the same store renders the same prompt."""
        self._blocks.prompt_cache = provider if provider is not None else StorePromptCache
        self._blocks.reset()
        return self

    def with_semantic_recall(self, index: Any, **options: Any) -> Session:
        """Find past messages and searchable entries by meaning too: ``index`` is a
        :class:`~sessions_core.recall.VectorIndex` (``langchain_sessions.VectorStoreRecall``,
        ``llamaindex_sessions.VectorStoreRecall``) or a shared :class:`SemanticRecall`;
        ``options`` go to ``SemanticRecall``. Each write queues what it changes in the store's
        outbox, in the same transaction, and a background sender brings the index in line after
        the commit, so a slow or failing index never fails or delays a write. ``search``
        gains ``mode="semantic"`` and ``"hybrid"``, which the search tools then use. What the
        session stored before is queued too, on the next drain (the background sender's, started
        now, or ``drain_recall``'s), with no need for another write first."""
        recall = index if isinstance(index, SemanticRecall) else SemanticRecall(index, **options)
        if options and recall is index:
            raise InvalidInputError("options configure a new SemanticRecall; pass them when creating the shared one")
        self._recall = recall.attach(self.store)
        self._blocks.reset()
        recall.turn_on(self)
        return self

    def with_redaction(self, redactor: Any) -> Session:
        """Pass every text this session stores through ``redactor`` first: a
        :class:`~sessions_core.PIIRedactor`, any object with ``redact(text) -> Redaction``, or a
        plain callable ``str -> str``. It covers the free text of message parts (text, reasoning,
        tool inputs and outputs, file names), block writes and their versions, searchable
        entries and compaction summaries, before anything is stored, indexed or queued for
        vectors; a message with values masked says how many of each kind in
        ``metadata["redacted"]``. A redactor that raises fails the write (``RedactionError``)
        and nothing is stored. ``None`` turns it off."""
        self._redactor = None if redactor is None else check_redactor(redactor)
        self._blocks.reset()
        return self

    @property
    def redactor(self) -> Any:
        """The redactor of ``with_redaction``, or ``None``."""
        return self._redactor

    def _redacted(self, message: SessionMessage) -> SessionMessage:
        return message if self._redactor is None else redact_message(self._redactor, message)

    def _redacted_text(self, text: str) -> str:
        return text if self._redactor is None else redact_text(self._redactor, text)

    def on_compaction(self, fn: Callable[..., Any], *, timeout: float | None = None) -> Session:
        """Register the compaction function ``fn(messages, context) -> CompactResult | None``
        (plain or ``async def``; see ``create_compact_function``). A call that runs longer than
        ``timeout`` seconds counts as a failure."""
        self._compaction.fn = fn
        self._compaction.timeout = timeout
        return self

    def compact_after(self, threshold: int, *, token_counter: TokenCounter | None = None) -> Session:
        """Compact after an append that takes the token estimate of the active branch (history
        with overlays, plus the system prompt) above ``threshold``. ``token_counter(messages)``
        replaces the heuristic; the estimate is kept per stored message, so the check reads no
        history."""
        self._compaction.threshold = threshold
        if token_counter is not None:
            self._compaction.token_counter = token_counter
        return self

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> Session:
        """Call ``handler(error)`` when an automatic compaction fails (the append still succeeds)."""
        self._compaction.error_handler = handler
        return self

    # -- writes ----------------------------------------------------------------------------

    @io
    def append_message(
        self, message: MessageInput, parent_id: str | None | _Latest = LATEST, *, source: str | None = None
    ) -> AppendResult:
        """Store a message under ``parent_id`` (default: the latest leaf; ``None``: a new root; an
        id that is no message of this session raises ``InvalidParentError``, nothing stored).

        An id already stored in this session is not stored again (``inserted=False``). A message
        whose id starts with ``compaction_`` is a synthetic summary echoed back and is never
        stored. ``source="client"`` strips the reserved metadata keys and enforces
        ``max_message_bytes``.
        """
        return self._append(message, parent_id, source, check_parent=True)

    def _append(
        self, message: MessageInput, parent_id: str | None | _Latest, source: str | None, *, check_parent: bool
    ) -> AppendResult:
        """:meth:`append_message`; ``check_parent=False`` when the caller knows ``parent_id`` is
        a stored message of this session (a read fewer)."""
        parsed, record = self._prepare(message, source)
        if record is None:
            return AppendResult(False, parsed)
        if check_parent:
            self._require_parent(parent_id, record.id)
        self._recall_before_write()
        result = self._appended(parsed, record, self.store.insert_message(self.session_id, record, parent_id))
        if result.inserted:
            self._after_append(record.id)
        return result

    def _require_parent(self, parent_id: str | None | _Latest, message_id: str) -> None:
        """Refuse a ``parent_id`` naming no message of this session (the reference would store
        the message as a new root, silently); ``None``, ``LATEST`` and the re-append of a stored
        message (which stores nothing) pass."""
        if not isinstance(parent_id, str) or self.store.get_message(self.session_id, parent_id) is not None:
            return
        if self.store.get_message(self.session_id, message_id) is not None:
            return
        raise InvalidParentError(
            f"parent_id {parent_id!r} is not a message of session {self.session_id!r}"
            " (None starts a new root; LATEST, the default, attaches to the latest leaf)"
        )

    @io
    def append_messages(
        self,
        messages: Iterable[MessageInput],
        parent_id: str | None | _Latest = LATEST,
        *,
        source: str | None = None,
        stored: Literal["continue", "skip"] = "continue",
    ) -> list[AppendResult]:
        """Store messages as a chain in one transaction: the first under ``parent_id`` (default:
        the latest leaf; ``None``: a new root), each next one under the previous one.

        Returns one ``AppendResult`` per message, as ``append_message`` would. Every message is
        validated first: a malformed one raises ``MessageValidationError`` and nothing is stored.
        An id already stored is not stored again and, with ``stored="continue"``, the chain
        continues from it; with ``stored="skip"`` it is left out of the chain (the new messages
        follow one another, as ``append_message`` one by one under the latest leaf would store
        them). ``compaction_`` ids are skipped. Subscribers get the events ``append_message``
        sends, after the batch is stored; the automatic compaction check runs once, after the batch.
        """
        if isinstance(messages, (SessionMessage, Mapping, str, bytes)):
            raise TypeError("append_messages takes a list of messages (append_message takes one)")
        if stored not in ("continue", "skip"):
            raise InvalidInputError(f'stored is "continue" or "skip", not {stored!r}')
        batch: list[tuple[SessionMessage, MessageRecord | None]] = []
        for index, message in enumerate(messages):
            try:
                batch.append(self._prepare(message, source))
            except MessageValidationError as error:
                raise MessageValidationError(f"messages[{index}]: {error}") from None
        records = [record for _, record in batch if record is not None]
        skipped = self._stored_before(records) if stored == "skip" else set()
        if skipped:
            records = [record for record in records if id(record) not in skipped]
        if records:
            self._require_parent(parent_id, records[0].id)
            self._recall_before_write()
        outcomes = iter(self.store.insert_messages(self.session_id, records, parent_id) if records else [])
        results = [
            AppendResult(False, parsed)
            if record is None
            else self._appended(parsed, record, None if id(record) in skipped else next(outcomes))
            for parsed, record in batch
        ]
        last = next((r.message.id for r in reversed(results) if r.inserted), None)
        if last is not None:
            self._after_append(last)
        return results

    def _stored_before(self, records: list[MessageRecord]) -> set[int]:
        """The records (by ``id()``) of messages the session holds, or that an earlier record of
        the batch has the id of. (A message another writer stores between this read and the insert is
        not stored again either; the chain continues from it.)"""
        held = reads.stored_ids(self.store, self.session_id, [record.id for record in records]) if records else set()
        skipped: set[int] = set()
        for record in records:
            if record.id in held:
                skipped.add(id(record))
            held.add(record.id)
        return skipped

    def _prepare(self, message: MessageInput, source: str | None) -> tuple[SessionMessage, MessageRecord | None]:
        """The validated message, with its creation time, and the record to store (``None`` for
        a ``compaction_`` id: a summary echoed back, never stored)."""
        parsed = self._accept(message, source)
        if parsed.id.startswith(COMPACTION_ID_PREFIX):
            return parsed, None
        parsed = self._redacted(parsed)
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
            self._feed.publish(SessionEvent("append", self.session_id, message=stored, inserted=False))
            return AppendResult(False, stored)
        if self._feed.has_subscribers:
            event = SessionEvent("append", self.session_id, message=parsed, parent_id=inserted.parent_id, inserted=True)
            self._feed.publish(event)
        self._compaction.track(record.id, record.tokens, inserted.parent_id, self._history_tokens)
        return AppendResult(True, parsed)

    @io
    def import_message(self, message: MessageInput, *, parent_id: str | None, created_at: datetime) -> AppendResult:
        """Store a message as it is, with its given parent and creation time (for migrations)."""
        parsed = self._redacted(parse_message(message))
        record = self._record(parsed, to_us(created_at))
        self._recall_before_write()
        if self.store.insert_message(self.session_id, record, parent_id) is not None:
            self._recall_after_write()
            return AppendResult(True, parsed.model_copy(update={"created_at": from_us(record.created_at_us)}))
        return AppendResult(False, self.get_message(parsed.id) or parsed)

    @io
    def import_messages(
        self, messages: Sequence[tuple[MessageInput, datetime]], *, parent_id: str | None
    ) -> list[bool]:
        """Store a chain of ``(message, created_at)`` as they are, in one transaction: the first
        under ``parent_id``, each next one under the one before (for migrations). Per message,
        whether it was stored (``False``: its id was stored already; the chain goes on from it)."""
        records = [
            self._record(self._redacted(parse_message(message)), to_us(created_at)) for message, created_at in messages
        ]
        self._recall_before_write()
        stored = [inserted is not None for inserted in self.store.insert_messages(self.session_id, records, parent_id)]
        self._recall_after_write()
        return stored

    @io
    def update_message(self, message: MessageInput) -> bool:
        """Replace a stored message's content (its parent and creation time stay); ``False`` if
        no message with that id is stored."""
        parsed = self._redacted(parse_message(message))
        self._compaction.forget()
        self._recall_before_write()
        updated = self.store.update_message(self.session_id, self._record(parsed, 0))
        if updated:
            self._recall_after_write()
            self._feed.publish(SessionEvent("update", self.session_id, message=parsed))
        return updated

    @io
    def delete_messages(self, ids: Iterable[str]) -> list[str]:
        """Delete messages by id and return those deleted. Their children become roots."""
        if isinstance(ids, str):
            ids = [ids]
        self._compaction.forget()
        self._recall_before_write()
        deleted = self.store.delete_messages(self.session_id, list(ids))
        if deleted:
            self._recall_after_write()
            self._feed.publish(SessionEvent("delete", self.session_id, message_ids=tuple(deleted)))
        return deleted

    @io
    def clear_messages(self) -> None:
        """Delete every message and compaction of this session (context blocks stay)."""
        self._compaction.forget()
        self._recall_before_write()
        self.store.clear_session(self.session_id)
        self._recall_after_write()
        if self._blocks.declared:
            blocks = self._blocks.get()
            blocks.clear_loaded_skills()
            blocks.refresh_system_prompt()
        self._feed.publish(SessionEvent("clear", self.session_id))

    @io
    def erase(self, *, vacuum: bool = False) -> EraseResult:
        """Remove this session with every trace of it (messages, overlays, blocks and their
        versions, search entries, cached prompt, a manager's registry row, the payloads no other
        session refers to) so that none of its text stays in the store, and return what was
        removed. With semantic recall its vectors are deleted from the index now and none of its
        changes stay in the outbox (without, they leave through the outbox: ``vectors_pending``).

        SQLite: deletes zero what they free (``secure_delete``), the full-text indexes are
        merged so no segment keeps an erased term, and the WAL is checkpointed and truncated:
        the text is in neither the file nor its ``-wal``; ``vacuum`` also rebuilds the file.
        PostgreSQL: no row or index entry remains for any query; the server keeps dead tuples
        until ``VACUUM`` (``vacuum=True`` runs it) and the WAL until it is recycled (backups and
        replicas keep their copies). The session stays usable, empty."""
        _removal, result = erase_sessions(self.store, [self.session_id], vacuum=vacuum, recall=self._recall)
        self._compaction.forget()
        self._blocks.reset()
        self._feed.publish(SessionEvent("clear", self.session_id))
        return result

    @io
    def erase_messages(
        self, ids: Iterable[str], *, vacuum: bool = False, checkpoints: CheckpointRewrite | None = None
    ) -> EraseResult:
        """Delete messages as :meth:`delete_messages` does (their children become roots), with
        the compaction overlays whose range holds one of them (their summaries were made from
        it) and the payloads no other message refers to, so that none of their text stays in
        the store, as :meth:`erase` does for a whole session; what was removed
        (``session_ids``: this session when any of ``ids`` was found). Messages forks copied
        are other sessions' (erase them there). A LangGraph thread's checkpoints keep their own
        copy of its state: ``checkpoints`` takes the messages out of them first (what
        ``SessionSaver.erase_messages`` passes); without it, a session with checkpoints is
        refused (``ConflictError``), nothing erased."""
        wanted = [ids] if isinstance(ids, str) else list(ids)
        for message_id in wanted:
            if not isinstance(message_id, str):
                raise InvalidInputError(f"a message id is a string, not {type(message_id).__name__}")
            check_text(message_id, "message id")
        self._compaction.forget()
        erased, result = erase_messages(
            self.store, self.session_id, wanted, vacuum=vacuum, recall=self._recall, checkpoints=checkpoints
        )
        if erased:
            self._feed.publish(SessionEvent("delete", self.session_id, message_ids=tuple(erased)))
        return result

    @io
    def erase_context(self, label: str, *, key: str | None = None, vacuum: bool = False) -> EraseResult:
        """Erase a context block's stored content with every version of it and, for a
        searchable block, every entry with theirs (``key``: only that entry), and the cached
        system prompt that may quote it, so that none of its text stays in the store, as
        :meth:`erase` does for a whole session; what was removed (``session_ids``: this
        session when anything was). The block stays declared, empty (a searchable one without
        the entries), and the next prompt is rendered anew."""
        for value, what in ((label, "label"), (key, "key")):
            if not isinstance(value, str) and not (what == "key" and value is None):
                raise InvalidInputError(f"a block's {what} is a string, not {type(value).__name__}")
            check_text(value, f"block {what}")
        result = erase_block(self.store, self.session_id, label, key, vacuum=vacuum, recall=self._recall)
        self._blocks.reset()
        if result.session_ids:
            self._feed.publish(SessionEvent("block", self.session_id, label=label, key=key))
        return result

    def _recall_sessions(self) -> list[str]:
        return [self.session_id]

    def _recall_before_write(self) -> None:
        """With recall on, make sure the store queues this session's changes (once)."""
        if self._recall is not None:
            self._recall.enable(self.session_id)

    def _recall_after_write(self) -> None:
        if self._recall is not None:
            self._recall.notify()

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
        stored, blobs = extract_blobs(message) if self._keeps_blobs else (inline_payloads(message), ())
        return MessageRecord(
            id=message.id,
            role=message.role,
            content=storage_json(stored),
            text=text_content(message),
            # A ``compaction_`` row (only an import can store one) is never shown, so it adds
            # nothing to the running token totals that the estimate reads.
            tokens=0 if message.id.startswith(COMPACTION_ID_PREFIX) else self._compaction.count([message]),
            created_at_us=created_at_us,
            blobs=blobs,
        )

    # -- reads -----------------------------------------------------------------------------

    @io
    def get_message(self, message_id: str) -> SessionMessage | None:
        """One stored message of this session, or ``None``."""
        return reads.stored_message(self.store, self.store.get_message(self.session_id, message_id))

    @io
    def get_latest_leaf(self) -> SessionMessage | None:
        """The childless message created last (ties: inserted last), without overlays."""
        return reads.stored_message(self.store, self.store.latest_leaf(self.session_id))

    @io
    def get_branches(self, message_id: str) -> list[SessionMessage]:
        """The direct children of a message, oldest first."""
        rows = self.store.children(self.session_id, message_id)
        return reads.restore(self.store, [m for m in map(reads.parse_row, rows) if m is not None])

    @io
    def get_path_length(self, leaf_id: str | None = None) -> int:
        """The number of stored messages on the path to ``leaf_id`` (default: the latest leaf),
        overlays not collapsed; 0 when there is none."""
        return reads.path_length(self.store, self.session_id, leaf_id)

    @io
    def get_history(self, leaf_id: str | None = None, *, raw: bool = False) -> list[SessionMessage]:
        """The path root -> ``leaf_id`` (default: the latest leaf) with compaction overlays
        applied (``raw=True``: every stored message of the path, as written); ``[]`` when the id
        is not in this session."""
        return reads.history_list(self.store, self.session_id, leaf_id, raw=raw)

    @io
    def history(
        self, leaf_id: str | None = None, *, newest_first: bool = False, raw: bool = False
    ) -> Iterator[SessionMessage]:
        """Stream the path like ``get_history``, holding one chunk of rows in memory at a time."""
        yield from reads.history(self.store, self.session_id, leaf_id, newest_first=newest_first, raw=raw)

    async def ahistory(
        self, leaf_id: str | None = None, *, newest_first: bool = False, raw: bool = False
    ) -> AsyncIterator[SessionMessage]:
        """Async twin of :meth:`history`: each chunk is read off the event loop."""
        async for message in reads.ahistory(self.store, self.session_id, leaf_id, newest_first=newest_first, raw=raw):
            yield message

    @io
    def get_recent_history(
        self, max_bytes: int, *, leaf_id: str | None = None, min_recent_messages: int = 1
    ) -> RecentHistory:
        """The longest suffix of the path whose stored size fits ``max_bytes`` (at least
        ``min_recent_messages`` messages, always the leaf), overlays applied within it."""
        return reads.recent_history(self.store, self.session_id, max_bytes, leaf_id, min_recent_messages)

    @io
    def search(self, query: str, *, limit: int = 20, mode: str = "text", match: str = "any") -> SearchResults:
        """Messages of this session (every branch) matching ``query``, best first, each once.

        ``mode="text"``: by words. ``match="any"`` (the default) finds messages containing any
        meaningful word of ``query`` (stop words of its language weigh nothing), those with
        every word first, each group by BM25; ``match="all"`` only those containing every word.
        Words are stemmed; a query with no searchable word gives ``[]``. With
        ``with_semantic_recall``, ``"semantic"``: closest in meaning, and ``"hybrid"``: both
        rankings fused by reciprocal rank. A message an overlay hides is found too, with
        ``compacted=True``. With a salted ``PIIRedactor``, ``query`` is redacted as stored
        text is (:func:`~sessions_core.redaction.redact_query`), so a masked value finds where it
        was mentioned."""
        scope = Scope(session_ids=[self.session_id])
        query = redact_query(self._redactor, query)
        return search_messages(self.store, self._recall, query, limit, mode, scope, match)

    @io
    def rebuild_recall(self) -> int:
        """Send this session's messages and entries to the index again (after the index lost
        them, or to fill a new one); queued, then sent like any change."""
        recall = self._require_recall()
        recall.enable(self.session_id)
        queued = recall.store.recall_rebuild([self.session_id])
        recall.notify()
        return queued

    # -- compactions -----------------------------------------------------------------------

    @io
    def add_compaction(self, summary: str, from_message_id: str, to_message_id: str) -> Compaction:
        """Store an overlay that shows ``summary`` instead of ``from .. to`` on every read."""
        for value, what in (
            (summary, "summary"),
            (from_message_id, "from_message_id"),
            (to_message_id, "to_message_id"),
        ):
            check_text(value, what)
        for message_id, what in ((from_message_id, "from_message_id"), (to_message_id, "to_message_id")):
            if self.store.get_message(self.session_id, message_id) is None:
                raise InvalidParentError(f"{what} {message_id!r} is not a message of session {self.session_id!r}")
        summary = self._redacted_text(summary)
        row = CompactionRow(str(uuid.uuid4()), summary, from_message_id, to_message_id, now_us())
        self.store.add_compaction(self.session_id, row)
        self._compaction.forget()
        compaction = reads.compaction(row)
        self._feed.publish(SessionEvent("compact", self.session_id, compaction=compaction))
        return compaction

    @io
    def compact(self, leaf_id: str | None = None, *, using: Callable[..., Any] | None = None) -> CompactResult | None:
        """Summarise the middle of the branch ending at ``leaf_id`` (default: the active one).

        Runs the registered compaction function (``using``: this one instead, once; an adapter
        passes its framework's summariser) on the history (overlays applied) and stores
        its range as an overlay that starts where the earliest overlay visible on this branch
        starts, so successive compactions form one chain. Returns ``None`` when there is nothing
        to compress. Raises ``CompactionError`` if the function fails, times out or names a
        message that is not on the branch; the history is then unchanged.
        """
        runner = self._compaction
        if runner.fn is None and using is None:
            raise SessionsError("No compaction function registered. Call on_compaction() first.")
        with runner.lock:
            leaf = reads.leaf_or_latest(self.store, self.session_id, leaf_id)
            history = self.get_history(leaf) if leaf else []
            result = runner.run(history, using)
            if result is None:
                return None
            if self._redactor is not None:
                result = replace(result, summary=self._redacted_text(result.summary))
            # No leaf: the history is empty, so store_overlay rejects any range before it reads a path.
            row, from_id = store_overlay(self.store, self.session_id, leaf or "", history, result)
            runner.forget()
            if row is None:
                return None
            self._feed.publish(SessionEvent("compact", self.session_id, compaction=reads.compaction(row)))
            runner.compacted()
            if self._blocks.declared:
                self._blocks.get().refresh_system_prompt()
            return CompactResult(result.summary, from_id, result.to_message_id)

    @io
    def get_token_estimate(self, leaf_id: str | None = None) -> int:
        """Tokens of the branch as the model sees it: the history with overlays applied (from
        the stored per-message estimates, no content read) plus the system prompt."""
        history = reads.history_tokens(self.store, self.session_id, leaf_id, self._compaction.count)
        return history + self._prompt_tokens()

    @io
    def get_compactions(self) -> list[Compaction]:
        """Every overlay of this session, oldest first."""
        return [reads.compaction(row) for row in self.store.get_compactions(self.session_id)]

    def _history_tokens(self, leaf_id: str) -> int:
        return reads.history_tokens(self.store, self.session_id, leaf_id, self._compaction.count)

    def _prompt_tokens(self) -> int:
        if not self._blocks.declared:
            return 0
        return self._compaction.prompt_tokens(self._blocks.get().prompt_for_estimate())

    def _after_append(self, leaf_id: str) -> None:
        self._recall_after_write()
        if self._retention is not None:
            self._retention.after_write(self.store, self._recall)
        self._compaction.after_append(self.session_id, leaf_id, self._prompt_tokens, self.compact)

    # -- context blocks --------------------------------------------------------------------

    @io
    def get_context_block(self, label: str) -> ContextBlock | None:
        """A block as currently loaded (providers are read on first use), or ``None``."""
        blocks = self._blocks.get()
        blocks.load()
        return blocks.get_block(label)

    @io
    def get_context_blocks(self) -> list[ContextBlock]:
        """Every block, in registration order."""
        blocks = self._blocks.get()
        blocks.load()
        return blocks.get_blocks()

    @io
    def replace_context_block(self, label: str, content: str) -> ContextBlock:
        """Replace a writable block's content (``max_tokens`` enforced). The frozen prompt keeps
        the old text until ``refresh_system_prompt``."""
        return self._blocks.get().set_block(label, content)

    @io
    def append_context_block(self, label: str, content: str) -> ContextBlock:
        """Append to a writable block, on a new line (``max_tokens`` applies to the result)."""
        return self._blocks.get().append_to_block(label, content)

    @io
    def get_context_history(
        self, label: str, key: str | None = None, *, limit: int | None = None
    ) -> list[ContextVersion]:
        """The versions of block ``label`` (``key``: of that entry of a keyed block), newest
        first, at most ``limit``; ``[]`` for a block whose provider keeps none (a custom one).
        ``ContextError`` for an unknown block."""
        versions = getattr(self._provider_of(label), "versions", None)
        if versions is None:
            return []
        return [
            ContextVersion(row.version, row.content, from_us(row.created_at_us), row.source, row.tool_call_id)
            for row in versions(key, limit)
        ]

    @io
    def restore_context(self, label: str, version: int, key: str | None = None) -> ContextVersion:
        """Make version ``version`` of block ``label`` (``key``: of that entry) the current content,
        as a new version (history is never rewritten), within the block's ``max_tokens`` like any
        write; the new version. ``ContextError`` for an unknown block or version."""
        found = next((v for v in self.get_context_history(label, key) if v.version == version), None)
        if found is None:
            raise ContextError(
                f'Block "{label}"' + (f' entry "{key}"' if key is not None else "") + f" has no version {version}"
            )
        blocks = self._blocks.get()
        if key is None:
            blocks.set_block(label, found.content)
        elif is_search_provider(self._provider_of(label)):  # the provider: the blocks may not be loaded yet
            blocks.set_search_entry(label, key, found.content)
        else:
            blocks.set_skill(label, key, found.content)
        return self.get_context_history(label, key, limit=1)[0]

    def _provider_of(self, label: str) -> Any:
        config = next((c for c in self._blocks.configs if c.label == label), None)
        if config is None:
            raise ContextError(f'Block "{label}" not found')
        return self._blocks.bound(config).provider

    @io
    def add_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
    ) -> ContextBlock:
        """Register a block at runtime and return it loaded; the frozen prompt is unchanged."""
        return self._blocks.add(ContextConfig(label, description, max_tokens, provider))

    @io
    def remove_context(self, label: str) -> bool:
        """Drop a block and its loaded skills; ``False`` if there is no such block."""
        return self._blocks.remove(label)

    @io
    def freeze_system_prompt(self) -> str:
        """The system prompt for this run: the persisted one if any, else rendered now (and
        persisted with ``with_cached_prompt``). Block writes do not change it until a refresh."""
        return self._blocks.get().freeze_system_prompt()

    @io
    def refresh_system_prompt(self) -> str:
        """Reload every block, render the prompt anew, persist it, and return it."""
        return self._blocks.get().refresh_system_prompt()

    @io
    def system_prompt_for_run(self) -> str:
        """The system prompt to hold for one agent run: the frozen prompt, refreshed first if
        a block changed since it was frozen (here or in another process). Call it once at the
        start of each run, so the prompt, and the model's prefix cache, stay fixed during it."""
        blocks = self._blocks.get()
        frozen = blocks.freeze_system_prompt()
        blocks.load(force=True)
        if render_system_prompt(blocks.get_blocks()) != frozen:
            return blocks.refresh_system_prompt()
        return frozen

    @io
    def get_loaded_skills(self) -> list[str]:
        """The ``"label:key"`` skills currently loaded, oldest first."""
        return self._blocks.get().loaded_skill_keys()

    @io
    def tools(self) -> list[Tool]:
        """The model's memory tools for these blocks: ``set_context``, ``load_context``,
        ``unload_context``, ``search_context`` as they apply (``[]`` without blocks)."""
        return context_tools(self._blocks.get(), edit=self._edit_tool)

    def with_edit_tool(self) -> Session:
        """Add the ``edit_context`` tool after ``set_context``: it replaces one exact occurrence
        of a text in a writable block (or an entry of a keyed one) instead of rewriting it all."""
        self._edit_tool = True
        return self

    def declared_tools(self) -> list[Tool]:
        """The tools :meth:`tools` gives, built from the declared blocks without reading the
        store or a provider (to register them before first use); calling one calls the
        session's tool of that name."""
        templates = context_tools(ContextBlocks(), self._blocks.declared_blocks(), edit=self._edit_tool)
        return [replace(tool, func=partial(_call_current_tool, self, tool.name)) for tool in templates]

    @property
    def context_configs(self) -> tuple[ContextConfig, ...]:
        """The blocks declared with ``with_context`` / ``add_context``, providers as given."""
        return tuple(self._blocks.configs)

    # -- change feed -----------------------------------------------------------------------

    def subscribe(self, callback: Callable[[SessionEvent], Any]) -> Callable[[], None]:
        """Report every write of this session object to ``callback(event)`` (plain or ``async
        def``), after it is stored; return the function that unsubscribes. A failing callback is
        logged and never fails the write."""
        return self._feed.subscribe(callback)

    @io
    def mirror(
        self, get: Callable[[], list[SessionMessage]], set: Callable[[list[SessionMessage]], Any]
    ) -> Callable[[], None]:
        """Keep an in-memory list equal to ``get_history()``: ``set`` it now and after every write
        that changes the active branch (an append to its leaf extends it; anything else reloads).
        Returns the function that stops mirroring."""
        return mirror(self._feed, self.get_history, get, set)


def _call_current_tool(session: Session, name: str, args: dict[str, Any]) -> Any:
    for tool in session.tools():
        if tool.name == name:
            return tool.func(args)
    raise SessionsError(f"the tool {name} is not available in this session")
