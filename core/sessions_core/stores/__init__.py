"""Storage backends."""

from .base import LATEST, Store
from .sqlite import SqliteStore

__all__ = ["LATEST", "SqliteStore", "Store"]
