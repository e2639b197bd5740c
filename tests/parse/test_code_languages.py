"""Tests for stages.parse.code (tree-sitter): hierarchy, line ranges, node paths,
imports and their resolution for JavaScript, TypeScript, Go, Rust, Java, C,
C++, C#, Ruby, PHP, Kotlin and Swift, plus the bundled sample corpus and
hostile input."""

from __future__ import annotations

from pathlib import Path

import pytest

from strata.stages.parse import code as code_languages
from strata.stages.parse.code import LANGUAGE_BY_EXTENSION, parse_code, resolve_import

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "sample"


def by_title(parsed):
    return {d.title: d for d in parsed.root.walk() if d is not parsed.root}


def parent_of(parsed):
    parents = {}
    for d in parsed.root.walk():
        for c in d.children:
            parents[id(c)] = d
    return parents


def imports_of(parsed):
    return [(r.target, r.attrs["kind"]) for r in parsed.references]


# --------------------------------------------------------------------------
# One realistic snippet per language: (path, source, nodes, imports).
# nodes: (title, subkind, parent title or None for the file, start, end, node_path)

CASES = {
    "javascript": ("src/app/gauge.js", '''\
import { Reading } from "./models";
const fs = require("fs");

/** A gauge. */
export class Gauge {
  constructor(id) {
    this.id = id;
  }

  read() {
    return "}";
  }
}

export function level(g) {
  return g.read();
}
''', [
        ("Gauge", "class", None, 5, 13, "src.app.gauge.Gauge"),
        ("Gauge.constructor", "method", "Gauge", 6, 8, "src.app.gauge.Gauge.constructor"),
        ("Gauge.read", "method", "Gauge", 10, 12, "src.app.gauge.Gauge.read"),
        ("level", "function", None, 15, 17, "src.app.gauge.level"),
    ], [("./models", "import"), ("fs", "require")]),

    "typescript": ("web/chart.ts", '''\
import { Reading, Station } from "./models";
import * as api from "../api/client";

export interface Options {
  width: number;
}

export class Chart {
  private readonly el: string = "{";

  constructor(private opts: Options) {}

  render(data: Reading[]): string {
    return `${data.length} }`;
  }
}

export const scale = (x: number): number => {
  return x * 2;
};
''', [
        ("Options", "interface", None, 4, 6, "web.chart.Options"),
        ("Chart", "class", None, 8, 16, "web.chart.Chart"),
        ("Chart.constructor", "method", "Chart", 11, 11, "web.chart.Chart.constructor"),
        ("Chart.render", "method", "Chart", 13, 15, "web.chart.Chart.render"),
        ("scale", "function", None, 18, 20, "web.chart.scale"),
    ], [("./models", "import"), ("../api/client", "import")]),

    "go": ("agent/internal/buffer/ring.go", '''\
package buffer

import (
\t"sync"
\ttw "example.com/tidewater/client"
)

// Ring holds samples.
type Ring struct {
\tmu sync.Mutex
}

func (r *Ring) Push(v float64) {
\tr.mu.Lock()
}

func (r Ring) Len() int {
\treturn 0
}

func NewRing() *Ring {
\treturn &Ring{}
}
''', [
        ("Ring", "struct", None, 9, 11, "agent.internal.buffer.Ring"),
        ("Ring.Push", "method", None, 13, 15, "agent.internal.buffer.Ring.Push"),
        ("Ring.Len", "method", None, 17, 19, "agent.internal.buffer.Ring.Len"),
        ("NewRing", "function", None, 21, 23, "agent.internal.buffer.NewRing"),
    ], [("sync", "import"), ("example.com/tidewater/client", "import")]),

    "rust": ("fw/src/net/gauge.rs", '''\
use crate::net::http;
use super::config::{Config, Mode};
mod util;

/// A gauge.
pub struct Gauge<'a> {
    name: &'a str,
}

impl<'a> Gauge<'a> {
    pub fn new(name: &'a str) -> Self {
        let open = '{';
        Gauge { name }
    }

    fn name(&self) -> &'a str {
        self.name
    }
}

pub fn run() -> u8 {
    0
}
''', [
        ("Gauge", "struct", None, 6, 8, "crate.net.gauge.Gauge"),
        ("impl Gauge", "impl", None, 10, 19, "crate.net.gauge.impl-Gauge"),
        ("Gauge.new", "method", "impl Gauge", 11, 14, "crate.net.gauge.impl-Gauge.new"),
        ("Gauge.name", "method", "impl Gauge", 16, 18, "crate.net.gauge.impl-Gauge.name"),
        ("run", "function", None, 21, 23, "crate.net.gauge.run"),
    ], [("crate::net::http", "use"), ("super::config::Config", "use"), ("super::config::Mode", "use"),
        ("util", "mod")]),

    "java": ("core/src/main/java/com/tide/gauge/Gauge.java", '''\
package com.tide.gauge;

import java.util.List;
import com.tide.model.Reading;

/** A gauge. */
public class Gauge {
    private final String id;

    public Gauge(String id) {
        this.id = id;
    }

    public List<Reading> read(int n) {
        String s = "}";
        return List.of();
    }

    static int twice(int x) { return 2 * x; }
}
''', [
        ("Gauge", "class", None, 7, 20, "com.tide.gauge.Gauge"),
        ("Gauge.Gauge", "method", "Gauge", 10, 12, "com.tide.gauge.Gauge.Gauge"),
        ("Gauge.read", "method", "Gauge", 14, 17, "com.tide.gauge.Gauge.read"),
        ("Gauge.twice", "method", "Gauge", 19, 19, "com.tide.gauge.Gauge.twice"),
    ], [("java.util.List", "import"), ("com.tide.model.Reading", "import")]),

    "kotlin": ("app/src/Gauge.kt", '''\
package com.tide.gauge

import com.tide.model.Reading
import kotlinx.coroutines.*

class Gauge(private val id: String) {
    fun read(): Double {
        return 1.0
    }

    fun label() = "gauge $id }"
}

fun format(r: Reading): String {
    return "${r.level} }"
}
''', [
        ("Gauge", "class", None, 6, 12, "com.tide.gauge.Gauge"),
        ("Gauge.read", "method", "Gauge", 7, 9, "com.tide.gauge.Gauge.read"),
        ("Gauge.label", "method", "Gauge", 11, 11, "com.tide.gauge.Gauge.label"),
        ("format", "function", None, 14, 16, "com.tide.gauge.format"),
    ], [("com.tide.model.Reading", "import"), ("kotlinx.coroutines.*", "import")]),

    "c": ("lib/ring.c", '''\
#include "ring.h"
#include <stdio.h>

/* A ring. */
struct ring {
    int size;
};

static int clamp(int v);

int ring_size(const struct ring *r)
{
    printf("}\\n");
    return r->size;
}

static int clamp(int v) { return v < 0 ? 0 : v; }
''', [
        ("ring", "struct", None, 5, 7, "lib.ring.ring"),
        ("ring_size", "function", None, 11, 15, "lib.ring.ring_size"),
        ("clamp", "function", None, 17, 17, "lib.ring.clamp"),
    ], [("ring.h", "include"), ("stdio.h", "include")]),

    "cpp": ("src/gauge.cpp", '''\
#include "gauge.hpp"
#include <vector>

namespace tide {

class Gauge {
public:
    Gauge(int id) : id_(id) {}
    int read() const {
        return id_; // }
    }
private:
    int id_;
};

int total(const std::vector<Gauge>& gs) {
    return 0;
}

}  // namespace tide
''', [
        ("Gauge", "class", None, 6, 14, "src.gauge.Gauge"),
        ("Gauge.Gauge", "method", "Gauge", 8, 8, "src.gauge.Gauge.Gauge"),
        ("Gauge.read", "method", "Gauge", 9, 11, "src.gauge.Gauge.read"),
        ("total", "function", None, 16, 18, "src.gauge.total"),
    ], [("gauge.hpp", "include"), ("vector", "include")]),

    "csharp": ("Tide/Gauge.cs", '''\
using System;
using Tide.Models;

namespace Tide.Gauges
{
    public class Gauge
    {
        public Gauge(string id) { Id = id; }

        public string Id { get; }

        public double Read()
        {
            var s = $"{Id} }}";
            return 1.0;
        }
    }
}
''', [
        ("Gauge", "class", None, 6, 17, "Tide.Gauges.Gauge"),
        ("Gauge.Gauge", "method", "Gauge", 8, 8, "Tide.Gauges.Gauge.Gauge"),
        ("Gauge.Read", "method", "Gauge", 12, 16, "Tide.Gauges.Gauge.Read"),
    ], [("System", "use"), ("Tide.Models", "use")]),

    "ruby": ("lib/gauge.rb", '''\
require "json"
require_relative "../lib/reading"

# A gauge.
class Gauge < Base
  def initialize(id)
    @id = id
  end

  def read
    items.each do |i|
      puts "end"
    end if true
  end
end

def helper(x)
  x.to_s
end
''', [
        ("Gauge", "class", None, 5, 15, "lib.gauge.Gauge"),
        ("Gauge.initialize", "method", "Gauge", 6, 8, "lib.gauge.Gauge.initialize"),
        ("Gauge.read", "method", "Gauge", 10, 14, "lib.gauge.Gauge.read"),
        ("helper", "function", None, 17, 19, "lib.gauge.helper"),
    ], [("json", "require"), ("../lib/reading", "require")]),

    "php": ("src/Gauges/Gauge.php", '''\
<?php
namespace App\\Gauges;

use App\\Models\\Reading;
require_once __DIR__ . '/helpers.php';

class Gauge
{
    public function __construct(private string $id) {}

    public function read(): string
    {
        return "{$this->id} }";
    }
}

function format_level(float $l): string {
    return sprintf('%.2f }', $l);
}
''', [
        ("Gauge", "class", None, 7, 15, "App.Gauges.Gauge"),
        ("Gauge.__construct", "method", "Gauge", 9, 9, "App.Gauges.Gauge.__construct"),
        ("Gauge.read", "method", "Gauge", 11, 14, "App.Gauges.Gauge.read"),
        ("format_level", "function", None, 17, 19, "App.Gauges.format_level"),
    ], [("App\\Models\\Reading", "use"), ("__DIR__/helpers.php", "require")]),

    "swift": ("Sources/Gauge.swift", '''\
import Foundation
import TideKit

/// A gauge.
final class Gauge {
    let id: String

    init(id: String) {
        self.id = id
    }

    func read() -> String {
        return "\\(id) }"
    }
}

func format(_ level: Double) -> String {
    return String(format: "%.2f", level)
}
''', [
        ("Gauge", "class", None, 5, 15, "Sources.Gauge.Gauge"),
        ("Gauge.init", "method", "Gauge", 8, 10, "Sources.Gauge.Gauge.init"),
        ("Gauge.read", "method", "Gauge", 12, 14, "Sources.Gauge.Gauge.read"),
        ("format", "function", None, 17, 19, "Sources.Gauge.format"),
    ], [("Foundation", "import"), ("TideKit", "import")]),
}


