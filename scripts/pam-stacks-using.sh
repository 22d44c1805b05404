#!/usr/bin/env bash
# Prints FILE:LINE: TEXT for every line of the PAM stacks in DIR whose module is the pam_keyway.so that
# `make uninstall` is about to remove: named bare (libpam looks it up in the system module directory, MODULE_DIR)
# or by that absolute path. Another copy named by its own path, a comment or an argument that mentions the name
# does not count. Exit 0 when some line uses it, 1 when none does.
# usage: scripts/pam-stacks-using.sh DIR MODULE_DIR
set -euo pipefail
dir=$1 module_dir=$2
[ -d "$dir" ] || exit 1
found=1
for file in "$dir"/*; do
    [ -f "$file" ] || continue
    if awk -v bare="pam_keyway.so" -v full="$module_dir/pam_keyway.so" -v name="$file" '
        { text = $0; sub(/#.*/, "", text) }
        text ~ /^[[:space:]]*$/ { next }
        {
            n = split(text, word, /[[:space:]]+/); i = 1
            if (word[i] == "") i++
            if (word[i] ~ /^@include/) next
            i++                                   # the type (auth, -auth, account, …)
            if (word[i] ~ /^\[/) { while (i <= n && word[i] !~ /\]$/) i++ }
            i++                                   # past the control
            if (word[i] == bare || word[i] == full) { printf "%s:%d: %s\n", name, NR, $0; hit = 1 }
        }
        END { exit hit ? 0 : 1 }' "$file"; then
        found=0
    fi
done
exit $found
