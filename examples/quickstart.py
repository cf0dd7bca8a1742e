"""Quickstart: a durable, branching, searchable conversation in a SQLite file.

Runs offline: python examples/quickstart.py [path/to/chat.db] (default: chat.db here). Run it
again: every append is idempotent by id, so nothing is stored twice. Then look inside with the
``sessions`` command (``pip install -e ".[cli]"``), as the last line printed says.
"""

from __future__ import annotations

import sys
from pathlib import Path

from sessions_core import Session


def main(db_path: Path) -> None:
    with Session(db_path).for_session("user-42") as session:
        session.append_message(
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "I'm planning a trip to Lisbon in May."}]}
        )
        session.append_message(
            {
                "id": "a1",
                "role": "assistant",
                "parts": [{"type": "text", "text": "Lovely! May is warm and sunny in Lisbon."}],
            }
        )
        session.append_message(
            {"id": "u2", "role": "user", "parts": [{"type": "text", "text": "Which neighbourhood should I stay in?"}]}
        )
        session.append_message(
            {
                "id": "a2",
                "role": "assistant",
                "parts": [{"type": "text", "text": "Alfama, for its old streets and fado."}],
            }
        )

        # Regenerate the last answer: a sibling of a2, so the conversation branches.
        session.append_message(
            {
                "id": "a2-retry",
                "role": "assistant",
                "parts": [{"type": "text", "text": "Príncipe Real, quieter and full of gardens."}],
            },
            parent_id="u2",
        )
        print("active branch:", [m.id for m in session.get_history()])
        print("first answer :", [m.id for m in session.get_history("a2")])
        print("branches of u2:", [m.id for m in session.get_branches("u2")])

        # A retried append is safe: the id is already stored.
        again = session.append_message({"id": "u1", "role": "user", "parts": [{"type": "text", "text": "duplicate"}]})
        print("retry inserted?", again.inserted)

        for hit in session.search("stay neighbourhood"):
            print(f"search hit: [{hit.role}] {hit.content}")

    # A new process on the same file sees everything.
    with Session(db_path).for_session("user-42") as reopened:
        print("after reopening:", len(reopened.get_history()), "messages on the active branch")
    print(f"look inside: sessions --store {db_path} show user-42")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "chat.db"))
