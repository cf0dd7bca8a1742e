"""Item versions on PostgreSQL, written per statement (migration 12): every insert and update
of an item is its version, a TTL refresh is none, a re-insert racing a deletion is numbered
after it, and items versioned by the earlier row trigger keep their numbering. The current
version lives in the item's row only (migration 13, as SQLite's 0016): a first put writes one
row, and the history reads the same. The triggers probe before they write (migration 14), and a
replaced version is archived by a row trigger that a put of a new key does not fire (migration
16): the same versions."""

from __future__ import annotations

import threading
import time

from sessions_core.items import ItemPut, Items

from .postgres import postgres_url


def _store(schema):
    from sessions_core.stores.postgres import PostgresStore

    return PostgresStore(postgres_url(), schema=schema, max_size=3)


def _versions(items, key):
    return [(version.version, version.value) for version in items.versions(("c",), key)]


def test_a_batch_of_inserts_and_updates_writes_each_version_and_a_refresh_none(schema):
    store = _store(schema)
    try:
        items = Items(store)
        items.put_many([items_put(key, 1) for key in ("a", "b")])
        items.put_many([items_put(key, 2) for key in ("a", "b", "c")] + [items_put("d", 1, ttl=5.0)])
        assert _versions(items, "a") == [(2, {"n": 2}), (1, {"n": 1})]
        assert _versions(items, "c") == [(1, {"n": 2})]
        assert items.get(("c",), "d", refresh=True) is not None
        assert _versions(items, "d") == [(1, {"n": 1})]
        items.put(("c",), "a", None)
        items.put(("c",), "a", {"n": 3})
        assert _versions(items, "a") == [(4, {"n": 3}), (3, None), (2, {"n": 2}), (1, {"n": 1})]
        assert items.get(("c",), "a").version == 4
    finally:
        store.close()


def items_put(key, n, ttl=None):
    return ItemPut(("c",), key, {"n": n}, ttl_minutes=ttl)


def test_a_put_waiting_for_a_deletion_is_numbered_after_it(schema):
    """The put's statement reads the versions before the deletion commits (it then waits for
    the deleted row): its item is renumbered after the deletion's version, not written over it."""
    import psycopg

    store = _store(schema)
    try:
        items = Items(store)
        items.put(("c",), "k", {"n": 1})
        with psycopg.connect(postgres_url()) as deleter:
            table = f'"{schema}"'
            (version,) = deleter.execute(
                f"DELETE FROM {table}.store_items WHERE namespace = '' AND prefix = 'c' AND key = 'k' RETURNING version"
            ).fetchone()
            deleter.execute(
                f"INSERT INTO {table}.store_item_versions (namespace, prefix, key, version, value, created_at)"
                " VALUES ('', 'c', 'k', %s, NULL, 0)",
                (version + 1,),
            )
            putter = threading.Thread(target=items.put, args=(("c",), "k", {"n": 2}))
            putter.start()
            deadline = time.monotonic() + 10
            with psycopg.connect(postgres_url(), autocommit=True) as watcher:
                waiting = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s"
                while not watcher.execute(waiting, ("%store_items%",)).fetchone()[0]:
                    assert time.monotonic() < deadline, "the put never waited for the deletion"
                    time.sleep(0.01)
            deleter.commit()
            putter.join(10)
        assert _versions(items, "k") == [(3, {"n": 2}), (2, None), (1, {"n": 1})]
        item = items.get(("c",), "k")
        assert item is not None and (item.version, item.value) == (3, {"n": 2})
    finally:
        store.close()


def test_items_versioned_by_the_row_trigger_keep_their_numbers_after_the_migration(schema):
    import psycopg

    from sessions_core.stores import postgres as postgres_module

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        for script in postgres_module._qualified(list(postgres_module.MIGRATIONS[:11]), schema):
            conn.execute(postgres_module._query(script))
        for n in (1, 2):
            conn.execute(
                f'INSERT INTO "{schema}".store_items (namespace, prefix, key, value, version, created_at,'
                " updated_at) VALUES ('', 'c', 'k', %s, 1, 1, %s) ON CONFLICT (namespace, prefix, key)"
                " DO UPDATE SET value = excluded.value, version = store_items.version + 1",
                (f'{{"n": {n}}}', n),
            )
    store = _store(schema)
    try:
        items = Items(store)
        items.put(("c",), "k", {"n": 3})
        assert store.schema_version() == len(postgres_module.MIGRATIONS)
        assert _versions(items, "k") == [(3, {"n": 3}), (2, {"n": 2}), (1, {"n": 1})]
    finally:
        store.close()


