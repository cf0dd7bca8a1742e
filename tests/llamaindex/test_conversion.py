"""ChatMessage <-> SessionMessage conversion: lossless both ways (property tests)."""

from __future__ import annotations

import base64
import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from llama_index.core.base.llms.types import (
    AudioBlock,
    CacheControl,
    CachePoint,
    ChatMessage,
    CitableBlock,
    DocumentBlock,
    ImageBlock,
    MessageRole,
    TextBlock,
    ThinkingBlock,
    ToolCallBlock,
    VideoBlock,
)

from llamaindex_sessions import from_chat_message, from_chat_messages, to_chat_message, to_chat_messages
from sessions_core import SessionMessage, parse_message
from sessions_core.messages import storage_json

# -- strategies --------------------------------------------------------------------------------

text = st.text(max_size=40)
ident = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789_", min_size=1, max_size=12)
json_scalar = st.none() | st.booleans() | st.integers(-(10**6), 10**6) | text
json_value = st.recursive(
    json_scalar,
    lambda children: st.lists(children, max_size=3) | st.dictionaries(ident, children, max_size=3),
    max_leaves=8,
)
json_object = st.dictionaries(ident, json_value, max_size=4)
raw_bytes = st.binary(min_size=1, max_size=24)

text_block = st.builds(TextBlock, text=text)
thinking_block = st.builds(
    ThinkingBlock,
    content=st.none() | text,
    num_tokens=st.none() | st.integers(0, 5000),
    additional_information=st.dictionaries(ident, json_scalar, max_size=2),
)
tool_call_block = st.builds(
    ToolCallBlock,
    tool_call_id=st.none() | ident.map(lambda s: "call_" + s),
    tool_name=ident,
    tool_kwargs=json_object | text,
)
image_block = st.one_of(
    st.builds(
        ImageBlock,
        image=raw_bytes,
        image_mimetype=st.sampled_from(["image/png", "image/jpeg", None]),
        detail=st.sampled_from([None, "low", "high"]),
    ),
    st.builds(ImageBlock, url=ident.map(lambda s: f"https://example.com/{s}.png")),
)
media_block = st.one_of(
    image_block,
    st.builds(AudioBlock, audio=raw_bytes, format=st.sampled_from(["wav", "mp3"])),
    st.builds(VideoBlock, url=ident.map(lambda s: f"https://example.com/{s}.mp4"), fps=st.none() | st.integers(1, 60)),
    st.builds(DocumentBlock, data=raw_bytes, title=st.none() | ident, document_mimetype=st.just("application/pdf")),
)
other_block = st.one_of(
    st.builds(
        CachePoint, cache_control=st.builds(CacheControl, type=st.just("ephemeral"), ttl=st.sampled_from(["5m", "1h"]))
    ),
    st.builds(CitableBlock, title=ident, source=ident, content=st.lists(text_block, min_size=1, max_size=2)),
)
any_block = st.one_of(text_block, thinking_block, tool_call_block, media_block, other_block)
kwargs = st.dictionaries(
    ident.filter(lambda k: k not in ("tool_calls", "tool_call_id", "call_id", "images")), json_value, max_size=3
)


