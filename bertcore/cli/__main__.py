"""`python -m bertcore.cli` is `bert-train` (as `torchrun -m bertcore.cli` has always run it)."""

from bertcore.cli.train import main

if __name__ == "__main__":
    raise SystemExit(main())
