# SPDX-License-Identifier: Apache-2.0
"""Reads a flight recorder file as JSON (failing on anything json.load
refuses or a field of the wrong type) and prints it in lines the C test
compares:
  doc RANK SIZE BACKEND REASON ENTRIES_MAX ENTRIES_RECORDED N
  e SEQ OP DTYPE COUNT REDOP ROOT STATE STATUS PEER
with '-' for a null. Usage: trace_json.py FILE"""
import json
import sys

DOC = {"format": str, "reason": str, "rank": int, "size": int,
       "backend": str, "comm": str, "comm_number": int, "pid": int,
       "time_us": int, "entries_max": int, "entries_recorded": int,
       "entries": list}
ENTRY = {"seq": int, "op": str, "dtype": (str, type(None)), "count": int,
         "redop": (str, type(None)), "root": (int, type(None)),
         "start_us": int, "end_us": (int, type(None)), "duration_us": int,
         "state": str, "status": (str, type(None)),
         "peer": (int, type(None))}


def check(obj, spec, where):
    for key, typ in spec.items():
        if key not in obj:
            sys.exit(f"{where}: no {key!r}")
        if not isinstance(obj[key], typ) or isinstance(obj[key], bool):
            sys.exit(f"{where}: {key!r} is {obj[key]!r}")


def word(v):
    return "-" if v is None else str(v)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        doc = json.load(f)
    check(doc, DOC, "document")
    print("doc", doc["rank"], doc["size"], doc["backend"], doc["reason"],
          doc["entries_max"], doc["entries_recorded"], len(doc["entries"]))
    for i, e in enumerate(doc["entries"]):
        check(e, ENTRY, f"entry {i}")
        if e["end_us"] is not None and e["end_us"] < e["start_us"]:
            sys.exit(f"entry {i}: ends before it starts")
        if (e["state"] == "done") != (e["status"] is not None):
            sys.exit(f"entry {i}: state {e['state']} with status {e['status']}")
        print("e", e["seq"], e["op"], word(e["dtype"]), e["count"],
              word(e["redop"]), word(e["root"]), e["state"],
              word(e["status"]), word(e["peer"]))


main()
