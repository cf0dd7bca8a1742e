"""The ``sessions`` command line (extra ``cli``): inspect, search, export and import any store.

``sessions --store URL COMMAND``: the store is a SQLite path or a ``postgresql://`` URL (default:
``$SESSIONS_STORE``, else ``./sessions.db``). Commands: ``list``, ``show SESSION``,
``search QUERY``, ``export SESSION``, ``import FILE``, ``blocks SESSION``, ``stats``. SESSION is
the storage id (what ``Session.for_session`` takes; ``"namespace:id"`` for a manager's session).

Exit codes: 0 ok, 1 not found (unknown session, missing database) or the store failed, 2 usage
or bad input (options, store URL, import file). Errors are one ``Error: ...`` line on stderr.

click and rich are imported only when the command runs, so ``import sessions_core`` never
loads them; ``main()`` names the extra to install when they are missing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import sqlite3
import sys
import tempfile
import uuid
from collections import deque
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

from ._time import from_us, to_us
from .errors import MessageValidationError, SessionsError, StoreError
from .attachments import BLOB_PREFIX, restore_blobs
from .messages import (
    FilePart,
    ReasoningPart,
    SessionMessage,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    ToolUIPart,
    message_from_storage,
    parse_message,
)
from .stores.base import CompactionRow, SessionRow, SessionSummary, Store
from .tokens import estimate_tokens

if TYPE_CHECKING:  # pragma: no cover
    import click
    from rich.console import Console

EXPORT_FORMAT = "session-memory/1"
"""The ``format`` of an export's ``session`` record; an import refuses any other."""

DEFAULT_STORE = "./sessions.db"
PAGE_ROWS = 500
INSTALL_HINT = "pip install 'session-memory[cli]'"


def main(argv: list[str] | None = None) -> Any:
    """Run the ``sessions`` command (the console script and ``python -m sessions_core``)."""
    try:
        import click  # noqa: F401
        import rich  # noqa: F401
    except ImportError as error:
        sys.stderr.write(f"Error: the sessions command needs click and rich ({error.name} is missing): {INSTALL_HINT}\n")
        raise SystemExit(1) from None
    try:
        return build_cli().main(args=argv)
    except BrokenPipeError:  # e.g. `sessions export x | head`
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        raise SystemExit(1) from None


# -- errors ------------------------------------------------------------------------------------


class NotFound(Exception):
    """Exit code 1: what the command names does not exist."""


class BadInput(Exception):
    """Exit code 2: the options, store URL or input file are wrong."""


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


def _error_for(error: BaseException) -> tuple[str, int]:
    """The one-line message and exit code for an exception a command raised."""
    if isinstance(error, NotFound):
        return str(error), 1
    if isinstance(error, BadInput):
        return str(error), 2
    if isinstance(error, MessageValidationError):
        return str(error), 2
    if isinstance(error, StoreError):
        return str(error), 1
    if isinstance(error, sqlite3.Error):
        return f"SQLite: {error}", 1
    if type(error).__module__.startswith("psycopg"):
        return f"PostgreSQL: {str(error).splitlines()[0] if str(error) else type(error).__name__}", 1
    if isinstance(error, (ImportError, SessionsError)):
        return str(error), 1
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror or error}{where}", 1
    return f"{type(error).__name__}: {error} (run with --debug for the traceback)", 1


# -- the store ---------------------------------------------------------------------------------


def _redact(url: str) -> str:
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", url)


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


@dataclass
class StoreHandle:
    """The store a command works on, opened on first use and closed at the end."""

    url: str
    schema: str | None = None
    debug: bool = False
    store: Store | None = None
    _close: list[Callable[[], None]] = field(default_factory=list)

    @property
    def is_postgres(self) -> bool:
        return is_postgres_url(self.url)

    @property
    def display(self) -> str:
        if self.is_postgres:
            return f"{_redact(self.url)} (schema {self.schema or 'public'})"
        return self.url

    def check(self) -> None:
        """Reject a bad store URL or option combination before doing anything."""
        if not self.url:
            raise BadInput("the store is empty: pass --store PATH or a postgresql:// URL")
        if self.is_postgres:
            return
        if "://" in self.url:
            raise BadInput(
                f"unsupported store URL {_redact(self.url)!r}: use a SQLite file path or a postgresql:// URL"
            )
        if self.schema is not None:
            raise BadInput("--schema applies to PostgreSQL stores only")

    def open(self, *, create: bool = False) -> Store:
        """The store; a read (``create=False``) never creates a database or tables."""
        if self.store is None:
            self.check()
            self.store = self._open_postgres(create) if self.is_postgres else self._open_sqlite(create)
        return self.store

    def _open_sqlite(self, create: bool) -> Store:
        from .stores.sqlite import SqliteStore

        path = self.url
        if path != ":memory:":
            target = Path(path)
            if target.is_dir():
                raise BadInput(f"{path} is a directory, not a SQLite database")
            if not target.exists() and not create:
                raise NotFound(f"no SQLite database at {path} (pass --store or set SESSIONS_STORE)")
            if not target.parent.exists():
                raise NotFound(f"no such directory: {target.parent}")
        try:
            store = SqliteStore(path)
            self._close.append(store.close)
            store.setup()
        except sqlite3.DatabaseError as error:
            raise BadInput(f"{path} is not a session-memory SQLite database ({error})") from None
        return store

    def _open_postgres(self, create: bool) -> Store:
        try:
            import psycopg

            from .stores.postgres import PostgresStore, _version
        except ImportError:
            raise StoreError(
                "PostgreSQL stores need the postgres extra: pip install 'session-memory[postgres]'"
            ) from None
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.Error as error:
            detail = _one_line(str(error)) or type(error).__name__
            raise StoreError(f"cannot connect to {_redact(self.url)}: {detail}") from None
        self._close.append(conn.close)
        schema = self.schema or "public"
        if not create and _version(conn, schema) == 0:
            raise NotFound(f"no session-memory tables in schema {schema!r} of {_redact(self.url)}")
        store = PostgresStore(conn, schema=schema)
        self._close.append(store.close)
        return store

    def close(self) -> None:
        while self._close:
            with contextlib.suppress(Exception):  # closing never hides the command's own outcome
                self._close.pop()()


