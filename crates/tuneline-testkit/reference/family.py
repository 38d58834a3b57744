"""Builds a small random model of FAMILY with the pinned transformers, in the
layout of the family's real configuration (head_dim, norms, RoPE, tying)
shrunk to two layers (Gemma 3: six), and saves it with the tokenizer in
TOKENIZER into OUT; Gemma 3 gets a tokenizer of its own kind instead, a
SentencePiece BPE with byte fallback trained on the start of SHAREGPT.
Then writes what transformers and PEFT compute with it: OUT/reference.json
(the token ids of the cases and of TEXT, greedy ids, the LoRA loss,
versions) and OUT/reference.safetensors (logits and the LoRA gradients, by
PEFT name), with the adapter in OUT/adapter.
Usage: python family.py FAMILY TOKENIZER SHAREGPT OUT"""

import io
import json
import os
import re
import sys

import peft
import sentencepiece
import torch
import transformers
from safetensors.torch import save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GemmaTokenizer

# The MLP is 256 wide so that ffn_down is k-quantized (llama.cpp falls back
# to 32-wide blocks on rows not a multiple of 256).
SMALL = dict(
    hidden_size=64,
    intermediate_size=256,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    initializer_range=0.1,
)
FAMILIES = {
    # Qwen3-0.6B: heads wider than hidden / heads (head_dim 128 of hidden
    # 1024 with 16 heads), q/k norms, base 1e6, tied embeddings.
    "qwen3": dict(
        model_type="qwen3", head_dim=32, rms_norm_eps=1e-6, rope_theta=1e6,
        tie_word_embeddings=True, max_position_embeddings=40960,
    ),
    # Llama 3.2-1B: the llama3 rotary scaling (factor 32, original context
    # 8192), base 5e5. Untied here, as Llama 3.1-8B is.
    "llama3": dict(
        model_type="llama", head_dim=16, rms_norm_eps=1e-5, tie_word_embeddings=False,
        max_position_embeddings=131072,
        rope_parameters=dict(
            rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0,
            high_freq_factor=4.0, original_max_position_embeddings=8192,
        ),
    ),
    # Gemma 3 (4B and up): heads 256 wide of a smaller hidden size, the
    # query scaled by query_pre_attn_scalar (its head width, as llama.cpp
    # assumes), five sliding layers with base 10000 before each global one
    # with base 1e6 and the linear scaling 8, (1+w) norms before and after
    # attention and MLP, GeGLU, tied embeddings. Six layers make one period;
    # the window is short so that the tests see it.
    "gemma3": dict(
        model_type="gemma3_text", head_dim=32, query_pre_attn_scalar=32, rms_norm_eps=1e-6,
        sliding_window=16, num_hidden_layers=6, layer_types=["sliding_attention"] * 5 + ["full_attention"],
        tie_word_embeddings=True, max_position_embeddings=131072,
        rope_parameters={
            "full_attention": dict(rope_type="linear", factor=8.0, rope_theta=1e6),
            "sliding_attention": dict(rope_type="default", rope_theta=1e4),
        },
    ),
    # Phi-4 (14B): Phi-3's fused qkv_proj and gate_up_proj, grouped heads
    # (40 of 10 key/value heads), base 250000, an original context equal to
    # its 16384, no sliding window, untied.
    "phi4": dict(
        model_type="phi3", rms_norm_eps=1e-5, rope_theta=250000.0, tie_word_embeddings=False,
        max_position_embeddings=16384, original_max_position_embeddings=16384,
        sliding_window=None,
    ),
}
LOGIT_CASES = [[1, 9690, 198, 2683, 359, 253, 5356, 30, 2, 198, 1, 520], [42, 7, 3000, 12, 9, 48000]]
LORA_IDS = [1, 9690, 198, 2683, 359, 253, 5356, 30, 2, 198, 1, 520, 9531, 198, 57, 1107]
LORA_LABELS = [-100] * 10 + LORA_IDS[10:]
# What tokenizers disagree on: spaces, digits, case, scripts, emoji, bytes.
TEXT = "Hello World! it's 3.14 \n\n  Ünïcödé 你好 🚀 <start_of_turn>user\nHi <end_of_turn> x"
# Every linear layer, by the family's module names.
MODULES = {
    "phi4": ["qkv_proj", "o_proj", "gate_up_proj", "down_proj"],
}.get(sys.argv[1], ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])



