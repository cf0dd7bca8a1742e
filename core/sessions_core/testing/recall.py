"""Semantic recall contract: the outbox, what reaches the index, isolation, hybrid ranking.

Runs with LangChain's ``InMemoryVectorStore`` and LlamaIndex's ``SimpleVectorStore`` (each when
its framework is installed) on the synonym test embedding, in which "car" and "automobile" are
close and unrelated words are not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from ..errors import SessionsError
from ..providers import StoreSearchContext
from .builders import ids, msg, plain_hits
from .harness import skip_where_unsupported

FILLER = [
    "The quarterly report is due on Friday",
    "Remember to water the plants in the office",
    "The concert tickets arrived this morning",
    "Our team retrospective went well",
    "Please review the pull request about logging",
    "The garden needs new soil in spring",
]
PARAPHRASE = "what did we decide about the car?"
MIN_SCORE = 0.05
"""Below it a cosine similarity shares no concept: the test indexes' unrelated hits."""


def _langchain_index() -> Any:
    pytest.importorskip("langchain_core")
    from langchain_core.vectorstores import InMemoryVectorStore

    from langchain_sessions import SynonymEmbeddings, VectorStoreRecall

    return VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings()))


def _llamaindex_index() -> Any:
    pytest.importorskip("llama_index.core")
    from llama_index.core.vector_stores import SimpleVectorStore

    from llamaindex_sessions import SynonymEmbedding, VectorStoreRecall

    return VectorStoreRecall(SimpleVectorStore(), SynonymEmbedding())


INDEXES: dict[str, Callable[[], Any]] = {"langchain-memory": _langchain_index, "llamaindex-simple": _llamaindex_index}


@pytest.fixture(params=sorted(INDEXES))
def make_index(request: pytest.FixtureRequest) -> Callable[[], Any]:
    """``make_index()``: a new, empty index of this test's kind."""
    return INDEXES[request.param]


