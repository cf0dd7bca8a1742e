"""Real FunctionAgent, ReActAgent and AgentWorkflow runs with a scripted LLM."""

from __future__ import annotations

import asyncio
import json

import pytest
from llama_index.core.agent.workflow import AgentWorkflow, FunctionAgent, ReActAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.tools import FunctionTool
from llama_index.core.workflow import Context, JsonSerializer

from llamaindex_sessions import SessionMemory, SessionToolSpec
from sessions_core import Session

from .scripted import ScriptedLLM, tool_call, tool_calls


def run(coro):
    return asyncio.run(coro)


def run_agent(agent, **kwargs):
    """One ``agent.run(...)`` (it needs a running event loop)."""

    async def go():
        return await agent.run(**kwargs)

    return asyncio.run(go())


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def system_texts(call):
    return "\n".join(call.system)


def stored_shape(session):
    return [(m.role, [p.type for p in m.parts]) for m in session.get_history()]


@pytest.mark.parametrize("streaming", [True, False])
def test_function_agent_writes_context_and_next_run_sees_it(session, streaming):
    llm = ScriptedLLM(
        [
            tool_calls(
                [("add", {"a": 2, "b": 3}), ("set_context", {"label": "memory", "content": "User likes arithmetic."})],
                text="Computing and noting that.",
            ),
            "2 + 3 = 5. Noted.",
            "You like arithmetic.",
        ]
    )
    tools = [FunctionTool.from_defaults(add), *SessionToolSpec(session).to_tool_list()]
    agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You are a calculator.", streaming=streaming)
    memory = SessionMemory(session=session).bind(agent)

    async def go():
        first = await agent.run(user_msg="What is 2+3? Remember I like arithmetic.", memory=memory)
        second = await agent.run(user_msg="What do I like?", memory=memory)
        return first, second

    first, second = run(go())
    assert str(first) == "2 + 3 = 5. Noted." and str(second) == "You like arithmetic."
    assert session.get_context_block("memory").content == "User likes arithmetic."

    call1, call2, call3 = llm.calls
    # Within run 1 the prompt stays frozen (prefix cache); the tool result shows the write.
    assert "User likes arithmetic." not in system_texts(call1) and system_texts(call1) == system_texts(call2)
    tool_messages = [m for m in call2.messages if m.role == MessageRole.TOOL]
    assert sorted(m.content for m in tool_messages)[0] == "5"
    assert any(m.content.startswith("Written to memory.") for m in tool_messages)
    # Run 2's system message shows it.
    assert "User likes arithmetic." in system_texts(call3)
    assert call3.system[0] == "You are a calculator."
    assert call1.tools == ["add", "set_context"]

    # Every message stored once: user, assistant with two calls, two results, answer, user, answer.
    assert stored_shape(session) == [
        ("user", ["text"]),
        ("assistant", ["text", "tool-call", "tool-call"]),
        ("tool", ["tool-result"]),
        ("tool", ["tool-result"]),
        ("assistant", ["text"]),
        ("user", ["text"]),
        ("assistant", ["text"]),
    ]
    results = {p.tool_call_id: p.tool_name for m in session.get_history() for p in m.parts if p.type == "tool-result"}
    assert sorted(results.values()) == ["add", "set_context"]


def test_function_agent_with_old_style_tool_calls(session):
    llm = ScriptedLLM([tool_call("add", {"a": 1, "b": 1}, kwargs_form=True), "2"])
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(add)], llm=llm)
    memory = SessionMemory(session=session)
    run_agent(agent, user_msg="1+1?", memory=memory)
    shape = stored_shape(session)
    assert shape[1] == ("assistant", ["tool-call"]) and shape[2] == ("tool", ["tool-result"])
    history = memory.get_all()
    assert "tool_calls" in history[1].additional_kwargs and history[1].blocks == []


def test_chat_history_passed_every_run_is_not_stored_twice(session):
    llm = ScriptedLLM(["first answer", "second answer", "third answer"])
    agent = FunctionAgent(tools=[], llm=llm)
    memory = SessionMemory(session=session)
    history = [
        ChatMessage(role="user", content="earlier question"),
        ChatMessage(role="assistant", content="earlier answer"),
    ]

    async def go():
        await agent.run(user_msg="one", chat_history=history, memory=memory)
        # the user keeps their own list and passes it again, as LlamaIndex examples do
        await agent.run(user_msg="two", chat_history=memory.get_all(), memory=memory)
        await agent.run(user_msg="three", chat_history=await memory.aget(), memory=memory)

    run(go())
    texts = [m.content for m in memory.get_all()]
    assert texts == [
        "earlier question",
        "earlier answer",
        "one",
        "first answer",
        "two",
        "second answer",
        "three",
        "third answer",
    ]
    assert session.get_path_length() == 8
    assert len(session.search("earlier question", match="all")) == 1