def summary_of(store: Store, session_id: str) -> SessionSummary:
    """The session's summary; ``NotFound`` when the store holds nothing under that id."""
    found = store.session_summaries([session_id])
    if not found:
        raise NotFound(f"unknown session {session_id!r} (see `sessions list`)")
    return found[0]


# -- output ------------------------------------------------------------------------------------


def _console(*, stderr: bool = False) -> "Console":
    """A rich console: styled on a terminal, plain and wide enough not to wrap otherwise."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if terminal else max(200, int(os.environ.get("COLUMNS", "0") or 0))
    return Console(
        stderr=stderr, width=width, highlight=False, markup=False, emoji=False, soft_wrap=not terminal
    )


def _print(console: "Console", renderable: Any) -> None:
    """Print; off a terminal, without the trailing blanks rich pads table cells with."""
    if console.is_terminal:
        console.print(renderable)
        return
    with console.capture() as captured:
        console.print(renderable)
    console.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


def _table(console: "Console", *columns: str, right: tuple[str, ...] = ()) -> Any:
    """A table: boxed on a terminal (text folds to fit, numbers do not), bare columns otherwise."""
    from rich import box
    from rich.table import Table

    terminal = console.is_terminal
    table = Table(
        box=box.ROUNDED if terminal else None,
        show_edge=terminal,
        header_style="bold" if terminal else "",
        pad_edge=terminal,
    )
    for column in columns:
        table.add_column(
            column,
            justify="right" if column in right else "left",
            no_wrap=column in right,
            overflow="fold",
        )
    return table


def _text(value: Any, style: str = "") -> Any:
    from rich.text import Text

    return Text("" if value is None else str(value), style=style)


def _time(us: int | None) -> str:
    if us is None:
        return "-"
    return from_us(us).strftime("%Y-%m-%d %H:%M:%S") + "Z"


def _iso(us: int) -> str:
    return from_us(us).isoformat()


def _size(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit} ({count} bytes)"
        value /= 1024
    return f"{count} B"  # pragma: no cover


def _clip(text: str, width: int) -> str:
    text = _one_line(text)
    return text if len(text) <= width else text[: max(width - 1, 1)] + "…"


def _json_preview(value: Any, width: int = 40) -> str:
    if isinstance(value, str):
        return _clip(value, width)
    try:
        return _clip(json.dumps(value, ensure_ascii=False, separators=(",", ":")), width)
    except (TypeError, ValueError):
        return _clip(repr(value), width)


def message_preview(message: SessionMessage | None, width: int = 80) -> str:
    """One line for a message: its text, then its tool calls, results and other parts."""
    if message is None:
        return "[unreadable message]"
    pieces: list[str] = []
    for part in message.parts:
        if isinstance(part, TextPart):
            if part.text.strip():
                pieces.append(part.text)
        elif isinstance(part, ToolCallPart):
            pieces.append(f"-> {part.tool_name}({_json_preview(part.input)})")
        elif isinstance(part, ToolResultPart):
            error = " error" if part.is_error else ""
            pieces.append(f"<- {part.tool_name or part.tool_call_id}{error}: {_json_preview(part.output)}")
        elif isinstance(part, ToolUIPart):
            name = part.tool_name or part.type.removeprefix("tool-")
            state = f" [{part.state}]" if part.state else ""
            result = f" = {_json_preview(part.output)}" if part.output is not None else ""
            pieces.append(f"{name}({_json_preview(part.input)}){state}{result}")
        elif isinstance(part, ReasoningPart):
            pieces.append("[reasoning]")
        elif isinstance(part, FilePart):
            pieces.append(f"[file {part.media_type}{' ' + part.filename if part.filename else ''}]")
        else:
            pieces.append(f"[{part.type}]")
    return _clip(" | ".join(pieces) or "(empty)", width)


# -- list ----------------------------------------------------------------------------------------


def _last_activity(summary: SessionSummary) -> int | None:
    times = [t for t in (summary.last_created_at_us, summary.registry and summary.registry.updated_at_us) if t]
    return max(times) if times else None


def _summary_json(summary: SessionSummary) -> dict[str, Any]:
    registry = summary.registry
    last = _last_activity(summary)
    return {
        "session_id": summary.session_id,
        "name": registry.name if registry else None,
        "namespace": registry.namespace if registry else None,
        "registry_id": registry.id if registry else None,
        "messages": summary.message_count,
        "first_message_at": None if summary.first_created_at_us is None else _iso(summary.first_created_at_us),
        "last_activity": None if last is None else _iso(last),
        "input_tokens": registry.input_tokens if registry else None,
        "output_tokens": registry.output_tokens if registry else None,
        "estimated_cost": registry.estimated_cost if registry else None,
        "end_reason": registry.end_reason if registry else None,
    }


def cmd_list(handle: StoreHandle, as_json: bool) -> None:
    store = handle.open()
    summaries = sorted(store.session_summaries(), key=lambda s: (-(_last_activity(s) or 0), s.session_id))
    if as_json:
        sys.stdout.write(json.dumps([_summary_json(s) for s in summaries], ensure_ascii=False, indent=2) + "\n")
        return
    console = _console()
    if not summaries:
        console.print("No sessions.")
        return
    table = _table(
        console, "SESSION", "NAME", "NAMESPACE", "MESSAGES", "LAST ACTIVITY", "TOKENS IN", "TOKENS OUT", "COST",
        right=("MESSAGES", "TOKENS IN", "TOKENS OUT", "COST"),
    )
    for summary in summaries:
        registry = summary.registry
        table.add_row(
            _text(summary.session_id, "cyan"),
            _text(registry.name if registry else "-"),
            _text((registry.namespace or '""') if registry else "-"),
            _text(summary.message_count),
            _text(_time(_last_activity(summary))),
            _text(registry.input_tokens if registry else "-"),
            _text(registry.output_tokens if registry else "-"),
            _text(f"{registry.estimated_cost:.4f}" if registry else "-"),
        )
    _print(console, table)
    console.print(f"{len(summaries)} session{'' if len(summaries) == 1 else 's'}")


# -- show ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    id: str
    parent_id: str | None
    role: str
    preview: str


def _load_tree(store: Store, session_id: str, width: int) -> tuple[dict[str, _Node], dict[str | None, list[str]]]:
    """Every message of the session (ids, roles and previews only), read page by page."""
    nodes: dict[str, _Node] = {}
    after = 0
    while True:
        page = store.message_rows(session_id, after, PAGE_ROWS)
        if not page:
            break
        for _seq, row in page:
            message = message_from_storage(row.content, from_us(row.created_at_us))
            nodes[row.id] = _Node(row.id, row.parent_id, row.role, message_preview(message, width))
        after = page[-1][0]
    children: dict[str | None, list[str]] = {}
    for node in nodes.values():  # (created_at, seq) order, as Store.children gives them
        parent = node.parent_id if node.parent_id in nodes else None
        children.setdefault(parent, []).append(node.id)
    return nodes, children


def _ancestry(nodes: dict[str, _Node], leaf: str, stop: str | None = None) -> list[str]:
    """Ids from ``leaf`` up to the root (or up to and including ``stop``), leaf first."""
    chain: list[str] = []
    current: str | None = leaf
    seen: set[str] = set()
    while current is not None and current in nodes and current not in seen:
        seen.add(current)
        chain.append(current)
        if current == stop:
            break
        current = nodes[current].parent_id
    return chain


def cmd_show(handle: StoreHandle, session_id: str, width: int) -> None:
    from rich.tree import Tree

    store = handle.open()
    summary = summary_of(store, session_id)
    nodes, children = _load_tree(store, session_id, width)
    compactions = store.get_compactions(session_id)
    latest = store.latest_leaf(session_id)
    active_leaf = latest.id if latest is not None else None
    active = set(_ancestry(nodes, active_leaf)) if active_leaf else set()

    # Which overlay summarises each message (the newest covering it), and where each starts.
    covered_by: dict[str, str] = {}
    starts: dict[str, list[CompactionRow]] = {}
    detached: list[CompactionRow] = []
    for compaction in compactions:
        chain = _ancestry(nodes, compaction.to_message_id, stop=compaction.from_message_id)
        if not chain or chain[-1] != compaction.from_message_id:
            detached.append(compaction)
            continue
        for message_id in chain:
            covered_by[message_id] = compaction.id
        starts.setdefault(compaction.from_message_id, []).append(compaction)

    console = _console()
    leaves = sum(1 for node_id in nodes if not children.get(node_id))
    title = (
        f"session {session_id}: {len(nodes)} message{'' if len(nodes) == 1 else 's'}, "
        f"{leaves} lea{'f' if leaves == 1 else 'ves'}, {len(compactions)} compaction{'' if len(compactions) == 1 else 's'}"
    )
    if summary.registry is not None:
        title += f"; name {summary.registry.name!r}"
    if active_leaf:
        title += f"; active leaf {active_leaf}"
    tree = Tree(_text(title, "bold"), guide_style="dim")
    if not nodes:
        tree.add(_text("(no messages)", "dim"))

    def label(node: _Node) -> Any:
        from rich.text import Text

        text = Text()
        text.append("* " if node.id in active else "  ", style="bold yellow")
        text.append(node.id, style="cyan")
        text.append(f" {node.role}", style={"user": "green", "assistant": "blue", "tool": "magenta"}.get(node.role, "yellow"))
        text.append(f": {node.preview}")
        if node.id in covered_by:
            text.append(f"  [summarised by compaction {covered_by[node.id]}]", style="dim")
        if node.id == active_leaf:
            text.append("  <- active leaf", style="bold yellow")
        return text

    def compaction_label(compaction: CompactionRow) -> Any:
        return _text(
            f"~ compaction {compaction.id} ({_time(compaction.created_at_us)}) covers "
            f"{compaction.from_message_id} .. {compaction.to_message_id}: {_clip(compaction.summary, width)}",
            "italic",
        )

    def branch_label(kind: str, index: int, total: int, first: str, parent: str | None) -> Any:
        where = f" from {parent}" if parent else ""
        mark = " (active)" if first in active else ""
        return _text(f"{kind} {index}/{total}{where}{mark}", "bold yellow" if mark else "bold")

    pending: deque[tuple[Any, str]] = deque()
    roots = children.get(None, [])
    if len(roots) == 1:
        pending.append((tree, roots[0]))
    for index, root in enumerate(roots if len(roots) > 1 else [], 1):
        pending.append((tree.add(branch_label("root", index, len(roots), root, None)), root))
    while pending:  # iterative: a long chain stays at one level, a fork nests its branches
        container, current = pending.popleft()
        while True:
            for compaction in starts.get(current, ()):
                container.add(compaction_label(compaction))
            container.add(label(nodes[current]))
            kids = children.get(current, [])
            if len(kids) == 1:
                current = kids[0]
                continue
            for index, kid in enumerate(kids, 1):
                pending.append((container.add(branch_label("branch", index, len(kids), kid, current)), kid))
            break
    for compaction in detached:
        tree.add(
            _text(
                f"~ compaction {compaction.id} not applied: {compaction.from_message_id} .. "
                f"{compaction.to_message_id} is not a range of one branch",
                "dim",
            )
        )
    _print(console, tree)


# -- search --------------------------------------------------------------------------------------


def cmd_search(handle: StoreHandle, query: str, sessions: tuple[str, ...], limit: int, width: int) -> None:
    store = handle.open()
    for session_id in sessions:
        summary_of(store, session_id)
    rows = store.search_messages(list(sessions) if sessions else None, query, limit)
    console = _console()
    if not rows:
        console.print("No matches.")
        return
    table = _table(console, "SESSION", "ID", "ROLE", "CREATED", "TEXT")
    for row in rows:
        table.add_row(
            _text(row.session_id, "cyan"), _text(row.id), _text(row.role), _text(_time(row.created_at_us)),
            _text(_clip(row.content, width)),
        )
    _print(console, table)
    console.print(f"{len(rows)} match{'' if len(rows) == 1 else 'es'}")


# -- blocks --------------------------------------------------------------------------------------


def cmd_blocks(handle: StoreHandle, session_id: str, width: int) -> None:
    store = handle.open()
    summary_of(store, session_id)
    blocks = store.list_blocks(session_id)
    counts = store.search_entry_counts(session_id)
    prompt = store.get_cached_prompt(session_id)
    console = _console()
    if blocks:
        table = _table(console, "BLOCK", "TOKENS", "UPDATED", "CONTENT", right=("TOKENS",))
        for block in blocks:
            table.add_row(
                _text(block.label, "cyan"), _text(estimate_tokens(block.content)),
                _text(_time(block.updated_at_us)), _text(_clip(block.content, width)),
            )
        _print(console, table)
    else:
        console.print("No stored context blocks.")
    if counts:
        table = _table(console, "SEARCHABLE BLOCK", "ENTRIES", right=("ENTRIES",))
        for label, count in counts:
            table.add_row(_text(label, "cyan"), _text(count))
        _print(console, table)
    else:
        console.print("No search entries.")
    if prompt is None:
        console.print("Cached prompt: no")
    else:
        console.print(f"Cached prompt: yes ({estimate_tokens(prompt)} tokens, {len(prompt)} characters)")


# -- stats ---------------------------------------------------------------------------------------


def cmd_stats(handle: StoreHandle, as_json: bool) -> None:
    store = handle.open()
    stats = store.stats()
    data: dict[str, Any] = {
        "store": handle.display,
        "backend": "postgresql" if handle.is_postgres else "sqlite",
        "schema_version": stats.schema_version,
        "sessions": stats.sessions,
        "registered_sessions": stats.registered_sessions,
        "messages": stats.messages,
        "compactions": stats.compactions,
        "blocks": stats.blocks,
        "cached_prompts": stats.cached_prompts,
        "search_entries": stats.search_entries,
        "database_bytes": stats.size_bytes,
    }
    if not handle.is_postgres and handle.url != ":memory:":
        data["file_bytes"] = os.path.getsize(handle.url)
        wal = Path(handle.url + "-wal")
        data["wal_bytes"] = wal.stat().st_size if wal.exists() else 0
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    console = _console()
    table = _table(console, "STAT", "VALUE")
    for key, value in data.items():
        shown = _size(value) if key.endswith("_bytes") else value
        table.add_row(_text(key.replace("_", " ")), _text(shown))
    _print(console, table)


# -- export --------------------------------------------------------------------------------------


def _registry_json(row: SessionRow) -> dict[str, Any]:
    data = row._asdict()
    data["created_at"] = _iso(row.created_at_us)
    data["updated_at"] = _iso(row.updated_at_us)
    return data


def export_records(store: Store, session_id: str, skipped: list[str] | None = None) -> Iterator[dict[str, Any]]:
    """The JSON Lines records of one session, parents before children; a message row that no
    longer parses (every read skips it) is left out and its children hang from its parent."""
    summary = summary_of(store, session_id)
    yield {
        "kind": "session",
        "format": EXPORT_FORMAT,
        "session_id": session_id,
        "exported_at": datetime.now(timezone.utc).isoformat(),
        "registry": None if summary.registry is None else _registry_json(summary.registry),
    }
    emitted: set[str] = set()
    dropped: dict[str, str | None] = {}  # an unreadable row's id -> its parent
    waiting: dict[str, list[Any]] = {}  # a parent not yet written -> its rows

    def resolve(parent: str | None) -> str | None:
        seen = set()
        while parent in dropped and parent not in seen:
            seen.add(parent)
            parent = dropped[parent]
        return parent

    def release(row: Any) -> Iterator[dict[str, Any]]:
        stack = [row]
        while stack:
            current = stack.pop()
            parent = resolve(current.parent_id)
            if parent is not None and parent not in emitted:
                waiting.setdefault(parent, []).append(current)
                continue
            try:
                data = json.loads(current.content)
                message = parse_message(data)
                if BLOB_PREFIX in current.content:  # put payloads back (bytes are exported as base64)
                    message = restore_blobs([message], store.get_blobs)[0]
                    data = message.model_dump(mode="json", by_alias=True, exclude_unset=True, exclude={"created_at"})
            except (ValueError, MessageValidationError):
                dropped[current.id] = parent
                if skipped is not None:
                    skipped.append(current.id)
                stack.extend(reversed(waiting.pop(current.id, [])))
                continue
            emitted.add(current.id)
            yield {
                "kind": "message",
                "session_id": session_id,
                "id": current.id,
                "parent_id": parent,
                "created_at": _iso(current.created_at_us),
                "message": data,
            }
            stack.extend(reversed(waiting.pop(current.id, [])))

    after = 0
    while True:
        page = store.message_rows(session_id, after, PAGE_ROWS)
        if not page:
            break
        for _seq, row in page:
            yield from release(row)
        after = page[-1][0]
    while waiting:  # a parent that never came (deleted meanwhile): its children become roots
        parent_id, rows = next(iter(waiting.items()))
        del waiting[parent_id]
        dropped[parent_id] = None
        for row in rows:
            yield from release(row)
    for compaction in store.get_compactions(session_id):
        yield {
            "kind": "compaction",
            "session_id": session_id,
            "id": compaction.id,
            "from_message_id": compaction.from_message_id,
            "to_message_id": compaction.to_message_id,
            "created_at": _iso(compaction.created_at_us),
            "summary": compaction.summary,
        }
    for block in store.list_blocks(session_id):
        yield {
            "kind": "block",
            "session_id": session_id,
            "label": block.label,
            "content": block.content,
            "updated_at": _iso(block.updated_at_us),
        }
    prompt = store.get_cached_prompt(session_id)
    if prompt is not None:
        yield {"kind": "prompt", "session_id": session_id, "prompt": prompt}
    after = 0
    while True:
        entries = store.search_entry_rows(session_id, after, PAGE_ROWS)
        if not entries:
            break
        for entry in entries:
            yield {
                "kind": "search_entry",
                "session_id": session_id,
                "label": entry.label,
                "key": entry.key,
                "content": entry.content,
                "created_at": _iso(entry.created_at_us),
                "updated_at": _iso(entry.updated_at_us),
            }
        after = entries[-1].seq


def _progress(*, counting_bytes: bool = False) -> Any:
    """A progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    console = _console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn() if counting_bytes else MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
        disable=not console.is_terminal,
    )


