"""PostgreSQL specifics: many processes, setup races, dropped connections, owned resources."""

from __future__ import annotations

import multiprocessing
import threading
import time

import pytest

from sessions_core import Session, SessionManager, StoreError

from .postgres import postgres_url, require_postgres, round_trips, temporary_schema


def _store(schema, **options):
    from sessions_core.stores.postgres import PostgresStore

    return PostgresStore(postgres_url(), schema=schema, **options)


def _msg(message_id):
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": f"text of {message_id}"}]}


def _session_lock_is_free(store, session_id: str) -> bool:
    """Whether another connection can take the lock ``store`` takes on the session."""
    import psycopg

    from sessions_core.stores.postgres import _SESSION_LOCK

    with psycopg.connect(postgres_url(), autocommit=True) as other:
        taken = other.execute(
            f"SELECT {_SESSION_LOCK.replace('pg_advisory_xact_lock', 'pg_try_advisory_lock')}",
            (session_id, store._lock_seed),
        )
        return taken.fetchone() == (True,)


def _append_worker(schema: str, worker: int, session_of: str, count: int) -> None:
    store = _store(schema, max_size=2)
    session = Session(store).for_session(session_of.format(worker=worker))
    for i in range(count):
        session.append_message(_msg(f"w{worker}-{i}"))
        if i % 10 == 0:  # a retried append (the same id) must not be stored twice
            session.append_message(_msg(f"w{worker}-{i}"))
    store.close()


def _setup_worker(schema: str) -> None:
    store = _store(schema, auto_setup=False)
    store.setup()
    store.close()


def _run(target, args_list):
    context = multiprocessing.get_context("spawn")
    processes = [context.Process(target=target, args=args) for args in args_list]
    for process in processes:
        process.start()
    for process in processes:
        process.join(120)
    assert [p.exitcode for p in processes] == [0] * len(processes)


def test_eight_processes_set_up_the_schema_at_once(schema):
    _run(_setup_worker, [(schema,)] * 8)
    store = _store(schema, auto_setup=False)
    assert Session(store).get_history() == []
    store.close()


def test_a_setup_waits_only_for_setups_of_its_own_schema(schema):
    # Advisory locks belong to the database: with one lock for every schema's setup, tenants'
    # schemas created at once were set up one after another.
    import psycopg

    from sessions_core.stores.postgres import _LOCK, _SETUP_LOCK

    here = _store(schema, auto_setup=False)
    with temporary_schema() as other_schema, psycopg.connect(postgres_url()) as holder:
        elsewhere = _store(other_schema, auto_setup=False)
        other, waiting = threading.Thread(target=elsewhere.setup), threading.Thread(target=here.setup)
        try:
            holder.execute(_LOCK, (schema, _SETUP_LOCK))  # a setup of `schema` under way
            try:
                other.start()
                other.join(10)
                assert not other.is_alive()  # did not wait
                waiting.start()
                waiting.join(0.5)
                assert waiting.is_alive()  # waits for the setup of its own schema
            finally:
                holder.rollback()
            waiting.join(10)
            assert not waiting.is_alive()
            for store in (here, elsewhere):
                assert Session(store).for_session("s").get_history() == []  # set up
        finally:
            here.close()
            elsewhere.close()


@pytest.mark.slow
@pytest.mark.parametrize("shared", [True, False], ids=["one-session", "distinct-sessions"])
def test_eight_processes_append_without_loss_or_duplicates(schema, shared):
    _store(schema).setup()
    count = 60
    session_of = "shared" if shared else "own-{worker}"
    _run(_append_worker, [(schema, worker, session_of, count) for worker in range(8)])
    store = _store(schema)
    expected = {f"w{w}-{i}" for w in range(8) for i in range(count)}
    if shared:
        session = Session(store).for_session("shared")
        history = session.get_history()
        assert len(history) == len(expected) == len({m.id for m in history})
        assert {m.id for m in history} == expected  # one chain: every append extended the leaf
        for worker in range(8):
            own = [m.id for m in history if m.id.startswith(f"w{worker}-")]
            assert own == [f"w{worker}-{i}" for i in range(count)]
    else:
        for worker in range(8):
            history = Session(store).for_session(f"own-{worker}").get_history()
            assert [m.id for m in history] == [f"w{worker}-{i}" for i in range(count)]
    store.close()


def _terminate_backends(schema_app_name: str) -> int:
    import psycopg

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE application_name = %s AND pid <> pg_backend_pid()",
            (schema_app_name,),
        ).fetchall()
    return len(rows)