@pytest.mark.parametrize("language", sorted(CASES))
def test_hierarchy_lines_paths_and_imports(language):
    path, src, expected, imports = CASES[language]
    parsed = parse_code(src, path, language)
    assert parsed.notes == []
    root = parsed.root
    assert (root.kind, root.subkind, root.language, root.title) == ("file", language, language,
                                                                    path.rsplit("/", 1)[-1])
    assert (root.start_line, root.end_line) == (1, src.count("\n"))
    nodes = by_title(parsed)
    parents = parent_of(parsed)
    assert sorted(nodes) == sorted(e[0] for e in expected)
    for title, subkind, parent, start, end, node_path in expected:
        d = nodes[title]
        assert (d.kind, d.subkind, d.language) == ("code", subkind, language), title
        assert (d.start_line, d.end_line) == (start, end), title
        assert d.node_path == node_path, title
        assert parents[id(d)] is (nodes[parent] if parent else root), title
        assert d.attrs["signature"], title
    assert imports_of(parsed) == imports
    assert all(r.source is root and r.type == "import" and r.relation == "imports"
               and r.attrs["language"] == language for r in parsed.references)


@pytest.mark.parametrize("language", sorted(CASES))
def test_children_bodies_become_one_line_placeholders(language):
    """Each node's text is its own lines with every multi-line child collapsed to one line."""
    path, src, _, _ = CASES[language]
    parsed = parse_code(src, path, language)
    lines = src.split("\n")
    for d in parsed.root.walk():
        start, end = (1, src.count("\n")) if d is parsed.root else (d.start_line, d.end_line)
        cut = [c for c in d.children if d is parsed.root or c.start_line > d.start_line]
        expected_len = (end - start + 1) - sum(c.end_line - c.start_line for c in cut)
        assert len(d.text.split("\n")) == expected_len, d.title
        for c in cut:
            assert c.attrs["signature"] in d.text
            if c.end_line - c.start_line >= 2:  # its body is gone from the parent
                inner = [ln for ln in lines[c.start_line:c.end_line - 1] if ln.strip()]
                assert not any(ln in d.text.split("\n") for ln in inner), (d.title, c.title)
        if d.children and d is not parsed.root:
            assert d.text.split("\n")[0] == lines[d.start_line - 1]


