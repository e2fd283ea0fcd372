"""`make_encoder_decoder_module` with `text_reader` translates a text sentence by sentence, its shouted ones in sentence case.

The fast tests call the export module's functions in this process on a tiny
untrained model (deterministic: its searches are); the slow one checks an
exported model of a trained run through `seqtasks.load`.

Exports with `model.decoding.n_best`: the K best hypotheses beside the best one, and `predict --n-best`.
"""

import json

import numpy as np
import pytest

import seqtasks
from seqtasks.errors import SeqtasksError
from seqtasks.text.sentences import split_sentences
from tests.conftest import seqtasks_command
from tests.support.serving_support import tiny_translation_export
from tests.support.trained_runs import SMALL_TOY


SOURCE_WORDS = (
    "ayer fui al mercado con mi hermana compramos manzanas pan y queso después volvimos a casa porque empezó "
    "llover el perro está en jardín gato también hola adiós sí no dónde tom tiene años "
    "Ayer Compramos Después El Hola Tom Sí ¿ ? ¡ ! . , « » 35"
).split()
TARGET_WORDS = (
    "yesterday i went to the market with my sister we bought apples bread and cheese dog is in garden"
).split()

PARAGRAPHS = [
    "Ayer fui al mercado con mi hermana. Compramos manzanas, pan y queso. "
    "Después volvimos a casa porque empezó a llover.",
    "  ¿Dónde está el perro?\n\nEl perro está en el jardín.   El gato también. ",
    "Tom tiene 35 años",
    "",
    " \n ",
    "Hola. ¡Adiós!",
]
SETTINGS = {
    "greedy": {"beam_width": 1, "n_best": 1, "max_length": 6, "length_penalty": 0.0},
    "beam": {"beam_width": 3, "n_best": 3, "max_length": 7, "length_penalty": 0.6},
}


@pytest.fixture(scope="module")
def parts():
    import keras

    from seqtasks.models import Seq2Seq
    from seqtasks.text.word_tokenizer import WordTokenizer

    source = WordTokenizer(SOURCE_WORDS, split="words", lower_case=False)
    target = WordTokenizer(TARGET_WORDS)
    keras.utils.set_random_seed(7)
    model = Seq2Seq(source.vocab_size, target.vocab_size, embedding_dim=8, encoder={"units": 8},
                    decoder={"units": 8, "attention": "luong"})
    model.build()
    return model, source, target


def _server(parts, reader=None, **decoding):
    from seqtasks.recipe.schema import DecodingConfig
    from seqtasks.encoder_decoder.export import make_encoder_decoder_module, text_reader

    model, source, target = parts
    reader = reader or text_reader(source, 12, by_sentence=True)
    return make_encoder_decoder_module(model, reader, target, "translation", DecodingConfig(**decoding))


@pytest.fixture(scope="module")
def server(parts):
    """The recipe's decoding: beam search of width 3, the 2 best returned."""
    return _server(parts, beam_width=3, n_best=2, max_length=8, length_penalty=0.6)


def _plain(outputs):
    return {key: value.numpy() for key, value in outputs.items()}


def _settings(beam_width, n_best, max_length, length_penalty):
    import tensorflow as tf

    from seqtasks.decoding.settings import NAMES, defaults
    from seqtasks.encoder_decoder.settings_inputs import settings_specs

    values = {**defaults(), "beam_width": beam_width, "n_best": n_best, "max_length": max_length,
              "length_penalty": length_penalty}
    return [tf.constant([values[name]], spec.dtype) for name, spec in zip(NAMES, settings_specs())]


def _sentences():
    """Every sentence of `PARAGRAPHS`, in order, and each paragraph's separators."""
    splits = [split_sentences(text) for text in PARAGRAPHS]
    return [sentence for sentences, _ in splits for sentence in sentences], [separators for _, separators in splits]