def test_context_reuse_and_serialisation_keep_history(db):
    session = Session(db).for_session("ctx").with_context("memory")
    llm = ScriptedLLM(["one", "two", "three", "four"])
    agent = FunctionAgent(tools=[], llm=llm)
    memory = SessionMemory(session=session)

    async def go():
        ctx = Context(agent)
        await agent.run(user_msg="first", memory=memory, ctx=ctx)
        await agent.run(user_msg="second", ctx=ctx)  # memory rebuilt from the ctx snapshot
        data = ctx.to_dict(serializer=JsonSerializer())
        json.dumps(data)
        restored = Context.from_dict(agent, data, serializer=JsonSerializer())
        await agent.run(user_msg="third", ctx=restored)
        # In a fresh process nothing is live: the pointer reopens the SQLite file.
        from llamaindex_sessions import memory as memory_module

        memory_module._handles.clear()
        restored = Context.from_dict(agent, data, serializer=JsonSerializer())
        await agent.run(user_msg="fourth", ctx=restored)
        return await restored.store.get("memory")

    final_memory = run(go())
    seen = [m.content for m in llm.calls[-1].messages if m.role != MessageRole.SYSTEM]
    assert seen == ["first", "one", "second", "two", "third", "three", "fourth"]
    assert final_memory.session is not session  # reopened from the pointer
    assert [m.content for m in final_memory.get_all()][-2:] == ["fourth", "four"]
    assert session.get_path_length() == 8


def test_react_agent_system_prompt_trap(session):
    session.replace_context_block("memory", "FACT-MARKER")

    def script():
        return ScriptedLLM(
            [
                "Thought: I should save it.\nAction: set_context\n"
                'Action Input: {"label": "memory", "content": "User is Ada."}',
                "Thought: I can answer.\nAnswer: Saved.",
            ]
        )

    def saw_context(llm):
        return all(any("FACT-MARKER" in (m.content or "") for m in call.messages) for call in llm.calls)

    # The trap: without a system_prompt, ReActAgent drops the memory's leading system message.
    trapped = script()
    agent = ReActAgent(tools=SessionToolSpec(session).to_tool_list(), llm=trapped)
    run_agent(agent, user_msg="I am Ada", memory=SessionMemory(session=session))
    assert not saw_context(trapped)

    # bind() sees the agent and renders the context into the user message instead.
    session.replace_context_block("memory", "FACT-MARKER")
    handled = script()
    agent = ReActAgent(tools=SessionToolSpec(session).to_tool_list(), llm=handled)
    memory = SessionMemory(session=session).bind(agent)
    assert memory.insert_method == "user"
    assert str(run_agent(agent, user_msg="I am Ada", memory=memory)) == "Saved."
    assert saw_context(handled)
    assert session.get_context_block("memory").content == "User is Ada."

    # With any system_prompt, the memory's system message survives as a second one.
    session.replace_context_block("memory", "FACT-MARKER")
    prompted = script()
    agent = ReActAgent(tools=SessionToolSpec(session).to_tool_list(), llm=prompted, system_prompt="Be nice.")
    memory = SessionMemory(session=session).bind(agent)
    assert memory.insert_method == "system"
    run_agent(agent, user_msg="I am Ada", memory=memory)
    assert saw_context(prompted)
    # ReAct stores one assistant message per run (its reasoning), after the user message.
    assert [m.role for m in memory.get_all()][-2:] == [MessageRole.USER, MessageRole.ASSISTANT]