class FlakyIndex:
    """An index that raises on every call while ``down``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.down = True
        self.calls = 0

    def _check(self) -> None:
        self.calls += 1
        if self.down:
            raise ConnectionError("vector store unreachable")

    def add(self, ids, texts, metadatas):  # noqa: ANN001, ANN201
        self._check()
        return self.inner.add(ids, texts, metadatas)

    def delete(self, ids):  # noqa: ANN001, ANN201
        self._check()
        return self.inner.delete(ids)

    def search(self, query, k, where):  # noqa: ANN001, ANN201
        self._check()
        return self.inner.search(query, k, where)


def _recalled(s: Any, make_index: Callable[[], Any], index: Any = None) -> Any:
    s.with_semantic_recall(index if index is not None else make_index(), background=False, min_score=MIN_SCORE)
    return s


def _history(s: Any) -> None:
    for n, text in enumerate(FILLER[:3]):
        s.append_message(msg(f"f{n}", text))
    s.append_message(msg("lease", "We agreed on the automobile lease for three years", role="assistant"))
    for n, text in enumerate(FILLER[3:], start=3):
        s.append_message(msg(f"f{n}", text))


def _vector_ids(s: Any) -> set[str]:
    return {row.vector_id for row in s.recall.store.recall_vectors(s.session_id)}


def test_a_paraphrase_finds_what_word_search_misses(make_session, make_index):
    s = _recalled(make_session("recall"), make_index)
    _history(s)
    s.drain_recall()
    assert s.search(PARAPHRASE) == []
    hits = s.search(PARAPHRASE, mode="semantic", limit=3)
    assert hits[0].id == "lease"
    assert (hits[0].role, hits[0].content, hits[0].session_id) == (
        "assistant",
        "We agreed on the automobile lease for three years",
        "recall",
    )
    assert hits[0].created_at == s.get_message("lease").created_at
    assert ids(s.search(PARAPHRASE, mode="hybrid", limit=3))[0] == "lease"


def test_hybrid_ranks_an_exact_word_hit_and_a_meaning_hit_on_top(make_session, make_index):
    s = _recalled(make_session(), make_index)
    _history(s)
    s.append_message(msg("tyres", "The car needs new tyres before winter"))
    s.drain_recall()
    assert ids(s.search("car")) == ["tyres"]
    top = ids(s.search("car", mode="hybrid", limit=2))
    assert sorted(top) == ["lease", "tyres"]
    hybrid = ids(s.search("car", mode="hybrid", limit=10))
    assert len(hybrid) == len(set(hybrid))


def test_search_modes_are_checked(make_session, make_index):
    s = make_session()
    s.append_message(msg("a", "plain words"))
    with pytest.raises(ValueError, match="with_semantic_recall"):
        s.search("words", mode="semantic")
    with pytest.raises(ValueError, match="mode must be one of"):
        s.search("words", mode="fuzzy")
    with pytest.raises(SessionsError, match="semantic recall is off"):
        s.drain_recall()
    assert ids(s.search("words", mode="text")) == ["a"]


def test_sessions_sharing_an_index_never_see_each_other(make_session, make_index):
    index = make_index()
    a = _recalled(make_session("alice"), make_index, index)
    b = _recalled(make_session("bob", store=a.store), make_index, index)
    a.append_message(msg("a1", "We agreed on the automobile lease"))
    b.append_message(msg("b1", "The vehicle was returned to the dealer"))
    a.drain_recall()
    b.drain_recall()
    assert ids(a.search("car", mode="semantic")) == ["a1"]
    assert ids(b.search("car", mode="semantic")) == ["b1"]
    assert {hit.session_id for hit in a.search("car", mode="hybrid")} == {"alice"}


def test_managers_in_other_namespaces_never_see_each_other(make_manager, make_index):
    index = make_index()
    first = make_manager("north").with_semantic_recall(index, background=False, min_score=MIN_SCORE)
    second = make_manager("south", store=first.store).with_semantic_recall(index, background=False, min_score=MIN_SCORE)
    one, two = first.create("one"), second.create("two")
    first.append(one.id, msg("n1", "We agreed on the automobile lease"))
    second.append(two.id, msg("s1", "The vehicle was returned to the dealer"))
    first.drain_recall()
    assert [(hit.session_id, hit.id) for hit in first.search("car", mode="semantic")] == [(one.id, "n1")]
    assert [(hit.session_id, hit.id) for hit in second.search("car", mode="semantic")] == [(two.id, "s1")]
    plain = _recalled(
        pytest.importorskip("sessions_core").Session(first.store).for_session("north:ghost"), make_index, index
    )
    plain.append_message(msg("g1", "An automobile not registered with the manager"))
    plain.drain_recall()
    assert "g1" not in ids(first.search("car", mode="hybrid"))


def test_deletes_and_clears_reach_the_index(make_session, make_index):
    s = _recalled(make_session("del"), make_index)
    _history(s)
    s.drain_recall()
    lease_vectors = {r.vector_id for r in s.recall.store.recall_vectors("del", "message", ["lease"])}
    assert lease_vectors
    s.delete_messages(["lease"])
    report = s.drain_recall()
    assert report.removed == len(lease_vectors)
    assert s.search(PARAPHRASE, mode="semantic") == [] or "lease" not in ids(s.search(PARAPHRASE, mode="semantic"))
    index = s.recall.index
    assert not {hit.id for hit in index.search("automobile lease", 50, {"session_id": "del"})} & lease_vectors
    s.clear_messages()
    s.drain_recall()
    assert _vector_ids(s) == set()
    assert index.search("automobile report plants", 50, {"session_id": "del"}) == []


def test_an_update_replaces_what_the_index_holds(make_session, make_index):
    s = _recalled(make_session(), make_index)
    s.append_message(msg("m", "We agreed on the automobile lease"))
    s.drain_recall()
    s.update_message(msg("m", "The puppy needs a vet appointment"))
    s.drain_recall()
    assert s.search("car", mode="semantic") == [] or s.search("car", mode="semantic")[0].content.startswith("The puppy")
    [hit] = s.search("dog", mode="semantic", limit=1)
    assert hit.content == "The puppy needs a vet appointment"


def test_deleting_a_session_and_forking_reach_the_index(make_manager, make_index):
    m = make_manager().with_semantic_recall(make_index(), background=False, min_score=MIN_SCORE)
    info = m.create("original")
    m.append(info.id, msg("a", "Budget meeting on Monday"))
    m.append(info.id, msg("b", "We agreed on the automobile lease"))
    m.append(info.id, msg("c", "Afterwards we talked about the garden"))
    m.drain_recall()
    fork = m.fork(info.id, "b", "fork")
    m.drain_recall()
    found = {(hit.session_id, hit.id) for hit in m.search("car", mode="semantic")}
    assert found == {(info.id, "b"), (fork.id, "b")}
    recall = m.recall
    original = recall.store.recall_vectors(m.storage_id(info.id))
    assert original and recall.store.recall_vectors(m.storage_id(fork.id))
    assert m.delete(info.id)
    m.drain_recall()
    assert recall.store.recall_vectors(m.storage_id(info.id)) == []
    assert [(hit.session_id, hit.id) for hit in m.search("car", mode="semantic")] == [(fork.id, "b")]
    gone = {row.vector_id for row in original}
    assert not {hit.id for hit in recall.index.search("automobile lease", 50, {})} & gone


def test_a_failing_index_never_fails_an_append_and_the_backlog_drains_once_it_recovers(make_session, make_index):
    flaky = FlakyIndex(make_index())
    s = make_session("flaky")
    s.with_semantic_recall(flaky, background=False, retry_seconds=0, min_score=MIN_SCORE)
    for n in range(5):
        s.append_message(msg(f"m{n}", f"We agreed on the automobile lease number {n}"))
    assert s.get_path_length() == 5
    report = s.drain_recall()
    assert report.failed > 0 and report.added == 0
    assert "vector store unreachable" in report.errors[0]
    backlog = s.recall_backlog()
    assert backlog.pending >= 5 and backlog.failing == report.failed
    assert "vector store unreachable" in backlog.last_error
    s.append_message(msg("m5", "Appends go on while the index is down"))
    flaky.down = False
    report = s.drain_recall()
    assert report.failed == 0 and report.added == 6
    assert s.recall_backlog().pending == 0
    assert len(s.search(PARAPHRASE, mode="semantic", limit=10)) == 5


def test_erasing_messages_deletes_their_vectors_first_and_erases_nothing_when_the_index_fails(make_session, make_index):
    from ..errors import RecallError

    flaky = FlakyIndex(make_index())
    flaky.down = False
    s = make_session("erase-flaky")
    s.with_semantic_recall(flaky, background=False, min_score=MIN_SCORE)
    _history(s)
    s.drain_recall()
    lease = {row.vector_id for row in s.recall.store.recall_vectors(s.session_id, "message", ["lease"])}
    assert lease
    flaky.down = True
    with pytest.raises(RecallError, match="nothing was erased"):
        s.erase_messages(["lease"])
    assert s.get_message("lease") is not None and s.recall.store.recall_vectors(s.session_id, "message", ["lease"])
    flaky.down = False
    assert s.erase_messages(["lease"]).counts.vectors == len(lease)
    assert not {hit.id for hit in flaky.inner.search("automobile lease", 50, {})} & lease
    assert "lease" not in ids(s.search(PARAPHRASE, mode="semantic")) and s.recall_backlog().pending == 0


def test_sending_twice_is_idempotent(make_session, make_index):
    s = _recalled(make_session("twice"), make_index)
    _history(s)
    s.drain_recall()
    before = _vector_ids(s)
    assert s.rebuild_recall() == 1
    report = s.drain_recall()
    assert _vector_ids(s) == before
    assert report.added == len(before) and report.removed == 0
    assert len(s.search(PARAPHRASE, mode="semantic", limit=20)) == len(set(ids(s.search(PARAPHRASE, mode="semantic"))))


def test_rebuild_fills_a_new_index_from_the_store(make_session, make_index):
    first = _recalled(make_session("rebuilt"), make_index)
    _history(first)
    first.drain_recall()
    fresh = _recalled(make_session("rebuilt", store=first.store), make_index)
    assert fresh.search(PARAPHRASE, mode="semantic") == []
    fresh.rebuild_recall()
    fresh.drain_recall()
    assert ids(fresh.search(PARAPHRASE, mode="semantic", limit=1)) == ["lease"]


def test_history_stored_before_recall_is_indexed_once_enabled(make_session, make_index):
    s = make_session("late")
    _history(s)
    _recalled(s, make_index)
    s.append_message(msg("later", "One more note about the garden"))
    s.drain_recall()
    assert ids(s.search(PARAPHRASE, mode="semantic", limit=1)) == ["lease"]


def test_history_stored_before_recall_is_indexed_with_no_write_after_enabling(make_session, make_index):
    old = make_session("stored")
    _history(old)
    s = _recalled(make_session("stored", store=old.store), make_index)
    s.drain_recall()  # no write in between: enabling recall queued the stored history
    assert ids(s.search(PARAPHRASE, mode="semantic", limit=1)) == ["lease"]
    assert ids(s.search(PARAPHRASE, mode="hybrid", limit=1)) == ["lease"]


def test_a_manager_indexes_sessions_stored_before_recall_with_no_write_after_enabling(make_manager, make_index):
    plain = make_manager("team")
    past = plain.create("past")
    plain.append(past.id, msg("p1", "We agreed on the automobile lease for three years"))
    plain.append(past.id, msg("p2", "The garden needs new soil"))
    m = make_manager("team", store=plain.store).with_semantic_recall(
        make_index(), background=False, min_score=MIN_SCORE
    )
    m.drain_recall()
    assert [(hit.session_id, hit.id) for hit in m.search(PARAPHRASE, mode="semantic", limit=1)] == [(past.id, "p1")]


def test_long_texts_are_chunked_and_found_once(make_session, make_index):
    s = make_session("long")
    s.with_semantic_recall(make_index(), background=False, chunk_chars=200, chunk_overlap=20, min_score=MIN_SCORE)
    words = " ".join(FILLER * 6)
    s.append_message(
        {
            "id": "tool",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-lookup",
                    "toolCallId": "c1",
                    "state": "output-available",
                    "input": {},
                    "output": words + " and finally we agreed on the automobile lease " + words,
                }
            ],
        }
    )
    s.drain_recall()
    chunks = s.recall.store.recall_vectors("long", "message", ["tool"])
    assert len(chunks) > 5 and {row.ref for row in chunks} == {"tool"}
    assert ids(s.search("automobile car lease", mode="semantic", limit=5)) == ["tool"]


def test_a_compacted_message_is_found_and_says_so(make_session, make_index):
    s = _recalled(make_session("compacted"), make_index)
    _history(s)
    s.add_compaction("Earlier: chores and a car agreement", "f0", "f3")
    s.drain_recall()
    assert "lease" not in ids(s.get_history())
    [hit] = s.search(PARAPHRASE, mode="semantic", limit=1)
    assert (hit.id, hit.compacted) == ("lease", True)
    [text_hit] = s.search("automobile")
    assert text_hit.compacted
    assert not s.search("garden", mode="hybrid", limit=1)[0].compacted


def test_searchable_entries_are_found_by_meaning(make_session, make_index):
    s = _recalled(make_session("kb"), make_index)
    s.with_context("notes", provider=StoreSearchContext())
    [tool] = [t for t in s.tools() if t.name == "set_context"]
    tool.invoke({"label": "notes", "content": "The automobile lease ends in May"})
    tool.invoke({"label": "notes", "content": "Plant tomatoes after the frost"})
    s.drain_recall()
    [search] = [t for t in s.tools() if t.name == "search_context"]
    found = search.invoke({"label": "notes", "query": "car"})
    assert found.split("\n")[1] == "The automobile lease ends in May"


def test_session_search_uses_hybrid_with_recall(make_manager, make_index):
    m = make_manager().with_semantic_recall(make_index(), background=False, min_score=MIN_SCORE)
    past = m.create("past")
    m.append(past.id, msg("p1", "We agreed on the automobile lease for three years"))
    m.append(past.id, msg("p2", "The garden needs new soil"))
    m.drain_recall()
    [tool] = m.tools()
    answer = tool.invoke({"query": PARAPHRASE})
    assert "automobile lease" in answer
    plain = make_manager(store=m.store)
    [text_tool] = plain.tools()
    assert "automobile" not in text_tool.invoke({"query": PARAPHRASE})


def test_the_background_sender_brings_the_index_in_line(make_session, make_index):
    s = make_session("background")
    s.with_semantic_recall(make_index(), min_score=MIN_SCORE)
    _history(s)
    deadline = time.monotonic() + 10
    while s.recall_backlog().pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert s.recall_backlog().pending == 0
    s.drain_recall()  # waits for a send in progress
    assert ids(s.search(PARAPHRASE, mode="semantic", limit=1)) == ["lease"]
    s.recall.close()


class PickyIndex(FlakyIndex):
    """An index that refuses any text holding "poison", and takes the rest."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.down = False

    def add(self, ids, texts, metadatas):  # noqa: ANN001, ANN201
        if any("poison" in text for text in texts):
            raise ValueError("the index refuses this text")
        return self.inner.add(ids, texts, metadatas)


