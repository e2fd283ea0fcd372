"""Scoring captions (corpus BLEU-1..4 against every reference) and drawing where the decoder looked."""

from pathlib import Path

import numpy as np

from seqtasks.text.special_ids import START_ID

OVERLAYS = 4


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


def write_overlays(model, inputs, output_ids, names, vocab, image_folder, image_size, out_dir, count=OVERLAYS):
    """`attention/<image>.png`: per output word, the attention over the grid laid on the image."""
    from keras import ops

    from seqtasks.data.image_features import read_image
    from seqtasks.evaluation.plots import save_attention_overlay
    from seqtasks.encoder_decoder.decoding import decoded_prefix

    folder = out_dir / "attention"
    folder.mkdir(exist_ok=True)
    for index in range(min(count, len(names))):
        output = decoded_prefix(output_ids[index])
        if not output:
            continue
        caption_in = np.array([[START_ID] + output[:-1]], np.int32)
        weights = np.asarray(ops.convert_to_numpy(model.attention(inputs[index : index + 1], caption_in)))[0]
        grid_shape = grid_shape_of(model, inputs.shape[1:], weights.shape[-1])
        image = np.asarray(read_image(Path(image_folder) / names[index], image_size)).astype(np.uint8)
        save_attention_overlay(
            image,
            weights.reshape((len(output),) + grid_shape),
            [vocab[i] for i in output],
            folder / f"{Path(names[index]).stem}.png",
        )


def grid_shape_of(model, input_shape, locations):
    """`(h, w)` of the attention grid: the model's own, else the squarest layout of `locations`."""
    # An ensemble of separate runs (`Ensemble`) does not say.
    size = model.grid_size(input_shape) if hasattr(model, "grid_size") else None
    if size is not None:
        return size
    side = int(round(locations**0.5))
    return (side, side) if side * side == locations else (1, locations)
