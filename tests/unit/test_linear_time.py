"""Text from outside (a message, a connection string, a CLI argument, a tsvector read back) is
read in linear time: a pattern tried from each character of a long run, that rescans the rest
of the run from there, is quadratic (80 KB of quotes took 98 s in ``tsvector_terms``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from sessions_core.errors import InvalidInputError
from sessions_core.fts import tsvector_literal, tsvector_terms
from sessions_core.messages import SessionMessage, storage_json
from sessions_core.retention import parse_duration
from sessions_core.stores.conninfo import hide_password

SIZE = 200_000


def _refused_duration(text: str) -> None:
    with pytest.raises(InvalidInputError):
        parse_duration(text)


def _stored(text: str) -> None:
    storage_json(SessionMessage.model_validate({"id": "m", "role": "user", "parts": [{"type": "text", "text": text}]}))


@pytest.mark.parametrize(
    ("read", "text"),
    [
        (tsvector_terms, "'" * SIZE),
        (tsvector_terms, "'':" * (SIZE // 3)),
        (hide_password, "://:" * (SIZE // 4)),
        (_refused_duration, " " * SIZE + "x"),
        (_refused_duration, "1" * SIZE),
        (_stored, ("1" * 4300 + "x") * (SIZE // 4301)),
    ],
    ids=["tsvector-quotes", "tsvector-pairs", "conninfo-schemes", "duration-spaces", "duration-digits", "digit-runs"],
)
def test_hostile_text_is_read_in_linear_time(read: Callable[[str], Any], text: str) -> None:
    start = time.perf_counter()
    read(text)
    assert time.perf_counter() - start < 3.0


def test_the_linear_patterns_read_what_they_did() -> None:
    text = "it's O'Brien's ''quoted'' text"
    literal = tsvector_literal(text)
    assert tsvector_terms(literal) == tsvector_terms(literal.replace(" ", "  "))
    assert "'" not in "".join(tsvector_terms(literal))
    assert hide_password("postgresql://ada:s3cr/t@db:5432/app?password=x&sslmode=require") == (
        "postgresql://ada:***@db:5432/app?password=***&sslmode=require"
    )
    assert hide_password("postgresql://db/app") == "postgresql://db/app"
    assert parse_duration(" 1d12h ").total_seconds() == 36 * 3600
    assert parse_duration("1.5h 30m").total_seconds() == 2 * 3600
    for bad in ("", "d", "1x", "1d x", "12"):
        _refused_duration(bad)
