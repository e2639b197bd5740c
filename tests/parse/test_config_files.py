"""Tests for stages.parse.config_files: top-level keys with exact line
ranges, path references, invalid input, and path literals in code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from strata.stages.parse.config_files import CONFIG_EXTENSIONS, looks_like_path, parse_config, path_literals
from strata.stages.parse.model import ParsedFile

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


def _keys(pf: ParsedFile) -> list[tuple[str, int | None, int | None]]:
    return [(c.slug, c.start_line, c.end_line) for c in pf.root.children]


def _refs(pf: ParsedFile) -> list[tuple[str, str, int]]:
    out = []
    for r in pf.references:
        assert (r.type, r.relation, r.attrs["kind"]) == ("jump", "references", "path")
        out.append((r.source.slug, r.target, r.attrs["line"]))
    return out


YAML = """\
# Station settings
name: harbour
paths:
  data: data/in.csv
  # a comment inside
  extra:
    - docs/readme.md
    - https://example.com/a.md
    - not a path.md

# about the last key
limits: {low: 1, high: 2, file: "limits/high.yaml"}
"""


def test_yaml_top_level_keys_exact_lines_and_text():
    pf = parse_config(YAML, "cfg/station.yaml", "yaml")
    root = pf.root
    assert (root.kind, root.subkind, root.language, root.title) == ("file", "yaml", "yaml", "station.yaml")
    assert root.text == YAML and (root.start_line, root.end_line) == (1, 12)
    assert _keys(pf) == [("name", 2, 2), ("paths", 3, 9), ("limits", 12, 12)]
    paths = root.children[1]
    assert (paths.kind, paths.subkind, paths.title) == ("section", "key", "paths")
    assert paths.text.startswith("paths:\n  data: data/in.csv") and paths.text.endswith("not a path.md")
    assert pf.notes == []


def test_yaml_path_references_in_nested_values():
    pf = parse_config(YAML, "cfg/station.yaml", "yaml")
    assert _refs(pf) == [
        ("paths", "data/in.csv", 4),
        ("paths", "docs/readme.md", 7),
        ("limits", "limits/high.yaml", 12),
    ]


def test_yaml_multi_document_prefixes_and_top_level_sequence():
    text = "a: 1\nb: x/y.md\n---\nc: 3\n---\n- one\n- two/three.txt\n"
    pf = parse_config(text, "m.yaml", "yaml")
    assert _keys(pf) == [("doc1/a", 1, 1), ("doc1/b", 2, 2), ("doc2/c", 4, 4),
                         ("doc3/item-1", 6, 6), ("doc3/item-2", 7, 7)]
    assert _refs(pf) == [("doc1/b", "x/y.md", 2), ("doc3/item-2", "two/three.txt", 7)]
    single = parse_config("- a\n- b: 1\n  c: 2\n", "s.yaml", "yaml")
    assert _keys(single) == [("item-1", 1, 1), ("item-2", 2, 3)]


def test_yaml_only_safe_loading():
    pf = parse_config("a: !!python/object/apply:os.system ['echo hi']\n", "evil.yaml", "yaml")
    assert pf.root.children == [] and pf.notes[0].startswith("invalid yaml:")


def test_yaml_aliases_do_not_explode():
    lines = ['a: &a ["p/q.md", "x", "x", "x", "x", "x", "x", "x", "x"]']
    for prev, name in zip("abcdefgh", "bcdefghi"):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{prev}"] * 9) + "]")
    pf = parse_config("\n".join(lines) + "\n", "lol.yaml", "yaml")
    assert len(pf.root.children) == 9


JSON = """\
{
  "name": "demo",
  "nested": {
    "script": "scripts/run.sh",
    "list": ["a.csv", "http://x.org/b.csv", "has space.csv"]
  },
  "n": 3
}
"""


def test_json_top_level_keys_exact_lines_and_text():
    pf = parse_config(JSON, "conf/demo.json", "json")
    assert pf.root.subkind == "json"
    assert _keys(pf) == [("name", 2, 2), ("nested", 3, 6), ("n", 7, 7)]
    nested = pf.root.children[1]
    assert nested.text == '"nested": ' + json.dumps(json.loads(JSON)["nested"], indent=2)
    assert _refs(pf) == [("nested", "scripts/run.sh", 4), ("nested", "a.csv", 5)]


def test_json_minified_and_top_level_array():
    pf = parse_config('{"a": {"b": [1, 2]}, "c": "d/e.md"}', "min.json", "json")
    assert _keys(pf) == [("a", 1, 1), ("c", 1, 1)]
    arr = parse_config('[\n  {"f": "x/y.json"},\n  2,\n  [3,\n   4]\n]\n', "arr.json", "json")
    assert _keys(arr) == [("item-1", 2, 2), ("item-2", 3, 3), ("item-3", 4, 5)]
    assert _refs(arr) == [("item-1", "x/y.json", 2)]


def test_json_array_over_200_items_is_capped_with_note():
    pf = parse_config(json.dumps(list(range(250))), "big.json", "json")
    assert len(pf.root.children) == 200 and pf.root.children[-1].slug == "item-200"
    assert any("50 more" in n for n in pf.notes)


TOML = """\
# comment
title = "x"
files = [
  "a/b.py",
  "c",
]

[tool.lint]
script = 'scripts/lint.sh'
doc = \"\"\"
[not.a.table]
\"\"\"

# about build
[build]
out = "dist"