def test_a_dropped_connection_is_retried_and_the_reappend_is_stored_once(schema):
    from psycopg_pool import ConnectionPool

    from sessions_core.stores.postgres import PostgresStore

    app = f"sessions-{schema}"
    pool = ConnectionPool(
        postgres_url(), min_size=2, max_size=2, kwargs={"autocommit": True, "application_name": app}, open=True
    )
    pool.wait()
    store = PostgresStore(pool, schema=schema)
    session = Session(store).for_session("s")
    session.append_message(_msg("before"))
    assert _terminate_backends(app) >= 1
    time.sleep(0.2)
    result = session.append_message(_msg("after"))  # transparent retry on a fresh connection
    assert result.inserted
    again = session.append_message(_msg("after"))
    assert not again.inserted
    assert [m.id for m in session.get_history()] == ["before", "after"]
    store.close()
    assert not pool.closed  # the caller's pool stays open
    pool.close()


def test_a_dropped_user_connection_gives_a_clear_error_and_no_half_write(schema):
    import psycopg

    from sessions_core.stores.postgres import PostgresStore

    app = f"sessions-conn-{schema}"
    conn = psycopg.connect(postgres_url(), autocommit=True, application_name=app)
    store = PostgresStore(conn, schema=schema)
    session = Session(store).for_session("s")
    session.append_message(_msg("kept"))
    _terminate_backends(app)
    with pytest.raises(StoreError, match="connection"):
        session.append_message(_msg("lost"))
    store.close()
    assert not conn.closed or conn.broken  # the store never closes the caller's connection
    fresh = _store(schema)
    assert [m.id for m in Session(fresh).for_session("s").get_history()] == ["kept"]
    assert Session(fresh).for_session("s").append_message(_msg("lost")).inserted
    fresh.close()


def test_urls_open_sessions_and_managers(schema):
    """A plain URL works unchanged (the default schema); the test cleans up after itself."""
    unique = schema
    with Session(postgres_url()).for_session(unique) as session:
        session.append_message(_msg("m"))
        assert session.get_message("m").text == "text of m"
        session.clear_messages()
    with SessionManager(postgres_url(), namespace=unique) as manager:
        info = manager.create("chat")
        manager.append(info.id, _msg("x"))
        assert [i.name for i in manager.list_sessions()] == ["chat"]
        assert manager.delete(info.id)


def test_a_libpq_key_value_string_opens_postgresql_and_no_error_shows_its_password(schema):
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from sessions_core import StoreUnavailableError
    from sessions_core.stores.postgres import PostgresStore

    key_value = make_conninfo(**conninfo_to_dict(postgres_url()))  # "host=... dbname=..."
    assert "://" not in key_value
    with SessionManager(key_value, namespace=schema) as manager:  # not a SQLite file of that name
        assert type(manager.store).__name__ == "PostgresStore"
        info = manager.create("chat")
        manager.append(info.id, _msg("x"))
        assert manager.delete(info.id)
    refused = PostgresStore("host=127.0.0.1 port=1 dbname=none connect_timeout=2 password='hun ter2'")
    assert "hun ter2" not in repr(refused)
    with pytest.raises(StoreUnavailableError) as caught:
        refused.setup()
    assert "ter2" not in str(caught.value) and "password=***" in str(caught.value)
    refused.close()


def test_one_thread_of_calls_uses_one_pooled_connection(schema):
    # A first call that found the pool still connecting made it grow a second connection, which
    # calls then took in turn (each on a colder server process: 1.2x PostgresSaver's put time
    # where one connection gives 1.0x).
    store = _store(schema)
    try:
        with SessionManager(store, namespace="one") as manager:
            info = manager.create("chat")
            for n in range(20):
                manager.append(info.id, _msg(f"m{n}"))
                manager.get_history(info.id)
        stats = store._current_pool().get_stats()
        assert stats["pool_size"] == 1 and stats.get("requests_queued", 0) == 0, stats
    finally:
        store.close()


def test_schema_sql_can_be_run_by_an_administrator(schema):
    import psycopg

    from sessions_core.stores.postgres import schema_sql

    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
        conn.execute(schema_sql(schema))
    store = _store(schema, auto_setup=False)
    session = Session(store).for_session("admin")
    session.append_message(_msg("m"))
    assert session.get_path_length() == 1
    store.close()


