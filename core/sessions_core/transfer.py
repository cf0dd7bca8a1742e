"""Export and import of sessions: the JSON Lines format ``sessions export`` writes and
``sessions import`` reads, as a Python API.

An export is one record (a JSON object) a line, each with a ``kind`` and the ``session_id``:
``session`` (the format and the manager registry row, if any), every ``message`` (parents before
children), then ``compaction``, ``block_version`` (every kept version of the blocks and entries),
``block``, ``prompt`` and ``search_entry`` records. Both ends
need a store with the optional inspection capability
(:class:`~sessions_core.stores.base.InspectableStore`); another store raises ``StoreError``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from ._time import from_us
from .attachments import BLOB_PREFIX, INLINE_PREFIX, restore_payloads
from .errors import (
    ConflictError,
    InvalidInputError,
    InvalidRecordError,
    MessageValidationError,
    SessionNotFoundError,
)
from .messages import FilePart, parse_message
from .stores.base import (
    BlobStore,
    InspectableStore,
    MessageRow,
    SessionRow,
    SessionSummary,
    Store,
    inspectable,
    supports,
)
from .transfer_records import (
    EXPORT_FORMAT,
    PAGE_ROWS,
    RECORD_KINDS,
    InvalidRecord,
    Record,
    RecordChecker,
    RecordWriter,
)

__all__ = [
    "EXPORT_FORMAT",
    "RECORD_KINDS",
    "FileLines",
    "ImportReport",
    "export_lines",
    "export_session",
    "import_into_new",
    "import_records",
    "record_line",
]


# -- export --------------------------------------------------------------------------------------


def export_session(
    store: Store, session_id: str, *, on_skipped: Callable[[str], None] | None = None
) -> Iterator[dict[str, Any]]:
    """The export records of one session, read page by page as they are iterated.

    Messages come parents first, whatever their times. A message row that no longer parses
    (every read skips it) is left out, ``on_skipped`` is called with its id, and its children
    hang from its parent. Payloads kept outside the rows are put back inline (bytes as base64).
    Raises at once, before anything is read: ``StoreError`` if the store cannot be inspected,
    ``SessionNotFoundError`` if it holds nothing under ``session_id``.
    """
    source = inspectable(store)
    found = source.session_summaries([session_id])
    if not found:
        raise SessionNotFoundError(f"unknown session {session_id!r}: the store holds nothing under that id")
    return _records(source, found[0], on_skipped)


def record_line(record: dict[str, Any]) -> str:
    """One record as its line of the JSON Lines format (compact, UTF-8 text, ending in ``\\n``)."""
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def export_lines(store: Store, session_id: str, *, on_skipped: Callable[[str], None] | None = None) -> Iterator[str]:
    """:func:`export_session` as the lines of the file (what ``sessions export`` writes)."""
    return map(record_line, export_session(store, session_id, on_skipped=on_skipped))


def _iso(us: int) -> str:
    return from_us(us).isoformat()


def _registry_json(row: SessionRow) -> dict[str, Any]:
    data = row._asdict()
    data["created_at"] = _iso(row.created_at_us)
    data["updated_at"] = _iso(row.updated_at_us)
    return data


def _records(
    store: InspectableStore, summary: SessionSummary, on_skipped: Callable[[str], None] | None
) -> Iterator[dict[str, Any]]:
    session_id = summary.session_id
    yield {
        "kind": "session",
        "format": EXPORT_FORMAT,
        "session_id": session_id,
        "exported_at": datetime.now(timezone.utc).isoformat(),
        "registry": None if summary.registry is None else _registry_json(summary.registry),
    }
    yield from _message_records(store, session_id, on_skipped)
    for compaction in store.get_compactions(session_id):
        yield {
            "kind": "compaction",
            "session_id": session_id,
            "id": compaction.id,
            "from_message_id": compaction.from_message_id,
            "to_message_id": compaction.to_message_id,
            "created_at": _iso(compaction.created_at_us),
            "summary": compaction.summary,
        }
    for label, key, version in store.block_version_rows(session_id):  # before the blocks they lead to
        yield {
            "kind": "block_version",
            "session_id": session_id,
            "label": label,
            "key": key,
            "version": version.version,
            "content": version.content,
            "created_at": _iso(version.created_at_us),
            "source": version.source,
            "tool_call_id": version.tool_call_id,
        }
    for block in store.list_blocks(session_id):
        yield {
            "kind": "block",
            "session_id": session_id,
            "label": block.label,
            "content": block.content,
            "updated_at": _iso(block.updated_at_us),
        }
    prompt = store.get_cached_prompt(session_id)
    if prompt is not None:
        yield {"kind": "prompt", "session_id": session_id, "prompt": prompt}
    after = 0
    while entries := store.search_entry_rows(session_id, after, PAGE_ROWS):
        for entry in entries:
            yield {
                "kind": "search_entry",
                "session_id": session_id,
                "label": entry.label,
                "key": entry.key,
                "content": entry.content,
                "created_at": _iso(entry.created_at_us),
                "updated_at": _iso(entry.updated_at_us),
            }
        after = entries[-1].seq


def _message_records(
    store: InspectableStore, session_id: str, on_skipped: Callable[[str], None] | None
) -> Iterator[dict[str, Any]]:
    """The ``message`` records, each held back until its parent is written."""
    emitted: set[str] = set()
    dropped: dict[str, str | None] = {}  # an unreadable row's id -> its parent
    waiting: dict[str, list[MessageRow]] = {}  # a parent not yet written -> its rows

    def resolve(parent: str | None) -> str | None:
        seen = set()
        while parent in dropped and parent not in seen:
            seen.add(parent)
            parent = dropped[parent]
        return parent

    def release(row: MessageRow) -> Iterator[dict[str, Any]]:
        stack = [row]
        while stack:
            current = stack.pop()
            parent = resolve(current.parent_id)
            if parent is not None and parent not in emitted:
                waiting.setdefault(parent, []).append(current)
                continue
            try:
                data = json.loads(current.content)
                message = parse_message(data)
                if BLOB_PREFIX in current.content or INLINE_PREFIX in current.content:
                    # put payloads back (bytes are exported as base64)
                    fetch = store.get_blobs if supports(store, BlobStore) else None
                    message = restore_payloads([message], fetch)[0]
                    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"created_at"})
            except (ValueError, MessageValidationError):
                dropped[current.id] = parent
                if on_skipped is not None:
                    on_skipped(current.id)
                stack.extend(reversed(waiting.pop(current.id, [])))
                continue
            emitted.add(current.id)
            record = {
                "kind": "message",
                "session_id": session_id,
                "id": current.id,
                "parent_id": parent,
                "created_at": _iso(current.created_at_us),
                "message": data,
            }
            binary = [
                i for i, part in enumerate(message.parts) if isinstance(part, FilePart) and isinstance(part.data, bytes)
            ]
            if binary:  # JSON has no bytes: these parts' base64 data is bytes again on import
                record["binary_parts"] = binary
            yield record
            stack.extend(reversed(waiting.pop(current.id, [])))

    after = 0
    while page := store.message_rows(session_id, after, PAGE_ROWS):
        for _seq, row in page:
            yield from release(row)
        after = page[-1][0]
    while waiting:  # a parent that never came (deleted meanwhile): its children become roots
        parent_id, rows = next(iter(waiting.items()))
        del waiting[parent_id]
        dropped[parent_id] = None
        for row in rows:
            yield from release(row)


# -- import --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ImportReport:
    """What :func:`import_records` found and did."""

    records: int
    """Records read (blank lines are not records)."""
    sessions: tuple[str, ...]
    """The sessions the records go to, sorted."""
    stored: dict[str, int] = field(default_factory=dict)
    """Rows written, by record kind (``"session"`` counts registry rows); empty on a dry run."""
    present: dict[str, int] = field(default_factory=dict)
    """Rows that were stored already (nothing written), by record kind; conflicts not counted."""
    dry_run: bool = False
    conflicts: tuple[tuple[str, str], ...] = ()
    """``(session id, message id)`` of each message stored already with other content, which
    ``skip_conflicts=True`` left as stored."""


def _conflict_error(conflicts: Sequence[tuple[str, str]], *, hint: str) -> ConflictError:
    """The ``ConflictError`` for messages stored already with other content, naming them (the
    first 10 ids of each session); ``error.conflicts`` holds them all."""
    by_session: dict[str, list[str]] = {}
    for session_id, message_id in conflicts:
        by_session.setdefault(session_id, []).append(message_id)
    named = []
    for session_id, ids in by_session.items():
        shown = ", ".join(repr(i) for i in ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        named.append(f"{session_id!r}: {shown}")
    count = len(conflicts)
    error = ConflictError(
        f"{count} message{'s' if count != 1 else ''} of the input {'are' if count != 1 else 'is'} stored already"
        f" with other content ({'; '.join(named)}); nothing was imported ({hint})"
    )
    error.conflicts = tuple(conflicts)  # type: ignore[attr-defined]
    return error


class FileLines:
    """The lines of a file as ``bytes``, read afresh each time it is iterated: an input that
    :func:`import_records` reads twice without holding it in memory."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = path

    def __iter__(self) -> Iterator[bytes]:
        with open(self.path, "rb") as stream:
            yield from stream


