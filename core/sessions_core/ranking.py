"""Ranked retrieval (pure): a query's meaningful words, and BM25 over what a store finds for them.

``match="any"`` search finds the messages matching any meaningful word of the query and ranks
them in two tiers: those matching every word first, then the others, each tier by BM25
(``K1``, ``B``) over the words a message matches. Stop words of the query's language weigh
nothing (a query of stop words alone finds nothing). A word's alternatives are those of
:func:`sessions_core.fts.parse_query`; its exact ones count, and its prefix or part-phrase ones
count at half weight when the exact ones match fewer messages than asked for.

The plan keeps the cost of a query bounded on any number of messages ("rare words first"):

1. For each word, the store reads the newest ``POSTINGS`` + 1 messages matching it (its
   postings; a word matching more is *frequent*, its count estimated from how densely its
   newest matches lie).
2. The candidates are the messages the rarer words match; a frequent word only ranks them
   (when every word is frequent, the candidates are their newest matches).
3. Candidates are ordered by the rarity of the words known to match them, and the first
   ``RESCORED`` are scored exactly, from their indexed terms.

Every store gives the same postings and terms, so ties aside the stores rank alike: a tie
goes to the newer message.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import cast

from .errors import InvalidInputError
from .fts import Alternative, Unit, query_units
from .stopwords import LANGUAGES

FIRST_LANGUAGE = next(iter(LANGUAGES))

K1 = 1.2
B = 0.75
POSTINGS = 500
"""Newest matches read per word at most."""
RESCORED = 200
"""Candidates scored exactly at most (those the rarest words match)."""
PARTIAL_WEIGHT = 0.5
"""What a match by a prefix or an identifier's parts weighs against an exact one."""
MAX_TF = 256
"""Occurrences of a term counted at most (a PostgreSQL ``tsvector`` keeps 256 positions)."""

MATCHES = ("any", "all")

Postings = Callable[[Sequence[tuple[Alternative, ...]], int, bool], list[list[int]]]
"""``postings(words, n, estimate)``: for each word (its alternatives), the ids (descending:
newest first) of at most ``n`` indexed rows of the search's scope matching any of its
alternatives. With ``estimate``, a store that knows a word to match more than ``n`` rows
without reading them may answer :class:`Estimated` for it instead."""


class Estimated(list[int]):
    """The postings of a word a store knows to be frequent, not read: about ``frequency`` rows."""

    def __init__(self, frequency: float) -> None:
        super().__init__()
        self.frequency = frequency


Terms = Callable[[Sequence[int]], dict[int, list[str]]]
"""``terms(ids)``: each row's indexed terms in order (:func:`sessions_core.fts.index_terms`)."""


def check_match(match: str) -> None:
    if match not in MATCHES:
        raise InvalidInputError(f"match must be one of {', '.join(map(repr, MATCHES))}, not {match!r}")


def query_language(words: Sequence[str]) -> str | None:
    """The language whose stop words ``words`` use most (the first of ``LANGUAGES`` on a tie),
    or ``None`` when they use none; a language other than the first needs two of them (``EU``
    alone is a word, not Portuguese "I")."""
    best, count = None, 0
    for language, stop in LANGUAGES.items():
        found = sum(word in stop for word in words)
        if found > count and (best is None and language == FIRST_LANGUAGE or found >= 2):
            best, count = language, found
    return best


def meaningful_units(query: str) -> tuple[Unit, ...]:
    """``query``'s units but those of its language's stop words (see ``parse_query``)."""
    units = query_units(query)
    language = query_language([word for _unit, word in units])
    if language is None:
        return tuple(unit for unit, _word in units)
    stop = LANGUAGES[language]
    return tuple(unit for unit, word in units if word not in stop)


@dataclass
class _Word:
    alternatives: tuple[Alternative, ...]
    partial: tuple[Alternative, ...]
    """Alternatives at ``PARTIAL_WEIGHT`` (empty when the exact ones match enough)."""
    postings: list[int]
    frequent: bool
    idf: float = 0.0


