"""A task's pretrained word vectors (`model.word_vectors` of a recipe): its vocabulary, its first weights.

`start_vectors` runs when a run prepares its vocabulary: it reads the file
once, writes what it covered into the run folder (`word_vectors.json`) and
returns the matrix the task's embeddings start from. After that the vectors
are ordinary weights: a resumed run, a checkpoint, a `.keras` file or an
export never reads the file again, and `vectors_note` reads the coverage
back for the model card.
"""

import json

COVERAGE_FILE = "word_vectors.json"


WHERE = (
    "model.word_vectors.path: pretrained word vectors such as GloVe (https://nlp.stanford.edu/projects/glove/, "
    "or ../shared/models/glove-6B-50d beside a seqtasks checkout); an empty path learns the embeddings from scratch"
)


def vectors_path(config):
    """The input path entry (`Task.input_paths`) of the vectors file, or none without one."""
    return [(config.path, "file", WHERE)] if config.path else []


def extended_vocabulary(vocabulary, config, normalize=lambda word: word):
    """`vocabulary` and then the first `config.extend_vocabulary` words of the vectors file not in it (normalized)."""
    from seqtasks.text.word_vectors import first_words

    if not (config.path and config.extend_vocabulary):
        return list(vocabulary)
    known, extended = set(vocabulary), list(vocabulary)
    for word in first_words(config.path, config.extend_vocabulary):
        word = normalize(word)
        if word not in known:
            known.add(word)
            extended.append(word)
    return extended


def start_vectors(config, vocabulary, reserved, counts, dimension, seed, run_dir, log=print):
    """The embedding matrix of `vocabulary` from `config.path` (or None without one); its coverage is printed
    and written into `run_dir`."""
    from seqtasks.text.word_vectors import embedding_matrix
    from seqtasks.utils.io_utils import write_json_atomic

    if not config.path:
        return None
    matrix, coverage = embedding_matrix(config.path, vocabulary, reserved, counts, dimension, seed)
    log(coverage.describe())
    tuning = {"fine_tune": config.fine_tune, "fine_tune_after": config.fine_tune_after}
    write_json_atomic(run_dir / COVERAGE_FILE, {**coverage.as_json(), **tuning})
    return matrix


def read_coverage(run_dir):
    """What `start_vectors` wrote into a run folder, or None."""
    path = run_dir / COVERAGE_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def vectors_note(coverage):
    """The model card's line on the vectors a model started from, or [] without any."""
    if not coverage:
        return []
    frozen = {"always": "fine-tuned from the first step", "never": "kept frozen"}.get(
        coverage.get("fine_tune"), f"frozen for {coverage.get('fine_tune_after')} epochs, then fine-tuned"
    )
    return [
        f"The word embeddings started from the pretrained vectors `{coverage['file']}` ({coverage['dimension']} "
        f"dimensions), {frozen}: they covered {100 * coverage['word_rate']:.1f}% of the vocabulary and "
        f"{100 * coverage['token_rate']:.1f}% of the training tokens."
    ]


def apply_vectors(config, embeddings, matrix):
    """Starts each `keras.layers.Embedding` of `embeddings` (built) from `matrix`; freezes them if `fine_tune` is never."""
    for embedding in embeddings:
        if matrix is not None:
            embedding.embeddings.assign(matrix)
        if config.path and config.fine_tune == "never":
            embedding.trainable = False


def freeze_for_epochs(config, embeddings, optimizer):
    """With `fine_tune: after`, holds the embeddings still for `fine_tune_after` epochs (`optimizer.freeze`)."""
    if config.path and config.fine_tune == "after":
        optimizer.freeze([embedding.embeddings for embedding in embeddings], config.fine_tune_after)
