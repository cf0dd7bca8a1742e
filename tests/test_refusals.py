"""Refusals that say what was wrong (issue 36, item 4): a message nested too deeply, a lone
surrogate in a message id, a NUL in a PostgreSQL text of any size, a PostgreSQL server out of
disk. On both stores where the input concerns both."""

from __future__ import annotations

import re
from typing import Any

import pytest

from sessions_core import MessageValidationError, Session
from sessions_core.errors import StoreError
from sessions_core.messages import MAX_JSON_DEPTH

from .test_hostile_input import fresh_id, is_postgres, seeded_session, store  # noqa: F401 - a fixture

__all__ = ["store"]


def _lists(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


def _objects(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"k": value}
    return value


@pytest.mark.parametrize("make", [_lists, _objects])
def test_a_message_nested_too_deeply_says_how_deep_is_allowed(store: Any, make: Any) -> None:
    session = seeded_session(store)
    # message, parts, part: 3 levels around the data
    deepest = {"id": "ok", "role": "user", "parts": [{"type": "data-x", "data": make(MAX_JSON_DEPTH - 3)}]}
    assert session.append_message(deepest).inserted
    assert session.get_message("ok") is not None
    too_deep = {"id": "deep", "role": "user", "parts": [{"type": "data-x", "data": make(400)}]}
    with pytest.raises(MessageValidationError) as caught:
        session.append_message(too_deep)
    text = str(caught.value)
    assert "Circular" not in text
    assert "nested 403 levels deep" in text and f"at most {MAX_JSON_DEPTH} levels" in text
    assert "invalid message 'deep'" in text
    assert session.get_message("deep") is None


def test_a_lone_surrogate_in_a_message_id_names_the_field_and_the_surrogate(store: Any) -> None:
    session = seeded_session(store)
    for ident, surrogate in (("m\ud800", r"'\ud800' at position 1"), ("\udfffx", r"'\udfff' at position 0")):
        with pytest.raises(MessageValidationError, match=re.escape(f"id holds a lone surrogate {surrogate}")) as caught:
            session.append_message({"id": ident, "role": "user", "parts": [{"type": "text", "text": "hi"}]})
        assert "unable to parse raw data" not in str(caught.value)
    assert session.get_path_length() == 1


@pytest.mark.parametrize("size", [10, 2 << 20], ids=["small", "over-1-MiB"])
def test_a_nul_in_a_postgres_text_of_any_size_names_the_field(store: Any, size: int) -> None:
    session = seeded_session(store)
    text = "a" * size + "\x00b"
    message = {"id": "nul", "role": "user", "parts": [{"type": "text", "text": text}]}
    if not is_postgres(store):
        assert session.append_message(message).inserted
        return
    for write in (lambda: session.append_message(message), lambda: session.append_messages([message])):
        with pytest.raises(StoreError, match="PostgreSQL text fields cannot contain NUL") as caught:
            write()
        assert f"the text (its text parts) of message 'nul' holds one at position {size}" in str(caught.value)
        assert "COPY" not in str(caught.value)
    with pytest.raises(StoreError, match="the id of message 'n\\\\x00l' holds one at position 1"):
        session.append_message({"id": "n\x00l", "role": "user", "parts": [{"type": "text", "text": "x"}]})
    assert session.get_path_length() == 1


def test_a_postgres_server_out_of_disk_says_the_disk_is_full(store: Any) -> None:
    """A real server error of SQLSTATE 53100 (raised by a trigger, as no disk can be filled
    here): the message says the disk is full, not that the connection failed."""
    if not is_postgres(store):
        pytest.skip("PostgreSQL only")
    import psycopg
    from psycopg import sql

    from .postgres import postgres_url

    table = sql.Identifier(store.schema, "session_messages")
    function = sql.Identifier(store.schema, "full_disk")
    session = seeded_session(store)
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN RAISE EXCEPTION"
                " 'could not extend file: No space left on device' USING ERRCODE = 'disk_full'; END $f$"
            ).format(function)
        )
        conn.execute(
            sql.SQL("CREATE TRIGGER full_disk BEFORE INSERT ON {} FOR EACH ROW EXECUTE FUNCTION {}()").format(
                table, function
            )
        )
    try:
        for write in (
            lambda: session.append_message({"id": "x", "role": "user", "parts": [{"type": "text", "text": "x"}]}),
            lambda: session.append_messages([{"id": "y", "role": "user", "parts": []}]),
        ):
            with pytest.raises(StoreError, match="disk is full") as caught:
                write()
            assert "53100" in str(caught.value) and "connection failed" not in str(caught.value)
            assert isinstance(caught.value.__cause__, psycopg.errors.DiskFull)
    finally:
        with psycopg.connect(postgres_url(), autocommit=True) as conn:
            conn.execute(sql.SQL("DROP TRIGGER full_disk ON {}").format(table))
            conn.execute(sql.SQL("DROP FUNCTION {}()").format(function))
    assert Session(store).for_session(fresh_id()).append_message({"id": "z", "role": "user", "parts": []}).inserted
