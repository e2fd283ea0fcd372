"""The run lifecycle: `Runner` (run folder, recipe, fit, evaluate, export, reopen), the Keras backend's resolution, and the TensorFlow side of exporting a JAX run."""
