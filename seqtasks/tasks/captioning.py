"""Image captioning (Show, Attend and Tell): attention over a feature grid, BLEU-1..4, overlays, a JPEG-bytes SavedModel."""

import time
from pathlib import Path

import numpy as np

from seqtasks.errors import SeqtasksError
from seqtasks.text.subword_tokenizer import END_ID, PAD_ID, START_ID

_BUCKETS = [8, 10, 12, 14, 16, 20, 25, 32, 40, 50, 64]
_OVERLAYS = 4


def clean_captions(texts, lower_case, strip_punctuation):
    """Unicode-normalised (optionally case-folded) captions, punctuation and symbols optionally spaced out."""
    import tensorflow as tf

    from seqtasks.text.subword_tokenizer import normalize

    texts = normalize(tf.constant(list(texts), tf.string), lower_case)
    if strip_punctuation:
        texts = tf.strings.regex_replace(texts, r"[\pP\pS]", " ")
    texts = tf.strings.strip(tf.strings.regex_replace(texts, r"\s+", " "))
    return [text.decode("utf-8") for text in texts.numpy()]


def load_splits(config):
    """`(train, validation)`: `{image file name: [caption, ...]}` each, limited as the recipe says."""
    from seqtasks.data.captions import read_coco_captions, read_flickr_tokens, read_split_list, select_split

    if config.format == "flickr":
        captions = read_flickr_tokens(config.captions)
        train = select_split(captions, read_split_list(config.train_split), config.captions, config.train_split)
        validation = select_split(
            captions, read_split_list(config.validation_split), config.captions, config.validation_split
        )
    else:
        train = read_coco_captions(config.captions)
        validation = read_coco_captions(config.validation_captions)
    overlap = set(train) & set(validation)
    if overlap:
        raise SeqtasksError(
            f"data: {len(overlap)} image(s) are in both the training and validation splits, e.g. {min(overlap)!r}"
        )
    train = _first(train, config.max_train_images)
    validation = _first(validation, config.max_validation_images)
    for split in (train, validation):
        missing = [name for name in split if not (Path(config.images) / name).is_file()]
        if missing:
            raise SeqtasksError(
                f"{config.images}: {len(missing)} image file(s) the captions name are missing, e.g. {missing[0]!r}"
            )
    return train, validation


def _first(split, count):
    return dict(list(split.items())[:count]) if count else split


def make_backbone(config):
    """`(frozen, head)` for a recipe's `model.backbone`.

    `frozen` is the `FrozenBackbone` whose features are cached (`None` for the
    CNN trained with the captioner); `head` is the part trained with the
    captioner when `fine_tune_from` names a layer, else `None`.
    """
    from seqtasks.data.image_features import FrozenBackbone

    if config.type == "cnn":
        return None, None
    if config.type == "file":
        backbone = FrozenBackbone.from_file(config.path)
    else:
        backbone = FrozenBackbone.from_application(config.name, config.weights, config.image_size)
    if config.fine_tune_from:
        return backbone.split(config.fine_tune_from)
    return backbone, None


def image_inputs(backbone, image_size, paths, cache_dir, log=print):
    """What the captioner reads per image: cached feature grids, or uint8 pixels for the trained CNN."""
    from seqtasks.data.image_features import image_features, read_image

    if backbone is not None:
        return image_features(backbone, paths, cache_dir, log=log)
    pixels = [np.clip(np.round(np.asarray(read_image(path, image_size))), 0, 255) for path in paths]
    return np.stack(pixels).astype(np.uint8)


def _caption_rows(tokenizer, captions, max_length):
    """Token id lists of the captions; `None` for those too long (or empty) to train on."""
    import tensorflow as tf

    rows = tokenizer.tokenize(tf.constant(captions)).to_list() if captions else []
    return [row if 0 < len(row) and len(row) + 1 <= max_length else None for row in rows]


