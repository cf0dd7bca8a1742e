"""SQLite store: one file (or ``:memory:``), WAL, FTS5 kept current by triggers."""

from __future__ import annotations

import sqlite3
from array import array
import threading
import time
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Callable, Iterable, Iterator, Sequence

from ..errors import StoreError
from .._time import now_us
from ..fts import match_all_words
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

# Append-only: a released migration is never edited; PRAGMA user_version counts those applied.
# Small columns come before the large ones so that walking a path never reads content pages.
MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE session_messages (
        seq          INTEGER PRIMARY KEY,
        session_id   TEXT    NOT NULL,
        id           TEXT    NOT NULL,
        parent_id    TEXT,
        role         TEXT    NOT NULL,
        created_at   INTEGER NOT NULL,
        tokens       INTEGER NOT NULL,
        bytes        INTEGER NOT NULL,
        depth        INTEGER NOT NULL,
        path_tokens  INTEGER NOT NULL,
        path_bytes   INTEGER NOT NULL,
        text_content TEXT    NOT NULL DEFAULT '',
        content      TEXT    NOT NULL,
        UNIQUE (session_id, id)
    );
    CREATE INDEX session_messages_parent ON session_messages (session_id, parent_id);
    CREATE INDEX session_messages_created ON session_messages (session_id, created_at);

    CREATE VIRTUAL TABLE session_messages_fts USING fts5(
        text_content, content='session_messages', content_rowid='seq',
        tokenize='porter unicode61'
    );
    CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages
    WHEN new.text_content <> '' BEGIN
        INSERT INTO session_messages_fts (rowid, text_content) VALUES (new.seq, new.text_content);
    END;
    CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages
    WHEN old.text_content <> '' BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content)
        VALUES ('delete', old.seq, old.text_content);
    END;
    CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF text_content ON session_messages
    BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content)
        SELECT 'delete', old.seq, old.text_content WHERE old.text_content <> '';
        INSERT INTO session_messages_fts (rowid, text_content)
        SELECT new.seq, new.text_content WHERE new.text_content <> '';
    END;

    CREATE TABLE session_compactions (
        seq             INTEGER PRIMARY KEY,
        session_id      TEXT    NOT NULL,
        id              TEXT    NOT NULL UNIQUE,
        from_message_id TEXT    NOT NULL,
        to_message_id   TEXT    NOT NULL,
        created_at      INTEGER NOT NULL,
        summary         TEXT    NOT NULL
    );
    CREATE INDEX session_compactions_session ON session_compactions (session_id, created_at);
    """,
    """
    CREATE TABLE context_blocks (
        session_id TEXT    NOT NULL,
        label      TEXT    NOT NULL,
        updated_at INTEGER NOT NULL,
        content    TEXT    NOT NULL,
        PRIMARY KEY (session_id, label)
    );
    CREATE TABLE cached_prompts (
        session_id TEXT    PRIMARY KEY,
        updated_at INTEGER NOT NULL,
        prompt     TEXT    NOT NULL
    );
    CREATE TABLE search_entries (
        seq        INTEGER PRIMARY KEY,
        session_id TEXT    NOT NULL,
        label      TEXT    NOT NULL,
        key        TEXT    NOT NULL,
        created_at INTEGER NOT NULL,
        updated_at INTEGER NOT NULL,
        content    TEXT    NOT NULL,
        UNIQUE (session_id, label, key)
    );
    CREATE VIRTUAL TABLE search_entries_fts USING fts5(
        content, content='search_entries', content_rowid='seq', tokenize='porter unicode61'
    );
    CREATE TRIGGER search_entries_fts_insert AFTER INSERT ON search_entries BEGIN
        INSERT INTO search_entries_fts (rowid, content) VALUES (new.seq, new.content);
    END;
    CREATE TRIGGER search_entries_fts_delete AFTER DELETE ON search_entries BEGIN
        INSERT INTO search_entries_fts (search_entries_fts, rowid, content) VALUES ('delete', old.seq, old.content);
    END;
    CREATE TRIGGER search_entries_fts_update AFTER UPDATE OF content ON search_entries BEGIN
        INSERT INTO search_entries_fts (search_entries_fts, rowid, content) VALUES ('delete', old.seq, old.content);
        INSERT INTO search_entries_fts (rowid, content) VALUES (new.seq, new.content);
    END;
    """,
    """
    CREATE TABLE sessions (
        namespace         TEXT    NOT NULL,
        id                TEXT    NOT NULL,
        storage_id        TEXT    NOT NULL UNIQUE,
        name              TEXT    NOT NULL,
        parent_session_id TEXT,
        model             TEXT,
        source            TEXT,
        input_tokens      INTEGER NOT NULL DEFAULT 0,
        output_tokens     INTEGER NOT NULL DEFAULT 0,
        estimated_cost    REAL    NOT NULL DEFAULT 0,
        end_reason        TEXT,
        created_at        INTEGER NOT NULL,
        updated_at        INTEGER NOT NULL,
        PRIMARY KEY (namespace, id)
    );
    CREATE INDEX sessions_updated ON sessions (namespace, updated_at);
    """,
    """
    CREATE TABLE blobs (
        digest TEXT    PRIMARY KEY,
        size   INTEGER NOT NULL,
        data   BLOB    NOT NULL
    );
    CREATE TABLE message_blobs (
        message_seq INTEGER NOT NULL,
        digest      TEXT    NOT NULL,
        PRIMARY KEY (message_seq, digest)
    );
    CREATE INDEX message_blobs_digest ON message_blobs (digest);
    CREATE TRIGGER message_blobs_release AFTER DELETE ON session_messages BEGIN
        DELETE FROM message_blobs WHERE message_seq = old.seq;
    END;
    CREATE TRIGGER blobs_collect AFTER DELETE ON message_blobs
    WHEN NOT EXISTS (SELECT 1 FROM message_blobs WHERE digest = old.digest) BEGIN
        DELETE FROM blobs WHERE digest = old.digest;
    END;
    """,
    """
    ALTER TABLE session_messages ADD COLUMN session_token TEXT
        GENERATED ALWAYS AS ('s' || lower(hex(session_id))) VIRTUAL;
    DROP TRIGGER session_messages_fts_insert;
    DROP TRIGGER session_messages_fts_delete;
    DROP TRIGGER session_messages_fts_update;
    DROP TABLE session_messages_fts;
    CREATE VIRTUAL TABLE session_messages_fts USING fts5(
        text_content, session_token, content='session_messages', content_rowid='seq',
        tokenize='porter unicode61'
    );
    INSERT INTO session_messages_fts (session_messages_fts, rank) VALUES ('rank', 'bm25(1.0, 0.0)');
    INSERT INTO session_messages_fts (session_messages_fts) VALUES ('rebuild');
    CREATE TRIGGER session_messages_fts_insert AFTER INSERT ON session_messages BEGIN
        INSERT INTO session_messages_fts (rowid, text_content, session_token)
        VALUES (new.seq, new.text_content, new.session_token);
    END;
    CREATE TRIGGER session_messages_fts_delete AFTER DELETE ON session_messages BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content, session_token)
        VALUES ('delete', old.seq, old.text_content, old.session_token);
    END;
    CREATE TRIGGER session_messages_fts_update AFTER UPDATE OF text_content ON session_messages BEGIN
        INSERT INTO session_messages_fts (session_messages_fts, rowid, text_content, session_token)
        VALUES ('delete', old.seq, old.text_content, old.session_token);
        INSERT INTO session_messages_fts (rowid, text_content, session_token)
        VALUES (new.seq, new.text_content, new.session_token);
    END;
    """,
)

_ROW = "id, parent_id, role, created_at, content"

_LATEST_LEAF = """
    SELECT m.id FROM session_messages m
    WHERE m.session_id = :s AND NOT EXISTS (
        SELECT 1 FROM session_messages c WHERE c.session_id = m.session_id AND c.parent_id = m.id
    )
    ORDER BY m.created_at DESC, m.seq DESC LIMIT 1
