"""The SQL both stores run, written once, and the store built on it.

Statements are written for both backends: named parameters (``:name``), plain table names, and
fragments a dialect fills in: ``{random_id}`` (a new random text id), ``{rowid}`` (the
registry's insertion order), ``{terms}`` (the ``:terms`` parameter as the search column's type)
and ``{for_update}`` (a row lock where the backend has one). A dialect compiles each statement
once (:meth:`SqlStore.compile`) and supplies only what really differs: connections and
transactions, locking, list binding, schema versions, full-text search and the batch insert.

One module on purpose (past 500 lines): every shared statement sits next to the one method that
runs it, so a change to the SQL and to its use is made in one place.
"""

from __future__ import annotations

import hashlib
from abc import abstractmethod
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import replace
from functools import cache, partial
from importlib import resources
from operator import itemgetter
from typing import Any, NamedTuple, TypeVar

from .._time import now_us
from ..fts import Alternative, Unit, exact_units, parse_query
from ..ranking import check_match, meaningful_units, rank
from ..recall import entry_ref
from .base import (
    LATEST,
    SESSION_COLUMNS,
    SUMMARY_SOURCES,
    BlockRow,
    BlockVersionRow,
    CheckpointKey,
    CheckpointQuery,
    CheckpointRow,
    CheckpointWrite,
    CompactionRow,
    Inserted,
    InspectableStore,
    ItemCondition,
    ItemRow,
    ItemVersionRow,
    ItemWrite,
    MessageRecord,
    MessageRow,
    OutboxRow,
    OverlayRow,
    PathEntry,
    PathTotals,
    RecallBacklog,
    RecallSource,
    RecallStore,
    Removal,
    RowCounts,
    SearchEntryRow,
    SearchRow,
    SessionChanges,
    SessionRow,
    SessionSummary,
    StoredContent,
    StoredSession,
    StoreStats,
    VectorRow,
    _Latest,
    split_storage_id,
)

T = TypeVar("T")

SESSION_TABLES = tuple(table for table, column in SUMMARY_SOURCES if column == "session_id")
"""The tables whose rows belong to one session (by ``session_id``); the registry is apart."""

RECALL_TABLES = ("recall_sessions", "recall_outbox", "recall_vectors")
"""Semantic recall's outbox: enabled sessions, queued changes and the vectors sent."""

ITEM_TABLES = ("store_items", "store_item_versions", "store_item_vectors")
"""LangGraph-style items (``ItemStore``): belong to no session."""

TABLES = (*SESSION_TABLES, "sessions", "blobs", "message_blobs", "search_backfill", *RECALL_TABLES, *ITEM_TABLES)
"""Every table of the schema (what a dialect qualifies with its schema)."""


def load_migrations(dialect: str) -> tuple[str, ...]:
    """The dialect's migrations, in order (``migrations/<dialect>/NNNN_name.sql``): append-only,
    a released file is never edited, and its position is the schema version it brings."""
    assert __package__ is not None  # always set: this module is in a package
    # One name per joinpath: Python 3.10's Traversable takes one.
    folder = resources.files(__package__).joinpath("migrations").joinpath(dialect)
    files = sorted((entry for entry in folder.iterdir() if entry.name.endswith(".sql")), key=lambda f: f.name)
    return tuple(entry.read_text(encoding="utf-8") for entry in files)


LARGE_ROW = 1 << 20
"""Characters of message JSON above which a message is written without a copy in the database
driver: SQLite writes it in place, PostgreSQL streams it (each dialect's ``insert_messages``)."""

# -- statements ---------------------------------------------------------------------------------

MESSAGE_JSON = "CAST(coalesce(large_content, content) AS TEXT)"
"""A message's stored JSON, also when SQLite wrote it in place (as a blob: the cast reads it as text)."""
MESSAGE_TEXT = "CAST(coalesce(large_text, text_content) AS TEXT)"
"""What full-text search indexed of a message, as ``MESSAGE_JSON``."""
ROW = f"id, parent_id, role, created_at, {MESSAGE_JSON}"
POSITION = "depth, path_tokens, path_bytes"

LATEST_LEAF = """
    SELECT m.id FROM session_messages m
    WHERE m.session_id = :s AND NOT EXISTS (
        SELECT 1 FROM session_messages c WHERE c.session_id = m.session_id AND c.parent_id = m.id
    )
    ORDER BY m.created_at DESC, m.seq DESC LIMIT 1
"""

MESSAGE_COLUMNS = """session_id, id, parent_id, role, created_at, tokens, bytes,
        depth, path_tokens, path_bytes, text_content, search_terms, content"""

_INSERT = f"""
    INSERT INTO session_messages ({MESSAGE_COLUMNS})
    SELECT :s, :id, p.id, :role, :created_at, :tokens, :bytes,
           coalesce(p.depth, 0) + 1, coalesce(p.path_tokens, 0) + :tokens,
           coalesce(p.path_bytes, 0) + :bytes, :text, {{{{terms}}}}, :content
    FROM (SELECT 1) AS one LEFT JOIN session_messages p ON p.session_id = :s AND p.id = {{parent}}
    WHERE true
    ON CONFLICT (session_id, id) DO NOTHING
    RETURNING parent_id, {POSITION}, seq
"""
INSERT_UNDER_LATEST = _INSERT.format(parent=f"({LATEST_LEAF})")
INSERT_UNDER_PARENT = _INSERT.format(parent=":parent")

LINK_BLOB = [
    "INSERT INTO blobs (digest, size, data) VALUES (:digest, :size, :data) ON CONFLICT (digest) DO NOTHING",
    "INSERT INTO message_blobs (message_seq, digest) VALUES (:seq, :digest) ON CONFLICT DO NOTHING",
]

MESSAGE_SIZE = "SELECT tokens, bytes, seq FROM session_messages WHERE session_id = :s AND id = :id"
UNLINK_BLOBS = "DELETE FROM message_blobs WHERE message_seq = :seq"
UPDATE_MESSAGE = """
    UPDATE session_messages SET role = :role, tokens = :tokens, bytes = :bytes, text_content = :text,
    search_terms = {terms}, content = :content, large_text = NULL, large_content = NULL,
    path_tokens = path_tokens + :shift_tokens, path_bytes = path_bytes + :shift_bytes
    WHERE session_id = :s AND id = :id
"""
DELETE_MESSAGE = f"DELETE FROM session_messages WHERE session_id = :s AND id = :id RETURNING {POSITION}"
ORPHAN_CHILDREN = "UPDATE session_messages SET parent_id = NULL WHERE session_id = :s AND parent_id = :id RETURNING id"

_SHIFT = """
    WITH RECURSIVE sub(id) AS (
        {start}
        UNION ALL
        SELECT m.id FROM session_messages m JOIN sub ON m.session_id = :s AND m.parent_id = sub.id
    )
    UPDATE session_messages
    SET depth = depth + :depth, path_tokens = path_tokens + :tokens, path_bytes = path_bytes + :bytes
    WHERE session_id = :s AND id IN (SELECT id FROM sub)
"""
SHIFT_SUBTREE = _SHIFT.format(start="SELECT CAST(:root AS TEXT)")
SHIFT_DESCENDANTS = _SHIFT.format(start="SELECT id FROM session_messages WHERE session_id = :s AND parent_id = :root")

CLEAR_MESSAGES = "DELETE FROM session_messages WHERE session_id = :s"
CLEAR_COMPACTIONS = "DELETE FROM session_compactions WHERE session_id = :s"

GET_MESSAGE = f"SELECT {ROW} FROM session_messages WHERE session_id = :s AND id = :id"
GET_LATEST_LEAF = f"SELECT {ROW} FROM session_messages WHERE session_id = :s AND id = ({LATEST_LEAF})"
CHILDREN = f"SELECT {ROW} FROM session_messages WHERE session_id = :s AND parent_id = :id ORDER BY created_at, seq"
LEAF_TOTALS = f"SELECT id, {POSITION} FROM session_messages WHERE session_id = :s AND id = :id"
LATEST_LEAF_TOTALS = LEAF_TOTALS.replace(":id", f"({LATEST_LEAF})")
FETCH_CONTENTS = f"SELECT seq, created_at, {MESSAGE_JSON} FROM session_messages WHERE seq {{values}}"
STORED_IDS = "SELECT id FROM session_messages WHERE session_id = {first} AND id {values}"
GET_BLOBS = "SELECT digest, data FROM blobs WHERE digest {values}"

PATH = """
    WITH RECURSIVE path(seq, id, parent_id, role, size, tokens, n) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 0 FROM session_messages
        WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
    SELECT seq, id, role, size, tokens FROM path ORDER BY n DESC
"""

PATH_IDS = """
    WITH RECURSIVE path(seq, id, parent_id, n) AS (
        SELECT seq, id, parent_id, 0 FROM session_messages WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
    SELECT seq, id FROM path ORDER BY n DESC
"""

_SHORT_PATH = """
    WITH RECURSIVE path(seq, parent_id, n) AS (
        SELECT seq, parent_id, 0 FROM session_messages WHERE session_id = :s AND id = {leaf}
        UNION ALL
        SELECT m.seq, m.parent_id, path.n + 1
        FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
        WHERE path.n < :limit
    )
"""
"""The path up from ``{leaf}``, walked one row past ``:limit`` at most."""
_SHORT_PATH_ROWS = f"""
    SELECT m.seq, m.created_at, {MESSAGE_JSON} AS content, path.n
    FROM path JOIN session_messages m ON m.seq = path.seq
    WHERE (SELECT count(*) FROM path) <= :limit
"""
SHORT_PATH_CONTENTS = f"""{_SHORT_PATH.format(leaf=":leaf")}
    SELECT seq, created_at, content FROM ({_SHORT_PATH_ROWS}) AS found ORDER BY n DESC
"""
"""The path to ``:leaf`` with each row's contents, root first, when it holds at most ``:limit``
rows; no rows when it holds more (the walk stops one row past ``:limit``, and no content is read)."""
SHORT_LATEST_PATH_CONTENTS = f"""{_SHORT_PATH.format(leaf=f"({LATEST_LEAF})")}
    SELECT seq, created_at, content FROM ({_SHORT_PATH_ROWS}
        UNION ALL
        SELECT -1, 0, '', -1 WHERE (SELECT count(*) FROM path) > :limit
    ) AS found ORDER BY n DESC
"""
"""``SHORT_PATH_CONTENTS`` of the latest leaf, and when the path holds more than ``:limit`` rows
one row of ``seq`` -1 instead: no rows is an empty session."""

SPAN_IDS = """
    WITH RECURSIVE span(id, parent_id) AS (
        SELECT id, parent_id FROM session_messages WHERE session_id = :s AND id = :to
        UNION ALL
        SELECT m.id, m.parent_id FROM span JOIN session_messages m ON m.session_id = :s AND m.id = span.parent_id
        WHERE span.id <> :from
    )
    SELECT id FROM span
"""

PATH_TAIL = """
    WITH RECURSIVE tail(seq, id, parent_id, role, size, tokens, n, used) AS (
        SELECT seq, id, parent_id, role, bytes, tokens, 1, CAST(bytes AS BIGINT) FROM session_messages
        WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.role, m.bytes, m.tokens, tail.n + 1, tail.used + m.bytes
        FROM tail JOIN session_messages m ON m.session_id = :s AND m.id = tail.parent_id
        WHERE tail.n < :min_rows OR tail.used + m.bytes <= :max_bytes
    )
    SELECT seq, id, role, size, tokens FROM tail ORDER BY n DESC
"""

_COMPACTION = "id, summary, from_message_id, to_message_id, created_at"
ADD_COMPACTION = f"""
    INSERT INTO session_compactions (session_id, {_COMPACTION})
    VALUES (:s, :id, :summary, :from_message_id, :to_message_id, :created_at) ON CONFLICT (id) DO NOTHING
"""
GET_COMPACTIONS = f"SELECT {_COMPACTION} FROM session_compactions WHERE session_id = :s ORDER BY created_at, seq"
WITH_OVERLAYS = "SELECT DISTINCT session_id FROM session_compactions WHERE session_id {values}"
GET_OVERLAYS = f"""
    SELECT {_COMPACTION}, from_depth, to_depth FROM session_compactions WHERE session_id = :s ORDER BY created_at, seq
"""
UNANCHORED = """
    SELECT id, from_message_id, to_message_id FROM session_compactions WHERE session_id = :s AND from_depth IS NULL
"""
ANCHOR_COMPACTION = """
    WITH RECURSIVE up(id, parent_id, depth) AS (
        SELECT id, parent_id, depth FROM session_messages WHERE session_id = :s AND id = :last_id
        UNION ALL
        SELECT m.id, m.parent_id, m.depth FROM up JOIN session_messages m ON m.session_id = :s AND m.id = up.parent_id
        WHERE up.id <> :first_id
    )
    UPDATE session_compactions SET
        from_depth = coalesce((SELECT depth FROM up WHERE id = :first_id), -1),
        to_depth = CASE WHEN EXISTS (SELECT 1 FROM up WHERE id = :first_id)
                   THEN (SELECT depth FROM up WHERE id = :last_id) ELSE -1 END
    WHERE id = :id AND EXISTS (SELECT 1 FROM up WHERE id = :last_id)
"""
"""Record an overlay's end depths once its last message is stored; ``-1`` when its first is not
an ancestor of it then: no message stored later can become an ancestor of a stored one."""
UNANCHORED_SESSIONS = "SELECT DISTINCT session_id FROM session_compactions WHERE from_depth IS NULL"
UNANCHOR_COMPACTIONS = "UPDATE session_compactions SET from_depth = NULL, to_depth = NULL WHERE session_id = :s"

_PATH_UP = """
    WITH RECURSIVE stops(id) AS (
        SELECT to_message_id FROM session_compactions WHERE session_id = :s AND from_depth >= 0
    ),
    up(seq, id, parent_id, tokens, n) AS (
        SELECT seq, id, parent_id, tokens, 0 FROM session_messages WHERE session_id = :s AND id = {start}
        UNION ALL
        SELECT m.seq, m.id, m.parent_id, m.tokens, up.n + 1
        FROM up JOIN session_messages m ON m.session_id = :s AND m.id = up.parent_id
        WHERE up.id NOT IN (SELECT id FROM stops)
    )
    SELECT seq, id, tokens, parent_id IS NULL FROM up ORDER BY n DESC
"""
PATH_UP = _PATH_UP.format(start=":start")
PATH_ABOVE = _PATH_UP.format(start="(SELECT parent_id FROM session_messages WHERE session_id = :s AND id = :start)")
"""The path up from ``:start`` (or from its parent), ending at the first end of an overlay with
known depths."""

