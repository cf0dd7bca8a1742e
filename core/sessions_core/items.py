"""Namespaced items with versions, keyword and vector search, and expiry (framework-neutral).

The model of LangGraph's ``BaseStore``: a JSON object under a namespace (a tuple of labels) and
a key. Every write is kept as a version (:meth:`Items.versions`); keyword search ranks with the
store's own full-text analysis (every language, identifiers); given embeddings of an item's
fields and of a query, search ranks by cosine similarity, fused with the keyword ranking by
reciprocal rank. An item may expire (minutes after its last write, or read with ``refresh``);
:meth:`Items.sweep` removes the expired ones, and :meth:`Items.start_sweeper` does it
periodically. The store needs the optional ``ItemStore`` capability.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import re
import threading
import uuid
from array import array
from collections.abc import Mapping, Sequence
from concurrent.futures import Future
from datetime import date, datetime
from typing import TYPE_CHECKING, Any, NamedTuple

from ._async import AsyncTwins, io
from ._time import from_us, now_us
from .errors import InvalidInputError, NotFoundError, UnsupportedOperationError
from .ranking import meaningful_units
from .redaction import check_redactor, redact_operand, redact_query, redact_text, redact_value
from .retention import EraseResult, erasure_store
from .stores.base import ItemCondition, ItemRow, ItemStore, ItemWrite, RowCounts, Store, supports
from .text import check_text

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover - installed with the langchain extra
    _orjson = None  # type: ignore[assignment]

if TYPE_CHECKING:
    from ._twins import ItemsTwins
else:
    ItemsTwins = object  # typed twins for type checkers; AsyncTwins makes the real ones

logger = logging.getLogger("sessions_core.items")

__all__ = ["DISTANCES", "FILTER_OPERATORS", "ItemPut", "ItemVersion", "Items", "StoredItem", "value_text"]

FILTER_OPERATORS = ("$eq", "$ne", "$gt", "$gte", "$lt", "$lte")
"""The operators of a filter (``{"field": {"$gte": 3}}``; a bare value is ``$eq``)."""

_FILTER_FIELD = re.compile(r"^[A-Za-z0-9_.-]+$")

RRF_K = 60
"""Reciprocal rank fusion's constant, as the store's other hybrid searches use."""

HYBRID_DEPTH = 50
"""At least this many of each ranking are fused (more when a page asks for more)."""


class StoredItem(NamedTuple):
    """An item as read: ``score`` is set by a search with a query (the cosine similarity when
    the item has vectors, else its fused rank's score)."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    version: int
    score: float | None = None


class ItemVersion(NamedTuple):
    """A version of an item: its value then (``None``: the item was deleted)."""

    version: int
    value: dict[str, Any] | None
    created_at: datetime


class ItemPut(NamedTuple):
    """A write: ``value`` stored as the item's next version, or the item deleted (``None``).
    ``text``: what keyword search indexes (``None``: every string of the value, ``""``: not
    indexed); ``vectors``: ``(field, embedding)`` of its indexed fields (``None``: none);
    ``ttl_minutes``: it expires that long after this write (``None``: never)."""

    namespace: tuple[str, ...]
    key: str
    value: Mapping[str, Any] | None
    text: str | None = None
    vectors: Sequence[tuple[str, Sequence[float]]] | None = None
    ttl_minutes: float | None = None


def item_store(store: Store) -> Store:
    """``store`` if it implements ``ItemStore``, else ``UnsupportedOperationError``."""
    if not supports(store, ItemStore):
        raise UnsupportedOperationError(
            f"{type(store).__name__} does not implement the optional ItemStore capability"
            " (namespaced items); use a store that does (SqliteStore, PostgresStore) for this feature"
        )
    return store


_CHECKED: dict[tuple[str, ...], str] = {}
"""Namespaces (non-empty tuples of labels) already found valid, as stored: a store's puts and
gets name few namespaces, each checked once (at most ``_CHECKED_MAX`` kept)."""
_CHECKED_MAX = 4096


def check_namespace(namespace: Sequence[str], *, prefix: bool = False) -> str:
    """``namespace`` as stored (labels joined by ``.``); ``InvalidInputError`` for a label that
    is not a non-empty string without ``.`` and NUL (an empty namespace only as a ``prefix``)."""
    if type(namespace) is tuple:
        try:
            return _CHECKED[namespace]
        except (KeyError, TypeError):  # not seen yet, or unhashable (then refused below)
            pass
    stored = _checked_namespace(namespace, prefix)
    if namespace and type(namespace) is tuple and all(type(label) is str for label in namespace):
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[namespace] = stored
    return stored


def _checked_namespace(namespace: Sequence[str], prefix: bool) -> str:
    if isinstance(namespace, str) or not isinstance(namespace, Sequence):
        raise InvalidInputError(f"a namespace is a tuple of labels, not {type(namespace).__name__}")
    if not namespace and not prefix:
        raise InvalidInputError("a namespace needs at least one label")
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidInputError(f"namespace label {label!r} of {tuple(namespace)!r} is not a non-empty string")
        if "." in label or "\x00" in label:
            raise InvalidInputError(f"namespace label {label!r} of {tuple(namespace)!r} holds '.' or NUL")
        check_text(label, "namespace label")
    return ".".join(namespace)


def _jsonable(value: Any) -> Any:
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serialisable")


_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, default=_jsonable).encode
"""``json.dumps`` with these options, without making an encoder per value."""


