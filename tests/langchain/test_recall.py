"""Semantic recall through LangChain: a create_agent run whose session_search finds an earlier
session's turn by meaning, SessionToolkit with recall, and VectorStoreRecall / SynonymEmbeddings
on their own."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from langchain_sessions import SessionMemoryMiddleware, SessionToolkit, SynonymEmbeddings, VectorStoreRecall
from langchain_sessions.recall import chroma_filter, default_filter, dict_filter, python_filter, qdrant_filter
from sessions_core import Session, SessionManager, StoreSearchContext, VectorHit
from sessions_core.testing.builders import plain_hits
from sessions_core.testing.recall import INDEX_METAS, INDEX_TEXTS, MIN_SCORE, PARAPHRASE
from sessions_core.testing.recall import index_metadata as meta

from .helpers import ScriptedChatModel, call

LEASE = "We agreed on the automobile lease for three years."
NEW_QUESTION = "Remind me of the outcome."


def recall_index() -> VectorStoreRecall:
    return VectorStoreRecall(InMemoryVectorStore(SynonymEmbeddings()))


def recalling_manager(**options: Any) -> SessionManager:
    return SessionManager(":memory:").with_semantic_recall(recall_index(), min_score=MIN_SCORE, **options)


def thread(session_id: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": session_id}}


def agent_and_model(manager: SessionManager) -> tuple[Any, ScriptedChatModel]:
    """An agent whose first session settles the lease (between unrelated turns) and whose next
    session asks ``session_search`` in other words."""
    model = ScriptedChatModel(
        responses=[
            AIMessage("The quarterly report is due on Friday."),
            AIMessage(LEASE),
            call("session_search", {"query": PARAPHRASE}, "search_1"),
            AIMessage("Three years, as agreed."),
        ]
    )
    return create_agent(model, middleware=[SessionMemoryMiddleware(manager)]), model


def check_the_recalled_run(manager: SessionManager, model: ScriptedChatModel, out: dict[str, Any]) -> None:
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    found = out["messages"][2]
    assert isinstance(found, ToolMessage) and found.name == "session_search" and found.tool_call_id == "search_1"
    assert found.status == "success"
    assert plain_hits(found.content) == [f"[assistant] {LEASE}"]  # the earlier turn, and none of the unrelated ones
    # The new session loaded nothing of the earlier one: the turn came through the tool only.
    assert [m.text for m in model.calls[2] if m.type != "system"] == [NEW_QUESTION]
    assert out["messages"][-1].content == "Three years, as agreed."
    assert [m.role for m in manager.get_history("friday")] == ["user", "assistant", "tool", "assistant"]
    # Word search alone finds nothing: the paraphrase shares no word with the turn.
    assert manager.search(PARAPHRASE, mode="text") == []
    [word_search] = SessionManager(manager.store).tools()
    assert word_search.invoke({"query": PARAPHRASE}) == "No results found."


def test_an_agent_finds_an_earlier_sessions_turn_by_meaning():
    with recalling_manager(background=False) as manager:
        agent, model = agent_and_model(manager)
        agent.invoke({"messages": [HumanMessage("When is the report due?")]}, thread("monday"))
        agent.invoke({"messages": [HumanMessage("Settle the terms with the dealer.")]}, thread("monday"))
        assert manager.search(PARAPHRASE, mode="semantic") == []  # nothing sent yet
        report = manager.drain_recall()
        assert (report.failed, report.added) == (0, 4)
        out = agent.invoke({"messages": [HumanMessage(NEW_QUESTION)]}, thread("friday"))
        check_the_recalled_run(manager, model, out)
        # What session_search answered is not embedded again: the next search finds the turn once.
        manager.drain_recall()
        hits = manager.search(PARAPHRASE, mode="semantic")
        assert [hit.content for hit in hits].count(LEASE) == 1 and "tool" not in {hit.role for hit in hits}


def test_an_async_agent_finds_it_with_the_background_sender():
    async def run(manager: SessionManager, agent: Any) -> dict[str, Any]:
        await agent.ainvoke({"messages": [HumanMessage("When is the report due?")]}, thread("monday"))
        await agent.ainvoke({"messages": [HumanMessage("Settle the terms with the dealer.")]}, thread("monday"))
        deadline = time.monotonic() + 5
        while (await manager.arecall_backlog()).pending and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert (await manager.arecall_backlog()).pending == 0  # sent without a drain_recall
        await manager.adrain_recall()  # waits for a send still in progress
        return await agent.ainvoke({"messages": [HumanMessage(NEW_QUESTION)]}, thread("friday"))

    with recalling_manager() as manager:
        agent, model = agent_and_model(manager)
        out = asyncio.run(run(manager, agent))
        check_the_recalled_run(manager, model, out)


# -- SessionToolkit -------------------------------------------------------------------------


def test_a_manager_toolkits_session_search_is_hybrid_with_recall():
    with recalling_manager(background=False) as manager:
        past = manager.create("past").id
        manager.append(past, {"id": "p1", "role": "assistant", "parts": [{"type": "text", "text": LEASE}]})
        manager.append(past, {"id": "p2", "role": "user", "parts": [{"type": "text", "text": "The garden needs soil"}]})
        manager.drain_recall()
        tools = {t.name: t for t in SessionToolkit(manager).get_tools()}
        search = tools["session_search"]
        found = search.invoke({"query": PARAPHRASE}, thread("now"))
        assert plain_hits(found) == [f"[assistant] {LEASE}"]
        # A word hit and a meaning hit, both on top (and the unrelated turn left out).
        manager.append(past, {"id": "p3", "role": "user", "parts": [{"type": "text", "text": "The car is blue"}]})
        manager.drain_recall()
        both = asyncio.run(search.ainvoke({"query": "car"}, thread("now")))
        assert sorted(plain_hits(both)) == ["[assistant] " + LEASE, "[user] The car is blue"]
        plain = {t.name: t for t in SessionToolkit(SessionManager(manager.store)).get_tools()}
        by_words = plain["session_search"].invoke({"query": PARAPHRASE}, thread("now"))
        assert plain_hits(by_words) == ["[user] The car is blue"]
        assert plain_hits(plain["session_search"].invoke({"query": "car"}, thread("now"))) == ["[user] The car is blue"]


def test_a_toolkits_search_context_finds_entries_by_meaning():
    session = Session(":memory:").for_session("kb").with_context("notes", provider=StoreSearchContext())
    session.with_semantic_recall(recall_index(), background=False, min_score=MIN_SCORE)
    with session:
        tools = {t.name: t for t in SessionToolkit(session).get_tools()}
        tools["set_context"].invoke({"label": "notes", "content": "The automobile lease ends in May"})
        tools["set_context"].invoke({"label": "notes", "content": "Plant tomatoes after the frost"})
        assert tools["search_context"].invoke({"label": "notes", "query": "car"}) == "No results found."
        session.drain_recall()
        found = asyncio.run(tools["search_context"].ainvoke({"label": "notes", "query": "car"}))
        assert "The automobile lease ends in May" in found and "tomatoes" not in found


# -- VectorStoreRecall ----------------------------------------------------------------------


TEXTS, METAS = INDEX_TEXTS, INDEX_METAS


def test_what_the_vector_store_holds():
    """The index contract itself is the suite's (``sessions_core.testing.recall``); here, what
    lands in LangChain's store."""
    recall = recall_index()
    recall.add(["v1", "v2", "v3"], TEXTS, METAS)
    [stored] = recall.vector_store.get_by_ids(["v1"])
    assert (stored.page_content, stored.metadata) == (TEXTS[0], METAS[0])
    recall.add(["v1"], ["The kitten sleeps all day"], [meta("a")])  # replaced, not added
    assert len(recall.vector_store.store) == 3
    assert repr(recall) == "VectorStoreRecall(InMemoryVectorStore)"


