"""Semantic recall on a LlamaIndex vector store and embed model.

``VectorStoreRecall(vector_store, embed_model)`` (or ``VectorStoreRecall.from_index(index)`` for
a ``VectorStoreIndex``) is the index ``Session.with_semantic_recall`` /
``SessionManager.with_semantic_recall`` take; ``SynonymEmbedding`` is an offline, deterministic
``BaseEmbedding`` for trying it and for tests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryResult,
)
from pydantic import Field

from sessions_core import VectorHit
from sessions_core.integration import synonym_embedding

Where = Mapping[str, Any]


def metadata_filters(where: Where) -> MetadataFilters:
    """``where`` as LlamaIndex ``MetadataFilters`` (each key equal, or in a list)."""
    return MetadataFilters(
        filters=[
            MetadataFilter(key=key, value=list(value), operator=FilterOperator.IN)
            if isinstance(value, (list, tuple))
            else MetadataFilter(key=key, value=value, operator=FilterOperator.EQ)
            for key, value in where.items()
        ]
    )


class VectorStoreRecall:
    """A LlamaIndex vector store with an embed model as semantic recall's index
    (``sessions_core.VectorIndex``).

    Texts are embedded in batches with ``embed_model`` and added as ``TextNode`` s whose ids are
    the vector ids (a store replaces a node whose id it holds, as ``SimpleVectorStore`` and the
    database-backed stores do); deletes use ``delete_nodes``; a search embeds the query and asks
    ``query`` with ``MetadataFilters``. The store need not keep texts: results are read back
    from the session's own store.
    """

    def __init__(self, vector_store: BasePydanticVectorStore, embed_model: BaseEmbedding) -> None:
        if not isinstance(vector_store, BasePydanticVectorStore):
            hint = "; for an index use VectorStoreRecall.from_index(index)" if _is_index(vector_store) else ""
            raise TypeError(f"vector_store must be a LlamaIndex vector store, not {type(vector_store).__name__}{hint}")
        if not isinstance(embed_model, BaseEmbedding):
            raise TypeError(f"embed_model must be a LlamaIndex BaseEmbedding, not {type(embed_model).__name__}")
        self.vector_store = vector_store
        self.embed_model = embed_model

    @classmethod
    def from_index(cls, index: Any) -> VectorStoreRecall:
        """The vector store and embed model of a ``VectorStoreIndex`` (``TypeError`` for anything else)."""
        if not _is_index(index):
            raise TypeError(f"from_index takes a VectorStoreIndex, not {type(index).__name__}")
        return cls(index.vector_store, index._embed_model)

    def __repr__(self) -> str:
        return f"VectorStoreRecall({type(self.vector_store).__name__}, {type(self.embed_model).__name__})"

    @staticmethod
    def _nodes(
        ids: Sequence[str],
        texts: Sequence[str],
        metadatas: Sequence[Mapping[str, Any]],
        embeddings: Sequence[list[float]],
    ) -> list[TextNode]:
        return [
            TextNode(
                id_=vid,
                text=text,
                metadata=dict(metadata),
                embedding=embedding,
                excluded_embed_metadata_keys=list(metadata),
                excluded_llm_metadata_keys=list(metadata),
            )
            for vid, text, metadata, embedding in zip(ids, texts, metadatas, embeddings)
        ]

    def add(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        embeddings = self.embed_model.get_text_embedding_batch(list(texts))
        self.vector_store.add(self._nodes(ids, texts, metadatas, embeddings))

    async def aadd(self, ids: Sequence[str], texts: Sequence[str], metadatas: Sequence[Mapping[str, Any]]) -> None:
        embeddings = await self.embed_model.aget_text_embedding_batch(list(texts))
        await self.vector_store.async_add(self._nodes(ids, texts, metadatas, embeddings))

    def delete(self, ids: Sequence[str]) -> None:
        self.vector_store.delete_nodes(node_ids=list(ids))

    async def adelete(self, ids: Sequence[str]) -> None:
        await self.vector_store.adelete_nodes(node_ids=list(ids))

    def _query(self, embedding: list[float], k: int, where: Where) -> VectorStoreQuery:
        return VectorStoreQuery(query_embedding=embedding, similarity_top_k=k, filters=metadata_filters(where))

    def search(self, query: str, k: int, where: Where) -> list[VectorHit]:
        embedding = self.embed_model.get_query_embedding(query)
        return _hits(self.vector_store.query(self._query(embedding, k, where)))

    async def asearch(self, query: str, k: int, where: Where) -> list[VectorHit]:
        embedding = await self.embed_model.aget_query_embedding(query)
        return _hits(await self.vector_store.aquery(self._query(embedding, k, where)))


def _is_index(value: Any) -> bool:
    """Whether ``value`` is a ``VectorStoreIndex`` (or has its vector store and embed model)."""
    return hasattr(value, "vector_store") and hasattr(value, "_embed_model")


def _hits(result: VectorStoreQueryResult) -> list[VectorHit]:
    """The store's results, best first, by node id."""
    ids = result.ids if result.ids is not None else [node.node_id for node in result.nodes or []]
    scores = list(result.similarities or [])
    return [VectorHit(str(vid), float(scores[i]) if i < len(scores) else 0.0) for i, vid in enumerate(ids)]


class SynonymEmbedding(BaseEmbedding):
    """A deterministic offline ``BaseEmbedding`` in which chosen synonyms lie close together
    (``sessions_core.integration.synonym_embedding``): for trying semantic recall and for tests,
    never for production. ``groups`` adds synonym groups to the built-in ones."""

    groups: tuple[tuple[str, ...], ...] = Field(default=(), description="Synonym groups added to the built-in ones.")
    dimensions: int = Field(default=256, description="Vector size.")

    @classmethod
    def class_name(cls) -> str:
        return "SynonymEmbedding"

    def _vector(self, text: str) -> list[float]:
        return synonym_embedding(text, dimensions=self.dimensions, groups=self.groups)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)


__all__ = ["SynonymEmbedding", "VectorStoreRecall", "metadata_filters"]
