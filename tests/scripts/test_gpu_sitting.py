"""scripts/gpu_sitting.sh: a refused setting leaves nothing behind."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).parents[2] / "scripts" / "gpu_sitting.sh"


def test_a_sitting_folder_equal_to_the_results_is_refused_before_any_folder_is_made(tmp_path):
    # Both folders used to be created first, then the sitting refused.
    out = tmp_path / "results"
    env = {**os.environ, "OUT": str(out), "SITTING": f"{out}/"}
    done = subprocess.run(
        ["bash", str(SCRIPT)], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "SITTING must differ" in done.stderr
    assert not out.exists()
