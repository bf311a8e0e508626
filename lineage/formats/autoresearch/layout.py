"""How one results file is laid out, and the flags that steer its reading.

:class:`ImportOptions` (the column-mapping flags of ``lineage import``), :class:`Layout`
(columns, roles, header and trailer text, line end, number formats, status words, exp_id
segments: what export needs to write the file back and watch needs to read more of it;
stored in ``project.settings["results_file"]``), :func:`default_layout` (karpathy's own
header), :func:`format_number` (a number in a column's format) and the keys of
``Trial.extra`` the format reserves (``_line``, ``_row``, ``_part``, ``_git``, ``_span``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from lineage.errors import InvalidInput

NAME = "autoresearch"
GENERIC = "generic"

#: Keys of ``Trial.extra`` the format owns (a column of the same name is stored as ``col:NAME``).
#: the row's text as written (with blank or stray lines before it), when the trial alone
#: does not give it back byte for byte (a repaired row, another number format...)
LINE_KEY = "_line"
#: the 0-based row number in its file: marks a trial that came from the file
ROW_KEY = "_row"
#: 1 for the second row of two merged on one line
PART_KEY = "_part"
#: commit details (``--git-repo``)
GIT_KEY = "_git"
#: 2 for a record broken over two physical lines (a line end inside a cell)
SPAN_KEY = "_span"
RESERVED_KEYS = frozenset({LINE_KEY, ROW_KEY, PART_KEY, GIT_KEY, SPAN_KEY})
#: the row's description, when the trial keeps a fuller hypothesis of its own (recorded
#: through the API, then linked to its row): the file's text, written back on export.
#: Not reserved: a page shows it among the trial's extra fields.
ROW_DESCRIPTION_KEY = "row_description"
#: The key of the layout in ``Project.settings``.
SETTINGS_KEY = "results_file"
#: Width of row-number exp_ids (fieldkit's).
ID_WIDTH = 3


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """The column mapping flags of ``lineage import`` (all optional)."""

    id_column: str | None = None
    #: a column name (or 1-based number); in a long-format file also one of the names in
    #: its metric-name column (``resolution_rate``)
    metric: str | None = None
    #: a column name; ``"-"``: the file has no status column
    status: str | None = None
    description: str | None = None
    parent: str | None = None
    lower_is_better: bool | None = None
    status_map: Mapping[str, str] = field(default_factory=dict)
    #: the names of the columns of a file without a header line (``--columns a,b,c``):
    #: its first line is data; given as a tuple, a list or ``"a,b,c"`` (see
    #: :func:`parse_columns`). A first line that is these very names is the header.
    columns: Sequence[str] | None = None

    def __post_init__(self) -> None:
        if self.columns is not None:
            object.__setattr__(self, "columns", parse_columns(self.columns) or None)

    @classmethod
    def from_text(
        cls,
        *,
        id_column: str | None = None,
        metric: str | None = None,
        status: str | None = None,
        description: str | None = None,
        parent: str | None = None,
        direction: str | None = None,
        status_map: str | Sequence[str] | None = None,
        columns: str | Sequence[str] | None = None,
    ) -> ImportOptions:
        """The options as every face receives them, as text (the command line, a query
        string, a form): a blank value is not given; ``direction`` is one of
        :data:`DIRECTIONS` (``lower``, ``higher``, ``infer``); ``status_map`` is
        ``WORD=LABEL,...`` (or several such); ``columns`` is ``NAME,NAME,...``. A bad value
        is an :class:`InvalidInput` naming its field."""
        from lineage.formats.autoresearch.vocabulary import parse_status_map

        def given(value: str | None) -> str | None:
            return value.strip() if value is not None and value.strip() else None

        maps = [status_map] if isinstance(status_map, str) else list(status_map or ())
        names = [columns] if isinstance(columns, str) else list(columns or ())
        return cls(
            id_column=given(id_column),
            metric=given(metric),
            status=given(status),
            description=given(description),
            parent=given(parent),
            lower_is_better=direction_flag(direction),
            status_map=parse_status_map([m for m in maps if m.strip()]),
            columns=[c for c in names if c.strip()] or None,
        )

    def to_text(self) -> dict[str, str]:
        """The given options as :meth:`from_text` reads them (keys: ``id``, ``metric``,
        ``status``, ``description``, ``parent``, ``direction``, ``status_map``,
        ``columns``): the query of an HTTP import of the same file."""
        words = {True: "lower", False: "higher"}
        out = {
            "id": self.id_column,
            "metric": self.metric,
            "status": self.status,
            "description": self.description,
            "parent": self.parent,
            "direction": words[self.lower_is_better] if self.lower_is_better is not None else None,
            "status_map": ",".join(f"{word}={label}" for word, label in self.status_map.items()) or None,
            "columns": ",".join(self.columns) if self.columns else None,
        }
        return {key: value for key, value in out.items() if value}


#: The directions a face offers, and the flag each is: ``infer`` lets the file decide.
DIRECTIONS: dict[str, bool | None] = {"infer": None, "lower": True, "higher": False}


def direction_flag(word: str | None) -> bool | None:
    """``lower`` -> True, ``higher`` -> False, ``infer`` (or nothing) -> None; anything
    else is an :class:`InvalidInput` naming the field ``direction``."""
    if word is None or not word.strip():
        return None
    key = word.strip().lower()
    if key not in DIRECTIONS:
        raise InvalidInput("direction", f"must be one of {', '.join(DIRECTIONS)}, got {word!r}")
    return DIRECTIONS[key]


def parse_columns(text: str | Sequence[str] | None) -> tuple[str, ...]:
    """``"commit,model,score"`` (or a list of names, or of such texts) -> the column names;
    :class:`InvalidInput` (field ``columns``) for an empty or repeated name."""
    if not text:
        return ()
    items = [text] if isinstance(text, str) else list(text)
    names = tuple(name.strip() for item in items for name in str(item).split(","))
    for i, name in enumerate(names):
        if not name:
            raise InvalidInput("columns", f"name {i + 1} is empty (give the names as NAME,NAME,...)")
        if name in names[:i]:
            raise InvalidInput("columns", f"{name!r} is named twice")
    return names


@dataclass
class Layout:
    """How a results file is laid out: what export needs to write it back and what
    watch needs to read more of it. Stored as a dict in ``project.settings["results_file"]``."""

    columns: list[str]
    metric: str
    format: str = NAME
    delimiter: str = "\t"
    has_header: bool = True
    #: the exact text up to and including the header line (BOM, blank lines before it)
    header_text: str = ""
    newline: str = "\n"
    #: text after the last row (a summary, a box-drawn table), written back after the rows
    trailer: str = ""
    status: str | None = None
    description: str | None = None
    id_column: str | None = None
    parent: str | None = None
    commit: str | None = None
    #: column -> trial field it fills (``timestamp``, ``notes``, ``val_bpb``...)
    fields: dict[str, str] = field(default_factory=dict)
    #: columns whose cells are stored as numbers in ``extra``
    numeric: list[str] = field(default_factory=list)
    #: column -> [decimals or None (shortest repr), suffix] for writing new rows
    formats: dict[str, list[Any]] = field(default_factory=dict)
    status_map: dict[str, str] = field(default_factory=dict)
    #: label -> the word this file uses for it (new rows are written in the file's words)
    words: dict[str, str] = field(default_factory=dict)
    #: how a crash-like row without a metric writes its metric cell
    placeholder: str = ""
    #: ``[first_row, first_number]``: row ``i`` is exp_id ``first_number + i - first_row``
    #: of the last segment with ``first_row <= i`` (a truncated file starts a new segment)
    segments: list[list[int]] = field(default_factory=lambda: [[0, 0]])
    id_width: int = ID_WIDTH
    #: the usual length of a commit hash in the file (to split two rows glued on one line)
    commit_length: int = 7
    #: long format: the column naming each row's metric (the ``metric`` column holds the
    #: values), and the name that is the project's metric; rows of other names are
    #: trials without a metric, their value cell kept as written in ``extra``
    long_names: str | None = None
    long_metric: str | None = None

    # derived, not stored
    def __post_init__(self) -> None:
        self._index = {name: i for i, name in enumerate(self.columns)}

    def index(self, name: str | None) -> int:
        return -1 if name is None else self._index.get(name, -1)

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if not k.startswith("_")}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Layout:
        known = {f for f in cls.__dataclass_fields__ if not f.startswith("_")}
        return cls(**{k: v for k, v in dict(data).items() if k in known})

    def exp_id(self, row: int) -> str:
        first_row, number = 0, 0
        for start, base in self.segments:
            if start <= row:
                first_row, number = start, base
        return str(number + row - first_row).zfill(self.id_width)

    @property
    def metric_name(self) -> str:
        """The project's metric: the metric column, or in a long-format file the name."""
        return self.long_metric if self.long_metric is not None else self.metric

    def role_columns(self) -> set[str]:
        """The columns with a role (metric, status, description, id, commit, parent,
        long-format names, trial fields): the rest are the file's other columns, kept in
        ``extra`` (shown by the loop's prompt, read as knobs by ``lineage.knobs.columns``)."""
        named = {
            self.metric,
            self.status,
            self.description,
            self.id_column,
            self.commit,
            self.parent,
            self.long_names,
            *self.fields,
        }
        return {name for name in named if name}

    def extra_key(self, column: str) -> str:
        return f"col:{column}" if column in RESERVED_KEYS else column

    @property
    def is_csv(self) -> bool:
        return self.delimiter == ","


def default_layout(metric_name: str = "val_bpb") -> Layout:
    """karpathy/autoresearch's own header, for a project that has no file yet."""
    columns = ["commit", metric_name, "memory_gb", "status", "description"]
    return Layout(
        columns=columns,
        metric=metric_name,
        header_text="\t".join(columns) + "\n",
        status="status",
        description="description",
        commit="commit",
        numeric=["memory_gb"],
        formats={metric_name: [6, ""], "memory_gb": [1, ""]},
        placeholder="0.000000",
    )


def format_number(value: Any, spec: Sequence[Any] | None) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return str(value)
    decimals, suffix = (spec or [None, ""])[0], (spec or [None, ""])[1]
    if isinstance(value, int) and decimals in (None, 0):
        return f"{value}{suffix}"
    if decimals is None:
        return f"{value!r}{suffix}" if isinstance(value, float) else f"{value}{suffix}"
    return f"{float(value):.{decimals}f}{suffix}"
