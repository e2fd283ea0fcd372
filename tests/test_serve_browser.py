"""The page of `seqtasks serve` driven in the system's headless Chromium, checked against the JSON API."""

import os
import re
import shutil

import pytest
import serving_support
from conftest import REPO
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = pytest.mark.slow

STATIC = REPO / "seqtasks" / "serving" / "static"
# The first request on a fresh server loads and traces the SavedModel.
WAIT_S = 120


@pytest.fixture(scope="module")
def export(run_cache):
    return serving_support.tiny_translation_export(run_cache)


# Module-scoped, so that a missing browser skips before the export is trained.
@pytest.fixture(scope="module")
def browser():
    # Selenium Manager would otherwise look online for a browser and driver; the system's are used.
    os.environ.setdefault("SE_OFFLINE", "true")
    chromium, chromedriver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and chromedriver):
        message = "no chromium/chromedriver on PATH: install the Debian packages `chromium chromium-driver`"
        if os.environ.get("SEQTASKS_REQUIRE_BROWSER"):
            pytest.fail(message)
        pytest.skip(message)
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,900"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=chromedriver), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def set_number(driver, input_id, value):
    field = driver.find_element(By.ID, input_id)
    field.clear()
    field.send_keys(str(value))


def press_key_on(driver, element_id, key, modifier=None):
    """Focuses the element, then presses `key` (with `modifier` held) on whatever has focus, as from a keyboard."""
    element = driver.find_element(By.ID, element_id)
    driver.execute_script("arguments[0].focus()", element)
    assert driver.switch_to.active_element == element
    actions = ActionChains(driver)
    if modifier:
        actions.key_down(modifier).send_keys(key).key_up(modifier)
    else:
        actions.send_keys(key)
    actions.perform()


def severe_browser_logs(driver):
    try:
        return [entry for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]
    except Exception:  # a driver without the log endpoint: nothing to check
        return []


def full_page_screenshot(driver, path):
    chrome_height = driver.execute_script("return window.outerHeight - window.innerHeight")
    page_height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1200, page_height + chrome_height)
    driver.save_screenshot(str(path))


def test_the_page_translates_with_n_best_and_an_attention_heatmap(browser, export, tmp_path):
    path, sources = export
    source = sources[0]
    with serving_support.running_server(path) as url:
        status, listing = serving_support.get_json(url + "/seqtasks/models")
        assert status == 200
        model = listing["models"][0]
        name = model["name"]

        browser.get(url + "/")
        wait = WebDriverWait(browser, WAIT_S)
        wait.until(lambda d: d.find_elements(By.ID, "submit"))
        assert name in browser.find_element(By.TAG_NAME, "h1").text
        assert browser.find_element(By.ID, "beam_width").get_attribute("value") == str(model["settings"]["beam_width"])

        settings = {
            "beam_width": max(2, model["settings"]["beam_width"]),
            "n_best": 2,
            "max_length": model["settings"]["max_length"],
            "length_penalty": model["settings"]["length_penalty"],
        }
        browser.find_element(By.ID, "text").send_keys(source)
        set_number(browser, "beam_width", settings["beam_width"])
        set_number(browser, "n_best", settings["n_best"])
        press_key_on(browser, "submit", Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.CSS_SELECTOR, "#heatmap td[aria-label]"))
        assert not browser.find_element(By.ID, "error").is_displayed()

        status, answer = serving_support.post_json(
            f"{url}/v1/models/{name}:predict",
            {"signature_name": "with_settings", "instances": [{"text": source, **settings}]},
        )
        assert status == 200, answer
        prediction = answer["predictions"][0]
        assert browser.find_element(By.ID, "translation").get_attribute("textContent") == prediction["translation"]
        n_best = browser.execute_script(
            "return [...document.querySelectorAll('#n-best li span:first-child')].map(s => s.textContent)"
        )
        assert len(n_best) == 2
        assert n_best == prediction["translations"]

        status, answer = serving_support.post_json(f"{url}/v1/models/{name}:attention", {"instances": [source]})
        assert status == 200, answer
        attention = answer["attention"][0]
        columns, rows, labels = browser.execute_script("""
            const table = document.querySelector('#heatmap table');
            const texts = (nodes) => [...nodes].map((n) => n.textContent);
            return [texts(table.querySelectorAll('thead th')), texts(table.querySelectorAll('tbody th')),
                    [...table.querySelectorAll('tbody tr')].map((r) =>
                        [...r.querySelectorAll('td')].map((c) => c.getAttribute('aria-label')))];""")
        assert columns == attention["source_tokens"]
        assert rows == attention["target_tokens"]
        shown = [[float(label.rsplit(":", 1)[1]) for label in row] for row in labels]
        assert [len(row) for row in shown] == [len(columns)] * len(rows)
        for shown_row, row in zip(shown, attention["weights"]):
            assert shown_row == pytest.approx(row, abs=1e-3)
        # The cells are shaded under the page's Content-Security-Policy, which refuses style attributes.
        shades = browser.execute_script(
            "return [...document.querySelectorAll('#heatmap td')].map((c) => getComputedStyle(c).backgroundColor)")
        blue = [shade.startswith("rgba(37, 99, 235") for shade in shades]
        assert all(is_blue or shade == "rgba(0, 0, 0, 0)" for is_blue, shade in zip(blue, shades)), shades
        assert sum(blue) >= sum(weight > 0.01 for row in attention["weights"] for weight in row) > 0

        # Sampling from the page: three seeded samples, best first, as the API draws them.
        set_number(browser, "num_samples", 3)
        set_number(browser, "n_best", 3)
        set_number(browser, "seed", 4)
        press_key_on(browser, "submit", Keys.ENTER)
        sampled_list = "return [...document.querySelectorAll('#n-best li span:first-child')].map(s => s.textContent)"
        wait.until(lambda d: len(d.execute_script(sampled_list)) == 3)
        status, answer = serving_support.post_json(
            f"{url}/v1/models/{name}:predict",
            {"signature_name": "with_settings", "instances": [{"text": source, "num_samples": 3, "n_best": 3,
                                                               "seed": 4}]},
        )
        assert status == 200 and browser.execute_script(sampled_list) == answer["predictions"][0]["translations"]

        # A prefix from the page: the translation starts with it, as the API's with_prefix gives it.
        set_number(browser, "num_samples", 0)
        browser.find_element(By.ID, "prefix").send_keys("nobody")
        press_key_on(browser, "submit", Keys.ENTER)
        wait.until(lambda d: d.find_element(By.ID, "translation").get_attribute("textContent").startswith("nobody"))
        status, answer = serving_support.post_json(
            f"{url}/v1/models/{name}:predict",
            {"signature_name": "with_prefix", "instances": [{"text": source, "prefix": "nobody", **settings}]},
        )
        assert status == 200
        assert browser.find_element(By.ID, "translation").get_attribute("textContent") == answer["predictions"][0][
            "translation"]

        screenshot = tmp_path / "page.png"
        full_page_screenshot(browser, screenshot)
        assert screenshot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert screenshot.stat().st_size > 20_000
        if os.environ.get("SEQTASKS_SCREENSHOT"):
            shutil.copyfile(screenshot, os.environ["SEQTASKS_SCREENSHOT"])

        # An empty text: a message in the alert box, the last results cleared, no script error.
        browser.find_element(By.ID, "text").clear()
        press_key_on(browser, "text", Keys.ENTER, modifier=Keys.CONTROL)
        wait.until(lambda d: d.find_element(By.ID, "error").is_displayed())
        assert browser.find_element(By.ID, "error").text.strip()
        assert not browser.find_elements(By.ID, "translation")
        assert severe_browser_logs(browser) == []


