import math
import random
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sessions_core import (
    MessageValidationError,
    SessionMessage,
    TiktokenCounter,
    estimate_message_tokens,
    estimate_tokens,
)
from sessions_core.tokens import _JS_WORD, _word_count, js_length


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", 0),
        ("Hello world", 3),
        ("word " * 50, 65),
        ("x" * 400, 100),
        ("one two three", 4),  # 3 * 1.3 = 3.9000000000000004 -> 4
        ("a\u00a0b", 3),  # JS \s includes NBSP: two words
        ("a\x1cb", 2),  # ...but not \x1c (one word: 1.3 -> 2), which str.split() would split on
        ("😀" * 4, 2),  # UTF-16 length 8 -> 2
    ],
)
def test_estimate_tokens_follows_the_reference(text, expected):
    assert estimate_tokens(text) == expected


def test_estimate_message_tokens_counts_every_kind_of_part():
    message = SessionMessage.model_validate(
        {
            "id": "m",
            "role": "assistant",
            "parts": [
                {"type": "text", "text": "Hello world"},  # 3
                {"type": "reasoning", "text": "x" * 400},  # 100
                {"type": "tool-call", "toolCallId": "1", "toolName": "f", "input": {"a": 1}},  # '{"a":1}' -> 2
                {"type": "tool-result", "toolCallId": "1", "output": "Hello world"},  # 3
                {"type": "tool-weather", "toolCallId": "2", "input": "Hello world", "result": "x" * 8},  # 3 + 2
                {"type": "step-start"},  # 0
                {"type": "source", "text": "Hello world"},  # 3
                {"type": "data-x", "result": "Hello world"},  # 3
            ],
        }
    )
    assert estimate_message_tokens([message]) == 4 + 3 + 100 + 2 + 3 + 5 + 0 + 3 + 3
    assert estimate_message_tokens([]) == 0
    assert estimate_message_tokens([message, message]) == 2 * estimate_message_tokens([message])


def test_plain_dicts_are_counted_like_messages():
    message = {"id": "m", "role": "user", "parts": [{"type": "text", "text": "Hello world"}]}
    assert estimate_message_tokens([message]) == estimate_message_tokens([SessionMessage.model_validate(message)])
    assert TiktokenCounter("cl100k_base")([message]) == 4 + 2
    with pytest.raises(MessageValidationError, match="role"):
        estimate_message_tokens([{"id": "m", "parts": []}])


def test_reasoning_falls_back_to_the_legacy_field():
    message = SessionMessage.model_validate(
        {"id": "m", "role": "assistant", "parts": [{"type": "reasoning", "reasoning": "Hello world"}]}
    )
    assert estimate_message_tokens([message]) == 4 + 3


def test_tiktoken_counter_is_exact_and_offline():
    counter = TiktokenCounter("cl100k_base")
    assert counter.count_text("hello world") == 2
    assert counter.count_text("") == 0
    assert TiktokenCounter("gpt-4").count_text("hello world") == 2
    message = SessionMessage(id="m", role="user", parts=[{"type": "text", "text": "hello world"}])
    assert counter([message]) == 4 + 2


def test_tiktoken_counter_rejects_unknown_encodings():
    with pytest.raises(ValueError, match="no tiktoken encoding"):
        TiktokenCounter("no-such-encoding")


@given(st.text())
def test_the_fast_word_count_equals_the_javascript_split(text):
    assert _word_count(text) == len(_JS_WORD.findall(text))


def test_count_message_tokens_takes_the_overhead_per_message():
    from sessions_core.integration import count_message_tokens

    messages = [SessionMessage(id=str(i), role="user", parts=[{"type": "text", "text": "one two"}]) for i in range(3)]
    words = lambda text: len(text.split())  # noqa: E731
    assert count_message_tokens(messages, words) == 3 * (4 + 2)
    assert count_message_tokens(messages, words, per_message=0) == 3 * 2


def test_a_long_text_is_measured_a_chunk_at_a_time_with_the_same_result():
    rng = random.Random(5)
    alphabet = ["a", "b", " ", "\n", "\u3000", "中", "\x1c", "😀", "é", "\u00a0"]
    for size in (65_535, 65_536, 65_537, 200_001):
        mixed = "".join(rng.choice(alphabet) for _ in range(size))
        for text in (mixed, "".join(rng.choice("ab  ") for _ in range(size))):
            assert _word_count(text) == len(_JS_WORD.findall(text))
            assert js_length(text) == len(text.encode("utf-16-le")) // 2
    text = "word " * 4_000_000  # 20 MB
    tracemalloc.start()
    assert estimate_tokens(text) == math.ceil(4_000_000 * 1.3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < len(text) // 20  # not a list of its four million words
