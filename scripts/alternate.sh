#!/usr/bin/env bash
# Times two commands alternately, N pairs, each as a whole process under /usr/bin/time, and prints
# every pair's ratio (new / old) of CPU seconds (user + system) and of wall seconds, then the median
# and range of each. Alternating pairs cancel most of a shared machine's drift; CPU seconds are what
# another process's load disturbs least. The commands' own output is discarded.
# Usage:
#   scripts/alternate.sh N "OLD COMMAND" "NEW COMMAND"
#   GOMAXPROCS=1 scripts/alternate.sh 6 "./trainer-old bench --net mnist_fast --steps 30" \
#     "./trainer-new bench --net mnist_fast --steps 30"
set -euo pipefail
if [ $# -ne 3 ] || ! [[ $1 =~ ^[1-9][0-9]*$ ]]; then
	echo "usage: $0 PAIRS \"OLD COMMAND\" \"NEW COMMAND\"" >&2
	exit 2
fi
pairs=$1 old=$2 new=$3
[ -x /usr/bin/time ] || { echo "$0: /usr/bin/time is missing (apt-get install time)" >&2; exit 1; }
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# one CMD prints "cpu wall" of CMD's whole process.
one() {
	/usr/bin/time -f '%U %S %e' -o "$log" bash -c "$1" >/dev/null 2>&1 || { echo "$0: failed: $1" >&2; exit 1; }
	awk '{ printf "%.3f %.3f\n", $1 + $2, $3 }' "$log"
}
ratios=()
for i in $(seq "$pairs"); do
	read -r oc ow < <(one "$old")
	read -r nc nw < <(one "$new")
	if awk -v oc="$oc" -v ow="$ow" 'BEGIN { exit !(oc < 0.01 || ow < 0.01) }'; then
		echo "$0: the old command took under 10 ms of CPU or wall time: too short to time" >&2
		exit 1
	fi
	r=$(awk -v oc="$oc" -v ow="$ow" -v nc="$nc" -v nw="$nw" 'BEGIN { printf "%.3f %.3f", nc / oc, nw / ow }')
	echo "pair $i: old cpu ${oc}s wall ${ow}s, new cpu ${nc}s wall ${nw}s, new/old cpu ${r% *} wall ${r#* }"
	ratios+=("$r")
done
printf '%s\n' "${ratios[@]}" | awk '
	{ cpu[NR] = $1; wall[NR] = $2 }
	function median(a, n,   i, j, t) {
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		m = median(cpu, NR); lo = cpu[1]; hi = cpu[NR]
		w = median(wall, NR); wlo = wall[1]; whi = wall[NR]
		printf "new/old over %d pairs: cpu %.3f (%.3f-%.3f), wall %.3f (%.3f-%.3f)\n", NR, m, lo, hi, w, wlo, whi
	}'
