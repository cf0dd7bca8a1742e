"""``SessionStore``: LangGraph's ``BaseStore`` over session-memory's database.

It converts LangGraph's operations and index config and delegates to ``sessions_core``'s
``Items``: items live in the same SQLite file or PostgreSQL schema as the conversations, every
put is kept as a version, a query is ranked by the core's keyword search (and, with an
embedding index, by meaning too, fused by reciprocal rank); without an embedding index the
items a query does not match follow the matches, as LangGraph's stores list every item.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from types import TracebackType
from typing import Any, Literal, cast

from langchain_core.embeddings import Embeddings
from langgraph.store.base import (
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    NotProvided,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
    validate_op_namespace,
)

from sessions_core import EraseResult, InvalidInputError, SessionManager
from sessions_core.integration import ItemPut, Items, ItemVersion, StoredItem, redact_query, run_in_thread

from ._source import checked_conn_string

__all__ = ["SessionStore"]

_KNOWN_NAMESPACES = 4096
"""At most this many namespaces are remembered as valid for :meth:`SessionStore.put`."""

Field = tuple[str, str | list[str]]
"""An indexed field: its path as written (``"$"``: the whole value) and tokenized."""


class SessionStore(BaseStore):
    """A LangGraph ``BaseStore`` (sync and async) whose items are kept by session-memory.

    ``store``: a path, ``":memory:"``, a ``postgresql://`` URL or a store object
    (``SqliteStore``, ``PostgresStore``); the store opens a manager over it and closes it on
    :meth:`close` only if it opened it. :meth:`from_manager` shares a manager's store. Items
    are kept in the manager's namespace (``namespace``: that of the manager opened here): stores
    of two namespaces on one database never see each other's items.

    ``index``: LangGraph's ``IndexConfig`` (``embed``, ``dims``, ``fields``; SQLite's
    ``text_fields`` is read as ``fields``): the fields are embedded on put and a search with a
    query is ranked by cosine similarity fused with the keyword ranking. Without it a query is
    ranked by keywords alone, the items it does not match following the matches unscored, the
    most recently updated first (LangGraph's own stores then ignore the query). ``ttl``: LangGraph's
    ``TTLConfig`` (``default_ttl`` and ``sweep_interval_minutes`` in minutes,
    ``refresh_on_read``); :meth:`start_ttl_sweeper` sweeps in a background thread.
    ``redactor`` (default: the manager's, ``SessionManager.with_redaction``, also when it is set
    after the store is built): every string of a value passes through it before it is stored,
    indexed or embedded (``sessions_core.PIIRedactor`` or any callable ``str -> str``); field
    names are kept. A search's ``filter`` values pass through it too, to match what was stored;
    one it masks needs ``PIIRedactor(hash_salt=...)`` and an equality (``InvalidInputError``).

    Beyond ``BaseStore``: :meth:`item_versions`, :meth:`restore_item`, :meth:`sweep_ttl`. Bad
    input raises ``sessions_core.InvalidInputError`` (a ``ValueError``).
    """

    supports_ttl: bool = True

    def __init__(
        self,
        store: Any = ":memory:",
        *,
        index: IndexConfig | dict[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        namespace: str | None = None,
        redactor: Any = None,
    ) -> None:
        if isinstance(store, SessionManager):
            if namespace is not None and namespace != store.namespace:
                raise InvalidInputError(
                    f"namespace {namespace!r} differs from the manager's ({store.namespace!r}):"
                    " a store over a manager keeps its items in the manager's namespace"
                )
            manager = store
        else:
            manager = SessionManager(store, namespace=namespace or "")
        self._owns_manager = manager is not store
        self.manager = manager
        self.items = Items(
            manager.store, namespace=manager.namespace, redactor=manager.redactor if redactor is None else redactor
        )
        self._own_redactor = redactor is not None
        self._batches = _Coalescer(self._abatch_now)
        self._put_namespaces: set[tuple[str, ...]] = set()  # namespaces BaseStore.put found valid
        self.ttl_config = ttl
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        self._fields: list[Field] = [("$", "$")]
        if index is not None:
            config: dict[str, Any] = dict(index)
            if "embed" not in config or "dims" not in config:
                raise InvalidInputError("an index config needs 'embed' and 'dims'")
            fields = config.get("fields") or config.get("text_fields") or ["$"]
            self.index_config = config
            self.embeddings = ensure_embeddings(config["embed"])
            self._fields = [_field(field) for field in fields]

    @classmethod
    def from_manager(
        cls,
        manager: SessionManager,
        *,
        index: IndexConfig | dict[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        redactor: Any = None,
    ) -> SessionStore:
        """A store over ``manager``'s database, in its namespace (the manager keeps owning it),
        redacting with ``redactor`` or else the manager's."""
        if not isinstance(manager, SessionManager):
            raise TypeError(f"from_manager takes a SessionManager, not {type(manager).__name__}")
        return cls(manager, index=index, ttl=ttl, redactor=redactor)

    @classmethod
    def from_conn_string(
        cls,
        conn_string: str,
        *,
        index: IndexConfig | dict[str, Any] | None = None,
        ttl: TTLConfig | None = None,
        namespace: str | None = None,
        redactor: Any = None,
    ) -> SessionStore:
        """A store over ``conn_string`` (a SQLite path, ``":memory:"``, a ``postgresql://`` URL
        or libpq ``key=value`` string), for ``with`` or ``async with``, which close it: what
        LangGraph's stores' ``from_conn_string`` give, so code written for them runs unchanged."""
        return cls(
            checked_conn_string(conn_string, "SessionStore"),
            index=index,
            ttl=ttl,
            namespace=namespace,
            redactor=redactor,
        )

    def setup(self) -> None:
        """Nothing to do: the database's migrations ran when it was opened (LangGraph's stores
        need this call; it is kept so that their code runs unchanged)."""

    async def asetup(self) -> None:
        """As :meth:`setup`."""

    def close(self) -> None:
        """Stop the sweeper; close the database if this store opened it."""
        self.items.stop_sweeper()
        if self._owns_manager:
            self.manager.close()

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.close()

    async def __aenter__(self) -> SessionStore:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- BaseStore -----------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = self._redacted(_checked(ops))
        texts, queries = self._embedding_requests(ops)
        vectors = self.embeddings.embed_documents(texts) if texts and self.embeddings else []
        query_vectors = [self.embeddings.embed_query(query) for query in queries] if self.embeddings else []
        return self._apply(ops, vectors, query_vectors)

    def put(
        self,
        namespace: tuple[str, ...],
        key: str,
        value: Mapping[str, Any],
        index: Literal[False] | list[str] | None = None,
        *,
        ttl: float | None | NotProvided = NOT_PROVIDED,
    ) -> None:
        """As ``BaseStore.put``. A put without an embedding index or ``index`` into a namespace
        already put to goes to the items at once, without a batch's conversions."""
        try:
            known = namespace in self._put_namespaces
        except TypeError:  # unhashable: BaseStore.put refuses it
            known = False
        if not known or index is not None or self.embeddings is not None:
            super().put(namespace, key, value, index, ttl=ttl)
            if type(namespace) is tuple and len(self._put_namespaces) < _KNOWN_NAMESPACES:
                self._put_namespaces.add(namespace)  # BaseStore.put found it valid
            return
        ttl_minutes = (self.ttl_config or {}).get("default_ttl") if isinstance(ttl, NotProvided) else ttl
        self._follow_manager()
        self.items.put_many([ItemPut(namespace, str(key), value, None, None, ttl_minutes)])

    def get(self, namespace: tuple[str, ...], key: str, *, refresh_ttl: bool | None = None) -> Item | None:
        """As ``BaseStore.get``: one read of the items, without a batch's conversions."""
        ttl = self.ttl_config
        if refresh_ttl is None:
            refresh_ttl = True if ttl is None else ttl.get("refresh_on_read", True)
        op = GetOp(namespace, str(key), refresh_ttl)
        validate_op_namespace(op)
        refresh = bool(refresh_ttl and ttl and ttl.get("refresh_on_read", True))
        found = self.items.get_many([(namespace, op.key)], refresh=refresh)[0]
        return None if found is None else _item(found)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` as one batch. The batches awaited on one event loop while a batch runs
        there (the ``aget`` / ``aput`` / ``asearch`` calls of concurrent coroutines, say) run
        together after it, as one, as in LangGraph's ``AsyncBatchedBaseStore``: each read
        of such a group sees the store before the group's puts, and identical reads are read
        once. A bad operation fails its own call only."""
        ops = _checked(ops)
        return await self._batches.submit(ops) if ops else []

    async def _abatch_now(self, ops: list[Op]) -> list[Result]:
        ops = self._redacted(ops)
        texts, queries = self._embedding_requests(ops)
        vectors: list[list[float]] = []
        query_vectors: list[list[float]] = []
        if self.embeddings is not None:
            if texts:
                vectors = await self.embeddings.aembed_documents(texts)
            query_vectors = [await self.embeddings.aembed_query(query) for query in queries]
        return await run_in_thread(self._apply, ops, vectors, query_vectors)

    # -- beyond BaseStore ----------------------------------------------------------------------

    def item_versions(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """Every version of the item, newest first (a deleted item's too; its deletion is a
        version whose ``value`` is ``None``)."""
        return self.items.versions(namespace, key)

    async def aitem_versions(self, namespace: tuple[str, ...], key: str) -> list[ItemVersion]:
        """As :meth:`item_versions`."""
        return await self.items.aversions(namespace, key)

    def restore_item(self, namespace: tuple[str, ...], key: str, version: int) -> None:
        """Put the value of that version back, as the item's newest version (re-indexed; a
        deletion version deletes it)."""
        old = self.items.version(namespace, key, version)
        if old.value is None:
            self.delete(namespace, key)
        else:
            self.put(namespace, key, old.value)

    async def arestore_item(self, namespace: tuple[str, ...], key: str, version: int) -> None:
        """As :meth:`restore_item`."""
        old = await self.items.aversion(namespace, key, version)
        if old.value is None:
            await self.adelete(namespace, key)
        else:
            await self.aput(namespace, key, old.value)

    def erase_item(self, namespace: tuple[str, ...], key: str, *, vacuum: bool = False) -> EraseResult:
        """Remove the item for good: every version and vector of it (a ``delete`` keeps them as
        history), with the store's files scrubbed as ``SessionManager.erase`` does, so that
        none of its values stays readable there; ``items``: 1 when it held anything."""
        return self.items.erase(namespace, key, vacuum=vacuum)

    async def aerase_item(self, namespace: tuple[str, ...], key: str, *, vacuum: bool = False) -> EraseResult:
        """As :meth:`erase_item`."""
        return await self.items.aerase(namespace, key, vacuum=vacuum)

    def sweep_ttl(self) -> int:
        """Remove the expired items (with their versions); how many."""
        return self.items.sweep()

    async def asweep_ttl(self) -> int:
        """As :meth:`sweep_ttl`."""
        return await self.items.asweep()

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> Future[None]:
        """Sweep every ``sweep_interval_minutes`` (default: the TTL config's, else 5) in a
        background thread; the future completes when :meth:`stop_ttl_sweeper` stops it."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        return self.items.start_sweeper(interval)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; whether it stopped within ``timeout`` seconds."""
        return self.items.stop_sweeper(timeout)

    # -- conversion ------------------------------------------------------------------------------

    def _paths(self, op: PutOp) -> list[Field] | None:
        if op.index is False:
            return None
        if op.index is None:
            return self._fields
        return [_field(field) for field in op.index]

    def _field_texts(self, op: PutOp) -> list[tuple[str, str]]:
        """``(field, text)`` of each text of the put's indexed fields (numbered when a path
        reaches several)."""
        paths = self._paths(op)
        if not paths or op.value is None:
            return []
        found = []
        for field, tokens in paths:
            texts = get_text_at_path(op.value, tokens)
            found += [(f"{field}.{n}" if len(texts) > 1 else field, text) for n, text in enumerate(texts)]
        return found

    def _follow_manager(self) -> None:
        """Without a redactor of its own, the store redacts with the manager's as it is now (one
        set after the store was built, by ``SessionMemoryMiddleware(..., redactor=...)`` say)."""
        if not self._own_redactor and self.items.redactor is not self.manager.redactor:
            self.items.redactor = self.manager.redactor

    def _redacted(self, ops: list[Op]) -> list[Op]:
        """``ops`` with each put's value redacted (:meth:`Items.redact`) when a redactor is set,
        before anything is embedded: the embeddings see what is stored."""
        self._follow_manager()
        if self.items.redactor is None:
            return ops
        return [
            op._replace(value=self.items.redact(op.value, op.key))
            if isinstance(op, PutOp) and op.value is not None
            else op
            for op in ops
        ]

    def _embedding_requests(self, ops: Sequence[Op]) -> tuple[list[str], list[str]]:
        if self.embeddings is None:
            return [], []
        texts = [text for op in ops if isinstance(op, PutOp) for _field, text in self._field_texts(op)]
        redactor = self.items.redactor
        queries = [redact_query(redactor, op.query) for op in ops if isinstance(op, SearchOp) and op.query]
        return texts, queries

    def _put(self, op: PutOp, vectors: Iterator[list[float]]) -> ItemPut:
        if op.value is None:
            return ItemPut(op.namespace, op.key, None)
        texts = self._field_texts(op) if self._paths(op) != [("$", "$")] else None
        if op.index is False:
            text: str | None = ""
        elif texts is None:
            text = None
        else:
            text = "\n".join(text for _field, text in texts)
        embedded = None
        if self.embeddings is not None and op.index is not False:
            embedded = [(field, next(vectors)) for field, _text in self._field_texts(op)]
        return ItemPut(op.namespace, op.key, op.value, text, embedded, op.ttl)

    def _apply(self, ops: list[Op], vectors: list[list[float]], query_vectors: list[list[float]]) -> list[Result]:
        results: list[Result] = [None] * len(ops)
        ttl = self.ttl_config
        refresh_on_read = bool(ttl) and (ttl or {}).get("refresh_on_read", True)
        gets: dict[bool, list[tuple[int, GetOp]]] = {}
        reads: list[tuple[int, Op]] = []
        writes: list[PutOp] = []
        for i, op in enumerate(ops):  # one pass: a single get or put is the hot path
            if isinstance(op, GetOp):
                gets.setdefault(bool(op.refresh_ttl and refresh_on_read), []).append((i, op))
            elif isinstance(op, PutOp):
                writes.append(op)
            else:
                reads.append((i, op))
        for refresh in (False, True):
            group = gets.get(refresh)
            if group:
                found = self.items.get_many([(op.namespace, op.key) for _i, op in group], refresh=refresh)
                for (i, _op), item in zip(group, found):
                    results[i] = None if item is None else _item(item)
        queries = iter(query_vectors)
        for i, op in reads:
            if isinstance(op, SearchOp):
                vector = next(queries) if op.query and self.embeddings is not None else None
                refresh = bool(op.refresh_ttl and refresh_on_read)
                if op.query and vector is None:
                    found = self._keyword_first(op, refresh)
                else:
                    found = self.items.search(
                        op.namespace_prefix,
                        query=op.query,
                        query_vector=vector,
                        filter=op.filter,
                        limit=op.limit,
                        offset=op.offset,
                        refresh=refresh,
                        distance=(self.index_config or {}).get("distance_type") or "cosine",
                    )
                results[i] = [_search_item(item) for item in found]
            elif isinstance(op, ListNamespacesOp):
                results[i] = self._namespaces(op)
        if writes:
            embedded = iter(vectors)
            self.items.put_many([self._put(op, embedded) for op in writes], redacted=True)  # by _redacted
        return results

    def _keyword_first(self, op: SearchOp, refresh: bool) -> list[StoredItem]:
        """A query without an embedding index orders the items, as LangGraph's stores do, and
        never hides one: those the keyword search matches first, by rank, then the others
        that ``filter`` keeps, the most recently updated first (what LangGraph's stores give
        for any query), ``limit`` of them from ``offset``."""
        wanted = op.offset + op.limit
        found = self.items.search(op.namespace_prefix, query=op.query, filter=op.filter, limit=wanted)
        if len(found) < wanted and (not found or found[0].score is not None):  # unscored: already the listing
            matched = {(item.namespace, item.key) for item in found}
            recent = self.items.search(op.namespace_prefix, filter=op.filter, limit=wanted)
            found += [item for item in recent if (item.namespace, item.key) not in matched][: wanted - len(found)]
        page = found[op.offset :]
        if refresh and page:
            self.items.refresh([(item.namespace, item.key) for item in page])
        return page

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        suffix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                prefix = tuple(condition.path)
            elif condition.match_type == "suffix":
                suffix = tuple(condition.path)
            else:
                raise InvalidInputError(f"unknown match_type {condition.match_type!r}; known: prefix, suffix")
        return self.items.namespaces(
            prefix=prefix, suffix=suffix, max_depth=op.max_depth, limit=op.limit, offset=op.offset
        )


def _checked(ops: Iterable[Op]) -> list[Op]:
    """``ops`` as a list, each namespace checked as LangGraph's stores check it (before anything runs)."""
    ops = list(ops)
    for op in ops:
        validate_op_namespace(op)
    return ops


class _Coalescer:
    """Batches submitted on an event loop while one of its batches runs wait, then run as
    one: the first runs at once, the rest together after it (identical reads read once)."""

    def __init__(self, run: Callable[[list[Op]], Awaitable[list[Result]]]) -> None:
        self._run = run
        self._waiting: dict[asyncio.AbstractEventLoop, list[tuple[list[Op], asyncio.Future[list[Result]]]]] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def submit(self, ops: list[Op]) -> list[Result]:
        loop = asyncio.get_running_loop()
        waiting = self._waiting.get(loop)
        if waiting is not None:
            future: asyncio.Future[list[Result]] = loop.create_future()
            waiting.append((ops, future))
            return await future
        self._waiting[loop] = []
        try:
            return await self._run(ops)
        finally:
            self._next(loop)

    def _next(self, loop: asyncio.AbstractEventLoop) -> None:
        group = [(ops, future) for ops, future in self._waiting.get(loop, ()) if not future.done()]
        if not group:
            self._waiting.pop(loop, None)
            return
        self._waiting[loop] = []
        task = loop.create_task(self._run_group(loop, group))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run_group(
        self, loop: asyncio.AbstractEventLoop, group: list[tuple[list[Op], asyncio.Future[list[Result]]]]
    ) -> None:
        try:
            merged, where = _distinct_reads([op for ops, _future in group for op in ops])
            try:
                found = await self._run(merged)
            except Exception:
                if len(group) == 1:
                    raise
                for ops, future in group:  # nothing was written (puts come last): each alone, for its own error
                    await _settle(future, self._run(ops))
                return
            at = 0
            for ops, future in group:
                if not future.done():
                    future.set_result([_own(found[where[i]]) for i in range(at, at + len(ops))])
                at += len(ops)
        except BaseException as error:
            for _ops, future in group:
                if not future.done():
                    future.set_exception(error)
            if not isinstance(error, Exception):
                raise
        finally:
            self._next(loop)


def _distinct_reads(ops: list[Op]) -> tuple[list[Op], list[int]]:
    """``ops`` with each repeated read once, and where each op's result is among them."""
    distinct: list[Op] = []
    seen: dict[Op, int] = {}
    where: list[int] = []
    for op in ops:
        if isinstance(op, PutOp):
            where.append(len(distinct))
            distinct.append(op)
            continue
        try:
            at = seen.setdefault(op, len(distinct))
        except TypeError:  # a filter holding a dict: not hashable
            at = len(distinct)
        if at == len(distinct):
            distinct.append(op)
        where.append(at)
    return distinct, where


def _own(result: Result) -> Result:
    """A list result copied, so that callers sharing a read do not share its list."""
    return cast(Result, list(result)) if isinstance(result, list) else result


async def _settle(future: asyncio.Future[list[Result]], work: Awaitable[list[Result]]) -> None:
    try:
        result = await work
    except Exception as error:
        if not future.done():
            future.set_exception(error)
    else:
        if not future.done():
            future.set_result(result)


def _field(path: str) -> Field:
    return (path, "$" if path == "$" else tokenize_path(path))


def _item(item: StoredItem) -> Item:
    return Item(
        value=item.value,
        key=item.key,
        namespace=item.namespace,
        created_at=item.created_at,
        updated_at=item.updated_at,
    )


def _search_item(item: StoredItem) -> SearchItem:
    return SearchItem(
        namespace=item.namespace,
        key=item.key,
        value=item.value,
        created_at=item.created_at,
        updated_at=item.updated_at,
        score=item.score,
    )
