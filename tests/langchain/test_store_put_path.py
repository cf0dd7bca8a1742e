"""``SessionStore.put``'s short path (a namespace already put to, no embedding index, no
``index``) behaves as the batch path: the same validation, TTL, versions, deletion and
keyword indexing; namespaces found valid are remembered, invalid ones never are. ``get``
reads without a batch, as a batch's ``GetOp`` reads and refreshes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from langgraph.store.base import InvalidNamespaceError, PutOp

from langchain_sessions import SessionStore
from sessions_core import InvalidInputError, StoreError
from sessions_core import items as items_module
from sessions_core.testing.items import Clock

from .helpers import matched


@pytest.fixture
def store() -> SessionStore:
    store = SessionStore(":memory:", ttl={"default_ttl": 10})
    store.put(("memories", "u1"), "first", {"text": "seed"})  # the namespace is known from here
    return store


@pytest.mark.parametrize(
    "namespace",
    [("langgraph", "x"), ("a.b",), ("",), (), ("nul\x00",), ("memories", 3)],
    ids=["root-langgraph", "dot", "empty-label", "empty", "nul", "not-a-string"],
)
def test_langgraph_validation_holds_after_a_namespace_is_known(store: SessionStore, namespace: tuple) -> None:
    for _attempt in range(2):  # refused every time: an invalid namespace is never remembered
        with pytest.raises((InvalidNamespaceError, InvalidInputError)):
            store.put(namespace, "k", {"text": "x"})
    assert store.search(()) and all(item.namespace == ("memories", "u1") for item in store.search(()))


def test_an_unhashable_namespace_is_refused(store: SessionStore) -> None:
    with pytest.raises((InvalidNamespaceError, InvalidInputError, TypeError)):
        store.put(("memories", ["u1"]), "k", {"text": "x"})  # type: ignore[arg-type]


def test_the_short_path_stores_what_the_batch_path_stores(store: SessionStore) -> None:
    namespace = ("memories", "u1")
    store.put(namespace, "k", {"text": "a quiet lighthouse keeper"})
    store.batch([PutOp(namespace, "b", {"text": "a quiet lighthouse keeper"}, ttl=10)])
    short, batched = store.get(namespace, "k"), store.get(namespace, "b")
    assert short is not None and batched is not None and short.value == batched.value
    store.put(namespace, "k", {"text": "second"})
    versions = [v.value for v in store.item_versions(namespace, "k")]
    assert versions == [{"text": "second"}, {"text": "a quiet lighthouse keeper"}]
    assert {item.key for item in matched(store.search(namespace, query="lighthouse"))} == {"b"}
    store.put(namespace, "k", None)  # type: ignore[arg-type]  # as BaseStore.put: a deletion
    assert store.get(namespace, "k") is None


def test_the_short_path_applies_the_default_ttl_and_an_explicit_one(tmp_path: Path) -> None:
    path = tmp_path / "items.db"
    with SessionStore(str(path), ttl={"default_ttl": 10}) as store:
        namespace = ("memories", "u1")
        for key in ("seed", "default"):
            store.put(namespace, key, {"text": "x"})
        store.put(namespace, "forever", {"text": "x"}, ttl=None)
        store.put(namespace, "short", {"text": "x"}, ttl=1)
    with sqlite3.connect(path) as conn:
        lives = dict(conn.execute("SELECT key, expires_at - updated_at FROM store_items"))
    assert lives == {"seed": 600_000_000, "default": 600_000_000, "forever": None, "short": 60_000_000}


def test_index_false_takes_the_batch_path_and_is_not_keyword_indexed(store: SessionStore) -> None:
    namespace = ("memories", "u1")
    store.put(namespace, "hidden", {"text": "an unmistakable xylophone"}, index=False)
    store.put(namespace, "shown", {"text": "an unmistakable xylophone"})
    assert {item.key for item in matched(store.search(namespace, query="xylophone"))} == {"shown"}


def test_checked_namespaces_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(items_module, "_CHECKED", {})
    monkeypatch.setattr(items_module, "_CHECKED_MAX", 8)
    for n in range(50):
        assert items_module.check_namespace(("users", f"u{n}")) == f"users.u{n}"
        assert len(items_module._CHECKED) <= 8
    for bad in [("a.b",), ("ok", "\ud800"), ("",)]:
        for _attempt in range(2):
            with pytest.raises(InvalidInputError):
                items_module.check_namespace(bad)
        assert bad not in items_module._CHECKED
    assert items_module.check_namespace((), prefix=True) == ""
    with pytest.raises(InvalidInputError):
        items_module.check_namespace(())


@pytest.mark.parametrize(
    "ttl", [None, {"default_ttl": 10}, {"default_ttl": 10, "refresh_on_read": False}], ids=["no-ttl", "refresh", "kept"]
)
@pytest.mark.parametrize("refresh_ttl", [None, True, False])
def test_get_reads_what_a_batch_get_reads_and_refreshes_as_it_does(
    ttl: dict | None, refresh_ttl: bool | None, clock: Clock
) -> None:
    direct, batched = SessionStore(":memory:", ttl=ttl), SessionStore(":memory:", ttl=ttl)  # type: ignore[arg-type]
    for store in (direct, batched):
        store.put(("memories", "u1"), "k", {"text": "tea"}, ttl=0.01)
    expiry = "SELECT expires_at FROM store_items"
    before = [s.manager.store._read(lambda c: c.execute(expiry).fetchone()[0]) for s in (direct, batched)]
    clock.advance(0.01)  # past a hundredth of the TTL: a refresh moves the expiry on
    item = direct.get(("memories", "u1"), "k", refresh_ttl=refresh_ttl)
    (expected,) = _batch_get(batched, ("memories", "u1"), "k", refresh_ttl)
    assert item is not None and expected is not None
    assert (item.value, item.key, item.namespace) == (expected.value, expected.key, expected.namespace)
    after = [s.manager.store._read(lambda c: c.execute(expiry).fetchone()[0]) for s in (direct, batched)]
    assert (after[0] > before[0]) == (after[1] > before[1])  # refreshed by both or by neither
    assert direct.get(("memories", "u1"), "missing") is None
    for namespace in (("a.b",), ("",), ("memories", 3)):
        with pytest.raises(InvalidNamespaceError):
            direct.get(namespace, "k")  # type: ignore[arg-type]


def _batch_get(store: SessionStore, namespace: tuple[str, ...], key: str, refresh_ttl: bool | None) -> list:
    """What ``BaseStore.get`` would return: the ``GetOp`` it builds, through ``batch``."""
    from langgraph.store.base import GetOp, _ensure_refresh

    return store.batch([GetOp(namespace, key, _ensure_refresh(store.ttl_config, refresh_ttl))])


def test_a_batch_the_database_refuses_midway_stores_nothing(tmp_path: Path) -> None:
    """A batch is one transaction: a put the database refuses undoes the others and the deletion."""
    path = tmp_path / "memory.db"
    namespace = ("memories", "u1")
    batch = [PutOp(namespace, f"k{n}", {"text": f"value {n}"}) for n in range(10)]
    with SessionStore(str(path)) as store:
        store.put(namespace, "gone", {"text": "to delete"})
        with sqlite3.connect(path) as conn:
            conn.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON store_items WHEN new.key = 'k7'"
                " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END"
            )
        with pytest.raises(StoreError, match="refused by the test"):
            store.batch([*batch[:5], PutOp(namespace, "gone", None), *batch[5:]])
        assert [item.key for item in store.search(namespace)] == ["gone"]
        assert [v.value for v in store.item_versions(namespace, "gone")] == [{"text": "to delete"}]

        with sqlite3.connect(path) as conn:
            conn.execute("DROP TRIGGER refuse")
        store.batch([*batch[:5], PutOp(namespace, "gone", None), *batch[5:]])
        assert sorted(item.key for item in store.search(namespace, limit=20)) == sorted(f"k{n}" for n in range(10))
        assert {item.key for item in matched(store.search(namespace, query="value"))} == {f"k{n}" for n in range(10)}
