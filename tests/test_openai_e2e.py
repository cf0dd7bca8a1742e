"""The OpenAI wire format end to end: the real ``openai`` client against a scripted local
Chat Completions server that checks every request (no network)."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sessions_core import (
    Session,
    StaticContext,
    create_compact_function,
    to_openai_tools,
)
from sessions_core.openai import (
    arun_tool_calls,
    from_openai_message,
    openai_summarizer,
    run_tool_calls,
    to_openai_messages,
)

openai = pytest.importorskip("openai")

MODEL = "gpt-test"
Check = Callable[[dict[str, Any]], None]


def completion(message: dict[str, Any], finish_reason: str = "stop", n: int = 1) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": MODEL,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason, "logprobs": None}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class ScriptedServer:
    """POST /v1/chat/completions answers with the next scripted reply once its check passes;
    a failed check (or an unexpected request) is answered with HTTP 400 and recorded."""

    def __init__(self) -> None:
        self.script: list[tuple[Check, dict[str, Any]]] = []
        self.requests: list[dict[str, Any]] = []
        self.failures: list[str] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, reply = server.answer(self.path, self.headers.get("Authorization"), body)
                data = json.dumps(reply).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                """Keep the test output quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.httpd.server_address[1]
        self.base_url = f"http://127.0.0.1:{self.port}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def expect(self, check: Check, reply: dict[str, Any]) -> None:
        self.script.append((check, reply))

    def answer(self, path: str, authorization: str | None, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.requests.append(body)
            try:
                assert path == "/v1/chat/completions", f"unexpected path {path}"
                assert authorization == "Bearer test"
                assert self.script, "no scripted reply left"
                check, reply = self.script.pop(0)
                check(body)
            except AssertionError as error:
                self.failures.append(str(error) or repr(error))
                return 400, {"error": {"message": f"check failed: {error}", "type": "invalid_request_error"}}
            return 200, reply


@pytest.fixture
def server() -> Iterator[ScriptedServer]:
    scripted = ScriptedServer()
    scripted.thread.start()
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()
    scripted.thread.join(5)
    assert scripted.failures == []
    assert scripted.script == [], "scripted replies left unused"


def memory_session(path: Path) -> Session:
    return (
        Session(path)
        .for_session("e2e")
        .with_context("soul", description="Identity", provider=StaticContext("You are a helpful assistant."))
        .with_context("memory", description="Learned facts", max_tokens=1100)
        .with_cached_prompt()
    )


SET_CONTEXT_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "set_context", "arguments": json.dumps({"label": "memory", "content": "User likes coffee."})},
}


def script_tool_loop(server: ScriptedServer, session: Session) -> None:
    tools = to_openai_tools(session.tools())
    first_prompt = session.freeze_system_prompt()
    assert "User likes coffee." not in first_prompt

    def first(body: dict[str, Any]) -> None:
        assert body["model"] == MODEL
        assert body["tools"] == tools
        assert [t["function"]["name"] for t in body["tools"]] == ["set_context"]
        assert body["tools"][0]["function"]["parameters"]["properties"]["label"]["enum"] == ["memory"]
        assert body["messages"] == [
            {"role": "system", "content": first_prompt},
            {"role": "user", "content": "Remember that I like coffee."},
        ]

    def second(body: dict[str, Any]) -> None:
        messages = body["messages"]
        assert body["tools"] == tools
        assert messages[0]["role"] == "system"
        assert "User likes coffee." in messages[0]["content"]
        assert "MEMORY (Learned facts) [0% — 5/1100 tokens] [writable]" in messages[0]["content"]
        assert messages[1] == {"role": "user", "content": "Remember that I like coffee."}
        assert messages[2]["role"] == "assistant"
        assert messages[2]["tool_calls"] == [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "set_context", "arguments": '{"label":"memory","content":"User likes coffee."}'},
            }
        ]
        assert messages[3] == {
            "role": "tool",
            "tool_call_id": "call_1",
            "content": "Written to memory. Usage: 0% (5/1100 tokens)",
        }
        assert len(messages) == 4

    server.expect(
        first,
        completion({"role": "assistant", "content": None, "tool_calls": [SET_CONTEXT_CALL]}, "tool_calls", 1),
    )
    server.expect(second, completion({"role": "assistant", "content": "Noted: you like coffee."}, "stop", 2))


def check_stored_loop(session: Session, path: Path) -> None:
    history = session.get_history()
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    call = history[1].parts[0]
    assert (call.tool_call_id, call.tool_name, call.input) == (
        "call_1",
        "set_context",
        {"label": "memory", "content": "User likes coffee."},
    )
    result = history[2].parts[0]
    assert (result.tool_call_id, result.tool_name, result.output) == (
        "call_1",
        "set_context",
        "Written to memory. Usage: 0% (5/1100 tokens)",
    )
    assert history[3].text == "Noted: you like coffee."
    # a new process on the same file gets the refreshed prompt and the written block
    with memory_session(path) as again:
        assert "User likes coffee." in again.freeze_system_prompt()
        assert again.get_context_block("memory").content == "User likes coffee."
        assert [m.id for m in again.get_history()] == [m.id for m in history]


