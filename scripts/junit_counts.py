"""Counts and names of a pytest junit XML file (used by compat-suites.sh).

`junit_counts.py FILE` prints `passed failed skipped`; `junit_counts.py --failed FILE` (or
`--passed`) prints those test ids, one a line (class::name), for the difference list.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET


def main(argv: list[str]) -> None:
    names = argv[0] if argv[0] in ("--failed", "--passed") else ""
    path = argv[-1]
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        if not names:
            print("0 0 0")
        return
    passed = failed = skipped = 0
    for case in root.iter("testcase"):
        kinds = {c.tag for c in case}
        if kinds & {"failure", "error"}:
            failed += 1
            if names == "--failed":
                print(f"{case.get('classname')}::{case.get('name')}")
        elif "skipped" in kinds:
            skipped += 1
        else:
            passed += 1
            if names == "--passed":
                print(f"{case.get('classname')}::{case.get('name')}")
    if not names:
        print(passed, failed, skipped)


if __name__ == "__main__":
    main(sys.argv[1:])
