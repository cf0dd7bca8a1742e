"""The suite's context-block versions contract (``sessions_core.testing.versions``) on the project's stores."""

from sessions_core.testing.versions import *  # noqa: F403
