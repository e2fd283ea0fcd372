"""`seqtasks serve` over HTTP on 127.0.0.1: TensorFlow Serving's REST API, the extra endpoint, limits, batching.

The request and response shapes follow TensorFlow Serving's REST API
documentation (https://www.tensorflow.org/tfx/serving/api_rest): version
status, metadata's `signature_def`, predict's row (`instances` ->
`predictions`) and columnar (`inputs` -> `outputs`) formats, `{"error": ...}`.

The page of `seqtasks serve` driven in the system's headless Chromium, checked against the JSON API.
"""

import concurrent.futures
import os
import re
import shutil
import signal
import threading
import time

import numpy as np
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

import seqtasks
from tests.conftest import REPO
from tests.support import serving_support
from tests.support.serving_support import get_json, post_json, request, running_server, tiny_translation_export

pytestmark = pytest.mark.slow


_SERVER_OUTPUT = {}  # the module's server's output, read by `_logged_calls`


@pytest.fixture(scope="module")
def export(run_cache):
    return tiny_translation_export(run_cache)


@pytest.fixture(scope="module")
def server(export):
    base, _ = export
    with running_server(base, extra_args=["--max-instances", "8", "--max-text-characters", "200",
                                          "--max-body-bytes", "20000", "--batch-timeout-ms", "50",
                                          "--log-batches"]) as url:
        _SERVER_OUTPUT["tiny"] = running_server.output
        yield url


@pytest.fixture(scope="module")
def local(export):
    return seqtasks.load(export[0])


def test_version_status_and_metadata_are_tensorflow_serving_s(server):
    assert get_json(server + "/v1/models/tiny") == (200, {
        "model_version_status": [
            {"version": "1", "state": "AVAILABLE", "status": {"error_code": "OK", "error_message": ""}}
        ]
    })
    assert get_json(server + "/v1/models/tiny/versions/1")[0] == 200
    status, metadata = get_json(server + "/v1/models/tiny/metadata")
    assert status == 200 and metadata["model_spec"] == {"name": "tiny", "signature_name": "", "version": "1"}
    signatures = metadata["metadata"]["signature_def"]["signature_def"]
    assert {"serving_default", "with_settings", "attention"} <= set(signatures)
    default = signatures["serving_default"]
    assert default["method_name"] == "tensorflow/serving/predict"
    assert default["inputs"]["text"]["dtype"] == "DT_STRING"
    assert default["inputs"]["text"]["tensor_shape"] == {"dim": [{"size": "-1", "name": ""}], "unknown_rank": False}
    assert set(default["outputs"]) == {"translation", "score", "translations", "scores"}
    assert default["outputs"]["scores"]["tensor_shape"]["dim"][1]["size"] == "2"  # model.decoding.n_best
    assert set(signatures["with_settings"]["inputs"]) == {
        "text", "beam_width", "n_best", "max_length", "length_penalty", "coverage_penalty", "no_repeat_ngram_size",
        "num_samples", "temperature", "top_k", "top_p", "seed", "length_factor"}
    assert set(signatures["with_prefix"]["inputs"]) == set(signatures["with_settings"]["inputs"]) | {"prefix"}
    assert set(signatures["score"]["inputs"]) == {"text", "target"}
    assert set(signatures["score"]["outputs"]) == {"score", "log_prob", "token_log_probs", "target_tokens"}
    assert signatures["with_settings"]["inputs"]["seed"]["dtype"] == "DT_INT64"
    assert signatures["with_settings"]["inputs"]["length_penalty"]["dtype"] == "DT_FLOAT"
    assert get_json(server + "/v1/models/tiny/versions/1/metadata")[1] == metadata


