"""The suite's feed contract (``sessions_core.testing.feed``) on the project's stores."""

from sessions_core.testing.feed import *  # noqa: F403