def test_tool_loop_with_the_sync_client(server: ScriptedServer, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = memory_session(path)
    script_tool_loop(server, session)
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    session.append_message(
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Remember that I like coffee."}]}
    )

    response = client.chat.completions.create(
        model=MODEL,
        messages=to_openai_messages(session.get_history(), system_prompt=session.freeze_system_prompt()),
        tools=to_openai_tools(session.tools()),
    )
    reply = from_openai_message(response.choices[0].message, id=response.id)
    assert session.append_message(reply).inserted
    results = run_tool_calls(session.tools(), reply)
    assert [m.id for m in results] == ["chatcmpl-1-call_1-result"]
    for message in results:
        session.append_message(message)
    assert session.get_context_block("memory").content == "User likes coffee."
    assert "User likes coffee." not in session.freeze_system_prompt()  # frozen for this run
    system_prompt = session.refresh_system_prompt()

    response = client.chat.completions.create(
        model=MODEL,
        messages=to_openai_messages(session.get_history(), system_prompt=system_prompt),
        tools=to_openai_tools(session.tools()),
    )
    assert response.choices[0].finish_reason == "stop"
    session.append_message(from_openai_message(response.choices[0].message, id=response.id))
    assert len(server.requests) == 2
    check_stored_loop(session, path)
    session.close()


def test_tool_loop_with_the_async_client(server: ScriptedServer, tmp_path: Path) -> None:
    path = tmp_path / "chat.db"
    session = memory_session(path)
    script_tool_loop(server, session)

    async def run() -> None:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
            await session.aappend_message(
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Remember that I like coffee."}]}
            )
            tools = await session.atools()
            response = await client.chat.completions.create(
                model=MODEL,
                messages=to_openai_messages(
                    await session.aget_history(), system_prompt=await session.afreeze_system_prompt()
                ),
                tools=to_openai_tools(tools),
            )
            reply = from_openai_message(response.choices[0].message, id=response.id)
            await session.aappend_message(reply)
            for message in await arun_tool_calls(tools, reply):
                await session.aappend_message(message)
            system_prompt = await session.arefresh_system_prompt()
            response = await client.chat.completions.create(
                model=MODEL,
                messages=to_openai_messages(await session.aget_history(), system_prompt=system_prompt),
                tools=to_openai_tools(await session.atools()),
            )
            await session.aappend_message(from_openai_message(response.choices[0].message, id=response.id))

    asyncio.run(run())
    check_stored_loop(session, path)
    session.close()


def test_bad_tool_arguments_from_the_model_come_back_as_errors(server: ScriptedServer, tmp_path: Path) -> None:
    session = memory_session(tmp_path / "chat.db")
    session.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]})
    calls = [
        {"id": "call_bad", "type": "function", "function": {"name": "set_context", "arguments": "{not json"}},
        {
            "id": "call_ro",
            "type": "function",
            "function": {"name": "set_context", "arguments": '{"label":"soul","content":"x"}'},
        },
        {"id": "call_unknown", "type": "function", "function": {"name": "teleport", "arguments": "{}"}},
    ]
    server.expect(
        lambda body: None, completion({"role": "assistant", "content": None, "tool_calls": calls}, "tool_calls")
    )
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    response = client.chat.completions.create(
        model=MODEL,
        messages=to_openai_messages(session.get_history(), system_prompt=session.freeze_system_prompt()),
        tools=to_openai_tools(session.tools()),
    )
    reply = from_openai_message(response.choices[0].message)
    session.append_message(reply)
    assert reply.parts[0].input == "{not json"  # kept raw: nothing the model said is lost
    outputs = [m.parts[0].output for m in run_tool_calls(session.tools(), reply)]
    assert outputs[0].startswith("Error: invalid arguments for set_context: not valid JSON (")
    assert outputs[1] == 'Error: Block "soul" is readonly'
    assert outputs[2] == "Error: unknown tool 'teleport'"
    assert session.get_context_block("memory").content == ""
    # the raw arguments go back to the model exactly as it sent them
    sent = to_openai_messages(session.get_history())
    assert sent[1]["tool_calls"][0]["function"]["arguments"] == "{not json"
    session.close()


