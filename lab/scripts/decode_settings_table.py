"""decode_settings.py's JSON as a table: % of the copy ceiling per workload and setting (``*``: bits
differ from the shipped pins), then each setting's geomean speed against the first column and its
compiled kernels' registers and shared memory.
    python3 lab/scripts/decode_settings_table.py decode_settings.json
"""

import json
import math
import sys

with open(sys.argv[1]) as f:
    report = json.load(f)
rows = report["rows"]
workloads: list[str] = []
settings: list[str] = []
for row in rows:
    if row["workload"] not in workloads:
        workloads.append(row["workload"])
    if row["setting"] not in settings:
        settings.append(row["setting"])
cell = {(r["setting"], r["workload"]): r for r in rows if "ms" in r}
print("workload".ljust(26) + "".join(f"{i:>6}" for i in range(len(settings))))
for w in workloads:
    line = w.ljust(26)
    for s in settings:
        r = cell.get((s, w))
        line += "   err" if r is None else f"{r['of_copy'] * 100:5.1f}" + ("" if r["same_bits"] else "*")
    print(line)
for i, s in enumerate(settings):
    first = settings[0]
    speeds = [math.log(cell[(first, w)]["ms"] / cell[(s, w)]["ms"]) for w in workloads if (s, w) in cell]
    geomean = math.exp(sum(speeds) / len(speeds))
    print(i, s, f"geomean speed vs column 0: {geomean:.3f}", report["settings"].get(s, {}).get("registers"))
