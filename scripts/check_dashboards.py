"""OP-4: every metric name the Grafana dashboard and the Prometheus alert rules query is one the
roomcast binary exports.

    python3 scripts/check_dashboards.py METRICS_TEXT docker/grafana-dashboard.json docker/prometheus-alerts.yaml

METRICS_TEXT is a scrape of GET /metrics (Prometheus text format). The expressions are the
dashboard's panel targets and template queries, and the rules' `expr:` lines. A name is an
identifier of a PromQL expression once strings, label matchers, range selectors, Grafana
variables and the label lists of by/without/on/ignoring are taken out and function names and
keywords are set aside. `up` and `scrape_*` are Prometheus's own series.
"""
import json
import re
import sys

KEYWORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or", "unless", "offset",
    "inf", "nan", "le", "atan2",
}
PROMETHEUS_OWN = re.compile(r"^(up|scrape_[a-z_]+)$")


def exported(text):
    names = set()
    for line in text.splitlines():
        if line.startswith("# TYPE "):
            names.add(line.split()[2])
        elif line and not line.startswith("#"):
            names.add(re.split(r"[{ ]", line, 1)[0])
    return names


def names_in(expr):
    e = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # strings
    e = re.sub(r"\{[^}]*\}", "", e)                        # label matchers
    e = re.sub(r"\[[^\]]*\]", "", e)                       # ranges and subqueries
    e = re.sub(r"\$\{?\w+\}?", "", e)                      # Grafana variables
    e = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", e)
    e = re.sub(r"label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,[^)]*\)", r"\1", e)
    found = set()
    for m in re.finditer(r"(?<![\w.])([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?", e):
        name, call = m.group(1), m.group(2)
        if call or name.lower() in KEYWORDS:
            continue
        found.add(name)
    return found


def dashboard_expressions(path):
    board = json.load(open(path))
    exprs = []

    def walk(panels):
        for p in panels:
            for t in p.get("targets", []):
                if "expr" in t:
                    exprs.append(("panel " + repr(p.get("title")), t["expr"]))
            walk(p.get("panels", []))

    walk(board.get("panels", []))
    for v in board.get("templating", {}).get("list", []):
        q = v.get("query")
        if isinstance(q, dict):
            q = q.get("query")
        if v.get("type") == "query" and isinstance(q, str):
            exprs.append(("variable " + v.get("name", "?"), q))
    return exprs


def rule_expressions(path):
    exprs = []
    alert = "?"
    for line in open(path):
        m = re.match(r"\s*-?\s*alert:\s*(\S+)", line)
        if m:
            alert = m.group(1)
        m = re.match(r"\s*expr:\s*(.+?)\s*$", line)
        if m:
            exprs.append(("alert " + alert, m.group(1)))
    return exprs


def main():
    metrics_path, dashboard_path, rules_path = sys.argv[1:4]
    names = exported(open(metrics_path).read())
    if not names:
        print("no metrics in " + metrics_path)
        return 1
    problems = []
    used = set()
    checked = dashboard_expressions(dashboard_path) + rule_expressions(rules_path)
    for where, expr in checked:
        for name in sorted(names_in(expr)):
            used.add(name)
            if name not in names and not PROMETHEUS_OWN.match(name):
                problems.append("%s: %s is not exported by roomcast (expression: %s)" % (where, name, expr))
    if len(checked) < 10 or len(used) < 10:
        problems.append("only %d expressions naming %d metrics were found: is the parsing broken?" % (len(checked), len(used)))
    for p in problems:
        print(p)
    print("%d expressions, %d metric names, %d exported names: %s"
          % (len(checked), len(used), len(names), "FAILED" if problems else "ok"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
