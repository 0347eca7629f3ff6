#!/bin/sh
# Builds the kerntune command without Redis (KT_WITH_REDIS=OFF: as on a machine without hiredis
# or libcrypto) in a temporary tree and checks what issue [14] asks of such a build: everything
# else builds and works, `kerntune tune --workers` and `kerntune worker` say it was built without
# Redis (and fail), and a context given a shared cache (KERNTUNE_REMOTE) logs that it has none
# and tunes locally. Usage: no-redis.sh SOURCE_DIR
set -eu
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# PoCL (listing the OpenCL devices) keeps its kernel cache under HOME unless told otherwise
export HOME="$tmp/home" KERNTUNE_CACHE="$tmp/cache.db" KERNTUNE_ARTIFACTS="$tmp/artifacts" POCL_CACHE_DIR="$tmp/pocl"
mkdir "$HOME"
fail() {
    echo "no-redis: $*"
    exit 1
}

# unoptimized (-O0): what is checked is what the build holds and says, and it compiles in half
# the time of -O2
cmake -S "$src" -B "$tmp/b" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS_DEBUG=-O0 -DKT_WITH_REDIS=OFF -DKT_BUILD_TESTS=OFF -DKT_BUILD_EXAMPLES=OFF \
    -DKT_BUILD_BENCH=OFF -DKT_TEST_INSTALL=OFF > "$tmp/configure.txt" 2>&1 || { cat "$tmp/configure.txt"; fail "configure failed"; }
grep -q "KT_WITH_REDIS=OFF: building without the Redis-shared cache and the fleet" "$tmp/configure.txt" ||
    { cat "$tmp/configure.txt"; fail "the configure step did not say it builds without Redis"; }
cmake --build "$tmp/b" --target kerntune_cli -j"$(nproc 2>/dev/null || echo 2)" > "$tmp/build.txt" 2>&1 ||
    { tail -40 "$tmp/build.txt"; fail "building the command without Redis failed"; }
kt="$tmp/b/kerntune"
[ -x "$kt" ] || fail "no kerntune command in $tmp/b"
! ldd "$kt" | grep -q hiredis || fail "the command links hiredis"
problem="$src/tests/data/t1/matmul_c.json"

# --workers: refused, saying why, before anything is tuned
rc=0
"$kt" tune "$problem" --workers redis://127.0.0.1:9 > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
[ "$rc" -ne 0 ] || fail "tune --workers succeeded without Redis"
grep -q "built without Redis" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "tune --workers did not say it was built without Redis"; }
[ ! -s "$tmp/out.txt" ] || { cat "$tmp/out.txt"; fail "tune --workers printed on stdout"; }

# the worker: the same
rc=0
"$kt" worker redis://127.0.0.1:9 > "$tmp/out.txt" 2> "$tmp/err.txt" || rc=$?
[ "$rc" -ne 0 ] || fail "worker succeeded without Redis"
grep -q "built without Redis" "$tmp/err.txt" || { cat "$tmp/err.txt"; fail "worker did not say it was built without Redis"; }
# with --json, stdout is one document: the error
for cmd in "tune $problem --workers redis://127.0.0.1:9" "worker redis://127.0.0.1:9"; do
    rc=0
    # shellcheck disable=SC2086 # the words of cmd are its arguments
    "$kt" $cmd --json > "$tmp/out.json" 2> /dev/null || rc=$?
    [ "$rc" -ne 0 ] || fail "$cmd --json succeeded without Redis"
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert "built without Redis" in d["error"], d' "$tmp/out.json" ||
        { cat "$tmp/out.json"; fail "$cmd --json: stdout is not one JSON document with the error"; }
done

# a shared cache asked for: said once in the log, and the tuning is local and complete
KERNTUNE_REMOTE=redis://127.0.0.1:9 KERNTUNE_LOG=warn "$kt" tune "$problem" --json > "$tmp/out.json" 2> "$tmp/err.txt" ||
    { cat "$tmp/err.txt"; fail "tuning with KERNTUNE_REMOTE set failed without Redis"; }
grep -q "the shared cache is left out: this kerntune was built without Redis" "$tmp/err.txt" ||
    { cat "$tmp/err.txt"; fail "the log did not say the shared cache is left out"; }
python3 - "$tmp/out.json" <<'PY' || fail "the tuning's JSON document is not what a local tuning gives"
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["source"] == "measured" and doc["measured"] > 0, doc
assert set(doc["best"]["configuration"]) == {"TI", "TK"}, doc["best"]
PY
[ -s "$KERNTUNE_CACHE" ] || fail "the local cache was not written"
[ -z "$(ls -A "$HOME")" ] || fail "HOME was written: $(find "$HOME" | head -20)"
echo "no-redis: built without Redis; --workers and worker refuse, saying so; KERNTUNE_REMOTE is logged and left out; local tuning works"
