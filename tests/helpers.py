"""Small builders shared by the tests (written once, in the conformance suite)."""

from sessions_core.testing.builders import ids, msg

__all__ = ["ids", "msg"]
