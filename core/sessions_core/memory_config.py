"""The memory a server serves, declared in a small TOML file (``sessions mcp --config``).

::

    # memory.toml
    edit_tool = true                  # add the edit_context tool
    searchable_history = "history"    # a read-only searchable block over every session
    max_message_bytes = 1048576       # append_message refuses a larger message (JSON bytes)
    max_argument_bytes = 1048576      # a tool refuses a larger string argument (UTF-8 bytes)
    poll_interval = 1.0               # seconds between checks for other processes' writes (0: off)
    redact = true                     # mask personal data and secrets before they are stored (PIIRedactor;
                                      # salted from $SESSIONS_REDACT_SALT when set)

    [[blocks]]
    label = "soul"
    kind = "static"                   # read-only text: content, or file (relative to this file)
    content = "You are a helpful assistant."

    [[blocks]]
    label = "memory"                  # kind = "writable" (the default): kept in the store
    description = "Learned facts"
    max_tokens = 1100
    keep_versions = 50

    [[blocks]]
    label = "knowledge"
    kind = "searchable"               # keyed entries found by search_context
    description = "Searchable notes"

    [[blocks]]
    label = "skills"
    kind = "skills"                   # a folder of skills (FileSkillProvider), loaded by load_context
    path = "./skills"                 # relative to this file; or an fsspec URL
    keys = ["deploy", "review"]       # optional allowlist
    writable = false                  # optional: the folder's own permission by default

Without a file the memory is :data:`DEFAULT_CONFIG`: one writable block ``memory`` ("Learned
facts", 1100 tokens), the README's quickstart. Parsing is pure; :func:`load_config` reads the
file and :func:`configure` applies a config to a ``Session`` or ``SessionManager``.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from .context import StaticContext
from .errors import InvalidInputError
from .providers import StoreSearchContext

KINDS = ("writable", "static", "searchable", "skills")
MiB = 1024 * 1024

_Target = TypeVar("_Target")


@dataclass(frozen=True)
class BlockConfig:
    """One context block: ``kind`` is ``writable`` (kept in the store), ``static`` (read-only
    ``content``), ``searchable`` (keyed entries in the store) or ``skills`` (a folder at ``path``)."""

    label: str
    kind: str = "writable"
    description: str | None = None
    max_tokens: int | None = None
    keep_versions: int | None = None
    content: str = ""
    path: str | None = None
    keys: tuple[str, ...] = ()
    writable: bool | None = None


@dataclass(frozen=True)
class MemoryConfig:
    """The blocks and limits of a served memory (see the module docstring for the TOML form)."""

    blocks: tuple[BlockConfig, ...] = field(default_factory=tuple)
    edit_tool: bool = False
    searchable_history: str | None = None
    max_message_bytes: int | None = MiB
    max_argument_bytes: int = MiB
    poll_interval: float = 1.0
    redact: bool = False
    redact_salt: str | None = field(default=None, repr=False)
    """With ``redact``, the ``hash_salt`` of the ``PIIRedactor`` (a secret: never read from the
    file; ``sessions mcp`` takes it from ``$SESSIONS_REDACT_SALT``)."""


DEFAULT_CONFIG = MemoryConfig(blocks=(BlockConfig("memory", description="Learned facts", max_tokens=1100),))
"""The memory served without a config file: the quickstart's writable ``memory`` block."""

_TOP = {
    "blocks",
    "edit_tool",
    "searchable_history",
    "max_message_bytes",
    "max_argument_bytes",
    "poll_interval",
    "redact",
}
_BLOCK = {"label", "kind", "description", "max_tokens", "keep_versions", "content", "file", "path", "keys", "writable"}