class BlindIndex(FlakyIndex):
    """An index that takes what is sent but, once ``blind``, raises on every search."""

    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.down = False
        self.blind = False

    def search(self, query, k, where):  # noqa: ANN001, ANN201
        if self.blind:
            raise ConnectionError("vector store unreachable")
        return self.inner.search(query, k, where)


def _blinded(index: BlindIndex, drain: Callable[[], Any]) -> None:
    report = drain()
    assert report.failed == 0 and report.added > 0
    index.blind = True


def test_hybrid_search_falls_back_to_words_when_the_index_fails_and_semantic_raises(make_session, make_index, caplog):
    import logging

    from ..errors import RecallError
    from ..models import SearchResults

    index = BlindIndex(make_index())
    s = _recalled(make_session("blind"), make_index, index)
    _history(s)
    s.append_message(msg("tyres", "The car needs new tyres before winter"))
    s.drain_recall()
    working = s.search("car", mode="hybrid", limit=5)
    assert (working.text_only, working.recall_error) == (False, None)
    assert s.search("car").text_only
    index.blind = True
    with caplog.at_level(logging.WARNING, logger="sessions_core"):
        results = s.search("car", mode="hybrid", limit=5)
    assert ids(results) == ids(s.search("car", limit=5)) == ["tyres"]
    assert isinstance(results, SearchResults) and results.text_only  # a list saying how it was ranked
    assert results.recall_error is not None and "ConnectionError: vector store unreachable" in results.recall_error
    assert "vector store unreachable" in caplog.text
    assert any(r.name.startswith("sessions_core.") and r.levelno == logging.WARNING for r in caplog.records)
    with pytest.raises(RecallError, match="ConnectionError: vector store unreachable") as raised:
        s.search(PARAPHRASE, mode="semantic")
    assert isinstance(raised.value, SessionsError) and not isinstance(raised.value, ConnectionError)
    index.blind = False
    assert ids(s.search(PARAPHRASE, mode="semantic", limit=1)) == ["lease"]


