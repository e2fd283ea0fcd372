"""NER's export: raw text (or tokens) in; tokens, tags, offsets and entity spans with their probability out."""

# The signature that takes tokens instead of a text.
TOKENS_SIGNATURE = "from_tokens"


def iob2_tables(tags):
    """Per tag id: its entity type's index (-1 for `O`), whether it is an `I-` tag, and the tag that continues
    its entity (`I-X` for `B-X` and `I-X`; -1 for `O`); and the entity types, in index order."""
    types = sorted({tag[2:] for tag in tags if tag != "O"})
    type_of = [types.index(tag[2:]) if tag != "O" else -1 for tag in tags]
    inside = [tag.startswith("I-") for tag in tags]
    continuation = [tags.index(f"I-{tag[2:]}") if tag != "O" and f"I-{tag[2:]}" in tags else -1 for tag in tags]
    return type_of, inside, continuation, types


def entity_bounds(ids, real, type_of, inside):
    """`(starts, ends)`: `[batch, time]` bools, where an entity begins and where it ends, in tag ids `ids`.

    An entity is a run of tags of one type that starts at any entity tag not
    continuing the run before it (an `I-X` after `O` starts one, as seqeval
    reads it) and goes on over the `I-` tags of its type that follow.
    """
    import tensorflow as tf

    kind = tf.where(real, tf.gather(type_of, ids), -1)
    continues = tf.logical_and(tf.gather(inside, ids), real)
    previous = tf.pad(kind[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
    starts = tf.logical_and(kind >= 0, tf.logical_not(tf.logical_and(continues, tf.equal(previous, kind))))
    following = tf.pad(kind[:, 1:], [[0, 0], [0, 1]], constant_values=-1)
    next_continues = tf.pad(continues[:, 1:], [[0, 0], [0, 1]])
    ends = tf.logical_and(kind >= 0, tf.logical_not(tf.logical_and(next_continues, tf.equal(following, kind))))
    return starts, ends


def make_tagger_module(model, featurizer, tags, max_length, pretokenizer):
    """A `tf.Module` whose `serve` tags texts `[None]` and whose `from_tokens` tags token rows `[None, None]`.

    `serve` cuts a text to `text_character_limit(max_length)` characters,
    splits it with the recipe's pre-tokenizer (`seqtasks.text.pretokenizers`)
    and tags its first `max_length` tokens. `from_tokens` takes tokens padded
    at the end with `""` (a row's tokens end at its first `""`) and reads them
    as if joined by single spaces: offsets and entity texts are in that text.

    Outputs, by row: `tokens` and `tags` `[None, T]` padded with `""`;
    `token_start`, `token_end` `[None, T]` int32, each token's offsets in
    Unicode characters of its text (0 at padding); `entity_count` `[None]`;
    `entity_start`, `entity_end` (int32), `entity_type`, `entity_text`
    (string) and `entity_score` (float32) `[None, E]`, the first
    `entity_count` entries real, padded with 0 and `""`. An entity's score is
    its probability under the model that exactly this span has this type:
    with a CRF, the marginal over every tag path; with softmax tagging, the
    product of its tokens' probabilities.
    """
    import tensorflow as tf

    from seqtasks.export.serving_limits import cut_text
    from seqtasks.text.pretokenizers import pretokenize_graph

    type_of, inside, continuation, types = iob2_tables(tags)

    class TaggerModule(tf.Module):
        def __init__(self):
            super().__init__()
            self.model = model
            self.featurizer = featurizer
            self.tags = tf.constant(tags)
            self.types = tf.constant(types or [""])
            self.type_of = tf.constant(type_of, tf.int32)
            self.inside = tf.constant(inside)
            self.continuation = tf.constant(continuation, tf.int32)

        def serving_signatures(self):
            return {"serving_default": self.serve, TOKENS_SIGNATURE: self.from_tokens}

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")], autograph=False)
        def serve(self, text):
            text = cut_text(text, max_length)
            tokens, starts, ends = pretokenize_graph(text, pretokenizer)
            return self._tag(text, tokens[:, :max_length], starts[:, :max_length], ends[:, :max_length])

        @tf.function(input_signature=[tf.TensorSpec([None, None], tf.string, name="tokens")], autograph=False)
        def from_tokens(self, tokens):
            real = tf.not_equal(tokens, "")
            # A row's tokens end at its first "".
            kept = tf.cast(tf.cumsum(tf.cast(tf.logical_not(real), tf.int32), axis=1) == 0, tf.int32)
            tokens = tf.RaggedTensor.from_tensor(tokens, lengths=tf.minimum(tf.reduce_sum(kept, axis=1), max_length))
            lengths = tf.strings.length(tokens, unit="UTF8_CHAR")
            ends = tf.cumsum(lengths + 1, axis=1) - 1
            return self._tag(tf.strings.reduce_join(tokens, axis=1, separator=" "), tokens, ends - lengths, ends)

        def _tag(self, text, tokens, starts, ends):
            features = self.featurizer.features(tokens)
            real = tf.not_equal(features["words"], 0)
            potentials, ids = self.model.decode_potentials(features)
            first, last = entity_bounds(ids, real, self.type_of, self.inside)
            log_probs = self.model.segment_log_probs(features, ids, first, self.continuation, potentials=potentials)
            width = tf.shape(ids)[1]
            outputs = {
                "tags": tf.where(real, tf.gather(self.tags, ids), ""),
                "tokens": _padded(tokens, "", width),
                "token_start": _padded(starts, 0, width),
                "token_end": _padded(ends, 0, width),
            }
            positions = tf.broadcast_to(tf.range(width), tf.shape(ids))
            begin = tf.ragged.boolean_mask(positions, first)
            end = tf.ragged.boolean_mask(positions, last)
            start_char = tf.gather(outputs["token_start"], begin, batch_dims=1)
            end_char = tf.gather(outputs["token_end"], end, batch_dims=1)
            rows = tf.gather(text, start_char.value_rowids())
            span = tf.strings.substr(rows, start_char.flat_values, end_char.flat_values - start_char.flat_values,
                                     unit="UTF8_CHAR")
            kinds = tf.gather(self.type_of, tf.gather(ids, begin, batch_dims=1))
            scores = tf.exp(tf.gather(tf.cast(log_probs, tf.float32), end, batch_dims=1))
            outputs.update(
                entity_count=tf.cast(begin.row_lengths(), tf.int32),
                entity_start=start_char.to_tensor(0),
                entity_end=end_char.to_tensor(0),
                entity_type=tf.gather(self.types, kinds).to_tensor(""),
                entity_text=start_char.with_flat_values(span).to_tensor(""),
                entity_score=scores.to_tensor(0.0),
            )
            return outputs

    return TaggerModule()


def _padded(ragged, value, width):
    """A ragged `[batch, None]` as a dense `[batch, width]`, padded at the end with `value`."""
    import tensorflow as tf

    dense = ragged.to_tensor(value)
    return tf.pad(dense, [[0, 0], [0, width - tf.shape(dense)[1]]], constant_values=value)
