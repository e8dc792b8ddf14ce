"""The dashboard's pages and the offline report, as Chromium shows them at two widths.

Every page in :data:`PAGES` goes through every check of :mod:`tests.browser.pages`
at 1400 px (a laptop) and 800 px (half a screen). A new page is one more entry; a
new check is one more test. A check that today's pages fail because of a known
layout bug is listed in :data:`KNOWN_BUGS` and expected to fail (strictly: the entry
must go when the bug is fixed).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from PIL import Image
from playwright.sync_api import BrowserContext

from tests.browser.load_tests import (
    BASELINE,
    CANDIDATE,
    FAILING,
    HOSTILE,
    HOSTILE_EXCEPTION,
    HOSTILE_JOB,
    HOSTILE_POOL,
    HOSTILE_REQUEST,
    HOSTILE_TEXTS,
    LONG_ID,
    STREAMED,
    STREAMED_SLO_TEXT,
)
from tests.browser.pages import (
    Visit,
    assert_all_images_load,
    assert_no_errors,
    assert_no_horizontal_overflow,
    assert_no_overlapping_text,
    assert_nothing_injected,
    assert_shows_literally,
    assert_status,
    console_errors,
    horizontal_overflow,
    text_overlaps,
    visit,
)

pytestmark = pytest.mark.browser

WIDTHS = (1400, 800)
#: The ``opened`` fixture: (where, width) → the open page.
Opened = Callable[[str, int], Visit]
UNKNOWN_LONG_ID = "no" + LONG_ID[2:]
#: Chromium asks every http page's origin for /favicon.ico and logs a 404 as an error;
#: one test tracks that, so that it does not hide other errors on every page.
FAVICON = "/favicon.ico)"


@dataclass(frozen=True)
class Shown:
    """A page: where it is (a dashboard path or ``report:DIR``), its status, and text
    from the data it must show exactly as written."""

    where: str
    status: int = 200
    texts: tuple[str, ...] = ()


PAGES = {
    "index": Shown("/", texts=(*HOSTILE_TEXTS, BASELINE, CANDIDATE, FAILING, STREAMED)),
    "test": Shown(f"/tests/{HOSTILE}", texts=(*HOSTILE_TEXTS, HOSTILE_EXCEPTION)),
    "failing-test": Shown(f"/tests/{FAILING}", texts=(FAILING, "33.33 %")),
    "compared": Shown(f"/tests/{CANDIDATE}?compare={BASELINE}", texts=(CANDIDATE, BASELINE)),
    "streamed-test": Shown(f"/tests/{STREAMED}", texts=(STREAMED, STREAMED_SLO_TEXT)),
    "compared-hostile": Shown(f"/tests/{HOSTILE}?compare={BASELINE}",
                              texts=(*HOSTILE_TEXTS, BASELINE)),
    "unknown-test": Shown("/tests/never-ran", 404, texts=("never-ran",)),
    "unknown-long-id": Shown(f"/tests/{UNKNOWN_LONG_ID}", 404, texts=(UNKNOWN_LONG_ID,)),
    "report": Shown("report:hostile", texts=HOSTILE_TEXTS),
    "compared-report": Shown("report:hostile-vs-baseline", texts=(*HOSTILE_TEXTS, BASELINE)),
    "savings": Shown("/savings?since=2w", texts=tuple(HOSTILE_POOL.values())),
    "jobs": Shown("/jobs?since=2w", texts=(*HOSTILE_JOB.values(), HOSTILE_REQUEST)),
}

#: (check, page, width) → the bug that makes that check fail today, e.g.
#: ``("overflow", "index", 800): "index: the Test column's 128-character id does not wrap"``.
KNOWN_BUGS: dict[tuple[str, str, int], str] = {}


def cases(check: str) -> list[object]:
    return [pytest.param(name, width, id=f"{name}-{width}px",
                         marks=[pytest.mark.xfail(strict=True, raises=AssertionError,
                                                  reason=KNOWN_BUGS[key])]
                         if (key := (check, name, width)) in KNOWN_BUGS else [])
            for name in PAGES for width in WIDTHS]


@pytest.mark.parametrize(("name", "width"), cases("loads"))
def test_each_page_loads_with_its_status_and_every_image_shows(
        opened: Opened, name: str, width: int) -> None:
    seen = opened(PAGES[name].where, width)

    assert_status(seen, PAGES[name].status)
    assert_all_images_load(seen)


@pytest.mark.parametrize(("name", "width"), cases("errors"))
def test_no_page_logs_a_console_error_throws_or_opens_a_dialog(
        opened: Opened, name: str, width: int) -> None:
    assert_no_errors(opened(PAGES[name].where, width))


def test_the_dashboard_gives_the_browser_an_icon_without_a_console_error(
        opened: Opened) -> None:
    seen = opened(PAGES["index"].where, WIDTHS[0])
    seen.page.wait_for_load_state("networkidle")

    assert not [e for e in console_errors(seen) if FAVICON in e]


@pytest.mark.parametrize(("name", "width"), cases("overlap"))
def test_no_text_on_a_page_overlaps_other_text(opened: Opened, name: str, width: int) -> None:
    assert_no_overlapping_text(opened(PAGES[name].where, width))


@pytest.mark.parametrize(("name", "width"), cases("overflow"))
def test_no_page_is_wider_than_its_window(opened: Opened, name: str, width: int) -> None:
    assert_no_horizontal_overflow(opened(PAGES[name].where, width))


@pytest.mark.parametrize(("name", "width"), cases("hostile"))
def test_data_shows_as_literal_text_and_injects_no_markup(
        opened: Opened, name: str, width: int) -> None:
    seen = opened(PAGES[name].where, width)

    assert_shows_literally(seen, PAGES[name].texts)
    assert_nothing_injected(seen)


# The checks themselves, on a page that breaks each rule once.
BROKEN_PAGE = """<!DOCTYPE html><html><body style="margin:0">
<p style="position:absolute;left:0;top:0;margin:0">first text</p>
<p style="position:absolute;left:6px;top:4px;margin:0">second text</p>
<div style="position:absolute;top:100px;width:3000px">a wide banner</div>
<div style="position:absolute;top:200px;width:200px;overflow-x:auto">
  <span style="white-space:nowrap">a long line that scrolls inside its own box, not the page
  and then some more words to be sure</span></div>
