"""Translation: an attention encoder-decoder over WordPiece subwords, BLEU and chrF, a string SavedModel."""

import time
import unicodedata

import numpy as np

from seqtasks.text.subword_tokenizer import END_ID, START_ID

_BUCKETS = [6, 9, 12, 16, 20, 25, 32, 40, 50, 64, 80, 100]


def make_dataset(pairs, source_tokenizer, target_tokenizer, max_length, batch_size, shuffle_seed=None):
    """Tokenized, length-filtered, length-bucketed batches `((source, target_in), target_out)`.

    Pairs whose source or target (with `[START]`/`[END]`) exceed `max_length`
    subwords are left out; batches group sentences of similar length so little
    of each batch is padding.
    """
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    sources = tf.constant([source for source, _ in pairs])
    targets = tf.constant([target for _, target in pairs])
    data = tf.data.Dataset.from_tensor_slices((sources, targets)).batch(1024)
    data = data.map(
        lambda s, t: (source_tokenizer.tokenize(s), target_tokenizer.tokenize(t)),
        num_parallel_calls=tf.data.AUTOTUNE,
    ).unbatch()
    data = data.filter(
        lambda s, t: tf.logical_and(
            tf.logical_and(tf.size(s) > 0, tf.size(s) <= max_length), tf.size(t) + 1 <= max_length
        )
    )
    data = data.map(
        lambda s, t: (s, tf.concat([[START_ID], t], 0), tf.concat([t, [END_ID]], 0))
    )
    boundaries = [b for b in _BUCKETS if b < max_length + 1]
    data = bucketed_batches(
        data,
        len(pairs),
        lambda s, t_in, t_out: tf.maximum(tf.size(s), tf.size(t_in)),
        boundaries,
        batch_size,
        shuffle_seed,
    )
    return data.map(lambda s, t_in, t_out: ((s, t_in), t_out)).prefetch(tf.data.AUTOTUNE)


def _normalize_reference(text, lower_case):
    text = unicodedata.normalize("NFKC", text)
    return text.casefold() if lower_case else text


def _count_target_tokens(dataset):
    tokens = batches = 0
    for _, target_out in dataset:
        tokens += int(np.count_nonzero(target_out.numpy()))
        batches += 1
    return tokens, batches


def _load_pairs(recipe):
    from seqtasks.data.parallel_corpus import read_parallel_tsv, split_by_source

    config = recipe.data
    pairs = read_parallel_tsv(config.path, config.source_column, config.target_column, config.encoding)
    return split_by_source(pairs, config.validation_size, recipe.seed)


def run(recipe, run_dir):
    """Trains, evaluates (BLEU, chrF, attention heatmaps) and exports; returns the metrics."""
    import keras

    from seqtasks.io_utils import write_text_atomic
    from seqtasks.models import Seq2Seq
    from seqtasks.tasks.seq2seq_common import compile_model
    from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary
    from seqtasks.training import fit_metrics, train_model

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    config = recipe.data
    train_pairs, validation_pairs = _load_pairs(recipe)
    print(f"Pairs: {len(train_pairs)} training, {len(validation_pairs)} validation")

    source_vocab = learn_vocabulary(
        [s for s, _ in train_pairs], config.source_vocab_size, config.lower_case, "data.source_vocab_size"
    )
    target_vocab = learn_vocabulary(
        [t for _, t in train_pairs], config.target_vocab_size, config.lower_case, "data.target_vocab_size"
    )
    write_text_atomic(run_dir / "source_vocab.txt", "\n".join(source_vocab) + "\n")
    write_text_atomic(run_dir / "target_vocab.txt", "\n".join(target_vocab) + "\n")
    source_tokenizer = SubwordTokenizer(source_vocab, config.lower_case)
    target_tokenizer = SubwordTokenizer(target_vocab, config.lower_case)
    print(f"Vocabularies: {len(source_vocab)} source, {len(target_vocab)} target subwords")

    batch_size = recipe.training.batch_size
    train_data = make_dataset(
        train_pairs, source_tokenizer, target_tokenizer, config.max_length, batch_size, recipe.seed
    )
    validation_data = make_dataset(
        validation_pairs, source_tokenizer, target_tokenizer, config.max_length, batch_size
    )
    tokens_per_epoch, batches_per_epoch = _count_target_tokens(train_data)

    model, history, train_seconds = train_model(
        recipe,
        run_dir,
        lambda: Seq2Seq.from_recipe(recipe.model, len(source_vocab), len(target_vocab), seed=recipe.seed),
        lambda model: compile_model(model, recipe.training),
        train_data,
        validation_data,
    )

    metrics = fit_metrics("translation", history, train_seconds, model)
    metrics.update({
        "train_pairs": len(train_pairs),
        "validation_pairs": len(validation_pairs),
        # Wall time of `fit`, validation passes and tracing included.
        "train_target_tokens_per_second": round(
            tokens_per_epoch / batches_per_epoch * history.batches_seen / train_seconds, 1
        ),
    })
    metrics.update(
        evaluate_and_export(recipe, run_dir, model, source_tokenizer, target_tokenizer, validation_pairs)
    )
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics


