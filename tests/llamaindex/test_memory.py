"""SessionMemory as a BaseMemory: get/put/set/reset, the frozen prompt, the token window,
serialisation, restarts, compaction and thread safety."""

from __future__ import annotations

import asyncio
import copy
import json
import pickle
import subprocess
import sys
import threading

import pytest
from llama_index.core.base.llms.types import ChatMessage, MessageRole, TextBlock, ToolCallBlock
from llama_index.core.memory import BaseMemory

from llamaindex_sessions import SessionMemory, llm_summarizer
from sessions_core import CompactionError, Session, StaticContext, StoreSearchContext

from .scripted import ScriptedLLM


def user(text):
    return ChatMessage(role="user", content=text)


def assistant(text):
    return ChatMessage(role="assistant", content=text)


def roles_and_text(messages):
    return [(m.role.value, m.content) for m in messages]


def turn(i):
    call = ChatMessage(
        role="assistant", blocks=[ToolCallBlock(tool_call_id=f"c{i}", tool_name="lookup", tool_kwargs={"q": i})]
    )
    result = ChatMessage(role="tool", content=f"result {i}", additional_kwargs={"tool_call_id": f"c{i}"})
    return [user(f"question {i} " + "word " * 40), call, result, assistant(f"answer {i} " + "word " * 40)]


# -- basic contract ---------------------------------------------------------------------------


def test_is_a_base_memory_and_always_truthy(session):
    memory = SessionMemory(session=session)
    assert isinstance(memory, BaseMemory)
    assert bool(memory) is True
    assert SessionMemory.from_defaults(session=session).session is session


def test_get_renders_context_then_history(session):
    session.replace_context_block("memory", "User is Ada.")
    memory = SessionMemory(session=session)
    memory.put(user("hello"))
    memory.put(assistant("hi"))
    system, *history = memory.get(input="ignored", initial_token_count=10)
    assert system.role == MessageRole.SYSTEM and "User is Ada." in system.content and "MEMORY" in system.content
    assert roles_and_text(history) == [("user", "hello"), ("assistant", "hi")]
    assert roles_and_text(memory.get_all()) == [("user", "hello"), ("assistant", "hi")]


def test_from_manager_registers_the_session(db):
    from sessions_core import SessionManager

    manager = SessionManager(db, namespace="app").with_context("memory")
    memory = SessionMemory.from_manager(manager, "alice")
    memory.put(user("I love trams"))
    assert [info.id for info in manager.list_sessions()] == ["alice"]
    assert [hit.session_id for hit in manager.search("trams")] == ["alice"]
    assert memory.session is manager.get_session("alice")
    data = memory.to_dict()
    assert data["session_id"] == "app:alice"  # the storage id: a reopened memory reads the same rows
    data["handle"] = "elsewhere"
    assert roles_and_text(SessionMemory.from_dict(data).get_all()) == [("user", "I love trams")]


def test_no_blocks_no_system_message():
    memory = SessionMemory(session=Session().for_session("x"))
    memory.put(user("hello"))
    assert roles_and_text(memory.get()) == [("user", "hello")]


def test_get_returns_fresh_objects(session):
    memory = SessionMemory(session=session)
    memory.put(user("hello"))
    first = memory.get()
    first[-1].blocks[0].text = "mutated by an agent"
    assert memory.get()[-1].content == "hello"


def test_put_messages_stores_a_turn_once_with_tool_pairs(session):
    memory = SessionMemory(session=session)
    memory.put_messages(turn(1))
    stored = session.get_history()
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant"]
    assert stored[2].parts[0].tool_name == "lookup"  # named after its call
    assert memory.get_all() == turn(1)


def test_prompt_frozen_until_the_history_is_written(session):
    memory = SessionMemory(session=session)
    memory.put(user("remember I like tea"))
    before = memory.get()[0].content
    session.replace_context_block("memory", "Likes tea.")  # what set_context does mid-run
    assert memory.get(input="remember I like tea")[0].content == before
    memory.put_messages([assistant("noted")])  # the run ends
    assert "Likes tea." in memory.get()[0].content


