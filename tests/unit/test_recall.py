"""Semantic recall's pure parts: chunking, vector ids, fusion, modes, the test embedding, what a
message contributes; and the sender's retry delays and metadata, over a stub store."""

from __future__ import annotations

import math

import pytest

from sessions_core import InvalidInputError, SemanticRecall, VectorHit, VectorIndex, parse_message
from sessions_core.integration import metadata_matches, synonym_embedding
from sessions_core.messages import recall_text
from sessions_core.recall import check_mode, chunk_text, entry_ref, fuse, split_entry_ref, vector_id
from tests.helpers import CoreOnlyStore


def test_short_texts_are_one_chunk_and_blank_ones_none():
    assert chunk_text("hello world", 100, 10) == ["hello world"]
    assert chunk_text("   ", 100, 10) == []


def test_long_texts_are_cut_at_spaces_with_overlap_and_lose_no_word():
    words = [f"w{n}" for n in range(400)]
    chunks = chunk_text(" ".join(words), 100, 20)
    assert all(len(chunk) <= 100 for chunk in chunks)
    assert all(not chunk.startswith(" ") and not chunk.endswith(" ") for chunk in chunks)
    seen = [word for chunk in chunks for word in chunk.split()]
    assert set(seen) == set(words)
    assert len(seen) > len(words)  # the overlap repeats some
    assert chunks[0].split()[0] == "w0" and chunks[-1].split()[-1] == "w399"


def test_a_text_without_spaces_is_cut_anyway():
    chunks = chunk_text("x" * 1000, 300, 50)
    assert all(len(chunk) <= 300 for chunk in chunks) and len(chunks) == 4


def test_vector_ids_are_uuids_stable_and_distinct_per_source():
    first = vector_id("s", "message", "m1", 0)
    assert first == vector_id("s", "message", "m1", 0)
    assert (
        len(
            {
                first,
                vector_id("s", "message", "m1", 1),
                vector_id("t", "message", "m1", 0),
                vector_id("s", "entry", "m1", 0),
            }
        )
        == 4
    )
    assert len(first) == 36 and first.count("-") == 4


def test_entry_refs_round_trip():
    assert split_entry_ref(entry_ref("notes", "a:b c")) == ("notes", "a:b c")


def test_fusion_rewards_agreement_and_keeps_each_key_once():
    text = ["a", "b", "c"]
    semantic = ["d", "b", "a"]
    fused = fuse([text, semantic], 10)
    assert fused[:2] == ["b", "a"] or fused[:2] == ["a", "b"]
    assert sorted(fused) == ["a", "b", "c", "d"]
    assert fuse([text, semantic], 2) == fused[:2]
    assert fuse([["x"], []], 5) == ["x"]
    assert fuse([[], []], 5) == []


def test_fusion_breaks_ties_by_first_appearance():
    assert fuse([["a"], ["b"]], 2) == ["a", "b"]


def test_modes_are_checked():
    assert check_mode("text", False) == "text"
    assert check_mode("hybrid", True) == "hybrid"
    with pytest.raises(ValueError, match="with_semantic_recall"):
        check_mode("semantic", False)
    with pytest.raises(ValueError, match="mode must be one of 'text', 'semantic', 'hybrid'"):
        check_mode("vector", True)


def _cosine(a: str, b: str) -> float:
    return sum(x * y for x, y in zip(synonym_embedding(a), synonym_embedding(b)))


def test_the_synonym_embedding_places_synonyms_close_and_the_rest_apart():
    assert _cosine("car", "automobile") == pytest.approx(1.0)
    assert _cosine("what did we decide about the car?", "We agreed on the automobile lease") > 0.5
    assert _cosine("what did we decide about the car?", "The garden needs new soil") == pytest.approx(0.0)
    assert synonym_embedding("Car!") == synonym_embedding("car")
    assert math.isclose(sum(x * x for x in synonym_embedding("a b c")), 1.0)
    assert synonym_embedding("the of and") != [0.0] * 256  # never a zero vector


def test_the_synonym_embedding_takes_more_groups():
    assert _cosine("espresso", "coffee") < 0.5
    a = synonym_embedding("espresso", groups=[("coffee", "espresso")])
    b = synonym_embedding("coffee", groups=[("coffee", "espresso")])
    assert sum(x * y for x, y in zip(a, b)) == pytest.approx(1.0)


def test_metadata_filters_match_values_and_lists():
    metadata = {"session_id": "s1", "kind": "message"}
    assert metadata_matches(metadata, {"session_id": "s1"})
    assert metadata_matches(metadata, {"session_id": ["s0", "s1"], "kind": "message"})
    assert not metadata_matches(metadata, {"session_id": ["s0"]})
    assert not metadata_matches(metadata, {"label": "notes"})


