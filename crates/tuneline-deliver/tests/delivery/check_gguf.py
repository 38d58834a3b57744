"""Reads a GGUF tuneline exported with gguf-py (llama.cpp's own reader) and
checks it against the base GGUF, the merged weights and, for quantized
files, the tensor types llama-quantize chose for the same model.

usage: check_gguf.py model EXPORT BASE MERGED_DIR NAME FILE_TYPE [REFERENCE]
       check_gguf.py adapter EXPORT BASE ADAPTER_DIR ALPHA"""
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

from safetensors_np import load

# Largest relative RMS error of a tensor rounded to each type (about 2x what
# each gives on SmolLM2's weights).
BOUND = {"F32": 0.0, "F16": 1e-3, "BF16": 8e-3, "Q8_0": 8e-3, "Q6_K": 2e-2, "Q5_1": 6e-2, "Q5_0": 7.5e-2, "Q5_K": 7.5e-2, "Q4_K": 0.12, "Q4_1": 0.1, "Q4_0": 0.12}
LINEAR = {"attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
          "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj"}
# The SmolLM2 file was converted by an older convert_hf_to_gguf.py than the
# one tuneline writes as (llama.cpp 0.3.36's, which families.rs holds it to
# key by key): that one no longer writes the first key and now writes the second.
DROPPED_SINCE = {"tokenizer.ggml.add_space_prefix"}
ADDED_SINCE = {"tokenizer.ggml.add_eos_token"}


def fields(reader):
    return {k: f.contents() for k, f in reader.fields.items() if not k.startswith("GGUF.")}


def dense(t):
    return dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)]).astype(np.float32)


def permute(w, n):
    rows, cols = w.shape
    return w.reshape(n, 2, rows // n // 2, cols).swapaxes(1, 2).reshape(rows, cols)


def hf_name(name):
    if name == "token_embd.weight":
        return "model.embed_tokens.weight"
    if name == "output_norm.weight":
        return "model.norm.weight"
    if name == "output.weight":
        return "lm_head.weight"
    _, layer, part, kind = name.split(".")
    if part == "attn_norm":
        return f"model.layers.{layer}.input_layernorm.weight"
    if part == "ffn_norm":
        return f"model.layers.{layer}.post_attention_layernorm.weight"
    return f"model.layers.{layer}.{LINEAR[part]}.{kind}"


def check_model(path, base_path, merged_dir, name, file_type, reference):
    out, base = GGUFReader(path), GGUFReader(base_path)
    assert int(out.fields["GGUF.version"].contents()) == 3
    got, want = fields(out), fields(base)
    expected_general = {"general.architecture": "llama", "general.type": "model", "general.name": name,
                        "general.file_type": int(file_type), "general.quantization_version": 2}
    for key, value in expected_general.items():
        assert got.get(key) == value, f"{key} = {got.get(key)!r}, expected {value!r}"
    for key, value in want.items():
        if key.startswith(("llama.", "tokenizer.")) and key not in DROPPED_SINCE:
            assert key in got, f"{key} is missing"
            assert got[key] == value, f"{key} differs from the base's"
    extra = set(got) - set(want) - set(expected_general) - ADDED_SINCE
    assert not extra, f"keys the converter does not write: {extra}"
    heads, kv = want["llama.attention.head_count"], want["llama.attention.head_count_kv"]
    base_tensors = {t.name: t for t in base.tensors}
    assert sorted((t.name, list(map(int, t.shape))) for t in out.tensors) == sorted((t.name, list(map(int, t.shape))) for t in base.tensors)
    if reference:
        ref = {t.name: t.tensor_type.name for t in GGUFReader(reference).tensors}
        mine = {t.name: t.tensor_type.name for t in out.tensors}
        diff = {n: (mine[n], ref[n]) for n in mine if mine[n] != ref[n]}
        assert not diff, f"types differ from llama-quantize's (tuneline, llama.cpp): {diff}"
    merged = load(f"{merged_dir}/model.safetensors")
    errors, copied = {}, 0
    for t in out.tensors:
        kind = t.tensor_type.name
        w = merged[hf_name(t.name)]
        if t.name.endswith("attn_q.weight"):
            w = permute(w, heads)
        elif t.name.endswith("attn_k.weight"):
            w = permute(w, kv)
        rel = float(np.sqrt(np.mean((dense(t) - w) ** 2)) / max(np.sqrt(np.mean(w ** 2)), 1e-12))
        assert rel <= BOUND[kind], f"{t.name} ({kind}): relative RMS error {rel}, bound {BOUND[kind]}"
        errors[kind] = max(errors.get(kind, 0.0), rel)
        b = base_tensors[t.name]
        if t.name.split(".")[-2] not in LINEAR and b.tensor_type == t.tensor_type:
            assert bytes(b.data.tobytes()) == bytes(t.data.tobytes()), f"{t.name}: not copied byte for byte from the base"
            copied += 1
    return {"tensors": len(out.tensors), "copied": copied, "max_relative_rms": errors}


def check_adapter(path, base_path, adapter_dir, alpha):
    out, base = GGUFReader(path), GGUFReader(base_path)
    got = fields(out)
    for key, value in {"general.type": "adapter", "general.architecture": "llama", "adapter.type": "lora"}.items():
        assert got.get(key) == value, f"{key} = {got.get(key)!r}, expected {value!r}"
    assert abs(got["adapter.lora.alpha"] - float(alpha)) < 1e-5, f"adapter.lora.alpha = {got['adapter.lora.alpha']}, expected {alpha}"
    heads, kv = int(base.fields["llama.attention.head_count"].contents()), int(base.fields["llama.attention.head_count_kv"].contents())
    base_shapes = {t.name: [int(d) for d in reversed(t.shape)] for t in base.tensors}
    adapter = load(f"{adapter_dir}/adapter_model.safetensors")
    tensors = {t.name: t for t in out.tensors}
    pairs = 0
    for name in sorted(n[: -len(".lora_a")] for n in tensors if n.endswith(".lora_a")):
        a, b = dense(tensors[name + ".lora_a"]), dense(tensors[name + ".lora_b"])
        rows, cols = base_shapes[name]
        assert a.shape[1] == cols and b.shape[0] == rows and a.shape[0] == b.shape[1], f"{name}: lora shapes {a.shape} {b.shape} do not fit {rows}x{cols}"
        peft = f"base_model.model.{hf_name(name)[: -len('.weight')]}"
        want_b = adapter[f"{peft}.lora_B.weight"]
        if name.endswith("attn_q.weight"):
            want_b = permute(want_b, heads)
        elif name.endswith("attn_k.weight"):
            want_b = permute(want_b, kv)
        assert np.array_equal(a, adapter[f"{peft}.lora_A.weight"]), f"{name}.lora_a differs from the adapter's A"
        assert np.array_equal(b, want_b), f"{name}.lora_b differs from the adapter's B (rows permuted for q and k)"
        pairs += 1
    assert pairs == sum(1 for k in adapter if k.endswith("lora_A.weight")), "not every adapted weight is in the file"
    return {"pairs": pairs}


if __name__ == "__main__":
    kind, *args = sys.argv[1:]
    if kind == "model":
        print(json.dumps(check_model(*args[:5], args[5] if len(args) > 5 else None)))
    else:
        print(json.dumps(check_adapter(*args)))
