"""The conformance suite: the contract tests every store must pass, to run against a store of
your own (needs pytest: ``pip install 'session-memory[test]'``).

Define a ``backend`` fixture returning a :class:`Backend` and star-import the suite into a test
module (the fixtures it needs come along)::

    import pytest

    from sessions_core.testing import Backend
    from sessions_core.testing.suite import *  # noqa: F403

    @pytest.fixture
    def backend(tmp_path):
        return Backend("mydb", lambda: MyStore(tmp_path / "db"), persistent=True)

Every test then runs on that backend in ``sync`` and ``async`` mode. The contract areas are also
modules of their own (``history``, ``compaction``, ``context``, ``manager``, ``search``, ``feed``,
``attachments``, ``batch_append``, ``inspection``, ``versions``, ``recall``, ``retention``,
``checkpoints``, ``items``) to star-import one by one.
Capabilities are declared or detected, never skipped ad hoc: a backend that is not
``persistent`` skips the tests of what a second store sees; a store that is not an
``InspectableStore`` skips the inspection tests, one that keeps no block versions (the
``Store`` defaults of ``write_block``) the versions tests, and one that is not a ``RecallStore``
the semantic recall tests, one without ``SessionErasure`` the retention and erasure tests, one
without ``CheckpointStore`` the checkpoints tests, one without ``ItemStore`` the items tests,
and still
passes the core contract.
"""

try:
    import pytest
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError("sessions_core.testing needs pytest: pip install 'session-memory[test]'") from error

SUITE_MODULES = (
    "attachments",
    "batch_append",
    "checkpoints",
    "compaction",
    "context",
    "feed",
    "history",
    "inspection",
    "items",
    "manager",
    "recall",
    "retention",
    "search",
    "versions",
)
"""The contract areas, one module each (``sessions_core.testing.<name>``)."""

# The suite's modules are not named test_*.py: have pytest rewrite their asserts as it does a test's.
pytest.register_assert_rewrite(*(f"{__name__}.{name}" for name in ("harness", "suite", *SUITE_MODULES)))

from .harness import (  # noqa: E402
    SYNC_ONLY,
    AsyncDriver,
    Backend,
    MissingTwinError,
    drive,
    inspectable_store,
    make_manager,
    make_session,
    mode,
    persistent_backend,
)

__all__ = [
    "SUITE_MODULES",
    "SYNC_ONLY",
    "AsyncDriver",
    "Backend",
    "MissingTwinError",
    "drive",
    "inspectable_store",
    "make_manager",
    "make_session",
    "mode",
    "persistent_backend",
]
