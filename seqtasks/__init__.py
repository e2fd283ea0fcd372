"""seqtasks: RNN encoder-decoders with attention, beam search and servable exports."""

__version__ = "0.1.0"


def load(path, checkpoint=None, verbose=False):
    """A trained model from a run folder or an export (version folder or base path); see `seqtasks.inference.api`.

    >>> model = seqtasks.load("saved_models/translation")  # doctest: +SKIP
    >>> model.translate(["Tengo hambre."])[0].text  # doctest: +SKIP
    "i'm hungry."
    """
    from seqtasks.inference.api import load as load_model

    return load_model(path, checkpoint, verbose)
