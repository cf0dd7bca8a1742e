"""Checkpoints contract (``CheckpointStore``, ``sessions_core.checkpoints``): a thread is a
session of the manager's namespace; a checkpoint and its pending writes are read back whole in
one call, the latest by id; writes are replaced or kept as asked; listing filters by thread,
checkpoint namespace, metadata, ``before`` and ``limit``, newest first, across pages; deleting a
thread removes its checkpoints (or, asked to, erases its whole session), copying keeps ids,
a checkpoint's ancestors are read by pages along its parents,
runs and prunes remove exactly what they name; removing a session removes its checkpoints;
bad input changes nothing. A store without the capability skips it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sessions_core import ConflictError, InvalidInputError, InvalidTextError, SessionManager
from sessions_core.checkpoints import LIST_PAGE, CheckpointRow, Checkpoints, CheckpointWrite

from .builders import msg
from .harness import AsyncDriver, short_lists, skip_where_unsupported


def raw(obj: Any) -> Any:
    """The object behind an async driver (the object itself in sync mode)."""
    return getattr(obj, "target", obj)


def _checkpoints(drive: Any, manager: Any, **options: Any) -> Any:
    return drive(Checkpoints(raw(manager), **options))


def _listed(cp: Any, thread_id: str | None = None, **options: Any) -> list[CheckpointRow]:
    """``list_checkpoints`` in the test's mode (the async generator drained on its loop)."""
    if isinstance(cp, AsyncDriver):

        async def drain() -> list[CheckpointRow]:
            return [row async for row in raw(cp).alist_checkpoints(thread_id, **options)]

        return cp._loop.run_until_complete(drain())
    return list(cp.list_checkpoints(thread_id, **options))


def _ids(rows: list[CheckpointRow]) -> list[str]:
    return [row.checkpoint_id for row in rows]


def _row(thread_id: str, checkpoint_id: str, parent: str | None = None, ns: str = "", **metadata: Any) -> CheckpointRow:
    data = f"state of {thread_id}/{ns}/{checkpoint_id}".encode()
    return CheckpointRow(thread_id, ns, checkpoint_id, parent, "bytes", data, json.dumps(metadata))


def _chain(cp: Any, thread_id: str, count: int, ns: str = "", run: str | None = None) -> list[str]:
    ids, parent = [], None
    for n in range(count):
        checkpoint_id = f"{n:04d}-{ns or 'root'}"
        cp.put(_row(thread_id, checkpoint_id, parent, ns, step=n), run_id=run)
        ids.append(checkpoint_id)
        parent = checkpoint_id
    return ids


def test_a_checkpoint_reads_back_whole_with_its_writes_and_the_latest_wins(make_manager, drive):
    m = make_manager(namespace="app")
    cp = _checkpoints(drive, m)
    assert cp.get("t1") is None
    _chain(cp, "t1", 3)
    cp.put_writes(
        "t1",
        "",
        "0002-root",
        [
            CheckpointWrite("task", 0, "messages", "bytes", b"\x00\xff"),
            CheckpointWrite("task", 1, "x", "null", None, "~1"),
        ],
    )
    latest = cp.get("t1")
    assert latest is not None and latest.checkpoint_id == "0002-root" and latest.parent_checkpoint_id == "0001-root"
    assert latest.checkpoint == b"state of t1//0002-root" and json.loads(latest.metadata) == {"step": 2}
    assert sorted(latest.writes) == [
        CheckpointWrite("task", 0, "messages", "bytes", b"\x00\xff", ""),
        CheckpointWrite("task", 1, "x", "null", None, "~1"),
    ]
    first = cp.get("t1", "", "0000-root")
    assert first is not None and first.parent_checkpoint_id is None and first.writes == ()
    assert cp.get("t1", "", "missing") is None and cp.get("t1", "child") is None and cp.get("other") is None
    # A put with the same ids replaces the checkpoint and keeps its writes.
    cp.put(CheckpointRow("t1", "", "0002-root", "0001-root", "bytes", b"new", "{}"))
    again = cp.get("t1")
    assert again is not None and again.checkpoint == b"new" and len(again.writes) == 2


