"""The toy task's recipe section: `data`, the generated digit sequences (its `model` is the shared
`Seq2SeqModelConfig`)."""

from dataclasses import dataclass

from seqtasks.recipe.schema import MAX_EXAMPLES, MAX_LENGTH, spec


@dataclass
class ToyDataConfig:
    train_size: int = spec(4000, "Generated training examples.", min=1, max=MAX_EXAMPLES)
    validation_size: int = spec(400, "Generated validation examples.", min=1, max=MAX_EXAMPLES)
    min_length: int = spec(3, "Shortest digit sequence.", min=1, max=MAX_LENGTH)
    max_length: int = spec(10, "Longest digit sequence.", min=1, max=MAX_LENGTH)
    num_symbols: int = spec(10, "Distinct digits (0 to num_symbols - 1).", min=2, max=10)

    def check(self):
        if self.min_length > self.max_length:
            return [("min_length", f"must not exceed max_length ({self.max_length}); got {self.min_length}")]
        return []
