"""The OpenAI wire format: ChatOpenAI (langchain-openai) against a local server started by the
test, which checks that our tool schemas and system prompt are in the requests."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_openai import ChatOpenAI

from langchain_sessions import SessionMemoryMiddleware, SessionToolkit
from sessions_core import SessionManager


def completion(message, finish="stop"):
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": 0,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25},
    }


def tool_call(name, args, call_id):
    return completion(
        {
            "content": None,
            "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
            ],
        },
        "tool_calls",
    )


class FakeOpenAI:
    """An OpenAI-compatible /v1/chat/completions answering from a script; summary requests
    (no tools, a summary prompt) get a fixed summary."""

    def __init__(self, script):
        self.script = list(script)
        self.requests: list[dict] = []
        self.summary_requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                last = body["messages"][-1].get("content") or ""
                if "tools" not in body and isinstance(last, str) and "summary" in last[:80]:
                    server.summary_requests.append(body)
                    reply = completion({"content": "WIRE-SUMMARY"})
                else:
                    server.requests.append(body)
                    reply = server.script.pop(0)
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                """Keep the test output quiet."""

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def openai_server():
    servers = []

    def start(script):
        servers.append(FakeOpenAI(script))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def chat_openai(server):
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.url, api_key="sk-test", max_retries=0)


def test_agent_requests_carry_our_tools_and_prompt(openai_server):
    server = openai_server(
        [
            tool_call("set_context", {"label": "memory", "content": "The user likes tea."}, "call_1"),
            completion({"content": "Noted."}),
            completion({"content": "You like tea."}),
        ]
    )
    manager = SessionManager(":memory:").with_context("memory", description="Facts about the user", max_tokens=100)
    agent = create_agent(
        chat_openai(server), system_prompt="You are helpful.", middleware=[SessionMemoryMiddleware(manager)]
    )
    config = {"configurable": {"thread_id": "wire"}}
    agent.invoke({"messages": [HumanMessage("Remember that I like tea.")]}, config)
    agent.invoke({"messages": [HumanMessage("What do I like?")]}, config)

    first, second, third = server.requests
    tools = {t["function"]["name"]: t["function"] for t in first["tools"]}
    assert set(tools) == {"set_context", "session_search"}
    params = tools["set_context"]["parameters"]
    assert params["properties"]["label"]["enum"] == ["memory"]
    assert params["required"] == ["label", "content"]
    assert tools["session_search"]["parameters"]["required"] == ["query"]
    assert first["messages"][0]["role"] == "system"
    assert first["messages"][0]["content"].startswith("You are helpful.\n\n")
    assert "MEMORY (Facts about the user)" in first["messages"][0]["content"]

    assert second["messages"][2]["tool_calls"][0]["id"] == "call_1"
    assert second["messages"][3] == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "Written to memory. Usage: 6% (6/100 tokens)",
    }
    assert "The user likes tea." in third["messages"][0]["content"]
    assert [m["role"] for m in third["messages"]] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert manager.get("wire").input_tokens == 60


def test_compaction_over_the_wire(openai_server):
    server = openai_server([completion({"content": f"answer {i} " + "tea " * 40}) for i in range(5)])
    manager = SessionManager(":memory:")
    middleware = SessionMemoryMiddleware(
        manager, compact_at=400, keep_recent_tokens=120, protect_head=2, summary_max_retries=0
    )
    agent = create_agent(chat_openai(server), middleware=[middleware])
    for i in range(5):
        agent.invoke(
            {"messages": [HumanMessage(f"question {i} " + "milk " * 40)]}, {"configurable": {"thread_id": "c"}}
        )
    assert server.summary_requests
    summary_request = server.summary_requests[0]
    assert [m["role"] for m in summary_request["messages"]] == ["user"]
    last = server.requests[-1]["messages"]
    assert {"role": "assistant", "content": "WIRE-SUMMARY"} in last
    assert "lc_source" not in json.dumps(server.requests + server.summary_requests)


def test_toolkit_schemas_bound_to_chat_openai(openai_server):
    server = openai_server([completion({"content": "ok"})])
    manager = SessionManager(":memory:").with_context("memory")
    chat_openai(server).bind_tools(SessionToolkit(manager).get_tools()).invoke("hi")
    (request,) = server.requests
    assert [t["function"]["name"] for t in request["tools"]] == ["set_context", "session_search"]
    assert "runtime" not in json.dumps(request["tools"])
