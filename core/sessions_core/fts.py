"""Full-text analysis (pure): text into index terms, a query into a match plan, for every store.

Both stores index the terms made here and run the plan made here, so the same query over the
same messages finds the same messages on each; only ranking is the backend's own (bm25 on
SQLite, ``ts_rank`` on PostgreSQL). What matches what:

- **Words** are folded (case, accents, compatibility forms: ``Café`` is ``cafe``, ``ＡＰＩ`` is
  ``api``) and stemmed with Snowball English (``deploying``, ``deployed`` and ``deployment`` are
  ``deploy``). A query word of three characters or more also matches as a prefix (``depl``
  finds ``deployment``); exact matches rank above prefix-only ones.
- **Identifiers** are split into their parts at ``_ . - / \\ : @ # '``, at camel case and
  between letters and digits (``getUserById``: get, user, by, id), and are indexed whole too
  (``getuserbyid``). A query identifier matches the whole, then (ranked after) its parts as a
  phrase: ``UserById``, ``getUser``, ``ERR_CONN_RESET`` and ``invoice.py`` find what contains
  them.
- **CJK text** (Han, Hiragana, Katakana, Hangul), which has no spaces between words, is indexed
  as overlapping character bigrams (and each run's last character alone); a query run matches
  its bigrams as a phrase, as Lucene's CJK analyzer does, and a single character as a prefix.
  Any word or phrase of it is found, without a dictionary, in any mix with other scripts.

The terms are made of letters, digits and marks only, joined by spaces, so that neither
backend's own tokenizer changes them. A message contributes at most ``MAX_TERMS`` terms (the
positions a PostgreSQL ``tsvector`` can hold; more text stays searchable by its beginning).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterator
from itertools import chain
from typing import NamedTuple

import regex
import Stemmer

MAX_QUERY_TERMS = 64
"""Terms a query plan holds at most (the rest of a long query is ignored)."""
MAX_TERMS = 16_383
"""Terms indexed per text at most: PostgreSQL's largest ``tsvector`` position."""
MAX_INDEX_BYTES = 1_000_000
"""A text's distinct terms take at most about this many bytes (a ``tsvector`` holds 1 MB)."""
MAX_TERM_CHARS = 80
"""Longer terms (a pasted hash, base64) are cut to this, in the index and in queries alike."""
PREFIX_MIN_CHARS = 3
"""Shorter query words match exactly only (a one-letter prefix would match half the index)."""

_CJK = r"[[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}\u30fc]&&[\p{L}\p{N}\p{M}]]"
"""A CJK letter (the scripts' symbols, such as the Kangxi radicals, are not: they separate words)."""
_JOINERS = r"_.\-/\\:@#'\u2019"
_LETTER = rf"[[\p{{L}}\p{{N}}\p{{M}}]--{_CJK}]"
_TOKEN = regex.compile(rf"{_CJK}+|{_LETTER}+(?:[{_JOINERS}]{_LETTER}+)*", regex.V1)
_ASCII_TOKEN = re.compile(rf"[A-Za-z0-9]+(?:[{_JOINERS}][A-Za-z0-9]+)*")
_IS_CJK = regex.compile(_CJK, regex.V1)
_JOINER = re.compile(rf"[{_JOINERS}]")
_BOUNDARY = regex.compile(
    r"(?<=\p{Ll}\p{M}*)(?=\p{Lu})|(?<=\p{Lu}\p{M}*)(?=\p{Lu}\p{Ll})|(?<=\p{L}\p{M}*)(?=\p{N})|(?<=\p{N})(?=\p{L})"
)
_ASCII_BOUNDARY = re.compile(
    r"(?<=[a-z])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])|(?<=[A-Za-z])(?=[0-9])|(?<=[0-9])(?=[A-Za-z])"
)
# The generic combining diacritics (accents on Latin, Greek, Cyrillic); a script's own marks
# (Devanagari vowel signs, the kana voicing marks) are part of its letters and stay.
_DIACRITICS = regex.compile(r"[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f]")
_NOT_TERM = regex.compile(r"[^\p{L}\p{N}\p{M}]")
# Letters that carry their accent in the letter itself (no decomposition), folded as unaccent does.
_LETTERS = str.maketrans(
    {"ø": "o", "đ": "d", "ð": "d", "ħ": "h", "ı": "i", "ł": "l", "ŧ": "t", "æ": "ae", "œ": "oe", "þ": "th"}
)

