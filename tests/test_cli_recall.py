"""``sessions recall``: the outbox's backlog, sending it to an index named MODULE:NAME, rebuilding."""

from __future__ import annotations

import json
import re
import sys
import types

import pytest

pytest.importorskip("click", reason="the cli extra is not installed (pip install 'session-memory[cli]')")
pytest.importorskip("langchain_core")

from langchain_core.vectorstores import InMemoryVectorStore

from langchain_sessions import SynonymEmbeddings, VectorStoreRecall
from sessions_core import Session

from .helpers import msg
from .test_cli import assert_error, run

INDEX_MODULE = "sessions_recall_cli_index"


@pytest.fixture
def vector_store(monkeypatch):
    """An in-memory vector store the CLI reaches as ``sessions_recall_cli_index:index``."""
    store = InMemoryVectorStore(SynonymEmbeddings())
    module = types.ModuleType(INDEX_MODULE)
    module.index = lambda: VectorStoreRecall(store)
    module.down = lambda: VectorStoreRecall(_Down(SynonymEmbeddings()))
    module.not_an_index = lambda: object()
    monkeypatch.setitem(sys.modules, INDEX_MODULE, module)
    return store


class _Down(InMemoryVectorStore):
    def add_texts(self, *args, **kwargs):
        raise ConnectionError("vector store unreachable")


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "recall.db"
    with Session(path).for_session("trip") as s:
        s.with_semantic_recall(VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings())), background=False)
        s.append_message(msg("a", "We agreed on the automobile lease"))
        s.append_message(msg("b", "The garden needs new soil"))
    return str(path)


def test_backlog_shows_what_waits(db):
    result = run("--store", db, "recall", "backlog", "--json")
    assert result.exit_code == 0, result.stderr
    data = json.loads(result.stdout)
    assert data == {"pending": 3, "failing": 0, "last_error": None, "sessions": 1, "vectors": 0}
    table = run("--store", db, "recall", "backlog")
    assert "pending" in table.stdout and "3" in table.stdout


def test_send_drains_the_outbox_into_the_index(db, vector_store):
    result = run("--store", db, "recall", "send", "--index", f"{INDEX_MODULE}:index")
    assert result.exit_code == 0, result.stderr
    assert re.search(r"Sent \d+ change\(s\): 2 vector\(s\) added, 0 removed\.", result.stdout)
    assert len(vector_store.store) == 2
    assert json.loads(run("--store", db, "recall", "backlog", "--json").stdout)["pending"] == 0
    [(document, _)] = vector_store.similarity_search_with_score("car", k=1)
    assert document.page_content == "We agreed on the automobile lease"


def test_rebuild_fills_an_empty_index_from_the_store(db, vector_store):
    assert run("--store", db, "recall", "send", "--index", f"{INDEX_MODULE}:index").exit_code == 0
    vector_store.store.clear()
    result = run("--store", db, "recall", "rebuild", "--index", f"{INDEX_MODULE}:index")
    assert result.exit_code == 0, result.stderr
    assert "Queued 1 session(s)" in result.stdout
    assert len(vector_store.store) == 2
    queued = run("--store", db, "recall", "rebuild", "--session", "trip")
    assert "Queued 1 session(s)" in queued.stdout and "recall off" not in queued.stdout
    assert json.loads(run("--store", db, "recall", "backlog", "--json").stdout)["pending"] == 1
    unknown = run("--store", db, "recall", "rebuild", "--session", "trip", "--session", "no-recall")
    assert unknown.exit_code == 0 and "1 of the 2 sessions named have semantic recall off" in unknown.stdout


def test_a_failing_index_keeps_the_backlog_and_says_why(db, vector_store):
    result = run("--store", db, "recall", "send", "--index", f"{INDEX_MODULE}:down")
    assert_error(result, 1, "the index failed", "vector store unreachable")
    data = json.loads(run("--store", db, "recall", "backlog", "--json").stdout)
    assert data["pending"] >= 2 and data["failing"] >= 2
    assert "vector store unreachable" in data["last_error"]


@pytest.mark.parametrize(
    "spec, fragment",
    [
        ("no_colon", "MODULE:NAME"),
        ("no_such_module_xyz:index", "No module named"),
        (f"{INDEX_MODULE}:missing", "has no attribute"),
        (f"{INDEX_MODULE}:not_an_index", "must have add, delete and search"),
    ],
)
def test_a_bad_index_is_a_usage_error(db, vector_store, spec, fragment):
    assert_error(run("--store", db, "recall", "send", "--index", spec), 2, fragment)
