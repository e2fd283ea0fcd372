"""Translation: an attention encoder-decoder over SentencePiece or WordPiece subwords, BLEU and chrF, a string SavedModel."""

import unicodedata

import numpy as np

from seqtasks.evaluation.length_buckets import report_lines
from seqtasks.text.special_ids import START_ID
from seqtasks.tasks.base import Evaluation, Task

_BUCKETS = [6, 9, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100]
VOCABULARY_FILES = {
    "wordpiece": ("source_vocab.txt", "target_vocab.txt"),
    "sentencepiece": ("source.spm.model", "target.spm.model"),
}
_HEATMAPS = 3


def make_dataset(pairs, source_tokenizer, target_tokenizer, max_length, batch_size, shuffle_seed=None, augmenter=None):
    """Tokenized, length-filtered, length-bucketed batches `((source, target_in), target_out)`.

    Pairs whose source or target (with `[START]`/`[END]`) exceed `max_length`
    subwords are left out; batches group sentences of similar length so little
    of each batch is padding. With an `augmenter`
    (`seqtasks.data.augmentation.PairAugmenter`; training, with a
    `shuffle_seed`), the pairs kept are transformed by each epoch's draws
    before they are tokenized, and a joined example may hold
    `augmenter.joins * max_length` subwords a side.
    """
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches
    from seqtasks.text.special_ids import END_ID

    def tokenized(sources, targets):
        return source_tokenizer.tokenize(sources), target_tokenizer.tokenize(targets)

    def within(limit):
        return lambda s, t: tf.logical_and(tf.logical_and(tf.size(s) > 0, tf.size(s) <= limit), tf.size(t) + 1 <= limit)

    def with_ends(s, t):
        return s, tf.concat([[START_ID], t], 0), tf.concat([t, [END_ID]], 0)

    sources = tf.constant([source for source, _ in pairs])
    targets = tf.constant([target for _, target in pairs])
    data = tf.data.Dataset.from_tensor_slices((sources, targets)).batch(1024)
    per_epoch, limit = None, max_length
    if augmenter is None or shuffle_seed is None:
        data = data.map(tokenized, num_parallel_calls=tf.data.AUTOTUNE).unbatch().filter(within(max_length))
        data = data.map(with_ends)
    else:
        # The pairs that fit are kept as text and tokens, numbered for their draws; each epoch tokenizes again
        # only what its draws change.
        def measured(sources, targets):
            return (sources, targets, *tokenized(sources, targets))

        def fits(source, target, source_ids, target_ids):
            return within(max_length)(source_ids, target_ids)

        def numbered(index, element):
            return (index, *element)

        data = data.map(measured, num_parallel_calls=tf.data.AUTOTUNE).unbatch().filter(fits)
        data = data.enumerate().map(numbered)
        limit = max_length * augmenter.joins
        epochs = augmenter.epochs(len(pairs), source_tokenizer.tokenize, target_tokenizer.tokenize)

        def per_epoch(elements, epoch):
            return epochs(elements, epoch).filter(within(limit)).map(with_ends)

    boundaries = [b for b in _BUCKETS if b < limit + 1]
    data = bucketed_batches(
        data,
        len(pairs),
        lambda s, t_in, t_out: tf.maximum(tf.size(s), tf.size(t_in)),
        boundaries,
        batch_size,
        shuffle_seed,
        per_epoch=per_epoch,
    )
    return data.map(lambda s, t_in, t_out: ((s, t_in), t_out)).prefetch(tf.data.AUTOTUNE)


def normalize_reference(text, lower_case):
    """A reference as the outputs are written: NFKC, case-folded when the recipe folds case."""
    text = unicodedata.normalize("NFKC", text)
    return text.casefold() if lower_case else text


