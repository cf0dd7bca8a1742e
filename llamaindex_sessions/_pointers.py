"""The serialised pointer of a memory or chat store: where its store is, never a password."""

from __future__ import annotations

from typing import Any

from sessions_core import InvalidInputError
from sessions_core.integration import hide_password, is_postgres_conninfo, store_url, url_without_password

__all__ = ["open_store", "store_label", "store_of_uri", "store_schema", "store_url_of"]


def store_schema(owner: Any) -> str | None:
    """The PostgreSQL schema of ``owner``'s store (a session or manager) when not the default."""
    schema = getattr(owner.store, "schema", None) if store_url(owner.store) else None
    return schema if isinstance(schema, str) and schema != "public" else None


def store_url_of(store: str | None) -> str | None:
    """A pointer's ``store`` as ``store_url`` names it (a pointer's path is absolute already), to
    compare pointers without touching the file system."""
    if store and is_postgres_conninfo(store):
        return url_without_password(store)
    return store


def open_store(url: str, schema: str | None) -> Any:
    """What ``Session`` / ``SessionManager`` take to open the store at ``url`` (and ``schema``)."""
    if schema is None:
        return url
    from sessions_core import PostgresStore

    return PostgresStore(url, schema=schema)


def store_of_uri(uri: str) -> str:
    """A SQLAlchemy URI as ``Memory.from_defaults(async_database_uri=...)`` takes it, as our store."""
    scheme, sep, rest = uri.partition("://")
    dialect = scheme.split("+", 1)[0]
    if sep and dialect == "sqlite":
        path = rest[1:] if rest.startswith("/") else rest
        return path or ":memory:"
    if sep and dialect in ("postgresql", "postgres"):
        return f"postgresql://{rest}"
    raise InvalidInputError(
        f"async_database_uri must be a sqlite:// or postgresql:// URI, not {store_label(uri)!r}; or pass store="
    )


def store_label(store: str) -> str:
    """``store`` as an error message may show it (no password)."""
    return hide_password(store)
