"""Scores (prediction, reference) pairs with rouge-score and sacrebleu.

usage: scores.py PAIRS.jsonl -> {"rouge_l": [...], "bleu": [...], "corpus_bleu": x}"""
import json
import sys

import sacrebleu
from rouge_score import rouge_scorer

pairs = [json.loads(line) for line in open(sys.argv[1], encoding="utf-8")]
scorer = rouge_scorer.RougeScorer(["rougeL"])
rouge = [scorer.score(r, p)["rougeL"].fmeasure for p, r in pairs]
bleu = [sacrebleu.corpus_bleu([p], [[r]]).score for p, r in pairs]
corpus = sacrebleu.corpus_bleu([p for p, _ in pairs], [[r for _, r in pairs]]).score
print(json.dumps({"rouge_l": rouge, "bleu": bleu, "corpus_bleu": corpus, "sacrebleu": sacrebleu.__version__}))
