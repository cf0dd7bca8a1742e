"""The records of the export format, one kind at a time: how each is checked and how it is
written. :mod:`sessions_core.transfer` drives them; nothing here is called by users directly."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any

from ._time import now_us, to_us
from .errors import MessageValidationError
from .messages import FilePart, SessionMessage, parse_message
from .redaction import redact_message, redact_text
from .session import Session
from .stores.base import BlockVersionRow, CompactionRow, InspectableStore, SessionRow
from .text import lone_surrogate, surrogate_problem

EXPORT_FORMAT = "session-memory/1"
"""The ``format`` of an export's ``session`` record; an import refuses any other."""

RECORD_KINDS = ("session", "message", "compaction", "block_version", "block", "prompt", "search_entry")
"""Every ``kind`` of record, in the order an export writes them."""

PAGE_ROWS = 500
"""Rows read per page when a whole session is read."""


class InvalidRecord(Exception):
    """What is wrong with one record (the caller adds where it is)."""


@dataclass
class Record:
    """One checked record, with the session it goes to."""

    kind: str
    session_id: str
    """The target session (``into`` when given, else the record's own ``session_id``)."""
    data: dict[str, Any]
    message: SessionMessage | None = None
    """The parsed message (a second pass parses it only when it is written: :func:`message_of`)."""
    message_id: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None