"""

_INSERT = """
    INSERT INTO session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, content
    )
    SELECT :s, :id, p.id, :role, :created_at, :tokens, :bytes,
           coalesce(p.depth, 0) + 1, coalesce(p.path_tokens, 0) + :tokens,
           coalesce(p.path_bytes, 0) + :bytes, :text, :content
    FROM (SELECT 1) LEFT JOIN session_messages p ON p.session_id = :s AND p.id = {parent}
    WHERE true
    ON CONFLICT (session_id, id) DO NOTHING
    RETURNING parent_id, depth, path_tokens, path_bytes, seq
"""
_INSERT_UNDER_LATEST = _INSERT.format(parent=f"({_LATEST_LEAF})")
_INSERT_UNDER_PARENT = _INSERT.format(parent=":parent")

_INSERT_ROW = """
    INSERT INTO session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, content
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
_POSITION = "id, depth, path_tokens, path_bytes"
_POSITION_OF = f"SELECT {_POSITION} FROM session_messages WHERE session_id = ? AND id = ?"
_POSITION_OF_LATEST_LEAF = f"SELECT {_POSITION} FROM session_messages WHERE session_id = :s AND id = ({_LATEST_LEAF})"

_SESSION_COLUMNS = ", ".join(SESSION_COLUMNS)
_SESSION_MARKS = ", ".join("?" * len(SESSION_COLUMNS))

_PATH_IDS = """
    WITH RECURSIVE path(seq, parent_id) AS (
        SELECT seq, parent_id FROM session_messages WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.parent_id FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
"""

_FORK_MESSAGES = _PATH_IDS + """
    INSERT INTO session_messages (
        session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, content
    )
    SELECT :dst, m.id, m.parent_id, m.role, m.created_at, m.tokens, m.bytes,
           m.depth, m.path_tokens, m.path_bytes, m.text_content, m.content
    FROM session_messages m WHERE m.seq IN (SELECT seq FROM path) ORDER BY m.depth
"""

