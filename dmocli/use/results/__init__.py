"""Typed results of the after-training commands: each command's library function returns a frozen record whose
`to_dict()` is its JSON report (docs/report-schema.md) and whose `lines()` are its summary, so the command line
reads attributes, never a report's keys (tests/architecture/test_no_key_reads.py), and the report's shape is
written once, in the types, which tests/use/test_result_schema.py checks against dmocli/schema/report.schema.json.
"""
