"""datatrove's MinHash dedup stages (signature, buckets, cluster) with its
default config (5-grams, 14 buckets x 8 hashes, 64-bit xxhash) on the texts
that `near_dedup export` wrote, with 2 tasks and 2 workers. Writes the
clusters of two or more ids as JSON, for bench/near_dedup.sh to compare.

Usage: python datatrove_minhash.py TEXTS.jsonl WORKDIR CLUSTERS.json
"""
import json
import os
import struct
import sys
from collections import defaultdict

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (
    MinhashConfig,
    MinhashDedupBuckets,
    MinhashDedupCluster,
    MinhashDedupSignature,
)
from datatrove.pipeline.readers import JsonlReader


def main():
    texts, work, out = sys.argv[1:4]
    shards = 2
    lines = open(texts).read().splitlines()
    per = (len(lines) + shards - 1) // shards
    os.makedirs(f"{work}/in", exist_ok=True)
    for s in range(shards):
        with open(f"{work}/in/{s:02d}.jsonl", "w") as f:
            f.write("\n".join(lines[s * per:(s + 1) * per]) + "\n")

    config = MinhashConfig()
    # Run logs go to the scratch folder, not to the working directory.
    quiet = dict(logging_dir=f"{work}/logs", skip_completed=False)
    LocalPipelineExecutor(
        pipeline=[JsonlReader(f"{work}/in", text_key="text", id_key="id"), MinhashDedupSignature(f"{work}/sigs", config=config)],
        tasks=shards, workers=2, **quiet,
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(f"{work}/sigs", f"{work}/buckets", config=config)],
        tasks=config.num_buckets, workers=2, **quiet,
    ).run()
    LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(f"{work}/buckets", f"{work}/clusters", config=config, save_cluster_id=True)],
        tasks=1, workers=1, **quiet,
    ).run()

    clusters = defaultdict(list)
    for name in sorted(os.listdir(f"{work}/clusters")) if os.path.isdir(f"{work}/clusters") else []:
        if not name.endswith(".clusters"):
            continue
        shard = int(name.split(".")[0])
        data = open(f"{work}/clusters/{name}", "rb").read()
        for doc, cluster in struct.iter_unpack("<II", data):
            clusters[cluster].append(shard * per + doc)
    result = sorted(sorted(c) for c in clusters.values() if len(c) > 1)
    json.dump(result, open(out, "w"))
    print(f"datatrove: {len(lines)} texts, {len(result)} clusters")


# Workers are started by a fork server that imports this file: only the parent runs main().
if __name__ == "__main__":
    main()
