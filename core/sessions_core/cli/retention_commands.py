"""``sessions prune`` and ``sessions erase``: whole sessions removed by age, or erased for good."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any

from .._time import to_us
from ..retention import (
    EraseResult,
    PruneResult,
    erase_block,
    erase_messages,
    erase_sessions,
    erasure_store,
    parse_duration,
    prune_sessions,
)
from ..stores.base import RowCounts, StoredSession
from .output import console, count_of, emit, format_time, table, text
from .recall_commands import load_index
from .store import BadInput, NotFound, StoreHandle


def cmd_prune(handle: StoreHandle, older_than: str, namespace: str | None, dry_run: bool, as_json: bool) -> None:
    """Remove (``dry_run``: list) the sessions of ``namespace`` (``None``: of every namespace)
    last active longer ago than ``older_than``."""
    try:
        age = parse_duration(older_than)
    except ValueError as error:
        raise BadInput(f"--older-than: {error}") from None
    store = handle.open(read_only=dry_run)
    result, sessions = prune_sessions(store, age, namespace=namespace, dry_run=dry_run)
    if as_json:
        _json(_prune_json(result, sessions))
        return
    out = console()
    verb = "Would prune" if dry_run else "Pruned"
    where = "" if namespace is None else f" of namespace {namespace!r}"
    out.print(
        f"{verb} {count_of(len(sessions), 'session')}{where} last active before {format_time(to_us(result.cutoff))}"
        + (":" if sessions else ".")
    )
    if sessions:
        grid = table(out, "SESSION", "NAMESPACE", "LAST ACTIVE")
        for session in sessions:
            grid.add_row(text(session.storage_id), text(session.namespace), text(format_time(session.last_activity_us)))
        emit(out, grid)
        _emit_counts(result.counts, "WOULD GO" if dry_run else "REMOVED")


def cmd_erase(
    handle: StoreHandle,
    session: str | None,
    namespace: str | None,
    vacuum: bool,
    index: str | None,
    as_json: bool,
    *,
    messages: Sequence[str] = (),
    block: str | None = None,
    key: str | None = None,
) -> None:
    """Erase ``session`` (a storage id), or only its ``messages`` or its ``block`` (``key``: one
    entry of it), or every session of ``namespace``, and scrub the store."""
    if (session is None) == (namespace is None):
        raise BadInput("give SESSION or --namespace NS (one of them)")
    if key is not None and block is None:
        raise BadInput("--key goes with --block LABEL")
    if messages or block is not None:
        if session is None:
            raise BadInput("--message and --block erase parts of SESSION: give SESSION, not --namespace")
        if messages and block is not None:
            raise BadInput("give --message ID or --block LABEL, not both")
        if block is not None:
            _erase_block(handle, session, block, key, vacuum, index, as_json)
        else:
            _erase_messages(handle, session, messages, vacuum, index, as_json)
        return
    store = erasure_store(handle.open())
    if session is not None:
        targets = [session]
    else:
        targets = [s.storage_id for s in store.session_activity(namespace)]
    recall = load_index(index).attach(store) if index is not None else None
    _removal, result = erase_sessions(store, targets, vacuum=vacuum, recall=recall, namespace=namespace)
    if session is not None and not result.session_ids:
        raise NotFound(f"unknown session {session!r}: the store holds nothing under that id (see `sessions list`)")
    if as_json:
        _json(_erase_json(result))
        return
    out = console()
    where = "" if namespace is None else f" of namespace {namespace!r}"
    scrubbed = " and vacuumed the store" if vacuum else ""
    out.print(f"Erased {count_of(len(result.session_ids), 'session')}{where}{scrubbed}.")
    if result.session_ids:
        _emit_counts(result.counts, "REMOVED")
    if result.items:
        out.print(f"Erased {count_of(result.items, 'store item')} of the namespace, with their versions.")
    _vectors_pending(result)


def _erase_messages(
    handle: StoreHandle, session: str, messages: Sequence[str], vacuum: bool, index: str | None, as_json: bool
) -> None:
    store = erasure_store(handle.open())
    recall = load_index(index).attach(store) if index is not None else None
    erased, result = erase_messages(store, session, messages, vacuum=vacuum, recall=recall)
    if not erased:
        raise NotFound(
            f"session {session!r} holds none of the messages {', '.join(map(repr, messages))} (see `sessions show`)"
        )
    if as_json:
        _json({**_erase_json(result), "messages": erased})
        return
    out = console()
    scrubbed = " and vacuumed the store" if vacuum else ""
    out.print(f"Erased {count_of(len(erased), 'message')} of session {session!r}{scrubbed}.")
    _emit_counts(result.counts, "REMOVED")
    _vectors_pending(result)


def _erase_block(
    handle: StoreHandle, session: str, label: str, key: str | None, vacuum: bool, index: str | None, as_json: bool
) -> None:
    store = erasure_store(handle.open())
    recall = load_index(index).attach(store) if index is not None else None
    result = erase_block(store, session, label, key, vacuum=vacuum, recall=recall)
    what = f"block {label!r}" if key is None else f"entry {key!r} of block {label!r}"
    if not result.session_ids:
        raise NotFound(f"session {session!r} holds no {what} (see `sessions blocks`)")
    if as_json:
        _json({**_erase_json(result), "block": label, "key": key})
        return
    scrubbed = " and vacuumed the store" if vacuum else ""
    console().print(f"Erased {what} of session {session!r} with all its versions{scrubbed}.")
    _emit_counts(result.counts, "REMOVED")
    _vectors_pending(result)


def _vectors_pending(result: EraseResult) -> None:
    if result.vectors_pending:
        console().print(
            f"{count_of(result.vectors_pending, 'vector')} left for the application's recall sender to delete"
            " from the index (pass --index to delete them now)."
        )


def _emit_counts(counts: RowCounts, heading: str) -> None:
    out = console()
    grid = table(out, "KIND", heading, right=(heading,))
    for kind, count in counts.as_dict().items():
        grid.add_row(text(kind.replace("_", " ")), text(count))
    emit(out, grid)


def _prune_json(result: PruneResult, sessions: list[StoredSession]) -> dict[str, Any]:
    return {
        "dry_run": result.dry_run,
        "cutoff": result.cutoff.isoformat(),
        "sessions": [
            {"session": s.storage_id, "namespace": s.namespace, "id": s.id, "last_active_us": s.last_activity_us}
            for s in sessions
        ],
        "counts": result.counts.as_dict(),
    }


def _erase_json(result: EraseResult) -> dict[str, Any]:
    return {
        "sessions": list(result.session_ids),
        "counts": result.counts.as_dict(),
        "vectors_pending": result.vectors_pending,
        "vacuumed": result.vacuumed,
        "items": result.items,
    }


def _json(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, indent=2) + "\n")
