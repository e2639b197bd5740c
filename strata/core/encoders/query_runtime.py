"""Which runtime embeds a query, and whether it may: decided once, then remembered.

A build encodes on ONNX Runtime in float32 where the model exports, with
torch-bf16 where the CPU computes bfloat16 natively, or with the torch runtime an
older index was built with. A
query is one short text, and a querying process is often a fresh one (a
shell command, an agent's tool call): importing torch, transformers and
sentence-transformers cost it seconds before the first answer. So a query
embeds through ONNX Runtime and ``tokenizers`` on the graph exported from the
same weights (:mod:`strata.core.encoders.onnx_runtime`), exported once into the model cache
(at publish, or on first use), never per process. Torch remains the fallback
for a model that cannot be exported, and ``STRATA_EMBED_RUNTIME`` still picks a
runtime explicitly.

A runtime other than the one that built an index may embed its queries only
when its vectors of the index's own texts agree with the stored ones
(:func:`strata.core.encoders.embedding.disagreement`). That check encodes a probe of the
index's texts; its outcome is recorded in the model cache under a key made of
the probe itself (texts and stored vectors), the built runtime and the
querying encoder's identity, so it is measured once per (index content,
runtime, model) and read back by every later process. A publish records it
ahead of the first query.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import replace
from pathlib import Path

import numpy as np

from strata.core.storage.layout import write_text_atomic
from strata.core.encoders.embedding import (AUTO, TORCH_RUNTIMES, EncoderSpec, canonical_model, disagreement,
                                   load_encoder, local_identity, model_location, onnx_ready,
                                   resolve_runtime)

log = logging.getLogger(__name__)
QUERY_RUNTIME = "onnx"  # float32: agrees with torch float32 to a cosine of 1.0000


def query_spec(built: EncoderSpec, asked: str = AUTO) -> EncoderSpec:
    """The encoder a querying process loads for an index built with ``built``:
    ``asked`` (a runtime the user set) when it is not ``auto``; else ONNX
    float32 where the model exports and was built with torch; else the built
    runtime (bfloat16 is
    queried in float32 on a CPU without native bfloat16, where it is slower)."""
    if built.backend != "sentence-transformers":
        return built
    if asked != AUTO:
        return replace(built, runtime=asked)
    if built.runtime not in TORCH_RUNTIMES:  # built on ONNX Runtime already: no torch to avoid
        return built
    if onnx_ready(built.model):
        return replace(built, runtime=QUERY_RUNTIME)
    if built.runtime == "torch-bf16":
        from strata.core.encoders.embedding import native_bf16

        if not native_bf16():
            return replace(built, runtime="torch")
    return built


def _agreements_dir() -> Path:
    from strata.core.encoders.model_cache import model_cache

    return model_cache() / "agreements"


def _key(built: EncoderSpec, encoder, texts: list[str], stored: np.ndarray) -> str:
    h = hashlib.sha256()
    identity = getattr(encoder, "identity", encoder.spec.label)
    h.update(f"{built.backend}:{canonical_model(built.model)}:{built.runtime}\n{identity}\n"
             .encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    h.update(np.ascontiguousarray(stored, dtype=np.float32).tobytes())
    return h.hexdigest()[:32]


# Cosines of single probe texts kept per (built runtime, querying encoder): enough
# for the probes of many versions of many indexes, bounded so the file stays small
TEXT_COSINES_KEPT = 4096


def _write_json(path: Path, value) -> None:
    """``value`` at ``path``, keys in their order (the text cosines' oldest first:
    :func:`strata.core.storage.layout.write_json_atomic` would sort them)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, json.dumps(value, indent=2) + "\n")
    except OSError as e:  # a read-only cache: measured again next time, still correct
        log.debug("could not record the runtime agreement in %s: %s", path, e)


