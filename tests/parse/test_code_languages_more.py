"""The languages added with tree-sitter (Bash, Lua, Scala, Elixir, Haskell, Zig,
Julia, OCaml, SQL): definitions, nesting, node paths and imports on real
snippets, and the resolution of their imports to corpus files."""

from __future__ import annotations

import pytest

from strata.stages.parse.code import LANGUAGE_BY_EXTENSION, parse_code, resolve_import

# language: (path, source, [(title, subkind, parent title or None, start, end, node_path)], [(target, kind)])
CASES = {
    "bash": ("ops/deploy.sh", '''\
#!/usr/bin/env bash
# Deploy helpers.
source ./lib/common.sh
. "$HOME/env.sh"

# Build the image.
build() {
  docker build .
}

function deploy {
  build
}
''', [("build", "function", None, 7, 9, "ops.deploy.build"),
      ("deploy", "function", None, 11, 13, "ops.deploy.deploy")],
        [("./lib/common.sh", "source"), ("$HOME/env.sh", "source")]),
    "lua": ("app/gauge.lua", '''\
local json = require("dkjson")
local util = require "app.util"

local Gauge = {}

function Gauge.new(id)
  return setmetatable({id = id}, Gauge)
end

function Gauge:read()
  return self.id
end

local function helper(x)
  return x
end
''', [("Gauge.new", "method", None, 6, 8, "app.gauge.Gauge.new"),
      ("Gauge.read", "method", None, 10, 12, "app.gauge.Gauge.read"),
      ("helper", "function", None, 14, 16, "app.gauge.helper")],
        [("dkjson", "require"), ("app.util", "require")]),
    "scala": ("src/main/scala/Gauge.scala", '''\
package com.tide.gauge

import com.tide.model.Reading
import scala.collection.mutable._

/** A gauge. */
class Gauge(id: String) {
  def read(): Double = {
    1.0
  }
}

object Gauge {
  def apply(id: String): Gauge = new Gauge(id)
}

trait Reader {
  def read(): Double
}
''', [("Gauge", "class", None, 7, 11, "com.tide.gauge.Gauge"),
      ("Gauge.read", "method", "Gauge", 8, 10, "com.tide.gauge.Gauge.read"),
      ("Gauge.apply", "method", "Gauge~object", 14, 14, "com.tide.gauge.Gauge-1.apply"),
      ("Reader", "trait", None, 17, 19, "com.tide.gauge.Reader")],
        [("com.tide.model.Reading", "import"), ("scala.collection.mutable._", "import")]),
    "elixir": ("lib/tide/gauge.ex", '''\
defmodule Tide.Gauge do
  @moduledoc "A gauge."
  alias Tide.Reading
  import Tide.Util

  def read(gauge) do
    gauge.level
  end

  defp helper(x), do: x
end
''', [("Tide.Gauge", "module", None, 1, 11, "lib.tide.gauge.Tide.Gauge"),
      ("Tide.Gauge.read", "function", "Tide.Gauge", 6, 8, "lib.tide.gauge.Tide.Gauge.read"),
      ("Tide.Gauge.helper", "function", "Tide.Gauge", 10, 10, "lib.tide.gauge.Tide.Gauge.helper")],
        [("Tide.Reading", "use"), ("Tide.Util", "use")]),
    "haskell": ("src/Tide/Gauge.hs", '''\
module Tide.Gauge where

import Data.Map (Map)
import qualified Tide.Reading as R

data Gauge = Gauge { gid :: String }

class Reader a where
  readLevel :: a -> Double

instance Show Gauge where
  show g = gid g

level :: Gauge -> Double
level g = 1.0
''', [("Gauge", "type", None, 6, 6, "src.Tide.Gauge.Gauge"),
      ("Reader", "class", None, 8, 9, "src.Tide.Gauge.Reader"),
      ("impl Show for Gauge", "impl", None, 11, 12, "src.Tide.Gauge.impl-Show-for-Gauge"),
      ("Gauge.show", "method", "impl Show for Gauge", 12, 12, "src.Tide.Gauge.impl-Show-for-Gauge.show"),
      ("level", "function", None, 15, 15, "src.Tide.Gauge.level")],
        [("Data.Map", "import"), ("Tide.Reading", "import")]),
    "zig": ("src/gauge.zig", '''\
const std = @import("std");
const ring = @import("ring.zig");

/// A gauge.
pub const Gauge = struct {
    id: u32,

    pub fn read(self: Gauge) f64 {
        return 1.0;
    }
};

pub fn main() void {
    std.debug.print("hi", .{});
}
''', [("Gauge", "struct", None, 5, 11, "src.gauge.Gauge"),
      ("Gauge.read", "method", "Gauge", 8, 10, "src.gauge.Gauge.read"),
      ("main", "function", None, 13, 15, "src.gauge.main")],
        [("std", "import"), ("ring.zig", "import")]),
    "julia": ("src/Tide.jl", '''\
module Tide

using LinearAlgebra
import Base: show
include("ring.jl")

struct Gauge
    id::String
end

function read(g::Gauge)
    return 1.0
end

level(g) = 2.0

end
''', [("Tide", "module", None, 1, 17, "src.Tide.Tide"),
      ("Tide.Gauge", "struct", "Tide", 7, 9, "src.Tide.Tide.Gauge"),
      ("Tide.read", "function", "Tide", 11, 13, "src.Tide.Tide.read"),
      ("Tide.level", "function", "Tide", 15, 15, "src.Tide.Tide.level")],
        [("LinearAlgebra", "using"), ("Base", "import"), ("ring.jl", "include")]),
    "ocaml": ("lib/gauge.ml", '''\
open Tide_util

(** A gauge. *)
type gauge = { id : string }

let read g =
  1.0

module Ring = struct
  let push r v = r
end
''', [("gauge", "type", None, 4, 4, "lib.gauge.gauge"),
      ("read", "function", None, 6, 7, "lib.gauge.read"),
      ("Ring", "module", None, 9, 11, "lib.gauge.Ring"),
      ("Ring.push", "function", "Ring", 10, 10, "lib.gauge.Ring.push")],
        [("Tide_util", "open")]),
    "sql": ("db/schema.sql", '''\
-- Readings, one row per sample.
CREATE TABLE readings (
  id INTEGER PRIMARY KEY,
  level REAL
);

CREATE VIEW recent AS
  SELECT * FROM readings;

CREATE INDEX idx_level ON readings (level);
''', [("readings", "table", None, 2, 5, "db.schema.readings"),
      ("recent", "view", None, 7, 8, "db.schema.recent"),
      ("idx_level", "index", None, 10, 10, "db.schema.idx_level")], []),
}


