"""The suite's inspection contract (``sessions_core.testing.inspection``) on the project's stores."""

from sessions_core.testing.inspection import *  # noqa: F403
