"""Ported from langchain 1.5.2 (sdist), tests/unit_tests/agents/middleware/implementations/test_human_in_the_loop.py
Interrupts: every test that runs a create_agent graph, with SessionMemoryMiddleware added (see memory.py); the
tests of the middleware's functions called directly, without an agent, are not ported.
"""

import sys
from typing import TYPE_CHECKING, Annotated, Any

import pytest
from langchain.agents.middleware import InterruptOnConfig, ToolErrorMiddleware, ToolRetryMiddleware
from langchain.agents.middleware.human_in_the_loop import (
    _EDIT_NOTICE,
    Decision,
    HumanInTheLoopMiddleware,
    InterruptMode,
)
from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ContextT,
    InputAgentState,
    OutputAgentState,
)
from langchain_core.messages import AIMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt.tool_node import ToolRuntime
from langgraph.runtime import Runtime
from langgraph.types import Command
from pydantic import AfterValidator, ValidationError

from .memory import create_agent
from .model import FakeToolCallingModel

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig


_EXPECTED_NOTICE = f'{_EDIT_NOTICE} Executed instead: write_file_tool with arguments {{"content": "edited"}}.'


_EXPECTED_NOTICE_WITH_CONTENT = f"{_EXPECTED_NOTICE}\n\nTool response:"


def _assert_tool_messages_are_paired(messages: list[Any]) -> None:
    """Assert every `ToolMessage` answers a call declared by the preceding `AIMessage`.

    Model providers (e.g. OpenAI) reject a request where a `ToolMessage`'s
    `tool_call_id` has no matching entry in the immediately preceding `AIMessage`'s
    `tool_calls`, that pairing must hold for every model turn, not just the last.
    """
    pending_ids: set[str] = set()
    for message in messages:
        if isinstance(message, AIMessage):
            pending_ids = {tc["id"] for tc in message.tool_calls if tc["id"] is not None}
        elif isinstance(message, ToolMessage):
            assert message.tool_call_id in pending_ids, (
                f"ToolMessage {message.tool_call_id!r} has no matching tool call in the preceding AIMessage"
            )
            pending_ids.discard(message.tool_call_id)


def test_human_in_the_loop_middleware_rejected_call_not_executed_and_stays_paired() -> None:
    """A rejected tool call must never execute, and the message history must stay valid.

    Exercises the real `create_agent` graph (not just the middleware in isolation) to
    confirm two things at once: the underlying tool is never invoked, and the agent can
    still take its next model turn afterward which requires every `ToolMessage` to
    answer a tool call the preceding `AIMessage` actually declared.
    """
    calls: list[str] = []

    @tool
    def risky_tool(value: str) -> str:
        """A tool that would be dangerous to run without approval."""
        calls.append(value)
        return f"Executed: {value}"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="risky_tool", args={"value": "test"}, id="1")],
            [],
        ]
    )

    agent = create_agent(
        model=model,
        tools=[risky_tool],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"risky_tool": {"allowed_decisions": ["approve", "reject"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    interrupted = agent.invoke(
        {"messages": [HumanMessage("Please run risky_tool")]},
        {"configurable": {"thread_id": "reject-not-executed"}},
    )
    assert "__interrupt__" in interrupted

    final = agent.invoke(
        Command(resume={"decisions": [{"type": "reject", "message": "denied"}]}),
        {"configurable": {"thread_id": "reject-not-executed"}},
    )

    # The graph must complete the next model turn rather than getting stuck or erroring.
    assert "__interrupt__" not in final
    # The tool itself must never run.
    assert calls == []
    # The message history must remain protocol-valid throughout, including the rejection turn.
    _assert_tool_messages_are_paired(final["messages"])


def test_human_in_the_loop_middleware_edit_annotates_tool_result() -> None:
    """An edited call runs the reviewer's args and its result is attributed to them."""
    executed: list[dict[str, Any]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append({"path": path, "content": content})
        return f"File written to {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [
                ToolCall(
                    name="write_file_tool",
                    args={"path": "notes.txt", "content": "Hello, world!"},
                    id="1",
                )
            ],
            [],
        ]
    )
    agent = create_agent(
        model=model,
        tools=[write_file_tool],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "edit-annotates-result"}}

    interrupted = agent.invoke({"messages": [HumanMessage("Write notes.txt with 'Hello, world!'")]}, config)
    assert "__interrupt__" in interrupted

    final = agent.invoke(
        Command(
            resume={
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {
                            "name": "write_file_tool",
                            "args": {"path": "notes.txt", "content": "reviewer value"},
                        },
                    }
                ]
            }
        ),
        config,
    )

    assert executed == [{"path": "notes.txt", "content": "reviewer value"}]

    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert len(tool_messages) == 1
    content = tool_messages[0].content
    assert isinstance(content, str)
    assert content.endswith("File written to notes.txt")
    assert _EDIT_NOTICE in content
    # The original, untrusted args must not be echoed back.
    assert "Hello, world!" not in content
    assert "__interrupt__" not in final
    _assert_tool_messages_are_paired(final["messages"])