def import_records(
    store: Store,
    records: Iterable[dict[str, Any] | str | bytes],
    *,
    into: str | None = None,
    dry_run: bool = False,
    redactor: Any = None,
    skip_conflicts: bool = False,
) -> ImportReport:
    """Import export records (dicts) or lines of an export (``str``, or UTF-8 ``bytes``) into ``store``.

    Every record is checked before anything is written: the first bad one raises
    ``InvalidRecordError`` naming its 1-based position (blank lines count, as lines of a file)
    and the store is left as it was. A message's parent must be earlier in the input or stored
    already. Ids, parents, times (of messages, blocks and search entries) and bytes are kept.
    Idempotent: what is stored already is not written again (it is counted in
    ``ImportReport.present``). ``into`` imports the records of one session under another session
    id; ``dry_run`` only checks; ``redactor`` redacts every text before it is written
    (``Session.with_redaction``). ``records`` is read twice (check, then write): a one-shot
    iterator (a generator, an open file) is held in memory between the two, a list or
    :class:`FileLines` is not. A message whose id is stored already with other content (role,
    parts or metadata) is a conflict: ``ConflictError`` naming them (``error.conflicts``) and
    nothing written, or with ``skip_conflicts`` the stored messages kept and the rest imported
    (``ImportReport.conflicts``). ``StoreError`` if the store cannot be inspected;
    ``ValueError`` for an empty ``into``; ``TypeError`` for one string instead of lines.
    """
    _check_arguments(records, into)
    target = inspectable(store)
    if iter(records) is records:
        records = list(records)
    count, sessions = 0, set()
    checker = RecordChecker(target, into, redactor=redactor)
    for record in _checked(checker, records):
        count += 1
        sessions.add(record.session_id)
    checker.finish()
    conflicts = tuple(checker.conflicts)
    if conflicts and not skip_conflicts:
        raise _conflict_error(conflicts, hint="skip_conflicts=True keeps the stored ones and imports the rest")
    if dry_run:
        return ImportReport(count, tuple(sorted(sessions)), dry_run=True, conflicts=conflicts)
    stored, present = _write_records(target, _checked(RecordChecker(target, into, checked=True), records), redactor)
    if conflicts:
        present["message"] -= len(conflicts)
        if not present["message"]:
            del present["message"]
    return ImportReport(count, tuple(sorted(sessions)), stored, present, conflicts=conflicts)


