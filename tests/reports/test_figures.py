"""The report's log axes label their ticks as matplotlib's scientific notation does, in
plain text (reports.figures)."""

from __future__ import annotations

import pytest

from reports.figures import lines_figure, plain_log_label


@pytest.mark.parametrize(
    "mathtext, plain",
    [
        ("$\\mathdefault{10^{-3}}$", "10⁻³"),
        ("$\\mathdefault{10^{12}}$", "10¹²"),
        ("$\\mathdefault{2\\times10^{-3}}$", "2\N{MULTIPLICATION SIGN}10⁻³"),
        ("$\\mathdefault{0.5}$", "0.5"),
        ("", ""),
    ],
)
def test_a_mathtext_log_label_reads_the_same_in_plain_text(mathtext, plain):
    assert plain_log_label(mathtext) == plain


def test_log_axes_draw_matplotlibs_labels_without_mathtext():
    """The labels drawn on a log axis are matplotlib's own choice of ticks, each without a
    dollar sign (no mathtext to parse)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.ticker import LogFormatterSciNotation

    figure = lines_figure("t", "x", "y", [("s", [1e-3, 1e-2, 1e-1], [2e-6, 3e-4, 1e-1])])
    FigureCanvasAgg(figure).draw()
    axes = figure.axes[0]
    for axis in (axes.xaxis, axes.yaxis):
        drawn = [t.get_text() for t in axis.get_ticklabels() if t.get_text()]
        reference = LogFormatterSciNotation()
        reference.set_axis(axis)
        locations = [t.get_loc() for t in axis.get_major_ticks() if t.label1.get_text()]
        reference.set_locs(axis.get_majorticklocs())
        assert drawn and all("$" not in label for label in drawn)
        assert drawn == [plain_log_label(reference(x)) for x in locations]
