"""Items contract (``ItemStore``, ``sessions_core.items``): an item reads back as written, every
write is a version (a deletion too); a namespace prefix selects whole labels; filters compare
by kind with every operator; a keyword query is ranked by the store's search and a query vector
by cosine similarity, fused; a read with ``refresh``, or a refresh alone, moves the expiry of
an item with a TTL; an expired item is not read and a sweep removes it with its versions;
namespaces list by prefix, suffix, wildcard and depth; the items of one manager namespace are
invisible through another's; concurrent batches writing and deleting the same keys all land,
without a deadlock or a retry; bad input stores nothing. A store without the capability skips
it."""

from __future__ import annotations

import asyncio
import logging
import uuid
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import sessions_core.items
from sessions_core import InvalidInputError, InvalidTextError, PIIRedactor, RedactionError
from sessions_core._time import now_us
from sessions_core.items import ItemPut, Items

from .harness import skip_where_unsupported


def _items(drive: Any, manager: Any, namespace: str = "") -> Any:
    return drive(Items(getattr(manager, "target", manager).store, namespace=namespace))


class Clock:
    """The items' clock, moved by the test: expiry is tested without sleeping, so a loaded
    machine can neither make a refreshed item expire nor keep an expired one alive."""

    def __init__(self) -> None:
        self.now = now_us()

    def __call__(self) -> int:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += int(seconds * 1_000_000)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    """The clock the items read (``sessions_core.items``) until the test ends."""
    clock = Clock()
    monkeypatch.setattr(sessions_core.items, "now_us", clock)
    return clock


def test_an_item_reads_back_and_every_write_is_a_version(make_manager, drive):
    items = _items(drive, make_manager())
    assert items.get(("users", "u1"), "k") is None and items.versions(("users", "u1"), "k") == []
    items.put(("users", "u1"), "k", {"content": "likes tea", "n": 1, "nested": {"ok": True}})
    items.put(("users", "u1"), "k", {"content": "likes coffee", "n": 2})
    got = items.get(("users", "u1"), "k")
    assert got.namespace == ("users", "u1") and got.key == "k" and got.value == {"content": "likes coffee", "n": 2}
    assert got.version == 2 and got.created_at <= got.updated_at
    items.put(("users", "u1"), "k", None)
    assert items.get(("users", "u1"), "k") is None
    versions = items.versions(("users", "u1"), "k")
    assert [(v.version, v.value) for v in versions] == [
        (3, None),
        (2, {"content": "likes coffee", "n": 2}),
        (1, {"content": "likes tea", "n": 1, "nested": {"ok": True}}),
    ]
    items.put(("users", "u1"), "k", {"content": "back"})
    assert items.get(("users", "u1"), "k").version == 4 and items.version(("users", "u1"), "k", 1).value["n"] == 1


def test_a_batch_is_applied_in_order_and_the_last_write_of_a_key_wins(make_manager, drive):
    items = _items(drive, make_manager())
    items.put_many(
        [ItemPut(("a",), "x", {"v": 1}), ItemPut(("a",), "y", {"v": 2}), ItemPut(("a",), "x", {"v": 3})]
        + [ItemPut(("bulk",), f"k{n}", {"v": n}) for n in range(250)]
    )
    found = items.get_many([(("a",), "x"), (("a",), "y"), (("a",), "z"), (("bulk",), "k249")])
    assert [None if item is None else item.value["v"] for item in found] == [3, 2, None, 249]


def test_a_prefix_selects_whole_labels_and_listing_is_newest_first(make_manager, drive):
    items = _items(drive, make_manager())
    for namespace in [("foo",), ("foo", "bar"), ("foobar",), ("Foo",), ("foo", "*")]:
        items.put(namespace, "k", {"ns": list(namespace)})
    under_foo = items.search(("foo",), limit=10)
    assert sorted(item.namespace for item in under_foo) == [("foo",), ("foo", "*"), ("foo", "bar")]
    assert [item.namespace for item in under_foo][0] == ("foo", "*")  # the newest first
    assert len(items.search((), limit=10)) == 5
    assert [item.namespace for item in items.search((), limit=2, offset=4)] == [("foo",)]