def test_predict_row_and_columnar_formats_answer_what_the_python_api_does(server, export, local):
    _, sources = export
    expected = local.translate(sources, n_best=2, beam_width=3, max_length=12, length_penalty=0.6)
    status, rows = post_json(server + "/v1/models/tiny:predict", {"instances": sources})
    assert status == 200 and list(rows) == ["predictions"] and len(rows["predictions"]) == len(sources)
    for row, translation in zip(rows["predictions"], expected):
        assert set(row) == {"translation", "score", "translations", "scores"}
        assert row["translation"] == translation.text and row["translations"] == [t for t, _ in translation.n_best]
        assert row["score"] == pytest.approx(translation.score, abs=1e-4)
    # One input: the instances may also be objects naming it; the versioned URL answers alike.
    named = post_json(server + "/v1/models/tiny/versions/1:predict", {"instances": [{"text": s} for s in sources]})
    assert named == (200, rows)
    status, columns = post_json(server + "/v1/models/tiny:predict", {"inputs": {"text": sources}})
    assert status == 200 and list(columns) == ["outputs"]
    assert columns["outputs"]["translation"] == [row["translation"] for row in rows["predictions"]]
    assert columns["outputs"]["translations"] == [row["translations"] for row in rows["predictions"]]
    assert post_json(server + "/v1/models/tiny:predict", {"inputs": sources})[1] == columns


def test_with_settings_changes_the_decoding_per_request(server, export, local):
    _, sources = export
    settings = {"beam_width": 4, "n_best": 3, "max_length": 6, "length_penalty": 0.0}
    body = {"signature_name": "with_settings", "instances": [{"text": s, **settings} for s in sources]}
    status, answer = post_json(server + "/v1/models/tiny:predict", body)
    assert status == 200
    expected = local.translate(sources, **settings)
    for row, translation in zip(answer["predictions"], expected):
        assert len(row["translations"]) == 3 and row["scores"] == sorted(row["scores"], reverse=True)
        assert row["translations"] == [text for text, _ in translation.n_best]
    # Columnar: one value per setting stands for the whole request.
    columnar = {"signature_name": "with_settings", "inputs": {"text": sources, **{k: [v] for k, v in settings.items()}}}
    assert post_json(server + "/v1/models/tiny:predict", columnar)[1]["outputs"]["translations"] == [
        row["translations"] for row in answer["predictions"]
    ]
    # The recipe's own settings give serving_default's answers.
    defaults = {"beam_width": 3, "n_best": 2, "max_length": 12, "length_penalty": 0.6}
    same = post_json(server + "/v1/models/tiny:predict",
                     {"signature_name": "with_settings", "instances": [{"text": s, **defaults} for s in sources]})[1]
    plain = post_json(server + "/v1/models/tiny:predict", {"instances": sources})[1]
    assert [r["translations"] for r in same["predictions"]] == [r["translations"] for r in plain["predictions"]]
    greedy = post_json(server + "/v1/models/tiny:predict", {"signature_name": "with_settings", "instances": [
        {"text": sources[0], "beam_width": 1, "n_best": 1, "max_length": 3, "length_penalty": 0.0}]})[1]
    assert len(greedy["predictions"][0]["translations"]) == 1


def test_the_attention_endpoint_returns_tokens_and_weights_of_the_default_translation(server, export):
    _, sources = export
    status, answer = post_json(server + "/v1/models/tiny:attention", {"instances": sources[:2] + [""]})
    assert status == 200 and len(answer["attention"]) == 3
    plain = post_json(server + "/v1/models/tiny:predict", {"instances": sources[:2]})[1]["predictions"]
    for row, predicted in zip(answer["attention"], plain):
        weights = np.array(row["weights"])
        assert row["translation"] == predicted["translation"] and row["target_tokens"][-1] == "[END]"
        assert weights.shape == (len(row["target_tokens"]), len(row["source_tokens"]))
        assert np.allclose(weights.sum(axis=1), 1.0, atol=1e-5) and (weights >= 0).all()
        assert "".join(token.removeprefix("##") for token in row["source_tokens"]).lower() == "".join(
            sources[answer["attention"].index(row)].lower().split()
        )
    assert answer["attention"][2] == {"translation": "", "score": 0.0, "source_tokens": [], "target_tokens": [],
                                      "weights": []}


