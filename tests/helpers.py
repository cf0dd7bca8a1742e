"""Small builders shared by the tests (written once, in the conformance suite)."""

import abc

from sessions_core import SqliteStore, Store
from sessions_core.testing.builders import ids, msg

__all__ = ["CoreOnlyStore", "ids", "msg"]


class CoreOnlyStore(Store):
    """A store with only the core contract (no inspection, no recall outbox): every method goes
    to a SqliteStore in memory."""

    def __init__(self) -> None:
        self.inner = SqliteStore(":memory:")


for _name in Store.__abstractmethods__:
    setattr(CoreOnlyStore, _name, lambda self, *a, _name=_name, **k: getattr(self.inner, _name)(*a, **k))
abc.update_abstractmethods(CoreOnlyStore)
