"""`python -m explorer` runs the same entry point as the `bert-explorer` gui-script."""

from explorer.app import main

if __name__ == "__main__":
    raise SystemExit(main())