def test_dict_filter_turns_lists_into_in():
    where = {"session_id": ["a", "b"], "kind": "message", "label": ("notes",), "namespace": ""}
    assert dict_filter(where) == {
        "session_id": {"$in": ["a", "b"]},
        "kind": "message",
        "label": {"$in": ["notes"]},
        "namespace": "",
    }
    assert dict_filter({}) == {}


def test_chroma_filter_has_one_condition_per_key():
    assert chroma_filter({"kind": "message"}) == {"kind": "message"}
    assert chroma_filter({"session_id": ["a", "b"]}) == {"session_id": {"$in": ["a", "b"]}}
    assert chroma_filter({"kind": "message", "session_id": "a"}) == {"$and": [{"kind": "message"}, {"session_id": "a"}]}
    # Chroma refuses {} and an "$and" of fewer than two conditions: no condition is no filter.
    assert chroma_filter({}) is None


def test_python_filter_is_a_predicate_on_documents():
    document = Document("x", metadata=meta("a", role="user"))
    assert python_filter({"session_id": ["a", "b"], "kind": "message"})(document)
    assert python_filter({})(document)
    assert not python_filter({"kind": "entry"})(document)
    assert not python_filter({"label": "notes"})(document)  # a key the document lacks


def test_qdrant_filter_matches_the_payloads_metadata():
    models = pytest.importorskip("qdrant_client").models
    built = qdrant_filter({"kind": "message", "session_id": ["a", "b"]})
    assert built == models.Filter(
        must=[
            models.FieldCondition(key="metadata.kind", match=models.MatchValue(value="message")),
            models.FieldCondition(key="metadata.session_id", match=models.MatchAny(any=["a", "b"])),
        ]
    )


