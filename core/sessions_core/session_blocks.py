"""The context-block wiring of a session: the blocks declared on it, their providers bound to
the session's store and id, the :class:`ContextBlocks` built from them on first use, the loaded
skills found again in the history, and block writes reported on the session's change feed."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from .context import ContextBlock, ContextBlocks, ContextConfig, declared_block
from .models import SessionEvent
from .providers import StorePromptCache, bind_provider
from .redaction import redact_query, redact_text
from .tools import loaded_skills_in_history, unloaded_skill_rewrite

if TYPE_CHECKING:
    from .session import Session

logger = logging.getLogger("sessions_core")


class SessionBlocks:
    """The blocks of one :class:`Session`, built for its current store and session id; block
    writes go to ``publish``."""

    def __init__(self, session: Session, publish: Callable[[SessionEvent], None]) -> None:
        self._session = session
        self._publish = publish
        self.configs: list[ContextConfig] = []
        self.prompt_cache: Any = None  # None, StorePromptCache (the session's store) or a provider
        self._blocks: ContextBlocks | None = None
        self._lock = threading.RLock()

    @property
    def declared(self) -> bool:
        """Whether the session has blocks or a cached prompt (else it has no system prompt)."""
        return bool(self.configs) or self.prompt_cache is not None

    def reset(self) -> None:
        """Build the blocks again on next use (the session id or the prompt cache changed)."""
        self._blocks = None

    def declare(self, config: ContextConfig) -> None:
        """A block of ``with_context``: added to the built blocks, if any, without loading."""
        if self._blocks is not None:
            self._blocks.add_context(self.bound(config))
        self.configs.append(config)

    def add(self, config: ContextConfig) -> ContextBlock:
        """A block of ``add_context``: added and loaded (a skill block looks for loaded skills)."""
        blocks = self.get()
        block = blocks.add_context(self.bound(config))
        self.configs.append(config)
        if block.is_skill and not blocks.loaded_skill_keys():
            self._restore_skills(blocks)
        return block

    def remove(self, label: str) -> bool:
        """Drop a block and its loaded skills; ``False`` if there is no such block."""
        known = any(c.label == label for c in self.configs)
        self.configs = [c for c in self.configs if c.label != label]
        removed = self._blocks.remove_context(label) if self._blocks is not None else False
        return known or removed

    def declared_blocks(self) -> list[ContextBlock]:
        """The blocks as declared, without content: no provider or store is read."""
        return [declared_block(self.bound(c)) for c in self.configs]

    def get(self) -> ContextBlocks:
        """The blocks, built on first use (providers are not read until a block is needed)."""
        with self._lock:
            if self._blocks is None:
                session = self._session
                prompt_store = self.prompt_cache
                if prompt_store is StorePromptCache:
                    prompt_store = StorePromptCache(session.store, session.session_id)
                blocks = ContextBlocks([self.bound(c) for c in self.configs], prompt_store=prompt_store)
                blocks.on_unload = self._rewrite_unloaded_skill
                blocks.on_write = self._written
                if session.redactor is not None:
                    blocks.redact = partial(redact_text, session.redactor)
                    blocks.redact_query = partial(redact_query, session.redactor)
                if blocks.has_skill_providers():
                    self._restore_skills(blocks)
                self._blocks = blocks
            return self._blocks

    def bound(self, config: ContextConfig) -> ContextConfig:
        """``config`` with its provider bound to this session's store and id."""
        provider = bind_provider(
            config.provider,
            self._session.store,
            self._session.session_id,
            config.label,
            config.keep_versions,
            self._session.recall,
        )
        return ContextConfig(config.label, config.description, config.max_tokens, provider, config.keep_versions)

    def _restore_skills(self, blocks: ContextBlocks) -> None:
        """Reload the set of loaded skills from the raw active branch (after a restart)."""
        session = self._session
        try:
            keys = loaded_skills_in_history(session.history(raw=True))
            if keys:
                blocks.restore_loaded_skills(keys)
        except Exception as error:
            logger.warning("could not restore the loaded skills of session %r: %s", session.session_id, error)

    def _rewrite_unloaded_skill(self, label: str, key: str) -> None:
        rewritten = unloaded_skill_rewrite(self._session.get_history(), label, key)
        if rewritten is not None:
            self._session.update_message(rewritten)

    def _written(self, label: str, key: str | None) -> None:
        version = self._blocks.last_version(label) if self._blocks is not None else None
        self._publish(SessionEvent("block", self._session.session_id, label=label, key=key, version=version))
