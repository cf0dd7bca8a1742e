"""What the commands print: rich consoles, tables and progress bars (plain text off a terminal),
times, sizes and one-line previews. rich is imported only when something is printed."""

from __future__ import annotations

import json
import os
import sys
from typing import TYPE_CHECKING, Any

from .._time import from_us
from ..messages import FilePart, ReasoningPart, SessionMessage, TextPart, ToolCallPart, ToolResultPart, ToolUIPart
from .store import one_line

if TYPE_CHECKING:  # pragma: no cover
    from rich.console import Console


def console(*, stderr: bool = False) -> Console:
    """A rich console: styled on a terminal, plain and wide enough not to wrap otherwise."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    terminal = hasattr(stream, "isatty") and stream.isatty()
    width = None if terminal else max(200, int(os.environ.get("COLUMNS", "0") or 0))
    return Console(stderr=stderr, width=width, highlight=False, markup=False, emoji=False, soft_wrap=not terminal)


def emit(target: Console, renderable: Any) -> None:
    """Print; off a terminal, without the trailing blanks rich pads table cells with."""
    if target.is_terminal:
        target.print(renderable)
        return
    with target.capture() as captured:
        target.print(renderable)
    target.file.write("".join(line.rstrip() + "\n" for line in captured.get().splitlines()))


WHOLE_COLUMNS = ("SESSION", "ID")
"""Columns of ids, never folded (an id cut in two cannot be copied): the others give way."""


def table(target: Console, *columns: str, right: tuple[str, ...] = ()) -> Any:
    """A table: boxed on a terminal (text folds to fit, numbers and ids do not), bare columns
    otherwise."""
    from rich import box
    from rich.table import Table

    terminal = target.is_terminal
    result = Table(
        box=box.ROUNDED if terminal else None,
        show_edge=terminal,
        header_style="bold" if terminal else "",
        pad_edge=terminal,
    )
    for column in columns:
        whole = column in WHOLE_COLUMNS
        result.add_column(
            column,
            justify="right" if column in right else "left",
            no_wrap=column in right or whole,
            overflow="ignore" if whole else "fold",
        )
    return result


def text(value: Any, style: str = "") -> Any:
    from rich.text import Text

    return Text("" if value is None else str(value), style=style)


def progress_bar(*, counting_bytes: bool = False) -> Any:
    """A progress bar on stderr, shown only when stderr is a terminal."""
    from rich.progress import (
        BarColumn,
        DownloadColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    target = console(stderr=True)
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn() if counting_bytes else MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=target,
        transient=True,
        disable=not target.is_terminal,
    )


def format_time(us: int | None) -> str:
    if us is None:
        return "-"
    return from_us(us).strftime("%Y-%m-%d %H:%M:%S") + "Z"


def iso_time(us: int) -> str:
    return from_us(us).isoformat()


def format_size(count: int | None) -> str:
    if count is None:
        return "-"
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{count} B" if unit == "B" else f"{value:.1f} {unit} ({count} bytes)"
        value /= 1024
    return f"{count} B"  # pragma: no cover


def count_of(n: int, singular: str, plural: str | None = None) -> str:
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def clip(value: str, width: int) -> str:
    value = one_line(value)
    return value if len(value) <= width else value[: max(width - 1, 1)] + "…"


def _json_preview(value: Any, width: int = 40) -> str:
    if isinstance(value, str):
        return clip(value, width)
    try:
        return clip(json.dumps(value, ensure_ascii=False, separators=(",", ":")), width)
    except (TypeError, ValueError):
        return clip(repr(value), width)


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
    return clip(" | ".join(pieces) or "(empty)", width)


def emit_values(data: dict[str, Any], heading: str, as_json: bool, shown: Any = None) -> None:
    """Print ``data`` as a JSON object, or as a two-column table headed ``heading`` (each value
    through ``shown(key, value)`` when given; ``None`` as ``-``)."""
    if as_json:
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    out = console()
    grid = table(out, heading, "VALUE")
    for key, value in data.items():
        value = shown(key, value) if shown is not None else value
        grid.add_row(text(key.replace("_", " ")), text("-" if value is None else value))
    emit(out, grid)