def test_tool_call_ids_reused_across_turns_keep_every_result(server: ScriptedServer, tmp_path: Path) -> None:
    """Some OpenAI-compatible servers number tool calls per reply (``call_0`` every turn)."""

    def call(content: str, action: str) -> dict[str, Any]:
        arguments = json.dumps({"label": "memory", "content": content, "action": action})
        return {"id": "call_0", "type": "function", "function": {"name": "set_context", "arguments": arguments}}

    def last(body: dict[str, Any]) -> None:
        roles = [(m["role"], m.get("tool_call_id")) for m in body["messages"]]
        assert roles == [
            ("system", None),
            ("user", None),
            ("assistant", None),
            ("tool", "call_0"),
            ("assistant", None),
            ("tool", "call_0"),
        ]
        assert body["messages"][3]["content"] == "Written to memory. Usage: 0% (5/1100 tokens)"
        assert body["messages"][5]["content"] == "Written to memory. Usage: 1% (11/1100 tokens)"
        assert "User likes coffee.\nUser prefers dark roast." in body["messages"][0]["content"]

    server.expect(
        lambda body: None,
        completion(
            {"role": "assistant", "content": None, "tool_calls": [call("User likes coffee.", "replace")]},
            "tool_calls",
            1,
        ),
    )
    server.expect(
        lambda body: None,
        completion(
            {"role": "assistant", "content": None, "tool_calls": [call("User prefers dark roast.", "append")]},
            "tool_calls",
            2,
        ),
    )
    server.expect(last, completion({"role": "assistant", "content": "Done."}, "stop", 3))
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    with memory_session(tmp_path / "chat.db") as session:
        session.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "Remember my coffee."}]})
        for _ in range(3):
            response = client.chat.completions.create(
                model=MODEL,
                messages=to_openai_messages(session.get_history(), system_prompt=session.refresh_system_prompt()),
                tools=to_openai_tools(session.tools()),
            )
            reply = from_openai_message(response.choices[0].message)
            session.append_message(reply)
            for message in run_tool_calls(session.tools(), reply):
                assert session.append_message(message).inserted
        assert [m.role for m in session.get_history()] == [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        # running the same reply's calls again gives the same ids: a retried append stores nothing
        assert [m.id for m in run_tool_calls([], reply)] == []
        second = session.get_history()[3]
        again = run_tool_calls([], second)
        assert [m.id for m in again] == [session.get_history()[4].id]
        assert not session.append_message(again[0]).inserted


# -- compaction with openai_summarizer ---------------------------------------------------------


SUMMARY = "## Topic\nCoffee preferences\n\n## Key Points\n- The user likes dark roast."


def long_session(path: Path) -> Session:
    session = Session(path).for_session("compact")
    for i in range(8):
        role = "user" if i % 2 == 0 else "assistant"
        session.append_message(
            {"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": f"coffee talk {i} " * 20}]}
        )
    return session


def expect_summary_request(server: ScriptedServer) -> None:
    def check(body: dict[str, Any]) -> None:
        assert body["model"] == MODEL
        assert body["temperature"] == 0
        assert "tools" not in body
        (message,) = body["messages"]
        assert message["role"] == "user"
        prompt = message["content"]
        assert "coffee talk 3" in prompt and "coffee talk 4" in prompt
        assert "coffee talk 0" not in prompt and "coffee talk 7" not in prompt  # head and tail are kept

    server.expect(check, completion({"role": "assistant", "content": SUMMARY}))


def check_compacted(session: Session) -> None:
    (compaction,) = session.get_compactions()
    assert (compaction.summary, compaction.from_message_id, compaction.to_message_id) == (SUMMARY, "m3", "m5")
    history = session.get_history()
    assert [m.id for m in history] == ["m0", "m1", "m2", f"compaction_{compaction.id}", "m6", "m7"]
    assert history[3].text == SUMMARY


def compact_function(client: Any) -> Any:
    return create_compact_function(
        summarize=openai_summarizer(client, MODEL, temperature=0), keep_recent_tokens=10, min_tail_messages=2
    )


def test_openai_summarizer_with_the_sync_client(server: ScriptedServer, tmp_path: Path) -> None:
    expect_summary_request(server)
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    with long_session(tmp_path / "c.db") as session:
        result = session.on_compaction(compact_function(client)).compact()
        assert (result.summary, result.from_message_id, result.to_message_id) == (SUMMARY, "m3", "m5")
        check_compacted(session)


def test_openai_summarizer_with_the_async_client(server: ScriptedServer, tmp_path: Path) -> None:
    expect_summary_request(server)

    async def run() -> None:
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0) as client:
            summarize = openai_summarizer(client, MODEL, temperature=0)
            assert asyncio.iscoroutinefunction(summarize)
            session = long_session(tmp_path / "c.db")
            result = await session.on_compaction(compact_function(client)).acompact()
            assert result is not None and result.summary == SUMMARY
            check_compacted(session)
            await session.aclose()

    asyncio.run(run())


def test_async_summarizer_from_sync_compact(server: ScriptedServer, tmp_path: Path) -> None:
    expect_summary_request(server)
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    with long_session(tmp_path / "c.db") as session:
        assert session.on_compaction(compact_function(client)).compact() is not None
        check_compacted(session)


def test_a_failing_summarizer_leaves_history_unchanged(server: ScriptedServer, tmp_path: Path) -> None:
    def check(body: dict[str, Any]) -> None:
        raise AssertionError("model overloaded")

    server.expect(check, {})
    client = openai.OpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    with long_session(tmp_path / "c.db") as session:
        with pytest.raises(Exception, match="model overloaded"):
            session.on_compaction(compact_function(client)).compact()
        assert session.get_compactions() == []
        assert [m.id for m in session.get_history()] == [f"m{i}" for i in range(8)]
    server.failures.clear()  # the failure was scripted
