"""Quality by source length: buckets of lengths, a score per bucket, and the table printed after an evaluation.

Bahdanau et al. (2015, figure 2) and Cho et al. (2014) show a plain
encoder-decoder falling as sentences grow longer and attention holding;
these scores let a run show that on its own data.
"""

import bisect

DEFAULT_EDGES = (5, 10, 15, 20, 30)


def bucket_labels(edges):
    """`[5, 10, 30]` -> `["1-5", "6-10", "11-30", "31+"]`: each edge closes a bucket; the last is open."""
    labels, low = [], 1
    for edge in edges:
        labels.append(f"{low}-{edge}" if edge > low else str(edge))
        low = edge + 1
    return labels + [f"{low}+"]


def scores_by_length(lengths, edges, score, unit):
    """Scores of each length bucket: `score(indices)` on the examples whose `lengths` fall in it.

    Returns `{"unit": unit, "edges": [...], "buckets": [{"bucket": "1-5",
    "count": n, **score(indices)}, ...]}`, every bucket listed in order; an
    empty one has its count (0) and no scores. A length of 0 falls in the
    first bucket.
    """
    members = [[] for _ in range(len(edges) + 1)]
    for index, length in enumerate(lengths):
        members[bisect.bisect_left(edges, length)].append(index)
    buckets = []
    for label, indices in zip(bucket_labels(edges), members):
        buckets.append({"bucket": label, "count": len(indices), **(score(indices) if indices else {})})
    return {"unit": unit, "edges": list(edges), "buckets": buckets}


def by_length_scalars(by_length):
    """`{"1-5": {"bleu": 30.1, "count": 812}, ...}` for TensorBoard (nested names become `by_length/1-5/bleu`)."""
    return {entry["bucket"]: {k: v for k, v in entry.items() if k != "bucket"} for entry in by_length["buckets"]}


def report_lines(by_length, names):
    """The console table: a row per bucket with its count and the `names` scores ('-' where it is empty)."""
    widths = [max(8, len(name)) for name in names]
    header = f"  {by_length['unit']:>14} {'count':>7}" + "".join(f" {n:>{w}}" for n, w in zip(names, widths))
    lines = [f"By source length ({by_length['unit']}):", header]
    for entry in by_length["buckets"]:
        cells = "".join(
            f" {entry[name]:>{width}.4g}" if name in entry else f" {'-':>{width}}" for name, width in zip(names, widths)
        )
        lines.append(f"  {entry['bucket']:>14} {entry['count']:>7}" + cells)
    return lines