def test_insert_method_user(session):
    session.replace_context_block("memory", "Likes tea.")
    memory = SessionMemory(session=session, insert_method="user")
    memory.put(user("hi"))
    (message,) = memory.get()
    assert message.role == MessageRole.USER
    assert "Likes tea." in message.blocks[0].text and message.blocks[1].text == "hi"
    assert memory.get_all()[0].blocks == [TextBlock(text="hi")]  # nothing stored


# -- set and reset -------------------------------------------------------------------------------


def test_set_with_the_same_history_stores_nothing(session):
    memory = SessionMemory(session=session)
    memory.put_messages(turn(1))
    memory.set(memory.get_all())
    memory.set(memory.get())  # what get() returned, rendered context included
    memory.set(turn(1))  # fresh but equal objects
    assert session.get_path_length() == 4
    assert len(session.search("question")) == 1


def test_set_extends_or_branches_never_deletes(session):
    memory = SessionMemory(session=session)
    memory.put_messages(turn(1))
    memory.set([*turn(1), user("follow-up")])
    assert roles_and_text(memory.get_all())[-1] == ("user", "follow-up")
    assert session.get_path_length() == 5

    memory.set([user("a different start")])
    assert roles_and_text(memory.get_all()) == [("user", "a different start")]
    assert len(session.search("question")) == 1  # the old branch is still stored
    memory.set(turn(1)[:2])  # back to a prefix of the old branch
    assert memory.get_all() == turn(1)[:2]


def test_memorys_status_argument_is_refused_with_what_to_do_instead(session):
    """``Memory.get_all(status=...)`` / ``areset(status=...)`` (upstream's ``test_aget_all``,
    ``test_areset``): no message here is archived, so the spelling is refused as
    ``from_defaults`` refuses its own (a ``TypeError`` saying what to use), sync and async."""
    from llama_index.core.storage.chat_store.base_db import MessageStatus

    memory = SessionMemory(session=session)
    memory.put(user("kept"))
    calls = {
        "get_all": lambda: memory.get_all(status=MessageStatus.ACTIVE),
        "reset": lambda: memory.reset(status=MessageStatus.ARCHIVED),
        "aget_all": lambda: asyncio.run(memory.aget_all(status=MessageStatus.ACTIVE)),
        "areset": lambda: asyncio.run(memory.areset(status=None)),
    }
    for name, call in calls.items():
        with pytest.raises(TypeError, match=r"unexpected keyword arguments? status \(status: .*archived") as error:
            call()
        assert f"SessionMemory.{name.removeprefix('a')}" in str(error.value)
        assert "get_all()" in str(error.value) and "reset()" in str(error.value)
    assert roles_and_text(memory.get_all()) == [("user", "kept")]  # nothing was reset


def test_reset_is_soft(session):
    memory = SessionMemory(session=session)
    memory.put_messages(turn(1))
    session.replace_context_block("memory", "Kept.")
    memory.reset()
    assert memory.get_all() == []
    assert roles_and_text(memory.get()[1:]) == []
    assert "Kept." in memory.get()[0].content
    assert session.search("question")  # searchable, not wiped
    memory.put(user("again"))
    assert roles_and_text(memory.get_all()) == [("user", "again")]


# -- token window --------------------------------------------------------------------------------


def test_window_keeps_newest_turns_and_never_splits_a_tool_pair():
    session = Session().for_session("w")
    memory = SessionMemory(session=session, token_limit=250, compaction=False)
    for i in range(6):
        memory.put_messages(turn(i))
    window = memory.get()
    assert window[0].role == MessageRole.USER
    assert window[-1].content.startswith("answer 5")
    assert len(window) < 24
    calls = {b.tool_call_id for m in window for b in m.blocks if isinstance(b, ToolCallBlock)}
    results = {m.additional_kwargs["tool_call_id"] for m in window if m.role == MessageRole.TOOL}
    assert calls == results
    assert len(memory.get_all()) == 24


