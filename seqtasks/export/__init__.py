"""Publishing a SavedModel: versioned, atomic, with its audit files and model card."""