def load_run(run_dir, overrides=(), checkpoint=None):
    """A trained run: its recipe (with `KEY=VALUE` overrides), tokenizers and model (see `seqtasks.trained`)."""
    from seqtasks import trained
    from seqtasks.models import Seq2Seq
    from seqtasks.text.subword_tokenizer import SubwordTokenizer

    recipe = trained.read_run_recipe(run_dir, overrides)
    vocabularies = [trained.read_lines(run_dir, name) for name in ("source_vocab.txt", "target_vocab.txt")]
    model = trained.load_model(
        run_dir,
        checkpoint,
        Seq2Seq,
        lambda: Seq2Seq.from_recipe(recipe.model, *(len(v) for v in vocabularies), seed=recipe.seed),
        recipe.training,
    )
    source, target = (SubwordTokenizer(v, recipe.data.lower_case) for v in vocabularies)
    return trained.TrainedRun(run_dir, recipe, model, {"source_tokenizer": source, "target_tokenizer": target})


def evaluate_run(run_dir, overrides=()):
    """Re-evaluates (and re-exports) a finished run on its validation split, e.g. with other decoding settings."""
    from pathlib import Path

    run = load_run(Path(run_dir), overrides)
    _, validation_pairs = _load_pairs(run.recipe)
    return evaluate_and_export(
        run.recipe, run.run_dir, run.model, run.parts["source_tokenizer"], run.parts["target_tokenizer"],
        validation_pairs,
    )


def evaluate_file(run, path):
    """BLEU and chrF of the run's model on every pair of `path` (the recipe's columns); outputs in `run_dir/eval/`."""
    from seqtasks.data.parallel_corpus import read_parallel_tsv
    from seqtasks.trained import eval_folder

    config = run.recipe.data
    pairs = read_parallel_tsv(path, config.source_column, config.target_column, config.encoding)
    return evaluate(
        run.recipe, eval_folder(run.run_dir, path), run.model, run.parts["source_tokenizer"],
        run.parts["target_tokenizer"], pairs,
    )


def export_run(run):
    """Writes the run's SavedModel under `export.directory`; returns its folder."""
    return export(run.recipe, run.model, run.parts["source_tokenizer"], run.parts["target_tokenizer"])


def evaluate_and_export(recipe, run_dir, model, source_tokenizer, target_tokenizer, validation_pairs):
    """`evaluate` on the validation pairs, then `export` where the recipe asks for it."""
    from seqtasks.export import export_if_enabled

    metrics = evaluate(recipe, run_dir, model, source_tokenizer, target_tokenizer, validation_pairs)
    return export_if_enabled(recipe, metrics, lambda: export(recipe, model, source_tokenizer, target_tokenizer))


