"""Storage backends, and the contract a store of one's own implements: :class:`Store` (the
required :class:`RequiredStore` methods) with the optional capabilities it declares by
overriding them (:func:`supports`)."""

from .base import (
    CAPABILITIES,
    LATEST,
    BlobStore,
    BlockVersions,
    InspectableStore,
    PromptCache,
    ReadPlanner,
    RecallStore,
    RecordErasure,
    RequiredStore,
    SearchEntries,
    SessionErasure,
    SessionRegistry,
    Store,
    TextSearch,
    capabilities,
    supports,
)
from .sqlite import SqliteStore

__all__ = [
    "CAPABILITIES",
    "LATEST",
    "BlobStore",
    "BlockVersions",
    "InspectableStore",
    "RecordErasure",
    "PromptCache",
    "ReadPlanner",
    "RecallStore",
    "RequiredStore",
    "SearchEntries",
    "SessionErasure",
    "SessionRegistry",
    "SqliteStore",
    "Store",
    "TextSearch",
    "capabilities",
    "supports",
]
