"""Corpus declarations: the project's ``data/corpora.yaml`` plus CLI-registered corpora.

Each corpus is one Dagster partition. ``strata index ROOT --corpus NAME``
records its corpus in a local registry file beside the YAML (git-ignored) so
that the UI, sensors and later CLI runs all resolve the same partition to the
same folder. Which file is the project's: :func:`strata.core.config.settings.corpora_file`
(``$STRATA_CORPORA``, else ``data/corpora.yaml`` in the project folder), never
one inside the installed package.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from strata.stages.discover import check_patterns
from strata.core.config.files import ConfigFileError, read_config_file
from strata.core.config.urls import KEY_HINT, STORE_HINT, refusal, shown_url
from strata.core.encoders.embedding import AUTO, DEFAULT_MODEL, EncoderSpec
from strata.core.storage.layout import write_text_atomic
from strata.core.config.settings import RUNTIME_CHOICES, corpora_file, local_registry_path
from strata.core.storage.kinds import KINDS as SHARED, NEEDS_MIRROR

_NAME_OK = set("abcdefghijklmnopqrstuvwxyz0123456789_-.")
# a name is a folder name (indexes/<name>, with suffixes beside it) and a Dagster
# partition key: well under the 255 bytes a file name may have on every file system
NAME_MAX = 100
# what a corpus may remember about its LLM (never a key: only the *name* of its variable)
LLM_FIELDS = ("backend", "model", "base_url", "api_key_env", "callable_path",
              "vision_callable_path")
LLM_BACKENDS = ("offline", "openai", "callable")


class CorpusError(ValueError):
    pass


@dataclass
class CorpusSpec:
    name: str
    root: Path
    out: Path
    include: list[str] = field(default_factory=lambda: ["**/*"])
    exclude: list[str] = field(default_factory=list)
    embedding: EncoderSpec = field(default_factory=lambda: EncoderSpec(runtime=AUTO))
    url_template: str | None = None
    mirror: str | None = None  # object-storage URI every published version is copied to
    # LLM settings this corpus is built with (LLM_FIELDS); they win over the llm
    # resource's, so sensor and scheduled runs use what `strata index` was given
    llm: dict | None = None
    # step processes a run of this corpus gets (pipelines.scaleout): None or 1 runs
    # every step in the run's own process, the fastest for small and unchanged corpora
    workers: int | None = None
    # where the build's files live while its steps run (strata.core.storage.kinds):
    # "folder", the index folder itself (one machine, or a volume every worker
    # mounts), or "store", only the mirror's object store, which then holds the build too
    shared: str = "folder"

    def to_yaml(self, base: Path) -> dict:
        def rel(p: Path) -> str:
            try:
                return os.path.relpath(p, base)
            except ValueError:
                return str(p)
        d = {"root": rel(self.root), "out": rel(self.out), "include": self.include,
             "exclude": self.exclude,
             "embedding": {"backend": self.embedding.backend, "model": self.embedding.model}}
        if self.embedding.base_url:
            d["embedding"]["base_url"] = self.embedding.base_url
        if self.embedding.runtime != AUTO:
            d["embedding"]["runtime"] = self.embedding.runtime
        if self.embedding.api_key_env != "OPENAI_API_KEY":
            d["embedding"]["api_key_env"] = self.embedding.api_key_env
        if self.llm:
            d["llm"] = {k: v for k, v in self.llm.items() if k in LLM_FIELDS and v is not None}
        if self.url_template:
            d["url_template"] = self.url_template
        if self.mirror:
            d["mirror"] = self.mirror
        if self.workers:
            d["workers"] = self.workers
        if self.shared != "folder":
            d["shared"] = self.shared
        return d


def validate_name(name: str) -> str:
    if not isinstance(name, str):
        raise CorpusError(f"invalid corpus name {name!r}: a name is text")
    if len(name) > NAME_MAX:
        raise CorpusError(f"invalid corpus name {name[:24]!r}… ({len(name)} characters): "
                          f"too long, use at most {NAME_MAX}")
    if not name or not set(name.lower()) <= _NAME_OK or name.startswith("."):
        raise CorpusError(f"invalid corpus name {name!r}: use letters, digits, '-', '_' or '.'")
    return name


#: how far YAML aliases (``*name``) may expand a corpora file: values a reader
#: meets beyond the file's own. Reusing a block of settings costs a few dozen; a
#: "billion laughs" file of a few hundred bytes would expand to billions
MAX_ALIAS_EXPANSION = 10_000


def _named(path: Path) -> str:
    """A corpora file as an error names it: by ``$STRATA_CORPORA`` when that
    variable points at it."""
    given = os.environ.get("STRATA_CORPORA")
    if given and os.path.realpath(Path(given).expanduser()) == os.path.realpath(path):
        return f"$STRATA_CORPORA={path}"
    return f"corpora file {path}"


def _expansion(node: yaml.Node) -> int:
    """How many values the document under ``node`` holds once every alias is
    expanded, less the nodes the file itself writes (what aliases add), counted
    without expanding anything. A document that holds itself (``&a [*a]``) raises
    :class:`CorpusError`."""
    sizes: dict[int, int] = {}
    distinct = 0

    def size(n: yaml.Node) -> int:
        nonlocal distinct
        if id(n) in sizes:
            if sizes[id(n)] < 0:
                raise CorpusError("an alias (*name) refers to the value that holds it")
            return sizes[id(n)]
        sizes[id(n)] = -1
        distinct += 1
        children = ([c for pair in n.value for c in pair] if isinstance(n, yaml.MappingNode)
                    else n.value if isinstance(n, yaml.SequenceNode) else [])
        sizes[id(n)] = 1 + sum(size(c) for c in children)
        return sizes[id(n)]

    return size(node) - distinct


def _read_yaml(path: Path):
    """The YAML document in ``path``; a file that is not readable YAML raises a
    :class:`CorpusError` of one line naming the file, the line and what is wrong
    (every command that reads corpora ends on it with exit code 2, not a trace).

    Only a regular file of at most 4 MiB is read (a FIFO or ``/dev/zero`` named
    by ``$STRATA_CORPORA`` is refused unread: :func:`read_config_file`), and its
    aliases may not expand it by more than :data:`MAX_ALIAS_EXPANSION` values:
    the change sensor reads the file every minute, and a ``git pull`` can bring
    any text into it."""
    try:
        raw = read_config_file(path, _named(path))
    except ConfigFileError as e:
        raise CorpusError(str(e)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise CorpusError(f"{path} line {line}: not UTF-8 text (byte 0x{raw[e.start]:02x})"
                          ) from None
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        extra = _expansion(node)
        if extra > MAX_ALIAS_EXPANSION:
            raise CorpusError(f"aliases (*name) expand it by {extra} values, more than the "
                              f"{MAX_ALIAS_EXPANSION} allowed; write the settings out")
        return loader.construct_document(node)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        what = "; ".join(str(p) for p in (e.problem, e.context) if p) or type(e).__name__
        raise CorpusError(f"{path}{where}: not valid YAML: {what}") from None
    except yaml.YAMLError as e:
        raise CorpusError(f"{path}: not valid YAML: {' '.join(str(e).split())}") from None
    except CorpusError as e:
        raise CorpusError(f"{path}: {e}") from None
    except RecursionError:
        raise CorpusError(f"{path}: not usable YAML: nested too deeply") from None
    finally:
        loader.dispose()


def _load_yaml(path: Path) -> dict:
    if not path.exists():
        return {}
    data = _read_yaml(path) or {}
    if not isinstance(data, dict):
        raise CorpusError(f"{path}: expected a mapping with a 'corpora' key")
    corpora = data.get("corpora") or {}
    if not isinstance(corpora, dict):
        raise CorpusError(f"{path}: 'corpora' must be a mapping of name → settings")
    for name, raw in corpora.items():
        if not isinstance(name, str):
            raise CorpusError(f"{path}: corpus name {name!r} is not text")
        if raw is not None and not isinstance(raw, dict):
            raise CorpusError(f"{path}: corpus {name!r} must be a mapping of settings "
                              f"(root, out, include, ...), not {type(raw).__name__}")
    return corpora


def _spec(name: str, raw: dict, base: Path, index_base: Path | None) -> CorpusSpec:
    if "root" not in raw:
        raise CorpusError(f"corpus {name!r} has no 'root' folder")
    emb = raw.get("embedding") or {}
    if isinstance(emb, str):
        emb = {"model": emb}
    if emb.get("runtime", AUTO) not in RUNTIME_CHOICES:
        raise CorpusError(f"corpus {name!r}: embedding runtime {emb['runtime']!r} is not one of "
                          f"{', '.join(RUNTIME_CHOICES)}")
    out = raw.get("out")
    _no_credentials(name, "embedding base_url", emb.get("base_url"), KEY_HINT)
    _no_credentials(name, "mirror", raw.get("mirror"), STORE_HINT)
    include = _patterns(name, "include", raw.get("include") or ["**/*"])
    exclude = _patterns(name, "exclude", raw.get("exclude") or [])
    return CorpusSpec(
        name=validate_name(name),
        root=(base / raw["root"]).resolve(),
        out=(base / out).resolve() if out else ((index_base or base / "indexes") / name).resolve(),
        include=include,
        exclude=exclude,
        embedding=EncoderSpec(backend=emb.get("backend", "sentence-transformers"),
                              model=emb.get("model", DEFAULT_MODEL),
                              base_url=emb.get("base_url"),
                              api_key_env=emb.get("api_key_env", "OPENAI_API_KEY"),
                              runtime=emb.get("runtime", AUTO)),
        url_template=raw.get("url_template"),
        mirror=raw.get("mirror"),
        llm=_llm_settings(name, raw.get("llm")),
        workers=_workers(name, raw.get("workers")),
        shared=_shared(name, raw.get("shared"), raw.get("mirror")),
    )


def _no_credentials(name: str, what: str, url, hint: str) -> None:
    """A URL of a corpus is stored and shown: one carrying a password or a key is
    refused (:mod:`strata.core.config.urls`), the secret never repeated."""
    why = refusal(url, hint) if isinstance(url, str) else None
    if why:
        raise CorpusError(f"corpus {name!r}: {what} {shown_url(url)} {why}")


def _shared(name: str, raw, mirror) -> str:
    if raw is None:
        return "folder"
    if not isinstance(raw, str) or raw not in SHARED:
        raise CorpusError(f"corpus {name!r}: 'shared' must be one of {', '.join(SHARED)} "
                          f"(got {raw!r})")
    if raw in NEEDS_MIRROR and not mirror:
        raise CorpusError(f"corpus {name!r}: 'shared: {raw}' keeps the build on the corpus's "
                          "object store: give it a 'mirror' URI too")
    return raw


def _workers(name: str, raw) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise CorpusError(f"corpus {name!r}: 'workers' must be a whole number of step "
                          f"processes, 1 or more (got {raw!r})")
    return raw
def _patterns(name: str, what: str, raw) -> list[str]:
    """A corpus's include or exclude lines: gitignore patterns (see
    stages.discover.iter_paths), one string or a list; a bad one is named here."""
    lines = [raw] if isinstance(raw, str) else raw
    if not isinstance(lines, list) or not all(isinstance(p, str) for p in lines):
        raise CorpusError(f"corpus {name!r}: {what} must be a list of gitignore patterns")
    try:
        check_patterns(**{what: lines})
    except ValueError as e:
        raise CorpusError(f"corpus {name!r}: {e}") from None
    return list(lines)


def _llm_settings(name: str, raw) -> dict | None:
    if not raw:
        return None
    if not isinstance(raw, dict):
        raise CorpusError(f"corpus {name!r}: 'llm' must be a mapping of settings "
                          f"({', '.join(LLM_FIELDS)})")
    unknown = sorted(set(raw) - set(LLM_FIELDS))
    if unknown:
        raise CorpusError(f"corpus {name!r}: unknown llm setting(s) {', '.join(unknown)} "
                          f"(known: {', '.join(LLM_FIELDS)}; keys are read from the "
                          "environment, never stored)")
    if raw.get("backend") is not None and raw["backend"] not in LLM_BACKENDS:
        raise CorpusError(f"corpus {name!r}: llm backend {raw['backend']!r} is not one of "
                          f"{', '.join(LLM_BACKENDS)}")
    _no_credentials(name, "llm base_url", raw.get("base_url"), KEY_HINT)
    return {k: str(v) for k, v in raw.items() if v is not None}


def load_corpora(config_path: Path | str | None = None,
                 index_base: Path | None = None) -> dict[str, CorpusSpec]:
    """Declared corpora, with CLI-registered ones layered on top (default: the
    project's corpora file)."""
    config_path = Path(config_path) if config_path is not None else corpora_file()
    base = config_path.parent
    merged = {**_load_yaml(config_path), **_load_yaml(local_registry_path(config_path))}
    return {name: _spec(name, raw or {}, base, index_base) for name, raw in merged.items()}


def register_corpus(spec: CorpusSpec, config_path: Path | None = None) -> Path:
    """Record a CLI corpus in the local registry (declared ones are left untouched);
    its folder is made when the project has none yet. What the registry would
    refuse to load back is refused here, before anything is written (:func:`checked`)."""
    config_path = Path(config_path) if config_path is not None else corpora_file()
    checked(spec, config_path)
    local = local_registry_path(config_path)
    local.parent.mkdir(parents=True, exist_ok=True)
    corpora = _load_yaml(local)
    corpora[spec.name] = spec.to_yaml(config_path.parent)
    _write_registry(local, corpora)
    return local


def _write_registry(local: Path, corpora: dict) -> None:
    """Replace the local registry with ``corpora`` in one rename, so a reader (the
    sensors, a build) sees the old file or the new one, never half of one. It is
    readable by its owner only (0600): it names the corpus folders and endpoints."""
    write_text_atomic(local, "# Corpora registered by `strata index` and `strata corpus add`; "
                             "managed by Strata.\n"
                      + yaml.safe_dump({"corpora": corpora}, sort_keys=True), mode=0o600)


def checked(spec: CorpusSpec, config_path: Path, index_base: Path | None = None) -> CorpusSpec:
    """``spec`` as a build will read it back from the registry, or a
    :class:`CorpusError` naming what the registry would refuse (a bad name,
    include or exclude pattern, embedding runtime, LLM setting or worker count).
    It goes through the very parser of the corpora files, so what is accepted
    here is what the sensors and `strata index` can load."""
    base = Path(config_path).parent
    return _spec(spec.name, spec.to_yaml(base), base, index_base)


def corpus_sources(config_path: Path) -> dict[str, Path]:
    """Which file each corpus comes from: the local registry where it is
    registered there (it wins over a declaration), else the corpora file."""
    local = local_registry_path(config_path)
    return {**dict.fromkeys(_load_yaml(config_path), config_path),
            **dict.fromkeys(_load_yaml(local), local)}


def unregister_corpus(name: str, config_path: Path) -> Path:
    """Remove ``name`` from the local registry, and only from there: nothing of
    its folder or its index is touched. A corpus the corpora file declares is
    the user's text to edit, so it raises :class:`CorpusError` saying so."""
    local = local_registry_path(config_path)
    corpora = _load_yaml(local)
    if name not in corpora:
        declared = name in _load_yaml(config_path)
        raise CorpusError(f"corpus {name!r} is declared in {config_path}; remove it there"
                          if declared else
                          f"no corpus {name!r} is registered in {local}")
    del corpora[name]
    _write_registry(local, corpora)
    return local
