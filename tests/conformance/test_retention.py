"""The suite's retention and erasure contract (``sessions_core.testing.retention``) on the project's stores."""

from sessions_core.testing.retention import *  # noqa: F403
