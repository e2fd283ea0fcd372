"""Sentiment: the task (`task.py`) and the text classifier's compiling, prediction and export (`classifier.py`)."""
