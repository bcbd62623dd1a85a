"""The tiny trained checkpoint of the export tests (tests/export/conftest.py), for the commands
that read one (tests/cli/test_run_folder_inputs.py)."""

from tests.evaluate.tiny import tiny_run  # noqa: F401  (a fixture: two tiny checkpoints)
from tests.export.conftest import tiny_bpe, tiny_checkpoint  # noqa: F401  (fixtures)
