"""The Predictor page (predictor.py): a roofline model of named GPUs, with measurements drawn over it."""
