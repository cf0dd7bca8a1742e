"""SessionMemoryMiddleware in real create_agent loops, driven by a scripted chat model."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from langchain_sessions import SessionMemoryMiddleware, to_langchain_messages
from sessions_core import Session, SessionManager

from .helpers import ScriptedChatModel, call

CONFIG = {"configurable": {"thread_id": "thread-1"}}


def remember_tea():
    return [
        call("set_context", {"label": "memory", "content": "The user likes tea."}, "call_1"),
        AIMessage("Noted: you like tea."),
    ]


def system_text(model_call):
    first = model_call[0]
    assert isinstance(first, SystemMessage)
    return first.text


def stored_ids(session):
    return [m.id for m in session.get_history()]


def assert_no_duplicates(messages):
    ids = [m.id for m in messages]
    assert len(ids) == len(set(ids)), ids


@pytest.mark.parametrize("checkpointer", [None, "memory"])
def test_sync_agent_remembers_and_sees_its_write_next_run(session, checkpointer):
    model = ScriptedChatModel(responses=[*remember_tea(), AIMessage("You like tea.")])
    agent = create_agent(
        model,
        system_prompt="You are helpful.",
        middleware=[SessionMemoryMiddleware(session)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )
    first = agent.invoke({"messages": [HumanMessage("Remember that I like tea.")]}, CONFIG)
    assert [m.type for m in first["messages"]] == ["human", "ai", "tool", "ai"]
    tool_message = first["messages"][2]
    assert isinstance(tool_message, ToolMessage) and tool_message.content.startswith("Written to memory.")
    assert session.get_context_block("memory").content == "The user likes tea."

    # The tool is registered and offered; the user's system prompt is kept, blocks appended.
    assert "set_context" in [t.name for t in model.bound_tools]
    assert system_text(model.calls[0]).startswith("You are helpful.\n\n")
    assert "MEMORY (Facts about the user)" in system_text(model.calls[0])
    # Frozen for the run: the write does not show until the next run.
    assert "likes tea" not in system_text(model.calls[1])

    second = agent.invoke({"messages": [HumanMessage("What do I like?")]}, CONFIG)
    assert "The user likes tea." in system_text(model.calls[2])
    assert second["messages"][-1].content == "You like tea."

    # The model saw the whole conversation once; everything is stored once.
    seen = model.calls[2][1:]
    assert [m.type for m in seen] == ["human", "ai", "tool", "ai", "human"]
    assert_no_duplicates(seen)
    history = session.get_history()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert stored_ids(session) == [m.id for m in [*seen, second["messages"][-1]]]
    assert to_langchain_messages(history) == [*seen, second["messages"][-1]]
    if checkpointer:
        assert second["messages"] == [*seen, second["messages"][-1]]
    else:  # the stored history is shown to the model, never written into the state
        assert [m.type for m in second["messages"]] == ["human", "ai"]


@pytest.mark.parametrize("checkpointer", [None, "memory"])
def test_async_agent_ainvoke_and_astream(session, checkpointer):
    model = ScriptedChatModel(responses=[*remember_tea(), AIMessage("Tea, as noted.")])
    agent = create_agent(
        model,
        middleware=[SessionMemoryMiddleware(session)],
        checkpointer=InMemorySaver() if checkpointer else None,
    )

    async def run():
        first = await agent.ainvoke({"messages": [HumanMessage("I like tea.")]}, CONFIG)
        streamed = []
        async for chunk, meta in agent.astream(
            {"messages": [HumanMessage("What do I like?")]}, CONFIG, stream_mode="messages"
        ):
            streamed.append((type(chunk).__name__, meta["langgraph_node"], chunk.text))
        return first, streamed

    first, streamed = asyncio.run(run())
    assert first["messages"][-1].content == "Noted: you like tea."
    assert ("AIMessage", "model", "Tea, as noted.") in streamed or any(
        node == "model" and text == "Tea, as noted." for _, node, text in streamed
    )
    assert "The user likes tea." in system_text(model.calls[2])
    assert "likes tea" not in system_text(model.calls[0])
    seen = model.calls[2][1:]
    assert [m.type for m in seen] == ["human", "ai", "tool", "ai", "human"]
    assert_no_duplicates(seen)
    assert [m.role for m in session.get_history()] == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_loaded_history_does_not_stream_again(session):
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)])
    agent.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    streamed = [
        (type(m).__name__, meta["langgraph_node"], m.text)
        for m, meta in agent.stream({"messages": [HumanMessage("q2")]}, CONFIG, stream_mode="messages")
    ]
    assert streamed == [("AIMessage", "model", "a2")]
    assert [m.text for m in model.calls[1][1:]] == ["q1", "a1", "q2"]


def test_a_new_thread_on_a_used_session_sees_what_came_before(session):
    """A checkpointer and two threads sharing one session (e.g. by a user id)."""
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2"), AIMessage("a3")])
    agent = create_agent(
        model, middleware=[SessionMemoryMiddleware(session, default_session_id="x")], checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [HumanMessage("q1")]}, {"configurable": {"thread_id": "A"}})
    agent.invoke({"messages": [HumanMessage("q2")]}, {"configurable": {"thread_id": "B"}})
    agent.invoke({"messages": [HumanMessage("q3")]}, {"configurable": {"thread_id": "B"}})
    assert [m.text for m in model.calls[1][1:]] == ["q1", "a1", "q2"]
    assert [m.text for m in model.calls[2][1:]] == ["q1", "a1", "q2", "a2", "q3"]
    assert [m.text for m in session.get_history()] == ["q1", "a1", "q2", "a2", "q3", "a3"]


def test_a_resent_input_is_not_stored_twice_and_still_sees_the_history(session):
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2"), AIMessage("a2 again")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)])
    agent.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("q2", id="q2")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("q2", id="q2")]}, CONFIG)  # a client retry
    assert [m.text for m in model.calls[2][1:]] == ["q1", "a1", "q2"]
    assert [m.text for m in session.get_history()] == ["q1", "a1", "q2", "a2 again"]
    assert [m.text for m in session.get_branches("q2")] == ["a2", "a2 again"]


def test_no_message_is_stored_twice_across_turns_with_a_checkpointer(session):
    model = ScriptedChatModel(responses=[AIMessage(f"answer {i}") for i in range(4)])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)], checkpointer=InMemorySaver())
    for i in range(4):
        out = agent.invoke({"messages": [HumanMessage(f"question {i}")]}, CONFIG)
    assert len(out["messages"]) == 8
    assert stored_ids(session) == [m.id for m in out["messages"]]
    assert session.get_path_length() == 8
    # The last call saw each message once (nothing loaded on top of the checkpoint).
    assert [m.content for m in model.calls[-1][1:]] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
        "answer 2",
        "question 3",
    ]


def test_a_rewound_thread_branches_in_the_store(session):
    saver = InMemorySaver()
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2"), AIMessage("a2-alt")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)], checkpointer=saver)
    agent.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    after_first = next(
        s for s in agent.get_state_history(CONFIG) if len(s.values.get("messages", [])) == 2 and not s.next
    )
    agent.invoke({"messages": [HumanMessage("q2")]}, CONFIG)
    agent.invoke({"messages": [HumanMessage("q2-alt")]}, after_first.config)
    texts = [m.text for m in session.get_history()]
    assert texts == ["q1", "a1", "q2-alt", "a2-alt"]
    a1 = session.get_history()[1]
    assert [m.text for m in session.get_branches(a1.id)] == ["q2", "q2-alt"]


@dataclass
class UserContext:
    user_id: str


def test_manager_sessions_by_context_field_with_session_search():
    manager = SessionManager(":memory:").with_context("memory", description="Facts")
    middleware = SessionMemoryMiddleware(manager, context_key="user_id")
    assert sorted(t.name for t in middleware.tools) == ["session_search", "set_context"]
    model = ScriptedChatModel(
        responses=[
            AIMessage("Hi Ann, I will remember the green kettle."),
            AIMessage("Hi Bob."),
            call("session_search", {"query": "kettle"}, "s1"),
            AIMessage("You mentioned a green kettle."),
        ]
    )
    agent = create_agent(model, middleware=[middleware], context_schema=UserContext)
    agent.invoke(
        {"messages": [HumanMessage("I own a green kettle.")]},
        {"configurable": {"thread_id": "x"}},
        context=UserContext("ann"),
    )
    agent.invoke(
        {"messages": [HumanMessage("Hello.")]}, {"configurable": {"thread_id": "y"}}, context=UserContext("bob")
    )
    out = agent.invoke(
        {"messages": [HumanMessage("What do I own?")]}, {"configurable": {"thread_id": "z"}}, context=UserContext("ann")
    )
    search_result = out["messages"][-2]
    assert isinstance(search_result, ToolMessage) and "green kettle" in search_result.content
    assert [m.text for m in manager.get_history("bob")] == ["Hello.", "Hi Bob."]
    assert {info.id for info in manager.list_sessions()} == {"ann", "bob"}
    # Ann's third run (a new thread, no checkpointer) saw her first conversation.
    assert [m.text for m in model.calls[2][1:]] == [
        "I own a green kettle.",
        "Hi Ann, I will remember the green kettle.",
        "What do I own?",
    ]


def test_usage_is_counted_in_the_manager():
    manager = SessionManager(":memory:")
    reply = AIMessage("hi", usage_metadata={"input_tokens": 11, "output_tokens": 3, "total_tokens": 14})
    agent = create_agent(ScriptedChatModel(responses=[reply]), middleware=[SessionMemoryMiddleware(manager)])
    agent.invoke({"messages": [HumanMessage("hello")]}, {"configurable": {"thread_id": "t"}})
    info = manager.get("t")
    assert (info.input_tokens, info.output_tokens) == (11, 3)


def test_a_run_without_a_session_id_is_refused(session):
    manager = SessionManager(":memory:")
    agent = create_agent(ScriptedChatModel(responses=[AIMessage("x")]), middleware=[SessionMemoryMiddleware(manager)])
    with pytest.raises(Exception, match="no session for this run"):
        agent.invoke({"messages": [HumanMessage("hello")]})


def test_two_instances_need_distinct_names(session):
    other = Session(":memory:").for_session("b")
    agent = create_agent(
        ScriptedChatModel(responses=[AIMessage("x")]),
        middleware=[
            SessionMemoryMiddleware(session),
            SessionMemoryMiddleware(other, name="second", load_history=False),
        ],
    )
    assert agent.invoke({"messages": [HumanMessage("hi")]}, CONFIG)["messages"][-1].content == "x"


# -- compaction -------------------------------------------------------------------------------


def long_turns(n):
    return [AIMessage(f"answer {i}: " + "tea " * 40) for i in range(n)]


def compacting_agent(session, model, **options):
    middleware = SessionMemoryMiddleware(
        session,
        compact_at=options.pop("compact_at", 400),
        keep_recent_tokens=120,
        protect_head=2,
        summary_max_retries=0,
        **options,
    )
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


def test_compaction_summarises_with_the_agents_model_and_keeps_the_store_whole(session):
    model = ScriptedChatModel(responses=long_turns(6))
    agent = compacting_agent(session, model)
    for i in range(6):
        out = agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
    assert model.summary_prompts, "the agent's model wrote the summary"
    compactions = session.get_compactions()
    assert compactions and compactions[-1].summary == model.summary
    last_call = model.calls[-1][1:]
    assert [m.text for m in last_call[:2]] == ["question 0 " + "milk " * 40, "answer 0: " + "tea " * 40]
    assert last_call[2].text == model.summary
    assert last_call[2].additional_kwargs["lc_source"] == "session_memory.compaction"
    assert last_call[-1].text.startswith("question 5")
    assert len(last_call) < 11
    # State and store keep every message; the store reads compacted.
    assert len(out["messages"]) == 12
    assert session.get_path_length() == 12
    assert model.summary in [m.text for m in session.get_history()]


def test_compaction_carries_over_when_history_is_loaded(session):
    model = ScriptedChatModel(responses=long_turns(7))
    middleware = SessionMemoryMiddleware(
        session, compact_at=400, keep_recent_tokens=120, protect_head=2, summary_max_retries=0
    )
    agent = create_agent(model, middleware=[middleware])  # no checkpointer: history is loaded
    for i in range(7):
        agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
    assert len(session.get_compactions()) >= 2
    last_call = model.calls[-1][1:]
    summaries = [m for m in last_call if m.id.startswith("compaction_")]
    assert len(summaries) == 1
    assert session.get_path_length() == 14
    assert len({m.id for m in last_call}) == len(last_call)


def test_failed_compaction_keeps_the_full_history(session, caplog):
    model = ScriptedChatModel(responses=long_turns(5), fail_summary=True)
    agent = compacting_agent(session, model)
    with caplog.at_level(logging.WARNING, logger="langchain_sessions"):
        for i in range(5):
            out = agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
    assert model.summary_prompts
    assert "history kept whole" in caplog.text
    assert session.get_compactions() == []
    assert out["messages"][-1].text.startswith("answer 4")
    assert len(model.calls[-1]) == 1 + 9  # system + every message
    assert session.get_path_length() == 10


def _streamed_texts(agent, message):
    async def run():
        texts = []
        async for chunk, _meta in agent.astream({"messages": [HumanMessage(message)]}, CONFIG, stream_mode="messages"):
            texts.append(chunk.text)
        return texts

    return asyncio.run(run())


def test_the_summary_never_streams_to_the_user(session):
    model = ScriptedChatModel(responses=long_turns(5))
    agent = compacting_agent(session, model)
    streamed = []
    for i in range(5):
        streamed += _streamed_texts(agent, f"question {i} " + "milk " * 40)
    assert model.summary_prompts and session.get_compactions()
    assert any(t.startswith("answer 4") for t in streamed)
    assert not any("SUMMARY-TEXT" in t for t in streamed)


def test_an_untagged_summariser_would_leak_into_the_stream(session):
    """Control for the test above: the same run with a summariser that calls the model without
    the nostream tag shows the summary in the stream."""
    model = ScriptedChatModel(responses=long_turns(5))
    agent = compacting_agent(session, model, summarizer=lambda prompt: model.invoke([HumanMessage(prompt)]).text)
    streamed = []
    for i in range(5):
        streamed += _streamed_texts(agent, f"question {i} " + "milk " * 40)
    assert session.get_compactions()
    assert any("SUMMARY-TEXT" in t for t in streamed)


def test_sync_stream_and_async_compaction(session):
    model = ScriptedChatModel(responses=long_turns(5))
    agent = compacting_agent(session, model)

    async def run():
        for i in range(5):
            await agent.ainvoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)

    asyncio.run(run())
    assert session.get_compactions()
    assert any(m.text == model.summary for m in model.calls[-1])


def test_compact_at_fraction_uses_the_model_profile(session):
    model = ScriptedChatModel(responses=long_turns(5), profile={"max_input_tokens": 500})
    agent = compacting_agent(session, model, compact_at=0.8)
    for i in range(5):
        agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
    assert session.get_compactions()


def test_a_branch_reset_elsewhere_is_respected(session):
    """Another adapter (or the app) starts a new empty branch: the next run loads nothing, and
    the head marker never reaches the model."""
    from sessions_core.branching import soft_reset

    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)])
    agent.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    soft_reset(session)
    agent.invoke({"messages": [HumanMessage("q2")]}, CONFIG)
    assert [m.text for m in model.calls[1][1:]] == ["q2"]
    assert [m.text for m in session.get_history() if m.parts] == ["q2", "a2"]
    assert session.search("q1")


def test_a_separate_summary_model(session):
    model = ScriptedChatModel(responses=long_turns(5))
    summariser = ScriptedChatModel(responses=[], summary="CHEAP-SUMMARY")
    agent = compacting_agent(session, model, summarizer=summariser)
    for i in range(5):
        agent.invoke({"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, CONFIG)
    assert summariser.summary_prompts and not model.summary_prompts
    assert session.get_compactions()[-1].summary == "CHEAP-SUMMARY"


def test_messages_deleted_from_the_store_are_stored_again_from_the_thread(session):
    model = ScriptedChatModel(responses=[AIMessage("a1"), AIMessage("a2")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session)], checkpointer=InMemorySaver())
    agent.invoke({"messages": [HumanMessage("q1")]}, CONFIG)
    session.clear_messages()
    agent.invoke({"messages": [HumanMessage("q2")]}, CONFIG)
    assert [m.text for m in session.get_history()] == ["q1", "a1", "q2", "a2"]


def test_a_run_reads_the_stored_branch_once_and_a_checkpointed_thread_not_again(session):
    """Three model calls in a tool loop read the stored history once per run; with a
    checkpointer, what a run reads is the branch before the thread, never the thread's own
    messages again (issue 20)."""
    from langchain_core.tools import tool

    @tool
    def lookup(q: str) -> str:
        """Look something up."""
        return f"found {q}"

    for i in range(20):
        session.append_message(
            {
                "id": f"old{i}",
                "role": "user" if i % 2 == 0 else "assistant",
                "parts": [{"type": "text", "text": f"earlier {i}"}],
            }
        )
    walked: list[int] = []  # the length of each path walked, in chunks or (a short one) in one statement
    store = session.store
    path_ids, with_overlays = store.path_ids, store.overlays_and_short_path
    store.path_ids = lambda *a, **k: (lambda r: walked.append(len(r[1])) or r)(path_ids(*a, **k))
    store.overlays_and_short_path = lambda *a, **k: (lambda r: r if r[1] is None else walked.append(len(r[1])) or r)(
        with_overlays(*a, **k)
    )
    try:
        for checkpointer in (None, InMemorySaver()):
            model = ScriptedChatModel(
                responses=[
                    call("lookup", {"q": "a"}, "c1"),
                    call("lookup", {"q": "b"}, "c2"),
                    AIMessage("done"),
                    AIMessage("again"),
                ]
            )
            agent = create_agent(
                model,
                tools=[lookup],
                middleware=[SessionMemoryMiddleware(session, compact_at=None)],
                checkpointer=checkpointer,
            )
            config = {"configurable": {"session_id": session.session_id, "thread_id": f"t-{id(model)}"}}
            del walked[:]
            agent.invoke({"messages": [HumanMessage("hi")]}, config)
            assert len(model.calls) == 3 and len(walked) == 1
            agent.invoke({"messages": [HumanMessage("more")]}, config)
            assert len(walked) == 2
            if checkpointer is None:  # the whole stored history, the first run's included
                assert walked[1] == walked[0] + 6  # the five messages of the tool loop, and the new input
            else:  # the branch before the thread: as long as it was
                assert walked[1] == walked[0]
    finally:
        store.path_ids, store.overlays_and_short_path = path_ids, with_overlays


def test_a_block_the_model_overwrote_is_restored_and_the_next_run_shows_it(session):
    """Issue 21: the model's write is a version (with its tool call id); the code restores the
    older one, and the next run's system message holds the restored text."""
    session.replace_context_block("memory", "The user is Ada, a mathematician.")
    model = ScriptedChatModel(
        responses=[
            call("set_context", {"label": "memory", "content": "The user is Bob."}, "call_overwrite"),
            AIMessage("Noted."),
            AIMessage("Hello Ada."),
        ]
    )
    agent = create_agent(model, tools=[], middleware=[SessionMemoryMiddleware(session, compact_at=None)])
    config = {"configurable": {"session_id": session.session_id}}
    agent.invoke({"messages": [HumanMessage("Call me Bob.")]}, config)
    latest = session.get_context_history("memory", limit=1)[0]
    assert (latest.content, latest.source, latest.tool_call_id) == ("The user is Bob.", "tool", "call_overwrite")
    restored = session.restore_context("memory", 1)
    assert restored.version == 3 and session.get_context_block("memory").content == "The user is Ada, a mathematician."
    agent.invoke({"messages": [HumanMessage("Who am I?")]}, config)
    system = model.calls[-1][0]
    assert isinstance(system, SystemMessage) and "The user is Ada, a mathematician." in system.text
    assert "The user is Bob." not in system.text


