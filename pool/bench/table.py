#!/usr/bin/env python3
"""Turns tether-bench-pool JSON (with repetitions) into the pool/README.md table."""
import json
import sys

data = json.load(open(sys.argv[1]))
rows = {}
for bench in data["benchmarks"]:
    if bench.get("aggregate_name") != "median":
        continue
    parts = bench["run_name"].split("/")
    family, size = parts[0], int(parts[1])
    threads = parts[2].split(":")[1] if len(parts) > 2 else "1"
    rows.setdefault((size, threads), {})[family] = bench["cpu_time"]

print("| size | threads | pool (ns) | glibc (ns) | mimalloc (ns) | mmap+mlock (ns) | pool / glibc | mmap+mlock / pool |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for (size, threads), row in sorted(rows.items()):
    pool, libc = row.get("pool_alloc_free"), row.get("malloc_free")
    mimalloc, mlock = row.get("mimalloc_free"), row.get("mmap_mlock_per_buffer")
    cell = lambda v: f"{v:.1f}" if v else "-"
    ratio = f"{mlock / pool:.0f}x" if mlock and pool else "-"
    print(f"| {size} | {threads} | {cell(pool)} | {cell(libc)} | {cell(mimalloc)} | {cell(mlock)} | "
          f"{pool / libc:.2f} | {ratio} |")
