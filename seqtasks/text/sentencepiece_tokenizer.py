"""SentencePiece subwords (unigram or BPE) learned from the training data, run in the graph by tensorflow-text.

The text is cut into pieces with its spaces (`▁`) and its case kept, so
detokenizing writes it back as a person writes it ("Where is the train
station?"), with no spaces before punctuation. Characters the training
data never showed fall back to their UTF-8 bytes, so nothing is `[UNK]`. The
tokenizer is a `tf.Module` holding the model's bytes: the exported SavedModel
needs only `tensorflow_text` to run it.
"""

import hashlib
import io
import re

import tensorflow as tf
import tensorflow_text as tf_text

from seqtasks.errors import SeqtasksError
from seqtasks.text.special_ids import END_ID, PAD_ID, RESERVED_TOKENS, START_ID, UNK_ID
from seqtasks.text.special_ids import SMALLEST_SENTENCEPIECE_VOCAB as SMALLEST_VOCAB_SIZE
from seqtasks.text.subword_tokenizer import content_ids

MODEL_TYPES = ("unigram", "bpe")


def learn_sentencepiece(texts, vocab_size, model_type="unigram", lower_case=False, field=None):
    """A SentencePiece model (its serialized bytes) learned from a list of strings.

    The reserved tokens take ids 0..3, as in every vocabulary of seqtasks.
    When the texts give fewer pieces than `vocab_size`, the vocabulary is
    smaller and, with `field` (the recipe key), a note says so.
    """
    import sentencepiece

    if model_type not in MODEL_TYPES:
        raise ValueError(f"Expected one of {set(MODEL_TYPES)}. Received: model_type={model_type!r}")
    if vocab_size < SMALLEST_VOCAB_SIZE:
        raise ValueError(f"Expected vocab_size >= {SMALLEST_VOCAB_SIZE} (256 byte pieces). Received: {vocab_size}")
    texts = [text.casefold() if lower_case else text for text in texts if text.strip()]
    if not texts:
        raise ValueError("Expected some non-blank texts to learn SentencePiece pieces from")
    model = io.BytesIO()
    pad, unk, start, end = RESERVED_TOKENS
    trainer_arguments = dict(
        sentence_iterator=iter(texts),
        model_writer=model,
        model_type=model_type,
        vocab_size=vocab_size,
        hard_vocab_limit=False,
        byte_fallback=True,
        character_coverage=0.9995,
        normalization_rule_name="nmt_nfkc",
        split_digits=True,
        input_sentence_size=0,
        num_threads=1,  # the same pieces from the same texts, run after run
        minloglevel=2,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=START_ID,
        eos_id=END_ID,
        pad_piece=pad,
        unk_piece=unk,
        bos_piece=start,
        eos_piece=end,
    )
    try:
        sentencepiece.SentencePieceTrainer.train(**trainer_arguments)
    except RuntimeError as error:
        # The pieces must at least hold the characters that cover the texts, beside the bytes.
        counts = re.search(r"(\d+) vs (\d+)", str(error))
        if "required_chars" not in str(error) or counts is None:
            raise
        raise SeqtasksError(
            f"{field or 'vocab_size'}: {vocab_size} subwords cannot hold the byte, reserved and character "
            f"pieces the texts need; give at least {counts[2]}"
        ) from None
    proto = model.getvalue()
    size = sentencepiece.SentencePieceProcessor(model_proto=proto).get_piece_size()
    if field and size < vocab_size:
        print(f"Note: {field} is {vocab_size}, but the training data gives only {size} pieces; using {size}")
    return proto


class SentencePieceTokenizer(tf.Module):
    """Text <-> SentencePiece ids, case and spacing kept.

    `tokenize` maps strings `[batch]` to a ragged int32 `[batch, None]`;
    `detokenize` maps id rows, cut at `[END]`, back to the text. `model` is
    the bytes `learn_sentencepiece` returns; `lower_case` folds the case of
    the input first (the model must have been learned so).
    """

    def __init__(self, model, lower_case=False):
        super().__init__()
        import sentencepiece

        self.model = bytes(model)
        self.lower_case = lower_case
        processor = sentencepiece.SentencePieceProcessor(model_proto=self.model)
        self.vocab = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
        if tuple(self.vocab[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
            raise ValueError(f"Expected the pieces to start with {list(RESERVED_TOKENS)}")
        # A loaded SavedModel finds tensorflow-text's model resource by its name, process-wide: two
        # models under one name would both tokenize with whichever was loaded first.
        name = "sentencepiece_" + hashlib.sha256(self.model).hexdigest()[:16]
        self.sentencepiece = tf_text.SentencepieceTokenizer(model=self.model, out_type=tf.int32, name=name)

    @property
    def vocab_size(self):
        return len(self.vocab)

    def tokenize(self, text):
        if self.lower_case:
            text = tf_text.case_fold_utf8(text)
        return self.sentencepiece.tokenize(text)

    def detokenize(self, ids):
        """`ids` `[batch, time]` int32 (dense or ragged) -> strings `[batch]`; from the first `[END]` on, dropped.

        A model may still write a lone space piece before punctuation, or two
        spaces running: both are tidied, as a person writes English or Spanish.
        """
        text = self.sentencepiece.detokenize(content_ids(ids))
        text = tf.strings.regex_replace(text, r" +([.,!?;:%)\]}»…])", r"\1")
        text = tf.strings.regex_replace(text, r"([(\[{«¿¡]) +", r"\1")
        return tf.strings.strip(tf.strings.regex_replace(text, r" {2,}", " "))