def import_into_new(
    store: Store, records: Iterable[dict[str, Any] | str | bytes], *, into: str | None = None, redactor: Any = None
) -> ImportReport:
    """:func:`import_records` in one pass, into a store that holds nothing yet and is thrown away
    if this raises (``sessions import`` builds a new database file this way, beside its final
    name): each record is checked as it is written, so the first bad one raises
    ``InvalidRecordError`` with the records before it written."""
    _check_arguments(records, into)
    target = inspectable(store)
    sessions: set[str] = set()
    count = 0

    def counted(checked: Iterable[Record]) -> Iterator[Record]:
        nonlocal count
        for record in checked:
            count += 1
            sessions.add(record.session_id)
            yield record

    stored, present = _write_records(target, counted(_checked(RecordChecker(target, into), records)), redactor)
    return ImportReport(count, tuple(sorted(sessions)), stored, present)


def _check_arguments(records: Any, into: str | None) -> None:
    if into is not None and not into:
        raise InvalidInputError("into must be a non-empty session id")
    if isinstance(records, (str, bytes)):
        raise TypeError("records must be an iterable of records or lines, not one string (split it into lines)")


def _write_records(
    store: InspectableStore, records: Iterable[Record], redactor: Any = None
) -> tuple[dict[str, int], dict[str, int]]:
    """Write checked records; what was stored and what was present already, by kind."""
    writer = RecordWriter(store, redactor)
    stored: dict[str, int] = {}
    present: dict[str, int] = {}

    def tally_up(outcomes: list[tuple[Any, bool | None]]) -> None:
        for record, outcome in outcomes:
            if outcome is not None:
                tally = stored if outcome else present
                tally[record.kind] = tally.get(record.kind, 0) + 1

    for record in records:
        tally_up(writer.write(record))
    tally_up(writer.flush())
    return stored, present


def _checked(checker: RecordChecker, records: Iterable[Any]) -> Iterator[Record]:
    for line, item in enumerate(records, 1):
        try:
            record = checker.check(line, item)
        except InvalidRecord as error:
            raise InvalidRecordError(line, str(error)) from None
        if record is not None:
            yield record
