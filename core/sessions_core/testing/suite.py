"""Every contract test of the suite with the fixtures it uses, for ``from sessions_core.testing.suite
import *`` in a test module that also has a ``backend`` fixture (see :mod:`sessions_core.testing`).

Pytest collects the tests where they are imported, so this module holds them all in one namespace
(their helpers come along; the tests themselves use their own modules' helpers).
"""

from .attachments import *  # noqa: F403
from .batch_append import *  # noqa: F403
from .checkpoints import *  # noqa: F403
from .compaction import *  # noqa: F403
from .context import *  # noqa: F403
from .feed import *  # noqa: F403
from .harness import drive, inspectable_store, make_manager, make_session, mode, persistent_backend  # noqa: F401
from .history import *  # noqa: F403
from .inspection import *  # noqa: F403
from .items import *  # noqa: F403
from .manager import *  # noqa: F403
from .recall import *  # noqa: F403
from .retention import *  # noqa: F403
from .search import *  # noqa: F403
from .versions import *  # noqa: F403