def test_window_starts_with_the_user_even_when_the_newest_turn_alone_is_over_the_limit():
    """llama-index-core's ``test_manage_queue_first_message_must_be_user``: a large user message
    and a small answer over ``token_limit``. As ``Memory``, the newest turn is kept whole (from
    its user message) rather than an answer without its question (which Bedrock rejects)."""
    memory = SessionMemory(session=Session().for_session("w"), token_limit=50, compaction=False)
    memory.put_messages([user("x " * 100), assistant("ok")])
    window = memory.get()
    assert roles_and_text(window) == [("user", "x " * 100), ("assistant", "ok")]
    assert window == memory.get()  # the cached window too

    # A tool turn: the user, the call, its result (upstream's test_manage_queue_only_tool_message_remaining).
    memory.put_messages([*turn(1)[:3]])
    assert [m.role for m in memory.get()] == [MessageRole.USER, MessageRole.ASSISTANT, MessageRole.TOOL]
    memory.put_messages([assistant("done"), user("y " * 100), *turn(2)[1:3], assistant("z " * 60)])
    window = memory.get()
    assert window[0].role == MessageRole.USER and window[0].content == "y " * 100
    assert [m.role for m in window[1:]] == [MessageRole.ASSISTANT, MessageRole.TOOL, MessageRole.ASSISTANT]
    assert memory.get(initial_token_count=50)[0].content == "y " * 100  # no room at all: still the whole turn

    # Without any user message on the branch, the newest message stays, no tool result first.
    alone = SessionMemory(session=Session().for_session("a"), token_limit=30, compaction=False)
    alone.put_messages([assistant("a " * 20), assistant("b " * 20)])
    assert roles_and_text(alone.get()) == [("assistant", "b " * 20)]
    alone.put_messages([user("q"), assistant("r")])  # the window read from the last one, as a fresh read
    fresh = SessionMemory(session=alone.session, token_limit=30, compaction=False, handle="fresh")
    assert roles_and_text(alone.get()) == roles_and_text(fresh.get()) == [("user", "q"), ("assistant", "r")]


def test_window_counts_tool_arguments():
    session = Session().for_session("w")
    memory = SessionMemory(session=session, token_limit=300, compaction=False)
    big = {"text": "lorem ipsum " * 200}
    memory.put_messages(
        [
            user("first"),
            ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="save", tool_kwargs=big)]),
            ChatMessage(role="tool", content="ok", additional_kwargs={"tool_call_id": "c1"}),
            assistant("saved"),
            user("second"),
        ]
    )
    assert roles_and_text(memory.get()) == [("user", "second")]


def test_initial_token_count_shrinks_the_budget():
    memory = SessionMemory(session=Session().for_session("w"), token_limit=200, compaction=False)
    for i in range(3):
        memory.put_messages(turn(i))
    assert len(memory.get(initial_token_count=150)) < len(memory.get())
    assert memory.get(initial_token_count=200)[-1].content.startswith("answer 2")  # no room: the newest message


def test_initial_token_count_over_the_limit_raises_as_chat_memory_buffer_does():
    memory = SessionMemory(session=Session().for_session("w"), token_limit=200)
    memory.put(user("hello"))
    with pytest.raises(ValueError, match="^Initial token count exceeds token limit$"):
        memory.get(initial_token_count=201)


# -- serialisation, restarts ------------------------------------------------------------------------


def test_serialises_as_a_pointer(session, db):
    memory = SessionMemory(session=session, token_limit=1234)
    data = memory.to_dict()
    json.dumps(data)
    assert data["class_name"] == "SessionMemory"
    assert (data["store"], data["session_id"], data["token_limit"]) == (db, "user-1", 1234)
    assert data["blocks"] == [
        {"label": "memory", "description": "Learned facts", "max_tokens": 500, "kind": "writable"}
    ]
    assert "tokenizer_fn" not in data


def test_rebuilt_in_process_shares_the_live_session(session):
    memory = SessionMemory(session=session)
    again = SessionMemory.from_dict(memory.to_dict())
    assert again.session is session
    assert copy.deepcopy(memory) is memory
    assert pickle.loads(pickle.dumps(memory)).session is session


class NotedMemory(SessionMemory):
    """A subclass with a field of its own, as users write them (module level, so pickle finds it)."""

    note: str = "none"

    def get(self, input=None, initial_token_count=0, **kwargs):
        return [ChatMessage(role="user", content=self.note), *super().get(input, initial_token_count, **kwargs)]


