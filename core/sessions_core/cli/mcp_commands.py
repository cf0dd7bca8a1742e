"""``sessions mcp``: serve the memory of a store over MCP (stdio, or streamable HTTP)."""

from __future__ import annotations

import dataclasses
import gc
import sys
from pathlib import Path

from ..errors import InvalidInputError
from ..memory_config import DEFAULT_CONFIG, MemoryConfig, load_config
from .store import BadInput, StoreHandle

DEFAULT_HTTP_HOST = "127.0.0.1"


def parse_address(value: str) -> tuple[str, int]:
    """``HOST:PORT``, ``[IPv6]:PORT`` or ``PORT`` (host 127.0.0.1) as ``(host, port)``."""
    host, _, port = value.rpartition(":")
    host = host.strip("[]") or DEFAULT_HTTP_HOST
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        raise BadInput(f"--http takes HOST:PORT (e.g. 127.0.0.1:8765), not {value!r}")
    return host, int(port)


def read_config(path: str | None) -> MemoryConfig:
    """The config file's memory, or the default one; ``BadInput`` for a bad file."""
    if path is None:
        return DEFAULT_CONFIG
    if not Path(path).is_file():
        raise BadInput(f"no config file at {path}")
    try:
        return load_config(path)
    except InvalidInputError as error:
        raise BadInput(str(error)) from None


def cmd_mcp(
    handle: StoreHandle,
    store_url: str | None,
    session_id: str | None,
    namespace: str | None,
    http: str | None,
    config_path: str | None,
    *,
    redact: bool = False,
) -> None:
    """Serve until the client disconnects (stdio) or the process is interrupted (HTTP);
    ``redact`` as the config's ``redact = true``."""
    import anyio

    from ..mcp_server import MemoryServer, require_mcp

    # What starting up allocates lives as long as the server (the SDK's protocol models, ~600
    # classes): no collection while it is built (a fifth of the start-up's CPU time), and none
    # that walks it later (gc.freeze).
    gc.disable()
    try:
        require_mcp(lean=http is None)
        if session_id is not None and namespace is not None:
            raise BadInput("--session and --namespace go one at a time")
        address = parse_address(http) if http is not None else None
        config = read_config(config_path)
        if redact:
            config = dataclasses.replace(config, redact=True)
        if config.redact and handle.redact_salt is not None:
            config = dataclasses.replace(config, redact_salt=handle.redact_salt)
        if store_url is not None:
            handle.url = store_url
        store = handle.open(create=True)
        try:
            server = MemoryServer(store, config, session_id=session_id, namespace=namespace)
        except InvalidInputError as error:
            raise BadInput(str(error)) from None
    finally:
        gc.enable()
    gc.freeze()
    try:
        if address is None:
            anyio.run(server.serve_stdio)
        else:

            def ready(url: str) -> None:
                sys.stderr.write(f"sessions mcp: serving {url}\n")
                sys.stderr.flush()

            anyio.run(lambda: server.serve_http(*address, on_ready=ready))
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
