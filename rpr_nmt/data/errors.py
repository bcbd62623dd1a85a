"""The one exception type of the data pipeline."""

from __future__ import annotations


class DataError(Exception):
    """Bad, missing or misaligned input data.

    The message names the offending file, line or setting and says what to do; command-line entry
    points print it without a traceback.
    """
