"""The memory over MCP (extra ``mcp``): a Model Context Protocol server, ``sessions mcp``.

:class:`MemoryServer` serves the memory of one session, or of every session of a namespace
(each call then names its session with a ``session_id`` argument), through the official
``mcp`` SDK's low-level ``Server``:

- **tools**: the memory tools a session gives a framework (``sessions_core.tools``: the same
  names, descriptions, JSON schemas and ``Error: ...`` results), ``session_search``, and
  ``append_message`` / ``get_history`` for clients that want their conversation kept;
- **resources**: each context block, ``memory://blocks/<label>`` (in a namespace
  ``memory://sessions/<session_id>/blocks/<label>``, a resource template), with
  ``notifications/resources/updated`` to subscribers (``resources/subscribe`` on handshake-era
  connections, ``subscriptions/listen`` on 2026-07-28 ones) when a tool writes it, and within
  ``poll_interval`` seconds when another process does;
- **prompts**: ``system_prompt``, the rendered blocks (``Session.system_prompt_for_run``).

Every bad input a client can send gets an MCP error (unknown tool, resource or prompt) or an
``Error: ...`` tool result (arguments, oversize strings, a failing store); the server goes on.
``mcp`` is imported when the server is built, never by ``import sessions_core``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import json
import logging
import os
import socket
import sys
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from itertools import islice
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote

from ._async import run_in_thread
from .branching import ensure_session
from .errors import InvalidInputError, SessionsError
from .manager import SessionManager
from .memory_config import DEFAULT_CONFIG, MemoryConfig, configure
from .session import Session
from .stores.base import LATEST
from .stores.sqlite import SqliteStore
from .tools import EDIT_CONTEXT, LOAD_CONTEXT, UNLOAD_CONTEXT, Tool

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server
    from mcp.server.session import ServerSession

    _Context = ServerRequestContext[Any, Any]

__all__ = [
    "DEFAULT_SESSION",
    "INSTALL_HINT",
    "PROMPT_NAME",
    "MemoryServer",
    "message_tools",
    "require_mcp",
]

logger = logging.getLogger("sessions_core.mcp")

INSTALL_HINT = "pip install 'session-memory[mcp]'"
DEFAULT_SESSION = "default"
"""The session served when neither a session nor a namespace is named."""
PROMPT_NAME = "system_prompt"
RESOURCE_NOT_FOUND = -32002
"""The JSON-RPC error code MCP gives an unknown resource."""
_BLOCKS = "memory://blocks/"
_SESSIONS = "memory://sessions/"
_CONTEXT_TOOLS = frozenset({"set_context", EDIT_CONTEXT, LOAD_CONTEXT, UNLOAD_CONTEXT, "search_context"})
_REGISTERED_CACHE = 4096
_HISTORY_DEFAULT = 50
_HISTORY_MAX = 10_000


def require_mcp(*, lean: bool = False) -> None:
    """Import the ``mcp`` SDK's server modules; an ``ImportError`` naming the extra when the
    package (or a dependency of it) is missing.

    ``lean`` (for a process that only serves stdio, as ``sessions mcp``): when ``mcp`` is not
    imported yet, the packages ``mcp`` and ``mcp.server`` are entered without running their
    ``__init__`` (which import the client and ``MCPServer``, about a third of the SDK's import
    time); each runs it on the first use of a name it defines, so ``from mcp import Client``
    later in the process works as ever. uvicorn, which ``sse_starlette`` imports only to patch
    its shutdown for HTTP, is left out meanwhile. Where either cannot be arranged, the normal
    import."""
    try:
        if lean:
            _enter_packages_bare(_BARE_PACKAGES)
        leave_out = lean and not any(name in sys.modules for name in ("uvicorn", "sse_starlette"))
        try:
            if leave_out:
                sys.modules["uvicorn"] = None  # type: ignore[assignment]  # its import fails, as if not installed
            _import_server_modules()
        except ImportError:
            if not leave_out:
                raise
            sys.modules.pop("uvicorn", None)
            leave_out = False
            _import_server_modules()
        finally:
            if leave_out and "uvicorn" in sys.modules and sys.modules["uvicorn"] is None:
                del sys.modules["uvicorn"]
    except ImportError as error:
        raise ImportError(f"the MCP server needs the mcp package ({error.name} is missing): {INSTALL_HINT}") from None


def _import_server_modules() -> None:
    import mcp.server.lowlevel  # noqa: F401
    import mcp.server.stdio  # noqa: F401
    import mcp.server.subscriptions  # noqa: F401


_BARE_PACKAGES = ("mcp", "mcp.server")
_bare_lock = threading.RLock()


def _enter_packages_bare(names: tuple[str, ...]) -> None:
    """Put ``names`` (a package, then subpackages of it) in ``sys.modules`` with their
    ``__init__`` deferred (:func:`_deferred_package`); nothing when the first is imported
    already, and nothing left behind when one cannot be (the normal import then runs)."""
    if names[0] in sys.modules:
        return
    entered: list[str] = []
    try:
        for name in names:
            _deferred_package(name)
            entered.append(name)
    except Exception as error:
        logger.debug("importing %s whole: %s", names[0], error)
        for name in reversed(entered):
            sys.modules.pop(name, None)


def _deferred_package(name: str) -> None:
    spec = importlib.util.find_spec(name)
    loader = getattr(spec, "loader", None)
    if spec is None or spec.submodule_search_locations is None or not hasattr(loader, "exec_module"):
        raise ImportError(f"{name} is not a regular package", name=name)
    module = importlib.util.module_from_spec(spec)

    def complete(attribute: str) -> Any:
        """A name the package's ``__init__`` would define: a submodule, or run it first."""
        if importlib.util.find_spec(f"{name}.{attribute}") is not None:
            return importlib.import_module(f"{name}.{attribute}")
        with _bare_lock:
            if module.__dict__.get("__getattr__") is complete:
                del module.__dict__["__getattr__"]
                spec.loader.exec_module(module)  # type: ignore[union-attr]
        try:
            return module.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    module.__dict__["__getattr__"] = complete
    parent, _, child = name.rpartition(".")
    sys.modules[name] = module
    if parent:
        setattr(sys.modules[parent], child, module)


