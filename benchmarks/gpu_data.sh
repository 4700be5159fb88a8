#!/usr/bin/env bash
# Copies what benchmarks/gpu_run.sh and cpu_isa_run.sh read into DIR (default .gpu-data,
# git-ignored): the lent GPU machine cannot see ../shared. About 23 MB; name DIR in the device
# call's `carry`.
#   benchmarks/gpu_data.sh [DIR] [SHARED]
set -euo pipefail
dir=${1:-.gpu-data}
shared=${2:-${ELMO_SHARED:-$(dirname "$0")/../../shared}}
wt2=$shared/data/wikitext-2
mkdir -p "$dir/en-extra" "$dir/fixtures" "$dir/bench"
cp "$shared"/bench/*.txt "$dir/bench/"
cp "$wt2/train.txt.gz" "$wt2/valid.txt" "$wt2/test.txt" "$dir/"
cp "$shared"/data/en-extra/*.train.txt.gz "$dir/en-extra/"
mkdir -p "$dir/conll2003" "$dir/msra-ner"  # benchmarks/elmo_vs_bert.py's workloads
cp "$shared"/data/conll2003/eng.{train,testb} "$dir/conll2003/"
cp "$shared"/data/msra-ner/msra_{test_bio,train_bio.gz} "$dir/msra-ner/"
for fixture in bilm-tf_tests_fixtures/model allennlp_test_fixtures_elmo; do
    mkdir -p "$dir/fixtures/$fixture"
    cp -r "$shared/fixtures/bilm-tf/$fixture/." "$dir/fixtures/$fixture/"
done
chmod -R u+w "$dir"
du -sh "$dir"
