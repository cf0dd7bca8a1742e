"""Semantic recall through LlamaIndex: a FunctionAgent run whose session_search finds an earlier
session's turn by meaning, SessionToolSpec with recall, and VectorStoreRecall / SynonymEmbedding
on their own."""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from llama_index.core import VectorStoreIndex
from llama_index.core.agent.workflow import FunctionAgent, ToolCall, ToolCallResult
from llama_index.core.base.llms.types import MessageRole
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters

from llamaindex_sessions import SessionMemory, SessionToolSpec, SynonymEmbedding, VectorStoreRecall
from llamaindex_sessions.recall import metadata_filters
from sessions_core import Session, SessionManager, StoreSearchContext
from sessions_core.testing.builders import plain_hits
from sessions_core.testing.recall import INDEX_METAS, INDEX_TEXTS, MIN_SCORE, PARAPHRASE, hit_ids
from sessions_core.testing.recall import index_metadata as meta

from .scripted import ScriptedLLM, tool_call

LEASE = "We agreed on the automobile lease for three years."
NEW_QUESTION = "Remind me of the outcome."


def recall_index() -> VectorStoreRecall:
    return VectorStoreRecall(SimpleVectorStore(), SynonymEmbedding())


def recalling_manager(**options: Any) -> SessionManager:
    return SessionManager(":memory:").with_semantic_recall(recall_index(), min_score=MIN_SCORE, **options)


def agent_for(manager: SessionManager, session_id: str, llm: ScriptedLLM) -> tuple[FunctionAgent, SessionMemory]:
    """A FunctionAgent with the session's memory and its tools (``session_search`` among them)."""
    agent = FunctionAgent(
        tools=SessionToolSpec(manager, session_id=session_id).to_tool_list(), llm=llm, system_prompt="You are helpful."
    )
    return agent, SessionMemory.from_manager(manager, session_id).bind(agent)


async def earlier_session(manager: SessionManager, llm: ScriptedLLM) -> None:
    """Monday: a turn settling the lease between unrelated ones."""
    agent, memory = agent_for(manager, "monday", llm)
    await agent.run(user_msg="When is the report due?", memory=memory)
    await agent.run(user_msg="Settle the terms with the dealer.", memory=memory)


async def recalled_run(manager: SessionManager, llm: ScriptedLLM) -> tuple[Any, list[Any], list[Any]]:
    """Friday: a new session whose model asks session_search in other words."""
    agent, memory = agent_for(manager, "friday", llm)
    handler = agent.run(user_msg=NEW_QUESTION, memory=memory)
    events = [event async for event in handler.stream_events() if isinstance(event, (ToolCall, ToolCallResult))]
    answer = await handler
    return answer, [e for e in events if isinstance(e, ToolCallResult)], [e for e in events if type(e) is ToolCall]


def script() -> ScriptedLLM:
    return ScriptedLLM(
        [
            "The quarterly report is due on Friday.",
            LEASE,
            tool_call("session_search", {"query": PARAPHRASE}, call_id="search_1"),
            "Three years, as agreed.",
        ]
    )


def check_the_recalled_run(manager: SessionManager, llm: ScriptedLLM, answer: Any, results: list[Any]) -> None:
    assert str(answer) == "Three years, as agreed."
    [result] = results
    assert (result.tool_name, result.tool_id, result.tool_kwargs) == (
        "session_search",
        "search_1",
        {"query": PARAPHRASE},
    )
    assert not result.tool_output.is_error
    assert plain_hits(result.tool_output.content) == [f"[assistant] {LEASE}"]  # the earlier turn, none of the unrelated
    # The model got it as the tool message, in a session that loaded nothing of the earlier one.
    first, second = llm.calls[2:]
    assert [m.content for m in first.messages if m.role != MessageRole.SYSTEM] == [NEW_QUESTION]
    assert "session_search" in first.tools
    assert [plain_hits(m.content) for m in second.messages if m.role == MessageRole.TOOL] == [[f"[assistant] {LEASE}"]]
    assert [m.role for m in manager.get_history("friday")] == ["user", "assistant", "tool", "assistant"]
    # Word search alone finds nothing: the paraphrase shares no word with the turn.
    assert manager.search(PARAPHRASE, mode="text") == []
    assert SessionToolSpec(SessionManager(manager.store)).session_search(query=PARAPHRASE) == "No results found."


