"""The text encoders both sides share: the local model on torch or ONNX Runtime, an
OpenAI-compatible endpoint, which encoder a corpus's build uses, the query side's
encoder (ONNX Runtime, no torch), and the model cache of exported graphs."""
