"""The reference pipeline for bench/data_prepare.sh: what a user does with
Hugging Face `datasets` + `transformers` to get what `tuneline data prepare`
gives: recover the records of a truncated JSON array, normalize roles, clean
(NFC, control characters, empty turns, turn order), exact dedup, render with
the chat template, tokenize with assistant-only labels, drop over-long samples.
Uses num_proc=2. The tokenizer is SmolLM2's, exported to Hugging Face files
(transformers reads GGUF only with torch installed). Prints the sample count
and the wall time."""

import hashlib
import json
import sys
import time
import unicodedata

from datasets import Dataset
from transformers import AutoTokenizer

ROLES = {"human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant", "chatgpt": "assistant",
         "bing": "assistant", "bard": "assistant", "model": "assistant", "system": "system"}
MAX_LEN = 2048


def records(path):
    """Every complete record of a JSON array that may be cut short."""
    text = open(path, encoding="utf-8").read()
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    while True:
        while i < len(text) and text[i] in " \n\r\t,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return
        try:
            obj, i = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            return
        yield obj


def clean_text(s):
    s = unicodedata.normalize("NFC", s)
    return "".join(c for c in s if c in "\n\t" or unicodedata.category(c) != "Cc")


def normalize(example):
    turns = []
    for t in example["conversations"]:
        role = ROLES.get(t["from"])
        if role is None:
            return {"messages": []}
        content = clean_text(t["value"] or "")
        if content.strip():
            turns.append({"role": role, "content": content})
    body = [t for i, t in enumerate(turns) if t["role"] != "system" or i == 0]
    start = 1 if body and body[0]["role"] == "system" else 0
    while len(body) > start and body[start]["role"] == "assistant":
        body.pop(start)
    merged = []
    for t in body:
        if merged and merged[-1]["role"] == t["role"] and t["role"] != "system":
            merged[-1] = {"role": t["role"], "content": merged[-1]["content"] + "\n\n" + t["content"]}
        else:
            merged.append(t)
    if merged and merged[-1]["role"] == "user":
        merged.pop()
    if not any(t["role"] == "assistant" for t in merged):
        merged = []
    key = " ".join("\n".join(f'{t["role"]}: {t["content"]}' for t in merged).split()).lower()
    return {"messages": merged, "key": hashlib.sha256(key.encode()).hexdigest()}


def tokenize(example, tok):
    msgs = example["messages"]
    full = tok.apply_chat_template(msgs, tokenize=False)
    spans = []
    for i, m in enumerate(msgs):
        if m["role"] == "assistant":
            before = tok.apply_chat_template(msgs[:i], tokenize=False, add_generation_prompt=True)
            through = tok.apply_chat_template(msgs[: i + 1], tokenize=False)
            spans.append((len(before), len(through)))
    enc = tok(full, add_special_tokens=False, return_offsets_mapping=True)
    labels = [t if any(a <= s < b for a, b in spans) else -100 for t, (s, _) in zip(enc["input_ids"], enc["offset_mapping"])]
    return {"input_ids": enc["input_ids"], "labels": labels}


def main():
    path, tokenizer_dir = sys.argv[1], sys.argv[2]
    started = time.time()
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ds = Dataset.from_list(list(records(path)))
    ds = ds.map(normalize, num_proc=2, remove_columns=ds.column_names)
    ds = ds.filter(lambda e: len(e["messages"]) > 0, num_proc=2)
    seen = set()
    keep = []
    for i, k in enumerate(ds["key"]):
        if k not in seen:
            seen.add(k)
            keep.append(i)
    ds = ds.select(keep)
    ds = ds.map(tokenize, fn_kwargs={"tok": tok}, num_proc=2, remove_columns=ds.column_names)
    ds = ds.filter(lambda e: len(e["input_ids"]) <= MAX_LEN, num_proc=2)
    print(f"hf: {len(ds)} samples, {sum(len(x) for x in ds['input_ids'])} tokens in {time.time() - started:.1f} s")


if __name__ == "__main__":
    main()