def test_a_subclass_pickles_as_itself(session, db):
    memory = NotedMemory(session=session, note="kept", token_limit=777)
    again = pickle.loads(pickle.dumps(memory))
    assert type(again) is NotedMemory
    assert (again.note, again.token_limit, again.session) == ("kept", 777, session)
    assert again.get()[0].content == "kept"
    reopened = pickle.loads(pickle.dumps(NotedMemory.from_dict({**memory.to_dict(), "handle": "elsewhere"})))
    assert type(reopened) is NotedMemory and reopened.session is not session and reopened.note == "kept"
    assert type(pickle.loads(pickle.dumps(SessionMemory(session=session)))) is SessionMemory


def test_rebuilt_without_the_live_session_reopens_the_store(session, db):
    session.replace_context_block("memory", "User is Ada.")
    memory = SessionMemory(session=session)
    memory.put(user("hello"))
    data = memory.to_dict()
    data["handle"] = "not-live"
    reopened = SessionMemory.from_dict(data)
    assert reopened.session is not session
    assert roles_and_text(reopened.get_all()) == [("user", "hello")]
    assert "User is Ada." in reopened.get()[0].content
    assert [t.metadata.name for t in reopened.tools()] == ["set_context"]


def test_a_rebuilt_in_memory_store_warns_that_history_is_gone(caplog):
    memory = SessionMemory(session=Session().for_session("m"))
    memory.put(user("hello"))
    data = memory.to_dict()
    assert data["store"] == ":memory:"
    data["handle"] = "gone"
    assert SessionMemory.from_dict(data).get_all() == []
    assert "':memory:' store: the history is not there" in caplog.text


def test_block_declarations_round_trip(db):
    session = (
        Session(db)
        .for_session("s")
        .with_context("soul", provider=StaticContext("You are kind."))
        .with_context("notes", provider=StoreSearchContext(), description="Notes")
        .with_context("memory", max_tokens=100)
    )
    data = SessionMemory(session=session).to_dict()
    data["handle"] = "elsewhere"
    rebuilt = SessionMemory.from_dict(data).session
    assert [(b.label, b.writable, b.is_searchable) for b in rebuilt.get_context_blocks()] == [
        ("soul", False, False),
        ("notes", True, True),
        ("memory", True, False),
    ]
    assert rebuilt.get_context_block("soul").content == "You are kind."


def test_history_survives_a_process_restart(db):
    code = (
        "import sys\n"
        "from llama_index.core.base.llms.types import ChatMessage, ToolCallBlock\n"
        "from llamaindex_sessions import SessionMemory\n"
        "m = SessionMemory.from_defaults(store=sys.argv[1], session_id='u', blocks=['memory'])\n"
        "m.put_messages([ChatMessage(role='user', content='hello'),\n"
        "  ChatMessage(role='assistant',"
        " blocks=[ToolCallBlock(tool_call_id='c1', tool_name='f', tool_kwargs={'a': 1})]),\n"
        "  ChatMessage(role='tool', content='1', additional_kwargs={'tool_call_id': 'c1'})])\n"
        "m.session.replace_context_block('memory', 'Written before the restart.')\n"
        "print(m.to_json())\n"
    )
    out = subprocess.run([sys.executable, "-c", code, db], capture_output=True, text=True, check=True).stdout
    memory = SessionMemory.from_json(out.strip().splitlines()[-1])
    history = memory.get_all()
    assert [m.role.value for m in history] == ["user", "assistant", "tool"]
    assert history[1].blocks == [ToolCallBlock(tool_call_id="c1", tool_name="f", tool_kwargs={"a": 1})]
    assert "Written before the restart." in memory.get()[0].content


# -- compaction ------------------------------------------------------------------------------------


def summary_llm(text="SUMMARY: the user asked questions 0-3 and got answers."):
    return ScriptedLLM(fallback=text)


def test_compacts_with_the_bound_llm_after_a_turn(session):
    llm = summary_llm()
    memory = SessionMemory(session=session, token_limit=600, llm=llm)
    for i in range(6):
        memory.put_messages(turn(i))
    assert session.get_compactions(), "compaction should have run"
    assert llm.calls and "CONVERSATION TO SUMMARIZE" in llm.calls[0].messages[-1].content
    texts = [m.content or "" for m in memory.get()]
    assert any(t.startswith("SUMMARY:") for t in texts)
    assert len(memory.get_all()) == 24  # originals kept
    assert session.search("question")


