"""Serialised pointers: ``SessionChatStore`` and ``SessionMemory`` reopen the same store from
their ``to_dict()``, in this process and in another one, over SQLite and PostgreSQL, and a
pointer never holds a password (issue 18, defects 2 and 3)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.memory import ChatMemoryBuffer

from llamaindex_sessions import SessionChatStore, SessionMemory
from sessions_core import PostgresStore, Session, SessionManager
from sessions_core.integration import store_url

from ..postgres import postgres_url, require_postgres, temporary_schema

ROOT = Path(__file__).resolve().parents[2]
PASSWORD = "s3cret-pw"


def m(text, role="user"):
    return ChatMessage(role=role, content=text)


def texts(messages):
    return [message.content for message in messages]


def in_another_process(code: str, data: dict, env: dict | None = None) -> str:
    """Run ``code`` with ``data`` (a pointer's JSON) in a fresh interpreter; its stdout."""
    paths = [str(ROOT / "core"), str(ROOT), os.environ.get("PYTHONPATH", "")]
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in paths if p), **(env or {})}
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(data)], capture_output=True, text=True, env=environment, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def with_password(url: str) -> str:
    """The test server's URL with a password in it (trust auth accepts any)."""
    scheme, _, rest = url.partition("://")
    userinfo, at, hosts = rest.rpartition("@")
    user = userinfo.partition(":")[0] if at else "postgres"
    return f"{scheme}://{user}:{PASSWORD}@{hosts if at else rest}"


# -- SessionChatStore (defect 2) ---------------------------------------------------------------


def test_chat_store_serialises_its_store_and_reopens_it(db):
    store = SessionChatStore(SessionManager(db, namespace="team"))
    store.add_message("alice", m("hello"))
    data = store.to_dict()
    json.dumps(data)
    assert (data["class_name"], data["store"], data["namespace"]) == ("SessionChatStore", db, "team")
    assert SessionChatStore.from_dict(data).manager is store.manager  # in-process: the live manager
    data["handle"] = "elsewhere"
    reopened = SessionChatStore.from_dict(data)
    assert reopened.manager is not store.manager
    assert (texts(reopened.get_messages("alice")), reopened.get_keys()) == (["hello"], ["alice"])


def test_chat_store_reopens_in_another_process(db):
    store = SessionChatStore(db)
    store.add_message("alice", m("hello"))
    code = (
        "import json, sys\n"
        "from llamaindex_sessions import SessionChatStore\n"
        "store = SessionChatStore.from_dict(json.loads(sys.argv[1]))\n"
        "print([m.content for m in store.get_messages('alice')])\n"
    )
    assert in_another_process(code, store.to_dict()) == "['hello']"


def test_chat_memory_buffer_over_a_session_chat_store_round_trips(db):
    buffer = ChatMemoryBuffer.from_defaults(chat_store=SessionChatStore(db), chat_store_key="k", token_limit=500)
    buffer.put(m("remember me"))
    data = buffer.to_dict()
    data["chat_store"]["handle"] = "elsewhere"
    again = ChatMemoryBuffer.from_dict(data)
    assert isinstance(again.chat_store, SessionChatStore)
    assert texts(again.get()) == ["remember me"]


def test_chat_store_relative_path_serialises_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert SessionChatStore("chat.db").to_dict()["store"] == str(tmp_path / "chat.db")


# -- PostgreSQL (defect 3): the store is named, never with its password --------------------------


@pytest.fixture
def pg_schema():
    require_postgres()
    with temporary_schema() as schema:
        yield schema


