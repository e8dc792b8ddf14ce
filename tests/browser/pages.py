"""Opening a page in headless Chromium and the checks every page must pass.

:func:`launch` starts Debian's Chromium (``/usr/bin/chromium``, installed by ``make
chromium``) with the flags this machine needs: without the background-networking
flags Chromium keeps dialling Google's hosts, which a closed network refuses.
Playwright's own browser downloads are never used.

:func:`visit` opens a URL at a window width and records, for as long as the page
stays open, what a user would not see in the page itself: console errors (Content
Security Policy violations are reported there), uncaught script errors and dialogs
(dismissed at once). Each ``assert_*`` check then reads the live page and fails with
a message that names the element at fault, so a new page or a new page feature only
needs another call.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import BrowserContext, ConsoleMessage, Dialog, Page, Playwright

__all__ = [
    "CHROMIUM",
    "CHROMIUM_ARGS",
    "Visit",
    "assert_all_images_load",
    "assert_no_errors",
    "assert_no_horizontal_overflow",
    "assert_no_overlapping_text",
    "assert_nothing_injected",
    "assert_shows_literally",
    "assert_status",
    "console_errors",
    "horizontal_overflow",
    "launch",
    "text_overlaps",
    "visit",
]

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
)
WINDOW_HEIGHT = 900
# Two boxes closer than this are touching, not overlapping (sub-pixel rounding).
TOLERANCE_PX = 1.0


def launch(playwright: Playwright, profile: Path) -> BrowserContext:
    """Chromium on a fresh, empty user-data-dir ``profile``; close the context to stop it.

    Raises FileNotFoundError naming ``make chromium`` when Chromium is not installed.
    """
    if not CHROMIUM.exists():
        raise FileNotFoundError(f"{CHROMIUM} is missing: run `make chromium` (Debian's "
                                "chromium package) before the browser tests")
    return playwright.chromium.launch_persistent_context(
        str(profile), executable_path=str(CHROMIUM), headless=True,
        args=list(CHROMIUM_ARGS), viewport={"width": 1400, "height": WINDOW_HEIGHT})


@dataclass
class Visit:
    """An open page and what it reported since it started loading."""

    page: Page
    url: str
    width: int
    status: int | None
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.url} at {self.width} px"


def visit(context: BrowserContext, url: str, width: int) -> Visit:
    """Open ``url`` in a new tab ``width`` px wide and wait until it and its images loaded
    (the load event; requests the browser makes after it, such as for the icon, may
    still be under way).

    ``status`` is the HTTP status of the document (200 for a file that opened, ``None``
    when nothing answered).
    """
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": WINDOW_HEIGHT})
    seen = Visit(page=page, url=url, width=width, status=None)

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            where = message.location.get("url", "")
            seen.console_errors.append(f"{message.text} ({where})" if where else message.text)

    def on_dialog(dialog: Dialog) -> None:
        seen.dialogs.append(f"{dialog.type}: {dialog.message}")
        dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda error: seen.page_errors.append(str(error)))
    page.on("dialog", on_dialog)
    response = page.goto(url, wait_until="load")
    if response is not None:
        seen.status = response.status
    elif url.startswith("file:"):
        seen.status = 200
    return seen


def assert_status(seen: Visit, expected: int) -> None:
    assert seen.status == expected, f"{seen}: status {seen.status}, expected {expected}"


# A lazily loaded image only loads once scrolled to, so each one still loading is
# brought into view and given ten seconds; the page is scrolled back to its top.
_IMAGES = """async () => {
  const images = [];
  for (const img of Array.from(document.images)) {
    if (!img.complete) img.scrollIntoView();
    const waited = new Promise(done => setTimeout(done, 10000));
    await Promise.race([img.decode().catch(() => null), waited]);
    images.push({src: img.getAttribute('src'), complete: img.complete,
                 width: img.naturalWidth});
  }
  window.scrollTo(0, 0);
  return images;
}"""


def assert_all_images_load(seen: Visit) -> None:
    """Every ``<img>`` finished loading and decoded to a picture (naturalWidth > 0),
    including images loaded lazily, further down the page."""
    images: list[dict[str, Any]] = seen.page.evaluate(_IMAGES)
    broken = [i["src"] for i in images if not (i["complete"] and i["width"] > 0)]
    assert not broken, f"{seen}: images that did not load: {broken}"


def console_errors(seen: Visit) -> list[str]:
    """The console errors of the page, less the one an error page always causes.

    For a page served with an error status, Chromium logs that status as a failed
    resource load of the document itself; that message is expected, not a fault.
    """
    failed = (f"the server responded with a status of {seen.status}"
              if seen.status is not None and seen.status >= 400 else None)
    return [e for e in seen.console_errors
            if not (failed and failed in e and e.endswith(f"({seen.url})"))]


def assert_no_errors(seen: Visit, *, tracked_elsewhere: Iterable[str] = ()) -> None:
    """No console error, no uncaught exception, no alert/confirm/prompt.

    A console error containing one of ``tracked_elsewhere`` is left to the test that
    tracks it (a known bug), so that it does not hide new errors on every page.
    """
    seen.page.wait_for_load_state("networkidle")  # at once if it was idle already
    known = tuple(tracked_elsewhere)
    errors = [e for e in console_errors(seen) if not any(k in e for k in known)]
    assert not errors, f"{seen}: console errors: {errors}"
    assert not seen.page_errors, f"{seen}: uncaught errors: {seen.page_errors}"
    assert not seen.dialogs, f"{seen}: dialogs opened: {seen.dialogs}"


# Each visible element that directly holds text, with the boxes of that text (one per
# line fragment), cut to what its clipping ancestors (overflow other than visible)
# let show. ``clipped`` is true inside an element that scrolls or clips sideways.
_TEXT_BOXES = """() => {
  const label = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += '#' + el.id;
    if (el.classList.length) name += '.' + Array.from(el.classList).join('.');
    const text = el.textContent.trim().replace(/\\s+/g, ' ');
    return name + ' "' + (text.length > 40 ? text.slice(0, 40) + '…' : text) + '"';
  };
  const clipOf = (el) => {
    const clip = {left: -Infinity, top: -Infinity, right: Infinity, bottom: Infinity,
                  sideways: false};
    for (let a = el; a && a !== document.body && a !== document.documentElement;
         a = a.parentElement) {
      const style = getComputedStyle(a);
      const box = a.getBoundingClientRect();
      if (style.overflowX !== 'visible') {
        clip.left = Math.max(clip.left, box.left);
        clip.right = Math.min(clip.right, box.right);
        clip.sideways = true;
      }
      if (style.overflowY !== 'visible') {
        clip.top = Math.max(clip.top, box.top);
        clip.bottom = Math.min(clip.bottom, box.bottom);
      }
    }
    return clip;
  };
  const groups = new Map();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const el = node.parentElement;
    if (!node.data.trim() || !el ||
        !el.checkVisibility({opacityProperty: true, visibilityProperty: true})) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    const clip = clipOf(el);
    let group = groups.get(el);
    if (!group) {
      group = {label: label(el), clipped: clip.sideways, boxes: []};
      groups.set(el, group);
    }
    for (const r of range.getClientRects()) {
      const box = {left: Math.max(r.left, clip.left), top: Math.max(r.top, clip.top),
                   right: Math.min(r.right, clip.right),
                   bottom: Math.min(r.bottom, clip.bottom)};
      if (box.right > box.left && box.bottom > box.top) group.boxes.push(box);
    }
  }
  return Array.from(groups.values()).filter(g => g.boxes.length);
}"""


def _text_boxes(seen: Visit) -> list[dict[str, Any]]:
    boxes: list[dict[str, Any]] = seen.page.evaluate(_TEXT_BOXES)
    return boxes


def _overlap(a: dict[str, float], b: dict[str, float]) -> tuple[float, float]:
    return (min(a["right"], b["right"]) - max(a["left"], b["left"]),
            min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]))


def text_overlaps(seen: Visit) -> list[str]:
    """Pairs of distinct elements whose visible text boxes overlap by more than a pixel
    both ways, described as ``a / b (w x h px)``."""
    groups = _text_boxes(seen)
    found = []
    for i, first in enumerate(groups):
        for second in groups[i + 1:]:
            worst = max((_overlap(a, b) for a in first["boxes"] for b in second["boxes"]),
                        key=lambda wh: min(wh))
            if min(worst) > TOLERANCE_PX:
                found.append(f"{first['label']} / {second['label']} "
                             f"({worst[0]:.0f} x {worst[1]:.0f} px)")
    return found


def assert_no_overlapping_text(seen: Visit) -> None:
    overlaps = text_overlaps(seen)
    assert not overlaps, f"{seen}: text of different elements overlaps: {overlaps[:10]}"


# The innermost elements whose border box leaves the viewport sideways, outside any
# element that scrolls or clips sideways (overflow-x other than visible).
_WIDE_ELEMENTS = """() => {
  const width = document.documentElement.clientWidth;
  const contained = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      if (getComputedStyle(a).overflowX !== 'visible') return true;
    }
    return false;
  };
  const wide = Array.from(document.body.querySelectorAll('*')).filter(el => {
    const r = el.getBoundingClientRect();
    return (r.width || r.height) && (r.right > width + 1 || r.left < -1) && !contained(el);
  });
  // The innermost ones (a table is wide because a cell is), the widest first.
  const out = wide.filter(el => !wide.some(other => other !== el && el.contains(other)))
    .sort((a, b) => b.getBoundingClientRect().width - a.getBoundingClientRect().width)
    .map(el => {
      const r = el.getBoundingClientRect();
      return {tag: el.tagName.toLowerCase(), left: r.left, right: r.right,
              text: el.textContent.trim().replace(/\\s+/g, ' ').slice(0, 40)};
    });
  return {width, scrollWidth: document.documentElement.scrollWidth, elements: out};
}"""


def horizontal_overflow(seen: Visit) -> list[str]:
    """What sticks out of the viewport sideways (text, then elements, widest first),
    outside elements that scroll or clip; empty when the page fits its window's width."""
    wide: dict[str, Any] = seen.page.evaluate(_WIDE_ELEMENTS)
    width = wide["width"]
    texts = []
    for group in _text_boxes(seen):
        if group["clipped"]:
            continue
        right = max(b["right"] for b in group["boxes"])
        left = min(b["left"] for b in group["boxes"])
        if right > width + TOLERANCE_PX or left < -TOLERANCE_PX:
            texts.append((right - left, f"text of {group['label']} spans "
                                        f"{left:.0f}..{right:.0f} px"))
    found = [text for _, text in sorted(texts, reverse=True)]
    found += [f"<{e['tag']}> {e['text']!r} spans {e['left']:.0f}..{e['right']:.0f} px"
              for e in wide["elements"]]
    if wide["scrollWidth"] > width and not found:
        found.append(f"the page is {wide['scrollWidth']} px wide")
    return found


