"""Inline binary payloads: stored once outside the row, read back unchanged, released when unused."""

from __future__ import annotations

import base64
import hashlib

from .builders import ids, msg
from .harness import skip_where_unsupported

PNG = bytes(range(256)) * 8
DIGEST = hashlib.sha256(PNG).hexdigest()
B64 = base64.b64encode(PNG).decode("ascii")


def file_message(message_id, data, media_type="image/png", **extra):
    return {
        "id": message_id,
        "role": "user",
        "parts": [
            {"type": "text", "text": f"look at {message_id}"},
            {"type": "file", "mediaType": media_type, "data": data, **extra},
        ],
    }


def _store(s):
    return (s.session if hasattr(s, "_loop") else s).store


def test_payloads_read_back_exactly_as_written(make_session):
    s = make_session()
    s.append_message(file_message("raw", PNG, filename="a.png"))
    s.append_message(file_message("b64", B64))
    s.append_message(file_message("url", "data:image/png;base64," + B64))
    s.append_message(file_message("text", "not base64 at all!", media_type="text/plain"))
    s.append_message(file_message("tricky", "sessions-blob:" + "0" * 64 + ":bytes", media_type="text/plain"))
    history = s.get_history()
    assert [m.parts[1].data for m in history] == [
        PNG,
        B64,
        "data:image/png;base64," + B64,
        "not base64 at all!",
        "sessions-blob:" + "0" * 64 + ":bytes",
    ]
    assert history[0].parts[1].filename == "a.png"
    assert s.get_message("raw").parts[1].data == PNG
    assert [m.parts[1].data for m in s.history(newest_first=True)][-1] == PNG
    assert s.get_latest_leaf().parts[1].data.startswith("sessions-blob:")
    assert s.get_branches("raw")[0].parts[1].data == B64


def test_identical_payloads_are_stored_once_and_released_with_the_last_reference(make_session):
    s = make_session()
    store = _store(s)
    s.append_message(file_message("a", PNG))
    s.append_message(file_message("b", B64))
    assert set(store.get_blobs([DIGEST])) == {DIGEST}
    s.delete_messages(["a"])
    assert store.get_blobs([DIGEST]) == {DIGEST: PNG}
    s.delete_messages(["b"])
    assert store.get_blobs([DIGEST]) == {}


def test_updates_and_clears_release_payloads(make_session):
    s = make_session()
    store = _store(s)
    s.append_message(file_message("a", PNG))
    other = bytes(reversed(PNG))
    s.update_message(file_message("a", other))
    assert store.get_blobs([DIGEST]) == {}
    assert s.get_message("a").parts[1].data == other
    s.clear_messages()
    assert store.get_blobs([hashlib.sha256(other).hexdigest()]) == {}


def test_the_byte_budget_counts_payloads(make_session):
    s = make_session()
    s.append_message(msg("small", "tiny"))
    s.append_message(file_message("image", PNG))
    recent = s.get_recent_history(len(PNG))
    assert ids(recent.messages) == ["image"] and recent.truncated
    assert recent.total_content_bytes > len(PNG)


def test_payloads_of_other_sessions_are_kept(make_session):
    a = make_session("a")
    b = make_session("b", store=_store(a))
    a.append_message(file_message("x", PNG))
    b.append_message(file_message("y", PNG))
    a.clear_messages()
    assert b.get_message("y").parts[1].data == PNG


def test_a_fork_keeps_its_payloads(make_manager):
    manager = make_manager()
    info = manager.create("chat")
    manager.append(info.id, file_message("m0", PNG))
    fork = manager.fork(info.id, "m0", "copy")
    manager.delete(info.id)
    assert manager.get_history(fork.id)[0].parts[1].data == PNG


def test_a_batch_stores_its_payloads_once_and_reads_them_back(make_session):
    s = make_session()
    store = _store(s)
    s.append_message(msg("m0"))
    results = s.append_messages(
        [file_message("a", PNG), msg("m1"), file_message("b", B64), file_message("a", B64), file_message("c", PNG)]
    )
    assert [r.inserted for r in results] == [True, True, True, False, True]
    assert ids(s.get_history("b")) == ["m0", "a", "m1", "b"]
    assert ids(s.get_history()) == ["m0", "a", "c"]  # the chain went on from the stored "a"
    assert [m.parts[1].data for m in s.get_history() if len(m.parts) > 1] == [PNG, PNG]
    assert s.get_message("b").parts[1].data == B64
    assert set(store.get_blobs([DIGEST])) == {DIGEST}
    s.delete_messages(["a", "b"])
    assert store.get_blobs([DIGEST]) == {DIGEST: PNG}
    s.delete_messages(["c"])
    assert store.get_blobs([DIGEST]) == {}


skip_where_unsupported(globals())