@st.composite
def openai_tool_calls(draw):
    calls = draw(st.lists(st.tuples(ident, ident, json_object), min_size=1, max_size=3, unique_by=lambda c: c[0]))
    return [
        {"id": "call_" + i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for i, n, a in calls
    ]


@st.composite
def chat_messages(draw):
    role = draw(st.sampled_from(list(MessageRole)))
    extra = draw(kwargs)
    if role in (MessageRole.TOOL, MessageRole.FUNCTION) and draw(st.booleans()):
        extra[draw(st.sampled_from(["tool_call_id", "call_id"]))] = "call_" + draw(ident)
        blocks = draw(st.lists(text_block, min_size=1, max_size=1) | st.lists(text_block | image_block, max_size=3))
    else:
        blocks = draw(st.lists(any_block, max_size=4))
    if role == MessageRole.ASSISTANT and draw(st.booleans()):
        extra["tool_calls"] = draw(openai_tool_calls())
        if draw(st.booleans()):  # both forms, as llama-index-llms-openai writes them
            for call in extra["tool_calls"]:
                blocks.append(
                    ToolCallBlock(
                        tool_call_id=call["id"],
                        tool_name=call["function"]["name"],
                        tool_kwargs=json.loads(call["function"]["arguments"]),
                    )
                )
    return ChatMessage(role=role, blocks=blocks, additional_kwargs=extra)


def through_storage(message: SessionMessage) -> SessionMessage:
    """What a store gives back: the stored JSON parsed again."""
    return SessionMessage.model_validate_json(storage_json(message))


# -- properties --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_messages())
def test_chat_message_round_trips_through_storage(message):
    stored = through_storage(from_chat_message(message))
    assert to_chat_message(stored) == message


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(chat_messages())
def test_session_message_round_trips(message):
    first = through_storage(from_chat_message(message, id="m1"))
    again = through_storage(from_chat_message(to_chat_message(first), id="m1"))
    assert again.model_dump(mode="json") == first.model_dump(mode="json")


@settings(max_examples=100, deadline=None)
@given(chat_messages())
def test_stored_message_is_valid_core_message(message):
    session_message = from_chat_message(message)
    assert parse_message(json.loads(storage_json(session_message))).id == session_message.id


# -- shapes other frameworks read ----------------------------------------------------------------


def test_tool_call_blocks_become_tool_call_parts():
    message = ChatMessage(
        role="assistant",
        blocks=[
            TextBlock(text="Let me check."),
            ToolCallBlock(tool_call_id="call_1", tool_name="add", tool_kwargs={"a": 2, "b": 3}),
        ],
    )
    stored = from_chat_message(message)
    assert stored.role == "assistant"
    assert [p.type for p in stored.parts] == ["text", "tool-call"]
    call = stored.parts[1]
    assert (call.tool_call_id, call.tool_name, call.input) == ("call_1", "add", {"a": 2, "b": 3})
    assert stored.metadata == {}


def test_both_tool_call_forms_store_each_call_once():
    kwargs = {
        "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]
    }
    message = ChatMessage(
        role="assistant",
        blocks=[ToolCallBlock(tool_call_id="call_1", tool_name="add", tool_kwargs={"a": 1})],
        additional_kwargs=kwargs,
    )
    stored = from_chat_message(message)
    assert [p.type for p in stored.parts] == ["tool-call"]
    assert to_chat_message(stored) == message


def test_kwargs_only_tool_calls_are_parsed():
    kwargs = {
        "tool_calls": [{"id": "call_9", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]
    }
    message = ChatMessage(role="assistant", content="", additional_kwargs=kwargs)
    stored = from_chat_message(message)
    calls = [p for p in stored.parts if p.type == "tool-call"]
    assert [(c.tool_call_id, c.tool_name, c.input) for c in calls] == [("call_9", "add", {"a": 1})]
    assert to_chat_message(stored) == message  # no ToolCallBlock invented


def test_openai_objects_in_kwargs_are_kept_as_dicts():
    from openai.types.chat import ChatCompletionMessageToolCall

    call = ChatCompletionMessageToolCall(id="call_1", type="function", function={"name": "f", "arguments": "{}"})
    message = ChatMessage(role="assistant", blocks=[], additional_kwargs={"tool_calls": [call]})
    restored = to_chat_message(through_storage(from_chat_message(message)))
    assert restored.additional_kwargs == {"tool_calls": [call.model_dump()]}


def test_unserialisable_provider_objects_never_break_a_write():
    class FunctionCall:  # like a provider SDK object pydantic cannot serialise
        def __str__(self):
            return "FunctionCall(name='f')"

    message = ChatMessage(role="assistant", content="hi", additional_kwargs={"raw": FunctionCall()})
    stored = through_storage(from_chat_message(message))
    assert to_chat_message(stored).additional_kwargs == {"raw": "FunctionCall(name='f')"}


def test_tool_result_and_names_from_the_batch():
    call = ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="add", tool_kwargs={})])
    result = ChatMessage(role="tool", content="5", additional_kwargs={"tool_call_id": "c1"})
    _, stored = from_chat_messages([call, result])
    part = stored.parts[0]
    assert (stored.role, part.type, part.tool_call_id, part.tool_name, part.output) == (
        "tool",
        "tool-result",
        "c1",
        "add",
        "5",
    )
    assert to_chat_message(stored) == result


def test_roles_outside_the_core_are_restored():
    for role in ("developer", "function", "chatbot", "model"):
        message = ChatMessage(role=role, content="x")
        stored = from_chat_message(message)
        assert stored.role in ("system", "user", "assistant", "tool")
        assert to_chat_message(stored).role == MessageRole(role)


