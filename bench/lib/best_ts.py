"""The best avg_ts of a test (pp512, tg128, …) over llama-bench-style JSON files (keel bench -o json
writes the same rows), for the bench/ scripts that alternate engines or models in rounds."""
import glob
import json
import os


def best_ts(out, pattern, test):
    """Highest avg_ts of `test` in the files of directory `out` matching `pattern`; None if none."""
    best = None
    for path in sorted(glob.glob(os.path.join(out, pattern))):
        try:
            rows = json.load(open(path))
        except ValueError:
            continue
        for row in rows:
            name = row.get("test") or (f"pp{row['n_prompt']}" if row.get("n_gen", 0) == 0
                                       else f"tg{row['n_gen']}")
            if name == test and (best is None or row["avg_ts"] > best):
                best = row["avg_ts"]
    return best
