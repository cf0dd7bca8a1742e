"""PostgreSQL store (extra ``postgres``): psycopg 3 with a connection pool, for many processes
and hosts sharing one memory.

Every method runs on a pooled connection in one transaction; the async twins of ``Session`` run
them in worker threads. Appends to one session are serialised with a transaction-level advisory
lock, so concurrent writers extend one chain instead of racing for the latest leaf.
"""

from __future__ import annotations

import re
import threading
from array import array
import zlib
from contextlib import contextmanager
from importlib import resources
from typing import Any, Callable, Iterable, Iterator, Sequence, TypeVar

from .._time import now_us
from ..errors import StoreError
from ..fts import query_terms
from .base import (
    LATEST,
    SESSION_COLUMNS,
    SUMMARY_SOURCES,
    CompactionRow,
    Inserted,
    MessageRecord,
    MessageRow,
    PathEntry,
    PathTotals,
    SearchRow,
    SessionChanges,
    SessionRow,
    InspectableStore,
    _Latest,
)
from .base import BlockRow, SearchEntryRow, SessionSummary, StoreStats

try:
    import psycopg
    from psycopg_pool import ConnectionPool
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "PostgresStore needs psycopg 3 and psycopg_pool: pip install 'session-memory[postgres]'"
    ) from error

T = TypeVar("T")

_SETUP_LOCK = zlib.crc32(b"session-memory setup")
_MIGRATION_MARK = re.compile(r"^-- migration (\d+)$", re.MULTILINE)


def schema_sql(schema: str = "public") -> str:
    """The whole schema as SQL, for an administrator to run once (then ``auto_setup=False``)."""
    return _schema_file().replace("{schema}", _quote(schema))


def _schema_file() -> str:
    return resources.files(__package__).joinpath("postgres_schema.sql").read_text(encoding="utf-8")


def _migrations() -> list[str]:
    text = _schema_file()
    marks = list(_MIGRATION_MARK.finditer(text))
    return [text[m.end() : (marks[i + 1].start() if i + 1 < len(marks) else len(text))] for i, m in enumerate(marks)]


MIGRATIONS: tuple[str, ...] = tuple(_migrations())


