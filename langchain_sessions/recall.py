"""Semantic recall on a LangChain ``VectorStore`` (which carries its ``Embeddings``).

``VectorStoreRecall(vector_store)`` is the index ``Session.with_semantic_recall`` /
``SessionManager.with_semantic_recall`` take; ``SynonymEmbeddings`` is an offline, deterministic
``Embeddings`` for trying it and for tests.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import InMemoryVectorStore, VectorStore

from sessions_core import VectorHit
from sessions_core.integration import metadata_matches, synonym_embedding

Where = Mapping[str, Any]


def dict_filter(where: Where) -> dict[str, Any]:
    """``where`` as the Mongo-style dict most stores take (PGVector, Pinecone, ...)."""
    return {key: {"$in": list(value)} if isinstance(value, (list, tuple)) else value for key, value in where.items()}


def chroma_filter(where: Where) -> dict[str, Any] | None:
    """``where`` as Chroma wants it: one condition per key, joined by ``$and`` (``None`` for
    none: Chroma refuses ``{}`` and an ``$and`` of fewer than two conditions)."""
    conditions = [{key: value} for key, value in dict_filter(where).items()]
    if not conditions:
        return None
    return conditions[0] if len(conditions) == 1 else {"$and": conditions}


def qdrant_filter(where: Where) -> Any:
    """``where`` as a Qdrant ``Filter`` over the payload's ``metadata``."""
    # The caller's own qdrant-client (not a dependency of this package), imported by name.
    models = importlib.import_module("qdrant_client.models")

    def match(value: Any) -> Any:
        return models.MatchAny(any=list(value)) if isinstance(value, (list, tuple)) else models.MatchValue(value=value)

    return models.Filter(
        must=[models.FieldCondition(key=f"metadata.{key}", match=match(value)) for key, value in where.items()]
    )


def python_filter(where: Where) -> Callable[[Any], bool]:
    """``where`` as a predicate on a ``Document`` (``InMemoryVectorStore``)."""
    return lambda document: metadata_matches(document.metadata, where)


def default_filter(vector_store: VectorStore) -> Callable[[Where], Any]:
    """The filter translation for ``vector_store``'s kind (by its class name)."""
    name = type(vector_store).__name__
    if isinstance(vector_store, InMemoryVectorStore):
        return python_filter
    if name == "Chroma":
        return chroma_filter
    if name in {"QdrantVectorStore", "Qdrant"}:
        return qdrant_filter
    if name == "FAISS":
        return lambda where: lambda metadata: metadata_matches(metadata, where)
    return dict_filter


class VectorStoreRecall:
    """A LangChain ``VectorStore`` as semantic recall's index (``sessions_core.VectorIndex``).

    Texts are added with ``add_texts(texts, metadatas, ids=...)`` (the store embeds them with
    its own ``Embeddings``; a store must replace a text whose id it holds, as the in-memory,
    Chroma, PGVector and Qdrant stores do), deleted with ``delete(ids=...)`` and searched with
    ``similarity_search_with_score(query, k, filter=...)``. ``filter`` turns the metadata
    condition (``{"session_id": ..., "kind": ...}``) into the store's own filter; the default
    knows the in-memory store, Chroma, Qdrant and FAISS, and gives other stores a Mongo-style dict.
    """

    def __init__(self, vector_store: VectorStore, *, filter: Callable[[Where], Any] | None = None) -> None:  # noqa: A002
        if not isinstance(vector_store, VectorStore):
            raise TypeError(f"vector_store must be a LangChain VectorStore, not {type(vector_store).__name__}")
        self.vector_store = vector_store
        self.filter = filter or default_filter(vector_store)

    def __repr__(self) -> str:
        return f"VectorStoreRecall({type(self.vector_store).__name__})"

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        self.vector_store.add_texts(list(texts), metadatas=[dict(m) for m in metadatas], ids=list(ids))

    async def aadd(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        await self.vector_store.aadd_texts(list(texts), metadatas=[dict(m) for m in metadatas], ids=list(ids))

    def delete(self, ids: Sequence[str]) -> None:
        self.vector_store.delete(ids=list(ids))

    async def adelete(self, ids: Sequence[str]) -> None:
        await self.vector_store.adelete(ids=list(ids))

    def search(self, query: str, k: int, where: Where) -> list[VectorHit]:
        found = self.vector_store.similarity_search_with_score(query, k=k, filter=self.filter(where))
        return _hits(found)

    async def asearch(self, query: str, k: int, where: Where) -> list[VectorHit]:
        found = await self.vector_store.asimilarity_search_with_score(query, k=k, filter=self.filter(where))
        return _hits(found)


def _hits(found: Sequence[tuple[Any, float]]) -> list[VectorHit]:
    """The store's results, best first, by vector id (the document's id, or the one we stored)."""
    hits = []
    for document, score in found:
        vid = document.id or document.metadata.get("vector_id")
        if vid:
            hits.append(VectorHit(str(vid), float(score)))
    return hits


class SynonymEmbeddings(Embeddings):
    """A deterministic offline ``Embeddings`` in which chosen synonyms lie close together
    (``sessions_core.integration.synonym_embedding``): for trying semantic recall and for tests,
    never for production. ``groups`` adds synonym groups to the built-in ones."""

    def __init__(self, groups: Sequence[Sequence[str]] = (), dimensions: int = 256) -> None:
        self.groups = tuple(tuple(group) for group in groups)
        self.dimensions = dimensions

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return synonym_embedding(text, dimensions=self.dimensions, groups=self.groups)
