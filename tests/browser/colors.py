"""Whether the page's finding colors stay apart for common color blindness.

Each color is simulated for protanopia, deuteranopia and tritanopia (Machado, Oliveira and
Fernandes 2009, severity 1: a matrix on linear RGB) and compared in CIELAB (Euclidean distance,
D65): two finding verdicts must differ by at least MIN_DISTANCE under normal vision and under
each simulation. The previous palette (red, pink, brown, orange) came to 8 under tritanopia.
"""

from __future__ import annotations

import itertools
import math

MIN_DISTANCE = 30.0
SIMULATIONS = {
    "normal vision": ((1, 0, 0), (0, 1, 0), (0, 0, 1)),
    "protanopia": (
        (0.152286, 1.052583, -0.204868),
        (0.114503, 0.786281, 0.099216),
        (-0.003882, -0.048116, 1.051998),
    ),
    "deuteranopia": (
        (0.367322, 0.860646, -0.227968),
        (0.280085, 0.672501, 0.047413),
        (-0.011820, 0.042940, 0.968881),
    ),
    "tritanopia": (
        (1.255528, -0.076749, -0.178779),
        (-0.078411, 0.930809, 0.147602),
        (0.004733, 0.691367, 0.303900),
    ),
}


def _linear(channel: int) -> float:
    c = channel / 255
    return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4


def _lab(rgb: list[float]) -> tuple[float, float, float]:
    r, g, b = rgb
    x = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047
    y = 0.2126 * r + 0.7152 * g + 0.0722 * b
    z = (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883

    def f(t: float) -> float:
        return t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116

    return (116 * f(y) - 16, 500 * (f(x) - f(y)), 200 * (f(y) - f(z)))


def seen(color: str, matrix: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    """``#rrggbb`` as CIELAB, as someone with the simulated vision sees it."""
    rgb = [_linear(int(color[i : i + 2], 16)) for i in (1, 3, 5)]
    simulated = [min(1.0, max(0.0, sum(row[k] * rgb[k] for k in range(3)))) for row in matrix]
    return _lab(simulated)


def color_problems(colors: dict[str, str]) -> list[str]:
    """Pairs of ``colors`` (name -> #rrggbb) closer than MIN_DISTANCE under some vision."""
    problems = []
    for vision, matrix in SIMULATIONS.items():
        for (a, ca), (b, cb) in itertools.combinations(sorted(colors.items()), 2):
            distance = math.dist(seen(ca, matrix), seen(cb, matrix))
            if distance < MIN_DISTANCE:
                problems.append(
                    f"{a} ({ca}) and {b} ({cb}) differ by {distance:.1f} under {vision} "
                    f"(at least {MIN_DISTANCE:.0f})"
                )
    return problems
