"""The suite's context contract (``sessions_core.testing.context``) on the project's stores."""

from sessions_core.testing.context import *  # noqa: F403
