"""The memory config (pure parsing) and the ``sessions mcp`` command's refusals."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from sessions_core import InvalidInputError, PIIRedactor, Session
from sessions_core.cli.mcp_commands import parse_address
from sessions_core.cli.store import BadInput
from sessions_core.memory_config import DEFAULT_CONFIG, BlockConfig, configure, load_config, parse_config


def test_the_config_file_declares_every_kind_of_block(memory_dir):
    config = load_config(memory_dir / "memory.toml")
    assert [(b.label, b.kind) for b in config.blocks] == [
        ("soul", "static"),
        ("memory", "writable"),
        ("knowledge", "searchable"),
        ("skills", "skills"),
    ]
    assert config.edit_tool and config.poll_interval == 0.2 and config.max_argument_bytes == 100_000
    assert config.blocks[3].path == str(memory_dir / "skills")  # relative to the file
    blocks = configure(Session(), config).get_context_blocks()
    assert [(b.label, b.writable, b.is_skill, b.is_searchable) for b in blocks] == [
        ("soul", False, False, False),
        ("memory", True, False, False),
        ("knowledge", True, False, True),
        ("skills", True, True, False),
    ]


def test_the_default_is_the_quickstart_memory_block():
    assert DEFAULT_CONFIG.blocks == (BlockConfig("memory", description="Learned facts", max_tokens=1100),)
    assert parse_config({}).blocks == ()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"blockz": []}, "unknown key blockz"),
        ({"blocks": {"label": "x"}}, "array of tables"),
        ({"blocks": [{}]}, "label is required"),
        ({"blocks": [{"label": "a", "kind": "magic"}]}, "kind must be one of"),
        ({"blocks": [{"label": "a", "max_tokens": "10"}]}, "max_tokens must be int"),
        ({"blocks": [{"label": "a", "max_tokens": 0}]}, "at least 1"),
        ({"blocks": [{"label": "a", "kind": "static", "max_tokens": 3}]}, "does not apply to a static block"),
        ({"blocks": [{"label": "a", "kind": "skills"}]}, "needs path"),
        ({"blocks": [{"label": "a"}, {"label": "a"}]}, 'block "a" is declared twice'),
        ({"edit_tool": "yes"}, "edit_tool must be true or false"),
        ({"poll_interval": -1}, "poll_interval"),
        ({"redact": "yes"}, "redact must be true or false"),
    ],
)
def test_a_bad_config_names_what_is_wrong(data, problem):
    with pytest.raises(InvalidInputError, match=problem):
        parse_config(data, where="memory.toml")


def test_redact_gives_the_memory_the_pii_redactor():
    assert not parse_config({}).redact
    config = parse_config({"redact": True, "blocks": [{"label": "memory"}]})
    session = configure(Session(), config)
    assert isinstance(session.redactor, PIIRedactor)
    session.replace_context_block("memory", "Mail ada@example.com")
    assert session.get_context_block("memory").content == "Mail [EMAIL]"  # type: ignore[union-attr]

    salted = configure(Session(), dataclasses.replace(config, redact_salt="pepper"))  # $SESSIONS_REDACT_SALT
    salted.replace_context_block("memory", "Mail ada@example.com")
    assert salted.get_context_block("memory").content.startswith("Mail [EMAIL:")  # type: ignore[union-attr]
    assert "pepper" not in repr(dataclasses.replace(config, redact_salt="pepper"))
    with pytest.raises(InvalidInputError, match="redact_salt"):
        parse_config({"redact_salt": "pepper"})  # a secret is never read from the file


def test_a_file_that_is_not_toml_is_refused(tmp_path: Path):
    (tmp_path / "bad.toml").write_text("blocks = [", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="not valid TOML"):
        load_config(tmp_path / "bad.toml")


def test_http_addresses():
    assert parse_address("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_address("8765") == ("127.0.0.1", 8765)
    assert parse_address("[::1]:9000") == ("::1", 9000)
    with pytest.raises(BadInput):
        parse_address("localhost:http")


@pytest.mark.parametrize(
    ("options", "problem"),
    [
        (["--session", "a", "--namespace", "b"], "one at a time"),
        (["--http", "nowhere"], "HOST:PORT"),
        (["--config", "missing.toml"], "no config file"),
    ],
)
def test_the_command_refuses_bad_options_with_exit_code_2(tmp_path: Path, options, problem):
    result = subprocess.run(
        [sys.executable, "-m", "sessions_core", "mcp", "--store", str(tmp_path / "chat.db"), *options],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=30,
    )
    assert result.returncode == 2 and problem in result.stderr and result.stdout == ""
