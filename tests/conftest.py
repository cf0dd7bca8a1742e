"""Fixtures, the property tests' profiles and test-run reporting shared by the whole suite."""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from sessions_core.testing.items import clock  # noqa: F401  (the items' clock, for every test of expiry)

from .postgres import require_postgres, temporary_schema

# CI runs the property tests on a fixed seed (``.ci/run`` sets the profile), so that a submission
# is judged on the examples it was tested with; a local run draws new ones, and a failure found
# that way is pinned with ``@example``.
settings.register_profile("ci", derandomize=True)
settings.load_profile(os.environ.get("SESSIONS_HYPOTHESIS_PROFILE", "default"))


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """Print how many documentation snippets ran alone, when the run included them."""
    outcomes = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome in outcomes:
        for report in terminalreporter.stats.get(outcome, []):
            if "test_docs.py::test_snippet_runs_alone[" in getattr(report, "nodeid", "") and report.when in (
                "call",
                "setup",
            ):
                if outcome != "passed" or report.when == "call":
                    outcomes[outcome] += 1
    if any(outcomes.values()):
        from .docs_snippets import snippets

        terminalreporter.write_line(
            f"documentation: {len(snippets())} Python blocks of README.md and docs/, each run alone:"
            f" {outcomes['passed']} passed, {outcomes['failed']} failed, {outcomes['skipped']} skipped"
        )


@pytest.fixture
def schema():
    """A PostgreSQL schema of its own for the test, dropped after it (skipped without a server)."""
    require_postgres()
    with temporary_schema() as name:
        yield name
