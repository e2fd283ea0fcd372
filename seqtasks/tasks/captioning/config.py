"""The captioning task's recipe sections: `data`, the captions and images, and `model`, the captioner
with its backbone."""

from dataclasses import dataclass
from typing import Literal

from seqtasks.recipe.schema import (
    MAX_ENSEMBLE,
    MAX_EXAMPLES,
    MAX_LENGTH,
    MAX_SIZE,
    AttentionConfig,
    DecoderConfig,
    DecodingConfig,
    section,
    spec,
)
from seqtasks.utils.bounds import MAX_VOCAB


@dataclass
class CaptioningDataConfig:
    format: Literal["flickr", "coco"] = spec(
        "flickr",
        "'flickr': one caption file of '<image>#<n><TAB><caption>' lines (Flickr8k.token.txt) "
        "with split lists naming the images; 'coco': COCO captions JSON files, one per split.",
    )
    captions: str = spec(
        "", "Caption file ('flickr'), or the training captions JSON ('coco'); plain or gzip.", path=True
    )
    validation_captions: str = spec("", "'coco' only: the validation captions JSON.", path=True)
    train_split: str = spec(
        "", "'flickr': the list of training image names (Flickr_8k.trainImages.txt).", path=True
    )
    validation_split: str = spec(
        "", "'flickr': the list of validation image names (Flickr_8k.devImages.txt).", path=True
    )
    images: str = spec("", "Folder holding the image files the captions name.", path="folder")
    url: str = spec("", "Where the data set can be downloaded; for reference only, never fetched.")
    max_train_images: int = spec(0, "Use only the first this many training images (0: all).", min=0, max=MAX_EXAMPLES)
    max_validation_images: int = spec(
        0, "Use only the first this many validation images (0: all).", min=0, max=MAX_EXAMPLES
    )
    lower_case: bool = spec(True, "Case-fold captions.")
    strip_punctuation: bool = spec(
        True, "Replace punctuation and symbols in captions by spaces (training and references alike)."
    )
    vocab_size: int = spec(5000, "Target size of the WordPiece vocabulary of the captions.", min=10, max=MAX_VOCAB)
    max_length: int = spec(
        40, "Training captions with more subwords (plus [START] or [END]) are left out.", min=2, max=MAX_LENGTH
    )
    mirror_images: bool = spec(
        False,
        "Also train on the training images flipped left to right: each caption is read with its image or the "
        "mirror, at random every epoch (a frozen backbone's mirrored grids are cached too). Captions are not "
        "changed, so the few that say left or right are wrong for the mirror.",
    )
    feature_cache: str = spec(
        "",
        "Folder for the backbone's cached feature grids (empty: feature_cache/ in the output "
        "folder, beside the recipes' run folders).",
        path="written",
    )

    def check(self):
        if not self.captions:
            return [("captions", "required: the caption file")]
        if not self.images:
            return [("images", "required: the folder of images")]
        if self.format == "flickr" and not (self.train_split and self.validation_split):
            missing = "train_split" if not self.train_split else "validation_split"
            return [(missing, "required for the 'flickr' format: a list of image names")]
        if self.format == "coco" and not self.validation_captions:
            return [("validation_captions", "required for the 'coco' format: the validation captions JSON")]
        return []


