"""Shape checks at the entrance of the losses and estimators: a wrong shape is an error
naming the argument, never a silent broadcast.

The case that matters: a per-sequence advantage ``[B]`` given where a per-token ``[B, L]``
is expected would broadcast against ``[B, L]`` as a *row* (``A[j]`` on token ``j`` of every
sequence) whenever ``B == L`` — a wrong loss with no error.
"""

from __future__ import annotations

from torch import Tensor

__all__ = ["check_token_shapes", "token_advantages"]


def check_token_shapes(function: str, **tensors: Tensor | None) -> None:
    """Every given tensor is ``[B, L]`` and they all agree (None entries are skipped).

    Raises:
        ValueError: naming the function, the argument and the shapes seen.
    """
    expected = None
    first = ""
    for name, tensor in tensors.items():
        if tensor is None:
            continue
        shape = tuple(tensor.shape)
        if len(shape) != 2:
            raise ValueError(f"{function}: {name} must be [B, L], got {shape}")
        if expected is None:
            expected, first = shape, name
        elif shape != expected:
            raise ValueError(f"{function}: {name} {shape} must match {first} {expected} ([B, L])")


def token_advantages(function: str, advantages: Tensor, like: Tensor, *, per_sequence: bool = False) -> Tensor:
    """``advantages`` as ``[B, L]`` like ``like``.

    A ``[B]`` tensor is an error unless ``per_sequence=True`` (a loss that documents
    per-sequence advantages), which broadcasts it over each row's tokens explicitly.

    Raises:
        ValueError: naming ``advantages``, the shape seen and the one expected.
    """
    shape, target = tuple(advantages.shape), tuple(like.shape)
    if shape == target:
        return advantages
    if per_sequence and shape == target[:1]:
        return advantages[:, None].expand(target)
    hint = (
        "; a per-sequence advantage [B] must be expanded over the tokens first (advantages[:, None] * response_mask)"
        if shape == target[:1]
        else ""
    )
    raise ValueError(f"{function}: advantages must be [B, L] = {target}, got {shape}{hint}")
