"""Ranked retrieval (``sessions_core.ranking``), pure: stop words, tiers, BM25, bounded work."""

from __future__ import annotations

import pytest

from sessions_core import ranking
from sessions_core.fts import index_terms, parse_query
from sessions_core.ranking import meaningful_units, query_language, rank


class Corpus:
    """Rows (id = position + 1, newer rows have higher ids) answering ``rank``'s two reads."""

    def __init__(self, texts: list[str]) -> None:
        self.terms = {i: index_terms(text) for i, text in enumerate(texts, 1)}
        self.reads: list[int] = []

    def postings(self, words, n, estimate=True):
        out = []
        for alternatives in words:
            rows = [
                row
                for row in sorted(self.terms, reverse=True)
                if any(ranking._occurrences(a, _counts(self.terms[row]), self.terms[row]) for a in alternatives)
            ]
            out.append(rows[:n])
        return out

    def read_terms(self, ids):
        self.reads.append(len(ids))
        return {i: self.terms[i] for i in ids}

    def search(self, query: str, limit: int = 10) -> list[int]:
        return rank(meaningful_units(query), limit, self.postings, self.read_terms, len(self.terms))


def _counts(terms):
    from collections import Counter

    return Counter(terms)


def test_stop_words_of_the_querys_language_weigh_nothing():
    assert meaningful_units("what did the") == ()
    assert meaningful_units("What did Caroline research?") == parse_query("Caroline research")
    assert meaningful_units("qu'est-ce que le client a dit sur le déploiement") == parse_query(
        "qu'est-ce client dit déploiement"
    )
    assert meaningful_units("EU") == parse_query("EU")  # one Portuguese stop word is not Portuguese
    assert query_language(["wie", "ist", "das", "wetter"]) == "german"
    assert query_language(["kestrel"]) is None


def test_every_word_first_then_by_bm25():
    corpus = Corpus(["the invoice went to the client", "invoice invoice invoice", "client", "unrelated"])
    assert corpus.search("invoice client") == [1, 2, 3]
    assert corpus.search("what about the invoice?") == [2, 1]  # more occurrences, shorter text


def test_rare_words_weigh_more_than_frequent_ones():
    corpus = Corpus(["meeting notes"] * 20 + ["the kestrel meeting", "notes notes meeting"])
    assert corpus.search("kestrel notes", limit=3)[0] == 21


def test_ties_go_to_the_newer_row():
    corpus = Corpus(["same words here"] * 5)
    assert corpus.search("same words") == [5, 4, 3, 2, 1]


def test_prefixes_count_at_half_weight_only_when_exact_matches_are_few():
    corpus = Corpus(["a category of things", "a cat of things"])
    assert corpus.search("cat") == [2, 1]
    assert corpus.search("cat", limit=1) == [2]


def test_a_frequent_word_only_ranks_what_the_rarer_words_find(monkeypatch):
    monkeypatch.setattr(ranking, "POSTINGS", 5)
    monkeypatch.setattr(ranking, "RESCORED", 4)
    corpus = Corpus(["common filler"] * 50 + ["common rare"] + ["common filler"] * 50)
    assert corpus.search("common rare", limit=3)[0] == 51
    assert max(corpus.reads) <= 4  # candidates scored exactly: bounded, not every match
    only_frequent = corpus.search("common", limit=3)
    assert only_frequent == [101, 100, 99]  # the newest matches of a word that is everywhere


@pytest.mark.parametrize("query", ["", "   ", "!!!", "*", '"', "the of and"])
def test_nothing_to_rank(query):
    assert Corpus(["anything at all"]).search(query) == []