def test_human_in_the_loop_middleware_approve_does_not_annotate() -> None:
    """An approved call was the model's own, so its result must not be annotated."""

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        return f"File written to {path} ({len(content)} chars)"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="write_file_tool", args={"path": "/p", "content": "c"}, id="1")],
            [],
        ]
    )
    agent = create_agent(
        model=model,
        tools=[write_file_tool],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "approve-no-annotation"}}
    agent.invoke({"messages": [HumanMessage("write it")]}, config)
    final = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)

    tool_messages = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert tool_messages[0].content == "File written to /p (1 chars)"


def test_human_in_the_loop_middleware_edit_executes_reviewers_call() -> None:
    """The reviewer's args run while the model's own call stays in the message."""
    executed: list[dict[str, Any]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append({"path": path, "content": content})
        return f"File written to {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="write_file_tool", args={"path": "notes.txt", "content": "mine"}, id="1")],
            [],
        ]
    )
    agent = create_agent(
        model=model,
        tools=[write_file_tool],
        middleware=[
            HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": {"allowed_decisions": ["approve", "edit"]}})
        ],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "executes-reviewer-call"}}
    agent.invoke({"messages": [HumanMessage("write it")]}, config)
    final = agent.invoke(
        Command(
            resume={
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {
                            "name": "write_file_tool",
                            "args": {"path": "notes.txt", "content": "reviewers"},
                        },
                    }
                ]
            }
        ),
        config,
    )

    assert executed == [{"path": "notes.txt", "content": "reviewers"}]
    ai_message = next(m for m in final["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert ai_message.tool_calls[0]["args"] == {"path": "notes.txt", "content": "mine"}
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert "reviewers" in tool_message.content
    _assert_tool_messages_are_paired(final["messages"])


def test_human_in_the_loop_middleware_edit_can_redirect_to_another_tool() -> None:
    """A reviewer may redirect the call to a different tool."""
    executed: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        executed.append("send_email")
        return f"sent to {to}"

    @tool
    def draft_email(to: str) -> str:
        """Draft an email."""
        executed.append("draft_email")
        return f"drafted to {to}"

    model = FakeToolCallingModel(tool_calls=[[ToolCall(name="send_email", args={"to": "a@b.c"}, id="1")], []])
    agent = create_agent(
        model=model,
        tools=[send_email, draft_email],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"send_email": {"allowed_decisions": ["approve", "edit"]}})],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "edit-redirects-tool"}}
    agent.invoke({"messages": [HumanMessage("send it")]}, config)
    final = agent.invoke(
        Command(
            resume={
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {"name": "draft_email", "args": {"to": "a@b.c"}},
                    }
                ]
            }
        ),
        config,
    )

    assert executed == ["draft_email"]
    ai_message = next(m for m in final["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    assert ai_message.tool_calls[0]["name"] == "send_email"
    tool_message = next(m for m in final["messages"] if isinstance(m, ToolMessage))
    assert "drafted" in tool_message.content
    assert "draft_email" in tool_message.content  # the notice names what ran


@pytest.mark.parametrize(
    ("requested", "replacement", "expected_turns_after_tool"),
    [("direct_tool", "normal_tool", 1), ("normal_tool", "direct_tool", 0)],
    ids=["direct-to-normal", "normal-to-direct"],
)
def test_human_in_the_loop_middleware_edit_routes_on_executed_tool(
    requested: str, replacement: str, expected_turns_after_tool: int
) -> None:
    """`return_direct` termination must follow the tool that ran, not the one requested."""

    @tool(return_direct=True)
    def direct_tool(x: str) -> str:
        """Return directly."""
        return f"direct {x}"

    @tool
    def normal_tool(x: str) -> str:
        """Do not return directly."""
        return f"normal {x}"

    model = FakeToolCallingModel(tool_calls=[[ToolCall(name=requested, args={"x": "1"}, id="1")], []])
    agent = create_agent(
        model=model,
        tools=[direct_tool, normal_tool],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={requested: {"allowed_decisions": ["approve", "edit"]}})],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": f"route-{requested}-{replacement}"}}
    agent.invoke({"messages": [HumanMessage("go")]}, config)
    final = agent.invoke(
        Command(resume={"decisions": [{"type": "edit", "edited_action": {"name": replacement, "args": {"x": "1"}}}]}),
        config,
    )

    tool_idx = max(i for i, m in enumerate(final["messages"]) if isinstance(m, ToolMessage))
    model_turns = sum(isinstance(m, AIMessage) for m in final["messages"][tool_idx + 1 :])
    assert model_turns == expected_turns_after_tool


def test_reused_tool_call_id_does_not_replay_a_previous_turns_edit() -> None:
    """End to end: a later call reusing an edited call's ID runs the model's own args."""
    executed: list[tuple[str, str]] = []

    @tool
    def write_file_tool(path: str, content: str) -> str:
        """Write content to a file."""
        executed.append(("write", content))
        return f"File written to {path}"

    @tool
    def read_file_tool(path: str) -> str:
        """Read a file."""
        executed.append(("read", path))
        return f"Contents of {path}"

    model = FakeToolCallingModel(
        tool_calls=[
            [ToolCall(name="write_file_tool", args={"path": "a.txt", "content": "model"}, id="1")],
            # The same ID on a tool that is not gated, so this turn reviews nothing.
            [ToolCall(name="read_file_tool", args={"path": "b.txt"}, id="1")],
            [],
        ]
    )
    agent = create_agent(
        model=model,
        tools=[write_file_tool, read_file_tool],
        middleware=[HumanInTheLoopMiddleware(interrupt_on={"write_file_tool": True})],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "reused-tool-call-id"}}

    agent.invoke({"messages": [HumanMessage("write it, then read it")]}, config)
    final = agent.invoke(
        Command(
            resume={
                "decisions": [
                    {
                        "type": "edit",
                        "edited_action": {
                            "name": "write_file_tool",
                            "args": {"path": "a.txt", "content": "reviewer"},
                        },
                    }
                ]
            }
        ),
        config,
    )

    assert executed == [("write", "reviewer"), ("read", "b.txt")]
    read_result = [m for m in final["messages"] if isinstance(m, ToolMessage)][-1]
    # The read was never edited, so its result carries no notice.
    assert read_result.content == "Contents of b.txt"