def cmd_export(handle: StoreHandle, session_id: str, output: str | None) -> None:
    store = handle.open()
    summary = summary_of(store, session_id)
    counts: dict[str, int] = {}
    skipped: list[str] = []
    to_stdout = output in (None, "-")
    if to_stdout:
        stream: IO[str] = sys.stdout
        temporary = None
    else:
        target = Path(output)
        if not target.parent.exists():
            raise NotFound(f"no such directory: {target.parent}")
        descriptor, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        stream = os.fdopen(descriptor, "w", encoding="utf-8", newline="\n")
    progress = _progress()
    try:
        with progress:
            task = progress.add_task("Exporting", total=summary.message_count or None)
            for record in export_records(store, session_id, skipped):
                stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
                counts[record["kind"]] = counts.get(record["kind"], 0) + 1
                if record["kind"] == "message":
                    progress.advance(task)
        stream.flush()
        if temporary is not None:
            stream.close()
            os.replace(temporary, output)
            temporary = None
    finally:
        if temporary is not None:
            stream.close()
            os.unlink(temporary)
    note = _console(stderr=True)
    parts = [
        _count(counts.get("message", 0), "message"),
        _count(counts.get("compaction", 0), "compaction"),
        _count(counts.get("block", 0), "block"),
        _count(counts.get("prompt", 0), "cached prompt"),
        _count(counts.get("search_entry", 0), "search entry", "search entries"),
    ]
    where = "" if to_stdout else f" to {output}"
    note.print(f"Exported session {session_id}{where}: {', '.join(parts)}.")
    if skipped:
        note.print(f"Warning: left out {len(skipped)} unreadable message row(s): {', '.join(skipped[:5])}")


