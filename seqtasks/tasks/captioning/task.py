"""The captioning task: images and their captions -> `ImageCaptioner` -> BLEU-1..4, overlays, an image-bytes SavedModel."""

import time
from pathlib import Path

from seqtasks.errors import SeqtasksError
from seqtasks.tasks.base import Evaluation, Task
from seqtasks.tasks.captioning import data
from seqtasks.tasks.captioning.image_inputs import image_inputs, input_shape, make_backbone, served_image_size


class CaptioningTask(Task):
    """Examples are `{image file name: [caption, ...]}`; frozen backbones' grids are cached on disk."""

    def read_splits(self):
        return data.load_splits(self.recipe.data)

    def input_paths(self):
        yield from super().input_paths()
        backbone = self.recipe.model.backbone
        if backbone.type == "file" and backbone.path:
            yield backbone.path, "file"

    def read_file(self, path):
        return data.read_captions_file(self.recipe.data, path)

    def prepare(self, train, validation, run_dir):
        from seqtasks.utils.io_utils import write_text_atomic
        from seqtasks.text.subword_tokenizer import learn_vocabulary

        config = self.recipe.data
        print(f"Images: {len(train)} training, {len(validation)} validation")
        self._cleaned = data.cleaned_by_image(config, {**train, **validation})
        vocab = learn_vocabulary(
            [caption for name in train for caption in self._cleaned[name]],
            config.vocab_size,
            config.lower_case,
            "data.vocab_size",
        )
        write_text_atomic(run_dir / "vocab.txt", "\n".join(vocab) + "\n")
        self._set(vocab, run_dir)
        print(f"Vocabulary: {len(vocab)} subwords")

    def restore(self, run_dir):
        from seqtasks.training.run_folders import read_lines

        self._set(read_lines(run_dir, "vocab.txt"), run_dir)

    def _set(self, vocab, run_dir):
        from seqtasks.text.subword_tokenizer import SubwordTokenizer

        self.tokenizer = SubwordTokenizer(vocab, self.recipe.data.lower_case)
        # A loaded model holds its own fine-tuned head; the frozen part is made again.
        self.backbone, self.head = make_backbone(self.recipe.model.backbone)
        self.cache_dir = Path(self.recipe.data.feature_cache or Path(run_dir).parent.parent / "feature_cache")
        self._inputs = {}

    def _image_inputs(self, names, mirror=False):
        key = (tuple(names), mirror)
        if key not in self._inputs:
            paths = [Path(self.recipe.data.images) / name for name in names]
            self._inputs[key] = image_inputs(
                self.backbone, self.recipe.model.backbone.image_size, paths, self.cache_dir, mirror=mirror
            )
        return self._inputs[key]

    def vocabularies(self):
        return {"output": list(self.tokenizer.vocab)}

    def datasets(self, train, validation):
        config, batch_size = self.recipe.data, self.recipe.training.batch_size
        started = time.time()
        train_inputs, validation_inputs = self._image_inputs(train), self._image_inputs(validation)
        mirrored = self._image_inputs(train, mirror=True) if config.mirror_images else None
        self._feature_seconds = time.time() - started
        train_examples = data.caption_examples(train, self._cleaned, self.tokenizer, config.max_length)
        validation_examples = data.caption_examples(validation, self._cleaned, self.tokenizer, config.max_length)
        if not train_examples:
            raise SeqtasksError(f"data.max_length: no training caption has at most {config.max_length - 1} subwords")
        self._train_captions = len(train_examples)
        # Caption subwords and [END] per batch.
        self._tokens_per_batch = sum(len(row) + 1 for _, row in train_examples) / -(-len(train_examples) // batch_size)
        return (
            data.make_dataset(train_inputs, train_examples, batch_size, self.recipe.seed, mirrored),
            data.make_dataset(validation_inputs, validation_examples, batch_size),
        )

    def build_model(self):
        from seqtasks.tasks.captioning.model import build_model

        shape = input_shape(self.backbone, self.recipe.model.backbone.image_size)
        return build_model(self.recipe, self.tokenizer.vocab_size, shape, self.head)

    def compile_model(self, model):
        from seqtasks.encoder_decoder.training import compile_model

        compile_model(model, self.recipe.training)

    def training_metrics(self, train, validation, history):
        return {
            "train_images": len(train),
            "validation_images": len(validation),
            "train_captions": self._train_captions,
            "feature_seconds": round(self._feature_seconds, 1),
            # Over the wall time of `fit`, tracing and validation included.
            "train_target_tokens_per_second": round(
                self._tokens_per_batch * history.batches_seen / history.train_seconds, 1
            ),
        }

    def _captions(self, model, names, timings=None, decode=None):
        """The recipe's decoding (`decode`, else a new `make_decode`) of the images `names`: `(inputs, output_ids,
        captions)`."""
        import numpy as np

        from seqtasks.encoder_decoder.decoding import decode_in_batches, make_decode, pad_rows

        inputs = self._image_inputs(names)
        rows = decode_in_batches(
            decode or make_decode(model, self.recipe.model.decoding),
            model,
            ((None,) + tuple(inputs.shape[1:]), inputs.dtype),
            list(inputs),
            np.stack,
            self.recipe.evaluation.batch_size,
            "Captioning",
            timings=timings,
        )
        output_ids = pad_rows(rows, max((len(row) for row in rows), default=1))
        return inputs, output_ids, [text.decode() for text in self.tokenizer.detokenize(output_ids).numpy()]

    def validation_scores(self, validation):
        """BLEU-1..4 of the validation images' captions as `val_bleu_1`..`val_bleu_4`, when `training.monitor` names
        one (decoding them every epoch costs time, so only then)."""
        from seqtasks.encoder_decoder.decoding import make_decode
        from seqtasks.tasks.captioning.evaluation import corpus_bleu

        if not self.recipe.training.monitor.startswith("val_bleu"):
            return None
        names = list(validation)
        cleaned = data.cleaned_by_image(self.recipe.data, validation)
        references = [cleaned[name] for name in names]
        decodes = {}  # built and traced once per model, not every epoch

        def score(model):
            decode = decodes.get(id(model))
            if decode is None:
                decode = decodes[id(model)] = make_decode(model, self.recipe.model.decoding)
            scores, _ = corpus_bleu(self._captions(model, names, decode=decode)[2], references)
            return {f"val_{name}": value for name, value in scores.items()}

        return score

    def evaluate(self, model, examples, out_dir):
        """BLEU-1..4 of the recipe's decoding on the images; `captions.tsv` and attention overlays in `out_dir`."""
        from seqtasks.utils.io_utils import write_text_atomic
        from seqtasks.tasks.captioning.evaluation import corpus_bleu, write_overlays

        if not examples:
            raise SeqtasksError("no images to evaluate")
        names = list(examples)
        cleaned = data.cleaned_by_image(self.recipe.data, examples)
        references = [cleaned[name] for name in names]
        decoding = self.recipe.model.decoding
        timings = {}
        inputs, output_ids, hypotheses = self._captions(model, names, timings)
        scores, signature = corpus_bleu(hypotheses, references)
        write_text_atomic(
            out_dir / "captions.tsv",
            "".join(f"{name}\t{hyp}\t{' | '.join(refs)}\n" for name, hyp, refs in zip(names, hypotheses, references)),
        )
        image_size = served_image_size(self.recipe.model.backbone, self.backbone)
        write_overlays(model, inputs, output_ids, names, self.tokenizer.vocab, self.recipe.data.images, image_size, out_dir)
        report = ["Sample captions:"]
        for index in range(min(5, len(names))):
            report += [f"  {names[index]}: {hypotheses[index]}", f"    reference: {references[index][0]}"]
        metrics = {
            "validation": scores,
            "sacrebleu_signature": signature,
            "decoding": {"beam_width": decoding.beam_width, "length_penalty": decoding.length_penalty},
            "decode_images_per_second": round(len(names) / max(timings["decode_seconds"], 1e-9), 1),
        }
        return Evaluation(metrics, report)

    def reading_limits(self):
        from seqtasks.export.serving_limits import MAX_IMAGE_PIXELS

        backbone = self.recipe.model.backbone
        size = (f"{backbone.image_size}x{backbone.image_size} pixels (`model.backbone.image_size`)"
                if backbone.type != "file" else "the input size of the backbone file (`model.backbone.path`)")
        return [
            f"An image is a JPEG, PNG or BMP file of at most {MAX_IMAGE_PIXELS:,} pixels (width times height, "
            f"read from its header before decoding); it is resized to {size}."
        ]

    def serving_module(self, model):
        from seqtasks.tasks.captioning.export import image_reader
        from seqtasks.encoder_decoder.export import make_encoder_decoder_module

        image_size = served_image_size(self.recipe.model.backbone, self.backbone)
        reader = image_reader(self.backbone, image_size)
        return make_encoder_decoder_module(model, reader, self.tokenizer, "caption", self.recipe.model.decoding)