@dataclass
class BackboneConfig:
    type: Literal["cnn", "file", "application"] = spec(
        "cnn",
        "Where the image grid comes from: 'cnn', a small CNN trained with the captioner from "
        "pixels; 'file', a frozen .keras image model whose output is a (H, W, C) feature map "
        "taking 0..255 RGB input; 'application', a frozen keras.applications model by name. "
        "Frozen backbones run once per image and their features are cached.",
    )
    path: str = spec("", "'file': the .keras model file.", path=True)
    name: str = spec("EfficientNetB0", "'application': the keras.applications model, e.g. ResNet50.")
    weights: Literal["imagenet", "none"] = spec(
        "imagenet", "'application': ImageNet weights (downloaded once by Keras) or random ones."
    )
    image_size: int = spec(
        224, "Square input size images are resized to ('cnn', 'application'; a file gives its own).", min=8, max=4096
    )
    filters: list[int] = spec(
        [32, 64, 128],
        "'cnn': filters of each 3x3 convolution + 2x2 max pooling stage; each stage halves the image, "
        "so image_size 2^n allows n stages.",
        max=MAX_SIZE,
    )
    fine_tune_from: str = spec(
        "",
        "'file', 'application': train the backbone's layers after this one with the captioner "
        "(e.g. block14_add, the last stage of EfficientNet-Lite0); features are cached at its "
        "output. Empty: the whole backbone stays frozen.",
    )

    def check(self):
        if self.type == "cnn" and self.fine_tune_from:
            return [("fine_tune_from", "only for a 'file' or 'application' backbone; the 'cnn' trains entirely")]
        if self.type == "file" and not self.path:
            return [("path", "required for a 'file' backbone: the .keras model")]
        stages = self.image_size.bit_length() - 1  # halvings that leave at least one pixel
        if self.type == "cnn" and len(self.filters) > stages:
            return [
                ("filters", f"image_size {self.image_size} allows at most {stages} stages; got {len(self.filters)}")
            ]
        if self.type == "cnn" and (not self.filters or any(f < 1 for f in self.filters)):
            return [("filters", f"expected a list of positive filter counts; got {self.filters}")]
        return []


@dataclass
class CaptionerModelConfig:
    backbone: BackboneConfig = section(BackboneConfig, "The image encoder giving the feature grid.")
    embedding_dim: int = spec(256, "Size of the word embeddings.", min=1, max=MAX_SIZE)
    feature_dropout: float = spec(0.0, "Dropout on the grid features while training.", min=0.0, below=1.0)
    embedding_dropout: float = spec(
        0.0, "Dropout on the word embeddings the decoder reads while training.", min=0.0, below=1.0
    )
    decoder: DecoderConfig = section(DecoderConfig, "The AttentionDecoder writing the caption.")
    attention: AttentionConfig = section(
        AttentionConfig, "Attention over the grid locations; Show, Attend and Tell uses bahdanau."
    )
    gate: bool = spec(True, "Scale the context by the learned gating scalar β of Show, Attend and Tell.")
    attention_penalty: float = spec(
        1.0, "λ of the doubly stochastic attention penalty λ·mean_i(1 - Σ_t α_ti)² (0: none).", min=0.0
    )
    scheduled_sampling: float = spec(
        0.0,
        "Scheduled sampling: the probability, at the last epoch, that a caption step reads a word drawn from the "
        "captioner's own distribution instead of the reference's; it rises linearly from 0 at the first epoch over "
        "training.epochs. Each training step costs one more forward pass (0: teacher forcing only).",
        min=0.0,
        max=1.0,
    )
    decoding: DecodingConfig = section(DecodingConfig, "Search used for evaluation and export.")
    ensemble: int = spec(
        1,
        "Captioners of these settings trained side by side from different initial weights, each with its own loss "
        "term (the training and validation losses are their sums); evaluation and the export decode with the mean "
        "of their log-probabilities at each step. Training time and parameters grow about this many times.",
        min=1,
        max=MAX_ENSEMBLE,
    )

    def check(self):
        if self.attention.type == "none":
            return [("attention.type", "captioning attends over the image grid; use 'bahdanau' or 'luong'")]
        if self.ensemble > 1 and self.backbone.fine_tune_from:
            return [("ensemble", "the members cannot share a fine-tuned backbone stage (backbone.fine_tune_from); "
                                 "expected 1 or no fine_tune_from")]
        if self.decoder.summary_input:
            return [("decoder.summary_input", "captioning attends over the image grid instead of reading a summary; set it false")]
        if self.attention.type == "luong" and self.attention.score == "dot":
            return [("attention.score", "'dot' needs grid features of the decoder's size; use 'general' or 'concat'")]
        return []
