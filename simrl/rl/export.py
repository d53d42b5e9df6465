"""Exported policies (scripts/play.py): how big an ONNX file may grow before its weights go
into a file of their own, and the metadata both exports carry.

An ONNX model is one protobuf message, and protobuf refuses messages over 2 GiB, so ONNX can
keep the weights outside the graph, in a second file that must stay beside it; torch's
exporter does so by default (`policy.onnx` + `policy.onnx.data`). A policy is small (the
quadruped's weighs about 220 kB), so it is written as one self-contained `policy.onnx` unless its
weights exceed `ONNX_SINGLE_FILE_MAX_BYTES`; then as the pair.

Metadata: what a robot needs besides the network to run the policy (the env's
`policy_metadata()`: joint names in action order, default joint positions, action scale,
gains, the observation terms, the control period; docs/GUIDE.md "Exported policies"). In
policy.onnx each key is an entry of the model's `metadata_props` (as mjlab's exporter writes
them), its value JSON text; onnxruntime reads them with
`InferenceSession(path).get_modelmeta().custom_metadata_map`. policy.pt (TorchScript) carries the
same mapping as one JSON file, `metadata.json`, in its archive (`torch.jit.load(path,
_extra_files={"metadata.json": ""})` fills it in); a scripted module's attributes are fixed when
it is scripted, an extra file is not.
"""

import itertools
import json
from pathlib import Path

import torch

#: weights up to this size go inside the .onnx file; the limit leaves protobuf's 2 GiB room for the graph
ONNX_SINGLE_FILE_MAX_BYTES = 1 << 30


def weight_bytes(module: torch.nn.Module) -> int:
    """Bytes of the parameters and buffers of `module` (what an export stores as initializers)."""
    return sum(t.numel() * t.element_size() for t in itertools.chain(module.parameters(), module.buffers()))


def onnx_external_data(module: torch.nn.Module) -> bool:
    """Whether the ONNX export of `module` must keep its weights in a separate `.data` file."""
    return weight_bytes(module) > ONNX_SINGLE_FILE_MAX_BYTES


#: the file in policy.pt's archive that holds the metadata
JIT_METADATA_FILE = "metadata.json"


def _json(key: str, value) -> str:
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as e:
        raise ValueError(f"policy metadata {key!r}: not JSON ({e}): {value!r}") from None


def write_onnx_metadata(path, metadata: dict) -> None:
    """Set `metadata` ({key: JSON value}) as metadata_props of the ONNX file at `path` (keys it
    already has are replaced, others kept); its external weights, if any, stay where they are."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    kept = [(p.key, p.value) for p in model.metadata_props if p.key not in metadata]
    del model.metadata_props[:]
    for key, value in [*kept, *((k, _json(k, v)) for k, v in metadata.items())]:
        entry = model.metadata_props.add()
        entry.key, entry.value = key, value
    onnx.save(model, str(path))


def read_onnx_metadata(path) -> dict:
    """The metadata_props of the ONNX file at `path`, each value parsed as JSON."""
    import onnx

    return {p.key: json.loads(p.value) for p in onnx.load(str(path), load_external_data=False).metadata_props}


def write_jit_metadata(path, metadata: dict) -> None:
    """Save the TorchScript module at `path` again with `metadata` as JIT_METADATA_FILE in its archive."""
    text = _json("metadata", {k: json.loads(_json(k, v)) for k, v in metadata.items()})
    module = torch.jit.load(str(path), map_location="cpu")
    torch.jit.save(module, str(path), _extra_files={JIT_METADATA_FILE: text})


def read_jit_metadata(path) -> dict:
    """The metadata in the archive of the TorchScript file at `path` ({} when it has none)."""
    files = {JIT_METADATA_FILE: ""}
    torch.jit.load(str(path), map_location="cpu", _extra_files=files)
    return json.loads(files[JIT_METADATA_FILE] or "{}")


def write_metadata(run_dir, metadata: dict, onnx_name: str = "policy.onnx", jit_name: str = "policy.pt") -> None:
    """`metadata` into both exports of a run directory."""
    run_dir = Path(run_dir)
    write_onnx_metadata(run_dir / onnx_name, metadata)
    write_jit_metadata(run_dir / jit_name, metadata)