def test_the_search_tools_answer_by_words_when_the_index_fails(make_manager, make_index):
    from ..errors import RecallError

    index = BlindIndex(make_index())
    m = make_manager().with_semantic_recall(index, background=False, min_score=MIN_SCORE)
    m.with_searchable_history("past")
    past = m.create("past")
    m.append(past.id, msg("p1", "We agreed on the automobile lease for three years"))
    m.append(past.id, msg("p2", "The garden needs new soil"))
    _blinded(index, m.drain_recall)
    results = m.search("garden", mode="hybrid")
    assert [(hit.session_id, hit.id) for hit in results] == [(past.id, "p2")] and results.text_only
    with pytest.raises(RecallError, match="vector store unreachable"):
        m.search("garden", mode="semantic")
    [tool] = m.tools()
    assert plain_hits(tool.invoke({"query": "garden"})) == ["[user] The garden needs new soil"]
    assert tool.invoke({"query": PARAPHRASE}) == "No results found."
    now = m.get_session(m.create("now").id)
    [search] = [t for t in now.tools() if t.name == "search_context"]
    assert "The garden needs new soil" in search.invoke({"label": "past", "query": "garden"})


def test_searchable_entries_are_found_by_words_when_the_index_fails(make_session, make_index):
    index = BlindIndex(make_index())
    s = _recalled(make_session("kb-blind"), make_index, index)
    s.with_context("notes", provider=StoreSearchContext())
    [tool] = [t for t in s.tools() if t.name == "set_context"]
    tool.invoke({"label": "notes", "content": "The automobile lease ends in May"})
    tool.invoke({"label": "notes", "content": "Plant tomatoes after the frost"})
    _blinded(index, s.drain_recall)
    [search] = [t for t in s.tools() if t.name == "search_context"]
    found = search.invoke({"label": "notes", "query": "tomatoes"})
    assert not found.startswith("Error") and "Plant tomatoes after the frost" in found
    assert search.invoke({"label": "notes", "query": "car"}) == "No results found."