# -- the conversation tools ---------------------------------------------------------------------

APPEND_MESSAGE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {
            "type": "string",
            "enum": ["user", "assistant", "system", "tool"],
            "description": "Who wrote the message",
        },
        "content": {"type": "string", "description": "The message text (give content or parts)"},
        "parts": {
            "type": "array",
            "items": {"type": "object"},
            "description": "The message parts instead of content: text, reasoning, tool-call, tool-result, file "
            "(SessionMessage parts; AI SDK UIMessage parts are accepted too)",
        },
        "id": {
            "type": "string",
            "description": "The message id (default: a new UUID); an id already stored is not stored again",
        },
        "parent_id": {
            "type": "string",
            "description": "The message to answer (default: the latest message); another one starts a branch",
        },
        "metadata": {"type": "object", "description": "Free-form metadata kept with the message"},
    },
    "required": ["role"],
}

GET_HISTORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "limit": {
            "type": "integer",
            "description": f"At most this many of the newest messages (default {_HISTORY_DEFAULT})",
        },
        "leaf_id": {
            "type": "string",
            "description": "The branch ending at this message (default: the latest message)",
        },
    },
}


def message_tools(session: Session | None) -> list[Tool]:
    """``append_message`` and ``get_history`` over ``session`` (``None``: the templates a
    namespace lists, which are never called)."""

    def target() -> Session:
        if session is None:
            raise SessionsError("no session")  # a template: MemoryServer never calls it
        return session

    def append(args: dict[str, Any]) -> str:
        content, parts = args.get("content"), args.get("parts")
        if (content is None) == (parts is None):
            raise InvalidInputError("give content or parts (one of them)")
        message = {
            "id": args.get("id") or str(uuid.uuid4()),
            "role": args["role"],
            "parts": parts if parts is not None else [{"type": "text", "text": content}],
            "metadata": args.get("metadata", {}),
        }
        result = target().append_message(message, args.get("parent_id", LATEST), source="client")
        return json.dumps({"id": result.message.id, "inserted": result.inserted})

    def history(args: dict[str, Any]) -> str:
        limit = args.get("limit", _HISTORY_DEFAULT)
        if limit < 1:
            raise InvalidInputError("limit must be at least 1")
        newest = islice(target().history(args.get("leaf_id"), newest_first=True), min(int(limit), _HISTORY_MAX))
        messages = [m.model_dump(mode="json", by_alias=True, exclude_none=True) for m in newest][::-1]
        return json.dumps(messages, ensure_ascii=False)

    return [
        Tool(
            "append_message",
            "Store a message of this conversation (the memory keeps it, searchable by session_search). "
            'Returns {"id", "inserted"}.',
            APPEND_MESSAGE_SCHEMA,
            append,
        ),
        Tool(
            "get_history",
            "Read the stored conversation, oldest first: the newest messages of the branch, compacted "
            "parts shown as their summary. Returns a JSON array of messages.",
            GET_HISTORY_SCHEMA,
            history,
        ),
    ]