# A plain block is its versions (key ''): the current block is the newest, found by a seek.
GET_BLOCK = """
    SELECT content FROM context_block_versions WHERE session_id = :s AND label = :label AND key = ''
    ORDER BY version DESC LIMIT 1
"""
GET_BLOCKS = """
    SELECT wanted.column1, (
        SELECT v.content FROM context_block_versions v
        WHERE v.session_id = {first} AND v.label = wanted.column1 AND v.key = '' ORDER BY v.version DESC LIMIT 1
    ) FROM {rows} AS wanted
"""
SET_BLOCK = """
    INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, tool_call_id, content)
    SELECT :s, :label, '', coalesce(max(version), 0) + 1, :now, :source, :tool_call_id, :content
    FROM context_block_versions WHERE session_id = :s AND label = :label AND key = ''
    RETURNING version
"""
"""Write a block: one insert, as its next version (its versions go with its session, so a block
written again after its session was deleted starts at version 1)."""
GET_CACHED_PROMPT = "SELECT prompt FROM cached_prompts WHERE session_id = :s"
SET_CACHED_PROMPT = """
    INSERT INTO cached_prompts (session_id, updated_at, prompt) VALUES (:s, :now, :prompt)
    ON CONFLICT (session_id) DO UPDATE SET prompt = excluded.prompt, updated_at = excluded.updated_at
"""
_SET_SEARCH_ENTRY = """
    INSERT INTO search_entries
        (session_id, label, key, created_at, updated_at, content, search_terms, version, source, tool_call_id)
    VALUES (:s, :label, :key, :created, :updated, :content, {{terms}}, {first}, :source, :tool_call_id)
    ON CONFLICT (session_id, label, key) DO UPDATE
    SET content = excluded.content, search_terms = excluded.search_terms, updated_at = excluded.updated_at,
        version = {next}, source = excluded.source, tool_call_id = excluded.tool_call_id
    RETURNING version
"""
SET_SEARCH_ENTRY = _SET_SEARCH_ENTRY.format(first="1", next="search_entries.version + 1")
AT_VERSION = {  # an import of a block whose versions it imported before: the current one only
    False: """
        INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, tool_call_id, content)
        VALUES (:s, :label, '', :version, :now, :source, :tool_call_id, :content)
        ON CONFLICT (session_id, label, key, version) DO NOTHING
    """,
    True: _SET_SEARCH_ENTRY.format(first=":version", next=":version"),
}
ALL_BLOCK_VERSIONS = """
    SELECT label, key, version, content, created_at, source, tool_call_id FROM context_block_versions
    WHERE session_id = :s ORDER BY label, key, version
"""
IMPORT_BLOCK_VERSION = """
    INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, tool_call_id, content)
    VALUES (:s, :label, :key, :version, :created_at, :source, :tool_call_id, :content)
    ON CONFLICT (session_id, label, key, version) DO NOTHING
"""
COUNT_SEARCH_ENTRIES = "SELECT count(*) FROM search_entries WHERE session_id = :s AND label = :label"
TRIM_BLOCK_VERSIONS = """
    DELETE FROM context_block_versions WHERE session_id = :s AND label = :label AND key = :key AND version <= :oldest
"""
GET_BLOCK_VERSIONS = """
    SELECT version, content, created_at, source, tool_call_id FROM context_block_versions
    WHERE session_id = :s AND label = :label AND key = :key ORDER BY version DESC LIMIT :limit
"""

# Ranked search reads a candidate's terms, then the best candidates' rows, by ``seq``.
TERMS_OF = {
    table: f"SELECT seq, {{terms_text}} FROM {table} WHERE seq {{values}}"
    for table in ("session_messages", "search_entries", "store_items")
}
RANKED_MESSAGES = (
    f"SELECT seq, session_id, id, role, {MESSAGE_TEXT}, created_at FROM session_messages WHERE seq {{values}}"
)
RANKED_REGISTERED = (
    f"SELECT m.seq, s.id, m.id, m.role, {MESSAGE_TEXT}, m.created_at"
    " FROM session_messages m JOIN sessions s ON s.storage_id = m.session_id WHERE m.seq {values}"
)
RANKED_ENTRIES = "SELECT seq, key, content FROM search_entries WHERE seq {values}"
NAMESPACE_STORAGE_IDS = "SELECT storage_id FROM sessions WHERE namespace = :ns"


class SearchScope(NamedTuple):
    """Where a ranked search looks: ``table``'s rows of ``session_ids`` (``None``: all), of the
    sessions registered in ``namespace``, or of one block's entries (``entries_of``)."""

    table: str
    session_ids: tuple[str, ...] | None = None
    namespace: str | None = None
    entries_of: tuple[str, str] | None = None
    items_under: tuple[str, str] | None = None
    """For the ``store_items`` table: ``(namespace, prefix)``, the namespace's items under the
    prefix (``""``: all of them)."""
    analysed: tuple[tuple[int, str], ...] = ()
    """Rows whose terms the search takes from here, not from the table: ``(seq, terms)``, the
    terms in the form ``{terms_text}`` reads (items waiting for a store that cannot write)."""


# Rows stored before the search terms existed get them in batches, after the migration.
SEARCH_SOURCES = {"session_messages": MESSAGE_TEXT, "search_entries": "content"}
"""The tables search indexes, and the column whose text their ``search_terms`` analyse."""
BACKFILL_PENDING = "SELECT source, next_seq, end_seq FROM search_backfill ORDER BY source"
BACKFILL_CLAIM = "SELECT next_seq, end_seq FROM search_backfill WHERE source = :source {for_update}"
BACKFILL_ADVANCE = "UPDATE search_backfill SET next_seq = :next WHERE source = :source"
BACKFILL_DONE = "DELETE FROM search_backfill WHERE source = :source"
BACKFILL_ROWS = {
    table: f"SELECT seq, {column} FROM {table} WHERE seq >= :start AND seq <= :end ORDER BY seq LIMIT :n"
    for table, column in SEARCH_SOURCES.items()
}
BACKFILL_COUNT = {
    table: f"SELECT count(*) FROM {table} WHERE seq >= :start AND seq <= :end" for table in SEARCH_SOURCES
}
BACKFILL_SET = {table: f"UPDATE {table} SET search_terms = {{terms}} WHERE seq = :seq" for table in SEARCH_SOURCES}

_SESSION_FIELDS = ", ".join(SESSION_COLUMNS)
REGISTER_SESSION = (
    f"INSERT INTO sessions ({_SESSION_FIELDS}) VALUES ({', '.join(':' + name for name in SESSION_COLUMNS)})"
)
REGISTER_SESSION_IF_NEW = REGISTER_SESSION + " ON CONFLICT (namespace, id) DO NOTHING"
GET_SESSION = f"SELECT {_SESSION_FIELDS} FROM sessions WHERE namespace = :ns AND id = :id"
LIST_SESSIONS = f"SELECT {_SESSION_FIELDS} FROM sessions WHERE namespace = :ns ORDER BY updated_at DESC, {{rowid}} DESC"
UPDATE_SESSION = """
    UPDATE sessions SET name = coalesce(:name, name), end_reason = coalesce(:end_reason, end_reason),
    input_tokens = input_tokens + :input_tokens, output_tokens = output_tokens + :output_tokens,
    estimated_cost = estimated_cost + :estimated_cost, updated_at = :updated_at WHERE namespace = :ns AND id = :id
"""
UNREGISTER_SESSION = "DELETE FROM sessions WHERE namespace = :ns AND id = :id RETURNING storage_id"
DELETE_SESSION_ROWS = tuple(f"DELETE FROM {table} WHERE session_id = :s" for table in SESSION_TABLES)

_PATH_SEQS = """
    WITH RECURSIVE path(seq, parent_id) AS (
        SELECT seq, parent_id FROM session_messages WHERE session_id = :s AND id = :leaf
        UNION ALL
        SELECT m.seq, m.parent_id FROM path JOIN session_messages m ON m.session_id = :s AND m.id = path.parent_id
    )
"""
FORK = (
    _PATH_SEQS
    + f"""
    INSERT INTO session_messages ({MESSAGE_COLUMNS}, large_text, large_content)
    SELECT :dst, m.id, m.parent_id, m.role, m.created_at, m.tokens, m.bytes,
           m.depth, m.path_tokens, m.path_bytes, m.text_content, m.search_terms, m.content,
           m.large_text, m.large_content
    FROM session_messages m WHERE m.seq IN (SELECT seq FROM path) ORDER BY m.depth
    """,
    _PATH_SEQS
    + """
    INSERT INTO message_blobs (message_seq, digest)
    SELECT copy.seq, link.digest
    FROM message_blobs link
    JOIN session_messages original ON original.seq = link.message_seq
    JOIN session_messages copy ON copy.session_id = :dst AND copy.id = original.id
    WHERE link.message_seq IN (SELECT seq FROM path)
    """,
    _PATH_SEQS
    + """
    , ids(id) AS (SELECT m.id FROM session_messages m WHERE m.seq IN (SELECT seq FROM path))
    INSERT INTO session_compactions
        (session_id, id, from_message_id, to_message_id, created_at, summary, from_depth, to_depth)
    SELECT :dst, {random_id}, c.from_message_id, c.to_message_id, c.created_at, c.summary, c.from_depth, c.to_depth
    FROM session_compactions c
    WHERE c.session_id = :s AND c.from_message_id IN (SELECT id FROM ids) AND c.to_message_id IN (SELECT id FROM ids)
    ORDER BY c.created_at, c.seq
    """,
)
"""Copy a path into another session: its messages, their payload links, the overlays on it."""

SUMMARIES = (
    "WITH ids(session_id) AS ({ids}),"
    " counts AS (SELECT session_id, count(*) AS n, min(created_at) AS first, max(created_at) AS last"
    " FROM session_messages WHERE session_id IN (SELECT session_id FROM ids) GROUP BY session_id)"
    " SELECT ids.session_id, coalesce(c.n, 0), c.first, c.last, "
    + ", ".join(f"r.{column}" for column in SESSION_COLUMNS)
    + " FROM ids LEFT JOIN counts c ON c.session_id = ids.session_id"
    " LEFT JOIN sessions r ON r.storage_id = ids.session_id"
)
MESSAGE_PAGE = (
    f"SELECT seq, {ROW} FROM session_messages WHERE session_id = :s{{after}} ORDER BY created_at, seq LIMIT :limit"
)
MESSAGE_PAGE_AFTER = " AND (created_at, seq) > (SELECT created_at, seq FROM session_messages WHERE seq = :after)"
MESSAGE_TREE = (
    "SELECT id, parent_id, role, created_at FROM session_messages WHERE session_id = :s ORDER BY created_at, seq"
)
LIST_BLOCKS = """
    SELECT v.label, v.content, v.created_at FROM context_block_versions v
    WHERE v.session_id = :s AND v.key = '' AND v.version = (
        SELECT max(w.version) FROM context_block_versions w WHERE w.session_id = :s AND w.label = v.label AND w.key = ''
    ) ORDER BY v.label
"""
SEARCH_ENTRY_COUNTS = "SELECT label, count(*) FROM search_entries WHERE session_id = :s GROUP BY label ORDER BY label"
SEARCH_ENTRY_PAGE = (
    "SELECT seq, label, key, content, created_at, updated_at FROM search_entries"
    " WHERE session_id = :s{after} ORDER BY label, key LIMIT :limit"
)
SEARCH_ENTRY_PAGE_AFTER = " AND (label, key) > (SELECT label, key FROM search_entries WHERE seq = :after)"
COUNTS = (
    "SELECT (SELECT count(*) FROM ({ids}) AS ids), (SELECT count(*) FROM sessions),"
    " (SELECT count(*) FROM session_messages), (SELECT count(*) FROM session_compactions),"
    " (SELECT count(*) FROM (SELECT DISTINCT session_id, label FROM context_block_versions WHERE key = '') AS b),"
    " (SELECT count(*) FROM cached_prompts),"
    " (SELECT count(*) FROM search_entries)"
)


# -- semantic recall's outbox (``RecallStore``) ------------------------------------------------

RECALL_ENABLE = "INSERT INTO recall_sessions (session_id) VALUES (:s) ON CONFLICT DO NOTHING RETURNING session_id"
RECALL_QUEUE_SESSION = (
    "INSERT INTO recall_outbox (session_id, kind, ref)"
    " SELECT session_id, 'session', '' FROM recall_sessions WHERE session_id = :s"
)
RECALL_DISABLE = "DELETE FROM recall_sessions WHERE session_id = :s"
RECALL_FORK = (
    "INSERT INTO recall_sessions (session_id) SELECT :dst FROM recall_sessions WHERE session_id = :s"
    " ON CONFLICT DO NOTHING"
)
RECALL_CLAIM = """
    UPDATE recall_outbox SET due = :lease WHERE seq IN (
        SELECT seq FROM recall_outbox WHERE due <= :now ORDER BY seq LIMIT :n {skip_locked}
    ) RETURNING seq, session_id, kind, ref, attempts
"""
RECALL_MESSAGE_SOURCES = (
    f"SELECT id, role, created_at, {MESSAGE_JSON} FROM session_messages WHERE session_id = {{first}} AND id {{values}}"
)
RECALL_ENTRY_SOURCE = (
    "SELECT updated_at, content FROM search_entries WHERE session_id = :s AND label = :label AND key = :key"
)
_IF_ENABLED = "EXISTS (SELECT 1 FROM recall_sessions WHERE session_id = :s)"
RECALL_MESSAGE_REFS = f"SELECT id FROM session_messages WHERE session_id = :s AND {_IF_ENABLED} ORDER BY seq"
RECALL_ENTRY_REFS = f"SELECT label, key FROM search_entries WHERE session_id = :s AND {_IF_ENABLED} ORDER BY seq"
VECTOR_COLUMNS = "vector_id, session_id, kind, ref, chunk, digest"
RECALL_VECTORS = f"SELECT {VECTOR_COLUMNS} FROM recall_vectors WHERE session_id = :s ORDER BY ref, kind, chunk"
RECALL_VECTORS_OF = (
    f"SELECT {VECTOR_COLUMNS} FROM recall_vectors WHERE session_id = {{first}} AND ref {{values}}"
    " ORDER BY ref, kind, chunk"
)
RECALL_RECORD = f"""
    INSERT INTO recall_vectors ({VECTOR_COLUMNS}) VALUES (:vector_id, :session_id, :kind, :ref, :chunk, :digest)
    ON CONFLICT (vector_id) DO UPDATE SET digest = excluded.digest
"""
RECALL_FORGET = "DELETE FROM recall_vectors WHERE vector_id {values}"
RECALL_DONE = "DELETE FROM recall_outbox WHERE seq {values}"
RECALL_QUEUE = "INSERT INTO recall_outbox (session_id, kind, ref) VALUES (:s, :kind, :ref)"
RECALL_QUEUED_AFTER = "SELECT kind, ref FROM recall_outbox WHERE session_id = :s AND seq > :seq"
RECALL_RETRY = "UPDATE recall_outbox SET attempts = attempts + 1, error = :error, due = :due WHERE seq = :seq"
RECALL_BACKLOG = """
    SELECT count(*), count(CASE WHEN attempts > 0 THEN 1 END),
           (SELECT error FROM recall_outbox WHERE error IS NOT NULL ORDER BY seq DESC LIMIT 1),
           (SELECT count(*) FROM recall_sessions), (SELECT count(*) FROM recall_vectors)
    FROM recall_outbox
"""
RECALL_LOOKUP = "SELECT vector_id, session_id, kind, ref FROM recall_vectors WHERE vector_id {values}"
RECALL_LOOKUP_NAMESPACE = """
    SELECT v.vector_id, v.session_id, v.kind, v.ref FROM recall_vectors v
    JOIN sessions s ON s.storage_id = v.session_id
    WHERE s.namespace = {first} AND v.vector_id {values}
"""
RECALL_ENABLED = "SELECT session_id FROM recall_sessions ORDER BY session_id"
RECALL_STALE = "UPDATE recall_vectors SET digest = '' WHERE session_id = :s"


# -- LangGraph checkpoints (``CheckpointStore``) ------------------------------------------------

CHECKPOINT_PARAMS = (
    "s",
    "ns",
    "id",
    "namespace",
    "thread",
    "parent",
    "run",
    "created_at",
    "type",
    "metadata",
    "checkpoint",
)
"""``PUT_CHECKPOINT``'s parameters, in the order ``SqlStore.put_checkpoint`` binds them."""
PUT_CHECKPOINT = """
    INSERT INTO checkpoints (session_id, checkpoint_ns, checkpoint_id, namespace, thread_id,
        parent_checkpoint_id, run_id, created_at, type, metadata, checkpoint)
    VALUES (:s, :ns, :id, :namespace, :thread, :parent, :run, :created_at, :type, {json}, :checkpoint)
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_checkpoint_id = excluded.parent_checkpoint_id, run_id = excluded.run_id,
        type = excluded.type, metadata = excluded.metadata, checkpoint = excluded.checkpoint
"""
_WRITE_COLUMNS = "session_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, task_path, value"
REWRITE_CHECKPOINT = (
    "UPDATE checkpoints SET type = :type, checkpoint = :value"
    " WHERE session_id = :s AND checkpoint_ns = :ns AND checkpoint_id = :id"
)
REWRITE_WRITE = (
    "UPDATE checkpoint_writes SET type = :type, value = :value WHERE session_id = :s AND checkpoint_ns = :ns"
    " AND checkpoint_id = :id AND task_id = :task AND idx = :idx"
)
"""A checkpoint's (a pending write's) serialised value replaced in place (``rewrite_checkpoints``)."""
PUT_WRITES = f"INSERT INTO checkpoint_writes ({_WRITE_COLUMNS}) VALUES {{rows}} ON CONFLICT {{conflict}}"
WRITE_ROW = "(:s, :ns, :id, :t{n}, :i{n}, :c{n}, :y{n}, :p{n}, :v{n})"
WRITES_REPLACE = (
    "(session_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET channel = excluded.channel,"
    " type = excluded.type, task_path = excluded.task_path, value = excluded.value"
)
WRITES_KEEP = "DO NOTHING"
WRITES_PER_STATEMENT = 100
"""Writes inserted by one statement (9 parameters each: within every SQLite's limit)."""

