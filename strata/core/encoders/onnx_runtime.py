"""A sentence-transformers model on ONNX Runtime: the same weights, exported here.

Why ONNX Runtime: on a CPU it runs MiniLM's small matrices with less overhead
than torch, and its int8 variant (dynamic quantisation: int8 weights, activations
quantised per call) does the matrix products in integer arithmetic
(``benchmarks.onnx_runtime`` measures both against torch: speed, vector
agreement, recall).

Why not sentence-transformers' own ``backend="onnx"``: it loads through
optimum-onnx, whose only release (0.1.0) needs transformers < 4.58 and
huggingface-hub < 1, which the sentence-transformers we run (6.x) cannot use;
installing it broke the environment. So the pieces are used directly, each a
library we already have: torch exports the model (with its mean pooling and
normalisation, so the graph returns the sentence vector), ``onnxruntime`` runs
it and quantises it (``onnxruntime.quantization``, which needs ``onnx``), and
the model's own ``tokenizer.json`` tokenizes (``tokenizers``).

Nothing is downloaded: the graph is exported once from the local model folder
(the packaged all-MiniLM-L6-v2 by default) into the model cache
(:mod:`strata.core.encoders.model_cache`).
"""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import numpy as np

from strata.core.encoders.model_cache import derived_folder

EXPORT_VERSION = "2"  # bump when the export changes: graphs are exported again
OPSET = 17
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
# how a text becomes a vector here (OnnxSentenceModel.encode: one text per session run);
# a build's cached vectors are keyed by it, so vectors computed another way are never
# mixed with these: bump it when encode changes what a text's vector is
ENCODING_VERSION = "2"


def exported_graph(location: str, int8: bool) -> Path:
    """The ONNX graph of the model in ``location`` (float32, or int8), exported
    on first use."""
    src = Path(location)
    if not (src / "config.json").is_file():
        raise RuntimeError(f"the onnx runtimes need a local model folder; {location!r} is not "
                           "one (give the folder of a sentence-transformers model)")
    folder = derived_folder(src, EXPORT_VERSION)
    fp32 = folder / "model.onnx"
    if not fp32.exists():
        _export(src, fp32)
    if not int8:
        return fp32
    q = folder / "model_int8.onnx"
    if not q.exists():
        from onnxruntime.quantization import QuantType, quantize_dynamic

        tmp = q.with_name(f".{q.name}.{os.getpid()}.tmp")
        # The quantizer logs advice for whoever wrote the graph (run its pre-processing)
        # on the root logger, which reaches the user's terminal; it is not theirs to act on.
        advice = _DropMessage("pre-processing before quantization")
        logging.getLogger().addFilter(advice)
        try:
            quantize_dynamic(str(fp32), str(tmp), weight_type=QuantType.QInt8,
                             per_channel=True)  # per-tensor scales: cosine 0.96 to torch; per channel: 0.99
        finally:
            logging.getLogger().removeFilter(advice)
        os.replace(tmp, q)
    return q


class _DropMessage(logging.Filter):
    """Drops the records whose message holds ``text``."""

    def __init__(self, text: str):
        super().__init__()
        self.text = text

    def filter(self, record: logging.LogRecord) -> bool:
        return self.text not in record.getMessage()


