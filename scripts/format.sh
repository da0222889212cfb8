#!/usr/bin/env bash
# Checks (check) or applies (fix) .clang-format to every C++ source in the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:-check}
mapfile -t files < <(git ls-files --cached --others --exclude-standard -- 'src/*' 'tests/*' 'tools/*' 'bench/*' \
  | grep -E '\.(h|hpp|cc|cpp)$' || true)
[ ${#files[@]} -eq 0 ] && exit 0
if [ "$mode" = fix ]; then
  clang-format -i "${files[@]}"
else
  if ! clang-format --dry-run --Werror "${files[@]}" 2>/tmp/keel-format.log; then
    grep -E '^[^ ].*error:' /tmp/keel-format.log | cut -d: -f1 | sort -u | sed 's/^/unformatted: /' >&2
    echo "format check failed: run 'make format'" >&2
    exit 1
  fi
fi
