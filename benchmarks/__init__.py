"""The maintained benchmarks: side-by-side measurements printed as tables of ratios and
written as JSON (``--json-out``). Run one as ``python -m benchmarks.<name> --help``.

The package is installed with the project, so its analysis code (oracle picks, held-out
figures, summaries) is imported by the tests like any other module. It sits on the top
floor beside the CLI: it may import every library, and nothing imports it.
"""
