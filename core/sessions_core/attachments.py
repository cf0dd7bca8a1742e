"""Inline binary payloads of file parts, stored once outside the message row (pure, no I/O).

Before a message is stored, each file part's inline ``data`` (bytes, a base64 string or a
``data:`` URL) is replaced by a reference ``sessions-blob:<sha256>:<form>`` and its bytes go to
a content-addressed table: identical payloads are kept once. On read the reference is turned back
into exactly the value that was written.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .errors import InvalidInputError
from .messages import FilePart, SessionMessage

BLOB_PREFIX = "sessions-blob:"
INLINE_PREFIX = "sessions-inline:"
"""A payload kept in the message JSON, for a store without ``BlobStore``:
``sessions-inline:<form>:<base64>``."""
_DIGEST_CHARS = 64


@dataclass(frozen=True, slots=True)
class Blob:
    digest: str
    """Hex SHA-256 of ``data``."""
    data: bytes


def _decode(value: str | bytes) -> tuple[bytes, str] | None:
    """The payload bytes and how to write them back, or ``None`` to keep ``value`` inline."""
    if isinstance(value, bytes):
        return value, "bytes"
    if value.startswith((BLOB_PREFIX, INLINE_PREFIX)):
        return value.encode("utf-8"), "text"  # would read as a reference: store it as one
    if value.startswith("data:"):
        header, comma, payload = value.partition(",")
        if comma and header.endswith(";base64"):
            raw = _strict_b64(payload)
            if raw is not None:
                return raw, "data-url:" + header
        return None
    raw = _strict_b64(value)
    return (raw, "base64") if raw is not None and raw else None


def _strict_b64(text: str) -> bytes | None:
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if base64.b64encode(raw).decode("ascii") == text else None


def _encode(raw: bytes, form: str) -> str | bytes:
    if form == "bytes":
        return raw
    if form == "text":
        return raw.decode("utf-8")
    if form == "base64":
        return base64.b64encode(raw).decode("ascii")
    if form.startswith("data-url:"):
        return form.removeprefix("data-url:") + "," + base64.b64encode(raw).decode("ascii")
    raise InvalidInputError(f"unknown blob form {form!r}")


def _replace_payloads(message: SessionMessage, replace: Callable[[bytes, str], str | None]) -> SessionMessage:
    """The message with each inline file payload replaced by ``replace(raw, form)`` (``None``:
    kept as it is); the same object when nothing was replaced."""
    parts = list(message.parts)
    changed = False
    for index, part in enumerate(parts):
        if not isinstance(part, FilePart) or part.data is None:
            continue
        decoded = _decode(part.data)
        value = replace(*decoded) if decoded is not None else None
        if value is not None:
            parts[index] = part.model_copy(update={"data": value})
            changed = True
    return message.model_copy(update={"parts": parts}) if changed else message


def extract_blobs(message: SessionMessage) -> tuple[SessionMessage, tuple[Blob, ...]]:
    """The message with inline file payloads replaced by references, and those payloads."""
    blobs: dict[str, Blob] = {}

    def reference(raw: bytes, form: str) -> str:
        digest = hashlib.sha256(raw).hexdigest()
        blobs.setdefault(digest, Blob(digest, raw))
        return f"{BLOB_PREFIX}{digest}:{form}"

    return _replace_payloads(message, reference), tuple(blobs.values())


def inline_payloads(message: SessionMessage) -> SessionMessage:
    """For a store that keeps no blobs: the message with the payloads JSON cannot hold as
    written (bytes, text that would read as a reference) kept inline as ``INLINE_PREFIX``
    values, which :func:`restore_inline` turns back into what was written."""

    def inline(raw: bytes, form: str) -> str | None:
        if form not in ("bytes", "text"):
            return None
        return f"{INLINE_PREFIX}{form}:{base64.b64encode(raw).decode('ascii')}"

    return _replace_payloads(message, inline)


def restore_inline(messages: list[SessionMessage]) -> list[SessionMessage]:
    """The messages with :func:`inline_payloads` values put back as first written."""
    restored = []
    for message in messages:
        parts = list(message.parts)
        changed = False
        for index, part in enumerate(parts):
            if isinstance(part, FilePart) and isinstance(part.data, str) and part.data.startswith(INLINE_PREFIX):
                form, _, payload = part.data[len(INLINE_PREFIX) :].partition(":")
                parts[index] = part.model_copy(update={"data": _encode(base64.b64decode(payload), form)})
                changed = True
        restored.append(message.model_copy(update={"parts": parts}) if changed else message)
    return restored


def restore_payloads(
    messages: list[SessionMessage], fetch: Callable[[list[str]], Mapping[str, bytes]] | None
) -> list[SessionMessage]:
    """:func:`restore_blobs` with the store's ``get_blobs``, or (``fetch`` ``None``: a store
    that keeps no blobs) :func:`restore_inline`."""
    return restore_inline(messages) if fetch is None else restore_blobs(messages, fetch)


def _reference(part: object) -> tuple[str, str] | None:
    if isinstance(part, FilePart) and isinstance(part.data, str) and part.data.startswith(BLOB_PREFIX):
        rest = part.data[len(BLOB_PREFIX) :]
        return rest[:_DIGEST_CHARS], rest[_DIGEST_CHARS + 1 :]
    return None


def referenced_digests(messages: Iterable[SessionMessage]) -> set[str]:
    return {
        ref[0]
        for m in messages
        for part in m.parts
        if isinstance(part, FilePart) and (ref := _reference(part)) is not None
    }


def restore_blobs(
    messages: list[SessionMessage], fetch: Callable[[list[str]], Mapping[str, bytes]]
) -> list[SessionMessage]:
    """The messages with blob references put back as the values first written (one ``fetch``
    for all of them). A payload missing from the store leaves its reference in place."""
    digests = referenced_digests(messages)
    if not digests:
        return messages
    payloads = fetch(sorted(digests))
    restored = []
    for message in messages:
        parts = list(message.parts)
        changed = False
        for index, part in enumerate(parts):
            ref = _reference(part)
            if ref is not None and ref[0] in payloads:
                parts[index] = part.model_copy(update={"data": _encode(payloads[ref[0]], ref[1])})
                changed = True
        restored.append(message.model_copy(update={"parts": parts}) if changed else message)
    return restored
