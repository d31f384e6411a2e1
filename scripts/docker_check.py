"""Checks docker/Dockerfile and docker/compose.yaml against the roomcast binary they would run
(no Docker engine here): every option and environment variable they use is one `roomcast --help`
lists, the ports agree with ROOMCAST_PORT, the image is built with the same scripts CI runs, and
every library the binary links directly comes from a package the runtime image installs.

Prints the environment to start the binary with (Dockerfile ENV, then the compose service's
environment with ${VAR:-default} taken at its default), one NAME=VALUE per line, then
HEALTHCHECK=<command>.

    python docker_check.py Dockerfile compose.yaml help.txt needed.txt install-deps.sh
"""
import re
import shlex
import subprocess
import sys

import yaml

dockerfile, compose_path, help_path, needed_path, deps_path = sys.argv[1:6]
problems = []
help_text = open(help_path).read()
flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", help_text))
envs = set(re.findall(r"\b(ROOMCAST_[A-Z_]+)\b", help_text))

# Dockerfile: stages, the scripts, ENV, ENTRYPOINT, HEALTHCHECK, USER, EXPOSE.
lines = []
for raw in open(dockerfile).read().replace("\\\n", " ").splitlines():
    if raw.strip() and not raw.lstrip().startswith("#"):
        lines.append(raw.strip())
instr = [(l.split(None, 1)[0].upper(), l.split(None, 1)[1] if " " in l else "") for l in lines]
runs = " ".join(a for i, a in instr if i == "RUN")
for script in ("scripts/install-deps.sh build", "scripts/build-release.sh", "install-deps.sh runtime"):
    if script not in runs:
        problems.append(f"Dockerfile: no RUN of {script} (the image must use the scripts CI runs)")
froms = [a for i, a in instr if i == "FROM"]
if len(froms) != 2 or not froms[0].startswith("swift:") or "slim" not in froms[1]:
    problems.append(f"Dockerfile: expected a swift build stage and a slim runtime stage, got {froms}")
users = [a for i, a in instr if i == "USER"]
if not users or users[-1] in ("root", "0"):
    problems.append("Dockerfile: the runtime stage must run as a non-root USER")
env = {}
for i, a in instr:
    if i == "ENV":
        for pair in shlex.split(a):
            k, _, v = pair.partition("=")
            env[k] = v
entry = [a for i, a in instr if i == "ENTRYPOINT"]
if not entry or "/opt/roomcast/bin/roomcast" not in entry[-1]:
    problems.append("Dockerfile: ENTRYPOINT must be /opt/roomcast/bin/roomcast")
health = [a for i, a in instr if i == "HEALTHCHECK"]
health_cmd = health[-1].split("CMD", 1)[1].strip() if health and "CMD" in health[-1] else ""
if "/readyz" not in health_cmd:
    problems.append("Dockerfile: HEALTHCHECK must ask /readyz")
exposed = [a for i, a in instr if i == "EXPOSE"]

for k in env:
    if k.startswith("ROOMCAST_") and k not in envs:
        problems.append(f"Dockerfile: ENV {k} is not one roomcast reads")

# compose.yaml: its services' ports, commands and environment.
compose = yaml.safe_load(open(compose_path))
services = compose.get("services", {})
if "roomcast" not in services:
    problems.append("compose.yaml: no roomcast service")
for name, svc in services.items():
    senv = svc.get("environment", {})
    if isinstance(senv, list):
        senv = dict(item.split("=", 1) for item in senv)
    for k in senv:
        if k.startswith("ROOMCAST_") and k not in envs:
            problems.append(f"compose.yaml {name}: environment {k} is not one roomcast reads")
    command = svc.get("command", [])
    if isinstance(command, str):
        command = shlex.split(command)
    for word in command:
        if word.startswith("--") and word.split("=", 1)[0] not in flags:
            problems.append(f"compose.yaml {name}: option {word} is not one roomcast accepts")
    port = str(senv.get("ROOMCAST_PORT", env.get("ROOMCAST_PORT", "8080")))
    for mapping in svc.get("ports", []):
        container = str(mapping).split(":")[-1].split("/")[0]
        if container != port:
            problems.append(f"compose.yaml {name}: port {mapping} does not reach ROOMCAST_PORT {port}")
    if exposed and port not in exposed[-1].split():
        problems.append(f"compose.yaml {name}: ROOMCAST_PORT {port} is not the image's EXPOSE {exposed[-1]}")
    # The single node is what is started here; the cluster's nodes are checked for their settings.
    if name == "roomcast":
        for k, v in senv.items():
            m = re.fullmatch(r"\$\{(\w+):-(.*)\}", str(v))
            env[k] = m.group(2) if m else str(v)

# The cluster profile (CL-1): PostgreSQL 15 and nodes that each join it under their own id.
cluster_nodes = {n: s for n, s in services.items() if "cluster" in s.get("profiles", []) and s.get("image", "").startswith("roomcast")}
if not any("cluster" in s.get("profiles", []) and str(s.get("image", "")).startswith("postgres:15") for s in services.values()):
    problems.append("compose.yaml: the cluster profile has no postgres:15 service")
if len(cluster_nodes) < 3:
    problems.append(f"compose.yaml: the cluster profile has {len(cluster_nodes)} roomcast nodes, not three")
node_ids = []
for name, svc in cluster_nodes.items():
    senv = svc.get("environment", {})
    if not str(senv.get("ROOMCAST_CLUSTER", "")).startswith("postgres://"):
        problems.append(f"compose.yaml {name}: ROOMCAST_CLUSTER must be the postgres:// URL of the cluster's database")
    node_ids.append(senv.get("ROOMCAST_NODE_ID"))
    if "ROOMCAST_APPS" not in senv:
        problems.append(f"compose.yaml {name}: a cluster node needs ROOMCAST_APPS")
if len(set(node_ids)) != len(node_ids) or None in node_ids:
    problems.append(f"compose.yaml: cluster nodes need distinct ROOMCAST_NODE_IDs, got {node_ids}")

# Libraries the binary links directly: each from a package the runtime stage installs (or the base image's).
deps = open(deps_path).read()
runtime = set(re.search(r"runtime=\(([^)]*)\)", deps).group(1).split())
base = {"libc6", "libstdc++6", "libgcc-s1"}
def package_of(path):
    # Debian 12 merged /lib into /usr/lib: dpkg knows one of the two spellings.
    for candidate in (path, "/usr" + path if path.startswith("/lib") else path.replace("/usr", "", 1)):
        out = subprocess.run(["dpkg", "-S", candidate], capture_output=True, text=True).stdout
        if out:
            return out.split(":")[0]
    return ""


for path in filter(None, open(needed_path).read().split()):
    owner = package_of(path)
    if owner not in runtime | base:
        problems.append(f"the binary links {path} (package {owner or 'unknown'}), which the runtime image does not install")

if problems:
    for p in problems:
        print("docker-check: " + p, file=sys.stderr)
    sys.exit(1)
for k, v in env.items():
    print(f"{k}={v}")
print(f"HEALTHCHECK={health_cmd}")
