"""History and context blocks survive a process restart (a SQLite file, no checkpointer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_sessions import SessionMemoryMiddleware
from sessions_core import Session
from tests.langchain.helpers import ScriptedChatModel, call

db, question, script = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
responses = [call(*turn) if isinstance(turn, list) else AIMessage(turn) for turn in script]
with Session(db).for_session("user-1").with_context("memory", description="Facts") as session:
    model = ScriptedChatModel(responses=responses)
    agent = create_agent(model, system_prompt="Be brief.", middleware=[SessionMemoryMiddleware(session)])
    agent.invoke({{"messages": [HumanMessage(question)]}}, {{"configurable": {{"thread_id": "user-1"}}}})
    print(json.dumps({{"system": model.calls[0][0].text, "seen": [m.text for m in model.calls[0][1:]]}}))
"""


def run(tmp_path, question, script):
    path = tmp_path / "agent.py"
    path.write_text(SCRIPT.format(repo=str(REPO)))
    result = subprocess.run(
        [sys.executable, str(path), str(tmp_path / "memory.db"), question, json.dumps(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_history_and_blocks_load_in_a_new_process(tmp_path):
    first = run(
        tmp_path,
        "I like green tea.",
        [["set_context", {"label": "memory", "content": "Likes green tea."}, "c1"], "Noted."],
    )
    assert first["seen"] == ["I like green tea."]
    second = run(tmp_path, "What do I like?", ["Green tea."])
    assert second["seen"] == [
        "I like green tea.",
        "",
        "Written to memory. Usage: 4 tokens",
        "Noted.",
        "What do I like?",
    ]
    assert second["system"].startswith("Be brief.") and "Likes green tea." in second["system"]
    third = run(tmp_path, "Thanks.", ["Welcome."])
    assert third["seen"][-3:] == ["What do I like?", "Green tea.", "Thanks."]
    assert len(third["seen"]) == 7