def test_placeholder_text_examples():
    go = parse_code(CASES["go"][1], CASES["go"][0], "go")
    assert "func (r *Ring) Push(v float64) { ... }" in go.root.text.split("\n")
    assert "type Ring struct { ... }" in go.root.text.split("\n")
    assert "import (" in go.root.text  # imports stay in the file's text
    java = parse_code(CASES["java"][1], CASES["java"][0], "java")
    cls = by_title(java)["Gauge"]
    assert "    public List<Reading> read(int n) { ... }" in cls.text.split("\n")
    assert "String s" not in cls.text and "private final String id;" in cls.text
    ruby = parse_code(CASES["ruby"][1], CASES["ruby"][0], "ruby")
    assert "  def initialize(id) ... end" in by_title(ruby)["Gauge"].text.split("\n")
    ts = parse_code(CASES["typescript"][1], CASES["typescript"][0], "typescript")
    assert "export const scale = (x: number): number => { ... }" in ts.root.text.split("\n")


def test_root_text_falls_back_to_the_file_name():
    assert parse_code("", "empty.go", "go").root.text == "empty.go"
    only = parse_code("package x\n\nfunc f() {\n}\n", "a/x.go", "go")
    assert only.root.text.strip().endswith("func f() { ... }")


# --------------------------------------------------------------------------
# Naming rules


def test_node_paths_follow_each_languages_naming():
    java = parse_code(CASES["java"][1], CASES["java"][0], "java")
    assert java.root.node_path == "com.tide.gauge.Gauge.java" and java.root.attrs["package"] == "com.tide.gauge"
    kotlin = parse_code(CASES["kotlin"][1], "app/src/Tools.kt", "kotlin")
    assert kotlin.root.node_path == "com.tide.gauge.Tools.kt"
    assert by_title(kotlin)["Gauge"].node_path == "com.tide.gauge.Gauge"
    go = parse_code(CASES["go"][1], CASES["go"][0], "go")
    assert go.root.node_path == "agent.internal.buffer"
    assert parse_code("package main\n", "main.go", "go").root.node_path == "main"
    php = parse_code(CASES["php"][1], CASES["php"][0], "php")
    assert php.root.node_path == "src.Gauges.Gauge"
    js = parse_code(CASES["javascript"][1], CASES["javascript"][0], "javascript")
    assert js.root.node_path == "src.app.gauge"
    assert parse_code("", "types/index.d.ts", "typescript").root.node_path == "types.index"
    for path, module in [("src/lib.rs", "crate"), ("src/main.rs", "crate"), ("src/net/mod.rs", "crate.net"),
                         ("src/net/http.rs", "crate.net.http"), ("fw/src/net/http.rs", "crate.net.http"),
                         ("build.rs", "crate.build")]:
        assert parse_code("fn f() {}\n", path, "rust").root.node_path == module, path


def test_csharp_nested_and_file_scoped_namespaces():
    nested = parse_code("namespace A {\n  namespace B.C {\n    class X { void M() {} }\n  }\n  class Y {}\n}\n",
                        "X.cs", "csharp")
    assert {d.title: d.node_path for d in nested.root.walk()} == {
        "X.cs": "X", "X": "A.B.C.X", "X.M": "A.B.C.X.M", "Y": "A.Y"}
    scoped = parse_code("using System;\nnamespace Tide.Io;\n\npublic class Reader\n{\n    void Open() { }\n}\n",
                        "Reader.cs", "csharp")
    assert by_title(scoped)["Reader.Open"].node_path == "Tide.Io.Reader.Open"