def _quote(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class PostgresStore(InspectableStore):
    """A PostgreSQL database shared by many processes.

    ``conninfo_or_pool`` is a ``postgresql://`` URL or libpq string (the store opens and later
    closes its own pool), a ``psycopg_pool.ConnectionPool`` or a ``psycopg.Connection`` that the
    caller owns and closes. ``schema`` names the PostgreSQL schema holding the tables (created if
    missing). A call whose connection drops is retried once on a fresh connection when it is
    idempotent; otherwise it raises ``StoreError`` and its transaction is rolled back.
    """

    def __init__(
        self,
        conninfo_or_pool: Any,
        *,
        schema: str | None = None,
        auto_setup: bool = True,
        min_size: int = 1,
        max_size: int = 10,
    ) -> None:
        self.schema = schema or "public"
        self._auto_setup = auto_setup
        self._ready = False
        self._closed = False
        self._setup_lock = threading.Lock()
        self._connection_lock: threading.RLock | None = None
        self._pool: ConnectionPool | None = None
        self._connection: psycopg.Connection | None = None
        self._owns = False
        if isinstance(conninfo_or_pool, str):
            self._pool = ConnectionPool(
                conninfo_or_pool,
                min_size=min_size,
                max_size=max_size,
                open=True,
                check=ConnectionPool.check_connection,
                kwargs={"autocommit": True},
                name="session-memory",
            )
            self._owns = True
            self.description = _redact(conninfo_or_pool)
        elif isinstance(conninfo_or_pool, ConnectionPool):
            self._pool = conninfo_or_pool
            self.description = f"pool {conninfo_or_pool.name}"
        elif isinstance(conninfo_or_pool, psycopg.Connection):
            self._connection = conninfo_or_pool
            self._connection_lock = threading.RLock()
            self.description = "a psycopg connection"
        else:
            raise TypeError(
                "PostgresStore takes a conninfo string, a psycopg_pool.ConnectionPool or a psycopg.Connection"
                f" (an async pool is not supported: the store's async twins run in threads), not {type(conninfo_or_pool).__name__}"
            )
        self._sql: dict[str, str] = {}

    def __repr__(self) -> str:
        return f"PostgresStore({self.description}, schema={self.schema!r})"

    # -- plumbing --------------------------------------------------------------------------

    def q(self, sql: str) -> str:
        """``sql`` with ``{s}`` replaced by the quoted schema (cached)."""
        cached = self._sql.get(sql)
        if cached is None:
            cached = self._sql[sql] = sql.replace("{s}", _quote(self.schema))
        return cached

    @contextmanager
    def _borrow(self) -> Iterator[psycopg.Connection]:
        if self._closed:
            raise StoreError(f"{self!r} is closed")
        if self._pool is not None:
            with self._pool.connection() as conn:
                yield conn
        else:
            assert self._connection is not None and self._connection_lock is not None
            with self._connection_lock:
                yield self._connection

    def _run(self, work: Callable[[psycopg.Connection], T], *, idempotent: bool = True) -> T:
        """Run ``work`` in one transaction; retry once on a dropped connection if idempotent."""
        self._ensure_ready()
        for attempt in (1, 2):
            try:
                with self._borrow() as conn:
                    with conn.transaction():
                        return work(conn)
            except (psycopg.DataError, psycopg.errors.ProgramLimitExceeded) as error:
                # A value PostgreSQL cannot hold (a NUL character in text, an id too large to
                # index...): nothing was written, and a retry would fail the same way.
                raise StoreError(f"{self!r}: value refused by PostgreSQL: {error}") from error
            except psycopg.OperationalError as error:
                if attempt == 2 or not idempotent or self._pool is None:
                    raise StoreError(f"{self!r}: the database connection failed: {error}") from error
                self._pool.check()  # replace the pool's other dead connections before the retry
        raise AssertionError("unreachable")

    def _ensure_ready(self) -> None:
        if self._ready:
            return
        with self._setup_lock:
            if self._ready:
                return
            if self._auto_setup:
                self.setup()
            else:
                with self._borrow() as conn:
                    version = _version(conn, self.schema)
                if version < len(MIGRATIONS):
                    raise StoreError(f"{self!r}: schema missing or old; call setup() or run schema_sql()")
                self._ready = True

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        with self._borrow() as conn:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SETUP_LOCK,))
                conn.execute(f"CREATE SCHEMA IF NOT EXISTS {_quote(self.schema)}")
                version = _version(conn, self.schema)
                if version > len(MIGRATIONS):
                    raise StoreError(f"{self!r}: schema version {version} is newer than this library knows")
                for number in range(version, len(MIGRATIONS)):
                    conn.execute(MIGRATIONS[number].replace("{schema}", _quote(self.schema)))
        self._ready = True

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self._owns and self._pool is not None:
                self._pool.close()

    # -- message writes --------------------------------------------------------------------

    def insert_message(
        self, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> Inserted | None:
        params = record.insert_params(session_id)
        if parent_id is LATEST:
            sql = _INSERT.replace("{parent}", f"({_LATEST_LEAF})")
        else:
            sql = _INSERT.replace("{parent}", "%(parent)s")
            params["parent"] = parent_id

        def work(conn: psycopg.Connection) -> Inserted | None:
            _lock_session(conn, session_id)
            _index_lookups_only(conn)
            row = conn.execute(self.q(sql), params).fetchone()
            if row is None:
                return None
            self._link_blobs(conn, row[4], record)
            return Inserted(row[0], PathTotals(*row[1:4]))

        return self._run(work)

    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        if not records:
            return []
        first = records[0].insert_params(session_id)
        if parent_id is LATEST:
            first_sql = _INSERT.replace("{parent}", f"({_LATEST_LEAF})")
        else:
            first_sql = _INSERT.replace("{parent}", "%(parent)s")
            first["parent"] = parent_id
        rest = [
            {**record.insert_params(session_id), "parent": previous.id}
            for previous, record in zip(records, records[1:])
        ]

        def work(conn: psycopg.Connection) -> list[Inserted | None]:
            _lock_session(conn, session_id)
            _index_lookups_only(conn)
            rows = [conn.execute(self.q(first_sql), first).fetchone()]
            if rest:
                # Pipelined: one round trip for the chain; each statement sees the rows the
                # previous ones inserted (same transaction), so depths and totals chain up.
                # Not as a prepared statement: its generic plan rescans the session for every
                # row, so a batch cost grew with the session (4 ms a message at 16,000 stored).
                threshold, conn.prepare_threshold = conn.prepare_threshold, None
                try:
                    with conn.cursor() as cursor:
                        cursor.executemany(self.q(_INSERT.replace("{parent}", "%(parent)s")), rest, returning=True)
                        while True:
                            rows.append(cursor.fetchone())
                            if not cursor.nextset():
                                break
                finally:
                    conn.prepare_threshold = threshold
            results: list[Inserted | None] = []
            for record, row in zip(records, rows, strict=True):
                if row is None:
                    results.append(None)
                    continue
                self._link_blobs(conn, row[4], record)
                results.append(Inserted(row[0], PathTotals(*row[1:4])))
            return results

        return self._run(work)

    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        def work(conn: psycopg.Connection) -> bool:
            _lock_session(conn, session_id)
            old = conn.execute(
                self.q("SELECT tokens, bytes, seq FROM {s}.session_messages WHERE session_id = %s AND id = %s"),
                (session_id, record.id),
            ).fetchone()
            if old is None:
                return False
            conn.execute(self.q("DELETE FROM {s}.message_blobs WHERE message_seq = %s"), (old[2],))
            self._link_blobs(conn, old[2], record)
            old = old[:2]
            size = record.size
            conn.execute(
                self.q(
                    "UPDATE {s}.session_messages SET role = %s, tokens = %s, bytes = %s, text_content = %s,"
                    " content = %s WHERE session_id = %s AND id = %s"
                ),
                (record.role, record.tokens, size, record.text, record.content, session_id, record.id),
            )
            if (record.tokens, size) != tuple(old):
                self._shift_subtree(conn, session_id, record.id, 0, record.tokens - old[0], size - old[1])
            return True

        return self._run(work)

    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        wanted = list(dict.fromkeys(ids))

        def work(conn: psycopg.Connection) -> list[str]:
            _lock_session(conn, session_id)
            deleted = []
            for message_id in wanted:
                row = conn.execute(
                    self.q(
                        "DELETE FROM {s}.session_messages WHERE session_id = %s AND id = %s"
                        " RETURNING depth, path_tokens, path_bytes"
                    ),
                    (session_id, message_id),
                ).fetchone()
                if row is None:
                    continue
                children = conn.execute(
                    self.q(
                        "UPDATE {s}.session_messages SET parent_id = NULL"
                        " WHERE session_id = %s AND parent_id = %s RETURNING id"
                    ),
                    (session_id, message_id),
                ).fetchall()
                for (child,) in children:
                    self._shift_subtree(conn, session_id, child, -row[0], -row[1], -row[2])
                deleted.append(message_id)
            return deleted

        return self._run(work)

    def _link_blobs(self, conn: psycopg.Connection, seq: int, record: MessageRecord) -> None:
        for blob in record.blobs:
            conn.execute(
                self.q("INSERT INTO {s}.blobs (digest, size, data) VALUES (%s, %s, %s) ON CONFLICT (digest) DO NOTHING"),
                (blob.digest, len(blob.data), blob.data),
            )
            conn.execute(
                self.q("INSERT INTO {s}.message_blobs (message_seq, digest) VALUES (%s, %s) ON CONFLICT DO NOTHING"),
                (seq, blob.digest),
            )

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        rows = self._all("SELECT digest, data FROM {s}.blobs WHERE digest = ANY(%s)", (list(digests),))
        return {digest: bytes(data) for digest, data in rows}

    def _shift_subtree(
        self, conn: psycopg.Connection, session_id: str, root_id: str, depth: int, tokens: int, size: int
    ) -> None:
        conn.execute(
            self.q(_SHIFT_SUBTREE),
            {"s": session_id, "root": root_id, "depth": depth, "tokens": tokens, "bytes": size},
        )

    def clear_session(self, session_id: str) -> None:
        def work(conn: psycopg.Connection) -> None:
            _lock_session(conn, session_id)
            conn.execute(self.q("DELETE FROM {s}.session_messages WHERE session_id = %s"), (session_id,))
            conn.execute(self.q("DELETE FROM {s}.session_compactions WHERE session_id = %s"), (session_id,))

        self._run(work)

    # -- message reads ---------------------------------------------------------------------

    def _one(self, sql: str, params: Any) -> Any:
        return self._run(lambda conn: conn.execute(self.q(sql), params).fetchone())

    def _all(self, sql: str, params: Any) -> list[Any]:
        return self._run(lambda conn: conn.execute(self.q(sql), params).fetchall())

    def _walk(self, sql: str, params: Any) -> list[Any]:
        """A tree walk, planned as index lookups whatever the table statistics say."""

        def work(conn: psycopg.Connection) -> list[Any]:
            _index_lookups_only(conn)
            return conn.execute(self.q(sql), params).fetchall()

        return self._run(work)

    def get_message(self, session_id: str, message_id: str) -> MessageRow | None:
        row = self._one(f"SELECT {_ROW} FROM {{s}}.session_messages WHERE session_id = %s AND id = %s", (session_id, message_id))
        return None if row is None else MessageRow(*row)

    def latest_leaf(self, session_id: str) -> MessageRow | None:
        rows = self._walk(
            f"SELECT {_ROW} FROM {{s}}.session_messages WHERE session_id = %(s)s AND id = ({_LATEST_LEAF})",
            {"s": session_id},
        )
        return MessageRow(*rows[0]) if rows else None

    def children(self, session_id: str, message_id: str) -> list[MessageRow]:
        rows = self._all(
            f"SELECT {_ROW} FROM {{s}}.session_messages WHERE session_id = %s AND parent_id = %s ORDER BY created_at, seq",
            (session_id, message_id),
        )
        return [MessageRow(*row) for row in rows]

    def path(self, session_id: str, leaf_id: str) -> list[PathEntry]:
        return [PathEntry(*row) for row in self._walk(_PATH, {"s": session_id, "leaf": leaf_id})]

    def path_ids(self, session_id: str, leaf_id: str) -> tuple[array, list[str]]:
        def work(conn: psycopg.Connection) -> tuple[array, list[str]]:
            _index_lookups_only(conn)
            seqs: array = array("q")
            ids: list[str] = []
            cursor = conn.execute(self.q(_PATH_IDS), {"s": session_id, "leaf": leaf_id})
            while rows := cursor.fetchmany(5_000):  # Python rows a batch at a time
                for seq, message_id in rows:
                    seqs.append(seq)
                    ids.append(message_id)
            return seqs, ids

        return self._run(work)

    def path_tail(self, session_id: str, leaf_id: str, max_bytes: int, min_rows: int) -> list[PathEntry]:
        params = {"s": session_id, "leaf": leaf_id, "max_bytes": max_bytes, "min_rows": min_rows}
        return [PathEntry(*row) for row in self._walk(_PATH_TAIL, params)]

    def path_totals(self, session_id: str, leaf_id: str) -> PathTotals | None:
        row = self._one(
            "SELECT depth, path_tokens, path_bytes FROM {s}.session_messages WHERE session_id = %s AND id = %s",
            (session_id, leaf_id),
        )
        return None if row is None else PathTotals(*row)

    def fetch_rows(self, seqs: Sequence[int]) -> dict[int, MessageRow]:
        if not seqs:
            return {}
        rows = self._all(f"SELECT seq, {_ROW} FROM {{s}}.session_messages WHERE seq = ANY(%s)", (list(seqs),))
        return {row[0]: MessageRow(*row[1:]) for row in rows}

    # -- compactions -----------------------------------------------------------------------

    def add_compaction(self, session_id: str, row: CompactionRow) -> None:
        self._run(
            lambda conn: conn.execute(
                self.q(
                    "INSERT INTO {s}.session_compactions"
                    " (session_id, id, summary, from_message_id, to_message_id, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
                ),
                (session_id, *row),
            )
        )

    def get_compactions(self, session_id: str) -> list[CompactionRow]:
        rows = self._all(
            "SELECT id, summary, from_message_id, to_message_id, created_at FROM {s}.session_compactions"
            " WHERE session_id = %s ORDER BY created_at, seq",
            (session_id,),
        )
        return [CompactionRow(*row) for row in rows]

    # -- context blocks --------------------------------------------------------------------

    def get_block(self, session_id: str, label: str) -> str | None:
        row = self._one("SELECT content FROM {s}.context_blocks WHERE session_id = %s AND label = %s", (session_id, label))
        return None if row is None else row[0]

    def set_block(self, session_id: str, label: str, content: str) -> None:
        self._run(
            lambda conn: conn.execute(
                self.q(
                    "INSERT INTO {s}.context_blocks (session_id, label, updated_at, content) VALUES (%s, %s, %s, %s)"
                    " ON CONFLICT (session_id, label) DO UPDATE SET content = excluded.content, updated_at = excluded.updated_at"
                ),
                (session_id, label, now_us(), content),
            )
        )

    def get_cached_prompt(self, session_id: str) -> str | None:
        row = self._one("SELECT prompt FROM {s}.cached_prompts WHERE session_id = %s", (session_id,))
        return None if row is None else row[0]

    def set_cached_prompt(self, session_id: str, prompt: str) -> None:
        self._run(
            lambda conn: conn.execute(
                self.q(
                    "INSERT INTO {s}.cached_prompts (session_id, updated_at, prompt) VALUES (%s, %s, %s)"
                    " ON CONFLICT (session_id) DO UPDATE SET prompt = excluded.prompt, updated_at = excluded.updated_at"
                ),
                (session_id, now_us(), prompt),
            )
        )

    def set_search_entry(self, session_id: str, label: str, key: str, content: str) -> None:
        moment = now_us()
        self._run(
            lambda conn: conn.execute(
                self.q(
                    "INSERT INTO {s}.search_entries (session_id, label, key, created_at, updated_at, content)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (session_id, label, key) DO UPDATE"
                    " SET content = excluded.content, updated_at = excluded.updated_at"
                ),
                (session_id, label, key, moment, moment, content),
            )
        )

    def count_search_entries(self, session_id: str, label: str) -> int:
        return self._one("SELECT count(*) FROM {s}.search_entries WHERE session_id = %s AND label = %s", (session_id, label))[0]

    def search_entries(self, session_id: str, label: str, query: str, limit: int) -> list[tuple[str, str]]:
        text = " ".join(query_terms(query))
        if not text or limit <= 0:
            return []
        rows = self._all(
            "SELECT key, content FROM {s}.search_entries, plainto_tsquery('english', %(q)s) query"
            " WHERE session_id = %(s)s AND label = %(label)s AND content_tsv @@ query"
            " ORDER BY ts_rank(content_tsv, query) DESC, seq LIMIT %(limit)s",
            {"q": text, "s": session_id, "label": label, "limit": limit},
        )
        return [(key, content) for key, content in rows]

    # -- session registry ------------------------------------------------------------------

    def register_session(self, row: SessionRow) -> None:
        self._run(lambda conn: conn.execute(self.q(_REGISTER), row), idempotent=False)

    def get_session_row(self, namespace: str, session_id: str) -> SessionRow | None:
        row = self._one(f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions WHERE namespace = %s AND id = %s", (namespace, session_id))
        return None if row is None else SessionRow(*row)

    def list_session_rows(self, namespace: str) -> list[SessionRow]:
        rows = self._all(
            f"SELECT {_SESSION_COLUMNS} FROM {{s}}.sessions WHERE namespace = %s ORDER BY updated_at DESC, seq DESC",
            (namespace,),
        )
        return [SessionRow(*row) for row in rows]

    def update_session_row(self, namespace: str, session_id: str, changes: SessionChanges) -> bool:
        counters = changes.input_tokens or changes.output_tokens or changes.estimated_cost

        def work(conn: psycopg.Connection) -> bool:
            cursor = conn.execute(
                self.q(
                    "UPDATE {s}.sessions SET name = coalesce(%s, name), end_reason = coalesce(%s, end_reason),"
                    " input_tokens = input_tokens + %s, output_tokens = output_tokens + %s,"
                    " estimated_cost = estimated_cost + %s, updated_at = %s WHERE namespace = %s AND id = %s"
                ),
                (*changes, namespace, session_id),
            )
            return cursor.rowcount == 1

        return self._run(work, idempotent=not counters)

    def delete_session(self, namespace: str, session_id: str) -> bool:
        def work(conn: psycopg.Connection) -> bool:
            row = conn.execute(
                self.q("DELETE FROM {s}.sessions WHERE namespace = %s AND id = %s RETURNING storage_id"),
                (namespace, session_id),
            ).fetchone()
            if row is None:
                return False
            _lock_session(conn, row[0])
            for table in ("session_messages", "session_compactions", "context_blocks", "cached_prompts", "search_entries"):
                conn.execute(self.q(f"DELETE FROM {{s}}.{table} WHERE session_id = %s"), row)
            return True

        return self._run(work)

    def fork_session(self, source_storage_id: str, leaf_id: str, row: SessionRow) -> None:
        def work(conn: psycopg.Connection) -> None:
            conn.execute(self.q(_REGISTER), row)
            _index_lookups_only(conn)
            params = {"s": source_storage_id, "leaf": leaf_id, "dst": row.storage_id}
            conn.execute(self.q(_FORK_MESSAGES), params)
            conn.execute(self.q(_FORK_BLOB_LINKS), params)
            conn.execute(self.q(_FORK_COMPACTIONS), params)

        self._run(work, idempotent=False)

    # -- search ----------------------------------------------------------------------------

    def search_messages(self, session_ids: Sequence[str] | None, query: str, limit: int) -> list[SearchRow]:
        text = " ".join(query_terms(query))
        if not text or limit <= 0 or (session_ids is not None and not session_ids):
            return []
        where = "" if session_ids is None else " AND session_id = ANY(%(ids)s)"
        rows = self._all(
            "SELECT session_id, id, role, text_content, created_at"
            " FROM {s}.session_messages, plainto_tsquery('english', %(q)s) query"
            f" WHERE content_tsv @@ query{where} ORDER BY ts_rank(content_tsv, query) DESC, seq LIMIT %(limit)s",
            {"q": text, "ids": list(session_ids or ()), "limit": limit},
        )
        return [SearchRow(*row) for row in rows]

    def search_sessions(self, namespace: str, query: str, limit: int) -> list[SearchRow]:
        text = " ".join(query_terms(query))
        if not text or limit <= 0:
            return []
        rows = self._all(
            "SELECT s.id, m.id, m.role, m.text_content, m.created_at"
            " FROM {s}.session_messages m JOIN {s}.sessions s ON s.storage_id = m.session_id,"
            " plainto_tsquery('english', %(q)s) query"
            " WHERE m.content_tsv @@ query AND s.namespace = %(ns)s"
            " ORDER BY ts_rank(m.content_tsv, query) DESC, m.seq LIMIT %(limit)s",
            {"q": text, "ns": namespace, "limit": limit},
        )
        return [SearchRow(*row) for row in rows]


    # -- inspection and transfer -----------------------------------------------------------

    def session_summaries(self, session_ids: Sequence[str] | None = None) -> list[SessionSummary]:
        where = "" if session_ids is None else " WHERE {column} = ANY(%(ids)s)"
        ids = " UNION ".join(
            f"SELECT {column} FROM {{s}}.{table}" + where.format(column=column) for table, column in SUMMARY_SOURCES
        )
        rows = self._all(_SUMMARIES.replace("{ids}", ids), {"ids": list(session_ids or ())})
        return [
            SessionSummary(row[0], row[1], row[2], row[3], None if row[4] is None else SessionRow(*row[4:]))
            for row in rows
        ]

    def message_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[tuple[int, MessageRow]]:
        after = (
            ""
            if not after_seq
            else " AND (created_at, seq) > (SELECT created_at, seq FROM {s}.session_messages WHERE seq = %(after)s)"
        )
        rows = self._all(
            f"SELECT seq, {_ROW} FROM {{s}}.session_messages WHERE session_id = %(s)s{after}"
            " ORDER BY created_at, seq LIMIT %(limit)s",
            {"s": session_id, "after": after_seq, "limit": limit},
        )
        return [(row[0], MessageRow(*row[1:])) for row in rows]

    def list_blocks(self, session_id: str) -> list[BlockRow]:
        rows = self._all(
            "SELECT label, content, updated_at FROM {s}.context_blocks WHERE session_id = %s ORDER BY label",
            (session_id,),
        )
        return [BlockRow(*row) for row in rows]

    def search_entry_counts(self, session_id: str) -> list[tuple[str, int]]:
        rows = self._all(
            "SELECT label, count(*) FROM {s}.search_entries WHERE session_id = %s GROUP BY label ORDER BY label",
            (session_id,),
        )
        return [(label, count) for label, count in rows]

    def search_entry_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[SearchEntryRow]:
        after = (
            ""
            if not after_seq
            else " AND (label, key) > (SELECT label, key FROM {s}.search_entries WHERE seq = %(after)s)"
        )
        rows = self._all(
            "SELECT seq, label, key, content, created_at, updated_at FROM {s}.search_entries"
            f" WHERE session_id = %(s)s{after} ORDER BY label, key LIMIT %(limit)s",
            {"s": session_id, "after": after_seq, "limit": limit},
        )
        return [SearchEntryRow(*row) for row in rows]

    def import_compaction(self, session_id: str, row: CompactionRow) -> bool:
        def work(conn: psycopg.Connection) -> bool:
            cursor = conn.execute(
                self.q(
                    "INSERT INTO {s}.session_compactions"
                    " (session_id, id, summary, from_message_id, to_message_id, created_at)"
                    " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING"
                ),
                (session_id, *row),
            )
            return cursor.rowcount == 1

        return self._run(work)

    def stats(self) -> StoreStats:
        ids = " UNION ".join(f"SELECT {column} FROM {{s}}.{table}" for table, column in SUMMARY_SOURCES)

        def work(conn: psycopg.Connection) -> StoreStats:
            counts = conn.execute(
                self.q(
                    f"SELECT (SELECT count(*) FROM ({ids}) AS ids), (SELECT count(*) FROM {{s}}.sessions),"
                    " (SELECT count(*) FROM {s}.session_messages), (SELECT count(*) FROM {s}.session_compactions),"
                    " (SELECT count(*) FROM {s}.context_blocks), (SELECT count(*) FROM {s}.cached_prompts),"
                    " (SELECT count(*) FROM {s}.search_entries)"
                )
            ).fetchone()
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                " JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind = 'r'",
                (self.schema,),
            ).fetchone()[0]
            return StoreStats(*counts, schema_version=_version(conn, self.schema), size_bytes=int(size))

        return self._run(work)


def _version(conn: psycopg.Connection, schema: str) -> int:
    table = conn.execute(
        "SELECT to_regclass(%s)", (f"{_quote(schema)}.session_memory_schema",)
    ).fetchone()[0]
    if table is None:
        return 0
    row = conn.execute(f"SELECT version FROM {_quote(schema)}.session_memory_schema").fetchone()
    return 0 if row is None else row[0]


def _index_lookups_only(conn: psycopg.Connection) -> None:
    """Keep the planner on index lookups for this transaction. Right after a table fills, its
    statistics still say "empty", and a hash join would rescan the session at every step of a
    recursive walk (depth x rows)."""
    conn.execute("SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off; SET LOCAL enable_seqscan = off")


def _lock_session(conn: psycopg.Connection, session_id: str) -> None:
    """Serialise this transaction's writes to one session with other writers of it."""
    conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 1))", (session_id,))