_stem = Stemmer.Stemmer("english", 0).stemWord  # no cache of its own: index_terms keeps one


class Alternative(NamedTuple):
    """A phrase of terms (one term is a word); ``prefix``: its last term matches as a prefix.
    ``exact``: a match by it is exact (a word's stem, an identifier whole, a CJK phrase), and
    ranks above the others (a prefix, an identifier's parts)."""

    terms: tuple[str, ...]
    prefix: bool = False
    exact: bool = True


Unit = tuple[Alternative, ...]
"""What one word of a query matches: any of its alternatives."""


def fold(part: str) -> str:
    """``part`` in its indexed form: case-folded, accents removed, compatibility forms unified."""
    if part.isascii():
        return part.lower()
    folded = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", part).casefold())
    folded = unicodedata.normalize("NFC", _DIACRITICS.sub("", folded)).translate(_LETTERS)
    return _NOT_TERM.sub("", folded)


def _tokens(text: str) -> list[str]:
    """``text``'s words, identifiers and CJK runs, in order."""
    if text.isascii():
        return _ASCII_TOKEN.findall(text)
    return _TOKEN.findall(unicodedata.normalize("NFKC", text))


class _Token(NamedTuple):
    cjk: bool
    terms: tuple[str, ...]
    """A word's stem, an identifier's part stems, a CJK run's bigrams."""
    whole: str | None
    """An identifier of several parts, folded and joined; ``None`` for a word or a CJK run."""
    word: str
    """The word folded (not stemmed), or the CJK run."""


def _token(token: str) -> _Token:
    if _IS_CJK.match(token):
        return _Token(True, tuple(_bigrams(token)), None, token)
    if token.isascii() and token.isalpha() and (token.islower() or token.istitle() or token.isupper()):
        word = token.lower()[:MAX_TERM_CHARS]  # a plain word, the common case: one part
        return _Token(False, (_stem(word),), None, word)
    boundary = _ASCII_BOUNDARY if token.isascii() else _BOUNDARY
    parts = [part for segment in _JOINER.split(token) for part in boundary.split(segment) if part]
    folded = [term[:MAX_TERM_CHARS] for term in map(fold, parts) if term]
    stems = tuple(_stem(term) for term in folded)
    whole = "".join(folded)[:MAX_TERM_CHARS] if len(folded) > 1 else None
    return _Token(False, stems, whole, folded[0] if folded else "")


def _token_terms(token: str) -> tuple[str, ...]:
    """What ``token`` is indexed by: a CJK run's bigrams and its last character alone, a word's
    stem, an identifier's part stems then the whole."""
    analysed = _token(token)
    if analysed.cjk:
        return (*analysed.terms, token[-1])
    return analysed.terms if analysed.whole is None else (*analysed.terms, analysed.whole)


def _bigrams(run: str) -> list[str]:
    return [run[i : i + 2] for i in range(len(run) - 1)]


_CACHE_SIZE = 50_000
_cache: dict[str, tuple[str, ...]] = {}
_chunk_cache: dict[str, tuple[str, ...]] = {}


_CHUNK = 1 << 16
"""A longer text is read this many characters at a time, only as far as its indexed terms go."""


