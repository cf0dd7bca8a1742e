"""The commands that read a store (``list``, ``show``, ``search``, ``blocks``, ``stats``), and
``migrate``."""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..messages import message_from_storage
from ..stores.base import CompactionRow, InspectableStore, SessionSummary
from ..tokens import estimate_tokens
from .output import (
    clip,
    console,
    emit,
    emit_values,
    format_size,
    format_time,
    iso_time,
    message_preview,
    progress_bar,
    table,
    text,
)
from .store import BadInput, NotFound, StoreHandle, summary_of

ROLE_STYLES = {"user": "green", "assistant": "blue", "tool": "magenta"}


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
        "first_message_at": None if summary.first_created_at_us is None else iso_time(summary.first_created_at_us),
        "last_activity": None if last is None else iso_time(last),
        "input_tokens": registry.input_tokens if registry else None,
        "output_tokens": registry.output_tokens if registry else None,
        "estimated_cost": registry.estimated_cost if registry else None,
        "end_reason": registry.end_reason if registry else None,
    }


def cmd_list(handle: StoreHandle, as_json: bool) -> None:
    store = handle.open(read_only=True)
    summaries = sorted(store.session_summaries(), key=lambda s: (-(_last_activity(s) or 0), s.session_id))
    if as_json:
        sys.stdout.write(json.dumps([_summary_json(s) for s in summaries], ensure_ascii=False, indent=2) + "\n")
        return
    out = console()
    if not summaries:
        out.print("No sessions.")
        return
    grid = table(
        out,
        "SESSION",
        "NAME",
        "NAMESPACE",
        "MESSAGES",
        "LAST ACTIVITY",
        "TOKENS IN",
        "TOKENS OUT",
        "COST",
        right=("MESSAGES", "TOKENS IN", "TOKENS OUT", "COST"),
    )
    for summary in summaries:
        registry = summary.registry
        grid.add_row(
            text(summary.session_id, "cyan"),
            text(registry.name if registry else "-"),
            text((registry.namespace or '""') if registry else "-"),
            text(summary.message_count),
            text(format_time(_last_activity(summary))),
            text(registry.input_tokens if registry else "-"),
            text(registry.output_tokens if registry else "-"),
            text(f"{registry.estimated_cost:.4f}" if registry else "-"),
        )
    emit(out, grid)
    out.print(f"{len(summaries)} session{'' if len(summaries) == 1 else 's'}")


# -- show ----------------------------------------------------------------------------------------


@dataclass(slots=True)
class _Node:
    id: str
    parent_id: str | None
    role: str
    created_at_us: int


def _load_tree(store: InspectableStore, session_id: str) -> tuple[dict[str, _Node], dict[str | None, list[str]]]:
    """Every message of the session, without its content (read only for the page shown)."""
    nodes = {row[0]: _Node(*row) for row in store.message_tree(session_id)}
    children: dict[str | None, list[str]] = {}
    for node in nodes.values():  # (created_at, seq) order, as Store.children gives them
        parent = node.parent_id if node.parent_id in nodes else None
        children.setdefault(parent, []).append(node.id)
    return nodes, children


def _preview(store: InspectableStore, session_id: str, message_id: str, width: int) -> str:
    row = store.get_message(session_id, message_id)
    if row is None:  # deleted since the tree was read
        return ""
    return message_preview(message_from_storage(row.content, row.created_at_us), width)


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