def parse_time(value: Any, name: str) -> datetime:
    """An ISO 8601 time string as an aware datetime (UTC when it names no zone)."""
    if not isinstance(value, str):
        raise InvalidRecord(f"{name} must be an ISO 8601 time string")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidRecord(f"{name} is not an ISO 8601 time: {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _string(data: dict[str, Any], name: str, *, optional: bool = False, empty: bool = True) -> str | None:
    value = data.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidRecord(f"{name!r} must be a string" + ("" if name in data else " (missing)"))
    if not empty and not value:
        raise InvalidRecord(f"{name!r} must not be empty")
    position = lone_surrogate(value)
    if position is not None:
        raise InvalidRecord(surrogate_problem(repr(name), value, position))
    return value


def _decode(item: Any) -> dict[str, Any] | None:
    """The JSON object of one line (``str`` or UTF-8 ``bytes``) or record; ``None`` for a blank line."""
    if isinstance(item, bytes):
        try:
            item = item.decode("utf-8")
        except UnicodeDecodeError as error:
            raise InvalidRecord(f"not UTF-8 ({error.reason})") from None
    if isinstance(item, str):
        if not item.strip():
            return None
        try:
            item = json.loads(item)
        except json.JSONDecodeError as error:
            # json's messages may end in "at" ("Unterminated string starting at"): name the place once
            problem = error.msg.removesuffix(" at")
            raise InvalidRecord(f"not valid JSON: {problem} at character {error.pos + 1}") from None
    if not isinstance(item, dict):
        raise InvalidRecord(f"expected a JSON object, got {type(item).__name__}")
    return item


class RecordChecker:
    """Checks records in input order against what is earlier in the input and in ``store``."""

    def __init__(
        self, store: InspectableStore, into: str | None, *, checked: bool = False, redactor: Any = None
    ) -> None:
        """``checked``: the input passed a first check already; this pass only makes its records
        (a message is parsed when it is written, and only if it is not stored already). A first
        pass also finds the messages stored already with other content (:attr:`conflicts`, once
        :meth:`finish` ran), comparing what ``redactor`` would store."""
        self.store = store
        self.into = into
        self.checked = checked
        self.redactor = redactor
        self.conflicts: list[tuple[str, str]] = []
        """``(session id, message id)`` of each message stored already with other content."""
        self._unconfirmed: list[Record] = []  # messages not yet compared with the store
        self.item: Any = None
        """The input item being checked."""
        self.source_session: str | None = None
        self.seen: dict[tuple[str, str], tuple[int, str]] = {}  # (target, message id) -> (line, digest)
        self.line = 0
        self._checks: dict[str, Callable[[Record], None]] = {
            "session": self._check_session,
            "message": self._check_message,
            "compaction": self._check_compaction,
            "block_version": self._check_block_version,
            "block": self._check_block,
            "prompt": self._check_prompt,
            "search_entry": self._check_search_entry,
        }

    def check(self, line: int, item: Any) -> Record | None:
        """The checked record of input line ``line``; ``None`` for a blank line; else
        :class:`InvalidRecord` (a malformed message included)."""
        self.line = line
        try:
            return self._check(item)
        except MessageValidationError as error:
            raise InvalidRecord(str(error)) from None

    def _check(self, item: Any) -> Record | None:
        self.item = item
        data = _decode(item)
        if data is None:
            return None
        kind = data.get("kind")
        if kind not in RECORD_KINDS:
            raise InvalidRecord(f"unknown kind {kind!r} (expected one of {', '.join(RECORD_KINDS)})")
        source = _string(data, "session_id")
        assert source is not None
        if self.into is not None:
            if self.source_session is not None and source != self.source_session:
                raise InvalidRecord(
                    f"the input holds more than one session ({self.source_session!r}, {source!r});"
                    " importing into one session needs the records of one session"
                )
            self.source_session = source
        record = Record(kind, self.into if self.into is not None else source, data)
        self._checks[kind](record)
        return record

    def _check_session(self, record: Record) -> None:
        data = record.data
        if data.get("format") != EXPORT_FORMAT:
            raise InvalidRecord(f"unsupported format {data.get('format')!r} (this version reads {EXPORT_FORMAT!r})")
        registry = data.get("registry")
        if registry is None:
            return
        if not isinstance(registry, dict):
            raise InvalidRecord("'registry' must be an object or null")
        _string(registry, "name")
        for name in ("parent_session_id", "model", "source", "end_reason", "namespace", "id"):
            _string(registry, name, optional=True)
        for name in ("input_tokens", "output_tokens"):
            if not isinstance(registry.get(name, 0), int) or isinstance(registry.get(name, 0), bool):
                raise InvalidRecord(f"registry {name!r} must be an integer")
        if not isinstance(registry.get("estimated_cost", 0), (int, float)):
            raise InvalidRecord("registry 'estimated_cost' must be a number")
        for name in ("created_at", "updated_at"):
            parse_time(registry.get(name), f"registry {name!r}")

    def _check_message(self, record: Record) -> None:
        data = record.data
        if self.checked:
            record.message_id = data["message"]["id"]
            record.created_at = parse_time(data["created_at"], "'created_at'")
            return
        message = parse_message(given) if isinstance(given := data.get("message"), dict) else None
        if message is None:
            raise InvalidRecord("'message' must be a message object")
        ident = _string(data, "id", optional=True)
        if ident is not None and ident != message.id:
            raise InvalidRecord(f"'id' {ident!r} differs from the message's id {message.id!r}")
        parent = _string(data, "parent_id", optional=True, empty=False)
        record.created_at = parse_time(data.get("created_at"), "'created_at'")
        record.message = _with_bytes(message, data.get("binary_parts", []))
        record.message_id = message.id
        key = (record.session_id, message.id)
        if isinstance(self.item, (bytes, str)):  # a line: the same message twice is the same line
            line = self.item.encode() if isinstance(self.item, str) else self.item
            digest = hashlib.blake2b(line.strip(), digest_size=16).hexdigest()
        else:
            digest = hashlib.sha256(
                json.dumps([parent, data["created_at"], data["message"]], sort_keys=True).encode()
            ).hexdigest()
        earlier = self.seen.get(key)
        if earlier is not None:
            if earlier[1] != digest:
                raise InvalidRecord(f"message {message.id!r} appears again, different from line {earlier[0]}")
            return
        if parent is not None and (record.session_id, parent) not in self.seen:
            if self.store.get_message(record.session_id, parent) is None:
                raise InvalidRecord(
                    f"message {message.id!r} has parent {parent!r}, which is neither earlier in the input"
                    f" nor stored in session {record.session_id!r}"
                )
        self.seen[key] = (self.line, digest)
        self._unconfirmed.append(record)
        if len(self._unconfirmed) >= MESSAGE_BATCH:
            self._compare_with_store()

    def finish(self) -> None:
        """Compare the last messages of a first pass with the store (see :attr:`conflicts`)."""
        self._compare_with_store()

    def _compare_with_store(self) -> None:
        """Add to :attr:`conflicts` the waiting messages whose id is stored with other content
        (role, parts or metadata; the time and the parent are not compared)."""
        waiting, self._unconfirmed = self._unconfirmed, []
        by_session: dict[str, list[Record]] = {}
        for record in waiting:
            by_session.setdefault(record.session_id, []).append(record)
        for session_id, records in by_session.items():
            stored = self.store.stored_message_ids(session_id, [r.message_id for r in records])  # type: ignore[misc]
            if not stored:
                continue
            session = Session(self.store).for_session(session_id)
            for record in records:
                if record.message_id not in stored or record.message is None:
                    continue
                given = record.message
                if self.redactor is not None:
                    given = redact_message(self.redactor, given)
                existing = session.get_message(record.message_id)
                if existing is not None and _content(existing) != _content(given):
                    self.conflicts.append((session_id, record.message_id))

    def _check_compaction(self, record: Record) -> None:
        for name in ("id", "from_message_id", "to_message_id"):
            _string(record.data, name, empty=False)
        _string(record.data, "summary")
        record.created_at = parse_time(record.data.get("created_at"), "'created_at'")

    def _check_block_version(self, record: Record) -> None:
        data = record.data
        _string(data, "label", empty=False)
        _string(data, "key")
        _string(data, "content")
        _string(data, "source", empty=False)
        _string(data, "tool_call_id", optional=True)
        if type(data.get("version")) is not int or data["version"] < 1:
            raise InvalidRecord("'version' must be a positive integer")
        record.created_at = parse_time(data.get("created_at"), "'created_at'")

    def _check_block(self, record: Record) -> None:
        _string(record.data, "label", empty=False)
        _string(record.data, "content")
        if "updated_at" in record.data:
            record.updated_at = parse_time(record.data["updated_at"], "'updated_at'")

    def _check_prompt(self, record: Record) -> None:
        _string(record.data, "prompt")

    def _check_search_entry(self, record: Record) -> None:
        _string(record.data, "label", empty=False)
        _string(record.data, "key", empty=False)
        _string(record.data, "content")
        for name in ("created_at", "updated_at"):
            if name in record.data:
                setattr(record, name, parse_time(record.data[name], repr(name)))


def _content(message: SessionMessage) -> Any:
    """What a conflict compares: the message without its time."""
    return message.model_dump(mode="json", by_alias=True, exclude={"created_at"})


_TEXT_FIELDS = {
    "compaction": "summary",
    "block_version": "content",
    "block": "content",
    "prompt": "prompt",
    "search_entry": "content",
}
"""The free text of each kind of record but messages (which the session redacts part by part)."""

MESSAGE_BATCH = 1_000
"""Messages of one chain written per transaction by an import."""


class RecordWriter:
    """Writes checked records into ``store``, each unless what it holds is stored already.
    Consecutive messages that form a chain (each the child of the one before) are written
    together, :data:`MESSAGE_BATCH` a transaction, and those stored already are skipped
    without being prepared. With ``redactor``, the text of every record passes through it
    before it is written (``Session.with_redaction``)."""

    def __init__(self, store: InspectableStore, redactor: Any = None) -> None:
        self.store = store
        self.redactor = redactor
        self.stored_compactions: dict[str, set[str]] = {}
        self.stored_entries: dict[str, dict[tuple[str, str], bytes]] = {}
        self.imported_versions: dict[tuple[str, str, str], int] = {}  # (session, label, key) -> newest
        self._sessions: dict[str, Session] = {}
        self._chain: list[Record] = []
        self._writes: dict[str, Callable[[Record], bool | None]] = {
            "session": self._write_session,
            "compaction": self._write_compaction,
            "block_version": self._write_block_version,
            "block": self._write_block,
            "prompt": self._write_prompt,
            "search_entry": self._write_search_entry,
        }

    def write(self, record: Record) -> list[tuple[Record, bool | None]]:
        """Write ``record`` (a message may wait for the rest of its chain) and return the records
        whose outcome is now known, each with ``True`` if it was stored, ``False`` if it was there
        already, ``None`` if it holds nothing to store (a ``session`` record without a registry
        row). Call :meth:`flush` after the last record."""
        if record.kind == "message":
            chain = self._chain
            if chain and (
                chain[-1].session_id != record.session_id
                or record.data.get("parent_id") != chain[-1].message_id
                or len(chain) >= MESSAGE_BATCH
            ):
                done = self.flush()
                self._chain.append(record)
                return done
            chain.append(record)
            return []
        done = self.flush()
        text_field = _TEXT_FIELDS.get(record.kind)
        if self.redactor is not None and text_field is not None:
            text = redact_text(self.redactor, record.data[text_field])
            record = replace(record, data={**record.data, text_field: text})
        done.append((record, self._writes[record.kind](record)))
        return done

    def flush(self) -> list[tuple[Record, bool | None]]:
        """Write the waiting chain of messages; their outcomes."""
        chain, self._chain = self._chain, []
        if not chain:
            return []
        session_id = chain[0].session_id
        session = self._sessions.get(session_id)
        if session is None:
            session = self._sessions[session_id] = Session(self.store).for_session(session_id)
            if self.redactor is not None:
                session.with_redaction(self.redactor)
        stored = self.store.stored_message_ids(session_id, [r.message_id for r in chain])  # type: ignore[misc]
        outcomes: list[tuple[Record, bool | None]] = []
        parent_id, pending = chain[0].data.get("parent_id"), []
        for record in [*chain, None]:
            if record is None or record.message_id in stored:
                if pending:
                    items = [(message_of(r), r.created_at) for r in pending]
                    outcomes += zip(pending, session.import_messages(items, parent_id=parent_id))
                    pending = []
                if record is not None:
                    outcomes.append((record, False))
                    parent_id = record.message_id
            else:
                pending.append(record)
        return outcomes

    def _write_session(self, record: Record) -> bool | None:
        registry = record.data.get("registry")
        if registry is None:
            return None
        target = record.session_id
        existing = self.store.session_summaries([target])
        if existing and existing[0].registry is not None:
            return False
        if registry.get("storage_id") == target and registry.get("id"):
            namespace, ident = registry.get("namespace") or "", registry["id"]
        else:
            namespace, ident = target.split(":", 1) if ":" in target else ("", target)
        if self.store.get_session_row(namespace, ident) is not None:
            return False
        self.store.register_session(
            SessionRow(
                namespace,
                ident,
                target,
                registry["name"],
                registry.get("parent_session_id"),
                registry.get("model"),
                registry.get("source"),
                int(registry.get("input_tokens", 0)),
                int(registry.get("output_tokens", 0)),
                float(registry.get("estimated_cost", 0.0)),
                registry.get("end_reason"),
                to_us(parse_time(registry["created_at"], "created_at")),
                to_us(parse_time(registry["updated_at"], "updated_at")),
            )
        )
        return True

    def _write_compaction(self, record: Record) -> bool:
        data = record.data
        target = record.session_id
        ids = self.stored_compactions.get(target)
        if ids is None:
            ids = self.stored_compactions[target] = {c.id for c in self.store.get_compactions(target)}
        assert record.created_at is not None
        row = CompactionRow(
            data["id"], data["summary"], data["from_message_id"], data["to_message_id"], to_us(record.created_at)
        )
        if row.id in ids:
            return False
        if not self.store.import_compaction(target, row):
            # The id belongs to another session of this store (e.g. the original, when importing
            # into another id): store a copy under an id derived from both, the same on every import.
            row = row._replace(id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"session-memory:{target}:{row.id}")))
            if row.id in ids or not self.store.import_compaction(target, row):
                return False
        ids.add(row.id)
        return True

    def _write_block_version(self, record: Record) -> bool:
        data = record.data
        assert record.created_at is not None
        row = BlockVersionRow(
            data["version"], data["content"], to_us(record.created_at), data["source"], data.get("tool_call_id")
        )
        where = (record.session_id, data["label"], data["key"])
        if self.store.import_block_version(*where, row):
            self.imported_versions[where] = max(self.imported_versions.get(where, 0), row.version)
            return True
        return False

    def _write_block(self, record: Record) -> bool:
        label, content = record.data["label"], record.data["content"]
        if self.store.get_block(record.session_id, label) == content:
            # A store that keeps versions holds the block as its newest version: stored by this
            # import if its versions came first, present from before otherwise.
            return (record.session_id, label, "") in self.imported_versions
        updated = now_us() if record.updated_at is None else to_us(record.updated_at)
        self.store.import_block(record.session_id, label, content, updated)  # the block's next version
        return True

    def _write_prompt(self, record: Record) -> bool:
        prompt = record.data["prompt"]
        if self.store.get_cached_prompt(record.session_id) == prompt:
            return False
        self.store.set_cached_prompt(record.session_id, prompt)
        return True

    def _write_search_entry(self, record: Record) -> bool:
        data = record.data
        target = record.session_id
        entries = self.stored_entries.get(target)
        if entries is None:  # what the session holds already, read once
            entries = self.stored_entries[target] = {}
            after = 0
            while page := self.store.search_entry_rows(target, after, PAGE_ROWS):
                entries.update(((e.label, e.key), hashlib.sha256(e.content.encode()).digest()) for e in page)
                after = page[-1].seq
        key, digest = (data["label"], data["key"]), hashlib.sha256(data["content"].encode()).digest()
        if entries.get(key) == digest:
            return False
        now = now_us()
        created = now if record.created_at is None else to_us(record.created_at)
        updated = now if record.updated_at is None else to_us(record.updated_at)
        version = self.imported_versions.get((target, data["label"], data["key"]))
        if version is None:
            self.store.import_search_entry(target, data["label"], data["key"], data["content"], created, updated)
        else:
            self.store.write_block(
                target,
                data["label"],
                data["content"],
                key=data["key"],
                source="import",
                at_us=updated,
                created_at_us=created,
                version=version,
            )
        entries[key] = digest
        return True


def message_of(record: Record) -> SessionMessage:
    """The message of a ``message`` record, parsed now if the pass that made it did not."""
    if record.message is None:
        data = record.data
        record.message = _with_bytes(parse_message(data["message"]), data.get("binary_parts", []))
    return record.message


def _with_bytes(message: SessionMessage, binary_parts: Any) -> SessionMessage:
    """``message`` with the file parts at ``binary_parts`` holding bytes again (an export writes
    a file part's bytes as base64: JSON has no bytes)."""
    if not isinstance(binary_parts, list) or not all(type(i) is int for i in binary_parts):
        raise InvalidRecord("'binary_parts' must be a list of part indexes")
    if not binary_parts:
        return message
    parts = list(message.parts)
    for index in binary_parts:
        part = parts[index] if 0 <= index < len(parts) else None
        if not isinstance(part, FilePart) or not isinstance(part.data, str):
            raise InvalidRecord(f"'binary_parts': part {index} is not a file part with base64 data")
        try:
            data = base64.b64decode(part.data, validate=True)
        except binascii.Error as error:
            raise InvalidRecord(f"'binary_parts': part {index} holds invalid base64 ({error})") from None
        parts[index] = part.model_copy(update={"data": data})
    return message.model_copy(update={"parts": parts})
