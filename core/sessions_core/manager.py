"""``SessionManager``: a registry of many sessions in one store, with fork, split, usage and
search across sessions."""

from __future__ import annotations

import threading
import uuid
import warnings
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from ._async import io, run_in_thread
from ._time import from_us, now_us
from .autocompact import TokenCounter
from .branching import ensure_session
from .compaction import CompactResult
from .errors import InvalidInputError
from .feed import ChangeFeed
from .messages import MessageInput, SessionMessage, TextPart, parse_message
from .models import Compaction, SearchResults, SessionEvent
from .redaction import check_redactor, redact_query
from .retention import (
    CheckpointRewrite,
    EraseResult,
    PruneResult,
    Retention,
    erase_sessions,
    erasure_store,
    prune_sessions,
)
from .searching import Scope, search_messages, tool_hits
from .semantic import RecallOwner, SemanticRecall
from .session import Session
from .store_owner import StoreOwner
from .stores.base import LATEST, SessionChanges, SessionRow, _Latest
from .text import check_cache_size, check_text
from .tools import Tool, ToolHit, format_hits, session_search_tool

if TYPE_CHECKING:
    from ._twins import SessionManagerTwins
else:
    SessionManagerTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones

SPLIT_PREFIX = "[Context from previous session]\n\n"
DEFAULT_CACHE_SIZE = 1024


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session of a manager's registry."""

    id: str
    name: str
    parent_session_id: str | None
    model: str | None
    source: str | None
    input_tokens: int
    output_tokens: int
    estimated_cost: float
    end_reason: str | None
    created_at: datetime
    updated_at: datetime


def _info(row: SessionRow) -> SessionInfo:
    return SessionInfo(
        row.id,
        row.name,
        row.parent_session_id,
        row.model,
        row.source,
        row.input_tokens,
        row.output_tokens,
        row.estimated_cost,
        row.end_reason,
        from_us(row.created_at_us),
        from_us(row.updated_at_us),
    )


class _SearchableHistory:
    """The read-only searchable block of ``with_searchable_history``: search across sessions."""

    def __init__(self, manager: SessionManager) -> None:
        self._manager = manager

    def get(self) -> str | None:
        count = len(self._manager.list_sessions())
        if not count:
            return None
        return f"{count} session{'' if count == 1 else 's'} available for search."

    def search(self, query: str) -> str | None:
        hits = self._manager._tool_search(query)
        return format_hits(hits) if hits else None


