"""The LoCoMo retrieval benchmark (bench/bench_retrieval.py) on a small slice, SQLite only.

The data is not part of the project: the test runs where the LoCoMo folder is found
(``LOCOMO_DIR``, else ``../shared/data/locomo`` from the repository root) and skips otherwise.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "bench" / "bench_retrieval.py"
DATA = Path(os.environ.get("LOCOMO_DIR") or ROOT.parent / "shared" / "data" / "locomo").resolve()
CONVERSATION = "conv-26"
QUESTIONS = 30

pytestmark = pytest.mark.skipif(
    not (DATA / f"{CONVERSATION}.json").is_file(),
    reason=f"LoCoMo data not found at {DATA} (set LOCOMO_DIR, or put it at ../shared/data/locomo)",
)


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_retrieval", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is made
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="module")
def conversations(bench):
    return bench.load(DATA, [CONVERSATION], QUESTIONS)


@pytest.fixture(scope="module")
def results(bench, conversations, tmp_path_factory):
    return bench.run(conversations, backends=("sqlite",), folder=tmp_path_factory.mktemp("retrieval"))


def test_the_slice_is_read_as_the_data_says(bench, conversations):
    [conversation] = conversations
    assert bench.data_folder() == DATA
    assert len(conversation.questions) == QUESTIONS
    assert all(q.category in bench.CATEGORIES for q in conversation.questions)
    known = {t.dia_id for t in conversation.turns}
    assert all(q.evidence and set(q.evidence) <= known for q in conversation.questions)
    turns = conversation.turns
    assert [t.created_at for t in turns] == sorted(t.created_at for t in turns)  # strictly in order
    assert len({t.created_at for t in turns}) == len(turns)


def test_the_session_holds_the_conversation_in_order(bench, conversations):
    [conversation] = conversations
    session = bench.one_session(conversation, ":memory:")
    history = session.get_history()
    assert [m.id for m in history] == [t.dia_id for t in conversation.turns]
    assert [m.created_at for m in history] == [t.created_at for t in conversation.turns]
    assert history[0].text == conversation.turns[0].content


def test_figures_are_shares_and_consistent(bench, results):
    assert set(results) == {
        "sqlite search all",
        "sqlite search any",
        "sqlite manager.search",
        "sqlite session_search",
        "bm25",
    }
    for label, found in results.items():
        assert found["questions"] == QUESTIONS
        assert found["p50_ms"] is not None and found["p50_ms"] >= 0
        groups = [found["overall"], *(f for f in found["by_category"].values() if f["questions"])]
        assert sum(f["questions"] for f in found["by_category"].values()) == QUESTIONS
        for figures in groups:
            shares = {k: v for k, v in figures.items() if k != "questions"}
            assert shares and all(0.0 <= v <= 1.0 for v in shares.values()), (label, figures)
            if label.endswith("session_search"):
                assert set(shares) == {"hit", "no_result"}
                continue
            assert figures["recall_any@10"] >= figures["recall_any@5"] >= figures["recall_any@1"], (label, figures)
            assert figures["recall_all@10"] >= figures["recall_all@5"] >= figures["recall_all@1"], (label, figures)
            for k in bench.KS:
                assert figures[f"recall_all@{k}"] <= figures[f"recall_any@{k}"], (label, k, figures)


def test_default_search_finds_evidence(results):
    default, every_word = results["sqlite search any"]["overall"], results["sqlite search all"]["overall"]
    assert default["recall_any@10"] >= 0.4
    assert default["recall_any@10"] >= every_word["recall_any@10"]
    assert default["no_result"] <= every_word["no_result"]
    # the manager over one session per LoCoMo session sees the same turns
    assert results["sqlite manager.search"]["overall"]["recall_any@10"] >= 0.4
    assert results["sqlite session_search"]["overall"]["hit"] >= 0.4


def test_bm25_anchor_computes(bench, conversations, results):
    anchor = results["bm25"]["overall"]
    assert anchor["no_result"] == 0.0
    assert 0.0 < anchor["recall_any@10"] <= 1.0
    [conversation] = conversations
    rank = bench.bm25_ranker(conversation)
    ranked = rank(conversation.questions[0].question)
    assert len(ranked) == bench.LIMIT and len(set(ranked)) == bench.LIMIT
    assert set(ranked) <= {t.dia_id for t in conversation.turns}


def test_scoring(bench):
    figures = bench.score_ranked(["D1:1", "D1:2", "D1:3"], ["D1:2", "D9:9"])
    assert figures["recall_any@1"] == 0.0 and figures["recall_any@5"] == 1.0
    assert figures["recall_all@10"] == 0.0 and figures["no_result"] == 0.0
    assert bench.score_ranked([], ["D1:1"])["no_result"] == 1.0
    notes: list[str] = []
    assert bench.evidence_ids(["D8:6; D9:17", "D:1:2", "D", "D8:6"], {"D8:6", "D9:17", "D1:2"}, notes) == [
        "D8:6",
        "D9:17",
        "D1:2",
    ]
    assert len(notes) == 3
