#!/usr/bin/env bash
# Runs weft's fuzz targets (cargo-fuzz / libFuzzer) for a fixed number of inputs each, one target
# at a time, and prints one summary line per target.
#
# Usage: fuzz/run.sh TARGET... [RUNS]      (TARGET: read_vectors, graph_file, graph_file_crc,
#                                           index_load, or `all`; RUNS default 1000000)
#
# Needs a nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz --locked`). Steps:
#  1. builds and runs the seed generator (`seedgen/`): small graphs and indexes built and saved
#     by the library itself, written to target/seeds/ (nothing binary is committed);
#  2. `cargo +nightly fuzz build` (release, debug assertions, AddressSanitizer);
#  3. per target: adds the seeds to corpus/TARGET/ and runs the fuzzer on it with
#     -runs=RUNS -rss_limit_mb=$FUZZ_RSS_MB (also the malloc limit) -timeout=$FUZZ_TIMEOUT
#     -max_len=$FUZZ_MAX_LEN, under `nice -n $FUZZ_NICE`, with the fuzz inputs written to a
#     scratch folder in /dev/shm (about 7x faster than a disk-backed /tmp). Logs:
#     target/fuzz-logs/TARGET.log; crash inputs: artifacts/TARGET/.
#
# Environment: FUZZ_RSS_MB (2048), FUZZ_TIMEOUT (10 s), FUZZ_MAX_LEN (16384), FUZZ_NICE (19),
# FUZZ_FRESH=1 (start from the seeds alone: empty corpus/TARGET first), WEFT_BUILD_LOCK (a file:
# the builds run under `flock` on it, for machines where builds must not overlap).
# A crash reproduces with `target/x86_64-unknown-linux-gnu/release/TARGET artifacts/TARGET/crash-...`.
set -euo pipefail
cd "$(dirname "$0")"

rss=${FUZZ_RSS_MB:-2048}
timeout=${FUZZ_TIMEOUT:-10}
max_len=${FUZZ_MAX_LEN:-16384}
niceness=${FUZZ_NICE:-19}
all=(read_vectors graph_file graph_file_crc index_load)

targets=()
runs=1000000
for a in "$@"; do
    case $a in
        all) targets+=("${all[@]}") ;;
        read_vectors | graph_file | graph_file_crc | index_load) targets+=("$a") ;;
        *[!0-9]*) echo "unknown target '$a' (one of: ${all[*]}, all)" >&2; exit 2 ;;
        *) runs=$a ;;
    esac
done
if [[ ${#targets[@]} -eq 0 ]]; then
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi

locked() {
    if [[ -n ${WEFT_BUILD_LOCK:-} ]]; then flock "$WEFT_BUILD_LOCK" "$@"; else "$@"; fi
}

locked cargo build --release --locked -q -p weft-fuzz-seedgen
rm -rf target/seeds
target/release/weft-fuzz-seedgen target/seeds > /dev/null
locked cargo +nightly fuzz build

bin=target/x86_64-unknown-linux-gnu/release
scratch_root=/dev/shm
[[ -d $scratch_root && -w $scratch_root ]] || scratch_root=${TMPDIR:-/tmp}
scratch=$(mktemp -d "$scratch_root/weft-fuzz.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
mkdir -p target/fuzz-logs

for t in "${targets[@]}"; do
    case $t in
        read_vectors) seeds=target/seeds/vectors ;;
        graph_file | graph_file_crc) seeds=target/seeds/graph ;;
        index_load) seeds=target/seeds/index ;;
    esac
    [[ ${FUZZ_FRESH:-0} == 1 ]] && rm -rf "corpus/$t"
    mkdir -p "corpus/$t" "artifacts/$t"
    cp -n "$seeds"/* "corpus/$t/"
    before=$(ls "artifacts/$t" | wc -l)
    log=target/fuzz-logs/$t.log
    start=$(date +%s)
    rc=0
    TMPDIR=$scratch RAYON_NUM_THREADS=1 WEFT_FUZZ_TALLY=1 nice -n "$niceness" "$bin/$t" "corpus/$t" \
        -runs="$runs" -rss_limit_mb="$rss" -timeout="$timeout" -max_len="$max_len" \
        -print_final_stats=1 -artifact_prefix="artifacts/$t/" > "$log" 2>&1 || rc=$?
    wall=$(( $(date +%s) - start ))
    crashes=$(( $(ls "artifacts/$t" | wc -l) - before ))
    executed=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    last=$(grep -E '^#[0-9]+' "$log" | tail -1)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<< "$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<< "$last")
    corp=$(sed -n 's/.* corp: \([0-9]*\/[0-9A-Za-z]*\).*/\1/p' <<< "$last")
    echo "$t: ${executed:-?} inputs in ${wall} s, cov ${cov:-?}, ft ${ft:-?}, corpus ${corp:-?}, crashes ${crashes}, exit ${rc} (log ${log})"
    # The tallies (weft_fuzz::Tally), printed at exit: how many inputs got how far.
    sed -n 's/^weft-fuzz tally: /  /p' "$log"
    [[ $rc -eq 0 ]] || exit "$rc"
done