def test_duplicate_names_get_numbered_slugs():
    src = ("public class A {\n  void run() {}\n  void run(int n) {}\n  void run(String s) {}\n}\n")
    parsed = parse_code(src, "A.java", "java")
    runs = [d for d in parsed.root.walk() if d.title == "A.run"]
    assert [d.slug for d in runs] == ["run", "run-1", "run-2"]
    assert [d.node_path for d in runs] == ["A.A.run", "A.A.run-1", "A.A.run-2"]
    go = parse_code("package p\nfunc (a A) Do() {}\nfunc (b B) Do() {}\nfunc (a A) Do() {}\n", "p/x.go", "go")
    assert [d.node_path for d in go.root.children] == ["p.A.Do", "p.B.Do", "p.A.Do-1"]


def test_docstrings_and_visibility():
    go = by_title(parse_code(CASES["go"][1], CASES["go"][0], "go"))
    assert go["Ring"].attrs["docstring"] == "Ring holds samples."
    assert go["Ring.Push"].attrs["exported"] is True and go["Ring.Push"].attrs["receiver"] == "Ring"
    rust = by_title(parse_code(CASES["rust"][1], CASES["rust"][0], "rust"))
    assert rust["Gauge"].attrs["docstring"] == "A gauge."
    assert rust["Gauge.new"].attrs["visibility"] == "pub" and rust["Gauge.name"].attrs["exported"] is False
    java = by_title(parse_code(CASES["java"][1], CASES["java"][0], "java"))
    assert java["Gauge"].attrs["docstring"] == "A gauge."
    assert java["Gauge.read"].attrs["visibility"] == "public"
    assert java["Gauge.twice"].attrs == {"signature": "static int twice(int x)", "docstring": "",
                                         "visibility": "package", "static": True}
    ruby = by_title(parse_code(CASES["ruby"][1], CASES["ruby"][0], "ruby"))
    assert ruby["Gauge"].attrs["docstring"] == "A gauge."
    js = by_title(parse_code(CASES["javascript"][1], CASES["javascript"][0], "javascript"))
    assert js["Gauge"].attrs["docstring"] == "A gauge." and js["Gauge"].attrs["exported"] is True
    cpp = by_title(parse_code(CASES["cpp"][1], CASES["cpp"][0], "cpp"))
    assert cpp["Gauge.read"].attrs["visibility"] == "public"
    c = by_title(parse_code(CASES["c"][1], CASES["c"][0], "c"))
    assert c["ring"].attrs["docstring"] == "A ring." and c["clamp"].attrs["exported"] is False
    multi = parse_code("package p\n\n// Line one.\n// Line two.\n\n// Doc.\nfunc F() {}\n", "p/a.go", "go")
    assert by_title(multi)["F"].attrs["docstring"] == "Doc."  # a blank line ends the block
    rb = parse_code("class A\n  def a; end\n  private\n  def b; end\nend\n", "a.rb", "ruby")
    assert [d.attrs["visibility"] for d in rb.root.children[0].children] == ["public", "private"]


def test_language_specific_definitions():
    cpp = parse_code("void Server::start() {\n}\nstruct P { int x; };\ntypedef struct { int y; } Q;\n",
                     "s.cpp", "cpp")
    assert [(d.title, d.subkind, d.node_path) for d in cpp.root.children] == [
        ("Server.start", "method", "s.Server.start"), ("P", "struct", "s.P"), ("Q", "struct", "s.Q")]
    kotlin = parse_code("data class Point(val x: Int, val y: Int)\nobject Registry {\n  fun all() = 1\n}\n"
                        "enum class Mode { A }\n", "k/P.kt", "kotlin")
    assert [(d.title, d.subkind, d.start_line, d.end_line) for d in kotlin.root.walk()][1:] == [
        ("Point", "class", 1, 1), ("Registry", "class", 2, 4), ("Registry.all", "method", 3, 3),
        ("Mode", "enum", 5, 5)]
    rust = parse_code("pub trait T {\n    fn a(&self);\n    fn b(&self) {}\n}\nimpl<X> fmt::Display for W<X> "
                      "where X: Copy {\n    fn fmt(&self) {}\n}\nstruct U;\n", "src/lib.rs", "rust")
    assert [(d.title, d.subkind, d.node_path) for d in rust.root.walk()][1:] == [
        ("T", "trait", "crate.T"), ("T.b", "method", "crate.T.b"),
        ("impl Display for W", "impl", "crate.impl-Display-for-W"),
        ("W.fmt", "method", "crate.impl-Display-for-W.fmt"), ("U", "struct", "crate.U")]
    swift = parse_code("extension Gauge: CustomStringConvertible {\n  func describe() -> String { \"\" }\n}\n"
                       "protocol Reader {\n  func read() -> Double\n}\n", "G.swift", "swift")
    assert [(d.title, d.subkind) for d in swift.root.walk()][1:] == [
        ("extension Gauge", "impl"), ("Gauge.describe", "method"), ("Reader", "interface")]
    ruby = parse_code("module Tide\n  class Gauge\n    def self.load; end\n    class << self\n"
                      "      def build\n      end\n    end\n  end\nend\n", "t.rb", "ruby")
    assert [(d.title, d.subkind, d.attrs.get("singleton")) for d in ruby.root.walk()][1:] == [
        ("Tide", "module", None), ("Tide.Gauge", "class", None), ("Tide.Gauge.load", "method", True),
        ("Tide.Gauge.build", "method", True)]
    ts = parse_code("namespace NS {\n  export function f(): { a: number } {\n    return { a: 1 };\n  }\n}\n"
                    "export default class {\n}\n", "n.ts", "typescript")
    assert [(d.title, d.start_line, d.end_line) for d in ts.root.children] == [("f", 2, 4), ("default", 6, 7)]


# --------------------------------------------------------------------------
# Braces inside comments, strings and literals


