"""LangChain messages <-> SessionMessage: lossless round trips (property tests) and foreign
messages (written by another framework) read as valid LangChain messages."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from langchain_sessions import (
    to_langchain_message,
    to_langchain_messages,
    to_session_message,
    to_session_messages,
)
from langchain_sessions.conversion import source_id
from sessions_core import FilePart, Session, SessionMessage, TextPart
from sessions_core._time import now_us
from sessions_core.messages import message_from_storage, storage_json

# -- strategies -------------------------------------------------------------------------------

keys = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), min_size=1, max_size=8)
text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=30)
scalars = (
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.floats(allow_nan=False, allow_infinity=False) | text
)
json_values = st.recursive(
    scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(keys, inner, max_size=3), max_leaves=8
)
json_objects = st.dictionaries(keys, json_values, max_size=3)
ids = st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=12)
extras = st.dictionaries(
    st.sampled_from(["id", "annotations", "index", "extras", "cache_control"]), json_values, max_size=2
)


def block_strategy():
    text_block = st.builds(lambda t, e: {"type": "text", "text": t, **e}, text, extras)
    reasoning = st.builds(lambda t, e: {"type": "reasoning", "reasoning": t, **e}, text, extras)
    data_block = st.builds(
        lambda kind, mime, where, payload, e: {"type": kind, "mime_type": mime, where: payload, **e},
        st.sampled_from(["image", "audio", "video", "file"]),
        st.sampled_from(["image/png", "audio/wav", "application/pdf"]),
        st.sampled_from(["base64", "url"]),
        text,
        extras,
    )
    openai_image = st.builds(lambda url: {"type": "image_url", "image_url": {"url": url}}, text)
    anthropic_tool_use = st.builds(
        lambda i, n, a: {"type": "tool_use", "id": i, "name": n, "input": a}, ids, ids, json_objects
    )
    file_id = st.builds(lambda f: {"type": "file", "file_id": f}, ids)
    colliding = st.builds(
        lambda t, o: {"type": t, **o},
        st.sampled_from(["tool-call", "tool-result", "tool-x", "dynamic-tool"]),
        json_objects,
    )
    odd_text = st.builds(lambda t: {"type": "text", "text": t, "lcBlock": "x"}, text)
    anything = st.builds(lambda t, o: {**o, "type": t}, keys, json_objects)
    return (
        text
        | text_block
        | reasoning
        | data_block
        | openai_image
        | anthropic_tool_use
        | file_id
        | colliding
        | odd_text
        | anything
    )


content = text | st.lists(block_strategy(), max_size=4)
common = {
    "id": ids,
    "name": st.none() | text,
    "additional_kwargs": json_objects,
    "response_metadata": json_objects,
}
tool_calls = st.lists(
    st.builds(lambda n, a, i: {"name": n, "args": a, "id": i}, ids, json_objects, st.none() | ids), max_size=3
)
usage = st.none() | st.builds(
    lambda i, o: {"input_tokens": i, "output_tokens": o, "total_tokens": i + o},
    st.integers(0, 10**6),
    st.integers(0, 10**6),
)
invalid_calls = st.lists(
    st.builds(
        lambda n, a, i: {"type": "invalid_tool_call", "name": n, "args": a, "id": i, "error": "bad json"},
        st.none() | ids,
        st.none() | text,
        st.none() | ids,
    ),
    max_size=2,
)

messages = st.one_of(
    st.builds(HumanMessage, content=content, **common),
    st.builds(SystemMessage, content=content, **common),
    st.builds(
        AIMessage,
        content=content,
        tool_calls=tool_calls,
        usage_metadata=usage,
        invalid_tool_calls=invalid_calls,
        **common,
    ),
    st.builds(
        ToolMessage,
        content=content,
        tool_call_id=ids,
        artifact=json_values,
        status=st.sampled_from(["success", "error"]),
        **common,
    ),
    st.builds(ChatMessage, content=content, role=st.sampled_from(["user", "assistant", "critic", "tool"]), **common),
    st.builds(FunctionMessage, content=content, name=ids, id=ids),
)


def stored(message: SessionMessage) -> SessionMessage:
    """The message as a store gives it back (its JSON row)."""
    return message_from_storage(storage_json(message), now_us())


# -- round trips ------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(messages)
def test_round_trip_through_storage_json_is_lossless(message):
    session_message = to_session_message(message)
    assert isinstance(session_message, SessionMessage)
    back = to_langchain_message(stored(session_message))
    assert back == message
    assert type(back) is type(message)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(st.lists(messages, max_size=6, unique_by=lambda m: m.id))
def test_a_stored_conversation_reads_back_equal(conversation):
    with Session(":memory:").for_session("prop") as session:
        for message in to_session_messages(conversation):
            assert session.append_message(message).inserted
        assert to_langchain_messages(session.get_history()) == conversation


def test_typed_parts_carry_what_other_readers_need():
    ai = AIMessage(
        [{"type": "reasoning", "reasoning": "think"}, {"type": "text", "text": "Let me check."}],
        tool_calls=[{"name": "lookup", "args": {"q": "tea"}, "id": "call_1"}],
        id="a1",
    )
    parts = to_session_message(ai).parts
    assert [p.type for p in parts] == ["reasoning", "text", "tool-call"]
    assert parts[0].text == "think" and parts[1].text == "Let me check."
    assert (parts[2].tool_call_id, parts[2].tool_name, parts[2].input) == ("call_1", "lookup", {"q": "tea"})

    result = to_session_message(ToolMessage("42", tool_call_id="call_1", name="lookup", status="error", id="t1"))
    assert result.role == "tool"
    (part,) = result.parts
    assert (part.type, part.tool_call_id, part.tool_name, part.output, part.is_error) == (
        "tool-result",
        "call_1",
        "lookup",
        "42",
        True,
    )

    image = to_session_message(
        HumanMessage(
            [{"type": "text", "text": "see"}, {"type": "image", "base64": "AAAA", "mime_type": "image/png"}], id="h"
        )
    )
    assert image.role == "user"
    assert image.parts[1].type == "file"
    assert (image.parts[1].media_type, image.parts[1].data) == ("image/png", "AAAA")
    assert image.text == "see"


def test_id_less_messages_get_an_id_and_removals_are_refused():
    assert to_session_message(HumanMessage("hi")).id
    with pytest.raises(TypeError):
        to_session_message(RemoveMessage(id="x"))
    with pytest.raises(TypeError):
        to_session_message({"role": "user", "content": "hi"})  # type: ignore[arg-type]


def test_non_json_artifacts_are_kept_as_json():
    message = ToolMessage("ok", tool_call_id="c", artifact={"when": datetime(2024, 1, 2), "raw": b"\x00\x01"}, id="t")
    back = to_langchain_message(stored(to_session_message(message)))
    assert back.artifact["raw"] == "AAE="
    assert "2024" in back.artifact["when"]


def test_chunks_round_trip():
    chunk = AIMessageChunk(
        "partial", id="c1", usage_metadata={"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}
    )
    assert to_langchain_message(stored(to_session_message(chunk))) == chunk


# -- foreign messages -------------------------------------------------------------------------


def test_messages_written_by_other_frameworks_become_valid_langchain_messages():
    history = [
        {
            "id": "u1",
            "role": "user",
            "parts": [
                {"type": "text", "text": "Weather?"},
                {"type": "file", "mediaType": "image/png", "data": "data:image/png;base64,QUJD"},
            ],
        },
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "step-start"},
                {"type": "reasoning", "text": "hmm"},
                {"type": "text", "text": "Checking."},
                {
                    "type": "tool-weather",
                    "toolCallId": "w1",
                    "state": "output-available",
                    "input": {"city": "Paris"},
                    "output": {"temp": 21},
                },
                {"type": "tool-call", "toolCallId": "w2", "toolName": "news", "input": '{"q": "x"}'},
            ],
        },
        {
            "id": "t2",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "w2", "toolName": "news", "output": "none", "isError": True},
            ],
        },
        {"id": "s0", "role": "system", "parts": [{"type": "text", "text": "be brief"}]},
        {"id": "compaction_x", "role": "assistant", "parts": [{"type": "text", "text": "SUMMARY"}]},
    ]
    converted = to_langchain_messages([SessionMessage.model_validate(m) for m in history])
    human, ai, weather, news, system, summary = converted
    assert human.content == [
        {"type": "text", "text": "Weather?"},
        {"type": "image", "mime_type": "image/png", "base64": "QUJD"},
    ]
    assert ai.content == "Checking."
    assert [(c["name"], c["args"], c["id"]) for c in ai.tool_calls] == [
        ("weather", {"city": "Paris"}, "w1"),
        ("news", {"q": "x"}, "w2"),
    ]
    assert (weather.tool_call_id, json.loads(weather.content), weather.status) == ("w1", {"temp": 21}, "success")
    assert source_id(weather) == "a1" and weather.id != "a1"
    assert (news.id, news.tool_call_id, news.status, news.name) == ("t2", "w2", "error", "news")
    assert isinstance(system, SystemMessage) and system.content == "be brief"
    assert isinstance(summary, AIMessage) and summary.additional_kwargs["lc_source"] == "session_memory.compaction"
    with pytest.raises(ValueError, match="to_langchain_messages"):
        to_langchain_message(SessionMessage.model_validate(history[1]))


def test_dicts_are_accepted():
    assert to_langchain_message({"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}) == HumanMessage(
        "hi", id="u"
    )


def test_a_file_part_given_as_bytes_becomes_a_base64_block():
    image = FilePart(media_type="image/png", data=b"\x89PNG")
    message = to_langchain_message(SessionMessage(id="u", role="user", parts=[TextPart(text="see"), image]))
    assert message.content[1] == {"type": "image", "mime_type": "image/png", "base64": "iVBORw=="}