def assert_no_horizontal_overflow(seen: Visit) -> None:
    found = horizontal_overflow(seen)
    assert not found, (f"{seen}: wider than the {seen.width} px window "
                       f"(no sideways scrolling expected): {found[:10]}")


def assert_shows_literally(seen: Visit, texts: Iterable[str]) -> None:
    """Each of ``texts`` is part of the page's visible text, character for character."""
    shown: str = seen.page.evaluate("() => document.body.innerText")
    missing = [t for t in texts if t not in shown]
    assert not missing, f"{seen}: not shown as text: {missing}"


# Markup that would run or load something if data reached the page unescaped.
_INJECTED = """() => ({
  scripts: document.querySelectorAll('script').length,
  handlers: Array.from(document.querySelectorAll('*')).flatMap(el =>
      Array.from(el.attributes).filter(a => a.name.toLowerCase().startsWith('on'))
          .map(a => el.tagName.toLowerCase() + '[' + a.name + ']')),
  bareImages: Array.from(document.images).filter(img => img.getAttribute('src') === 'x').length,
})"""


def assert_nothing_injected(seen: Visit) -> None:
    """No ``<script>`` at all, no inline event handler, no ``<img src=x>``, no dialog."""
    found: dict[str, Any] = seen.page.evaluate(_INJECTED)
    assert found == {"scripts": 0, "handlers": [], "bareImages": 0}, f"{seen}: {found}"
    assert not seen.dialogs, f"{seen}: dialogs opened: {seen.dialogs}"