TRICKY = {
    "javascript": ('''\
class A {
  m() {
    const t = `a ${ `}` + "{" } ${x.map(y => `${y}}`)} }`;
    const r = /[}{]+\\/}/g;
    // }
    /* } */
    return '}';
  }
  n() {}
}
function after() {}
''', [("A", 1, 10), ("A.m", 2, 8), ("A.n", 9, 9), ("after", 11, 11)]),
    "rust": ('''\
impl<'a> Foo<'a> {
    fn m(&'a self) -> char {
        let c = '{';
        let d = '\\'';
        let s = r#"}"#;
        let b = b'}';
        /* nested /* } */ still comment { */
        'outer: loop { break 'outer; }
        '}'
    }
}
fn after() {}
''', [("impl Foo", 1, 11), ("Foo.m", 2, 10), ("after", 12, 12)]),
    "c": ('''\
#define OPEN {
#define WRAP(x) \\
    do { x } while (0)
int f(void) {
    char c = '{';
    const char *s = "}\\"}";
    /* } */
    return 0;
}
int g(void) { return 1; }
''', [("f", 4, 9), ("g", 10, 10)]),
    "cpp": ('''\
class A {
    const char* s = R"x(})x";
    int n = 1'000'000;
    void m() { char c = '}'; }
};
int after() { return 0; }
''', [("A", 1, 5), ("A.m", 4, 4), ("after", 6, 6)]),
    "go": ('''\
package p

func F() string {
\tr := '{'
\treturn `}
}` + "}"
}

func G() interface{} {
\treturn nil
}
''', [("F", 3, 7), ("G", 9, 11)]),
    "java": ('''\
class A {
    String t = """
        }
        """;
    char c = '}';
    void m() { String s = "}"; }
}
''', [("A", 1, 7), ("A.m", 6, 6)]),
    "csharp": ('''\
class A {
    string v = @"c:\\}""";
    string i = $"{(x ? "}" : "{")} }}";
    void M() { }
}
''', [("A", 1, 5), ("A.M", 4, 4)]),
    "kotlin": ('''\
class A {
    val s = "${ if (a) "}" else "{" } }"
    val r = """ } ${ "{" } """
    fun m() { }
}
''', [("A", 1, 5), ("A.m", 4, 4)]),
    "swift": ('''\
class A {
    let s = "\\(a ? "}" : "{") }"
    let t = """
    }
    """
    func m() { }
}
''', [("A", 1, 7), ("A.m", 6, 6)]),
    "ruby": ('''\
class A
  def m
    x = "#{"end"} end"
    y = %w[end def class]
    z = <<~EOS
      def fake
      end
    EOS
    w = 'end' if y
    v = x.end
    u = { end: 1, class: 2 }
    while false do
      break
    end
  end
=begin
def ghost
end
=end
  def n; end
end
''', [("A", 1, 21), ("A.m", 2, 15), ("A.n", 20, 20)]),
    "php": ('''\
<?php
class A {
    function m() {
        $s = '}';
        # }
        $h = <<<EOT
        }
        EOT;
        return "{$s}";
    }
}
''', [("A", 2, 11), ("A.m", 3, 10)]),
}


@pytest.mark.parametrize("language", sorted(TRICKY))
def test_braces_in_comments_strings_and_literals_do_not_count(language):
    src, expected = TRICKY[language]
    parsed = parse_code(src, "t/x", language)
    assert parsed.notes == []
    assert [(d.title, d.start_line, d.end_line) for d in parsed.root.walk()][1:] == expected


# --------------------------------------------------------------------------
# Import forms


def test_javascript_import_forms():
    """Every module form gives its target; look-alikes in strings and member calls do not.
    (The imported names are not recorded for these languages: only Python's are used.)"""
    src = '''\
import x from './a';
import { b, c as d } from "../b/c";
import * as ns from './ns';
import type { T } from './types';
import './side';
export { e } from './x';
export * from './all';
const y = require('./y');
const z = await import('./z');
const notAnImport = "import q from './q'";
obj.import('./w');
'''
    parsed = parse_code(src, "a.ts", "typescript")
    refs = [(r.target, r.attrs["kind"], r.attrs["line"]) for r in parsed.references]
    assert refs == [
        ("./a", "import", 1), ("../b/c", "import", 2), ("./ns", "import", 3), ("./types", "import", 4),
        ("./side", "import", 5), ("./x", "import", 6), ("./all", "import", 7), ("./y", "require", 8),
        ("./z", "import", 9)]


def test_other_import_forms():
    go = parse_code('package p\nimport "fmt"\nimport (\n\t_ "embed"\n\tx "a/b"\n)\n', "p/a.go", "go")
    assert [r.target for r in go.references] == ["fmt", "embed", "a/b"]
    rust = parse_code("use crate::a::{b, c::{D, E as F}, self};\nuse super::x;\npub mod m;\nuse std::io::*;\n",
                      "src/k.rs", "rust")
    assert [(r.target, r.attrs["kind"], r.attrs.get("alias")) for r in rust.references] == [
        ("crate::a::b", "use", None), ("crate::a::c::D", "use", None), ("crate::a::c::E", "use", "F"),
        ("crate::a", "use", None), ("super::x", "use", None), ("m", "mod", None), ("std::io::*", "use", None)]
    java = parse_code("import a.b.C;\nimport a.b.*;\nimport static a.b.C.m;\n", "X.java", "java")
    assert [r.target for r in java.references] == ["a.b.C", "a.b.*", "a.b.C.m"]
    c = parse_code('#include "local.h"\n#  include <sys/types.h>\n// #include "no.h"\n'
                   'const char *s = "#include \\"no2.h\\"";\n', "x.c", "c")
    assert [r.target for r in c.references] == ["local.h", "sys/types.h"]
    cs = parse_code("using System;\nusing static System.Math;\nusing J = System.Text.Json;\n"
                    "class A { void M() { using var f = Open(); } }\n", "A.cs", "csharp")
    assert [r.target for r in cs.references] == ["System", "System.Math", "System.Text.Json"]
    ruby = parse_code("require 'x/y'\nrequire_relative '../z'\nputs \"require 'no'\"\n", "a.rb", "ruby")
    assert [r.target for r in ruby.references] == ["x/y", "../z"]
    php = parse_code("<?php\nuse A\\B\\C;\nuse A\\{D, E as F};\nuse function A\\g;\nrequire_once __DIR__ . "
                     "'/x.php';\ninclude 'y.php';\nclass K { use Tr; }\n", "p.php", "php")
    assert [(r.target, r.attrs["kind"]) for r in php.references] == [
        ("A\\B\\C", "use"), ("A\\D", "use"), ("A\\E", "use"), ("A\\g", "use"), ("__DIR__/x.php", "require"),
        ("y.php", "include")]
    swift = parse_code("import Foundation\n@testable import TideKit\nimport struct Foo.Bar\n", "a.swift", "swift")
    assert [r.target for r in swift.references] == ["Foundation", "TideKit", "Foo.Bar"]
    kotlin = parse_code("import a.b.C as D\nimport a.`when`.E\n", "a.kt", "kotlin")
    assert [r.target for r in kotlin.references] == ["a.b.C", "a.when.E"]