def _count(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


# -- import --------------------------------------------------------------------------------------


KINDS = ("session", "message", "compaction", "block", "prompt", "search_entry")


@dataclass
class _Record:
    kind: str
    session_id: str  # the target session
    data: dict[str, Any]
    message: SessionMessage | None = None
    created_at: datetime | None = None


def _parse_time(value: Any, name: str) -> datetime:
    if not isinstance(value, str):
        raise BadInput(f"{name} must be an ISO 8601 time string")
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise BadInput(f"{name} is not an ISO 8601 time: {value!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _string(data: dict[str, Any], name: str, *, optional: bool = False, empty: bool = True) -> str | None:
    value = data.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise BadInput(f"{name!r} must be a string" + ("" if name in data else " (missing)"))
    if not empty and not value:
        raise BadInput(f"{name!r} must not be empty")
    return value


class _Importer:
    """Validates every line first (nothing is written if one is bad), then writes them."""

    def __init__(self, store: Store, into: str | None) -> None:
        self.store = store
        self.into = into
        self.source_session: str | None = None
        self.seen: dict[tuple[str, str], tuple[int, str]] = {}  # (target, id) -> (line, digest)
        self.stored_ids: dict[str, set[str]] = {}
        self.stored_entries: dict[str, dict[tuple[str, str], bytes]] = {}
        self.sessions: set[str] = set()
        self.line = 0
        self._session_objects: dict[str, Any] = {}

    # -- validation --------------------------------------------------------------------------

    def parse(self, line: str) -> _Record | None:
        """The record of one line, checked; ``None`` for a blank line."""
        if not line.strip():
            return None
        try:
            data = json.loads(line)
        except json.JSONDecodeError as error:
            raise BadInput(f"not valid JSON: {error.msg} at character {error.pos + 1}") from None
        if not isinstance(data, dict):
            raise BadInput(f"expected a JSON object, got {type(data).__name__}")
        kind = data.get("kind")
        if kind not in KINDS:
            raise BadInput(f"unknown kind {kind!r} (expected one of {', '.join(KINDS)})")
        source = _string(data, "session_id")
        assert source is not None
        if self.into is not None:
            if self.source_session is not None and source != self.source_session:
                raise BadInput(
                    f"the file holds more than one session ({self.source_session!r}, {source!r});"
                    " --into needs a file of one session"
                )
            self.source_session = source
        record = _Record(kind, self.into if self.into is not None else source, data)
        getattr(self, f"_check_{kind}")(record)
        return record

    def _check_session(self, record: _Record) -> None:
        data = record.data
        if data.get("format") != EXPORT_FORMAT:
            raise BadInput(f"unsupported format {data.get('format')!r} (this version reads {EXPORT_FORMAT!r})")
        registry = data.get("registry")
        if registry is None:
            return
        if not isinstance(registry, dict):
            raise BadInput("'registry' must be an object or null")
        _string(registry, "name")
        for name in ("parent_session_id", "model", "source", "end_reason", "namespace", "id"):
            _string(registry, name, optional=True)
        for name in ("input_tokens", "output_tokens"):
            if not isinstance(registry.get(name, 0), int) or isinstance(registry.get(name, 0), bool):
                raise BadInput(f"registry {name!r} must be an integer")
        if not isinstance(registry.get("estimated_cost", 0), (int, float)):
            raise BadInput("registry 'estimated_cost' must be a number")
        for name in ("created_at", "updated_at"):
            _parse_time(registry.get(name), f"registry {name!r}")

    def _check_message(self, record: _Record) -> None:
        data = record.data
        message = parse_message(data.get("message")) if isinstance(data.get("message"), dict) else None
        if message is None:
            raise BadInput("'message' must be a message object")
        ident = _string(data, "id", optional=True)
        if ident is not None and ident != message.id:
            raise BadInput(f"'id' {ident!r} differs from the message's id {message.id!r}")
        parent = _string(data, "parent_id", optional=True, empty=False)
        record.created_at = _parse_time(data.get("created_at"), "'created_at'")
        record.message = message
        key = (record.session_id, message.id)
        digest = hashlib.sha256(
            json.dumps([parent, data["created_at"], data["message"]], sort_keys=True).encode()
        ).hexdigest()
        earlier = self.seen.get(key)
        if earlier is not None:
            if earlier[1] != digest:
                raise BadInput(f"message {message.id!r} appears again, different from line {earlier[0]}")
            return
        if parent is not None and (record.session_id, parent) not in self.seen:
            if self.store.get_message(record.session_id, parent) is None:
                raise BadInput(
                    f"message {message.id!r} has parent {parent!r}, which is neither earlier in the file"
                    f" nor stored in session {record.session_id!r}"
                )
        self.seen[key] = (self.line, digest)

    def _check_compaction(self, record: _Record) -> None:
        for name in ("id", "from_message_id", "to_message_id"):
            _string(record.data, name, empty=False)
        _string(record.data, "summary")
        record.created_at = _parse_time(record.data.get("created_at"), "'created_at'")

    def _check_block(self, record: _Record) -> None:
        _string(record.data, "label", empty=False)
        _string(record.data, "content")

    def _check_prompt(self, record: _Record) -> None:
        _string(record.data, "prompt")

    def _check_search_entry(self, record: _Record) -> None:
        _string(record.data, "label", empty=False)
        _string(record.data, "key", empty=False)
        _string(record.data, "content")

    # -- writing -----------------------------------------------------------------------------

    def write(self, record: _Record, counts: dict[str, list[int]]) -> None:
        stored = getattr(self, f"_write_{record.kind}")(record)
        self.sessions.add(record.session_id)
        if stored is not None:
            tally = counts.setdefault(record.kind, [0, 0])
            tally[0 if stored else 1] += 1

    def _write_session(self, record: _Record) -> bool | None:
        registry = record.data.get("registry")
        if registry is None:
            return None
        target = record.session_id
        existing = self.store.session_summaries([target])
        if existing and existing[0].registry is not None:
            return False
        if registry.get("storage_id") == target and registry.get("id"):
            namespace, ident = registry.get("namespace") or "", registry["id"]
        else:
            namespace, ident = target.split(":", 1) if ":" in target else ("", target)
        if self.store.get_session_row(namespace, ident) is not None:
            return False
        self.store.register_session(
            SessionRow(
                namespace, ident, target, registry["name"], registry.get("parent_session_id"),
                registry.get("model"), registry.get("source"), int(registry.get("input_tokens", 0)),
                int(registry.get("output_tokens", 0)), float(registry.get("estimated_cost", 0.0)),
                registry.get("end_reason"), to_us(_parse_time(registry["created_at"], "created_at")),
                to_us(_parse_time(registry["updated_at"], "updated_at")),
            )
        )
        return True

    def _write_message(self, record: _Record) -> bool:
        from .session import Session

        assert record.message is not None and record.created_at is not None
        session = self._session_objects.get(record.session_id)
        if session is None:
            session = self._session_objects[record.session_id] = Session(self.store).for_session(record.session_id)
        result = session.import_message(record.message, parent_id=record.data.get("parent_id"), created_at=record.created_at)
        return result.inserted

    def _write_compaction(self, record: _Record) -> bool:
        data = record.data
        target = record.session_id
        ids = self.stored_ids.get(target)
        if ids is None:
            ids = self.stored_ids[target] = {c.id for c in self.store.get_compactions(target)}
        assert record.created_at is not None
        row = CompactionRow(data["id"], data["summary"], data["from_message_id"], data["to_message_id"], to_us(record.created_at))
        if row.id in ids:
            return False
        if not self.store.import_compaction(target, row):
            # The id belongs to another session of this store (e.g. the original, when importing
            # with --into): store a copy under an id derived from both, the same on every import.
            row = row._replace(id=str(uuid.uuid5(uuid.NAMESPACE_URL, f"session-memory:{target}:{row.id}")))
            if row.id in ids or not self.store.import_compaction(target, row):
                return False
        ids.add(row.id)
        return True

    def _write_block(self, record: _Record) -> bool:
        label, content = record.data["label"], record.data["content"]
        if self.store.get_block(record.session_id, label) == content:
            return False
        self.store.set_block(record.session_id, label, content)
        return True

    def _write_prompt(self, record: _Record) -> bool:
        prompt = record.data["prompt"]
        if self.store.get_cached_prompt(record.session_id) == prompt:
            return False
        self.store.set_cached_prompt(record.session_id, prompt)
        return True

    def _write_search_entry(self, record: _Record) -> bool:
        data = record.data
        target = record.session_id
        entries = self.stored_entries.get(target)
        if entries is None:  # what the session holds already, read once
            entries = self.stored_entries[target] = {}
            after = 0
            while page := self.store.search_entry_rows(target, after, PAGE_ROWS):
                entries.update(((e.label, e.key), hashlib.sha256(e.content.encode()).digest()) for e in page)
                after = page[-1].seq
        key, digest = (data["label"], data["key"]), hashlib.sha256(data["content"].encode()).digest()
        if entries.get(key) == digest:
            return False
        self.store.set_search_entry(target, data["label"], data["key"], data["content"])
        entries[key] = digest
        return True


def _lines(path: str) -> Iterator[tuple[int, str, int]]:
    """``(line number, text, bytes)`` of a UTF-8 file."""
    with open(path, "rb") as stream:
        for number, raw in enumerate(stream, 1):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise BadInput(f"{path} line {number}: not UTF-8 ({error.reason})") from None
            yield number, text, len(raw)


def cmd_import(handle: StoreHandle, source: str, into: str | None, dry_run: bool) -> None:
    if into is not None and not into:
        raise BadInput("--into needs a non-empty session id")
    spooled = None
    if source == "-":
        descriptor, spooled = tempfile.mkstemp(prefix="sessions-import-", suffix=".jsonl")
        with os.fdopen(descriptor, "wb") as stream:
            reader = getattr(sys.stdin, "buffer", None)
            if reader is not None:
                for chunk in iter(lambda: reader.read(1 << 20), b""):
                    stream.write(chunk)
            else:  # pragma: no cover - a text-only stdin
                stream.write(sys.stdin.read().encode("utf-8"))
        path, name = spooled, "<stdin>"
    else:
        path, name = source, source
        if not os.path.exists(path):
            raise NotFound(f"no such file: {source}")
        if os.path.isdir(path):
            raise BadInput(f"{source} is a directory")
    try:
        # Check every line before creating or writing anything (a missing store checks as empty).
        importer = _Importer(_open_for_check(handle), into)
        size = os.path.getsize(path)
        records = 0
        with _progress(counting_bytes=True) as progress:
            task = progress.add_task("Checking", total=size or None)
            for number, text, length in _lines(path):
                importer.line = number
                try:
                    if importer.parse(text) is not None:
                        records += 1
                except (BadInput, MessageValidationError) as error:
                    raise BadInput(f"{name} line {number}: {error}") from None
                progress.advance(task, length)
            if records == 0:
                raise BadInput(f"{name} holds no records")
            if dry_run:
                _console().print(f"{name}: {records} valid record{'' if records == 1 else 's'}; nothing written (--dry-run).")
                return
            counts: dict[str, list[int]] = {}
            writer = _Importer(handle.open(create=True), into)
            task = progress.add_task("Importing", total=size or None)
            for number, text, length in _lines(path):
                writer.line = number
                record = writer.parse(text)
                if record is not None:
                    writer.write(record, counts)
                progress.advance(task, length)
    finally:
        if spooled is not None:
            os.unlink(spooled)
    labels = {
        "message": ("message", "messages"),
        "compaction": ("compaction", "compactions"),
        "block": ("block", "blocks"),
        "prompt": ("cached prompt", "cached prompts"),
        "search_entry": ("search entry", "search entries"),
    }
    labels["session"] = ("registry row", "registry rows")
    stored_parts, present_parts = [], []
    for kind, (singular, plural) in labels.items():
        stored, present = counts.get(kind, [0, 0])
        if stored:
            stored_parts.append(f"{stored} {singular if stored == 1 else plural}")
        if present:
            present_parts.append(f"{present} {singular if present == 1 else plural}")
    report = f"stored {', '.join(stored_parts)}" if stored_parts else "nothing new"
    if present_parts:
        report += f"; already present: {', '.join(present_parts)}"
    targets = ", ".join(sorted(writer.sessions))
    _console().print(f"Imported into {targets}: {report}.")


def _open_for_check(handle: StoreHandle) -> Store:
    """The store for ``import --dry-run``: an empty in-memory one when the target does not exist."""
    try:
        return handle.open()
    except NotFound:
        from .stores.sqlite import SqliteStore

        empty = SqliteStore(":memory:")
        handle._close.append(empty.close)
        return empty


# -- the click wiring ----------------------------------------------------------------------------


def build_cli() -> "click.Group":
    """The click command group (imports click)."""
    import click

    class Group(click.Group):
        def invoke(self, ctx: click.Context) -> Any:
            try:
                return super().invoke(ctx)
            except (click.exceptions.ClickException, click.exceptions.Exit, click.exceptions.Abort):
                raise
            except BrokenPipeError:
                raise
            except Exception as error:
                handle = ctx.obj if isinstance(ctx.obj, StoreHandle) else None
                if handle is not None and handle.debug:
                    raise
                message, code = _error_for(error)
                failure = click.ClickException(_one_line(message))
                failure.exit_code = code
                raise failure from None

    width_option = click.option(
        "--width", type=click.IntRange(10, 2000), default=80, show_default=True, help="Characters of each preview."
    )

    @click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
    @click.option(
        "--store",
        "store_url",
        envvar="SESSIONS_STORE",
        default=DEFAULT_STORE,
        metavar="URL",
        help="A SQLite file path or a postgresql:// URL (default: $SESSIONS_STORE, else ./sessions.db).",
    )
    @click.option("--schema", default=None, metavar="NAME", help="The PostgreSQL schema holding the tables (default: public).")
    @click.option("--debug", is_flag=True, hidden=True, help="Show tracebacks.")
    @click.version_option(package_name="session-memory", prog_name="sessions", message="%(prog)s %(version)s")
    @click.pass_context
    def cli(ctx: click.Context, store_url: str, schema: str | None, debug: bool) -> None:
        """Inspect, search, export and import session-memory stores.

        SESSION is a storage session id: what Session.for_session takes, "namespace:id" for a
        session of a SessionManager with a namespace. Exit codes: 0 ok, 1 not found or store
        failure, 2 usage or bad input.
        """
        handle = StoreHandle(store_url, schema, debug)
        ctx.obj = handle
        ctx.call_on_close(handle.close)

    @cli.command("list")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON array.")
    @click.pass_obj
    def list_command(handle: StoreHandle, as_json: bool) -> None:
        """List every session with its name, messages, last activity and usage."""
        cmd_list(handle, as_json)

    @cli.command("show")
    @click.argument("session")
    @width_option
    @click.pass_obj
    def show_command(handle: StoreHandle, session: str, width: int) -> None:
        """Print the message tree of SESSION (every branch; compactions marked).

        * marks the messages of the active branch (the path to the latest leaf)."""
        cmd_show(handle, session, width)

    @cli.command("search")
    @click.argument("query")
    @click.option("--session", "sessions", multiple=True, metavar="SESSION", help="Only this session (repeatable).")
    @click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
    @width_option
    @click.pass_obj
    def search_command(handle: StoreHandle, query: str, sessions: tuple[str, ...], limit: int, width: int) -> None:
        """Find messages containing every word of QUERY (stemmed), best first."""
        cmd_search(handle, query, sessions, limit, width)

    @cli.command("export")
    @click.argument("session")
    @click.option("-o", "--output", metavar="FILE", default=None, help="Write to FILE (default: stdout).")
    @click.pass_obj
    def export_command(handle: StoreHandle, session: str, output: str | None) -> None:
        """Write SESSION as JSON Lines.

        One record per line: the session (registry row), its messages (parents first), then its
        compactions, context blocks, cached prompt and search entries."""
        cmd_export(handle, session, output)

    @cli.command("import")
    @click.argument("file", metavar="FILE")
    @click.option("--into", metavar="SESSION", default=None, help="Import into this session id instead.")
    @click.option("--dry-run", is_flag=True, help="Check the file only; write nothing.")
    @click.pass_obj
    def import_command(handle: StoreHandle, file: str, into: str | None, dry_run: bool) -> None:
        """Import a JSON Lines export (FILE, or - for stdin).

        Idempotent: importing a file twice stores nothing twice.

        Every line is checked before anything is written; a bad line names its number.
        """
        cmd_import(handle, file, into, dry_run)

    @cli.command("blocks")
    @click.argument("session")
    @width_option
    @click.pass_obj
    def blocks_command(handle: StoreHandle, session: str, width: int) -> None:
        """Show the context blocks, search entries and cached prompt of SESSION."""
        cmd_blocks(handle, session, width)

    @cli.command("stats")
    @click.option("--json", "as_json", is_flag=True, help="Print a JSON object.")
    @click.pass_obj
    def stats_command(handle: StoreHandle, as_json: bool) -> None:
        """Count sessions, messages, compactions, blocks and search entries."""
        cmd_stats(handle, as_json)

    return cli
