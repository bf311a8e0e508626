"""Trial ids as people see and type them: the one normalising rule and the sort key.

The pages, the CLI and the prompts show a trial as ``exp_<id>`` (``Trial.label``), so a
reader copies ``exp_1995`` back into a URL, a compare box or a filter while the ledger
stores ``1995``. :func:`shown_forms` says which stored ids a typed id may mean (the text
itself first, then the text less a leading ``exp_``, any case); every face that takes an
id from a person resolves it through the store with these forms (``Store.trials.resolve_exp_id``).

:func:`exp_sort_key` is the numeric-aware order of ids (``…099, 100, 101, …, 1000``),
stored per trial in ``trials.exp_key`` (migration 0008) so that SQL sorts and pages by it
on an index: every run of digits becomes its length (two digits) and its digits without
leading zeros, every other run stays as written. Keys compare as plain byte strings
(``COLLATE "C"`` on PostgreSQL): digits sort before letters, a shorter number before a
longer one, equal numbers by their text after. Ids that differ only in leading zeros
(``001``, ``1``) share a key; the order breaks that tie by ``seq``.
"""

from __future__ import annotations

import re

__all__ = ["SHOWN_PREFIX", "exp_sort_key", "shown_forms"]

#: What the pages put before a stored id (``Trial.label``).
SHOWN_PREFIX = "exp_"
_RUNS = re.compile(r"(\d+)")
#: longest digit run with an exact key (longer runs keep their order among themselves
#: only as text; ids are at most 512 characters anyway)
_MAX_RUN = 99


def exp_sort_key(exp_id: str) -> str:
    """The numeric-aware sort key of a stored id (see the module doc)."""
    out: list[str] = []
    for index, part in enumerate(_RUNS.split(exp_id)):
        if not part:
            continue
        if index % 2:  # a run of digits
            digits = part.lstrip("0") or "0"
            out.append(f"{min(len(digits), _MAX_RUN):02d}{digits}")
        else:
            out.append(part)
    return "".join(out)


def shown_forms(text: str) -> tuple[str, ...]:
    """The stored ids a typed id may mean, in preference order: the text as typed
    (trimmed), then without the ``exp_`` the pages show (``exp_1995`` → ``1995``)."""
    typed = text.strip()
    forms = [typed]
    if len(typed) > len(SHOWN_PREFIX) and typed[: len(SHOWN_PREFIX)].lower() == SHOWN_PREFIX:
        forms.append(typed[len(SHOWN_PREFIX) :])
    return tuple(dict.fromkeys(forms))
