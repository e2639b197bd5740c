"""A sentence-transformers model on torch, traced once into TorchScript and then
loaded with torch alone.

Why: importing sentence-transformers, and transformers with it, costs a process
several seconds before it encodes anything: more than a rebuild that encodes a
handful of changed texts spends on them, and paid again by every process that
encodes (each embedding shard of a multi-process build). The traced module is
the model's own forward (transformer, pooling, normalisation, in the runtime's
dtype) recorded by ``torch.jit.trace`` from the loaded sentence-transformers
model; ``torch.jit.load`` reads it back with only torch imported, and
``tokenizers`` tokenizes with the very tokenizer sentence-transformers set up
(saved in the module file). Its vectors are the eager model's,
bit for bit (``tests/test_runtimes.py`` checks it).

A trace records one path through the model's Python: the one a padded batch
takes (attention masked). Every input is padded by at least one token
(:func:`padded_length`), so that is the only path ever run; lengths and batch
sizes are recorded as sizes, so any of them runs.

Made once per machine into the model cache (:mod:`strata.core.model_cache`) under
a name that changes with the weights, the runtime and the versions of torch,
transformers and sentence-transformers, whose code the trace records.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import warnings
from importlib.metadata import PackageNotFoundError, version
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from strata.core.model_cache import derived_folder

TRACE_VERSION = "1"  # bump when the trace changes: modules are traced again
PAD_STEP = 16  # the sequence tile of the CPU kernels: lengths in one step share a padding
# Token positions in one forward pass (:func:`rows_per_pass`), and the bounds on
# its rows: about as many texts a second as the fastest row count at every length,
# and a pass small enough that a small edit, which pays a whole pass for each
# padded length it touches, stays cheap.
PASS_TOKENS, MIN_ROWS, MAX_ROWS = 1024, 8, 64
_META = "strata.json"  # what the loader needs, stored inside the module file
_TOKENIZER = "tokenizer.json"  # the tokenizer as sentence-transformers set it up
log = logging.getLogger(__name__)


def padded_length(tokens: int) -> int:
    """The length a text of ``tokens`` tokens is padded to: the next multiple of
    ``PAD_STEP`` strictly above it (at least one pad, so attention always runs masked)."""
    return PAD_STEP * (tokens // PAD_STEP + 1)


def rows_per_pass(length: int) -> int:
    """The rows of every forward pass at padded ``length``: ``PASS_TOKENS``
    positions, as a power of two within the bounds (64 rows of the shortest
    texts, 8 of the longest). A function of the length alone: that is what keeps
    a text's vector independent of what it is encoded with."""
    rows = MAX_ROWS
    while rows > MIN_ROWS and rows * length > PASS_TOKENS:
        rows //= 2
    return rows


def shape_batches(counts: list[int], cap: int,
                  fill: bool = True) -> Iterator[tuple[int, list[int]]]:
    """(padded length, rows) for each forward pass over texts of ``counts``
    tokens: texts grouped by the padded length each is computed at (never above
    ``cap``, the model's longest input), shortest first, and every pass at a
    length exactly :func:`rows_per_pass` rows: a group's last pass is filled with
    its first text again (those rows' outputs are the same vector, written to the
    same place). Without ``fill`` a group's last pass has only its own rows: for
    a CPU whose kernels give a row the same bytes whatever the row count of its
    pass (:func:`rows_free`), where the filled rows would be work for nothing (a
    small edit's texts fall in a handful of lengths, each a pass mostly filled).

    Why: the kernels a transformer runs on CPU depend on the shape of the batch. A
    batch with no padding takes the attention path without a mask, the padded
    length decides how the sequence is tiled, and on CPUs with AMX the number of
    rows decides how the matmuls are blocked; each changes the rounding of a
    text's vector in bfloat16 (and its last bits in float32). A text's place in
    the batch, the other rows and the thread count do not. So every pass has one
    shape per padded length, and a text's vector is the same whatever else is
    encoded with it: an incremental build, which encodes other batches than a
    fresh one, gives every text the vector a fresh build gives it."""
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(counts):
        groups.setdefault(min(padded_length(n), cap), []).append(i)
    for length, members in sorted(groups.items()):
        step = rows_per_pass(length)
        for start in range(0, len(members), step):
            rows = members[start:start + step]
            yield length, rows + [rows[0]] * (step - len(rows)) if fill else rows


