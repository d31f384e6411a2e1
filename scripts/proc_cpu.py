"""CPU seconds (user + system) of processes, from /proc/PID/stat: the one reader the bench
scripts share.

    python3 scripts/proc_cpu.py total PID...       the given processes' seconds, all threads
    python3 scripts/proc_cpu.py kinds OUT PID...   JSON to OUT: the given processes' threads by
        name (a trailing number dropped: roomcast-io-0 and -1 are roomcast-io), every process whose
        parent is one of them (the postmaster's: PostgreSQL's backends) as "postgres", and the
        machine's idle seconds (/proc/stat: idle + iowait of every CPU) as "_idle"
"""
import json
import os
import re
import sys

TCK = os.sysconf("SC_CLK_TCK")


def stat(path):
    """(name, ppid, utime + stime in seconds) of a /proc stat file, or None if it is gone."""
    try:
        s = open(path).read()
    except OSError:
        return None
    # The name is in parentheses and may itself hold spaces and parentheses: split after the last.
    f = s[s.rindex(")") + 2:].split()
    return s[s.index("(") + 1:s.rindex(")")], f[1], (int(f[11]) + int(f[12])) / TCK


def total(pids):
    """The processes' seconds; a process that is gone is an error (its time would be lost)."""
    seconds = 0.0
    for p in pids:
        st = stat(f"/proc/{p}/stat")
        if st is None:
            sys.exit(f"proc_cpu: process {p} is gone")
        seconds += st[2]
    return seconds


def kinds(pids):
    pids = set(pids)
    out = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        st = stat(f"/proc/{d}/stat")
        if st is None:
            continue
        if d in pids:
            for t in os.listdir(f"/proc/{d}/task"):
                ts = stat(f"/proc/{d}/task/{t}/stat")
                if ts:
                    k = re.sub(r"[-_]?\d+$", "", ts[0])
                    out[k] = out.get(k, 0) + ts[2]
        elif st[1] in pids:
            out["postgres"] = out.get("postgres", 0) + st[2]
    f = open("/proc/stat").readline().split()
    out["_idle"] = (int(f[4]) + int(f[5])) / TCK
    return out


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "total":
        print(total(sys.argv[2:]))
    elif len(sys.argv) >= 3 and sys.argv[1] == "kinds":
        json.dump(kinds(sys.argv[3:]), open(sys.argv[2], "w"))
    else:
        sys.exit(__doc__)