def _with_session_argument(tool: Tool) -> Tool:
    """``tool`` listed for a namespace: a required ``session_id`` argument first."""
    schema = dict(tool.parameters)
    schema["properties"] = {
        "session_id": {"type": "string", "description": "The session this call is about (any id you choose)"},
        **schema.get("properties", {}),
    }
    schema["required"] = ["session_id", *schema.get("required", [])]
    return Tool(tool.name, tool.description, schema, tool.func, tool.advisory_enums)


def _oversize(arguments: Mapping[str, Any], limit: int) -> str | None:
    """Why ``arguments`` hold a string over ``limit`` UTF-8 bytes, or ``None``."""
    stack: list[tuple[str, Any]] = [(name, value) for name, value in arguments.items()]
    while stack:
        path, value = stack.pop()
        if isinstance(value, str):
            if len(value) > limit or len(value) * 4 > limit and len(value.encode("utf-8", "surrogatepass")) > limit:
                size = len(value.encode("utf-8", "surrogatepass"))
                return f'"{path}" is {size} bytes, over the limit of {limit}'
        elif isinstance(value, Mapping):
            stack.extend((f"{path}.{key}", item) for key, item in value.items())
        elif isinstance(value, list):
            stack.extend((f"{path}[{index}]", item) for index, item in enumerate(value))
    return None


def _error_text(error: BaseException) -> str:
    return f"Error: {str(error) or type(error).__name__}"


# -- the server ---------------------------------------------------------------------------------