def test_ancestors_follow_parents_nearest_first_with_their_writes_by_pages(make_manager, drive):
    cp = _checkpoints(drive, make_manager(namespace="app"))
    ids = _chain(cp, "t", 6)
    cp.put(_row("t", "fork", ids[2]))  # a fork's ancestors are those on its own path
    cp.put(_row("t", "orphan", "never-stored"))
    cp.put_writes("t", "", ids[3], [CheckpointWrite("task", 0, "messages", "bytes", b"w3", "~p")])
    cp.put_writes("t", "", ids[4], [CheckpointWrite("task", 1, "x", "null", None)])
    page = cp.ancestors("t", "", ids[5], 4)
    assert _ids(page) == [ids[5], ids[4], ids[3], ids[2]]
    assert page[0] == cp.get("t", "", ids[5])  # each row as get reads it
    assert page[1].writes == (CheckpointWrite("task", 1, "x", "null", None, ""),)
    assert page[2].writes == (CheckpointWrite("task", 0, "messages", "bytes", b"w3", "~p"),)
    only = cp.ancestors("t", "", ids[5], 4, ["messages", "absent"])  # the writes to some channels only
    assert _ids(only) == _ids(page) and [row.writes for row in only[1:3]] == [(), page[2].writes]
    assert all(row.writes == () for row in cp.ancestors("t", "", ids[5], 4, []))
    assert _ids(cp.ancestors("t", "", page[-1].parent_checkpoint_id, 100)) == [ids[1], ids[0]]  # the next page
    assert _ids(cp.ancestors("t", "", "fork", 100)) == ["fork", ids[2], ids[1], ids[0]]
    assert _ids(cp.ancestors("t", "", "orphan", 100)) == ["orphan"]  # a parent not stored ends the chain
    assert cp.ancestors("t", "", "missing", 10) == [] and cp.ancestors("other", "", ids[5], 10) == []
    assert cp.ancestors("t", "child", ids[5], 10) == []  # another checkpoint namespace
    cp.put(_row("t", ids[0], ids[5]))  # put again under its descendant: the chain loops
    assert _ids(cp.ancestors("t", "", ids[1], 5)) == [ids[1], ids[0], ids[5], ids[4], ids[3]]  # up to the limit
    for bad in ({"limit": 0}, {"channels": [3]}, {"channels": ["x"] * 101}):
        with pytest.raises(InvalidInputError):
            cp.ancestors("t", "", ids[5], bad.get("limit", 5), bad.get("channels"))


def test_a_thread_is_a_session_of_the_managers_namespace(make_manager, drive, backend):
    store = backend.open()
    try:
        m = make_manager(namespace="app", store=store)
        other = make_manager(namespace="other", store=store)
        cp, elsewhere = _checkpoints(drive, m), _checkpoints(drive, other)
        _chain(cp, "user-42", 2)
        _chain(cp, "a:b", 1)
        assert sorted(info.id for info in m.list_sessions()) == ["a:b", "user-42"]
        assert other.list_sessions() == [] and elsewhere.get("user-42") is None
        assert _listed(elsewhere) == [] and _ids(_listed(cp)) == ["0001-root", "0000-root", "0000-root"]
        # The memory of a thread is the session's: messages stored through the manager are
        # found by search, beside the checkpoints of the same id.
        m.append("user-42", msg("u1", "the blue heron nests by the lake"))
        assert [hit.session_id for hit in m.search("heron")] == ["user-42"]
        assert m.get_message_count("user-42") == 1
        # A session registered first keeps its registry row.
        m.rename("user-42", "Ada's chat")
        _chain(cp, "user-42", 3)
        assert m.get("user-42").name == "Ada's chat"
        # So it does when the thread's first checkpoint of a new Checkpoints registers it.
        before = m.get("user-42")
        _chain(_checkpoints(drive, m), "user-42", 1, ns="again")
        info = m.get("user-42")
        assert (info.name, info.created_at) == ("Ada's chat", before.created_at)
        assert sorted(info.id for info in m.list_sessions()) == ["a:b", "user-42"]
        # A session removed since its thread's first checkpoint is registered again by the next.
        m.delete("a:b")
        _chain(cp, "a:b", 1)
        assert m.get("a:b") is not None and [row.thread_id for row in _listed(cp, "a:b")] == ["a:b"]
    finally:
        store.close()


def test_a_second_store_on_the_database_sees_the_checkpoints(persistent_backend, drive):
    first = SessionManager(persistent_backend.open())
    _chain(drive(Checkpoints(first)), "t", 2)
    first.close()
    first.store.close()
    second = SessionManager(persistent_backend.open())
    try:
        found = drive(Checkpoints(second)).get("t")
        assert found is not None and found.checkpoint_id == "0001-root"
        assert [info.id for info in second.list_sessions()] == ["t"]
    finally:
        second.store.close()


