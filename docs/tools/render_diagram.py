"""Render the pipeline diagram (docs/images/pipeline.mmd) to docs/images/pipeline.svg.

The documentation site shows the SVG, so the page draws offline and without a script
from a CDN; the README shows the same Mermaid source, which GitHub draws itself
(tests/test_docs.py checks the two sources are one). Run after editing the .mmd:

    make diagram

It needs Mermaid's browser bundle (``npm pack mermaid@11``; the Makefile fetches it
into ~/.cache/strata-mermaid once) and Chromium through Playwright, both of which the
dev extra and the test machine already have."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

DOCS = Path(__file__).resolve().parents[1]


def render(source: str, bundle: Path) -> str:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        page = browser.new_page()
        page.set_content("<!doctype html><body></body>")
        page.add_script_tag(path=str(bundle))
        svg = page.evaluate(
            """async (src) => {
                mermaid.initialize({startOnLoad: false, theme: "neutral",
                                    flowchart: {htmlLabels: false}});
                const {svg} = await mermaid.render("pipeline", src);
                // mermaid writes HTML (<br>); a standalone .svg must be XML
                document.body.innerHTML = svg;
                return new XMLSerializer().serializeToString(document.body.firstElementChild);
            }""", source)
        browser.close()
    return svg


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bundle", type=Path, required=True, help="mermaid.min.js")
    args = ap.parse_args()
    source = (DOCS / "images" / "pipeline.mmd").read_text()
    svg = render(source, args.bundle)
    (DOCS / "images" / "pipeline.svg").write_text(svg + "\n")
    print(json.dumps({"wrote": "docs/images/pipeline.svg", "bytes": len(svg)}))


if __name__ == "__main__":
    main()
