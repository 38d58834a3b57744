"""A ~0.5B model in the shape of a real one, random weights in bf16
safetensors (as the real ones ship), and the tokenizer files of the Hugging
Face directory TOKENIZER_DIR (SmolLM2's ids all fall inside each vocabulary).
Prints its parameter count. Usage: python family_shaped.py SHAPE OUT_DIR TOKENIZER_DIR

Shapes, from each model's config.json:
  qwen2.5-0.5b  896 hidden, 24 layers, 14 heads, 2 KV heads, 4864 intermediate,
                151,936 vocabulary, tied embeddings (494M parameters)
  qwen3-0.6b    1024 hidden, 28 layers, 16 heads of 128 (wider than hidden),
                8 KV heads, 3072 intermediate, q/k norms, 151,936 vocabulary,
                tied embeddings (596M parameters)
  gemma-3-1b-8l Gemma 3 1B's layers, 8 of its 26 (five sliding, one global,
                two sliding): 1152 hidden, 4 heads of 256, 1 KV head, 6912
                intermediate, (1+w) pre- and post-norms, GeGLU, 262,144
                vocabulary, tied embeddings (516M parameters)"""

import json
import shutil
import sys
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM

SHAPES = {
    "qwen2.5-0.5b": dict(
        model_type="qwen2", hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
        num_attention_heads=14, num_key_value_heads=2, rope_theta=1000000.0,
    ),
    "qwen3-0.6b": dict(
        model_type="qwen3", hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, rope_theta=1000000.0,
    ),
    "gemma-3-1b-8l": dict(
        model_type="gemma3_text", hidden_size=1152, intermediate_size=6912, num_hidden_layers=8,
        num_attention_heads=4, num_key_value_heads=1, head_dim=256, query_pre_attn_scalar=256,
        sliding_window=512, vocab_size=262144, rope_theta=1000000.0, rope_local_base_freq=10000.0,
    ),
}

shape, out, tokenizer = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
torch.manual_seed(0)
kwargs = dict(SHAPES[shape])
defaults = dict(
    vocab_size=151936, max_position_embeddings=32768, rms_norm_eps=1e-6,
    tie_word_embeddings=True, bos_token_id=1, eos_token_id=2,
)
config = AutoConfig.for_model(kwargs.pop("model_type"), **{**defaults, **kwargs})
model = AutoModelForCausalLM.from_config(config).to(torch.bfloat16)
model.save_pretrained(out, safe_serialization=True)
for f in tokenizer.iterdir():
    if f.name != "config.json" and not f.name.startswith("model") and f.is_file():
        shutil.copy(f, out / f.name)
if config.model_type == "gemma3_text":
    # Gemma's tokenizer has a token for every row of its embedding, and
    # llama.cpp's converter trims a Gemma embedding to the tokenizer's
    # tokens: unused tokens fill the vocabulary, as Gemma's <unusedN> do.
    path = out / "tokenizer.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    vocab = data["model"]["vocab"]
    for i in range(len(vocab), config.vocab_size):
        vocab[f"<unused{i}>"] = i
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
print(sum(p.numel() for p in model.parameters()))