def cmd_show(handle: StoreHandle, session_id: str, width: int, page: int = 1, limit: int = 500) -> None:
    from rich.tree import Tree

    store = handle.open(read_only=True)
    summary = summary_of(store, session_id)
    nodes, children = _load_tree(store, session_id)
    pages = max(1, -(-len(nodes) // limit))
    if page > pages:
        raise BadInput(
            f"--page {page} is past the end: session {session_id!r} has {len(nodes):,}"
            f" message{'s' if len(nodes) != 1 else ''}, {pages:,} page{'s' if pages != 1 else ''} of {limit:,}"
        )
    first, last = (page - 1) * limit, page * limit  # the messages shown, in the tree's order
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

    out = console()
    leaves = sum(1 for node_id in nodes if not children.get(node_id))
    title = (
        f"session {session_id}: {len(nodes)} message{'' if len(nodes) == 1 else 's'}, "
        f"{leaves} lea{'f' if leaves == 1 else 'ves'}, "
        f"{len(compactions)} compaction{'' if len(compactions) == 1 else 's'}"
    )
    if summary.registry is not None:
        title += f"; name {summary.registry.name!r}"
    if active_leaf:
        title += f"; active leaf {active_leaf}"
    tree = Tree(text(title, "bold"), guide_style="dim")
    if not nodes:
        tree.add(text("(no messages)", "dim"))

    def label(node: _Node) -> Any:
        from rich.text import Text

        line = Text()
        line.append("* " if node.id in active else "  ", style="bold yellow")
        line.append(node.id, style="cyan")
        line.append(f" {node.role}", style=ROLE_STYLES.get(node.role, "yellow"))
        line.append(f": {_preview(store, session_id, node.id, width)}")
        if node.id in covered_by:
            line.append(f"  [summarised by compaction {covered_by[node.id]}]", style="dim")
        if node.id == active_leaf:
            line.append("  <- active leaf", style="bold yellow")
        return line

    def compaction_label(compaction: CompactionRow) -> Any:
        return text(
            f"~ compaction {compaction.id} ({format_time(compaction.created_at_us)}) covers "
            f"{compaction.from_message_id} .. {compaction.to_message_id}: {clip(compaction.summary, width)}",
            "italic",
        )

    def branch_label(kind: str, index: int, total: int, first: str, parent: str | None) -> Any:
        where = f" from {parent}" if parent else ""
        mark = " (active)" if first in active else ""
        return text(f"{kind} {index}/{total}{where}{mark}", "bold yellow" if mark else "bold")

    pending: deque[tuple[Any, str]] = deque()
    roots = children.get(None, [])
    if len(roots) == 1:
        pending.append((tree, roots[0]))
    for index, root in enumerate(roots if len(roots) > 1 else [], 1):
        pending.append((tree.add(branch_label("root", index, len(roots), root, None)), root))
    position = 0
    while pending:  # iterative: a long chain stays at one level, a fork nests its branches
        container, current = pending.popleft()
        while True:
            if first <= position < last:
                for compaction in starts.get(current, ()):
                    container.add(compaction_label(compaction))
                container.add(label(nodes[current]))
            position += 1
            kids = children.get(current, [])
            if len(kids) == 1:
                current = kids[0]
                continue
            for index, kid in enumerate(kids, 1):
                pending.append((container.add(branch_label("branch", index, len(kids), kid, current)), kid))
            break
    for compaction in detached:
        tree.add(
            text(
                f"~ compaction {compaction.id} not applied: {compaction.from_message_id} .. "
                f"{compaction.to_message_id} is not a range of one branch",
                "dim",
            )
        )
    emit(out, tree)
    if len(nodes) > limit:
        shown = f"messages {min(first + 1, len(nodes)):,}-{min(last, len(nodes)):,} of {len(nodes):,} shown"
        more = f"; --page {page + 1} for the next {limit:,}" if last < len(nodes) else ""
        out.print(f"{shown} (page {page} of {-(-len(nodes) // limit):,}{more})")


# -- search --------------------------------------------------------------------------------------


def cmd_search(
    handle: StoreHandle, query: str, sessions: tuple[str, ...], limit: int, width: int, match: str = "any"
) -> None:
    store = handle.open(read_only=True)
    for session_id in sessions:
        summary_of(store, session_id)
    if handle.redact_salt is not None:
        from ..redaction import PIIRedactor, redact_query

        query = redact_query(PIIRedactor(hash_salt=handle.redact_salt), query)
    rows = store.search_messages(list(sessions) if sessions else None, query, limit, match)
    out = console()
    if not rows:
        out.print("No matches.")
        return
    grid = table(out, "SESSION", "ID", "ROLE", "CREATED", "TEXT")
    for row in rows:
        grid.add_row(
            text(row.session_id, "cyan"),
            text(row.id),
            text(row.role),
            text(format_time(row.created_at_us)),
            text(clip(row.content, width)),
        )
    emit(out, grid)
    out.print(f"{len(rows)} match{'' if len(rows) == 1 else 'es'}")


# -- blocks --------------------------------------------------------------------------------------


def cmd_blocks(handle: StoreHandle, session_id: str, width: int) -> None:
    store = handle.open(read_only=True)
    summary_of(store, session_id)
    blocks = store.list_blocks(session_id)
    counts = store.search_entry_counts(session_id)
    prompt = store.get_cached_prompt(session_id)
    out = console()
    if blocks:
        grid = table(out, "BLOCK", "TOKENS", "UPDATED", "CONTENT", right=("TOKENS",))
        for block in blocks:
            grid.add_row(
                text(block.label, "cyan"),
                text(estimate_tokens(block.content)),
                text(format_time(block.updated_at_us)),
                text(clip(block.content, width)),
            )
        emit(out, grid)
    else:
        out.print("No stored context blocks.")
    if counts:
        grid = table(out, "SEARCHABLE BLOCK", "ENTRIES", right=("ENTRIES",))
        for label, count in counts:
            grid.add_row(text(label, "cyan"), text(count))
        emit(out, grid)
    else:
        out.print("No search entries.")
    if prompt is None:
        out.print("Cached prompt: no")
    else:
        out.print(f"Cached prompt: yes ({estimate_tokens(prompt)} tokens, {len(prompt)} characters)")


def cmd_block_history(handle: StoreHandle, session_id: str, label: str, key: str | None, width: int) -> None:
    """The versions of one block (or entry), newest first, each with what changed since the one before."""
    store = handle.open(read_only=True)
    summary_of(store, session_id)
    versions = store.block_versions(session_id, label, key)
    what = f"block {label!r}" + (f" entry {key!r}" if key is not None else "")
    if not versions:
        raise NotFound(f"no versions of {what} in session {session_id!r}")
    out = console()
    grid = table(out, "VERSION", "WRITTEN", "SOURCE", "CHANGE", right=("VERSION",))
    for version, older in zip(versions, [*versions[1:], None]):
        source = version.source + (f" ({version.tool_call_id})" if version.tool_call_id else "")
        change = change_between("" if older is None else older.content, version.content)
        grid.add_row(
            text(version.version), text(format_time(version.created_at_us)), text(source), text(clip(change, width))
        )
    emit(out, grid)


def cmd_block_restore(
    handle: StoreHandle,
    session_id: str,
    label: str,
    key: str | None,
    number: int,
    max_tokens: int | None = None,
    keep_versions: int | None = None,
) -> None:
    """Make an old version of a block (or entry) current, as a new version: the library's
    ``Session.restore_context`` on the block declared with ``max_tokens`` and ``keep_versions``
    (a store-backed block; a keyed entry is one of a searchable block), so the write is checked,
    pruned and published on the change feed as any restore is."""
    from ..providers import StoreSearchContext
    from ..session import Session

    store = handle.open()
    summary_of(store, session_id)
    provider = StoreSearchContext() if key is not None else None
    with Session(store).for_session(session_id) as session:
        session.with_context(label, max_tokens=max_tokens, provider=provider, keep_versions=keep_versions)
        new = session.restore_context(label, number, key)
    what = f"block {label!r}" + (f" entry {key!r}" if key is not None else "")
    console().print(f"Restored {what} of session {session_id} to version {number}, as version {new.version}.")


def change_between(old: str, new: str) -> str:
    """What changed from ``old`` to ``new``, word by word: ``-removed +added`` (``=`` if nothing)."""
    import difflib

    before, after = old.split(), new.split()
    parts = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=before, b=after, autojunk=False).get_opcodes():
        if tag in ("replace", "delete"):
            parts.append("-" + " ".join(before[i1:i2]))
        if tag in ("replace", "insert"):
            parts.append("+" + " ".join(after[j1:j2]))
    return " ".join(parts) if parts else "="


# -- stats ---------------------------------------------------------------------------------------


def cmd_stats(handle: StoreHandle, as_json: bool) -> None:
    store = handle.open(read_only=True)
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
    emit_values(data, "STAT", as_json, lambda key, value: format_size(value) if key.endswith("_bytes") else value)


# -- migrate -------------------------------------------------------------------------------------


def cmd_migrate(handle: StoreHandle) -> None:
    reindexed = 0
    with progress_bar() as progress:
        task = None

        def advance(done: int, total: int) -> None:
            nonlocal task, reindexed
            if task is None:
                task = progress.add_task("Re-indexing search", total=total or None)
            progress.update(task, completed=done)
            reindexed = done

        store = handle.open(create=True, progress=advance)
    version = store.schema_version()
    done = f"; {reindexed:,} rows re-indexed for search" if reindexed else ""
    console().print(f"{handle.display}: schema version {version}{done}")