def test_agent_workflow_with_handoff_shares_one_memory(session):
    llm = ScriptedLLM(
        [
            tool_call("handoff", {"to_agent": "calculator", "reason": "math"}),
            tool_call("add", {"a": 4, "b": 5}),
            "4 + 5 = 9",
            "Still 9.",
        ]
    )
    triage = FunctionAgent(
        name="triage",
        description="Routes requests.",
        tools=[],
        llm=llm,
        can_handoff_to=["calculator"],
        system_prompt="Route.",
    )
    calculator = FunctionAgent(
        name="calculator",
        description="Does math.",
        tools=[FunctionTool.from_defaults(add)],
        llm=llm,
        system_prompt="Compute.",
    )
    workflow = AgentWorkflow(agents=[triage, calculator], root_agent="triage")
    memory = SessionMemory(session=session).bind(workflow)
    assert memory.llm is llm

    async def go():
        first = await workflow.run(user_msg="what is 4+5?", memory=memory)
        second = await workflow.run(user_msg="and again?", memory=memory)
        return first, second

    first, second = run(go())
    assert str(first) == "4 + 5 = 9"
    shape = stored_shape(session)
    assert shape[0] == ("user", ["text"])
    assert ("tool", ["tool-result"]) in shape
    tool_results = [p for m in session.get_history() for p in m.parts if p.type == "tool-result"]
    assert {p.tool_name for p in tool_results} == {"handoff", "add"}
    calls = [p.tool_call_id for m in session.get_history() for p in m.parts if p.type == "tool-call"]
    assert len(calls) == len(set(calls)) == len(tool_results)  # each call and result once
    assert [m.content for m in memory.get_all()][-2:] == ["and again?", "Still 9."]


def is_summary_request(messages):
    text = messages[-1].content or ""
    return "CONVERSATION TO SUMMARIZE" in text or "NEW TURNS TO INCORPORATE" in text


def test_agent_compacts_with_its_own_llm_and_keeps_tool_pairs_whole(session, caplog):
    def model(messages, tools):
        last = messages[-1]
        if is_summary_request(messages):
            return "SUMMARY: the user asked for several sums."
        if last.role == MessageRole.TOOL:
            return f"The sum is {last.content}. " + "detail " * 40
        n = sum(m.role == MessageRole.USER for m in messages)
        return tool_call("add", {"a": n, "b": n})

    llm = ScriptedLLM(fallback=model)
    agent = FunctionAgent(tools=[FunctionTool.from_defaults(add)], llm=llm, streaming=False)
    memory = SessionMemory(session=session, token_limit=700, keep_recent_tokens=200).bind(agent)

    async def go():
        for i in range(8):
            await agent.run(user_msg=f"add question {i} " + "padding " * 30, memory=memory)

    run(go())
    summaries = [c for c in llm.calls if is_summary_request(c.messages)]
    assert len(summaries) >= 2, "the agent's own LLM wrote (and updated) the summary"
    assert all(c.tools == [] for c in summaries)  # plain calls, not part of the agent loop
    assert "failed" not in caplog.text
    assert session.get_compactions()
    last_input = [c for c in llm.calls if not is_summary_request(c.messages)][-1].messages
    assert any((m.content or "").startswith("SUMMARY:") for m in last_input)
    calls = {b.tool_call_id for m in last_input for b in m.blocks if b.block_type == "tool_call"}
    results = {m.additional_kwargs["tool_call_id"] for m in last_input if m.role == MessageRole.TOOL}
    assert calls == results  # no call without its result, no orphan result
    assert len(memory.get_all()) == 8 * 4  # every original message kept


def test_malformed_tool_arguments_are_an_error_for_the_model_and_the_run_goes_on(session):
    # A label of the wrong type, then none: each comes back to the model as an error tool
    # output (LlamaIndex's FunctionTool), nothing is stored, and the corrected call writes.
    llm = ScriptedLLM(
        [
            tool_call("set_context", {"label": {"name": "memory"}, "content": "User likes tea."}),
            tool_call("set_context", {"content": "User likes tea."}),
            tool_call("set_context", {"label": "memory", "content": "User likes tea."}),
            "Noted.",
        ]
    )
    agent = FunctionAgent(tools=SessionToolSpec(session).to_tool_list(), llm=llm)
    result = run_agent(agent, user_msg="remember tea", memory=SessionMemory(session=session).bind(agent))
    assert str(result) == "Noted."
    outputs = [call.messages[-1] for call in llm.calls[1:]]  # what the model saw after each call
    assert [o.role for o in outputs] == [MessageRole.TOOL] * 3
    assert [str(o.content) for o in outputs[:2]] == [
        'Error: invalid arguments for set_context: "label" must be string, got object',
        'Error: invalid arguments for set_context: missing required field "label"',
    ]
    assert str(outputs[2].content).startswith("Written to memory.")
    assert session.get_context_block("memory").content == "User likes tea."