def make_dataset(inputs, examples, batch_size, shuffle_seed=None):
    """Batches `((image inputs, caption in), caption out)` from `(image index, ids)` examples.

    The image inputs are gathered by index inside the pipeline, so each image's
    grid is stored once however many captions it has.
    """
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    table = tf.constant(inputs)
    indices = tf.constant([index for index, _ in examples], tf.int32)
    ids = tf.ragged.constant([row for _, row in examples], dtype=tf.int32, ragged_rank=1)
    data = tf.data.Dataset.from_tensor_slices((indices, ids))
    data = data.map(lambda i, t: (i, tf.concat([[START_ID], t], 0), tf.concat([t, [END_ID]], 0)))
    data = bucketed_batches(
        data, len(examples), lambda i, t_in, t_out: tf.size(t_in), _BUCKETS, batch_size, shuffle_seed,
        padding_values=(0, PAD_ID, PAD_ID),
    )
    data = data.map(lambda i, t_in, t_out: ((tf.gather(table, i), t_in), t_out))
    return data.prefetch(tf.data.AUTOTUNE)


def _examples(split, cleaned, tokenizer, max_length):
    captions = [caption for name in split for caption in cleaned[name]]
    owners = [index for index, name in enumerate(split) for _ in cleaned[name]]
    rows = _caption_rows(tokenizer, captions, max_length)
    return [(owner, row) for owner, row in zip(owners, rows) if row is not None]


def build_model(recipe, vocab_size, input_shape, grid_head=None):
    from seqtasks.models import ImageCaptioner
    from seqtasks.models.seq2seq import decoder_arguments

    config = recipe.model
    model = ImageCaptioner(
        vocab_size,
        embedding_dim=config.embedding_dim,
        decoder=decoder_arguments(config.decoder, config.attention, recipe.seed, gate=config.gate),
        image_encoder=list(config.backbone.filters) if config.backbone.type == "cnn" else None,
        grid_head=grid_head,
        feature_dropout=config.feature_dropout,
        attention_penalty=config.attention_penalty,
    )
    model.build(((None,) + tuple(input_shape), (None, None)))
    return model