def _expected(by_sentence, separators, name="translation", n_best=None):
    """Each paragraph's outputs from its sentences' outputs: texts joined with the separators between the
    sentences, scores averaged (0 for a paragraph without sentences)."""
    texts, scores = by_sentence[name], by_sentence["score" if n_best is None else "scores"]
    if n_best is None:
        texts, scores = texts[:, None], scores[:, None]
    joined, means, index = [], [], 0
    for between in separators:
        count = len(between) - 1
        rows, index = range(index, index + count), index + count
        joined.append(["".join(between[j] * (j > 0) + texts[i][k].decode() for j, i in enumerate(rows))
                       for k in range(texts.shape[1])])
        means.append(scores[rows].mean(axis=0) if count else np.zeros(texts.shape[1]))
    if n_best is None:
        return [row[0] for row in joined], np.array(means)[:, 0]
    return joined, np.array(means)


def _texts(array):
    return [[t.decode() for t in row] if np.ndim(row) else row.decode() for row in array]


def test_a_paragraph_is_its_sentences_translations_joined_with_its_own_separators(server):
    import tensorflow as tf

    sentences, separators = _sentences()
    assert [len(between) - 1 for between in separators] == [3, 3, 1, 0, 0, 2]
    by_text = _plain(server.serve(tf.constant(PARAGRAPHS)))
    # The same sentences in one batch of their own: the same rows for the model, so the same numbers.
    by_sentence = _plain(server.serve(tf.constant(sentences)))
    for name, n_best in (("translation", None), ("translations", 2)):
        texts, scores = _expected(by_sentence, separators, name, n_best)
        assert _texts(by_text[name]) == texts
        np.testing.assert_allclose(by_text["score" if n_best is None else "scores"], scores, rtol=1e-6, atol=1e-6)
    assert by_text["translations"].shape == (len(PARAGRAPHS), 2)
    # Three sentences, three translations: a paragraph's output is longer than any of its sentences'.
    longest = max(len(text.split()) for text in _texts(by_sentence["translation"][:3]))
    assert _texts(by_text["translation"])[0].count(" ") > longest
    assert _texts(by_text["translation"])[3:5] == ["", ""] and list(by_text["score"][3:5]) == [0.0, 0.0]
    assert "\n\n" in _texts(by_text["translation"])[1]


@pytest.mark.parametrize("decoding", list(SETTINGS))
def test_with_settings_translates_each_sentence_with_the_settings_and_joins_the_k_th_best(server, decoding):
    import tensorflow as tf

    settings = SETTINGS[decoding]
    sentences, separators = _sentences()
    by_text = _plain(server.serve_with_settings(tf.constant(PARAGRAPHS), *_settings(**settings)))
    by_sentence = _plain(server.serve_with_settings(tf.constant(sentences), *_settings(**settings)))
    n_best = settings["n_best"]
    texts, scores = _expected(by_sentence, separators, "translations", n_best)
    assert _texts(by_text["translations"]) == texts
    np.testing.assert_allclose(by_text["scores"], scores, rtol=1e-6, atol=1e-6)
    assert _texts(by_text["translation"]) == [row[0] for row in texts]
    np.testing.assert_allclose(by_text["score"], scores[:, 0], rtol=1e-6, atol=1e-6)
    # max_length bounds each sentence, not the paragraph: three sentences may write three times as much.
    assert all(len(text.split()) <= settings["max_length"] for text in _texts(by_sentence["translation"]))
    assert len(texts[0][0].split()) > settings["max_length"]
    if n_best > 1:  # the mean of lists sorted best first is sorted best first
        assert np.all(np.diff(by_text["scores"], axis=1) <= 1e-6)


def test_a_prefix_starts_a_text_s_first_sentence_only(server):
    import tensorflow as tf

    sentences, separators = _sentences()
    prefixes = ["we bought", "the dog", "", "my", "", "apples and"]
    by_sentence_prefix = ["" if j else prefix for text, prefix in zip(PARAGRAPHS, prefixes)
                          for j in range(len(split_sentences(text)[0]))]
    settings = _settings(**SETTINGS["beam"])
    by_text = _plain(server.serve_with_prefix(tf.constant(PARAGRAPHS), tf.constant(prefixes), *settings))
    by_sentence = _plain(server.serve_with_prefix(tf.constant(sentences), tf.constant(by_sentence_prefix), *settings))
    texts, scores = _expected(by_sentence, separators, "translations", 3)
    assert _texts(by_text["translations"]) == texts
    np.testing.assert_allclose(by_text["scores"], scores, rtol=1e-6, atol=1e-6)
    for text, prefix, paragraph in zip(_texts(by_text["translation"]), prefixes, PARAGRAPHS):
        assert text.startswith(prefix) or not paragraph.strip()
    assert _texts(by_text["translation"])[3] == ""  # a blank text has no sentence to start