def test_a_replaced_version_is_archived_by_a_row_trigger_with_a_condition(schema):
    """An upsert fires its UPDATE statement triggers even when it inserted every row: the archive
    is a row trigger, called only for a row whose version changed."""
    import psycopg

    store = _store(schema)
    try:
        Items(store).put(("c",), "k", {"n": 1})
    finally:
        store.close()
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        triggers = conn.execute(
            "SELECT t.tgname, t.tgtype & 1 = 1, t.tgqual IS NOT NULL FROM pg_trigger t"
            " JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relname = 'store_items' AND NOT t.tgisinternal ORDER BY t.tgname",
            (schema,),
        ).fetchall()
    assert ("store_items_version_update", True, True) in triggers


def _kept_rows(schema, key):
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        return conn.execute(
            f'SELECT version, value IS NULL FROM "{schema}".store_item_versions WHERE key = %s ORDER BY version DESC',
            (key,),
        ).fetchall()


def test_a_first_put_writes_no_version_row_and_the_history_has_every_version(schema):
    store = _store(schema)
    try:
        items = Items(store)
        items.put(("c",), "new", {"n": 1})
        assert _kept_rows(schema, "new") == []
        items.put(("c",), "new", {"n": 2})
        assert _kept_rows(schema, "new") == [(1, False)]  # the replaced version, archived
        items.put(("c",), "new", None)
        assert _kept_rows(schema, "new") == [(3, True), (2, False), (1, False)]
        assert _versions(items, "new") == [(3, None), (2, {"n": 2}), (1, {"n": 1})]
        items.put_many([items_put("new", 4, ttl=5.0)])
        assert items.get(("c",), "new", refresh=True) is not None  # a refresh archives nothing
        assert _versions(items, "new") == [(4, {"n": 4}), (3, None), (2, {"n": 2}), (1, {"n": 1})]
        assert [version for version, _ in _kept_rows(schema, "new")] == [3, 2, 1]
    finally:
        store.close()


_PUTS_BEFORE_MIGRATION_15 = {
    "{waiting_text}": "search_terms",
    "{waiting_value}": "to_tsvector('simple', r.terms)",
    "{terms_emptied}": "",
}
"""What an item put wrote before its text waited for a search (migration 15): its terms."""


def test_the_migration_keeps_every_version_once(schema, monkeypatch):
    from sessions_core.stores import postgres as postgres_module

    with monkeypatch.context() as patch:
        patch.setattr(postgres_module, "MIGRATIONS", postgres_module.MIGRATIONS[:12])  # every version kept
        for fragment, then in _PUTS_BEFORE_MIGRATION_15.items():
            patch.setitem(postgres_module._FRAGMENTS, fragment, then)
        store = _store(schema)
        try:
            items = Items(store)
            for n in (1, 2):
                items.put(("c",), "k", {"n": n})
            items.put(("c",), "gone", {"n": 1})
            items.put(("c",), "gone", None)
            assert store.schema_version() == 12
            before = {key: _kept_rows(schema, key) for key in ("k", "gone")}
            assert before == {"k": [(2, False), (1, False)], "gone": [(2, True), (1, False)]}
        finally:
            store.close()
    store = _store(schema)
    try:
        items = Items(store)
        history = {key: [(v, value is None) for v, value in _versions(items, key)] for key in ("k", "gone")}
        assert history == before
        assert store.schema_version() == len(postgres_module.MIGRATIONS)
        assert _kept_rows(schema, "k") == [(1, False)]  # version 2 is the item's row
        items.put(("c",), "k", {"n": 3})
        assert _versions(items, "k") == [(3, {"n": 3}), (2, {"n": 2}), (1, {"n": 1})]
    finally:
        store.close()