@pytest.mark.parametrize(
    ("filter", "keys"),
    [
        ({"color": "red"}, ["a", "b"]),
        ({"color": {"$ne": "red"}}, ["c", "d"]),
        ({"score": {"$gt": 3.0}}, ["a", "c"]),
        ({"score": {"$gte": 3.0, "$lt": 4.5}}, ["b", "c"]),
        ({"score": {"$lte": 3}}, ["b"]),
        ({"active": True}, ["a", "c"]),
        ({"tags": ["x", "y"]}, ["a"]),
        ({"meta.level": 2}, ["d"]),
        ({"missing": None}, ["a", "b", "c", "d"]),
        ({"color": "red", "active": False}, ["b"]),
        ({"score": {"$lt": float("inf")}}, ["a", "b", "c"]),
        ({"score": {"$lt": 10**100}}, ["a", "b", "c"]),
        ({"name": {"$gt": "m"}}, ["c"]),
    ],
)
def test_filters_compare_by_kind_with_every_operator(make_manager, drive, filter, keys):
    items = _items(drive, make_manager())
    items.put(("f",), "a", {"color": "red", "score": 4.5, "active": True, "tags": ["x", "y"], "name": "alpha"})
    items.put(("f",), "b", {"color": "red", "score": 3.0, "active": False, "name": "beta"})
    items.put(("f",), "c", {"color": "green", "score": 4.0, "active": True, "name": "omega"})
    items.put(("f",), "d", {"color": "blue", "score": "high", "meta": {"level": 2}})
    assert sorted(item.key for item in items.search(("f",), filter=filter, limit=10)) == keys


def test_a_keyword_query_finds_the_answer_to_a_question(make_manager, drive):
    items = _items(drive, make_manager())
    items.put(("memories", "u1"), "m1", {"content": "Caroline went to an LGBTQ support group on Tuesday"})
    items.put(("memories", "u1"), "m2", {"content": "Melanie painted a sunrise over the lake last year"})
    items.put(("memories", "u1"), "m3", {"content": "Caroline is researching adoption agencies"})
    items.put(("memories", "u2"), "m4", {"content": "Melanie's kids love dinosaurs and painting"})
    items.put(("memories", "u1"), "m5", {"content": "nothing indexed here"}, text="")
    found = items.search(("memories",), query="When did Melanie paint a sunrise?")
    assert [item.key for item in found] == ["m2", "m4"] and found[0].score > found[1].score
    assert [item.key for item in items.search(("memories", "u1"), query="adoption agency")] == ["m3"]
    assert items.search(("memories", "u2"), query="support group") == []
    assert items.search(("memories",), query="nothing indexed") == []
    assert [item.key for item in items.search(("memories",), query="painting", filter={"content": {"$ne": "x"}})]


def test_a_query_vector_ranks_by_cosine_similarity_fused_with_keywords(make_manager, drive):
    items = _items(drive, make_manager())
    items.put(("v",), "east", {"text": "sunrise"}, vectors=[("$", [1.0, 0.0])])
    items.put(("v",), "north", {"text": "polar"}, vectors=[("$", [0.0, 1.0])])
    items.put(("v",), "both", {"text": "between"}, vectors=[("title", [0.7, 0.7]), ("body", [1.0, 0.1])])
    found = items.search(("v",), query_vector=[1.0, 0.0], limit=3)
    assert [item.key for item in found] == ["east", "both", "north"]
    assert found[0].score == pytest.approx(1.0) and found[2].score == pytest.approx(0.0, abs=1e-6)
    assert found[1].score == pytest.approx(1.0 / (1.01**0.5), abs=1e-4)  # the better of its fields
    assert [item.key for item in items.search(("v",), query_vector=[1.0, 0.0], offset=1, limit=1)] == ["both"]
    fused = items.search(("v",), query="polar", query_vector=[1.0, 0.0], limit=3)
    assert fused[0].key in ("north", "east") and {item.key for item in fused} == {"east", "north", "both"}
    assert [item.key for item in items.search(("v",), query_vector=[0.0, 1.0], filter={"text": "sunrise"})] == ["east"]


def test_an_expired_item_is_not_read_and_a_sweep_removes_it_with_its_versions(make_manager, drive, clock):
    items = _items(drive, make_manager())
    items.put(("t",), "long", {"v": 2}, ttl_minutes=60)
    items.put(("t",), "kept", {"v": 3})
    items.put(("t",), "short", {"v": 1}, ttl_minutes=0.01)
    clock.advance(0.59)
    assert items.get(("t",), "short") is not None
    clock.advance(0.02)
    assert items.get(("t",), "short") is None
    assert sorted(item.key for item in items.search(("t",))) == ["kept", "long"]
    assert items.sweep() == 1 and items.versions(("t",), "short") == [] and items.sweep() == 0
    assert items.get(("t",), "long", refresh=True).value == {"v": 2}