def test_compaction_failure_keeps_the_full_history(session, caplog):
    failing = ScriptedLLM(fallback=lambda messages, tools: (_ for _ in ()).throw(RuntimeError("model down")))
    memory = SessionMemory(session=session, token_limit=600, llm=failing)
    for i in range(6):
        memory.put_messages(turn(i))
    assert session.get_compactions() == []
    assert len(memory.get_all()) == 24
    assert "history kept whole" in caplog.text
    from sessions_core import CompactionError

    with pytest.raises(CompactionError):
        memory.compact()


def test_without_an_llm_settings_llm_is_used_and_its_absence_is_safe(session, monkeypatch, caplog):
    from llama_index.core import Settings

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setattr(Settings, "_llm", None)
    memory = SessionMemory(session=session, token_limit=600)
    for i in range(6):
        memory.put_messages(turn(i))  # no LLM anywhere: the writes still succeed
    assert session.get_compactions() == [] and len(memory.get_all()) == 24
    assert "OPENAI_API_KEY" in caplog.text

    monkeypatch.setattr(Settings, "_llm", summary_llm())
    memory.put_messages(turn(6))
    assert session.get_compactions()


def test_bind_takes_the_llm_of_an_agent_or_engine(session):
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.chat_engine import SimpleChatEngine

    llm = summary_llm()
    memory = SessionMemory(session=session)
    assert memory.bind(FunctionAgent(tools=[], llm=llm)).llm is llm
    other = summary_llm()
    assert memory.bind(SimpleChatEngine.from_defaults(llm=other, memory=memory)).llm is other


def test_llm_summarizer_sync_and_async():
    llm = summary_llm("short summary")
    assert llm_summarizer(llm)("prompt") == "short summary"
    assert asyncio.run(llm_summarizer(llm, use_async=True)("prompt")) == "short summary"
    with pytest.raises(CompactionError, match="returned no text"):
        llm_summarizer(ScriptedLLM(fallback="  "))("prompt")


# -- async and threads -----------------------------------------------------------------------------


def test_async_methods(session):
    memory = SessionMemory(session=session)

    async def go():
        await memory.aput(user("one"))
        await memory.aput_messages([assistant("two"), user("three")])
        got = await memory.aget()
        await memory.aset([user("one")])
        kept = await memory.aget_all()
        await memory.areset()
        return got, kept, await memory.aget_all()

    got, kept, after = asyncio.run(go())
    assert roles_and_text(got[1:]) == [("user", "one"), ("assistant", "two"), ("user", "three")]
    assert roles_and_text(kept) == [("user", "one")]
    assert after == []