def test_a_change_the_index_refuses_holds_back_only_itself(make_session, make_index):
    s = make_session("picky")
    s.with_semantic_recall(PickyIndex(make_index()), background=False, min_score=MIN_SCORE)
    s.append_message(msg("before", "We agreed on the automobile lease"))
    s.append_message(msg("bad", "poison pill"))
    s.append_message(msg("after", "The puppy needs a vet"))
    report = s.drain_recall()
    assert report.failed >= 1 and "refuses" in report.errors[0]
    s.drain_recall()
    assert ids(s.search("car", mode="semantic")) == ["before"]
    backlog = s.recall_backlog()
    assert backlog.pending >= 1 and "refuses" in backlog.last_error
    assert {row.ref for row in s.recall.store.recall_vectors("picky")} <= {"before", "after"}


def test_a_session_deleted_and_made_again_is_sent_again(make_manager, make_index):
    from ..branching import ensure_session

    m = make_manager().with_semantic_recall(make_index(), background=False, min_score=MIN_SCORE)
    ensure_session(m, "again")
    m.append("again", msg("a", "We agreed on the automobile lease"))
    m.drain_recall()
    assert m.delete("again")
    ensure_session(m, "again")
    m.append("again", msg("b", "The vehicle goes back in May"))
    m.drain_recall()
    assert [(hit.session_id, hit.id) for hit in m.search("car", mode="semantic")] == [("again", "b")]


