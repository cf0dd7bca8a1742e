"""``sessions recall``: semantic recall's outbox: its backlog, sending it, rebuilding an index."""

from __future__ import annotations

import importlib
from typing import Any, cast

from ..errors import SessionsError
from ..semantic import DrainReport, SemanticRecall
from ..stores.base import recall_store
from .output import console, emit_values
from .store import BadInput, StoreHandle


def cmd_recall_backlog(handle: StoreHandle, as_json: bool) -> None:
    """Print the outbox's size and state."""
    backlog = recall_store(handle.open(read_only=True)).recall_backlog()
    emit_values(backlog._asdict(), "RECALL", as_json)


def load_index(spec: str) -> SemanticRecall:
    """The index ``module:name`` names (a ``VectorIndex``, a ``SemanticRecall`` or a function
    of no arguments returning one), as a ``SemanticRecall`` that sends only when asked."""
    module_name, _, attribute = spec.partition(":")
    if not module_name or not attribute:
        raise BadInput(f"--index takes MODULE:NAME (a VectorIndex or a function returning one), not {spec!r}")
    try:
        found: Any = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as error:
        raise BadInput(f"--index {spec}: {error}") from None
    if callable(found) and not hasattr(found, "search"):
        found = found()
    if isinstance(found, SemanticRecall):
        found.background = False
        return found
    try:
        # Any: whatever the user named, checked by SemanticRecall (TypeError)
        return SemanticRecall(cast(Any, found), background=False)
    except TypeError as error:
        raise BadInput(f"--index {spec}: {error}") from None


def send(recall: SemanticRecall) -> DrainReport:
    """Drain the outbox into the index, reporting progress on stderr; stops at a failure."""
    total = DrainReport()
    progress = console(stderr=True)
    while True:
        report = recall.drain(max_changes=recall.batch_size * 4)
        total.changes += report.changes
        total.added += report.added
        total.removed += report.removed
        if report.failed:
            total.failed += report.failed
            total.errors += report.errors
            return total
        if not report.changes:
            return total
        progress.print(f"sent {total.changes} change(s): {total.added} vector(s) added, {total.removed} removed")


def cmd_recall_send(handle: StoreHandle, index: str) -> None:
    """Send what the outbox holds to the index now."""
    recall = load_index(index).attach(handle.open())
    _report(send(recall))


def cmd_recall_rebuild(handle: StoreHandle, sessions: tuple[str, ...], index: str | None) -> None:
    """Queue every enabled session (or ``sessions``) to be sent again; with ``index``, send now."""
    store = recall_store(handle.open())
    asked = list(dict.fromkeys(sessions))
    queued = store.recall_rebuild(asked or None)
    console().print(f"Queued {queued} session(s) to be sent to the index again.")
    if len(asked) > queued:  # one change per session queued, for those recall is on for
        skipped = len(asked) - queued
        console().print(
            f"{skipped} of the {len(asked)} sessions named have semantic recall off (no such session, or"
            " one never written with with_semantic_recall), so nothing of theirs was queued."
        )
    if index is not None:
        _report(send(load_index(index).attach(store)))


def _report(report: DrainReport) -> None:
    console().print(f"Sent {report.changes} change(s): {report.added} vector(s) added, {report.removed} removed.")
    if report.failed:
        raise SessionsError(f"the index failed; {report.failed} change(s) kept for later: {report.errors[-1]}")