def test_a_function_agent_finds_an_earlier_sessions_turn_by_meaning():
    llm = script()

    async def run(manager: SessionManager) -> tuple[Any, list[Any], list[Any]]:
        await earlier_session(manager, llm)
        assert await manager.asearch(PARAPHRASE, mode="semantic") == []  # nothing sent yet
        report = await manager.adrain_recall()
        assert (report.failed, report.added) == (0, 4)
        return await recalled_run(manager, llm)

    with recalling_manager(background=False) as manager:
        answer, results, calls = asyncio.run(run(manager))
        assert [call.tool_name for call in calls] == ["session_search"]
        check_the_recalled_run(manager, llm, answer, results)


def test_the_background_sender_feeds_the_agents_search():
    llm = script()

    async def run(manager: SessionManager) -> tuple[Any, list[Any], list[Any]]:
        await earlier_session(manager, llm)
        deadline = time.monotonic() + 5
        while (await manager.arecall_backlog()).pending and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        assert (await manager.arecall_backlog()).pending == 0  # sent without a drain_recall
        await manager.adrain_recall()  # waits for a send still in progress
        return await recalled_run(manager, llm)

    with recalling_manager() as manager:
        answer, results, _ = asyncio.run(run(manager))
        check_the_recalled_run(manager, llm, answer, results)


# -- SessionToolSpec ------------------------------------------------------------------------


def test_the_tool_specs_session_search_is_hybrid_with_recall():
    with recalling_manager(background=False) as manager:
        past = manager.create("past").id
        manager.append(past, {"id": "p1", "role": "assistant", "parts": [{"type": "text", "text": LEASE}]})
        manager.append(past, {"id": "p2", "role": "user", "parts": [{"type": "text", "text": "The garden needs soil"}]})
        manager.drain_recall()
        [tool] = SessionToolSpec(manager).to_tool_list()
        assert plain_hits(tool.call(query=PARAPHRASE).content) == [f"[assistant] {LEASE}"]
        found = asyncio.run(SessionToolSpec(manager).asession_search(query=PARAPHRASE))
        assert plain_hits(found) == [f"[assistant] {LEASE}"]
        # A word hit and a meaning hit, both on top (and the unrelated turn left out).
        manager.append(past, {"id": "p3", "role": "user", "parts": [{"type": "text", "text": "The car is blue"}]})
        manager.drain_recall()
        both = asyncio.run(tool.acall(query="car")).content
        assert sorted(plain_hits(both)) == ["[assistant] " + LEASE, "[user] The car is blue"]
        plain = SessionToolSpec(SessionManager(manager.store))
        assert plain_hits(plain.session_search(query=PARAPHRASE)) == ["[user] The car is blue"]  # by words
        assert plain_hits(plain.session_search(query="car")) == ["[user] The car is blue"]


def test_the_tool_specs_search_context_finds_entries_by_meaning():
    session = Session(":memory:").for_session("kb").with_context("notes", provider=StoreSearchContext())
    session.with_semantic_recall(recall_index(), background=False, min_score=MIN_SCORE)
    with session:
        spec = SessionToolSpec(session)
        spec.set_context(label="notes", content="The automobile lease ends in May")
        spec.set_context(label="notes", content="Plant tomatoes after the frost")
        assert spec.search_context(label="notes", query="car") == "No results found."
        session.drain_recall()
        found = asyncio.run(spec.asearch_context(label="notes", query="car"))
        assert "The automobile lease ends in May" in found and "tomatoes" not in found


# -- VectorStoreRecall ----------------------------------------------------------------------


TEXTS, METAS = INDEX_TEXTS, INDEX_METAS


def test_what_the_vector_store_holds():
    """The index contract itself is the suite's (``sessions_core.testing.recall``); here, what
    lands in LlamaIndex's store."""
    recall = recall_index()
    recall.add(["v1", "v2", "v3"], TEXTS, METAS)
    store = recall.vector_store
    assert METAS[0].items() <= store.data.metadata_dict["v1"].items()
    assert store.get("v1") == SynonymEmbedding().get_text_embedding(TEXTS[0])
    recall.add(["v1"], ["The kitten sleeps all day"], [meta("a")])  # replaced, not added
    assert len(store.data.embedding_dict) == 3
    assert repr(recall) == "VectorStoreRecall(SimpleVectorStore, SynonymEmbedding)"


def test_async_search_matches_sync_search():
    recall = recall_index_with(TEXTS, METAS)
    where = {"session_id": ["a", "b"], "kind": "message"}
    assert asyncio.run(recall.asearch("car", 5, where)) == recall.search("car", 5, where)


def recall_index_with(texts: list[str], metadatas: list[dict[str, Any]]) -> VectorStoreRecall:
    recall = recall_index()
    recall.add([f"v{n}" for n in range(1, len(texts) + 1)], texts, metadatas)
    return recall