def _agent(
    tools: list[BaseTool],
    tool_calls: list[ToolCall],
    interrupt_on: dict[str, bool | InterruptOnConfig],
    *after: AgentMiddleware,
) -> CompiledStateGraph[AgentState[Any], None, InputAgentState, OutputAgentState[Any]]:
    """An agent with per-call HITL whose model makes `tool_calls`, then finishes."""
    return create_agent(
        model=FakeToolCallingModel(tool_calls=[tool_calls, []]),
        tools=tools,
        middleware=[HumanInTheLoopMiddleware(interrupt_on, interrupt_mode="per_call"), *after],
        checkpointer=InMemorySaver(),
    )


def test_per_call_interrupt_shows_the_call_and_the_answers_it_accepts() -> None:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {
            "send_email": {
                "allowed_decisions": ["approve", "edit", "reject", "respond"],
                "description": "Email",
                # Not used in per-call mode: the edit's args come from the tool itself.
                "args_schema": {"type": "object", "properties": {"recipient": {"type": "string"}}},
            }
        },
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    [intr] = result["__interrupt__"]

    # `value`: the tool call waiting for review.
    assert intr.value == {
        "type": "tool_approval",
        "tool_call_id": "call_email",
        "name": "send_email",
        "args": {"to": "alice"},
        "description": "Email",
    }
    # `response_schema`: one branch per allowed decision, matched on `type`.
    schema = intr.response_schema
    defs = schema["$defs"]
    assert schema["oneOf"] == [
        {"$ref": "#/$defs/ApproveDecision"},
        {"$ref": "#/$defs/EditDecision"},
        {"$ref": "#/$defs/RejectDecision"},
        {"$ref": "#/$defs/RespondDecision"},
    ]
    assert defs["ApproveDecision"]["required"] == ["type"]
    assert defs["EditDecision"]["required"] == ["type", "edited_action"]
    assert defs["RejectDecision"]["required"] == ["type"]  # `message` is optional
    assert defs["RespondDecision"]["required"] == ["type", "message"]
    # An edit names the same tool, and its args follow the tool's own schema.
    edit, edited_action, args = defs["EditDecision"], defs["EditedAction"], defs["send_email"]
    assert edit["properties"]["edited_action"] == {"$ref": "#/$defs/EditedAction"}
    assert edited_action["properties"]["name"]["const"] == "send_email"
    assert edited_action["properties"]["args"] == {"$ref": "#/$defs/send_email"}
    assert (list(args["properties"]), args["required"]) == (["to"], ["to"])
    assert args["description"] == "Send an email."