_LATEST_CHECKPOINT = "(SELECT max(checkpoint_id) FROM checkpoints WHERE session_id = :s AND checkpoint_ns = :ns)"
_GET_CHECKPOINT = """
    SELECT 0, checkpoint_id, parent_checkpoint_id, type, {json_text}, checkpoint, 0, thread_id FROM checkpoints
    WHERE session_id = :s AND checkpoint_ns = :ns AND checkpoint_id = {id}
    UNION ALL
    SELECT 1, task_id, channel, type, task_path, value, idx, NULL FROM checkpoint_writes
    WHERE session_id = :s AND checkpoint_ns = :ns AND checkpoint_id = {id}
"""
GET_LATEST_CHECKPOINT = _GET_CHECKPOINT.replace("{id}", _LATEST_CHECKPOINT)
GET_CHECKPOINT_AT = _GET_CHECKPOINT.replace("{id}", ":id")
"""The checkpoint (kind 0) and its writes (kind 1) in one statement: ``(kind, checkpoint id |
task id, parent | channel, type, metadata | task path, checkpoint | value, 0 | idx, thread id)``."""

CHECKPOINT_ANCESTORS = """
    WITH RECURSIVE chain(depth, checkpoint_id, parent_checkpoint_id, type, metadata, checkpoint, thread_id) AS (
        SELECT 0, checkpoint_id, parent_checkpoint_id, type, {json_text}, checkpoint, thread_id FROM checkpoints
        WHERE session_id = :s AND checkpoint_ns = :ns AND checkpoint_id = :id
        UNION ALL
        SELECT a.depth + 1, c.checkpoint_id, c.parent_checkpoint_id, c.type, {json_text_of_c}, c.checkpoint,
            c.thread_id
        FROM chain a {parent_of_a}
        WHERE a.depth + 1 < :limit
    )
    SELECT 0, depth, checkpoint_id, parent_checkpoint_id, type, metadata, checkpoint, 0, thread_id FROM chain
    UNION ALL
    SELECT 1, a.depth, w.task_id, w.channel, w.type, w.task_path, w.value, w.idx, NULL
    FROM chain a {writes_of_a}
    WHERE {channels}
"""
"""A checkpoint and its ancestors by ``parent_checkpoint_id`` (``depth`` 0, 1, ...; fewer than
``:limit``), each (kind 0) with its writes (kind 1; ``{channels}``: a condition on ``w.channel``),
in one statement: ``(kind, depth, checkpoint id | task id, parent | channel, type, metadata |
task path, checkpoint | value, 0 | idx, thread id)``. Each step is one primary-key lookup
(``{parent_of_a}`` and ``{writes_of_a}`` pin the chain as the outer loop, whatever the
planner's statistics). A chain that loops (a checkpoint put again under a descendant) ends at
``:limit``."""

LIST_CHECKPOINTS = """
    WITH page AS (
        SELECT session_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE {where}
        ORDER BY checkpoint_id DESC, session_id DESC, checkpoint_ns DESC LIMIT :limit
    )
    SELECT 0, c.session_id, c.checkpoint_ns, c.checkpoint_id, c.parent_checkpoint_id, c.type,
        {json_text_of_c}, c.checkpoint, 0, c.thread_id
    FROM checkpoints c JOIN page p ON p.session_id = c.session_id AND p.checkpoint_ns = c.checkpoint_ns
        AND p.checkpoint_id = c.checkpoint_id
    UNION ALL
    SELECT 1, w.session_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.channel, w.task_path, w.value, w.idx,
        w.type
    FROM checkpoint_writes w JOIN page p ON p.session_id = w.session_id AND p.checkpoint_ns = w.checkpoint_ns
        AND p.checkpoint_id = w.checkpoint_id
"""
"""A page of checkpoints (kind 0) with their writes (kind 1); ``{where}`` is built from a
``CheckpointQuery`` (``SqlStore._checkpoint_where``)."""
LIST_AFTER = "(checkpoint_id, session_id, checkpoint_ns) < (:after_id, :after_s, :after_ns)"

DELETE_CHECKPOINTS = (
    "DELETE FROM checkpoint_writes WHERE session_id {values}",
    "DELETE FROM checkpoints WHERE session_id {values}",
)
_LATEST_OF_ROW = (
    "(SELECT max(k.checkpoint_id) FROM checkpoints k"
    " WHERE k.session_id = {table}.session_id AND k.checkpoint_ns = {table}.checkpoint_ns)"
)
KEEP_LATEST_CHECKPOINTS = (
    "DELETE FROM checkpoint_writes WHERE session_id {values}"
    f" AND checkpoint_id <> coalesce({_LATEST_OF_ROW.format(table='checkpoint_writes')}, '')",
    "DELETE FROM checkpoints WHERE session_id {values}"
    f" AND checkpoint_id < {_LATEST_OF_ROW.format(table='checkpoints')}",
    "UPDATE checkpoints SET parent_checkpoint_id = NULL WHERE session_id {values} AND parent_checkpoint_id IS NOT NULL",
)
"""Keep the latest checkpoint of each namespace of the sessions ``{values}`` with its writes
(run deleting the writes first: the checkpoints then still say which are the latest)."""
COPY_CHECKPOINTS = (
    """
    INSERT INTO checkpoints (session_id, checkpoint_ns, checkpoint_id, namespace, thread_id,
        parent_checkpoint_id, run_id, created_at, type, metadata, checkpoint)
    SELECT :dst, checkpoint_ns, checkpoint_id, :namespace, :thread, parent_checkpoint_id, run_id, created_at,
        type, metadata, checkpoint
    FROM checkpoints WHERE session_id = :src ORDER BY checkpoint_ns, checkpoint_id
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id) DO NOTHING
    """,
    f"""
    INSERT INTO checkpoint_writes ({_WRITE_COLUMNS})
    SELECT :dst, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, task_path, value
    FROM checkpoint_writes WHERE session_id = :src
    ON CONFLICT (session_id, checkpoint_ns, checkpoint_id, task_id, idx) DO NOTHING
    """,
)
RUN_CHECKPOINTS = "DELETE FROM checkpoints WHERE namespace = {first} AND run_id {values}"
"""The checkpoints the runs ``{values}`` made in the namespace ``{first}`` (``run_id`` has no
index: one scan of the checkpoints for a list of runs)."""
RUN_WRITES = """
    DELETE FROM checkpoint_writes WHERE (session_id, checkpoint_ns, checkpoint_id) IN (
        SELECT session_id, checkpoint_ns, checkpoint_id FROM checkpoints WHERE namespace = {first} AND run_id {values}
    )
"""
"""The writes of ``RUN_CHECKPOINTS``' checkpoints, found by their key (not a scan of the writes)."""
DELTA_SESSIONS = "SELECT DISTINCT session_id FROM checkpoints WHERE session_id {values} AND {has_delta}"


# -- retention and erasure (``SessionErasure``) -------------------------------------------------

_ACTIVITY = """
    WITH activity(session_id, last_at) AS (
        SELECT session_id, max(created_at) FROM session_messages{where} GROUP BY session_id
        UNION ALL SELECT session_id, max(created_at) FROM session_compactions{where} GROUP BY session_id
        UNION ALL SELECT session_id, max(created_at) FROM context_block_versions{where} GROUP BY session_id
        UNION ALL SELECT session_id, max(updated_at) FROM search_entries{where} GROUP BY session_id
        UNION ALL SELECT session_id, updated_at FROM cached_prompts{where}
        UNION ALL SELECT session_id, max(created_at) FROM checkpoints{where} GROUP BY session_id
        UNION ALL SELECT storage_id, updated_at FROM sessions{registered}
    )
    SELECT a.session_id, max(a.last_at), r.namespace, r.id FROM activity a
    LEFT JOIN sessions r ON r.storage_id = a.session_id
    GROUP BY a.session_id, r.namespace, r.id{having}
"""
SESSION_ACTIVITY = _ACTIVITY.format(where="", registered="", having=" HAVING max(a.last_at) < :before")
"""``(storage id, last activity, registry namespace, registry id)`` of every session last active
before ``:before``."""
SESSION_ACTIVITY_OF = _ACTIVITY.format(
    where=" WHERE session_id {values}", registered=" WHERE storage_id {values}", having=""
)
"""The same for the sessions ``{values}``, whatever their last activity."""

COUNT_SESSION_ROWS = """
    SELECT
        (SELECT count(*) FROM sessions WHERE storage_id {values}),
        (SELECT count(*) FROM session_messages WHERE session_id {values}),
        (SELECT count(*) FROM session_compactions WHERE session_id {values}),
        (SELECT count(*) FROM (
            SELECT DISTINCT session_id, label FROM context_block_versions WHERE key = '' AND session_id {values}
        ) AS labels),
        (SELECT count(*) FROM context_block_versions WHERE session_id {values}),
        (SELECT count(*) FROM search_entries WHERE session_id {values}),
        (SELECT count(*) FROM cached_prompts WHERE session_id {values}),
        (SELECT count(DISTINCT link.digest) FROM message_blobs link
         JOIN session_messages m ON m.seq = link.message_seq
         WHERE m.session_id {values} AND NOT EXISTS (
            SELECT 1 FROM message_blobs other JOIN session_messages o ON o.seq = other.message_seq
            WHERE other.digest = link.digest AND NOT o.session_id {values}
         )),
        (SELECT count(*) FROM recall_vectors WHERE session_id {values}),
        (SELECT count(*) FROM checkpoints WHERE session_id {values}),
        (SELECT count(*) FROM checkpoint_writes WHERE session_id {values})
"""
"""The ``RowCounts`` of the sessions ``{values}``: a payload counts when only they refer to it."""
PAYLOAD_HOLDERS = """
    SELECT DISTINCT link.digest, m.session_id FROM message_blobs link
    JOIN session_messages m ON m.seq = link.message_seq
    WHERE link.digest IN (
        SELECT held.digest FROM message_blobs held JOIN session_messages h ON h.seq = held.message_seq
        WHERE h.session_id {values}
    )
"""
"""Every session holding a payload that one of the sessions ``{values}`` holds."""
RECALL_QUEUE_SESSIONS = (
    "INSERT INTO recall_outbox (session_id, kind, ref)"
    " SELECT session_id, 'session', '' FROM recall_sessions WHERE session_id {values}"
)
RECALL_DISABLE_SESSIONS = "DELETE FROM recall_sessions WHERE session_id {values}"
"""Turn recall off (before the rows go: their deletes then queue nothing)."""
RECALL_FORGET_SESSIONS = (
    "DELETE FROM recall_outbox WHERE session_id {values}",
    "DELETE FROM recall_vectors WHERE session_id {values}",
    RECALL_DISABLE_SESSIONS,
)
OVERLAY_ENDS = "SELECT id, from_message_id, to_message_id FROM session_compactions WHERE session_id = :s"
REMOVE_OVERLAY = "DELETE FROM session_compactions WHERE session_id = :s AND id = :id"
MESSAGE_PAYLOADS = """
    SELECT link.digest FROM message_blobs link JOIN session_messages m ON m.seq = link.message_seq
    WHERE m.session_id = :s AND m.id = :id
"""
PAYLOAD_KEPT = "SELECT 1 FROM blobs WHERE digest = :d"
COUNT_MESSAGE_VECTORS = "SELECT count(*) FROM recall_vectors WHERE session_id = :s AND kind = 'message' AND ref = :id"
FORGET_MESSAGE_VECTORS = (
    "DELETE FROM recall_vectors WHERE session_id = :s AND kind = 'message' AND ref = :id",
    "DELETE FROM recall_outbox WHERE session_id = :s AND kind = 'message' AND ref = :id",
)
"""A removed message's vector records and queued changes (the caller deleted its vectors from
the index already)."""
_BLOCK = "session_id = :s AND label = :label"
_BLOCK_VECTORS = (
    "session_id = :s AND kind = 'entry' AND substr(ref, 1, length(CAST(:ref AS TEXT))) = CAST(:ref AS TEXT)"
    " AND (:whole OR ref = CAST(:ref AS TEXT))"
)
"""The vectors of a block's entries (``:ref``: ``label`` and the separator, ``:whole`` true) or
of one entry (``:ref`` its whole ref, ``:whole`` false): compared as text, so that no character
of a label is a pattern."""
COUNT_BLOCK_ROWS = f"""
    SELECT
        (SELECT count(*) FROM (
            SELECT 1 FROM context_block_versions WHERE {_BLOCK} AND key = '' AND :whole LIMIT 1
        ) AS b),
        (SELECT count(*) FROM context_block_versions WHERE {_BLOCK} AND (:whole OR key = :key)),
        (SELECT count(*) FROM search_entries WHERE {_BLOCK} AND (:whole OR key = :key)),
        (SELECT count(*) FROM cached_prompts WHERE session_id = :s),
        (SELECT count(*) FROM recall_vectors WHERE {_BLOCK_VECTORS})
"""
REMOVE_BLOCK = (
    f"DELETE FROM context_block_versions WHERE {_BLOCK} AND (:whole OR key = :key)",
    f"DELETE FROM search_entries WHERE {_BLOCK} AND (:whole OR key = :key)",
    "DELETE FROM cached_prompts WHERE session_id = :s",
)
FORGET_BLOCK_VECTORS = (
    f"DELETE FROM recall_vectors WHERE {_BLOCK_VECTORS}",
    f"DELETE FROM recall_outbox WHERE {_BLOCK_VECTORS}",
)
REMOVE_SESSIONS = (
    "DELETE FROM sessions WHERE storage_id {values}",
    *(f"DELETE FROM {table} WHERE session_id {{values}}" for table in SESSION_TABLES),
)
"""Remove the sessions ``{values}`` (their payloads go with their messages' links, by trigger)."""


_NEVER = 2**62
"""A time after every activity (microseconds)."""


# -- LangGraph-style items (``ItemStore``) -----------------------------------------------------

