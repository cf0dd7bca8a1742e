"""The suite's batch append contract (``sessions_core.testing.batch_append``) on the project's stores."""

from sessions_core.testing.batch_append import *  # noqa: F403