def test_thread_safe_under_concurrent_writers_and_readers(db):
    session = Session(db).for_session("t").with_context("memory")
    memory = SessionMemory(session=session, compaction=False)
    errors = []

    def writer(n):
        try:
            for i in range(20):
                memory.put_messages([user(f"w{n}-{i}"), assistant(f"r{n}-{i}")])
        except Exception as error:  # pragma: no cover - reported below
            errors.append(error)

    def reader():
        try:
            for _ in range(30):
                memory.get()
                memory.get_all()
        except Exception as error:  # pragma: no cover
            errors.append(error)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(4)] + [
        threading.Thread(target=reader) for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    history = memory.get_all()
    assert len(history) == 160
    for i in range(0, 160, 2):  # each turn's pair stayed together
        assert history[i].content[1:] == history[i + 1].content[1:]


# -- issue 18: what users of Memory / ChatMemoryBuffer type first --------------------------------


def test_from_defaults_takes_the_memory_spelling():
    memory = SessionMemory.from_defaults(session_id="u1")
    memory.put(user("hello"))
    assert (memory.session_id, memory.store, roles_and_text(memory.get())) == ("u1", ":memory:", [("user", "hello")])
    assert SessionMemory.from_defaults().session_id  # a new id, as Memory.from_defaults makes one
    assert SessionMemory().get() == []  # as ChatMemoryBuffer(): an empty memory


def test_from_defaults_takes_the_chat_memory_buffer_spellings(db):
    from llama_index.core.memory.memory import InsertMethod

    from llamaindex_sessions import SessionChatStore

    store = SessionChatStore(db)
    memory = SessionMemory.from_defaults(
        chat_store=store,
        chat_store_key="carol",
        chat_history=[user("hi")],
        token_limit=900,
        tokenizer_fn=str.split,
        insert_method=InsertMethod.USER,
    )
    assert (memory.session_id, memory.token_limit, memory.insert_method) == ("carol", 900, "user")
    assert roles_and_text(store.get_messages("carol")) == [("user", "hi")]
    assert SessionMemory.from_defaults(chat_store=store).session_id == "chat_history"  # ChatMemoryBuffer's key
    llm = ScriptedLLM(fallback="x")
    assert SessionMemory.from_defaults(llm=llm).token_limit == int(llm.metadata.context_window * 0.75)
    uri = SessionMemory.from_defaults(async_database_uri=f"sqlite+aiosqlite:///{db}", session_id="d")
    assert uri.store == db


def test_a_path_url_or_manager_is_accepted_where_a_session_is(db):
    from sessions_core import SessionManager

    by_path = SessionMemory(db, session_id="u1")
    by_path.put(user("hello"))
    assert by_path.store == db
    manager = SessionManager(db)
    by_manager = SessionMemory(manager, session_id="u1")
    assert roles_and_text(by_manager.get_all()) == [("user", "hello")]
    assert manager.get("u1") is not None  # registered, so session_search finds it
    by_manager_path = SessionMemory.from_manager(db, "u1")
    assert roles_and_text(by_manager_path.get_all()) == [("user", "hello")]


def test_a_memory_over_a_manager_registers_its_session_again_after_the_manager_deleted_it():
    from sessions_core import SessionManager

    manager = SessionManager()
    memory = SessionMemory(manager, session_id="u1")
    memory.put(user("hello"))
    assert manager.delete("u1")
    assert manager.get("u1") is None
    memory.put(user("again"))
    assert manager.get("u1") is not None
    assert roles_and_text(memory.get_all()) == [("user", "again")]
    memory.set([user("set anew")])
    assert [info.id for info in manager.list_sessions()] == ["u1"]


@pytest.mark.parametrize(
    ("kwargs", "error", "says"),
    [
        ({"store": "chat.db"}, ValueError, "needs session_id="),
        ({"memory_blocks": []}, TypeError, "blocks=\\['memory'"),
        ({"token_flush_size": 10}, TypeError, "compact_threshold="),
        ({"async_engine": object()}, TypeError, "pass store="),
        ({"chat_store": object()}, TypeError, "chat_store must be a SessionChatStore"),
        ({"nonsense": 1}, TypeError, "it takes session="),
        ({"async_database_uri": "mysql://u:pw@h/db"}, ValueError, "sqlite:// or postgresql://"),
        ({"async_database_uri": "mysql://u@h/db?password=pw"}, ValueError, "password=\\*\\*\\*"),
    ],
)
def test_every_refusal_says_what_to_pass(kwargs, error, says, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=says) as raised:
        SessionMemory.from_defaults(**kwargs)
    assert "pw" not in str(raised.value)


def test_refusals_of_the_constructor():
    with pytest.raises(ValueError, match="needs session_id="):
        from sessions_core import SessionManager

        SessionMemory(SessionManager())
    with pytest.raises(TypeError, match="a SQLite path or a postgresql:// URL"):
        SessionMemory(42)
    with pytest.raises(TypeError, match="for a Session use SessionMemory"):
        SessionMemory.from_manager(Session(), "u1")


def test_tiny_token_limits_behave_as_chat_memory_buffer():
    from llama_index.core.memory import ChatMemoryBuffer

    history = [user("first message"), assistant("first answer"), user("second message"), assistant("second answer")]
    for limit in range(1, 12):
        for initial in range(0, limit + 1):
            buffer = ChatMemoryBuffer.from_defaults(token_limit=limit, chat_history=history)
            ours = SessionMemory.from_defaults(token_limit=limit, chat_history=history, compaction=False)
            expected = roles_and_text(buffer.get(initial_token_count=initial))
            if expected and expected[0][0] != "user":  # the buffer's newest message alone: an answer
                expected = roles_and_text(history[-2:])  # ours, as Memory: the newest turn whole
            assert roles_and_text(ours.get(initial_token_count=initial)) == expected, (limit, initial)


# -- one read of the stored branch, then the window it read (issue 20) ------------------------


def _fresh_get(session: Session, **options) -> list:
    """What a memory that never read this session before returns (no window kept)."""
    other = Session(session.store).for_session(session.session_id)
    for config in session.context_configs:
        other.with_context(
            config.label, description=config.description, max_tokens=config.max_tokens, provider=config.provider
        )
    return roles_and_text(SessionMemory(session=other, compaction=False, **options).get())


def test_the_kept_window_reads_as_a_fresh_read_whatever_else_writes(tmp_path):
    """A memory reuses the window it read while only it appends; any other write (another
    process's append, an update, a delete, a compaction, set, reset) is seen at the next get."""
    import random

    from sessions_core import reads

    path = str(tmp_path / "memory.db")
    session = Session(path).for_session("s")
    elsewhere = Session(path).for_session("s")  # another process, as far as the memory can tell
    memory = SessionMemory(session=session, token_limit=600, compaction=False)
    rng = random.Random(4)
    plans = []
    original = reads.plan
    reads.plan = lambda *a, **k: plans.append(1) or original(*a, **k)
    try:
        for step in range(120):
            action = rng.choice(
                [
                    "put",
                    "put",
                    "put",
                    "turn",
                    "elsewhere",
                    "update",
                    "delete",
                    "compact",
                    "set",
                    "reset",
                    "none",
                    "none",
                ]
            )
            history = [m for m in session.get_history() if not m.id.startswith("compaction_")]
            if action == "put":
                memory.put(rng.choice([user, assistant])(f"step {step} " + "word " * rng.randint(1, 60)))
            elif action == "turn":
                memory.put_messages(turn(step))
            elif action == "elsewhere":
                elsewhere.append_message(
                    {"id": f"e{step}", "role": "user", "parts": [{"type": "text", "text": f"from elsewhere {step}"}]}
                )
            elif action == "update" and history:
                target = rng.choice(history)
                session.update_message({**target.to_dict(), "parts": [{"type": "text", "text": f"edited {step}"}]})
            elif action == "delete" and history:
                session.delete_messages([rng.choice(history).id])
            elif action == "compact" and len(history) > 6:
                session.add_compaction(f"summary {step}", history[1].id, history[len(history) // 2].id)
            elif action == "set":
                memory.set([user(f"set {step}"), assistant("ok")])
            elif action == "reset":
                memory.reset()
            else:
                action = "none"
            kept = step > 0 and action in ("put", "turn", "none")  # the last window still holds
            before = len(plans)
            got = roles_and_text(memory.get())
            assert len(plans) == (before if kept else before + 1), (step, action)
            assert got == _fresh_get(session, token_limit=600), (step, action)
    finally:
        reads.plan = original


def test_an_agent_run_reads_the_stored_branch_once(session):
    """FunctionAgent asks its memory for the history before every LLM call; a tool loop of two
    calls reads the stored branch once, and the next run (nothing else wrote) not at all."""
    from llama_index.core.agent.workflow import FunctionAgent
    from llama_index.core.tools import FunctionTool

    from sessions_core import reads

    from .scripted import tool_call

    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    memory = SessionMemory(session=session, compaction=False)
    for i in range(3):
        memory.put_messages(turn(i))
    llm = ScriptedLLM([tool_call("lookup", {"q": "x"}), "Done.", "Again."])
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(lookup)], llm=llm)
    plans = []
    original = reads.plan
    reads.plan = lambda *a, **k: plans.append(1) or original(*a, **k)
    counts = []

    async def two_runs() -> None:
        await agent.run(user_msg="look it up", memory=memory)
        counts.append(len(plans))
        await agent.run(user_msg="and again", memory=memory)

    try:
        asyncio.run(two_runs())
        first = counts[0]
    finally:
        reads.plan = original
    assert len(llm.calls) == 3 and first == 1 and len(plans) == 1
    assert roles_and_text(memory.get()) == _fresh_get(session)
    assert [m.role for m in session.get_history()][-6:] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
        "assistant",
    ]