@pytest.mark.parametrize("suffix", ["$$x", "$body$", "$$body$body_1$$"])
def test_a_schema_name_holding_dollar_quotes_sets_up_andround_trips(suffix):
    """A ``$$`` (or the tag the loader would pick first) in the schema name does not end the
    migrations' function bodies early: setup, every trigger and ``schema_sql`` work (issue 36)."""
    require_postgres()
    import psycopg

    from sessions_core.stores.postgres import schema_sql

    with temporary_schema(suffix) as name:
        store = _store(name)
        try:
            session = Session(store).for_session("s").with_context("memory", max_tokens=100)
            session.append_message(_msg("m1"))
            session.append_messages([_msg("m2"), _msg("m3")])
            session.replace_context_block("memory", "likes tea")  # record_block_version
            store.set_search_entry("s", "kb", "k1", "an entry")  # record_entry_version, recall_queue_entry
            assert [m.id for m in Session(store).for_session("s").get_history()] == ["m1", "m2", "m3"]
            assert session.get_message("m2").text == "text of m2"
            assert store.get_block("s", "memory") == "likes tea"
            assert store.search_entries("s", "kb", "entry", 5) == [("k1", "an entry")]
            session.clear_messages()  # recall_queue_message and collect_blob on delete
            assert session.get_path_length() == 0
        finally:
            store.close()
    with temporary_schema(suffix) as name:
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(schema_sql(name))
        store = _store(name, auto_setup=False)
        try:
            session = Session(store).for_session("admin")
            session.append_message(_msg("m"))
            assert session.get_path_length() == 1
        finally:
            store.close()


def test_missing_schema_without_auto_setup_is_a_clear_error(schema):
    store = _store(schema, auto_setup=False)
    with pytest.raises(StoreError, match="setup"):
        Session(store).get_history()
    store.close()


def test_an_async_pool_is_refused_with_a_clear_message(schema):
    from psycopg_pool import AsyncConnectionPool

    from sessions_core.stores.postgres import PostgresStore

    pool = AsyncConnectionPool(postgres_url(), open=False)
    with pytest.raises(TypeError, match="async pool"):
        PostgresStore(pool)


def test_blocks_stored_before_versions_become_version_1_on_postgres():
    """Migration 0005 on a schema at version 4: every block and search entry becomes version 1,
    and the next write is version 2 (issue 21)."""
    require_postgres()
    import psycopg

    from sessions_core import PostgresStore, Session
    from sessions_core.stores import postgres as postgres_module

    with temporary_schema() as schema:
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            for script in postgres_module._qualified(list(postgres_module.MIGRATIONS[:4]), schema):
                conn.execute(script)
            conn.execute(
                f'INSERT INTO "{schema}".context_blocks VALUES (%s, %s, %s, %s)',
                ("s", "memory", 1_700_000_000_000_000, "likes tea"),
            )
            conn.execute(
                f'INSERT INTO "{schema}".search_entries (session_id, label, key, created_at, updated_at,'
                " content) VALUES ('s', 'kb', 'paris', 1, 2, 'Paris is in France')"
            )
        store = PostgresStore(postgres_url(), schema=schema)
        try:
            assert [(v.version, v.content, v.source) for v in store.block_versions("s", "memory")] == [
                (1, "likes tea", "code")
            ]
            assert [v.content for v in store.block_versions("s", "kb", "paris")] == ["Paris is in France"]
            session = Session(store).for_session("s").with_context("memory", description="m")
            session.replace_context_block("memory", "likes coffee")
            assert [v.version for v in session.get_context_history("memory")] == [2, 1]
        finally:
            store.close()


