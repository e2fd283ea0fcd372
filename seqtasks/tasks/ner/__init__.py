"""Named-entity recognition: the task (`task.py`) and its export (`export.py`)."""
