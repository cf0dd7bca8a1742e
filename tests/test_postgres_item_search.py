"""An item's text waits for a keyword search on PostgreSQL (migration 15): a put stores the text
as it is, without its terms; the first keyword search of a namespace's items analyses those
under its prefix and writes their terms; a changed item waits again; a search never writes the
terms of a text that a put replaced in the meantime; searches and puts at once never deadlock."""

from __future__ import annotations

import threading

import psycopg
import pytest

from sessions_core import StoreError
from sessions_core.fts import tsvector_literal
from sessions_core.items import ItemPut, Items
from sessions_core.stores import postgres as postgres_module

from .postgres import postgres_url


def _store(schema):
    return postgres_module.PostgresStore(postgres_url(), schema=schema, max_size=4)


def _rows(schema) -> dict[str, tuple[str, str | None]]:
    with psycopg.connect(postgres_url()) as conn:
        rows = conn.execute(f'SELECT prefix, key, search_terms::text, waiting_text FROM "{schema}".store_items')
        return {f"{prefix}/{key}": (terms, waiting) for prefix, key, terms, waiting in rows}


def _matched(items, prefix, query, limit=50):
    return {item.key for item in items.search(prefix, query=query, limit=limit) if item.score is not None}


def _terms(literal: str) -> set[str]:
    return set(literal.split())


def test_a_put_waits_and_the_search_of_its_prefix_indexes_it(schema):
    store = _store(schema)
    try:
        items = Items(store)
        items.put(("a", "u"), "k", {"content": "Running with kestrels"})
        items.put(("b", "u"), "k", {"content": "kestrels elsewhere"})
        items.put(("a", "u"), "off", {"content": "kestrels unindexed"}, text="")
        assert _rows(schema)["a.u/k"] == ("", "content\nRunning with kestrels")
        assert _rows(schema)["a.u/off"] == ("", None)
        assert _matched(items, ("a",), "kestrel run") == {"k"}  # analysed as the put's text: stemmed
        rows = _rows(schema)
        assert _terms(rows["a.u/k"][0]) == _terms(tsvector_literal("content\nRunning with kestrels"))
        assert rows["a.u/k"][1] is None
        assert rows["b.u/k"][1] == "content\nkestrels elsewhere"  # another prefix waits on
        assert _matched(items, ("b",), "kestrels") == {"k"}
    finally:
        store.close()


def test_a_changed_item_waits_again_and_its_old_terms_no_longer_match(schema):
    store = _store(schema)
    try:
        items = Items(store)
        for n in range(3):
            items.put(("m",), f"k{n}", {"content": f"a lapwing {n}"})
        assert _matched(items, ("m",), "lapwing") == {"k0", "k1", "k2"}
        items.put(("m",), "k1", {"content": "now a godwit"})
        assert _rows(schema)["m/k1"] == ("", "content\nnow a godwit")
        assert _matched(items, ("m",), "lapwing") == {"k0", "k2"}
        assert _matched(items, ("m",), "godwit") == {"k1"}
        assert [v.version for v in items.versions(("m",), "k1")] == [2, 1]
    finally:
        store.close()


def test_a_search_never_indexes_a_text_a_put_replaced_meanwhile(schema, monkeypatch):
    store, writer = _store(schema), _store(schema)
    try:
        items = Items(store)
        items.put(("m",), "k", {"content": "the old plover"})
        analyse = postgres_module.tsvector_literal

        def put_meanwhile(text):
            Items(writer).put(("m",), "k", {"content": "the new dunlin"})  # after the search read the text
            return analyse(text)

        monkeypatch.setattr(postgres_module, "tsvector_literal", put_meanwhile)
        assert _matched(items, ("m",), "plover") == set()  # its terms were not written: the item changed
        monkeypatch.setattr(postgres_module, "tsvector_literal", analyse)
        assert _rows(schema)["m/k"] == ("", "content\nthe new dunlin")
        assert _matched(items, ("m",), "dunlin") == {"k"}
        assert _matched(items, ("m",), "plover") == set()
    finally:
        store.close()
        writer.close()


def test_searches_and_batches_at_once_never_deadlock_and_find_every_item(schema, caplog):
    store = _store(schema)
    errors: list[BaseException] = []
    keys = [f"k{n:03}" for n in range(120)]

    def put(worker: int) -> None:
        try:
            items = Items(store)
            for round_ in range(6):
                order = keys if (worker + round_) % 2 else keys[::-1]
                items.put_many([ItemPut(("m",), key, {"content": f"sanderling {worker} {round_}"}) for key in order])
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    def search() -> None:
        try:
            items = Items(store)
            for _ in range(15):
                items.search(("m",), query="sanderling", limit=10)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    try:
        threads = [threading.Thread(target=put, args=(n,)) for n in range(2)]
        threads += [threading.Thread(target=search) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        assert not [record for record in caplog.records if "deadlock" in record.getMessage().lower()]
        assert _matched(Items(store), ("m",), "sanderling", limit=200) == set(keys)
        assert all(waiting is None for _terms, waiting in _rows(schema).values())
    finally:
        store.close()


def _read_only_store(schema):
    """A store whose server refuses every write, as a hot standby does."""
    url = postgres_url()
    options = "options=-c%20default_transaction_read_only%3Don"
    return postgres_module.PostgresStore(f"{url}{'&' if '?' in url else '?'}{options}", schema=schema, max_size=2)


def test_a_read_only_server_opens_the_schema_and_finds_waiting_items_without_writing(schema, monkeypatch):
    """A read-only role or server cannot index what waits: its search analyses the waiting items
    under the prefix for itself and ranks them with the indexed ones, and they wait on; once
    refused, the store's next searches do not try the write again for a while."""
    store = _store(schema)
    try:
        items = Items(store)
        items.put(("a", "u"), "indexed", {"content": "kestrels hunting over the field"})
        assert _matched(items, ("a",), "kestrels") == {"indexed"}
        items.put(("a", "u"), "waiting", {"content": "two kestrels nest in the tower"})
        items.put(("a", "u"), "other", {"content": "falcons nest in the tower"})
        items.put(("b", "u"), "elsewhere", {"content": "kestrels elsewhere"})
        before = _rows(schema)
        reader = _read_only_store(schema)  # set up as is: the schema is current, so only read
        try:
            found = [(item.key, item.score) for item in Items(reader).search(("a",), query="kestrels nest", limit=10)]
            assert _rows(schema) == before  # nothing written: the items still wait
            assert found[0][0] == "waiting" and {key for key, _ in found} == {"waiting", "indexed", "other"}
            writes = []
            monkeypatch.setattr(reader, "_write", lambda work, **kw: writes.append(work))
            assert _matched(Items(reader), ("a",), '"nest in the tower"') == {"waiting", "other"}
            assert writes == []  # refused once: the next searches do not ask again for a while
            monkeypatch.undo()
            with pytest.raises(StoreError) as refused:
                Items(reader).put(("a", "u"), "new", {"content": "refused"})
            assert isinstance(refused.value.__cause__, psycopg.errors.ReadOnlySqlTransaction)
        finally:
            reader.close()
        # The writer's search indexes them, and ranks them as the reader did.
        assert [(item.key, item.score) for item in items.search(("a",), query="kestrels nest", limit=10)] == found
        assert _rows(schema)["a.u/waiting"][1] is None
    finally:
        store.close()