@pytest.mark.parametrize(
    "path, body, status, message",
    [
        (":predict", b'{"instances": ', 400, "malformed JSON"),
        (":predict", [], 400, "expected a JSON object"),
        (":predict", {}, 400, "exactly one of 'instances'"),
        (":predict", {"instances": []}, 400, "instances: expected a non-empty list"),
        (":predict", {"instances": ["a"], "inputs": ["a"]}, 400, "exactly one of"),
        (":predict", {"instance": ["a"]}, 400, "'instance': unknown field"),
        (":predict", {"instances": [3]}, 400, "text[0]: expected a string"),
        (":predict", {"instances": ["a"], "signature_name": "nope"}, 400, "no signature 'nope'"),
        (":predict", {"signature_name": "with_settings", "instances": [{"beam_width": 2}]}, 400,
         "instances[0]: missing field 'text'"),
        (":predict", {"signature_name": "with_settings", "instances": [
            {"text": "a", "beam_width": 2, "n_best": 3, "max_length": 5, "length_penalty": 0.0}]}, 400,
         "n_best: expected 1..2 (beam_width, or num_samples when sampling); got 3"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "num_samples": 1}]}, 400,
         "n_best: expected 1..1 (beam_width, or num_samples when sampling); got 2"),
        (":predict", {"signature_name": "with_settings", "instances": [
            {"text": "a", "num_samples": 2, "no_repeat_ngram_size": 2}]}, 400,
         "no_repeat_ngram_size: a beam search preference; expected 0 when sampling (num_samples 2); got 2"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "top_p": 0}]}, 400,
         "top_p: expected 0.01..1.0; got 0"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "temperature": 101}]}, 400,
         "temperature: expected 0.01..100.0; got 101"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "seed": 2**32}]}, 400,
         "seed: expected 0..4294967295; got 4294967296"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "seed": 2**63}]}, 400,
         "seed[0]: '9223372036854775808' is out of the int64 range"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "no_repeat_ngram_size": 11}]},
         400, "no_repeat_ngram_size: expected 0..10; got 11"),
        (":predict", {"signature_name": "with_settings", "instances": [{"text": "a", "coverage_penalty": -1}]},
         400, "coverage_penalty: expected 0.0..10.0; got -1"),
        (":predict", {"signature_name": "with_settings", "instances": [
            {"text": "a", "beam_width": 99, "n_best": 1, "max_length": 5, "length_penalty": 0.0}]}, 400,
         "beam_width: expected 1..16; got 99"),
        (":predict", {"signature_name": "with_settings", "inputs": {
            "text": ["a"], "beam_width": [2, 3], "n_best": [1], "max_length": [5], "length_penalty": [0.0]}}, 400,
         "beam_width: expected one value for the whole request"),
        (":predict", {"signature_name": "with_settings", "instances": [
            {"text": "a", "beam_width": 2.5, "n_best": 1, "max_length": 5, "length_penalty": 0.0}]}, 400,
         "beam_width[0]: expected an integer"),
        (":predict", {"instances": [{"b64": "%%%"}]}, 400, "'b64' is not valid base64"),
        (":predict", {"instances": ["a"] * 9}, 413, "9 instances; at most 8 per request (--max-instances)"),
        (":predict", {"instances": ["x" * 201]}, 413, "instance 0: 201 characters; at most 200 (--max-text-characters)"),
        (":predict", {"instances": ["x" * 25000]}, 413, "at most 20000 (--max-body-bytes)"),
        (":attention", {"instances": ["a"], "extra": 1}, 400, "with 'instances' only"),
        (":attention", {"instances": ["x" * 201]}, 413, "--max-text-characters"),
        (":classify", {"instances": ["a"]}, 404, "no such method ':classify'"),
    ],
)
def test_bad_requests_are_answered_with_a_json_error_naming_the_field_or_limit(server, path, body, status, message):
    answer = request("POST", server + "/v1/models/tiny" + path, body, {"Content-Type": "application/json"})
    assert answer[0] == status and message in answer[1]["error"], answer