def _leading_tokens(text: str) -> Iterator[str]:
    """``_tokens(text)``, a long text's a chunk at a time (cut after a space where one is near)."""
    if len(text) <= _CHUNK:
        yield from _tokens(text)
        return
    start = 0
    while start < len(text):
        end = start + _CHUNK
        if end < len(text):
            space = text.rfind(" ", end - _CHUNK // 4, end)
            end = end if space < 0 else space + 1
        yield from _tokens(text[start:end])
        start = end


def index_terms(text: str) -> list[str]:
    """The terms ``text`` is indexed by, in order (at most ``MAX_TERMS``)."""
    if len(text) <= _CHUNK:
        if text.isascii():
            # An ASCII token holds no whitespace, so the text's terms are those of its
            # whitespace-separated chunks (a word and its punctuation, mostly), each analysed once.
            parts, cache, analyse = text.split(), _chunk_cache, _chunk_terms
        else:
            parts, cache, analyse = _tokens(text), _cache, _token_terms_cached
        known = list(map(cache.get, parts))  # every part seen before, the common case: no loop
        if None in known:
            known = [analyse(part) if found is None else found for part, found in zip(parts, known)]
        terms: list[str] = list(chain.from_iterable(known))  # type: ignore[arg-type]  # no None left
        del terms[MAX_TERMS:]
    else:
        terms = []
        for token in _leading_tokens(text):
            terms += _token_terms_cached(token)
            if len(terms) >= MAX_TERMS:
                del terms[MAX_TERMS:]
                break
    # Below this length the distinct terms cannot reach the budget (a character makes at most
    # two characters of terms, of four bytes each).
    return terms if len(text) * 8 < MAX_INDEX_BYTES // 2 else _within_budget(terms)


def _token_terms_cached(token: str) -> tuple[str, ...]:
    """:func:`_token_terms`, remembered (:func:`_remember`)."""
    found = _cache.get(token)
    if found is None:
        if token.isascii() and token.isalpha() and (token.islower() or token.istitle() or token.isupper()):
            found = (_stem(token.lower()[:MAX_TERM_CHARS]),)  # a plain word, the common case
        else:
            found = _token_terms(token)
        _remember(_cache, token, found)
    return found


def _chunk_terms(chunk: str) -> tuple[str, ...]:
    """The terms of an ASCII ``chunk`` without whitespace, remembered as tokens are."""
    found = tuple(chain.from_iterable(map(_token_terms_cached, _ASCII_TOKEN.findall(chunk))))
    _remember(_chunk_cache, chunk, found)
    return found


def _remember(cache: dict[str, tuple[str, ...]], part: str, terms: tuple[str, ...]) -> None:
    """Keep ``part``'s terms when it is of ordinary length (words recur: Zipf; a long CJK run or
    pasted hash rarely does); a full cache starts again."""
    if len(part) <= MAX_TERM_CHARS:
        if len(cache) >= _CACHE_SIZE:
            cache.clear()
        cache[part] = terms


def _within_budget(terms: list[str]) -> list[str]:
    """The longest beginning of ``terms`` whose ``tsvector`` fits in ``MAX_INDEX_BYTES``."""
    seen: set[str] = set()
    size = 0
    for count, term in enumerate(terms):
        if term not in seen:
            seen.add(term)
            size += len(term.encode("utf-8")) + 8
        size += 2
        if size > MAX_INDEX_BYTES:
            return terms[:count]
    return terms


def index_text(text: str) -> str:
    """:func:`index_terms` joined by spaces: what the SQLite index tokenizes."""
    return " ".join(index_terms(text))


def parse_query(query: str) -> tuple[Unit, ...]:
    """What ``query`` matches: every unit (one per word, identifier or CJK run, in order, without
    repeats), each by any of its alternatives; empty when nothing in it is searchable. Search
    syntax is not interpreted: quotes, ``*``, ``AND``, ``-`` are text like any other."""
    return tuple(unit for unit, _word in query_units(query))


def query_units(query: str) -> tuple[tuple[Unit, str], ...]:
    """:func:`parse_query`'s units, each with the word it was made from, folded (an
    identifier's parts joined, a CJK run as it is): what tells a stop word."""
    if not isinstance(query, str):
        return ()
    units: dict[Unit, str] = {}
    budget = MAX_QUERY_TERMS
    for token in _tokens(query):
        analysed = _token(token)
        if not analysed.terms and not analysed.cjk:
            continue
        word = analysed.word
        if analysed.cjk:
            single = len(token) == 1
            unit: Unit = (Alternative((token,), True, False),) if single else (Alternative(analysed.terms),)
        elif analysed.whole is not None:
            unit = (Alternative((analysed.whole,)), Alternative(analysed.terms, exact=False))
            word = analysed.whole
        else:
            unit = (Alternative(analysed.terms),)
            if len(analysed.word) >= PREFIX_MIN_CHARS:
                unit += (Alternative((analysed.word,), True, False),)
        size = sum(len(alternative.terms) for alternative in unit)
        if size > budget:
            break
        if unit not in units:
            units[unit] = word
            budget -= size
    return tuple(units.items())


def exact_units(units: tuple[Unit, ...]) -> tuple[Unit, ...]:
    """``units`` with their exact alternatives only (a unit with none, a single CJK character,
    stays whole): the plan of the matches that rank first."""
    return tuple(tuple(a for a in unit if a.exact) or unit for unit in units)


# -- rendering for the backends ----------------------------------------------------------------


def fts5_expression(units: tuple[Unit, ...]) -> str | None:
    """An FTS5 query expression for ``units`` (every term a quoted string), or ``None``."""
    if not units:
        return None

    def alternative(a: Alternative) -> str:
        return '"' + " ".join(a.terms).replace('"', '""') + '"' + ("*" if a.prefix else "")

    def unit(u: Unit) -> str:
        return alternative(u[0]) if len(u) == 1 else "(" + " OR ".join(map(alternative, u)) + ")"

    return " AND ".join(map(unit, units))


def _lexeme(term: str) -> str:
    return "'" + term.replace("\\", "\\\\").replace("'", "''") + "'"


def tsquery_literal(units: tuple[Unit, ...]) -> str | None:
    """A PostgreSQL ``tsquery`` literal for ``units`` (cast with ``::tsquery``), or ``None``."""
    if not units:
        return None

    def alternative(a: Alternative) -> str:
        phrase = " <-> ".join(map(_lexeme, a.terms))
        return phrase + ":*" if a.prefix else f"({phrase})"

    def unit(u: Unit) -> str:
        return "(" + " | ".join(map(alternative, u)) + ")"

    return " & ".join(map(unit, units))


def tsvector_literal(text: str) -> str:
    """A PostgreSQL ``tsvector`` literal of ``text``'s terms at their positions (``::tsvector``)."""
    terms = index_terms(text)
    joined = "".join(terms)
    if "'" in joined or "\\" in joined:  # never made by index_terms: terms are letters, digits, marks
        return " ".join(f"{_lexeme(term)}:{position}" for position, term in enumerate(terms, 1))
    return " ".join([f"'{term}':{position}" for position, term in enumerate(terms, 1)])


_LEXEME = re.compile(r"(?<!')'((?:[^']|'')*+)':([0-9,]+)")
"""A lexeme and its positions; it opens on a quote that no quote precedes (tried from every quote of
a run, a quoted ``''`` run was rescanned from each: quadratic)."""


def tsvector_terms(literal: str) -> list[str]:
    """The terms of a ``tsvector``'s text (as :func:`tsvector_literal` wrote it) in position order:
    what :func:`index_terms` gave, but for a term's positions past the 256 a ``tsvector`` keeps."""
    placed: list[tuple[int, str]] = []
    for lexeme, positions in _LEXEME.findall(literal):
        term = lexeme.replace("''", "'").replace("\\\\", "\\")
        placed += [(int(position), term) for position in positions.split(",")]
    placed.sort()
    return [term for _position, term in placed]
