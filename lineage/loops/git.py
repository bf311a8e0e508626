"""The git side of a results-file loop: what a trial's commit changed.

Owns: :func:`git_details` (subject, author time, diffstat and a bounded patch of a
commit, against the parent trial's commit) and :func:`link_git` (attach those to the
trials of a file, in ``extra["_git"]``). Runs ``git`` as a subprocess; no database.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping
from typing import Any

from lineage.domain import Trial
from lineage.formats.autoresearch import GIT_KEY, Layout

#: Longest patch kept per trial in ``extra["_git"]["patch"]``.
MAX_PATCH_BYTES = 64 * 1024


def _git(repo: str | os.PathLike[str], *args: str) -> bytes | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args],
            capture_output=True,
            timeout=30,
            check=False,
            env={**os.environ, "GIT_PAGER": "cat", "LC_ALL": "C"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    if done.returncode != 0:
        return None
    return done.stdout


def _resolve(repo: str | os.PathLike[str], commit: str) -> str | None:
    out = _git(repo, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}")
    return out.decode().strip() if out else None


def git_details(repo: str | os.PathLike[str], commit: str, base_commit: str | None = None) -> dict[str, Any] | None:
    """Subject, author time, diffstat and patch (against ``base_commit`` -- the parent
    trial's commit -- or else the commit's own git parent) of ``commit`` in ``repo``;
    None when it does not resolve. The patch is cut at 64 KB, with a note."""
    if not commit or not commit.strip():
        return None
    sha = _resolve(repo, commit.strip())
    if sha is None:
        return None
    shown = _git(repo, "show", "-s", "--format=%s%x00%aI", sha)
    subject, _, author_time = (shown or b"").decode("utf-8", "replace").rstrip("\n").partition("\x00")
    base = _resolve(repo, base_commit.strip()) if base_commit and base_commit.strip() else None
    if base == sha:
        base = None
    if base is not None:
        stat = _git(repo, "diff", "--stat", base, sha)
        patch = _git(repo, "diff", base, sha)
    else:
        stat = _git(repo, "show", "--format=", "--stat", sha)
        patch = _git(repo, "show", "--format=", sha)
    patch = patch or b""
    cut = len(patch) > MAX_PATCH_BYTES
    kept = patch[:MAX_PATCH_BYTES]
    if cut:
        newline = kept.rfind(b"\n")
        kept = kept[: newline + 1] if newline > 0 else kept
    details: dict[str, Any] = {
        "sha": sha,
        "subject": subject,
        "author_time": author_time,
        "diffstat": (stat or b"").decode("utf-8", "replace").rstrip("\n"),
        "patch_base": base or "parent commit",
        "patch": kept.decode("utf-8", "replace"),
        "patch_bytes": len(patch),
    }
    if cut:
        details["patch_note"] = f"patch cut at {len(kept):,} of {len(patch):,} bytes (limit {MAX_PATCH_BYTES:,})"
    return details


def link_git(
    trials: list[Trial],
    layout: Layout,
    repo: str | os.PathLike[str],
    *,
    known_commits: Mapping[str, str] | None = None,
) -> list[str]:
    """Add ``extra["_git"]`` to each trial whose commit resolves in ``repo`` (replacing
    the trials of the list). ``known_commits``: ``exp_id -> commit`` of trials stored
    earlier (parents). Returns warnings: not a repository, commits that do not resolve."""
    if _git(repo, "rev-parse", "--git-dir") is None:
        return [f"--git-repo {repo}: not a git repository; no commit details stored"]
    commit_key = layout.extra_key(layout.commit) if layout.commit else "commit"
    commits = dict(known_commits or {})
    for trial in trials:
        commit = trial.extra.get(commit_key)
        if isinstance(commit, str) and commit.strip():
            commits[trial.exp_id] = commit.strip()
    unresolved = 0
    for index, trial in enumerate(trials):
        commit = trial.extra.get(commit_key)
        if not isinstance(commit, str) or not commit.strip():
            continue
        details = git_details(repo, commit.strip(), commits.get(trial.parent_exp))
        if details is None:
            unresolved += 1
            continue
        trials[index] = trial.with_changes(extra={**trial.extra, GIT_KEY: details})
    return [f"{unresolved} commit(s) do not resolve in {repo}; no git details for them"] if unresolved else []
