"""A store written against the required contract alone (``RequiredStore``'s thirteen abstract
methods, no optional capability) passes the kit's required tests; the tests of optional
capabilities skip, naming what the store lacks."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterable, Iterator, Sequence
from datetime import timedelta

import pytest

from sessions_core import Session, SessionManager, SqliteStore, UnsupportedOperationError
from sessions_core.stores import LATEST, RecordErasure, RequiredStore, Store, capabilities, supports
from sessions_core.stores.base import (
    CompactionRow,
    Inserted,
    MessageRecord,
    MessageRow,
    PathEntry,
    PathTotals,
    StoredContent,
    _Latest,
)
from sessions_core.testing import Backend, drive, make_manager, make_session, mode  # noqa: F401
from sessions_core.testing.attachments import *  # noqa: F403
from sessions_core.testing.batch_append import *  # noqa: F403
from sessions_core.testing.builders import msg
from sessions_core.testing.compaction import *  # noqa: F403
from sessions_core.testing.context import *  # noqa: F403
from sessions_core.testing.feed import *  # noqa: F403
from sessions_core.testing.history import *  # noqa: F403
from sessions_core.testing.manager import *  # noqa: F403
from sessions_core.testing.retention import *  # noqa: F403
from sessions_core.testing.search import *  # noqa: F403
from sessions_core.testing.versions import *  # noqa: F403
from sessions_core.transfer import export_session


class _Row:
    __slots__ = ("seq", "record", "parent_id")

    def __init__(self, seq: int, record: MessageRecord, parent_id: str | None) -> None:
        self.seq, self.record, self.parent_id = seq, record, parent_id


class DictStore(Store):
    """Sessions in dicts, one lock: the required methods and nothing else."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._seq = itertools.count(1)
        self._messages: dict[str, dict[str, _Row]] = {}
        self._by_seq: dict[int, _Row] = {}
        self._compactions: dict[str, list[CompactionRow]] = {}
        self._blocks: dict[str, dict[str, str]] = {}

    def _rows(self, session_id: str) -> dict[str, _Row]:
        return self._messages.setdefault(session_id, {})

    def _message_row(self, row: _Row) -> MessageRow:
        r = row.record
        return MessageRow(r.id, row.parent_id, r.role, r.created_at_us, r.content)

    def insert_messages(
        self, session_id: str, records: Sequence[MessageRecord], parent_id: str | None | _Latest
    ) -> list[Inserted | None]:
        for record in records:  # all or nothing: refuse the batch before storing any of it
            if not all(isinstance(value, str) for value in (record.id, record.role, record.content)):
                raise TypeError(f"record {record.id!r} has a field of the wrong type")
        with self._lock:
            rows = self._rows(session_id)
            if parent_id is LATEST:
                leaf = self.latest_leaf(session_id)
                parent_id = leaf.id if leaf else None
            elif parent_id is not None and parent_id not in rows:
                parent_id = None
            results: list[Inserted | None] = []
            for record in records:
                if record.id in rows:
                    results.append(None)
                else:
                    row = _Row(next(self._seq), record, parent_id)  # type: ignore[arg-type]
                    rows[record.id] = row
                    self._by_seq[row.seq] = row
                    totals = PathTotals(*self._totals(session_id, record.id))
                    results.append(Inserted(parent_id, totals))  # type: ignore[arg-type]
                parent_id = record.id
            return results

    def _totals(self, session_id: str, leaf_id: str) -> tuple[int, int, int]:
        path = self.path(session_id, leaf_id)
        return len(path), sum(e.tokens for e in path), sum(e.size for e in path)

    def update_message(self, session_id: str, record: MessageRecord) -> bool:
        with self._lock:
            row = self._rows(session_id).get(record.id)
            if row is None:
                return False
            row.record = MessageRecord(
                record.id, record.role, record.content, record.text, record.tokens, row.record.created_at_us
            )
            return True

    def delete_messages(self, session_id: str, ids: Iterable[str]) -> list[str]:
        with self._lock:
            rows = self._rows(session_id)
            deleted = [i for i in dict.fromkeys(ids) if i in rows]
            for message_id in deleted:
                self._by_seq.pop(rows.pop(message_id).seq)
            for row in rows.values():
                if row.parent_id in deleted:
                    row.parent_id = None
            return deleted

    def clear_session(self, session_id: str) -> None:
        with self._lock:
            for row in self._messages.pop(session_id, {}).values():
                self._by_seq.pop(row.seq)
            self._compactions.pop(session_id, None)

    def get_message(self, session_id: str, message_id: str) -> MessageRow | None:
        row = self._rows(session_id).get(message_id)
        return self._message_row(row) if row else None

    def latest_leaf(self, session_id: str) -> MessageRow | None:
        with self._lock:
            rows = self._rows(session_id)
            parents = {row.parent_id for row in rows.values()}
            leaves = [row for row in rows.values() if row.record.id not in parents]
            if not leaves:
                return None
            return self._message_row(max(leaves, key=lambda row: (row.record.created_at_us, row.seq)))

    def children(self, session_id: str, message_id: str) -> list[MessageRow]:
        rows = [row for row in self._rows(session_id).values() if row.parent_id == message_id]
        return [self._message_row(row) for row in sorted(rows, key=lambda row: (row.record.created_at_us, row.seq))]

    def path(self, session_id: str, leaf_id: str) -> list[PathEntry]:
        with self._lock:
            rows = self._rows(session_id)
            path: list[PathEntry] = []
            row = rows.get(leaf_id)
            while row is not None:
                r = row.record
                path.append(PathEntry(row.seq, r.id, r.role, r.size, r.tokens))
                row = rows.get(row.parent_id) if row.parent_id is not None else None
            return path[::-1]

    def fetch_contents(self, seqs: Sequence[int]) -> dict[int, StoredContent]:
        found = {seq: self._by_seq.get(seq) for seq in seqs}
        return {seq: StoredContent(row.record.created_at_us, row.record.content) for seq, row in found.items() if row}

    def add_compaction(self, session_id: str, row: CompactionRow) -> None:
        with self._lock:
            self._compactions.setdefault(session_id, []).append(row)

    def get_compactions(self, session_id: str) -> list[CompactionRow]:
        return sorted(self._compactions.get(session_id, []), key=lambda row: row.created_at_us)

    def get_blocks(self, session_id: str, labels: Sequence[str]) -> dict[str, str]:
        blocks = self._blocks.get(session_id, {})
        return {label: blocks[label] for label in labels if label in blocks}

    def write_block(self, session_id: str, label: str, content: str, **_: object) -> int | None:
        with self._lock:
            self._blocks.setdefault(session_id, {})[label] = content
        return None


