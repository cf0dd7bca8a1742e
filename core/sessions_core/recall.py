"""Semantic recall, the pure part: the vector index protocol, chunking, vector ids and fusion.

An index is the user's own (a LangChain ``VectorStore``, a LlamaIndex vector store with an embed
model, ...) behind the small :class:`VectorIndex` protocol the adapters provide. The store stays
the source of truth: what to index is queued in its outbox and sent after the commit
(``semantic.py``); this module does no I/O.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .errors import InvalidInputError

SEARCH_MODES = ("text", "semantic", "hybrid")

MESSAGE = "message"
ENTRY = "entry"
SESSION = "session"
"""Outbox kinds: a message, a searchable block's entry, or a whole session to reconcile."""

ENTRY_SEPARATOR = "\x1f"
"""Between a searchable block's label and the entry's key in an outbox or vector reference."""

RRF_K = 60
"""Reciprocal-rank fusion's constant (Cormack et al.): a hit at rank r scores 1 / (RRF_K + r)."""

_NAMESPACE = uuid.UUID("3f0c1c9e-5d7a-4c55-9a53-51b2b3f4c0de")


class VectorHit(NamedTuple):
    """One result of :meth:`VectorIndex.search`: a vector id and its similarity (higher is closer)."""

    id: str
    score: float


@runtime_checkable
class VectorIndex(Protocol):
    """What semantic recall needs of a vector store, sync and async.

    ``add`` stores texts under the given ids (an id stored already is replaced), embedding them
    itself; ``delete`` removes ids (unknown ids are ignored); ``search`` returns the ``k``
    closest vectors whose metadata match ``where``, best first: each key equal to the value
    given, or to one of them for a list. Hits outside ``where`` are discarded by the caller anyway, so an index
    that cannot filter loses recall, never isolation.
    """

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None: ...

    def delete(self, ids: Sequence[str]) -> None: ...

    def search(self, query: str, k: int, where: Mapping[str, Any]) -> list[VectorHit]: ...

    async def aadd(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None: ...

    async def adelete(self, ids: Sequence[str]) -> None: ...

    async def asearch(self, query: str, k: int, where: Mapping[str, Any]) -> list[VectorHit]: ...


def check_mode(mode: str, recall_on: bool) -> str:
    """``mode`` if it is a search mode this session can run (``"text"`` only without recall)."""
    if mode not in SEARCH_MODES:
        raise InvalidInputError(f"mode must be one of {', '.join(map(repr, SEARCH_MODES))}, not {mode!r}")
    if mode != "text" and not recall_on:
        raise InvalidInputError(f"mode={mode!r} needs semantic recall: call with_semantic_recall(index) first")
    return mode


def entry_ref(label: str, key: str) -> str:
    """The reference of a searchable block's entry."""
    return f"{label}{ENTRY_SEPARATOR}{key}"


def split_entry_ref(ref: str) -> tuple[str, str]:
    label, _, key = ref.partition(ENTRY_SEPARATOR)
    return label, key


def vector_id(session_id: str, kind: str, ref: str, chunk: int) -> str:
    """The id of one chunk's vector: a UUID (what every vector store accepts) derived from
    where the chunk comes from, so that sending it again replaces it."""
    return str(uuid.uuid5(_NAMESPACE, f"{session_id}\x00{kind}\x00{ref}\x00{chunk}"))


def digest(text: str) -> str:
    """What tells whether an indexed text changed."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def chunk_text(text: str, size: int, overlap: int) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, each starting about ``overlap``
    characters before the previous one ended; cuts fall between words where there are spaces in
    reach, so no word is split unless it alone is longer than ``size / 2``."""
    if len(text) <= size:
        return [text] if text.strip() else []
    chunks: list[str] = []
    start = 0
    while start < len(text):
        end = min(start + size, len(text))
        if end < len(text):
            cut = _last_space(text, start + size // 2, end)
            if cut is not None:
                end = cut
        piece = text[start:end].strip()
        if piece:
            chunks.append(piece)
        if end >= len(text):
            break
        resume = end - overlap
        space = _SPACE.search(text, resume, end) if resume > start else None
        start = space.end() if space is not None else end
    return chunks


_SPACE = re.compile(r"\s+")


def _last_space(text: str, lo: int, hi: int) -> int | None:
    """The position of the last whitespace in ``text[lo:hi]``, or ``None``."""
    for position in range(hi - 1, lo - 1, -1):
        if text[position].isspace():
            return position
    return None


def fuse(rankings: Iterable[Sequence[Any]], limit: int, k: int = RRF_K) -> list[Any]:
    """Reciprocal-rank fusion of rankings of hashable keys, best first; each key once. Ties
    keep the order of first appearance (the first ranking's order first)."""
    scores: dict[Any, float] = {}
    for ranking in rankings:
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + 1.0 / (k + rank)
    order = {key: position for position, key in enumerate(scores)}
    return sorted(scores, key=lambda key: (-scores[key], order[key]))[:limit]


def unique(keys: Iterable[Any]) -> Iterator[Any]:
    """``keys`` in order, each once."""
    return iter(dict.fromkeys(keys))