def gemma_tokenizer(sharegpt, out):
    """Gemma's kind of tokenizer, 4,096 pieces: a SentencePiece BPE with byte
    fallback, no space prefix, split digits, Gemma's special tokens and ids,
    trained on the conversations in the first 3 MB of SHAREGPT; converted by
    transformers, with tokenizer.model beside it, and the added tokens
    listed in tokenizer_config.json as Gemma's Hub repositories list them."""
    head = open(sharegpt, encoding="utf-8", errors="ignore").read(3_000_000)
    texts = [json.loads(m) for m in re.findall(r'"value": ("(?:[^"\\]|\\.)*")', head)]
    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(texts), model_writer=model, vocab_size=4096, model_type="bpe",
        byte_fallback=True, pad_id=0, eos_id=1, bos_id=2, unk_id=3, pad_piece="<pad>",
        eos_piece="<eos>", bos_piece="<bos>", unk_piece="<unk>",
        user_defined_symbols=["<mask>", "<start_of_turn>", "<end_of_turn>"],
        add_dummy_prefix=False, split_digits=True, allow_whitespace_only_pieces=True,
        remove_extra_whitespaces=False, normalization_rule_name="identity",
        max_sentence_length=100000, num_threads=1, minloglevel=2,
    )
    os.makedirs(out, exist_ok=True)
    with open(f"{out}/tokenizer.model", "wb") as f:
        f.write(model.getvalue())
    tokenizer = GemmaTokenizer.from_pretrained(out)
    tokenizer.save_pretrained(out)
    with open(f"{out}/tokenizer_config.json") as f:
        config = json.load(f)
    # Gemma's Hub configs add BOS; here the chat template's `<bos>` gives
    # it, so that llama-completion, given the rendered prompt, adds no second.
    config["add_bos_token"], config["add_eos_token"] = False, False
    config["added_tokens_decoder"] = {
        str(i): {"content": t.content, "special": True} for i, t in tokenizer.added_tokens_decoder.items()
    }
    with open(f"{out}/tokenizer_config.json", "w") as f:
        json.dump(config, f, indent=2)
    return tokenizer


family, tokenizer_dir, sharegpt, out = sys.argv[1:5]
torch.manual_seed(1)
if family == "gemma3":
    tokenizer = gemma_tokenizer(sharegpt, out)
else:
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
# Ids beyond a smaller vocabulary wrap into it.
LOGIT_CASES = [[i % len(tokenizer) for i in case] for case in LOGIT_CASES]
LORA_IDS = [i % len(tokenizer) for i in LORA_IDS]
LORA_LABELS = [-100] * 10 + LORA_IDS[10:]
shape = dict(FAMILIES[family])
config = AutoConfig.for_model(shape.pop("model_type"), vocab_size=len(tokenizer), **{**SMALL, **shape})
model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
with torch.no_grad():
    # Norm weights start at one; move them so that a norm read wrongly shows.
    for name, p in model.named_parameters():
        if "norm" in name:
            p.add_(torch.randn_like(p) * 0.2)
model.save_pretrained(out)
if family != "gemma3":
    tokenizer.save_pretrained(out)
if family == "phi4":
    # Phi-4's tokenizer_config.json names GPT2Tokenizer, which is how
    # llama.cpp's converter tells its byte-level BPE from Phi-3's SentencePiece.
    with open(f"{out}/tokenizer_config.json") as f:
        tokenizer_config = json.load(f)
    tokenizer_config["tokenizer_class"] = "GPT2Tokenizer"
    with open(f"{out}/tokenizer_config.json", "w") as f:
        json.dump(tokenizer_config, f, indent=2)

tensors, report = {}, {"transformers": transformers.__version__, "peft": peft.__version__}
report["cases"] = LOGIT_CASES
report["text"] = {"text": TEXT, "ids": tokenizer(TEXT, add_special_tokens=False)["input_ids"]}
with torch.no_grad():
    for i, ids in enumerate(LOGIT_CASES):
        tensors[f"logits.{i}"] = model(torch.tensor([ids])).logits[0].contiguous()
    prompt = torch.tensor([LOGIT_CASES[0]])
    generated = model.generate(
        prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=12, do_sample=False,
        eos_token_id=None, pad_token_id=0,
    )
    report["greedy"] = generated[0, prompt.shape[1]:].tolist()

lora = peft.get_peft_model(
    model, peft.LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=MODULES)
)
with torch.no_grad():
    # B starts at zero, where the gradient of A vanishes: move B away first.
    for name, p in lora.named_parameters():
        if "lora_B" in name:
            p.copy_(torch.randn_like(p) * 0.1)
lora.save_pretrained(f"{out}/adapter")
loss = lora(input_ids=torch.tensor([LORA_IDS]), labels=torch.tensor([LORA_LABELS])).loss
loss.backward()
report["lora"] = {"ids": LORA_IDS, "labels": LORA_LABELS, "loss": loss.item()}
for name, p in lora.named_parameters():
    if p.requires_grad:
        # PEFT's names within one adapter, as adapter_model.safetensors has them.
        tensors[f"grad.{name.replace('.default', '')}"] = p.grad.contiguous()
save_file(tensors, f"{out}/reference.safetensors")
json.dump(report, open(f"{out}/reference.json", "w"))