def test_unknown_models_versions_and_routes_are_404_and_health_answers(server):
    assert post_json(server + "/v1/models/other:predict", {"instances": ["a"]}) == (
        404, {"error": "no model named 'other'; this server has ['tiny']"})
    assert post_json(server + "/v1/models/tiny/versions/7:predict", {"instances": ["a"]}) == (
        404, {"error": "model 'tiny' has no version 7; it serves version 1"})
    assert get_json(server + "/v1/models/tiny/versions/2")[0] == 404
    assert get_json(server + "/v1/nothing")[0] == 404 and "error" in get_json(server + "/v1/nothing")[1]
    status, health = get_json(server + "/healthz")
    assert (status, health["status"], health["models"]) == (200, "ok", ["tiny"])
    assert health["work"]["tiny"]["state"] == "idle" and health["work"]["tiny"]["requests"] == 0
    status, page = request("GET", server + "/")
    assert status == 200 and b"<html" in page.lower() and b"app.js" in page
    assert request("GET", server + "/static/app.js")[0] == 200


def test_the_page_s_model_listing_names_task_settings_and_limits(server):
    from seqtasks.decoding.settings import NAMES, as_json

    status, listing = get_json(server + "/seqtasks/models")
    (model,) = listing["models"]
    assert status == 200 and model["name"] == "tiny" and model["task"] == "translation" and model["input"] == "text"
    assert model["attention"] is True and model["labels"] is None and model["prefix"] is True
    assert model["settings"] == {"beam_width": 3, "n_best": 2, "max_length": 12, "length_penalty": 0.6,
                                 "coverage_penalty": 0.0, "no_repeat_ngram_size": 0, "num_samples": 0,
                                 "temperature": 1.0, "top_k": 0, "top_p": 1.0, "seed": 0, "length_factor": 0.0}
    # The page's controls: the declared settings, with this model's bounds (it attends: coverage up to 10).
    assert model["setting_fields"] == as_json(NAMES, attends=True)
    assert model["limits"]["max_instances"] == 8 and model["limits"]["max_text_characters"] == 200


def test_settings_a_request_leaves_out_are_the_recipe_s_and_sampling_is_seeded(server):
    def ask(**settings):
        body = {"signature_name": "with_settings", "instances": [{"text": "Tengo hambre.", **settings}]}
        status, answer = post_json(server + "/v1/models/tiny:predict", body)
        assert status == 200, answer
        return answer["predictions"][0]

    four = {"beam_width": 3, "n_best": 2, "max_length": 12, "length_penalty": 0.6}
    everything = {**four, "coverage_penalty": 0.0, "no_repeat_ngram_size": 0, "num_samples": 0, "temperature": 1.0,
                  "top_k": 0, "top_p": 1.0, "seed": 0, "length_factor": 0.0}
    assert ask(**four) == ask(**everything) == ask()  # a client written for the first four settings
    sampled = ask(num_samples=4, n_best=4, temperature=1.5, seed=7)
    assert ask(num_samples=4, n_best=4, temperature=1.5, seed=7) == sampled
    assert len(sampled["translations"]) == 4 and sampled["scores"] == sorted(sampled["scores"], reverse=True)
    assert ask(num_samples=4, n_best=4, temperature=1.5, seed=8) != sampled


