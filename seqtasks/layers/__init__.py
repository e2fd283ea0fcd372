"""Keras 3 layers for sequence models, written with `keras.ops` only.

Every layer is registered as serializable under the package name `seqtasks`,
so models using them save to `.keras` and load in any process that imports
this module.
"""

from seqtasks.layers.attention_decoder import AttentionDecoder
from seqtasks.layers.attention_pooling import AttentionPooling
from seqtasks.layers.bahdanau_attention import BahdanauAttention
from seqtasks.layers.character_cnn import CharacterCNN
from seqtasks.layers.crf import CRF
from seqtasks.layers.luong_attention import LuongAttention
from seqtasks.layers.self_attention_block import SelfAttentionBlock
from seqtasks.layers.stacked_rnn import StackedRNN
from seqtasks.layers.structured_self_attention import StructuredSelfAttention

__all__ = [
    "AttentionDecoder",
    "AttentionPooling",
    "BahdanauAttention",
    "CharacterCNN",
    "CRF",
    "LuongAttention",
    "SelfAttentionBlock",
    "StackedRNN",
    "StructuredSelfAttention",
]
