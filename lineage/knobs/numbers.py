"""Knob values as numbers: ``3e-4``, ``2**19``, ``512K``, ``1_000``, ``2^10``, ``64 * 1024``.

Pure and bounded: an expression is read with :mod:`ast` (numbers and ``+ - * / **`` only,
exponents of at most :data:`MAX_EXPONENT`), never evaluated as code.
"""

from __future__ import annotations

import ast
import math
import operator
import re
from collections.abc import Callable
from functools import lru_cache

__all__ = ["MAX_EXPONENT", "NUMBER_PATTERN", "parse_number", "same_value"]

#: the largest exponent an expression may raise to (``2**64``): bigger is no knob value
MAX_EXPONENT = 64
#: the longest text read as a number (a knob value, not a table of them)
_MAX_CHARS = 60

#: a number as people write knob values, for larger patterns: ``3e-4``, ``0.04``,
#: ``2**19``, ``2^19``, ``512K``, ``64*1024``, ``1,000`` (no unit words)
NUMBER_PATTERN = (
    r"[-+]?(?:\d+(?:,\d{3}(?!\d)|_\d+)*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?"
    r"(?:\s*(?:\*\*|\^|\*|/)\s*[-+]?(?:\d+(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)*[kKmMbBgG]?(?!\w|\.\d)"
)
_PLAIN = re.compile(r"^[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?$")
_SUFFIX = {"k": 1e3, "m": 1e6, "b": 1e9, "g": 1e9}
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_OPERATORS: dict[type, Callable[[float, float], float]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.Pow: operator.pow,
}


@lru_cache(maxsize=4096)  # a loop writes the same few values again and again
def parse_number(text: str) -> float | None:
    """``text`` as a finite number, or None when it is not one (a word, a string, code)."""
    text = text.strip().strip("\"'")
    if not text or len(text) > _MAX_CHARS:
        return None
    scale = 1.0
    if text[-1] in "kKmMbBgG" and len(text) > 1 and (text[-2].isdigit() or text[-2] == "."):
        scale = _SUFFIX[text[-1].lower()]
        text = text[:-1]
    text = _THOUSANDS.sub("", text).replace("_", "").replace("^", "**")
    if _PLAIN.match(text):  # most values: no expression to read (float() is ~20x cheaper than ast)
        plain = float(text) * scale
        return plain if math.isfinite(plain) else None
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError):
        return None
    try:
        value = _value(tree.body)
    except (ArithmeticError, ValueError):
        return None
    if value is None or not math.isfinite(value * scale):
        return None
    return value * scale


def _value(node: ast.expr) -> float | None:
    if isinstance(node, ast.Constant):
        value = node.value
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return float(value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        inner = _value(node.operand)
        if inner is None:
            return None
        return -inner if isinstance(node.op, ast.USub) else inner
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        left, right = _value(node.left), _value(node.right)
        if left is None or right is None:
            return None
        if isinstance(node.op, ast.Pow) and (abs(right) > MAX_EXPONENT or abs(left) > 2**MAX_EXPONENT):
            return None
        return float(_OPERATORS[type(node.op)](left, right))
    return None


def same_value(a: str | None, b: str | None) -> bool:
    """Whether two written values are one value: equal numbers (``2**19`` and ``524288``)
    or equal text once quotes and case are set aside."""
    if a is None or b is None:
        return a is b
    x, y = parse_number(a), parse_number(b)
    if x is not None and y is not None:
        return math.isclose(x, y, rel_tol=1e-12, abs_tol=0.0)
    return a.strip().strip("\"'").casefold() == b.strip().strip("\"'").casefold()