class RecordingStore(VectorStore):
    """A store answering with fixed documents and recording the filters it was given."""

    def __init__(self, found: list[tuple[Document, float]] | None = None) -> None:
        self.found = found or []
        self.filters: list[Any] = []

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        return [document for document, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        self.filters.append(kwargs.get("filter"))
        return self.found[:k]

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Any, metadatas: Any = None, **kwargs: Any) -> RecordingStore:
        return cls()


def store_named(name: str, found: list[tuple[Document, float]] | None = None) -> RecordingStore:
    return type(name, (RecordingStore,), {})(found)


def test_the_default_filter_follows_the_store_kind():
    assert default_filter(InMemoryVectorStore(SynonymEmbeddings())) is python_filter
    assert default_filter(store_named("Chroma")) is chroma_filter
    assert default_filter(store_named("QdrantVectorStore")) is qdrant_filter
    assert default_filter(store_named("Qdrant")) is qdrant_filter
    assert default_filter(store_named("PGVector")) is dict_filter
    faiss = default_filter(store_named("FAISS"))({"session_id": ["a"], "kind": "message"})
    assert faiss(meta("a")) and not faiss(meta("b"))  # FAISS filters on the metadata dict

    chroma = store_named("Chroma")
    VectorStoreRecall(chroma).search("car", 3, {"session_id": "a", "kind": "message"})
    assert chroma.filters == [{"$and": [{"session_id": "a"}, {"kind": "message"}]}]
    custom = store_named("PGVector")
    VectorStoreRecall(custom, filter=lambda where: ("mine", dict(where))).search("car", 3, {"kind": "entry"})
    assert custom.filters == [("mine", {"kind": "entry"})]


def test_hits_take_the_documents_id_or_the_stored_vector_id():
    found = [
        (Document("a", id="doc-id", metadata={"vector_id": "ignored"}), 0.9),
        (Document("b", metadata={"vector_id": "from-metadata"}), 0.5),
        (Document("c", metadata={}), 0.4),  # no id at all: not a vector recall sent
    ]
    hits = VectorStoreRecall(store_named("PGVector", found)).search("q", 5, {})
    assert hits == [VectorHit("doc-id", 0.9), VectorHit("from-metadata", 0.5)]


@pytest.mark.parametrize("wrong", [object(), SynonymEmbeddings(), "chroma"])
def test_only_a_vector_store_is_taken(wrong):
    with pytest.raises(TypeError, match="must be a LangChain VectorStore"):
        VectorStoreRecall(wrong)


# -- SynonymEmbeddings ----------------------------------------------------------------------


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_synonym_embeddings_are_deterministic_unit_vectors():
    embeddings = SynonymEmbeddings()
    first = embeddings.embed_query("We agreed on the automobile lease")
    assert first == SynonymEmbeddings().embed_query("We agreed on the automobile lease")
    assert len(first) == 256 and math.isclose(math.sqrt(cosine(first, first)), 1.0)
    assert embeddings.embed_documents(["car", "dog"]) == [embeddings.embed_query("car"), embeddings.embed_query("dog")]
    assert asyncio.run(embeddings.aembed_query("car")) == embeddings.embed_query("car")
    assert asyncio.run(embeddings.aembed_documents(["car"])) == [embeddings.embed_query("car")]
    assert len(SynonymEmbeddings(dimensions=32).embed_query("car")) == 32


def test_synonyms_lie_close_and_other_words_do_not():
    embeddings = SynonymEmbeddings()
    car = embeddings.embed_query("car")
    assert math.isclose(cosine(car, embeddings.embed_query("automobile")), 1.0)
    assert cosine(embeddings.embed_query(PARAPHRASE), embeddings.embed_query(LEASE)) > 0.5
    assert cosine(car, embeddings.embed_query("puppy")) < MIN_SCORE
    assert cosine(embeddings.embed_query("kettle"), embeddings.embed_query("teapot")) < MIN_SCORE
    grouped = SynonymEmbeddings(groups=[("kettle", "teapot")])
    assert math.isclose(cosine(grouped.embed_query("kettle"), grouped.embed_query("teapot")), 1.0)