def test_a_block_the_model_overwrote_is_restored_and_the_next_run_shows_it(session):
    """Issue 21, through a FunctionAgent: the model's set_context is a version; the code restores
    the older one, and the next run's system message holds the restored text."""
    from llama_index.core.agent.workflow import FunctionAgent

    from llamaindex_sessions import SessionToolSpec

    from .scripted import tool_call

    session.replace_context_block("memory", "User is Ada.")
    memory = SessionMemory(session=session, compaction=False)
    llm = ScriptedLLM(
        [tool_call("set_context", {"label": "memory", "content": "User is Bob."}), "Noted.", "Hello Ada."]
    )
    agent = FunctionAgent(tools=SessionToolSpec(session).to_tool_list(), llm=llm)

    async def runs() -> None:
        await agent.run(user_msg="Call me Bob.", memory=memory)
        assert session.get_context_history("memory", limit=1)[0].content == "User is Bob."
        assert session.get_context_history("memory", limit=1)[0].source == "tool"
        session.restore_context("memory", 1)
        await agent.run(user_msg="Who am I?", memory=memory)

    asyncio.run(runs())
    system = llm.calls[-1].messages[0]
    assert system.role == MessageRole.SYSTEM and "User is Ada." in system.content
    assert "User is Bob." not in system.content


