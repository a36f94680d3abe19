"""The headless browser the report tests share (one per test module)."""

import pytest
from headless import find_browser


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium, driver_path, webdriver = find_browser()
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage", f"--user-data-dir={tmp_path_factory.mktemp('profile')}"):
        opts.add_argument(flag)
    b = webdriver.Chrome(service=Service(driver_path), options=opts)
    yield b
    b.quit()
