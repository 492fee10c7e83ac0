"""dmocli: thresholded classifiers for imbalanced data at one operating point."""
__version__ = "0.1.0"
