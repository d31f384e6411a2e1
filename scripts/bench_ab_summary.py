"""Summary of a scripts/bench-ab.sh run: the figures each benchmark's log reports, per build.

    python3 scripts/bench_ab_summary.py LOGDIR

For each figure: A's runs and B's runs in order, their medians, B/A of the medians, B/A of each
pair (round i of B against round i of A), and whether the two builds' ranges overlap. "Higher
is better" figures (rates) and "lower is better" ones (latency, CPU) are both given as B/A.
"""
import glob
import os
import re
import statistics
import sys

NUM = r"([0-9][0-9,]*\.?[0-9]*)"


def f(s):
    return float(s.replace(",", ""))


def fanout(text):
    out = {}
    for m in re.finditer(r"bench-fanout: throughput-(p\d+) subscribers=\d+: roomcast " + NUM + r" msg/s, nchan " + NUM
                         + r" msg/s, ratio " + NUM + "x", text):
        p = m.group(1)
        out[f"fanout {p} roomcast msg/s"] = f(m.group(2))
        out[f"fanout {p} nchan msg/s"] = f(m.group(3))
        out[f"fanout {p} roomcast/nchan"] = f(m.group(4))
    for m in re.finditer(r"bench-fanout: throughput-(p\d+) roomcast: .*? publish phase alone " + NUM + r" CPU-s = " + NUM + " per million",
                         text):
        out[f"fanout {m.group(1)} roomcast CPU-s/M deliveries (publish)"] = f(m.group(3))
    for m in re.finditer(r"bench-fanout: (latency-\d+-\d+) \d+ pub/s (roomcast|nchan): delivered " + NUM + r" msg/s p50=" + NUM
                         + r" ms p99=" + NUM + " ms", text):
        out[f"fanout {m.group(1)} {m.group(2)} p99 ms"] = f(m.group(5))
    errors = [int(x) for x in re.findall(r"\[roomcast [^\]]+\] fanout: .*? publish_errors=(\d+)", text)]
    if errors:
        out["fanout roomcast publish errors (all cases)"] = float(sum(errors))
    return out


def chat(text):
    out = {}
    for m in re.finditer(r"^  (\S.*?\S)\s+" + NUM + r" commands/s\s+" + NUM + " ns/command", text, re.M):
        out[f"chat {m.group(1)} /s"] = f(m.group(2))
    return out


def http(text):
    out = {}
    m = re.search(r"bench-http: roomcast median " + NUM + " req/s", text)
    if m:
        out["http roomcast median req/s"] = f(m.group(1))
    m = re.search(r"bench-http: nginx\s+median " + NUM + " req/s", text)
    if m:
        out["http nginx median req/s"] = f(m.group(1))
    m = re.search(r"ratio roomcast/nginx = " + NUM + r"x .*CPU per request roomcast/nginx = " + NUM + "x", text)
    if m:
        out["http roomcast/nginx"] = f(m.group(1))
        out["http CPU per request roomcast/nginx"] = f(m.group(2))
    m = re.search(r"per-round ratios .*; median " + NUM + "x", text)
    if m:
        out["http median per-round ratio"] = f(m.group(1))
    return out


def cluster(text):
    out = {}
    m = re.search(r"^acknowledged writes/s\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM + "x", text, re.M)
    if m:
        out["cluster writes/s single"] = f(m.group(1))
        out["cluster writes/s cluster"] = f(m.group(2))
        out["cluster writes cluster/single"] = f(m.group(3))
    m = re.search(r"^  single node with --durability full\s+" + NUM, text, re.M)
    if m:
        out["cluster writes/s single --durability full"] = f(m.group(1))
    labels = []
    for m in re.finditer(r"^fan-out delivered msg/s, [0-9,]+ subs, (P=\d+|4x16 pipelined)\s+" + NUM + r"\s+" + NUM + r"\s+" + NUM + "x", text, re.M):
        k = m.group(1)
        labels.append(k)
        out[f"cluster fan-out {k} single msg/s"] = f(m.group(2))
        out[f"cluster fan-out {k} cluster msg/s"] = f(m.group(3))
        out[f"cluster fan-out {k} cluster/single"] = f(m.group(4))
    for k, m in zip(labels, re.finditer(r"^  server CPU s per million deliveries\s+" + NUM + r"\s+" + NUM, text, re.M)):
        out[f"cluster fan-out {k} single CPU-s/M"] = f(m.group(1))
    for m in re.finditer(r"^  (single|cluster): [0-9.]+ CPU s in [0-9.]+ s = [0-9.]+ cores, (\d+) us per acknowledged write", text, re.M):
        out[f"cluster server CPU us/write {m.group(1)}"] = f(m.group(2))
    errors = re.search(r"^  publish errors\s+(\S+)\s+(\S+)", text, re.M)
    if errors:
        out["cluster write publish errors single"] = float(errors.group(1)) if errors.group(1) != "nan" else float("nan")
    return out


PARSERS = {"fanout": fanout, "chat": chat, "http": http, "cluster": cluster}


def main(d):
    figures = {}  # (bench, figure) -> {"A": [...], "B": [...]}
    loads = {}
    for path in sorted(glob.glob(os.path.join(d, "*.log"))):
        bench, which, rnd = os.path.basename(path)[:-4].rsplit("-", 2)
        text = open(path).read()
        lb = re.search(r"^# load before: (\S+)", text, re.M)
        la = re.search(r"^# load after: (\S+)", text, re.M)
        loads.setdefault(bench, []).append(f"{which}{rnd} {lb.group(1) if lb else '?'}->{la.group(1) if la else '?'}")
        for k, v in PARSERS[bench](text).items():
            figures.setdefault((bench, k), {"A": {}, "B": {}})[which][int(rnd)] = v
    for bench in PARSERS:
        rows = [(k, v) for (b, k), v in figures.items() if b == bench]
        if not rows:
            continue
        print(f"\n== {bench} (1-minute load average before->after each run: {', '.join(loads.get(bench, []))})")
        for k, v in sorted(rows):
            a = [v["A"][r] for r in sorted(v["A"])]
            b = [v["B"][r] for r in sorted(v["B"])]
            if not a or not b:
                print(f"  {k}: A {a} B {b}")
                continue
            ma, mb = statistics.median(a), statistics.median(b)
            ratio = mb / ma if ma else float("nan")
            pairs = [v["B"][r] / v["A"][r] for r in sorted(v["A"]) if r in v["B"] and v["A"][r]]
            overlap = max(min(a), min(b)) <= min(max(a), max(b))
            fmt = lambda x: f"{x:,.2f}" if abs(x) < 100 else f"{x:,.0f}"
            print(f"  {k}: A {' '.join(fmt(x) for x in a)} | B {' '.join(fmt(x) for x in b)} | median B/A {ratio:.2f}"
                  f" | pairs {' '.join(f'{p:.2f}' for p in pairs)} | ranges {'overlap' if overlap else 'DISJOINT'}")


if __name__ == "__main__":
    main(sys.argv[1])
