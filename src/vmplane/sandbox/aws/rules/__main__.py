"""`python -m vmplane.sandbox.aws.rules --markdown`: the README's table of AWS fidelity rules."""

from __future__ import annotations

import argparse

from vmplane.sandbox.aws.rules import RULES, markdown

parser = argparse.ArgumentParser(prog="python -m vmplane.sandbox.aws.rules")
parser.add_argument("--markdown", action="store_true", help="print the README's table")
args = parser.parse_args()
if args.markdown:
    print(markdown(), end="")
else:
    for rule in RULES:
        print(f"{rule.id}\t{rule.code}\t{rule.summary}")