def test_from_index_uses_the_indexs_store_and_embed_model():
    embed_model = SynonymEmbedding()
    index = VectorStoreIndex(nodes=[], embed_model=embed_model)
    recall = VectorStoreRecall.from_index(index)
    assert recall.vector_store is index.vector_store and recall.embed_model is embed_model
    recall.add(["v1", "v2"], TEXTS[:2], METAS[:2])
    assert hit_ids(recall.search("car", 1, {"session_id": "a"})) == ["v1"]
    assert set(index.vector_store.data.embedding_dict) == {"v1", "v2"}
    # Nodes the index inserts itself share the store (and are outside recall's filter).
    index.insert_nodes([TextNode(id_="own", text="A red automobile", metadata={"source": "docs"})])
    assert hit_ids(recall.search("car", 5, {"session_id": "a"}))[0] == "v1"
    assert "own" not in hit_ids(recall.search("car", 5, {"kind": "message"}))


def test_metadata_filters_are_eq_for_a_value_and_in_for_a_list():
    filters = metadata_filters({"kind": "message", "session_id": ["a", "b"], "label": ("notes",)})
    assert isinstance(filters, MetadataFilters)
    assert filters.filters == [
        MetadataFilter(key="kind", value="message", operator=FilterOperator.EQ),
        MetadataFilter(key="session_id", value=["a", "b"], operator=FilterOperator.IN),
        MetadataFilter(key="label", value=["notes"], operator=FilterOperator.IN),
    ]
    assert metadata_filters({}).filters == []
    assert metadata_filters({"namespace": ""}).filters[0].value == ""


@pytest.mark.parametrize(
    ("store", "embed_model", "message"),
    [
        (object(), SynonymEmbedding(), "vector_store must be a LlamaIndex vector store"),
        (SynonymEmbedding(), SimpleVectorStore(), "vector_store must be a LlamaIndex vector store"),
        (SimpleVectorStore(), object(), "embed_model must be a LlamaIndex BaseEmbedding"),
        (SimpleVectorStore(), "text-embedding-3-small", "embed_model must be a LlamaIndex BaseEmbedding"),
    ],
)
def test_wrong_types_are_refused(store, embed_model, message):
    with pytest.raises(TypeError, match=message):
        VectorStoreRecall(store, embed_model)


def test_an_index_where_a_store_belongs_is_refused_with_a_hint():
    index = VectorStoreIndex(nodes=[], embed_model=SynonymEmbedding())
    with pytest.raises(TypeError, match=r"VectorStoreRecall\.from_index"):
        VectorStoreRecall(index, SynonymEmbedding())
    with pytest.raises(TypeError, match="from_index takes a VectorStoreIndex"):
        VectorStoreRecall.from_index(SimpleVectorStore())


# -- SynonymEmbedding -----------------------------------------------------------------------


def cosine(a: list[float], b: list[float]) -> float:
    return sum(x * y for x, y in zip(a, b))


def test_synonym_embedding_is_deterministic_sync_and_async():
    model = SynonymEmbedding()
    first = model.get_text_embedding("We agreed on the automobile lease")
    assert first == SynonymEmbedding().get_text_embedding("We agreed on the automobile lease")
    assert first == model.get_query_embedding("We agreed on the automobile lease")
    assert len(first) == 256 and math.isclose(math.sqrt(cosine(first, first)), 1.0)
    assert asyncio.run(model.aget_query_embedding("car")) == model.get_query_embedding("car")
    assert asyncio.run(model.aget_text_embedding("car")) == model.get_text_embedding("car")
    assert model.get_text_embedding_batch(["car", "dog"]) == [model.get_text_embedding(t) for t in ("car", "dog")]
    assert len(SynonymEmbedding(dimensions=32).get_text_embedding("car")) == 32
    assert SynonymEmbedding.class_name() == "SynonymEmbedding"


def test_synonyms_lie_close_and_other_words_do_not():
    model = SynonymEmbedding()
    car = model.get_query_embedding("car")
    assert math.isclose(cosine(car, model.get_text_embedding("automobile")), 1.0)
    assert cosine(model.get_query_embedding(PARAPHRASE), model.get_text_embedding(LEASE)) > 0.5
    assert cosine(car, model.get_text_embedding("puppy")) < MIN_SCORE
    assert cosine(model.get_text_embedding("kettle"), model.get_text_embedding("teapot")) < MIN_SCORE
    grouped = SynonymEmbedding(groups=(("kettle", "teapot"),))
    assert math.isclose(cosine(grouped.get_text_embedding("kettle"), grouped.get_text_embedding("teapot")), 1.0)