def export(recipe, model, source_tokenizer, target_tokenizer):
    """The string-to-string SavedModel under `export.directory`; its folder (None on a worker that is not the chief)."""
    from seqtasks.export import export_saved_model
    from seqtasks.tasks.seq2seq_common import make_decode, make_server

    decode = make_decode(model, recipe.model.decoding)
    server = make_server(model, decode, source_tokenizer, target_tokenizer, recipe.data.max_length, "translation")
    return export_saved_model(server, server.serve, recipe.export.directory, recipe.name)


def evaluate(recipe, out_dir, model, source_tokenizer, target_tokenizer, pairs):
    """BLEU and chrF of the recipe's decoding on `pairs`; `translations.tsv` and heatmaps in `out_dir`."""
    import sacrebleu
    import tensorflow as tf

    from seqtasks.errors import SeqtasksError
    from seqtasks.io_utils import write_text_atomic
    from seqtasks.plots import save_attention_heatmap
    from seqtasks.tasks.seq2seq_common import decode_all, make_decode, pad_rows

    if not pairs:
        raise SeqtasksError("no sentence pairs to evaluate")

    config = recipe.data
    decoding = recipe.model.decoding
    decode = make_decode(model, decoding)
    sources = [s for s, _ in pairs]
    source_rows = [
        row[: config.max_length] for row in source_tokenizer.tokenize(tf.constant(sources)).to_list()
    ]
    timings = {}
    output_ids = pad_rows(decode_all(decode, source_rows, recipe.training.batch_size, timings), decoding.max_length)
    hypotheses = [text.decode() for text in target_tokenizer.detokenize(output_ids).numpy()]
    references = [_normalize_reference(t, config.lower_case) for _, t in pairs]
    bleu_metric, chrf_metric = sacrebleu.BLEU(), sacrebleu.CHRF()
    bleu = bleu_metric.corpus_score(hypotheses, [references])
    chrf = chrf_metric.corpus_score(hypotheses, [references])

    write_text_atomic(
        out_dir / "translations.tsv",
        "".join(
            f"{source}\t{hypothesis}\t{reference}\n"
            for source, hypothesis, reference in zip(sources, hypotheses, references)
        ),
    )
    print("Sample translations:")
    for index in range(min(5, len(hypotheses))):
        print(f"  {sources[index]}\n    -> {hypotheses[index]}\n    reference: {references[index]}")
    _write_heatmaps(
        model, source_rows, output_ids, source_tokenizer.vocab, target_tokenizer.vocab, out_dir, save_attention_heatmap
    )
    metrics = {
        "validation": {"bleu": bleu.score, "chrf": chrf.score},
        "sacrebleu_signatures": {"bleu": str(bleu_metric.get_signature()), "chrf": str(chrf_metric.get_signature())},
        "decoding": {"beam_width": decoding.beam_width, "length_penalty": decoding.length_penalty},
        # Batches of `training.batch_size`, sorted by length; tracing the decoder once included or not.
        "decode_sentences_per_second": round(len(hypotheses) / timings["decode_seconds"], 1),
        "decode_sentences_per_second_with_tracing": round(
            len(hypotheses) / (timings["decode_seconds"] + timings["trace_seconds"]), 1
        ),
    }
    return metrics


def _write_heatmaps(model, source_rows, output_ids, source_vocab, target_vocab, run_dir, save, count=3):
    folder = run_dir / "attention"
    folder.mkdir(exist_ok=True)
    for index in range(min(count, len(source_rows))):
        source = np.array([source_rows[index]], np.int32)
        output = [int(i) for i in output_ids[index] if i != 0]
        if END_ID in output:
            output = output[: output.index(END_ID) + 1]
        target_in = np.array([[START_ID] + output[:-1]], np.int32)
        weights = np.asarray(model.attention(source, target_in))[0]
        save(
            weights,
            [source_vocab[i] for i in source_rows[index]],
            [target_vocab[i] for i in output],
            folder / f"attention_{index}.png",
        )
