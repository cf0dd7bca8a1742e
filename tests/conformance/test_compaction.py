"""The suite's compaction contract (``sessions_core.testing.compaction``) on the project's stores."""

from sessions_core.testing.compaction import *  # noqa: F403