[tool.test]
paths = ["tests/"]
"""


def test_toml_tables_and_keys_exact_lines():
    pf = parse_config(TOML, "p.toml", "toml")
    assert pf.root.language == "toml"
    assert _keys(pf) == [("title", 2, 2), ("files", 3, 6), ("tool", 8, 19), ("build", 15, 16)]
    tool = pf.root.children[2]
    assert tool.attrs["spans"] == [[8, 12], [18, 19]]
    assert tool.text == "[tool.lint]\nscript = 'scripts/lint.sh'\ndoc = \"\"\"\n[not.a.table]\n\"\"\"\n" \
                        "[tool.test]\npaths = [\"tests/\"]"
    # "tests/" names a folder, not a file: no reference
    assert _refs(pf) == [("files", "a/b.py", 4), ("tool", "scripts/lint.sh", 9)]


@pytest.mark.parametrize("fmt, text", [
    ("yaml", "a: [1, 2\nb: 3\n"),
    ("json", '{"a": 1,}'),
    ("toml", "a = \n"),
    ("json", "[" * 50000 + "]" * 50000),
])
def test_invalid_syntax_gives_raw_file_and_note(fmt, text):
    pf = parse_config(text, f"bad.{fmt}", fmt)
    assert pf.root.kind == "file" and pf.root.subkind == fmt
    assert pf.root.children == [] and pf.references == []
    assert pf.root.text == text
    assert pf.notes and pf.notes[0].startswith(f"invalid {fmt}: ")


def test_long_file_root_text_is_a_head():
    text = "".join(f"key{i}: {'v' * 40}\n" for i in range(100))
    pf = parse_config(text, "long.yaml", "yaml")
    assert pf.root.text.endswith("\n…(40 more lines)")
    assert pf.root.text.count("\n") == 60
    assert len(pf.root.children) == 100 and pf.root.children[99].start_line == 100


def test_never_raises_on_odd_input():
    for fmt in ("yaml", "json", "toml", "ini", ""):
        for text in ("", "\x00\x01", "a: b: c", "{", "[[x]]\n[[x]]\ny=1", b"a: 1"):
            pf = parse_config(text, "odd", fmt)  # type: ignore[arg-type]
            assert pf.root.kind == "file"
    assert CONFIG_EXTENSIONS[".yml"] == "yaml"


# ---------------------------------------------------------------- path literals


def test_path_literals_python():
    code = '''\
import yaml
DEFAULTS = Path(__file__).parent / "config/defaults.yaml"
with open('data/stations.json') as fh:  # don't "forget" it
    pass
URL = "https://example.com/a.py"
label = "has space.py"
ext = ".py"
mime = "application/json"
fmt = "%Y/%m/%d.csv"
again = "config/defaults.yaml"
print("it's", 'notes/todo.txt', "", "setup.py")
'''
    assert path_literals(code, "python") == [
        ("config/defaults.yaml", 2),
        ("data/stations.json", 3),
        ("notes/todo.txt", 11),
        ("setup.py", 11),
    ]


def test_path_literals_javascript():
    code = '''\
import { load } from "./module";
import util from './util.js';
const cfg = require("../config/app.json");
fetch("http://host/x.json"); const glob = "src/**/*.ts";
const tpl = `templates/page.html`;
'''
    assert path_literals(code, "javascript") == [("./util.js", 2), ("../config/app.json", 3)]


def test_looks_like_path_rules():
    assert looks_like_path("a/b") and looks_like_path("x.csv") and looks_like_path("../up/x.md")
    assert not looks_like_path("a/b", require_extension=True)
    for bad in ("", "a b/c", "http://x/y.md", "mailto:a@b.md", "/etc/x.md", "~/x.md", ".md",
                "a/", "x" * 200 + ".md", "{name}.csv", "*.py", "#/defs/x"):
        assert not looks_like_path(bad), bad


# ---------------------------------------------------------------- sample files


def test_sample_stations_json():
    path = SAMPLE / "tidewater" / "config" / "stations.json"
    pf = parse_config(path.read_text(encoding="utf-8"), "tidewater/config/stations.json", "json")
    assert pf.notes == []
    assert [c.slug for c in pf.root.children] == ["settings", "stations", "export"]
    targets = {t: (src, line) for src, t, line in _refs(pf)}
    assert targets["calibration/harbour-north.csv"][0] == "stations"
    assert targets["defaults.yaml"][0] == "settings"
    # both resolve relative to the file
    for target in targets:
        assert (path.parent / target).is_file(), target


def test_sample_logging_toml_and_defaults_yaml():
    toml_path = SAMPLE / "tidewater" / "config" / "logging.toml"
    pf = parse_config(toml_path.read_text(encoding="utf-8"), "tidewater/config/logging.toml", "toml")
    assert pf.notes == []
    assert [c.slug for c in pf.root.children] == [
        "version", "disable_existing_loggers", "formatters", "handlers", "loggers", "root"]
    assert ("handlers", "logs/tidewater.log") in {(s, t) for s, t, _ in _refs(pf)}
    yaml_path = SAMPLE / "tidewater" / "config" / "defaults.yaml"
    text = yaml_path.read_text(encoding="utf-8")
    pf = parse_config(text, "tidewater/config/defaults.yaml", "yaml")
    (key,) = pf.root.children
    assert key.slug == "tidewater" and key.start_line == 3 and key.end_line == len(text.splitlines())
    assert "# fit a linear drift term" in key.text  # raw lines keep the comments


def test_sample_settings_module_names_defaults_yaml():
    settings = SAMPLE / "tidewater" / "settings.py"
    found = dict(path_literals(settings.read_text(encoding="utf-8"), "python"))
    assert "config/defaults.yaml" in found
    assert (settings.parent / "config/defaults.yaml").is_file()
