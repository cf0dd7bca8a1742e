"""The suite's attachments contract (``sessions_core.testing.attachments``) on the project's stores."""

from sessions_core.testing.attachments import *  # noqa: F403