def _titled(parsed):
    """Title → draft; a second draft with a title already seen gets ``title~<subkind>``."""
    out = {}
    for d in list(parsed.root.walk())[1:]:
        out[d.title if d.title not in out else f"{d.title}~{d.subkind}"] = d
    return out


@pytest.mark.parametrize("language", sorted(CASES))
def test_definitions_nesting_and_imports(language):
    path, src, expected, imports = CASES[language]
    assert LANGUAGE_BY_EXTENSION["." + path.rsplit(".", 1)[1]] == language
    parsed = parse_code(src, path, language)
    assert parsed.notes == []
    nodes = _titled(parsed)
    parents = {id(c): d for d in parsed.root.walk() for c in d.children}
    wanted = {e[0] for e in expected} | {e[2] for e in expected if e[2]}
    assert wanted <= set(nodes), sorted(nodes)
    for title, subkind, parent, start, end, node_path in expected:
        d = nodes[title]
        assert (d.kind, d.subkind, d.language) == ("code", subkind, language), title
        assert (d.start_line, d.end_line, d.node_path) == (start, end, node_path), title
        assert parents[id(d)] is (nodes[parent] if parent else parsed.root), title
        assert d.attrs["signature"] and d.attrs["signature"] in parents[id(d)].text, title
    assert [(r.target, r.attrs["kind"]) for r in parsed.references] == imports


def test_docstrings_from_the_comments_above():
    assert _titled(parse_code(CASES["bash"][1], "x.sh", "bash"))["build"].attrs["docstring"] == "Build the image."
    assert parse_code(CASES["bash"][1], "x.sh", "bash").root.attrs["docstring"] == "Deploy helpers."
    assert _titled(parse_code(CASES["zig"][1], "x.zig", "zig"))["Gauge"].attrs["docstring"] == "A gauge."
    assert _titled(parse_code(CASES["ocaml"][1], "x.ml", "ocaml"))["gauge"].attrs["docstring"] == "A gauge."
    assert _titled(parse_code(CASES["scala"][1], "x.scala", "scala"))["Gauge"].attrs["docstring"] == "A gauge."
    sql = _titled(parse_code(CASES["sql"][1], "x.sql", "sql"))
    assert sql["readings"].attrs["docstring"] == "Readings, one row per sample."


def test_folded_bodies_in_the_parent_text():
    lua = parse_code(CASES["lua"][1], "a.lua", "lua")
    assert "function Gauge:read() ... end" in lua.root.text.split("\n")
    assert "setmetatable" not in lua.root.text
    elixir = _titled(parse_code(CASES["elixir"][1], "g.ex", "elixir"))
    assert "  def read(gauge) do ... end" in elixir["Tide.Gauge"].text.split("\n")


def test_resolution_of_the_new_languages():
    files = frozenset({"ops/lib/common.sh", "app/util.lua", "app/net/init.lua", "lib/tide/reading.ex",
                       "lib/tide/gauge_reader.ex", "src/Tide/Reading.hs", "src/ring.zig", "src/ring.jl",
                       "lib/tide_util.ml", "src/main/scala/com/tide/model/Reading.scala"})
    assert resolve_import("./lib/common.sh", "ops/deploy.sh", "bash", files) == "ops/lib/common.sh"
    assert resolve_import("app.util", "app/gauge.lua", "lua", files) == "app/util.lua"
    assert resolve_import("app.net", "app/gauge.lua", "lua", files) == "app/net/init.lua"
    assert resolve_import("Tide.Reading", "lib/tide/gauge.ex", "elixir", files) == "lib/tide/reading.ex"
    assert resolve_import("Tide.GaugeReader", "lib/x.ex", "elixir", files) == "lib/tide/gauge_reader.ex"
    assert resolve_import("Tide.Reading", "src/Tide/Gauge.hs", "haskell", files) == "src/Tide/Reading.hs"
    assert resolve_import("ring.zig", "src/gauge.zig", "zig", files) == "src/ring.zig"
    assert resolve_import("ring.jl", "src/Tide.jl", "julia", files) == "src/ring.jl"
    assert resolve_import("Tide_util", "lib/gauge.ml", "ocaml", files) == "lib/tide_util.ml"
    assert resolve_import("com.tide.model.Reading", "src/main/scala/Gauge.scala", "scala", files) == \
        "src/main/scala/com/tide/model/Reading.scala"
    assert resolve_import("std", "src/gauge.zig", "zig", files) is None
    assert resolve_import("Data.Map", "src/Tide/Gauge.hs", "haskell", files) is None
