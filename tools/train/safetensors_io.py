"""A small writer and reader for the safetensors format (no dependency on the
safetensors package).

Layout: 8-byte little-endian unsigned header length N, then N bytes of UTF-8
JSON, then the raw tensor data. The JSON maps each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the
start of the data), plus "__metadata__" (string -> string). The header is
padded with spaces so the data starts at an 8-byte boundary. Tensors are
stored C-contiguous, little-endian, back to back in the order given.
"""
import json
import struct

import numpy as np

_DTYPES = {np.dtype("<f4"): "F32", np.dtype("<f2"): "F16"}
_NP = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2")}


def write(path, tensors, metadata=None):
    """tensors: list of (name, array-like); float32 / float16 numpy arrays or
    torch tensors (converted with .numpy())."""
    arrays = []
    for name, t in tensors:
        if hasattr(t, "detach"):
            t = t.detach().cpu().contiguous().numpy()
        a = np.ascontiguousarray(t)
        if a.dtype.newbyteorder("<") not in _DTYPES:
            raise ValueError(f"{name}: unsupported dtype {a.dtype}")
        arrays.append((name, a.astype(a.dtype.newbyteorder("<"), copy=False)))
    header = {}
    if metadata is None:
        metadata = {"format": "pt"}
    header["__metadata__"] = metadata
    offset = 0
    for name, a in arrays:
        if name in header:
            raise ValueError(f"duplicate tensor name {name}")
        n = a.nbytes
        header[name] = {"dtype": _DTYPES[a.dtype], "shape": list(a.shape), "data_offsets": [offset, offset + n]}
        offset += n
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - (8 + len(hj)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for _, a in arrays:
            f.write(a.tobytes(order="C"))


def read(path):
    """-> (dict name -> numpy array, metadata)."""
    with open(path, "rb") as f:
        raw = f.read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, h in header.items():
        b, e = h["data_offsets"]
        dt = _NP[h["dtype"]]
        out[name] = np.frombuffer(raw[base + b:base + e], dtype=dt).reshape(h["shape"]).copy()
    return out, meta
