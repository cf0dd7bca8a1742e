"""``export`` and ``import``: files, stdin and progress around :mod:`sessions_core.transfer`."""

from __future__ import annotations

import contextlib
import gc
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from ..errors import ConflictError, InvalidRecordError
from ..redaction import PIIRedactor
from ..stores.base import InspectableStore
from ..transfer import (
    FileLines,
    ImportReport,
    _conflict_error,
    export_session,
    import_into_new,
    import_records,
    record_line,
)
from .output import console, count_of, progress_bar
from .store import BadInput, NotFound, StoreHandle, summary_of

RECORD_LABELS = {
    "message": ("message", "messages"),
    "compaction": ("compaction", "compactions"),
    "block_version": ("block version", "block versions"),
    "block": ("block", "blocks"),
    "prompt": ("cached prompt", "cached prompts"),
    "search_entry": ("search entry", "search entries"),
    "session": ("registry row", "registry rows"),
}
"""How the import report names each kind of record, in the order it lists them."""


def cmd_export(handle: StoreHandle, session_id: str, output: str | None) -> None:
    store = handle.open(read_only=True)
    summary = summary_of(store, session_id)
    counts: dict[str, int] = {}
    skipped: list[str] = []
    records = export_session(store, session_id, on_skipped=skipped.append)
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
    progress = progress_bar()
    try:
        with progress:
            task = progress.add_task("Exporting", total=summary.message_count or None)
            for record in records:
                stream.write(record_line(record))
                counts[record["kind"]] = counts.get(record["kind"], 0) + 1
                if record["kind"] == "message":
                    progress.advance(task)
        stream.flush()
        if temporary is not None:
            assert output is not None  # a temporary file only when writing to one
            stream.close()
            os.replace(temporary, output)
            temporary = None
    finally:
        if temporary is not None:
            stream.close()
            os.unlink(temporary)
    note = console(stderr=True)
    parts = [
        count_of(counts.get("message", 0), "message"),
        count_of(counts.get("compaction", 0), "compaction"),
        count_of(counts.get("block_version", 0), "block version"),
        count_of(counts.get("block", 0), "block"),
        count_of(counts.get("prompt", 0), "cached prompt"),
        count_of(counts.get("search_entry", 0), "search entry", "search entries"),
    ]
    where = "" if to_stdout else f" to {output}"
    note.print(f"Exported session {session_id}{where}: {', '.join(parts)}.")
    if skipped:
        note.print(f"Warning: left out {len(skipped)} unreadable message row(s): {', '.join(skipped[:5])}")


class _ProgressLines:
    """A file's lines (re-read at each pass of the import), advancing a progress bar by bytes."""

    def __init__(self, path: str, progress: Any, passes: tuple[str, ...]) -> None:
        self.lines = FileLines(path)
        self.size = os.path.getsize(path)
        self.progress = progress
        self.passes = list(passes)

    def __iter__(self) -> Iterator[bytes]:
        label = self.passes.pop(0) if len(self.passes) > 1 else self.passes[0]
        task = self.progress.add_task(label, total=self.size or None)
        read = 0
        for count, line in enumerate(self.lines, 1):
            yield line
            read += len(line)
            if count % 1000 == 0:
                self.progress.update(task, completed=read)
        self.progress.update(task, completed=read)


def _spool_stdin() -> str:
    """Standard input copied into a temporary file (an import reads its input twice)."""
    descriptor, path = tempfile.mkstemp(prefix="sessions-import-", suffix=".jsonl")
    with os.fdopen(descriptor, "wb") as stream:
        reader = getattr(sys.stdin, "buffer", None)
        if reader is not None:
            for chunk in iter(lambda: reader.read(1 << 20), b""):
                stream.write(chunk)
        else:  # pragma: no cover - a text-only stdin
            stream.write(sys.stdin.read().encode("utf-8"))
    return path


def cmd_import(
    handle: StoreHandle,
    source: str,
    into: str | None,
    dry_run: bool,
    *,
    redact: bool = False,
    skip_conflicts: bool = False,
) -> None:
    if into is not None and not into:
        raise BadInput("--into needs a non-empty session id")
    spooled = None
    if source == "-":
        spooled = _spool_stdin()
        path, name = spooled, "<stdin>"
    else:
        path, name = source, source
        if not os.path.exists(path):
            raise NotFound(f"no such file: {source}")
        if os.path.isdir(path):
            raise BadInput(f"{source} is a directory")
    # What is loaded by now lives as long as the command: collections need not walk it again
    # (a tenth of a large import's time otherwise). Released after it, for a caller that runs
    # the command in its own process; a host's own freeze is left as it was.
    freezes = gc.get_freeze_count() == 0
    if freezes:
        gc.freeze()
    try:
        with progress_bar(counting_bytes=True) as progress:
            redactor = PIIRedactor(hash_salt=handle.redact_salt) if redact else None
            report = _import(handle, path, progress, into, dry_run, redactor, skip_conflicts)
    except InvalidRecordError as error:
        raise BadInput(f"{name} line {error.line}: {error.reason}") from None
    except ConflictError as error:
        conflicts = getattr(error, "conflicts", None)
        if conflicts is None:
            raise
        hint = "--skip-conflicts keeps the stored ones and imports the rest"
        raise _conflict_error(conflicts, hint=hint) from None
    finally:
        if freezes:
            gc.unfreeze()
        if spooled is not None:
            os.unlink(spooled)
    if report.records == 0:
        raise BadInput(f"{name} holds no records")
    if dry_run:
        records = report.records
        kept = f"; {_describe_conflicts(report)}" if report.conflicts else ""
        console().print(
            f"{name}: {records} valid record{'' if records == 1 else 's'}{kept}; nothing written (--dry-run)."
        )
        return
    kept = f"; {_describe_conflicts(report)}" if report.conflicts else ""
    console().print(f"Imported into {', '.join(report.sessions)}: {_describe(report)}{kept}.")