def test_memory_over_postgres_serialises_a_pointer_without_password(pg_schema, tmp_path):
    url = with_password(postgres_url())
    session = Session(PostgresStore(url, schema=pg_schema)).for_session("u1").with_context("memory")
    memory = SessionMemory(session=session)
    memory.put(m("I love trams"))
    data = memory.to_dict()
    assert PASSWORD not in json.dumps(data)
    assert (data["store"], data["store_schema"]) == (store_url(session.store), pg_schema)
    assert data["store"].startswith("postgresql://")

    # Another process reopens it, the password coming from PGPASSFILE as libpq reads it (the
    # server here trusts, so the connection shows the password it would have sent).
    passfile = tmp_path / "pgpass"
    passfile.write_text(f"*:*:*:*:{PASSWORD}\n")
    passfile.chmod(0o600)
    code = (
        "import json, sys, psycopg\n"
        "from llamaindex_sessions import SessionMemory\n"
        "memory = SessionMemory.from_dict(json.loads(sys.argv[1]))\n"
        "print([m.content for m in memory.get_all()], memory.session.store.schema)\n"
        "with psycopg.connect(memory.session.store.url) as conn:\n"
        "    print(conn.info.password)\n"
    )
    output = in_another_process(code, data, env={"PGPASSFILE": str(passfile)})
    assert output.splitlines() == [f"['I love trams'] {pg_schema}", PASSWORD]

    # Given the full URL again (the other way to supply the password), it is used, not kept.
    data["handle"] = "elsewhere"
    reopened = SessionMemory.from_dict(data, store=url)
    try:
        assert texts(reopened.get_all()) == ["I love trams"]
        assert PASSWORD not in json.dumps(reopened.to_dict())
    finally:
        reopened.session.store.close()
        session.store.close()


def test_memory_opened_from_a_url_with_password_never_serialises_it(pg_schema):
    memory = SessionMemory.from_defaults(
        store=with_password(postgres_url()), db_schema=pg_schema, session_id="u2", compaction=False
    )
    try:
        memory.put(m("hello"))
        assert PASSWORD not in memory.to_json()
        assert memory.to_dict()["store_schema"] == pg_schema
    finally:
        memory.session.store.close()


def test_chat_store_over_postgres_reopens_without_password(pg_schema):
    manager = SessionManager(PostgresStore(with_password(postgres_url()), schema=pg_schema))
    store = SessionChatStore(manager)
    store.add_message("alice", m("hello"))
    data = store.to_dict()
    assert PASSWORD not in json.dumps(data)
    code = (
        "import json, sys\n"
        "from llamaindex_sessions import SessionChatStore\n"
        "store = SessionChatStore.from_dict(json.loads(sys.argv[1]))\n"
        "print(store.get_keys(), [m.content for m in store.get_messages('alice')])\n"
    )
    try:
        assert in_another_process(code, data) == "['alice'] ['hello']"
    finally:
        manager.store.close()


def test_a_store_without_address_says_what_to_pass():
    memory = SessionMemory(session=Session().for_session("x"))
    data = memory.to_dict()
    data.update(handle="gone", store=None)
    with pytest.raises(ValueError, match="pass store="):
        SessionMemory.from_dict(data)


def test_a_saved_workflow_context_reopens_a_postgres_memory(pg_schema):
    import asyncio

    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.workflow import Context, JsonSerializer

    from llamaindex_sessions import memory as memory_module

    from .scripted import ScriptedLLM

    store = PostgresStore(with_password(postgres_url()), schema=pg_schema)
    session = Session(store).for_session("ctx").with_context("memory")
    llm = ScriptedLLM(["one", "two"])
    agent = FunctionAgent(tools=[], llm=llm)

    async def go():
        ctx = Context(agent)
        await agent.run(user_msg="first", memory=SessionMemory(session=session), ctx=ctx)
        saved = json.dumps(ctx.to_dict(serializer=JsonSerializer()))
        memory_module._handles.clear()  # as in a fresh process: nothing live
        restored = Context.from_dict(agent, json.loads(saved), serializer=JsonSerializer())
        await agent.run(user_msg="second", ctx=restored)
        return saved, await restored.store.get("memory")

    try:
        saved, reopened = asyncio.run(go())
        assert PASSWORD not in saved
        assert reopened.session is not session and reopened.session.store.schema == pg_schema
        assert texts(reopened.get_all()) == ["first", "one", "second", "two"]
        reopened.session.store.close()
    finally:
        store.close()
