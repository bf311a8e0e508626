"""What a ``wandb.log`` dictionary and a ``wandb.config`` become in the ledger.

Logged values (:func:`flatten_into`)
    Nested mappings are flattened with ``/`` (``{"val": {"loss": 1}}`` -> ``val/loss``).
    A value is kept when it is a number: ``int``, ``float``, ``bool`` (0 or 1), a numpy
    scalar or 0-d array, anything else registered as ``numbers.Real``, or a 0-dim tensor
    (kept as the tensor; all tensors of one step are converted together, one device sync).
    Everything else (strings, lists, ``None``, images, tables, histograms, tensors with
    more than one element) is skipped, and so is a key the ledger would refuse as a
    telemetry name (over 200 characters, control characters); each skipped key is named
    in one warning, the first time. NaN and infinities are kept here and left out by the
    client (which counts them), as any non-finite telemetry value is.

Config values (:func:`json_value`)
    Config and summary text goes into the trial's ``extra`` as JSON: numbers, strings,
    booleans, ``None``, lists and mappings are kept (tuples become lists, keys become
    strings); a numpy scalar becomes its number; anything else (a path, an enum, a
    dtype) becomes its ``str``. Non-finite floats become their ``str`` (JSON has none).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

from trainer_hooks.client.points import check_name

__all__ = ["NOT_A_NUMBER", "config_items", "flatten_into", "json_value", "scalar"]

#: what :func:`scalar` returns for a value that is not a number
NOT_A_NUMBER = object()


def scalar(value: Any) -> Any:
    """``value`` as a float, the 0-dim tensor itself, or :data:`NOT_A_NUMBER`."""
    if isinstance(value, numbers.Real):  # numpy registers its scalars here
        return float(value)
    if hasattr(value, "detach"):  # a torch tensor, without importing torch
        return value if getattr(value, "ndim", None) == 0 else NOT_A_NUMBER
    if getattr(value, "shape", None) == () and hasattr(value, "item"):  # a 0-d numpy array
        item = value.item()
        return float(item) if isinstance(item, numbers.Real) else NOT_A_NUMBER
    return NOT_A_NUMBER


def flatten_into(
    out: dict[str, Any], data: Mapping[Any, Any], prefix: str, names: set[str], skipped: Callable[[str], None]
) -> None:
    """Put the numeric entries of ``data`` into ``out`` under their flattened names (module
    doc); ``names`` caches the names already checked; ``skipped(name)`` hears of every
    entry left out."""
    for key, value in data.items():
        name = key if type(key) is str else str(key)
        if prefix:
            name = f"{prefix}/{name}"
        kind = type(value)
        if kind is float or kind is int:
            pass
        elif kind is dict or isinstance(value, Mapping):
            flatten_into(out, value, name, names, skipped)
            continue
        else:
            value = scalar(value)
            if value is NOT_A_NUMBER:
                skipped(name)
                continue
        if name not in names:
            try:
                check_name(name)
            except ValueError:
                skipped(name)
                continue
            names.add(name)
        out[name] = value


def json_value(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data (module doc)."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if depth > 20:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): json_value(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [json_value(v, depth + 1) for v in value]
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return json_value(float(value), depth + 1)
    if getattr(value, "shape", None) == () and hasattr(value, "item"):
        return json_value(value.item(), depth + 1)
    return str(value)


def config_items(source: Any) -> dict[str, Any]:
    """The ``key -> value`` pairs of what a script hands to ``config``: a mapping, an
    ``argparse.Namespace`` or any object with attributes (absl flags: their values)."""
    if source is None:
        return {}
    if isinstance(source, Mapping):
        return {str(k): v for k, v in source.items()}
    flag_values = getattr(source, "flag_values_dict", None)  # absl.flags.FLAGS
    if callable(flag_values):
        return dict(flag_values())
    try:
        return {k: v for k, v in vars(source).items() if not k.startswith("_")}
    except TypeError:
        raise TypeError(f"config must be a mapping or an object with attributes, got {type(source).__name__}") from None
