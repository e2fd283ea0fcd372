import re

import pytest
import tensorflow as tf

from seqtasks.errors import SeqtasksError
from seqtasks.text.sentencepiece_tokenizer import SMALLEST_VOCAB_SIZE, SentencePieceTokenizer, learn_sentencepiece
from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from tests.conftest import SAMPLE_PAIRS

SAMPLE = SAMPLE_PAIRS


@pytest.fixture(scope="module")
def english():
    lines = SAMPLE.read_text(encoding="utf-8").splitlines()
    return [line.split("\t")[0] for line in lines[:2000]]


@pytest.fixture(scope="module", params=["unigram", "bpe"])
def model_type(request):
    return request.param


@pytest.fixture(scope="module")
def model(model_type, english):
    return learn_sentencepiece(english, 600, model_type)


# Built in each test: mutmut runs a mutant of `__init__` only with the tests during which it ran.
@pytest.fixture
def tokenizer(model):
    return SentencePieceTokenizer(model)


def _round_trip(tokenizer, texts):
    ids = tokenizer.tokenize(tf.constant(texts))
    return ids, [text.decode() for text in tokenizer.detokenize(ids).numpy()]


def test_the_reserved_tokens_take_the_first_ids(tokenizer):
    assert tokenizer.vocab[: len(RESERVED_TOKENS)] == list(RESERVED_TOKENS)
    assert (tokenizer.vocab[PAD_ID], tokenizer.vocab[UNK_ID]) == ("[PAD]", "[UNK]")
    assert (tokenizer.vocab[START_ID], tokenizer.vocab[END_ID]) == ("[START]", "[END]")
    assert tokenizer.vocab_size == len(tokenizer.vocab) == 600


def test_text_comes_back_exactly_as_written_case_and_punctuation_kept(tokenizer):
    texts = ["Where is the train station?", "I don't know, do you?", "Tom's dog (a big one) is 3% faster.", "¡Hola!"]
    ids, back = _round_trip(tokenizer, texts)
    assert ids.dtype == tf.int32
    assert back == texts


def test_numbers_names_and_unseen_scripts_pass_through_without_unknown_tokens(tokenizer):
    texts = ["Tom tiene 35 años.", "Zyxwv met Qüñ in 1987.", "東京 😀 Ελλάδα", "a\u0301"]
    ids, back = _round_trip(tokenizer, texts)
    assert UNK_ID not in ids.flat_values.numpy()
    assert back[:3] == texts[:3]
    assert back[3] == "\u00e1"  # NFKC: the combining accent composed


def test_digits_are_pieces_of_their_own(tokenizer):
    ids = [i for i in tokenizer.tokenize(tf.constant(["1987"]))[0].numpy() if tokenizer.vocab[i] != "▁"]
    pieces = tokenizer.detokenize(tf.constant([[i] for i in ids])).numpy()
    assert [piece.decode().strip() for piece in pieces] == ["1", "9", "8", "7"]


def test_empty_and_blank_texts_have_no_pieces_and_come_back_empty(tokenizer):
    ids, back = _round_trip(tokenizer, ["", "   ", "\t"])
    assert ids.row_lengths().numpy().tolist() == [0, 0, 0]
    assert back == ["", "", ""]


def test_detokenize_stops_at_the_first_end_and_drops_reserved_ids(tokenizer):
    ids = tokenizer.tokenize(tf.constant(["Hello there.", "Good."])).to_tensor()
    rows = ids.numpy().tolist()
    first = [START_ID] + rows[0][:2] + [PAD_ID, UNK_ID] + rows[0][2:] + [END_ID] + rows[1]
    second = rows[1] + [END_ID, END_ID, PAD_ID]
    width = max(len(first), len(second))
    dense = tf.constant([row + [PAD_ID] * (width - len(row)) for row in (first, second)])
    assert [text.decode() for text in tokenizer.detokenize(dense).numpy()] == ["Hello there.", "Good."]


def test_spaces_a_model_writes_around_punctuation_or_twice_are_tidied(tokenizer):
    space = tokenizer.vocab.index("▁")
    pieces = lambda text: tokenizer.tokenize(tf.constant([text]))[0].numpy().tolist()  # noqa: E731
    rows = [
        pieces("Where is it") + [space] + pieces("?"),
        [space] + pieces("¡Hola") + [space, space] + pieces("Tom") + [space, space],
        pieces("(") + [space] + pieces("Yes") + [space] + pieces(")"),
    ]
    width = max(map(len, rows))
    dense = tf.constant([row + [PAD_ID] * (width - len(row)) for row in rows])
    assert [text.decode() for text in tokenizer.detokenize(dense).numpy()] == ["Where is it?", "¡Hola Tom", "(Yes)"]


def test_lower_case_folds_the_input(english):
    tokenizer = SentencePieceTokenizer(learn_sentencepiece(english, 400, lower_case=True), lower_case=True)
    assert _round_trip(tokenizer, ["Where IS Tom?"])[1] == ["where is tom?"]


def test_the_same_texts_give_the_same_model(english, model, model_type):
    assert learn_sentencepiece(english, 600, model_type) == model


def test_too_little_text_gives_a_smaller_vocabulary_with_a_note(capsys):
    model = learn_sentencepiece(["a b c", "a b"], 400, field="data.target_vocab_size")
    size = SentencePieceTokenizer(model).vocab_size
    assert SMALLEST_VOCAB_SIZE <= size < 400
    assert capsys.readouterr().out == (
        f"Note: data.target_vocab_size is 400, but the training data gives only {size} pieces; using {size}\n"
    )


