"""Feature extraction from image folders and text tables/folders into parquet feature tables.

Needs the optional extra (`pip install "dmocli[extract]"`: transformers,
timm, Pillow); importing this package does not, so the core stays small.
"""

from dmocli.extract.runner import ExtractOptions, extract

__all__ = ["ExtractOptions", "extract"]