@pytest.fixture
def backend() -> Iterator[Backend]:
    store = DictStore()
    yield Backend("dict-store", lambda: store, persistent=False)


def test_the_required_contract_is_at_most_fifteen_methods():
    required = {
        name for name in vars(RequiredStore) if not name.startswith("_") and callable(vars(RequiredStore)[name])
    }
    assert RequiredStore.__abstractmethods__ <= required
    assert len(required) <= 15, sorted(required)
    assert Store.__abstractmethods__ == RequiredStore.__abstractmethods__


def test_the_minimal_store_declares_no_optional_capability():
    assert capabilities(DictStore()) == frozenset()


def test_capabilities_are_detected_by_override():
    class WithSearch(DictStore):
        def search_messages(self, session_ids, query, limit, match="any"):
            return []

    class HalfAPromptCache(DictStore):
        def get_cached_prompt(self, session_id):
            return None

    assert capabilities(WithSearch()) == {"TextSearch"}
    assert supports(WithSearch(), "TextSearch") and not supports(DictStore(), "TextSearch")
    assert not supports(HalfAPromptCache(), "PromptCache")  # every method of it, or it is not declared
    with pytest.raises(ValueError, match="unknown store capability"):
        supports(DictStore(), "Teleport")


def test_a_feature_without_its_capability_names_what_the_store_lacks():
    session = Session(DictStore()).for_session("s")
    with pytest.raises(UnsupportedOperationError, match="TextSearch"):
        session.search("anything")
    with pytest.raises(UnsupportedOperationError, match="SessionRegistry"):
        SessionManager(DictStore()).create("first")
    with pytest.raises(NotImplementedError):  # still the built-in for callers catching it
        SessionManager(DictStore()).list_sessions()
    with pytest.raises(UnsupportedOperationError, match="InspectableStore"):
        list(export_session(DictStore(), "s"))
    with pytest.raises(UnsupportedOperationError, match="SessionErasure"):
        SessionManager(DictStore()).prune(timedelta(days=1))
    with pytest.raises(UnsupportedOperationError, match="SessionErasure"):
        session.erase()
    with pytest.raises(UnsupportedOperationError, match="SessionErasure"):
        Session(DictStore(), retention=timedelta(days=1))
    with pytest.raises(UnsupportedOperationError, match="SessionErasure"):
        session.erase_messages(["m1"])
    with pytest.raises(UnsupportedOperationError, match="SessionErasure"):
        session.erase_context("memory")


def test_a_store_erasing_sessions_but_not_records_refuses_erase_messages_and_keeps_them():
    class SessionsOnly(SqliteStore):  # one of its methods left out: no RecordErasure
        remove_messages = RecordErasure.remove_messages

    store = SessionsOnly(":memory:")
    assert "SessionErasure" in capabilities(store) and "RecordErasure" not in capabilities(store)
    session = Session(store).for_session("s")
    session.append_message(msg("m1", "kept"))
    with pytest.raises(UnsupportedOperationError, match="RecordErasure"):
        session.erase_messages(["m1"])
    with pytest.raises(UnsupportedOperationError, match="RecordErasure"):
        session.erase_context("memory")
    assert [m.id for m in session.get_history()] == ["m1"]
    assert session.erase().counts.messages == 1  # erasing whole sessions still works


def test_attachments_stay_inline_in_a_store_without_blobs():
    store = DictStore()
    session = Session(store).for_session("s")
    data = "aGVsbG8=" * 100_000
    session.append_message(
        {"id": "m1", "role": "user", "parts": [{"type": "file", "mediaType": "image/png", "data": data}]}
    )
    assert data in store.get_message("s", "m1").content
    assert session.get_history()[0].parts[0].data == data