def test_refresh_moves_the_expiry_of_a_read_item(make_manager, drive, clock):
    items = _items(drive, make_manager())
    items.put(("t",), "k", {"v": 1}, ttl_minutes=0.01)
    for _ in range(3):
        clock.advance(0.35)
        assert items.get(("t",), "k", refresh=True) is not None
    clock.advance(0.59)
    assert items.get(("t",), "k") is not None
    clock.advance(0.02)
    assert items.get(("t",), "k") is None


def test_a_read_with_refresh_or_a_refresh_alone_keeps_items_with_a_ttl_alive(make_manager, drive, clock):
    items = _items(drive, make_manager())
    items.put_many(
        [
            ItemPut(("t", "a"), "read", {"v": 1}, ttl_minutes=0.015),
            ItemPut(("t", "a"), "kept", {"v": 2}),
            ItemPut(("t", "b"), "refreshed", {"v": 3}, ttl_minutes=0.015),
            ItemPut(("t", "b"), "left", {"v": 4}, ttl_minutes=0.015),
        ]
    )
    items.refresh([])
    for _ in range(3):
        clock.advance(0.6)  # a TTL of 0.9 s: the item read or refreshed 0.6 s ago lives on
        found = items.get_many([(("t", "a"), "read"), (("t", "a"), "kept"), (("t", "b"), "missing")], refresh=True)
        assert [None if item is None else item.value["v"] for item in found] == [1, 2, None]
        items.refresh([(("t", "b"), "refreshed"), (("t", "c"), "missing")])
    assert items.get(("t", "b"), "left") is None  # expired while the others were read or refreshed
    assert items.get(("t", "b"), "refreshed").value == {"v": 3}
    assert [version.version for version in items.versions(("t", "a"), "read")] == [1]  # a refresh is no version


def test_namespaces_list_by_prefix_suffix_wildcard_and_depth(make_manager, drive):
    items = _items(drive, make_manager())
    for namespace in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c"), ("ab",)]:
        items.put(namespace, "k", {})
    assert items.namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("ab",), ("x", "b", "c")]
    assert items.namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
    assert items.namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
    assert items.namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]
    assert items.namespaces(prefix=("a",), max_depth=2) == [("a", "b"), ("a", "e")]
    assert items.namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]


def _batch(worker: int, round: int, keys: list[str]) -> list[ItemPut]:
    """Writes of every key, in the worker's own order, a deletion among every few."""
    order = keys if worker % 2 else keys[::-1]
    order = order[worker % len(keys) :] + order[: worker % len(keys)]
    return [
        ItemPut(("c",), key, None)
        if (worker + round + n) % 4 == 0
        else ItemPut(("c",), key, {"w": worker, "r": round}, vectors=[("$", [1.0, float(worker)])])
        for n, key in enumerate(order)
    ]


def test_concurrent_batches_of_the_same_keys_all_land(backend, mode, caplog):
    """Several writers at once (threads; in async mode coroutines of the async twins), each
    batch putting and deleting the same keys in another order: every batch lands with no
    error and nothing logged (a deadlock retried would log), and each key ends consistent:
    the item is its newest version (absent when that is a deletion), its vector there only
    while it lives."""
    workers, rounds, keys = 6, 5, [f"k{n:02d}" for n in range(30)]
    store = backend.open()
    try:
        items = Items(store)
        caplog.set_level(logging.WARNING, logger="sessions_core")
        if mode == "sync":
            with ThreadPoolExecutor(workers) as pool:
                done = [pool.submit(items.put_many, _batch(w, r, keys)) for r in range(rounds) for w in range(workers)]
                for future in done:
                    future.result()
        else:

            async def writer(worker: int) -> None:
                for round in range(rounds):
                    await items.aput_many(_batch(worker, round, keys))

            async def everyone() -> None:
                await asyncio.gather(*(writer(w) for w in range(workers)))

            asyncio.run(everyone())
        assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
        live = {item.key for item in items.search(("c",), query_vector=[1.0, 0.0], limit=100)}
        for key in keys:
            versions = items.versions(("c",), key)
            numbers = [version.version for version in versions]
            assert numbers == sorted(set(numbers), reverse=True) and 0 < len(numbers) <= workers * rounds
            current = items.get(("c",), key)
            if versions[0].value is None:
                assert current is None and key not in live
            else:
                assert current is not None and (current.version, current.value) == (numbers[0], versions[0].value)
                assert key in live
    finally:
        store.close()


