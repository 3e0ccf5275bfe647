"""report.html: self-contained, the same content as report.md, and rendered by headless Chromium."""
from __future__ import annotations

import re
import shutil
import subprocess
from html import escape

import numpy as np
import pytest

from audit.analysis.reproduce import ReproduceRequest, reproduce
from audit.report.sections import provenance_lines

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run")


@pytest.fixture(scope="module")
def replay(tmp_path_factory, sonar):
    """zhan2021 Uniform on sonar at batch size 10 (11 rounds a trial), 4 trials: discrepant with the
    published 0.621 (Table 5, uniform-10), so it is diagnosed."""
    tmp = tmp_path_factory.mktemp("html")
    return reproduce(ReproduceRequest(protocol="zhan2021", dataset="sonar", strategies=["uniform"], trials=4,
                                      batch_size=10, store=tmp / "s.sqlite", out=tmp / "report", progress=False),
                     log=lambda line: None)


def test_html_is_self_contained_and_carries_the_report(replay):
    html = (replay.out_dir / "report.html").read_text()
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", html), "no network resource"
    assert "<script" not in html and "<link" not in html
    assert len(re.findall(r"src='data:image/png;base64,", html)) == 2
    for line in provenance_lines(replay.report):
        assert escape(line) in html
    (cell,) = replay.report["strategies"]
    assert cell["verdict"].startswith("discrepant") and cell["diagnosis"]["summary"] in html
    assert "0.6210" in html and f"{cell['ci95'][0]:.4f}" in html and f"{cell['ci99'][1]:.4f}" in html
    assert "pool-order" in html and "Detector findings" in html


def test_markdown_and_html_share_the_sections(replay):
    markdown = (replay.out_dir / "report.md").read_text()
    for heading in re.findall(r"^## (.+)$", markdown, flags=re.MULTILINE):
        assert heading in (replay.out_dir / "report.html").read_text()
    assert "![forest plot](forest_plot.png)" in markdown


def test_findings_are_in_the_json(replay):
    names = {f["name"] for f in replay.report["findings"]}
    assert {"pool-order", "aubc-variant", "scaling-scope"} <= names


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_chromium_renders_the_report(replay, tmp_path):
    page = (replay.out_dir / "report.html").as_uri()
    flags = (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'profile'}")
    dom = subprocess.run([CHROMIUM, *flags, "--dump-dom", page], check=False, capture_output=True, text=True,
                         timeout=120).stdout
    assert "<table id=\"discrepancies\">" in dom and "discrepant at" in dom
    shot = tmp_path / "shot.png"
    subprocess.run([CHROMIUM, *flags, "--window-size=1200,2400", f"--screenshot={shot}", page],
                   capture_output=True, timeout=120, check=True)
    import matplotlib.image

    from audit.report.plots import PUBLISHED_COLOR

    pixels = matplotlib.image.imread(shot)[..., :3]
    assert pixels.shape[:2] == (2400, 1200)
    # the embedded figures are drawn: the published diamonds (forest plot) and the first curve's blue
    for colour in (PUBLISHED_COLOR, "#1f77b4"):
        rgb = np.array([int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)])
        assert np.sum(np.abs(pixels - rgb).max(axis=2) < 0.02) > 20, colour
