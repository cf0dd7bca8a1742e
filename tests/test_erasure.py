"""Erasure proven on the bytes: a session whose messages, tool calls and results, attachment,
block versions, search entries, overlay, cached prompt and vectors carry a random marker is
erased; then the marker is nowhere in the SQLite file and its ``-wal`` (nor in any row, index
search, outbox row or vector on PostgreSQL), while another session's marker still reads back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from sessions_core import Session, SessionManager, SqliteStore, StoreSearchContext
from sessions_core.integration import Items
from sessions_core.stores.sql import TABLES

from .helpers import msg
from .postgres import postgres_url, require_postgres, temporary_schema

pytest.importorskip("langchain_core")

from langchain_core.vectorstores import InMemoryVectorStore  # noqa: E402

from langchain_sessions import SynonymEmbeddings, VectorStoreRecall  # noqa: E402


@contextmanager
def _postgres() -> Iterator[tuple[str, Any]]:
    """A fresh schema of the test server and our store on it, closed at the end."""
    require_postgres()
    from sessions_core.stores.postgres import PostgresStore

    with temporary_schema() as schema:
        store = PostgresStore(postgres_url(), schema=schema)
        try:
            yield schema, store
        finally:
            store.close()


def _marker() -> str:
    """A random word of letters, which full-text search indexes whole (no stem cuts it)."""
    return "zq" + uuid.uuid4().hex.translate(str.maketrans("0123456789", "ghijklmnop")) + "xq"


def _index() -> VectorStoreRecall:
    return VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings()))


def _indexed_texts(index: VectorStoreRecall) -> list[str]:
    store = index.vector_store
    assert isinstance(store, InMemoryVectorStore)
    return [doc["text"] for doc in store.store.values()]


def write_marked(session: Any, marker: str) -> None:
    """Every kind of text a session stores, each carrying ``marker``."""
    session.with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    session.append_message(msg("u1", f"my secret code is {marker} please keep it"))
    session.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": f"the user said {marker}"},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "lookup", "input": {"query": marker}},
            ],
        }
    )
    session.append_message(
        {
            "id": "t1",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "c1", "toolName": "lookup", "output": {"row": f"id {marker}"}}
            ],
        }
    )
    payload = b"\x89PNG\r\n" + marker.encode() + bytes(range(256)) * 20
    session.append_message(
        {
            "id": "f1",
            "role": "user",
            "parts": [
                {"type": "text", "text": "see the attachment"},
                {"type": "file", "mediaType": "image/png", "data": payload, "filename": f"scan-{marker}.png"},
            ],
        }
    )
    session.append_message(msg("a2", f"noted {marker}", role="assistant"))
    session.update_message(msg("a2", f"noted again {marker} for sure", role="assistant"))
    session.replace_context_block("memory", f"first fact {marker}")
    session.replace_context_block("memory", f"second fact {marker}")
    tools = {tool.name: tool for tool in session.tools()}
    result = tools["set_context"].invoke({"label": "notes", "key": f"k-{marker}", "content": f"entry {marker}"})
    assert not result.startswith("Error"), result
    tools["set_context"].invoke({"label": "notes", "key": f"k-{marker}", "content": f"entry changed {marker}"})
    session.add_compaction(f"summary about {marker}", "u1", "t1")
    assert marker in session.freeze_system_prompt()


def _reads_back(session: Any, marker: str) -> None:
    assert marker in session.get_message("u1").text
    assert marker.encode() in session.get_message("f1").parts[1].data
    assert marker in session.get_history()[0].text  # the overlay's summary
    assert marker in session.get_context_block("memory").content
    assert session.search(marker)


def _file_bytes(path: Path) -> bytes:
    return b"".join(
        candidate.read_bytes()
        for candidate in (path, Path(f"{path}-wal"), Path(f"{path}-journal"))
        if candidate.exists()
    )


@pytest.mark.parametrize("vacuum", [False, True], ids=["no-vacuum", "vacuum"])
def test_an_erased_session_leaves_no_byte_of_its_text_in_the_sqlite_files(tmp_path, vacuum):
    path = tmp_path / "erase.db"
    gone, kept = _marker(), _marker()
    index = _index()
    store = SqliteStore(path)
    try:
        manager = SessionManager(store, namespace="team").with_semantic_recall(index, background=False)
        doomed, other = manager.create("doomed").id, manager.create("other").id
        write_marked(manager.get_session(doomed), gone)
        write_marked(manager.get_session(other), kept)
        plain = Session(store).for_session("plain")  # a session of the default namespace, untouched
        write_marked(plain, kept)
        manager.drain_recall()
        store.scrub()
        assert gone.encode() in _file_bytes(path) and kept.encode() in _file_bytes(path)
        assert any(gone in text for text in _indexed_texts(index))

        result = manager.erase(doomed, vacuum=vacuum)

        assert result.session_ids == (doomed,) and result.vacuumed == vacuum and result.vectors_pending == 0
        counts = result.counts
        assert (counts.registry, counts.messages, counts.compactions, counts.prompts) == (1, 5, 1, 1)
        assert (counts.blocks, counts.block_versions, counts.search_entries, counts.blobs) == (1, 4, 2, 1)
        assert counts.vectors > 0
        data = _file_bytes(path)
        assert data.count(gone.encode()) == 0
        assert data.count(gone.encode().hex().encode()) == 0  # nor hex-encoded
        assert kept.encode() in data
        assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
        assert not any(gone in text for text in _indexed_texts(index))
        assert any(kept in text for text in _indexed_texts(index))
        assert store.recall_backlog().pending == 0
        assert manager.get(doomed) is None and manager.get_history(doomed) == []
        _reads_back(manager.get_session(other), kept)
        _reads_back(plain, kept)
    finally:
        store.close()
    assert _file_bytes(path).count(gone.encode()) == 0  # closing writes none of it back


def test_erasing_a_plain_session_and_a_namespace(tmp_path):
    path = tmp_path / "erase.db"
    first, second, kept = (_marker() for _ in range(3))
    store = SqliteStore(path)
    try:
        session = Session(store).for_session("alone")
        write_marked(session, first)
        team = SessionManager(store, namespace="team")
        for _ in range(2):
            write_marked(team.get_session(team.create("member").id), second)
        team.append("never-created", msg("x", f"written without create {second}"))
        keeper = Session(store).for_session("keeper")
        write_marked(keeper, kept)
        team_items, kept_items = Items(store, namespace="team"), Items(store)
        team_items.put(("memories", "sam"), "tea", {"content": f"a memory {second}"})
        team_items.put(("memories", "sam"), "tea", {"content": f"rewritten {second}"})  # a version of it
        team_items.put(("memories", "sam"), "gone", {"content": f"deleted {second}"})
        team_items.put(("memories", "sam"), "gone", None)
        kept_items.put(("memories", "sam"), "tea", {"content": f"another tenant {kept}"})

        result = session.erase()
        assert result.session_ids == ("alone",) and result.counts.messages == 5 and result.counts.registry == 0
        assert session.get_history() == [] and session.get_context_block("memory").content == ""
        erased = team.erase_namespace("team")
        assert len(erased.session_ids) == 3 and "never-created" in erased.session_ids
        assert erased.counts.registry == 2 and erased.counts.messages == 11 and erased.counts.blobs == 1
        assert erased.items == 1 and team_items.get(("memories", "sam"), "tea") is None
        assert team_items.versions(("memories", "sam"), "tea") == [] == team_items.versions(("memories", "sam"), "gone")
        assert kept_items.get(("memories", "sam"), "tea").value == {"content": f"another tenant {kept}"}
        assert [item.key for item in kept_items.search(("memories",), query="tenant")] == ["tea"]
        assert team.list_sessions() == []
        data = _file_bytes(path)
        assert data.count(first.encode()) == 0 and data.count(second.encode()) == 0
        _reads_back(keeper, kept)
        assert session.erase().session_ids == ()  # nothing left to erase
    finally:
        store.close()


def test_erasure_on_postgres_leaves_no_row_index_hit_outbox_row_or_vector():
    import psycopg

    gone, kept = _marker(), _marker()
    index = _index()
    with _postgres() as (schema, store):
        manager = SessionManager(store, namespace="team").with_semantic_recall(index, background=False)
        doomed, other = manager.create("doomed").id, manager.create("other").id
        write_marked(manager.get_session(doomed), gone)
        write_marked(manager.get_session(other), kept)
        manager.drain_recall()
        with psycopg.connect(postgres_url()) as conn:
            assert _rows_holding(conn, schema, gone) and _rows_holding(conn, schema, kept)

        result = manager.erase(doomed, vacuum=True)

        assert result.session_ids == (doomed,) and result.vacuumed and result.counts.vectors > 0
        assert (result.counts.messages, result.counts.blobs, result.counts.search_entries) == (5, 1, 2)
        with psycopg.connect(postgres_url()) as conn:
            assert _rows_holding(conn, schema, gone) == {}
            assert set(_rows_holding(conn, schema, kept)) >= {"session_messages", "blobs", "search_entries"}
            conn.execute("SET enable_seqscan = off")  # through the full-text indexes
            for table in ("session_messages", "search_entries"):
                hits = conn.execute(
                    f'SELECT count(*) FROM "{schema}".{table} WHERE search_terms @@ CAST(%s AS tsquery)', (gone,)
                ).fetchone()
                assert hits == (0,), table
            outbox = conn.execute(f'SELECT count(*) FROM "{schema}".recall_outbox').fetchone()
            assert outbox == (0,)
        assert not any(gone in text for text in _indexed_texts(index))
        _reads_back(manager.get_session(other), kept)


def _rows_holding(conn: Any, schema: str, marker: str) -> dict[str, int]:
    """Rows of each table of the schema whose text (bytes as hex) holds ``marker``."""
    found = {}
    for table in TABLES:
        (count,) = conn.execute(
            f'SELECT count(*) FROM "{schema}".{table} t WHERE strpos(CAST(t AS text), %s) > 0'
            " OR strpos(CAST(t AS text), %s) > 0",
            (marker, marker.encode().hex()),
        ).fetchone()
        if count:
            found[table] = count
    return found


def write_marked_messages(session: Any, marker: str, kept: str) -> None:
    """Messages before and after ``marker``'s: the user's message holding it, the assistant's
    tool call quoting it, the tool's result and an attachment holding it, and an overlay
    summarising them; an overlay and messages elsewhere that hold ``kept`` only."""
    session.append_message(msg("k1", f"first words {kept}"))
    session.append_message(msg("u1", f"my card number is {marker} keep it"))
    session.append_message(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [{"type": "tool-call", "toolCallId": "c1", "toolName": "store", "input": {"card": marker}}],
        }
    )
    session.append_message(
        {
            "id": "t1",
            "role": "tool",
            "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "store", "output": {"saved": marker}}],
        }
    )
    payload = b"%PDF-" + marker.encode() + bytes(range(256)) * 20
    session.append_message(
        {
            "id": "f1",
            "role": "user",
            "parts": [{"type": "file", "mediaType": "application/pdf", "data": payload, "filename": "card.pdf"}],
        }
    )
    session.append_message(msg("k2", f"later words {kept}", role="assistant"))
    session.append_message(msg("k3", f"more words {kept}"))
    session.add_compaction(f"the user gave the card {marker}", "u1", "t1")
    session.add_compaction(f"a summary of later words {kept}", "k2", "k3")


MARKED_MESSAGES = ["u1", "a1", "t1", "f1"]


def _later_overlay_only(session: Any, kept: str) -> None:
    """The history once the marked messages are erased: ``k2`` lost its parent, so it is a
    root (as with ``delete_messages``), and the overlay of ``k2``..``k3`` stays over it."""
    history = session.get_history()
    assert len(history) == 1 and history[0].text == f"a summary of later words {kept}"


@pytest.mark.parametrize("vacuum", [False, True], ids=["no-vacuum", "vacuum"])
def test_erased_messages_leave_no_byte_of_their_text_in_the_sqlite_files(tmp_path, vacuum):
    path = tmp_path / "erase.db"
    gone, kept = _marker(), _marker()
    index = _index()
    store = SqliteStore(path)
    try:
        manager = SessionManager(store).with_semantic_recall(index, background=False)
        chat = manager.create("chat").id
        write_marked_messages(manager.get_session(chat), gone, kept)
        other = manager.get_session(manager.create("other").id)
        write_marked_messages(other, kept, kept)
        manager.drain_recall()
        store.scrub()
        assert gone.encode() in _file_bytes(path) and any(gone in text for text in _indexed_texts(index))

        result = manager.erase_messages(chat, [*MARKED_MESSAGES, "never-written"], vacuum=vacuum)

        assert result.session_ids == (chat,) and result.vacuumed == vacuum and result.vectors_pending == 0
        counts = result.counts
        assert (counts.messages, counts.compactions, counts.blobs, counts.registry) == (4, 1, 1, 0)
        assert counts.vectors > 0
        data = _file_bytes(path)
        assert data.count(gone.encode()) == 0 and data.count(gone.encode().hex().encode()) == 0
        assert not Path(f"{path}-wal").exists() or Path(f"{path}-wal").stat().st_size == 0
        assert not any(gone in text for text in _indexed_texts(index))
        assert any(kept in text for text in _indexed_texts(index))
        assert store.recall_backlog().pending == 0
        session = manager.get_session(chat)
        _later_overlay_only(session, kept)
        assert session.get_message("k1").text == f"first words {kept}" and session.get_message("u1") is None
        assert {r.id for r in session.search(kept)} == {"k1", "k2", "k3"} and session.search(gone) == []
        assert len(other.get_history()) == 4 and other.get_message("f1").parts[0].data.startswith(b"%PDF-")
        assert manager.erase_messages(chat, MARKED_MESSAGES).session_ids == ()
    finally:
        store.close()
    assert _file_bytes(path).count(gone.encode()) == 0


def test_erased_messages_on_postgres_leave_no_row_index_hit_outbox_row_or_vector():
    import psycopg

    gone, kept = _marker(), _marker()
    with _postgres() as (schema, store):
        session = Session(store).for_session("chat")  # no recall attached: vectors leave through the outbox
        index = _index()
        manager = SessionManager(store).with_semantic_recall(index, background=False)
        watched = manager.get_session("chat")
        write_marked_messages(watched, gone, kept)
        manager.drain_recall()

        result = session.erase_messages(MARKED_MESSAGES, vacuum=True)

        assert result.session_ids == ("chat",) and result.vacuumed
        assert (result.counts.messages, result.counts.compactions, result.counts.blobs) == (4, 1, 1)
        assert result.vectors_pending == result.counts.vectors > 0
        manager.drain_recall()  # the outbox deletes them from the index
        assert not any(gone in text for text in _indexed_texts(index))
        with psycopg.connect(postgres_url()) as conn:
            assert _rows_holding(conn, schema, gone) == {}
            assert set(_rows_holding(conn, schema, kept)) >= {"session_messages", "session_compactions"}
            conn.execute("SET enable_seqscan = off")
            hits = conn.execute(
                f'SELECT count(*) FROM "{schema}".session_messages WHERE search_terms @@ CAST(%s AS tsquery)',
                (gone,),
            ).fetchone()
            assert hits == (0,)
            assert conn.execute(f'SELECT count(*) FROM "{schema}".recall_outbox').fetchone() == (0,)
        _later_overlay_only(session, kept)
        assert session.get_message("k1").text == f"first words {kept}"


@pytest.mark.parametrize("ids", [[1], [None], ["ok", b"bytes"], ["\ud800"]], ids=["int", "none", "bytes", "surrogate"])
def test_erase_messages_refuses_an_id_that_is_no_text_and_erases_nothing(tmp_path, ids):
    from sessions_core import InvalidInputError

    session = Session(tmp_path / "chat.db").for_session("s")
    session.append_message(msg("ok", "stays"))
    with pytest.raises(InvalidInputError, match="message id"):
        session.erase_messages(ids)
    assert [m.id for m in session.get_history()] == ["ok"]
    assert session.erase_messages([]).session_ids == () and session.erase_messages("gone").session_ids == ()
    session.close()


def test_an_erased_store_item_leaves_no_byte_of_any_of_its_versions_in_the_sqlite_files(tmp_path):
    from langchain_sessions import SessionStore

    path = tmp_path / "memories.db"
    gone, kept = _marker(), _marker()
    store = SessionStore(str(path))
    try:
        store.put(("memories", "sam"), "card", {"content": f"Sam's card is {gone}"})
        store.put(("memories", "sam"), "card", {"content": f"Sam's new card is {gone}"})
        store.delete(("memories", "sam"), "card")  # a delete keeps the values as versions
        store.put(("memories", "sam"), "drink", {"content": f"Sam drinks green tea {kept}"})
        assert gone.encode() in _file_bytes(path) and len(store.item_versions(("memories", "sam"), "card")) == 3

        erased = store.erase_item(("memories", "sam"), "card")

        assert erased.items == 1
        assert store.item_versions(("memories", "sam"), "card") == []
        data = _file_bytes(path)
        assert data.count(gone.encode()) == 0 and kept.encode() in data
        assert [item.key for item in store.search(("memories",), query=kept)] == ["drink"]
    finally:
        store.close()


def test_an_erased_store_item_on_postgres_leaves_no_row_or_index_hit():
    import psycopg

    from langchain_sessions import SessionStore

    gone, kept = _marker(), _marker()
    with _postgres() as (schema, ours):
        items = SessionStore(ours)
        items.put(("memories", "sam"), "card", {"content": f"Sam's card is {gone}"})
        items.put(("memories", "sam"), "card", {"content": f"Sam's new card is {gone}"})
        items.put(("memories", "sam"), "drink", {"content": f"Sam drinks green tea {kept}"})

        assert items.erase_item(("memories", "sam"), "card", vacuum=True).vacuumed

        with psycopg.connect(postgres_url()) as conn:
            assert _rows_holding(conn, schema, gone) == {}
            assert set(_rows_holding(conn, schema, kept)) == {"store_items"}
        assert items.get(("memories", "sam"), "drink") is not None


def _marked_blocks(session: Any, gone: str, kept: str) -> str:
    """A memory block whose every version holds ``gone``, a searchable block with an entry that
    holds it and one that holds ``kept``, and the cached prompt quoting them; the key of the
    entry holding ``gone``."""
    session.with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    session.with_context("kept")
    session.replace_context_block("kept", f"a fact to keep {kept}")
    session.replace_context_block("memory", f"lives at {gone}")
    session.replace_context_block("memory", f"moved from {gone} to the coast")
    tools = {tool.name: tool for tool in session.tools()}
    tools["set_context"].invoke({"label": "notes", "content": f"an entry naming {gone}"})
    tools["set_context"].invoke({"label": "notes", "content": f"an entry to keep {kept}"})
    assert gone in session.freeze_system_prompt()
    [key] = [k for k, content in session.store.search_entries(session.session_id, "notes", gone, 5) if gone in content]
    return key


def test_an_erased_block_leaves_no_byte_of_any_version_in_the_sqlite_files(tmp_path):
    path = tmp_path / "blocks.db"
    gone, kept = _marker(), _marker()
    store = SqliteStore(path)
    try:
        session = Session(store).for_session("s")
        key = _marked_blocks(session, gone, kept)
        assert gone.encode() in _file_bytes(path)

        entry = session.erase_context("notes", key=key)
        block = session.erase_context("memory", vacuum=True)

        assert (entry.counts.search_entries, entry.counts.block_versions) == (1, 1)
        assert (block.counts.blocks, block.counts.block_versions, block.vacuumed) == (1, 2, True)
        data = _file_bytes(path)
        assert data.count(gone.encode()) == 0 and kept.encode() in data
        assert gone not in session.freeze_system_prompt() and kept in session.freeze_system_prompt()
        assert session.get_context_block("kept").content == f"a fact to keep {kept}"
    finally:
        store.close()


def test_an_erased_block_on_postgres_leaves_no_row():
    import psycopg

    gone, kept = _marker(), _marker()
    with _postgres() as (schema, store):
        session = Session(store).for_session("s")
        key = _marked_blocks(session, gone, kept)
        assert session.erase_context("notes", key=key).counts.search_entries == 1
        assert session.erase_context("memory", vacuum=True).counts.block_versions == 2
        with psycopg.connect(postgres_url()) as conn:
            assert _rows_holding(conn, schema, gone) == {}
            assert {"context_block_versions", "search_entries"} <= set(_rows_holding(conn, schema, kept))