class SessionManager(RecallOwner, StoreOwner, SessionManagerTwins):
    """Many named sessions in one store.

    ``store`` is a path, ``":memory:"``, a ``postgresql://`` URL or libpq ``key=value`` string,
    or a store object.
    ``namespace`` separates managers sharing a store: a manager never sees another namespace's
    sessions, messages, blocks or search hits. The builder methods configure every session the
    manager hands out; store-backed blocks are kept per session.

    The manager keeps the ``cache_size`` most recently used ``Session`` handles; a handle
    dropped from the cache is rebuilt from the store when next asked for, so a server with
    many users holds a bounded number of them.

    ``retention``: while the manager writes, it prunes its namespace's sessions last active
    longer ago than that (:meth:`prune`), at most once an hour per store.

    ``key``: the SQLite file is encrypted with it (``SqliteStore(path, key=...)``, SQLCipher).
    """

    def __init__(
        self,
        store: Any = ":memory:",
        *,
        namespace: str = "",
        reserved_metadata_keys: Iterable[str] = (),
        max_message_bytes: int | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        retention: timedelta | None = None,
        key: str | bytes | None = None,
    ) -> None:
        check_cache_size(cache_size)
        if not isinstance(namespace, str) or ":" in namespace:
            raise InvalidInputError("namespace must be a string without ':'")
        check_text(namespace, "namespace")
        super().__init__(store, key=key)
        self.namespace = namespace
        self._session_options = {
            "reserved_metadata_keys": tuple(reserved_metadata_keys),
            "max_message_bytes": max_message_bytes,
        }
        self._setup: list[Callable[[Session], Any]] = []
        self._redactor: Any = None
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._cache_size = cache_size
        self._lock = threading.RLock()
        self._feed = ChangeFeed()
        self._clears = 0
        """How many ``clear`` events this manager has published (a session deleted, erased,
        pruned or cleared): a changed count tells a ``Registration`` to check its session again."""
        self._recall: SemanticRecall | None = None
        self._retention = None if retention is None else Retention(retention, namespace)
        if self._retention is not None:
            erasure_store(self.store)

    def __repr__(self) -> str:
        return f"SessionManager({self.store!r}, namespace={self.namespace!r})"

    @io
    def close(self) -> None:
        """Close the store if this manager opened it (stopping its semantic recall's sender)."""
        if self._owns_store and self._recall is not None:
            self._recall.close()
        super().close()

    # -- builder ---------------------------------------------------------------------------

    def _configure(self, step: Callable[[Session], Any]) -> SessionManager:
        with self._lock:
            self._setup.append(step)
            for session in self._sessions.values():
                step(session)
        return self

    def with_context(
        self,
        label: str,
        *,
        description: str | None = None,
        max_tokens: int | None = None,
        provider: Any = None,
        keep_versions: int | None = None,
    ) -> SessionManager:
        """A context block for every session (store-backed blocks are kept per session, with
        their versions; an explicit provider object is shared by all)."""
        return self._configure(
            lambda s: s.with_context(
                label, description=description, max_tokens=max_tokens, provider=provider, keep_versions=keep_versions
            )
        )

    def with_edit_tool(self) -> SessionManager:
        """The ``edit_context`` tool for every session (``Session.with_edit_tool``)."""
        return self._configure(lambda s: s.with_edit_tool())

    def with_cached_prompt(self, provider: Any = None) -> SessionManager:
        """Persist every session's frozen prompt (per session, unless ``provider`` is given)."""
        return self._configure(lambda s: s.with_cached_prompt(provider))

    def on_compaction(self, fn: Callable[..., Any], *, timeout: float | None = None) -> SessionManager:
        return self._configure(lambda s: s.on_compaction(fn, timeout=timeout))

    def compact_after(self, threshold: int, *, token_counter: TokenCounter | None = None) -> SessionManager:
        return self._configure(lambda s: s.compact_after(threshold, token_counter=token_counter))

    def on_compaction_error(self, handler: Callable[[BaseException], Any]) -> SessionManager:
        return self._configure(lambda s: s.on_compaction_error(handler))

    def with_semantic_recall(self, index: Any, **options: Any) -> SessionManager:
        """Semantic recall for every session (``Session.with_semantic_recall``), over one index
        shared by all: each vector is tagged with its session, and a search sees only this
        manager's sessions. ``search`` and ``session_search`` then find by meaning too. The
        sessions registered before are queued too, on the next drain."""
        recall = index if isinstance(index, SemanticRecall) else SemanticRecall(index, **options)
        if options and recall is index:
            raise InvalidInputError("options configure a new SemanticRecall; pass them when creating the shared one")
        self._recall = recall.attach(self.store)
        self._configure(lambda s: s.with_semantic_recall(recall))
        recall.turn_on(self)
        return self

    def with_redaction(self, redactor: Any) -> SessionManager:
        """Redact every text stored through this manager's sessions (``Session.with_redaction``):
        messages, block writes and versions, entries and compaction summaries, including the
        summary a ``compact_and_split`` carries over. A LangGraph store built on this manager
        (``SessionStore.from_manager``) redacts its items with it too."""
        if redactor is not None:
            check_redactor(redactor)
        self._redactor = redactor
        return self._configure(lambda s: s.with_redaction(redactor))

    @property
    def redactor(self) -> Any:
        """The redactor of ``with_redaction``, or ``None``."""
        return self._redactor

    def with_searchable_history(self, label: str) -> SessionManager:
        """Give every session a read-only searchable block over all of this manager's sessions."""
        provider = _SearchableHistory(self)
        return self._configure(
            lambda s: s.with_context(label, description="Cross-session conversation history", provider=provider)
        )

    def storage_id(self, session_id: str) -> str:
        """The id a session's rows are stored under: ``namespace:id``, or in the default namespace
        the id itself, prefixed with ``:`` when it holds a ``:`` so that no id of the default
        namespace can name another namespace's rows."""
        check_text(session_id, "session_id")
        if self.namespace:
            return f"{self.namespace}:{session_id}"
        return f":{session_id}" if ":" in session_id else session_id

    def _touch(self, session_id: str) -> bool:
        """Mark the session active now (and prune when retention is due); whether it is registered."""
        registered = self.store.update_session_row(self.namespace, session_id, SessionChanges(updated_at_us=now_us()))
        if self._retention is not None:
            pruned = self._retention.after_write(self.store, self._recall)
            if pruned is not None:
                self._dropped(pruned.session_ids)
        return registered

    # -- registry --------------------------------------------------------------------------

    @io
    def create(
        self,
        name: str,
        *,
        parent_session_id: str | None = None,
        model: str | None = None,
        source: str | None = None,
    ) -> SessionInfo:
        """Register a new session with a random id and return it."""
        for value, what in (
            (name, "name"),
            (parent_session_id, "parent_session_id"),
            (model, "model"),
            (source, "source"),
        ):
            check_text(value, what)
        session_id = str(uuid.uuid4())
        moment = now_us()
        row = SessionRow(
            self.namespace,
            session_id,
            self.storage_id(session_id),
            name,
            parent_session_id,
            model,
            source,
            0,
            0,
            0.0,
            None,
            moment,
            moment,
        )
        self.store.register_session(row)
        return _info(row)

    @io
    def get(self, session_id: str) -> SessionInfo | None:
        """The registry entry of a session, or ``None`` (``get_session`` gives its ``Session``)."""
        row = self.store.get_session_row(self.namespace, check_text(session_id, "session_id"))
        return None if row is None else _info(row)

    @io
    def list_sessions(self) -> list[SessionInfo]:
        """Every session of this manager, most recently updated first."""
        return [_info(row) for row in self.store.list_session_rows(self.namespace)]

    def list(self) -> list[SessionInfo]:
        """Deprecated alias of :meth:`list_sessions` (the name shadows the builtin ``list``)."""
        warnings.warn("SessionManager.list() is deprecated; use list_sessions()", DeprecationWarning, stacklevel=2)
        return self.list_sessions()

    async def alist(self) -> list[SessionInfo]:
        """Deprecated alias of :meth:`alist_sessions` (its async twin)."""
        warnings.warn("SessionManager.alist() is deprecated; use alist_sessions()", DeprecationWarning, stacklevel=2)
        return await run_in_thread(self.list_sessions)

    @io
    def rename(self, session_id: str, name: str) -> SessionInfo | None:
        """Rename a session; ``None`` (and nothing changed) if it is not registered."""
        check_text(session_id, "session_id")
        check_text(name, "name")
        self.store.update_session_row(self.namespace, session_id, SessionChanges(name=name, updated_at_us=now_us()))
        return self.get(session_id)

    @io
    def delete(self, session_id: str) -> bool:
        """Delete a session with its messages, overlays and blocks; ``False`` if unknown."""
        deleted = self.store.delete_session(self.namespace, check_text(session_id, "session_id"))
        with self._lock:
            self._sessions.pop(session_id, None)
        if deleted:
            if self._recall is not None:
                self._recall.forget(self.storage_id(session_id))
                self._recall.notify()
            self._publish(SessionEvent("clear", session_id))
        return deleted

    @io
    def prune(self, older_than: timedelta, *, namespace: str | None = None, dry_run: bool = False) -> PruneResult:
        """Delete the sessions of ``namespace`` (``None``: this manager's) last active more
        than ``older_than`` ago, with every trace of them (``sessions_core.retention``), and
        return what went (``dry_run``: what would go, changing nothing). Their vectors leave
        the index through the outbox."""
        where = self.namespace if namespace is None else check_text(namespace, "namespace")
        result, _stale = prune_sessions(self.store, older_than, namespace=where, dry_run=dry_run, recall=self._recall)
        if not dry_run and where == self.namespace:
            self._dropped(result.session_ids)
        return result

    @io
    def erase(self, session_id: str, *, vacuum: bool = False) -> EraseResult:
        """Remove a session (registered or not) so that none of its text stays in the store
        (``Session.erase`` says what that means on each store), and return what was removed.
        With semantic recall its vectors are deleted from the index now."""
        storage_id = self.storage_id(check_text(session_id, "session_id"))
        _removal, result = erase_sessions(self.store, [storage_id], vacuum=vacuum, recall=self._recall)
        ids = (session_id,) if result.session_ids else ()
        self._dropped(ids)
        return replace(result, session_ids=ids)

    @io
    def erase_messages(
        self,
        session_id: str,
        ids: Iterable[str],
        *,
        vacuum: bool = False,
        checkpoints: CheckpointRewrite | None = None,
    ) -> EraseResult:
        """Erase these messages of a session, with the overlays made from them
        (``Session.erase_messages``, ``checkpoints`` included), and return what was removed."""
        session = self.get_session(check_text(session_id, "session_id"))
        result = session.erase_messages(ids, vacuum=vacuum, checkpoints=checkpoints)
        return replace(result, session_ids=(session_id,) if result.session_ids else ())

    @io
    def erase_context(
        self, session_id: str, label: str, *, key: str | None = None, vacuum: bool = False
    ) -> EraseResult:
        """Erase a context block of a session with every version (and entry) of it
        (``Session.erase_context``), and return what was removed."""
        session = self.get_session(check_text(session_id, "session_id"))
        result = session.erase_context(label, key=key, vacuum=vacuum)
        return replace(result, session_ids=(session_id,) if result.session_ids else ())

    @io
    def erase_namespace(self, namespace: str, *, vacuum: bool = False) -> EraseResult:
        """:meth:`erase` every session of ``namespace``: those its registry holds and the ids
        written under it without one, and its items (``SessionStore``'s). The result names the
        sessions by their ids in it."""
        check_text(namespace, "namespace")
        sessions = {s.storage_id: s.id for s in erasure_store(self.store).session_activity(namespace)}
        _removal, result = erase_sessions(
            self.store, list(sessions), vacuum=vacuum, recall=self._recall, namespace=namespace
        )
        ids = tuple(sessions[storage_id] for storage_id in result.session_ids)
        if namespace == self.namespace:
            self._dropped(ids)
        return replace(result, session_ids=ids)

    def _publish(self, event: SessionEvent) -> None:
        if event.type == "clear":
            self._clears += 1
        self._feed.publish(event)

    def _dropped(self, session_ids: Iterable[str]) -> None:
        """Sessions of this manager were removed: forget their handles and report ``clear``."""
        for session_id in session_ids:
            with self._lock:
                self._sessions.pop(session_id, None)
            self._publish(SessionEvent("clear", session_id))

    def get_session(self, session_id: str) -> Session:
        """The session with this id, configured by the builder methods (the ``cache_size``
        most recently used are kept)."""
        with self._lock:
            session = self._sessions.get(session_id)
            if session is not None:
                self._sessions.move_to_end(session_id)
            else:
                session = Session(self.store, **self._session_options).for_session(self.storage_id(session_id))
                session._fixed = True
                for step in self._setup:
                    step(session)
                session.subscribe(
                    lambda event, session_id=session_id: self._publish(replace(event, session_id=session_id))
                )
                self._sessions[session_id] = session
                if len(self._sessions) > self._cache_size:
                    self._sessions.popitem(last=False)
            return session

    # -- messages --------------------------------------------------------------------------

    @io
    def append(
        self,
        session_id: str,
        message: MessageInput,
        parent_id: str | None | _Latest = LATEST,
        *,
        register: bool = False,
    ) -> str:
        """Append to a session (default: under its latest leaf) and return the message id.
        ``register``: register the session under its id (named by it) when the registry does not
        hold it, found by the registry update that follows the append (no read before it)."""
        result = self.get_session(session_id).append_message(message, parent_id)
        if not self._touch(session_id) and register:
            ensure_session(self, session_id)
        return result.message.id

    @io
    def upsert(self, session_id: str, message: MessageInput, parent_id: str | None | _Latest = LATEST) -> str:
        """Update the message if its id is stored, else append it; return the id."""
        session = self.get_session(session_id)
        parsed = parse_message(message)
        if not session.update_message(parsed):
            session.append_message(parsed, parent_id)
        self._touch(session_id)
        return parsed.id

    @io
    def append_all(self, session_id: str, messages: Iterable[MessageInput], parent_id: str | None = None) -> str | None:
        """Append messages as a chain starting under ``parent_id`` (``None``: a new root); each
        becomes the parent of the next, all in one transaction (``Session.append_messages``).
        Returns the last id (``parent_id`` for none)."""
        results = self.get_session(session_id).append_messages(list(messages), parent_id)
        self._touch(session_id)
        return results[-1].message.id if results else parent_id

    @io
    def get_history(self, session_id: str, leaf_id: str | None = None) -> list[SessionMessage]:
        return self.get_session(session_id).get_history(leaf_id)

    @io
    def get_message_count(self, session_id: str) -> int:
        """The number of messages on the session's active path."""
        return self.get_session(session_id).get_path_length()

    @io
    def get_branches(self, session_id: str, message_id: str) -> list[SessionMessage]:
        return self.get_session(session_id).get_branches(message_id)

    @io
    def clear_messages(self, session_id: str) -> None:
        self.get_session(session_id).clear_messages()
        self._touch(session_id)

    @io
    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        deleted = self.get_session(session_id).delete_messages(ids)
        self._touch(session_id)
        return deleted

    # -- forks, splits, compaction, usage --------------------------------------------------

    @io
    def fork(self, session_id: str, at_message_id: str, name: str) -> SessionInfo:
        """A new session holding the path up to ``at_message_id`` (ids and the overlays on that
        path kept), so it reads exactly as the original did there. An unknown message gives an
        empty fork."""
        for value, what in ((session_id, "session_id"), (at_message_id, "at_message_id"), (name, "name")):
            check_text(value, what)
        new_id = str(uuid.uuid4())
        moment = now_us()
        row = SessionRow(
            self.namespace,
            new_id,
            self.storage_id(new_id),
            name,
            session_id,
            None,
            None,
            0,
            0,
            0.0,
            None,
            moment,
            moment,
        )
        self.store.fork_session(self.storage_id(session_id), at_message_id, row)
        if self._recall is not None:  # a source without recall yet: the whole fork is queued
            self._recall.enable(row.storage_id)
            self._recall.notify()
        return _info(row)

    @io
    def compact_and_split(self, session_id: str, summary: str, name: str | None = None) -> SessionInfo:
        """End a session (``end_reason="compaction"``) and start a child holding ``summary``."""
        check_text(summary, "summary")
        check_text(name, "name")
        old = self.get(session_id)
        self.store.update_session_row(
            self.namespace, session_id, SessionChanges(end_reason="compaction", updated_at_us=now_us())
        )
        info = self.create(
            name or (old.name if old else None) or "Compacted",
            parent_session_id=session_id,
            model=old.model if old else None,
            source=old.source if old else None,
        )
        message = SessionMessage(id=str(uuid.uuid4()), role="assistant", parts=[TextPart(text=SPLIT_PREFIX + summary)])
        self.get_session(info.id).append_message(message)
        self._touch(info.id)
        return info

    @io
    def add_compaction(self, session_id: str, summary: str, from_message_id: str, to_message_id: str) -> Compaction:
        return self.get_session(session_id).add_compaction(summary, from_message_id, to_message_id)

    @io
    def get_compactions(self, session_id: str) -> list[Compaction]:
        return self.get_session(session_id).get_compactions()

    @io
    def compact(self, session_id: str, leaf_id: str | None = None) -> CompactResult | None:
        return self.get_session(session_id).compact(leaf_id)

    @io
    def add_usage(self, session_id: str, input_tokens: int = 0, output_tokens: int = 0, cost: float = 0.0) -> None:
        """Add to a session's token and cost counters."""
        self.store.update_session_row(
            self.namespace,
            session_id,
            SessionChanges(
                input_tokens=input_tokens, output_tokens=output_tokens, estimated_cost=cost, updated_at_us=now_us()
            ),
        )

    # -- search and tools ------------------------------------------------------------------

    @io
    def search(self, query: str, *, limit: int = 20, mode: str = "text", match: str = "any") -> SearchResults:
        """Messages of every session of this manager matching ``query``, best first, each once
        and naming its session: ``mode`` as in ``Session.search`` (``"semantic"`` and
        ``"hybrid"`` with ``with_semantic_recall``), ``query`` redacted as there."""
        query = redact_query(self._redactor, query)
        return search_messages(self.store, self._recall, query, limit, mode, self._search_scope(), match)

    def _search_scope(self) -> Scope:
        return Scope(namespace=self.namespace, shown=self._registry_id, storage=self.storage_id)

    def _registry_id(self, storage_id: str) -> str:
        """The session id a storage id was made from (the inverse of ``storage_id``)."""
        if self.namespace:
            return storage_id[len(self.namespace) + 1 :]
        return storage_id[1:] if storage_id.startswith(":") else storage_id

    def _recall_sessions(self) -> list[str]:
        return [row.storage_id for row in self.store.list_session_rows(self.namespace)]

    @io
    def rebuild_recall(self) -> int:
        """Send every session of this manager to the index again; the number queued."""
        recall = self._require_recall()
        ids = [self.storage_id(info.id) for info in self.list_sessions()]
        for storage_id in ids:
            recall.enable(storage_id)
        queued = recall.store.recall_rebuild(ids)
        recall.notify()
        return queued

    @io
    def tools(self) -> list[Tool]:
        """``[session_search]``: search past conversations across every session (by words and
        meaning, with semantic recall)."""
        return [session_search_tool(self._tool_search)]

    def _tool_search(self, query: str, *, limit: int = 10) -> list[ToolHit]:
        """What ``session_search`` shows for ``query`` (``tools.format_hits``): the best ``limit``
        messages (by words, and by meaning with semantic recall), each with its session's name
        and the turn that completes it."""
        results = self.search(query, limit=limit, mode="text" if self._recall is None else "hybrid")
        return tool_hits(self.store, results, self._search_scope(), self._session_label)

    def _session_label(self, session_id: str) -> str:
        row = self.store.get_session_row(self.namespace, session_id)
        if row is None or not row.name or row.name == session_id:
            return f"session {session_id}"
        return f'session "{row.name}"'

    @io
    def session_tools(self, session_id: str) -> list[Tool]:
        """A session's memory tools followed by ``session_search``."""
        return self.get_session(session_id).tools() + self.tools()

    # -- change feed -----------------------------------------------------------------------

    def subscribe(self, callback: Callable[[SessionEvent], Any]) -> Callable[[], None]:
        """Report every write through this manager's sessions to ``callback(event)``, with the
        manager's session id (deleting a session reports ``clear``); return the unsubscriber."""
        return self._feed.subscribe(callback)
