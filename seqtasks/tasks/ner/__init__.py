"""Named-entity recognition: the task (`task.py`) and its export (`server.py`)."""
