"""The report's plots, drawn from stored results alone (matplotlib Figure objects, no pyplot).

- `convergence_figure`: log-log error against step or grid size, per series the levels
  used (filled), the dropped ones (crosses, with the reason in the legend), the fitted
  line C h^p over the used levels and its 95% band (slopes lo and hi through the fit's
  centre).
- `lines_figure`: quantities against depth or scale on log axes (rounding against depth,
  Lyapunov exponents, distances against weight scale).
- `map_figure`: a heat map over two parameters (stability maps).

Log axes label their ticks as matplotlib's scientific notation does, written in Unicode
(10⁻³, 2×10⁻³) instead of mathtext: parsing mathtext took 3.6 of the 12.6 s that drawing
the built-in study's report cost (`plain_log_label`).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from convergence.order import OrderEstimate
from reports.tables import slug

if TYPE_CHECKING:
    from matplotlib.figure import Figure as MplFigure


@dataclass
class Figure:
    """A named matplotlib figure of a report (saved as PNG and SVG, embedded in HTML)."""

    name: str
    caption: str
    figure: MplFigure


def time_step_series(label: str, convergence: Any) -> tuple:
    """(label, dt = 1/m per level, max-abs errors, order estimate) of one method's time-step
    refinement (any result with steps_per_unit, max_abs and estimate): a convergence series."""
    hs = [1 / m for m in convergence.steps_per_unit]
    return label, hs, convergence.max_abs, convergence.estimate


def named_lines_figure(
    title: str, caption: str, xlabel: str, ylabel: str, series: Sequence
) -> list[Figure]:
    """named_figure of a lines_figure of the series (none when there are no series)."""
    return named_figure(title, caption, series, lambda: lines_figure(title, xlabel, ylabel, series))


def named_figure(title: str, caption: str, series: Sequence, draw: Callable[[], MplFigure]) -> list:
    """[the Figure drawn by `draw`, named after `title`] when there are series, else []."""
    return [Figure(slug(title), caption, draw())] if series else []


SUPERSCRIPTS = str.maketrans("0123456789-", "⁰¹²³⁴⁵⁶⁷⁸⁹⁻")
"""Digits and the minus sign as Unicode superscripts (DejaVu Sans, matplotlib's font, has them)."""


def plain_log_label(mathtext: str) -> str:
    """The label a LogFormatterSciNotation writes in mathtext ($\\mathdefault{2\\times10^{-3}}$),
    as plain text (2×10⁻³)."""
    body = mathtext.removeprefix("$\\mathdefault{").removesuffix("}$")
    body = re.sub(r"\^\{(-?\d+)\}", lambda power: power.group(1).translate(SUPERSCRIPTS), body)
    return body.replace("\\times", "\N{MULTIPLICATION SIGN}")


def _log_axes(axes: Any, x: bool, y: bool) -> None:
    """Log scale on the chosen axes, their major and minor tick labels in plain text."""
    if x:
        axes.set_xscale("log")
    if y:
        axes.set_yscale("log")
    formatter = _plain_log_formatter()
    for axis in [a for a, chosen in ((axes.xaxis, x), (axes.yaxis, y)) if chosen]:
        axis.set_major_formatter(formatter())
        axis.set_minor_formatter(formatter(labelOnlyBase=False))  # as matplotlib's log scale


@functools.cache
def _plain_log_formatter() -> type:
    """LogFormatterSciNotation (its choice of ticks to label) writing plain_log_label; made
    when first drawn, as matplotlib is imported only then."""
    from matplotlib.ticker import LogFormatterSciNotation

    class PlainLogFormatter(LogFormatterSciNotation):
        def __call__(self, x: float, pos: int | None = None) -> str:
            return plain_log_label(super().__call__(x, pos))

    return PlainLogFormatter


def _axes(title: str, xlabel: str, ylabel: str) -> tuple[MplFigure, Any]:
    # matplotlib is imported when a report is drawn: the study's workers never need it
    from matplotlib.figure import Figure as MplFigure

    figure = MplFigure(figsize=(6.4, 4.4), layout="constrained")
    axes = figure.add_subplot()
    axes.set_title(title, fontsize=10)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.grid(True, which="both", alpha=0.3)
    return figure, axes


def convergence_figure(
    title: str,
    xlabel: str,
    series: Sequence[tuple[str, Sequence[float], Sequence[float], OrderEstimate | None]],
) -> MplFigure:
    """Each series is (label, hs, errors, order estimate), drawn with its fitted power law
    and 95% band; an estimate None (a spectrally converging series, which no power law
    fits) joins the points instead."""
    figure, axes = _axes(title, xlabel, "error")
    _log_axes(axes, x=True, y=True)
    for k, (label, hs, errors, estimate) in enumerate(series):
        color = f"C{k % 10}"
        h, e = np.asarray(hs, dtype=float), np.asarray(errors, dtype=float)
        if estimate is None:
            axes.plot(h[e > 0], e[e > 0], "o--", color=color, linewidth=1, label=label)
            continue
        used = [i for i in estimate.used if e[i] > 0]
        dropped = [i for i in estimate.dropped if e[i] > 0]
        order = estimate.order
        lo, hi = estimate.interval
        name = label
        if np.isfinite(order):
            name += f": p = {order:.2f} [{lo:.2f}, {hi:.2f}]"
        name += f", {estimate.verdict}"
        axes.plot(h[used], e[used], "o", color=color, label=name)
        if dropped:
            axes.plot(h[dropped], e[dropped], "x", color=color, markersize=8)
        if used and np.isfinite(order):
            x = np.geomspace(h[used].min(), h[used].max(), 50)
            centre_h = np.exp(np.log(h[used]).mean())
            centre_e = estimate.constant * centre_h**order
            axes.plot(x, centre_e * (x / centre_h) ** order, "-", color=color, linewidth=1)
            if np.isfinite(lo) and np.isfinite(hi):
                band = [centre_e * (x / centre_h) ** p for p in (lo, hi)]
                axes.fill_between(x, np.minimum(*band), np.maximum(*band), color=color, alpha=0.15)
    if any(estimate and estimate.dropped for *_, estimate in series):
        axes.plot([], [], "x", color="gray", label="dropped (pre-asymptotic or floor)")
    axes.legend(fontsize=7)
    return figure


def lines_figure(
    title: str,
    xlabel: str,
    ylabel: str,
    series: Sequence[tuple[str, Sequence[float], Sequence[float]]],
    *,
    logx: bool = True,
    logy: bool = True,
    guides: Sequence[tuple[str, Sequence[float], Sequence[float]]] = (),
    levels: Sequence[tuple[str, float]] = (),
) -> MplFigure:
    """Each series is (label, x, y), drawn as a line with markers; each guide (label, x, y)
    in its series' colour, dashed and without markers (an expected slope), and each level
    (label, y) as a grey horizontal line (a floor, such as a reference's own error)."""
    figure, axes = _axes(title, xlabel, ylabel)
    _log_axes(axes, x=logx, y=logy)
    for k, (label, x, y) in enumerate(series):
        axes.plot(x, y, "o-", markersize=3, color=f"C{k % 10}", label=label)
    for k, (label, x, y) in enumerate(guides):
        axes.plot(x, y, "--", linewidth=1, color=f"C{k % 10}", alpha=0.7, label=label)
    for label, y in levels:
        axes.axhline(y, color="gray", linestyle=":", linewidth=1, label=label)
    axes.legend(fontsize=7)
    return figure


def map_figure(
    title: str,
    xlabel: str,
    ylabel: str,
    x: Sequence[float],
    y: Sequence[float],
    values: np.ndarray,
    colorbar: str,
) -> MplFigure:
    """values[j, i] at (x[i], y[j]), with the numbers written in the cells."""
    figure, axes = _axes(title, xlabel, ylabel)
    axes.grid(False)
    grid = np.asarray(values, dtype=float)
    image = axes.imshow(grid, origin="lower", aspect="auto", cmap="viridis")
    axes.set_xticks(range(len(x)), [f"{v:g}" for v in x])
    axes.set_yticks(range(len(y)), [f"{v:g}" for v in y])
    for j in range(grid.shape[0]):
        for i in range(grid.shape[1]):
            axes.text(i, j, f"{grid[j, i]:.3g}", ha="center", va="center", color="w", fontsize=8)
    figure.colorbar(image, ax=axes, label=colorbar)
    return figure
