"""Memory torch does not own: handles to native objects and the emptied parameters they replace.

vLLM's CPU backend packs a dense linear layer's weight into a oneDNN matmul
primitive (``vllm._custom_ops.create_onednn_mm``): the primitive lives in
oneDNN's memory, and the layer keeps only a pointer to it, stored in a 0-d
int64 tensor (``CPUDNNLGEMMHandler.handler_tensor``) held by a closure
(``layer.cpu_linear``); the weight Parameter is replaced by an empty ``(0,)``
tensor (``dispatch_cpu_unquantized_gemm`` in
``vllm/model_executor/layers/utils.py``). A census sees an 8-byte tensor and a
registered parameter that holds nothing, both of which look harmless; what they
stand for is the layer's real weights, outside every registry: sleep cannot
discard or restore them, a reload must repack them (and frees the primitive a
captured graph points to).

:func:`split_foreign` takes those out of a census' findings and describes each
as its own kind (:data:`HANDLE`, :data:`EMPTIED`); everything else stays an
ordinary finding. A handle is recognised by what it is (a 0-d 64-bit integer whose
value is an address in the process's native heap), never by its name. The vLLM zoo
reports them so; the vLLM plugin's CPU mode puts :func:`foreign_notes` into its check
points. Plain functions of their arguments.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

__all__ = [
    "EMPTIED",
    "HANDLE",
    "KNOWN_HANDLES",
    "emptied_parameters",
    "foreign_notes",
    "native_mapping",
    "split_foreign",
]

#: A tensor whose bytes are a pointer to memory outside torch.
HANDLE = "foreign_handle"
#: A registered parameter emptied because its values were moved outside torch.
EMPTIED = "emptied_parameter"

_ONEDNN = (
    "a pointer to a oneDNN matmul primitive that holds the layer's weights packed in "
    "oneDNN's own memory (vllm._custom_ops.create_onednn_mm / create_onednn_scaled_mm, "
    "called by process_weights_after_loading)"
)

#: Holder class (module.qualname) -> what its handle tensor points to.
KNOWN_HANDLES = {"vllm._custom_ops.CPUDNNLGEMMHandler": _ONEDNN}

_HANDLE_FIX = (
    "the weights behind it live outside every torch registry: sleep cannot discard or "
    "restore them, and a reload must repack them (a new primitive is made and this one "
    "freed, so a graph captured before the reload keeps a dangling pointer); register the "
    "packed weights as a torch tensor the layer owns (a buffer) and pack into it in place, "
    "or recapture after every reload"
)
_EMPTIED_FIX = (
    "named_parameters() lists it but it holds no weights: tools that sleep, offload or "
    "reload by parameter see nothing to move; the real weights are held by {handle}, outside "
    "the registry"
)


def native_mapping(value: int) -> str:
    """The mapping of this process that holds the address ``value``, or ``""``.

    Only writable private memory that no file backs counts (the C heap, anonymous
    ``mmap``): where a native library keeps the objects it allocates. Read from
    ``/proc/self/maps``; ``""`` where the process has none (not Linux).
    """
    if value <= 0:
        return ""
    try:
        with open("/proc/self/maps", encoding="ascii", errors="replace") as maps:
            for line in maps:
                fields = line.split(maxsplit=5)
                begin, _, end = fields[0].partition("-")
                if not int(begin, 16) <= value < int(end, 16):
                    continue
                perms, name = fields[1], (fields[5].strip() if len(fields) > 5 else "")
                if "w" not in perms or "p" not in perms:
                    return ""
                if name and not (name == "[heap]" or name.startswith("[anon")):
                    return ""
                return name or "anonymous memory"
    except (OSError, ValueError, IndexError):
        return ""
    return ""


def _tensor_at(model: Any, path: str) -> Any:
    holder = _holder(model, path)
    if holder is None:
        return None
    name = path.rsplit(".", 1)[-1]
    if name in getattr(holder, "__dict__", {}) or hasattr(holder, name):
        return getattr(holder, name, None)
    return None


def _torch_spans(model: Any) -> list[tuple[int, int]]:
    """The storage spans of ``model``'s parameters and buffers (what torch owns of it)."""
    spans = []
    for tensor in (*model.parameters(), *model.buffers()):
        storage = tensor.untyped_storage()
        if storage.nbytes():
            spans.append((storage.data_ptr(), storage.data_ptr() + storage.nbytes()))
    return spans


def _is_handle(finding: dict[str, Any], model: Any, spans: list[tuple[int, int]]) -> str:
    """What the finding's tensor points to, or ``""`` when it is not a handle.

    Decided by what the tensor is, never by its name: a 0-d 64-bit integer whose value
    is an address in this process's native heap, outside every storage of the model.
    """
    if finding.get("shape") or finding.get("dtype") not in ("int64", "uint64"):
        return ""
    tensor = _tensor_at(model, str(finding.get("path", "")))
    if tensor is None or getattr(tensor, "is_meta", True) or tensor.dim() != 0:
        return ""
    value = int(tensor.item()) & ((1 << 64) - 1)
    mapping = native_mapping(value)
    if not mapping or any(begin <= value < end for begin, end in spans):
        return ""
    owner = str(finding.get("site", {}).get("owner", ""))
    if owner in KNOWN_HANDLES:
        return KNOWN_HANDLES[owner]
    attribute = str(finding.get("site", {}).get("attribute", ""))
    return (
        f"an integer that {owner}.{attribute} keeps as a tensor, whose value {value:#x} is an "
        f"address in this process's {mapping}, outside every tensor of the model: a pointer "
        "to a native object whose memory torch does not own"
    )


