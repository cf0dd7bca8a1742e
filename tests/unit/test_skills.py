"""FileSkillProvider: skills as files (Agent Skills layout), local folders and fsspec URLs."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from sessions_core.context import (
    ContextBlocks,
    ContextConfig,
    is_skill_provider,
    is_writable_provider,
)
from sessions_core.skills import (
    FileSkillProvider,
    WritableFileSkillProvider,
    parse_front_matter,
)
from sessions_core.tools import context_tools

PIRATE = """---
name: pirate
description: Talk like a pirate
---

# Pirate

Say arr.
"""
SQL = '---\nname: sql-query\ndescription: "SQL guide: joins, windows"\nlicense: MIT\n---\nUse CTEs.\n'


@pytest.fixture
def skills_dir(tmp_path: Path) -> Path:
    (tmp_path / "pirate").mkdir()
    (tmp_path / "pirate" / "SKILL.md").write_text(PIRATE, encoding="utf-8")
    (tmp_path / "pirate" / "notes.txt").write_text("extra", encoding="utf-8")
    (tmp_path / "sql-query").mkdir()
    (tmp_path / "sql-query" / "SKILL.md").write_text(SQL, encoding="utf-8")
    (tmp_path / "code-review.md").write_text("Review carefully.\n", encoding="utf-8")
    (tmp_path / "formal.md").write_text("---\ndescription: >\n  Be formal\n  and polite\n---\nSir.\n", encoding="utf-8")
    (tmp_path / "pirate.md").write_text("shadowed by the folder", encoding="utf-8")
    (tmp_path / "no-skill-file").mkdir()
    (tmp_path / ".hidden").mkdir()
    (tmp_path / ".hidden" / "SKILL.md").write_text("hidden", encoding="utf-8")
    (tmp_path / "README.md").write_text("About these skills", encoding="utf-8")
    (tmp_path / "notes.txt").write_text("not a skill", encoding="utf-8")
    return tmp_path


LISTING = (
    "- code-review\n- formal: Be formal and polite\n"
    "- pirate: Talk like a pirate\n- sql-query: SQL guide: joins, windows"
)


def test_get_lists_skills_sorted_by_key(skills_dir):
    assert FileSkillProvider(skills_dir).get() == LISTING
    assert FileSkillProvider(str(skills_dir)).get() == LISTING


def test_load_returns_the_whole_file(skills_dir):
    provider = FileSkillProvider(skills_dir)
    assert provider.load("pirate") == PIRATE
    assert provider.load("sql-query") == SQL
    assert provider.load("code-review") == "Review carefully.\n"
    assert provider.load("unknown") is None
    assert provider.load("no-skill-file") is None


@pytest.mark.parametrize(
    "key",
    [
        "..",
        ".",
        "../pirate",
        "pirate/../pirate",
        "/etc/passwd",
        "a/b",
        "a\\b",
        "",
        ".hidden",
        "c:pirate",
        "pi\x00rate",
        None,
        3,
    ],
)
def test_unsafe_keys_are_refused(skills_dir, key):
    assert FileSkillProvider(skills_dir).load(key) is None


def test_traversal_cannot_escape_the_root(tmp_path):
    root = tmp_path / "skills"
    root.mkdir()
    (tmp_path / "secret.md").write_text("secret", encoding="utf-8")
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "SKILL.md").write_text("secret", encoding="utf-8")
    provider = FileSkillProvider(root)
    assert provider.load("../secret") is None and provider.get() is None
    with pytest.raises(ValueError, match="invalid skill key"):
        provider.set("../secret", "overwritten")
    assert (tmp_path / "secret.md").read_text(encoding="utf-8") == "secret"


def test_keys_allowlist(skills_dir):
    provider = FileSkillProvider(skills_dir, keys=["pirate", "code-review", "absent"])
    assert provider.get() == "- code-review\n- pirate: Talk like a pirate"
    assert provider.load("pirate") == PIRATE
    assert provider.load("sql-query") is None
    assert FileSkillProvider(skills_dir, keys=[]).get() == LISTING
    provider.set("new-skill", "body")  # writes are not restricted by the allowlist
    assert (skills_dir / "new-skill" / "SKILL.md").read_text(encoding="utf-8") == "body"
    assert provider.load("new-skill") is None


def test_missing_or_empty_folder_lists_nothing(tmp_path):
    assert FileSkillProvider(tmp_path / "absent").get() is None
    assert FileSkillProvider(tmp_path).get() is None
    assert FileSkillProvider(tmp_path / "absent").load("x") is None


def test_writability_decides_whether_set_exists(skills_dir, monkeypatch):
    writable = FileSkillProvider(skills_dir)
    assert isinstance(writable, WritableFileSkillProvider) and is_writable_provider(writable)
    read_only = FileSkillProvider(skills_dir, writable=False)
    assert type(read_only) is FileSkillProvider
    assert not hasattr(read_only, "set") and is_skill_provider(read_only) and not is_writable_provider(read_only)
    assert read_only.get() == LISTING
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    assert not hasattr(FileSkillProvider(skills_dir), "set")
    assert not hasattr(FileSkillProvider(skills_dir / "not" / "yet"), "set")  # probes the nearest folder
    assert hasattr(FileSkillProvider(skills_dir, writable=True), "set")
    assert hasattr(WritableFileSkillProvider(skills_dir), "set")


def test_set_writes_skill_folders_with_front_matter(tmp_path):
    provider = FileSkillProvider(tmp_path / "skills")
    provider.set("pirate-style", "Say arr.", "Talk like a pirate")
    text = (tmp_path / "skills" / "pirate-style" / "SKILL.md").read_text(encoding="utf-8")
    assert text == "---\nname: pirate-style\ndescription: Talk like a pirate\n---\n\nSay arr."
    provider.set("tricky", "Body.", 'Use: "quotes" # and\n more')
    assert parse_front_matter(provider.load("tricky")) == (
        {"name": "tricky", "description": 'Use: "quotes" # and more'},
        "\nBody.",
    )
    provider.set("plain", "No description.")
    assert provider.load("plain") == "No description."
    provider.set("own", PIRATE, "ignored: the content has front matter")
    assert provider.load("own") == PIRATE
    assert provider.get() == (
        '- own: Talk like a pirate\n- pirate-style: Talk like a pirate\n- plain\n- tricky: Use: "quotes" # and more'
    )


def test_set_updates_a_plain_file_in_place(skills_dir):
    provider = FileSkillProvider(skills_dir)
    provider.set("code-review", "Review even more carefully.", "Reviews")
    assert not (skills_dir / "code-review").exists()
    assert provider.load("code-review").endswith("\n\nReview even more carefully.")
    provider.set("pirate", "New pirate.")  # the folder wins over pirate.md
    assert (skills_dir / "pirate" / "SKILL.md").read_text(encoding="utf-8") == "New pirate."
    assert (skills_dir / "pirate.md").read_text(encoding="utf-8") == "shadowed by the folder"


@pytest.mark.parametrize(
    "text, fields, body",
    [
        ("no front matter", {}, "no front matter"),
        ("---\nname: x\nunclosed", {}, "---\nname: x\nunclosed"),
        ("---\n---\nbody", {}, "body"),
        ("\ufeff---\r\nname: x\r\n---\r\nbody", {"name": "x"}, "body"),
        ("---\nname: 'it''s'\ndescription: plain # comment\n---\n", {"name": "it's", "description": "plain"}, ""),
        (
            "---\ndescription: |\n  line one\n  line two\nother: x\n---\n",
            {"description": "line one\nline two", "other": "x"},
            "",
        ),
        (
            "---\ndescription: first\n  continued\n# comment\ntags:\n  - a\n...\nbody",
            {"description": "first continued", "tags": "- a"},
            "body",
        ),
        ('---\ndescription: "a \\"b\\" \\u00e9"\n---\n', {"description": 'a "b" é'}, ""),
    ],
)
def test_parse_front_matter(text, fields, body):
    assert parse_front_matter(text) == (fields, body)


def test_file_skills_as_a_context_block(skills_dir):
    blocks = ContextBlocks([ContextConfig("skills", "Project docs", provider=FileSkillProvider(skills_dir))])
    tools = {tool.name: tool for tool in context_tools(blocks)}
    assert list(tools) == ["set_context", "load_context", "unload_context"]
    assert blocks.to_system_prompt().endswith("[loadable]\n" + "═" * 46 + "\n" + LISTING)
    assert tools["load_context"].invoke({"label": "skills", "key": "pirate"}) == PIRATE
    assert tools["load_context"].invoke({"label": "skills", "key": "../etc"}) == "Not found: ../etc"
    result = tools["set_context"].invoke(
        {"label": "skills", "content": "Be terse.", "metadata": {"title": "Terse mode", "description": "Short answers"}}
    )
    assert result == 'Indexed "terse-mode" in skills.'
    assert "- terse-mode: Short answers" in blocks.get_block("skills").content
    assert tools["load_context"].invoke({"label": "skills", "key": "terse-mode"}).endswith("\n\nBe terse.")
    read_only = ContextBlocks([ContextConfig("skills", provider=FileSkillProvider(skills_dir, writable=False))])
    assert [tool.name for tool in context_tools(read_only)] == ["load_context", "unload_context"]


def test_fsspec_memory_filesystem():
    fsspec = pytest.importorskip("fsspec", reason="fsspec is not installed (pip install fsspec)")
    fs = fsspec.filesystem("memory")
    root = "/sessions-core-skills"
    if fs.exists(root):
        fs.rm(root, recursive=True)
    fs.pipe_file(f"{root}/pirate/SKILL.md", PIRATE.encode())
    fs.pipe_file(f"{root}/code-review.md", b"Review carefully.\n")
    provider = FileSkillProvider(f"memory://{root}")
    assert isinstance(provider, WritableFileSkillProvider)
    assert provider.get() == "- code-review\n- pirate: Talk like a pirate"
    assert provider.load("pirate") == PIRATE and provider.load("../x") is None and provider.load("nope") is None
    provider.set("sql", "Use CTEs.", "SQL guide")
    assert fs.cat_file(f"{root}/sql/SKILL.md").decode() == "---\nname: sql\ndescription: SQL guide\n---\n\nUse CTEs."
    provider.set("code-review", "Stricter.")
    assert fs.cat_file(f"{root}/code-review.md") == b"Stricter."
    assert provider.get() == "- code-review\n- pirate: Talk like a pirate\n- sql: SQL guide"
    assert not hasattr(FileSkillProvider(f"memory://{root}", writable=False), "set")
    assert FileSkillProvider("memory:///absent-skills-root").get() is None
    fs.rm(root, recursive=True)


def test_urls_need_fsspec(monkeypatch):
    monkeypatch.setitem(sys.modules, "fsspec", None)
    with pytest.raises(ImportError, match="pip install fsspec"):
        FileSkillProvider("s3://bucket/skills")