def traceable(location: str) -> bool:
    """Whether the model is a local sentence-transformers folder (its files are
    what names the traced module in the cache)."""
    src = Path(location)
    return all((src / name).is_file() for name in ("config.json", "modules.json"))


def _versions() -> str:
    found = []
    for name in ("torch", "transformers", "sentence-transformers"):
        try:
            found.append(f"{name}={version(name)}")
        except PackageNotFoundError:
            found.append(f"{name}=none")
    return ",".join(found)


def module_path(location: str, runtime: str) -> Path:
    """Where the TorchScript module of the model in ``location`` on ``runtime``
    (``torch`` or ``torch-bf16``) is kept in the model cache."""
    return derived_folder(Path(location), f"trace{TRACE_VERSION}:{_versions()}") / f"{runtime}.pt"


def _trace(src: Path, runtime: str, target: Path) -> TracedSentenceModel:
    """Trace the model, keep it in the cache when the cache can be written, and
    return it (from memory: it is used whether or not it could be kept)."""
    import torch
    from sentence_transformers import SentenceTransformer

    kwargs = {"model_kwargs": {"torch_dtype": torch.bfloat16}} if runtime == "torch-bf16" else {}
    with warnings.catch_warnings():  # the libraries' deprecation notes, to their users not ours
        warnings.simplefilter("ignore")
        model = SentenceTransformer(str(src), device="cpu", **kwargs).eval()
    tokenizer = model.tokenizer
    types = "token_type_ids" in getattr(tokenizer, "model_input_names", ())

    class SentenceVector(torch.nn.Module):
        """The model's modules, fed as sentence-transformers feeds them."""

        def __init__(self, inner):
            super().__init__()
            self.inner = inner

        def forward(self, input_ids, attention_mask, token_type_ids):
            features = {"input_ids": input_ids, "attention_mask": attention_mask}
            if types:
                features["token_type_ids"] = token_type_ids
            return self.inner(features)["sentence_embedding"]

    ids = torch.ones((2, 2 * PAD_STEP), dtype=torch.long)
    mask = torch.ones_like(ids)
    mask[:, -1] = 0  # padded, as every input will be
    with warnings.catch_warnings(), torch.no_grad():
        # the trace warns that shape checks become constants: the padded path is the one kept
        warnings.simplefilter("ignore")
        traced = torch.jit.trace(SentenceVector(model).eval(), (ids, mask, torch.zeros_like(ids)),
                                 check_trace=False)
        dim = int(traced(ids, mask, torch.zeros_like(ids)).shape[1])
    meta = {"dim": dim, "max_seq_length": int(model.max_seq_length),
            "max_positions": max_positions(model), "pad_id": int(tokenizer.pad_token_id or 0)}
    backend = tokenizer.backend_tokenizer.to_str()  # transformers 5 tokenizers are all fast ones
    extra = {_META: json.dumps(meta), _TOKENIZER: backend}
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        torch.jit.save(traced, str(tmp), _extra_files=extra)
        os.replace(tmp, target)
    except (OSError, RuntimeError) as e:  # a read-only or full cache: traced again next time
        log.warning("could not keep the traced model in %s (%s); the next process traces it "
                    "again", target.parent, e)
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return TracedSentenceModel(traced, extra, target)


def max_positions(model) -> int:
    """How long a padded input the model takes (its position embeddings), or no cap."""
    try:
        return int(model[0].auto_model.config.max_position_embeddings)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError):
        return 1 << 30


