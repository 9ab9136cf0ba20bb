"""A minimal traceable wrapper tensor subclass (``__tensor_flatten__``), as TorchAO's
quantized tensors are: it has no storage of its own; its two inner tensors have."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils._pytree import tree_map


class TwoPartTensor(torch.Tensor):
    """Logical tensor ``data`` (quantized values) with a per-tensor ``scale``."""

    data_: torch.Tensor
    scale: torch.Tensor

    @staticmethod
    def __new__(cls, data: torch.Tensor, scale: torch.Tensor) -> TwoPartTensor:
        return torch.Tensor._make_wrapper_subclass(  # type: ignore[attr-defined]
            cls, data.shape, dtype=torch.float32, device=data.device
        )

    def __init__(self, data: torch.Tensor, scale: torch.Tensor) -> None:
        self.data_ = data
        self.scale = scale

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["data_", "scale"], None

    @staticmethod
    def __tensor_unflatten__(
        inner: dict[str, torch.Tensor], meta: None, outer_size: Any, outer_stride: Any
    ) -> TwoPartTensor:
        return TwoPartTensor(inner["data_"], inner["scale"])

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        # Enough for nn.Parameter (detach) and in-place copies between wrappers.
        if func in (torch.ops.aten.detach.default, torch.ops.aten.alias.default):
            (t,) = args
            return TwoPartTensor(func(t.data_), func(t.scale))
        if func is torch.ops.aten.copy_.default:
            dst, src = args
            dst.data_.copy_(src.data_)
            dst.scale.copy_(src.scale)
            return dst
        unwrapped = tree_map(lambda a: a.data_ * a.scale if isinstance(a, cls) else a, args)
        return func(*unwrapped, **(kwargs or {}))
