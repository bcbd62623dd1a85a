"""Prepare what a GPU sitting (scripts/gpu_sitting.sh) carries, on this machine, before the sitting.

The lent machine (Python 3.12, torch with CUDA, numpy, sacrebleu, sentencepiece, tensorboard...)
has no network and lacks a few packages; the corpus does not travel with the checkout either. This
builds the three git-ignored folders a device call names in `carry`:

    .whl/       hydra-core, omegaconf, antlr4 runtime, hydra-joblib-launcher (pure-Python wheels)
    .whl_onmt/  OpenNMT-py 3.5.1 and what its train/translate import (cp312 manylinux wheels),
                plus a small stand-in for spaCy: OpenNMT-py imports spacy with its transforms but
                calls it only in the 'terminology' transform, and spaCy's wheels (~57 MiB) would
                not fit in a call's 64 MiB with the rest
    .device/    data/multi30k (the corpus) and peers/opennmt (the peer's scripts)

Usage (network for pip download needed; the folders are kept when already complete):
    python scripts/gpu_prepare.py [--data ../shared/data] [--peers ../shared/peers/opennmt]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

RPR_NMT_WHEELS = [
    "hydra-core==1.3.8",
    "omegaconf==2.3.1",
    "antlr4-python3-runtime==4.9.3",
    "hydra-joblib-launcher==1.2.0",
]
ONMT_WHEELS = [
    "OpenNMT-py==3.5.1",
    "configargparse==1.9.0",
    "fasttext-wheel==0.9.2",
    "pyahocorasick==2.3.1",
    "pyonmttok==1.38.1",
    "rapidfuzz==3.14.6",
]
# The lent machine's interpreter: wheels are fetched for it, not for this one.
PLATFORM = ["--python-version", "3.12", "--implementation", "cp"]
for tag in ("manylinux_2_28", "manylinux_2_27", "manylinux_2_17", "manylinux2014", "manylinux1"):
    PLATFORM += ["--platform", f"{tag}_x86_64"]

SPACY_STAND_IN = '''"""Stands in for spaCy on the GPU machine (scripts/gpu_prepare.py).

OpenNMT-py 3.5.1 imports spacy with its transforms and calls it only in the 'terminology'
transform, which the sitting does not use."""

__version__ = "0.0.0+stand-in"


def load(*args, **kwargs):
    raise ImportError("spacy is a stand-in here; the 'terminology' transform needs the real spaCy")


def blank(*args, **kwargs):
    load()
'''


def download(requirements: list[str], into: Path) -> None:
    """pip download, no dependencies (each one is named), binary wheels for the lent machine."""
    into.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:"]
    command += [*PLATFORM, "-d", str(into), *requirements]
    subprocess.run(command, check=True)


def build_pure_wheels(requirements: list[str], into: Path) -> None:
    """pip wheel, no dependencies: pure-Python packages as py3-none-any wheels, built here from
    their source archive when PyPI has no wheel (antlr4-python3-runtime 4.9.3, which omegaconf 2.3
    pins)."""
    into.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(into), *requirements]
    subprocess.run(command, check=True)


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{name},sha256={digest},{len(data)}"


def spacy_stand_in_wheel(into: Path) -> Path:
    """A minimal wheel (the format pip installs: files, METADATA, WHEEL, RECORD) holding spacy/."""
    info = "onmt_spacy_stand_in-0.0.1.dist-info"
    files = {
        "spacy/__init__.py": SPACY_STAND_IN.encode(),
        f"{info}/METADATA": b"Metadata-Version: 2.1\nName: onmt_spacy_stand_in\nVersion: 0.0.1\n",
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: rpr-nmt\nRoot-Is-Purelib: true\n"
        b"Tag: py3-none-any\n",
        f"{info}/top_level.txt": b"spacy\n",
    }
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = into / "onmt_spacy_stand_in-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files.items():
            wheel.writestr(name, data)
    return path


def source_problem(data: Path, peers: Path) -> str | None:
    """The folder of --data / --peers that is missing; None when both are there."""
    for source in (data / "multi30k", peers):
        if not source.is_dir():
            return f"{source} is not a folder: pass --data / --peers to where it is"
    return None


def size_mib(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=REPO.parent / "shared" / "data")
    parser.add_argument("--peers", type=Path, default=REPO.parent / "shared" / "peers" / "opennmt")
    args = parser.parse_args(argv)
    if problem := source_problem(args.data, args.peers):
        print(f"error: {problem}", file=sys.stderr)
        return 2  # before anything is built or downloaded

    wheels, onmt, device = REPO / ".whl", REPO / ".whl_onmt", REPO / ".device"
    if len(list(wheels.glob("*.whl"))) < len(RPR_NMT_WHEELS):
        build_pure_wheels(RPR_NMT_WHEELS, wheels)
    if len(list(onmt.glob("*.whl"))) < len(ONMT_WHEELS) + 1:
        download(ONMT_WHEELS, onmt)
        spacy_stand_in_wheel(onmt)
    shutil.copytree(args.data / "multi30k", device / "data" / "multi30k", dirs_exist_ok=True)
    shutil.copytree(args.peers, device / "peers" / "opennmt", dirs_exist_ok=True)
    sizes = {folder: size_mib(folder) for folder in (wheels, onmt, device)}
    for folder, size in sizes.items():
        print(f"{folder.relative_to(REPO)}/: {size:.1f} MiB")
    total = sum(sizes.values())
    print(f"carry [.whl, .whl_onmt, .device]: {total:.1f} MiB of the 64 MiB a call may carry")
    return 0 if total < 64 else 1


if __name__ == "__main__":
    sys.exit(main())
