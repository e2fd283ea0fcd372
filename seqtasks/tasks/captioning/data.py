"""Captions: reading the splits, cleaning, subword rows and the training pipeline."""

from pathlib import Path

from seqtasks.errors import SeqtasksError
from seqtasks.text.special_ids import END_ID, PAD_ID, START_ID

_BUCKETS = [8, 10, 12, 14, 16, 20, 25, 32, 40, 50, 64]


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


def read_captions_file(config, path):
    """`{image file name: [caption, ...]}` of a caption file in the recipe's format, every image present."""
    from seqtasks.data.captions import read_coco_captions, read_flickr_tokens

    captions = read_flickr_tokens(path) if config.format == "flickr" else read_coco_captions(path)
    missing = [name for name in captions if not (Path(config.images) / name).is_file()]
    if missing:
        raise SeqtasksError(
            f"{path}: {len(missing)} image file(s) it names are not in {config.images}, e.g. {missing[0]!r}"
        )
    return captions


def _first(split, count):
    return dict(list(split.items())[:count]) if count else split


def clean_captions(texts, lower_case, strip_punctuation):
    """Unicode-normalised (optionally case-folded) captions, punctuation and symbols optionally spaced out."""
    import tensorflow as tf

    from seqtasks.text.subword_tokenizer import normalize

    texts = normalize(tf.constant(list(texts), tf.string), lower_case)
    if strip_punctuation:
        texts = tf.strings.regex_replace(texts, r"[\pP\pS]", " ")
    texts = tf.strings.strip(tf.strings.regex_replace(texts, r"\s+", " "))
    return [text.decode("utf-8") for text in texts.numpy()]


def cleaned_by_image(config, captions):
    """`{image: [cleaned caption, ...]}` for `{image: [caption, ...]}`, cleaned as the recipe says."""
    names = list(captions)
    flat = clean_captions([c for n in names for c in captions[n]], config.lower_case, config.strip_punctuation)
    out, start = {}, 0
    for name in names:
        out[name] = flat[start : start + len(captions[name])]
        start += len(captions[name])
    return out


def caption_examples(split, cleaned, tokenizer, max_length):
    """`(image index, subword ids)` for every caption of the split short enough to train on."""
    import tensorflow as tf

    captions = [caption for name in split for caption in cleaned[name]]
    owners = [index for index, name in enumerate(split) for _ in cleaned[name]]
    rows = tokenizer.tokenize(tf.constant(captions)).to_list() if captions else []
    return [(owner, row) for owner, row in zip(owners, rows) if 0 < len(row) and len(row) + 1 <= max_length]


def make_dataset(inputs, examples, batch_size, shuffle_seed=None, mirrored=None):
    """Batches `((image inputs, caption in), caption out)` from `(image index, ids)` examples.

    The image inputs are gathered by index inside the pipeline, so each image's
    grid is stored once however many captions it has. With `mirrored` (the
    inputs of the same images flipped left to right), each caption is read
    with its image or the mirror, at random, drawn anew every epoch.
    """
    import numpy as np
    import tensorflow as tf

    from seqtasks.data.batching import bucketed_batches

    images = len(inputs)
    table = tf.constant(inputs if mirrored is None else np.concatenate([inputs, mirrored]))
    indices = tf.constant([index for index, _ in examples], tf.int32)
    ids = tf.ragged.constant([row for _, row in examples], dtype=tf.int32, ragged_rank=1)
    data = tf.data.Dataset.from_tensor_slices((indices, ids))
    data = data.map(lambda i, t: (i, tf.concat([[START_ID], t], 0), tf.concat([t, [END_ID]], 0)))
    data = bucketed_batches(
        data, len(examples), lambda i, t_in, t_out: tf.size(t_in), _BUCKETS, batch_size, shuffle_seed,
        padding_values=(0, PAD_ID, PAD_ID),
    )
    if mirrored is not None:
        # A seed per batch from a source drawn anew each epoch: a seeded random op inside `map` would
        # repeat the same draws every epoch.
        seeds = tf.data.Dataset.random(seed=shuffle_seed, rerandomize_each_iteration=True)
        data = tf.data.Dataset.zip(data, seeds).map(
            lambda batch, seed: (
                batch[0] + images * tf.random.stateless_uniform(
                    tf.shape(batch[0]), tf.stack([seed, 0]), maxval=2, dtype=tf.int32
                ),
                batch[1],
                batch[2],
            )
        )
    data = data.map(lambda i, t_in, t_out: ((tf.gather(table, i), t_in), t_out))
    return data.prefetch(tf.data.AUTOTUNE)
