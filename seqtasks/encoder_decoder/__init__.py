"""What the encoder-decoder tasks (translation, toy, captioning) share: decoding in batches (`decoding.py`), the export (`server.py`) and its per-request settings (`settings_inputs.py`)."""
