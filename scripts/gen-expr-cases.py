#!/usr/bin/env python3
"""Writes tests/data/expr_cases.tsv: expressions with bindings and the value Python gives them.

kerntune's expression language is the Python subset that T1 files use, so Python itself is the
reference. Each line is EXPR <tab> BINDINGS <tab> EXPECTED, where BINDINGS is name=literal pairs
separated by ';' and EXPECTED is repr() of the result, or !error when Python raises.
Cases: a hand-written table (precedence, chained comparisons, floor division and modulo of
negatives, and/or operands, builtins...) and every Values, Expression, Size, GlobalSize and
LocalSize string of ../shared/benchmark_hub (its kernels/*.json), bound to values from the
problem's own space.

Usage: scripts/gen-expr-cases.py [BENCHMARK_HUB_DIR] > tests/data/expr_cases.tsv
"""
import itertools
import json
import os
import random
import sys

HAND = [
    # literals and arithmetic
    ("1 + 2 * 3", {}), ("(1 + 2) * 3", {}), ("2 ** 3 ** 2", {}), ("-2 ** 2", {}), ("2 ** -1", {}),
    ("7 / 2", {}), ("7 // 2", {}), ("-7 // 2", {}), ("7 // -2", {}), ("-7 // -2", {}),
    ("7 % 3", {}), ("-7 % 3", {}), ("7 % -3", {}), ("-7 % -3", {}), ("-7.5 // 2", {}), ("-7.5 % 2", {}),
    ("7.5 % -2", {}), ("1e3 + 1", {}), ("0x1f + 0b101 + 0o17", {}), ("1_000 * 3", {}), (".5 * 4", {}),
    ("10 / 4 * 2", {}), ("2 * 3 % 4", {}), ("-3 * -3", {}), ("+5 - -5", {}), ("~5", {}), ("5 & 3 | 8 ^ 2", {}),
    ("1 << 10 >> 3", {}), ("3 - 2 - 1", {}), ("2 ** 62", {}), ("1 / 3", {}), ("2.0 ** 0.5", {}),
    ("1e16", {}), ("1e15", {}), ("1.5e-5", {}), ("0.0001", {}), ("123456789.125", {}), ("-0.0", {}),
    ("True + True", {}), ("True * 3.5", {}), ("1 / 0", {}), ("1 // 0", {}), ("1 % 0", {}), ("0 ** -1", {}),
    # comparisons and logic
    ("1 < 2 < 3", {}), ("1 < 3 < 2", {}), ("32 <= a * b <= 1024", {"a": 16, "b": 8}),
    ("32 <= a * b <= 1024", {"a": 16, "b": 128}), ("a == b == 3", {"a": 3, "b": 3}), ("1 == 1.0", {}),
    ("1 != 2 > 1", {}), ("3 > 2 == 2", {}), ("'abc' < 'abd'", {}), ("[1, 2] == [1, 2]", {}), ("[1, 2] < [1, 3]", {}),
    ("1 == 'a'", {}), ("1 < 'a'", {}), ("not 1 == 2", {}), ("not a", {"a": 0}), ("0 or 5", {}), ("3 and 0", {}),
    ("3 and 4", {}), ("0 or 0.0", {}), ("'' or 'x'", {}), ("1 or 1 / 0", {}), ("0 and 1 / 0", {}),
    ("a or b and c", {"a": 0, "b": 2, "c": 3}), ("not a or b", {"a": 1, "b": 0}),
    ("x if c else y", {"x": 1, "y": 2, "c": True}), ("x if c else y", {"x": 1, "y": 2, "c": 0}),
    ("1 if 0 else 2 if 0 else 3", {}), ("2 in [1, 2, 3]", {}), ("4 not in [1, 2, 3]", {}), ("'b' in 'abc'", {}),
    ("a % 32 != 0 or b == 0", {"a": 48, "b": 1}), ("a % 32 != 0 or b == 0", {"a": 64, "b": 1}),
    # builtins
    ("min(3, 1, 2)", {}), ("max([4, 9, 2])", {}), ("max(p)", {"p": [16, 32, 64]}), ("min(p) * 2", {"p": [3, 5]}),
    ("abs(-4)", {}), ("abs(-2.5)", {}), ("int(7.9)", {}), ("int(-7.9)", {}), ("int('42')", {}), ("float(3)", {}),
    ("float('2.5')", {}), ("len([1, 2, 3])", {}), ("len('hello')", {}), ("range(5)", {}), ("range(2, 11, 3)", {}),
    ("range(10, 0, -3)", {}), ("list_sum(0)", {}), ("sum([1, 2, 3.5])", {}), ("round(2.5)", {}), ("round(3.5)", {}),
    ("round(-0.5)", {}), ("round(2.675, 2)", {}), ("round(0.125, 2)", {}), ("round(1250, -2)", {}), ("round(1350, -2)", {}), ("round(1234.5, -1)", {}), ("max(1, 2.5)", {}), ("min([])", {}), ("bool(0)", {}),
    ("len(range(0, 100, 7))", {}), ("max(2 ** i for i in [1])", {}), ("list(range(1, 9))", {}), ("list('ab')", {}),
    ("list(3)", {}), ("len(list(range(4)))", {}),
    # lists, strings, indexing
    ("[1, 2, 3]", {}), ("[2 ** i for i in range(3)]", {}), ("[]", {}), ("[1, 'a', 2.5, True]", {}), ("ProblemSize[0]", {"ProblemSize": [4096, 2048]}),
    ("ProblemSize[-1] // 2", {"ProblemSize": [4096, 2048]}), ("ProblemSize[2]", {"ProblemSize": [4096, 2048]}),
    ("[1, 2] + [3]", {}), ("'ab' + 'cd'", {}), ("'abc'[1]", {}), ("[10, 20, 30][1 + 1]", {}), ("[[1, 2], [3]][0][1]", {}),
    ("'a' * 2", {}), ("'x' + 1", {}), ("(1)", {}), ("((2 + 3) * (4 - 1)) // 2", {}),
    # comprehensions: clauses nest left to right, loop variables are local, generator arguments
    ("[2**i for i in range(0, 6)]", {}), ("[i for i in range(1, 11)]", {}), ("[i for i in range(10, 0, -3)]", {}),
    ("[x*y for x in range(3) if x for y in range(x) if y % 2 == 0]", {}), ("[[j for j in range(i)] for i in range(3)]", {}),
    ("[[x, y] for x in 'ab' for y in range(2)]", {}), ("[c + c for c in 'abc']", {}), ("[x for x in []]", {}),
    ("[x for x in range(5) if x > 9]", {}), ("[x for x in range(6) if x % 2 if x > 1]", {}),
    ("[x if x % 2 else -x for x in range(5)]", {}), ("[a for a in range(a)]", {"a": 3}),
    ("[a * b for a in range(3)]", {"a": 10, "b": 2}), ("[x for x in range(3)][1] + x", {"x": 7}),
    ("[x for x in range(3) for x in range(x)]", {}), ("[p * 2 for p in ps if p > 1]", {"ps": [1, 2, 3]}),
    ("[s[i] for i in range(len(s))]", {"s": "xyz"}), ("[[y for y in range(x)] for x in [y for y in range(3)]]", {}),
    ("sum(x for x in range(4))", {}), ("min(len(s) for s in ['ab', 'c'])", {}), ("list(c for c in 'ab' if c != 'a')", {}),
    ("max(x * n for x in range(4))", {"n": 3}), ("sum([x for x in range(n)])", {"n": 5}),
    ("[x for x in 5]", {}), ("[x for x in n]", {"n": 2.5}), ("[y for x in [1]]", {}), ("[b for a in [1] for b in b]", {"b": [5]}),
    ("[x for x in range(3) if x // (x - 1)]", {}), ("min(x for x in [])", {}),
    # ranges whose steps from the start pass INT64_MAX on the way to items within the range
    ("range(-2**62*2, 2**62-1+2**62, 2**62)", {}), ("range(2**62-1+2**62, -2**62*2, -2**62*2)", {}),
    # repeating an empty sequence any number of times is empty at once (fuzz-space found it ran
    # for ever), and a non-empty one past the bound of one evaluation is refused
    ("[] * 10 ** 16", {}), ("'' * 10 ** 16", {}), ("10 ** 16 * []", {}), ("[[]] * 3", {}), ("[1, 2] * 0", {}), ("'ab' * -2", {}),
    # leading zeros: an error in an integer (fuzz-space met range(05821946)), none in a float
    ("05", {}), ("range(0_1)", {}), ("00", {}), ("0_0 + 1", {}), ("007.5", {}), ("00e1", {}), ("-01", {}),
    # underscores: one, between digits
    ("1_000", {}), ("1__0", {}), ("1_", {}), ("1_.5", {}), ("1.5_0", {}), ("1e1_0", {}), ("0x_f", {}), ("0b1_0 + 1", {}), ("0x__f", {}), ("0o_", {}),
    ("0o19", {}), ("0b12", {}), ("0xff_", {}), ("0x" + "0" * 80 + "1", {}), ("0b" + "0" * 90, {}),
]