def split_foreign(
    findings: Iterable[dict[str, Any]], model: Any
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(ordinary, handles)``: the census findings of ``model``, handle tensors described apart.

    A handle is a 0-d 64-bit integer tensor whose value points into this process's native
    heap, outside the model's storages (:func:`native_mapping`); a holder class of
    :data:`KNOWN_HANDLES` says what it points to. Each handle gets ``kind``
    (:data:`HANDLE`), ``what`` and ``fix``.
    """
    spans = _torch_spans(model)
    ordinary: list[dict[str, Any]] = []
    handles: list[dict[str, Any]] = []
    for finding in findings:
        what = _is_handle(finding, model, spans)
        if what:
            handles.append({**finding, "kind": HANDLE, "what": what, "fix": _HANDLE_FIX})
        else:
            ordinary.append(finding)
    return ordinary, handles


def emptied_parameters(model: Any, holder_paths: Iterable[str]) -> list[dict[str, Any]]:
    """Registered parameters with no elements (``(0,)``) in a module that holds their values.

    vLLM empties ``layer.weight`` once the weights are packed outside the registry: behind a
    native handle (oneDNN, :func:`split_foreign`'s handles) or into a tensor its closure keeps
    (the AMX sgl kernels' ``cpu_linear.packed_weight``, a census finding). A parameter is
    reported when its module holds one of ``holder_paths`` itself (not through a child
    module); the report names the first.
    """
    handles = list(holder_paths)
    found = []
    for path, module in model.named_modules():
        prefix = f"{path}." if path else ""
        children = tuple(f"{prefix}{child}." for child, _ in module.named_children())
        # This module's own handles: under its prefix, not under a child module's.
        mine = [h for h in handles if h.startswith(prefix) and not h.startswith(children)]
        if not mine:
            continue
        for name, parameter in module._parameters.items():
            if parameter is None or parameter.numel() != 0 or parameter.is_meta:
                continue
            found.append(
                {
                    "path": prefix + name,
                    "shape": list(parameter.shape),
                    "dtype": str(parameter.dtype).removeprefix("torch."),
                    "nbytes": 0,
                    "kind": EMPTIED,
                    "what": f"the registered parameter {prefix + name} of "
                    f"{type(module).__qualname__}, emptied to {tuple(parameter.shape)}",
                    "fix": _EMPTIED_FIX.format(handle=mine[0]),
                }
            )
    return found


def _holder(model: Any, path: str) -> object | None:
    """The object that holds the last attribute of a census ``path`` (closure cells followed)."""
    obj: object | None = model
    for part in path.split(".")[:-1]:
        if obj is None or "[" in part:
            return None
        nxt = getattr(obj, part, None)
        if nxt is None:  # a closure cell, named by its variable (the census path grammar)
            code, cells = getattr(obj, "__code__", None), getattr(obj, "__closure__", None)
            names = getattr(code, "co_freevars", ())
            nxt = next(
                (c.cell_contents for n, c in zip(names, cells or (), strict=False) if n == part),
                None,
            )
        obj = nxt
    return obj


def foreign_notes(model: Any, entries: Iterable[Any]) -> list[str]:
    """One line per kind of memory torch does not own, from a census's ``entries``.

    ``entries`` are :class:`graphcheck.CensusEntry` findings of ``model``; the lines name how
    many handles and emptied parameters there are, the first path of each, what they are and
    the fix (empty when there are none).
    """
    findings = []
    for entry in entries:
        holder = _holder(model, entry.path)
        owner = f"{type(holder).__module__}.{type(holder).__qualname__}" if holder else ""
        findings.append(
            {
                "path": entry.path,
                "shape": list(entry.shape),
                "dtype": str(entry.dtype).removeprefix("torch."),
                "site": {"owner": owner, "attribute": entry.path.rsplit(".", 1)[-1]},
            }
        )
    _, handles = split_foreign(findings, model)
    emptied = emptied_parameters(model, [f["path"] for f in findings])
    notes = []
    if handles:
        notes.append(
            f"memory torch does not own: {len(handles)} unregistered finding(s) are handles "
            f"(first: {handles[0]['path']}), each {handles[0]['what']}; fix: {_HANDLE_FIX}"
        )
    if emptied:
        notes.append(
            f"memory torch does not own: {len(emptied)} registered parameter(s) hold no "
            f"elements (first: {emptied[0]['path']}); {emptied[0]['fix']}"
        )
    return notes
