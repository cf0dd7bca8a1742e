"""The suite's items contract (``sessions_core.testing.items``) on the project's stores."""

from sessions_core.testing.items import *  # noqa: F403
