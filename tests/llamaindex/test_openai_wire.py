"""The OpenAI wire format through llama-index-llms-openai's ``OpenAI`` LLM, against a local
Chat Completions server started here (127.0.0.1, port 0): our tool schemas and context reach
the request, and tool calls and results come back in the shape the API expects."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

pytest.importorskip("llama_index.llms.openai")

from llama_index.core.agent.workflow import FunctionAgent  # noqa: E402
from llama_index.core.chat_engine import SimpleChatEngine  # noqa: E402
from llama_index.llms.openai import OpenAI  # noqa: E402

from llamaindex_sessions import SessionMemory, SessionToolSpec  # noqa: E402
from sessions_core import Session  # noqa: E402

MODEL = "gpt-4o-mini"


class ChatServer:
    """Answers POST /v1/chat/completions with scripted assistant messages (JSON or SSE) and
    records every request body."""

    def __init__(self, replies: list[dict[str, Any]], *, summary: str = "") -> None:
        self.replies = list(replies)
        self.summary = summary
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                server.requests.append(body)
                if server.summary and server.is_summary(body):
                    message = {"role": "assistant", "content": server.summary}
                elif self.path == "/v1/chat/completions" and server.replies:
                    message = server.replies.pop(0)
                else:
                    self.send_response(400)
                    self.end_headers()
                    return
                finish = "tool_calls" if message.get("tool_calls") else "stop"
                if body.get("stream"):
                    self.send_response(200)
                    self.send_header("Content-Type", "text/event-stream")
                    self.end_headers()
                    delta = dict(message)
                    if "tool_calls" in delta:
                        delta["tool_calls"] = [dict(call, index=i) for i, call in enumerate(delta["tool_calls"])]
                    for choice in (
                        {"index": 0, "delta": delta, "finish_reason": None},
                        {"index": 0, "delta": {}, "finish_reason": finish},
                    ):
                        chunk = {
                            "id": "c",
                            "object": "chat.completion.chunk",
                            "created": 1,
                            "model": MODEL,
                            "choices": [choice],
                        }
                        self.wfile.write(f"data: {json.dumps(chunk)}\n\n".encode())
                    self.wfile.write(b"data: [DONE]\n\n")
                    return
                data = json.dumps(
                    {
                        "id": "c",
                        "object": "chat.completion",
                        "created": 1,
                        "model": MODEL,
                        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                """Keep the test output quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @staticmethod
    def is_summary(body: dict[str, Any]) -> bool:
        text = json.dumps(body)
        return "CONVERSATION TO SUMMARIZE" in text or "NEW TURNS TO INCORPORATE" in text

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.mark.parametrize("streaming", [True, False])
def test_function_agent_over_the_openai_wire(session, streaming):
    server = ChatServer(
        [
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [call("call_abc", "set_context", {"label": "memory", "content": "User is Ada."})],
            },
            {"role": "assistant", "content": "Nice to meet you, Ada."},
            {"role": "assistant", "content": "You are Ada."},
        ]
    )
    try:
        llm = OpenAI(model=MODEL, api_key="test", api_base=server.base_url, max_retries=0)
        tools = SessionToolSpec(session).to_tool_list()
        agent = FunctionAgent(tools=tools, llm=llm, system_prompt="You are helpful.", streaming=streaming)
        memory = SessionMemory(session=session).bind(agent)

        async def go():
            first = await agent.run(user_msg="I am Ada.", memory=memory)
            second = await agent.run(user_msg="Who am I?", memory=memory)
            return first, second

        first, second = asyncio.run(go())
    finally:
        server.close()
    assert (str(first), str(second)) == ("Nice to meet you, Ada.", "You are Ada.")
    one, two, three = server.requests

    # Our schemas, exactly, in every request (the OpenAI LLM adds its strict-mode flags).
    expected = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in session.tools()]
    for request in server.requests:
        assert request["model"] == MODEL
        sent = [dict(tool["function"]) for tool in request["tools"]]
        for function in sent:
            assert function.pop("strict") is False
            assert function["parameters"].pop("additionalProperties") is False
        assert sent == expected

    # The context blocks as a system message (after the agent's own), the user message after it.
    assert [m["role"] for m in one["messages"]] == ["system", "system", "user"]
    assert "MEMORY (Learned facts)" in one["messages"][1]["content"]

    # The tool call and its result in the API's shape; the prompt frozen during the run.
    assistant, tool = two["messages"][3:5]
    assert assistant["tool_calls"][0]["id"] == "call_abc"
    assert json.loads(assistant["tool_calls"][0]["function"]["arguments"]) == {
        "label": "memory",
        "content": "User is Ada.",
    }
    assert tool == {
        "role": "tool",
        "content": "Written to memory. Usage: 1% (4/500 tokens)",
        "tool_call_id": "call_abc",
    }
    assert two["messages"][1] == one["messages"][1]

    # The next run: the write shows in the system message, the stored turn is replayed as it went.
    assert "User is Ada." in three["messages"][1]["content"]
    assert [m["role"] for m in three["messages"]] == [
        "system",
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "user",
    ]
    assert three["messages"][3]["tool_calls"] == assistant["tool_calls"]
    assert three["messages"][4] == tool


def test_chat_engine_and_compaction_over_the_openai_wire(db):
    session = Session(db).for_session("wire").with_context("memory")
    replies = [{"role": "assistant", "content": f"reply {i} " + "word " * 30} for i in range(4)]
    server = ChatServer(replies, summary="SUMMARY of the first questions.")
    try:
        llm = OpenAI(model=MODEL, api_key="test", api_base=server.base_url, max_retries=0)
        memory = SessionMemory(session=session, token_limit=400)
        engine = SimpleChatEngine.from_defaults(llm=llm, memory=memory)
        memory.bind(engine)
        for i in range(4):
            engine.chat(f"question {i} " + "word " * 30)
    finally:
        server.close()
    summary_requests = [r for r in server.requests if server.is_summary(r)]
    assert summary_requests and len(summary_requests) == len(session.get_compactions())
    for request in summary_requests:  # a plain request: no tools, the prompt as one user message
        assert "tools" not in request and [m["role"] for m in request["messages"]] == ["user"]
    assert server.replies == []  # every chat reply went to the chat
    assert any(m.content == "SUMMARY of the first questions." for m in memory.get())
    assert len(memory.get_all()) == 8