def test_a_claimed_change_is_leased_to_its_worker(persistent_backend):
    first, second = persistent_backend.open(), persistent_backend.open()
    try:
        from ..session import Session

        session = Session(first).for_session("leased")
        session.with_semantic_recall(FlakyIndex(object()), background=False)
        session.append_message(msg("a", "one"))
        claimed = first.recall_claim(10, 1_000, 60_000_000)
        assert [row.kind for row in claimed] == ["session", "message"]
        assert second.recall_claim(10, 2_000, 60_000_000) == []
        again = second.recall_claim(10, 1_000 + 60_000_001, 60_000_000)
        assert [row.seq for row in again] == [row.seq for row in claimed]
    finally:
        first.close()
        second.close()


class StuckIndex(FlakyIndex):
    """An index whose every call waits until ``release()`` (a vector store that hangs)."""

    def __init__(self, inner: Any) -> None:
        import threading

        super().__init__(inner)
        self.down = False
        self.released = threading.Event()
        self.entered = threading.Event()

    def release(self) -> None:
        self.released.set()

    def _check(self) -> None:
        self.entered.set()
        assert self.released.wait(10), "the test never released the index"
        super()._check()


def test_a_hanging_index_never_delays_an_append(make_session, make_index):
    stuck = StuckIndex(make_index())
    s = make_session("stuck")
    s.with_semantic_recall(stuck, min_score=MIN_SCORE)
    s.append_message(msg("m0", "We agreed on the automobile lease number 0"))
    assert stuck.entered.wait(5)  # the sender is inside the index, and stays there
    for n in range(1, 4):
        s.append_message(msg(f"m{n}", f"We agreed on the automobile lease number {n}"))
    assert s.get_path_length() == 4 and s.recall_backlog().pending >= 3
    stuck.release()
    s.drain_recall()
    assert len(s.search("car", mode="semantic")) == 4
    s.recall.close()
    assert s.recall._worker is None or not s.recall._worker.is_alive()


# -- the index contract: what a VectorIndex of your own must do -----------------------------

INDEX_TEXTS = ["We agreed on the automobile lease", "The puppy needs a vet appointment", "The vehicle was returned"]


