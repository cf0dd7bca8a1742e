"""The public surface of langchain_sessions."""

import subprocess
import sys
import types

import langchain_sessions


def test_all_lists_exactly_the_public_names():
    public = {
        name
        for name in dir(langchain_sessions)
        if not name.startswith("_") and not isinstance(getattr(langchain_sessions, name), types.ModuleType)
    }
    assert set(langchain_sessions.__all__) == public
    for name in langchain_sessions.__all__:
        assert getattr(langchain_sessions, name) is not None, name


def test_the_middleware_is_imported_on_first_use():
    code = (
        "import sys, langchain_sessions\n"
        "print('langchain_sessions.middleware' in sys.modules)\n"
        "langchain_sessions.SessionMemoryMiddleware\n"
        "print('langchain_sessions.middleware' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["False", "True"]


def test_example_output():
    import os
    from pathlib import Path

    example = Path(__file__).resolve().parents[2] / "examples" / "langchain_agent.py"
    env = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "ai   -> set_context(" in out
    assert "Sam loves green tea, no sugar." in out.split("run 2")[1].split("human")[0]
    assert "the model was shown the 4 earlier messages stored in memory.db" in out
    assert "ai   -> session_search({'query': 'green tea'})" in out
    assert "stored for 'sam': 6 messages" in out
    assert "sessions: ['other', 'sam']" in out