@pytest.mark.parametrize(
    ("answer", "ran_with", "status", "content"),
    [
        ({"type": "approve"}, ["alice"], "success", "sent to alice"),
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}},
            ["bob"],
            "success",
            "sent to bob",
        ),
        # The tool ignores an arg it doesn't declare, as it would from the model.
        (
            {
                "type": "edit",
                "edited_action": {"name": "send_email", "args": {"to": "bob", "subject": "hi"}},
            },
            ["bob"],
            "success",
            "sent to bob",
        ),
        (
            {"type": "reject", "message": "not now"},
            [],
            "error",
            "User rejected the tool call for `send_email` with reason: not now",
        ),
        ({"type": "respond", "message": "already sent"}, [], "success", "already sent"),
    ],
    ids=["approve", "edit", "edit-with-an-undeclared-arg", "reject", "respond"],
)
@pytest.mark.parametrize("interrupt_mode", ["batched", "per_call"])
def test_resume_with_each_decision(
    answer: Decision, ran_with: list[str], status: str, content: str, interrupt_mode: InterruptMode
) -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    agent = create_agent(
        model=FakeToolCallingModel(
            tool_calls=[[ToolCall(name="send_email", args={"to": "alice"}, id="call_email")], []]
        ),
        tools=[send_email],
        middleware=[HumanInTheLoopMiddleware({"send_email": True}, interrupt_mode=interrupt_mode)],
        checkpointer=InMemorySaver(),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]

    resume = {"decisions": [answer]} if interrupt_mode == "batched" else answer
    final = agent.invoke(Command(resume={intr.id: resume}), config)

    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.additional_kwargs == (
        {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": answer["type"]}}
        if answer["type"] in ("reject", "respond")
        else {}
    )
    assert (ran, message.status) == (ran_with, status)
    assert str(message.content).endswith(content)
    # Only an edit tells the model that a reviewer replaced the call.
    assert ("Executed instead: send_email" in str(message.content)) == (answer["type"] == "edit")


def test_per_call_edit_leaves_validation_and_injected_args_to_the_tool() -> None:
    @tool
    def send_email(to: Annotated[str, AfterValidator(lambda v: f"<{v}>")], runtime: ToolRuntime) -> str:
        """Send an email."""
        return f"sent to {to} for {runtime.tool_call_id}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    # The reviewer edits only what the model sees; the tool validates the edit once and
    # gets `runtime` injected.
    assert list(intr.response_schema["$defs"]["send_email"]["properties"]) == ["to"]
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    final = agent.invoke(Command(resume={intr.id: edit}), config)
    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert str(message.content).endswith("sent to <bob> for call_email")


def test_per_call_pauses_once_per_gated_call_and_applies_answers_by_id() -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str, cc: str | None = None) -> str:
        """Send an email."""
        ran.append(f"send_email(to={to}, cc={cc})")
        return f"sent to {to}"

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(f"delete_file({path})")
        return f"deleted {path}"

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(f"read_file({path})")
        return f"contents of {path}"

    calls = [
        ToolCall(name="send_email", args={"to": "alice", "cc": "carol"}, id="call_email"),
        ToolCall(name="delete_file", args={"path": "x.txt"}, id="call_delete"),
        ToolCall(name="delete_file", args={"path": "tmp.txt"}, id="call_delete_tmp"),
        ToolCall(name="read_file", args={"path": "y.txt"}, id="call_read"),
    ]
    agent = _agent(
        [send_email, delete_file, read_file],
        calls,
        {
            "send_email": True,
            "delete_file": {
                "allowed_decisions": ["approve", "reject"],
                "when": lambda req: req.tool_call["args"]["path"] != "tmp.txt",
            },
        },
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    by_tool = {i.value["name"]: i for i in paused}
    email, delete = by_tool["send_email"], by_tool["delete_file"]
    assert (len(paused), delete.value["args"]) == (2, {"path": "x.txt"})
    assert email.id != delete.id
    # A call that isn't gated, or that `when` lets through, runs without waiting.
    assert sorted(ran) == ["delete_file(tmp.txt)", "read_file(y.txt)"]

    # Each interrupt accepts only its own tool's decisions.
    assert delete.response_schema["oneOf"] == [
        {"$ref": "#/$defs/ApproveDecision"},
        {"$ref": "#/$defs/RejectDecision"},
    ]
    with pytest.raises(ValidationError, match="expected tags: 'approve', 'reject'"):
        agent.invoke(Command(resume={delete.id: {"type": "respond", "message": "x"}}), config)

    # The edit replaces the args: `cc` isn't carried over from the model's call.
    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    [pending] = agent.invoke(Command(resume={email.id: edit}), config)["__interrupt__"]
    assert pending.id == delete.id

    final = agent.invoke(Command(resume={delete.id: {"type": "reject", "message": "keep it"}}), config)
    assert sorted(ran) == [  # nothing ran twice
        "delete_file(tmp.txt)",
        "read_file(y.txt)",
        "send_email(to=bob, cc=None)",
    ]
    messages = {m.tool_call_id: m for m in final["messages"] if isinstance(m, ToolMessage)}
    assert 'Executed instead: send_email with arguments {"to": "bob"}' in str(messages["call_email"].content)
    assert messages["call_delete"].status == "error"
    assert "keep it" in str(messages["call_delete"].content)
    assert "__interrupt__" not in final


@pytest.mark.parametrize(
    ("error", "after"),
    [
        (r"1 validation error for .*\nedit\.edited_action\n", []),
        # Listed before error-handling middleware, HITL's error still reaches the caller.
        (r"edit\.edited_action", [ToolRetryMiddleware(initial_delay=0)]),
        (r"edit\.edited_action", [ToolErrorMiddleware(on_error=lambda *_: "x")]),
    ],
    ids=["hitl_alone", "hitl_wraps_retry", "hitl_wraps_tool_error"],
)
def test_per_call_rejects_a_bad_answer_without_saving_it(error: str, after: list[AgentMiddleware]) -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
        *after,
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]

    with pytest.raises(ValidationError, match=error):
        agent.invoke(Command(resume={intr.id: {"type": "edit"}}), config)
    assert ran == []

    edit = {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}}
    final = agent.invoke(Command(resume={intr.id: edit}), config)
    assert ran == ["bob"]
    assert "__interrupt__" not in final


