"""A small deterministic embedding for trying and testing semantic recall offline.

``synonym_embedding(text)`` hashes each word's concept into a fixed number of dimensions: words
of one synonym group share a concept, so "car" and "automobile" land close together while
unrelated words rarely collide. It knows a few everyday groups and takes more; it is no language
model, only enough to show (and test) that recall finds by meaning what words miss. The adapters
wrap it as their frameworks' embedding classes (``SynonymEmbeddings``, ``SynonymEmbedding``).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from functools import lru_cache

DIMENSIONS = 256

SYNONYMS: tuple[tuple[str, ...], ...] = (
    ("car", "cars", "automobile", "automobiles", "vehicle", "vehicles", "auto", "sedan"),
    (
        "decide",
        "decided",
        "decision",
        "decisions",
        "agree",
        "agreed",
        "agreement",
        "chose",
        "choose",
        "choice",
        "settled",
        "conclude",
        "concluded",
        "conclusion",
    ),
    ("lease", "leased", "leasing", "rent", "rental", "renting", "rented", "hire"),
    ("dog", "dogs", "puppy", "puppies", "canine", "hound"),
    ("cat", "cats", "kitten", "kittens", "feline"),
    ("money", "cash", "funds", "budget", "budgets", "spend", "spending", "cost", "costs", "price", "expense"),
    ("doctor", "doctors", "physician", "physicians", "gp", "medic"),
    ("house", "houses", "home", "homes", "apartment", "apartments", "flat", "residence"),
    ("buy", "buying", "bought", "purchase", "purchased", "purchasing", "acquire"),
    ("big", "large", "huge", "enormous", "giant"),
    ("fast", "quick", "quickly", "rapid", "speedy", "swift"),
    ("bug", "bugs", "defect", "defects", "fault", "glitch", "error", "errors"),
    ("trip", "trips", "journey", "travel", "travelling", "traveling", "vacation", "holiday", "holidays"),
    ("meeting", "meetings", "call", "appointment", "sync", "standup"),
    ("happy", "glad", "pleased", "delighted", "joyful"),
    ("sad", "unhappy", "upset", "miserable"),
    ("food", "meal", "meals", "dinner", "lunch", "breakfast", "eat", "eating"),
    ("job", "jobs", "work", "career", "employment", "position", "role"),
    ("child", "children", "kid", "kids", "son", "daughter"),
    ("deadline", "deadlines", "due", "cutoff"),
    ("allergy", "allergies", "allergic", "intolerance", "intolerant"),
    ("peanut", "peanuts", "nut", "nuts"),
)

STOPWORDS = frozenset(
    "a an and are as at be been but by did do does for from had has have how i in is it its me my "
    "of on or our so that the their them then there these they this to us was we were what when "
    "where which who why will with you your about".split()
)

_WORD = re.compile(r"\w+")


@lru_cache(maxsize=32)
def _concepts(groups: tuple[tuple[str, ...], ...]) -> dict[str, str]:
    """Word -> concept for the built-in groups followed by ``groups`` (a later group wins)."""
    return {word.lower(): f"concept:{i}" for i, group in enumerate((*SYNONYMS, *groups)) for word in group}


def synonym_embedding(text: str, *, dimensions: int = DIMENSIONS, groups: Iterable[Iterable[str]] = ()) -> list[float]:
    """A unit vector for ``text``: the sum of a signed hash of each word's concept (its synonym
    group, from the built-in ``SYNONYMS`` and ``groups``, else the word itself), stop words left
    out. Equal inputs give equal vectors, in every process."""
    table = _concepts(tuple(tuple(group) for group in groups))
    vector = [0.0] * dimensions
    word: str  # what findall gives for a pattern without groups
    for word in _WORD.findall(text.lower()):
        if word in STOPWORDS:
            continue
        concept = table.get(word, word)
        hashed = hashlib.blake2b(concept.encode("utf-8", "surrogatepass"), digest_size=8).digest()
        for i in (0, 4):
            slot = int.from_bytes(hashed[i : i + 3], "little") % dimensions
            vector[slot] += 1.0 if hashed[i + 3] & 1 else -1.0
    norm = math.hypot(*vector)
    if norm == 0.0:  # nothing but stop words: a fixed direction, never a zero vector
        vector[0] = 1.0
        return vector
    return [x / norm for x in vector]
