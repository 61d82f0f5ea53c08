"""The `/ui/` page in a real headless browser (Debian's chromium through its chromedriver):
live data appears, decisions with their reasons show up, history charts draw from ClickHouse,
and the page carries on by itself when the worker restarts."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from harness import CODEC, Running, submit_jobs, wait_for

from infra.kafka import producer
from infra.servicespec import service_record
from infra.topics import SERVICES_SPECS
from scorer.services import parse_service

pytestmark = pytest.mark.integration

# Debian's packages (`apt-get install chromium chromium-driver`; .ci/run installs them). No
# browser is downloaded at run time: Selenium is pointed at these and told to stay offline.
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"


@pytest.fixture
def browser() -> Iterator[Any]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.path.exists(p)]
    if missing:  # a loud failure, never a skip: this test is part of the suite
        pytest.fail(
            f"no headless browser: {missing} not found; install Debian's "
            "`chromium chromium-driver` (as .ci/run does) to run the /ui/ test"
        )
    os.environ["SE_OFFLINE"] = "true"  # Selenium Manager must not fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _wait(driver: Any, condition: Any, timeout_s: float, what: str) -> Any:
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.ui import WebDriverWait

    try:
        return WebDriverWait(driver, timeout_s, poll_frequency=0.25).until(condition)
    except TimeoutException:
        raise AssertionError(
            f"{what} not seen in {timeout_s}s; page:\n{_page_text(driver)}"
        ) from None


def _page_text(driver: Any) -> str:
    from selenium.webdriver.common.by import By

    return str(driver.find_element(By.TAG_NAME, "body").text)[:3000]


def _css(selector: str) -> Any:
    from selenium.webdriver.common.by import By

    return lambda d: d.find_elements(By.CSS_SELECTOR, selector)


def _status(state: str) -> Any:
    from selenium.webdriver.common.by import By

    return lambda d: d.find_element(By.ID, "status").get_attribute("data-state") == state


def test_ui_shows_live_data_and_survives_a_worker_restart(running: Running, browser: Any) -> None:
    w = running.config.worker
    url = f"http://{w.web_host}:{w.web_port}/ui/"

    def serving() -> bool:  # the worker process is started, its web server may not be yet
        try:
            return httpx.get(url, timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    assert wait_for(serving, 120), running.worker.log_tail()
    browser.get(url)
    regions = [r.name for r in running.fleet.spec.regions]

    def every_region(d: Any) -> bool:
        rows = _css("#regions tbody tr[data-region]")(d)
        return {r.get_attribute("data-region") for r in rows} == set(regions)

    _wait(browser, every_region, 90, "a row per region")
    row = _css("#regions tbody tr[data-region]")(browser)[0]
    assert row.get_attribute("data-model") and "%" in row.text  # model, counts, allocation

    submit_jobs(running.config, [{"job_id": "ui-before", "gpu_count": 1}], rate_per_s=10)
    [item] = _wait(browser, _css('#decisions li[data-job="ui-before"]'), 60, "the decision")
    assert item.get_attribute("data-outcome") in ("PLACED", "QUEUED", "REJECTED")
    assert "ui-before" in item.text
    _wait(browser, _css("#chart-decisions svg path"), 60, "the decisions chart")
    _wait(browser, _css("#chart-utilisation svg path"), 60, "the utilisation chart")
    _wait(browser, _status("live"), 10, "live status")

    _declare_service(running, [r.name for r in running.fleet.spec.regions])
    _wait(browser, _css('#services tr[data-service="uichat"][data-serving="1"]'), 60, "the service")
    [svc] = _css('#services tr[data-service="uichat"]')(browser)
    assert "HOLD" in svc.text or "SCALE_OUT" in svc.text, svc.text  # the last decision, with why

    running.worker.stop()
    _wait(browser, _status("down"), 30, "the outage shown")
    running.restart_worker()  # same web port; the page was never reloaded
    _wait(browser, _status("live"), 120, "live status after the restart")
    _wait(browser, every_region, 60, "every region after the restart")
    submit_jobs(running.config, [{"job_id": "ui-after", "gpu_count": 1}], rate_per_s=10)
    _wait(browser, _css('#decisions li[data-job="ui-after"]'), 90, "a decision after restart")
    # the restarted worker read the services declared before it (the compacted specs topic)
    _wait(browser, _css('#services tr[data-service="uichat"]'), 60, "the service after restart")
    assert browser.execute_script("return window.location.pathname") == "/ui/"


def _declare_service(running: Running, regions: list[str]) -> None:
    spec = parse_service(
        {"name": "uichat", "model_family": "llama", "params_b": 1, "precision": "FP16",
         "gpus_per_replica": 1, "batch": 8, "context": 1024, "capacity_rps": {"H100": 100},
         "min_replicas": 1, "max_replicas": 2, "regions": regions, "warm_pool": 0}
    )  # fmt: skip
    p = producer(running.config.kafka)
    record = CODEC.encode("ServiceSpec", service_record(spec))
    p.produce(SERVICES_SPECS, key=b"uichat", value=record)
    p.flush(10)
