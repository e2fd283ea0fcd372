"""Models assembled from `seqtasks.layers`, shared by the task recipes."""

from seqtasks.models.ensemble import Ensemble
from seqtasks.models.image_captioner import ImageCaptioner
from seqtasks.models.image_captioner_ensemble import ImageCaptionerEnsemble
from seqtasks.models.seq2seq import Seq2Seq
from seqtasks.models.sequence_tagger import SequenceTagger
from seqtasks.models.sequence_tagger_ensemble import SequenceTaggerEnsemble
from seqtasks.models.text_classifier import TextClassifier

__all__ = [
    "Ensemble",
    "ImageCaptioner",
    "ImageCaptionerEnsemble",
    "Seq2Seq",
    "SequenceTagger",
    "SequenceTaggerEnsemble",
    "TextClassifier",
]