def test_without_memory_tools_the_middleware_leaves_the_graph_as_it_is(session):
    """``create_agent`` adds its ``tools`` node for any middleware whose class overrides
    ``wrap_tool_call``, and then skips its check for unknown tools other middleware adds. With no
    memory tools to serve (a session without blocks, or ``memory_tools=False``) the middleware has
    no tool hooks: the graph is the one without it, and the check still runs."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.tools import tool

    @tool
    def stray(text: str) -> str:
        """A tool no one registered."""
        return text

    class AddsAnUnknownTool(AgentMiddleware):
        def wrap_model_call(self, request, handler):
            return handler(request.override(tools=[*request.tools, stray]))

    bare = Session(":memory:").for_session("bare")
    for middleware in (
        SessionMemoryMiddleware(bare, compact_at=None),
        SessionMemoryMiddleware(session, compact_at=None, memory_tools=False),
    ):
        assert middleware.tools == [] and isinstance(middleware, SessionMemoryMiddleware)
        model = ScriptedChatModel(responses=[AIMessage("Hello.")])
        agent = create_agent(model=model, tools=[], middleware=[middleware])
        assert "tools" not in agent.get_graph().nodes
        assert set(agent.get_graph().nodes) == set(create_agent(model=model, tools=[]).get_graph().nodes)
        result = agent.invoke({"messages": [HumanMessage("Hi.")]}, CONFIG)
        assert [m.text for m in result["messages"]] == ["Hi.", "Hello."]
        assert [m.text for m in middleware.source.get("thread-1").get_history()][-2:] == ["Hi.", "Hello."]
        checked = create_agent(model=model, tools=[], middleware=[AddsAnUnknownTool(), middleware])
        with pytest.raises(ValueError, match="Unknown tools"):
            checked.invoke({"messages": [HumanMessage("Hi.")]}, CONFIG)

    # With memory tools the tools node is there, and they work (their results stored at once).
    serving = SessionMemoryMiddleware(session, compact_at=None)
    assert isinstance(serving, SessionMemoryMiddleware) and type(serving).__name__ == "SessionMemoryMiddleware"
    model = ScriptedChatModel(responses=remember_tea())
    agent = create_agent(model=model, tools=[], middleware=[serving])
    assert "tools" in agent.get_graph().nodes
    agent.invoke({"messages": [HumanMessage("Remember that I like tea.")]}, CONFIG)
    assert session.get_context_block("memory").content == "The user likes tea."
    assert [m.role for m in session.get_history()][-4:] == ["user", "assistant", "tool", "assistant"]

    # A subclass's own wrap_tool_call wins, and its super() reaches the middleware's.
    class Counting(SessionMemoryMiddleware):
        seen: list[str] = []

        def wrap_tool_call(self, request, handler):
            self.seen.append(request.tool_call["name"])
            return super().wrap_tool_call(request, handler)

    counting = Counting(session, compact_at=None)
    assert isinstance(counting, Counting) and counting.name == "Counting"
    bare_counting = Counting(bare, compact_at=None)
    assert "tools" in create_agent(model=model, tools=[], middleware=[bare_counting]).get_graph().nodes  # its choice
    model = ScriptedChatModel(responses=remember_tea())
    create_agent(model=model, tools=[], middleware=[counting]).invoke({"messages": [HumanMessage("Tea.")]}, CONFIG)
    assert Counting.seen == ["set_context"]
    assert [m.role for m in session.get_history()][-4:] == ["user", "assistant", "tool", "assistant"]


def test_jump_to_is_ephemeral_with_the_middleware_added():
    """langchain's ``test_jump_to_is_ephemeral`` with the middleware (no blocks, so no memory
    tools) added: an agent without tools has no ``tools`` node to loop through."""
    from langchain.agents.middleware import AgentMiddleware

    from .upstream_agents.model import FakeToolCallingModel

    class MyMiddleware(AgentMiddleware):
        def before_model(self, state, runtime):
            assert "jump_to" not in state
            return {"jump_to": "model"}

        def after_model(self, state, runtime):
            assert "jump_to" not in state
            return {"jump_to": "model"}

    bare = Session(":memory:").for_session("bare")
    agent = create_agent(model=FakeToolCallingModel(), middleware=[MyMiddleware(), SessionMemoryMiddleware(bare)])
    result = agent.invoke({"messages": [HumanMessage("Hello")]}, {"recursion_limit": 10})
    assert "jump_to" not in result
    assert [m.type for m in result["messages"]] == ["human", "ai"]


def test_a_redactor_masks_what_the_agent_stores(session):
    from sessions_core import PIIRedactor

    model = ScriptedChatModel(responses=[AIMessage("I will write to bob@example.com."), AIMessage("Done.")])
    agent = create_agent(model, middleware=[SessionMemoryMiddleware(session, redactor=PIIRedactor())])
    agent.invoke({"messages": [HumanMessage("Mail bob@example.com, card 4111 1111 1111 1111")]}, CONFIG)
    stored = session.get_history()
    assert [m.text for m in stored] == ["Mail [EMAIL], card [CARD]", "I will write to [EMAIL]."]
    assert stored[0].metadata["redacted"] == {"email": 1, "card": 1}
    agent.invoke({"messages": [HumanMessage("Thanks")]}, CONFIG)
    assert len(session.get_history()) == 4
    # Without a checkpointer the next run's model sees the stored, redacted history.
    assert "bob@example.com" not in " ".join(m.text for m in model.calls[-1])