def test_rust_use_super_inside_inline_modules():
    src = "mod tests {\n    use super::*;\n    use super::super::x::Y;\n}\n"
    parsed = parse_code(src, "src/a.rs", "rust")
    assert [(r.target, r.attrs.get("written")) for r in parsed.references] == [
        ("self::*", "super::*"), ("super::x::Y", "super::super::x::Y")]


# --------------------------------------------------------------------------
# resolve_import


JS_FILES = {"web/app.ts", "web/models.ts", "web/util/index.ts", "web/lib.js", "web/legacy.mjs",
            "web/types.d.ts", "web/comp.tsx", "web/esm.ts"}


@pytest.mark.parametrize("target,expected", [
    ("./models", "web/models.ts"), ("./util", "web/util/index.ts"), ("./lib", "web/lib.js"),
    ("./legacy", "web/legacy.mjs"), ("./types", "web/types.d.ts"), ("./comp", "web/comp.tsx"),
    ("./esm.js", "web/esm.ts"), ("./lib.js", "web/lib.js"), ("../web/models", "web/models.ts"),
    ("react", None), ("@scope/pkg", None), ("./missing", None), ("../../outside", None),
])
def test_resolve_javascript(target, expected):
    assert resolve_import(target, "web/app.ts", "typescript", JS_FILES) == expected


def test_resolve_go():
    files = {"agent/go.mod", "agent/main.go", "agent/internal/buffer/ring.go", "agent/internal/buffer/buffer.go",
             "agent/internal/buffer/ring_test.go", "agent/pkg/log/log_helpers.go", "agent/pkg/log/a.go",
             "vendor/github.com/x/y/z.go", "src/fmt/print.go"}
    assert resolve_import("example.com/agent/internal/buffer", "agent/main.go", "go", files) == \
        "agent/internal/buffer/buffer.go"  # the file named like its directory
    assert resolve_import("example.com/agent/pkg/log", "agent/main.go", "go", files) == "agent/pkg/log/a.go"
    assert resolve_import("github.com/x/y", "agent/main.go", "go", files) == "vendor/github.com/x/y/z.go"
    assert resolve_import("fmt", "agent/main.go", "go", files) == "src/fmt/print.go"
    assert resolve_import("net/http", "agent/main.go", "go", files) is None
    assert resolve_import("sync", "agent/main.go", "go", files) is None


def test_resolve_rust():
    files = {"fw/Cargo.toml", "fw/src/main.rs", "fw/src/sampler.rs", "fw/src/net/mod.rs", "fw/src/net/http.rs",
             "fw/src/net/tcp/conn.rs", "fw/src/net/tcp.rs", "other/src/lib.rs", "other/src/a.rs"}
    main, net, http = "fw/src/main.rs", "fw/src/net/mod.rs", "fw/src/net/http.rs"
    assert resolve_import("crate::sampler::Sampler", main, "rust", files) == "fw/src/sampler.rs"
    assert resolve_import("crate::net::http", main, "rust", files) == "fw/src/net/http.rs"
    assert resolve_import("crate::net::Thing", main, "rust", files) == "fw/src/net/mod.rs"
    assert resolve_import("crate::Thing", http, "rust", files) == "fw/src/main.rs"
    assert resolve_import("sampler", main, "rust", files) == "fw/src/sampler.rs"  # mod sampler;
    assert resolve_import("http", net, "rust", files) == "fw/src/net/http.rs"  # mod http; in mod.rs
    assert resolve_import("conn", "fw/src/net/tcp.rs", "rust", files) == "fw/src/net/tcp/conn.rs"
    assert resolve_import("super::http::Client", "fw/src/net/tcp.rs", "rust", files) == "fw/src/net/http.rs"
    assert resolve_import("super::Item", http, "rust", files) == "fw/src/net/mod.rs"
    assert resolve_import("self::http::X", net, "rust", files) == "fw/src/net/http.rs"
    assert resolve_import("self::*", "fw/src/sampler.rs", "rust", files) is None
    assert resolve_import("crate::a::B", "other/src/lib.rs", "rust", files) == "other/src/a.rs"
    assert resolve_import("std::collections::HashMap", main, "rust", files) is None
    assert resolve_import("serde::Serialize", main, "rust", files) is None
    no_cargo = {"proj/src/x.rs", "proj/src/y/z.rs"}
    assert resolve_import("crate::y::z::W", "proj/src/x.rs", "rust", no_cargo) == "proj/src/y/z.rs"


