"""The report's figures are readable with many strategies (issue 17, item 10): every curve has
its own style, the legend sits beside the data, oracles are marked, and the forest plot's
legend explains every marker it draws."""
from __future__ import annotations

import matplotlib.colors
import matplotlib.figure
import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from audit.report.plots import plot_forest, plot_learning_curves

# lu2023's strategies on sonar (docs/figures.md), the last two of them oracles
STRATEGIES = ["uniform", "us-c", "us-nc", "qbc", "hintsvm", "quire", "albl", "dwus", "coreset", "graph", "hier",
              "infodiv", "mcm", "eer", "bmdr", "spal"]
ORACLES = ["bso", "greedy-oracle"]


def cell(strategy: str, mean: float, published: float | None = None, **extra) -> dict:
    return {"strategy": strategy, "status": "ok", "mean": mean, "ci95": [mean - 0.01, mean + 0.01],
            "ci99": [mean - 0.015, mean + 0.015], "published_mean": published,
            "uses_test_labels": strategy in ORACLES, **extra}


def make_report(cells: list[dict]) -> dict:
    return {"protocol": {"name": "lu2023", "aubc_variant": "trapezoid", "scale": "percent"},
            "dataset": {"name": "sonar"}, "strategies": cells}


@pytest.fixture
def saved_figures(monkeypatch):
    """The figures the plot functions save, kept open for inspection (the files are still written)."""
    figures = []
    save = matplotlib.figure.Figure.savefig

    def keep(fig, *args, **kwargs):
        figures.append(fig)
        return save(fig, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", keep)
    return figures


def draw_curves(tmp_path, saved_figures, names=STRATEGIES + ORACLES, trials=5):
    rng = np.random.default_rng(0)
    n_labeled = np.arange(20, 60)
    curves = {s: (n_labeled, 0.7 + 0.01 * i + rng.normal(0, 0.02, (trials, n_labeled.size)))
              for i, s in enumerate(names)}
    report = make_report([cell(s, 0.75) for s in names])
    plot_learning_curves(report, curves, tmp_path / "curves.png")
    assert (tmp_path / "curves.png").stat().st_size > 0
    (fig,) = saved_figures
    return fig


def labelled_lines(fig):
    return {line.get_label(): line for ax in fig.axes for line in ax.get_lines()
            if not line.get_label().startswith("_")}


def test_every_learning_curve_has_its_own_style(tmp_path, saved_figures):
    lines = labelled_lines(draw_curves(tmp_path, saved_figures))
    assert len(lines) == len(STRATEGIES + ORACLES)
    styles = {(matplotlib.colors.to_hex(line.get_color()), line.get_linestyle()) for line in lines.values()}
    assert len(styles) == len(lines), "two curves share a colour and a line style"
    assert matplotlib.colors.to_hex(lines["uniform (n=5)"].get_color()) == "#1f77b4"


def test_learning_curve_legend_is_outside_the_data_and_on_the_figure(tmp_path, saved_figures):
    fig = draw_curves(tmp_path, saved_figures)
    canvas = FigureCanvasAgg(fig)  # the closed figure's pixels, as saved
    canvas.draw()
    renderer = canvas.get_renderer()
    (ax,) = fig.axes
    legend = ax.get_legend() or fig.legends[0]
    box, data, page = legend.get_window_extent(renderer), ax.get_window_extent(renderer), fig.bbox
    assert not box.overlaps(data), "the legend covers curves"
    assert page.x0 <= box.x0 and box.x1 <= page.x1 and page.y0 <= box.y0 and box.y1 <= page.y1, "legend cut off"
    assert len(legend.get_texts()) == len(STRATEGIES + ORACLES)


def test_oracles_are_marked_and_drawn_apart(tmp_path, saved_figures):
    lines = labelled_lines(draw_curves(tmp_path, saved_figures))
    oracle_labels = [label for label in lines if "oracle," in label]
    assert sorted(label.split(" ")[0] for label in oracle_labels) == sorted(ORACLES)
    strategy_colours = {matplotlib.colors.to_hex(lines[f"{s} (n=5)"].get_color()) for s in STRATEGIES}
    assert not strategy_colours & {matplotlib.colors.to_hex(lines[label].get_color()) for label in oracle_labels}


def test_each_band_has_its_curve_colour(tmp_path, saved_figures):
    # one trial: no band for the first strategy, which must not shift the others' band colours
    rng = np.random.default_rng(1)
    n_labeled = np.arange(10, 30)
    curves = {"uniform": (n_labeled, rng.random((1, n_labeled.size))),
              "us-c": (n_labeled, rng.random((4, n_labeled.size))),
              "qbc": (n_labeled, rng.random((4, n_labeled.size)))}
    plot_learning_curves(make_report([cell(s, 0.7) for s in curves]), curves, tmp_path / "curves.png")
    (ax,) = saved_figures[0].axes
    line_colours = [matplotlib.colors.to_hex(line.get_color()) for line in ax.get_lines()[1:]]
    band_colours = [matplotlib.colors.to_hex(band.get_facecolor()[0], keep_alpha=False) for band in ax.collections]
    assert band_colours == line_colours


def forest_legend(tmp_path, saved_figures, cells):
    plot_forest(make_report(cells), tmp_path / "forest.png")
    (fig,) = saved_figures
    (ax,) = fig.axes
    legend = ax.get_legend()
    assert legend is not None
    return fig, ax, {text.get_text(): handle for text, handle in zip(legend.get_texts(), legend.legend_handles)}


def test_forest_legend_names_the_reproduced_mean_and_intervals(tmp_path, saved_figures):
    hypothesis = {"label": "unshuffled pool", "mean": 0.72, "ci95": [0.71, 0.73], "inside": False}
    _, _, entries = forest_legend(tmp_path, saved_figures, [
        cell("uniform", 0.75, published=0.751), cell("us-c", 0.78, diagnosis={"hypotheses": [hypothesis]})])
    assert entries["reproduced mean"].get_marker() == "o"
    assert entries["published mean"].get_marker() == "D"
    assert {"95% t-interval", "99% t-interval"} <= set(entries)
    assert any(label.startswith("diagnosis replay") for label in entries)


def test_forest_legend_without_published_values_and_oracle_rows_marked(tmp_path, saved_figures):
    _, ax, entries = forest_legend(tmp_path, saved_figures, [cell("uniform", 0.75), cell("greedy-oracle", 0.84)])
    assert "reproduced mean" in entries and "published mean" not in entries
    assert [t.get_text() for t in ax.get_yticklabels()] == ["uniform", "greedy-oracle (oracle)"]


def test_forest_plot_widens_for_long_replay_labels_instead_of_squeezing_the_axis(tmp_path, saved_figures):
    label = "released scaling scope + released library defaults"
    hypotheses = [{"label": label, "mean": 0.77, "ci95": [0.76, 0.78], "inside": True}]
    fig, ax, _ = forest_legend(tmp_path, saved_figures, [cell("qbc", 0.77, published=0.765,
                                                              diagnosis={"hypotheses": hypotheses})])
    axis_inches = fig.get_size_inches()[0] * ax.get_position().width
    assert axis_inches >= 4.0


def test_forest_rows_fill_the_axis_and_stopped_replays_say_their_n(tmp_path, saved_figures):
    hypotheses = [{"label": "unshuffled pool", "mean": 0.70, "ci95": [0.66, 0.74], "inside": False, "stopped_at": 10},
                  {"label": "released split draws", "mean": 0.76, "ci95": [0.75, 0.77], "inside": True,
                   "stopped_at": None}]
    _, ax, _ = forest_legend(tmp_path, saved_figures, [cell("uniform", 0.75, published=0.617,
                                                            diagnosis={"hypotheses": hypotheses})])
    assert [t.get_text() for t in ax.get_yticklabels()] == [
        "uniform", "~ unshuffled pool (n = 10)", "~ released split draws"]
    bottom, top = ax.get_ylim()
    assert top < 0 < 2 < bottom and bottom - top < 3.5  # first row on top, no empty rows beyond the three