_FORK_BLOB_LINKS = _PATH_IDS + """
    INSERT INTO message_blobs (message_seq, digest)
    SELECT copy.seq, link.digest
    FROM message_blobs link
    JOIN session_messages original ON original.seq = link.message_seq
    JOIN session_messages copy ON copy.session_id = :dst AND copy.id = original.id
    WHERE link.message_seq IN (SELECT seq FROM path)
"""

_FORK_COMPACTIONS = _PATH_IDS + """
    , ids(id) AS (SELECT m.id FROM session_messages m WHERE m.seq IN (SELECT seq FROM path))
    INSERT INTO session_compactions (session_id, id, from_message_id, to_message_id, created_at, summary)
    SELECT :dst, lower(hex(randomblob(16))), c.from_message_id, c.to_message_id, c.created_at, c.summary
    FROM session_compactions c
    WHERE c.session_id = :s AND c.from_message_id IN ids AND c.to_message_id IN ids
    ORDER BY c.created_at, c.seq
"""

_SHIFT_SUBTREE = """
    WITH RECURSIVE sub(id) AS (
        SELECT :root
        UNION ALL
        SELECT m.id FROM session_messages m JOIN sub ON m.session_id = :s AND m.parent_id = sub.id
    )
    UPDATE session_messages
    SET depth = depth + :depth, path_tokens = path_tokens + :tokens, path_bytes = path_bytes + :bytes
    WHERE session_id = :s AND id IN (SELECT id FROM sub)
"""

_PATH = """
    WITH RECURSIVE path(seq, id, parent_id, role, size, tokens, n) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 0 FROM session_messages
        WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
    SELECT seq, id, role, size, tokens FROM path ORDER BY n DESC
"""

_PATH_IDS = """
    WITH RECURSIVE path(seq, id, parent_id, n) AS (
        SELECT seq, id, parent_id, 0 FROM session_messages WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
    SELECT seq, id FROM path ORDER BY n DESC
"""

_PATH_TAIL = """
    WITH RECURSIVE tail(seq, id, parent_id, role, size, tokens, n, used) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 1, bytes FROM session_messages
        WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, tail.n + 1, tail.used + m.bytes
        FROM tail JOIN session_messages m ON m.session_id = :s AND m.id = tail.parent_id
        WHERE tail.n < :min_rows OR tail.used + m.bytes <= :max_bytes
    )
    SELECT seq, id, role, size, tokens FROM tail ORDER BY n DESC
"""