def load_config(path: str | Path) -> MemoryConfig:
    """The config in the TOML file at ``path``; ``InvalidInputError`` naming the file and the
    field for anything wrong in it, ``OSError`` when it cannot be read."""
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # pyright: ignore[reportMissingImports]

    source = Path(path)
    try:
        data = tomllib.loads(source.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as error:
        raise InvalidInputError(f"{source}: not valid TOML ({error})") from None
    except UnicodeDecodeError:
        raise InvalidInputError(f"{source}: not UTF-8 text") from None
    return parse_config(data, base=source.parent, where=str(source))


def parse_config(data: Mapping[str, Any], *, base: Path = Path("."), where: str = "config") -> MemoryConfig:
    """The config a parsed TOML document declares (``base``: the folder relative paths start
    from; ``where``: the name errors give). Unknown keys are refused, so a typo never passes."""
    _no_unknown(data, _TOP, where)
    raw_blocks = data.get("blocks", [])
    if not isinstance(raw_blocks, list) or not all(isinstance(b, Mapping) for b in raw_blocks):
        raise InvalidInputError(f"{where}: blocks must be an array of tables ([[blocks]])")
    blocks = tuple(_block(raw, base, f"{where}: blocks[{index}]") for index, raw in enumerate(raw_blocks))
    labels = [block.label for block in blocks]
    history = _optional(data, "searchable_history", str, where)
    names = labels + ([history] if history else [])
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise InvalidInputError(f'{where}: the block "{twice[0]}" is declared twice')
    max_message = _optional(data, "max_message_bytes", int, where)
    max_argument = _optional(data, "max_argument_bytes", int, where)
    poll = _optional(data, "poll_interval", (int, float), where)
    for name, value in (("max_message_bytes", max_message), ("max_argument_bytes", max_argument)):
        if value is not None and value < 1:
            raise InvalidInputError(f"{where}: {name} must be at least 1")
    if poll is not None and (not math.isfinite(poll) or poll < 0):
        raise InvalidInputError(f"{where}: poll_interval must be a number of seconds, 0 or more")
    return MemoryConfig(
        blocks=blocks,
        edit_tool=bool(_optional(data, "edit_tool", bool, where)),
        searchable_history=history,
        max_message_bytes=MiB if max_message is None else max_message,
        max_argument_bytes=MiB if max_argument is None else max_argument,
        poll_interval=1.0 if poll is None else float(poll),
        redact=bool(_optional(data, "redact", bool, where)),
    )


def _block(raw: Mapping[str, Any], base: Path, where: str) -> BlockConfig:
    _no_unknown(raw, _BLOCK, where)
    label = _optional(raw, "label", str, where)
    if not label or not label.strip():
        raise InvalidInputError(f"{where}: label is required (a non-empty string)")
    kind = _optional(raw, "kind", str, where) or "writable"
    if kind not in KINDS:
        raise InvalidInputError(f"{where}: kind must be one of {', '.join(KINDS)}, not {kind!r}")
    allowed = {
        "writable": {"max_tokens", "keep_versions"},
        "static": {"content", "file"},
        "searchable": {"keep_versions"},
        "skills": {"path", "keys", "writable"},
    }[kind] | {"label", "kind", "description"}
    extra = sorted(set(raw) - allowed)
    if extra:
        raise InvalidInputError(f"{where}: {', '.join(extra)} does not apply to a {kind} block")
    for name in ("max_tokens", "keep_versions"):
        value = _optional(raw, name, int, where)
        if value is not None and value < 1:
            raise InvalidInputError(f"{where}: {name} must be at least 1")
    content = _optional(raw, "content", str, where) or ""
    file = _optional(raw, "file", str, where)
    if kind == "static":
        if file is not None and "content" in raw:
            raise InvalidInputError(f"{where}: give content or file, not both")
        if file is not None:
            try:
                content = (base / file).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as error:
                raise InvalidInputError(f"{where}: cannot read {file}: {error}") from None
    path = _optional(raw, "path", str, where)
    if kind == "skills":
        if not path:
            raise InvalidInputError(f"{where}: a skills block needs path (a folder or an fsspec URL)")
        if "://" not in path:
            path = str((base / path).expanduser())
    keys = raw.get("keys", [])
    if not isinstance(keys, list) or not all(isinstance(key, str) for key in keys):
        raise InvalidInputError(f"{where}: keys must be an array of strings")
    return BlockConfig(
        label=label,
        kind=kind,
        description=_optional(raw, "description", str, where),
        max_tokens=_optional(raw, "max_tokens", int, where),
        keep_versions=_optional(raw, "keep_versions", int, where),
        content=content,
        path=path,
        keys=tuple(keys),
        writable=_optional(raw, "writable", bool, where),
    )


def _no_unknown(data: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(set(data) - known)
    if unknown:
        raise InvalidInputError(f"{where}: unknown key {', '.join(unknown)} (known: {', '.join(sorted(known))})")


def _optional(data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = data.get(name)
    if value is None:
        return None
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if isinstance(value, bool) and bool not in kinds or not isinstance(value, kinds):
        expected = " or ".join(k.__name__ for k in kinds).replace("str", "a string").replace("bool", "true or false")
        raise InvalidInputError(f"{where}: {name} must be {expected}, not {value!r}")
    return value


def configure(target: _Target, config: MemoryConfig) -> _Target:
    """``target`` (a ``Session`` or ``SessionManager``) with the config's blocks and tools, and
    ``PIIRedactor`` as its redactor when the config says ``redact``."""
    from .redaction import PIIRedactor
    from .skills import FileSkillProvider

    builder: Any = target
    for block in config.blocks:
        provider: Any = None
        if block.kind == "static":
            provider = StaticContext(block.content)
        elif block.kind == "searchable":
            provider = StoreSearchContext()
        elif block.kind == "skills":
            assert block.path is not None  # parse_config requires it
            provider = FileSkillProvider(block.path, keys=block.keys or None, writable=block.writable)
        builder.with_context(
            block.label,
            description=block.description,
            max_tokens=block.max_tokens,
            provider=provider,
            keep_versions=block.keep_versions,
        )
    if config.edit_tool:
        builder.with_edit_tool()
    if config.searchable_history:
        if not hasattr(builder, "with_searchable_history"):
            raise InvalidInputError("searchable_history needs a SessionManager (it searches every session)")
        builder.with_searchable_history(config.searchable_history)
    if config.redact:
        builder.with_redaction(PIIRedactor(hash_salt=config.redact_salt))
    return target
