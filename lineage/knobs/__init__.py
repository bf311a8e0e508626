"""Knobs: what each trial changed (``extract``), as numbers (``numbers``).

Pure: nothing here imports the store; the store writes what :func:`extract_changes`
returns (``lineage.store.knobs``) and the Ledger's parts read it back.
"""

from lineage.knobs.extract import SOURCES, KnobChange, extract_changes, knob_name
from lineage.knobs.numbers import parse_number, same_value

__all__ = ["SOURCES", "KnobChange", "extract_changes", "knob_name", "parse_number", "same_value"]
