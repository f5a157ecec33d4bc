"""report.html as a reader sees it: Debian's chromium driven through chromium-driver by
Selenium, at a given window width. Gathers what the report tests assert (horizontal overflow,
images loaded, table row heights) and keeps a full-page screenshot."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# A directory to copy every screenshot into (optional)
ARTEFACTS_ENV = "CEPHSCOPE_TEST_ARTEFACTS"

# What the page says about itself once loaded (read in the browser, after layout).
PAGE_FACTS_JS = """
const doc = document.documentElement;
const wide = [];
for (const el of document.body.querySelectorAll('*')) {
  const r = el.getBoundingClientRect();
  if (r.right > doc.clientWidth + 1) wide.push(el.tagName + ' ' + Math.round(r.right));
}
const tables = Array.from(document.querySelectorAll('table')).map(t => {
  let title = t.previousElementSibling;
  while (title && !/^(H2|H3|P)$/.test(title.tagName)) title = title.previousElementSibling;
  return {title: title ? title.textContent.slice(0, 80) : '',
          width: t.getBoundingClientRect().width,
          rows: Array.from(t.rows).map(r => r.getBoundingClientRect().height)};
});
return {scrollWidth: doc.scrollWidth, clientWidth: doc.clientWidth,
        innerWidth: window.innerWidth, height: doc.scrollHeight, wide: wide.slice(0, 10),
        images: Array.from(document.images).map(i => ({complete: i.complete,
          width: i.naturalWidth, height: i.naturalHeight,
          shownWidth: i.getBoundingClientRect().width})),
        tables: tables};
"""


@dataclass
class PageFacts:
    scroll_width: int
    client_width: int
    inner_width: int
    height: int
    wide_elements: list[str]
    images: list[dict[str, Any]]
    tables: list[dict[str, Any]]
    screenshot: Path

    def steps_table(self) -> dict[str, Any]:
        return next(t for t in self.tables if t["title"].startswith("One line per step"))


def driver(profile: Path, width: int, height: int) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or chromedriver is None:
        raise RuntimeError("chromium / chromedriver missing: deploy/install.sh installs Debian's "
                           "chromium and chromium-driver")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    # root in a container: no sandbox; a throwaway profile; nothing but file:// is opened
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
                f"--window-size={width},{height}"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)


def check_page(html_path: Path, out_dir: Path, width: int = 1280) -> PageFacts:
    """Open the page at `width` px, read its facts, keep a full-page screenshot in out_dir."""
    out_dir.mkdir(parents=True, exist_ok=True)
    browser = driver(out_dir / "chromium-profile", width, 900)
    try:
        browser.set_page_load_timeout(60)
        browser.get(html_path.resolve().as_uri())
        browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "if (document.readyState === 'complete') done(); "
            "else window.addEventListener('load', () => done());")
        # the viewport's width is the window's minus nothing (headless, scrollbars hidden)
        facts = browser.execute_script(PAGE_FACTS_JS)
        # full page in one picture: the window as tall as the page (capped: huge pages)
        browser.set_window_size(width, min(int(facts["height"]) + 100, 16000))
        shot = out_dir / f"report-{width}px.png"
        browser.save_screenshot(str(shot))
    finally:
        browser.quit()
    # pytest keeps only its last few tmp dirs: CI (or a person) can name a dir that outlives them
    keep = os.environ.get(ARTEFACTS_ENV)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(keep) / f"{html_path.resolve().parent.name}-{shot.name}")
    return PageFacts(int(facts["scrollWidth"]), int(facts["clientWidth"]),
                     int(facts["innerWidth"]), int(facts["height"]), list(facts["wide"]),
                     list(facts["images"]), list(facts["tables"]), shot)


def assert_reads_at(report_html: Path, out_dir: Path, steps: int, width: int = 1280
                    ) -> PageFacts:
    """The report reads at `width` px: no sideways scrolling, every image loaded and shrunk to
    the page, the Steps table one short line per step, no table row taller than a few lines of
    wrapped text, and a screenshot that is not blank."""
    facts = check_page(report_html, out_dir, width)
    print(f"\nreport at {width}px: scrollWidth {facts.scroll_width}, height {facts.height}, "
          f"screenshot {facts.screenshot}")
    assert facts.inner_width == width
    assert facts.scroll_width <= facts.client_width, (facts.scroll_width, facts.wide_elements)
    assert facts.wide_elements == []
    assert facts.images and all(i["complete"] and i["width"] > 100 and i["height"] > 100
                                and 0 < i["shownWidth"] <= width for i in facts.images)
    steps_table = facts.steps_table()
    assert len(steps_table["rows"]) == steps + 1
    # one text line per step (~20 px at 12 px type); the header may wrap an option name
    assert max(steps_table["rows"][1:]) <= 30, steps_table["rows"]
    assert steps_table["rows"][0] <= 80
    for table in facts.tables:  # the per-step details wrap their sentences: a few lines
        assert max(table["rows"]) <= 120, table
        assert table["width"] <= facts.client_width
    from PIL import Image

    with Image.open(facts.screenshot) as image:
        rgb = image.convert("RGB")
        assert rgb.size[0] == width and rgb.size[1] >= 900
        colors = rgb.getcolors(maxcolors=1 << 22) or []
    assert len(colors) > 50, "the screenshot has almost no colours: blank page"
    return facts