class TranslationTask(Task):
    """Sentence pairs from a TSV file -> subword vocabularies -> `Seq2Seq` -> BLEU, chrF, heatmaps."""

    def read_splits(self):
        from seqtasks.data.parallel_corpus import split_by_source

        data = self.recipe.data
        seed = self.recipe.seed if data.split_seed is None else data.split_seed
        return split_by_source(self._read(data.path), data.validation_size, seed)

    def read_file(self, path):
        return self._read(path)

    def _read(self, path):
        from seqtasks.data.parallel_corpus import read_parallel_tsv

        config = self.recipe.data
        return read_parallel_tsv(path, config.source_column, config.target_column, config.encoding)

    def prepare(self, train, validation, run_dir):
        from seqtasks.utils.io_utils import write_bytes_atomic

        config = self.recipe.data
        print(f"Pairs: {len(train)} training, {len(validation)} validation")
        sources, targets = [s for s, _ in train], [t for _, t in train]
        if config.shared_vocabulary:
            shared = self._learn(sources + targets, config.source_vocab_size, "data.source_vocab_size")
            vocabularies = (shared, shared)
        else:
            vocabularies = (
                self._learn(sources, config.source_vocab_size, "data.source_vocab_size"),
                self._learn(targets, config.target_vocab_size, "data.target_vocab_size"),
            )
        for name, vocabulary in zip(VOCABULARY_FILES[config.tokenizer], vocabularies):
            write_bytes_atomic(run_dir / name, vocabulary)
        self._set_vocabularies(*vocabularies)
        shared = " (shared)" if config.shared_vocabulary else ""
        print(
            f"Vocabularies{shared}: {self.source_tokenizer.vocab_size} source, "
            f"{self.target_tokenizer.vocab_size} target {config.tokenizer} subwords"
        )

    def _learn(self, texts, size, field):
        """A vocabulary as the bytes of its run-folder file: a SentencePiece model, or WordPiece lines."""
        config = self.recipe.data
        if config.tokenizer == "sentencepiece":
            from seqtasks.text.sentencepiece_tokenizer import learn_sentencepiece

            return learn_sentencepiece(texts, size, config.sentencepiece_model, config.lower_case, field)
        from seqtasks.text.subword_tokenizer import learn_vocabulary

        return ("\n".join(learn_vocabulary(texts, size, config.lower_case, field)) + "\n").encode("utf-8")

    def restore(self, run_dir):
        from seqtasks.training.run_folders import read_bytes

        self._set_vocabularies(*(read_bytes(run_dir, name) for name in VOCABULARY_FILES[self.recipe.data.tokenizer]))

    def _set_vocabularies(self, source_vocabulary, target_vocabulary):
        config = self.recipe.data
        if config.tokenizer == "sentencepiece":
            from seqtasks.text.sentencepiece_tokenizer import SentencePieceTokenizer as tokenizer
        else:
            from seqtasks.text.subword_tokenizer import SubwordTokenizer

            def tokenizer(data, lower_case):
                return SubwordTokenizer(data.decode("utf-8").splitlines(), lower_case)

        self.source_tokenizer = tokenizer(source_vocabulary, config.lower_case)
        self.target_tokenizer = tokenizer(target_vocabulary, config.lower_case)

    def vocabularies(self):
        return {"source": list(self.source_tokenizer.vocab), "target": list(self.target_tokenizer.vocab)}

    @property
    def trained_limit(self):
        """The most subwords of a source training reads, joined examples included."""
        config = self.recipe.data
        return config.max_length * (config.augment.join_max if config.augment.join > 0 else 1)

    @property
    def source_limit(self):
        """The most subwords of a sentence the export reads whole (`data.split_longer_than`, else
        `trained_limit`); it splits a longer one at its clauses."""
        return self.recipe.data.split_longer_than or self.trained_limit

    def augmenter(self, train):
        """The recipe's `data.augment` for these training pairs (None when it changes nothing)."""
        from seqtasks.data.augmentation import PairAugmenter, capitalised_words

        augment = self.recipe.data.augment
        if not augment.enabled:
            return None
        names = [capitalised_words([pair[side] for pair in train]) for side in (0, 1)] if augment.join else ([], [])
        return PairAugmenter(augment, self.recipe.seed, *names)

    def datasets(self, train, validation):
        config, batch_size = self.recipe.data, self.recipe.training.batch_size
        train_data = make_dataset(
            train, self.source_tokenizer, self.target_tokenizer, config.max_length, batch_size, self.recipe.seed,
            augmenter=self.augmenter(train),
        )
        validation_data = make_dataset(
            validation, self.source_tokenizer, self.target_tokenizer, config.max_length, batch_size
        )
        # One pass fills the pipeline's cache and measures the target tokens per batch.
        tokens = batches = 0
        for _, target_out in train_data:
            tokens += int(np.count_nonzero(target_out.numpy()))
            batches += 1
        self._target_tokens_per_batch = tokens / max(1, batches)
        return train_data, validation_data

    def build_model(self):
        from seqtasks.models import Seq2Seq

        return Seq2Seq.from_recipe(
            self.recipe.model,
            self.source_tokenizer.vocab_size,
            self.target_tokenizer.vocab_size,
            seed=self.recipe.seed,
        )

    def compile_model(self, model):
        from seqtasks.encoder_decoder.training import compile_model

        compile_model(model, self.recipe.training)

    def training_metrics(self, train, validation, history):
        return {
            "train_pairs": len(train),
            "validation_pairs": len(validation),
            # Wall time of `fit`, validation passes and tracing included.
            "train_target_tokens_per_second": round(
                self._target_tokens_per_batch * history.batches_seen / history.train_seconds, 1
            ),
        }

    def evaluate(self, model, examples, out_dir):
        """BLEU and chrF of the recipe's decoding on the pairs; `translations.tsv` and heatmaps in `out_dir`.

        A source is read whole up to `source_limit` subwords, as the export
        reads it; a longer one (the export reads it in parts) is cut there.

        BLEU (sacrebleu's 13a tokenization) and chrF compare the outputs with
        the references as written (NFKC), case included, as the field reports
        them; `bleu_lowercase` beside them ignores case.
        """
        import sacrebleu
        import tensorflow as tf

        from seqtasks.errors import SeqtasksError
        from seqtasks.utils.io_utils import write_text_atomic
        from seqtasks.encoder_decoder.decoding import decode_id_rows, make_decode, pad_rows

        if not examples:
            raise SeqtasksError("no sentence pairs to evaluate")
        config, decoding = self.recipe.data, self.recipe.model.decoding
        sources = [s for s, _ in examples]
        source_rows = [
            row[: self.source_limit] for row in self.source_tokenizer.tokenize(tf.constant(sources)).to_list()
        ]
        timings = {}
        output_ids = pad_rows(
            decode_id_rows(make_decode(model, decoding), model, source_rows, self.recipe.evaluation.batch_size, timings),
            decoding.max_length,
        )
        hypotheses = [text.decode() for text in self.target_tokenizer.detokenize(output_ids).numpy()]
        references = [normalize_reference(t, lower_case=False) for _, t in examples]
        bleu_metric, lowercase_metric, chrf_metric = sacrebleu.BLEU(), sacrebleu.BLEU(lowercase=True), sacrebleu.CHRF()
        bleu = bleu_metric.corpus_score(hypotheses, [references])
        bleu_lowercase = lowercase_metric.corpus_score(hypotheses, [references])
        chrf = chrf_metric.corpus_score(hypotheses, [references])
        write_text_atomic(
            out_dir / "translations.tsv",
            "".join(f"{s}\t{h}\t{r}\n" for s, h, r in zip(sources, hypotheses, references)),
        )
        report = []
        if self.recipe.model.attention.type == "none":
            report.append("Attention heatmaps: none drawn, this model has no attention (model.attention.type: none)")
        else:
            self._write_heatmaps(model, source_rows, output_ids, out_dir)
        by_length = self._scores_by_length(sources, hypotheses, references)
        report += ["Sample translations:"]
        for index in range(min(5, len(hypotheses))):
            report += [f"  {sources[index]}", f"    -> {hypotheses[index]}", f"    reference: {references[index]}"]
        metrics = {
            "validation": {"bleu": bleu.score, "chrf": chrf.score, "bleu_lowercase": bleu_lowercase.score},
            "sacrebleu_signatures": {
                "bleu": str(bleu_metric.get_signature()),
                "chrf": str(chrf_metric.get_signature()),
                "bleu_lowercase": str(lowercase_metric.get_signature()),
            },
            "decoding": {"beam_width": decoding.beam_width, "length_penalty": decoding.length_penalty},
            # Batches of `evaluation.batch_size`, sorted by length; tracing the decoder once included or not.
            "decode_sentences_per_second": round(len(hypotheses) / timings["decode_seconds"], 1),
            "decode_sentences_per_second_with_tracing": round(
                len(hypotheses) / (timings["decode_seconds"] + timings["trace_seconds"]), 1
            ),
            "by_length": by_length,
        }
        return Evaluation(metrics, report + report_lines(by_length, ["bleu", "chrf"]))

    def _scores_by_length(self, sources, hypotheses, references):
        """BLEU and chrF of each bucket of source lengths in words (whitespace-separated)."""
        import sacrebleu

        from seqtasks.evaluation.length_buckets import scores_by_length

        def score(indices):
            outputs, wanted = [hypotheses[i] for i in indices], [[references[i] for i in indices]]
            return {
                "bleu": sacrebleu.BLEU().corpus_score(outputs, wanted).score,
                "chrf": sacrebleu.CHRF().corpus_score(outputs, wanted).score,
            }

        lengths = [len(source.split()) for source in sources]
        return scores_by_length(lengths, self.recipe.evaluation.length_buckets, score, "source words")

    def _write_heatmaps(self, model, source_rows, output_ids, out_dir):
        from seqtasks.evaluation.plots import save_attention_heatmap

        folder = out_dir / "attention"
        folder.mkdir(exist_ok=True)
        for index in range(min(_HEATMAPS, len(source_rows))):
            source_tokens, target_tokens, weights = self._attention_map(model, source_rows[index], output_ids[index])
            save_attention_heatmap(weights, source_tokens, target_tokens, folder / f"attention_{index}.png")

    def _attention_map(self, model, source_row, output_ids):
        from seqtasks.encoder_decoder.decoding import decoded_prefix

        output = decoded_prefix(output_ids)
        if not source_row:  # nothing to attend to: an empty text translates to nothing
            return [], [], np.zeros((0, 0), np.float32)
        target_in = np.array([[START_ID] + output[:-1]], np.int32)
        weights = np.asarray(model.attention(np.array([source_row], np.int32), target_in))[0]
        source_vocab, target_vocab = self.source_tokenizer.vocab, self.target_tokenizer.vocab
        return [source_vocab[i] for i in source_row], [target_vocab[i] for i in output], weights

    def reading_limits(self):
        from seqtasks.encoder_decoder.export import text_reading_limits

        config = self.recipe.data
        if config.split_longer_than:
            why = f"`data.split_longer_than`; the longest source trained on holds {self.trained_limit}"
        elif self.trained_limit > config.max_length:
            why = ("`data.max_length` x `data.augment.join_max`, the longest source trained on, pairs joined by "
                   "`data.augment.join`")
        else:
            why = "`data.max_length`, the longest source trained on"
        return text_reading_limits(self.source_limit, why)

    def serving_module(self, model):
        from seqtasks.encoder_decoder.export import make_encoder_decoder_module, text_reader

        reader = text_reader(self.source_tokenizer, self.source_limit, by_sentence=True)
        return make_encoder_decoder_module(model, reader, self.target_tokenizer, "translation", self.recipe.model.decoding)
