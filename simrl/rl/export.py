"""Exported policies (scripts/play.py): how big an ONNX file may grow before its weights go
into a file of their own.

An ONNX model is one protobuf message, and protobuf refuses messages over 2 GiB, so ONNX can
keep the weights outside the graph, in a second file that must stay beside it; torch's
exporter does so by default (`policy.onnx` + `policy.onnx.data`). A policy is small (the
quadruped's weighs about 220 kB), so it is written as one self-contained `policy.onnx` unless its
weights exceed `ONNX_SINGLE_FILE_MAX_BYTES`; then as the pair.
"""

import itertools

import torch

#: weights up to this size go inside the .onnx file; the limit leaves protobuf's 2 GiB room for the graph
ONNX_SINGLE_FILE_MAX_BYTES = 1 << 30


def weight_bytes(module: torch.nn.Module) -> int:
    """Bytes of the parameters and buffers of `module` (what an export stores as initializers)."""
    return sum(t.numel() * t.element_size() for t in itertools.chain(module.parameters(), module.buffers()))


def onnx_external_data(module: torch.nn.Module) -> bool:
    """Whether the ONNX export of `module` must keep its weights in a separate `.data` file."""
    return weight_bytes(module) > ONNX_SINGLE_FILE_MAX_BYTES