def test_per_call_needs_a_tool_call_id() -> None:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id=None)],
        {"send_email": True},
    )
    with pytest.raises(ValueError, match="`send_email` has no ID"):
        agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})


def test_per_call_description_factory_gets_the_graph_runtime() -> None:
    seen: list[object] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    def describe(tool_call: ToolCall, state: AgentState[Any], runtime: Runtime[ContextT]) -> str:
        seen.append(runtime)
        return f"Email {tool_call['args']['to']}? ({len(state['messages'])} messages)"

    config: InterruptOnConfig = {"allowed_decisions": ["approve"], "description": describe}
    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": config},
    )
    result = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t"}})
    [intr] = result["__interrupt__"]

    assert intr.value["description"] == "Email alice? (2 messages)"
    assert seen
    assert all(isinstance(runtime, Runtime) for runtime in seen)  # as in batched mode


def test_per_call_same_tool_twice_routes_each_answer_to_its_own_call() -> None:
    ran: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        ran.append(to)
        return f"sent to {to}"

    # An empty ID works too, as in batched mode.
    calls = [ToolCall(name="send_email", args={"to": "alice"}, id=i) for i in ("e1", "")]
    agent = _agent([send_email], calls, {"send_email": True})
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    by_call = {i.value["tool_call_id"]: i.id for i in paused}
    assert set(by_call) == {"e1", ""}

    answers = {by_call["e1"]: {"type": "approve"}, by_call[""]: {"type": "reject"}}
    final = agent.invoke(Command(resume=answers), config)
    assert ran == ["alice"]
    messages = {m.tool_call_id: m for m in final["messages"] if isinstance(m, ToolMessage)}
    assert messages[""].status == "error"


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Asyncio context vars require Python 3.11+")
@pytest.mark.parametrize(
    ("answer", "status", "content"),
    [
        (
            {"type": "edit", "edited_action": {"name": "send_email", "args": {"to": "bob"}}},
            "success",
            "sent to bob",
        ),
        ({"type": "reject"}, "error", "The tool was not executed."),
        ({"type": "respond", "message": "already sent"}, "success", "already sent"),
    ],
    ids=["edit", "reject", "respond"],
)
async def test_per_call_works_with_ainvoke(answer: Decision, status: str, content: str) -> None:
    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = (await agent.ainvoke({"messages": [HumanMessage("go")]}, config))["__interrupt__"]

    with pytest.raises(ValidationError, match=r"edit\.edited_action"):
        await agent.ainvoke(Command(resume={intr.id: {"type": "edit"}}), config)
    final = await agent.ainvoke(Command(resume={intr.id: answer}), config)

    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.status == status
    assert content in str(message.content)
    assert message.additional_kwargs == (
        {"lc_source": "hitl_interrupt_decision", "lc_data": {"decision": answer["type"]}}
        if answer["type"] in ("reject", "respond")
        else {}
    )


def test_per_call_retried_tool_is_not_reviewed_again_when_hitl_wraps_retry() -> None:
    attempts: list[str] = []

    @tool
    def send_email(to: str) -> str:
        """Send an email."""
        attempts.append(to)
        if len(attempts) == 1:
            msg = "mail server unavailable"
            raise RuntimeError(msg)
        return f"sent to {to}"

    agent = _agent(
        [send_email],
        [ToolCall(name="send_email", args={"to": "alice"}, id="call_email")],
        {"send_email": True},
        ToolRetryMiddleware(initial_delay=0),
    )
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    [intr] = agent.invoke({"messages": [HumanMessage("go")]}, config)["__interrupt__"]
    final = agent.invoke(Command(resume={intr.id: {"type": "approve"}}), config)

    assert "__interrupt__" not in final  # the retry didn't ask the reviewer again
    assert attempts == ["alice", "alice"]
    [message] = [m for m in final["messages"] if isinstance(m, ToolMessage)]
    assert message.content == "sent to alice"


# Upstream runs with asyncio_mode = "auto"; this module mark does the same here.
pytestmark = [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The test <Function .* is marked with")]
