"""Redaction of personal data and secrets in text, before it is stored (I/O-free).

A redactor is a plain callable ``str -> str``, or an object with ``redact(text) ->
Redaction`` that also says how many values of each kind it masked. :class:`PIIRedactor` ships
detectors for e-mail addresses, phone numbers, payment cards (Luhn-checked), IBANs (mod-97
checked), IPv4/IPv6 addresses, JWTs and API keys of the common providers, each value replaced
by a typed mask (``[EMAIL]``, ``[CARD]``...).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any, NamedTuple

from .errors import InvalidInputError, RedactionError
from .messages import SessionMessage


class Redaction(NamedTuple):
    """A text with its values masked, and how many of each kind were."""

    text: str
    counts: dict[str, int]


def _luhn(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        value = int(char)
        if index % 2:
            value = value * 2 - 9 if value > 4 else value * 2
        total += value
    return total % 10 == 0


def _in_identifier(match: re.Match[str]) -> bool:
    """Whether the digits matched are a part of a longer identifier, joined to letters or digits
    by a hyphen or an underscore on either side: a UUID's groups (``550e8400-...-446655440000``),
    an order or build number, never a phone number or a card written alone."""
    text, start, end = match.string, match.start(), match.end()
    before = start >= 2 and text[start - 1] in "-_" and text[start - 2].isalnum()
    after = end + 1 < len(text) and text[end] in "-_" and text[end + 1].isalnum()
    return before or after


_NOT_DIGIT = re.compile(r"\D")


def _network_length(digits: str) -> bool:
    """Whether ASCII ``digits`` start as a payment network's card numbers do (its IIN range) and
    are as long as that network's; none starts with 1 (a millisecond time) but JCB's 15-digit
    1800, or with 7 (fuel cards)."""
    count, two, four = len(digits), int(digits[:2]), int(digits[:4])
    if digits[0] == "4":
        return count in (13, 16, 19)  # Visa
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return count == 16  # Mastercard
    if 2200 <= four <= 2204:
        return 16 <= count <= 19  # Mir
    if two in (34, 37) or four in (1800, 2131):
        return count == 15  # American Express, JCB's first numbers
    if 300 <= int(digits[:3]) <= 305 or two in (35, 36, 38, 39):
        return 14 <= count <= 19  # Diners, JCB
    if two == 50 or 56 <= two <= 69 or four == 604:
        return 12 <= count <= 19  # Maestro (0604 too), Discover, UnionPay
    return digits[0] in "89" and count == 16  # national networks: RuPay, UnionPay 81, Uzcard, Troy...


def _card(match: re.Match[str]) -> bool:
    """A Luhn-valid number of a payment network's length for how it starts, written alone: not
    after a ``+`` (a phone number's country code), not a part of an identifier. A millisecond
    time or an order number rarely starts so, and then still fails one time in ten (Luhn)."""
    digits = _NOT_DIGIT.sub("", match.group())
    if not digits.isascii():
        digits = "".join(str(int(digit)) for digit in digits)  # ４ is 4
    start = match.start()
    return (
        _network_length(digits)
        and not (start and match.string[start - 1] == "+")
        and not _in_identifier(match)
        and _luhn(digits)
    )


def _iban(match: re.Match[str]) -> bool:
    compact = re.sub(r"\s", "", match.group()).upper()
    if not 15 <= len(compact) <= 34:
        return False
    rearranged = compact[4:] + compact[:4]
    return int("".join(str(int(char, 36)) for char in rearranged)) % 97 == 1


def _ip(match: re.Match[str]) -> bool:
    try:
        ipaddress.ip_address(match.group())
    except ValueError:
        return False
    return True


_VERSION_WORD = re.compile(
    r"\b(?:version|ver|v|release|build|firmware|patch|versi[oó]n|versione|vers[aã]o|révision)\.?:?\s*$", re.IGNORECASE
)
"""A word that says a version number follows: ``version 1.2.3.4``, ``build: 10.0.0.1``."""


def _ipv4(match: re.Match[str]) -> bool:
    """A valid IPv4 address, unless it follows a word that says it is a version number (four
    parts in range are both)."""
    start = match.start()
    return _ip(match) and _VERSION_WORD.search(match.string, max(0, start - 16), start) is None


_DIGIT_RUN = re.compile(r"\d+")
_DATE = re.compile(
    r"(?:(?:19|20)\d\d([-./])(?:0?[1-9]|1[0-2])\1(?:0?[1-9]|[12]\d|3[01])"
    r"|(?:0?[1-9]|[12]\d|3[01])([-./])(?:0?[1-9]|1[0-2])\2(?:19|20)\d\d)(?!\d)"
)
"""A date, year first or last: what a run of digits followed by a time starts with."""


_PHONE_WORD = re.compile(
    r"\b(?:phone|telephone|tel|cell|mobile|fax|whatsapp|call|ring|t[eé]l[eé]phone|portable|appel\w*|telefon"
    r"|handy|mobil|anruf\w*|ruf|tel[eé]fono|m[oó]vil|llam\w*|cellulare|chiam\w*)\b[^\d\n]{0,24}$",
    re.IGNORECASE,
)
"""A word that says a phone number follows (in English, French, German, Spanish, Italian,
Swedish), then up to 24 characters without a digit: ``call me on``, ``Tel.:``, ``ring mig på``."""


def _after_phone_word(match: re.Match[str]) -> bool:
    start = match.start()
    return _PHONE_WORD.search(match.string, max(0, start - 48), start) is not None


def _phone(match: re.Match[str]) -> bool:
    """Whether digits are written as a phone number: with ``+`` and a country code, 8-15 digits;
    with an area code in parentheses, 9-15; in groups of two digits or more (a first of one:
    ``1-800``), 9-12, or 15 after an ``00`` prefix, all in pairs only after a trunk ``0``; a bare
    run, 9-11 digits starting with the trunk ``0``, or 10-11 digits but ten starting with 1 (a
    Unix time of 2001-2033, which no national number without its trunk or country code is).
    After a word that says a phone number follows (:data:`_PHONE_WORD`), a local number too: 7-9
    digits (``call me on 9254 1224``). Longer bare runs are order numbers and millisecond times;
    decimals, dotted thousands and dates are none."""
    number = match.group("number")
    end = match.end()
    if _in_identifier(match) or match.string[end : end + 1] == ":" or _DATE.match(number):
        return False
    groups = _DIGIT_RUN.findall(number)
    digits = "".join(groups)
    count = len(digits)
    if number.startswith("+"):
        return 8 <= count <= 15
    if "(" in number:
        shortest, longest = 9, 15
    elif len(groups) == 1:
        shortest, longest = (9, 11) if int(digits[0]) == 0 else (10, 11)
        if count == 10 and int(digits[0]) == 1:
            shortest = 11
    else:
        trunk = len(groups[0]) >= 2 and int(digits[0]) == 0  # an area code after the trunk 0: 020 74960729
        if any(not 2 <= len(group) <= (8 if trunk else 6) for group in groups[1:]):
            return False
        if "." in number and not trunk and all(len(group) == 3 for group in groups[1:]):
            return False  # 389.000.000
        shortest, longest = 9, (15 if digits.startswith("00") else 12)
        if not trunk and all(len(group) == 2 for group in groups):
            shortest = 13  # scores 98 87 76 65 54; a number in pairs starts with its trunk: 01 41 63 60 83
    return shortest <= count <= longest or (7 <= count <= 9 and count < shortest and _after_phone_word(match))


class _Detector(NamedTuple):
    mask: str
    pattern: re.Pattern[str]
    check: Callable[[re.Match[str]], bool] | None = None
    needs: Callable[[str], bool] | None = None
    """What every match contains, as a test far cheaper than the pattern: a text that fails it is
    not scanned (most prose has no digits, no '@', no key prefix). Tests are shared between
    detectors and run once a text."""


_TWO_DIGITS = re.compile(r"\d\d")
_DIGIT_DOT_DIGIT = re.compile(r"\d\.\d")
_ANY_DIGIT = re.compile(r"\d")


def _has_digit(text: str) -> bool:
    """Whether ``text`` holds a decimal digit (``\\d``: any script's); ten substring tests for
    ASCII text, several times as fast as the pattern."""
    if not text.isascii():
        return _ANY_DIGIT.search(text) is not None
    return (
        "0" in text or "1" in text or "2" in text or "3" in text or "4" in text
        or "5" in text or "6" in text or "7" in text or "8" in text or "9" in text
    )  # fmt: skip


def _has_two_digits(text: str) -> bool:
    return _has_digit(text) and _TWO_DIGITS.search(text) is not None


def _has_digit_dot_digit(text: str) -> bool:
    return _has_digit(text) and _DIGIT_DOT_DIGIT.search(text) is not None


def _has_key_prefix(text: str) -> bool:
    """Whether ``text`` holds what every API key of ``DETECTORS`` starts with ('_' stands for
    ``sk_``, ``gh?_`` and ``github_pat_``)."""
    return "sk-" in text or "_" in text or "AKIA" in text or "xox" in text or "AIza" in text or "glpat-" in text


def _contains(literal: str) -> Callable[[str], bool]:
    def test(text: str) -> bool:
        return literal in text

    return test


_has_jwt_start = _contains("eyJ")
_has_at = _contains("@")
_has_colon = _contains(":")


# Order matters: a value is masked by the first detector that takes it (a card before a phone).
DETECTORS: dict[str, _Detector] = {
    "jwt": _Detector(
        "JWT", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}"), needs=_has_jwt_start
    ),
    "api_key": _Detector(
        "API_KEY",
        re.compile(
            r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|sk_(?:live|test)_[A-Za-z0-9]{16,}"
            r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{40,}|AKIA[0-9A-Z]{16}"
            r"|xox[abposr]-[A-Za-z0-9-]{10,}|AIza[0-9A-Za-z_-]{35}|glpat-[A-Za-z0-9_-]{20})"
        ),
        needs=_has_key_prefix,
    ),
    "email": _Detector(
        "EMAIL",
        re.compile(
            r"(?<![\w%+-])(?<![\w%+-]\.)[\w%+-]++(?:\.[\w%+-]++)*+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
            re.ASCII,
        ),
        needs=_has_at,
    ),
    "iban": _Detector("IBAN", re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]){11,30}\b"), _iban, _has_two_digits),
    "card": _Detector("CARD", re.compile(r"\b\d(?:[ -]?\d){11,18}\b"), _card, _has_two_digits),
    "ipv6": _Detector(
        "IPV6",
        re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}(?:[0-9A-Fa-f]{1,4}|(?:\d{1,3}\.){3}\d{1,3})?(?![\w:])"),
        _ip,
        _has_colon,
    ),
    "ipv4": _Detector("IPV4", re.compile(r"\b(?:\d{1,3}\.){3}\d{1,3}\b"), _ipv4, _has_digit_dot_digit),
    "phone": _Detector(
        "PHONE",
        re.compile(
            r"(?<![\w+])(?<!\d[ .-])(?P<number>(?:\+\d{1,3}[ .-]?)?(?:\(0\)[ .-]?)?"
            r"(?:(?:\d{1,2}[ .-]?)?\(\d{1,5}\)[ .-]?)?\d++(?:[ .-]\d++){0,7}+)(?![ .-]\d)"
            r"(?:\s?(?:x|ext\.?)\s?\d{1,5})?(?!\w)"
        ),
        _phone,
        _has_two_digits,
    ),
}
"""The built-in detectors by kind, each with its mask and (where a pattern alone is not enough)
the check a match must pass."""


class PIIRedactor:
    """Masks personal data and secrets: ``PIIRedactor()(text)`` or ``.redact(text)``.

    ``drop``: kinds of :data:`DETECTORS` not to look for. ``patterns``: more kinds, each a regular
    expression (its mask is the kind in capitals). ``hash_salt``: each mask then carries a salted
    hash of the value (``[EMAIL:1a2b3c4d]``), so the same value masks the same way and different
    ones differently, without the value being recoverable.
    """

    def __init__(
        self,
        *,
        drop: Iterable[str] = (),
        patterns: Mapping[str, str | re.Pattern[str]] | None = None,
        hash_salt: str | bytes | None = None,
    ) -> None:
        dropped = set(drop)
        unknown = dropped - DETECTORS.keys()
        if unknown:
            raise InvalidInputError(f"unknown detector(s) {sorted(unknown)}; known: {sorted(DETECTORS)}")
        self._detectors = {kind: d for kind, d in DETECTORS.items() if kind not in dropped}
        for kind, pattern in (patterns or {}).items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", kind) or kind in DETECTORS:
                raise InvalidInputError(f"a pattern's kind must be a new lower-case name, not {kind!r}")
            try:
                compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
            except re.error as error:
                raise InvalidInputError(f"pattern {kind!r} is not a regular expression: {error}") from error
            self._detectors[kind] = _Detector(kind.upper(), compiled)
        self._salt = hash_salt.encode() if isinstance(hash_salt, str) else hash_salt

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this redactor looks for, in the order it tries them."""
        return tuple(self._detectors)

    @property
    def salted(self) -> bool:
        """Whether each mask carries a salted hash of its value (``hash_salt``): two values
        then mask apart, so a masked value still finds what it was stored with."""
        return self._salt is not None

    def _mask(self, detector: _Detector, value: str) -> str:
        if self._salt is None:
            return f"[{detector.mask}]"
        digest = hmac.new(self._salt, value.encode("utf-8"), hashlib.sha256).hexdigest()[:8]
        return f"[{detector.mask}:{digest}]"

    def redact(self, text: str) -> Redaction:
        """``text`` with every detected value masked, and the count per kind."""
        counts: dict[str, int] = {}
        passed: dict[Callable[[str], bool], bool] = {}
        for kind, detector in self._detectors.items():
            needs = detector.needs
            if needs is not None:
                found = passed.get(needs)
                if found is None:
                    found = passed[needs] = needs(text)
                if not found:
                    continue

            def replace(match: re.Match[str], kind: str = kind, detector: _Detector = detector) -> str:
                if detector.check is not None and not detector.check(match):
                    return match.group()
                counts[kind] = counts.get(kind, 0) + 1
                return self._mask(detector, match.group())

            text = detector.pattern.sub(replace, text)
        return Redaction(text, counts)

    def __call__(self, text: str) -> str:
        return self.redact(text).text


def apply_redactor(redactor: Any, text: str) -> Redaction:
    """Run a redactor (a callable or an object with ``redact``) on ``text``; a plain callable's
    change counts as one ``custom`` value. Raises :class:`RedactionError` when it raises or
    returns anything but text."""
    try:
        result = redactor.redact(text) if hasattr(redactor, "redact") else redactor(text)
    except Exception as error:
        raise RedactionError(f"the redactor {redactor!r} raised {type(error).__name__}: {error}") from error
    if isinstance(result, Redaction):
        return result
    if not isinstance(result, str):
        raise RedactionError(f"the redactor {redactor!r} returned {type(result).__name__}, not text")
    return Redaction(result, {} if result == text else {"custom": 1})


REDACTED_KEY = "redacted"
"""The metadata key of a stored message that had values masked: their count per kind."""

_KEPT_KEYS = frozenset(
    {"type", "toolCallId", "toolName", "mediaType", "data", "url", "state", "isError", "providerOptions"}
)
"""Part fields that identify, route or carry bytes, never free text: not redacted."""


def check_redactor(redactor: Any) -> Any:
    """``redactor`` if it is a callable or has ``redact``; ``TypeError`` otherwise."""
    if not (callable(redactor) or callable(getattr(redactor, "redact", None))):
        raise TypeError(f"a redactor is a callable str -> str or has redact(text); got {type(redactor).__name__}")
    return redactor


def redact_text(redactor: Any, text: str) -> str:
    """``text`` through ``redactor`` (:func:`apply_redactor`), without the counts."""
    return apply_redactor(redactor, text).text


def redact_value(redactor: Any, value: Any) -> Any:
    """``value`` (JSON-like: mappings, lists, strings, numbers) with every string in it, however
    deep, through ``redactor``; field names, numbers and other objects are kept. The same object
    when nothing was masked."""
    redacted = _redact_strings(redactor, value, {})
    return value if redacted == value else redacted


def redact_query(redactor: Any, query: Any) -> Any:
    """A search ``query`` redacted as stored text is, when the redactor masks each value apart (a
    salted :class:`PIIRedactor`): an address it masked where it was stored then finds where it
    was mentioned (``[EMAIL:1a2b3c4d]`` both sides), for a person's data to be found and erased.
    ``query`` as given otherwise (an unsalted mask would find every value of its kind), and
    anything but text."""
    if isinstance(query, str) and isinstance(redactor, PIIRedactor) and redactor.salted:
        return redactor(query)
    return query


def redact_fields(redactor: Any, fields: Mapping[str, Any], *, kept: Collection[str] = ()) -> dict[str, Any]:
    """``fields`` with each value (but those of the ``kept`` names) through :func:`redact_value`."""
    return {name: value if name in kept else redact_value(redactor, value) for name, value in fields.items()}


def redact_filter(redactor: Any, filter: Mapping[str, Any], *, kept: Collection[str] = ()) -> dict[str, Any]:
    """An exact-match filter on fields stored through :func:`redact_fields`, each value (but
    those of the ``kept`` names) through :func:`redact_operand`, so that it matches what the
    fields were stored as."""
    return {name: value if name in kept else redact_operand(redactor, name, value) for name, value in filter.items()}


def redact_operand(redactor: Any, field: str, value: Any, *, exact: bool = True) -> Any:
    """A filter's ``value`` on ``field``, redacted as a stored value is, so that it compares
    with what was stored.

    A value the redactor masks compares only when the comparison is ``exact`` (equal or not)
    and each mask tells its value apart (a salted :class:`PIIRedactor`,
    :attr:`PIIRedactor.salted`): an unsalted mask (``[EMAIL]``) would match every stored value of
    its kind, and masks do not order as their values do. Otherwise :class:`InvalidInputError`,
    naming the field."""
    masked: dict[str, int] = {}
    redacted = _redact_strings(redactor, value, masked)
    if not masked:
        return value
    if not exact:
        raise InvalidInputError(
            f"the filter's value of {field!r} is one the redactor masks, so it was not stored: masks do not"
            " order as their values do; filter on it by equality"
        )
    if not (isinstance(redactor, PIIRedactor) and redactor.salted):
        raise InvalidInputError(
            f"the filter's value of {field!r} is one the redactor masks, so it was not stored: matching its"
            " mask would find every value masked the same way; a PIIRedactor(hash_salt=...) masks each"
            " value apart, so that a filter on it matches"
        )
    return redacted


def _redact_strings(redactor: Any, value: Any, counts: dict[str, int]) -> Any:
    """``value`` with its strings redacted (mappings and lists rebuilt); ``counts`` adds up
    what was masked, per kind."""
    if isinstance(value, str):
        text, found = apply_redactor(redactor, value)
        for kind, count in found.items():
            counts[kind] = counts.get(kind, 0) + count
        return text
    if isinstance(value, (list, tuple)):
        return [_redact_strings(redactor, item, counts) for item in value]
    if isinstance(value, Mapping):
        return {key: _redact_strings(redactor, item, counts) for key, item in value.items()}
    return value


def redact_message(redactor: Any, message: SessionMessage) -> SessionMessage:
    """``message`` with the free text of its parts redacted: text, reasoning, tool inputs and
    outputs, file names and any other field a part carries, except its identifiers, bytes, URLs
    and provider metadata. The same object when nothing was masked; else a copy whose metadata
    holds the count per kind under :data:`REDACTED_KEY`."""
    counts: dict[str, int] = {}

    def walk(value: Any) -> Any:
        return _redact_strings(redactor, value, counts)

    parts = []
    for part in message.parts:
        fields = part.model_dump(by_alias=True, exclude_unset=True, mode="python")
        changed = {
            name: redacted
            for name, value in fields.items()
            if name not in _KEPT_KEYS
            and not name.endswith(("Metadata", "metadata"))
            and (redacted := walk(value)) != value
        }
        parts.append(type(part).model_validate({**fields, **changed}) if changed else part)
    if not counts:
        return message
    metadata = {**message.metadata, REDACTED_KEY: counts}
    redacted = message.model_copy(update={"parts": parts, "metadata": metadata})
    redacted.__pydantic_fields_set__.add("metadata")
    return redacted
