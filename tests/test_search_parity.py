"""SQLite and PostgreSQL find the same messages for the same query (generated texts in every
script, queries cut from them), and any query is a valid ``tsquery``."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sessions_core import PostgresStore, Session, SqliteStore
from sessions_core.fts import parse_query, tsquery_literal

from .postgres import postgres_url, require_postgres, temporary_schema

PIECES = [
    "deploy",
    "deploying",
    "deployment",
    "Deployed",
    "café",
    "CAFE",
    "naïve",
    "getUserById",
    "user_service.py",
    "ERR_CONN_RESET",
    "v1.2.3",
    "HTTPServer",
    "cat",
    "category",
    "我们",
    "周五",
    "部署",
    "生产环境",
    "東京",
    "で",
    "ラーメン",
    "を",
    "食べました",
    "금요일에",
    "배포합니다",
    "새",
    "버전을",
    "Straße",
    "Ωmega",
    "данные",
    "à",
    "x86_64",
    "don't",
    "e.g.",
    "—",
    "!",
    "?",
    " ",
    "  ",
    "\n",
    "。",
    "、",
    "1.5",
    "42",
]


def _texts(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice(PIECES + [" "] * 8) for _ in range(rng.randint(1, 14))) for _ in range(count)]


def _queries(texts: list[str], seed: int) -> list[str]:
    rng = random.Random(seed)
    queries = list(PIECES)
    for text in rng.sample(texts, 60):
        start = rng.randrange(len(text))
        queries.append(text[start : start + rng.randint(1, 12)])
    queries += ["depl", "UserById", "getuser", "产环", "ーメ", "cafe deploy", "生产 deploy", "de", "東"]
    return queries


@pytest.fixture(scope="module")
def both():
    require_postgres()
    texts = _texts(7, 400)
    with temporary_schema() as schema:
        sessions = []
        for store in (SqliteStore(), PostgresStore(postgres_url(), schema=schema)):
            session = Session(store)
            session.append_messages(
                [{"id": f"m{i}", "role": "user", "parts": [{"type": "text", "text": t}]} for i, t in enumerate(texts)]
            )
            sessions.append(session)
        yield texts, sessions
        for session in sessions:
            session.close()
            session.store.close()


@pytest.mark.parametrize("match", ["all", "any"])
def test_the_same_query_finds_the_same_messages_on_both(both, match):
    texts, (sqlite, postgres) = both
    compared = 0
    for query in _queries(texts, 11):
        on_sqlite = {hit.id for hit in sqlite.search(query, limit=1000, match=match)}
        on_postgres = {hit.id for hit in postgres.search(query, limit=1000, match=match)}
        assert on_sqlite == on_postgres, query
        compared += bool(on_sqlite)
    assert compared > 50  # most queries find something: the comparison is not of empty sets


def test_ranked_search_orders_the_same_on_both(both):
    """One ranking function over the same postings and terms: the same order, ties to the newer."""
    texts, (sqlite, postgres) = both
    rng = random.Random(5)
    compared = 0
    for text in rng.sample(texts, 80):
        words = text.split()
        query = " ".join(rng.sample(words, min(len(words), rng.randint(1, 4)))) + " what did the"
        on_sqlite = [hit.id for hit in sqlite.search(query, limit=10)]
        assert on_sqlite == [hit.id for hit in postgres.search(query, limit=10)], query
        compared += len(on_sqlite) > 1
    assert compared > 40


QUERIES = st.one_of(
    st.text(),
    st.lists(
        st.sampled_from(["'", "\\", ":*", "<->", "&", "|", "!", "(", ")", "''", "\\'", "*", "deploy", "東京"]),
        max_size=20,
    ).map(" ".join),
    st.lists(st.sampled_from(PIECES), max_size=8).map("".join),
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(QUERIES)
def test_any_query_is_a_valid_tsquery(both, query):
    _, (_, postgres) = both
    literal = tsquery_literal(parse_query(query))
    if literal is None:
        return
    store = postgres.store
    store._all("SELECT CAST(:q AS tsquery)", {"q": literal})
    assert isinstance(postgres.search(query), list)