def _describe_conflicts(report: ImportReport) -> str:
    """``kept as stored, with other content in the file: 2 messages ('a1', 'u2')``."""
    count = len(report.conflicts)
    ids = ", ".join(repr(message_id) for _, message_id in report.conflicts[:10])
    more = f" and {count - 10} more" if count > 10 else ""
    return f"kept as stored, with other content in the file: {count} message{'s' if count != 1 else ''} ({ids}{more})"


def _import(
    handle: StoreHandle,
    path: str,
    progress: Any,
    into: str | None,
    dry_run: bool,
    redactor: Any,
    skip_conflicts: bool = False,
) -> ImportReport:
    """Check the file, then (unless ``dry_run``) import it. A SQLite database that does not exist
    yet is built beside its path in one pass and moved into place only once all of it is in."""
    try:
        store: InspectableStore | None = handle.open()
    except NotFound:
        store = None
    if store is not None:
        return import_records(
            store,
            _ProgressLines(path, progress, ("Checking", "Importing")),
            into=into,
            dry_run=dry_run,
            redactor=redactor,
            skip_conflicts=skip_conflicts,
        )
    from ..stores.sqlite import SqliteStore

    if dry_run or handle.is_postgres:  # checked against an empty store before tables are made
        empty = SqliteStore(":memory:")
        try:
            checked = import_records(empty, _ProgressLines(path, progress, ("Checking",)), into=into, dry_run=True)
        finally:
            empty.close()
        if dry_run or checked.records == 0:
            return checked
        lines = _ProgressLines(path, progress, ("Checking", "Importing"))
        return import_records(handle.open(create=True), lines, into=into, redactor=redactor)
    target = Path(handle.url)
    if not target.parent.exists():
        raise NotFound(f"no such directory: {target.parent}")
    _remove_dead_imports(target)
    descriptor, building = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".importing", dir=target.parent)
    _hold(descriptor)  # while held, another import's _remove_dead_imports leaves this one alone
    try:
        new = SqliteStore(building, key=handle.key)
        try:
            report = import_into_new(new, _ProgressLines(path, progress, ("Importing",)), into=into, redactor=redactor)
        finally:
            new.close()
        if report.records == 0:
            return report
        os.chmod(building, 0o666 & ~_umask())
        try:
            os.link(building, target)  # fails if the path was taken meanwhile; replacing would lose it
        except FileExistsError:
            lines = _ProgressLines(path, progress, ("Checking", "Importing"))
            return import_records(handle.open(), lines, into=into, redactor=redactor, skip_conflicts=skip_conflicts)
        return report
    finally:
        for leftover in _with_sidecars(Path(building)):
            with contextlib.suppress(FileNotFoundError):
                leftover.unlink()
        os.close(descriptor)


DEAD_AFTER_SECONDS = 60.0


def _with_sidecars(database: Path) -> list[Path]:
    return [database, *(database.with_name(database.name + end) for end in ("-wal", "-shm", "-journal"))]


def _hold(descriptor: int) -> bool:
    """Take an exclusive ``flock`` on ``descriptor`` without waiting (``False``: someone holds
    it). Independent of SQLite's own ``fcntl`` locks."""
    try:
        import fcntl
    except ImportError:  # no flock here: nothing is held, and no leftover is taken for dead
        return False
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        return False
    return True


def _remove_dead_imports(target: Path) -> None:
    """Delete what imports killed midway left beside ``target`` (``.NAME.*.importing`` and its
    ``-wal`` / ``-shm``): a temporary database no running import holds, untouched for a minute."""
    import glob
    import time

    for leftover in target.parent.glob(f".{glob.escape(target.name)}.*.importing"):
        try:
            descriptor = os.open(leftover, os.O_RDONLY)
        except OSError:
            continue
        try:
            fresh = time.time() - os.fstat(descriptor).st_mtime < DEAD_AFTER_SECONDS
            if fresh or not _hold(descriptor):
                continue
            for path in _with_sidecars(leftover):
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()
        except OSError:
            continue
        finally:
            os.close(descriptor)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _describe(report: ImportReport) -> str:
    """``stored 9 messages, 1 compaction; already present: 1 block`` (or ``nothing new; ...``)."""
    stored_parts, present_parts = [], []
    for kind, (singular, plural) in RECORD_LABELS.items():
        stored, present = report.stored.get(kind, 0), report.present.get(kind, 0)
        if stored:
            stored_parts.append(f"{stored} {singular if stored == 1 else plural}")
        if present:
            present_parts.append(f"{present} {singular if present == 1 else plural}")
    described = f"stored {', '.join(stored_parts)}" if stored_parts else "nothing new"
    if present_parts:
        described += f"; already present: {', '.join(present_parts)}"
    return described
