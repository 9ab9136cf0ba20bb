"""The CPU weights arena: sleep and wake for Python models on any CPU machine.

A :class:`WeightsArena` stands in for the engines' tagged "weights" memory
pool (vLLM's sleep mode): a model built inside :meth:`WeightsArena.loading`
takes all its CPU memory from one reserved address range, labelled with the
Python frame that allocated it. :meth:`WeightsArena.sleep` discards the
arena's pages (the addresses stay valid) after copying aside what the level
keeps; :meth:`WeightsArena.wake_up` fills the discarded pages with 0xFF (NaN
in float tensors, so zeros cannot look right by accident), restores the
copies, and gives every allocation not restored whole a new generation. A
capture (:func:`graphcheck.capture`) of a model that lives in an arena sees
the arena's allocations with their pool and generation, so a graph that reads
memory that sleep discarded and nothing restored is ``lost``.

The arena is the C++ ``graphcheck::libtorch::WeightsArena`` (docs/torch.md),
from the compiled module ``graphcheck._torch``; importing this module imports
torch.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Iterator

import torch

from graphcheck import _core, _torch
from graphcheck._errors import GraphcheckTypeError, GraphcheckValueError
from graphcheck._utils import internal_prefixes, named_storage_leaves, storage_leaves

__all__ = ["DEFAULT_CAPACITY", "WeightsArena", "arena_of"]

#: Address space a :class:`WeightsArena` reserves by default: 64 GiB. Only
#: reserved (``PROT_NONE``); pages are committed as allocations need them.
DEFAULT_CAPACITY = 1 << 36

# Every arena alive, for capture() to find the one a model was loaded into.
_ARENAS: weakref.WeakSet[WeightsArena] = weakref.WeakSet()


def _tensors(model: torch.nn.Module) -> Iterator[torch.Tensor]:
    yield from model.parameters()
    yield from model.buffers()


class WeightsArena:
    """A CPU memory pool for model weights with vLLM's sleep levels.

    ``capacity`` bytes of address space are reserved (nothing is committed
    until used; first fit, 64-byte alignment); ``pool`` names the arena's
    allocations in epochs. An allocation beyond the capacity raises
    :class:`graphcheck.GraphcheckError`.

    Lifetime: allocations outlive :meth:`loading` and may outlive the arena
    object (the mapping is released with the last of them). Freeing a tensor
    returns its block to the arena at any time, also while asleep.

    Thread safety: :meth:`loading` installs the arena as torch's CPU allocator
    for the whole process (torch's CPU allocator is global): while a loading
    scope is open, every CPU tensor any thread allocates comes from the arena
    (only threads that run Python get a Python allocation site). Scopes of one
    or several arenas nest when exited in reverse order, which ``with`` does.
    :meth:`sleep` and :meth:`wake_up` must not race with threads that use the
    model's tensors.
    """

    def __init__(self, capacity: int = DEFAULT_CAPACITY, *, pool: str = "weights") -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity <= 0:
            raise GraphcheckValueError(
                f"WeightsArena: capacity must be a positive int, got {capacity!r}"
            )
        if not isinstance(pool, str) or not pool:
            raise GraphcheckValueError(f"WeightsArena: pool must be a non-empty str, got {pool!r}")
        self._native = _torch.WeightsArena(capacity, pool, internal_prefixes())
        self._pool = pool
        _ARENAS.add(self)

    def __repr__(self) -> str:
        state = "asleep" if self.asleep else "awake"
        return (
            f"<WeightsArena pool={self._pool!r} {state} used={self.used} "
            f"capacity={self.capacity} at {_core.format_address(self.begin)}>"
        )

    @contextlib.contextmanager
    def loading(self) -> Iterator[WeightsArena]:
        """Allocate every CPU tensor from the arena while the ``with`` block runs.

        ``with arena.loading(): model = build()`` puts the model's weights and
        everything else its loading allocates on the CPU in the arena, each
        allocation labelled with the Python frame that made it (``file:line in
        function``: the innermost frame outside torch and graphcheck's machinery, the rule of
        ``graphcheck._utils.internal_prefixes``; graphcheck.reference's frames are sites). The
        previous allocator is restored on exit, also when the block raises.
        Raises :class:`graphcheck.GraphcheckError` while the arena sleeps.
        """
        self._native.enter_loading()
        try:
            yield self
        finally:
            self._native.exit_loading()

    def sleep(self, level: int, model: torch.nn.Module | None = None) -> None:
        """Discard the arena's pages, keeping what ``level`` keeps.

        Level 1 keeps a copy of every live allocation (wake restores them all,
        generations unchanged). Level 2 keeps the storages of ``model``'s
        registered buffers (``named_buffers()``) that lie in the arena, and
        nothing else: parameters and unregistered tensors read 0xFF after
        :meth:`wake_up` until reloaded. ``model`` is required for level 2.
        While asleep the tensors' bytes read as zeros; do not use the model.
        Raises :class:`graphcheck.GraphcheckError` when already asleep or while
        a loading scope is open.
        """
        if isinstance(level, bool) or level not in (1, 2):
            raise GraphcheckValueError(f"WeightsArena.sleep: level must be 1 or 2, got {level!r}")
        if model is not None and not isinstance(model, torch.nn.Module):
            got = type(model).__qualname__
            raise GraphcheckTypeError(
                f"WeightsArena.sleep: model must be a torch.nn.Module, got {got}"
            )
        if level == 2 and model is None:
            raise GraphcheckTypeError(
                "WeightsArena.sleep(2, model): level 2 keeps the model's registered buffers; "
                "pass the model"
            )
        buffers = [] if model is None else named_storage_leaves(model.named_buffers())
        self._native.sleep(level, buffers)

    def wake_up(self) -> None:
        """Fill the discarded pages with 0xFF and restore what sleep kept.

        Every allocation not restored whole gets a new generation. Raises
        :class:`graphcheck.GraphcheckError` when the arena is not asleep.
        """
        self._native.wake_up()

    def allocations(self) -> list[_core.Allocation]:
        """The live allocations, by address: pool, generation and allocation site."""
        return self._native.allocations()

    def contains(self, what: int | torch.Tensor) -> bool:
        """Whether an address, or a tensor's storage, lies in the arena's range."""
        if isinstance(what, torch.Tensor):
            if what.device.type != "cpu" or what.is_meta:
                return False
            what = what.untyped_storage().data_ptr()
        return bool(self._native.contains(int(what)))

    def holds(self, model: torch.nn.Module) -> bool:
        """Whether any parameter or buffer of ``model`` lives in the arena."""
        return any(
            self.contains(leaf) for t in _tensors(model) for _, leaf in storage_leaves("", t)
        )

    @property
    def asleep(self) -> bool:
        """True between :meth:`sleep` and :meth:`wake_up`."""
        return bool(self._native.asleep)

    @property
    def pool(self) -> str:
        """The pool name of the arena's allocations in epochs."""
        return self._pool

    @property
    def begin(self) -> int:
        """The first address of the reserved range."""
        return int(self._native.begin)

    @property
    def capacity(self) -> int:
        """Reserved bytes (the capacity rounded up to pages)."""
        return int(self._native.capacity)

    @property
    def used(self) -> int:
        """Bytes allocated now (sum of the live allocations' sizes)."""
        return int(self._native.used)


def arena_of(model: torch.nn.Module) -> WeightsArena | None:
    """The live :class:`WeightsArena` holding any of ``model``'s parameters or buffers."""
    for arena in list(_ARENAS):
        if arena.holds(model):
            return arena
    return None