# 23 words and signs of the source vocabulary in one sentence, two clauses closed by commas: longer than the 12
# tokens the test server's reader takes whole.
LONG = ("Ayer fui al mercado con mi hermana, compramos manzanas, pan y queso y después volvimos a casa porque "
        "empezó a llover.")


def test_a_sentence_longer_than_the_model_reads_is_translated_in_parts_cut_at_its_clauses(server):
    import tensorflow as tf

    from seqtasks.text.clauses import split_long

    def count(text):
        return int(server.reader.count_tokens(tf.constant([text]))[0])

    parts, separators = split_long(LONG, count, 12)
    assert parts == ["Ayer fui al mercado con mi hermana, compramos manzanas,",
                     "pan y queso y después volvimos a casa porque empezó a", "llover."]
    texts = [LONG, "Hola. " + LONG, "EL PERRO ESTÁ EN EL JARDÍN, " + LONG.upper()]
    by_text = _plain(server.serve(tf.constant(texts)))
    by_part = _plain(server.serve(tf.constant(parts + ["Hola."])))
    translated = _texts(by_part["translations"])
    joined = [translated[0][k] + "".join(s + t[k] for s, t in zip(separators, translated[1:3])) for k in range(2)]
    assert _texts(by_text["translations"])[:2] == [joined, [translated[3][k] + " " + joined[k] for k in range(2)]]
    # A sentence's score is the mean of its parts', a text's the mean of its sentences'.
    sentence_scores = by_part["scores"][:3].mean(axis=0)
    np.testing.assert_allclose(by_text["scores"][0], sentence_scores, rtol=1e-6)
    np.testing.assert_allclose(by_text["scores"][1], (by_part["scores"][3] + sentence_scores) / 2, rtol=1e-6)
    # Shouted, it is read in sentence case and cut alike: every part of it comes back in capitals.
    assert _texts(by_text["translation"])[2] == _texts(by_text["translation"])[2].upper()
    assert _texts(by_text["translation"])[2].count(" ") >= sum(len(t[0].split()) for t in translated[:3]) - 1
    # A prefix is forced on the first part alone.
    settings = _settings(**SETTINGS["beam"])
    prefixed = _plain(server.serve_with_prefix(tf.constant([LONG]), tf.constant(["we bought"]), *settings))
    alone = _plain(server.serve_with_prefix(tf.constant(parts), tf.constant(["we bought", "", ""]), *settings))
    pieces = _texts(alone["translation"])
    assert _texts(prefixed["translation"]) == [pieces[0] + "".join(s + t for s, t in zip(separators, pieces[1:]))]


def test_an_all_caps_sentence_is_read_in_sentence_case_and_its_translation_upper_cased(server):
    import tensorflow as tf

    # One word in capitals ("OK.", "USA.", "HOLA") is read as written, an acronym's case kept.
    shouted = ["EL PERRO ESTÁ EN EL JARDÍN.", "¿DÓNDE ESTÁ EL PERRO? El gato también.", "HOLA AMIGO", "HOLA"]
    calm = ["El perro está en el jardín.", "¿Dónde está el perro?", "El gato también.", "Hola amigo", "HOLA"]
    by_text = _plain(server.serve(tf.constant(shouted)))
    by_sentence = _plain(server.serve(tf.constant(calm)))
    calm_texts = _texts(by_sentence["translations"])
    expected = [
        [calm_texts[0][k].upper() for k in range(2)],
        [calm_texts[1][k].upper() + " " + calm_texts[2][k] for k in range(2)],
        [calm_texts[3][k].upper() for k in range(2)],
        [calm_texts[4][k] for k in range(2)],
    ]
    assert _texts(by_text["translations"]) == expected
    np.testing.assert_allclose(by_text["scores"][0], by_sentence["scores"][0], rtol=1e-6)
    assert any(text != text.lower() for row in expected for text in row)  # something was upper-cased
    # `attention` reads a text as written: what `serve` gives a sentence that keeps its case, not a shouted one.
    mixed = ["El perro de TOM está aquí.", "EL PERRO DE TOM ESTÁ AQUÍ."]
    served, as_written = _plain(server.serve(tf.constant(mixed))), _plain(server.attention(tf.constant(mixed)))
    assert _texts(served["translation"])[0] == _texts(as_written["translation"])[0]
    assert served["score"][0] == pytest.approx(as_written["score"][0], abs=1e-6)
    assert served["score"][1] != pytest.approx(as_written["score"][1], abs=1e-6)