def _redact(conninfo: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", conninfo)


_ROW = "id, parent_id, role, created_at, content"
_SESSION_COLUMNS = ", ".join(SESSION_COLUMNS)
_REGISTER = (
    f"INSERT INTO {{s}}.sessions ({_SESSION_COLUMNS}) VALUES ({', '.join(['%s'] * len(SESSION_COLUMNS))})"
)

_LATEST_LEAF = """
    SELECT m.id FROM {s}.session_messages m
    WHERE m.session_id = %(s)s AND NOT EXISTS (
        SELECT 1 FROM {s}.session_messages c WHERE c.session_id = m.session_id AND c.parent_id = m.id
    )
    ORDER BY m.created_at DESC, m.seq DESC LIMIT 1
"""

_INSERT = """
    INSERT INTO {s}.session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, content
    )
    SELECT %(s)s, %(id)s, p.id, %(role)s, %(created_at)s, %(tokens)s, %(bytes)s,
           coalesce(p.depth, 0) + 1, coalesce(p.path_tokens, 0) + %(tokens)s,
           coalesce(p.path_bytes, 0) + %(bytes)s, %(text)s, %(content)s
    FROM (SELECT 1) AS one LEFT JOIN {s}.session_messages p ON p.session_id = %(s)s AND p.id = {parent}
    ON CONFLICT (session_id, id) DO NOTHING
    RETURNING parent_id, depth, path_tokens, path_bytes, seq
"""

_SHIFT_SUBTREE = """
    WITH RECURSIVE sub(id) AS (
        SELECT %(root)s::text
        UNION ALL
        SELECT m.id FROM {s}.session_messages m JOIN sub ON m.session_id = %(s)s AND m.parent_id = sub.id
    )
    UPDATE {s}.session_messages
    SET depth = depth + %(depth)s, path_tokens = path_tokens + %(tokens)s, path_bytes = path_bytes + %(bytes)s
    WHERE session_id = %(s)s AND id IN (SELECT id FROM sub)
"""

_PATH = """
    WITH RECURSIVE path(seq, id, parent_id, role, size, tokens, n) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 0 FROM {s}.session_messages
        WHERE session_id = %(s)s AND id = %(leaf)s
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, path.n + 1
        FROM path JOIN {s}.session_messages m ON m.session_id = %(s)s AND m.id = path.parent_id
    )
    SELECT seq, id, role, size, tokens FROM path ORDER BY n DESC
"""

_PATH_IDS = """
    WITH RECURSIVE path(seq, id, parent_id, n) AS (
        SELECT seq, id, parent_id, 0 FROM {s}.session_messages WHERE session_id = %(s)s AND id = %(leaf)s
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, path.n + 1
        FROM path JOIN {s}.session_messages m ON m.session_id = %(s)s AND m.id = path.parent_id
    )
    SELECT seq, id FROM path ORDER BY n DESC
"""

_PATH_TAIL = """
    WITH RECURSIVE tail(seq, id, parent_id, role, size, tokens, n, used) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 1, bytes::bigint FROM {s}.session_messages
        WHERE session_id = %(s)s AND id = %(leaf)s
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, tail.n + 1, tail.used + m.bytes
        FROM tail JOIN {s}.session_messages m ON m.session_id = %(s)s AND m.id = tail.parent_id
        WHERE tail.n < %(min_rows)s OR tail.used + m.bytes <= %(max_bytes)s
    )
    SELECT seq, id, role, size, tokens FROM tail ORDER BY n DESC
"""

_PATH_SEQS = """
    WITH RECURSIVE path(seq, parent_id) AS (
        SELECT seq, parent_id FROM {s}.session_messages WHERE session_id = %(s)s AND id = %(leaf)s
        UNION ALL
        SELECT m.seq, m.parent_id FROM path JOIN {s}.session_messages m
        ON m.session_id = %(s)s AND m.id = path.parent_id
    )
"""

_FORK_MESSAGES = _PATH_SEQS + """
    INSERT INTO {s}.session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, content
    )
    SELECT %(dst)s, m.id, m.parent_id, m.role, m.created_at, m.tokens, m.bytes,
           m.depth, m.path_tokens, m.path_bytes, m.text_content, m.content
    FROM {s}.session_messages m WHERE m.seq IN (SELECT seq FROM path) ORDER BY m.depth
"""

_FORK_BLOB_LINKS = _PATH_SEQS + """
    INSERT INTO {s}.message_blobs (message_seq, digest)
    SELECT copy.seq, link.digest
    FROM {s}.message_blobs link
    JOIN {s}.session_messages original ON original.seq = link.message_seq
    JOIN {s}.session_messages copy ON copy.session_id = %(dst)s AND copy.id = original.id
    WHERE link.message_seq IN (SELECT seq FROM path)
"""

_FORK_COMPACTIONS = _PATH_SEQS + """
    , ids(id) AS (SELECT m.id FROM {s}.session_messages m WHERE m.seq IN (SELECT seq FROM path))
    INSERT INTO {s}.session_compactions (session_id, id, from_message_id, to_message_id, created_at, summary)
    SELECT %(dst)s, gen_random_uuid()::text, c.from_message_id, c.to_message_id, c.created_at, c.summary
    FROM {s}.session_compactions c
    WHERE c.session_id = %(s)s AND c.from_message_id IN (SELECT id FROM ids)
      AND c.to_message_id IN (SELECT id FROM ids)
    ORDER BY c.created_at, c.seq
"""


# -- inspection and transfer -------------------------------------------------------------------

_SUMMARIES = (
    "WITH ids(session_id) AS ({ids}),"
    " counts AS (SELECT session_id, count(*) AS n, min(created_at) AS first, max(created_at) AS last"
    " FROM {s}.session_messages WHERE session_id IN (SELECT session_id FROM ids) GROUP BY session_id)"
    " SELECT ids.session_id, coalesce(c.n, 0), c.first, c.last, "
    + ", ".join(f"r.{field}" for field in SESSION_COLUMNS)
    + " FROM ids LEFT JOIN counts c ON c.session_id = ids.session_id"
    " LEFT JOIN {s}.sessions r ON r.storage_id = ids.session_id ORDER BY ids.session_id COLLATE \"C\""
)
