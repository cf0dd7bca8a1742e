"""Parts are told apart by their ``type``: the AI SDK's fixed types by the key itself, the open
ones (``tool-<name>``, ``dynamic-tool``, any other) by a function. Every part belongs to one
union only, so a broken fixed part is refused (never kept as an unknown one), and its error
names the part's own field, once."""

import pytest

from sessions_core import MessageValidationError, SessionMessage
from sessions_core.messages import (
    FilePart,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
    UnknownPart,
    parse_message,
)

PARTS = [
    ({"type": "text", "text": "hi"}, TextPart),
    ({"type": "reasoning", "text": "hmm"}, ReasoningPart),
    ({"type": "tool-call", "toolCallId": "c1", "toolName": "f", "input": {"q": 1}}, ToolCallPart),
    ({"type": "tool-result", "toolCallId": "c1", "output": [1, 2]}, ToolResultPart),
    ({"type": "file", "mediaType": "text/plain", "url": "https://example.com/a.txt"}, FilePart),
    ({"type": "tool-weather", "toolCallId": "c2", "state": "output-available"}, ToolUIPart),
    ({"type": "dynamic-tool", "toolName": "g"}, ToolUIPart),
    ({"type": "step-start"}, UnknownPart),
    ({"type": "data-weather", "data": {"c": 20}}, UnknownPart),
]


def _message(*parts):
    return {"id": "m1", "role": "assistant", "parts": list(parts)}


@pytest.mark.parametrize(("part", "kind"), PARTS, ids=[p["type"] for p, _ in PARTS])
def test_each_type_becomes_its_class_from_python_and_from_json(part, kind):
    from_python = parse_message(_message(part))
    from_json = SessionMessage.model_validate_json(from_python.model_dump_json(by_alias=True, exclude_unset=True))
    for message in (from_python, from_json):
        assert type(message.parts[0]) is kind
        assert message.parts[0].model_dump(by_alias=True, exclude_unset=True) == part
    assert from_json == from_python
    assert from_json.parts[0].model_fields_set == from_python.parts[0].model_fields_set


@pytest.mark.parametrize(
    ("part", "problem"),
    [
        ({"type": "text"}, "parts.0.text: Field required"),
        ({"type": "tool-call", "toolName": "f"}, "parts.0.toolCallId: Field required"),
        ({"type": "file", "mediaType": "text/plain"}, "parts.0: Value error, a file part needs 'data' or 'url'"),
        ({"type": "tool-weather", "toolCallId": 5}, "parts.0.toolCallId: Input should be a valid string"),
        ({"text": "no type"}, "parts.0.type: Field required"),
        ({"type": 5}, "parts.0.type: Input should be a valid string"),
        ("text", "parts.0: Input should be a valid dictionary"),
    ],
)
def test_a_broken_part_is_refused_with_one_problem_naming_its_field(part, problem):
    with pytest.raises(MessageValidationError) as caught:
        parse_message(_message(part))
    assert str(caught.value).startswith(f"invalid message 'm1': {problem}")
    assert ";" not in str(caught.value)


def test_problems_over_several_parts_are_each_counted_once():
    broken = [{"type": "text"} for _ in range(7)]
    with pytest.raises(MessageValidationError) as caught:
        parse_message(_message(*broken))
    text = str(caught.value)
    assert text.count("Field required") == 5
    assert text.endswith("; and 2 more")


def test_an_image_given_as_bytes_reaches_openai_as_a_base64_data_url():
    from sessions_core.openai import to_openai_messages

    image = FilePart(media_type="image/png", data=b"\x89PNG")
    [sent] = to_openai_messages([SessionMessage(id="u", role="user", parts=[TextPart(text="see"), image])])
    assert sent["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}