def test_concurrent_requests_are_merged_and_answered_as_one_at_a_time(server):
    sentences = ["Yo dije eso.", "Sigue remando.", "¿Qué hay de ti?", "Esperemos que no.", "Tengo hambre.",
                 "Él es alto.", "Ella corre.", "Nosotros ganamos."] * 3
    alone = [post_json(server + "/v1/models/tiny:predict", {"instances": [s]})[1]["predictions"][0] for s in sentences]
    calls_before = _logged_calls()
    barrier = threading.Barrier(len(sentences))

    def send(sentence):
        barrier.wait()
        return post_json(server + "/v1/models/tiny:predict", {"instances": [sentence]})

    with concurrent.futures.ThreadPoolExecutor(len(sentences)) as pool:
        answers = list(pool.map(send, sentences))
    together = [answer[1]["predictions"][0] for answer in answers]
    assert [row["translations"] for row in together] == [row["translations"] for row in alone]
    assert np.allclose([row["scores"] for row in together], [row["scores"] for row in alone], atol=1e-4)
    # The 50 ms batch window let requests share model calls (the server's --log-batches lines say so), and no
    # answer tells a client how many examples others sent.
    calls = _logged_calls()[len(calls_before):]
    assert sum(calls) == len(sentences) and len(calls) < len(sentences) and max(calls) > 1, calls
    status, headers = _headers(server + "/v1/models/tiny:predict", {"instances": [sentences[0]]})
    assert status == 200 and not any(name.lower().startswith("x-seqtasks") for name in headers)


def test_merged_requests_with_different_settings_answer_as_each_alone(server, export):
    _, sources = export
    settings = [{"beam_width": 1, "n_best": 1, "max_length": 12, "length_penalty": 0.0},
                {"beam_width": 4, "n_best": 2, "max_length": 12, "length_penalty": 0.6},
                {"beam_width": 3, "n_best": 3, "max_length": 4, "length_penalty": 0.0}]
    requests = [(source, setting) for source in sources for setting in settings]

    def body(source, setting):
        return {"signature_name": "with_settings", "instances": [{"text": source, **setting}]}

    alone = [post_json(server + "/v1/models/tiny:predict", body(*item))[1]["predictions"][0] for item in requests]
    barrier = threading.Barrier(len(requests))

    def send(item):
        barrier.wait()
        return post_json(server + "/v1/models/tiny:predict", body(*item))[1]["predictions"][0]

    with concurrent.futures.ThreadPoolExecutor(len(requests)) as pool:
        together = list(pool.map(send, requests))
    assert [row["translations"] for row in together] == [row["translations"] for row in alone]
    assert [len(row["translations"]) for row in together] == [s["n_best"] for _, s in requests]


def test_tensorflow_serving_s_conventions_on_a_real_export(server, export):
    import base64

    _, sources = export
    plain = post_json(server + "/v1/models/tiny:predict", {"instances": sources[:2]})
    assert plain[0] == 200
    assert request("HEAD", server + "/v1/models/tiny")[:2] == (200, b"")
    assert post_json(server + "/v1/models/tiny/versions/01:predict", {"instances": sources[:2]}) == plain
    assert post_json(server + "/v1/models/tiny:predict", {"signature_name": "", "instances": sources[:2]}) == plain
    encoded = [{"b64": base64.b64encode(source.encode()).decode()} for source in sources[:2]]
    assert post_json(server + "/v1/models/tiny:predict", {"instances": encoded}) == plain
    form = request("POST", server + "/v1/models/tiny:predict", b'{"instances": ["a"]}',
                   {"Content-Type": "application/x-www-form-urlencoded"})
    assert form[0] == 415 and "-H 'Content-Type: application/json'" in form[1]["error"]


def _logged_calls():
    """The examples of each model call the server has logged (`--log-batches`)."""
    import re

    return [int(found) for found in re.findall(r"tiny: \S+ call of (\d+) examples", _SERVER_OUTPUT["tiny"]())]


def _headers(url, body):
    import json
    import urllib.request

    call = urllib.request.Request(url, json.dumps(body).encode(), {"Content-Type": "application/json"})
    with urllib.request.urlopen(call, timeout=60) as answer:
        return answer.status, dict(answer.headers)


