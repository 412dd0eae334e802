#!/usr/bin/env bash
# Validates Amazon States Language definitions with asl-validator, pinned in
# .tools/asl-validator/package.json and installed there on first use (npm ci).
#
#   scripts/asl-validate.sh FILE...   # exit 0 when every definition is valid; otherwise non-zero
#                                     # with the validator's messages on stderr
#   scripts/asl-validate.sh --install # (re)install only, as package-lock.json says
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="$root/.tools/asl-validator"
bin="$dir/node_modules/.bin/asl-validator"

install() {
	command -v npm >/dev/null || { echo "npm not found: asl-validator needs Node 20" >&2; exit 1; }
	echo "==> installing asl-validator (npm ci in .tools/asl-validator)" >&2
	(cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
}

if [ "${1:-}" = "--install" ]; then
	install
	exit 0
fi
[ -x "$bin" ] || install
[ $# -gt 0 ] || { echo "usage: $0 FILE... | --install" >&2; exit 2; }

status=0
for f in "$@"; do
	[ -f "$f" ] || { echo "$f: no such file" >&2; status=2; continue; }
	# The validator prints its verdict on stdout; a failure goes to stderr with the verdict, so a
	# caller that reads only stderr still sees which definition and why.
	if ! out="$("$bin" --json-path "$f" 2>&1)"; then
		echo "$out" >&2
		status=1
	else
		echo "$out"
	fi
done
exit $status