def index_metadata(session_id: str, kind: str = "message", **extra: Any) -> dict[str, Any]:
    """The metadata recall sends with a vector, as the index contract's tests use it."""
    return {"session_id": session_id, "kind": kind, "namespace": "", **extra}


INDEX_METAS = [index_metadata("a"), index_metadata("a"), index_metadata("b")]


def hit_ids(hits: Any) -> list[str]:
    return [hit.id for hit in hits]


def test_an_index_adds_replaces_deletes_and_filters(make_index):
    from ..recall import VectorHit

    index = make_index()
    index.add(["v1", "v2", "v3"], INDEX_TEXTS, INDEX_METAS)
    hits = index.search("car", 5, {"session_id": "a"})
    assert all(isinstance(hit, VectorHit) and isinstance(hit.score, float) for hit in hits)
    assert hit_ids(hits) == ["v1", "v2"]  # only session a, the car first
    assert hits[0].score > MIN_SCORE > hits[1].score
    assert sorted(hit_ids(index.search("car", 2, {"session_id": ["a", "b"]}))) == ["v1", "v3"]
    assert hit_ids(index.search("car", 5, {"kind": "entry"})) == []
    index.add(["v1"], ["The kitten sleeps all day"], [index_metadata("a")])  # an id it holds is replaced
    assert hit_ids(index.search("cat", 1, {"session_id": "a"})) == ["v1"]
    assert len(index.search("anything at all", 10, {})) == 3
    index.delete(["v1", "never-added"])
    assert sorted(hit_ids(index.search("cat", 10, {}))) == ["v2", "v3"]


def test_an_indexs_async_methods_do_the_same(make_index):
    import asyncio

    index = make_index()

    async def run() -> tuple[Any, Any]:
        await index.aadd(["v1", "v2", "v3"], INDEX_TEXTS, INDEX_METAS)
        before = await index.asearch("car", 5, {"session_id": ["a", "b"], "kind": "message"})
        await index.adelete(["v1"])
        return before, await index.asearch("car", 5, {"session_id": ["a", "b"]})

    before, after = asyncio.run(run())
    assert sorted(hit_ids(before)[:2]) == ["v1", "v3"] and hit_ids(before)[2] == "v2"
    assert hit_ids(after) == ["v3", "v2"]
    assert [h.score for h in before] == sorted((h.score for h in before), reverse=True)


def test_searching_while_the_sender_sends_is_safe_on_an_in_memory_index(make_session, make_index):
    s = make_session("busy")
    s.with_semantic_recall(make_index(), min_score=MIN_SCORE)
    found = 0
    for n in range(40):
        s.append_message(msg(f"m{n}", f"We agreed on the automobile lease number {n}"))
        found = len(s.search("car", mode="hybrid", limit=50))  # while the sender adds
    s.drain_recall()
    assert found <= 40 and len(s.search("car", mode="semantic", limit=50)) == 40
    s.recall.close()


def test_a_tool_result_updated_in_place_is_sent_again(make_session, make_index):
    s = _recalled(make_session("tool"), make_index)

    def result(output: str) -> dict[str, Any]:
        return {
            "id": "r",
            "role": "tool",
            "parts": [{"type": "tool-result", "toolCallId": "c1", "toolName": "lookup", "output": output}],
        }

    s.append_message(result("pending"))
    s.drain_recall()
    assert s.search("car", mode="semantic") == []
    s.update_message(result("The automobile lease is approved"))
    s.drain_recall()
    [hit] = s.search("car", mode="semantic")
    assert (hit.id, hit.role, hit.content) == ("r", "tool", "The automobile lease is approved")


def test_a_searchable_history_block_finds_by_meaning(make_manager, make_index):
    m = make_manager().with_semantic_recall(make_index(), background=False, min_score=MIN_SCORE)
    m.with_searchable_history("past")
    past = m.create("past")
    m.append(past.id, msg("p1", "We agreed on the automobile lease for three years"))
    m.drain_recall()
    now = m.get_session(m.create("now").id)
    [search] = [tool for tool in now.tools() if tool.name == "search_context"]
    assert "automobile lease" in search.invoke({"label": "past", "query": PARAPHRASE})