_NUL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\u0000")
"""A NUL character in JSON text: ``\\u0000`` after an even number of backslashes (after an odd
number it is a string's own backslash followed by the text ``u0000``)."""


def _no_nul(text: str, key: str) -> str:
    """``text``, the JSON of item ``key``'s value, unless it holds a NUL character."""
    if "\\u0000" in text and _NUL_ESCAPE.search(text):
        raise InvalidInputError(f"the value of item {key!r} holds a NUL character")
    return text


def _dump(value: Mapping[str, Any], key: str) -> str:
    if not isinstance(value, Mapping):
        raise InvalidInputError(f"the value of item {key!r} is a mapping, not {type(value).__name__}")
    try:
        text = _encode(dict(value))
    except (TypeError, ValueError) as error:
        raise InvalidInputError(f"the value of item {key!r} is not storable as JSON: {error}") from error
    check_text(text, f"the value of item {key!r}")
    return _no_nul(text, key)


_INT64 = 1 << 63


def _plain_text(value: Mapping[str, Any]) -> str | None:
    """:func:`value_text` of ``value`` when it is plain JSON (dicts with string keys, lists,
    strings, booleans, ``None``, finite floats and 64-bit integers, none of them a subclass),
    which ``orjson`` encodes as ``json`` does; ``None`` otherwise."""
    found: list[str] = []
    stack: list[Any] = [value]
    while stack:
        current = stack.pop()
        kind = type(current)
        if kind is str:
            found.append(current)
        elif kind is dict:
            for field in current:
                if type(field) is not str:
                    return None
            for field, inner in reversed(current.items()):
                stack += (inner, field)
        elif kind is list:
            stack.extend(reversed(current))
        elif kind is int:
            if not -_INT64 <= current < _INT64:
                return None
        elif kind is float:
            if not math.isfinite(current):
                return None
        elif kind is not bool and current is not None:
            return None
    return "\n".join(found)


def _dump_plain(value: Mapping[str, Any], key: str) -> str:
    """:func:`_dump` of a plain JSON ``value`` (:func:`_plain_text`), by ``orjson`` when it is
    installed (what LangGraph's stores use: a tenth of ``json``'s time)."""
    if _orjson is None:
        return _dump(value, key)
    try:
        text = _orjson.dumps(value).decode()
    except TypeError:  # a lone surrogate: refused as _dump refuses it
        return _dump(value, key)
    return _no_nul(text, key)


