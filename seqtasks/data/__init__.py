"""Data readers: plain Python, no TensorFlow, errors naming file and line."""
