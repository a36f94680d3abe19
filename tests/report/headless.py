"""Headless Chromium for the report tests: where the browser is, and what it made of a page."""

import os
import shutil

import pytest


def find_browser():
    chromium = os.environ.get("WINDTUNNEL_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    driver = os.environ.get("WINDTUNNEL_CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and driver):
        if os.environ.get("WINDTUNNEL_REQUIRE_BROWSER"):
            pytest.fail("headless Chromium and chromedriver are required here (apt-get install chromium chromium-driver)")
        pytest.skip("no chromium/chromedriver on this machine")
    webdriver = pytest.importorskip("selenium.webdriver")
    return chromium, driver, webdriver


def rendered(browser, page):
    """What the browser made of a page opened from disk: title, tables, rows, images, h2 headings."""
    browser.get(page.as_uri())
    js = browser.execute_script
    return {
        "title": browser.title,
        "tables": js("return document.querySelectorAll('table').length"),
        "rows": js("return document.querySelectorAll('table tr').length"),
        "images": js("return Array.from(document.images).map(i => [i.complete, i.naturalWidth, i.naturalHeight, i.alt])"),
        "headings": js("return Array.from(document.querySelectorAll('h2')).map(h => h.textContent)"),
    }


def broken_images(images):
    return [alt for ok, w, h, alt in images if not (ok and w > 100 and h > 100)]