def test_each_message_is_counted_once_while_the_window_is_kept(session):
    """``get`` before every LLM call counts only what is new; another tokenizer counts afresh."""
    counted: list[str] = []

    def tokenizer(text: str) -> list[str]:
        counted.append(text)
        return text.split()

    memory = SessionMemory(session=session, compaction=False, tokenizer_fn=tokenizer)
    memory.put_messages([user("one two"), assistant("three")])
    first = roles_and_text(memory.get())
    after_first = len(counted)
    assert roles_and_text(memory.get()) == first and len(counted) == after_first
    memory.put(user("four five six"))
    assert roles_and_text(memory.get())[-1] == ("user", "four five six")
    assert len(counted) == after_first + 1
    memory.tokenizer_fn = lambda text: counted.append(text) or text.split()
    assert roles_and_text(memory.get()) == roles_and_text(SessionMemory(session=session, compaction=False).get())
    assert len(counted) == after_first + 1 + 4  # the rendered context and the three messages again


def test_a_redactor_masks_what_the_memory_stores(db):
    from sessions_core import PIIRedactor

    memory = SessionMemory.from_defaults(store=db, session_id="u", redactor=PIIRedactor())
    memory.put(user("write to ada@example.com"))
    memory.put(assistant("I will mail ada@example.com"))
    assert [m.content for m in memory.get_all()] == ["write to [EMAIL]", "I will mail [EMAIL]"]
    stored = memory.session.get_history()
    assert [m.metadata["redacted"] for m in stored] == [{"email": 1}, {"email": 1}]
    memory.put(user("and again"))  # the stored copies are not written twice
    assert len(memory.session.get_history()) == 3


def test_a_memory_on_an_encrypted_file_reopens_from_its_pointer_with_the_key(tmp_path):
    pytest.importorskip("sqlcipher3")
    from sessions_core import EncryptionKeyError

    path = str(tmp_path / "vault.db")
    memory = SessionMemory.from_defaults(store=path, session_id="u", key="s3cret")
    memory.put(user("my PIN is 4321"))
    data = memory.to_dict()
    assert "s3cret" not in json.dumps(data)
    memory.session.close()
    reopened = SessionMemory.from_dict({**data, "handle": "elsewhere"}, key="s3cret")
    assert [m.content for m in reopened.get_all()] == ["my PIN is 4321"]
    with pytest.raises(EncryptionKeyError):
        SessionMemory.from_dict({**data, "handle": "nokey"}).get_all()
    assert b"my PIN is 4321" not in (tmp_path / "vault.db").read_bytes()  # a few bytes alone can occur in ciphertext
