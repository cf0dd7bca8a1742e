"""The ``sessions`` command line (extra ``cli``): inspect, search, export and import any store.

``sessions --store URL COMMAND``: the store is a SQLite path, a ``postgresql://`` URL or a libpq
``key=value`` string (default:
``$SESSIONS_STORE``, else ``./sessions.db``). Commands: ``list``, ``show SESSION``,
``search QUERY``, ``export SESSION``, ``import FILE``, ``blocks SESSION``, ``items [LABEL]...``
(LangGraph store items; ``--versions KEY``), ``stats``,
``prune --older-than AGE``, ``erase SESSION``, ``mcp`` (serve the memory over MCP,
:mod:`sessions_core.mcp_server`). SESSION is
the storage id (what ``Session.for_session`` takes; ``"namespace:id"`` for a manager's session).
Export and import are :mod:`sessions_core.transfer`; this package parses options, opens the
store and prints. An encrypted SQLite file opens with the key in ``$SESSIONS_KEY``;
``rekey [DB]`` changes it (or encrypts a plain file). ``$SESSIONS_REDACT_SALT`` salts the masks
of ``--redact`` and masks ``search``'s query the same way.

Exit codes: 0 ok, 1 not found (unknown session, missing database) or the store failed, 2 usage
or bad input (options, store URL, import file). Errors are one ``Error: ...`` line on stderr.

click and rich are imported only when the command runs, so ``import sessions_core`` never
loads them; ``main()`` names the extra to install when they are missing.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from typing import Any

from .commands import build_cli

INSTALL_HINT = "pip install 'session-memory[cli]'"

__all__ = ["build_cli", "main"]


def main(argv: list[str] | None = None) -> Any:
    """Run the ``sessions`` command (the console script and ``python -m sessions_core``)."""
    absent = next((name for name in ("click", "rich") if importlib.util.find_spec(name) is None), None)
    if absent is not None:  # found, not imported: a command that prints nothing with rich never loads it
        missing = f"the sessions command needs click and rich ({absent} is missing)"
        sys.stderr.write(f"Error: {missing}: {INSTALL_HINT}\n")
        raise SystemExit(1) from None
    try:
        return build_cli().main(args=argv)
    except BrokenPipeError:  # e.g. `sessions export x | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None
