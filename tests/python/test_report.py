"""`dmalab report`: one self-contained HTML page, rendered in a real headless Chromium with no
console error, its charts drawn, and a screenshot that shows them."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from dmalab.cli import main

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "report.html"
    argv = ["report", "--out", str(out), "--claims", "P1-TPUT", "P4-RO-UDP"]
    argv += ["--advise", "grace-2s", "nvme:2x4K,qd8"]
    assert main([*argv, "--set", "workload.ios=5000"]) == 0
    return out


def test_the_page_is_self_contained(page: Path) -> None:
    text = page.read_text()
    # Nothing is fetched: no external script, stylesheet, image or frame.
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert "P4-RO-UDP" in text and "FAIL" in text and "p3-rbtree-deferred" in text
    assert "intel-vtd-2008-server" in text and "ibm-p660-m2plus" in text
    assert text.count("Plotly.newPlot") == 2
    # The advice: its ticket paragraph, its steps with intervals, and the host's parameters.
    assert "<h2 id='advice'>Advice: grace-2s, nvme:2x4K,qd8" in text
    assert "On grace-2s with nvme:2x4K,qd8" in text and "IOMMU passthrough" in text
    assert re.search(r"<td>[+]\d[\d,.]*% \[[+-]", text)


def test_bad_arguments_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["report", "--out", str(tmp_path / "r.txt")]) == 2
    assert "must end in .html" in capsys.readouterr().err
    assert main(["report", "--out", str(tmp_path / "r.html"), "--claims", "P9-NONE"]) == 2
    assert "unknown claim P9-NONE" in capsys.readouterr().err


@pytest.mark.skipif(
    (CHROMIUM is None or DRIVER is None) and not os.environ.get("CI"),
    reason="needs chromium and chromedriver (scripts/test.sh installs them; CI always has them)",
)
def test_the_page_renders_in_headless_chromium(page: Path, tmp_path: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    assert CHROMIUM and DRIVER, "CI must have chromium and chromedriver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        driver.get(page.as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, ".js-plotly-plot .main-svg")) >= 2
        )
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        assert driver.title == "dmalab report"
        rows = driver.find_elements(By.CSS_SELECTOR, "table.claims tbody tr")
        assert len(rows) == 7
        bars = driver.find_elements(By.CSS_SELECTOR, "#breakdown-chart .bars path")
        assert len(bars) >= 5
        shot = tmp_path / "report.png"
        chart = driver.find_element(By.ID, "breakdown-chart")
        driver.execute_script("arguments[0].scrollIntoView();", chart)
        assert chart.screenshot(str(shot))
    finally:
        driver.quit()
    _check_screenshot(shot)


def _check_screenshot(shot: Path) -> None:
    """The breakdown chart's screenshot shows its bars: a wide enough image with a good share of
    the bars' colour (plotly's first trace colour, #636efa)."""
    import matplotlib.image as mpimg

    pixels = mpimg.imread(shot)[..., :3]
    height, width = pixels.shape[:2]
    assert width >= 600 and height >= 200
    r, g, b = pixels[..., 0], pixels[..., 1], pixels[..., 2]
    bar = (abs(r - 0x63 / 255) < 0.08) & (abs(g - 0x6E / 255) < 0.08) & (abs(b - 0xFA / 255) < 0.08)
    assert 0.02 < bar.mean() < 0.5, bar.mean()


@pytest.fixture(scope="module")
def validation_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("report") / "validation.html"
    assert main(["report", "--out", str(out), "--claims", "--run", "none", "--validate"]) == 0
    return out


def test_the_validation_section_has_its_tables_and_one_chart_per_experiment(
    validation_page: Path,
) -> None:
    from dmalab.validate import FIGURES as VALIDATION_FIGURES

    text = validation_page.read_text()
    assert not re.search(r"<(script|link|img|iframe)[^>]+(src|href)=", text)
    assert "<h2 id='validation'>Validation against real machines</h2>" in text
    assert text.count("Plotly.newPlot") == len(VALIDATION_FIGURES)
    # The library is inlined once, with the first chart.
    assert text.count("window.PlotlyConfig") == 1
    for host in ("hsw-Xeon-E5-2620v3_dell-t630", "snb-Xeon-E5-2630_dell-t620"):
        assert f"{host} measured" in text and f"{host} modelled" in text


@pytest.mark.skipif(
    (CHROMIUM is None or DRIVER is None) and not os.environ.get("CI"),
    reason="needs chromium and chromedriver (scripts/test.sh installs them; CI always has them)",
)
def test_the_validation_charts_render_in_headless_chromium(validation_page: Path) -> None:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from dmalab.validate import FIGURES as VALIDATION_FIGURES

    assert CHROMIUM and DRIVER, "CI must have chromium and chromedriver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1280,2000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=DRIVER), options=options)
    try:
        driver.get(validation_page.as_uri())
        n = len(VALIDATION_FIGURES)
        WebDriverWait(driver, 30).until(
            lambda d: len(d.find_elements(By.CSS_SELECTOR, ".validation-chart .main-svg")) >= n
        )
        errors = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
        assert errors == []
        # Each chart draws its curves: measured and modelled lines for every host plotted.
        for k in range(n):
            lines = driver.find_elements(
                By.CSS_SELECTOR, f"#validation-chart-{k} .scatterlayer .js-line"
            )
            assert len(lines) >= 8, (k, len(lines))
        rows = driver.find_elements(By.CSS_SELECTOR, "table.validation tbody tr")
        assert len(rows) >= 8
    finally:
        driver.quit()
