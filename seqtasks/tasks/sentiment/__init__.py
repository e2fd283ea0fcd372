"""Sentiment: the task (`task.py`) and the text classifier's loss and compiling (`training.py`), batch prediction (`prediction.py`) and export (`export.py`)."""