def run(recipe, run_dir):
    """Caches image features, trains, evaluates (BLEU-1..4, overlays) and exports; returns the metrics."""
    import keras

    from seqtasks.io_utils import write_text_atomic
    from seqtasks.tasks.seq2seq_common import compile_model
    from seqtasks.text.subword_tokenizer import SubwordTokenizer, learn_vocabulary
    from seqtasks.training import fit_metrics, train_model

    started = time.time()
    keras.utils.set_random_seed(recipe.seed)
    config = recipe.data
    train, validation = load_splits(config)
    print(f"Images: {len(train)} training, {len(validation)} validation")
    cleaned = _cleaned(config, {**train, **validation})
    vocab = learn_vocabulary(
        [caption for name in train for caption in cleaned[name]], config.vocab_size, config.lower_case, "data.vocab_size"
    )
    write_text_atomic(run_dir / "vocab.txt", "\n".join(vocab) + "\n")
    tokenizer = SubwordTokenizer(vocab, config.lower_case)
    print(f"Vocabulary: {len(vocab)} subwords")

    backbone, head = make_backbone(recipe.model.backbone)
    cache_dir = Path(config.feature_cache or run_dir.parent.parent / "feature_cache")
    feature_started = time.time()
    train_inputs, validation_inputs = (
        image_inputs(backbone, recipe.model.backbone.image_size, [Path(config.images) / n for n in split], cache_dir)
        for split in (train, validation)
    )
    feature_seconds = time.time() - feature_started
    train_examples = _examples(train, cleaned, tokenizer, config.max_length)
    validation_examples = _examples(validation, cleaned, tokenizer, config.max_length)
    if not train_examples:
        raise SeqtasksError(f"data.max_length: no training caption has at most {config.max_length - 1} subwords")
    batch_size = recipe.training.batch_size
    train_data = make_dataset(train_inputs, train_examples, batch_size, recipe.seed)
    validation_data = make_dataset(validation_inputs, validation_examples, batch_size)

    model, history, train_seconds = train_model(
        recipe,
        run_dir,
        lambda: build_model(recipe, len(vocab), train_inputs.shape[1:], head),
        lambda model: compile_model(model, recipe.training),
        train_data,
        validation_data,
    )
    metrics = fit_metrics("captioning", history, train_seconds, model)
    metrics.update(
        train_images=len(train),
        validation_images=len(validation),
        train_captions=len(train_examples),
        feature_seconds=round(feature_seconds, 1),
        # Caption subwords and [END] per batch, over the wall time of `fit` (tracing and validation included).
        train_target_tokens_per_second=round(
            sum(len(row) + 1 for _, row in train_examples) / -(-len(train_examples) // batch_size)
            * history.batches_seen / train_seconds,
            1,
        ),
    )
    references = [cleaned[name] for name in validation]
    metrics.update(
        evaluate_and_export(recipe, run_dir, model, tokenizer, backbone, list(validation), validation_inputs, references)
    )
    metrics["seconds"] = round(time.time() - started, 1)
    return metrics


def _cleaned(config, captions):
    names = list(captions)
    flat = clean_captions([c for n in names for c in captions[n]], config.lower_case, config.strip_punctuation)
    out, start = {}, 0
    for name in names:
        out[name] = flat[start : start + len(captions[name])]
        start += len(captions[name])
    return out


def _input_shape(backbone, image_size):
    """The shape of one image's input to the captioner: a feature grid, or pixels for the trained CNN."""
    if backbone is None:
        return (image_size, image_size, 3)
    shape = tuple(backbone.model.output_shape[1:])
    return (shape[0] * shape[1], shape[2]) if backbone.flatten else shape


def load_run(run_dir, overrides=(), checkpoint=None):
    """A trained run: its recipe (with `KEY=VALUE` overrides), tokenizer, backbone and model (see `seqtasks.trained`)."""
    from seqtasks import trained
    from seqtasks.models import ImageCaptioner
    from seqtasks.text.subword_tokenizer import SubwordTokenizer

    recipe = trained.read_run_recipe(run_dir, overrides)
    vocab = trained.read_lines(run_dir, "vocab.txt")
    backbone, head = make_backbone(recipe.model.backbone)  # a loaded model holds its own fine-tuned head
    input_shape = _input_shape(backbone, recipe.model.backbone.image_size)
    model = trained.load_model(
        run_dir,
        checkpoint,
        ImageCaptioner,
        lambda: build_model(recipe, len(vocab), input_shape, head),
        recipe.training,
    )
    tokenizer = SubwordTokenizer(vocab, recipe.data.lower_case)
    return trained.TrainedRun(run_dir, recipe, model, {"tokenizer": tokenizer, "backbone": backbone})


def _run_inputs(run, captions):
    config = run.recipe.data
    cache_dir = Path(config.feature_cache or run.run_dir.parent.parent / "feature_cache")
    paths = [Path(config.images) / name for name in captions]
    return image_inputs(run.parts["backbone"], run.recipe.model.backbone.image_size, paths, cache_dir)


def evaluate_run(run_dir, overrides=()):
    """Re-evaluates (and re-exports) a finished run on its validation split, e.g. with other decoding settings."""
    run = load_run(Path(run_dir), overrides)
    _, validation = load_splits(run.recipe.data)
    cleaned = _cleaned(run.recipe.data, validation)
    return evaluate_and_export(
        run.recipe, run.run_dir, run.model, run.parts["tokenizer"], run.parts["backbone"], list(validation),
        _run_inputs(run, validation), [cleaned[name] for name in validation],
    )


def evaluate_file(run, path):
    """BLEU-1..4 on every image of the captions file `path` (the recipe's format); outputs in `run_dir/eval/`."""
    from seqtasks.data.captions import read_coco_captions, read_flickr_tokens
    from seqtasks.trained import eval_folder

    config = run.recipe.data
    captions = read_flickr_tokens(path) if config.format == "flickr" else read_coco_captions(path)
    missing = [name for name in captions if not (Path(config.images) / name).is_file()]
    if missing:
        raise SeqtasksError(
            f"{path}: {len(missing)} image file(s) it names are not in {config.images}, e.g. {missing[0]!r}"
        )
    cleaned = _cleaned(config, captions)
    return evaluate(
        run.recipe, eval_folder(run.run_dir, path), run.model, run.parts["tokenizer"], run.parts["backbone"],
        list(captions), _run_inputs(run, captions), [cleaned[name] for name in captions],
    )


def export_run(run):
    """Writes the run's SavedModel under `export.directory`; returns its folder."""
    return export(run.recipe, run.model, run.parts["tokenizer"], run.parts["backbone"])


def corpus_bleu(hypotheses, references):
    """Corpus BLEU-1..4 (sacrebleu, 13a tokenisation) against every reference of each hypothesis.

    Images with fewer references than the most are padded with repeats of
    their first one, which changes neither clipped counts nor the closest
    reference length. Returns `({"bleu_1": ..., ...}, signature)`.
    """
    import sacrebleu

    most = max((len(refs) for refs in references), default=1)
    streams = [[refs[k] if k < len(refs) else refs[0] for refs in references] for k in range(most)]
    scores, signature = {}, ""
    for order in range(1, 5):
        metric = sacrebleu.BLEU(max_ngram_order=order)
        scores[f"bleu_{order}"] = metric.corpus_score(hypotheses, streams).score
        signature = str(metric.get_signature())
    return scores, signature


def decode_inputs(decode_fn, inputs, batch_size, timings=None):
    """Output ids `(len(inputs), steps)` of the decode function over image inputs, traced once."""
    import tensorflow as tf

    from seqtasks.progress import progress_bar
    from seqtasks.tasks.seq2seq_common import pad_rows

    signature = tf.TensorSpec((None,) + tuple(inputs.shape[1:]), tf.as_dtype(inputs.dtype))
    compiled = tf.function(decode_fn, input_signature=[signature])
    started = time.perf_counter()
    compiled.get_concrete_function()
    traced = time.perf_counter()
    rows = []
    with progress_bar(len(inputs), "Captioning") as bar:
        for start in range(0, len(inputs), batch_size):
            ids, _, _ = compiled(tf.constant(inputs[start : start + batch_size]))
            rows.extend(list(np.asarray(ids)))
            bar.update(len(ids))
    if timings is not None:
        timings.update(trace_seconds=traced - started, decode_seconds=time.perf_counter() - traced)
    return pad_rows(rows, max((len(r) for r in rows), default=1))


def evaluate_and_export(recipe, run_dir, model, tokenizer, backbone, names, inputs, references):
    """`evaluate` on the validation images, then `export` where the recipe asks for it."""
    from seqtasks.export import export_if_enabled

    metrics = evaluate(recipe, run_dir, model, tokenizer, backbone, names, inputs, references)
    return export_if_enabled(recipe, metrics, lambda: export(recipe, model, tokenizer, backbone))


def _served_image_size(recipe, backbone):
    return backbone.size if backbone is not None else recipe.model.backbone.image_size


def export(recipe, model, tokenizer, backbone):
    """The image-bytes-to-caption SavedModel under `export.directory`; its folder (None on a worker that is not the chief)."""
    from seqtasks.export import export_saved_model
    from seqtasks.tasks.seq2seq_common import make_decode

    decode = make_decode(model, recipe.model.decoding)
    server = make_server(model, decode, tokenizer, backbone, _served_image_size(recipe, backbone))
    return export_saved_model(server, server.serve, recipe.export.directory, recipe.name)


def evaluate(recipe, out_dir, model, tokenizer, backbone, names, inputs, references):
    """BLEU-1..4 of the recipe's decoding on the images; `captions.tsv` and attention overlays in `out_dir`."""
    from seqtasks.io_utils import write_text_atomic
    from seqtasks.tasks.seq2seq_common import make_decode

    if not names:
        raise SeqtasksError("no images to evaluate")
    decoding = recipe.model.decoding
    decode = make_decode(model, decoding)
    timings = {}
    output_ids = decode_inputs(decode, inputs, recipe.training.batch_size, timings)
    hypotheses = [text.decode() for text in tokenizer.detokenize(output_ids).numpy()]
    scores, signature = corpus_bleu(hypotheses, references)
    write_text_atomic(
        out_dir / "captions.tsv",
        "".join(f"{name}\t{hyp}\t{' | '.join(refs)}\n" for name, hyp, refs in zip(names, hypotheses, references)),
    )
    print("Sample captions:")
    for index in range(min(5, len(names))):
        print(f"  {names[index]}: {hypotheses[index]}\n    reference: {references[index][0]}")
    image_size = _served_image_size(recipe, backbone)
    write_overlays(model, inputs, output_ids, names, tokenizer.vocab, recipe.data.images, image_size, out_dir)
    metrics = {
        "validation": scores,
        "sacrebleu_signature": signature,
        "decoding": {"beam_width": decoding.beam_width, "length_penalty": decoding.length_penalty},
        "decode_images_per_second": round(len(names) / max(timings["decode_seconds"], 1e-9), 1),
    }
    return metrics


def write_overlays(model, inputs, output_ids, names, vocab, image_folder, image_size, run_dir, count=_OVERLAYS):
    """`attention/<image>.png`: per output word, the attention over the grid laid on the image."""
    from keras import ops

    from seqtasks.data.image_features import read_image
    from seqtasks.plots import save_attention_overlay

    folder = run_dir / "attention"
    folder.mkdir(exist_ok=True)
    for index in range(min(count, len(names))):
        output = [int(i) for i in output_ids[index] if i != PAD_ID]
        if END_ID in output:
            output = output[: output.index(END_ID) + 1]
        if not output:
            continue
        caption_in = np.array([[START_ID] + output[:-1]], np.int32)
        weights = np.asarray(ops.convert_to_numpy(model.attention(inputs[index : index + 1], caption_in)))[0]
        grid_shape = _grid_shape(model, inputs.shape[1:], weights.shape[-1])
        image = np.asarray(read_image(Path(image_folder) / names[index], image_size)).astype(np.uint8)
        save_attention_overlay(
            image,
            weights.reshape((len(output),) + grid_shape),
            [vocab[i] for i in output],
            folder / f"{Path(names[index]).stem}.png",
        )


def _grid_shape(model, input_shape, locations):
    size = model.grid_size(input_shape)
    if size is not None:
        return size
    side = int(round(locations**0.5))
    return (side, side) if side * side == locations else (1, locations)


def make_server(model, decode_fn, tokenizer, backbone, image_size):
    """A `tf.Module` whose `serve` maps encoded images `image` `[None]` to `caption` and `score`."""
    import tensorflow as tf

    def decode_image(data):
        # Same decoding and resizing as training's `read_image`; a corrupt or
        # unknown encoding fails the request with InvalidArgumentError.
        image = tf.io.decode_image(data, channels=3, expand_animations=False)
        return tf.image.resize(tf.cast(image, tf.float32), (image_size, image_size))

    class CaptionServer(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.tokenizer = tokenizer
            self.backbone = backbone.model if backbone is not None else None

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="image")])
        def serve(self, image):
            pixels = tf.map_fn(
                decode_image, image, fn_output_signature=tf.TensorSpec([image_size, image_size, 3], tf.float32)
            )
            # An empty batch runs as one blank image (convolutions reject batches of 0), then is cut off.
            count = tf.shape(image)[0]
            pixels = tf.concat([pixels, tf.zeros([tf.maximum(0, 1 - count), image_size, image_size, 3])], 0)
            if backbone is None:
                inputs = tf.cast(tf.round(tf.clip_by_value(pixels, 0.0, 255.0)), tf.uint8)
            else:
                # Rounded through float16 like the cached features training read.
                inputs = tf.cast(backbone(pixels), tf.float16)
            ids, _, scores = decode_fn(inputs)
            return {"caption": self.tokenizer.detokenize(ids)[:count], "score": scores[:count]}

    return CaptionServer()