ITEM_COMPARISONS = {"$eq": "=", "$ne": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}
"""The SQL operator of each filter operator (``$ne`` is the negation of ``=``)."""
ITEM_COLUMNS = "prefix, key, {value_text}, created_at, updated_at, version"
ITEM_LIVE = "(expires_at IS NULL OR expires_at > :now)"
ITEM_ROW_COLUMNS = ("prefix", "key", "value", "expires_at", "ttl_minutes", "terms")
"""The columns of the relation of items to write that ``{item_rows}`` stands for."""
PUT_ITEMS = """
    INSERT INTO store_items (namespace, prefix, key, value, version, created_at, updated_at, expires_at,
        ttl_minutes, {waiting_text})
    SELECT :ns, r.prefix, r.key, r.value{as_json},
        coalesce((SELECT max(v.version) FROM store_item_versions v
            WHERE v.namespace = :ns AND v.prefix = r.prefix AND v.key = r.key), 0) + 1,
        :now, :now, r.expires_at, r.ttl_minutes, {waiting_value}
    FROM {item_rows} WHERE true
    ON CONFLICT (namespace, prefix, key) DO UPDATE SET value = excluded.value, version = store_items.version + 1,
        created_at = CASE WHEN store_items.expires_at <= excluded.created_at THEN excluded.created_at
            ELSE store_items.created_at END,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at, ttl_minutes = excluded.ttl_minutes,
        {waiting_text} = excluded.{waiting_text}{terms_emptied}
"""
"""Upsert the rows of ``{item_rows}`` (distinct keys, in key order): the version after the
item's last (of the locked row when it exists, so that concurrent writers number their versions
in turn). The text to index (``r.terms``) waits in ``{waiting_text}``, analysed by the next keyword
search (each dialect's ``_index_waiting_items``); ``{terms_emptied}`` clears a changed item's
terms where they are a column of their own. One statement text for any number of rows on
PostgreSQL: prepared and planned once."""
ITEM_KEY = "namespace = :ns AND prefix = :p AND key = :k"
CLEAR_ITEM_VECTORS = f"DELETE FROM store_item_vectors WHERE {ITEM_KEY}"
DELETE_ITEM = f"DELETE FROM store_items WHERE {ITEM_KEY} RETURNING version"
"""Delete an item: its row first, so that every writer of a key locks the item before its
versions and vectors (a deleter that wrote its deletion's version first waited for a putter's
row lock while the putter waited for that version: a deadlock)."""
ITEM_DELETED = """
    INSERT INTO store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (:ns, :p, :k, :version, NULL, :now)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at
"""
"""An item's deletion, kept as the version after its last, without a value."""
PUT_ITEM_VECTOR = (
    "INSERT INTO store_item_vectors (namespace, prefix, key, field, vector) VALUES (:ns, :p, :k, :f, :vector)"
)
GET_ITEMS = (
    f"SELECT {ITEM_COLUMNS} FROM store_items WHERE namespace = :ns AND prefix = :p AND key IN ({{keys}})"
    f" AND {ITEM_LIVE}"
)
_GET_ITEM = GET_ITEMS.replace("{keys}", ":k0")


@cache
def for_keys(sql: str, keys: str) -> str:
    """``sql`` with ``keys`` as its ``{keys}``: the same string for the same keys, whose compiled
    form is then found by a hash already computed (at most ``max_list`` lists a statement)."""
    return sql.replace("{keys}", keys)


# A refresh writes only an expiry that moves by at least a hundredth of the TTL (at most a
# second): an item read again within that keeps its expiry and costs no write.
_REFRESHABLE = f"""namespace = :ns AND prefix = :p AND key IN ({{keys}}) AND ttl_minutes IS NOT NULL AND {ITEM_LIVE}
    AND (expires_at IS NULL OR expires_at <= :now + CAST(ttl_minutes * 60000000 AS {{bigint}})
        - CASE WHEN ttl_minutes < 1e6 / 600000 THEN CAST(ttl_minutes * 600000 AS {{bigint}}) ELSE 1000000 END)"""
_REFRESH = "UPDATE store_items SET expires_at = :now + CAST(ttl_minutes * 60000000 AS {bigint}) WHERE "
REFRESH_ITEM = _REFRESH + _REFRESHABLE
REFRESH_ITEMS = f"{_REFRESH}seq IN (SELECT seq FROM store_items WHERE {_REFRESHABLE} ORDER BY key {{for_update}})"
"""Refresh several items, locking their rows in key order as a put does: updated where a scan
found them (a small table's sequential scan: in the rows' physical order, which each write
changes), concurrent refreshes of the same items locked them in different orders and deadlocked
(PostgreSQL rolled one back after a second). One item's refresh is ``REFRESH_ITEM``, without the
ordered subquery."""
REFRESH_AND_GET_ITEM = f"WITH refreshed AS ({REFRESH_ITEM} RETURNING 1) {GET_ITEMS}"
REFRESH_AND_GET_ITEMS = f"WITH refreshed AS ({REFRESH_ITEMS} RETURNING 1) {GET_ITEMS}"
"""``GET_ITEMS`` after ``REFRESH_ITEMS``, one statement where a ``WITH`` may write (PostgreSQL): the
rows are read as they were before the refresh, which moves only ``expires_at``, not read."""


def refresh_sql(keys: str, *, and_get: bool = False) -> str:
    """The refresh of a ``{keys}`` list of one key (``REFRESH_ITEM``) or several
    (``REFRESH_ITEMS``); ``and_get``: with ``GET_ITEMS`` in the same statement."""
    if "," in keys:
        return REFRESH_AND_GET_ITEMS if and_get else REFRESH_ITEMS
    return REFRESH_AND_GET_ITEM if and_get else REFRESH_ITEM


LIST_ITEMS = (
    f"SELECT {ITEM_COLUMNS} FROM store_items WHERE {{under}} AND {ITEM_LIVE}{{conditions}}"
    " ORDER BY updated_at DESC, seq DESC LIMIT :limit OFFSET :offset"
)
RANKED_ITEMS = f"SELECT seq, expires_at, {ITEM_COLUMNS} FROM store_items WHERE seq {{values}}"
ITEM_VECTORS = (
    "SELECT v.prefix, v.key, v.vector FROM store_item_vectors v"
    " JOIN store_items i ON i.namespace = v.namespace AND i.prefix = v.prefix AND i.key = v.key"
    f" WHERE {{under}} AND {ITEM_LIVE}{{conditions}}"
)
ITEM_PREFIXES = f"SELECT DISTINCT prefix FROM store_items WHERE {{under}} AND {ITEM_LIVE} ORDER BY prefix"
ITEM_VERSIONS = (
    "SELECT version, {value_text}, created_at FROM {item_versions} WHERE namespace = :ns AND prefix = :p"
    " AND key = :k"
    " ORDER BY version DESC"
)
SWEEP_ITEMS = (
    "DELETE FROM store_items WHERE seq IN (SELECT seq FROM store_items WHERE namespace = :ns AND expires_at <= :now"
    " ORDER BY prefix, key {for_update}) RETURNING prefix, key"
)
"""Remove the expired items (their rows first, as ``DELETE_ITEM``, locked in key order as a put
locks them: in the order a scan found them, a sweep deadlocked with batches putting the same
keys), then each one's versions (``CLEAR_ITEM_VERSIONS``) and vectors."""
CLEAR_ITEM_VERSIONS = f"DELETE FROM store_item_versions WHERE {ITEM_KEY}"
REMOVE_NAMESPACE_ITEMS = (
    "DELETE FROM store_items WHERE seq IN (SELECT seq FROM store_items WHERE namespace = :ns"
    " ORDER BY prefix, key {for_update})",
    "DELETE FROM store_item_versions WHERE namespace = :ns",
    "DELETE FROM store_item_vectors WHERE namespace = :ns",
)
"""Every item of a namespace, its rows first (as every writer locks them), then the versions
and vectors."""
REMOVE_ITEM = tuple(
    f"DELETE FROM {table} WHERE {ITEM_KEY}" for table in ("store_items", "store_item_versions", "store_item_vectors")
)
"""One item: its row first (as every writer locks it; its deletion is archived as a version),
then its versions and vectors."""
COUNT_ITEMS = "SELECT count(*) FROM store_items WHERE {under} AND length(search_terms) > 0"


def _item_key(write: ItemWrite) -> tuple[str, str]:
    return (write.prefix, write.key)


def item_under(namespace: str, under: str, table: str = "") -> tuple[str, dict[str, Any]]:
    """The condition that an item (of ``table``, an alias, or unqualified) is in ``namespace``
    and its prefix is ``under`` or below it (``""``: any), and its parameters: a range of the
    byte-ordered column after the namespace in its index (``'/'`` follows ``'.'``), less the
    prefixes that extend ``under``'s last label."""
    column = f"{table}.prefix" if table else "prefix"
    where = f"{table}.namespace = :ns" if table else "namespace = :ns"
    if not under:
        return where, {"ns": namespace}
    return (
        f"{where} AND {column} >= :under AND {column} < :under_high AND ({column} = :under OR {column} >= :under_low)",
        {"ns": namespace, "under": under, "under_low": under + ".", "under_high": under + "/"},
    )


def item_scope_token(namespace: str, under: str) -> str:
    """The keyword-index token of the items in ``namespace`` whose prefix is ``under`` or below
    it (``""``: every item of the namespace): ``z`` and the first 16 hex digits of the SHA-256 of
    ``namespace``, U+001F and ``under``, letters and digits as FTS5's ``ascii`` tokenizer keeps
    them. A search still checks the namespace and prefix of what it matches (two scopes may
    share a token)."""
    return "z" + hashlib.sha256(f"{namespace}\x1f{under}".encode()).hexdigest()[:16]


def item_scope_tokens(namespace: str, prefix: str) -> str:
    """The scope tokens of an item of ``namespace`` under ``prefix`` (labels joined by
    ``'.'``): one for its namespace and one for each prefix its own starts with, itself
    included, so that a search under any of them finds it (:func:`item_scope_token`)."""
    labels = prefix.split(".") if prefix else []
    scopes = ["", *(".".join(labels[:n]) for n in range(1, len(labels) + 1))]
    return " ".join(item_scope_token(namespace, scope) for scope in scopes)


def _session_ids(where: str = "") -> str:
    """Every session id holding rows, as a ``UNION`` (``where`` is formatted with ``column``)."""
    return " UNION ".join(
        f"SELECT {column} FROM {table}" + where.format(column=column) for table, column in SUMMARY_SOURCES
    )


_first = itemgetter(0)
_after_first = itemgetter(slice(1, None))
_stored_content = partial(tuple.__new__, StoredContent)


def _contents(rows: list[Any]) -> dict[int, StoredContent]:
    """``(seq, created_at, content)`` rows as ``{seq: StoredContent}``, built in C (a read of
    10,000 messages builds 10,000)."""
    return dict(zip(map(_first, rows), map(_stored_content, map(_after_first, rows))))


def _latest_contents(rows: list[Any]) -> dict[int, StoredContent] | None:
    """``SHORT_LATEST_PATH_CONTENTS``'s rows as :func:`_contents`; ``None`` for its marker of a long path."""
    return None if rows and rows[-1][0] == -1 else _contents(rows)


def _overlay(row: Any) -> OverlayRow:
    """A ``GET_OVERLAYS`` row."""
    return OverlayRow(CompactionRow(*row[:5]), row[5], row[6])


def _byte_key(key: tuple[str, str, str]) -> tuple[bytes, ...]:
    """A checkpoint's key as the database orders it (by UTF-8 bytes)."""
    return tuple(part.encode("utf-8") for part in key)


