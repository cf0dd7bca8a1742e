"""chat_model_summarizer: any chat model as the compaction summariser, tagged never to stream."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda

from langchain_sessions import COMPACTION_TAG, ChatModelSummarizer, chat_model_summarizer
from sessions_core import CompactionError, Session, create_compact_function

from .helpers import ScriptedChatModel


class Tags(BaseCallbackHandler):
    def __init__(self):
        self.seen = []

    def on_chat_model_start(self, serialized, messages, *, tags=None, metadata=None, **kwargs):
        self.seen.append((tags, metadata))


def test_calls_are_tagged_nostream_and_marked():
    tags = Tags()
    model = ScriptedChatModel(responses=[], summary="S", callbacks=[tags])
    summarize = chat_model_summarizer(model)
    assert isinstance(summarize, ChatModelSummarizer)
    assert summarize("Create a concise summary of this conversation") == "S"
    assert asyncio.run(summarize.ainvoke("Create a concise summary of this conversation")) == "S"
    for call_tags, metadata in tags.seen:
        assert "nostream" in call_tags and COMPACTION_TAG in call_tags
        assert metadata["lc_source"] == "session_memory.compaction"


def tea_session(summarize):
    session = (
        Session(":memory:")
        .for_session("s")
        .on_compaction(create_compact_function(summarize=summarize, protect_head=1, keep_recent_tokens=10))
    )
    for i in range(6):
        role = "user" if i % 2 == 0 else "assistant"
        session.append_message({"id": f"m{i}", "role": role, "parts": [{"type": "text", "text": "tea " * 20}]})
    return session


def test_compaction_with_a_chat_model_sync_and_async():
    model = ScriptedChatModel(responses=[], summary="They discussed tea.")
    assert tea_session(chat_model_summarizer(model)).compact().summary == "They discussed tea."
    assert asyncio.run(tea_session(chat_model_summarizer(model)).acompact()).summary == "They discussed tea."
    assert len(model.summary_prompts) == 2 and model.summary_prompts[0].startswith("Create a concise summary")


def test_retries_then_fails_without_touching_history():
    attempts = []

    def flaky(_messages):
        attempts.append(1)
        raise RuntimeError("down")

    session = tea_session(chat_model_summarizer(RunnableLambda(flaky), max_retries=2, retry_wait=False))
    with pytest.raises(CompactionError):
        session.compact()
    assert len(attempts) == 3
    assert session.get_compactions() == [] and len(session.get_history()) == 6


def test_reply_text_is_the_summary():
    model = ScriptedChatModel(responses=[], summary="")
    model.summary = "plain"
    assert chat_model_summarizer(model)("Create a concise summary") == "plain"
    reasoning = AIMessage([{"type": "reasoning", "reasoning": "hmm"}, {"type": "text", "text": "S"}])
    assert chat_model_summarizer(RunnableLambda(lambda _: reasoning), max_retries=0)("x") == "S"
