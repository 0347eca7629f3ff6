#!/bin/sh
# Installs kerntune from a build tree into a temporary prefix, then builds and runs a small
# program against the installed copy twice: once through find_package(kerntune) in CMake, once
# through pkg-config. It also checks that every public header of the source tree (kerntune.h and
# include/kerntune/*.h) is installed, and that each compiles on its own (each includes what it
# needs). Usage: install-consumer.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null

# the installed headers are exactly the source tree's, and each stands alone
(cd "$src/include" && find . -name '*.h' | sort) > "$tmp/headers.src"
(cd "$prefix/include" && find . -name '*.h' | sort) > "$tmp/headers.installed"
if ! cmp -s "$tmp/headers.src" "$tmp/headers.installed"; then
    echo "installed headers differ from include/:"
    diff "$tmp/headers.src" "$tmp/headers.installed" || true
    exit 1
fi
while read -r h; do
    h=${h#./}
    printf '#include <%s>\n' "$h" > "$tmp/alone.c"
    if ! cc -std=c11 -Wall -Wextra -Werror -pedantic -fsyntax-only -I"$prefix/include" "$tmp/alone.c"; then
        echo "installed header $h does not compile on its own"
        exit 1
    fi
done < "$tmp/headers.installed"
echo "headers: $(wc -l < "$tmp/headers.installed") installed, each compiles alone"

mkdir "$tmp/app"
cat > "$tmp/app/main.c" <<'C'
#include <kerntune.h>
#include <stdio.h>
static int twice(const kt_arg *a, size_t n, void *u) { (void)n; (void)u; *(int *)a[0].ptr *= 2; return 0; }
int main(void) {
    kt_context *ctx; kt_op *op; int v = 21;
    if (kt_context_create(&ctx) || kt_op_create(ctx, "app", &op) ||
        kt_op_add_buffer(op, "v", KT_TYPE_I32, KT_READ_WRITE) ||
        kt_op_add_native(op, "twice", twice, NULL) || kt_op_force(op, "twice")) return 1;
    kt_arg arg = kt_arg_buf(&v, sizeof v);
    if (kt_op_call(op, &arg, 1)) return 1;
    printf("kerntune %s v=%d\n", kt_version_string(), v);
    kt_context_destroy(ctx);
    return 0;
}
C
cat > "$tmp/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.20)
project(app C)
find_package(kerntune 0.1 REQUIRED)
add_executable(app main.c)
target_link_libraries(app PRIVATE kerntune::kerntune)
CM
cmake -S "$tmp/app" -B "$tmp/app/build" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$tmp/app/build" >/dev/null
out=$("$tmp/app/build/app")
echo "find_package: $out"
[ "$out" = "kerntune 0.1.0 v=42" ]

libdir=$(ls -d "$prefix"/lib*/pkgconfig | head -n 1)
flags=$(PKG_CONFIG_PATH=$libdir pkg-config --cflags --libs kerntune)
# shellcheck disable=SC2086
cc -std=c11 "$tmp/app/main.c" $flags -Wl,-rpath,"$(dirname "$libdir")" -o "$tmp/app/pc"
out=$("$tmp/app/pc")
echo "pkg-config: $out"
[ "$out" = "kerntune 0.1.0 v=42" ]
[ -x "$prefix/bin/kerntune" ]
"$prefix/bin/kerntune" --version