class AsyncOnlyIndex:
    """An index with an async client only: its sync methods raise, and its coroutines check
    they run on the loop the test runs (as a client bound to its loop would)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.loop: Any = None
        self.calls: list[str] = []

    def _on_the_loop(self, name: str) -> None:
        import asyncio

        assert asyncio.get_running_loop() is self.loop, f"{name} ran on another event loop"
        self.calls.append(name)

    def add(self, ids, texts, metadatas):  # noqa: ANN001, ANN201
        raise RuntimeError("this index has an async client only")

    delete = search = add

    async def aadd(self, ids, texts, metadatas):  # noqa: ANN001, ANN201
        self._on_the_loop("aadd")
        return self.inner.add(ids, texts, metadatas)

    async def adelete(self, ids):  # noqa: ANN001, ANN201
        self._on_the_loop("adelete")
        return self.inner.delete(ids)

    async def asearch(self, query, k, where):  # noqa: ANN001, ANN201
        self._on_the_loop("asearch")
        return self.inner.search(query, k, where)


@pytest.mark.parametrize("background", [False, True], ids=["drained", "background"])
def test_an_async_only_index_is_awaited_on_the_callers_loop(backend, make_index, background):
    import asyncio

    from ..session import Session

    index = AsyncOnlyIndex(make_index())
    store = backend.open()

    async def run() -> list[str]:
        index.loop = asyncio.get_running_loop()
        # Any: the a-twins are made when the class is created, so a type checker cannot see them
        s: Any = Session(store).for_session("async-only")
        s.with_semantic_recall(index, async_index=True, background=background, min_score=MIN_SCORE)
        await s.aappend_message(msg("a", "We agreed on the automobile lease"))
        await s.aappend_message(msg("b", "The garden needs new soil"))
        if background:
            while (await s.arecall_backlog()).pending:
                await asyncio.sleep(0.01)
        await s.adrain_recall()
        await s.adelete_messages(["b"])
        await s.adrain_recall()
        found = [hit.id for hit in await s.asearch(PARAPHRASE, mode="hybrid")]
        s.recall.close()
        return found

    try:
        assert asyncio.run(run()) == ["a"]
    finally:
        if backend.persistent:
            store.close()
    assert set(index.calls) == {"aadd", "adelete", "asearch"}


def test_the_sender_outlives_a_store_that_fails_for_a_while(make_session, make_index, monkeypatch):
    from ..errors import StoreError

    s = make_session("gone")
    s.with_semantic_recall(make_index(), retry_seconds=0.01, min_score=MIN_SCORE)
    store = s.recall.store
    claim = store.recall_claim
    failures = iter(range(3))

    def flaky_claim(*args: Any) -> Any:
        if next(failures, None) is not None:
            raise StoreError("the database is gone for a moment")
        return claim(*args)

    monkeypatch.setattr(store, "recall_claim", flaky_claim)
    s.append_message(msg("a", "We agreed on the automobile lease"))
    deadline = time.monotonic() + 10
    while s.recall_backlog().pending and time.monotonic() < deadline:
        time.sleep(0.01)
    assert s.recall_backlog().pending == 0
    assert next(failures, None) is None  # it failed three times, then sent
    s.drain_recall()
    assert ids(s.search("car", mode="semantic")) == ["a"]
    s.recall.close()


@pytest.fixture
def recall_store_capable(backend: Any) -> None:
    """Skip where the backend's store does not keep the optional ``RecallStore`` outbox."""
    from ..stores.base import RecallStore

    store = backend.open()
    try:
        if not isinstance(store, RecallStore):
            pytest.skip(f"{backend.name}: {type(store).__name__} does not implement RecallStore (optional)")
    finally:
        if backend.persistent:
            store.close()


def _store_tests_need_a_recall_store() -> None:
    """Every test above that opens a store needs a ``RecallStore``: detected, so a store without
    one skips them and still passes the rest of the suite."""
    import inspect

    uses_store = {"make_session", "make_manager", "backend", "persistent_backend"}
    for name, test in list(globals().items()):
        if name.startswith("test_") and uses_store & set(inspect.signature(test).parameters):
            globals()[name] = pytest.mark.usefixtures("recall_store_capable")(test)


_store_tests_need_a_recall_store()


skip_where_unsupported(globals())
