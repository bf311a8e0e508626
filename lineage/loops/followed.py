"""The results file a project follows: one file per project, stored as an absolute path
in ``project.settings["followed_file"]`` when the project first imports, watches or
appends to a file on this machine (``Files.follow``).

Why: a loop's rows are the project's trials by row number, so rows of a second file
would take the exp_ids of the first's (a ``record --append-tsv`` run from another
directory once started a new ``results.tsv``, and the next sync of the real file
overwrote a recorded trial). Every local face (``lineage import``, ``watch``,
``record --append-tsv``) therefore refuses another file, naming the right one, and the
prompt names it.
"""

from __future__ import annotations

import os
from pathlib import Path

from lineage.domain import Project
from lineage.errors import InvalidInput

#: The key of the followed file's absolute path in ``Project.settings``.
FOLLOWED_KEY = "followed_file"


def followed_file(project: Project) -> str | None:
    """The absolute path of the results file ``project`` follows, if it has one."""
    value = project.settings.get(FOLLOWED_KEY) if project.settings else None
    return value if isinstance(value, str) and value else None


def resolved_path(path: str | os.PathLike[str]) -> str:
    """``path`` as the ledger stores it: absolute, symbolic links resolved."""
    return str(Path(path).expanduser().resolve())


def check_followed(project: Project | None, path: str | os.PathLike[str], *, field: str) -> str:
    """The stored form of ``path`` (:func:`resolved_path`) when ``project`` may follow it:
    it follows no file yet, or this one; else :class:`InvalidInput` naming ``field`` and
    the file the project follows."""
    resolved = resolved_path(path)
    current = followed_file(project) if project is not None else None
    if project is not None and current is not None and current != resolved:
        raise InvalidInput(
            field,
            f"project {project.slug!r} follows the results file {current}, not {resolved}; use that file "
            "(rows of two files would take each other's exp_ids)",
        )
    return resolved