def test_writes_are_replaced_or_kept_as_asked_and_stored_atomically(make_manager, drive):
    cp = _checkpoints(drive, make_manager())
    _chain(cp, "t", 1)
    cp.put_writes("t", "", "0000-root", [CheckpointWrite("a", 0, "ch", "s", b"one")])
    cp.put_writes("t", "", "0000-root", [CheckpointWrite("a", 0, "ch", "s", b"two")])
    assert [w.value for w in cp.get("t").writes] == [b"one"]
    cp.put_writes("t", "", "0000-root", [CheckpointWrite("a", 0, "__error__", "s", b"three")], replace=True)
    assert [(w.channel, w.value) for w in cp.get("t").writes] == [("__error__", b"three")]
    many = [CheckpointWrite("b", n, f"ch{n}", "s", str(n).encode()) for n in range(250)]
    cp.put_writes("t", "", "0000-root", many)
    assert len(cp.get("t").writes) == 251
    broken = [CheckpointWrite("c", n, "ch", "s", b"v") for n in range(150)] + [
        CheckpointWrite("c\ud800", 0, "ch", "s", b"v")
    ]
    with pytest.raises(InvalidTextError):  # the second statement of the batch fails
        cp.put_writes("t", "", "0000-root", broken)
    assert len(cp.get("t").writes) == 251  # nothing of the failed batch


def test_listing_filters_orders_newest_first_and_pages(make_manager, drive):
    cp = _checkpoints(drive, make_manager())
    root = _chain(cp, "t", 4)
    child = _chain(cp, "t", 2, ns="child:1")
    _chain(cp, "u", 1)
    cp.put(_row("t", "9999-root", root[-1], source="input", score=42, ok=True, none=None, tags={"a": [1, "b"]}))
    cp.put_writes("t", "", "9999-root", [CheckpointWrite("task", 0, "ch", "s", b"v")])
    listed = _listed(cp, "t", checkpoint_ns="")
    assert _ids(listed) == ["9999-root", *reversed(root)]
    assert [len(row.writes) for row in listed] == [1, 0, 0, 0, 0]
    assert _ids(_listed(cp, "t")) == sorted([*root, *child, "9999-root"], reverse=True)
    assert _ids(_listed(cp, "t", checkpoint_ns="child:1")) == list(reversed(child))
    assert _ids(_listed(cp, "t", checkpoint_id=root[1])) == [root[1]]
    for metadata in ({"source": "input"}, {"score": 42}, {"ok": True}, {"none": None}, {"tags": {"a": [1, "b"]}}):
        assert _ids(_listed(cp, "t", metadata=metadata)) == ["9999-root"], metadata
    assert _ids(_listed(cp, "t", metadata={"step": 1})) == ["0001-root", "0001-child:1"]
    assert _listed(cp, "t", metadata={"step": "1"}) == [] and _listed(cp, "t", metadata={"ok": 1}) == []
    assert _listed(cp, "t", metadata={"source": "input", "score": 41}) == []
    assert _ids(_listed(cp, "t", checkpoint_ns="", before=root[2])) == [root[1], root[0]]
    assert _ids(_listed(cp, "t", checkpoint_ns="", before=root[2], limit=1)) == [root[1]]
    assert _listed(cp, "t", limit=0) == []
    assert _ids(_listed(cp)) == sorted([*root, *child, "9999-root", "0000-root"], reverse=True)
    # More than a page: every checkpoint once, in order.
    many = _chain(cp, "long", LIST_PAGE * 2 + 5)
    assert _ids(_listed(cp, "long")) == list(reversed(many))
    assert _ids(_listed(cp, "long", limit=LIST_PAGE + 1)) == list(reversed(many))[: LIST_PAGE + 1]


def test_deleting_a_thread_removes_its_checkpoints_or_erases_its_session(make_manager, drive):
    m = make_manager()
    cp = _checkpoints(drive, m)
    _chain(cp, "t", 2)
    _chain(cp, "keep", 1)
    cp.put_writes("t", "", "0001-root", [CheckpointWrite("a", 0, "ch", "s", b"v")])
    m.append("t", msg("u1", "remember the heron"))
    cp.delete_thread("t")
    assert cp.get("t") is None and _listed(cp, "t") == []
    assert m.get("t") is not None and m.get_message_count("t") == 1  # the session stays
    cp.delete_thread("never-seen")
    _chain(cp, "t", 1)
    erasing = _checkpoints(drive, m, erase_sessions=True)
    erasing.delete_thread("t")
    assert m.get("t") is None and m.get_message_count("t") == 0 and cp.get("t") is None
    assert m.search("heron") == []
    assert cp.get("keep") is not None and m.get("keep") is not None


