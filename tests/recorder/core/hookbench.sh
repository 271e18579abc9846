#!/bin/sh
# hookbench.sh LIB HOOKBENCH [N] - per-hook cost of libdlbn.so, with vs without.
# Runs plain and preloaded alternately (5 rounds) and keeps each figure's
# minimum, the least disturbed by other load.  Prints name, ns without,
# ns with, ns added.  The trace goes to $TMPDIR (its file system matters:
# first stores into file pages cost more on ext4 than on tmpfs).
set -e
lib=$1 bench=$2 n=${3:-2000000}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for round in 1 2 3 4 5; do
	"$bench" "$n" >>"$tmp/plain"
	env LD_PRELOAD="$lib" DLBN_OUTPUT="$tmp/t-%p.bin" DLBN_LOG=quiet "$bench" "$n" >>"$tmp/hooked"
	rm -f "$tmp"/t-*.bin
done
mins() {
	awk -F= '{ if (!($1 in m) || $2 < m[$1]) m[$1] = $2 } END { for (k in m) print k, m[k] }' "$1" | sort
}
mins "$tmp/plain" >"$tmp/plain.min"
mins "$tmp/hooked" >"$tmp/hooked.min"
echo "hook cost (ns per call; minimum of 5 alternating runs of $n calls)"
join "$tmp/plain.min" "$tmp/hooked.min" |
	awk '{ printf "  %-16s without %7.1f  with %7.1f  added %7.1f\n", $1, $2, $3, $3 - $2 }'
