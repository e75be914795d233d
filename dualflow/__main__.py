"""The ``dualflow`` command line: ``dualflow bench ...``, ``dualflow cache info|clear|warm``."""

from __future__ import annotations

import sys
from collections.abc import Sequence

USAGE = (
    "usage: dualflow bench [--quick|--full] [--workloads a,b] [--out DIR]\n"
    "       dualflow cache info|clear|warm"
)


def main(argv: Sequence[str] | None = None) -> int:
    """Dispatch ``dualflow <subcommand>``.

    Example:
        >>> main(["--help"])
        usage: dualflow bench [--quick|--full] [--workloads a,b] [--out DIR]
               dualflow cache info|clear|warm
        0
    """
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if args else 2
    if args[0] == "bench":
        from dualflow.bench.cli import main as bench_main  # noqa: PLC0415 - only when asked

        return bench_main(args[1:])
    if args[0] == "cache":
        from dualflow.cache_cli import main as cache_main  # noqa: PLC0415

        return cache_main(args[1:])
    print(f"unknown command {args[0]!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