class SqliteStore(InspectableStore):
    """A SQLite database file, or ``":memory:"``.

    ``synchronous="NORMAL"`` (the default) with WAL survives a crash of the process: every
    append that returned is on disk. ``"FULL"`` also survives a power loss, at a cost per commit.
    """

    def __init__(
        self,
        path: str | Path = ":memory:",
        *,
        timeout: float = 30.0,
        synchronous: str = "NORMAL",
        auto_setup: bool = True,
    ) -> None:
        if synchronous.upper() not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, not {synchronous!r}")
        self.database = str(path)
        self._lock = threading.RLock()
        self._connected = _Connected(self)
        self._auto_setup = auto_setup
        self._ready = False
        self._closed = False
        self._conn = sqlite3.connect(
            self.database, timeout=timeout, isolation_level=None, check_same_thread=False
        )
        self._conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        if self.database != ":memory:" and not self.database.startswith("file::memory:"):
            self._use_wal(timeout)
        self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        self._conn.execute("PRAGMA foreign_keys = ON")

    def __repr__(self) -> str:
        return f"SqliteStore({self.database!r})"

    def _use_wal(self, timeout: float) -> None:
        """Switch the file to WAL. The switch needs the file to itself and SQLite reports
        "database is locked" at once instead of waiting (processes opening a new file together),
        so retry until ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self._conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as error:
                if "locked" not in str(error) or time.monotonic() >= deadline:
                    raise
                time.sleep(0.005)

    # -- lifecycle -------------------------------------------------------------------------

    def setup(self) -> None:
        with self._lock:
            self._check_open()
            if self._schema_version() != len(MIGRATIONS):
                with self._transaction() as conn:
                    version = self._schema_version()
                    if version > len(MIGRATIONS):
                        raise StoreError(
                            f"{self.database}: schema version {version} is newer than this library knows"
                        )
                    for number in range(version, len(MIGRATIONS)):
                        for statement in _statements(MIGRATIONS[number]):
                            conn.execute(statement)
                    conn.execute(f"PRAGMA user_version = {len(MIGRATIONS)}")
            self._ready = True

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._conn.close()

    def _check_open(self) -> None:
        if self._closed:
            raise StoreError(f"{self!r} is closed")

    def _schema_version(self) -> int:
        return self._conn.execute("PRAGMA user_version").fetchone()[0]

    def _connection(self) -> "_Connected":
        """``with self._connection() as conn``: the store's lock held, open, schema ready."""
        return self._connected

    def _ensure_ready(self) -> None:
        self._check_open()
        if not self._ready:
            if not self._auto_setup:
                if self._schema_version() < len(MIGRATIONS):
                    raise StoreError(f"{self!r}: schema missing; call setup() first")
                self._ready = True
            else:
                self.setup()

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction that takes the write lock up front (no deadlocking upgrades)."""
        with self._lock:
            if self._conn.in_transaction:
                self._conn.execute("SAVEPOINT nested")
                try:
                    yield self._conn
                except BaseException:
                    self._conn.execute("ROLLBACK TO nested")
                    self._conn.execute("RELEASE nested")
                    raise
                self._conn.execute("RELEASE nested")
                return
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield self._conn
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            self._conn.execute("COMMIT")

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._connection(), self._transaction() as conn:
            yield conn

    # -- message writes --------------------------------------------------------------------

    def insert_message(
        self, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> Inserted | None:
        params = record.insert_params(session_id)
        if parent_id is LATEST:
            sql = _INSERT_UNDER_LATEST
        else:
            sql = _INSERT_UNDER_PARENT
            params["parent"] = parent_id
        if not record.blobs:
            with self._connection() as conn:
                row = conn.execute(sql, params).fetchone()
        else:
            with self._write() as conn:
                row = conn.execute(sql, params).fetchone()
                if row is not None:
                    _link_blobs(conn, row[4], record)
        return None if row is None else Inserted(row[0], PathTotals(*row[1:4]))

    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        if not records:
            return []
        results: list[Inserted | None] = []
        rows: list[tuple[object, ...]] = []
        with self._write() as conn:
            # The chain's positions are computed here from the first parent and the rows already
            # stored, and written by one executemany: no parent lookup per row.
            known = {row[0]: row[1:] for row in _stored_positions(conn, session_id, [r.id for r in records])}
            if parent_id is LATEST:
                parent = conn.execute(_POSITION_OF_LATEST_LEAF, {"s": session_id}).fetchone()
            elif parent_id is None:
                parent = None
            else:
                parent = conn.execute(_POSITION_OF, (session_id, parent_id)).fetchone()
            for record in records:
                position = known.get(record.id)
                if position is not None:  # stored already (before or earlier in this batch)
                    results.append(None)
                    parent = (record.id, *position)
                    continue
                size = record.size
                if parent is None:
                    parent_key, depth, tokens, total_bytes = None, 1, record.tokens, size
                else:
                    parent_key, depth = parent[0], parent[1] + 1
                    tokens, total_bytes = parent[2] + record.tokens, parent[3] + size
                rows.append((session_id, record.id, parent_key, record.role, record.created_at_us, record.tokens,
                             size, depth, tokens, total_bytes, record.text, record.content))
                results.append(Inserted(parent_key, PathTotals(depth, tokens, total_bytes)))
                known[record.id] = (depth, tokens, total_bytes)
                parent = (record.id, depth, tokens, total_bytes)
            conn.executemany(_INSERT_ROW, rows)
            with_blobs = [r for r, result in zip(records, results) if result is not None and r.blobs]
            if with_blobs:
                seqs = dict(_stored_seqs(conn, session_id, [r.id for r in with_blobs]))
                for record in with_blobs:
                    _link_blobs(conn, seqs[record.id], record)
        return results

    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        with self._write() as conn:
            old = conn.execute(
                "SELECT tokens, bytes, seq FROM session_messages WHERE session_id = ? AND id = ?",
                (session_id, record.id),
            ).fetchone()
            if old is None:
                return False
            conn.execute("DELETE FROM message_blobs WHERE message_seq = ?", (old[2],))
            _link_blobs(conn, old[2], record)
            old = old[:2]
            size = record.size
            conn.execute(
                "UPDATE session_messages SET role = ?, tokens = ?, bytes = ?, text_content = ?, content = ?"
                " WHERE session_id = ? AND id = ?",
                (record.role, record.tokens, size, record.text, record.content, session_id, record.id),
            )
            if (record.tokens, size) != tuple(old):
                _shift_subtree(conn, session_id, record.id, 0, record.tokens - old[0], size - old[1])
            return True

    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        deleted: list[str] = []
        with self._write() as conn:
            for message_id in dict.fromkeys(ids):
                row = conn.execute(
                    "SELECT depth, path_tokens, path_bytes FROM session_messages"
                    " WHERE session_id = ? AND id = ?",
                    (session_id, message_id),
                ).fetchone()
                if row is None:
                    continue
                conn.execute(
                    "DELETE FROM session_messages WHERE session_id = ? AND id = ?", (session_id, message_id)
                )
                children = conn.execute(
                    "SELECT id FROM session_messages WHERE session_id = ? AND parent_id = ?",
                    (session_id, message_id),
                ).fetchall()
                for (child,) in children:
                    conn.execute(
                        "UPDATE session_messages SET parent_id = NULL WHERE session_id = ? AND id = ?",
                        (session_id, child),
                    )
                    _shift_subtree(conn, session_id, child, -row[0], -row[1], -row[2])
                deleted.append(message_id)
        return deleted

    def clear_session(self, session_id: str) -> None:
        with self._write() as conn:
            conn.execute("DELETE FROM session_messages WHERE session_id = ?", (session_id,))
            conn.execute("DELETE FROM session_compactions WHERE session_id = ?", (session_id,))

    # -- message reads ---------------------------------------------------------------------

    def get_message(self, session_id: str, message_id: str) -> MessageRow | None:
        with self._connection() as conn:
            row = conn.execute(
                f"SELECT {_ROW} FROM session_messages WHERE session_id = ? AND id = ?",
                (session_id, message_id),
            ).fetchone()
        return None if row is None else MessageRow(*row)

    def latest_leaf(self, session_id: str) -> MessageRow | None:
        with self._connection() as conn:
            row = conn.execute(
                f"SELECT {_ROW} FROM session_messages WHERE session_id = :s AND id = ({_LATEST_LEAF})",
                {"s": session_id},
            ).fetchone()
        return None if row is None else MessageRow(*row)

    def children(self, session_id: str, message_id: str) -> list[MessageRow]:
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT {_ROW} FROM session_messages WHERE session_id = ? AND parent_id = ?"
                " ORDER BY created_at, seq",
                (session_id, message_id),
            ).fetchall()
        return [MessageRow(*row) for row in rows]

    def path(self, session_id: str, leaf_id: str) -> list[PathEntry]:
        with self._connection() as conn:
            rows = conn.execute(_PATH, {"s": session_id, "leaf": leaf_id}).fetchall()
        return [PathEntry(*row) for row in rows]

    def path_ids(self, session_id: str, leaf_id: str) -> tuple[array, list[str]]:
        seqs: array = array("q")
        ids: list[str] = []
        with self._connection() as conn:
            for seq, message_id in conn.execute(_PATH_IDS, {"s": session_id, "leaf": leaf_id}):
                seqs.append(seq)
                ids.append(message_id)
        return seqs, ids

    def path_tail(self, session_id: str, leaf_id: str, max_bytes: int, min_rows: int) -> list[PathEntry]:
        params = {"s": session_id, "leaf": leaf_id, "max_bytes": max_bytes, "min_rows": min_rows}
        with self._connection() as conn:
            rows = conn.execute(_PATH_TAIL, params).fetchall()
        return [PathEntry(*row) for row in rows]

    def path_totals(self, session_id: str, leaf_id: str) -> PathTotals | None:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT depth, path_tokens, path_bytes FROM session_messages WHERE session_id = ? AND id = ?",
                (session_id, leaf_id),
            ).fetchone()
        return None if row is None else PathTotals(*row)

    def fetch_rows(self, seqs: Sequence[int]) -> dict[int, MessageRow]:
        if not seqs:
            return {}
        marks = ",".join("?" * len(seqs))
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT seq, {_ROW} FROM session_messages WHERE seq IN ({marks})", tuple(seqs)
            ).fetchall()
        return {row[0]: MessageRow(*row[1:]) for row in rows}

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        marks = ",".join("?" * len(digests))
        with self._connection() as conn:
            rows = conn.execute(f"SELECT digest, data FROM blobs WHERE digest IN ({marks})", tuple(digests)).fetchall()
        return {digest: bytes(data) for digest, data in rows}

    # -- compactions -----------------------------------------------------------------------

    def add_compaction(self, session_id: str, row: CompactionRow) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO session_compactions"
                " (session_id, id, summary, from_message_id, to_message_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (session_id, *row),
            )

    def add_compaction_unless(
        self,
        session_id: str,
        make_row: Callable[[], CompactionRow],
        superseded: Callable[[list[CompactionRow]], bool],
    ) -> CompactionRow | None:
        # One write transaction: no other connection stores a compaction between check and insert.
        with self._write():
            return super().add_compaction_unless(session_id, make_row, superseded)

    def get_compactions(self, session_id: str) -> list[CompactionRow]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT id, summary, from_message_id, to_message_id, created_at FROM session_compactions"
                " WHERE session_id = ? ORDER BY created_at, seq",
                (session_id,),
            ).fetchall()
        return [CompactionRow(*row) for row in rows]

    # -- context blocks --------------------------------------------------------------------

    def get_block(self, session_id: str, label: str) -> str | None:
        with self._connection() as conn:
            row = conn.execute(
                "SELECT content FROM context_blocks WHERE session_id = ? AND label = ?", (session_id, label)
            ).fetchone()
        return None if row is None else row[0]

    def set_block(self, session_id: str, label: str, content: str) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO context_blocks (session_id, label, updated_at, content) VALUES (?, ?, ?, ?)"
                " ON CONFLICT (session_id, label) DO UPDATE"
                " SET content = excluded.content, updated_at = excluded.updated_at",
                (session_id, label, now_us(), content),
            )

    def get_cached_prompt(self, session_id: str) -> str | None:
        with self._connection() as conn:
            row = conn.execute("SELECT prompt FROM cached_prompts WHERE session_id = ?", (session_id,)).fetchone()
        return None if row is None else row[0]

    def set_cached_prompt(self, session_id: str, prompt: str) -> None:
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO cached_prompts (session_id, updated_at, prompt) VALUES (?, ?, ?)"
                " ON CONFLICT (session_id) DO UPDATE SET prompt = excluded.prompt, updated_at = excluded.updated_at",
                (session_id, now_us(), prompt),
            )

    def set_search_entry(self, session_id: str, label: str, key: str, content: str) -> None:
        moment = now_us()
        with self._connection() as conn:
            conn.execute(
                "INSERT INTO search_entries (session_id, label, key, created_at, updated_at, content)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (session_id, label, key) DO UPDATE"
                " SET content = excluded.content, updated_at = excluded.updated_at",
                (session_id, label, key, moment, moment, content),
            )

    def count_search_entries(self, session_id: str, label: str) -> int:
        with self._connection() as conn:
            return conn.execute(
                "SELECT count(*) FROM search_entries WHERE session_id = ? AND label = ?", (session_id, label)
            ).fetchone()[0]

    def search_entries(self, session_id: str, label: str, query: str, limit: int) -> list[tuple[str, str]]:
        expression = match_all_words(query)
        if expression is None or limit <= 0:
            return []
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT e.key, e.content FROM search_entries_fts f JOIN search_entries e ON e.seq = f.rowid"
                " WHERE search_entries_fts MATCH ? AND e.session_id = ? AND e.label = ?"
                " ORDER BY f.rank LIMIT ?",
                (expression, session_id, label, limit),
            ).fetchall()
        return [(key, content) for key, content in rows]

    # -- session registry ------------------------------------------------------------------

    def register_session(self, row: SessionRow) -> None:
        with self._connection() as conn:
            conn.execute(f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({_SESSION_MARKS})", row)

    def get_session_row(self, namespace: str, session_id: str) -> SessionRow | None:
        with self._connection() as conn:
            row = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE namespace = ? AND id = ?", (namespace, session_id)
            ).fetchone()
        return None if row is None else SessionRow(*row)

    def list_session_rows(self, namespace: str) -> list[SessionRow]:
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT {_SESSION_COLUMNS} FROM sessions WHERE namespace = ?"
                " ORDER BY updated_at DESC, rowid DESC",
                (namespace,),
            ).fetchall()
        return [SessionRow(*row) for row in rows]

    def update_session_row(self, namespace: str, session_id: str, changes: SessionChanges) -> bool:
        with self._connection() as conn:
            cursor = conn.execute(
                "UPDATE sessions SET name = coalesce(?, name), end_reason = coalesce(?, end_reason),"
                " input_tokens = input_tokens + ?, output_tokens = output_tokens + ?,"
                " estimated_cost = estimated_cost + ?, updated_at = ? WHERE namespace = ? AND id = ?",
                (*changes, namespace, session_id),
            )
            return cursor.rowcount == 1

    def delete_session(self, namespace: str, session_id: str) -> bool:
        with self._write() as conn:
            row = conn.execute(
                "SELECT storage_id FROM sessions WHERE namespace = ? AND id = ?", (namespace, session_id)
            ).fetchone()
            if row is None:
                return False
            for table in ("session_messages", "session_compactions", "context_blocks", "cached_prompts", "search_entries"):
                conn.execute(f"DELETE FROM {table} WHERE session_id = ?", row)
            conn.execute("DELETE FROM sessions WHERE namespace = ? AND id = ?", (namespace, session_id))
            return True

    def fork_session(self, source_storage_id: str, leaf_id: str, row: SessionRow) -> None:
        with self._write() as conn:
            conn.execute(f"INSERT INTO sessions ({_SESSION_COLUMNS}) VALUES ({_SESSION_MARKS})", row)
            params = {"s": source_storage_id, "leaf": leaf_id, "dst": row.storage_id}
            conn.execute(_FORK_MESSAGES, params)
            conn.execute(_FORK_BLOB_LINKS, params)
            conn.execute(_FORK_COMPACTIONS, params)

    def search_sessions(self, namespace: str, query: str, limit: int) -> list[SearchRow]:
        expression = match_all_words(query)
        if expression is None or limit <= 0:
            return []
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT s.id, m.id, m.role, m.text_content, m.created_at"
                " FROM session_messages_fts f JOIN session_messages m ON m.seq = f.rowid"
                " JOIN sessions s ON s.storage_id = m.session_id"
                " WHERE session_messages_fts MATCH ? AND s.namespace = ? ORDER BY f.rank LIMIT ?",
                (f"text_content : ({expression})", namespace, limit),
            ).fetchall()
        return [SearchRow(*row) for row in rows]

    # -- search ----------------------------------------------------------------------------

    def search_messages(self, session_ids: Sequence[str] | None, query: str, limit: int) -> list[SearchRow]:
        """Ranks only the ``SEARCH_CANDIDATES`` most recent matches when there are more (bm25
        over every match of a frequent word costs ~100 ms at 1M messages): the session filter
        runs inside the index, and the window is found without scoring. When the whole index
        holds fewer matches than that, all of them are ranked, without looking for a window."""
        expression = match_all_words(query)
        if expression is None or limit <= 0 or (session_ids is not None and not session_ids):
            return []
        text_match = window_match = f"text_content : ({expression})"
        where, params = "", []
        if session_ids is not None:
            params = list(session_ids)
            tokens, where = _session_filter(tuple(params))
            window_match = f"session_token : ({tokens}) AND {text_match}"
        with self._connection() as conn:
            # Fewer matches than the window in the whole index: rank them all (cheap), no window.
            oldest = many = conn.execute(
                "SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ? LIMIT 1 OFFSET ?",
                (text_match, SEARCH_CANDIDATES - 1),
            ).fetchone()
            if many is not None:
                oldest = conn.execute(
                    "SELECT rowid FROM session_messages_fts WHERE session_messages_fts MATCH ?"
                    " ORDER BY rowid DESC LIMIT 1 OFFSET ?",
                    (window_match, SEARCH_CANDIDATES - 1),
                ).fetchone()
            # Ranking with the session token in the expression would score it too (5x slower).
            rows = conn.execute(
                "SELECT m.session_id, m.id, m.role, m.text_content, m.created_at"
                " FROM session_messages_fts f JOIN session_messages m ON m.seq = f.rowid"
                f" WHERE session_messages_fts MATCH ? AND f.rowid >= ?{where} ORDER BY f.rank LIMIT ?",
                [text_match, oldest[0] if oldest else 0, *params, limit],
            ).fetchall()
        return list(map(SearchRow._make, rows))

    # -- inspection and transfer -----------------------------------------------------------

    def session_summaries(self, session_ids: Sequence[str] | None = None) -> list[SessionSummary]:
        if session_ids is None:
            chunks: list[list[str] | None] = [None]
        else:
            wanted = list(dict.fromkeys(session_ids))
            chunks = [wanted[i : i + _IDS_PER_STATEMENT] for i in range(0, len(wanted), _IDS_PER_STATEMENT)]
        summaries: list[SessionSummary] = []
        with self._connection() as conn:
            for chunk in chunks:
                where, params = "", []
                if chunk is not None:
                    where = f" WHERE {{column}} IN ({','.join('?' * len(chunk))})"
                    params = chunk * len(SUMMARY_SOURCES)
                ids = " UNION ".join(
                    f"SELECT {column} FROM {table}" + where.format(column=column)
                    for table, column in SUMMARY_SOURCES
                )
                rows = conn.execute(_SUMMARIES.format(ids=ids), params).fetchall()
                for row in rows:
                    registry = None if row[4] is None else SessionRow(*row[4:])
                    summaries.append(SessionSummary(row[0], row[1], row[2], row[3], registry))
        summaries.sort(key=lambda summary: summary.session_id)
        return summaries

    def message_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[tuple[int, MessageRow]]:
        after = "" if not after_seq else " AND (created_at, seq) > (SELECT created_at, seq FROM session_messages WHERE seq = :after)"
        with self._connection() as conn:
            rows = conn.execute(
                f"SELECT seq, {_ROW} FROM session_messages WHERE session_id = :s{after}"
                " ORDER BY created_at, seq LIMIT :limit",
                {"s": session_id, "after": after_seq, "limit": limit},
            ).fetchall()
        return [(row[0], MessageRow(*row[1:])) for row in rows]

    def list_blocks(self, session_id: str) -> list[BlockRow]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT label, content, updated_at FROM context_blocks WHERE session_id = ? ORDER BY label",
                (session_id,),
            ).fetchall()
        return [BlockRow(*row) for row in rows]

    def search_entry_counts(self, session_id: str) -> list[tuple[str, int]]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT label, count(*) FROM search_entries WHERE session_id = ? GROUP BY label ORDER BY label",
                (session_id,),
            ).fetchall()
        return [(label, count) for label, count in rows]

    def search_entry_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[SearchEntryRow]:
        after = "" if not after_seq else " AND (label, key) > (SELECT label, key FROM search_entries WHERE seq = :after)"
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT seq, label, key, content, created_at, updated_at FROM search_entries"
                f" WHERE session_id = :s{after} ORDER BY label, key LIMIT :limit",
                {"s": session_id, "after": after_seq, "limit": limit},
            ).fetchall()
        return [SearchEntryRow(*row) for row in rows]

    def import_compaction(self, session_id: str, row: CompactionRow) -> bool:
        with self._connection() as conn:
            cursor = conn.execute(
                "INSERT INTO session_compactions"
                " (session_id, id, summary, from_message_id, to_message_id, created_at)"
                " VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                (session_id, *row),
            )
            return cursor.rowcount == 1

    def stats(self) -> StoreStats:
        ids = " UNION ".join(f"SELECT {column} FROM {table}" for table, column in SUMMARY_SOURCES)
        with self._connection() as conn:
            counts = conn.execute(
                f"SELECT (SELECT count(*) FROM ({ids})), (SELECT count(*) FROM sessions),"
                " (SELECT count(*) FROM session_messages), (SELECT count(*) FROM session_compactions),"
                " (SELECT count(*) FROM context_blocks), (SELECT count(*) FROM cached_prompts),"
                " (SELECT count(*) FROM search_entries)"
            ).fetchone()
            pages = conn.execute("PRAGMA page_count").fetchone()[0]
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            version = self._schema_version()
        return StoreStats(*counts, schema_version=version, size_bytes=pages * page_size)


SEARCH_CANDIDATES = 2_000
"""Matches ranked at most per search: the most recent ones when a query matches more."""

_IDS_PER_STATEMENT = 500  # ids bound in one IN (...) list, well under SQLite's variable limit


class _Connected:
    """The store's connection under its lock (a class, not ``@contextmanager``: this runs around
    every statement, and a generator-based manager costs three times as much)."""

    __slots__ = ("_store",)

    def __init__(self, store: SqliteStore) -> None:
        self._store = store

    def __enter__(self) -> sqlite3.Connection:
        store = self._store
        store._lock.acquire()
        try:
            store._ensure_ready()
        except BaseException:
            store._lock.release()
            raise
        return store._conn

    def __exit__(self, *exc_info: object) -> None:
        self._store._lock.release()


def _session_token(session_id: str) -> str:
    """The indexed token naming a session (the ``session_token`` column's value)."""
    return "s" + session_id.encode("utf-8").hex()


@lru_cache(maxsize=32)
def _session_filter(session_ids: tuple[str, ...]) -> tuple[str, str]:
    """The sessions' tokens as an FTS5 alternative, and the SQL condition on the row."""
    tokens = " OR ".join(f'"{_session_token(s)}"' for s in dict.fromkeys(session_ids))
    return tokens, f" AND m.session_id IN ({','.join('?' * len(session_ids))})"


def _stored_positions(conn: sqlite3.Connection, session_id: str, ids: list[str]) -> list[tuple]:
    """``(id, depth, path_tokens, path_bytes)`` of the given ids stored in the session."""
    return _rows_for_ids(conn, f"SELECT {_POSITION} FROM session_messages", session_id, ids)


def _stored_seqs(conn: sqlite3.Connection, session_id: str, ids: list[str]) -> list[tuple]:
    return _rows_for_ids(conn, "SELECT id, seq FROM session_messages", session_id, ids)


def _rows_for_ids(conn: sqlite3.Connection, select: str, session_id: str, ids: list[str]) -> list[tuple]:
    rows: list[tuple] = []
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), _IDS_PER_STATEMENT):
        chunk = unique[start:start + _IDS_PER_STATEMENT]
        rows += conn.execute(
            f"{select} WHERE session_id = ? AND id IN ({','.join('?' * len(chunk))})", (session_id, *chunk)
        ).fetchall()
    return rows