def lit(v):
    return repr(v)

def main():
    hub = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "benchmark_hub")
    cases = list(HAND)
    rng = random.Random(7)
    for name in sorted(n for n in os.listdir(os.path.join(hub, "kernels")) if n.endswith(".json")):
        t1 = json.load(open(os.path.join(hub, "kernels", name)))
        params = t1["ConfigurationSpace"]["TuningParameters"]
        values = {p["Name"]: eval(p["Values"]) for p in params}
        for p in params:
            cases.append((p["Values"], {}))
        configs = [dict(zip(values, combo)) for combo in itertools.product(*values.values())]
        sample = rng.sample(configs, min(40, len(configs)))
        for c in t1["ConfigurationSpace"].get("Conditions", []):
            # bound to every parameter: T1 "Parameters" lists are not always complete
            # (convolution_milo's shared-memory condition omits filter_width and filter_height)
            for cfg in sample:
                cases.append((c["Expression"], {k: v for k, v in cfg.items() if k in c["Expression"]}))
        spec = t1.get("KernelSpecification", {})
        size_env = dict(values)
        size_env["ProblemSize"] = spec.get("ProblemSize", [])
        for a in spec.get("Arguments", []):
            if isinstance(a.get("Size"), str):
                used = {k: v for k, v in size_env.items() if k in a["Size"]}
                cases.append((a["Size"], used))
        for key in ("GlobalSize", "LocalSize"):
            for dim, e in sorted(spec.get(key, {}).items()):
                for cfg in sample[:10]:
                    env = dict(cfg)
                    env["ProblemSize"] = spec.get("ProblemSize", [])
                    cases.append((e, {k: v for k, v in env.items() if k in e}))
    seen = set()
    for expr, env in cases:
        if "\t" in expr or "\n" in expr:
            continue
        key = (expr, tuple(sorted((k, repr(v)) for k, v in env.items())))
        if key in seen:
            continue
        seen.add(key)
        try:
            # unknown functions are outside the subset: expect an error
            if "list_sum" in expr:
                raise SyntaxError
            # the bindings are globals, as a comprehension's body sees them (it would not see
            # eval's locals)
            names = {"__builtins__": {}, "min": min, "max": max, "abs": abs, "int": int, "float": float, "len": len,
                     "range": lambda *a: list(range(*a)), "round": round, "sum": sum, "bool": bool, "list": list}
            names.update(env)
            result = repr(eval(expr, names))
        except Exception:
            result = "!error"
        bindings = ";".join(f"{k}={lit(v)}" for k, v in sorted(env.items()))
        print(f"{expr}\t{bindings}\t{result}")

main()