def test_removing_a_session_removes_its_checkpoints(make_manager, drive):
    m = make_manager()
    cp = _checkpoints(drive, m)
    _chain(cp, "t", 3)
    cp.put_writes("t", "", "0002-root", [CheckpointWrite("a", 0, "ch", "s", b"v")])
    store = raw(m).store
    counts = store.count_session_rows([raw(m).storage_id("t")])
    assert (counts.registry, counts.checkpoints, counts.checkpoint_writes) == (1, 3, 1)
    assert m.delete("t") and cp.get("t") is None
    _chain(cp, "u", 1)
    result = m.erase("u")
    assert result.counts.checkpoints == 1 and cp.get("u") is None


def _erase_marked(kind: str, data: bytes, ids: frozenset[str]) -> tuple[str, bytes] | None:
    """A saver's rewrite of these tests: a value naming an erased id loses it."""
    kept = data
    for message_id in ids:
        kept = kept.replace(message_id.encode(), b"")
    return None if kept == data else ("erased-" + kind, kept)


def test_erasing_messages_takes_them_out_of_the_threads_checkpoints_first(make_manager, drive):
    m = make_manager()
    cp = _checkpoints(drive, m)
    for n, parent in ((0, None), (1, "0000-root"), (LIST_PAGE + 1, "0001-root")):
        name = f"{n:04d}-root"
        cp.put(CheckpointRow("t", "", name, parent, "bytes", f"state with u2 at {n}".encode(), "{}"), run_id="r1")
    for n in range(2, LIST_PAGE + 1):  # more than a page: every page is rewritten
        cp.put(CheckpointRow("t", "sub", f"{n:04d}-sub", None, "bytes", b"u2 in a subgraph", "{}"))
    cp.put_writes("t", "", "0001-root", [CheckpointWrite("a", 0, "messages", "bytes", b"write of u2")])
    cp.put_writes("t", "", "0001-root", [CheckpointWrite("a", 1, "other", "bytes", b"nothing to erase")])
    _chain(cp, "other", 1)
    m.append("t", msg("u1", "hello"))
    m.append("t", msg("u2", "my password is hunter2"))
    with pytest.raises(ConflictError, match="SessionSaver.erase_messages"):  # no saver's rewrite: refused
        m.erase_messages("t", ["u2"])
    assert m.get_message_count("t") == 2 and b"u2" in cp.get("t", "", "0001-root").checkpoint
    result = cp.erase_messages("t", ["u2"], _erase_marked)
    assert result.counts.messages == 1 and m.get_message_count("t") == 1
    rows = _listed(cp, "t")
    assert len(rows) == LIST_PAGE + 2 and all(b"u2" not in row.checkpoint for row in rows)
    assert {row.type for row in rows} == {"erased-bytes"}
    first = cp.get("t", "", "0001-root")
    writes = {write.idx: (write.type, write.value) for write in first.writes}
    assert writes == {0: ("erased-bytes", b"write of "), 1: ("bytes", b"nothing to erase")}
    assert cp.delete_runs(["r1"]) == 3  # the run each checkpoint was made by is kept
    assert cp.get("other").checkpoint == b"state of other//0000-root"


def test_copy_thread_keeps_ids_writes_namespaces_and_leaves_the_source(make_manager, drive):
    m = make_manager()
    cp = _checkpoints(drive, m)
    root, child = _chain(cp, "src", 3), _chain(cp, "src", 1, ns="child:1")
    cp.put_writes("src", "", root[-1], [CheckpointWrite("a", 0, "ch", "s", b"v")])
    before = _listed(cp, "src")
    assert cp.copy_thread("src", "dst") == 4
    copied = _listed(cp, "dst")
    assert [
        (r.checkpoint_id, r.checkpoint_ns, r.parent_checkpoint_id, r.checkpoint, r.metadata, r.writes) for r in copied
    ] == [
        (r.checkpoint_id, r.checkpoint_ns, r.parent_checkpoint_id, r.checkpoint, r.metadata, r.writes) for r in before
    ]
    assert {r.thread_id for r in copied} == {"dst"} and _listed(cp, "src") == before
    assert m.get("dst") is not None and child
    assert cp.copy_thread("src", "dst") == 0  # what the target holds stays
    assert cp.copy_thread("nothing", "empty") == 0 and _listed(cp, "empty") == []