class MemoryServer:
    """The memory of ``store`` served over MCP: one session (``session_id``, default
    :data:`DEFAULT_SESSION`) or every session of ``namespace``, its blocks from ``config``.

    The sessions are a ``SessionManager``'s (registered on their first tool call, so
    ``session_search`` finds them); in the default namespace a session's rows are those of
    ``Session(store).for_session(session_id)``. ``server`` is the ``mcp`` SDK's ``Server``;
    :meth:`serve_stdio` and :meth:`serve_http` run it. ``close()`` closes the store if this
    object opened it.
    """

    def __init__(
        self,
        store: Any = ":memory:",
        config: MemoryConfig = DEFAULT_CONFIG,
        *,
        session_id: str | None = None,
        namespace: str | None = None,
        name: str = "session-memory",
    ) -> None:
        if session_id is not None and namespace is not None:
            raise InvalidInputError("serve one session (session_id) or a namespace, not both")
        if session_id is not None and not session_id:
            raise InvalidInputError("session_id must not be empty")
        self.config = config
        self.name = name
        self.namespaced = namespace is not None
        self.session_id = None if self.namespaced else session_id or DEFAULT_SESSION
        manager = SessionManager(store, namespace=namespace or "", max_message_bytes=config.max_message_bytes)
        self.manager = configure(manager, config)
        self._has_blocks = bool(config.blocks or config.searchable_history)
        self._file_labels = frozenset(block.label for block in config.blocks if block.kind == "skills")
        self._local = isinstance(self.manager.store, SqliteStore)
        self._inline = False
        self._tools: OrderedDict[str, tuple[Session, dict[str, Tool]]] = OrderedDict()
        self._lock = threading.Lock()
        self._registered: OrderedDict[str, None] = OrderedDict()
        self._listed: list[Tool] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[Any]] = set()
        self._bus: Any = None
        self._legacy: dict[str, set[ServerSession]] = {}
        self._watched: Counter[str] = Counter()
        self._seen: dict[str, str | None] = {}
        self._stop_feed = self.manager.subscribe(self._on_event)
        self._server: Server[Any] | None = None

    def close(self) -> None:
        """Stop following writes and close the store if this server opened it."""
        self._stop_feed()
        self.manager.close()

    # -- sessions ----------------------------------------------------------------------------

    def _id(self, session_id: str | None) -> str:
        if not self.namespaced:
            assert self.session_id is not None
            return self.session_id
        if not isinstance(session_id, str) or not session_id:
            raise InvalidInputError("session_id must be a non-empty string")
        return session_id

    def session(self, session_id: str | None = None) -> Session:
        """The session served (in a namespace: ``session_id``'s)."""
        return self.manager.get_session(self._id(session_id))

    def _register(self, session_id: str) -> None:
        with self._lock:
            if session_id in self._registered:
                self._registered.move_to_end(session_id)
                return
        ensure_session(self.manager, session_id)
        with self._lock:
            self._registered[session_id] = None
            while len(self._registered) > _REGISTERED_CACHE:
                self._registered.popitem(last=False)

    def _reload(self, session: Session) -> None:
        """Read every block again, so writes by other processes show (and appends keep them)."""
        if self._has_blocks:
            session.system_prompt_for_run()

    # -- tools -------------------------------------------------------------------------------

    def session_tools(self, session_id: str | None = None) -> list[Tool]:
        """The tools of a session: its memory tools (``Session.tools``), ``session_search``,
        ``append_message`` and ``get_history``."""
        session = self.session(session_id)
        return session.tools() + self.manager.tools() + message_tools(session)

    def _tool(self, session_id: str, name: str) -> Tool | None:
        """Tool ``name`` of a session, built once for each session object the manager keeps."""
        session = self.manager.get_session(session_id)
        with self._lock:
            cached = self._tools.get(session_id)
            if cached is not None and cached[0] is session:
                self._tools.move_to_end(session_id)
                return cached[1].get(name)
        tools = {tool.name: tool for tool in self.session_tools(session_id)}
        with self._lock:
            self._tools[session_id] = (session, tools)
            while len(self._tools) > _REGISTERED_CACHE:
                self._tools.popitem(last=False)
        return tools.get(name)

    def _reads_block(self, name: str, args: Mapping[str, Any]) -> bool:
        """Whether the call works on a block's content as this process holds it (an append, an
        edit), which must be read again first to keep what another process wrote."""
        return name == EDIT_CONTEXT or name == "set_context" and args.get("action") == "append"

    def runs_inline(self, name: str, arguments: Mapping[str, Any] | None) -> bool:
        """Whether :meth:`call_tool` runs on the event loop rather than in a worker thread: over
        stdio (one client) on a SQLite store, for a call that reads no skill files (calls of a
        millisecond or so, which a thread hop would double)."""
        if not (self._inline and self._local):
            return False
        if not self._file_labels:
            return True
        args = arguments or {}
        label = args.get("label")
        if name in (LOAD_CONTEXT, UNLOAD_CONTEXT) or (isinstance(label, str) and label in self._file_labels):
            return False
        return not (name in _CONTEXT_TOOLS and self._reads_block(name, args))

    def listed_tools(self) -> list[Tool]:
        """The tools ``tools/list`` gives: the session's, or in a namespace the declared ones
        with a required ``session_id`` argument (built without reading the store)."""
        if not self.namespaced:
            return self.session_tools()
        if self._listed is None:
            templates = self._declaring().declared_tools() + self.manager.tools() + message_tools(None)
            self._listed = [_with_session_argument(tool) for tool in templates]
        return self._listed

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None) -> str | None:
        """The text result of tool ``name`` (``"Error: ..."`` for bad arguments or a failure);
        ``None`` when there is no such tool. Blocking: run it in a worker thread."""
        if self.namespaced and name not in {tool.name for tool in self.listed_tools()}:
            return None
        args = dict(arguments or {})
        try:
            session_id = self._id(args.pop("session_id", None))
        except InvalidInputError:
            return f'Error: invalid arguments for {name}: "session_id" must be a non-empty string'
        problem = _oversize(args, self.config.max_argument_bytes)
        if problem is not None:
            return f"Error: invalid arguments for {name}: {problem}"
        try:
            tool = self._tool(session_id, name)
            if tool is None:
                return None
            if name in _CONTEXT_TOOLS and self._reads_block(name, args):
                self._reload(self.session(session_id))
            self._register(session_id)
        except Exception as error:  # a failing store, a session id no store can hold: the client's error
            return _error_text(error)
        return tool.invoke(args)

    # -- resources and the prompt ----------------------------------------------------------------

    def block_uri(self, label: str, session_id: str | None = None) -> str:
        """The resource URI of block ``label`` (in a namespace, of ``session_id``'s)."""
        if not self.namespaced:
            return _BLOCKS + quote(label, safe="")
        return f"{_SESSIONS}{quote(self._id(session_id), safe='')}/blocks/{quote(label, safe='')}"

    def parse_uri(self, uri: str) -> tuple[str | None, str] | None:
        """``(session_id, label)`` of a block URI this server serves, or ``None``."""
        if not self.namespaced:
            rest = uri[len(_BLOCKS) :] if uri.startswith(_BLOCKS) else ""
            return (None, unquote(rest)) if rest and "/" not in rest else None
        rest = uri[len(_SESSIONS) :] if uri.startswith(_SESSIONS) else ""
        session_part, _, label_part = rest.partition("/blocks/")
        if not session_part or not label_part or "/" in session_part or "/" in label_part:
            return None
        return unquote(session_part), unquote(label_part)

    def _declaring(self) -> Session:
        """A session of the manager, for what every session declares alike (nothing is read)."""
        return self.manager.get_session(self.session_id or "")

    def labels(self) -> list[tuple[str, str | None]]:
        """``(label, description)`` of every declared block, in order (nothing is read)."""
        return [(config.label, config.description) for config in self._declaring().context_configs]

    def read_block(self, uri: str) -> str | None:
        """The current content of the block ``uri`` names (read again from its provider), or
        ``None`` for a URI naming no block. Blocking."""
        found = self.parse_uri(uri)
        if found is None:
            return None
        session = self.session(found[0])
        self._reload(session)
        block = session.get_context_block(found[1])
        return None if block is None else block.content

    def system_prompt(self, session_id: str | None = None) -> str:
        """The rendered system prompt of the session (every block, with its usage). Blocking."""
        session = self.session(session_id)
        return session.system_prompt_for_run() if self._has_blocks else ""

    # -- change notifications ----------------------------------------------------------------------

    def _on_event(self, event: Any) -> None:
        """A block written through this process (in whatever thread wrote it)."""
        loop = self._loop
        if event.type != "block" or event.label is None or loop is None or loop.is_closed():
            return
        uri = self.block_uri(event.label, event.session_id if self.namespaced else None)
        if uri not in self._watched:
            return  # nobody subscribed (a subscription starting meanwhile reads the block itself)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody to tell
            loop.call_soon_threadsafe(self._changed_here, uri)

    def _changed_here(self, uri: str) -> None:
        if uri in self._seen:
            self._seen[uri] = None  # the poller takes the new content as seen, without telling again
        self._spawn(self._notify(uri))

    def _spawn(self, coroutine: Any) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _notify(self, uri: str) -> None:
        from mcp.shared.subscriptions import ResourceUpdated

        if self._bus is not None:
            await self._bus.publish(ResourceUpdated(uri=uri))
        for session in list(self._legacy.get(uri, ())):
            try:
                await session.send_resource_updated(uri)
            except Exception:  # that client is gone
                self._legacy.get(uri, set()).discard(session)

    async def _watch(self, uri: str) -> None:
        self._watched[uri] += 1
        if self._watched[uri] == 1:
            try:
                self._seen[uri] = await run_in_thread(self.read_block, uri)
            except Exception:
                self._seen[uri] = None

    def _unwatch(self, uri: str) -> None:
        self._watched[uri] -= 1
        if self._watched[uri] <= 0:
            del self._watched[uri]
            self._seen.pop(uri, None)

    async def _poll(self) -> None:
        """Every ``poll_interval`` seconds, tell subscribers of blocks other processes changed."""
        while True:
            await asyncio.sleep(self.config.poll_interval)
            uris = list(self._watched)
            if not uris:
                continue
            try:
                contents = await run_in_thread(self._read_blocks, uris)
            except Exception as error:
                logger.debug("polling the subscribed blocks failed: %s", error)
                continue
            for uri, content in contents.items():
                if uri not in self._seen:
                    continue  # unsubscribed meanwhile
                before, self._seen[uri] = self._seen[uri], content
                if before is not None and content != before:
                    await self._notify(uri)

    def _read_blocks(self, uris: list[str]) -> dict[str, str | None]:
        contents: dict[str, str | None] = {}
        for uri in uris:
            with contextlib.suppress(Exception):
                contents[uri] = self.read_block(uri)
        return contents

    @asynccontextmanager
    async def _lifespan(self, _server: Any) -> AsyncIterator[dict[str, Any]]:
        self._loop = asyncio.get_running_loop()
        poller = asyncio.ensure_future(self._poll()) if self.config.poll_interval > 0 else None
        try:
            yield {}
        finally:
            self._loop = None
            for task in [poller, *self._tasks]:
                if task is not None:
                    task.cancel()

    # -- the MCP server ----------------------------------------------------------------------------

    @property
    def server(self) -> Server[Any]:
        """The ``mcp`` SDK's low-level ``Server`` (built on first use; imports ``mcp``)."""
        if self._server is None:
            self._server = self._build()
        return self._server

    def _build(self) -> Server[Any]:
        require_mcp()  # a no-op once done (sessions mcp does it lean)
        import mcp_types as types
        from mcp.server.lowlevel import Server
        from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler
        from mcp.shared.exceptions import MCPError

        from . import __version__

        self._bus = InMemorySubscriptionBus()
        listen_handler = ListenHandler(self._bus)

        async def blocking(fn: Callable[..., Any], *args: Any) -> Any:
            """``fn`` in a worker thread; a library error becomes the client's MCP error."""
            try:
                return await run_in_thread(fn, *args)
            except SessionsError as error:
                code = types.INVALID_PARAMS if isinstance(error, InvalidInputError) else types.INTERNAL_ERROR
                raise MCPError(code, str(error)) from None

        async def list_tools(ctx: _Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            tools = await blocking(self.listed_tools)
            return types.ListToolsResult(
                tools=[types.Tool(name=t.name, description=t.description, input_schema=t.parameters) for t in tools]
            )

        async def call_tool(ctx: _Context, params: types.CallToolRequestParams) -> Any:  # a result dict
            if self.runs_inline(params.name, params.arguments):
                result = self.call_tool(params.name, params.arguments)
            else:
                result = await blocking(self.call_tool, params.name, params.arguments)
            if result is None:
                raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
            # What CallToolResult dumps, built as is: the SDK validates a result against the
            # protocol once, on sending it (an older protocol's form drops resultType).
            return {
                "content": [{"type": "text", "text": result}],
                "isError": result.startswith("Error:"),
                "resultType": "complete",
            }

        async def list_resources(
            ctx: _Context, params: types.PaginatedRequestParams | None
        ) -> types.ListResourcesResult:
            if self.namespaced:
                return types.ListResourcesResult(resources=[])
            return types.ListResourcesResult(
                resources=[
                    types.Resource(
                        uri=self.block_uri(label), name=label, description=description, mime_type="text/plain"
                    )
                    for label, description in self.labels()
                ]
            )

        async def list_templates(
            ctx: _Context, params: types.PaginatedRequestParams | None
        ) -> types.ListResourceTemplatesResult:
            if not self.namespaced:
                return types.ListResourceTemplatesResult(resource_templates=[])
            template = types.ResourceTemplate(
                uri_template=_SESSIONS + "{session_id}/blocks/{label}",
                name="block",
                description="A context block of a session: " + ", ".join(label for label, _ in self.labels()),
                mime_type="text/plain",
            )
            return types.ListResourceTemplatesResult(resource_templates=[template])

        def known(uri: str) -> None:
            found = self.parse_uri(uri)
            if found is None or found[1] not in {label for label, _ in self.labels()}:
                raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {uri}")

        async def read_resource(ctx: _Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
            known(params.uri)
            content = await blocking(self.read_block, params.uri)
            if content is None:
                raise MCPError(RESOURCE_NOT_FOUND, f"Unknown resource: {params.uri}")
            return types.ReadResourceResult(
                contents=[types.TextResourceContents(uri=params.uri, mime_type="text/plain", text=content)]
            )

        async def subscribe(ctx: _Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
            known(params.uri)
            subscribers = self._legacy.setdefault(params.uri, set())
            if ctx.session not in subscribers:
                subscribers.add(ctx.session)
                await self._watch(params.uri)
            return types.EmptyResult()

        async def unsubscribe(ctx: _Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
            subscribers = self._legacy.get(params.uri, set())
            if ctx.session in subscribers:
                subscribers.discard(ctx.session)
                self._unwatch(params.uri)
            return types.EmptyResult()

        async def listen(
            ctx: _Context, params: types.SubscriptionsListenRequestParams
        ) -> types.SubscriptionsListenResult:
            uris = [uri for uri in params.notifications.resource_subscriptions or () if self.parse_uri(uri)]
            for uri in uris:
                await self._watch(uri)
            try:
                return await listen_handler(ctx, params)
            finally:
                for uri in uris:
                    self._unwatch(uri)

        async def list_prompts(ctx: _Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
            arguments = (
                [types.PromptArgument(name="session_id", description="The session", required=True)]
                if self.namespaced
                else None
            )
            prompt = types.Prompt(
                name=PROMPT_NAME,
                description="The memory as a system prompt: every context block rendered, with its usage",
                arguments=arguments,
            )
            return types.ListPromptsResult(prompts=[prompt])

        async def get_prompt(ctx: _Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
            if params.name != PROMPT_NAME:
                raise MCPError(types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
            session_id = (params.arguments or {}).get("session_id")
            if self.namespaced and not session_id:
                raise MCPError(types.INVALID_PARAMS, 'The prompt needs the argument "session_id"')
            text = await blocking(self.system_prompt, session_id)
            return types.GetPromptResult(
                description="The memory's system prompt",
                messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
            )

        server = Server(
            self.name,
            version=__version__,
            instructions="Long-term memory: context blocks you write with set_context, past conversations "
            "found with session_search.",
            lifespan=self._lifespan,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe,
            on_unsubscribe_resource=unsubscribe,
            on_subscriptions_listen=listen,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
        )
        if os.environ.get("SESSIONS_MCP_TRACING") != "1":
            # The SDK's OpenTelemetry middleware is a no-op without an exporter, yet costs each call.
            server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
        return server

    # -- transports --------------------------------------------------------------------------------

    async def serve_stdio(self) -> None:
        """Serve one client over this process's stdin and stdout until it closes them."""
        from mcp.server.stdio import stdio_server

        server = self.server
        self._inline = True
        try:
            async with _event_loop_stdio() as streams, stdio_server(*streams) as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
        finally:
            self._inline = False

    async def serve_http(
        self, host: str = "127.0.0.1", port: int = 8000, *, on_ready: Callable[[str], Any] | None = None
    ) -> None:
        """Serve streamable HTTP at ``http://host:port/mcp`` until cancelled; ``on_ready(url)``
        once the port listens (port 0: a free one). On a loopback host, requests whose Host or
        Origin header is not local are refused (DNS rebinding)."""
        import uvicorn

        app = self.server.streamable_http_app(host=host)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
            sock.listen(128)
            shown = f"[{host}]" if family == socket.AF_INET6 else host
            config = uvicorn.Config(app, log_level="warning", lifespan="on", access_log=False)
            server = uvicorn.Server(config)
            if on_ready is not None:
                on_ready(f"http://{shown}:{sock.getsockname()[1]}/mcp")
            await server.serve(sockets=[sock])
        finally:
            sock.close()


# -- stdio without worker threads -----------------------------------------------------------------


class _PipeLines:
    """The lines of a pipe, read by the asyncio event loop (the SDK reads each line of stdin in a
    worker thread, and writes and flushes each reply in two more: most of a call's overhead)."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _PipeLines:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", errors="replace")


class _PipeWriter:
    """Text written to a pipe by the event loop; ``flush`` waits while the client lags behind."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self._writer = writer

    async def write(self, text: str) -> None:
        self._writer.write(text.encode("utf-8"))

    async def flush(self) -> None:
        await self._writer.drain()


def _is_pipe(fd: int) -> bool:
    import stat

    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


@asynccontextmanager
async def _event_loop_stdio() -> AsyncIterator[tuple[Any, Any]]:
    """``(stdin, stdout)`` for the SDK's ``stdio_server``: on asyncio with pipes (as MCP clients
    start a server), private duplicates of fds 0 and 1 read and written by the event loop, with
    fd 0 pointed at the null device and fd 1 at stderr meanwhile (stray output misses the wire,
    as with the SDK's own claim); otherwise ``(None, None)``, the SDK's threaded streams."""
    import sniffio

    try:
        pipes = _is_pipe(0) and _is_pipe(1)
    except OSError:
        pipes = False
    if not (pipes and sniffio.current_async_library() == "asyncio"):
        yield None, None
        return
    loop = asyncio.get_running_loop()
    wire_in, wire_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    in_file = os.fdopen(wire_in, "rb", buffering=0)
    out_file = os.fdopen(wire_out, "wb", buffering=0)
    writer = None
    try:
        reader = asyncio.StreamReader(limit=1 << 30)  # a line is a whole JSON-RPC message
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), in_file)
        transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out_file)
        writer = asyncio.StreamWriter(transport, protocol, None, loop)
        yield _PipeLines(reader), _PipeWriter(writer)
    finally:
        with contextlib.suppress(OSError):
            os.dup2(wire_in, 0)
        with contextlib.suppress(OSError):
            os.dup2(wire_out, 1)
        if writer is not None:
            writer.close()
        in_file.close()
        out_file.close()
