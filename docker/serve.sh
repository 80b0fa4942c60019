#!/usr/bin/env bash
# Serve MODEL at MODEL_REVISION offline with SERVE_FLAGS, after writing the serving-facts file.
# The model is served from its snapshot folder (…/snapshots/<revision>) under its repository name,
# so vLLM's /v1/models `root` carries the revision the runner checks.
set -euo pipefail
snapshot="$(cat /models/snapshot-path)"
case "$snapshot" in */snapshots/"$MODEL_REVISION") ;; *) echo "serve: $snapshot is not revision $MODEL_REVISION" >&2; exit 2;; esac
mkdir -p "$(dirname "$SERVING_FACTS")"
python3 /usr/local/bin/poisson-serving-facts > "$SERVING_FACTS"
# SERVE_FLAGS is split the way serving_facts.py records it (shlex), so the two cannot disagree.
mapfile -t flags < <(python3 -c 'import os, shlex; print("\n".join(shlex.split(os.environ["SERVE_FLAGS"])))')
exec vllm serve "$snapshot" --served-model-name "$MODEL" --host 0.0.0.0 --port "$SERVE_PORT" "${flags[@]}"
