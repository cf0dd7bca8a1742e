"""``Session.declared_tools``: the memory tools from the declared blocks, nothing read."""

from __future__ import annotations

from sessions_core import Session, StaticContext


class CountingSkills:
    """A skill provider that counts every call."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.docs = {"tea": "How to brew tea."}

    def get(self) -> str:
        self.calls.append("get")
        return "- tea: brewing"

    def load(self, key: str) -> str | None:
        self.calls.append("load")
        return self.docs.get(key)


class CountingNotes:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.text = ""

    def get(self) -> str:
        self.calls.append("get")
        return self.text

    def set(self, content: str) -> None:
        self.calls.append("set")
        self.text = content


def test_declared_tools_match_tools_without_reading_a_provider():
    skills, notes = CountingSkills(), CountingNotes()
    with Session(":memory:").for_session("s") as session:
        session.with_context("soul", provider=StaticContext("Be kind.")).with_context(
            "notes", description="Notes", max_tokens=100, provider=notes
        ).with_context("skills", description="Skills", provider=skills)
        declared = session.declared_tools()
        assert skills.calls == [] and notes.calls == []
        assert [t.to_openai() for t in declared] == [t.to_openai() for t in session.tools()]


def test_a_declared_tool_calls_the_sessions_tool():
    with Session(":memory:").for_session("s").with_context("memory", max_tokens=100) as session:
        (set_context,) = session.declared_tools()
        assert set_context.invoke({"label": "memory", "content": "Likes tea."}).startswith("Written to memory.")
        assert session.get_context_block("memory").content == "Likes tea."


def test_no_blocks_no_tools():
    with Session(":memory:").for_session("s") as session:
        assert session.declared_tools() == []
