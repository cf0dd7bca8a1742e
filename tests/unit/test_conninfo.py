"""PostgreSQL connection strings: told from SQLite paths, and never shown with their password."""

from __future__ import annotations

import pytest

from sessions_core.stores.conninfo import hide_password, is_postgres_conninfo


@pytest.mark.parametrize(
    ("conninfo", "shown"),
    [
        ("postgresql://ada:hunter2@db:5432/app", "postgresql://ada:***@db:5432/app"),
        (
            "postgres://ada@db/app?password=hunter2&sslmode=require",
            "postgres://ada@db/app?password=***&sslmode=require",
        ),
        ("host=db dbname=app user=ada password=hunter2", "host=db dbname=app user=ada password=***"),
        ("host=db password = 'hun ter\\'2' dbname=app", "host=db password = *** dbname=app"),
        ("host=db password=hun\\ ter2 dbname=app", "host=db password=*** dbname=app"),
        ("postgresql://ada@db/app", "postgresql://ada@db/app"),
        ("host=db dbname=app", "host=db dbname=app"),
    ],
)
def test_a_password_is_hidden_wherever_the_conninfo_gives_it(conninfo: str, shown: str) -> None:
    assert hide_password(conninfo) == shown


@pytest.mark.parametrize(
    ("store", "postgres"),
    [
        ("postgresql://db/app", True),
        ("postgres://db/app", True),
        ("host=db dbname=app", True),
        ("  dbname=app", True),
        ("service=memory", True),
        ("memory.db", False),
        (":memory:", False),
        ("/data/host=db.sqlite", False),
        ("notes=2024.db", False),
    ],
)
def test_a_url_or_a_libpq_key_value_string_names_postgresql_and_anything_else_a_sqlite_path(
    store: str, postgres: bool
) -> None:
    assert is_postgres_conninfo(store) is postgres
