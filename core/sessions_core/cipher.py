"""Keys of encrypted SQLite files (SQLCipher) and what a refused file's first bytes say (no I/O)."""

from __future__ import annotations

from .errors import InvalidInputError

SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every plain SQLite file; an encrypted file starts with random salt."""

RAW_KEY_BYTES = 32

HEAD_BYTES = 1024
"""How much of a file :func:`key_problem` looks at."""

ENCRYPTED_HINT = "pass key= (the sessions command reads it from SESSIONS_KEY)"

CIPHER_SETTINGS = ("cipher_hmac_algorithm = HMAC_SHA256",)
"""How the store encrypts a file it makes, as ``PRAGMA`` settings given after the key: SQLCipher
4 (AES-256-CBC, 4 KiB pages, a PBKDF2-HMAC-SHA512 key derivation) with each page signed by
HMAC-SHA256 instead of HMAC-SHA512. A commit encrypts and signs every page it writes, and the
CPU's SHA extensions compute SHA-256 about twice as fast (bench/bench_encryption.py on a quiet
machine: one append 1.58-1.65x a plain file's time with SQLCipher's defaults, 1.47-1.54x with
this; a fresh read 1.26x -> 1.13-1.18x). Another SQLCipher tool opens such a file when given the same setting after the
key. (2 KiB pages were measured too: as many pages a commit, and reads 1.3-1.5x.)"""

DEFAULT_SETTINGS: tuple[str, ...] = ()
"""SQLCipher 4's own defaults (HMAC-SHA512, 4 KiB pages): a file made with them opens too."""


def key_text(key: str | bytes) -> str:
    """What SQLCipher takes as ``key``: a passphrase as given (stretched by its key derivation),
    or 32 bytes as a raw key ``x'<64 hex digits>'`` (used as is)."""
    if isinstance(key, bytes):
        if len(key) != RAW_KEY_BYTES:
            raise InvalidInputError(f"a raw key is {RAW_KEY_BYTES} bytes, not {len(key)} (or pass a str passphrase)")
        return f"x'{key.hex()}'"
    if not isinstance(key, str):
        raise TypeError(f"key must be a str passphrase or {RAW_KEY_BYTES} bytes, not {type(key).__name__}")
    if not key:
        raise InvalidInputError("key must be a non-empty passphrase")
    if "\x00" in key:
        raise InvalidInputError("key must not contain NUL characters")
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidInputError("key must be valid Unicode text (it holds a lone surrogate)") from None
    return key


def key_pragma(key: str | bytes) -> str:
    """``key`` as the SQL string literal that ``PRAGMA key`` and ``PRAGMA rekey`` take."""
    return "'" + key_text(key).replace("'", "''") + "'"


def looks_encrypted(head: bytes) -> bool:
    """Whether a file's first bytes look like an encrypted database: no SQLite header, and as
    varied as random bytes (salt and ciphertext), which no text file or plain SQLite file is."""
    head = head[:HEAD_BYTES]
    return len(head) >= 512 and not head.startswith(SQLITE_HEADER) and len(set(head)) >= 180


def key_problem(head: bytes, *, keyed: bool) -> str | None:
    """Why SQLite found no database in a file starting with ``head``, when a key explains it:
    the key is wrong, the file is plain (``keyed``) or encrypted (not ``keyed``); ``None`` when
    the file is simply no database."""
    if keyed:
        if head.startswith(SQLITE_HEADER):
            return (
                "this database is not encrypted, so key= does not apply: open it without key=, or encrypt"
                " it with SqliteStore(path).rekey(key) or `sessions rekey`"
            )
        return "wrong key: the file does not decrypt with the key given (or it is no database at all)"
    if looks_encrypted(head):
        return f"this database is encrypted: {ENCRYPTED_HINT}"
    return None