def test_the_page_fetches_nothing_from_other_origins():
    html, script, css = ((STATIC / name).read_text(encoding="utf-8") for name in ("index.html", "app.js", "style.css"))
    references = re.findall(r"""\b(?:src|href)\s*=\s*["']([^"']*)["']""", html)
    references += re.findall(r"""url\(\s*["']?([^"')]*)""", css + script)
    references += re.findall(r"""@import\s+["']([^"']*)""", css)
    assert references, "no references found: the patterns no longer match the files"
    for reference in references:
        assert not re.match(r"(?i)([a-z][a-z0-9+.-]*:)?//", reference), reference
        assert reference.startswith("data:") or (STATIC.parent / reference).is_file(), reference
    for text in (html, script, css):
        assert not re.search(r"(?i)https?://", text)


@pytest.fixture(scope="module")
def ner_export(run_cache):
    from trained_runs import NER

    return run_cache.get(NER)[0] / "saved_models" / "tiny"


def test_the_ner_page_highlights_the_entities_of_the_text_as_typed(browser, ner_export):
    # Non-ASCII and an emoji before the names: offsets count characters, not the page's UTF-16 units.
    text = "Peter Müller 🙂 lives in Berlin . Anna works for Siemens in Paris ."
    with serving_support.running_server(ner_export) as url:
        name = serving_support.get_json(url + "/seqtasks/models")[1]["models"][0]["name"]
        status, answer = serving_support.post_json(f"{url}/v1/models/{name}:predict", {"instances": [text]})
        assert status == 200, answer
        prediction = answer["predictions"][0]
        count = prediction["entity_count"]
        expected = [
            (text[start:end], kind, f"{100 * score:.1f}%")
            for start, end, kind, score in zip(prediction["entity_start"][:count], prediction["entity_end"][:count],
                                                prediction["entity_type"][:count], prediction["entity_score"][:count])
        ]
        assert expected, prediction

        browser.get(url + "/")
        wait = WebDriverWait(browser, WAIT_S)
        wait.until(lambda d: d.find_elements(By.ID, "submit"))
        field = browser.find_element(By.ID, "text")
        field.clear()
        field.send_keys(text)
        press_key_on(browser, "submit", Keys.ENTER)
        wait.until(lambda d: d.find_elements(By.ID, "entities"))
        assert not browser.find_element(By.ID, "error").is_displayed()
        shown = browser.execute_script("""
            return [...document.querySelectorAll('#entities mark')].map((m) =>
                [m.firstChild.textContent, m.querySelector('.entity-type').textContent]);""")
        assert shown == [[words, f"{kind} {score}"] for words, kind, score in expected]
        # The whole text is there, in order, entities in place.
        paragraph = browser.find_element(By.ID, "entities").get_attribute("textContent")
        rebuilt, position = "", 0
        for (words, kind, score), start in zip(expected, prediction["entity_start"]):
            rebuilt += text[position:start] + f"{words} {kind} {score}"
            position = start + len(words)
        assert paragraph == rebuilt + text[position:]
        assert severe_browser_logs(browser) == []
