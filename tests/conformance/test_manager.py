"""The suite's manager contract (``sessions_core.testing.manager``) on the project's stores, and
what another process sees of a SQLite file."""

import json
import subprocess
import sys
import textwrap

import pytest

from sessions_core import SessionManager, SqliteStore
from sessions_core.testing.builders import ids
from sessions_core.testing.manager import *  # noqa: F403
from sessions_core.testing.manager import populate as _populate

_READER = textwrap.dedent(
    """
    import json, sys
    from sessions_core import SessionManager, StoreSearchContext
    m = SessionManager(sys.argv[1], namespace="team")
    m.with_context("memory").with_context("notes", provider=StoreSearchContext()).with_cached_prompt()
    out = {"sessions": [], "other_namespace": len(SessionManager(sys.argv[1]).list_sessions())}
    for info in m.list_sessions():
        s = m.get_session(info.id)
        out["sessions"].append({
            "info": [info.id, info.name, info.parent_session_id, info.model, info.source, info.input_tokens,
                     info.output_tokens, info.estimated_cost, info.end_reason,
                     info.created_at.isoformat(), info.updated_at.isoformat()],
            "history": [[x.id, x.role, x.text] for x in m.get_history(info.id)],
            "memory": s.get_context_block("memory").content,
            "notes": s.get_context_block("notes").content,
            "prompt": s.freeze_system_prompt(),
        })
    out["search"] = sorted([h.session_id, h.id] for h in m.search("walrus"))
    first = m.list_sessions()[-1].id
    m.append(first, {"id": "from-child", "role": "user", "parts": [{"type": "text", "text": "child process"}]})
    m.add_usage(first, 1, 1, 0.5)
    print(json.dumps(out))
    m.close()
    """
)


def test_another_process_sees_every_session_block_and_counter(tmp_path, drive):
    path = tmp_path / "shared.db"
    store = SqliteStore(path)
    try:
        m = drive(SessionManager(store, namespace="team"))
        a, prompt = _populate(m)
        mine = []
        for info in m.list_sessions():
            s = m.get_session(info.id)
            mine.append(
                {
                    "info": [
                        info.id,
                        info.name,
                        info.parent_session_id,
                        info.model,
                        info.source,
                        info.input_tokens,
                        info.output_tokens,
                        info.estimated_cost,
                        info.end_reason,
                        info.created_at.isoformat(),
                        info.updated_at.isoformat(),
                    ],
                    "history": [[x.id, x.role, x.text] for x in m.get_history(info.id)],
                    "memory": s.get_context_block("memory").content,
                    "notes": s.get_context_block("notes").content,
                    "prompt": s.freeze_system_prompt(),
                }
            )
        done = subprocess.run([sys.executable, "-c", _READER, str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        assert seen["other_namespace"] == 0
        assert seen["sessions"] == mine
        assert [x["prompt"] for x in seen["sessions"] if x["info"][0] == a] == [prompt]
        assert seen["search"] == sorted([h.session_id, h.id] for h in m.search("walrus"))
        # ... and this process sees what the child wrote.
        assert ids(m.get_history(a))[-1] == "from-child"
        assert m.get(a).input_tokens == 101 and m.get(a).estimated_cost == pytest.approx(1.75)
        assert m.list_sessions()[0].id == a
    finally:
        store.close()
