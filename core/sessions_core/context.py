"""Context blocks: providers, the block manager and the system prompt (pure logic, no SQL).

A provider is any object with ``get()``; ``set``, ``load`` and ``search`` make it writable, a
skill collection or searchable (duck typing). Every provider method may be plain or
``async def``; all are called through :func:`sessions_core._async.call`.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

from ._async import call
from .errors import ContextError, InvalidInputError
from .text import check_text
from .tokens import _JS_WORD, estimate_tokens

logger = logging.getLogger(__name__)

SEP = "═" * 46


class StaticContext:
    """A read-only provider returning a fixed text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def get(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return f"StaticContext({self.text!r})"


def _has(provider: Any, method: str) -> bool:
    return provider is not None and callable(getattr(provider, method, None))


def is_writable_provider(provider: Any) -> bool:
    """Whether ``provider`` has a callable ``set``."""
    return _has(provider, "set")


def is_skill_provider(provider: Any) -> bool:
    """Whether ``provider`` has a callable ``load``."""
    return _has(provider, "load")


def is_search_provider(provider: Any) -> bool:
    """Whether ``provider`` has a callable ``search``."""
    return _has(provider, "search")


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """A block to register: ``provider`` is ``None`` for an empty read-only block."""

    label: str
    description: str | None = None
    max_tokens: int | None = None
    provider: Any = None
    keep_versions: int | None = None
    """Versions of each write a store-backed block keeps (the newest); ``None``: all."""

    def __post_init__(self) -> None:
        if not isinstance(self.label, str) or not self.label:
            raise InvalidInputError("a context block needs a non-empty string label")
        if self.keep_versions is not None and (type(self.keep_versions) is not int or self.keep_versions < 1):
            raise InvalidInputError(f'keep_versions of block "{self.label}" must be a positive integer or None')
        check_text(self.label, "block label")
        check_text(self.description, f'the description of block "{self.label}"')
        if self.provider is not None and not _has(self.provider, "get"):
            raise TypeError(f'the provider of block "{self.label}" has no get() method')


@dataclass(frozen=True, slots=True)
class ContextBlock:
    """A loaded block: the provider's content and its token estimate."""

    label: str
    description: str | None
    content: str
    tokens: int
    max_tokens: int | None
    writable: bool
    is_skill: bool
    is_searchable: bool


def js_round(x: float) -> int:
    """JavaScript's ``Math.round``: the nearest integer, halves towards +infinity."""
    floor = math.floor(x)
    return floor + 1 if x - floor >= 0.5 else floor


def usage_percent(tokens: int, max_tokens: int) -> int:
    return js_round(tokens / max_tokens * 100)


def render_block(block: ContextBlock) -> str:
    """One block as it appears in the system prompt (header between separators, then content)."""
    header = block.label.upper()
    if block.description:
        header += f" ({block.description})"
    if block.max_tokens:
        pct = usage_percent(block.tokens, block.max_tokens)
        header += f" [{pct}% — {block.tokens}/{block.max_tokens} tokens]"
    if block.is_searchable:
        header += " [searchable]"
    elif block.is_skill:
        header += " [loadable]"
    elif not block.writable:
        header += " [readonly]"
    else:
        header += " [writable]"
    return f"{SEP}\n{header}\n{SEP}\n{block.content}"


def render_system_prompt(blocks: Iterable[ContextBlock]) -> str:
    """The system prompt: rendered blocks joined by a blank line; empty read-only blocks are
    skipped; ``""`` when nothing is rendered."""
    return "\n\n".join(
        render_block(block)
        for block in blocks
        if block.content or block.writable or block.is_searchable or block.is_skill
    )


# -- keyed entries ----------------------------------------------------------------------------


def _utf16_units(text: str) -> list[int]:
    data = text.encode("utf-16-le", "surrogatepass")
    return [data[i] | data[i + 1] << 8 for i in range(0, len(data), 2)]


def _slugify(text: str) -> str:
    head = text.encode("utf-16-le", "surrogatepass")[:120].decode("utf-16-le", "surrogatepass")
    slug = re.sub(r"[^a-z0-9]+", "-", head.lower())
    slug = slug[1:] if slug.startswith("-") else slug
    return slug[:-1] if slug.endswith("-") else slug


def _base36(value: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        value, rest = divmod(value, 36)
        out = digits[rest] + out
        if not value:
            return out


def stable_hash(text: str) -> str:
    """32-bit FNV-1a over UTF-16 code units, in lowercase base 36."""
    h = 0x811C9DC5
    for unit in _utf16_units(text):
        h = ((h ^ unit) * 0x01000193) & 0xFFFFFFFF
    return _base36(h)


def context_entry_key(title: str | None, content: str) -> str:
    """The key of a keyed entry: the slug of a non-blank ``title`` (stable across updates),
    else a slug of ``content`` plus its hash."""
    if title and _JS_WORD.search(title):  # non-blank after a JavaScript trim()
        return _slugify(title) or f"entry-{stable_hash(title)}"
    return f"{_slugify(content) or 'entry'}-{stable_hash(content)}"


# -- the block manager ------------------------------------------------------------------------


class ContextBlocks:
    """The blocks of one session, their providers, loaded skills and the frozen system prompt.

    Thread-safe: writers hold one re-entrant lock (provider calls included); readers
    (``get_block``, ``get_blocks``, ``loaded_skill_keys``) take no lock. ``prompt_store`` is any
    writable provider (``get``/``set``) that persists the frozen prompt. ``on_unload(label, key)``
    is called after a successful ``unload_skill``, ``on_write(label, key)`` after every successful
    block write (``key`` is ``None`` for plain blocks); their results are awaited if awaitable and
    their exceptions are logged, never raised.
    """

    def __init__(self, configs: Iterable[ContextConfig] = (), *, prompt_store: Any = None) -> None:
        self._configs: dict[str, ContextConfig] = {}
        for config in configs:
            if config.label in self._configs:
                raise ContextError(f'Block "{config.label}" already exists')
            self._configs[config.label] = config
        if prompt_store is not None and not (_has(prompt_store, "get") and _has(prompt_store, "set")):
            raise TypeError("a prompt store needs get() and set() methods")
        self.prompt_store = prompt_store
        self.on_unload: Callable[[str, str], Any] | None = None
        self.on_write: Callable[[str, str | None], Any] | None = None
        self.redact: Callable[[str], str] | None = None
        """Applied to every content (and skill description) written, before its provider gets it."""
        self.redact_query: Callable[[str], str] | None = None
        """Applied to a search's query, to find what ``redact`` masked (a salted redactor's)."""
        self._blocks: dict[str, ContextBlock] = {}  # replaced, never mutated: readers need no lock
        self._loaded_skills: dict[str, None] = {}  # an insertion-ordered set, replaced likewise
        self._snapshot: str | None = None
        self._loaded = False
        self._lock = threading.RLock()

    @property
    def loaded(self) -> bool:
        return self._loaded

    @property
    def configs(self) -> list[ContextConfig]:
        return list(self._configs.values())

    def has_skill_providers(self) -> bool:
        """Whether a configured provider is skill-capable (no load needed)."""
        return any(is_skill_provider(c.provider) for c in self._configs.values())

    # -- loading ---------------------------------------------------------------------------

    def load(self, *, force: bool = False) -> None:
        """Call ``init(label)`` (if any) then ``get()`` on every provider, in registration order;
        providers whose class has a static ``get_many(providers)`` (the store-backed
        ``StoreContext``) are read after the others, with one call per class. Does nothing once
        loaded unless ``force``."""
        with self._lock:
            if self._loaded and not force:
                return
            self._blocks = _load_blocks(list(self._configs.values()))
            self._loaded = True

    def _ensure_loaded(self) -> None:
        if not self._loaded:
            self.load()

    def _put(self, block: ContextBlock) -> None:
        self._blocks = {**self._blocks, block.label: block}

    def get_block(self, label: str) -> ContextBlock | None:
        """The in-memory block (``None`` before ``load``)."""
        return self._blocks.get(label)

    def get_blocks(self) -> list[ContextBlock]:
        """The in-memory blocks in registration order (``[]`` before ``load``)."""
        return list(self._blocks.values())

    def add_context(self, config: ContextConfig) -> ContextBlock:
        """Register and load a block at runtime (appended last); the frozen prompt is unchanged."""
        with self._lock:
            self._ensure_loaded()
            if config.label in self._configs:
                raise ContextError(f'Block "{config.label}" already exists')
            block = _load_block(config)
            self._configs = {**self._configs, config.label: config}
            self._put(block)
            return block

    def remove_context(self, label: str) -> bool:
        """Drop a block and its loaded skills (no unload hook, no prompt refresh); ``False`` if
        there was no such block."""
        with self._lock:
            if label not in self._configs:
                return False
            self._configs = {k: v for k, v in self._configs.items() if k != label}
            self._blocks = {k: v for k, v in self._blocks.items() if k != label}
            prefix = f"{label}:"
            self._loaded_skills = {k: None for k in self._loaded_skills if not k.startswith(prefix)}
            return True

    # -- writes ----------------------------------------------------------------------------

    def set_block(self, label: str, content: str) -> ContextBlock:
        """Replace a plain writable block's content, within its ``max_tokens``. The provider is
        written first; the in-memory block changes only if that succeeds."""
        with self._lock:
            self._ensure_loaded()
            block = self._blocks.get(label)
            if block is None or not block.writable:
                raise ContextError(f'Block "{label}" is readonly')
            if block.is_skill or block.is_searchable:
                raise ContextError(f'Block "{label}" is a keyed provider. Use setSkill() or setSearchEntry() instead.')
            check_text(content, f'the content for block "{label}"')
            content = self._redacted(content)
            tokens = estimate_tokens(content)
            if block.max_tokens is not None and tokens > block.max_tokens:
                raise ContextError(f'Block "{label}" exceeds maxTokens: {tokens} > {block.max_tokens}')
            call(self._configs[label].provider.set, content)
            updated = replace(block, content=content, tokens=tokens)
            self._put(updated)
        self._written(label, None)
        return updated

    def append_to_block(self, label: str, content: str) -> ContextBlock:
        """Append to a plain writable block (a newline between, unless either side provides it)."""
        with self._lock:
            self._ensure_loaded()
            block = self._blocks.get(label)
            if block is None:
                raise ContextError(f'Block "{label}" not found')
            check_text(content, f'the content for block "{label}"')
            sep = "\n" if block.content and not content.startswith("\n") else ""
            return self.set_block(label, block.content + sep + content)

    def set_skill(self, label: str, key: str, content: str, description: str | None = None) -> ContextBlock:
        """Write one skill with ``provider.set(key, content[, description])``, then refresh the
        listing from ``get()`` (kept as is when that gives nothing)."""
        for value, what in ((key, "key"), (content, "content"), (description, "description")):
            check_text(value, f'the {what} for block "{label}"')
        content = self._redacted(content)
        description = None if description is None else self._redacted(description)
        with self._lock:
            provider = self._keyed_writer(label, "is_skill", "skill")
            if description is None:
                call(provider.set, key, content)
            else:
                call(provider.set, key, content, description)
            listing = call(provider.get)
            block = self._blocks[label]
            if listing:
                block = replace(block, content=str(listing), tokens=estimate_tokens(str(listing)))
                self._put(block)
        self._written(label, key)
        return block

    def set_search_entry(self, label: str, key: str, content: str) -> ContextBlock:
        """Index one entry with ``provider.set(key, content)``, then refresh the summary."""
        for value, what in ((key, "key"), (content, "content")):
            check_text(value, f'the {what} for block "{label}"')
        content = self._redacted(content)
        with self._lock:
            provider = self._keyed_writer(label, "is_searchable", "search")
            call(provider.set, key, content)
            summary = _text(call(provider.get))
            block = replace(self._blocks[label], content=summary, tokens=estimate_tokens(summary))
            self._put(block)
        self._written(label, key)
        return block

    def _redacted(self, text: str) -> str:
        return text if self.redact is None else self.redact(text)

    def entry_content(self, label: str, key: str) -> str | None:
        """The current text of entry ``key`` of keyed block ``label`` (its newest version, or a
        skill as its provider loads it); ``None`` if there is none."""
        provider = self._configs[label].provider
        versions = getattr(provider, "versions", None)
        if versions is not None:
            rows = versions(key, 1)
            return rows[0].content if rows else None
        if _has(provider, "load"):
            content = call(provider.load, key)
            return content if isinstance(content, str) else None
        return None

    def last_version(self, label: str) -> int | None:
        """The version the last write to ``label`` recorded (``None``: its provider keeps none)."""
        config = self._configs.get(label)
        version = getattr(config.provider, "last_version", None) if config is not None else None
        return version if type(version) is int else None

    def _written(self, label: str, key: str | None) -> None:
        if self.on_write is None:
            return
        try:
            call(self.on_write, label, key)
        except Exception as error:
            logger.warning("the block-write hook failed for %r: %s", label, error)

    def _keyed_writer(self, label: str, flag: str, kind: str) -> Any:
        self._ensure_loaded()
        block = self._blocks.get(label)
        if block is None or not getattr(block, flag):
            raise ContextError(f'Block "{label}" is not a {kind} provider')
        provider = self._configs[label].provider
        if not is_writable_provider(provider):
            raise ContextError(f'Block "{label}" does not support writes')
        return provider

    # -- skills and search -----------------------------------------------------------------

    def _provider(self, label: str, check: Callable[[Any], bool], kind: str) -> Any:
        self._ensure_loaded()
        config = self._configs.get(label)
        if config is None or not check(config.provider):
            raise ContextError(f'Block "{label}" is not a {kind} provider')
        return config.provider

    def load_skill(self, label: str, key: str) -> str | None:
        """The document ``key`` of a skill block, or ``None``; a found one is marked loaded."""
        with self._lock:
            content = call(self._provider(label, is_skill_provider, "skill").load, key)
            if content is not None:
                self._loaded_skills = {**self._loaded_skills, f"{label}:{key}": None}
            return content

    def unload_skill(self, label: str, key: str) -> bool:
        """Forget a loaded skill and call ``on_unload(label, key)``; ``False`` if not loaded."""
        skill_id = f"{label}:{key}"
        with self._lock:
            if skill_id not in self._loaded_skills:
                return False
            self._loaded_skills = {k: None for k in self._loaded_skills if k != skill_id}
        hook = self.on_unload
        if hook is not None:
            try:
                call(hook, label, key)
            except Exception:
                logger.exception("on_unload(%r, %r) failed", label, key)
        return True

    def loaded_skill_keys(self) -> list[str]:
        """The loaded skills as ``"label:key"``, in load order."""
        return list(self._loaded_skills)

    def restore_loaded_skills(self, keys: Iterable[str]) -> None:
        """Replace the loaded set (e.g. with the keys found in history after a restart)."""
        with self._lock:
            self._loaded_skills = dict.fromkeys(keys)

    def clear_loaded_skills(self) -> None:
        """Forget every loaded skill (the history that held them was cleared)."""
        self.restore_loaded_skills(())

    def search_context(self, label: str, query: str) -> str | None:
        """``provider.search(query)`` of a searchable block (may be ``None``)."""
        if self.redact_query is not None:
            query = self.redact_query(query)
        with self._lock:
            return call(self._provider(label, is_search_provider, "search").search, query)

    # -- system prompt ---------------------------------------------------------------------

    def to_system_prompt(self) -> str:
        """The in-memory snapshot, rendered (after loading) and cached on first use."""
        with self._lock:
            if self._snapshot is None:
                self._ensure_loaded()
                self._snapshot = render_system_prompt(self.get_blocks())
            return self._snapshot

    def freeze_system_prompt(self) -> str:
        """The stored prompt if the store holds one (``""`` included); else the snapshot,
        persisted to the store if there is one."""
        with self._lock:
            if self.prompt_store is not None:
                stored = call(self.prompt_store.get)
                if stored is not None:
                    return stored
            prompt = self.to_system_prompt()
            if self.prompt_store is not None:
                call(self.prompt_store.set, prompt)
            return prompt

    def refresh_system_prompt(self) -> str:
        """Reload every provider, re-render the snapshot and persist it."""
        with self._lock:
            self.load(force=True)
            self._snapshot = render_system_prompt(self.get_blocks())
            if self.prompt_store is not None:
                call(self.prompt_store.set, self._snapshot)
            return self._snapshot

    def prompt_for_estimate(self) -> str:
        """The prompt a token estimate should count: the snapshot, else the stored prompt, else
        a fresh render that is neither cached nor persisted."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot
            if self.prompt_store is not None:
                stored = call(self.prompt_store.get)
                if stored is not None:
                    return stored
            self._ensure_loaded()
            return render_system_prompt(self.get_blocks())

    def __repr__(self) -> str:
        return f"ContextBlocks({list(self._configs)!r}, loaded={self._loaded})"


def _text(value: Any) -> str:
    return "" if value is None else value if isinstance(value, str) else str(value)


def _load_block(config: ContextConfig) -> ContextBlock:
    provider = config.provider
    content = ""
    if provider is not None:
        if _has(provider, "init"):
            call(provider.init, config.label)
        content = _text(call(provider.get))
    return declared_block(config, content)


def _load_blocks(configs: list[ContextConfig]) -> dict[str, ContextBlock]:
    """Every block of ``configs`` loaded like :func:`_load_block`; the providers of one class
    with a static ``get_many(providers)`` (store-backed blocks) are read with one call."""
    contents: dict[str, Any] = {}
    batched: dict[type, list[ContextConfig]] = {}
    for config in configs:
        provider = config.provider
        if provider is None:
            continue
        if _has(provider, "init"):
            call(provider.init, config.label)
        if callable(getattr(type(provider), "get_many", None)):
            batched.setdefault(type(provider), []).append(config)
        else:
            contents[config.label] = call(provider.get)
    for kind, group in batched.items():
        values = call(kind.get_many, [config.provider for config in group])
        contents.update(zip((config.label for config in group), values, strict=True))
    return {config.label: declared_block(config, _text(contents.get(config.label))) for config in configs}


def declared_block(config: ContextConfig, content: str = "") -> ContextBlock:
    """The block a config declares, its kind told by its provider's methods; nothing is read."""
    provider = config.provider
    return ContextBlock(
        label=config.label,
        description=config.description,
        content=content,
        tokens=estimate_tokens(content),
        max_tokens=config.max_tokens,
        writable=is_writable_provider(provider),
        is_skill=is_skill_provider(provider),
        is_searchable=is_search_provider(provider),
    )
