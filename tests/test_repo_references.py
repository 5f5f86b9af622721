"""Every document the repository cites is inside it: no reference to a folder beside the
checkout (``../shared/...``), and the design notes the code and README cite are in docs/."""
import os
import re
import subprocess

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _tracked_text_files():
    names = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True,
                           check=True).stdout.split()
    for name in names:
        if name.endswith((".png", ".json", ".db")):
            continue
        path = os.path.join(REPO, name)
        if not os.path.isfile(path):  # deleted in the work tree
            continue
        try:
            with open(path, encoding="utf-8") as f:
                yield name, f.read()
        except UnicodeDecodeError:
            continue


def test_no_reference_leaves_the_repository():
    outside = re.compile(r"\.\./shared/|(?<![\w/.])shared/design/")
    bad = [f"{name}:{i}" for name, text in _tracked_text_files()
           if name != "tests/test_repo_references.py"
           for i, line in enumerate(text.splitlines(), 1) if outside.search(line)]
    assert bad == []


def test_the_cited_design_notes_are_vendored():
    for note in ("environment.md", "paper.md"):
        assert os.path.getsize(os.path.join(REPO, "docs", note)) > 1000
