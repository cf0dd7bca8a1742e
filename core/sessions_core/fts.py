"""Full-text query building (pure): user and model text never reaches FTS5 unquoted."""

from __future__ import annotations

import re

# unicode61 splits on everything that is not a letter, a digit or a private-use character;
# the underscore is punctuation to it.
_WORD = re.compile(r"[^\W_]+")

MAX_QUERY_TERMS = 64


def query_terms(query: str) -> list[str]:
    """The distinct searchable words of ``query``, in order, at most ``MAX_QUERY_TERMS``."""
    if not isinstance(query, str):
        return []
    return list(dict.fromkeys(map(str.lower, _WORD.findall(query))))[:MAX_QUERY_TERMS]


def quote_term(term: str) -> str:
    """One FTS5 string token: wrapped in double quotes, inner quotes doubled."""
    return '"' + term.replace('"', '""') + '"'


def match_all_words(query: str) -> str | None:
    """An FTS5 expression matching rows that contain every word of ``query`` (stemmed by the
    table's tokenizer), or ``None`` when the query has no searchable word."""
    terms = query_terms(query)
    if not terms:
        return None
    return " ".join(quote_term(t) for t in terms)
