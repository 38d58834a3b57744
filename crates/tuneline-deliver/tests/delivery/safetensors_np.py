"""Reads a safetensors file with numpy alone (no torch, no safetensors package)."""
import json
import struct

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32}


def load(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        if info["dtype"] == "BF16":
            raw = np.frombuffer(data[start:end], dtype=np.uint16).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            arr = np.frombuffer(data[start:end], dtype=DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"]).astype(np.float32)
    return out
