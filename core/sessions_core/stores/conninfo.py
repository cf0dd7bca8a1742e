"""PostgreSQL connection strings, told from SQLite paths and shown without their password
(I/O-free, no psycopg)."""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

__all__ = ["hide_password", "is_postgres_conninfo", "url_without_password"]

_URL_SCHEMES = ("postgresql://", "postgres://")
_LIBPQ_KEY_VALUE = re.compile(r"\s*(?:host|hostaddr|port|dbname|user|password|service|sslmode)\s*=")
"""How a libpq ``key=value`` connection string starts (``"host=db dbname=app"``); no file name
of a SQLite database does."""

_URL_USER_PASSWORD = re.compile(r"(://[^:/@]*:)[^@]*@")  # postgresql://user:secret@host
_URL_QUERY_PASSWORD = re.compile(r"([?&]password=)[^&#]*")  # ...?password=secret
_KEY_VALUE_PASSWORD = re.compile(r"(\bpassword\s*=\s*)(?:'(?:[^'\\]|\\.)*'|(?:\\.|\S)+)")  # password='a b', a\ b


def is_postgres_conninfo(text: str) -> bool:
    """Whether ``text`` names a PostgreSQL database: a ``postgresql://`` URL or a libpq
    ``key=value`` string, rather than a SQLite path."""
    return text.startswith(_URL_SCHEMES) or _LIBPQ_KEY_VALUE.match(text) is not None


def hide_password(conninfo: str) -> str:
    """``conninfo`` (a URL or a libpq ``key=value`` string) with its password, wherever it is
    given, replaced by ``***``: what errors, ``repr`` and logs may show."""
    if "://" in conninfo:
        # A user and password end at an '@': substituted before the last, each match is found
        # once (tried on the whole text, each '://' not followed by one rescanned the rest).
        end = conninfo.rfind("@") + 1
        conninfo = _URL_USER_PASSWORD.sub(r"\1***@", conninfo[:end]) + conninfo[end:]
        return _URL_QUERY_PASSWORD.sub(r"\1***", conninfo)
    return _KEY_VALUE_PASSWORD.sub(r"\1***", conninfo)


def url_without_password(conninfo: str) -> str:
    """``conninfo`` (a URL or a libpq ``key=value`` string) as a ``postgresql://`` URL without
    its password; a URL keeps its shape, a ``key=value`` string becomes query parameters."""
    if conninfo.startswith(_URL_SCHEMES):
        scheme, netloc, path, query, fragment = urlsplit(conninfo)
        userinfo, at, hosts = netloc.rpartition("@")
        if at:
            user = userinfo.partition(":")[0]
            netloc = f"{user}@{hosts}" if user else hosts
        kept = [(key, value) for key, value in parse_qsl(query, keep_blank_values=True) if key != "password"]
        return urlunsplit((scheme, netloc, path, urlencode(kept), fragment))
    from psycopg.conninfo import conninfo_to_dict  # a key=value string only exists with the postgres extra

    params = {key: value for key, value in conninfo_to_dict(conninfo).items() if key != "password"}
    dbname = str(params.pop("dbname", ""))
    return "postgresql:///" + quote(dbname, safe="") + ("?" + urlencode(params) if params else "")