def test_blank_texts_alone_get_empty_outputs_and_score_zero(server):
    import tensorflow as tf

    outputs = _plain(server.serve(tf.constant(["", "   ", "\n"])))
    assert _texts(outputs["translation"]) == ["", "", ""] and list(outputs["score"]) == [0.0, 0.0, 0.0]
    assert _texts(outputs["translations"]) == [["", ""]] * 3 and np.all(outputs["scores"] == 0.0)
    settings = _settings(**SETTINGS["greedy"])
    outputs = _plain(server.serve_with_settings(tf.constant([" "]), *settings))
    assert _texts(outputs["translations"]) == [[""]] and outputs["scores"].tolist() == [[0.0]]
    assert _plain(server.serve(tf.constant([], tf.string)))["translation"].shape == (0,)


def test_score_and_attention_read_a_text_whole_with_its_case_as_given(server, parts):
    import tensorflow as tf

    from seqtasks.decoding import score_ids

    model, source, target = parts
    text = PARAGRAPHS[0].upper()
    attention = _plain(server.attention(tf.constant([text])))
    tokens = [source.vocab[i].encode() for i in source.tokenize(tf.constant([text])).to_list()[0][:12]]
    assert [t for t in attention["source_tokens"][0] if t] == tokens and len(tokens) == 12
    scored = _plain(server.score(tf.constant([text]), tf.constant(["we bought bread"])))
    ids = tf.constant([target.tokenize(tf.constant(["we bought bread"])).to_list()[0] + [3]])
    source_ids = source.tokenize(tf.constant([text]))[:, :12].to_tensor()
    _, _, expected = score_ids(model, source_ids, ids, 0.6)
    np.testing.assert_allclose(scored["score"], np.asarray(expected), rtol=1e-5)


def test_a_reader_without_split_reads_each_input_whole(parts, server):
    import tensorflow as tf

    from seqtasks.encoder_decoder.export import text_reader

    whole = _server(parts, text_reader(parts[1], 12), beam_width=3, n_best=2, max_length=8, length_penalty=0.6)
    assert not hasattr(whole.reader, "split")
    texts = tf.constant(PARAGRAPHS[:3])
    # `attention` reads whole texts in both, with the recipe's decoding: what a reader without `split` serves.
    expected = _plain(server.attention(texts))
    served = _plain(whole.serve(texts))
    assert _texts(served["translation"]) == _texts(expected["translation"])
    np.testing.assert_allclose(served["score"], expected["score"], rtol=1e-6)


def test_the_toy_task_reads_its_digit_sequences_whole():
    from seqtasks.recipe import load_recipe
    from seqtasks.tasks import make_task

    from tests.conftest import REPO

    task = make_task(load_recipe(REPO / "recipes" / "toy.yaml"))
    assert "sentence" not in " ".join(task.reading_limits())