class TracedSentenceModel:
    """``encode`` as sentence-transformers' model has it (the arguments the
    encoder and the benchmarks use), on the traced module."""

    def __init__(self, module, extra: dict, path: Path):
        from tokenizers import Tokenizer

        self.module = module
        meta = json.loads(extra[_META])
        tokenizer = extra[_TOKENIZER]
        self.graph = path
        self.dim = int(meta["dim"])
        self.cap = int(meta["max_positions"])
        self.pad_id = int(meta["pad_id"])
        self.tokenizer = Tokenizer.from_str(
            tokenizer.decode() if isinstance(tokenizer, bytes) else tokenizer)
        self.tokenizer.enable_truncation(int(meta["max_seq_length"]))
        self.tokenizer.no_padding()
        self.fill = True  # fill every pass to its row count (load_traced settles it)

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def _encodings(self, texts: list[str]):
        return self.tokenizer.encode_batch(list(texts))

    def token_counts(self, texts: list[str]) -> list[int]:
        """Each text's token count, truncation included: what its pass's shape follows."""
        return [len(e.ids) for e in self._encodings(texts)]

    def encode(self, texts: list[str], batch_size: int = 16, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        """The model's output for each text (normalised in the model's dtype),
        computed at :func:`padded_length` of its own token count in passes of
        texts of that length only, a fixed number of rows each (:func:`shape_batches`);
        ``batch_size`` is accepted for sentence-transformers' signature and unused."""
        return self._encode(texts, self.fill)

    def _encode(self, texts: list[str], fill: bool) -> np.ndarray:
        import torch

        encodings = self._encodings(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for length, part in shape_batches([len(e.ids) for e in encodings], self.cap, fill):
            ids = np.full((len(part), length), self.pad_id, dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, i in enumerate(part):
                e = encodings[i]
                n = min(len(e.ids), length)
                ids[row, :n], mask[row, :n], types[row, :n] = e.ids[:n], 1, e.type_ids[:n]
            with torch.inference_mode():
                got = self.module(torch.from_numpy(ids), torch.from_numpy(mask),
                                  torch.from_numpy(types))
            out[part] = got.float().numpy()
        return out


def load_traced(location: str, runtime: str) -> TracedSentenceModel:
    """The model in ``location`` on ``runtime``, from the cache, traced first
    when the cache does not hold it (or holds a file that cannot be read); its
    passes filled or not as :func:`rows_free` finds for this CPU."""
    import torch

    path = module_path(location, runtime)
    model = None
    if path.exists():
        extra = {_META: "", _TOKENIZER: ""}
        try:
            module = torch.jit.load(str(path), map_location="cpu", _extra_files=extra).eval()
            model = TracedSentenceModel(module, extra, path)
        except (OSError, RuntimeError, ValueError, KeyError) as e:
            log.warning("the traced model %s cannot be read (%s); tracing it again", path,
                        str(e).splitlines()[0] if str(e) else type(e).__name__)
    if model is None:
        model = _trace(Path(location), runtime, path)
    model.fill = not rows_free(model)
    return model


def _probe_texts() -> list[str]:
    """Texts at three padded lengths, more of each than the widest pass at it holds."""
    words = "tide gauge drift harbour reading storm corrected against the reference".split()
    texts = []
    for size in (6, 40, 180):
        for i in range(rows_per_pass(padded_length(size)) + 3):
            texts.append(" ".join(words[(i + j) % len(words)] for j in range(size + i % 3)))
    return texts


def rows_free(model: TracedSentenceModel) -> bool:
    """Whether, on this CPU, a text's vector is the same bytes in a pass of any
    row count, so that a pass need not be filled (:func:`shape_batches`).

    Why measured and not assumed: the row count is part of the shape the kernels
    are chosen by, and on CPUs with AMX it decides how the matmuls are blocked,
    which changes a vector's last bits; elsewhere (AVX512-BF16 without AMX, for
    one) it does not. So the model encodes probe texts in full passes, one by
    one and in part-filled passes, and the passes are left unfilled only where
    every vector is the same bytes. The answer is kept beside the traced module
    under a digest of the CPU (:func:`strata.core.cpu.cpu_fingerprint`): measured
    once per machine, and again on another one."""
    from strata.core.cpu import cpu_fingerprint

    record = model.graph.with_name(model.graph.name + ".rows.json")
    cpu = cpu_fingerprint()
    try:
        kept = json.loads(record.read_text())
        if kept.get("cpu") == cpu and isinstance(kept.get("rows_free"), bool):
            return kept["rows_free"]
    except (OSError, ValueError, AttributeError):
        pass
    texts = _probe_texts()
    filled = model._encode(texts, fill=True)
    alone = np.concatenate([model._encode([t], fill=False) for t in texts])
    parts = np.concatenate([model._encode(texts[i:i + 3], fill=False)
                            for i in range(0, len(texts), 3)])
    free = bool(np.array_equal(filled, alone) and np.array_equal(filled, parts))
    from strata.core.layout import write_json_atomic

    try:
        write_json_atomic(record, {"cpu": cpu, "rows_free": free})
    except OSError as e:  # a read-only cache: measured again by the next process
        log.debug("could not keep %s: %s", record, e)
    return free
