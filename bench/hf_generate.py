"""transformers' greedy `generate` (KV cache on, CPU) over the prompts of a
tuneline eval, for bench/eval_generate.sh. Prints: tokens seconds tokens/s.

usage: hf_generate.py MERGED_DIR PREDICTIONS.jsonl MAX_NEW_TOKENS PASSES"""
import json
import os
import sys
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

model_dir, predictions, max_new, passes = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
torch.set_num_threads(os.cpu_count())
tokenizer = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
prompts = [json.loads(line)["prompt"] for line in open(predictions, encoding="utf-8")]
stop = [tokenizer.convert_tokens_to_ids(t) for t in ("<|im_end|>",) if t in tokenizer.get_vocab()] + [tokenizer.eos_token_id]
generated, started = 0, time.perf_counter()
with torch.inference_mode():
    for _ in range(passes):
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
            out = model.generate(ids, max_new_tokens=max_new, do_sample=False, eos_token_id=stop, pad_token_id=stop[0])
            generated += out.shape[1] - ids.shape[1]
seconds = time.perf_counter() - started
print(generated, f"{seconds:.2f}", f"{generated / seconds:.1f}")