@pytest.mark.slow
def test_an_exported_model_translates_a_paragraph_and_shouting_as_its_sentences(run_cache):
    import seqtasks
    from tests.support.serving_support import tiny_translation_export

    from seqtasks.text.sentences import sentence_case

    export = tiny_translation_export(run_cache)[0]
    model = seqtasks.load(export)
    sentences = ["Tengo hambre.", "¿Dónde está Tom?", "Ella me hace feliz."]
    whole, parts = model.translate(["  ".join(sentences)])[0], model.translate(sentences)
    assert whole.text == "  ".join(part.text for part in parts)
    assert whole.score == pytest.approx(np.mean([part.score for part in parts]), abs=1e-5)
    best = model.translate(["\n".join(sentences)], n_best=2, beam_width=3)[0].n_best
    by_sentence = [part.n_best for part in model.translate(sentences, n_best=2, beam_width=3)]
    assert [text for text, _ in best] == ["\n".join(each[k][0] for each in by_sentence) for k in range(2)]
    assert [score for _, score in best] == pytest.approx(
        [np.mean([each[k][1] for each in by_sentence]) for k in range(2)], abs=1e-5)
    shouted = "ELLA ME HACE FELIZ."
    assert model.translate(shouted).text == model.translate(sentence_case(shouted)[0]).text.upper()

    # `seqtasks predict` and `seqtasks serve` answer from the same signature: the same joined translation.
    from tests.support import serving_support
    from tests.conftest import seqtasks_command

    from seqtasks.serving.models import load_served

    paragraph = "  ".join(sentences)
    assert seqtasks_command("predict", export, paragraph).stdout.rstrip("\n") == whole.text
    # A sentence longer than the export reads whole (its recipe's 20 subwords): every clause of it is translated.
    from seqtasks.text.clauses import split_long

    def count(text):
        """The export's subwords of a text: WordPiece splits at whitespace first, so word by word (the
        `attention` signature reads at most 20)."""
        return sum(sum(1 for token in model.attention(word)["source_tokens"] if token) for word in text.split())

    long = ("Ayer fui al mercado con mi hermana, compramos manzanas, pan y queso, y después volvimos a casa porque "
            "empezó a llover.")
    pieces, between = split_long(long, count, 20)
    assert len(pieces) >= 2 and count(long) > 20
    in_parts = model.translate(long)
    parts_alone = [part.text for part in model.translate(pieces)]
    assert in_parts.text == parts_alone[0] + "".join(s + t for s, t in zip(between, parts_alone[1:]))
    assert seqtasks_command("predict", export, long).stdout.rstrip("\n") == in_parts.text
    import tensorflow as tf

    (version,) = export.iterdir()  # the spec's one export
    loaded = tf.saved_model.load(str(version))
    exported = loaded.signatures["serving_default"](text=tf.constant([long]))["translation"].numpy()[0].decode()
    assert exported == in_parts.text
    with serving_support.in_process_server(load_served(export)) as (url, _):
        name = serving_support.get_json(url + "/seqtasks/models")[1]["models"][0]["name"]
        status, answer = serving_support.post_json(f"{url}/v1/models/{name}:predict",
                                                   {"instances": [paragraph, long]})
    assert status == 200, answer
    assert answer["predictions"][0]["translation"] == whole.text
    assert answer["predictions"][1]["translation"] == in_parts.text


def test_a_text_s_sentences_after_the_limit_are_read_with_the_last_as_one(server):
    import tensorflow as tf

    from seqtasks.export.serving_limits import MAX_SENTENCES

    # The joined tail holds 9 tokens, fewer than the 12 the reader takes whole (a longer one is read in parts).
    many = " ".join(["Hola."] * (MAX_SENTENCES - 1) + ["Sí.", "El gato también. Tom  sí."])
    tail = "Sí. El gato también. Tom  sí."
    parts, _, join = server.reader.split(tf.constant([many, "Hola."]))
    parts = [part.decode() for part in parts.numpy()]
    assert parts == ["Hola."] * (MAX_SENTENCES - 1) + [tail, "Hola."]
    texts, scores = join(tf.constant(parts), tf.range(len(parts), dtype=tf.float32))
    assert _texts(texts.numpy()) == [many, "Hola."]
    np.testing.assert_allclose(scores.numpy(), [(MAX_SENTENCES - 1) / 2, MAX_SENTENCES])


# Beams of 4 over the small toy run's model (`trained_runs.SMALL_TOY`), exported with its 3 best and with the best only.
BEAM = "model.decoding.beam_width=4"


