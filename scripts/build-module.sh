#!/bin/bash
# Builds build/pam_keyway.so in Embedded Swift: no Swift runtime, no libstdc++, no environment read at load
# (docs/ARCHITECTURE.md §4 says why and what that mode allows).
#
# SwiftPM cannot build a target in Embedded mode, so this compiles the module's targets with swiftc, one Swift module
# each, from the same sources `swift build` compiles in full mode, in dependency order. The targets, their order and
# the upcoming-feature flags come from Package.swift, so the two builds cannot disagree on what the module is. The objects are linked with -z defs and without -z nodelete (libpam unloads the module at pam_end, as any),
# only pam_sm_* exported (pam/exports.map), stripped at link time; unused code is dropped (--gc-sections).
#
# Usage: scripts/build-module.sh [OUTPUT]  (default build/pam_keyway.so)
# KEYWAY_MODULE_SYMBOLS=1 keeps symbols and line tables, so valgrind and gdb can name frames (docs/HARDENING.md).
set -euo pipefail
cd "$(dirname "$0")/.."

swiftc=${SWIFTC:-$(command -v swiftc)}
toolchain=$(dirname "$(readlink -f "$swiftc")")/..
triple=$(uname -m)-unknown-linux-gnu
tables=$toolchain/lib/swift/embedded/$triple/libswiftUnicodeDataTables.a
output=${1:-build/pam_keyway.so}
out=.build/embedded${KEYWAY_MODULE_SYMBOLS:+-symbols}
mkdir -p "$out" "$(dirname "$output")"

# Nothing to do when no source, header or this script changed since the module was built.
if [ -e "$output" ] && [ -z "$(find Sources Plugins pam Package.swift "$0" -newer "$output" -print -quit)" ]; then
    echo "$output: up to date"
    exit 0
fi

# name:directory of the module's target and everything below it, dependencies first, and the Swift settings its
# target has: both read from Package.swift (scripts/package-graph.py), so this script keeps no list of its own.
mapfile -t plan < <(scripts/package-graph.py build-plan PAMKeyway)
[ "${#plan[@]}" -gt 1 ] || { echo "build-module.sh: no build plan from Package.swift" >&2; exit 1; }
read -r -a package_flags <<<"${plan[0]}"
modules=("${plan[@]:1}")

flags=(
    -enable-experimental-feature Embedded -wmo -parse-as-library -swift-version 6 -target "$triple" -Osize
    -Xcc -fPIC -Xcc -fstack-protector-strong -Xfrontend -function-sections
    "${package_flags[@]}"
    -I "$out" -I Sources/CKeywayLibc -I pam/CPAM
)
# -z pack-relative-relocs (DT_RELR, glibc 2.36) turns 1,400 relative relocations into a few hundred bytes: less to
# read and apply at every load. -z now with -z relro (full RELRO, BIND_NOW): the few libc and libpam symbols are bound
# at load and the GOT made read-only, as Debian's hardening flags ask (lintian: hardening-no-bindnow).
link_flags=(-Wl,-z,defs -Wl,-z,relro -Wl,-z,now -Wl,-z,pack-relative-relocs -Wl,--version-script=pam/exports.map
    -Wl,--gc-sections)
if [ -n "${KEYWAY_MODULE_SYMBOLS:-}" ]; then
    flags+=(-g)
else
    link_flags+=(-Wl,--strip-all)
fi

objects=()
for entry in "${modules[@]}"; do
    name=${entry%%:*}
    directory=${entry#*:}
    "$swiftc" "${flags[@]}" -module-name "$name" -emit-module -emit-module-path "$out/$name.swiftmodule" \
        -emit-object -o "$out/$name.o" "$directory"/*.swift
    objects+=("$out/$name.o")
done

# The one libm function the standard library's hash tables call, so the module needs no libm (pam/embedded/ceil.c).
${CC:-gcc} -O2 -fPIC -fno-builtin -fstack-protector-strong -Wall -Wextra -c -o "$out/ceil.o" pam/embedded/ceil.c
objects+=("$out/ceil.o")

# Renamed into place, so a process that has the old module loaded keeps a whole file.
${CC:-gcc} -shared -fPIC -o "$output.new" "${objects[@]}" "$tables" -lpam "${link_flags[@]}"
mv -f "$output.new" "$output"
echo "$output: Embedded Swift, $(stat -c %s "$output") bytes"
