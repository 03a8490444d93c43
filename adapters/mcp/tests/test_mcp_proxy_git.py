"""The official reference server mcp-server-git, run as a subprocess behind
``toolguard-mcp-proxy`` over stdio and driven by an ``mcp`` client session on a temporary
repository: a scripted session hands ``git_show`` an invented hash, is blocked with cause
``dependency`` and a message that says what to do, recovers, and the span file says T and FED.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import EXAMPLES, git, proxied, python_server, report_of

pytestmark = pytest.mark.anyio

INVENTED = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def text(result: object) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)  # type: ignore[attr-defined]


async def test_git_server_behind_the_proxy(tmp_path: Path, git_repo: Path) -> None:
    contract = tmp_path / "git.toml"
    # The shipped contract, plus an entry for a tool the server does not offer: a warning.
    contract.write_text((EXAMPLES / "git.toml").read_text() + "\n[tools.git_frobnicate]\n")
    repo = str(git_repo)
    server = python_server("-m", "mcp_server_git", "--repository", repo)
    async with proxied(tmp_path, server, "--contract", str(contract), "--label", "task=git") as (
        client,
        run,
    ):
        listed = await client.list_tools()
        assert "git_show" in {t.name for t in listed.tools}  # the server's own list

        # 1. An invented hash: blocked before it reaches the server.
        blocked = await client.call_tool("git_show", {"repo_path": repo, "revision": INVENTED})
        assert blocked.is_error
        assert "rejected (dependency)" in text(blocked)
        assert "`revision` must be a commit taken from an earlier tool result" in text(blocked)

        # 2-3. The agent reads the log and shows a commit it found there.
        log = await client.call_tool("git_log", {"repo_path": repo})
        assert not log.is_error
        hashes = re.findall(r"Commit: ([0-9a-f]{40})", text(log))
        assert hashes == git(git_repo, "log", "--format=%H").split()
        shown = await client.call_tool("git_show", {"repo_path": repo, "revision": hashes[-1]})
        assert not shown.is_error and "add a.txt" in text(shown)

        # 4. A branch nobody listed yet is refused; 5-6. listed, it is fine.
        early = await client.call_tool(
            "git_checkout", {"repo_path": repo, "branch_name": "feature"}
        )
        assert early.is_error and "rejected (dependency)" in text(early)
        assert "Use one of" not in text(early)  # no branch known yet: nothing to offer
        branches = await client.call_tool("git_branch", {"repo_path": repo, "branch_type": "local"})
        assert "feature" in text(branches)
        switched = await client.call_tool(
            "git_checkout", {"repo_path": repo, "branch_name": "feature"}
        )
        assert not switched.is_error, text(switched)
    assert git(git_repo, "branch", "--show-current").strip() == "feature"

    stderr = run.stderr()
    assert "git_frobnicate" in stderr and "does not offer" in stderr  # a warning, not a crash

    records, report = report_of(run.spans)
    assert len(records) == 1
    (record,) = records
    assert (record.length, record.fed, record.first_error_cause) == (6, 1, "dependency")
    assert record.labels == {"task": "git"}
    assert not record.incomplete and not record.disagreements
    overall = report["overall"]
    assert overall["ter"] == 0.0 and overall["mean_fed"] == 1.0
    assert overall["causes"]["dependency"] == 1