@pytest.fixture(scope="module")
def exports(run_cache, tmp_path_factory):
    run_dir = run_cache.get(SMALL_TOY).run_dir
    root = tmp_path_factory.mktemp("n_best")
    for folder, n_best in (("three", 3), ("one", 1)):
        seqtasks_command("export", run_dir, "--set", f"export.directory={root}/{folder}", "--set", BEAM,
                         "--set", f"model.decoding.n_best={n_best}")
    return root / "three" / "toy" / "1", root / "one" / "toy" / "1"


@pytest.mark.slow
def test_an_export_returns_the_n_best_best_first_and_the_best_as_before(exports):
    import tensorflow as tf

    three, one = exports
    texts = tf.constant(["1 2 3", "4 5 6 7", "", "   "])
    served = tf.saved_model.load(str(three)).signatures["serving_default"](text=texts)
    assert set(served) == {"output", "score", "outputs", "scores"}
    outputs, scores = served["outputs"].numpy(), served["scores"].numpy()
    assert outputs.shape == scores.shape == (4, 3)
    np.testing.assert_array_equal(served["output"].numpy(), outputs[:, 0])
    np.testing.assert_array_equal(served["score"].numpy(), scores[:, 0])
    assert np.all(np.diff(scores[:2], axis=1) <= 0)  # best first
    assert len(set(outputs[0])) == 3  # three different hypotheses
    assert outputs[2:].tolist() == [[b""] * 3] * 2 and scores[2:].tolist() == [[0.0] * 3] * 2
    best = tf.saved_model.load(str(one)).signatures["serving_default"](text=texts)
    assert set(best) == {"output", "score"}
    np.testing.assert_array_equal(best["output"].numpy(), outputs[:, 0])


@pytest.mark.slow
def test_predict_n_best_prints_k_scored_lines_per_input(exports):
    import tensorflow as tf

    three, one = exports
    served = tf.saved_model.load(str(three)).signatures["serving_default"](text=tf.constant(["1 2 3"]))
    lines = seqtasks_command("predict", three, "1 2 3", "4 5", "--n-best", 2).stdout.splitlines()
    assert len(lines) == 4
    first = [line.split("\t") for line in lines[:2]]
    assert [text for _, text in first] == [t.decode() for t in served["outputs"].numpy()[0, :2]]
    np.testing.assert_allclose([float(score) for score, _ in first], served["scores"].numpy()[0, :2], atol=1e-4)
    assert seqtasks_command("predict", three, "1 2 3").stdout.splitlines() == [served["output"].numpy()[0].decode()]
    (line,) = seqtasks_command("predict", three, "1 2 3", "--n-best", 3, "--json").stdout.splitlines()
    found = json.loads(line)
    assert found["output"] == [t.decode() for t in served["outputs"].numpy()[0]]
    np.testing.assert_allclose(found["score"], served["scores"].numpy()[0], rtol=1e-6)


@pytest.mark.slow
@pytest.mark.parametrize(
    "which, k, message",
    [
        (0, 4, "--n-best 4: the export returns 3 hypotheses per input (model.decoding.n_best)"),
        (1, 2, "--n-best 2: the export returns only the best hypothesis; export it with model.decoding.n_best=2 "
               "(and a beam_width of at least 2)"),
    ],
)
def test_predict_n_best_beyond_what_the_export_keeps_is_an_error(exports, which, k, message):
    result = seqtasks_command("predict", exports[which], "1 2 3", "--n-best", k, expect=2)
    assert result.stderr.splitlines() == [f"Error: {message}"]


@pytest.fixture(scope="module")
def decoding_exports(run_cache, tmp_path_factory):
    """The small toy run exported to sample 4 outputs per input, and to search with the beam's preferences."""
    run_dir = run_cache.get(SMALL_TOY).run_dir
    root = tmp_path_factory.mktemp("decoding")
    settings = {
        "samples": ["model.decoding.num_samples=4", "model.decoding.n_best=4", "model.decoding.seed=5",
                    "model.decoding.temperature=1.5"],
        "preferences": [BEAM, "model.decoding.no_repeat_ngram_size=2", "model.decoding.coverage_penalty=0.5"],
    }
    for folder, overrides in settings.items():
        arguments = [part for override in overrides for part in ("--set", override)]
        seqtasks_command("export", run_dir, "--set", f"export.directory={root}/{folder}", *arguments)
    return {folder: root / folder / "toy" / "1" for folder in settings}