def _export(src: Path, target: Path) -> None:
    from strata.core.library_logs import quiet_libraries

    quiet_libraries()
    import torch
    from transformers import AutoModel

    class SentenceVector(torch.nn.Module):
        """The transformer, mean pooling over real tokens, and L2 normalisation:
        what the model's modules.json (Transformer, Pooling mean, Normalize) does."""

        def __init__(self, model):
            super().__init__()
            self.model = model

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.model(input_ids=input_ids, attention_mask=attention_mask,
                           token_type_ids=token_type_ids).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(h.dtype)
            v = (h * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(v, p=2, dim=1)

    import shutil

    import onnx

    _check_pooling(src)
    model = SentenceVector(AutoModel.from_pretrained(str(src)).eval())
    work = target.parent / f".export.{os.getpid()}.tmp"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    try:
        ids = torch.ones((2, 8), dtype=torch.long)
        axes = {0: "batch", 1: "tokens"}
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            # the TorchScript exporter, on purpose (dynamo=False): the dynamo one needs
            # onnxscript, which is not installed. Its tracer warns about every Python
            # branch it meets in transformers' code; the exported graph is checked
            # against the model it came from before anything uses it
            # (query_runtime.prepare), so those notes are one line, not three blocks
            # a user reads as errors
            warnings.simplefilter("always")
            torch.onnx.export(model, (ids, ids, torch.zeros_like(ids)), str(work / "exported.onnx"),
                              input_names=list(INPUTS), output_names=["embedding"],
                              dynamic_axes={**dict.fromkeys(INPUTS, axes),
                                            "embedding": {0: "batch"}},
                              opset_version=OPSET, dynamo=False)
        if caught:
            logging.getLogger(__name__).info(
                "exported %s to ONNX (%d exporter notes, e.g. %s: %s)", src.name, len(caught),
                caught[0].category.__name__, str(caught[0].message).split(".")[0])
        # the weights as one external file beside the graph: ONNX Runtime then maps them
        # instead of parsing them out of the protobuf and copying them (a querying process
        # holds one copy of the weights, not two, and starts its session faster)
        data = f"{target.name}.data"
        onnx.save_model(onnx.load(str(work / "exported.onnx")), str(work / target.name),
                        save_as_external_data=True, all_tensors_to_one_file=True, location=data,
                        size_threshold=1024)
        os.chmod(work / data, 0o644)  # as readable as the graph beside it (onnx writes 0600)
        os.replace(work / data, target.parent / data)
        os.replace(work / target.name, target)  # last: a reader that sees it sees both
    finally:
        shutil.rmtree(work, ignore_errors=True)


_PIPELINE = ["Transformer", "Pooling", "Normalize"]  # the modules the export reproduces


def _pipeline(src: Path) -> tuple[list[str], bool]:
    """(the model's module kinds, whether they are the mean-pooled, normalised
    transformer this exporter reproduces)."""
    modules = json.loads((src / "modules.json").read_text()) if (src / "modules.json").exists() \
        else []
    kinds = [m.get("type", "").rsplit(".", 1)[-1] for m in modules]
    pooling = src / "1_Pooling" / "config.json"
    mean = json.loads(pooling.read_text()).get("pooling_mode_mean_tokens") \
        if pooling.exists() else False
    return kinds, kinds == _PIPELINE and bool(mean)


def exportable(src: Path) -> bool:
    """Whether the model in folder ``src`` is one this exporter reproduces
    exactly: a local folder of a mean-pooled, normalised transformer."""
    try:
        return (src / "config.json").is_file() and (src / "tokenizer.json").is_file() and \
            _pipeline(src)[1]
    except (OSError, ValueError, AttributeError):
        return False


def _check_pooling(src: Path) -> None:
    kinds, ok = _pipeline(src)
    if not ok:
        raise RuntimeError(f"the onnx runtimes export mean-pooled, normalised models; {src} "
                           f"has modules {kinds}: use the torch runtime for it")


class OnnxSentenceModel:
    """``encode`` as sentence-transformers' model has it (the arguments the
    encoder and the benchmarks use), on an ONNX Runtime session."""

    def __init__(self, location: str, graph: Path, threads: int):
        from strata.core.library_logs import quiet_libraries

        quiet_libraries()
        import onnxruntime as ort
        from tokenizers import Tokenizer

        src = Path(location)
        cfg = src / "sentence_bert_config.json"
        max_len = json.loads(cfg.read_text()).get("max_seq_length", 256) if cfg.exists() else 256
        self.tokenizer = Tokenizer.from_file(str(src / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_len)
        self.tokenizer.no_padding()  # one text per run (encode): never padded
        so = ort.SessionOptions()
        so.intra_op_num_threads = max(1, threads)
        so.inter_op_num_threads = 1
        # no spinning between calls: the cores are shared with other steps and processes
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(graph), so, providers=["CPUExecutionProvider"])
        self.graph = graph
        self.dim = int(self.session.get_outputs()[0].shape[1] or
                       len(self._vector(self.tokenizer.encode("dimension"))))

    def get_sentence_embedding_dimension(self) -> int:
        return self.dim

    def _vector(self, encoding) -> np.ndarray:
        ids = np.array([encoding.ids], dtype=np.int64)
        return self.session.run(["embedding"], {
            "input_ids": ids, "attention_mask": np.ones_like(ids),
            "token_type_ids": np.array([encoding.type_ids], dtype=np.int64)})[0][0]

    def encode(self, texts: list[str], batch_size: int = 32, normalize_embeddings: bool = True,
               convert_to_numpy: bool = True, show_progress_bar: bool = False) -> np.ndarray:
        """Each text's vector, normalised inside the graph, from one session run per
        text at the text's own length (``batch_size`` is taken for sentence-transformers'
        signature and not used).

        Why one text per run: ONNX Runtime's kernels depend on the shape of the call,
        so a text encoded with others (padded to the longest, in a batch of another
        size) comes out different in its last bits, and int8's dynamic quantisation
        scales activations per call. A text alone gets the vector that depends on
        the text only, which is what lets an incremental build, encoding other
        batches than a fresh one, equal it exactly. On a CPU it costs nothing: a
        text's tokens already make the matrix products' rows, and no padding is
        computed."""
        texts = list(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, encoding in enumerate(self.tokenizer.encode_batch(texts)):
            out[i] = self._vector(encoding)
        return out


def load_onnx(location: str, int8: bool, threads: int) -> OnnxSentenceModel:
    return OnnxSentenceModel(location, exported_graph(location, int8), threads)