def rank(units: tuple[Unit, ...], limit: int, postings: Postings, terms: Terms, total: int) -> list[int]:
    """The ids of the best ``limit`` rows for ``units`` (see the module), best first.
    ``total``: the indexed rows of the store (what rarity is measured against)."""
    if not units or limit <= 0:
        return []
    words = _read_words(units, limit, postings)
    if not words:
        return []
    total = max(total, 1)
    for word in words:
        frequency = min(_frequency(word), total)
        word.idf = math.log(1 + (total - frequency + 0.5) / (frequency + 0.5))
    candidates = {row for word in words if not word.frequent for row in word.postings}
    if not candidates:  # every word is frequent: rank their newest matches
        everything = tuple(a for word in words for a in word.alternatives)
        candidates = set(postings([everything], max(RESCORED, limit), False)[0])
    # the rarity of the words known to match a row (float sums: typeshed's Counter counts ints)
    known = cast("dict[int, float]", Counter())
    known_count: Counter[int] = Counter()
    for word in words:
        for row in word.postings[:POSTINGS]:
            known[row] += word.idf
            known_count[row] += 1
    by_rarity = sorted(candidates, key=lambda row: (-known_count[row], -known[row], -row))
    shortlist = by_rarity[: max(RESCORED, limit)]
    found = terms(shortlist)
    scored = []
    lengths = [len(found[row]) for row in shortlist if row in found]
    average = (sum(lengths) / len(lengths)) if lengths else 1.0
    for row in shortlist:
        row_terms = found.get(row)
        if row_terms is None:  # deleted since its postings were read
            continue
        score, matched = _score(words, row_terms, average)
        if matched:
            scored.append((matched == len(words), score, row))
    scored.sort(key=lambda hit: (not hit[0], -hit[1], -hit[2]))
    return [row for _all, _score_, row in scored[:limit]]


def _read_words(units: tuple[Unit, ...], limit: int, postings: Postings) -> list[_Word]:
    """The words of ``units`` that match something, with their postings: by their exact
    alternatives, and by the others too where the exact ones match fewer than ``limit`` rows."""
    exact = [tuple(a for a in unit if a.exact) or unit for unit in units]
    rest = [tuple(a for a in unit if a not in alternatives) for unit, alternatives in zip(units, exact)]
    found = postings(exact, POSTINGS + 1, True)
    short = [i for i, rows in enumerate(found) if len(rows) < limit and rest[i] and not isinstance(rows, Estimated)]
    partial = dict(zip(short, postings([rest[i] for i in short], POSTINGS + 1, True))) if short else {}
    words = []
    for i, rows in enumerate(found):
        extra = partial.get(i)
        if extra:
            rows = sorted(set(rows).union(extra), reverse=True)[: POSTINGS + 1]
        if rows or isinstance(rows, Estimated):
            frequent = isinstance(rows, Estimated) or len(rows) > POSTINGS
            words.append(_Word(exact[i], rest[i] if i in partial else (), rows, frequent))
    return words


def _frequency(word: _Word) -> float:
    """How many rows match ``word``: counted, or for a frequent word estimated from the span of
    its newest ``POSTINGS`` matches (ids grow with time)."""
    if isinstance(word.postings, Estimated):
        return word.postings.frequency
    if not word.frequent:
        return len(word.postings)
    newest, oldest = word.postings[0], word.postings[POSTINGS - 1]
    return max(POSTINGS + 1.0, POSTINGS * newest / max(newest - oldest + 1, 1))


def _score(words: list[_Word], row_terms: list[str], average: float) -> tuple[float, int]:
    """``row_terms``' BM25 score for ``words`` and how many of them it matches."""
    counts = Counter(row_terms)
    norm = K1 * (1 - B + B * len(row_terms) / average)
    score, matched = 0.0, 0
    for word in words:
        weight = 1.0
        tf = sum(_occurrences(a, counts, row_terms) for a in word.alternatives)
        if not tf and word.partial:
            weight = PARTIAL_WEIGHT
            tf = sum(_occurrences(a, counts, row_terms) for a in word.partial)
        if tf:
            tf = min(tf, MAX_TF)
            matched += 1
            score += weight * word.idf * tf * (K1 + 1) / (tf + norm)
    return score, matched


def _occurrences(alternative: Alternative, counts: Counter[str], row_terms: list[str]) -> int:
    """How often ``alternative`` (a term, a prefix, a phrase) occurs in ``row_terms``."""
    phrase = alternative.terms
    if len(phrase) == 1:
        if not alternative.prefix:
            return counts.get(phrase[0], 0)
        return sum(count for term, count in counts.items() if term.startswith(phrase[0]))
    first, size, last = phrase[0], len(phrase), len(phrase) - 1
    found = 0
    for start in range(len(row_terms) - size + 1):
        if row_terms[start] != first:
            continue
        window = row_terms[start : start + size]
        if window[:last] == list(phrase[:last]) and (
            window[last].startswith(phrase[last]) if alternative.prefix else window[last] == phrase[last]
        ):
            found += 1
    return found