@pytest.mark.slow
def test_an_export_that_samples_returns_its_samples_best_first_and_the_same_for_the_same_seed(decoding_exports):
    import tensorflow as tf

    serve = tf.saved_model.load(str(decoding_exports["samples"])).signatures["serving_default"]
    texts = tf.constant(["1 2 3 4", "5 6 7", "1 2 3 4"])
    first, again = serve(text=texts), serve(text=texts)
    outputs, scores = first["outputs"].numpy(), first["scores"].numpy()
    assert outputs.shape == scores.shape == (3, 4)
    assert np.all(np.diff(scores, axis=1) <= 0)
    assert len(set(outputs[0])) > 1  # at temperature 1.5 a small model's samples differ
    np.testing.assert_array_equal(again["outputs"].numpy(), outputs)  # the recipe's seed: the same samples
    np.testing.assert_array_equal(outputs[2], outputs[0])  # an input's samples do not depend on its place
    lines = seqtasks_command("predict", decoding_exports["samples"], "1 2 3 4", "--n-best", 4).stdout.splitlines()
    assert [line.split("\t")[1] for line in lines] == [text.decode() for text in outputs[0]]


@pytest.mark.slow
def test_an_export_with_repeated_bigrams_blocked_never_writes_one(decoding_exports):
    import tensorflow as tf

    serve = tf.saved_model.load(str(decoding_exports["preferences"])).signatures["serving_default"]
    # Reversed, these repeat a bigram ("2 1 ... 2 1"): what the model was trained to write.
    texts = ["1 2 1 2", "3 4 5 3 4", "7 7 7"]
    for text in serve(text=tf.constant(texts))["output"].numpy():
        tokens = text.decode().split()
        bigrams = list(zip(tokens, tokens[1:]))
        assert len(bigrams) == len(set(bigrams)), text


@pytest.fixture(scope="module")
def export(run_cache):
    return tiny_translation_export(run_cache)


@pytest.mark.slow
def test_an_export_scores_its_own_translations_as_it_scored_them(export):
    path, sources = export
    model = seqtasks.load(path)
    maps = model.attention(sources)
    scored = model.score(sources, [row["translation"] for row in maps])
    same = [(row, result) for row, result in zip(maps, scored) if result.tokens == row["target_tokens"]]
    assert len(same) >= len(sources) - 1  # a text re-tokenized may (rarely) split otherwise than it was written
    for row, result in same:
        assert result.score == pytest.approx(row["score"], abs=1e-4)
        assert result.log_prob == pytest.approx(sum(result.token_log_probs), abs=1e-5)
        assert result.tokens[-1] == "[END]" and all(p <= 0 for p in result.token_log_probs)
    # A worse target scores lower than the model's own best.
    worse = model.score(sources[0], maps[0]["translation"] + " " + maps[0]["translation"])
    assert worse.log_prob < scored[0].log_prob
    with pytest.raises(SeqtasksError, match=r"^targets: expected one per input \(2\); got 1$"):
        model.score(sources[:2], ["x"])


@pytest.mark.slow
def test_the_score_command_prints_a_line_per_pair_and_names_a_bad_line(export, tmp_path):
    path, sources = export
    model = seqtasks.load(path)
    targets = ["I am hungry.", ""]
    pairs = tmp_path / "pairs.tsv"
    pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(sources, targets)), encoding="utf-8")
    result = seqtasks_command("score", path, "--input", pairs)
    expected = model.score(sources[:2], targets)
    assert result.stdout.splitlines() == [f"{r.score:.4f}\t{r.log_prob:.4f}\t{t}" for r, t in zip(expected, targets)]
    as_json = seqtasks_command("score", path, "--input", pairs, "--json").stdout.splitlines()
    assert '"tokens": ["[END]"]' in as_json[1]
    pairs.write_text(f"{sources[0]}\tfine\nno tab here\n", encoding="utf-8")
    result = seqtasks_command("score", path, "--input", pairs, expect=2)
    assert result.output.strip().splitlines()[-1] == (
        f"Error: {pairs}, line 2: expected an input and a target separated by a tab; got 1 field(s)"
    )
