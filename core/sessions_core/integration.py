"""What an adapter may use: the core's API for framework integrations, beyond the package root.

A framework adapter imports from ``sessions_core`` (the package root) and from this module,
nothing else (``tests/test_boundary.py`` checks the project's own adapters). Everything here is
framework-neutral and behaves the same for every adapter:

- async: ``run_in_thread`` (blocking code off the event loop, async callbacks back on it),
  ``async_twin`` (the ``a``-prefixed twin of a blocking method) and ``prefer_async``;
- branches: ``ensure_session`` (a manager's session under a chosen id) and ``Registration``
  (the same at first use, and again after the manager deleted it), ``soft_reset``,
  ``set_active_history``, ``raw_history``, ``is_marker``;
- overlays: ``plan_overlays``, ``summary_message``, ``summary_id``, ``is_summary_id``;
- reads: ``recent_window`` (the newest messages within a token budget, starting at a user turn)
  and ``count_message_tokens`` (a message's tokens with any text counter);
- stores: ``store_url`` (where a store is, to reopen it elsewhere; never with a password);
- checkpoints: ``Checkpoints`` (a manager's sessions as a graph framework's threads) with its
  ``CheckpointRow`` and ``CheckpointWrite``;
- items: ``Items`` (namespaced items with versions, keyword and vector search, expiry) with
  ``ItemPut``, ``StoredItem``, ``ItemVersion`` and ``FILTER_OPERATORS``;
- tools: ``tool_args_model`` (a tool's JSON Schema as a pydantic model);
- compaction: ``Summarizer`` (a summariser with a sync and a native async form);
- message parts: ``is_tool_ui_type`` (AI SDK UI tool parts) and ``file_data_text`` (a file
  part's inline data as text: bytes base64-encoded);
- semantic recall: ``metadata_matches`` (a vector search filter applied in Python) and
  ``synonym_embedding`` (the offline test embedding the adapters wrap).
"""

from ._async import async_twin, prefer_async, run_in_thread
from .branching import Registration, ensure_session, raw_history, set_active_history, soft_reset
from .checkpoints import CheckpointRewrite, CheckpointRow, Checkpoints, CheckpointWrite
from .items import FILTER_OPERATORS, ItemPut, Items, ItemVersion, StoredItem
from .messages import COMPACTION_ID_PREFIX, file_data_text, is_marker, is_tool_ui_type
from .overlays import is_summary_id, plan_overlays, summary_id
from .reads import summary_message
from .redaction import check_redactor, redact_fields, redact_filter, redact_query, redact_text
from .schemas import tool_args_model
from .semantic import metadata_matches
from .store_owner import store_url
from .stores.conninfo import hide_password, is_postgres_conninfo, url_without_password
from .summarizers import Summarizer
from .synonyms import synonym_embedding
from .tokens import count_message_tokens, message_counter
from .turns import CallView, Incoming, Run, StoredBranch, TurnService, view_segments
from .window import recent_window

__all__ = [
    "COMPACTION_ID_PREFIX",
    "FILTER_OPERATORS",
    "CallView",
    "ItemPut",
    "ItemVersion",
    "Items",
    "StoredItem",
    "CheckpointRewrite",
    "CheckpointRow",
    "CheckpointWrite",
    "Checkpoints",
    "Incoming",
    "Registration",
    "Run",
    "StoredBranch",
    "TurnService",
    "view_segments",
    "Summarizer",
    "async_twin",
    "count_message_tokens",
    "message_counter",
    "check_redactor",
    "ensure_session",
    "file_data_text",
    "hide_password",
    "is_postgres_conninfo",
    "is_marker",
    "is_summary_id",
    "is_tool_ui_type",
    "metadata_matches",
    "plan_overlays",
    "prefer_async",
    "raw_history",
    "recent_window",
    "redact_fields",
    "redact_filter",
    "redact_query",
    "redact_text",
    "run_in_thread",
    "set_active_history",
    "soft_reset",
    "store_url",
    "summary_id",
    "summary_message",
    "synonym_embedding",
    "tool_args_model",
    "url_without_password",
]
