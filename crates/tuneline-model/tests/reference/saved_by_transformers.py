"""Saves the tokenizer in directory IN again with the pinned transformers,
into OUT, as transformers 5 writes it (the chat template in
chat_template.jinja), and prints, as JSON, what transformers makes of it:
its version, the files written, and for each conversation of CASES (a JSON
file) the rendered template and its token ids."""

import json
import os
import sys

import transformers
from transformers import AutoTokenizer

source, out, cases = sys.argv[1:4]
tokenizer = AutoTokenizer.from_pretrained(source)
tokenizer.save_pretrained(out)
tokenizer = AutoTokenizer.from_pretrained(out)
rendered = []
for case in json.load(open(cases)):
    text = tokenizer.apply_chat_template(
        case["messages"], tokenize=False, add_generation_prompt=case["add_generation_prompt"]
    )
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    rendered.append({"text": text, "ids": ids})
print(
    json.dumps(
        {"transformers": transformers.__version__, "files": sorted(os.listdir(out)), "cases": rendered}
    )
)