def value_text(value: Any) -> str:
    """Every field name and string of ``value`` (nested ones too), a line each: what keyword
    search indexes of an item by default."""
    found: list[str] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            found.append(current)
        elif isinstance(current, Mapping):
            for field, inner in reversed(list(current.items())):
                stack += [inner, field]
        elif isinstance(current, (list, tuple)):
            stack.extend(reversed(current))
    return "\n".join(found)


def _conditions(filter: Mapping[str, Any] | None, redactor: Any = None) -> list[ItemCondition]:
    """A filter's conditions: a field (``a.b`` for a nested one) equal to a value, or
    ``{operator: value}`` for each of its operators; each value redacted as the items' values
    are (:func:`redact_operand`)."""
    if not filter:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidInputError(f"a filter is a mapping of fields to values, not {type(filter).__name__}")
    conditions = []
    for field, wanted in filter.items():
        if not isinstance(field, str) or not _FILTER_FIELD.match(field):
            raise InvalidInputError(
                f"Invalid filter key: {field!r}; a filter field holds letters, digits, '_', '-' and '.'"
                " (a nested field: 'outer.inner')"
            )
        path = tuple(field.split("."))
        operators = wanted if isinstance(wanted, Mapping) and any(str(k).startswith("$") for k in wanted) else None
        for op, operand in ({"$eq": wanted} if operators is None else operators).items():
            if op not in FILTER_OPERATORS:
                known = ", ".join(FILTER_OPERATORS)
                raise InvalidInputError(f"unknown filter operator {op!r} on {field!r}; known: {known}")
            if redactor is not None:
                operand = redact_operand(redactor, field, operand, exact=op in ("$eq", "$ne"))
            conditions.append(ItemCondition(path, op, operand))
    return conditions


