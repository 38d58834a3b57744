"""A ~0.5B model for the memory bench: Qwen2.5-0.5B's shape (896 hidden, 24
layers, 14 heads, 2 KV heads, 4864 intermediate, 151,936 vocabulary, tied
embeddings), random weights in bf16 safetensors (as Qwen2.5-0.5B ships), and the tokenizer files of
the Hugging Face directory TOKENIZER_DIR (SmolLM2's ids all fall inside the
vocabulary). Usage: python qwen_shaped.py OUT_DIR TOKENIZER_DIR"""

import shutil
import sys
from pathlib import Path

import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

out, tokenizer = Path(sys.argv[1]), Path(sys.argv[2])
torch.manual_seed(0)
config = Qwen2Config(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    max_position_embeddings=32768,
    rope_theta=1000000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
    bos_token_id=1,
    eos_token_id=2,
)
Qwen2ForCausalLM(config).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
for f in tokenizer.iterdir():
    if f.name != "config.json" and not f.name.startswith("model") and f.is_file():
        shutil.copy(f, out / f.name)
print(sum(p.numel() for p in Qwen2ForCausalLM(config).parameters()))
