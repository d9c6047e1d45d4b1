"""`python -m bertcore.tasks.demos [OUT_DIR]`: rewrite the demo task files (default assets/tasks/) from the corpus."""

from __future__ import annotations

import sys
from pathlib import Path

from bertcore.tasks.demos.files import write_demo_tasks


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    out_dir = Path(argv[0]) if argv else None
    for path in write_demo_tasks(out_dir):
        print(f"{path}  {path.stat().st_size / 1024:.1f} KB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
