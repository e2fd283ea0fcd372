"""Image captioning (Show, Attend and Tell), split by concern.

`data` reads, cleans and batches captions; `image_inputs` makes the backbone
and the cached feature grids; `model` builds the `ImageCaptioner`;
`evaluation` scores captions and draws attention overlays; `export` is the
image-bytes reader of the export; `task` joins them into the `CaptioningTask`.
"""