@pytest.mark.parametrize(
    "args, message",
    [
        ((["a"], 600, "word"), "Expected one of {'unigram', 'bpe'}. Received: model_type='word'"),
        ((["a"], 260, "bpe"), "Expected vocab_size >= 261 (256 byte pieces). Received: 260"),
        ((["", "  "], 600), "Expected some non-blank texts to learn SentencePiece pieces from"),
    ],
)
def test_bad_arguments_are_named(args, message):
    with pytest.raises(ValueError) as error:
        learn_sentencepiece(*args)
    assert str(error.value) in (message, message.replace("{'unigram', 'bpe'}", "{'bpe', 'unigram'}"))


def test_the_smallest_vocabulary_is_the_bytes_the_reserved_tokens_and_the_texts_characters():
    texts = ["ab ba", "ba ab ab"] * 50  # a, b and the space: 3 characters
    assert SentencePieceTokenizer(learn_sentencepiece(texts, SMALLEST_VOCAB_SIZE + 2)).vocab_size == 263
    with pytest.raises(SeqtasksError, match="vocab_size: 261 subwords cannot hold .* give at least 263$"):
        learn_sentencepiece(texts, SMALLEST_VOCAB_SIZE)


def test_a_vocabulary_too_small_for_the_texts_characters_is_a_clear_error(english):
    with pytest.raises(SeqtasksError) as error:
        learn_sentencepiece(english, SMALLEST_VOCAB_SIZE, field="data.source_vocab_size")
    assert re.fullmatch(
        r"data\.source_vocab_size: 261 subwords cannot hold the byte, reserved and character pieces the texts "
        r"need; give at least \d+",
        str(error.value),
    )


def test_a_lower_case_model_learns_no_capitals_and_a_cased_one_keeps_them(english):
    def learned(tokenizer):  # the pieces past the reserved tokens and the 256 bytes
        return [piece for piece in tokenizer.vocab[len(RESERVED_TOKENS) :] if not piece.startswith("<0x")]

    folded = learned(SentencePieceTokenizer(learn_sentencepiece(english, 400, lower_case=True), lower_case=True))
    assert all(piece == piece.casefold() for piece in folded)
    assert any(piece != piece.casefold() for piece in learned(SentencePieceTokenizer(learn_sentencepiece(english, 400))))


def test_unigram_and_bpe_learn_different_pieces(english):
    assert learn_sentencepiece(english, 400, "unigram") != learn_sentencepiece(english, 400, "bpe")


def test_learning_prints_nothing_when_the_vocabulary_is_reached(english, capfd):
    learn_sentencepiece(english, 400, field="data.target_vocab_size")
    assert capfd.readouterr() == ("", "")


def test_numbers_split_into_digits_even_when_learned_often():
    texts = [f"In 1987 I paid {n} euros for 1987 books." for n in range(100, 400)]
    tokenizer = SentencePieceTokenizer(learn_sentencepiece(texts, 300))
    pieces = [tokenizer.vocab[i] for i in tokenizer.tokenize(tf.constant(["1987"]))[0].numpy()]
    assert [piece.lstrip("▁") for piece in pieces if piece != "▁"] == ["1", "9", "8", "7"]


def test_a_model_without_the_reserved_tokens_first_is_refused(english):
    import io

    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(english), model_writer=model, vocab_size=400, minloglevel=2, num_threads=1
    )
    with pytest.raises(ValueError) as error:
        SentencePieceTokenizer(model.getvalue())
    assert str(error.value) == "Expected the pieces to start with ['[PAD]', '[UNK]', '[START]', '[END]']"


@pytest.mark.slow
@pytest.mark.core
def test_saved_models_keep_each_tokenizer_s_own_model(english, tmp_path):
    # tensorflow-text finds a loaded model by name, process-wide: same-named models got mixed up.
    spanish = [line.split("\t")[1] for line in SAMPLE.read_text(encoding="utf-8").splitlines()[:2000]]
    models = [learn_sentencepiece(english, 400), learn_sentencepiece(spanish, 500)]

    class Pair(tf.Module):
        def __init__(self, first, second):
            super().__init__()
            self.first, self.second = SentencePieceTokenizer(first), SentencePieceTokenizer(second)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
        def serve(self, text):
            return {"first": self.first.tokenize(text).to_tensor(), "second": self.second.tokenize(text).to_tensor()}

    text = tf.constant(["¿Dónde está la estación? Where is the station?"])
    expected = {}
    for name, pair in (("a", models), ("b", models[::-1])):
        module = Pair(*pair)
        expected[name] = {key: value.numpy().tolist() for key, value in module.serve(text).items()}
        tf.saved_model.save(module, str(tmp_path / name), signatures={"serving_default": module.serve})
    assert expected["a"]["first"] != expected["a"]["second"]
    for name in ("a", "b"):
        served = tf.saved_model.load(str(tmp_path / name)).signatures["serving_default"](text)
        assert {key: value.numpy().tolist() for key, value in served.items()} == expected[name]


@pytest.mark.parametrize("message", ["Vocabulary size 5 vs 6 is too small", "required_chars: too many"])
def test_a_trainer_error_other_than_too_few_pieces_is_raised_as_it_is(monkeypatch, message):
    import sentencepiece

    def fail(**_):
        raise RuntimeError(message)

    monkeypatch.setattr(sentencepiece.SentencePieceTrainer, "train", fail)
    with pytest.raises(RuntimeError, match=message):
        learn_sentencepiece(["a b c"], 400)
