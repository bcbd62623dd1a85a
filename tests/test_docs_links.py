"""Every relative link in README.md, docs/*.md and results/ (the published reports) leads
somewhere: the file exists, and a #fragment names a heading of the Markdown file it points into
(GitHub's anchors: lower case, punctuation dropped, spaces as hyphens, a repeated heading numbered
-1, -2, ...)."""

import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = [
    ROOT / "README.md",
    *sorted((ROOT / "docs").glob("*.md")),
    *sorted((ROOT / "results").rglob("*.md")),
]

FENCE = re.compile(r"^```.*?^```", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^#{1,6} +(.+?) *#*$", re.M)


def prose(text: str) -> str:
    """The text without code: fenced blocks, indented blocks and inline spans."""
    text = FENCE.sub("", text)
    text = "\n".join(line for line in text.split("\n") if not line.startswith("    "))
    return INLINE_CODE.sub("", text)


def github_anchor(heading: str) -> str:
    slug = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return slug.replace(" ", "-")


@functools.cache  # a page is read once, however many links point into it
def anchors(path: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for heading in HEADING.findall(FENCE.sub("", path.read_text())):
        slug = github_anchor(heading)
        count = seen.get(slug, 0)
        found.add(slug if count == 0 else f"{slug}-{count}")
        seen[slug] = count + 1
    return frozenset(found)


def test_anchor_follows_githubs_rule() -> None:
    heading = "What the tables learned (`rpr-nmt-inspect`, k = 16)"
    assert github_anchor(heading) == "what-the-tables-learned-rpr-nmt-inspect-k--16"
    assert github_anchor("Launches: torch.compile, 1.155") == "launches-torchcompile-1155"


def test_a_repeated_heading_is_numbered(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# A\n\n## Notes\n\n```\n## not a heading\n```\n\n## Notes\n")
    assert anchors(page) == {"a", "notes", "notes-1"}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(document: Path) -> None:
    broken = []
    for target in LINK.findall(prose(document.read_text())):
        if re.match(r"[a-z]+:", target):
            continue
        path_part, _, fragment = target.partition("#")
        path = (document.parent / path_part).resolve() if path_part else document
        if not path.exists():
            broken.append(f"{target}: no file {path}")
        elif fragment and path.suffix == ".md" and fragment not in anchors(path):
            broken.append(f"{target}: no heading with anchor #{fragment} in {path.name}")
    assert not broken, f"{document.name}: " + "; ".join(broken)