def test_erasing_a_namespace_removes_its_items_with_their_versions_and_vectors_and_no_other(make_manager, drive):
    manager = make_manager()
    a, b = _items(drive, manager, "a"), _items(drive, manager, "b")
    a.put(("u",), "k", {"content": "alpha zebra"}, vectors=[("$", [1.0, 0.0])])
    a.put(("u",), "k", {"content": "alpha zebra, again"}, vectors=[("$", [1.0, 0.0])])
    a.put(("u",), "deleted", {"content": "zebra"})
    a.put(("u",), "deleted", None)
    b.put(("u",), "k", {"content": "beta zebra"}, vectors=[("$", [1.0, 0.0])])
    erased = manager.erase_namespace("a")
    assert erased.items == 1 and erased.session_ids == ()
    assert a.get(("u",), "k") is None and a.versions(("u",), "k") == [] == a.versions(("u",), "deleted")
    assert a.search(("u",), query="zebra") == [] == a.search(("u",), query_vector=[1.0, 0.0])
    assert [item.key for item in b.search(("u",), query="zebra", query_vector=[1.0, 0.0])] == ["k"]
    assert [v.version for v in b.versions(("u",), "k")] == [1]
    assert manager.erase_namespace("a").items == 0


def test_erasing_an_item_removes_its_versions_and_vectors_and_no_other_item(make_manager, drive):
    manager = make_manager()
    items, other = _items(drive, manager), _items(drive, manager, "other")
    items.put(("u",), "k", {"content": "alpha zebra"}, vectors=[("$", [1.0, 0.0])])
    items.put(("u",), "k", {"content": "alpha zebra, again"}, vectors=[("$", [1.0, 0.0])])
    items.put(("u",), "k", None)  # a delete keeps the values as versions
    items.put(("u",), "kept", {"content": "zebra too"}, vectors=[("$", [1.0, 0.0])])
    other.put(("u",), "k", {"content": "beta zebra"})
    assert [v.version for v in items.versions(("u",), "k")] == [3, 2, 1]

    erased = items.erase(("u",), "k")

    assert erased.items == 1 and erased.session_ids == () and not erased.vacuumed
    assert items.get(("u",), "k") is None and items.versions(("u",), "k") == []
    assert [item.key for item in items.search(("u",), query="zebra", query_vector=[1.0, 0.0])] == ["kept"]
    assert [v.version for v in items.versions(("u",), "kept")] == [1]
    assert other.get(("u",), "k").value == {"content": "beta zebra"}
    assert items.erase(("u",), "k").items == 0 and items.erase(("nobody",), "k").items == 0
    items.put(("u",), "k", {"content": "a new start"})
    assert [v.version for v in items.versions(("u",), "k")] == [1]
    with pytest.raises(InvalidInputError):
        items.erase(("u",), 7)


def test_the_items_of_one_namespace_are_invisible_through_another(make_manager, drive, clock):
    manager = make_manager()
    default, a, b = (_items(drive, manager, namespace) for namespace in ("", "a", "b"))
    a.put(("users", "u1"), "k", {"content": "alpha zebra"}, vectors=[("$", [1.0, 0.0])])
    a.put(("users", "u1"), "k", {"content": "alpha zebra, again"}, vectors=[("$", [1.0, 0.0])])
    a.put(("users", "u1"), "short", {"v": 1}, ttl_minutes=0.01)
    b.put(("users", "u1"), "k", {"content": "beta zebra"}, vectors=[("$", [0.0, 1.0])])
    b.put(("users", "u1"), "short", {"v": 2}, ttl_minutes=0.01)
    b.put(("users", "u2"), "only-b", {"content": "zebra"})
    default.put(("users", "u1"), "k", {"content": "default zebra"})
    for items, expected, version in ((a, "alpha zebra, again", 2), (b, "beta zebra", 1), (default, "default zebra", 1)):
        got = items.get(("users", "u1"), "k")
        assert got.value == {"content": expected} and got.version == version
        assert [v.version for v in items.versions(("users", "u1"), "k")] == list(range(version, 0, -1))
        assert [item.value for item in items.search(("users", "u1"), query="zebra")] == [{"content": expected}]
        keys = [(item.namespace, item.key) for item in items.search(("users", "u1"), query_vector=[1.0, 0.0])]
        assert keys == ([] if items is default else [(("users", "u1"), "k")])
    assert a.get(("users", "u2"), "only-b") is None and default.get(("users", "u2"), "only-b") is None
    assert [item.key for item in a.search(("users",), query="zebra")] == ["k"]
    assert sorted(item.key for item in b.search(())) == ["k", "only-b", "short"]
    assert [item.key for item in default.search(())] == ["k"]
    assert a.search((), filter={"content": "beta zebra"}) == []
    assert a.namespaces() == [("users", "u1")] and b.namespaces() == [("users", "u1"), ("users", "u2")]
    assert a.namespaces(prefix=("users",), max_depth=1) == [("users",)]
    clock.advance(0.7)
    assert a.sweep() == 1 and b.versions(("users", "u1"), "short") != [] and default.sweep() == 0
    assert a.versions(("users", "u1"), "short") == [] and b.sweep() == 1
    a.put(("users", "u1"), "k", None)
    assert a.get(("users", "u1"), "k") is None and b.get(("users", "u1"), "k").value == {"content": "beta zebra"}
    assert [v.value for v in b.versions(("users", "u1"), "k")] == [{"content": "beta zebra"}]
    with pytest.raises(InvalidInputError):
        Items(getattr(manager, "target", manager).store, namespace="a\x00b")


