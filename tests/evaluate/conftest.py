"""The tiny checkpoints that this folder's command-line tests decode (tests/evaluate/tiny.py)."""

from tests.evaluate.tiny import tiny_run  # noqa: F401  (a fixture)
