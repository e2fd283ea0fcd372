"""The export of every encoder-decoder task (translation, toy, captioning): one module, its input read by a reader.

`make_encoder_decoder_module` builds the `tf.Module` a task exports; what differs between
tasks is how a request's input becomes the model's input, which a reader
says: `text_reader` tokenizes texts (toy; translation's splits them into
sentences first), the captioner's `image_reader`
(`seqtasks.tasks.captioning.export`) decodes images and runs the backbone.
Every signature decodes through `seqtasks.decoding.search`.
"""

from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID


def make_encoder_decoder_module(model, reader, tokenizer, output_name, decoding):
    """A `tf.Module` whose `serve` maps `reader`'s input `[None]` to `output_name` and `score`.

    With the recipe's `decoding.n_best` > 1, `serve` also returns the
    `n_best` best, best first: `output_name + "s"` and `"scores"`,
    `[None, n_best]`. `serving_signatures()` names every signature the
    export holds: `serve` as `serving_default`; `with_settings`, which also
    takes the decoding settings (`seqtasks.encoder_decoder.settings_inputs`) and
    always returns the n-best outputs (the module keeps the recipe's settings,
    `decoding_defaults`, for the clients that send some); `with_prefix`, the same with a
    `prefix` text per input that every output starts with (the search
    continues it); `score`, which takes a `target` text
    per input and returns its length-normalised `score` (as the searches
    score), `log_prob`, and per token `target_tokens` and `token_log_probs`
    (the end token included; "" and 0 on padding); and, for a model with attention,
    `attention`: the default decoding's best output and `reader`'s attention
    outputs (for texts, `text_reader`'s).

    A reader with `split` has each input decoded in parts (`text_reader`:
    its sentences): `serve`, `with_settings` and `with_prefix` decode the
    parts of the whole request as one batch, every setting applying to each
    part, and `split`'s `join` makes each input's outputs of its parts'
    (a prefix is forced on an input's first part). `score` and `attention`
    read each input whole, as one part.

    Args:
        model: the encoder-decoder (`encode`, `decode_step`, `attention`).
        reader: a `tf.Module` with `spec` (the input's `tf.TensorSpec`),
            `read(values) -> (inputs, count, blank)` (the model's inputs, the
            number of requested examples among their rows, and which of them
            get an empty output, or None) and `attention_outputs(inputs,
            tokens, weights, mask)`; optionally `split(values, prefix=None)
            -> (parts, part_prefix, join)`: values `[N]` as parts `[M]` to
            `read` (at least one), `prefix` `[N]` as `[M]` (None for None),
            and `join(outputs, scores) -> (outputs, scores)`, which maps the
            parts' output texts and scores, `[M]` or `[M, K]`, to the
            inputs', `[N]` or `[N, K]`.
        tokenizer: the output vocabulary's tokenizer (`detokenize`, `vocab`).
        output_name: the export's text output, e.g. `"translation"`.
        decoding: the recipe's `model.decoding`.
    """
    import tensorflow as tf

    from seqtasks.decoding.model_search import score_ids, search
    from seqtasks.encoder_decoder.decoding import make_decode
    from seqtasks.encoder_decoder.settings_inputs import (
        DEFAULTS_ATTRIBUTE,
        defaults_variable,
        read_settings,
        settings_specs,
    )
    from seqtasks.export.signatures import (
        ATTENTION_SIGNATURE,
        PREFIX_SIGNATURE,
        SCORE_SIGNATURE,
        SETTINGS_SIGNATURE,
    )

    attends = getattr(model.decoder_layer, "attention", "none") != "none"
    # The recipe's settings, kept by the export: a client that sends some gets the rest from it.
    kept_settings = defaults_variable(decoding)
    # With the recipe's n_best above 1, `serve` returns the lists too.
    decode = make_decode(model, decoding, lists=decoding.n_best > 1)
    prefix_spec = tf.TensorSpec([None], tf.string, name="prefix")

    def split(value, prefix=None):
        if hasattr(reader, "split"):
            return reader.split(value, prefix)
        return value, prefix, None

    # Each search is traced once, and every signature that decodes with it calls that one function: the
    # export holds one copy of each search graph, which is most of what tracing, saving and loading cost
    # (BENCHMARKS.md, "Graph costs"). AutoGraph is off: every loop is already a `while_loop`.
    def search_as_recipe(value):
        inputs, count, blank = reader.read(value)
        ids, lengths, scores = decode(inputs)
        return inputs, count, blank, ids, lengths, scores

    def search_as_requested(value, prefix, *settings):
        settings = read_settings(*settings, attends=attends)
        parts, prefix, join = split(value, prefix)
        inputs, count, blank = reader.read(parts)
        # An empty prefix forces nothing: `with_settings` is `with_prefix` with "" for every input.
        forced = target_ids(tokenizer, prefix, tf.shape(inputs)[0], end=False)
        ids, _, scores = search(model, inputs, settings, prefix=forced, lists=True)
        return serving_outputs(tokenizer, ids[:count], scores[:count], output_name, blank, join)

    recipe_search = tf.function(search_as_recipe, input_signature=[reader.spec], autograph=False)
    requested_search = tf.function(
        search_as_requested, input_signature=[reader.spec, prefix_spec, *settings_specs()], autograph=False
    )

    class EncoderDecoderModule(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.reader = reader
            self.tokenizer = tokenizer
            setattr(self, DEFAULTS_ATTRIBUTE, kept_settings)
            # Only then: saving traces every tf.function a module holds.
            if attends:
                self.attention = tf.function(self._attention, input_signature=[reader.spec], autograph=False)

        @tf.function(input_signature=[reader.spec], autograph=False)
        def serve(self, value):
            parts, _, join = split(value)
            _, count, blank, ids, _, scores = recipe_search(parts)
            return serving_outputs(self.tokenizer, ids[:count], scores[:count], output_name, blank, join)

        @tf.function(input_signature=[reader.spec, *settings_specs()], autograph=False)
        def serve_with_settings(self, value, *settings):
            return requested_search(value, tf.fill(tf.shape(value), ""), *settings)

        @tf.function(input_signature=[reader.spec, prefix_spec, *settings_specs()], autograph=False)
        def serve_with_prefix(self, value, prefix, *settings):
            tf.debugging.assert_equal(
                tf.shape(value)[0], tf.shape(prefix)[0], message="prefix: expected one per input"
            )
            return requested_search(value, prefix, *settings)

        @tf.function(input_signature=[reader.spec, tf.TensorSpec([None], tf.string, name="target")], autograph=False)
        def score(self, value, target):
            tf.debugging.assert_equal(
                tf.shape(value)[0], tf.shape(target)[0], message="target: expected one per input"
            )
            inputs, count, _ = self.reader.read(value)
            ids = target_ids(self.tokenizer, target, tf.shape(inputs)[0])
            tokens, total, normalised = score_ids(self.model, inputs, ids, decoding.length_penalty)
            strings = token_strings(self.tokenizer, ids, tf.not_equal(ids, PAD_ID))
            return {"score": normalised[:count], "log_prob": total[:count], "token_log_probs": tokens[:count],
                    "target_tokens": strings[:count]}

        def _attention(self, value):
            inputs, count, blank, ids, lengths, scores = recipe_search(value)
            if len(ids.shape) == 3:  # the n-best lists' best, as `serve` answers it
                ids, lengths, scores = ids[:, 0], lengths[:, 0], scores[:, 0]
            ids, scores, weights, mask = decoded_attention(self.model, (ids, lengths, scores), inputs, blank)
            outputs = serving_outputs(self.tokenizer, ids[:count], scores[:count], output_name, blank)
            tokens = token_strings(self.tokenizer, ids, mask)
            extra = self.reader.attention_outputs(inputs, tokens, tf.where(mask[:, :, None], weights, 0.0), mask)
            outputs.update({key: value[:count] for key, value in extra.items()})
            return outputs

        def serving_signatures(self):
            signatures = {"serving_default": self.serve, SETTINGS_SIGNATURE: self.serve_with_settings,
                          PREFIX_SIGNATURE: self.serve_with_prefix, SCORE_SIGNATURE: self.score}
            if hasattr(self, "attention"):
                signatures[ATTENTION_SIGNATURE] = self.attention
            return signatures

    return EncoderDecoderModule()


def target_ids(tokenizer, target, rows, end=True):
    """Target texts `[None]` as `(rows, T)` ids: their tokens, cut to fit `MAX_DECODE_LENGTH`, then `END_ID`
    (unless not `end`: a prefix); `PAD_ID` after, and in the rows past the texts (a reader may pad its batch)."""
    import tensorflow as tf

    from seqtasks.decoding.settings import MAX_DECODE_LENGTH
    from seqtasks.export.serving_limits import cut_text

    tokens = tokenizer.tokenize(cut_text(target, MAX_DECODE_LENGTH))[:, : MAX_DECODE_LENGTH - 1]
    if end:
        tokens = tf.concat([tokens, tf.fill([tokens.nrows(), 1], tf.constant(END_ID, tokens.dtype))], axis=1)
    ids = tf.cast(tokens.to_tensor(default_value=PAD_ID), tf.int32)
    return tf.pad(ids, [[0, rows - tf.shape(ids)[0]], [0, 0]])


def text_reading_limits(limit, why):
    """The model card's lines on what a `text_reader(..., limit, by_sentence=True)` reads of a text; `why` says
    where `limit` comes from."""
    from seqtasks.export.serving_limits import MAX_SENTENCES, text_character_limit

    return [
        f"Only the first {text_character_limit(limit):,} characters of a text are read.",
        f"A text is read sentence by sentence, at most {MAX_SENTENCES} (later ones are read with the last, as "
        f"one). A sentence of at most {limit} tokens ({why}) is read whole; a longer one is read in parts of at "
        "most as many, cut after its clause punctuation (, ; :), else between words, each part translated on its "
        "own and the parts joined with the whitespace between them.",
    ]


def text_reader(tokenizer, max_length, by_sentence=False):
    """A reader of texts `text` `[None]` for `make_encoder_decoder_module`: `TextReader`, each text read whole, or with
    `by_sentence` (translation) `SentenceReader`, each text's sentences decoded on their own."""
    import tensorflow as tf

    from seqtasks.export.serving_limits import MAX_SENTENCES, cut_text
    from seqtasks.text.clauses import split_long_graph
    from seqtasks.text.sentences import sentence_case_graph, split_sentences_graph, upper_case_graph

    def capped(sentences, separators):
        """At most `MAX_SENTENCES` sentences a text: the later ones join the last kept, with their separators."""
        rows = sentences.value_rowids()
        position = tf.range(tf.shape(rows, out_type=tf.int64)[0]) - tf.gather(sentences.row_starts(), rows)
        lengths = tf.minimum(sentences.row_lengths(), MAX_SENTENCES)
        group = tf.gather(tf.cumsum(lengths, exclusive=True), rows) + tf.minimum(position, MAX_SENTENCES - 1)
        after = tf.gather(separators.flat_values, tf.gather(separators.row_starts(), rows) + position + 1)
        closes_group = tf.logical_or(position < MAX_SENTENCES - 1,
                                     tf.equal(position, tf.gather(sentences.row_lengths(), rows) - 1))
        pieces = sentences.flat_values + tf.where(closes_group, "", after)
        joined = tf.strings.unsorted_segment_join(pieces, group, tf.reduce_sum(lengths))
        return tf.RaggedTensor.from_row_lengths(joined, lengths), separators

    class TextReader(tf.Module):
        """Texts cut to `text_character_limit(max_length)` characters, then to `max_length` tokens.

        A text with no tokens (empty, blank) gets an empty output and a score
        of 0.0, the log-probability of a certain output. Its attention
        outputs are `source_tokens` `[None, S]`, `target_tokens` `[None, T]`
        (the end token included; both padded with "") and `attention`
        `[None, T, S]` (0 on padding).
        """

        spec = tf.TensorSpec([None], tf.string, name="text")

        def __init__(self):
            super().__init__()
            self.tokenizer = tokenizer

        def read(self, text):
            tokens = self.tokenizer.tokenize(cut_text(text, max_length))[:, :max_length]
            # At least one column keeps the encoder's time axis non-empty.
            source = tokens.to_tensor(default_value=PAD_ID)
            source = tf.pad(source, [[0, 0], [0, tf.maximum(0, 1 - tf.shape(source)[1])]])
            # The decoder would write something even for no input.
            return source, tf.shape(source)[0], tf.equal(tokens.row_lengths(), 0)

        def attention_outputs(self, source, tokens, weights, mask):
            source_mask = tf.not_equal(source, PAD_ID)
            return {
                "source_tokens": token_strings(self.tokenizer, source, source_mask),
                "target_tokens": tokens,
                "attention": tf.where(source_mask[:, None, :], weights, 0.0),
            }

    class SentenceReader(TextReader):
        """A `TextReader` whose texts are translated sentence by sentence.

        `split` cuts each text into its sentences
        (`seqtasks.text.sentences.split_sentences`), at most
        `MAX_SENTENCES` (later ones are read with the last, as one); each is
        read as its own example and decoded with every setting (`max_length`,
        `n_best`, ...) applying to it alone. A sentence of more than
        `max_length` tokens, longer than any the model trained on, is read in
        parts instead: cut after its clause punctuation, else between words,
        into parts of at most `max_length` tokens
        (`seqtasks.text.clauses.split_long`), each decoded on its own and
        joined with the whitespace between them. A sentence of at
        least two words and no lower-case letter ("EL PERRO ESTÁ EN EL
        JARDÍN."; "OK." and "USA." are read as written) is read in sentence case ("El perro está en el jardín.",
        `seqtasks.text.sentences.sentence_case`), as the cased subwords have
        seen such text, and its output is upper-cased back, a prefix forced
        on it included; mixed case is read as it is.

        A text's output is its sentences' outputs joined with the whitespace
        that separates those sentences in the text (none before the first
        nor after the last); its score is the mean of their scores (a
        sentence read in parts: the mean of its parts'). The k-th of its
        n-best outputs joins the k-th best output of each part, scored
        alike. A prefix is forced on a text's first
        sentence. A text without sentences (empty, blank) gets an empty
        output and a score of 0.0, as does a sentence with no tokens: 0.0 is
        the log-probability of a certain output.

        `score` and `attention` read each text whole, as one sentence, its
        case as given, as a `TextReader` does.
        """

        def split(self, text, prefix=None):
            sentences, separators = capped(*split_sentences_graph(cut_text(text, max_length)))
            rows, sentence_starts = sentences.value_rowids(), sentences.row_starts()
            position = tf.range(tf.shape(rows, out_type=tf.int64)[0]) - tf.gather(sentence_starts, rows)
            # The separator before each sentence: none before a text's first.
            separator = tf.gather(separators.row_starts(), rows) + position
            before = tf.where(position > 0, tf.gather(separators.flat_values, separator), "")
            cased, shouted = sentence_case_graph(sentences.flat_values)
            clauses, between = split_long_graph(cased, self.count_tokens, max_length)
            # Each part: a sentence, or a part of a sentence too long to read whole.
            owner = clauses.value_rowids()
            opens = tf.equal(tf.range(tf.size(owner, out_type=tf.int64)), tf.gather(clauses.row_starts(), owner))
            parts = clauses.flat_values
            before = tf.where(opens, tf.gather(before, owner), between.flat_values)
            shouted = tf.gather(shouted, owner)
            count = tf.shape(parts)[0]
            # A request of blank texts still reads one (blank) part: the search needs a row.
            padding = tf.fill([tf.maximum(0, 1 - count)], "")
            if prefix is not None:
                first = tf.logical_and(opens, tf.gather(position, owner) == 0)
                prefix = tf.concat([tf.where(first, tf.gather(tf.gather(prefix, rows), owner), ""), padding], 0)

            def join(outputs, scores):
                outputs, scores = outputs[:count], scores[:count]
                rank = outputs.shape.rank
                shouting = shouted if rank == 1 else shouted[:, None]
                outputs = tf.where(shouting, upper_case_graph(outputs), outputs)
                outputs = (before if rank == 1 else before[:, None]) + outputs
                by_sentence = tf.RaggedTensor.from_row_splits
                joined = tf.strings.reduce_join(by_sentence(outputs, clauses.row_splits), axis=1)
                joined = tf.strings.reduce_join(by_sentence(joined, sentences.row_splits), axis=1)
                # A sentence's score is the mean of its parts', a text's the mean of its sentences'.
                parts_of = tf.cast(clauses.row_lengths(), scores.dtype)
                per_sentence = tf.reduce_sum(by_sentence(scores, clauses.row_splits), axis=1)
                per_sentence /= parts_of if rank == 1 else parts_of[:, None]
                total = tf.reduce_sum(by_sentence(per_sentence, sentences.row_splits), axis=1)
                counts = tf.cast(tf.maximum(sentences.row_lengths(), 1), scores.dtype)
                return joined, total / (counts if rank == 1 else counts[:, None])

            return tf.concat([parts, padding], 0), prefix, join

        def count_tokens(self, texts):
            return self.tokenizer.tokenize(texts).row_lengths()

    return SentenceReader() if by_sentence else TextReader()


def decoded_attention(model, decoded, inputs, blank=None):
    """The best output `decoded` for `inputs` and the attention the decoder gave while writing it.

    `decoded` is a search's `(ids, lengths, scores)` of the best outputs.
    Feeding the output back through `model.attention` gives the weights of
    its own decoding. Returns `(ids, scores, weights, mask)`: `ids` `[batch,
    T]` cut to the longest output, `weights` float32 `[batch, T, source]`,
    `mask` `[batch, T]` true up to each output's end token; rows where
    `blank` is true have no output.
    """
    import tensorflow as tf

    ids, lengths, scores = decoded
    if blank is not None:
        lengths = tf.where(blank, 0, lengths)
    ids = ids[:, : tf.maximum(1, tf.reduce_max(lengths))]
    start = tf.fill([tf.shape(ids)[0], 1], START_ID)
    weights = tf.cast(model.attention(inputs, tf.concat([start, ids[:, :-1]], 1)), tf.float32)
    return ids, scores, weights, tf.sequence_mask(lengths, tf.shape(ids)[1])


def token_strings(tokenizer, ids, mask):
    """The vocabulary entries of `ids` `[batch, time]`, "" where `mask` is false."""
    import tensorflow as tf

    strings = tf.gather(tf.constant(tokenizer.vocab), tf.cast(ids, tf.int32))
    return tf.where(mask, strings, "")


def serving_outputs(tokenizer, ids, scores, output_name, blank=None, join=None):
    """An export's outputs from decoded `ids`: `output_name` and `score`; from n-best lists (`ids`
    `[batch, n_best, time]`, of any n_best) also `output_name + "s"` and `"scores"` `[batch, n_best]`, best first.

    Rows where `blank` is true get empty texts and a score of 0.0. A reader's
    `join` (see `make_encoder_decoder_module`), when given, then makes the rows' texts and
    scores those of the inputs they are parts of.
    """
    import tensorflow as tf

    lists = len(ids.shape) == 3
    if not lists:
        texts = tokenizer.detokenize(ids)
    else:
        texts = tokenizer.detokenize(tf.reshape(ids, [-1, tf.shape(ids)[2]]))
        texts = tf.reshape(texts, [-1, tf.shape(ids)[1]])
    if blank is not None:
        rows = blank[:, None] if lists else blank
        texts, scores = tf.where(rows, "", texts), tf.where(rows, tf.zeros_like(scores), scores)
    if join is not None:
        texts, scores = join(texts, scores)
    if not lists:
        return {output_name: texts, "score": scores}
    return {output_name: texts[:, 0], "score": scores[:, 0], output_name + "s": texts, "scores": scores}
