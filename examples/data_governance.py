"""Data governance: what a memory keeps, for how long, and who can read the file.

Runs offline: python examples/data_governance.py. In a folder of its own it builds an encrypted
SQLite file (SQLCipher: ``pip install "session-memory[encryption]"``; without it, a plain one)
where personal data is masked before it is stored, prunes a session idle for a year, erases
another for good, and then looks at the file's bytes to show that none of it is there (on an
encrypted file that says little; ``tests/test_erasure.py`` proves erasure on a plain file's bytes).
"""

from __future__ import annotations

import importlib.util
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from sessions_core import PIIRedactor, SessionManager


def text_message(message_id: str, text: str) -> dict:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def main(folder: Path) -> None:
    path = folder / "governed.db"
    key = "correct horse battery staple" if importlib.util.find_spec("sqlcipher3") else None
    print(f"store: {path.name}, {'encrypted with SQLCipher' if key else 'plain (install the encryption extra)'}")
    manager = SessionManager(path, key=key).with_redaction(PIIRedactor(hash_salt="per-deployment secret"))
    manager.with_context("memory", max_tokens=500)

    ada = manager.create("Ada").id
    manager.append(ada, text_message("u1", "I'm Ada, write to ada.lovelace@example.com or call +44 20 7946 0958"))
    manager.get_session(ada).replace_context_block("memory", "Ada's card is 4111 1111 1111 1111")
    stored = manager.get_history(ada)[0]
    print("stored:", stored.text)
    print("masked:", stored.metadata["redacted"])
    print("memory block:", manager.get_session(ada).get_context_block("memory").content)

    manager.get_session("from-last-year").import_message(
        text_message("old", "Remind me about the dentist"),
        parent_id=None,
        created_at=datetime.now(timezone.utc) - timedelta(days=400),
    )
    preview = manager.prune(timedelta(days=90), dry_run=True)
    print(f"idle for 90 days: {list(preview.session_ids)} ({preview.counts.messages} message)")
    pruned = manager.prune(timedelta(days=90))
    print(f"pruned: {list(pruned.session_ids)}")

    grace = manager.create("Grace").id
    manager.append(grace, text_message("g1", "Grace Hopper's secret word is zanzibar"))
    erased = manager.erase(grace)
    print(f"erased Grace: {erased.counts.messages} message, {erased.counts.registry} registry row")
    assert manager.get_history(grace) == [] and manager.get_history("from-last-year") == []
    manager.close()

    files = sorted(folder.glob("governed.db*"))
    data = b"".join(file.read_bytes() for file in files)
    for needle in (b"ada.lovelace", b"4111", b"dentist", b"zanzibar"):
        assert needle not in data, needle
    print(f"none of ada.lovelace, 4111, dentist or zanzibar is in {', '.join(f.name for f in files)}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as folder:
        main(Path(folder))
