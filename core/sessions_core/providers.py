"""Context providers kept in the session's own store (SQLite or Postgres alike).

``StoreContext`` is what ``with_context`` wires when it gets no provider; ``StoreSearchContext``
is passed explicitly for a searchable block. Both may be created unbound and are bound to the
session's store and id when the session wires them (``bind``), so one configuration serves every
session of a manager while each session keeps its own rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._time import from_us
from .errors import ConflictError
from .provenance import write_source
from .searching import search_entries
from .semantic import SemanticRecall
from .stores.base import BlockVersionRow, Store


class _StoreBound:
    """A provider kept in a store: every write is a new version of the block (of the entry, for
    a keyed one), the newest ``keep_versions`` kept (all by default)."""

    def __init__(
        self,
        store: Store | None = None,
        session_id: str = "",
        label: str | None = None,
        keep_versions: int | None = None,
        recall: SemanticRecall | None = None,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.label = label
        self.keep_versions = keep_versions
        self.recall = recall
        """The session's semantic recall (a searchable block's entries are then found by meaning too)."""
        self.last_version: int | None = None
        """The version the last write through this provider recorded."""

    def bind(
        self,
        store: Store,
        session_id: str,
        label: str,
        keep_versions: int | None = None,
        recall: SemanticRecall | None = None,
    ) -> _StoreBound:
        """A copy of this provider on ``store`` for ``session_id``; explicit settings win."""
        keep = self.keep_versions if self.keep_versions is not None else keep_versions
        return type(self)(
            self.store or store, self.session_id or session_id, self.label or label, keep, self.recall or recall
        )

    def versions(self, key: str | None = None, limit: int | None = None) -> list[BlockVersionRow]:
        """The block's (``key``: the entry's) versions, newest first."""
        store, session_id, label = self._where()
        return store.block_versions(session_id, label, key, limit)

    def _write(self, content: str, key: str | None = None) -> None:
        store, session_id, label = self._where()
        source, tool_call_id = write_source()
        self.last_version = store.write_block(
            session_id, label, content, key=key, source=source, tool_call_id=tool_call_id, keep=self.keep_versions
        )

    def init(self, label: str) -> None:
        if self.label is None:
            self.label = label

    def _where(self) -> tuple[Store, str, str]:
        if self.store is None or self.label is None:
            raise ConflictError(f"{type(self).__name__} is not bound to a store and label")
        return self.store, self.session_id, self.label

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_id={self.session_id!r}, label={self.label!r})"


class StoreContext(_StoreBound):
    """A writable block stored per session and label."""

    def get(self) -> str | None:
        store, session_id, label = self._where()
        return store.get_block(session_id, label)

    @staticmethod
    def get_many(providers: Sequence[StoreContext]) -> list[str | None]:
        """``get()`` of each of ``providers``, those on one store and session read together."""
        groups: dict[tuple[int, str], list[StoreContext]] = {}
        for provider in providers:
            store, session_id, _ = provider._where()
            groups.setdefault((id(store), session_id), []).append(provider)
        found: dict[int, str | None] = {}
        for group in groups.values():
            store, session_id, _ = group[0]._where()
            contents = store.get_blocks(session_id, [provider._where()[2] for provider in group])
            found.update((id(provider), contents.get(provider._where()[2])) for provider in group)
        return [found[id(provider)] for provider in providers]

    def set(self, content: str) -> None:
        self._write(content)


class StoreSearchContext(_StoreBound):
    """A searchable block: keyed entries stored per session and label, found by full-text search."""

    result_limit = 10

    def get(self) -> str | None:
        store, session_id, label = self._where()
        count = store.count_search_entries(session_id, label)
        return f"{count} entries indexed." if count else None

    def search(self, query: str) -> str | None:
        """The entries matching ``query`` by words (and by meaning, with semantic recall)."""
        store, session_id, label = self._where()
        hits = search_entries(store, self.recall, session_id, label, query, self.result_limit)
        if not hits:
            return None
        return "\n\n".join(f"[{key}]{_written(store, session_id, label, key)}\n{content}" for key, content in hits)

    def set(self, key: str, content: str) -> None:
        if self.recall is not None:
            self.recall.enable(self._where()[1])
        self._write(content, key)
        if self.recall is not None:
            self.recall.notify()


class StorePromptCache:
    """The frozen system prompt persisted per session (``with_cached_prompt()``)."""

    def __init__(self, store: Store, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    def get(self) -> str | None:
        return self.store.get_cached_prompt(self.session_id)

    def set(self, content: str) -> None:
        self.store.set_cached_prompt(self.session_id, content)


def bind_provider(
    provider: Any,
    store: Store,
    session_id: str,
    label: str,
    keep_versions: int | None = None,
    recall: SemanticRecall | None = None,
) -> Any:
    """The provider a session uses for a block: store-backed ones bound to it, others as given."""
    if provider is None:
        return StoreContext(store, session_id, label, keep_versions)
    if isinstance(provider, _StoreBound):
        return provider.bind(store, session_id, label, keep_versions, recall)
    return provider


def _written(store: Store, session_id: str, label: str, key: str) -> str:
    """`` (2023-05-08 13:56 UTC)``: when an entry was last written, as ``search_context`` shows
    it (nothing for a store that keeps no versions)."""
    versions = store.block_versions(session_id, label, key, limit=1)
    return f" ({from_us(versions[0].created_at_us).strftime('%Y-%m-%d %H:%M')} UTC)" if versions else ""
