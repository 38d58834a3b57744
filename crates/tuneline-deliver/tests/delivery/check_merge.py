"""The merge computed independently: the base dequantized with gguf-py, the
PEFT adapter read with numpy, W + alpha/r * B @ A in Hugging Face's layout,
compared tensor by tensor with tuneline's merged model.safetensors.

usage: check_merge.py BASE.gguf ADAPTER_DIR MERGED_DIR"""
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize

from safetensors_np import load

base_path, adapter_dir, merged_dir = sys.argv[1:4]
reader = GGUFReader(base_path)
heads = int(reader.fields["llama.attention.head_count"].contents())
kv_heads = int(reader.fields["llama.attention.head_count_kv"].contents())
base = {t.name: dequantize(t.data, t.tensor_type).reshape([int(d) for d in reversed(t.shape)]).astype(np.float32) for t in reader.tensors}


def unpermute(w, n):
    rows, cols = w.shape
    return w.reshape(n, rows // n // 2, 2, cols).swapaxes(1, 2).reshape(rows, cols)


config = json.load(open(f"{adapter_dir}/adapter_config.json"))
scale = config["lora_alpha"] / (config["r"] ** 0.5 if config.get("use_rslora") else config["r"])
adapter = load(f"{adapter_dir}/adapter_model.safetensors")
merged = load(f"{merged_dir}/model.safetensors")

GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
        "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}
expected = {"model.embed_tokens.weight": base["token_embd.weight"], "model.norm.weight": base["output_norm.weight"]}
layers = int(reader.fields["llama.block_count"].contents())
for i in range(layers):
    expected[f"model.layers.{i}.input_layernorm.weight"] = base[f"blk.{i}.attn_norm.weight"]
    expected[f"model.layers.{i}.post_attention_layernorm.weight"] = base[f"blk.{i}.ffn_norm.weight"]
    for hf, g in GGUF.items():
        w = base[f"blk.{i}.{g}.weight"]
        if g == "attn_q":
            w = unpermute(w, heads)
        elif g == "attn_k":
            w = unpermute(w, kv_heads)
        a = adapter.get(f"base_model.model.model.layers.{i}.{hf}.lora_A.weight")
        b = adapter.get(f"base_model.model.model.layers.{i}.{hf}.lora_B.weight")
        if a is not None:
            w = w + scale * (b.astype(np.float64) @ a.astype(np.float64)).astype(np.float32)
        expected[f"model.layers.{i}.{hf}.weight"] = w

assert sorted(expected) == sorted(merged), f"tensor names differ: {set(expected) ^ set(merged)}"
worst = 0.0
for name, want in expected.items():
    got = merged[name]
    assert got.shape == want.shape, f"{name}: shape {got.shape}, expected {want.shape}"
    err = float(np.max(np.abs(got - want)))
    worst = max(worst, err)
    assert err <= 2e-6, f"{name}: differs by {err}"
print(json.dumps({"tensors": len(expected), "max_abs_diff": worst}))