<img src="missing.png" alt="missing">
<script>console.error("boom"); alert("hi")</script>
</body></html>"""


def test_the_checks_catch_a_page_that_breaks_each_rule(chromium: BrowserContext,
                                                        tmp_path: Path) -> None:
    path = tmp_path / "broken.html"
    path.write_text(BROKEN_PAGE)

    seen = visit(chromium, path.as_uri(), 800)
    try:
        overlaps = text_overlaps(seen)
        overflow = horizontal_overflow(seen)
        with pytest.raises(AssertionError, match=r"images that did not load.*missing\.png"):
            assert_all_images_load(seen)
        with pytest.raises(AssertionError, match=r"console errors.*boom"):
            assert_no_errors(seen)
        with pytest.raises(AssertionError, match="'scripts': 1"):
            assert_nothing_injected(seen)
        with pytest.raises(AssertionError, match="not shown as text"):
            assert_shows_literally(seen, ["<script>"])
    finally:
        seen.page.close()

    assert len(overlaps) == 1
    assert 'p "first text" / p "second text"' in overlaps[0]
    assert any("a wide banner" in o for o in overflow)
    assert not any("scrolls inside" in o for o in overflow)
    assert seen.dialogs == ["alert: hi"]


# A page that keeps every rule, with what the checks must not mistake for a fault: an
# image loaded lazily far down, a wide line inside its own scrolling box, markup in text.
GOOD_PAGE = """<!DOCTYPE html><html><body>
<h1>Good &lt;script&gt;alert(1)&lt;/script&gt;</h1>
<div style="overflow-x:auto"><code style="white-space:nowrap">{long}</code></div>
<div style="height:3000px"></div>
<img src="chart.png" loading="lazy" alt="a chart">
</body></html>"""


def test_the_checks_pass_a_page_that_keeps_every_rule(chromium: BrowserContext,
                                                      tmp_path: Path) -> None:
    Image.new("RGB", (40, 20), "white").save(tmp_path / "chart.png")
    path = tmp_path / "good.html"
    path.write_text(GOOD_PAGE.format(long=LONG_ID * 3))

    seen = visit(chromium, path.as_uri(), 800)
    try:
        assert_all_images_load(seen)
        assert_no_errors(seen)
        assert_no_overlapping_text(seen)
        assert_no_horizontal_overflow(seen)
        assert_shows_literally(seen, ["<script>alert(1)</script>", LONG_ID])
        assert_nothing_injected(seen)
    finally:
        seen.page.close()
