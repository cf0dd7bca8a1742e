"""PostgreSQL connection strings, told from SQLite paths and shown without their password
(I/O-free, no psycopg)."""

from __future__ import annotations

import re

__all__ = ["hide_password", "is_postgres_conninfo"]

_LIBPQ_KEY_VALUE = re.compile(r"\s*(?:host|hostaddr|port|dbname|user|password|service|sslmode)\s*=")
"""How a libpq ``key=value`` connection string starts (``"host=db dbname=app"``); no file name
of a SQLite database does."""

_URL_USER_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")  # postgresql://user:secret@host
_URL_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")  # ...?password=secret
_KEY_VALUE_PASSWORD = re.compile(r"(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|\S+)")  # password='a b'


def is_postgres_conninfo(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL database: a ``postgresql://`` URL or a libpq
    ``key=value`` string, rather than a SQLite path."""
    return text.startswith(("postgresql://", "postgres://")) or _LIBPQ_KEY_VALUE.match(text) is not None


def hide_password(conninfo: str) -> str:
    """``conninfo`` (a URL or a libpq ``key=value`` string) with its password, wherever it is
    given, replaced by ``***``: what errors, ``repr`` and logs may show."""
    if "://" in conninfo:
        return _URL_QUERY_PASSWORD.sub(r"\1***", _URL_USER_PASSWORD.sub(r"\1***@", conninfo))
    return _KEY_VALUE_PASSWORD.sub(r"\1***", conninfo)
