#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora (README.md) into OUT/<harness>/: from tests/data, from
../shared/benchmark_hub and from the conformance problems of examples/kernel_tuner, each input in
the form its harness reads. Run by ctest's fuzz-seeds fixture and by scripts/fuzz.

usage: seeds.py OUT [HUB]"""

import glob
import gzip
import hashlib
import json
import os
import sqlite3
import struct
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
DATA = os.path.join(ROOT, "tests", "data")
LIMIT = 64 << 10  # the harnesses' -max_len


def put(out, harness, data):
    if isinstance(data, str):
        data = data.encode()
    if len(data) > LIMIT:
        return
    d = os.path.join(out, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, hashlib.sha1(data).hexdigest()), "wb") as f:
        f.write(data)


def t1_files(hub):
    files = sorted(glob.glob(os.path.join(DATA, "t1", "*.json")) + glob.glob(os.path.join(DATA, "t1", "bad", "*.json")))
    files += sorted(glob.glob(os.path.join(ROOT, "examples", "kernel_tuner", "*", "*.json*")))
    if hub:
        files += sorted(glob.glob(os.path.join(hub, "kernels", "*.json")) + glob.glob(os.path.join(hub, "currently_unused", "kernels", "*.json")))
    return files


def main():
    out = sys.argv[1]
    hub = sys.argv[2] if len(sys.argv) > 2 and os.path.isdir(sys.argv[2]) else None
    ab = struct.pack("<qq", 64, 3)
    exprs = []
    with open(os.path.join(DATA, "expr_cases.tsv")) as f:
        exprs += [line.split("\t")[0] for line in f if line.strip() and not line.startswith("#")]
    for path in t1_files(hub):
        raw = open(path, "rb").read()
        put(out, "t1", raw)
        try:
            doc = json.loads(raw)
        except ValueError:
            continue
        cs = doc.get("ConfigurationSpace", {}) if isinstance(doc, dict) else {}
        params = [p for p in cs.get("TuningParameters", []) if isinstance(p, dict) and isinstance(p.get("Values"), str)]
        conds = [c.get("Expression") for c in cs.get("Conditions", []) if isinstance(c, dict) and isinstance(c.get("Expression"), str)]
        exprs += [p["Values"] for p in params] + conds
        if len(params) >= 2:
            put(out, "space", "\n".join([params[0]["Values"], params[1]["Values"], conds[0] if conds else "x <= y", "x * y", "n // x", "x + y"]))
    for e in exprs:
        put(out, "expr", ab + e.encode())
        put(out, "space", "\n".join([e, "[1, 2]", "", "", "", ""]))
    # kernel sources for the preprocessor's analysis: the tests', the examples', the hub's, with
    # their parameters' first values as defines
    sources = glob.glob(os.path.join(DATA, "t1", "*.c")) + glob.glob(os.path.join(DATA, "t1", "*.cl"))
    if hub:
        sources += glob.glob(os.path.join(hub, "kernels", "*.cu"))
    ktex = os.path.join(ROOT, "..", "shared", "kernel_tuner_examples")
    sources += glob.glob(os.path.join(ktex, "*", "*.cl")) + glob.glob(os.path.join(ktex, "*", "*.cu"))
    for path in sorted(sources):
        put(out, "pp", b"block_size_x=32,block_size_y=4,tile_size_x=2,kernel_tuner=1\n" + open(path, "rb").read())
        put(out, "pp", b"\n" + open(path, "rb").read())
    # recorded measurements: the names line, then the file (small ones whole, plain and gzip)
    kt_cache = os.path.join(DATA, "t1", "matmul_c.ktcache.json")
    if os.path.exists(kt_cache):
        raw = open(kt_cache, "rb").read()
        doc = json.loads(raw)
        names = ",".join(doc.get("tune_params_keys", []))
        put(out, "t4", names.encode() + b"\n" + raw)
        put(out, "t4", names.encode() + b"\n" + gzip.compress(raw, mtime=0))
    if hub:
        for path in sorted(glob.glob(os.path.join(hub, "results", "*", "*.json.gz"))):
            doc = json.loads(gzip.open(path).read())
            res = doc.get("results", [])[:12]
            names = ",".join((res[0].get("configuration") or {}).keys()) if res else ""
            small = dict(doc, results=res)
            put(out, "t4", names.encode() + b"\n" + json.dumps(small).encode())
            put(out, "t4", names.encode() + b"\n" + gzip.compress(json.dumps(small).encode(), mtime=0))
    # wisdom, for importing it and for kerntune aot
    wisdom = open(os.path.join(DATA, "store", "wisdom.json"), "rb").read()
    put(out, "wisdom", wisdom)
    put(out, "aot", wisdom)
    # stores: each schema version's file (tests/data/store/vN.sql), so that mutations damage pages
    for sql in sorted(glob.glob(os.path.join(DATA, "store", "v*.sql"))):
        db = os.path.join(out, "tmp.db")
        if os.path.exists(db):
            os.unlink(db)
        con = sqlite3.connect(db)
        con.executescript(open(sql).read())
        con.commit()
        con.close()
        put(out, "store", open(db, "rb").read())
        os.unlink(db)
    # the fleet: RESP replies of XREADGROUP with a job, and results (fleet_wire.h)
    def bulk(s):
        s = s.encode() if isinstance(s, str) else s
        return b"$%d\r\n%s\r\n" % (len(s), s)

    def arr(items):
        return b"*%d\r\n" % len(items) + b"".join(items)

    job = arr([bulk("1700000000000-0"), arr([bulk(x) for x in ["run", "r1", "seq", "3", "config", "BX=16,BY=2", "from", "0", "runs", "7",
                                                                 "artifact", "a.so", "sha256", "ab" * 32, "forwarded", "1"]])])
    put(out, "fleet", arr([arr([bulk("kerntune:fleet:jobs:x"), arr([job])])]))
    result = json.dumps({"outcome": "measured", "worker": "w1", "runs": [1.5, 1.25, 1.0], "message": None})
    done = arr([bulk("1700000000001-0"), arr([bulk(x) for x in ["type", "done", "seq", "3", "result", result]])])
    start = arr([bulk("1700000000002-0"), arr([bulk(x) for x in ["type", "start", "seq", "3"]])])
    put(out, "fleet", arr([arr([bulk("kerntune:fleet:results:x"), arr([done, start])])]))
    put(out, "fleet", result)
    put(out, "fleet", json.dumps({"outcome": "failed", "message": "it crashed", "worker": "w2"}))


if __name__ == "__main__":
    main()
