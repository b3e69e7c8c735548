#!/usr/bin/env bash
# Seed corpora for the fuzz harnesses, generated from the bundled scenarios:
#   OUT/scenario and OUT/run: every scenarios/*.json as it is;
#   OUT/statement:            every statement of every scenario, one file each;
#   OUT/report:               the golden JSON reports in tests/golden/.
# Usage: fuzz/make-corpus.sh [OUT]   (default: build-fuzz/corpus)
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build-fuzz/corpus}"
mkdir -p "$out/scenario" "$out/run" "$out/statement" "$out/report"
cp tests/golden/*.json "$out/report/"
for f in scenarios/*.json; do
  cp "$f" "$out/scenario/"
  cp "$f" "$out/run/"
done
python3 - "$out/statement" scenarios/*.json <<'PY'
import hashlib, json, sys
out, files = sys.argv[1], sys.argv[2:]
def walk(items):
    for it in items:
        if isinstance(it, str):
            yield it
        elif isinstance(it, dict):
            for v in it.values():
                if isinstance(v, list):
                    yield from walk(v)
n = 0
for f in files:
    with open(f, encoding="utf-8") as fh:
        doc = json.load(fh)
    for stmt in walk(doc.get("program", [])):
        data = stmt.encode("utf-8")
        with open(f"{out}/{hashlib.sha1(data).hexdigest()}", "wb") as fh:
            fh.write(data)
        n += 1
print(f"{n} statements", file=sys.stderr)
PY
echo "corpus in $out: $(ls "$out/scenario" | wc -l) scenarios, $(ls "$out/statement" | wc -l) distinct statements"
