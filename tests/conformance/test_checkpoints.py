"""The suite's checkpoints contract (``sessions_core.testing.checkpoints``) on the project's stores."""

from sessions_core.testing.checkpoints import *  # noqa: F403
