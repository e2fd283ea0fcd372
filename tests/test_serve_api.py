"""`seqtasks serve` over HTTP on 127.0.0.1: TensorFlow Serving's REST API, the extra endpoint, limits, batching.

The request and response shapes follow TensorFlow Serving's REST API
documentation (https://www.tensorflow.org/tfx/serving/api_rest): version
status, metadata's `signature_def`, predict's row (`instances` ->
`predictions`) and columnar (`inputs` -> `outputs`) formats, `{"error": ...}`.
"""

import concurrent.futures
import signal
import threading
import time

import numpy as np
import pytest
from serving_support import get_json, post_json, request, running_server, tiny_translation_export

import seqtasks

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
