"""Text handling inside the TensorFlow graph (tensorflow-text), shared by training and export."""