def test_blocks_become_their_versions_on_postgres():
    """Migration 0007 on a schema at version 6: each block shows what it showed, as its newest
    version, and no version is lost (the cases of the SQLite test)."""
    require_postgres()
    import psycopg

    from sessions_core import PostgresStore
    from sessions_core.stores import postgres as postgres_module

    from .unit.test_sqlite_store import BLOCKS_AT_SCHEMA_9

    with temporary_schema() as schema:
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
            for script in postgres_module._qualified(list(postgres_module.MIGRATIONS[:6]), schema):
                conn.execute(script)
            conn.execute(f'DROP TRIGGER context_blocks_version ON "{schema}".context_blocks')
            for label, (version, content), versions in BLOCKS_AT_SCHEMA_9:
                conn.execute(
                    f'INSERT INTO "{schema}".context_blocks VALUES (%s, %s, 5, %s, %s, %s, NULL)',
                    ("s", label, content, version, "code"),
                )
                for number, text in versions:
                    conn.execute(
                        f'INSERT INTO "{schema}".context_block_versions VALUES (%s, %s, %s, %s, 1, %s, NULL, %s)',
                        ("s", label, "", number, "code", text),
                    )
        store = PostgresStore(postgres_url(), schema=schema)
        try:
            labels = [label for label, _, _ in BLOCKS_AT_SCHEMA_9]
            assert store.get_blocks("s", labels) == {label: row[1] for label, row, _ in BLOCKS_AT_SCHEMA_9}
            assert [(v.version, v.content) for v in store.block_versions("s", "later")] == [
                (3, "current"),
                (2, "imported later"),
                (1, "current"),
            ]
            assert [(v.version, v.content) for v in store.block_versions("s", "other")] == [
                (4, "shown"),
                (3, "another text"),
            ]
            assert [(v.version, v.content) for v in store.block_versions("s", "none")] == [(1, "alone")]
            assert store.stats().blocks == 4
            assert store.write_block("s", "kept", "likes water") == 3
        finally:
            store.close()


def test_ranked_search_skips_what_the_statistics_call_frequent_and_ranks_alike(schema, monkeypatch):
    """A word ANALYZE counts in more messages than a search reads is not read (``Estimated``);
    the rarer words find the candidates, and the result is the one SQLite gives."""
    from sessions_core import SqliteStore, ranking
    from sessions_core.fts import parse_query
    from sessions_core.ranking import Estimated
    from sessions_core.stores.sql import SearchScope

    monkeypatch.setattr(ranking, "POSTINGS", 20)
    messages = [
        {"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": f"common filler {i % 7}"}]}
        for i in range(400)
    ]
    messages[150]["parts"][0]["text"] = "common kestrel sighting"
    stores = [_store(schema), SqliteStore()]
    sessions = [Session(store).for_session("s") for store in stores]
    for session in sessions:
        session.append_messages(messages)
    postgres = stores[0]
    postgres._write(lambda conn: conn.execute(postgres.compile("ANALYZE session_messages")))

    [common], [kestrel] = parse_query("common"), parse_query("kestrel")
    scope = SearchScope("session_messages", session_ids=("s",))
    found = postgres._postings(scope, [common[:1], kestrel[:1]], 21, True)
    assert isinstance(found[0], Estimated) and found[0].frequency > 300
    assert len(found[1]) == 1
    for query in ("what about the common kestrel?", "common", "common filler 3"):
        on_postgres, on_sqlite = ([hit.id for hit in s.search(query, limit=5)] for s in sessions)
        assert on_postgres[0] == on_sqlite[0], query
    assert [hit.id for hit in sessions[0].search("what about the kestrel?")] == ["m150"]
    assert [hit.id for hit in sessions[0].search("common", limit=3)] == ["m399", "m398", "m397"]
    for store in stores:
        store.close()


def test_calls_take_one_round_trip_a_statement_and_a_transaction_one_more(schema):
    # A read of one statement runs in autocommit; one that walks the tree is pipelined after its
    # planner settings; a transaction's BEGIN goes with its first statement, and an append (a
    # batch, a block write) goes with its session's lock and the commit: one round trip.
    store = _store(schema, max_size=1)
    try:
        session = Session(store).for_session("s")
        for n in range(8):  # past psycopg's prepare threshold: no Parse of its own below
            session.append_message(_msg(f"m{n}"))
            session.get_history()
            session.get_token_estimate()
        counts = iter(range(100))
        assert round_trips(store, lambda: session.append_message(_msg(f"x{next(counts)}"))) == 1
        for n in range(8):
            session.append_messages([_msg(f"b{n}-{k}") for k in range(3)])
        assert round_trips(store, lambda: session.append_messages([_msg(f"y{n}") for n in range(3)])) == 1
        assert round_trips(store, lambda: store.set_block("s", "memory", f"fact {next(counts)}")) == 1
        assert round_trips(store, session.get_history) == 1  # the overlays and the path, pipelined
        assert round_trips(store, lambda: session.get_history(raw=True)) == 1
        assert round_trips(store, lambda: session.get_history("m3")) == 1
        assert round_trips(store, session.get_token_estimate) == 1  # the overlays and the leaf's totals, pipelined
        assert round_trips(store, lambda: session.get_token_estimate("m3")) == 1
        assert round_trips(store, session.get_path_length) == 1
        assert round_trips(store, lambda: store.latest_leaf("s")) == 1
        empty = Session(store).for_session("empty")
        assert round_trips(store, empty.get_history) == 1 and empty.get_history() == []
        assert round_trips(store, lambda: empty.get_history(raw=True)) == 1
    finally:
        store.close()