class SqlStore(RecallStore, InspectableStore):
    """Every ``Store`` method written once over SQL; subclasses are the dialects.

    A dialect implements the hooks below and the search methods; it may override a method where
    its backend does the job better (SQLite's set-based batch insert).
    """

    max_list: int = 500
    """Values bound at most in one list (``{values}``); longer lists are read in chunks."""

    def __init__(self) -> None:
        self._compiled: dict[str, str] = {}
        c = self.compile
        self._insert_under_latest = c(INSERT_UNDER_LATEST)
        self._insert_under_parent = c(INSERT_UNDER_PARENT)
        self._link_blob = [c(sql) for sql in LINK_BLOB]
        self._put_checkpoint, self._bind_checkpoint = self._by_position(PUT_CHECKPOINT, CHECKPOINT_PARAMS)
        self._get_latest_checkpoint = c(GET_LATEST_CHECKPOINT)
        self._get_checkpoint_at = c(GET_CHECKPOINT_AT)
        self._ancestors_sql: dict[int, str] = {}
        self._writes_sql: dict[tuple[int, bool], tuple[str, Callable[[tuple[Any, ...]], Any]]] = {}

    # -- the dialect's hooks ---------------------------------------------------------------

    @abstractmethod
    def _translate(self, sql: str) -> str:
        """``sql`` in the backend's own syntax: placeholders, qualified tables, fragments."""

    @abstractmethod
    def _read(self, work: Callable[[Any], T], *, walk: bool = False) -> T:
        """``work(connection)`` for reads. ``walk``: it walks the tree (plan it as index lookups)."""

    @abstractmethod
    def _write(
        self,
        work: Callable[[Any], T],
        *,
        lock: str | None = None,
        walk: bool = False,
        idempotent: bool = True,
        one_statement: bool = False,
    ) -> T:
        """``work(connection)`` in one transaction. ``lock``: serialise it with the other writers
        of that session. ``idempotent``: it may be retried after a dropped connection.
        ``one_statement``: ``work`` runs a single statement (atomic without a transaction); with
        ``lock``, it fetches that statement's rows rather than reading its row count (a dialect
        may send it with the lock and know the count only when the transaction ends)."""

    @abstractmethod
    def _list(self, values: Sequence[Any], uses: int = 1) -> tuple[str, Any]:
        """What replaces ``{values}`` (``IN (...)`` or ``= ANY(...)``), and the parameters of a
        statement that binds the list ``uses`` times and nothing else."""

    @abstractmethod
    def _rows(self, values: Sequence[Any]) -> tuple[str, Any]:
        """What replaces ``{rows}``: ``values`` as a relation of one column, ``column1``, and
        the parameters that bind them (and nothing else)."""

    def _by_position(self, sql: str, names: tuple[str, ...]) -> tuple[str, Callable[[tuple[Any, ...]], Any]]:
        """``sql`` compiled, and what turns the values of its parameters ``names`` (a tuple in
        that order, each name once) into the parameters it is run with. By default, by name."""
        return self.compile(sql), lambda values: dict(zip(names, values))

    @abstractmethod
    def _put_items(self, namespace: str, rows: Sequence[tuple[Any, ...]], now_us: int) -> tuple[str, Any]:
        """``PUT_ITEMS`` compiled for ``rows`` (values of ``ITEM_ROW_COLUMNS``) as its
        ``{item_rows}``, and the parameters that bind it (``:ns`` and ``:now`` included)."""

    @abstractmethod
    def _schema_version(self, conn: Any) -> int:
        """The number of migrations applied."""

    @abstractmethod
    def _size_bytes(self, conn: Any) -> int | None:
        """The database's size as the backend reports it."""

    @abstractmethod
    def _execute_many(self, conn: Any, sql: str, params: Sequence[Any]) -> None:
        """Run compiled ``sql`` once for each parameter set, in one call to the driver."""

    @abstractmethod
    def _bind_first(self, value: Any, params: Any) -> Any:
        """``params`` of a ``{values}`` list with ``value`` bound to ``{first}`` before it."""

    def _lock_session(self, conn: Any, session_id: str) -> None:
        """Serialise the current transaction's writes to ``session_id`` (no-op by default)."""

    def _single(self, work: Callable[[Any], T], *, write: bool) -> T:
        """``work(connection)`` running ONE idempotent statement, atomic on its own: the
        checkpoints' hot path. A dialect may run it without a transaction around it (by
        default it is a read, or a write with ``one_statement``)."""
        return self._write(work, one_statement=True) if write else self._read(work)

    @abstractmethod
    def _metadata_where(self, items: Sequence[tuple[str, Any]]) -> tuple[str, dict[str, Any]]:
        """The condition (and its named parameters) that a checkpoint's ``metadata`` holds every
        ``(key, value)`` of ``items`` (``CheckpointQuery.metadata``)."""

    @abstractmethod
    def _item_condition(self, condition: ItemCondition, n: int) -> tuple[str, dict[str, Any]]:
        """The SQL that an item's ``value`` meets ``condition`` (never NULL), and its named
        parameters (suffixed ``n``)."""

    @staticmethod
    @abstractmethod
    def _terms(text: str) -> Any:
        """The ``:terms`` parameter for ``text``: its :func:`sessions_core.fts.index_terms` in the
        form the search column stores."""

    # -- plumbing --------------------------------------------------------------------------

    def compile(self, sql: str) -> str:
        """``sql`` translated for this backend (cached)."""
        compiled = self._compiled.get(sql)
        if compiled is None:
            compiled = self._compiled[sql] = self._translate(sql)
        return compiled

    def _consume(self, sql: str, params: Any, consume: Callable[[Any], T], *, walk: bool = False) -> T:
        """What ``consume(cursor)`` makes of ONE read statement's rows, atomic on its own: a
        dialect may run it without a transaction around it (on PostgreSQL one round trip).
        ``walk``: it walks the tree (plan it as index lookups)."""
        sql = self.compile(sql)
        return self._read(lambda conn: consume(conn.execute(sql, params)), walk=walk)

    def _one(self, sql: str, params: Any, *, walk: bool = False) -> Any:
        """The first row of ONE read statement (``None``: none), as :meth:`_consume`."""
        return self._consume(sql, params, _first_row, walk=walk)

    def _all(self, sql: str, params: Any, *, walk: bool = False) -> list[Any]:
        """The rows of ONE read statement, as :meth:`_consume`."""
        return self._consume(sql, params, _all_rows, walk=walk)

    def _all_together(self, reads: Sequence[tuple[str, Any]], *, walk: bool = False) -> list[list[Any]]:
        """The rows of several read statements, each atomic on its own (not together), sent at
        once where the dialect can (on PostgreSQL one pipeline: one round trip)."""
        compiled = [(self.compile(sql), params) for sql, params in reads]
        return self._read(lambda conn: [conn.execute(sql, params).fetchall() for sql, params in compiled], walk=walk)

    def _locked_rows(self, sql: str, params: Any, consume: Callable[[Any], T], *, lock: str, walk: bool = False) -> T:
        """Run ONE compiled write statement under ``lock`` (``_write``'s) and ``consume`` its
        cursor: its rows, never its row count (a dialect may read them only after the commit)."""
        return self._write(lambda conn: consume(conn.execute(sql, params)), lock=lock, walk=walk, one_statement=True)

    def _execute(self, sql: str, params: Any, *, idempotent: bool = True) -> int:
        """Run one write statement; the number of rows it changed."""
        sql = self.compile(sql)
        return self._write(lambda conn: conn.execute(sql, params).rowcount, idempotent=idempotent, one_statement=True)

    def _select_in(self, template: str, values: Sequence[Any]) -> list[Any]:
        """Rows of ``template`` (each ``{values}`` in it bound to ``values``), in chunks."""
        rows: list[Any] = []
        uses = template.count("{values}")
        for start in range(0, len(values), self.max_list):
            fragment, params = self._list(values[start : start + self.max_list], uses)
            rows += self._all(template.replace("{values}", fragment), params)
        return rows

    def _link_blobs(self, conn: Any, seq: int, record: MessageRecord) -> None:
        add_blob, add_link = self._link_blob
        for blob in record.blobs:
            conn.execute(add_blob, {"digest": blob.digest, "size": len(blob.data), "data": blob.data})
            conn.execute(add_link, {"seq": seq, "digest": blob.digest})

    def _shift_subtree(
        self, conn: Any, session_id: str, root_id: str, depth: int, tokens: int, size: int, *, below: bool = False
    ) -> None:
        """Shift the positions of ``root_id`` and its descendants (``below``: its descendants only)."""
        params = {"s": session_id, "root": root_id, "depth": depth, "tokens": tokens, "bytes": size}
        conn.execute(self.compile(SHIFT_DESCENDANTS if below else SHIFT_SUBTREE), params)

    # -- search: exact matches first, prefix-only matches after them ------------------------

    @abstractmethod
    def _match_messages(self, units: tuple[Unit, ...], session_ids: Sequence[str] | None, limit: int) -> list[Any]:
        """The best ``limit`` messages matching every unit (of ``session_ids``, or all), as
        ``SearchRow`` values, best first."""

    @abstractmethod
    def _match_sessions(self, units: tuple[Unit, ...], namespace: str, limit: int) -> list[Any]:
        """The same over the registered sessions of ``namespace`` (``SearchRow`` values)."""

    @abstractmethod
    def _match_entries(self, units: tuple[Unit, ...], session_id: str, label: str, limit: int) -> list[Any]:
        """The best ``limit`` ``(key, content)`` search entries of a block matching every unit."""

    def search_messages(
        self, session_ids: Sequence[str] | None, query: str, limit: int, match: str = "any"
    ) -> list[SearchRow]:
        check_match(match)
        if session_ids is not None and not session_ids:
            return []
        if match == "any":
            scope = SearchScope("session_messages", session_ids=tuple(dict.fromkeys(session_ids or ())) or None)
            return self._ranked(scope, query, limit, RANKED_MESSAGES, SearchRow._make)
        return _exact_first(
            query,
            limit,
            lambda units: self._match_messages(units, session_ids, limit),
            key=lambda row: (row[0], row[1]),
        )

    def search_sessions(self, namespace: str, query: str, limit: int, match: str = "any") -> list[SearchRow]:
        check_match(match)
        if match == "any":
            return self._ranked(
                SearchScope("session_messages", namespace=namespace), query, limit, RANKED_REGISTERED, SearchRow._make
            )
        return _exact_first(
            query, limit, lambda units: self._match_sessions(units, namespace, limit), key=lambda row: (row[0], row[1])
        )

    def search_entries(
        self, session_id: str, label: str, query: str, limit: int, match: str = "any"
    ) -> list[tuple[str, str]]:
        check_match(match)
        if match == "any":
            scope = SearchScope("search_entries", entries_of=(session_id, label))
            return self._ranked(scope, query, limit, RANKED_ENTRIES, tuple)
        return _exact_first(
            query, limit, lambda units: self._match_entries(units, session_id, label, limit), key=lambda row: row[0]
        )

    # -- ranked search (match="any"): the store reads postings and terms, ranking.py ranks --

    @abstractmethod
    def _postings(
        self, scope: SearchScope, words: Sequence[tuple[Alternative, ...]], n: int, estimate: bool
    ) -> list[list[int]]:
        """For each word (its alternatives), the ``seq`` of at most ``n`` rows of ``scope``
        matching any of them, newest (highest ``seq``) first; with ``estimate``, a dialect may
        answer ``ranking.Estimated`` for a word it knows to match more (see ``ranking.Postings``)."""

    def _indexed_total(self, scope: SearchScope) -> int:
        """What rarity is measured against: the block's entries for an entry search, else about
        how many messages of the store hold search terms."""
        if scope.entries_of is not None:
            return self.count_search_entries(*scope.entries_of)
        if scope.items_under is not None:
            return self._indexed_items(*scope.items_under)
        return self._indexed_messages()

    @abstractmethod
    def _indexed_messages(self) -> int:
        """About how many messages of the store hold search terms: exact while they are few."""

    @staticmethod
    @abstractmethod
    def _split_terms(stored: str, /) -> list[str]:
        """The terms of a ``search_terms`` value read as text (``{terms_text}``), in order."""

    def _ranked(
        self, scope: SearchScope, query: str, limit: int, rows_sql: str, make: Callable[[Any], Any]
    ) -> list[Any]:
        """``make(row)`` of the rows of ``rows_sql`` (its first column the ``seq``, dropped) of the
        best ``limit`` matches of ``query`` in ``scope``, best first (``ranking.rank``)."""
        units = meaningful_units(query)
        if not units or limit <= 0:
            return []

        terms = partial(self._terms_of, scope.table)
        if scope.analysed:
            terms = partial(self._terms_with, terms, dict(scope.analysed))
        seqs = rank(units, limit, partial(self._postings, scope), terms, self._indexed_total(scope))
        if not seqs:
            return []
        found = {row[0]: make(row[1:]) for row in self._select_in(rows_sql, seqs)}
        return [found[seq] for seq in seqs if seq in found]

    def _terms_of(self, table: str, seqs: Sequence[int]) -> dict[int, list[str]]:
        """The indexed terms of the rows ``seqs`` of ``table``, each in order, by ``seq``."""
        rows = self._select_in(TERMS_OF[table], list(seqs))
        return {seq: self._split_terms(stored or "") for seq, stored in rows}

    def _terms_with(
        self, terms_of: Callable[[Sequence[int]], dict[int, list[str]]], analysed: dict[int, str], seqs: Sequence[int]
    ) -> dict[int, list[str]]:
        """The terms of the rows ``seqs``: those in ``analysed`` from there, the others ``terms_of``."""
        found = terms_of([seq for seq in seqs if seq not in analysed])
        found.update({seq: self._split_terms(analysed[seq]) for seq in seqs if seq in analysed})
        return found

    # -- the search backfill (after a migration) -------------------------------------------

    backfill_batch: int = 2_000
    """Rows analysed per transaction when a migration leaves search terms to compute."""

    def _backfill_search_terms(self, progress: Callable[[int, int], None] | None = None) -> int:
        """Compute the search terms of the rows a migration left without them, in batches of
        ``backfill_batch`` (a transaction each, so that an interrupted backfill resumes where it
        stopped); ``progress(done, total)`` after each. The number of rows analysed."""
        pending = self._all(BACKFILL_PENDING, {})
        if not pending:
            return 0
        total = sum(
            self._one(BACKFILL_COUNT[source], {"start": start, "end": end})[0] for source, start, end in pending
        )
        done = 0
        if progress is not None:
            progress(done, total)
        for source, _start, _end in pending:
            while True:
                count = self._write(lambda conn, source=source: self._backfill_batch(conn, source))
                if count is None:
                    break
                done += count
                if progress is not None:
                    progress(min(done, total), total)
        return done

    def _backfill_batch(self, conn: Any, source: str) -> int | None:
        """One batch of ``source``'s backfill; ``None`` once it is complete."""
        claim = conn.execute(self.compile(BACKFILL_CLAIM), {"source": source}).fetchone()
        if claim is None:
            return None
        start, end = claim
        rows = conn.execute(
            self.compile(BACKFILL_ROWS[source]), {"start": start, "end": end, "n": self.backfill_batch}
        ).fetchall()
        if not rows:
            conn.execute(self.compile(BACKFILL_DONE), {"source": source})
            return 0
        terms = self._terms
        self._execute_many(
            conn, self.compile(BACKFILL_SET[source]), [{"seq": seq, "terms": terms(text)} for seq, text in rows]
        )
        conn.execute(self.compile(BACKFILL_ADVANCE), {"source": source, "next": rows[-1][0] + 1})
        return len(rows)

    # -- message writes --------------------------------------------------------------------

    def insert_message(
        self, session_id: str, record: MessageRecord, parent_id: str | None | _Latest
    ) -> Inserted | None:
        if len(record.content) > LARGE_ROW:
            # Each dialect's batch insert writes a large message without copying it (and on
            # SQLite, INSERT ... SELECT from the same table would first copy the row).
            return self.insert_messages(session_id, [record], parent_id)[0]
        params = record.insert_params(session_id)
        params["terms"] = self._terms(record.text)
        if parent_id is LATEST:
            sql = self._insert_under_latest
        else:
            sql = self._insert_under_parent
            params["parent"] = parent_id

        def work(conn: Any) -> Any:
            row = conn.execute(sql, params).fetchone()
            if row is not None:
                self._link_blobs(conn, row[4], record)
            return row

        if record.blobs:
            row = self._write(work, lock=session_id, walk=True)
        else:
            row = self._locked_rows(sql, params, _first_row, lock=session_id, walk=True)
        return None if row is None else Inserted(row[0], PathTotals(row[1], row[2], row[3]))

    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        def work(conn: Any) -> bool:
            old = conn.execute(self.compile(MESSAGE_SIZE), {"s": session_id, "id": record.id}).fetchone()
            if old is None:
                return False
            old_tokens, old_size, seq = old
            conn.execute(self.compile(UNLINK_BLOBS), {"seq": seq})
            self._link_blobs(conn, seq, record)
            size = record.size
            shift_tokens, shift_bytes = record.tokens - old_tokens, size - old_size
            params = {
                "role": record.role,
                "tokens": record.tokens,
                "bytes": size,
                "text": record.text,
                "terms": self._terms(record.text),
                "content": record.content,
                "s": session_id,
                "id": record.id,
                "shift_tokens": shift_tokens,
                "shift_bytes": shift_bytes,
            }
            self._update_row(conn, seq, record, params)  # its own path totals shifted in the same write
            if (shift_tokens, shift_bytes) != (0, 0):
                self._shift_subtree(conn, session_id, record.id, 0, shift_tokens, shift_bytes, below=True)
            return True

        return self._write(work, lock=session_id)

    def _update_row(self, conn: Any, seq: int, record: MessageRecord, params: dict[str, Any]) -> None:
        """Rewrite the row ``seq`` of an update (``UPDATE_MESSAGE`` with ``params``); a dialect
        writes a large message its own way."""
        conn.execute(self.compile(UPDATE_MESSAGE), params)

    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        wanted = list(dict.fromkeys(ids))
        return self._write(lambda conn: self._delete_messages(conn, session_id, wanted), lock=session_id, walk=True)

    def _delete_messages(self, conn: Any, session_id: str, ids: Sequence[str]) -> list[str]:
        """Delete these messages of a session (their children become roots); those deleted."""
        deleted = []
        for message_id in ids:
            params = {"s": session_id, "id": message_id}
            row = conn.execute(self.compile(DELETE_MESSAGE), params).fetchone()
            if row is None:
                continue
            for (child,) in conn.execute(self.compile(ORPHAN_CHILDREN), params).fetchall():
                self._shift_subtree(conn, session_id, child, -row[0], -row[1], -row[2])
            deleted.append(message_id)
        if deleted:  # ancestry and depths changed: the overlays' ends are checked again
            conn.execute(self.compile(UNANCHOR_COMPACTIONS), {"s": session_id})
            self._anchor_overlays(conn, session_id)
        return deleted

    def clear_session(self, session_id: str) -> None:
        def work(conn: Any) -> None:
            conn.execute(self.compile(CLEAR_MESSAGES), {"s": session_id})
            conn.execute(self.compile(CLEAR_COMPACTIONS), {"s": session_id})

        self._write(work, lock=session_id)

    # -- message reads ---------------------------------------------------------------------

    def get_message(self, session_id: str, message_id: str) -> MessageRow | None:
        row = self._one(GET_MESSAGE, {"s": session_id, "id": message_id})
        return None if row is None else MessageRow(*row)

    def latest_leaf(self, session_id: str) -> MessageRow | None:
        row = self._one(GET_LATEST_LEAF, {"s": session_id}, walk=True)
        return None if row is None else MessageRow(*row)

    def latest_leaf_id(self, session_id: str) -> str | None:
        row = self._one(LATEST_LEAF, {"s": session_id}, walk=True)
        return None if row is None else row[0]

    def children(self, session_id: str, message_id: str) -> list[MessageRow]:
        return [MessageRow(*row) for row in self._all(CHILDREN, {"s": session_id, "id": message_id})]

    def path(self, session_id: str, leaf_id: str) -> list[PathEntry]:
        return [PathEntry(*row) for row in self._all(PATH, {"s": session_id, "leaf": leaf_id}, walk=True)]

    def path_ids(self, session_id: str, leaf_id: str) -> tuple[array, list[str]]:
        def consume(cursor: Any) -> tuple[array, list[str]]:
            seqs: array = array("q")
            ids: list[str] = []
            while rows := cursor.fetchmany(5_000):  # Python rows a batch at a time
                for seq, message_id in rows:
                    seqs.append(seq)
                    ids.append(message_id)
            return seqs, ids

        return self._consume(PATH_IDS, {"s": session_id, "leaf": leaf_id}, consume, walk=True)

    def span_ids(self, session_id: str, from_id: str, to_id: str) -> list[str]:
        ids = [row[0] for row in self._all(SPAN_IDS, {"s": session_id, "from": from_id, "to": to_id}, walk=True)]
        return ids if ids and ids[-1] == from_id else []

    def path_tail(self, session_id: str, leaf_id: str, max_bytes: int, min_rows: int) -> list[PathEntry]:
        params = {"s": session_id, "leaf": leaf_id, "max_bytes": max_bytes, "min_rows": min_rows}
        return [PathEntry(*row) for row in self._all(PATH_TAIL, params, walk=True)]

    def path_totals(self, session_id: str, leaf_id: str) -> PathTotals | None:
        row = self._one(LEAF_TOTALS, {"s": session_id, "id": leaf_id})
        return None if row is None else PathTotals(*row[1:])

    def latest_leaf_totals(self, session_id: str) -> tuple[str, PathTotals] | None:
        row = self._one(LATEST_LEAF_TOTALS, {"s": session_id}, walk=True)
        return None if row is None else (row[0], PathTotals(*row[1:]))

    def overlays_and_totals(
        self, session_id: str, leaf_id: str | None
    ) -> tuple[list[OverlayRow], tuple[str, PathTotals] | None]:
        if leaf_id is None:
            leaf = (LATEST_LEAF_TOTALS, {"s": session_id})
        else:
            leaf = (LEAF_TOTALS, {"s": session_id, "id": leaf_id})
        overlay_rows, leaf_rows = self._all_together([(GET_OVERLAYS, {"s": session_id}), leaf], walk=True)
        totals = (leaf_rows[0][0], PathTotals(*leaf_rows[0][1:])) if leaf_rows else None
        return [_overlay(row) for row in overlay_rows], totals

    def fetch_contents(self, seqs: Sequence[int]) -> dict[int, StoredContent]:
        if not seqs:
            return {}
        fragment, params = self._list(seqs)
        return _contents(self._all(FETCH_CONTENTS.replace("{values}", fragment), params))

    def short_path_contents(self, session_id: str, leaf_id: str, limit: int) -> dict[int, StoredContent] | None:
        rows = self._all(SHORT_PATH_CONTENTS, {"s": session_id, "leaf": leaf_id, "limit": limit}, walk=True)
        return _contents(rows) if rows else None  # no rows: longer, or no such leaf

    def short_latest_path_contents(self, session_id: str, limit: int) -> dict[int, StoredContent] | None:
        rows = self._all(SHORT_LATEST_PATH_CONTENTS, {"s": session_id, "limit": limit}, walk=True)
        return _latest_contents(rows)

    def overlays_and_short_path(
        self, session_id: str, leaf_id: str | None, limit: int
    ) -> tuple[list[OverlayRow], dict[int, StoredContent] | None]:
        if leaf_id is None:
            path = (SHORT_LATEST_PATH_CONTENTS, {"s": session_id, "limit": limit})
        else:
            path = (SHORT_PATH_CONTENTS, {"s": session_id, "leaf": leaf_id, "limit": limit})
        overlay_rows, path_rows = self._all_together([(GET_OVERLAYS, {"s": session_id}), path], walk=True)
        if overlay_rows:
            return [_overlay(row) for row in overlay_rows], None
        if leaf_id is None:
            return [], _latest_contents(path_rows)
        return [], _contents(path_rows) if path_rows else None

    def stored_message_ids(self, session_id: str, ids: Sequence[str]) -> set[str]:
        return {row[0] for row in self._select_first(STORED_IDS, session_id, list(dict.fromkeys(ids)))}

    def get_blobs(self, digests: Sequence[str]) -> dict[str, bytes]:
        if not digests:
            return {}
        return {digest: bytes(data) for digest, data in self._select_in(GET_BLOBS, list(digests))}

    # -- compactions -----------------------------------------------------------------------

    @staticmethod
    def _compaction_params(session_id: str, row: CompactionRow) -> dict[str, Any]:
        return {
            "s": session_id,
            "id": row.id,
            "summary": row.summary,
            "from_message_id": row.from_message_id,
            "to_message_id": row.to_message_id,
            "created_at": row.created_at_us,
        }

    def add_compaction(self, session_id: str, row: CompactionRow) -> None:
        def work(conn: Any) -> None:
            conn.execute(self.compile(ADD_COMPACTION), self._compaction_params(session_id, row))
            self._anchor_overlays(conn, session_id)

        self._write(work, lock=session_id, walk=True)

    def _anchor_all_overlays(self) -> None:
        """Record the end depths of every overlay that has none (after a migration or deletes)."""
        for (session_id,) in self._all(UNANCHORED_SESSIONS, {}):
            self._write(lambda conn, s=session_id: self._anchor_overlays(conn, s), lock=session_id, walk=True)

    def _anchor_overlays(self, conn: Any, session_id: str) -> None:
        """Record the end depths of the session's overlays that have none yet (a walk each)."""
        for ident, first, last in conn.execute(self.compile(UNANCHORED), {"s": session_id}).fetchall():
            conn.execute(
                self.compile(ANCHOR_COMPACTION), {"s": session_id, "id": ident, "first_id": first, "last_id": last}
            )

    def add_compaction_unless(
        self,
        session_id: str,
        make_row: Callable[[], CompactionRow],
        superseded: Callable[[list[CompactionRow]], bool],
    ) -> CompactionRow | None:
        """The check and the insert in one transaction, serialised with the session's writers."""

        def work(conn: Any) -> CompactionRow | None:
            rows = conn.execute(self.compile(GET_COMPACTIONS), {"s": session_id}).fetchall()
            if superseded([CompactionRow(*row) for row in rows]):
                return None
            row = make_row()
            conn.execute(self.compile(ADD_COMPACTION), self._compaction_params(session_id, row))
            self._anchor_overlays(conn, session_id)
            return row

        return self._write(work, lock=session_id, walk=True)

    def get_compactions(self, session_id: str) -> list[CompactionRow]:
        return [CompactionRow(*row) for row in self._all(GET_COMPACTIONS, {"s": session_id})]

    def with_overlays(self, session_ids: Sequence[str]) -> set[str]:
        return {row[0] for row in self._select_in(WITH_OVERLAYS, list(dict.fromkeys(session_ids)))}

    def overlays(self, session_id: str) -> list[OverlayRow]:
        return [_overlay(row) for row in self._all(GET_OVERLAYS, {"s": session_id})]

    def path_up(self, session_id: str, start_id: str, *, above: bool = False) -> tuple[array, list[str], array, bool]:
        def consume(cursor: Any) -> tuple[array, list[str], array, bool]:
            seqs: array = array("q")
            ids: list[str] = []
            tokens: array = array("q")
            root = False
            while rows := cursor.fetchmany(5_000):
                if not ids:
                    root = bool(rows[0][3])
                for seq, message_id, row_tokens, _root in rows:
                    seqs.append(seq)
                    ids.append(message_id)
                    tokens.append(row_tokens)
            return seqs, ids, tokens, root

        params = {"s": session_id, "start": start_id}
        return self._consume(PATH_ABOVE if above else PATH_UP, params, consume, walk=True)

    # -- context blocks --------------------------------------------------------------------

    def get_block(self, session_id: str, label: str) -> str | None:
        row = self._one(GET_BLOCK, {"s": session_id, "label": label})
        return None if row is None else row[0]

    def get_blocks(self, session_id: str, labels: Sequence[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        unique = list(dict.fromkeys(labels))
        for start in range(0, len(unique), self.max_list):
            fragment, params = self._rows(unique[start : start + self.max_list])
            rows = self._all(GET_BLOCKS.replace("{rows}", fragment), self._bind_first(session_id, params))
            found.update((label, content) for label, content in rows if content is not None)
        return found

    def set_block(self, session_id: str, label: str, content: str) -> None:
        self.write_block(session_id, label, content)

    def import_block(self, session_id: str, label: str, content: str, updated_at_us: int) -> None:
        self.write_block(session_id, label, content, source="import", at_us=updated_at_us)

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
        now = now_us() if at_us is None else at_us
        params = {
            "s": session_id,
            "label": label,
            "key": "" if key is None else key,
            "now": now,
            "source": source,
            "tool_call_id": tool_call_id,
            "content": content,
            "version": version,
        }
        block_sql = SET_BLOCK if version is None else AT_VERSION[False]
        entry_sql = SET_SEARCH_ENTRY if version is None else AT_VERSION[True]

        if key is None:
            sql, statement_params = self.compile(block_sql), params
        else:
            sql = self.compile(entry_sql)
            statement_params = {
                **params,
                "created": now if created_at_us is None else created_at_us,
                "updated": now,
                "terms": self._terms(content),
            }
        given = params["version"] if key is None else None

        def version_of(cursor: Any) -> int:
            return given if given is not None else cursor.fetchone()[0]

        if keep is None:
            return self._locked_rows(sql, statement_params, version_of, lock=session_id)

        def work(conn: Any) -> int:
            version = version_of(conn.execute(sql, statement_params))
            conn.execute(self.compile(TRIM_BLOCK_VERSIONS), {**params, "oldest": version - max(1, keep)})
            return version

        return self._write(work, lock=session_id)

    def block_version_rows(self, session_id: str) -> list[tuple[str, str, BlockVersionRow]]:
        rows = self._all(ALL_BLOCK_VERSIONS, {"s": session_id})
        return [(row[0], row[1], BlockVersionRow(*row[2:])) for row in rows]

    def import_block_version(self, session_id: str, label: str, key: str, row: BlockVersionRow) -> bool:
        params = {
            "s": session_id,
            "label": label,
            "key": key,
            "version": row.version,
            "created_at": row.created_at_us,
            "source": row.source,
            "tool_call_id": row.tool_call_id,
            "content": row.content,
        }
        return self._execute(IMPORT_BLOCK_VERSION, params) == 1

    def block_versions(
        self, session_id: str, label: str, key: str | None = None, limit: int | None = None
    ) -> list[BlockVersionRow]:
        params = {
            "s": session_id,
            "label": label,
            "key": "" if key is None else key,
            "limit": 2**62 if limit is None else max(0, limit),
        }
        return [BlockVersionRow(*row) for row in self._all(GET_BLOCK_VERSIONS, params)]

    def get_cached_prompt(self, session_id: str) -> str | None:
        row = self._one(GET_CACHED_PROMPT, {"s": session_id})
        return None if row is None else row[0]

    def set_cached_prompt(self, session_id: str, prompt: str) -> None:
        self._execute(SET_CACHED_PROMPT, {"s": session_id, "now": now_us(), "prompt": prompt})

    def set_search_entry(self, session_id: str, label: str, key: str, content: str) -> None:
        self.write_block(session_id, label, content, key=key)

    def import_search_entry(
        self, session_id: str, label: str, key: str, content: str, created_at_us: int, updated_at_us: int
    ) -> None:
        self.write_block(
            session_id, label, content, key=key, source="import", at_us=updated_at_us, created_at_us=created_at_us
        )

    def count_search_entries(self, session_id: str, label: str) -> int:
        return self._one(COUNT_SEARCH_ENTRIES, {"s": session_id, "label": label})[0]

    # -- session registry ------------------------------------------------------------------

    def register_session(self, row: SessionRow) -> None:
        self._execute(REGISTER_SESSION, dict(zip(SESSION_COLUMNS, row)), idempotent=False)

    def get_session_row(self, namespace: str, session_id: str) -> SessionRow | None:
        rows = self._all(GET_SESSION, {"ns": namespace, "id": session_id})
        return SessionRow(*rows[0]) if rows else None

    def list_session_rows(self, namespace: str) -> list[SessionRow]:
        return [SessionRow(*row) for row in self._all(LIST_SESSIONS, {"ns": namespace})]

    def update_session_row(self, namespace: str, session_id: str, changes: SessionChanges) -> bool:
        params = {
            "name": changes.name,
            "end_reason": changes.end_reason,
            "input_tokens": changes.input_tokens,
            "output_tokens": changes.output_tokens,
            "estimated_cost": changes.estimated_cost,
            "updated_at": changes.updated_at_us,
            "ns": namespace,
            "id": session_id,
        }
        counters = changes.input_tokens or changes.output_tokens or changes.estimated_cost
        return self._execute(UPDATE_SESSION, params, idempotent=not counters) == 1

    def delete_session(self, namespace: str, session_id: str) -> bool:
        def work(conn: Any) -> bool:
            row = conn.execute(self.compile(UNREGISTER_SESSION), {"ns": namespace, "id": session_id}).fetchone()
            if row is None:
                return False
            self._lock_session(conn, row[0])
            # one change queued for the whole session, not one per row: its vectors all go
            conn.execute(self.compile(RECALL_QUEUE_SESSION), {"s": row[0]})
            conn.execute(self.compile(RECALL_DISABLE), {"s": row[0]})
            for sql in DELETE_SESSION_ROWS:
                conn.execute(self.compile(sql), {"s": row[0]})
            return True

        return self._write(work)

    def fork_session(self, source_storage_id: str, leaf_id: str, row: SessionRow) -> None:
        def work(conn: Any) -> None:
            conn.execute(self.compile(REGISTER_SESSION), dict(zip(SESSION_COLUMNS, row)))
            params = {"s": source_storage_id, "leaf": leaf_id, "dst": row.storage_id}
            conn.execute(self.compile(RECALL_FORK), params)  # the copies are queued as they land
            for sql in FORK:
                conn.execute(self.compile(sql), params)

        self._write(work, walk=True, idempotent=False)

    # -- LangGraph checkpoints -------------------------------------------------------------

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
        sql = self._put_checkpoint
        params = self._bind_checkpoint(
            (
                session_id,
                row.checkpoint_ns,
                row.checkpoint_id,
                namespace,
                row.thread_id,
                row.parent_checkpoint_id,
                run_id,
                created_at_us,
                row.type,
                row.metadata,
                row.checkpoint,
            )
        )
        if session is None:
            self._single(lambda conn: conn.execute(sql, params), write=True)
            return
        register, registered = self.compile(REGISTER_SESSION_IF_NEW), dict(zip(SESSION_COLUMNS, session))

        def work(conn: Any) -> None:
            conn.execute(register, registered)
            conn.execute(sql, params)

        self._write(work)

    def put_checkpoint_writes(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[CheckpointWrite],
        *,
        replace: bool,
    ) -> None:
        if not writes:
            return
        statements = []
        for start in range(0, len(writes), WRITES_PER_STATEMENT):
            chunk = writes[start : start + WRITES_PER_STATEMENT]
            sql, bind = self._put_writes_sql(len(chunk), replace)
            values: list[Any] = [session_id, checkpoint_ns, checkpoint_id]
            for write in chunk:
                values += (write.task_id, write.idx, write.channel, write.type, write.task_path, write.value)
            statements.append((sql, bind(tuple(values))))

        def work(conn: Any) -> None:
            for sql, params in statements:
                conn.execute(sql, params)

        if len(statements) == 1:
            self._single(work, write=True)
        else:
            self._write(work)

    def _put_writes_sql(self, rows: int, replace: bool) -> tuple[str, Callable[[tuple[Any, ...]], Any]]:
        """``PUT_WRITES`` for ``rows`` writes, and what binds its values: the checkpoint's ids,
        then each write's ``WRITE_ROW`` values."""
        key = (rows, replace)
        found = self._writes_sql.get(key)
        if found is None:
            values = ", ".join(WRITE_ROW.format(n=n) for n in range(rows))
            template = PUT_WRITES.format(rows=values, conflict=WRITES_REPLACE if replace else WRITES_KEEP)
            names = ("s", "ns", "id", *(f"{column}{n}" for n in range(rows) for column in "ticypv"))
            found = self._writes_sql[key] = self._by_position(template, names)
        return found

    def get_checkpoint(self, session_id: str, checkpoint_ns: str, checkpoint_id: str | None) -> CheckpointRow | None:
        if checkpoint_id is None:
            sql, params = self._get_latest_checkpoint, {"s": session_id, "ns": checkpoint_ns}
        else:
            sql, params = self._get_checkpoint_at, {"s": session_id, "ns": checkpoint_ns, "id": checkpoint_id}
        rows = self._single(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        found = None
        writes = []
        for kind, a, b, type_, c, data, idx, thread_id in rows:
            if kind == 0:
                found = (thread_id, checkpoint_ns, a, b, type_, bytes(data), c)
            else:
                writes.append(CheckpointWrite(a, idx, b, type_, None if data is None else bytes(data), c))
        if found is None:
            return None
        return CheckpointRow(*found, tuple(writes))

    def checkpoint_ancestors(
        self,
        session_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        limit: int,
        channels: Sequence[str] | None = None,
    ) -> list[CheckpointRow]:
        params: dict[str, Any] = {"s": session_id, "ns": checkpoint_ns, "id": checkpoint_id, "limit": limit}
        count = -1 if channels is None else len(channels)
        sql = self._ancestors_sql.get(count)
        if sql is None:
            if channels is None:
                only = "1 = 1"
            elif not channels:
                only = "1 = 0"
            else:
                only = f"w.channel IN ({', '.join(f':c{n}' for n in range(count))})"
            sql = self._ancestors_sql[count] = self.compile(CHECKPOINT_ANCESTORS.replace("{channels}", only))
        params.update((f"c{n}", channel) for n, channel in enumerate(channels or ()))
        rows = self._single(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        found: dict[int, tuple[str, str, str, str | None, str, bytes, str]] = {}
        writes: dict[int, list[CheckpointWrite]] = {}
        for kind, depth, a, b, type_, c, data, idx, thread_id in rows:
            if kind == 0:
                found[depth] = (thread_id, checkpoint_ns, a, b, type_, bytes(data), c)
            else:
                value = None if data is None else bytes(data)
                writes.setdefault(depth, []).append(CheckpointWrite(a, idx, b, type_, value, c))
        return [CheckpointRow(*found[depth], tuple(writes.get(depth, ()))) for depth in sorted(found)]

    def _checkpoint_where(self, query: CheckpointQuery) -> tuple[str, dict[str, Any]]:
        conditions: list[str] = []
        params: dict[str, Any] = {}
        if query.session_id is not None:
            conditions.append("session_id = :s")
            params["s"] = query.session_id
        else:
            conditions.append("namespace = :namespace")
            params["namespace"] = query.namespace
        if query.checkpoint_ns is not None:
            conditions.append("checkpoint_ns = :ns")
            params["ns"] = query.checkpoint_ns
        if query.checkpoint_id is not None:
            conditions.append("checkpoint_id = :id")
            params["id"] = query.checkpoint_id
        if query.before is not None:
            conditions.append("checkpoint_id < :before")
            params["before"] = query.before
        if query.metadata:
            condition, values = self._metadata_where(query.metadata)
            conditions.append(condition)
            params.update(values)
        return " AND ".join(conditions), params

    def list_checkpoints(
        self, query: CheckpointQuery, limit: int, after: CheckpointKey | None = None
    ) -> list[CheckpointRow]:
        where, params = self._checkpoint_where(query)
        if after is not None:
            where += f" AND {LIST_AFTER}"
            params.update({"after_id": after[0], "after_s": after[1], "after_ns": after[2]})
        params["limit"] = limit
        sql = self.compile(LIST_CHECKPOINTS.replace("{where}", where))
        rows = self._single(lambda conn: conn.execute(sql, params).fetchall(), write=False)
        found: dict[tuple[str, str, str], list[Any]] = {}
        writes: dict[tuple[str, str, str], list[CheckpointWrite]] = {}
        for kind, session_id, checkpoint_ns, checkpoint_id, a, b, c, data, idx, d in rows:
            key = (checkpoint_id, session_id, checkpoint_ns)
            if kind == 0:
                found[key] = [d, checkpoint_ns, checkpoint_id, a, b, bytes(data), c]
            else:
                value = None if data is None else bytes(data)
                writes.setdefault(key, []).append(CheckpointWrite(a, idx, b, d, value, c))
        return [
            CheckpointRow._make((*found[key], tuple(writes.get(key, ()))))
            for key in sorted(found, key=_byte_key, reverse=True)
        ]

    def delete_checkpoints(self, session_ids: Sequence[str], *, keep_latest: bool = False) -> int:
        unique = list(dict.fromkeys(session_ids))
        if not unique:
            return 0
        counted = "SELECT count(*) FROM checkpoints WHERE session_id {values}"

        def work(conn: Any) -> int:
            deleted = 0
            for start in range(0, len(unique), self.max_list):
                chunk = unique[start : start + self.max_list]
                before = self._run_listed(conn, counted, chunk)[0][0]
                for template in KEEP_LATEST_CHECKPOINTS if keep_latest else DELETE_CHECKPOINTS:
                    self._run_listed(conn, template, chunk)
                deleted += before - (self._run_listed(conn, counted, chunk)[0][0] if keep_latest else 0)
            return deleted

        return self._write(work)

    def copy_checkpoints(self, source_id: str, target_id: str, namespace: str, thread_id: str) -> int:
        params = {"src": source_id, "dst": target_id, "namespace": namespace, "thread": thread_id}

        def work(conn: Any) -> int:
            copied = conn.execute(self.compile(COPY_CHECKPOINTS[0]), params).rowcount
            conn.execute(self.compile(COPY_CHECKPOINTS[1]), params)
            return copied

        return self._write(work, lock=target_id)

    def rewrite_checkpoints(self, session_id: str, rows: Sequence[CheckpointRow]) -> None:
        if not rows:
            return
        checkpoints, writes = [], []
        for row in rows:
            key = {"s": session_id, "ns": row.checkpoint_ns, "id": row.checkpoint_id}
            checkpoints.append({**key, "type": row.type, "value": row.checkpoint})
            writes += [{**key, "task": w.task_id, "idx": w.idx, "type": w.type, "value": w.value} for w in row.writes]
        rewrite_checkpoint, rewrite_write = self.compile(REWRITE_CHECKPOINT), self.compile(REWRITE_WRITE)

        def work(conn: Any) -> None:
            self._execute_many(conn, rewrite_checkpoint, checkpoints)
            if writes:
                self._execute_many(conn, rewrite_write, writes)

        self._write(work, lock=session_id)

    def delete_checkpoint_runs(self, namespace: str, run_ids: Sequence[str]) -> int:
        runs = list(dict.fromkeys(run_ids))
        if not runs:
            return 0

        def work(conn: Any) -> int:
            deleted = 0
            for start in range(0, len(runs), self.max_list):
                fragment, listed = self._list(runs[start : start + self.max_list])
                params = self._bind_first(namespace, listed)
                conn.execute(self.compile(RUN_WRITES.replace("{values}", fragment)), params)
                deleted += conn.execute(self.compile(RUN_CHECKPOINTS.replace("{values}", fragment)), params).rowcount
            return deleted

        return self._write(work)

    def delta_checkpoint_sessions(self, session_ids: Sequence[str]) -> list[str]:
        unique = list(dict.fromkeys(session_ids))
        return sorted(row[0] for row in self._select_in(DELTA_SESSIONS, unique))

    # -- LangGraph-style items (``ItemStore``) ----------------------------------------------

    def _conditions(self, conditions: Sequence[ItemCondition]) -> tuple[str, dict[str, Any]]:
        parts, params = [], {}
        for n, condition in enumerate(conditions):
            sql, more = self._item_condition(condition, n)
            parts.append(f" AND {sql}")
            params.update(more)
        return "".join(parts), params

    def put_items(self, namespace: str, writes: Sequence[ItemWrite], now_us: int) -> None:
        if not writes:
            return
        if len(writes) == 1 and writes[0].value is not None and writes[0].vectors is None:
            self._put_item(namespace, writes[0], now_us)  # a single put, the hot path
            return
        latest = {(write.prefix, write.key): write for write in writes}
        # Every item row in key order, deletions among the puts: concurrent batches lock the
        # items in one order, and each item before its versions and vectors (no deadlock).
        ordered = sorted(latest.values(), key=_item_key)
        stored = [write for write in ordered if write.value is not None]
        runs: list[list[ItemWrite]] = []
        for write in ordered:
            if write.value is None:
                runs.append([write])
            elif runs and runs[-1][0].value is not None and len(runs[-1]) < WRITES_PER_STATEMENT:
                runs[-1].append(write)
            else:
                runs.append([write])
        statements: list[tuple[str, Any]] = []
        delete, deleted, clear_vectors = (
            self.compile(DELETE_ITEM),
            self.compile(ITEM_DELETED),
            self.compile(CLEAR_ITEM_VECTORS),
        )
        for chunk in runs:
            if chunk[0].value is None:
                key = {"ns": namespace, "p": chunk[0].prefix, "k": chunk[0].key}
                statements.append((delete, key))
                continue
            rows = [
                (
                    write.prefix,
                    write.key,
                    write.value,
                    None if write.ttl_minutes is None else now_us + int(write.ttl_minutes * 60_000_000),
                    write.ttl_minutes,
                    write.text or "",
                )
                for write in chunk
            ]
            statements.append(self._put_items(namespace, rows, now_us))
        vectors: list[dict[str, Any]] = []
        for write in stored:
            if write.vectors is not None:
                key = {"ns": namespace, "p": write.prefix, "k": write.key}
                statements.append((self.compile(CLEAR_ITEM_VECTORS), key))
                vectors += [{**key, "f": field, "vector": vector} for field, vector in write.vectors]
        put_vector = self.compile(PUT_ITEM_VECTOR)

        def work(conn: Any) -> None:
            for sql, params in statements:
                cursor = conn.execute(sql, params)
                if sql is delete:
                    # Only an item this statement deleted loses its vectors: one it found absent
                    # may have been committed since (a new statement, a new snapshot), and its
                    # vectors are a live item's, locked here without the item (a deadlock with
                    # its writer) and lost.
                    for (version,) in cursor.fetchall():
                        conn.execute(deleted, {**params, "version": version + 1, "now": now_us})
                        conn.execute(clear_vectors, params)
            if vectors:
                self._execute_many(conn, put_vector, vectors)

        if len(statements) == 1 and not vectors and statements[0][0] is not delete:
            self._single(work, write=True)
        else:
            self._write(work)

    def _put_item(self, namespace: str, write: ItemWrite, now_us: int) -> None:
        """``put_items`` of one stored value without vectors: one statement, compiled once."""
        ttl = write.ttl_minutes
        row = (
            write.prefix,
            write.key,
            write.value,
            None if ttl is None else now_us + int(ttl * 60_000_000),
            ttl,
            write.text or "",
        )
        sql, params = self._put_items(namespace, (row,), now_us)
        self._single(lambda conn: conn.execute(sql, params), write=True)

    def _key_lists(
        self, namespace: str, keys: Sequence[tuple[str, str]], now_us: int
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        """``keys`` by prefix, in lists of at most ``max_list``: each list's ``{keys}`` and the
        parameters that bind it with ``:ns``, ``:p`` and ``:now``."""
        grouped: dict[str, list[str]] = {}
        for prefix, key in sorted(set(keys)):  # one order for every writer: a refresh locks its rows
            grouped.setdefault(prefix, []).append(key)
        for prefix, group in grouped.items():
            for start in range(0, len(group), self.max_list):
                listed = group[start : start + self.max_list]
                params: dict[str, Any] = {"ns": namespace, "p": prefix, "now": now_us}
                params.update((f"k{n}", key) for n, key in enumerate(listed))
                yield ", ".join(f":k{n}" for n in range(len(listed))), params

    def get_items(
        self, namespace: str, keys: Sequence[tuple[str, str]], now_us: int, *, refresh: bool = False
    ) -> list[ItemRow]:
        if len(keys) == 1:  # a single get, the hot path
            prefix, key = keys[0]
            params: dict[str, Any] = {"ns": namespace, "p": prefix, "k0": key, "now": now_us}
            found = self._refreshed(":k0", params) if refresh else self._all(_GET_ITEM, params)
            return list(map(ItemRow._make, found))
        rows: list[ItemRow] = []
        for listed, params in self._key_lists(namespace, keys, now_us):
            if refresh:
                rows += map(ItemRow._make, self._refreshed(listed, params))
            else:
                rows += map(ItemRow._make, self._all(for_keys(GET_ITEMS, listed), params))
        return rows

    def refresh_items(self, namespace: str, keys: Sequence[tuple[str, str]], now_us: int) -> None:
        statements = [
            (self.compile(for_keys(refresh_sql(listed), listed)), params)
            for listed, params in self._key_lists(namespace, keys, now_us)
        ]

        def work(conn: Any) -> None:
            for sql, params in statements:
                conn.execute(sql, params)

        if len(statements) == 1:
            self._single(work, write=True)
        elif statements:
            self._write(work)

    def _refreshed(self, keys: str, params: dict[str, Any]) -> list[Any]:
        """The rows of ``GET_ITEMS`` for ``keys`` (its ``{keys}``, bound in ``params``), each item
        with a TTL refreshed first, in one transaction."""
        refresh, get = self.compile(for_keys(refresh_sql(keys), keys)), self.compile(for_keys(GET_ITEMS, keys))

        def work(conn: Any) -> list[Any]:
            conn.execute(refresh, params)
            return conn.execute(get, params).fetchall()

        return self._write(work)

    def list_items(
        self, namespace: str, under: str, conditions: Sequence[ItemCondition], limit: int, offset: int, now_us: int
    ) -> list[ItemRow]:
        where, params = item_under(namespace, under)
        filters, more = self._conditions(conditions)
        sql = LIST_ITEMS.replace("{under}", where).replace("{conditions}", filters)
        params.update(more, now=now_us, limit=limit, offset=offset)
        return [ItemRow._make(row) for row in self._all(sql, params)]

    def search_items(
        self, namespace: str, under: str, query: str, conditions: Sequence[ItemCondition], limit: int, now_us: int
    ) -> list[ItemRow]:
        if limit <= 0:
            return []
        wanted = limit if not conditions else max(4 * limit, 200)
        analysed = self._index_waiting_items(namespace, under)
        scope = SearchScope("store_items", items_under=(namespace, under), analysed=analysed)
        found = self._ranked(scope, query, wanted, RANKED_ITEMS, tuple)
        ranked = [ItemRow._make(row[1:]) for row in found if row[0] is None or row[0] > now_us]
        if not conditions or not ranked:
            return ranked[:limit]
        keys = [(row.prefix, row.key) for row in ranked]
        met = {(row.prefix, row.key) for row in self._items_meeting(namespace, keys, conditions, now_us)}
        return [row for row in ranked if (row.prefix, row.key) in met][:limit]

    def _items_meeting(
        self, namespace: str, keys: Sequence[tuple[str, str]], conditions: Sequence[ItemCondition], now_us: int
    ) -> list[ItemRow]:
        filters, more = self._conditions(conditions)
        rows: list[ItemRow] = []
        for listed, params in self._key_lists(namespace, keys, now_us):
            params.update(more)
            rows += map(ItemRow._make, self._all(for_keys(GET_ITEMS, listed) + filters, params))
        return rows

    def _index_waiting_items(self, namespace: str, under: str) -> tuple[tuple[int, str], ...]:
        """Analyse and index the items under ``under`` whose text waits for it (by default
        none: a dialect's put may leave that to the next search); what a store that cannot
        write analysed without indexing it, for this search alone (``SearchScope.analysed``)."""
        return ()

    def item_vectors(
        self, namespace: str, under: str, conditions: Sequence[ItemCondition], now_us: int
    ) -> list[tuple[str, str, bytes]]:
        where, params = item_under(namespace, under, "i")
        filters, more = self._conditions(conditions)
        params.update(more, now=now_us)
        sql = ITEM_VECTORS.replace("{under}", where).replace("{conditions}", filters)
        return [(prefix, key, bytes(vector)) for prefix, key, vector in self._all(sql, params)]

    def item_prefixes(self, namespace: str, under: str, now_us: int) -> list[str]:
        where, params = item_under(namespace, under)
        params["now"] = now_us
        return [row[0] for row in self._all(ITEM_PREFIXES.replace("{under}", where), params)]

    def item_versions(self, namespace: str, prefix: str, key: str) -> list[ItemVersionRow]:
        params = {"ns": namespace, "p": prefix, "k": key}
        return [ItemVersionRow._make(row) for row in self._all(ITEM_VERSIONS, params)]

    def sweep_items(self, namespace: str, now_us: int) -> int:
        sweep, versions, vectors = (self.compile(sql) for sql in (SWEEP_ITEMS, CLEAR_ITEM_VERSIONS, CLEAR_ITEM_VECTORS))

        def work(conn: Any) -> int:
            swept = [
                {"ns": namespace, "p": prefix, "k": key}
                for prefix, key in conn.execute(sweep, {"ns": namespace, "now": now_us}).fetchall()
            ]
            if swept:
                self._execute_many(conn, versions, swept)
                self._execute_many(conn, vectors, swept)
            return len(swept)

        return self._write(work)

    def remove_items(self, namespace: str, keys: Sequence[tuple[str, str]]) -> int:
        statements = [self.compile(sql) for sql in REMOVE_ITEM]

        def work(conn: Any) -> int:
            removed = 0
            for prefix, key in sorted(set(keys)):  # in key order, as batches lock items
                params = {"ns": namespace, "p": prefix, "k": key}
                item, versions, _vectors = (conn.execute(sql, params).rowcount for sql in statements)
                removed += bool(item or versions)
            return removed

        return self._write(work)

    def remove_namespace_items(self, namespace: str) -> int:
        items, *rest = (self.compile(sql) for sql in REMOVE_NAMESPACE_ITEMS)

        def work(conn: Any) -> int:
            removed = conn.execute(items, {"ns": namespace}).rowcount
            for sql in rest:
                conn.execute(sql, {"ns": namespace})
            return int(removed)

        return self._write(work)

    def _indexed_items(self, namespace: str, under: str) -> int:
        where, params = item_under(namespace, under)
        return int(self._one(COUNT_ITEMS.replace("{under}", where), params)[0])

    # -- retention and erasure -------------------------------------------------------------

    def session_activity(self, namespace: str | None = None, before_us: int | None = None) -> list[StoredSession]:
        params = {"before": _NEVER if before_us is None else before_us}
        found = []
        for storage_id, last_us, registered_in, registered_id in self._all(SESSION_ACTIVITY, params):
            where, session_id = (
                split_storage_id(storage_id) if registered_in is None else (registered_in, registered_id)
            )
            if namespace is None or where == namespace:
                found.append(StoredSession(where, session_id, storage_id, last_us, registered_in is not None))
        found.sort(key=lambda session: session.storage_id.encode("utf-8"))
        return found

    def count_session_rows(self, storage_ids: Sequence[str]) -> RowCounts:
        unique = list(dict.fromkeys(storage_ids))
        counts = sum((RowCounts(*row) for row in self._select_in(COUNT_SESSION_ROWS, unique)), RowCounts())
        if len(unique) <= self.max_list:
            return counts
        # Listed a chunk at a time, a payload held by sessions of two chunks counts in neither.
        holders: dict[str, set[str]] = {}
        for digest, session_id in self._select_in(PAYLOAD_HOLDERS, unique):
            holders.setdefault(digest, set()).add(session_id)
        listed = set(unique)
        return replace(counts, blobs=sum(1 for sessions in holders.values() if sessions <= listed))

    def remove_sessions(
        self, storage_ids: Sequence[str], *, inactive_before_us: int | None = None, forget_vectors: bool = False
    ) -> Removal:
        unique = sorted(dict.fromkeys(storage_ids))

        def work(conn: Any) -> Removal:
            removed: list[str] = []
            counts = RowCounts()
            for start in range(0, len(unique), self.max_list):
                asked = unique[start : start + self.max_list]
                for storage_id in asked:
                    self._lock_session(conn, storage_id)
                last = {row[0]: row[1] for row in self._run_listed(conn, SESSION_ACTIVITY_OF, asked)}
                chunk = [s for s in asked if s in last and (inactive_before_us is None or last[s] < inactive_before_us)]
                if chunk:
                    counts += RowCounts(*self._run_listed(conn, COUNT_SESSION_ROWS, chunk)[0])
                if forget_vectors:  # also of an id holding nothing else any more
                    for template in RECALL_FORGET_SESSIONS:
                        self._run_listed(conn, template, asked)
                if not chunk:
                    continue
                queue = () if forget_vectors else (RECALL_QUEUE_SESSIONS, RECALL_DISABLE_SESSIONS)
                for template in (*queue, *REMOVE_SESSIONS):
                    self._run_listed(conn, template, chunk)
                removed += chunk
            return Removal(tuple(removed), counts)

        return self._write(work)

    def remove_messages(
        self, session_id: str, ids: Sequence[str], *, forget_vectors: bool = False
    ) -> tuple[list[str], RowCounts]:
        wanted = list(dict.fromkeys(ids))

        def work(conn: Any) -> tuple[list[str], RowCounts]:
            size = self.compile(MESSAGE_SIZE)
            present = [i for i in wanted if conn.execute(size, {"s": session_id, "id": i}).fetchone() is not None]
            if not present:
                return [], RowCounts()
            erased = set(present)
            overlays = 0
            for overlay_id, from_id, to_id in conn.execute(self.compile(OVERLAY_ENDS), {"s": session_id}).fetchall():
                ends = {"s": session_id, "from": from_id, "to": to_id}
                span = {from_id, to_id, *(row[0] for row in conn.execute(self.compile(SPAN_IDS), ends))}
                if span & erased:
                    conn.execute(self.compile(REMOVE_OVERLAY), {"s": session_id, "id": overlay_id})
                    overlays += 1
            digests: set[str] = set()
            vectors = 0
            for message_id in present:
                params = {"s": session_id, "id": message_id}
                digests.update(row[0] for row in conn.execute(self.compile(MESSAGE_PAYLOADS), params))
                vectors += conn.execute(self.compile(COUNT_MESSAGE_VECTORS), params).fetchone()[0]
            deleted = self._delete_messages(conn, session_id, present)
            blobs = sum(1 for d in digests if conn.execute(self.compile(PAYLOAD_KEPT), {"d": d}).fetchone() is None)
            if forget_vectors:
                for message_id in deleted:
                    for template in FORGET_MESSAGE_VECTORS:
                        conn.execute(self.compile(template), {"s": session_id, "id": message_id})
            counts = RowCounts(messages=len(deleted), compactions=overlays, blobs=blobs, vectors=vectors)
            return deleted, counts

        return self._write(work, lock=session_id, walk=True)

    def remove_block(
        self, session_id: str, label: str, key: str | None = None, *, forget_vectors: bool = False
    ) -> RowCounts:
        whole = key is None
        ref = entry_ref(label, "" if key is None else key)
        params = {"s": session_id, "label": label, "key": "" if key is None else key, "whole": whole, "ref": ref}

        def work(conn: Any) -> RowCounts:
            blocks, versions, entries, prompts, vectors = conn.execute(
                self.compile(COUNT_BLOCK_ROWS), params
            ).fetchone()
            if not (blocks or versions or entries):
                return RowCounts()
            for sql in (*REMOVE_BLOCK, *(FORGET_BLOCK_VECTORS if forget_vectors else ())):
                conn.execute(self.compile(sql), params)
            return RowCounts(
                blocks=blocks, block_versions=versions, search_entries=entries, prompts=prompts, vectors=vectors
            )

        return self._write(work, lock=session_id)

    # -- semantic recall's outbox ----------------------------------------------------------

    def recall_enable(self, session_ids: Sequence[str]) -> list[str]:
        def work(conn: Any) -> list[str]:
            enabled = []
            for session_id in dict.fromkeys(session_ids):
                if conn.execute(self.compile(RECALL_ENABLE), {"s": session_id}).fetchone() is not None:
                    conn.execute(self.compile(RECALL_QUEUE_SESSION), {"s": session_id})
                    enabled.append(session_id)
            return enabled

        return self._write(work)

    def recall_claim(self, limit: int, now_us: int, lease_us: int) -> list[OutboxRow]:
        params = {"lease": now_us + lease_us, "now": now_us, "n": limit}
        sql = self.compile(RECALL_CLAIM)
        rows = self._write(lambda conn: conn.execute(sql, params).fetchall(), idempotent=False, one_statement=True)
        return sorted(OutboxRow(*row) for row in rows)

    def recall_sources(self, session_id: str, kind: str, refs: Sequence[str]) -> dict[str, RecallSource]:
        refs = list(dict.fromkeys(refs))
        if kind == "entry":
            found = {}
            for ref in refs:
                label, _, key = ref.partition("\x1f")
                row = self._one(RECALL_ENTRY_SOURCE, {"s": session_id, "label": label, "key": key})
                if row is not None:
                    found[ref] = RecallSource(ref, "", row[0], row[1])
            return found
        return {row[0]: RecallSource(*row) for row in self._select_first(RECALL_MESSAGE_SOURCES, session_id, refs)}

    def recall_refs(self, session_id: str) -> tuple[list[str], list[str]]:
        messages = [row[0] for row in self._all(RECALL_MESSAGE_REFS, {"s": session_id})]
        entries = [f"{label}\x1f{key}" for label, key in self._all(RECALL_ENTRY_REFS, {"s": session_id})]
        return messages, entries

    def recall_vectors(
        self, session_id: str, kind: str | None = None, refs: Sequence[str] | None = None
    ) -> list[VectorRow]:
        if refs is None:
            rows = self._all(RECALL_VECTORS, {"s": session_id})
        else:
            rows = self._select_first(RECALL_VECTORS_OF, session_id, list(dict.fromkeys(refs)))
        return [VectorRow(*row) for row in rows if kind is None or row[2] == kind]

    def recall_record(self, added: Sequence[VectorRow], removed: Sequence[str], done: Sequence[int]) -> None:
        def work(conn: Any) -> None:
            for template, values in ((RECALL_FORGET, list(dict.fromkeys(removed))), (RECALL_DONE, list(done))):
                for start in range(0, len(values), self.max_list):
                    fragment, params = self._list(values[start : start + self.max_list])
                    conn.execute(self.compile(template.replace("{values}", fragment)), params)
            if added:
                self._execute_many(conn, self.compile(RECALL_RECORD), [row._asdict() for row in added])

        self._write(work)

    def recall_split(self, seq: int, session_id: str, changes: Sequence[tuple[str, str]]) -> None:
        def work(conn: Any) -> None:
            queued = {
                tuple(row)
                for row in conn.execute(self.compile(RECALL_QUEUED_AFTER), {"s": session_id, "seq": seq}).fetchall()
            }
            params = [{"s": session_id, "kind": kind, "ref": ref} for kind, ref in changes if (kind, ref) not in queued]
            if params:
                self._execute_many(conn, self.compile(RECALL_QUEUE), params)
            fragment, done = self._list([seq])
            conn.execute(self.compile(RECALL_DONE.replace("{values}", fragment)), done)

        self._write(work)

    def recall_retry(self, seqs: Sequence[int], error: str, due_us: int) -> None:
        params = [{"error": error, "due": due_us, "seq": seq} for seq in seqs]
        if params:
            self._write(lambda conn: self._execute_many(conn, self.compile(RECALL_RETRY), params))

    def recall_backlog(self) -> RecallBacklog:
        return RecallBacklog(*self._one(RECALL_BACKLOG, {}))

    def recall_lookup(
        self, vector_ids: Sequence[str], *, session_ids: Sequence[str] | None = None, namespace: str | None = None
    ) -> dict[str, tuple[str, str, str]]:
        ids = list(dict.fromkeys(vector_ids))
        if namespace is not None:
            rows = self._select_first(RECALL_LOOKUP_NAMESPACE, namespace, ids)
        else:
            allowed = None if session_ids is None else set(session_ids)
            rows = [row for row in self._select_in(RECALL_LOOKUP, ids) if allowed is None or row[1] in allowed]
        return {row[0]: (row[1], row[2], row[3]) for row in rows}

    def recall_rebuild(self, session_ids: Sequence[str] | None = None) -> int:
        def work(conn: Any) -> int:
            wanted = session_ids
            if wanted is None:
                wanted = [row[0] for row in conn.execute(self.compile(RECALL_ENABLED), {}).fetchall()]
            queued = 0
            for session_id in dict.fromkeys(wanted):
                conn.execute(self.compile(RECALL_STALE), {"s": session_id})
                queued += conn.execute(self.compile(RECALL_QUEUE_SESSION), {"s": session_id}).rowcount
            return queued

        return self._write(work)

    def _run_listed(self, conn: Any, template: str, values: Sequence[Any]) -> list[Any]:
        """Run ``template`` on ``conn`` with every ``{values}`` bound to ``values`` (at most
        ``max_list``); its rows (``[]`` for a statement without any)."""
        fragment, params = self._list(values, template.count("{values}"))
        cursor = conn.execute(self.compile(template.replace("{values}", fragment)), params)
        return cursor.fetchall() if cursor.description is not None else []

    def _select_first(self, template: str, first: Any, values: Sequence[Any]) -> list[Any]:
        """Rows of ``template`` with ``first`` bound to ``{first}`` and ``values`` to
        ``{values}``, in chunks."""
        rows: list[Any] = []
        for start in range(0, len(values), self.max_list):
            fragment, params = self._list(values[start : start + self.max_list])
            rows += self._all(template.replace("{values}", fragment), self._bind_first(first, params))
        return rows

    # -- inspection and transfer -----------------------------------------------------------

    def session_summaries(self, session_ids: Sequence[str] | None = None) -> list[SessionSummary]:
        if session_ids is None:
            rows = self._all(SUMMARIES.replace("{ids}", _session_ids()), {})
        else:
            template = SUMMARIES.replace("{ids}", _session_ids(" WHERE {column} {{values}}"))
            rows = self._select_in(template, list(dict.fromkeys(session_ids)))
        summaries = [
            SessionSummary(row[0], row[1], row[2], row[3], None if row[4] is None else SessionRow(*row[4:]))
            for row in rows
        ]
        summaries.sort(key=lambda summary: summary.session_id.encode("utf-8"))
        return summaries

    def message_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[tuple[int, MessageRow]]:
        sql = MESSAGE_PAGE.replace("{after}", MESSAGE_PAGE_AFTER if after_seq else "")
        rows = self._all(sql, {"s": session_id, "after": after_seq, "limit": limit})
        return [(row[0], MessageRow(*row[1:])) for row in rows]

    def message_tree(self, session_id: str) -> list[tuple[str, str | None, str, int]]:
        return [tuple(row) for row in self._all(MESSAGE_TREE, {"s": session_id})]

    def list_blocks(self, session_id: str) -> list[BlockRow]:
        return [BlockRow(*row) for row in self._all(LIST_BLOCKS, {"s": session_id})]

    def search_entry_counts(self, session_id: str) -> list[tuple[str, int]]:
        return [(label, count) for label, count in self._all(SEARCH_ENTRY_COUNTS, {"s": session_id})]

    def search_entry_rows(self, session_id: str, after_seq: int = 0, limit: int = 500) -> list[SearchEntryRow]:
        sql = SEARCH_ENTRY_PAGE.replace("{after}", SEARCH_ENTRY_PAGE_AFTER if after_seq else "")
        rows = self._all(sql, {"s": session_id, "after": after_seq, "limit": limit})
        return [SearchEntryRow(*row) for row in rows]

    def import_compaction(self, session_id: str, row: CompactionRow) -> bool:
        def work(conn: Any) -> bool:
            stored = conn.execute(self.compile(ADD_COMPACTION), self._compaction_params(session_id, row)).rowcount == 1
            if stored:
                self._anchor_overlays(conn, session_id)
            return stored

        return self._write(work, lock=session_id, walk=True)

    def stats(self) -> StoreStats:
        sql = self.compile(COUNTS.replace("{ids}", _session_ids()))

        def work(conn: Any) -> StoreStats:
            counts = conn.execute(sql, {}).fetchone()
            return StoreStats(*counts, schema_version=self._schema_version(conn), size_bytes=self._size_bytes(conn))

        return self._read(work)


def _exact_first(
    query: str, limit: int, match: Callable[[tuple[Unit, ...]], list[Any]], key: Callable[[Any], Any]
) -> list[Any]:
    """The matches of ``query``'s exact plan (words by their stem, no prefixes), best first; when
    they are fewer than ``limit``, the matches the prefixes add, after them. Exact matches rank
    above prefix-only ones on every backend, and a frequent complete word never pays for a
    prefix expansion."""
    units = parse_query(query)
    if not units or limit <= 0:
        return []
    exact = exact_units(units)
    rows = match(exact)
    if len(rows) < limit and exact != units:
        seen = {key(row) for row in rows}
        rows += [row for row in match(units) if key(row) not in seen][: limit - len(rows)]
    return rows


def _first_row(cursor: Any) -> Any:
    return cursor.fetchone()


def _all_rows(cursor: Any) -> list[Any]:
    return cursor.fetchall()
