"""The tiny trained model and checkpoint that the export tests use (tests/export/conftest.py):
inspection reads the same model."""

from tests.export.conftest import tiny_bpe, tiny_checkpoint  # noqa: F401  (fixtures)
