"""The README and docs stay true: the generated schema block matches the code,
the two set-up commands come first, and every picture and page they point to
exists."""

from __future__ import annotations

import re

from strata import schema_doc
from tests.conftest import REPO

README = (REPO / "README.md").read_text()


def test_the_schema_block_is_generated_from_the_schema():
    block = re.search(re.escape(schema_doc.START) + r".*?" + re.escape(schema_doc.END),
                      README, flags=re.S)
    assert block, "README has the schema block"
    assert block.group(0) == schema_doc.block(), "run: python -m strata.schema_doc"


def test_the_readme_starts_with_the_two_commands():
    first = re.search(r"```bash\n(.*?)```", README, flags=re.S).group(1).strip().splitlines()
    assert [line.split("#")[0].strip() for line in first] == ["make run", "make test"]


def test_every_local_link_and_picture_exists():
    docs = [REPO / "README.md", *(REPO / "docs").glob("*.md")]
    missing = []
    for doc in docs:
        for target in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
            if re.match(r"^(https?:|mailto:|#|data:)", target):
                continue
            path = (doc.parent / target.split("#")[0]).resolve()
            if not path.exists():
                missing.append(f"{doc.name}: {target}")
    assert not missing, missing
