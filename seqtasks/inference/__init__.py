"""Using an export or a run: `seqtasks.load` (the Python client) and `seqtasks predict`'s reader of any export."""