def test_several_models_by_name_and_sigterm_lets_a_request_in_flight_finish(export):
    base, sources = export
    (run_dir,) = (base.parent.parent / "runs" / "tiny").iterdir()
    with running_server(run_dir, f"a={base}", f"b={base / '1'}", extra_args=["--batch-timeout-ms", "3000"]) as url:
        process = running_server.process
        assert get_json(url + "/healthz")[1]["models"] == ["a", "b", "tiny"]
        # A run folder is served as version 1, with the signatures its export has.
        status, metadata = get_json(url + "/v1/models/tiny/metadata")
        signatures = metadata["metadata"]["signature_def"]["signature_def"]
        assert status == 200 and {"serving_default", "with_settings", "attention"} <= set(signatures)
        assert signatures["with_settings"]["inputs"]["beam_width"]["dtype"] == "DT_INT32"
        from_run = post_json(url + "/v1/models/tiny:predict", {"instances": sources})[1]
        from_export = post_json(url + "/v1/models/a:predict", {"instances": sources})[1]
        assert [r["translations"] for r in from_run["predictions"]] == [r["translations"] for r in from_export["predictions"]]
        answers = []
        sender = threading.Thread(
            target=lambda: answers.append(post_json(url + "/v1/models/b:predict", {"instances": [sources[0]]}))
        )
        sender.start()
        time.sleep(1.0)  # the request now waits in its 3-second batch window
        process.send_signal(signal.SIGTERM)
        sender.join(60)
        assert process.wait(60) == 0
        output = running_server.output()
    assert answers and answers[0][0] == 200 and answers[0][1]["predictions"][0]["translation"], answers
    assert "Serving 'a' version 1 (translation)" in output and output.rstrip().endswith("Stopped")


def test_command_errors_are_one_line_without_a_traceback(export, tmp_path):
    import subprocess
    import sys

    base, _ = export

    def serve(*args):
        return subprocess.run([sys.executable, "-m", "seqtasks", "serve", *args], capture_output=True, text=True,
                              timeout=300)

    missing = serve(str(tmp_path / "nothing"))
    assert missing.returncode == 2 and "no such run folder or SavedModel" in missing.stderr
    assert "Traceback" not in missing.stderr
    twice = serve("--model", f"x={base}", "--model", f"x={base}")
    assert twice.returncode == 2 and "two models named 'x'" in twice.stderr
    bad = serve("--model", "nameless")
    assert bad.returncode == 2 and "--model nameless: expected NAME=PATH" in bad.stderr
    assert serve().returncode == 2 and "nothing to serve" in serve().stderr


def test_prefix_and_score_requests_answer_as_the_python_api(server, local):
    status, answer = post_json(server + "/v1/models/tiny:predict", {
        "signature_name": "with_prefix", "instances": [{"text": "Tengo hambre.", "prefix": "nobody"}]})
    assert status == 200, answer
    assert answer["predictions"][0]["translation"] == local.translate("Tengo hambre.", prefix="nobody").text
    assert answer["predictions"][0]["translation"].startswith("nobody")
    status, answer = post_json(server + "/v1/models/tiny:predict", {
        "signature_name": "score", "inputs": {"text": ["Tengo hambre.", "Hola."], "target": ["i am hungry.", "hi."]}})
    assert status == 200, answer
    expected = local.score(["Tengo hambre.", "Hola."], ["i am hungry.", "hi."])
    assert answer["outputs"]["score"] == pytest.approx([result.score for result in expected], abs=1e-5)
    assert answer["outputs"]["target_tokens"][1][: len(expected[1].tokens)] == expected[1].tokens
    status, answer = post_json(server + "/v1/models/tiny:predict", {
        "signature_name": "score", "inputs": {"text": ["Tengo hambre.", "Hola."], "target": ["i am hungry."]}})
    assert status == 400 and "target: expected one per input" in answer["error"], answer


STATIC = REPO / "seqtasks" / "serving" / "static"
# The first request on a fresh server loads and traces the SavedModel.
WAIT_S = 120


@pytest.fixture(scope="module")
def browser_export(run_cache):
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


def test_the_page_translates_with_n_best_and_an_attention_heatmap(browser, browser_export, tmp_path):
    path, sources = browser_export
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
    from tests.support.trained_runs import NER

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