def test_resolve_java_and_kotlin():
    files = {"core/src/main/java/com/tide/model/Reading.java", "core/src/main/java/com/tide/model/Station.java",
             "app/src/main/kotlin/com/tide/ui/Chart.kt"}
    src = "core/src/main/java/com/tide/App.java"
    assert resolve_import("com.tide.model.Reading", src, "java", files) == \
        "core/src/main/java/com/tide/model/Reading.java"
    assert resolve_import("com.tide.model.Reading.Flag", src, "java", files) == \
        "core/src/main/java/com/tide/model/Reading.java"  # nested class / static member
    assert resolve_import("com.tide.model.*", src, "java", files) == "core/src/main/java/com/tide/model/Reading.java"
    assert resolve_import("com.tide.ui.Chart", src, "java", files) == "app/src/main/kotlin/com/tide/ui/Chart.kt"
    assert (resolve_import("com.tide.ui.Chart", "app/X.kt", "kotlin", files)
            == "app/src/main/kotlin/com/tide/ui/Chart.kt")
    assert resolve_import("java.util.List", src, "java", files) is None
    assert resolve_import("com.tide.model.helpers", src, "kotlin", files) is None


def test_resolve_c_and_cpp():
    files = {"lib/ring.c", "lib/ring.h", "include/tide/api.h", "src/util.hpp", "other/util.hpp"}
    assert resolve_import("ring.h", "lib/ring.c", "c", files) == "lib/ring.h"
    assert resolve_import("tide/api.h", "lib/ring.c", "c", files) == "include/tide/api.h"
    assert resolve_import("../include/tide/api.h", "lib/ring.c", "c", files) == "include/tide/api.h"
    assert resolve_import("util.hpp", "src/main.cpp", "cpp", files) == "src/util.hpp"
    assert resolve_import("stdio.h", "lib/ring.c", "c", files) is None


def test_resolve_ruby_php_and_the_unresolvable():
    rb = {"lib/tide/reading.rb", "lib/tide.rb", "spec/helper.rb", "app/tide/reading.rb", "spec/models/x_spec.rb"}
    assert resolve_import("../helper", "spec/models/x_spec.rb", "ruby", rb) == "spec/helper.rb"
    assert resolve_import("./missing", "spec/models/x_spec.rb", "ruby", rb) is None
    assert resolve_import("tide/reading", "spec/models/x_spec.rb", "ruby", rb) == "lib/tide/reading.rb"
    assert resolve_import("helper", "spec/x_spec.rb", "ruby", rb) == "spec/helper.rb"  # require_relative 'helper'
    assert resolve_import("json", "lib/tide.rb", "ruby", rb) is None
    php = {"src/Models/Reading.php", "app/Gauges/helpers.php", "app/Gauges/Gauge.php", "vendor/A/B/C.php",
           "lib/config.php"}
    src = "app/Gauges/Gauge.php"
    assert resolve_import("__DIR__/helpers.php", src, "php", php) == "app/Gauges/helpers.php"
    assert resolve_import("helpers.php", src, "php", php) == "app/Gauges/helpers.php"
    assert resolve_import("config.php", src, "php", php) == "lib/config.php"
    assert resolve_import("A\\B\\C", src, "php", php) == "vendor/A/B/C.php"
    assert resolve_import("App\\Models\\Reading", src, "php", php) == "src/Models/Reading.php"  # PSR-4
    assert resolve_import("App\\Models\\Missing", src, "php", php) is None
    assert resolve_import("System.Text", "A.cs", "csharp", {"System/Text.cs"}) is None
    assert resolve_import("Foundation", "a.swift", "swift", {"Foundation.swift"}) is None
    assert resolve_import("x", "a.go", "cobol", {"x"}) is None


def test_resolve_accepts_sets_and_frozensets():
    files = ["web/a.ts", "web/b.ts"]
    assert resolve_import("./b", "web/a.ts", "typescript", set(files)) == "web/b.ts"
    assert resolve_import("./b", "web/a.ts", "typescript", frozenset(files)) == "web/b.ts"


# --------------------------------------------------------------------------
# The bundled sample corpus


SAMPLE_CODE = ["web/models.ts", "web/api.ts", "web/chart.ts", "gauge-agent/main.go",
               "gauge-agent/internal/buffer/ring.go", "firmware/src/main.rs", "firmware/src/sampler.rs"]


@pytest.fixture(scope="module")
def sample():
    files = frozenset(p.relative_to(SAMPLE).as_posix() for p in SAMPLE.rglob("*") if p.is_file())
    parsed = {}
    for rel in SAMPLE_CODE:
        text = (SAMPLE / rel).read_text(encoding="utf-8")
        assert len(text.splitlines()) < 120, rel
        parsed[rel] = parse_code(text, rel, LANGUAGE_BY_EXTENSION[Path(rel).suffix])
    return files, parsed


def test_sample_files_parse(sample):
    _, parsed = sample
    for rel, pf in parsed.items():
        assert pf.notes == [], rel
        assert pf.root.children, rel
    ts = by_title(parsed["web/models.ts"])
    assert ts["TideSeries.range"].subkind == "method" and ts["isFlagged"].attrs["arrow"] is True
    chart = by_title(parsed["web/chart.ts"])
    assert [c.title for c in chart["TideChart"].children] == [
        "TideChart.constructor", "TideChart.show", "TideChart.follow", "TideChart.stop", "TideChart.draw"]
    assert (chart["TideChart"].start_line, chart["TideChart"].end_line) == (22, 68)
    ring = by_title(parsed["gauge-agent/internal/buffer/ring.go"])
    assert ring["Ring.Push"].node_path == "gauge-agent.internal.buffer.Ring.Push"
    assert ring["NewRing"].attrs["docstring"].startswith("NewRing returns")
    sampler = by_title(parsed["firmware/src/sampler.rs"])
    assert sampler["Sampler.tick"].node_path == "crate.sampler.impl-Sampler.tick"
    assert sampler["tests.still_water_one_metre_deep"].subkind == "function"
    assert by_title(parsed["firmware/src/main.rs"])["Bench.read"].node_path == "crate.impl-Source-for-Bench.read"