def _pack(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


DISTANCES = ("cosine", "inner_product", "l2")
"""How a query vector scores an item's: cosine similarity, dot product, or minus the
Euclidean distance (higher is nearer in each)."""


def _similarity(query: Sequence[float], query_norm: float, stored: bytes, distance: str) -> float:
    vector = array("f")
    vector.frombytes(stored)
    if len(vector) != len(query):
        return -math.inf if distance == "l2" else 0.0
    if distance == "l2":
        return -math.sqrt(math.fsum((a - b) ** 2 for a, b in zip(query, vector)))
    dot = math.fsum(a * b for a, b in zip(query, vector))
    if distance == "inner_product":
        return dot
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return dot / (query_norm * norm) if norm and query_norm else 0.0


class Items(AsyncTwins, ItemsTwins):
    """The items of ``store`` (shared, never closed here) in ``namespace``: a
    ``SessionManager``'s namespace (``""``: the default). Items of one namespace are never
    read, listed, searched, swept or versioned through another's.

    A store call per method: writes of one :meth:`put_many` are one transaction; a read sees
    no expired item. Bad input raises ``InvalidInputError`` and stores nothing.

    ``redactor`` (as ``Session.with_redaction``'s): every string of a value, and a put's
    ``text``, pass through it before they are stored or indexed (field names are kept); a
    redactor that raises fails the put with ``RedactionError``. A search's filter values pass
    through it too (:func:`~sessions_core.redaction.redact_operand`), and its query when the
    redactor is salted (:func:`~sessions_core.redaction.redact_query`). Vectors given with a put
    are the caller's: compute them from what :meth:`redact` returns, and say so to :meth:`put_many`.
    """

    def __init__(self, store: Store, *, namespace: str = "", redactor: Any = None) -> None:
        if not isinstance(namespace, str) or "\x00" in namespace:
            raise InvalidInputError(f"a namespace is a string without NUL, not {namespace!r}")
        self.store = item_store(store)
        self.namespace = check_text(namespace, "namespace")
        self.redactor = None if redactor is None else check_redactor(redactor)
        self._sweeper: threading.Thread | None = None
        self._sweeping: Future[None] | None = None
        self._stop = threading.Event()

    def _item(self, row: ItemRow, score: float | None = None) -> StoredItem:
        return StoredItem(
            tuple(row.prefix.split(".")),
            row.key,
            json.loads(row.value),
            from_us(row.created_at_us),
            from_us(row.updated_at_us),
            row.version,
            score,
        )

    @staticmethod
    def _key(namespace: Sequence[str], key: str) -> tuple[str, str]:
        if not isinstance(key, str):
            raise InvalidInputError(f"an item key is a string, not {type(key).__name__}")
        check_text(key, "item key")
        return check_namespace(namespace), key

    def redact(self, value: Mapping[str, Any], key: str = "") -> Any:
        """``value`` as a put stores it: through its JSON (so that no object hides a string),
        every string through the redactor; ``value`` itself without one."""
        if self.redactor is None:
            return value
        return redact_value(self.redactor, json.loads(_dump(value, key)))

    @io
    def put_many(self, puts: Sequence[ItemPut], *, redacted: bool = False) -> None:
        """Apply ``puts`` in order, in one transaction (a later write of a key wins).
        ``redacted``: their values and texts already went through :meth:`redact` (the redactor
        runs once)."""
        redactor = None if redacted else self.redactor
        writes = []
        for put in puts:
            key = put.key
            if not isinstance(key, str):
                raise InvalidInputError(f"an item key is a string, not {type(key).__name__}")
            check_text(key, "item key")
            prefix = check_namespace(put.namespace)
            ttl = put.ttl_minutes
            if ttl is not None and (not isinstance(ttl, (int, float)) or not math.isfinite(ttl) or ttl <= 0):
                raise InvalidInputError(f"ttl of item {key!r} is a positive number of minutes, not {ttl!r}")
            if put.value is None:
                writes.append(ItemWrite(prefix, key, None))
                continue
            stored = put.value if redactor is None else self.redact(put.value, key)
            plain = _plain_text(stored) if type(stored) is dict else None
            value = _dump(stored, key) if plain is None else _dump_plain(stored, key)
            if put.text is None:
                text = value_text(stored) if plain is None else plain  # its strings are the value's: checked
            else:
                text = check_text(put.text, f"the text of item {key!r}")
                if redactor is not None:
                    text = redact_text(redactor, text)
            vectors = None
            if put.vectors is not None:
                vectors = tuple((check_text(field, "vector field"), _pack(vector)) for field, vector in put.vectors)
            writes.append(ItemWrite(prefix, key, value, text, vectors, ttl))
        self.store.put_items(self.namespace, writes, now_us())

    @io
    def put(
        self,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any] | None,
        *,
        text: str | None = None,
        vectors: Sequence[tuple[str, Sequence[float]]] | None = None,
        ttl_minutes: float | None = None,
    ) -> None:
        """Store ``value`` as the item's next version (``None``: delete it); see :class:`ItemPut`."""
        self.put_many([ItemPut(tuple(namespace), key, value, text, vectors, ttl_minutes)])

    @io
    def get_many(self, keys: Sequence[tuple[Sequence[str], str]], *, refresh: bool = False) -> list[StoredItem | None]:
        """The items of ``(namespace, key)`` pairs, in their order (``None``: none); with
        ``refresh``, those with a TTL expire that long from now."""
        wanted = [self._key(namespace, key) for namespace, key in keys]
        if not wanted:
            return []
        found = {
            (row.prefix, row.key): row
            for row in self.store.get_items(self.namespace, wanted, now_us(), refresh=refresh)
        }
        return [None if (row := found.get(pair)) is None else self._item(row) for pair in wanted]

    @io
    def get(self, namespace: Sequence[str], key: str, *, refresh: bool = False) -> StoredItem | None:
        """The item, or ``None``."""
        return self.get_many([(namespace, key)], refresh=refresh)[0]

    @io
    def refresh(self, keys: Sequence[tuple[Sequence[str], str]]) -> None:
        """Move the expiry of the items of these ``(namespace, key)`` pairs that have a TTL to
        that long from now, as a read with ``refresh`` does, without reading them."""
        wanted = [self._key(namespace, key) for namespace, key in keys]
        if wanted:
            self.store.refresh_items(self.namespace, wanted, now_us())

    @io
    def search(
        self,
        namespace_prefix: Sequence[str] = (),
        *,
        query: str | None = None,
        query_vector: Sequence[float] | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
        refresh: bool = False,
        distance: str = "cosine",
    ) -> list[StoredItem]:
        """Items under ``namespace_prefix`` matching ``filter``: without a query, the most
        recently updated first; with ``query``, ranked by keyword, and with ``query_vector``
        too, by the cosine similarity of the items' vectors fused with the keyword ranking
        (reciprocal rank; ``distance``: one of :data:`DISTANCES`). ``limit`` from ``offset``;
        ``refresh`` as :meth:`get_many`."""
        if distance not in DISTANCES:
            raise InvalidInputError(f"unknown distance {distance!r}; known: {', '.join(DISTANCES)}")
        under = check_namespace(namespace_prefix, prefix=True)
        if not isinstance(limit, int) or not isinstance(offset, int) or limit < 0 or offset < 0:
            raise InvalidInputError(f"limit and offset are integers >= 0, not {limit!r} and {offset!r}")
        if query is not None:
            query = redact_query(self.redactor, check_text(query, "query"))
        conditions = _conditions(filter, self.redactor)
        now = now_us()
        keyword = bool(query and query.strip() and meaningful_units(query))
        if query_vector is None and not keyword:
            rows = self.store.list_items(self.namespace, under, conditions, limit, offset, now)
            found = [self._item(row) for row in rows]
        else:
            found = self._ranked(
                under, query if keyword else None, query_vector, conditions, limit + offset, now, distance
            )
            found = found[offset:]
        if refresh and found:
            self.store.refresh_items(self.namespace, [(".".join(item.namespace), item.key) for item in found], now)
        return found

    def _ranked(
        self,
        under: str,
        query: str | None,
        query_vector: Sequence[float] | None,
        conditions: list[ItemCondition],
        wanted: int,
        now: int,
        distance: str,
    ) -> list[StoredItem]:
        depth = max(wanted, HYBRID_DEPTH)
        keyword = [] if query is None else self.store.search_items(self.namespace, under, query, conditions, depth, now)
        similarity: dict[tuple[str, str], float] = {}
        if query_vector is not None:
            norm = math.sqrt(math.fsum(x * x for x in query_vector))
            for prefix, key, stored in self.store.item_vectors(self.namespace, under, conditions, now):
                score = _similarity(query_vector, norm, stored, distance)
                if score > similarity.get((prefix, key), -math.inf):
                    similarity[(prefix, key)] = score
        fused: dict[tuple[str, str], float] = {}
        for position, row in enumerate(keyword):
            fused[(row.prefix, row.key)] = 1 / (RRF_K + position + 1)
        by_meaning = sorted(similarity, key=similarity.__getitem__, reverse=True)[:depth]
        for position, pair in enumerate(by_meaning):
            fused[pair] = fused.get(pair, 0.0) + 1 / (RRF_K + position + 1)
        order = sorted(fused, key=lambda pair: (-fused[pair], -similarity.get(pair, -1.0)))[:wanted]
        rows = {(row.prefix, row.key): row for row in keyword}
        missing = [pair for pair in order if pair not in rows]
        if missing:
            rows.update({(row.prefix, row.key): row for row in self.store.get_items(self.namespace, missing, now)})
        return [self._item(rows[pair], similarity.get(pair, fused[pair])) for pair in order if pair in rows]

    @io
    def namespaces(
        self,
        *,
        prefix: Sequence[str] | None = None,
        suffix: Sequence[str] | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[tuple[str, ...]]:
        """The namespaces holding items, sorted, that start with ``prefix`` and end with
        ``suffix`` (a ``"*"`` label matches any one label), cut to ``max_depth`` labels."""
        if max_depth is not None and (not isinstance(max_depth, int) or max_depth < 1):
            raise InvalidInputError(f"max_depth is an integer >= 1, not {max_depth!r}")
        head = tuple(prefix or ())
        tail = tuple(suffix or ())
        literal = []
        for label in head:
            if label == "*":
                break
            literal.append(label)
        found: set[tuple[str, ...]] = set()
        for stored in self.store.item_prefixes(self.namespace, check_namespace(literal, prefix=True), now_us()):
            labels = tuple(stored.split("."))
            if not _matches(labels, head) or not _matches(labels[::-1], tail[::-1]):
                continue
            found.add(labels if max_depth is None else labels[:max_depth])
        return sorted(found)[offset : offset + limit]

    @io
    def versions(self, namespace: Sequence[str], key: str) -> list[ItemVersion]:
        """Every version of the item, newest first (also of a deleted item; ``[]``: never stored)."""
        prefix, key = self._key(namespace, key)
        return [
            ItemVersion(row.version, None if row.value is None else json.loads(row.value), from_us(row.created_at_us))
            for row in self.store.item_versions(self.namespace, prefix, key)
        ]

    @io
    def erase(self, namespace: Sequence[str], key: str, *, vacuum: bool = False) -> EraseResult:
        """Remove the item (live, expired or deleted) with every version and vector of it, and
        scrub the store's files as ``Session.erase`` does, so that none of its values stays in
        the store (a delete keeps them as versions); ``items``: 1 when it held anything."""
        prefix, key = self._key(namespace, key)
        erasure_store(self.store)
        removed = self.store.remove_items(self.namespace, [(prefix, key)])
        self.store.scrub(vacuum=vacuum)
        return EraseResult((), RowCounts(), vacuumed=vacuum, items=removed)

    @io
    def version(self, namespace: Sequence[str], key: str, version: int) -> ItemVersion:
        """One version of the item; ``NotFoundError`` when it has none of that number."""
        for found in self.versions(namespace, key):
            if found.version == version:
                return found
        raise NotFoundError(f"item {key!r} of {tuple(namespace)!r} has no version {version!r}")

    @io
    def sweep(self) -> int:
        """Remove the expired items with their versions and vectors; how many items."""
        return self.store.sweep_items(self.namespace, now_us())

    def start_sweeper(self, interval_minutes: float) -> Future[None]:
        """Sweep every ``interval_minutes`` in a daemon thread until :meth:`stop_sweeper`; the
        future completes when the thread ends (the running one when it is started already)."""
        if self._sweeping is not None and not self._sweeping.done():
            return self._sweeping
        if not isinstance(interval_minutes, (int, float)) or not interval_minutes > 0:
            raise InvalidInputError(f"the sweep interval is a positive number of minutes, not {interval_minutes!r}")
        self._stop.clear()
        done: Future[None] = Future()

        def loop() -> None:
            try:
                while not self._stop.wait(interval_minutes * 60):
                    try:
                        self.sweep()
                    except Exception as error:  # retried at the next interval
                        logger.warning("sweeping expired items failed: %s", error)
            finally:
                done.set_result(None)

        self._sweeping = done
        self._sweeper = threading.Thread(target=loop, name="sessions-items-sweeper", daemon=True)
        self._sweeper.start()
        return done

    def stop_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; whether it has stopped within ``timeout`` seconds."""
        sweeper, self._sweeper, self._sweeping = self._sweeper, None, None
        self._stop.set()
        if sweeper is None:
            return True
        sweeper.join(timeout)
        return not sweeper.is_alive()


def _matches(labels: tuple[str, ...], pattern: tuple[str, ...]) -> bool:
    return len(labels) >= len(pattern) and all(want in ("*", have) for want, have in zip(pattern, labels))
