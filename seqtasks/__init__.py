"""seqtasks: RNN encoder-decoders with attention, beam search and servable exports."""

__version__ = "0.1.0"