def _text_cosines(built: EncoderSpec, encoder, texts: list[str],
                  stored: np.ndarray) -> np.ndarray:
    """The cosine between ``encoder``'s vector of each text and its stored vector.

    Each is a function of the text, its stored vector and the two runtimes alone,
    so it is recorded per text and only texts never measured against these vectors
    are encoded: a rebuild that changed one row of a probe encodes that row, not
    the whole probe (whose long texts made most of a small rebuild's publish)."""
    pair = _key(built, encoder, [], np.zeros((0,), np.float32))
    path = _agreements_dir() / "texts" / f"{pair}.json"
    try:
        known = json.loads(path.read_text())
        known = known if isinstance(known, dict) else {}
    except (OSError, ValueError):
        known = {}
    keys = []
    for text, vector in zip(texts, stored):
        h = hashlib.sha256(text.encode("utf-8", "surrogatepass") + b"\0")
        h.update(np.ascontiguousarray(vector, dtype=np.float32).tobytes())
        keys.append(h.hexdigest()[:32])
    cached = [known.get(k) for k in keys]
    todo = [i for i, c in enumerate(cached) if not isinstance(c, float)]
    cos = np.array([c if isinstance(c, float) else 0.0 for c in cached], np.float64)
    if todo:
        got = encoder.encode([texts[i] for i in todo])
        cos[todo] = (got * stored[todo]).sum(1)
        for i in todo:
            known.pop(keys[i], None)
            known[keys[i]] = float(cos[i])  # the newest last: the oldest are dropped first
        _write_json(path, dict(list(known.items())[-TEXT_COSINES_KEPT:]))
    return cos


def agreement(built: EncoderSpec, encoder, texts: list[str],
              stored: np.ndarray) -> tuple[float | None, str | None]:
    """(mean cosine, None) when ``encoder`` agrees with the vectors ``stored``
    for ``texts`` (the index's probe), else (None, why). Read from the model
    cache when this probe was checked before with this encoder; measured (the
    texts not measured before) and recorded otherwise."""
    key = _key(built, encoder, texts, stored)
    path = _agreements_dir() / f"{key}.json"
    try:
        rec = json.loads(path.read_text())
        return rec.get("mean"), rec.get("why")
    except (OSError, ValueError, AttributeError):
        pass
    cos = _text_cosines(built, encoder, texts, stored) if len(texts) else np.zeros(0)
    why = disagreement(cos)
    mean = None if why else round(float(cos.mean()), 5)
    _write_json(path, {"built": built.label, "query": encoder.spec.label,
                       "probe_texts": len(texts), "mean": mean,
                       "lowest": round(float(cos.min()), 5) if len(cos) else None, "why": why})
    return mean, why


class _Deferred:
    """The query encoder as :func:`agreement` uses it, loaded only if a probe text
    must be encoded: a rebuild that left the probe as it was finds its agreement
    recorded under the encoder's name (:func:`local_identity`), and its publish
    then loads no second runtime."""

    def __init__(self, spec: EncoderSpec):
        self.spec = spec
        self._encoder = None

    @property
    def identity(self) -> str:
        return local_identity(model_location(self.spec.model),
                              resolve_runtime(self.spec.runtime, model=self.spec.model))

    def encode(self, texts: list[str]) -> np.ndarray:
        if self._encoder is None:
            self._encoder = load_encoder(self.spec)
        return self._encoder.encode(texts)


def prepare(folder: Path, built: EncoderSpec) -> dict:
    """Ready the query side of the version (or build) in ``folder`` at publish:
    the ONNX graph exported into the model cache and the agreement of the query
    runtime with the built one recorded, so the first query pays for neither.
    Returns what it did (for the run's metadata); never fails the build: a
    query falls back to doing this itself."""
    from strata.core.query_arrays import open_arrays

    spec = query_spec(built)
    if spec.same_runtime(built):
        return {"query_runtime": spec.runtime}
    try:
        encoder = _Deferred(spec)
        arrays = open_arrays(folder)
        if arrays is None:
            return {"query_runtime": spec.runtime}
        mean, why = agreement(built, encoder, arrays.probe_texts, arrays.probe_vectors)
    except Exception as e:  # noqa: BLE001 - the query side repeats it and reports
        log.warning("could not prepare the query runtime %s: %s", spec.runtime, e)
        return {"query_runtime": built.runtime, "query_runtime_problem": str(e)[:200]}
    if why:
        return {"query_runtime": built.runtime, "query_runtime_problem": why}
    return {"query_runtime": spec.runtime, "query_runtime_agreement": mean}
