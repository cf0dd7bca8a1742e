"""The suite's semantic recall contract (``sessions_core.testing.recall``) on the project's stores."""

from sessions_core.testing.recall import *  # noqa: F403
