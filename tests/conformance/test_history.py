"""The suite's history contract (``sessions_core.testing.history``) on the project's stores."""

from sessions_core.testing.history import *  # noqa: F403
