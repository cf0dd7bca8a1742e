"""``FileSkillProvider``: a skill block backed by files in the Agent Skills layout.

``<root>/<key>/SKILL.md`` (a folder per skill) or ``<root>/<key>.md``; the YAML front matter
between ``---`` lines gives the skill's ``description``. ``root`` is a local path or any fsspec
URL (``s3://``, ``gcs://``, ``memory://``...), fsspec being imported only for URLs.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from .errors import InvalidInputError

SKILL_FILE = "SKILL.md"
_NOT_SKILLS = {"skill.md", "readme.md"}  # files at the root that describe the collection
_UNSAFE_KEY = re.compile(r"[/\\\x00:]")
_FIELD = re.compile(r"([A-Za-z0-9_-]+)[ \t]*:(?:[ \t]+(.*))?$")
_PLAIN = re.compile(r"[A-Za-z0-9_(][^:#\n\"']*")


def parse_front_matter(text: str) -> tuple[dict[str, str], str]:
    """The ``key: value`` fields of a leading ``---`` block and the text after it.

    Handles plain, quoted, folded (``>``) and literal (``|``) values and indented continuation
    lines; anything more elaborate is read as plain text. No front matter gives ``({}, text)``.
    """
    lines = text.lstrip("\ufeff").splitlines(keepends=True)
    if not lines or lines[0].strip() != "---":
        return {}, text
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        return {}, text
    fields: dict[str, str] = {}
    name: str | None = None
    style, buffer = "", []

    def flush() -> None:
        if name is None:
            return
        if style == "|":
            fields[name] = "\n".join(buffer).strip()
        else:
            folded = " ".join(b for b in buffer if b)
            fields[name] = folded if style else _unquote(folded)

    for raw in lines[1:end]:
        line = raw.rstrip("\r\n")
        if line[:1] in (" ", "\t") or not line.strip():
            if name is not None:
                buffer.append(line.strip())
            continue
        match = _FIELD.match(line)
        flush()
        if match is None:
            name = None
            continue
        name, value = match[1], (match[2] or "").strip()
        style = value[0] if value[:1] in ("|", ">") else ""
        buffer = [] if style else [value]
    flush()
    return fields, "".join(lines[end + 1 :])


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return json.loads(value)
        except ValueError:
            return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1].replace("''", "'")
    return value.split(" #", 1)[0].strip()


def _yaml_scalar(value: str) -> str:
    return value if _PLAIN.fullmatch(value) and value == value.strip() else json.dumps(value, ensure_ascii=False)


def _safe_key(key: Any) -> bool:
    return isinstance(key, str) and bool(key) and not key.startswith(".") and not _UNSAFE_KEY.search(key)


class _LocalFiles:
    def __init__(self, root: Path) -> None:
        self.root = root

    def writable(self) -> bool:
        folder = self.root
        while not folder.exists() and folder.parent != folder:
            folder = folder.parent
        return os.access(folder, os.W_OK | os.X_OK)

    def entries(self) -> list[tuple[str, bool]]:
        try:
            return [(entry.name, entry.is_dir()) for entry in self.root.iterdir()]
        except (FileNotFoundError, NotADirectoryError):
            return []

    def read(self, relative: str) -> str | None:
        try:
            return (self.root / relative).read_text(encoding="utf-8")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def is_file(self, relative: str) -> bool:
        return (self.root / relative).is_file()

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")

    def __str__(self) -> str:
        return str(self.root)


class _FsspecFiles:
    def __init__(self, url: str) -> None:
        try:
            import fsspec
        except ImportError as error:
            raise ImportError(f"FileSkillProvider needs fsspec for {url!r}: pip install fsspec") from error
        self.url = url
        self.fs, root = fsspec.core.url_to_fs(url)
        self.root = root.rstrip("/")

    def writable(self) -> bool:
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        return not {"http", "https"} & set(protocols)

    def _path(self, relative: str) -> str:
        return f"{self.root}/{relative}"

    def entries(self) -> list[tuple[str, bool]]:
        try:
            listing = self.fs.ls(self.root, detail=True)
        except (FileNotFoundError, NotADirectoryError):
            return []
        return [(item["name"].rstrip("/").rsplit("/", 1)[-1], item["type"] == "directory") for item in listing]

    def read(self, relative: str) -> str | None:
        try:
            return self.fs.cat_file(self._path(relative)).decode("utf-8")
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None

    def is_file(self, relative: str) -> bool:
        return self.fs.isfile(self._path(relative))

    def write(self, relative: str, text: str) -> None:
        path = self._path(relative)
        self.fs.makedirs(path.rsplit("/", 1)[0], exist_ok=True)
        self.fs.pipe_file(path, text.encode("utf-8"))

    def __str__(self) -> str:
        return self.url


class FileSkillProvider:
    """A skill provider over a folder of skills (read-only, or writable with ``set``).

    ``keys`` is an allowlist of skill keys (empty or ``None``: all). ``writable=None`` probes
    the folder (local: ``os.access``; URLs: writable unless http(s)). A read-only provider has
    no ``set`` attribute, so the block is read-only by duck typing; a writable one is a
    :class:`WritableFileSkillProvider`.
    """

    _files: _LocalFiles | _FsspecFiles

    def __new__(
        cls, path_or_url: str | os.PathLike[str], *, keys: Iterable[str] | None = None, writable: bool | None = None
    ) -> FileSkillProvider:
        if isinstance(path_or_url, str) and "://" in path_or_url:
            files: _LocalFiles | _FsspecFiles = _FsspecFiles(path_or_url)
        else:
            files = _LocalFiles(Path(path_or_url).expanduser())
        if cls is WritableFileSkillProvider:
            writable = True
        elif writable is None:
            writable = files.writable()
        self = object.__new__(WritableFileSkillProvider if writable else FileSkillProvider)
        self._files = files
        return self

    def __init__(
        self, path_or_url: str | os.PathLike[str], *, keys: Iterable[str] | None = None, writable: bool | None = None
    ) -> None:
        self.keys = frozenset([keys] if isinstance(keys, str) else keys or ())

    def _allowed(self, key: str) -> bool:
        return _safe_key(key) and (not self.keys or key in self.keys)

    def _skills(self) -> dict[str, str | None]:
        """Every skill key with its description, folders winning over same-named files."""
        entries = [(name, is_dir) for name, is_dir in self._files.entries() if not name.startswith(".")]
        skills: dict[str, str | None] = {}
        for name, is_dir in sorted(entries, key=lambda entry: not entry[1]):
            if is_dir:
                text, key = self._files.read(f"{name}/{SKILL_FILE}"), name
            elif name.endswith(".md") and name.lower() not in _NOT_SKILLS and name[:-3] not in skills:
                text, key = self._files.read(name), name[:-3]
            else:
                continue
            if text is not None:
                description = parse_front_matter(text)[0].get("description")
                skills[key] = " ".join(description.split()) if description else None
        return skills

    def get(self) -> str | None:
        """``- key`` / ``- key: description`` lines of the allowed skills, sorted by key;
        ``None`` when there are none."""
        skills = self._skills()
        lines = [
            f"- {key}: {skills[key]}" if skills[key] else f"- {key}" for key in sorted(skills) if self._allowed(key)
        ]
        return "\n".join(lines) or None

    def load(self, key: str) -> str | None:
        """The whole text of skill ``key`` (front matter included); ``None`` for an unknown,
        disallowed or unsafe key (nothing is read then)."""
        if not self._allowed(key):
            return None
        text = self._files.read(f"{key}/{SKILL_FILE}")
        return text if text is not None else self._files.read(f"{key}.md")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self._files)!r})"


class WritableFileSkillProvider(FileSkillProvider):
    """A :class:`FileSkillProvider` on a writable folder; construct it through ``FileSkillProvider``."""

    def set(self, key: str, content: str, description: str | None = None) -> None:
        """Write skill ``key``: its existing ``<key>.md`` file, else ``<key>/SKILL.md``. Front
        matter (``name``, ``description``) is added when a description is given and the content
        has none of its own. Not restricted by the ``keys`` allowlist."""
        if not _safe_key(key):
            raise InvalidInputError(f"invalid skill key {key!r}")
        description = " ".join((description or "").split())
        if description and not parse_front_matter(content)[0]:
            content = f"---\nname: {_yaml_scalar(key)}\ndescription: {_yaml_scalar(description)}\n---\n\n{content}"
        plain = f"{key}.md"
        in_folder = f"{key}/{SKILL_FILE}"
        use_plain = self._files.is_file(plain) and not self._files.is_file(in_folder)
        self._files.write(plain if use_plain else in_folder, content)
