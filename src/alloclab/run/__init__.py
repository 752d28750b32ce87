"""One run: its kind (kinds), what it starts (target), the one runner (execute.run), the data it
starts from (datasets, golden), turns (interleave), perf and uprobes (profiling), the node that
executes runs (node) and the machine check before any work (preflight).
"""