def test_recall_text_holds_text_and_tool_results_not_calls_or_reasoning():
    message = parse_message(
        {
            "id": "m",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "thinking hard"},
                {"type": "text", "text": "Looking it up."},
                {"type": "tool-call", "toolCallId": "c", "toolName": "lookup", "input": {"q": "secret input"}},
                {"type": "tool-result", "toolCallId": "c", "output": {"lease": "automobile"}},
                {
                    "type": "tool-weather",
                    "toolCallId": "d",
                    "state": "output-available",
                    "input": {},
                    "output": "Sunny",
                },
            ],
        }
    )
    assert recall_text(message) == 'Looking it up.\n\n{"lease": "automobile"}\n\nSunny'


class _Index:
    def add(self, ids, texts, metadatas):  # noqa: ANN001, ANN201
        return None

    def delete(self, ids):  # noqa: ANN001, ANN201
        return None

    def search(self, query, k, where):  # noqa: ANN001, ANN201
        return [VectorHit("v", 1.0)]


def test_semantic_recall_checks_what_it_is_given():
    assert isinstance(_Index(), VectorIndex) is False  # no async methods: the sync ones suffice
    SemanticRecall(_Index())
    with pytest.raises(TypeError, match="must have add, delete and search"):
        SemanticRecall(object())
    with pytest.raises(ValueError, match="chunk_chars must be larger"):
        SemanticRecall(_Index(), chunk_chars=100, chunk_overlap=100)
    with pytest.raises(RuntimeError, match="not attached"):
        SemanticRecall(_Index()).backlog()


def test_one_semantic_recall_serves_one_store():
    from sessions_core import SqliteStore

    recall = SemanticRecall(_Index())
    first = SqliteStore(":memory:")
    recall.attach(first)
    recall.attach(first)
    with pytest.raises(ValueError, match="another store"):
        recall.attach(SqliteStore(":memory:"))


def test_recall_text_leaves_out_what_searches_found():
    message = parse_message(
        {
            "id": "m",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "c", "toolName": "session_search", "output": "[user] old turn"},
                {
                    "type": "tool-search_context",
                    "toolCallId": "d",
                    "state": "output-available",
                    "input": {},
                    "output": "x",
                },
                {"type": "tool-result", "toolCallId": "e", "toolName": "lookup", "output": "kept"},
            ],
        }
    )
    assert recall_text(message) == "kept"


def test_searches_ask_the_index_for_a_bounded_number_of_vectors():
    from sessions_core.semantic import _nearest

    assert [_nearest(n) for n in (1, 10, 100, 250, 1000, 5000)] == [20, 40, 400, 1000, 1000, 5000]


def test_options_go_with_a_new_semantic_recall_only():
    from sessions_core import Session, SessionManager

    for owner in (Session(), SessionManager()):
        shared = SemanticRecall(_Index(), background=False)
        with pytest.raises(InvalidInputError, match="pass them when creating the shared one"):
            owner.with_semantic_recall(shared, min_score=0.1)
        assert owner.with_semantic_recall(shared).recall is shared
        owner.close()


def test_recall_on_a_store_without_an_outbox_is_a_clear_error():
    from sessions_core import Session, StoreError

    store = CoreOnlyStore()
    with pytest.raises(StoreError, match="does not implement RecallStore"):
        Session(store).with_semantic_recall(_Index())
    store.close()


def test_the_recall_suite_skips_a_store_without_an_outbox(tmp_path):
    """A store of your own that does not keep the outbox passes the suite: its recall tests skip."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    (tmp_path / "test_core_only.py").write_text(
        "import pytest\n"
        "from sessions_core.testing import Backend\n"
        "from sessions_core.testing.harness import drive, make_manager, make_session, mode, persistent_backend\n"
        "from sessions_core.testing.recall import *\n"
        "from tests.helpers import CoreOnlyStore\n"
        "\n"
        "@pytest.fixture\n"
        "def backend():\n"
        "    return Backend('core-only', CoreOnlyStore, persistent=False)\n",
        encoding="utf-8",
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "langchain",
            "--rootdir",
            str(tmp_path),
            str(tmp_path / "test_core_only.py"),
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    summary = result.stdout.strip().splitlines()[-1]
    assert result.returncode == 0 and "failed" not in summary and "error" not in summary, result.stdout
    assert "2 passed" in summary and "skipped" in summary  # the index contract runs without a store