def test_a_batch_sent_with_its_lock_is_stored_whole_or_not_at_all(schema):
    # A batch of small messages is pipelined after its session's lock, in the protocol's implicit
    # transaction: a row refused by the server takes the rows before it away with it.
    import psycopg
    from psycopg import sql

    store = _store(schema, max_size=1)
    try:
        session = Session(store).for_session("s")
        session.append_message(_msg("m0"))
        with psycopg.connect(postgres_url(), autocommit=True) as admin:
            admin.execute(
                sql.SQL(
                    "CREATE FUNCTION {schema}.refuse_bad() RETURNS trigger LANGUAGE plpgsql AS $$"
                    " BEGIN IF NEW.id = 'bad' THEN RAISE EXCEPTION 'refused: %', NEW.id; END IF; RETURN NEW; END $$;"
                    " CREATE TRIGGER refuse_bad BEFORE INSERT ON {schema}.session_messages"
                    " FOR EACH ROW EXECUTE FUNCTION {schema}.refuse_bad()"
                ).format(schema=sql.Identifier(schema))
            )
        with pytest.raises(StoreError, match="refused: bad"):
            session.append_messages([_msg("a"), _msg("b"), _msg("bad")])
        assert [m.id for m in session.get_history()] == ["m0"]
        with pytest.raises(StoreError, match="refused: bad"):  # one message, sent the same way
            session.append_message(_msg("bad"))
        assert [m.id for m in session.get_history()] == ["m0"]
        assert _session_lock_is_free(store, "s")
        session.append_messages([_msg("a"), _msg("b")])
        assert [m.id for m in session.get_history()] == ["m0", "a", "b"]
    finally:
        store.close()


def test_a_session_locked_in_one_schema_leaves_the_same_id_free_in_another(schema):
    # Advisory locks belong to the database: keyed by the session id alone, a write to session
    # "s" of one tenant's schema would wait for a write to "s" of another's.
    store, same = _store(schema), _store(schema, lock_timeout=0.3)
    with temporary_schema() as other_schema:
        elsewhere = _store(other_schema, lock_timeout=0.3)
        holding, release = threading.Event(), threading.Event()

        def hold(conn):
            holding.set()
            release.wait(10)

        holder = threading.Thread(target=store._write, args=(hold,), kwargs={"lock": "s"})
        holder.start()
        try:
            assert holding.wait(10)
            Session(elsewhere).for_session("s").append_message(_msg("elsewhere"))  # does not wait
            with pytest.raises(StoreError, match="lock_timeout"):  # the same schema still waits
                Session(same).for_session("s").append_message(_msg("here"))
        finally:
            release.set()
            holder.join()
            store.close()
            same.close()
        try:
            assert [m.id for m in Session(elsewhere).for_session("s").get_history()] == ["elsewhere"]
        finally:
            elsewhere.close()


def test_planner_settings_and_locks_end_with_their_transaction(schema):
    import psycopg

    store = _store(schema, max_size=1)
    try:
        session = Session(store).for_session("s")
        session.append_message(_msg("m0"))
        seen = store._one("SELECT current_setting('enable_hashjoin')", {}, walk=True)
        assert seen == ("off",)
        assert store._one("SELECT current_setting('enable_hashjoin')", {}) == ("on",)

        def fail(conn):
            conn.execute(
                store.compile(
                    "INSERT INTO session_compactions (session_id, id, summary,"
                    " from_message_id, to_message_id, created_at) VALUES ('s', 'c', 'x', 'm0', 'm0', 0)"
                )
            )
            assert conn.execute("SELECT current_setting('enable_hashjoin')").fetchone() == ("off",)
            raise RuntimeError("the work failed")

        with pytest.raises(RuntimeError, match="the work failed"):
            store._write(fail, lock="s", walk=True)
        with store._current_pool().connection() as conn:
            assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert conn.execute("SELECT current_setting('enable_hashjoin')").fetchone() == ("on",)
        assert _session_lock_is_free(store, "s")
        assert store._all("SELECT id FROM session_compactions", {}) == []  # nothing of it stayed
    finally:
        store.close()