def test_runs_and_prunes_remove_exactly_what_they_name(make_manager, drive):
    m = make_manager(namespace="a")
    elsewhere = _checkpoints(drive, make_manager(namespace="b", store=raw(m).store))
    cp = _checkpoints(drive, m)
    cp.put(_row("t", "1"), run_id="run-1")
    cp.put(_row("t", "2", "1"), run_id="run-2")
    cp.put(_row("t", "3", "2", ns="child"), run_id="run-1")
    elsewhere.put(_row("t", "1"), run_id="run-1")
    cp.put_writes("t", "", "1", [CheckpointWrite("a", 0, "ch", "s", b"v")])
    assert cp.delete_runs(["run-1", "unknown"]) == 2 and cp.delete_runs([]) == 0
    assert _ids(_listed(cp, "t")) == ["2"] and elsewhere.get("t") is not None
    cp.put(_row("t", "1"))
    assert cp.get("t", "", "1").writes == ()  # the run's writes went with its checkpoint
    # prune: the latest of each checkpoint namespace stays, with its writes, without a parent.
    for thread in ("p", "q"):
        _chain(cp, thread, 3)
        _chain(cp, thread, 2, ns="child:1")
    cp.put_writes("p", "", "0002-root", [CheckpointWrite("a", 0, "ch", "s", b"v")])
    cp.put_writes("p", "", "0001-root", [CheckpointWrite("a", 0, "ch", "s", b"old")])
    assert cp.prune(["p", "missing"], strategy="keep_latest") == 3
    kept = _listed(cp, "p")
    assert [(r.checkpoint_ns, r.checkpoint_id, r.parent_checkpoint_id) for r in kept] == [
        ("", "0002-root", None),
        ("child:1", "0001-child:1", None),
    ]
    assert [w.value for w in kept[0].writes] == [b"v"]
    assert len(_listed(cp, "q")) == 5  # unlisted threads untouched
    assert cp.prune(["q"], strategy="delete") == 5 and _listed(cp, "q") == [] and cp.prune([]) == 0
    # A DeltaChannel thread rebuilds its value from older checkpoints: keep_latest refuses.
    cp.put(_row("d", "1", counters_since_delta_snapshot={"messages": [1, 1]}))
    cp.put(_row("d", "2", "1"))
    with pytest.raises(ConflictError, match="DeltaChannel"):
        cp.prune(["p", "d"], strategy="keep_latest")
    assert len(_listed(cp, "d")) == 2
    assert cp.prune(["d"], strategy="delete") == 2


def test_many_runs_are_deleted_a_list_at_a_time_with_their_writes(make_manager, drive):
    """Run ids beyond what one statement lists (``max_list``) and repeated ones: every listed
    run's checkpoints and writes go, in every list, and nothing of another run or namespace."""
    m = make_manager(namespace="a")
    elsewhere = _checkpoints(drive, make_manager(namespace="b", store=raw(m).store))
    cp = _checkpoints(drive, m)
    for n in range(7):
        cp.put(_row(f"t{n}", "1"), run_id=f"run-{n}")
        cp.put_writes(f"t{n}", "", "1", [CheckpointWrite("task", 0, "ch", "s", b"v")])
    elsewhere.put(_row("t0", "1"), run_id="run-0")
    elsewhere.put_writes("t0", "", "1", [CheckpointWrite("task", 0, "ch", "s", b"kept")])
    with short_lists(raw(m).store, 2):
        assert cp.delete_runs(["run-0", "run-2", "run-2", "run-3", "run-5", "run-6", "none"]) == 5
    assert sorted(r.thread_id for r in _listed(cp)) == ["t1", "t4"]
    assert [w.value for w in elsewhere.get("t0").writes] == [b"kept"]
    for n in (0, 2, 3, 5, 6):
        cp.put(_row(f"t{n}", "1"))
        assert cp.get(f"t{n}", "", "1").writes == ()  # the run's writes went with its checkpoint
    assert [w.value for w in cp.get("t1").writes] == [b"v"]


def test_bad_input_is_refused_and_changes_nothing(make_manager, drive):
    m = make_manager()
    cp = _checkpoints(drive, m)
    _chain(cp, "t", 1)
    for bad in ({'a"b': 1}, {"": 1}, {"k": object()}, {"k": float("nan")}, {1: 1}):
        with pytest.raises(InvalidInputError):
            _listed(cp, "t", metadata=bad)
    for limit in (-1, 1.5, True):
        with pytest.raises(InvalidInputError):
            _listed(cp, "t", limit=limit)
    with pytest.raises(InvalidInputError):
        cp.prune(["t"], strategy="all")
    for thread_id in ("", None, 3):
        with pytest.raises(InvalidInputError):
            cp.put(_row(thread_id, "x"))  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        cp.put(CheckpointRow("t", "", "bad \ud800 id", None, "bytes", b"x", "{}"))
    assert _ids(_listed(cp)) == ["0000-root"] and [info.id for info in m.list_sessions()] == ["t"]


skip_where_unsupported(globals())
