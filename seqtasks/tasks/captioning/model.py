"""The `ImageCaptioner` (or the ensemble of them) a captioning recipe describes."""


def build_model(recipe, vocab_size, input_shape, grid_head=None):
    from seqtasks.models import ImageCaptioner, ImageCaptionerEnsemble
    from seqtasks.models.seq2seq import decoder_arguments

    config = recipe.model
    arguments = dict(
        vocab_size=vocab_size,
        embedding_dim=config.embedding_dim,
        decoder=decoder_arguments(config.decoder, config.attention, recipe.seed, gate=config.gate),
        image_encoder=list(config.backbone.filters) if config.backbone.type == "cnn" else None,
        grid_head=grid_head,
        feature_dropout=config.feature_dropout,
        embedding_dropout=config.embedding_dropout,
        attention_penalty=config.attention_penalty,
        scheduled_sampling=config.scheduled_sampling,
    )
    if config.ensemble > 1:  # the schema refuses a fine-tuned grid_head here
        model = ImageCaptionerEnsemble(config.ensemble, arguments)
    else:
        model = ImageCaptioner(**arguments)
    model.build(((None,) + tuple(input_shape), (None, None)))
    return model