@pytest.mark.parametrize(
    ("namespace", "key", "value", "error"),
    [
        ((), "k", {}, InvalidInputError),
        (("a.b",), "k", {}, InvalidInputError),
        (("",), "k", {}, InvalidInputError),
        (("a", "\x00"), "k", {}, InvalidInputError),
        ("ab", "k", {}, InvalidInputError),
        (("a",), "k", ["not", "a", "mapping"], InvalidInputError),
        (("a",), "k", {"x": float("nan")}, InvalidInputError),
        (("a",), "k", {"x": object()}, InvalidInputError),
        (("a",), "k", {"x": "nul\x00"}, InvalidInputError),
        (("a",), "bad\ud800", {}, InvalidTextError),
        (("a",), "k", {"x": "bad\udfff"}, InvalidTextError),
        (("a",), 5, {}, InvalidInputError),
    ],
)
def test_bad_input_stores_nothing(make_manager, drive, namespace, key, value, error):
    items = _items(drive, make_manager())
    items.put(("a",), "first", {"v": 1})
    with pytest.raises(error):
        items.put_many([ItemPut(("a",), "second", {"v": 2}), ItemPut(namespace, key, value)])
    assert [item.key for item in items.search(())] == ["first"]
    with pytest.raises(InvalidInputError, match="filter"):
        items.search(("a",), filter={"v": {"$regex": "x"}})
    with pytest.raises(InvalidInputError, match="Invalid filter key"):
        items.search(("a",), filter={"v') OR 1=1 --": 1})
    with pytest.raises(InvalidInputError):
        items.put(("a",), "k", {"v": 1}, ttl_minutes=-1)


def test_a_redactor_masks_every_string_before_it_is_stored_or_indexed(make_manager, drive):
    manager = make_manager()
    store = getattr(manager, "target", manager).store
    items = drive(Items(store, namespace="", redactor=PIIRedactor()))
    secret, other = "jane.marker@example.com", "sk-proj-" + "q" * 32
    value = {"content": f"write to {secret}", "tags": [f"key {other}"], "nested": {"uuid": uuid.uuid4()}, "n": 3}
    items.put(("users", "u1"), "k", value)
    items.put(("users", "u1"), "k", {"content": f"still {secret}"}, text=f"indexed {secret}")
    stored = items.get(("users", "u1"), "k").value
    assert stored == {"content": "still [EMAIL]"}
    first = items.version(("users", "u1"), "k", 1).value
    assert first["content"] == "write to [EMAIL]" and first["tags"] == ["key [API_KEY]"] and first["n"] == 3
    for query in ("jane.marker@example.com", "example", "marker", "qqqq"):
        assert items.search(("users",), query=query) == []
    assert [item.key for item in items.search(("users",), query="indexed")] == ["k"]

    def failing(text: str) -> str:
        raise RuntimeError("detector down")

    broken = drive(Items(store, namespace="", redactor=failing))
    with pytest.raises(RedactionError, match="detector down"):
        broken.put_many([ItemPut(("users", "u2"), "a", {"v": "fine"}), ItemPut(("users", "u2"), "b", {"v": "x"})])
    assert items.search(("users", "u2")) == []


def test_items_survive_reopening(make_manager, drive, persistent_backend):
    items = _items(drive, make_manager(store=persistent_backend.open()))
    items.put(("p",), "k", {"content": "durable zebra"})
    items.put(("p",), "k", {"content": "durable zebra, again"})
    reopened = _items(drive, make_manager(store=persistent_backend.open()))
    assert reopened.get(("p",), "k").value == {"content": "durable zebra, again"}
    assert [v.version for v in reopened.versions(("p",), "k")] == [2, 1]
    assert [item.key for item in reopened.search(("p",), query="zebra")] == ["k"]


skip_where_unsupported(globals())