def test_media_is_a_file_part():
    png = base64.b64encode(b"\x89PNG fake").decode()
    message = ChatMessage(
        role="user", blocks=[TextBlock(text="look"), ImageBlock(image=b"\x89PNG fake", image_mimetype="image/png")]
    )
    stored = from_chat_message(message)
    file = stored.parts[1]
    assert (file.type, file.media_type, file.data) == ("file", "image/png", png)


# -- messages written by another framework -------------------------------------------------------


def test_foreign_messages_convert_to_llamaindex_shapes():
    assistant = SessionMessage.model_validate(
        {
            "id": "a1",
            "role": "assistant",
            "parts": [
                {"type": "reasoning", "text": "thinking"},
                {"type": "text", "text": "Adding."},
                {"type": "tool-call", "toolCallId": "c1", "toolName": "add", "input": {"a": 1}},
                {"type": "tool-result", "toolCallId": "c1", "toolName": "add", "output": {"sum": 3}},
                {"type": "step-start"},
            ],
        }
    )
    chat, tool = to_chat_messages(assistant)
    assert [b.block_type for b in chat.blocks] == ["thinking", "text", "tool_call"]
    assert chat.blocks[2] == ToolCallBlock(tool_call_id="c1", tool_name="add", tool_kwargs={"a": 1})
    assert tool.role == MessageRole.TOOL and tool.content == '{"sum":3}'
    assert tool.additional_kwargs == {"tool_call_id": "c1"}

    results = SessionMessage.model_validate(
        {
            "id": "t1",
            "role": "tool",
            "parts": [
                {"type": "tool-result", "toolCallId": "c1", "output": "one"},
                {"type": "tool-result", "toolCallId": "c2", "output": "two"},
            ],
        }
    )
    assert [(m.role, m.content, m.additional_kwargs) for m in to_chat_messages(results)] == [
        (MessageRole.TOOL, "one", {"tool_call_id": "c1"}),
        (MessageRole.TOOL, "two", {"tool_call_id": "c2"}),
    ]

    ui = SessionMessage.model_validate(
        {
            "id": "u1",
            "role": "assistant",
            "parts": [
                {
                    "type": "tool-weather",
                    "toolCallId": "c3",
                    "state": "output-available",
                    "input": {"city": "Lisbon"},
                    "output": "sunny",
                },
            ],
        }
    )
    call, result = to_chat_messages(ui)
    assert call.blocks == [ToolCallBlock(tool_call_id="c3", tool_name="weather", tool_kwargs={"city": "Lisbon"})]
    assert result.content == "sunny"

    image = SessionMessage.model_validate(
        {
            "id": "f1",
            "role": "user",
            "parts": [{"type": "file", "mediaType": "image/png", "data": "aGVsbG8="}],
        }
    )
    block = to_chat_message(image).blocks[0]
    assert isinstance(block, ImageBlock) and block.image == b"aGVsbG8=" and block.image_mimetype == "image/png"


# -- to_chat_messages is the inverse of from_chat_messages (issue 18) ----------------------------


def test_to_chat_messages_takes_a_history_as_from_chat_messages_gives_one():
    turn = [
        ChatMessage(role="user", content="add 1 and 2"),
        ChatMessage(role="assistant", blocks=[ToolCallBlock(tool_call_id="c1", tool_name="add", tool_kwargs={"a": 1})]),
        ChatMessage(role="tool", content="3", additional_kwargs={"tool_call_id": "c1"}),
        ChatMessage(role="assistant", content="3"),
    ]
    stored = from_chat_messages(turn)
    assert to_chat_messages(stored) == turn
    assert to_chat_messages(iter(stored)) == turn
    assert to_chat_messages([m.model_dump(by_alias=True) for m in stored]) == turn  # plain dicts too
    assert to_chat_messages([]) == []
    assert to_chat_messages(stored[0]) == turn[:1]  # one message, the 0.1 form, still works
    assert to_chat_message(stored[0].model_dump(by_alias=True)) == turn[0]


def test_a_file_part_given_as_bytes_becomes_a_base64_block():
    from sessions_core import FilePart, TextPart

    image = FilePart(media_type="image/png", data=b"\x89PNG")
    message = to_chat_message(SessionMessage(id="u", role="user", parts=[TextPart(text="see"), image]))
    block = message.blocks[1]
    assert isinstance(block, ImageBlock) and block.image == b"iVBORw==" and block.image_mimetype == "image/png"
