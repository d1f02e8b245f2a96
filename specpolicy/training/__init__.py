"""Training of learned policies: training sets from sweep stores and the training loop (no torch)."""