def _link_blobs(conn: sqlite3.Connection, seq: int, record: MessageRecord) -> None:
    for blob in record.blobs:
        conn.execute(
            "INSERT INTO blobs (digest, size, data) VALUES (?, ?, ?) ON CONFLICT (digest) DO NOTHING",
            (blob.digest, len(blob.data), blob.data),
        )
        conn.execute(
            "INSERT INTO message_blobs (message_seq, digest) VALUES (?, ?) ON CONFLICT DO NOTHING", (seq, blob.digest)
        )


def _shift_subtree(
    conn: sqlite3.Connection, session_id: str, root_id: str, depth: int, tokens: int, size: int
) -> None:
    conn.execute(
        _SHIFT_SUBTREE, {"s": session_id, "root": root_id, "depth": depth, "tokens": tokens, "bytes": size}
    )


def _statements(script: str) -> list[str]:
    """Split a migration into statements (``sqlite3.complete_statement`` keeps triggers whole)."""
    statements, current = [], ""
    for line in script.splitlines(keepends=True):
        current += line
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    if current.strip():
        statements.append(current.strip())
    return [s for s in statements if s]


# -- inspection and transfer -------------------------------------------------------------------

_SUMMARIES = (
    "WITH ids(session_id) AS ({ids}),"
    " counts AS (SELECT session_id, count(*) AS n, min(created_at) AS first, max(created_at) AS last"
    " FROM session_messages WHERE session_id IN (SELECT session_id FROM ids) GROUP BY session_id)"
    " SELECT ids.session_id, coalesce(c.n, 0), c.first, c.last, "
    + ", ".join(f"s.{field}" for field in SESSION_COLUMNS)
    + " FROM ids LEFT JOIN counts c ON c.session_id = ids.session_id"
    " LEFT JOIN sessions s ON s.storage_id = ids.session_id"
)
