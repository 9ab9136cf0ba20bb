"""pytest plugin: the ``graphcheck`` fixture (entry point ``pytest11``, loaded automatically).

.. code-block:: python

    def test_my_model_survives_sleep(graphcheck):
        result = graphcheck.check_graph_replay(build_model, lambda m: {"x": torch.ones(4, 8)})
        result.assert_clean()

The fixture gives :func:`graphcheck.testing.check_graph_replay`,
:func:`graphcheck.capture`, :class:`graphcheck.WeightsArena` and the census
through one object, and after the test checks that nothing was left installed
(torch's CPU allocator is the one the test started with). Loading the plugin
imports neither torch nor the compiled modules: only a test that uses the
fixture does (hence the imports inside the methods). The fixture's type is public as
``graphcheck.GraphcheckFixture``, for annotations::

    def test_my_model(graphcheck: GraphcheckFixture) -> None: ...
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

__all__ = ["GraphcheckFixture", "graphcheck"]

if TYPE_CHECKING:
    import torch

    from graphcheck._capture import Capture
    from graphcheck._census import Census
    from graphcheck.arena import WeightsArena
    from graphcheck.testing import GraphReplayResult


class GraphcheckFixture:
    """What the ``graphcheck`` fixture gives a test. Not thread-safe (one per test).

    Made by the fixture; lives for one test.
    """

    def check_graph_replay(
        self,
        factory: Callable[[], torch.nn.Module],
        make_inputs: Callable[[torch.nn.Module], Any],
        **options: Any,
    ) -> GraphReplayResult:
        """:func:`graphcheck.testing.check_graph_replay` (same arguments)."""
        from graphcheck.testing import check_graph_replay

        return check_graph_replay(factory, make_inputs, **options)

    def capture(self, model: torch.nn.Module, *args: Any, **kwargs: Any) -> Capture:
        """:func:`graphcheck.capture` (same arguments)."""
        from graphcheck._capture import capture

        return capture(model, *args, **kwargs)

    def arena(self, *args: Any, **kwargs: Any) -> WeightsArena:
        """A new :class:`graphcheck.WeightsArena` (same arguments)."""
        from graphcheck.arena import WeightsArena

        return WeightsArena(*args, **kwargs)

    def census(self, model: torch.nn.Module, *, allow: Iterable[str] = ()) -> Census:
        """:func:`graphcheck.census` of ``model``."""
        from graphcheck._census import census

        return census(model, allow=allow)


@pytest.fixture
def graphcheck() -> Iterator[GraphcheckFixture]:
    """Capture, check, sleep/wake and the graph-replay helper for one test.

    Fails the test at teardown if torch's CPU allocator is not the one it
    started with (a weights arena's loading scope left open).
    """
    import torch  # noqa: F401  (loads libtorch_python, which graphcheck._torch links)

    from graphcheck import _torch

    before = _torch.cpu_allocator()
    yield GraphcheckFixture()
    after = _torch.cpu_allocator()
    assert after == before, (
        "graphcheck fixture: torch's CPU allocator was not restored after the test (a "
        "WeightsArena loading scope is still open); use `with arena.loading():`"
    )
