"""The suite's search contract (``sessions_core.testing.search``) on the project's stores."""

from sessions_core.testing.search import *  # noqa: F403