def test_sample_imports_resolve_to_each_other(sample):
    files, parsed = sample
    edges = set()
    for rel, pf in parsed.items():
        language = LANGUAGE_BY_EXTENSION[Path(rel).suffix]
        for r in pf.references:
            dst = resolve_import(r.target, rel, language, files)
            if dst:
                edges.add((rel, dst))
    assert edges == {
        ("web/api.ts", "web/models.ts"),
        ("web/chart.ts", "web/api.ts"), ("web/chart.ts", "web/models.ts"),
        ("gauge-agent/main.go", "gauge-agent/internal/buffer/ring.go"),
        ("firmware/src/main.rs", "firmware/src/sampler.rs"),
    }
    rust_main = [(r.target, r.attrs["kind"]) for r in parsed["firmware/src/main.rs"].references]
    assert ("sampler", "mod") in rust_main and ("crate::sampler::Sampler", "use") in rust_main


# --------------------------------------------------------------------------
# Hostile input: completes, never raises


@pytest.mark.parametrize("language", sorted(code_languages.LANGUAGES))
def test_pathological_input_completes(language):
    # Small enough to run fast in every grammar; the time budget covers bigger ones.
    for src in ("{" * 20_000, "}" * 10_000, "class A {\n" * 1_000, "/* never closed {\n" * 500,
                '"' + "x" * 50_000, "(/" * 5_000, "def a\nif x\n" * 1_000, "\x00\ufeff\u2028{"):
        parsed = parse_code(src, "p/x", language)
        assert parsed.root.kind == "file"
        depth = max(_depths(parsed.root))
        assert depth <= code_languages.MAX_DEPTH


def _depths(root):
    stack = [(root, 0)]
    while stack:
        d, k = stack.pop()
        yield k
        stack.extend((c, k + 1) for c in d.children)


@pytest.mark.parametrize("language", ["go", "rust", "java", "typescript", "ruby", "cpp"])
def test_fifty_thousand_line_file(language):
    unit = {
        "go": "func F{i}() int {{\n\treturn {i}\n}}\n",
        "rust": "fn f{i}() -> u8 {{\n    {i}\n}}\n",
        "java": "class C{i} {{\n  void m() {{ }}\n}}\n",
        "typescript": "export function f{i}(): number {{\n  return {i};\n}}\n",
        "ruby": "def f{i}\n  {i}\nend\n",
        "cpp": "int f{i}() {{\n  return {i};\n}}\n",
    }[language]
    src = "".join(unit.format(i=i) for i in range(16_667))
    assert src.count("\n") >= 50_000
    parsed = parse_code(src, "big/file", language)
    assert len(parsed.root.children) == 16_667
    last = parsed.root.children[-1]
    assert (last.start_line, last.end_line) == (3 * 16_666 + 1, 3 * 16_667)


def test_syntax_errors_are_noted_and_the_rest_kept():
    parsed = parse_code("int a() { return 1; }\n/* oops {\nint b() {}\n", "x.c", "c")
    assert [d.title for d in parsed.root.children][:1] == ["a"]  # tree-sitter recovers after the error
    assert parsed.notes == ["c syntax error near line 2; definitions around it may be missing"]
    ruby = parse_code("class A\n  def m\n", "x.rb", "ruby")
    assert ruby.notes and "syntax error near line" in ruby.notes[0]


def test_a_parse_over_its_time_budget_falls_back_to_text(monkeypatch):
    monkeypatch.setattr(code_languages.engine, "PARSE_SECONDS", 0.0)
    src = "}" * 200_000  # tree-sitter's Lua error recovery needs seconds for this
    parsed = parse_code(src, "hostile.lua", "lua")
    assert parsed.root.children == [] and parsed.root.text == src
    assert parsed.notes == ["lua parser fell back to plain text: ParseBudgetExceeded: tree-sitter gave up after 0 s"]


def test_never_raises(monkeypatch):
    def boom(self):
        raise RuntimeError("engine broke")

    monkeypatch.setattr(code_languages.Builder, "parse", boom)
    parsed = parse_code("fn main() {}\n", "src/main.rs", "rust")
    assert parsed.root.kind == "file" and parsed.root.text == "fn main() {}\n" and parsed.root.children == []
    assert parsed.notes == ["rust parser fell back to plain text: RuntimeError: engine broke"]
    unknown = parse_code("x", "a.cob", "cobol")
    assert unknown.root.text == "x" and "no code parser" in unknown.notes[0]


def test_extension_table():
    assert LANGUAGE_BY_EXTENSION[".mjs"] == "javascript" and LANGUAGE_BY_EXTENSION[".mts"] == "typescript"
    assert LANGUAGE_BY_EXTENSION[".h"] == "c" and LANGUAGE_BY_EXTENSION[".hh"] == "cpp"
    assert LANGUAGE_BY_EXTENSION[".kts"] == "kotlin" and LANGUAGE_BY_EXTENSION[".cs"] == "csharp"
    assert set(LANGUAGE_BY_EXTENSION.values()) == {
        "javascript", "typescript", "go", "rust", "java", "c", "cpp", "csharp", "ruby", "php", "kotlin", "swift",
        "bash", "lua", "scala", "elixir", "haskell", "zig", "julia", "ocaml", "sql"}
